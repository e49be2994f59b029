"""Scenario 4 controller: BarrettHand (fingers down, on a vertical lift stage) closes its three fingers on an
object standing below it (a cylinder or a box), lifts it and reports the grasp forces.

Interfaces (what a BarrettHand + stage driver offers): ``joint_states``, ``external_joint_torques`` (the hand's
finger strain gauges / the stage's force reading: J^T f of the contact forces per joint), per-link
``contact_wrench/<link>`` (fingertip/link force sensing), and ``hand_controller/joint_trajectory``,
``lift_controller/joint_trajectory``.

Judgement: after lifting, the stage carries the object's weight, measured as the drop of the lift joint's
external force ``L = -tau_ext[lift_joint]`` (N) relative to before the grasp; success when L exceeds
``min_held_load`` through the hold. Grasp forces: |f| of the net contact wrench on each finger's proximal and
distal links (N), averaged over the hold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .pick_shake_place import Verdict
from .link_messages import TickTrajectory, efforts_of, positions_of

HAND = ["bh_spread_joint", "bh_finger_1_proximal_joint", "bh_finger_2_proximal_joint", "bh_finger_3_proximal_joint"]
LIFT = ["lift_joint"]
FINGER_LINKS = [f"bh_finger_{f}_{part}" for f in (1, 2, 3) for part in ("proximal", "distal")]


@dataclass
class HandGraspParams:
    spread: float = 0.0                 # rad (0: F1 and F2 opposite F3 -> cylinder/box wrap)
    close_angle: float = 1.2            # rad, proximal joint target (past contact: the PD squeezes)
    close_time: float = 0.5             # s
    squeeze_time: float = 0.3           # s
    lift_height: float = 0.10           # m
    lift_time: float = 0.6              # s
    hold_time: float = 0.4              # s
    min_held_load: float = 1.0          # N


class HandGrasp:
    name = "barrett_grasp"
    # every number of its Verdict (PickShakePlace.NUMBERS; links_touching_after_close is text, not a column)
    NUMBERS = ("held_load_N", "held_mass_kg", "finger_1_contact_force_N", "finger_2_contact_force_N",
               "finger_3_contact_force_N")
    trajectory_controllers = ("hand_controller", "lift_controller")
    ft_topic = None
    wrench_topics = tuple(f"contact_wrench/{link}" for link in FINGER_LINKS)
    needs = ("ext",) + wrench_topics

    def __init__(self, params: HandGraspParams | None = None):
        self.p = params or HandGraspParams()
        self.log_t, self.log_q, self.log_v, self.log_grip, self.log_load, self.log_phase = [], [], [], [], [], []

    def setup(self, link, t0, urdf):
        self.link, self.T = link, link.period_ns
        st = link.state(need=("ext",))
        self.hand = TickTrajectory(HAND, positions_of(st["js"], HAND), self.T)
        self.lift = TickTrajectory(LIFT, positions_of(st["js"], LIFT), self.T)
        self.numbers, self.verdict = {}, None
        self.phase, self.phase_t0 = "tare", t0
        self._win, self._forces = [], []
        self.L0 = None

    def _ramp(self, plan, ctrl, t_k, target, duration):
        n = max(1, int(round(duration / (self.T * 1e-9))))
        g0 = plan.at(t_k + self.T)
        times = t_k + self.T + self.T * np.arange(1, n + 1, dtype=np.int64)
        s = np.arange(1, n + 1) / n
        s = s * s * (3 - 2 * s)
        self.link.publish(ctrl, plan.replace_after(t_k, times, g0[None, :] + s[:, None] * (target - g0)[None, :]))
        return int(times[-1])

    def tick(self, t_k, st):
        p = self.p
        js = st["js"]
        lift_tau = float(efforts_of(st["ext"], LIFT)[0])
        forces = np.array([np.linalg.norm([st[w].wrench.force.x, st[w].wrench.force.y, st[w].wrench.force.z])
                           for w in self.wrench_topics])
        per_finger = forces.reshape(3, 2).sum(axis=1)
        self.grip_now = float(per_finger.mean())
        self.load_now = -lift_tau - (self.L0 or 0.0)
        self.log_t.append(t_k)
        self.log_q.append(np.array(js.position))
        self.log_v.append(np.array(js.velocity))
        self.log_grip.append(self.grip_now)
        self.log_load.append(self.load_now)
        self.log_phase.append(self.phase)
        el = (t_k - self.phase_t0) * 1e-9
        ph = self.phase
        if ph == "tare" and el >= 0.1:
            self.L0 = -lift_tau
            target = np.array([p.spread] + [p.close_angle] * 3)
            self.end = self._ramp(self.hand, "hand_controller", t_k, target, p.close_time)
            self.phase, self.phase_t0 = "close", t_k
        elif ph == "close" and t_k >= self.end + int(p.squeeze_time * 1e9):
            touching = [name for name, f in zip(FINGER_LINKS, forces) if f > 0.05]
            self.numbers["links_touching_after_close"] = ", ".join(touching)
            if not any(name.startswith(f"bh_finger_{f}") for f in (1, 2, 3) for name in touching):
                self.verdict = Verdict(False, "grasp: no finger touches the object after closing", self.numbers)
                return True
            self.end = self._ramp(self.lift, "lift_controller", t_k, np.array([p.lift_height]), p.lift_time)
            self.phase, self.phase_t0 = "lift", t_k
        elif ph == "lift" and t_k >= self.end:
            self.phase, self.phase_t0 = "hold", t_k
        elif ph == "hold":
            if el >= 0.1:
                self._win.append(self.load_now)
                self._forces.append(per_finger)
            if el >= p.hold_time:
                load = float(np.mean(self._win))
                f = np.mean(self._forces, axis=0)
                self.numbers.update(held_load_N=load, held_mass_kg=load / 9.81,
                                    **{f"finger_{i + 1}_contact_force_N": float(f[i]) for i in range(3)})
                if load < p.min_held_load:
                    self.verdict = Verdict(False, f"slip: after lifting the stage carries only {load:.2f} N: the "
                                                  "object stayed down or slipped out", self.numbers)
                else:
                    self.verdict = Verdict(True, f"grasped and lifted {p.lift_height * 100:.0f} cm, holding "
                                                 f"{load:.2f} N", self.numbers)
                return True
        return False
