"""One robot of the simulated world on ROS 2, as its real driver stack would present it (docs/ros_interface.md,
"Several robots"): the robot's ``robot_description``, its emulated ``controller_manager`` with its controllers
(its ``controller_manager`` node and a node per controller, ros/controller_manager_node.py;
``joint_states`` from its joint_state_broadcaster, trajectory / gripper / forward controllers over ITS joints),
``external_joint_torques`` of its joints and a hardware-level ``joint_command`` topic. The robot's driver itself
(its joints, <ros2_control> block, controllers file, controller manager) is driver/robot.py; this is its rclpy side.

A scene with one robot and no ``namespace`` (every shipped robot preset, ``--urdf``) keeps today's layout: the
port lives in the simulation node itself. A scene whose robots name a ``namespace`` (scene key ``robots:``,
model/composition.py) gives each robot a child node ``<node namespace>/<robot namespace>/<node name>`` in the same
process and context, so that ``/left/arm_controller/follow_joint_trajectory``, ``/left/joint_states`` and
``/left/controller_manager/list_controllers`` are where a real two-arm cell's drivers put them. TF frames of a
robot's links carry the node's ``frame_prefix`` then the robot's own ``frame_prefix``.
"""

from __future__ import annotations

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from ..driver.command_validation import CommandRejected
from ..sensors.base import SensorSpec
from ..sensors.external_joint_torques import ExternalJointTorques
from .controller_manager_node import ControllerManagerNode
from .controller_io import RosControllerTransport
from .franka import FrankaInterfaces
from .state_messages import JointStateCdr, has_readers


def full_namespace(node_namespace: str, robot_namespace: str) -> str:
    """``/scenario`` + ``left`` -> ``/scenario/left``; an absolute robot namespace is taken as it is."""
    ns = robot_namespace.strip()
    if ns.startswith("/"):
        return ns.rstrip("/") or "/"
    base = node_namespace.rstrip("/")
    return f"{base}/{ns.strip('/')}"


class RobotNode(Node):
    """The rclpy node of one robot (its namespace): its controllers' topics, services and actions are here."""

    def __init__(self, sim_node, namespace: str):
        # the process's global ROS arguments are not applied: a '-r __ns:=...' remap of the simulation node
        # would otherwise replace the robot's namespace (the node's namespace is already part of it)
        super().__init__(sim_node.get_name(), namespace=namespace, context=sim_node.context,
                         start_parameter_services=False, use_global_arguments=False)
        self.sim_node = sim_node


class RobotPort:
    """One robot's ROS interface (see the module docstring). ``robot``: the robot of the world
    (driver/world.py WorldRobot: its driver, layout, frame prefix); ``node``: the simulation node itself
    (single-robot layout) or a ``RobotNode`` in the robot's namespace."""

    def __init__(self, sim_node, robot, node):
        self.sim_node, self.node, self.world_robot = sim_node, node, robot
        robot.namespace = node.get_namespace()     # its controller manager's (the controllers file's keys)
        self.driver = robot.driver
        self.robot, self.instance, self.name = robot.preset, self.driver.instance, self.driver.name
        self.joint_names = self.driver.joint_names
        self.frame_prefix = robot.frame_prefix
        self.controller_manager = None
        self.cm_node = None
        self.franka = None           # franka_ros2's gripper node and robot state (ros/franka.py)
        self.own_node = node is not sim_node
        self.link = sim_node.link     # the stepping loop's LoopLink (driver/loop.py): built before the loop
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
        self.pub_description = node.create_publisher(String, "robot_description", latched)
        self.pub_ext_torques = node.create_publisher(JointState, "external_joint_torques", 10)
        # published as serialized bytes (effort only): no rclpy message conversion at wrench_rate
        self._ext_cdr = JointStateCdr("", self.joint_names, sequences=("effort",))
        # the robot's external_joint_torques sensor (sensors/external_joint_torques.py); its values as the (1, n)
        # effort block of the message
        self._ext = ExternalJointTorques(SensorSpec("external_joint_torques", ExternalJointTorques.type_name,
                                                    {"joints": self.joint_names}, f"robot {self.name!r}"),
                                         sim_node.model)
        self._ext_tau = self._ext.values.reshape(1, -1)
        self._v_index = self.driver.v_index
        if self.own_node:     # the simulation node keeps the hardware-level joint_command of every joint
            sim_node.command_intake.subscribe(node, JointState, "joint_command", self._on_joint_command, 10)

    def description_xml(self) -> str | None:
        return self.driver.description_xml()

    def publish_description(self) -> None:
        try:
            text = self.description_xml()
        except OSError as exc:
            self.sim_node.log.warn(f"robot_description of {self.name!r} not published: {exc}")
            return
        if text is not None:
            self.pub_description.publish(String(data=text))

    def controller_transport(self):
        """The ROS transport of this robot's controllers (ros/controller_io.py): their topics, actions and services
        on this robot's node (World.build hands it to the robot's controller manager)."""
        return RosControllerTransport(self.node, self.sim_node, self.frame_prefix, self.link)

    def attach_controller_manager(self, cm) -> None:
        """The robot's /<namespace>/controller_manager node (its services and parameters) and a node per
        controller over its emulated controller manager ``cm`` (built by driver/world.py), and a Franka's
        franka_gripper node."""
        sim_node = self.sim_node
        self.cm_node = ControllerManagerNode(self, cm, between_steps=self.link.between_steps)
        self.controller_manager = cm
        self.franka = FrankaInterfaces.of(self, cm)

    def publish_external_torques(self, sim) -> None:
        """External joint torques of this robot's joints: the generalized contact force (N*m or N), as
        franka_ros2 publishes them (and a Franka's franka_robot_state_broadcaster, ros/franka.py)."""
        if self.franka is not None:
            self.franka.publish(sim)
        if not has_readers(self.pub_ext_torques):
            return
        self._ext.measure(sim)
        self.pub_ext_torques.publish(self._ext_cdr.encode(sim.t, self._ext_tau))

    def _on_joint_command(self, msg: JointState):
        """Hardware-level commands of this robot's joints (names as in the model, i.e. prefixed)."""
        sim_node = self.sim_node
        try:
            cmd = self.driver.joint_command(sim_node.limits, sim_node.system.command, msg.name, msg.position,
                                            msg.velocity, msg.effort,
                                            source=f"{self.node.get_namespace()}/joint_command")
        except CommandRejected as exc:
            sim_node.reject_command(exc)
            return
        sim_node.note_clamped(cmd.clamped, "joint_command")
        self.link.commands.push_command(cmd)
