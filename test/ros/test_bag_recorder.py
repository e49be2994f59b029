"""Recording a node's own publications to rosbag2 / MCAP (contact_sim_ros/ros/bag_recorder.py), over real DDS.

A small node publishes what the simulation node publishes (JointState 500 Hz, TFMessage 100 Hz, WrenchStamped
250 Hz, rosgraph_msgs/Clock 1 kHz with sim-time stamps, a latched /tf_static and robot_description) for 1 s of
sim time paced to the wall clock from a separate thread (like the stepping thread) while a recorder attached to
it (tapping its publishers) writes the bag; the bag is read back with rosbags' Reader, and a subscriber in
another context checks that what went over DDS is what was recorded.
"""

from __future__ import annotations

import threading
import time

import pytest
import rclpy
import yaml
from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped, WrenchStamped
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from contact_sim_ros.errors import ConfigError
from contact_sim_ros.ros.bag_recorder import (attach_recorder, exact_cdr, make_typestore, published_topics,
                                              stamp_offset)

DT = 1e-3                   # s of sim time per step
STEPS = 1000                # 1 s
EVERY = {"/clock": 1, "/test_ns/joint_states": 2, "/tf": 10, "/test_ns/ft_sensor/wrench": 4}   # steps
JOINTS = ["j1", "j2", "j3"]


def _stamp(k: int) -> Time:
    ns = int(round(k * DT * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _joint_state(k):
    return JointState(name=JOINTS, position=[0.001 * k, -0.002 * k, 0.5], velocity=[1.0, -2.0, 0.0],
                      effort=[float(k), 0.0, -1.0])


def _wrench(k):
    w = WrenchStamped()
    w.header.frame_id = "ft_sensor"
    w.wrench.force.z = -9.81 - 0.01 * k
    w.wrench.torque.x = 0.001 * k
    return w


def _tf(k):
    t = TransformStamped()
    t.header.frame_id, t.child_frame_id = "world", "box"
    t.transform.translation.x = 0.01 * k
    t.transform.rotation.w = 1.0
    return TFMessage(transforms=[t])


class _Publisher:
    """A node publishing like sim_node, stepping in its own thread, spun by a MultiThreadedExecutor."""

    def __init__(self):
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = Node("bag_test_node", namespace="test_ns", context=self.context)
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        n = self.node
        self.pubs = {"/clock": n.create_publisher(Clock, "/clock", 10),
                     "/test_ns/joint_states": n.create_publisher(JointState, "joint_states", 10),
                     "/tf": n.create_publisher(TFMessage, "/tf", 100),
                     "/test_ns/ft_sensor/wrench": n.create_publisher(WrenchStamped, "ft_sensor/wrench", 10)}
        self.pub_static = n.create_publisher(TFMessage, "/tf_static", latched)
        self.pub_description = n.create_publisher(String, "robot_description", latched)
        self.executor = MultiThreadedExecutor(num_threads=4, context=self.context)
        self.executor.add_node(n)
        self._spin = threading.Thread(target=self.executor.spin, daemon=True)
        self._spin.start()
        self.published = {topic: [] for topic in self.pubs}      # topic -> [(stamp ns, message)]

    def publish_latched(self):
        static = TransformStamped()
        static.header.frame_id, static.child_frame_id = "world", "base"
        static.transform.translation.z = 0.5
        static.transform.rotation.w = 1.0
        self.pub_static.publish(TFMessage(transforms=[static]))
        self.pub_description.publish(String(data="<robot name='r'/>"))

    def run(self):
        """STEPS steps of DT paced to the wall clock (as real_time_factor 1)."""
        start = time.monotonic()
        for k in range(1, STEPS + 1):
            stamp = _stamp(k)
            ns = stamp.sec * 1_000_000_000 + stamp.nanosec
            for topic, every in EVERY.items():
                if k % every:
                    continue
                if topic == "/clock":
                    msg = Clock(clock=stamp)
                elif topic == "/tf":
                    msg = _tf(k)
                    msg.transforms[0].header.stamp = stamp
                else:
                    msg = _joint_state(k) if "joint" in topic else _wrench(k)
                    msg.header.stamp = stamp
                self.pubs[topic].publish(msg)
                self.published[topic].append((ns, k))
            delay = start + k * DT - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def close(self):
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


class _OutsideSubscriber:
    """A subscriber to /test_ns/joint_states in its own context (as another process would be)."""

    def __init__(self):
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = Node("bag_test_outside", context=self.context)
        self.joint_states = []                    # (stamp ns, positions)
        self.node.create_subscription(JointState, "/test_ns/joint_states", self._on_js, 1000)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self.executor.spin, daemon=True)
        self._thread.start()

    def _on_js(self, msg):
        self.joint_states.append((msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec, list(msg.position)))

    def close(self):
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


@pytest.fixture
def publisher():
    p = _Publisher()
    yield p
    p.close()


def test_recorder_writes_a_readable_mcap_bag_with_sim_time_stamps(publisher, tmp_path):
    from rosbags.rosbag2 import Reader
    bag = tmp_path / "run1"
    recorder = attach_recorder(publisher.node, bag)         # every topic the node publishes, taps them
    expected_topics = set(EVERY) | {"/tf_static", "/test_ns/robot_description"}
    assert set(recorder.topics) == expected_topics
    publisher.publish_latched()
    outside = _OutsideSubscriber()                           # the bytes still reach a subscriber over DDS
    try:
        js_pub = publisher.pubs["/test_ns/joint_states"]
        deadline = time.monotonic() + 30.0                   # discovery under load can take seconds
        while js_pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        publisher.run()
        wait = time.monotonic() + 10.0
        while time.monotonic() < wait and len(outside.joint_states) < 10:
            time.sleep(0.05)
    finally:
        outside.close()
    recorder.close()
    recorder.close()                                          # idempotent

    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["storage_identifier"] == "mcap"
    assert meta["version"] == 9
    assert list(bag.glob("*.mcap"))

    store = make_typestore()
    got = {t: [] for t in expected_topics}
    with Reader(bag) as reader:
        assert {c.topic for c in reader.connections} == expected_topics
        types = {c.topic: c.msgtype for c in reader.connections}
        assert types["/tf"] == "tf2_msgs/msg/TFMessage" and types["/clock"] == "rosgraph_msgs/msg/Clock"
        for conn, timestamp, raw in reader.messages():
            got[conn.topic].append((timestamp, store.deserialize_cdr(raw, conn.msgtype)))
        qos = {c.topic: c.ext.offered_qos_profiles for c in reader.connections}
    assert qos["/tf_static"][0].durability.name == "TRANSIENT_LOCAL"   # replayed latched

    for topic in EVERY:
        sent = publisher.published[topic]
        rec = got[topic]
        assert len(sent) == STEPS // EVERY[topic]
        # recorded on the publishing side: every message, none lost
        assert len(rec) == len(sent), f"{topic}: {len(rec)} recorded of {len(sent)}"
        stamps = [ts for ts, _ in rec]
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps), f"{topic}: stamps not increasing"
        assert set(stamps) <= {ns for ns, _ in sent}                 # bag time = the message's sim time
        by_stamp = dict(sent)
        for ts, msg in rec[:: max(1, len(rec) // 7)]:               # decoded content equals what was sent
            k = by_stamp[ts]
            if topic == "/clock":
                assert msg.clock.sec * 10**9 + msg.clock.nanosec == ts
            elif topic == "/tf":
                tf = msg.transforms[0]
                assert (tf.header.frame_id, tf.child_frame_id) == ("world", "box")
                assert tf.transform.translation.x == pytest.approx(0.01 * k)
                assert tf.header.stamp.sec * 10**9 + tf.header.stamp.nanosec == ts
            elif "joint_states" in topic:
                ref = _joint_state(k)
                assert list(msg.name) == JOINTS
                assert list(msg.position) == pytest.approx(list(ref.position))
                assert list(msg.effort) == pytest.approx(list(ref.effort))
                assert msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec == ts
            else:
                assert msg.header.frame_id == "ft_sensor"
                assert msg.wrench.force.z == pytest.approx(-9.81 - 0.01 * k)
    # latched messages (published after the tap, before the run) are in the bag once; no stamp of their own ->
    # the latest sim time seen so far (0 at start)
    assert len(got["/tf_static"]) == 1 and got["/tf_static"][0][1].transforms[0].child_frame_id == "base"
    assert got["/tf_static"][0][0] == 0            # the header stamp of the static transform (0)
    assert [m.data for _, m in got["/test_ns/robot_description"]] == ["<robot name='r'/>"]
    assert meta["message_count"] == sum(len(v) for v in got.values())
    assert recorder.dropped == 0 and recorder.errors == 0
    # what went over DDS are the recorded bytes: a subscriber in another context decodes the same joint states
    recorded_js = {ts: list(m.position) for ts, m in got["/test_ns/joint_states"]}
    assert outside.joint_states
    for ns, position in outside.joint_states:
        assert recorded_js[ns] == position
    # close() restored the publishers: publishing still works, nothing more is recorded
    publisher.pubs["/clock"].publish(Clock(clock=_stamp(5000)))
    assert "publish" not in vars(publisher.pubs["/clock"])


def test_recorder_topic_selection_and_errors(publisher, tmp_path):
    topics = [t for t, _, _ in published_topics(publisher.node, ["joint_states", "/clock"])]
    assert topics == ["/test_ns/joint_states", "/clock"]
    with pytest.raises(ConfigError, match="not published by node 'bag_test_node'"):
        attach_recorder(publisher.node, tmp_path / "x", ["no_such_topic"])
    (tmp_path / "exists").mkdir()
    with pytest.raises(ConfigError, match="exists already"):
        attach_recorder(publisher.node, tmp_path / "exists")
    rec = attach_recorder(publisher.node, tmp_path / "only_js", ["joint_states"])
    assert rec.topics == ["/test_ns/joint_states"]
    rec.close()
    assert (tmp_path / "only_js" / "metadata.yaml").is_file()


def test_typestore_has_the_project_messages_and_stamp_rules():
    """contact_sim_msgs come from their .msg files; stamp offsets: Header/Time first -> 4, a leading sequence of
    stamped messages -> first element (-8), no stamp -> None."""
    store = make_typestore(["contact_sim_msgs/msg/ContactArray"])
    assert "contact_sim_msgs/msg/Contact" in store.fielddefs
    msgdef, _ = store.generate_msgdef("contact_sim_msgs/msg/ContactArray", ros_version=2)
    assert "Contact[] contacts" in msgdef or "contacts" in msgdef
    assert stamp_offset(store, "contact_sim_msgs/msg/ContactArray") == 4
    assert stamp_offset(store, "sensor_msgs/msg/JointState") == 4
    assert stamp_offset(store, "rosgraph_msgs/msg/Clock") == 4
    assert stamp_offset(store, "tf2_msgs/msg/TFMessage") == -8
    assert stamp_offset(store, "visualization_msgs/msg/MarkerArray") == -8
    assert stamp_offset(store, "std_msgs/msg/String") is None
    with pytest.raises(ConfigError, match="no_such_pkg/msg/X"):
        make_typestore(["no_such_pkg/msg/X"])


def test_full_queue_drops_and_counts(publisher, tmp_path):
    """The queue to the writer thread is bounded: a message that does not fit is published, not recorded, and
    counted; the bag is still closed properly."""
    rec = attach_recorder(publisher.node, tmp_path / "full", ["/clock"], max_queued=0)
    for k in range(50):
        publisher.pubs["/clock"].publish(Clock(clock=_stamp(k)))
    rec.close()
    assert (rec.dropped, rec.written, rec.counts) == (50, 0, {"/clock": 0})
    assert (tmp_path / "full" / "metadata.yaml").is_file()


def test_follow_records_the_publishers_a_node_creates_later(publisher, tmp_path):
    """The simulation node follows itself and its robots' nodes (several robots): a publisher created after the
    recorder started, on the node or on another node it follows, is recorded; close() unwraps both nodes."""
    rec = attach_recorder(publisher.node, tmp_path / "follow")
    robot = Node("bag_test_robot", namespace="test_ns/left", context=publisher.context)
    try:
        rec.follow(robot)
        js = robot.create_publisher(JointState, "joint_states", 10)          # created after the start
        msg = _joint_state(3)
        msg.header.stamp = _stamp(3)
        js.publish(msg)
        later = publisher.node.create_publisher(WrenchStamped, "late/wrench", 10)
        later.publish(_wrench(4))
        rec.close()
        assert rec.counts["/test_ns/left/joint_states"] == 1 and rec.counts["/test_ns/late/wrench"] == 1
        assert "create_publisher" not in vars(robot) and "create_publisher" not in vars(publisher.node)
    finally:
        robot.destroy_node()


def _read_all(bag):
    """Every message of the bag decoded strictly (rosbags) and of the length rosbags encodes it to (nothing after
    the message's end), and decoded with mcap-ros2-support; ``({topic: [msg]}, {topic: [mcap msg]}, metadata)``."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import get_types_from_msg
    store = make_typestore()
    by_rosbags, by_mcap = {}, {}
    with Reader(bag) as reader:
        for conn in reader.connections:              # types the Jazzy store lacks: from the bag's definitions
            if conn.msgtype not in store.fielddefs:
                store.register(get_types_from_msg(conn.msgdef.data, conn.msgtype))
        for conn, _, raw in reader.messages():
            msg = store.deserialize_cdr(raw, conn.msgtype)
            # the CDR ends where the message ends (alignment bytes inside may differ: rmw leaves them unset)
            assert len(store.serialize_cdr(msg, conn.msgtype)) == len(raw), f"{conn.topic}: not the exact CDR"
            by_rosbags.setdefault(conn.topic, []).append(msg)
    (mcap_file,) = bag.glob("*.mcap")
    with open(mcap_file, "rb") as f:
        for _, channel, _, decoded in make_reader(f, decoder_factories=[DecoderFactory()]).iter_decoded_messages():
            by_mcap.setdefault(channel.topic, []).append(decoded)
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    return by_rosbags, by_mcap, meta


def test_inputs_goals_and_estimated_size_messages_decode_with_rosbags_and_mcap(publisher, tmp_path):
    """What the node is asked is recorded beside what it publishes: a subscription created while recording (the
    bytes another process sent), an action server's goals (as the action's Goal message on <action>/goal); a
    message published as an object whose rmw-serialized size is an overestimate (a 7-joint controller state: 32
    bytes past its end) is recorded exactly; every message decodes with rosbags (strictly) and mcap-ros2-support;
    metadata.yaml as Jazzy writes it."""
    from control_msgs.action import FollowJointTrajectory
    from control_msgs.msg import JointTrajectoryControllerState
    from rclpy.action import ActionServer, GoalResponse
    from ros_testing import ActionClient        # rclpy's, without its request/response race
    from rclpy.serialization import serialize_message
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
    bag = tmp_path / "inputs"
    rec = attach_recorder(publisher.node, bag)
    node = publisher.node
    received, goals = [], []
    node.create_subscription(JointState, "joint_command", received.append, 10)
    state_pub = node.create_publisher(JointTrajectoryControllerState, "arm_controller/controller_state", 10)

    def execute(handle):
        handle.succeed()
        return FollowJointTrajectory.Result()
    ActionServer(node, FollowJointTrajectory, "arm_controller/follow_joint_trajectory", execute,
                 goal_callback=lambda g: goals.append(g) or GoalResponse.ACCEPT)
    state = JointTrajectoryControllerState(joint_names=[f"iiwa_joint_{i}" for i in range(1, 8)])
    state.header.stamp = _stamp(7)
    for field in ("reference", "feedback", "error", "output"):
        getattr(state, field).positions = [0.1 * i for i in range(7)]
    raw = serialize_message(state)                           # the estimate runs past the message (the defect)
    assert len(exact_cdr(rec.typestore, "control_msgs/msg/JointTrajectoryControllerState", raw)) < len(raw)
    state_pub.publish(state)

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    client = Node("bag_test_client", context=ctx)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(client)
    spin = threading.Thread(target=ex.spin, daemon=True)
    spin.start()
    goal = FollowJointTrajectory.Goal()
    goal.trajectory = JointTrajectory(joint_names=["iiwa_joint_1", "iiwa_joint_2"],
                                      points=[JointTrajectoryPoint(positions=[0.5, -0.25])])
    goal.trajectory.points[0].time_from_start.sec = 2
    try:
        cmd_pub = client.create_publisher(JointState, "/test_ns/joint_command", 10)
        action = ActionClient(client, FollowJointTrajectory, "/test_ns/arm_controller/follow_joint_trajectory")
        assert action.wait_for_server(timeout_sec=60.0)
        deadline = time.monotonic() + 60.0
        while not received and time.monotonic() < deadline:     # discovery: resend until the node has one
            cmd_pub.publish(JointState(name=["iiwa_joint_1"], position=[0.75]))
            time.sleep(0.05)
        assert received and received[0].position[0] == 0.75      # the node's callback got the message
        future = action.send_goal_async(goal)
        deadline = time.monotonic() + 60.0
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert future.done() and future.result().accepted and len(goals) == 1
    finally:
        ex.shutdown(timeout_sec=2.0)
        client.destroy_node()
        rclpy.shutdown(context=ctx)
    rec.close()
    assert "create_subscription" not in vars(node) and "add_waitable" not in vars(node)

    by_rosbags, by_mcap, meta = _read_all(bag)
    for topic in ("/test_ns/joint_command", "/test_ns/arm_controller/follow_joint_trajectory/goal",
                  "/test_ns/arm_controller/controller_state"):
        assert topic in by_rosbags and topic in by_mcap, (topic, sorted(by_rosbags))
    assert len(by_rosbags["/test_ns/joint_command"]) == len(received)
    assert by_rosbags["/test_ns/joint_command"][0].position.tolist() == [0.75]
    assert by_mcap["/test_ns/joint_command"][0].position == [0.75]
    (g,) = by_rosbags["/test_ns/arm_controller/follow_joint_trajectory/goal"]
    assert list(g.trajectory.joint_names) == ["iiwa_joint_1", "iiwa_joint_2"]
    assert g.trajectory.points[0].positions.tolist() == [0.5, -0.25] and g.trajectory.points[0].time_from_start.sec == 2
    (gm,) = by_mcap["/test_ns/arm_controller/follow_joint_trajectory/goal"]
    assert list(gm.trajectory.points[0].positions) == [0.5, -0.25]
    (st,) = by_rosbags["/test_ns/arm_controller/controller_state"]
    assert st.reference.positions.tolist() == pytest.approx([0.1 * i for i in range(7)])
    assert by_mcap["/test_ns/arm_controller/controller_state"][0].joint_names[6] == "iiwa_joint_7"
    # metadata.yaml as rosbag2 0.26 (Jazzy) writes it
    assert meta["ros_distro"] == "jazzy" and meta["version"] == 9 and meta["storage_identifier"] == "mcap"
    assert meta["relative_file_paths"] == ["inputs_0.mcap"] and (bag / "inputs_0.mcap").is_file()
    counts = {t["topic_metadata"]["name"]: t["message_count"] for t in meta["topics_with_message_count"]}
    assert {t: n for t, n in counts.items() if n} == {t: len(m) for t, m in by_rosbags.items()}
    assert meta["message_count"] == sum(len(m) for m in by_rosbags.values())
    for t in meta["topics_with_message_count"]:
        tm = t["topic_metadata"]
        assert tm["serialization_format"] == "cdr" and tm["type_description_hash"].startswith("RIHS01_")
        assert isinstance(tm["offered_qos_profiles"], list)
    types = {t["topic_metadata"]["name"]: t["topic_metadata"]["type"] for t in meta["topics_with_message_count"]}
    assert types["/test_ns/arm_controller/follow_joint_trajectory/goal"] == \
        "control_msgs/action/FollowJointTrajectory_Goal"
    assert meta["files"][0]["message_count"] == meta["message_count"]
