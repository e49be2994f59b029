"""The immutable multibody model of a whole scene: robot + free objects + static environment.

Everything lives in ONE Pinocchio model so that the state is one (q, v) pair and the mass matrix is one
block-diagonal matrix (one block per kinematic tree, see ``tree_velocity_slices``):

* the robot's joints hang off the universe at the robot's base pose (fixed base); with several robots (scene key
  ``robots:``, model/composition.py) each hangs off the universe or off a link of another robot (a hand on an
  arm's flange), its names prefixed, and ``robots`` says which joints and links belong to which robot;
* every free object is a free-flyer joint (nq 7: xyz + quaternion xyzw, nv 6: linear + angular velocity in
  the body's LOCAL frame, Pinocchio's convention) hanging off the universe;
* static environment geometry (ground, table, walls) is attached to the universe joint (index 0).

The model is built once by ``contact_sim_ros.model.loader`` and never changed while stepping; per-step
scratch lives in Pinocchio ``Data`` objects owned by the simulator and the engines.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..errors import ModelError, unknown_choice


@dataclass(frozen=True)
class MimicJoint:
    """A URDF ``<mimic>`` joint: q_mimic = multiplier * q_primary + offset (not a degree of freedom)."""

    name: str
    primary: str
    multiplier: float
    offset: float


@dataclass(frozen=True)
class MimicExpansion:
    """The state of a model's mimic joints from its actuated joints' (the URDF ``<mimic>`` rule, written once):
    q_m = multiplier q_primary + offset (rad or m), v_m = multiplier v_primary, no effort of their own. In the
    order of ``MultibodyModel.mimic_joints`` (what /joint_states lists after the actuated joints)."""

    names: tuple[str, ...]
    primary: np.ndarray        # (m,) index of each one's primary joint in the actuated joints (``joint_names``)
    multiplier: np.ndarray     # (m,)
    offset: np.ndarray         # (m,) rad or m

    @staticmethod
    def of(model: "MultibodyModel") -> "MimicExpansion":
        mimic = model.mimic_joints
        return MimicExpansion(tuple(mj.name for mj in mimic),
                              np.array([model.joint_index(mj.primary) for mj in mimic], dtype=int),
                              np.array([mj.multiplier for mj in mimic], dtype=float),
                              np.array([mj.offset for mj in mimic], dtype=float))

    def __len__(self) -> int:
        return len(self.names)

    def positions(self, q: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """(m,) positions from the actuated joints' q (into ``out`` when given)."""
        out = np.multiply(q[self.primary], self.multiplier, out=out)
        out += self.offset
        return out

    def velocities(self, v: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """(m,) velocities from the actuated joints' v (into ``out`` when given)."""
        return np.multiply(v[self.primary], self.multiplier, out=out)


@dataclass(frozen=True)
class FreeBody:
    """A free-floating object of the scene (one free-flyer joint)."""

    name: str
    joint_id: int          # Pinocchio joint index
    frame_name: str        # its body frame (= the object's root link name)
    q_slice: slice         # 7 entries: position (m) + quaternion (x, y, z, w)
    v_slice: slice         # 6 entries: linear (m/s) + angular (rad/s) velocity, body LOCAL frame
    mass: float            # kg


@dataclass(frozen=True, eq=False)
class RobotInstance:
    """One robot of the model (``MultibodyModel.robots``). A scene with ``robot:`` has one, named after its preset,
    with prefix ''. Every name here is the model's (prefixed) name."""

    name: str                           # unique in the scene ('robot:': the preset name, e.g. iiwa_wsg)
    prefix: str                         # prepended to each of its joint, link, frame and geometry names
    preset: str                         # the robot preset / URDF it was made from (e.g. iiwa_wsg)
    joint_names: tuple[str, ...]        # its actuated joints, in model order
    joint_indices: np.ndarray           # (n,) int, read-only: their indices into MultibodyModel.joint_names
    mimic_joint_names: tuple[str, ...]  # its URDF <mimic> joints (not degrees of freedom)
    link_names: tuple[str, ...]         # every URDF link of it (Pinocchio BODY frames)
    base_frame: str                     # its root link
    parent_robot: str | None            # the robot it is mounted on (None: the world)
    parent_frame: str                   # the link it is mounted on ('universe': the world)
    base_placement: pin.SE3             # pose of base_frame in parent_frame


@dataclass(frozen=True, eq=False)
class MultibodyModel:
    """Immutable scene model. Array fields are read-only numpy arrays.

    Joint-space arrays indexed by velocity index have length ``nv``; arrays indexed by actuated joint have
    length ``len(joint_names)`` and map to velocities through ``joint_v_index``.
    """

    pin_model: pin.Model
    collision_model: pin.GeometryModel
    source: str                          # where it came from (file path or '<string>'), for messages

    # Actuated 1-dof joints of the robot (revolute, continuous, prismatic), in velocity order.
    joint_names: tuple[str, ...]
    joint_q_index: np.ndarray            # (nj,) int: index into q
    joint_v_index: np.ndarray            # (nj,) int: index into v
    position_lower: np.ndarray           # (nj,) rad or m (-inf for continuous joints)
    position_upper: np.ndarray           # (nj,) rad or m (+inf for continuous joints)
    velocity_limit: np.ndarray           # (nj,) rad/s or m/s (inf if unknown)
    effort_limit: np.ndarray             # (nj,) N*m or N (inf if unknown)
    mimic_joints: tuple[MimicJoint, ...]

    # Per generalized velocity (nv,)
    joint_damping: np.ndarray            # viscous damping, N*m*s/rad or N*s/m (applied implicitly)
    joint_friction: np.ndarray           # Coulomb joint friction, N*m or N
    actuated: np.ndarray                 # bool: True for robot joint dofs, False for free-body dofs

    free_bodies: tuple[FreeBody, ...]
    tree_velocity_slices: tuple[slice, ...]   # block-diagonal structure of M: one slice per tree

    # Collision geometry (G geometries, P candidate pairs)
    geometry_names: tuple[str, ...]
    geometry_parent_joint: np.ndarray    # (G,) int Pinocchio joint index (0 = static world)
    geometry_stiffness: np.ndarray       # (G,) N/m
    geometry_dissipation: np.ndarray     # (G,) s/m (Hunt & Crossley)
    geometry_friction: np.ndarray        # (G,)
    geometry_restitution: np.ndarray     # (G,)
    collision_pairs: np.ndarray          # (P, 2) int geometry indices (a < b), after filtering

    gravity: np.ndarray                  # (3,) m/s^2, world frame

    robots: tuple[RobotInstance, ...] = ()   # the robots, in the scene's order (empty without a robot)

    @property
    def nq(self) -> int:
        return self.pin_model.nq

    @property
    def nv(self) -> int:
        return self.pin_model.nv

    def joint_index(self, name: str) -> int:
        """Index of an actuated joint in ``joint_names`` (ModelError listing the joints if unknown)."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise ModelError(f"{self.source}: " + unknown_choice("joint", name, self.joint_names)) from None

    def robot(self, name: str) -> RobotInstance:
        """The robot named ``name`` (ModelError listing the robots if unknown)."""
        for r in self.robots:
            if r.name == name:
                return r
        raise ModelError(f"{self.source}: " + unknown_choice("robot", name, [r.name for r in self.robots]))

    def robot_of_joint(self, name: str) -> RobotInstance | None:
        """The robot owning joint ``name`` (actuated or mimic), None for free-body joints / unknown names."""
        for r in self.robots:
            if name in r.joint_names or name in r.mimic_joint_names:
                return r
        return None

    def free_body(self, name: str) -> FreeBody:
        for body in self.free_bodies:
            if body.name == name:
                return body
        raise ModelError(f"{self.source}: " + unknown_choice("free body", name, [b.name for b in self.free_bodies]))


def model_body_names(model: MultibodyModel) -> list[str]:
    """Names a user may give for a body: free objects and the robot's links (Pinocchio BODY frames)."""
    free = {b.joint_id for b in model.free_bodies}
    links = [f.name for f in model.pin_model.frames
             if f.type == pin.FrameType.BODY and f.parentJoint not in free]
    return [b.name for b in model.free_bodies] + links


def parent_link_frame(pin_model, frame_id: int) -> int:
    """The BODY frame of the parent link of link ``frame_id`` (0 for the universe): the TF tree's parent and the
    F/T sensors' link chains."""
    f = pin_model.frames[frame_id].parentFrame
    while f > 0 and pin_model.frames[f].type != pin.FrameType.BODY:
        f = pin_model.frames[f].parentFrame
    return f
