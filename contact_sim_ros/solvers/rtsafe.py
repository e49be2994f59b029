"""rtsafe (Numerical Recipes, 2nd ed., sec. 9.4): the root of a non-decreasing f in a bracket [lo, hi] with
f(lo) < 0 <= f(hi), by Newton-Raphson safeguarded by bisection. The exact line search of the ICF engines iterates
it, in their numpy reference (``engines/lagged.py``) and in their compiled step (``engines/icf_kernels.py``): one
rule, written once. A kernel module: only the jit decorator here."""

from __future__ import annotations

from ..jit import njit


@njit(cache=True)
def rtsafe_start(lo, hi, f_hi, fp_hi):
    """(alpha, dx_old): the first iterate, Newton from ``hi`` (f(hi) = f_hi, f'(hi) = fp_hi) when it lands inside
    (lo, hi), else the midpoint; and the width of the previous step (the bracket's)."""
    alpha = hi - f_hi / fp_hi if fp_hi > 0.0 else 0.5 * (lo + hi)
    if not (lo < alpha < hi):
        alpha = 0.5 * (lo + hi)
    return alpha, hi - lo


@njit(cache=True)
def rtsafe_step(alpha, f, fp, lo, hi, dx_old, f_tol):
    """One iteration from f(alpha) = f and f'(alpha) = fp: (done, alpha, lo, hi, dx_old). ``done`` with |f| <=
    f_tol or a bracket narrower than 1e-9 hi; alpha is then the root. Otherwise alpha is the next iterate: the
    Newton step if it stays inside the shrunk bracket and is less than half the previous step, else the
    midpoint."""
    if abs(f) <= f_tol:
        return True, alpha, lo, hi, dx_old
    if f < 0.0:
        lo = alpha
    else:
        hi = alpha
    if hi - lo <= 1e-9 * hi:
        return True, alpha, lo, hi, dx_old
    if fp > 0.0:
        newton = alpha - f / fp
        if lo < newton < hi and abs(newton - alpha) < 0.5 * dx_old:
            return False, newton, lo, hi, abs(newton - alpha)
    return False, 0.5 * (lo + hi), lo, hi, hi - lo
