"""Command validation and trajectory interpolation (pure functions, no DDS)."""

import numpy as np
import pytest

from contact_sim_ros.driver.command_validation import (CommandRejected, JointLimits, TrajectorySampler,
                                                    validate_group_command, validate_joint_state_command,
                                                    validate_trajectory)

LIMITS = JointLimits(("a", "b", "c"), np.array([-1.0, -2.0, 0.0]), np.array([1.0, 2.0, 0.05]),
                     np.array([2.0, 2.0, 0.1]), np.array([10.0, 10.0, 5.0]))


def kind_of(fn, *args, **kw):
    with pytest.raises(CommandRejected) as info:
        fn(*args, **kw)
    return info.value.kind, str(info.value)


def test_joint_state_command_by_name_reorders_and_clamps():
    cmd = validate_joint_state_command(LIMITS, ["c", "a"], position=[0.2, 0.5], velocity=[], effort=[-9.0, 30.0])
    np.testing.assert_array_equal(cmd.indices, [2, 0])
    np.testing.assert_array_equal(cmd.position, [0.05, 0.5])   # c clamped to its upper limit
    np.testing.assert_array_equal(cmd.effort, [-5.0, 10.0])    # both clamped to +-effort limit
    assert cmd.velocity is None
    assert len(cmd.clamped) == 3 and "'c'" in cmd.clamped[0]


@pytest.mark.parametrize("args, kind", [
    ((["a", "zz"], [0.0, 0.0]), "unknown_joint"),
    ((["a", "b"], [0.0]), "wrong_length"),
    ((["a", "b"], [0.0, float("nan")]), "non_finite"),
    ((["a"], [float("inf")]), "non_finite"),
    (([], []), "empty"),
    ((["a"], []), "empty"),
    ((["a", "a"], [0.0, 0.1]), "duplicate_joint"),
])
def test_joint_state_command_rejections(args, kind):
    got, message = kind_of(validate_joint_state_command, LIMITS, *args)
    assert got == kind
    if kind == "unknown_joint":
        assert "valid joints: a, b, c" in message and "'zz'" in message


def test_group_command_interfaces():
    cmd = validate_group_command(LIMITS, ["a", "b"], [0.1, -3.0], "position")
    np.testing.assert_array_equal(cmd.position, [0.1, -2.0])
    cmd = validate_group_command(LIMITS, ["a", "b"], [0.1, -3.0], "velocity")
    np.testing.assert_array_equal(cmd.velocity, [0.1, -2.0])
    assert cmd.position is None
    assert kind_of(validate_group_command, LIMITS, ["a", "b"], [0.1], "effort")[0] == "wrong_length"
    assert kind_of(validate_group_command, LIMITS, ["a", "b"], [], "effort")[0] == "empty"
    assert kind_of(validate_group_command, LIMITS, ["a", "b"], [0.0, np.nan], "effort")[0] == "non_finite"


def test_trajectory_validation():
    traj = validate_trajectory(LIMITS, ["b"], [0.5, 1.0], [[0.3], [5.0]])
    np.testing.assert_array_equal(traj.positions[:, 0], [0.3, 2.0])
    assert traj.velocities is None and traj.clamped
    assert kind_of(validate_trajectory, LIMITS, ["b"], [1.0, 1.0], [[0.0], [0.1]])[0] == "bad_trajectory"
    assert kind_of(validate_trajectory, LIMITS, ["b"], [], [])[0] == "empty"
    assert kind_of(validate_trajectory, LIMITS, ["b"], [1.0], [[0.0, 1.0]])[0] == "wrong_length"
    assert kind_of(validate_trajectory, LIMITS, ["q"], [1.0], [[0.0]])[0] == "unknown_joint"
    assert kind_of(validate_trajectory, LIMITS, ["b"], [1.0, 2.0], [[0.0], [0.1]],
                   velocities=[[0.0], []])[0] == "wrong_length"


def test_linear_sampler_follows_timing():
    traj = validate_trajectory(LIMITS, ["a", "b"], [1.0, 3.0], [[0.5, 1.0], [0.0, -1.0]])
    s = TrajectorySampler(traj, start_time=10.0, q0=np.array([0.0, 0.0]), v0=np.zeros(2))
    pos, vel, done = s.sample(10.5)
    np.testing.assert_allclose(pos, [0.25, 0.5])
    np.testing.assert_allclose(vel, [0.5, 1.0])
    pos, vel, done = s.sample(12.0)
    np.testing.assert_allclose(pos, [0.25, 0.0])
    np.testing.assert_allclose(vel, [-0.25, -1.0])
    assert not done
    pos, vel, done = s.sample(13.5)
    np.testing.assert_allclose(pos, [0.0, -1.0])
    np.testing.assert_allclose(vel, 0.0)
    assert done


def test_cubic_sampler_matches_endpoint_velocities_and_is_c1():
    traj = validate_trajectory(LIMITS, ["a"], [1.0, 2.0], [[0.5], [0.8]], velocities=[[0.6], [0.0]])
    s = TrajectorySampler(traj, start_time=0.0, q0=np.array([0.0]), v0=np.array([0.0]))
    for t, p, v in ((0.0, 0.0, 0.0), (1.0, 0.5, 0.6), (2.0, 0.8, 0.0)):
        pos, vel, _ = s.sample(t - 1e-12 if t > 0 else t)
        assert pos[0] == pytest.approx(p, abs=1e-9) and vel[0] == pytest.approx(v, abs=1e-9)
    # velocity is the derivative of position (central difference)
    h = 1e-6
    for t in (0.3, 1.4, 1.9):
        p1 = s.sample(t + h)[0][0]
        p0 = s.sample(t - h)[0][0]
        assert s.sample(t)[1][0] == pytest.approx((p1 - p0) / (2 * h), rel=1e-5, abs=1e-8)


def test_topic_based_nan_fields_and_mimic_echoes():
    """topic_based_ros2_control writes NaN into every interface no controller commands: an all-NaN field next
    to a commanded one is ignored; a mimic joint echoed back in a full joint-state command is dropped."""
    limits = JointLimits(("a", "b"), np.array([-1.0, -1.0]), np.array([1.0, 1.0]), np.array([2.0, 2.0]),
                         np.array([5.0, 5.0]), frozenset({"b_mimic"}))
    nan = float("nan")
    cmd = validate_joint_state_command(limits, ["a", "b"], [0.1, 0.2], [nan, nan], [nan, nan])
    assert cmd.velocity is None and cmd.effort is None and cmd.position.tolist() == [0.1, 0.2]
    assert kind_of(validate_joint_state_command, limits, ["a", "b"], [0.1, nan], [nan, nan])[0] == "non_finite"
    assert kind_of(validate_joint_state_command, limits, ["a"], [nan])[0] == "non_finite"
    cmd = validate_joint_state_command(limits, ["a", "b_mimic", "b"], [0.1, 0.5, 0.2])
    assert cmd.indices.tolist() == [0, 1] and cmd.position.tolist() == [0.1, 0.2]
    assert kind_of(validate_joint_state_command, limits, ["b_mimic"], [0.5])[0] == "empty"


def test_a_name_list_found_valid_is_looked_up_and_bad_lists_are_still_rejected():
    limits = JointLimits(("a", "b", "c"), LIMITS.lower, LIMITS.upper, LIMITS.velocity, LIMITS.effort)
    first = limits.indices(["c", "a"], "x")
    first[:] = 99                                            # the caller's own array: the lookup keeps its copy
    np.testing.assert_array_equal(limits.indices(("c", "a"), "x"), [2, 0])
    np.testing.assert_array_equal(limits.indices(["c", "a"], "x"), [2, 0])
    assert kind_of(limits.indices, ["c", "zz"], "src")[0] == "unknown_joint"
    assert kind_of(limits.indices, ["c", "c"], "src") == ("duplicate_joint",
                                                          "src: joint(s) ['c'] listed more than once")
    # the trajectory after a good one of the same joints: each point checked and clamped as before
    ok = validate_trajectory(limits, ["c", "a"], [0.5, 1.0], [[0.01, 0.5], [0.2, 0.1]], source="t")
    np.testing.assert_array_equal(ok.positions, [[0.01, 0.5], [0.05, 0.1]])
    assert ok.clamped == ["point 1 position 0.2 of joint 'c' clamped to [0, 0.05]"]
    assert kind_of(validate_trajectory, limits, ["c", "a"], [0.5, 0.5], [[0.0, 0.0]] * 2, source="t")[0] == \
        "bad_trajectory"
    assert kind_of(validate_trajectory, limits, ["c", "a"], [0.5, float("nan")], [[0.0, 0.0]] * 2)[0] == "non_finite"
    assert kind_of(validate_trajectory, limits, ["c", "a"], [0.5], [[0.0, float("inf")]])[0] == "non_finite"
    assert kind_of(validate_trajectory, limits, ["c", "a"], [-0.1, 0.5], [[0.0, 0.0]] * 2)[0] == "bad_trajectory"
