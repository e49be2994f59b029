"""Scenario controller: two KUKA iiwa + Schunk WSG 50 in ONE world (scenes/two_iiwa_handover.yaml) hand a box
over: the left arm picks the box from the stand and lifts it into the right gripper, the right gripper closes on
the other end, the left gripper lets go and retreats, and the right arm holds the box alone.

Each arm is driven only through what its real driver stack offers in its own namespace (``/<ns>/left/...``,
``/<ns>/right/...``): ``joint_states``, the wrist F/T sensor (``ft_sensor/wrench``), the finger forces
(``external_joint_torques``), ``robot_description`` (the prefixed URDF: joints ``left_iiwa_joint_1``, ...) and the
trajectory topics of ``arm_controller`` and ``gripper_controller``. Both run in lock-step from one controller
(:class:`~contact_sim_ros.clients.robot_link.MultiRobotLink`).

Checks (the verdict): after the lift the left wrist carries the box (>= half its weight); after the hand-over the
right wrist carries it and the left one does not (< 30 % of its weight); the right fingers still squeeze.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .ik import JacobianIK, interpolate_pose, joint_path, min_jerk
from .pick_shake_place import G, Verdict
from .link_messages import TickTrajectory, gripper_measurements, positions_of

ROBOTS = ("left", "right")


@dataclass
class HandOverParams:
    """Task parameters (SI units)."""

    box_mass: float = 0.3               # kg (scenes/two_iiwa_handover.yaml), for the load checks
    grasp_z: float = 0.225              # m, grasp centre height on the box lying on the stand
    lift: float = 0.05                  # m the left arm lifts the box (into the right gripper's jaws)
    retreat: float = 0.10               # m the left gripper rises after letting go
    squeeze: float = 0.010              # m per finger past the box face: PD (2000 N/m) squeeze ~20 N
    box_half_width: float = 0.025       # m, half the box's width across the jaws
    open_width: float = 0.04            # m per finger
    min_grip: float = 8.0               # N per finger: a closed grasp
    motion_time: float = 1.0            # s per Cartesian move
    close_time: float = 0.3             # s to ramp the fingers
    settle_time: float = 0.4            # s at rest before each load measurement


class Arm:
    """One arm of the two: IK on its robot_description, its committed arm / finger plans, its measurements."""

    def __init__(self, name: str, link, urdf: str, st: dict, period_ns: int):
        self.name, self.link = name, link
        p = f"{name}_"
        self.joints = [f"{p}iiwa_joint_{i}" for i in range(1, 8)]
        self.fingers = [f"{p}wsg_finger_left_joint", f"{p}wsg_finger_right_joint"]
        self.ft_frame = f"{p}iiwa_ft_sensor"
        self.ik = JacobianIK(urdf, f"{p}wsg_tcp", self.joints)
        self.T = period_ns
        q = positions_of(st["js"], self.joints)
        self.arm = TickTrajectory(self.joints, q, period_ns)
        self.grip = TickTrajectory(self.fingers, positions_of(st["js"], self.fingers), period_ns)
        self.q_full = self.ik.full_configuration(dict(zip(st["js"].name, st["js"].position)))
        self.home = self.ik.forward(q, self.q_full)
        self.tare = None
        self.squeezing = None     # finger target (m) held against the box, re-sent every tick

    def hold_squeeze(self, t_k: int) -> None:
        """Keep the fingers' target inside the box (as a force loop would): a trajectory whose last point cannot
        be reached ends with a goal-tolerance abort, after which the trajectory controller holds the measured
        position and the squeeze would be lost."""
        if self.squeezing is not None and t_k + 2 * self.T > int(self.grip.times[-1]):
            w = np.full(len(self.fingers), self.squeezing)
            self.link.publish("gripper_controller", self.grip.replace_after(t_k, [t_k + 2 * self.T], [w]))

    def measure(self, st: dict) -> tuple[float, float, float]:
        """(wrist load along gravity in N, minus the tare once taken; finger force N; finger opening m)."""
        load, grip, width = gripper_measurements(self.ik, self.q_full, st, self.fingers, self.ft_frame)
        return load - (self.tare or 0.0), grip, width

    def move_to(self, t_k: int, target: pin.SE3, duration: float) -> int:
        """Minimum-jerk Cartesian move of wsg_tcp from the committed plan's end; returns its end time (ns)."""
        q_end = self.arm.points[-1]
        start = self.ik.forward(q_end, self.q_full)
        n = max(1, int(round(duration / (self.T * 1e-9))))
        poses = [interpolate_pose(start, target, s) for s in min_jerk(np.arange(1, n + 1) / n)]
        qs = joint_path(self.ik, poses, q_end, what=f"{self.name} move")
        times = t_k + self.T + self.T * np.arange(1, n + 1, dtype=np.int64)
        self.link.publish("arm_controller", self.arm.replace_after(t_k, times, qs))
        return int(times[-1])

    def raised(self, dz: float) -> pin.SE3:
        here = self.ik.forward(self.arm.points[-1], self.q_full)
        return pin.SE3(here.rotation, here.translation + np.array([0.0, 0.0, dz]))

    def at_height(self, z: float) -> pin.SE3:
        return pin.SE3(self.home.rotation, np.array([self.home.translation[0], self.home.translation[1], z]))

    def grip_to(self, t_k: int, width: float, duration: float) -> int:
        n = max(1, int(round(duration / (self.T * 1e-9))))
        g0 = self.grip.at(t_k + self.T)
        times = t_k + self.T + self.T * np.arange(1, n + 1, dtype=np.int64)
        pts = g0[None, :] + (np.arange(1, n + 1) / n)[:, None] * (width - g0)[None, :]
        self.link.publish("gripper_controller", self.grip.replace_after(t_k, times, pts))
        return int(times[-1])


class HandOver:
    """Phase machine; ``tick(t, {robot: state})`` once per control period."""

    name = "two_arm_handover"
    NUMBERS = ("left_tare_load_N", "right_tare_load_N", "left_grip_N", "left_load_lifted_N", "right_grip_N",
               "right_load_after_N", "left_load_after_N", "right_grip_after_N", "box_weight_N")  # (its Verdict's)
    robots = ROBOTS
    trajectory_controllers = ("arm_controller", "gripper_controller")
    ft_topic = "ft_sensor/wrench"

    def __init__(self, params: HandOverParams | None = None):
        self.p = params or HandOverParams()
        self.log_t, self.log_q, self.log_v, self.log_grip, self.log_load, self.log_phase = [], [], [], [], [], []

    def setup(self, link, t0: int, urdfs: dict):
        st = link.state(need=())
        self.arms = {r: Arm(r, link.links[r], urdfs[r], st[r], link.period_ns) for r in self.robots}
        self.numbers, self.verdict = {}, None
        self.weight = self.p.box_mass * G
        self._window = {r: [] for r in self.robots}
        self.phase, self.phase_t0, self.phase_end = "tare", t0, t0

    def fail(self, reason: str) -> bool:
        self.verdict = Verdict(False, reason, self.numbers)
        return True

    def enter(self, phase: str, t_k: int):
        p, left, right = self.p, self.arms["left"], self.arms["right"]
        self.phase, self.phase_t0, self.phase_end = phase, t_k, t_k
        closed = p.box_half_width - p.squeeze
        if phase == "left_descend":
            self.phase_end = left.move_to(t_k, left.at_height(p.grasp_z), p.motion_time)
        elif phase == "left_close":
            self.phase_end = left.grip_to(t_k, closed, p.close_time)
            left.squeezing = closed
        elif phase == "left_lift":
            self.phase_end = left.move_to(t_k, left.raised(p.lift), p.motion_time)
        elif phase == "right_descend":
            self.phase_end = right.move_to(t_k, right.at_height(p.grasp_z + p.lift), p.motion_time)
        elif phase == "right_close":
            self.phase_end = right.grip_to(t_k, closed, p.close_time)
            right.squeezing = closed
        elif phase == "left_open":
            left.squeezing = None
            self.phase_end = left.grip_to(t_k, p.open_width, p.close_time)
        elif phase == "left_retreat":
            self.phase_end = left.move_to(t_k, left.raised(p.retreat), p.motion_time)
        self._window = {r: [] for r in self.robots}

    def _settled_mean(self, t_k, values: dict) -> dict | None:
        """Mean of each arm's (load, grip) over the last half of settle_time after the phase's motion ended."""
        since = (t_k - self.phase_end) * 1e-9
        if since >= self.p.settle_time / 2:
            for r, v in values.items():
                self._window[r].append(v)
        if since < self.p.settle_time:
            return None
        return {r: np.mean(np.array(w), axis=0) for r, w in self._window.items()}

    def tick(self, t_k: int, st: dict) -> bool:
        values = {r: self.arms[r].measure(st[r]) for r in self.robots}   # (load, grip, width)
        js = st["left"]["js"]
        self.log_t.append(t_k)
        self.log_q.append(np.concatenate([np.array(st[r]["js"].position) for r in self.robots]))
        self.log_v.append(np.array(js.velocity))
        self.log_grip.append([values[r][1] for r in self.robots])
        self.log_load.append([values[r][0] for r in self.robots])
        self.log_phase.append(self.phase)
        self.grip_now = values["right"][1]
        self.load_now = values["right"][0]
        ph, p = self.phase, self.p
        for arm in self.arms.values():
            arm.hold_squeeze(t_k)
        if ph == "tare":
            for r in self.robots:
                self._window[r].append(values[r][0])
            if (t_k - self.phase_t0) * 1e-9 >= 0.3:
                for r in self.robots:
                    self.arms[r].tare = float(np.mean(self._window[r][len(self._window[r]) // 2:]))
                    self.numbers[f"{r}_tare_load_N"] = self.arms[r].tare
                self.enter("left_descend", t_k)
            return False
        if t_k < self.phase_end:
            return False
        mean = self._settled_mean(t_k, values)
        if mean is None:
            return False
        load = {r: float(mean[r][0]) for r in self.robots}
        grip = {r: float(mean[r][1]) for r in self.robots}
        if ph == "left_descend":
            self.enter("left_close", t_k)
        elif ph == "left_close":
            self.numbers["left_grip_N"] = grip["left"]
            if grip["left"] < p.min_grip:
                return self.fail(f"left grasp: finger force {grip['left']:.2f} N < {p.min_grip} N: nothing between "
                                 f"the left fingers")
            self.enter("left_lift", t_k)
        elif ph == "left_lift":
            self.numbers["left_load_lifted_N"] = load["left"]
            if load["left"] < 0.5 * self.weight:
                return self.fail(f"left lift: the left wrist carries {load['left']:.2f} N of the box's "
                                 f"{self.weight:.2f} N: the box was not lifted")
            self.enter("right_descend", t_k)
        elif ph == "right_descend":
            self.enter("right_close", t_k)
        elif ph == "right_close":
            self.numbers["right_grip_N"] = grip["right"]
            if grip["right"] < p.min_grip:
                return self.fail(f"right grasp: finger force {grip['right']:.2f} N < {p.min_grip} N: the right "
                                 f"gripper missed the box")
            self.enter("left_open", t_k)
        elif ph == "left_open":
            self.enter("left_retreat", t_k)
        elif ph == "left_retreat":
            self.numbers.update(right_load_after_N=load["right"], left_load_after_N=load["left"],
                                right_grip_after_N=grip["right"], box_weight_N=self.weight)
            if load["right"] < 0.5 * self.weight:
                return self.fail(f"hand-over: the right wrist carries only {load['right']:.2f} N of "
                                 f"{self.weight:.2f} N after the left gripper let go: the box was dropped")
            if abs(load["left"]) > 0.3 * self.weight:
                return self.fail(f"hand-over: the left wrist still carries {load['left']:.2f} N after "
                                 f"letting go and retreating")
            self.verdict = Verdict(True, "the left arm picked the box and handed it to the right arm, which holds "
                                         "it alone", self.numbers)
            return True
        return False
