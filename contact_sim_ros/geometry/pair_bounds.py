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
step with contacts on the same calls as before.
"""

from __future__ import annotations

import math

import coal
import numpy as np
import pinocchio as pin

from ..jit import njit

# m: a pair is kept when its distance bound is <= margin + BOUND_SLACK (round-off of the kernel's kinematics
# against Pinocchio's, and of coal's distances, are ~1e-15 m; 0.1 mm leaves no doubt)
BOUND_SLACK = 1e-4

# joint kinds (column 0 of joint_int)
REVOLUTE, REVOLUTE_UNBOUNDED, PRISMATIC, FREE_FLYER = 0, 1, 2, 3
_REVOLUTE = {"JointModelRX": (1, 0, 0), "JointModelRY": (0, 1, 0), "JointModelRZ": (0, 0, 1)}
_REVOLUTE_UNBOUNDED = {"JointModelRUBX": (1, 0, 0), "JointModelRUBY": (0, 1, 0), "JointModelRUBZ": (0, 0, 1)}
_PRISMATIC = {"JointModelPX": (1, 0, 0), "JointModelPY": (0, 1, 0), "JointModelPZ": (0, 0, 1)}
# geometry kinds (column 0 of geometry_int)
CAPSULE, HALFSPACE, UNBOUNDED = 0, 1, 2


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


@njit(cache=True)
def _joint_placements(q, joint_int, joint_float, placement, local):
    """placement[j] = oMi[j] (rotation row-major (9), translation (3)) of every joint at q (joint 0: identity);
    local (2, 12) scratch."""
    placement[0, :] = 0.0
    placement[0, 0] = placement[0, 4] = placement[0, 8] = 1.0
    L = local[0, 0:9]        # the joint's own motion M_joint(q): rotation, translation
    t = local[0, 9:12]
    B = local[1, 0:9]        # jointPlacement * M_joint
    b = local[1, 9:12]
    for j in range(1, joint_int.shape[0]):
        kind, parent, iq = joint_int[j, 0], joint_int[j, 1], joint_int[j, 2]
        u0, u1, u2 = joint_float[j, 0], joint_float[j, 1], joint_float[j, 2]
        t[0] = t[1] = t[2] = 0.0
        if kind == REVOLUTE or kind == REVOLUTE_UNBOUNDED:      # rotation about u: c I + s [u]x + (1 - c) u u^T
            if kind == REVOLUTE:
                c, s = math.cos(q[iq]), math.sin(q[iq])
            else:
                c, s = q[iq], q[iq + 1]
            d = 1.0 - c
            L[0], L[1], L[2] = c + d * u0 * u0, d * u0 * u1 - s * u2, d * u0 * u2 + s * u1
            L[3], L[4], L[5] = d * u1 * u0 + s * u2, c + d * u1 * u1, d * u1 * u2 - s * u0
            L[6], L[7], L[8] = d * u2 * u0 - s * u1, d * u2 * u1 + s * u0, c + d * u2 * u2
        elif kind == PRISMATIC:             # translation along u
            L[:] = 0.0
            L[0] = L[4] = L[8] = 1.0
            t[0], t[1], t[2] = u0 * q[iq], u1 * q[iq], u2 * q[iq]
        else:                               # free flyer: translation, quaternion (x, y, z, w)
            t[0], t[1], t[2] = q[iq], q[iq + 1], q[iq + 2]
            x, y, z, w = q[iq + 3], q[iq + 4], q[iq + 5], q[iq + 6]
            L[0], L[1], L[2] = 1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - z * w), 2.0 * (x * z + y * w)
            L[3], L[4], L[5] = 2.0 * (x * y + z * w), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - x * w)
            L[6], L[7], L[8] = 2.0 * (x * z - y * w), 2.0 * (y * z + x * w), 1.0 - 2.0 * (x * x + y * y)
        # B = jointPlacement * M_joint
        for r in range(3):
            for k in range(3):
                B[3 * r + k] = (joint_float[j, 3 + 3 * r] * L[k] + joint_float[j, 4 + 3 * r] * L[3 + k]
                                + joint_float[j, 5 + 3 * r] * L[6 + k])
            b[r] = (joint_float[j, 3 + 3 * r] * t[0] + joint_float[j, 4 + 3 * r] * t[1]
                    + joint_float[j, 5 + 3 * r] * t[2] + joint_float[j, 12 + r])
        # oMi[j] = oMi[parent] * B
        for r in range(3):
            for k in range(3):
                placement[j, 3 * r + k] = (placement[parent, 3 * r] * B[k] + placement[parent, 3 * r + 1] * B[3 + k]
                                           + placement[parent, 3 * r + 2] * B[6 + k])
            placement[j, 9 + r] = (placement[parent, 3 * r] * b[0] + placement[parent, 3 * r + 1] * b[1]
                                   + placement[parent, 3 * r + 2] * b[2] + placement[parent, 9 + r])


@njit(cache=True)
def _segment_distance(p0, p1, p2, d0, d1, d2, e0, e1, e2, f0, f1, f2):
    """Distance (m) between the segments p + s d (s in [0, 1]) and e + t f (t in [0, 1]) (Ericson, Real-Time
    Collision Detection 5.1.9)."""
    r0, r1, r2 = p0 - e0, p1 - e1, p2 - e2
    a = d0 * d0 + d1 * d1 + d2 * d2
    e = f0 * f0 + f1 * f1 + f2 * f2
    f = f0 * r0 + f1 * r1 + f2 * r2
    eps = 1e-24
    if a <= eps and e <= eps:
        s = t = 0.0
    elif a <= eps:
        s = 0.0
        t = min(max(f / e, 0.0), 1.0)
    else:
        c = d0 * r0 + d1 * r1 + d2 * r2
        if e <= eps:
            t = 0.0
            s = min(max(-c / a, 0.0), 1.0)
        else:
            bb = d0 * f0 + d1 * f1 + d2 * f2
            denom = a * e - bb * bb
            s = min(max((bb * f - c * e) / denom, 0.0), 1.0) if denom > 0.0 else 0.0
            t = (bb * s + f) / e
            if t < 0.0:
                t = 0.0
                s = min(max(-c / a, 0.0), 1.0)
            elif t > 1.0:
                t = 1.0
                s = min(max((bb - c) / a, 0.0), 1.0)
    x0 = r0 + s * d0 - t * f0
    x1 = r1 + s * d1 - t * f1
    x2 = r2 + s * d2 - t * f2
    return math.sqrt(x0 * x0 + x1 * x1 + x2 * x2)


@njit(cache=True)
def pairs_within(q, joint_int, joint_float, geometry_int, geometry_float, pairs, limit, placement, world, local):
    """True when some pair's distance lower bound (m) is <= ``limit`` (see the module docstring). Scratch: ``placement`` (njoints, 12) receives the joint placements at q, ``world`` (ngeoms, 8) the bounds in
    the world frame, ``local`` (2, 12)."""
    _joint_placements(q, joint_int, joint_float, placement, local)
    ng = geometry_int.shape[0]
    for g in range(ng):
        j = geometry_int[g, 1]
        P = placement[j]
        x0, x1, x2 = geometry_float[g, 0], geometry_float[g, 1], geometry_float[g, 2]
        if geometry_int[g, 0] == HALFSPACE:      # world normal, offset d + n_w . p
            for r in range(3):
                world[g, r] = P[3 * r] * x0 + P[3 * r + 1] * x1 + P[3 * r + 2] * x2
            world[g, 3] = geometry_float[g, 3] + world[g, 0] * P[9] + world[g, 1] * P[10] + world[g, 2] * P[11]
        elif geometry_int[g, 0] == CAPSULE:      # world centre and axis
            a0, a1, a2 = geometry_float[g, 3], geometry_float[g, 4], geometry_float[g, 5]
            for r in range(3):
                world[g, r] = P[3 * r] * x0 + P[3 * r + 1] * x1 + P[3 * r + 2] * x2 + P[9 + r]
                world[g, 3 + r] = P[3 * r] * a0 + P[3 * r + 1] * a1 + P[3 * r + 2] * a2
            world[g, 6] = geometry_float[g, 6]
            world[g, 7] = geometry_float[g, 7]
            world[g, 8] = geometry_float[g, 8]
    for k in range(pairs.shape[0]):
        ga, gb = pairs[k, 0], pairs[k, 1]
        ka, kb = geometry_int[ga, 0], geometry_int[gb, 0]
        if ka == CAPSULE and kb == CAPSULE:
            A, B = world[ga], world[gb]
            ha, hb = A[6], B[6]
            bound = _segment_distance(A[0] - ha * A[3], A[1] - ha * A[4], A[2] - ha * A[5],
                                      2.0 * ha * A[3], 2.0 * ha * A[4], 2.0 * ha * A[5],
                                      B[0] - hb * B[3], B[1] - hb * B[4], B[2] - hb * B[5],
                                      2.0 * hb * B[3], 2.0 * hb * B[4], 2.0 * hb * B[5]) \
                - (A[7] + A[8]) - (B[7] + B[8])
            if bound <= limit:           # the slabs between the cylinders' caps
                cos = abs(A[3] * B[3] + A[4] * B[4] + A[5] * B[5])
                sin = math.sqrt(max(1.0 - cos * cos, 0.0))
                d0, d1, d2 = B[0] - A[0], B[1] - A[1], B[2] - A[2]
                gap = abs(d0 * A[3] + d1 * A[4] + d2 * A[5]) - (ha + A[8]) - (hb * cos + B[7] * sin + B[8])
                bound = max(bound, gap)
                gap = abs(d0 * B[3] + d1 * B[4] + d2 * B[5]) - (hb + B[8]) - (ha * cos + A[7] * sin + A[8])
                bound = max(bound, gap)
        elif (ka == CAPSULE and kb == HALFSPACE) or (ka == HALFSPACE and kb == CAPSULE):
            c, h = (ga, gb) if ka == CAPSULE else (gb, ga)
            n0, n1, n2 = world[h, 0], world[h, 1], world[h, 2]
            centre = n0 * world[c, 0] + n1 * world[c, 1] + n2 * world[c, 2] - world[h, 3]
            cos = abs(n0 * world[c, 3] + n1 * world[c, 4] + n2 * world[c, 5])
            sin = math.sqrt(max(1.0 - cos * cos, 0.0))
            bound = centre - cos * world[c, 6] - sin * world[c, 7] - world[c, 8]
        else:                            # halfspace-halfspace, planes, unbounded shapes: no bound
            bound = -np.inf
        if not bound > limit:            # (a NaN bound keeps the pair)
            return True
    return False
