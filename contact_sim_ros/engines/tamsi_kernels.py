"""Compiled (numba) kernels of the TAMSI step: the whole Newton iteration of one step in one call.

The readable reference is the numpy implementation in ``tamsi.py`` (``TamsiEngine`` with ``kernel="numpy"``):
every function here mirrors one of its methods, loop by loop over contacts, with the same equations of
Castro et al. 2020 and the same decisions (convergence test, TALS cases, simplified-Newton exit), so that both
paths give the same result to round-off (``test/test_engine_tamsi.py`` compares them on random problems and on
the gripper scene). Why compiled: with 2-20 contacts and nv = 9-22 the numpy path makes ~120 calls of 1-3 us on
tiny arrays per step; here the step is one call.

Conventions as in ``tamsi.py``: per contact the rows of J are (t1, t2, n); v_c = J v + bias is the velocity of B
relative to A; forces f = (f_t1, f_t2, pi) act on B. Units: velocities m/s (or rad/s), forces N, impulses N s,
h in s, k in N/m, d in s/m.

All arrays passed in are float64 and C-contiguous; contact-sized work arrays may be longer than the number of
contacts n = delta0.shape[0] (they are the engine's preallocated scratch, grown only when needed). Compiled with
``cache=True``: the first call of a fresh checkout compiles (a few seconds, once), later processes load the
machine code from ``__pycache__``.
"""

from __future__ import annotations

import math

import numpy as np
from ..jit import njit

# status codes returned by ``newton_step`` (the engine maps them to SolverStatus and a message)
CONVERGED = 0
MAX_ITERATIONS = 1
SINGULAR = 2          # an exactly zero pivot in the LU factorization
NON_FINITE = 3        # non-finite Newton update

# columns of the per-contact scalar work array ``cwork`` (n, 5)
PI, DPI, VT_NORM, G, C = 0, 1, 2, 3, 4


@njit(cache=True, inline="always")
def actuation_force(effort, kp, kd, position_error, velocity_target, effort_limit, v, h, tau, dtau):
    """Implicit PD + effort actuation at end-of-step velocity v (``engines.base.Actuation.force``):
    tau = clip(effort + kp (e - h v) + kd (v_target - v), -limit, limit) (N or N m) into ``tau``, and the diagonal of
    d tau / d v (<= 0; zero where saturated) into ``dtau``."""
    for j in range(v.shape[0]):
        raw = effort[j] + kp[j] * (position_error[j] - h * v[j]) + kd[j] * (velocity_target[j] - v[j])
        tau[j] = min(max(raw, -effort_limit[j]), effort_limit[j])
        dtau[j] = -(h * kp[j] + kd[j]) if abs(raw) < effort_limit[j] else 0.0


@njit(cache=True, inline="always")
def actuation_unsaturated(effort, kp, kd, position_error, velocity_target, effort_limit, v, h, out):
    """out[j] = the implicit PD + effort command of dof j is inside its effort limit at velocity v."""
    for j in range(v.shape[0]):
        raw = effort[j] + kp[j] * (position_error[j] - h * v[j]) + kd[j] * (velocity_target[j] - v[j])
        out[j] = abs(raw) < effort_limit[j]


@njit(cache=True, inline="always")
def normal_force(vn, delta0, k, d, h):
    """Hunt & Crossley with the implicit penetration of eq. (19): pi = k (1 - d v_n)_+ (delta0 - h v_n)_+ (N) and
    d pi / d v_n (N s/m, <= 0)."""
    damping = 1.0 - d * vn
    damping_p = max(damping, 0.0)
    delta_p = max(delta0 - h * vn, 0.0)
    pi = k * damping_p * delta_p
    dpi = -k * (d * delta_p * (1.0 if damping > 0.0 else 0.0) + h * damping_p * (1.0 if delta_p > 0.0 else 0.0))
    return pi, dpi


@njit(cache=True, inline="always")
def friction_gains(vt_norm, mu, vs, smooth):
    """Regularized friction (eqs. 6-7) at slip speed |v_t| (m/s): g = mu~(s) / |v_t| and c = mu~'(s) / v_s - g (s/m),
    so that f_t = -pi g v_t and d f_t / d v_t = -pi (g I + c t t^T)."""
    if smooth:
        s = vt_norm / vs
        if s > 1.0:
            g = mu / vt_norm
            return g, -g
        return mu / (vs / (2.0 - s)), -mu * s / vs
    g = mu / max(vt_norm, vs)
    return g, (-g if vt_norm > vs else 0.0)


@njit(cache=True, inline="always")
def residual(M, p_star, hD, h, tau, J, bias, delta0, k, d, mu, vs, smooth, two_way, pi_frozen, v,
             r, vc, f, cwork):
    """Residual of eq. (21) at v (N s) into ``r``, given the actuation ``tau`` at v:
    r = M0 v - p* + h D v - h tau_act - h J^T f(v). Also fills, per contact i < n, vc[i] = J_i v + bias_i (m/s),
    f[i] = (-pi g v_t, pi) (N, eqs. 5-7 with eq. 19) and cwork[i] = (pi, d pi/d v_n, |v_t|, g, c)."""
    nv = v.shape[0]
    n = delta0.shape[0]
    for a in range(nv):
        acc = 0.0
        for b in range(nv):
            acc += M[a, b] * v[b]
        r[a] = acc - p_star[a] + (hD[a] * v[a] - h * tau[a])
    for i in range(n):
        for row in range(3):
            acc = bias[3 * i + row]
            Jrow = J[3 * i + row]
            for b in range(nv):
                acc += Jrow[b] * v[b]
            vc[i, row] = acc
        if two_way:
            pi, dpi = normal_force(vc[i, 2], delta0[i], k[i], d[i], h)
        else:
            pi, dpi = pi_frozen[i], 0.0
        vt_norm = math.hypot(vc[i, 0], vc[i, 1])
        g, c = friction_gains(vt_norm, mu[i], vs, smooth)
        pg = pi * g
        f[i, 0] = -pg * vc[i, 0]
        f[i, 1] = -pg * vc[i, 1]
        f[i, 2] = pi
        cwork[i, PI] = pi
        cwork[i, DPI] = dpi
        cwork[i, VT_NORM] = vt_norm
        cwork[i, G] = g
        cwork[i, C] = c
        if f[i, 0] != 0.0 or f[i, 1] != 0.0 or pi != 0.0:
            for b in range(nv):
                r[b] -= h * (J[3 * i, b] * f[i, 0] + J[3 * i + 1, b] * f[i, 1] + J[3 * i + 2, b] * pi)


@njit(cache=True, inline="always")
def newton_jacobian(M, hD, h, dtau, J, vc, cwork, n, A, BJ):
    """Newton Jacobian of eq. (23) at the last ``residual`` iterate (kg) into ``A``:
    A = M0 + h diag(D - d tau/dv) + h sum_i J_i^T B_i J_i with B_i = -d f_i / d v_c,i (3x3): the tangential block of
    eq. (16) (W_tt), the normal term of eq. (20) (W_nn) and the coupling of eq. (22) (W_tn). Contacts with B_i = 0
    (no force and no force gradient: separated) are skipped. ``BJ`` is (3, nv) scratch."""
    nv = A.shape[0]
    for a in range(nv):
        for b in range(nv):
            A[a, b] = M[a, b]
        A[a, a] += hD[a] - h * dtau[a]
    for i in range(n):
        pi = cwork[i, PI]
        dpi = cwork[i, DPI]
        if pi == 0.0 and dpi == 0.0:
            continue
        vt0 = vc[i, 0]
        vt1 = vc[i, 1]
        vt_norm = cwork[i, VT_NORM]
        g = cwork[i, G]
        pg = pi * g
        cpi = cwork[i, C] * pi / max(vt_norm * vt_norm, 1e-300)
        # B_i in nine scalars (no (3, 3) array allocated per call), the same products as a (3, 3) array's
        b00 = vt0 * vt0 * cpi + pg
        b01 = vt0 * vt1 * cpi
        b10 = vt1 * vt0 * cpi
        b11 = vt1 * vt1 * cpi + pg
        b02 = vt0 * (g * dpi)              # W_tn: friction follows the normal force
        b12 = vt1 * (g * dpi)
        b20 = 0.0
        b21 = 0.0
        b22 = -dpi                         # W_nn
        for b in range(nv):
            J0, J1, J2 = J[3 * i, b], J[3 * i + 1, b], J[3 * i + 2, b]
            BJ[0, b] = b00 * J0 + b01 * J1 + b02 * J2
            BJ[1, b] = b10 * J0 + b11 * J1 + b12 * J2
            BJ[2, b] = b20 * J0 + b21 * J1 + b22 * J2
        for a in range(nv):
            j0 = h * J[3 * i, a]
            j1 = h * J[3 * i + 1, a]
            j2 = h * J[3 * i + 2, a]
            if j0 == 0.0 and j1 == 0.0 and j2 == 0.0:
                continue
            for b in range(nv):
                A[a, b] += j0 * BJ[0, b] + j1 * BJ[1, b] + j2 * BJ[2, b]


@njit(cache=True, inline="always")
def tals_alpha(vt0, vt1, dvt0, dvt1, vt_norm, vs, eps, cos_max, sin_max):
    """TALS step limit alpha_i in (0, 1] of one contact (section III-A), the cases of ``TamsiEngine._tals_alpha``:
    stiction -> sliding stops at v_s/2; sliding -> ~0 stops v_s/2 short; sliding -> sliding across the stiction
    circle stops where v_t^{k+1} . dv_t = 0; an angle change above theta_max is limited to theta_max."""
    v1_0 = vt0 + dvt0
    v1_1 = vt1 + dvt1
    v1_norm = math.hypot(v1_0, v1_1)
    sliding0 = vt_norm > vs
    sliding1 = v1_norm > vs
    if not (sliding0 or sliding1):
        return 1.0
    alpha = 1.0
    dv_norm = math.hypot(dvt0, dvt1)
    if dv_norm < eps:
        return 1.0
    half_vs_dv = 0.5 * vs / max(dv_norm, eps)
    if vt_norm < eps and sliding1:
        alpha = half_vs_dv
    if sliding0 and v1_norm < eps:
        alpha = 1.0 - half_vs_dv
    if sliding0 and sliding1:
        dot = vt0 * dvt0 + vt1 * dvt1
        a_star = -dot / max(dv_norm * dv_norm, eps * eps)
        closest2 = vt_norm * vt_norm + dot * a_star
        if 0.0 < a_star < 1.0 and closest2 < vs * vs:
            alpha = a_star - half_vs_dv if closest2 < eps * eps else a_star
        elif vt_norm * vt_norm + dot < cos_max * vt_norm * v1_norm:
            denom = abs(vt0 * dvt1 - vt1 * dvt0) * cos_max - dot * sin_max
            alpha = min(sin_max * vt_norm * vt_norm / max(denom, 1e-300), 1.0)
    return min(max(alpha, 1e-12), 1.0)


@njit(cache=True, inline="always")
def lu_factor(A, piv):
    """In-place LU with partial pivoting (as LAPACK getrf): P A = L U, L unit lower. Returns 0, or k + 1 if the
    pivot of column k is exactly zero (singular)."""
    nv = A.shape[0]
    info = 0
    for col in range(nv):
        p = col
        best = abs(A[col, col])
        for row in range(col + 1, nv):
            if abs(A[row, col]) > best:
                best = abs(A[row, col])
                p = row
        piv[col] = p
        if p != col:
            for b in range(nv):
                tmp = A[col, b]
                A[col, b] = A[p, b]
                A[p, b] = tmp
        pivot = A[col, col]
        if pivot == 0.0:
            if info == 0:
                info = col + 1
            continue
        inv = 1.0 / pivot
        for row in range(col + 1, nv):
            l = A[row, col] * inv
            A[row, col] = l
            if l != 0.0:
                for b in range(col + 1, nv):
                    A[row, b] -= l * A[col, b]
    return info


@njit(cache=True, inline="always")
def lu_solve(LU, piv, b, x):
    """x = A^-1 b from ``lu_factor``'s factors (x may not alias b)."""
    nv = LU.shape[0]
    for a in range(nv):
        x[a] = b[a]
    for a in range(nv):
        p = piv[a]
        if p != a:
            tmp = x[a]
            x[a] = x[p]
            x[p] = tmp
    for a in range(nv):
        acc = x[a]
        for b in range(a):
            acc -= LU[a, b] * x[b]
        x[a] = acc
    for a in range(nv - 1, -1, -1):
        acc = x[a]
        for b in range(a + 1, nv):
            acc -= LU[a, b] * x[b]
        x[a] = acc / LU[a, a]


@njit(cache=True, inline="always")
def _contact_update_norm(J, x, n, dvc):
    """max_i |J_i x|_inf (m/s); the contact velocity changes J x go to dvc (n, 3)."""
    nv = x.shape[0]
    err = 0.0
    for i in range(n):
        for row in range(3):
            acc = 0.0
            Jrow = J[3 * i + row]
            for b in range(nv):
                acc += Jrow[b] * x[b]
            dvc[i, row] = acc
            err = max(err, abs(acc))
    return err


@njit(cache=True, inline="always")
def _modes(cwork, n, vs, out):
    """Per-contact regime: 0 separated (no normal force), 1 stiction, 2 sliding."""
    for i in range(n):
        if cwork[i, PI] > 0.0:
            out[i] = 2 if cwork[i, VT_NORM] > vs else 1
        else:
            out[i] = 0


@njit(cache=True, inline="always")
def generalized_contact_force(J, f, n, out):
    """out = J^T f (N or N m): the generalized force of the contact forces f[:n] (t1, t2, n rows per contact)."""
    nv = out.shape[0]
    for b in range(nv):
        out[b] = 0.0
    for i in range(n):
        if f[i, 0] != 0.0 or f[i, 1] != 0.0 or f[i, 2] != 0.0:
            for b in range(nv):
                out[b] += J[3 * i, b] * f[i, 0] + J[3 * i + 1, b] * f[i, 1] + J[3 * i + 2, b] * f[i, 2]


@njit(cache=True)
def newton_step(M, v0, tau0, damping, h,
                effort, kp, kd, position_error, velocity_target, effort_limit,
                J, bias, signed_distance, k, d, mu,
                vs, tol, theta_max, max_iterations, use_tals, smooth, two_way,
                v, tau, dtau, r, dv, dv_next, unsat0, unsat1, A, piv, BJ,
                vc, dvc, f, cwork, pi_frozen, modes0, modes1, history,
                v_next, impulse, generalized_force, actuation):
    """One TAMSI step (section V-C): Newton on the end-of-step generalized velocities v with TALS, as
    ``TamsiEngine._do_step_numpy``. On return ``v`` holds the last iterate, ``f[:n]`` the contact forces (N) at it,
    ``tau`` the actuation (N or N m) at it, ``history[:count]`` the (|dv|_inf, alpha) of every update; and the
    step's results (fresh arrays of the StepResult): ``v_next`` = v, ``impulse`` (n, 3) = h f (N s),
    ``generalized_force`` = J^T f and ``actuation`` = tau.

    Returns (status, iterations, err, count, info): status one of CONVERGED, MAX_ITERATIONS, SINGULAR,
    NON_FINITE (a non-finite update, or a non-finite v_next, actuation or impulse at the end: CONVERGED guarantees
    finite results); iterations = LU factorizations; err the last update size (m/s); info the zero pivot (SINGULAR).
    ``newton_solve`` with its three temporaries allocated here (``newton_step_packed`` takes them from its scratch).
    """
    nv = v0.shape[0]
    n = signed_distance.shape[0]
    return newton_solve(M, v0, tau0, damping, h, (effort, kp, kd, position_error, velocity_target, effort_limit),
                        (J, bias, signed_distance, k, d, mu),
                        (vs, tol, theta_max, max_iterations, use_tals, smooth, two_way),
                        (v, tau, dtau, r, dv, dv_next, unsat0, unsat1, A, piv, BJ, np.empty(nv), np.empty(nv)),
                        (vc, dvc, f, cwork, pi_frozen, modes0, modes1, history, np.empty(n)),
                        (v_next, impulse, generalized_force, actuation))


@njit(cache=True, inline="always")
def newton_solve(M, v0, tau0, damping, h, actuation_inputs, contact_inputs, options, work, contact_work, outputs):
    """``newton_step`` (its docstring) with its arguments after h in six tuples, in ``newton_step``'s order:
    ``actuation_inputs`` (effort, kp, kd, position_error, velocity_target, effort_limit), ``contact_inputs`` (J,
    bias, signed_distance, k, d, mu), ``options`` (vs, tol, theta_max, max_iterations, use_tals, smooth, two_way),
    ``work`` (v, tau, dtau, r, dv, dv_next, unsat0, unsat1, A, piv, BJ, p_star, hD), ``contact_work`` (vc, dvc, f,
    cwork, pi_frozen, modes0, modes1, history, delta0), ``outputs`` (v_next, impulse, generalized_force,
    actuation); and its temporaries as scratch, no allocation: ``p_star`` (nv,) M0 v0 + h tau0 (N s), ``hD``
    (nv,) h times the damping (N s/m or N m s/rad), ``delta0`` (>= n,) the penetrations at q0 (m), all
    overwritten. Compiled into its callers (inline="always": a call of ~40 arrays costs ~0.5 us of reference
    counting; fewer than 30 arguments, or CPython 3.11 passes them as *args, which numba cannot inline)."""
    effort, kp, kd, position_error, velocity_target, effort_limit = actuation_inputs
    J, bias, signed_distance, k, d, mu = contact_inputs
    vs, tol, theta_max, max_iterations, use_tals, smooth, two_way = options
    v, tau, dtau, r, dv, dv_next, unsat0, unsat1, A, piv, BJ, p_star, hD = work
    vc, dvc, f, cwork, pi_frozen, modes0, modes1, history, delta0 = contact_work
    v_next, impulse, generalized_force, actuation = outputs
    nv = v0.shape[0]
    n = signed_distance.shape[0]
    eps = tol                                     # TALS' "no change" threshold = the convergence tolerance
    cos_max = math.cos(theta_max)
    sin_max = math.sin(theta_max)
    delta0 = delta0[:n]
    for i in range(n):
        delta0[i] = -signed_distance[i]           # penetration at q0 (m)
    for a in range(nv):
        hD[a] = h * damping[a]
    for a in range(nv):                           # M0 v0 + h tau0 (N s)
        acc = 0.0
        for b in range(nv):
            acc += M[a, b] * v0[b]
        p_star[a] = acc + h * tau0[a]
    if not two_way:                               # one-way (section V-A): pi frozen at the start-of-step state
        for i in range(n):
            vn0 = bias[3 * i + 2]
            for b in range(nv):
                vn0 += J[3 * i + 2, b] * v0[b]
            pi_frozen[i] = normal_force(vn0, delta0[i], k[i], d[i], 0.0)[0]
    for a in range(nv):
        v[a] = v0[a]
    actuation_force(effort, kp, kd, position_error, velocity_target, effort_limit, v, h, tau, dtau)
    residual(M, p_star, hD, h, tau, J, bias, delta0, k, d, mu, vs, smooth, two_way, pi_frozen, v, r, vc, f, cwork)
    status = MAX_ITERATIONS
    err = math.inf
    iterations = 0
    count = 0
    info = 0
    while iterations < max_iterations:
        newton_jacobian(M, hD, h, dtau, J, vc, cwork, n, A, BJ)
        info = lu_factor(A, piv)                  # dense LU, eq. (23)
        if info != 0:
            status = SINGULAR
            break
        lu_solve(A, piv, r, dv)
        finite = True
        err = 0.0
        for a in range(nv):
            dv[a] = -dv[a]
            if not math.isfinite(dv[a]):
                finite = False
            err = max(err, abs(dv[a]))
        iterations += 1
        alpha = 1.0
        if not finite:
            err = math.nan
            status = NON_FINITE
            break
        if n:
            err = max(err, _contact_update_norm(J, dv, n, dvc))
            if use_tals:
                for i in range(n):
                    # only contacts that carry (or may carry after the update) a normal force limit the step
                    if two_way:
                        loaded = delta0[i] - h * min(vc[i, 2], vc[i, 2] + dvc[i, 2]) > 0.0
                    else:
                        loaded = cwork[i, PI] > 0.0
                    if loaded:
                        alpha = min(alpha, tals_alpha(vc[i, 0], vc[i, 1], dvc[i, 0], dvc[i, 1], cwork[i, VT_NORM],
                                                      vs, eps, cos_max, sin_max))
        history[count, 0] = err
        history[count, 1] = alpha
        count += 1
        _modes(cwork, n, vs, modes0)
        for a in range(nv):
            v[a] += alpha * dv[a]
        actuation_force(effort, kp, kd, position_error, velocity_target, effort_limit, v, h, tau, dtau)
        residual(M, p_star, hD, h, tau, J, bias, delta0, k, d, mu, vs, smooth, two_way, pi_frozen, v, r, vc, f,
                 cwork)
        if err < tol:
            status = CONVERGED
            break
        if alpha == 1.0:
            _modes(cwork, n, vs, modes1)
            same = True
            for i in range(n):
                if modes0[i] != modes1[i]:
                    same = False
            if same and n == 0:
                # no contacts: the regimes that matter are the actuators' (saturated or not)
                actuation_unsaturated(effort, kp, kd, position_error, velocity_target, effort_limit, v, h, unsat1)
                for a in range(nv):
                    dv_next[a] = v[a] - dv[a]
                actuation_unsaturated(effort, kp, kd, position_error, velocity_target, effort_limit, dv_next, h,
                                      unsat0)
                for a in range(nv):
                    if unsat0[a] != unsat1[a]:
                        same = False
            if same:
                # simplified Newton: the next update A^-1 r with the current LU estimates the remaining error
                lu_solve(A, piv, r, dv_next)
                err_next = 0.0
                for a in range(nv):
                    err_next = max(err_next, abs(dv_next[a]))
                if n:
                    err_next = max(err_next, _contact_update_norm(J, dv_next, n, dvc))
                if err_next < tol:
                    err = err_next
                    history[count, 0] = err
                    history[count, 1] = 0.0           # alpha 0: estimated, not applied
                    count += 1
                    status = CONVERGED
                    break
    finite = True
    for a in range(nv):
        v_next[a] = v[a]
        actuation[a] = tau[a]
        if not (math.isfinite(v[a]) and math.isfinite(tau[a])):
            finite = False
    for i in range(n):
        for row in range(3):
            impulse[i, row] = h * f[i, row]
            if not math.isfinite(impulse[i, row]):
                finite = False
    if status == CONVERGED and not finite:        # CONVERGED promises finite results (the engine checks no more)
        status = NON_FINITE
    generalized_contact_force(J, f, n, generalized_force)
    return status, iterations, err, count, info


# entries of ``newton_step_packed``'s ``params`` (the engine options, fixed when the engine is constructed)
P_STICTION, P_TOLERANCE, P_THETA_MAX, P_MAX_ITERATIONS, P_USE_TALS, P_SMOOTH, P_TWO_WAY = range(7)
N_PARAMS = 7
# rows of ``fixed_views``' work_nv: v, tau, dtau, r, dv, dv_next, then newton_solve's p_star and hD
WORK_NV_ROWS = 8
# floats per contact of the contact-sized scratch (``contact_views``): work_c 9, cwork 5, pi_frozen, delta0
CONTACT_FLOATS = 16


def fixed_scratch_sizes(nv: int, history_rows: int) -> tuple[int, int]:
    """Sizes of the float and int buffers of ``fixed_views``."""
    return N_PARAMS + WORK_NV_ROWS * nv + nv * nv + 3 * nv + 2 * history_rows, 3 * nv


@njit(cache=True, inline="always")
def fixed_views(fixed, ifixed, nv):
    """The nv-sized scratch of ``newton_step`` as views of two buffers (a compiled call costs ~0.1 us per
    argument): params (7,) the options (P_* entries), work_nv (WORK_NV_ROWS, nv) rows v, tau, dtau, r, dv, dv_next,
    p_star, hD, the Newton
    matrix A (nv, nv), B_i J_i (3, nv) and the history (rows, 2) in ``fixed``; the LU pivots (nv,) and the
    actuators' saturation before / after an update (2, nv) in ``ifixed`` (int64)."""
    at = N_PARAMS
    params = fixed[:at]
    work_nv = fixed[at:at + WORK_NV_ROWS * nv].reshape((WORK_NV_ROWS, nv))
    at += WORK_NV_ROWS * nv
    A = fixed[at:at + nv * nv].reshape((nv, nv))
    at += nv * nv
    BJ = fixed[at:at + 3 * nv].reshape((3, nv))
    at += 3 * nv
    history = fixed[at:].reshape(((fixed.shape[0] - at) // 2, 2))
    return params, work_nv, A, BJ, history, ifixed[:nv], ifixed[nv:].reshape((2, nv))


@njit(cache=True, inline="always")
def contact_views(contact, icontact):
    """The contact-sized scratch (capacity = icontact.size / 2) as views of two buffers: work_c (3, capacity, 3)
    contact velocities, their updates and the contact forces, cwork (capacity, 5), the frozen normal forces
    (capacity,) and the penetrations at q0 (capacity,) in ``contact`` (CONTACT_FLOATS per contact); the contact
    regimes before / after an update (2, capacity) in ``icontact``."""
    cap = icontact.shape[0] // 2
    return (contact[:9 * cap].reshape((3, cap, 3)), contact[9 * cap:14 * cap].reshape((cap, 5)),
            contact[14 * cap:15 * cap], contact[15 * cap:16 * cap], icontact.reshape((2, cap)))


@njit(cache=True)
def newton_step_packed(M, v0, tau0, damping, h,
                       effort, kp, kd, position_error, velocity_target, effort_limit,
                       J, bias, signed_distance, k, d, mu,
                       fixed, ifixed, contact, icontact,
                       v_next, impulse, generalized_force, actuation):
    """``newton_step`` with its scratch packed in four buffers (``fixed_views``, ``contact_views``)."""
    nv = v0.shape[0]
    params, work_nv, A, BJ, history, piv, unsat = fixed_views(fixed, ifixed, nv)
    work_c, cwork, pi_frozen, delta0, modes = contact_views(contact, icontact)
    return newton_solve(M, v0, tau0, damping, h,
                        (effort, kp, kd, position_error, velocity_target, effort_limit),
                        (J, bias, signed_distance, k, d, mu),
                        (params[P_STICTION], params[P_TOLERANCE], params[P_THETA_MAX], int(params[P_MAX_ITERATIONS]),
                         params[P_USE_TALS] != 0.0, params[P_SMOOTH] != 0.0, params[P_TWO_WAY] != 0.0),
                        (work_nv[0], work_nv[1], work_nv[2], work_nv[3], work_nv[4], work_nv[5], unsat[0], unsat[1],
                         A, piv, BJ, work_nv[6], work_nv[7]),
                        (work_c[0], work_c[1], work_c[2], cwork, pi_frozen, modes[0], modes[1], history, delta0),
                        (v_next, impulse, generalized_force, actuation))
