"""Force/torque sensing from the simulator state (pure numpy + Pinocchio; no rclpy).

* :func:`contact_world_forces`: contact forces (N) in the world frame from a step's contact impulses.
* :class:`ContactWrenchAccumulator`: net contact wrench on named bodies (links or free objects).
* :class:`ForceTorqueSensor`: the wrench a 6-axis F/T sensor mounted at a joint between two links measures.
* :func:`external_joint_torques`: generalized contact forces J^T f on the actuated joints.

Conventions: a contact force ``f_i`` (world frame) acts on geometry B of contact i at its world point ``p_i``,
``-f_i`` on geometry A (``geometry/contact_set.py``). Wrenches are (force N, torque N*m) 6-vectors.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from .. import native_build
from ..errors import ConfigError, unknown_choice
from ..model.multibody_model import parent_link_frame
from ..model.robots_only import RobotsOnly, robots_only


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


def _body_frame_of_geometry(model, geometry_index: int) -> int:
    """The BODY frame (link) a collision geometry is attached to (its parent frame, walked up to a link)."""
    pm = model.pin_model
    frame = model.collision_model.geometryObjects[geometry_index].parentFrame
    while frame > 0 and pm.frames[frame].type != pin.FrameType.BODY:
        frame = pm.frames[frame].parentFrame
    return frame


def _frames_below(pin_model, top: int, frames) -> dict:
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


def _link_frame(pin_model, name: str, what: str) -> int:
    if not pin_model.existFrame(name):
        links = [f.name for f in pin_model.frames if f.type == pin.FrameType.BODY]
        raise ConfigError(unknown_choice(what, name, links))
    return _frame_id(pin_model, name)


def _frame_id(pin_model, name: str) -> int:
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
        geom_link = np.array([_body_frame_of_geometry(model, g) for g in range(ngeom)], dtype=int)
        self.frame_ids = np.empty(len(self.bodies), dtype=int)
        # geometry -> body slot (-1: not a configured body)
        self.geometry_body = np.full(ngeom, -1, dtype=int)
        valid = sorted(set(free) | {f.name for f in pm.frames if f.type == pin.FrameType.BODY})
        for k, body in enumerate(self.bodies):
            frame_name = free.get(body, body)
            if not pm.existFrame(frame_name):
                raise ConfigError(unknown_choice("contact body", body, valid))
            fid = _frame_id(pm, frame_name)
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


class ForceTorqueSensor:
    """A 6-axis force/torque sensor between ``parent_link`` and ``child_link`` (usually a fixed joint, which
    Pinocchio merges into the parent's body), reporting in frame ``frame`` (default: the child link frame).

    Reading (what the sensor measures): the wrench that the child side (the sensor's tool side: every link
    beyond the sensor and, through contact, whatever they hold) exerts on the parent side, at the sensor
    frame origin, in sensor-frame axes. It is minus the wrench transmitted from parent to child, which by
    Newton-Euler over the child subtree S is

        f_parent->S = sum_{k in S} ( I_k a_k + v_k x* I_k v_k - I_k a_g - f_contact,k )

    (the recursive Newton-Euler backward pass, Featherstone 2008 eq. 5.9, with gravity a_g as a base
    acceleration). Subtree joints come from ``pin.rnea(model, data, q, v, a, fext)`` (``data.f[j]``,
    the transmitted wrench with fext = contact wrenches); links merged into the sensor's parent joint beyond
    the sensor use their URDF inertias, which Pinocchio keeps on the FIXED_JOINT frames that create them.
    A gripper of mass m_g holding an object of mass m_o at rest reads (m_g + m_o) g along gravity.
    """

    def __init__(self, model, parent_link: str, child_link: str, frame: str | None = None):
        pm = model.pin_model
        self.model = model
        self.parent_link, self.child_link = parent_link, child_link
        parent_f = _link_frame(pm, parent_link, "F/T sensor parent link")
        child_f = _link_frame(pm, child_link, "F/T sensor child link")
        if parent_link_frame(pm, child_f) != parent_f:
            raise ConfigError(f"F/T sensor: link {child_link!r} is not a child of link {parent_link!r} "
                              f"(its parent is {pm.frames[parent_link_frame(pm, child_f)].name!r})")
        self.frame = frame or child_link
        sensor_f = _link_frame(pm, self.frame, "F/T sensor frame")
        self.joint = pm.frames[child_f].parentJoint          # the joint carrying the child link
        self.sensor_in_joint = pm.frames[sensor_f].placement  # joint frame -> sensor frame
        if pm.frames[sensor_f].parentJoint != self.joint:
            raise ConfigError(f"F/T sensor: frame {self.frame!r} must be rigidly attached to link {child_link!r}")
        self.moving_joint = pm.frames[parent_f].parentJoint != self.joint
        # Links of the child subtree: BODY frames whose chain of parent links reaches child_f.
        body_frames = [i for i, f in enumerate(pm.frames) if f.type == pin.FrameType.BODY]
        in_subtree = _frames_below(pm, child_f, body_frames)
        # Fixed (merged) links of the subtree on the sensor's joint: their inertias sit on the FIXED_JOINT
        # frame that creates them (the BODY frame's parentFrame).
        self.fixed_inertia = pin.Inertia.Zero()
        self.child_joints = []
        fixed_links = set()
        if not self.moving_joint:
            for fid in body_frames:
                f = pm.frames[fid]
                if f.parentJoint == self.joint and in_subtree[fid]:
                    fixed_links.add(fid)
                    carrier = pm.frames[f.parentFrame]
                    inertia = carrier.inertia if carrier.type == pin.FrameType.FIXED_JOINT else f.inertia
                    if inertia.mass > 0.0:
                        self.fixed_inertia += carrier.placement.act(inertia)
            for j in range(1, pm.njoints):
                if pm.parents[j] == self.joint:
                    jf = pm.getFrameId(pm.names[j], pin.FrameType.JOINT)
                    if in_subtree.get(parent_link_frame(pm, jf), False):
                        self.child_joints.append(j)
        ngeom = len(model.collision_model.geometryObjects)
        self.fixed_geometry = np.array([_body_frame_of_geometry(model, g) in fixed_links for g in range(ngeom)],
                                       dtype=bool)
        # the dynamics run on the robots alone (model/robots_only.py: the free objects, never in a robot's subtree,
        # locked away; a robot-sized RNEA and Data); the topology above is the whole model's
        self.robots = robots_only(model)
        rm, joint_of = self.robots.model, self.robots.joint_of
        if joint_of[self.joint] < 0 or any(joint_of[c] < 0 for c in self.child_joints):
            self.robots = RobotsOnly.whole(pm)
            rm, joint_of = pm, self.robots.joint_of
        self._joint = int(joint_of[self.joint])
        self._child_joints = [int(joint_of[c]) for c in self.child_joints]
        self.data = pin.Data(rm)
        self._fext = pin.StdVec_Force()
        for _ in range(rm.njoints):
            self._fext.append(pin.Force.Zero())
        self._joint_wrench = np.zeros((pm.njoints, 6))
        self._touched: list[int] = []
        self._robot_joint = [int(j) for j in joint_of]     # joint_of as Python ints (read per contact joint)
        self._fixed_geometry_ids = frozenset(np.flatnonzero(self.fixed_geometry).tolist())   # (a cheap test first)
        # the same reading in one compiled call (sim/rigid_body_dynamics.cpp, when built; compute_python below
        # is its reference)
        module = native_build.RIGID_BODY.load()
        self._native = None if module is None else module.ForceTorqueReading(
            rm, self.data, self._joint, np.array(self._child_joints, dtype=np.int64), bool(self.moving_joint),
            self.fixed_inertia, self.sensor_in_joint, np.asarray(joint_of, dtype=np.int64),
            self.fixed_geometry.astype(np.uint8))
        self._no_index = np.zeros(0, dtype=np.int64)
        self._no_rows = np.zeros((0, 3))

    def compute(self, q, v, a, contacts=None, forces=None, out: np.ndarray | None = None) -> np.ndarray:
        """Sensor reading (6,) [force N, torque N*m] in the sensor frame at state (q, v), generalized
        acceleration a (e.g. (v_next - v) / dt) and contact forces (N, 3) on B (world frame); written into
        ``out`` (a float (6,) array) when given (sensors/force_torque.py: no allocation per reading)."""
        if self._native is None:
            reading = self.compute_python(q, v, a, contacts, forces)
            if out is None:
                return reading
            out[:] = reading
            return out
        robots = self.robots
        if out is None:
            out = np.empty(6)
        if contacts is not None and contacts.size > 0:
            self._native.read(robots.q(q), robots.v(v), robots.v(a), contacts.size, contacts.joint_a,
                              contacts.joint_b, contacts.geometry_a, contacts.geometry_b, contacts.point, forces, out)
        else:
            i0, r0 = self._no_index, self._no_rows
            self._native.read(robots.q(q), robots.v(v), robots.v(a), 0, i0, i0, i0, i0, r0, r0, out)
        return out

    def compute_python(self, q, v, a, contacts=None, forces=None) -> np.ndarray:
        """``compute`` with Pinocchio's Python calls (the reference of the compiled reading)."""
        robots = self.robots
        rm = robots.model
        d = self.data
        q, v, a = robots.q(q), robots.v(v), robots.v(a)
        pin.forwardKinematics(rm, d, q)
        have_contacts = contacts is not None and contacts.size > 0
        for j in self._touched:           # joints that carried contact wrenches last time
            self._fext[j] = pin.Force.Zero()
        self._touched = []
        if have_contacts:
            world = joint_contact_wrenches(self.model, contacts, forces, self._joint_wrench)
            robot_joint = self._robot_joint
            # the joints in contact (a set of Python ints: np.unique costs ~4 us; the order does not matter)
            for j in set(contacts.joint_a.tolist()).union(contacts.joint_b.tolist()):
                jr = robot_joint[j]
                if jr > 0:   # world wrench about the origin -> joint-local wrench (locked objects: not robots')
                    self._fext[jr] = d.oMi[jr].actInv(pin.Force(world[j]))
                    self._touched.append(jr)
        pin.rnea(rm, d, q, v, a, self._fext)
        j = self._joint
        if self.moving_joint:
            f_sub = d.f[j]
        else:
            vj, agf = d.v[j], d.a_gf[j]
            inertia = self.fixed_inertia
            f_sub = inertia * agf + vj.cross(inertia * vj)
            for c in self._child_joints:
                f_sub = f_sub + d.liMi[c].act(d.f[c])
            if have_contacts and not (self._fixed_geometry_ids.isdisjoint(contacts.geometry_b.tolist())
                                      and self._fixed_geometry_ids.isdisjoint(contacts.geometry_a.tolist())):
                mask_b = self.fixed_geometry[contacts.geometry_b]
                mask_a = self.fixed_geometry[contacts.geometry_a]
                if mask_b.any() or mask_a.any():
                    f = forces[mask_b].sum(axis=0) - forces[mask_a].sum(axis=0)
                    tau = (cross_rows(contacts.point[mask_b], forces[mask_b]).sum(axis=0)
                           - cross_rows(contacts.point[mask_a], forces[mask_a]).sum(axis=0))
                    f_sub = f_sub - d.oMi[j].actInv(pin.Force(f, tau))
        reading = self.sensor_in_joint.actInv(f_sub)
        return -reading.vector


def external_joint_torques(model, generalized_contact_force: np.ndarray) -> np.ndarray:
    """Contact torques on the actuated joints, tau_ext = (J^T f)[joint_v_index] (N*m or N): the external joint
    torques a torque-sensing robot (e.g. Franka's tau_ext) would estimate."""
    return np.asarray(generalized_contact_force)[np.asarray(model.joint_v_index)]
