"""Scenario 4 over ROS: BarrettHand (fingers down on a lift stage) closes on the bottle (cylinder) and on a box,
lifts 10 cm and reports the grasp force per finger, with TAMSI and Lagged at the scenario's 2 ms step (real node
subprocess through the scenario runner; the controller sees only joint states, external joint torques and the
per-link contact wrenches). The stage's held load is the object's weight; F1 and F2 press equally (mirror grasp).
A hand that barely closes (proximal target 0.1 rad: the pads only graze the bottle) does not lift it, and the
controller reports the slip from the stage's load."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yaml

from contact_sim_ros.scenarios.runner import run_scenario

REPO = Path(__file__).resolve().parents[2]
G = 9.81
LIFT = 0.10          # m, HandGraspParams.lift_height


def _scene_object(name):
    """(object name, mass kg, initial z m) of the scenario scene's single free object."""
    scene = yaml.safe_load((REPO / "scenes" / f"scenario_{name}.yaml").read_text())
    obj = scene["objects"][0]
    if "urdf" in obj:
        root = ET.parse(REPO / "urdf" / obj["urdf"]).getroot()
        mass = sum(float(link.find("inertial/mass").get("value")) for link in root.iter("link")
                   if link.find("inertial") is not None)
        frame = root.find("link").get("name")
    else:
        mass, frame = float(obj["mass"]), obj["name"]
    return frame, mass, float(obj["pose"]["xyz"][2])


def explain(r) -> str:
    return (f"{r.scenario} / {r.engine}: {r.reason}\nnumbers: {r.numbers}\nobject poses (tf): {r.object_poses}\n"
            f"node output (tail):\n{r.node_output[-1500:]}")


@pytest.mark.process
@pytest.mark.parametrize("engine", ["tamsi", "lagged"])
@pytest.mark.parametrize("scenario", ["barrett_cylinder", "barrett_box"])
def test_hand_grasps_lifts_and_reports_forces_per_finger(ros, scenario, engine):
    frame, mass, z0 = _scene_object(scenario)
    r = run_scenario(scenario, engine)
    assert r.success, explain(r)
    n = r.numbers
    # the stage carries the object's weight (the drop of the lift joint's external force) within 3 %
    assert n["held_mass_kg"] == pytest.approx(mass, rel=0.03), explain(r)
    forces = [n[f"finger_{k}_contact_force_N"] for k in (1, 2, 3)]
    assert min(forces) > 1.0, explain(r)                                   # every finger presses
    assert forces[0] == pytest.approx(forces[1], rel=0.05), explain(r)     # F1, F2 mirror images
    # friction carries the weight: the grasp forces exceed the weight shared by three fingers
    assert sum(forces) > mass * G, explain(r)
    assert {f"bh_finger_{k}_distal" for k in (1, 2, 3)} <= set(n["links_touching_after_close"].split(", "))
    if frame in r.object_poses:         # ground truth from /tf (needs tf2_msgs built from msgs/)
        assert r.object_poses[frame][2] - z0 == pytest.approx(LIFT, abs=0.01), explain(r)


@pytest.mark.process
def test_barely_closed_hand_does_not_lift_and_the_controller_reports_the_slip(ros):
    frame, mass, z0 = _scene_object("barrett_cylinder")
    r = run_scenario("barrett_cylinder", "tamsi", params={"close_angle": 0.1})
    assert not r.success, explain(r)
    assert r.reason.startswith("slip"), explain(r)
    assert r.numbers["held_load_N"] < 0.2 * mass * G, explain(r)
    if frame in r.object_poses:
        assert abs(r.object_poses[frame][2] - z0) < 0.01, explain(r)       # the bottle stayed on the ground


@pytest.mark.process
def test_same_run_twice_gives_bit_identical_joint_logs(ros):
    """Determinism (lock-step stepping): two runs of the box grasp through closing and the start of the lift
    (1.0 s) log the same joint positions and velocities and grasp forces, bit for bit."""
    a, b = (run_scenario("barrett_box", "tamsi", duration=1.0) for _ in range(2))
    assert len(a.log["q"]) == len(b.log["q"]) > 50
    for key in ("t", "q", "v", "grip", "load"):
        assert np.array_equal(a.log[key], b.log[key]), key
    assert set(a.log["phase"]) >= {"close", "lift"}
