"""force_torque: a 6-axis force/torque sensor between two links (geometry_msgs/WrenchStamped).

Spec parameters: ``parent_link``, ``child_link`` (the sensor's tool side; usually joined to the parent by a fixed
joint), ``frame_id`` (the frame of the reading; default the child link). From a ``<ros2_control>`` ``<sensor>``
with those ``<param>``s, or a robot preset's ``ft_sensor`` (base.spec_from_preset).

Reading ``values`` (force.x, force.y, force.z N, torque.x, torque.y, torque.z N*m, in ``frame_id`` axes about its
origin): the wrench the child side exerts on the parent side, from the recursive Newton-Euler pass with the step's
contact forces and the generalized acceleration a = (v - v_prev) / dt (:class:`ForceTorqueSensor`: its compiled
reading ForceTorqueReading in sim/rigid_body_dynamics.cpp is the kernel, ``compute_python`` its reference).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from .. import native_build
from ..errors import ConfigError
from ..model.multibody_model import parent_link_frame
from ..model.robots_only import RobotsOnly, robots_only
from ..sim.sensors import body_frame_of_geometry, cross_rows, frames_below, joint_contact_wrenches, link_frame
from .base import Sensor, SensorSpec, register_sensor, spec_from_hardware, spec_from_preset

AXES = ("force.x", "force.y", "force.z", "torque.x", "torque.y", "torque.z")


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
        parent_f = link_frame(pm, parent_link, "F/T sensor parent link")
        child_f = link_frame(pm, child_link, "F/T sensor child link")
        if parent_link_frame(pm, child_f) != parent_f:
            raise ConfigError(f"F/T sensor: link {child_link!r} is not a child of link {parent_link!r} "
                              f"(its parent is {pm.frames[parent_link_frame(pm, child_f)].name!r})")
        self.frame = frame or child_link
        sensor_f = link_frame(pm, self.frame, "F/T sensor frame")
        self.joint = pm.frames[child_f].parentJoint          # the joint carrying the child link
        self.sensor_in_joint = pm.frames[sensor_f].placement  # joint frame -> sensor frame
        if pm.frames[sensor_f].parentJoint != self.joint:
            raise ConfigError(f"F/T sensor: frame {self.frame!r} must be rigidly attached to link {child_link!r}")
        self.moving_joint = pm.frames[parent_f].parentJoint != self.joint
        # Links of the child subtree: BODY frames whose chain of parent links reaches child_f.
        body_frames = [i for i, f in enumerate(pm.frames) if f.type == pin.FrameType.BODY]
        in_subtree = frames_below(pm, child_f, body_frames)
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
        self.fixed_geometry = np.array([body_frame_of_geometry(model, g) in fixed_links for g in range(ngeom)],
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


@register_sensor
class ForceTorque(Sensor):
    type_name = "force_torque"
    message_type = "geometry_msgs/msg/WrenchStamped"
    interfaces = AXES

    def __init__(self, spec: SensorSpec, model):
        super().__init__(spec, model)
        self.parent_link = str(spec.param("parent_link", required=True))
        self.child_link = str(spec.param("child_link", required=True))
        self.frame = str(spec.param("frame_id") or "") or self.child_link
        self._build(model)

    def _build(self, model) -> None:
        try:
            self.kernel = ForceTorqueSensor(model, self.parent_link, self.child_link, self.frame)
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"{self.spec.where}: {exc}") from None
        self._a = np.zeros(model.pin_model.nv)       # generalized acceleration (v - v_prev) / dt

    def measure(self, sim, v_prev: np.ndarray) -> np.ndarray:
        forces = sim.contact_forces_world()
        a = self._a
        np.subtract(sim.v, v_prev, out=a)
        np.divide(a, sim.time_step, out=a)
        return self.kernel.compute(sim.q, sim.v, a, sim.contacts if forces.shape[0] else None, forces,
                                   out=self.values)

    def rebuild(self, model) -> None:
        super().rebuild(model)
        self._build(model)        # the robot's links are unchanged: cannot fail


def broadcaster_spec(sensor: str, frame_id: str, hardware_info, robot, where: str) -> SensorSpec:
    """The spec of the sensor a force_torque_sensor_broadcaster names: the ``<ros2_control>`` ``<sensor>`` with
    parent_link / child_link parameters, else the robot preset's ``ft_sensor`` of that name or frame; the
    reading's frame is the block's ``frame_id`` (or the preset's ``frame``), else the broadcaster's ``frame_id``.
    ConfigError naming the broadcaster (``where``) and the sensors there are."""
    ft = (robot.ft_sensor if robot is not None else None) or {}
    block = hardware_info.sensor(sensor) if hardware_info is not None else None
    if block is not None and "parent_link" in block.params:
        spec = spec_from_hardware(block, hardware_info.source, default_type="force_torque")
    elif ft and sensor in (ft.get("frame"), ft.get("name")):
        spec = spec_from_preset(ft, getattr(robot, "source", "robot preset"))
    else:
        known = [s.name for s in hardware_info.sensors] if hardware_info is not None else []
        raise ConfigError(f"{where}: unknown sensor '{sensor}': no <sensor> with parent_link/child_link "
                          f"parameters in the <ros2_control> block and not the robot preset's ft_sensor "
                          f"({ft.get('frame') if ft else 'none'}); sensors: {known}")
    if not spec.params.get("frame_id"):
        spec.params["frame_id"] = frame_id
    if spec.type != ForceTorque.type_name:
        raise ConfigError(f"{where}: sensor '{sensor}' is of type {spec.type!r}, not force_torque")
    return SensorSpec(sensor, spec.type, spec.params, spec.source)
