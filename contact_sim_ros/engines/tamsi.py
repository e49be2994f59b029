"""TAMSI: Transition-Aware Modified Semi-Implicit time stepping for compliant contact with regularized friction.

Castro, Qu, Kuppuswamy, Alspach, Sherman, "A Transition-Aware Method for the Simulation of Compliant Contact
with Regularized Friction", RA-L 2020 (``/work/shared/papers/tamsi-transition-aware-semi-implicit.md``).
Equation numbers below refer to that paper.

Contact model (section II-B), per contact i, with the package's sign conventions (``geometry/contact_set.py``:
normal from A to B, v_c = velocity of B relative to A in the contact frame (t1, t2, n), v_n > 0 separating,
forces act on B):

* Hunt & Crossley normal force (eq. 5), with the penetration delta = -signed_distance and
  d(delta)/dt = -v_n:
      pi = k (1 - d v_n)_+ (delta)_+                                   [N]
  k: stiffness (N/m), d: dissipation (s/m).
* Regularized Coulomb friction (eqs. 6-7), with s = |v_t| / v_s:
      f_t = -mu~(s) pi v_t / |v_t|,     mu~(s) = mu s  (s <= 1),  mu (s > 1)        [N]
  or, with ``smooth_friction``, the C1 regularization mu~(s) = mu s (2 - s) for s < 1 (Drake's choice).
  v_s is the stiction tolerance (m/s).

The step (section V): configurations are frozen at q0 (one contact query per step), the penetration is
approximated to first order in the unknown velocity (eq. 19),
      delta(v) = delta0 - h v_n(v),
and Newton iterations solve for the generalized velocities v at the end of the step the residual (eq. 21)
      r(v) = M0 (v - v0) - h tau0 - h tau_act(v) + h D v - h J_n^T pi(v_n) - h J_t^T f_t(v_t, v_n)  [N s]
with the full, generally non-symmetric Newton Jacobian (eq. 23)
      A = M0 + h (W_nn + W_tt + W_tn) + h diag(D - d tau_act/dv)                                   [kg]
solved with a dense LU (LAPACK gesv). W_nn, W_tt, W_tn are the normal, tangential and coupling Delassus
operators of eqs. (20), (17) and (22). With ``coupling="one_way"`` the normal forces are frozen at their
start-of-step value pi0 = k (1 - d v_n0)_+ (delta0)_+ (semi-implicit Euler, section V-A, eqs. 11-17): then
W_nn = W_tn = 0 and A is symmetric positive definite.

Transition-Aware Line Search (TALS, section III-A): every Newton update v <- v + alpha dv is limited so that a
tangential velocity whose update line crosses the stiction circle |v_t| < v_s stops at the point of the line
closest to the origin (v_t^{k+1} . dv_t = 0), and angle changes of v_t are limited to theta_max (pi/3);
alpha = min_i alpha_i. ``use_tals=False`` takes full Newton steps (for the ablation of section IV-A).

Convergence (as Drake's TamsiSolver): the iteration stops when the full Newton update changes every contact
velocity component by less than ``relative_tolerance * stiction_tolerance`` (m/s) and every generalized
velocity by less than the same number (m/s or rad/s). ``SolverStats.residual`` reports that last change (m/s);
``SolverStats.iterations`` the number of Newton updates (linear solves). If the limit ``max_iterations`` is
reached, the step returns ``SolverStatus.MAX_ITERATIONS`` (the simulator retries in sub-steps), never NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .base import ContactEngine, SolverStats, SolverStatus, StepInputs, StepResult
from .registry import register_engine

_COUPLINGS = ("two_way", "one_way")


def _unsaturated(act, v, h):
    """Mask of actuated dofs whose implicit PD + effort command is inside its effort limit at velocity v."""
    raw = act.effort + act.kp * (act.position_error - h * v) + act.kd * (act.velocity_target - v)
    return np.abs(raw) < act.effort_limit


@register_engine
class TamsiEngine(ContactEngine):
    """Transition-Aware Modified Semi-Implicit engine (Castro et al. 2020)."""

    name = "tamsi"
    description = ("TAMSI: compliant Hunt & Crossley point contact, regularized Coulomb friction, frozen "
                   "configuration, implicit penetration (eq. 19), Newton on v with TALS line search")

    @dataclass
    class Options:
        """TAMSI parameters.

        stiction_tolerance:  v_s (m/s), the friction regularization velocity of eq. (7).
        relative_tolerance:  the Newton iteration has converged when the update of every contact velocity
                             (and generalized velocity) is below relative_tolerance * v_s.
        max_iterations:      Newton iteration limit; reaching it returns SolverStatus.MAX_ITERATIONS.
        use_tals:            Transition-Aware Line Search (section III-A) on/off.
        theta_max:           TALS limit on the angle change of a sliding tangential velocity (rad).
        smooth_friction:     C1 regularization mu s (2 - s) instead of the linear one of eq. (7).
        coupling:            "two_way" (TAMSI, section V-C: implicit normal forces, eq. 19) or "one_way"
                             (semi-implicit Euler, section V-A: normal forces frozen at the step start).
        """

        stiction_tolerance: float = 1.0e-4
        relative_tolerance: float = 1.0e-2
        max_iterations: int = 100
        use_tals: bool = True
        theta_max: float = math.pi / 3.0
        smooth_friction: bool = False
        coupling: str = "two_way"

        def __post_init__(self):
            where = "engine 'tamsi': option"
            for key in ("stiction_tolerance", "relative_tolerance"):
                value = getattr(self, key)
                if isinstance(value, bool) or not isinstance(value, (int, float)) \
                        or not math.isfinite(value) or value <= 0.0:
                    raise ConfigError(f"{where} {key} must be a finite number > 0, got {value!r}")
            if self.relative_tolerance >= 1.0:
                raise ConfigError(f"{where} relative_tolerance must be in (0, 1), got {self.relative_tolerance!r}")
            if isinstance(self.max_iterations, bool) or not isinstance(self.max_iterations, (int, np.integer)) \
                    or self.max_iterations < 1:
                raise ConfigError(f"{where} max_iterations must be an integer >= 1, got {self.max_iterations!r}")
            if not isinstance(self.theta_max, (int, float)) or not 0.0 < self.theta_max < math.pi / 2.0:
                raise ConfigError(f"{where} theta_max must be in (0, pi/2) rad, got {self.theta_max!r}")
            for key in ("use_tals", "smooth_friction"):
                if not isinstance(getattr(self, key), (bool, np.bool_)):
                    raise ConfigError(f"{where} {key} must be true or false, got {getattr(self, key)!r}")
            if self.coupling not in _COUPLINGS:
                raise ConfigError(f"{where} coupling {self.coupling!r} is not valid; "
                                  f"valid couplings: {', '.join(sorted(_COUPLINGS))}")

    def __init__(self, model, options=None):
        super().__init__(model, options)
        nv = model.nv
        self._nv = nv
        # Per-step scratch of fixed size (allocated once).
        self._A = np.empty((nv, nv))
        self._diag = np.arange(nv)
        self._p_star = np.empty(nv)
        self._v = np.empty(nv)
        self._capacity = 0
        self._ensure_capacity(8)
        #: |dv_c|_inf and alpha of every Newton iteration of the last step (for Fig. 4-style plots).
        self.iteration_history: list[tuple[float, float]] = []

    # ------------------------------------------------------------------ scratch
    def _ensure_capacity(self, n: int) -> None:
        """Contact-sized scratch, grown geometrically when a step has more contacts than ever before."""
        if n <= self._capacity:
            return
        cap = max(n, 2 * self._capacity)
        self._B = np.zeros((cap, 3, 3))     # -d f_c / d v_c, per contact (eqs. 16, 20, 22)
        self._f = np.zeros((cap, 3))        # contact force on B (t1, t2, n), N
        self._capacity = cap

    # ------------------------------------------------------------------ contact model
    def _friction_gains(self, vt: np.ndarray, mu: np.ndarray):
        """Regularized friction (eqs. 6-7), vectorised over contacts.

        Returns (g, c, vt_norm) with g = mu~(s) / |v_t| (s/m) so that f_t = -pi g v_t, and c the coefficient
        (s/m) such that d f_t / d v_t = -pi (g I + c t t^T) (eq. 16, t = v_t / |v_t|).
        Both are finite at v_t = 0: the regularization is linear (or C1) there.
        """
        vs = self.options.stiction_tolerance
        vt_norm = np.sqrt(vt[:, 0] * vt[:, 0] + vt[:, 1] * vt[:, 1])
        s = vt_norm / vs
        sliding = s > 1.0
        safe_norm = np.where(sliding, vt_norm, 1.0)
        if self.options.smooth_friction:
            # mu~ = mu s (2 - s): mu~/|v_t| = mu (2 - s)/v_s, mu~'/v_s - mu~/|v_t| = -mu s / v_s
            g = np.where(sliding, mu / safe_norm, mu * (2.0 - s) / vs)
            c = np.where(sliding, -g, -mu * s / vs)
        else:
            # mu~ = mu s: mu~/|v_t| = mu~'/v_s = mu / v_s in stiction, so c = 0 there
            g = np.where(sliding, mu / safe_norm, mu / vs)
            c = np.where(sliding, -g, 0.0)
        return g, c, vt_norm

    def _normal_force(self, vn, delta0, k, d, h):
        """Hunt & Crossley force with the implicit penetration of eq. (19) and its derivative.

        pi(v_n) = k (1 - d v_n)_+ (delta0 - h v_n)_+   [N];   returns (pi, d pi / d v_n [N s/m], <= 0).
        """
        damping = 1.0 - d * vn
        delta = delta0 - h * vn
        damping_p = np.maximum(damping, 0.0)
        delta_p = np.maximum(delta, 0.0)
        pi = k * damping_p * delta_p
        dpi = -k * (d * (damping > 0.0) * delta_p + h * damping_p * (delta > 0.0))
        return pi, dpi

    # ------------------------------------------------------------------ TALS
    def _tals_alpha(self, vt: np.ndarray, dvt: np.ndarray, vt_norm: np.ndarray) -> np.ndarray:
        """Per-contact TALS step limits alpha_i in (0, 1] (section III-A, Fig. 3), vectorised.

        vt, dvt: (N, 2) tangential velocities and their full Newton updates (m/s). Cases (as Drake's
        TalsLimiter, derived here for the closed form of the angle limit):
        * |dv_t| < eps (eps = relative_tolerance v_s): no limit;
        * from (almost) exact stiction |v_t| < eps to sliding: stop at |v_t| = v_s/2 inside the stiction circle,
          where the regularized friction has a useful gradient;
        * from sliding to (almost) exactly zero: stop at v_s/2 on the side of v_t;
        * sliding to sliding across the stiction circle: stop where v_t^{k+1} . dv_t = 0 (closest point to the
          origin, TALS' transition detection), at v_s/2 before it if that point is almost zero;
        * sliding to sliding with an angle change larger than theta_max: stop at theta_max. With dv_t =
          a v_hat + b e_perp, the angle of v_t + alpha dv_t is atan(alpha |b| / (|v_t| + alpha a)), so
          alpha = sin(theta_max) |v_t| / (|b| cos(theta_max) - a sin(theta_max)).
        """
        opts = self.options
        vs = opts.stiction_tolerance
        eps = opts.relative_tolerance * vs
        n = vt.shape[0]
        alpha = np.ones(n)
        dv2 = dvt[:, 0] * dvt[:, 0] + dvt[:, 1] * dvt[:, 1]
        moving = dv2 >= eps * eps
        if not moving.any():
            return alpha
        dv_norm = np.sqrt(dv2)
        safe_dv = np.where(moving, dv_norm, 1.0)
        v1 = vt + dvt
        x = vt_norm / vs
        x1 = np.sqrt(v1[:, 0] * v1[:, 0] + v1[:, 1] * v1[:, 1]) / vs
        rtol = opts.relative_tolerance

        # stiction (|v| ~ 0) -> sliding
        case = moving & (x < rtol) & (x1 > 1.0)
        alpha = np.where(case, 0.5 * vs / safe_dv, alpha)
        # sliding -> exact stiction
        case = moving & (x > 1.0) & (x1 < rtol)
        alpha = np.where(case, 1.0 - 0.5 * vs / safe_dv, alpha)
        # sliding -> sliding
        both = moving & (x > 1.0) & (x1 > 1.0)
        if both.any():
            v_dot_dv = vt[:, 0] * dvt[:, 0] + vt[:, 1] * dvt[:, 1]
            a_star = -v_dot_dv / np.where(moving, dv2, 1.0)
            closest = vt + a_star[:, None] * dvt
            closest_norm = np.sqrt(closest[:, 0] ** 2 + closest[:, 1] ** 2)
            crosses = both & (v_dot_dv < 0.0) & (a_star < 1.0) & (closest_norm < vs)
            a_cross = np.where(closest_norm < eps, a_star - 0.5 * vs / safe_dv, a_star)
            alpha = np.where(crosses, a_cross, alpha)
            # angle limit for the remaining sliding -> sliding updates
            rest = both & ~crosses
            if rest.any():
                safe_v = np.where(rest, vt_norm, 1.0)
                a_par = v_dot_dv / safe_v                                   # along v_hat
                b_perp = np.abs(vt[:, 0] * dvt[:, 1] - vt[:, 1] * dvt[:, 0]) / safe_v
                v1_norm = x1 * vs
                cos1 = (vt_norm * vt_norm + v_dot_dv) / (safe_v * np.where(rest, v1_norm, 1.0))
                cmax, smax = math.cos(opts.theta_max), math.sin(opts.theta_max)
                limit = rest & (cos1 < cmax)
                denom = b_perp * cmax - a_par * smax
                a_angle = smax * vt_norm / np.where(limit & (denom > 0.0), denom, 1.0)
                alpha = np.where(limit & (denom > 0.0), np.minimum(a_angle, 1.0), alpha)
        return np.clip(alpha, 1e-12, 1.0)

    # ------------------------------------------------------------------ step
    def _setup(self, inputs: StepInputs) -> None:
        """Freeze the step's data at q0 (section V): p* = M0 v0 + h tau0, contact Jacobians, delta0, materials."""
        h = inputs.dt
        n = inputs.contacts.size
        self._ensure_capacity(n)
        self._inputs = inputs
        self._h = h
        self._n = n
        self._two_way = self.options.coupling == "two_way"
        np.matmul(inputs.mass_matrix, inputs.v, out=self._p_star)
        self._p_star += h * inputs.generalized_force
        contacts = inputs.contacts
        self._J = contacts.jacobian                                   # (3N, nv), rows (t1, t2, n)
        self._Jr = self._J.reshape(n, 3, self._nv)
        self._bias = contacts.velocity_bias.reshape(n, 3)
        self._delta0 = -contacts.signed_distance                      # penetration at q0 (m)
        if n and not self._two_way:
            # one-way coupling (section V-A): pi frozen at the start-of-step state
            vn0 = self._Jr[:, 2, :] @ inputs.v + self._bias[:, 2]
            self._pi_frozen = (contacts.stiffness * np.maximum(1.0 - contacts.dissipation * vn0, 0.0)
                               * np.maximum(self._delta0, 0.0))

    def _evaluate(self, v: np.ndarray, jacobian: bool = True):
        """Contact forces, residual (eq. 21) and Newton Jacobian (eq. 23) at the iterate v.

        Sets self._f (N, 3) contact forces on B (t1, t2, n) in N, self._vc (N, 3) contact velocities (m/s),
        self._pi (N,) normal forces; returns (r (nv,) N s, A (nv, nv) kg or None, tau_act, dtau_act).
        """
        inputs = self._inputs
        h = self._h
        n = self._n
        act = inputs.actuation
        damping = inputs.joint_damping
        tau_act, dtau_act = act.force(v, h)
        f = self._f[:n]
        if n:
            contacts = inputs.contacts
            J = self._J
            vc = (J @ v).reshape(n, 3)
            vc += self._bias
            vt = vc[:, :2]
            if self._two_way:
                pi, dpi = self._normal_force(vc[:, 2], self._delta0, contacts.stiffness, contacts.dissipation, h)
            else:
                pi, dpi = self._pi_frozen, None
            g, c, vt_norm = self._friction_gains(vt, contacts.friction)
            pg = pi * g
            f[:, 0] = -pg * vt[:, 0]                                  # eq. (6)
            f[:, 1] = -pg * vt[:, 1]
            f[:, 2] = pi                                              # eq. (5) with eq. (19)
            self._vc, self._pi, self._vt_norm = vc, pi, vt_norm
        if not jacobian:
            return None, None, tau_act, dtau_act
        # residual, eq. (21), plus implicit joint damping and actuation
        M = inputs.mass_matrix
        r = M @ v
        r -= self._p_star
        r += h * (damping * v - tau_act)
        A = self._A
        A[:] = M
        A[self._diag, self._diag] += h * (damping - dtau_act)
        if n:
            r -= h * (J.T @ f.reshape(-1))
            # B = -d f_c / d v_c per contact: tangential block (eq. 16), normal (eq. 20), coupling (eq. 22);
            # A = M0 + h J^T B J = M0 + h (W_tt + W_nn + W_tn)   (eq. 23)
            B = self._B[:n]
            inv_norm2 = 1.0 / np.where(vt_norm > 0.0, vt_norm, np.inf) ** 2
            cpi = c * pi * inv_norm2
            B[:, 0, 0] = pg + cpi * vt[:, 0] * vt[:, 0]
            B[:, 1, 1] = pg + cpi * vt[:, 1] * vt[:, 1]
            B[:, 0, 1] = B[:, 1, 0] = cpi * vt[:, 0] * vt[:, 1]
            if self._two_way:
                B[:, 0, 2] = g * vt[:, 0] * dpi                      # W_tn: friction follows the normal force
                B[:, 1, 2] = g * vt[:, 1] * dpi
                B[:, 2, 2] = -dpi                                     # W_nn
            else:
                B[:, :, 2] = 0.0
            A += h * (J.T @ np.matmul(B, self._Jr).reshape(3 * n, self._nv))
        return r, A, tau_act, dtau_act

    def _do_step(self, inputs: StepInputs) -> StepResult:
        opts = self.options
        self._setup(inputs)
        h = self._h
        n = self._n
        nv = self._nv
        v0 = inputs.v
        act = inputs.actuation
        tol = opts.relative_tolerance * opts.stiction_tolerance
        history = self.iteration_history
        history.clear()

        v = self._v
        v[:] = v0
        status = SolverStatus.MAX_ITERATIONS
        message = ""
        err = math.inf
        iterations = 0
        converged = False
        while True:
            if converged or iterations >= opts.max_iterations:
                tau_act, _ = self._evaluate(v, jacobian=False)[2:]
                break
            r, A, tau_act, dtau_act = self._evaluate(v)
            try:
                dv = np.linalg.solve(A, -r)                           # dense LU (LAPACK gesv)
            except np.linalg.LinAlgError as exc:
                status, message = SolverStatus.FAILED, f"singular Newton Jacobian ({exc})"
                break
            if not np.all(np.isfinite(dv)):
                status, message = SolverStatus.FAILED, "non-finite Newton update"
                break
            iterations += 1
            alpha = 1.0
            err = float(np.max(np.abs(dv))) if nv else 0.0
            if n:
                vc = self._vc
                dvc = (self._J @ dv).reshape(n, 3)
                err = max(err, float(np.max(np.abs(dvc))))
                if opts.use_tals:
                    alpha_i = self._tals_alpha(vc[:, :2], dvc[:, :2], self._vt_norm)
                    # only contacts that carry (or will carry) a normal force limit the step
                    if self._two_way:
                        contacts = inputs.contacts
                        pi1, _ = self._normal_force(vc[:, 2] + dvc[:, 2], self._delta0, contacts.stiffness,
                                                    contacts.dissipation, h)
                        loaded = (self._pi > 0.0) | (pi1 > 0.0)
                    else:
                        loaded = self._pi > 0.0
                    if loaded.any():
                        alpha = float(np.min(alpha_i[loaded]))
            history.append((err, alpha))
            v += alpha * dv
            if err < tol:
                converged = True
            elif n == 0 and alpha == 1.0:
                # without contacts the residual is piecewise linear in v: the Newton step is exact unless an
                # effort limit switched on or off
                converged = bool(np.array_equal(_unsaturated(act, v, h), _unsaturated(act, v - dv, h)))
        if converged:
            status = SolverStatus.CONVERGED
            v_out = v.copy()
        else:
            if status is SolverStatus.MAX_ITERATIONS:
                message = (f"TAMSI Newton iteration did not converge in {opts.max_iterations} iterations at "
                           f"t = {inputs.t:.6g} s (last |dv| = {err:.3g} m/s > tolerance {tol:.3g} m/s; "
                           f"use_tals = {opts.use_tals})")
            else:
                message = f"TAMSI at t = {inputs.t:.6g} s: {message}"
            v_out = v.copy() if np.all(np.isfinite(v)) else v0.copy()
        f = self._f[:n]
        impulse = h * f
        if not np.all(np.isfinite(impulse)):
            impulse = np.zeros((n, 3))
        gen_contact = self._J.T @ f.reshape(-1) if n else np.zeros(nv)
        return StepResult(
            v_next=v_out,
            contact_impulse=impulse,
            generalized_contact_force=gen_contact,
            actuation_force=np.array(tau_act, dtype=float),
            stats=SolverStats(status=status, iterations=iterations, residual=float(err) if iterations else 0.0,
                              message=message),
        )
