"""forward_command_controller/ForwardCommandController and the JointGroup{Position,Velocity,Effort}Controller
of position_controllers / velocity_controllers / effort_controllers.

``<name>/commands`` (std_msgs/Float64MultiArray): one value per joint of ``joints`` in that order, written to
the joints' ``interface_name`` command interface. Validation as for every command (command_validation): wrong
length, NaN/Inf rejected with a throttled warning; out-of-limit values clamped. A message that arrives while
the controller is inactive is ignored (warned), as the real controller does not write then; a command goes to the
next cycle through the controller's loaned command interfaces. An effort group cannot be activated on an engine
that ignores efforts (the hardware exports no effort interface: the controller manager's "Unable to activate
controller ... not available."). The subscription is the transport's (ros/controller_io.py); it calls
``on_commands``. On deactivation a
velocity or effort group writes zeros (the real JointGroupVelocity/EffortController do); a position group
leaves its joints holding their position.
"""

from __future__ import annotations

from ...errors import ConfigError
from ..command_validation import CommandRejected, validate_group_command
from ..parameters import Parameter, ParameterTable
from .base import UPDATE_RATE, Controller

_INTERFACE_OF_TYPE = {
    "position_controllers/JointGroupPositionController": "position",
    "velocity_controllers/JointGroupVelocityController": "velocity",
    "effort_controllers/JointGroupEffortController": "effort",
}


class ForwardCommandController(Controller):
    TYPES = ("forward_command_controller/ForwardCommandController", *_INTERFACE_OF_TYPE)
    PARAMETERS = ParameterTable(
        Parameter("joints", "string_array", required=True, description="the joints commanded, in message order"),
        Parameter("interface_name", "string", None, choices=("position", "velocity", "effort"),
                  description="the command interface written (fixed by the JointGroup* types)"),
        UPDATE_RATE,
    )

    def __init__(self, name, ctype, params, ctx):
        super().__init__(name, ctype, params, ctx)
        p = self.parameters()
        self.joints = self.joint_list(p["joints"])
        fixed = _INTERFACE_OF_TYPE.get(ctype)
        interface = p["interface_name"]
        if interface is None:
            if fixed is None:
                raise ConfigError(f"{self.where}: parameter 'interface_name' is required")
            interface = fixed
        if fixed is not None and interface != fixed:
            raise ConfigError(f"{self.where}: interface_name is '{fixed}' for this type, got '{interface}'")
        self.interface = interface
        self.idx = ctx.command.indices(self.joints)
        self.topic = f"{name}/commands"

    def command_interfaces(self):
        return [f"{j}/{self.interface}" for j in self.joints]

    def state_interfaces(self):
        return []

    def on_commands(self, data) -> None:
        """A ``<name>/commands`` message's ``data`` (one value per joint, transport thread): checked, then handed
        over to the next cycle (a bad one is rejected with a warning; while inactive, ignored with one)."""
        transport = self.ctx.transport
        try:
            cmd = validate_group_command(self.ctx.limits, self.joints, data, self.interface, source=self.topic)
        except CommandRejected as exc:
            transport.reject_command(exc)
            return
        loan = self.loan
        if loan is None or not loan.push_command(cmd):
            transport.warn_throttled(f"{self.topic}: controller '{self.name}' is {self.state}: command ignored "
                                     f"(activate it with controller_manager/switch_controller)")
            return
        transport.note_clamped(cmd.clamped, self.topic)

    def on_deactivate(self):
        hw = self.loan
        if self.interface == "velocity":
            hw.write_velocity(self.idx, 0.0)
        elif self.interface == "effort":
            hw.write_effort(self.idx, 0.0)
        else:
            hw.hold(self.idx, self.ctx.state.position[self.idx])
