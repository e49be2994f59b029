"""force_torque: a 6-axis force/torque sensor between two links (geometry_msgs/WrenchStamped).

Spec parameters: ``parent_link``, ``child_link`` (the sensor's tool side; usually joined to the parent by a fixed
joint), ``frame_id`` (the frame of the reading; default the child link). From a ``<ros2_control>`` ``<sensor>``
with those ``<param>``s, or a robot preset's ``ft_sensor`` (base.spec_from_preset).

Reading ``values`` (force.x, force.y, force.z N, torque.x, torque.y, torque.z N*m, in ``frame_id`` axes about its
origin): the wrench the child side exerts on the parent side, from the recursive Newton-Euler pass with the step's
contact forces and the generalized acceleration a = (v - v_prev) / dt (sim/sensors.ForceTorqueSensor; its compiled
reading ForceTorqueReading in sim/rigid_body_dynamics.cpp is the kernel).
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..sim.sensors import ForceTorqueSensor
from .base import Sensor, SensorSpec, register_sensor, spec_from_hardware, spec_from_preset

AXES = ("force.x", "force.y", "force.z", "torque.x", "torque.y", "torque.z")


@register_sensor
class ForceTorque(Sensor):
    type_name = "force_torque"
    message_type = "geometry_msgs/msg/WrenchStamped"
    interfaces = AXES

    def __init__(self, spec: SensorSpec, model):
        super().__init__(spec, model)
        self.parent_link = str(spec.param("parent_link", required=True))
        self.child_link = str(spec.param("child_link", required=True))
        self.frame = str(spec.param("frame_id") or "") or self.child_link
        self._build(model)

    def _build(self, model) -> None:
        try:
            self.kernel = ForceTorqueSensor(model, self.parent_link, self.child_link, self.frame)
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"{self.spec.where}: {exc}") from None
        self._a = np.zeros(model.pin_model.nv)       # generalized acceleration (v - v_prev) / dt

    def measure(self, sim, v_prev: np.ndarray) -> np.ndarray:
        forces = sim.contact_forces_world()
        a = self._a
        np.subtract(sim.v, v_prev, out=a)
        np.divide(a, sim.time_step, out=a)
        return self.kernel.compute(sim.q, sim.v, a, sim.contacts if forces.shape[0] else None, forces,
                                   out=self.values)

    def rebuild(self, model) -> None:
        super().rebuild(model)
        self._build(model)        # the robot's links are unchanged: cannot fail


def broadcaster_spec(sensor: str, frame_id: str, hardware_info, robot, where: str) -> SensorSpec:
    """The spec of the sensor a force_torque_sensor_broadcaster names: the ``<ros2_control>`` ``<sensor>`` with
    parent_link / child_link parameters, else the robot preset's ``ft_sensor`` of that name or frame; the
    reading's frame is the block's ``frame_id`` (or the preset's ``frame``), else the broadcaster's ``frame_id``.
    ConfigError naming the broadcaster (``where``) and the sensors there are."""
    ft = (robot.ft_sensor if robot is not None else None) or {}
    block = hardware_info.sensor(sensor) if hardware_info is not None else None
    if block is not None and "parent_link" in block.params:
        spec = spec_from_hardware(block, hardware_info.source, default_type="force_torque")
    elif ft and sensor in (ft.get("frame"), ft.get("name")):
        spec = spec_from_preset(ft, getattr(robot, "source", "robot preset"))
    else:
        known = [s.name for s in hardware_info.sensors] if hardware_info is not None else []
        raise ConfigError(f"{where}: unknown sensor '{sensor}': no <sensor> with parent_link/child_link "
                          f"parameters in the <ros2_control> block and not the robot preset's ft_sensor "
                          f"({ft.get('frame') if ft else 'none'}); sensors: {known}")
    if not spec.params.get("frame_id"):
        spec.params["frame_id"] = frame_id
    if spec.type != ForceTorque.type_name:
        raise ConfigError(f"{where}: sensor '{sensor}' is of type {spec.type!r}, not force_torque")
    return SensorSpec(sensor, spec.type, spec.params, spec.source)
