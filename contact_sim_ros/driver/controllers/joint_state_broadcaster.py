"""joint_state_broadcaster/JointStateBroadcaster: ``joint_states`` (sensor_msgs/JointState) and
``dynamic_joint_states`` (control_msgs/DynamicJointState) of the robot's joints.

Parameters honoured: ``joints`` and ``interfaces`` (both empty: every joint, position/velocity/effort),
``frame_id`` (the messages' header frame, verbatim as the real broadcaster; default ``base_link``),
``extra_joints`` (published with zeros), ``use_local_topics`` (``<name>/joint_states`` instead of
``joint_states``), ``update_rate`` (Hz; default: the node's ``joint_states_rate``); ``dynamic_joint_states`` at most 100 Hz (the
real broadcaster publishes it at the update rate; its messages cost ~50 us each to build here). Joints the URDF marks
``mimic`` are published after the actuated ones (position and velocity from their leader). Stamps are sim time.
The publishers are the transport's (ros/controller_io.py); this module gives the values (``values``).
"""

from __future__ import annotations

import numpy as np

from ...errors import ConfigError
from ...model.multibody_model import MimicExpansion
from ..parameters import Parameter, ParameterTable
from .base import UPDATE_RATE, Controller

DYNAMIC_RATE_HZ = 100.0
INTERFACES = ("position", "velocity", "effort")


class JointStateBroadcaster(Controller):
    TYPES = ("joint_state_broadcaster/JointStateBroadcaster",)
    PARAMETERS = ParameterTable(
        Parameter("joints", "string_array", [], description="the joints published (with 'interfaces'; empty: "
                  "every joint of the robot)"),
        Parameter("interfaces", "string_array", [], description="position, velocity, effort (with 'joints')"),
        Parameter("extra_joints", "string_array", [], description="joints published with zeros"),
        Parameter("use_local_topics", "bool", False, description="<name>/joint_states instead of joint_states"),
        Parameter("frame_id", "string", "base_link", description="header frame of joint_states and "
                  "dynamic_joint_states (Jazzy's default; no frame prefix, as the real broadcaster)"),
        UPDATE_RATE,
    )
    republish_while_paused = True

    def __init__(self, name, ctype, params, ctx):
        super().__init__(name, ctype, params, ctx)
        p = self.parameters()
        m = ctx.model
        joints = [str(j) for j in p["joints"]]
        interfaces = [str(i) for i in p["interfaces"]]
        if bool(joints) != bool(interfaces):
            raise ConfigError(f"{self.where}: 'joints' and 'interfaces' are given together or not at all")
        bad = [i for i in interfaces if i not in INTERFACES]
        if bad:
            raise ConfigError(f"{self.where}: unknown interface(s) {bad}; valid: position, velocity, effort")
        mimic = list(m.mimic_joints)
        all_names = list(m.joint_names) + [mj.name for mj in mimic]
        unknown = [j for j in joints if j not in all_names]
        if unknown:
            raise ConfigError(f"{self.where}: unknown joint(s) {unknown}; joints: {', '.join(all_names)}")
        self.interfaces = interfaces or list(INTERFACES)
        if not joints and ctx.joints is not None:     # one robot of several: its joints, then its mimic joints
            own = set(ctx.joints)
            leads = {mj.name: mj.primary for mj in mimic}
            joints = [j for j in all_names if j in own or leads.get(j) in own]
        self.joint_names = joints or all_names
        self.extra = [str(j) for j in p["extra_joints"]]
        self.names = self.joint_names + self.extra          # the published joints, in message order
        self.local = p["use_local_topics"]
        self.frame_id = str(p["frame_id"])
        # full vector = actuated joints then mimic joints; pick = indices of the published joints in it
        self._mimic = MimicExpansion.of(m)
        self._pick = np.array([all_names.index(j) for j in self.joint_names], dtype=int)
        # preallocated (no per-publication arrays): rows position, velocity, effort of every joint (actuated then
        # mimic), and of the published ones (extra joints: zeros)
        self._n_actuated = len(m.joint_names)
        self._full = np.zeros((3, len(all_names)))
        self.out = np.zeros((3, len(self.names)))
        self.rows = [(k, name) for k, name in enumerate(INTERFACES) if name in self.interfaces]
        rate = p["update_rate"] or ctx.default_rates.get("joint_states", 0.0)
        self.publish_every = ctx.decimation(rate)
        # dynamic_joint_states at most DYNAMIC_RATE_HZ (building its per-joint messages costs ~50 us in Python)
        self.dynamic_every = max(1, int(np.ceil(rate / DYNAMIC_RATE_HZ))) if rate > 0 else 1

    def state_interfaces(self):
        return [f"{j}/{i}" for j in self.joint_names for i in self.interfaces]

    def values(self) -> np.ndarray:
        """(3, published joints): position, velocity, effort rows from the state interfaces (mimic joints from
        their leader, effort 0; extra joints 0). One array, refilled in place at every call."""
        n, full, out = self._n_actuated, self._full, self.out
        state = self.ctx.state
        full[0, :n] = state.position
        full[1, :n] = state.velocity
        full[2, :n] = state.effort
        if len(self._mimic):         # mimic joints: position and velocity from the leader, effort 0
            self._mimic.positions(full[0, :n], out=full[0, n:])
            self._mimic.velocities(full[1, :n], out=full[1, n:])
        np.take(full, self._pick, axis=1, out=out[:, :len(self._pick)])
        return out
