"""Default PD gains for robot joints that have none (a bare URDF or xacro, or a preset that omits a joint).

Per actuated joint i, from the model at the initial configuration q0:

    M_ii  = diagonal of the joint-space inertia M(q0) (crba; includes the reflected rotor inertia ``armature``)
    kp    = M_ii * omega^2,  kd = 2 * M_ii * omega           (critically damped, omega = DEFAULT_BANDWIDTH)
    kp   <= effort_limit / MAX_POSITION_ERROR                 (URDF effort limit; no cap if the URDF has none)
    if kp was capped: omega_i = sqrt(kp / M_ii), kd = 2 * sqrt(kp * M_ii)   (still critically damped)

Why these numbers:

* ``DEFAULT_BANDWIDTH`` = 2*pi*10 rad/s (10 Hz) in joint space: a stiff position-controlled drive (an
  unloaded step settles in about 6 / omega ~ 0.1 s; on the shipped arms it gives gains of the same order as
  their hand-tuned presets: iiwa 3200 vs 2000 N*m/rad on the base joints, Panda 870 vs 600), and slow
  compared with the step rate: omega * dt = 0.063 at dt = 1 ms, so the implicit PD (engines/base.py
  ``Actuation``) is accurate, not only stable (it is unconditionally stable for any kp, kd >= 0:
  tau = kp (e - dt v_next) - kd v_next). The diagonal of M is the inertia each joint sees with the others
  held; the coupled closed loop M x'' + D x' + K x = 0 with diagonal K, D > 0 and M symmetric positive
  definite is asymptotically stable, only not exactly critically damped. Light fingers get soft gains
  (Allegro ~0.5-5 N*m/rad vs the preset's 3): give a hand its own ``gains``.
* ``MAX_POSITION_ERROR`` = 0.1 rad (revolute) / 0.01 m (prismatic): the PD may saturate at the effort limit
  only beyond this error, so a commanded step larger than it moves at the effort limit (what a real drive does)
  and a joint stays linear (predictable, no limit cycle) near its target. A stiffer gain would only saturate.
* Holding against gravity is the job of the gravity feed-forward (the node's ``gravity_compensation``,
  g(q) added to position-controlled joints, as the iiwa's and Panda's controllers do); without it the static
  error is g_i / kp_i, up to 0.1 rad on a joint whose gravity torque reaches its effort limit.

Mimic joints are not degrees of freedom and get no gains; free bodies are not actuated.
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

DEFAULT_BANDWIDTH = 2.0 * math.pi * 10.0    # rad/s
MAX_POSITION_ERROR = 0.1                    # rad (revolute joints)
MAX_POSITION_ERROR_PRISMATIC = 0.01         # m (prismatic joints)


def default_gains(model, q0: np.ndarray, joints=None, bandwidth: float = DEFAULT_BANDWIDTH) -> dict:
    """``{joint: (kp, kd)}`` for ``joints`` (default: every actuated joint of ``model``, a ``MultibodyModel``)
    at configuration ``q0``. Units N*m/rad and N*m*s/rad (N/m and N*s/m for prismatic joints)."""
    if joints is not None and not len(joints):
        return {}
    pm = model.pin_model
    data = pin.Data(pm)
    M = pin.crba(pm, data, np.asarray(q0, dtype=float), pin.Convention.WORLD)
    names = list(model.joint_names) if joints is None else list(joints)
    out = {}
    for name in names:
        i = model.joint_index(name)
        vi = model.joint_v_index[i]
        m_ii = float(M[vi, vi])
        if not (np.isfinite(m_ii) and m_ii > 0.0):
            m_ii = 1e-6
        kp = m_ii * bandwidth ** 2
        limit = float(model.effort_limit[i])
        if np.isfinite(limit) and limit > 0.0:
            kp = min(kp, limit / _max_error(pm, name))
        kd = 2.0 * math.sqrt(kp * m_ii)          # = 2 M_ii omega when not capped
        out[name] = (kp, kd)
    return out


def _max_error(pm, joint_name: str) -> float:
    shortname = pm.joints[pm.getJointId(joint_name)].shortname()
    return MAX_POSITION_ERROR_PRISMATIC if "Prismatic" in shortname else MAX_POSITION_ERROR


def describe_default_gains(gains: dict, robot_name: str = "the robot") -> str:
    """The start-up warning for joints that got default gains (empty string if none), e.g.

    ``ur5: no PD gains given for 6 joints; using defaults derived from the model (critically damped on the
    joint-space inertia at the initial configuration, 10 Hz, kp capped at effort limit / 0.1 rad):
    shoulder_pan_joint kp=... kd=..., ...; set them with a preset's or scene robot's 'gains' (docs/design.md)``
    """
    if not gains:
        return ""
    parts = ", ".join(f"{name} kp={kp:.4g} kd={kd:.4g}" for name, (kp, kd) in gains.items())
    n = len(gains)
    return (f"{robot_name}: no PD gains given for {n} joint{'s' if n != 1 else ''}; using defaults derived from "
            f"the model (critically damped on the joint-space inertia at the initial configuration, "
            f"{DEFAULT_BANDWIDTH / (2 * math.pi):g} Hz, kp capped at effort limit / {MAX_POSITION_ERROR:g} rad "
            f"or / {MAX_POSITION_ERROR_PRISMATIC:g} m): {parts}; set them with the robot's 'gains' "
            f"{{joint: {{kp, kd}}}} in a preset or scene (docs/design.md)")
