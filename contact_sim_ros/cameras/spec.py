"""The scene's ``cameras:`` entries -> validated ``CameraSpec``s (format: docs/cameras.md).

A camera is a frame: ``parent`` (``world``, a robot link, or a free object) and the ``pose`` of the camera's body
frame ``<name>_link`` in it (REP 103 body axes: x forward, y left, z up, as realsense2_description's
``camera_link``). Its images are in the optical frame ``<name>_color_optical_frame`` (REP 103 optical axes: z
forward, x right, y down), rotated rpy (-pi/2, 0, -pi/2) from the body frame. Intrinsics follow ROS CameraInfo
(pixel centres at integer coordinates): ``fx, fy, cx, cy`` (px), or a horizontal field of view ``fov`` (deg) with
square pixels and the principal point at the image centre ((W - 1) / 2, (H - 1) / 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pinocchio as pin

from ..errors import ConfigError, unknown_choice
from ..model.multibody_model import MultibodyModel, model_body_names
from ..yaml_files import parse_pose

STREAMS = ("color", "depth", "aligned_depth", "points", "segmentation")
MAX_SIZE = 8192                    # px: width and height
WORLD = "world"
# body frame (x forward, y left, z up) -> optical frame (z forward, x right, y down): realsense2_description's
# camera_color_frame -> camera_color_optical_frame joint, rpy (-pi/2, 0, -pi/2)
BODY_TO_OPTICAL = pin.SE3(pin.rpy.rpyToMatrix(-np.pi / 2, 0.0, -np.pi / 2), np.zeros(3))

CAMERA_KEYS = ("name", "parent", "pose", "width", "height", "fov", "fx", "fy", "cx", "cy", "near", "far", "rate",
               "streams", "depth_model", "color_noise", "seed")


@dataclass(frozen=True)
class DepthModelSpec:
    """How depth is measured. ``ideal``: exact linear depth (m) wherever a surface lies between near and far.
    ``stereo`` (presets ``d435``, ``d415``): an active-stereo RealSense D4xx-like model, see depth_models.py; its
    parameters (the defaults are the D435's datasheet figures):

    baseline (m), subpixel (px: RMS disparity error), min_z / max_z (m: no depth outside), depth_unit (m: the
    quantisation of the 16-bit output), depth_fov (deg: the depth imager's horizontal field of view; its focal
    length at the camera's width is 0.5 W / tan(depth_fov / 2); None = the camera's fx), focal_px (px: the depth
    imager's focal length, overrides depth_fov), occlusion (bool: no depth where the second imager cannot see the
    point)."""

    kind: str = "ideal"
    baseline: float = 0.050
    subpixel: float = 0.08
    min_z: float = 0.28
    max_z: float = 10.0
    depth_unit: float = 0.001
    focal_px: float | None = None
    occlusion: bool = True
    depth_fov: float | None = None

    def focal(self, spec: "CameraSpec") -> float:
        """The depth imager's focal length (px) at ``spec``'s width: ``focal_px``, else from ``depth_fov``, else
        the camera's fx."""
        if self.focal_px is not None:
            return float(self.focal_px)
        if self.depth_fov is not None:
            return float(0.5 * spec.width / np.tan(np.radians(self.depth_fov) / 2.0))
        return float(spec.fx)


# Intel RealSense D400 series datasheet (rev. 17, 2024): D435/D435i baseline 50 mm, depth FOV 87 x 58 deg, min-Z
# 0.28 m at 1280x720 (0.195 m at 848x480 is the datasheet's lowest), range up to ~10 m; D415 baseline 55 mm, FOV
# 65 x 40 deg, min-Z 0.45 m. The depth imagers' horizontal FOV (87 / 65 deg) sets the depth model's focal length
# (f = 0.5 W / tan(HFOV / 2): 337 px at a D435's 640 px width, where its color imager's 69.4 deg gives 462 px):
# the disparity, and so the noise, is measured by the depth imagers whatever the color camera's fov. Subpixel 0.08 px:
# the "typical" RMS subpixel of the depth RMS error formula
# RMS(mm) = z(mm)^2 * subpixel / (focal(px) * baseline(mm)) of Intel's whitepaper "Tuning depth cameras for best
# performance" (and the datasheet's depth RMS error <= 2 % at 2 m).
DEPTH_PRESETS = {
    "ideal": {"kind": "ideal"},
    "stereo": {"kind": "stereo"},
    "d435": {"kind": "stereo", "baseline": 0.050, "subpixel": 0.08, "min_z": 0.28, "max_z": 10.0, "depth_fov": 87.0},
    "d415": {"kind": "stereo", "baseline": 0.055, "subpixel": 0.08, "min_z": 0.45, "max_z": 10.0, "depth_fov": 65.0},
}
DEPTH_KEYS = ("type", "baseline", "subpixel", "min_z", "max_z", "depth_unit", "focal_px", "depth_fov", "occlusion")


@dataclass(frozen=True)
class CameraSpec:
    """One camera of the scene. Units: m, px, Hz of sim time; ``pose``: ``<name>_link`` in ``parent``."""

    name: str
    parent: str                        # 'world', a robot link or a free object's name
    pose: pin.SE3
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    near: float = 0.05
    far: float = 10.0
    rate: float = 30.0
    streams: tuple = STREAMS
    depth_model: DepthModelSpec = field(default_factory=DepthModelSpec)
    color_noise: float = 0.0          # std of additive Gaussian color noise, 8-bit units
    seed: int = 0
    source: str = "<scene>"           # the scene file (for messages)
    # the camera's own frames (C_link, C_color_frame, ...) that the robot's URDF already has (a vendor description
    # such as realsense2_description's _d435.urdf.xacro): the node publishes them with the robot's TF, so the
    # camera publisher does not publish them again
    urdf_frames: tuple = ()
    # the URDF's depth optical frame is not where the images are rendered from (one viewpoint: its color optical
    # frame; a D435's color imager is 15 mm beside the depth one): depth images and the point cloud are labelled
    # with the color optical frame, where they were rendered, instead of C_depth_optical_frame
    depth_in_color_frame: bool = False

    @property
    def K(self) -> np.ndarray:
        """(3, 3) intrinsic matrix (px)."""
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    @property
    def fov_y(self) -> float:
        """Vertical field of view (rad) of the pinhole: 2 atan(height / (2 fy))."""
        return float(2.0 * np.arctan(self.height / (2.0 * self.fy)))

    @property
    def optical_pose(self) -> pin.SE3:
        """The optical frame in ``parent``."""
        return self.pose * BODY_TO_OPTICAL

    @property
    def where(self) -> str:
        return f"{self.source}: camera {self.name!r}"

    def check_rate(self, time_step: float) -> None:
        """ConfigError (naming the camera and the file) when the camera is faster than the stepping: at most one
        image per step."""
        if self.rate > 1.0 / time_step * (1 + 1e-9):
            raise ConfigError(f"{self.where}: rate {self.rate:g} Hz is above the step rate "
                              f"{1.0 / time_step:g} Hz (time step {time_step:g} s); at most one image per step")

    def decimation(self, time_step: float) -> int:
        """Steps between two images (>= 1): round(1 / (rate * time_step))."""
        return max(1, int(round(1.0 / (self.rate * time_step))))


def _number(value, where: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise ConfigError(f"{where}: {what} must be a finite number, got {value!r}")
    return float(value)


def _size(value, where: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) \
            or not 1 <= value <= MAX_SIZE:
        raise ConfigError(f"{where}: {what} must be an integer from 1 to {MAX_SIZE} px, got {value!r}")
    return int(value)


def parse_depth_model(value, where: str) -> DepthModelSpec:
    """``ideal`` / ``d435`` / ``d415`` / ``stereo``, or a mapping ``{type: <one of those>, <parameter>: value}``."""
    if value is None:
        return DepthModelSpec()
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, dict) or "type" not in value:
        raise ConfigError(f"{where}.depth_model: a preset name ({', '.join(DEPTH_PRESETS)}) or a mapping "
                          f"{{type: <preset>, baseline: m, subpixel: px, ...}}, got {value!r}")
    unknown = set(value) - set(DEPTH_KEYS)
    if unknown:
        raise ConfigError(f"{where}.depth_model: unknown key(s) {sorted(unknown)}; valid keys: {list(DEPTH_KEYS)}")
    kind = value["type"]
    if kind not in DEPTH_PRESETS:
        raise ConfigError(f"{where}.depth_model: " + unknown_choice("depth model", str(kind), DEPTH_PRESETS))
    params = dict(DEPTH_PRESETS[kind])
    for key, v in value.items():
        if key == "type":
            continue
        if key == "occlusion":
            if not isinstance(v, bool):
                raise ConfigError(f"{where}.depth_model.occlusion must be true or false, got {v!r}")
            params[key] = v
            continue
        params[key] = _number(v, f"{where}.depth_model", key)
        if key == "depth_fov" and not 0.0 < params[key] < 180.0:
            raise ConfigError(f"{where}.depth_model: depth_fov (the depth imager's horizontal field of view) must be "
                              f"> 0 and < 180 deg, got {v!r}")
        if params[key] <= 0 and key != "subpixel" or params[key] < 0:
            raise ConfigError(f"{where}.depth_model: {key} must be > 0, got {v!r}")
    spec = DepthModelSpec(**params)
    if spec.kind == "stereo" and spec.min_z >= spec.max_z:
        raise ConfigError(f"{where}.depth_model: min_z ({spec.min_z:g} m) must be below max_z ({spec.max_z:g} m)")
    return spec


def parse_camera(entry, index: int, valid_parents, source: str, where: str = "") -> CameraSpec:
    """One ``cameras:`` entry -> CameraSpec; ConfigError naming the camera (and the file, by the caller).
    ``where``: the entry's name in errors (default ``cameras[<index>]``; a scene's ``sensors:`` entry names its
    own)."""
    where = where or f"cameras[{index}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"].strip():
        raise ConfigError(f"{where}: each camera is a mapping with a 'name' (string), got {entry!r}")
    name = entry["name"]
    if not all(c.isalnum() or c == "_" for c in name) or name[0].isdigit():
        raise ConfigError(f"{where}: camera name {name!r} must be letters, digits and '_' (it names topics and "
                          f"TF frames) and not start with a digit")
    where = f"{where} ({name})"
    unknown = set(entry) - set(CAMERA_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; valid keys: {list(CAMERA_KEYS)}")
    parent = entry.get("parent", WORLD)
    if parent != WORLD and parent not in valid_parents:
        raise ConfigError(f"{where}: unknown parent frame {parent!r}; valid: 'world', a robot link or an object: "
                          f"{', '.join(sorted(valid_parents))}")
    pose = parse_pose(entry.get("pose"), f"{where}.pose")
    for key in ("width", "height"):
        if key not in entry:
            raise ConfigError(f"{where}: missing key {key!r} (px)")
    width = _size(entry["width"], where, "width")
    height = _size(entry["height"], where, "height")
    given = [k for k in ("fx", "fy", "cx", "cy") if k in entry]
    if "fov" in entry:
        if given:
            raise ConfigError(f"{where}: give either 'fov' (horizontal, deg) or 'fx', 'fy', 'cx', 'cy' (px), "
                              f"not both")
        fov = _number(entry["fov"], where, "fov")
        if not 0.0 < fov < 180.0:
            raise ConfigError(f"{where}: fov (horizontal field of view) must be > 0 and < 180 deg, got {fov:g}")
        fx = fy = 0.5 * width / np.tan(np.radians(fov) / 2.0)
        cx, cy = (width - 1) / 2.0, (height - 1) / 2.0
    elif given:
        if len(given) != 4:
            raise ConfigError(f"{where}: intrinsics need all of fx, fy, cx, cy (px); missing "
                              f"{sorted({'fx', 'fy', 'cx', 'cy'} - set(given))}")
        fx, fy, cx, cy = (_number(entry[k], where, k) for k in ("fx", "fy", "cx", "cy"))
        if fx <= 0 or fy <= 0:
            raise ConfigError(f"{where}: fx and fy must be > 0 px, got {fx:g}, {fy:g}")
        fov = np.degrees(2.0 * np.arctan(0.5 * width / fx))
    else:
        raise ConfigError(f"{where}: intrinsics missing: give 'fov' (horizontal, deg) or 'fx', 'fy', 'cx', 'cy' (px)")
    near = _number(entry.get("near", 0.05), where, "near")
    far = _number(entry.get("far", 10.0), where, "far")
    if near <= 0:
        raise ConfigError(f"{where}: near must be > 0 m, got {near:g}")
    if near >= far:
        raise ConfigError(f"{where}: near ({near:g} m) must be below far ({far:g} m)")
    rate = _number(entry.get("rate", 30.0), where, "rate")
    if rate <= 0:
        raise ConfigError(f"{where}: rate must be > 0 Hz (of sim time), got {rate:g}")
    streams = entry.get("streams", list(STREAMS))
    if not isinstance(streams, (list, tuple)) or not streams:
        raise ConfigError(f"{where}: streams is a non-empty list of {list(STREAMS)}, got {streams!r}")
    for s in streams:
        if s not in STREAMS:
            raise ConfigError(f"{where}: " + unknown_choice("stream", str(s), STREAMS))
    color_noise = _number(entry.get("color_noise", 0.0), where, "color_noise")
    if color_noise < 0:
        raise ConfigError(f"{where}: color_noise must be >= 0 (8-bit units), got {color_noise:g}")
    seed = entry.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"{where}: seed must be an integer >= 0, got {seed!r}")
    return CameraSpec(name, parent, pose, width, height, float(fx), float(fy), float(cx), float(cy), near, far,
                      rate, tuple(dict.fromkeys(streams)), parse_depth_model(entry.get("depth_model"), where),
                      color_noise, seed, source)


# a camera C's frames as realsense2_description names them (and the camera publisher publishes them): the body
# frame C_link, the color and depth frames (x forward) and their optical frames (z forward)
CAMERA_FRAMES = ("{}_link", "{}_color_frame", "{}_depth_frame", "{}_color_optical_frame", "{}_depth_optical_frame")


def _depth_frame_offset(pin_model, name: str) -> bool:
    """Whether the URDF's ``<name>_depth_optical_frame`` differs (by more than 1 um / 1 urad) from its
    ``<name>_color_optical_frame`` (both fixed to the same joint, as a vendor camera's frames are)."""
    ids = [pin_model.getFrameId(f"{name}_{k}_optical_frame", pin.FrameType.BODY) for k in ("color", "depth")]
    if any(i >= len(pin_model.frames) for i in ids):
        return False
    c, d = (pin_model.frames[i] for i in ids)
    if c.parentJoint != d.parentJoint:
        return True
    rel = c.placement.actInv(d.placement)
    return bool(np.linalg.norm(rel.translation) > 1e-6 or np.linalg.norm(pin.log3(rel.rotation)) > 1e-6)


def urdf_camera(entry, index: int, links, where: str = "") -> tuple[dict, pin.SE3, tuple] | None:
    """A ``cameras:`` entry whose camera the robot's URDF already mounts (the model has a link ``<name>_link``,
    as realsense2_description's ``sensor_d435`` macro makes; with ``use_nominal_extrinsics`` also the color and
    depth frames and their optical frames): (the entry with its parent set to the URDF frame images are rendered
    from, that frame -> ``<name>_link``-like body frame pose, the camera frames the URDF has); None for a camera
    the scene mounts. The image's optical frame is the URDF's ``<name>_color_optical_frame`` where it has one,
    else ``<name>_color_frame`` or ``<name>_link`` turned by REP 103's (-pi/2, 0, -pi/2). ConfigError when the
    entry also gives ``parent`` or ``pose`` (the URDF fixes them)."""
    name = entry.get("name") if isinstance(entry, dict) else None
    if not isinstance(name, str) or f"{name}_link" not in links:
        return None
    given = [k for k in ("parent", "pose") if k in entry]
    if given:
        raise ConfigError(f"{where or f'cameras[{index}]'} ({name}): the robot's URDF already mounts this camera (link "
                          f"'{name}_link'): remove {' and '.join(repr(k) for k in given)} (its frames come from "
                          f"the URDF)")
    frames = tuple(f.format(name) for f in CAMERA_FRAMES if f.format(name) in links)
    if f"{name}_color_optical_frame" in links:
        parent, pose = f"{name}_color_optical_frame", BODY_TO_OPTICAL.inverse()
    else:
        parent = f"{name}_color_frame" if f"{name}_color_frame" in links else f"{name}_link"
        pose = pin.SE3.Identity()
    return {**entry, "parent": parent}, pose, frames


def parse_camera_entry(entry, index: int, model: MultibodyModel, source: str, parents=None,
                       where: str = "") -> CameraSpec:
    """One camera entry (a scene's ``cameras:`` entry, or a ``sensors:`` entry of type camera without its
    ``type``) -> CameraSpec: a camera named like a camera of the robot's URDF (link ``<name>_link``) is that camera
    (:func:`urdf_camera`). ``parents``: the model's body names (computed if None); ``where``: the entry's name in
    errors (default ``cameras[<index>]``)."""
    parents = set(model_body_names(model)) if parents is None else parents
    mounted = urdf_camera(entry, index, parents, where)
    if mounted is None:
        return parse_camera(entry, index, parents, source, where)
    entry, pose, frames = mounted
    offset = entry["parent"].endswith("_color_optical_frame") and \
        f"{entry['name']}_depth_optical_frame" in frames and _depth_frame_offset(model.pin_model, entry["name"])
    return replace(parse_camera(entry, index, parents, source, where), pose=pose, urdf_frames=frames,
                   depth_in_color_frame=offset)


def parse_cameras(entries, model: MultibodyModel, source: str) -> list[CameraSpec]:
    """The scene's ``cameras:`` list -> CameraSpecs; ConfigError naming the camera (the scene loader prefixes
    the file). A camera named like a camera of the robot's URDF (link ``<name>_link``) is that camera
    (:func:`urdf_camera`)."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ConfigError(f"cameras: a list of camera entries ({{name, parent, pose, width, height, fov, ...}}), "
                          f"got {entries!r}")
    parents = set(model_body_names(model))
    cameras = [parse_camera_entry(e, i, model, source, parents) for i, e in enumerate(entries)]
    names = [c.name for c in cameras]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"cameras: names must be unique; repeated: {dupes}")
    return cameras


def pixel_rays(spec: CameraSpec) -> tuple[np.ndarray, np.ndarray]:
    """((W,), (H,)) float32: (u - cx) / fx per column and (v - cy) / fy per row (x = z * those, y likewise)."""
    key = (spec.width, spec.height, spec.fx, spec.fy, spec.cx, spec.cy)
    rays = _RAYS.get(key)
    if rays is None:
        rays = _RAYS[key] = ((np.arange(spec.width) - spec.cx) / spec.fx).astype(np.float32), \
            ((np.arange(spec.height) - spec.cy) / spec.fy).astype(np.float32)
    return rays


_RAYS: dict = {}     # (W, H, fx, fy, cx, cy) -> pixel_rays
