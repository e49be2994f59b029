"""The compiled kernel of the minimal-coordinate LCP engine (``lcp_minimal.py``, kernel "numba"): the assembly of
the contact LCP's data in one call. Only the jit decorator, numpy and math here (the kernel modules' layer)."""

from __future__ import annotations

import numpy as np

from ..jit import njit


@njit(cache=True)
def contact_lcp_kernel(W, sel, c, gap, mu, basis, nu3, M, q, Bt):
    """Compiled assembly of the eq. 28 / eq. 34 LCP data for the contacts ``sel`` of the full operational-
    space matrix W ((3N + nb)^2, contact rows first, bilateral rows from nu3 = 3N) -- what
    ``ContactLCP.solve`` builds with numpy from the extracted blocks, in one call:

        M[:nk, :nk] = D^T W_uu D,   q[:nk] = D^T (c_u + gap on the normal rows),   Bt = D^T W_ub,
        sigma columns/rows (E_hat, E_bar with mu) at offset s0 = M.shape[0] - n; everything else 0.

    D = blockdiag(basis) (3n, n k), n = len(sel), k = basis.shape[1]; Bt (nk, nb)."""
    n = sel.shape[0]
    k = basis.shape[1]
    nb = Bt.shape[1]
    size = M.shape[0]
    s0 = size - n
    for i in range(size):
        q[i] = 0.0
        for j in range(size):
            M[i, j] = 0.0
    t = np.empty((k, 3))
    for a in range(n):
        ra = 3 * sel[a]
        for b in range(n):
            rb = 3 * sel[b]
            # t = basis^T W_ab (k, 3), then the block t basis (k, k)
            for i in range(k):
                for s in range(3):
                    t[i, s] = (basis[0, i] * W[ra, rb + s] + basis[1, i] * W[ra + 1, rb + s]
                               + basis[2, i] * W[ra + 2, rb + s])
            for i in range(k):
                for j in range(k):
                    M[a * k + i, b * k + j] = t[i, 0] * basis[0, j] + t[i, 1] * basis[1, j] + t[i, 2] * basis[2, j]
        cn = c[ra + 2] + gap[a]
        for i in range(k):
            q[a * k + i] = c[ra] * basis[0, i] + c[ra + 1] * basis[1, i] + cn * basis[2, i]
            for j in range(nb):
                Bt[a * k + i, j] = (basis[0, i] * W[ra, nu3 + j] + basis[1, i] * W[ra + 1, nu3 + j]
                                    + basis[2, i] * W[ra + 2, nu3 + j])
        # E_hat: sigma in every friction row; E_bar: mu F_n - sum beta_j
        for j in range(1, k):
            M[a * k + j, s0 + a] = 1.0
            M[s0 + a, a * k + j] = -1.0
        M[s0 + a, a * k] = mu[sel[a]]
