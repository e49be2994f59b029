"""The per-step contact query: MultibodyModel + kinematics -> ContactSet.

Pipeline of ``ContactQuery.update``:

0. given q (the Simulator passes it), the bounding-volume test of every pair in one compiled call
   (``pair_bounds``): when no pair can be within the margin the query ends here (no coal call, the empty set).
   Every step the same test of two groups alone: the compiled (analytic) pairs, whose kernels and joint
   placements are skipped when none can be within the margin, and the unbounded pairs of step 2 (a halfspace or
   a plane), of which only those that can be are narrow-phased;
1. geometry placements into the query's own ``pin.GeometryData`` (``pin.updateGeometryPlacements``);
2. broad phase: Pinocchio's ``BroadPhaseManager_SSaPCollisionManager`` (coal's simple sweep and prune over the
   objects' AABBs); Pinocchio inflates every AABB by (break_distance + security_margin) / 2, so pairs within the
   margin overlap, and it only reports pairs of ``model.collision_pairs`` (the pair filter is respected). Pairs
   with a halfspace or plane bypass it (infinite AABBs are not inflated: such pairs were missed in tests) and are
   narrow-phased every step. It reports the same pairs as the dynamic AABB tree (every pair whose AABBs overlap;
   checked on 2400 random configurations of 8 scenes, ``test_sweep_and_prune_reports_the_aabb_tree_pairs``) in
   about half the time (clutter: 14 vs 31 us; a robot scene: 6-11 vs 12-21 us);
3. narrow phase (coal: analytic primitive tests or GJK/EPA) with ``security_margin = margin``, so pairs up to
   ``margin`` apart are reported with their signed gap: in ONE ``pin.computeCollisions`` call over all pairs
   (no broad phase) or over the unbounded pairs (a second GeometryData in which only they are active), and
   ``pin.computeCollision`` per candidate of the broad phase; only the colliding pairs' results are read;
4. contact manifold: ``pin.computeContactPatch`` (coal) on the pairs found: a box flat on a plane gives its
   4 corners, a lying cylinder or capsule 2 points, a standing cylinder ``curved_shape_samples`` points on its
   rim (coal samples the rim only when the cylinder is the second shape, so such pairs are stored swapped and
   flipped back). A one-point patch uses coal's witness points (pairs with a sphere: always, no patch computed). Coal gives ONE depth per patch; every patch
   point gets its own signed distance from the line through it along the normal (``line_intersection``):
   phi_i = s_in(B) - s_out(A), exact for boxes, convex hulls, spheres, cylinders, capsules, ellipsoids and
   halfspaces (the patch depth is used for cones and planes). Patches with more than ``max_patch_points``
   points (mesh hulls) are thinned by farthest-point sampling, and coal's deepest point is added whenever the
   patch polygon lost it (curved hulls, where all polygon vertices can be separated while the bodies overlap);
5. contact frames, Jacobians, surface-velocity bias and materials, vectorised over the contact points.

Sphere-halfspace pairs (with the compiled kernel) skip steps 1-4: ``contact_kernels.sphere_halfspace_raw`` computes
them from the joint placements with coal's equations (signed distance n.c - d - r, normal the halfspace's, witness
points as coal's; equal to coal's to round-off, ``test_analytic_sphere_halfspace_pairs_match_coal``). When every
pair is one (a ball or a box on corner spheres on the ground), the whole query is one compiled call with no coal
call at all (``contact_kernels.sphere_halfspace_contacts``). Sphere-sphere and sphere-box pairs likewise
(``contact_kernels.sphere_primitive_raw``: every such pair in one compiled call, a bounding-sphere reject per pair,
out of the broad phase; coal's equations including the centre inside the box, face of least penetration;
``test_analytic_sphere_pairs_match_coal``). Box-halfspace pairs likewise (``contact_kernels.box_halfspace_contacts``:
coal's support-point distance and its contact patch, the box corners within the patch tolerance in coal's hull
order; their points get their depths by the same line casts as coal's patches, their rows after coal's patches;
``test_analytic_box_halfspace_pairs_match_coal``). The colliding pairs are read in pair order, with or without the
broad phase.

With the compiled narrow phase and no bounding-volume tests (more than ``BOUND_MAX_PAIRS`` pairs: the clutter),
``update`` runs all of the above as ONE compiled call, ``contact_pass_kernels.coal_contact_pass`` (the same
functions on the same values: the same contacts bit for bit, ``test_update_runs_the_pass_on_the_clutter_bit_for_bit``;
``compiled_update = False`` keeps the staged steps).

Contacts whose distance comes back non-finite from coal (degenerate EPA) are dropped rather than passed on.
Cost (``benchmarks/contact_query/run.py``, Panda grasping a cylinder on a table, 14 contact points, on a loaded
2-core machine): ~25 us CPU without contacts (142 candidate pairs), ~0.6 ms with the grasp, of which coal
~0.08 ms, per-point depths ~0.2 ms, Jacobians ~0.09 ms; the rest is numpy call overhead on small arrays.
"""

from __future__ import annotations

import itertools

import coal
import numpy as np
import pinocchio as pin

from ..errors import ConfigError, ModelError, unknown_choice
from ..model.materials import combine_materials
from ..model.multibody_model import MultibodyModel
from . import contact_kernels, contact_pass_kernels
from ..native_build import NARROW_PHASE
from .contact_set import ContactSet
from .line_intersection import LineCaster
from .pair_bounds import PairBounds

JACOBIAN_METHODS = ("vectorized", "frame")
KERNELS = ("numba", "numpy")
# with fewer candidate pairs than this, broad_phase="auto" narrow-phases every pair: updating the broad phase
# and collecting its pairs (~12 us) costs more than coal's analytic pair tests (~0.3 us each)
BROAD_PHASE_MIN_PAIRS = 24
# the bounding-volume test of the pairs from q (pair_bounds.py) runs for models of at most this many pairs; after a
# test that some pair passed (a step with contacts), the next BOUND_RETEST_AFTER updates run the full query untested
BOUND_MAX_PAIRS = 512
BOUND_RETEST_AFTER = 10
# m: a patch whose deepest point is shallower than coal's pair distance by more than this also gets coal's
# deepest point (see ContactQuery.update)
DEEPEST_POINT_TOLERANCE = 1e-5
_LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
_AXES = np.eye(3)


class ContactQuery:
    """Finds the contacts of a ``MultibodyModel`` at the current kinematics and returns a ``ContactSet``.

    Preconditions of ``update(pin_data, ...)``: the caller has run ``pin.forwardKinematics(model, pin_data, q)``
    (or with v; velocities are not used) so that ``pin_data.oMi`` holds the joint placements at q. Nothing else:

    * the query keeps its OWN ``GeometryModel`` copy (sharing the coal shapes, with exactly
      ``model.collision_pairs`` as its pairs, in that order) and its own ``GeometryData`` whose collision and
      patch requests are set once here; ``update`` refreshes its placements from ``pin_data.oMi`` with
      ``pin.updateGeometryPlacements`` (~0.3 us for the Panda). The ``geometry_data`` argument is therefore
      not read (accepted so that callers can pass what they have);
    * when a contact involves a moving body, ``update`` calls ``pin.computeJointJacobians(model, pin_data)``
      itself (~0.5 us for the Panda); it overwrites ``pin_data.J`` and nothing else the simulator relies on.

    Parameters:
        model: the scene model; ``model.collision_pairs`` (P, 2) are the candidate pairs, already filtered.
        margin: m, pairs closer than this become contacts (their ``signed_distance`` may be positive, up to
            ``margin``); patch points farther than ``margin`` apart are dropped.
        broad_phase: use Pinocchio's sweep-and-prune broad phase (True) or run the narrow phase on all P pairs
            (False); "auto" (the simulator's choice): the broad phase when there are at least
            ``BROAD_PHASE_MIN_PAIRS`` pairs.
        patch_tolerance: m, coal's patch tolerance: features of the two shapes within this distance of the
            deepest point join the patch (default: ``margin``, so that e.g. all 4 corners of a slightly tilted
            box are reported, each with its own signed distance).
        curved_shape_samples: number of points coal puts on the circular face of a standing cylinder (>= 3).
        max_patch_points: patches with more points (convex hulls of meshes against a table: 20-30) are reduced
            to this many, spread over the patch (farthest-point sampling from the deepest point).
        jacobian: "vectorized" (one ``getJointJacobian`` per joint in contact, the point Jacobians built in numpy
            as J_lin - [p - o]x J_ang) or "frame" (one ``getFrameJacobian`` per contact point and side); used by
            the numpy kernel only.
        kernel: "numba" (default: frames, signed distances, Jacobians and materials of all contact points in
            one compiled call, ``contact_kernels.finish_contacts``, from ``pin_data.J``) or "numpy" (the readable
            reference below; both give the same contact set to round-off).
        initial_capacity: contact points preallocated; the buffers double when a step finds more.
        analytic_pairs: with the numba kernel, compute the sphere-halfspace pairs in a compiled kernel instead of
            coal (same contacts to round-off; False: coal for every pair, the reference).
        compiled_narrow_phase: with the numba kernel and the broad phase, run the narrow phase (coal's tests of
            the candidate pairs, the colliding pairs' contacts and patches) in one compiled call
            (``narrow_phase.cpp``, built by the warm-up; ``native_build``) when it is built: the same coal
            calls and the same contacts as the Python loop (False, or not built: the Python loop, the reference).

    The returned ContactSet's arrays are views into buffers owned by this object: they stay valid until the
    next ``update`` (the simulator keeps the last set only until the next step). Copy them to keep them.
    """

    def __init__(self, model: MultibodyModel, margin: float = 0.01, *, broad_phase: bool | str = True,
                 patch_tolerance: float | None = None, curved_shape_samples: int = 8, max_patch_points: int = 8,
                 jacobian: str = "vectorized", kernel: str = "numba", initial_capacity: int = 64,
                 analytic_pairs: bool = True, compiled_narrow_phase: bool = True):
        margin = _check_length("contact margin", margin, allow_zero=True)
        patch_tolerance = margin if patch_tolerance is None else _check_length("patch_tolerance", patch_tolerance)
        patch_tolerance = max(patch_tolerance, 1e-6)
        if jacobian not in JACOBIAN_METHODS:
            raise ConfigError("contact query: " + unknown_choice("jacobian method", str(jacobian), JACOBIAN_METHODS))
        if kernel not in KERNELS:
            raise ConfigError("contact query: " + unknown_choice("kernel", str(kernel), KERNELS))
        if broad_phase not in (True, False, "auto"):
            raise ConfigError(f"contact query: broad_phase must be True, False or 'auto', got {broad_phase!r}")
        if int(curved_shape_samples) < 3:
            raise ConfigError(f"contact query: curved_shape_samples must be >= 3 (points on a cylinder's rim), "
                              f"got {curved_shape_samples!r}")
        if int(max_patch_points) < 3:
            raise ConfigError(f"contact query: max_patch_points must be >= 3 (a stable support needs 3 points), "
                              f"got {max_patch_points!r}")
        self.max_patch_points = int(max_patch_points)
        self.model = model
        self.margin = margin
        self.patch_tolerance = patch_tolerance
        self.jacobian_method = jacobian
        self.kernel = kernel
        pm = model.pin_model
        self._pin_model = pm
        nv = pm.nv

        pairs = np.asarray(model.collision_pairs, dtype=int).reshape(-1, 2)
        ng = model.collision_model.ngeoms
        if pairs.size and (pairs.min() < 0 or pairs.max() >= ng):
            bad = pairs[(pairs < 0).any(axis=1) | (pairs >= ng).any(axis=1)][0]
            raise ModelError(f"{model.source}: collision pair {tuple(bad)} refers to a geometry index outside "
                             f"0..{ng - 1} (geometries: {', '.join(model.geometry_names)})")
        self.pairs = pairs
        self.num_pairs = len(pairs)
        self.broad_phase = bool(broad_phase) if broad_phase != "auto" else self.num_pairs >= BROAD_PHASE_MIN_PAIRS
        in_pairs = set(pairs.reshape(-1).tolist())
        for i, go in enumerate(model.collision_model.geometryObjects):
            if i in in_pairs and isinstance(go.geometry, (coal.BVHModelBase, coal.OcTree)):
                raise ModelError(f"{model.source}: collision geometry {go.name!r} is a triangle mesh "
                                 f"({type(go.geometry).__name__}); coal's signed distance and contact patches are "
                                 f"wrong for meshes in penetration: convert it to its convex hull "
                                 f"(mesh.buildConvexHull(True, 'Qt'); use mesh.convex), as the model loader does")

        # Own GeometryModel (shares the coal shapes) whose pair k is pairs[k].
        # coal samples a cylinder's rim (standing cylinder) only when the cylinder is the SECOND shape of the
        # patch query: (box, cylinder) gives 8 points, (cylinder, box) 1. Such pairs are stored swapped in the
        # query's own GeometryModel and flipped back (normal, witness points) when read.
        gm = model.collision_model.copy()
        gm.removeAllCollisionPairs()
        cylinder = np.array([isinstance(g.geometry, (coal.Cylinder, coal.Cone)) for g in gm.geometryObjects])
        self._flipped = (cylinder[pairs[:, 0]] & ~cylinder[pairs[:, 1]]) if len(pairs) else np.zeros(0, bool)
        for (a, b), flip in zip(pairs, self._flipped):
            gm.addCollisionPair(pin.CollisionPair(int(b), int(a)) if flip else pin.CollisionPair(int(a), int(b)))
        if len(gm.collisionPairs) != len(pairs):
            raise ModelError(f"{model.source}: collision_pairs has duplicate pairs")
        self._gm = gm
        self._gd = self._geometry_data(gm, margin, patch_tolerance, curved_shape_samples)
        # coal's per-pair result objects, held once: indexing gd.collisionResults costs ~1 us per access
        self._collision_results = [self._gd.collisionResults[k] for k in range(self.num_pairs)]
        self._patch_results = [self._gd.contactPatchResults[k] for k in range(self.num_pairs)]
        # pairs with a sphere: coal's contact patch of a sphere is its one witness point, so no patch is computed
        sphere = np.array([isinstance(g.geometry, coal.Sphere) for g in gm.geometryObjects])
        self._point_pairs = (sphere[pairs[:, 0]] | sphere[pairs[:, 1]]).tolist() if len(pairs) else []
        # Convex hulls made by buildConvexHull have no local AABB yet (volume -inf) and would be taken for
        # unbounded shapes below (bypassing the broad phase). Computing it only fills coal's cache.
        for g in gm.geometryObjects:
            if not isinstance(g.geometry, (coal.Halfspace, coal.Plane)) and not g.geometry.aabb_local.volume() > 0:
                g.geometry.computeLocalAABB()
        # Pairs with an unbounded geometry (halfspace, plane) skip the broad phase: Pinocchio's broad phase does
        # not inflate their infinite AABBs by the margin and misses pairs within it. They are deactivated in
        # the broad phase and narrow-phased every step (analytic tests, cheap).
        unbounded = np.array([isinstance(g.geometry, (coal.Halfspace, coal.Plane))
                              or not np.isfinite(g.geometry.aabb_local.volume()) for g in gm.geometryObjects])
        always = unbounded[pairs[:, 0]] | unbounded[pairs[:, 1]] if self.num_pairs else np.zeros(0, bool)
        self._always_pairs = [int(k) for k in np.flatnonzero(always)]
        # Sphere-halfspace pairs (compiled kernel only): computed analytically in one compiled call
        # (contact_kernels.sphere_halfspace_raw, coal's equations), never passed to coal. With only such pairs
        # (a ball or a box on corner spheres on the ground) the whole query is one compiled call.
        halfspace = np.array([isinstance(g.geometry, coal.Halfspace) for g in gm.geometryObjects])
        analytic = ((sphere[pairs[:, 0]] & halfspace[pairs[:, 1]]) | (halfspace[pairs[:, 0]] & sphere[pairs[:, 1]])
                    if self.num_pairs and kernel == "numba" and analytic_pairs else np.zeros(self.num_pairs, bool))
        self._all_analytic = bool(self.num_pairs) and bool(analytic.all())
        # Sphere-sphere and sphere-box pairs (compiled kernel only): likewise, every such pair tested in one
        # compiled call (contact_kernels.sphere_primitive_raw, coal's equations), kept out of coal's broad and
        # narrow phases.
        box = np.array([isinstance(g.geometry, coal.Box) for g in gm.geometryObjects])
        sphere_primitive = (((sphere[pairs[:, 0]] & (sphere[pairs[:, 1]] | box[pairs[:, 1]]))
                             | (box[pairs[:, 0]] & sphere[pairs[:, 1]])) & ~self._flipped
                            if self.num_pairs and kernel == "numba" and analytic_pairs
                            else np.zeros(self.num_pairs, bool))
        self._sp_pairs = int(sphere_primitive.sum())
        # Box-halfspace pairs (compiled kernel only, patches of at most max_patch_points >= 8 points): coal's
        # distance and contact patch in one compiled call (contact_kernels.box_halfspace_contacts), their patch
        # points cast like coal's (patch_contacts)
        box_halfspace = (((box[pairs[:, 0]] & halfspace[pairs[:, 1]]) | (halfspace[pairs[:, 0]] & box[pairs[:, 1]]))
                         if self.num_pairs and kernel == "numba" and analytic_pairs and self.max_patch_points >= 8
                         else np.zeros(self.num_pairs, bool))
        self._bh_pairs = int(box_halfspace.sum())
        analytic_halfspace, analytic = analytic, analytic | sphere_primitive | box_halfspace
        self._coal_pairs = [int(k) for k in np.flatnonzero(~analytic)]
        self._coal_always_pairs = [k for k in self._always_pairs if not analytic[k]]
        # The narrow phase of several pairs runs in ONE call, pin.computeCollisions over a GeometryData's active
        # pairs: without the broad phase, all pairs in self._gd; with it, the unbounded pairs in a second
        # GeometryData (self._gd_always, only those pairs active), while self._gd serves the broad phase.
        self._gd_always = None
        if self.broad_phase and self.num_pairs > len(self._always_pairs):
            for k in self._always_pairs + np.flatnonzero(sphere_primitive).tolist():
                self._gd.deactivateCollisionPair(k)
            self._broad = pin.BroadPhaseManager_SSaPCollisionManager(pm, gm, self._gd)
            self._collect = pin.CollisionCallBackCollect(gm, self._gd, max(self.num_pairs, 1))
            if self._always_pairs:
                self._gd_always = self._geometry_data(gm, margin, patch_tolerance, curved_shape_samples)
                self._gd_always.deactivateAllCollisionPairs()
                for k in self._coal_always_pairs:
                    self._gd_always.activateCollisionPair(k)
                for k in self._always_pairs:
                    self._collision_results[k] = self._gd_always.collisionResults[k]
                    self._patch_results[k] = self._gd_always.contactPatchResults[k]
        else:
            self._broad = self._collect = None
            for k in np.flatnonzero(analytic):
                self._gd.deactivateCollisionPair(int(k))
        self._pair_data = [self._gd] * self.num_pairs          # the GeometryData holding pair k's results
        for k in (self._always_pairs if self._gd_always is not None else ()):
            self._pair_data[k] = self._gd_always

        # Line casts for per-point depths in patches; per-pair combined materials.
        self._caster = LineCaster([g.geometry for g in gm.geometryObjects])
        self._parent = np.asarray(model.geometry_parent_joint, dtype=int)
        ga, gb = pairs[:, 0], pairs[:, 1]
        # per pair: rows (stiffness, dissipation, friction, restitution) and (geometry A, B, joint A, B)
        self._pair_material = np.array(combine_materials(
            model.geometry_stiffness[ga], model.geometry_dissipation[ga], model.geometry_friction[ga],
            model.geometry_restitution[ga], model.geometry_stiffness[gb], model.geometry_dissipation[gb],
            model.geometry_friction[gb], model.geometry_restitution[gb]), dtype=float).reshape(4, -1)
        self._pair_ids = np.array([ga, gb, self._parent[ga], self._parent[gb]], dtype=int).reshape(4, -1)

        self._column_width = 0            # numba kernel: width of ContactSet.jacobian_columns (below)
        # Jacobian scratch: one (6, nv) world-aligned Jacobian and origin per joint (row 0 = world, zero).
        self._joint_jacobians = np.zeros((pm.njoints, 6, nv))
        self._joint_origins = np.zeros((pm.njoints, 3))
        self._nv = nv
        # numba kernel: columns of pin_data.J (one per extended velocity: mimic joints have their own) that move
        # each joint's body, and the generalized velocity of each column
        self._kernels = None
        self._an_int = np.zeros((0, 4), dtype=np.int64)
        self._an_joints = []                                  # (slot, joint) of the analytic pairs' joints
        self._an_joint_placement = np.eye(4)[None].copy()     # their world placements by slot (slot 0: the world)
        self._placement_source = None                         # set_placement_source
        if kernel == "numba":
            self._kernels = contact_kernels
            self._support, self._column_dof = joint_column_support(pm)
            self._joint_columns = contact_kernels.joint_columns_packed(self._support)
            self._rel_scratch = np.zeros((3, nv))
            self._column_width = contact_kernels.jacobian_column_width(self._joint_columns, self._column_dof,
                                                                       self._pair_ids[2:].T)
        if analytic.any():
            self._setup_analytic(gm, pairs, analytic_halfspace, sphere_primitive, box_halfspace)
        # every sphere-halfspace pair gives at most one contact: its compiled path writes them without growing
        self._allocate(max(int(initial_capacity), int(analytic.sum()), 1))
        self._bounds = (PairBounds.make(pm, gm, pairs, margin)
                        if 0 < self.num_pairs <= BOUND_MAX_PAIRS and not self._all_analytic else None)
        # every step given q, one test of the pairs computed whatever the broad phase says (one compiled call, the
        # joint placements once): first the unbounded pairs coal narrow-phases every step (with a halfspace or
        # plane: history-free analytic tests in coal, no GJK warm start), then the compiled (analytic) pairs.
        # Only the unbounded pairs that may be within the margin are given to coal (iiwa + WSG: the bottle on the
        # ground, not the seven links far above it); when no compiled pair can be, their kernels and the joint
        # placements they read (~0.5 us per joint from pin_data.oMi) are skipped (the gripper's boxes far above the
        # ground)
        always = self._coal_always_pairs if self._gd_always is not None else []
        self._n_always_near = len(always)
        near = np.concatenate([pairs[always], pairs[analytic]]) if self.num_pairs else pairs
        self._near_bounds = (PairBounds.make(pm, gm, near, margin)
                             if self._bounds is not None and len(near) else None)
        # updates left before the next bounding-volume test (an array: a compiled caller of the query's pass,
        # CoalPass, reads and writes the same count)
        self._bounds_wait = np.zeros(1, dtype=np.int64)
        self._no_coal_rows = None              # the narrow phase's rows when no pair is coal's (update)
        self._bh_patch_args = None             # _patch_contacts_numba's fixed arguments of the box-halfspace call
        self._pairs_by_side = np.ascontiguousarray(pairs.T, dtype=np.int64)     # (2, P): geometry A, B of each pair
        self._pair_geometries = [tuple(p) for p in pairs.tolist()]             # (A, B) of each pair, Python ints
        # world placements (4x4) of the geometries of this step's coal patches, by geometry index (patch_contacts
        # reads them by geometry: only the patches' rows are refreshed, from the query's GeometryData)
        self._geometry_placement = np.zeros((max(len(gm.geometryObjects), 1), 4, 4))
        self._patch_rows = np.zeros(0, dtype=np.int64)          # patch_contacts' outputs (rows), grown on demand
        self._patch_wa = self._patch_wb = self._patch_normal = np.zeros((0, 3))
        self._patch_min_gap = np.zeros(0)
        if self._kernels is not None and (self._bh_pairs or not all(self._point_pairs)):
            self._load_patch_kernel()
        # the compiled narrow phase (narrow_phase.cpp) when it is built (the warm-up builds it): with the broad
        # phase and the compiled kernels; its output rows live in the buffers of self._native_out
        self._native = None
        if compiled_narrow_phase and self._kernels is not None and self._broad is not None:
            module = NARROW_PHASE.load()
            if module is not None:
                p = self.num_pairs
                self._native_out = out = {"single_pair": np.zeros(p, np.int64), "multi_pair": np.zeros(p, np.int64),
                                          "multi_start": np.zeros(p + 1, np.int64), "multi_depth": np.zeros(p),
                                          "multi_mid": np.zeros((p * self.max_patch_points, 3))}
                for key in ("single_a", "single_b", "single_n", "multi_n", "multi_a", "multi_b"):
                    out[key] = np.zeros((p, 3))
                always = np.array(self._coal_always_pairs, dtype=np.int64)
                self._all_always = np.arange(len(always), dtype=np.int64)
                self._native = module.NarrowPhase(
                    gm, self._gd, self._gd_always, self._broad, self._collect, always,
                    self._flipped.astype(np.uint8), np.array(self._point_pairs, dtype=np.uint8), float(margin),
                    self.max_patch_points, out, self._geometry_placement)
        self.stats = {"candidate_pairs": 0, "colliding_pairs": 0, "contacts": 0}
        # update's compiled path (see update): the CoalPass it runs, and the Pinocchio Data the compiled narrow
        # phase is bound to (by the first CoalPass made: one Data per query)
        self.compiled_update = True
        self._update_pass = None
        self._bound_data = None
        self._no_q = np.zeros(1)

    def _setup_analytic(self, gm, pairs, analytic, sphere_primitive, box_halfspace) -> None:
        """Constant inputs of ``contact_kernels.sphere_halfspace_raw`` for the sphere-halfspace pairs (``analytic``)
        and of ``sphere_primitive_raw`` for the sphere-sphere / sphere-box pairs (``sphere_primitive``) and of
        ``box_halfspace_contacts`` for the box-halfspace pairs (``box_halfspace``): geometry
        placements in their joints' frames, radii, halfspace normals / offsets, and one world-placement slot per
        joint (slot 0: the world, identity; the moving joints' slots are refreshed from ``pin_data.oMi``)."""
        index = np.flatnonzero(analytic)
        objects = gm.geometryObjects
        sphere_first = np.array([isinstance(objects[int(pairs[k, 0])].geometry, coal.Sphere) for k in index])
        g_sphere = np.where(sphere_first, pairs[index, 0], pairs[index, 1])
        g_half = np.where(sphere_first, pairs[index, 1], pairs[index, 0])
        sp_index = np.flatnonzero(sphere_primitive)
        sp_first = np.array([isinstance(objects[int(pairs[k, 0])].geometry, coal.Sphere) for k in sp_index], bool)
        sp_sphere = np.where(sp_first, pairs[sp_index, 0], pairs[sp_index, 1])
        sp_other = np.where(sp_first, pairs[sp_index, 1], pairs[sp_index, 0])
        bh_index = np.flatnonzero(box_halfspace)
        bh_first = np.array([isinstance(objects[int(pairs[k, 0])].geometry, coal.Box) for k in bh_index], bool)
        bh_box = np.where(bh_first, pairs[bh_index, 0], pairs[bh_index, 1])
        bh_half = np.where(bh_first, pairs[bh_index, 1], pairs[bh_index, 0])
        joints = sorted({int(objects[int(g)].parentJoint)
                         for g in np.concatenate([g_sphere, g_half, sp_sphere, sp_other, bh_box, bh_half])} - {0})
        slot = {0: 0, **{j: s + 1 for s, j in enumerate(joints)}}
        self._an_joints = [(slot[j], j) for j in joints]                 # (slot, joint) refreshed every step
        self._an_joint_placement = np.zeros((len(joints) + 1, 4, 4))
        self._an_joint_placement[:] = np.eye(4)
        k = self._kernels
        m = len(index)
        self._an_int = np.zeros((m, 4), dtype=np.int64)             # columns: contact_kernels.SH_* constants
        self._an_int[:, k.SH_SPHERE_SLOT] = [slot[int(objects[int(g)].parentJoint)] for g in g_sphere]
        self._an_int[:, k.SH_HALF_SLOT] = [slot[int(objects[int(g)].parentJoint)] for g in g_half]
        self._an_int[:, k.SH_SPHERE_FIRST] = sphere_first
        self._an_int[:, k.SH_PAIR] = index
        self._an_float = np.zeros((m, k.SH_FLOATS))
        for row, gs, gh in zip(self._an_float, g_sphere, g_half):
            sphere, half = objects[int(gs)], objects[int(gh)]
            row[0:3] = sphere.placement.translation
            row[3] = sphere.geometry.radius
            row[4:13] = half.placement.rotation.reshape(-1)
            row[13:16] = half.placement.translation
            row[16:19] = half.geometry.n
            row[19] = half.geometry.d
        # sphere-sphere and sphere-box pairs (contact_kernels.sphere_primitive_raw): their rows follow these
        self._sp_int = np.zeros((len(sp_index), k.SP_INTS), dtype=np.int64)   # columns: contact_kernels.SP_*
        self._sp_int[:, k.SP_SPHERE_SLOT] = [slot[int(objects[int(g)].parentJoint)] for g in sp_sphere]
        self._sp_int[:, k.SP_OTHER_SLOT] = [slot[int(objects[int(g)].parentJoint)] for g in sp_other]
        self._sp_int[:, k.SP_SPHERE_FIRST] = sp_first
        self._sp_int[:, k.SP_PAIR] = sp_index
        self._sp_float = np.zeros((len(sp_index), k.SP_FLOATS))
        for row, flags, gs, go in zip(self._sp_float, self._sp_int, sp_sphere, sp_other):
            sphere, other = objects[int(gs)], objects[int(go)]
            row[0:3] = sphere.placement.translation
            row[3] = sphere.geometry.radius
            row[4:13] = other.placement.rotation.reshape(-1)
            row[13:16] = other.placement.translation
            if isinstance(other.geometry, coal.Box):
                flags[k.SP_BOX] = 1
                row[16:19] = other.geometry.halfSide
                row[19] = np.linalg.norm(other.geometry.halfSide)
            else:
                row[16] = row[19] = other.geometry.radius
            row[k.SP_ORIGIN_REACH] = (row[3] + row[19] + np.linalg.norm(row[0:3]) + np.linalg.norm(row[13:16]))
        m += len(sp_index)
        # box-halfspace pairs (contact_kernels.box_halfspace_contacts): one-point contacts follow these rows,
        # patches (at most 8 points each) go to their own buffers
        nb = len(bh_index)
        self._bh_int = np.zeros((nb, k.BH_INTS), dtype=np.int64)     # columns: contact_kernels.BH_*
        self._bh_int[:, k.BH_BOX_SLOT] = [slot[int(objects[int(g)].parentJoint)] for g in bh_box]
        self._bh_int[:, k.BH_HALF_SLOT] = [slot[int(objects[int(g)].parentJoint)] for g in bh_half]
        self._bh_int[:, k.BH_BOX_FIRST] = bh_first
        self._bh_int[:, k.BH_PAIR] = bh_index
        self._bh_int[:, k.BH_GEOMETRY_A] = pairs[bh_index, 0]
        self._bh_int[:, k.BH_GEOMETRY_B] = pairs[bh_index, 1]
        self._bh_float = np.zeros((nb, k.BH_FLOATS))
        for row, gb, gh in zip(self._bh_float, bh_box, bh_half):
            box, half = objects[int(gb)], objects[int(gh)]
            row[0:9] = box.placement.rotation.reshape(-1)
            row[9:12] = box.placement.translation
            row[12:15] = box.geometry.halfSide
            row[15:24] = half.placement.rotation.reshape(-1)
            row[24:27] = half.placement.translation
            row[27:30] = half.geometry.n
            row[30] = half.geometry.d
        # patches: pair, point offsets, points, normal, depth, witnesses on A and B, geometries A and B, their
        # placements (2 per patch); the placement slots of patch j's geometries are 2 j and 2 j + 1
        self._bh_patch = (np.zeros(nb, dtype=np.int64), np.zeros(nb + 1, dtype=np.int64), np.zeros((8 * nb, 3)),
                          np.zeros((nb, 3)), np.zeros(nb), np.zeros((nb, 3)), np.zeros((nb, 3)),
                          np.zeros((2, nb), dtype=np.int64), np.zeros((2 * nb, 4, 4)))
        self._bh_slots = np.arange(2 * nb, dtype=np.int64).reshape(nb, 2).T.copy()
        self._bh_work, self._bh_iwork = np.zeros((2, 8)), np.zeros((2, 8), dtype=np.int64)
        self._bh_min_gap = np.zeros(nb)                          # patch_contacts' scratch
        m += nb
        self._an_pair_out = np.zeros(m, dtype=np.int64)
        self._an_raw = np.zeros((3, m, 3))                  # witness on A, witness on B, normal A -> B

    @property
    def analytic_joint_slots(self) -> list:
        """(slot, joint id) of the joints whose world placements the analytic pairs read from
        ``analytic_placements`` (empty without analytic pairs)."""
        return self._an_joints

    @property
    def analytic_placements(self) -> np.ndarray:
        """(slots, 4, 4) world placements of those joints by slot, slot 0 the world (identity)."""
        return self._an_joint_placement

    @property
    def all_analytic(self) -> bool:
        """True when every collision pair is a sphere-halfspace pair (compiled kernel): the whole query is one
        compiled call (``contact_kernels.sphere_halfspace_contacts``) and its buffers are never reallocated."""
        return self._all_analytic

    def analytic_step_arguments(self) -> tuple[tuple, tuple, np.ndarray]:
        """For a caller that runs an all-analytic query's compiled pass itself (``all_analytic``; the fused
        free-body step, sim/free_body_step.py) with the joint placements written into ``analytic_placements`` and
        its own joint Jacobians: the arguments of ``contact_kernels.sphere_halfspace_contacts`` before the joint
        Jacobians (those placements first) and after them, and the (3 * pairs,) velocity-bias buffer of the
        contacts (m/s). The query's own constants and buffers, the same arrays for its life in this path; the n
        contacts a call found are then ``contact_set(n)``."""
        if not self._all_analytic:
            raise ConfigError("ContactQuery.analytic_step_arguments: the query has pairs that are not "
                              "sphere-halfspace pairs of the compiled kernel (all_analytic is False)")
        return ((self._an_joint_placement, self._an_int, self._an_float, self.margin, self._an_pair_out,
                 self._an_raw, self._pair_ids, self._pair_material),
                (self._joint_columns, self._column_dof, self._ids, self._point, self._normal, self._phi,
                 self._rotation, self._jacobian, self._material, self._rel_scratch, self._columns), self._bias)

    @property
    def all_compiled(self) -> bool:
        """True when every collision pair is one of the compiled analytic kinds (sphere-halfspace, sphere-sphere,
        sphere-box, box-halfspace; numba kernel): ``update`` calls no coal test, and its contacts are what
        ``compiled_pass_arguments``' kernels give in the order below."""
        return bool(self.num_pairs) and self._kernels is not None and not self._coal_pairs

    @property
    def coal_pairs(self) -> np.ndarray:
        """(C,) int64: the indices of the pairs coal tests (not a compiled analytic kind), ascending."""
        return np.array(self._coal_pairs, dtype=np.int64)

    def compiled_pass_arguments(self) -> dict:
        """For a caller that runs the query's compiled pairs in its own compiled call (the fused tree step,
        sim/tree_step.py), with the joint placements written into ``analytic_placements`` and its own joint
        Jacobians: ``update``'s steps for the compiled pairs are ``contact_kernels.sphere_halfspace_raw``,
        ``sphere_primitive_raw``, ``box_halfspace_contacts`` (rows of one-point contacts, then box patches), the
        one-point rows in pair order, ``patch_contacts`` of the box patches after them, ``finish_contacts`` and a
        zero velocity bias (no moving surface); with coal's pairs (``coal_pairs``) those are the whole query only
        when none of them is within the margin (the caller tests that). Returns the query's constants and buffers
        of those calls by name (the contact buffers are grown here to hold the most rows the compiled pairs can
        give, ``max_rows``: an all-compiled query never reallocates them; one with coal's pairs may, in a step
        with more contacts, and the caller then asks again); ConfigError without the compiled kernels."""
        if self._kernels is None:
            raise ConfigError("ContactQuery.compiled_pass_arguments: the query runs no compiled kernels "
                              "(kernel='numpy')")
        if not hasattr(self, "_bh_patch"):        # no compiled pair: _setup_analytic did not run
            self._setup_analytic(self._gm, self.pairs, np.zeros(self.num_pairs, bool), np.zeros(self.num_pairs, bool),
                                 np.zeros(self.num_pairs, bool))
        rows = len(self._an_int) + len(self._sp_int) + 9 * len(self._bh_int)   # a box patch: <= 8 points + 1
        if rows > self._capacity:
            self._allocate(rows)
        c = self._caster
        b_pair, b_start, b_mid, b_normal, b_depth, b_wa, b_wb, b_geometry, b_placement = self._bh_patch
        return {"placement": self._an_joint_placement, "joint_slots": self._an_joints,
                "an_int": self._an_int, "an_float": self._an_float, "sp_int": self._sp_int,
                "sp_float": self._sp_float, "bh_int": self._bh_int, "bh_float": self._bh_float, "margin": self.margin,
                "patch_tolerance": self.patch_tolerance, "deepest_tolerance": DEEPEST_POINT_TOLERANCE,
                "pair_out": self._an_pair_out, "raw": self._an_raw, "b_pair": b_pair, "b_start": b_start,
                "b_mid": b_mid, "b_normal": b_normal, "b_depth": b_depth, "b_wa": b_wa, "b_wb": b_wb,
                "b_geometry": b_geometry, "b_placement": b_placement, "bh_slots": self._bh_slots,
                "bh_work": self._bh_work, "bh_iwork": self._bh_iwork, "bh_min_gap": self._bh_min_gap,
                "caster_type": c.type, "caster_half": c.half, "caster_radius": c.radius,
                "caster_half_length": c.half_length, "caster_plane_normal": c.plane_normal,
                "caster_plane_offset": c.plane_offset, "caster_face_start": c.face_start,
                "caster_face_normal": c.face_normal, "caster_face_offset": c.face_offset,
                "caster_tolerance": c.tolerance, "pair_ids": self._pair_ids, "pair_material": self._pair_material,
                "joint_columns": self._joint_columns, "column_dof": self._column_dof, "ids": self._ids,
                "point": self._point, "normal": self._normal, "phi": self._phi, "rotation": self._rotation,
                "jacobian": self._jacobian, "material": self._material, "rel": self._rel_scratch,
                "columns": self._columns, "bias": self._bias, "max_rows": rows}

    @property
    def compiled_narrow_phase(self) -> bool:
        """True when coal's narrow phase runs compiled (narrow_phase.cpp built, numba kernel, broad phase): the
        query's whole update can then run inside a compiled call (``compiled_coal_pass``)."""
        return self._native is not None

    def compiled_coal_pass(self, pin_data: pin.Data) -> "CoalPass":
        """For a caller that runs ``update`` of a query with coal's pairs in its own compiled call
        (``contact_pass_kernels.coal_contact_pass``, coal's narrow phase through narrow_phase.cpp's C entry point):
        the address table of that call over the query's constants and buffers (a ``CoalPass``, which holds the
        arrays while it lives), with the compiled narrow phase bound to ``pin_data`` (the Data whose kinematics
        ``update`` would be given: its geometry placements are computed from it). The contact buffers are grown to
        ``compiled_pass_arguments``' rows; a step with more rows returns OVERFLOW (the staged update then grows
        them, and the table must be made again: ``CoalPass.current``). ConfigError without the compiled narrow
        phase (numba kernel, broad phase, narrow_phase.cpp built)."""
        if self._native is None:
            raise ConfigError("ContactQuery.compiled_coal_pass: the query has no compiled narrow phase (it needs "
                              "kernel='numba', the broad phase and narrow_phase.cpp built: python -m "
                              "contact_sim_ros.jit)")
        return CoalPass(self, pin_data)

    # the all-analytic path's buffers a caller may move into its own arrays (use_analytic_buffers): name -> attribute
    ANALYTIC_BUFFERS = {"placement": "_an_joint_placement", "pair_out": "_an_pair_out", "raw": "_an_raw",
                        "ids": "_ids", "point": "_point", "normal": "_normal", "phi": "_phi",
                        "rotation": "_rotation", "jacobian": "_jacobian", "material": "_material",
                        "rel": "_rel_scratch", "columns": "_columns", "bias": "_bias"}

    def analytic_buffers(self) -> dict:
        """The all-analytic path's buffers by name (``ANALYTIC_BUFFERS``): the joint placements by slot, the
        compiled pass's scratch and the contact buffers (``analytic_step_arguments``); ConfigError unless
        ``all_analytic``."""
        if not self._all_analytic:
            raise ConfigError("ContactQuery.analytic_buffers: the query has pairs that are not sphere-halfspace "
                              "pairs of the compiled kernel (all_analytic is False)")
        return {name: getattr(self, attr) for name, attr in self.ANALYTIC_BUFFERS.items()}

    def use_analytic_buffers(self, buffers: dict) -> None:
        """Move the all-analytic path's buffers named in ``buffers`` (``analytic_buffers``' names) into the given
        arrays, e.g. views of one packed block that a compiled caller takes whole (sim/free_body_step.py): each of
        the buffer's shape and dtype, C-contiguous; their values are copied and the query uses them from now on
        (its ContactSet views are made again). ConfigError naming the buffer otherwise."""
        current = self.analytic_buffers()
        for name, new in buffers.items():
            old = current.get(name)
            if old is None:
                raise ConfigError(f"ContactQuery.use_analytic_buffers: unknown buffer {name!r} (known: "
                                  f"{sorted(current)})")
            if new.shape != old.shape or new.dtype != old.dtype or not new.flags.c_contiguous:
                raise ConfigError(f"ContactQuery.use_analytic_buffers: buffer {name!r} must be a C-contiguous "
                                  f"{old.dtype} array of shape {old.shape}, got {new.dtype} {new.shape}")
        for name, new in buffers.items():
            new[...] = current[name]
            setattr(self, self.ANALYTIC_BUFFERS[name], new)
        self._views = {}

    def set_placement_source(self, source) -> None:
        """``source()`` writes the current configuration's joint placements into ``analytic_placements``; ``update``
        then calls it instead of reading ``pin_data.oMi`` joint by joint (~0.9 us per joint). The owner guarantees
        that ``update``'s pin_data is at that configuration: the Simulator of a free-body model computes them from
        its q in one compiled call (sim/free_body_step.FreeBodies; clutter: 34 -> ~1 us). None: read pin_data."""
        self._placement_source = source

    def _joint_placements(self, pin_data) -> np.ndarray:
        """World placements (4, 4) of the sphere-halfspace pairs' joints by slot, the moving ones refreshed from
        ``pin_data.oMi`` (or by the placement source)."""
        placement = self._an_joint_placement
        if self._placement_source is not None:
            self._placement_source()
            return placement
        oMi = pin_data.oMi
        for s, j in self._an_joints:
            placement[s] = oMi[j].homogeneous
        return placement

    @staticmethod
    def _geometry_data(gm, margin: float, patch_tolerance: float, curved_shape_samples: int) -> pin.GeometryData:
        """A GeometryData of ``gm`` with the query's collision and patch requests on every pair."""
        gd = pin.GeometryData(gm)
        for k in range(len(gm.collisionPairs)):
            req = gd.collisionRequests[k]
            req.enable_contact = True
            req.num_max_contacts = 1
            req.security_margin = margin
            req.distance_upper_bound = margin + 1e-6
            preq = gd.contactPatchRequests[k]
            preq.max_num_patch = 1
            preq.setPatchTolerance(patch_tolerance)
            preq.setNumSamplesCurvedShapes(int(curved_shape_samples))
            gd.contactPatchResults[k].set(preq)
        return gd

    # ------------------------------------------------------------------ buffers
    def _allocate(self, capacity: int) -> None:
        nv = self._nv
        self._capacity = capacity
        self._views = {}                                      # n -> ContactSet of the first n rows (contact_set)
        self._ids = np.zeros((4, capacity), dtype=int)        # rows: geometry A, B, joint A, B
        self._point = np.zeros((capacity, 3))
        self._normal = np.zeros((capacity, 3))
        self._phi = np.zeros(capacity)
        self._rotation = np.zeros((capacity, 3, 3))
        self._jacobian = np.zeros((3 * capacity, nv))
        self._bias = np.zeros(3 * capacity)
        self._material = np.zeros((4, capacity))             # rows: stiffness, dissipation, friction, restitution
        # numba kernel: per contact the velocities its Jacobian rows use, ascending, then -1
        self._columns = np.full((capacity, self._column_width), -1, dtype=np.int64)

    # ------------------------------------------------------------------ query
    def update(self, pin_data: pin.Data, geometry_data: pin.GeometryData | None = None,
               surface_velocity: np.ndarray | None = None, joint_jacobians: bool = False,
               q: np.ndarray | None = None) -> ContactSet:
        """Contacts at the kinematics in ``pin_data`` (see the class docstring for the preconditions).

        joint_jacobians: True when ``pin_data.J`` already holds the joint Jacobians of this configuration
            (``pin.computeJointJacobians`` after the kinematics, as the simulator does): not computed again.

        surface_velocity: optional (G, 3) m/s, world frame, the prescribed surface velocity of each STATIC
            geometry (parent joint 0), e.g. a conveyor belt; rows of moving geometries are ignored. It enters
            ``velocity_bias`` as the relative velocity of B w.r.t. A: R^T (v_surf[B] - v_surf[A]).

        q: the configuration of ``pin_data``'s kinematics, if the caller has it: the pairs are first tested with
            bounding volumes from q (``pair_bounds``); when none can be within the margin, coal is not called and
            the empty set is returned (the same contact set; a robot's contact-free steps).
        """
        pm, gm, gd = self._pin_model, self._gm, self._gd
        if self._all_analytic:                     # sphere-halfspace pairs only: one compiled call, no coal
            if not joint_jacobians:
                pin.computeJointJacobians(pm, pin_data)
            r, n = self._kernels.sphere_halfspace_contacts(
                self._joint_placements(pin_data), self._an_int, self._an_float, self.margin, self._an_pair_out,
                self._an_raw, self._pair_ids, self._pair_material, pin_data.J, self._joint_columns,
                self._column_dof, self._ids, self._point, self._normal, self._phi, self._rotation, self._jacobian,
                self._material, self._rel_scratch, self._columns)
            self.stats["candidate_pairs"] = self.num_pairs
            self.stats["colliding_pairs"] = r
            return self._output(n, surface_velocity)
        if (self.compiled_update and self._native is not None and self._bounds is None and surface_velocity is None
                and (self._bound_data is None or self._bound_data is pin_data)):
            n = self._update_compiled(pin_data, joint_jacobians)
            if n is not None:
                return self.contact_set(n)
        if q is not None and self._bounds is not None:
            if self._bounds_wait[0]:
                self._bounds_wait[0] -= 1
            elif not self._bounds.any_within(q):          # no pair within the margin: no coal call
                self.stats["candidate_pairs"] = self.stats["colliding_pairs"] = self.stats["contacts"] = 0
                return self.contact_set(0)
            else:
                self._bounds_wait[0] = BOUND_RETEST_AFTER
        pin.updateGeometryPlacements(pm, pin_data, gm, gd)
        # sphere-halfspace, sphere-sphere and sphere-box pairs within the margin (compiled, coal's equations): their
        # raw rows (one contact each), merged with coal's one-point contacts in pair order below
        n_analytic = n_box_patches = 0
        near = None                       # the unbounded coal pairs (their indexes) that may be within the margin
        analytic_near = True              # and whether a compiled pair may be
        if q is not None and self._near_bounds is not None:
            near, n_always = self._near_bounds.within_split(q, self._n_always_near)
            analytic_near = len(near) > n_always
            near = near[:n_always]
        if (len(self._an_int) or self._sp_pairs or self._bh_pairs) and analytic_near:
            placement = self._joint_placements(pin_data)
            r = self._kernels.sphere_halfspace_raw(placement, self._an_int, self._an_float, self.margin,
                                                   self._an_pair_out, self._an_raw) if len(self._an_int) else 0
            if self._sp_pairs:
                r = self._kernels.sphere_primitive_raw(placement, self._sp_int, self._sp_float, self.margin,
                                                       self._an_pair_out, self._an_raw, r)
            if self._bh_pairs:         # box-halfspace: one-point contacts as rows, patches in self._bh_patch
                r, n_box_patches = self._kernels.box_halfspace_contacts(
                    placement, self._bh_int, self._bh_float, self.margin, self.patch_tolerance, self._an_pair_out,
                    self._an_raw, r, *self._bh_patch, self._bh_work, self._bh_iwork)
            n_analytic = r
        if self._native is not None:
            (single_pair, single_a, single_b, single_n, multi_pair, multi_start, multi_mid, multi_n, multi_depth,
             multi_a, multi_b, n_colliding, n_candidates) = self._narrow_phase_native(pin_data, near)
        elif self._broad is None and not self._coal_pairs:
            # every pair compiled (analytic): coal's narrow phase has nothing to test, its (empty) rows are the same
            # every step: made once (they are only read)
            if self._no_coal_rows is None:
                self._no_coal_rows = self._narrow_phase_python(pin_data, near)
            (single_pair, single_a, single_b, single_n, multi_pair, multi_start, multi_mid, multi_n, multi_depth,
             multi_a, multi_b, n_colliding, n_candidates) = self._no_coal_rows
        else:
            (single_pair, single_a, single_b, single_n, multi_pair, multi_start, multi_mid, multi_n, multi_depth,
             multi_a, multi_b, n_colliding, n_candidates) = self._narrow_phase_python(pin_data, near)
        self.stats["candidate_pairs"] = n_candidates
        self.stats["colliding_pairs"] = n_colliding + n_analytic + n_box_patches
        has_multi = len(multi_pair) > 0 or n_box_patches > 0
        if not (len(single_pair) or has_multi or n_analytic):
            self.stats["contacts"] = 0
            return self.contact_set(0)
        if n_analytic:                  # the compiled rows merged into the one-point contacts, in pair order
            raw = self._an_raw
            if len(single_pair):
                pair_s = np.concatenate([single_pair, self._an_pair_out[:n_analytic]])
                order = np.argsort(pair_s, kind="stable")
                single_pair = pair_s[order]
                single_a = np.concatenate([single_a, raw[0, :n_analytic]])[order]
                single_b = np.concatenate([single_b, raw[1, :n_analytic]])[order]
                single_n = np.concatenate([single_n, raw[2, :n_analytic]])[order]
            else:
                order = np.argsort(self._an_pair_out[:n_analytic], kind="stable")
                single_pair = self._an_pair_out[order]
                single_a, single_b, single_n = raw[0, order], raw[1, order], raw[2, order]

        if has_multi and self._kernels is not None:
            pairs_m, wa, wb, normal_m = self._patch_contacts_numba(multi_pair, multi_start, multi_mid, multi_n,
                                                                   multi_depth, multi_a, multi_b, n_box_patches)
        elif len(multi_pair):
            count = np.diff(multi_start)
            pairs_m = np.repeat(multi_pair, count)
            normal_m = np.repeat(multi_n, count, axis=0)
            wa, wb = self._patch_witnesses(pairs_m, multi_mid, normal_m, np.repeat(multi_depth, count))
            # The patch is the polygon of the support sets' projections: for a curved hull the deepest vertex
            # can lie inside it and be lost (all points separated while the bodies overlap). coal's deepest
            # point is then added to the pair's manifold.
            phi_m = ((wb - wa) * normal_m).sum(axis=1)
            lost = np.minimum.reduceat(phi_m, np.cumsum(count) - count) > multi_depth + DEEPEST_POINT_TOLERANCE
            if lost.any():
                idx = np.flatnonzero(lost)
                pairs_m = np.concatenate([pairs_m, multi_pair[idx]])
                wa = np.concatenate([wa, multi_a[idx]])
                wb = np.concatenate([wb, multi_b[idx]])
                normal_m = np.concatenate([normal_m, multi_n[idx]])
        if len(single_pair) and has_multi:
            pair_of = np.concatenate([single_pair, pairs_m])
            wit_a = np.concatenate([single_a, wa])
            wit_b = np.concatenate([single_b, wb])
            normal = np.concatenate([single_n, normal_m])
        elif len(single_pair):
            pair_of, wit_a, wit_b, normal = single_pair, single_a, single_b, single_n
        else:
            pair_of, wit_a, wit_b, normal = pairs_m, wa, wb, normal_m
        if len(pair_of) > self._capacity:
            self._allocate(max(len(pair_of), 2 * self._capacity))
        if self._kernels is not None:
            n = self._finish_numba(pin_data, pair_of, wit_a, wit_b, normal, joint_jacobians)
        else:
            n = self._finish_numpy(pin_data, pair_of, wit_a, wit_b, normal)
        return self._output(n, surface_velocity)

    def _update_compiled(self, pin_data, joint_jacobians: bool):
        """``update``'s steps in ONE compiled call, ``contact_pass_kernels.coal_contact_pass`` (the query's pass
        bit for bit: test_contact_pass.py), for a query with the compiled narrow phase and no bounding-volume
        tests (more than BOUND_MAX_PAIRS pairs: the clutter's 980), no surface velocity, its narrow phase bound to
        ``pin_data`` (or to none yet): instead of ~10 numpy and kernel calls (clutter: ~40 us of Python and
        dispatch per step). Returns n, or None when the pass cannot give the set (a step with more rows than the
        buffers, or coal failed): the staged steps below then run (and grow the buffers; the pass is made
        again)."""
        if not joint_jacobians:
            pin.computeJointJacobians(self._pin_model, pin_data)
        cp = self._update_pass
        if cp is None or not cp.current():
            cp = self._update_pass = CoalPass(self, pin_data)
        self._joint_placements(pin_data)
        n, colliding, candidates = contact_pass_kernels.coal_contact_pass(cp.table, pin_data.J, self._no_q, False)
        if n < 0:
            return None
        self.stats["candidate_pairs"] = candidates
        self.stats["colliding_pairs"] = colliding
        self.stats["contacts"] = n
        return n

    def _narrow_phase_native(self, pin_data, near):
        """``_narrow_phase_python`` in one compiled call (``narrow_phase.cpp``): the same coal calls and rows, as
        views of the buffers in ``self._native_out`` (valid until the next update)."""
        within = self._all_always if near is None else near
        if self._gd_always is not None and self._coal_always_pairs:
            pin.updateGeometryPlacements(self._pin_model, pin_data, self._gm, self._gd_always)
        n_single, n_multi, n_colliding, n_candidates = self._native.run(within, len(within))
        out = self._native_out
        start = out["multi_start"][:n_multi + 1]
        return (out["single_pair"][:n_single], out["single_a"][:n_single], out["single_b"][:n_single],
                out["single_n"][:n_single], out["multi_pair"][:n_multi], start, out["multi_mid"][:start[-1]],
                out["multi_n"][:n_multi], out["multi_depth"][:n_multi], out["multi_a"][:n_multi],
                out["multi_b"][:n_multi], n_colliding, len(self._always_pairs) + self._sp_pairs + n_candidates)

    def _narrow_phase_python(self, pin_data, near):
        """The narrow phase (the reference of ``_narrow_phase_native``, the compiled one): coal's tests of the
        broad phase's candidates and of the unbounded pairs (``near``, when not None: the indexes into
        ``self._coal_always_pairs`` of those whose bound passes), then per
        colliding pair within the margin its contact: one-point (coal's witness points) or a multi-point patch
        (coal's patch points, at most max_patch_points of them, spread; the patch geometries' placements written
        to ``self._geometry_placement``). Returns (single_pair, single_a, single_b, single_n, multi_pair,
        multi_start, multi_mid, multi_n, multi_depth, multi_a, multi_b, colliding pairs, candidate pairs), the
        rows as arrays in pair order."""
        pm, gm, gd = self._pin_model, self._gm, self._gd
        collision_results, patch_results = self._collision_results, self._patch_results
        # the pairs within the margin after the narrow phase, in pair order; the narrow phase of many pairs in
        # one call, then only the colliding pairs' results are read
        if self._broad is None:
            n_candidates = self.num_pairs
            colliding = ([k for k in self._coal_pairs if collision_results[k].isCollision()]
                         if self._coal_pairs and pin.computeCollisions(gm, gd, False) else [])
        else:
            colliding = []
            if self._gd_always is not None and self._coal_always_pairs:
                gd_always, always = self._gd_always, self._coal_always_pairs
                pin.updateGeometryPlacements(pm, pin_data, gm, gd_always)
                if near is not None:
                    colliding = [always[i] for i in near.tolist() if pin.computeCollision(gm, gd_always, always[i])]
                elif pin.computeCollisions(gm, gd_always, False):
                    colliding = [k for k in always if collision_results[k].isCollision()]
            self._broad.update(False)
            pin.computeCollisions(self._broad, self._collect)
            collected = self._collect.pair_indexes     # StdVec_Index: list() of it costs ~7 us, indexing ~0.3 us
            candidates = [collected[i] for i in range(len(collected))]
            n_candidates = len(self._always_pairs) + self._sp_pairs + len(candidates)
            colliding += [k for k in candidates if pin.computeCollision(gm, gd, k)]
            colliding.sort()                           # pair order, as without the broad phase (not the sweep's)

        # one-point contacts: coal's witness points; multi-point patches: points on the patch plane, whose
        # witnesses come from line casts after the loop (vectorised over all patches)
        single_pair, single_a, single_b, single_n = [], [], [], []
        # multi-point patches: per patch its pair, first point row, coal's depth; one list of vectors (normals,
        # then the witnesses on A, then on B) and one of the points, each converted to an array in one call
        multi_pair, multi_start, multi_mid, multi_n, multi_depth, multi_a, multi_b = [], [0], [], [], [], [], []
        placement, oMg, patch_geometries = self._geometry_placement, gd.oMg, set()
        max_points = self.max_patch_points
        n_colliding = 0
        margin = self.margin
        flipped, point_pairs, pair_data = self._flipped, self._point_pairs, self._pair_data
        for k in colliding:
            contact = collision_results[k].getContact(0)
            depth = contact.penetration_depth
            if depth > margin:
                continue
            n_colliding += 1
            flip = flipped[k]
            normal = -contact.normal if flip else contact.normal
            if point_pairs[k]:
                m = 1
            else:
                pin.computeContactPatch(gm, pair_data[k], k)
                patches = patch_results[k]
                patch = patches.getContactPatch(0) if patches.numContactPatches() else None
                m = patch.size() if patch is not None else 0
            w1, w2 = contact.getNearestPoint1(), contact.getNearestPoint2()
            w_a, w_b = (w2, w1) if flip else (w1, w2)        # coal's deepest (or nearest) points
            if m > 1:
                mid = [patch.getPoint(i) for i in range(m)]
                if m > max_points:
                    mid = list(_spread_subset(np.array(mid), 0.5 * (w_a + w_b), max_points))
                    m = max_points
                multi_pair.append(k)
                multi_start.append(multi_start[-1] + m)
                multi_mid.extend(mid)
                multi_n.append(normal)
                multi_depth.append(depth)
                multi_a.append(w_a)
                multi_b.append(w_b)
                patch_geometries.update(self._pair_geometries[k])
            else:
                single_pair.append(k)
                single_a.append(w_a)
                single_b.append(w_b)
                single_n.append(normal)
        for g in patch_geometries:                 # (the patches' placements: a few geometries per step)
            placement[g] = oMg[g].homogeneous
        vectors = np.array(single_a + single_b + single_n).reshape(3, -1, 3)
        multi = np.array(multi_n + multi_a + multi_b).reshape(3, -1, 3)
        return (np.array(single_pair, dtype=np.int64), vectors[0], vectors[1], vectors[2],
                np.array(multi_pair, dtype=np.int64), np.array(multi_start, dtype=np.int64),
                np.array(multi_mid).reshape(-1, 3), multi[0], np.array(multi_depth), multi[1], multi[2],
                n_colliding, n_candidates)

    def _output(self, n: int, surface_velocity) -> ContactSet:
        """The ContactSet of the n contacts in the buffers, with the surface-velocity bias."""
        self.stats["contacts"] = n
        if n == 0:
            return self.contact_set(0)

        bias = self._bias[:3 * n]
        if surface_velocity is None:
            bias[:] = 0.0
        else:
            vs = np.asarray(surface_velocity, dtype=float)
            if vs.shape != (len(self._parent), 3):
                raise ConfigError(f"surface_velocity must have shape ({len(self._parent)}, 3) (one world-frame "
                                  f"m/s vector per collision geometry), got {vs.shape}")
            ga, gb, ja, jb = self._ids[:, :n]
            v_rel = np.where((jb == 0)[:, None], vs[gb], 0.0) - np.where((ja == 0)[:, None], vs[ga], 0.0)
            np.matmul(v_rel[:, None, :], self._rotation[:n], out=bias.reshape(n, 1, 3))      # R^T v per contact
        return self.contact_set(n)

    def _finish_numba(self, pin_data, pair_of, wit_a, wit_b, normal, joint_jacobians: bool = False) -> int:
        """``_finish_numpy`` in one compiled call (``contact_kernels.finish_contacts``); returns n."""
        if not joint_jacobians:
            pin.computeJointJacobians(self._pin_model, pin_data)   # pin_data.J: world frame, all joints
        return self._kernels.finish_contacts(
            pair_of, wit_a, wit_b, normal, self.margin, self._pair_ids, self._pair_material, pin_data.J,
            self._joint_columns, self._column_dof, self._ids, self._point, self._normal, self._phi, self._rotation,
            self._jacobian, self._material, self._rel_scratch, self._columns)

    def _finish_numpy(self, pin_data, pair_of, wit_a, wit_b, normal) -> int:
        """Raw contacts (pair, witness points on A and B, normal) -> the output buffers, keeping those within the
        margin: signed distances, points, frames, materials, Jacobians. Returns their number n."""
        phi = ((wit_b - wit_a) * normal).sum(axis=1)
        keep = phi <= self.margin
        if not keep.all():
            pair_of, wit_a, wit_b, normal, phi = pair_of[keep], wit_a[keep], wit_b[keep], normal[keep], phi[keep]
        n = len(phi)
        if n == 0:
            return 0
        ids = self._ids[:, :n]
        np.take(self._pair_ids, pair_of, axis=1, out=ids)
        ga, gb, ja, jb = ids
        point = self._point[:n]
        np.add(wit_a, wit_b, out=point)
        point *= 0.5
        self._normal[:n] = normal
        self._phi[:n] = phi
        rotation = self._rotation[:n]
        contact_frames(normal, out=rotation)
        np.take(self._pair_material, pair_of, axis=1, out=self._material[:, :n])

        jac = self._jacobian[:3 * n]
        if ja.any() or jb.any():
            pin.computeJointJacobians(self._pin_model, pin_data)
            if self.jacobian_method == "vectorized":
                self._jacobian_vectorized(pin_data, ja, jb, point, rotation, jac.reshape(n, 3, self._nv))
            else:
                self._jacobian_frame(pin_data, ja, jb, point, rotation, jac.reshape(n, 3, self._nv))
        else:
            jac[:] = 0.0
        return n

    def contact_set(self, n: int) -> ContactSet:
        """The ContactSet of the buffers' first n rows: one view object per n, made once per buffer allocation
        (its arrays are views: they hold the latest query's values; ``update`` returns it, a caller that ran the
        query's compiled pass itself, ``analytic_step_arguments``, reads its n contacts with it)."""
        view = self._views.get(n)
        if view is None:
            view = self._views[n] = self._make_contact_set(n)
        return view

    def _make_contact_set(self, n: int) -> ContactSet:
        ids, mat = self._ids[:, :n], self._material[:, :n]
        return ContactSet(ids[0], ids[1], ids[2], ids[3], self._point[:n], self._normal[:n], self._phi[:n],
                          self._rotation[:n], self._jacobian[:3 * n], self._bias[:3 * n], mat[0], mat[1], mat[2],
                          mat[3], self._columns[:n] if self._kernels is not None else None)

    # ------------------------------------------------------------------ manifold depths
    def _patch_witnesses(self, pair: np.ndarray, mid: np.ndarray, normal: np.ndarray, depth: np.ndarray):
        """Witness points (M, 3) on A and on B of patch points ``mid`` (M, 3) (world, on their patch planes).

        Each point's line p + s n is intersected with both shapes (in their frames): A's surface is where the
        line leaves A (s_out), B's where it enters B (s_in). Where a shape has no caster (cone, plane) or the
        line misses it numerically, the patch's own depth is used: s = -depth/2 on A, +depth/2 on B.
        """
        m = len(mid)
        geometry = self.pairs[pair].T.reshape(-1)                      # A of every point, then B
        mid2 = np.concatenate([mid, mid])
        normal2 = np.concatenate([normal, normal])
        # placements of the few geometries involved, gathered per point (np.unique is slow on tiny arrays)
        slot = {}
        for g in geometry.tolist():
            slot.setdefault(g, len(slot))
        oMg = self._gd.oMg
        placements = [oMg[g] for g in slot]
        inverse = np.fromiter(map(slot.__getitem__, geometry.tolist()), dtype=int, count=len(geometry))
        rot = np.array([pl.rotation for pl in placements])[inverse]          # (2M, 3, 3)
        trans = np.array([pl.translation for pl in placements])[inverse]     # (2M, 3)
        p_local = np.matmul((mid2 - trans)[:, None, :], rot)[:, 0]              # R^T (p - t)
        u_local = np.matmul(normal2[:, None, :], rot)[:, 0]
        s_in, s_out = self._caster.intervals(geometry, p_local, u_local)
        s_a, s_b = s_out[:m], s_in[m:]                                     # line leaves A, enters B
        bad_a, bad_b = ~np.isfinite(s_a), ~np.isfinite(s_b)
        if bad_a.any():
            s_a[bad_a] = -0.5 * depth[bad_a]
        if bad_b.any():
            s_b[bad_b] = 0.5 * depth[bad_b]
        return mid + s_a[:, None] * normal, mid + s_b[:, None] * normal

    def _patch_contacts_numba(self, pair, start, mid, normal, depth, wit_a, wit_b, n_box=0):
        """The multi-point patches' raw contact rows (pair, witnesses on A and B, normal) in one compiled call
        (``contact_kernels.patch_contacts``): the numpy path's ``_patch_witnesses`` and lost-deepest-point check.
        Coal's patches first (C-contiguous arrays in pair order: pairs (int64), first point rows ``start`` (P + 1,
        int64), points, normals, depths, witnesses; their geometries' world placements already in
        ``self._geometry_placement``),
        then the first ``n_box`` box-halfspace patches of ``self._bh_patch`` (pair order) in a second call into
        the same buffers. Returns views of the query's buffers (valid until the next update)."""
        p = len(pair)
        rows = start[-1] + p
        if n_box:
            b_start = self._bh_patch[1]
            rows += int(b_start[n_box]) + n_box
        if rows > len(self._patch_rows):
            size = max(rows, 2 * len(self._patch_rows), 16)
            self._patch_rows = np.zeros(size, dtype=np.int64)
            self._patch_wa, self._patch_wb, self._patch_normal = np.zeros((3, size, 3))
        if p > len(self._patch_min_gap):
            self._patch_min_gap = np.zeros(max(p, 2 * len(self._patch_min_gap), 4))
        pair_out, wa, wb, normal_out = self._patch_rows, self._patch_wa, self._patch_wb, self._patch_normal
        c = self._caster
        r = 0
        if p:
            geometry = self._pairs_by_side.take(pair, axis=1)             # (2, P): A, B of every patch
            # every array C-contiguous, as in the box-halfspace call below: one compiled variant of the kernel;
            # the placements are read by geometry index (slot = geometry)
            r = self._kernels.patch_contacts(
                pair, start, mid, normal, depth, wit_a, wit_b, geometry[0], geometry[1], geometry[0], geometry[1],
                self._geometry_placement, c.type, c.half, c.radius, c.half_length, c.plane_normal, c.plane_offset,
                c.face_start, c.face_normal, c.face_offset, c.tolerance, DEEPEST_POINT_TOLERANCE,
                self._patch_min_gap, pair_out, wa, wb, normal_out)
        if n_box:
            args = self._bh_patch_args
            if args is None:       # the call's arguments between the pairs and the outputs: fixed arrays, once
                b_pair, b_start, b_mid, b_normal, b_depth, b_wa, b_wb, b_geometry, b_placement = self._bh_patch
                args = self._bh_patch_args = (
                    b_start, b_mid, b_normal, b_depth, b_wa, b_wb, b_geometry[0], b_geometry[1], self._bh_slots[0],
                    self._bh_slots[1], b_placement, c.type, c.half, c.radius, c.half_length, c.plane_normal,
                    c.plane_offset, c.face_start, c.face_normal, c.face_offset, c.tolerance,
                    DEEPEST_POINT_TOLERANCE, self._bh_min_gap)
            b_pair = self._bh_patch[0]
            if r:
                r += self._kernels.patch_contacts(b_pair[:n_box], *args, pair_out[r:], wa[r:], wb[r:],
                                                  normal_out[r:])
            else:
                r = self._kernels.patch_contacts(b_pair[:n_box], *args, pair_out, wa, wb, normal_out)
        return pair_out[:r], wa[:r], wb[:r], normal_out[:r]

    def _load_patch_kernel(self) -> None:
        """Calls ``contact_kernels.patch_contacts`` once with no patch, with the argument types of the step, so that
        its compiled code is loaded (from numba's cache: ~7 ms) here and not in the first step with a face contact
        (a stall in a running simulation)."""
        c, i0, f2, f3 = self._caster, np.zeros(0, dtype=np.int64), np.zeros((0, 3)), np.zeros((0, 3))
        self._kernels.patch_contacts(
            i0, np.zeros(1, dtype=np.int64), f2, f2, np.zeros(0), f2, f2, i0, i0, i0, i0, np.zeros((0, 4, 4)), c.type,
            c.half, c.radius, c.half_length, c.plane_normal, c.plane_offset, c.face_start, c.face_normal,
            c.face_offset, c.tolerance, DEEPEST_POINT_TOLERANCE, np.zeros(0), i0, f3, f3, f3)

    # ------------------------------------------------------------------ Jacobians
    def _jacobian_vectorized(self, data, ja, jb, point, rotation, out):
        """out[i] = R_i^T (J_B(p_i) - J_A(p_i)), J_X(p) = J_lin - [p - o]x J_ang of X's joint (world-aligned)."""
        jj, origins = self._joint_jacobians, self._joint_origins
        nv = self._nv
        for j in set(ja.tolist()) | set(jb.tolist()):
            if j == 0:
                continue
            jj[j] = pin.getJointJacobian(self._pin_model, data, j, _LWA).reshape(6, nv)
            origins[j] = data.oMi[j].translation
        moving_a, moving_b = ja.any(), jb.any()
        if moving_a and moving_b:                     # both sides in one pass: rows of B, then rows of A
            n = len(point)
            both = _point_jacobians(jj, origins, np.concatenate([jb, ja]), np.concatenate([point, point]))
            rel = np.subtract(both[:n], both[n:])
        elif moving_b:
            rel = _point_jacobians(jj, origins, jb, point)
        else:
            rel = _point_jacobians(jj, origins, ja, point)
            np.negative(rel, out=rel)
        np.matmul(rotation.transpose(0, 2, 1), rel, out=out)

    def _jacobian_frame(self, data, ja, jb, point, rotation, out):
        """Same as ``_jacobian_vectorized`` with one ``pin.getFrameJacobian`` per contact point and moving side."""
        pm, nv = self._pin_model, self._nv
        rel = np.zeros((len(point), 3, nv))
        eye = np.eye(3)
        for i in range(len(point)):
            for j, sign in ((int(jb[i]), 1.0), (int(ja[i]), -1.0)):
                if j == 0:
                    continue
                p_joint = data.oMi[j].actInv(point[i])
                jac = pin.getFrameJacobian(pm, data, j, pin.SE3(eye, p_joint), _LWA)
                rel[i] += sign * jac.reshape(6, nv)[:3]
        np.matmul(rotation.transpose(0, 2, 1), rel, out=out)


class CoalPass:
    """The address table of ``contact_pass_kernels.coal_contact_pass`` for one ContactQuery (its
    ``compiled_coal_pass``): ``table`` (K, 4) int64 rows (address, dims) of the query's arrays and this object's
    scratch (held in ``arrays``), ``within`` (the unbounded coal pairs to test: indexes into them, initially all;
    ``n_always`` of them), ``functions`` narrow_phase.cpp's ``c_functions()``."""

    def __init__(self, query: "ContactQuery", pin_data: pin.Data):
        from . import contact_pass_kernels as k
        q = query
        module = NARROW_PHASE.load()
        a = q.compiled_pass_arguments()
        q._native.bind(q._pin_model, pin_data)
        q._bound_data = pin_data
        p = q.num_pairs
        out = q._native_out
        always = np.array(q._coal_always_pairs, dtype=np.int64)
        self.n_always = len(always)
        self.within = np.arange(max(len(always), 1), dtype=np.int64)
        ints = np.zeros(k.N_PASS_INTS, dtype=np.int64)
        ints[k.I_NARROW_FN] = int(module.c_functions()[0])
        ints[k.I_NARROW_HANDLE] = int(q._native.handle())
        ints[k.I_EXTRA_CANDIDATES] = len(q._always_pairs) + q._sp_pairs
        scalars = np.zeros(k.N_PASS_SCALARS)
        scalars[[k.S_MARGIN, k.S_PATCH_TOLERANCE, k.S_CASTER_TOLERANCE, k.S_DEEPEST]] = (
            q.margin, q.patch_tolerance, a["caster_tolerance"], DEEPEST_POINT_TOLERANCE)
        patch_rows = p * (q.max_patch_points + 1) + 9 * len(a["bh_int"]) + 1
        merged = max(q._capacity, 1)
        own = {"counts": np.zeros(4, np.int64), "m_geometry": np.zeros((2, max(p, 1)), np.int64),
               "patch_min_gap": np.zeros(max(p, 1)), "pr_pair": np.zeros(patch_rows, np.int64),
               "pr_a": np.zeros((patch_rows, 3)), "pr_b": np.zeros((patch_rows, 3)), "pr_n": np.zeros((patch_rows, 3)),
               "order": np.zeros(p + len(a["pair_out"]) + 1, np.int64), "mr_pair": np.zeros(merged, np.int64),
               "mr_a": np.zeros((merged, 3)), "mr_b": np.zeros((merged, 3)), "mr_n": np.zeros((merged, 3))}
        entries = {
            k.P_INTS: ints, k.P_SCALARS: scalars, k.P_WITHIN: self.within, k.P_COUNTS: own["counts"],
            k.P_PLACEMENT: a["placement"], k.P_AN_INT: a["an_int"], k.P_AN_FLOAT: a["an_float"],
            k.P_SP_INT: a["sp_int"], k.P_SP_FLOAT: a["sp_float"], k.P_BH_INT: a["bh_int"], k.P_BH_FLOAT: a["bh_float"],
            k.P_PAIR_OUT: a["pair_out"], k.P_RAW: a["raw"], k.P_B_PAIR: a["b_pair"], k.P_B_START: a["b_start"],
            k.P_B_MID: a["b_mid"], k.P_B_NORMAL: a["b_normal"], k.P_B_DEPTH: a["b_depth"], k.P_B_WA: a["b_wa"],
            k.P_B_WB: a["b_wb"], k.P_B_GEOMETRY: a["b_geometry"], k.P_B_PLACEMENT: a["b_placement"],
            k.P_BH_SLOTS: a["bh_slots"], k.P_BH_WORK: a["bh_work"], k.P_BH_IWORK: a["bh_iwork"],
            k.P_BH_MIN_GAP: a["bh_min_gap"], k.P_S_PAIR: out["single_pair"], k.P_S_A: out["single_a"],
            k.P_S_B: out["single_b"], k.P_S_N: out["single_n"], k.P_M_PAIR: out["multi_pair"],
            k.P_M_START: out["multi_start"], k.P_M_MID: out["multi_mid"], k.P_M_N: out["multi_n"],
            k.P_M_A: out["multi_a"], k.P_M_B: out["multi_b"], k.P_M_DEPTH: out["multi_depth"],
            k.P_PAIRS_BY_SIDE: q._pairs_by_side, k.P_M_GEOMETRY: own["m_geometry"],
            k.P_GEOMETRY_PLACEMENT: q._geometry_placement, k.P_PATCH_MIN_GAP: own["patch_min_gap"],
            k.P_C_TYPE: a["caster_type"], k.P_C_HALF: a["caster_half"], k.P_C_RADIUS: a["caster_radius"],
            k.P_C_HALF_LENGTH: a["caster_half_length"], k.P_C_PLANE_NORMAL: a["caster_plane_normal"],
            k.P_C_PLANE_OFFSET: a["caster_plane_offset"], k.P_C_FACE_START: a["caster_face_start"],
            k.P_C_FACE_NORMAL: a["caster_face_normal"], k.P_C_FACE_OFFSET: a["caster_face_offset"],
            k.P_PR_PAIR: own["pr_pair"], k.P_PR_A: own["pr_a"], k.P_PR_B: own["pr_b"], k.P_PR_N: own["pr_n"],
            k.P_ORDER: own["order"], k.P_MR_PAIR: own["mr_pair"], k.P_MR_A: own["mr_a"], k.P_MR_B: own["mr_b"],
            k.P_MR_N: own["mr_n"], k.P_PAIR_IDS: a["pair_ids"], k.P_PAIR_MATERIAL: a["pair_material"],
            k.P_JOINT_COLUMNS: a["joint_columns"], k.P_COLUMN_DOF: a["column_dof"], k.P_IDS: a["ids"],
            k.P_POINT: a["point"], k.P_NORMAL: a["normal"], k.P_PHI: a["phi"], k.P_ROTATION: a["rotation"],
            k.P_JACOBIAN: a["jacobian"], k.P_MATERIAL: a["material"], k.P_REL: a["rel"], k.P_COLUMNS: a["columns"],
            k.P_BIAS: a["bias"]}
        # update's bounding-volume decision (given q): the test of every pair (and its wait count), then the one of
        # the unbounded coal pairs and the compiled ones (which of those coal tests: its passing list)
        no_int, no_float = np.zeros((1, 1), np.int64), np.zeros((1, 1))
        for first, b in ((k.P_BOUNDS, q._bounds), (k.P_NEAR, q._near_bounds)):
            names = ("joint_int", "joint_float", "geometry_int", "geometry_float", "pairs", "placement", "world",
                     "local")
            for i, name in enumerate(names):
                integer = name in ("joint_int", "geometry_int", "pairs")
                entries[first + i] = getattr(b, name) if b is not None else (no_int if integer else no_float)
        entries[k.P_NEAR_PASSING] = q._near_bounds.passing if q._near_bounds is not None else np.zeros(1, np.int64)
        entries[k.P_BOUNDS_WAIT] = q._bounds_wait
        ints[k.I_HAS_BOUNDS] = q._bounds is not None
        ints[k.I_HAS_NEAR] = q._near_bounds is not None
        ints[k.I_N_ALWAYS_NEAR] = q._n_always_near
        ints[k.I_RETEST] = BOUND_RETEST_AFTER
        ints[k.I_N_ALWAYS] = len(always)
        scalars[k.S_BOUNDS_LIMIT] = q._bounds.limit if q._bounds is not None else 0.0
        scalars[k.S_NEAR_LIMIT] = q._near_bounds.limit if q._near_bounds is not None else 0.0
        if sorted(entries) != list(range(k.N_PASS_TABLE)):
            raise ValueError("ContactQuery.compiled_coal_pass: the address table misses an entry")
        rows = []
        for key in range(k.N_PASS_TABLE):
            arr = entries[key]
            if not arr.flags.c_contiguous or arr.ndim > 3 or arr.dtype not in (np.int64, np.float64):
                raise ValueError(f"ContactQuery.compiled_coal_pass: table entry {key} must be a C-contiguous "
                                 f"int64 / float64 array of <= 3 dimensions, got {arr.dtype} {arr.shape}")
            rows.append((arr.ctypes.data, *arr.shape, *(0,) * (3 - arr.ndim)))
        self.query, self.arrays = q, entries
        self.table = np.array(rows, dtype=np.int64)
        self._no_contacts = q.contact_set(0)

    def current(self) -> bool:
        """True while the query's contact buffers are still the arrays of the table (a staged update that grew
        them makes its ContactSet views again)."""
        return self.query.contact_set(0) is self._no_contacts


def joint_column_support(pin_model: pin.Model) -> tuple[np.ndarray, np.ndarray]:
    """(support (njoints, nvExtended) 0/1, column_dof (nvExtended,) int) for the columns of ``pin_data.J``: column c
    moves the body of joint j iff support[j, c] = 1 (c belongs to a joint on the path from the world to j), and
    column c is the generalized velocity column_dof[c] (a mimic joint's column is its primary's velocity)."""
    nv_ext = int(getattr(pin_model, "nvExtended", pin_model.nv))
    column_dof = np.zeros(nv_ext, dtype=np.int64)
    support = np.zeros((pin_model.njoints, nv_ext))
    for j in range(1, pin_model.njoints):
        joint = pin_model.joints[j]
        cols = np.arange(joint.idx_vExtended, joint.idx_vExtended + joint.nvExtended)
        column_dof[cols] = joint.idx_v + np.arange(joint.nvExtended)
        for i in pin_model.supports[j]:
            if i > 0:
                other = pin_model.joints[i]
                support[j, other.idx_vExtended:other.idx_vExtended + other.nvExtended] = 1.0
    return support, column_dof


def _point_jacobians(joint_jacobians, origins, joint, point):
    """(N, 3, nv) world-frame Jacobians of the material points ``point`` (N, 3) fixed to joints ``joint`` (N,).

    v_p = v_o + w x (p - o) = J_lin v - [r]x J_ang v with r = p - o; joint 0 (world) has a zero Jacobian.
    """
    jac = joint_jacobians[joint]                     # (N, 6, nv)
    r = (point - origins[joint])[:, :, None]         # (N, 3, 1)
    ang = jac[:, 3:]
    # (r x w)_i = r_{i+1} w_{i+2} - r_{i+2} w_{i+1}, row-wise on the angular block
    return jac[:, :3] - (r[:, _NEXT] * ang[:, _NEXT2] - r[:, _NEXT2] * ang[:, _NEXT])


def _spread_subset(points: np.ndarray, start: np.ndarray, k: int) -> np.ndarray:
    """k of the coplanar patch ``points`` (M, 3) spread over the patch: the point nearest ``start`` (coal's
    deepest point), then repeatedly the point farthest from those chosen (farthest-point sampling)."""
    chosen = [int(np.argmin(((points - start) ** 2).sum(axis=1)))]
    dist = ((points - points[chosen[0]]) ** 2).sum(axis=1)
    for _ in range(k - 1):
        j = int(np.argmax(dist))
        chosen.append(j)
        np.minimum(dist, ((points - points[j]) ** 2).sum(axis=1), out=dist)
    return points[chosen]


# n x e_k for the world axis e_k: component permutation and signs (x: (0, n_z, -n_y), y: (-n_z, 0, n_x),
# z: (n_y, -n_x, 0))
_NEXT, _NEXT2 = [1, 2, 0], [2, 0, 1]
_AXIS_CROSS_PERM = np.array([[0, 2, 1], [2, 1, 0], [1, 0, 2]])
_AXIS_CROSS_SIGN = np.array([[0.0, 1.0, -1.0], [-1.0, 0.0, 1.0], [1.0, -1.0, 0.0]])


def contact_frames(normal: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Contact frames (N, 3, 3) with columns (t1, t2, n): t1 = normalize(n x e), e the world axis least aligned
    with n (deterministic, well conditioned), t2 = n x t1 = ((n.e) n - e) / |n x e| (right-handed)."""
    normal = np.asarray(normal, dtype=float)
    if out is None:
        out = np.empty((len(normal), 3, 3))
    k = np.argmin(np.abs(normal), axis=1)
    rows = np.arange(len(normal))[:, None]
    n_k = normal[rows, k[:, None]]                                   # (N, 1) n.e
    inv_norm = 1.0 / np.sqrt(1.0 - n_k * n_k)                         # 1 / |n x e|
    out[:, :, 0] = normal[rows, _AXIS_CROSS_PERM[k]] * _AXIS_CROSS_SIGN[k] * inv_norm
    out[:, :, 1] = (normal * n_k - _AXES[k]) * inv_norm
    out[:, :, 2] = normal
    return out


def _check_length(name: str, value, allow_zero: bool = False) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"contact query: {name} must be a number of metres, got {value!r}") from None
    if not np.isfinite(value) or value < 0.0 or (value == 0.0 and not allow_zero):
        raise ConfigError(f"contact query: {name} must be finite and {'>=' if allow_zero else '>'} 0 m, "
                          f"got {value!r}")
    return value
