"""Thin mesh objects dropped onto each other settle without tripping the deep-interpenetration bound (issue 44,
"two thin mesh pieces dropped one onto the other trip the penetration check and pause").

Two square mesh plates 0.5 mm thick (trimesh boxes written to an OBJ, one convex piece each, 20 g), the lower lying
on the ground, the upper dropped from 5 cm above it (0.99 m/s at impact), turned 0.3 rad and offset so that its
corners overhang, at the node's default time step (1 ms). At impact the upper plate's edge sinks about as deep as
the plates are thick (the approach speed times the time step: the impact spins it, driving its edge down): TAMSI
0.50 mm on 0.5 mm plates, which the bound alone (1 x the thinner body's thickness) took for bodies passing through
each other and failed every later step (the node pauses). The bound now allows the last step's approach
(sim/penetration.py); a start state where the plates cross each other still fails with the reason.
"""

import numpy as np
import pytest
import trimesh

from contact_sim_ros.errors import ContactSimError
from contact_sim_ros.sim.penetration import start_overlap
from contact_sim_ros.sim.simulator import Simulator

THICKNESS = 0.5e-3          # m
SIDE = 0.06                 # m
DROP = 0.05                 # m, the upper plate's fall before it touches the lower one
MASS = 0.02                 # kg per plate
DT = 1e-3                   # s, the node's default time step


@pytest.fixture(autouse=True)
def mesh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CONTACT_SIM_MESH_CACHE", str(tmp_path / "cache"))


def _plates(tmp_path, upper_pose):
    path = tmp_path / "plate.obj"
    trimesh.creation.box(extents=[SIDE, SIDE, THICKNESS]).export(path)
    return {"objects": [{"name": "lower", "mesh": str(path), "mass": MASS, "pose": {"xyz": [0, 0, THICKNESS / 2]}},
                        {"name": "upper", "mesh": str(path), "mass": MASS, "pose": upper_pose}],
            "environment": [{"name": "ground", "shape": "halfspace"}]}


@pytest.mark.parametrize("engine", ["tamsi", "semi_implicit", "sap"])
def test_a_thin_mesh_plate_dropped_on_another_settles_on_it_without_failing_a_step(tmp_path, engine):
    scene = _plates(tmp_path, {"xyz": [0.008, 0.004, 1.5 * THICKNESS + DROP], "rpy": [0, 0, 0.3]})
    sim = Simulator(scene, engine=engine, time_step=DT)
    assert sim.model.geometry_names == ("lower", "upper", "ground")
    assert sim._penetration.thickness[:2] == pytest.approx([THICKNESS, THICKNESS])
    deepest = 0.0                   # m, the plates' deepest contact over the run
    failed = []
    for _ in range(int(1.0 / DT)):
        report = sim.step()
        if not report.ok:
            failed.append(report.message)
            break
        c = sim.contacts
        plates = (np.minimum(c.geometry_a, c.geometry_b) == 0) & (np.maximum(c.geometry_a, c.geometry_b) == 1)
        if plates.any():
            deepest = max(deepest, -float(c.signed_distance[plates].min()))
    assert not failed, failed[0]
    if engine != "sap":
        # the impact's transient reached the plates' thickness: the bound alone would have failed the step
        assert deepest >= 0.9 * THICKNESS, deepest
    lower, upper = sim.body_pose("lower"), sim.body_pose("upper")
    # at rest, flat, the upper plate on the lower one: the gap between them within the engines' usual resting
    # penetration (m g / k, micrometres), far below the thickness
    gap = (upper.translation[2] - THICKNESS / 2) - (lower.translation[2] + THICKNESS / 2)
    assert abs(gap) < 0.05 * THICKNESS, gap
    assert abs(lower.translation[2] - THICKNESS / 2) < 0.05 * THICKNESS
    for pose in (lower, upper):
        assert pose.rotation[2, 2] > np.cos(1e-2)                     # lying flat (within 0.01 rad)
    # settled: the plates' centres at rest (TAMSI keeps a rocking of the upper plate about its long axis, flat
    # within the 0.01 rad above: ~0.5 rad/s, its edges moving by micrometres)
    assert np.abs(sim.v[[0, 1, 2, 6, 7, 8]]).max() < 1e-2, sim.v       # m/s


def test_plates_crossing_each_other_at_the_start_are_still_refused(tmp_path):
    """The upper plate stood up through the lower one (at rest: no approach to allow): the first step fails with
    the reason, as does start_overlap before it."""
    scene = _plates(tmp_path, {"xyz": [0, 0, THICKNESS / 2], "rpy": [np.pi / 2, 0, 0.3]})
    sim = Simulator(scene, engine="tamsi", time_step=DT)
    overlap = start_overlap(sim)
    assert overlap is not None and {overlap.link_a, overlap.link_b} == {"lower", "upper"}
    assert overlap.depth > THICKNESS and overlap.thickness == pytest.approx(THICKNESS)
    report = sim.step()
    assert not report.ok and report.message.startswith("deep interpenetration: ")
    assert "thickness of the thinner one" in report.message and "approach" not in report.message
    with pytest.raises(ContactSimError, match="interpenetration"):
        sim.run(0.01)
