"""Reading descriptions: URDFs, robot presets and the scene's body specs (``ShapeSpec``, ``ObjectSpec``,
``EnvironmentSpec``). Errors name the file and the problem. ``model/composition.py`` builds the scene's one
``MultibodyModel`` from them (it imports this module, never the other way round).

* ``load_urdf``: a URDF (path or XML string) -> Pinocchio model + collision ``GeometryModel``
  (``<mimic>`` joints become Pinocchio mimic joints; triangle meshes become convex hulls, because coal's
  signed distances for BVH meshes are wrong in penetration).
* ``load_robot_preset``: ``config/robots/<name>.yaml`` (or a path) -> ``RobotPreset``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import coal
import numpy as np
import pinocchio as pin

from ..errors import ConfigError, ModelError, unknown_choice
from ..resources import share_dir
from ..yaml_files import check_keys, missing_file, parse_pose, read_mapping, read_text_file
from .mesh_object import MeshSpec, mesh_body
from .multibody_model import MimicJoint
from .robot_description import (default_package_dirs, prefix_urdf, resolve_uri, split_description,
                                urdf_from_description)
from .validation import validate_mass_properties

@contextlib.contextmanager
def _captured_stderr():
    """Capture C-level stderr (urdfdom prints its parse errors there) into a string buffer."""
    captured = {"text": ""}
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            captured["text"] = tmp.read().decode(errors="replace")


# ------------------------------------------------------------------------------------------- URDF


@dataclass
class UrdfModel:
    """A loaded URDF before it is composed into a scene."""

    model: pin.Model
    collision_model: pin.GeometryModel
    source: str
    xml: str
    link_parents: dict[str, str]                 # child link -> parent link (every URDF joint)
    mimic_joints: tuple[MimicJoint, ...]
    link_names: tuple[str, ...]


def load_urdf(urdf: str | os.PathLike, package_dirs=None, floating_base_name: str | None = None,
              prefix: str = "", mesh_collision: str = "hull", decomposition: dict | None = None) -> UrdfModel:
    """Load a URDF file path or XML string.

    ``floating_base_name``: if given, the root link gets a free-flyer joint of that name (free objects).
    ``prefix``: prepended to every link and joint name (and so to every frame and geometry name) before the
    model is built, as a ``prefix``/``tf_prefix`` xacro argument would (``composition.prefix_urdf``).
    ``mesh_collision``: what a collision mesh becomes: "hull" (robots: its convex hull), "auto" or "decompose"
    (free objects: convex pieces, model/mesh_object.py, with the CoACD parameters ``decomposition``).
    Raises ModelError naming the file and the problem (malformed XML, invalid URDF, missing mesh).
    """
    text = str(urdf)
    if text.lstrip().startswith("<"):
        source, xml_text, base_dir = "<urdf string>", text, os.getcwd()
    else:
        path = Path(text)
        if not path.is_file():
            raise ModelError(f"URDF {path}: {missing_file(path)}")
        try:
            xml_text = read_text_file(path, "URDF")
        except ConfigError as exc:        # not readable, not text
            raise ModelError(str(exc)) from None
        source, base_dir = str(path), str(path.parent)
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise ModelError(f"{source}: malformed URDF XML: {exc}") from None
    if root.tag != "robot":
        raise ModelError(f"{source}: not a URDF: the root element is <{root.tag}>, expected <robot>")
    if prefix:
        prefix_urdf(root, prefix)
        xml_text = ET.tostring(root, encoding="unicode")

    dirs = default_package_dirs(package_dirs)
    link_parents, mimics, links = _urdf_structure(root, source)
    _check_meshes(root, source, base_dir, dirs)
    if _absolute_mesh_names(root, base_dir, dirs):
        xml_text = ET.tostring(root, encoding="unicode")

    with _captured_stderr() as err:
        try:
            if floating_base_name:
                model = pin.buildModelFromXML(xml_text, pin.JointModelFreeFlyer(), floating_base_name, mimic=True)
            else:
                model = pin.buildModelFromXML(xml_text, mimic=True)
            with contextlib.chdir(base_dir):
                # filled in place: without ``geometry_model`` the binding (pin 4.1.0) leaves an extra
                # GeometryModel alive per call (one more per URDF load: a campaign loads a scene per trial)
                collision = pin.GeometryModel()
                pin.buildGeomFromUrdfString(model, xml_text, pin.GeometryType.COLLISION, geometry_model=collision,
                                            package_dirs=dirs)
        except (ValueError, RuntimeError) as exc:
            failure = exc
        else:
            failure = None
    if failure is not None:
        detail = " ".join(line.strip() for line in err["text"].splitlines() if line.strip()
                          and not line.strip().startswith("at line"))
        raise ModelError(f"{source}: invalid URDF: {detail or failure}") from None
    validate_mass_properties(model, root, source)
    if floating_base_name:
        check_inertials_against_meshes(root, collision, model, source)
    if mesh_collision != "hull":
        collision = _meshes_to_pieces(collision, source, mesh_collision, decomposition or {})
    _meshes_to_convex(collision, source)
    return UrdfModel(model, collision, source, xml_text, link_parents, tuple(mimics), tuple(links))



def _urdf_structure(root, source):
    links = [l.get("name") for l in root.findall("link")]
    link_parents, mimics = {}, []
    for joint in root.findall("joint"):
        name = joint.get("name")
        parent, child = joint.find("parent"), joint.find("child")
        if parent is None or child is None:
            raise ModelError(f"{source}: joint {name!r} lacks a <parent> or <child> element")
        for ln in (parent.get("link"), child.get("link")):
            if ln not in links:
                raise ModelError(f"{source}: joint {name!r} refers to link {ln!r}, which is not defined")
        link_parents[child.get("link")] = parent.get("link")
        mimic = joint.find("mimic")
        if mimic is not None:
            mimics.append(MimicJoint(name, mimic.get("joint"), float(mimic.get("multiplier", 1.0)),
                                     float(mimic.get("offset", 0.0))))
    return link_parents, mimics, links


def _check_meshes(root, source, base_dir, dirs):
    for link in root.findall("link"):
        for mesh in link.findall("collision/geometry/mesh"):
            uri = mesh.get("filename", "")
            if resolve_uri(uri, base_dir, dirs) is None:
                raise ModelError(f"{source}: link {link.get('name')!r}: collision mesh {uri!r} not found "
                                 f"(searched {base_dir} and package dirs {dirs})")


# a URDF <inertial> whose rotational inertia (trace about the centre of mass) is more than this factor from its
# collision mesh's at the same mass, or whose mass over the mesh's volume is outside PLAUSIBLE_DENSITY, is warned of
INERTIA_FACTOR = 5.0
PLAUSIBLE_DENSITY = (10.0, 25000.0)     # kg/m^3: foam .. tungsten


def check_inertials_against_meshes(root, collision: pin.GeometryModel, model: pin.Model, source: str) -> list[str]:
    """Warnings (printed on stderr, and returned) for each link of a free object whose ``<inertial>`` does not fit
    its one collision mesh: the mesh's inertia at the URDF's mass (mesh_object.mesh_body: of the closed mesh, else
    of its hull) more than ``INERTIA_FACTOR`` from the URDF's, or an implied density (mass / the mesh's volume)
    outside ``PLAUSIBLE_DENSITY`` (pybullet's duck_vhacd.urdf: 0.1 kg with 1 kg*m^2, ~1e4 times its mesh's). Links
    with no mesh, several collisions or no <inertial> are not checked."""
    warnings = []
    for link in root.findall("link"):
        inertial, collisions = link.find("inertial"), link.findall("collision")
        if inertial is None or len(collisions) != 1 or collisions[0].find("geometry/mesh") is None:
            continue
        name = link.get("name")
        geoms = [go for go in collision.geometryObjects if model.frames[go.parentFrame].name == name
                 and isinstance(go.geometry, coal.BVHModelBase)]
        mass_el, inertia_el = inertial.find("mass"), inertial.find("inertia")
        if len(geoms) != 1 or mass_el is None or inertia_el is None:
            continue
        try:
            mass = float(mass_el.get("value", "0"))
            I = np.array([[float(inertia_el.get(k, "0")) for k in row] for row in
                          (("ixx", "ixy", "ixz"), ("ixy", "iyy", "iyz"), ("ixz", "iyz", "izz"))])
        except ValueError:
            continue        # validate_mass_properties names malformed numbers
        if not mass > 0:
            continue
        go = geoms[0]
        try:
            body = mesh_body(MeshSpec(go.meshPath, tuple(float(x) for x in go.meshScale), "hull"), mass=mass,
                             quiet=True)
        except ModelError:
            continue        # the collision loader reports a bad mesh
        urdf_trace, mesh_trace = float(np.trace(I)), float(np.trace(body.inertia))
        density = mass / body.volume if body.volume > 0 else float("inf")
        ratio = urdf_trace / mesh_trace if mesh_trace > 0 else float("inf")
        if not (1.0 / INERTIA_FACTOR <= ratio <= INERTIA_FACTOR
                and PLAUSIBLE_DENSITY[0] <= density <= PLAUSIBLE_DENSITY[1]):
            moments = ", ".join(f"{x:.3g}" for x in np.linalg.eigvalsh(0.5 * (I + I.T)))
            mesh_moments = ", ".join(f"{x:.3g}" for x in np.linalg.eigvalsh(body.inertia))
            msg = (f"warning: {source}: link {name!r}: its <inertial> (mass {mass:.6g} kg, principal inertia "
                   f"[{moments}] kg*m^2) does not fit its collision mesh {go.meshPath} (volume {body.volume:.4g} "
                   f"m^3: density {density:.4g} kg/m^3; at {mass:.6g} kg the mesh's principal inertia is "
                   f"[{mesh_moments}] kg*m^2, {ratio:.3g} times less than the URDF's)"
                   if ratio >= 1 else
                   f"warning: {source}: link {name!r}: its <inertial> (mass {mass:.6g} kg, principal inertia "
                   f"[{moments}] kg*m^2) does not fit its collision mesh {go.meshPath} (volume {body.volume:.4g} "
                   f"m^3: density {density:.4g} kg/m^3; at {mass:.6g} kg the mesh's principal inertia is "
                   f"[{mesh_moments}] kg*m^2, {1 / ratio:.3g} times more than the URDF's)")
            msg += "; give the object a scene 'mass' or 'density' to take the mesh's inertia instead"
            print(msg, file=sys.stderr, flush=True)
            warnings.append(msg)
    return warnings


def _absolute_mesh_names(root, base_dir, dirs) -> bool:
    """Every ``<mesh filename>`` that is relative to the URDF's folder (``mug_col.obj``, ``meshes/a.stl``: as
    pybullet, Gazebo and RViz read them) or a ``file://`` URI, rewritten in place to the absolute path of the file
    it names (Pinocchio resolves neither against the URDF's folder); ``package://`` names stay (Pinocchio finds
    them in ``dirs``). True if any changed."""
    changed = False
    for mesh in root.iter("mesh"):
        name = mesh.get("filename", "")
        if not name or name.startswith("package://") or (os.path.isabs(name) and "://" not in name):
            continue
        found = resolve_uri(name, base_dir, dirs)
        if found is not None:
            mesh.set("filename", os.path.abspath(found))
            changed = True
    return changed


def _meshes_to_convex(collision: pin.GeometryModel, source: str) -> None:
    """Replace triangle meshes (BVH) by their convex hulls: coal's BVH signed distance is wrong in
    penetration (shared/notes/pinocchio-coal.md)."""
    for go in collision.geometryObjects:
        geom = go.geometry
        if isinstance(geom, coal.BVHModelBase):
            try:
                geom.buildConvexHull(True, "Qt")
            except Exception as exc:  # qhull failure on a degenerate mesh
                raise ModelError(f"{source}: collision mesh of {go.name!r}: convex hull failed: {exc}") from None
            go.geometry = geom.convex


def _meshes_to_pieces(collision: pin.GeometryModel, source: str, mode: str, decomposition: dict) -> pin.GeometryModel:
    """A GeometryModel whose triangle meshes are replaced by their convex pieces (``mesh_object.mesh_body``: the
    mesh as it is when convex, else its cached CoACD decomposition), all on the mesh's joint and frame: geometry
    ``<name>`` becomes ``<name>/0``, ``<name>/1``, ... (one piece keeps its name)."""
    if not any(isinstance(go.geometry, coal.BVHModelBase) for go in collision.geometryObjects):
        return collision
    out = pin.GeometryModel()
    for go in collision.geometryObjects:
        if not isinstance(go.geometry, coal.BVHModelBase):
            out.addGeometryObject(go)
            continue
        spec = MeshSpec(go.meshPath, tuple(float(x) for x in go.meshScale), mode, dict(decomposition))
        try:
            shapes = mesh_body(spec).collision_geometries()
        except ModelError as exc:
            raise ModelError(f"{source}: collision mesh of {go.name!r}: {exc}") from None
        for k, shape in enumerate(shapes):
            name = go.name if len(shapes) == 1 else f"{go.name}/{k}"
            out.addGeometryObject(pin.GeometryObject(name, go.parentJoint, go.parentFrame, go.placement, shape))
    return out


# ---------------------------------------------------------------------------------- robot presets


def presets_dir() -> Path:
    return Path(share_dir()) / "config" / "robots"


def urdf_dir() -> Path:
    return Path(share_dir()) / "urdf"


def robot_preset_names() -> list[str]:
    d = presets_dir()
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


@dataclass(frozen=True)
class JointGroup:
    name: str
    joints: tuple[str, ...]
    controller: str


@dataclass(frozen=True)
class RobotPreset:
    """A robot preset (``config/robots/<name>.yaml``); see docs/robots.md for the keys."""

    name: str
    source: str
    urdf: str                                  # absolute path
    base_pose: pin.SE3
    initial_positions: dict
    joint_groups: dict                         # group name -> JointGroup
    gains: dict                                # joint -> (kp, kd)
    ft_sensor: dict | None
    tool_frame: str | None
    fingertip_frames: tuple[str, ...]
    contact_bodies: tuple[str, ...]
    materials: dict                            # 'default' or link/geometry name -> dict
    disabled_collisions: tuple[tuple[str, str], ...]
    package_dirs: tuple[str, ...] = ()
    armature: dict = field(default_factory=dict)   # joint -> reflected rotor inertia (kg*m^2 or kg)
    # Composition (scene key ``robots:``, model/composition.py). With a prefix, every joint/link/frame name above
    # already carries it (``composition.prefixed_preset``); ``name`` is then the scene's robot name.
    prefix: str = ""                           # prepended to the robot's joint, link, frame and geometry names
    preset_name: str = ""                      # the preset's own name (e.g. iiwa_wsg); default: ``name``
    parent_robot: str | None = None            # mounted on a link of this robot (None: on the world)
    parent_link: str | None = None             # that link (prefixed model name); base_pose is relative to it
    namespace: str | None = None               # for the ROS side only: the robot's topic/controller namespace
    frame_prefix: str | None = None            # for the ROS side only: prefix of its TF frames
    controllers_file: str | None = None        # for the ROS side only: its controller_manager YAML (absolute)
    inactive_controllers: tuple | None = None  # for the ROS side only: its controllers loaded inactive
    # joints its URDF declares driven: a <ros2_control> <joint> with a <command_interface>, or a <transmission>'s
    # <joint> (urdf_driven_joints); with its gains and a scene's joint_targets they get a drive (sim/default_gains.py)
    driven_joints: tuple = ()

    def __post_init__(self):
        if not self.preset_name:
            object.__setattr__(self, "preset_name", self.name)


_PRESET_KEYS = {"name", "urdf", "base_pose", "initial_positions", "joint_groups", "gains", "armature", "ft_sensor",
                "tool_frame", "fingertip_frames", "contact_bodies", "materials", "disabled_collisions",
                "package_dirs", "description", "xacro_args"}


def load_robot_preset(name_or_path, base_dir=None) -> RobotPreset:
    """Load a preset by name (``config/robots/<name>.yaml``) or path, or take a mapping
    ``{urdf: ..., base_pose: ..., initial_positions: ...}`` for a user's own URDF (relative paths in a mapping
    resolve against ``base_dir``: the scene file's folder, else the working directory, else urdf/)."""
    if isinstance(name_or_path, dict):
        data, source = dict(name_or_path), "<robot mapping>"
        base = Path(base_dir) if base_dir is not None else Path.cwd()
        data.setdefault("name", Path(split_description(str(data.get("urdf", "robot")))[0].removesuffix(".xacro")).stem)
    else:
        text = str(name_or_path)
        path = Path(text)
        if not (text.endswith((".yaml", ".yml")) or path.is_file()):
            path = presets_dir() / f"{text}.yaml"
            if not path.is_file():
                raise ConfigError(unknown_choice("robot", text, robot_preset_names()))
        if not path.is_file():
            raise ConfigError(f"robot preset {path}: {missing_file(path)}")
        source, base = str(path), path.parent
        data = read_mapping(path, "a robot preset")
    check_keys(data, _PRESET_KEYS, source)
    if "urdf" not in data:
        raise ConfigError(f"{source}: missing key 'urdf'")
    urdf_value, xacro_args = split_description(str(data["urdf"]))      # "FILE.xacro name:=value ..."
    urdf = resolve_urdf_path(urdf_value, base)
    if urdf is None:
        raise ModelError(f"{source}: URDF {data['urdf']!r} not found (looked in {base} and {urdf_dir()})")
    if not isinstance(data.get("xacro_args") or {}, dict):
        raise ConfigError(f"{source}: xacro_args must be a mapping {{name: value}}, got {data['xacro_args']!r}")
    xacro_args.update({str(k): v for k, v in (data.get("xacro_args") or {}).items()})
    urdf = urdf_from_description(urdf, xacro_args)      # a xacro is expanded to a cached URDF file
    groups = {}
    for gname, g in (data.get("joint_groups") or {}).items():
        if not isinstance(g, dict) or "joints" not in g:
            raise ConfigError(f"{source}: joint group {gname!r} needs a 'joints' list")
        groups[gname] = JointGroup(gname, tuple(g["joints"]), str(g.get("controller", f"{gname}_controller")))
    gains = {}
    for joint, g in (data.get("gains") or {}).items():
        try:
            gains[joint] = (float(g["kp"]), float(g.get("kd", 0.0)))
        except (TypeError, KeyError, ValueError):
            raise ConfigError(f"{source}: gains of {joint!r} must be {{kp: N*m/rad, kd: N*m*s/rad}}, "
                              f"got {g!r}") from None
    armature = {}
    for joint, value in (data.get("armature") or {}).items():
        try:
            armature[str(joint)] = float(value)
        except (TypeError, ValueError):
            armature[str(joint)] = float("nan")
        if not np.isfinite(armature[str(joint)]) or armature[str(joint)] < 0:
            raise ConfigError(f"{source}: armature of {joint!r} must be a number >= 0 (kg*m^2), got {value!r}")
    return RobotPreset(
        armature=armature, driven_joints=urdf_driven_joints(urdf),
        name=str(data.get("name", Path(source).stem)), source=source, urdf=str(urdf),
        base_pose=parse_pose(data.get("base_pose"), f"{source}: base_pose"),
        initial_positions={str(k): float(v) for k, v in (data.get("initial_positions") or {}).items()},
        joint_groups=groups, gains=gains, ft_sensor=data.get("ft_sensor"), tool_frame=data.get("tool_frame"),
        fingertip_frames=tuple(data.get("fingertip_frames") or ()),
        contact_bodies=tuple(data.get("contact_bodies") or ()),
        materials=dict(data.get("materials") or {}),
        disabled_collisions=tuple(tuple(p) for p in (data.get("disabled_collisions") or ())),
        package_dirs=tuple(str((base / p).resolve()) for p in (data.get("package_dirs") or ())),
    )


def urdf_driven_joints(urdf_path) -> tuple[str, ...]:
    """The joints a URDF says are driven, in file order: the ``<joint>``s of its ``<ros2_control>`` blocks that
    have a ``<command_interface>``, and the ``<joint>``s of its ``<transmission>``s (ROS 1 / gazebo_ros_control
    style). Empty for a bare URDF (or one that cannot be parsed here: the model loader reports that)."""
    try:
        root = ET.parse(str(urdf_path)).getroot()
    except (ET.ParseError, OSError):
        return ()
    names = [j.get("name") for block in root.iter("ros2_control") for j in block.findall("joint")
             if j.find("command_interface") is not None]
    names += [j.get("name") for tr in root.iter("transmission") for j in tr.findall("joint")]
    return tuple(dict.fromkeys(n for n in names if n))


def resolve_urdf_path(value: str, base: Path) -> Path | None:
    """The existing URDF (or xacro) file ``value`` names, resolved, or None when there is none: a ``package://``
    URI (looked up in ``default_package_dirs()``), a path relative to ``base`` (the folder of the file that names
    it: a preset, a scene) or absolute, else a file of the package's ``urdf/`` folder (``urdf_dir()``)."""
    if value.startswith("package://"):
        found = resolve_uri(value, str(base), default_package_dirs())
        return Path(found) if found else None
    for cand in (base / value, Path(value)):       # absolute paths: both are the path itself
        if cand.is_file():
            return cand.resolve()
    cand = urdf_dir() / value
    return cand.resolve() if cand.is_file() else None


def meshes_dir() -> Path:
    """The package's object set: generated meshes (meshes/generate_meshes.py)."""
    return Path(share_dir()) / "meshes"


def resolve_mesh_path(value: str, base_dir: Path | None) -> str | None:
    """An existing mesh file for ``value``: ``package://``, ``file://``, an absolute path, or a path relative to
    ``base_dir`` (the scene's folder), the working directory or the object set (``meshes_dir()``)."""
    if value.startswith("package://"):
        return resolve_uri(value, None, default_package_dirs())
    path = value[len("file://"):] if value.startswith("file://") else value
    cands = [Path(path)] if os.path.isabs(path) else \
        ([Path(base_dir) / path] if base_dir is not None else []) + [Path.cwd() / path, meshes_dir() / path]
    for cand in cands:
        if cand.is_file():
            return str(cand.resolve())
    return None


# --------------------------------------------------------------------------------- scene building


@dataclass
class ShapeSpec:
    """A primitive: kind in {box, sphere, cylinder, capsule, halfspace}; sizes in m (box: full side lengths;
    cylinder/capsule: radius and length along the local z axis; capsule length excludes the caps)."""

    kind: str
    size: tuple = ()

    KINDS = ("box", "sphere", "cylinder", "capsule", "halfspace")

    def collision_geometry(self):
        s = self.size
        if self.kind == "box":
            return coal.Box(*s)
        if self.kind == "sphere":
            return coal.Sphere(s[0])
        if self.kind == "cylinder":
            return coal.Cylinder(s[0], s[1])
        if self.kind == "capsule":
            return coal.Capsule(s[0], s[1])
        return coal.Halfspace(np.array([0.0, 0.0, 1.0]), 0.0)

    def volume(self) -> float:
        s = self.size
        if self.kind == "box":
            return s[0] * s[1] * s[2]
        if self.kind == "sphere":
            return 4.0 / 3.0 * np.pi * s[0] ** 3
        if self.kind == "cylinder":
            return np.pi * s[0] ** 2 * s[1]
        if self.kind == "capsule":
            return np.pi * s[0] ** 2 * s[1] + 4.0 / 3.0 * np.pi * s[0] ** 3
        raise ConfigError("a halfspace has no volume")

    def inertia(self, mass: float) -> pin.Inertia:
        s = self.size
        if self.kind == "box":
            return pin.Inertia.FromBox(mass, *s)
        if self.kind == "sphere":
            return pin.Inertia.FromSphere(mass, s[0])
        if self.kind == "cylinder":
            return pin.Inertia.FromCylinder(mass, s[0], s[1])
        if self.kind == "capsule":
            return pin.Inertia.FromCapsule(mass, s[0], s[1])
        raise ConfigError("a halfspace cannot be a free body")


@dataclass
class ObjectSpec:
    """A free body: a primitive with mass (kg) or density (kg/m^3), a URDF, or a mesh file (``mesh``: convex
    pieces and mass properties from the mesh, model/mesh_object.py; ``mass`` or ``density``)."""

    name: str
    shape: ShapeSpec | None = None
    mass: float | None = None
    urdf: str | None = None
    pose: pin.SE3 = field(default_factory=pin.SE3.Identity)
    material: dict = field(default_factory=dict)
    mesh: MeshSpec | None = None
    density: float | None = None                 # kg/m^3 (mesh objects; a primitive's becomes its mass)
    # a URDF object's collision meshes: auto | hull | decompose, and CoACD parameters (model/mesh_object.py)
    collision: str = "auto"
    decomposition: dict = field(default_factory=dict)
    # what cameras draw (mesh_object.VisualSpec); None: the mesh file itself (mesh objects) or the shape
    visual: object | None = None


@dataclass
class EnvironmentSpec:
    """Static geometry attached to the world: a primitive, a URDF with fixed joints only, or a mesh file
    (``mesh``: its convex pieces as for objects, model/mesh_object.py, welded to the world). A URDF's collision
    meshes and a mesh become convex pieces by ``collision`` (auto | hull | decompose) with CoACD's
    ``decomposition`` parameters."""

    name: str
    shape: ShapeSpec | None = None
    urdf: str | None = None
    pose: pin.SE3 = field(default_factory=pin.SE3.Identity)
    material: dict = field(default_factory=dict)
    mesh: MeshSpec | None = None
    collision: str = "auto"
    decomposition: dict = field(default_factory=dict)
