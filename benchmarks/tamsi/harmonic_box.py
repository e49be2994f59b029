"""The box under a harmonic force of the TAMSI paper, section IV-A (shared by the test and the benchmark).

A box of mass m = 0.33 kg on a horizontal surface with friction mu = 1 is pushed by f(t) = 4 N sin(2 pi t);
the problem is 1-D: m dv/dt = f(t) - mu~(v) W sgn(v), W = m g (g = 9.8 m/s^2), mu~ of eq. (7) with
v_s = 1e-4 m/s. Here it is one prismatic dof (M = m) with one contact whose Jacobian maps v to the t1
component of the contact velocity; the normal force pi = W comes from a penetration delta0 = W / k that the
normal velocity (identically 0) never changes, so one- and two-way coupling agree exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from contact_sim_ros.engines.base import Actuation, StepInputs
from contact_sim_ros.geometry.contact_set import ContactSet
from contact_sim_ros.model.multibody_model import MultibodyModel

MASS = 0.33          # kg
MU = 1.0
GRAVITY = 9.8        # m/s^2
WEIGHT = MASS * GRAVITY
FORCE_AMPLITUDE = 4.0  # N
FREQUENCY = 1.0      # Hz
STIFFNESS = 1.0e5    # N/m (any value: delta0 = W / k)
V_STICTION = 1.0e-4  # m/s


def prismatic_box_model(mass: float = MASS) -> MultibodyModel:
    """A MultibodyModel with one unactuated prismatic-x dof of the given mass (kg) and no geometry."""
    model = pin.Model()
    joint = model.addJoint(0, pin.JointModelPX(), pin.SE3.Identity(), "box_x")
    model.appendBodyToJoint(joint, pin.Inertia(mass, np.zeros(3), np.eye(3) * 1e-3), pin.SE3.Identity())
    geom = pin.GeometryModel()
    e = np.zeros(0)
    return MultibodyModel(
        pin_model=model, collision_model=geom, source="<harmonic box>", joint_names=(),
        joint_q_index=np.zeros(0, int), joint_v_index=np.zeros(0, int), position_lower=e, position_upper=e,
        velocity_limit=e, effort_limit=e, mimic_joints=(), joint_damping=np.zeros(1), joint_friction=np.zeros(1),
        actuated=np.zeros(1, bool), free_bodies=(), tree_velocity_slices=(slice(0, 1),), geometry_names=(),
        geometry_parent_joint=np.zeros(0, int), geometry_stiffness=e, geometry_dissipation=e,
        geometry_friction=e, geometry_restitution=e, collision_pairs=np.zeros((0, 2), int),
        gravity=np.array([0.0, 0.0, -GRAVITY]))


def box_contact(stiffness: float = STIFFNESS, dissipation: float = 0.0, mu: float = MU) -> ContactSet:
    """The one contact (ground A, box B): t1 = x, normal +z; penetration W / k so that pi = W."""
    return ContactSet(
        geometry_a=np.array([0]), geometry_b=np.array([1]), joint_a=np.array([0]), joint_b=np.array([1]),
        point=np.zeros((1, 3)), normal=np.array([[0.0, 0.0, 1.0]]),
        signed_distance=np.array([-WEIGHT / stiffness]), rotation=np.eye(3)[None].copy(),
        jacobian=np.array([[1.0], [0.0], [0.0]]), velocity_bias=np.zeros(3),
        stiffness=np.array([stiffness]), dissipation=np.array([dissipation]), friction=np.array([mu]),
        restitution=np.zeros(1))


def harmonic_force(t):
    """f(t) = 4 N sin(2 pi t)."""
    return FORCE_AMPLITUDE * np.sin(2.0 * np.pi * FREQUENCY * t)


def simulate_engine(engine, dt: float, duration: float, stop_on_failure: bool = True,
                    max_substep_levels: int = 0):
    """Step the engine from rest for `duration` s with step dt (s).

    The applied force is evaluated at the start of each (sub-)step (semi-implicit Euler, p* = M v0 + h f(t0)).
    With max_substep_levels > 0 a failed step is retried as 2, 4, ... sub-steps (as the Simulator does,
    "convergence control"); iterations then count every attempt.
    Returns (t (K+1,), v (K+1,), iterations (K,), statuses (K,) list, first failure time or None).
    """
    steps = int(round(duration / dt))
    contact = box_contact()
    M = np.array([[MASS]])
    zero = np.zeros(1)
    act = Actuation.zeros(1)
    t = np.arange(steps + 1) * dt
    v = np.zeros(steps + 1)
    iterations = np.zeros(steps, int)
    statuses = []
    failure = None

    def attempt(t0, v0, h, n):
        its = 0
        for j in range(n):
            tj = t0 + j * h
            inputs = StepInputs(t=tj, dt=h, q=np.zeros(1), v=np.array([v0]), mass_matrix=M,
                                generalized_force=np.array([harmonic_force(tj)]), gravity_force=zero,
                                joint_damping=zero, actuation=act, contacts=contact)
            result = engine.step(inputs)
            its += result.stats.iterations
            if not result.stats.status.ok:
                return None, its, result.stats.status
            v0 = result.v_next[0]
        return v0, its, result.stats.status

    for i in range(steps):
        for level in range(max_substep_levels + 1):
            n = 2 ** level
            v_next, its, status = attempt(t[i], v[i], dt / n, n)
            iterations[i] += its
            if v_next is not None:
                break
            if failure is None:
                failure = t[i]
        statuses.append(status)
        if v_next is None:
            if stop_on_failure:
                return t[:i + 1], v[:i + 1], iterations[:i + 1], statuses, failure
            v_next = float(engine._v[0])     # keep going from the last (unconverged) iterate
        v[i + 1] = v_next
    return t, v, iterations, statuses, failure


def regularized_mu(v, mu: float = MU, vs: float = V_STICTION):
    """mu~(|v|/v_s) of eq. (7)."""
    return mu * min(abs(v) / vs, 1.0)


def reference_solution(duration: float, sample_dt: float, h: float = 2.0e-6):
    """Fine-step explicit integration (Heun, RK2) of m dv/dt = f(t) - mu~(v) W sgn(v), from rest.

    h must be below the friction time scale m v_s / (mu W) ~ 1e-5 s for stability. Returns the velocity (m/s)
    sampled every sample_dt (s) from t = 0 to duration.
    """
    per_sample = int(round(sample_dt / h))
    samples = int(round(duration / sample_dt))
    k_stick = MU * WEIGHT / V_STICTION / MASS
    mu_w_over_m = MU * WEIGHT / MASS
    omega = 2.0 * math.pi * FREQUENCY
    a_f = FORCE_AMPLITUDE / MASS
    sin = math.sin
    out = np.zeros(samples + 1)
    v = 0.0
    t = 0.0

    def accel(tt, vv):
        if vv > V_STICTION:
            fr = mu_w_over_m
        elif vv < -V_STICTION:
            fr = -mu_w_over_m
        else:
            fr = k_stick * vv
        return a_f * sin(omega * tt) - fr

    for s in range(samples):
        for _ in range(per_sample):
            k1 = accel(t, v)
            k2 = accel(t + h, v + h * k1)
            v += 0.5 * h * (k1 + k2)
            t += h
        out[s + 1] = v
    return out
