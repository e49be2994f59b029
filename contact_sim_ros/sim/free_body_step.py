"""The whole TAMSI step of a scene of free bodies on sphere-halfspace contacts in ONE compiled call (issue 18,
sphere row: Drake's TAMSI step of the rolling sphere is 14 us; the staged step spent ~22 us, two thirds of it in
the Python between ~12 compiled and Pinocchio calls).

The scenes: every joint is a free flyer (free objects, no robot), every collision pair is a sphere against a
half-space (``ContactQuery``'s analytic pairs: a ball, a box on corner spheres), no scripted joint commands, no
surface velocities; the engine is TAMSI with its compiled kernel. ``Simulator`` selects this path when it is
built for such a scene (``FreeBodyTamsiStep.qualifies``); other free-body scenes take the tree step with this
module's kernels (sim/tree_step.py, bit-identical to the staged step), the rest the staged step. The one call
(``free_body_tamsi_step``) does, from (q0, v0):

1. kinematics of the free flyers: the joint placements oMi = jointPlacement * (R(quat), p) (R as Eigen's
   ``toRotationMatrix``, as Pinocchio) and the world-frame joint Jacobian columns of ``pin_data.J``
   ([R, p x R; 0, R] per body);
2. dynamics in the body frame (Pinocchio's free-flyer velocities are LOCAL): M = the body's spatial inertia
   (6 x 6, constant), nle = Y a_gf + v x* (Y v) with a_gf = (-R^T g, 0) (RNEA with zero acceleration);
3. the sphere-halfspace contacts (``contact_kernels.sphere_halfspace_contacts``) into the contact query's buffers;
4. the bookkeeping before the engine (``step_kernels.prepare_step``: the frame-rotation force, actuation rows);
5. TAMSI's Newton iteration (``tamsi_kernels.newton_step_packed`` with the engine's own scratch and options);
6. the configuration update: the quaternion q0 * exp(dt w) with Pinocchio's hemisphere choice and first-order
   normalization (``pin.integrate``'s rotation part), then ``step_kernels.finish_step`` (frozen-frame translation
   and velocity update, finiteness, divergence bounds; free flyers have no joint limits).

The results equal the staged step's to round-off (M, nle, J and the quaternion are computed with other operation
orders than Pinocchio's; ``test/test_free_body_step.py`` compares both paths step by step and over whole runs).
A failed attempt (TAMSI not converged, non-finite, diverged) is handed back: the Simulator then runs the staged
step with its sub-stepping, so failures are handled exactly as in every other scene. The call also runs the
penetration bound's pass (the bound alone) and says whether ``PenetrationCheck.check`` must look.

The call is a function of the Simulator's model and data (issue 45 items 1-2, as MuJoCo's mj_step(m, d)): its
constants are packed once into two 1-D blocks (``model_int``, ``model_float``), its buffers into two more
(``data_float``, ``data_int``: the contact query's all-analytic buffers and TAMSI's scratch live there, the
query and the engine hold views) (14 arguments instead of 50: numba unboxes every array argument, ~0.05 us each;
sphere: the call 6.6 -> 5.9 us with the penetration pass now inside it, docs/benchmarks.md). Every array the call
reads or writes besides the state (those blocks' sections in their shapes, the Simulator's data rows, modes and
finish values, the scripted wrenches, both result slots) is then passed by address, as the tree step's
(sim/tree_step.py): one (K, 4) int64 ``table`` of (address, dims) rows viewed inside with ``numba.carray``, so the
call takes 7 arguments (4 of them arrays: the state and the new state) and makes no reshape (the table section
below; docs/benchmarks.md "The free-body step's arguments as one address table"). Its callees (the contact kernels, ``prepare_step``, TAMSI's
``newton_solve``, ``finish_step``, the penetration pass) are compiled into it (numba ``inline="always"``: a call of
a function taking many arrays costs ~7 ns of reference counting per array), and the scene's scripted wrenches on
free bodies are applied in it (``body_wrenches``). ``free_body_tamsi_advance`` runs several steps in one call
(``Simulator.advance``: a control period), its views made once.
"""

from __future__ import annotations

import math

import numpy as np

from ..jit import njit
from ..jit import bool_pointer, carray
from ..address_table import float_view1 as _f1, float_view2 as _f2, float_view3 as _f3, int_view1 as _i1
from ..address_table import int_view2 as _i2, table_row
from ..engines import tamsi_kernels
from ..engines.tamsi_kernels import (P_MAX_ITERATIONS, P_SMOOTH, P_STICTION, P_THETA_MAX, P_TOLERANCE, P_TWO_WAY,
                                     P_USE_TALS, newton_solve)
from ..geometry.contact_kernels import sphere_halfspace_contacts
from . import step_kernels
from .penetration_kernels import deepest_excess

# columns of the per-body constants ``body_float`` (nb, BODY_FLOATS): the joint placement in its parent (the
# world) R (row-major, 9) and t (3, m); the spatial inertia in the body frame: mass (kg), lever c (3, m), rotational
# inertia about the centre of mass I_c (row-major, 9, kg m^2)
BF_R, BF_T, BF_MASS, BF_LEVER, BF_INERTIA = 0, 9, 12, 13, 16
BODY_FLOATS = 25
# columns of ``body_int`` (nb, 3): first q index, first v index, contact-placement slot (0: not in a pair)
BI_Q, BI_V, BI_SLOT = 0, 1, 2
# |phi| (rad) below which the quaternion exponential uses its Taylor expansions
_TAYLOR_ANGLE = float(np.finfo(float).eps) ** 0.25


@njit(cache=True, inline="always")
def body_placement(q, iq, f):
    """World placement of a free flyer: (R row-major 9 entries, p 3 entries) of jointPlacement * (R(quat), p) with
    the quaternion (x, y, z, w) at q[iq+3:iq+7] (R(quat) as Eigen's ``toRotationMatrix``) and ``f`` the body's
    ``body_float`` row."""
    x, y, z, w = q[iq + 3], q[iq + 4], q[iq + 5], q[iq + 6]
    tx, ty, tz = 2.0 * x, 2.0 * y, 2.0 * z               # Eigen's toRotationMatrix
    twx, twy, twz = tx * w, ty * w, tz * w
    txx, txy, txz = tx * x, ty * x, tz * x
    tyy, tyz, tzz = ty * y, tz * y, tz * z
    q00, q01, q02 = 1.0 - (tyy + tzz), txy - twz, txz + twy
    q10, q11, q12 = txy + twz, 1.0 - (txx + tzz), tyz - twx
    q20, q21, q22 = txz - twy, tyz + twx, 1.0 - (txx + tyy)
    a00, a01, a02 = f[BF_R], f[BF_R + 1], f[BF_R + 2]
    a10, a11, a12 = f[BF_R + 3], f[BF_R + 4], f[BF_R + 5]
    a20, a21, a22 = f[BF_R + 6], f[BF_R + 7], f[BF_R + 8]
    R = (a00 * q00 + a01 * q10 + a02 * q20, a00 * q01 + a01 * q11 + a02 * q21, a00 * q02 + a01 * q12 + a02 * q22,
         a10 * q00 + a11 * q10 + a12 * q20, a10 * q01 + a11 * q11 + a12 * q21, a10 * q02 + a11 * q12 + a12 * q22,
         a20 * q00 + a21 * q10 + a22 * q20, a20 * q01 + a21 * q11 + a22 * q21, a20 * q02 + a21 * q12 + a22 * q22)
    p0, p1, p2 = q[iq], q[iq + 1], q[iq + 2]
    p = ((a00 * p0 + a01 * p1 + a02 * p2) + f[BF_T], (a10 * p0 + a11 * p1 + a12 * p2) + f[BF_T + 1],
         (a20 * p0 + a21 * p1 + a22 * p2) + f[BF_T + 2])
    return R, p


@njit(cache=True, inline="always")
def free_body_kinematics(q, body_int, body_float, placement, J):
    """Joint placements of the free flyers into ``placement`` (slots, 4, 4) at their slots (slot 0, the world,
    is not touched; bodies without a slot are skipped) and the world-frame joint Jacobian ``J`` (6, nv)
    (``pin.computeJointJacobians``' layout: the spatial velocity at the world origin; per body the columns
    [R e_k; 0] of the linear and [p x R e_k; R e_k] of the angular velocities). ``J`` (6, 0): placements only."""
    jacobian = J.shape[1] > 0
    for b in range(body_int.shape[0]):
        iq, iv = body_int[b, BI_Q], body_int[b, BI_V]
        R, p = body_placement(q, iq, body_float[b])
        s = body_int[b, BI_SLOT]
        if s > 0:
            for r in range(3):
                for c in range(3):
                    placement[s, r, c] = R[3 * r + c]
                placement[s, r, 3] = p[r]
        if not jacobian:
            continue
        for k in range(3):
            c_lin, c_ang = iv + k, iv + 3 + k
            r0, r1, r2 = R[k], R[3 + k], R[6 + k]
            J[0, c_lin], J[1, c_lin], J[2, c_lin] = r0, r1, r2
            J[3, c_lin], J[4, c_lin], J[5, c_lin] = 0.0, 0.0, 0.0
            J[0, c_ang] = p[1] * r2 - p[2] * r1
            J[1, c_ang] = p[2] * r0 - p[0] * r2
            J[2, c_ang] = p[0] * r1 - p[1] * r0
            J[3, c_ang], J[4, c_ang], J[5, c_ang] = r0, r1, r2


@njit(cache=True, inline="always")
def _inertia_times(f, m0, m1, m2, m3, m4, m5):
    """Y m (6-tuple: force linear, angular) for the spatial inertia of ``body_float`` row f and the motion
    (linear m0..2, angular m3..5), as Pinocchio's Inertia * Motion: f_lin = mass (m_lin - c x m_ang),
    f_ang = I_c m_ang + c x f_lin."""
    mass = f[BF_MASS]
    c0, c1, c2 = f[BF_LEVER], f[BF_LEVER + 1], f[BF_LEVER + 2]
    l0 = mass * (m0 - (c1 * m5 - c2 * m4))
    l1 = mass * (m1 - (c2 * m3 - c0 * m5))
    l2 = mass * (m2 - (c0 * m4 - c1 * m3))
    I = BF_INERTIA
    a0 = (f[I] * m3 + f[I + 1] * m4 + f[I + 2] * m5) + (c1 * l2 - c2 * l1)
    a1 = (f[I + 3] * m3 + f[I + 4] * m4 + f[I + 5] * m5) + (c2 * l0 - c0 * l2)
    a2 = (f[I + 6] * m3 + f[I + 7] * m4 + f[I + 8] * m5) + (c0 * l1 - c1 * l0)
    return l0, l1, l2, a0, a1, a2


@njit(cache=True, inline="always")
def free_body_bias_force(q, v, body_int, body_float, gravity, nle):
    """nle (nv,) = C(q, v) v + g(q) of the free flyers (N, N m; ``pin.nonLinearEffects``): per body, in its frame,
    Y a_gf + v x* (Y v) with a_gf = (-R^T g, 0) and R the body's world rotation (joint placement included)."""
    for b in range(body_int.shape[0]):
        iq, iv = body_int[b, BI_Q], body_int[b, BI_V]
        f = body_float[b]
        R, _ = body_placement(q, iq, f)
        g0 = R[0] * gravity[0] + R[3] * gravity[1] + R[6] * gravity[2]       # R^T g
        g1 = R[1] * gravity[0] + R[4] * gravity[1] + R[7] * gravity[2]
        g2 = R[2] * gravity[0] + R[5] * gravity[1] + R[8] * gravity[2]
        a = _inertia_times(f, -g0, -g1, -g2, 0.0, 0.0, 0.0)
        v0, v1, v2, w0, w1, w2 = v[iv], v[iv + 1], v[iv + 2], v[iv + 3], v[iv + 4], v[iv + 5]
        h = _inertia_times(f, v0, v1, v2, w0, w1, w2)
        # v x* h = (w x h_lin, w x h_ang + v_lin x h_lin)
        nle[iv] = a[0] + (w1 * h[2] - w2 * h[1])
        nle[iv + 1] = a[1] + (w2 * h[0] - w0 * h[2])
        nle[iv + 2] = a[2] + (w0 * h[1] - w1 * h[0])
        nle[iv + 3] = a[3] + ((w1 * h[5] - w2 * h[4]) + (v1 * h[2] - v2 * h[1]))
        nle[iv + 4] = a[4] + ((w2 * h[3] - w0 * h[5]) + (v2 * h[0] - v0 * h[2]))
        nle[iv + 5] = a[5] + ((w0 * h[4] - w1 * h[3]) + (v0 * h[1] - v1 * h[0]))


@njit(cache=True, inline="always")
def integrate_rotations(q0, v, dt, body_int, q):
    """The quaternions of ``pin.integrate(q0, dt v)`` for the free flyers, into q: q0 * exp(dt w / 2) (x, y, z, w
    layout), negated if its dot product with q0 is negative, then Pinocchio's first-order normalization
    q (3 - |q|^2) / 2. Translations are left to ``step_kernels.finish_step`` (the frozen-frame update)."""
    for b in range(body_int.shape[0]):
        iq, iv = body_int[b, BI_Q], body_int[b, BI_V]
        p0, p1, p2 = dt * v[iv + 3], dt * v[iv + 4], dt * v[iv + 5]
        angle2 = p0 * p0 + p1 * p1 + p2 * p2
        angle = math.sqrt(angle2)
        if angle < _TAYLOR_ANGLE:
            cw, s = 1.0 - angle2 / 8.0, 0.5 - angle2 / 48.0
        else:
            cw, s = math.cos(0.5 * angle), math.sin(0.5 * angle) / angle
        e0, e1, e2 = s * p0, s * p1, s * p2
        a0, a1, a2, aw = q0[iq + 3], q0[iq + 4], q0[iq + 5], q0[iq + 6]
        r0 = aw * e0 + cw * a0 + (a1 * e2 - a2 * e1)
        r1 = aw * e1 + cw * a1 + (a2 * e0 - a0 * e2)
        r2 = aw * e2 + cw * a2 + (a0 * e1 - a1 * e0)
        rw = aw * cw - (a0 * e0 + a1 * e1 + a2 * e2)
        if r0 * a0 + r1 * a1 + r2 * a2 + rw * aw < 0.0:
            r0, r1, r2, rw = -r0, -r1, -r2, -rw
        alpha = (3.0 - (r0 * r0 + r1 * r1 + r2 * r2 + rw * rw)) / 2.0
        q[iq + 3], q[iq + 4], q[iq + 5], q[iq + 6] = r0 * alpha, r1 * alpha, r2 * alpha, rw * alpha


# ------------------------------------------------------------------------------------------ the address table
# Every array the fused call reads or writes besides the state is fixed while the FreeBodyTamsiStep lives (its
# packed constants and buffers, the Simulator's data, the two result slots) and is passed by address: one (K, 4)
# int64 ``table`` of (address, dim 0, dim 1, dim 2) rows (the T_* constants below, as sim/tree_step.py), viewed
# inside with ``numba.carray`` in its shape: no per-array unboxing (~0.05 us each) and no reshape of a view (~17 ns
# each) in the call. The rows: the flags (T_FLAGS: I_* entries), the free bodies' constants, the analytic pairs'
# ints, ids, the Jacobian's packed joint columns and column dofs, the free flyers' first v indices, the trees'
# velocity ranges, finish_step's index array, the scripted wrenches' (body row, 1 if it is the only one on its
# body) (wrenches, 2); body_float (nb, BODY_FLOATS), gravity (3,) m/s^2, the constant mass matrix (nv, nv), the
# pairs' floats and materials, the penetration bound's thickness per geometry (m; empty without the bound),
# (contact margin m, joint stiction tolerance m/s or rad/s, the bound's fraction of the thinner thickness); nle
# (nv,), J (6, nv), the position error (nv,, zeros), TAMSI's velocity (nv,); the contact query's placements
# (slots, 4, 4), raw contacts (3, pairs, 3), points, normals (capacity, 3), phi (capacity,), rotations
# (capacity, 3, 3), Jacobians (3 capacity, nv), materials (4, capacity), scratch (3, nv), velocity bias
# (3 capacity,), pair of each raw contact (pairs,), ids (4, capacity), Jacobian columns (capacity, width); TAMSI's
# kernel scratch as ``tamsi_kernels.fixed_views`` and ``contact_views`` cut it; the Simulator's data rows
# (step_kernels.N_ROWS, nv), modes (2, nv) bool, finish_step's values; the scripted wrenches of one step
# (wrenches, 6); the two result slots' outputs (3, nv) and impulses (pairs, 3); the states between the steps of
# one ``free_body_tamsi_advance`` call (2, nq), (2, nv).
(T_FLAGS, T_BODY_INT, T_PAIR_INT, T_PAIR_IDS, T_JOINT_COLUMNS, T_COLUMN_DOF, T_FREE_V, T_TREE_PTR, T_FINISH_INDEX,
 T_WRENCH_BODY, T_BODY_FLOAT, T_GRAVITY, T_M, T_PAIR_FLOAT, T_PAIR_MATERIAL, T_THICKNESS, T_SCALARS, T_NLE, T_J,
 T_POSITION_ERROR, T_V_ENGINE, T_PLACEMENT, T_RAW, T_POINT, T_NORMAL, T_PHI, T_ROTATION, T_JACOBIAN, T_MATERIAL,
 T_REL, T_BIAS, T_PAIR_OUT, T_IDS, T_COLUMNS, T_PARAMS, T_WORK_NV, T_A, T_BJ, T_HISTORY, T_PIV, T_UNSAT, T_WORK_C,
 T_CWORK, T_PI_FROZEN, T_DELTA0, T_CONTACT_MODES, T_ROWS, T_MODES, T_FINISH_VALUES, T_WRENCH, T_OUTPUTS_A,
 T_IMPULSE_A, T_OUTPUTS_B, T_IMPULSE_B, T_Q_STATE, T_V_STATE) = range(56)
N_TABLE = 56
# entries of the T_FLAGS array: 1 when the Simulator has a deep-interpenetration bound (sim/penetration.py)
I_PENETRATION = 0
N_FLAGS = 1
# the rows of int64 arrays, of bool arrays (the others: float64)
INT_ROWS = frozenset((T_FLAGS, T_BODY_INT, T_PAIR_INT, T_PAIR_IDS, T_JOINT_COLUMNS, T_COLUMN_DOF, T_FREE_V,
                      T_TREE_PTR, T_FINISH_INDEX, T_WRENCH_BODY, T_PAIR_OUT, T_IDS, T_COLUMNS, T_PIV, T_UNSAT,
                      T_CONTACT_MODES))
BOOL_ROWS = frozenset((T_MODES,))


@njit(cache=True, inline="always")
def body_wrenches(q, body_int, body_float, wrench_body, wrench, external):
    """The scripted wrenches on free bodies (a frame at the joint frame) as generalized forces into ``external``
    (nv,), as ``stages.external_forces``: zeros, then per wrench i on body row b = wrench_body[i, 0] (R^T f, R^T m)
    on the body's six (body-frame) velocities, R its world rotation at q (``body_placement``, Pinocchio's oMi
    rotation to the bit), written when it is the only wrench on the body (wrench_body[i, 1] = 1), else added.
    ``wrench`` (wrenches, 6): [f (N); m (N m)] in the world frame. Each entry is w0 R[0, c] + w1 R[1, c] +
    w2 R[2, c] in that order (numpy's w @ R through BLAS may sum in another order: equal to round-off, and to the
    bit when two of the three w_k are zero, as a push along one axis)."""
    for a in range(external.shape[0]):
        external[a] = 0.0
    for i in range(wrench_body.shape[0]):
        b = wrench_body[i, 0]
        iv = body_int[b, BI_V]
        R, _ = body_placement(q, body_int[b, BI_Q], body_float[b])
        alone = wrench_body[i, 1] != 0
        for row in range(2):
            w0, w1, w2 = wrench[i, 3 * row], wrench[i, 3 * row + 1], wrench[i, 3 * row + 2]
            for c in range(3):
                value = w0 * R[c] + w1 * R[3 + c] + w2 * R[6 + c]
                if alone:
                    external[iv + 3 * row + c] = value
                else:
                    external[iv + 3 * row + c] += value


@njit(cache=True, inline="always")
def table_views(t):
    """The views of the arrays the step reads and writes (the T_* rows of ``t`` in their shapes) but the wrench
    and the result slots', as one tuple (``free_body_tamsi_advance`` makes them once for all its steps)."""
    return (_i2(t, T_BODY_INT), _i2(t, T_PAIR_INT), _i2(t, T_PAIR_IDS), _i1(t, T_JOINT_COLUMNS),
            _i1(t, T_COLUMN_DOF), _i1(t, T_FREE_V), _i1(t, T_TREE_PTR), _i1(t, T_FINISH_INDEX),
            _i2(t, T_WRENCH_BODY), _f2(t, T_BODY_FLOAT), _f1(t, T_GRAVITY), _f2(t, T_M), _f2(t, T_PAIR_FLOAT),
            _f2(t, T_PAIR_MATERIAL), _f1(t, T_THICKNESS), _f1(t, T_SCALARS), _f1(t, T_NLE), _f2(t, T_J),
            _f1(t, T_POSITION_ERROR), _f1(t, T_V_ENGINE), _f3(t, T_PLACEMENT), _f3(t, T_RAW), _f2(t, T_POINT),
            _f2(t, T_NORMAL), _f1(t, T_PHI), _f3(t, T_ROTATION), _f2(t, T_JACOBIAN), _f2(t, T_MATERIAL),
            _f2(t, T_REL), _f1(t, T_BIAS), _i1(t, T_PAIR_OUT), _i2(t, T_IDS), _i2(t, T_COLUMNS),
            (_f1(t, T_PARAMS), _f2(t, T_WORK_NV), _f2(t, T_A), _f2(t, T_BJ), _f2(t, T_HISTORY), _i1(t, T_PIV),
             _i2(t, T_UNSAT)),
            (_f3(t, T_WORK_C), _f2(t, T_CWORK), _f1(t, T_PI_FROZEN), _f1(t, T_DELTA0), _i2(t, T_CONTACT_MODES)),
            _f2(t, T_ROWS), carray(bool_pointer(t[T_MODES, 0]), (t[T_MODES, 1], t[T_MODES, 2])),
            _f1(t, T_FINISH_VALUES))


@njit(cache=True, inline="always")
def fused_step_views(q0, v0, dt, has_penetration, views, wrench, outputs, impulse, q_next, v_out):
    """``free_body_tamsi_step`` on the views of ``table_views`` (``has_penetration``: the flag I_PENETRATION)."""
    (body_int, pair_int, pair_ids, joint_columns, column_dof, free_v, tree_ptr, finish_index, wrench_body, body_float,
     gravity, M, pair_float, pair_material, thickness, scalars, nle, J, position_error, v_engine, placement, raw, point,
     normal, phi, rotation, jacobian, material, rel, bias, pair_out, ids, columns, tamsi_fixed,
     tamsi_contact, rows, modes, finish_values) = views
    params, work_nv, A, BJ, history, piv, unsat = tamsi_fixed
    work_c, cwork, pi_frozen, delta0, contact_modes = tamsi_contact
    margin, stiction_tolerance, fraction = scalars[0], scalars[1], scalars[2]
    free_body_kinematics(q0, body_int, body_float, placement, J)
    free_body_bias_force(q0, v0, body_int, body_float, gravity, nle)
    r, n = sphere_halfspace_contacts(placement, pair_int, pair_float, margin, pair_out, raw, pair_ids,
                                     pair_material, J, joint_columns, column_dof, ids, point, normal, phi, rotation,
                                     jacobian, material, rel, columns)
    if wrench_body.shape[0] > 0:
        body_wrenches(q0, body_int, body_float, wrench_body, wrench, rows[step_kernels.EXTERNAL])
    step_kernels.prepare_step(M, v0, nle, position_error, rows, modes, free_v, stiction_tolerance, tree_ptr)
    # newton_step_packed on the views made once (table_views)
    status, iterations, err, count, info = newton_solve(
        M, v0, rows[step_kernels.TAU], rows[step_kernels.DAMPING_OUT], dt,
        (rows[step_kernels.EFFORT], rows[step_kernels.KP_OUT], rows[step_kernels.KD_OUT],
         rows[step_kernels.ERROR_OUT], rows[step_kernels.V_TARGET], rows[step_kernels.EFFORT_LIMIT]),
        (jacobian[:3 * n], bias[:3 * n], phi[:n], material[0, :n], material[1, :n], material[2, :n]),
        (params[P_STICTION], params[P_TOLERANCE], params[P_THETA_MAX], int(params[P_MAX_ITERATIONS]),
         params[P_USE_TALS] != 0.0, params[P_SMOOTH] != 0.0, params[P_TWO_WAY] != 0.0),
        (work_nv[0], work_nv[1], work_nv[2], work_nv[3], work_nv[4], work_nv[5], unsat[0], unsat[1], A, piv, BJ,
         work_nv[6], work_nv[7]),
        (work_c[0], work_c[1], work_c[2], cwork, pi_frozen, contact_modes[0], contact_modes[1], history, delta0),
        (v_engine, impulse[:n], outputs[1], outputs[2]))
    code = -1
    if status == tamsi_kernels.CONVERGED:
        integrate_rotations(q0, v_engine, dt, body_int, q_next)
        code = step_kernels.finish_step(q0, q_next, v_engine, v_out, dt, step_kernels.FROZEN_FRAME, M,
                                       finish_index, finish_values)
    deep = False
    if has_penetration and n > 0:
        deep = deepest_excess(phi[:n], ids[0, :n], ids[1, :n], thickness, fraction, thickness[:0]) >= 0
    return status, iterations, err, count, info, n, r, code, deep


@njit(cache=True)
def free_body_tamsi_step(q0, v0, dt, table, slot, q_next, v_out):
    """The step of the module docstring. Inputs: the state (q0, v0) and dt (s); ``table`` the address table
    (FreeBodyTamsiStep.table, T_* rows) of the constants, the buffers and the Simulator's data: its data rows
    (step_kernels.N_ROWS, nv) (the EXTERNAL row holds the scripted wrenches; EFFORT, V_TARGET, EFFORT_LIMIT the
    commands), modes (2, nv), finish_step's values, and T_WRENCH (wrenches, 6) the scene's scripted wrenches at
    the step's start (world frame [f N; m N m], ``body_wrenches`` writes the EXTERNAL row from them; (0, 6) when
    the Simulator wrote it, or there are none). Outputs: into result slot ``slot`` (0 or 1, the Simulator's
    ``data.slots``) its outputs (3, nv) (rows 1, 2: the generalized contact force and the actuation, N or N m) and
    impulses (pairs, 3) (first n rows, N s); q_next (nq,), v_out (nv,) the new state (when the finish code is OK);
    TAMSI's velocity is the T_V_ENGINE row.

    Returns (status, iterations, err, history count, info, n contacts, r raw contacts, finish code, deep):
    status as ``tamsi_kernels.newton_step`` (the finish code is only computed when it is CONVERGED, else -1);
    ``deep`` True when a contact is deeper than the penetration bound alone (``penetration_kernels``' pass without
    the last step's approach: ``PenetrationCheck.check`` then decides and says why; False: it would return '')."""
    return fused_step_views(q0, v0, dt, _i1(table, T_FLAGS)[I_PENETRATION] != 0, table_views(table),
                            _f2(table, T_WRENCH), _f2(table, T_OUTPUTS_A + 2 * slot),
                            _f2(table, T_IMPULSE_A + 2 * slot), q_next, v_out)


@njit(cache=True)
def free_body_tamsi_advance(q0, v0, dt, n_steps, table, first, wrenches, q_out, v_out):
    """Up to ``n_steps`` steps of ``free_body_tamsi_step`` from (q0, v0) in one call, each from the state the
    previous one made, stopping BEFORE a step that is not a clean success (TAMSI not converged, a non-OK finish
    code, or a contact beyond the penetration bound alone): that step is left to ``Simulator.step``, which runs it
    again from the same state (the same numbers) and handles it (the divergence and penetration checks, the staged
    step's sub-steps). Step j writes its outputs into result slot ``first`` when j is even, else into the other
    one (the Simulator alternates its two ResultSlots); the states between steps go to the table's T_Q_STATE
    (2, nq), T_V_STATE (2, nv) in turn; the last committed state is copied into q_out (nq,), v_out (nv,)
    (untouched when none is). The commands in the table's data rows and modes are the same for every step;
    ``wrenches`` (n_steps, wrenches, 6) the scripted wrenches at each step's start (``free_body_tamsi_step``'s
    T_WRENCH per step; (n_steps, 0, 6): none, the EXTERNAL row is the same for every step).

    Returns (m, iterations, err, count, n, r): m the committed steps (m < n_steps: step m was not clean), and
    the last committed step's iterations, err, history count, contacts and raw contacts (m = 0: those of the
    attempted step, not to be used)."""
    views = table_views(table)
    has_penetration = _i1(table, T_FLAGS)[I_PENETRATION] != 0
    q_state, v_state = _f2(table, T_Q_STATE), _f2(table, T_V_STATE)
    slot_outputs = (_f2(table, T_OUTPUTS_A + 2 * first), _f2(table, T_OUTPUTS_A + 2 * (1 - first)))
    slot_impulse = (_f2(table, T_IMPULSE_A + 2 * first), _f2(table, T_IMPULSE_A + 2 * (1 - first)))
    q, v = q0, v0
    m = 0
    iterations, err, count, n, r = 0, 0.0, 0, 0, 0
    for j in range(n_steps):
        q_next, v_next = q_state[j % 2], v_state[j % 2]
        status, it, e, c, info, nj, rj, code, deep = fused_step_views(
            q, v, dt, has_penetration, views, wrenches[j], slot_outputs[j % 2], slot_impulse[j % 2], q_next, v_next)
        if code != step_kernels.OK or deep:       # code is -1 when TAMSI did not converge
            break
        q, v = q_next, v_next
        m += 1
        iterations, err, count, n, r = it, e, c, nj, rj
    if m > 0:
        for a in range(q.shape[0]):
            q_out[a] = q[a]
        for a in range(v.shape[0]):
            v_out[a] = v[a]
    return m, iterations, err, count, n, r


class FreeBodies:
    """A model whose joints are all free flyers on the world (free objects, no robot: the clutter, a ball, a box):
    its per-body constants (``body_int``, ``body_float`` above; the contact query's placement slot of each body)
    and its constant mass matrix ``mass_matrix`` (nv, nv): in Pinocchio's local-frame free-flyer velocities a
    body's block is its spatial inertia (6 x 6, kg, kg m, kg m^2), independent of q (``pin.crba`` gives the same to
    round-off). The Simulator's staged step of such a model takes M from here and the joint placements, nle and
    g(q) from q in compiled passes instead of Pinocchio's crba, nonLinearEffects, computeGeneralizedGravity and the
    per-joint ``data.oMi`` reads (clutter, 40 bodies: ~100 us per step); the fused TAMSI step uses the same
    constants."""

    @staticmethod
    def of(model, contact_query) -> "FreeBodies | None":
        """The constants of ``model`` (a MultibodyModel) if it qualifies (every joint a free flyer whose parent is
        the world), else None."""
        pm = model.pin_model
        if pm.njoints < 2 or any(pm.joints[j].shortname() != "JointModelFreeFlyer" or pm.parents[j] != 0
                                 for j in range(1, pm.njoints)):
            return None
        return FreeBodies(pm, contact_query)

    def __init__(self, pm, contact_query):
        slot_of_joint = {j: s for s, j in contact_query.analytic_joint_slots}
        joints = list(range(1, pm.njoints))
        self.body_int = np.array([[pm.joints[j].idx_q, pm.joints[j].idx_v, slot_of_joint.get(j, 0)] for j in joints],
                                 dtype=np.int64).reshape(-1, 3)
        self.body_float = np.zeros((len(joints), BODY_FLOATS))
        M = np.zeros((pm.nv, pm.nv))
        for row, j in zip(self.body_float, joints):
            placement, inertia = pm.jointPlacements[j], pm.inertias[j]
            row[BF_R:BF_R + 9] = placement.rotation.reshape(-1)
            row[BF_T:BF_T + 3] = placement.translation
            row[BF_MASS] = inertia.mass
            row[BF_LEVER:BF_LEVER + 3] = inertia.lever
            row[BF_INERTIA:BF_INERTIA + 9] = inertia.inertia.reshape(-1)
            iv = pm.joints[j].idx_v
            M[iv:iv + 6, iv:iv + 6] = inertia.matrix()       # the body-frame spatial inertia: M of a free flyer
        self.mass_matrix = M
        # every joint placement the identity (the scenes' free objects): ``free_body_kinematics``' J is then
        # computeJointJacobians' bit for bit (else equal to round-off)
        self.identity_placements = bool(np.all(self.body_float[:, BF_R:BF_T + 3] == np.r_[np.eye(3).reshape(-1),
                                                                                          np.zeros(3)]))
        self.gravity = np.array(pm.gravity.linear, dtype=float)
        self.nq, self.nv = pm.nq, pm.nv
        self._contact_query = contact_query     # its placements by slot (a fused step may move them: read each time)
        self._no_jacobian = np.zeros((6, 0))
        self._nle = np.zeros(pm.nv)
        self._weight = np.zeros(pm.nv)
        self._zero = np.zeros(pm.nv)            # v = 0 (g(q) = nle(q, 0)); the position error (no actuated joint)

    @property
    def zero_velocity(self) -> np.ndarray:
        """(nv,) zeros, not to be written: the position error of a model without actuated joints."""
        return self._zero

    def update_placements(self, q: np.ndarray) -> None:
        """The contact query's joint placement slots (``ContactQuery.analytic_placements``) at q."""
        free_body_kinematics(q, self.body_int, self.body_float, self._contact_query.analytic_placements,
                             self._no_jacobian)

    def bias_forces(self, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(nle, g): C(q, v) v + g(q) and g(q) (nv,) (N, N m; as ``pin.nonLinearEffects`` and
        ``pin.computeGeneralizedGravity`` to round-off); buffers overwritten at the next call."""
        free_body_bias_force(q, v, self.body_int, self.body_float, self.gravity, self._nle)
        free_body_bias_force(q, self._zero, self.body_int, self.body_float, self.gravity, self._weight)
        return self._nle, self._weight

    def integrate_rotations(self, q0: np.ndarray, v: np.ndarray, dt: float) -> np.ndarray:
        """A fresh q (nq,) with the quaternions of ``pin.integrate(q0, dt v)`` (``integrate_rotations``); its
        translations are left to ``step_kernels.finish_step``'s frozen-frame update (FROZEN_FRAME)."""
        q = np.empty(self.nq)
        integrate_rotations(q0, v, dt, self.body_int, q)
        return q


def _pack(arrays, dtype, start: int = 0) -> tuple[np.ndarray, list, list]:
    """(block, offsets, views): ``arrays`` back to back in one 1-D block of ``dtype`` after ``start`` leading
    entries, the len + 1 offsets of their sections and each one's view in its shape (values copied)."""
    offsets = [start]
    for a in arrays:
        offsets.append(offsets[-1] + int(np.size(a)))
    block = np.zeros(offsets[-1], dtype=dtype)
    views = []
    for a, at in zip(arrays, offsets):
        a = np.asarray(a)
        view = block[at:at + a.size].reshape(a.shape)
        view[...] = a
        views.append(view)
    return block, offsets, views


class FreeBodyTamsiStep:
    """The Simulator's fused step for a qualifying scene (module docstring): mostly data, the arguments of
    ``free_body_tamsi_step`` besides the state and the Simulator's data, packed ONCE from the Simulator's model,
    data and parts (as the stages of sim/stages.py take them) into four 1-D blocks, and the address ``table``
    (T_* rows above) of their sections, the Simulator's data and result slots. The contact query's all-analytic buffers and TAMSI's kernel scratch are moved into
    views of ``data_float`` / ``data_int`` (ContactQuery.use_analytic_buffers, TamsiEngine.use_kernel_scratch): the
    query's ContactSet and the engine's iteration history read what the kernel wrote.

    ``model_int`` (int64), ``model_float``: the constants; ``data_float``, ``data_int`` (int64): the buffers;
    ``mass_matrix`` (nv, nv) the constant M (a view of model_float); ``v_engine`` (nv,) TAMSI's velocity of the
    last call (a view of data_float); ``pairs``: the query's pairs (every pair gives at most one contact);
    ``wrenches_in_kernel``: the scene's scripted wrenches are applied in the call (``wrench_at`` /
    ``wrench_steps`` evaluate them: (wrenches, 6), (steps, wrenches, 6)); ``q_state``, ``v_state`` (2, nq), (2, nv):
    the states between the steps of one ``free_body_tamsi_advance`` call; ``arrays``: every array the table
    points into (held: their memory lives as long as this object)."""

    @staticmethod
    def qualifies(model, parts) -> bool:
        """True for a Simulator whose model (sim_model.SimModel) and parts (stages.StepParts) this path covers
        exactly (module docstring): the engine is TAMSI (by its registry name: this kernel module imports no
        engine) with its compiled kernel."""
        pm = parts.pin_model
        n_free = len(model.free_q_index)
        return (parts.engine.name == "tamsi" and parts.engine.compiled
                and parts.free_bodies is not None and n_free == pm.njoints - 1 and pm.nq == 7 * n_free
                and parts.contact_query.all_analytic and not model.has_joint_scripts
                and not model.has_surface_velocities)

    def __init__(self, model, data, parts):
        """``model``, ``data``, ``parts``: the Simulator's SimModel, SimData and StepParts (sim/sim_model.py,
        sim/sim_data.py, sim/stages.py), for which ``qualifies`` holds."""
        cq, engine, bodies = parts.contact_query, parts.engine, parts.free_bodies
        nv = model.nv
        self.pairs = pairs = cq.num_pairs
        buffers = cq.analytic_buffers()
        fixed, ifixed, contact, icontact = engine.kernel_scratch(pairs)
        (placement, an_int, an_float, margin, _, _, pair_ids, pair_material), \
            (joint_columns, column_dof, *_), _ = cq.analytic_step_arguments()
        # the scripted wrenches: applied in the call (body_wrenches) when every one acts on a free body at its joint
        # frame (stages.external_forces' case without a Jacobian), else the Simulator writes data.external
        forces, targets = parts.external_forces, model.wrench_targets
        self.wrenches_in_kernel = bool(forces) and all(t >= 0 and f.wrench is not None
                                                       for f, t in zip(forces, targets))
        self.external_forces = forces if self.wrenches_in_kernel else ()
        row_of_v = {int(iv): b for b, iv in enumerate(bodies.body_int[:, BI_V])}
        wrench_body = np.array([[row_of_v[t], view is not None] for t, view in zip(targets, data.wrench_views)]
                               if self.wrenches_in_kernel else np.zeros((0, 2)), dtype=np.int64).reshape(-1, 2)
        # the wrenches' values [f N; m N m] (world frame) of one step, of the steps of one advance call
        self.wrench = np.zeros((len(wrench_body), 6))
        self._wrench_steps = np.zeros((0, len(wrench_body), 6))
        self.model_int, _, (body_int, pair_int, ids_, columns_, dof_, free_v, tree_ptr, finish_index, wrench_rows) = \
            _pack((bodies.body_int, an_int, pair_ids, joint_columns, column_dof, model.free_v_index, model.tree_ptr,
                   model.finish_index, wrench_body), np.int64)
        penetration = parts.penetration
        self.model_float, _, float_views = _pack(
            (bodies.body_float, bodies.gravity, bodies.mass_matrix, an_float, pair_material,
             penetration.thickness if penetration is not None else np.zeros(0),
             (margin, model.friction_tolerance, penetration.fraction if penetration is not None else 0.0)), float)
        self.mass_matrix = float_views[2]
        names_float = ("placement", "raw", "point", "normal", "phi", "rotation", "jacobian", "material", "rel",
                       "bias")
        self.data_float, _, views = _pack(
            (np.zeros(nv), np.zeros((6, nv)), np.zeros(nv), np.zeros(nv), *(buffers[k] for k in names_float),
             fixed, contact), float)
        self.v_engine = views[3]
        # the states between the steps of one ``free_body_tamsi_advance`` call, in turn (m, rad, m/s, rad/s)
        self.q_state, self.v_state = np.zeros((2, model.nq)), np.zeros((2, nv))
        names_int = ("pair_out", "ids", "columns")
        self.data_int, _, views_int = _pack((*(buffers[k] for k in names_int), ifixed, icontact), np.int64)
        self._no_wrench_steps = np.zeros((0, 0, 6))
        cq.use_analytic_buffers({**dict(zip(names_float, views[4:4 + len(names_float)])),
                                 **dict(zip(names_int, views_int[:len(names_int)]))})
        engine.use_kernel_scratch(views[-2], views_int[-2], views[-1], views_int[-1])
        self.flags = np.zeros(N_FLAGS, dtype=np.int64)
        self.flags[I_PENETRATION] = penetration is not None
        # TAMSI's scratch cut as newton_step_packed cuts it (views of data_float / data_int)
        tamsi_fixed = tamsi_kernels.fixed_views(views[-2], views_int[-2], nv)
        tamsi_contact = tamsi_kernels.contact_views(views[-1], views_int[-1])
        entries = dict(zip(
            (T_FLAGS, T_BODY_INT, T_PAIR_INT, T_PAIR_IDS, T_JOINT_COLUMNS, T_COLUMN_DOF, T_FREE_V, T_TREE_PTR,
             T_FINISH_INDEX, T_WRENCH_BODY),
            (self.flags, body_int, pair_int, ids_, columns_, dof_, free_v, tree_ptr, finish_index, wrench_rows)))
        entries.update(zip(range(T_BODY_FLOAT, T_SCALARS + 1), float_views))
        entries.update(zip(range(T_NLE, T_BIAS + 1), views[:-2]))
        entries.update(zip(range(T_PAIR_OUT, T_COLUMNS + 1), views_int[:-2]))
        entries.update(zip(range(T_PARAMS, T_UNSAT + 1), tamsi_fixed))
        entries.update(zip(range(T_WORK_C, T_CONTACT_MODES + 1), tamsi_contact))
        entries.update({T_ROWS: data.rows, T_MODES: data.modes, T_FINISH_VALUES: data.finish_values,
                        T_WRENCH: self.wrench, T_Q_STATE: self.q_state, T_V_STATE: self.v_state})
        self._slots = data.slots
        entries.update(self._slot_entries())
        if sorted(entries) != list(range(N_TABLE)):
            raise ValueError("free_body_step: the address table misses an entry")
        for k, arr in entries.items():
            want = np.int64 if k in INT_ROWS else np.bool_ if k in BOOL_ROWS else np.float64
            if arr.dtype != want:
                raise ValueError(f"free_body_step: table entry {k} must be {np.dtype(want)}, got {arr.dtype}")
        self.arrays = entries              # every array the table points into, held while this object lives
        self.table = np.array([table_row(entries[k], "free_body_step") for k in range(N_TABLE)], dtype=np.int64)
        # set by the Simulator when a staged step ran (it may grow a result slot's impulses): ``current_slots``
        self.check_slots = False

    def _slot_entries(self) -> dict:
        """The table entries of the two result slots: outputs (3, nv) and impulses (pairs, 3) of each."""
        a, b = self._slots
        return {T_OUTPUTS_A: a.outputs, T_IMPULSE_A: a.rows(self.pairs)[0], T_OUTPUTS_B: b.outputs,
                T_IMPULSE_B: b.rows(self.pairs)[0]}

    def current_slots(self) -> None:
        """Points the table at the result slots' impulse buffers again when a slot grew them (a staged step with
        more contacts than its capacity; each pair of these scenes gives at most one, so in practice never)."""
        entries = self._slot_entries()
        if any(entries[k] is not self.arrays[k] for k in entries):
            self.arrays.update(entries)
            for k, arr in entries.items():
                self.table[k] = table_row(arr, "free_body_step")

    def wrench_at(self, t: float) -> np.ndarray:
        """``wrench`` (wrenches, 6) filled with the scripted wrenches at sim time t (s) (``wrenches_in_kernel``)."""
        for i, f in enumerate(self.external_forces):
            self.wrench[i] = f.wrench(t)
        return self.wrench

    def wrench_steps(self, t: float, dt: float, n: int) -> np.ndarray:
        """(n, wrenches, 6): the scripted wrenches at the starts of n steps from sim time t, the times summed up as n
        steps add dt (s) to the sim time; (n, 0, 6) without in-call wrenches."""
        k = len(self.external_forces)
        if k == 0:
            if self._no_wrench_steps.shape[0] < n:
                self._no_wrench_steps = np.zeros((n, 0, 6))
            return self._no_wrench_steps[:n]
        if self._wrench_steps.shape[0] < n:
            self._wrench_steps = np.zeros((n, k, 6))
        steps = self._wrench_steps[:n]
        for j in range(n):
            for i, f in enumerate(self.external_forces):
                steps[j, i] = f.wrench(t)
            t += dt
        return steps
