"""franka_ros2's driver-side interfaces of a simulated Franka arm (node parameter ``franka_interfaces``, robot
preset ``franka``), as MoveIt and force controllers use them (docs/ros_interface.md, "franka_ros2"):

* the ``franka_gripper`` node (franka_gripper/launch/gripper.launch.py: node name ``franka_gripper`` in the
  launch's namespace, here the simulation node's; node parameter ``franka_gripper_name``): actions
  ``~/homing``, ``~/move``, ``~/grasp`` (franka_msgs/action/*) and ``~/gripper_action``
  (control_msgs/action/GripperCommand), ``~/joint_states`` (both finger joints at width / 2, ``state_publish_rate``) and its parameters (default_speed,
  default_grasp_epsilon.inner/outer, state_publish_rate, feedback_publish_rate, joint_names). The rules are
  driver/franka.py's on the emulated gripper controller of the finger joint;
* ``franka_robot_state_broadcaster/robot_state`` (franka_msgs/msg/FrankaRobotState) with
  ``franka_robot_state_broadcaster/external_wrench_in_base_frame`` and ``.../external_wrench_in_stiffness_frame``
  (geometry_msgs/WrenchStamped) and ``.../current_pose`` (PoseStamped), at the node's ``wrench_rate``
  (ros/franka_state.py), unless the controllers file spawns a franka_robot_state_broadcaster controller.

Goals wait without holding an executor thread (ros/controller_io.py ``follow_goal``).
"""

from __future__ import annotations

from rclpy.action import GoalResponse
from rclpy.node import Node
from sensor_msgs.msg import JointState

from ..driver.controllers.franka_robot_state_broadcaster import FrankaRobotStateBroadcaster
from ..driver.controllers.gripper_action import GoalRejected, GripperActionController
from ..driver.franka import DEFAULT_EPSILON, DEFAULT_SPEED, FrankaGripper, FrankaHand, franka_hands, hand_gripper
from .controller_io import GoalWaits, action_server, follow_goal
from .franka_state import FrankaStatePublisher
from .state_messages import has_readers, stamp

try:   # built into the venv by scripts/ensure_venv.sh (msgs/franka_msgs, msgs/control_msgs)
    from control_msgs.action import GripperCommand
    from franka_msgs.action import Grasp, Homing, Move
    from franka_msgs.msg import FrankaRobotState
except ImportError:
    GripperCommand = Grasp = Homing = Move = FrankaRobotState = None

FINGER_JOINT = "panda_finger_joint1"
ARM_JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
BASE_FRAME, EE_FRAME = "panda_link0", "panda_hand_tcp"
STATE_NODE = "franka_robot_state_broadcaster"


def is_franka(port) -> bool:
    robot = port.robot
    return robot is not None and "franka" in (getattr(robot, "preset_name", None) or robot.name, robot.name)


class _ActionHandler:
    """One action of the franka_gripper node: ``make(request) -> FrankaGripperGoal | None`` (GoalRejected on bad
    values); ``fill(result, goal)`` the result; ``feedback()`` the feedback message."""

    def __init__(self, owner, action_type, name, make, fill, feedback):
        self.owner, self.type, self.make, self.fill, self.feedback = owner, action_type, make, fill, feedback
        self.server = action_server(owner, action_type, f"~/{name}", self)
        self.name = name

    def _goal_callback(self, request):
        o = self.owner
        if not o.gripper.c.active:
            o.warn(f"franka_gripper/{self.name}: goal rejected, the gripper controller '{o.gripper.c.name}' is "
                   f"{o.gripper.c.state}", key=f"franka_gripper/{self.name}/inactive")
            return GoalResponse.REJECT
        try:
            self.make(request)
        except GoalRejected as exc:
            o.warn(f"goal rejected: {exc}", key=f"franka_gripper/{self.name}/bad_goal")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    async def _execute(self, goal_handle):
        o = self.owner
        result = self.type.Result()
        try:
            g = self.make(goal_handle.request)
        except GoalRejected as exc:      # checked by the goal callback already (the width may have changed)
            self.fill(result, False, str(exc), o.gripper.width)
            goal_handle.abort()
            return result
        if g is None:                    # already there
            self.fill(result, True, "", o.gripper.width)
            goal_handle.succeed()
            return result
        await follow_goal(o.gripper.c, g, goal_handle, o.waits, o.running,
                           feedback=lambda: self.feedback(2.0 * g.measured[0]) if g.started else None,
                           on_stop=lambda: g.finish("aborted"))
        ok, error, width = g.outcome()
        self.fill(result, ok, error, width)
        if g.status == "canceled" and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif ok:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return result


class FrankaGripperNode(Node):
    """The ``franka_gripper`` node (see the module docstring) on the gripper controller ``controller``."""

    def __init__(self, sim_node, namespace: str, controller: GripperActionController, joint_names):
        super().__init__(sim_node.config.franka_gripper_name, namespace=namespace, context=sim_node.context,
                         use_global_arguments=False)
        self.sim_node = sim_node
        if sim_node.recorder is not None:     # record:= its joint_states, the goals and results of its actions
            sim_node.recorder.follow(self)
        sim = sim_node.sim

        def finger_position():      # a read of the simulator's state (the robot's joints keep their indices)
            m = sim.model
            return sim.q[m.joint_q_index[m.joint_index(controller.joint)]]
        self.gripper = FrankaGripper(controller, finger_position)
        self.running = sim_node.link       # driver/loop.LoopLink: whether the stepping thread runs (goals end when not)
        p = self.declare_parameter
        self.default_speed = p("default_speed", DEFAULT_SPEED).value
        self.inner = p("default_grasp_epsilon.inner", DEFAULT_EPSILON).value
        self.outer = p("default_grasp_epsilon.outer", DEFAULT_EPSILON).value
        state_rate = p("state_publish_rate", 15.0).value
        feedback_rate = p("feedback_publish_rate", 30.0).value
        self.joint_names = list(p("joint_names", list(joint_names)).value)
        controller.monitor_period = min(controller.monitor_period, 1.0 / feedback_rate)
        self.waits = GoalWaits(self, 1.0 / feedback_rate)
        g = self.gripper
        if GripperCommand is None or FrankaRobotState is None:
            return

        def width_feedback(action):
            def fb(width):
                msg = action.Feedback()
                msg.current_width = width
                return msg
            return fb

        def franka_result(result, ok, error, width):
            result.success, result.error = ok, error

        def command_result(result, ok, error, width):
            result.position, result.effort, result.stalled, result.reached_goal = width, 0.0, False, ok

        def command_feedback(width):
            msg = GripperCommand.Feedback()
            msg.position = width
            return msg

        self.actions = [
            _ActionHandler(self, Homing, "homing", lambda r: g.homing(), franka_result, width_feedback(Homing)),
            _ActionHandler(self, Move, "move", lambda r: g.move(r.width, r.speed), franka_result,
                           width_feedback(Move)),
            _ActionHandler(self, Grasp, "grasp",
                           lambda r: g.grasp(r.width, r.speed, r.force, r.epsilon.inner, r.epsilon.outer),
                           franka_result, width_feedback(Grasp)),
            _ActionHandler(self, GripperCommand, "gripper_action",
                           lambda r: g.gripper_command(r.command.position, r.command.max_effort,
                                                       self.default_speed, self.inner, self.outer),
                           command_result, command_feedback),
        ]
        self.pub_joint_states = self.create_publisher(JointState, "~/joint_states", 1)
        self._js = JointState(name=self.joint_names, velocity=[0.0, 0.0], effort=[0.0, 0.0])
        self.state_period = 1.0 / state_rate          # s of sim time (published by the stepping thread)
        self._next_state = 0.0

    def warn(self, message: str, key: str) -> None:
        self.sim_node.warn_throttled(message, key=key)

    def publish_state(self, t: float) -> None:
        """~/joint_states as franka_gripper publishes it (each finger at width / 2, zero velocity and effort),
        every ``state_publish_rate`` period of sim time ``t`` (s)."""
        if t < self._next_state:
            return
        self._next_state = max(self._next_state + self.state_period, t)
        if not has_readers(self.pub_joint_states):
            return
        half = self.gripper.width / 2.0
        js = self._js
        stamp(t, js.header.stamp)
        js.position = [half, half]
        self.pub_joint_states.publish(js)


class FrankaInterfaces:
    """A Franka arm's and a Franka Hand's interfaces, or None when the robot has neither / the parameter is off.

    As franka_ros2's bringup starts them with the hardware: the robot state (``franka_robot_state_broadcaster``)
    for the package's ``franka`` preset (its Panda arm joints), unless the controllers file spawns the broadcaster;
    the ``franka_gripper`` node for ANY robot with a Franka Hand (driver/franka.py ``franka_hands``: the FR3 of
    franka_description, the Panda), on the controllers file's GripperActionController of the finger if it has one
    (the preset's ``gripper_action_controller``), else on the hand's own emulated gripper (``hand_gripper``: a
    device of the controller manager, not a listed controller; franka_ros2 commands the hand through libfranka,
    not ros2_control). Not served when a controller of the file commands the finger (then the hand is
    ros2_control's, as in franka_ros2's Gazebo set-up)."""

    @staticmethod
    def of(port, cm):
        sim_node = port.sim_node
        if FrankaRobotState is None or not sim_node.config.franka_interfaces:
            return None
        arm = is_franka(port) and all(j in port.joint_names for j in ARM_JOINTS)
        hands = [h for h in franka_hands(sim_node.model) if h.finger in port.joint_names]
        if not arm and not hands:
            return None
        return FrankaInterfaces(port, cm, arm, hands[0] if hands else None)

    def __init__(self, port, cm, arm: bool = True, hand: FrankaHand | None = None):
        controllers = list(cm.controllers.values()) if cm is not None else []
        self.state = None        # a spawned franka_robot_state_broadcaster publishes it instead (FrankaStateIO)
        if arm and not any(isinstance(c, FrankaRobotStateBroadcaster) for c in controllers):
            self.state = FrankaStatePublisher(port.node, port.sim_node, STATE_NODE, ARM_JOINTS, BASE_FRAME, EE_FRAME,
                                              port.frame_prefix)
        self.gripper_node = None
        self.hand = hand
        finger = hand.finger if hand is not None else FINGER_JOINT
        grippers = [c for c in controllers if isinstance(c, GripperActionController) and c.joint.endswith(finger)]
        log = port.sim_node.log
        if grippers:
            c = grippers[0]
            fingers = [c.joint] + [j for j in c.limited_joints[1:]]
            if len(fingers) != 2:
                fingers = [c.joint, hand.mimic if hand is not None else c.joint[:-1] + "2"]
        elif hand is not None and cm is not None:
            users = [c.name for c in controllers
                     if any(i.rpartition("/")[0] == hand.finger for i in c.command_interfaces())]
            if users:
                log.warn(f"franka_interfaces: {hand.finger} is commanded by the controller(s) {users} of "
                         f"{cm.source}: the franka_gripper node is not served (franka_ros2 commands the hand "
                         f"through franka_gripper, not a ros2_control controller; drop the finger from those "
                         f"controllers to have it)")
                return
            c = hand_gripper(hand, cm.ctx, port.sim_node.config.franka_gripper_name)
            cm.add_device(c)
            fingers = [hand.finger, hand.mimic]
        else:
            log.warn(f"franka_interfaces: no GripperActionController on {finger} in the controllers file: the "
                     f"franka_gripper node is not served")
            return
        self.gripper_node = FrankaGripperNode(port.sim_node, port.node.get_namespace(), c, fingers)
        if cm is not None and c not in controllers:
            log.info(f"franka_gripper: {self.gripper_node.get_fully_qualified_name()} (homing, move, grasp, "
                     f"gripper_action, joint_states) on the Franka Hand's {hand.finger}, as franka_ros2's "
                     f"gripper.launch.py serves it with the hardware")

    def publish(self, sim) -> None:
        """The robot state and the gripper's joint states (stepping thread, at the node's wrench_rate)."""
        if self.state is not None:
            self.state.publish(sim)
        if self.gripper_node is not None:
            self.gripper_node.publish_state(sim.t)
