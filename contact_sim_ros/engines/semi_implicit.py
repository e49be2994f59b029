"""Reference engine: linearly-implicit (semi-implicit) Euler with compliant Hunt & Crossley contact.

The simplest engine that is stable for stiff contact: ONE Newton step (no line search) on the momentum
balance of a symplectic-Euler step,

    r(v) = M (v - v0) - dt [tau_free + tau_act(v) - D v + J^T f(v)] = 0,

linearized about the start-of-step velocity v0, with

* normal force (Hunt & Crossley) f_n = k x (1 + d xdot)_+ with the penetration predicted at the end of the step,
  x = (-phi0 - dt v_n)_+, xdot = -v_n  (k N/m, d s/m);
* regularized Coulomb friction f_t = -mu f_n v_t / sqrt(|v_t|^2 + v_s^2) (v_s = ``stiction_tolerance`` m/s).

It is a baseline for the conformance suite and the simulator tests, not a paper engine: at stick-slip
transitions the single linearization lags by one step (see TAMSI for the converged, transition-aware scheme).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import ContactEngine, SolverStats, SolverStatus, StepInputs, StepResult
from .registry import register_engine


@register_engine
class SemiImplicitEngine(ContactEngine):
    name = "semi_implicit"
    description = "reference: linearly-implicit Euler, compliant Hunt & Crossley contact, one Newton step"

    @dataclass
    class Options:
        stiction_tolerance: float = 1.0e-4   # m/s, v_s of the regularized friction

        def __post_init__(self):
            if not self.stiction_tolerance > 0:
                raise ValueError(f"stiction_tolerance must be > 0 m/s, got {self.stiction_tolerance!r}")

    def _do_step(self, inputs: StepInputs) -> StepResult:
        dt, v0, M = inputs.dt, inputs.v, inputs.mass_matrix
        c = inputs.contacts
        tau_act, dtau_act = inputs.actuation.force(v0, dt)
        damping = inputs.joint_damping
        residual_force = inputs.generalized_force + tau_act - damping * v0      # forces at v0 (no contact)
        A = M - dt * np.diag(dtau_act - damping)                                 # d r / d v without contact

        n = c.size
        impulse = np.zeros((n, 3))
        if n:
            J = c.jacobian
            vc = (J @ v0 + c.velocity_bias).reshape(n, 3)
            force, dforce = self._contact_force(vc, c, dt)                        # (n,3), (n,3,3)
            residual_force = residual_force + J.T @ force.reshape(-1)
            # J^T blockdiag(d f / d v_c) J, one 3x3 block per contact
            GJ = np.einsum("nij,njk->nik", dforce, J.reshape(n, 3, -1)).reshape(3 * n, -1)
            A = A - dt * (J.T @ GJ)
        try:
            dv = np.linalg.solve(A, dt * residual_force)
        except np.linalg.LinAlgError as exc:
            return StepResult(v0.copy(), impulse, np.zeros_like(v0), tau_act,
                              SolverStats(SolverStatus.FAILED, 1, np.inf, 0.0, f"singular system: {exc}"))
        v = v0 + dv
        tau_act_next, _ = inputs.actuation.force(v, dt)
        if n:
            # impulses consistent with the linearization (what the velocity update used)
            vc1 = (c.jacobian @ v + c.velocity_bias).reshape(n, 3)
            impulse = dt * (force + np.einsum("nij,nj->ni", dforce, vc1 - vc))
            impulse[:, 2] = np.maximum(impulse[:, 2], 0.0)
        generalized = c.jacobian.T @ impulse.reshape(-1) / dt if n else np.zeros_like(v0)
        return StepResult(v, impulse, generalized, tau_act_next, SolverStats(SolverStatus.CONVERGED, 1, 0.0))

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

