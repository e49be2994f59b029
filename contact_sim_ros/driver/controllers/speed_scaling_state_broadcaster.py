"""UR's ``ur_controllers/SpeedScalingStateBroadcaster`` (Universal_Robots_ROS2_Driver, Jazzy): ``<name>/speed_scaling``
(std_msgs/Float64), the robot's speed scaling in percent (the real one: the ``speed_scaling/speed_scaling_factor``
state interface x 100). The simulated robot always runs at full speed: 100.0, published every
1 / ``state_publish_rate`` s of sim time (the real one publishes at its update rate once that exceeds it).
``tf_prefix`` is accepted. The publisher is the transport's (ros/controller_io.py)."""

from __future__ import annotations

from ..parameters import Parameter, ParameterTable
from .base import Controller
from .scaled_joint_trajectory import ScaledJointTrajectoryController


class SpeedScalingStateBroadcaster(Controller):
    TYPES = ("ur_controllers/SpeedScalingStateBroadcaster",)
    PARAMETERS = ParameterTable(
        Parameter("state_publish_rate", "double", 100.0, "Hz", "rate of the speed_scaling messages",
                  lower=0.0, lower_open=True),
        Parameter("tf_prefix", "string", "", description="the arm's URDF prefix (accepted; no interface is read)"),
    )

    def __init__(self, name, ctype, params, ctx):
        super().__init__(name, ctype, params, ctx)
        self.publish_every = ctx.decimation(self.parameters()["state_publish_rate"])

    def speed_scaling_percent(self) -> float:
        """The speed scaling in percent: the factor the scaled trajectory controllers run at, x 100."""
        return 100.0 * ScaledJointTrajectoryController.SPEED_SCALING
