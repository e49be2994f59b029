"""The controllers' connection to a robot over ROS 2: only the interfaces a real driver stack also has
(``joint_states``, the wrist F/T ``<sensor>/wrench``, ``external_joint_torques``, ``robot_description``,
``<controller>/joint_trajectory``), plus, in lock-step mode only, the simulation node's ``~/pause`` and
``~/step`` services; and, for a controller that perceives, the camera topics of realsense2_camera with /tf and
/tf_static (:meth:`RobotLink.watch_camera`, :meth:`RobotLink.camera_frame`).

Timing (docs/scenarios.md, "Determinism"):

* ``lockstep`` (simulation, real_time_factor 0): the node is paused; each control tick the controller
  publishes its commands, then calls ``~/step`` (the node's ``step_count`` = one control period of steps) and
  waits for the state stamped with the new simulation time. The node applies every command it has received
  before the first step of a ``~/step`` (ros/command_intake.py), so the commands of a tick act on the whole tick,
  as in process: a run is bit-reproducible, and the in-process run's twin. (Commands are also built so that the
  instant the node receives them within the tick would not change the position targets: :class:`TickTrajectory`.)
* ``clock`` (a real robot, or the node paced to the wall clock): the controller waits for the next
  ``joint_states`` whose stamp passed the next tick.
"""

from __future__ import annotations

import json
import re
import threading
import time

import numpy as np
import pinocchio as pin
import rclpy
from geometry_msgs.msg import WrenchStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, HistoryPolicy
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import String
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectory

from ..cameras.perception import DepthImage
from ..cameras.spec import CameraSpec
from ..errors import ConfigError

CAMERA_DISCOVERY_S = 15.0   # s a perception client waits for the simulated camera's publishers to be discovered

from .link_messages import ControllerError, stamp_ns

try:
    from tf2_msgs.msg import TFMessage
except ImportError:   # built into the venv by scripts/ensure_venv.sh; without it a controller cannot perceive over ROS
    TFMessage = None


def image_array(msg: Image, dtype) -> np.ndarray:
    """The (H, W) pixels of a one-channel Image (``step`` padding and byte order per the message) as ``dtype``."""
    dt = np.dtype(dtype).newbyteorder(">" if msg.is_bigendian else "<")
    rows = np.frombuffer(msg.data, dtype=np.uint8).reshape(msg.height, msg.step)[:, :msg.width * dt.itemsize]
    return np.ascontiguousarray(rows).view(dt).reshape(msg.height, msg.width).astype(dtype, copy=False)


def transform_matrix(ts) -> np.ndarray:
    """(4, 4) homogeneous matrix of a geometry_msgs/TransformStamped (the child frame in the parent frame)."""
    tr, r = ts.transform.translation, ts.transform.rotation
    return pin.XYZQUATToSE3(np.array([tr.x, tr.y, tr.z, r.x, r.y, r.z, r.w])).homogeneous


class _CameraWatch:
    """One camera's subscriptions (RobotLink.watch_camera) and what arrived on them: depth and segmentation images
    by stamp (ns; the last few), the latest camera_info and label map."""

    KEEP = 4          # images per stream (a 640x480 16UC1 image is 600 kB)

    def __init__(self, name: str, depth_topic: str, info_topic: str, labels_topic: str | None,
                 map_topic: str | None):
        self.name, self.depth_topic, self.info_topic = name, depth_topic, info_topic
        self.labels_topic, self.map_topic = labels_topic, map_topic
        self.depth: dict[int, Image] = {}
        self.labels: dict[int, Image] = {}
        self.info: CameraInfo | None = None
        self.label_map: dict | None = None
        self.subscriptions = []


class RobotLink:
    """rclpy node of a controller: latest measurements, publishers of trajectories, tick-synchronised stepping.

    ``namespace``: the driver's namespace ('' or '/ns'); ``node_name``: the simulation node's name (for the
    lock-step services) in ``sim_namespace`` (default: ``namespace``; several robots in one world: the node's
    namespace, the robots in its sub-namespaces); ``period``: control period (s); ``world_frame``: the node's fixed
    frame (parameter world_frame), where camera images are located through TF.
    """

    def __init__(self, namespace: str, period: float, mode: str = "lockstep", sim_node_name: str = "contact_sim",
                 ft_topic: str | None = None, trajectory_controllers=(), name: str = "scenario_controller",
                 timeout: float = 60.0, wrench_topics=(), sim_namespace: str | None = None,
                 world_frame: str = "world"):
        if mode not in ("lockstep", "clock"):
            raise ConfigError(f"controller timing mode {mode!r}: valid modes are lockstep, clock")
        ns = namespace.rstrip("/")
        if ns and not ns.startswith("/"):
            ns = "/" + ns
        self.ns, self.mode, self.timeout, self.world_frame = ns, mode, float(timeout), world_frame
        self.period_ns = int(round(period * 1e9))
        self.ft_topic = ft_topic
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = Node(name, context=self.context)
        self._cond = threading.Condition()
        self.joint_states: dict[int, JointState] = {}     # stamp (ns) -> message (last few)
        self.ext_torques: dict[int, JointState] = {}
        self.ft: dict[int, WrenchStamped] = {}
        self.latest_js: JointState | None = None
        self.robot_description: str | None = None
        qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        self.node.create_subscription(JointState, f"{ns}/joint_states", self._on_js, qos)
        self.node.create_subscription(JointState, f"{ns}/external_joint_torques",
                                      lambda m: self._store(self.ext_torques, m), qos)
        if ft_topic:
            self.node.create_subscription(WrenchStamped, f"{ns}/{ft_topic}", lambda m: self._store(self.ft, m), qos)
        sim_ns = ns if sim_namespace is None else "/" + sim_namespace.strip("/") if sim_namespace.strip("/") else ""
        self.sim_ns = sim_ns
        self.wrenches: dict[str, dict[int, WrenchStamped]] = {}
        for topic in wrench_topics:       # contact_wrench/<body> of the simulation node (a real hand: fingertip
            table = self.wrenches.setdefault(topic, {})      # sensors, a sensorised object, motion capture)
            self.node.create_subscription(WrenchStamped, f"{sim_ns}/{topic}",
                                          lambda m, tb=table: self._store(tb, m), qos)
        self.node.create_subscription(String, f"{ns}/robot_description", self._on_description, latched)
        self.traj_pubs = {c: self.node.create_publisher(JointTrajectory, f"{ns}/{c}/joint_trajectory", qos)
                          for c in trajectory_controllers}
        base = f"{sim_ns}/{sim_node_name}"
        self.pause_client = self.node.create_client(SetBool, f"{base}/pause")
        self.step_client = self.node.create_client(Trigger, f"{base}/step")
        self.cameras: dict[str, _CameraWatch] = {}     # watched cameras (watch_camera)
        self.tf_static: dict[str, object] = {}         # child frame -> TransformStamped (/tf_static)
        self.tf: dict[str, dict[int, object]] = {}     # child frame -> {stamp ns: TransformStamped} (/tf, the last few)
        self._tf_subscriptions = []
        self._to_destroy = []          # subscriptions the spinning thread destroys between two spin_once
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._stop = False
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        self.t_ns = 0

    # ------------------------------------------------------------------ plumbing
    def _spin(self):
        while not self._stop and self.context.ok():
            self.executor.spin_once(timeout_sec=0.02)
            with self._cond:            # (destroyed here: never while this thread waits on them)
                doomed, self._to_destroy = self._to_destroy, []
            for sub in doomed:
                self.node.destroy_subscription(sub)

    def close(self):
        self._stop = True
        self._thread.join(2.0)
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)

    def _store(self, table: dict, msg):
        with self._cond:
            table[stamp_ns(msg.header.stamp)] = msg
            if len(table) > 400:
                for k in sorted(table)[:200]:
                    del table[k]
            self._cond.notify_all()

    def _on_js(self, msg):
        with self._cond:
            self.latest_js = msg
        self._store(self.joint_states, msg)

    def _on_description(self, msg):
        with self._cond:
            self.robot_description = msg.data
            self._cond.notify_all()

    def _wait(self, predicate, what: str, timeout: float | None = None):
        with self._cond:
            ok = self._cond.wait_for(predicate, self.timeout if timeout is None else timeout)
        if not ok:
            raise ControllerError(f"timed out after {self.timeout} s waiting for {what}")

    def _call(self, client, request, what: str):
        if not client.wait_for_service(timeout_sec=self.timeout):
            raise ControllerError(f"service {client.srv_name} not available ({what})")
        future = client.call_async(request)
        deadline = time.monotonic() + self.timeout
        while not future.done():
            if time.monotonic() > deadline:
                raise ControllerError(f"service {client.srv_name} did not answer within {self.timeout} s")
            time.sleep(0.0005)
        result = future.result()
        if not result.success:
            raise ControllerError(f"{client.srv_name}: {result.message}")
        return result

    # ------------------------------------------------------------------ interface
    def start(self) -> tuple[int, str]:
        """Wait for robot_description and the first joint state (and pause the node in lock-step mode).
        Returns (start time ns, URDF)."""
        topics = [f"{self.ns}/joint_states", f"{self.ns}/external_joint_torques"] + \
            ([f"{self.ns}/{self.ft_topic}"] if self.ft_topic else [])
        deadline = time.monotonic() + self.timeout
        while any(self.node.count_publishers(t) == 0 for t in topics):
            if time.monotonic() > deadline:
                raise ControllerError(f"no publisher of {topics} (is the node running in this namespace / "
                                      "ROS domain?)")
            time.sleep(0.02)
        if self.mode == "lockstep":
            # pause, then one control period of steps: the node publishes the state at the new time on every
            # topic (a state published before our subscriptions matched is not received again)
            self._call(self.pause_client, SetBool.Request(data=True), "pause for lock-step")
            res = self._call(self.step_client, Trigger.Request(), "first step")
            m = re.search(r"t = ([0-9.eE+-]+) s", res.message)
            if m is None:
                raise ControllerError(f"unexpected ~/step answer {res.message!r} (expected '... t = <time> s')")
            t_reported = float(m.group(1))
            self._wait(lambda: any(abs(k * 1e-9 - t_reported) < 1e-5 for k in self.joint_states),
                       f"joint_states at t = {t_reported} s")
            with self._cond:
                self.t_ns = min(self.joint_states, key=lambda k: abs(k * 1e-9 - t_reported))
        self._wait(lambda: self.robot_description is not None and self.latest_js is not None,
                   "robot_description and joint_states")
        if self.mode != "lockstep":
            with self._cond:
                self.t_ns = stamp_ns(self.latest_js.header.stamp)
        return self.t_ns, self.robot_description

    def follow(self, t_ns: int) -> None:
        """Lock-step, a robot whose simulation another link steps: wait for our state stamped ``t_ns`` (and the
        robot_description), then take it as the current tick."""
        self._wait(lambda: t_ns in self.joint_states and self.robot_description is not None,
                   f"{self.ns}/joint_states at t = {t_ns * 1e-9:.4f} s")
        self.t_ns = t_ns

    def state(self, need=("ft", "ext")) -> dict:
        """Measurements stamped with the current tick time: {'js': JointState, 'ft': WrenchStamped,
        'ext': JointState}; waits for them."""
        t = self.t_ns
        tables = {"js": self.joint_states, "ft": self.ft, "ext": self.ext_torques, **self.wrenches}
        keys = ("js",) + tuple(need)
        if self.mode == "clock":    # latest of each (a real robot: no common stamps)
            self._wait(lambda: all(tables[k] for k in keys), "measurements")
            with self._cond:
                return {k: tables[k][max(tables[k])] for k in keys}
        self._wait(lambda: all(t in tables[k] for k in keys), f"the state stamped t = {t * 1e-9:.4f} s "
                   f"({', '.join(k for k in keys if t not in tables[k])} missing)")
        with self._cond:
            return {k: tables[k][t] for k in keys}

    def publish(self, controller: str, msg: JointTrajectory):
        self.traj_pubs[controller].publish(msg)

    def advance(self) -> int:
        """Let one control period pass; returns the new tick time (ns)."""
        target = self.t_ns + self.period_ns
        if self.mode == "lockstep":
            self._call(self.step_client, Trigger.Request(), "step")
            self._wait(lambda: target in self.joint_states, f"joint_states at t = {target * 1e-9:.4f} s "
                       "(is the node's step_count one control period?)")
        else:
            self._wait(lambda: self.latest_js is not None and stamp_ns(self.latest_js.header.stamp) >= target,
                       f"joint_states past t = {target * 1e-9:.4f} s")
            with self._cond:
                target = stamp_ns(self.latest_js.header.stamp)
        self.t_ns = target
        return target

    # ------------------------------------------------------------------ perception (camera topics + TF)
    def watch_camera(self, camera: str, labels: bool = True) -> None:
        """Subscribe to camera ``camera``'s topics of the simulation node as a perception client of the real driver
        does (realsense2_camera, ``<sim ns>/<camera>/<camera>/``): ``aligned_depth_to_color/image_raw`` with
        ``color/camera_info`` (or, without the aligned stream, ``depth/image_rect_raw`` with ``depth/camera_info``),
        with ``labels`` also ``segmentation/image_raw`` and ``segmentation/labels``; and /tf, /tf_static. The node
        renders a camera only while its topics have readers: subscribe shortly before the image is needed
        (:meth:`camera_ready` says when every stream has delivered), :meth:`unwatch_camera` after.
        ControllerError when the node publishes no depth of that camera (the node runs a scene without it)."""
        if camera in self.cameras:
            return
        if TFMessage is None:
            raise ControllerError("perception over ROS needs tf2_msgs (built into the venv by "
                                  "scripts/ensure_venv.sh) to locate the camera")
        base = f"{self.sim_ns}/{camera}/{camera}"
        streams = (("aligned_depth_to_color/image_raw", "color/camera_info"),
                   ("depth/image_rect_raw", "depth/camera_info"))

        def published():
            return next(((d, i) for d, i in streams if self.node.count_publishers(f"{base}/{d}")), None)

        def segmented():
            return self.node.count_publishers(f"{base}/segmentation/image_raw") > 0
        # the node's cameras publish from a process of their own (ros/camera_process.py), a DDS participant this one
        # may discover seconds after the simulation node's, one endpoint at a time
        deadline = time.monotonic() + CAMERA_DISCOVERY_S
        while ((found := published()) is None or (labels and not segmented())) and time.monotonic() < deadline:
            time.sleep(0.05)
        if found is None:
            raise ControllerError(f"no publisher of {base}/aligned_depth_to_color/image_raw or "
                                  f"{base}/depth/image_rect_raw within {CAMERA_DISCOVERY_S:g} s: does the simulation "
                                  f"node run a scene with camera {camera!r} (the scenario's scene with cameras)?")
        depth, info = found
        if labels and not segmented():
            raise ControllerError(f"no publisher of {base}/segmentation/image_raw: camera {camera!r} needs the "
                                  "segmentation stream (the robot self-filter reads the robot's labels)")
        w = _CameraWatch(camera, f"{base}/{depth}", f"{base}/{info}",
                         f"{base}/segmentation/image_raw" if labels else None,
                         f"{base}/segmentation/labels" if labels else None)
        images = QoSProfile(depth=_CameraWatch.KEEP, reliability=ReliabilityPolicy.RELIABLE,
                            history=HistoryPolicy.KEEP_LAST)        # matches the driver's SYSTEM_DEFAULT images
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        node = self.node
        w.subscriptions.append(node.create_subscription(Image, w.depth_topic,
                                                        lambda m: self._store_image(w.depth, m), images))
        w.subscriptions.append(node.create_subscription(CameraInfo, w.info_topic,
                                                        lambda m: self._set(w, "info", m), images))
        if labels:
            w.subscriptions.append(node.create_subscription(Image, w.labels_topic,
                                                            lambda m: self._store_image(w.labels, m), images))
            w.subscriptions.append(node.create_subscription(
                String, w.map_topic, lambda m: self._set(w, "label_map", json.loads(m.data)), latched))
        if not self._tf_subscriptions:
            tf_static = QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                   reliability=ReliabilityPolicy.RELIABLE)
            self._tf_subscriptions = [
                node.create_subscription(TFMessage, "/tf", self._on_tf, 100),
                node.create_subscription(TFMessage, "/tf_static", self._on_tf_static, tf_static)]
        with self._cond:
            self.cameras[camera] = w

    def unwatch_camera(self, camera: str) -> None:
        """Drop camera ``camera``'s subscriptions (and /tf's with the last camera): the node stops rendering it."""
        with self._cond:
            w = self.cameras.pop(camera, None)
            if w is None:
                return
            doomed = list(w.subscriptions)
            if not self.cameras:
                doomed += self._tf_subscriptions
                self._tf_subscriptions = []
                self.tf.clear()
                self.tf_static.clear()
            self._to_destroy += doomed

    def camera_ready(self, camera: str) -> bool:
        """Every stream of a watched camera has delivered (so the node renders it for us: the image of the next
        tick will come)."""
        with self._cond:
            w = self.cameras.get(camera)
            return (w is not None and bool(w.depth) and w.info is not None and bool(self.tf) and bool(self.tf_static)
                    and (w.labels_topic is None or (bool(w.labels) and w.label_map is not None)))

    def camera_frame(self, camera: str) -> DepthImage:
        """The depth image of watched camera ``camera`` at the current tick, as cameras/perception.py reads it.
        Lock-step: waits for the image stamped with the tick (the node renders the state at t for the image
        stamped t) and for the TF from the world to its optical frame at that stamp. Clock mode: the first image
        stamped at or after the tick, located with the /tf transforms nearest to its stamp."""
        w = self.cameras.get(camera)
        if w is None:
            raise ControllerError(f"camera_frame({camera!r}) before watch_camera({camera!r})")
        t = self.t_ns
        exact = self.mode == "lockstep"

        def found():
            stamps = [s for s in w.depth if (s == t if exact else s >= t)
                      and (w.labels_topic is None or s in w.labels)]
            if not stamps or w.info is None or (w.labels_topic is not None and w.label_map is None):
                return None
            s = min(stamps)
            T = self._world_T(w.depth[s].header.frame_id, s, exact)
            return None if T is None else (s, T)
        what = (f"camera {camera!r}: {w.depth_topic} stamped t = {t * 1e-9:.4f} s, {w.info_topic}"
                + (f", {w.labels_topic} and {w.map_topic}" if w.labels_topic else "")
                + f" and the TF from {self.world_frame!r} to the image's frame")
        self._wait(lambda: found() is not None, what)
        with self._cond:
            s, T = found()
            depth_msg, info = w.depth[s], w.info
            labels_msg = w.labels.get(s)
            label_map = w.label_map or {}
        if depth_msg.encoding not in ("16UC1", "mono16"):
            raise ControllerError(f"{w.depth_topic}: encoding {depth_msg.encoding!r}, expected 16UC1 (millimetres)")
        k = info.k
        spec = CameraSpec(camera, self.world_frame, pin.SE3.Identity(), int(info.width), int(info.height),
                          fx=float(k[0]), fy=float(k[4]), cx=float(k[2]), cy=float(k[5]))
        depth = image_array(depth_msg, np.uint16).astype(np.float32) * np.float32(1e-3)
        labels = (image_array(labels_msg, np.uint16) if labels_msg is not None
                  else np.zeros(depth.shape, np.uint16))
        names = {int(label): e.get("name", "") for label, e in label_map.items()}
        return DepthImage(spec, s * 1e-9, depth, labels, T, names)

    def camera_label_map(self) -> dict:
        """The watched cameras' segmentation labels (topic ``segmentation/labels``): label (str) -> {name, kind
        (link/object/environment), robot}."""
        with self._cond:
            for w in self.cameras.values():
                if w.label_map is not None:
                    return w.label_map
        raise ControllerError("camera_label_map(): no label map received (watch_camera with labels, then "
                              "camera_frame)")

    def _store_image(self, table: dict, msg) -> None:
        with self._cond:
            table[stamp_ns(msg.header.stamp)] = msg
            while len(table) > _CameraWatch.KEEP:
                del table[min(table)]
            self._cond.notify_all()

    def _set(self, w: _CameraWatch, attr: str, value) -> None:
        with self._cond:
            setattr(w, attr, value)
            self._cond.notify_all()

    def _on_tf(self, msg) -> None:
        with self._cond:
            for ts in msg.transforms:
                table = self.tf.setdefault(ts.child_frame_id, {})
                table[stamp_ns(ts.header.stamp)] = ts
                if len(table) > 50:
                    for key in sorted(table)[:25]:
                        del table[key]
            self._cond.notify_all()

    def _on_tf_static(self, msg) -> None:
        with self._cond:
            for ts in msg.transforms:
                self.tf_static[ts.child_frame_id] = ts
            self._cond.notify_all()

    def _world_T(self, frame: str, t_ns: int, exact: bool) -> np.ndarray | None:
        """(with self._cond held) (4, 4) pose of ``frame`` in the world frame at ``t_ns``, composed along the TF
        tree: static transforms, and /tf transforms stamped ``t_ns`` (exact) or nearest to it; None while a
        transform of the chain is missing."""
        T = np.eye(4)
        seen = set()
        while frame != self.world_frame:
            if frame in seen:
                return None
            seen.add(frame)
            ts = self.tf_static.get(frame)
            if ts is None:
                table = self.tf.get(frame)
                if not table:
                    return None
                ts = table.get(t_ns) if exact else table[min(table, key=lambda s: abs(s - t_ns))]
                if ts is None:
                    return None
            T = transform_matrix(ts) @ T
            frame = ts.header.frame_id
        return T


class MultiRobotLink:
    """Several robots of ONE simulated world (scene key ``robots:``), each in its namespace ``<ns>/<robot>``, as
    one link: ``start()`` -> (t0, {robot: URDF}), ``state(need)`` -> {robot: state dict}, ``advance()``.
    The first robot's link steps the simulation node (lock-step, its ``~/step`` in ``<ns>``); the others wait for
    their state at the same tick. ``links[robot]`` publishes that robot's trajectories."""

    def __init__(self, namespace: str, robots, period: float, timeout: float = 60.0, **per_robot):
        """``per_robot``: RobotLink keyword arguments (ft_topic, trajectory_controllers, wrench_topics) for every
        robot."""
        ns = "/" + namespace.strip("/") if namespace.strip("/") else ""
        self.robots = list(robots)
        self.period_ns = int(round(period * 1e9))
        self.links = {}
        try:
            for r in self.robots:
                self.links[r] = RobotLink(f"{ns}/{r}", period, "lockstep", timeout=timeout, sim_namespace=ns,
                                          name=f"scenario_controller_{r}", **per_robot)
        except Exception:
            self.close()
            raise
        self.leader = self.links[self.robots[0]]
        # every robot's commands go out through the leader's node, the DDS participant that sends the ~/step
        # requests: published before a request, a command is then in the node's reader when the request is handled
        # (same participant, same transport) and the node applies it from the step's first step
        # (ros/command_intake.py); from a participant of its own it could come later
        for r in self.robots[1:]:
            link = self.links[r]
            for c, pub in list(link.traj_pubs.items()):
                link.traj_pubs[c] = self.leader.node.create_publisher(JointTrajectory, pub.topic_name, pub.qos_profile)
                link.node.destroy_publisher(pub)
        self.t_ns = 0

    @property
    def node(self):
        return self.leader.node

    def start(self):
        for link in self.links.values():       # every robot's state is heard before the first step
            deadline = time.monotonic() + link.timeout
            topics = [f"{link.ns}/joint_states", f"{link.ns}/external_joint_torques"] + \
                ([f"{link.ns}/{link.ft_topic}"] if link.ft_topic else [])
            while any(link.node.count_publishers(t) == 0 for t in topics):
                if time.monotonic() > deadline:
                    raise ControllerError(f"no publisher of {topics} (is the node running with this robot?)")
                time.sleep(0.02)
        t0, urdf = self.leader.start()
        urdfs = {self.robots[0]: urdf}
        for r in self.robots[1:]:
            link = self.links[r]
            link.follow(t0)      # while paused the joint_state_broadcaster repeats the state stamped t0
            urdfs[r] = link.robot_description
        self.t_ns = t0
        return t0, urdfs

    def state(self, need=("ft", "ext")) -> dict:
        return {r: link.state(need=need) for r, link in self.links.items()}

    def advance(self) -> int:
        t = self.leader.advance()
        for r in self.robots[1:]:
            self.links[r].follow(t)
        self.t_ns = t
        return t

    def close(self):
        for link in self.links.values():
            link.close()
