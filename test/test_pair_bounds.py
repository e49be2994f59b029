"""The bounding-volume test of the contact query's pairs (geometry/pair_bounds.py): its kinematics equal
Pinocchio's, its bounds never exceed coal's distances, and a query given q returns the same contact set as the
full query (with no coal call when nothing is within the margin)."""

import coal
import numpy as np
import pinocchio as pin
import pytest

from contact_sim_ros.geometry import pair_bounds
from contact_sim_ros.geometry.contact_query import ContactQuery
from contact_sim_ros.sim.scene import load_scene
from contact_sim_ros.sim.simulator import Simulator
from model_builders import configuration, default_pairs, free_body_scene, make_model, pose

MARGIN = 0.01
Z = np.array([0.0, 0.0, 1.0])


def _random_q(pm, rng):
    """A random configuration within the joint limits (clipped to +-2), quaternions and (cos, sin) normalized."""
    q = rng.uniform(np.clip(pm.lowerPositionLimit, -2.0, 2.0), np.clip(pm.upperPositionLimit, -2.0, 2.0))
    return pin.normalize(pm, q)


def _every_joint_kind():
    """A free flyer carrying a chain of every supported joint kind, with rotated, offset joint placements."""
    pm, gm = pin.Model(), pin.GeometryModel()
    rng = np.random.default_rng(3)
    parent = pm.addJoint(0, pin.JointModelFreeFlyer(), pose((0.1, -0.2, 0.3), (0.1, 0.2, 0.3)), "base")
    axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    joints = [pin.JointModelRX(), pin.JointModelRY(), pin.JointModelRZ(), pin.JointModelRevoluteUnaligned(axis),
              pin.JointModelRUBX(), pin.JointModelRUBZ(), pin.JointModelPX(), pin.JointModelPY(),
              pin.JointModelPZ(), pin.JointModelPrismaticUnaligned(axis[::-1].copy())]
    for i, joint in enumerate(joints):
        parent = pm.addJoint(parent, joint, pose(rng.uniform(-0.2, 0.2, 3), rng.uniform(-1, 1, 3)), f"j{i}")
        pm.appendBodyToJoint(parent, pin.Inertia.FromSphere(1.0, 0.05), pin.SE3.Identity())
        gm.addGeometryObject(pin.GeometryObject(f"g{i}", parent, pose(rng.uniform(-0.1, 0.1, 3)),
                                                coal.Sphere(0.02)))
    pm.lowerPositionLimit[:] = -2.0
    pm.upperPositionLimit[:] = 2.0
    return make_model(pm, gm)


def test_kernel_kinematics_equal_pinocchio_joint_placements():
    """oMi of every joint (revolute about x / y / z / any axis, unbounded revolute, prismatic along x / y / z / any
    axis, free flyer; iiwa + WSG) from the kernel equals Pinocchio's forwardKinematics to 1e-13."""
    rng = np.random.default_rng(11)
    for model in (_every_joint_kind(), load_scene({"robot": "iiwa_wsg"}).model):
        pm = model.pin_model
        bounds = pair_bounds.PairBounds.make(pm, model.collision_model, np.zeros((0, 2), int), MARGIN)
        assert bounds is not None
        data = pm.createData()
        for _ in range(20):
            q = _random_q(pm, rng)
            pin.forwardKinematics(pm, data, q)
            assert not bounds.any_within(q)                 # no pairs; the placements are computed
            for j in range(pm.njoints):
                np.testing.assert_allclose(bounds.placement[j, :9].reshape(3, 3), data.oMi[j].rotation, atol=1e-13)
                np.testing.assert_allclose(bounds.placement[j, 9:], data.oMi[j].translation, atol=1e-13)


def _convex_hull(hx, hy, hz):
    """An octahedron-capped box as a coal.Convex made like the loader makes mesh hulls (buildConvexHull), offset
    from its frame's origin (its AABB centre is not the origin)."""
    points = [[sx * hx, sy * hy, sz * hz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
    points = np.array(points + [[2.5 * hx, 0.0, 0.0], [0.0, 0.0, 2.0 * hz]]) + [0.02, -0.01, 0.03]
    bvh = coal.BVHModelOBBRSS()
    bvh.beginModel(0, 0)
    bvh.addVertices(points)
    bvh.addTriangles(np.array([[0, 1, 2], [1, 3, 2], [4, 6, 5], [5, 6, 7], [0, 4, 1], [1, 4, 5], [2, 3, 6],
                               [3, 7, 6], [0, 2, 4], [2, 6, 4], [1, 5, 3], [3, 5, 7], [8, 9, 0]]))
    bvh.endModel()
    bvh.buildConvexHull(True, "Qt")
    return bvh.convex


SHAPES = [("box", lambda: coal.Box(0.2, 0.05, 0.03)), ("flat", lambda: coal.Box(0.08, 0.08, 0.01)),
          ("ball", lambda: coal.Sphere(0.04)), ("can", lambda: coal.Cylinder(0.03, 0.2)),
          ("pill", lambda: coal.Capsule(0.02, 0.08)), ("cone", lambda: coal.Cone(0.04, 0.1)),
          ("egg", lambda: coal.Ellipsoid(0.03, 0.06, 0.02)), ("hull", lambda: _convex_hull(0.04, 0.07, 0.03))]


def test_bounds_never_exceed_coal_distances():
    """For every pair of a box, a flat box, a sphere, a cylinder, a capsule, a cone, an ellipsoid, a convex hull
    (free bodies, random poses from deep penetration to 0.3 m apart) and the ground (a halfspace): a separated pair
    is kept at the limit coal's distance + 1e-9 m (the bound never exceeds the distance), an overlapping pair at
    1e-9 m (coal's EPA depth of a sphere deep in a cylinder can exceed the true depth, which the slab bound gives);
    a sphere's, a cylinder's and a capsule's bounds against the ground are exact (not kept 1e-6 m below). The list
    of the pairs within (``PairBounds.within``) is the pairs each kept alone."""
    model = free_body_scene(free=[(name, make(), 1.0) for name, make in SHAPES],
                            static=[("ground", coal.Halfspace(Z.copy(), 0.0), pin.SE3.Identity())])
    pm, gm = model.pin_model, model.collision_model
    pairs = default_pairs(gm)
    bounds = pair_bounds.PairBounds.make(pm, gm, pairs, MARGIN)
    data, gd = pm.createData(), pin.GeometryData(gm)
    rng = np.random.default_rng(5)
    tight = listed_total = skipped_total = 0
    for _ in range(60):
        poses = {name: pose(rng.uniform([-0.15, -0.15, 0.0], [0.15, 0.15, 0.2]), rng.uniform(-np.pi, np.pi, 3))
                 for name, _ in SHAPES}
        q = configuration(model, poses)
        pin.forwardKinematics(pm, data, q)
        pin.updateGeometryPlacements(pm, data, gm, gd)
        for k, (a, b) in enumerate(pairs.tolist()):
            ga, gb = gm.geometryObjects[a], gm.geometryObjects[b]
            result = coal.DistanceResult()
            distance = coal.distance(ga.geometry, gd.oMg[a], gb.geometry, gd.oMg[b], coal.DistanceRequest(), result)
            kept = [pair_bounds.pairs_within(q, bounds.joint_int, bounds.joint_float, bounds.geometry_int,
                                             bounds.geometry_float, pairs[k:k + 1], limit, bounds.placement,
                                             bounds.world, bounds.local)
                    for limit in (max(distance, 0.0) + 1e-9, distance - 1e-6)]
            assert kept[0], (ga.name, gb.name, distance)
            if {ga.name, gb.name} in ({"ball", "ground"}, {"can", "ground"}, {"pill", "ground"}) and distance > 0:
                assert not kept[1], (ga.name, gb.name, distance)         # exact supports
                tight += 1
        # the list of every pair within (the query's filter of the pairs it narrow-phases every step) is exactly
        # the pairs each kept alone, and contains every pair coal finds within the margin
        alone = [k for k in range(len(pairs)) if pair_bounds.pairs_within(
            q, bounds.joint_int, bounds.joint_float, bounds.geometry_int, bounds.geometry_float, pairs[k:k + 1],
            bounds.limit, bounds.placement, bounds.world, bounds.local)]
        listed = bounds.within(q).tolist()
        assert listed == alone
        split = len(pairs) // 2                      # two groups in one call: the same list, the first group counted
        view, n_first = bounds.within_split(q, split)
        assert view.tolist() == listed and n_first == sum(k < split for k in listed)
        within_margin = [k for k, (a, b) in enumerate(pairs.tolist()) if coal.distance(
            gm.geometryObjects[a].geometry, gd.oMg[a], gm.geometryObjects[b].geometry, gd.oMg[b],
            coal.DistanceRequest(), coal.DistanceResult()) <= MARGIN]
        assert set(within_margin) <= set(listed)
        listed_total += len(listed)
        skipped_total += len(pairs) - len(listed)
    assert tight > 60
    assert listed_total > 100 and skipped_total > 100, (listed_total, skipped_total)


def test_unsupported_models_get_no_bounds():
    """Mimic joints (BarrettHand) are not in the kernel's kinematics: no test, the query runs in full."""
    model = load_scene({"robot": "barrett", "environment": [{"name": "ground", "shape": "halfspace"}]}).model
    assert ContactQuery(model, MARGIN)._bounds is None


def _fields(cs):
    return {f: getattr(cs, f).copy() for f in cs.__dataclass_fields__ if getattr(cs, f) is not None}


def _robot_near_objects(robot):
    scene = {"environment": [
        {"name": "ground", "shape": "halfspace"},
        {"name": "table", "shape": {"box": [0.4, 0.4, 0.2]}, "pose": {"xyz": [0.5, 0.0, 0.1]}}],
        "objects": [{"name": "brick", "shape": {"box": [0.06, 0.04, 0.1]}, "density": 500,
                     "pose": {"xyz": [0.45, 0.0, 0.25]}},
                    {"name": "can", "shape": {"cylinder": [0.03, 0.12]}, "density": 500,
                     "pose": {"xyz": [0.5, -0.1, 0.3]}},
                    {"name": "ball", "shape": {"sphere": 0.03}, "density": 500,
                     "pose": {"xyz": [0.55, 0.1, 0.23]}}]}
    if robot:
        scene["robot"] = robot
    return load_scene(scene).model


@pytest.mark.parametrize("robot", ["iiwa_wsg", "allegro", None])
def test_query_given_q_returns_the_full_querys_contacts(robot):
    """Random configurations of a robot (self-contacts) and of a brick, a can and a ball over a table on the ground
    (every third time far away): the query given q (bounding-volume test, then nothing or the full query) returns
    exactly the contact set of the full query; fresh queries each time (coal's warm start has no history). Both
    outcomes occur, and so do both outcomes of the compiled pairs' own test in full queries (their kernels run or
    are skipped)."""
    model = _robot_near_objects(robot)
    pm = model.pin_model
    rng = np.random.default_rng(8)
    data = pm.createData()
    outcomes = {"none": 0, "full": 0}
    analytic = {"skipped": 0, "run": 0}
    contacts = 0
    for i in range(60):
        q = _random_q(pm, rng)
        far = i % 3 == 0
        if robot and far:                  # the robot folded up high above everything: no self-contact either
            q = pin.neutral(pm)
        for k, (body, z) in enumerate((("brick", 0.25), ("can", 0.27), ("ball", 0.23))):
            xyz = [3.0 + k, 3.0, 1.0] if far else rng.uniform([0.3, -0.25, z - 0.1], [0.7, 0.25, z + 0.2])
            q[model.free_body(body).q_slice] = pin.SE3ToXYZQUAT(pose(xyz, rng.uniform(-1, 1, 3)))
        pin.forwardKinematics(pm, data, q)
        pin.computeJointJacobians(pm, data)
        full = ContactQuery(model, MARGIN, broad_phase="auto")
        given_q = ContactQuery(model, MARGIN, broad_phase="auto")
        assert given_q._bounds is not None
        assert given_q._near_bounds is not None
        assert given_q._n_always_near > 0 or not robot           # a robot's ground pairs: filtered by bounds
        a = _fields(full.update(data, joint_jacobians=True))
        outcomes["full" if given_q._bounds.any_within(q) else "none"] += 1
        if given_q._bounds.any_within(q):
            near, n_always = given_q._near_bounds.within_split(q, given_q._n_always_near)
            analytic["run" if len(near) > n_always else "skipped"] += 1
        b = _fields(given_q.update(data, joint_jacobians=True, q=q))
        for f in a:
            np.testing.assert_array_equal(a[f], b[f], err_msg=f)
        contacts += len(a["signed_distance"])
    assert contacts > 40 and outcomes["full"] > 20, (contacts, outcomes)
    if robot != "allegro":                 # the Allegro's neutral pose: fingers within the margin of each other
        assert outcomes["none"] > 5, outcomes
    assert analytic["run"] > 5 and analytic["skipped"] > (5 if robot == "iiwa_wsg" else 0), analytic


def test_held_iiwa_steps_without_coal_and_keeps_its_trajectory():
    """The iiwa + WSG held by PD above the ground (the peer benchmark's scene): no pair passes the test in any step
    (links 1 and 3, 0.11 m apart, overlap as capsules but not as slabs), so coal is never called, and 300 steps are
    bit-identical to the full query's."""
    from pathlib import Path
    scene = str(Path(__file__).resolve().parents[1] / "benchmarks" / "peers" / "scenes" / "iiwa_wsg_pd.yaml")
    sims = [Simulator(scene, engine="tamsi", time_step=1e-3) for _ in range(2)]
    sims[1].contact_query._bounds = None
    for sim in sims:        # the staged step's query (the fused tree step tests coal's pairs itself: test_tree_step)
        sim._tree = None
    for _ in range(300):
        for sim in sims:
            assert sim.step().ok
        assert sims[0].contact_query.stats["candidate_pairs"] == 0
        assert sims[1].contact_query.stats["candidate_pairs"] > 10
        np.testing.assert_array_equal(sims[0].q, sims[1].q)
        np.testing.assert_array_equal(sims[0].v, sims[1].v)


def test_contact_free_phases_keep_the_trajectory():
    """The rod sliding on the ground (scenes/icf_sliding_rod.yaml) lifts off and lands: 400 steps with the test
    (its contact-free steps without coal, then the full query again) are bit-identical to the full query's."""
    from pathlib import Path
    scene = str(Path(__file__).resolve().parents[1] / "scenes" / "icf_sliding_rod.yaml")
    sims = [Simulator(scene, engine="tamsi", time_step=1e-3) for _ in range(2)]
    assert sims[0].contact_query._bounds is not None
    sims[1].contact_query._bounds = None
    free = touching = 0
    for _ in range(400):
        for sim in sims:
            assert sim.step().ok
        free += sims[0].contacts.size == 0
        touching += sims[0].contacts.size > 0
        np.testing.assert_array_equal(sims[0].q, sims[1].q)
        np.testing.assert_array_equal(sims[0].v, sims[1].v)
    assert free > 100 and touching > 10, (free, touching)
