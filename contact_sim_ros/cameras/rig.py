"""The cameras of a scene as an API: render a camera from a state (q, t) or a Simulator to numpy arrays.

    rig = CameraRig(sim.scene)                 # in the thread that will render (it owns the GL context)
    frame = rig.render_simulator(sim, "wrist_camera")
    frame.color, frame.depth, frame.labels     # (H, W, 3) uint8, (H, W) float32 m, (H, W) uint16
    points, colors = frame.point_cloud()       # (N, 3) m in the optical frame, (N, 3) uint8
    world = frame.points_world()               # (N, 3) m in the world

Rendering reads the state and never steps it; the ROS node renders in a thread of its own from a copy of the
state (contact_sim_ros/ros/camera_publisher.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..errors import ConfigError, ModelError, unknown_choice
from .depth_models import measured_depth, noisy_color
from .renderer import Renderer
from .spec import CameraSpec, pixel_rays
from .visual_scene import VisualScene, build_visual_scene


@dataclass
class CameraFrame:
    """One camera's images of the state at sim time ``t`` (s).

    color (H, W, 3) uint8 RGB (with the camera's color noise); depth (H, W) float32 m, optical z, as the camera's
    depth model measures it (0 = no depth); exact_depth: the renderer's exact z (0 = nothing between near and far);
    labels (H, W) uint16 (``label_names``: label -> entity); K (3, 3) px; world_T_optical (4, 4)."""

    spec: CameraSpec
    t: float
    color: np.ndarray
    depth: np.ndarray
    exact_depth: np.ndarray
    labels: np.ndarray
    world_T_optical: np.ndarray
    label_names: dict

    @property
    def K(self) -> np.ndarray:
        return self.spec.K

    def point_cloud(self, depth: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Points (N, 3) m in the optical frame of every pixel with depth, row-major order, and their colors
        (N, 3) uint8: x = (u - cx) z / fx, y = (v - cy) z / fy."""
        return depth_to_points(self.spec, self.depth if depth is None else depth, self.color)

    def points_world(self, depth: np.ndarray | None = None) -> np.ndarray:
        """The point cloud (N, 3) m in the world frame."""
        p, _ = self.point_cloud(depth)
        T = self.world_T_optical
        return p @ T[:3, :3].T + T[:3, 3]


def depth_to_points(spec: CameraSpec, depth: np.ndarray, color: np.ndarray | None = None):
    """Back-projection of a depth image (m, 0 = none) through ``spec``'s K: (N, 3) float32 optical-frame points
    and (N, 3) uint8 colors of the pixels with depth, row-major (None without ``color``)."""
    xs, ys = pixel_rays(spec)
    mask = depth > 0
    z = depth[mask].astype(np.float32)
    v, u = np.nonzero(mask)
    pts = np.empty((len(z), 3), np.float32)
    np.multiply(xs[u], z, out=pts[:, 0])
    np.multiply(ys[v], z, out=pts[:, 1])
    pts[:, 2] = z
    return pts, (color[mask] if color is not None else None)


@dataclass
class RigScene:
    """What a CameraRig needs of a ``sim.scene.Scene``, picklable (the node's camera process gets it): the scene's
    source (for error messages), cameras, Pinocchio model, free bodies and visual geometry."""

    source: str
    cameras: list
    pin_model: object
    free_bodies: list
    visual: VisualScene

    @classmethod
    def of(cls, scene, visual: VisualScene | None = None) -> RigScene:
        """``visual``: the scene's visual geometry if already built."""
        return cls(str(scene.source), list(scene.cameras), scene.model.pin_model, list(scene.model.free_bodies),
                   visual or build_visual_scene(scene))

    # Pinocchio 4.1 pickles a model with mimic joints (URDF <mimic>: the Franka's second finger) wrongly: its
    # serialization of JointModelMimic leaves the joint's own sizes (nq, nvExtended) unset (nvExtended -1 after
    # loading, originally 1), and the first kinematics on the loaded model crashed the camera process (SIGSEGV,
    # issue 44). So the mimic joints cross with what rebuilds them and are made anew after loading.

    def __getstate__(self):
        return {**self.__dict__, "_mimic_joints": mimic_joint_recipes(self.pin_model)}

    def __setstate__(self, state):
        recipes = state.pop("_mimic_joints", ())
        self.__dict__.update(state)
        rebuild_mimic_joints(self.pin_model, recipes)


_ALIGNED = {("revolute", 0): pin.JointModelRX, ("revolute", 1): pin.JointModelRY, ("revolute", 2): pin.JointModelRZ,
            ("prismatic", 0): pin.JointModelPX, ("prismatic", 1): pin.JointModelPY,
            ("prismatic", 2): pin.JointModelPZ, ("continuous", 0): pin.JointModelRUBX,
            ("continuous", 1): pin.JointModelRUBY, ("continuous", 2): pin.JointModelRUBZ}
_UNALIGNED = {"revolute": pin.JointModelRevoluteUnaligned, "prismatic": pin.JointModelPrismaticUnaligned}


def mimic_joint_recipes(pin_model) -> list[tuple]:
    """Per mimic joint of ``pin_model``: (joint id, its vExtended index, primary joint id, kind 'revolute' /
    'prismatic' / 'continuous', unit axis (3,) in the joint frame, scaling, offset (rad or m)): what
    ``rebuild_mimic_joints`` needs. The kind and axis come from the joint's motion subspace S = scaling [v; w]
    (URDF mimic joints have one degree of freedom). ModelError for a mimic of a continuous joint on an axis other
    than +x, +y or +z (Pinocchio's Python interface cannot make that joint)."""
    ids = list(pin_model.mimicking_joints)
    if not ids:
        return []
    data = pin_model.createData()
    pin.forwardKinematics(pin_model, data, pin.neutral(pin_model))
    recipes = []
    for joint_id, primary_id in zip(ids, pin_model.mimicked_joints):
        mimic = pin_model.joints[joint_id].extract()
        scaling, offset = float(mimic.scaling), float(mimic.offset)
        S = np.asarray(data.joints[joint_id].S, dtype=float).reshape(6) / scaling
        angular = bool(np.any(S[3:] != 0.0))
        axis = S[3:] if angular else S[:3]
        kind = ("continuous" if pin_model.joints[primary_id].nq == 2 else "revolute") if angular else "prismatic"
        if kind == "continuous" and not any(np.array_equal(axis, np.eye(3)[k]) for k in range(3)):
            raise ModelError(f"mimic joint '{pin_model.names[joint_id]}' of the continuous joint "
                             f"'{pin_model.names[primary_id]}' on the axis {axis.tolist()}: the camera process cannot "
                             f"receive it (only +x, +y or +z)")
        recipes.append((int(joint_id), int(mimic.idx_vExtended), int(primary_id), kind, axis, scaling, offset))
    return recipes


def rebuild_mimic_joints(pin_model, recipes) -> None:
    """Each mimic joint of ``recipes`` (``mimic_joint_recipes``) made anew in ``pin_model`` (in place): the joint
    of its kind and axis mimicking its primary joint with its scaling and offset, at its own indices."""
    for joint_id, idx_v_extended, primary_id, kind, axis, scaling, offset in recipes:
        aligned = [k for k in range(3) if np.array_equal(axis, np.eye(3)[k])]
        joint = _ALIGNED[kind, aligned[0]]() if aligned else _UNALIGNED[kind](np.asarray(axis, dtype=float))
        primary = pin_model.joints[primary_id]
        joint.setIndexes(primary.id, primary.idx_q, primary.idx_v, primary.idx_vExtended)   # what it mimics
        mimic = pin.JointModelMimic(joint, scaling, offset)
        mimic.setIndexes(joint_id, 0, 0, idx_v_extended)
        pin_model.joints[joint_id] = pin.JointModel(mimic)


class CameraRig:
    """The cameras of ``scene`` (a sim.scene.Scene, or its RigScene) and one renderer. Make it in the thread that
    renders (the GL context is that thread's). ``time_step`` (s): when given, each camera's rate is checked against
    the step rate (ConfigError naming the camera and the file)."""

    def __init__(self, scene, time_step: float | None = None, visual: VisualScene | None = None):
        parts = scene if isinstance(scene, RigScene) else RigScene.of(scene, visual)
        self.scene = scene
        self.source = parts.source
        self.cameras: dict[str, CameraSpec] = {c.name: c for c in scene.cameras}
        if time_step is not None:
            for c in self.cameras.values():
                c.check_rate(time_step)
        self.visual = parts.visual
        self.renderer = Renderer(self.visual, parts.pin_model)
        self.renderer.set_free_bodies(parts.free_bodies)
        self.label_names = self.visual.label_names()

    def camera(self, name: str) -> CameraSpec:
        try:
            return self.cameras[name]
        except KeyError:
            raise ConfigError(f"{self.source}: " + unknown_choice("camera", name, self.cameras)) from None

    def render(self, name: str, q: np.ndarray, t: float = 0.0) -> CameraFrame:
        """Camera ``name``'s images of the configuration ``q`` at sim time ``t`` (s; seeds the noise)."""
        spec = self.camera(name)
        images, T = self.renderer.render_q(spec, np.asarray(q, dtype=float))
        depth = measured_depth(spec, images.depth, t)
        color = noisy_color(spec, images.color, t)
        return CameraFrame(spec, float(t), color, depth, images.depth, images.labels, T, self.label_names)

    def render_simulator(self, sim, name: str) -> CameraFrame:
        """Camera ``name``'s images of a Simulator's current state (read, not changed)."""
        return self.render(name, sim.q.copy(), sim.t)

    def camera_pose(self, name: str, q: np.ndarray) -> np.ndarray:
        """(4, 4) world pose of camera ``name``'s optical frame at configuration ``q``."""
        return self.renderer.camera_pose(self.camera(name), self.renderer.frame_poses(np.asarray(q, float)))

    def label_map(self) -> dict:
        """Segmentation label (as a string) -> {name, kind, robot} of the entity it marks; "0": nothing."""
        return {"0": {"name": "", "kind": "none", "robot": ""},
                **{str(e.label): {"name": e.name, "kind": e.kind, "robot": e.robot} for e in self.visual.labels}}

    def release(self) -> None:
        self.renderer.release()
        self.renderer.gl.release()
