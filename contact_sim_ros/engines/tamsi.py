"""TAMSI: Transition-Aware Modified Semi-Implicit time stepping for compliant contact with regularized friction.

Castro, Qu, Kuppuswamy, Alspach, Sherman, "A Transition-Aware Method for the Simulation of Compliant Contact
with Regularized Friction", RA-L 2020.
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
solved with a dense LU (LAPACK getrf/getrs). W_nn, W_tt, W_tn are the normal, tangential and coupling Delassus
operators of eqs. (20), (17) and (22). With ``coupling="one_way"`` the normal forces are frozen at their
start-of-step value pi0 = k (1 - d v_n0)_+ (delta0)_+ (semi-implicit Euler, section V-A, eqs. 11-17): then
W_nn = W_tn = 0 and A is symmetric positive definite.

Free bodies (Pinocchio free-flyers, velocities in the body frame) are stepped in their body frame frozen at q0,
the frame of the frozen contact Jacobians. The simulator does that for every engine
(contact_sim_ros/model/free_body_motion.py): the frame-rotation force is in ``StepInputs.generalized_force`` and
q = q0 + h N(q0) v (eq. 10) is its integration step.

Transition-Aware Line Search (TALS, section III-A): every Newton update v <- v + alpha dv is limited so that a
tangential velocity whose update line crosses the stiction circle |v_t| < v_s stops at the point of the line
closest to the origin (v_t^{k+1} . dv_t = 0), and angle changes of v_t are limited to theta_max (pi/3);
alpha = min_i alpha_i. ``use_tals=False`` takes full Newton steps (for the ablation of section IV-A).

Convergence (as Drake's TamsiSolver): the iteration stops when the full Newton update changes every contact
velocity component by less than ``relative_tolerance * stiction_tolerance`` (m/s) and every generalized
velocity by less than the same number (m/s or rad/s). When an update kept every contact in its regime
(separated / stiction / sliding) and took the full step, the next update is first estimated with the current LU
factors (a simplified Newton step, A_k^-1 r(v_k+1)); if that estimate is already below the tolerance the
iteration stops without assembling and factorizing another Jacobian. ``SolverStats.residual`` reports the
last update (m/s); ``SolverStats.iterations`` the number of Newton Jacobian factorizations. If
``max_iterations`` is reached the step returns ``SolverStatus.MAX_ITERATIONS`` (the simulator retries in
sub-steps), never NaN.

Two implementations of the same step (option ``kernel``): ``"numba"`` (default) runs the whole Newton iteration
in one compiled call (``tamsi_kernels.newton_step``, loops over contacts, its own LU with partial pivoting; about
25 us per step for the gripper of section VI-A against 280 us here, where ~120 numpy calls of 1-3 us on tiny
arrays dominate); ``"numpy"`` is the readable reference below (``_do_step_numpy`` and the methods it calls).
``test/test_engine_tamsi.py`` checks that both agree to round-off, kernel by kernel and step by step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg.lapack import dgetrf as _getrf, dgetrs as _getrs

from ..errors import ConfigError, EngineError
from . import tamsi_kernels
from .base import ContactEngine, ResultSlot, SolverStats, SolverStatus, StepInputs, StepResult
from .registry import register_engine

_COUPLINGS = ("two_way", "one_way")
_KERNELS = ("numba", "numpy")


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
    # (and the fused tree step's, sim/tree_step.py: named, not imported, as the engines do not import the simulator)
    kernel_modules = (tamsi_kernels.__name__, "contact_sim_ros.sim.tree_step",
                      "contact_sim_ros.geometry.contact_pass_kernels")
    # the default scene's contacts; a scene of free bodies only runs sim/free_body_step.py's fused TAMSI step
    # (the Allegro hand far from its mug, the default scene with its scripted joint: the fused tree step,
    # sim/tree_step.py; the ICF paper's rod sliding on the ground, coal's pair near: the staged step's kernels)
    warm_up_scenes = ("scenes/default.yaml", "scenes/icf_falling_sphere.yaml", "scenes/iiwa_allegro_mug.yaml",
                      "scenes/icf_sliding_rod.yaml")

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
        kernel:              "numba" (default: the whole Newton iteration of a step in one compiled call,
                             ``tamsi_kernels.py``) or "numpy" (the readable reference implementation below; both
                             give the same result to round-off).

        The engine reads its options when it is constructed (scratch sizes, the compiled kernel's parameters):
        make a new engine to change them.
        """

        stiction_tolerance: float = 1.0e-4
        relative_tolerance: float = 1.0e-2
        max_iterations: int = 100
        use_tals: bool = True
        theta_max: float = math.pi / 3.0
        smooth_friction: bool = False
        coupling: str = "two_way"
        kernel: str = "numba"

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
            if self.kernel not in _KERNELS:
                raise ConfigError(f"{where} kernel {self.kernel!r} is not valid; "
                                  f"valid kernels: {', '.join(sorted(_KERNELS))}")

    def __init__(self, model, options=None):
        super().__init__(model, options)
        nv = model.nv
        self._nv = nv
        # Per-step scratch of fixed size (allocated once).
        self._A = np.empty((nv, nv))
        self._diag = np.arange(nv)
        self._p_star = np.empty(nv)
        self._v = np.empty(nv)
        # (|dv_c|_inf, alpha) of every Newton update of the last step (rows [:history_count]); see
        # ``iteration_history``. The simplified-Newton exit adds one row, hence max_iterations + 1.
        self._history = np.zeros((self.options.max_iterations + 1, 2))
        # rows of _history the last step wrote: this engine's step, or a compiled step run outside it on its
        # kernel_scratch (sim/free_body_step.py), which sets it
        self.history_count = 0
        self._kernels = None
        if self.options.kernel == "numba":
            self._kernels = tamsi_kernels
            self.results_checked = True          # the kernel's CONVERGED guarantees finite results
            self.fills_slot = True               # _do_step_into: the compiled step into a ResultSlot
            K = tamsi_kernels
            # the compiled step's nv-sized scratch (K.fixed_views): its options (read once: like the history
            # buffer they are fixed at construction); rows v, actuation tau and d tau/dv, residual, update, next
            # update; the Newton matrix; B_i J_i; the history; LU pivots; the actuators' saturation before/after
            # an update
            sizes = K.fixed_scratch_sizes(nv, self._history.shape[0])
            self._fixed, self._ifixed = np.zeros(sizes[0]), np.zeros(sizes[1], dtype=np.int64)
            (self._params, self._work_nv, self._A, self._BJ, self._history, self._piv,
             self._unsat) = K.fixed_views(self._fixed, self._ifixed, nv)
            self._params[[K.P_STICTION, K.P_TOLERANCE, K.P_THETA_MAX, K.P_MAX_ITERATIONS, K.P_USE_TALS, K.P_SMOOTH,
                          K.P_TWO_WAY]] = (
                self.options.stiction_tolerance, self.options.relative_tolerance * self.options.stiction_tolerance,
                self.options.theta_max, self.options.max_iterations, self.options.use_tals,
                self.options.smooth_friction, self.options.coupling == "two_way")
            self._v = self._work_nv[0]
        self._capacity = 0
        self._ensure_capacity(8)

    @property
    def iteration_history(self) -> list[tuple[float, float]]:
        """(|dv|_inf in m/s, alpha) of every Newton update of the last step (for Fig. 4-style plots); a last row
        with alpha = 0 is the simplified-Newton estimate that ended the iteration (not applied)."""
        return [(float(e), float(a)) for e, a in self._history[:self.history_count]]

    @property
    def compiled(self) -> bool:
        """True when the step is the compiled kernel's (``kernel="numba"``, ``tamsi_kernels.newton_step_packed``)."""
        return self._kernels is not None

    # ------------------------------------------------------------------ scratch
    def kernel_scratch(self, contacts: int) -> tuple:
        """The compiled kernel's scratch arguments (fixed-size float and int buffers, contact-sized float and int
        buffers: ``newton_step_packed``'s arguments between the contacts' and the outputs), grown to hold
        ``contacts`` contacts, for a caller that runs the kernel itself with at most that many contacts
        (sim/free_body_step.py). They stay the engine's: the same arrays until one of its steps has more contacts.
        That caller sets ``history_count`` to the kernel's count (``iteration_history``)."""
        if not self.compiled:
            raise EngineError(f"engine {self.name!r}: kernel_scratch needs the compiled kernel (kernel='numba')")
        self._ensure_capacity(contacts)
        return self._kernel_scratch

    def use_kernel_scratch(self, fixed: np.ndarray, ifixed: np.ndarray, contact: np.ndarray,
                           icontact: np.ndarray) -> None:
        """Move the compiled kernel's scratch (``kernel_scratch``'s four buffers at their current sizes) into the
        given arrays, e.g. views of a caller's packed blocks (sim/free_body_step.py): each of its buffer's shape and
        dtype, C-contiguous; values copied. A later step with more contacts than they hold allocates its own
        contact-sized scratch again (as ``kernel_scratch``). EngineError naming the buffer otherwise."""
        current = self.kernel_scratch(0)
        for name, old, new in zip(("fixed", "ifixed", "contact", "icontact"), current,
                                  (fixed, ifixed, contact, icontact)):
            if new.shape != old.shape or new.dtype != old.dtype or not new.flags.c_contiguous:
                raise EngineError(f"engine {self.name!r}: use_kernel_scratch: {name} must be a C-contiguous "
                                  f"{old.dtype} array of shape {old.shape}, got {new.dtype} {new.shape}")
        for old, new in zip(current, (fixed, ifixed, contact, icontact)):
            new[...] = old
        K = self._kernels
        self._fixed, self._ifixed, self._contact_work, self._icontact_work = fixed, ifixed, contact, icontact
        (self._params, self._work_nv, self._A, self._BJ, self._history, self._piv,
         self._unsat) = K.fixed_views(self._fixed, self._ifixed, self._nv)
        self._v = self._work_nv[0]
        self._kernel_scratch = (self._fixed, self._ifixed, self._contact_work, self._icontact_work)

    def _ensure_capacity(self, n: int) -> None:
        """Contact-sized scratch, grown geometrically when a step has more contacts than ever before."""
        if n <= self._capacity:
            return
        cap = max(n, 2 * self._capacity)
        self._B = np.zeros((cap, 3, 3))     # -d f_c / d v_c, per contact (eqs. 16, 20, 22)
        self._f = np.zeros((cap, 3))        # contact force on B (t1, t2, n), N
        # compiled kernel's scratch: contact velocities, their updates (m/s) and forces (N) (work_c[0..2], (cap, 3)
        # each), (pi, dpi, |v_t|, g, c) per contact, frozen normal forces (one-way coupling), contact regimes
        # (views of two buffers, kernels.contact_views)
        self._contact_work = np.zeros(tamsi_kernels.CONTACT_FLOATS * cap)
        self._icontact_work = np.zeros(2 * cap, dtype=np.int64)
        self._capacity = cap
        if self.options.kernel == "numba":
            self._kernel_scratch = (self._fixed, self._ifixed, self._contact_work, self._icontact_work)

    # ------------------------------------------------------------------ contact model
    def _friction_gains(self, vt_norm: np.ndarray, mu: np.ndarray):
        """Regularized friction (eqs. 6-7), vectorised over contacts.

        vt_norm: (N,) slip speeds |v_t| (m/s). Returns (g, c) with g = mu~(s) / |v_t| (s/m), s = |v_t| / v_s, so
        that f_t = -pi g v_t, and c (s/m) such that d f_t / d v_t = -pi (g I + c t t^T) (eq. 16,
        t = v_t / |v_t|, so c = mu~'(s) / v_s - g). Both are finite at v_t = 0, where the regularization is
        linear (eq. 7) or C1 (smooth option, mu~ = mu s (2 - s)).
        """
        vs = self.options.stiction_tolerance
        if self.options.smooth_friction:
            s = vt_norm / vs
            sliding = s > 1.0
            # s < 1: mu~/|v_t| = mu (2 - s) / v_s and mu~'/v_s - mu~/|v_t| = -mu s / v_s;  s > 1: mu / |v_t|, -g
            g = mu / np.where(sliding, vt_norm, vs / (2.0 - s))
            c = np.where(sliding, -g, -mu * s / vs)
        else:
            # linear: mu~/|v_t| = mu / max(|v_t|, v_s); mu~'/v_s = mu / v_s in stiction, so c = 0 there
            g = mu / np.maximum(vt_norm, vs)
            c = -g * (vt_norm > vs)
        return g, c

    def _normal_force(self, vn, delta0, k, d, h):
        """Hunt & Crossley force with the implicit penetration of eq. (19) and its derivative.

        pi(v_n) = k (1 - d v_n)_+ (delta0 - h v_n)_+   [N];   returns (pi, d pi / d v_n [N s/m], <= 0).
        """
        damping = 1.0 - d * vn
        damping_p = np.maximum(damping, 0.0)
        delta_p = np.maximum(delta0 - h * vn, 0.0)
        pi = k * damping_p * delta_p
        # d pi/d v_n = -k [d H(1 - d v_n) (delta)_+ + h (1 - d v_n)_+ H(delta)]
        dpi = -k * (d * delta_p * (damping > 0.0) + h * damping_p * (delta_p > 0.0))
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
        alpha = np.ones(vt.shape[0])
        v1 = vt + dvt
        v1_norm = np.hypot(v1[:, 0], v1[:, 1])
        sliding0 = vt_norm > vs
        sliding1 = v1_norm > vs
        if not (sliding0.any() or sliding1.any()):
            return alpha               # stiction -> stiction everywhere: strong gradients, full step
        dv_norm = np.hypot(dvt[:, 0], dvt[:, 1])
        moving = dv_norm >= eps
        half_vs_dv = 0.5 * vs / np.maximum(dv_norm, eps)                  # alpha that moves v_t by v_s / 2
        # (almost exact) stiction -> sliding: stop at |v_t| = v_s / 2
        alpha = np.where(moving & (vt_norm < eps) & sliding1, half_vs_dv, alpha)
        # sliding -> (almost) exactly zero: stop v_s / 2 short of it
        alpha = np.where(moving & sliding0 & (v1_norm < eps), 1.0 - half_vs_dv, alpha)
        both = moving & sliding0 & sliding1
        if both.any():
            dot = vt[:, 0] * dvt[:, 0] + vt[:, 1] * dvt[:, 1]
            a_star = -dot / np.maximum(dv_norm * dv_norm, eps * eps)     # closest point to the origin
            closest2 = vt_norm * vt_norm + dot * a_star                   # |v_t + a* dv_t|^2
            crosses = both & (a_star > 0.0) & (a_star < 1.0) & (closest2 < vs * vs)
            alpha = np.where(crosses, np.where(closest2 < eps * eps, a_star - half_vs_dv, a_star), alpha)
            # angle limit: the angle between v_t and v_t + alpha dv_t is theta_max for
            # alpha = sin(theta_max) |v_t|^2 / (|v_t x dv_t| cos(theta_max) - (v_t . dv_t) sin(theta_max))
            cmax, smax = math.cos(opts.theta_max), math.sin(opts.theta_max)
            limit = both & ~crosses & (vt_norm * vt_norm + dot < cmax * vt_norm * v1_norm)
            if limit.any():
                denom = np.abs(vt[:, 0] * dvt[:, 1] - vt[:, 1] * dvt[:, 0]) * cmax - dot * smax
                a_angle = smax * vt_norm * vt_norm / np.maximum(denom, 1e-300)
                alpha = np.where(limit, np.minimum(a_angle, 1.0), alpha)
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
        self._hJT = h * self._J.T                                     # h J^T, (nv, 3N)
        self._bias = contacts.velocity_bias
        self._delta0 = -contacts.signed_distance                      # penetration at q0 (m)
        self._k, self._d, self._mu = contacts.stiffness, contacts.dissipation, contacts.friction
        self._hD = h * inputs.joint_damping
        if n and not self._two_way:
            # one-way coupling (section V-A): pi frozen at the start-of-step state
            vn0 = self._Jr[:, 2, :] @ inputs.v + self._bias[2::3]
            self._pi_frozen = self._normal_force(vn0, self._delta0, self._k, self._d, 0.0)[0]
            self._dpi_frozen = np.zeros(n)

    def _residual(self, v: np.ndarray) -> np.ndarray:
        """Contact forces and the residual r(v) of eq. (21) (plus implicit damping and actuation), N s.

        Sets self._f (N, 3) contact forces on B (t1, t2, n) in N, self._vc (N, 3) contact velocities (m/s),
        self._pi (N,) normal forces (N), self._vt_norm (N,) slip speeds (m/s), self._tau_act (nv,) actuation and
        the derivatives that ``_jacobian`` needs at this iterate.
        """
        inputs = self._inputs
        h = self._h
        n = self._n
        self._tau_act, self._dtau_act = inputs.actuation.force(v, h)
        r = inputs.mass_matrix @ v
        r -= self._p_star
        r += self._hD * v - h * self._tau_act
        if n:
            vc = self._J @ v
            vc += self._bias
            vc = vc.reshape(n, 3)
            vt = vc[:, :2]
            if self._two_way:
                pi, dpi = self._normal_force(vc[:, 2], self._delta0, self._k, self._d, h)
            else:
                pi, dpi = self._pi_frozen, self._dpi_frozen
            vt_norm = np.hypot(vc[:, 0], vc[:, 1])
            g, c = self._friction_gains(vt_norm, self._mu)
            pg = pi * g
            f = self._f[:n]
            np.multiply(vt, -pg[:, None], out=f[:, :2])               # eq. (6)
            f[:, 2] = pi                                              # eq. (5) with eq. (19)
            r -= self._hJT @ f.reshape(-1)
            self._vc, self._pi, self._dpi, self._vt_norm, self._g, self._c, self._pg = vc, pi, dpi, vt_norm, g, c, pg
        return r

    def _jacobian(self) -> np.ndarray:
        """Newton Jacobian of eq. (23) at the iterate of the last ``_residual`` call (kg):
        A = M0 + h J^T B J + h diag(D - d tau_act / dv), with B = -d f_c / d v_c per contact: the tangential
        block of eq. (16) (W_tt), the normal term of eq. (20) (W_nn) and the coupling of eq. (22) (W_tn)."""
        n = self._n
        A = self._A
        A[:] = self._inputs.mass_matrix
        A[self._diag, self._diag] += self._hD - self._h * self._dtau_act
        if n:
            vt = self._vc[:, :2]
            pi, dpi, g, vt_norm = self._pi, self._dpi, self._g, self._vt_norm
            B = self._B[:n]
            cpi = self._c * pi / np.maximum(vt_norm * vt_norm, 1e-300)
            np.multiply(vt[:, :, None] * vt[:, None, :], cpi[:, None, None], out=B[:, :2, :2])
            B[:, 0, 0] += self._pg
            B[:, 1, 1] += self._pg
            np.multiply(vt, (g * dpi)[:, None], out=B[:, :2, 2])     # W_tn: friction follows the normal force
            np.negative(dpi, out=B[:, 2, 2])                          # W_nn
            A += self._hJT @ np.matmul(B, self._Jr).reshape(3 * n, self._nv)
        return A

    def _evaluate(self, v: np.ndarray):
        """(r, A) at v: residual (eq. 21) and Newton Jacobian (eq. 23); A is a view of internal scratch."""
        r = self._residual(v)
        return r, self._jacobian()

    def _modes(self) -> np.ndarray:
        """Per-contact regime at the last residual: 0 separated, 1 stiction, 2 sliding (+3 if the H&C damping
        factor is saturated) -- a change of regime means the Jacobian changed by more than a smooth amount."""
        if not self._n:
            return np.zeros(0, int)
        loaded = self._pi > 0.0
        return loaded * (1 + (self._vt_norm > self.options.stiction_tolerance))

    def _do_step(self, inputs: StepInputs) -> StepResult:
        if self._kernels is not None:
            # the compiled step has one path, ``_do_step_into``: here into a slot of this step's own (fresh arrays)
            slot = ResultSlot.for_one_step(self._nv, inputs.contacts.signed_distance.shape[0])
            return self._do_step_into(inputs, slot)
        return self._do_step_numpy(inputs)

    def _record(self, err: float, alpha: float) -> None:
        self._history[self.history_count] = err, alpha
        self.history_count += 1

    def _do_step_numpy(self, inputs: StepInputs) -> StepResult:
        """The reference implementation of the step (numpy, method by method)."""
        opts = self.options
        self._setup(inputs)
        h = self._h
        n = self._n
        nv = self._nv
        v0 = inputs.v
        act = inputs.actuation
        tol = opts.relative_tolerance * opts.stiction_tolerance
        self.history_count = 0

        v = self._v
        v[:] = v0
        status = SolverStatus.MAX_ITERATIONS
        message = ""
        err = math.inf
        iterations = 0
        converged = False
        r = self._residual(v)
        while iterations < opts.max_iterations:
            A = self._jacobian()
            lu, piv, info = _getrf(A, overwrite_a=True)                # dense LU (LAPACK getrf), eq. (23)
            if info != 0:
                status, message = SolverStatus.FAILED, f"singular Newton Jacobian (LAPACK getrf info {info})"
                break
            dv, info = _getrs(lu, piv, r)
            dv *= -1.0
            iterations += 1
            alpha = 1.0
            err = float(np.abs(dv).max()) if nv else 0.0
            if not math.isfinite(err):
                status, message = SolverStatus.FAILED, "non-finite Newton update"
                break
            if n:
                vc = self._vc
                dvc = (self._J @ dv).reshape(n, 3)
                err = max(err, float(np.abs(dvc).max()))
                if opts.use_tals:
                    # only contacts that carry (or may carry after the update) a normal force limit the step
                    if self._two_way:
                        loaded = self._delta0 - h * np.minimum(vc[:, 2], vc[:, 2] + dvc[:, 2]) > 0.0
                    else:
                        loaded = self._pi > 0.0
                    if loaded.all():
                        alpha = float(self._tals_alpha(vc[:, :2], dvc[:, :2], self._vt_norm).min())
                    elif loaded.any():
                        alpha = float(self._tals_alpha(vc[loaded, :2], dvc[loaded, :2], self._vt_norm[loaded]).min())
            self._record(err, alpha)
            modes = self._modes()
            v += alpha * dv
            r = self._residual(v)                                     # forces at the new iterate
            if err < tol:
                converged = True
                break
            if alpha == 1.0 and (modes == self._modes()).all() and (
                    n or np.array_equal(_unsaturated(act, v, h), _unsaturated(act, v - dv, h))):
                # no contact changed regime: the next (simplified Newton) update A^-1 r with the current LU is a
                # reliable estimate of the remaining error, so skip a Jacobian when it is already negligible
                dv_next, _ = _getrs(lu, piv, r)
                err_next = float(np.abs(dv_next).max()) if nv else 0.0
                if n:
                    err_next = max(err_next, float(np.abs(self._J @ dv_next).max()))
                if err_next < tol:
                    err = err_next
                    self._record(err, 0.0)          # alpha 0: estimated, not applied
                    converged = True
                    break
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
        if not converged and not np.all(np.isfinite(impulse)):
            impulse = np.zeros((n, 3))
        gen_contact = self._J.T @ f.reshape(-1) if n else np.zeros(nv)
        return StepResult(
            v_next=v_out,
            contact_impulse=impulse,
            generalized_contact_force=gen_contact,
            actuation_force=np.array(self._tau_act, dtype=float),
            stats=SolverStats(status=status, iterations=iterations, residual=float(err) if iterations else 0.0,
                              message=message),
        )

    def _do_step_into(self, inputs: StepInputs, slot: ResultSlot) -> StepResult:
        """The compiled step (``_do_step_numpy`` in one call of ``tamsi_kernels.newton_step_packed``) writing into
        ``slot``'s arrays: no array or result object made per step (``step_into``; ``_do_step`` gives it a fresh
        slot). A step that does not converge keeps a finite state: ``v_next`` = v0 and zero impulses where the
        kernel's are not finite."""
        kernels = self._kernels
        contacts = inputs.contacts
        n = contacts.signed_distance.shape[0]
        if n > self._capacity:
            self._ensure_capacity(n)
        act = inputs.actuation
        impulse = slot.rows(n)[0]
        code, iterations, err, self.history_count, info = kernels.newton_step_packed(
            inputs.mass_matrix, inputs.v, inputs.generalized_force, inputs.joint_damping, float(inputs.dt),
            act.effort, act.kp, act.kd, act.position_error, act.velocity_target, act.effort_limit,
            contacts.jacobian, contacts.velocity_bias, contacts.signed_distance, contacts.stiffness,
            contacts.dissipation, contacts.friction, *self._kernel_scratch, slot.v_next, impulse,
            slot.generalized_contact_force, slot.actuation_force)
        result = slot.result
        stats = result.stats
        result.v_next, result.contact_impulse = slot.v_next, impulse
        if code == kernels.CONVERGED:
            stats.status, stats.message = SolverStatus.CONVERGED, ""
        else:
            stats.status, stats.message = self._failure(code, err, info, inputs.t)
            if not np.isfinite(slot.v_next).all():
                result.v_next = inputs.v.copy()
            if not np.isfinite(impulse).all():
                result.contact_impulse = np.zeros((n, 3))
        stats.iterations, stats.residual = iterations, float(err) if iterations else 0.0
        return result

    def _failure(self, code: int, err: float, info: int, t: float) -> tuple[SolverStatus, str]:
        """Status and message of a compiled step that did not converge (same wording as the numpy path)."""
        opts = self.options
        kernels = self._kernels
        if code == kernels.MAX_ITERATIONS:
            tol = opts.relative_tolerance * opts.stiction_tolerance
            return SolverStatus.MAX_ITERATIONS, (
                f"TAMSI Newton iteration did not converge in {opts.max_iterations} iterations at t = {t:.6g} s "
                f"(last |dv| = {err:.3g} m/s > tolerance {tol:.3g} m/s; use_tals = {opts.use_tals})")
        cause = (f"singular Newton Jacobian (zero pivot {info})" if code == kernels.SINGULAR
                 else "non-finite Newton update")
        return SolverStatus.FAILED, f"TAMSI at t = {t:.6g} s: {cause}"
