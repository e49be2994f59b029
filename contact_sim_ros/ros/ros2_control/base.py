"""The interface of an emulated ros2_control controller (one module per controller type, as ros2_control has
one plugin per type) and the context a controller gets from the node.

Life cycle as in ros2_control: constructed and configured at start-up (parameters read and checked, topics,
actions and publishers created: an inactive controller has them too), then activated / deactivated by the
controller manager (start-up and ``switch_controller``). Threads:

* ROS callbacks (subscriptions, action goals) run on the executor's threads; they hand over to the stepping
  thread through a lock or the loop's thread-safe command buffer;
* ``update(sim)`` runs on the stepping thread before a step, every ``1 / update_rate`` s of sim time: it reads
  the state and writes command interfaces (``ctx.hardware``);
* ``publish(sim)`` runs on the stepping thread after a step, every ``publish_every`` steps (broadcasters).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ...errors import ConfigError


@dataclass
class ControllerContext:
    """What a controller may touch: the rclpy node (to create its ROS entities), the stepping loop (command
    buffer, state), the simulator's model, the command interfaces, joint limits, and rates."""

    node: object                 # SimNode (rclpy Node)
    loop: object                 # SteppingLoop
    model: object                # MultibodyModel
    hardware: object             # JointCommandInterfaces
    limits: object               # JointLimits
    update_rate: float           # Hz of the controller manager
    time_step: float             # s of one simulation step
    robot: object = None         # RobotPreset or None (F/T sensor geometry)
    ros: bool = True             # False: in-process transport (no DDS: no actions, no services)
    joints: tuple | None = None  # the robot's actuated joints (several robots in one world), None: every joint
    frame_prefix: str | None = None   # TF frame prefix of the robot's links (None: the node's frame_prefix)

    def decimation(self, rate: float) -> int:
        return max(1, int(round(1.0 / (rate * self.time_step)))) if rate > 0 else 0


def flatten(params: dict, prefix: str = "") -> dict:
    """Nested parameter mappings as ROS 2 dotted names: {'constraints': {'goal_time': 1}} -> {'constraints.goal_time': 1}."""
    out = {}
    for k, v in params.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


class Controller:
    """Base class. Subclasses set ``TYPES`` (the plugin names they emulate) and ``PARAMETERS`` (the parameter
    names they honour; others are reported once at start-up as not honoured)."""

    TYPES: tuple[str, ...] = ()
    PARAMETERS: tuple[str, ...] = ()
    publish_every: int = 0       # > 0: publish(sim) after every that many steps while active

    def __init__(self, name: str, ctype: str, params: dict, ctx: ControllerContext):
        self.name = name
        self.type = ctype
        self.params = flatten(params)
        self.ctx = ctx
        self.state = "inactive"
        self.lock = threading.Lock()
        self.where = f"controller '{name}' ({ctype})"

    # -------------------------------------------------------------------------------- parameters

    def param(self, key: str, default=None, kind=None, required: bool = False):
        """A parameter value checked against ``kind`` (float, int, bool, str, list); ConfigError naming it."""
        if key not in self.params:
            if required:
                raise ConfigError(f"{self.where}: parameter '{key}' is required")
            return default
        value = self.params[key]
        try:
            if kind is float:
                if isinstance(value, bool):
                    raise ValueError
                value = float(value)
            elif kind is int:
                if isinstance(value, bool) or float(value) != int(float(value)):
                    raise ValueError
                value = int(float(value))
            elif kind is bool:
                if not isinstance(value, bool):
                    raise ValueError
            elif kind is str:
                if not isinstance(value, str):
                    raise ValueError
            elif kind is list:
                if not isinstance(value, (list, tuple)):
                    raise ValueError
                value = list(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{self.where}: parameter '{key}' must be {getattr(kind, '__name__', kind)}, "
                              f"got {value!r}") from None
        return value

    def joint_list(self, key: str = "joints") -> list[str]:
        joints = [str(j) for j in self.param(key, [], list, required=True)]
        if not joints:
            raise ConfigError(f"{self.where}: parameter '{key}' is empty")
        known = self.ctx.joints if self.ctx.joints is not None else self.ctx.hardware.index
        unknown = [j for j in joints if j not in known]
        if unknown:
            raise ConfigError(f"{self.where}: unknown joint(s) {unknown} in '{key}'; actuated joints of the "
                              f"robot: {', '.join(known)}")
        if len(set(joints)) != len(joints):
            raise ConfigError(f"{self.where}: joint(s) listed twice in '{key}': {joints}")
        return joints

    def unhonoured_parameters(self) -> list[str]:
        out = []
        for key in self.params:
            if not any(key == p or key.startswith(p + ".") for p in self.PARAMETERS + ("update_rate",)):
                out.append(key)
        return out

    # -------------------------------------------------------------------------------- interface

    def command_interfaces(self) -> list[str]:
        """Command interfaces ('joint/position', ...) this controller claims while active."""
        return []

    def state_interfaces(self) -> list[str]:
        return []

    def on_activate(self, sim) -> None:
        """Called on the stepping thread when the controller becomes active."""

    def on_deactivate(self, sim) -> None:
        """Called on the stepping thread when the controller becomes inactive."""

    def update(self, sim) -> None:
        """Read the state, write command interfaces (stepping thread, before a step)."""

    def publish(self, sim) -> None:
        """Publish the state after a step (broadcasters)."""

    def preempt(self, indices: set) -> None:
        """A hardware-level command took over the joints ``indices``: stop commanding them."""

    def reset(self, sim) -> None:
        """The simulation was reset: drop what is in progress and hold the new state."""

    def on_model_changed(self, model) -> None:
        """The physics model was rebuilt (an object spawned or deleted; stepping thread, between two steps): the
        robot's joints keep their names and indices, other indices (velocity vector, frames of objects,
        geometries) may have changed. Rebuild what was derived from the model (``ctx.model`` is the new one)."""

    def shutdown(self) -> None:
        """The node stops: finish what waits on this controller (pending action goals)."""

    @property
    def active(self) -> bool:
        return self.state == "active"
