"""URDF / robot preset / scene description -> immutable ``MultibodyModel``.

Everything that reads a description file lives here; errors name the file and the problem.

* ``load_urdf``: a URDF (path or XML string) -> Pinocchio model + collision ``GeometryModel``
  (``<mimic>`` joints become Pinocchio mimic joints; triangle meshes become convex hulls, because coal's
  signed distances for BVH meshes are wrong in penetration).
* ``load_robot_preset``: ``config/robots/<name>.yaml`` (or a path) -> ``RobotPreset``.
* ``build_scene_model``: robot(s) + free objects + static environment -> one ``MultibodyModel`` (several robots,
  prefixed and mounted on each other: ``model/composition.py``).
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
from ..yaml_files import check_keys, parse_pose, parse_vector, missing_file, read_mapping, read_text_file
from .materials import ContactMaterial
from .multibody_model import FreeBody, MimicJoint, MultibodyModel
from .robot_description import split_description, urdf_from_description
from .validation import validate_mass_properties

# ----------------------------------------------------------------------------------- package paths


def default_package_dirs(extra=None) -> list[str]:
    """Folders that CONTAIN ROS packages, searched for ``package://pkg/...`` URIs, in order: explicit dirs,
    ``ROS_PACKAGE_PATH``, ``<prefix>/share`` of every ``AMENT_PREFIX_PATH`` entry, the share folder of
    cmeel wheels (example-robot-data) and this package's own share/source folder."""
    dirs = [str(d) for d in (extra or [])]
    dirs += [d for d in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if d]
    dirs += [os.path.join(p, "share") for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for entry in sys.path:
        cmeel = os.path.join(entry, "cmeel.prefix", "share")
        if os.path.isdir(cmeel):
            dirs.append(cmeel)
    own = Path(__file__).resolve().parents[2]      # source checkout: <root>/ holds urdf/, config/
    dirs.append(str(own.parent))                   # so that package://<checkout dir name>/... would work
    seen, out = set(), []
    for d in dirs:
        if d not in seen and os.path.isdir(d):
            seen.add(d)
            out.append(d)
    return out


def resolve_uri(uri: str, base_dir: str | None, package_dirs: list[str]) -> str | None:
    """Resolve a mesh URI (package://, file:// or a relative/absolute path) to an existing file or None."""
    if uri.startswith("package://"):
        rel = uri[len("package://"):]
        pkg = rel.split("/", 1)[0]
        for d in package_dirs:
            cand = os.path.join(d, rel)
            if os.path.isfile(cand):
                return cand
        if pkg == "contact_sim_ros":
            own = Path(__file__).resolve().parents[2] / rel.split("/", 1)[1]
            if own.is_file():
                return str(own)
        return None
    path = uri[len("file://"):] if uri.startswith("file://") else uri
    if not os.path.isabs(path) and base_dir:
        path = os.path.join(base_dir, path)
    return path if os.path.isfile(path) else None


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
              prefix: str = "") -> UrdfModel:
    """Load a URDF file path or XML string.

    ``floating_base_name``: if given, the root link gets a free-flyer joint of that name (free objects).
    ``prefix``: prepended to every link and joint name (and so to every frame and geometry name) before the
    model is built, as a ``prefix``/``tf_prefix`` xacro argument would (``composition.prefix_urdf``).
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
        from .composition import prefix_urdf
        prefix_urdf(root, prefix)
        xml_text = ET.tostring(root, encoding="unicode")

    dirs = default_package_dirs(package_dirs)
    link_parents, mimics, links = _urdf_structure(root, source)
    _check_meshes(root, source, base_dir, dirs)

    with _captured_stderr() as err:
        try:
            if floating_base_name:
                model = pin.buildModelFromXML(xml_text, pin.JointModelFreeFlyer(), floating_base_name, mimic=True)
            else:
                model = pin.buildModelFromXML(xml_text, mimic=True)
            with _cwd(base_dir):
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
    _meshes_to_convex(collision, source)
    return UrdfModel(model, collision, source, xml_text, link_parents, tuple(mimics), tuple(links))


@contextlib.contextmanager
def _cwd(path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


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


# ---------------------------------------------------------------------------------- robot presets


def presets_dir() -> Path:
    from ..resources import share_dir
    return Path(share_dir()) / "config" / "robots"


def urdf_dir() -> Path:
    from ..resources import share_dir
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
    urdf = _resolve_urdf_path(urdf_value, base)
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
        armature=armature,
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


def _resolve_urdf_path(value: str, base: Path) -> Path | None:
    if value.startswith("package://"):
        found = resolve_uri(value, str(base), default_package_dirs())
        return Path(found) if found else None
    for cand in (base / value, Path(value)):       # absolute paths: both are the path itself
        if cand.is_file():
            return cand.resolve()
    cand = urdf_dir() / value
    return cand.resolve() if cand.is_file() else None


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
    """A free body: a primitive with mass (kg) or density (kg/m^3), or a URDF."""

    name: str
    shape: ShapeSpec | None = None
    mass: float | None = None
    urdf: str | None = None
    pose: pin.SE3 = field(default_factory=pin.SE3.Identity)
    material: dict = field(default_factory=dict)


@dataclass
class EnvironmentSpec:
    """Static geometry attached to the world."""

    name: str
    shape: ShapeSpec | None = None
    urdf: str | None = None
    pose: pin.SE3 = field(default_factory=pin.SE3.Identity)
    material: dict = field(default_factory=dict)


def build_scene_model(robot, objects: list[ObjectSpec], environment: list[EnvironmentSpec],
                      materials: dict | None = None, disabled_collisions=(), gravity=(0.0, 0.0, -9.81),
                      source: str = "<scene>") -> MultibodyModel:
    """Compose robot(s) + free objects + static environment into one MultibodyModel (see multibody_model.py).

    ``robot``: None, one ``RobotPreset`` or a sequence of them (``Scene.robots``: prefixed, possibly mounted on
    each other's links; model/composition.py). The model's ``robots`` holds one ``RobotInstance`` per robot."""
    from .composition import compose_robots
    model, geom = pin.Model(), pin.GeometryModel()
    disabled = [tuple(p) for p in disabled_collisions]
    composed = compose_robots(model, geom, robot, source)
    model, geom = composed.model, composed.geometry
    link_parents: dict[str, str] = composed.link_parents
    mimics: tuple[MimicJoint, ...] = composed.mimic_joints
    material_overrides: dict[str, dict] = composed.material_overrides
    disabled += composed.disabled_collisions
    robot_sources = composed.sources
    geometry_link: list[str] = []      # the link / object / environment name owning each geometry
    geometry_link += [model.frames[go.parentFrame].name for go in geom.geometryObjects]

    names = [o.name for o in objects] + [e.name for e in environment]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ConfigError(f"{source}: object/environment names must be unique; repeated: {sorted(dupes)}")

    free_joint_names = []
    for obj in objects:
        obj_model, obj_geom = _object_model(obj, source)
        try:
            model, geom = pin.appendModel(model, obj_model, geom, obj_geom, 0, pin.SE3.Identity())
        except ValueError as exc:
            raise ModelError(f"{source}: object {obj.name!r} cannot be added: {exc} (rename its links)") from None
        free_joint_names.append(free_joint_name(obj.name))
        n_new = len(obj_geom.geometryObjects)
        geometry_link += [obj.name] * n_new
        if obj.material:
            material_overrides[obj.name] = obj.material

    # appendModel keeps the geometries ordered by joint: an object appended after several robots moves the later
    # robots' world-fixed geometries (their base links) forward, so the owners are read off the final order
    object_of_joint = {model.getJointId(free_joint_name(o.name)): o.name for o in objects}
    geometry_link = [object_of_joint.get(go.parentJoint, model.frames[go.parentFrame].name)
                     for go in geom.geometryObjects]
    for env in environment:
        for name, placement, shape in _environment_geometries(env, source):
            geom.addGeometryObject(pin.GeometryObject(name, 0, 0, placement, shape))
            geometry_link.append(env.name)
        if env.material:
            material_overrides[env.name] = env.material

    model.gravity = pin.Motion(np.concatenate([parse_vector(gravity, 3, f"{source}: gravity"), np.zeros(3)]))
    finished = _finish_model(model, geom, geometry_link, link_parents, mimics, free_joint_names, materials or {},
                             material_overrides, disabled, source if not robot_sources else
                             f"{source} (robot{'s' if len(robot_sources) > 1 else ''} {', '.join(robot_sources)})")
    return composed.instances(finished)


def _environment_geometries(env: EnvironmentSpec, source: str):
    """(name, world placement, coal shape) of a static environment entry: a primitive, or every collision
    geometry of a URDF whose links are all fixed (e.g. urdf/objects/table.urdf)."""
    if env.urdf is None:
        if env.shape is None:
            raise ConfigError(f"{source}: environment {env.name!r} needs a 'shape' or a 'urdf'")
        return [(env.name, env.pose, env.shape.collision_geometry())]
    path = _resolve_urdf_path(env.urdf, Path(source).parent if os.path.isfile(source) else Path.cwd())
    if path is None:
        raise ModelError(f"{source}: environment {env.name!r}: URDF {env.urdf!r} not found "
                         f"(looked relative to the scene and in {urdf_dir()})")
    urdf = load_urdf(path)
    if urdf.model.nv:
        raise ModelError(f"{path}: environment {env.name!r} must have only fixed joints (it has "
                         f"{urdf.model.nv} degrees of freedom); make it an object instead")
    return [(f"{env.name}/{go.name}", env.pose * go.placement, go.geometry)
            for go in urdf.collision_model.geometryObjects]


FREE_JOINT_SUFFIX = "_freejoint"


def free_joint_name(object_name: str) -> str:
    """Name of a free object's free-flyer joint; its body frame carries the object's own name (shapes) or
    its URDF root link's name."""
    return object_name + FREE_JOINT_SUFFIX


def _object_model(obj: ObjectSpec, source: str):
    if obj.urdf is not None:
        if obj.urdf.lstrip().startswith("<"):       # a URDF document (SpawnEntity's resource_string)
            path = obj.urdf
        else:
            path = _resolve_urdf_path(obj.urdf, Path(source).parent if os.path.isfile(source) else Path.cwd())
        if path is None:
            raise ModelError(f"{source}: object {obj.name!r}: URDF {obj.urdf!r} not found "
                             f"(looked relative to the scene and in {urdf_dir()})")
        urdf = load_urdf(path, floating_base_name=free_joint_name(obj.name))
        model, geom = urdf.model, urdf.collision_model
        # the object's pose is its initial configuration, not a fixed placement
        return model, geom
    if obj.shape is None:
        raise ConfigError(f"{source}: object {obj.name!r} needs either 'shape' or 'urdf'")
    if obj.mass is None or not np.isfinite(obj.mass) or obj.mass <= 0:
        raise ConfigError(f"{source}: object {obj.name!r} needs a mass > 0 kg (or a density), got {obj.mass!r}")
    model = pin.Model()
    jid = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), free_joint_name(obj.name))
    model.appendBodyToJoint(jid, obj.shape.inertia(obj.mass), pin.SE3.Identity())
    jframe = model.addJointFrame(jid, 0)
    fid = model.addBodyFrame(obj.name, jid, pin.SE3.Identity(), jframe)
    geom = pin.GeometryModel()
    geom.addGeometryObject(pin.GeometryObject(obj.name, jid, fid, pin.SE3.Identity(),
                                              obj.shape.collision_geometry()))
    return model, geom


def _check_preset_against_model(robot: RobotPreset, model: pin.Model, mimics) -> None:
    names = [n for n in model.names[1:]]
    for group in robot.joint_groups.values():
        for j in group.joints:
            if j not in names:
                raise ModelError(f"{robot.source}: joint group {group.name!r} names joint {j!r}, which is not in "
                                 f"{robot.urdf}; joints there: {', '.join(names)}")
    for j in list(robot.initial_positions) + list(robot.gains) + list(robot.armature):
        if j not in names:
            raise ModelError(f"{robot.source}: joint {j!r} (initial_positions/gains/armature) is not in {robot.urdf}; "
                             f"joints there: {', '.join(names)}")


def _finish_model(model, geom, geometry_link, link_parents, mimics, free_joint_names, materials,
                  material_overrides, disabled, source) -> MultibodyModel:
    mimic_names = {m.name for m in mimics}
    joint_names, q_idx, v_idx, lower, upper, vel, eff = [], [], [], [], [], [], []
    actuated = np.zeros(model.nv, dtype=bool)
    free_bodies = []
    for jid in range(1, model.njoints):
        j, name = model.joints[jid], model.names[jid]
        if name in free_joint_names:
            body_frames = [f.name for f in model.frames if f.parentJoint == jid and f.type == pin.FrameType.BODY]
            free_bodies.append(FreeBody(name[:-len(FREE_JOINT_SUFFIX)], jid, body_frames[0],
                                        slice(j.idx_q, j.idx_q + 7), slice(j.idx_v, j.idx_v + 6),
                                        float(model.inertias[jid].mass)))
            continue
        if name in mimic_names or j.nv == 0:
            continue
        if j.nv != 1:
            raise ModelError(f"{source}: joint {name!r} of type {j.shortname()} is not supported in a robot "
                             f"(1-dof revolute, prismatic or continuous joints only)")
        joint_names.append(name)
        q_idx.append(j.idx_q)
        v_idx.append(j.idx_v)
        actuated[j.idx_v] = True
        if j.nq == 1:
            lo, hi = model.lowerPositionLimit[j.idx_q], model.upperPositionLimit[j.idx_q]
            if not lo < hi:
                lo, hi = -np.inf, np.inf
        else:  # continuous joint (cos, sin)
            lo, hi = -np.inf, np.inf
        lower.append(lo)
        upper.append(hi)
        v_lim, e_lim = model.velocityLimit[j.idx_v], model.effortLimit[j.idx_v]
        vel.append(v_lim if v_lim > 0 else np.inf)
        eff.append(e_lim if e_lim > 0 else np.inf)

    # Materials per geometry: default <- scene materials.default <- per link/object/geometry overrides.
    default = ContactMaterial.from_dict(materials.get("default", {}), where=f"{source}: materials.default")
    overrides = {**material_overrides, **{k: v for k, v in materials.items() if k != "default"}}
    if "default" in material_overrides:
        default = ContactMaterial.from_dict(material_overrides["default"], default, f"{source}: materials.default")
    geometry_names = tuple(go.name for go in geom.geometryObjects)
    mats = []
    for g, go in enumerate(geom.geometryObjects):
        mat = default
        for key in (geometry_link[g], go.name):
            if key in overrides and key != "default":
                mat = ContactMaterial.from_dict(overrides[key], mat, f"{source}: materials.{key}")
        mats.append(mat)
    known = set(geometry_names) | set(geometry_link) | {"default"}
    unknown = set(overrides) - known
    if unknown:
        raise ConfigError(f"{source}: materials for unknown link/geometry {sorted(unknown)}; "
                          f"known: {sorted(known - {'default'})}")

    pairs = _collision_pairs(model, geom, geometry_link, link_parents, disabled, source)

    slices = []
    roots = [jid for jid in range(1, model.njoints) if model.parents[jid] == 0]
    for k, root in enumerate(roots):
        end = model.joints[roots[k + 1]].idx_v if k + 1 < len(roots) else model.nv
        begin = model.joints[root].idx_v
        if end > begin:
            slices.append(slice(begin, end))

    def ro(a, dtype=float):
        arr = np.array(a, dtype=dtype)
        arr.setflags(write=False)
        return arr

    return MultibodyModel(
        pin_model=model, collision_model=geom, source=source,
        joint_names=tuple(joint_names), joint_q_index=ro(q_idx, int), joint_v_index=ro(v_idx, int),
        position_lower=ro(lower), position_upper=ro(upper), velocity_limit=ro(vel), effort_limit=ro(eff),
        mimic_joints=tuple(mimics),
        joint_damping=ro(model.damping.copy()), joint_friction=ro(model.friction.copy()), actuated=ro(actuated, bool),
        free_bodies=tuple(free_bodies), tree_velocity_slices=tuple(slices),
        geometry_names=geometry_names,
        geometry_parent_joint=ro([go.parentJoint for go in geom.geometryObjects], int),
        geometry_stiffness=ro([m.stiffness for m in mats]), geometry_dissipation=ro([m.dissipation for m in mats]),
        geometry_friction=ro([m.friction for m in mats]), geometry_restitution=ro([m.restitution for m in mats]),
        collision_pairs=ro(pairs, int).reshape(-1, 2),
        gravity=ro(model.gravity.linear.copy()),
    )


def _collision_pairs(model, geom, geometry_link, link_parents, disabled, source) -> list:
    """Candidate pairs: different bodies, not both static, not URDF parent/child links, not disabled."""
    names = [go.name for go in geom.geometryObjects]
    known = set(names) | set(geometry_link)
    for a, b in disabled:
        for n in (a, b):
            if n not in known:
                raise ConfigError(f"{source}: disabled_collisions names {n!r}, which is neither a link nor a "
                                  f"geometry; known: {sorted(known)}")
    disabled_set = {frozenset(p) for p in disabled}
    pairs = []
    joints = [go.parentJoint for go in geom.geometryObjects]
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            if joints[a] == joints[b]:
                continue  # same body (includes static vs static)
            la, lb = geometry_link[a], geometry_link[b]
            if link_parents.get(la) == lb or link_parents.get(lb) == la:
                continue
            if any(p in disabled_set for p in (frozenset((la, lb)), frozenset((names[a], names[b])),
                                                frozenset((la, names[b])), frozenset((names[a], lb)))):
                continue
            pairs.append((a, b))
    return pairs
