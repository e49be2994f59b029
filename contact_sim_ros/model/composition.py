"""The scene's ONE physics model (``build_scene_model``): robot(s) + free objects + static environment -> an
immutable ``MultibodyModel``, from what ``loader.py`` reads. Several robots: what the scene key ``robots:``
(docs/design.md, "Scene files"; parsed in sim/scene.py) builds.

Each robot of a scene is a ``RobotPreset`` whose names already carry the robot's ``prefix`` (``prefixed_preset``):
joint groups, gains, initial positions, armature, F/T sensor, tool and fingertip frames, contact bodies, materials
and disabled collisions. ``compose_robots`` loads every robot's URDF with the prefix applied to the XML
(``prefix_urdf``: links, joints, mimic references, ``<ros2_control>``/``<transmission>`` joints, as the
``prefix``/``tf_prefix`` xacro arguments of real multi-robot descriptions do) and appends it to the one Pinocchio
model with ``pin.appendModel``, at the world (``base_pose`` in the world) or at a link of another robot
(``parent: {robot, link}``, ``base_pose`` relative to that link): a hand on an arm's flange moves with the arm and
its contact forces act on the arm's joints too. Pinocchio keeps the joints of a kinematic tree contiguous (a
mounted robot's joints come right after its parent's), so ``MultibodyModel.tree_velocity_slices`` stay blocks.

The result is recorded in ``MultibodyModel.robots`` (``RobotInstance``: name, prefix, actuated joints as indices
into ``MultibodyModel.joint_names``, links, base frame, mount), in the scene's order.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin

from ..errors import ConfigError, ModelError, unknown_choice
from ..yaml_files import parse_vector
from .loader import EnvironmentSpec, JointGroup, ObjectSpec, load_urdf, resolve_urdf_path, urdf_dir
from .materials import ContactMaterial
from .mesh_object import MeshSpec, mesh_body
from .multibody_model import FreeBody, MimicJoint, MultibodyModel, RobotInstance
from .robot_description import default_package_dirs, prefix_urdf_xml, resolve_uri

# ---------------------------------------------------------------------------------------- names


def prefixed_preset(preset, prefix: str, **changes):
    """A copy of ``preset`` with ``prefix`` prepended to every joint, link and frame name it holds (joint
    groups' joints, gains, initial positions, armature, the F/T sensor's frame and links, tool and fingertip
    frames, contact bodies, per-link materials, disabled collisions) and ``changes`` applied (name, base_pose,
    parent, namespace, ...). Group and controller names and the F/T topic stay (they live in the robot's
    namespace)."""
    p = prefix

    def names(seq):
        return tuple(p + str(n) for n in seq)
    ft = preset.ft_sensor
    if isinstance(ft, dict):
        ft = {k: (p + str(v) if k in ("frame", "parent_link", "child_link") and v else v) for k, v in ft.items()}
    return dataclasses.replace(
        preset, prefix=p,
        initial_positions={p + k: v for k, v in preset.initial_positions.items()},
        joint_groups={g: JointGroup(grp.name, names(grp.joints), grp.controller)
                      for g, grp in preset.joint_groups.items()},
        gains={p + k: v for k, v in preset.gains.items()},
        driven_joints=names(preset.driven_joints),
        armature={p + k: v for k, v in preset.armature.items()},
        ft_sensor=ft,
        tool_frame=p + preset.tool_frame if preset.tool_frame else preset.tool_frame,
        fingertip_frames=names(preset.fingertip_frames),
        contact_bodies=names(preset.contact_bodies),
        materials={(k if k == "default" else p + k): v for k, v in preset.materials.items()},
        disabled_collisions=tuple(names(pair) for pair in preset.disabled_collisions),
        **changes)


# ------------------------------------------------------------------------------------ mounting order


def mount_order(robots, source: str) -> list:
    """``robots`` ordered so that every parent comes before the robots mounted on it (otherwise in the given
    order). ConfigError on a repeated name, an unknown parent robot or a cycle."""
    names = [r.name for r in robots]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"{source}: robot names must be unique; repeated: {repeated} (the scene key 'robot' is "
                          f"named after its preset)")
    by_name = {r.name: r for r in robots}
    for r in robots:
        if r.parent_robot is not None and r.parent_robot not in by_name:
            raise ConfigError(f"{source}: robot {r.name!r}: parent " + unknown_choice("robot", r.parent_robot, names))
    for r in robots:
        chain, cur = [r.name], r
        while cur.parent_robot is not None:
            cur = by_name[cur.parent_robot]
            if cur.name in chain:
                cycle = chain[chain.index(cur.name):] + [cur.name]
                raise ConfigError(f"{source}: robots mounted in a cycle: {' -> '.join(cycle)} (each 'parent' must "
                                  f"lead to a robot on the world)")
            chain.append(cur.name)
    ordered, placed = [], set()
    while len(ordered) < len(robots):
        for r in robots:
            if r.name not in placed and (r.parent_robot is None or r.parent_robot in placed):
                ordered.append(r)
                placed.add(r.name)
    return ordered


# ------------------------------------------------------------------------------------- composition


@dataclass
class Composition:
    """The robots appended to a Pinocchio model, and what ``build_scene_model`` needs of them."""

    model: pin.Model
    geometry: pin.GeometryModel
    robots: list = field(default_factory=list)                   # RobotPresets in the scene's order
    link_parents: dict = field(default_factory=dict)             # child link -> parent link (incl. mounts)
    mimic_joints: tuple = ()
    material_overrides: dict = field(default_factory=dict)
    disabled_collisions: list = field(default_factory=list)
    sources: list = field(default_factory=list)                  # preset files, for messages
    _links: dict = field(default_factory=dict)                   # robot name -> its (prefixed) links
    _joints: dict = field(default_factory=dict)                  # robot name -> its (prefixed) joints
    _mimics: dict = field(default_factory=dict)                  # robot name -> its mimic joints
    _base: dict = field(default_factory=dict)                    # robot name -> root link

    def instances(self, model: MultibodyModel) -> MultibodyModel:
        """``model`` with ``robots`` set: one ``RobotInstance`` per robot, in the scene's order."""
        out = []
        for r in self.robots:
            own = set(self._joints[r.name])
            idx = [i for i, n in enumerate(model.joint_names) if n in own]
            ji = np.array(idx, dtype=int)
            ji.setflags(write=False)
            out.append(RobotInstance(
                name=r.name, prefix=r.prefix, preset=r.preset_name,
                joint_names=tuple(model.joint_names[i] for i in idx), joint_indices=ji,
                mimic_joint_names=self._mimics[r.name], link_names=self._links[r.name],
                base_frame=self._base[r.name], parent_robot=r.parent_robot,
                parent_frame=r.parent_link if r.parent_robot is not None else "universe",
                base_placement=r.base_pose.copy()))
        return dataclasses.replace(model, robots=tuple(out))


def compose_robots(model: pin.Model, geom: pin.GeometryModel, robots, source: str) -> Composition:
    """Append ``robots`` (None, one ``RobotPreset`` or a sequence) to ``model``/``geom`` (see the module
    docstring). Raises ConfigError for robots sharing joint or link names (give them prefixes), an unknown parent
    link, a repeated name or a cycle; ModelError for preset names that are not in the robot's URDF."""
    if robots is None:
        robots = []
    elif not isinstance(robots, (list, tuple)):
        robots = [robots]
    out = Composition(model, geom, list(robots))
    owner_joint, owner_link = {}, {}       # name -> robot, over the robots appended so far
    for k, r in enumerate(mount_order(robots, source)):
        urdf = load_urdf(r.urdf, package_dirs=list(r.package_dirs), prefix=r.prefix)
        joints = list(urdf.model.names[1:])
        _check_preset_against_model(r, urdf.model)
        _check_clashes(r, joints, urdf.link_names, owner_joint, owner_link, robots, source)
        root = next(ln for ln in urdf.link_names if ln not in urdf.link_parents)
        frame = 0
        if r.parent_robot is not None:
            link = _mount_link(out, r, source)
            frame = out.model.getFrameId(link, pin.FrameType.BODY)
            r = dataclasses.replace(r, parent_link=link)
            out.robots = [r if x.name == r.name else x for x in out.robots]
            out.link_parents[root] = link          # hand base / flange link: URDF-adjacent, never in contact
        try:
            out.model, out.geometry = pin.appendModel(out.model, urdf.model, out.geometry, urdf.collision_model,
                                                      frame, r.base_pose)
        except ValueError as exc:    # should have been caught by _check_clashes
            raise ModelError(f"{source}: robot {r.name!r} cannot be added: {exc}") from None
        out.link_parents.update(urdf.link_parents)
        out.mimic_joints += urdf.mimic_joints
        out.disabled_collisions += [tuple(p) for p in r.disabled_collisions]
        out.sources.append(r.source)
        first = r is robots[0] or r.name == robots[0].name
        if first:       # as for a single robot: its 'default' material is the scene's default
            out.material_overrides.update(r.materials)
        else:           # another robot's 'default' applies to its own links only
            linked = {urdf.model.frames[go.parentFrame].name for go in urdf.collision_model.geometryObjects}
            default = r.materials.get("default", {})
            for name, mat in r.materials.items():
                if name != "default":
                    out.material_overrides[name] = {**default, **mat} if name in linked else mat
            if default:
                for link in linked - set(r.materials):
                    out.material_overrides[link] = dict(default)
        out._links[r.name] = tuple(urdf.link_names)
        out._joints[r.name] = tuple(joints)
        out._mimics[r.name] = tuple(m.name for m in urdf.mimic_joints)
        out._base[r.name] = root
        for j in joints:
            owner_joint[j] = r.name
        for ln in urdf.link_names:
            owner_link[ln] = r.name
    armature = None
    for r in robots:     # reflected motor inertia on the joint's diagonal of M (crba adds model.armature)
        for joint, value in r.armature.items():
            if armature is None:
                armature = out.model.armature.copy()
            armature[out.model.joints[out.model.getJointId(joint)].idx_v] = value
    if armature is not None:
        out.model.armature = armature
    return out


def _check_preset_against_model(robot, model: pin.Model) -> None:
    """ModelError naming the preset file when a joint that ``robot`` (a RobotPreset) names in its joint groups,
    initial positions, gains or armature is not a joint of its URDF's ``model``."""
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


def _check_clashes(robot, joints, links, owner_joint, owner_link, robots, source):
    clash_j = [j for j in joints if j in owner_joint]
    clash_l = [ln for ln in links if ln in owner_link]
    if not (clash_j or clash_l):
        return
    others = sorted({owner_joint[j] for j in clash_j} | {owner_link[ln] for ln in clash_l})
    parts = []
    if clash_j:
        parts.append(f"joints {', '.join(clash_j)}")
    if clash_l:
        parts.append(f"links {', '.join(clash_l)}")
    raise ConfigError(f"{source}: robot {robot.name!r} and robot{'s' if len(others) > 1 else ''} "
                      f"{', '.join(repr(o) for o in others)} share the names of {' and '.join(parts)}: give the "
                      f"robots distinct 'prefix'es in 'robots:' (e.g. prefix: {robot.name}_)")


def _mount_link(out: Composition, robot, source: str) -> str:
    """The model name of the link ``robot`` is mounted on: ``parent.link`` as a link of the parent robot, given
    with or without the parent's prefix."""
    parent = next(r for r in out.robots if r.name == robot.parent_robot)
    links = out._links[parent.name]
    for cand in (robot.parent_link, parent.prefix + robot.parent_link):
        if cand in links:
            return cand
    shown = [ln[len(parent.prefix):] if parent.prefix and ln.startswith(parent.prefix) else ln for ln in links]
    raise ConfigError(f"{source}: robot {robot.name!r}: parent " + unknown_choice(
        f"link of robot {parent.name!r}", robot.parent_link, shown, plural="links"))


def robot_description_xml(robot) -> str:
    """The URDF text of a scene robot as it is in the model (prefixed), e.g. for its ``robot_description``."""
    text = Path(robot.urdf).read_text()
    return prefix_urdf_xml(text, robot.prefix) if robot.prefix else text


# ------------------------------------------------------------------------------- the scene's model

def build_scene_model(robot, objects: list[ObjectSpec], environment: list[EnvironmentSpec],
                      materials: dict | None = None, disabled_collisions=(), gravity=(0.0, 0.0, -9.81),
                      source: str = "<scene>") -> MultibodyModel:
    """Compose robot(s) + free objects + static environment into one MultibodyModel (see multibody_model.py).

    ``robot``: None, one ``RobotPreset`` or a sequence of them (``Scene.robots``: prefixed, possibly mounted on
    each other's links; model/composition.py). The model's ``robots`` holds one ``RobotInstance`` per robot."""
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
    """(name, world placement, coal shape) of a static environment entry: a primitive, the convex pieces of a mesh
    file (``<name>/<k>``; one piece: ``<name>``), or every collision geometry of a URDF whose links are all fixed
    (e.g. urdf/objects/table.urdf), its collision meshes cut into convex pieces as objects' are (``collision:
    auto``, the default: a tray keeps its floor, not its hull's lid)."""
    if env.mesh is not None:
        try:
            shapes = mesh_body(env.mesh).collision_geometries()
        except ModelError as exc:
            raise ModelError(f"{source}: environment {env.name!r}: {exc}") from None
        return [(env.name if len(shapes) == 1 else f"{env.name}/{k}", env.pose, shape)
                for k, shape in enumerate(shapes)]
    if env.urdf is None:
        if env.shape is None:
            raise ConfigError(f"{source}: environment {env.name!r} needs a 'shape', a 'mesh' or a 'urdf'")
        return [(env.name, env.pose, env.shape.collision_geometry())]
    path = resolve_urdf_path(env.urdf, Path(source).parent if os.path.isfile(source) else Path.cwd())
    if path is None:
        raise ModelError(f"{source}: environment {env.name!r}: URDF {env.urdf!r} not found "
                         f"(looked relative to the scene and in {urdf_dir()})")
    urdf = load_urdf(path, mesh_collision=env.collision, decomposition=env.decomposition)
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
            path = resolve_urdf_path(obj.urdf, Path(source).parent if os.path.isfile(source) else Path.cwd())
        if path is None:
            raise ModelError(f"{source}: object {obj.name!r}: URDF {obj.urdf!r} not found "
                             f"(looked relative to the scene and in {urdf_dir()})")
        if obj.mass is not None or obj.density is not None:
            path = _with_mesh_inertial(path, obj)
        urdf = load_urdf(path, floating_base_name=free_joint_name(obj.name), mesh_collision=obj.collision,
                         decomposition=obj.decomposition)
        model, geom = urdf.model, urdf.collision_model
        # the object's pose is its initial configuration, not a fixed placement
        return model, geom
    if obj.mesh is not None:
        return _mesh_object_model(obj)
    if obj.shape is None:
        raise ConfigError(f"{source}: object {obj.name!r} needs one of 'shape', 'mesh' and 'urdf'")
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


def _with_mesh_inertial(path, obj: ObjectSpec) -> str:
    """A single-link URDF object without ``<inertial>``, given a ``mass`` or ``density`` in the scene: its URDF text
    with the ``<inertial>`` of its collision mesh (model/mesh_object.py: mass, centre of mass and inertia of the
    mesh, scaled and placed by the collision's ``<origin>``), mesh paths made absolute."""
    text = str(path)
    is_doc = text.lstrip().startswith("<")
    source, base_dir = ("<urdf string>", os.getcwd()) if is_doc else (text, str(Path(text).parent))
    try:
        root = ET.fromstring(text if is_doc else Path(text).read_text())
    except ET.ParseError as exc:
        raise ModelError(f"{source}: malformed URDF XML: {exc}") from None
    links = root.findall("link")
    where = f"object {obj.name!r} ({source})"
    if len(links) != 1:
        raise ConfigError(f"{where}: 'mass'/'density' give the inertia of a one-link URDF from its collision mesh; "
                          f"this one has {len(links)} links: give each link an <inertial> instead")
    link = links[0]
    replaced = link.find("inertial")
    if replaced is not None:
        link.remove(replaced)
    meshes = [c for c in link.findall("collision") if c.find("geometry/mesh") is not None]
    if len(meshes) != 1 or len(link.findall("collision")) != 1:
        raise ConfigError(f"{where}: 'mass'/'density' need exactly one <collision> and it a <mesh> (the inertia "
                          f"comes from it); found {len(link.findall('collision'))} collision element(s)")
    dirs = default_package_dirs()
    for mesh in root.iter("mesh"):               # absolute: the text is loaded as a string below
        found = resolve_uri(mesh.get("filename", ""), base_dir, dirs)
        if found is not None:
            mesh.set("filename", found)
    mesh = meshes[0].find("geometry/mesh")
    file = mesh.get("filename", "")
    if not os.path.isfile(file):
        raise ModelError(f"{source}: link {link.get('name')!r}: collision mesh {file!r} not found")
    scale = parse_vector([float(x) for x in mesh.get("scale", "1 1 1").split()], 3, f"{source}: mesh scale")
    origin = meshes[0].find("origin")
    xyz = [float(x) for x in origin.get("xyz", "0 0 0").split()] if origin is not None else [0.0] * 3
    rpy = [float(x) for x in origin.get("rpy", "0 0 0").split()] if origin is not None else [0.0] * 3
    placement = pin.SE3(pin.rpy.rpyToMatrix(*rpy), np.array(xyz))
    try:
        body = mesh_body(MeshSpec(file, tuple(scale), obj.collision, dict(obj.decomposition)), mass=obj.mass,
                         density=obj.density)
    except ModelError as exc:
        raise ModelError(f"{where}: {exc}") from None
    com = placement.act(body.com)
    I = placement.rotation @ body.inertia @ placement.rotation.T
    inertial = ET.SubElement(link, "inertial")
    ET.SubElement(inertial, "origin", xyz=" ".join(repr(float(c)) for c in com), rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=repr(float(body.mass)))
    e = [[repr(float(x)) for x in row] for row in I]      # kg*m^2 about the centre of mass, link axes
    ET.SubElement(inertial, "inertia", ixx=e[0][0], ixy=e[0][1], ixz=e[0][2], iyy=e[1][1], iyz=e[1][2], izz=e[2][2])
    if replaced is not None:
        given = f"mass {obj.mass} kg" if obj.mass is not None else f"density {obj.density} kg/m^3"
        old_mass = replaced.find("mass")
        print(f"object {obj.name!r}: the scene's {given} overrides the <inertial> of {source} (mass "
              f"{old_mass.get('value') if old_mass is not None else '?'} kg): mass {body.mass:.6g} kg, inertia "
              f"from its collision mesh {file}", file=sys.stderr, flush=True)
    return ET.tostring(root, encoding="unicode")


def _mesh_object_model(obj: ObjectSpec):
    """A free body whose collision is the convex pieces of its mesh (all on its joint: they never collide with
    each other) and whose inertia is the mesh's (model/mesh_object.py). Its frame is the mesh file's."""
    if (obj.mass is None) == (obj.density is None):
        raise ConfigError(f"object {obj.name!r} (mesh {obj.mesh.path}): give exactly one of 'mass' (kg) and "
                          f"'density' (kg/m^3)")
    try:
        body = mesh_body(obj.mesh, mass=obj.mass, density=obj.density)
        shapes = body.collision_geometries()
    except ModelError as exc:
        raise ModelError(f"object {obj.name!r}: {exc}") from None
    model = pin.Model()
    jid = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), free_joint_name(obj.name))
    model.appendBodyToJoint(jid, body.pin_inertia(), pin.SE3.Identity())
    jframe = model.addJointFrame(jid, 0)
    fid = model.addBodyFrame(obj.name, jid, pin.SE3.Identity(), jframe)
    geom = pin.GeometryModel()
    for k, shape in enumerate(shapes):
        name = obj.name if len(shapes) == 1 else f"{obj.name}/{k}"
        geom.addGeometryObject(pin.GeometryObject(name, jid, fid, pin.SE3.Identity(), shape))
    return model, geom


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
