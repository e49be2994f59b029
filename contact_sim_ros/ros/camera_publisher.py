"""The scene's simulated RGB-D cameras on realsense2_camera's topics (docs/cameras.md).

Per camera ``C`` (relative to the node's namespace, as the driver's ``<camera_namespace>/<camera_name>``):

    C/C/color/image_raw                   sensor_msgs/Image rgb8
    C/C/color/camera_info                 sensor_msgs/CameraInfo (plumb_bob, no distortion)
    C/C/depth/image_rect_raw              sensor_msgs/Image 16UC1, millimetres, 0 = no depth
    C/C/depth/camera_info
    C/C/aligned_depth_to_color/image_raw  16UC1 in the color optical frame
    C/C/aligned_depth_to_color/camera_info
    C/C/depth/color/points                sensor_msgs/PointCloud2 x y z (float32) rgb (float32, bytes b g r 0),
                                          point_step 20, unordered (height 1), only points with depth
    C/C/segmentation/image_raw            sensor_msgs/Image 16UC1 labels (0 = nothing)
    C/C/segmentation/labels               std_msgs/String, JSON {label: {name, kind, robot}}, transient local

QoS as the driver's defaults: images and camera_info SYSTEM_DEFAULT, the point cloud DEFAULT (reliable, depth 10).
TF (static, REP 103): parent -> C_link (the scene pose) -> C_color_frame / C_depth_frame (identity: color and
depth are rendered from one viewpoint) -> C_color_optical_frame / C_depth_optical_frame (rpy -pi/2, 0, -pi/2).
Stamps are the sim time of the rendered state.

Threading (cameras/render_thread.py): the stepping thread only hands a copy of (q, t) to the render thread, at
each camera's rate in sim time (``hooks``: a PublishHook per camera); the render thread owns the GL context (made
there), renders, builds and publishes the messages. When rendering falls behind, a camera's newer state replaces its older pending one
(the stepping thread never waits). Nothing is rendered for a camera none of whose topics has a reader.
"""

from __future__ import annotations

import array
import json

import numpy as np
import pinocchio as pin
from geometry_msgs.msg import TransformStamped
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_system_default
from sensor_msgs.msg import CameraInfo, Image, PointCloud2, PointField
from std_msgs.msg import String

from ..cameras.depth_models import depth_mm
from ..cameras.render_thread import RenderThread
from ..cameras.spec import BODY_TO_OPTICAL, CameraSpec, pixel_rays
from ..driver.loop import PublishHook
from .state_messages import has_readers, stamp

try:
    from tf2_msgs.msg import TFMessage
except ImportError:   # built into the venv by scripts/ensure_venv.sh; without it the cameras' TF is not published
    TFMessage = None

POINTS_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE,
                        history=HistoryPolicy.KEEP_LAST)
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                     history=HistoryPolicy.KEEP_LAST)
POINT_FIELDS = [PointField(name="x", offset=0, datatype=PointField.FLOAT32, count=1),
                PointField(name="y", offset=4, datatype=PointField.FLOAT32, count=1),
                PointField(name="z", offset=8, datatype=PointField.FLOAT32, count=1),
                PointField(name="rgb", offset=16, datatype=PointField.FLOAT32, count=1)]
POINT_STEP = 20


def camera_info(spec: CameraSpec, frame_id: str) -> CameraInfo:
    """The CameraInfo of ``spec`` (header stamp left to the caller)."""
    msg = CameraInfo()
    msg.header.frame_id = frame_id
    msg.width, msg.height = spec.width, spec.height
    msg.distortion_model = "plumb_bob"
    msg.d = [0.0] * 5
    msg.k = [spec.fx, 0.0, spec.cx, 0.0, spec.fy, spec.cy, 0.0, 0.0, 1.0]
    msg.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    msg.p = [spec.fx, 0.0, spec.cx, 0.0, 0.0, spec.fy, spec.cy, 0.0, 0.0, 0.0, 1.0, 0.0]
    return msg


def image_message(pixels: np.ndarray, encoding: str, frame_id: str) -> Image:
    """An Image of a C-contiguous (H, W[, C]) array (little endian)."""
    msg = Image()
    msg.header.frame_id = frame_id
    msg.height, msg.width = pixels.shape[:2]
    msg.encoding = encoding
    msg.is_bigendian = 0
    msg.step = pixels.strides[0]
    data = array.array("B")
    data.frombytes(np.ascontiguousarray(pixels).view(np.uint8).reshape(-1).data)   # one copy
    msg.data = data
    return msg


def point_cloud_message(spec: CameraSpec, depth_m: np.ndarray, color: np.ndarray, frame_id: str) -> PointCloud2:
    """PointCloud2 as realsense2_camera's depth/color/points of a depth image (m, 0 = none) and its color image:
    x y z float32 at 0, 4, 8; rgb float32 at 16 whose bytes are b g r 0; point_step 20; unordered (height 1,
    is_dense), the pixels with depth in row-major order."""
    xs, ys = pixel_rays(spec)
    idx = np.flatnonzero(depth_m)                 # the pixels with depth, row-major
    n = len(idx)
    z = depth_m.ravel()[idx]
    v, u = np.divmod(idx, spec.width)
    points = np.empty((n, 5), np.float32)         # x y z pad rgb: one row of 20 bytes per point
    np.multiply(xs[u], z, out=points[:, 0])
    np.multiply(ys[v], z, out=points[:, 1])
    points[:, 2] = z
    words = points.view(np.uint32)
    words[:, 3] = 0
    rgb = color.reshape(-1, 3)[idx].astype(np.uint32)
    words[:, 4] = (rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]    # little endian: b g r 0
    msg = PointCloud2()
    msg.header.frame_id = frame_id
    msg.height, msg.width = 1, n
    msg.fields = POINT_FIELDS
    msg.is_bigendian = False
    msg.point_step = POINT_STEP
    msg.row_step = POINT_STEP * n
    msg.is_dense = True
    data = array.array("B")
    data.frombytes(points.view(np.uint8).reshape(-1).data)
    msg.data = data
    return msg


def _transform(parent: str, child: str, M: pin.SE3, t: float) -> TransformStamped:
    ts = TransformStamped()
    ts.header.frame_id, ts.child_frame_id = parent, child
    stamp(t, ts.header.stamp)
    x, y, z, qx, qy, qz, qw = pin.SE3ToXYZQUAT(M).tolist()
    ts.transform.translation.x, ts.transform.translation.y, ts.transform.translation.z = x, y, z
    r = ts.transform.rotation
    r.x, r.y, r.z, r.w = qx, qy, qz, qw
    return ts


def camera_static_transforms(spec: CameraSpec, parent_frame: str, frame_prefix: str, t: float) -> list:
    """A camera's static TF: parent -> C_link (the scene pose) -> C_color_frame / C_depth_frame (identity) -> their
    optical frames (REP 103), minus the frames the robot's URDF already has (``spec.urdf_frames``: the node
    publishes them with the robot's TF, as robot_state_publisher does beside the real driver): no frame gets two
    publishers. Frame names ``frame_prefix + C...``; stamped ``t`` (s)."""
    base = frame_prefix + spec.name
    link = f"{base}_link"
    out = [_transform(parent_frame, link, spec.pose, t)]
    for kind in ("color", "depth"):
        out.append(_transform(link, f"{base}_{kind}_frame", pin.SE3.Identity(), t))
        out.append(_transform(f"{base}_{kind}_frame", f"{base}_{kind}_optical_frame", BODY_TO_OPTICAL, t))
    urdf = {frame_prefix + f for f in spec.urdf_frames}
    return [ts for ts in out if ts.child_frame_id not in urdf]


class _CameraTopics:
    """One camera's publishers and frame names."""

    def __init__(self, node, spec: CameraSpec, frame_prefix: str):
        self.spec = spec
        ns = f"{spec.name}/{spec.name}"
        base = frame_prefix + spec.name
        self.prefix = frame_prefix
        self.link = f"{base}_link"
        self.color_frame = f"{base}_color_optical_frame"
        # (a URDF camera whose depth optical frame is beside the rendered viewpoint: where it was rendered)
        self.depth_frame = self.color_frame if spec.depth_in_color_frame else f"{base}_depth_optical_frame"
        s = set(spec.streams)
        img = qos_profile_system_default

        def pub(kind, topic, qos=img, when=True):
            return node.create_publisher(kind, f"{ns}/{topic}", qos) if when else None
        self.color = pub(Image, "color/image_raw", when="color" in s)
        self.color_info = pub(CameraInfo, "color/camera_info", when="color" in s)
        self.depth = pub(Image, "depth/image_rect_raw", when="depth" in s)
        self.depth_info = pub(CameraInfo, "depth/camera_info", when="depth" in s)
        self.aligned = pub(Image, "aligned_depth_to_color/image_raw", when="aligned_depth" in s)
        self.aligned_info = pub(CameraInfo, "aligned_depth_to_color/camera_info", when="aligned_depth" in s)
        self.points = pub(PointCloud2, "depth/color/points", POINTS_QOS, when="points" in s)
        self.labels = pub(Image, "segmentation/image_raw", when="segmentation" in s)
        self.label_map = pub(String, "segmentation/labels", LATCHED, when="segmentation" in s)
        self.color_info_msg = camera_info(spec, self.color_frame)
        self.depth_info_msg = camera_info(spec, self.depth_frame)
        self.all = [p for p in (self.color, self.color_info, self.depth, self.depth_info, self.aligned,
                                self.aligned_info, self.points, self.labels) if p is not None]

    def wanted(self) -> bool:
        return any(has_readers(p) for p in self.all)

    def static_transforms(self, parent_frame: str, t: float) -> list:
        return camera_static_transforms(self.spec, parent_frame, self.prefix, t)

    def publish(self, frame) -> None:
        """Every wanted message of one rendered frame (render thread)."""
        t = frame.t
        mm = None
        for pub, msg_fn in (
                (self.color, lambda: image_message(frame.color, "rgb8", self.color_frame)),
                (self.depth, lambda: image_message(mm, "16UC1", self.depth_frame)),
                (self.aligned, lambda: image_message(mm, "16UC1", self.color_frame)),
                (self.labels, lambda: image_message(frame.labels, "16UC1", self.color_frame))):
            if pub is not None and has_readers(pub):
                if mm is None:
                    mm = depth_mm(frame.depth)
                msg = msg_fn()
                stamp(t, msg.header.stamp)
                pub.publish(msg)
        for pub, info in ((self.color_info, self.color_info_msg), (self.depth_info, self.depth_info_msg),
                          (self.aligned_info, self.color_info_msg)):
            if pub is not None and has_readers(pub):
                stamp(t, info.header.stamp)
                pub.publish(info)
        if self.points is not None and has_readers(self.points):
            # the driver's cloud: the depth as published (millimetres), back-projected through K
            published = (depth_mm(frame.depth) if mm is None else mm).astype(np.float32) * np.float32(1e-3)
            msg = point_cloud_message(self.spec, published, frame.color, self.depth_frame)
            stamp(t, msg.header.stamp)
            self.points.publish(msg)


class CameraPublisher:
    """The node's cameras: publishers, static TF, the render thread (cameras/render_thread.py) and the
    stepping-thread hooks.

    ``node``: the SimNode (publishers are created on it; ``node.world``, ``node.prefix``, ``node.link_prefixes``
    name the parent frames). Raises ContactSimError (the render back-end missing, a bad camera) at start-up, after
    the render thread tried to make its GL context."""

    def __init__(self, node, sim, viewer=None):
        self.node = node
        self.sim = sim
        self.viewer = viewer          # the browser view (ViewerProcess): the frusta with their live images
        self.log = node.get_logger()
        specs = list(sim.scene.cameras)
        for spec in specs:
            spec.check_rate(sim.time_step)
        self.topics = {s.name: _CameraTopics(node, s, node.prefix) for s in specs}
        self.renderer = RenderThread(sim.scene, sim.time_step, on_frame=self._on_frame,
                                     on_ready=self._publish_labels, on_error=self._render_error, drop=True)
        self.log.info(f"cameras {', '.join(self.topics)}: {self.renderer.description}")
        self._publish_static(sim.t)

    # ------------------------------------------------------------------------ stepping thread

    def hooks(self) -> list[PublishHook]:
        """A PublishHook per camera, every ``round(1 / (rate dt))`` steps: hands (scene, t, copy of q) over."""
        out = []
        for name, topics in self.topics.items():
            out.append(PublishHook(f"camera {name}", topics.spec.decimation(self.sim.time_step),
                                   lambda sim, name=name: self.request(name, sim)))
        return out

    def request(self, name: str, sim) -> None:
        """Stepping thread: queue camera ``name``'s image of the current state (a copy); never waits for rendering.
        Nothing is rendered for a camera none of whose topics has a reader and no browser watches."""
        if self.topics[name].wanted() or (self.viewer is not None and self.viewer.watched):
            self.renderer.request(name, sim)

    def _on_frame(self, name: str, frame) -> None:
        """Render thread: the frame on the camera's topics, and in the browser view's frustum."""
        self.topics[name].publish(frame)
        if self.viewer is not None:
            self.viewer.publish_camera(name, frame.world_T_optical, frame.color)

    # ------------------------------------------------------------------------ render thread

    def _render_error(self, name: str, t: float, exc: Exception) -> None:
        self.log.error(f"camera {name!r} at t = {t:.6f} s: {exc!r}", throttle_duration_sec=5.0)

    def _publish_labels(self, rig) -> None:
        text = json.dumps(rig.label_map())
        for topics in self.topics.values():
            if topics.label_map is not None:
                topics.label_map.publish(String(data=text))

    def _publish_static(self, t: float) -> None:
        if TFMessage is None:
            return
        node = self.node
        msgs = []
        for topics in self.topics.values():
            parent = topics.spec.parent
            parent_frame = node.world if parent == "world" else node.link_prefixes.get(parent, node.prefix) + parent
            msgs += topics.static_transforms(parent_frame, t)
        if not msgs:            # every camera frame is the URDF's: the node's robot TF has them
            return
        self._tf_static = node.create_publisher(TFMessage, "/tf_static", LATCHED)
        self._tf_static.publish(TFMessage(transforms=msgs))

    def close(self, timeout: float = 2.0) -> None:
        self.renderer.close(timeout)
