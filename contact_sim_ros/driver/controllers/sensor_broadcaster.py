"""The one route of a sensor's readings to the transports: a broadcaster that reads a sensor's state interfaces
(sensors/base.Sensor, owned by the hardware System) and whose transport side publishes them every
``publish_every`` steps (ros/controller_io.py over ROS, clients/inprocess_link.py in process), as ros2_controllers'
sensor broadcasters read their semantic components. Subclasses: force_torque_sensor_broadcaster,
imu_sensor_broadcaster (no rclpy)."""

from __future__ import annotations

import numpy as np

from ...errors import ConfigError
from .base import Controller


class SensorBroadcaster(Controller):
    """Base of the sensor broadcasters: ``attach_sensor(sensor, spec)`` once at construction (the System builds the
    sensor, ConfigError naming it), then ``reading()`` each publication."""

    sensor: str = ""
    _key: str = ""
    _interfaces: tuple = ()
    _measured = None            # the sensor (sensors/base.Sensor) once attached

    def hardware_sensor(self, sensor: str):
        """The <sensor> ``sensor`` of the System's hardware info (a <ros2_control> block's, or a scene's
        ``sensors:`` entry), and that info; ConfigError naming the known sensors when there is none of that name."""
        info = self.ctx.command.hardware_info
        block = info.sensor(sensor) if info is not None else None
        if block is None:
            known = [s.name for s in info.sensors] if info is not None else []
            raise ConfigError(f"{self.where}: unknown sensor '{sensor}': no sensor of that name in the scene's "
                              f"'sensors:' or the <ros2_control> block; sensors: {known}")
        return block, info

    def attach_sensor(self, sensor: str, spec):
        """The sensor ``sensor`` of ``spec`` (sensors/base.SensorSpec) added to the state interfaces under this
        broadcaster's key; returns it (sensors/base.Sensor)."""
        self.sensor = sensor
        self._key = f"{self.name}:{sensor}"
        measured = self.ctx.state.add_sensor(self._key, spec)
        self._interfaces = tuple(measured.interfaces)
        self._measured = measured
        return measured

    def state_interfaces(self):
        return self._measured.state_interfaces() if self._measured is not None else []

    def reading(self) -> np.ndarray:
        """The sensor's state interfaces (its values, in its ``interfaces`` order; the sensor's array, refilled each
        cycle: copy what you keep)."""
        return self.ctx.state.reading(self._key)
