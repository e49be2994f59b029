"""The emulated controllers in sim time, without DDS (as ros2_controllers tests its controllers): a two-joint arm
and a one-finger gripper (URDF below, no contacts) stepped update by update through the driver (hardware System,
controller manager, stepping loop on the caller's thread). Deterministic: no wall clock, no thread.

Covered: the joint_trajectory_controller's goal checks and error codes, path and goal tolerances, success,
preemption by a new goal, cancel (holds), a command on the joints aborting it; the gripper's stall (presses with
max_effort) and its goal checks; switch_controller's claims and strictness; parameter tables (a ``.nan``
tolerance refused, not emulated parameters listed)."""

import gc
import math
import tracemalloc
import weakref
from types import SimpleNamespace

import numpy as np
import pytest
from builtin_interfaces.msg import Duration, Time
from control_msgs.msg import JointTolerance
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from contact_sim_ros.driver.command_validation import JointLimits, validate_joint_state_command
from contact_sim_ros.driver.config import ControllersFile, ControllerSpec
from contact_sim_ros.driver.controller_manager import BEST_EFFORT, STRICT, ControllerManager
from contact_sim_ros.driver.controllers.base import ControllerTransport
from contact_sim_ros.driver.controllers.gripper_action import GoalRejected as GripperGoalRejected
from contact_sim_ros.driver.controllers.joint_trajectory import (GOAL_TOLERANCE_VIOLATED, INVALID_GOAL,
                                                                  INVALID_JOINTS, OLD_HEADER_TIMESTAMP,
                                                                  PATH_TOLERANCE_VIOLATED, SUCCESSFUL, GoalRejected,
                                                                  JointTrajectoryController)
from contact_sim_ros.driver.hardware import EFFORT
from contact_sim_ros.driver.loop import SteppingLoop
from contact_sim_ros.driver.system import SimulatorSystem
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.sim.simulator import Simulator

DT = 1e-3
ARM = ["j1", "j2"]

URDF = """<?xml version="1.0"?>
<robot name="planar">
  <link name="base"/>
  <link name="l1"><inertial><mass value="1.0"/><origin xyz="0.15 0 0"/>
    <inertia ixx="0.002" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="l2"><inertial><mass value="0.5"/><origin xyz="0.1 0 0"/>
    <inertia ixx="0.001" iyy="0.004" izz="0.004" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="finger"><inertial><mass value="0.05"/>
    <inertia ixx="1e-5" iyy="1e-5" izz="1e-5" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
    <limit lower="-2.5" upper="2.5" velocity="2.0" effort="50"/></joint>
  <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0.3 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-2.5" upper="2.5" velocity="2.0" effort="20"/></joint>
  <joint name="finger_joint" type="prismatic"><parent link="l2"/><child link="finger"/><origin xyz="0.2 0 0"/>
    <axis xyz="1 0 0"/><limit lower="0" upper="0.04" velocity="0.2" effort="40"/></joint>
</robot>
"""

JTC = "joint_trajectory_controller/JointTrajectoryController"
GRIPPER = "position_controllers/GripperActionController"
FORWARD = "position_controllers/JointGroupPositionController"
VELOCITY = "velocity_controllers/JointGroupVelocityController"


class Reports(ControllerTransport):
    """The transport's reports, kept (no topics: goals are handed to the controllers directly): throttled warnings,
    rejected commands, the controller manager's errors and infos (test_loaned_interfaces uses it too)."""

    def __init__(self):
        self.warnings, self.rejected, self.errors, self.infos = [], [], [], []

    def warn_throttled(self, message, key=None):
        self.warnings.append(message)

    def reject_command(self, exc):
        self.rejected.append(exc)

    def error(self, message):
        self.errors.append(message)

    def info(self, message):
        self.infos.append(message)


@pytest.fixture(scope="module")
def urdf(tmp_path_factory):
    path = tmp_path_factory.mktemp("planar") / "planar.urdf"
    path.write_text(URDF)
    return path


def make_world(urdf, arm_params=None, gripper_params=None, inactive=("forward",), update_rate=1000.0, extra=()):
    sim = Simulator({"robot": {"urdf": str(urdf)}}, engine="semi_implicit", time_step=DT)
    system = SimulatorSystem(sim)
    specs = (ControllerSpec("arm", JTC, {"joints": ARM, **(arm_params or {})}),
             ControllerSpec("gripper", GRIPPER, {"joint": "finger_joint", **(gripper_params or {})}),
             ControllerSpec("forward", FORWARD, {"joints": ARM}), *extra)
    reports = Reports()
    cm = ControllerManager(system, ControllersFile("<test>", update_rate, specs), list(inactive),
                           transport=reports, limits=JointLimits.from_model(sim.model))
    loop = SteppingLoop(system, cm, real_time_factor=0.0)
    return SimpleNamespace(sim=sim, system=system, cm=cm, loop=loop, reports=reports,
                           arm=cm.controllers["arm"], gripper=cm.controllers["gripper"])


def trajectory(joints, points, velocities=None, start=0.0):
    """A trajectory_msgs/JointTrajectory: points [(time s, [positions])], optional velocities per point."""
    msg = JointTrajectory(joint_names=list(joints))
    msg.header.stamp = Time(sec=int(start), nanosec=int(round((start % 1) * 1e9)))
    for k, (t, q) in enumerate(points):
        p = JointTrajectoryPoint(positions=[float(x) for x in q],
                                 time_from_start=Duration(sec=int(t), nanosec=int(round((t % 1) * 1e9))))
        if velocities is not None:
            p.velocities = [float(v) for v in velocities[k]]
        msg.points.append(p)
    return msg


def goal(msg, path=(), goal_tol=(), goal_time=0.0):
    """A FollowJointTrajectory goal's fields."""
    return SimpleNamespace(trajectory=msg, path_tolerance=list(path), goal_tolerance=list(goal_tol),
                           goal_time_tolerance=Duration(sec=int(goal_time),
                                                        nanosec=int(round((goal_time % 1) * 1e9))))


def tol(name, position):
    return JointTolerance(name=name, position=float(position))


def run_until(w, done, max_steps):
    for _ in range(max_steps):
        if done():
            return
        report = w.loop.step_now()
        assert report.ok, report.message
    assert done(), f"not done after {max_steps} steps (t = {w.sim.t:.3f} s)"


def arm_q(w):
    return w.sim.joint_positions()[:2].copy()


# ------------------------------------------------------------------------------------------ trajectory


def test_trajectory_goal_succeeds_within_its_tolerances_in_sim_time(urdf):
    w = make_world(urdf)
    ex = w.arm.goal(goal(trajectory(ARM, [(0.5, [0.3, -0.2]), (1.0, [0.5, -0.4])]),
                         goal_tol=[tol("j1", 1e-3), tol("j2", 1e-3)], goal_time=0.5), "handle")
    w.arm.submit(ex)
    run_until(w, ex.done.is_set, 2000)
    assert (ex.status, ex.error_code) == ("succeeded", SUCCESSFUL)
    assert 1.0 <= w.sim.t < 1.5                               # after the last point, within goal_time
    np.testing.assert_allclose(arm_q(w), [0.5, -0.4], atol=1e-3)
    t, qd, _, q, _ = ex.feedback                               # feedback: desired and actual at a sim time
    assert t <= w.sim.t and qd.shape == q.shape == (2,)


def test_path_tolerance_violation_aborts_and_holds(urdf):
    w = make_world(urdf)
    # 2 rad in 0.2 s is 10 rad/s: the joints (2 rad/s limit) fall behind the trajectory at once
    ex = w.arm.goal(goal(trajectory(ARM, [(0.2, [2.0, 0.0])]), path=[tol("j1", 0.05)]), "handle")
    w.arm.submit(ex)
    run_until(w, ex.done.is_set, 1000)
    assert (ex.status, ex.error_code) == ("aborted", PATH_TOLERANCE_VIOLATED)
    assert "path tolerance violated: joint 'j1'" in ex.error_string and w.sim.t < 0.2
    held = w.system.command.position[:2].copy()
    np.testing.assert_allclose(held, arm_q(w), atol=1e-3)      # holds where it was when aborted (one step ago)
    for _ in range(500):
        w.loop.step_now()
    np.testing.assert_allclose(arm_q(w), held, atol=0.02)      # and stays there


def test_goal_tolerance_not_met_within_goal_time_aborts(urdf):
    w = make_world(urdf)
    ex = w.arm.goal(goal(trajectory(ARM, [(0.3, [0.2, 0.1])]), goal_tol=[tol("j1", 1e-12)], goal_time=0.05),
                    "handle")
    w.arm.submit(ex)
    run_until(w, ex.done.is_set, 1000)
    assert (ex.status, ex.error_code) == ("aborted", GOAL_TOLERANCE_VIOLATED)
    assert "0.050 s after the last point: joint 'j1' error" in ex.error_string
    assert w.sim.t == pytest.approx(0.35, abs=2 * DT)


def test_a_new_goal_preempts_the_active_one_which_is_canceled(urdf):
    w = make_world(urdf)
    first = w.arm.goal(goal(trajectory(ARM, [(1.0, [0.5, 0.5])])), "first")
    w.arm.submit(first)
    for _ in range(200):
        w.loop.step_now()
    second = w.arm.goal(goal(trajectory(ARM, [(0.5, [-0.2, 0.1])])), "second")
    w.arm.submit(second)
    w.loop.step_now()
    assert (first.status, first.error_code) == ("canceled", INVALID_GOAL)
    assert first.error_string == "Current goal cancelled due to new incoming action."
    run_until(w, second.done.is_set, 2000)
    assert second.status == "succeeded"
    np.testing.assert_allclose(arm_q(w), [-0.2, 0.1], atol=0.01)


def test_a_topic_trajectory_preempts_the_action_goal(urdf):
    w = make_world(urdf)
    ex = w.arm.goal(goal(trajectory(ARM, [(2.0, [1.0, 0.0])])), "handle")
    w.arm.submit(ex)
    for _ in range(100):
        w.loop.step_now()
    w.arm.on_trajectory(trajectory(ARM, [(0.5, [0.0, 0.2])]))
    w.loop.step_now()
    assert (ex.status, ex.error_code) == ("aborted", INVALID_GOAL) and "joint_trajectory topic" in ex.error_string
    topic = w.arm.current
    assert topic is not None and topic.goal_handle is None
    run_until(w, topic.done.is_set, 2000)
    assert topic.status == "succeeded"
    np.testing.assert_allclose(arm_q(w), [0.0, 0.2], atol=0.01)


def test_cancel_holds_the_current_position(urdf):
    w = make_world(urdf)
    ex = w.arm.goal(goal(trajectory(ARM, [(1.0, [1.0, -1.0])])), "handle")
    w.arm.submit(ex)
    for _ in range(300):
        w.loop.step_now()
    ex.cancel_requested = True
    w.loop.step_now()
    assert (ex.status, ex.error_code) == ("canceled", SUCCESSFUL)
    q_cancel = w.system.command.position[:2].copy()
    assert 0.05 < q_cancel[0] < 0.95                           # stopped on the way
    for _ in range(500):
        w.loop.step_now()
    np.testing.assert_allclose(arm_q(w), q_cancel, atol=0.02)


def test_a_command_on_the_joints_aborts_the_trajectory(urdf):
    w = make_world(urdf)
    ex = w.arm.goal(goal(trajectory(ARM, [(1.0, [1.0, -1.0])])), "handle")
    w.arm.submit(ex)
    for _ in range(100):
        w.loop.step_now()
    cmd = validate_joint_state_command(w.arm.ctx.limits, ["j2"], position=[0.0])
    w.system.commands.push_command(cmd)
    w.loop.step_now()
    assert (ex.status, ex.error_code) == ("aborted", INVALID_GOAL) and "joint_command" in ex.error_string


@pytest.mark.parametrize("msg, code, words", [
    (trajectory(["j1", "nope"], [(1.0, [0.1, 0.1])]), INVALID_JOINTS, "not controlled by 'arm'"),
    (trajectory(["j1"], [(1.0, [0.1])]), INVALID_JOINTS, "missing and allow_partial_joints_goal is false"),
    (trajectory(["j1", "j1"], [(1.0, [0.1, 0.1])]), INVALID_JOINTS, "listed more than once"),
    (trajectory(ARM, []), INVALID_GOAL, "without points"),
    (trajectory(ARM, [(1.0, [0.1, 0.1])], velocities=[[0.0, math.nan]]), INVALID_GOAL, "is NaN/Inf"),
    (trajectory(ARM, [(1.0, [0.1, math.inf])]), INVALID_GOAL, "is NaN/Inf"),
    (trajectory(ARM, [(1.0, [0.1, 0.1])], velocities=[[0.0, 0.3]]), INVALID_GOAL, "non-zero velocity"),
    (trajectory(ARM, [(0.5, [0.1, 0.1])], start=1.0), OLD_HEADER_TIMESTAMP, "in the past"),
])
def test_bad_goals_are_refused_with_the_real_error_codes(urdf, msg, code, words):
    w = make_world(urdf)
    if code == OLD_HEADER_TIMESTAMP:
        for _ in range(2000):                 # t = 2 s: a trajectory stamped at 1 s that lasts 0.5 s is old
            w.loop.step_now()
    with pytest.raises(GoalRejected) as err:
        w.arm.goal(goal(msg), "handle")
    assert err.value.code == code and words in str(err.value)


def test_bad_goal_tolerances_are_refused(urdf):
    w = make_world(urdf)
    msg = trajectory(ARM, [(1.0, [0.1, 0.1])])
    with pytest.raises(GoalRejected, match="unknown joint 'nope'"):
        w.arm.goal(goal(msg, goal_tol=[tol("nope", 0.1)]), "handle")
    with pytest.raises(GoalRejected, match="not finite"):
        w.arm.goal(goal(msg, path=[tol("j1", math.nan)]), "handle")


def test_a_bad_trajectory_on_the_topic_is_rejected_and_reported(urdf):
    w = make_world(urdf)
    w.arm.on_trajectory(trajectory(ARM, [(1.0, [0.1, math.nan])]))
    assert [e.kind for e in w.reports.rejected] == ["bad_trajectory"]
    w.loop.step_now()
    assert w.arm.current is None


def test_a_trajectory_over_the_points_bound_is_refused_naming_the_bound(urdf):
    """MAX_TRAJECTORY_POINTS + 1 points: the goal refused with INVALID_GOAL and the bound in its reason, the topic's
    trajectory rejected (the transport's throttled warning) and not executed."""
    w = make_world(urdf)
    bound = JointTrajectoryController.MAX_TRAJECTORY_POINTS
    assert bound == 100_000
    msg = trajectory(ARM, [(1.0, [0.1, 0.1])])
    msg.points = [msg.points[0]] * (bound + 1)        # one point object repeated: the count is what is checked
    with pytest.raises(GoalRejected) as err:
        w.arm.goal(goal(msg), "handle")
    assert err.value.code == INVALID_GOAL
    assert f"{bound + 1} points, more than MAX_TRAJECTORY_POINTS = {bound}" in str(err.value)
    w.arm.on_trajectory(msg)
    assert [e.kind for e in w.reports.rejected] == ["bad_trajectory"]
    assert "MAX_TRAJECTORY_POINTS" in str(w.reports.rejected[0])
    w.loop.step_now()
    assert w.arm.current is None


def test_a_large_goals_points_are_released_when_it_ends(urdf):
    """A 50k-point goal (points every 10 us over 0.5 s) runs to success; once it has ended the controller holds no
    reference to its points (the validated arrays, the sampler) although its Execution lives on (the transport
    keeps it until the result is sent), and the driver-side memory is back to where it was before the goal."""
    w = make_world(urdf)
    warm = w.arm.goal(goal(trajectory(ARM, [(0.05, [0.0, 0.0])])), "warm-up")     # first-use allocations
    w.arm.submit(warm)
    run_until(w, warm.done.is_set, 500)
    n = 50_000
    t = np.arange(1, n + 1) * 1e-5
    q = np.stack((0.3 * t / t[-1], -0.2 * t / t[-1]), axis=1)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        msg = trajectory(ARM, [(float(tk), qk) for tk, qk in zip(t, q)])
        ex = w.arm.goal(goal(msg, goal_tol=[tol("j1", 0.01), tol("j2", 0.01)], goal_time=1.0), "handle")
        del msg                                      # the transport drops the request's points when it ends
        assert ex.trajectory.positions.shape == (n, 2)
        refs = [weakref.ref(ex.trajectory.positions), weakref.ref(ex.trajectory.times)]
        w.arm.submit(ex)
        w.loop.step_now()
        assert w.arm.current is ex and ex.trajectory is None        # the sampler has its own copy
        refs += [weakref.ref(ex.sampler), weakref.ref(ex.sampler.positions)]
        run_until(w, ex.done.is_set, 2000)
        assert (ex.status, ex.error_code) == ("succeeded", SUCCESSFUL)
        np.testing.assert_allclose(arm_q(w), [0.3, -0.2], atol=0.01)
        for _ in range(10):                          # and it keeps holding the last point
            w.loop.step_now()
        gc.collect()
        assert ex.trajectory is None and ex.sampler is None and w.arm.current is None
        assert [r() is None for r in refs] == [True] * len(refs), "points still referenced"
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 200_000, f"{after - before} bytes still allocated after the goal ended"
    assert ex.status == "succeeded"              # the result is kept


# ------------------------------------------------------------------------------------------ gripper


def test_gripper_stalls_then_presses_with_max_effort(urdf):
    """A goal beyond the finger's stroke: the finger stops at its limit, does not move for stall_timeout, the goal
    aborts as stalled (allow_stalling false) and the finger presses with the goal's max_effort (effort mode)."""
    w = make_world(urdf, gripper_params={"stall_timeout": 0.2})
    g = w.gripper.goal(0.1, 7.5)
    w.gripper.submit(g)
    run_until(w, g.done.is_set, 3000)
    position, effort, stalled, reached = g.measured
    assert g.status == "aborted" and stalled and not reached
    assert position == pytest.approx(0.04, abs=1e-3) and effort == 7.5
    i = w.system.command.index["finger_joint"]
    assert w.system.command.mode[i] == EFFORT and w.system.command.effort[i] == 7.5
    assert w.sim.t > 0.2


def test_gripper_reaches_its_goal(urdf):
    w = make_world(urdf, gripper_params={"allow_stalling": True})
    g = w.gripper.goal(0.02, 0.0)
    w.gripper.submit(g)
    run_until(w, g.done.is_set, 3000)
    assert g.status == "succeeded" and g.measured[3]
    assert g.measured[0] == pytest.approx(0.02, abs=0.01)


@pytest.mark.parametrize("position, max_effort", [(math.nan, 10.0), (0.02, -1.0), (0.02, math.nan),
                                                  (0.02, math.inf), (math.inf, 0.0)])
def test_gripper_refuses_bad_goals(urdf, position, max_effort):
    w = make_world(urdf)
    with pytest.raises(GripperGoalRejected):
        w.gripper.goal(position, max_effort)


def _finger_speed_of_a_goal(w, position, steps=600):
    """The largest |v| (m/s) of the finger over ``steps`` steps of a GripperCommand goal submitted now."""
    g = w.gripper.goal(position, 0.0)
    w.gripper.submit(g)
    i = w.sim.model.joint_v_index[w.sim.model.joint_names.index("finger_joint")]
    speed = 0.0
    for _ in range(steps):
        report = w.loop.step_now()
        assert report.ok, report.message
        speed = max(speed, abs(float(w.sim.v[i])))
    return speed


@pytest.mark.parametrize("when", ["t = 0", "t > 0", "after a reset"])
def test_a_gripper_goal_moves_the_finger_within_its_velocity_limit_at_any_time(urdf, when):
    """Issue 44 (finding 2): a goal at t = 0 (a paused start) or after a reset jumped the finger's target at once
    (0.67 m/s against the URDF's 0.2 m/s here): both hold every joint, and the hold's start of the rate limit took
    the goal's target written after it in the same cycle. Now it moves on the rate-limit profile whenever it comes
    (95 % of the limit, the PD's overshoot a few %)."""
    w = make_world(urdf, gripper_params={"allow_stalling": True})
    limit = float(w.sim.model.velocity_limit[w.sim.model.joint_names.index("finger_joint")])
    assert limit == 0.2
    if when != "t = 0":
        for _ in range(10):
            w.loop.step_now()
        assert _finger_speed_of_a_goal(w, 0.01, steps=300) <= limit
    if when == "after a reset":
        w.system.reset()             # as the loop's ~/reset does between two steps (SteppingLoop._do_reset)
        w.cm.reset()
        assert w.sim.t == 0.0
    speed = _finger_speed_of_a_goal(w, 0.03)
    assert 0.5 * limit < speed <= limit


# ------------------------------------------------------------------------------------------ switching


def test_switch_strict_refuses_as_a_whole_and_best_effort_skips(urdf):
    w = make_world(urdf)
    cm = w.cm
    ok, msg = cm.switch(["forward"], [], STRICT)                 # forward claims the arm's joints
    assert not ok and "claim conflict" in msg and "j1/position" in msg
    assert cm.controllers["arm"].active and not cm.controllers["forward"].active
    ok, msg = cm.switch(["forward", "nope"], ["arm"], STRICT)    # unknown name: nothing changes
    assert not ok and "unknown controller 'nope'" in msg and cm.controllers["arm"].active
    ok, msg = cm.switch(["forward", "nope"], ["arm"], BEST_EFFORT)
    assert ok and "skipped" in msg
    assert cm.controllers["forward"].active and not cm.controllers["arm"].active
    assert w.system.command.claims["j1/position"] == "forward"
    ok, msg = cm.switch(["arm"], ["forward"], STRICT)            # deactivation first: a swap in one call
    assert ok and cm.controllers["arm"].active and w.system.command.claims["j1/position"] == "arm"
    ok, msg = cm.switch(["arm"], [], STRICT)
    assert not ok and "'arm' is already active" in msg


def test_switches_requested_from_another_thread_run_between_steps_while_stepping_flat_out(urdf):
    """switch_controller's service thread hands each switch to the stepping thread (SteppingLoop.request_call):
    100 swaps while the loop steps as fast as it can all succeed, and each leaves the arm's position interfaces
    claimed by the controller it activated. (Why: the (de)activation reads the state the stepping thread refills
    in place; run on the service thread it raised numpy's "WRITEBACKIFCOPY base is read-only" on the Franka over
    DDS, test_ros2_control's switch test. That race is not reproducible here: this test holds the contract.)"""
    w = make_world(urdf)
    w.loop.start()
    try:
        for k in range(100):
            on, off = ("forward", "arm") if k % 2 == 0 else ("arm", "forward")
            ok, msg = w.loop.request_call(lambda: w.cm.switch([on], [off], STRICT))
            assert ok, msg
            assert w.system.command.claims["j1/position"] == on and w.cm.controllers[on].active
            assert w.loop.running and w.loop.error is None
    finally:
        w.loop.stop()


def test_strict_switch_refuses_mixed_command_modes_on_a_joint_best_effort_skips(urdf):
    """A velocity group on the joints of an active position group (different interfaces, same joints): STRICT
    refuses the switch as a whole (the hardware refuses mixed command modes), BEST_EFFORT skips that controller and
    switches the rest; a swap in one call (deactivate the position group, activate the velocity group) is fine."""
    w = make_world(urdf, inactive=("forward", "velocity", "finger_velocity"),
                   extra=(ControllerSpec("velocity", VELOCITY, {"joints": ["j2"]}),
                          ControllerSpec("finger_velocity", VELOCITY, {"joints": ["finger_joint"]})))
    cm = w.cm
    ok, msg = cm.switch(["forward"], ["arm"], STRICT)
    assert ok and cm.controllers["forward"].active
    ok, msg = cm.switch(["velocity"], [], STRICT)
    assert not ok and "claim conflict" in msg
    assert "'velocity' claims j2/velocity while 'forward' claims j2/position" in msg and "mixed command" in msg
    assert not cm.controllers["velocity"].active and "j2/velocity" not in w.system.command.claims
    ok, msg = cm.switch(["velocity", "finger_velocity"], ["gripper"], STRICT)      # as a whole: nothing changes
    assert not ok and cm.controllers["gripper"].active and not cm.controllers["finger_velocity"].active
    ok, msg = cm.switch(["velocity", "finger_velocity"], ["gripper"], BEST_EFFORT)
    assert ok and "not activating 'velocity'" in msg and "mixed command" in msg
    assert cm.controllers["finger_velocity"].active and not cm.controllers["gripper"].active
    assert not cm.controllers["velocity"].active and w.system.command.claims["j2/position"] == "forward"
    ok, msg = cm.switch(["velocity"], ["forward"], STRICT)                          # a swap: deactivation first
    assert ok and cm.controllers["velocity"].active and w.system.command.claims["j2/velocity"] == "velocity"
    assert "j2/position" not in w.system.command.claims
    with pytest.raises(ConfigError, match="mixed command modes on joint 'j2'"):   # nor both at start-up
        make_world(urdf, inactive=("forward",), extra=(ControllerSpec("velocity", VELOCITY, {"joints": ["j2"]}),))


def test_deactivating_a_controller_aborts_its_goal_and_holds(urdf):
    w = make_world(urdf)
    ex = w.arm.goal(goal(trajectory(ARM, [(1.0, [1.0, 1.0])])), "handle")
    w.arm.submit(ex)
    for _ in range(200):
        w.loop.step_now()
    ok, _ = w.cm.switch([], ["arm"], STRICT)
    assert ok and (ex.status, ex.error_code) == ("aborted", INVALID_GOAL) and "deactivated" in ex.error_string
    held = w.system.command.position[:2].copy()
    for _ in range(300):
        w.loop.step_now()
    np.testing.assert_allclose(arm_q(w), held, atol=0.02)


# ------------------------------------------------------------------------------------------ parameters


def test_controller_parameters_are_checked_from_their_table(urdf):
    with pytest.raises(ConfigError, match=r"'constraints.j1.goal': must be a finite number"):
        make_world(urdf, arm_params={"constraints": {"j1": {"goal": math.nan}}})
    with pytest.raises(ConfigError, match=r"names joint 'j9', which is not one of its joints"):
        make_world(urdf, arm_params={"constraints": {"j9": {"goal": 0.1}}})
    with pytest.raises(ConfigError, match=r"'action_monitor_rate': must be >= 0.1 Hz"):
        make_world(urdf, arm_params={"action_monitor_rate": 0.0})
    with pytest.raises(ConfigError, match=r"'stall_timeout': must be >= 0 s"):
        make_world(urdf, gripper_params={"stall_timeout": -1.0})
    w = make_world(urdf, arm_params={"open_loop_control": True, "frobnicate": 1})
    assert any("['open_loop_control', 'frobnicate'] are not emulated" in m for m in w.reports.infos)


# ------------------------------------------------------------------------------------------ load / unload


def test_load_configure_activate_command_and_unload_a_controller_not_in_the_file(urdf, tmp_path):
    """As spawner NAME -p params.yaml: parameters from a params file (spawner's keys: '/**/NAME'), loaded
    unconfigured (not activatable), configured, activated in place of the trajectory controller, commanded (the
    arm reaches the commanded positions in sim time), then unload refused while active and done when inactive."""
    from contact_sim_ros.driver.controller_manager import controller_parameters_from_files
    params = tmp_path / "velocity.yaml"
    params.write_text("/**/new_position:\n  ros__parameters:\n    type: " + FORWARD + "\n    joints: [j1, j2]\n"
                      "other_node:\n  ros__parameters:\n    joints: [finger_joint]\n")
    p = controller_parameters_from_files([params], "new_position", "/")
    assert p == {"joints": ["j1", "j2"]}
    w = make_world(urdf)
    cm = w.cm
    c = cm.load(ControllerSpec("new_position", FORWARD, p))
    assert cm.controllers["new_position"] is c and c.state == "unconfigured"
    ok, msg = cm.switch(["new_position"], ["arm"], STRICT)
    assert not ok and "'new_position' is unconfigured" in msg and cm.controllers["arm"].active
    cm.configure("new_position")
    cm.cleanup("new_position")                      # set_controller_state unconfigured: not activatable again
    assert c.state == "unconfigured" and not cm.switch(["new_position"], ["arm"], STRICT)[0]
    with pytest.raises(ConfigError, match="cannot be cleaned up from its state 'unconfigured'"):
        cm.cleanup("new_position")
    cm.configure("new_position")
    ok, msg = cm.switch(["new_position"], ["arm"], STRICT)
    assert ok, msg
    c.on_commands([0.3, -0.2])
    run_until(w, lambda: np.allclose(arm_q(w), [0.3, -0.2], atol=0.01), 3000)
    with pytest.raises(ConfigError, match="'new_position' is active: deactivate it before unloading it"):
        cm.unload("new_position")
    assert "new_position" in cm.controllers
    ok, msg = cm.switch(["arm"], ["new_position"], STRICT)
    assert ok, msg
    assert cm.unload("new_position") is c and "new_position" not in cm.controllers
    with pytest.raises(ConfigError, match="no controller named 'new_position' is loaded"):
        cm.unload("new_position")
    ok, msg = cm.switch(["new_position"], [], STRICT)
    assert not ok and "unknown controller 'new_position'" in msg
    for _ in range(50):           # the manager runs on without it
        assert w.loop.step_now().ok


def test_load_refuses_a_loaded_name_an_unknown_type_and_bad_parameters_and_loads_nothing(urdf, tmp_path):
    w = make_world(urdf)
    cm = w.cm
    before = dict(cm.controllers)
    with pytest.raises(ConfigError, match="'arm' is already loaded"):
        cm.load(ControllerSpec("arm", JTC, {"joints": ARM}))
    with pytest.raises(ConfigError, match="does not emulate; supported types"):
        cm.load(ControllerSpec("mystery", "acme_controllers/Mystery", {}))
    with pytest.raises(ConfigError, match=r"unknown joint\(s\) \['j9'\]"):
        cm.load(ControllerSpec("bad", FORWARD, {"joints": ["j9"]}))
    with pytest.raises(ConfigError, match="'arm' is active"):
        cm.unload("arm")
    assert cm.controllers == before
    bad = tmp_path / "bad.yaml"
    bad.write_text("new_position:\n  joints: [j1]\n")
    with pytest.raises(ConfigError, match="'new_position' must hold a 'ros__parameters' mapping"):
        from contact_sim_ros.driver.controller_manager import controller_parameters_from_files
        controller_parameters_from_files([bad], "new_position", "/")


def test_a_loaded_broadcaster_gets_a_publish_hook_and_loses_it_when_unloaded(urdf):
    """Loaded and unloaded between two steps (as the controller_manager node does): the manager's hooks and the
    stepping loop's, which collects them after the call."""
    w = make_world(urdf)
    cm = w.cm
    spec = ControllerSpec("extra_states", "joint_state_broadcaster/JointStateBroadcaster", {"update_rate": 100.0})
    w.loop.request_call(lambda: cm.load(spec))
    assert [h.name for h in cm.hooks].count("controller extra_states") == 1
    assert [h.name for h in w.loop.hooks].count("controller extra_states") == 1
    w.loop.request_call(lambda: cm.configure("extra_states"))
    w.loop.request_call(lambda: cm.unload("extra_states"))
    assert "controller extra_states" not in [h.name for h in cm.hooks]
    assert "controller extra_states" not in [h.name for h in w.loop.hooks]


def test_controller_parameters_from_files_finds_the_keys_spawner_accepts_later_files_win(tmp_path):
    """The layouts spawner's get_params_files_with_controller_parameters accepts, flattened; a later file wins;
    another node's section and another namespace's are not read."""
    from contact_sim_ros.driver.controller_manager import controller_parameters_from_files
    a = tmp_path / "a.yaml"
    a.write_text("/**:\n  ros__parameters:\n    use_sim_time: true\n"
                 "  c:\n    ros__parameters:\n      joints: [j1]\n      constraints: {goal_time: 1.0}\n"
                 "/other/c:\n  ros__parameters:\n    joints: [j9]\n"
                 "d:\n  ros__parameters:\n    joints: [j9]\n")
    b = tmp_path / "b.yaml"
    b.write_text("/robot/c:\n  ros__parameters:\n    type: " + FORWARD + "\n    joints: [j1, j2]\n")
    assert controller_parameters_from_files([a], "c", "/robot") == {"use_sim_time": True, "joints": ["j1"],
                                                                    "constraints.goal_time": 1.0}
    assert controller_parameters_from_files([a, b], "c", "/robot")["joints"] == ["j1", "j2"]
    assert controller_parameters_from_files([b], "c", "/") == {}
    with pytest.raises(ConfigError, match="nope.yaml"):
        controller_parameters_from_files([tmp_path / "nope.yaml"], "c", "/")


# ------------------------------------------------------------------------------------------ large requests (issue 44)


def test_a_params_file_larger_than_the_bound_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """Fuzz finding 7: a 5 MB params file took 53 s to load (50 MB: 561 s, 6.3 GB) while the stepping waited on
    the GIL. A file over MAX_PARAMS_FILE_BYTES is refused with its size and the bound, without being parsed; one
    within the bound is read."""
    from contact_sim_ros.driver import controller_manager as module
    bound = module.MAX_PARAMS_FILE_BYTES
    head = "/**/big:\n  ros__parameters:\n    joints: [j1]\n"
    lines = [f"    extra_{i}: {i}.5\n" for i in range(bound // 12)]
    text = head + "".join(lines)
    big = tmp_path / "big.yaml"
    big.write_text(text[:bound + 100].rpartition("\n")[0] + "\n")
    assert big.stat().st_size > bound
    parsed = []
    real = module.read_mapping
    monkeypatch.setattr(module, "read_mapping", lambda path, what: parsed.append(path) or real(path, what))
    with pytest.raises(ConfigError) as err:
        module.controller_parameters_from_files([big], "big", "/")
    assert str(big) in str(err.value) and f"{big.stat().st_size:,} bytes" in str(err.value)
    assert f"{bound:,} bytes" in str(err.value) and not parsed
    small = tmp_path / "small.yaml"
    small.write_text(text[:bound - 200].rpartition("\n")[0] + "\n")
    p = module.controller_parameters_from_files([small], "big", "/")
    assert parsed == [small] and p["joints"] == ["j1"] and len(p) > 2_000


def test_many_names_are_listed_as_ten_and_a_count(urdf):
    """Wrong list: switch_controller with 10,000 bogus names answered (and logged) 329 kB; a params file's
    thousands of unknown parameters were all logged (a 41 MB log line). Now ten names and "and N more"."""
    w = make_world(urdf, arm_params={f"extra_{i}": 1.0 for i in range(5000)})
    line, = [m for m in w.reports.infos if "are not emulated" in m]
    assert len(line) < 500 and "and 4,990 more]" in line, line[:300]
    cm = w.cm
    bogus = [f"bogus_controller_{i}" for i in range(10_000)]
    for strictness in (STRICT, BEST_EFFORT):
        ok, msg = cm.switch(bogus, ["arm"] if strictness == BEST_EFFORT else [], strictness)
        assert len(msg) < 1000 and "unknown controllers ['bogus_controller_0'" in msg, msg[:300]
        assert "and 9,990 more]" in msg
    assert ok and not cm.controllers["arm"].active        # BEST_EFFORT: the rest switched
