"""Convex contact engines from "Irrotational Contact Fields" (Castro, Han, Masterjohn): Lagged, Similar, SAP.

All three solve, once per time step, the unconstrained strongly convex problem (paper eq. 3)

    min_v  l(v) = 1/2 ||v - v*||_A^2 + l_act(v) + sum_i l_c,i(J_i v + b_i)

with A = M(q0) + dt * diag(joint damping) (implicit damping), v* the free-motion velocity of the explicit
forces (A v* = M v0 + dt * k2(q0, v0)), l_act the convex potential of the implicit PD actuation with effort
limits (``Actuation.force``: its gradient is -dt * tau(v)), and l_c,i the contact potential of contact i whose
negative gradient is the contact impulse gamma_i = -dl_c,i/dv_c,i (eq. 4), v_c,i = J_i v + b_i in the contact
frame (t1, t2, n). One geometric query per step (done by the simulator); the signed distance is advanced to
first order inside the potential, phi = phi0 + dt v_n (section III-B).

Contact models (selected by engine name; all three share one Newton solver):

* ``lagged`` (section V-B): normal impulse n(v_n) = dt f_n(phi0 + dt v_n, v_n) of the Hunt & Crossley law
  f_n = k (-phi)_+ (1 - d v_n)_+ (eq. 22) with potential -N(v_n), N the antiderivative below eq. 23 clamped at
  the break velocity v_hat = min(-phi0/dt, 1/d) (eq. 23). Friction gamma_t = -mu gamma_n0 t_s with the soft
  tangent t_s = v_t / sqrt(|v_t|^2 + eps_s^2) (eq. 10) and the normal impulse LAGGED to the previous step,
  gamma_n0 = dt f_n(phi0, v_n0) (eq. 18); potential mu gamma_n0 ||v_t||_s. Optionally (``regularized_stiction``)
  eps_s = max(v_s, sigma w mu gamma_n0) (eq. 26), w the diagonal Delassus estimate of the contact.

  The lagged impulse: the paper DEFINES gamma_n0 = dt f_n(phi0, v_n,0), a function of the state at the start of
  the step (phi0 from this step's geometric query, v_n,0 = (J v0 + b)_n with this step's Jacobian). We
  therefore recompute it from (phi0, v0) every step instead of carrying impulses across steps, so no matching
  of contacts between steps is needed and ``reset()`` has nothing to forget. A contact that is new this step
  (phi0 > 0) has gamma_n0 = 0 and so no friction for one step (the lag of section VII-C).

* ``similar`` (section V-C): gamma_n = n(z), gamma_t = -mu n(z) t_s with z = v_n - mu ||v_t||_s (eqs. 19-21);
  potential -N(z). Glides at mu dt ||v_t|| during slip (section VII-A).

* ``sap`` (section V-A, ref. [4]): linear compliance with Kelvin-Voigt relaxation time tau_d: R_n =
  1/(dt k (dt + tau_d)) (raised to the near-rigid limit beta^2 w / (4 pi^2)), R_t = sigma w, v_hat_n =
  -phi0/(dt + tau_d); gamma = P_F(y), y = R^-1 (v_hat - v_c), the projection onto the friction cone in the
  R-norm; potential 1/2 gamma^T R gamma. Glides at mu (dt + tau_d) ||v_t|| during slip (eq. 24). The Hunt &
  Crossley dissipation d of the materials is not used by this model (it has tau_d instead).

Solver (section X): Newton on l(v) with the search direction from H dv = -r (eq. 28), H = A + dt diag(kp dt +
kd on unsaturated actuators) + J^T G J, G = d^2 l_c / dv_c^2 (3x3 per contact), and an exact line search
(Newton-Raphson on dl/dalpha with bracketing and bisection, as in Numerical Recipes' rtsafe). H is
block-diagonal over the groups of kinematic trees coupled by contacts this step (``tree_velocity_slices`` +
union of the trees each contact touches): groups of equal size are factored together with a batched Cholesky
(numpy), larger groups with LAPACK's dense Cholesky (scipy cho_factor). The default compiled path
(``newton_kernel="numba"``) runs the whole step - A, p0, the Jacobian compression, the Delassus estimate, the
contact parameters and the same Newton loop with a block-sparse Cholesky over the trees - in one call of
``icf_kernels.icf_step`` with scratch allocated once per engine (grown with the number of contacts).
Stopping criterion (as SAP [4]), checked from the second iterate on (at least one Newton step is taken: at small
dt the whole momentum change dt k2 can be below eps_r of a large momentum, e.g. the sliding rod at 1e-5 s):
||D r|| <= eps_a + eps_r max(||D A v||, ||D J^T gamma||, ||D (M v0 + dt k2)||), D = diag(A)^-1/2,
eps_r = ``relative_tolerance`` (default 1e-5). ``stats.residual`` reports ||D r|| / (that max). Reaching
``max_iterations`` returns MAX_ITERATIONS with the residual in the message; a non-positive-definite Hessian or
non-finite value returns FAILED (the velocity is then the start-of-step one, never NaN).

Configuration update q = q0 + dt N(q0) v (eq. 1): done by the simulator for every engine, free bodies solved in
their body frame frozen at q0 (contact_sim_ros/model/free_body_motion.py: the frame-rotation force is in
``StepInputs.generalized_force``; straight-line translation; velocities re-expressed in the new body frame).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ..errors import ConfigError, EngineError
from ..solvers import rtsafe
from ..solvers.rtsafe import rtsafe_start, rtsafe_step
from . import icf_kernels
from .base import ContactEngine, ResultSlot, SolverStats, SolverStatus, StepInputs, StepResult
from .registry import register_engine

__all__ = ["ConvexICFEngine", "LaggedEngine", "SimilarEngine", "SapEngine", "hunt_crossley_impulse"]

_EYE2 = np.eye(2)
_BATCH_MAX_SIZE = 24     # components up to this many dofs are factored with numpy's batched Cholesky
_ALPHA_GRID = 2.0 ** -np.arange(1, 31)   # coarse bracketing grid of the line search


def hunt_crossley_impulse(x, phi0, k, d, dt):
    """Discrete Hunt & Crossley normal impulse and its potential (paper eqs. 7, 22, 23), vectorised.

    x: (N,) normal velocity argument (m/s) (v_n for Lagged, z for Similar); phi0: (N,) signed distance at the
    start of the step (m); k: stiffness (N/m); d: Hunt & Crossley dissipation (s/m); dt: time step (s).
    Returns (n, dn_dx, N): the impulse n(x) = dt k (-(phi0 + dt x))_+ (1 - d x)_+ (N*s, >= 0), its derivative
    (N*s^2/m, <= 0) and the antiderivative N(x) = N+(min(x, v_hat)) (N*m) with
    N+(x) = dt k [-x (phi0 + dt x / 2) + d x^2 / 2 (phi0 + 2 dt x / 3)] and v_hat = min(-phi0/dt, 1/d) (eq. 23).
    The normal potential is l_n(x) = -N(x) (convex).
    """
    with np.errstate(divide="ignore"):
        inv_d = np.where(d > 0.0, 1.0 / np.where(d > 0.0, d, 1.0), np.inf)
    v_hat = np.minimum(-phi0 / dt, inv_d)
    xc = np.minimum(x, v_hat)
    active = x < v_hat
    penetration = -(phi0 + dt * xc)                    # m, >= 0 where active
    damping = 1.0 - d * xc                             # >= 0 where active
    n = np.where(active, dt * k * penetration * damping, 0.0)
    dn = np.where(active, -dt * k * (dt * damping + d * penetration), 0.0)
    antiderivative = dt * k * (-xc * (phi0 + 0.5 * dt * xc) + d * 0.5 * xc * xc * (phi0 + (2.0 / 3.0) * dt * xc))
    return n, dn, antiderivative


class ConvexICFEngine(ContactEngine):
    """Shared Newton solver of the convex Irrotational-Contact-Field approximations (see module docstring).

    Subclasses set ``name`` and ``contact_model`` ('lagged', 'similar' or 'sap')."""

    # (and the fused tree step's, sim/tree_step.tree_icf_step: named, not imported, as the engines do not import the
    # simulator; the Allegro hand far from its mug and the default scene take it; the rod sliding on the ground,
    # coal's pair near, the staged step)
    kernel_modules = (icf_kernels.__name__, rtsafe.__name__, "contact_sim_ros.sim.tree_step",
                      "contact_sim_ros.geometry.contact_pass_kernels")
    warm_up_scenes = ("scenes/default.yaml", "scenes/iiwa_allegro_mug.yaml", "scenes/icf_sliding_rod.yaml")

    contact_model: str = "lagged"

    @dataclass
    class Options:
        """Engine options (units in brackets).

        stiction_tolerance:   v_s [m/s], eps_s of the soft norm (Lagged, Similar), paper default 1e-4.
        relative_tolerance:   eps_r of the Newton stopping criterion (section XII: 1e-5).
        absolute_tolerance:   eps_a [sqrt(kg) m/s] of the stopping criterion.
        max_iterations:       Newton iteration limit (MAX_ITERATIONS status when reached).
        line_search_max_iterations: iteration limit of the exact line search.
        regularized_stiction: Lagged/Similar: eps_s = max(v_s, sigma w mu gamma_n0) (eq. 26).
        sigma:                dimensionless regularization of SAP's R_t = sigma w and of eq. 26 (1e-3).
        relaxation_time:      SAP's Kelvin-Voigt dissipation time scale tau_d [s] (paper XI: 1e-3).
        near_rigid_beta:      SAP near-rigid parameter beta (R_n >= beta^2 w / (4 pi^2)); 0 disables.
        defer_open_contacts:  compiled kernel: contacts with a positive gap that exert nothing at v0 nor at the
                              contact-free velocity stay out of Newton's problem until an iterate makes them act
                              (same converged solution, fewer contacts per iteration; icf_kernels.icf_step).
        newton_kernel:        'numba' (compiled Newton loop of icf_kernels.py, block-sparse Cholesky) or
                              'numpy' (the readable vectorised reference below); both solve the same problem.
        """

        stiction_tolerance: float = 1.0e-4
        relative_tolerance: float = 1.0e-5
        absolute_tolerance: float = 1.0e-14
        max_iterations: int = 100
        line_search_max_iterations: int = 60
        regularized_stiction: bool = False
        sigma: float = 1.0e-3
        relaxation_time: float = 1.0e-3
        near_rigid_beta: float = 1.0
        newton_kernel: str = "numba"
        defer_open_contacts: bool = True

        def __post_init__(self):
            positive = ("stiction_tolerance", "relative_tolerance", "sigma")
            for name in positive:
                value = getattr(self, name)
                if not (isinstance(value, (int, float)) and np.isfinite(value) and value > 0):
                    raise ConfigError(f"engine option {name} must be a finite number > 0, got {value!r}")
            for name in ("absolute_tolerance", "relaxation_time", "near_rigid_beta"):
                value = getattr(self, name)
                if not (isinstance(value, (int, float)) and np.isfinite(value) and value >= 0):
                    raise ConfigError(f"engine option {name} must be a finite number >= 0, got {value!r}")
            for name in ("max_iterations", "line_search_max_iterations"):
                value = getattr(self, name)
                if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                    raise ConfigError(f"engine option {name} must be an integer >= 1, got {value!r}")
            if self.newton_kernel not in ("numba", "numpy"):
                raise ConfigError("engine option newton_kernel must be 'numba' or 'numpy', "
                                  f"got {self.newton_kernel!r}")
            for name in ("regularized_stiction", "defer_open_contacts"):
                if not isinstance(getattr(self, name), bool):
                    raise ConfigError(f"engine option {name} must be true or false, got {getattr(self, name)!r}")

    def __init__(self, model, options=None):
        super().__init__(model, options)
        nv = model.nv
        tree_of_dof = np.full(nv, -1, dtype=int)
        for tree, sl in enumerate(model.tree_velocity_slices):
            tree_of_dof[sl] = tree
        # dofs not covered by any slice (should not happen) become their own trees
        missing = np.flatnonzero(tree_of_dof < 0)
        tree_of_dof[missing] = len(model.tree_velocity_slices) + np.arange(missing.size)
        self._tree_of_dof = tree_of_dof
        self._num_trees = int(tree_of_dof.max()) + 1 if nv else 0
        self._nv = nv
        self._A = np.zeros((nv, nv))          # scratch of the numpy reference path
        # diagnostics of the last step (for benchmarks): effective eps_s per contact (``last_stiction_tolerance``,
        # the first _last_nc entries of _stiction), the numpy path's Hessian, the compiled line search's work
        self._stiction = np.zeros(0)
        self._last_nc = 0
        self.last_hessian = None
        self.last_line_search_evaluations = 0
        self.last_deferred_contacts = 0       # contacts the compiled step left out of Newton's problem to the end
        opt = self.options
        self._compiled = opt.newton_kernel == "numba"
        self.results_checked = self._compiled   # icf_step reports CONVERGED only with finite v_next and impulses
        self.fills_slot = self._compiled        # _do_step_into: the compiled step into a ResultSlot
        self._lagged = self.contact_model == "lagged"
        K = icf_kernels
        # the compiled step's options (read once, at construction) and tree structure: the kernel wants each
        # tree's dofs contiguous, through a permutation when they are not (kernel dof i = model dof perm[i])
        self._kernel_options = np.zeros(K.NOPTIONS)
        self._kernel_options[[K.O_MODEL, K.O_RELATIVE_TOLERANCE, K.O_ABSOLUTE_TOLERANCE, K.O_MAX_ITERATIONS,
                              K.O_LINE_SEARCH_MAX_ITERATIONS, K.O_STICTION_TOLERANCE, K.O_SIGMA,
                              K.O_RELAXATION_TIME, K.O_NEAR_RIGID_FACTOR, K.O_REGULARIZED_STICTION,
                              K.O_DEFER_OPEN_CONTACTS]] = (
            K.MODEL_CODES[self.contact_model], opt.relative_tolerance, opt.absolute_tolerance, opt.max_iterations,
            opt.line_search_max_iterations, opt.stiction_tolerance, opt.sigma, opt.relaxation_time,
            opt.near_rigid_beta ** 2 / (4.0 * np.pi ** 2) if opt.near_rigid_beta > 0 else 0.0,
            opt.regularized_stiction, opt.defer_open_contacts)
        perm = np.argsort(tree_of_dof, kind="stable")
        tree_ptr = np.concatenate([[0], np.cumsum(np.bincount(tree_of_dof, minlength=self._num_trees))])
        self._structure = np.concatenate([tree_ptr, tree_of_dof[perm], perm, np.argsort(perm)]).astype(np.int64)
        self._max_contact_dofs = K.max_contact_dofs(np.diff(tree_ptr))
        self._no_friction_normal_impulse = np.zeros(0)
        self._no_columns = np.zeros((0, 0), dtype=np.int64)       # ContactSet.jacobian_columns not known
        self._damping = np.zeros(nv)
        self._capacity = -1
        self._ensure_capacity(8)

    def _ensure_capacity(self, n: int) -> None:
        """Scratch of the compiled step for up to n contacts, grown geometrically when a step has more contacts
        than ever before (the A^-1 part of the float scratch must start zeroed: np.zeros)."""
        if n <= self._capacity:
            return
        cap = max(n, 2 * self._capacity)
        stiction = np.zeros(cap)
        stiction[:self._last_nc] = self._stiction[:self._last_nc]
        self._stiction = stiction
        if self._compiled:
            nf, ni = icf_kernels.work_sizes(self._nv, self._num_trees, cap, self._max_contact_dofs)
            self._fwork = np.zeros(nf)
            self._iwork = np.zeros(ni, dtype=np.int64)
        # kernel_scratch's tuple: a new one exactly when these arrays are replaced (a caller compares identities)
        self._kernel_scratch = (self._fwork if self._compiled else None, self._iwork if self._compiled else None,
                                self._stiction, self._structure, self._kernel_options)
        self._capacity = cap

    @property
    def compiled(self) -> bool:
        """True when the step is the compiled kernel's (``newton_kernel="numba"``, ``icf_kernels.icf_step``)."""
        return self._compiled

    def kernel_scratch(self, contacts: int) -> tuple:
        """The compiled step's arguments that are the engine's (``icf_step``'s fwork, iwork, stiction, structure
        and options), grown to hold ``contacts`` contacts, for a caller that runs ``icf_step`` itself with at most
        that many contacts (sim/tree_step.py); it then calls ``record_compiled_step``. They stay the engine's: the
        same arrays (and the same tuple) until one of its steps has more contacts."""
        if not self._compiled:
            raise EngineError(f"engine {self.name!r}: kernel_scratch needs the compiled kernel "
                              "(newton_kernel='numba')")
        self._ensure_capacity(contacts)
        return self._kernel_scratch

    def record_compiled_step(self, contacts: int, evaluations: int, deferred: int) -> None:
        """What ``_do_step_into`` notes after ``icf_step``, for a step a caller ran itself (``kernel_scratch``):
        the number of contacts (``last_stiction_tolerance``), the line search's evaluations, the deferred contacts."""
        self._last_nc = contacts
        self.last_line_search_evaluations = evaluations
        self.last_deferred_contacts = deferred

    @property
    def last_stiction_tolerance(self) -> np.ndarray:
        """(N,) m/s: the effective stiction tolerance of each contact of the last step (Lagged, Similar: eps_s,
        eq. 26 when regularized; SAP: its slip-transition speed sigma w mu gamma_n, eq. 25)."""
        return self._stiction[:self._last_nc].copy()

    def _store_stiction_tolerance(self, eps: np.ndarray) -> None:
        self._ensure_capacity(eps.shape[0])
        self._stiction[:eps.shape[0]] = eps
        self._last_nc = eps.shape[0]

    # ------------------------------------------------------------------------------------------------------
    # contact potentials: vectorised over the N contacts
    def _prepare_contacts(self, inputs: StepInputs, Jc, cols, Ainv_blocks):
        """Per-step, per-contact constants of the model (all (N,) arrays) of the numpy reference path (the
        compiled path computes the same in ``icf_kernels.icf_step``)."""
        c = inputs.contacts
        dt = inputs.dt
        opt = self.options
        n = c.size
        k, d, mu, phi0 = c.stiffness, c.dissipation, c.friction, c.signed_distance
        p = {"k": k, "d": d, "mu": mu, "phi0": phi0}
        self._complete_params(p, dt)
        need_w = self.contact_model == "sap" or opt.regularized_stiction
        if need_w and n:
            # W_ii = J_i A^-1 J_i^T (A block-diagonal per tree), w = ||W_ii||_F / 3 (SAP's RMS estimate)
            W = np.einsum("nik,nkl,njl->nij", Jc, Ainv_blocks, Jc)
            p["w"] = np.sqrt(np.einsum("nij,nij->n", W, W)) / 3.0
        if self.contact_model in ("lagged", "similar"):
            eps = np.full(n, opt.stiction_tolerance)
            if self.contact_model == "lagged" or opt.regularized_stiction:
                vc0 = np.einsum("nik,nk->ni", Jc, inputs.v[cols]) + c.velocity_bias.reshape(-1, 3)
                vn0 = vc0[:, 2]
                # lagged normal impulse gamma_n0 = dt f_n(phi0, v_n0) (eqs. 18, 22)
                gn0 = dt * k * np.maximum(-phi0, 0.0) * np.maximum(1.0 - d * vn0, 0.0)
                p["gn0"] = gn0
                if opt.regularized_stiction and n:
                    eps = np.maximum(eps, opt.sigma * p["w"] * mu * gn0)     # eq. 26
            p["eps"] = eps
            self._store_stiction_tolerance(eps)
        else:  # sap
            tau = opt.relaxation_time
            w = p["w"] if n else np.zeros(0)
            Rt = opt.sigma * w
            Rn = 1.0 / (dt * k * (dt + tau))
            if opt.near_rigid_beta > 0:
                Rn = np.maximum(Rn, opt.near_rigid_beta ** 2 / (4.0 * np.pi ** 2) * w)
            p["Rt"], p["Rn"] = Rt, Rn
            p["vhat"] = -phi0 / (dt + tau)
            # slip-transition speed of SAP (eq. 25) reported as its effective stiction tolerance
            self._store_stiction_tolerance(Rt)
        return p

    @staticmethod
    def _complete_params(p, dt):
        """Per-step constants of the Hunt & Crossley law: dt k and the break velocity v_hat (eq. 23)."""
        d = p["d"]
        inv_d = np.full(d.shape, np.inf)
        np.divide(1.0, d, out=inv_d, where=d > 0.0)
        p["hc_vhat"] = np.minimum(-p["phi0"] / dt, inv_d)
        p["dtk"] = dt * p["k"]

    @staticmethod
    def _hc(x, p, dt):
        """Hunt & Crossley impulse n(x) and dn/dx (eqs. 7, 22, 23) with the per-step constants of ``p``."""
        xc = np.minimum(x, p["hc_vhat"])
        active = x < p["hc_vhat"]
        penetration = -(p["phi0"] + dt * xc)
        damping = 1.0 - p["d"] * xc
        n = p["dtk"] * penetration * damping * active
        dn = -p["dtk"] * (dt * damping + p["d"] * penetration) * active
        return n, dn

    def _contact_line(self, alphas, vc, dvc, p, dt):
        """Along a search direction, for each step length in ``alphas`` (B,): (sum_i gamma_i . dvc_i,
        sum_i dvc_i^T G_i dvc_i) at contact velocities vc + alpha dvc, as two (B,) arrays, without forming the
        3x3 Hessians (Lagged, Similar; vectorised over alphas and contacts)."""
        model = self.contact_model
        va = vc[None, :, :] + alphas[:, None, None] * dvc[None, :, :]      # (B, N, 3)
        dvt0, dvt1, dvn = dvc[:, 0], dvc[:, 1], dvc[:, 2]
        if model == "sap":
            mu, Rt, Rn = p["mu"], p["Rt"], p["Rn"]
            ratio = Rt / Rn
            den = 1.0 + mu * mu * ratio
            yt0, yt1 = -va[..., 0] / Rt, -va[..., 1] / Rt
            yn = (p["vhat"] - va[..., 2]) / Rn
            yr = np.sqrt(yt0 ** 2 + yt1 ** 2)
            stick = yr <= mu * yn
            gap = (~stick) & (mu * ratio * yr <= -yn)
            slip = ~(stick | gap)
            yr_safe = np.maximum(yr, 1e-300)
            t_dvt = (yt0 * dvt0 + yt1 * dvt1) / yr_safe                      # t . dv_t
            dvt2 = dvt0 ** 2 + dvt1 ** 2
            gn = (yn + mu * ratio * yr) / den
            # gamma . dvc
            g_stick = yt0 * dvt0 + yt1 * dvt1 + yn * dvn
            g_slip = mu * gn * t_dvt + gn * dvn
            g_dot = np.where(stick, g_stick, np.where(slip, g_slip, 0.0))
            q_stick = dvt2 / Rt + dvn ** 2 / Rn
            q_slip = ((mu * mu * ratio / den) * t_dvt ** 2 + (mu * gn / yr_safe) * (dvt2 - t_dvt ** 2)) / Rt \
                + 2.0 * mu * t_dvt * dvn / (den * Rn) + dvn ** 2 / (den * Rn)
            quad = np.where(stick, q_stick, np.where(slip, q_slip, 0.0))
            return g_dot.sum(axis=1), quad.sum(axis=1)
        mu, eps = p["mu"], p["eps"]
        s = np.sqrt(va[..., 0] ** 2 + va[..., 1] ** 2 + eps * eps)
        ts_dvt = (va[..., 0] * dvt0 + va[..., 1] * dvt1) / s                 # t_s . dv_t
        perp = (dvt0 ** 2 + dvt1 ** 2 - ts_dvt ** 2) / s                     # dv_t^T Pperp(t_s) dv_t / s
        if model == "lagged":
            mg = mu * p["gn0"]
            n, dn = self._hc(va[..., 2], p, dt)
            return -ts_dvt @ mg + n @ dvn, perp @ mg - dn @ (dvn ** 2)
        z = va[..., 2] - mu * (s - eps)
        n, dn = self._hc(z, p, dt)
        g_dvc = dvn - mu * ts_dvt                                            # grad z . dvc
        return np.sum(n * g_dvc, axis=1), np.sum(-dn * g_dvc ** 2 + mu * n * perp, axis=1)

    def _line_breakpoints(self, vc, dvc, p):
        """Step lengths in (0, 1) where a contact's potential changes character along the search direction:
        closest approach of v_t to 0 (stick/slip kink of the soft norm) and the break velocity of eq. 23."""
        dvt2 = dvc[:, 0] ** 2 + dvc[:, 1] ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            stick = -(vc[:, 0] * dvc[:, 0] + vc[:, 1] * dvc[:, 1]) / dvt2
            if self.contact_model == "sap":
                brk = (p["vhat"] - vc[:, 2]) / dvc[:, 2]
            else:
                brk = (p["hc_vhat"] - vc[:, 2]) / dvc[:, 2]
        pts = np.concatenate([stick, stick * (1 - 1e-6), stick * (1 + 1e-6), brk])
        return pts[(pts > 0.0) & (pts < 1.0)]

    def _contact_eval(self, vc, p, dt, need_hessian=True, need_cost=True):
        """gamma (N,3) = -dl/dvc, G (N,3,3) = d2l/dvc2 and the cost sum for contact velocities vc (N,3)."""
        model = self.contact_model
        if "dtk" not in p:
            self._complete_params(p, dt)
        n = vc.shape[0]
        gamma = np.empty((n, 3))
        G = np.zeros((n, 3, 3)) if need_hessian else None
        if model in ("lagged", "similar"):
            mu, eps = p["mu"], p["eps"]
            vt = vc[:, :2]
            s = np.sqrt(np.einsum("ni,ni->n", vt, vt) + eps * eps)    # ||v_t||_s + eps_s
            ts = vt / s[:, None]                                       # soft tangent (eq. 10)
            Pperp = None
            if need_hessian:
                Pperp = (_EYE2[None] - ts[:, :, None] * ts[:, None, :]) / s[:, None, None]
            if model == "lagged":
                gn0 = p["gn0"]
                nn, dn = self._hc(vc[:, 2], p, dt)
                gamma[:, :2] = -(mu * gn0)[:, None] * ts
                gamma[:, 2] = nn
                cost = None
                if need_cost:
                    Nn = hunt_crossley_impulse(vc[:, 2], p["phi0"], p["k"], p["d"], dt)[2]
                    cost = np.sum(mu * gn0 * (s - eps)) - np.sum(Nn)
                if need_hessian:
                    G[:, :2, :2] = (mu * gn0)[:, None, None] * Pperp
                    G[:, 2, 2] = -dn
            else:
                z = vc[:, 2] - mu * (s - eps)                          # eq. 19
                nz, dnz = self._hc(z, p, dt)
                gamma[:, :2] = -(mu * nz)[:, None] * ts
                gamma[:, 2] = nz
                cost = -np.sum(hunt_crossley_impulse(z, p["phi0"], p["k"], p["d"], dt)[2]) if need_cost else None
                if need_hessian:
                    g = np.empty((n, 3))
                    g[:, :2] = -mu[:, None] * ts
                    g[:, 2] = 1.0
                    G[:] = (-dnz)[:, None, None] * g[:, :, None] * g[:, None, :]
                    G[:, :2, :2] += (mu * nz)[:, None, None] * Pperp
            return gamma, G, cost
        # SAP
        mu, Rt, Rn = p["mu"], p["Rt"], p["Rn"]
        yt = -vc[:, :2] / Rt[:, None]
        yn = (p["vhat"] - vc[:, 2]) / Rn
        yr = np.sqrt(np.einsum("ni,ni->n", yt, yt))
        ratio = Rt / Rn
        mu_tilde2 = mu * mu * ratio
        stick = yr <= mu * yn
        gap = (~stick) & (mu * ratio * yr <= -yn)
        slip = ~(stick | gap)
        that = yt / np.maximum(yr, 1e-300)[:, None]
        gn_slip = (yn + mu * ratio * yr) / (1.0 + mu_tilde2)
        gamma[:, 2] = np.where(stick, yn, np.where(slip, gn_slip, 0.0))
        gamma[:, :2] = np.where(stick[:, None], yt, np.where(slip[:, None], (mu * gn_slip)[:, None] * that, 0.0))
        cost = 0.5 * np.sum(Rt * np.einsum("ni,ni->n", gamma[:, :2], gamma[:, :2]) + Rn * gamma[:, 2] ** 2)
        if need_hessian:
            # stick: G = R^-1; slip: G = (dgamma/dy) R^-1 (symmetric); gap: 0
            G[stick, 0, 0] = 1.0 / Rt[stick]
            G[stick, 1, 1] = 1.0 / Rt[stick]
            G[stick, 2, 2] = 1.0 / Rn[stick]
            if np.any(slip):
                m, tt, r = mu[slip], that[slip], yr[slip]
                den = 1.0 + mu_tilde2[slip]
                rt, rn, gn = Rt[slip], Rn[slip], gn_slip[slip]
                Gs = np.empty((m.size, 3, 3))
                ttT = tt[:, :, None] * tt[:, None, :]
                # d gamma_t / d y_t = mu t (d gn/d y_t)^T + mu gn Pperp(t) / y_r
                dgt = (m * m * ratio[slip] / den)[:, None, None] * ttT \
                    + (m * gn / r)[:, None, None] * (_EYE2[None] - ttT)
                Gs[:, :2, :2] = dgt / rt[:, None, None]
                off = (m / (den * rn))[:, None] * tt
                Gs[:, :2, 2] = off
                Gs[:, 2, :2] = off
                Gs[:, 2, 2] = 1.0 / (den * rn)
                G[slip] = Gs
        return gamma, G, cost

    # ------------------------------------------------------------------------------------------------------
    def _do_step(self, inputs: StepInputs) -> StepResult:
        if not self._compiled:
            return self._do_step_numpy(inputs)
        # the compiled step has one path, ``_do_step_into``: here into a slot of this step's own (fresh arrays)
        return self._do_step_into(inputs, ResultSlot.for_one_step(self._nv, inputs.contacts.signed_distance.shape[0]))

    def _do_step_into(self, inputs: StepInputs, slot: ResultSlot) -> StepResult:
        """The compiled step (``icf_kernels.icf_step``) writing into ``slot``'s arrays: no array or result object
        made per step when it converges (``step_into``; ``_do_step`` gives it a fresh slot); a step that does not
        converge returns a new StepResult over the slot's arrays."""
        contacts = inputs.contacts
        nc = contacts.signed_distance.shape[0]
        if nc > self._capacity:
            self._ensure_capacity(nc)
        act = inputs.actuation
        impulse, gn0 = slot.rows(nc)
        if not self._lagged:
            gn0 = self._no_friction_normal_impulse
        damping = inputs.joint_damping
        if not damping.flags.writeable:
            # the model's own (read-only) array when no joint has friction: a read-only argument would make numba
            # compile (and cache) a second variant of the kernel, so the node's warm start would compile again
            damping = self._damping
            np.copyto(damping, inputs.joint_damping)
        v_next, generalized_force, actuation = slot.v_next, slot.generalized_contact_force, slot.actuation_force
        code, iterations, residual, failed_at, n_eval, deferred = icf_kernels.icf_step(
            inputs.dt, inputs.mass_matrix, inputs.v, inputs.generalized_force, damping,
            act.effort, act.kp, act.kd, act.position_error, act.velocity_target, act.effort_limit,
            contacts.jacobian, contacts.velocity_bias, contacts.signed_distance, contacts.stiffness,
            contacts.dissipation, contacts.friction,
            self._jacobian_columns(contacts),
            self._kernel_options, self._structure, self._fwork,
            self._iwork, self._stiction, v_next, impulse, generalized_force, actuation, gn0)
        self._last_nc = nc
        self.last_line_search_evaluations = n_eval
        self.last_deferred_contacts = deferred
        if code == icf_kernels.CONVERGED:
            result = slot.result
            stats = result.stats
            stats.status, stats.message, stats.iterations, stats.residual = SolverStatus.CONVERGED, "", iterations, \
                residual
            result.v_next, result.contact_impulse = v_next, impulse
            result.friction_normal_impulse = gn0 if self._lagged else None
            return result
        stats = self._compiled_failure(inputs, code, iterations, residual, failed_at)
        if stats is None:
            return self._failure(inputs, self._FAILURES[code].format(failed_at))
        if not np.isfinite(v_next).all():
            v_next = np.array(inputs.v, float, copy=True)
        return StepResult(v_next=v_next, contact_impulse=impulse, generalized_contact_force=generalized_force,
                          actuation_force=actuation, stats=stats,
                          friction_normal_impulse=gn0 if self._lagged else None)

    def _jacobian_columns(self, contacts) -> np.ndarray:
        """The contacts' ``jacobian_columns`` as the compiled step takes them (int64, C order), or (0, 0) when not
        known (the kernel then scans the Jacobian's rows)."""
        cols = contacts.jacobian_columns
        if cols is None:
            return self._no_columns
        if cols.dtype != np.int64 or not cols.flags.c_contiguous or cols.ndim != 2:
            cols = np.ascontiguousarray(cols, dtype=np.int64).reshape(contacts.size, -1)
        return cols

    def _do_step_numpy(self, inputs: StepInputs) -> StepResult:
        """The step in vectorised numpy (``newton_kernel="numpy"``): the readable reference of ``icf_step``."""
        opt = self.options
        dt = inputs.dt
        nv = self.model.nv
        contacts = inputs.contacts
        nc = contacts.size
        act = inputs.actuation
        v0 = np.asarray(inputs.v, float)

        # A = M + dt D (implicit joint damping); p0 = M v0 + dt k2  (eq. 2 with the explicit forces)
        A = self._A
        np.copyto(A, inputs.mass_matrix)
        A[np.diag_indices(nv)] += dt * inputs.joint_damping
        p0 = inputs.mass_matrix @ v0 + dt * inputs.generalized_force
        diagA = np.diagonal(A).copy()
        if np.any(diagA <= 0):
            return self._failure(inputs, "mass matrix has a non-positive diagonal entry")
        D = 1.0 / np.sqrt(diagA)

        # compress the contact Jacobian: per contact the (padded) columns where it is non-zero
        J3 = contacts.jacobian.reshape(nc, 3, nv)
        if nc:
            nz = np.any(J3 != 0.0, axis=1)                          # (N, nv)
            K = max(int(nz.sum(axis=1).max()), 1)
            cols = np.argsort(~nz, axis=1, kind="stable")[:, :K]    # non-zero columns first
            valid = np.take_along_axis(nz, cols, axis=1)
            Jc = np.take_along_axis(J3, cols[:, None, :], axis=2)   # (N, 3, K), exact zeros where padded
        else:
            K = 0
            cols = np.zeros((0, 0), dtype=int)
            valid = np.zeros((0, 0), dtype=bool)
            Jc = np.zeros((0, 3, 0))
        bias = contacts.velocity_bias.reshape(nc, 3)

        Ainv_blocks = None
        if nc and (self.contact_model == "sap" or opt.regularized_stiction):
            Ainv = self._block_inverse(A)
            Ainv_blocks = Ainv[cols[:, :, None], cols[:, None, :]]
        params = self._prepare_contacts(inputs, Jc, cols, Ainv_blocks)
        groups = self._coupled_groups(cols, valid)

        # Hessian storage: the diagonal blocks of the coupled groups, concatenated (flat). Per dof its row base
        # in the flat buffer and its local index, so that entry (d1, d2) of H is flat[row_base[d1] + local[d2]].
        row_base = np.zeros(nv, dtype=int)
        local = np.zeros(nv, dtype=int)
        blocks = []
        offset = 0
        A_parts = []
        for size, idx in groups:
            m = idx.shape[0]
            local[idx] = np.arange(size)[None, :]
            row_base[idx] = offset + (np.arange(m)[:, None] * size + np.arange(size)[None, :]) * size
            A_parts.append(A[idx[:, :, None], idx[:, None, :]].ravel())
            blocks.append((size, idx, offset, offset + m * size * size))
            offset += m * size * size
        A_flat = np.concatenate(A_parts) if A_parts else np.zeros(0)
        diag_flat = row_base + local
        if nc:
            pair_valid = valid[:, :, None] & valid[:, None, :]
            lin = np.where(pair_valid, row_base[cols][:, :, None] + local[cols][:, None, :], 0).ravel()
        else:
            pair_valid = np.zeros((0, 0, 0), dtype=bool)
            lin = np.zeros(0, dtype=int)

        # implicit PD actuation tau(v) = clip(a - c v, -L, L) (Actuation.force), evaluated on its dofs only
        c_act = dt * act.kp + act.kd
        a_act = act.effort + act.kp * act.position_error + act.kd * act.velocity_target
        L_act = act.effort_limit
        act_dofs = np.flatnonzero(c_act > 0.0)
        tau_const = np.clip(a_act, -L_act, L_act)
        c_a, a_a, L_a = c_act[act_dofs], a_act[act_dofs], L_act[act_dofs]

        def actuation(v):
            tau = tau_const.copy()
            dtau = np.zeros(nv)
            if act_dofs.size:
                raw = a_a - c_a * v[act_dofs]
                tau[act_dofs] = np.clip(raw, -L_a, L_a)
                dtau[act_dofs] = np.where(np.abs(raw) < L_a, -c_a, 0.0)
            return tau, dtau


        def contact_velocity(v):
            return np.matmul(Jc, v[cols][:, :, None])[:, :, 0] + bias

        J_T = contacts.jacobian.T

        def generalized_impulse(gamma):
            if not nc:
                return np.zeros(nv)
            return J_T @ gamma.ravel()

        # ---- Newton iterations -------------------------------------------------------------------------
        v = v0.copy()
        stats = SolverStats()
        status, message = SolverStatus.MAX_ITERATIONS, ""
        vc = contact_velocity(v)
        gamma, G, _ = self._contact_eval(vc, params, dt, need_cost=False)
        tau, dtau = actuation(v)
        residual_ratio = np.inf
        iterations = 0
        scale_p0 = np.linalg.norm(D * p0)
        H_flat = A_flat
        for iteration in range(opt.max_iterations + 1):
            jc = generalized_impulse(gamma)
            Av = A @ v
            r = Av - p0 - dt * tau - jc                              # gradient of the cost
            if not np.all(np.isfinite(r)):
                return self._failure(inputs, f"non-finite residual at Newton iteration {iteration}")
            scale = max(np.linalg.norm(D * Av), np.linalg.norm(D * jc), scale_p0)
            rnorm = np.linalg.norm(D * r)
            residual_ratio = rnorm / scale if scale > 0 else rnorm
            # at least one Newton step: at small dt the whole change of momentum dt k2 can be below eps_r of
            # a large momentum (sliding rod at dt = 1e-5 s: gravity was never applied)
            if iteration > 0 and rnorm <= opt.absolute_tolerance + opt.relative_tolerance * scale:
                status = SolverStatus.CONVERGED
                break
            if iteration == opt.max_iterations:
                message = (f"Newton did not converge in {opt.max_iterations} iterations "
                           f"(relative residual {residual_ratio:.3e} > {opt.relative_tolerance:g}) at t = "
                           f"{inputs.t:.6g} s")
                break
            iterations += 1
            # Hessian H = A + dt diag(-dtau/dv) + J^T G J, assembled block by block (flat buffer)
            H_flat = A_flat.copy()
            if act_dofs.size:
                H_flat[diag_flat[act_dofs]] -= dt * dtau[act_dofs]
            if nc:
                # C_n = J_n^T G_n J_n (K x K per contact), as explicit sums over the 3 contact directions
                # (numpy's batched matmul is slow for many tiny matrices)
                GJ = G[:, :, 0, None] * Jc[:, None, 0, :] + G[:, :, 1, None] * Jc[:, None, 1, :] \
                    + G[:, :, 2, None] * Jc[:, None, 2, :]
                C = Jc[:, 0, :, None] * GJ[:, 0, None, :] + Jc[:, 1, :, None] * GJ[:, 1, None, :] \
                    + Jc[:, 2, :, None] * GJ[:, 2, None, :]
                C *= pair_valid
                H_flat += np.bincount(lin, weights=C.ravel(), minlength=H_flat.size)
            dv = self._solve_blocks(H_flat, blocks, -r)
            if dv is None:
                return self._failure(inputs, f"Hessian not positive definite at Newton iteration {iteration}")
            # exact line search on f(alpha) = dl/dalpha (convex: f non-decreasing)
            dvc = contact_velocity(dv) - bias
            f0 = float(r @ dv)
            if not f0 < 0.0:
                # not a descent direction: only possible at round-off level of the optimum
                if rnorm <= 1e3 * (opt.absolute_tolerance + opt.relative_tolerance * scale):
                    status = SolverStatus.CONVERGED
                else:
                    message = (f"Newton direction is not a descent direction (dl/dalpha = {f0:.3e}) at t = "
                               f"{inputs.t:.6g} s")
                    status = SolverStatus.FAILED
                break
            dAd = float(dv @ (A @ dv))
            r0dv = float((Av - p0) @ dv)
            dv_act = dv[act_dofs]
            dt_tau_const_dv = dt * float(tau_const @ dv) - dt * float(tau_const[act_dofs] @ dv_act)

            def line_derivatives(alphas):
                """dl/dalpha and d2l/dalpha2 at the step lengths ``alphas`` (B,)."""
                if nc:
                    g_dot, quad = self._contact_line(alphas, vc, dvc, params, dt)
                else:
                    g_dot = quad = np.zeros(alphas.size)
                f = r0dv + alphas * dAd - dt_tau_const_dv - g_dot
                fp = dAd + quad
                if act_dofs.size:
                    raw = a_a[None, :] - c_a[None, :] * (v[act_dofs][None, :] + alphas[:, None] * dv_act[None, :])
                    f = f - dt * (np.clip(raw, -L_a, L_a) @ dv_act)
                    fp = fp + dt * (np.where(np.abs(raw) < L_a, c_a, 0.0) @ (dv_act * dv_act))
                return f, fp

            candidates = self._line_breakpoints(vc, dvc, params) if nc else np.zeros(0)
            alpha = self._line_search(line_derivatives, f0, candidates, opt.line_search_max_iterations)
            if alpha is None:
                return self._failure(inputs, f"line search produced non-finite values at Newton iteration {iteration}")
            v = v + alpha * dv
            vc = vc + alpha * dvc
            gamma, G, _ = self._contact_eval(vc, params, dt, need_cost=False)
            tau, dtau = actuation(v)
        stats.status = status
        stats.iterations = iterations
        stats.residual = float(residual_ratio)
        stats.message = message
        if not status.ok and not np.all(np.isfinite(v)):
            v = v0.copy()
        self.last_hessian = (H_flat, blocks) if iterations else None
        if self.contact_model == "sap" and nc:
            # SAP's stick-slip transition speed v_s = sigma w mu gamma_n (eq. 25)
            self._store_stiction_tolerance(params["Rt"] * params["mu"] * gamma[:, 2])
        return StepResult(v_next=v, contact_impulse=gamma.copy(),
                          generalized_contact_force=generalized_impulse(gamma) / dt,
                          actuation_force=tau, stats=stats,
                          friction_normal_impulse=params["gn0"].copy() if "gn0" in params
                          and self.contact_model == "lagged" else None)

    # ------------------------------------------------------------------------------------------------------
    _FAILURES = {
        icf_kernels.NONFINITE_RESIDUAL: "non-finite residual at Newton iteration {}",
        icf_kernels.NOT_POSITIVE_DEFINITE: "Hessian not positive definite at Newton iteration {}",
        icf_kernels.LINE_SEARCH_NONFINITE: "line search produced non-finite values at Newton iteration {}",
        icf_kernels.NONPOSITIVE_MASS: "mass matrix has a non-positive diagonal entry",
        icf_kernels.DELASSUS_FAILED: "mass matrix block not positive definite (Delassus estimate)",
        icf_kernels.NONFINITE_RESULT: "non-finite velocity or impulse",
    }

    def _compiled_failure(self, inputs, code, iterations, residual, failed_at):
        """Stats of a compiled step that did not converge (same wording as the numpy path), or None for the
        failures after which the step returns the start-of-step velocity (``_FAILURES``)."""
        if code in self._FAILURES:
            return None
        opt = self.options
        stats = SolverStats(iterations=iterations, residual=residual)
        if code == icf_kernels.MAX_ITERATIONS:
            stats.status = SolverStatus.MAX_ITERATIONS
            stats.message = (f"Newton did not converge in {opt.max_iterations} iterations (relative residual "
                             f"{residual:.3e} > {opt.relative_tolerance:g}) at t = {inputs.t:.6g} s")
        else:
            stats.status = SolverStatus.FAILED
            stats.message = f"Newton direction is not a descent direction at t = {inputs.t:.6g} s"
        return stats

    @staticmethod
    def _line_search(fun, f0, candidates, max_iterations):
        """Root of the non-decreasing f(alpha) = dl/dalpha in (0, 1]; f(0) = f0 < 0 (exact line search).

        ``fun(alphas)`` returns (f, f') at an array of step lengths. Bracketing: f at alpha = 1, then, in one
        vectorised evaluation, at the contacts' breakpoints (``_line_breakpoints``) and a geometric grid
        2^-k; the first sign change brackets the root. Refinement: Newton-Raphson safeguarded by bisection
        (rtsafe, Numerical Recipes 9.4), stopped at |f| <= 1e-6 |f0| or a bracket narrower than 1e-9 alpha.
        Returns alpha, or None on non-finite values."""
        f1, fp1 = fun(np.ones(1))
        if not (np.isfinite(f1[0]) and np.isfinite(fp1[0])):
            return None
        if f1[0] <= 0.0:
            return 1.0                                              # the full Newton step is still descending
        lo, hi, f_hi, fp_hi = 0.0, 1.0, f1[0], fp1[0]
        # coarse geometric grid, then the breakpoints inside the coarse bracket
        for grid in (_ALPHA_GRID, candidates):
            grid = grid[(grid > lo) & (grid < hi)]
            if not grid.size:
                continue
            fg, fpg = fun(grid)
            if not (np.all(np.isfinite(fg)) and np.all(np.isfinite(fpg))):
                return None
            order = np.argsort(grid)
            grid, fg, fpg = grid[order], fg[order], fpg[order]
            above = np.flatnonzero(fg >= 0.0)
            if above.size:
                k = above[0]
                hi, f_hi, fp_hi = grid[k], fg[k], fpg[k]
                if k > 0:
                    lo = grid[k - 1]
            else:
                lo = grid[-1]
        f_tol = 1e-6 * abs(f0)
        if abs(f_hi) <= f_tol:
            return float(hi)
        # rtsafe (solvers/rtsafe.py, the compiled step's rule): Newton from hi if it lands inside, else bisection
        alpha, dx_old = rtsafe_start(float(lo), float(hi), float(f_hi), float(fp_hi))
        for _ in range(max_iterations):
            fa, fpa = fun(np.array([alpha]))
            f, fp = fa[0], fpa[0]
            if not (np.isfinite(f) and np.isfinite(fp)):
                return None
            done, alpha, lo, hi, dx_old = rtsafe_step(alpha, float(f), float(fp), lo, hi, dx_old, f_tol)
            if done:
                return float(alpha)
        return float(alpha)

    # ------------------------------------------------------------------------------------------------------
    def _coupled_groups(self, cols, valid):
        """Groups of dofs whose Hessian blocks are coupled this step: trees joined by contacts.

        Returns a list of (size, index array (m, size)) batches of equally sized groups."""
        nt = self._num_trees
        tree_of_dof = self._tree_of_dof
        labels = np.arange(nt)
        if cols.size and nt > 1:
            trees = tree_of_dof[cols]
            first = trees[:, :1].repeat(trees.shape[1], axis=1)
            a, b = first[valid], trees[valid]
            edges = np.unique(a[a != b] * nt + b[a != b])
            if edges.size:
                # union-find over the (few) distinct tree pairs touched by contacts
                parent = list(range(nt))

                def find(x):
                    while parent[x] != x:
                        parent[x] = parent[parent[x]]
                        x = parent[x]
                    return x

                for e in edges.tolist():
                    ra, rb = find(e // nt), find(e % nt)
                    if ra != rb:
                        parent[max(ra, rb)] = min(ra, rb)
                labels = np.array([find(x) for x in range(nt)])
        comp_of_dof = labels[tree_of_dof]
        order = np.argsort(comp_of_dof, kind="stable")
        counts = np.bincount(comp_of_dof)
        batches = {}
        start = 0
        for comp, size in enumerate(counts):
            if size == 0:
                continue
            batches.setdefault(int(size), []).append(order[start:start + size])
            start += size
        return [(size, np.array(idx)) for size, idx in batches.items()]

    @staticmethod
    def _solve_blocks(H_flat, blocks, rhs):
        """Solve H x = rhs for the block-diagonal H stored as concatenated groups of equally sized blocks:
        numpy's batched Cholesky for small blocks, LAPACK (scipy cho_factor) for large ones. None if a block
        is not positive definite or the result is not finite."""
        x = np.empty_like(rhs)
        try:
            for size, idx, start, stop in blocks:
                m = idx.shape[0]
                Hb = H_flat[start:stop].reshape(m, size, size)
                if size <= _BATCH_MAX_SIZE:
                    np.linalg.cholesky(Hb)                  # positive-definiteness check (raises)
                    x[idx] = np.linalg.solve(Hb, rhs[idx][:, :, None])[:, :, 0]
                else:
                    for j in range(m):
                        c = scipy.linalg.cho_factor(Hb[j], check_finite=False)
                        x[idx[j]] = scipy.linalg.cho_solve(c, rhs[idx[j]], check_finite=False)
        except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
            return None
        if not np.all(np.isfinite(x)):
            return None
        return x

    def _block_inverse(self, A):
        """A^-1 for the block-diagonal (per tree) matrix A."""
        Ainv = np.zeros_like(A)
        for sl in self.model.tree_velocity_slices:
            Ainv[sl, sl] = np.linalg.inv(A[sl, sl])
        return Ainv

    def _failure(self, inputs: StepInputs, message: str) -> StepResult:
        nv = self.model.nv
        stats = SolverStats(status=SolverStatus.FAILED, message=f"{message} (t = {inputs.t:.6g} s)")
        return StepResult(v_next=np.array(inputs.v, float, copy=True),
                          contact_impulse=np.zeros((inputs.contacts.size, 3)),
                          generalized_contact_force=np.zeros(nv), actuation_force=np.zeros(nv), stats=stats)


@register_engine
class LaggedEngine(ConvexICFEngine):
    name = "lagged"
    description = ("Convex ICF Lagged model (Castro et al.): Hunt & Crossley normal force, friction with the "
                   "normal impulse lagged to the previous step; no gliding during slip")
    contact_model = "lagged"


@register_engine
class SimilarEngine(ConvexICFEngine):
    name = "similar"
    description = "Convex ICF Similar model (Castro et al.): Hunt & Crossley, strongly coupled friction"
    contact_model = "similar"


@register_engine
class SapEngine(ConvexICFEngine):
    name = "sap"
    description = "SAP (Castro et al. 2022) in the ICF framework: linear compliance, relaxation time tau_d"
    contact_model = "sap"
