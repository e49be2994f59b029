"""Record a node's own publications to a rosbag2 directory in MCAP storage (node parameter ``record:=PATH``).

``attach_recorder(node, path)`` subscribes, in the same node, to every topic the node publishes (or the given
ones) with the publisher's reliability and durability, receives the messages serialized (``raw=True``: CDR
bytes, never deserialized) and writes them with the pure-Python ``rosbags`` library
(``rosbags.rosbag2.Writer``, rosbag2 format version 9 as Jazzy's ``ros2 bag`` writes it, ``StoragePlugin.MCAP``),
so ``ros2 bag info/play`` and Foxglove read the result.

* Bag timestamps are SIMULATION time (ns): the message's own ``header.stamp`` (or ``rosgraph_msgs/Clock.clock``;
  for a message that starts with a sequence of stamped messages, like ``tf2_msgs/TFMessage`` and
  ``visualization_msgs/MarkerArray``, the stamp of the first element). A message without a stamp
  (``std_msgs/String`` robot_description, an empty TFMessage) gets the latest sim time recorded so far (0 at
  start). This is what ``ros2 bag record --use-sim-time`` records; ``ros2 bag play --clock`` then republishes
  /clock. After a ``~/reset`` the stamps start again from 0.
* Message definitions: the standard types from rosbags' Jazzy type store; types it lacks (``contact_sim_msgs``
  and any package built into the venv or a ROS install) from their ``.msg`` files, found in
  ``<prefix>/share/<pkg>/msg/`` of every ``AMENT_PREFIX_PATH`` entry and in this repository's ``msgs/<pkg>/msg/``.
* Threads: writing happens in the subscription callbacks, on the node's executor (one mutually exclusive callback
  group, so writes are serialized), never in the stepping thread. Subscriptions use KEEP_LAST with a depth of at
  least 1000 so a busy executor does not drop messages.
* ``close()`` (idempotent) destroys the subscriptions and closes the bag, which writes ``metadata.yaml``; the
  node must call it on shutdown (an unclosed MCAP file lacks its summary and metadata.yaml is missing).
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.qos import HistoryPolicy, QoSProfile

from ..errors import ConfigError

BAG_VERSION = 9                         # rosbag2 metadata version written by Jazzy
MIN_DEPTH = 1000                        # subscription queue depth (messages)
EXCLUDED_TOPICS = ("/rosout", "/parameter_events")


def msgtype_name(msg_class) -> str:
    """``sensor_msgs.msg.JointState`` -> ``'sensor_msgs/msg/JointState'``."""
    return f"{msg_class.__module__.split('.')[0]}/msg/{msg_class.__name__}"


def make_typestore(msgtypes=()):
    """rosbags type store of ROS 2 Jazzy plus the packages of ``msgtypes`` that it lacks (from .msg files)."""
    from rosbags.typesys import Stores, get_typestore
    store = get_typestore(Stores.ROS2_JAZZY)
    for msgtype in msgtypes:
        _ensure_type(store, msgtype)
    return store


def _msg_dirs(pkg: str) -> list[Path]:
    dirs = [Path(p) / "share" / pkg / "msg" for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    own = Path(__file__).resolve().parents[2] / "msgs" / pkg / "msg"       # source checkout
    dirs.append(own)
    try:
        from ..resources import share_dir
        dirs.append(Path(share_dir()) / "msgs" / pkg / "msg")
    except Exception:   # pragma: no cover - resources not importable in an odd install
        pass
    return [d for d in dirs if d.is_dir()]


def _ensure_type(store, msgtype: str, depth: int = 0) -> None:
    """Register ``msgtype``'s whole package from its .msg files if the store lacks it, then its dependencies."""
    from rosbags.typesys import get_types_from_msg
    if msgtype in store.fielddefs:
        missing = _missing_dependencies(store, msgtype)
        for dep in missing:
            if depth < 8:
                _ensure_type(store, dep, depth + 1)
        return
    pkg, _, name = msgtype.split("/")
    for d in _msg_dirs(pkg):
        if (d / f"{name}.msg").is_file():
            types = {}
            for f in sorted(d.glob("*.msg")):
                types.update(get_types_from_msg(f.read_text(), f"{pkg}/msg/{f.stem}"))
            store.register(types)
            for t in types:
                for dep in _missing_dependencies(store, t):
                    if depth < 8:
                        _ensure_type(store, dep, depth + 1)
            return
    raise ConfigError(f"recording: no message definition for {msgtype} (not a ROS 2 Jazzy standard type and no "
                      f"{pkg}/msg/{name}.msg under AMENT_PREFIX_PATH or msgs/)")


def _missing_dependencies(store, msgtype: str) -> list[str]:
    from rosbags.typesys.base import Nodetype
    out = []
    for _, (kind, detail) in store.fielddefs[msgtype][1]:
        if kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
            kind, detail = detail[0]
        if kind == Nodetype.NAME and detail not in store.fielddefs:
            out.append(detail)
    return out


_STAMPED = ("std_msgs/msg/Header", "builtin_interfaces/msg/Time")


def stamp_offset(store, msgtype: str) -> int | None:
    """Byte offset (in the CDR payload including its 4-byte encapsulation header) of the message's sim-time
    stamp, or None: 4 if the first field is a Header or Time; 8 if the first field is a sequence of messages
    whose first field is a Header (the first element's stamp, after the uint32 length; -8 flags 'needs a
    non-empty sequence')."""
    from rosbags.typesys.base import Nodetype
    fields = store.fielddefs[msgtype][1]
    if not fields:
        return None
    kind, detail = fields[0][1]
    if kind == Nodetype.NAME and detail in _STAMPED:
        return 4
    if kind == Nodetype.SEQUENCE:
        (ekind, etype), _ = detail
        if ekind == Nodetype.NAME and etype in store.fielddefs:
            first = store.fielddefs[etype][1]
            if first and first[0][1][0] == Nodetype.NAME and first[0][1][1] in _STAMPED:
                return -8
    return None


def _qos_for_bag(qos: QoSProfile):
    """rclpy QoSProfile -> rosbags Qos (stored as the topic's offered_qos_profiles: transient local topics are
    replayed latched)."""
    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

    def enum(cls, policy):
        try:
            return cls[policy.name]
        except KeyError:
            return cls.SYSTEM_DEFAULT

    def dur(d):
        ns = int(d.nanoseconds)
        return QosTime(ns // 1_000_000_000, ns % 1_000_000_000)

    return Qos(enum(QosHistory, qos.history), int(qos.depth), enum(QosReliability, qos.reliability),
               enum(QosDurability, qos.durability), dur(qos.deadline), dur(qos.lifespan),
               enum(QosLiveliness, qos.liveliness), dur(qos.liveliness_lease_duration),
               bool(qos.avoid_ros_namespace_conventions))


class BagRecorder:
    """Records ``topics`` (list of ``(topic, msg_class, qos)``) published by ``node`` to the rosbag2 directory
    ``path`` (must not exist; created) in MCAP storage. See the module docstring."""

    def __init__(self, node, path, topics):
        from rosbags.rosbag2 import StoragePlugin, Writer
        self.node = node
        self.path = Path(path)
        self._lock = threading.Lock()
        self._closed = False
        self.counts: dict[str, int] = {}
        self.errors = 0
        self._latest_ns = 0
        types = [msgtype_name(cls) for _, cls, _ in topics]
        self.typestore = make_typestore(types)
        if self.path.exists():
            raise ConfigError(f"parameter 'record': {self.path} exists already; rosbag2 writes a new directory")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = Writer(self.path, version=BAG_VERSION, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._group = MutuallyExclusiveCallbackGroup()
        self._subs = []
        for (topic, cls, qos), msgtype in zip(topics, types):
            conn = self._writer.add_connection(topic, msgtype, typestore=self.typestore,
                                               offered_qos_profiles=[_qos_for_bag(qos)])
            offset = stamp_offset(self.typestore, msgtype)
            sub_qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=max(int(qos.depth or 0), MIN_DEPTH),
                                 reliability=qos.reliability, durability=qos.durability)
            self.counts[topic] = 0
            self._subs.append(node.create_subscription(
                cls, topic, self._callback(topic, conn, offset), sub_qos, callback_group=self._group, raw=True))

    @property
    def topics(self) -> list[str]:
        return list(self.counts)

    def _callback(self, topic, conn, offset):
        unpack_le, unpack_be = struct.Struct("<iI").unpack_from, struct.Struct(">iI").unpack_from
        count_le, count_be = struct.Struct("<I").unpack_from, struct.Struct(">I").unpack_from

        def on_message(data: bytes):
            stamp = None
            if offset is not None and len(data) >= 12:
                little = data[1] == 1                     # CDR encapsulation: 0x0001 = little endian
                unpack = unpack_le if little else unpack_be
                if offset == 4:                           # Header / Time first
                    sec, nsec = unpack(data, 4)
                    stamp = sec * 1_000_000_000 + nsec
                elif len(data) >= 16 and (count_le if little else count_be)(data, 4)[0] > 0:
                    sec, nsec = unpack(data, 8)           # uint32 length at 4, first element's stamp at 8
                    stamp = sec * 1_000_000_000 + nsec
            with self._lock:
                if self._closed:
                    return
                if stamp is None or stamp < 0:
                    stamp = self._latest_ns
                else:
                    self._latest_ns = max(self._latest_ns, stamp)
                try:
                    self._writer.write(conn, stamp, data)
                    self.counts[topic] += 1
                except Exception as exc:  # disk full, ...: report once, keep the node running
                    self.errors += 1
                    if self.errors == 1:
                        self.node.get_logger().error(f"recording to {self.path}: writing {topic} failed: {exc}")
        return on_message

    def close(self) -> None:
        """Stop recording and close the bag (writes the MCAP summary and metadata.yaml). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for sub in self._subs:
            try:
                self.node.destroy_subscription(sub)
            except Exception:   # the node is already destroyed
                pass
        self._subs = []
        with self._lock:
            self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def published_topics(node, topics=None) -> list:
    """``(topic, msg_class, qos)`` of the node's own publishers (fully qualified names), all of them except
    /rosout and /parameter_events if ``topics`` is None, else the named ones (relative names resolve in the
    node's namespace; ConfigError naming the published topics if one is not published by the node)."""
    own = {}
    for pub in node.publishers:
        own.setdefault(pub.topic_name, (pub.topic_name, pub.msg_type, pub.qos_profile))
    if topics is None:
        return [v for k, v in sorted(own.items()) if k not in EXCLUDED_TOPICS]
    out = []
    for name in topics:
        full = node.resolve_topic_name(name)
        if full not in own:
            raise ConfigError(f"recording: topic {name!r} ({full}) is not published by node {node.get_name()!r}; "
                              f"its topics: {', '.join(sorted(own))}")
        out.append(own[full])
    return out


def attach_recorder(node, path, topics=None) -> BagRecorder:
    """Start recording ``topics`` (names; None = every topic ``node`` publishes, except /rosout and
    /parameter_events) to the new rosbag2 MCAP directory ``path``. Call after the node created its publishers;
    call ``close()`` on shutdown."""
    return BagRecorder(node, path, published_topics(node, topics))
