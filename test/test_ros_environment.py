"""The ROS 2 environment of the venv works: real rclpy nodes exchange our interface messages over Fast DDS.

tf2_msgs and contact_sim_msgs are not on PyPI; scripts/ensure_venv.sh builds them from msgs/ into the venv.
These tests publish and receive them between two nodes of one process (real DDS discovery and transport, no
mocks) on a ROS domain id and topic names unique to this test run, so that concurrent runs on the same machine
do not hear each other.
"""

import os
import time
import uuid

import pytest

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy, DurabilityPolicy, HistoryPolicy


def _unique_domain_id() -> int:
    """A domain id in 1..100 derived from pid and time (Fast DDS ports stay valid for ids <= 101)."""
    return 1 + (os.getpid() * 7919 + time.time_ns() // 1_000_000) % 100


@pytest.fixture(scope="module")
def ros_context():
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=_unique_domain_id())
    yield context
    context.try_shutdown()


def _exchange(context, msg_type, message, timeout_s=15.0):
    """Publish `message` from one node until a second node receives it; return the received message."""
    topic = f"/contact_sim_env_test_{uuid.uuid4().hex[:12]}"
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.VOLATILE, history=HistoryPolicy.KEEP_LAST)
    talker = rclpy.create_node(f"talker_{uuid.uuid4().hex[:8]}", context=context)
    listener = rclpy.create_node(f"listener_{uuid.uuid4().hex[:8]}", context=context)
    received = []
    try:
        publisher = talker.create_publisher(msg_type, topic, qos)
        listener.create_subscription(msg_type, topic, received.append, qos)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(talker)
        executor.add_node(listener)
        deadline = time.monotonic() + timeout_s
        while not received and time.monotonic() < deadline:
            if publisher.get_subscription_count() > 0:
                publisher.publish(message)
            executor.spin_once(timeout_sec=0.05)
        executor.shutdown()
    finally:
        talker.destroy_node()
        listener.destroy_node()
    assert received, f"no {msg_type.__name__} received on {topic} within {timeout_s} s"
    return received[0]


def test_rmw_is_fast_dds(ros_context):
    assert rclpy.utilities.get_rmw_implementation_identifier() == "rmw_fastrtps_cpp"


def test_tf_message_round_trip(ros_context):
    from geometry_msgs.msg import TransformStamped
    from tf2_msgs.msg import TFMessage

    sent = TFMessage()
    for i, (parent, child) in enumerate([("world", "iiwa_link_0"), ("iiwa_link_0", "iiwa_link_1")]):
        tf = TransformStamped()
        tf.header.stamp.sec = 12
        tf.header.stamp.nanosec = 345_000_000 + i
        tf.header.frame_id = parent
        tf.child_frame_id = child
        tf.transform.translation.x = 0.1 * (i + 1)
        tf.transform.translation.y = -0.25
        tf.transform.translation.z = 0.1575
        # a unit quaternion (rotation of 0.3 rad about z)
        tf.transform.rotation.z = 0.14943813247359922
        tf.transform.rotation.w = 0.9887710779360422
        sent.transforms.append(tf)

    got = _exchange(ros_context, TFMessage, sent)

    assert TFMessage.__module__.startswith("tf2_msgs.msg")
    assert len(got.transforms) == 2
    for a, b in zip(sent.transforms, got.transforms):
        assert b.header.frame_id == a.header.frame_id
        assert b.child_frame_id == a.child_frame_id
        assert (b.header.stamp.sec, b.header.stamp.nanosec) == (a.header.stamp.sec, a.header.stamp.nanosec)
        for f in "xyz":
            assert getattr(b.transform.translation, f) == getattr(a.transform.translation, f)
        for f in "xyzw":
            assert getattr(b.transform.rotation, f) == getattr(a.transform.rotation, f)
    assert got == sent


def test_contact_array_round_trip(ros_context):
    from contact_sim_msgs.msg import Contact, ContactArray

    sent = ContactArray()
    sent.header.frame_id = "world"
    sent.header.stamp.sec = 3
    sent.header.stamp.nanosec = 500
    for k in range(3):
        c = Contact()
        c.body_a = "ground"
        c.body_b = f"box_{k}"
        c.geometry_a = "ground_plane"
        c.geometry_b = f"box_{k}_collision"
        c.position.x, c.position.y, c.position.z = 0.05 * k, -0.02, 0.0
        c.normal.x, c.normal.y, c.normal.z = 0.0, 0.0, 1.0
        c.signed_distance = -1.25e-4 * (k + 1)      # m, penetration
        c.force.x, c.force.y, c.force.z = 0.3 * k, 0.0, 3.2373  # N on B: weight share of a 0.33 kg box
        c.normal_force = 3.2373
        c.slip_speed = 1e-3 * k
        sent.contacts.append(c)

    got = _exchange(ros_context, ContactArray, sent)

    assert got.header.frame_id == "world"
    assert (got.header.stamp.sec, got.header.stamp.nanosec) == (3, 500)
    assert [c.body_b for c in got.contacts] == ["box_0", "box_1", "box_2"]
    for a, b in zip(sent.contacts, got.contacts):
        assert (b.body_a, b.geometry_a, b.geometry_b) == (a.body_a, a.geometry_a, a.geometry_b)
        assert (b.position.x, b.position.y, b.position.z) == (a.position.x, a.position.y, a.position.z)
        assert (b.normal.x, b.normal.y, b.normal.z) == (0.0, 0.0, 1.0)
        assert b.signed_distance == a.signed_distance < 0.0
        assert (b.force.x, b.force.y, b.force.z) == (a.force.x, a.force.y, a.force.z)
        assert b.normal_force == a.normal_force
        assert b.slip_speed == a.slip_speed
    assert got == sent


def test_contact_message_fields_and_types():
    """The message definition is the documented one (field names and ROS types), so consumers can rely on it."""
    from contact_sim_msgs.msg import Contact, ContactArray

    assert Contact.get_fields_and_field_types() == {
        "body_a": "string", "body_b": "string", "geometry_a": "string", "geometry_b": "string",
        "position": "geometry_msgs/Point", "normal": "geometry_msgs/Vector3",
        "signed_distance": "double", "force": "geometry_msgs/Vector3",
        "normal_force": "double", "slip_speed": "double",
    }
    assert ContactArray.get_fields_and_field_types() == {
        "header": "std_msgs/Header", "contacts": "sequence<contact_sim_msgs/Contact>",
    }
