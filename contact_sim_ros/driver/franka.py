"""The Franka driver-side rules (franka_ros2, no rclpy): the ``franka_gripper`` node's homing / move / grasp /
gripper_action on the emulated gripper controller, and the external wrench estimate of
``franka_robot_state_broadcaster`` (FrankaRobotState's ``o_f_ext_hat_k`` / ``k_f_ext_hat_k``).

Gripper (libfranka's franka::Gripper, as franka_gripper calls it). Widths are the distance between the fingers
(m), twice the finger joint ``panda_finger_joint1`` (its ``<mimic>`` follows). Every goal runs on the emulated
GripperActionController of that joint (driver/controllers/gripper_action.py: position target, effort limit,
stall detection), so the fingers stop on an object and then press on it with the goal's force:

* ``move(width, speed)``: position target width / 2 at the finger's URDF effort limit; succeeds when reached
  (or stalled at it: an object in the way is a failure, as libfranka's move reports);
* ``homing()``: ``move`` to the maximum width (2 x the finger's upper limit; libfranka calibrates there);
* ``grasp(width, epsilon inner/outer, speed, force)``: the fingers close (target 0) with ``force`` (N, the
  effort limit of the finger joint: once stalled on the object they press with it, the hand's grasp force);
  succeeds if the final width w satisfies width - inner <= w <= width + outer (libfranka's rule; nothing
  grasped closes the fingers and fails unless width - inner <= 0);
* ``gripper_action`` (control_msgs GripperCommand, franka_gripper's translation): command.position is half
  the width; a larger width than the current one is a ``move`` at the default speed, a smaller one a ``grasp``
  at the default speed and epsilons with force command.max_effort.

``speed`` is checked (> 0) but not emulated: the fingers move as the finger's position drive moves them.

External wrench (libfranka's estimate): O_F_ext_hat_K = pinv(J_K^T) tau_ext, with tau_ext the external joint
torques of the 7 arm joints (the generalized contact force, N*m) and J_K the 6x7 Jacobian of the stiffness frame
K (here = the end effector frame EE) with linear rows first, in base axes (LOCAL_WORLD_ALIGNED rotated into the
base). It is the wrench (N, N*m) the environment applies to the robot, referred to the origin of K: contacts on
the hand or the fingers give exactly their net wrench about that point (the arm's torques are J_K^T W), contacts
on the arm's links are projected as libfranka projects them. K_F_ext_hat_K is the same wrench in K's axes.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pinocchio as pin

from .controllers.gripper_action import GoalRejected, GripperActionController, GripperGoal

DEFAULT_SPEED = 0.1           # m/s   (franka_gripper_node.yaml)
DEFAULT_EPSILON = 0.005       # m     (inner and outer)
SAME_POSITION = 1e-4          # m     (franka_gripper: a GripperCommand already at its width succeeds at once)

# The Franka Hand's finger drive (its own motor, commanded by franka_gripper through libfranka, not by ros2_control):
# the position drive and the gripper controller's settings of the package's franka preset (config/robots/
# franka.yaml gains, config/ros2_control/franka_controllers.yaml gripper_action_controller), for a user's robot.
HAND_GAINS = (2000.0, 40.0)   # kp N/m, kd N*s/m
HAND_GRIPPER_PARAMETERS = {"action_monitor_rate": 20.0, "goal_tolerance": 0.002, "max_effort": 70.0,
                           "allow_stalling": True, "stall_velocity_threshold": 0.001, "stall_timeout": 0.5}
GRIPPER_TYPE = "position_controllers/GripperActionController"


# ------------------------------------------------------------------------------------------ the hand


@dataclasses.dataclass(frozen=True)
class FrankaHand:
    """A Franka Hand of a model: ``finger`` the actuated ``<arm_id>_finger_joint1``, ``mimic`` its ``<mimic>``
    ``<arm_id>_finger_joint2`` (franka_description's end_effectors/common/franka_hand.xacro; arm_id fr3, fp3, fer,
    panda ...)."""

    finger: str
    mimic: str


def franka_hands(model) -> list[FrankaHand]:
    """The Franka Hands of ``model`` (a MultibodyModel), recognised by franka_description's names: an actuated
    ``<p>finger_joint1``, its ``<mimic>`` ``<p>finger_joint2`` and the finger links ``<p>leftfinger`` and
    ``<p>rightfinger``, whatever the prefix ``<p>`` (``fr3_``, ``panda_``, a robot prefix in front)."""
    pm = model.pin_model
    out = []
    for mj in model.mimic_joints:
        if not mj.name.endswith("finger_joint2"):
            continue
        p = mj.name[:-len("finger_joint2")]
        if mj.primary != p + "finger_joint1" or mj.primary not in model.joint_names:
            continue
        if pm.existFrame(p + "leftfinger") and pm.existFrame(p + "rightfinger"):
            out.append(FrankaHand(mj.primary, mj.name))
    return out


def with_hand_drives(scene, hands=None):
    """``scene`` (a sim.scene.Scene) with a position drive (``HAND_GAINS``) on the finger of every Franka Hand
    (``hands``, default ``franka_hands(scene.model)``) that its robot leaves without one: a robot that declares its
    drives (its ``<ros2_control>`` block, as franka_description's FR3 block, names the arm joints only: the hand is
    franka_gripper's device) would leave the finger passive (sim/default_gains.py ``drive_plan``). A robot that
    declares none (a bare URDF: every joint gets a default drive), a finger with gains or a declared drive, and a
    finger named in ``passive_joints`` are left as they are. Returns the scene (its robots replaced in place)."""
    hands = franka_hands(scene.model) if hands is None else hands
    passive = set(scene.passive_joints)
    for k, robot in enumerate(scene.robots):
        declares = bool(robot.gains) or bool(robot.driven_joints)
        inst = next((i for i in scene.model.robots if i.name == robot.name), None)
        own = set(inst.joint_names) if inst is not None else set()
        add = {h.finger: HAND_GAINS for h in hands if h.finger in own and h.finger not in robot.gains
               and h.finger not in robot.driven_joints and h.finger not in passive}
        if declares and add:
            new = dataclasses.replace(robot, gains={**robot.gains, **add})
            if scene.robot is robot:
                scene.robot = new
            scene.robots[k] = new
    return scene


def hand_gripper(hand: FrankaHand, ctx, name: str = "franka_gripper") -> GripperActionController:
    """The emulated gripper of ``hand`` (what franka_gripper commands through libfranka): a GripperActionController
    on its finger with the hand's settings (``HAND_GRIPPER_PARAMETERS``) over the controller context ``ctx``; run
    as a device of the robot's controller manager (ControllerManager.add_device), not as a listed controller."""
    return GripperActionController(name, GRIPPER_TYPE, {"joint": hand.finger, **HAND_GRIPPER_PARAMETERS}, ctx)


def grasp_succeeded(width: float, target: float, inner: float, outer: float) -> bool:
    """libfranka's grasp success: the final ``width`` (m) within [target - inner, target + outer]."""
    return target - inner <= width <= target + outer


class FrankaGripperGoal(GripperGoal):
    """A homing / move / grasp goal on the gripper controller; ``kind`` and, for grasp, the epsilons."""

    def __init__(self, kind: str, width: float, position: float, max_effort: float, inner=0.0, outer=0.0):
        super().__init__(position, max_effort)
        self.kind, self.width, self.inner, self.outer = kind, width, inner, outer

    def outcome(self) -> tuple[bool, str, float]:
        """(success, error, final width m) of the ended goal (libfranka's rules, see the module docstring)."""
        width = 2.0 * self.measured[0]
        if self.status == "canceled":
            return False, "canceled", width
        if self.status not in ("succeeded", "aborted"):
            return False, "the gripper stopped (the controller was deactivated or the simulation stopped)", width
        stalled, reached = self.measured[2], self.measured[3]
        if self.kind == "grasp":
            ok = grasp_succeeded(width, self.width, self.inner, self.outer)
            return ok, "" if ok else (f"grasp failed: width {width:.4f} m outside [{self.width - self.inner:.4f}, "
                                      f"{self.width + self.outer:.4f}] m"), width
        if reached:
            return True, "", width
        return False, (f"{self.kind} failed: stopped at width {width:.4f} m, target {self.width:.4f} m"
                       + (" (blocked by an object)" if stalled else "")), width


class FrankaGripper:
    """franka_gripper's actions on the GripperActionController ``controller`` of the finger joint;
    ``finger_position()`` reads the finger joint's position (m) from any thread (the state interfaces belong to
    the stepping thread)."""

    def __init__(self, controller: GripperActionController, finger_position):
        self.c = controller
        self._finger_position = finger_position
        ctx = controller.ctx
        self.max_width = 2.0 * float(ctx.limits.upper[controller.i])          # m
        self.max_force = float(ctx.limits.effort[controller.i])               # N

    @property
    def width(self) -> float:
        """The current width (m)."""
        return 2.0 * float(self._finger_position())

    def _check(self, what: str, width: float, speed: float) -> None:
        if not (math.isfinite(width) and 0.0 <= width <= self.max_width + 1e-9):
            raise GoalRejected(f"franka_gripper/{what}: width {width} m outside [0, {self.max_width:g}] m")
        if not (math.isfinite(speed) and speed > 0.0):
            raise GoalRejected(f"franka_gripper/{what}: speed must be > 0 m/s, got {speed}")

    def move(self, width: float, speed: float) -> FrankaGripperGoal:
        width, speed = float(width), float(speed)
        self._check("move", width, speed)
        return FrankaGripperGoal("move", width, width / 2.0, self.max_force)

    def homing(self) -> FrankaGripperGoal:
        return FrankaGripperGoal("homing", self.max_width, self.max_width / 2.0, self.max_force)

    def grasp(self, width: float, speed: float, force: float, inner: float, outer: float) -> FrankaGripperGoal:
        width, speed, force, inner, outer = map(float, (width, speed, force, inner, outer))
        self._check("grasp", width, speed)
        if not (math.isfinite(force) and 0.0 < force):
            raise GoalRejected(f"franka_gripper/grasp: force must be > 0 N, got {force}")
        if not (math.isfinite(inner) and math.isfinite(outer) and inner >= 0.0 and outer >= 0.0):
            raise GoalRejected(f"franka_gripper/grasp: epsilon inner/outer must be >= 0 m, got {inner}, {outer}")
        return FrankaGripperGoal("grasp", width, 0.0, min(force, self.max_force), inner, outer)

    def gripper_command(self, position: float, max_effort: float, speed: float, inner: float, outer: float):
        """GripperCommand as franka_gripper translates it (``position`` half the width, m; ``max_effort`` N):
        a FrankaGripperGoal, or None when the width is already there (succeeds at once)."""
        target = 2.0 * float(position)
        if not (math.isfinite(target) and 0.0 <= target <= self.max_width + 1e-9):
            raise GoalRejected(f"franka_gripper/gripper_action: width {target} m (2 x command.position) outside "
                               f"[0, {self.max_width:g}] m")
        current = self.width
        if abs(target - current) < SAME_POSITION:
            return None
        if target >= current:
            return self.move(target, speed)
        force = float(max_effort) if max_effort and max_effort > 0 else self.max_force
        return self.grasp(target, speed, force, inner, outer)

    def submit(self, goal: FrankaGripperGoal) -> None:
        self.c.submit(goal)


# ------------------------------------------------------------------------------------------ robot state


class ExternalWrenchEstimate:
    """FrankaRobotState's pose and external wrench of one arm: ``arm_v`` the velocity indices of its 7 joints,
    ``base_frame`` and ``ee_frame`` pinocchio frame ids (K = EE)."""

    def __init__(self, pin_model, arm_v, base_frame: int, ee_frame: int):
        self.pm, self.data = pin_model, pin_model.createData()
        self.arm_v = np.asarray(arm_v, dtype=int)
        self.base, self.ee = int(base_frame), int(ee_frame)

    def compute(self, q: np.ndarray, tau_ext: np.ndarray):
        """(O_T_EE (4, 4), O_F_ext_hat_K (6,), K_F_ext_hat_K (6,)) at configuration ``q`` from the arm's external
        torques ``tau_ext`` (7,) (N*m): wrenches (force N, torque N*m) about K's origin, base / K axes."""
        pm, d = self.pm, self.data
        pin.computeJointJacobians(pm, d, q)
        pin.updateFramePlacements(pm, d)
        J = pin.getFrameJacobian(pm, d, self.ee, pin.LOCAL_WORLD_ALIGNED)[:, self.arm_v]   # world axes, EE origin
        w_world = np.linalg.lstsq(J.T, np.asarray(tau_ext, dtype=float), rcond=None)[0]   # pinv(J^T) tau
        oMb, oMe = d.oMf[self.base], d.oMf[self.ee]
        Rb, Re = oMb.rotation, oMe.rotation
        o_f = np.concatenate((Rb.T @ w_world[:3], Rb.T @ w_world[3:]))
        k_f = np.concatenate((Re.T @ w_world[:3], Re.T @ w_world[3:]))
        return (oMb.actInv(oMe)).homogeneous, o_f, k_f
