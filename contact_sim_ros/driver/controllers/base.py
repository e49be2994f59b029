"""The interface of an emulated ros2_control controller (one module per controller type, as ros2_control has
one plugin per type) and the context a controller gets from the controller manager (no rclpy).

Life cycle as in ros2_control: constructed and configured at start-up (parameters read and checked against the
type's ``PARAMETERS`` table), then activated / deactivated by the controller manager (start-up and
``switch_controller``). What a controller sees is what a ros2_control controller sees: the state interfaces
(``ctx.state``: joint positions, velocities, efforts at the sim time, F/T sensor wrenches) and the command
interfaces, never the Simulator, its engine nor the node: the context (:class:`ControllerContext`) gives read-only
views (``ctx.command``: joint names, indices, the exported command interfaces and their claims, the commanded
values), and on activation the controller manager loans the controller the rows of the command interfaces it
claims (``loan``, a loaned_interfaces.LoanedCommandInterfaces, as ros2_control's ``assign_interfaces``: a write to
another row raises), released on deactivation (``loan`` None). Its transport side (topics, actions:
ros/controller_io.py over ROS, clients/inprocess_link.py in process) is attached by the controller manager as
``io``. Threads:

* transport callbacks (subscriptions, action goals) run on the transport's threads; they hand over to the stepping
  thread through the controller's lock or its loan's ``push_command`` (the System's thread-safe command buffer);
* ``update(time, period)`` runs on the stepping thread before a step, every ``period = 1 / update_rate`` s of sim
  time: it reads state interfaces, writes its loaned command interfaces and returns a :class:`ReturnType`
  (``ERROR``, or an exception, and the controller manager deactivates it, as ros2_control's does);
* broadcasters: the transport publishes their values after a step, every ``publish_every`` steps.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field

from ...errors import ConfigError
from ...model.loader import RobotPreset
from ...model.multibody_model import MultibodyModel
from ..command_validation import JointLimits
from ..hardware import StateInterfaces
from ..loaned_interfaces import CommandInterfacesView, LoanedCommandInterfaces
from ..parameters import Parameter, ParameterTable


class ReturnType(enum.Enum):
    """What ``update`` returns (controller_interface::return_type): ERROR and the controller manager deactivates
    the controller."""

    OK = 0
    ERROR = 1


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

    def error(self, message: str) -> None:
        """An error of the controller manager (a controller deactivated because its update failed)."""


class ControllerIO:
    """A controller's transport side (the base: nothing is published)."""

    def publish(self) -> None:
        """Publish the broadcaster's values (stepping thread, every ``publish_every`` steps)."""

    def publish_state(self, execution) -> None:
        """A trajectory controller's ``controller_state`` (stepping thread)."""


NO_IO = ControllerIO()
IDLE_UPDATE = object()      # Controller.compiled_update: an update with nothing to do (no trajectory)


@dataclass
class ControllerContext:
    """What a controller may touch: the state interfaces, a read-only view of the command interfaces (it writes
    the rows loaned to it on activation: ``Controller.loan``), the robot's model (joints, mimic joints, links: the
    URDF a ros2_control controller reads), its joint limits, the rates, and the transport's reports (warnings,
    rejected and clamped commands). Not the engine: what it accepts is what the hardware exports."""

    state: StateInterfaces
    command: CommandInterfacesView
    model: MultibodyModel
    limits: JointLimits
    update_rate: float                              # Hz of the controller manager
    time_step: float                                # s of one simulation step
    transport: ControllerTransport = field(default_factory=ControllerTransport)
    robot: RobotPreset | None = None                # the scene's robot (F/T sensor geometry), None: a bare model
    joints: tuple[str, ...] | None = None           # the robot's actuated joints (several robots), None: every joint
    default_rates: dict[str, float] = field(default_factory=dict)   # Hz: 'joint_states', 'wrench' (the node's)

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
        self.loan: LoanedCommandInterfaces | None = None   # its command interfaces while active

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

    def assign_interfaces(self, loan: LoanedCommandInterfaces) -> None:
        """(the controller manager, before ``on_activate``) The command interfaces it claimed, loaned."""
        self.loan = loan

    def release_interfaces(self) -> None:
        """(the controller manager, after ``on_deactivate``) The loan ends: later writes through it raise."""
        loan, self.loan = self.loan, None
        if loan is not None:
            loan.release()

    def on_activate(self) -> None:
        """The controller becomes active (the controller manager's lock held; ``loan`` assigned)."""

    def on_deactivate(self) -> None:
        """The controller becomes inactive (the controller manager's lock held; ``loan`` still assigned)."""

    def update(self, time: float, period: float) -> ReturnType:
        """Read state interfaces, write the loaned command interfaces (stepping thread, before a step); ``time``
        the sim time (s), ``period`` the controller manager's period (s). ReturnType.ERROR (or an exception): the
        controller manager deactivates the controller."""
        return ReturnType.OK

    def compiled_update(self, time: float, due: bool):
        """(driver/control_period.ControlPeriod, between two steps) What this controller's ``update`` at ``time``
        (s) and at the following steps is, when it is a pure compiled function of the state, its own arrays and the
        time: IDLE_UPDATE (nothing to do but count the update), a running trajectory (joint_trajectory.Execution),
        or None (the default): the update needs its Python code. ``due``: the controller manager updates at this
        step (a controller may do the Python part of this update here, in the order ``update`` does it)."""
        return None

    def count_updates(self, n: int) -> None:
        """(ControlPeriod) ``n`` updates ran compiled (what ``compiled_update`` returned) instead of ``update``."""

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
