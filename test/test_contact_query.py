"""ContactQuery against hand-computed contact geometry, finite-difference Jacobians and conventions."""

import coal
import numpy as np
import pinocchio as pin
import pytest

from contact_sim_ros.errors import ConfigError, ModelError
from contact_sim_ros.geometry.contact_query import ContactQuery, contact_frames
from contact_sim_ros.model.materials import ContactMaterial, combine_materials
from model_builders import configuration, default_pairs, free_body_scene, make_model, pose

MARGIN = 0.01
Z = np.array([0.0, 0.0, 1.0])


def ground():
    return ("ground", coal.Halfspace(Z.copy(), 0.0), pin.SE3.Identity())


def query(model, q, margin=MARGIN, surface_velocity=None, **kwargs):
    data = model.pin_model.createData()
    pin.forwardKinematics(model.pin_model, data, q)
    cq = ContactQuery(model, margin, **kwargs)
    return cq.update(data, None, surface_velocity), cq


def sort_xy(cs):
    xy = np.round(cs.point[:, :2], 6)
    return np.lexsort((xy[:, 1], xy[:, 0]))


def check_frames(cs):
    for R in cs.rotation:
        np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-12)
        assert np.linalg.det(R) == pytest.approx(1.0)
    np.testing.assert_allclose(cs.rotation[:, :, 2], cs.normal, atol=1e-12)


# ----------------------------------------------------------------------------- shapes vs hand computation
@pytest.mark.parametrize("gap", [-0.002, 0.004])
def test_sphere_on_plane_distance_normal_and_witness_points(gap):
    r = 0.05
    model = free_body_scene(free=[("ball", coal.Sphere(r), 1.0)], static=[ground()])
    q = configuration(model, {"ball": pose((0.3, -0.2, r + gap))})
    cs, _ = query(model, q)
    assert cs.size == 1
    assert cs.signed_distance[0] == pytest.approx(gap, abs=1e-9)
    np.testing.assert_allclose(cs.normal[0], Z, atol=1e-12)          # from the ground (A) to the ball (B)
    # witnesses: (0.3, -0.2, 0) on the plane and (0.3, -0.2, gap) on the ball; point = their midpoint
    np.testing.assert_allclose(cs.point[0], [0.3, -0.2, gap / 2], atol=1e-9)
    assert (cs.geometry_a[0], cs.geometry_b[0]) == (0, 1)
    assert (cs.joint_a[0], cs.joint_b[0]) == (0, model.free_body("ball").joint_id)
    check_frames(cs)


def test_sphere_on_inclined_plane_normal():
    """Plane through the origin with normal n tilted 30 deg about x: the sphere's phi = n.c - r, normal n."""
    r, gap = 0.05, -0.003
    n = np.array([0.0, -np.sin(np.pi / 6), np.cos(np.pi / 6)])
    center = np.array([0.1, 0.2, 0.0])
    center = center - (center @ n) * n + (r + gap) * n
    model = free_body_scene(free=[("ball", coal.Sphere(r), 1.0)],
                            static=[("slope", coal.Halfspace(n, 0.0), pin.SE3.Identity())])
    cs, _ = query(model, configuration(model, {"ball": pose(center)}))
    assert cs.size == 1
    np.testing.assert_allclose(cs.normal[0], n, atol=1e-9)
    assert cs.signed_distance[0] == pytest.approx(gap, abs=1e-9)
    np.testing.assert_allclose(cs.point[0], center - (r + gap / 2) * n, atol=1e-9)


def test_box_flat_on_plane_gives_four_corners():
    h, depth = 0.1, 0.001
    model = free_body_scene(free=[("box", coal.Box(2 * h, 2 * h, 2 * h), 1.0)], static=[ground()])
    cs, _ = query(model, configuration(model, {"box": pose((0.5, 0.0, h - depth))}))
    assert cs.size == 4
    o = sort_xy(cs)
    np.testing.assert_allclose(cs.point[o], [[0.4, -h, -depth / 2], [0.4, h, -depth / 2],
                                             [0.6, -h, -depth / 2], [0.6, h, -depth / 2]], atol=1e-9)
    np.testing.assert_allclose(cs.signed_distance, -depth, atol=1e-9)
    np.testing.assert_allclose(cs.normal, np.tile(Z, (4, 1)), atol=1e-12)
    check_frames(cs)


@pytest.mark.parametrize("rpy", [(0.02, 0.0, 0.0), (0.015, -0.02, 0.3)])
def test_tilted_box_corner_depths_match_hand_computation(rpy):
    """Each corner gets its own signed distance: the world height of the box's bottom corner."""
    h, zc = 0.1, 0.098
    model = free_body_scene(free=[("box", coal.Box(2 * h, 2 * h, 2 * h), 1.0)], static=[ground()])
    placement = pose((0.0, 0.0, zc), rpy)
    cs, _ = query(model, configuration(model, {"box": placement}))
    corners = np.array([[sx * h, sy * h, -h] for sx in (-1, 1) for sy in (-1, 1)])
    corners_w = corners @ placement.rotation.T + placement.translation
    assert np.ptp(corners_w[:, 2]) > 2e-3                     # genuinely different depths
    assert cs.size == 4
    for c in corners_w:
        i = np.argmin(np.linalg.norm(cs.point[:, :2] - c[:2], axis=1))
        np.testing.assert_allclose(cs.point[i], [c[0], c[1], c[2] / 2], atol=1e-9)   # midpoint of c and plane
        assert cs.signed_distance[i] == pytest.approx(c[2], abs=1e-9)


def test_tilted_box_drops_corners_beyond_margin():
    """Tilt 0.1 rad: the raised edge is 16 mm above the plane, beyond the 10 mm margin: 2 contacts."""
    h = 0.1
    model = free_body_scene(free=[("box", coal.Box(2 * h, 2 * h, 2 * h), 1.0)], static=[ground()])
    placement = pose((0.0, 0.0, 0.105), (0.1, 0.0, 0.0))
    cs, _ = query(model, configuration(model, {"box": placement}))
    low = 0.105 - h * np.cos(0.1) - h * np.sin(0.1)
    assert cs.size == 2
    np.testing.assert_allclose(cs.signed_distance, low, atol=1e-9)
    assert (cs.signed_distance <= MARGIN).all()


def convex_box(hx, hy, hz):
    """A box as a coal.Convex made like the loader makes mesh hulls (BVHModel.buildConvexHull)."""
    corners = np.array([[sx * hx, sy * hy, sz * hz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    bvh = coal.BVHModelOBBRSS()
    bvh.beginModel(0, 0)
    bvh.addVertices(corners)
    bvh.addTriangles(np.array([[0, 1, 2], [1, 3, 2], [4, 6, 5], [5, 6, 7], [0, 4, 1], [1, 4, 5],
                               [2, 3, 6], [3, 7, 6], [0, 2, 4], [2, 6, 4], [1, 5, 3], [3, 5, 7]]))
    bvh.endModel()
    bvh.buildConvexHull(True, "Qt")
    return bvh.convex


def test_tilted_convex_hull_corner_depths_and_broad_phase():
    """Same as the tilted box, with the box as a convex hull (face planes from Qhull), and found by the broad
    phase although coal leaves the hull's local AABB uncomputed."""
    h = 0.1
    rpy = (0.015, -0.02, 0.3)
    placement = pose((0.2, 0.1, 0.098), rpy)
    corners = np.array([[sx * h, sy * h, -h] for sx in (-1, 1) for sy in (-1, 1)])
    corners_w = corners @ placement.rotation.T + placement.translation
    table = ("table", coal.Box(1.0, 1.0, 0.1), pose((0, 0, -0.05)))
    for broad_phase in (True, False):
        model = free_body_scene(free=[("hull", convex_box(h, h, h), 1.0)], static=[table])
        cs, _ = query(model, configuration(model, {"hull": placement}), broad_phase=broad_phase)
        assert cs.size == 4
        for c in corners_w:
            i = np.argmin(np.linalg.norm(cs.point[:, :2] - c[:2], axis=1))
            np.testing.assert_allclose(cs.point[i], [c[0], c[1], c[2] / 2], atol=1e-9)
            assert cs.signed_distance[i] == pytest.approx(c[2], abs=1e-9)
    # lifted 0.5 m the pair is culled by the AABB broad phase: nothing reaches the narrow phase
    model = free_body_scene(free=[("hull", convex_box(h, h, h), 1.0)], static=[table])
    cs, cq = query(model, configuration(model, {"hull": pose((0.2, 0.1, 0.6), rpy)}))
    assert cs.size == 0 and cq.stats["candidate_pairs"] == 0


def convex_from_points(points):
    vec = coal.StdVec_Vec3s()
    for x in points:
        vec.append(np.asarray(x, dtype=float))
    return coal.ConvexBase.convexHull(vec, False, "Qt")


@pytest.mark.parametrize("rpy", [(0.0, 0.0, 0.0), (0.1, 0.2, 0.3), (1.0, 0.5, 0.0)])
def test_curved_hull_keeps_its_deepest_point(rpy):
    """A 300-vertex hull of a sphere 1 mm into a table: coal's patch polygon (tolerance = margin) has only
    separated vertices (the deepest vertex is inside it); the manifold must still contain the deepest point,
    the lowest vertex, at phi = -1 mm."""
    i = np.arange(300) + 0.5
    polar, azimuth = np.arccos(1 - 2 * i / 300), np.pi * (1 + 5 ** 0.5) * i
    vertices = 0.05 * np.c_[np.cos(azimuth) * np.sin(polar), np.sin(azimuth) * np.sin(polar), np.cos(polar)]
    table = ("table", coal.Box(1.0, 1.0, 0.1), pose((0, 0, -0.05)))
    model = free_body_scene(free=[("ball", convex_from_points(vertices), 1.0)], static=[table])
    rot = pin.rpy.rpyToMatrix(*rpy)
    world = vertices @ rot.T
    center = np.array([0.1, 0.0, -world[:, 2].min() - 0.001])
    cs, cq = query(model, configuration(model, {"ball": pose(center, rpy)}))
    lowest = world[np.argmin(world[:, 2])] + center
    assert cs.size <= cq.max_patch_points + 1
    i = np.argmin(cs.signed_distance)
    assert cs.signed_distance[i] == pytest.approx(-0.001, abs=1e-9)
    np.testing.assert_allclose(cs.point[i], [lowest[0], lowest[1], -0.0005], atol=1e-6)
    assert (cs.signed_distance <= MARGIN).all()


def test_many_point_patch_reduced_to_spread_subset():
    """A 24-gon prism standing 1 mm into a table: coal's patch has 24 rim points, kept: 8 spread around."""
    angles = np.arange(24) * 2 * np.pi / 24
    rim = np.c_[0.05 * np.cos(angles), 0.05 * np.sin(angles)]
    prism = convex_from_points(np.vstack([np.c_[rim, np.full(24, -0.05)], np.c_[rim, np.full(24, 0.05)]]))
    table = ("table", coal.Box(1.0, 1.0, 0.1), pose((0, 0, -0.05)))
    model = free_body_scene(free=[("prism", prism, 1.0)], static=[table])
    cs, cq = query(model, configuration(model, {"prism": pose((0, 0, 0.049))}), max_patch_points=8)
    assert cs.size == 8
    np.testing.assert_allclose(cs.signed_distance, -0.001, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(cs.point[:, :2], axis=1), 0.05, atol=1e-9)
    a = np.sort(np.arctan2(cs.point[:, 1], cs.point[:, 0]))
    assert np.max(np.diff(np.r_[a, a[0] + 2 * np.pi])) <= np.pi / 2 + 1e-9      # spread all around the rim
    with pytest.raises(ConfigError, match="max_patch_points"):
        ContactQuery(model, 0.01, max_patch_points=2)


def test_box_on_box_overhanging_patch_is_overlap_rectangle():
    """A 0.2 m cube centred at x = 0.15 on a static 0.2 m table block: the overlap x in [0.05, 0.1]."""
    h, depth = 0.1, 0.002
    table = ("table", coal.Box(2 * h, 2 * h, 2 * h), pose((0, 0, -h)))
    model = free_body_scene(free=[("box", coal.Box(2 * h, 2 * h, 2 * h), 1.0)], static=[table])
    cs, _ = query(model, configuration(model, {"box": pose((0.15, 0.0, h - depth))}))
    assert cs.size == 4
    o = sort_xy(cs)
    np.testing.assert_allclose(cs.point[o][:, :2], [[0.05, -h], [0.05, h], [0.1, -h], [0.1, h]], atol=1e-9)
    np.testing.assert_allclose(cs.signed_distance, -depth, atol=1e-9)
    np.testing.assert_allclose(cs.normal, np.tile(Z, (4, 1)), atol=1e-9)


def test_free_box_on_free_box_rotated_45deg():
    """Upper cube turned 45 deg about z and smaller than the lower one: its 4 bottom corners."""
    a, b, depth = 0.1, 0.04, 0.001
    model = free_body_scene(free=[("lower", coal.Box(2 * a, 2 * a, 2 * a), 1.0),
                                  ("upper", coal.Box(2 * b, 2 * b, 2 * b), 0.2)])
    q = configuration(model, {"lower": pose((0, 0, a)), "upper": pose((0, 0, 2 * a + b - depth), (0, 0, np.pi / 4))})
    cs, _ = query(model, q)
    assert cs.size == 4
    rad = b * np.sqrt(2)
    np.testing.assert_allclose(np.sort(np.linalg.norm(cs.point[:, :2], axis=1)), rad, atol=1e-9)
    np.testing.assert_allclose(cs.signed_distance, -depth, atol=1e-9)
    np.testing.assert_allclose(cs.normal, np.tile(Z, (4, 1)), atol=1e-9)     # lower (A) -> upper (B)
    np.testing.assert_allclose(cs.point[:, 2], 2 * a - depth / 2, atol=1e-9)


@pytest.mark.parametrize("tilt", [0.0, 0.02])
def test_capsule_lying_on_box_end_points(tilt):
    """Capsule (r, half-length l) along y, tilted about x: end-sphere bottoms at zc -+ l sin(tilt) - r."""
    r, l, zc = 0.03, 0.1, 0.029
    table = ("table", coal.Box(1.0, 1.0, 0.1), pose((0, 0, -0.05)))
    model = free_body_scene(free=[("capsule", coal.Capsule(r, 2 * l), 0.5)], static=[table])
    placement = pose((0.0, 0.0, zc), (-np.pi / 2 + tilt, 0.0, 0.0))     # local z -> world y (tilted)
    cs, _ = query(model, configuration(model, {"capsule": placement}))
    ends = np.array([placement.act(np.array([0, 0, s * l])) for s in (-1, 1)])
    assert cs.size == 2
    witness_a = cs.point - 0.5 * cs.signed_distance[:, None] * cs.normal
    witness_b = cs.point + 0.5 * cs.signed_distance[:, None] * cs.normal
    np.testing.assert_allclose(witness_a[:, 2], 0.0, atol=1e-12)               # on the table top
    axis = placement.rotation[:, 2]
    for i, e in enumerate(ends[np.argsort(ends[:, 1])][np.argsort(np.argsort(cs.point[:, 1]))]):
        # each point is on the capsule's surface (distance r from its axis segment) ...
        t = np.clip((witness_b[i] - placement.translation) @ axis, -l, l)
        assert np.linalg.norm(witness_b[i] - placement.translation - t * axis) == pytest.approx(r, abs=1e-9)
        # ... near that end's lowest point e_z - r (coal puts the point on the rim of the cylindrical part,
        # r sin(tilt) inwards, where the surface is higher by at most r tilt^2 / 2)
        assert abs(cs.point[i, 1] - e[1]) <= r * np.sin(tilt) + 1e-9
        assert cs.signed_distance[i] == pytest.approx(e[2] - r, abs=r * tilt ** 2 / 2 + 1e-9)


def test_cylinder_lying_on_plane_two_points():
    r, l, depth = 0.05, 0.1, 0.001
    model = free_body_scene(free=[("cyl", coal.Cylinder(r, 2 * l), 0.5)], static=[ground()])
    cs, _ = query(model, configuration(model, {"cyl": pose((0, 0, r - depth), (np.pi / 2, 0, 0))}))
    assert cs.size == 2
    np.testing.assert_allclose(np.sort(cs.point[:, 1]), [-l, l], atol=1e-9)
    np.testing.assert_allclose(cs.point[:, [0, 2]], [[0, -depth / 2]] * 2, atol=1e-9)
    np.testing.assert_allclose(cs.signed_distance, -depth, atol=1e-9)


def test_cylinder_standing_on_plane_rests_on_rim_points():
    r, l, depth = 0.05, 0.1, 0.001
    model = free_body_scene(free=[("cyl", coal.Cylinder(r, 2 * l), 0.5)], static=[ground()])
    cs, _ = query(model, configuration(model, {"cyl": pose((0.2, 0.1, l - depth))}), curved_shape_samples=8)
    assert cs.size == 8
    rel = cs.point[:, :2] - [0.2, 0.1]
    np.testing.assert_allclose(np.linalg.norm(rel, axis=1), r, atol=1e-9)     # on the rim
    assert np.linalg.matrix_rank(np.c_[rel, np.ones(len(rel))]) == 3            # >= 3 non-collinear points
    angles = np.sort(np.arctan2(rel[:, 1], rel[:, 0]))
    assert np.max(np.diff(np.r_[angles, angles[0] + 2 * np.pi])) < np.pi / 2     # support surrounds the axis
    np.testing.assert_allclose(cs.signed_distance, -depth, atol=1e-9)


def test_cylinder_standing_on_box_as_first_geometry_gets_rim():
    """coal samples the rim only when the cylinder is the second shape; as A it must still rest on its rim.
    Cylinder (A) standing on a free block (B): normal from A to B points down."""
    r, l, depth = 0.03, 0.06, 0.0005
    model = free_body_scene(free=[("can", coal.Cylinder(r, 2 * l), 0.3), ("block", coal.Box(0.4, 0.4, 0.1), 1.0)])
    q = configuration(model, {"can": pose((0.05, 0.02, l - depth)), "block": pose((0, 0, -0.05))})
    cs, _ = query(model, q, curved_shape_samples=8)
    assert cs.size == 8
    np.testing.assert_allclose(cs.normal, np.tile(-Z, (8, 1)), atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(cs.point[:, :2] - [0.05, 0.02], axis=1), r, atol=1e-9)
    np.testing.assert_allclose(cs.signed_distance, -depth, atol=1e-9)
    np.testing.assert_allclose(cs.point[:, 2], -depth / 2, atol=1e-9)


def test_cylinder_first_geometry_on_its_edge_single_point():
    """Cylinder (A) tilted 45 deg about x resting on its rim on a block (B): one point, the lowest rim point
    (0, -r sin45 ... ) at height zc - l cos45 - r sin45; witnesses of the swapped coal query are flipped back."""
    r, l, zc = 0.03, 0.06, 0.063
    model = free_body_scene(free=[("can", coal.Cylinder(r, 2 * l), 0.3), ("block", coal.Box(0.4, 0.4, 0.1), 1.0)])
    placement = pose((0.0, 0.0, zc), (np.pi / 4, 0.0, 0.0))
    q = configuration(model, {"can": placement, "block": pose((0, 0, -0.05))})
    cs, _ = query(model, q)
    lowest = placement.act(np.array([0.0, -r, -l]))              # the rim point farthest down
    assert lowest[2] == pytest.approx(zc - (l + r) / np.sqrt(2))
    assert cs.size == 1
    np.testing.assert_allclose(cs.normal[0], -Z, atol=1e-6)      # GJK/EPA (not an analytic pair): ~1e-7
    assert cs.signed_distance[0] == pytest.approx(lowest[2], abs=1e-7)
    # the rim is curved: EPA places the witness within ~2 um along it (the height error is second order)
    np.testing.assert_allclose(cs.point[0, :2], lowest[:2], atol=1e-5)
    assert cs.point[0, 2] == pytest.approx(lowest[2] / 2, abs=1e-7)


def test_cylinder_standing_tilted_rim_depths():
    """Tilted standing cylinder: every rim point's witness on B lies on the bottom rim, phi = its height."""
    r, l = 0.05, 0.1
    model = free_body_scene(free=[("cyl", coal.Cylinder(r, 2 * l), 0.5)], static=[ground()])
    placement = pose((0, 0, l - 0.001), (0.03, 0.0, 0.0))
    cs, _ = query(model, configuration(model, {"cyl": placement}))
    assert cs.size >= 3
    witness_b = cs.point + 0.5 * cs.signed_distance[:, None] * cs.normal
    local = (witness_b - placement.translation) @ placement.rotation
    np.testing.assert_allclose(local[:, 2], -l, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(local[:, :2], axis=1), r, atol=1e-9)
    np.testing.assert_allclose(cs.signed_distance, witness_b[:, 2], atol=1e-12)
    assert np.ptp(cs.signed_distance) > 2e-3


def test_beyond_margin_no_contact_and_within_margin_positive():
    r = 0.05
    model = free_body_scene(free=[("ball", coal.Sphere(r), 1.0), ("box", coal.Box(0.1, 0.1, 0.1), 1.0)],
                            static=[ground()])
    q = configuration(model, {"ball": pose((0, 0, r + 0.015)), "box": pose((1.0, 0, 0.05 + 0.008))})
    for broad_phase in (True, False):
        cs, cq = query(model, q, broad_phase=broad_phase)
        assert cs.size == 4                                   # the box's corners only; the ball is 15 mm up
        assert set(cs.geometry_b) == {2}
        np.testing.assert_allclose(cs.signed_distance, 0.008, atol=1e-9)
    cs, _ = query(model, q, margin=0.02)
    assert set(cs.geometry_b) == {1, 2}


def test_broad_phase_matches_all_pairs():
    rng = np.random.default_rng(3)
    model = free_body_scene(free=[(f"b{i}", coal.Box(0.1, 0.08, 0.06), 1.0) for i in range(4)]
                            + [(f"s{i}", coal.Sphere(0.04), 1.0) for i in range(3)], static=[ground()])
    for _ in range(5):
        poses = {fb.name: pose(rng.uniform([-0.1, -0.1, 0.0], [0.1, 0.1, 0.15]), rng.uniform(-np.pi, np.pi, 3))
                 for fb in model.free_bodies}
        q = configuration(model, poses)
        a, _ = query(model, q, broad_phase=True)
        b, _ = query(model, q, broad_phase=False)
        assert a.size == b.size and a.size > 0
        ka = np.lexsort((a.point[:, 2], a.point[:, 1], a.point[:, 0], a.geometry_b, a.geometry_a))
        kb = np.lexsort((b.point[:, 2], b.point[:, 1], b.point[:, 0], b.geometry_b, b.geometry_a))
        np.testing.assert_allclose(a.point[ka], b.point[kb], atol=1e-12)
        np.testing.assert_allclose(a.signed_distance[ka], b.signed_distance[kb], atol=1e-12)


# ----------------------------------------------------------------------------- Jacobians
def _material_point_velocity_fd(model, q, v, joint, point, eps=1e-7):
    """World velocity of the material point of ``joint`` at ``point`` (world, at q) by central differences."""
    pm = model.pin_model
    if joint == 0:
        return np.zeros(3)
    data = pm.createData()
    pin.forwardKinematics(pm, data, q)
    local = data.oMi[joint].actInv(point)
    pos = []
    for s in (eps, -eps):
        pin.forwardKinematics(pm, data, pin.integrate(pm, q, s * v))
        pos.append(data.oMi[joint].act(local))
    return (pos[0] - pos[1]) / (2 * eps)


def _check_jacobian_fd(model, q, v, cs):
    assert cs.size > 0
    assert cs.jacobian.shape == (3 * cs.size, model.nv)
    vc = cs.relative_velocity(v)
    for i in range(cs.size):
        vb = _material_point_velocity_fd(model, q, v, int(cs.joint_b[i]), cs.point[i])
        va = _material_point_velocity_fd(model, q, v, int(cs.joint_a[i]), cs.point[i])
        np.testing.assert_allclose(vc[i], cs.rotation[i].T @ (vb - va), atol=1e-6)


@pytest.mark.parametrize("method", ["vectorized", "frame"])
def test_jacobian_two_free_boxes_matches_finite_differences(method):
    rng = np.random.default_rng(0)
    model = free_body_scene(free=[("lower", coal.Box(0.2, 0.2, 0.2), 1.0), ("upper", coal.Box(0.1, 0.1, 0.1), 0.2)],
                            static=[ground()])
    q = configuration(model, {"lower": pose((0.01, 0.02, 0.099), (0.003, -0.002, 0.4)),
                              "upper": pose((0.015, 0.025, 0.248), (0.004, 0.002, 1.0))})
    v = rng.normal(size=model.nv)
    cs, _ = query(model, q, jacobian=method)
    assert set(zip(cs.geometry_a, cs.geometry_b)) == {(0, 1), (1, 2)}
    _check_jacobian_fd(model, q, v, cs)
    # normal row: d(phi)/dt = v_n to first order for the free-free pair
    eps = 1e-7
    pm = model.pin_model
    cs2, _ = query(model, pin.integrate(pm, q, eps * v), jacobian=method)
    pair = (cs.geometry_a == 1)
    pair2 = (cs2.geometry_a == 1)
    assert pair.sum() == pair2.sum() == 4
    o1 = np.lexsort(cs.point[pair][:, :2].T)
    o2 = np.lexsort(cs2.point[pair2][:, :2].T)
    dphi = (cs2.signed_distance[pair2][o2] - cs.signed_distance[pair][o1]) / eps
    np.testing.assert_allclose(cs.relative_velocity(v)[pair][o1][:, 2], dphi, atol=1e-4)


def _two_link_arm_and_ball():
    """Planar 2R arm (revolute y) at the origin reaching over a free ball resting on the ground."""
    pm = pin.Model()
    j1 = pm.addJoint(0, pin.JointModelRY(), pose((0, 0, 0.5)), "shoulder")
    pm.appendBodyToJoint(j1, pin.Inertia.FromCylinder(1.0, 0.02, 0.3), pose((0.15, 0, 0)))
    j2 = pm.addJoint(j1, pin.JointModelRY(), pose((0.3, 0, 0)), "elbow")
    pm.appendBodyToJoint(j2, pin.Inertia.FromCylinder(1.0, 0.02, 0.3), pose((0.15, 0, 0)))
    jb = pm.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "ball")
    pm.appendBodyToJoint(jb, pin.Inertia.FromSphere(0.3, 0.05), pin.SE3.Identity())
    gm = pin.GeometryModel()
    gm.addGeometryObject(pin.GeometryObject("ground", 0, pin.SE3.Identity(), coal.Halfspace(Z.copy(), 0.0)))
    gm.addGeometryObject(pin.GeometryObject("link2", j2, pose((0.15, 0, 0)), coal.Box(0.3, 0.04, 0.04)))
    gm.addGeometryObject(pin.GeometryObject("ball", jb, pin.SE3.Identity(), coal.Sphere(0.05)))
    return make_model(pm, gm)


@pytest.mark.parametrize("method", ["vectorized", "frame"])
def test_jacobian_arm_pushing_ball_matches_finite_differences(method):
    model = _two_link_arm_and_ball()
    pm = model.pin_model
    q = pin.neutral(pm)
    q[0], q[1] = 0.9, -0.9 + 0.3                          # link2 points down-forward
    data = pm.createData()
    pin.forwardKinematics(pm, data, q)
    pin.updateFramePlacements(pm, data)
    tip = data.oMi[2].act(np.array([0.3, 0, 0]))           # end of link 2
    q[model.free_body("ball").q_slice] = pin.SE3ToXYZQUAT(pose(tip + np.array([0.0, 0.0, -0.069])))
    rng = np.random.default_rng(1)
    v = rng.normal(size=model.nv)
    cs, _ = query(model, q, margin=0.05, jacobian=method)
    assert (1, 2) in set(zip(cs.geometry_a, cs.geometry_b))
    arm = cs.joint_a == 2
    assert np.abs(cs.jacobian.reshape(-1, 3, model.nv)[arm][:, :, :2]).max() > 0.05   # arm columns are used
    _check_jacobian_fd(model, q, v, cs)


def test_jacobian_methods_agree():
    model = _two_link_arm_and_ball()
    q = pin.neutral(model.pin_model)
    q[0], q[1] = 0.9, -0.6
    data = model.pin_model.createData()
    pin.forwardKinematics(model.pin_model, data, q)
    tip = data.oMi[2].act(np.array([0.3, 0, 0]))
    q[model.free_body("ball").q_slice] = pin.SE3ToXYZQUAT(pose(tip + np.array([0.0, 0.0, -0.069])))
    a, _ = query(model, q, margin=0.05, jacobian="vectorized")
    b, _ = query(model, q, margin=0.05, jacobian="frame")
    np.testing.assert_allclose(a.jacobian, b.jacobian, atol=1e-12)


def test_mimic_joint_jacobian_has_nv_columns():
    """Two prismatic fingers, the second mimicking the first (q2 = -q1): nv = 1, the Jacobian (3N, 1)."""
    pm = pin.Model()
    j1 = pm.addJoint(0, pin.JointModelPY(), pose((0, 0.05, 0.3)), "finger_left")
    pm.appendBodyToJoint(j1, pin.Inertia.FromBox(0.1, 0.02, 0.02, 0.05), pin.SE3.Identity())
    j2 = pm.addJoint(0, pin.JointModelPY(), pose((0, -0.05, 0.3)), "finger_right")
    pm.appendBodyToJoint(j2, pin.Inertia.FromBox(0.1, 0.02, 0.02, 0.05), pin.SE3.Identity())
    pm = pin.transformJointIntoMimic(pm, j1, j2, -1.0, 0.0)
    assert pm.nv == 1
    gm = pin.GeometryModel()
    gm.addGeometryObject(pin.GeometryObject("right_pad", j2, pin.SE3.Identity(), coal.Box(0.02, 0.02, 0.05)))
    gm.addGeometryObject(pin.GeometryObject("post", 0, pose((0, -0.071, 0.3)), coal.Box(0.02, 0.02, 0.05)))
    model = make_model(pm, gm)
    q = np.array([0.0])
    v = np.array([0.7])                                   # left finger +y => right finger -y, into the post
    cs, _ = query(model, q, margin=0.005)
    assert cs.size == 4
    assert cs.jacobian.shape == (12, 1)
    _check_jacobian_fd(model, q, v, cs)
    # pad (A) moves at -0.7 m/s along y towards the post (B): normal from pad to post is -y, so the post's
    # velocity relative to the pad along the normal is -0.7: approaching
    np.testing.assert_allclose(cs.normal, np.tile([0, -1.0, 0], (4, 1)), atol=1e-9)
    np.testing.assert_allclose(cs.relative_velocity(v)[:, 2], -0.7, atol=1e-12)


# ----------------------------------------------------------------------------- bias, materials, buffers, errors
def test_conveyor_surface_velocity_enters_bias():
    """A belt (A, static) moving at v_belt under a box (B) at rest: v_rel = -R^T v_belt."""
    model = free_body_scene(free=[("box", coal.Box(0.2, 0.2, 0.2), 1.0)], static=[ground()])
    q = configuration(model, {"box": pose((0, 0, 0.099))})
    v_belt = np.array([[0.4, -0.1, 0.0], [5.0, 5.0, 5.0]])   # second row (the moving box) must be ignored
    cs, _ = query(model, q, surface_velocity=v_belt)
    vc = cs.relative_velocity(np.zeros(model.nv))
    for i in range(cs.size):
        np.testing.assert_allclose(vc[i], -cs.rotation[i].T @ v_belt[0], atol=1e-12)
    with pytest.raises(ConfigError, match="surface_velocity"):
        query(model, q, surface_velocity=np.zeros(3))


def test_conveyor_as_second_geometry_bias_and_normal():
    """Loader order: the object first (A), the static belt last (B): normal from box to belt (-z) and
    v_rel = v_B - v_A = +R^T v_belt."""
    pm = pin.Model()
    jid = pm.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "box")
    pm.appendBodyToJoint(jid, pin.Inertia.FromBox(1.0, 0.2, 0.2, 0.2), pin.SE3.Identity())
    gm = pin.GeometryModel()
    gm.addGeometryObject(pin.GeometryObject("box", jid, pin.SE3.Identity(), coal.Box(0.2, 0.2, 0.2)))
    gm.addGeometryObject(pin.GeometryObject("belt", 0, pin.SE3.Identity(), coal.Halfspace(Z.copy(), 0.0)))
    model = make_model(pm, gm)
    q = configuration(model, {"box": pose((0, 0, 0.099))})
    v_belt = np.array([[0.0, 0.0, 0.0], [0.3, 0.2, 0.0]])
    rng = np.random.default_rng(2)
    v = rng.normal(size=6)
    cs, _ = query(model, q, surface_velocity=v_belt)
    assert cs.size == 4 and (cs.geometry_a == 0).all() and (cs.joint_b == 0).all()
    np.testing.assert_allclose(cs.normal, np.tile(-Z, (4, 1)), atol=1e-12)
    np.testing.assert_allclose(cs.signed_distance, -0.001, atol=1e-9)
    vc = cs.relative_velocity(v)
    for i in range(cs.size):
        va = _material_point_velocity_fd(model, q, v, jid, cs.point[i])
        np.testing.assert_allclose(vc[i], cs.rotation[i].T @ (v_belt[1] - va), atol=1e-6)


def test_materials_are_combined_per_pair():
    soft = ContactMaterial(stiffness=2.0e4, dissipation=5.0, friction=0.3, restitution=0.2)
    hard = ContactMaterial(stiffness=1.0e6, dissipation=20.0, friction=0.9, restitution=0.5)
    model = free_body_scene(free=[("box", coal.Box(0.2, 0.2, 0.2), 1.0)], static=[ground()],
                            geometry_materials={"ground": hard, "box": soft})
    cs, _ = query(model, configuration(model, {"box": pose((0, 0, 0.099))}))
    k, d, mu, e = combine_materials(hard.stiffness, hard.dissipation, hard.friction, hard.restitution,
                                    soft.stiffness, soft.dissipation, soft.friction, soft.restitution)
    np.testing.assert_allclose(cs.stiffness, k)
    np.testing.assert_allclose(cs.dissipation, d)
    np.testing.assert_allclose(cs.friction, mu)
    np.testing.assert_allclose(cs.restitution, e)


def test_buffers_grow_and_empty_set():
    model = free_body_scene(free=[(f"b{i}", coal.Box(0.1, 0.1, 0.1), 1.0) for i in range(5)], static=[ground()])
    poses = {f"b{i}": pose((0.3 * i, 0, 0.049)) for i in range(5)}
    cs, cq = query(model, configuration(model, poses), initial_capacity=2)
    assert cs.size == 20
    assert np.unique(cs.geometry_b).tolist() == [1, 2, 3, 4, 5]
    data = model.pin_model.createData()
    pin.forwardKinematics(model.pin_model, data, configuration(model, {f"b{i}": pose((0.3 * i, 0, 1.0))
                                                                      for i in range(5)}))
    empty = cq.update(data)
    assert empty.size == 0 and empty.jacobian.shape == (0, model.nv)


def test_contact_frames_deterministic_right_handed():
    rng = np.random.default_rng(5)
    n = rng.normal(size=(50, 3))
    n /= np.linalg.norm(n, axis=1)[:, None]
    n[:3] = np.eye(3)
    R = contact_frames(n)
    np.testing.assert_allclose(np.einsum("nji,njk->nik", R, R), np.tile(np.eye(3), (50, 1, 1)), atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(R), 1.0)
    np.testing.assert_allclose(R[:, :, 2], n)
    np.testing.assert_allclose(contact_frames(n), R)           # same normal, same frame


def test_bad_inputs_raise_named_errors():
    model = free_body_scene(free=[("box", coal.Box(0.2, 0.2, 0.2), 1.0)], static=[ground()])
    with pytest.raises(ConfigError, match="margin"):
        ContactQuery(model, -0.01)
    with pytest.raises(ConfigError, match="valid jacobian methods: frame, vectorized"):
        ContactQuery(model, 0.01, jacobian="numeric")
    with pytest.raises(ConfigError, match="curved_shape_samples"):
        ContactQuery(model, 0.01, curved_shape_samples=2)
    bad = free_body_scene(free=[("box", coal.Box(0.2, 0.2, 0.2), 1.0)], static=[ground()], pairs=[[0, 5]])
    with pytest.raises(ModelError, match="collision pair"):
        ContactQuery(bad, 0.01)
    mesh = coal.BVHModelOBBRSS()
    mesh.beginModel(0, 0)
    mesh.addVertices(np.array([[0.0, 0, 0], [0.1, 0, 0], [0, 0.1, 0], [0, 0, 0.1]]))
    mesh.addTriangles(np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]]))
    mesh.endModel()
    with pytest.raises(ModelError, match="'mug' is a triangle mesh"):
        ContactQuery(free_body_scene(free=[("mug", mesh, 0.3)], static=[ground()]), 0.01)


# ----------------------------------------------------------------------------- line casts (per-point depths)
def _inside(shape, x):
    """Membership tests written independently of the casts: (M, 3) points -> (M,) bool."""
    if isinstance(shape, coal.Box):
        return np.all(np.abs(x) <= shape.halfSide, axis=1)
    if isinstance(shape, coal.Sphere):
        return np.linalg.norm(x, axis=1) <= shape.radius
    if isinstance(shape, coal.Capsule):
        z = np.clip(x[:, 2], -shape.halfLength, shape.halfLength)
        return np.linalg.norm(x - np.c_[0 * z, 0 * z, z], axis=1) <= shape.radius
    if isinstance(shape, coal.Cylinder):
        return (np.hypot(x[:, 0], x[:, 1]) <= shape.radius) & (np.abs(x[:, 2]) <= shape.halfLength)
    if isinstance(shape, coal.Ellipsoid):
        return np.sum((x / shape.radii) ** 2, axis=1) <= 1.0
    if isinstance(shape, coal.Halfspace):
        return x @ shape.n <= shape.d
    raise AssertionError(shape)


@pytest.mark.parametrize("shape", [coal.Box(0.2, 0.1, 0.3), coal.Sphere(0.05), coal.Cylinder(0.04, 0.2),
                                   coal.Capsule(0.03, 0.1), coal.Ellipsoid(0.05, 0.03, 0.08),
                                   coal.Halfspace(np.array([0.0, 0.6, 0.8]), 0.01), "hull"],
                         ids=["box", "sphere", "cylinder", "capsule", "ellipsoid", "halfspace", "hull"])
def test_line_casts_enter_and_leave_the_shape_surface(shape):
    """Random lines (some axis-aligned or parallel to faces): just inside [s_in, s_out] is inside the shape,
    just outside is outside; lines reported as missing never pass through it."""
    from contact_sim_ros.geometry.line_intersection import LineCaster
    if shape == "hull":
        shape, reference = convex_box(0.1, 0.05, 0.15), coal.Box(0.2, 0.1, 0.3)
    else:
        reference = shape
    rng = np.random.default_rng(11)
    m = 400
    p = rng.uniform(-0.09, 0.09, (m, 3))
    u = rng.normal(size=(m, 3))
    u[:40] = np.eye(3)[rng.integers(0, 3, 40)] * rng.choice([-1, 1], (40, 1))     # axis-aligned lines
    u[40:80, 2] = 0.0                                                               # parallel to z faces
    u /= np.linalg.norm(u, axis=1)[:, None]
    s_in, s_out = LineCaster([shape]).intervals(np.zeros(m, dtype=int), p, u)
    hit = s_in <= s_out                          # a miss is (+inf, -inf)
    assert 30 < hit.sum() < m
    eps = 1e-6
    for s, sign in ((s_in, 1.0), (s_out, -1.0)):
        finite = np.isfinite(s) & hit & ~(s_out - s_in <= 4 * eps)
        assert _inside(reference, p[finite] + (s[finite] + sign * eps)[:, None] * u[finite]).all()
        assert not _inside(reference, p[finite] + (s[finite] - sign * eps)[:, None] * u[finite]).any()
    samples = np.linspace(-1.0, 1.0, 2001)
    for i in np.flatnonzero(~hit)[:60]:
        assert not _inside(reference, p[i] + samples[:, None] * u[i]).any()


def test_jacobian_barrett_hand_with_mimic_joints_matches_finite_differences():
    """The loader's BarrettHand preset (4 mimic joints) in random self-contact configurations."""
    from contact_sim_ros.sim.scene import load_scene
    model = load_scene({"robot": "barrett", "environment": [{"name": "ground", "shape": "halfspace"}]}).model
    assert len(model.mimic_joints) > 0
    rng = np.random.default_rng(4)
    checked = 0
    pm = model.pin_model
    lower = np.clip(pm.lowerPositionLimit, -1.0, 1.0)
    upper = np.clip(pm.upperPositionLimit, -1.0, 1.0)
    for _ in range(4):
        q = rng.uniform(lower, upper)                      # deterministic (pin.randomConfiguration is not)
        cs, _ = query(model, q)
        if cs.size:
            _check_jacobian_fd(model, q, rng.normal(size=model.nv), cs)
            checked += cs.size
    assert checked > 10


# ----------------------------------------------------------------------------- compiled kernel vs numpy path
def _contact_set_fields(cs):
    return {f: getattr(cs, f).copy() for f in cs.__dataclass_fields__ if getattr(cs, f) is not None}


def _assert_same_contacts(a, b):
    for f in a:
        assert a[f].shape == b[f].shape, f
        np.testing.assert_allclose(a[f], b[f], rtol=0, atol=1e-12, err_msg=f)


def test_numba_kernel_matches_numpy_path_on_every_shape_type():
    """Random poses of a box, sphere, cylinder, capsule, ellipsoid and convex hull piled on a table over a
    halfspace: the compiled kernel (frames, depths by line casts, Jacobians from pin_data.J) gives the numpy
    path's contact set to round-off, pile after pile, including patches and dropped far points."""
    shapes = [("box", coal.Box(0.1, 0.08, 0.06), 1.0), ("ball", coal.Sphere(0.04), 1.0),
              ("can", coal.Cylinder(0.03, 0.1), 1.0), ("pill", coal.Capsule(0.02, 0.08), 1.0),
              ("egg", coal.Ellipsoid(0.03, 0.04, 0.05), 1.0), ("hull", convex_box(0.04, 0.05, 0.03), 1.0)]
    model = free_body_scene(free=shapes, static=[ground(), ("table", coal.Box(0.3, 0.3, 0.04),
                                                             pose((0.0, 0.0, 0.02)))])
    rng = np.random.default_rng(7)
    total = patches = 0
    for _ in range(12):
        poses = {name: pose(rng.uniform([-0.1, -0.1, 0.05], [0.1, 0.1, 0.14]), rng.uniform(-0.3, 0.3, 3))
                 for name, _, _ in shapes}
        q = configuration(model, poses)
        a, cq = query(model, q, kernel="numpy")
        b, _ = query(model, q, kernel="numba")
        _assert_same_contacts(_contact_set_fields(a), _contact_set_fields(b))
        total += a.size
        patches += a.size - cq.stats["colliding_pairs"]
    assert total > 40 and patches > 10                 # contacts found, several multi-point patches among them


def test_numba_kernel_matches_numpy_path_with_mimic_joints():
    """BarrettHand (4 mimic joints: pin_data.J has a column per mimic joint, summed into its primary's dof)."""
    from contact_sim_ros.sim.scene import load_scene
    model = load_scene({"robot": "barrett", "environment": [{"name": "ground", "shape": "halfspace"}]}).model
    pm = model.pin_model
    rng = np.random.default_rng(4)
    lower = np.clip(pm.lowerPositionLimit, -1.0, 1.0)
    upper = np.clip(pm.upperPositionLimit, -1.0, 1.0)
    checked = 0
    for _ in range(6):
        q = rng.uniform(lower, upper)
        a, _ = query(model, q, kernel="numpy")
        b, _ = query(model, q, kernel="numba")
        _assert_same_contacts(_contact_set_fields(a), _contact_set_fields(b))
        checked += a.size
    assert checked > 10


def _assert_jacobian_columns_exact(contacts):
    """ContactSet.jacobian_columns: ascending distinct dofs, then -1; the Jacobian rows are exactly zero outside them
    and use each of them (for these generic poses no listed column is zero in all three rows)."""
    cols = contacts.jacobian_columns
    n, nv = contacts.size, contacts.jacobian.shape[1]
    assert cols is not None and cols.shape[0] == n and cols.dtype == np.int64
    J3 = contacts.jacobian.reshape(n, 3, nv)
    for i in range(n):
        listed = cols[i][cols[i] >= 0]
        assert (cols[i][len(listed):] == -1).all()               # the valid columns are a prefix
        assert (np.diff(listed) > 0).all()                        # ascending, distinct
        used = np.flatnonzero(np.abs(J3[i]).sum(axis=0) != 0.0)
        np.testing.assert_array_equal(used, listed)


def test_jacobian_columns_list_exactly_the_columns_each_contact_uses():
    """The compiled kernel's ContactSet.jacobian_columns on a pile of free shapes on a table (one and two bodies per
    contact) and on the BarrettHand (mimic joints: a dof fed by two columns of pin_data.J is listed once); the
    numpy path does not know them (None)."""
    from contact_sim_ros.sim.scene import load_scene
    shapes = [("box", coal.Box(0.1, 0.08, 0.06), 1.0), ("ball", coal.Sphere(0.04), 1.0),
              ("can", coal.Cylinder(0.03, 0.1), 1.0), ("hull", convex_box(0.04, 0.05, 0.03), 1.0)]
    model = free_body_scene(free=shapes, static=[ground(), ("table", coal.Box(0.3, 0.3, 0.04),
                                                             pose((0.0, 0.0, 0.02)))])
    rng = np.random.default_rng(11)
    two_body = 0
    for _ in range(8):
        poses = {name: pose(rng.uniform([-0.06, -0.06, 0.05], [0.06, 0.06, 0.12]), rng.uniform(-0.3, 0.3, 3))
                 for name, _, _ in shapes}
        b, _ = query(model, configuration(model, poses), kernel="numba")
        _assert_jacobian_columns_exact(b)
        two_body += int(((b.joint_a > 0) & (b.joint_b > 0)).sum())
        a, _ = query(model, configuration(model, poses), kernel="numpy")
        assert a.jacobian_columns is None
    assert two_body > 5
    hand = load_scene({"robot": "barrett", "environment": [{"name": "ground", "shape": "halfspace"}]}).model
    pm = hand.pin_model
    rng = np.random.default_rng(4)
    checked = 0
    for _ in range(6):
        b, _ = query(hand, rng.uniform(np.clip(pm.lowerPositionLimit, -1, 1), np.clip(pm.upperPositionLimit, -1, 1)),
                     kernel="numba")
        _assert_jacobian_columns_exact(b)
        checked += b.size
    assert checked > 10


def test_one_query_reused_over_changing_contacts_gives_fresh_jacobians():
    """The compiled kernel zeroes only the columns a buffer row used in the previous update: one ContactQuery updated
    over 15 random piles (rows change pair, body and count every time, and the buffers grow) gives each time the
    dense Jacobian of its own contacts, R^T (J_B(p) - J_A(p)) from Pinocchio's joint Jacobians, and exact
    jacobian_columns. (Not compared with a fresh query: coal's GJK warm start makes a reused query's points differ
    at ~1e-6 m.)"""
    shapes = [("box", coal.Box(0.1, 0.08, 0.06), 1.0), ("ball", coal.Sphere(0.04), 1.0),
              ("can", coal.Cylinder(0.03, 0.1), 1.0), ("hull", convex_box(0.04, 0.05, 0.03), 1.0)]
    model = free_body_scene(free=shapes, static=[ground(), ("table", coal.Box(0.3, 0.3, 0.04),
                                                             pose((0.0, 0.0, 0.02)))])
    cq = ContactQuery(model, MARGIN, kernel="numba", initial_capacity=4)
    data = model.pin_model.createData()
    rng = np.random.default_rng(5)
    sizes = set()
    for _ in range(15):
        poses = {name: pose(rng.uniform([-0.08, -0.08, 0.04], [0.08, 0.08, 0.16]), rng.uniform(-0.4, 0.4, 3))
                 for name, _, _ in shapes}
        q = configuration(model, poses)
        pin.forwardKinematics(model.pin_model, data, q)
        got = cq.update(data, None)
        pm = model.pin_model
        pin.computeJointJacobians(pm, data, q)
        want = np.zeros((got.size, 3, pm.nv))
        for i in range(got.size):
            for joint, sign in ((got.joint_b[i], 1.0), (got.joint_a[i], -1.0)):
                if joint:
                    J = pin.getJointJacobian(pm, data, int(joint), pin.LOCAL_WORLD_ALIGNED)
                    r = got.point[i] - data.oMi[int(joint)].translation
                    want[i] += sign * got.rotation[i].T @ (J[:3] - pin.skew(r) @ J[3:])
        np.testing.assert_allclose(got.jacobian.reshape(got.size, 3, pm.nv), want, rtol=0, atol=1e-12)
        _assert_jacobian_columns_exact(got)
        sizes.add(got.size)
    assert len(sizes) > 5 and max(sizes) > 4            # the rows really changed, and the buffers grew


def test_joint_column_support_reproduces_pinocchio_joint_jacobians():
    """support[j] * pin_data.J summed into dofs (mimic columns into their primary's) = getJointJacobian(WORLD)."""
    from contact_sim_ros.geometry.contact_query import joint_column_support
    from contact_sim_ros.sim.scene import load_scene
    model = load_scene({"robot": "barrett"}).model
    pm = model.pin_model
    data = pm.createData()
    q = np.random.default_rng(1).uniform(np.clip(pm.lowerPositionLimit, -1, 1), np.clip(pm.upperPositionLimit, -1, 1))
    pin.computeJointJacobians(pm, data, q)
    support, column_dof = joint_column_support(pm)
    assert data.J.shape[1] == len(column_dof) > pm.nv            # mimic joints have their own columns
    for j in range(1, pm.njoints):
        mine = np.zeros((6, pm.nv))
        np.add.at(mine.T, column_dof, (support[j] * data.J).T)
        np.testing.assert_allclose(mine, pin.getJointJacobian(pm, data, j, pin.WORLD), atol=1e-14)


@pytest.mark.parametrize("shape", [coal.Box(0.2, 0.1, 0.3), coal.Sphere(0.05), coal.Cylinder(0.04, 0.2),
                                   coal.Capsule(0.03, 0.1), coal.Ellipsoid(0.05, 0.03, 0.08),
                                   coal.Halfspace(np.array([0.0, 0.6, 0.8]), 0.01), "hull"],
                         ids=["box", "sphere", "cylinder", "capsule", "ellipsoid", "halfspace", "hull"])
def test_kernel_line_casts_match_the_numpy_line_caster(shape):
    """contact_kernels.line_interval = LineCaster.intervals on random lines (hits, misses, axis-aligned)."""
    from contact_sim_ros.geometry import contact_kernels as ck
    from contact_sim_ros.geometry.line_intersection import LineCaster
    shape = convex_box(0.1, 0.05, 0.15) if shape == "hull" else shape
    caster = LineCaster([shape])
    rng = np.random.default_rng(3)
    m = 400
    p = rng.uniform(-0.2, 0.2, (m, 3))
    u = rng.normal(size=(m, 3))
    u[::5] = np.eye(3)[rng.integers(0, 3, m // 5)]        # axis-aligned lines: parallel to faces / the axis
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    s_in, s_out = caster.intervals(np.zeros(m, dtype=int), p, u)
    for i in range(m):
        k_in, k_out = ck.line_interval(caster.type[0], 0, *p[i], *u[i], caster.half, caster.radius,
                                       caster.half_length, caster.plane_normal, caster.plane_offset,
                                       caster.face_start, caster.face_normal, caster.face_offset,
                                       caster.tolerance)
        np.testing.assert_allclose([k_in, k_out], [s_in[i], s_out[i]], rtol=0, atol=1e-12)
    assert np.isfinite(s_in).sum() > 10                   # enough hits (and, but for the halfspace, misses)


# ----------------------------------------------------------------------------- sphere-halfspace pairs without coal
def _spheres_and_halfspaces(mixed: bool):
    """A box on 4 corner spheres (rotated, offset geometry placements), a ball, a moving plate carrying a
    halfspace (rotated, offset in its joint frame), the ground and a tilted static halfspace. Pairs: every
    sphere-halfspace pair, in both orders (static halfspace = A, sphere = A against the plate); with ``mixed``
    also the sphere-sphere pairs (coal's)."""
    pm, gm = pin.Model(), pin.GeometryModel()
    tilted = pose((0.02, -0.01, 0.004), (0.2, -0.15, 0.0))
    gm.addGeometryObject(pin.GeometryObject("ground", 0, pin.SE3.Identity(), coal.Halfspace(Z.copy(), 0.0)))
    gm.addGeometryObject(pin.GeometryObject("tilted", 0, tilted, coal.Halfspace(np.array([0.0, 0.6, 0.8]), -0.003)))
    joints = {}
    for name in ("box", "ball", "plate"):
        joints[name] = pm.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), name)
        pm.appendBodyToJoint(joints[name], pin.Inertia.FromSphere(1.0, 0.05), pin.SE3.Identity())
    for i, (x, y) in enumerate([(-1, -1), (1, -1), (-1, 1), (1, 1)]):
        gm.addGeometryObject(pin.GeometryObject(f"corner{i}", joints["box"],
                                                pose((0.04 * x, 0.03 * y, -0.01), (0.3 * i, 0.1, -0.2)),
                                                coal.Sphere(0.006 + 0.001 * i)))
    gm.addGeometryObject(pin.GeometryObject("ball", joints["ball"], pin.SE3.Identity(), coal.Sphere(0.02)))
    gm.addGeometryObject(pin.GeometryObject("plate", joints["plate"], pose((0.01, 0.0, -0.002), (0.1, 0.05, 0.3)),
                                            coal.Halfspace(np.array([0.0, 0.0, 1.0]), 0.001)))
    half = {0, 1, 7}
    pairs = [(a, b) for a, b in default_pairs(gm) if (a in half) != (b in half) or (mixed and not {a, b} & half)]
    return make_model(pm, gm, pairs=pairs)


@pytest.mark.parametrize("mixed,broad_phase", [(False, False), (True, False), (True, True)],
                         ids=["only-sphere-halfspace", "with-sphere-sphere", "with-sphere-sphere-broad-phase"])
def test_analytic_sphere_halfspace_pairs_match_coal(mixed, broad_phase):
    """The compiled sphere-halfspace pairs (no coal) give coal's contact set within 1e-12 m: signed distances,
    points, normals, frames, Jacobians; random poses with penetrating contacts, contacts separated within the
    margin and pairs beyond it (dropped by both); static and moving halfspaces, the halfspace as A or B."""
    model = _spheres_and_halfspaces(mixed)
    data = model.pin_model.createData()
    analytic = ContactQuery(model, MARGIN, broad_phase=broad_phase)
    reference = ContactQuery(model, MARGIN, broad_phase=broad_phase, analytic_pairs=False)
    assert analytic._all_analytic == (not mixed) and not reference._all_analytic and len(reference._an_int) == 0
    rng = np.random.default_rng(18)
    phi = []
    for _ in range(40):
        box = pose(rng.uniform([-0.05, -0.05, 0.0], [0.05, 0.05, 0.03]), rng.uniform(-0.3, 0.3, 3))
        ball_xyz = rng.uniform([-0.03, -0.03, 0.012], [0.03, 0.03, 0.04])
        plate = pose(ball_xyz - [0.0, 0.0, 0.02 + rng.uniform(-0.006, 0.016)], rng.uniform(-0.2, 0.2, 3))
        q = configuration(model, {"box": box, "ball": pose(ball_xyz), "plate": plate})
        pin.forwardKinematics(model.pin_model, data, q)
        a = _contact_set_fields(analytic.update(data))
        b = _contact_set_fields(reference.update(data))
        _assert_same_contacts(a, b)
        for key in ("colliding_pairs", "contacts") if broad_phase else ("candidate_pairs", "colliding_pairs",
                                                                          "contacts"):
            assert analytic.stats[key] == reference.stats[key]    # candidates: the broad phase skips sphere pairs
        phi.extend(a["signed_distance"])
    phi = np.array(phi)
    assert (phi < -1e-4).sum() > 20 and ((phi > 1e-4) & (phi <= MARGIN)).sum() > 20


def _spheres_and_boxes():
    """Two free bodies each carrying a sphere and a box (rotated, offset geometry placements), a free ball, a
    free cylinder (coal's pairs), a static rotated box and a static sphere; every pair of different bodies."""
    pm, gm = pin.Model(), pin.GeometryModel()
    gm.addGeometryObject(pin.GeometryObject("wall", 0, pose((0.05, -0.02, 0.01), (0.3, -0.2, 0.5)),
                                            coal.Box(0.06, 0.2, 0.15)))
    gm.addGeometryObject(pin.GeometryObject("post", 0, pose((-0.06, 0.03, 0.0)), coal.Sphere(0.03)))
    joints = {}
    for name in ("a", "b", "ball", "can"):
        joints[name] = pm.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), name)
        pm.appendBodyToJoint(joints[name], pin.Inertia.FromSphere(1.0, 0.05), pin.SE3.Identity())
    for i, name in enumerate(("a", "b")):
        gm.addGeometryObject(pin.GeometryObject(f"{name}_sphere", joints[name],
                                                pose((0.01, -0.02 * i, 0.015), (0.2, 0.4 * i, -0.1)),
                                                coal.Sphere(0.022 + 0.004 * i)))
        gm.addGeometryObject(pin.GeometryObject(f"{name}_box", joints[name],
                                                pose((-0.02, 0.01, -0.03 + 0.01 * i), (0.1 * i, -0.3, 0.25)),
                                                coal.Box(0.07, 0.05 + 0.02 * i, 0.06)))
    gm.addGeometryObject(pin.GeometryObject("ball", joints["ball"], pin.SE3.Identity(), coal.Sphere(0.025)))
    gm.addGeometryObject(pin.GeometryObject("can", joints["can"], pin.SE3.Identity(), coal.Cylinder(0.02, 0.06)))
    return make_model(pm, gm, pairs=default_pairs(gm))


@pytest.mark.parametrize("broad_phase", [False, True], ids=["all-pairs", "broad-phase"])
def test_analytic_sphere_pairs_match_coal(broad_phase):
    """The compiled sphere-sphere and sphere-box pairs (no coal) give coal's contact set within 1e-12 m: signed
    distances, points, normals, frames, Jacobians; random poses with the sphere's centre outside and inside the
    box (coal: the face of least penetration), separated within the margin and beyond it, the sphere as A or B,
    static and moving boxes and spheres, alongside coal's pairs (cylinder)."""
    model = _spheres_and_boxes()
    data = model.pin_model.createData()
    analytic = ContactQuery(model, MARGIN, broad_phase=broad_phase)
    reference = ContactQuery(model, MARGIN, broad_phase=broad_phase, analytic_pairs=False)
    shapes = [g.geometry for g in model.collision_model.geometryObjects]
    assert analytic._sp_pairs > 10 and reference._sp_pairs == 0 and len(analytic._coal_pairs) >= 6
    rng = np.random.default_rng(13)
    phi, inside, first_box = [], 0, 0
    for _ in range(150):
        q = configuration(model, {name: pose(rng.uniform([-0.03, -0.05, -0.04], [0.08, 0.05, 0.05]),
                                             rng.uniform(-np.pi, np.pi, 3)) for name in ("a", "b", "ball", "can")})
        pin.forwardKinematics(model.pin_model, data, q)
        a = _contact_set_fields(analytic.update(data))
        b = _contact_set_fields(reference.update(data))
        _assert_same_contacts(a, b)
        for key in ("colliding_pairs", "contacts"):
            assert analytic.stats[key] == reference.stats[key]
        phi.extend(a["signed_distance"])
        for ga, gb, d in zip(a["geometry_a"], a["geometry_b"], a["signed_distance"]):
            sphere = [g for g in (shapes[ga], shapes[gb]) if isinstance(g, coal.Sphere)]
            if len(sphere) == 1 and {type(shapes[ga]), type(shapes[gb])} == {coal.Sphere, coal.Box}:
                inside += d < -sphere[0].radius         # deeper than the radius: the centre is in the box
                first_box += isinstance(shapes[ga], coal.Box)
    phi = np.array(phi)
    assert (phi < -1e-3).sum() > 100 and ((phi > 1e-4) & (phi <= MARGIN)).sum() > 20
    assert inside > 10 and first_box > 10


def test_sphere_pairs_joint_origin_reject_is_conservative():
    """sphere_primitive_raw skips a pair whose joint origins are farther apart than its bound
    (SP_ORIGIN_REACH: radii plus the geometries' offsets in their joint frames) before placing it: on random poses
    of the offset spheres and boxes, many of them near that bound, it writes the same rows, bit for bit, as with
    the skip disabled (an infinite bound), and the skip does reject pairs."""
    from contact_sim_ros.geometry import contact_kernels as ck
    model = _spheres_and_boxes()
    data = model.pin_model.createData()
    query = ContactQuery(model, MARGIN, broad_phase=True)
    sp_int, sp_float = query._sp_int, query._sp_float
    unbounded = sp_float.copy()
    unbounded[:, ck.SP_ORIGIN_REACH] = np.inf
    slots = query.analytic_joint_slots
    placement = query.analytic_placements
    rng = np.random.default_rng(5)
    rows = rejected = near = 0
    for _ in range(300):
        q = configuration(model, {name: pose(rng.uniform(-0.12, 0.12, 3), rng.uniform(-np.pi, np.pi, 3))
                                  for name in ("a", "b", "ball", "can")})
        pin.forwardKinematics(model.pin_model, data, q)
        for slot, joint in slots:
            placement[slot] = data.oMi[joint].homogeneous
        out = []
        for table in (sp_float, unbounded):
            pair_out, raw = np.zeros(len(sp_int), np.int64), np.zeros((3, len(sp_int), 3))
            r = ck.sphere_primitive_raw(placement, sp_int, table, MARGIN, pair_out, raw, 0)
            out.append((r, pair_out.tobytes(), raw.tobytes()))
        assert out[0] == out[1]
        rows += out[0][0]
        apart = np.linalg.norm(placement[sp_int[:, 1], :3, 3] - placement[sp_int[:, 0], :3, 3], axis=1)
        bound = sp_float[:, ck.SP_ORIGIN_REACH] + MARGIN
        rejected += int((apart > bound).sum())
        near += int(((apart > bound - 0.01) & (apart <= bound + 0.01)).sum())
    assert rows > 100 and rejected > 300 and near > 50, (rows, rejected, near)


def test_analytic_sphere_pairs_keep_the_clutter_trajectory():
    """The first 110 steps of the ICF clutter (40 spheres and boxes in a box container, SAP, dt 1 ms; contacts
    from step ~40, 14 at the end) with the compiled sphere-sphere / sphere-box / sphere-halfspace pairs and with
    coal's: the trajectories agree to round-off (later the pile is chaotic and round-off grows)."""
    from contact_sim_ros.sim.simulator import Simulator
    sims = [Simulator("scenes/icf_clutter.yaml", engine="sap") for _ in range(2)]
    assert sims[0].contact_query._sp_pairs > 600
    sims[1].contact_query = ContactQuery(sims[1].model, sims[1].scene.contact_margin, broad_phase="auto",
                                         analytic_pairs=False)
    for _ in range(110):
        for sim in sims:
            sim.step(strict=True)
        np.testing.assert_allclose(sims[0].q, sims[1].q, rtol=0, atol=1e-12)
    assert sims[0].contact_query.stats["contacts"] > 10


def test_analytic_sphere_halfspace_pairs_keep_the_sphere_trajectory():
    """1 s of the rolling-sphere scene (TAMSI, dt 2 ms): with the compiled sphere-halfspace pair and with coal's,
    the trajectories agree to round-off."""
    from contact_sim_ros.sim.simulator import Simulator
    sims = [Simulator("scenes/icf_falling_sphere.yaml", engine="tamsi", time_step=0.002) for _ in range(2)]
    assert sims[0].contact_query._all_analytic
    sims[1].contact_query = ContactQuery(sims[1].model, sims[1].scene.contact_margin, broad_phase="auto",
                                         analytic_pairs=False)
    for _ in range(500):
        for sim in sims:
            sim.step(strict=True)
        np.testing.assert_allclose(sims[0].q, sims[1].q, rtol=0, atol=1e-12)
    assert sims[0].q[0] > 1.0                            # rolled (2 m/s launch, 5/7 of it when rolling)


def _boxes_and_halfspaces():
    """Three free boxes (one on an offset, rotated geometry placement) over two static halfspaces: the ground
    before them in the geometry list (the halfspace is A) and a tilted one after them (the box is A)."""
    pm, gm = pin.Model(), pin.GeometryModel()
    gm.addGeometryObject(pin.GeometryObject("ground", 0, pin.SE3.Identity(), coal.Halfspace(np.array([0, 0, 1.0]),
                                                                                             0.0)))
    for i, (name, sides) in enumerate((("a", (0.1, 0.1, 0.1)), ("b", (0.12, 0.05, 0.03)), ("c", (0.2, 0.06, 0.08)))):
        j = pm.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), name)
        pm.appendBodyToJoint(j, pin.Inertia.FromBox(1.0, *sides), pin.SE3.Identity())
        placement = pose((0.01, -0.02, 0.015), (0.2, -0.1, 0.3)) if name == "c" else pin.SE3.Identity()
        gm.addGeometryObject(pin.GeometryObject(f"{name}_box", j, placement, coal.Box(*sides)))
    gm.addGeometryObject(pin.GeometryObject("slope", 0, pose((0.0, 0.0, 0.02), (0.15, -0.1, 0.0)),
                                            coal.Halfspace(np.array([0.1, 0.0, 1.0]) / np.hypot(0.1, 1.0), 0.01)))
    return make_model(pm, gm, pairs=default_pairs(gm))


def _in_point_order(fields):
    """The contact set's rows sorted by pair, then point (mm): the points of one patch in a fixed order. A patch's
    point order is coal's convex-hull order, which for a box lying exactly axis-aligned (two corners with the same
    lowest patch coordinate) is decided by the round-off of each implementation's patch frame."""
    point = np.round(fields["point"], 3)
    order = np.lexsort((point[:, 2], point[:, 1], point[:, 0], fields["geometry_b"], fields["geometry_a"]))
    out = {}
    for f, value in fields.items():
        if f in ("jacobian", "velocity_bias"):
            value = value.reshape(len(order), 3, -1)[order].reshape(value.shape)
        else:
            value = value[order]
        out[f] = value
    return out


@pytest.mark.parametrize("broad_phase", [False, True], ids=["all-pairs", "broad-phase"])
def test_analytic_box_halfspace_pairs_match_coal(broad_phase):
    """The compiled box-halfspace pairs (no coal) give coal's contact set: coal's support point, its patch (the
    corners within the patch tolerance, ordered as coal's convex hull) and the per-point depths by line casts, within
    1e-12 m (one-point contacts within 1e-10 m: coal's box support scales the negative half sides by 1 + 1e-10 for
    the whole process once it has seen a direction with a zero component). Random poses: vertex, edge and face
    contacts, boxes flat and exactly axis-aligned, tilted by less than the tolerance (3 or 4 corners), separated
    within and beyond the margin, the box as A or B, on the ground and on a slope."""
    model = _boxes_and_halfspaces()
    data = model.pin_model.createData()
    analytic = ContactQuery(model, MARGIN, broad_phase=broad_phase)
    reference = ContactQuery(model, MARGIN, broad_phase=broad_phase, analytic_pairs=False)
    assert analytic._bh_pairs == 6 and reference._bh_pairs == 0 and len(analytic._coal_pairs) == 3
    rng = np.random.default_rng(17)
    points_per_pair = {}
    for trial in range(300):
        poses = {}
        for name in ("a", "b", "c"):
            kind = trial % 4
            if kind == 0:                                         # any orientation
                rpy = rng.uniform(-np.pi, np.pi, 3)
            elif kind == 1:                                       # exactly axis-aligned (zero components)
                rpy = rng.integers(-2, 3, 3) * np.pi / 2
            elif kind == 2:                                       # nearly flat: 1 to 4 corners in the patch
                rpy = rng.uniform(-0.15, 0.15, 3) * rng.choice([1.0, 0.1, 0.01])
            else:                                                 # on an edge
                rpy = np.array([np.pi / 4 + rng.uniform(-0.05, 0.05), rng.uniform(-0.05, 0.05), 0.0])
            poses[name] = pose(rng.uniform([-0.3, -0.3, -0.05], [0.3, 0.3, 0.1]), rpy)
        q = configuration(model, poses)
        pin.forwardKinematics(model.pin_model, data, q)
        a = _in_point_order(_contact_set_fields(analytic.update(data)))
        b = _in_point_order(_contact_set_fields(reference.update(data)))
        for f in a:
            assert a[f].shape == b[f].shape, f
            np.testing.assert_allclose(a[f], b[f], rtol=0, atol=1e-10, err_msg=f)
        for key in ("colliding_pairs", "contacts"):
            assert analytic.stats[key] == reference.stats[key]
        pairs = list(zip(a["geometry_a"].tolist(), a["geometry_b"].tolist()))
        for pair in set(pairs):
            points_per_pair.setdefault(pairs.count(pair), 0)
            points_per_pair[pairs.count(pair)] += 1
    assert all(points_per_pair.get(k, 0) > 5 for k in (1, 2, 4)), points_per_pair


@pytest.mark.parametrize("scene", ["default.yaml", "scenario_franka_rod.yaml", "iiwa_allegro_mug.yaml",
                                   "icf_clutter.yaml"])
def test_sweep_and_prune_reports_the_aabb_tree_pairs(scene):
    """The query's broad phase (sweep and prune) reports exactly the pairs of Pinocchio's dynamic AABB tree (its
    broad phase before), so that coal's narrow phase runs on the same pairs in every step (its per-pair GJK warm
    start depends on which pairs it was called for): 150 random configurations around the scene's initial one,
    robots (Panda, iiwa + Allegro) and the 40-object clutter, with overlaps found."""
    from pathlib import Path

    from contact_sim_ros.sim.simulator import Simulator
    sim = Simulator(str(Path(__file__).resolve().parents[1] / "scenes" / scene), engine="lagged")
    model, q0 = sim.model, sim.q.copy()
    cq = ContactQuery(model, MARGIN, broad_phase=True)
    pm, gm = cq._pin_model, cq._gm
    tree_data = ContactQuery._geometry_data(gm, MARGIN, cq.patch_tolerance, 8)   # the query's margins
    for k in range(len(gm.collisionPairs)):
        if not cq._gd.activeCollisionPairs[k]:
            tree_data.deactivateCollisionPair(k)
    tree = pin.BroadPhaseManager_DynamicAABBTreeCollisionManager(pm, gm, tree_data)
    tree_pairs = pin.CollisionCallBackCollect(gm, tree_data, cq.num_pairs)
    data = pm.createData()
    rng = np.random.default_rng(2)
    found = 0
    for trial in range(150):
        q = pin.normalize(pm, q0 + rng.normal(scale=0.05 if trial % 2 else 0.3, size=pm.nq))
        pin.forwardKinematics(pm, data, q)
        pin.updateGeometryPlacements(pm, data, gm, cq._gd)
        pin.updateGeometryPlacements(pm, data, gm, tree_data)
        cq._broad.update(False)
        pin.computeCollisions(cq._broad, cq._collect)
        tree.update(False)
        pin.computeCollisions(tree, tree_pairs)
        ours = sorted(cq._collect.pair_indexes[i] for i in range(len(cq._collect.pair_indexes)))
        theirs = sorted(tree_pairs.pair_indexes[i] for i in range(len(tree_pairs.pair_indexes)))
        assert ours == theirs, trial
        found += len(ours)
    assert found > 150
