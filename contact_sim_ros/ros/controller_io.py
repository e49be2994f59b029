"""The emulated ros2_control controllers over ROS 2: each controller's topics, action server and publishers
(the transport side of driver/controllers/*), and the controller manager's services. The controllers themselves
(goal checks, execution, switching) are in driver/; what is here only turns messages into their calls and their
values into messages.

* ``RosControllerTransport``: what a robot's ControllerManager gets at construction (``attach`` per controller,
  reports to the simulation node's throttled warnings and rejection counters);
* one ``*IO`` class per controller type: joint_trajectory (``<name>/joint_trajectory``,
  ``<name>/follow_joint_trajectory``, ``<name>/controller_state``), gripper (``<name>/gripper_cmd``), forward
  command (``<name>/commands``), joint_state_broadcaster (``joint_states``, ``dynamic_joint_states``),
  force_torque_sensor_broadcaster (``<name>/wrench``), franka_robot_state_broadcaster (ros/franka_state.py);
* the controller manager's services and parameters are the ``controller_manager`` node's
  (controller_manager_node.py).

Action goals: the goal request is checked in the goal callback (a bad GripperCommand is rejected there; a bad
trajectory is accepted and aborted at once with its error code and reason, so that a client sees why). The
execute callbacks are coroutines that never hold an executor thread while the stepping thread executes the goal
(goals sent while the simulation is paused wait without blocking services, diagnostics or signals): a coroutine
gives its thread back (``_next_wake``) and the executor resumes it at its next wake-up, which a guard condition
triggers when the stepping thread finishes the goal and a wall-clock timer at the controller's
``action_monitor_rate`` triggers for feedback while goals run.
"""

from __future__ import annotations

import array
import ctypes
import threading
import time

import numpy as np
from geometry_msgs.msg import WrenchStamped
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import GoalEvent
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.exceptions import InvalidHandle
from rclpy.publisher import Publisher
from rclpy.subscription import Subscription
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64, Float64MultiArray
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg
from trajectory_msgs.msg import JointTrajectoryPoint

from ..driver.controllers.base import ControllerIO, ControllerTransport
from ..driver.controllers.force_torque_sensor_broadcaster import ForceTorqueSensorBroadcaster
from ..driver.controllers.forward_command import ForwardCommandController
from ..driver.controllers.franka_robot_state_broadcaster import FrankaRobotStateBroadcaster
from ..driver.controllers.gripper_action import GoalRejected as GripperGoalRejected
from ..driver.controllers.gripper_action import GripperActionController
from ..driver.controllers.imu_sensor_broadcaster import IMUSensorBroadcaster
from ..driver.controllers.joint_state_broadcaster import JointStateBroadcaster
from ..driver.controllers.joint_trajectory import INVALID_GOAL, GoalRejected, JointTrajectoryController
from ..driver.controllers.sensor_state_broadcaster import WRENCH, SensorStateBroadcaster
from ..driver.controllers.speed_scaling_state_broadcaster import SpeedScalingStateBroadcaster
from .entity_reaper import EntityReaper
from .franka_state import FrankaStateIO
from ..state_messages import topic_token
from .state_messages import (JointStateCdr, fill_joint_state, fill_trajectory_controller_state, fill_wrench,
                             has_readers, stamp)

try:   # built into the venv by scripts/ensure_venv.sh (msgs/control_msgs, msgs/controller_manager_msgs)
    from control_msgs.action import FollowJointTrajectory, GripperCommand
    from control_msgs.msg import DynamicJointState, InterfaceValue, JointTrajectoryControllerState
except ImportError:
    FollowJointTrajectory = GripperCommand = DynamicJointState = JointTrajectoryControllerState = None



class _NextWake:
    """Awaitable: the coroutine gives its executor thread back; the executor resumes it at its next wake-up (rclpy's
    executors resume every task in progress before they wait for new work)."""

    def __await__(self):
        yield


class GoalWaits:
    """What wakes the executor for the goals of one action server: ``done()`` (any thread: a goal finished; a
    guard condition) and, while goals run (``with waits:``), a steady timer every ``period`` s (feedback). With no
    goal the timer's period is an hour instead (an idle node is not woken 20 times a second per action server);
    it is never cancelled: cancelling it raced with an executor thread taking it ("timer is canceled" raised in
    the spin)."""

    IDLE_PERIOD_NS = 3600 * 10 ** 9

    def __init__(self, node, period: float):
        self._period_ns = max(1, int(round(period * 1e9)))
        self._guard = node.create_guard_condition(lambda: None)
        self._timer = node.create_timer(period, lambda: None, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._timer.timer_period_ns = self.IDLE_PERIOD_NS
        self._timer.reset()
        self._running = 0
        self._lock = threading.Lock()

    def done(self) -> None:
        guard = self._guard
        if guard is not None:
            try:
                guard.trigger()
            except InvalidHandle:     # destroyed meanwhile: its controller was unloaded
                pass

    def __enter__(self):
        with self._lock:
            self._running += 1
            if self._running == 1:
                self._timer.timer_period_ns = self._period_ns
                self._timer.reset()
        return self

    def __exit__(self, *exc):
        with self._lock:
            self._running -= 1
            if self._running == 0:
                self._timer.timer_period_ns = self.IDLE_PERIOD_NS
                self._timer.reset()

    def destroy(self, node, reaper) -> None:
        """Retired (``reaper``: EntityReaper), destroyed once the executor is done with them; ``done`` after this
        is a no-op."""
        guard, self._guard = self._guard, None
        reaper.retire(self._timer, node)
        reaper.retire(guard, node)


def _seconds(d) -> float:
    return d.sec + 1e-9 * d.nanosec


class RosControllerTransport(ControllerTransport):
    """The ROS side of one robot's controllers: their entities on ``node`` (the simulation node itself, or the
    robot's RobotNode in its namespace), reports to ``sim_node`` (throttled warnings, rejection counters; tagged
    with the robot's namespace when ``node`` is its own), ``frame_prefix`` on the F/T frames; ``link``: the stepping
    loop's driver/loop.LoopLink (whether it runs), built before the loop: this transport never holds the loop."""

    def __init__(self, node, sim_node, frame_prefix: str, link):
        self.node, self.sim_node, self.frame_prefix, self.link = node, sim_node, frame_prefix, link
        self.tag = node.get_namespace() if node is not sim_node else ""
        self.reaper = EntityReaper(node)      # destroys an unloaded controller's entities when the executor is done

    def attach(self, controller):
        for cls, io in ((JointTrajectoryController, JointTrajectoryIO), (GripperActionController, GripperIO),
                        (ForwardCommandController, ForwardCommandIO), (JointStateBroadcaster, JointStateIO),
                        (ForceTorqueSensorBroadcaster, WrenchIO), (SpeedScalingStateBroadcaster, SpeedScalingIO),
                        (FrankaRobotStateBroadcaster, FrankaStateIO), (IMUSensorBroadcaster, ImuIO),
                        (SensorStateBroadcaster, SensorStateIO)):
            if isinstance(controller, cls):
                return io(controller, self)
        return None

    def subscribe_commands(self, msg_type, topic: str, callback):
        """A command topic's subscription (depth 10) on the robot's node, in the simulation node's command intake
        (ros/command_intake.py: applied before each ~/step's first step)."""
        return self.sim_node.command_intake.subscribe(self.node, msg_type, topic, callback, 10)

    def detach(self, controller) -> None:
        """The controller is unloaded (on the stepping thread): its topics, action server and timers leave the
        node at once and are destroyed by the reaper once the executor is done with them (ros/entity_reaper.py:
        destroyed here, they raced with the executor's wait and its threads: "action server pointer is invalid");
        their names vanish from the graph, as with the real controller's node."""
        io, node = controller.io, self.node
        for value in list(vars(io).values()):
            if isinstance(value, GoalWaits):
                value.destroy(node, self.reaper)
            elif isinstance(value, (ActionServer, Publisher, Subscription)):
                self.reaper.retire(value, node)
            if isinstance(value, Subscription):
                self.sim_node.command_intake.forget(value)

    def reject_command(self, exc) -> None:
        self.sim_node.reject_command(exc)

    def note_clamped(self, notes, source) -> None:
        self.sim_node.note_clamped(notes, source)

    def warn_throttled(self, message: str, key: str | None = None) -> None:
        if self.tag:
            message, key = f"[{self.tag}] {message}", (None if key is None else f"{self.tag}/{key}")
        self.sim_node.warn_throttled(message, key=key)

    def info(self, message: str) -> None:
        self.node.get_logger().info(message)

    def error(self, message: str) -> None:
        self.node.get_logger().error(message)

    @property
    def running(self) -> bool:
        """The stepping thread runs (goals waiting on it end when it stops)."""
        return self.link.running


_MALLOC_TRIM = getattr(ctypes.CDLL(None), "malloc_trim", None)     # glibc; None elsewhere
LARGE_GOAL_POINTS = 10_000      # a goal with at least this many points gives its heap pages back when it ends


def _release_trajectory_request(goal_handle) -> None:
    """Drop a FollowJointTrajectory goal's points once it has ended: rclpy keeps the goal handle, and with it the
    request (one Python message per point: ~60-80 MB for 100k points), for the action server's result_timeout
    (900 s) so that clients can still fetch the result; the result needs none of them.

    After a large goal the freed pages go back to the system (glibc's ``malloc_trim``, every arena): each executor
    thread that built a goal's points has its own malloc arena, which otherwise keeps them for its next use (over
    DDS, ten 100k-point goals grew the node 400 -> 460-474 MB before it levelled off; with one arena it stayed
    flat)."""
    request = goal_handle.request
    large = len(request.trajectory.points) >= LARGE_GOAL_POINTS
    request.trajectory.points = []
    request.path_tolerance = []
    request.goal_tolerance = []
    if large and _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _finish_goal(goal_handle, status: str) -> None:
    """The goal's end as the real controllers report it (a goal preempted by a newer one: CANCELED)."""
    if status == "succeeded":
        goal_handle.succeed()
    elif status == "canceled":
        if not goal_handle.is_cancel_requested:
            goal_handle._update_state(GoalEvent.CANCEL_GOAL)   # preempted by a newer goal
        goal_handle.canceled()
    else:
        goal_handle.abort()


def action_server(node, action_type, name: str, io) -> ActionServer:
    """An action server of a controller's ``io`` (its ``_goal_callback`` and ``_execute``): every cancel request
    accepted; goals executed concurrently (each waits in its coroutine, not in an executor thread)."""
    return ActionServer(node, action_type, name, execute_callback=io._execute, goal_callback=io._goal_callback,
                        cancel_callback=lambda _goal: CancelResponse.ACCEPT, callback_group=ReentrantCallbackGroup())


async def follow_goal(c, execution, goal_handle, waits, transport, feedback, on_stop, submitted=None) -> None:
    """Hand ``execution`` (a goal of controller ``c``) to the stepping thread and wait, without holding an executor
    thread, until it ends: a cancel request is passed on, ``feedback()`` (a message, or None while there is none)
    is published every monitor period (s, wall clock, as the real action servers), ``on_stop()`` ends it if the
    simulation stops; ``submitted()``, if given, is called once the execution is handed over."""
    execution.on_done = waits.done
    c.submit(execution)
    if submitted is not None:
        submitted()
    next_feedback = time.monotonic() + c.monitor_period
    with waits:
        while not execution.done.is_set():
            if goal_handle.is_cancel_requested:
                execution.cancel_requested = True
            if time.monotonic() >= next_feedback:
                msg = feedback()
                if msg is not None:
                    next_feedback = max(next_feedback + c.monitor_period, time.monotonic())
                    goal_handle.publish_feedback(msg)
            if not transport.running:
                on_stop()
                break
            await _NextWake()


# ------------------------------------------------------------------------------------------ trajectory


class JointTrajectoryIO(ControllerIO):
    """``<name>/joint_trajectory``, ``<name>/follow_joint_trajectory``, ``<name>/controller_state``."""

    def __init__(self, c: JointTrajectoryController, transport: RosControllerTransport):
        self.c, self.transport = c, transport
        node = transport.node
        self.sub = transport.subscribe_commands(JointTrajectoryMsg, f"{c.name}/joint_trajectory", c.on_trajectory)
        self.state_pub = None
        if JointTrajectoryControllerState is not None:
            self.state_pub = node.create_publisher(JointTrajectoryControllerState, f"{c.name}/controller_state", 10)
            self._state = JointTrajectoryControllerState()
            self._state.joint_names = list(c.joints)
        self.action = None
        # goals are handed to the controller in the order they were accepted (the newest accepted preempts, as
        # ros2_control's): their execute callbacks run on several executor threads, in any order (a goal accepted
        # just after another could be handed over first and then be preempted by the older one)
        self._order = threading.Lock()
        self._accepted = self._handed_over = 0
        self._sequence: dict[int, int] = {}      # id(goal request) -> its acceptance number
        if FollowJointTrajectory is not None:
            self.waits = GoalWaits(node, c.monitor_period)
            self.action = action_server(node, FollowJointTrajectory, f"{c.name}/follow_joint_trajectory", self)

    HAND_OVER_WAIT_S = 1.0    # s (wall) a goal waits at most for the goals accepted before it to be handed over

    def _goal_callback(self, goal):
        c = self.c
        if not c.active:
            self.transport.warn_throttled(f"{c.name}/follow_joint_trajectory: goal rejected, controller "
                                          f"'{c.name}' is {c.state}", key=f"{c.name}/inactive")
            return GoalResponse.REJECT
        with self._order:
            self._accepted += 1
            self._sequence[id(goal)] = self._accepted     # the request object the goal handle keeps
        return GoalResponse.ACCEPT

    def _handed(self, n: int | None) -> None:
        if n is not None:
            with self._order:
                self._handed_over = max(self._handed_over, n)
            self.waits.done()                  # wakes the executor: a goal waiting for its turn goes on

    async def _execute(self, goal_handle):
        c = self.c
        result = FollowJointTrajectory.Result()
        with self._order:
            n = self._sequence.pop(id(goal_handle.request), None)
        deadline = time.monotonic() + self.HAND_OVER_WAIT_S
        while n is not None and self._handed_over < n - 1 and time.monotonic() < deadline:
            await _NextWake()                  # the goals accepted before this one first
        try:
            ex = c.goal(goal_handle.request, goal_handle)
        except GoalRejected as exc:
            self._handed(n)
            result.error_code, result.error_string = exc.code, str(exc)
            self.transport.node.get_logger().warn(f"{c.name}: goal aborted: {exc}")
            _release_trajectory_request(goal_handle)
            goal_handle.abort()
            return result
        await follow_goal(c, ex, goal_handle, self.waits, self.transport,
                           feedback=lambda: self._feedback(ex.feedback) if ex.feedback is not None else None,
                           on_stop=lambda: ex.finish("aborted", INVALID_GOAL, "the simulation stopped"),
                           submitted=lambda: self._handed(n))
        result.error_code, result.error_string = ex.error_code, ex.error_string
        _release_trajectory_request(goal_handle)
        _finish_goal(goal_handle, ex.status)
        return result

    def _feedback(self, fb):
        t, qd, vd, q, v = fb
        msg = FollowJointTrajectory.Feedback()
        stamp(t, msg.header.stamp)
        msg.joint_names = list(self.c.joints)
        msg.desired = JointTrajectoryPoint(positions=qd.tolist(), velocities=vd.tolist())
        msg.actual = JointTrajectoryPoint(positions=q.tolist(), velocities=v.tolist())
        msg.error = JointTrajectoryPoint(positions=(qd - q).tolist(), velocities=(vd - v).tolist())
        return msg

    def publish_state(self, execution) -> None:
        if self.state_pub is None or not has_readers(self.state_pub):
            return
        fill_trajectory_controller_state(self._state, self.c)     # one message, refilled
        self.state_pub.publish(self._state)


# ------------------------------------------------------------------------------------------ gripper


class GripperIO(ControllerIO):
    """``<name>/gripper_cmd`` (control_msgs/action/GripperCommand)."""

    def __init__(self, c: GripperActionController, transport: RosControllerTransport):
        self.c, self.transport = c, transport
        self.action = None
        if GripperCommand is not None:
            self.waits = GoalWaits(transport.node, c.monitor_period)
            self.action = action_server(transport.node, GripperCommand, f"{c.name}/gripper_cmd", self)

    def _goal_callback(self, goal):
        """The goal request checked where it is received: a bad one is rejected with its reason (warned)."""
        c = self.c
        if not c.active:
            return GoalResponse.REJECT
        try:
            c.goal(goal.command.position, goal.command.max_effort)
        except GripperGoalRejected as exc:
            self.transport.warn_throttled(f"goal rejected: {exc}", key=f"{c.name}/bad_goal")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    async def _execute(self, goal_handle):
        c = self.c
        cmd = goal_handle.request.command
        result = GripperCommand.Result()
        try:
            g = c.goal(cmd.position, cmd.max_effort, goal_handle)
        except GripperGoalRejected:       # checked by the goal callback already
            goal_handle.abort()
            return result
        await follow_goal(c, g, goal_handle, self.waits, self.transport,
                           feedback=lambda: self._feedback(g) if g.started else None,
                           on_stop=lambda: g.finish("aborted"))
        result.position, result.effort, result.stalled, result.reached_goal = g.measured
        _finish_goal(goal_handle, g.status)
        return result

    @staticmethod
    def _feedback(g):
        fb = GripperCommand.Feedback()
        fb.position, fb.effort, fb.stalled, fb.reached_goal = g.measured
        return fb


# ------------------------------------------------------------------------------------------ forward


class ForwardCommandIO(ControllerIO):
    """``<name>/commands`` (std_msgs/Float64MultiArray)."""

    def __init__(self, c: ForwardCommandController, transport: RosControllerTransport):
        self.c = c
        self.sub = transport.subscribe_commands(Float64MultiArray, c.topic, lambda msg: c.on_commands(msg.data))


# ------------------------------------------------------------------------------------------ broadcasters


class JointStateIO(ControllerIO):
    """``joint_states`` (serialized bytes: no rclpy message conversion) and ``dynamic_joint_states`` (at most
    DYNAMIC_RATE_HZ) of a joint_state_broadcaster."""

    def __init__(self, c: JointStateBroadcaster, transport: RosControllerTransport):
        self.c = c
        node = transport.node
        prefix = f"{c.name}/" if c.local else ""
        self._msg = JointState()
        self._msg.name = list(c.names)
        self._msg.header.frame_id = c.frame_id
        self._cdr = JointStateCdr(c.frame_id, list(c.names)) if len(c.rows) == 3 and c.names else None
        self.pub = node.create_publisher(JointState, prefix + "joint_states", 10)
        self.pub_dynamic = None
        if DynamicJointState is not None:
            self.pub_dynamic = node.create_publisher(DynamicJointState, prefix + "dynamic_joint_states", 10)
            self._dyn = DynamicJointState()
            self._dyn.header.frame_id = c.frame_id
            self._dyn.joint_names = list(c.names)
            names = [name for _, name in c.rows]
            self._dyn.interface_values = [InterfaceValue(interface_names=names) for _ in c.names]
        self._published = 0

    def publish(self) -> None:
        c = self.c
        self._published += 1         # counts the joint_states periods (the dynamic ones are every k-th of them)
        states = has_readers(self.pub)
        dynamic = (self.pub_dynamic is not None and self._published % c.dynamic_every == 0
                   and has_readers(self.pub_dynamic))
        if not (states or dynamic):
            return
        out = c.values()
        t = c.ctx.state.time
        if states and self._cdr is not None:
            self.pub.publish(self._cdr.encode(t, out))
        elif states:
            fill_joint_state(self._msg, c, out)
            self.pub.publish(self._msg)
        if dynamic:
            dyn = self._dyn
            stamp(t, dyn.header.stamp)
            rows = [k for k, _ in c.rows]
            per_joint = np.ascontiguousarray(out[rows].T)      # (joints, interfaces)
            for value, row in zip(dyn.interface_values, per_joint):
                value.values = array.array("d", row.tobytes())
            self.pub_dynamic.publish(dyn)


class WrenchIO(ControllerIO):
    """``<name>/wrench`` (geometry_msgs/WrenchStamped, in the sensor frame with the robot's frame prefix)."""

    def __init__(self, c: ForceTorqueSensorBroadcaster, transport: RosControllerTransport):
        self.c = c
        self._msg = WrenchStamped()
        self._msg.header.frame_id = transport.frame_prefix + c.frame_id
        self.pub = transport.node.create_publisher(WrenchStamped, f"{c.name}/wrench", 10)

    def publish(self) -> None:
        if not has_readers(self.pub):
            return
        fill_wrench(self._msg, self.c.reading(), self.c.ctx.state.time)
        self.pub.publish(self._msg)


class ImuIO(ControllerIO):
    """``<name>/imu`` (sensor_msgs/Imu, in ``frame_id`` with the robot's frame prefix): the IMU's state interfaces
    (sensors/imu.py: orientation x y z w, angular velocity rad/s, linear acceleration m/s^2) and the broadcaster's
    static covariances."""

    def __init__(self, c: IMUSensorBroadcaster, transport: RosControllerTransport):
        self.c = c
        self._msg = msg = Imu()
        msg.header.frame_id = transport.frame_prefix + c.frame_id
        (msg.orientation_covariance, msg.angular_velocity_covariance,
         msg.linear_acceleration_covariance) = (np.array(cov) for cov in c.covariances)
        self.pub = transport.node.create_publisher(Imu, f"{c.name}/imu", 10)

    def publish(self) -> None:
        if not has_readers(self.pub):
            return
        r, msg = self.c.reading(), self._msg
        stamp(self.c.ctx.state.time, msg.header.stamp)
        o, w, a = msg.orientation, msg.angular_velocity, msg.linear_acceleration
        o.x, o.y, o.z, o.w = float(r[0]), float(r[1]), float(r[2]), float(r[3])
        w.x, w.y, w.z = float(r[4]), float(r[5]), float(r[6])
        a.x, a.y, a.z = float(r[7]), float(r[8]), float(r[9])
        self.pub.publish(msg)


class SensorStateIO(ControllerIO):
    """contact_sim_ros/SensorStateBroadcaster's messages (driver/controllers/sensor_state_broadcaster.py): per
    message ``<name>/<sensor type>[/<label token>]``, WrenchStamped (frame with the robot's frame prefix) or
    JointState (the sensor's joints, their effort)."""

    def __init__(self, c: SensorStateBroadcaster, transport: RosControllerTransport):
        self.c = c
        base = f"{c.name}/{c.sensor_type}"
        self.wrench = c.message_type == WRENCH
        self.pubs, self.msgs = [], []
        for suffix, frame in c.messages():
            topic = f"{base}/{topic_token(suffix)}" if suffix else base
            if self.wrench:
                msg = WrenchStamped()
                msg.header.frame_id = transport.frame_prefix + frame
            else:
                msg = JointState(name=list(c.labels or ()))
            self.msgs.append(msg)
            self.pubs.append(transport.node.create_publisher(type(msg), topic, 10))

    def publish(self) -> None:
        if not any(has_readers(pub) for pub in self.pubs):
            return
        reading, t = self.c.reading(), self.c.ctx.state.time
        if self.wrench:
            for row, msg, pub in zip(reading.reshape(-1, 6), self.msgs, self.pubs):
                fill_wrench(msg, row, t)
                pub.publish(msg)
            return
        msg = self.msgs[0]
        stamp(t, msg.header.stamp)
        msg.effort = array.array("d", reading.astype(float).tobytes())
        self.pubs[0].publish(msg)


class SpeedScalingIO(ControllerIO):
    """``<name>/speed_scaling`` (std_msgs/Float64, percent) of UR's speed_scaling_state_broadcaster."""

    def __init__(self, c: SpeedScalingStateBroadcaster, transport: RosControllerTransport):
        self.c = c
        self._msg = Float64()
        self.pub = transport.node.create_publisher(Float64, f"{c.name}/speed_scaling", 10)

    def publish(self) -> None:
        if has_readers(self.pub):
            self._msg.data = self.c.speed_scaling_percent()
            self.pub.publish(self._msg)
