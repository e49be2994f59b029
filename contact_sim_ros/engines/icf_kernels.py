"""Compiled (numba) Newton solver of the convex ICF engines (Lagged, Similar, SAP): the fast path of
``contact_sim_ros/engines/lagged.py``.

One call of ``newton_solve`` runs the whole Newton method of section X for one time step: contact impulses and
3x3 Hessians per contact, the gradient, the Hessian H = A + dt diag(-dtau/dv) + J^T G J assembled and factored
by a block-sparse Cholesky (one dense block per kinematic tree, coupled only through contacts between trees,
trees eliminated in minimum-degree order so that the fill stays small), and the exact line search (rtsafe:
Newton-Raphson on dl/dalpha with bisection) evaluated directly on the per-contact line data
vc + alpha dvc. The readable numpy reference of the same algorithm is ``ConvexICFEngine`` with
``newton_kernel="numpy"``; ``test/test_engine_lagged.py`` checks that both give the same step.

Units as in lagged.py: velocities m/s (rad/s), impulses N*s, the Hunt & Crossley stiffness k in N/m, d in s/m.
All per-contact model constants come packed in one (N, NPARAM) array (columns below).
"""

from __future__ import annotations

import numpy as np
from ..jit import njit

# columns of the per-contact parameter array
P_MU, P_PHI0, P_DTK, P_D, P_HCVHAT, P_GN0, P_EPS, P_RT, P_RN, P_VHAT = range(10)
NPARAM = 10
MODEL_CODES = {"lagged": 0, "similar": 1, "sap": 2}

# status codes returned by newton_solve
CONVERGED, MAX_ITERATIONS, NONFINITE_RESIDUAL, NOT_POSITIVE_DEFINITE, NOT_DESCENT, LINE_SEARCH_NONFINITE = range(6)


@njit(cache=True)
def _hunt_crossley(x, phi0, dtk, d, vhat, dt):
    """n(x) = dt k (-(phi0 + dt x)) (1 - d x) below the break velocity vhat (eq. 22, 23), and dn/dx."""
    if x < vhat:
        pen = -(phi0 + dt * x)
        damp = 1.0 - d * x
        return dtk * pen * damp, -dtk * (dt * damp + d * pen)
    return 0.0, 0.0


@njit(cache=True)
def _contact(model, x0, x1, x2, prm, dt, gamma, G):
    """Impulse gamma (3,) = -dl/dvc and Hessian G (3,3) = d2l/dvc2 of one contact at contact velocity x."""
    mu = prm[P_MU]
    for i in range(3):
        for j in range(3):
            G[i, j] = 0.0
    if model == 2:                                           # SAP: projection onto the cone in the R norm
        Rt, Rn = prm[P_RT], prm[P_RN]
        yt0, yt1 = -x0 / Rt, -x1 / Rt
        yn = (prm[P_VHAT] - x2) / Rn
        yr = np.sqrt(yt0 * yt0 + yt1 * yt1)
        ratio = Rt / Rn
        if yr <= mu * yn:                                    # stick
            gamma[0], gamma[1], gamma[2] = yt0, yt1, yn
            G[0, 0] = 1.0 / Rt
            G[1, 1] = 1.0 / Rt
            G[2, 2] = 1.0 / Rn
        elif mu * ratio * yr <= -yn:                         # gap
            gamma[0], gamma[1], gamma[2] = 0.0, 0.0, 0.0
        else:                                                # slip
            den = 1.0 + mu * mu * ratio
            t0, t1 = yt0 / yr, yt1 / yr
            gn = (yn + mu * ratio * yr) / den
            gamma[0], gamma[1], gamma[2] = mu * gn * t0, mu * gn * t1, gn
            a = mu * mu * ratio / den
            b = mu * gn / yr
            G[0, 0] = (a * t0 * t0 + b * (1.0 - t0 * t0)) / Rt
            G[1, 1] = (a * t1 * t1 + b * (1.0 - t1 * t1)) / Rt
            G[0, 1] = (a - b) * t0 * t1 / Rt
            G[1, 0] = G[0, 1]
            off = mu / (den * Rn)
            G[0, 2] = off * t0
            G[2, 0] = off * t0
            G[1, 2] = off * t1
            G[2, 1] = off * t1
            G[2, 2] = 1.0 / (den * Rn)
        return
    eps = prm[P_EPS]
    s = np.sqrt(x0 * x0 + x1 * x1 + eps * eps)               # ||v_t||_s + eps_s
    t0, t1 = x0 / s, x1 / s                                  # soft tangent (eq. 10)
    if model == 0:                                           # Lagged (V-B)
        mg = mu * prm[P_GN0]
        n, dn = _hunt_crossley(x2, prm[P_PHI0], prm[P_DTK], prm[P_D], prm[P_HCVHAT], dt)
        gamma[0], gamma[1], gamma[2] = -mg * t0, -mg * t1, n
        c = mg / s
        G[0, 0] = c * (1.0 - t0 * t0)
        G[1, 1] = c * (1.0 - t1 * t1)
        G[0, 1] = -c * t0 * t1
        G[1, 0] = G[0, 1]
        G[2, 2] = -dn
        return
    # Similar (V-C): z = v_n - mu ||v_t||_s (eq. 19)
    z = x2 - mu * (s - eps)
    n, dn = _hunt_crossley(z, prm[P_PHI0], prm[P_DTK], prm[P_D], prm[P_HCVHAT], dt)
    gamma[0], gamma[1], gamma[2] = -mu * n * t0, -mu * n * t1, n
    g0, g1 = -mu * t0, -mu * t1
    c = mu * n / s
    G[0, 0] = -dn * g0 * g0 + c * (1.0 - t0 * t0)
    G[1, 1] = -dn * g1 * g1 + c * (1.0 - t1 * t1)
    G[0, 1] = -dn * g0 * g1 - c * t0 * t1
    G[1, 0] = G[0, 1]
    G[0, 2] = -dn * g0
    G[2, 0] = G[0, 2]
    G[1, 2] = -dn * g1
    G[2, 1] = G[1, 2]
    G[2, 2] = -dn


@njit(cache=True)
def compress_jacobian(J3):
    """Per contact the dof columns where its (3, nv) Jacobian block is non-zero.

    Returns (Jc (N, 3, K), cols (N, K)) with K the largest count; padding: cols = -1, Jc = 0."""
    nc, _, nv = J3.shape
    nonzero = np.zeros((nc, nv), dtype=np.bool_)
    counts = np.zeros(nc, dtype=np.int64)
    K = 1 if nc else 0
    for c in range(nc):
        for i in range(3):                                   # row by row: contiguous reads
            row = J3[c, i]
            for d in range(nv):
                if row[d] != 0.0:
                    nonzero[c, d] = True
        k = 0
        for d in range(nv):
            if nonzero[c, d]:
                k += 1
        counts[c] = k
        K = max(K, k)
    cols = np.full((nc, K), -1, dtype=np.int64)
    Jc = np.zeros((nc, 3, K))
    for c in range(nc):
        k = 0
        for d in range(nv):
            if nonzero[c, d]:
                cols[c, k] = d
                Jc[c, 0, k] = J3[c, 0, d]
                Jc[c, 1, k] = J3[c, 1, d]
                Jc[c, 2, k] = J3[c, 2, d]
                k += 1
    return Jc, cols


@njit(cache=True)
def delassus_rms(A, tree_ptr, Jc, cols):
    """SAP's RMS estimate w_i = ||W_ii||_F / 3 of each contact's Delassus block W_ii = J_i A^-1 J_i^T (1/kg),
    A block-diagonal per tree (tree t owns the contiguous dofs tree_ptr[t]:tree_ptr[t+1]). Returns NaNs if a
    tree block of A is not positive definite."""
    nv = A.shape[0]
    nt = tree_ptr.shape[0] - 1
    nc, _, K = Jc.shape
    w = np.empty(nc)
    Ainv = np.zeros((nv, nv))
    for t in range(nt):
        t0, t1 = tree_ptr[t], tree_ptr[t + 1]
        n = t1 - t0
        L = A[t0:t1, t0:t1].copy()
        ok = True
        for a in range(n):                                   # Cholesky, then the inverse by columns
            s = L[a, a]
            for c in range(a):
                s -= L[a, c] * L[a, c]
            if not s > 0.0:
                ok = False
                break
            L[a, a] = np.sqrt(s)
            for b in range(a + 1, n):
                s = L[b, a]
                for c in range(a):
                    s -= L[b, c] * L[a, c]
                L[b, a] = s / L[a, a]
        if not ok:
            w[:] = np.nan
            return w
        for col in range(n):
            x = np.zeros(n)
            x[col] = 1.0
            for a in range(n):
                s = x[a]
                for c in range(a):
                    s -= L[a, c] * x[c]
                x[a] = s / L[a, a]
            for a in range(n - 1, -1, -1):
                s = x[a]
                for c in range(a + 1, n):
                    s -= L[c, a] * x[c]
                x[a] = s / L[a, a]
            for a in range(n):
                Ainv[t0 + a, t0 + col] = x[a]
    W = np.empty((3, 3))
    for c in range(nc):
        for i in range(3):
            for j in range(3):
                W[i, j] = 0.0
        for a in range(K):
            da = cols[c, a]
            if da < 0:
                continue
            for b in range(K):
                db = cols[c, b]
                if db < 0:
                    continue
                m = Ainv[da, db]
                if m == 0.0:
                    continue
                for i in range(3):
                    ji = Jc[c, i, a] * m
                    for j in range(3):
                        W[i, j] += ji * Jc[c, j, b]
        s = 0.0
        for i in range(3):
            for j in range(3):
                s += W[i, j] * W[i, j]
        w[c] = np.sqrt(s) / 3.0
    return w


@njit(cache=True)
def contact_eval(model, vc, prm, dt):
    """gamma (N,3) and G (N,3,3) for contact velocities vc (N,3) (for tests against the numpy reference)."""
    n = vc.shape[0]
    gamma = np.empty((n, 3))
    G = np.empty((n, 3, 3))
    for c in range(n):
        _contact(model, vc[c, 0], vc[c, 1], vc[c, 2], prm[c], dt, gamma[c], G[c])
    return gamma, G


@njit(cache=True)
def _elimination_structure(nt, tree_of_dof, cols, num_dofs_of_tree):
    """Minimum-degree elimination order of the trees and the filled tree adjacency of the Cholesky factor.

    Returns (order (nt,), later_ptr (nt+1,), later (nnz,)): for the tree eliminated at position p, the trees
    eliminated after it that its factor column couples to are later[later_ptr[p]:later_ptr[p+1]], sorted by
    elimination position. Trees are coupled when a contact's Jacobian has columns in both."""
    adj = np.zeros((nt, nt), dtype=np.bool_)
    nc, K = cols.shape
    for c in range(nc):
        for a in range(K):
            da = cols[c, a]
            if da < 0:
                continue
            ta = tree_of_dof[da]
            for b in range(a + 1, K):
                db = cols[c, b]
                if db < 0:
                    continue
                tb = tree_of_dof[db]
                if ta != tb:
                    adj[ta, tb] = True
                    adj[tb, ta] = True
    eliminated = np.zeros(nt, dtype=np.bool_)
    order = np.empty(nt, dtype=np.int64)
    degree = np.zeros(nt, dtype=np.int64)
    for i in range(nt):
        for j in range(nt):
            if adj[i, j]:
                degree[i] += num_dofs_of_tree[j]
    filled = adj.copy()
    for p in range(nt):
        best, best_deg = -1, 1 << 62
        for i in range(nt):
            if not eliminated[i] and degree[i] < best_deg:
                best, best_deg = i, degree[i]
        order[p] = best
        eliminated[best] = True
        # make the remaining neighbours of `best` a clique (fill), update their degrees
        nbrs = np.empty(nt, dtype=np.int64)
        m = 0
        for j in range(nt):
            if filled[best, j] and not eliminated[j]:
                nbrs[m] = j
                m += 1
        for a in range(m):
            ia = nbrs[a]
            degree[ia] -= num_dofs_of_tree[best]
            for b in range(m):
                ib = nbrs[b]
                if ia != ib and not filled[ia, ib]:
                    filled[ia, ib] = True
                    degree[ia] += num_dofs_of_tree[ib]
    pos = np.empty(nt, dtype=np.int64)
    for p in range(nt):
        pos[order[p]] = p
    later_ptr = np.zeros(nt + 1, dtype=np.int64)
    for p in range(nt):
        j = order[p]
        cnt = 0
        for i in range(nt):
            if filled[j, i] and pos[i] > p:
                cnt += 1
        later_ptr[p + 1] = later_ptr[p] + cnt
    later = np.empty(later_ptr[nt], dtype=np.int64)
    for p in range(nt):
        j = order[p]
        k = later_ptr[p]
        for q in range(p + 1, nt):
            i = order[q]
            if filled[j, i]:
                later[k] = i
                k += 1
    return order, later_ptr, later


@njit(cache=True)
def _block_cholesky(H, order, later_ptr, later, tree_ptr):
    """In-place block-sparse Cholesky of the symmetric H (dense storage, nv x nv; tree t owns the contiguous
    dofs tree_ptr[t]:tree_ptr[t+1]).

    Factor blocks: L_jj in the lower triangle of H[J, J], L_ij in H[I, J] for trees i eliminated after j. Only
    the blocks of the filled structure are read or written. Returns False if H is not positive definite."""
    nt = order.shape[0]
    for p in range(nt):
        j = order[p]
        j0, j1 = tree_ptr[j], tree_ptr[j + 1]
        # dense Cholesky of the diagonal block (lower), column by column
        for a in range(j0, j1):
            s = H[a, a]
            for c in range(j0, a):
                s -= H[a, c] * H[a, c]
            if not s > 0.0:
                return False
            piv = np.sqrt(s)
            H[a, a] = piv
            for b in range(a + 1, j1):
                s = H[b, a]
                for c in range(j0, a):
                    s -= H[b, c] * H[a, c]
                H[b, a] = s / piv
        # off-diagonal blocks: L_ij = H_ij L_jj^-T (each row by forward substitution)
        for q in range(later_ptr[p], later_ptr[p + 1]):
            i = later[q]
            for r in range(tree_ptr[i], tree_ptr[i + 1]):
                for a in range(j0, j1):
                    s = H[r, a]
                    for c in range(j0, a):
                        s -= H[r, c] * H[a, c]
                    H[r, a] = s / H[a, a]
        # Schur complement update of the later blocks: H_ik -= L_ij L_kj^T (pos(i) >= pos(k))
        for q1 in range(later_ptr[p], later_ptr[p + 1]):
            k = later[q1]
            for q2 in range(q1, later_ptr[p + 1]):
                i = later[q2]
                for r in range(tree_ptr[i], tree_ptr[i + 1]):
                    for r2 in range(tree_ptr[k], tree_ptr[k + 1]):
                        s = 0.0
                        for a in range(j0, j1):
                            s += H[r, a] * H[r2, a]
                        H[r, r2] -= s
    return True


@njit(cache=True)
def _block_solve(H, order, later_ptr, later, tree_ptr, x):
    """Solve L L^T x = b in place (x holds b) with the factor of ``_block_cholesky``."""
    nt = order.shape[0]
    for p in range(nt):                                      # forward: L y = b
        j = order[p]
        j0, j1 = tree_ptr[j], tree_ptr[j + 1]
        for a in range(j0, j1):
            s = x[a]
            for c in range(j0, a):
                s -= H[a, c] * x[c]
            x[a] = s / H[a, a]
        for q in range(later_ptr[p], later_ptr[p + 1]):
            i = later[q]
            for r in range(tree_ptr[i], tree_ptr[i + 1]):
                s = 0.0
                for a in range(j0, j1):
                    s += H[r, a] * x[a]
                x[r] -= s
    for p in range(nt - 1, -1, -1):                          # backward: L^T x = y
        j = order[p]
        j0, j1 = tree_ptr[j], tree_ptr[j + 1]
        for q in range(later_ptr[p], later_ptr[p + 1]):
            i = later[q]
            for r in range(tree_ptr[i], tree_ptr[i + 1]):
                xr = x[r]
                for a in range(j0, j1):
                    x[a] -= H[r, a] * xr
        for a in range(j1 - 1, j0 - 1, -1):
            s = x[a]
            for c in range(a + 1, j1):
                s -= H[c, a] * x[c]
            x[a] = s / H[a, a]


@njit(cache=True)
def _contact_velocity(Jc, cols, bias, v, out):
    nc, _, K = Jc.shape
    for c in range(nc):
        for i in range(3):
            s = bias[c, i] if bias.shape[0] else 0.0
            for a in range(K):
                d = cols[c, a]
                if d >= 0:
                    s += Jc[c, i, a] * v[d]
            out[c, i] = s


@njit(cache=True)
def _line_data(model, vc, dvc, prm, ld):
    """Per-contact constants of the search line vc + alpha dvc (Lagged, Similar): ld[:, 0] = |dv_t|^2,
    ld[:, 1] = v_t . dv_t, ld[:, 2] = |v_t|^2 + eps_s^2, so that ||v_t(alpha)||_s^2 = ld2 + alpha (2 ld1 +
    alpha ld0)."""
    if model == 2:
        return
    for c in range(vc.shape[0]):
        ld[c, 0] = dvc[c, 0] * dvc[c, 0] + dvc[c, 1] * dvc[c, 1]
        ld[c, 1] = vc[c, 0] * dvc[c, 0] + vc[c, 1] * dvc[c, 1]
        eps = prm[c, P_EPS]
        ld[c, 2] = vc[c, 0] * vc[c, 0] + vc[c, 1] * vc[c, 1] + eps * eps


@njit(cache=True)
def _line_derivatives(model, alpha, vc, dvc, ld, prm, dt, base, dAd, act_dofs, a_act, c_act, L_act, v, dv,
                      g, Gc):
    """f = dl/dalpha and f' = d2l/dalpha2 at v + alpha dv. ``base`` = (A v - p0) . dv - dt tau_fixed . dv
    (the actuation of dofs without PD gains). Lagged and Similar use the line data of ``_line_data`` (no 3x3
    Hessians); SAP evaluates ``_contact``."""
    f = base + alpha * dAd
    fp = dAd
    for q in range(act_dofs.shape[0]):
        d = act_dofs[q]
        raw = a_act[d] - c_act[d] * (v[d] + alpha * dv[d])
        lim = L_act[d]
        tau = min(max(raw, -lim), lim)
        f -= dt * tau * dv[d]
        if abs(raw) < lim:
            fp += dt * c_act[d] * dv[d] * dv[d]
    if model == 2:
        for c in range(vc.shape[0]):
            x0 = vc[c, 0] + alpha * dvc[c, 0]
            x1 = vc[c, 1] + alpha * dvc[c, 1]
            x2 = vc[c, 2] + alpha * dvc[c, 2]
            _contact(model, x0, x1, x2, prm[c], dt, g, Gc)
            for i in range(3):
                f -= g[i] * dvc[c, i]
                s = 0.0
                for j in range(3):
                    s += Gc[i, j] * dvc[c, j]
                fp += dvc[c, i] * s
        return f, fp
    for c in range(vc.shape[0]):
        a, b = ld[c, 0], ld[c, 1]
        s = np.sqrt(ld[c, 2] + alpha * (2.0 * b + alpha * a))      # ||v_t||_s + eps_s at alpha
        tsd = (b + alpha * a) / s                                    # t_s . dv_t
        perp = (a - tsd * tsd) / s                                   # dv_t^T Pperp(t_s) dv_t / s
        dvn = dvc[c, 2]
        x2 = vc[c, 2] + alpha * dvn
        mu = prm[c, P_MU]
        if model == 0:
            mg = mu * prm[c, P_GN0]
            n, dn = _hunt_crossley(x2, prm[c, P_PHI0], prm[c, P_DTK], prm[c, P_D], prm[c, P_HCVHAT], dt)
            f += mg * tsd - n * dvn
            fp += mg * perp - dn * dvn * dvn
        else:
            z = x2 - mu * (s - prm[c, P_EPS])
            n, dn = _hunt_crossley(z, prm[c, P_PHI0], prm[c, P_DTK], prm[c, P_D], prm[c, P_HCVHAT], dt)
            gdvc = dvn - mu * tsd
            f -= n * gdvc
            fp += -dn * gdvc * gdvc + mu * n * perp
    return f, fp


@njit(cache=True)
def newton_solve(model, dt, A, p0, v0, D, tree_ptr, tree_of_dof, c_act, a_act, L_act, Jc, cols, bias,
                 prm, relative_tolerance, absolute_tolerance, max_iterations, line_search_max_iterations, H):
    """Newton's method of section X for one step (see the module docstring).

    A (nv,nv): M + dt diag(damping), block-diagonal per tree; p0 (nv,) = M v0 + dt k2; D = diag(A)^-1/2;
    tree t owns the contiguous dofs tree_ptr[t]:tree_ptr[t+1] (the caller permutes otherwise); actuation tau(v) = clip(a_act - c_act v, -L, L);
    contacts: Jc (N,3,K) compressed Jacobian with dof columns cols (N,K) (-1 = padding), bias (N,3), prm
    (N, NPARAM). H (nv,nv) is scratch. Returns (v, gamma (N,3), J^T gamma (nv,), tau (nv,), iterations, status, residual
    ratio, iteration at which a failure happened, number of line-search evaluations of dl/dalpha)."""
    nv = v0.shape[0]
    nc = Jc.shape[0]
    nt = tree_ptr.shape[0] - 1
    num_dofs = np.empty(nt, dtype=np.int64)
    for t in range(nt):
        num_dofs[t] = tree_ptr[t + 1] - tree_ptr[t]
    order, later_ptr, later = _elimination_structure(nt, tree_of_dof, cols, num_dofs)
    n_act = 0
    for d in range(nv):
        if c_act[d] > 0.0:
            n_act += 1
    act_dofs = np.empty(n_act, dtype=np.int64)
    k = 0
    for d in range(nv):
        if c_act[d] > 0.0:
            act_dofs[k] = d
            k += 1
    tau = np.empty(nv)
    dtau = np.zeros(nv)
    for d in range(nv):
        tau[d] = min(max(a_act[d], -L_act[d]), L_act[d])      # no PD gains on this dof: tau is constant
    tau_fixed = tau.copy()
    v = v0.copy()
    vc = np.empty((nc, 3))
    dvc = np.empty((nc, 3))
    ld = np.empty((nc, 3))
    gamma = np.empty((nc, 3))
    G = np.empty((nc, 3, 3))
    g1 = np.empty(3)
    G1 = np.empty((3, 3))
    K = Jc.shape[2]
    GJ = np.empty((3, K))
    Av = np.empty(nv)
    jc = np.empty(nv)
    r = np.empty(nv)
    dv = np.empty(nv)
    zero_bias = np.zeros((0, 3))
    scale_p0 = 0.0
    for d in range(nv):
        scale_p0 += (D[d] * p0[d]) ** 2
    scale_p0 = np.sqrt(scale_p0)
    _contact_velocity(Jc, cols, bias, v, vc)
    residual_ratio = np.inf
    iterations = 0
    n_eval = 0
    status = MAX_ITERATIONS
    for iteration in range(max_iterations + 1):
        # impulses, Hessians and actuation at v
        for c in range(nc):
            _contact(model, vc[c, 0], vc[c, 1], vc[c, 2], prm[c], dt, gamma[c], G[c])
        for q in range(n_act):
            d = act_dofs[q]
            raw = a_act[d] - c_act[d] * v[d]
            tau[d] = min(max(raw, -L_act[d]), L_act[d])
            dtau[d] = -c_act[d] if abs(raw) < L_act[d] else 0.0
        # gradient r = A v - p0 - dt tau - J^T gamma
        for d in range(nv):
            jc[d] = 0.0
        for c in range(nc):
            for a in range(K):
                d = cols[c, a]
                if d >= 0:
                    jc[d] += Jc[c, 0, a] * gamma[c, 0] + Jc[c, 1, a] * gamma[c, 1] + Jc[c, 2, a] * gamma[c, 2]
        for t in range(nt):
            for a in range(tree_ptr[t], tree_ptr[t + 1]):
                s = 0.0
                for b in range(tree_ptr[t], tree_ptr[t + 1]):
                    s += A[a, b] * v[b]
                Av[a] = s
        n_av = 0.0
        n_jc = 0.0
        rnorm = 0.0
        finite = True
        for d in range(nv):
            r[d] = Av[d] - p0[d] - dt * tau[d] - jc[d]
            if not np.isfinite(r[d]):
                finite = False
            n_av += (D[d] * Av[d]) ** 2
            n_jc += (D[d] * jc[d]) ** 2
            rnorm += (D[d] * r[d]) ** 2
        if not finite:
            return v, gamma, jc, tau, iterations, NONFINITE_RESIDUAL, residual_ratio, iteration, n_eval
        scale = max(np.sqrt(n_av), np.sqrt(n_jc), scale_p0)
        rnorm = np.sqrt(rnorm)
        residual_ratio = rnorm / scale if scale > 0 else rnorm
        # at least one Newton step (see lagged.py: dt k2 can be below eps_r of a large momentum)
        if iteration > 0 and rnorm <= absolute_tolerance + relative_tolerance * scale:
            status = CONVERGED
            break
        if iteration == max_iterations:
            break
        iterations += 1
        # Hessian H = A + dt diag(-dtau) + J^T G J on the filled block structure (zeroed first)
        for p in range(nt):
            j = order[p]
            for a in range(tree_ptr[j], tree_ptr[j + 1]):
                for b in range(tree_ptr[j], tree_ptr[j + 1]):
                    H[a, b] = A[a, b]
            for q in range(later_ptr[p], later_ptr[p + 1]):
                i = later[q]
                for a in range(tree_ptr[i], tree_ptr[i + 1]):
                    for b in range(tree_ptr[j], tree_ptr[j + 1]):
                        H[a, b] = 0.0
                        H[b, a] = 0.0
        for q in range(n_act):
            d = act_dofs[q]
            H[d, d] -= dt * dtau[d]
        for c in range(nc):
            for i in range(3):
                for a in range(K):
                    GJ[i, a] = G[c, i, 0] * Jc[c, 0, a] + G[c, i, 1] * Jc[c, 1, a] + G[c, i, 2] * Jc[c, 2, a]
            for a in range(K):                              # J^T G J is symmetric: upper half, mirrored
                da = cols[c, a]
                if da < 0:
                    continue
                j0, j1, j2 = Jc[c, 0, a], Jc[c, 1, a], Jc[c, 2, a]
                H[da, da] += j0 * GJ[0, a] + j1 * GJ[1, a] + j2 * GJ[2, a]
                for b in range(a + 1, K):
                    db = cols[c, b]
                    if db < 0:
                        continue
                    h = j0 * GJ[0, b] + j1 * GJ[1, b] + j2 * GJ[2, b]
                    H[da, db] += h
                    H[db, da] += h
        if not _block_cholesky(H, order, later_ptr, later, tree_ptr):
            return v, gamma, jc, tau, iterations, NOT_POSITIVE_DEFINITE, residual_ratio, iteration, n_eval
        for d in range(nv):
            dv[d] = -r[d]
        _block_solve(H, order, later_ptr, later, tree_ptr, dv)
        # exact line search on f(alpha) = dl/dalpha (non-decreasing: the cost is convex)
        _contact_velocity(Jc, cols, zero_bias, dv, dvc)
        f0 = 0.0
        dAd = 0.0
        base = 0.0
        for t in range(nt):
            for a in range(tree_ptr[t], tree_ptr[t + 1]):
                s = 0.0
                for b in range(tree_ptr[t], tree_ptr[t + 1]):
                    s += A[a, b] * dv[b]
                dAd += dv[a] * s
        for d in range(nv):
            f0 += r[d] * dv[d]
            base += (Av[d] - p0[d]) * dv[d]
            if not c_act[d] > 0.0:
                base -= dt * tau_fixed[d] * dv[d]
        if not np.isfinite(f0):
            return v, gamma, jc, tau, iterations, NONFINITE_RESIDUAL, residual_ratio, iteration, n_eval
        if not f0 < 0.0:
            # not a descent direction: only possible at round-off level of the optimum
            if rnorm <= 1e3 * (absolute_tolerance + relative_tolerance * scale):
                status = CONVERGED
            else:
                status = NOT_DESCENT
            break
        _line_data(model, vc, dvc, prm, ld)
        n_eval += 1
        f1, fp1 = _line_derivatives(model, 1.0, vc, dvc, ld, prm, dt, base, dAd, act_dofs, a_act, c_act, L_act,
                                    v, dv, g1, G1)
        if not (np.isfinite(f1) and np.isfinite(fp1)):
            return v, gamma, jc, tau, iterations, LINE_SEARCH_NONFINITE, residual_ratio, iteration, n_eval
        alpha = 1.0
        if f1 > 0.0:
            # rtsafe (Numerical Recipes 9.4) on the bracket [0, 1]: Newton from alpha = 1, bisection fallback
            f_tol = 1e-6 * abs(f0)
            lo, hi = 0.0, 1.0
            alpha = 1.0 - f1 / fp1 if fp1 > 0.0 else 0.5
            if not (lo < alpha < hi):
                alpha = 0.5
            dx_old = 1.0
            for _ in range(line_search_max_iterations):
                n_eval += 1
                f, fp = _line_derivatives(model, alpha, vc, dvc, ld, prm, dt, base, dAd, act_dofs, a_act, c_act,
                                          L_act, v, dv, g1, G1)
                if not (np.isfinite(f) and np.isfinite(fp)):
                    return v, gamma, jc, tau, iterations, LINE_SEARCH_NONFINITE, residual_ratio, iteration, n_eval
                if abs(f) <= f_tol:
                    break
                if f < 0.0:
                    lo = alpha
                else:
                    hi = alpha
                if hi - lo <= 1e-9 * hi:
                    break
                newton = alpha - f / fp if fp > 0.0 else -1.0
                if lo < newton < hi and abs(newton - alpha) < 0.5 * dx_old:
                    dx_old = abs(newton - alpha)
                    alpha = newton
                else:
                    dx_old = hi - lo
                    alpha = 0.5 * (lo + hi)
        for d in range(nv):
            v[d] += alpha * dv[d]
        for c in range(nc):
            for i in range(3):
                vc[c, i] += alpha * dvc[c, i]
    return v, gamma, jc, tau, iterations, status, residual_ratio, -1, n_eval
