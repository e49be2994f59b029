"""The compiled kernels of Lemke's method (``lemke.py``, kernel "numba"): the whole pivot sequence in one call
(``lemke_pivots``, ``lemke_solve``) and the complementarity error. Only the jit decorator, numpy and math here
(the kernel modules' layer)."""

from __future__ import annotations

import numpy as np

from ..jit import njit

# the status codes the kernels return (lemke.py turns them into an LCPStatus): solved, ray termination, pivot
# limit reached, non-finite data, the trivial solution z = 0 (q >= 0)
SOLVED, RAY, MAX_PIVOTS, NON_FINITE, TRIVIAL = 0, 1, 2, 3, 4


@njit(cache=True)
def _lex_pick(T, rows, nrows, col, n, sign):
    """Lexicographic minimum over rows[:nrows] of [B^-1] row / (sign * col) (see _lexicographic_pick)."""
    for k in range(n):
        target = np.inf
        for a in range(nrows):
            r = rows[a]
            val = T[r, k] / (sign * col[r])
            if val < target:
                target = val
        tol = 1e-12 * max(1.0, abs(target))
        m = 0
        for a in range(nrows):
            r = rows[a]
            val = T[r, k] / (sign * col[r])
            if abs(val - target) <= tol:
                rows[m] = r
                m += 1
        nrows = m
        if nrows == 1:
            break
    return rows[0]

@njit(cache=True)
def _pivot_kernel(T, row, col, nz):
    ncols = T.shape[1]
    p = T[row, col]
    m = 0
    for j in range(ncols):
        T[row, j] /= p
        if T[row, j] != 0.0:
            nz[m] = j
            m += 1
    for i in range(T.shape[0]):
        if i == row:
            continue
        f = T[i, col]
        if f != 0.0:
            for a in range(m):
                j = nz[a]
                T[i, j] -= f * T[row, j]

@njit(cache=True)
def lemke_pivots(T, basis, n, max_pivots, pivot_tol):
    """The complementary pivot sequence of ``LemkeSolver.solve`` on the prepared tableau T (n, 2n + 2)
    with basis = [0 .. n-1]. Returns (status, pivots): status SOLVED, RAY (ray termination) or MAX_PIVOTS."""
    z0 = 2 * n
    rhs = 2 * n + 1
    rows = np.empty(n, dtype=np.int64)
    nz = np.empty(2 * n + 2, dtype=np.int64)
    col = np.empty(n)
    # first pivot: z0 enters at the row of min q_i / d_i (d = -T[:, z0])
    best = np.inf
    row = 0
    for i in range(n):
        ratio = T[i, rhs] / (-T[i, z0])
        if ratio < best:
            best = ratio
            row = i
    tol = 1e-14 * max(1.0, abs(best))
    m = 0
    for i in range(n):
        if T[i, rhs] / (-T[i, z0]) <= best + tol:
            rows[m] = i
            m += 1
    if m > 1:
        for i in range(n):
            col[i] = T[i, z0]
        row = _lex_pick(T, rows, m, col, n, -1.0)
    entering = z0
    pivots = 0
    while True:
        leaving = basis[row]
        _pivot_kernel(T, row, entering, nz)
        basis[row] = entering
        pivots += 1
        if leaving == z0:
            return SOLVED, pivots
        if pivots >= max_pivots:
            return MAX_PIVOTS, pivots
        entering = leaving + n if leaving < n else leaving - n
        scale = 1.0
        for i in range(n):
            col[i] = T[i, entering]
            if abs(col[i]) > scale:
                scale = abs(col[i])
        best = np.inf
        found = False
        for i in range(n):
            if col[i] > pivot_tol * scale:
                found = True
                ratio = T[i, rhs] / col[i]
                if ratio < best:
                    best = ratio
        if not found:
            return RAY, pivots
        tol = 1e-12 * max(1.0, abs(best))
        m = 0
        z0_row = -1
        for i in range(n):
            if col[i] > pivot_tol * scale and T[i, rhs] / col[i] <= best + tol:
                rows[m] = i
                m += 1
                if z0_row < 0 and basis[i] == z0:
                    z0_row = i
        if m == 1:
            row = rows[0]
        elif z0_row >= 0:
            row = z0_row        # z0 leaving terminates
        else:
            row = _lex_pick(T, rows, m, col, n, 1.0)

@njit(cache=True)
def lemke_solve(M, q, d, T, basis, max_pivots, pivot_tol, zero_tol, q_out, z):
    """The whole of ``LemkeSolver.solve`` after the argument checks, compiled: q round-off to 0, the trivial
    solution, the finiteness check, the tableau, the pivots and z. Returns (status, pivots): status as
    lemke_pivots, NON_FINITE for non-finite data, TRIVIAL for the trivial solution z = 0."""
    n = q.shape[0]
    q_max = 0.0
    for i in range(n):
        if not np.isfinite(q[i]):
            q_max = np.inf
            break
        q_max = max(q_max, abs(q[i]))
    z[:] = 0.0
    if not np.isfinite(q_max):
        q_out[:] = q
        return NON_FINITE, 0
    threshold = zero_tol * max(1.0, q_max)
    q_min = np.inf
    for i in range(n):
        q_out[i] = 0.0 if abs(q[i]) <= threshold else q[i]
        q_min = min(q_min, q_out[i])
    if q_min >= 0.0:
        return TRIVIAL, 0
    for i in range(n):
        for j in range(n):
            if not np.isfinite(M[i, j]):
                return NON_FINITE, 0
    for i in range(n):
        for j in range(n):
            T[i, j] = 0.0
            T[i, n + j] = -M[i, j]
        T[i, i] = 1.0
        T[i, 2 * n] = -d[i]
        T[i, 2 * n + 1] = q_out[i]
        basis[i] = i
    code, pivots = lemke_pivots(T, basis, n, max_pivots, pivot_tol)
    for r in range(n):
        var = basis[r]
        if n <= var < 2 * n:
            value = T[r, 2 * n + 1]
            z[var - n] = max(value, 0.0) if code == SOLVED else value
    return code, pivots

@njit(cache=True)
def complementarity_error_kernel(z, w):
    """Compiled ``LCPResult.complementarity_error`` (the same maximum, NaN if any term is NaN)."""
    err = 0.0
    for i in range(z.shape[0]):
        a, b, c = -z[i], -w[i], abs(z[i] * w[i])
        if np.isnan(a) or np.isnan(b) or np.isnan(c):
            return np.nan
        err = max(err, a, b, c)
    return err
