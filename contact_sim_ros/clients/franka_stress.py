"""Scenario 2 controller: Franka grasp stress test (ICF paper, section XII-B). The Panda grasps the bronze rod
(0.503 kg, 20 cm) in the middle, lifts it off its pedestal and drives the grasp centre along a horizontal 3 cm
circle at a chosen frequency; the result is the time until the rod is lost (or that it survived the run).

Same interfaces and machinery as scenario 1 (:mod:`.pick_shake_place`): Jacobian IK of keyframe / circle poses
into ``arm_controller/joint_trajectory``, the grip force loop on ``gripper_controller/joint_trajectory`` with
``external_joint_torques`` of ``panda_finger_joint1`` (the generalized force on the hand's finger coordinate, N),
and the wrist load along gravity from ``ft_sensor/wrench``. Loss of the rod: the load falls below half of the
held load, or the fingers close past ``min_opening``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .pick_shake_place import PickShakePlace, PickShakePlaceParams, Verdict
from .link_messages import gripper_measurements


@dataclass
class FrankaStressParams(PickShakePlaceParams):
    grip_force: float = 20.0            # N, generalized force on panda_finger_joint1 (squeeze)
    finger_stiffness: float = 2000.0    # N/m (preset gripper gain)
    open_width: float = 0.04
    min_opening: float = 0.004          # m per finger (rod radius 10 mm)
    lift_height: float = 0.05           # m above the start
    circle_radius: float = 0.03         # m
    circle_frequency: float = 1.0       # Hz
    circle_ramp: float = 0.5            # s: the radius grows smoothly to circle_radius
    circle_duration: float = 3.0        # s of circling (the run ends earlier when the rod is lost)
    tool_frame: str = "panda_hand_tcp"
    ft_frame: str = "panda_ft_sensor"
    hold_time: float = 0.4
    motion_time: float = 0.5


class FrankaStress(PickShakePlace):
    name = "franka_rod"
    # every number of its Verdict (PickShakePlace.NUMBERS; its setup's pick_x_m, pick_y_m too)
    NUMBERS = tuple(dict.fromkeys(PickShakePlace.NUMBERS + ("time_to_failure_s", "circle_frequency_Hz", "survived_s")))
    ARM = [f"panda_joint{i}" for i in range(1, 8)]
    FINGERS = ["panda_finger_joint1"]

    def __init__(self, params: FrankaStressParams | None = None):
        super().__init__(params or FrankaStressParams())

    def enter(self, phase: str, t_k: int):
        p = self.p
        self.phase, self.phase_t0 = phase, t_k
        if phase == "close":
            self.force_loop = True
        elif phase == "lift":
            here = self.ik.forward(self.arm.points[-1], self.q_full)
            self.phase_end = self.move_to(t_k, pin.SE3(here.rotation, here.translation + [0, 0, p.lift_height]),
                                          p.motion_time)
        elif phase == "circle":
            w = 2 * np.pi * p.circle_frequency

            def offsets(n):
                tau = self.Ts * np.arange(1, n + 1)
                s = np.clip(tau / p.circle_ramp, 0, 1)
                r = p.circle_radius * s * s * (3 - 2 * s)
                return np.stack((r * (np.cos(w * tau) - 1), r * np.sin(w * tau), 0 * tau), axis=1)
            here = self.ik.forward(self.arm.points[-1], self.q_full)
            self.phase_end = self.move_to(t_k, here, p.circle_duration, offsets)

    def tick(self, t_k: int, st: dict) -> bool:
        p = self.p
        js = st["js"]
        load, grip, width = gripper_measurements(self.ik, self.q_full, st, self.FINGERS, p.ft_frame)
        self.log_t.append(t_k)
        self.log_q.append(np.array(js.position))
        self.log_v.append(np.array(js.velocity))
        self.log_grip.append(grip)
        self.log_load.append(load)
        self.log_phase.append(self.phase)
        self.grip_now, self.load_now = grip, load
        el = (t_k - self.phase_t0) * 1e-9
        ph = self.phase
        if self.force_loop:
            self.regulate_grip(t_k, grip)
        if ph == "tare":
            if el >= 0.1:
                self._load_window.append(load)
            if el >= 0.2:
                self.F0 = float(np.mean(self._load_window))
                self.numbers["tare_load_N"] = self.F0
                self.enter("close", t_k)
        elif ph == "close":
            self._close_ok = getattr(self, "_close_ok", 0) + 1 if abs(grip - p.grip_force) < 0.05 * p.grip_force \
                else 0
            if self._close_ok >= 5:
                self.numbers["close_time_s"] = el
                self.enter("lift", t_k)
            elif el > 2.0 or width < p.min_opening:
                self.fail(f"grasp: grip force {grip:.2f} N (target {p.grip_force} N), fingers at "
                          f"{width * 1e3:.1f} mm")
                return True
        elif ph == "lift" and t_k >= self.phase_end:
            self.phase, self.phase_t0, self._load_window = "hold", t_k, []
        elif ph == "hold":
            if el >= 0.15:
                self._load_window.append(load)
            if el >= p.hold_time:
                self.held_load = float(np.mean(self._load_window)) - self.F0
                self.numbers.update(held_load_N=self.held_load, held_mass_kg=self.held_load / 9.81)
                if self.held_load < p.min_held_load:
                    self.fail(f"slip: the lifted load is only {self.held_load:.2f} N")
                    return True
                self.circle_t0 = t_k + 2 * self.T      # the circle starts at the tick after next
                self._load_window = []
                self.enter("circle", t_k)
        elif ph == "circle":
            self._load_window.append(load - self.F0)
            recent = float(np.mean(self._load_window[-25:]))     # 0.5 s: the swinging rod modulates the load
            lost = recent < 0.5 * self.held_load or width < p.min_opening
            if lost:
                ttf = max(0.0, (t_k - self.circle_t0) * 1e-9)
                self.numbers.update(time_to_failure_s=ttf, circle_frequency_Hz=p.circle_frequency)
                self.fail(f"slip: the rod was lost {ttf:.2f} s into the {p.circle_frequency:g} Hz circle "
                          f"(load {recent:.2f} N over 0.5 s, fingers {width * 1e3:.1f} mm)")
                return True
            if t_k >= self.phase_end:
                self.numbers.update(time_to_failure_s=float("inf"), circle_frequency_Hz=p.circle_frequency,
                                    survived_s=p.circle_duration)
                self.verdict = Verdict(True, f"held the rod through {p.circle_duration:g} s of the "
                                             f"{p.circle_frequency:g} Hz, {p.circle_radius * 100:g} cm circle",
                                       self.numbers)
                return True
        return False
