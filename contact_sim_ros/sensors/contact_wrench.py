"""contact_wrench: the net contact wrench on each of some bodies (geometry_msgs/WrenchStamped per body:
``contact_wrench/<body>``; fingertip / link force sensing, an object's support).

Spec parameters: ``bodies`` (robot link names or free object names). Reading ``values`` (n_bodies, 6): per body
[force N, torque N*m about the body frame's origin], in the body frame's axes, from the step's contact forces
(sim/sensors.ContactWrenchAccumulator sums them in world axes; here rotated into each body's frame with the
state's frame placements, ``sim.pin_data``). Zero when nothing touches.
"""

from __future__ import annotations

import numpy as np

from ..sim.sensors import ContactWrenchAccumulator
from .base import Sensor, register_sensor

AXES = ("force.x", "force.y", "force.z", "torque.x", "torque.y", "torque.z")


@register_sensor
class ContactWrench(Sensor):
    type_name = "contact_wrench"
    message_type = "geometry_msgs/msg/WrenchStamped"
    interfaces = AXES                      # per body: <body>/force.x ...

    def __init__(self, spec, model):
        bodies = spec.param("bodies") or ()
        self.bodies = tuple(bodies.split() if isinstance(bodies, str) else bodies)
        self.accumulator = ContactWrenchAccumulator(model, self.bodies)   # ConfigError: unknown body
        self.frame_ids = self.accumulator.frame_ids
        self._frames = [int(f) for f in self.frame_ids]
        super().__init__(spec, model)

    def shape(self, model) -> tuple[int, ...]:
        return (len(self.bodies), 6)

    def state_interfaces(self) -> list[str]:
        return [f"{b}/{a}" for b in self.bodies for a in AXES]

    def labels(self) -> tuple[str, ...]:
        return self.bodies

    def measure(self, sim, v_prev=None) -> np.ndarray:
        out = self.values
        forces = sim.contact_forces_world()
        if not forces.shape[0]:
            out[:] = 0.0
            return out
        w = self.accumulator.compute(sim.contacts, forces, sim.pin_data)
        oMf = sim.pin_data.oMf
        for k, frame in enumerate(self._frames):
            R = oMf[frame].rotation
            out[k, :3], out[k, 3:] = R.T @ w[k, :3], R.T @ w[k, 3:]
        return out

    def rebuild(self, model) -> None:
        self.accumulator = ContactWrenchAccumulator(model, self.bodies)
        self.frame_ids = self.accumulator.frame_ids
        self._frames = [int(f) for f in self.frame_ids]
        super().rebuild(model)
