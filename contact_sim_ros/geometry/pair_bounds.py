"""Bounding-volume test of the contact query's pairs from the configuration q: can any pair be within the margin?
(issue 18: a robot's contact-free steps skip coal.)

A step of the iiwa + WSG held in the air (the peer benchmark, the node's iiwa_wsg scene) finds no contact, yet the
query updated two GeometryData's placements and the AABB tree and ran coal's narrow phase on 14 pairs (~17 us of a
~40 us step). This test answers in ONE compiled call from q alone:

* joint placements by forward kinematics in the kernel (revolute, unbounded revolute, prismatic and free-flyer
  joints; oMi = oMi[parent] jointPlacement M_joint(q), as Pinocchio; reading Pinocchio's ``data.oMi`` from
  Python costs ~0.6 us per joint, more than the whole kernel);
* every collision geometry bounded by a rounded cylinder: a cylinder (centre, unit axis u, half-length h, radius
  r, in its joint's frame) grown by a ball of radius s. A sphere: h = r = 0, s its radius; a capsule: r = 0,
  s its radius; a cylinder or a cone: its own (s = 0); a box: the cylinder around its longest axis (r the
  half-diagonal of the other two half sides); an ellipsoid: the ball of its largest radius; any other bounded
  shape (convex hulls): the ball around its local AABB; coal's swept-sphere radius is added to s. A halfspace is
  its plane (n . x <= d inside); a plane or an unbounded shape gets no bound;
* per pair a lower bound of the distance: for two bounded shapes the largest of the capsules' (segment-segment
  distance - (r + s)_A - (r + s)_B) and the two slabs' (the gap between A's extent along u_A, h_A + s_A about its
  centre, and B's, h_B |u_A.u_B| + r_B sqrt(1 - (u_A.u_B)^2) + s_B, and the same along u_B: the cylinders' caps,
  which the capsules round off); with a halfspace the exact support of the rounded cylinder, n . c - d
  - h |u.n| - r sqrt(1 - (u.n)^2) - s; -inf for any other pair.

A pair whose bound is > margin + ``BOUND_SLACK`` is not within the margin (coal's signed distances are exact for
these shapes to far below the slack), so coal would not report it. ``ContactQuery.update(..., q=q)`` returns the
empty contact set without calling coal when no pair passes, and otherwise runs the full query (and skips the test
for the next ``BOUND_RETEST_AFTER`` updates): the same contact set either way (``test/test_pair_bounds.py``). The
test costs ~1.5-2 us (iiwa + WSG, 79 pairs). Models with other joints (mimic, spherical, planar, composite,
unbounded revolute about an unaligned axis, whose axis Pinocchio's Python bindings do not expose) get no test
(``PairBounds.make`` returns None).

Why not narrow-phase only the pairs that pass (cheaper than the AABB tree when a few do): coal's GJK / EPA warm
start (Pinocchio enables the cached guess per pair) depends on which earlier steps called the pair. Calling other
pairs than the AABB tree's candidates changed contacts at round-off (1e-18 m in the quasistatic iiwa lift, whose
SCIP MIQP then needed 10x the branch-and-bound nodes in one step and hit its time limit) and, on the Allegro's
curved mug hull, an EPA normal by ~1e-3. Skipping coal only in steps where nothing is within the margin keeps every
step with contacts on the same calls as before. The exceptions, filtered pair by pair every step
(``PairBounds.within``): the pairs with a halfspace or a plane, which coal tests analytically from the shapes'
supports (no GJK, no history), and the pairs the query computes in its own kernels (contact_kernels.py).
"""

from __future__ import annotations

import coal
import numpy as np
import pinocchio as pin

from .pair_bound_kernels import (CAPSULE, FREE_FLYER, HALFSPACE, PRISMATIC, REVOLUTE, REVOLUTE_UNBOUNDED,
                                 UNBOUNDED, pairs_within, pairs_within_list)

# m: a pair is kept when its distance bound is <= margin + BOUND_SLACK (round-off of the kernel's kinematics
# against Pinocchio's, and of coal's distances, are ~1e-15 m; 0.1 mm leaves no doubt)
BOUND_SLACK = 1e-4

_REVOLUTE = {"JointModelRX": (1, 0, 0), "JointModelRY": (0, 1, 0), "JointModelRZ": (0, 0, 1)}
_REVOLUTE_UNBOUNDED = {"JointModelRUBX": (1, 0, 0), "JointModelRUBY": (0, 1, 0), "JointModelRUBZ": (0, 0, 1)}
_PRISMATIC = {"JointModelPX": (1, 0, 0), "JointModelPY": (0, 1, 0), "JointModelPZ": (0, 0, 1)}


class PairBounds:
    """The constant inputs of ``pairs_within`` for one model and pair list, and the test itself."""

    def __init__(self, joint_int, joint_float, geometry_int, geometry_float, pairs, margin):
        self.joint_int = joint_int              # (njoints, 3) int: kind, parent, idx_q
        self.joint_float = joint_float          # (njoints, 15): axis, jointPlacement rotation (row-major), translation
        self.geometry_int = geometry_int        # (ngeoms, 2) int: kind, parent joint
        self.geometry_float = geometry_float    # (ngeoms, 9): centre, unit axis, h, r, s (joint frame) |
        #                                                      halfspace normal, offset (joint frame)
        self.pairs = pairs                      # (P, 2) int geometry indices
        self.limit = float(margin) + BOUND_SLACK
        self.placement = np.zeros((len(joint_int), 12))      # scratch: oMi rotation (9) + translation (3)
        self.world = np.zeros((len(geometry_int), 9))        # scratch: the bounds in the world frame
        self.local = np.zeros((2, 12))                       # scratch: a joint's motion and local placement
        self.passing = np.zeros(len(self.pairs), dtype=np.int64)   # within()'s output

    @classmethod
    def make(cls, pin_model: pin.Model, geometry_model: pin.GeometryModel, pairs: np.ndarray,
             margin: float) -> "PairBounds | None":
        """The test of ``pairs`` (P, 2) at ``margin`` (m); None when a joint kind is not supported by the kernel's
        kinematics or a geometry has its collisions disabled."""
        nj = pin_model.njoints
        joint_int = np.zeros((nj, 3), dtype=np.int64)
        joint_float = np.zeros((nj, 15))
        joint_float[0, 3:12] = np.eye(3).reshape(-1)
        for j in range(1, nj):
            joint = pin_model.joints[j]
            name = joint.shortname()
            if name in _REVOLUTE:
                kind, axis = REVOLUTE, _REVOLUTE[name]
            elif name in _REVOLUTE_UNBOUNDED:
                kind, axis = REVOLUTE_UNBOUNDED, _REVOLUTE_UNBOUNDED[name]
            elif name in _PRISMATIC:
                kind, axis = PRISMATIC, _PRISMATIC[name]
            elif name == "JointModelRevoluteUnaligned":
                kind, axis = REVOLUTE, joint.extract().axis
            elif name == "JointModelPrismaticUnaligned":
                kind, axis = PRISMATIC, joint.extract().axis
            elif name == "JointModelFreeFlyer":
                kind, axis = FREE_FLYER, (0, 0, 0)
            else:
                return None
            placement = pin_model.jointPlacements[j]
            joint_int[j] = kind, pin_model.parents[j], joint.idx_q
            joint_float[j, 0:3] = axis
            joint_float[j, 3:12] = placement.rotation.reshape(-1)
            joint_float[j, 12:15] = placement.translation
        objects = geometry_model.geometryObjects
        if any(obj.disableCollision for obj in objects):
            return None
        geometry_int = np.zeros((len(objects), 2), dtype=np.int64)
        geometry_float = np.zeros((len(objects), 9))
        for g, obj in enumerate(objects):
            kind, row = _geometry_bound(obj)
            geometry_int[g] = kind, obj.parentJoint
            geometry_float[g] = row
        return cls(joint_int, joint_float, geometry_int, geometry_float,
                   np.ascontiguousarray(pairs, dtype=np.int64).reshape(-1, 2), margin)

    def any_within(self, q: np.ndarray) -> bool:
        """True when some pair may be within the margin at configuration q; False: none is (coal would find no
        contact)."""
        return pairs_within(q, self.joint_int, self.joint_float, self.geometry_int, self.geometry_float,
                            self.pairs, self.limit, self.placement, self.world, self.local)

    def within(self, q: np.ndarray) -> np.ndarray:
        """The indices (into this test's pairs, ascending) of the pairs that may be within the margin at
        configuration q (a view, valid until the next call)."""
        return self.within_split(q, 0)[0]

    def within_split(self, q: np.ndarray, split: int) -> tuple[np.ndarray, int]:
        """``within`` of two groups of pairs in one call (the joint placements computed once): the indices (a view,
        ascending) and how many of them are < ``split``, the first group's."""
        n, n_first = pairs_within_list(q, self.joint_int, self.joint_float, self.geometry_int, self.geometry_float,
                                       self.pairs, self.limit, self.placement, self.world, self.local, self.passing,
                                       split)
        return self.passing[:n], n_first


def _geometry_bound(obj) -> tuple[int, np.ndarray]:
    """(kind, row of geometry_float) of one GeometryObject, in its parent joint's frame."""
    shape = obj.geometry
    R, p = obj.placement.rotation, obj.placement.translation
    row = np.zeros(9)
    if isinstance(shape, coal.Halfspace):
        n = R @ np.asarray(shape.n, dtype=float)                 # n_j . x <= d + n_j . p in the joint frame
        row[0:3], row[3] = n, float(shape.d) + n @ p
        return HALFSPACE, row
    axis, h, r, s = np.array([0.0, 0.0, 1.0]), 0.0, 0.0, 0.0
    centre = np.zeros(3)
    if isinstance(shape, coal.Sphere):
        s = shape.radius
    elif isinstance(shape, coal.Capsule):
        h, s = shape.halfLength, shape.radius
    elif isinstance(shape, (coal.Cylinder, coal.Cone)):
        h, r = shape.halfLength, shape.radius
    elif isinstance(shape, coal.Box):
        half = np.asarray(shape.halfSide, dtype=float)
        k = int(np.argmax(half))
        axis = np.eye(3)[k]
        h = half[k]
        r = float(np.linalg.norm(np.delete(half, k)))
    elif isinstance(shape, coal.Ellipsoid):
        s = float(np.max(shape.radii))
    elif isinstance(shape, coal.Plane):
        return UNBOUNDED, row
    else:
        shape.computeLocalAABB()
        s = float(shape.aabb_radius)
        centre = np.asarray(shape.aabb_center, dtype=float)
        if not (np.isfinite(s) and s >= 0.0 and np.isfinite(centre).all()):
            return UNBOUNDED, row
    s += max(float(shape.getSweptSphereRadius()), 0.0)
    row[0:3] = R @ centre + p
    row[3:6] = R @ axis
    row[6], row[7], row[8] = h, r, s
    return CAPSULE, row
