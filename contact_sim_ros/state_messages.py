"""The simulated measurements as ROS messages, built in one place for the node's publishers and for the in-process
link of the scenario controllers (clients/inprocess_link.py), so both hand over the same numbers (outside
ros/: the in-process route imports no node code; ros/state_messages.py gives the node these names):

* ``fill_external_torques``: sensor_msgs/JointState ``external_joint_torques`` of some joints: the generalized
  contact force on them (N*m or N), as franka_ros2 publishes them;
* ``fill_wrench``: geometry_msgs/WrenchStamped ``contact_wrench/<body>`` (sensors/contact_wrench.py): the net contact
  wrench on a body about its frame origin, in its frame (N, N*m).

* ``JointStateCdr`` / ``clock_cdr`` / ``TransformsCdr``: sensor_msgs/JointState, rosgraph_msgs/Clock and
  tf2_msgs/TFMessage as the serialized CDR bytes ``Publisher.publish(bytes)`` hands to the middleware as they are
  (the messages published every step or every other step, and /tf: rclpy's Python-to-C conversion of a
  JointState costs ~15 us, of the TFMessage of iiwa_wsg's 11 moving links ~45 us; packing these bytes ~2-4 us).

* ``has_readers``: whether a publication on a publisher reaches anyone (the stepping thread builds and writes the
  messages of a topic only then).

Stamps are sim time (``stamp``). No rclpy: message classes only.
"""

from __future__ import annotations

import array
import re
import struct

import numpy as np
from builtin_interfaces.msg import Time


def topic_token(name: str) -> str:
    """A link/object name as a topic name token: characters other than [A-Za-z0-9_] become '_'
    (Allegro's 'link_3.0_tip' -> 'link_3_0_tip'); a leading digit gets a '_' prefix."""
    token = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return "_" + token if token[:1].isdigit() else token


def has_readers(publisher) -> bool:
    """A publication on ``publisher`` reaches someone: it has a matched subscription (in another process or in this
    one), it is recorded (``record:=PATH``: bag_recorder.BagRecorder.tap marks it ``recorded``), or it is not a DDS
    publisher (the in-process link's mailboxes: always). The node's per-step topics are volatile (no sample is kept
    for a later subscriber), so a message no one reads goes nowhere: the stepping thread then neither builds nor
    writes it; a subscriber that matches gets every publication from then on, at the configured rate. ~0.3 us: the
    middleware keeps the matched count; it is read through the rclpy publisher's ``handle`` (the rcl publisher)
    without ``Publisher.get_subscription_count``'s context manager (0.6 us more per call), safe as the node's
    publishers outlive the stepping thread (SimNode.shutdown stops it first)."""
    handle = getattr(publisher, "handle", None)
    return (handle is None or handle.get_subscription_count() > 0
            or publisher.__dict__.get("recorded", False))


def stamp(t: float, out: Time | None = None) -> Time:
    """builtin_interfaces/Time of a sim time t (s), rounded to the nanosecond."""
    out = out or Time()
    out.sec, out.nanosec = stamp_parts(t)
    return out


def stamp_parts(t: float) -> tuple[int, int]:
    """(sec, nanosec) of a sim time t (s), rounded to the nanosecond, as ``stamp``."""
    return divmod(int(round(t * 1e9)), 1_000_000_000)


_CDR_LE = b"\x00\x01\x00\x00"          # encapsulation: plain CDR, little endian
_TIME = struct.Struct("<iI")              # builtin_interfaces/Time


def clock_cdr(t: float) -> bytes:
    """Serialized rosgraph_msgs/Clock of sim time t (s)."""
    return _CDR_LE + _TIME.pack(*stamp_parts(t))


class _CdrPayload:
    """Builds the bytes of a serialized message after the 4-byte encapsulation header, aligning as CDR requires
    (relative to the payload start: uint32 on 4, double on 8); ``off`` is the payload offset reached."""

    def __init__(self):
        self.data = bytearray()

    @property
    def off(self) -> int:
        return len(self.data)

    def align(self, k: int) -> None:
        self.data.extend(bytes(-len(self.data) % k))

    def u32(self, value: int) -> None:
        self.align(4)
        self.data.extend(struct.pack("<I", value))

    def string(self, text: str) -> None:
        raw = text.encode() + b"\x00"
        self.u32(len(raw))
        self.data.extend(raw)

    def zeros(self, n: int) -> None:
        self.data.extend(bytes(n))


class JointStateCdr:
    """Serialized sensor_msgs/JointState with a fixed ``frame_id`` and joint ``names``; of the sequences position,
    velocity, effort the ones named in ``sequences`` hold one value per joint, the others are empty (``encode``)."""

    FIELDS = ("position", "velocity", "effort")

    def __init__(self, frame_id: str, names: list[str], sequences=FIELDS):
        unknown = set(sequences) - set(self.FIELDS)
        if unknown:
            raise ValueError(f"JointState has no sequence(s) {sorted(unknown)}; sequences: {self.FIELDS}")
        cur = _CdrPayload()
        cur.zeros(_TIME.size)           # the stamp
        cur.string(frame_id)
        cur.u32(len(names))
        for name in names:
            cur.string(name)
        self.size = n = len(names)
        self.rows = len(sequences)
        self._chunks = []               # constant bytes between the rows of doubles (padding, counts)
        start = _TIME.size
        for field_name in self.FIELDS:
            count = n if field_name in sequences else 0
            cur.u32(count)
            if count:
                cur.align(8)
                self._chunks.append(bytes(cur.data[start:]))
                cur.zeros(8 * count)
                start = cur.off
        self._tail = bytes(cur.data[start:])      # the empty sequences after the last filled one

    def encode(self, t: float, values: np.ndarray) -> bytes:
        """The bytes of the message stamped t (s of sim time), ``values`` (rows, n): one row per sequence named at
        construction, in the order position, velocity, effort (C-contiguous float64)."""
        c, stamp_bytes = self._chunks, _TIME.pack(*stamp_parts(t))
        if len(c) == 3:                 # the joint_state_broadcaster's, every other step: one tuple, no loop
            return b"".join((_CDR_LE, stamp_bytes, c[0], values[0].tobytes(), c[1], values[1].tobytes(), c[2],
                             values[2].tobytes()))
        if len(c) == 1:
            return b"".join((_CDR_LE, stamp_bytes, c[0], values[0].tobytes(), self._tail))
        rows = (x for chunk, row in zip(c, values) for x in (chunk, row.tobytes()))
        return b"".join((_CDR_LE, stamp_bytes, *rows, self._tail))


class TransformsCdr:
    """Serialized tf2_msgs/TFMessage of fixed (parent frame id, child frame id) ``pairs``, every transform stamped
    alike (``encode``). The message is kept in one buffer; each encoding writes the stamps and the poses into it
    through numpy views (no per-transform Python objects)."""

    def __init__(self, pairs):
        cur = _CdrPayload()
        cur.u32(len(pairs))
        stamps, poses = [], []
        for parent, child in pairs:
            cur.align(4)
            stamps.append(cur.off // 4)
            cur.zeros(_TIME.size)
            cur.string(parent)
            cur.string(child)
            cur.align(8)
            poses.append(cur.off // 8)
            cur.zeros(7 * 8)            # translation x y z, rotation x y z w
        self.size = len(pairs)
        self._buf = bytearray(_CDR_LE + cur.data)
        self._u32 = np.frombuffer(self._buf, dtype="<u4", offset=4, count=cur.off // 4)
        self._f64 = np.frombuffer(self._buf, dtype="<f8", offset=4, count=cur.off // 8)
        self._stamp_at = np.array(stamps, dtype=np.intp).reshape(-1, 1) + np.arange(2)     # (n, 2): sec, nanosec
        self._pose_at = np.array(poses, dtype=np.intp).reshape(-1, 1) + np.arange(7)      # (n, 7)

    def encode(self, t: float, poses: np.ndarray) -> bytes:
        """The bytes of the message stamped t (s of sim time), transform k = ``poses[k]`` (n, 7): translation x, y,
        z (m), unit quaternion x, y, z, w (pinocchio.SE3ToXYZQUAT's order)."""
        self._u32[self._stamp_at] = stamp_parts(t)
        self._f64[self._pose_at] = poses
        return bytes(self._buf)


def fill_external_torques(msg, sim, v_index: np.ndarray) -> None:
    """``msg.effort`` = the last step's generalized contact force at the velocity indices ``v_index`` (zeros
    before the first step), ``msg.header.stamp`` = sim time; ``msg.name`` is the caller's."""
    res = sim.last_result
    stamp(sim.t, msg.header.stamp)
    tau = res.generalized_contact_force[v_index] if res is not None else np.zeros(len(v_index))
    msg.effort = array.array("d", np.ascontiguousarray(tau, dtype=float).tobytes())


def fill_wrench(msg, wrench: np.ndarray, t: float) -> None:
    """geometry_msgs/WrenchStamped ``msg`` := (force, torque) ``wrench`` (6,) stamped ``t`` (s of sim time)."""
    stamp(t, msg.header.stamp)
    f, tau = msg.wrench.force, msg.wrench.torque
    f.x, f.y, f.z = float(wrench[0]), float(wrench[1]), float(wrench[2])
    tau.x, tau.y, tau.z = float(wrench[3]), float(wrench[4]), float(wrench[5])


def fill_trajectory_controller_state(msg, controller) -> None:
    """A joint_trajectory_controller's control_msgs/JointTrajectoryControllerState ``msg`` (its joint_names set)
    from its state and command interfaces: reference and output are the commanded position (rad or m) and velocity
    (rad/s or m/s), feedback the measured ones, error their difference; the points' arrays are replaced
    (array.array: no per-element checks)."""
    state, hw, idx = controller.ctx.state, controller.ctx.command, controller.idx
    stamp(state.time, msg.header.stamp)
    q, v = state.position[idx], state.velocity[idx]
    ref_q, ref_v = hw.position[idx], hw.velocity[idx]
    for point, pos, vel in ((msg.reference, ref_q, ref_v), (msg.feedback, q, v),
                            (msg.error, ref_q - q, ref_v - v), (msg.output, ref_q, ref_v)):
        point.positions = array.array("d", pos.tobytes())
        point.velocities = array.array("d", vel.tobytes())
    msg.speed_scaling_factor = 1.0


def fill_joint_state(msg, broadcaster, values: np.ndarray) -> None:
    """sensor_msgs/JointState ``msg`` of a joint_state_broadcaster: its interface rows of ``values`` (position
    rad or m, velocity rad/s or m/s, effort N*m or N), stamped with the state's sim time (s)."""
    stamp(broadcaster.ctx.state.time, msg.header.stamp)
    for k, name in broadcaster.rows:
        setattr(msg, name, array.array("d", values[k].tobytes()))
