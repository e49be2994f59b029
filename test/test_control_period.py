"""The control period's compiled steps (driver/control_period.py, issue 45 item 3): the in-process link's steps with
the joint trajectory controllers' updates and the hardware System's write in one compiled call per step give the
same trajectories, bit for bit, as ``SteppingLoop.step_now`` per step (the controllers' Python updates), and keep
every rule: a trajectory's goal check and success at its end, a preempted one aborted, the path tolerance's abort
with its message and hold, a bad trajectory rejected with its message, a non-finite target refused by the
hand-over with the joint named, a controller manager slower than the time step. Sim time, in process, TAMSI on
scenario 1's scene (iiwa + WSG 50 and the bottle)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from builtin_interfaces.msg import Time
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from contact_sim_ros.clients.inprocess_link import InProcessLink, run_control_period
from contact_sim_ros.driver.controllers.joint_trajectory import (PATH_TOLERANCE_VIOLATED, SUCCESSFUL, Execution)
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.resources import resolve_resource
from contact_sim_ros.scenarios.runner import REPO, SCENARIOS
from contact_sim_ros.yaml_files import load_yaml

SPEC = SCENARIOS["pick_shake_place"]
ARM = [f"iiwa_joint_{i}" for i in range(1, 8)]
FINGERS = ["wsg_finger_left_joint", "wsg_finger_right_joint"]
DT = 0.001
STEPS = 20                        # a control period of 20 ms


class PythonSteps:
    """The reference: every step through ``SteppingLoop.step_now`` (the controllers' Python updates)."""

    def __init__(self, loop):
        self.loop = loop

    def run(self, steps, failures):
        for _ in range(steps):
            report = self.loop.step_now()
            if not report.ok:
                failures.append(f"t = {report.t:.4f} s: {report.message}")


def _links(tmp_path=None, overrides=None):
    """Two in-process links on scenario 1's scene: the compiled one (the link's own ControlPeriod) and the
    reference (PythonSteps)."""
    links = []
    for _ in range(2):
        links.append(InProcessLink(resolve_resource(SPEC.scene), "tamsi", DT, STEPS * DT,
                                   trajectory_controllers=("arm_controller", "gripper_controller"),
                                   inactive_controllers=SPEC.inactive_controllers, overrides=overrides,
                                   trajectory_states=False))        # (as a campaign trial)
    links[1].period = PythonSteps(links[1].loop)
    return links


def _message(joints, start_s, times_s, points, velocities=None):
    """A JointTrajectory stamped ``start_s`` (sim time of time_from_start 0) through ``points`` at ``times_s``."""
    msg = JointTrajectory()
    msg.header.stamp = Time(sec=int(start_s), nanosec=int(round((start_s - int(start_s)) * 1e9)))
    msg.joint_names = list(joints)
    for k, (t, p) in enumerate(zip(times_s, points)):
        pt = JointTrajectoryPoint()
        pt.positions = [float(x) for x in p]
        if velocities is not None:
            pt.velocities = [float(x) for x in velocities[k]]
        pt.time_from_start.sec = int(t)
        pt.time_from_start.nanosec = int(round((t - int(t)) * 1e9))
        msg.points.append(pt)
    return msg


def _submit(link, controller, msg, corrupt=None) -> Execution:
    """``msg`` handed to ``controller`` as its joint_trajectory topic does (checked, the controller's
    tolerances), the Execution returned so that its result can be read; ``corrupt(trajectory)`` changes the
    checked trajectory before it is handed over."""
    c = link.cm.controllers[controller]
    traj, idx = c.validated(msg, f"{controller}/joint_trajectory")
    if corrupt is not None:
        corrupt(traj)
    path, goal = c.tolerances(list(msg.joint_names), (), ())
    ex = Execution(traj, idx, path, goal, c.goal_time, c.stopped_velocity)
    c.submit(ex)
    return ex


def _period(links):
    """One control period of every link; returns (q, v) of each."""
    out = []
    for link in links:
        run_control_period(link.period, STEPS, link.failures)
        out.append((link.sim.q.copy(), link.sim.v.copy()))
    return out


def _same(states) -> bool:
    (q0, v0), (q1, v1) = states
    return q0.tobytes() == q1.tobytes() and v0.tobytes() == v1.tobytes()


def _close(links):
    for link in links:
        link.close()


def test_compiled_steps_give_the_python_updates_trajectories_bit_for_bit_and_their_results():
    links = _links()
    try:
        q0 = links[0].system.state.position.copy()
        arm0, fingers0 = q0[:7], q0[7:9]
        results = [[] for _ in links]
        for period in range(60):
            t = links[0].sim.t
            assert links[1].sim.t == t
            for r, link in enumerate(links):
                if period == 1:        # cubic (velocities given), monitored (path tolerance 0.2 rad), ends mid-period
                    target = arm0 + np.array([0.1, -0.08, 0.05, 0.1, 0.0, -0.05, 0.08])
                    results[r].append(_submit(link, "arm_controller", _message(
                        ARM, t, [0.071, 0.157], [arm0 + 0.4 * (target - arm0), target],
                        [0.8 * (target - arm0) / 0.157, np.zeros(7)])))
                if period == 20:       # linear; preempted by the next one two periods later
                    results[r].append(_submit(link, "arm_controller", _message(
                        ARM, t, [0.5], [arm0])))
                if period == 22:
                    results[r].append(_submit(link, "arm_controller", _message(
                        ARM, t + 0.007, [0.2, 0.4], [arm0 + 0.05, arm0])))
                if 3 <= period < 30:   # the gripper's force loop: a new two-point trajectory every period
                    g = fingers0 - 0.001 * (period - 2)
                    results[r].append(_submit(link, "gripper_controller", _message(
                        FINGERS, t, [STEPS * DT, 2 * STEPS * DT], [fingers0 - 0.001 * (period - 3), g])))
            assert _same(_period(links)), f"period {period}: q or v differ"
        for a, b in zip(*results):
            assert (a.status, a.error_code, a.error_string) == (b.status, b.error_code, b.error_string)
        arm = [ex for ex in results[0] if len(ex.idx) == 7]
        assert [ex.status for ex in arm] == ["succeeded", "aborted", "succeeded"], [ex.error_string for ex in arm]
        assert arm[1].error_string == "preempted by a trajectory on the joint_trajectory topic"
        period = links[0].period
        assert period.compiled_steps > 0.6 * 60 * STEPS and period.python_steps > 0     # both paths ran
        assert links[0].failures == links[1].failures == []
    finally:
        _close(links)


def test_a_path_tolerance_violation_on_the_compiled_path_aborts_with_its_message_and_holds():
    links = _links()
    try:
        _period(links)
        q0 = links[0].system.state.position.copy()
        t = links[0].sim.t
        # joint 1 asked to turn 1 rad in 0.1 s: the drive's rate limit (95 % of its velocity limit, reached in
        # 0.25 s) lags the reference by more than the 0.2 rad path tolerance
        target = q0[:7] + np.array([1.0, 0, 0, 0, 0, 0, 0])
        ex = [_submit(link, "arm_controller", _message(ARM, t, [0.1, 0.4], [target, target])) for link in links]
        compiled_before = links[0].period.compiled_steps
        for _ in range(10):
            assert _same(_period(links))
        assert links[0].period.compiled_steps > compiled_before
        for e in ex:
            assert e.status == "aborted" and e.error_code == PATH_TOLERANCE_VIOLATED
            assert e.error_string.startswith("path tolerance violated: joint 'iiwa_joint_1' error ")
            assert "> 0.2 at t = " in e.error_string
        assert ex[0].error_string == ex[1].error_string
        hold = links[0].system.command
        assert np.all(hold.mode[:7] == 0)                       # position mode: the arm holds where it was
        assert links[0].cm.controllers["arm_controller"].current is None
    finally:
        _close(links)


def test_a_bad_trajectory_is_rejected_with_its_message_while_compiled_steps_run():
    links = _links()
    try:
        _period(links)
        q0 = links[0].system.state.position.copy()
        t = links[0].sim.t
        for link in links:
            _submit(link, "arm_controller", _message(ARM, t, [0.3], [q0[:7] + 0.1]))
        _period(links)
        bad = _message(ARM, links[0].sim.t, [0.1], [q0[:7] + 0.1])
        bad.points[0].positions[2] = math.nan
        links[0].publish("arm_controller", bad)     # the topic: rejected, the running trajectory goes on
        assert len(links[0].host.rejected) == 1
        assert links[0].host.rejected[0].endswith(
            "arm_controller/joint_trajectory: point 0 positions is NaN/Inf for joint(s) ['iiwa_joint_3']")
        for _ in range(20):
            assert _same(_period(links))
        assert links[0].period.compiled_steps > 30 * STEPS // 2
    finally:
        _close(links)


def test_a_non_finite_target_on_the_compiled_path_is_refused_by_the_hand_over_naming_the_joint():
    links = _links()
    try:
        _period(links)
        q0 = links[0].system.state.position.copy()
        t = links[0].sim.t
        for link in links:
            _submit(link, "arm_controller", _message(ARM, t, [0.3], [q0[:7] + 0.1]))
        _period(links)

        def corrupt(traj):          # (validation refuses such points: a trajectory corrupted after it)
            traj.positions[-1, 3] = math.nan
        compiled = links[0].period.compiled_steps
        for link in links:
            _submit(link, "arm_controller", _message(ARM, link.sim.t, [0.1, 0.2], [q0[:7], q0[:7] + 0.1]), corrupt)
        messages = []
        for link in links:
            with pytest.raises(ConfigError) as info:
                for _ in range(20):
                    run_control_period(link.period, STEPS, link.failures)
            messages.append(str(info.value))
        assert messages[0] == messages[1] and "iiwa_joint_4" in messages[0], messages
        assert links[0].period.compiled_steps > compiled               # refused on the compiled path
        assert links[0].sim.t == links[1].sim.t               # the refused step was not taken, on both paths
        assert links[0].sim.q.tobytes() == links[1].sim.q.tobytes()
    finally:
        _close(links)


def test_a_controller_manager_slower_than_the_time_step_updates_at_its_own_rate(tmp_path):
    controllers = load_yaml((REPO / "config" / "ros2_control" / "iiwa_wsg_controllers.yaml").read_text())
    controllers["controller_manager"]["ros__parameters"]["update_rate"] = 250      # every 4th step
    path = tmp_path / "controllers.yaml"
    import yaml
    path.write_text(yaml.safe_dump(controllers))
    links = _links(overrides={"controllers_file": str(path)})
    try:
        assert links[0].cm.every == 4
        q0 = links[0].system.state.position.copy()
        t = links[0].sim.t
        for link in links:
            _submit(link, "arm_controller", _message(ARM, t, [0.1, 0.25], [q0[:7] + 0.05, q0[:7] - 0.05],
                                                     [np.full(7, 0.2), np.zeros(7)]))
        for _ in range(16):
            assert _same(_period(links))
        assert links[0].period.compiled_steps > 10 * STEPS
        arm = links[0].cm.controllers["arm_controller"]
        assert arm.current is None          # the trajectory succeeded
    finally:
        _close(links)
