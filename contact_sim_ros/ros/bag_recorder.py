"""Record a node's own publications to a rosbag2 directory in MCAP storage (node parameter ``record:=PATH``).

``attach_recorder(node, path)`` taps the node's publishers on the publishing side: each tapped publisher's
``publish(msg)`` serializes the message once (``rclpy.serialization.serialize_message``: the CDR bytes that go on
the wire), publishes those bytes (``Publisher.publish(bytes)``: rmw gets them as they are, no second conversion)
and hands them, with the topic and type, to a bounded queue; a writer thread of the recorder writes them with the
pure-Python ``rosbags`` library (``rosbags.rosbag2.Writer``, rosbag2 format version 9 as Jazzy's ``ros2 bag``
writes it, ``StoragePlugin.MCAP``), so ``ros2 bag info/play``, Foxglove and the ``mcap`` reader read the result.
Every message the node publishes is recorded (no subscription, no DDS queue in between: a subscription in the
same node, spun by its busy executor, kept only ~3 messages/s per topic). With ``topics`` None the publishers the
node creates later are tapped too (``BagRecorder.follow``: ``node.create_publisher`` is wrapped): the ros2_control
controllers', those of objects spawned while running; sim_node also follows its robots' nodes (several robots).

* Bag timestamps are SIMULATION time (ns): the message's own ``header.stamp`` (or ``rosgraph_msgs/Clock.clock``;
  for a message that starts with a sequence of stamped messages, like ``tf2_msgs/TFMessage`` and
  ``visualization_msgs/MarkerArray``, the stamp of the first element). A message without a stamp
  (``std_msgs/String`` robot_description, an empty TFMessage) or stamped with the node's ROS clock
  (``/diagnostics``: wall time unless ``use_sim_time``) gets the latest sim time recorded so far (0 at start).
  This is what ``ros2 bag record --use-sim-time`` records; ``ros2 bag play --clock`` then republishes /clock.
  After a ``~/reset`` the stamps start again from 0.
* Only what is published after the tap is recorded: attach the recorder before the node publishes (sim_node
  attaches it before it creates its publishers, so latched /tf_static and robot_description are in the bag).
* Message definitions: the standard types from rosbags' Jazzy type store; types it lacks (``contact_sim_msgs``
  and any package built into the venv or a ROS install) from their ``.msg`` files, found in
  ``<prefix>/share/<pkg>/msg/`` of every ``AMENT_PREFIX_PATH`` entry and in this repository's ``msgs/<pkg>/msg/``.
* Threads: the publishing thread (the stepping thread for the state topics) only serializes (the cost of the
  publication it replaces) and enqueues; stamps are read from the bytes and files written on the writer thread.
  The queue holds at most ``max_queued`` messages: when full (the disk cannot keep up) a message is dropped,
  counted (``dropped``; sim_node's diagnostics ``record_dropped``) and reported at close.
* ``close()`` (idempotent) restores the publishers, writes what is queued and closes the bag, which writes the
  MCAP summary and ``metadata.yaml``; the node must call it on shutdown (an unclosed MCAP file lacks its summary
  and metadata.yaml is missing).
"""

from __future__ import annotations

import collections
import os
import struct
import threading
import time
import weakref
from pathlib import Path

from rclpy.qos import QoSProfile
from rclpy.serialization import deserialize_message, serialize_message  # noqa: F401 - the bags' CDR, for replay too

from ..errors import ConfigError
from ..resources import share_dir

BAG_VERSION = 9                         # rosbag2 metadata version written by Jazzy
MAX_QUEUED = 200_000                    # messages waiting for the writer thread (~ 1 min at sim_node's default rates)
WRITER_PERIOD_S = 0.005                 # the writer thread looks for new messages this often when it has none
EXCLUDED_TOPICS = ("/rosout", "/parameter_events")
# stamped with the node's ROS clock (wall time unless use_sim_time), not sim time: recorded at the latest sim time
NODE_CLOCK_TOPICS = ("/diagnostics",)


def msgtype_name(msg_class) -> str:
    """``sensor_msgs.msg.JointState`` -> ``'sensor_msgs/msg/JointState'``."""
    return f"{msg_class.__module__.split('.')[0]}/msg/{msg_class.__name__}"


def make_typestore(msgtypes=()):
    """rosbags type store of ROS 2 Jazzy plus the packages of ``msgtypes`` that it lacks (from .msg files)."""
    from rosbags.typesys import Stores, get_typestore  # deferred: optional, pip only (no rosdep key)
    store = get_typestore(Stores.ROS2_JAZZY)
    for msgtype in msgtypes:
        _ensure_type(store, msgtype)
    return store


def _msg_dirs(pkg: str) -> list[Path]:
    dirs = [Path(p) / "share" / pkg / "msg" for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    own = Path(__file__).resolve().parents[2] / "msgs" / pkg / "msg"       # source checkout
    dirs.append(own)
    try:
        dirs.append(Path(share_dir()) / "msgs" / pkg / "msg")
    except ConfigError:   # no share directory (an odd install): the other places
        pass
    return [d for d in dirs if d.is_dir()]


def _ensure_type(store, msgtype: str, depth: int = 0) -> None:
    """Register ``msgtype``'s whole package from its .msg files if the store lacks it, then its dependencies."""
    from rosbags.typesys import get_types_from_msg  # deferred: optional, pip only (no rosdep key)
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
    from rosbags.typesys.base import Nodetype  # deferred: optional, pip only (no rosdep key)
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
    from rosbags.typesys.base import Nodetype  # deferred: optional, pip only (no rosdep key)
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
    # deferred: optional, pip only (no rosdep key)
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


class _Channel:
    """One recorded topic: its bag connection (created by the writer thread on its first message) and how to read
    a message's stamp from its CDR bytes."""

    __slots__ = ("topic", "msgtype", "qos", "offset", "conn")

    def __init__(self, topic: str, msgtype: str, qos, offset: int | None):
        self.topic, self.msgtype, self.qos, self.offset, self.conn = topic, msgtype, qos, offset, None


_LE, _BE = struct.Struct("<iI").unpack_from, struct.Struct(">iI").unpack_from
_COUNT_LE, _COUNT_BE = struct.Struct("<I").unpack_from, struct.Struct(">I").unpack_from


def cdr_stamp_ns(data: bytes, offset: int | None) -> int | None:
    """The sim-time stamp (ns) of a CDR-serialized message whose stamp is at ``offset`` (``stamp_offset``), or None
    (no stamp, an empty leading sequence)."""
    if offset is None or len(data) < 12:
        return None
    little = data[1] == 1                         # CDR encapsulation: 0x0001 = little endian
    unpack = _LE if little else _BE
    if offset == 4:                               # Header / Time first
        sec, nsec = unpack(data, 4)
    elif len(data) >= 16 and (_COUNT_LE if little else _COUNT_BE)(data, 4)[0] > 0:
        sec, nsec = unpack(data, 8)               # uint32 length at 4, first element's stamp at 8
    else:
        return None
    return sec * 1_000_000_000 + nsec


class BagRecorder:
    """Writes the messages of the publishers it taps (``tap``) to the rosbag2 directory ``path`` (must not exist;
    created) in MCAP storage, on its own writer thread. See the module docstring."""

    def __init__(self, path, logger=None, max_queued: int = MAX_QUEUED):
        from rosbags.rosbag2 import StoragePlugin, Writer  # deferred: optional, pip only (no rosdep key)
        self.path = Path(path)
        self.log = logger
        self.counts: dict[str, int] = {}          # topic -> messages written
        self.written = 0                          # messages written, all topics
        self.errors = 0                           # failed writes (disk full ...)
        self.dropped = 0                          # messages not recorded: the queue was full
        self._closed = False
        self._latest_ns = 0
        self._channels: dict[tuple, _Channel] = {}
        self._tapped = weakref.WeakSet()          # publishers whose publish() was replaced (a destroyed one goes)
        self.on_close = []                        # functions called by close() before the bag is closed
        self._lock = threading.Lock()             # typestore, channels, tapped, dropped
        self.typestore = make_typestore()
        if self.path.exists():
            raise ConfigError(f"parameter 'record': {self.path} exists already; rosbag2 writes a new directory")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = Writer(self.path, version=BAG_VERSION, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self.max_queued = int(max_queued)
        self._queue: collections.deque = collections.deque()     # append / popleft: atomic, no lock taken
        self._thread = threading.Thread(target=self._write_loop, name="bag_recorder_writer", daemon=True)
        self._thread.start()

    @property
    def topics(self) -> list[str]:
        """The tapped topics (fully qualified names), in the order they were tapped."""
        return list(self.counts)

    @property
    def queued(self) -> int:
        """Messages waiting for the writer thread."""
        return len(self._queue)

    def tap(self, publisher, sim_stamped: bool = True) -> None:
        """Record every message ``publisher`` publishes from now on (replaces its ``publish`` on the instance;
        ``close()`` restores it). ``sim_stamped`` False: the messages' stamps are not sim time (recorded at the
        latest sim time). ConfigError if its type has no known definition."""
        msgtype = msgtype_name(publisher.msg_type)
        topic, qos = publisher.topic_name, publisher.qos_profile
        with self._lock:
            if self._closed:
                return
            _ensure_type(self.typestore, msgtype)
            key = (topic, msgtype, qos.durability, qos.reliability)
            chan = self._channels.get(key)
            if chan is None:
                offset = stamp_offset(self.typestore, msgtype) if sim_stamped else None
                chan = self._channels[key] = _Channel(topic, msgtype, _qos_for_bag(qos), offset)
                self.counts.setdefault(topic, 0)
            self._tapped.add(publisher)
        publish, pending, put, limit = publisher.publish, self._queue, self._queue.append, self.max_queued

        def recorded_publish(msg) -> None:
            data = msg if isinstance(msg, bytes) else serialize_message(msg)
            publish(data)                                            # the class's bound method
            if self._closed:
                return
            if len(pending) < limit:
                put((chan, data))
            else:
                with self._lock:
                    self.dropped += 1
        publisher.publish = recorded_publish
        publisher.recorded = True      # state_messages.has_readers: published also without a subscriber

    def follow(self, node) -> None:
        """Record every topic ``node`` publishes (except /rosout and /parameter_events): its publishers now and
        those it creates later (``node.create_publisher`` is wrapped on the instance until ``close()``). The
        simulation node follows itself and its robots' nodes. ConfigError for a present publisher's type without
        definition; a later one is published, not recorded (warned)."""
        for pub in node.publishers:
            if pub.topic_name not in EXCLUDED_TOPICS:
                self.tap(pub, pub.topic_name not in NODE_CLOCK_TOPICS)
        create = node.create_publisher                              # the class's bound method

        def create_recorded_publisher(msg_type, topic, *args, **kwargs):
            pub = create(msg_type, topic, *args, **kwargs)
            if pub.topic_name not in EXCLUDED_TOPICS:
                try:
                    self.tap(pub, pub.topic_name not in NODE_CLOCK_TOPICS)
                except ConfigError as exc:        # a type without definition: published, not recorded
                    node.get_logger().warn(f"recording: {pub.topic_name} not recorded: {exc}")
            return pub
        node.create_publisher = create_recorded_publisher
        self.on_close.append(lambda: node.__dict__.pop("create_publisher", None))

    def _write_loop(self) -> None:
        """Writer thread: bag connections, stamps, writes, in the order the messages were published."""
        get, writer = self._queue.popleft, self._writer
        while True:
            try:
                chan, data = get()
            except IndexError:             # nothing queued: done if closed, else look again in a while
                if self._closed and not self._queue:
                    return
                time.sleep(WRITER_PERIOD_S)
                continue
            stamp = cdr_stamp_ns(data, chan.offset)
            if stamp is None or stamp < 0:
                stamp = self._latest_ns
            elif stamp > self._latest_ns:
                self._latest_ns = stamp
            try:
                if chan.conn is None:
                    with self._lock:
                        chan.conn = writer.add_connection(chan.topic, chan.msgtype, typestore=self.typestore,
                                                          offered_qos_profiles=[chan.qos])
                writer.write(chan.conn, stamp, data)
                self.counts[chan.topic] += 1
                self.written += 1
            except Exception as exc:  # disk full, ...: report once, keep the node running
                self.errors += 1
                if self.errors == 1 and self.log is not None:
                    self.log.error(f"recording to {self.path}: writing {chan.topic} failed: {exc}")

    def close(self) -> None:
        """Stop recording: restore the publishers, write what is queued, close the bag (writes the MCAP summary
        and metadata.yaml) and log the totals (and the drops, if any). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            tapped, self._tapped = list(self._tapped), weakref.WeakSet()
        for pub in tapped:
            pub.__dict__.pop("publish", None)          # back to Publisher.publish
            pub.__dict__.pop("recorded", None)
        for fn in self.on_close:
            fn()
        self._thread.join()                            # it writes what is queued, then ends
        self._writer.close()
        if self.log is not None:
            self.log.info(f"recording: {self.written} messages on {len(self.counts)} topics written to {self.path}")
            if self.dropped or self.errors:
                self.log.warn(f"recording to {self.path}: {self.dropped} messages dropped (the writer did not keep "
                              f"up: {self.max_queued} messages queued), {self.errors} writes failed")

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


def attach_recorder(node, path, topics=None, max_queued: int = MAX_QUEUED) -> BagRecorder:
    """Start recording to the new rosbag2 MCAP directory ``path`` what ``node`` publishes on ``topics`` (names;
    None = every topic, except /rosout and /parameter_events, including those of publishers created later:
    ``BagRecorder.follow``). Attach before the node publishes what must be in the bag; call ``close()`` on
    shutdown."""
    selected = {t for t, _, _ in published_topics(node, topics)}   # ConfigError for a topic not published
    recorder = BagRecorder(path, node.get_logger(), max_queued)
    try:
        if topics is None:
            recorder.follow(node)
        else:
            for pub in node.publishers:
                if pub.topic_name in selected:
                    recorder.tap(pub, pub.topic_name not in NODE_CLOCK_TOPICS)
    except ConfigError:
        recorder.close()
        raise
    return recorder
