"""Force/torque sensing from the simulator state (pure numpy + Pinocchio; no rclpy).

* :func:`contact_world_forces`: contact forces (N) in the world frame from a step's contact impulses.
* :class:`ContactWrenchAccumulator`: net contact wrench on named bodies (links or free objects).
* :func:`joint_contact_wrenches`: contact wrenches per Pinocchio joint (the F/T sensor's external forces:
  sensors/force_torque.py holds the F/T sensor).
* :func:`external_joint_torques`: generalized contact forces J^T f on the actuated joints.

Conventions: a contact force ``f_i`` (world frame) acts on geometry B of contact i at its world point ``p_i``,
``-f_i`` on geometry A (``geometry/contact_set.py``). Wrenches are (force N, torque N*m) 6-vectors.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from ..errors import ConfigError, unknown_choice
from ..model.multibody_model import parent_link_frame


def cross_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cross product of (N, 3) arrays (np.cross costs ~20 us of overhead on small arrays)."""
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1]
    out[..., 1] = a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2]
    out[..., 2] = a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    return out


def contact_world_forces(contacts, impulse: np.ndarray, dt: float) -> np.ndarray:
    """World-frame forces (N, 3) on B, f_i = R_i gamma_i / dt, from contact-frame impulses gamma (N*s)."""
    if contacts.size == 0:
        return np.zeros((0, 3))
    return contacts.world_forces(np.asarray(impulse, float).reshape(-1, 3), dt)


def body_frame_of_geometry(model, geometry_index: int) -> int:
    """The BODY frame (link) a collision geometry is attached to (its parent frame, walked up to a link)."""
    pm = model.pin_model
    frame = model.collision_model.geometryObjects[geometry_index].parentFrame
    while frame > 0 and pm.frames[frame].type != pin.FrameType.BODY:
        frame = pm.frames[frame].parentFrame
    return frame


def frames_below(pin_model, top: int, frames) -> dict:
    """{BODY frame: whether its chain of parent links reaches link ``top``} for ``frames`` and the links on their
    chains (each chain walked once)."""
    below = {}
    for fid in frames:
        chain, f = [], fid
        while f not in below and f != top and f > 0:
            chain.append(f)
            f = parent_link_frame(pin_model, f)
        value = below.setdefault(f, f == top)
        for c in chain:
            below[c] = value
    return below


def link_frame(pin_model, name: str, what: str) -> int:
    """Frame id of link ``name``; ConfigError listing the links (``what`` names the parameter)."""
    if not pin_model.existFrame(name):
        links = [f.name for f in pin_model.frames if f.type == pin.FrameType.BODY]
        raise ConfigError(unknown_choice(what, name, links))
    return frame_by_name(pin_model, name)


def frame_by_name(pin_model, name: str) -> int:
    """Frame id of ``name``, preferring the link (BODY) frame when a joint has the same name."""
    if pin_model.existFrame(name, pin.FrameType.BODY):
        return pin_model.getFrameId(name, pin.FrameType.BODY)
    return next(i for i, f in enumerate(pin_model.frames) if f.name == name)


class ContactWrenchAccumulator:
    """Net contact wrench on each of a list of bodies.

    A body is a robot link name or a free object name (``MultibodyModel.free_bodies``); its contact
    geometries are those attached to the link (including geometries of links merged into it by fixed joints
    only if they are named explicitly). ``compute`` returns (B, 6) world-aligned wrenches about each body
    frame's origin: force = sum of the contact forces on the body (N), torque = sum (p_i - o_body) x f_i (N*m).
    """

    def __init__(self, model, bodies):
        pm = model.pin_model
        self.model = model
        self.bodies = tuple(bodies)
        free = {b.name: b.frame_name for b in model.free_bodies}
        ngeom = len(model.collision_model.geometryObjects)
        geom_link = np.array([body_frame_of_geometry(model, g) for g in range(ngeom)], dtype=int)
        self.frame_ids = np.empty(len(self.bodies), dtype=int)
        # geometry -> body slot (-1: not a configured body)
        self.geometry_body = np.full(ngeom, -1, dtype=int)
        valid = sorted(set(free) | {f.name for f in pm.frames if f.type == pin.FrameType.BODY})
        for k, body in enumerate(self.bodies):
            frame_name = free.get(body, body)
            if not pm.existFrame(frame_name):
                raise ConfigError(unknown_choice("contact body", body, valid))
            fid = frame_by_name(pm, frame_name)
            self.frame_ids[k] = fid
            mine = geom_link == fid
            if body in free:   # every geometry on the object's free-flyer joint
                joint = pm.frames[fid].parentJoint
                mine |= np.asarray(model.geometry_parent_joint) == joint
            self.geometry_body[mine] = k
        self._frame_list = [int(f) for f in self.frame_ids]
        self._wrench = np.zeros((len(self.bodies), 6))

    def compute(self, contacts, forces: np.ndarray, pin_data) -> np.ndarray:
        """(B, 6) contact wrenches [force, torque about the body origin] in world axes; ``pin_data`` must have
        the frame placements of the current state (``updateFramePlacements``). The array is reused."""
        w = self._wrench
        w[:] = 0.0
        if contacts.size == 0 or len(self.bodies) == 0:
            return w
        origins = np.array([pin_data.oMf[f].translation for f in self._frame_list])
        for side, sign in ((contacts.geometry_b, 1.0), (contacts.geometry_a, -1.0)):
            slot = self.geometry_body[side]
            hit = slot >= 0
            if not hit.any():
                continue
            f = sign * forces[hit]
            r = contacts.point[hit] - origins[slot[hit]]
            np.add.at(w[:, :3], slot[hit], f)
            np.add.at(w[:, 3:], slot[hit], cross_rows(r, f))
        return w


# columns of p and f whose products p x f subtracts: (p1 f2, p2 f0, p0 f1) - (p2 f1, p0 f2, p1 f0)
_CROSS_P = np.array([1, 2, 0, 2, 0, 1])
_CROSS_F = np.array([2, 0, 1, 1, 2, 0])


def joint_contact_wrenches(model, contacts, forces: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """(njoints, 6) contact wrenches on each Pinocchio joint's rigid body, world axes, about the WORLD origin:
    force sum f, torque sum p x f (with -f on A). Row 0 (universe) collects the static world's share."""
    nj = model.pin_model.njoints
    w = np.zeros((nj, 6)) if out is None else out
    w[:] = 0.0
    if contacts.size == 0:
        return w
    # one (N, 6) array [f, p x f] accumulated in two np.add.at calls (each entry of w receives the same additions
    # in the same order as four calls on its force and torque halves would give it: B's contacts, then A's)
    fw = np.empty((contacts.size, 6))
    fw[:, :3] = forces
    # p x f as cross_rows computes it, p_k1 f_k2 - p_k2 f_k1 per axis k, the six products in one multiplication
    prod = contacts.point.take(_CROSS_P, axis=1) * forces.take(_CROSS_F, axis=1)
    np.subtract(prod[:, :3], prod[:, 3:], out=fw[:, 3:])
    np.add.at(w, contacts.joint_b, fw)
    np.add.at(w, contacts.joint_a, -fw)
    return w


def external_joint_torques(model, generalized_contact_force: np.ndarray) -> np.ndarray:
    """Contact torques on the actuated joints, tau_ext = (J^T f)[joint_v_index] (N*m or N): the external joint
    torques a torque-sensing robot (e.g. Franka's tau_ext) would estimate."""
    return np.asarray(generalized_contact_force)[np.asarray(model.joint_v_index)]
