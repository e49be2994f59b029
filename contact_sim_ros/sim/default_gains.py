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

Which joints are driven (``drive_plan``): a robot that declares its drives - a ``<ros2_control>`` joint with a
command interface or a ``<transmission>`` in its URDF (``RobotPreset.driven_joints``), a preset's ``gains``, the
scene's ``inputs.joint_targets`` - drives exactly those joints; its other joints are passive (no PD, no effort:
a caster, a free hinge, a prismatic slide move freely). A robot that declares none (a bare URDF) keeps a drive with
these default gains on every joint, and the Simulator, ``contact-sim run`` and the node say so
(``describe_default_gains``). The scene key ``passive_joints`` (node parameter ``passive_joints``) names joints
left passive whatever the robot declares. Joints of free objects (a URDF object with a hinge) count as one more
robot that declares nothing.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

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


class DefaultGainsWarning(UserWarning):
    """The Simulator gave joints default PD gains (``describe_default_gains``): filter it with
    ``warnings.simplefilter('ignore', DefaultGainsWarning)`` once you know."""


@dataclass(frozen=True)
class DrivePlan:
    """Which joints of a scene get a drive (module docstring)."""

    given: dict              # joint -> (kp, kd) from the robots' gains
    defaults: tuple          # driven joints without gains: they get ``default_gains``
    passive: tuple           # joints without a drive (no PD, efforts ignored)
    declaring: tuple         # names of the robots that declare their drives (the others: every joint driven)


def drive_plan(scene) -> DrivePlan:
    """The drive of every actuated joint of ``scene`` (a ``Scene``), in model order (module docstring)."""
    m = scene.model
    scripted = {s.joint for s in scene.joint_scripts}
    named_passive = set(scene.passive_joints)
    groups, owned = [], set()
    for r in scene.robots:
        inst = next((i for i in m.robots if i.name == r.name), None)
        joints = list(inst.joint_names) if inst is not None else [j for j in m.joint_names if j in r.gains]
        owned.update(joints)
        groups.append((r.name, joints, dict(r.gains), set(r.driven_joints)))
    others = [j for j in m.joint_names if j not in owned]      # joints of free objects
    if others:
        groups.append((None, others, {}, set()))
    given, defaults, passive, declaring = {}, [], [], []
    for name, joints, gains, driven in groups:
        declared = (set(gains) | driven | scripted) & set(joints)
        if declared and name is not None:
            declaring.append(name)
        for j in joints:
            if j in named_passive or (declared and j not in declared):
                passive.append(j)
            elif j in gains:
                given[j] = gains[j]
            else:
                defaults.append(j)
    order = {j: k for k, j in enumerate(m.joint_names)}
    return DrivePlan(given, tuple(sorted(defaults, key=order.get)), tuple(sorted(passive, key=order.get)),
                     tuple(declaring))


def warn_default_gains(gains: dict, robot_name: str = "the robot", passive=()) -> None:
    """``describe_default_gains`` as a ``DefaultGainsWarning`` (the Python API's way of saying it)."""
    text = describe_default_gains(gains, robot_name, passive)
    if text:
        warnings.warn(text, DefaultGainsWarning, stacklevel=3)


def _max_error(pm, joint_name: str) -> float:
    shortname = pm.joints[pm.getJointId(joint_name)].shortname()
    # axis-aligned prismatic joints are JointModelPX / PY / PZ, the others JointModelPrismaticUnaligned
    prismatic = shortname in ("JointModelPX", "JointModelPY", "JointModelPZ") or "Prismatic" in shortname
    return MAX_POSITION_ERROR_PRISMATIC if prismatic else MAX_POSITION_ERROR


def describe_default_gains(gains: dict, robot_name: str = "the robot", passive=()) -> str:
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
            f"{{joint: {{kp, kd}}}} in a preset or scene (docs/design.md). A joint without a drive (a free hinge or "
            f"slide): name it in the scene's 'passive_joints: [...]' (node parameter passive_joints), or declare the "
            f"driven joints in the URDF (<ros2_control> command interfaces or <transmission>s): the others stay "
            f"passive" + (f". Passive (no drive): {', '.join(passive)}" if passive else ""))


def describe_passive_joints(passive) -> str:
    """The start-up note for joints left without a drive (empty string if none)."""
    if not passive:
        return ""
    return (f"passive joints (no drive: no PD, efforts ignored; the robot declares drives for its other joints, "
            f"or they are named in passive_joints): {', '.join(passive)}")
