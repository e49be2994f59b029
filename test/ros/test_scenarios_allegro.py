"""Scenario 3: Allegro open-loop periodic mug reorientation (TAMSI paper VI-B), shortened to one finger cycle (3 s:
the fingers flex fully and return). The mug is carried (over the cycle its mean net contact force is about its
0.98 N weight, never dropped) and turns relative to gravity, with TAMSI and Lagged: in process (transport
'inprocess'), and once over ROS (the runner starts a real sim_node process, lock-step through ~/step)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from contact_sim_ros.scenarios.runner import run_scenario

REPO = Path(__file__).resolve().parents[2]
MUG_MASS = sum(float(link.find("inertial/mass").get("value"))
               for link in ET.parse(REPO / "urdf" / "objects" / "mug.urdf").getroot().iter("link")
               if link.find("inertial") is not None)


def check_reorientation(r, engine):
    assert r.success, f"{engine}: {r.reason}\n{r.numbers}\n{r.node_output[-1500:]}"
    # carried: the net contact force on the mug is m (a - g); over a whole finger cycle the mug's acceleration
    # averages out and the mean is its weight (tilted gravity 9.81 m/s^2), within 15 %
    assert r.numbers["mean_contact_force_N"] == pytest.approx(MUG_MASS * 9.81, rel=0.15), r.numbers
    assert r.numbers["max_rotation_deg"] > 10.0, r.numbers


@pytest.mark.parametrize("engine", ["tamsi", "lagged"])
def test_open_loop_flexing_reorients_the_mug_without_dropping_it(engine):
    check_reorientation(run_scenario("allegro_mug", engine, params={"duration": 3.0}, transport="inprocess"), engine)


@pytest.mark.process
def test_over_ros_open_loop_flexing_reorients_the_mug_without_dropping_it(ros):
    """The same over ROS (a sim_node process, real DDS; `ros` only for the isolated ROS domain of conftest.py)."""
    check_reorientation(run_scenario("allegro_mug", "tamsi", params={"duration": 3.0}), "tamsi")
