"""Perception in the loop: locate an object from one depth image (docs/cameras.md "Perception in the loop").

What a simple grasp pipeline does with a RealSense on the wrist, on a :class:`~.rig.CameraFrame`:

1. back-project the measured depth (the camera's depth model: noise, quantisation, min-Z, stereo shadow) to
   world points through K and the camera's pose (as tf2 does with the driver's point cloud);
2. segment the object's points, either
   * ``height``: points higher than ``min_height`` above the support plane ``support_z`` (m), minus the robot's
     own pixels (a robot self-filter, as robot_self_filter does from the URDF: here the pixels labelled as robot
     links), within ``search_radius`` (m, horizontal) of where the object is expected; or
   * ``labels``: the pixels the segmentation image labels as the object (a perfect instance segmentation);
3. estimate an upright cylinder's axis and top: the top surface is the points within ``top_band`` (m) of the
   highest ones (the 99th percentile of height, robust to noise); the axis (x, y) is their centroid, the top
   height their median.

Pure numpy, no rendering: the caller renders (the controller, through its link, at the moment it perceives), or
receives the image from the camera's topics (:class:`DepthImage`: over ROS, clients/robot_link.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, unknown_choice
from .spec import CameraSpec, pixel_rays

SEGMENTATIONS = ("height", "labels")


class PerceptionError(RuntimeError):
    """The image holds no usable points of the object (nothing segmented, or too few top-surface points)."""


@dataclass
class CylinderEstimate:
    """An upright cylinder located in a depth image: ``axis_xy`` (m, world), ``top_z`` (m, world height of its
    top surface), ``points`` (segmented object points), ``top_points`` (of them on the top surface)."""

    axis_xy: np.ndarray
    top_z: float
    points: int
    top_points: int


@dataclass
class DepthImage:
    """A depth image as a perception client has it from realsense2_camera's topics and TF (what segment_object
    reads of a rendered :class:`~.rig.CameraFrame`): ``spec`` (the camera's name and the intrinsics of its
    camera_info), ``t`` (s, the image stamp), ``depth`` (H, W) float32 m (the driver's 16UC1 millimetres / 1000,
    0 = no depth), ``labels`` (H, W) uint16 segmentation labels (zeros without the segmentation stream),
    ``world_T_optical`` (4, 4) the image's optical frame in the world (TF at the stamp), ``label_names``
    (label -> entity name)."""

    spec: CameraSpec
    t: float
    depth: np.ndarray
    labels: np.ndarray
    world_T_optical: np.ndarray
    label_names: dict

    def points_world(self) -> np.ndarray:
        """(N, 3) float32 m in the world: every pixel with depth, row-major (x = (u - cx) z / fx, y likewise)."""
        xs, ys = pixel_rays(self.spec)
        v, u = np.nonzero(self.depth > 0)
        z = self.depth[v, u].astype(np.float32)
        optical = np.stack((xs[u] * z, ys[v] * z, z), axis=1)
        T = self.world_T_optical
        return (optical @ T[:3, :3].T + T[:3, 3]).astype(np.float32)


def segment_object(frame, *, segmentation: str = "height", object_name: str = "", robot_labels=(),
                   support_z: float = 0.0, min_height: float = 0.02, near_xy=None,
                   search_radius: float | None = None) -> np.ndarray:
    """The object's points (N, 3) m in the world from ``frame``'s measured depth (see the module docstring).

    ``robot_labels``: labels of the robot's links (the self-filter of ``height``); ``object_name``: the entity
    whose pixels ``labels`` keeps; ``near_xy`` and ``search_radius`` (m): keep points within that horizontal
    distance of ``near_xy`` (``height`` only; None: everywhere)."""
    if segmentation not in SEGMENTATIONS:
        raise ConfigError(unknown_choice("segmentation", segmentation, SEGMENTATIONS))
    has_depth = frame.depth > 0
    labels = frame.labels[has_depth]                  # row-major, as the point cloud's order
    points = frame.points_world()
    if segmentation == "labels":
        wanted = [int(k) for k, name in frame.label_names.items() if name == object_name]
        if not wanted:
            raise ConfigError(f"perception: no entity {object_name!r} in camera {frame.spec.name!r}'s labels "
                              f"({', '.join(sorted(n for n in frame.label_names.values() if n))})")
        return points[np.isin(labels, wanted)]
    keep = points[:, 2] > support_z + min_height
    if len(robot_labels):
        keep &= ~np.isin(labels, np.asarray(list(robot_labels), dtype=labels.dtype))
    if near_xy is not None and search_radius is not None:
        d = points[:, :2] - np.asarray(near_xy, dtype=np.float32)[None, :]
        keep &= np.einsum("ij,ij->i", d, d) <= search_radius ** 2
    return points[keep]


def locate_upright_cylinder(points: np.ndarray, *, top_band: float = 0.004, min_points: int = 30) -> CylinderEstimate:
    """Axis (x, y) and top height (m) of an upright cylinder from its points (N, 3) m in the world: the centroid
    and median height of the points within ``top_band`` m of the top (the 99th percentile of height). The band
    covers the D435's noise and 1 mm steps at ~0.4 m; a wider one takes in the top of the side wall the tilted
    camera sees, and pulls the centroid toward the camera (measured: 1.1 mm with 10 mm, 0.6 mm with 4 mm).
    PerceptionError when fewer than ``min_points`` points are on the top surface."""
    if len(points) < min_points:
        raise PerceptionError(f"{len(points)} object points in the depth image (need {min_points})")
    z = points[:, 2]
    top = points[z >= np.percentile(z, 99.0) - top_band]
    if len(top) < min_points:
        raise PerceptionError(f"only {len(top)} points on the top surface (need {min_points})")
    return CylinderEstimate(top[:, :2].astype(float).mean(axis=0), float(np.median(top[:, 2])), len(points), len(top))
