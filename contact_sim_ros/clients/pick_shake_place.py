"""Scenario 1 controller: KUKA iiwa + Schunk WSG 50 pick, shake and place of a water bottle with force feedback
(the sim-to-real task of the TAMSI paper, section VI-C).

The controller sees only what the real robot's driver stack offers: ``joint_states``, the wrist F/T sensor
(``ft_sensor/wrench``), the gripper's measured finger force (``external_joint_torques`` of the finger joints, as
the WSG driver reports its grasping force), ``robot_description``, and it commands
``arm_controller/joint_trajectory`` and ``gripper_controller/joint_trajectory``.

* Arm: Cartesian keyframe poses of the grasp centre ``wsg_tcp`` -> minimum-jerk Cartesian paths sampled at the
  control ticks -> Jacobian IK (damped least squares, :mod:`.ik`) -> joint trajectories.
* Grip: an integral force loop on the finger position targets,
  ``g_{k+1} = g_k - alpha (F_des - F_meas) / k_finger`` (m), limited to ``close_speed * T`` per tick, with the
  finger force F_meas (N, squeeze per finger) from ``external_joint_torques``.
* Load: the wrist F/T force along gravity, ``L = f_s . R_ws^T g_hat`` (N), with R_ws from forward kinematics of
  the measured joints; tared before the grasp. Lifting is confirmed, a drop/slip detected and the placement
  detected (the support takes over half of the held weight while lowering) from L alone.

Run through the scenario runner (``contact-sim-scenario pick_shake_place``) or standalone next to a running
node: ``python -m contact_sim_ros.clients.pick_shake_place --namespace /sim --mode lockstep``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from ..cameras.perception import PerceptionError, locate_upright_cylinder, segment_object
from ..errors import ConfigError, unknown_choice
from .ik import JacobianIK, interpolate_poses, joint_path, min_jerk
from .link_messages import ControllerError, TickTrajectory, gripper_measurements, positions_of

ARM = [f"iiwa_joint_{i}" for i in range(1, 8)]
FINGERS = ["wsg_finger_left_joint", "wsg_finger_right_joint"]
PICK_SOURCES = ("given", "truth", "perception")   # where the grasp goes: PickShakePlaceParams.pick_source
G = 9.81


@dataclass
class PickShakePlaceParams:
    """Task parameters (SI units). Positions are of the grasp centre ``wsg_tcp`` in the world frame."""

    grip_force: float = 20.0            # N, commanded squeeze per finger
    pick_xy: tuple = (0.55, -0.12)      # m, bottle axis at the pick location
    place_xy: tuple = (0.55, 0.15)      # m, where to put it down
    grasp_z: float = 0.13               # m, grasp centre height at the grasp (bottle 18 cm tall, on the floor)
    approach_height: float = 0.12       # m above grasp_z: pre-grasp and retreat
    lift_height: float = 0.15           # m above grasp_z
    shake_amplitude: float = 0.05       # m, along shake_axis
    shake_axis: tuple = (0.6, 0.0, 0.8)  # world direction (unit): across the jaw and vertical, so friction carries it
    shake_frequency: float = 2.0        # Hz
    shake_cycles: int = 3
    lower_speed: float = 0.03           # m/s while lowering the last 3 cm onto the support
    finger_stiffness: float = 2000.0    # N/m, the gripper's position-loop stiffness (force loop model)
    force_gain: float = 0.3             # fraction of the dead-beat correction per tick
    close_speed: float = 0.08           # m/s, max finger target speed
    open_width: float = 0.04            # m per finger
    min_opening: float = 0.015          # m per finger: closing past this means the fingers hold nothing
    min_held_load: float = 1.0          # N: less load after lifting means the object was not lifted / slipped
    tool_frame: str = "wsg_tcp"
    ft_frame: str = "iiwa_ft_sensor"
    hold_time: float = 0.6              # s of static hold (grip force statistics over its last 2/3)
    motion_time: float = 1.0            # s per keyframe move
    stop_at: str = ""                   # end the run successfully when this phase begins (shortened tests)
    # where the bottle is (docs/cameras.md "Perception in the loop"): 'given' = pick_xy; 'truth' = the object's
    # true position now (in process: ground truth); 'perception' = located in one depth image of `camera`, taken
    # with the grasp centre at look_height over pick_xy (in process: the link renders it at that moment; over ROS:
    # the image of that tick from the camera's topics, located through TF)
    pick_source: str = "given"
    pick_object: str = "bottle"         # the object to pick (truth; perception with segmentation 'labels')
    object_label: str = ""              # what failure reasons call it ('': pick_object; a campaign's mesh choice
                                        # sets the chosen file's stem: "the mug slipped", not "the bottle")
    camera: str = "wrist_camera"        # a camera of the scene (perception)
    segmentation: str = "height"        # 'height' (above the floor, minus the robot's pixels) or 'labels'
    look_height: float = 0.45           # m, grasp centre height when taking the image (camera ~0.4 m over the top)
    search_radius: float = 0.15         # m, horizontal: object points are searched this close to pick_xy
    support_z: float = 0.0              # m, height of the surface the object stands on


@dataclass
class Verdict:
    success: bool
    reason: str
    numbers: dict = field(default_factory=dict)


class PickShakePlace:
    """Phase machine of scenario 1; ``tick(t, state)`` is called once per control period."""

    name = "pick_shake_place"
    trajectory_controllers = ("arm_controller", "gripper_controller")
    # every number it can put in its Verdict (a campaign's result columns n.*, fixed before its first trial)
    NUMBERS = ("pick_x_m", "pick_y_m", "perceived_top_z_m", "perceived_points", "perception_sim_time_s",
               "perception_error_m", "tare_load_N", "close_time_s", "close_grip_force_N", "hold_grip_force_mean_N",
               "hold_grip_force_max_rel_error", "hold_grip_force_mean_rel_error", "held_load_N", "held_mass_kg",
               "shake_grip_force_min_N", "shake_grip_force_max_N", "load_after_shake_N", "placed_at_tcp_z_m",
               "placed_at_t_s", "placed_load_N", "final_load_N")
    ft_topic = "ft_sensor/wrench"
    ARM, FINGERS = ARM, FINGERS

    def __init__(self, params: PickShakePlaceParams | None = None):
        self.p = params or PickShakePlaceParams()
        if self.p.pick_source not in PICK_SOURCES:
            raise ConfigError(unknown_choice("pick_source", self.p.pick_source, PICK_SOURCES))
        self.log_t, self.log_q, self.log_v, self.log_grip, self.log_load, self.log_phase = [], [], [], [], [], []

    # ------------------------------------------------------------------ setup
    def setup(self, link, t0: int, urdf: str):
        p = self.p
        if p.pick_source == "truth" and not hasattr(link, "object_position"):
            raise ControllerError(f"pick_source 'truth' needs a link that knows the true object poses: the "
                                  f"in-process link (--transport inprocess), not {type(link).__name__}")
        if p.pick_source == "perception" and not hasattr(link, "camera_frame"):
            raise ControllerError(f"pick_source 'perception' needs a link that renders cameras or receives their "
                                  f"images (InProcessLink, RobotLink), not {type(link).__name__}")
        self.link = link
        self.T = link.period_ns
        self.Ts = self.T * 1e-9
        self.ik = JacobianIK(urdf, p.tool_frame, self.ARM)
        st = link.state(need=())
        q_arm = positions_of(st["js"], self.ARM)
        g = positions_of(st["js"], self.FINGERS)
        self.arm = TickTrajectory(self.ARM, q_arm, self.T)
        self.grip = TickTrajectory(self.FINGERS, g, self.T)
        self.q_full = self.ik.full_configuration(dict(zip(st["js"].name, st["js"].position)))
        self.R_down = self.ik.forward(q_arm, self.q_full).rotation.copy()   # keep the initial tool orientation
        self.force_loop = False
        self.phase, self.phase_t0 = None, t0
        self.F0 = None
        self.held_load = None
        self.grip_samples = []
        self.numbers = {}
        self.verdict: Verdict | None = None
        self._load_window = []
        self._shake_grip = []
        self.pick_xy = tuple(map(float, p.pick_xy))      # where the grasp goes (pick_source may change it)
        if p.pick_source == "truth":
            self.pick_xy = tuple(float(x) for x in link.object_position(p.pick_object)[:2])
            self.numbers.update(pick_x_m=self.pick_xy[0], pick_y_m=self.pick_xy[1])
        self.enter("tare", t0)

    def pose(self, x, y, z) -> pin.SE3:
        return pin.SE3(self.R_down, np.array([x, y, z], float))

    # ------------------------------------------------------------------ commands
    def move_to(self, t_k: int, target: pin.SE3, duration: float, offsets=None):
        """Minimum-jerk Cartesian move from the committed plan's end pose (plus optional per-tick offsets)."""
        q_end = self.arm.points[-1]
        start = self.ik.forward(q_end, self.q_full)
        n = max(1, int(round(duration / self.Ts)))
        s = min_jerk(np.arange(1, n + 1) / n)
        poses = interpolate_poses(start, target, s)
        if offsets is not None:
            poses = [pin.SE3(P.rotation, P.translation + o) for P, o in zip(poses, offsets(n))]
        qs = joint_path(self.ik, poses, q_end, what=f"{self.phase} move")
        t1 = t_k + self.T
        times = t1 + self.T * np.arange(1, n + 1, dtype=np.int64)
        self.link.publish("arm_controller", self.arm.replace_after(t_k, times, qs))
        return int(times[-1])

    def hold_arm(self, t_k: int):
        """Stop at the committed target of the next tick."""
        q1 = self.arm.at(t_k + self.T)
        self.link.publish("arm_controller", self.arm.replace_after(t_k, [t_k + 2 * self.T], [q1]))

    def grip_to(self, t_k: int, width: float, duration: float = 0.0):
        n = max(1, int(round(duration / self.Ts)))
        g0 = self.grip.at(t_k + self.T)
        times = t_k + self.T + self.T * np.arange(1, n + 1, dtype=np.int64)
        pts = g0[None, :] + (np.arange(1, n + 1) / n)[:, None] * (width - g0)[None, :]
        self.link.publish("gripper_controller", self.grip.replace_after(t_k, times, pts))

    def regulate_grip(self, t_k: int, f_meas: float):
        p = self.p
        g1 = self.grip.at(t_k + self.T)
        dg = -p.force_gain * (p.grip_force - f_meas) / p.finger_stiffness
        lim = p.close_speed * self.Ts
        # np.clip's operations without its wrappers (~6 us on a float): max then min, NaN kept (bit-identical)
        g2 = (g1 + min(max(dg, -lim), lim)).clip(0.0, p.open_width)
        self.link.publish("gripper_controller", self.grip.replace_after(t_k, [t_k + 2 * self.T], [g2]))

    # ------------------------------------------------------------------ phases
    def enter(self, phase: str, t_k: int):
        p = self.p
        self.phase, self.phase_t0 = phase, t_k
        px, py = self.pick_xy
        qx, qy = p.place_xy
        if phase == "look":
            self.phase_end = self.move_to(t_k, self.pose(px, py, p.look_height), p.motion_time)
        elif phase == "approach":
            self.phase_end = self.move_to(t_k, self.pose(px, py, p.grasp_z + p.approach_height), p.motion_time)
        elif phase == "descend":
            self.phase_end = self.move_to(t_k, self.pose(px, py, p.grasp_z), p.motion_time)
        elif phase == "close":
            self.force_loop = True
        elif phase == "lift":
            self.phase_end = self.move_to(t_k, self.pose(px, py, p.grasp_z + p.lift_height), p.motion_time)
        elif phase == "shake":
            w = 2 * np.pi * p.shake_frequency
            dur = p.shake_cycles / p.shake_frequency

            def offsets(n):
                tau = self.Ts * np.arange(1, n + 1)
                axis = np.asarray(p.shake_axis, float) / np.linalg.norm(p.shake_axis)
                # smooth envelope (0.25 s in and out): starts and ends at rest, so the arm does not ring after
                e = np.clip(np.minimum(tau, dur - tau) / 0.25, 0.0, 1.0)
                e = e * e * (3 - 2 * e)
                return (p.shake_amplitude * e * np.sin(w * tau))[:, None] * axis[None, :]
            here = self.ik.forward(self.arm.points[-1], self.q_full)
            self.phase_end = self.move_to(t_k, here, dur, offsets)
        elif phase == "transfer":
            self.phase_end = self.move_to(t_k, self.pose(qx, qy, p.grasp_z + p.lift_height), 1.5 * p.motion_time)
        elif phase == "lower":     # fast to 3 cm above the expected support, then slowly until it takes the load
            self.phase_end = self.move_to(t_k, self.pose(qx, qy, p.grasp_z + 0.03), p.motion_time)
        elif phase == "touch":
            self.phase_end = self.move_to(t_k, self.pose(qx, qy, p.grasp_z - 0.02), 0.05 / p.lower_speed)
        elif phase == "release":
            self.force_loop = False
            self.grip_to(t_k, p.open_width, 0.3)
        elif phase == "retreat":
            here = self.ik.forward(self.arm.points[-1], self.q_full)
            self.phase_end = self.move_to(t_k, pin.SE3(here.rotation, here.translation + [0, 0, p.approach_height]),
                                          p.motion_time)

    def perceive(self) -> None:
        """Locate the object in one depth image of ``p.camera`` rendered now; the grasp goes there. Numbers:
        the perceived axis and top (m), the points used, and the error against the truth (read for the report
        only, never for control)."""
        p = self.p
        frame = self.link.camera_frame(p.camera)
        robot = [int(k) for k, e in self.link.camera_label_map().items() if e["kind"] == "link"]
        points = segment_object(frame, segmentation=p.segmentation, object_name=p.pick_object, robot_labels=robot,
                                support_z=p.support_z, near_xy=p.pick_xy, search_radius=p.search_radius)
        est = locate_upright_cylinder(points)
        self.pick_xy = (float(est.axis_xy[0]), float(est.axis_xy[1]))
        self.perceived = est
        self.numbers.update(pick_x_m=self.pick_xy[0], pick_y_m=self.pick_xy[1], perceived_top_z_m=est.top_z,
                            perceived_points=float(est.points), perception_sim_time_s=frame.t)
        if hasattr(self.link, "object_position"):
            true_xy = self.link.object_position(p.pick_object)[:2]
            self.numbers["perception_error_m"] = float(np.linalg.norm(np.asarray(self.pick_xy) - true_xy))

    @property
    def label(self) -> str:
        """The picked object as failure reasons name it: ``object_label``, else the scene's ``pick_object``."""
        return self.p.object_label or self.p.pick_object

    def fail(self, reason: str):
        self.verdict = Verdict(False, reason, self.numbers)

    def tick(self, t_k: int, st: dict) -> bool:
        """One control period at tick time t_k (ns) with the measurements ``st``; returns True when done."""
        p = self.p
        js = st["js"]
        q = np.array(js.position)
        load, grip, width = gripper_measurements(self.ik, self.q_full, st, self.FINGERS, p.ft_frame)
        self.log_t.append(t_k)
        self.log_q.append(q)
        self.log_v.append(np.array(js.velocity))
        self.log_grip.append(grip)
        self.log_load.append(load)
        self.log_phase.append(self.phase)
        self.grip_now, self.load_now = grip, load
        elapsed = (t_k - self.phase_t0) * 1e-9
        ph = self.phase
        if p.stop_at and ph == p.stop_at:
            self.verdict = Verdict(True, f"all checks passed up to phase {ph} (stop_at)", self.numbers)
            return True
        if self.force_loop:
            self.regulate_grip(t_k, grip)
        held = None if self.F0 is None else load - self.F0
        # continuous drop/slip monitoring while holding
        if ph in ("lift", "hold", "shake", "after_shake", "transfer") and width < p.min_opening:
            self.fail(f"slip: the fingers closed to {width * 1e3:.1f} mm per side during {ph} at "
                      f"t = {t_k * 1e-9:.3f} s: the {self.label} slipped out of the grasp")
            return True
        if ph == "tare":
            if elapsed >= 0.2:
                self._load_window.append(load)
            if elapsed >= 0.3:
                self.F0 = float(np.mean(self._load_window))
                self.numbers["tare_load_N"] = self.F0
                self.enter("look" if p.pick_source == "perception" else "approach", t_k)
        elif ph == "look" and t_k >= self.phase_end:
            self.phase, self.phase_t0 = "perceive", t_k
            # over ROS: subscribe to the camera now (the node renders only for readers), so its streams flow
            # before the image is taken
            self.link.watch_camera(p.camera, labels=True)
        # the arm at rest over the pick location: one image (over ROS: once the camera's streams have delivered,
        # so the image of this tick comes; in process at once)
        elif ph == "perceive" and elapsed >= 0.2 and self.link.camera_ready(p.camera):
            try:
                self.perceive()
            except PerceptionError as exc:
                self.fail(f"perception: camera {p.camera!r} did not find the {self.label}: {exc}")
                return True
            finally:
                self.link.unwatch_camera(p.camera)
            self.enter("approach", t_k)
        elif ph == "perceive" and elapsed >= 2.0:
            self.fail(f"perception: camera {p.camera!r}'s streams did not all arrive within 2 s of sim time "
                      f"(depth, camera_info, segmentation, TF)")
            return True
        elif ph in ("approach", "descend", "lift", "transfer", "retreat") and t_k >= self.phase_end:
            nxt = {"approach": "descend", "descend": "close", "lift": "hold", "transfer": "lower",
                   "retreat": "settle"}[ph]
            self._load_window = []
            self.phase, self.phase_t0 = nxt, t_k
            if nxt != "settle":
                self.enter(nxt, t_k)
        elif ph == "settle":       # at rest after retreating: the wrist must be back to the tare load
            if elapsed >= 0.1:
                self._load_window.append(load)
            if elapsed >= 0.3:
                final = float(np.mean(self._load_window)) - self.F0
                self.numbers["final_load_N"] = final
                if abs(final) > max(0.3 * self.held_load, 0.5):
                    self.fail(f"release: the wrist still carries {final:.2f} N after retreating")
                else:
                    self.verdict = Verdict(True, "picked, held through the shake, placed and released",
                                           self.numbers)
                return True
        elif ph == "close":
            err = abs(grip - p.grip_force) / p.grip_force
            self._close_ok = getattr(self, "_close_ok", 0) + 1 if err < 0.05 else 0
            if self._close_ok >= 5:
                self.numbers["close_time_s"] = elapsed
                self.enter("lift", t_k)
            elif width < p.min_opening:
                self.fail(f"grasp: the fingers closed to {width * 1e3:.1f} mm per side without the grip force "
                          f"(measured {grip:.2f} N): nothing between the fingers, the grasp missed the {self.label}")
                return True
            elif elapsed > 2.0:
                self.numbers["close_grip_force_N"] = grip
                if grip > p.grip_force:
                    self.fail(f"grasp: grip force overshoot: {grip:.2f} N above the commanded {p.grip_force:.2f} N, "
                              f"not within 5 % of it after 2 s")
                else:
                    self.fail(f"grasp: grip force undershoot: {grip:.2f} N did not reach the commanded "
                              f"{p.grip_force:.2f} N within 5 % in 2 s")
                return True
        elif ph == "hold":
            if elapsed >= p.hold_time / 3:
                self.grip_samples.append(grip)
                self._load_window.append(load)
            if elapsed >= p.hold_time:
                gs = np.array(self.grip_samples)
                self.held_load = float(np.mean(self._load_window[-len(gs):]) - self.F0)
                self.numbers.update(
                    hold_grip_force_mean_N=float(gs.mean()),
                    hold_grip_force_max_rel_error=float(np.max(np.abs(gs - p.grip_force)) / p.grip_force),
                    hold_grip_force_mean_rel_error=float(abs(gs.mean() - p.grip_force) / p.grip_force),
                    held_load_N=self.held_load, held_mass_kg=self.held_load / G)
                if self.held_load < p.min_held_load:
                    self.fail(f"slip: after lifting the wrist carries only {self.held_load:.2f} N "
                              f"(tare {self.F0:.2f} N): the {self.label} slipped out of the grasp or stayed down")
                    return True
                self.enter("shake", t_k)
        elif ph == "shake" and t_k < self.phase_end:
            self._shake_grip.append(grip)
        elif ph == "shake" and t_k >= self.phase_end:
            g = np.array(self._shake_grip)
            self.numbers.update(shake_grip_force_min_N=float(g.min()), shake_grip_force_max_N=float(g.max()))
            self.phase, self.phase_t0 = "after_shake", t_k
            self._load_window = []
        elif ph == "after_shake":
            if elapsed >= 0.3:
                self._load_window.append(load)
            if elapsed >= 0.5:
                after = float(np.mean(self._load_window)) - self.F0
                self.numbers["load_after_shake_N"] = after
                if after < 0.8 * self.held_load:
                    self.fail(f"slip: the shake dropped the load from {self.held_load:.2f} N to {after:.2f} N")
                    return True
                self.enter("transfer", t_k)
        elif ph == "lower":    # fast: the arm's own acceleration changes the wrist load, so no detection here
            if t_k >= self.phase_end:
                self.enter("touch", t_k)
        elif ph == "touch":       # (the first 0.1 s: the arm still rings from the fast approach)
            if elapsed >= 0.1 and held < 0.5 * self.held_load:
                tcp = self.ik.forward(positions_of(js, self.ARM), self.q_full).translation
                self.numbers["placed_at_tcp_z_m"] = float(tcp[2])
                self.numbers["placed_at_t_s"] = t_k * 1e-9
                self.numbers["placed_load_N"] = held
                self.hold_arm(t_k)
                self.phase, self.phase_t0 = "placed", t_k
            elif ph == "touch" and t_k >= self.phase_end:
                self.fail(f"place: no load change while lowering to the support (held {held:.2f} N)")
                return True
        elif ph == "placed" and elapsed >= 0.1:
            self.enter("release", t_k)
        elif ph == "release" and elapsed >= 0.5:
            self.enter("retreat", t_k)
        return False


RUN_NUMBERS = ("sim_time_s", "wall_time_s", "real_time_factor")     # what run_controller adds to every Verdict


def run_controller(controller, link, duration: float | None = None, progress=None, progress_every: float = 0.5):
    """Drive ``controller`` through ``link`` until it reports done (or ``duration`` s of sim time passed).
    ``progress(dict)`` is called every ``progress_every`` s of sim time. Returns the controller's Verdict."""
    t0, urdf = link.start()
    controller.setup(link, t0, urdf)
    wall0, sim0 = time.monotonic(), t0
    last_report = t0
    need = getattr(controller, "needs", None) or (("ft", "ext") if getattr(controller, "ft_topic", None)
                                                  else ("ext",))
    t = t0
    while True:
        st = link.state(need=need)
        if controller.tick(t, st):
            break
        if duration is not None and (t - t0) * 1e-9 >= duration:
            controller.verdict = controller.verdict or Verdict(
                True, f"ran {duration:.2f} s without failure (phase {controller.phase})", controller.numbers)
            if hasattr(controller, "finish"):
                controller.finish(t)
            break
        t = link.advance()
        if progress is not None and (t - last_report) * 1e-9 >= progress_every - 1e-9:
            wall = time.monotonic() - wall0
            progress({"phase": controller.phase, "t": t * 1e-9,
                      "rtf": (t - sim0) * 1e-9 / wall if wall > 0 else float("nan"),
                      "grip_force": getattr(controller, "grip_now", float("nan")),
                      "load": getattr(controller, "load_now", float("nan"))})
            last_report = t
    wall = time.monotonic() - wall0
    v = controller.verdict
    v.numbers["sim_time_s"] = (t - t0) * 1e-9
    v.numbers["wall_time_s"] = wall
    v.numbers["real_time_factor"] = (t - t0) * 1e-9 / wall if wall > 0 else float("nan")
    return v


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="pick_shake_place", description=__doc__.split("\n\n")[0])
    ap.add_argument("--namespace", default="")
    ap.add_argument("--mode", default="clock", choices=["lockstep", "clock"])
    ap.add_argument("--period", type=float, default=0.02, help="control period (s)")
    ap.add_argument("--grip-force", type=float, default=20.0, help="N per finger")
    args = ap.parse_args(argv)
    from .robot_link import RobotLink     # deferred: rclpy, only for a run over ROS (a campaign trial is in process)
    c = PickShakePlace(PickShakePlaceParams(grip_force=args.grip_force))
    link = RobotLink(args.namespace, args.period, args.mode, ft_topic=c.ft_topic,
                     trajectory_controllers=c.trajectory_controllers)
    try:
        v = run_controller(c, link, progress=lambda d: print(
            f"[{d['phase']:>11}] t = {d['t']:6.2f} s  rtf {d['rtf']:5.2f}  grip {d['grip_force']:6.2f} N", flush=True))
    finally:
        link.close()
    print(("SUCCESS: " if v.success else "FAILURE: ") + v.reason)
    print({k: round(x, 4) if isinstance(x, float) else x for k, x in v.numbers.items()})
    return 0 if v.success else 1


if __name__ == "__main__":
    sys.exit(main())
