"""Controller type name (as in a controllers YAML) -> the class that emulates it."""

from __future__ import annotations

from ...errors import ConfigError
from .force_torque_sensor_broadcaster import ForceTorqueSensorBroadcaster
from .forward_command import ForwardCommandController
from .franka_robot_state_broadcaster import FrankaRobotStateBroadcaster
from .gripper_action import GripperActionController
from .imu_sensor_broadcaster import IMUSensorBroadcaster
from .joint_state_broadcaster import JointStateBroadcaster
from .joint_trajectory import JointTrajectoryController
from .scaled_joint_trajectory import ScaledJointTrajectoryController
from .sensor_state_broadcaster import SensorStateBroadcaster
from .speed_scaling_state_broadcaster import SpeedScalingStateBroadcaster

_CLASSES = (JointStateBroadcaster, ForwardCommandController, JointTrajectoryController, GripperActionController,
            ForceTorqueSensorBroadcaster, ScaledJointTrajectoryController, SpeedScalingStateBroadcaster,
            FrankaRobotStateBroadcaster, IMUSensorBroadcaster, SensorStateBroadcaster)
CONTROLLER_TYPES = {t: cls for cls in _CLASSES for t in cls.TYPES}


def controller_class(ctype: str, name: str, source: str):
    """The class for ``ctype``; ConfigError naming the controller, the file and the supported types."""
    try:
        return CONTROLLER_TYPES[ctype]
    except KeyError:
        raise ConfigError(f"{source}: controller '{name}' has type '{ctype}', which the simulation does not "
                          f"emulate; supported types: {', '.join(sorted(CONTROLLER_TYPES))}") from None
