"""The interface of an emulated ros2_control controller (one module per controller type, as ros2_control has
one plugin per type) and the context a controller gets from the controller manager (no rclpy).

Life cycle as in ros2_control: constructed and configured at start-up (parameters read and checked against the
type's ``PARAMETERS`` table), then activated / deactivated by the controller manager (start-up and
``switch_controller``). What a controller sees is what a ros2_control controller sees: the state interfaces
(``ctx.state``: joint positions, velocities, efforts at the sim time, F/T sensor wrenches) and the command
interfaces (``ctx.command``), never the Simulator nor the node. Its transport side (topics, actions: ros/controller_io.py
over ROS, clients/inprocess_link.py in process) is attached by the controller manager as ``io``. Threads:

* transport callbacks (subscriptions, action goals) run on the transport's threads; they hand over to the stepping
  thread through the controller's lock or the System's thread-safe command buffer (``ctx.commands``);
* ``update(time, period)`` runs on the stepping thread before a step, every ``period = 1 / update_rate`` s of sim
  time: it reads state interfaces and writes command interfaces;
* broadcasters: the transport publishes their values after a step, every ``publish_every`` steps.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ...errors import ConfigError
from ..parameters import Parameter, ParameterTable


class ControllerTransport:
    """What a transport gives a robot's controllers, passed to the ControllerManager at construction:
    ``attach(controller)`` builds the controller's transport side (its topics, actions, publishers; None: none),
    and the reports of bad input. This base attaches nothing and reports nothing."""

    def attach(self, controller):
        return None

    def detach(self, controller) -> None:
        """The controller is unloaded: destroy what ``attach`` built for it."""

    def reject_command(self, exc) -> None:
        pass

    def note_clamped(self, notes, source) -> None:
        pass

    def warn_throttled(self, message: str, key: str | None = None) -> None:
        pass

    def info(self, message: str) -> None:
        pass


class ControllerIO:
    """A controller's transport side (the base: nothing is published)."""

    def publish(self) -> None:
        """Publish the broadcaster's values (stepping thread, every ``publish_every`` steps)."""

    def publish_state(self, execution) -> None:
        """A trajectory controller's ``controller_state`` (stepping thread)."""


NO_IO = ControllerIO()


@dataclass
class ControllerContext:
    """What a controller may touch: the state and command interfaces, the command hand-over of the transports,
    the robot's model (joints, mimic joints, links: the URDF a ros2_control controller reads), its joint limits,
    the rates, and the transport's reports (warnings, rejected and clamped commands)."""

    state: object                # hardware.StateInterfaces
    command: object              # hardware.JointCommandInterfaces
    commands: object             # system.CommandBuffer: commands that bypass the controllers' update
    model: object                # MultibodyModel
    limits: object               # command_validation.JointLimits
    update_rate: float           # Hz of the controller manager
    time_step: float             # s of one simulation step
    transport: ControllerTransport = field(default_factory=ControllerTransport)
    robot: object = None         # RobotPreset or None (F/T sensor geometry)
    joints: tuple | None = None  # the robot's actuated joints (several robots in one world), None: every joint
    engine: object = None        # the Simulator's contact engine (effort commands it ignores are refused)
    default_rates: dict = field(default_factory=dict)   # Hz: 'joint_states', 'wrench' (the node's rates)

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


UPDATE_RATE = Parameter("update_rate", "double", None, "Hz", "the controller's own rate (broadcasters: their "
                        "publication rate)", lower=0.0, lower_open=True)


class Controller:
    """Base class. Subclasses set ``TYPES`` (the plugin names they emulate) and ``PARAMETERS`` (their
    ParameterTable; parameters given that it does not declare, or declares as not emulated, are reported once at
    start-up)."""

    TYPES: tuple[str, ...] = ()
    PARAMETERS: ParameterTable = ParameterTable()
    publish_every: int = 0       # > 0: the transport publishes its values every that many steps while active
    republish_while_paused: bool = False   # its publications repeat the frozen state while the loop is paused

    def __init__(self, name: str, ctype: str, params: dict, ctx: ControllerContext):
        self.name = name
        self.type = ctype
        self.params = flatten(params)
        self.ctx = ctx
        self.state = "inactive"
        self.lock = threading.Lock()
        self.where = f"controller '{name}' ({ctype})"
        self.io = NO_IO

    # -------------------------------------------------------------------------------- parameters

    def parameters(self, joints_key: str | None = None) -> dict:
        """The values of the type's PARAMETERS (given or default), checked; ``joints_key``: the parameter whose
        joints the ``{joint}`` parameters are for."""
        return self.PARAMETERS.values(self.params, self.where, joints_key)

    def joint_list(self, joints: list, key: str = "joints") -> list[str]:
        """``joints`` (the value of ``key``) checked: not empty, actuated joints of the robot, no duplicate."""
        joints = [str(j) for j in joints]
        if not joints:
            raise ConfigError(f"{self.where}: parameter '{key}' is empty")
        known = self.ctx.joints if self.ctx.joints is not None else self.ctx.command.index
        unknown = [j for j in joints if j not in known]
        if unknown:
            raise ConfigError(f"{self.where}: unknown joint(s) {unknown} in '{key}'; actuated joints of the "
                              f"robot: {', '.join(known)}")
        if len(set(joints)) != len(joints):
            raise ConfigError(f"{self.where}: joint(s) listed twice in '{key}': {joints}")
        return joints

    def unhonoured_parameters(self) -> list[str]:
        return self.PARAMETERS.not_emulated(self.params)

    # -------------------------------------------------------------------------------- interface

    def command_interfaces(self) -> list[str]:
        """Command interfaces ('joint/position', ...) this controller claims while active."""
        return []

    def state_interfaces(self) -> list[str]:
        return []

    def on_activate(self) -> None:
        """The controller becomes active (the controller manager's lock held)."""

    def on_deactivate(self) -> None:
        """The controller becomes inactive (the controller manager's lock held)."""

    def update(self, time: float, period: float) -> None:
        """Read state interfaces, write command interfaces (stepping thread, before a step); ``time`` the sim
        time (s), ``period`` the controller manager's period (s)."""

    def preempt(self, indices: set) -> None:
        """A hardware-level command took over the joints ``indices``: stop commanding them."""

    def reset(self) -> None:
        """The simulation was reset: drop what is in progress (the state interfaces hold the new state)."""

    def on_model_changed(self, model) -> None:
        """The physics model was rebuilt (an object spawned or deleted; stepping thread, between two steps): the
        robot's joints keep their names and indices, other indices (velocity vector, frames of objects,
        geometries) may have changed. Rebuild what was derived from the model (``ctx.model`` is the new one)."""

    def shutdown(self) -> None:
        """The node stops: finish what waits on this controller (pending action goals)."""

    @property
    def active(self) -> bool:
        return self.state == "active"
