"""position_controllers/GripperActionController (and its effort_controllers twin): the ``<name>/gripper_cmd``
action (control_msgs/action/GripperCommand).

A goal (``command.position`` in m or rad of ``joint``, ``command.max_effort`` in N or N*m) sets the joint's
position target and limits its actuation to ``max_effort`` (0: the URDF effort limit), as a real gripper's
force setting does: closing on an object, the finger stops at the object; once it has stalled there (see below)
it presses with ``max_effort`` (effort mode), the grasp force of a force-limited gripper, until the next goal. Joints that the ``<ros2_control>`` block marks ``mimic`` of ``joint`` (the WSG 50's second
finger) follow it with the same limit.

Result and feedback as the real controller: ``position`` and ``effort`` of the joint (the effort is the
simulated actuator's force, N or N*m), ``reached_goal`` when |goal - position| < ``goal_tolerance``,
``stalled`` when the joint has moved slower than ``stall_velocity_threshold`` for ``stall_timeout`` s without
reaching the goal (success if ``allow_stalling``, else aborted). The joint keeps pressing after a stalled
goal until the next goal. A new goal preempts the active one (CANCELED); cancel holds the current position.
"""

from __future__ import annotations

import threading
import time

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import GoalEvent
from rclpy.callback_groups import ReentrantCallbackGroup

from ...errors import ConfigError
from .base import Controller

try:
    from control_msgs.action import GripperCommand
except ImportError:   # built into the venv by scripts/ensure_venv.sh (msgs/control_msgs)
    GripperCommand = None


class _GripperGoal:
    def __init__(self, position: float, max_effort: float, goal_handle):
        self.position, self.max_effort, self.goal_handle = position, max_effort, goal_handle
        self.started = False
        self.last_movement = 0.0
        self.cancel_requested = False
        self.done = threading.Event()
        self.status = ""
        self.measured = (0.0, 0.0, False, False)    # position, effort, stalled, reached_goal

    def finish(self, status: str) -> None:
        if not self.done.is_set():
            self.status = status
            self.done.set()


class GripperActionController(Controller):
    TYPES = ("position_controllers/GripperActionController", "effort_controllers/GripperActionController")
    PARAMETERS = ("joint", "goal_tolerance", "max_effort", "allow_stalling", "stall_velocity_threshold",
                  "stall_timeout", "action_monitor_rate")

    def __init__(self, name, ctype, params, ctx):
        super().__init__(name, ctype, params, ctx)
        joint = self.param("joint", "", str, required=True)
        if joint not in ctx.hardware.index:
            raise ConfigError(f"{self.where}: unknown joint '{joint}'; actuated joints: "
                              f"{', '.join(ctx.hardware.index)}")
        self.joint = joint
        hw = ctx.hardware
        self.i = hw.index[joint]
        follow = hw.followers(self.i)
        self.limited_joints = [joint] + [hw.joint_names[f] for f, _, _ in follow]
        self._idx = [self.i] + [f for f, _, _ in follow]
        self._mult = [1.0] + [m for _, m, _ in follow]
        self._off = [0.0] + [o for _, _, o in follow]
        self.goal_tolerance = self.param("goal_tolerance", 0.01, float)
        self.default_max_effort = self.param("max_effort", 0.0, float)
        self.allow_stalling = self.param("allow_stalling", False, bool)
        self.stall_velocity = self.param("stall_velocity_threshold", 0.001, float)
        self.stall_timeout = self.param("stall_timeout", 1.0, float)
        monitor = self.param("action_monitor_rate", 20.0, float)
        for key, value in (("goal_tolerance", self.goal_tolerance), ("max_effort", self.default_max_effort),
                           ("stall_timeout", self.stall_timeout)):
            if not value >= 0:
                raise ConfigError(f"{self.where}: {key} must be >= 0, got {value}")
        if not monitor >= 0.1:
            raise ConfigError(f"{self.where}: action_monitor_rate must be >= 0.1 Hz, got {monitor}")
        self.monitor_period = 1.0 / monitor
        self._pending: list[_GripperGoal] = []
        self.current: _GripperGoal | None = None
        self.action = None
        if GripperCommand is not None and ctx.ros:
            self.action = ActionServer(ctx.node, GripperCommand, f"{name}/gripper_cmd",
                                       execute_callback=self._execute, goal_callback=self._goal_callback,
                                       cancel_callback=lambda _goal: CancelResponse.ACCEPT,
                                       callback_group=ReentrantCallbackGroup())

    def command_interfaces(self):
        return [f"{j}/position" for j in self.limited_joints]

    def state_interfaces(self):
        return [f"{self.joint}/position", f"{self.joint}/velocity"]

    # ---------------------------------------------------------------------------- action (ROS threads)

    def _goal_callback(self, goal):
        return GoalResponse.ACCEPT if self.active else GoalResponse.REJECT

    def _execute(self, goal_handle):
        cmd = goal_handle.request.command
        g = _GripperGoal(float(cmd.position), float(cmd.max_effort), goal_handle)
        with self.lock:
            self._pending.append(g)
        next_feedback = time.monotonic() + self.monitor_period
        node = self.ctx.node
        while not g.done.wait(0.01):
            if goal_handle.is_cancel_requested:
                g.cancel_requested = True
            if time.monotonic() >= next_feedback and g.started:
                next_feedback += self.monitor_period
                fb = GripperCommand.Feedback()
                fb.position, fb.effort, fb.stalled, fb.reached_goal = g.measured
                goal_handle.publish_feedback(fb)
            if not node.loop.running:
                g.finish("aborted")
        result = GripperCommand.Result()
        result.position, result.effort, result.stalled, result.reached_goal = g.measured
        if g.status == "succeeded":
            goal_handle.succeed()
        elif g.status == "canceled":
            if not goal_handle.is_cancel_requested:
                goal_handle._update_state(GoalEvent.CANCEL_GOAL)   # preempted by a newer goal
            goal_handle.canceled()
        else:
            goal_handle.abort()
        return result

    # ---------------------------------------------------------------------------- stepping thread

    def _set_limit(self, sim, max_effort: float | None) -> None:
        for j in self.limited_joints:
            sim.set_effort_limit(j, max_effort if max_effort else None)

    def update(self, sim):
        if self._pending:
            with self.lock:
                pending, self._pending = self._pending, []
            for g in pending:
                if self.current is not None:
                    self.current.finish("canceled")
                g.started = True
                g.last_movement = sim.t
                self._set_limit(sim, self._max_effort(g))
                self._write(g.position)
                self.current = g
        g = self.current
        if g is None:
            return
        q = float(sim.joint_positions()[self.i])
        v = float(sim.joint_velocities()[self.i])
        effort = float(sim.joint_efforts()[self.i])
        if g.cancel_requested:
            self._write(q)
            g.measured = (q, effort, False, False)
            g.finish("canceled")
            self.current = None
            return
        error = g.position - q
        if abs(error) < self.goal_tolerance:
            g.measured = (q, effort, False, True)
            g.finish("succeeded")
            self.current = None
            return
        if abs(v) > self.stall_velocity:
            g.last_movement = sim.t
            g.measured = (q, effort, False, False)
        elif sim.t - g.last_movement > self.stall_timeout:
            # stalled on an object: press on it with max_effort (the gripper's grasp force), as a force-limited
            # gripper does, and report that effort; the position loop alone would press with kp * error
            force = self._max_effort(g) * (1.0 if error > 0 else -1.0)
            self.ctx.hardware.write_effort(self._idx, [m * force for m in self._mult])
            g.measured = (q, force, True, False)
            g.finish("succeeded" if self.allow_stalling else "aborted")
            self.current = None
        else:
            g.measured = (q, effort, False, False)

    def _max_effort(self, g: _GripperGoal) -> float:
        """The goal's max_effort, else the max_effort parameter, else the joint's URDF effort limit (N or N*m)."""
        return g.max_effort or self.default_max_effort or float(self.ctx.limits.effort[self.i])

    def _write(self, position: float) -> None:
        """Position target of the joint and of its mimic followers (m or rad)."""
        self.ctx.hardware.write_position(self._idx, [m * position + o for m, o in zip(self._mult, self._off)])

    def on_activate(self, sim):
        self._write(float(sim.joint_positions()[self.i]))

    def on_deactivate(self, sim):
        if self.current is not None:
            self.current.finish("aborted")
            self.current = None
        self._set_limit(sim, None)
        self.ctx.hardware.hold(self._idx, sim.joint_positions()[self._idx])

    def reset(self, sim):
        if self.current is not None:
            self.current.finish("aborted")
            self.current = None
        with self.lock:
            pending, self._pending = self._pending, []
        for g in pending:
            g.finish("aborted")
        self._set_limit(sim, None)

    def shutdown(self):
        if self.current is not None:
            self.current.finish("aborted")
