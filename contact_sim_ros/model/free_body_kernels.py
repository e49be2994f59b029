"""The compiled kernels of the free bodies' frozen-frame motion (``free_body_motion.py``): the update of q and v
from the step's velocity, and the frame-rotation velocity. Only the jit decorator, numpy and math here (the kernel
modules' layer)."""

from __future__ import annotations

import math

import numpy as np

from ..jit import njit

# |dt w| (rad) below which exp3 uses its Taylor expansions (Pinocchio's TaylorSeriesExpansion precision<3>)
_TAYLOR_ANGLE = float(np.finfo(float).eps) ** (1.0 / 3.0)


@njit(cache=True)
def frozen_frame_update(q0, v, dt, q_index, v_index, q, v_next):
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
