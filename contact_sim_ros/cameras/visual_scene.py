"""Every robot link's, object's and environment entry's VISUAL geometry as triangle meshes on frames of the
scene's Pinocchio model, each with a color and a segmentation label.

The physics model (model/loader.py) keeps collision geometry only; the visuals are read here from the same
URDFs (the robots' prefixed as in model/composition.py) with Pinocchio's URDF parser (GeometryType.VISUAL:
primitives, meshes through assimp, material colors as ``meshColor``). Primitives are tessellated with trimesh;
a mesh keeps its triangles. Scene shapes (``shape:`` objects and environment entries) use their shape and a
default color. A halfspace becomes a square of ``HALFSPACE_SIZE`` on its plane. A mesh object (``mesh:``) is drawn
as its mesh file (not its convex collision pieces), or as its ``visual:`` mesh when given (another file, e.g. a
detailed textured scan over a coarse collision mesh), with the file's colours: one draw per colour (face or vertex
colours, material colours, textures sampled at the vertices; the renderer shades one colour per draw).

Labels (uint16): 0 = nothing; then one per entity in order: every robot link that has a visual (by its model
name), every free object, every environment entry. ``VisualScene.labels`` names them.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import coal
import numpy as np
import pinocchio as pin
import trimesh

from ..errors import ModelError
from ..model.loader import resolve_urdf_path, urdf_dir
from ..model.multibody_model import MultibodyModel
from ..model.robot_description import default_package_dirs, prefix_urdf_xml

HALFSPACE_SIZE = 200.0          # m: side of the square drawn for a halfspace
SPHERE_SUBDIVISIONS = 3         # icosphere: 1280 triangles
CYLINDER_SECTIONS = 64          # chord error r * (1 - cos(pi / 64)) = 1.2e-3 r
OBJECT_COLOR = (0.85, 0.45, 0.2, 1.0)
ENVIRONMENT_COLOR = (0.55, 0.55, 0.5, 1.0)
ROBOT_COLOR = (0.8, 0.8, 0.8, 1.0)


@dataclass(frozen=True)
class Entity:
    """What a segmentation label names: kind 'link' (of ``robot``), 'object' or 'environment'."""

    label: int
    name: str
    kind: str
    robot: str = ""


@dataclass
class VisualMesh:
    """Triangles (float32 vertices (n, 3) m in the frame ``frame_id`` of the scene's Pinocchio model, placed by
    ``placement`` in it; int32 faces (m, 3), counter-clockwise seen from outside when ``closed``). ``frame_id``
    -1: static, ``placement`` is its world pose."""

    name: str
    vertices: np.ndarray
    faces: np.ndarray
    frame_id: int
    placement: pin.SE3
    color: tuple
    label: int
    closed: bool


@dataclass
class VisualScene:
    meshes: list
    labels: list                     # Entity per label 1..N (index label - 1)

    @property
    def triangles(self) -> int:
        return int(sum(len(m.faces) for m in self.meshes))

    def label_names(self) -> dict:
        """label -> entity name (0: '' = nothing)."""
        return {0: "", **{e.label: e.name for e in self.labels}}


def shape_mesh(geometry, where: str) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """A coal shape -> (vertices, faces, closed) in the shape's own frame; None for a halfspace (the caller draws
    a square). ModelError for an unsupported shape."""
    kind = type(geometry).__name__
    if kind == "Box":
        mesh = trimesh.creation.box(extents=2.0 * np.asarray(geometry.halfSide))
    elif kind == "Sphere":
        mesh = trimesh.creation.icosphere(subdivisions=SPHERE_SUBDIVISIONS, radius=float(geometry.radius))
    elif kind == "Cylinder":
        mesh = trimesh.creation.cylinder(radius=float(geometry.radius), height=2.0 * float(geometry.halfLength),
                                         sections=CYLINDER_SECTIONS)
    elif kind == "Capsule":
        mesh = trimesh.creation.capsule(height=2.0 * float(geometry.halfLength), radius=float(geometry.radius),
                                        count=[CYLINDER_SECTIONS, CYLINDER_SECTIONS // 2])
    elif kind == "Cone":
        mesh = trimesh.creation.cone(radius=float(geometry.radius), height=2.0 * float(geometry.halfLength),
                                     sections=CYLINDER_SECTIONS)
        mesh.apply_translation([0.0, 0.0, -float(geometry.halfLength)])   # coal: centred on its axis
    elif kind == "Halfspace":
        return None
    elif isinstance(geometry, coal.BVHModelBase):
        v = np.asarray(geometry.vertices(), dtype=float).reshape(-1, 3)
        f = np.array([[t[0], t[1], t[2]] for t in (geometry.tri_indices(i) for i in range(geometry.num_tris))],
                     dtype=np.int64).reshape(-1, 3)
        mesh = trimesh.Trimesh(v, f, process=False)
        return (v.astype(np.float32), f.astype(np.int32),
                bool(mesh.is_watertight and mesh.is_winding_consistent and mesh.volume > 0))
    elif isinstance(geometry, coal.ConvexBase):
        mesh = trimesh.convex.convex_hull(np.asarray(geometry.points(), dtype=float).reshape(-1, 3))
    else:
        raise ModelError(f"{where}: visual geometry of type {kind} is not supported by the camera renderer")
    return mesh.vertices.astype(np.float32), mesh.faces.astype(np.int32), True


MAX_COLORS = 64                 # distinct colours of a visual mesh before they are quantised to 3 bits per channel


def _face_colors(geom) -> np.ndarray:
    """(m, 4) RGBA 0..1 per face: the face / vertex colours, a texture sampled at the vertices (averaged per
    face), a material's colour (an OBJ's ``Kd`` without UVs), else ``OBJECT_COLOR``."""
    visual = geom.visual
    n = len(geom.faces)
    if visual.kind in ("face", "vertex"):
        return np.asarray(visual.face_colors, float) / 255.0
    material = getattr(visual, "material", None)
    if getattr(visual, "uv", None) is not None and material is not None:
        vc = np.asarray(visual.to_color().vertex_colors, float)          # the texture at each vertex
        if vc.shape == (len(geom.vertices), 4):
            return trimesh.visual.color.vertex_to_face_color(vc.astype(np.uint8), geom.faces) / 255.0
    if material is not None:
        return np.tile(np.asarray(material.main_color, float) / 255.0, (n, 1))
    return np.tile(np.asarray(OBJECT_COLOR, float), (n, 1))


def mesh_file_visuals(path: str, scale=(1.0, 1.0, 1.0), color=None) -> list[tuple]:
    """A mesh file as ``(vertices float32 (n, 3) m, faces int32 (m, 3), rgba 0..1, closed)`` parts, one per colour
    (every geometry of a GLB/DAE/OBJ scene in the file's frame, scaled per axis). ``color``: one RGBA for all;
    else the file's colours (a mesh without any: ``OBJECT_COLOR``). ModelError naming the file."""
    if not Path(path).is_file():
        raise ModelError(f"visual mesh file not found: {path}")
    try:
        loaded = trimesh.load(str(path), force="scene")
        geometries = loaded.dump() if isinstance(loaded, trimesh.Scene) else [loaded]
    except Exception as exc:  # noqa: BLE001 - trimesh raises many types
        raise ModelError(f"{path}: cannot read the visual mesh: {type(exc).__name__}: {exc}") from None
    S = np.diag([*map(float, scale), 1.0])
    parts = []
    for geom in geometries:
        if not isinstance(geom, trimesh.Trimesh) or len(geom.faces) == 0:
            continue
        if not np.all(np.isfinite(geom.vertices)):
            raise ModelError(f"{path}: visual mesh with NaN or infinite vertex coordinates")
        geom = geom.copy()
        geom.apply_transform(S)
        if color is not None:
            rgba = np.tile(np.asarray(color, float), (len(geom.faces), 1))
        else:
            rgba = _face_colors(geom)
        parts.append((geom, rgba))
    if not parts:
        raise ModelError(f"{path}: the visual mesh is empty (no triangles)")
    levels = np.unique(np.concatenate([np.round(c * 255) for _, c in parts]), axis=0)
    quantum = 255.0 / 7.0 if len(levels) > MAX_COLORS else 1.0
    out = []
    for geom, rgba in parts:
        keys = np.round(np.round(rgba * 255.0 / quantum) * quantum) / 255.0
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        for k, c in enumerate(uniq):
            faces = np.flatnonzero(inverse.reshape(-1) == k)
            sub = geom if len(uniq) == 1 else geom.submesh([faces], append=True)
            closed = bool(sub.is_watertight and sub.is_winding_consistent and sub.volume > 0)
            out.append((np.asarray(sub.vertices, np.float32), np.asarray(sub.faces, np.int32),
                        tuple(float(x) for x in c), closed))
    return out


def _halfspace(geometry) -> tuple[np.ndarray, np.ndarray, pin.SE3]:
    """A square of HALFSPACE_SIZE on the halfspace's plane n . x = d, facing +n; and its placement."""
    n = np.asarray(geometry.n, float)
    R = pin.Quaternion.FromTwoVectors(np.array([0.0, 0.0, 1.0]), n).matrix()
    h = HALFSPACE_SIZE / 2.0
    v = np.array([[-h, -h, 0.0], [h, -h, 0.0], [h, h, 0.0], [-h, h, 0.0]], dtype=np.float32)
    f = np.array([[0, 1, 2], [0, 2, 3]], dtype=np.int32)
    return v, f, pin.SE3(R, n * float(geometry.d))



def urdf_visuals(urdf_path: str, prefix: str = "", package_dirs=()) -> tuple[pin.Model, pin.GeometryModel]:
    """The URDF's kinematic model and VISUAL geometry (names prefixed as composition.prefix_urdf does)."""
    path = Path(urdf_path)
    xml = path.read_text()
    if prefix:
        xml = prefix_urdf_xml(xml, prefix)
    model = pin.buildModelFromXML(xml, mimic=True)
    visual = pin.GeometryModel()
    try:
        with contextlib.chdir(path.parent):
            pin.buildGeomFromUrdfString(model, xml, pin.GeometryType.VISUAL, geometry_model=visual,
                                        package_dirs=default_package_dirs(package_dirs))
    except (ValueError, RuntimeError) as exc:
        raise ModelError(f"{path}: visual geometry cannot be loaded: {exc}") from None
    return model, visual


class _Builder:
    def __init__(self, model: MultibodyModel):
        self.model = model
        self.pm = model.pin_model
        self.meshes: list[VisualMesh] = []
        self.entities: list[Entity] = []
        self._label_of: dict[tuple, int] = {}

    def label(self, name: str, kind: str, robot: str = "") -> int:
        key = (kind, name)
        if key not in self._label_of:
            self._label_of[key] = len(self.entities) + 1
            self.entities.append(Entity(len(self.entities) + 1, name, kind, robot))
        return self._label_of[key]

    def add(self, name, geometry, frame_id, placement, color, label, where):
        if type(geometry).__name__ == "Halfspace":
            v, f, plane = _halfspace(geometry)
            self.meshes.append(VisualMesh(name, v, f, frame_id, placement * plane, tuple(color), label, True))
            return
        v, f, closed = shape_mesh(geometry, where)
        self.meshes.append(VisualMesh(name, v, f, frame_id, placement, tuple(color), label, closed))

    def frame_id(self, name: str, where: str) -> int:
        if not self.pm.existFrame(name, pin.FrameType.BODY):
            raise ModelError(f"{where}: visual geometry on link {name!r}, which is not a link of the scene model")
        return self.pm.getFrameId(name, pin.FrameType.BODY)

    def urdf(self, path, prefix, package_dirs, kind, owner, robot="", world_pose=None):
        """Every visual of a URDF: on the scene frames of the same (prefixed) link names, or, for a static
        environment URDF (``world_pose``), fixed in the world."""
        model, visual = urdf_visuals(path, prefix, package_dirs)
        data = pin.Data(model)
        gdata = pin.GeometryData(visual)
        if world_pose is not None:
            pin.updateGeometryPlacements(model, data, visual, gdata, pin.neutral(model))
        for g, go in enumerate(visual.geometryObjects):
            link = model.frames[go.parentFrame].name
            color = tuple(float(c) for c in go.meshColor) if go.overrideMaterial or go.meshPath else ROBOT_COLOR
            label = self.label(link if kind == "link" else owner, kind, robot)
            where = f"{path}: link {link!r}"
            if world_pose is not None:
                self.add(go.name, go.geometry, -1, world_pose * gdata.oMg[g], color, label, where)
            else:
                # GeometryObject.placement is relative to the parent JOINT; the frame's placement too
                local = model.frames[go.parentFrame].placement.actInv(go.placement)
                self.add(go.name, go.geometry, self.frame_id(link, where), local, color, label, where)


def build_visual_scene(scene) -> VisualScene:
    """The visual geometry of a ``sim.scene.Scene`` (robots, objects, environment) on its model's frames."""
    model: MultibodyModel = scene.model
    b = _Builder(model)
    source_dir = Path(scene.source).parent if os.path.isfile(scene.source) else Path.cwd()
    for robot in scene.robots:
        b.urdf(robot.urdf, robot.prefix, list(robot.package_dirs), "link", None, robot.name)
    for obj in scene.objects:
        body = model.free_body(obj.name)
        if obj.urdf is not None:
            path = obj.urdf if not obj.urdf.lstrip().startswith("<") else None
            resolved = resolve_urdf_path(path, source_dir) if path else None
            if resolved is None:
                raise ModelError(f"{scene.source}: object {obj.name!r}: URDF {obj.urdf!r} not found "
                                 f"(looked relative to the scene and in {urdf_dir()})")
            b.urdf(str(resolved), "", (), "object", obj.name)
        elif obj.visual is not None or obj.mesh is not None:       # a mesh file with its colours
            where = f"{scene.source}: object {obj.name!r}"
            fid = b.frame_id(body.frame_name, where)
            spec = obj.visual if obj.visual is not None else obj.mesh
            try:
                parts = mesh_file_visuals(spec.path, spec.scale, getattr(spec, "color", None))
            except ModelError as exc:
                raise ModelError(f"{where}: {exc}") from None
            label = b.label(obj.name, "object")
            for k, (v, f, color, closed) in enumerate(parts):
                b.meshes.append(VisualMesh(f"{obj.name}/visual_{k}", v, f, fid, pin.SE3.Identity(), color, label,
                                           closed))
        else:
            fid = b.frame_id(body.frame_name, f"{scene.source}: object {obj.name!r}")
            b.add(obj.name, obj.shape.collision_geometry(), fid, pin.SE3.Identity(), OBJECT_COLOR,
                  b.label(obj.name, "object"), f"{scene.source}: object {obj.name!r}")
    for env in scene.environment:
        if env.urdf is not None:
            resolved = resolve_urdf_path(env.urdf, source_dir)
            if resolved is None:
                raise ModelError(f"{scene.source}: environment {env.name!r}: URDF {env.urdf!r} not found")
            b.urdf(str(resolved), "", (), "environment", env.name, world_pose=env.pose)
        else:
            b.add(env.name, env.shape.collision_geometry(), -1, env.pose, ENVIRONMENT_COLOR,
                  b.label(env.name, "environment"), f"{scene.source}: environment {env.name!r}")
    return VisualScene(b.meshes, b.entities)
