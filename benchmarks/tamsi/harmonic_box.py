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


def simulate_engine(engine, dt: float, duration: float, stop_on_failure: bool = True):
    """Step the engine from rest for `duration` s with step dt (s).

    Returns (t (K+1,), v (K+1,), iterations (K,), statuses (K,) list, first failure time or None).
    The applied force is evaluated at the start of each step (semi-implicit Euler, p* = M v0 + h f(t0)).
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
    for i in range(steps):
        inputs = StepInputs(t=t[i], dt=dt, q=np.zeros(1), v=v[i:i + 1].copy(), mass_matrix=M,
                            generalized_force=np.array([harmonic_force(t[i])]), gravity_force=zero,
                            joint_damping=zero, actuation=act, contacts=contact)
        result = engine.step(inputs)
        iterations[i] = result.stats.iterations
        statuses.append(result.stats.status)
        if not result.stats.status.ok and failure is None:
            failure = t[i]
            if stop_on_failure:
                return t[:i + 1], v[:i + 1], iterations[:i + 1], statuses, failure
        v[i + 1] = result.v_next[0]
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
