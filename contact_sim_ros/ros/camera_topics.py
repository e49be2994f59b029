"""The messages and topics of one simulated RGB-D camera as realsense2_camera publishes them (docs/cameras.md):
CameraInfo, Image (rgb8, 16UC1), the driver's PointCloud2 layout, the static TF of its frames, and
``CameraTopics``, one camera's publishers on a node. Used by the node's camera process (ros/camera_process.py)
and, when the node records a bag, by its render thread (ros/camera_publisher.py)."""

from __future__ import annotations

import array
import json
import time

import numpy as np
import pinocchio as pin
from geometry_msgs.msg import TransformStamped
from rclpy.duration import Duration
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_system_default
from sensor_msgs.msg import CameraInfo, Image, PointCloud2, PointField
from std_msgs.msg import String

from ..cameras.depth_models import depth_mm
from ..cameras.spec import BODY_TO_OPTICAL, CameraSpec, pixel_rays
from .state_messages import has_readers, stamp

# QoS as realsense2_camera's defaults (IntelRealSense/realsense-ros, branch ros2-development, realsense2_camera/):
# images "SYSTEM_DEFAULT" (include/constants.h:80 IMAGE_QOS, the default of the <stream>_qos parameters:
# src/profile_manager.cpp:298), camera_info "DEFAULT" (constants.h:81 DEFAULT_QOS, <stream>_info_qos:
# profile_manager.cpp:299), the point cloud "DEFAULT" (pointcloud.pointcloud_qos: src/named_filter.cpp:99); the
# strings map to rmw_qos_profile_system_default / rmw_qos_profile_default (src/ros_utils.cpp:112-128).
# rmw_qos_profile_default: reliable, volatile, keep last 10.
DEFAULT_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE,
                         history=HistoryPolicy.KEEP_LAST)
IMAGE_QOS = qos_profile_system_default
# SYSTEM_DEFAULT on Fast DDS is reliable with a history of ONE sample: a 0.6-0.9 MB image goes out in ~10-15
# fragments, and when the next image is published before a slow reader has acknowledged every fragment of the
# previous one, that one is gone (measured under two CPU hogs: 37-40 of 45 images arrived, every camera_info and
# point cloud - keep last 10 - did). So before a camera's next images the publisher waits (at most ACK_WAIT_S s
# of wall time per frame) until every reliable reader has acknowledged the previous ones (rclpy
# Publisher.wait_for_all_acked; best-effort readers do not acknowledge: no wait for them). After a wait that ran out
# (a reader that stopped reading without leaving, e.g. a killed process, until DDS drops it: ~20 s) it only checks,
# without waiting, until every reader has caught up: a killed reader cost 0.5 s per frame, the simulation ran at
# real-time factor 0.1-0.2 for 20 s.
ACK_WAIT_S = 0.5
INFO_QOS = DEFAULT_QOS
POINTS_QOS = DEFAULT_QOS
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


class CameraTopics:
    """One camera's publishers and frame names."""

    def __init__(self, node, spec: CameraSpec, frame_prefix: str):
        self.spec = spec
        self.ack_timeouts = 0          # waits for acknowledgements that ran out (then: no waiting until caught up)
        self._ack_backoff = False
        ns = f"{spec.name}/{spec.name}"
        base = frame_prefix + spec.name
        self.prefix = frame_prefix
        self.link = f"{base}_link"
        self.color_frame = f"{base}_color_optical_frame"
        # (a URDF camera whose depth optical frame is beside the rendered viewpoint: where it was rendered)
        self.depth_frame = self.color_frame if spec.depth_in_color_frame else f"{base}_depth_optical_frame"
        s = set(spec.streams)
        img = IMAGE_QOS

        def pub(kind, topic, qos=img, when=True):
            return node.create_publisher(kind, f"{ns}/{topic}", qos) if when else None
        self.color = pub(Image, "color/image_raw", when="color" in s)
        self.color_info = pub(CameraInfo, "color/camera_info", INFO_QOS, when="color" in s)
        self.depth = pub(Image, "depth/image_rect_raw", when="depth" in s)
        self.depth_info = pub(CameraInfo, "depth/camera_info", INFO_QOS, when="depth" in s)
        self.aligned = pub(Image, "aligned_depth_to_color/image_raw", when="aligned_depth" in s)
        self.aligned_info = pub(CameraInfo, "aligned_depth_to_color/camera_info", INFO_QOS,
                                when="aligned_depth" in s)
        self.points = pub(PointCloud2, "depth/color/points", POINTS_QOS, when="points" in s)
        self.labels = pub(Image, "segmentation/image_raw", when="segmentation" in s)
        self.label_map = pub(String, "segmentation/labels", LATCHED, when="segmentation" in s)
        self.color_info_msg = camera_info(spec, self.color_frame)
        self.depth_info_msg = camera_info(spec, self.depth_frame)
        self.all = [p for p in (self.color, self.color_info, self.depth, self.depth_info, self.aligned,
                                self.aligned_info, self.points, self.labels) if p is not None]

    def publish_label_map(self, label_map: dict) -> None:
        """The segmentation label map (CameraRig.label_map), latched, if this camera has the stream."""
        if self.label_map is not None:
            self.label_map.publish(String(data=json.dumps(label_map)))

    def wanted(self) -> bool:
        return any(has_readers(p) for p in self.all)

    def static_transforms(self, parent_frame: str, t: float) -> list:
        return camera_static_transforms(self.spec, parent_frame, self.prefix, t)

    def wait_for_acks(self, timeout_s: float = ACK_WAIT_S) -> bool:
        """Wait (at most ``timeout_s`` s in all) until every reliable reader has acknowledged the images published
        so far (their writers keep one sample: SYSTEM_DEFAULT); False when the time ran out."""
        deadline = time.monotonic() + timeout_s
        for pub in (self.color, self.depth, self.aligned, self.labels):
            if pub is None:
                continue
            remaining = deadline - time.monotonic()
            if not pub.wait_for_all_acked(Duration(nanoseconds=max(0, int(remaining * 1e9)))):
                return False
        return True

    def publish(self, frame) -> None:
        """Every wanted message of one rendered frame (render thread), once the previous images are acknowledged
        (``wait_for_acks``)."""
        t = frame.t
        mm = None
        if self._ack_backoff:
            self._ack_backoff = not self.wait_for_acks(0.0)
        elif not self.wait_for_acks():
            self.ack_timeouts += 1
            self._ack_backoff = True
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


