"""The compiled bounding-volume test of the contact query's pairs (``pair_bounds.py``): the joint placements from
q and the capsule-capsule / capsule-halfspace distance bounds. Only the jit decorator, numpy and math here (the
kernel modules' layer)."""

from __future__ import annotations

import math

import numpy as np

from ..jit import njit

# joint kinds (column 0 of joint_int)
REVOLUTE, REVOLUTE_UNBOUNDED, PRISMATIC, FREE_FLYER = 0, 1, 2, 3
# geometry kinds (column 0 of geometry_int)
CAPSULE, HALFSPACE, UNBOUNDED = 0, 1, 2


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
def _world_bounds(q, joint_int, joint_float, geometry_int, geometry_float, placement, world, local):
    """The joint placements at q into ``placement`` and every geometry's bound in the world frame into ``world``."""
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


@njit(cache=True)
def _pair_bound(k, pairs, geometry_int, world, limit):
    """A lower bound (m) of pair k's distance from the world bounds (-inf: no bound); ``limit``: the bound
    above which the pair is rejected (the slabs are only tested when the capsules pass)."""
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
    return bound


@njit(cache=True)
def pairs_within(q, joint_int, joint_float, geometry_int, geometry_float, pairs, limit, placement, world, local):
    """True when some pair's distance lower bound (m) is <= ``limit`` (see the module docstring). Scratch:
    ``placement`` (njoints, 12) receives the joint placements at q, ``world`` (ngeoms, 9) the bounds in the world
    frame, ``local`` (2, 12)."""
    _world_bounds(q, joint_int, joint_float, geometry_int, geometry_float, placement, world, local)
    for k in range(pairs.shape[0]):
        bound = _pair_bound(k, pairs, geometry_int, world, limit)
        if not bound > limit:            # (a NaN bound keeps the pair)
            return True
    return False


@njit(cache=True)
def pairs_within_list(q, joint_int, joint_float, geometry_int, geometry_float, pairs, limit, placement, world,
                      local, out, split):
    """``pairs_within``, every pair: out[:n] the indices (ascending) of the pairs whose bound is <= ``limit``;
    returns n and how many of them are < ``split`` (the first of two groups of pairs tested in one call)."""
    _world_bounds(q, joint_int, joint_float, geometry_int, geometry_float, placement, world, local)
    n = 0
    n_first = 0
    for k in range(pairs.shape[0]):
        bound = _pair_bound(k, pairs, geometry_int, world, limit)
        if not bound > limit:
            out[n] = k
            n += 1
            if k < split:
                n_first += 1
    return n, n_first
