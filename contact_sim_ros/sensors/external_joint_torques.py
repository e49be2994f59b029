"""external_joint_torques: the contact torques on a robot's actuated joints (sensor_msgs/JointState, effort only).

Spec parameters: ``joints`` (the actuated joints, in the order of the reading; default every actuated joint of the
model). Reading ``values`` (N*m or N per joint): tau_ext = (J^T f)[joint's velocity index], the generalized
contact force of the last step (StepResult.generalized_contact_force; 0 before the first step), what a
torque-sensing robot (franka_ros2's ``external_joint_torques``, libfranka's tau_ext) estimates.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError, unknown_choice
from .base import Sensor, register_sensor


@register_sensor
class ExternalJointTorques(Sensor):
    type_name = "external_joint_torques"
    message_type = "sensor_msgs/msg/JointState"
    interfaces = ("external_effort",)        # one per joint: <joint>/external_effort

    def __init__(self, spec, model):
        names = list(model.joint_names)
        joints = spec.param("joints") or names
        if isinstance(joints, str):
            joints = joints.split()
        for j in joints:
            if j not in names:
                raise ConfigError(f"{spec.where}: {unknown_choice('actuated joint', j, names)}")
        self.joints = tuple(joints)
        v_index = np.asarray(model.joint_v_index)
        self.v_index = np.array([v_index[names.index(j)] for j in self.joints], dtype=np.int64)
        super().__init__(spec, model)

    def shape(self, model) -> tuple[int, ...]:
        return (len(self.joints),)

    def state_interfaces(self) -> list[str]:
        return [f"{j}/external_effort" for j in self.joints]

    def labels(self) -> tuple[str, ...]:
        return self.joints

    def measure(self, sim, v_prev=None) -> np.ndarray:
        res = sim.last_result
        if res is None:                 # before the first step
            self.values[:] = 0.0
        else:
            res.generalized_contact_force.take(self.v_index, out=self.values)
        return self.values
