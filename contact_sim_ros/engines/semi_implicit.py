"""Reference engine: implicit-velocity (semi-implicit) Euler with compliant Hunt & Crossley contact.

The simplest engine that is stable for stiff contact and regularized friction: Newton iterations with an
Armijo backtracking line search on |r|^2 for the momentum balance of a symplectic-Euler step,

    r(v) = M (v - v0) - dt [tau_free + tau_act(v) - D v + J^T f(v)] = 0,

linearized about the start-of-step velocity v0, with

* normal force (Hunt & Crossley) f_n = k x (1 + d xdot)_+ with the penetration predicted at the end of the step,
  x = (-phi0 - dt v_n)_+, xdot = -v_n  (k N/m, d s/m);
* regularized Coulomb friction f_t = -mu f_n v_t / sqrt(|v_t|^2 + v_s^2) (v_s = ``stiction_tolerance`` m/s).

Configurations are frozen at the start of the step (M, J at q0); q_next = q0 (+) dt v. It is a baseline for the
conformance suite and the simulator tests, not a paper engine: plain residual backtracking can need many
iterations at stick-slip transitions, which TAMSI's transition-aware line search avoids.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import ContactEngine, SolverStats, SolverStatus, StepInputs, StepResult
from .registry import register_engine


@register_engine
class SemiImplicitEngine(ContactEngine):
    name = "semi_implicit"
    description = "reference: implicit-velocity Euler, compliant Hunt & Crossley contact, Newton + backtracking"

    @dataclass
    class Options:
        stiction_tolerance: float = 1.0e-4   # m/s, v_s of the regularized friction
        velocity_tolerance: float = 1.0e-8   # m/s or rad/s: converged when the Newton update is below it
        max_iterations: int = 50
        max_backtracks: int = 20

        def __post_init__(self):
            if not self.stiction_tolerance > 0:
                raise ValueError(f"stiction_tolerance must be > 0 m/s, got {self.stiction_tolerance!r}")
            if not self.velocity_tolerance > 0 or self.max_iterations < 1:
                raise ValueError("velocity_tolerance must be > 0 and max_iterations >= 1")

    def _residual(self, v, inputs: StepInputs):
        """r(v) (N*s) and its Jacobian d r / d v (kg) at end-of-step velocity v; also contact forces."""
        dt, c = inputs.dt, inputs.contacts
        tau_act, dtau_act = inputs.actuation.force(v, dt)
        damping = inputs.joint_damping
        force_sum = inputs.generalized_force + tau_act - damping * v
        jac = inputs.mass_matrix - dt * np.diag(dtau_act - damping)
        force = None
        if c.size:
            vc = (c.jacobian @ v + c.velocity_bias).reshape(c.size, 3)
            force, dforce = self._contact_force(vc, c, dt)
            force_sum = force_sum + c.jacobian.T @ force.reshape(-1)
            # J^T blockdiag(d f / d v_c) J, one 3x3 block per contact
            GJ = np.einsum("nij,njk->nik", dforce, c.jacobian.reshape(c.size, 3, -1)).reshape(3 * c.size, -1)
            jac = jac - dt * (c.jacobian.T @ GJ)
        residual = inputs.mass_matrix @ (v - inputs.v) - dt * force_sum
        return residual, jac, force, tau_act

    def _do_step(self, inputs: StepInputs) -> StepResult:
        opts = self.options
        v = inputs.v.copy()
        residual, jac, force, tau_act = self._residual(v, inputs)
        merit = residual @ residual
        converged = False
        for iteration in range(1, opts.max_iterations + 1):
            try:
                dv = -np.linalg.solve(jac, residual)
            except np.linalg.LinAlgError as exc:
                return self._failure(inputs, tau_act, iteration, f"singular Newton matrix: {exc}")
            alpha = 1.0
            for _ in range(opts.max_backtracks):        # Armijo backtracking on |r|^2
                trial = v + alpha * dv
                r_trial, jac_trial, f_trial, tau_trial = self._residual(trial, inputs)
                m_trial = r_trial @ r_trial
                if m_trial <= (1.0 - 1e-4 * alpha) * merit:
                    break
                alpha *= 0.5
            v, residual, jac, force, tau_act, merit = trial, r_trial, jac_trial, f_trial, tau_trial, m_trial
            if np.max(np.abs(alpha * dv)) <= opts.velocity_tolerance:
                converged = True
                break
        if not converged:
            return self._failure(inputs, tau_act, opts.max_iterations,
                                 f"Newton did not converge in {opts.max_iterations} iterations "
                                 f"(|r| = {np.sqrt(merit):.3g} N*s)")
        c = inputs.contacts
        impulse = inputs.dt * force if c.size else np.zeros((0, 3))
        generalized = c.jacobian.T @ force.reshape(-1) if c.size else np.zeros_like(v)
        return StepResult(v, impulse, generalized, tau_act,
                          SolverStats(SolverStatus.CONVERGED, iteration, float(np.sqrt(merit))))

    def _failure(self, inputs, tau_act, iterations, message) -> StepResult:
        return StepResult(inputs.v.copy(), np.zeros((inputs.contacts.size, 3)), np.zeros_like(inputs.v), tau_act,
                          SolverStats(SolverStatus.MAX_ITERATIONS, iterations, np.inf, 0.0, message))

    def _contact_force(self, vc: np.ndarray, c, dt: float):
        """Force (n,3) in contact frames at contact velocities vc and its Jacobian d f / d vc (n,3,3)."""
        vs = self.options.stiction_tolerance
        vn = vc[:, 2]
        x = -c.signed_distance - dt * vn                  # predicted penetration (m)
        in_contact = x > 0
        damp = 1.0 - c.dissipation * vn                   # 1 + d * xdot, xdot = -vn
        active = in_contact & (damp > 0)
        fn = np.where(active, c.stiffness * x * damp, 0.0)
        # d fn / d vn = k [(-dt) damp + x (-d)]
        dfn = np.where(active, c.stiffness * (-dt * damp - x * c.dissipation), 0.0)
        vt = vc[:, :2]
        s = np.sqrt(np.einsum("ni,ni->n", vt, vt) + vs * vs)
        mu_over_s = c.friction / s
        ft = -(mu_over_s * fn)[:, None] * vt
        force = np.column_stack([ft, fn])
        d = np.zeros((vc.shape[0], 3, 3))
        # d ft / d vt = -mu fn (I/s - vt vt^T / s^3)
        eye = np.eye(2)
        d[:, :2, :2] = -(mu_over_s * fn)[:, None, None] * (eye - np.einsum("ni,nj->nij", vt, vt) / (s * s)[:, None, None])
        d[:, :2, 2] = -(mu_over_s * dfn)[:, None] * vt
        d[:, 2, 2] = dfn
        return force, d

