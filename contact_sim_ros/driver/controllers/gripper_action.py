"""position_controllers/GripperActionController (and its effort_controllers twin): the ``<name>/gripper_cmd``
action (control_msgs/action/GripperCommand).

A goal (``command.position`` in m or rad of ``joint``, ``command.max_effort`` in N or N*m) sets the joint's
position target and limits its actuation to ``max_effort`` (0: the URDF effort limit), as a real gripper's
force setting does: closing on an object, the finger stops at the object; once it has stalled there (see below)
it presses with ``max_effort`` (effort mode), the grasp force of a force-limited gripper, until the next goal.
Joints that the ``<ros2_control>`` block marks ``mimic`` of ``joint`` (the WSG 50's second finger) follow it with
the same limit.

Result and feedback as the real controller: ``position`` and ``effort`` of the joint (the effort is the
simulated actuator's force, N or N*m), ``reached_goal`` when |goal - position| < ``goal_tolerance``,
``stalled`` when the joint has moved slower than ``stall_velocity_threshold`` for ``stall_timeout`` s without
reaching the goal (success if ``allow_stalling``, else aborted). The joint keeps pressing after a stalled
goal until the next goal. A new goal preempts the active one (CANCELED); cancel holds the current position.

The action server is the transport's (ros/controller_io.py); goals are checked by ``goal`` (a NaN or infinite
position, a negative or non-finite max_effort are refused there) and executed in ``update``.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from ...errors import ConfigError
from ..parameters import Parameter, ParameterTable
from .base import UPDATE_RATE, Controller, ReturnType


class GoalRejected(Exception):
    """A GripperCommand goal that cannot be executed (its reason)."""


class GripperGoal:
    """One GripperCommand goal being executed. ``done`` is set with ``status`` ('succeeded', 'aborted',
    'canceled'); ``measured``: (position, effort, stalled, reached_goal) for feedback and result."""

    def __init__(self, position: float, max_effort: float, goal_handle=None):
        self.position, self.max_effort, self.goal_handle = position, max_effort, goal_handle
        self.started = False
        self.last_movement = 0.0
        self.cancel_requested = False
        self.done = threading.Event()
        self.on_done = None                     # fn() called once when the goal ends (any thread)
        self.status = ""
        self.measured = (0.0, 0.0, False, False)    # position, effort, stalled, reached_goal

    def finish(self, status: str) -> None:
        if not self.done.is_set():
            self.status = status
            self.done.set()
            if self.on_done is not None:      # the transport's wake-up (thread-safe)
                self.on_done()


class GripperActionController(Controller):
    TYPES = ("position_controllers/GripperActionController", "effort_controllers/GripperActionController")
    PARAMETERS = ParameterTable(
        Parameter("joint", "string", required=True, description="the gripper joint"),
        Parameter("goal_tolerance", "double", 0.01, "m or rad", "|goal - position| that reaches the goal",
                  lower=0.0),
        Parameter("max_effort", "double", 0.0, "N or N*m", "actuation limit of a goal without one (0: the URDF "
                  "effort limit)", lower=0.0),
        Parameter("allow_stalling", "bool", False, description="a stalled goal succeeds (else it aborts)"),
        Parameter("stall_velocity_threshold", "double", 0.001, "m/s or rad/s",
                  "speed under which the joint counts as not moving"),
        Parameter("stall_timeout", "double", 1.0, "s", "time without moving that counts as stalled", lower=0.0),
        Parameter("action_monitor_rate", "double", 20.0, "Hz", "feedback rate", lower=0.1),
        UPDATE_RATE,
    )

    def __init__(self, name, ctype, params, ctx):
        super().__init__(name, ctype, params, ctx)
        p = self.parameters()
        joint = p["joint"]
        hw = ctx.command
        if joint not in hw.index:
            raise ConfigError(f"{self.where}: unknown joint '{joint}'; actuated joints: {', '.join(hw.index)}")
        self.joint = joint
        self.i = hw.index[joint]
        follow = hw.followers(self.i)
        self.limited_joints = [joint] + [hw.joint_names[f] for f, _, _ in follow]
        self._idx = np.array([self.i] + [f for f, _, _ in follow], dtype=int)   # the rows it claims
        self._mult = [1.0] + [m for _, m, _ in follow]
        self._off = [0.0] + [o for _, _, o in follow]
        self.goal_tolerance = p["goal_tolerance"]
        self.default_max_effort = p["max_effort"]
        self.allow_stalling = p["allow_stalling"]
        self.stall_velocity = p["stall_velocity_threshold"]
        self.stall_timeout = p["stall_timeout"]
        self.monitor_period = 1.0 / p["action_monitor_rate"]
        self._pending: list[GripperGoal] = []
        self.current: GripperGoal | None = None

    def command_interfaces(self):
        return [f"{j}/position" for j in self.limited_joints]

    def state_interfaces(self):
        return [f"{self.joint}/position", f"{self.joint}/velocity"]

    # ---------------------------------------------------------------------------- goals (transport threads)

    def goal(self, position, max_effort, goal_handle=None) -> GripperGoal:
        """A GripperGoal of a goal's command (m or rad, N or N*m), or GoalRejected with the reason: a position
        that is not finite, a max_effort that is negative or not finite."""
        position, max_effort = float(position), float(max_effort)
        if not math.isfinite(position):
            raise GoalRejected(f"{self.name}/gripper_cmd: command.position {position} is not finite")
        if not (math.isfinite(max_effort) and max_effort >= 0.0):
            raise GoalRejected(f"{self.name}/gripper_cmd: command.max_effort must be a finite force >= 0 (0: the "
                               f"joint's effort limit), got {max_effort}")
        return GripperGoal(position, max_effort, goal_handle)

    def submit(self, g: GripperGoal) -> None:
        """Hand a goal over to the stepping thread: it starts at the next update (preempting the current one)."""
        with self.lock:
            self._pending.append(g)

    # ---------------------------------------------------------------------------- stepping thread

    def _set_limit(self, max_effort: float | None) -> None:
        self.loan.limit_effort(self._idx, max_effort if max_effort else None)

    def update(self, time, period):
        if self._pending:
            with self.lock:
                pending, self._pending = self._pending, []
            for g in pending:
                if self.current is not None:
                    self.current.finish("canceled")
                g.started = True
                g.last_movement = time
                self._set_limit(self._max_effort(g))
                self._write(g.position)
                self.current = g
        g = self.current
        if g is None:
            return ReturnType.OK
        state = self.ctx.state
        q = float(state.position[self.i])
        v = float(state.velocity[self.i])
        effort = float(state.effort[self.i])
        if g.cancel_requested:
            self._write(q)
            g.measured = (q, effort, False, False)
            g.finish("canceled")
            self.current = None
            return ReturnType.OK
        error = g.position - q
        if abs(error) < self.goal_tolerance:
            g.measured = (q, effort, False, True)
            g.finish("succeeded")
            self.current = None
            return ReturnType.OK
        if abs(v) > self.stall_velocity:
            g.last_movement = time
            g.measured = (q, effort, False, False)
        elif time - g.last_movement > self.stall_timeout:
            # stalled on an object: press on it with max_effort (the gripper's grasp force), as a force-limited
            # gripper does, and report that effort; the position loop alone would press with kp * error
            force = self._max_effort(g) * (1.0 if error > 0 else -1.0)
            self.loan.press(self._idx, [m * force for m in self._mult])
            g.measured = (q, force, True, False)
            g.finish("succeeded" if self.allow_stalling else "aborted")
            self.current = None
        else:
            g.measured = (q, effort, False, False)
        return ReturnType.OK

    def _max_effort(self, g: GripperGoal) -> float:
        """The goal's max_effort, else the max_effort parameter, else the joint's URDF effort limit (N or N*m)."""
        return g.max_effort or self.default_max_effort or float(self.ctx.limits.effort[self.i])

    def _write(self, position: float) -> None:
        """Position target of the joint and of its mimic followers (m or rad)."""
        self.loan.write_position(self._idx, [m * position + o for m, o in zip(self._mult, self._off)])

    def on_activate(self):
        self._write(float(self.ctx.state.position[self.i]))

    def on_deactivate(self):
        if self.current is not None:
            self.current.finish("aborted")
            self.current = None
        self._set_limit(None)
        self.loan.hold(self._idx, self.ctx.state.position[self._idx])

    def reset(self):
        if self.current is not None:
            self.current.finish("aborted")
            self.current = None
        with self.lock:
            pending, self._pending = self._pending, []
        for g in pending:
            g.finish("aborted")
        if self.loan is not None:     # (inactive: its deactivation lifted the limit; the rows are not its own)
            self._set_limit(None)

    def shutdown(self):
        if self.current is not None:
            self.current.finish("aborted")
