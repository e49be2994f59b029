"""Scenario 2: Franka grasp stress test with the bronze rod (ICF paper XII-B), shortened (1.5 s of circle).
A gentle circle (1 Hz, 20 N grip) holds the rod with TAMSI and Lagged; a fast circle with a weak grip (4 Hz,
10 N: centripetal acceleration 0.03 m x (8 pi/s)^2 = 19 m/s^2) loses it and the time to failure is reported.
One run over ROS (the runner starts a real sim_node process, lock-step through ~/step): the in-process run's twin,
bit for bit; the engine variant and the failure in process."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from contact_sim_ros.scenarios.runner import run_scenario

REPO = Path(__file__).resolve().parents[2]
ROD_MASS = float(ET.parse(REPO / "urdf" / "objects" / "bronze_rod.urdf").getroot()
                 .find("link/inertial/mass").get("value"))
SHORT = dict(circle_duration=1.5)


def explain(r) -> str:
    return f"{r.engine}: {r.reason}\nnumbers: {r.numbers}\nnode output (tail):\n{r.node_output[-1500:]}"


GENTLE = {**SHORT, "circle_frequency": 1.0, "grip_force": 20.0}


def check_gentle(r):
    assert r.success, explain(r)
    assert r.numbers["held_mass_kg"] == pytest.approx(ROD_MASS, rel=0.05), explain(r)
    assert math.isinf(r.numbers["time_to_failure_s"])


@pytest.mark.parametrize("engine", ["tamsi", "lagged"])
def test_gentle_circle_holds_the_rod(engine):
    check_gentle(run_scenario("franka_rod", engine, params=GENTLE, transport="inprocess"))


@pytest.mark.process
def test_over_ros_the_gentle_circle_holds_the_rod_as_in_process_bit_for_bit(ros):
    """The gentle circle over ROS (a sim_node process, real DDS; `ros` only for the isolated ROS domain of
    conftest.py) holds the rod, and is the in-process run's twin: the same verdict and numbers, the joint states,
    grip forces and wrist loads logged bit for bit (lock-step determinism)."""
    r = run_scenario("franka_rod", "tamsi", params=GENTLE)
    check_gentle(r)
    twin = run_scenario("franka_rod", "tamsi", params=GENTLE, transport="inprocess")
    assert (twin.success, twin.reason) == (r.success, r.reason)
    timing = ("wall_time_s", "real_time_factor")
    assert {k: v for k, v in twin.numbers.items() if k not in timing} == \
        {k: v for k, v in r.numbers.items() if k not in timing}
    assert len(r.log["q"]) > 50
    for key in ("t", "q", "v", "grip", "load"):
        assert np.array_equal(twin.log[key], r.log[key]), key


def test_fast_circle_with_weak_grip_loses_the_rod_and_reports_when():
    r = run_scenario("franka_rod", "tamsi", params={**SHORT, "circle_frequency": 4.0, "grip_force": 10.0},
                     transport="inprocess")
    assert not r.success, explain(r)
    assert "slip" in r.reason and "into the 4 Hz circle" in r.reason, explain(r)
    assert 0.0 < r.numbers["time_to_failure_s"] < 1.5, explain(r)
