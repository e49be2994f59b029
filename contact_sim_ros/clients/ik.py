"""Jacobian (damped least-squares) inverse kinematics and Cartesian keyframe interpolation for the scenario
controllers. No rclpy here: the controllers build it from the ``robot_description`` URDF string the driver
(or the simulation node) publishes, so it is unit-tested without ROS (test/test_ik.py).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pinocchio as pin

from ..errors import ConfigError, ModelError


SOLVE_MEMO: dict = {}         # JacobianIK.solve's results in this process (cleared when it holds SOLVE_MEMO_SIZE)
SOLVE_MEMO_SIZE = 20_000      # ~300 B each


class JacobianIK:
    """Damped least-squares IK of one frame over a chosen set of revolute/prismatic joints.

    ``solve(target, q_seed)`` iterates ``dq = J^T (J J^T + lambda^2 I)^-1 e`` with the 6-D pose error
    ``e = log6(oMf^-1 oMtarget)`` expressed in the LOCAL_WORLD_ALIGNED frame (linear m, angular rad); the
    other joints stay at their seed values. Joint limits are enforced by clamping every iterate.
    """

    def __init__(self, urdf_xml: str, tip_frame: str, joints: list[str] | tuple[str, ...],
                 damping: float = 1e-3, max_iterations: int = 200, tolerance: float = 1e-6,
                 max_step: float = 0.2):
        """``urdf_xml``: the robot's URDF as a string; ``tip_frame``: a link or frame name; ``joints``: the
        joints the solver moves (1-dof joints); damping lambda (m or rad); tolerance on |e| (m / rad);
        max_step: largest joint change per iteration (rad or m)."""
        self.model = pin.buildModelFromXML(urdf_xml)
        self.data = pin.Data(self.model)
        if not self.model.existFrame(tip_frame):
            raise ModelError(f"IK tip frame {tip_frame!r} is not in the URDF; frames: "
                             f"{', '.join(f.name for f in self.model.frames)}")
        self.frame = self.model.getFrameId(tip_frame)
        names = list(self.model.names)
        missing = [j for j in joints if j not in names]
        if missing:
            raise ModelError(f"IK joints {missing} are not in the URDF; joints: {', '.join(names[1:])}")
        self.joints = tuple(joints)
        ids = [self.model.getJointId(j) for j in joints]
        if any(self.model.joints[i].nq != 1 for i in ids):
            raise ModelError(f"IK supports 1-dof joints only; got {list(joints)}")
        self.iq = np.array([self.model.joints[i].idx_q for i in ids])
        self.iv = np.array([self.model.joints[i].idx_v for i in ids])
        self.lower = self.model.lowerPositionLimit[self.iq]
        self.upper = self.model.upperPositionLimit[self.iq]
        self.damping, self.max_iterations, self.tolerance, self.max_step = (
            float(damping), int(max_iterations), float(tolerance), float(max_step))
        self.q_full = pin.neutral(self.model)
        # solve()'s memo (SOLVE_MEMO): a solve is a pure function of the target, the IK joints' start and the
        # configuration of the joints that move the tip (its support), for one model and these settings
        support = self.model.supports[self.model.frames[self.frame].parentJoint]
        self._support_q = np.array([k for i in support if self.model.joints[i].nq > 0 for k in
                                    range(self.model.joints[i].idx_q, self.model.joints[i].idx_q
                                          + self.model.joints[i].nq)], dtype=np.intp)
        self._urdf_digest = hashlib.sha256(urdf_xml.encode()).digest()
        self._J = np.zeros((6, self.model.nv))
        self._configuration_index: dict = {}      # joint name list -> configuration_indices
        self._frame_ids: dict = {}                # frame name -> id (frame_pose)

    def full_configuration(self, positions: dict[str, float]) -> np.ndarray:
        """Pinocchio configuration from joint name -> value (joints not given: neutral)."""
        q = pin.neutral(self.model)
        for name, value in positions.items():
            if self.model.existJointName(name):
                j = self.model.joints[self.model.getJointId(name)]
                if j.nq == 1:
                    q[j.idx_q] = value
        return q

    def configuration_indices(self, names) -> tuple[np.ndarray, np.ndarray]:
        """(i, k) for the 1-dof joints of a joint name list (e.g. a joint_states message's): ``names[i[n]]`` is
        the joint at ``q[k[n]]`` of this model's configuration (cached per name list: controllers read one
        message layout every tick)."""
        key = tuple(names)
        hit = self._configuration_index.get(key)
        if hit is None:
            src, dst = [], []
            for i, name in enumerate(key):
                if self.model.existJointName(name):
                    j = self.model.joints[self.model.getJointId(name)]
                    if j.nq == 1:
                        src.append(i)
                        dst.append(j.idx_q)
            hit = self._configuration_index[key] = (np.array(src, dtype=np.intp), np.array(dst, dtype=np.intp))
        return hit

    def forward(self, q_arm: np.ndarray, q_full: np.ndarray | None = None) -> pin.SE3:
        """World pose of the tip frame with the IK joints at ``q_arm`` (others from ``q_full``)."""
        q = (self.q_full if q_full is None else q_full).copy()
        q[self.iq] = q_arm
        return self._placement(q, self.frame).copy()

    def _placement(self, q: np.ndarray, frame: int) -> pin.SE3:
        """World pose of frame ``frame`` at ``q`` (``data.oMf[frame]``, updated alone: the joints' forward kinematics
        and that frame's placement, the same product framesForwardKinematics computes for every frame)."""
        pin.forwardKinematics(self.model, self.data, q)
        return pin.updateFramePlacement(self.model, self.data, frame)

    def frame_pose(self, frame: str, q_full: np.ndarray) -> pin.SE3:
        """World pose of any frame at the full configuration ``q_full``."""
        fid = self._frame_ids.get(frame)
        if fid is None:
            if not self.model.existFrame(frame):
                raise ModelError(f"no frame {frame!r} in the URDF; frames: "
                                 f"{', '.join(f.name for f in self.model.frames)}")
            fid = self._frame_ids[frame] = self.model.getFrameId(frame)
        return self._placement(q_full, fid).copy()

    def solve(self, target: pin.SE3, q_seed: np.ndarray, q_full: np.ndarray | None = None):
        """(q_arm, converged, error norm) reaching ``target`` (world pose of the tip) from ``q_seed``.

        Memoised per process (``SOLVE_MEMO``, keyed on the model's URDF text (its SHA-256) and settings, the
        target's bytes and the start configuration of the tip's support joints): a campaign's trials repeat the
        same Cartesian moves, and a repeated solve returns the numbers it computed the first time (bit-identical: the
        iteration reads nothing else)."""
        q = (self.q_full if q_full is None else q_full).copy()
        iq, lower, upper, model, data, frame = self.iq, self.lower, self.upper, self.model, self.data, self.frame
        x = np.clip(q_seed, lower, upper)       # the IK joints' values (q[iq])
        q[iq] = x
        key = (self._urdf_digest, frame, self.joints, self.damping, self.max_iterations, self.tolerance,
               self.max_step, lower.tobytes(), upper.tobytes(), target.homogeneous.tobytes(),
               q[self._support_q].tobytes())
        hit = SOLVE_MEMO.get(key)
        if hit is not None:
            return hit[0].copy(), hit[1], hit[2]
        x, converged, err = self._iterate(target, q, x)
        if len(SOLVE_MEMO) >= SOLVE_MEMO_SIZE:
            SOLVE_MEMO.clear()
        SOLVE_MEMO[key] = (x.copy(), converged, err)
        return x, converged, err

    def _iterate(self, target: pin.SE3, q: np.ndarray, x: np.ndarray):
        """solve()'s damped least-squares iteration from ``q`` (full configuration, the IK joints at ``x``)."""
        iq, lower, upper, model, data, frame = self.iq, self.lower, self.upper, self.model, self.data, self.frame
        damping = self.damping ** 2 * np.eye(6)
        err = np.inf
        # (per iteration ~20 small numpy / Pinocchio calls: the ndarray methods and math.sqrt instead of the numpy
        # functions' wrappers; |e| is np.linalg.norm's sqrt(e . e))
        for _ in range(self.max_iterations):
            oMf = self._placement(q, frame)
            e_local = pin.log6(oMf.actInv(target)).vector            # error twist in the tip frame
            # express in LOCAL_WORLD_ALIGNED axes (rotate linear and angular parts)
            R = oMf.rotation
            e = np.concatenate((R @ e_local[:3], R @ e_local[3:]))
            err = math.sqrt(e.dot(e))
            if err < self.tolerance:
                break
            self._J = pin.computeFrameJacobian(model, data, q, frame, pin.LOCAL_WORLD_ALIGNED)
            J = self._J[:, self.iv]
            dq = J.T @ np.linalg.solve(J @ J.T + damping, e)
            n = np.abs(dq).max()
            if n > self.max_step:
                dq *= self.max_step / n
            x = (x + dq).clip(lower, upper)
            q[iq] = x
        return x, err < self.tolerance, err

    def jacobian(self, q_arm: np.ndarray, q_full: np.ndarray | None = None) -> np.ndarray:
        """6 x n_joints frame Jacobian (LOCAL_WORLD_ALIGNED: linear m/rad... then angular)."""
        q = (self.q_full if q_full is None else q_full).copy()
        q[self.iq] = q_arm
        self._J = pin.computeFrameJacobian(self.model, self.data, q, self.frame, pin.LOCAL_WORLD_ALIGNED)
        return self._J[:, self.iv].copy()


def min_jerk(s: np.ndarray | float) -> np.ndarray:
    """Minimum-jerk time scaling 10 s^3 - 15 s^4 + 6 s^5 of the normalised time s in [0, 1]."""
    s = np.clip(np.asarray(s, float), 0.0, 1.0)
    return s ** 3 * (10.0 - 15.0 * s + 6.0 * s * s)


def interpolate_pose(a: pin.SE3, b: pin.SE3, s: float) -> pin.SE3:
    """Pose a fraction s in [0, 1] of the way from a to b (translation linear, rotation along the geodesic)."""
    return pin.SE3(a.rotation @ pin.exp3(s * pin.log3(a.rotation.T @ b.rotation)),
                   a.translation + s * (b.translation - a.translation))


def interpolate_poses(a: pin.SE3, b: pin.SE3, s_values) -> list[pin.SE3]:
    """``[interpolate_pose(a, b, s) for s in s_values]`` (the same operations) with the rotation's log from a to b and
    the translation's difference computed once."""
    Ra, pa = a.rotation, a.translation
    w = pin.log3(Ra.T @ b.rotation)
    d = b.translation - pa
    return [pin.SE3(Ra @ pin.exp3(s * w), pa + s * d) for s in s_values]


def joint_path(ik: JacobianIK, poses: list[pin.SE3], q_seed: np.ndarray, what: str = "path",
               tolerance: float = 1e-4) -> np.ndarray:
    """IK of a sequence of nearby poses, each warm-started from the previous solution; (n, n_joints).
    Raises ConfigError naming the first unreachable pose."""
    out = np.empty((len(poses), len(ik.joints)))
    q = np.asarray(q_seed, float)
    for i, pose in enumerate(poses):
        q, ok, err = ik.solve(pose, q)
        if err > tolerance:
            raise ConfigError(f"{what}: pose {i} at {np.round(pose.translation, 4).tolist()} m is unreachable "
                              f"for {ik.model.frames[ik.frame].name} (IK error {err:.2e})")
        out[i] = q
    return out
