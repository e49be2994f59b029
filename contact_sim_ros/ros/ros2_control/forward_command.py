"""forward_command_controller/ForwardCommandController and the JointGroup{Position,Velocity,Effort}Controller
of position_controllers / velocity_controllers / effort_controllers.

``<name>/commands`` (std_msgs/Float64MultiArray): one value per joint of ``joints`` in that order, written to
the joints' ``interface_name`` command interface. Validation as for every command (command_validation): wrong
length, NaN/Inf rejected with a throttled warning; out-of-limit values clamped. A message that arrives while
the controller is inactive is ignored (warned), as the real controller does not write then. On deactivation a
velocity or effort group writes zeros (the real JointGroupVelocity/EffortController do); a position group
leaves its joints holding their position.
"""

from __future__ import annotations

from std_msgs.msg import Float64MultiArray

from ...errors import ConfigError
from ..command_validation import CommandRejected, reject_unsupported_effort, validate_group_command
from .base import Controller

_INTERFACE_OF_TYPE = {
    "position_controllers/JointGroupPositionController": "position",
    "velocity_controllers/JointGroupVelocityController": "velocity",
    "effort_controllers/JointGroupEffortController": "effort",
}


class ForwardCommandController(Controller):
    TYPES = ("forward_command_controller/ForwardCommandController", *_INTERFACE_OF_TYPE)
    PARAMETERS = ("joints", "interface_name")

    def __init__(self, name, ctype, params, ctx):
        super().__init__(name, ctype, params, ctx)
        self.joints = self.joint_list()
        fixed = _INTERFACE_OF_TYPE.get(ctype)
        interface = self.param("interface_name", fixed, str, required=fixed is None)
        if fixed is not None and interface != fixed:
            raise ConfigError(f"{self.where}: interface_name is '{fixed}' for this type, got '{interface}'")
        if interface not in ("position", "velocity", "effort"):
            raise ConfigError(f"{self.where}: interface_name must be position, velocity or effort, got "
                              f"{interface!r}")
        self.interface = interface
        self.idx = ctx.hardware.indices(self.joints)
        node = ctx.node
        self.topic = f"{name}/commands"
        node.create_subscription(Float64MultiArray, self.topic, self._on_commands, 10)

    def command_interfaces(self):
        return [f"{j}/{self.interface}" for j in self.joints]

    def state_interfaces(self):
        return []

    def _on_commands(self, msg):
        node = self.ctx.node
        try:
            cmd = validate_group_command(self.ctx.limits, self.joints, msg.data, self.interface, source=self.topic)
            reject_unsupported_effort(cmd, node.sim.engine)
        except CommandRejected as exc:
            node.reject_command(exc)
            return
        if not self.active:
            node.warn_throttled(f"{self.topic}: controller '{self.name}' is {self.state}: command ignored "
                                f"(activate it with controller_manager/switch_controller)")
            return
        node.note_clamped(cmd.clamped, self.topic)
        self.ctx.loop.commands.push_command(cmd)

    def on_deactivate(self, sim):
        hw = self.ctx.hardware
        if self.interface == "velocity":
            hw.write_velocity(self.idx, 0.0)
        elif self.interface == "effort":
            hw.write_effort(self.idx, 0.0)
        else:
            hw.hold(self.idx, sim.joint_positions()[self.idx])
