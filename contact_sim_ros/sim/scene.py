"""Scene files (YAML or an equivalent dict) -> ``Scene``: the model, the initial state and scripted inputs.

The format is documented in docs/design.md ("Scene files"). Scripted inputs are numbers or expressions of
the time ``t`` (s) using numpy functions (sin, cos, exp, sqrt, pi, clip, where, ...), validated when loaded.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pinocchio as pin

from ..cameras.spec import parse_cameras
from ..sensors.base import scene_sensors
from ..errors import ConfigError, ContactSimError, ModelError, unknown_choice
from ..model.composition import build_scene_model, mount_order, prefixed_preset
from ..model.loader import (EnvironmentSpec, ObjectSpec, RobotPreset, ShapeSpec, load_robot_preset, meshes_dir,
                            resolve_mesh_path)
from ..model.mesh_object import (MeshSpec, parse_collision, parse_decomposition, parse_mesh_entry,
                                 parse_visual_entry)
from ..model.multibody_model import MultibodyModel, model_body_names
from ..resources import share_dir
from ..yaml_files import check_keys, parse_pose, parse_vector, read_mapping

# ------------------------------------------------------------------------------ time expressions

_ALLOWED_FUNCS = {
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "exp": np.exp, "sqrt": np.sqrt, "abs": np.abs, "sign": np.sign,
    "minimum": np.minimum, "maximum": np.maximum, "min": min, "max": max, "clip": np.clip, "where": np.where,
    "floor": np.floor, "ceil": np.ceil, "arctan2": np.arctan2, "tanh": np.tanh, "mod": np.mod,
}
_ALLOWED_CONSTS = {"pi": np.pi, "e": np.e}
_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Call, ast.Name, ast.Load, ast.Constant,
                  ast.Compare, ast.IfExp, ast.BoolOp, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


def _expression(value, where: str) -> ast.expr:
    """A number or an expression of ``t`` -> its validated expression tree (a number becomes a constant).
    Invalid names are a ConfigError listing the valid ones."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        const = float(value)
        if not np.isfinite(const):
            raise ConfigError(f"{where}: value must be finite, got {value!r}")
        return ast.Constant(const)
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a number or an expression of t, got {value!r}")
    try:
        tree = ast.parse(value, mode="eval")
    except SyntaxError as exc:
        raise ConfigError(f"{where}: invalid expression {value!r}: {exc.msg}") from None
    valid = {"t", *_ALLOWED_FUNCS, *_ALLOWED_CONSTS}
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ConfigError(f"{where}: {type(node).__name__} not allowed in expression {value!r}")
        if isinstance(node, ast.Name) and node.id not in valid:
            raise ConfigError(f"{where}: unknown name {node.id!r} in {value!r}; valid names: {sorted(valid)}")
    return tree.body


def _compile(body: ast.expr, where: str) -> Callable:
    """``lambda t: <body>`` compiled ONCE (the validated tree; only the allowed functions and constants in its
    namespace): a scripted input then costs one Python call per step, not an ``eval`` of the expression."""
    lam = ast.Expression(ast.Lambda(_T_ARGUMENTS, body))
    return eval(compile(ast.fix_missing_locations(lam), where, "eval"), _namespace())  # noqa: S307 - validated


def _namespace() -> dict:
    return {"__builtins__": {}, **_ALLOWED_FUNCS, **_ALLOWED_CONSTS}


_T_ARGUMENTS = ast.arguments(posonlyargs=[], args=[ast.arg("t")], kwonlyargs=[], kw_defaults=[], defaults=[])


def time_function(value, where: str) -> Callable[[float], float]:
    """A number or an expression of ``t`` -> f(t) -> float. Invalid names are a ConfigError listing the
    valid ones."""
    body = _expression(value, where)
    if isinstance(body, ast.Constant):
        return lambda t, c=body.value: c
    fn = _compile(body, where)

    def f(t: float) -> float:
        return float(fn(t))
    try:
        f(0.0)
    except Exception as exc:  # e.g. wrong number of arguments
        raise ConfigError(f"{where}: expression {value!r} fails at t = 0: {exc}") from None
    f.expression = body
    return f


def vector_function(value, n: int, where: str) -> Callable[[float], np.ndarray]:
    """A list of ``n`` numbers or expressions of ``t`` -> f(t) -> (n,) array (the same array every call: copy
    it to keep it). All components are evaluated by one compiled function."""
    if not isinstance(value, (list, tuple)) or len(value) != n:
        raise ConfigError(f"{where}: expected a list of {n} numbers or expressions of t, got {value!r}")
    return stacked_function([time_function(v, f"{where}[{i}]") for i, v in enumerate(value)], where)


def stacked_function(fns: list, where: str) -> Callable[[float], np.ndarray]:
    """The ``time_function``s ``fns`` -> f(t) -> (n,) array of their values, all computed by one compiled
    function (the same array every call: copy it to keep it)."""
    out = np.array([fn(0.0) for fn in fns], dtype=float)
    # def f(t): out[i] = float(<expression i>) for the non-constant components; return out -- compiled once
    assign = [ast.Assign([ast.Subscript(ast.Name("out", ast.Load()), ast.Constant(i), ast.Store())],
                         ast.Call(ast.Name("float", ast.Load()), [fn.expression], []))
              for i, fn in enumerate(fns) if hasattr(fn, "expression")]
    func = ast.FunctionDef("f", _T_ARGUMENTS, assign + [ast.Return(ast.Name("out", ast.Load()))], [], None,
                           type_params=[])
    namespace = {**_namespace(), "out": out, "float": float}
    exec(compile(ast.fix_missing_locations(ast.Module([func], [])), where, "exec"), namespace)  # noqa: S102
    return namespace["f"]


# -------------------------------------------------------------------------------------- the scene

# ------------------------------------------------------------------------------ bodies and robots


def parse_shape(value, where: str) -> ShapeSpec:
    """A shape entry: 'halfspace' or one of {box: [x, y, z]}, {sphere: r}, {cylinder: [r, length]},
    {capsule: [r, length]} (m) -> ShapeSpec; ConfigError naming ``where``."""
    if value == "halfspace":
        return ShapeSpec("halfspace")
    if not isinstance(value, dict) or len(value) != 1:
        raise ConfigError(f"{where}: a shape is 'halfspace' or one of {{box: [x, y, z]}}, {{sphere: r}}, "
                          f"{{cylinder: [r, length]}}, {{capsule: [r, length]}}; got {value!r}")
    (kind, size), = value.items()
    expected = {"box": 3, "sphere": 1, "cylinder": 2, "capsule": 2}
    if kind not in expected:
        raise ConfigError(f"{where}: " + unknown_choice("shape", kind, ShapeSpec.KINDS))
    arr = parse_vector(size, expected[kind], f"{where}.{kind}")
    if np.any(arr <= 0):
        raise ConfigError(f"{where}.{kind}: sizes must be > 0 m, got {size!r}")
    return ShapeSpec(kind, tuple(arr))



ROBOT_ENTRY_KEYS = ("name", "robot", "base_pose", "parent", "prefix", "namespace", "frame_prefix", "controllers_file",
                    "inactive_controllers")


def _scene_robots(data: dict, base_dir, source: str) -> list:
    """The robots of a scene mapping: ``robot:`` (one robot, named by its preset, no prefix) first, then every
    entry of ``robots:``. Returns prefixed ``RobotPreset``s in that order. ConfigError on a malformed entry, a
    repeated name, an unknown parent robot or a mounting cycle (the names are checked against the URDFs when the
    model is built: ``compose_robots``)."""
    robots = []
    if data.get("robot") is not None:
        robots.append(load_robot_preset(data["robot"], base_dir=base_dir))
    entries = data.get("robots")
    if entries is not None:
        if not isinstance(entries, list) or not entries:
            raise ConfigError(f"{source}: 'robots' is a non-empty list of robot entries ({{name, robot, base_pose, "
                              f"parent, prefix, namespace, frame_prefix}}), got {entries!r}")
        for i, e in enumerate(entries):
            where = f"robots[{i}]"
            if not isinstance(e, dict) or not isinstance(e.get("name"), str) or not e["name"].strip():
                raise ConfigError(f"{source}: {where}: each robot is a mapping with a unique 'name' (string) and "
                                  f"a 'robot' (a preset name or a robot mapping), got {e!r}")
            name = e["name"]
            where = f"{where} ({name})"
            unknown = set(e) - set(ROBOT_ENTRY_KEYS)
            if unknown:
                raise ConfigError(f"{source}: {where}: unknown key(s) {sorted(unknown)}; valid: {list(ROBOT_ENTRY_KEYS)}")
            if e.get("robot") is None:
                raise ConfigError(f"{source}: {where}: missing key 'robot' (a preset name such as iiwa_wsg, or a "
                                  f"mapping {{urdf: ..., gains: ...}} as the scene key 'robot')")
            prefix = e.get("prefix", "") or ""
            if not isinstance(prefix, str) or any(c.isspace() for c in prefix):
                raise ConfigError(f"{source}: {where}: prefix must be a string without spaces, got {prefix!r}")
            for key in ("namespace", "frame_prefix", "controllers_file"):
                if e.get(key) is not None and not isinstance(e[key], str):
                    raise ConfigError(f"{source}: {where}: {key} must be a string, got {e[key]!r}")
            controllers_file = e.get("controllers_file")
            if controllers_file:
                path = Path(controllers_file)
                if not path.is_absolute() and base_dir is not None:
                    path = Path(base_dir) / path
                if not path.is_file():
                    raise ConfigError(f"{source}: {where}: controllers_file {controllers_file!r} not found "
                                      f"(looked for {path})")
                controllers_file = str(path)
            inactive = e.get("inactive_controllers")
            if inactive is not None:
                if not isinstance(inactive, list) or not all(isinstance(n, str) for n in inactive):
                    raise ConfigError(f"{source}: {where}: inactive_controllers is a list of controller names, "
                                      f"got {inactive!r}")
                inactive = tuple(inactive)
            parent = e.get("parent")
            parent_robot = parent_link = None
            if parent is not None:
                if (not isinstance(parent, dict) or set(parent) != {"robot", "link"}
                        or not all(isinstance(v, str) for v in parent.values())):
                    raise ConfigError(f"{source}: {where}: parent is {{robot: <robot name>, link: <link of that "
                                      f"robot>}}, got {parent!r}")
                parent_robot, parent_link = parent["robot"], parent["link"]
            preset = load_robot_preset(e["robot"], base_dir=base_dir)
            if "base_pose" in e:
                base_pose = parse_pose(e["base_pose"], f"{source}: {where}.base_pose")
            else:   # a preset's own base pose is a world pose: a mounted robot sits on the link's frame
                base_pose = pin.SE3.Identity() if parent is not None else preset.base_pose
            robots.append(prefixed_preset(preset, prefix, name=name, base_pose=base_pose, preset_name=preset.name,
                                          parent_robot=parent_robot, parent_link=parent_link,
                                          namespace=e.get("namespace"), frame_prefix=e.get("frame_prefix"),
                                          controllers_file=controllers_file or None, inactive_controllers=inactive))
    mount_order(robots, source)      # names unique, parents known, no cycle
    return robots




@dataclass
class ExternalForce:
    """A scripted wrench on a body (free object or robot link), world frame, applied at the body origin."""

    body: str
    joint_id: int
    frame_id: int
    force: Callable[[float], np.ndarray]     # N
    torque: Callable[[float], np.ndarray]    # N*m
    wrench: Callable[[float], np.ndarray] | None = None   # (6,) [force N; torque N*m] in one call


@dataclass
class JointScript:
    joint: str
    position: Callable[[float], float] | None = None   # rad or m
    velocity: Callable[[float], float] | None = None   # rad/s or m/s
    effort: Callable[[float], float] | None = None     # N*m or N


@dataclass(eq=False)
class Scene:
    model: MultibodyModel
    q0: np.ndarray
    v0: np.ndarray
    source: str
    robot: RobotPreset | None = None
    contact_margin: float = 0.01                       # m
    external_forces: list = field(default_factory=list)
    joint_scripts: list = field(default_factory=list)
    surface_velocities: dict = field(default_factory=dict)   # geometry index -> f(t) -> (3,) m/s world
    objects: list = field(default_factory=list)
    environment: list = field(default_factory=list)
    # every robot (``robot:`` first, then ``robots:``; model/composition.py), its names prefixed; ``robot`` is the
    # first of them (or None), for callers that know one robot
    robots: list = field(default_factory=list)
    # joints left without a drive whatever the robot declares (scene key passive_joints; sim/default_gains.py)
    passive_joints: tuple = ()
    # the cameras (cameras.spec.CameraSpec): the ``camera`` sensors' specs, ``cameras:`` then ``sensors:`` entries
    cameras: list = field(default_factory=list)
    # every sensor of the scene (sensors/base.Sensor, built through the sensor registry: sensors/base.scene_sensors):
    # a camera per ``cameras:`` entry, then the ``sensors:`` entries (a sensor a broadcaster names by sensor_name,
    # as a <ros2_control> <sensor>: driver/world.py)
    sensors: list = field(default_factory=list)

    def __post_init__(self):
        if not self.robots and self.robot is not None:
            self.robots = [self.robot]

    def scene_robot(self, name: str) -> RobotPreset:
        """The robot named ``name`` (ConfigError listing the robots if unknown)."""
        for r in self.robots:
            if r.name == name:
                return r
        raise ConfigError(f"{self.source}: " + unknown_choice("robot", name, [r.name for r in self.robots]))


_SCENE_KEYS = {"gravity", "robot", "robots", "objects", "environment", "materials", "disabled_collisions",
               "contact_margin", "inputs", "description", "initial_positions", "passive_joints", "cameras",
               "sensors"}


def load_scene(scene, source: str | None = None) -> Scene:
    """Load a scene from a YAML path, a preset-relative name under scenes/, or a dict. ``source``: for a dict
    read from (or built on) a scene file, that file's path: errors name it (instead of ``<scene dict>``) and
    relative URDF paths resolve against its folder first."""
    if isinstance(scene, Scene):
        return scene
    if isinstance(scene, dict):
        data, source = scene, str(source) if source is not None else "<scene dict>"
    else:
        path = Path(str(scene))
        if not path.is_file():
            cand = Path(share_dir()) / "scenes" / path
            cand = cand if cand.suffix else cand.with_suffix(".yaml")
            if not cand.is_file():
                raise ConfigError(f"scene file {path}: is a directory, not a file" if path.is_dir() else
                                  f"scene file not found: {path} (also looked for {cand})")
            path = cand
        source = str(path)
        data = read_mapping(path, "a scene")
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a scene is a mapping, got {type(data).__name__}")
    check_keys(data, _SCENE_KEYS, source)
    try:
        return _build(data, source)
    except ContactSimError as exc:
        msg = str(exc)
        raise type(exc)(msg if msg.startswith(source) else f"{source}: {msg}") from None


def _build(data: dict, source: str) -> Scene:
    scene_dir = Path(source).parent if Path(source).is_file() else None
    robots = _scene_robots(data, scene_dir, source)       # 'robot:' and 'robots:' (prefixed names)
    robot = robots[0] if robots else None
    objects, velocities = [], {}
    for i, o in enumerate(data.get("objects") or []):
        where = f"objects[{i}]"
        if not isinstance(o, dict) or "name" not in o:
            raise ConfigError(f"{where}: each object is a mapping with a 'name'")
        valid = {"name", "shape", "mass", "density", "urdf", "pose", "velocity", "material", "friction", "mesh",
                 "scale", "collision", "decomposition", "visual"}
        if set(o) - valid:
            raise ConfigError(f"{where} ({o['name']}): unknown key(s) {sorted(set(o) - valid)}; valid: {sorted(valid)}")
        where = f"{where} ({o['name']})"
        if sum(k in o for k in ("shape", "urdf", "mesh")) != 1:
            raise ConfigError(f"{where}: give exactly one of 'shape', 'urdf' and 'mesh'")
        shape = parse_shape(o["shape"], f"{where}.shape") if "shape" in o else None
        mass, density = o.get("mass"), o.get("density")
        for key, value in (("mass", mass), ("density", density)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ConfigError(f"{where}.{key}: a number, got {value!r}")
        if mass is None and density is not None and shape is not None:
            mass, density = float(density) * shape.volume(), None
        mesh = _mesh_entry(o, scene_dir, where) if "mesh" in o else None
        if "mesh" not in o and set(o) & {"scale", "decomposition"}:
            raise ConfigError(f"{where}: 'scale' and 'decomposition' are keys of mesh objects ('mesh: FILE')")
        visual = None
        if "visual" in o:
            if "urdf" in o:
                raise ConfigError(f"{where}.visual: a URDF object's visuals are its links' <visual> elements")
            visual = parse_visual_entry(o["visual"], lambda f: resolve_mesh_path(str(f), scene_dir),
                                        mesh.scale if mesh is not None else (1.0, 1.0, 1.0), f"{where}.visual")
        material = dict(o.get("material") or {})
        if "friction" in o:
            material["friction"] = o["friction"]
        objects.append(ObjectSpec(str(o["name"]), shape, None if mass is None else float(mass), o.get("urdf"),
                                  parse_pose(o.get("pose"), f"{where}.pose"), material, mesh,
                                  None if density is None else float(density),
                                  parse_collision(o.get("collision", "auto"), f"{where}.collision"),
                                  parse_decomposition(o.get("decomposition"), f"{where}.decomposition"), visual))
        if "velocity" in o:
            velocities[str(o["name"])] = parse_vector(o["velocity"], 6, f"{where}.velocity")
    environment, surface = [], {}
    for i, e in enumerate(data.get("environment") or []):
        where = f"environment[{i}]"
        if not isinstance(e, dict) or "name" not in e:
            raise ConfigError(f"{where}: each environment entry is a mapping with a 'name'")
        valid = {"name", "shape", "urdf", "mesh", "scale", "collision", "decomposition", "pose", "material",
                 "surface_velocity"}
        if set(e) - valid:
            raise ConfigError(f"{where} ({e['name']}): unknown key(s) {sorted(set(e) - valid)}; valid: {sorted(valid)}")
        where = f"{where} ({e['name']})"
        if sum(k in e for k in ("shape", "urdf", "mesh")) != 1:
            raise ConfigError(f"{where}: give exactly one of 'shape', 'urdf' and 'mesh'")
        if "shape" in e and set(e) & {"scale", "collision", "decomposition"}:
            raise ConfigError(f"{where}: 'scale', 'collision' and 'decomposition' are keys of 'mesh' (and "
                              f"'collision', 'decomposition' of 'urdf') entries")
        if "urdf" in e and "scale" in e:
            raise ConfigError(f"{where}: 'scale' is a key of 'mesh' entries (a URDF scales its meshes itself)")
        environment.append(EnvironmentSpec(
            str(e["name"]), parse_shape(e["shape"], f"{where}.shape") if "shape" in e else None,
            e.get("urdf"), parse_pose(e.get("pose"), f"{where}.pose"), dict(e.get("material") or {}),
            _mesh_entry(e, scene_dir, where) if "mesh" in e else None,
            parse_collision(e.get("collision", "auto"), f"{where}.collision"),
            parse_decomposition(e.get("decomposition"), f"{where}.decomposition")))
        if "surface_velocity" in e:
            surface[str(e["name"])] = vector_function(e["surface_velocity"], 3, f"{where}.surface_velocity")

    model = build_scene_model(robots, objects, environment, materials=data.get("materials") or {},
                              disabled_collisions=data.get("disabled_collisions") or (),
                              gravity=data.get("gravity", (0.0, 0.0, -9.81)), source=source)
    pm = model.pin_model
    q0 = pin.neutral(pm)
    v0 = np.zeros(pm.nv)
    initial = {}
    for r in robots:
        initial.update(r.initial_positions)
    initial.update({str(k): float(v) for k, v in (data.get("initial_positions") or {}).items()})
    for name, value in initial.items():
        i = model.joint_index(name)
        q0[model.joint_q_index[i]] = value
    for obj in objects:
        body = model.free_body(obj.name)
        q0[body.q_slice] = pin.SE3ToXYZQUAT(obj.pose)
        if obj.name in velocities:
            R = obj.pose.rotation
            vel = velocities[obj.name]
            v0[body.v_slice] = np.concatenate([R.T @ vel[:3], R.T @ vel[3:]])
    margin = float(data.get("contact_margin", 0.01))
    if not np.isfinite(margin) or margin < 0:
        raise ConfigError(f"contact_margin must be >= 0 m, got {margin!r}")

    inputs = data.get("inputs") or {}
    if set(inputs) - {"external_forces", "joint_targets"}:
        raise ConfigError(f"inputs: unknown key(s) {sorted(set(inputs) - {'external_forces', 'joint_targets'})}; "
                          f"valid: ['external_forces', 'joint_targets']")
    forces = []
    for i, f in enumerate(inputs.get("external_forces") or []):
        where = f"inputs.external_forces[{i}]"
        body = str(f.get("body"))
        joint_id, frame_id = _body_joint(model, body, where)
        components = []
        for key in ("force", "torque"):
            value = f.get(key, [0, 0, 0])
            if not isinstance(value, (list, tuple)) or len(value) != 3:
                raise ConfigError(f"{where}.{key}: expected a list of 3 numbers or expressions of t, got {value!r}")
            components.append([time_function(v, f"{where}.{key}[{i}]") for i, v in enumerate(value)])
        forces.append(ExternalForce(body, joint_id, frame_id, stacked_function(components[0], f"{where}.force"),
                                    stacked_function(components[1], f"{where}.torque"),
                                    stacked_function(components[0] + components[1], f"{where}.wrench")))
    scripts = []
    for i, j in enumerate(inputs.get("joint_targets") or []):
        where = f"inputs.joint_targets[{i}]"
        name = str(j.get("joint"))
        model.joint_index(name)
        scripts.append(JointScript(name, *(time_function(j[k], f"{where}.{k}") if k in j else None
                                          for k in ("position", "velocity", "effort"))))
    passive = data.get("passive_joints") or []
    if not isinstance(passive, (list, tuple)) or not all(isinstance(j, str) for j in passive):
        raise ConfigError(f"passive_joints: a list of joint names (left without a drive), got {passive!r}")
    for name in passive:
        if name not in model.joint_names:
            raise ConfigError("passive_joints: " + unknown_choice("joint", name, model.joint_names))
    surface_by_geom = {}
    for name, f in surface.items():
        for g, link in enumerate(model.geometry_names):
            if link == name or link.startswith(name + "/"):
                surface_by_geom[g] = f
    # the sensors through the registry (sensors/base.py): the cameras, then the sensors: list; the cameras the node
    # renders are the camera sensors
    sensors = scene_sensors(data.get("sensors"), model, parse_cameras(data.get("cameras"), model, source))
    cameras = [s.camera for s in sensors if s.type_name == "camera"]
    return Scene(model, q0, v0, source, robot, margin, forces, scripts, surface_by_geom, objects, environment,
                 robots, tuple(dict.fromkeys(passive)), cameras, sensors)


def _mesh_entry(o: dict, scene_dir, where: str) -> MeshSpec:
    """A scene object's ``mesh`` (a file: relative to the scene, the working directory or the object set
    meshes/) with ``scale``, ``collision`` and ``decomposition`` -> MeshSpec."""
    value = o["mesh"]
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}.mesh: a mesh file (OBJ, STL, PLY, OFF, GLB/glTF, DAE), got {value!r}")
    path = resolve_mesh_path(value, scene_dir)
    if path is None:
        raise ModelError(f"{where}: mesh file not found: {value} (looked relative to the scene, the working "
                         f"directory and {meshes_dir()})")
    return parse_mesh_entry(o, path, where)


def _body_joint(model: MultibodyModel, body: str, where: str) -> tuple[int, int]:
    pm = model.pin_model
    for fb in model.free_bodies:
        if fb.name == body:
            return fb.joint_id, pm.getFrameId(fb.frame_name)
    if pm.existFrame(body):
        fid = pm.getFrameId(body)
        return int(pm.frames[fid].parentJoint), fid
    raise ConfigError(f"{where}: " + unknown_choice("body", body, model_body_names(model)))
