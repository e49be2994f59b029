"""The simulator's bookkeeping around the engine call as two compiled passes (numba, cached with the engines'
kernels: contact_sim_ros/jit.py), instead of ~30 numpy calls on arrays of a few to a few dozen entries
(``Simulator._advance``; issue 18, item 3: box TAMSI step 84 -> ~55 us CPU).

``prepare_step`` (before the engine), with M from ``pin.crba`` (upper triangle) and the step's
nonLinearEffects:

* M's lower triangle mirrored from its upper one (kg, kg m, kg m^2);
* the explicit generalized force tau = external - nle + M [w0 x v_lin0; 0] (N or N m): the frame-rotation
  force of the free bodies' frozen-frame step (model/free_body_motion.py);
* the actuation of the step (engines/base.py ``Actuation``): kp and kd of the joints in position mode, kd of the
  joints in velocity mode, zero elsewhere; the position error only for joints in position mode;
* the implicit joint damping d = d_viscous + F_c / max(|v0|, v_s) (N m s/rad or N s/m; ``Simulator._joint_damping``
  explains the lagged Coulomb friction).

``finish_step`` (after the engine), on q_next = pin.integrate(q0, dt v_next) and the engine's v_next:

* the free bodies' frozen-frame update (``free_body_motion._frozen_frame_update``) into q_next and v_out;
* finiteness of q_next and v_out;
* the divergence bounds (``divergence.bounds_exceeded``);
* the joint limits: limited joints clamped to [lower, upper], the velocity into the limit removed
  (``Simulator._enforce_joint_limits``), only when the state is accepted.

Both give the same numbers as the numpy code they replace (the same operations in the same order).
"""

from __future__ import annotations

import math

import numpy as np

from ..jit import njit
from ..model.free_body_motion import _frozen_frame_update, frame_rotation_velocity
from .divergence import bounds_exceeded

# finish_step's result
OK = 0
NON_FINITE = 1
DIVERGED = 2        # a divergence bound may be exceeded: DivergenceCheck.check says which (or that none is)


@njit(cache=True)
def prepare_step(M, v, nle, external, free_v, e, kp, kd, position_mode, velocity_mode, position_error,
                 joint_damping, joint_friction, stiction_tolerance, tau, kp_out, kd_out, error_out, damping_out):
    """In place: M symmetric, tau, the actuation rows kp_out, kd_out, error_out and damping_out (see the module
    docstring). ``position_error`` is pin.difference(q, q_target) (nv,); ``e`` (nv,) scratch;
    ``stiction_tolerance`` <= 0: no Coulomb joint friction (damping_out = joint_damping)."""
    nv = v.shape[0]
    for a in range(1, nv):
        for b in range(a):
            M[a, b] = M[b, a]
    frame_rotation_velocity(v, free_v, e)
    Me = np.dot(M, e)
    for a in range(nv):
        tau[a] = (external[a] - nle[a]) + Me[a]
        if position_mode[a]:
            kp_out[a] = kp[a]
            kd_out[a] = kd[a]
            error_out[a] = position_error[a]
        else:
            kp_out[a] = 0.0
            kd_out[a] = kd[a] if velocity_mode[a] else 0.0
            error_out[a] = 0.0
        if stiction_tolerance > 0.0:
            damping_out[a] = joint_friction[a] / max(abs(v[a]), stiction_tolerance) + joint_damping[a]
        else:
            damping_out[a] = joint_damping[a]


@njit(cache=True)
def finish_step(q0, q, v, v_out, dt, frozen_frame, free_q, free_v, M, check_divergence, div_q, div_q_scale,
                div_v, div_v_scale, limit_q, limit_v, lower, upper):
    """The post-step pass of the module docstring, in place on q (the integrated configuration) and v_out (filled
    from the engine's v). ``frozen_frame``: apply the free-body update (False when the engine set q itself).
    Returns OK (limits applied), NON_FINITE or DIVERGED (nothing clamped)."""
    nv = v.shape[0]
    for a in range(nv):
        v_out[a] = v[a]
    if frozen_frame:
        _frozen_frame_update(q0, v, dt, free_q, free_v, q, v_out)
    for a in range(q.shape[0]):
        if not math.isfinite(q[a]):
            return NON_FINITE
    for a in range(nv):
        if not math.isfinite(v_out[a]):
            return NON_FINITE
    if check_divergence and bounds_exceeded(q, v_out, M, div_q, div_q_scale, div_v, div_v_scale):
        return DIVERGED
    for i in range(limit_q.shape[0]):
        iq, iv = limit_q[i], limit_v[i]
        if q[iq] < lower[i]:
            q[iq] = lower[i]
            v_out[iv] = max(v_out[iv], 0.0)
        elif q[iq] > upper[i]:
            q[iq] = upper[i]
            v_out[iv] = min(v_out[iv], 0.0)
    return OK
