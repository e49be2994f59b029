"""joint_state_broadcaster/JointStateBroadcaster: ``joint_states`` (sensor_msgs/JointState) and
``dynamic_joint_states`` (control_msgs/DynamicJointState) of the robot's joints.

Parameters honoured: ``joints`` and ``interfaces`` (both empty: every joint, position/velocity/effort),
``frame_id`` (the messages' header frame, verbatim as the real broadcaster; default ``base_link``),
``extra_joints`` (published with zeros), ``use_local_topics`` (``<name>/joint_states`` instead of
``joint_states``), ``update_rate`` (Hz; default: the node's ``joint_states_rate``); ``dynamic_joint_states`` at most 100 Hz (the
real broadcaster publishes it at the update rate; its messages cost ~50 us each to build here). Joints the URDF marks
``mimic`` are published after the actuated ones (position and velocity from their leader). Stamps are sim time.
"""

from __future__ import annotations

import array

import numpy as np
from sensor_msgs.msg import JointState

from ...errors import ConfigError
from ..state_messages import JointStateCdr, has_readers
from .base import Controller

try:
    from control_msgs.msg import DynamicJointState, InterfaceValue
except ImportError:   # built into the venv by scripts/ensure_venv.sh (msgs/control_msgs)
    DynamicJointState = InterfaceValue = None

DYNAMIC_RATE_HZ = 100.0


class JointStateBroadcaster(Controller):
    TYPES = ("joint_state_broadcaster/JointStateBroadcaster",)
    PARAMETERS = ("joints", "interfaces", "extra_joints", "use_local_topics", "frame_id")

    def __init__(self, name, ctype, params, ctx):
        super().__init__(name, ctype, params, ctx)
        from ..sim_node import stamp
        self._stamp = stamp
        m = ctx.model
        joints = [str(j) for j in self.param("joints", [], list)]
        interfaces = [str(i) for i in self.param("interfaces", [], list)]
        if bool(joints) != bool(interfaces):
            raise ConfigError(f"{self.where}: 'joints' and 'interfaces' are given together or not at all")
        bad = [i for i in interfaces if i not in ("position", "velocity", "effort")]
        if bad:
            raise ConfigError(f"{self.where}: unknown interface(s) {bad}; valid: position, velocity, effort")
        mimic = list(m.mimic_joints)
        all_names = list(m.joint_names) + [mj.name for mj in mimic]
        unknown = [j for j in joints if j not in all_names]
        if unknown:
            raise ConfigError(f"{self.where}: unknown joint(s) {unknown}; joints: {', '.join(all_names)}")
        self.interfaces = interfaces or ["position", "velocity", "effort"]
        if not joints and ctx.joints is not None:     # one robot of several: its joints, then its mimic joints
            own = set(ctx.joints)
            leads = {mj.name: mj.primary for mj in mimic}
            joints = [j for j in all_names if j in own or leads.get(j) in own]
        self.joint_names = joints or all_names
        self.extra = [str(j) for j in self.param("extra_joints", [], list)]
        local = self.param("use_local_topics", False, bool)
        prefix = f"{name}/" if local else ""
        # full vector = actuated joints then mimic joints; pick = indices of the published joints in it
        self._mimic_primary = np.array([m.joint_index(mj.primary) for mj in mimic], dtype=int)
        self._mimic_mult = np.array([mj.multiplier for mj in mimic])
        self._mimic_off = np.array([mj.offset for mj in mimic])
        self._pick = np.array([all_names.index(j) for j in self.joint_names], dtype=int)
        self.frame_id = self.param("frame_id", "base_link", str)     # Jazzy's default; no frame prefix, as real
        self._msg = JointState()
        self._msg.name = self.joint_names + self.extra
        self._msg.header.frame_id = self.frame_id
        # preallocated (no per-publication arrays): rows position, velocity, effort of every joint (actuated then
        # mimic), and of the published ones (extra joints: zeros)
        self._n_actuated = len(m.joint_names)
        self._full = np.zeros((3, len(all_names)))
        self._out = np.zeros((3, len(self._msg.name)))
        self._rows = [(k, name) for k, name in enumerate(("position", "velocity", "effort")) if name in self.interfaces]
        # every interface: published as serialized bytes (state_messages.JointStateCdr), without rclpy's conversion;
        # in process (no DDS) a new message per publication, which the reader takes as it is (no deserialization)
        self._cdr = (JointStateCdr(self.frame_id, list(self._msg.name))
                     if len(self._rows) == 3 and self._msg.name and ctx.ros else None)
        self.pub = ctx.node.create_publisher(JointState, prefix + "joint_states", 10)
        self.pub_dynamic = None
        if DynamicJointState is not None:
            self.pub_dynamic = ctx.node.create_publisher(DynamicJointState, prefix + "dynamic_joint_states", 10)
            self._dyn = DynamicJointState()
            self._dyn.header.frame_id = self.frame_id
            self._dyn.joint_names = list(self._msg.name)
            names = [name for _, name in self._rows]
            self._dyn.interface_values = [InterfaceValue(interface_names=names) for _ in self._msg.name]
        rate = self.param("update_rate", None, float) or ctx.node.config.joint_states_rate
        self.publish_every = ctx.decimation(rate)
        # dynamic_joint_states at most DYNAMIC_RATE_HZ (building its per-joint messages costs ~50 us in Python)
        self._dynamic_every = max(1, int(np.ceil(rate / DYNAMIC_RATE_HZ))) if rate > 0 else 1
        self._published = 0

    def state_interfaces(self):
        return [f"{j}/{i}" for j in self.joint_names for i in self.interfaces]

    def publish(self, sim):
        self._published += 1         # counts the joint_states periods (the dynamic ones are every k-th of them)
        states = has_readers(self.pub)
        dynamic = (self.pub_dynamic is not None and self._published % self._dynamic_every == 0
                   and has_readers(self.pub_dynamic))
        if not (states or dynamic):
            return
        n, full, out = self._n_actuated, self._full, self._out
        full[0, :n] = sim.joint_positions()
        full[1, :n] = sim.joint_velocities()
        full[2, :n] = sim.joint_efforts()
        p = self._mimic_primary
        if len(p):                   # mimic joints: position and velocity from the leader, effort 0
            np.multiply(full[0, p], self._mimic_mult, out=full[0, n:])
            full[0, n:] += self._mimic_off
            np.multiply(full[1, p], self._mimic_mult, out=full[1, n:])
        np.take(full, self._pick, axis=1, out=out[:, :len(self._pick)])
        if states and self._cdr is not None:
            self.pub.publish(self._cdr.encode(sim.t, out))
        elif states:
            if self.ctx.ros:
                msg = self._msg
            else:
                msg = JointState()
                msg.name = list(self._msg.name)
                msg.header.frame_id = self.frame_id
            self._stamp(sim.t, msg.header.stamp)
            for k, name in self._rows:
                setattr(msg, name, array.array("d", out[k].tobytes()))
            self.pub.publish(msg)
        if dynamic:
            dyn = self._dyn
            self._stamp(sim.t, dyn.header.stamp)
            rows = [k for k, _ in self._rows]
            per_joint = np.ascontiguousarray(out[rows].T)      # (joints, interfaces)
            for value, row in zip(dyn.interface_values, per_joint):
                value.values = array.array("d", row.tobytes())
            self.pub_dynamic.publish(dyn)
