"""franka_ros2's ``franka_robot_state_broadcaster/FrankaRobotStateBroadcaster``: ``<name>/robot_state``
(franka_msgs/msg/FrankaRobotState) and its convenience topics (``<name>/external_wrench_in_base_frame``,
``<name>/external_wrench_in_stiffness_frame``, ``<name>/current_pose``) of a Franka arm, as a franka_ros2
controllers file spawns it. Parameters as the real one's (franka_robot_state_broadcaster_parameters.yaml):
``robot_type`` (default fr3) and ``arm_prefix`` name the arm's joints ``<arm_prefix><robot_type>_joint1..7``
(a robot without them: the Panda preset's ``panda_joint1..7``); ``convenience_publish_rate`` (Hz) is the rate
of every topic here (the real one publishes robot_state at the update rate). Values and the external wrench
estimate: driver/franka.py; the publishers are the transport's (ros/franka.py)."""

from __future__ import annotations

from ...errors import ConfigError
from ..parameters import Parameter, ParameterTable
from .base import Controller


class FrankaRobotStateBroadcaster(Controller):
    TYPES = ("franka_robot_state_broadcaster/FrankaRobotStateBroadcaster",)
    PARAMETERS = ParameterTable(
        Parameter("robot_type", "string", "fr3", description="the arm's name in its joint names"),
        Parameter("arm_prefix", "string", "", description="prefix of the arm's joint names"),
        Parameter("convenience_publish_rate", "double", 1000.0, "Hz", "rate of robot_state and the "
                  "convenience topics", lower=1.0),
        Parameter("state_interfaces", "string", "", description="robot_state (accepted)"),
        Parameter("arm_id", "string", "", description="older franka_ros2's name of robot_type (used if given)"),
        Parameter("lock_try_count", "int", 5, description="older franka_ros2 (accepted; no lock here)"),
        Parameter("lock_sleep_interval", "int", 5, "us", "older franka_ros2 (accepted; no lock here)"),
    )

    def __init__(self, name, ctype, params, ctx):
        super().__init__(name, ctype, params, ctx)
        p = self.parameters()
        known = ctx.joints if ctx.joints is not None else ctx.command.index
        robot_type = p["arm_id"] or p["robot_type"]
        for arm in (f"{p['arm_prefix']}{robot_type}", f"{p['arm_prefix']}panda", "panda"):
            joints = [f"{arm}_joint{i}" for i in range(1, 8)]
            if all(j in known for j in joints):
                break
        else:
            raise ConfigError(f"{self.where}: no joints {p['arm_prefix']}{robot_type}_joint1..7 (robot_type or "
                              f"arm_id, arm_prefix) among the robot's joints: {', '.join(known)}")
        self.arm_id = arm
        self.joints = joints
        self.base_frame = f"{arm}_link0"
        self.ee_frame = f"{arm}_hand_tcp"          # K = EE; without a hand: the flange (set by the transport)
        self.flange_frame = f"{arm}_link8"
        self.publish_every = ctx.decimation(p["convenience_publish_rate"])

    def state_interfaces(self):
        return [f"{j}/{k}" for j in self.joints for k in ("position", "velocity", "effort")]
