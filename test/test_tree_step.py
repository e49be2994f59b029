"""The whole TAMSI step of a tree in one compiled call (contact_sim_ros/sim/tree_step.py, issue 45 item 2).

The C-ABI bridge: the numba-called Pinocchio calls (rigid_body_dynamics.cpp's C entry points) equal the
Boost.Python methods and the pin.* calls bit for bit on a revolute arm, a prismatic / planar model, a free flyer
carrying every joint kind and a hand with mimic joints. The fused step: the same trajectories as the staged step
bit for bit."""

import numpy as np
import pinocchio as pin
import pytest

from contact_sim_ros.native_build import RIGID_BODY
from contact_sim_ros.sim import tree_step
from test_pair_bounds import _every_joint_kind, _random_q, _robot_near_objects


def _planar_model():
    """A planar joint (x, y, theta) carrying a prismatic z joint and a revolute joint, offset and rotated."""
    pm = pin.Model()
    base = pm.addJoint(0, pin.JointModelPlanar(), pin.SE3(pin.rpy.rpyToMatrix(0.1, -0.2, 0.3), np.array([0.1, 0, 0.2])),
                       "planar")
    pm.appendBodyToJoint(base, pin.Inertia.FromBox(0.33, 0.1, 0.1, 0.02), pin.SE3.Identity())
    lift = pm.addJoint(base, pin.JointModelPZ(), pin.SE3(np.eye(3), np.array([0.0, 0.05, 0.0])), "lift")
    pm.appendBodyToJoint(lift, pin.Inertia.FromSphere(0.2, 0.03), pin.SE3.Identity())
    arm = pm.addJoint(lift, pin.JointModelRY(), pin.SE3(np.eye(3), np.array([0.1, 0.0, 0.0])), "arm")
    pm.appendBodyToJoint(arm, pin.Inertia.FromCylinder(0.5, 0.02, 0.3), pin.SE3.Identity())
    return pm


MODELS = {"revolute (iiwa + WSG)": lambda: _robot_near_objects("iiwa_wsg").pin_model,
          "prismatic + planar": _planar_model,
          "free flyer + every joint kind": lambda: _every_joint_kind().pin_model,
          "mimic (BarrettHand)": lambda: _robot_near_objects("barrett").pin_model}


@pytest.mark.parametrize("name", list(MODELS))
def test_the_numba_called_pinocchio_calls_equal_the_boost_ones(name):
    """At random states, through the C entry points from compiled code: M (WORLD), nle, g, the position error,
    pin.integrate, the joint placements and Jacobians of forwardKinematics + computeJointJacobians, equal the
    Boost.Python methods' and the pin.* calls' bit for bit (a mimic model's J has its extended columns)."""
    pm = MODELS[name]()
    module = RIGID_BODY.load()
    assert module is not None, "the warm-up builds rigid_body_dynamics.cpp"
    functions = np.array(module.c_functions(), dtype=np.int64)
    rng = np.random.default_rng(11)
    data, boost_data, ref = pin.Data(pm), pin.Data(pm), pin.Data(pm)
    nv, nq = pm.nv, pm.nq
    M, nle, g, error = np.zeros((nv, nv)), np.zeros(nv), np.zeros(nv), np.zeros(nv)
    rigid = module.RigidBodyDynamics(pm, data, M, nle, g)
    bM, bnle, bg, berror = np.zeros((nv, nv)), np.zeros(nv), np.zeros(nv), np.zeros(nv)
    boost = module.RigidBodyDynamics(pm, boost_data, bM, bnle, bg)
    handle = rigid.handle()
    joints = np.arange(1, pm.njoints, dtype=np.int64)
    slots = joints[::-1] - 1                       # any slot order
    J = np.full((6, rigid.jacobian_columns()), np.nan)
    placement = np.full((len(joints), 4, 4), np.nan)
    moved = 0.0
    for _ in range(15):
        q, target = _random_q(pm, rng), _random_q(pm, rng)
        v, dt = rng.normal(0.0, 2.0, nv), float(rng.uniform(1e-4, 1e-2))
        M[:], nle[:], g[:], error[:] = np.nan, np.nan, np.nan, np.nan
        assert tree_step.rbd_dynamics(functions, handle, q, v, target, M, nle, g, error, True) == 0
        boost.dynamics(q, v, target, berror, True)
        for a, b in ((M, bM), (nle, bnle), (g, bg), (error, berror)):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(M, pin.crba(pm, ref, q, pin.Convention.WORLD))
        np.testing.assert_array_equal(nle, pin.nonLinearEffects(pm, ref, q, v))
        np.testing.assert_array_equal(g, pin.computeGeneralizedGravity(pm, ref, q))
        np.testing.assert_array_equal(error, pin.difference(pm, q, target))
        q_next, b_next = np.full(nq, np.nan), np.empty(nq)
        tree_step.rbd_integrate(functions, handle, q, v, dt, q_next)
        boost.integrate(q, v, dt, b_next)
        np.testing.assert_array_equal(q_next, b_next)
        np.testing.assert_array_equal(q_next, pin.integrate(pm, q, dt * v))
        moved = max(moved, float(np.abs(q_next - q).max()))
        tree_step.rbd_kinematics(functions, handle, q, v)
        tree_step.rbd_read_kinematics(functions, handle, J, placement, joints, slots)
        pin.forwardKinematics(pm, ref, q, v)
        pin.computeJointJacobians(pm, ref)
        np.testing.assert_array_equal(J, ref.J)
        np.testing.assert_array_equal(data.J, ref.J)
        for j, s in zip(joints, slots):
            np.testing.assert_array_equal(placement[s], ref.oMi[int(j)].homogeneous)
            np.testing.assert_array_equal(data.v[int(j)].vector, ref.v[int(j)].vector)
    assert np.abs(M).max() > 0 and np.abs(nle).max() > 0 and np.abs(error).max() > 0 and moved > 0
    if name.startswith("mimic"):
        assert J.shape[1] > nv            # the mimic joints' own columns (nvExtended)
