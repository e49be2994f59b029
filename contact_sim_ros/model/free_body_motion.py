"""Free-body time stepping in the body frame frozen at the start of the step (shared by every engine).

Pinocchio's free-flyer velocity (v_lin, w) is expressed in the body's LOCAL frame, so its equations of motion
carry the frame-rotation term M [w x v_lin; 0]. Two consequences for a time-stepping scheme (found on the
rolling sphere of the ICF paper, section XI-B):

* integrating that term explicitly gains energy by a factor sqrt(1 + (w dt)^2) per step;
* ``pin.integrate`` moves the origin on a screw (SE(3) exponential), which sinks a rolling body by
  r (1 - cos(w dt)) per step.

The scheme used instead (the papers' q = q0 + dt N(q0) v, TAMSI eq. 10 / ICF eq. 1): the step is solved in the
body frame frozen at q0, the frame of the frozen contact Jacobians, so the frame-rotation term is removed from
the explicit forces (``frame_rotation_force``, added by the simulator to ``StepInputs.generalized_force``); the
translation moves along dt R0 v_lin (a straight line), the rotation is R0 exp(dt w), and the linear velocity is
re-expressed in the new body frame, v_lin <- exp(dt w)^T v_lin (``integrate``). For force-free motion this is
exact (constant world velocity).

Cost: the simulator runs both operations inside its compiled step passes (sim/step_kernels.py, with the
functions below); ``integrate`` does the free-body part in one compiled call (``frozen_frame_update``, numba, ~1 us for
1-40 bodies instead of ~15 us of Pinocchio calls per body); ``integrate_reference`` is the same step with
Pinocchio's ``Quaternion.matrix`` and ``exp3`` (the readable reference, equal to round-off; compared in
test/test_simulator.py).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from .free_body_kernels import frame_rotation_velocity, frozen_frame_update
from .multibody_model import MultibodyModel

class FreeBodyMotion:
    """Index arrays of the free-flyer joints (free objects, floating bases) and the two operations of the
    frozen-frame scheme."""

    def __init__(self, model: MultibodyModel):
        pm = self.pin_model = model.pin_model
        free = [pm.joints[j] for j in range(1, pm.njoints) if pm.joints[j].shortname() == "JointModelFreeFlyer"]
        self.q_index = np.array([j.idx_q for j in free], dtype=int)
        self.v_index = np.array([j.idx_v for j in free], dtype=int)
        self._e = np.zeros(model.nv)

    def frame_rotation_force(self, mass_matrix: np.ndarray, v0: np.ndarray) -> np.ndarray:
        """M [w0 x v_lin0; 0] (N or N*m), to ADD to the explicit generalized forces: it cancels the
        frame-rotation term of Pinocchio's local-frame equations when the step is solved in the frozen frame."""
        e = self._e
        if self.v_index.size:
            frame_rotation_velocity(v0, self.v_index, e)
        return mass_matrix @ e

    def integrate(self, q0: np.ndarray, v: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """(q_next, v_next): ``pin.integrate`` for every joint except free-body translations, which move along
        dt R0 v_lin; free-body linear velocities are re-expressed in the body frame at q_next."""
        q = pin.integrate(self.pin_model, q0, dt * v)
        if not self.q_index.size:
            return q, v
        v_next = v.copy()
        frozen_frame_update(q0, v, float(dt), self.q_index, self.v_index, q, v_next)
        return q, v_next

    def integrate_reference(self, q0: np.ndarray, v: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """``integrate`` with Pinocchio's quaternion and exp3, one body at a time (the readable reference)."""
        q = pin.integrate(self.pin_model, q0, dt * v)
        if not self.q_index.size:
            return q, v
        v = v.copy()
        for iq, iv in zip(self.q_index.tolist(), self.v_index.tolist()):   # a few C++ calls per body
            R0 = pin.Quaternion(q0[iq + 3:iq + 7]).matrix()                 # (x, y, z, w) -> body to world
            v_lin = v[iv:iv + 3].copy()
            q[iq:iq + 3] = q0[iq:iq + 3] + dt * (R0 @ v_lin)
            v[iv:iv + 3] = pin.exp3(dt * v[iv + 3:iv + 6]).T @ v_lin
        return q, v
