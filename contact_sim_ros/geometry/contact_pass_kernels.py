"""The contact query's whole ``update`` with coal's pairs in ONE compiled function (issue 45 item 2: every contact
pair type inside the compiled step): coal's narrow phase through narrow_phase.cpp's C entry point (called by
address with contact_sim_ros.jit's ``c_call5``: the geometry placements from the bound Pinocchio Data, the broad
phase, coal's tests, the one-point rows and the patches), the compiled analytic pairs' rows, the merge of both in
pair order (update's stable argsort), the patch contacts (coal's patches, then the box-halfspace ones) and
``finish_contacts``: the same functions on the same values as ``ContactQuery.update``'s staged path, so the
contacts are bit-identical (test/test_contact_pass.py).

``coal_contact_pass`` takes a (K, 4) int64 ``table`` of (address, dims) rows (the P_* constants), as
sim/tree_step.py's table, built by ``ContactQuery.compiled_coal_pass_table`` (which holds the arrays). Lengths in
m, placements world frame.
"""

from __future__ import annotations

from ..jit import c_call5, njit
from ..address_table import float_view1 as _f1, float_view2 as _f2, float_view3 as _f3, int_view1 as _i1
from ..address_table import int_view2 as _i2
from . import contact_kernels, pair_bound_kernels

# rows of the table: (address, dim 0, dim 1, dim 2) of one C-contiguous array
(P_INTS, P_SCALARS, P_WITHIN, P_COUNTS, P_PLACEMENT, P_AN_INT, P_AN_FLOAT, P_SP_INT, P_SP_FLOAT, P_BH_INT,
 P_BH_FLOAT, P_PAIR_OUT, P_RAW, P_B_PAIR, P_B_START, P_B_MID, P_B_NORMAL, P_B_DEPTH, P_B_WA, P_B_WB, P_B_GEOMETRY,
 P_B_PLACEMENT, P_BH_SLOTS, P_BH_WORK, P_BH_IWORK, P_BH_MIN_GAP, P_S_PAIR, P_S_A, P_S_B, P_S_N, P_M_PAIR, P_M_START,
 P_M_MID, P_M_N, P_M_A, P_M_B, P_M_DEPTH, P_PAIRS_BY_SIDE, P_M_GEOMETRY, P_GEOMETRY_PLACEMENT, P_PATCH_MIN_GAP,
 P_C_TYPE, P_C_HALF, P_C_RADIUS, P_C_HALF_LENGTH, P_C_PLANE_NORMAL, P_C_PLANE_OFFSET, P_C_FACE_START,
 P_C_FACE_NORMAL, P_C_FACE_OFFSET, P_PR_PAIR, P_PR_A, P_PR_B, P_PR_N, P_ORDER, P_MR_PAIR, P_MR_A, P_MR_B, P_MR_N,
 P_PAIR_IDS, P_PAIR_MATERIAL, P_JOINT_COLUMNS, P_COLUMN_DOF, P_IDS, P_POINT, P_NORMAL, P_PHI, P_ROTATION,
 P_JACOBIAN, P_MATERIAL, P_REL, P_COLUMNS, P_BIAS, P_NEAR_PASSING, P_BOUNDS_WAIT) = range(75)
# two groups of 8 rows from P_BOUNDS and P_NEAR: a PairBounds' joint_int, joint_float, geometry_int,
# geometry_float, pairs, placement, world, local (the query's test of every pair, and of its unbounded coal pairs
# and compiled pairs)
P_BOUNDS, P_NEAR = 75, 83
N_PASS_TABLE = 91
# entries of P_INTS: narrow_phase.cpp's C entry point, the NarrowPhase handle, the unbounded and sphere-primitive
# pairs counted as candidates, whether the query has its bounding-volume tests (every pair; the unbounded coal and
# the compiled pairs), how many of the latter's pairs are the unbounded coal ones, update's BOUND_RETEST_AFTER
# and how many unbounded coal pairs there are (``within`` holds 0 ... n - 1 of them)
I_NARROW_FN, I_NARROW_HANDLE, I_EXTRA_CANDIDATES, I_HAS_BOUNDS, I_HAS_NEAR, I_N_ALWAYS_NEAR, I_RETEST, I_N_ALWAYS = \
    range(8)
N_PASS_INTS = 8
# entries of P_SCALARS: margin, patch tolerance, the casters' tolerance, the deepest-point tolerance, the two
# bounding-volume tests' limits (m)
S_MARGIN, S_PATCH_TOLERANCE, S_CASTER_TOLERANCE, S_DEEPEST, S_BOUNDS_LIMIT, S_NEAR_LIMIT = range(6)
N_PASS_SCALARS = 6
# coal_contact_pass's n when the narrow phase failed or the rows exceed the contact buffers (the staged update runs)
FAILED, OVERFLOW = -1, -2


@njit(cache=True)
def narrow_phase(fn, handle, within, n_within, counts, placements):
    """narrow_phase.cpp's ``contact_sim_narrow_phase`` (NarrowPhase.run_raw) of the NarrowPhase at ``handle``:
    within int64 (>= n_within,), counts int64 (4,) out, placements: first the geometry placements from the bound
    Pinocchio Data. Returns 0, or -1 on failure."""
    return c_call5(fn, handle, within.ctypes.data, n_within, counts.ctypes.data, 1 if placements else 0)


@njit(cache=True)
def coal_contact_pass(t, J, q, use_bounds):
    """``ContactQuery.update(pin_data, joint_jacobians=True, q=q if use_bounds else None)`` for a query with coal's
    pairs and the compiled narrow phase, no surface velocity: the bounding-volume decision as update's (the same
    wait count; when no pair can be within the margin, no coal call and no contact), the compiled pairs' rows (their
    joint placements already in the table's ``placement``, by slot), coal's narrow phase of the bound Pinocchio
    Data's kinematics, the merge, the patches and ``finish_contacts`` with ``J`` (pin_data.J) into the query's
    buffers (and a zero velocity bias for the n contacts). Returns (n contacts, or FAILED / OVERFLOW with nothing
    written to the contact buffers; colliding pairs; candidate pairs) as update's stats."""
    ints, scalars = _i1(t, P_INTS), _f1(t, P_SCALARS)
    within, n_within = _i1(t, P_WITHIN), ints[I_N_ALWAYS]
    analytic_near = True
    if use_bounds and ints[I_HAS_BOUNDS] != 0:
        wait = _i1(t, P_BOUNDS_WAIT)
        if wait[0] != 0:
            wait[0] -= 1
        elif not pair_bound_kernels.pairs_within(
                q, _i2(t, P_BOUNDS), _f2(t, P_BOUNDS + 1), _i2(t, P_BOUNDS + 2), _f2(t, P_BOUNDS + 3),
                _i2(t, P_BOUNDS + 4), scalars[S_BOUNDS_LIMIT], _f2(t, P_BOUNDS + 5), _f2(t, P_BOUNDS + 6),
                _f2(t, P_BOUNDS + 7)):
            return 0, 0, 0
        else:
            wait[0] = ints[I_RETEST]
    if use_bounds and ints[I_HAS_NEAR] != 0:
        within = _i1(t, P_NEAR_PASSING)
        n, n_within = pair_bound_kernels.pairs_within_list(
            q, _i2(t, P_NEAR), _f2(t, P_NEAR + 1), _i2(t, P_NEAR + 2), _f2(t, P_NEAR + 3), _i2(t, P_NEAR + 4),
            scalars[S_NEAR_LIMIT], _f2(t, P_NEAR + 5), _f2(t, P_NEAR + 6), _f2(t, P_NEAR + 7), within,
            ints[I_N_ALWAYS_NEAR])
        analytic_near = n > n_within
    margin = scalars[S_MARGIN]
    counts = _i1(t, P_COUNTS)
    pair_out, raw = _i1(t, P_PAIR_OUT), _f3(t, P_RAW)
    placement = _f3(t, P_PLACEMENT)
    b_pair, b_start, b_mid, b_normal = _i1(t, P_B_PAIR), _i1(t, P_B_START), _f2(t, P_B_MID), _f2(t, P_B_NORMAL)
    b_depth, b_wa, b_wb, b_geometry = _f1(t, P_B_DEPTH), _f2(t, P_B_WA), _f2(t, P_B_WB), _i2(t, P_B_GEOMETRY)
    b_placement = _f3(t, P_B_PLACEMENT)
    # the compiled pairs' rows (update's order: sphere-halfspace, sphere-primitive, box-halfspace)
    r = 0
    n_box = 0
    if analytic_near:
        an_int, sp_int, bh_int = _i2(t, P_AN_INT), _i2(t, P_SP_INT), _i2(t, P_BH_INT)
        if an_int.shape[0] > 0:
            r = contact_kernels.sphere_halfspace_raw(placement, an_int, _f2(t, P_AN_FLOAT), margin, pair_out, raw)
        if sp_int.shape[0] > 0:
            r = contact_kernels.sphere_primitive_raw(placement, sp_int, _f2(t, P_SP_FLOAT), margin, pair_out, raw, r)
        if bh_int.shape[0] > 0:
            r, n_box = contact_kernels.box_halfspace_contacts(
                placement, bh_int, _f2(t, P_BH_FLOAT), margin, scalars[S_PATCH_TOLERANCE], pair_out, raw, r,
                b_pair, b_start, b_mid, b_normal, b_depth, b_wa, b_wb, b_geometry, b_placement, _f2(t, P_BH_WORK),
                _i2(t, P_BH_IWORK))
    # coal's narrow phase
    if narrow_phase(ints[I_NARROW_FN], ints[I_NARROW_HANDLE], within, n_within, counts, True) != 0:
        return FAILED, 0, 0
    n_single, n_multi, n_colliding = counts[0], counts[1], counts[2]
    n_candidates = ints[I_EXTRA_CANDIDATES] + counts[3]
    colliding = n_colliding + r + n_box
    if n_single + n_multi + r + n_box == 0:
        return 0, colliding, n_candidates
    s_pair, s_a, s_b, s_n = _i1(t, P_S_PAIR), _f2(t, P_S_A), _f2(t, P_S_B), _f2(t, P_S_N)
    m_pair, m_start, m_mid = _i1(t, P_M_PAIR), _i1(t, P_M_START), _f2(t, P_M_MID)
    m_n, m_a, m_b, m_depth = _f2(t, P_M_N), _f2(t, P_M_A), _f2(t, P_M_B), _f1(t, P_M_DEPTH)
    c_type, c_half, c_radius, c_half_length = _i1(t, P_C_TYPE), _f2(t, P_C_HALF), _f1(t, P_C_RADIUS), \
        _f1(t, P_C_HALF_LENGTH)
    c_plane_normal, c_plane_offset = _f2(t, P_C_PLANE_NORMAL), _f1(t, P_C_PLANE_OFFSET)
    c_face_start, c_face_normal, c_face_offset = _i1(t, P_C_FACE_START), _f2(t, P_C_FACE_NORMAL), \
        _f1(t, P_C_FACE_OFFSET)
    pr_pair, pr_a, pr_b, pr_n = _i1(t, P_PR_PAIR), _f2(t, P_PR_A), _f2(t, P_PR_B), _f2(t, P_PR_N)
    mr_pair, mr_a, mr_b, mr_n = _i1(t, P_MR_PAIR), _f2(t, P_MR_A), _f2(t, P_MR_B), _f2(t, P_MR_N)
    ids = _i2(t, P_IDS)
    # the patches' rows (update's _patch_contacts_numba): coal's patches, then the box-halfspace ones
    rp = 0
    if n_multi > 0 or n_box > 0:
        if m_start[n_multi] + n_multi + (b_start[n_box] + n_box if n_box > 0 else 0) > pr_pair.shape[0]:
            return OVERFLOW, colliding, n_candidates
        if n_multi > 0:
            by_side, geometry = _i2(t, P_PAIRS_BY_SIDE), _i2(t, P_M_GEOMETRY)
            for i in range(n_multi):
                geometry[0, i] = by_side[0, m_pair[i]]
                geometry[1, i] = by_side[1, m_pair[i]]
            rp = contact_kernels.patch_contacts(
                m_pair[:n_multi], m_start[:n_multi + 1], m_mid[:m_start[n_multi]], m_n[:n_multi],
                m_depth[:n_multi], m_a[:n_multi], m_b[:n_multi], geometry[0, :n_multi], geometry[1, :n_multi],
                geometry[0, :n_multi], geometry[1, :n_multi], _f3(t, P_GEOMETRY_PLACEMENT), c_type, c_half,
                c_radius, c_half_length, c_plane_normal, c_plane_offset, c_face_start, c_face_normal,
                c_face_offset, scalars[S_CASTER_TOLERANCE], scalars[S_DEEPEST], _f1(t, P_PATCH_MIN_GAP), pr_pair,
                pr_a, pr_b, pr_n)
        if n_box > 0:
            slots = _i2(t, P_BH_SLOTS)
            rp += contact_kernels.patch_contacts(
                b_pair[:n_box], b_start, b_mid, b_normal, b_depth, b_wa, b_wb, b_geometry[0], b_geometry[1],
                slots[0], slots[1], b_placement, c_type, c_half, c_radius, c_half_length, c_plane_normal,
                c_plane_offset, c_face_start, c_face_normal, c_face_offset, scalars[S_CASTER_TOLERANCE],
                scalars[S_DEEPEST], _f1(t, P_BH_MIN_GAP), pr_pair[rp:], pr_a[rp:], pr_b[rp:], pr_n[rp:])
    rows = n_single + r + rp
    if rows > ids.shape[1] or rows > mr_pair.shape[0]:
        return OVERFLOW, colliding, n_candidates
    # the one-point rows: coal's, then the compiled pairs', in pair order (update's stable argsort; a pair gives
    # at most one one-point row, so no ties: a stable insertion sort of the row numbers is the same order)
    order = _i1(t, P_ORDER)
    ns = n_single + r
    for i in range(ns):
        order[i] = i
    for i in range(1, ns):
        key = order[i]
        pk = s_pair[key] if key < n_single else pair_out[key - n_single]
        j = i - 1
        while j >= 0:
            o = order[j]
            po = s_pair[o] if o < n_single else pair_out[o - n_single]
            if po <= pk:
                break
            order[j + 1] = o
            j -= 1
        order[j + 1] = key
    for i in range(ns):
        o = order[i]
        if o < n_single:
            mr_pair[i] = s_pair[o]
            for k in range(3):
                mr_a[i, k] = s_a[o, k]
                mr_b[i, k] = s_b[o, k]
                mr_n[i, k] = s_n[o, k]
        else:
            o -= n_single
            mr_pair[i] = pair_out[o]
            for k in range(3):
                mr_a[i, k] = raw[0, o, k]
                mr_b[i, k] = raw[1, o, k]
                mr_n[i, k] = raw[2, o, k]
    contact_kernels.append_raw_rows(mr_pair, mr_a, mr_b, mr_n, ns, pr_pair, pr_a, pr_b, pr_n, rp)
    n = contact_kernels.finish_contacts(
        mr_pair[:rows], mr_a[:rows], mr_b[:rows], mr_n[:rows], margin, _i2(t, P_PAIR_IDS), _f2(t, P_PAIR_MATERIAL),
        J, _i1(t, P_JOINT_COLUMNS), _i1(t, P_COLUMN_DOF), ids, _f2(t, P_POINT), _f2(t, P_NORMAL), _f1(t, P_PHI),
        _f3(t, P_ROTATION), _f2(t, P_JACOBIAN), _f2(t, P_MATERIAL), _f2(t, P_REL), _i2(t, P_COLUMNS))
    bias = _f1(t, P_BIAS)
    for i in range(3 * n):
        bias[i] = 0.0
    return n, colliding, n_candidates
