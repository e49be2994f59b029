"""control_toolbox's ``Pid`` (Jazzy branch, control_toolbox/src/pid.cpp ``compute_command(error, error_dot, dt)``)
vectorised over a controller's joints with numpy: the PID of joint_trajectory_controller's ``gains.<joint>``.

Per joint, with ``e`` the position error (desired - measured, rad or m), ``ed`` the velocity error (rad/s or m/s)
and ``dt`` the controller's period (s)::

    p_term = p * e ;  d_term = d * ed
    legacy (the default):   i_term = i_term + i * dt * e            (when |e| > error_deadband)
                            u_unsat = p_term + clamp(i_term, i_min, i_max) + d_term
    none / conditional_integration / back_calculation: u_unsat = p_term + i_term + d_term (i_term of the last
                            update), then after the output clamp
                            none:          i_term += i * dt * e
                            conditional:   the same, unless the output saturates and e * u_unsat > 0
                            back_calc.:    i_term += dt * (i * e + (u - u_unsat) / tracking_time_constant)
    u = clamp(u_unsat, u_clamp_min, u_clamp_max) ;  i_term = clamp(i_term, i_min, i_max)

``i_min``/``i_max`` bound the integral *term* (output units: N*m or N for an effort command, rad/s or m/s for a
velocity command): ``i_clamp_max`` / ``i_clamp_min`` where finite, else +/- ``i_clamp`` (as
JointTrajectoryController::update_pids). A ``dt`` of 0 returns the last command unchanged, as the real Pid.

Allocation-free per update: every array is preallocated; ``compute`` returns the same array each time.
"""

from __future__ import annotations

import numpy as np

STRATEGIES = ("legacy", "none", "conditional_integration", "back_calculation")
_EPS = float(np.finfo(float).eps)     # control_toolbox's is_zero tolerance


class JointPid:
    """The PIDs of ``n`` joints. Gains are arrays (one value per joint); ``antiwindup`` one strategy name per joint
    (``STRATEGIES``)."""

    def __init__(self, p, i, d, i_min, i_max, u_min=None, u_max=None, antiwindup=None,
                 tracking_time_constant=None, error_deadband=None):
        p = np.array(p, dtype=float)
        n = p.size
        self.n = n

        def arr(x, default):
            return np.full(n, default, dtype=float) if x is None else np.array(x, dtype=float).reshape(n)

        self.p, self.i, self.d = p, arr(i, 0.0), arr(d, 0.0)
        self.i_min, self.i_max = arr(i_min, -np.inf), arr(i_max, np.inf)
        self.u_min, self.u_max = arr(u_min, -np.inf), arr(u_max, np.inf)
        if np.any(self.i_min > self.i_max):
            raise ValueError("i_min > i_max")
        if np.any(self.u_min >= self.u_max):
            raise ValueError("u_min >= u_max")
        self.error_deadband = arr(error_deadband, 0.0)
        strategy = ["legacy"] * n if antiwindup is None else list(antiwindup)
        bad = [s for s in strategy if s not in STRATEGIES]
        if bad:
            raise ValueError(f"unknown antiwindup strategy {bad[0]!r}; one of {', '.join(STRATEGIES)}")
        self._legacy = np.array([s == "legacy" for s in strategy])
        self._legacy_f = self._legacy.astype(float)          # masks as 0/1 factors: a ufunc's where= allocates
        self._not_legacy_f = 1.0 - self._legacy_f
        self._none = np.array([s == "none" for s in strategy])
        self._conditional = np.array([s == "conditional_integration" for s in strategy])
        back = np.array([s == "back_calculation" for s in strategy]) & (self.i != 0.0)
        tt = arr(tracking_time_constant, 0.0)
        # control_toolbox's default tracking time constant: sqrt(d / i), or p / i without a D term
        with np.errstate(divide="ignore", invalid="ignore"):
            default_tt = np.where(self.d != 0.0, np.sqrt(self.d / self.i), self.p / self.i)
        tt = np.where(back & (tt == 0.0), default_tt, tt)
        self._inv_tt = np.where(back, 1.0 / np.where(back, tt, 1.0), 0.0)
        self._back = back
        self._any_conditional, self._any_back = bool(self._conditional.any()), bool(back.any())
        self._any_legacy, self._any_other = bool(self._legacy.any()), bool((~self._legacy).any())
        self._clamp_output = bool(np.isfinite(self.u_min).any() or np.isfinite(self.u_max).any())
        self.i_term = np.zeros(n)
        self.command = np.zeros(n)          # u of the last update (returned by compute)
        self.command_unsaturated = np.zeros(n)
        self._inc, self._work, self._iclip = np.zeros(n), np.zeros(n), np.zeros(n)
        self._active, self._mask, self._mask2 = (np.zeros(n, dtype=bool), np.zeros(n, dtype=bool),
                                                 np.zeros(n, dtype=bool))
        self._factor, self._back_inc = np.zeros(n), np.zeros(n)

    def reset(self) -> None:
        """Integral term and last command to zero (the real controller on activation)."""
        self.i_term[:] = 0.0
        self.command[:] = 0.0
        self.command_unsaturated[:] = 0.0

    def _add_where(self, target: np.ndarray, value: np.ndarray, mask: np.ndarray) -> None:
        """target += value where mask (value finite), without the temporary buffers of a ufunc's where=."""
        factor, work = self._factor, self._work
        np.copyto(factor, mask)
        np.multiply(value, factor, out=work)
        target += work

    def compute(self, error: np.ndarray, error_dot: np.ndarray, dt: float) -> np.ndarray:
        """u (module docstring) for the position errors ``error`` and velocity errors ``error_dot`` over ``dt`` s;
        the returned array is reused by the next call."""
        if dt == 0.0:
            return self.command
        if dt < 0.0:
            raise ValueError("Pid is called with negative dt")
        inc, work, iclip, active, mask = self._inc, self._work, self._iclip, self._active, self._mask
        u_unsat, u, i_term = self.command_unsaturated, self.command, self.i_term
        np.abs(error, out=work)
        np.greater(work, self.error_deadband, out=active)          # outside the deadband: integrate
        np.multiply(error, self.i, out=inc)
        inc *= dt                                                  # i * dt * e
        if self._any_legacy:
            np.logical_and(active, self._legacy, out=mask)
            self._add_where(i_term, inc, mask)
        np.maximum(i_term, self.i_min, out=iclip)          # (ufuncs: np.clip allocates a temporary)
        np.minimum(iclip, self.i_max, out=iclip)
        if self._any_other:            # legacy: the clamped integral; the others: the integral as it is
            np.multiply(iclip, self._legacy_f, out=iclip)
            np.multiply(i_term, self._not_legacy_f, out=work)
            iclip += work
        np.multiply(self.p, error, out=u_unsat)
        np.multiply(self.d, error_dot, out=work)
        u_unsat += work
        u_unsat += iclip
        if self._clamp_output:
            np.maximum(u_unsat, self.u_min, out=u)
            np.minimum(u, self.u_max, out=u)
        else:
            np.copyto(u, u_unsat)
        if self._any_other:
            np.logical_and(active, self._none, out=mask)
            self._add_where(i_term, inc, mask)
            if self._any_conditional:
                # integrate unless saturated with the error pushing further into the saturation
                np.subtract(u_unsat, u, out=work)
                np.abs(work, out=work)
                np.greater(work, _EPS, out=mask)
                np.multiply(error, u_unsat, out=work)
                np.greater(work, 0.0, out=self._mask2)
                np.logical_and(mask, self._mask2, out=mask)
                np.logical_not(mask, out=mask)
                np.logical_and(mask, active, out=mask)
                np.logical_and(mask, self._conditional, out=mask)
                self._add_where(i_term, inc, mask)
            if self._any_back:
                back = self._back_inc
                np.subtract(u, u_unsat, out=back)
                back *= self._inv_tt
                back *= dt
                back += inc
                np.logical_and(active, self._back, out=mask)
                self._add_where(i_term, back, mask)
        np.maximum(i_term, self.i_min, out=i_term)
        np.minimum(i_term, self.i_max, out=i_term)
        return u
