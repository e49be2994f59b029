"""Compiled (numba) kernel of the contact query's last stage: raw coal contacts -> ContactSet buffers.

The readable reference is the numpy code of ``ContactQuery`` with ``kernel="numpy"`` (``contact_frames``,
``_jacobian_vectorized``): this kernel does the same per contact point, loop by loop, in one call, because with
2-200 contact points the numpy path makes ~40 calls of 1-3 us on tiny arrays per step. Both paths give the
same contact set to round-off (``test/test_contact_query.py::test_numba_kernel_matches_numpy_path``).

Per raw contact i (witness points a_i on A, b_i on B, unit normal n_i from A to B, pair k_i):

* signed distance phi = (b - a).n (m); rows with phi > margin are dropped (the kept rows are compacted);
* point p = (a + b) / 2 (m, world);
* contact frame R = [t1 t2 n] (``contact_frames``: t1 = n x e / |n x e| with e the world axis least aligned
  with n, t2 = n x t1);
* Jacobian rows R^T (J_B(p) - J_A(p)), the point Jacobian of joint X at p being J_lin - p x J_ang with the
  columns of ``pin_data.J`` (world frame, spatial velocity at the world origin) that support X.

``pin_data.J`` has one column per *extended* velocity (``model.nvExtended``: a mimic joint has its own column,
already scaled by its multiplier); ``joint_columns`` lists per joint the columns that move its body
(``joint_columns_packed`` of ``contact_query.joint_column_support``'s 0/1 matrix), and ``column_dof``
(nvExtended,) maps each column to its generalized velocity (a mimic joint's column to its primary's), so mimic
joints are summed into the primary's column, as ``pin.getJointJacobian`` does.

Compiled with ``cache=True``: the first call in a fresh checkout compiles (a few seconds, once); later
processes load the machine code from ``__pycache__``.
"""

from __future__ import annotations

import math

import numpy as np

from ..jit import njit


@njit(cache=True, inline="always")
def contact_frame(n0, n1, n2, out):
    """out (3, 3) = [t1 t2 n] for the unit normal (n0, n1, n2), exactly as ``contact_query.contact_frames``."""
    a0, a1, a2 = abs(n0), abs(n1), abs(n2)
    if a0 <= a1 and a0 <= a2:                       # argmin |n_k| (first of equal values, as np.argmin)
        nk = n0
        inv = 1.0 / math.sqrt(1.0 - nk * nk)
        t10, t11, t12 = 0.0 * n0 * inv, n2 * inv, -n1 * inv        # n x e_x = (0, n_z, -n_y)
        t20, t21, t22 = (n0 * nk - 1.0) * inv, (n1 * nk - 0.0) * inv, (n2 * nk - 0.0) * inv
    elif a1 <= a2:
        nk = n1
        inv = 1.0 / math.sqrt(1.0 - nk * nk)
        t10, t11, t12 = -n2 * inv, 0.0 * n1 * inv, n0 * inv         # n x e_y = (-n_z, 0, n_x)
        t20, t21, t22 = (n0 * nk - 0.0) * inv, (n1 * nk - 1.0) * inv, (n2 * nk - 0.0) * inv
    else:
        nk = n2
        inv = 1.0 / math.sqrt(1.0 - nk * nk)
        t10, t11, t12 = n1 * inv, -n0 * inv, 0.0 * n2 * inv         # n x e_z = (n_y, -n_x, 0)
        t20, t21, t22 = (n0 * nk - 0.0) * inv, (n1 * nk - 0.0) * inv, (n2 * nk - 1.0) * inv
    out[0, 0], out[1, 0], out[2, 0] = t10, t11, t12
    out[0, 1], out[1, 1], out[2, 1] = t20, t21, t22
    out[0, 2], out[1, 2], out[2, 2] = n0, n1, n2


@njit(cache=True, inline="always")
def _next_relative_column(joint_columns, ia, ea, ib, eb):
    """One step of the merge of joint A's and joint B's ascending column lists (``finish_contacts``): returns (c, w,
    ia, ib), the next column that moves exactly one of the two bodies and its sign w (-1: A's, +1: B's), or c = -1
    when both lists are done; a column moving both (no relative velocity) is skipped."""
    while ia < ea or ib < eb:
        if ib >= eb or (ia < ea and joint_columns[ia] < joint_columns[ib]):
            return joint_columns[ia], -1.0, ia + 1, ib
        if ia >= ea or joint_columns[ib] < joint_columns[ia]:
            return joint_columns[ib], 1.0, ia, ib + 1
        ia += 1                             # moves both: no relative velocity
        ib += 1
    return -1, 0.0, ia, ib


@njit(cache=True, inline="always")
def _insert_column(columns, n, k, d):
    """Velocity d into contact n's ascending column list ``columns[n, :k]`` unless it is there; returns its new
    length (``finish_contacts``)."""
    at = k
    while at > 0 and columns[n, at - 1] > d:
        at -= 1
    if at > 0 and columns[n, at - 1] == d:
        return k
    for e in range(k, at, -1):
        columns[n, e] = columns[n, e - 1]
    columns[n, at] = d
    return k + 1


@njit(cache=True, inline="always")
def append_raw_rows(pair, wit_a, wit_b, normal, at, src_pair, src_a, src_b, src_normal, count):
    """Copies ``count`` raw contact rows (pair index, witness points A and B, normal: ``finish_contacts``' inputs)
    from the ``src_*`` buffers into rows ``at:at + count`` of the merged buffers."""
    for i in range(count):
        pair[at + i] = src_pair[i]
        for k in range(3):
            wit_a[at + i, k] = src_a[i, k]
            wit_b[at + i, k] = src_b[i, k]
            normal[at + i, k] = src_normal[i, k]


@njit(cache=True, inline="always")
def finish_contacts(pair_of, wit_a, wit_b, normal_raw, margin, pair_ids, pair_material, joint_jacobian,
                    joint_columns, column_dof, ids, point, normal, phi, rotation, jacobian, material, rel, columns):
    """Compacts the raw contacts with phi <= margin into the output buffers; returns their number n.

    Inputs: pair_of (R,) int pair index; wit_a, wit_b, normal_raw (R, 3) m / unit; margin m; pair_ids (4, P) int
    rows (geometry A, B, joint A, B); pair_material (4, P) rows (stiffness N/m, dissipation s/m, friction,
    restitution); joint_jacobian (6, nvExtended) = pin_data.J; joint_columns the columns of pin_data.J that move
    each joint's body, ascending (``joint_columns_packed``: ptr (njoints + 1) then the columns); column_dof
    (nvExtended,) int. Outputs (capacity >= R rows): ids (4, C) int, point, normal (C, 3), phi (C,), rotation
    (C, 3, 3), jacobian (3C, nv), material (4, C); rel (3, nv) scratch. A contact's Jacobian rows are zeroed, then
    written on the velocities of the columns that move B but not A (+) or A but not B (-) only (a free body: 6 of
    the clutter's 240), summed in ascending column order as over all columns (without mimic joints one sweep
    over those columns; with them three, through rel). columns (C, kmax) int64: those
    velocities of each contact, ascending, then -1 (``ContactSet.jacobian_columns``; kmax >= the most of any pair,
    ``jacobian_column_width``). The buffers persist between calls: on entry, row block n of ``jacobian`` must be zero
    outside the columns ``columns[n]`` lists (true for zeroed buffers with columns all -1, and after every call:
    nothing else may write them), so that only those are zeroed before the new rows are written.
    """
    # one column of pin_data.J per velocity (no mimic joint: nvExtended = nv): a velocity's rel is its one
    # column's term, 0 + w (J_lin - p x J_ang), the same arithmetic as the three sweeps below without storing rel
    one_to_one = column_dof.shape[0] == jacobian.shape[1]
    n = 0
    for i in range(pair_of.shape[0]):
        n0, n1, n2 = normal_raw[i, 0], normal_raw[i, 1], normal_raw[i, 2]
        gap = ((wit_b[i, 0] - wit_a[i, 0]) * n0 + (wit_b[i, 1] - wit_a[i, 1]) * n1) \
            + (wit_b[i, 2] - wit_a[i, 2]) * n2
        if not gap <= margin:
            continue
        k = pair_of[i]
        for r in range(4):
            ids[r, n] = pair_ids[r, k]
            material[r, n] = pair_material[r, k]
        p0 = (wit_a[i, 0] + wit_b[i, 0]) * 0.5
        p1 = (wit_a[i, 1] + wit_b[i, 1]) * 0.5
        p2 = (wit_a[i, 2] + wit_b[i, 2]) * 0.5
        point[n, 0], point[n, 1], point[n, 2] = p0, p1, p2
        normal[n, 0], normal[n, 1], normal[n, 2] = n0, n1, n2
        phi[n] = gap
        R = rotation[n]
        contact_frame(n0, n1, n2, R)
        # the rows' previous entries are zero outside the columns recorded for this row by the previous call
        # (the buffers start zero with no column recorded): only those are zeroed, not all nv
        for e in range(columns.shape[1]):
            d = columns[n, e]
            if d < 0:
                break
            jacobian[3 * n, d] = 0.0
            jacobian[3 * n + 1, d] = 0.0
            jacobian[3 * n + 2, d] = 0.0
        # relative point Jacobian of B w.r.t. A at p (world) on the moved velocities, then in the contact frame
        ja, jb = ids[2, n], ids[3, n]
        k = 0                               # velocities recorded in columns[n]
        if one_to_one:                      # one sweep: each velocity's rel (0 + its one term) kept in registers
            ia, ea = joint_columns[ja], joint_columns[ja + 1]
            ib, eb = joint_columns[jb], joint_columns[jb + 1]
            while True:
                c, w, ia, ib = _next_relative_column(joint_columns, ia, ea, ib, eb)
                if c < 0:
                    break
                d = column_dof[c]
                wx, wy, wz = joint_jacobian[3, c], joint_jacobian[4, c], joint_jacobian[5, c]
                r0 = 0.0 + w * (joint_jacobian[0, c] - (p1 * wz - p2 * wy))
                r1 = 0.0 + w * (joint_jacobian[1, c] - (p2 * wx - p0 * wz))
                r2 = 0.0 + w * (joint_jacobian[2, c] - (p0 * wy - p1 * wx))
                for t in range(3):
                    jacobian[3 * n + t, d] = R[0, t] * r0 + R[1, t] * r1 + R[2, t] * r2
                k = _insert_column(columns, n, k, d)
        for sweep in range(0 if one_to_one else 3):     # 0: zero rel there, 1: accumulate, 2: rotate into the rows
            ia, ea = joint_columns[ja], joint_columns[ja + 1]
            ib, eb = joint_columns[jb], joint_columns[jb + 1]
            while True:                     # merge of the two ascending column lists
                c, w, ia, ib = _next_relative_column(joint_columns, ia, ea, ib, eb)
                if c < 0:
                    break
                d = column_dof[c]
                if sweep == 0:
                    rel[0, d] = 0.0
                    rel[1, d] = 0.0
                    rel[2, d] = 0.0
                elif sweep == 1:
                    wx, wy, wz = joint_jacobian[3, c], joint_jacobian[4, c], joint_jacobian[5, c]
                    rel[0, d] += w * (joint_jacobian[0, c] - (p1 * wz - p2 * wy))
                    rel[1, d] += w * (joint_jacobian[1, c] - (p2 * wx - p0 * wz))
                    rel[2, d] += w * (joint_jacobian[2, c] - (p0 * wy - p1 * wx))
                else:
                    for t in range(3):
                        jacobian[3 * n + t, d] = R[0, t] * rel[0, d] + R[1, t] * rel[1, d] + R[2, t] * rel[2, d]
                    k = _insert_column(columns, n, k, d)      # a mimic joint's velocity comes once per column
        for e in range(k, columns.shape[1]):
            columns[n, e] = -1
        n += 1
    return n


def jacobian_column_width(joint_columns, column_dof, joint_pairs) -> int:
    """The most generalized velocities one contact's Jacobian rows can use (``finish_contacts``' columns width): over
    the (joint A, joint B) rows of ``joint_pairs``, the velocities of the columns that move exactly one of the two
    (at least 1)."""
    widest = 1
    for ja, jb in {(int(a), int(b)) for a, b in joint_pairs}:
        cols_a = set(joint_columns[joint_columns[ja]:joint_columns[ja + 1]].tolist())
        cols_b = set(joint_columns[joint_columns[jb]:joint_columns[jb + 1]].tolist())
        widest = max(widest, len({int(column_dof[c]) for c in cols_a ^ cols_b}))
    return widest


def joint_columns_packed(support):
    """``finish_contacts``' joint_columns from the (njoints, nvExtended) 0/1 ``support`` of
    ``contact_query.joint_column_support``: int64 [ptr (njoints + 1) | columns], joint j's columns (ascending)
    at ptr[j]:ptr[j + 1] (offsets into the whole array)."""
    rows = [np.flatnonzero(row > 0.0) for row in support]
    ptr = np.zeros(len(rows) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(r) for r in rows])
    ptr += len(rows) + 1
    return np.concatenate([ptr] + [r.astype(np.int64) for r in rows]).astype(np.int64)


# ---------------------------------------------------------------------------------------------------------
# Per-point depths of contact patches: the line casts of ``line_intersection.LineCaster`` one line at a time
# (same shape types, same equations, same tolerances; see that module for the geometry).

_INF = math.inf
_PARALLEL = 1e-12
NONE, BOX, SPHERE, CYLINDER, CAPSULE, ELLIPSOID, HALFSPACE, CONVEX = range(8)   # = line_intersection's


@njit(cache=True)
def _quadric(a, b, c, tol):
    """Roots (lo, hi) of a s^2 + 2 b s + c = 0 (a > 0); (+inf, -inf) where none (grazing within tol counts)."""
    disc = b * b - a * c
    if disc < -tol * a:
        return _INF, -_INF
    root = math.sqrt(max(disc, 0.0))
    return (-b - root) / a, (-b + root) / a


@njit(cache=True)
def _sphere(px, py, pz, ux, uy, uz, radius, tol):
    return _quadric(ux * ux + uy * uy + uz * uz, px * ux + py * uy + pz * uz,
                    (px * px + py * py + pz * pz) - radius ** 2, tol * radius)


@njit(cache=True)
def _slab(p, u, half, tol):
    """Interval of the line p + s u in the slab |x| <= half; (lo, hi, outside_and_parallel)."""
    if abs(u) < _PARALLEL:
        return -_INF, _INF, abs(p) > half + tol
    inv = 1.0 / u
    t1 = (-half - p) * inv
    t2 = (half - p) * inv
    return min(t1, t2), max(t1, t2), False


@njit(cache=True)
def _cylinder(px, py, pz, ux, uy, uz, radius, half_length, tol):
    a = ux * ux + uy * uy
    c = px * px + py * py - radius ** 2
    if a < _PARALLEL:                               # line along the axis: inside the disc or not
        if c <= 2.0 * radius * tol:
            s_in, s_out = -_INF, _INF
        else:
            s_in, s_out = _INF, -_INF
    else:
        s_in, s_out = _quadric(a, px * ux + py * uy, c, tol * radius)
    lo, hi, outside = _slab(pz, uz, half_length, tol)
    s_in = max(s_in, lo)
    s_out = min(s_out, hi)
    if s_in > s_out + tol or outside:
        return _INF, -_INF
    return s_in, s_out


@njit(cache=True)
def line_interval(kind, g, px, py, pz, ux, uy, uz, half, radius, half_length, plane_normal, plane_offset,
                  face_start, face_normal, face_offset, tol):
    """(s_in, s_out) of the line p + s u (geometry g's frame) in geometry g of type ``kind``: NaN for NONE,
    (+inf, -inf) for a miss (see ``line_intersection``)."""
    if kind == BOX:
        s_in, s_out, outside = -_INF, _INF, False
        for k, pk, uk in ((0, px, ux), (1, py, uy), (2, pz, uz)):
            lo, hi, out_k = _slab(pk, uk, half[g, k], tol)
            s_in = max(s_in, lo)
            s_out = min(s_out, hi)
            outside = outside or out_k
        if s_in > s_out + tol or outside:
            return _INF, -_INF
        return s_in, s_out
    if kind == SPHERE:
        return _sphere(px, py, pz, ux, uy, uz, radius[g], tol)
    if kind == CYLINDER:
        return _cylinder(px, py, pz, ux, uy, uz, radius[g], half_length[g], tol)
    if kind == CAPSULE:                              # hull of the cylinder's and the two end spheres' intervals
        s_in, s_out = _cylinder(px, py, pz, ux, uy, uz, radius[g], half_length[g], tol)
        h = half_length[g]
        for z in (h, -h):
            a_in, a_out = _sphere(px, py, pz - z, ux, uy, uz, radius[g], tol)
            s_in = min(s_in, a_in)
            s_out = max(s_out, a_out)
        return s_in, s_out
    if kind == ELLIPSOID:
        rx, ry, rz = half[g, 0], half[g, 1], half[g, 2]
        sx, sy, sz, vx, vy, vz = px / rx, py / ry, pz / rz, ux / rx, uy / ry, uz / rz
        return _quadric(vx * vx + vy * vy + vz * vz, sx * vx + sy * vy + sz * vz,
                        (sx * sx + sy * sy + sz * sz) - 1.0, tol / min(rx, min(ry, rz)))
    if kind == HALFSPACE:
        nx, ny, nz = plane_normal[g, 0], plane_normal[g, 1], plane_normal[g, 2]
        rate = nx * ux + ny * uy + nz * uz
        gap = plane_offset[g] - (nx * px + ny * py + nz * pz)
        if abs(rate) <= _PARALLEL:
            return (_INF, -_INF) if gap < -tol else (-_INF, _INF)
        s = gap / rate
        return (s, _INF) if rate < -_PARALLEL else ((-_INF, s) if rate > _PARALLEL else (-_INF, _INF))
    if kind == CONVEX:                               # polytope {x : N x <= d}, faces face_start[g]:face_start[g+1]
        s_in, s_out, outside = -_INF, _INF, False
        for f in range(face_start[g], face_start[g + 1]):
            nx, ny, nz = face_normal[f, 0], face_normal[f, 1], face_normal[f, 2]
            nu = ux * nx + uy * ny + uz * nz
            gap = face_offset[f] - (px * nx + py * ny + pz * nz)
            if nu < -_PARALLEL:
                s_in = max(s_in, gap / nu)
            elif nu > _PARALLEL:
                s_out = min(s_out, gap / nu)
            elif gap < -tol:
                outside = True
        if s_in > s_out + tol or outside:
            return _INF, -_INF
        return s_in, s_out
    return math.nan, math.nan


@njit(cache=True)
def patch_contacts(patch_pair, patch_start, mid, patch_normal, patch_depth, patch_wit_a, patch_wit_b,
                   geometry_a, geometry_b, slot_a, slot_b, placement, kinds, half, radius, half_length,
                   plane_normal, plane_offset, face_start, face_normal, face_offset, tol, deepest_tolerance,
                   min_gap, pair_out, wit_a_out, wit_b_out, normal_out):
    """Raw contact rows of the multi-point patches (``ContactQuery.update``, numpy path: ``_patch_witnesses`` and
    the lost-deepest-point check) into pair_out (R,), wit_a_out, wit_b_out, normal_out (R, 3); returns R.

    Patch j (pair patch_pair[j], unit normal patch_normal[j], coal's depth patch_depth[j] m and witness points
    patch_wit_a/b[j]) has the points mid[patch_start[j]:patch_start[j + 1]] (world, m); its geometries A and B
    are geometry_a/b[j] with world placements placement[slot_a/b[j]] (4x4 homogeneous). First every patch
    point (witnesses by line casts, as ``ContactQuery._patch_witnesses``), then coal's deepest point of each patch whose
    points are all shallower than coal's depth by more than ``deepest_tolerance`` (m). min_gap (P,) scratch."""
    r = 0
    for j in range(patch_pair.shape[0]):
        n0, n1, n2 = patch_normal[j, 0], patch_normal[j, 1], patch_normal[j, 2]
        min_gap[j] = _INF
        for i in range(patch_start[j], patch_start[j + 1]):
            for side in range(2):
                if side == 0:
                    g, H = geometry_a[j], placement[slot_a[j]]
                else:
                    g, H = geometry_b[j], placement[slot_b[j]]
                d0, d1, d2 = mid[i, 0] - H[0, 3], mid[i, 1] - H[1, 3], mid[i, 2] - H[2, 3]
                px = d0 * H[0, 0] + d1 * H[1, 0] + d2 * H[2, 0]            # R^T (p - t), R^T n
                py = d0 * H[0, 1] + d1 * H[1, 1] + d2 * H[2, 1]
                pz = d0 * H[0, 2] + d1 * H[1, 2] + d2 * H[2, 2]
                ux = n0 * H[0, 0] + n1 * H[1, 0] + n2 * H[2, 0]
                uy = n0 * H[0, 1] + n1 * H[1, 1] + n2 * H[2, 1]
                uz = n0 * H[0, 2] + n1 * H[1, 2] + n2 * H[2, 2]
                s_in, s_out = line_interval(kinds[g], g, px, py, pz, ux, uy, uz, half, radius, half_length,
                                            plane_normal, plane_offset, face_start, face_normal, face_offset, tol)
                if side == 0:
                    s = s_out if math.isfinite(s_out) else -0.5 * patch_depth[j]     # the line leaves A
                    out = wit_a_out
                else:
                    s = s_in if math.isfinite(s_in) else 0.5 * patch_depth[j]        # the line enters B
                    out = wit_b_out
                out[r, 0] = mid[i, 0] + s * n0
                out[r, 1] = mid[i, 1] + s * n1
                out[r, 2] = mid[i, 2] + s * n2
            pair_out[r] = patch_pair[j]
            normal_out[r, 0], normal_out[r, 1], normal_out[r, 2] = n0, n1, n2
            gap = ((wit_b_out[r, 0] - wit_a_out[r, 0]) * n0 + (wit_b_out[r, 1] - wit_a_out[r, 1]) * n1) \
                + (wit_b_out[r, 2] - wit_a_out[r, 2]) * n2
            min_gap[j] = min(min_gap[j], gap)
            r += 1
    for j in range(patch_pair.shape[0]):
        if min_gap[j] > patch_depth[j] + deepest_tolerance:
            pair_out[r] = patch_pair[j]
            for k in range(3):
                wit_a_out[r, k] = patch_wit_a[j, k]
                wit_b_out[r, k] = patch_wit_b[j, k]
                normal_out[r, k] = patch_normal[j, k]
            r += 1
    return r


# ---------------------------------------------------------------------------------------------------------
# Sphere-halfspace pairs analytically, without coal (issue 18): the same equations as coal 3's sphere-halfspace
# test, so that the contacts equal coal's to round-off (test_contact_query.py::
# test_analytic_sphere_halfspace_pairs_match_coal).

# Constant per-pair inputs, packed (a compiled call's dispatch costs ~0.1 us per argument): pair_int (m, 4) int
# columns (sphere's joint slot, halfspace's joint slot, 1 if the sphere is geometry A, pair index); pair_float
# (m, 20) columns 0-2 the sphere's centre in its joint frame (m), 3 its radius (m), 4-12 the halfspace geometry's
# rotation in its joint frame (row-major), 13-15 its translation (m), 16-18 its local normal, 19 its local offset (m).
SH_SPHERE_SLOT, SH_HALF_SLOT, SH_SPHERE_FIRST, SH_PAIR = range(4)
SH_INTS = 4
SH_FLOATS = 20


@njit(cache=True, inline="always")
def _sphere_centre_and_origin(joint_placement, sphere_slot, other_slot, f):
    """World sphere centre c = R_s s + t_s (s = f[0:3], m, in the sphere's joint frame) and the other geometry's
    origin t = R_o f[13:16] + t_o (m) in the world, (R, t) the joint placements ``joint_placement[slot]`` (4, 4).
    Returns (c0, c1, c2, t0, t1, t2)."""
    js = joint_placement[sphere_slot]
    s0, s1, s2 = f[0], f[1], f[2]
    c0 = js[0, 0] * s0 + js[0, 1] * s1 + js[0, 2] * s2 + js[0, 3]
    c1 = js[1, 0] * s0 + js[1, 1] * s1 + js[1, 2] * s2 + js[1, 3]
    c2 = js[2, 0] * s0 + js[2, 1] * s1 + js[2, 2] * s2 + js[2, 3]
    jo = joint_placement[other_slot]
    t0 = jo[0, 0] * f[13] + jo[0, 1] * f[14] + jo[0, 2] * f[15] + jo[0, 3]
    t1 = jo[1, 0] * f[13] + jo[1, 1] * f[14] + jo[1, 2] * f[15] + jo[1, 3]
    t2 = jo[2, 0] * f[13] + jo[2, 1] * f[14] + jo[2, 2] * f[15] + jo[2, 3]
    return c0, c1, c2, t0, t1, t2


@njit(cache=True, inline="always")
def _write_sphere_row(pair_out, raw, r, pair, sphere_first, ps0, ps1, ps2, po0, po1, po2, m0, m1, m2):
    """Row r of a sphere pair's raw contact: pair_out[r] = pair; raw[0, r] / raw[1, r] the witness points on A / B
    (ps on the sphere, po on the other geometry, m), raw[2, r] the unit normal from A to B, m being the normal
    from the sphere to the other geometry (so m when the sphere is A, -m otherwise)."""
    pair_out[r] = pair
    a, b, sign = (0, 1, 1.0) if sphere_first else (1, 0, -1.0)
    raw[a, r, 0], raw[a, r, 1], raw[a, r, 2] = ps0, ps1, ps2
    raw[b, r, 0], raw[b, r, 1], raw[b, r, 2] = po0, po1, po2
    raw[2, r, 0], raw[2, r, 1], raw[2, r, 2] = sign * m0, sign * m1, sign * m2


@njit(cache=True, inline="always")
def sphere_halfspace_raw(joint_placement, pair_int, pair_float, margin, pair_out, raw):
    """Raw contacts of the sphere-halfspace pairs within ``margin``; returns their number r (rows of the outputs).

    Per pair i (``pair_int``, ``pair_float`` above; ``joint_placement`` (J, 4, 4) the world placements of the
    joints by slot, slot 0 the world): the sphere's centre c = R_j s + t_j, radius rho; the halfspace {x: n.x <= d}
    of the geometry placed at (R_h R_l, R_h t_l + t_h) in the world, n = R_h R_l n_local, d = d_local + n.t (coal's
    ``transform(Halfspace, tf)``). Signed distance phi = n.c - d - rho (m); pairs with phi > margin give no row.
    As coal 3: witness point on the sphere p_s = c - rho n, on the halfspace p_h = p_s - phi n; the normal from A
    to B (-n when the sphere is A, +n otherwise). Row r of the outputs: pair_out[r] the pair index, raw[0, r]
    the witness point on A, raw[1, r] on B, raw[2, r] the normal.
    """
    r = 0
    for i in range(pair_int.shape[0]):
        f = pair_float[i]
        c0, c1, c2, t0, t1, t2 = _sphere_centre_and_origin(joint_placement, pair_int[i, 0], pair_int[i, 1], f)
        jh = joint_placement[pair_int[i, 1]]
        m0 = f[4] * f[16] + f[5] * f[17] + f[6] * f[18]                       # R_l n_local
        m1 = f[7] * f[16] + f[8] * f[17] + f[9] * f[18]
        m2 = f[10] * f[16] + f[11] * f[17] + f[12] * f[18]
        n0 = jh[0, 0] * m0 + jh[0, 1] * m1 + jh[0, 2] * m2
        n1 = jh[1, 0] * m0 + jh[1, 1] * m1 + jh[1, 2] * m2
        n2 = jh[2, 0] * m0 + jh[2, 1] * m1 + jh[2, 2] * m2
        d = f[19] + (n0 * t0 + n1 * t1 + n2 * t2)
        radius = f[3]
        gap = (n0 * c0 + n1 * c1 + n2 * c2) - d - radius
        if not gap <= margin:
            continue
        ps0, ps1, ps2 = c0 - radius * n0, c1 - radius * n1, c2 - radius * n2
        ph0, ph1, ph2 = ps0 - gap * n0, ps1 - gap * n1, ps2 - gap * n2
        _write_sphere_row(pair_out, raw, r, pair_int[i, 3], pair_int[i, 2], ps0, ps1, ps2, ph0, ph1, ph2,
                          -n0, -n1, -n2)
        r += 1
    return r


@njit(cache=True, inline="always")
def sphere_halfspace_contacts(joint_placement, pair_int, pair_float, margin, pair_out, raw, pair_ids,
                              pair_material, joint_jacobian, joint_columns, column_dof, ids, point, normal, phi,
                              rotation, jacobian, material, rel, columns):
    """``sphere_halfspace_raw`` then ``finish_contacts`` in one call (scenes whose pairs are all sphere-halfspace
    pairs: no coal call in the step). Returns (r raw contacts within the margin, n contacts written)."""
    r = sphere_halfspace_raw(joint_placement, pair_int, pair_float, margin, pair_out, raw)
    n = finish_contacts(pair_out[:r], raw[0, :r], raw[1, :r], raw[2, :r], margin, pair_ids, pair_material,
                        joint_jacobian, joint_columns, column_dof, ids, point, normal, phi, rotation, jacobian,
                        material, rel, columns)
    return r, n


# Sphere-sphere and sphere-box pairs, coal 3's analytic primitive tests (every pair tested: a bounding-sphere
# reject costs a few ns, no broad phase needed; test_analytic_sphere_pairs_match_coal). pair_int (m, 5) int
# columns (sphere's joint slot, other geometry's joint slot, 1 if the sphere is geometry A, pair index, 1 if the
# other geometry is a box / 0 a sphere); pair_float (m, 20) columns 0-2 the sphere's centre in its joint frame (m),
# 3 its radius (m), 4-12 the other geometry's rotation in its joint frame (row-major), 13-15 its translation (m),
# 16-18 its half sides (box) or radius in 16 (sphere) (m), 19 its bounding radius (m), 20 the bound of the joint
# origins' distance (SP_ORIGIN_REACH: radius + bounding radius + |centre in its joint frame| + |translation in its
# joint frame|, m).
SP_SPHERE_SLOT, SP_OTHER_SLOT, SP_SPHERE_FIRST, SP_PAIR, SP_BOX = range(5)
SP_INTS = 5
SP_FLOATS = 21
SP_ORIGIN_REACH = 20
# m: added to the joint-origin bound so that rounding never rejects a pair the exact bounding-sphere test keeps
_ORIGIN_SLACK = 1e-9


@njit(cache=True)
def sphere_primitive_raw(joint_placement, pair_int, pair_float, margin, pair_out, raw, start):
    """Raw contacts of the sphere-sphere and sphere-box pairs within ``margin``, written from row ``start`` of
    the outputs (after the sphere-halfspace rows); returns the row after the last one written.

    Sphere centre c, radius rho; the other geometry placed at (R, t) = (R_j R_l, R_j t_l + t_j) in the world.
    Sphere-sphere (coal's sphereSphere): u = t - c, signed distance phi = |u| - (rho + rho_2) (m), normal from the
    sphere to the other n = u / |u|, witness points c + rho n and t - rho_2 n. Sphere-box (coal's sphereBox):
    the centre in the box frame l = R^T (c - t); outside the box, its closest box point q (l clamped to the half
    sides h), phi = |l - q| - rho, n = (q - l) / |l - q| in the world, witnesses c + rho n and R q + t; inside (the
    centre in the box), the face of least penetration p_i = h_i - |l_i| (first axis of the least), its outward
    normal f = sign(l_i) R e_i, phi = -(p_i + rho), n = -f, witnesses c - rho f and c + p_i f. Rows as in
    ``sphere_halfspace_raw`` (normal from A to B: n when the sphere is A, -n otherwise). Pairs with phi > margin
    give no row.

    A pair whose joint origins are farther apart than f[SP_ORIGIN_REACH] + margin (+ 1e-9 m) is skipped before
    its placements are computed: its bounding spheres are then apart (|t - c| >= |o_o - o_s| - |s| - |t_l|), the
    test below would skip it too (the clutter: most of its 670 pairs, 3 flops instead of 36).
    """
    r = start
    for i in range(pair_int.shape[0]):
        f = pair_float[i]
        js, jo = joint_placement[pair_int[i, 0]], joint_placement[pair_int[i, 1]]
        e0, e1, e2 = jo[0, 3] - js[0, 3], jo[1, 3] - js[1, 3], jo[2, 3] - js[2, 3]
        bound = f[SP_ORIGIN_REACH] + margin + _ORIGIN_SLACK
        if e0 * e0 + e1 * e1 + e2 * e2 > bound * bound:
            continue
        c0, c1, c2, t0, t1, t2 = _sphere_centre_and_origin(joint_placement, pair_int[i, 0], pair_int[i, 1], f)
        radius = f[3]
        u0, u1, u2 = t0 - c0, t1 - c1, t2 - c2
        reach = radius + f[19] + margin
        if u0 * u0 + u1 * u1 + u2 * u2 > reach * reach:          # bounding spheres apart
            continue
        if pair_int[i, 4] == 0:                                   # sphere-sphere
            dist = math.sqrt(u0 * u0 + u1 * u1 + u2 * u2)
            gap = dist - (radius + f[16])
            if not gap <= margin:
                continue
            if dist > 0.0:
                n0, n1, n2 = u0 / dist, u1 / dist, u2 / dist
            else:
                n0, n1, n2 = 1.0, 0.0, 0.0
            ps0, ps1, ps2 = c0 + radius * n0, c1 + radius * n1, c2 + radius * n2
            po0, po1, po2 = t0 - f[16] * n0, t1 - f[16] * n1, t2 - f[16] * n2
        else:                                                     # sphere-box
            # box rotation in the world R = R_j R_l (row-major R_l in f[4:13])
            jo = joint_placement[pair_int[i, 1]]
            R00 = jo[0, 0] * f[4] + jo[0, 1] * f[7] + jo[0, 2] * f[10]
            R01 = jo[0, 0] * f[5] + jo[0, 1] * f[8] + jo[0, 2] * f[11]
            R02 = jo[0, 0] * f[6] + jo[0, 1] * f[9] + jo[0, 2] * f[12]
            R10 = jo[1, 0] * f[4] + jo[1, 1] * f[7] + jo[1, 2] * f[10]
            R11 = jo[1, 0] * f[5] + jo[1, 1] * f[8] + jo[1, 2] * f[11]
            R12 = jo[1, 0] * f[6] + jo[1, 1] * f[9] + jo[1, 2] * f[12]
            R20 = jo[2, 0] * f[4] + jo[2, 1] * f[7] + jo[2, 2] * f[10]
            R21 = jo[2, 0] * f[5] + jo[2, 1] * f[8] + jo[2, 2] * f[11]
            R22 = jo[2, 0] * f[6] + jo[2, 1] * f[9] + jo[2, 2] * f[12]
            l0 = -(R00 * u0 + R10 * u1 + R20 * u2)                # R^T (c - t)
            l1 = -(R01 * u0 + R11 * u1 + R21 * u2)
            l2 = -(R02 * u0 + R12 * u1 + R22 * u2)
            h0, h1, h2 = f[16], f[17], f[18]
            q0 = min(max(l0, -h0), h0)
            q1 = min(max(l1, -h1), h1)
            q2 = min(max(l2, -h2), h2)
            if q0 != l0 or q1 != l1 or q2 != l2:                  # centre outside the box
                d0, d1, d2 = q0 - l0, q1 - l1, q2 - l2
                dist = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
                gap = dist - radius
                if not gap <= margin:
                    continue
                d0, d1, d2 = d0 / dist, d1 / dist, d2 / dist
                n0 = R00 * d0 + R01 * d1 + R02 * d2
                n1 = R10 * d0 + R11 * d1 + R12 * d2
                n2 = R20 * d0 + R21 * d1 + R22 * d2
                ps0, ps1, ps2 = c0 + radius * n0, c1 + radius * n1, c2 + radius * n2
                po0 = R00 * q0 + R01 * q1 + R02 * q2 + t0
                po1 = R10 * q0 + R11 * q1 + R12 * q2 + t1
                po2 = R20 * q0 + R21 * q1 + R22 * q2 + t2
            else:                                                 # centre inside: least-penetration face
                p0, p1, p2 = h0 - abs(l0), h1 - abs(l1), h2 - abs(l2)
                if p0 <= p1 and p0 <= p2:
                    pen, side = p0, (1.0 if l0 >= 0.0 else -1.0)
                    e0, e1, e2 = R00, R10, R20
                elif p1 <= p2:
                    pen, side = p1, (1.0 if l1 >= 0.0 else -1.0)
                    e0, e1, e2 = R01, R11, R21
                else:
                    pen, side = p2, (1.0 if l2 >= 0.0 else -1.0)
                    e0, e1, e2 = R02, R12, R22
                n0, n1, n2 = -side * e0, -side * e1, -side * e2       # n = -f, f the outward face normal
                gap = -(pen + radius)
                ps0, ps1, ps2 = c0 + radius * n0, c1 + radius * n1, c2 + radius * n2
                po0, po1, po2 = c0 - pen * n0, c1 - pen * n1, c2 - pen * n2
        _write_sphere_row(pair_out, raw, r, pair_int[i, 3], pair_int[i, 2], ps0, ps1, ps2, po0, po1, po2,
                          n0, n1, n2)
        r += 1
    return r


# Box-halfspace pairs, coal 3's box-halfspace distance (details::halfspaceDistance: the box's support point towards
# the halfspace) and contact patch (computePatchPlaneOrHalfspace: the box corners within the patch tolerance of that
# support, in the patch frame, ordered by coal's computeSupportSetConvexHull); test_analytic_box_halfspace_pairs_
# match_coal. pair_int (m, 6) int columns (box's joint slot, halfspace's joint slot, 1 if the box is geometry A, pair
# index, geometry A, geometry B); pair_float (m, BH_FLOATS) columns 0-8 the box's rotation in its joint frame
# (row-major), 9-11 its translation (m), 12-14 its half sides (m), 15-23 the halfspace geometry's rotation in its
# joint frame, 24-26 its translation (m), 27-29 its local normal, 30 its local offset (m).
BH_BOX_SLOT, BH_HALF_SLOT, BH_BOX_FIRST, BH_PAIR, BH_GEOMETRY_A, BH_GEOMETRY_B = range(6)
BH_INTS = 6
BH_FLOATS = 31
_DUMMY_PRECISION = 1e-12                    # Eigen's dummy_precision (double), coal's thresholds
_EPSILON = 2.220446049250313e-16
# coal's box corner order (getShapeSupportSet(Box)): signs of the half sides
_CORNER_SIGNS = np.array([[1.0, 1.0, 1.0], [-1.0, 1.0, 1.0], [-1.0, -1.0, 1.0], [1.0, -1.0, 1.0],
                          [1.0, 1.0, -1.0], [-1.0, 1.0, -1.0], [-1.0, -1.0, -1.0], [1.0, -1.0, -1.0]])


@njit(cache=True)
def _geometry_placement(jp, f, o, H):
    """H (4, 4) = the joint placement jp (4, 4) times the geometry's local placement (rotation f[o:o+9] row-major,
    translation f[o+9:o+12])."""
    for i in range(3):
        for k in range(3):
            H[i, k] = jp[i, 0] * f[o + k] + jp[i, 1] * f[o + 3 + k] + jp[i, 2] * f[o + 6 + k]
        H[i, 3] = jp[i, 0] * f[o + 9] + jp[i, 1] * f[o + 10] + jp[i, 2] * f[o + 11] + jp[i, 3]
        H[3, i] = 0.0
    H[3, 3] = 1.0


@njit(cache=True)
def _det2(ax, ay, bx, by, cx, cy):
    """det(b - a, c - a)."""
    return (bx - ax) * (cy - ay) - (by - ay) * (cx - ax)


@njit(cache=True)
def _hull_before(p, q, vx, vy, px, py):
    """coal's Graham-scan order: point p before point q (angle about v, then distance to v)."""
    det = (px[p] - vx) * (py[q] - vy) - (py[p] - vy) * (px[q] - vx)
    if abs(det) <= _DUMMY_PRECISION:
        return ((px[p] - vx) ** 2 + (py[p] - vy) ** 2) <= ((px[q] - vx) ** 2 + (py[q] - vy) ** 2)
    return det > 0.0


@njit(cache=True)
def support_set_hull(px, py, n, order, hull):
    """coal's computeSupportSetConvexHull on the 2D points (px[k], py[k]) listed in order[:n] (permuted in place):
    writes the hull's point indices into hull, returns their number (counter-clockwise from the lowest y)."""
    if n <= 2:
        for k in range(n):
            hull[k] = order[k]
        return n
    if n == 3:
        if py[order[0]] > py[order[1]]:
            order[0], order[1] = order[1], order[0]
        if py[order[0]] > py[order[2]]:
            order[0], order[2] = order[2], order[0]
        a, b, c = order[0], order[1], order[2]
        if _det2(px[a], py[a], px[b], py[b], px[c], py[c]) < 0.0:
            order[1], order[2] = order[2], order[1]
        for k in range(3):
            hull[k] = order[k]
        return 3
    low = 0
    for k in range(1, n):
        if py[order[k]] < py[order[low]]:
            low = k
    order[0], order[low] = order[low], order[0]
    vx, vy = px[order[0]], py[order[0]]
    # std::stable_sort of order[1:n] (libstdc++'s insertion sort for short ranges)
    for i in range(2, n):
        e = order[i]
        if _hull_before(e, order[1], vx, vy, px, py):
            for k in range(i, 1, -1):
                order[k] = order[k - 1]
            order[1] = e
        else:
            k = i
            while _hull_before(e, order[k - 1], vx, vy, px, py):
                order[k] = order[k - 1]
                k -= 1
            order[k] = e
    m = 1
    hull[0] = order[0]
    i = 1
    while m < 3 and i < n:
        e = order[i]
        if (px[hull[m - 1]] - px[e]) ** 2 + (py[hull[m - 1]] - py[e]) ** 2 > _EPSILON:
            hull[m] = e
            m += 1
        i += 1
    while i < n:
        e = order[i]
        while m > 1 and not (_det2(px[hull[m - 2]], py[hull[m - 2]], px[hull[m - 1]], py[hull[m - 1]],
                                   px[e], py[e]) > _DUMMY_PRECISION):
            m -= 1
        hull[m] = e
        m += 1
        i += 1
    return m


@njit(cache=True)
def box_halfspace_contacts(joint_placement, pair_int, pair_float, margin, tol, pair_out, raw, start, patch_pair,
                           patch_start, mid, patch_normal, patch_depth, patch_wit_a, patch_wit_b, patch_geometry,
                           placement, work, iwork):
    """The box-halfspace pairs within ``margin`` (m) as coal 3 reports them; returns (r, P).

    Per pair (``pair_int``, ``pair_float`` above; ``joint_placement`` (J, 4, 4) by slot): the box B placed at
    (R, t), the halfspace {x: n.x <= d} in the world. The box's support point towards the halfspace s = R h' + t with
    h'_i = h_i sign(-R^T n)_i (0 where |(R^T n)_i| <= 1e-12, as coal), signed distance phi = n.s - d (m), witness
    points s on the box and s - phi n on the halfspace, normal from A to B (-n when the box is A), pos their
    midpoint. The patch: the corners c with (s - c).u < tol, u = -R^T n (the patch tolerance, m), in the patch
    frame (origin pos, z the normal, y = -unitOrthogonal(normal), Eigen's), ordered as coal's convex hull. A hull of
    <= 1 point gives one raw contact row (pair_out[r], raw[:, r] as ``sphere_halfspace_raw``; rows from ``start``,
    r the row after the last); otherwise patch j < P: pair patch_pair[j], points mid[patch_start[j]:
    patch_start[j + 1]] (world, on the patch plane), patch_normal[j], coal's depth (phi) patch_depth[j], witness
    points patch_wit_a/b[j], its geometries A and B patch_geometry[0, j], [1, j] and their world placements
    placement[2 j], [2 j + 1] (4, 4): the inputs of ``patch_contacts``. work (2, 8) float and iwork (2, 8) int
    scratch."""
    r = start
    P = 0
    npts = 0
    patch_start[0] = 0
    px, py = work[0], work[1]
    order, hull = iwork[0], iwork[1]
    for i in range(pair_int.shape[0]):
        f = pair_float[i]
        box_first = pair_int[i, BH_BOX_FIRST] != 0
        Hb = placement[2 * P] if box_first else placement[2 * P + 1]
        Hh = placement[2 * P + 1] if box_first else placement[2 * P]
        _geometry_placement(joint_placement[pair_int[i, BH_BOX_SLOT]], f, 0, Hb)
        _geometry_placement(joint_placement[pair_int[i, BH_HALF_SLOT]], f, 15, Hh)
        n0 = Hh[0, 0] * f[27] + Hh[0, 1] * f[28] + Hh[0, 2] * f[29]
        n1 = Hh[1, 0] * f[27] + Hh[1, 1] * f[28] + Hh[1, 2] * f[29]
        n2 = Hh[2, 0] * f[27] + Hh[2, 1] * f[28] + Hh[2, 2] * f[29]
        d = f[30] + (n0 * Hh[0, 3] + n1 * Hh[1, 3] + n2 * Hh[2, 3])
        u0 = -(Hb[0, 0] * n0 + Hb[1, 0] * n1 + Hb[2, 0] * n2)          # -R^T n: towards the halfspace
        u1 = -(Hb[0, 1] * n0 + Hb[1, 1] * n1 + Hb[2, 1] * n2)
        u2 = -(Hb[0, 2] * n0 + Hb[1, 2] * n1 + Hb[2, 2] * n2)
        h0, h1, h2 = f[12], f[13], f[14]
        s0 = h0 if u0 > _DUMMY_PRECISION else (-h0 if u0 < -_DUMMY_PRECISION else 0.0)
        s1 = h1 if u1 > _DUMMY_PRECISION else (-h1 if u1 < -_DUMMY_PRECISION else 0.0)
        s2 = h2 if u2 > _DUMMY_PRECISION else (-h2 if u2 < -_DUMMY_PRECISION else 0.0)
        b0 = Hb[0, 0] * s0 + Hb[0, 1] * s1 + Hb[0, 2] * s2 + Hb[0, 3]
        b1 = Hb[1, 0] * s0 + Hb[1, 1] * s1 + Hb[1, 2] * s2 + Hb[1, 3]
        b2 = Hb[2, 0] * s0 + Hb[2, 1] * s1 + Hb[2, 2] * s2 + Hb[2, 3]
        gap = (n0 * b0 + n1 * b1 + n2 * b2) - d
        if not gap <= margin:
            continue
        q0, q1, q2 = b0 - gap * n0, b1 - gap * n1, b2 - gap * n2
        if box_first:
            a0, a1, a2, c0, c1, c2, z0, z1, z2 = b0, b1, b2, q0, q1, q2, -n0, -n1, -n2
        else:
            a0, a1, a2, c0, c1, c2, z0, z1, z2 = q0, q1, q2, b0, b1, b2, n0, n1, n2
        o0, o1, o2 = (a0 + c0) / 2.0, (a1 + c1) / 2.0, (a2 + c2) / 2.0
        # patch frame (Eigen's unitOrthogonal of z, negated: y; x = y x z)
        if not (abs(z0) <= abs(z2) * _DUMMY_PRECISION) or not (abs(z1) <= abs(z2) * _DUMMY_PRECISION):
            inv = 1.0 / math.sqrt(z0 * z0 + z1 * z1)
            y0, y1, y2 = z1 * inv, -z0 * inv, 0.0
        else:
            inv = 1.0 / math.sqrt(z1 * z1 + z2 * z2)
            y0, y1, y2 = 0.0, z2 * inv, -z1 * inv
        x0, x1, x2 = y1 * z2 - y2 * z1, y2 * z0 - y0 * z2, y0 * z1 - y1 * z0
        support = s0 * u0 + s1 * u1 + s2 * u2
        n = 0
        for k in range(8):
            e0, e1, e2 = _CORNER_SIGNS[k, 0] * h0, _CORNER_SIGNS[k, 1] * h1, _CORNER_SIGNS[k, 2] * h2
            if support - (e0 * u0 + e1 * u1 + e2 * u2) < tol:
                w0 = Hb[0, 0] * e0 + Hb[0, 1] * e1 + Hb[0, 2] * e2 + Hb[0, 3] - o0
                w1 = Hb[1, 0] * e0 + Hb[1, 1] * e1 + Hb[1, 2] * e2 + Hb[1, 3] - o1
                w2 = Hb[2, 0] * e0 + Hb[2, 1] * e1 + Hb[2, 2] * e2 + Hb[2, 3] - o2
                px[n] = x0 * w0 + x1 * w1 + x2 * w2
                py[n] = y0 * w0 + y1 * w1 + y2 * w2
                order[n] = n
                n += 1
        m = support_set_hull(px, py, n, order, hull)
        if m <= 1:
            pair_out[r] = pair_int[i, BH_PAIR]
            raw[0, r, 0], raw[0, r, 1], raw[0, r, 2] = a0, a1, a2
            raw[1, r, 0], raw[1, r, 1], raw[1, r, 2] = c0, c1, c2
            raw[2, r, 0], raw[2, r, 1], raw[2, r, 2] = z0, z1, z2
            r += 1
            continue
        for k in range(m):
            x, y = px[hull[k]], py[hull[k]]
            mid[npts, 0] = x0 * x + y0 * y + o0
            mid[npts, 1] = x1 * x + y1 * y + o1
            mid[npts, 2] = x2 * x + y2 * y + o2
            npts += 1
        patch_pair[P] = pair_int[i, BH_PAIR]
        patch_geometry[0, P], patch_geometry[1, P] = pair_int[i, BH_GEOMETRY_A], pair_int[i, BH_GEOMETRY_B]
        patch_normal[P, 0], patch_normal[P, 1], patch_normal[P, 2] = z0, z1, z2
        patch_depth[P] = gap
        patch_wit_a[P, 0], patch_wit_a[P, 1], patch_wit_a[P, 2] = a0, a1, a2
        patch_wit_b[P, 0], patch_wit_b[P, 1], patch_wit_b[P, 2] = c0, c1, c2
        P += 1
        patch_start[P] = npts
    return r, P
