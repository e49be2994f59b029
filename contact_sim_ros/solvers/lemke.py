"""Lemke's complementary pivoting method for the linear complementarity problem LCP(M, q).

Find z such that   w = M z + q >= 0,   z >= 0,   z^T w = 0.

Algorithm (Cottle, Pang & Stone, "The Linear Complementarity Problem", 1992, sec. 4.4; Murty, "Linear
Complementarity, Linear and Nonlinear Programming", 1988, ch. 2):

* augment with an artificial variable z0 and a covering vector d > 0:  w = M z + d z0 + q;
* start from the almost-complementary basis {w} with z0 entering at the most negative q_i / d_i;
* complementary pivoting: the variable entering next is the complement of the one that just left;
* the leaving variable is chosen by the *lexicographic* minimum ratio test on the rows of
  [B^-1 q, B^-1] (B the current basis), which makes every basis visited distinct and so rules out cycling
  on degenerate problems (Cottle-Pang-Stone, sec. 4.9);
* termination: z0 leaves the basis (SOLVED), no row limits the entering column (RAY_TERMINATION: the
  method cannot conclude; for copositive-plus M this means the LCP is infeasible), or the pivot limit is hit
  (MAX_PIVOTS).

The tableau is a dense (n, 2n + 2) array allocated once per size and reused (``LemkeSolver`` keeps it);
each pivot is one rank-1 update, O(n^2), restricted to the rows whose entering-column entry is non-zero.

Two implementations of the same pivoting rules: ``kernel="numpy"`` (readable reference: one vectorised
rank-1 update per pivot, the loop in Python) and ``kernel="numba"`` (default: the whole pivot sequence in one
compiled call, ``lemke_pivots``; the rank-1 update skips zero entries of the pivot row and column, so the
tableau entries are computed by the same floating-point operations and both kernels visit the same bases).
On the LCPs of the LCP engine (sizes 6 ... 300) the compiled loop removes ~5-10 us of Python/numpy overhead per
pivot (``benchmarks/lcp/lemke_kernels.py``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .lemke_kernels import (MAX_PIVOTS, NON_FINITE, SOLVED, TRIVIAL, complementarity_error_kernel, lemke_pivots,
                            lemke_solve)

KERNELS = ("numba", "numpy")

class LCPStatus(enum.Enum):
    SOLVED = "solved"
    RAY_TERMINATION = "ray_termination"
    MAX_PIVOTS = "max_pivots"

    @property
    def ok(self) -> bool:
        return self is LCPStatus.SOLVED


@dataclass
class LCPResult:
    z: np.ndarray             # (n,) solution (meaningful only when status is SOLVED)
    w: np.ndarray             # (n,) M z + q
    status: LCPStatus
    pivots: int
    message: str = ""

    @property
    def complementarity_error(self) -> float:
        """max(|min(z, 0)|, |min(w, 0)|, |z_i w_i|): 0 for an exact solution."""
        if self.z.size == 0:
            return 0.0
        return float(complementarity_error_kernel(self.z, self.w))


class LemkeSolver:
    """Reusable Lemke solver: keeps the tableau and index scratch between calls of equal size.

    pivot_tol:  entries of the entering column below this (relative to the column's max) are treated as 0.
    zero_tol:   entries of q with |q_i| <= zero_tol * max(1, max |q|) are set to 0 (round-off).
    max_pivots: pivot limit; None means 50 * (n + 1) (Lemke needs far fewer on the problems seen here).
    kernel:     "numba" (compiled pivot loop, default) or "numpy" (the loop in Python); same pivots.
    """

    def __init__(self, pivot_tol: float = 1e-12, max_pivots: int | None = None, zero_tol: float = 1e-13,
                 kernel: str = "numba"):
        if kernel not in KERNELS:
            raise ConfigError(f"Lemke kernel {kernel!r} unknown; valid kernels: {', '.join(KERNELS)}")
        self.kernel = kernel
        if not (pivot_tol > 0.0):
            raise ConfigError(f"Lemke pivot_tol must be > 0, got {pivot_tol!r}")
        if max_pivots is not None and max_pivots < 1:
            raise ConfigError(f"Lemke max_pivots must be >= 1, got {max_pivots!r}")
        self.pivot_tol = float(pivot_tol)
        self.zero_tol = float(zero_tol)
        self.max_pivots = max_pivots
        self._n = -1

    def _allocate(self, n: int) -> None:
        self._n = n
        # columns: w (0..n-1), z (n..2n-1), z0 (2n), rhs (2n+1)
        self._tableau = np.empty((n, 2 * n + 2))
        self._basis = np.empty(n, dtype=np.int64)
        self._identity = np.eye(n)
        self._range = np.arange(n)
        self._ones = np.ones(n)

    def solve(self, M: np.ndarray, q: np.ndarray, covering: np.ndarray | None = None) -> LCPResult:
        """Solve LCP(M, q). M (n, n), q (n,). ``covering`` is the covering vector d (> 0, default ones)."""
        M = np.asarray(M, dtype=float)
        q = np.asarray(q, dtype=float)
        n = q.shape[0]
        if M.shape != (n, n):
            raise ConfigError(f"LCP matrix has shape {M.shape}, expected {(n, n)} to match q")
        if self.kernel == "numba" and n:
            return self._solve_compiled(M, q, n, covering)
        if n == 0:
            return LCPResult(np.zeros(0), q.copy(), LCPStatus.SOLVED, 0)
        abs_q = np.abs(q)
        q_max = float(abs_q.max())            # nan / inf if q is not finite
        if np.isfinite(q_max):
            # round-off negatives (|q_i| ~ 1e-17 where the exact value is 0) would start a pivot sequence
            # on a numerically degenerate problem: treat them as 0
            q = np.where(abs_q <= self.zero_tol * max(1.0, q_max), 0.0, q)
            if q.min() >= 0.0:
                return LCPResult(np.zeros(n), q, LCPStatus.SOLVED, 0)
        if not (np.isfinite(q_max) and np.isfinite(M).all()):
            return LCPResult(np.zeros(n), q.copy(), LCPStatus.RAY_TERMINATION, 0, "non-finite LCP data")
        d = np.ones(n) if covering is None else np.asarray(covering, dtype=float)
        if d.shape != (n,) or np.any(d <= 0.0):
            raise ConfigError("Lemke covering vector must have shape (n,) and positive entries")
        if n != self._n:
            self._allocate(n)
        T = self._tableau
        basis = self._basis
        # w - M z - d z0 = q
        T[:, :n] = self._identity
        np.negative(M, out=T[:, n:2 * n])
        T[:, 2 * n] = -d
        T[:, 2 * n + 1] = q
        basis[:] = self._range
        z0 = 2 * n
        rhs = 2 * n + 1
        max_pivots = self.max_pivots if self.max_pivots is not None else 50 * (n + 1)
        if self.kernel == "numba":
            code, pivots = lemke_pivots(T, basis, n, max_pivots, self.pivot_tol)
            if code == SOLVED:
                return self._result(M, q, n, LCPStatus.SOLVED, pivots)
            if code == MAX_PIVOTS:
                return self._result(M, q, n, LCPStatus.MAX_PIVOTS, pivots,
                                    f"Lemke reached the pivot limit ({max_pivots}) on an LCP of size {n}")
            return self._result(M, q, n, LCPStatus.RAY_TERMINATION, pivots,
                                f"Lemke ray termination after {pivots} pivots (LCP of size {n}): "
                                "no solution found from this start (infeasible for copositive-plus M)")

        # first pivot: z0 enters at the row of min q_i / d_i (ties: lexicographic through the same rule)
        ratios = q / d
        row = int(np.argmin(ratios))
        ties = np.flatnonzero(ratios <= ratios[row] + 1e-14 * max(1.0, abs(ratios[row])))
        if ties.size > 1:
            row = self._lexicographic_pick(ties, T[:, z0], n, maximise=True)
        entering = z0
        pivots = 0
        while True:
            leaving = int(basis[row])
            self._pivot(row, entering)
            basis[row] = entering
            pivots += 1
            if leaving == z0:
                return self._result(M, q, n, LCPStatus.SOLVED, pivots)
            if pivots >= max_pivots:
                return self._result(M, q, n, LCPStatus.MAX_PIVOTS, pivots,
                                    f"Lemke reached the pivot limit ({max_pivots}) on an LCP of size {n}")
            entering = leaving + n if leaving < n else leaving - n   # complement
            col = T[:, entering]
            scale = max(1.0, float(np.max(np.abs(col))))
            candidates = np.flatnonzero(col > self.pivot_tol * scale)
            if candidates.size == 0:
                return self._result(M, q, n, LCPStatus.RAY_TERMINATION, pivots,
                                    f"Lemke ray termination after {pivots} pivots (LCP of size {n}): "
                                    "no solution found from this start (infeasible for copositive-plus M)")
            ratios = T[candidates, rhs] / col[candidates]
            best = float(np.min(ratios))
            tied = candidates[ratios <= best + 1e-12 * max(1.0, abs(best))]
            if tied.size == 1:
                row = int(tied[0])
            else:
                # prefer z0 leaving (terminates), else the lexicographic minimum
                z0_rows = tied[basis[tied] == z0]
                row = int(z0_rows[0]) if z0_rows.size else self._lexicographic_pick(tied, col, n)

    def _solve_compiled(self, M, q, n, covering) -> LCPResult:
        if covering is None:
            d = self._ones if n == self._n else np.ones(n)
        else:
            d = np.asarray(covering, dtype=float)
            if d.shape != (n,) or np.any(d <= 0.0):
                raise ConfigError("Lemke covering vector must have shape (n,) and positive entries")
        if n != self._n:
            self._allocate(n)
        max_pivots = self.max_pivots if self.max_pivots is not None else 50 * (n + 1)
        q_out = np.empty(n)
        z = np.empty(n)
        code, pivots = lemke_solve(np.ascontiguousarray(M), np.ascontiguousarray(q), d, self._tableau,
                                   self._basis, max_pivots, self.pivot_tol, self.zero_tol, q_out, z)
        if code == TRIVIAL:
            return LCPResult(z, q_out, LCPStatus.SOLVED, 0)
        if code == NON_FINITE:
            return LCPResult(z, q_out, LCPStatus.RAY_TERMINATION, 0, "non-finite LCP data")
        w = M @ z + q_out
        if code == SOLVED:
            return LCPResult(z, w, LCPStatus.SOLVED, pivots)
        if code == MAX_PIVOTS:
            return LCPResult(z, w, LCPStatus.MAX_PIVOTS, pivots,
                             f"Lemke reached the pivot limit ({max_pivots}) on an LCP of size {n}")
        return LCPResult(z, w, LCPStatus.RAY_TERMINATION, pivots,
                         f"Lemke ray termination after {pivots} pivots (LCP of size {n}): "
                         "no solution found from this start (infeasible for copositive-plus M)")

    def _lexicographic_pick(self, rows: np.ndarray, col: np.ndarray, n: int, maximise: bool = False) -> int:
        """Lexicographic minimum ratio of rows [B^-1 q, B^-1] / col over the tied ``rows``.

        For the first pivot (maximise=True, col = -d < 0) the ratio is taken with |col|, i.e. the
        lexicographically most negative q_i / d_i row."""
        T = self._tableau
        rows = np.asarray(rows)
        for k in range(n):   # columns of B^-1 (the w block of the tableau)
            ratios = T[rows, k] / (-col[rows] if maximise else col[rows])
            target = np.min(ratios) if not maximise else np.min(ratios)
            keep = np.abs(ratios - target) <= 1e-12 * max(1.0, abs(target))
            rows = rows[keep]
            if rows.size == 1:
                break
        return int(rows[0])

    def _pivot(self, row: int, col: int) -> None:
        T = self._tableau
        T[row] /= T[row, col]
        factors = T[:, col].copy()
        factors[row] = 0.0
        rows = np.flatnonzero(factors)          # rows with a zero entering-column entry are unchanged
        T[rows] -= np.outer(factors[rows], T[row])

    def _result(self, M, q, n, status, pivots, message="") -> LCPResult:
        z = np.zeros(n)
        basis = self._basis
        is_z = (basis >= n) & (basis < 2 * n)
        z[basis[is_z] - n] = self._tableau[is_z, 2 * n + 1]
        if status is LCPStatus.SOLVED:
            z = np.maximum(z, 0.0)   # clip round-off (|negatives| ~ 1e-16)
        w = M @ z + q
        return LCPResult(z, w, status, pivots, message)


def lemke(M: np.ndarray, q: np.ndarray, max_pivots: int | None = None, pivot_tol: float = 1e-12,
          kernel: str = "numba") -> LCPResult:
    """One-shot convenience wrapper around ``LemkeSolver``."""
    return LemkeSolver(pivot_tol=pivot_tol, max_pivots=max_pivots, kernel=kernel).solve(M, q)
