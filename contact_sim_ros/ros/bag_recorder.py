"""Record a node's publications and what it is asked to a rosbag2 directory in MCAP storage (node parameter
``record:=PATH``), as Jazzy's ``ros2 bag record --use-sim-time -s mcap`` would write them.

``attach_recorder(node, path)`` taps the node on its own side (no DDS subscription in between: a subscription in
the same node, spun by its busy executor, kept only ~3 messages/s per topic):

* its publishers: each tapped publisher's ``publish(msg)`` publishes ``msg`` as before and hands the CDR bytes
  (``rclpy.serialization.serialize_message``; the node's hand-packed state messages are already bytes, published
  and recorded as they are) with the topic and type to a bounded queue;
* its inputs: the subscriptions it creates while recording are created raw (``raw=True``): the bytes the
  middleware delivered are recorded on the subscription's topic (``/joint_command``, ``<controller>/commands``,
  ``<controller>/joint_trajectory`` ...) and the message handed to the node's callback; every goal request an
  action server of the node receives is recorded as the action's goal message (``<pkg>/action/<Action>_Goal``, e.g.
  ``control_msgs/action/FollowJointTrajectory_Goal``) on the topic ``<action name>/goal`` (e.g.
  ``/arm_controller/follow_joint_trajectory/goal``), and every goal's result when the goal ends (succeeded,
  aborted or canceled) as the action's result message (``<pkg>/action/<Action>_Result``, e.g.
  ``franka_msgs/action/Move_Result``) on ``<action name>/result``. These two topics are this recorder's own
  naming: ros2 bag of Jazzy records no actions (rosbag2 records them from Kilted on, through action
  introspection's hidden ``<action>/_action/...`` topics and service events, which Jazzy's rclpy does not
  publish). So a bag shows the commands and the responses side by side, and ``contact-sim replay`` replays the
  commands and goals.

A writer thread writes the queue with :class:`contact_sim_ros.bag_files.JazzyBagWriter` (the pure-Python
``rosbags`` writer, rosbag2 format 9, in Jazzy's layout: ``<bag>_0.mcap``, ``ros_distro: jazzy``, channel QoS and
type hashes), so ``ros2 bag info/play``, Foxglove, rosbags and the ``mcap`` readers (mcap-ros2-support) read it.
With ``topics`` None the publishers, subscriptions and action servers the node creates later are tapped too
(``BagRecorder.follow``): the ros2_control controllers', those of objects spawned while running; sim_node also
follows its robots' nodes (several robots).

* Bag timestamps are SIMULATION time (ns): the message's own ``header.stamp`` (or ``rosgraph_msgs/Clock.clock``;
  for a message that starts with a sequence of stamped messages, like ``tf2_msgs/TFMessage`` and
  ``visualization_msgs/MarkerArray``, the stamp of the first element). A message without a stamp
  (``std_msgs/String`` robot_description, an empty TFMessage), stamped with the node's ROS clock
  (``/diagnostics``: wall time unless ``use_sim_time``), and every input (its receive time, whatever its header
  says) gets the latest sim time recorded so far (0 at start). This is what ``ros2 bag record --use-sim-time``
  records; ``ros2 bag play --clock`` then republishes /clock. After a ``~/reset`` the stamps start again from 0.
  metadata.yaml's ``starting_time`` is the first message's time (sim time: 0 for a node started at t = 0).
* Exact CDR: ``serialize_message`` returns rmw_fastrtps' estimated size, which can run past the message with
  uninitialised bytes (32 for a 7-joint JointTrajectoryControllerState); the writer thread cuts every message
  that is not hand-packed at its end (``exact_cdr``), so each recorded message decodes with rosbags and mcap.
* Only what is published after the tap is recorded: attach the recorder before the node publishes (sim_node
  attaches it before it creates its publishers, so latched /tf_static and robot_description are in the bag).
* Message definitions: the standard types from rosbags' Jazzy type store; types it lacks (``contact_sim_msgs``,
  control_msgs, any package built into the venv or a ROS install) from their ``.msg`` / ``.action`` files, found
  in ``<prefix>/share/<pkg>/{msg,action}/`` of every ``AMENT_PREFIX_PATH`` entry and in ``msgs/<pkg>/msg/``.
* Threads: the publishing thread (the stepping thread for the state topics) only serializes and enqueues; stamps
  are read from the bytes, messages cut to their end and files written on the writer thread. The queue holds at
  most ``max_queued`` messages: when full (the disk cannot keep up) a message is dropped, counted (``dropped``;
  sim_node's diagnostics ``record_dropped``) and reported at close.
* Surviving a kill: the pending MCAP chunk is written to the file at least every ``FLUSH_PERIOD_S`` (0.5 s of
  wall time), so a SIGKILLed node leaves a bag whose complete chunks hold all but the last ~0.5 s; it has no
  metadata.yaml and no MCAP summary: ``contact-sim bag-repair DIR`` recovers it.
* A ``record`` path that exists, or whose parent cannot be created or written, is refused at start-up
  (ConfigError: one line).
* ``close()`` (idempotent) restores the publishers, writes what is queued and closes the bag, which writes the
  MCAP summary and ``metadata.yaml``; the node calls it on shutdown.
"""

from __future__ import annotations

import collections
import inspect
import os
import struct
import sys
import threading
import time
import weakref
from pathlib import Path

from rclpy.action import ActionServer
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message, serialize_message  # noqa: F401 - the bags' CDR, for replay too

from ..driver.node_config import check_record_path
from ..errors import ConfigError
from ..resources import share_dir

BAG_VERSION = 9                         # rosbag2 metadata version written by Jazzy
MAX_QUEUED = 200_000                    # messages waiting for the writer thread (~ 1 min at sim_node's default rates)
WRITER_PERIOD_S = 0.005                 # the writer thread looks for new messages this often when it has none
FLUSH_PERIOD_S = 0.5                    # wall s: the pending MCAP chunk is written to the file at least this often
EXCLUDED_TOPICS = ("/rosout", "/parameter_events")
# stamped with the node's ROS clock (wall time unless use_sim_time), not sim time: recorded at the latest sim time
NODE_CLOCK_TOPICS = ("/diagnostics",)


def msgtype_name(msg_class) -> str:
    """``sensor_msgs.msg.JointState`` -> ``'sensor_msgs/msg/JointState'``; an action's goal
    ``control_msgs.action.FollowJointTrajectory.Goal`` -> ``'control_msgs/action/FollowJointTrajectory_Goal'``."""
    pkg, kind = (msg_class.__module__.split(".") + ["msg"])[:2]
    return f"{pkg}/{kind}/{msg_class.__name__}"


def make_typestore(msgtypes=()):
    """rosbags type store of ROS 2 Jazzy plus the packages of ``msgtypes`` that it lacks (from .msg files)."""
    from rosbags.typesys import Stores, get_typestore  # deferred: optional, pip only (no rosdep key)
    store = get_typestore(Stores.ROS2_JAZZY)
    for msgtype in msgtypes:
        ensure_message_type(store, msgtype)
    return store


def _msg_dirs(pkg: str, kind: str = "msg") -> list[Path]:
    dirs = [Path(p) / "share" / pkg / kind for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    try:     # a source checkout's msgs/ (share_dir() is the checkout there; an install has them on the prefix path)
        dirs.append(Path(share_dir()) / "msgs" / pkg / kind)
    except ConfigError:   # no share directory (an odd install): the other places
        pass
    return [d for d in dirs if d.is_dir()]


_ACTION_PARTS = ("Goal", "Result", "Feedback")          # the sections of a .action file, in order


def _action_types(pkg: str, path: Path) -> dict:
    """rosbags types of an action's Goal, Result and Feedback messages (``pkg/action/Name_Goal`` ...) from its
    .action file (three .msg sections separated by ``---`` lines)."""
    from rosbags.typesys import get_types_from_msg
    sections, current = [], []
    for line in path.read_text().splitlines():
        if line.strip() == "---":
            sections.append(current)
            current = []
        else:
            current.append(line)
    sections.append(current)
    types = {}
    for part, lines in zip(_ACTION_PARTS, sections):
        text = "\n".join(_qualify(line, pkg) for line in lines)
        types.update(get_types_from_msg(text, f"{pkg}/action/{path.stem}_{part}"))
    return types


_PRIMITIVES = {"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
               "int64", "uint64", "string", "wstring", "Header"}


def _qualify(line: str, pkg: str) -> str:
    """A field line of an .action file with a bare message type of its own package (``JointTolerance``) written
    ``pkg/msg/JointTolerance``, as rosidl resolves it (rosbags would look for it under ``pkg/action/``)."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return line
    token = stripped.split()[0]
    base = token.split("[")[0].split("<=")[0]
    if "/" in base or base in _PRIMITIVES or not base[:1].isalpha():
        return line
    return line.replace(token, f"{pkg}/msg/{token}", 1)


def ensure_message_type(store, msgtype: str, depth: int = 0) -> None:
    """Make the rosbags type store ``store`` know ``msgtype`` (``pkg/msg/Name``, ``pkg/action/Name_Goal`` ...):
    if it lacks it, register its whole package from its .msg files (an action's parts from its .action file)
    found under AMENT_PREFIX_PATH or the checkout's msgs/, then the types they use that it lacks (``depth``: the
    recursion's, at most 8 levels). ConfigError naming the type when no definition is found."""
    from rosbags.typesys import get_types_from_msg  # deferred: optional, pip only (no rosdep key)
    if msgtype in store.fielddefs:
        missing = _missing_dependencies(store, msgtype)
        for dep in missing:
            if depth < 8:
                ensure_message_type(store, dep, depth + 1)
        return
    pkg, kind, name = msgtype.split("/")
    if kind == "action":                            # Name_Goal / _Result / _Feedback from Name.action
        action = name.rsplit("_", 1)[0]
        for d in _msg_dirs(pkg, "action"):
            if (d / f"{action}.action").is_file():
                types = _action_types(pkg, d / f"{action}.action")
                _register(store, types, depth)
                return
    for d in _msg_dirs(pkg):
        if (d / f"{name}.msg").is_file():
            types = {}
            for f in sorted(d.glob("*.msg")):
                types.update(get_types_from_msg(f.read_text(), f"{pkg}/msg/{f.stem}"))
            _register(store, types, depth)
            return
    raise ConfigError(f"recording: no message definition for {msgtype} (not a ROS 2 Jazzy standard type and no "
                      f"{pkg}/msg/{name}.msg under AMENT_PREFIX_PATH or msgs/)")


def _register(store, types: dict, depth: int) -> None:
    """Register ``types`` (name -> definition) and, at most 8 levels deep, the types they use that are missing."""
    store.register(types)
    for t in types:
        for dep in _missing_dependencies(store, t):
            if depth < 8:
                ensure_message_type(store, dep, depth + 1)


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
    """One recorded topic: its bag connection (created by the writer thread on its first message), how to read a
    message's stamp from its CDR bytes, and the type's CDR reader (``exact_cdr``)."""

    __slots__ = ("topic", "msgtype", "qos", "offset", "conn", "reader")

    def __init__(self, topic: str, msgtype: str, qos, offset: int | None):
        self.topic, self.msgtype, self.qos, self.offset, self.conn = topic, msgtype, qos, offset, None
        self.reader = None


def exact_cdr(store, msgtype: str, data: bytes, chan: _Channel | None = None) -> bytes:
    """``data`` (a CDR-serialized ``msgtype``) without the bytes after the message's end. rclpy's
    ``serialize_message`` (rmw_fastrtps' ``rmw_serialize``) returns a buffer of the type support's ESTIMATED size,
    which can exceed the message (e.g. 32 bytes for a 7-joint control_msgs/JointTrajectoryControllerState, 8 for
    a one-joint JointState), the rest uninitialised memory: readers that check the size (rosbags) refuse it. The
    end is found by reading the message with rosbags' deserializer of the type (~80 us for the controller state);
    bytes that do not read as the type are returned as they are."""
    reader = chan.reader if chan is not None else None
    if reader is None:
        msgdef = store.get_msgdef(msgtype)
        reader = (msgdef.deserialize_cdr_le, msgdef.deserialize_cdr_be, msgdef.cls)
        if chan is not None:
            chan.reader = reader
    if len(data) < 4:
        return data
    func = reader[0] if data[1] == 1 else reader[1]
    try:
        _, pos = func(data[4:], 0, reader[2], store)
    except Exception:          # not this type's CDR (a client's bad bytes): recorded as received
        return data
    end = 4 + pos
    return bytes(data[:end]) if len(data) > end else data


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
    """Writes the messages of the publishers it taps (``tap``), of the subscriptions (``tap_subscription``) and
    action servers (``tap_action_server``) it taps, to the rosbag2 directory ``path`` (must not exist; created)
    in MCAP storage, on its own writer thread. See the module docstring."""

    def __init__(self, path, logger=None, max_queued: int = MAX_QUEUED):
        from rosbags.rosbag2 import WriterError  # deferred: optional, pip only (no rosdep key)

        from ..bag_files import JazzyBagWriter    # deferred: loads rosbags and mcap (optional, pip only)
        self.path = check_record_path(path)
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
        self._writer = JazzyBagWriter(self.path)
        try:
            self._writer.open()
        except (OSError, WriterError) as exc:
            raise ConfigError(f"parameter 'record': cannot create {self.path}: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None
        self.max_queued = int(max_queued)
        self._queue: collections.deque = collections.deque()     # append / popleft: atomic, no lock taken
        self._thread = threading.Thread(target=self._write_loop, name="bag_recorder_writer", daemon=True)
        self._thread.start()

    @property
    def topics(self) -> list[str]:
        """The tapped topics (fully qualified names), in the order they were tapped."""
        return list(self.counts)

    @property
    def bag_topics(self) -> list[str]:
        """The topics in the bag (those with a connection: a first message was written), in the order they were
        tapped; what the closing log line counts."""
        with self._lock:
            return list(dict.fromkeys(c.topic for c in self._channels.values() if c.conn is not None))

    @property
    def queued(self) -> int:
        """Messages waiting for the writer thread."""
        return len(self._queue)

    def _channel(self, topic: str, msgtype: str, qos, sim_stamped: bool) -> _Channel | None:
        """The channel of (topic, type, QoS), created if new (call with the lock held); None once closed."""
        if self._closed:
            return None
        ensure_message_type(self.typestore, msgtype)
        key = (topic, msgtype, qos.durability, qos.reliability)
        chan = self._channels.get(key)
        if chan is None:
            offset = stamp_offset(self.typestore, msgtype) if sim_stamped else None
            chan = self._channels[key] = _Channel(topic, msgtype, _qos_for_bag(qos), offset)
            self.counts.setdefault(topic, 0)
        return chan

    def _enqueue(self, chan: _Channel, data: bytes, exact: bool) -> None:
        """Hand one message to the writer thread (``exact`` False: the bytes may run past the message's end)."""
        if self._closed:
            return
        if len(self._queue) < self.max_queued:
            self._queue.append((chan, data, exact))
        else:
            with self._lock:
                self.dropped += 1

    def tap(self, publisher, sim_stamped: bool = True) -> None:
        """Record every message ``publisher`` publishes from now on (replaces its ``publish`` on the instance;
        ``close()`` restores it). ``sim_stamped`` False: the messages' stamps are not sim time (recorded at the
        latest sim time). A message object is published as it is (rmw serializes it exactly) and serialized once
        more for the bag; bytes (the node's hand-packed state messages) are published and recorded as they are.
        ConfigError if its type has no known definition."""
        msgtype = msgtype_name(publisher.msg_type)
        with self._lock:
            chan = self._channel(publisher.topic_name, msgtype, publisher.qos_profile, sim_stamped)
            if chan is None:
                return
            self._tapped.add(publisher)
        publish, enqueue = publisher.publish, self._enqueue

        def recorded_publish(msg) -> None:
            publish(msg)                                             # the class's bound method
            if isinstance(msg, bytes):
                enqueue(chan, msg, True)
            else:
                enqueue(chan, serialize_message(msg), False)
        publisher.publish = recorded_publish
        publisher.recorded = True      # state_messages.has_readers: published also without a subscriber

    def record_input(self, topic: str, msg_class, qos, data: bytes) -> None:
        """Record ``data`` (CDR of ``msg_class``) received on ``topic`` now (at the latest sim time): what the
        node was asked (commands, goals). A type without definition is not recorded (warned once)."""
        msgtype = msgtype_name(msg_class)
        with self._lock:
            try:
                chan = self._channel(topic, msgtype, qos, False)
            except ConfigError as exc:
                chan = None
                if self.log is not None and topic not in self.counts:
                    self.counts[topic] = 0
                    self.log.warn(f"recording: {topic} not recorded: {exc}")
        if chan is not None:
            self._enqueue(chan, data, False)

    def tap_subscription_callback(self, node, msg_type, topic: str, callback, qos_profile):
        """A callback for a RAW subscription that records the received bytes (as the middleware delivered them)
        on the subscription's topic, then hands the message to ``callback`` as rclpy would have."""
        full = node.resolve_topic_name(topic)
        qos = qos_profile if isinstance(qos_profile, QoSProfile) else QoSProfile(depth=int(qos_profile))
        record = self.record_input

        if inspect.iscoroutinefunction(callback):       # the executor awaits a coroutine function's result
            async def recorded_callback(data: bytes):
                record(full, msg_type, qos, data)
                return await callback(deserialize_message(data, msg_type))
        else:
            def recorded_callback(data: bytes):
                record(full, msg_type, qos, data)
                return callback(deserialize_message(data, msg_type))
        return recorded_callback

    def tap_action_server(self, node, server, action_name: str) -> None:
        """Record every goal request ``server`` (an rclpy ActionServer named ``action_name``) receives, as its goal
        message (``<pkg>/action/<Action>_Goal``) on the topic ``<action name>/goal``, when it arrives (before the
        server's goal callback accepts or rejects it); and the result of every goal it executes, when the goal
        ends, as its result message (``<pkg>/action/<Action>_Result``) on ``<action name>/result``."""
        goal_class = server._action_type.Goal
        topic = node.resolve_topic_name(f"{action_name}/goal")
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        callback, record = server._goal_callback, self.record_input
        self._tap_results(server, node.resolve_topic_name(f"{action_name}/result"), qos)

        if inspect.iscoroutinefunction(callback):       # rclpy awaits a coroutine function's result
            async def recorded_goal_callback(goal):
                record(topic, goal_class, qos, serialize_message(goal))
                return await callback(goal)
        else:
            def recorded_goal_callback(goal):
                record(topic, goal_class, qos, serialize_message(goal))
                return callback(goal)
        server._goal_callback = recorded_goal_callback
        self.on_close.append(lambda: setattr(server, "_goal_callback", callback))

    def _tap_results(self, server, topic: str, qos) -> None:
        """Record the result message of every goal ``server`` executes on ``topic``, when the goal has ended (rclpy's
        ``ActionServer._execute_goal`` sets it as the answer of get_result; replaced on the instance until
        ``close()``)."""
        result_class, record = server._action_type.Result, self.record_input
        execute_goal = server._execute_goal        # the class's bound method

        async def recorded_execute_goal(execute_callback, goal_handle):
            await execute_goal(execute_callback, goal_handle)
            future = server._result_futures.get(bytes(goal_handle.goal_id.uuid))
            if future is not None and future.done() and future.result() is not None:
                record(topic, result_class, qos, serialize_message(future.result().result))
        server._execute_goal = recorded_execute_goal
        self.on_close.append(lambda: server.__dict__.pop("_execute_goal", None))

    def follow(self, node) -> None:
        """Record every topic ``node`` publishes (except /rosout and /parameter_events): its publishers now and
        those it creates later (``node.create_publisher`` is wrapped on the instance until ``close()``); and what
        the node is asked: the messages of the subscriptions it creates from now on (``node.create_subscription``
        wrapped: the subscription is created raw, the received bytes recorded, the message handed on) and the
        goals of the action servers it creates (``node.add_waitable`` wrapped). The simulation node follows
        itself and its robots' nodes. ConfigError for a present publisher's type without definition; a later one
        is published, not recorded (warned)."""
        for pub in node.publishers:
            if pub.topic_name not in EXCLUDED_TOPICS:
                self.tap(pub, pub.topic_name not in NODE_CLOCK_TOPICS)
        create = node.create_publisher                              # the class's bound methods
        create_sub = node.create_subscription
        add_waitable = node.add_waitable

        def create_recorded_publisher(msg_type, topic, *args, **kwargs):
            pub = create(msg_type, topic, *args, **kwargs)
            if pub.topic_name not in EXCLUDED_TOPICS:
                try:
                    self.tap(pub, pub.topic_name not in NODE_CLOCK_TOPICS)
                except ConfigError as exc:        # a type without definition: published, not recorded
                    node.get_logger().warn(f"recording: {pub.topic_name} not recorded: {exc}")
            return pub

        def create_recorded_subscription(msg_type, topic, callback, qos_profile, **kwargs):
            if kwargs.get("raw") or self._closed:
                return create_sub(msg_type, topic, callback, qos_profile, **kwargs)
            kwargs["raw"] = True
            return create_sub(msg_type, topic,
                              self.tap_subscription_callback(node, msg_type, topic, callback, qos_profile),
                              qos_profile, **kwargs)

        def add_recorded_waitable(waitable):
            if isinstance(waitable, ActionServer) and not self._closed:
                # rclpy's ActionServer keeps no name; its __init__ (the caller) has it as the argument action_name
                name = sys._getframe(1).f_locals.get("action_name")
                if isinstance(name, str):
                    self.tap_action_server(node, waitable, name)
                else:
                    node.get_logger().warn(f"recording: the goals of an action server of "
                                           f"{waitable._action_type.__name__} are not recorded (no action name)")
            return add_waitable(waitable)
        node.create_publisher = create_recorded_publisher
        node.create_subscription = create_recorded_subscription
        node.add_waitable = add_recorded_waitable
        self.on_close.append(lambda: [node.__dict__.pop(name, None) for name in
                                      ("create_publisher", "create_subscription", "add_waitable")])

    def _write_loop(self) -> None:
        """Writer thread: bag connections, stamps, exact CDR, writes, in the order the messages were queued; the
        pending MCAP chunk goes to the file every ``FLUSH_PERIOD_S`` (a killed node's bag holds what was written
        until then: ``contact-sim bag-repair``)."""
        get, writer, store = self._queue.popleft, self._writer, self.typestore
        unflushed, last_flush = False, time.monotonic()
        while True:
            try:
                chan, data, exact = get()
            except IndexError:             # nothing queued: done if closed, else look again in a while
                if self._closed and not self._queue:
                    return
                if unflushed and time.monotonic() - last_flush > FLUSH_PERIOD_S:
                    unflushed, last_flush = False, time.monotonic()
                    self._flush(writer)
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
                        chan.conn = writer.add_connection(chan.topic, chan.msgtype, typestore=store,
                                                          offered_qos_profiles=[chan.qos])
                writer.write(chan.conn, stamp, data if exact else exact_cdr(store, chan.msgtype, data, chan))
                self.counts[chan.topic] += 1
                self.written += 1
                unflushed = True
            except Exception as exc:  # disk full, ...: report once, keep the node running
                self._error(chan.topic, exc)
            if unflushed and time.monotonic() - last_flush > FLUSH_PERIOD_S:
                unflushed, last_flush = False, time.monotonic()
                self._flush(writer)

    def _flush(self, writer) -> None:
        try:
            writer.flush()
        except Exception as exc:      # disk full ...
            self._error("(flush)", exc)

    def _error(self, topic: str, exc: Exception) -> None:
        self.errors += 1
        if self.errors == 1 and self.log is not None:
            self.log.error(f"recording to {self.path}: writing {topic} failed: {exc}")

    def close(self) -> None:
        """Stop recording: restore the publishers, action servers and node methods, write what is queued, close
        the bag (writes the MCAP summary and metadata.yaml) and log the totals (and the drops, if any).
        Idempotent. Subscriptions created while recording stay raw (they still record nothing once closed)."""
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
        try:
            self._writer.close()
        except Exception as exc:                       # disk full ...
            self._error("(close)", exc)
        if self.log is not None:
            self.log.info(f"recording: {self.written} messages on {len(self.bag_topics)} topics written to "
                          f"{self.path}" + (f" ({len(self.counts) - len(self.bag_topics)} tapped topic(s) had no "
                                            f"message and are not in the bag)"
                                            if len(self.counts) > len(self.bag_topics) else ""))
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
