"""The stages of one (sub-)step attempt as functions of (model, data, parts, ...) (issue 45 item 1), called in order by
``Simulator._advance`` as MuJoCo's mj_fwdPosition / mj_fwdVelocity / ... are by mj_step, so that a whole-step kernel
can replace them one at a time:

    [joint_scripts, surface_velocities] -> kinematics -> contacts -> dynamics -> external_forces -> actuation
    -> solve -> integrate

(the scene's inputs in brackets, as MuJoCo's control callback: only when the scene has them)

``model`` is the SimModel (sim/sim_model.py: constants), ``data`` the SimData (sim/sim_data.py: the arrays written in
place), ``parts`` the StepParts below: the objects a stage calls (Pinocchio's model and data, the contact query, the
engine, the compiled dynamics, the checks), fixed for the Simulator's life. The state of the attempt (q, v, t, dt)
and what a stage hands to the next (the contact set, M, nle, g, the position error, the engine's result) are
arguments and return values. The arithmetic is the one ``Simulator._advance`` did inline before (bit-identical:
benchmarks/peers/step_hashes.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..errors import ConfigError
from ..engines.base import SolverStats, SolverStatus, StepInputs, StepResult
from . import step_kernels


@dataclass(frozen=True, eq=False)
class StepParts:
    """The objects the stages call, fixed for a Simulator's life."""

    pin_model: object          # pinocchio.Model
    pin_data: object           # pinocchio.Data (the Simulator's: kinematics of the state being stepped)
    engine: object             # engines/base.ContactEngine
    contact_query: object      # geometry/contact_query.ContactQuery
    actuation: object          # engines/base.Actuation over the data's command and output rows
    free_bodies: object        # sim/free_body_step.FreeBodies of a model of free bodies only, else None
    rigid: object              # the compiled Pinocchio calls (rigid_body_dynamics.cpp), else None
    penetration: object        # sim/penetration.PenetrationCheck or None (off)
    divergence: object         # sim/divergence.DivergenceCheck or None (off)
    external_forces: tuple = ()  # the scene's scripted wrenches (sim/scene.py), model.wrench_targets' order
    joint_scripts: tuple = ()    # the scene's scripted joint commands, model.script_index's order
    surface_velocities: tuple = ()  # the scene's moving surfaces: (geometry index, f(t) -> (3,) m/s world)


def kinematics(model, data, parts, q, v) -> None:
    """Joint placements, velocities and Jacobians of (q, v) into ``parts.pin_data`` (what the contact query and the
    external forces of the next stages read; frame and geometry placements are left to whoever reads them)."""
    if parts.rigid is not None:
        parts.rigid.kinematics(q, v)                      # the two calls below, compiled
    else:
        pin.forwardKinematics(parts.pin_model, parts.pin_data, q, v)
        pin.computeJointJacobians(parts.pin_model, parts.pin_data)


def contacts(model, data, parts, q, v, t, dt, surface_velocity):
    """The contact query at the kinematics of q: (ContactSet, "" or the deep-interpenetration message that fails the
    attempt; ``v``, ``dt``: the approach the penetration bound allows)."""
    # pin_data.J holds the joint Jacobians of q (kinematics): the query does not compute them again
    found = parts.contact_query.update(parts.pin_data, None, surface_velocity, joint_jacobians=True, q=q)
    if parts.penetration is not None and found.size:
        deep = parts.penetration.check(found, t, v, dt)
        if deep:
            return found, deep
    return found, ""


def dynamics(model, data, parts, q, v):
    """(M, nle, g or None, position error): M(q) (upper triangle at least), C(q, v) v + g(q), g(q) when the engine
    uses it, pin.difference(q, q_target), into the data's buffers where the compiled dynamics writes them."""
    bodies = parts.free_bodies
    if bodies is not None:
        # free bodies only (sim/free_body_step.FreeBodies): M constant in their local velocities, nle and g(q)
        # in compiled passes; no actuated joint, so no position error
        nle, gravity = bodies.bias_forces(q, v)
        return bodies.mass_matrix, nle, gravity, bodies.zero_velocity
    if parts.rigid is not None:           # the same calls as below, compiled (rigid_body_dynamics.cpp)
        gravity = data.gravity if model.uses_gravity_force else None
        parts.rigid.dynamics(q, v, data.q_target, data.position_error, gravity is not None)
        return data.mass_matrix, data.nle, gravity, data.position_error
    pm, pd = parts.pin_model, parts.pin_data
    # WORLD convention: Pinocchio 4.1's default (LOCAL) crba keeps stale data.Fcrb on models where a mimic
    # joint carries actuated children below an actuated ancestor (BarrettHand on its lift rig: M[lift, F2]
    # drifted by up to 1.1 between calls); WORLD is exact there and costs the same (docs/robots.md)
    M = pin.crba(pm, pd, q, pin.Convention.WORLD)               # upper triangle; actuation mirrors it
    nle = pin.nonLinearEffects(pm, pd, q, v)
    gravity = pin.computeGeneralizedGravity(pm, pd, q) if model.uses_gravity_force else None
    return M, nle, gravity, pin.difference(pm, q, data.q_target)


def joint_scripts(model, data, parts, t_end) -> None:
    """The scene's scripted joint commands at ``t_end`` (s) into the data's targets and modes: per script exactly
    ``Simulator.set_joint_targets`` with that joint's position / velocity / effort (the same validation, clamping
    and modes). ConfigError for a non-finite command."""
    for s, (qi, vi, lo, hi) in zip(parts.joint_scripts, model.script_index):
        p = s.position(t_end) if s.position else None
        vel = s.velocity(t_end) if s.velocity else None
        eff = s.effort(t_end) if s.effort else None
        if p is None and vel is None and eff is None:
            continue
        for value, kind in ((p, "position"), (vel, "velocity"), (eff, "effort")):
            if value is not None and not math.isfinite(value):
                raise ConfigError(f"joint {s.joint!r}: {kind} command must be finite, got {value!r}")
        if p is not None:
            p = float(p)
            if p < lo or p > hi:
                p = min(max(p, lo), hi)
            data.q_target[qi] = p
        data.v_target[vi] = float(vel) if vel is not None else 0.0
        data.effort[vi] = float(eff) if eff is not None else 0.0
        data.position_mode[vi] = p is not None
        data.velocity_mode[vi] = vel is not None and p is None


def surface_velocities(model, data, parts, t) -> np.ndarray:
    """data.surface_velocity (G, 3) m/s, world frame, per collision geometry: the scene's moving surfaces at t."""
    out = data.surface_velocity
    for g, f in parts.surface_velocities:
        out[g] = f(t)
    return out


def external_forces(model, data, parts, t) -> None:
    """data.external = the generalized force (N or N*m) of the scene's scripted wrenches at t: J^T [f; m] with J the
    world-aligned Jacobian of the body's frame, at the joint placements of ``parts.pin_data`` (kinematics). On a
    free body whose frame is its joint frame that is (R^T f, R^T m) on its six velocities (body-frame free-flyer
    velocities), applied without the Jacobian (model.wrench_targets, data.wrench_views)."""
    tau = data.external
    tau.fill(0.0)
    pd = parts.pin_data
    for f, target, view in zip(parts.external_forces, model.wrench_targets, data.wrench_views):
        if target >= 0 and f.wrench is not None:
            R = pd.oMi[f.joint_id].rotation
            if view is None:            # several wrenches on this body: they add up
                tau[target:target + 6] += (f.wrench(t).reshape(2, 3) @ R).reshape(6)
            else:
                np.dot(f.wrench(t).reshape(2, 3), R, out=view)      # rows R^T f, R^T m
        else:
            J = pin.getFrameJacobian(parts.pin_model, pd, f.frame_id, pin.LOCAL_WORLD_ALIGNED)
            wrench = scripted_wrench(f, t)
            if J.ndim == 2:        # J^T [f; m] into a preallocated buffer (the same product as J.T @ w)
                tau += np.matmul(J.T, wrench, out=data.wrench_force)
            else:
                tau += J * wrench


def scripted_wrench(f, t) -> np.ndarray:
    """The scene's scripted wrench ``f`` (sim/scene.py) at t (s): [force (N), torque (N*m)], world-aligned (6,)."""
    return f.wrench(t) if f.wrench is not None else np.concatenate([f.force(t), f.torque(t)])

def actuation(model, data, parts, M, v, nle, position_error) -> None:
    """One compiled pass (sim/step_kernels.prepare_step): M symmetric; data.tau = external - nle + the
    frame-rotation force of the free bodies stepped in their body frame frozen at q (model/free_body_motion.py);
    the actuation's kp / kd / position error by the joints' modes; data.damping = the joint damping with the lagged
    Coulomb friction. Then the default servo's friction and damping feed-forward (position mode only) into the
    actuation's effort."""
    d = data
    step_kernels.prepare_step(M, v, nle, position_error, d.rows, d.modes, model.free_v_index,
                              model.friction_tolerance, model.tree_ptr)
    if model.has_feed_forward:
        ff, fc = d.ff, d.ff_scratch
        np.multiply(d.v_target, d.position_mode, out=ff)                # v_t (rad/s or m/s)
        np.abs(ff, out=fc)
        np.maximum(fc, model.joint_stiction_tolerance, out=fc)
        np.divide(ff, fc, out=fc)
        np.multiply(d.ff_friction, fc, out=fc)                          # Fc v_t / max(|v_t|, v_s)
        np.multiply(d.ff_damping, ff, out=ff)                           # d v_t
        np.add(fc, ff, out=ff)
        np.add(d.effort, ff, out=parts.actuation.effort)


def solve(model, data, parts, t, dt, q, v, M, gravity, found, last_result) -> StepResult:
    """The engine's step into the ResultSlot that ``last_result`` does not hold (an engine that fills none returns a
    new StepResult)."""
    inputs = StepInputs(t, dt, q, v, M, data.tau, gravity, data.damping, parts.actuation, found)
    slots = data.slots
    return parts.engine.step_into(inputs, slots[1] if last_result is slots[0].result else slots[0])


def integrate(model, data, parts, q, result, M, t, dt):
    """One compiled pass (sim/step_kernels.finish_step): the integration (vector-space models) or the free-body
    frozen-frame update, finiteness, divergence bounds, joint limits. Sets result.v_next to the new velocity and
    returns q_next, or None with the result's status and message saying why the state is refused."""
    pm = parts.pin_model
    bodies = parts.free_bodies
    if result.q_next is not None:          # quasistatic engines update q themselves
        integration, q_next = step_kernels.ENGINE_Q, result.q_next
    elif model.vector_space:
        integration, q_next = step_kernels.VECTOR_SPACE, np.empty(model.nq)
    elif bodies is not None:               # the quaternions here, the translations in finish_step
        integration, q_next = step_kernels.FROZEN_FRAME, bodies.integrate_rotations(q, result.v_next, dt)
    elif parts.rigid is not None:
        integration, q_next = step_kernels.FROZEN_FRAME, np.empty(model.nq)
        parts.rigid.integrate(q, result.v_next, dt, q_next)        # pin.integrate(pm, q, dt * v_next)
    else:
        integration, q_next = step_kernels.FROZEN_FRAME, pin.integrate(pm, q, dt * result.v_next)
    v_next = np.empty(model.nv)
    code = step_kernels.finish_step(q, q_next, result.v_next, v_next, dt, integration, M, model.finish_index,
                                    data.finish_values)
    result.v_next = v_next
    if code == step_kernels.NON_FINITE:
        result.stats.message = "non-finite state"
        return None
    if code == step_kernels.DIVERGED:
        diverged = parts.divergence.check(q_next, v_next, M, t + dt)
        if diverged:
            result.stats.status, result.stats.message = SolverStatus.FAILED, diverged
            return None
        enforce_joint_limits(model, q_next, v_next)      # within the bounds after all (rare)
    return q_next


def deep_penetration_result(model, v, n_contacts: int, message: str) -> StepResult:
    """The failed result of an attempt whose start state is too deeply interpenetrated (no engine call)."""
    return StepResult(v, np.zeros((n_contacts, 3)), np.zeros(model.nv), np.zeros(model.nv),
                      SolverStats(SolverStatus.FAILED, 0, 0.0, 0.0, message))


def enforce_joint_limits(model, q, v) -> None:
    """Clamp limited joints to [lower, upper] and remove the velocity component into the limit (a perfectly
    inelastic joint stop), in place."""
    if not model.any_limited:
        return
    qi, vi = model.joint_q_index, model.joint_v_index
    pos = q[qi]
    low = pos < model.position_lower
    high = pos > model.position_upper
    if low.any() or high.any():
        q[qi] = np.clip(pos, model.position_lower, model.position_upper)
        vel = v[vi]
        v[vi] = np.where(low, np.maximum(vel, 0.0), np.where(high, np.minimum(vel, 0.0), vel))
