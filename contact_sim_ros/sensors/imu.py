"""imu: an inertial measurement unit rigidly attached to a link (sensor_msgs/Imu; ros2_control's IMUSensor
state interfaces).

Spec parameters: ``frame_id`` (a link or frame of the model: the IMU's frame; ``link`` is accepted as well).
Reading ``values`` (10,), in ``interfaces`` order:

* orientation.x/y/z/w: the frame's orientation in the world (unit quaternion);
* angular_velocity.x/y/z (rad/s): the frame's angular velocity, in its own axes;
* linear_acceleration.x/y/z (m/s^2): the specific force of its origin in its own axes, R^T (a_o - g), with a_o
  the classical (not spatial) acceleration of the origin and g the model's gravity: an IMU at rest reads +9.81 up
  (REP 145), one in free fall 0.

Accelerations come from a = (v - v_prev) / dt, the step's mean generalized acceleration (as the F/T sensor's).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from ..errors import ConfigError, unknown_choice
from .base import Sensor, register_sensor


@register_sensor
class Imu(Sensor):
    type_name = "imu"
    message_type = "sensor_msgs/msg/Imu"
    interfaces = ("orientation.x", "orientation.y", "orientation.z", "orientation.w",
                  "angular_velocity.x", "angular_velocity.y", "angular_velocity.z",
                  "linear_acceleration.x", "linear_acceleration.y", "linear_acceleration.z")

    def __init__(self, spec, model):
        self.frame_name = str(spec.param("frame_id") or spec.param("link") or "")
        if not self.frame_name:
            raise ConfigError(f"{spec.where}: parameter 'frame_id' (the link the IMU is mounted on) is required")
        super().__init__(spec, model)
        self._build(model)

    def _build(self, model) -> None:
        pm = model.pin_model
        if not pm.existFrame(self.frame_name):
            raise ConfigError(f"{self.spec.where}: "
                              f"{unknown_choice('frame', self.frame_name, [f.name for f in pm.frames])}")
        self._model = pm
        self._data = pm.createData()
        self._frame = pm.getFrameId(self.frame_name)
        self._gravity = np.asarray(model.gravity, dtype=float).copy()
        self._a = np.zeros(pm.nv)

    def measure(self, sim, v_prev: np.ndarray) -> np.ndarray:
        pm, d, out = self._model, self._data, self.values
        a = self._a
        np.subtract(sim.v, v_prev, out=a)
        np.divide(a, sim.time_step, out=a)
        pin.forwardKinematics(pm, d, sim.q, sim.v, a)
        placement = pin.updateFramePlacement(pm, d, self._frame)
        R = placement.rotation
        out[0:4] = pin.Quaternion(R).coeffs()                 # x, y, z, w
        out[4:7] = pin.getFrameVelocity(pm, d, self._frame, pin.LOCAL).angular
        acc = pin.getFrameClassicalAcceleration(pm, d, self._frame, pin.LOCAL).linear
        out[7:10] = acc - R.T @ self._gravity
        return out

    def rebuild(self, model) -> None:
        super().rebuild(model)
        self._build(model)
