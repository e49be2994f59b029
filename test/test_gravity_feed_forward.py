"""The gravity feed-forward of the actuated joints (sim/gravity_feed_forward.py) on the robots alone: the same
g(q) as Pinocchio's on the whole world (robots + free objects), computed on a robot-sized model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from contact_sim_ros.sim.gravity_feed_forward import GravityFeedForward
from contact_sim_ros.sim.scene import load_scene

SCENES = Path(__file__).resolve().parents[1] / "scenes"
GROUND = [{"name": "ground", "shape": "halfspace"}]
OBJECTS = [{"name": f"block_{i}", "shape": {"box": [0.05, 0.05, 0.05]}, "mass": 0.3,
            "pose": {"xyz": [0.5 + 0.06 * i, 0.0, 0.03]}} for i in range(3)]


def _whole_world_gravity(model, data, q):
    return pin.computeGeneralizedGravity(model.pin_model, data, q)[model.joint_v_index]


@pytest.mark.parametrize("robot", ["iiwa_wsg", "franka", "allegro", "barrett"])
def test_robots_beside_free_objects_get_the_whole_worlds_gravity_on_a_robot_sized_model(robot):
    """Three free blocks beside each robot preset (mimic joints included: Panda and BarrettHand fingers): g of the
    actuated joints equals Pinocchio's on the whole model within round-off at random configurations, while the
    feed-forward's model has the robot's dofs only."""
    model = load_scene({"robot": robot, "objects": OBJECTS, "environment": GROUND}).model
    pm = model.pin_model
    ff = GravityFeedForward.of(model)
    assert ff.model.nv == pm.nv - 6 * len(OBJECTS) and ff.model.nq == pm.nq - 7 * len(OBJECTS)
    data, g = pin.Data(pm), np.empty(len(model.joint_names))
    rng = np.random.default_rng(7)
    scale = 0.0
    for _ in range(25):
        q = pin.randomConfiguration(pm)
        q[np.isnan(q)] = 0.0
        for b in model.free_bodies:                       # the blocks anywhere, turned anyhow
            iq = pm.joints[b.joint_id].idx_q
            q[iq:iq + 3] = rng.uniform(-1.0, 1.0, 3)
            quat = rng.normal(size=4)
            q[iq + 3:iq + 7] = quat / np.linalg.norm(quat)
        expected = _whole_world_gravity(model, data, q)
        np.testing.assert_allclose(ff.compute(q, g), expected, rtol=0.0, atol=1e-12)
        scale = max(scale, np.abs(expected).max())
    assert scale > 0.05               # not all zero: the links' weight is in it (N m or N; a hand's fingers ~0.08)


def test_a_robot_without_free_objects_uses_its_own_model_bit_for_bit():
    model = load_scene({"robot": "iiwa_wsg", "environment": GROUND}).model
    ff = GravityFeedForward.of(model)
    assert ff.model is model.pin_model
    data, g = pin.Data(model.pin_model), np.empty(len(model.joint_names))
    for _ in range(10):
        q = pin.randomConfiguration(model.pin_model)
        np.testing.assert_array_equal(ff.compute(q, g), _whole_world_gravity(model, data, q))


def test_two_arms_and_their_object_and_a_world_of_objects_alone():
    """Two iiwa arms handing over a box (one model, two robots): both arms' g on a model without the box; a scene of
    free objects only has nothing to hold."""
    model = load_scene(SCENES / "two_iiwa_handover.yaml").model
    pm = model.pin_model
    ff = GravityFeedForward.of(model)
    assert ff.model.nv == pm.nv - 6 * len(model.free_bodies) and len(model.free_bodies) >= 1
    data, g = pin.Data(pm), np.empty(len(model.joint_names))
    for _ in range(10):
        q = pin.randomConfiguration(pm)
        np.testing.assert_allclose(ff.compute(q, g), _whole_world_gravity(model, data, q), rtol=0.0, atol=1e-12)
    assert GravityFeedForward.of(load_scene(SCENES / "icf_clutter.yaml").model) is None


HINGED_BOX = """<robot name="hinged_box">
  <link name="base"><inertial><mass value="0.5"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/>
    </inertial><collision><geometry><box size="0.1 0.1 0.05"/></geometry></collision></link>
  <link name="lid"><inertial><origin xyz="0.05 0 0"/><mass value="0.1"/>
    <inertia ixx="1e-4" iyy="1e-4" izz="1e-4" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="lid_hinge" type="revolute"><parent link="base"/><child link="lid"/><origin xyz="-0.05 0 0.025"/>
    <axis xyz="0 1 0"/><limit lower="0" upper="2" effort="1" velocity="1"/></joint>
</robot>"""


def test_an_object_with_a_joint_of_its_own_keeps_its_free_flyer():
    """A free-floating box with a hinged lid beside the iiwa: the lid's g depends on how the box is turned, so the
    box keeps its free flyer (a plain block beside it is locked away) and the lid's and the arm's g are exact."""
    model = load_scene({"robot": "iiwa_wsg", "environment": GROUND,
                        "objects": [{"name": "box", "urdf": HINGED_BOX, "pose": {"xyz": [0.6, 0.0, 0.05]}},
                                    OBJECTS[0]]}).model
    pm = model.pin_model
    assert "lid_hinge" in model.joint_names
    ff = GravityFeedForward.of(model)
    assert ff.model.nv == pm.nv - 6                          # the block only
    data, g = pin.Data(pm), np.empty(len(model.joint_names))
    lid = model.joint_names.index("lid_hinge")
    rng = np.random.default_rng(3)
    lid_torques = []
    for _ in range(20):
        q = pin.randomConfiguration(pm)
        q[np.isnan(q)] = 0.0
        for b in model.free_bodies:
            iq = pm.joints[b.joint_id].idx_q
            quat = rng.normal(size=4)
            q[iq:iq + 3], q[iq + 3:iq + 7] = rng.uniform(-1.0, 1.0, 3), quat / np.linalg.norm(quat)
        expected = _whole_world_gravity(model, data, q)
        np.testing.assert_allclose(ff.compute(q, g), expected, rtol=0.0, atol=1e-12)
        lid_torques.append(expected[lid])
    assert np.ptp(lid_torques) > 0.01                        # N m: it does change with the box's orientation
