"""The serialized messages the node publishes as bytes (state_messages.JointStateCdr, clock_cdr, TransformsCdr)
read back by rclpy's deserializer (the middleware's CDR) as the messages they stand for."""

import numpy as np
import pytest
from rclpy.serialization import deserialize_message
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage

from contact_sim_ros.ros.state_messages import JointStateCdr, TransformsCdr, clock_cdr, stamp


@pytest.mark.parametrize("frame_id, names", [
    ("", ["iiwa_joint_%d" % i for i in range(1, 8)] + ["wsg_50_base_joint_gripper_left", "right"]),
    ("world", ["a", "bcd", "efgh"]),      # names of every length mod 4: each string padded to 4 bytes
    ("ab", ["q"]),                         # one joint: the doubles need 4 bytes of padding
])
def test_joint_state_bytes_deserialize_to_the_message(frame_id, names):
    rng = np.random.default_rng(0)
    values = rng.normal(size=(3, len(names)))
    t = 12.345678901
    msg = deserialize_message(JointStateCdr(frame_id, names).encode(t, values), JointState)
    ref = stamp(t)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (ref.sec, ref.nanosec) == (12, 345678901)
    assert msg.header.frame_id == frame_id and list(msg.name) == names
    assert np.array_equal(msg.position, values[0])
    assert np.array_equal(msg.velocity, values[1])
    assert np.array_equal(msg.effort, values[2])


def test_clock_bytes_deserialize_to_the_message():
    msg = deserialize_message(clock_cdr(7.000000001), Clock)
    assert (msg.clock.sec, msg.clock.nanosec) == (7, 1)


@pytest.mark.parametrize("pairs", [
    [("world", "iiwa_link_0")] + [(f"iiwa_link_{k}", f"iiwa_link_{k + 1}") for k in range(7)],
    [("w", "ab"), ("ab", "cde"), ("cde", "fghi"), ("left/palm", "x")],   # names of every length mod 4 and 8
    [("world", "bottle")],
])
def test_transforms_bytes_deserialize_to_the_message(pairs):
    rng = np.random.default_rng(1)
    cdr = TransformsCdr(pairs)
    for t in (3.25, 12.345678901):       # the buffer is rewritten in place: a second encoding must not mix them
        poses = rng.normal(size=(len(pairs), 7))
        poses[:, 3:] /= np.linalg.norm(poses[:, 3:], axis=1, keepdims=True)
        msg = deserialize_message(cdr.encode(t, poses), TFMessage)
        ref = stamp(t)
        assert len(msg.transforms) == len(pairs)
        for ts, (parent, child), pose in zip(msg.transforms, pairs, poses):
            assert (ts.header.stamp.sec, ts.header.stamp.nanosec) == (ref.sec, ref.nanosec)
            assert (ts.header.frame_id, ts.child_frame_id) == (parent, child)
            tr, rot = ts.transform.translation, ts.transform.rotation
            assert [tr.x, tr.y, tr.z, rot.x, rot.y, rot.z, rot.w] == pose.tolist()


@pytest.mark.parametrize("sequences", [("effort",), ("position", "effort"), ()])
def test_joint_state_bytes_with_some_sequences_empty(sequences):
    """external_joint_torques: the effort alone, position and velocity empty (as franka_ros2 publishes them)."""
    names = ["iiwa_joint_1", "ab", "wsg_finger_left_joint"]
    values = np.random.default_rng(2).normal(size=(len(sequences), len(names)))
    msg = deserialize_message(JointStateCdr("", names, sequences).encode(4.5, values), JointState)
    assert list(msg.name) == names and (msg.header.stamp.sec, msg.header.stamp.nanosec) == (4, 500_000_000)
    rows = dict(zip(sequences, values))
    for field in JointStateCdr.FIELDS:
        assert np.array_equal(getattr(msg, field), rows.get(field, np.zeros(0))), field
    with pytest.raises(ValueError, match="no sequence"):
        JointStateCdr("", names, ("torque",))
