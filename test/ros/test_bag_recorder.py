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
from contact_sim_ros.ros.bag_recorder import attach_recorder, make_typestore, published_topics, stamp_offset

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
