"""Generate the object set of meshes/ (OBJ files, metres): non-convex objects to validate grasps on, made with
trimesh from surfaces of revolution and swept tubes, so that they are available offline and free of licences.

    python meshes/generate_meshes.py            # rewrites meshes/*.obj

Every mesh is watertight (its mass properties come from the mesh at a density). The functions are also used by
the tests (test/test_mesh_objects.py) to write meshes to temporary files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import trimesh


def revolved(profile, sections: int = 48) -> trimesh.Trimesh:
    """The solid of revolution about z of a closed (r, z) profile (counterclockwise, first point on the axis)."""
    return trimesh.creation.revolve(np.asarray(profile, dtype=float), sections=sections)


def tube(path, radius: float, sides: int = 12) -> trimesh.Trimesh:
    """A closed tube of circular cross-section ``radius`` along the polyline ``path`` (N, 3), ends capped."""
    path = np.asarray(path, dtype=float)
    n = len(path)
    tangents = np.gradient(path, axis=0)
    tangents /= np.linalg.norm(tangents, axis=1, keepdims=True)
    ref = np.array([0.0, 1.0, 0.0]) if abs(tangents[0][1]) < 0.9 else np.array([1.0, 0.0, 0.0])
    rings = []
    for p, t in zip(path, tangents):
        u = np.cross(t, ref)
        u /= np.linalg.norm(u)
        w = np.cross(t, u)
        a = np.linspace(0, 2 * np.pi, sides, endpoint=False)
        rings.append(p + radius * (np.cos(a)[:, None] * u + np.sin(a)[:, None] * w))
    verts = np.concatenate(rings + [path[[0, -1]]])
    faces = []
    for i in range(n - 1):
        for j in range(sides):
            a, b = i * sides + j, i * sides + (j + 1) % sides
            c, d = a + sides, b + sides
            faces += [[a, b, d], [a, d, c]]
    start, end = n * sides, n * sides + 1
    for j in range(sides):
        faces.append([start, (j + 1) % sides, j])
        faces.append([end, (n - 1) * sides + j, (n - 1) * sides + (j + 1) % sides])
    mesh = trimesh.Trimesh(verts, np.array(faces), process=True)
    if mesh.volume < 0:
        mesh.invert()
    return mesh


def mug(radius=0.04, height=0.10, wall=0.005, bottom=0.006, handle_radius=0.006, handle_reach=0.035,
        handle_low=0.02, handle_high=0.08) -> trimesh.Trimesh:
    """A mug: a cylindrical cup (outer ``radius``, ``height``, walls ``wall`` thick, a ``bottom`` thick floor, its
    base at z = 0) and a C-shaped handle tube on the +x side, in the xz plane, its ends sunk into the wall.
    The handle's hole spans x in [radius + handle_radius, radius + handle_reach - handle_radius] roughly."""
    r_in = radius - wall
    cup = revolved([[0, 0], [radius, 0], [radius, height], [r_in, height], [r_in, bottom], [0, bottom]])
    mid, half = 0.5 * (handle_low + handle_high), 0.5 * (handle_high - handle_low)
    a = np.linspace(-np.pi / 2, np.pi / 2, 17)
    arc = np.stack([radius - 0.5 * wall + handle_reach * np.cos(a), np.zeros_like(a), mid + half * np.sin(a)], 1)
    handle = tube(arc, handle_radius)
    return trimesh.util.concatenate([cup, handle])


def bowl(radius=0.08, wall=0.008, sections=48) -> trimesh.Trimesh:
    """A hemispherical bowl of outer ``radius`` and ``wall`` thickness, resting on its bottom point at z = 0,
    open upwards (its rim at z = radius)."""
    r_in = radius - wall
    th = np.linspace(0, np.pi / 2, 16)
    outer = [[radius * np.sin(t), radius - radius * np.cos(t)] for t in th]
    inner = [[r_in * np.sin(t), radius - r_in * np.cos(t)] for t in th[::-1]]
    return revolved([[0, 0]] + outer[1:] + inner[:-1] + [[0, radius - r_in]], sections)


def bottle(radius=0.03, height=0.18, neck_radius=0.012, neck_height=0.04) -> trimesh.Trimesh:
    """A solid bottle: body, shoulder and neck (non-convex at the neck), its base at z = 0."""
    body = height - neck_height
    return revolved([[0, 0], [radius, 0], [radius, 0.7 * body], [neck_radius, body], [neck_radius, height],
                     [0, height]])


def l_bracket(length=0.08, width=0.03, thickness=0.01) -> trimesh.Trimesh:
    """An L-shaped bracket: the L profile (legs ``length``, ``thickness`` thick) in the xz plane, extruded
    ``width`` along y (centred); the corner at the origin, the base plate on z = 0."""
    L, t = length, thickness
    profile = np.array([[0, 0], [L, 0], [L, t], [t, t], [t, L], [0, L]], dtype=float)    # counterclockwise (x, z)
    n = len(profile)
    verts = np.array([[x, y, z] for y in (-width / 2, width / 2) for x, z in profile])
    faces = []
    for i in range(n):                                  # the side walls
        j = (i + 1) % n
        faces += [[i, j, n + j], [i, n + j, n + i]]
    fan = [[3, 4, 5], [3, 5, 0], [3, 0, 1], [3, 1, 2]]  # the caps: a fan from the inner corner (t, t)
    faces += [[a, b, c] for a, b, c in fan] + [[n + a, n + c, n + b] for a, b, c in fan]
    mesh = trimesh.Trimesh(verts, np.array(faces), process=True)
    trimesh.repair.fix_normals(mesh)
    return mesh


def ring(major=0.03, minor=0.008) -> trimesh.Trimesh:
    """A torus lying flat (hole along z), its lowest point at z = 0."""
    t = trimesh.creation.torus(major_radius=major, minor_radius=minor)
    t.apply_translation([0, 0, minor])
    return t


def bin_(width=0.30, height=0.10, wall=0.008, floor=0.008) -> trimesh.Trimesh:
    """A square bin (static geometry, scenes/bin_pick.yaml): ``width`` x ``width`` outside, walls ``wall`` and
    floor ``floor`` thick, ``height`` tall, open at the top, its floor's underside at z = 0, walls along x and y.
    ONE closed surface (a 4-sided solid of revolution), so it is cut by CoACD (not split into boxes): a test of
    thin plates kept by the decomposition."""
    corner = width / 2 * np.sqrt(2.0)                 # the profile's radius is the corner's distance
    inner = corner - wall * np.sqrt(2.0)              # perpendicular wall thickness = wall
    mesh = revolved([[0, 0], [corner, 0], [corner, height], [inner, height], [inner, floor], [0, floor]], 4)
    mesh.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 4, [0, 0, 1]))
    return mesh


def tray_of_plates(width=0.30, depth=0.24, height=0.06, plate=0.006) -> trimesh.Trimesh:
    """A tray of five separate thin boxes (floor ``plate`` thick, underside at z = 0, and four walls), as
    pybullet's tray.obj is made: closed convex components that touch but share no vertex."""
    boxes = [trimesh.creation.box([width, depth, plate], trimesh.transformations.translation_matrix(
        [0, 0, plate / 2]))]
    for sx in (-1, 1):
        boxes.append(trimesh.creation.box([plate, depth, height], trimesh.transformations.translation_matrix(
            [sx * (width - plate) / 2, 0, plate + height / 2])))
    for sy in (-1, 1):
        boxes.append(trimesh.creation.box([width - 2 * plate, plate, height],
                                          trimesh.transformations.translation_matrix(
                                              [0, sy * (depth - plate) / 2, plate + height / 2])))
    return trimesh.util.concatenate(boxes)


OBJECTS = {"mug": mug, "bowl": bowl, "bottle": bottle, "l_bracket": l_bracket, "ring": ring}
FIXTURES = {"bin": bin_}           # static geometry (scene environment entries), not objects to pick


def main() -> None:
    here = Path(__file__).resolve().parent
    for name, make in {**OBJECTS, **FIXTURES}.items():
        mesh = make()
        mesh.export(here / f"{name}.obj")
        print(f"{name}.obj: {len(mesh.faces)} triangles, volume {mesh.volume:.4g} m^3")


if __name__ == "__main__":
    main()
