"""The compiled narrow phase (contact_sim_ros/geometry/narrow_phase.cpp) against the Python loop it replaces:
the same coal calls, so the same contacts bit for bit, in single queries and along a whole grasp trial."""

import numpy as np
import pinocchio as pin
import pytest

from contact_sim_ros.native_build import NARROW_PHASE
from contact_sim_ros.geometry.contact_query import ContactQuery
from contact_sim_ros.scenarios.campaign import load_campaign, run_trial
from contact_sim_ros.resources import share_dir
from model_builders import pose
from test_pair_bounds import MARGIN, _fields, _random_q, _robot_near_objects

# what a row of a trial holds that is not physics (timing, the process)
_NOT_PHYSICS = ("wall_time_s", "cpu_time_s", "worker_pid", "worker_rss_mb", "n.wall_time_s", "n.real_time_factor")


def test_the_set_up_built_it_and_the_query_uses_it():
    """The project's set-up (the warm-up) built the module of the current source; a query with the broad phase
    and the compiled kernels takes it, the Python loop only when asked."""
    assert NARROW_PHASE.library_path().exists(), NARROW_PHASE.library_path()
    assert NARROW_PHASE.load() is not None
    model = _robot_near_objects("iiwa_wsg")
    assert ContactQuery(model, MARGIN, broad_phase=True)._native is not None
    assert ContactQuery(model, MARGIN, broad_phase=True, compiled_narrow_phase=False)._native is None
    assert ContactQuery(model, MARGIN, broad_phase=True, kernel="numpy")._native is None


@pytest.mark.parametrize("max_patch_points", [8, 3])
@pytest.mark.parametrize("robot", ["iiwa_wsg", None])
def test_same_contacts_as_the_python_loop(robot, max_patch_points):
    """Random configurations of a robot and of a brick, a can (a cylinder: its pairs stored swapped) and a ball
    over a table on the ground: the compiled and the Python narrow phase give bit-identical contact sets, with
    every kind of row among them: one-point contacts, patches, the ground's unbounded pairs, and patches of more
    points than max_patch_points (spread subsets, with 3)."""
    model = _robot_near_objects(robot)
    pm = model.pin_model
    rng = np.random.default_rng(11)
    data = pm.createData()
    seen = {"single": 0, "patch": 0, "spread": 0, "ground": 0}
    for _ in range(50):
        q = _random_q(pm, rng) if robot else pin.neutral(pm)
        for k, (body, z) in enumerate((("brick", 0.25), ("can", 0.27), ("ball", 0.23))):
            xyz = rng.uniform([0.3, -0.25, z - 0.1], [0.7, 0.25, z + 0.05])
            if rng.random() < 0.3:                 # on the ground next to the table
                xyz = [0.0, 0.5 + 0.2 * k, z - 0.2]
            q[model.free_body(body).q_slice] = pin.SE3ToXYZQUAT(pose(xyz, rng.uniform(-1, 1, 3) * rng.integers(2)))
        pin.forwardKinematics(pm, data, q)
        pin.computeJointJacobians(pm, data)
        compiled = ContactQuery(model, MARGIN, broad_phase=True, max_patch_points=max_patch_points)
        python = ContactQuery(model, MARGIN, broad_phase=True, max_patch_points=max_patch_points,
                              compiled_narrow_phase=False)
        assert compiled._native is not None and python._native is None
        a = _fields(python.update(data, joint_jacobians=True, q=q))
        b = _fields(compiled.update(data, joint_jacobians=True, q=q))
        assert a.keys() == b.keys()
        for f in a:
            np.testing.assert_array_equal(a[f], b[f], err_msg=f)
        assert python.stats == compiled.stats
        _, counts = np.unique(np.stack([a["geometry_a"], a["geometry_b"]]), axis=1, return_counts=True)
        seen["single"] += int((counts == 1).sum())
        seen["patch"] += int((counts > 1).sum())
        seen["spread"] += int((counts == max_patch_points).sum()) if max_patch_points == 3 else 0
        ground = model.geometry_names.index("ground")
        seen["ground"] += int(((a["geometry_a"] == ground) | (a["geometry_b"] == ground)).sum())
    assert seen["single"] > 10 and seen["patch"] > 10 and seen["ground"] > 5, seen
    assert seen["spread"] > 5 or max_patch_points != 3, seen


def test_same_grasp_trial_as_the_python_loop():
    """A trial of the grasp-validation campaign (pick, shake, place the bottle with the iiwa + WSG: patches
    between the fingers and the bottle, the bottle on the ground, coal's warm starts carried from step to step)
    gives the same row, every number bit for bit, with the compiled narrow phase and with the Python loop."""
    spec = load_campaign(str(share_dir() / "scenes" / "campaigns" / "pick_shake_place.yaml"))
    spec = type(spec)(**{**spec.__dict__, "engines": ("tamsi",)})
    rows = []
    for module in (NARROW_PHASE.load(), None):
        saved = NARROW_PHASE._loaded.get("module")
        NARROW_PHASE._loaded["module"] = module
        try:
            rows.append({k: v for k, v in run_trial(spec, 3, "tamsi").items() if k not in _NOT_PHYSICS})
        finally:
            NARROW_PHASE._loaded["module"] = saved
    assert rows[0]["success"] and rows[0]["n.held_load_N"] > 1.0, rows[0]     # the bottle was held by its patches
    assert rows[0] == rows[1]


def test_same_clutter_contacts_as_the_python_loop():
    """The 40-object clutter settling in its box (scenes/icf_clutter.yaml): the compiled narrow phase's broad
    phase holds only the geometries of coal's pairs (the 20 boxes and 4 walls; the spheres' and the ground's pairs
    are the query's compiled ones), placed by its own light update; along the trajectory it reports the same
    candidate pairs (stats) and the same contacts, bit for bit, as the Python loop over Pinocchio's broad phase of
    every geometry, with box-box patches among them."""
    from contact_sim_ros.sim.simulator import Simulator
    sim = Simulator(str(share_dir() / "scenes" / "icf_clutter.yaml"), engine="similar", time_step=2e-3)
    model, pm = sim.model, sim.model.pin_model
    compiled = ContactQuery(model, sim.scene.contact_margin, broad_phase=True)
    python = ContactQuery(model, sim.scene.contact_margin, broad_phase=True, compiled_narrow_phase=False)
    assert compiled._native is not None and python._native is None
    assert len(compiled._broad.getCollisionObjects()) == len(model.geometry_names) == 45
    data = pm.createData()
    coal_pairs = {tuple(p) for p in python.pairs[python.coal_pairs].tolist()}
    box_box = candidates = 0
    for step in range(300):
        sim.step()
        if step % 10:
            continue
        pin.forwardKinematics(pm, data, sim.q)
        pin.computeJointJacobians(pm, data)
        a = _fields(python.update(data, joint_jacobians=True, q=sim.q))
        b = _fields(compiled.update(data, joint_jacobians=True, q=sim.q))
        assert a.keys() == b.keys()
        for f in a:
            np.testing.assert_array_equal(a[f], b[f], err_msg=f"{f} at step {step}")
        assert python.stats == compiled.stats, step
        candidates = max(candidates, python.stats["candidate_pairs"] - (len(python._always_pairs) + python._sp_pairs))
        box_box += sum((ga, gb) in coal_pairs for ga, gb in zip(a["geometry_a"].tolist(), a["geometry_b"].tolist()))
    assert candidates > 5 and box_box > 20, (candidates, box_box)
