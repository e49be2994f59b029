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
  tolerance for an unknown joint, more than ``MAX_TRAJECTORY_POINTS`` points: INVALID_GOAL. (The real controller *rejects* such goals; here they are
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
* Memory: a trajectory holds at most ``MAX_TRAJECTORY_POINTS`` (100 000) points (a longer one is refused before
  any per-point work: the action with INVALID_GOAL and the bound in the reason, the topic with a throttled
  warning); when a goal ends its points are released (``Execution.finish`` drops the validated trajectory and
  the sampler; the transport drops the goal request's points, which rclpy keeps with the goal handle for the
  action server's ``result_timeout``).
* Feedback at ``action_monitor_rate`` (Hz); ``controller_state`` at ``state_publish_rate`` (Hz, default 50:
  the real controller publishes every update).

The topic, the action server and ``controller_state`` are the transport's (ros/controller_io.py); this module is
the controller itself: goals checked (``validated``), handed over (``submit``) and executed in ``update``.

Command interfaces: ``position`` (optionally with ``velocity``: the interpolated velocity is the feed-forward
of the simulated joint's PD); ``effort`` alone or ``velocity`` alone: the real controller's closed loop, every
update ``command = ff_velocity_scale * v_desired(t + period) + PID(q_desired(t) - q, v_desired(t) - v)`` per
joint (JointTrajectoryController::update with ``use_closed_loop_pid_adapter_``; control_toolbox's Pid in
pid.py) with the gains ``gains.<joint>.{p, i, d, i_clamp, i_clamp_max, i_clamp_min, ff_velocity_scale,
u_clamp_max, u_clamp_min, antiwindup_strategy, tracking_time_constant, error_deadband}`` (Jazzy's parameters),
written to the joints' effort (or velocity) command interfaces; with no trajectory the PID holds the last
desired position. The effort is what the robot's torque interface gets: the hardware adds its gravity
compensation g(q) (node parameter ``gravity_compensation``, on by default), as the FR3/Panda (libfranka's torque
control compensates gravity: franka_ros2's GravityCompensationExampleController writes 0) and the LBR's FRI
torque mode do. Joints without any ``gains.<joint>.*`` get default gains derived from the joint-space inertia
M_jj at the start configuration (``default_gains``; a start-up warning lists them and says how to set them).
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pinocchio as pin

from ...errors import ConfigError, unknown_choice
from .. import control_kernels as kernels
from ..command_validation import CommandRejected, TrajectorySampler, validate_trajectory
from ..parameters import Parameter, ParameterTable
from ..loaned_interfaces import InterfaceNotClaimed
from .base import IDLE_UPDATE, NO_IO, UPDATE_RATE, Controller, ReturnType
from .pid import STRATEGIES, JointPid

SUCCESSFUL, INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP, PATH_TOLERANCE_VIOLATED, \
    GOAL_TOLERANCE_VIOLATED = 0, -1, -2, -3, -4, -5
FUTURE_START_WARNING_S = 60.0      # a trajectory starting later than this is executed with a warning
# default PID gains (joints without gains.<joint>.*, ``default_gains``): effort, critical damping of each joint's
# inertia at DEFAULT_BANDWIDTH (rad/s; 20 Hz: a joint's Coulomb friction f_c then holds it at most f_c / (m w^2)
# from its target, ~1 mrad for the iiwa's 0.05 N*m on its lightest joint, 4 mrad at 10 Hz); velocity, p =
# DEFAULT_VELOCITY_BANDWIDTH (1/s) around the drive's own velocity loop; both lowered at low update rates so that
# the sampled loop stays well inside its stability limit
DEFAULT_BANDWIDTH = 2.0 * math.pi * 20.0
DEFAULT_VELOCITY_BANDWIDTH = 2.0 * math.pi * 10.0
DEFAULT_BANDWIDTH_PERIODS = 0.25
GAINS = ("p", "i", "d", "i_clamp", "i_clamp_max", "i_clamp_min", "ff_velocity_scale", "u_clamp_max",
         "u_clamp_min", "antiwindup_strategy", "tracking_time_constant", "error_deadband")


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
        self.local = None                       # closed loop: the joints' positions in the controller's joints
        self.sampler: TrajectorySampler | None = None
        self.cancel_requested = False
        self.done = threading.Event()
        self.on_done = None                     # fn() called once when the goal ends (any thread)
        self.status, self.error_code, self.error_string = "", SUCCESSFUL, ""
        self._feedback = None                   # (t, block of rows desired q, desired v, actual q, actual v)
        # the hardware rows as a slice when the joints are consecutive (cheaper writes every update); the
        # path tolerance with inf where not checked; monitored: the state is needed while the trajectory runs
        # (feedback of an action goal, path tolerance), else the update only samples and writes
        # (the ndarray methods, not the numpy functions' wrappers: a trajectory a tick is sent to a gripper)
        idx = np.asarray(idx)
        consecutive = idx.size > 0 and bool((idx[1:] - idx[:-1] == 1).all())
        self.rows = slice(int(idx[0]), int(idx[-1]) + 1) if consecutive else idx
        checked = np.asarray(path_tol) > 0
        self.monitored = goal_handle is not None or bool(checked.any())
        self.hw_idx = np.ascontiguousarray(idx, dtype=np.int64)
        # the compiled update's rows (driver/control_kernels: REF_Q, REF_V, MEASURED_Q, MEASURED_V, PATH_LIMIT)
        self.monitor = np.zeros((5, len(idx)))
        self.path_limit = self.monitor[kernels.PATH_LIMIT]
        self.path_limit[:] = np.where(checked, path_tol, np.inf)
        self._err = np.empty(len(idx))
        self._bad = np.empty(len(idx), dtype=bool)

    @property
    def feedback(self):
        """(t, desired q, desired v, actual q, actual v) at the last monitored update (s, rad or m, rad/s or m/s;
        arrays that the stepping thread no longer writes), or None before it."""
        f = self._feedback
        if f is None:
            return None
        t, rows = f
        return t, rows[0], rows[1], rows[2], rows[3]

    def keep_feedback(self, t: float, rows: np.ndarray) -> None:
        """(stepping thread) The feedback at ``t``: ``rows`` desired q, desired v, actual q, actual v (kept as given:
        a new array each time; one attribute, so that a transport thread reads a consistent tuple)."""
        self._feedback = (t, rows)

    def finish(self, status: str, code: int = SUCCESSFUL, message: str = "") -> None:
        """The goal ends: its result is kept, its points (the validated trajectory, the sampler) are released
        (the Execution itself lives on with the transport until the result is sent)."""
        if not self.done.is_set():
            self.status, self.error_code, self.error_string = status, code, message
            self.trajectory = self.sampler = None
            self.done.set()
            if self.on_done is not None:      # the transport's wake-up (thread-safe)
                self.on_done()


def default_gains(ctx, idx: np.ndarray, interface: str, period: float):
    """(p, d, ff_velocity_scale) arrays for the joints ``idx`` (hardware indices) of a closed-loop trajectory
    controller without gains.

    Effort: with M the joint-space inertia of these joints at the current configuration (CRBA, armature included)
    and m_j = 1 / (M^-1)_jj the inertia joint j moves when the others are free (<= M_jj: an arm whose axes nearly
    align, as the iiwa's 1, 3, 5, 7 at its start pose, has m_j far below M_jj, and gains on M_jj make the sampled
    loop unstable there), p = m_j w^2 (N*m/rad), d = 2 m_j w (critical damping of that joint), ff 0 (the real
    default), at w = min(DEFAULT_BANDWIDTH, DEFAULT_BANDWIDTH_PERIODS / (period * l)) rad/s, l the largest
    eigenvalue of M^-1 diag(m) (the coupled modes' stiffening, ~2-3 for the presets): the fastest mode keeps
    d l period / m <= 2 DEFAULT_BANDWIDTH_PERIODS, well inside the explicit loop's limit of 2. Velocity: p =
    min(DEFAULT_VELOCITY_BANDWIDTH, DEFAULT_BANDWIDTH_PERIODS / period) (1/s), d 0, ff 1 (the desired velocity
    as the command's feed-forward)."""
    n = len(idx)
    if interface == "velocity":
        return np.full(n, min(DEFAULT_VELOCITY_BANDWIDTH, DEFAULT_BANDWIDTH_PERIODS / period)), np.zeros(n), np.ones(n)
    model = ctx.model
    pm = model.pin_model
    q = pin.neutral(pm)
    q[np.asarray(model.joint_q_index)] = ctx.state.position
    vi = np.asarray(model.joint_v_index)[idx]
    m_full = pin.crba(pm, pm.createData(), q)
    m_full = np.triu(m_full) + np.triu(m_full, 1).T           # crba fills the upper triangle
    m_inv = np.linalg.inv(m_full[np.ix_(vi, vi)])
    m_eff = 1.0 / np.diag(m_inv)
    root = np.sqrt(m_eff)
    stiffening = float(np.linalg.eigvalsh(root[:, None] * m_inv * root[None, :]).max())
    w = min(DEFAULT_BANDWIDTH, DEFAULT_BANDWIDTH_PERIODS / (period * stiffening))
    return m_eff * w * w, 2.0 * m_eff * w, np.zeros(n)


class JointTrajectoryController(Controller):
    TYPES = ("joint_trajectory_controller/JointTrajectoryController",)
    # points per trajectory (goal or topic message): 100 s at 1 kHz. A bound on what one message may pin in the
    # node: rclpy turns a 100k-point goal into ~60-80 MB of Python objects (each point its own message)
    MAX_TRAJECTORY_POINTS = 100_000
    PARAMETERS = ParameterTable(
        Parameter("joints", "string_array", required=True, description="the joints the controller commands"),
        Parameter("command_joints", "string_array", [], description="must equal 'joints' (controller chains and "
                  "passive joints are not emulated)"),
        Parameter("command_interfaces", "string_array", ["position"],
                  description="[position], [position, velocity] (the velocity is the PD's feed-forward), "
                  "[effort] or [velocity] (the PID of 'gains')"),
        Parameter("gains.{joint}.p", "double", 0.0, "N*m/rad (effort) or 1/s (velocity)",
                  "proportional gain of the joint's PID (effort or velocity command interface)", lower=0.0),
        Parameter("gains.{joint}.i", "double", 0.0, "N*m/(rad*s) or 1/s^2", "integral gain", lower=0.0),
        Parameter("gains.{joint}.d", "double", 0.0, "N*m*s/rad or 1 (velocity)", "derivative gain (on the "
                  "velocity error)", lower=0.0),
        Parameter("gains.{joint}.i_clamp", "double", math.inf, "N*m or rad/s", "symmetric bound of the integral "
                  "term (deprecated in Jazzy for i_clamp_max/min)", lower=0.0, finite=False),
        Parameter("gains.{joint}.i_clamp_max", "double", math.inf, "N*m or rad/s", "upper bound of the integral "
                  "term (else i_clamp)", finite=False),
        Parameter("gains.{joint}.i_clamp_min", "double", -math.inf, "N*m or rad/s", "lower bound of the integral "
                  "term (else -i_clamp)", finite=False),
        Parameter("gains.{joint}.ff_velocity_scale", "double", 0.0, "N*m*s/rad or 1",
                  "feed-forward of the desired velocity", lower=0.0),
        Parameter("gains.{joint}.u_clamp_max", "double", math.inf, "N*m or rad/s", "upper bound of the PID's "
                  "output", finite=False),
        Parameter("gains.{joint}.u_clamp_min", "double", -math.inf, "N*m or rad/s", "lower bound of the PID's "
                  "output", finite=False),
        Parameter("gains.{joint}.antiwindup_strategy", "string", "legacy", choices=STRATEGIES,
                  description="control_toolbox's anti-windup of the integral term"),
        Parameter("gains.{joint}.tracking_time_constant", "double", 0.0, "s", "back_calculation's time constant "
                  "(0: sqrt(d / i), or p / i without d)", lower=0.0),
        Parameter("gains.{joint}.error_deadband", "double", 0.0, "rad or m", "no integration while |error| <= it",
                  lower=0.0),
        Parameter("state_interfaces", "string_array", ["position", "velocity"],
                  description="position and optionally velocity, acceleration"),
        Parameter("allow_partial_joints_goal", "bool", False, description="goals may name a subset of 'joints'"),
        Parameter("allow_nonzero_velocity_at_trajectory_end", "bool", False,
                  description="a goal's last point may have a non-zero velocity"),
        Parameter("interpolation_method", "string", "splines", choices=("splines", "none"),
                  description="splines: cubic (velocities given) or linear; none: hold each point"),
        Parameter("constraints.stopped_velocity_tolerance", "double", 0.01, "rad/s or m/s",
                  "speed under which a joint counts as stopped at the goal (<= 0: not checked)"),
        Parameter("constraints.goal_time", "double", 0.0, "s", "time after the last point to meet the goal "
                  "tolerance (0: wait forever)", lower=0.0),
        Parameter("constraints.{joint}.trajectory", "double", 0.0, "rad or m",
                  "path tolerance until the last point (<= 0: not checked)"),
        Parameter("constraints.{joint}.goal", "double", 0.0, "rad or m", "goal tolerance (<= 0: not checked)"),
        Parameter("action_monitor_rate", "double", 20.0, "Hz", "feedback rate of an action goal", lower=0.1),
        Parameter("state_publish_rate", "double", 50.0, "Hz", "rate of controller_state (<= 0: off)"),
        Parameter("open_loop_control", "bool", False, description="not emulated (the PD always closes the loop)",
                  emulated=False),
        Parameter("interpolate_from_desired_state", "bool", False, emulated=False,
                  description="not emulated: a trajectory starts from the measured state"),
        Parameter("set_last_command_interface_value_as_state_on_activation", "bool", True, emulated=False,
                  description="not emulated: activation holds the measured position"),
        UPDATE_RATE,
    )

    def __init__(self, name, ctype, params, ctx):
        super().__init__(name, ctype, params, ctx)
        p = self.parameters("joints")
        self.joints = self.joint_list(p["joints"])
        command_joints = p["command_joints"]
        if command_joints and command_joints != self.joints:
            raise ConfigError(f"{self.where}: 'command_joints' different from 'joints' (controller chains, "
                              f"passive joints) is not emulated")
        commands = p["command_interfaces"]
        if commands not in (["position"], ["position", "velocity"], ["velocity", "position"], ["effort"],
                            ["velocity"]):
            raise ConfigError(f"{self.where}: command_interfaces {commands} are not emulated; supported: "
                              f"[position] and [position, velocity] (the simulated joint's PD tracks the "
                              f"interpolated position with the velocity as feed-forward), [effort] and [velocity] "
                              f"(the controller's PID with its 'gains')")
        self.commands = commands
        states = p["state_interfaces"]
        bad = [s for s in states if s not in ("position", "velocity", "acceleration")]
        if bad or "position" not in states:
            raise ConfigError(f"{self.where}: state_interfaces must include position (and may include velocity, "
                              f"acceleration), got {states}")
        self.states = states
        self.idx = ctx.command.indices(self.joints)
        # closed loop (the real controller's use_closed_loop_pid_adapter_): effort or velocity alone
        self.closed_loop = commands[0] if len(commands) == 1 and commands[0] in ("effort", "velocity") else None
        self.pid: JointPid | None = None
        self.gains: dict = {}
        if self.closed_loop:
            if "velocity" not in states:      # the real controller's on_configure check
                raise ConfigError(f"{self.where}: command_interfaces [{self.closed_loop}] need the 'position' and "
                                  f"'velocity' state interfaces, got {states}")
            self._configure_pid(p)
        self.allow_partial = p["allow_partial_joints_goal"]
        self.allow_nonzero_end_velocity = p["allow_nonzero_velocity_at_trajectory_end"]
        self.interpolation = p["interpolation_method"]
        self.stopped_velocity = p["constraints.stopped_velocity_tolerance"]
        self.goal_time = p["constraints.goal_time"]
        self.path_tol = np.array([p[f"constraints.{j}.trajectory"] for j in self.joints])
        self.goal_tol = np.array([p[f"constraints.{j}.goal"] for j in self.joints])
        valid = {"constraints.stopped_velocity_tolerance", "constraints.goal_time"} | {
            f"constraints.{j}.{k}" for j in self.joints for k in ("trajectory", "goal")}
        typos = sorted(k for k in self.params if k.startswith("constraints.") and k not in valid)
        if typos:          # the real controller ignores them: a tolerance that silently does not apply
            raise ConfigError(f"{self.where}: " + unknown_choice("parameter", typos[0], valid))
        self.monitor_period = 1.0 / p["action_monitor_rate"]
        self.state_every = ctx.decimation(p["state_publish_rate"])
        self._position = {j: k for k, j in enumerate(self.joints)}
        self._own_tolerances: dict = {}     # tolerances(): name tuple -> (path_tol, goal_tol, their rows)
        self._pending: list[Execution] = []
        self.current: Execution | None = None
        self._updates = 0

    def _configure_pid(self, p: dict) -> None:
        """The PID of the closed loop from ``gains.<joint>.*`` (given, checked by the table) and the defaults of
        the joints without any (``default_gains``, with a start-up warning)."""
        n = len(self.joints)
        given = {j for j in self.joints if any(k.startswith(f"gains.{j}.") for k in self.params)}
        g = {k: np.array([p[f"gains.{j}.{k}"] for j in self.joints]) for k in GAINS if k != "antiwindup_strategy"}
        strategy = [p[f"gains.{j}.antiwindup_strategy"] for j in self.joints]
        for k in ("i_clamp", "i_clamp_max", "i_clamp_min", "u_clamp_max", "u_clamp_min"):
            nan = np.flatnonzero(np.isnan(g[k]))
            if nan.size:
                raise ConfigError(f"{self.where}: parameter 'gains.{self.joints[nan[0]]}.{k}': must be a number "
                                  f"(.inf for none), got nan")
        i_max = np.where(np.isfinite(g["i_clamp_max"]), g["i_clamp_max"], g["i_clamp"])
        i_min = np.where(np.isfinite(g["i_clamp_min"]), g["i_clamp_min"], -g["i_clamp"])
        for k, (lo, hi, what) in enumerate(zip(i_min, i_max, ["i_clamp_min > i_clamp_max"] * n)):
            if lo > hi:
                raise ConfigError(f"{self.where}: gains of joint '{self.joints[k]}': {what} ({lo:g} > {hi:g})")
        bad = np.flatnonzero(g["u_clamp_min"] >= g["u_clamp_max"])
        if bad.size:
            j = self.joints[bad[0]]
            raise ConfigError(f"{self.where}: gains of joint '{j}': u_clamp_min ({g['u_clamp_min'][bad[0]]:g}) must "
                              f"be less than u_clamp_max ({g['u_clamp_max'][bad[0]]:g})")
        missing = [k for k, j in enumerate(self.joints) if j not in given]
        if missing:
            period = self.ctx.decimation(self.ctx.update_rate) * self.ctx.time_step   # the manager's period
            kp, kd, ff = default_gains(self.ctx, self.idx[missing], self.closed_loop, period)
            g["p"][missing], g["d"][missing], g["ff_velocity_scale"][missing] = kp, kd, ff
            names = [self.joints[k] for k in missing]
            self.ctx.transport.warn_throttled(
                f"{self.where}: no PID gains for joint(s) {', '.join(names)} (command_interfaces "
                f"[{self.closed_loop}]); using defaults from the joint inertia (critical damping): p "
                f"{np.round(kp, 3).tolist()}, d {np.round(kd, 3).tolist()}, ff_velocity_scale {np.round(ff, 3).tolist()}; "
                f"set them in the controller's parameters as gains.<joint>.{{p, i, d, i_clamp, ff_velocity_scale}}",
                key=f"{self.name}/default_gains")
        self.gains = {"p": g["p"], "i": g["i"], "d": g["d"], "ff_velocity_scale": g["ff_velocity_scale"],
                      "i_min": i_min, "i_max": i_max}
        self.pid = JointPid(g["p"], g["i"], g["d"], i_min, i_max, g["u_clamp_min"], g["u_clamp_max"], strategy,
                            g["tracking_time_constant"], g["error_deadband"])
        self._ff = g["ff_velocity_scale"]
        self._local = {int(i): k for k, i in enumerate(self.idx)}    # hardware index -> position in joints
        self._q, self._v = np.zeros(n), np.zeros(n)                   # measured (state interfaces)
        self._des_q, self._des_v = np.zeros(n), np.zeros(n)           # desired at the update's time
        self._next_q, self._next_v = np.zeros(n), np.zeros(n)         # desired one period later
        self._err_q, self._err_v, self._u = np.zeros(n), np.zeros(n), np.zeros(n)
        self._holding = False          # the PID writes the joints (False: preempted, or inactive)

    def command_interfaces(self):
        return [f"{j}/{i}" for j in self.joints for i in self.commands]

    def state_interfaces(self):
        return [f"{j}/{i}" for j in self.joints for i in self.states]

    # ---------------------------------------------------------------------------- validation (ROS threads)

    def tolerances(self, names, path_tolerance, goal_tolerance):
        """(path, goal) tolerances (rad or m) of the joints ``names``: the controller's, replaced by a goal's
        JointTolerance entries (> 0: that value, < 0: none, 0: the controller's); GoalRejected for an unknown
        joint or a non-finite value."""
        if not path_tolerance and not goal_tolerance:       # the controller's own (a topic's trajectory): per names
            hit = self._own_tolerances.get(tuple(names))
            if hit is None or hit[0] is not self.path_tol or hit[1] is not self.goal_tol:
                rows = [self._position[j] for j in names]
                hit = (self.path_tol, self.goal_tol, self.path_tol[rows], self.goal_tol[rows])
                if len(self._own_tolerances) < 16:
                    self._own_tolerances[tuple(names)] = hit
            return hit[2].copy(), hit[3].copy()
        pos = {j: k for k, j in enumerate(names)}
        path = self.path_tol[[self._position[j] for j in names]].copy()
        goal = self.goal_tol[[self._position[j] for j in names]].copy()
        for given, out, what in ((path_tolerance, path, "path_tolerance"), (goal_tolerance, goal, "goal_tolerance")):
            for tol in given:
                if tol.name not in self._position:
                    raise GoalRejected(INVALID_GOAL, f"{what} for unknown joint '{tol.name}'")
                if tol.name not in pos:
                    continue
                if not math.isfinite(tol.position):
                    raise GoalRejected(INVALID_GOAL, f"{what} of joint '{tol.name}' is not finite: {tol.position}")
                if tol.position > 0:
                    out[pos[tol.name]] = tol.position
                elif tol.position < 0:
                    out[pos[tol.name]] = 0.0        # -1: no tolerance
        return path, goal

    def _validated(self, msg, source: str, now: float):
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
        if len(msg.points) > self.MAX_TRAJECTORY_POINTS:
            raise GoalRejected(INVALID_GOAL, f"{len(msg.points)} points, more than MAX_TRAJECTORY_POINTS = "
                                             f"{self.MAX_TRAJECTORY_POINTS} per trajectory (send it in parts)")
        stamp = _seconds(msg.header.stamp)
        end = stamp + _seconds(msg.points[-1].time_from_start)
        if stamp > 0 and end < now:
            raise GoalRejected(OLD_HEADER_TIMESTAMP, f"trajectory starts at t = {stamp:.3f} s and ends at "
                                                     f"t = {end:.3f} s, in the past (now t = {now:.3f} s)")
        last = msg.points[-1]
        # (a non-finite velocity is left to validate_trajectory: "non-finite")
        if not self.allow_nonzero_end_velocity and len(last.velocities) and any(
                v != 0.0 and math.isfinite(v) for v in last.velocities):
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
            self.ctx.transport.warn_throttled(f"{source}: trajectory starts {stamp - now:.1f} s in the future "
                                         f"(t = {stamp:.3f} s); it holds until then", key=f"{self.name}/future")
        self.ctx.transport.note_clamped(traj.clamped, source)
        return traj, self.ctx.command.indices(names)

    def validated(self, msg, source: str):
        """(JointTrajectory, hardware indices) of a trajectory message (trajectory_msgs/JointTrajectory fields)
        at the current sim time, or GoalRejected with its error code (any thread)."""
        return self._validated(msg, source, self.ctx.state.time)

    def on_trajectory(self, msg):
        """A trajectory on ``<name>/joint_trajectory`` (the transport's subscription): checked, then executed
        from the next update (a bad one is rejected with a warning, not executed)."""
        transport = self.ctx.transport
        source = f"{self.name}/joint_trajectory"
        try:
            traj, idx = self.validated(msg, source)
        except GoalRejected as exc:
            transport.reject_command(CommandRejected("bad_trajectory" if exc.code != INVALID_JOINTS
                                                     else "unknown_joint", f"{source}: {exc}"))
            return
        if not self.active:
            transport.warn_throttled(f"{source}: controller '{self.name}' is {self.state}: trajectory ignored",
                                     key=f"{self.name}/inactive")
            return
        path, goal = self.tolerances(list(msg.joint_names), (), ())
        self.submit(Execution(traj, idx, path, goal, self.goal_time, self.stopped_velocity))

    def goal(self, goal, goal_handle):
        """The Execution of a FollowJointTrajectory goal (its fields), or GoalRejected with its error code."""
        source = f"{self.name}/follow_joint_trajectory"
        traj, idx = self.validated(goal.trajectory, source)
        path, goal_tol = self.tolerances(list(goal.trajectory.joint_names), goal.path_tolerance,
                                         goal.goal_tolerance)
        goal_time = _seconds(goal.goal_time_tolerance) or self.goal_time
        return Execution(traj, idx, path, goal_tol, goal_time, self.stopped_velocity, goal_handle)

    def submit(self, ex: "Execution") -> None:
        """Hand an Execution over to the stepping thread: it starts at the next update (preempting the current
        one)."""
        with self.lock:
            self._pending.append(ex)

    # ---------------------------------------------------------------------------- stepping thread

    def _finish_current(self, status, code=SUCCESSFUL, message="", hold=True):
        ex = self.current
        self.current = None
        if hold:
            q = self.ctx.state.position[self.idx]
            self._hold(q)
        ex.finish(status, code, message)
        if ex.goal_handle is None and code in (PATH_TOLERANCE_VIOLATED, GOAL_TOLERANCE_VIOLATED):
            self.ctx.transport.warn_throttled(f"{self.name}: {message}", key=f"{self.name}/tolerance")

    def _hold(self, q: np.ndarray) -> None:
        """Hold the measured positions ``q`` (of every joint of the controller): position mode at q, or, closed
        loop, the PID's desired state (q, 0) from now on (the real controller's hold trajectory)."""
        if self.pid is None:
            self.loan.hold(self.idx, q)
            return
        self._des_q[:] = q
        self._next_q[:] = q
        self._des_v[:] = 0.0
        self._next_v[:] = 0.0
        self._holding = True

    def _command(self, ex: Execution, sampler: TrajectorySampler, t: float, period: float):
        """The trajectory's sample one period ahead (position, velocity: reused arrays) written to the command
        interfaces (position mode), or kept with the sample at ``t`` for the closed loop's update."""
        if self.pid is None:
            pos, vel, _ = sampler.sample(t + period)
            self.loan.write_position(ex.rows, pos, vel)
            return pos, vel
        local = ex.local
        pos, vel, _ = sampler.sample(t)
        self._des_q[local] = pos
        self._des_v[local] = vel
        pos, vel, _ = sampler.sample(t + period)
        self._next_q[local] = pos
        self._next_v[local] = vel
        return pos, vel

    def _close_loop(self, period: float) -> None:
        """command = ff_velocity_scale * v_desired(t + period) + PID(q_desired - q, v_desired - v) of every joint,
        to the effort (on the hardware's gravity compensation) or velocity command interfaces."""
        state, hw = self.ctx.state, self.loan
        np.take(state.position, self.idx, out=self._q)
        np.take(state.velocity, self.idx, out=self._v)
        np.subtract(self._des_q, self._q, out=self._err_q)
        np.subtract(self._des_v, self._v, out=self._err_v)
        u = self.pid.compute(self._err_q, self._err_v, period)
        np.multiply(self._ff, self._next_v, out=self._u)
        self._u += u
        if self.closed_loop == "effort":
            hw.write_effort(self.idx, self._u, gravity_compensated=True)
        else:
            hw.write_velocity(self.idx, self._u)

    def update(self, time, period):
        self._update(time, period)
        if self.pid is not None and self._holding:
            self._close_loop(period)
        return ReturnType.OK

    def _start_pending(self, time: float) -> None:
        """The trajectories handed over since the last update start at ``time`` (s), the last one current (each
        preempting the one before)."""
        state = self.ctx.state
        with self.lock:
            pending, self._pending = self._pending, []
        for ex in pending:
            if ex.done.is_set():          # ended before it started (the simulation stopped)
                continue
            if self.current is not None:
                self._finish_current("canceled" if ex.goal_handle is not None else "aborted",
                                     INVALID_GOAL,
                                     "Current goal cancelled due to new incoming action."
                                     if ex.goal_handle is not None else
                                     "preempted by a trajectory on the joint_trajectory topic", hold=False)
            start = time if ex.trajectory.start_time is None else ex.trajectory.start_time
            ex.sampler = TrajectorySampler(ex.trajectory, start, state.position[ex.idx], state.velocity[ex.idx])
            ex.trajectory = None          # the sampler has its own copy of the points
            if self.pid is not None:
                ex.local = np.fromiter((self._local[int(i)] for i in ex.idx), dtype=int, count=len(ex.idx))
                self._holding = True
            self.current = ex

    def _update(self, time, period):
        hw, state = self.ctx.command, self.ctx.state
        if self._pending:
            self._start_pending(time)
        ex = self.current
        sampler = ex.sampler if ex is not None else None
        if ex is not None and sampler is None:  # finished by another thread (the simulation stopped)
            self.current = ex = None
        self._updates += 1
        publish = self.state_every and self._updates % self.state_every == 0
        if ex is None:
            if publish:
                self.io.publish_state(None)
            return
        t = time
        if ex.cancel_requested:
            self._finish_current("canceled", SUCCESSFUL, "")
            return
        running = t < sampler.end_time
        if running and self.pid is None:
            # position mode: state, path tolerance, sample and write in one compiled pass
            self._run(ex, sampler, t, period)
            if publish:
                self.io.publish_state(ex)
            return
        if running and not ex.monitored:      # nothing reads the state until the last point: sample and write
            self._command(ex, sampler, t, period)
            if publish:
                self.io.publish_state(ex)
            return
        q, v = state.position[ex.idx], state.velocity[ex.idx]
        # the desired state at t: the sample of the previous update (one period ahead then), else the measured one
        if ex.feedback is None:
            ref_q, ref_v = q, v
        else:
            ref_q, ref_v = sampler.out.copy()
        ex.keep_feedback(t, np.stack((ref_q, ref_v, q, v)))
        if running:
            err, bad = ex._err, ex._bad
            np.subtract(ref_q, q, out=err)
            np.abs(err, out=err)
            np.greater(err, ex.path_limit, out=bad)      # path_limit: inf where not checked
            if bad.any():
                self._path_violated(ex, int(np.flatnonzero(bad)[0]), err, t)
                return
        else:
            final = sampler.positions[-1]
            err = np.abs(final - q)
            within = bool(np.all((ex.goal_tol <= 0) | (err <= ex.goal_tol)))
            stopped = ex.stopped_velocity <= 0 or bool(np.all(np.abs(v) <= ex.stopped_velocity))
            if within and stopped:
                self._finish_current("succeeded", SUCCESSFUL, "", hold=False)
            elif ex.goal_time > 0 and t > sampler.end_time + ex.goal_time:
                bad = (ex.goal_tol > 0) & (err > ex.goal_tol)
                k = int(np.flatnonzero(bad)[0]) if bad.any() else int(np.argmax(np.abs(v)))
                name = hw.joint_names[ex.idx[k]]
                what = (f"joint '{name}' error {err[k]:.4g} > {ex.goal_tol[k]:.4g}" if bad.any() else
                        f"joint '{name}' still moving at {abs(v[k]):.4g} > {ex.stopped_velocity:.4g}")
                self._finish_current("aborted", GOAL_TOLERANCE_VIOLATED,
                                     f"goal tolerance violated {ex.goal_time:.3f} s after the last point: {what}")
                return
        self._command(ex, sampler, t, period)     # (after a success: the last point, held)
        if publish:
            self.io.publish_state(ex)

    def _run(self, ex: Execution, sampler: TrajectorySampler, t: float, period: float) -> None:
        """A running trajectory in position mode (driver/control_kernels.trajectory_update): when monitored (an
        action goal's feedback, a path tolerance), the feedback (desired: the previous update's sample, one period
        ahead then, or the measured state at the first update) and the path tolerance; then the sample one period
        ahead written to the command interfaces (position mode)."""
        state = self.ctx.state
        hw_mode, hw_values = self.loan.buffers(ex.hw_idx)       # (checked: rows it claimed)
        if ex.monitored:
            monitor = kernels.MONITORED if ex._feedback is not None else kernels.MONITORED_FIRST
            values = state.motion()
        else:
            monitor, values = kernels.UNMONITORED, state.values
        k = kernels.trajectory_update(round((t + period) * 1e9) - sampler.start_ns, sampler.positions,
                                      sampler.positions if sampler.velocities is None else sampler.velocities,
                                      sampler.ints, sampler.out, ex.hw_idx, hw_mode, hw_values, monitor,
                                      ex.monitor, values)
        if monitor != kernels.UNMONITORED:
            ex.keep_feedback(t, ex.monitor[:4].copy())
        if k >= 0:
            err = np.abs(ex.monitor[kernels.REF_Q] - ex.monitor[kernels.MEASURED_Q])
            self._path_violated(ex, k, err, t)
            return
        self.loan.written()

    def compiled_update(self, time: float, due: bool):
        """(driver/control_period.ControlPeriod) The update at ``time`` (s) as a compiled pass: IDLE_UPDATE without
        a trajectory (``update`` would only count itself), the Execution of a running position-mode trajectory that
        no action goal waits on and that has not been cancelled (``update`` would be ``_run``: the state, the path
        tolerance, the sample one period ahead written; control_kernels.period_step does the same), else None: the
        closed loop, a controller_state to publish (a transport attached), the trajectory's end (goal checks), rows
        it did not claim (its update raises InterfaceNotClaimed). When the update is ``due`` at this step, the
        trajectories handed over since the last one start first, as ``update`` starts them (its Python part)."""
        if self.pid is not None or (self.state_every and self.io is not NO_IO):
            return None
        if self._pending:
            if not due:
                return None
            self._start_pending(time)
        ex = self.current
        if ex is None:
            return IDLE_UPDATE
        sampler = ex.sampler
        if sampler is None or ex.cancel_requested or ex.goal_handle is not None or not time < sampler.end_time:
            return None
        try:
            self.loan.buffers(ex.hw_idx)       # (the claim check of ``_run``)
        except InterfaceNotClaimed:
            return None
        return ex

    def count_updates(self, n: int) -> None:
        """(ControlPeriod) ``n`` updates ran compiled (``compiled_update``): counted for the controller_state's
        decimation."""
        self._updates += n

    def _path_violated(self, ex: Execution, k: int, err: np.ndarray, t: float) -> None:
        name = self.ctx.command.joint_names[ex.idx[k]]
        self._finish_current("aborted", PATH_TOLERANCE_VIOLATED,
                             f"path tolerance violated: joint '{name}' error {err[k]:.4g} > "
                             f"{ex.path_tol[k]:.4g} at t = {t:.3f} s")

    def on_activate(self):
        q = self.ctx.state.position[self.idx]
        self.loan.hold(self.idx, q)               # set_hold_position, as the real controller on activation
        if self.pid is not None:                  # closed loop: the PID holds q from the first update
            self.pid.reset()                      # (the real controller resets its PIDs on activation)
            self._hold(q)

    def on_deactivate(self):
        if self.current is not None:
            self._finish_current("aborted", INVALID_GOAL, f"controller '{self.name}' deactivated")
        if self.pid is not None:
            self._holding = False
            self.pid.reset()
        # the joints hold their position (the simulated drive's PD; the real controller writes 0 effort or
        # velocity, what the hardware then does is the robot's)
        self.loan.hold(self.idx, self.ctx.state.position[self.idx])
        with self.lock:
            pending, self._pending = self._pending, []
        for ex in pending:
            ex.finish("aborted", INVALID_GOAL, f"controller '{self.name}' deactivated")

    def preempt(self, indices: set):
        ex = self.current
        if ex is not None and indices & set(ex.idx.tolist()):
            self.current = None
            ex.finish("aborted", INVALID_GOAL, "preempted by a command on the joints (joint_command topic)")
        if self.pid is not None and indices & set(self.idx.tolist()):
            self._holding = False         # the command owns the joints until the next trajectory

    def reset(self):
        if self.current is not None:
            self.current.finish("aborted", INVALID_GOAL, "simulation reset")
            self.current = None
        with self.lock:
            pending, self._pending = self._pending, []
        for ex in pending:
            ex.finish("aborted", INVALID_GOAL, "simulation reset")
        if self.pid is not None and self.active:      # hold the reset state
            self.pid.reset()
            self._hold(self.ctx.state.position[self.idx])

    def shutdown(self):
        if self.current is not None:
            self.current.finish("aborted", INVALID_GOAL, "the simulation stopped")
