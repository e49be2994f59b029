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
functions below); ``integrate`` does the free-body part in one compiled call (``_frozen_frame_update``, numba, ~1 us for
1-40 bodies instead of ~15 us of Pinocchio calls per body); ``integrate_reference`` is the same step with
Pinocchio's ``Quaternion.matrix`` and ``exp3`` (the readable reference, equal to round-off; compared in
test/test_simulator.py).
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
from ..jit import njit

from .multibody_model import MultibodyModel

# |dt w| (rad) below which exp3 uses its Taylor expansions (Pinocchio's TaylorSeriesExpansion precision<3>)
_TAYLOR_ANGLE = float(np.finfo(float).eps) ** (1.0 / 3.0)


@njit(cache=True)
def _frozen_frame_update(q0, v, dt, q_index, v_index, q, v_next):
    """Free bodies of the frozen-frame step (see the module docstring), in place on q / v_next (copies of the
    ``pin.integrate`` result / of v): per body, with R0 the rotation of the unit quaternion (x, y, z, w) at
    q0[iq+3:iq+7] and phi = dt w (rad),
        q[iq:iq+3]       = q0[iq:iq+3] + dt R0 v_lin                  (m)
        v_next[iv:iv+3]  = exp(phi)^T v_lin = c v + a (v x phi) + b (phi.v) phi   (m/s)
    with c = cos|phi|, a = sin|phi| / |phi|, b = (1 - cos|phi|) / |phi|^2 (Taylor series for small |phi|)."""
    for body in range(q_index.shape[0]):
        iq, iv = q_index[body], v_index[body]
        x, y, z, w = q0[iq + 3], q0[iq + 4], q0[iq + 5], q0[iq + 6]
        tx, ty, tz = 2.0 * x, 2.0 * y, 2.0 * z               # Eigen's toRotationMatrix
        twx, twy, twz = tx * w, ty * w, tz * w
        txx, txy, txz = tx * x, ty * x, tz * x
        tyy, tyz, tzz = ty * y, tz * y, tz * z
        vx, vy, vz = v[iv], v[iv + 1], v[iv + 2]
        q[iq] = q0[iq] + dt * ((1.0 - (tyy + tzz)) * vx + (txy - twz) * vy + (txz + twy) * vz)
        q[iq + 1] = q0[iq + 1] + dt * ((txy + twz) * vx + (1.0 - (txx + tzz)) * vy + (tyz - twx) * vz)
        q[iq + 2] = q0[iq + 2] + dt * ((txz - twy) * vx + (tyz + twx) * vy + (1.0 - (txx + tyy)) * vz)
        px, py, pz = dt * v[iv + 3], dt * v[iv + 4], dt * v[iv + 5]
        angle2 = px * px + py * py + pz * pz
        angle = math.sqrt(angle2)
        if angle < _TAYLOR_ANGLE:
            c, a, b = 1.0 - angle2 / 2.0, 1.0 - angle2 / 6.0, 0.5 - angle2 / 24.0
        else:
            c, a, b = math.cos(angle), math.sin(angle) / angle, (1.0 - math.cos(angle)) / angle2
        pv = px * vx + py * vy + pz * vz
        v_next[iv] = c * vx + a * (vy * pz - vz * py) + b * pv * px
        v_next[iv + 1] = c * vy + a * (vz * px - vx * pz) + b * pv * py
        v_next[iv + 2] = c * vz + a * (vx * py - vy * px) + b * pv * pz


@njit(cache=True)
def frame_rotation_velocity(v0, v_index, e):
    """e = [w0 x v_lin0; 0] per free body (zeros elsewhere), in place on e (nv,): the velocity that M e, the
    frame-rotation force, is computed from (``FreeBodyMotion.frame_rotation_force``, sim/step_kernels.py)."""
    e[:] = 0.0
    for body in range(v_index.shape[0]):
        iv = v_index[body]
        vx, vy, vz, wx, wy, wz = v0[iv], v0[iv + 1], v0[iv + 2], v0[iv + 3], v0[iv + 4], v0[iv + 5]
        e[iv] = wy * vz - wz * vy
        e[iv + 1] = wz * vx - wx * vz
        e[iv + 2] = wx * vy - wy * vx


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
        _frozen_frame_update(q0, v, float(dt), self.q_index, self.v_index, q, v_next)
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
