"""Compiled (numba) step of the convex ICF engines (Lagged, Similar, SAP): the default path of
``contact_sim_ros/engines/lagged.py``.

One call of ``icf_step`` runs the whole engine step: A = M + dt diag(damping) and p0 = M v0 + dt k2, the implicit
PD actuation terms, the contact Jacobian compressed to the dof columns each contact touches, SAP's Delassus RMS
estimate, the per-contact model parameters (Lagged, Similar or SAP), and Newton's method of section X: contact
impulses and 3x3 Hessians per contact, the gradient, the Hessian H = A + dt diag(-dtau/dv) + J^T G J assembled and
factored by a block-sparse Cholesky (one dense block per kinematic tree, coupled only through contacts between
trees, trees eliminated in minimum-degree order so that the fill stays small), and the exact line search
(rtsafe: Newton-Raphson on dl/dalpha with bisection) evaluated directly on the per-contact line data
vc + alpha dvc. Without contacts the trees stay uncoupled (no elimination structure is built): the step is one
Cholesky solve of A + dt diag(kp dt + kd) per tree, and a second residual evaluation confirms it. All scratch is
carved out of two flat buffers the engine allocates once (``work_sizes``) and grows only when a step has more
contacts than ever before; the results go to arrays the caller passes in. The readable numpy reference of the
same algorithm is ``ConvexICFEngine`` with ``newton_kernel="numpy"``; ``test/test_engine_lagged.py`` checks that
both give the same step, and that this kernel reproduces stored steps of the previous formulation.

Units as in lagged.py: velocities m/s (rad/s), impulses N*s, the Hunt & Crossley stiffness k in N/m, d in s/m.
All per-contact model constants are packed in one (N, NPARAM) array (columns below).
"""

from __future__ import annotations

import numpy as np

from ..jit import njit
from ..solvers.rtsafe import rtsafe_start, rtsafe_step

# columns of the per-contact parameter array
P_MU, P_PHI0, P_DTK, P_D, P_HCVHAT, P_GN0, P_EPS, P_RT, P_RN, P_VHAT = range(10)
NPARAM = 10
MODEL_CODES = {"lagged": 0, "similar": 1, "sap": 2}

# entries of the options array of icf_step
(O_MODEL, O_RELATIVE_TOLERANCE, O_ABSOLUTE_TOLERANCE, O_MAX_ITERATIONS, O_LINE_SEARCH_MAX_ITERATIONS,
 O_STICTION_TOLERANCE, O_SIGMA, O_RELAXATION_TIME, O_NEAR_RIGID_FACTOR, O_REGULARIZED_STICTION,
 O_DEFER_OPEN_CONTACTS) = range(11)
NOPTIONS = 11

# status codes returned by icf_step
(CONVERGED, MAX_ITERATIONS, NONFINITE_RESIDUAL, NOT_POSITIVE_DEFINITE, NOT_DESCENT, LINE_SEARCH_NONFINITE,
 NONPOSITIVE_MASS, DELASSUS_FAILED, NONFINITE_RESULT) = range(9)


@njit(cache=True)
def _hunt_crossley(x, phi0, dtk, d, vhat, dt):
    """n(x) = dt k (-(phi0 + dt x)) (1 - d x) below the break velocity vhat (eq. 22, 23), and dn/dx."""
    if x < vhat:
        pen = -(phi0 + dt * x)
        damp = 1.0 - d * x
        return dtk * pen * damp, -dtk * (dt * damp + d * pen)
    return 0.0, 0.0


@njit(cache=True, inline="always")
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
def _compress_jacobian(J, inv_perm, counts, Jc_buf, cols_buf):
    """Per contact the dof columns where its rows of J (3N, nv) are non-zero, in the kernel's dof order.

    Returns views (Jc (N, 3, K), cols (N, K)) of the buffers with K the largest count (>= 1 when N > 0);
    cols are the permuted dof indices inv_perm[d] in increasing original d; padding: cols = -1, Jc = 0.
    J is read once (the non-zero columns of contact c are noted at cols_buf[c nv:], then compacted in place)."""
    nv = J.shape[1]
    nc = J.shape[0] // 3
    K = 1 if nc else 0
    for c in range(nc):
        k = 0
        o = c * nv
        for d in range(nv):
            if J[3 * c, d] != 0.0 or J[3 * c + 1, d] != 0.0 or J[3 * c + 2, d] != 0.0:
                cols_buf[o + k] = d
                k += 1
        counts[c] = k
        K = max(K, k)
    Jc = Jc_buf[:nc * 3 * K].reshape((nc, 3, K))
    for c in range(nc):
        # row c of cols (at c K) is written at or behind where its columns were noted (c nv): read before written
        o = c * nv
        for a in range(counts[c]):
            d = cols_buf[o + a]
            cols_buf[c * K + a] = inv_perm[d]
            Jc[c, 0, a] = J[3 * c, d]
            Jc[c, 1, a] = J[3 * c + 1, d]
            Jc[c, 2, a] = J[3 * c + 2, d]
        for a in range(counts[c], K):
            cols_buf[c * K + a] = -1
            Jc[c, 0, a] = 0.0
            Jc[c, 1, a] = 0.0
            Jc[c, 2, a] = 0.0
    return Jc, cols_buf[:nc * K].reshape((nc, K))


@njit(cache=True)
def _columns_in_range(columns, nv):
    """Whether every listed column (>= 0) of ``jacobian_columns`` is a dof index below nv (else the scan is used)."""
    for c in range(columns.shape[0]):
        for a in range(columns.shape[1]):
            if columns[c, a] >= nv:
                return False
    return True


@njit(cache=True)
def _gather_jacobian(J, columns, inv_perm, counts, Jc_buf, cols_buf):
    """``_compress_jacobian`` from the contacts' known columns (``ContactSet.jacobian_columns``: columns (N, kmax)
    int, per contact the dofs its rows of J use, ascending, then -1): J is read only there. The same (Jc, cols) as
    the scan up to entries of columns whose three rows are exactly zero (kept here, dropped there: they add exact
    zeros)."""
    nc = J.shape[0] // 3
    K = 1 if nc else 0
    for c in range(nc):
        k = 0
        while k < columns.shape[1] and columns[c, k] >= 0:
            k += 1
        counts[c] = k
        K = max(K, k)
    Jc = Jc_buf[:nc * 3 * K].reshape((nc, 3, K))
    cols = cols_buf[:nc * K].reshape((nc, K))
    for c in range(nc):
        for a in range(counts[c]):
            d = columns[c, a]
            cols[c, a] = inv_perm[d]
            Jc[c, 0, a] = J[3 * c, d]
            Jc[c, 1, a] = J[3 * c + 1, d]
            Jc[c, 2, a] = J[3 * c + 2, d]
        for a in range(counts[c], K):
            cols[c, a] = -1
            Jc[c, 0, a] = 0.0
            Jc[c, 1, a] = 0.0
            Jc[c, 2, a] = 0.0
    return Jc, cols


@njit(cache=True)
def _delassus_rms(Ab, tree_ptr, dptr, tree_of_dof, Jc, cols, Ainvb, Lb, x, W, w, inverted):
    """SAP's RMS estimate w_i = ||W_ii||_F / 3 of each contact's Delassus block W_ii = J_i A^-1 J_i^T (1/kg) into
    w (N,), A block-diagonal per tree (tree t owns the contiguous dofs tree_ptr[t]:tree_ptr[t+1]), its tree blocks
    in the compact storage Ab (``_block_offsets``: block t at dptr[t], row-major).

    Scratch: Ainvb (dptr[nt],) receives the tree blocks of A^-1, Lb (dptr[nt],) the tree blocks' Cholesky
    factors, x (nv,), W (3, 3). ``inverted``: Ainvb already holds A^-1 (not computed again). Returns False if a
    tree block of A is not positive definite."""
    nt = tree_ptr.shape[0] - 1 if not inverted else 0
    nc, _, K = Jc.shape
    for t in range(nt):
        t0 = tree_ptr[t]
        n = tree_ptr[t + 1] - t0
        o = dptr[t]
        for e in range(n * n):                               # Cholesky of the tree block, then its inverse
            Lb[o + e] = Ab[o + e]
        if not _factor_diagonal(Lb, o, n):
            return False
        for col in range(n):                                 # the inverse column by column
            for a in range(n):
                x[a] = 0.0
            x[col] = 1.0
            _forward_diagonal(Lb, o, n, x, 0)
            _backward_diagonal(Lb, o, n, x, 0)
            for a in range(n):
                Ainvb[o + a * n + col] = x[a]
    for c in range(nc):
        for i in range(3):
            for j in range(3):
                W[i, j] = 0.0
        for a in range(K):
            da = cols[c, a]
            if da < 0:                                       # padding: the valid columns are a prefix
                break
            t = tree_of_dof[da]
            t0 = tree_ptr[t]
            n = tree_ptr[t + 1] - t0
            row = dptr[t] + (da - t0) * n - t0
            y0 = y1 = y2 = 0.0                               # y = (A^-1 J_c^T)[da, :] (3 flops per entry)
            for b in range(K):
                db = cols[c, b]
                if db < 0:
                    break
                if tree_of_dof[db] != t:                     # A^-1 is zero between trees
                    continue
                m = Ainvb[row + db]
                y0 += m * Jc[c, 0, b]
                y1 += m * Jc[c, 1, b]
                y2 += m * Jc[c, 2, b]
            for i in range(3):                               # W += J_c[:, a] y^T
                ji = Jc[c, i, a]
                W[i, 0] += ji * y0
                W[i, 1] += ji * y1
                W[i, 2] += ji * y2
        s = 0.0
        for i in range(3):
            for j in range(3):
                s += W[i, j] * W[i, j]
        w[c] = np.sqrt(s) / 3.0
        if not np.isfinite(w[c]):
            return False
    return True


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
    elimination position. Trees are coupled when a contact's Jacobian has columns in both. (Allocating form of
    ``_elimination_structure_into``.)"""
    work = np.empty(3 * nt * nt + 6 * nt + 1, dtype=np.int64)
    return _elimination_structure_into(nt, tree_of_dof, cols, num_dofs_of_tree, work)


@njit(cache=True)
def _elimination_structure_into(nt, tree_of_dof, cols, num_dofs_of_tree, work):
    """``_elimination_structure`` in the int64 scratch ``work`` (3 nt^2 + 6 nt + 1 entries); returns views of it."""
    adj = work[:nt * nt].reshape((nt, nt))
    filled = work[nt * nt:2 * nt * nt].reshape((nt, nt))
    later = work[2 * nt * nt:3 * nt * nt]
    o = 3 * nt * nt
    eliminated = work[o:o + nt]
    order = work[o + nt:o + 2 * nt]
    degree = work[o + 2 * nt:o + 3 * nt]
    nbrs = work[o + 3 * nt:o + 4 * nt]
    pos = work[o + 4 * nt:o + 5 * nt]
    later_ptr = work[o + 5 * nt:o + 6 * nt + 1]
    for i in range(nt):                        # explicit loops: numba's slice assignment compiles for seconds
        eliminated[i] = 0
        degree[i] = 0
        for j in range(nt):
            adj[i, j] = 0
    nc, K = cols.shape
    for c in range(nc):
        # the trees of the contact's columns are coupled pairwise: each column's tree against the first two
        # distinct trees seen so far (a contact touches one or two trees; more are handled as well: every
        # column is paired with every distinct tree before it through t1, t2 or its own scan)
        t1 = -1
        t2 = -1
        for a in range(K):
            da = cols[c, a]
            if da < 0:
                continue
            ta = tree_of_dof[da]
            if ta == t1 or ta == t2:
                continue
            if t1 < 0:
                t1 = ta
                continue
            if t2 < 0:
                t2 = ta
                adj[t1, ta] = 1
                adj[ta, t1] = 1
                continue
            for b in range(a):                         # a third tree: against every column before it
                db = cols[c, b]
                if db < 0:
                    continue
                tb = tree_of_dof[db]
                if tb != ta:
                    adj[ta, tb] = 1
                    adj[tb, ta] = 1
    for i in range(nt):
        for j in range(nt):
            if adj[i, j]:
                degree[i] += num_dofs_of_tree[j]
    for i in range(nt):
        for j in range(nt):
            filled[i, j] = adj[i, j]
    for p in range(nt):
        best, best_deg = -1, 1 << 62
        for i in range(nt):
            if not eliminated[i] and degree[i] < best_deg:
                best, best_deg = i, degree[i]
        order[p] = best
        eliminated[best] = 1
        # make the remaining neighbours of `best` a clique (fill), update their degrees
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
                    filled[ia, ib] = 1
                    degree[ia] += num_dofs_of_tree[ib]
    for p in range(nt):
        pos[order[p]] = p
    later_ptr[0] = 0
    for p in range(nt):
        j = order[p]
        cnt = 0
        for i in range(nt):
            if filled[j, i] and pos[i] > p:
                cnt += 1
        later_ptr[p + 1] = later_ptr[p] + cnt
    for p in range(nt):
        j = order[p]
        k = later_ptr[p]
        for q in range(p + 1, nt):
            i = order[q]
            if filled[j, i]:
                later[k] = i
                k += 1
    return order, later_ptr, later[:later_ptr[nt]]
@njit(cache=True)
def _block_offsets(tree_ptr, order, later_ptr, later, dptr, optr, pos):
    """Layout of the compact block storage of a symmetric matrix with the filled tree structure of
    ``_elimination_structure``: tree t's diagonal block (n_t x n_t, row-major; the factor uses its lower triangle)
    at dptr[t] (dptr[nt] = the diagonal blocks' total), the block (n_i x n_j, row-major) of rows of tree i and
    columns of tree j = order[p] for the later entry q (i = later[q], later_ptr[p] <= q < later_ptr[p+1]) at
    optr[q]; pos[t] the elimination position of tree t. Returns the storage length."""
    nt = order.shape[0]
    o = 0
    for t in range(nt):
        dptr[t] = o
        n = tree_ptr[t + 1] - tree_ptr[t]
        o += n * n
    dptr[nt] = o
    for p in range(nt):
        j = order[p]
        pos[j] = p
        nj = tree_ptr[j + 1] - tree_ptr[j]
        for q in range(later_ptr[p], later_ptr[p + 1]):
            optr[q] = o
            o += (tree_ptr[later[q] + 1] - tree_ptr[later[q]]) * nj
    return o


@njit(cache=True)
def _off_block(i, k, pos, later_ptr, later, optr):
    """Start of the block of rows of tree i, columns of tree k (pos[i] > pos[k], filled) in the compact storage."""
    p = pos[k]
    for q in range(later_ptr[p], later_ptr[p + 1]):
        if later[q] == i:
            return optr[q]
    return -1


@njit(cache=True)
def _entry(da, db, tree_of_dof, tree_ptr, dptr, pos, later_ptr, later, optr):
    """Index in the compact block storage of the lower-triangle entry of H[da, db] (kernel dofs)."""
    ta, tb = tree_of_dof[da], tree_of_dof[db]
    if ta == tb:
        t0 = tree_ptr[ta]
        la, lb = da - t0, db - t0
        if la < lb:
            la, lb = lb, la
        return dptr[ta] + la * (tree_ptr[ta + 1] - t0) + lb
    if pos[ta] < pos[tb]:
        ta, tb, da, db = tb, ta, db, da
    return (_off_block(ta, tb, pos, later_ptr, later, optr) + (da - tree_ptr[ta]) * (tree_ptr[tb + 1] - tree_ptr[tb])
            + db - tree_ptr[tb])


# The block Cholesky and its solve work on dense tree blocks. A free body's tree has 6 dofs: its blocks go through
# the same helpers called with the literal 6 (numba inlines them), so that LLVM sees constant loop bounds and
# unrolls them - the same operations in the same order (bit-identical results), about twice as fast on the
# clutter's 6 x 6 blocks. FREE_BODY_DOFS is that size.
FREE_BODY_DOFS = 6


@njit(cache=True, inline="always")
def _factor_diagonal(Hb, dj, nj):
    """Dense Cholesky (lower) of the nj x nj block at Hb[dj:], column by column; False if not positive definite."""
    for a in range(nj):
        s = Hb[dj + a * nj + a]
        for c in range(a):
            s -= Hb[dj + a * nj + c] * Hb[dj + a * nj + c]
        if not s > 0.0:
            return False
        piv = np.sqrt(s)
        Hb[dj + a * nj + a] = piv
        for b in range(a + 1, nj):
            s = Hb[dj + b * nj + a]
            for c in range(a):
                s -= Hb[dj + b * nj + c] * Hb[dj + a * nj + c]
            Hb[dj + b * nj + a] = s / piv
    return True


@njit(cache=True, inline="always")
def _factor_off_diagonal(Hb, dj, nj, o, ni):
    """L_ij = H_ij L_jj^-T for the ni x nj block at Hb[o:] (each row by forward substitution; the rows are
    independent: column a of all rows before column a + 1, so that the divisions of different rows overlap)."""
    for a in range(nj):
        piv = Hb[dj + a * nj + a]
        for r in range(ni):
            s = Hb[o + r * nj + a]
            for c in range(a):
                s -= Hb[o + r * nj + c] * Hb[dj + a * nj + c]
            Hb[o + r * nj + a] = s / piv


@njit(cache=True, inline="always")
def _schur_update(Hb, nj, oi, ni, ok, nk, tgt, diagonal, acc):
    """H_ik -= L_ij L_kj^T into the block at Hb[tgt:] (ni x nk; only its lower triangle when ``diagonal``)."""
    for r in range(ni):
        top = r + 1 if diagonal else nk
        # the sums over a for all r2 at once (independent accumulators; each in the order a = 0, 1, ...)
        for r2 in range(top):
            acc[r2] = 0.0
        for a in range(nj):
            h = Hb[oi + r * nj + a]
            for r2 in range(top):
                acc[r2] += h * Hb[ok + r2 * nj + a]
        for r2 in range(top):
            Hb[tgt + r * nk + r2] -= acc[r2]


@njit(cache=True, inline="always")
def _schur_update_free(Hb, oi, ok, tgt, diagonal):
    """``_schur_update`` of three free bodies' 6 x 6 blocks (nj = ni = nk = FREE_BODY_DOFS) with the six sums of a
    row in local variables, not in the scratch array (which the compiler cannot keep in registers, as it may alias
    Hb): each sum in the same order a = 0, ..., 5 from 0.0, the same numbers. The sums past the lower triangle
    of a diagonal target are formed and not stored."""
    for r in range(6):
        s0 = s1 = s2 = s3 = s4 = s5 = 0.0
        for a in range(6):
            h = Hb[oi + r * 6 + a]
            s0 += h * Hb[ok + a]
            s1 += h * Hb[ok + 6 + a]
            s2 += h * Hb[ok + 12 + a]
            s3 += h * Hb[ok + 18 + a]
            s4 += h * Hb[ok + 24 + a]
            s5 += h * Hb[ok + 30 + a]
        top = r + 1 if diagonal else 6
        Hb[tgt + r * 6] -= s0
        if top > 1:
            Hb[tgt + r * 6 + 1] -= s1
        if top > 2:
            Hb[tgt + r * 6 + 2] -= s2
        if top > 3:
            Hb[tgt + r * 6 + 3] -= s3
        if top > 4:
            Hb[tgt + r * 6 + 4] -= s4
        if top > 5:
            Hb[tgt + r * 6 + 5] -= s5


@njit(cache=True)
def _block_cholesky(Hb, order, later_ptr, later, tree_ptr, dptr, optr, pos, acc):
    """In-place block-sparse Cholesky of the symmetric H in the compact block storage of ``_block_offsets``
    (lower triangles of the diagonal blocks, the filled blocks below them).

    Factor blocks: L_jj in the lower triangle of tree j's diagonal block, L_ij in the block (i, j) for trees i
    eliminated after j. acc: scratch of the largest tree's size. Returns False if H is not positive definite."""
    nt = order.shape[0]
    F = FREE_BODY_DOFS
    for p in range(nt):
        j = order[p]
        nj = tree_ptr[j + 1] - tree_ptr[j]
        dj = dptr[j]
        if nj == F:
            if not _factor_diagonal(Hb, dj, F):
                return False
        elif not _factor_diagonal(Hb, dj, nj):
            return False
        for q in range(later_ptr[p], later_ptr[p + 1]):
            i = later[q]
            ni = tree_ptr[i + 1] - tree_ptr[i]
            if nj == F and ni == F:
                _factor_off_diagonal(Hb, dj, F, optr[q], F)
            else:
                _factor_off_diagonal(Hb, dj, nj, optr[q], ni)
        # Schur complement update of the later blocks: H_ik -= L_ij L_kj^T (pos(i) >= pos(k); lower triangle of
        # the diagonal blocks)
        for q1 in range(later_ptr[p], later_ptr[p + 1]):
            k = later[q1]
            nk = tree_ptr[k + 1] - tree_ptr[k]
            ok = optr[q1]
            for q2 in range(q1, later_ptr[p + 1]):
                i = later[q2]
                ni = tree_ptr[i + 1] - tree_ptr[i]
                oi = optr[q2]
                tgt = dptr[k] if i == k else _off_block(i, k, pos, later_ptr, later, optr)
                if nj == F and ni == F and nk == F:
                    _schur_update_free(Hb, oi, ok, tgt, i == k)
                else:
                    _schur_update(Hb, nj, oi, ni, ok, nk, tgt, i == k, acc)
    return True


@njit(cache=True, inline="always")
def _forward_diagonal(Hb, dj, nj, x, j0):
    for a in range(nj):
        s = x[j0 + a]
        for c in range(a):
            s -= Hb[dj + a * nj + c] * x[j0 + c]
        x[j0 + a] = s / Hb[dj + a * nj + a]


@njit(cache=True, inline="always")
def _forward_off_diagonal(Hb, o, nj, ni, x, j0, i0):
    for r in range(ni):
        s = 0.0
        for a in range(nj):
            s += Hb[o + r * nj + a] * x[j0 + a]
        x[i0 + r] -= s


@njit(cache=True, inline="always")
def _backward_off_diagonal(Hb, o, nj, ni, x, j0, i0):
    for r in range(ni):
        xr = x[i0 + r]
        for a in range(nj):
            x[j0 + a] -= Hb[o + r * nj + a] * xr


@njit(cache=True, inline="always")
def _backward_diagonal(Hb, dj, nj, x, j0):
    for a in range(nj - 1, -1, -1):
        s = x[j0 + a]
        for c in range(a + 1, nj):
            s -= Hb[dj + c * nj + a] * x[j0 + c]
        x[j0 + a] = s / Hb[dj + a * nj + a]


@njit(cache=True)
def _block_solve(Hb, order, later_ptr, later, tree_ptr, dptr, optr, x):
    """Solve L L^T x = b in place (x holds b) with the factor of ``_block_cholesky``."""
    nt = order.shape[0]
    F = FREE_BODY_DOFS
    for p in range(nt):                                      # forward: L y = b
        j = order[p]
        j0 = tree_ptr[j]
        nj = tree_ptr[j + 1] - j0
        if nj == F:
            _forward_diagonal(Hb, dptr[j], F, x, j0)
        else:
            _forward_diagonal(Hb, dptr[j], nj, x, j0)
        for q in range(later_ptr[p], later_ptr[p + 1]):
            i = later[q]
            i0 = tree_ptr[i]
            ni = tree_ptr[i + 1] - i0
            if nj == F and ni == F:
                _forward_off_diagonal(Hb, optr[q], F, F, x, j0, i0)
            else:
                _forward_off_diagonal(Hb, optr[q], nj, ni, x, j0, i0)
    for p in range(nt - 1, -1, -1):                          # backward: L^T x = y
        j = order[p]
        j0 = tree_ptr[j]
        nj = tree_ptr[j + 1] - j0
        for q in range(later_ptr[p], later_ptr[p + 1]):
            i = later[q]
            i0 = tree_ptr[i]
            ni = tree_ptr[i + 1] - i0
            if nj == F and ni == F:
                _backward_off_diagonal(Hb, optr[q], F, F, x, j0, i0)
            else:
                _backward_off_diagonal(Hb, optr[q], nj, ni, x, j0, i0)
        if nj == F:
            _backward_diagonal(Hb, dptr[j], F, x, j0)
        else:
            _backward_diagonal(Hb, dptr[j], nj, x, j0)


@njit(cache=True)
def _contact_velocity(Jc, cols, bias, v, out):
    """out (N, 3) = J_c v + bias per contact (no bias: a (0, 3) array). The three rows' sums in one pass over the
    contact's columns (three independent sums, each in the order a = 0, 1, ...: v[d] read once, not per row)."""
    nc, _, K = Jc.shape
    has_bias = bias.shape[0] > 0
    for c in range(nc):
        s0 = bias[c, 0] if has_bias else 0.0
        s1 = bias[c, 1] if has_bias else 0.0
        s2 = bias[c, 2] if has_bias else 0.0
        for a in range(K):
            d = cols[c, a]
            if d < 0:                      # padding: the valid columns are a prefix
                break
            vd = v[d]
            s0 += Jc[c, 0, a] * vd
            s1 += Jc[c, 1, a] * vd
            s2 += Jc[c, 2, a] * vd
        out[c, 0] = s0
        out[c, 1] = s1
        out[c, 2] = s2


@njit(cache=True)
def _line_data(model, vc, dvc, prm, ld):
    """Per-contact constants of the search line vc + alpha dvc: ld[:, 0] = |dv_t|^2, ld[:, 1] = v_t . dv_t,
    ld[:, 2] = |v_t|^2 + eps_s^2 (SAP: eps_s = 0), so that ||v_t(alpha)||_s^2 = ld2 + alpha (2 ld1 + alpha ld0)."""
    for c in range(vc.shape[0]):
        ld[c, 0] = dvc[c, 0] * dvc[c, 0] + dvc[c, 1] * dvc[c, 1]
        ld[c, 1] = vc[c, 0] * dvc[c, 0] + vc[c, 1] * dvc[c, 1]
        eps = prm[c, P_EPS]
        ld[c, 2] = vc[c, 0] * vc[c, 0] + vc[c, 1] * vc[c, 1] + eps * eps


@njit(cache=True)
def _line_derivatives(model, alpha, vc, dvc, ld, prm, dt, base, dAd, act_dofs, a_act, c_act, L_act, v, dv,
                      g, Gc):
    """f = dl/dalpha and f' = d2l/dalpha2 at v + alpha dv. ``base`` = (A v - p0) . dv - dt tau_fixed . dv
    (the actuation of dofs without PD gains). From the line data of ``_line_data``: f = base + alpha dAd -
    actuation - sum gamma . dvc, f' = dAd + ... + sum dvc^T G dvc with each contact's gamma and G of ``_contact``
    projected on dvc in closed form (no 3x3 Hessians; SAP: the stick, gap and slip regions of ``_contact``)."""
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
            a = ld[c, 0]
            xtd = ld[c, 1] + alpha * a                              # v_t(alpha) . dv_t
            xr = np.sqrt(max(ld[c, 2] + alpha * (ld[c, 1] + xtd), 0.0))   # |v_t(alpha)|
            dvn = dvc[c, 2]
            mu, Rt, Rn = prm[c, P_MU], prm[c, P_RT], prm[c, P_RN]
            yn = (prm[c, P_VHAT] - vc[c, 2] - alpha * dvn) / Rn
            yr = xr / Rt
            ratio = Rt / Rn
            if yr <= mu * yn:                                        # stick: gamma = (-v_t / Rt, yn)
                f += xtd / Rt - yn * dvn
                fp += a / Rt + dvn * dvn / Rn
            elif mu * ratio * yr <= -yn:                             # gap
                continue
            else:                                                    # slip along t = -v_t / |v_t|
                den = 1.0 + mu * mu * ratio
                gn = (yn + mu * ratio * yr) / den
                td = -xtd / xr                                       # t . dv_t
                f -= mu * gn * td + gn * dvn
                fp += ((mu * mu * ratio / den) * td * td + (mu * gn / yr) * (a - td * td)) / Rt \
                    + (2.0 * mu * td * dvn + dvn * dvn) / (den * Rn)
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
def _tree_diagonal(Ab, tree_ptr, dptr, diagonal):
    """diagonal[t] = 1 where the tree block t of A (compact storage, ``_block_offsets``) has only zeros (either
    sign) off its diagonal (the clutter's free bodies: M in principal axes), else 0."""
    for t in range(tree_ptr.shape[0] - 1):
        n = tree_ptr[t + 1] - tree_ptr[t]
        o = dptr[t]
        diagonal[t] = 1
        for a in range(n):
            for b in range(n):
                if a != b and Ab[o + a * n + b] != 0.0:
                    diagonal[t] = 0


@njit(cache=True, inline="always")
def _tree_product(Ab, tree_ptr, dptr, diagonal, x, out):
    """out = A x (nv,) with A's tree blocks in the compact storage: row by row, s = 0.0 + sum_b A_ab x_b in the
    order b = 0, 1, ... For a diagonal block (``_tree_diagonal``) only the diagonal product is formed: the same
    number for finite x, as the skipped products are zeros and a sum started at +0.0 is never -0.0, so adding a
    zero of either sign leaves it unchanged (0.0 + A_aa x_a keeps the dense loop's sign of a zero product). A
    non-finite x gives a non-finite out either way (A_aa > 0), the only use the callers make of it then."""
    for t in range(tree_ptr.shape[0] - 1):
        t0 = tree_ptr[t]
        n = tree_ptr[t + 1] - t0
        if diagonal[t]:
            o = dptr[t]
            for a in range(n):
                out[t0 + a] = 0.0 + Ab[o + a * (n + 1)] * x[t0 + a]
            continue
        for a in range(n):
            row = dptr[t] + a * n - t0
            s = 0.0
            for b in range(t0, t0 + n):
                s += Ab[row + b] * x[b]
            out[t0 + a] = s


@njit(cache=True, inline="always")
def _add_contact_hessian(Hb, dest, Jc, G, GJ, c, kc, K):
    """Hb[dest[c]] += the lower triangle of J_c^T G_c J_c for contact c with kc columns (GJ (3, >= kc): scratch for
    G_c J_c); dest's row stride per column a is K - a (``_hessian_structure``)."""
    for i in range(3):
        for a in range(kc):
            GJ[i, a] = G[c, i, 0] * Jc[c, 0, a] + G[c, i, 1] * Jc[c, 1, a] + G[c, i, 2] * Jc[c, 2, a]
    e = 0
    for a in range(kc):                                      # J^T G J is symmetric: one triangle, at dest[c]
        j0, j1, j2 = Jc[c, 0, a], Jc[c, 1, a], Jc[c, 2, a]
        for b in range(a, kc):
            Hb[dest[c, e + b - a]] += j0 * GJ[0, b] + j1 * GJ[1, b] + j2 * GJ[2, b]
        e += K - a


@njit(cache=True)
def work_sizes(nv, nt, capacity, kmax):
    """Lengths (float64, int64) of the two scratch buffers of ``icf_step`` for nv dofs in nt trees and up to
    ``capacity`` contacts, each touching at most kmax dofs (``max_contact_dofs``; a step with more allocates)."""
    nf = 3 * nv * nv + 19 * nv + 22 + capacity * (3 * nv + NPARAM + 25)
    ni = capacity * (nv + 2) + nv + nt + 3 * nt * nt + 6 * nt + 1 + (nt + 1) + nt + nt * nt + nt \
        + capacity * (kmax * (kmax + 1) // 2)
    return nf, ni


def max_contact_dofs(tree_sizes) -> int:
    """The most dofs one contact can touch: those of the two largest trees (a contact couples two bodies)."""
    sizes = sorted((int(n) for n in tree_sizes), reverse=True)
    return sum(sizes[:2])


@njit(cache=True)
def _prepare_step(dt, M, v0, k2, damping, effort, kp, kd, position_error, velocity_target, effort_limit, J, bias,
                  signed_distance, stiffness, dissipation, friction, jacobian_columns, options, tree_ptr, tree_of_dof, perm, inv_perm,
                  Ab, Hb, Ainvb, rows_in, W, w, prm, bias3, Jc_buf, cols_buf, counts, stiction, friction_normal_impulse,
                  dptr, state):
    """The set-up of ``icf_step`` (arguments as there, scratch carved by it): A's tree blocks (compact storage
    Ab, ``_block_offsets``), p0, D, the actuation terms and v0 in the kernel's dof order (rows_in: p0, D, c_act,
    a_act, L_act, v0, x), the compressed Jacobian, the Delassus estimate w and the per-contact parameters prm
    (the Hessian's structure: ``_hessian_structure``). Returns (status: CONVERGED = ready, NONPOSITIVE_MASS or
    DELASSUS_FAILED; Jc, cols). state (1,) persists between steps: 1 when Ainvb holds the inverse of the A in Ab
    (then an unchanged A, e.g. free bodies' constant M, is not inverted again: the same numbers)."""
    model = int(options[O_MODEL])
    nv = M.shape[0]
    nc = signed_distance.shape[0]
    nt = tree_ptr.shape[0] - 1
    p0, D, c_act, a_act, L_act, v0p, x = rows_in[0], rows_in[1], rows_in[2], rows_in[3], rows_in[4], rows_in[5], \
        rows_in[6]
    # ---- A = M + dt D (implicit joint damping), p0 = M v0 + dt k2, in the kernel's dof order. M is block-diagonal
    # over the trees: only the tree blocks are read, A is stored as its tree blocks (row-major, block t at dptr[t]);
    # p0 sums a tree's entries in the original dof order (perm is increasing within a tree), so it equals the full
    # row sum M v0 exactly (the skipped terms are exact zeros)
    o = 0
    for t in range(nt):
        dptr[t] = o
        o += (tree_ptr[t + 1] - tree_ptr[t]) ** 2
    dptr[nt] = o
    same = state[0] == 1.0                   # Ainvb is A^-1 of the A in Ab, so far as A is unchanged
    state[0] = 0.0
    for t in range(nt):
        t0, t1 = tree_ptr[t], tree_ptr[t + 1]
        n = t1 - t0
        for i in range(t0, t1):
            pi = perm[i]
            row = dptr[t] + (i - t0) * n - t0
            s = 0.0
            for j in range(t0, t1):
                pj = perm[j]
                m = M[pi, pj]
                a = m + dt * damping[pi] if j == i else m
                if Ab[row + j] != a:
                    same = False
                    Ab[row + j] = a
                s += m * v0[pj]
            if Ab[row + i] <= 0.0:
                return NONPOSITIVE_MASS, Jc_buf[:0].reshape((0, 3, 0)), cols_buf[:0].reshape((0, 0))
            D[i] = 1.0 / np.sqrt(Ab[row + i])
            p0[i] = s + dt * k2[pi]
            v0p[i] = v0[pi]
            # implicit PD actuation tau(v) = clip(a - c v, -L, L) (Actuation.force)
            c_act[i] = dt * kp[pi] + kd[pi]
            a_act[i] = effort[pi] + kp[pi] * position_error[pi] + kd[pi] * velocity_target[pi]
            L_act[i] = effort_limit[pi]

    # ---- contacts: compressed Jacobian, Delassus estimate, model parameters
    if nc and jacobian_columns.shape[0] == nc and _columns_in_range(jacobian_columns, M.shape[0]):
        Jc, cols = _gather_jacobian(J, jacobian_columns, inv_perm, counts, Jc_buf, cols_buf)
    else:
        Jc, cols = _compress_jacobian(J, inv_perm, counts, Jc_buf, cols_buf)
    K = Jc.shape[2]
    for c in range(nc):
        for i in range(3):
            bias3[c, i] = bias[3 * c + i]
    regularized = options[O_REGULARIZED_STICTION] != 0.0
    if nc and (model == 2 or regularized):
        if not _delassus_rms(Ab, tree_ptr, dptr, tree_of_dof, Jc, cols, Ainvb, Hb, x, W, w, same):
            return DELASSUS_FAILED, Jc, cols
        state[0] = 1.0
    sigma = options[O_SIGMA]
    tau_d = options[O_RELAXATION_TIME]
    for c in range(nc):
        phi0, k, d, mu = signed_distance[c], stiffness[c], dissipation[c], friction[c]
        p = prm[c]
        p[P_MU], p[P_PHI0], p[P_D] = mu, phi0, d
        p[P_DTK] = dt * k
        p[P_HCVHAT] = min(-phi0 / dt, 1.0 / d if d > 0.0 else np.inf)    # break velocity (eq. 23)
        p[P_GN0], p[P_EPS], p[P_RT], p[P_RN], p[P_VHAT] = 0.0, 0.0, 0.0, 0.0, 0.0
        if model != 2:
            eps = options[O_STICTION_TOLERANCE]
            if model == 0 or regularized:
                s = 0.0
                for a in range(K):
                    da = cols[c, a]
                    if da < 0:
                        break
                    s += Jc[c, 2, a] * v0p[da]
                vn0 = s + bias3[c, 2]
                # lagged normal impulse gamma_n0 = dt f_n(phi0, v_n0) (eqs. 18, 22)
                gn0 = dt * k * max(-phi0, 0.0) * max(1.0 - d * vn0, 0.0)
                p[P_GN0] = gn0
                if regularized:
                    eps = max(eps, sigma * w[c] * mu * gn0)                   # eq. 26
            p[P_EPS] = eps
            stiction[c] = eps
        else:
            Rt = sigma * w[c]
            Rn = 1.0 / (dt * k * (dt + tau_d))
            if options[O_NEAR_RIGID_FACTOR] > 0.0:
                Rn = max(Rn, options[O_NEAR_RIGID_FACTOR] * w[c])
            p[P_RT], p[P_RN] = Rt, Rn
            p[P_VHAT] = -phi0 / (dt + tau_d)
            stiction[c] = Rt
    if model == 0 and friction_normal_impulse.shape[0] == nc:
        for c in range(nc):
            friction_normal_impulse[c] = prm[c, P_GN0]

    return CONVERGED, Jc, cols


@njit(cache=True)
def _free_velocity(Ab, tree_ptr, dptr, p0, c_act, a_act, L_act, dt, Lb, x):
    """The velocity without contacts x = (A + dt diag(c_act))^-1 (p0 + dt clip(a_act, -L, L)) (the actuation
    unclipped in v), tree by tree; Lb: scratch of the tree blocks' size. Used only to predict which contacts can
    act in this step (``icf_step``); a tree block that is not positive definite gives x = p0 there."""
    nt = tree_ptr.shape[0] - 1
    for t in range(nt):
        t0 = tree_ptr[t]
        n = tree_ptr[t + 1] - t0
        o = dptr[t]
        for a in range(n):
            x[t0 + a] = p0[t0 + a] + dt * min(max(a_act[t0 + a], -L_act[t0 + a]), L_act[t0 + a])
        for e in range(n * n):
            Lb[o + e] = Ab[o + e]
        for a in range(n):
            Lb[o + a * n + a] += dt * c_act[t0 + a]
        if not _factor_diagonal(Lb, o, n):
            continue
        _forward_diagonal(Lb, o, n, x, t0)
        _backward_diagonal(Lb, o, n, x, t0)


@njit(cache=True, inline="always")
def _contact_acts(model, vc, prm, dt, g, G):
    """Whether a contact acts at the contact velocity vc (3,) (m/s): its impulse g (3,) (N s) and Hessian G (3, 3)
    evaluated there by ``_contact`` (written into g and G) are not all zero."""
    _contact(model, vc[0], vc[1], vc[2], prm, dt, g, G)
    for i in range(3):
        if g[i] != 0.0:
            return True
        for j in range(3):
            if G[i, j] != 0.0:
                return True
    return False


@njit(cache=True)
def _partition(keep, lo, hi, Jc, cols, prm, bias3, vc, gamma, G, source):
    """Move the contact rows r in [lo, hi) with keep[r] != 0 to the front of that range (swapping every per-row
    array and keep itself; no row moves when all are kept). Returns their number."""
    i, j = lo, hi - 1
    while True:
        while i <= j and keep[i]:
            i += 1
        while j >= i and not keep[j]:
            j -= 1
        if i >= j:
            return i - lo
        keep[i], keep[j] = keep[j], keep[i]
        source[i], source[j] = source[j], source[i]
        for a in range(Jc.shape[2]):
            cols[i, a], cols[j, a] = cols[j, a], cols[i, a]
            for r in range(3):
                Jc[i, r, a], Jc[j, r, a] = Jc[j, r, a], Jc[i, r, a]
        for a in range(prm.shape[1]):
            prm[i, a], prm[j, a] = prm[j, a], prm[i, a]
        for r in range(3):
            bias3[i, r], bias3[j, r] = bias3[j, r], bias3[i, r]
            vc[i, r], vc[j, r] = vc[j, r], vc[i, r]
            gamma[i, r], gamma[j, r] = gamma[j, r], gamma[i, r]
            for a in range(3):
                G[i, r, a], G[j, r, a] = G[j, r, a], G[i, r, a]


@njit(cache=True)
def _join_acting(model, dt, v, na, nc, keep, Jc, cols, prm, bias3, vc, gamma, G, source):
    """The left-out contact rows [na, nc) evaluated at v (their vc, gamma, G); those that act there are moved to
    rows na, na + 1, ... Returns their number."""
    _contact_velocity(Jc[na:nc], cols[na:nc], bias3[na:nc], v, vc[na:nc])
    for c in range(na, nc):
        keep[c] = 1 if _contact_acts(model, vc[c], prm[c], dt, gamma[c], G[c]) else 0
    return _partition(keep, na, nc, Jc, cols, prm, bias3, vc, gamma, G, source)


@njit(cache=True)
def _hessian_structure(cols, tree_ptr, tree_of_dof, num_dofs, struct_work, dptr, optr, pos, dest_buf):
    """The elimination structure of the trees coupled by the contacts of ``cols`` (N, K) (no contacts: trees
    uncoupled, factored one by one), the compact storage layout of the Hessian (dptr, optr, pos) and, per
    contact, the storage index of each of its J^T G J entries (dest (N, K (K + 1) / 2): pairs (a, b >= a) of its
    compressed columns in row order, -1 for padding). Returns (order, later_ptr, later, dest, storage length)."""
    nc, K = cols.shape
    nt = tree_ptr.shape[0] - 1
    # ---- elimination structure of the trees (no contacts: trees uncoupled, factored one by one)
    if nc:
        for t in range(nt):
            num_dofs[t] = tree_ptr[t + 1] - tree_ptr[t]
        order, later_ptr, later = _elimination_structure_into(nt, tree_of_dof, cols, num_dofs, struct_work)
    else:
        order = struct_work[:nt]
        later_ptr = struct_work[nt:2 * nt + 1]
        later = struct_work[:0]
        for t in range(nt):
            order[t] = t
            later_ptr[t] = 0
        later_ptr[nt] = 0
    n_blocks = _block_offsets(tree_ptr, order, later_ptr, later, dptr, optr, pos)
    npair = K * (K + 1) // 2
    if nc * npair <= dest_buf.shape[0]:
        dest = dest_buf[:nc * npair].reshape((nc, npair))
    else:                                                    # a contact touching more than two trees' dofs
        dest = np.empty((nc, npair), dtype=np.int64)
    for c in range(nc):
        # ``_entry`` of each pair, with the block of the last pair of different trees kept (a contact's columns
        # are those of one or two trees: its off-diagonal block is searched once, not once per entry)
        # (column a's tree, its first dof, size and diagonal block read once per a, not per pair)
        hi_t, lo_t, block = -1, -1, -1
        e = 0
        for a in range(K):
            da = cols[c, a]
            if da < 0:
                for b in range(a, K):
                    dest[c, e] = -1
                    e += 1
                continue
            ta0 = tree_of_dof[da]
            t0 = tree_ptr[ta0]
            n0 = tree_ptr[ta0 + 1] - t0
            d0 = dptr[ta0]
            for b in range(a, K):
                db = cols[c, b]
                if db < 0:
                    dest[c, e] = -1
                    e += 1
                    continue
                tb = tree_of_dof[db]
                if tb == ta0:
                    la, lb = da - t0, db - t0
                    if la < lb:
                        la, lb = lb, la
                    dest[c, e] = d0 + la * n0 + lb
                else:
                    ta = ta0
                    ra, rb = da, db                          # rows of the later-eliminated tree
                    if pos[ta] < pos[tb]:
                        ta, tb, ra, rb = tb, ta, db, da
                    if ta != hi_t or tb != lo_t:
                        hi_t, lo_t = ta, tb
                        block = _off_block(ta, tb, pos, later_ptr, later, optr)
                    dest[c, e] = block + (ra - tree_ptr[ta]) * (tree_ptr[tb + 1] - tree_ptr[tb]) + rb - tree_ptr[tb]
                e += 1
    return order, later_ptr, later, dest, n_blocks


@njit(cache=True)
def icf_step(dt, M, v0, k2, damping, effort, kp, kd, position_error, velocity_target, effort_limit,
             J, bias, signed_distance, stiffness, dissipation, friction, jacobian_columns,
             options, structure, fwork, iwork, stiction, v_next, impulse, generalized_force, actuation,
             friction_normal_impulse):
    """One step of the Lagged, Similar or SAP engine (``options[O_MODEL]`` = MODEL_CODES[...]), see the module
    docstring.

    Inputs as ``StepInputs`` (original dof order): dt (s), M (nv,nv), v0 (nv,), k2 (nv,) explicit generalized
    forces, damping (nv,) implicit joint damping; the six (nv,) ``Actuation`` arrays; the contacts' J (3N,nv),
    bias (3N,), signed_distance (N,) m, stiffness (N,) N/m, dissipation (N,) s/m, friction (N,);
    jacobian_columns (N, kmax) int64 ``ContactSet.jacobian_columns`` (J is read at those columns only) or (0, 0)
    when not known (J's rows are scanned for their non-zero columns).
    options (NOPTIONS,): O_* entries. structure (int64): tree_ptr (nt+1,) | tree_of_dof (nv,) | perm (nv,) |
    inv_perm (nv,): tree t owns the kernel's dofs tree_ptr[t]:tree_ptr[t+1], kernel dof i is dof perm[i].
    fwork, iwork: scratch of ``work_sizes(nv, nt, capacity >= N)`` entries (fwork's A^-1 part must stay zero
    between trees: allocate it zeroed).
    Outputs: stiction (>= N,) the effective stiction tolerance per contact (Lagged, Similar: eps_s; SAP:
    sigma w mu gamma_n, eq. 25); v_next (nv,), impulse (N,3) N*s, generalized_force (nv,) J^T gamma / dt,
    actuation (nv,) tau; friction_normal_impulse (N,) the lagged gamma_n0 (written when its length is N).
    On a failure status (NONFINITE_RESIDUAL, NOT_POSITIVE_DEFINITE, LINE_SEARCH_NONFINITE, NONPOSITIVE_MASS,
    DELASSUS_FAILED, NONFINITE_RESULT) the outputs are not written. CONVERGED guarantees finite v_next and impulse.
    Returns (status, iterations, residual ratio, iteration of a failure (-1), line-search evaluations, contacts
    left out of Newton's problem to the end (O_DEFER_OPEN_CONTACTS; their impulses are zero))."""
    model = int(options[O_MODEL])
    nv = M.shape[0]
    nc = signed_distance.shape[0]
    nc_all = nc
    nt = structure.shape[0] - 3 * nv - 1
    tree_ptr = structure[:nt + 1]
    tree_of_dof = structure[nt + 1:nt + 1 + nv]
    perm = structure[nt + 1 + nv:nt + 1 + 2 * nv]
    inv_perm = structure[nt + 1 + 2 * nv:nt + 1 + 3 * nv]
    # ---- scratch (layout of work_sizes)
    o = 0
    Ab = fwork[o:o + nv * nv]                  # compact block storage (_block_offsets): A's tree blocks
    o += nv * nv
    Hb = fwork[o:o + nv * nv]                  # the Hessian's filled blocks (lower triangle), then its factor
    o += nv * nv
    Ainvb = fwork[o:o + nv * nv]               # A^-1's tree blocks (Delassus estimate)
    o += nv * nv
    rows_in = fwork[o:o + 7 * nv].reshape((7, nv))
    o += 7 * nv
    rows = fwork[o:o + 6 * nv].reshape((6, nv))
    o += 6 * nv
    out = fwork[o:o + 3 * nv].reshape((3, nv))
    o += 3 * nv
    GJ_buf = fwork[o:o + 3 * nv]
    o += 3 * nv
    g1 = fwork[o:o + 3]
    G1 = fwork[o + 3:o + 12].reshape((3, 3))
    W = fwork[o + 12:o + 21].reshape((3, 3))
    state = fwork[o + 21:o + 22]               # persists between steps (_prepare_step)
    o += 22
    capacity = (fwork.shape[0] - o) // (3 * nv + NPARAM + 25)
    Jc_buf = fwork[o:o + capacity * 3 * nv]
    o += capacity * 3 * nv
    prm = fwork[o:o + nc * NPARAM].reshape((nc, NPARAM))
    o += capacity * NPARAM
    bias3 = fwork[o:o + 3 * nc].reshape((nc, 3))
    vc = fwork[o + 3 * capacity:o + 3 * capacity + 3 * nc].reshape((nc, 3))
    dvc = fwork[o + 6 * capacity:o + 6 * capacity + 3 * nc].reshape((nc, 3))
    ld = fwork[o + 9 * capacity:o + 9 * capacity + 3 * nc].reshape((nc, 3))
    gamma = fwork[o + 12 * capacity:o + 12 * capacity + 3 * nc].reshape((nc, 3))
    o += 15 * capacity
    G = fwork[o:o + 9 * nc].reshape((nc, 3, 3))
    o += 9 * capacity
    w = fwork[o:o + nc]
    cols_buf = iwork[:capacity * nv]
    oi = capacity * nv
    counts = iwork[oi:oi + capacity]
    oi += capacity
    source = iwork[oi:oi + capacity]
    oi += capacity
    act_dofs = iwork[oi:oi + nv]
    oi += nv
    num_dofs = iwork[oi:oi + nt]
    oi += nt
    struct_work = iwork[oi:oi + 3 * nt * nt + 6 * nt + 1]
    oi += 3 * nt * nt + 6 * nt + 1
    dptr = iwork[oi:oi + nt + 1]
    oi += nt + 1
    pos = iwork[oi:oi + nt]
    oi += nt
    optr = iwork[oi:oi + nt * nt]
    oi += nt * nt
    tree_diagonal = iwork[oi:oi + nt]          # 1 where A's tree block is diagonal (_tree_diagonal)
    oi += nt
    dest_buf = iwork[oi:]
    p0, D, c_act, a_act, L_act, v0p = rows_in[0], rows_in[1], rows_in[2], rows_in[3], rows_in[4], rows_in[5]
    v, jc, tau = out[0], out[1], out[2]

    status, Jc_all, cols_all = _prepare_step(
        dt, M, v0, k2, damping, effort, kp, kd, position_error, velocity_target, effort_limit, J, bias,
        signed_distance, stiffness, dissipation, friction, jacobian_columns, options, tree_ptr, tree_of_dof, perm,
        inv_perm, Ab, Hb,
        Ainvb, rows_in, W, w, prm, bias3, Jc_buf, cols_buf, counts, stiction, friction_normal_impulse, dptr, state)
    if status != CONVERGED:
        return status, 0, 0.0, 0, 0, 0
    K = Jc_all.shape[2]
    _tree_diagonal(Ab, tree_ptr, dptr, tree_diagonal)
    GJ = GJ_buf[:3 * K].reshape((3, K))
    # ---- open contacts deferred (O_DEFER_OPEN_CONTACTS): a contact with a positive gap (within the query's
    # margin) that exerts nothing at v0 nor at the contact-free velocity (in its gap region: zero impulse and
    # zero Hessian, also in a neighbourhood) is left out of Newton's problem, whose contacts are the rows [:na]
    # (in input order when none is left out). After every Newton update the left-out rows are evaluated at the
    # new v and those that act there join; at convergence too, and Newton continues if any joined. The result
    # therefore meets the stopping criterion of the whole problem (its left-out contacts' impulses are exactly
    # zero at v): the same solution of the same convex problem, with fewer contacts per iteration.
    prm_all, bias_all, vc_all, dvc_all, ld_all, gamma_all, G_all = prm, bias3, vc, dvc, ld, gamma, G
    for c in range(nc):
        source[c] = c
    _contact_velocity(Jc_all, cols_all, bias_all, v0p, vc_all)
    defer = options[O_DEFER_OPEN_CONTACTS] != 0.0
    if nc and defer:
        vfree = rows[0]
        _free_velocity(Ab, tree_ptr, dptr, p0, c_act, a_act, L_act, dt, Hb, vfree)
        _contact_velocity(Jc_all, cols_all, bias_all, vfree, dvc_all)
    na = nc
    if nc and defer:
        for c in range(nc):
            acts_free = _contact_acts(model, dvc_all[c], prm_all[c], dt, gamma_all[c], G_all[c])
            acts_v0 = _contact_acts(model, vc_all[c], prm_all[c], dt, gamma_all[c], G_all[c])
            counts[c] = 1 if prm_all[c, P_PHI0] <= 0.0 or acts_free or acts_v0 else 0
        na = _partition(counts, 0, nc, Jc_all, cols_all, prm_all, bias_all, vc_all, gamma_all, G_all, source)
    order, later_ptr, later, dest, n_blocks = _hessian_structure(
        cols_all[:na], tree_ptr, tree_of_dof, num_dofs, struct_work, dptr, optr, pos, dest_buf)
    na_structure = na
    relative_tolerance = options[O_RELATIVE_TOLERANCE]
    absolute_tolerance = options[O_ABSOLUTE_TOLERANCE]
    max_iterations = int(options[O_MAX_ITERATIONS])
    line_search_max_iterations = int(options[O_LINE_SEARCH_MAX_ITERATIONS])

    # ---- Newton's method (section X) in the kernel's dof order: v, gamma, J^T gamma, tau at the last iterate
    n_act = 0
    for d in range(nv):
        if c_act[d] > 0.0:
            act_dofs[n_act] = d
            n_act += 1
    act_dofs = act_dofs[:n_act]
    dtau, tau_fixed, Av, r, dv = rows[0], rows[1], rows[2], rows[3], rows[4]
    for d in range(nv):
        tau[d] = min(max(a_act[d], -L_act[d]), L_act[d])      # no PD gains on this dof: tau is constant
        tau_fixed[d] = tau[d]
        dtau[d] = 0.0
        v[d] = v0p[d]
    zero_bias = rows[5, :0].reshape((0, 3))
    acc = rows[5]                              # Cholesky scratch (nv)
    Adv = rows[5]                              # A dv in the line search (after the Cholesky: acc is free)
    scale_p0 = 0.0
    for d in range(nv):
        scale_p0 += (D[d] * p0[d]) ** 2
    scale_p0 = np.sqrt(scale_p0)
    residual_ratio = np.inf
    iterations = 0
    # the left-out contacts were evaluated at this v by _join_acting: those still left out do not act here, so a
    # second evaluation at the same v (at the convergence tests) would find none (the same numbers): skipped
    joined_at_v = False
    n_eval = 0
    status = MAX_ITERATIONS
    while True:
        iteration = iterations
        if na != na_structure:                  # contacts joined: the Hessian's structure of the new problem
            order, later_ptr, later, dest, n_blocks = _hessian_structure(
                cols_all[:na], tree_ptr, tree_of_dof, num_dofs, struct_work, dptr, optr, pos, dest_buf)
            na_structure = na
        nc = na
        Jc, cols, prm, bias3 = Jc_all[:na], cols_all[:na], prm_all[:na], bias_all[:na]
        vc, dvc, ld, gamma, G = vc_all[:na], dvc_all[:na], ld_all[:na], gamma_all[:na], G_all[:na]
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
                if d < 0:                      # padding: the valid columns are a prefix
                    break
                jc[d] += Jc[c, 0, a] * gamma[c, 0] + Jc[c, 1, a] * gamma[c, 1] + Jc[c, 2, a] * gamma[c, 2]
        _tree_product(Ab, tree_ptr, dptr, tree_diagonal, v, Av)
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
            return NONFINITE_RESIDUAL, iterations, residual_ratio, iteration, n_eval, 0
        scale = max(np.sqrt(n_av), np.sqrt(n_jc), scale_p0)
        rnorm = np.sqrt(rnorm)
        residual_ratio = rnorm / scale if scale > 0 else rnorm
        # at least one Newton step (see lagged.py: dt k2 can be below eps_r of a large momentum)
        if iteration > 0 and rnorm <= absolute_tolerance + relative_tolerance * scale:
            if na < nc_all and not joined_at_v:
                joined_at_v = True
                m = _join_acting(model, dt, v, na, nc_all, counts, Jc_all, cols_all, prm_all, bias_all, vc_all,
                                 gamma_all, G_all, source)
                if m:
                    na += m
                    continue
            status = CONVERGED
            break
        if iteration == max_iterations:
            break
        iterations += 1
        # Hessian H = A + dt diag(-dtau) + J^T G J on the filled block structure (zeroed first)
        # (compact block storage: A's tree blocks, zero filled blocks; only lower triangles are used)
        nd = dptr[nt]
        for e in range(nd):
            Hb[e] = Ab[e]
        for e in range(nd, n_blocks):
            Hb[e] = 0.0
        for q in range(n_act):
            d = act_dofs[q]
            t = tree_of_dof[d]
            Hb[dptr[t] + (d - tree_ptr[t]) * (tree_ptr[t + 1] - tree_ptr[t] + 1)] -= dt * dtau[d]
        for c in range(nc):
            kc = K                                          # the contact's columns: the prefix before the padding
            while kc > 0 and cols[c, kc - 1] < 0:
                kc -= 1
            if kc == 2 * FREE_BODY_DOFS:                    # literal sizes: unrolled (see FREE_BODY_DOFS)
                _add_contact_hessian(Hb, dest, Jc, G, GJ, c, 2 * FREE_BODY_DOFS, K)
            elif kc == FREE_BODY_DOFS:
                _add_contact_hessian(Hb, dest, Jc, G, GJ, c, FREE_BODY_DOFS, K)
            else:
                _add_contact_hessian(Hb, dest, Jc, G, GJ, c, kc, K)
        if not _block_cholesky(Hb, order, later_ptr, later, tree_ptr, dptr, optr, pos, acc):
            return NOT_POSITIVE_DEFINITE, iterations, residual_ratio, iteration, n_eval, 0
        for d in range(nv):
            dv[d] = -r[d]
        _block_solve(Hb, order, later_ptr, later, tree_ptr, dptr, optr, dv)
        # exact line search on f(alpha) = dl/dalpha (non-decreasing: the cost is convex)
        _contact_velocity(Jc, cols, zero_bias, dv, dvc)
        f0 = 0.0
        base = 0.0
        _tree_product(Ab, tree_ptr, dptr, tree_diagonal, dv, Adv)
        dAd = 0.0
        for d in range(nv):                    # three independent sums (each in the order d = 0, 1, ...)
            dAd += dv[d] * Adv[d]
            f0 += r[d] * dv[d]
            base += (Av[d] - p0[d]) * dv[d]
            if not c_act[d] > 0.0:
                base -= dt * tau_fixed[d] * dv[d]
        if not np.isfinite(f0):
            return NONFINITE_RESIDUAL, iterations, residual_ratio, iteration, n_eval, 0
        if not f0 < 0.0:
            # not a descent direction: only possible at round-off level of the optimum
            if rnorm <= 1e3 * (absolute_tolerance + relative_tolerance * scale):
                if na < nc_all and not joined_at_v:
                    joined_at_v = True
                    m = _join_acting(model, dt, v, na, nc_all, counts, Jc_all, cols_all, prm_all, bias_all, vc_all,
                                     gamma_all, G_all, source)
                    if m:
                        na += m
                        continue
                status = CONVERGED
            else:
                status = NOT_DESCENT
            break
        _line_data(model, vc, dvc, prm, ld)
        n_eval += 1
        f1, fp1 = _line_derivatives(model, 1.0, vc, dvc, ld, prm, dt, base, dAd, act_dofs, a_act, c_act, L_act,
                                    v, dv, g1, G1)
        if not (np.isfinite(f1) and np.isfinite(fp1)):
            return LINE_SEARCH_NONFINITE, iterations, residual_ratio, iteration, n_eval, 0
        alpha = 1.0
        if f1 > 0.0:
            # rtsafe (solvers/rtsafe.py) on the bracket [0, 1]: Newton from alpha = 1, bisection fallback
            f_tol = 1e-6 * abs(f0)
            lo, hi = 0.0, 1.0
            alpha, dx_old = rtsafe_start(lo, hi, f1, fp1)
            for _ in range(line_search_max_iterations):
                n_eval += 1
                f, fp = _line_derivatives(model, alpha, vc, dvc, ld, prm, dt, base, dAd, act_dofs, a_act, c_act,
                                          L_act, v, dv, g1, G1)
                if not (np.isfinite(f) and np.isfinite(fp)):
                    return LINE_SEARCH_NONFINITE, iterations, residual_ratio, iteration, n_eval, 0
                done, alpha, lo, hi, dx_old = rtsafe_step(alpha, f, fp, lo, hi, dx_old, f_tol)
                if done:
                    break
        for d in range(nv):
            v[d] += alpha * dv[d]
        for c in range(nc):
            for i in range(3):
                vc[c, i] += alpha * dvc[c, i]
        joined_at_v = na < nc_all
        if joined_at_v:                        # left-out contacts that act at the new v join now
            na += _join_acting(model, dt, v, na, nc_all, counts, Jc_all, cols_all, prm_all, bias_all, vc_all,
                               gamma_all, G_all, source)
    # ---- results in the model's dof order
    finite = True
    for i in range(nv):
        pi = perm[i]
        v_next[pi] = v[i]
        generalized_force[pi] = jc[i] / dt
        actuation[pi] = tau[i]
        if not np.isfinite(v[i]):
            finite = False
    for c in range(nc_all):
        sc = source[c]
        for i in range(3):
            impulse[sc, i] = gamma_all[c, i]
            if not np.isfinite(gamma_all[c, i]):
                finite = False
        if model == 2:                         # SAP's slip speed sigma w mu gamma_n
            stiction[sc] = prm_all[c, P_RT] * prm_all[c, P_MU] * gamma_all[c, 2]
    if status == CONVERGED and not finite:
        return NONFINITE_RESULT, iterations, residual_ratio, -1, n_eval, nc_all - na
    return status, iterations, residual_ratio, -1, n_eval, nc_all - na
