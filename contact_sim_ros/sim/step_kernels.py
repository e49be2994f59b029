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

``finish_step`` (after the engine), on q_next = pin.integrate(q0, dt v_next) and the engine's v_next (or, for a
model whose joints are all vector-space joints, revolute or prismatic, with q_next = q0 + dt v_next computed there:
what ``pin.integrate`` computes for them, without its call and the dt v_next array):

* the free bodies' frozen-frame update (``free_body_kernels.frozen_frame_update``) into q_next and v_out;
* finiteness of q_next and v_out;
* the divergence bounds (``divergence_kernels.bounds_exceeded``);
* the joint limits: limited joints clamped to [lower, upper], the velocity into the limit removed
  (``Simulator._enforce_joint_limits``), only when the state is accepted.

Both give the same numbers as the numpy code they replace (the same operations in the same order).
"""

from __future__ import annotations

import math

import numpy as np

from ..jit import njit
from ..model.free_body_kernels import frame_rotation_velocity, frozen_frame_update
from .divergence_kernels import bounds_exceeded

# rows of prepare_step's ``rows`` (N_ROWS, nv) block: the simulator's gains, the model's damping and friction, the
# scripted external force, and the step's outputs, as views (a compiled call costs ~0.1-0.2 us per argument); then
# the commands the engine reads (efforts, velocity targets, effort limits: prepare_step does not read them, the
# fused free-body step, sim/free_body_step.py, takes them with the block)
KP, KD, VISCOUS_DAMPING, JOINT_FRICTION, EXTERNAL, SCRATCH, TAU, KP_OUT, KD_OUT, ERROR_OUT, DAMPING_OUT = range(11)
EFFORT, V_TARGET, EFFORT_LIMIT = 11, 12, 13
N_ROWS = 14
# rows of the (2, nv) bool ``modes`` block
POSITION_MODE, VELOCITY_MODE = range(2)

# finish_step's ``integration``: how q_next was made
ENGINE_Q = 0         # the engine set q_next itself (quasistatic engines): no update
FROZEN_FRAME = 1     # q_next = pin.integrate(q0, dt v): the free bodies' frozen-frame update is applied
VECTOR_SPACE = 2     # every joint is a vector-space joint (nq = nv, no free body): q_next = q0 + dt v is computed here
# joint types whose pin.integrate is q + v (Pinocchio's VectorSpaceOperation)
VECTOR_SPACE_JOINTS = frozenset({"JointModelRX", "JointModelRY", "JointModelRZ", "JointModelRevoluteUnaligned",
                                 "JointModelPX", "JointModelPY", "JointModelPZ", "JointModelPrismaticUnaligned",
                                 "JointModelTranslation"})

# finish_step's result
OK = 0
NON_FINITE = 1
DIVERGED = 2        # a divergence bound may be exceeded: DivergenceCheck.check says which (or that none is)


@njit(cache=True, inline="always")
def prepare_step(M, v, nle, position_error, rows, modes, free_v, stiction_tolerance, tree_ptr):
    """In place: M symmetric and the rows TAU, KP_OUT, KD_OUT, ERROR_OUT, DAMPING_OUT of ``rows`` (see the module
    docstring) from its rows KP, KD, VISCOUS_DAMPING, JOINT_FRICTION, EXTERNAL and the ``modes``.
    ``position_error`` is pin.difference(q, q_target) (nv,); ``free_v`` the free-flyer joints' first velocity
    indices; ``stiction_tolerance`` <= 0: no Coulomb joint friction (DAMPING_OUT = VISCOUS_DAMPING); ``tree_ptr``
    the kinematic trees' velocity ranges (``divergence.tree_velocity_ranges``): M is zero between trees, so the
    mirror and M e run over the trees' diagonal blocks only (40 free bodies: 1.4k instead of 58k entries)."""
    kp, kd, joint_damping, joint_friction = rows[KP], rows[KD], rows[VISCOUS_DAMPING], rows[JOINT_FRICTION]
    external, e, tau = rows[EXTERNAL], rows[SCRATCH], rows[TAU]
    kp_out, kd_out, error_out, damping_out = rows[KP_OUT], rows[KD_OUT], rows[ERROR_OUT], rows[DAMPING_OUT]
    position_mode, velocity_mode = modes[POSITION_MODE], modes[VELOCITY_MODE]
    nv = v.shape[0]
    frame_rotation_velocity(v, free_v, e)
    for t in range(tree_ptr.shape[0] - 1):
        t0, t1 = tree_ptr[t], tree_ptr[t + 1]
        for a in range(t0 + 1, t1):
            for b in range(t0, a):
                M[a, b] = M[b, a]
        moving = False                       # e is zero on a tree without free bodies: M e = 0 there
        for b in range(t0, t1):
            if e[b] != 0.0:
                moving = True
                break
        for a in range(t0, t1):
            Me = 0.0
            if moving:
                for b in range(t0, t1):
                    Me += M[a, b] * e[b]
            tau[a] = (external[a] - nle[a]) + Me
    for a in range(nv):
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


def finish_arrays(free_q, free_v, divergence, limit_q, limit_v, lower, upper):
    """(index, values): finish_step's constant arrays packed in two (``divergence``: a DivergenceCheck's
    ``kernel_arrays`` (q_index, q_scale, v_index, v_scale, tree_ptr) or None: no divergence check)."""
    div_q, div_q_scale, div_v, div_v_scale, tree_ptr = divergence if divergence is not None else (
        np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64))
    header = [len(free_q), len(div_q), len(div_v), len(limit_q), int(divergence is not None), len(tree_ptr)]
    index = np.concatenate([np.array(header), free_q, free_v, div_q, div_v, limit_q, limit_v,
                            tree_ptr]).astype(np.int64)
    values = np.concatenate([div_q_scale, div_v_scale, lower, upper]).astype(float)
    return index, values


@njit(cache=True, inline="always")
def finish_step(q0, q, v, v_out, dt, integration, M, index, values):
    """The post-step pass of the module docstring, in place on q (the integrated configuration) and v_out (filled
    from the engine's v). ``integration``: FROZEN_FRAME (q = pin.integrate(q0, dt v): apply the free-body update),
    VECTOR_SPACE (q is filled here with q0 + dt v) or ENGINE_Q (the engine set q itself);
    ``index``, ``values``: the constant arrays of ``finish_arrays``. Returns OK (limits applied), NON_FINITE or
    DIVERGED (nothing clamped)."""
    nf, ndq, ndv, nl, check_divergence, ntp = index[0], index[1], index[2], index[3], index[4] != 0, index[5]
    at = 6
    free_q, free_v = index[at:at + nf], index[at + nf:at + 2 * nf]
    at += 2 * nf
    div_q, div_v = index[at:at + ndq], index[at + ndq:at + ndq + ndv]
    at += ndq + ndv
    limit_q, limit_v = index[at:at + nl], index[at + nl:at + 2 * nl]
    at += 2 * nl
    tree_ptr = index[at:at + ntp]
    div_q_scale, div_v_scale = values[:ndq], values[ndq:ndq + ndv]
    lower, upper = values[ndq + ndv:ndq + ndv + nl], values[ndq + ndv + nl:ndq + ndv + 2 * nl]
    nv = v.shape[0]
    for a in range(nv):
        v_out[a] = v[a]
    if integration == FROZEN_FRAME:
        frozen_frame_update(q0, v, dt, free_q, free_v, q, v_out)
    elif integration == VECTOR_SPACE:
        for a in range(q.shape[0]):
            q[a] = q0[a] + dt * v[a]
    for a in range(q.shape[0]):
        if not math.isfinite(q[a]):
            return NON_FINITE
    for a in range(nv):
        if not math.isfinite(v_out[a]):
            return NON_FINITE
    if check_divergence and bounds_exceeded(q, v_out, M, div_q, div_q_scale, div_v, div_v_scale, tree_ptr):
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


# joint_commands' result
COMMANDS_SET = 0
COMMAND_NOT_FINITE = 1      # a used value is nan or inf: nothing written
PURE_EFFORT = 2             # an effort alone for an engine that ignores efforts: nothing written


@njit(cache=True)
def joint_commands(position_mode, velocity_mode, positions, velocities, efforts, q_index, v_index, lower, upper,
                   passive_v, accepts_effort, q_target, v_target, effort, position_mode_out, velocity_mode_out):
    """``Simulator.set_joint_command_arrays`` in one compiled pass (it ran ~15 numpy calls every step of a moving
    robot), the same numbers: per actuated joint i (arrays in joint order), where ``position_mode[i]``,
    q_target[q_index[i]] = ``positions[i]`` clamped to [lower[i], upper[i]] (rad or m; np.maximum then np.minimum:
    a value equal to a bound keeps its own sign of zero), else q_target keeps its value; v_target[v_index[i]] =
    ``velocities[i]`` (rad/s or m/s) where position or velocity mode, else 0; effort[v_index[i]] = ``efforts[i]``
    (N m or N), then 0 at ``passive_v``; position_mode_out[v_index[i]] = position_mode[i],
    velocity_mode_out[v_index[i]] = velocity mode and not position mode. Checked first, nothing written unless
    COMMANDS_SET: COMMAND_NOT_FINITE (a used value: positions in position mode, velocities in either mode, every
    effort), PURE_EFFORT (neither mode on a joint and not ``accepts_effort``)."""
    n = positions.shape[0]
    for i in range(n):
        has_v = position_mode[i] or velocity_mode[i]
        if ((position_mode[i] and not math.isfinite(positions[i])) or (has_v and not math.isfinite(velocities[i]))
                or not math.isfinite(efforts[i])):
            return COMMAND_NOT_FINITE
    if not accepts_effort:
        for i in range(n):
            if not (position_mode[i] or velocity_mode[i]):
                return PURE_EFFORT
    for i in range(n):
        qi, vi = q_index[i], v_index[i]
        if position_mode[i]:
            p = positions[i]
            if p < lower[i]:          # np.maximum(p, lower): p unless p < lower (finite values)
                p = lower[i]
            if p > upper[i]:          # np.minimum(p, upper): p unless p > upper
                p = upper[i]
            q_target[qi] = p
            v_target[vi] = velocities[i]
        elif velocity_mode[i]:
            v_target[vi] = velocities[i]
        else:
            v_target[vi] = 0.0
        effort[vi] = efforts[i]
        position_mode_out[vi] = position_mode[i]
        velocity_mode_out[vi] = velocity_mode[i] and not position_mode[i]
    for k in range(passive_v.shape[0]):
        effort[passive_v[k]] = 0.0
    return COMMANDS_SET
