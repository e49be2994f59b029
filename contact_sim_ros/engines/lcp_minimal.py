"""Minimal-coordinate LCP engine: operational-space complementarity with collisions and restitution.

Paper: A. Jain, C. Crean, C. Kuo, S. Myint, H. von Bremen, "Minimal Coordinate Formulation of Contact
Dynamics in Operational Space" (RSS 2012). Equation numbers below refer to it.

Per step, in the joint (minimal) coordinates of the scene's Pinocchio model:

1. Implicit actuation and damping (``Actuation`` linearised at v, saturated dofs explicit):
   M_hat = M + dt B,  v_free = M_hat^-1 (M v + dt (f + a))          [eq. 7 with the free accelerations, eq. 2]
2. Operational-space compliance matrix (OSCM) over the contact nodes in the contact frames (eq. 6):
   W = J M_hat^-1 J^T  (3N x 3N), from X = M_hat^-1 J^T computed by ``pin.computeMinverse``
   (``delassus="minverse"``, O(nv^2) in C++, the default ``auto`` choice up to 256 dofs), or WITHOUT forming
   M^-1 by the articulated-body algorithm (``delassus="aba"``: ``pin.aba`` on a zero-gravity copy of the model
   whose armature holds dt B, one O(nv) sweep per contact direction, the ``auto`` choice above 256 dofs, where
   it wins: benchmarks/lcp/run.py --sections lambda), or by a Cholesky factorisation of M_hat
   (``delassus="cholesky"``; always used for models with mimic joints, which ``aba`` refuses).
3. Polyhedral friction: n_f unit directions d_j = cos(2 pi j / n_f) t1 + sin(2 pi j / n_f) t2 in the tangent
   plane (eq. 14); per contact D(i) = [n, d_1 .. d_nf] (eq. 15). The inscribed polygon underestimates the
   friction bound by at most a factor cos(pi / n_f) (7.6 % for n_f = 8, 1.9 % for n_f = 16) in directions
   between two d_j, and is exact along the d_j.
4. The LCP of eq. 28 with per-contact grouping z = [beta(0) .. beta(N-1), sigma(0) .. sigma(N-1)],
   beta(i) = [F_n(i), beta_1(i) .. beta_nf(i)] (N*s), sigma the sliding-speed slack (m/s):
       [ D^T W D   E_hat ] [beta ]   [ D^T (J v_free + bias) + b ]
       [ E_bar       0   ] [sigma] + [            0              ]   _|_  [beta; sigma] >= 0
   with E_hat = diag([0; 1..1]), E_bar = diag([mu, -1..-1]) (eqs. 18-20, 29) and b a normal-row gap term
   (below). Bilateral constraints (eq. 34, loop closures) enter as extra rows/columns with free multipliers
   lambda; the mixed LCP is reduced to a standard one by eliminating lambda through the Schur complement of
   the bilateral block, then solved by Lemke (``contact_sim_ros.solvers.lemke``).
5. State update (eqs. 30-31): v+ = v_free + M_hat^-1 J^T D beta.

Which contacts are active, and collisions (section IV): contacts come from the query with phi within the
margin. A contact is *touching* when phi <= ``touch_distance``; only touching contacts enter the step LCP;
their normal row asks  v_n+ >= -phi/dt  when phi > 0 (close the remaining gap, no more) and
v_n+ >= erp * (-phi - slop) / dt  in penetration (position stabilisation). A non-touching contact whose
predicted gap phi + dt v_n+ becomes negative is a *new collision inside the step*: the step is split at the
estimated time of impact s dt (section IV, "estimate the time for collision and redo the step"), the
positions advance to the impact, the compression LCP (eq. 36, dt = 0) and, where the restitution e > 0, the
decompression LCP (eqs. 38-40) act on the velocity at impact, and the rest of the step (1 - s) dt is solved
with the collided contacts active. Touching contacts that approach faster than ``impact_velocity`` at the
start of a step are treated as an impact at t. The engine therefore returns ``q_next`` itself
(q integrated with s dt v_1 + (1 - s) dt v_2). Tunnelling is avoided as long as |v_n| dt < contact margin.
Only the first collision event of a step is resolved exactly; later ones in the same step become touching
contacts of the next step.

Failures (Lemke ray termination, pivot limit) give a FAILED / MAX_ITERATIONS status with the sim time and the
LCP size in the message, and the start-of-step free velocity (never NaN).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
import scipy.linalg

from ..errors import ConfigError
from ..solvers import lemke_kernels
from ..solvers.lemke import LCPStatus, LemkeSolver
from . import lcp_kernels
from .base import ContactEngine, SolverStats, SolverStatus, StepInputs, StepResult
from .lcp_kernels import contact_lcp_kernel
from .registry import register_engine


DELASSUS_METHODS = ("auto", "aba", "cholesky", "minverse")
AUTO_MINVERSE_MAX_NV = 256      # "auto": computeMinverse up to this many dofs, aba columns above
LCP_KERNELS = ("numba", "numpy")

def friction_basis(n_directions: int) -> np.ndarray:
    """D(i) of eq. 15 in the contact frame (t1, t2, n): columns [n, d_1 .. d_nf], shape (3, n_f + 1)."""
    angles = 2.0 * np.pi * np.arange(n_directions) / n_directions
    basis = np.zeros((3, n_directions + 1))
    basis[2, 0] = 1.0
    basis[0, 1:] = np.cos(angles)
    basis[1, 1:] = np.sin(angles)
    return basis


@dataclass
class ContactLCPSolution:
    impulse: np.ndarray         # (n, 3) contact-frame impulses (t1, t2, n), N*s
    bilateral: np.ndarray       # (nb,) bilateral multipliers (N*s)
    sliding_speed: np.ndarray   # (n,) sigma, m/s
    status: LCPStatus
    pivots: int
    message: str
    residual: float             # complementarity error of the solved standard LCP


class ContactLCP:
    """Builds and solves the (mixed) LCP of eqs. 28 / 34 for given operational-space data.

    Reuses a ``LemkeSolver``. All arguments are in the contact frame of each contact (rows t1, t2, n).
    ``solve`` takes the extracted blocks (numpy assembly, the readable reference); ``solve_rows`` takes the full
    operational-space matrix and the selected contacts and, with ``kernel="numba"`` (default), assembles the
    LCP in one compiled call (``contact_lcp_kernel``; same matrices up to round-off, tested).
    """

    def __init__(self, n_directions: int, max_pivots: int | None = None, pivot_tol: float = 1e-12,
                 bilateral: str = "schur", kernel: str = "numba"):
        if bilateral not in ("schur", "split"):
            raise ConfigError(f"bilateral mode {bilateral!r} unknown; valid modes: schur, split")
        if kernel not in LCP_KERNELS:
            raise ConfigError(f"ContactLCP kernel {kernel!r} unknown; valid kernels: {', '.join(LCP_KERNELS)}")
        self.kernel = kernel
        self.bilateral_mode = bilateral
        self.n_directions = n_directions
        self.basis = friction_basis(n_directions)
        self.lemke = LemkeSolver(pivot_tol=pivot_tol, max_pivots=max_pivots)
        self._block_bases = {}
        self._lcp_matrices = {}
        self._zeros = np.zeros(0)

    def _block_basis(self, n: int) -> np.ndarray:
        """blockdiag(D(1) .. D(n)) (3n, n (n_f + 1)), cached per n."""
        D = self._block_bases.get(n)
        if D is None:
            D = self._block_bases[n] = np.kron(np.eye(n), self.basis)
        return D

    def _lcp_matrix(self, n: int) -> np.ndarray:
        """The constant part of the eq. 28 matrix for n contacts (E_hat, E_bar's -1 entries), cached per n."""
        M = self._lcp_matrices.get(n)
        if M is None:
            k = self.n_directions + 1
            M = np.zeros((n * k + n, n * k + n))
            rows = np.arange(n)
            for j in range(1, k):
                M[rows * k + j, n * k + rows] = 1.0
                M[n * k + rows, rows * k + j] = -1.0
            self._lcp_matrices[n] = M
        return M

    @staticmethod
    def _bilateral_only(nb, W_bb, c_b) -> ContactLCPSolution:
        lam = np.zeros(nb)
        if nb:
            try:
                lam = -scipy.linalg.cho_solve(scipy.linalg.cho_factor(W_bb), c_b)
            except np.linalg.LinAlgError:
                lam = -np.linalg.lstsq(W_bb, c_b, rcond=None)[0]
        return ContactLCPSolution(np.zeros((0, 3)), lam, np.zeros(0), LCPStatus.SOLVED, 0, "", 0.0)

    @staticmethod
    def _schur_factors(W_bb, Wub_D, c_b):
        """W_bb^-1 W_bu D and W_bb^-1 c_b (eq. 34: lam = -W_bb^-1 (W_bu D beta + c_b))."""
        try:
            factor = scipy.linalg.cho_factor(W_bb)
            return scipy.linalg.cho_solve(factor, Wub_D.T), scipy.linalg.cho_solve(factor, c_b)
        except np.linalg.LinAlgError:
            pinv = np.linalg.pinv(W_bb)
            return pinv @ Wub_D.T, pinv @ c_b

    def _finish(self, M, q, n, nb, S_Wbu=None, S_cb=None) -> ContactLCPSolution:
        """Lemke on the eq. 28 LCP (bilateral multipliers eliminated), then impulses and lam."""
        k = self.n_directions + 1
        result = self.lemke.solve(M, q)
        beta = result.z[:n * k].reshape(n, k)
        impulse = beta @ self.basis.T
        lam = np.zeros(nb)
        if nb:
            lam = -(S_Wbu @ result.z[:n * k] + S_cb)
        residual = result.complementarity_error if result.status.ok else np.inf
        return ContactLCPSolution(impulse, lam, result.z[n * k:].copy(), result.status, result.pivots,
                                  result.message, residual)

    @staticmethod
    def _fill_split_blocks(M, q, nk, nb, Bt, W_bb, c_b) -> None:
        """The bilateral blocks of eq. 34 as one LCP, lam = lam+ - lam- (z = [beta (nk), lam+, lam-, sigma]):
        rows/columns nk .. nk + 2 nb of M from Bt = D^T W_ub (nk, nb) and W_bb, and q's from c_b."""
        b0, b1, b2 = nk, nk + nb, nk + 2 * nb
        M[:nk, b0:b1], M[:nk, b1:b2] = Bt, -Bt
        M[b0:b1, :nk], M[b1:b2, :nk] = Bt.T, -Bt.T
        M[b0:b1, b0:b1], M[b0:b1, b1:b2] = W_bb, -W_bb
        M[b1:b2, b0:b1], M[b1:b2, b1:b2] = -W_bb, W_bb
        q[b0:b1], q[b1:b2] = c_b, -c_b

    def _finish_split(self, M, q, n, nb) -> ContactLCPSolution:
        nk = n * (self.n_directions + 1)
        b0, b1, b2 = nk, nk + nb, nk + 2 * nb
        result = self.lemke.solve(M, q)
        impulse = result.z[:nk].reshape(n, self.n_directions + 1) @ self.basis.T
        lam = result.z[b0:b1] - result.z[b1:b2]
        residual = result.complementarity_error if result.status.ok else np.inf
        return ContactLCPSolution(impulse, lam, result.z[b2:].copy(), result.status, result.pivots,
                                  result.message, residual)

    def solve(self, W_uu: np.ndarray, c_u: np.ndarray, mu: np.ndarray,
              W_ub: np.ndarray | None = None, W_bb: np.ndarray | None = None,
              c_b: np.ndarray | None = None) -> ContactLCPSolution:
        """Solve for impulses so that the post-impulse contact velocities are  u = W_uu p_u + W_ub lam + c_u
        (3n, contact frame) and the bilateral velocities  W_bu p_u + W_bb lam + c_b = 0.

        c_u: (3n,) contact velocities without contact impulses, with the normal-row gap term already added.
        mu:  (n,) friction coefficients.
        """
        n = mu.shape[0]
        nf = self.n_directions
        k = nf + 1
        nb = 0 if c_b is None else c_b.shape[0]
        if nb and self.bilateral_mode == "split":
            return self._solve_split(W_uu, c_u, mu, W_ub, W_bb, c_b)
        if n == 0:
            return self._bilateral_only(nb, W_bb, c_b)
        Dl = self.basis
        D = self._block_basis(n)                                     # blockdiag(D(1) .. D(n)), (3n, n k)
        A = D.T @ W_uu @ D                                           # D^T W D
        qb = (c_u.reshape(n, 3) @ Dl).reshape(n * k)                 # D^T c
        S_Wbu = S_cb = None
        if nb:
            # eliminate the free multipliers: lam = -W_bb^-1 (W_bu D beta + c_b)   (eq. 34, Schur complement)
            Wub_D = D.T @ W_ub
            S_Wbu, S_cb = self._schur_factors(W_bb, Wub_D, c_b)
            A = A - Wub_D @ S_Wbu
            qb = qb - Wub_D @ S_cb
        M = self._lcp_matrix(n).copy()   # E_hat: sigma in every friction row; E_bar: mu F_n - sum beta_j
        M[:n * k, :n * k] = A
        rows = np.arange(n)
        M[n * k + rows, rows * k] = mu
        q = np.zeros(n * k + n)
        q[:n * k] = qb
        return self._finish(M, q, n, nb, S_Wbu, S_cb)

    def solve_rows(self, W: np.ndarray, sel: np.ndarray, c_full: np.ndarray, mu_full: np.ndarray, nb: int = 0,
                   c_b: np.ndarray | None = None, normal_term: np.ndarray | None = None) -> ContactLCPSolution:
        """``solve`` for the contacts ``sel`` (int indices into the N contacts) of the full operational-space
        matrix W ((3N + nb)^2, the 3N contact-frame rows then the nb bilateral rows), the contact velocities
        c_full (3N,), friction mu_full (N,), the bilateral velocities c_b (nb,) and a normal-row term
        (len(sel),) added to the selected contacts' normal velocities."""
        n = sel.shape[0]
        nu3 = W.shape[0] - nb
        if self.kernel == "numpy" or n == 0:
            rows = (3 * sel[:, None] + np.arange(3)).ravel()
            c_u = c_full[rows].copy()
            if normal_term is not None:
                c_u[2::3] += normal_term
            if nb:
                brow = np.arange(nu3, nu3 + nb)
                return self.solve(W[np.ix_(rows, rows)], c_u, mu_full[sel], W[np.ix_(rows, brow)],
                                  W[np.ix_(brow, brow)], c_b)
            return self.solve(W[np.ix_(rows, rows)], c_u, mu_full[sel])
        k = self.n_directions + 1
        nk = n * k
        split = nb and self.bilateral_mode == "split"
        size = nk + n + (2 * nb if split else 0)
        M = np.empty((size, size))
        q = np.empty(size)
        Bt = np.empty((nk, nb))
        if normal_term is None:
            if self._zeros.shape[0] < n:
                self._zeros = np.zeros(n)
            normal_term = self._zeros
        contact_lcp_kernel(W, sel, c_full, normal_term, mu_full, self.basis, nu3, M, q, Bt)
        if split:
            self._fill_split_blocks(M, q, nk, nb, Bt, W[nu3:, nu3:], c_b)
            return self._finish_split(M, q, n, nb)
        S_Wbu = S_cb = None
        if nb:
            S_Wbu, S_cb = self._schur_factors(W[nu3:, nu3:], Bt, c_b)
            M[:nk, :nk] -= Bt @ S_Wbu
            q[:nk] -= Bt @ S_cb
        return self._finish(M, q, n, nb, S_Wbu, S_cb)

    def _solve_split(self, W_uu, c_u, mu, W_ub, W_bb, c_b) -> ContactLCPSolution:
        """The mixed LCP of eq. 34 as ONE standard LCP, the free multipliers split as lam = lam+ - lam-
        (rows w+ = r >= 0 _|_ lam+, w- = -r >= 0 _|_ lam-, so r = 0 at a solution): the single
        complementarity problem over all unilateral and bilateral constraints that a redundant-coordinate
        formulation hands to a complementarity solver (PATH in the paper). z = [beta, lam+, lam-, sigma]."""
        n = mu.shape[0]
        k = self.n_directions + 1
        nb = c_b.shape[0]
        Dl = self.basis
        nk = n * k
        size = nk + 2 * nb + n
        M = np.zeros((size, size))
        q = np.zeros(size)
        b0, b1, b2 = nk, nk + nb, nk + 2 * nb
        if n:
            D = self._block_basis(n)
            M[:nk, :nk] = D.T @ W_uu @ D
            q[:nk] = (c_u.reshape(n, 3) @ Dl).reshape(nk)
            Bt = D.T @ W_ub
            rows = np.arange(n)
            for j in range(1, k):
                M[rows * k + j, b2 + rows] = 1.0
                M[b2 + rows, rows * k + j] = -1.0
            M[b2 + rows, rows * k] = mu
        else:
            Bt = np.zeros((0, nb))
        self._fill_split_blocks(M, q, nk, nb, Bt, W_bb, c_b)
        return self._finish_split(M, q, n, nb)


@dataclass
class ImpulseStepOutput:
    v_next: np.ndarray          # (nv,) velocity at t + dt
    v_displacement: np.ndarray  # (nv,) integrate q with dt * v_displacement (= s v_1 + (1 - s) v_2)
    impulse: np.ndarray         # (N, 3) total contact impulse over the step (contact frame), N*s
    bilateral: np.ndarray       # (nb,) total bilateral impulse, N*s
    status: SolverStatus
    pivots: int
    residual: float
    message: str
    impact_fraction: float      # s in [0, 1] of the first in-step collision (1 if none)
    lcp_solves: int             # LCPs solved in the step (those with at least one unknown)


class ImpulseStepper:
    """The time step with collision handling of the module docstring, on operational-space data only.

    Independent of how M_hat^-1 J^T was obtained, so the engine (minimal coordinates) and the redundant-
    coordinate comparison of benchmarks/lcp use the same contact mathematics.
    """

    def __init__(self, n_directions=8, touch_distance=1e-4, impact_velocity=1e-2, erp=0.2, slop=1e-4,
                 max_pivots=None, bilateral="schur"):
        self.lcp = ContactLCP(n_directions, max_pivots=max_pivots, bilateral=bilateral)
        self._no_contacts = np.zeros((0, 3))     # shared empty results of contact-free steps (size 0: immutable)
        self._no_bilateral = np.zeros(0)
        self.touch_distance = touch_distance
        self.impact_velocity = impact_velocity
        self.erp = erp
        self.slop = slop

    def _gap_term(self, phi: np.ndarray, dt: float) -> np.ndarray:
        """Normal-row constant b (m/s): phi/dt if separated, erp (phi + slop)/dt (<= 0) in penetration."""
        return np.where(phi > 0.0, phi / dt, self.erp * np.minimum(phi + self.slop, 0.0) / dt)

    def _solve(self, W, sel, c_full, mu, nb, c_b, normal_term=None):
        """LCP over the contacts ``sel`` (indices) and all bilateral rows; returns a ContactLCPSolution.
        W is the operational-space matrix or a callable returning it (formed only when an LCP is needed)."""
        if sel.shape[0] == 0 and nb == 0:       # nothing selected: zero impulse, no LCP
            return ContactLCPSolution(np.zeros((0, 3)), np.zeros(0), np.zeros(0), LCPStatus.SOLVED, 0, "", 0.0)
        return self.lcp.solve_rows(W() if callable(W) else W, sel, c_full, mu, nb, c_b, normal_term)

    def step(self, dt, v, v_free, X, J, bias, phi, mu, restitution, Jb=None, b_bias=None, t=0.0):
        """One step.

        v, v_free:  (nv,) start and free end-of-step velocities.
        X:          (nv, 3N + nb) M_hat^-1 [J; Jb]^T, or a callable returning it: it is then called only when
                    an impulse has to be computed (not on steps whose contacts are all separated and stay so).
        J: (3N, nv) contact-frame Jacobian, bias (3N,).
        phi, mu, restitution: (N,).  Jb: (nb, nv) bilateral constraint Jacobian (Jb v = 0 wanted),
        b_bias: (nb,) m/s added to the bilateral rows (drift stabilisation, e.g. erp * C(q) / dt).
        """
        N = phi.shape[0]
        nb = 0 if Jb is None else Jb.shape[0]
        if N == 0 and nb == 0:      # nothing to solve: the free motion
            return ImpulseStepOutput(v_free, v_free, self._no_contacts, self._no_bilateral, SolverStatus.CONVERGED,
                                     0, 0.0, "", 1.0, 0)
        X_source = X if callable(X) else None

        def X_full():
            """M_hat^-1 [J; Jb]^T, formed at its first use in the step"""
            nonlocal X_source, X
            if X_source is not None:
                X, X_source = X_source(), None
            return X

        if N == 0:                  # bilateral rows only: the same (mixed) LCP solve, without contact logic
            X = X_full()
            c_b = Jb @ v_free + (0.0 if b_bias is None else b_bias)
            sol = self.lcp.solve(np.zeros((0, 0)), np.zeros(0), np.zeros(0), np.zeros((0, nb)), Jb @ X, c_b)
            if not sol.status.ok:
                status = (SolverStatus.MAX_ITERATIONS if sol.status is LCPStatus.MAX_PIVOTS
                          else SolverStatus.FAILED)
                return ImpulseStepOutput(v_free.copy(), v_free.copy(), np.zeros((0, 3)), np.zeros(nb), status,
                                         sol.pivots, np.inf, f"lcp_minimal: step LCP failed at t = {t:.6f} s: "
                                         f"{sol.message}", 1.0, 1)
            v1 = v_free + X @ sol.bilateral
            return ImpulseStepOutput(v1, v1, np.zeros((0, 3)), sol.bilateral, SolverStatus.CONVERGED, sol.pivots,
                                     sol.residual, "", 1.0, 1)
        touching = phi <= self.touch_distance
        if nb == 0 and not touching.any():
            # every contact separated: no LCP (zero impulse) unless a gap closes within the step; the same
            # arithmetic as the general path below with an empty contact selection
            v1 = v + (v_free - v)
            phi_end = phi + dt * (J @ v1 + bias)[2::3]
            if not np.any(phi_end < 0.0):
                return ImpulseStepOutput(v1, v1, np.zeros((N, 3)), self._no_bilateral, SolverStatus.CONVERGED, 0,
                                         0.0, "", 1.0, 0)
        W_cache = []

        def W():
            """eq. 6 (with the bilateral nodes appended, eq. 34), formed at the first LCP of the step"""
            if not W_cache:
                W_cache.append((J if nb == 0 else np.vstack([J, Jb])) @ X_full())
            return W_cache[0]

        total = np.zeros((N, 3))
        total_b = np.zeros(nb)
        pivots = 0
        solves = 0
        residual = 0.0

        def contact_velocity(u):
            return J @ u + bias

        def bil_velocity(u):
            return Jb @ u + (0.0 if b_bias is None else b_bias) if nb else None

        def solve(sel, u, gap_term=None):
            """The LCP at velocity u over the contacts sel and every bilateral row; counts it if it has unknowns."""
            nonlocal pivots, solves
            sol = self._solve(W, sel, contact_velocity(u), mu, nb, bil_velocity(u), gap_term)
            solves += int(sel.shape[0] > 0 or nb > 0)
            pivots += sol.pivots
            return sol

        def fail(sol, where):
            status = SolverStatus.MAX_ITERATIONS if sol.status is LCPStatus.MAX_PIVOTS else SolverStatus.FAILED
            msg = f"lcp_minimal: {where} LCP failed at t = {t:.6f} s: {sol.message}"
            return ImpulseStepOutput(v_free.copy(), v_free.copy(), np.zeros((N, 3)), np.zeros(nb), status,
                                     pivots, np.inf, msg, 1.0, solves)

        def apply(u, sol, sel):
            if sel.shape[0] == 0 and nb == 0:    # no impulse: u + X @ 0 = u exactly
                return u
            imp = np.zeros(3 * N + nb)
            imp[(3 * sel[:, None] + np.arange(3)).ravel()] = sol.impulse.ravel()
            if nb:
                imp[3 * N:] = sol.bilateral
            return u + X_full() @ imp

        def impact(u, sel):
            """Compression (eq. 36-37) then decompression (eqs. 38-40) at velocity u over contacts sel."""
            nonlocal residual, total_b
            sol = solve(sel, u)
            if not sol.status.ok:
                return None, sol
            residual = max(residual, sol.residual)
            u_c = apply(u, sol, sel)
            total[sel] += sol.impulse
            total_b = total_b + sol.bilateral
            e = restitution[sel]
            if np.any(e > 0.0):
                # recovered normal impulse theta = e * (normal compression impulse) along n (eq. 38)
                theta = np.zeros(3 * N + nb)
                theta[3 * sel + 2] = e * sol.impulse[:, 2]
                u_theta = X_full() @ theta
                sold = solve(sel, u_c + u_theta)         # velocity D^T v_c + D^T W theta  (eq. 39)
                if not sold.status.ok:
                    return None, sold
                residual = max(residual, sold.residual)
                u_c = apply(u_c + u_theta, sold, sel)    # eq. 40
                total[sel] += sold.impulse
                total[sel, 2] += theta[3 * sel + 2]
                total_b = total_b + sold.bilateral
            return u_c, sol

        vn0 = contact_velocity(v)[2::3]
        v_start = v
        dv_free = v_free - v
        # impacts of touching contacts at the start of the step
        hitting = touching & (vn0 < -self.impact_velocity) & (restitution > 0.0)
        if np.any(hitting):
            sel = np.flatnonzero(touching)
            v_start, sol = impact(v, sel)
            if v_start is None:
                return fail(sol, "impact")
        # the step LCP (eq. 28 / 34) over the touching contacts
        sel = np.flatnonzero(touching)
        u_free = v_start + dv_free
        sol = solve(sel, u_free, self._gap_term(phi[sel], dt) if sel.shape[0] else None)
        if not sol.status.ok:
            return fail(sol, "step")
        residual = max(residual, sol.residual)
        v1 = apply(u_free, sol, sel)
        # new collisions inside the step: first-order gap prediction with v1
        phi_end = phi + dt * contact_velocity(v1)[2::3]
        new = (~touching) & (phi_end < 0.0)
        if not np.any(new):
            total[sel] += sol.impulse
            total_b = total_b + sol.bilateral
            return ImpulseStepOutput(v1, v1, total, total_b, SolverStatus.CONVERGED, pivots, residual, "", 1.0,
                                     solves)
        s_all = phi[new] / (phi[new] - phi_end[new])
        s = float(np.min(s_all))
        total[sel] += s * sol.impulse
        total_b = total_b + s * sol.bilateral
        # state at the impact: positions advanced with v1 for s dt, velocity interpolated
        v_hit = v_start + s * (v1 - v_start)
        phi_hit = phi + s * dt * contact_velocity(v1)[2::3]
        active = phi_hit <= self.touch_distance
        sel = np.flatnonzero(active)
        v_post, sol = impact(v_hit, sel)
        if v_post is None:
            return fail(sol, "collision")
        rest = 1.0 - s
        if rest * dt <= 1e-12:
            return ImpulseStepOutput(v_post, s * v1, total, total_b, SolverStatus.CONVERGED, pivots, residual,
                                     "", s, solves)
        u_free = v_post + rest * dv_free
        sol = solve(sel, u_free, self._gap_term(phi_hit[sel], rest * dt))
        if not sol.status.ok:
            return fail(sol, "post-collision step")
        residual = max(residual, sol.residual)
        v2 = apply(u_free, sol, sel)
        total[sel] += sol.impulse
        total_b = total_b + sol.bilateral
        return ImpulseStepOutput(v2, s * v1 + rest * v2, total, total_b, SolverStatus.CONVERGED, pivots,
                                 residual, "", s, solves)


class ComplianceColumns:
    """X = M_hat^-1 J^T (nv x m) for M_hat = M + diag(armature_extra), by one of DELASSUS_METHODS.

    "aba": one articulated-body sweep per column on a zero-gravity, zero-velocity copy of the model whose
    armature holds the extra diagonal (aba(q, 0, tau) = M_hat^-1 tau): O(nv) per column, M^-1 never formed.
    "cholesky": Cholesky factorisation of M_hat (O(nv^3), works for mimic models).
    "minverse": pin.computeMinverse on the same model copy, then a dense product.
    """

    def __init__(self, pin_model: pin.Model, method: str, has_mimic: bool):
        if method not in DELASSUS_METHODS:
            raise ConfigError("lcp_minimal option delassus: " + f"unknown method {method!r}; valid methods: "
                              + ", ".join(DELASSUS_METHODS))
        if method == "auto":
            # computeMinverse (C++, O(nv^2), independent of the contact count) beats one aba sweep per contact
            # direction below ~256-512 dofs (benchmarks/lcp/run.py --sections lambda, 4 contacts)
            method = "cholesky" if has_mimic else ("minverse" if pin_model.nv <= AUTO_MINVERSE_MAX_NV else "aba")
        if has_mimic and method in ("aba", "minverse"):
            raise ConfigError(f"lcp_minimal option delassus={method!r}: the model has mimic joints, which "
                              "pin.aba / pin.computeMinverse refuse; use 'cholesky' or 'auto'")
        self.method = method
        if method != "cholesky":
            self.model = pin_model.copy()
            self.model.gravity = pin.Motion.Zero()
            self.base_armature = np.array(self.model.armature, dtype=float).copy()
            self.data = pin.Data(self.model)
            self.zero_v = np.zeros(self.model.nv)

    def compute(self, q, M, extra_diag, rhs_columns):
        """Return M_hat^-1 @ rhs_columns (nv x m)."""
        nv = M.shape[0]
        if self.method == "cholesky":
            Mh = M + np.diag(extra_diag)
            return scipy.linalg.cho_solve(scipy.linalg.cho_factor(Mh), rhs_columns)
        self.model.armature = self.base_armature + extra_diag
        if self.method == "minverse":
            Minv = pin.computeMinverse(self.model, self.data, q)
            Minv = np.triu(Minv) + np.triu(Minv, 1).T
            return Minv @ rhs_columns
        out = np.empty((nv, rhs_columns.shape[1]))
        for j in range(rhs_columns.shape[1]):
            out[:, j] = pin.aba(self.model, self.data, q, self.zero_v, rhs_columns[:, j])
        return out


@register_engine
class LCPMinimalEngine(ContactEngine):
    """Minimal-coordinate operational-space LCP (Jain et al. 2012), Lemke solver, restitution by
    compression/decompression LCPs. See the module docstring for the equations and the contact activation."""

    name = "lcp_minimal"
    description = "Minimal-coordinate operational-space LCP with polyhedral friction and restitution (Lemke)"
    kernel_modules = (lcp_kernels.__name__, lemke_kernels.__name__)
    warm_up_scenes = ("scenes/lcp_incline.yaml",)

    @dataclass
    class Options:
        friction_directions: int = 8      # n_f of eq. 14 (>= 3); cone error <= 1 - cos(pi / n_f)
        delassus: str = "auto"            # auto | aba | cholesky | minverse (auto: minverse for nv <= 256,
                                          # aba above, cholesky with mimics)
        touch_distance: float = 1e-4      # m: contacts with phi <= this are active in the step LCP
        impact_velocity: float = 1e-2     # m/s: touching contacts approaching faster get a restitution impact
        erp: float = 0.2                  # penetration correction per step (fraction of the depth)
        slop: float = 1e-4                # m: penetration tolerated without correction
        max_pivots: int = 0               # Lemke pivot limit (0: 50 (n + 1) for an LCP of size n)

        def __post_init__(self):
            if int(self.friction_directions) != self.friction_directions or self.friction_directions < 3:
                raise ConfigError(f"lcp_minimal option friction_directions must be an integer >= 3, got "
                                  f"{self.friction_directions!r}")
            if self.delassus not in DELASSUS_METHODS:
                raise ConfigError("lcp_minimal option delassus: " + f"unknown method {self.delassus!r}; "
                                  "valid methods: " + ", ".join(DELASSUS_METHODS))
            for key in ("touch_distance", "impact_velocity", "slop"):
                if not getattr(self, key) >= 0.0:
                    raise ConfigError(f"lcp_minimal option {key} must be >= 0, got {getattr(self, key)!r}")
            if not 0.0 <= self.erp <= 1.0:
                raise ConfigError(f"lcp_minimal option erp must be in [0, 1], got {self.erp!r}")
            if self.max_pivots < 0:
                raise ConfigError(f"lcp_minimal option max_pivots must be >= 0, got {self.max_pivots!r}")

    def __init__(self, model, options=None):
        super().__init__(model, options)
        o = self.options
        self.stepper = ImpulseStepper(int(o.friction_directions), o.touch_distance, o.impact_velocity, o.erp,
                                      o.slop, o.max_pivots or None)
        self.columns = ComplianceColumns(model.pin_model, o.delassus, bool(model.mimic_joints))

    def _do_step(self, inputs: StepInputs) -> StepResult:
        dt = inputs.dt
        v = inputs.v
        M = inputs.mass_matrix
        contacts = inputs.contacts
        N = contacts.size
        # implicit actuation / damping linearised at v (base.Actuation): tau(v+) = a - B_act v+
        tau0, dtau = inputs.actuation.force(v, dt)
        a = tau0 - dtau * v
        B = inputs.joint_damping - dtau
        extra = dt * B
        rhs = M @ v + dt * (inputs.generalized_force + a)
        cols = np.empty((M.shape[0], 3 * N + 1))
        cols[:, 0] = rhs
        cols[:, 1:] = contacts.jacobian.T
        sol = self.columns.compute(inputs.q, M, extra, cols)
        v_free = sol[:, 0]
        X = sol[:, 1:]
        out = self.stepper.step(dt, v, v_free, X, contacts.jacobian, contacts.velocity_bias,
                                contacts.signed_distance, contacts.friction, contacts.restitution, t=inputs.t)
        stats = SolverStats(status=out.status, iterations=out.pivots, residual=float(out.residual),
                            message=out.message)
        gen_contact = contacts.jacobian.T @ out.impulse.ravel() / dt if N else np.zeros_like(v)
        tau = a + dtau * out.v_next
        q_next = None
        if out.status.ok:
            q_next = pin.integrate(self.model.pin_model, inputs.q, dt * out.v_displacement)
        return StepResult(v_next=out.v_next, contact_impulse=out.impulse, generalized_contact_force=gen_contact,
                          actuation_force=tau, stats=stats, q_next=q_next)
