"""Small helpers to write self-contained URDFs of primitives: inertia of primitives, composite bodies, XML.

Every inertia is computed here from geometry (solid primitives of uniform density), so that the numbers in
the generated URDFs can be re-derived by the tests. Units: m, kg, kg*m^2, rad.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from xml.sax.saxutils import quoteattr

import numpy as np

# ----------------------------------------------------------------------------------------------------------
# Geometry primitives: ('box', (sx, sy, sz)), ('cylinder', (r, length)) along local z, ('sphere', (r,)),
# ('mesh', (filename,)) for visuals only.
# ----------------------------------------------------------------------------------------------------------


def box(sx, sy, sz):
    return ("box", (float(sx), float(sy), float(sz)))


def cylinder(r, length):
    return ("cylinder", (float(r), float(length)))


def sphere(r):
    return ("sphere", (float(r),))


def mesh(filename, scale=None):
    return ("mesh", (filename, scale))


def volume(geom) -> float:
    """Volume (m^3) of a solid primitive."""
    kind, p = geom
    if kind == "box":
        return p[0] * p[1] * p[2]
    if kind == "cylinder":
        return math.pi * p[0] ** 2 * p[1]
    if kind == "sphere":
        return 4.0 / 3.0 * math.pi * p[0] ** 3
    raise ValueError(f"no volume for {kind}")


def unit_inertia(geom) -> np.ndarray:
    """Rotational inertia per unit mass (m^2) of a solid primitive about its own centre, in its own frame."""
    kind, p = geom
    if kind == "box":
        sx, sy, sz = p
        return np.diag([sy**2 + sz**2, sx**2 + sz**2, sx**2 + sy**2]) / 12.0
    if kind == "cylinder":
        r, h = p
        ixx = (3.0 * r**2 + h**2) / 12.0
        return np.diag([ixx, ixx, r**2 / 2.0])
    if kind == "sphere":
        return np.eye(3) * 0.4 * p[0] ** 2
    raise ValueError(f"no inertia for {kind}")


def rpy_matrix(rpy) -> np.ndarray:
    """URDF convention: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def matrix_rpy(rot) -> tuple[float, float, float]:
    """Inverse of rpy_matrix (roll, pitch, yaw)."""
    rot = np.asarray(rot)
    sp = -rot[2, 0]
    sp = min(1.0, max(-1.0, sp))
    pitch = math.asin(sp)
    if abs(sp) < 1.0 - 1e-12:
        roll = math.atan2(rot[2, 1], rot[2, 2])
        yaw = math.atan2(rot[1, 0], rot[0, 0])
    else:  # gimbal lock: put everything in yaw
        roll = 0.0
        yaw = math.atan2(-rot[0, 1], rot[1, 1])
    return (roll, pitch, yaw)


@dataclass
class Part:
    """One primitive of a body: geometry, pose in the link frame, and its mass share."""

    geom: tuple
    xyz: tuple = (0.0, 0.0, 0.0)
    rpy: tuple = (0.0, 0.0, 0.0)
    name: str | None = None
    collision: bool = True
    visual: bool = True
    color: str = "grey"


def composite_inertia(parts, mass=None, density=None):
    """Mass (kg), centre of mass (m, link frame) and inertia about the COM (kg m^2, link frame) of a union of
    solid primitives of uniform density (overlaps counted twice). Give either the total ``mass`` (density is
    then mass / total volume) or the ``density`` (kg/m^3)."""
    vols = np.array([volume(p.geom) for p in parts])
    total = vols.sum()
    if density is None:
        density = mass / total
    masses = density * vols
    m = masses.sum()
    com = sum(mi * np.asarray(p.xyz, float) for mi, p in zip(masses, parts)) / m
    inertia = np.zeros((3, 3))
    for mi, p in zip(masses, parts):
        rot = rpy_matrix(p.rpy)
        ic = mi * rot @ unit_inertia(p.geom) @ rot.T
        d = np.asarray(p.xyz, float) - com
        inertia += ic + mi * (d @ d * np.eye(3) - np.outer(d, d))
    return float(m), com, inertia


def capsule_parts(r, length, xyz=(0, 0, 0), rpy=(0, 0, 0), name=None, color="grey"):
    """A capsule as a cylinder + two end spheres (urdf_parser_py 0.0.4 has no <capsule>)."""
    rot = rpy_matrix(rpy)
    c = np.asarray(xyz, float)
    axis = rot[:, 2] * (length / 2.0)
    base = name or "capsule"
    return [Part(cylinder(r, length), tuple(c), tuple(rpy), f"{base}_cyl", color=color),
            Part(sphere(r), tuple(c + axis), (0, 0, 0), f"{base}_end_a", color=color),
            Part(sphere(r), tuple(c - axis), (0, 0, 0), f"{base}_end_b", color=color)]


# ----------------------------------------------------------------------------------------------------------
# XML
# ----------------------------------------------------------------------------------------------------------

COLORS = {
    "grey": "0.6 0.6 0.6 1", "dark": "0.2 0.2 0.2 1", "orange": "1.0 0.42 0.04 1", "white": "0.95 0.95 0.95 1",
    "black": "0.05 0.05 0.05 1", "blue": "0.15 0.3 0.8 1", "red": "0.8 0.1 0.1 1", "green": "0.1 0.6 0.2 1",
    "bronze": "0.8 0.5 0.2 1", "wood": "0.6 0.4 0.2 1", "pad": "0.1 0.1 0.1 1", "clear": "0.6 0.8 1.0 0.6",
}


def _f(x) -> str:
    x = float(x)
    if x == 0.0:
        return "0"
    return f"{x:.12g}"


def _vec(v) -> str:
    return " ".join(_f(x) for x in v)


def _origin(xyz, rpy) -> str:
    return f'<origin xyz="{_vec(xyz)}" rpy="{_vec(rpy)}"/>'


def _geometry(geom) -> str:
    kind, p = geom
    if kind == "box":
        return f'<box size="{_vec(p)}"/>'
    if kind == "cylinder":
        return f'<cylinder radius="{_f(p[0])}" length="{_f(p[1])}"/>'
    if kind == "sphere":
        return f'<sphere radius="{_f(p[0])}"/>'
    if kind == "mesh":
        scale = f' scale="{_vec(p[1])}"' if p[1] is not None else ""
        return f'<mesh filename={quoteattr(p[0])}{scale}/>'
    raise ValueError(kind)


@dataclass
class Link:
    name: str
    mass: float | None = None              # None: a frame-only link (no inertial)
    com: tuple = (0.0, 0.0, 0.0)
    inertia: np.ndarray | None = None      # 3x3 about the COM, link frame
    parts: list = field(default_factory=list)
    mesh_visuals: list = field(default_factory=list)   # (mesh geom, xyz, rpy) used instead of primitive visuals
    comment: str | None = None

    def xml(self, use_mesh_visuals=False) -> str:
        out = [f'  <link name="{self.name}">']
        if self.comment:
            out.append(f"    <!-- {self.comment} -->")
        if self.mass is not None:
            i = self.inertia
            out += ["    <inertial>", f"      {_origin(self.com, (0, 0, 0))}", f'      <mass value="{_f(self.mass)}"/>',
                    f'      <inertia ixx="{_f(i[0, 0])}" ixy="{_f(i[0, 1])}" ixz="{_f(i[0, 2])}" '
                    f'iyy="{_f(i[1, 1])}" iyz="{_f(i[1, 2])}" izz="{_f(i[2, 2])}"/>', "    </inertial>"]
        if use_mesh_visuals and self.mesh_visuals:
            for geom, xyz, rpy in self.mesh_visuals:
                out += ["    <visual>", f"      {_origin(xyz, rpy)}", f"      <geometry>{_geometry(geom)}</geometry>",
                        "    </visual>"]
        else:
            for p in self.parts:
                if p.visual:
                    out += ["    <visual>", f"      {_origin(p.xyz, p.rpy)}",
                            f"      <geometry>{_geometry(p.geom)}</geometry>",
                            f'      <material name="{p.color}"/>', "    </visual>"]
        for p in self.parts:
            if p.collision:
                name = f' name="{p.name}"' if p.name else ""
                out += [f"    <collision{name}>", f"      {_origin(p.xyz, p.rpy)}",
                        f"      <geometry>{_geometry(p.geom)}</geometry>", "    </collision>"]
        out.append("  </link>")
        return "\n".join(out)


@dataclass
class Joint:
    name: str
    type: str
    parent: str
    child: str
    xyz: tuple = (0.0, 0.0, 0.0)
    rpy: tuple = (0.0, 0.0, 0.0)
    axis: tuple = (0.0, 0.0, 1.0)
    lower: float | None = None
    upper: float | None = None
    effort: float | None = None
    velocity: float | None = None
    damping: float = 0.0
    friction: float = 0.0
    mimic: tuple | None = None     # (primary joint, multiplier, offset)
    comment: str | None = None

    def xml(self) -> str:
        out = [f'  <joint name="{self.name}" type="{self.type}">']
        if self.comment:
            out.append(f"    <!-- {self.comment} -->")
        out += [f'    <parent link="{self.parent}"/>', f'    <child link="{self.child}"/>',
                f"    {_origin(self.xyz, self.rpy)}"]
        if self.type != "fixed":
            out.append(f'    <axis xyz="{_vec(self.axis)}"/>')
            lim = f'effort="{_f(self.effort)}" velocity="{_f(self.velocity)}"'
            if self.type != "continuous":
                lim = f'lower="{_f(self.lower)}" upper="{_f(self.upper)}" ' + lim
            out.append(f"    <limit {lim}/>")
            out.append(f'    <dynamics damping="{_f(self.damping)}" friction="{_f(self.friction)}"/>')
            if self.mimic:
                out.append(f'    <mimic joint="{self.mimic[0]}" multiplier="{_f(self.mimic[1])}" '
                           f'offset="{_f(self.mimic[2])}"/>')
        out.append("  </joint>")
        return "\n".join(out)


def body_link(name, parts, mass=None, density=None, comment=None, mesh_visuals=None):
    """A link whose mass/COM/inertia come from its primitives (uniform density)."""
    m, com, inertia = composite_inertia(parts, mass=mass, density=density)
    return Link(name, m, tuple(com), inertia, list(parts), list(mesh_visuals or []), comment)


def given_link(name, mass, com, inertia_diag_or_full, parts, comment=None, mesh_visuals=None):
    """A link with published inertial parameters (inertia about the COM in the link frame)."""
    i = np.asarray(inertia_diag_or_full, float)
    if i.shape == (3,):
        i = np.diag(i)
    elif i.shape == (6,):  # ixx ixy ixz iyy iyz izz
        i = np.array([[i[0], i[1], i[2]], [i[1], i[3], i[4]], [i[2], i[4], i[5]]])
    return Link(name, float(mass), tuple(com), i, list(parts), list(mesh_visuals or []), comment)


def robot_xml(name, links, joints, header="", use_mesh_visuals=False) -> str:
    out = ['<?xml version="1.0"?>',
           "<!-- GENERATED by urdf/generate/generate_urdfs.py: edit the generator, not this file. -->"]
    if header:
        out.append("<!-- " + header.replace("--", "-") + " -->")
    out.append(f'<robot name="{name}">')
    used = set()
    for link in links:
        for p in link.parts:
            used.add(p.color)
    for c in sorted(used):
        out.append(f'  <material name="{c}"><color rgba="{COLORS[c]}"/></material>')
    for link in links:
        out.append(link.xml(use_mesh_visuals))
    for joint in joints:
        out.append(joint.xml())
    out.append("</robot>")
    return "\n".join(out) + "\n"


def relative_origin(t_world_parent, t_world_child):
    """(xyz, rpy) of child in parent from two 4x4 world transforms."""
    rel = np.linalg.inv(t_world_parent) @ t_world_child
    return tuple(float(x) for x in rel[:3, 3]), matrix_rpy(rel[:3, :3])


def transform(xyz=(0, 0, 0), rot=None):
    t = np.eye(4)
    if rot is not None:
        t[:3, :3] = rot
    t[:3, 3] = xyz
    return t
