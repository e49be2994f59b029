"""joint_trajectory_controller/JointTrajectoryController: ``<name>/joint_trajectory`` (trajectory_msgs/
JointTrajectory), the ``<name>/follow_joint_trajectory`` action (control_msgs/action/FollowJointTrajectory) and
``<name>/controller_state`` (control_msgs/msg/JointTrajectoryControllerState).

Behaviour of the Jazzy controller:

* Interpolation between points: cubic Hermite when velocities are given, linear otherwise
  (``interpolation_method: none``: hold each point until the next); before the first point, from the state
  when the trajectory became active. A trajectory whose ``header.stamp`` is zero starts when received; a
  non-zero stamp is the sim time of ``time_from_start = 0``. A trajectory that *ends* in the past is refused
  (action: OLD_HEADER_TIMESTAMP; topic: warned and dropped).
* Goal checks -> result codes: empty, unknown, duplicated joints, or a partial goal while
  ``allow_partial_joints_goal`` is false: INVALID_JOINTS; no points, times not increasing, wrong sizes,
  non-finite values, a non-zero last velocity while ``allow_nonzero_velocity_at_trajectory_end`` is false, a
  tolerance for an unknown joint: INVALID_GOAL. (The real controller *rejects* such goals; here they are
  accepted and aborted at once with the code and reason, so a client sees why. A goal sent to an inactive
  controller is rejected, as in the real one.)
* Path tolerance (``constraints.<joint>.trajectory``, per goal ``path_tolerance``; 0 = not checked) is
  checked until the trajectory's last point: a violation aborts with PATH_TOLERANCE_VIOLATED and holds the
  current position. After the last point the goal tolerance (``constraints.<joint>.goal``, per goal
  ``goal_tolerance``) and ``constraints.stopped_velocity_tolerance`` are checked: met -> SUCCESSFUL; not met
  within ``constraints.goal_time`` (per goal ``goal_time_tolerance``; 0 = wait forever) ->
  GOAL_TOLERANCE_VIOLATED, hold. Per-goal tolerance values: 0 = the controller's default, < 0 = none.
* Cancel: holds the current position, goal CANCELED. A new goal preempts the active one (CANCELED, error
  INVALID_GOAL "Current goal cancelled due to new incoming action.", as the real controller); a trajectory on
  the topic or a command on the joints through ``joint_command`` aborts it.
* Feedback at ``action_monitor_rate`` (Hz); ``controller_state`` at ``state_publish_rate`` (Hz, default 50:
  the real controller publishes every update).

Command interfaces: ``position`` (optionally with ``velocity``: the interpolated velocity is the feed-forward
of the simulated joint's PD). ``effort`` and ``velocity``-only (the real controller's PID ``gains``) are not
emulated: a clear start-up error.
"""

from __future__ import annotations

import array
import threading
import time

import numpy as np
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import GoalEvent
from rclpy.callback_groups import ReentrantCallbackGroup
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg
from trajectory_msgs.msg import JointTrajectoryPoint

from ...errors import ConfigError, unknown_choice
from ..command_validation import CommandRejected, TrajectorySampler, validate_trajectory
from ..state_messages import has_readers, stamp
from .base import Controller

try:
    from control_msgs.action import FollowJointTrajectory
    from control_msgs.msg import JointTrajectoryControllerState
except ImportError:   # built into the venv by scripts/ensure_venv.sh (msgs/control_msgs)
    FollowJointTrajectory = JointTrajectoryControllerState = None

SUCCESSFUL, INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP, PATH_TOLERANCE_VIOLATED, \
    GOAL_TOLERANCE_VIOLATED = 0, -1, -2, -3, -4, -5
FUTURE_START_WARNING_S = 60.0      # a trajectory starting later than this is executed with a warning


def _seconds(d) -> float:
    return d.sec + 1e-9 * d.nanosec


class GoalRejected(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


class Execution:
    """One trajectory being executed (from the action or the topic). ``done`` is set with ``status``
    ('succeeded', 'aborted', 'canceled'), ``error_code`` and ``error_string`` when it ends."""

    def __init__(self, trajectory, idx, path_tol, goal_tol, goal_time, stopped_velocity, goal_handle=None):
        self.trajectory = trajectory
        self.idx = idx                          # hardware (actuated joint) indices of the trajectory's joints
        self.path_tol = path_tol                # rad or m per joint, <= 0: not checked
        self.goal_tol = goal_tol
        self.goal_time = goal_time              # s after the last point; 0: wait forever
        self.stopped_velocity = stopped_velocity
        self.goal_handle = goal_handle
        self.sampler: TrajectorySampler | None = None
        self.cancel_requested = False
        self.done = threading.Event()
        self.status, self.error_code, self.error_string = "", SUCCESSFUL, ""
        self.feedback = None                    # (t, desired q, desired v, actual q, actual v)
        # the hardware rows as a slice when the joints are consecutive (cheaper writes every update); the
        # path tolerance with inf where not checked; monitored: the state is needed while the trajectory runs
        # (feedback of an action goal, path tolerance), else the update only samples and writes
        idx = np.asarray(idx)
        consecutive = idx.size > 0 and bool(np.all(np.diff(idx) == 1))
        self.rows = slice(int(idx[0]), int(idx[-1]) + 1) if consecutive else idx
        self.path_limit = np.where(np.asarray(path_tol) > 0, path_tol, np.inf)
        self.monitored = goal_handle is not None or bool(np.any(np.asarray(path_tol) > 0))
        self._err = np.empty(len(idx))
        self._bad = np.empty(len(idx), dtype=bool)

    def finish(self, status: str, code: int = SUCCESSFUL, message: str = "") -> None:
        if not self.done.is_set():
            self.status, self.error_code, self.error_string = status, code, message
            self.done.set()


class JointTrajectoryController(Controller):
    TYPES = ("joint_trajectory_controller/JointTrajectoryController",)
    PARAMETERS = ("joints", "command_interfaces", "state_interfaces", "allow_partial_joints_goal",
                  "constraints", "allow_nonzero_velocity_at_trajectory_end", "action_monitor_rate",
                  "interpolation_method", "state_publish_rate", "command_joints", "open_loop_control",
                  "interpolate_from_desired_state", "set_last_command_interface_value_as_state_on_activation")

    def __init__(self, name, ctype, params, ctx):
        super().__init__(name, ctype, params, ctx)
        self.joints = self.joint_list()
        command_joints = [str(j) for j in self.param("command_joints", [], list)]
        if command_joints and command_joints != self.joints:
            raise ConfigError(f"{self.where}: 'command_joints' different from 'joints' (controller chains, "
                              f"passive joints) is not emulated")
        commands = [str(c) for c in self.param("command_interfaces", ["position"], list)]
        if commands not in (["position"], ["position", "velocity"], ["velocity", "position"]):
            raise ConfigError(f"{self.where}: command_interfaces {commands} are not emulated; supported: "
                              f"[position] and [position, velocity] (the simulated joint's PD tracks the "
                              f"interpolated position with the velocity as feed-forward)")
        self.commands = commands
        states = [str(s) for s in self.param("state_interfaces", ["position", "velocity"], list)]
        bad = [s for s in states if s not in ("position", "velocity", "acceleration")]
        if bad or "position" not in states:
            raise ConfigError(f"{self.where}: state_interfaces must include position (and may include velocity, "
                              f"acceleration), got {states}")
        self.states = states
        self.idx = ctx.hardware.indices(self.joints)
        self.allow_partial = self.param("allow_partial_joints_goal", False, bool)
        self.allow_nonzero_end_velocity = self.param("allow_nonzero_velocity_at_trajectory_end", False, bool)
        self.interpolation = self.param("interpolation_method", "splines", str)
        if self.interpolation not in ("splines", "none"):
            raise ConfigError(f"{self.where}: interpolation_method must be 'splines' or 'none', got "
                              f"{self.interpolation!r}")
        self.stopped_velocity = self.param("constraints.stopped_velocity_tolerance", 0.01, float)
        self.goal_time = self.param("constraints.goal_time", 0.0, float)
        if not self.goal_time >= 0:
            raise ConfigError(f"{self.where}: constraints.goal_time must be >= 0 s, got {self.goal_time}")
        self.path_tol = np.array([self.param(f"constraints.{j}.trajectory", 0.0, float) for j in self.joints])
        self.goal_tol = np.array([self.param(f"constraints.{j}.goal", 0.0, float) for j in self.joints])
        valid = {"constraints.stopped_velocity_tolerance", "constraints.goal_time"} | {
            f"constraints.{j}.{k}" for j in self.joints for k in ("trajectory", "goal")}
        typos = sorted(k for k in self.params if k.startswith("constraints.") and k not in valid)
        if typos:          # the real controller ignores them: a tolerance that silently does not apply
            raise ConfigError(f"{self.where}: " + unknown_choice("parameter", typos[0], valid))
        monitor = self.param("action_monitor_rate", 20.0, float)
        if not monitor >= 0.1:
            raise ConfigError(f"{self.where}: action_monitor_rate must be >= 0.1 Hz, got {monitor}")
        self.monitor_period = 1.0 / monitor
        self.state_every = ctx.decimation(self.param("state_publish_rate", 50.0, float))
        self._position = {j: k for k, j in enumerate(self.joints)}
        self._pending: list[Execution] = []
        self.current: Execution | None = None
        self._ref = None                 # (desired q, desired v) for the current sim time
        self._updates = 0
        node = ctx.node
        self.sub = node.create_subscription(JointTrajectoryMsg, f"{name}/joint_trajectory", self.on_trajectory, 10)
        self.state_pub = None
        if JointTrajectoryControllerState is not None:
            self.state_pub = node.create_publisher(JointTrajectoryControllerState, f"{name}/controller_state", 10)
            self._state = JointTrajectoryControllerState()
            self._state.joint_names = list(self.joints)
        self.action = None
        if FollowJointTrajectory is not None and ctx.ros:
            self.action = ActionServer(node, FollowJointTrajectory, f"{name}/follow_joint_trajectory",
                                       execute_callback=self._execute, goal_callback=self._goal_callback,
                                       cancel_callback=lambda _goal: CancelResponse.ACCEPT,
                                       callback_group=ReentrantCallbackGroup())

    def command_interfaces(self):
        return [f"{j}/{i}" for j in self.joints for i in self.commands]

    def state_interfaces(self):
        return [f"{j}/{i}" for j in self.joints for i in self.states]

    # ---------------------------------------------------------------------------- validation (ROS threads)

    def _tolerances(self, names, path_tolerance, goal_tolerance):
        pos = {j: k for k, j in enumerate(names)}
        path = self.path_tol[[self._position[j] for j in names]].copy()
        goal = self.goal_tol[[self._position[j] for j in names]].copy()
        for given, out, what in ((path_tolerance, path, "path_tolerance"), (goal_tolerance, goal, "goal_tolerance")):
            for tol in given:
                if tol.name not in self._position:
                    raise GoalRejected(INVALID_GOAL, f"{what} for unknown joint '{tol.name}'")
                if tol.name not in pos:
                    continue
                if tol.position > 0:
                    out[pos[tol.name]] = tol.position
                elif tol.position < 0:
                    out[pos[tol.name]] = 0.0        # -1: no tolerance
        return path, goal

    def _validated(self, msg: JointTrajectoryMsg, source: str, now: float):
        """(JointTrajectory, hardware indices) of a trajectory message, or GoalRejected with the code."""
        names = list(msg.joint_names)
        if not names:
            raise GoalRejected(INVALID_JOINTS, "empty joint_names")
        unknown = [j for j in names if j not in self._position]
        if unknown:
            raise GoalRejected(INVALID_JOINTS, f"joint(s) {unknown} are not controlled by '{self.name}'; its "
                                               f"joints: {', '.join(self.joints)}")
        if len(set(names)) != len(names):
            raise GoalRejected(INVALID_JOINTS, f"joint(s) listed more than once: {names}")
        if not self.allow_partial and set(names) != set(self.joints):
            missing = [j for j in self.joints if j not in names]
            raise GoalRejected(INVALID_JOINTS, f"joint(s) {missing} missing and allow_partial_joints_goal is "
                                               f"false")
        if not msg.points:
            raise GoalRejected(INVALID_GOAL, "trajectory without points")
        stamp = _seconds(msg.header.stamp)
        end = stamp + _seconds(msg.points[-1].time_from_start)
        if stamp > 0 and end < now:
            raise GoalRejected(OLD_HEADER_TIMESTAMP, f"trajectory starts at t = {stamp:.3f} s and ends at "
                                                     f"t = {end:.3f} s, in the past (now t = {now:.3f} s)")
        last = msg.points[-1]
        if not self.allow_nonzero_end_velocity and len(last.velocities) and any(v != 0.0 for v in last.velocities):
            raise GoalRejected(INVALID_GOAL, "non-zero velocity at the last point and "
                                             "allow_nonzero_velocity_at_trajectory_end is false")
        try:
            traj = validate_trajectory(self.ctx.limits, names, [_seconds(p.time_from_start) for p in msg.points],
                                       [p.positions for p in msg.points], [p.velocities for p in msg.points],
                                       start_time=stamp if stamp > 0 else None, source=source)
        except CommandRejected as exc:
            raise GoalRejected(INVALID_GOAL, str(exc)) from None
        if self.interpolation == "none":
            traj.velocities = None
        if stamp - now > FUTURE_START_WARNING_S:
            self.ctx.node.warn_throttled(f"{source}: trajectory starts {stamp - now:.1f} s in the future "
                                         f"(t = {stamp:.3f} s); it holds until then", key=f"{self.name}/future")
        self.ctx.node.note_clamped(traj.clamped, source)
        return traj, self.ctx.hardware.indices(names)

    def on_trajectory(self, msg: JointTrajectoryMsg):
        """A trajectory on ``<name>/joint_trajectory`` (the subscription; the in-process transport calls it too)."""
        node = self.ctx.node
        source = f"{self.name}/joint_trajectory"
        try:
            traj, idx = self._validated(msg, source, node.sim.t)
        except GoalRejected as exc:
            node.reject_command(CommandRejected("bad_trajectory" if exc.code != INVALID_JOINTS else "unknown_joint",
                                                f"{source}: {exc}"))
            return
        if not self.active:
            node.warn_throttled(f"{source}: controller '{self.name}' is {self.state}: trajectory ignored",
                                key=f"{self.name}/inactive")
            return
        path, goal = self._tolerances(list(msg.joint_names), (), ())
        with self.lock:
            self._pending.append(Execution(traj, idx, path, goal, self.goal_time, self.stopped_velocity))

    # ---------------------------------------------------------------------------- action (ROS threads)

    def _goal_callback(self, goal):
        if not self.active:
            self.ctx.node.warn_throttled(f"{self.name}/follow_joint_trajectory: goal rejected, controller "
                                         f"'{self.name}' is {self.state}", key=f"{self.name}/inactive")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _execute(self, goal_handle):
        goal = goal_handle.request
        result = FollowJointTrajectory.Result()
        node = self.ctx.node
        try:
            traj, idx = self._validated(goal.trajectory, f"{self.name}/follow_joint_trajectory", node.sim.t)
            path, goal_tol = self._tolerances(list(goal.trajectory.joint_names), goal.path_tolerance,
                                              goal.goal_tolerance)
        except GoalRejected as exc:
            result.error_code, result.error_string = exc.code, str(exc)
            node.get_logger().warn(f"{self.name}: goal aborted: {exc}")
            goal_handle.abort()
            return result
        goal_time = _seconds(goal.goal_time_tolerance) or self.goal_time
        ex = Execution(traj, idx, path, goal_tol, goal_time, self.stopped_velocity, goal_handle)
        with self.lock:
            self._pending.append(ex)
        next_feedback = time.monotonic() + self.monitor_period
        while not ex.done.wait(0.01):
            if goal_handle.is_cancel_requested:
                ex.cancel_requested = True
            if time.monotonic() >= next_feedback and ex.feedback is not None:
                next_feedback += self.monitor_period
                goal_handle.publish_feedback(self._feedback(ex.feedback))
            if not node.loop.running:
                ex.finish("aborted", INVALID_GOAL, "the simulation stopped")
        result.error_code, result.error_string = ex.error_code, ex.error_string
        if ex.status == "succeeded":
            goal_handle.succeed()
        elif ex.status == "canceled":
            if not goal_handle.is_cancel_requested:
                goal_handle._update_state(GoalEvent.CANCEL_GOAL)   # preempted: CANCELED like the real controller
            goal_handle.canceled()
        else:
            goal_handle.abort()
        return result

    def _feedback(self, fb):
        t, qd, vd, q, v = fb
        msg = FollowJointTrajectory.Feedback()
        from ..sim_node import stamp
        stamp(t, msg.header.stamp)
        msg.joint_names = [self.joints[k] for k in range(len(self.joints))]
        msg.desired = JointTrajectoryPoint(positions=qd.tolist(), velocities=vd.tolist())
        msg.actual = JointTrajectoryPoint(positions=q.tolist(), velocities=v.tolist())
        msg.error = JointTrajectoryPoint(positions=(qd - q).tolist(), velocities=(vd - v).tolist())
        return msg

    # ---------------------------------------------------------------------------- stepping thread

    def _finish_current(self, sim, status, code=SUCCESSFUL, message="", hold=True):
        ex = self.current
        self.current = None
        if hold:
            q = sim.joint_positions()[self.idx]
            self.ctx.hardware.hold(self.idx, q)
            self._ref = (q, np.zeros_like(q))
        ex.finish(status, code, message)
        if ex.goal_handle is None and code in (PATH_TOLERANCE_VIOLATED, GOAL_TOLERANCE_VIOLATED):
            self.ctx.node.warn_throttled(f"{self.name}: {message}", key=f"{self.name}/tolerance")

    def update(self, sim):
        hw = self.ctx.hardware
        if self._pending:
            with self.lock:
                pending, self._pending = self._pending, []
            for ex in pending:
                if self.current is not None:
                    self._finish_current(sim, "canceled" if ex.goal_handle is not None else "aborted",
                                         INVALID_GOAL,
                                         "Current goal cancelled due to new incoming action."
                                         if ex.goal_handle is not None else
                                         "preempted by a trajectory on the joint_trajectory topic", hold=False)
                q_all, v_all = sim.joint_positions(), sim.joint_velocities()
                start = sim.t if ex.trajectory.start_time is None else ex.trajectory.start_time
                ex.sampler = TrajectorySampler(ex.trajectory, start, q_all[ex.idx], v_all[ex.idx])
                self.current = ex
        ex = self.current
        self._updates += 1
        if ex is None:
            if self.state_every and self._updates % self.state_every == 0:
                self._publish_state(sim, None)
            return
        t = sim.t
        if ex.cancel_requested:
            self._finish_current(sim, "canceled", SUCCESSFUL, "")
            return
        running = t < ex.sampler.end_time
        if running and not ex.monitored:      # nothing reads the state until the last point: sample and write
            pos, vel, _ = ex.sampler.sample(t + self.ctx.time_step * self.ctx.loop.control.every)
            hw.write_position(ex.rows, pos, vel)
            if self.state_every and self._updates % self.state_every == 0:
                self._publish_state(sim, ex)
            return
        q_all, v_all = sim.joint_positions(), sim.joint_velocities()
        q, v = q_all[ex.idx], v_all[ex.idx]
        ref_q, ref_v = (self._ref if self._ref is not None and len(self._ref[0]) == len(ex.idx)
                        else (q, v))
        if ex.feedback is None:
            ref_q, ref_v = q, v
        ex.feedback = (t, ref_q, ref_v, q, v)
        if running:
            err, bad = ex._err, ex._bad
            np.subtract(ref_q, q, out=err)
            np.abs(err, out=err)
            np.greater(err, ex.path_limit, out=bad)      # path_limit: inf where not checked
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                name = self.ctx.hardware.joint_names[ex.idx[k]]
                self._finish_current(sim, "aborted", PATH_TOLERANCE_VIOLATED,
                                     f"path tolerance violated: joint '{name}' error {err[k]:.4g} > "
                                     f"{ex.path_tol[k]:.4g} at t = {t:.3f} s")
                return
        else:
            final = ex.sampler.positions[-1]
            err = np.abs(final - q)
            within = bool(np.all((ex.goal_tol <= 0) | (err <= ex.goal_tol)))
            stopped = ex.stopped_velocity <= 0 or bool(np.all(np.abs(v) <= ex.stopped_velocity))
            if within and stopped:
                self._finish_current(sim, "succeeded", SUCCESSFUL, "", hold=False)
            elif ex.goal_time > 0 and t > ex.sampler.end_time + ex.goal_time:
                bad = (ex.goal_tol > 0) & (err > ex.goal_tol)
                k = int(np.flatnonzero(bad)[0]) if bad.any() else int(np.argmax(np.abs(v)))
                name = self.ctx.hardware.joint_names[ex.idx[k]]
                what = (f"joint '{name}' error {err[k]:.4g} > {ex.goal_tol[k]:.4g}" if bad.any() else
                        f"joint '{name}' still moving at {abs(v[k]):.4g} > {ex.stopped_velocity:.4g}")
                self._finish_current(sim, "aborted", GOAL_TOLERANCE_VIOLATED,
                                     f"goal tolerance violated {ex.goal_time:.3f} s after the last point: {what}")
                return
        pos, vel, _ = ex.sampler.sample(t + self.ctx.time_step * self.ctx.loop.control.every)
        hw.write_position(ex.rows, pos, vel)
        self._ref = (pos.copy(), vel.copy())
        if self.state_every and self._updates % self.state_every == 0:
            self._publish_state(sim, ex)

    def _publish_state(self, sim, ex):
        if self.state_pub is None or not has_readers(self.state_pub):
            return
        msg = self._state               # one message, its points refilled (array.array: no per-element checks)
        stamp(sim.t, msg.header.stamp)
        q, v = sim.joint_positions()[self.idx], sim.joint_velocities()[self.idx]
        hw = self.ctx.hardware
        ref_q, ref_v = hw.position[self.idx], hw.velocity[self.idx]
        for point, pos, vel in ((msg.reference, ref_q, ref_v), (msg.feedback, q, v),
                                (msg.error, ref_q - q, ref_v - v), (msg.output, ref_q, ref_v)):
            point.positions = array.array("d", pos.tobytes())
            point.velocities = array.array("d", vel.tobytes())
        msg.speed_scaling_factor = 1.0
        self.state_pub.publish(msg)

    def on_activate(self, sim):
        q = sim.joint_positions()[self.idx]
        self.ctx.hardware.hold(self.idx, q)        # set_hold_position, as the real controller on activation
        self._ref = None

    def on_deactivate(self, sim):
        if self.current is not None:
            self._finish_current(sim, "aborted", INVALID_GOAL, f"controller '{self.name}' deactivated")
        else:
            self.ctx.hardware.hold(self.idx, sim.joint_positions()[self.idx])
        with self.lock:
            pending, self._pending = self._pending, []
        for ex in pending:
            ex.finish("aborted", INVALID_GOAL, f"controller '{self.name}' deactivated")

    def preempt(self, indices: set):
        ex = self.current
        if ex is not None and indices & set(ex.idx.tolist()):
            self.current = None
            self._ref = None
            ex.finish("aborted", INVALID_GOAL, "preempted by a command on the joints (joint_command topic)")

    def reset(self, sim):
        if self.current is not None:
            self.current.finish("aborted", INVALID_GOAL, "simulation reset")
            self.current = None
        with self.lock:
            pending, self._pending = self._pending, []
        for ex in pending:
            ex.finish("aborted", INVALID_GOAL, "simulation reset")
        self._ref = None

    def shutdown(self):
        if self.current is not None:
            self.current.finish("aborted", INVALID_GOAL, "the simulation stopped")
