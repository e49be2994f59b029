"""Jacobian IK of the scenario controllers (contact_sim_ros/clients/ik.py) on the iiwa_wsg URDF."""

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from contact_sim_ros.clients.ik import JacobianIK, interpolate_pose, joint_path, min_jerk
from contact_sim_ros.errors import ConfigError, ModelError

URDF = (Path(__file__).resolve().parents[1] / "urdf" / "iiwa_wsg.urdf").read_text()
ARM = [f"iiwa_joint_{i}" for i in range(1, 8)]
Q_HOME = np.array([0.0, 0.5, 0.0, -1.6, 0.0, 1.042, 0.0])


@pytest.fixture(scope="module")
def ik():
    return JacobianIK(URDF, "wsg_tcp", ARM)


def test_ik_reaches_a_pose_forward_kinematics_confirms(ik):
    home = ik.forward(Q_HOME)
    target = pin.SE3(home.rotation @ pin.exp3(np.array([0.0, 0.0, 0.4])), home.translation + [0.05, -0.12, -0.13])
    q, ok, err = ik.solve(target, Q_HOME)
    assert ok and err < 1e-6
    reached = ik.forward(q)
    np.testing.assert_allclose(reached.translation, target.translation, atol=1e-6)
    np.testing.assert_allclose(reached.rotation, target.rotation, atol=1e-6)
    assert np.all(q >= ik.lower) and np.all(q <= ik.upper)


def test_jacobian_matches_finite_differences_of_the_tool_position(ik):
    J = ik.jacobian(Q_HOME)
    eps = 1e-6
    p0 = ik.forward(Q_HOME).translation
    for i in range(7):
        dq = np.zeros(7)
        dq[i] = eps
        np.testing.assert_allclose((ik.forward(Q_HOME + dq).translation - p0) / eps, J[:3, i], atol=1e-5)


def test_unreachable_pose_names_the_pose(ik):
    far = pin.SE3(np.eye(3), np.array([2.0, 0.0, 0.5]))
    with pytest.raises(ConfigError, match=r"pose 0 at \[2.0, 0.0, 0.5\] m is unreachable"):
        joint_path(ik, [far], Q_HOME, what="test")


def test_bad_frame_or_joint_raises_model_error():
    with pytest.raises(ModelError, match="not in the URDF"):
        JacobianIK(URDF, "no_such_frame", ARM)
    with pytest.raises(ModelError, match="not in the URDF"):
        JacobianIK(URDF, "wsg_tcp", ["iiwa_joint_9"])


def test_min_jerk_path_starts_and_ends_at_rest(ik):
    s = np.linspace(0, 1, 201)
    x = min_jerk(s)
    assert x[0] == 0.0 and x[-1] == 1.0 and np.all(np.diff(x) >= 0)
    v = np.gradient(x, s)
    assert abs(v[0]) < 1e-3 and abs(v[-1]) < 1e-3 and v[100] == pytest.approx(1.875, rel=1e-3)
    a = ik.forward(Q_HOME)
    b = pin.SE3(a.rotation @ pin.exp3(np.array([0.0, 0.0, 1.0])), a.translation + 0.1)
    mid = interpolate_pose(a, b, 0.5)
    np.testing.assert_allclose(pin.log3(a.rotation.T @ mid.rotation), [0, 0, 0.5], atol=1e-12)
    qs = joint_path(ik, [interpolate_pose(a, b, si) for si in min_jerk(np.linspace(0, 1, 20))], Q_HOME)
    assert np.max(np.abs(np.diff(qs, axis=0))) < 0.2     # continuous joint path (warm-started)


def test_one_frame_placements_equal_frames_forward_kinematics_bit_for_bit(ik):
    """``forward`` and ``frame_pose`` update only the frame asked for (forwardKinematics + updateFramePlacement):
    the same pose, bit for bit, as framesForwardKinematics computes for every frame; an unknown frame is an error."""
    rng = np.random.default_rng(5)
    frames = ["wsg_tcp", "iiwa_ft_sensor", "iiwa_link_3"]
    for _ in range(50):
        q_arm = rng.uniform(ik.lower, ik.upper)
        q = ik.q_full.copy()
        q[ik.iq] = q_arm
        data = pin.Data(ik.model)
        pin.framesForwardKinematics(ik.model, data, q)
        assert ik.forward(q_arm).homogeneous.tobytes() == data.oMf[ik.frame].homogeneous.tobytes()
        for name in frames:
            expected = data.oMf[ik.model.getFrameId(name)].homogeneous
            assert ik.frame_pose(name, q).homogeneous.tobytes() == expected.tobytes()
    with pytest.raises(ModelError, match="no frame 'nowhere'"):
        ik.frame_pose("nowhere", ik.q_full)


def test_gripper_measurements_mean_is_numpys_bit_for_bit():
    """The mean of a few finger values (robot_link._mean, a sum from +0.0 then a division) is float(np.mean(...)),
    bit for bit, signed zeros included."""
    from contact_sim_ros.clients.link_messages import mean_of as _mean
    rng = np.random.default_rng(6)
    for n in range(1, 11):
        for _ in range(2000):
            v = rng.normal(size=n) * 10.0 ** rng.integers(-8, 8, size=n)
            if rng.random() < 0.1:
                v[rng.integers(n)] = -0.0
            if rng.random() < 0.05:
                v[:] = -0.0
            assert np.float64(_mean(v.tolist())).tobytes() == np.float64(np.mean(v)).tobytes()


def test_interpolate_poses_is_interpolate_pose_bit_for_bit(ik):
    """interpolate_poses (the log and the difference once per path) gives interpolate_pose's poses, bit for bit."""
    from contact_sim_ros.clients.ik import interpolate_poses
    rng = np.random.default_rng(8)
    for _ in range(20):
        a = ik.forward(rng.uniform(ik.lower, ik.upper))
        b = ik.forward(rng.uniform(ik.lower, ik.upper))
        s = min_jerk(np.arange(1, 26) / 25)
        for got, si in zip(interpolate_poses(a, b, s), s):
            assert got.homogeneous.tobytes() == interpolate_pose(a, b, si).homogeneous.tobytes()


def test_solve_is_memoised_per_process_bit_for_bit_on_the_tips_support_configuration():
    from contact_sim_ros.clients import ik as ik_module
    a, b = JacobianIK(URDF, "wsg_tcp", ARM), JacobianIK(URDF, "wsg_tcp", ARM)     # two trials' solvers
    home = a.forward(Q_HOME)
    target = pin.SE3(home.rotation, home.translation + [0.03, 0.02, -0.05])
    ik_module.SOLVE_MEMO.clear()
    q1, ok1, err1 = a.solve(target, Q_HOME)
    assert ok1 and len(ik_module.SOLVE_MEMO) == 1
    q1[:] = 0.0                                   # the caller's array is its own: the memo keeps its copy
    q2, ok2, err2 = b.solve(target, Q_HOME)
    assert len(ik_module.SOLVE_MEMO) == 1         # a hit from another solver of the same URDF and settings
    ik_module.SOLVE_MEMO.clear()
    q3, ok3, err3 = b.solve(target, Q_HOME)       # computed again
    assert q2.tobytes() == q3.tobytes() and (ok2, err2) == (ok3, err3) and np.any(q2 != 0.0)
    # a joint that does not move the tip (a finger) leaves the result alone: the same entry
    full = b.q_full.copy()
    full[[b.model.joints[b.model.getJointId(j)].idx_q for j in ("wsg_finger_left_joint",)]] = 0.01
    q4, _, err4 = b.solve(target, Q_HOME, full)
    assert q4.tobytes() == q3.tobytes() and err4 == err3 and len(ik_module.SOLVE_MEMO) == 1
    # another start, another target or other settings: computed, not looked up
    b.solve(target, Q_HOME + 0.01)
    b.solve(pin.SE3(home.rotation, home.translation + [0.0, 0.0, -0.05]), Q_HOME)
    c = JacobianIK(URDF, "wsg_tcp", ARM, tolerance=1e-3)
    q5, ok5, err5 = c.solve(target, Q_HOME)
    assert len(ik_module.SOLVE_MEMO) == 4 and ok5 and err5 < 1e-3
