"""Scenario 3 controller: Allegro hand open-loop periodic mug reorientation (TAMSI paper, section VI-B).

The index, middle and ring fingers flex periodically, q = q0 + A (1 - cos(2 pi t / P)) (rad) on their joints
1-3 (as scenes/tamsi_allegro_mug.yaml scripts it), sent once as a ``hand_controller/joint_trajectory`` sampled at
the control ticks. Open loop: the controller only observes. The judgement uses ``contact_wrench/mug`` (the
simulation's object contact sensor, standing in for motion capture / a sensorised object): while the mug is
carried its net contact force is about its weight, and in the mug's body frame that force points against gravity,
so the angle between the current and the initial force direction is the mug's reorientation relative to gravity.
Success: the mug is never dropped (|f| below ``drop_force`` for more than 0.1 s) and it is reoriented by at least
``min_rotation_deg``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .pick_shake_place import Verdict
from .link_messages import TickTrajectory, positions_of

FLEX = ["joint_1.0", "joint_2.0", "joint_3.0", "joint_5.0", "joint_6.0", "joint_7.0", "joint_9.0", "joint_10.0",
        "joint_11.0"]


@dataclass
class AllegroReorientParams:
    base: float = 0.3                   # rad
    amplitude: float = 0.45             # rad (the flex reaches base + 2 A)
    cycle: float = 3.0                  # s, period of the flexing
    duration: float = 6.0               # s
    drop_force: float = 0.2             # N (the mug weighs 0.98 N)
    min_rotation_deg: float = 10.0


class AllegroReorient:
    name = "allegro_mug"
    NUMBERS = ("dropped_at_s", "max_rotation_deg", "mean_contact_force_N", "cycles")   # every number of its Verdict
    trajectory_controllers = ("hand_controller",)
    ft_topic = None
    wrench_topics = ("contact_wrench/mug",)
    needs = ("ext", "contact_wrench/mug")

    def __init__(self, params: AllegroReorientParams | None = None):
        self.p = params or AllegroReorientParams()
        self.log_t, self.log_q, self.log_v, self.log_grip, self.log_load, self.log_phase = [], [], [], [], [], []

    def setup(self, link, t0, urdf):
        p = self.p
        self.link, self.T, self.t0 = link, link.period_ns, t0
        st = link.state(need=("ext",))
        plan = TickTrajectory(FLEX, positions_of(st["js"], FLEX), self.T)
        n = int(round(p.duration / (self.T * 1e-9)))
        times = t0 + self.T * np.arange(2, n + 2, dtype=np.int64)
        tau = (times - (t0 + self.T)) * 1e-9
        q = p.base + p.amplitude * (1 - np.cos(2 * np.pi * tau / p.cycle))
        link.publish("hand_controller", plan.replace_after(t0, times, np.repeat(q[:, None], len(FLEX), axis=1)))
        self.end = int(times[-1])
        self.phase, self.verdict, self.numbers = "flex", None, {}
        self.f0, self.low_since, self.angles, self.forces = None, None, [], []

    def tick(self, t_k, st):
        p = self.p
        w = st["contact_wrench/mug"].wrench.force
        f = np.array([w.x, w.y, w.z])
        fn = float(np.linalg.norm(f))
        js = st["js"]
        self.log_t.append(t_k)
        self.log_q.append(np.array(js.position))
        self.log_v.append(np.array(js.velocity))
        self.log_grip.append(fn)
        self.log_load.append(fn)
        self.log_phase.append(self.phase)
        self.grip_now = self.load_now = fn
        if (t_k - self.t0) * 1e-9 < 0.2:        # the mug settles into the curled fingers
            return False
        if self.f0 is None and fn > p.drop_force:
            self.f0 = f / fn
        self.forces.append(fn)
        if fn < p.drop_force:
            self.low_since = t_k if self.low_since is None else self.low_since
            if (t_k - self.low_since) * 1e-9 > 0.1:
                self.numbers["dropped_at_s"] = self.low_since * 1e-9
                self.verdict = Verdict(False, f"drop: the mug lost contact with the hand at t = "
                                              f"{self.low_since * 1e-9:.2f} s", self.numbers)
                return True
        else:
            self.low_since = None
            if self.f0 is not None:
                self.angles.append(float(np.degrees(np.arccos(np.clip(f @ self.f0 / fn, -1, 1)))))
        if t_k >= self.end:
            a = np.array(self.angles)
            self.numbers.update(max_rotation_deg=float(a.max()), mean_contact_force_N=float(np.mean(self.forces)),
                                cycles=p.duration / p.cycle)
            if a.max() < p.min_rotation_deg:
                self.verdict = Verdict(False, f"reorientation: the mug turned only {a.max():.1f} deg", self.numbers)
            else:
                self.verdict = Verdict(True, f"held through {p.duration / p.cycle:g} cycles, reoriented up to "
                                             f"{a.max():.0f} deg", self.numbers)
            return True
        return False


@dataclass
class ArmHandReorientParams(AllegroReorientParams):
    max_arm_drift: float = 0.02         # rad: the arm (holding its position) may not move more at any joint


class ArmHandReorient:
    """The same open-loop reorientation by an Allegro hand mounted on a KUKA iiwa (scenes/iiwa_allegro_mug.yaml,
    ONE world, robots ``iiwa`` and ``allegro`` in their own namespaces): the hand's controller as above on
    ``/<ns>/allegro/hand_controller``, while the arm's trajectory controller holds the arm where it started (it
    carries the hand and takes the finger and mug forces). Adds the check that no arm joint drifted by more than
    ``max_arm_drift``."""

    name = "iiwa_allegro_mug"
    NUMBERS = AllegroReorient.NUMBERS + ("max_arm_drift_rad",)
    robots = ("iiwa", "allegro")
    trajectory_controllers = ("hand_controller",)
    ft_topic = None
    wrench_topics = AllegroReorient.wrench_topics
    needs = AllegroReorient.needs

    def __init__(self, params: ArmHandReorientParams | None = None):
        self.p = params or ArmHandReorientParams()
        self.hand = AllegroReorient(self.p)
        for name in ("log_t", "log_q", "log_v", "log_grip", "log_load", "log_phase"):
            setattr(self, name, getattr(self.hand, name))

    def setup(self, link, t0, urdfs):
        self.hand.setup(link.links["allegro"], t0, urdfs["allegro"])
        self.q_arm0 = np.array(link.links["iiwa"].state(need=())["js"].position)
        self.arm_drift = 0.0

    def __getattr__(self, name):       # phase, verdict, numbers, grip_now, load_now: the hand controller's
        if name == "hand":
            raise AttributeError(name)
        return getattr(self.hand, name)

    def tick(self, t_k, st):
        self.arm_drift = max(self.arm_drift, float(np.max(np.abs(np.array(st["iiwa"]["js"].position) - self.q_arm0))))
        done = self.hand.tick(t_k, st["allegro"])
        if done:
            self.hand.numbers["max_arm_drift_rad"] = self.arm_drift
            if self.hand.verdict.success and self.arm_drift > self.p.max_arm_drift:
                self.hand.verdict = Verdict(False, f"arm: a joint drifted {self.arm_drift:.4f} rad while holding the "
                                                   f"hand", self.hand.numbers)
        return done
