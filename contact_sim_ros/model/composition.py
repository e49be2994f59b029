"""Several robots in ONE physics model: what the scene key ``robots:`` (docs/design.md, "Scene files"; parsed in
sim/scene.py) builds.

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
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin

from ..errors import ConfigError, ModelError, unknown_choice
from .multibody_model import MultibodyModel, RobotInstance

# ---------------------------------------------------------------------------------------- names


def prefix_urdf(root: ET.Element, prefix: str) -> None:
    """Prepend ``prefix`` in place to every link and joint name of a parsed URDF ``<robot>`` and to every
    reference to them: joint ``<parent>``/``<child>`` links, ``<mimic joint>``, the joints (and sensors) of
    ``<ros2_control>`` blocks and ``<transmission>``s, ``<gazebo reference>``. Material names are global to the
    file and stay. Pinocchio names frames after links and joints and collision geometries ``<link>_<k>``, so
    every name of the robot in the model carries the prefix."""
    if not prefix:
        return

    def add(el, attr):
        if el is not None and el.get(attr):
            el.set(attr, prefix + el.get(attr))
    for link in root.findall("link"):
        add(link, "name")
    for joint in root.findall("joint"):
        add(joint, "name")
        add(joint.find("parent"), "link")
        add(joint.find("child"), "link")
        add(joint.find("mimic"), "joint")
    for block in root.iter("ros2_control"):
        for el in block.findall("joint") + block.findall("sensor"):
            add(el, "name")
            for param in el.findall("param"):     # mimic leader, a sensor's links and frame
                if param.get("name") in ("mimic", "parent_link", "child_link", "frame_id") and param.text:
                    if param.get("name") != "mimic" or param.text.strip() != "urdf":
                        param.text = prefix + param.text.strip()
    for tr in root.findall("transmission"):
        for el in tr.findall("joint"):
            add(el, "name")
    for gz in root.findall("gazebo"):
        add(gz, "reference")


def prefix_urdf_xml(xml_text: str, prefix: str) -> str:
    """``prefix_urdf`` on a URDF document (e.g. a robot's ``robot_description`` for its own namespace, or a
    ``<ros2_control>`` file): the prefixed XML text."""
    root = ET.fromstring(xml_text)
    prefix_urdf(root, prefix)
    return ET.tostring(root, encoding="unicode")


def prefixed_preset(preset, prefix: str, **changes):
    """A copy of ``preset`` with ``prefix`` prepended to every joint, link and frame name it holds (joint
    groups' joints, gains, initial positions, armature, the F/T sensor's frame and links, tool and fingertip
    frames, contact bodies, per-link materials, disabled collisions) and ``changes`` applied (name, base_pose,
    parent, namespace, ...). Group and controller names and the F/T topic stay (they live in the robot's
    namespace)."""
    from .loader import JointGroup
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
    from .loader import _check_preset_against_model, load_urdf
    if robots is None:
        robots = []
    elif not isinstance(robots, (list, tuple)):
        robots = [robots]
    out = Composition(model, geom, list(robots))
    owner_joint, owner_link = {}, {}       # name -> robot, over the robots appended so far
    for k, r in enumerate(mount_order(robots, source)):
        urdf = load_urdf(r.urdf, package_dirs=list(r.package_dirs), prefix=r.prefix)
        joints = list(urdf.model.names[1:])
        _check_preset_against_model(r, urdf.model, urdf.mimic_joints)
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
