"""Default position servo for robot joints that have no gains (a bare URDF or xacro, or a preset that omits a joint).

What a real position-controlled drive does (a KUKA LBR's FRI position interface, an FR3's joint-position interface,
an industrial servo): it tracks to well under 1 mrad because its loop is stiff against the joint's own damping and
friction and it compensates that friction. The default servo does the same with the URDF's numbers. Per actuated
joint i, from the model at the initial configuration q0:

    m     = M_ii(q0), the diagonal of the joint-space inertia (crba; includes the reflected rotor inertia ``armature``)
    d, Fc = the URDF's <dynamics damping friction> (N*m*s/rad, N*m), which the simulator applies to the joint
    kp    = w * max(m w, d - m w)                      the closed loop m s^2 + (kd + d) s + kp has a real pole at -w:
    kd    = max(2 sqrt(kp m) - d, 0)                     critically damped (kp = m w^2, kd = 2 m w - d) while d < 2 m w;
                                                         overdamped by d alone above it, slow pole at -w (kd = 0)
    kp   >= Fc / FRICTION_BAND                          Coulomb friction holds a P servo at most Fc / kp off (0.2 mrad)
    kp   <= effort_limit / MAX_POSITION_ERROR            (URDF effort limit; no cap without one)
    tau_ff = Fc v_t / max(|v_t|, v_s) + d v_t           friction and damping feed-forward at the velocity target v_t
                                                         (``default_feed_forward``; what Fc and d take at v_t)

Why these numbers:

* ``DEFAULT_BANDWIDTH`` w = 2*pi*30 rad/s (30 Hz). The PD is implicit (engines/base.py ``Actuation``:
  tau = kp (e - dt v_next) - kd v_next; the joint damping and the friction's regularized damping are implicit too),
  so it is stable for any gains; what limits w is accuracy: a real pole -w steps as 1 / (1 + w dt) instead of
  exp(-w dt), at w dt = 0.19 (dt = 1 ms) 0.841 against 0.828, a time constant 9 % longer than designed. Above
  dt = 1.06 ms w is lowered to MAX_BANDWIDTH_STEPS / dt (w dt = 0.2; ``bandwidth_for``). 30 Hz is also below the
  Nyquist rate of a controller manager at 100 Hz (the LBR stack's file), whose position commands are a staircase.
  The old 10 Hz (w dt = 0.063) left every joint whose URDF damping or friction matters far off.
* q0, not the current pose: the gains are fixed, as a commissioned drive's are (a real joint's inertia is dominated
  by its rotor's reflected inertia, which does not change with the pose); at a pose where M_ii is larger the loop is
  slower and less damped (zeta = sqrt(M_ii(q0) / M_ii(q)) on an inertia-dominated joint), still stable.
* Damping: lbr_description gives every LBR joint d = 10 N*m*s/rad and Fc = 0.1 N*m; its A7 has m ~ 3e-4 kg m^2.
  10 Hz critical damping on m gave kp = 1.18 N*m/rad: with d = 10 the error decayed with d / kp = 8.5 s and friction
  held it up to Fc / kp = 85 mrad (measured: 169.6 mrad off when the JTC reported SUCCEEDED, 10.9 s after a 3.5 s
  goal). Now kp = w (d - m w) = 1874 N*m/rad (slow pole 30 Hz; cap 200 N*m / 0.1 rad = 2000, which A1-A4 reach):
  0.33 mrad.
* Friction and the cap: the FR3 (franka_description: Fc = 0.2 N*m, damping 0.003, effort 87 / 12 N*m) has m from
  0.002 (joint 7, with the hand) to 1.6 kg m^2: joints 1-4 are capped at 870 N*m/rad, joints 5-7 at 120 N*m/rad,
  where Fc / kp = 1.7 mrad (joint 7 ended 24.7 mrad off at 10 Hz: kp 7.9 N*m/rad, Fc / kp = 25 mrad). The friction
  floor may put a light joint above w (joint 7: kp 120 on m 0.002, 39 Hz, w dt = 0.25). The friction and damping
  feed-forward at the velocity target (the JTC writes its interpolated velocity with each position) removes the
  lag they cause while the joint moves, so that it arrives with little to settle (FR3 0.74 mrad; 1.55 mrad
  without it); at rest it is zero (v_t = 0), so it cannot hunt, and the joint friction's regularization (the
  simulator's ``joint_stiction_tolerance`` v_s) lets the P servo creep the rest of the band away (time constant
  Fc / (v_s kp), 1.7 s on the FR3's wrist). A command without velocities (a forward position controller, a step)
  gets no feed-forward: a capped joint may then stop up to Fc / kp short (FR3 wrist 1.7 mrad) and creep from there.
  Integral action was tried and dropped: against the regularized friction (a damping of Fc / v_s = 200-500
  N*m*s/rad at rest) the PI loop hunts, a +-0.8 mrad oscillation of ~5 s period that decays over tens of seconds.
* ``MAX_POSITION_ERROR`` = 0.1 rad (revolute) / 0.01 m (prismatic): the PD may saturate at the effort limit only
  beyond this error, so a commanded step larger than it moves at the effort limit (what a real drive does) and a
  joint stays linear near its target. Light fingers hit the cap (the Allegro's bare URDF, 0.7 N*m per joint: kp
  7 N*m/rad on every joint, the friction floor 0.005 / 2e-4 = 25 capped; the preset's hand-tuned gains are 3);
  the presets give their own gains (and so get neither defaults nor the feed-forward): give a hand its ``gains``.
* Holding against gravity is the job of the gravity feed-forward (the node's ``gravity_compensation``,
  g(q) added to position-controlled joints, as the iiwa's and Panda's controllers do); without it the static
  error is g_i / kp_i, up to 0.1 rad on a joint whose gravity torque reaches its effort limit.

Measured (test/test_vendor_tracking.py: a MoveIt-like 3.5 s goal through a via point, every joint 0.5-0.9 rad,
the vendor's controllers file, TAMSI at 1 ms; the final error when the JTC reports SUCCEEDED, max over joints):
LBR iiwa 7 169.6 -> 0.33 mrad, FR3 (position file) 24.7 -> 0.74 mrad, UR5 (example-robot-data, the UR driver's
file) 0.38 -> 0.38 mrad, the iiwa_wsg and franka presets 0.69 and 0.65 mrad (unchanged: their own gains).

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

DEFAULT_BANDWIDTH = 2.0 * math.pi * 30.0    # rad/s (30 Hz)
MAX_BANDWIDTH_STEPS = 0.2                   # omega * dt at most: the implicit step's pole within 10 % (docstring)
MAX_POSITION_ERROR = 0.1                    # rad (revolute joints)
MAX_POSITION_ERROR_PRISMATIC = 0.01         # m (prismatic joints)
FRICTION_BAND = 2e-4                        # rad or m: kp >= F_c / FRICTION_BAND where the cap allows


def bandwidth_for(time_step: float | None, bandwidth: float = DEFAULT_BANDWIDTH) -> float:
    """The servo bandwidth (rad/s) at the simulator's ``time_step`` (s): ``bandwidth``, lowered to
    MAX_BANDWIDTH_STEPS / time_step for steps longer than 1.06 ms (module docstring)."""
    if time_step is None or not time_step > 0:
        return bandwidth
    return min(bandwidth, MAX_BANDWIDTH_STEPS / time_step)


def servo_gains(m_ii: float, damping: float, friction: float, effort_limit: float, max_error: float,
                omega: float) -> tuple[float, float]:
    """(kp, kd) of one joint's position servo (module docstring): inertia ``m_ii`` (kg m^2 or kg), the URDF's
    viscous ``damping`` (N*m*s/rad or N*s/m) and Coulomb ``friction`` (N*m or N), the ``effort_limit`` (inf: none)
    and the error at which the servo may saturate, ``max_error`` (rad or m), at bandwidth ``omega`` (rad/s)."""
    if not (np.isfinite(m_ii) and m_ii > 0.0):
        m_ii = 1e-6
    damping = max(float(damping), 0.0) if np.isfinite(damping) else 0.0
    friction = max(float(friction), 0.0) if np.isfinite(friction) else 0.0
    # a real pole at -omega: critically damped (kp = m w^2, kd = 2 m w - d) while the URDF's damping d is below
    # 2 m w; above it the plant is overdamped and kp = w (d - m w) puts its slow pole at -w (kd = 0)
    kp = omega * max(m_ii * omega, damping - m_ii * omega)
    kp = max(kp, friction / FRICTION_BAND)                     # Coulomb friction holds it at most F_c / kp off
    if np.isfinite(effort_limit) and effort_limit > 0.0:
        kp = min(kp, effort_limit / max_error)
    kd = max(2.0 * math.sqrt(kp * m_ii) - damping, 0.0)      # total damping kd + d >= critical on m_ii
    return kp, kd


def default_gains(model, q0: np.ndarray, joints=None, bandwidth: float = DEFAULT_BANDWIDTH,
                  time_step: float | None = None) -> dict:
    """``{joint: (kp, kd)}`` for ``joints`` (default: every actuated joint of ``model``, a ``MultibodyModel``)
    at configuration ``q0``, for a simulator stepping at ``time_step`` (s; None: ``bandwidth`` as given). Units
    N*m/rad and N*m*s/rad (N/m and N*s/m for prismatic joints)."""
    if joints is not None and not len(joints):
        return {}
    pm = model.pin_model
    data = pin.Data(pm)
    M = pin.crba(pm, data, np.asarray(q0, dtype=float), pin.Convention.WORLD)
    omega = bandwidth_for(time_step, bandwidth)
    names = list(model.joint_names) if joints is None else list(joints)
    out = {}
    for name in names:
        i = model.joint_index(name)
        vi = model.joint_v_index[i]
        out[name] = servo_gains(float(M[vi, vi]), float(model.joint_damping[vi]), float(model.joint_friction[vi]),
                                float(model.effort_limit[i]), _max_error(pm, name), omega)
    return out


def default_feed_forward(model, gains: dict) -> dict:
    """``{joint: (friction, damping)}`` of the friction and damping feed-forward for the joints of ``gains``
    (``default_gains``' result) whose URDF gives friction Fc (N*m or N) or damping d (N*m*s/rad or N*s/m): the
    Simulator adds Fc v_t / max(|v_t|, v_s) + d v_t to a joint in position mode at its velocity target v_t, the
    torque the joint's friction and damping take at that velocity (v_s: the joint friction's stiction tolerance)."""
    out = {}
    for name in gains:
        vi = model.joint_v_index[model.joint_index(name)]
        friction, damping = float(model.joint_friction[vi]), float(model.joint_damping[vi])
        friction = friction if np.isfinite(friction) and friction > 0.0 else 0.0
        damping = damping if np.isfinite(damping) and damping > 0.0 else 0.0
        if friction or damping:
            out[name] = (friction, damping)
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


def controller_gains(controller_manager) -> dict:
    """``{joint: controller name}`` of the joints whose active closed-loop controller (a joint_trajectory_controller
    on the effort or velocity interface) has PID gains for them from the controllers file (``gains.<joint>.*``,
    e.g. franka_ros2's fr3_arm_controller): the file's gains drive those joints, not the simulated drive's servo.
    ``controller_manager``: a ControllerManager, a ControllerManagers or None."""
    if controller_manager is None:
        return {}
    managers = getattr(controller_manager, "managers", [controller_manager])
    out = {}
    for cm in managers:
        for name, c in cm.controllers.items():
            if not c.active or getattr(c, "pid", None) is None:
                continue
            for j in c.joints:
                if any(k.startswith(f"gains.{j}.") for k in c.params):
                    out.setdefault(j, name)
    return out


def describe_controller_gains(gains: dict, by_controller: dict) -> str:
    """The start-up note for joints with default gains that a controller drives with the controllers file's gains
    (``by_controller``: ``controller_gains``; empty string if none of ``gains``' joints)."""
    covered = {j: c for j, c in by_controller.items() if j in gains}
    if not covered:
        return ""
    groups: dict = {}
    for j, c in covered.items():
        groups.setdefault(c, []).append(j)
    parts = "; ".join(f"{c}: {', '.join(js)}" for c, js in groups.items())
    return (f"PID gains from the controllers file drive {parts} (the simulated drive's default position servo holds "
            f"these joints only while no controller commands them: "
            + ", ".join(f"{j} kp={gains[j][0]:.4g} kd={gains[j][1]:.4g}" for j in covered) + ")")


def describe_default_gains(gains: dict, robot_name: str = "the robot", passive=(), by_controller=None) -> str:
    """The start-up warning for joints that got default gains (empty string if none), e.g.

    ``ur5: no PD gains given for 6 joints; using defaults derived from the model (a position servo on the
    joint-space inertia at the initial configuration and the URDF's joint damping and friction, 30 Hz, with their
    feed-forward at the velocity target, kp capped at effort limit / 0.1 rad ...):
    shoulder_pan_joint kp=... kd=..., ...; set them with a preset's or scene robot's 'gains' (docs/design.md)``

    ``by_controller``: joints that a controller drives with the controllers file's PID gains (``controller_gains``,
    e.g. franka_ros2's effort fr3_arm_controller): left out (``describe_controller_gains`` says so instead).
    """
    gains = {j: g for j, g in gains.items() if j not in (by_controller or {})}   # the file's gains drive those
    if not gains:
        return ""
    parts = ", ".join(f"{name} kp={kp:.4g} kd={kd:.4g}" for name, (kp, kd) in gains.items())
    n = len(gains)
    return (f"{robot_name}: no PD gains given for {n} joint{'s' if n != 1 else ''}; using defaults derived from "
            f"the model (a position servo on the joint-space inertia at the initial configuration and the URDF's "
            f"joint damping and friction, {DEFAULT_BANDWIDTH / (2 * math.pi):g} Hz, with their feed-forward at the "
            f"velocity target, kp capped at effort limit / {MAX_POSITION_ERROR:g} rad "
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
