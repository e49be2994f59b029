"""UR's ``ur_controllers/ScaledJointTrajectoryController`` (Universal_Robots_ROS2_Driver, Jazzy): a
joint_trajectory_controller whose trajectory time runs at the robot's speed scaling (the hardware's
``speed_scaling/speed_scaling_factor`` state interface, 0..1). The simulated robot always runs at full speed:
the factor is 1.0, so it behaves exactly as the JointTrajectoryController; its controller_state carries
``speed_scaling_factor`` 1.0, as the real one publishes it. ``speed_scaling_interface_name`` is accepted."""

from __future__ import annotations

from ..parameters import Parameter, ParameterTable
from .joint_trajectory import JointTrajectoryController


class ScaledJointTrajectoryController(JointTrajectoryController):
    TYPES = ("ur_controllers/ScaledJointTrajectoryController",)
    SPEED_SCALING = 1.0          # the factor the trajectory time runs at (the simulation: always full speed)
    PARAMETERS = ParameterTable(
        *JointTrajectoryController.PARAMETERS,
        Parameter("speed_scaling_interface_name", "string", "speed_scaling/speed_scaling_factor",
                  description="the speed scaling state interface (the simulation's factor is always 1.0)"))
