"""Scenario 2 over ROS: Franka grasp stress test with the bronze rod (ICF paper XII-B), shortened (1.5 s of circle).
A gentle circle (1 Hz, 20 N grip) holds the rod with TAMSI and Lagged; a fast circle with a weak grip (4 Hz,
10 N: centripetal acceleration 0.03 m x (8 pi/s)^2 = 19 m/s^2) loses it and the time to failure is reported."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from contact_sim_ros.scenarios.runner import run_scenario

REPO = Path(__file__).resolve().parents[2]
ROD_MASS = float(ET.parse(REPO / "urdf" / "objects" / "bronze_rod.urdf").getroot()
                 .find("link/inertial/mass").get("value"))
SHORT = dict(circle_duration=1.5)


def explain(r) -> str:
    return f"{r.engine}: {r.reason}\nnumbers: {r.numbers}\nnode output (tail):\n{r.node_output[-1500:]}"


@pytest.mark.process
@pytest.mark.parametrize("engine", ["tamsi", "lagged"])
def test_gentle_circle_holds_the_rod(ros, engine):
    r = run_scenario("franka_rod", engine, params={**SHORT, "circle_frequency": 1.0, "grip_force": 20.0})
    assert r.success, explain(r)
    assert r.numbers["held_mass_kg"] == pytest.approx(ROD_MASS, rel=0.05), explain(r)
    assert math.isinf(r.numbers["time_to_failure_s"])


@pytest.mark.process
def test_fast_circle_with_weak_grip_loses_the_rod_and_reports_when(ros):
    r = run_scenario("franka_rod", "tamsi", params={**SHORT, "circle_frequency": 4.0, "grip_force": 10.0})
    assert not r.success, explain(r)
    assert "slip" in r.reason and "into the 4 Hz circle" in r.reason, explain(r)
    assert 0.0 < r.numbers["time_to_failure_s"] < 1.5, explain(r)
