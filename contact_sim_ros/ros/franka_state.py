"""franka_ros2's ``franka_robot_state_broadcaster`` topics of a simulated Franka arm (docs/ros_interface.md,
"franka_ros2"): ``<name>/robot_state`` (franka_msgs/msg/FrankaRobotState) and its convenience topics
``<name>/external_wrench_in_base_frame``, ``<name>/external_wrench_in_stiffness_frame`` (WrenchStamped) and
``<name>/current_pose`` (PoseStamped). Published by a spawned franka_robot_state_broadcaster controller
(``FrankaStateIO``) or, for the ``franka`` preset without one, at the node's ``wrench_rate`` (ros/franka.py).
The external wrench estimate is driver/franka.py's."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
from geometry_msgs.msg import PoseStamped, WrenchStamped

from ..driver.controllers.base import ControllerIO
from ..driver.controllers.franka_robot_state_broadcaster import FrankaRobotStateBroadcaster
from ..driver.franka import ExternalWrenchEstimate
from .state_messages import fill_wrench, has_readers, stamp

try:   # built into the venv by scripts/ensure_venv.sh (msgs/franka_msgs)
    from franka_msgs.msg import FrankaRobotState
except ImportError:
    FrankaRobotState = None


def _set_pose(msg: PoseStamped, T: np.ndarray) -> None:
    p, o = msg.pose.position, msg.pose.orientation
    p.x, p.y, p.z = (float(x) for x in T[:3, 3])
    qx, qy, qz, qw = pin.Quaternion(T[:3, :3]).coeffs()
    o.x, o.y, o.z, o.w = float(qx), float(qy), float(qz), float(qw)


class FrankaStatePublisher:
    """``<name>/robot_state`` and its convenience topics (see the module docstring) of the arm joints ``joints``
    (model joint names), on ``node``; ``base_frame`` / ``ee_frame``: link names (K = EE)."""

    def __init__(self, node, sim_node, name: str, joints, base_frame: str, ee_frame: str, frame_prefix: str):
        model = sim_node.model
        self.sim_node = sim_node
        self.base_frame, self.ee_frame = base_frame, ee_frame
        self.idx = np.array([model.joint_index(j) for j in joints], dtype=int)
        self.arm_v = np.asarray(model.joint_v_index)[self.idx]
        self._estimate = None
        self._model_id = None
        self.msg = FrankaRobotState()
        m = self.msg
        base = frame_prefix + base_frame
        for js in (m.measured_joint_state, m.desired_joint_state, m.measured_joint_motor_state,
                   m.tau_ext_hat_filtered):
            js.name = list(joints)
            js.header.frame_id = base
        m.header.frame_id = base
        m.o_f_ext_hat_k.header.frame_id = base
        m.k_f_ext_hat_k.header.frame_id = frame_prefix + ee_frame
        m.o_t_ee.header.frame_id = base
        m.robot_mode = FrankaRobotState.ROBOT_MODE_MOVE
        m.control_command_success_rate = 1.0
        self.pub = node.create_publisher(FrankaRobotState, f"{name}/robot_state", 10)
        self.pub_o_f = node.create_publisher(WrenchStamped, f"{name}/external_wrench_in_base_frame", 10)
        self.pub_k_f = node.create_publisher(WrenchStamped, f"{name}/external_wrench_in_stiffness_frame", 10)
        self.pub_pose = node.create_publisher(PoseStamped, f"{name}/current_pose", 10)

    def _estimator(self, model) -> ExternalWrenchEstimate:
        if self._model_id is not id(model.pin_model):     # rebuilt when the model is (objects spawned)
            pm = model.pin_model
            self._estimate = ExternalWrenchEstimate(pm, self.arm_v, pm.getFrameId(self.base_frame),
                                                    pm.getFrameId(self.ee_frame))
            self._model_id = id(model.pin_model)
        return self._estimate

    def publish(self, sim) -> None:
        pubs = (self.pub, self.pub_o_f, self.pub_k_f, self.pub_pose)
        if not any(has_readers(p) for p in pubs):
            return
        res = sim.last_result
        tau_ext = np.zeros(len(self.idx))
        if res is not None:
            tau_ext = np.asarray(res.generalized_contact_force)[self.arm_v]
        T, o_f, k_f = self._estimator(sim.model).compute(sim.q, tau_ext)
        state = self.sim_node.system.state
        q, v, tau = state.position, state.velocity, state.effort
        idx = self.idx
        m, t = self.msg, sim.t
        for h in (m.header, m.measured_joint_state.header, m.tau_ext_hat_filtered.header, m.o_t_ee.header):
            stamp(t, h.stamp)
        m.time = float(t)
        m.measured_joint_state.position = q[idx].tolist()
        m.measured_joint_state.velocity = v[idx].tolist()
        m.measured_joint_state.effort = tau[idx].tolist()          # tau_J: the joints' actuator torques, N*m
        m.tau_ext_hat_filtered.effort = tau_ext.tolist()
        fill_wrench(m.o_f_ext_hat_k, o_f, t)
        fill_wrench(m.k_f_ext_hat_k, k_f, t)
        _set_pose(m.o_t_ee, T)
        self.pub.publish(m)
        self.pub_o_f.publish(m.o_f_ext_hat_k)
        self.pub_k_f.publish(m.k_f_ext_hat_k)
        self.pub_pose.publish(m.o_t_ee)



class FrankaStateIO(ControllerIO):
    """The transport side of a spawned franka_robot_state_broadcaster (driver/controllers/
    franka_robot_state_broadcaster.py): ``<name>/robot_state`` and its convenience topics."""

    def __init__(self, c: FrankaRobotStateBroadcaster, transport):
        self.c = c
        sim_node = transport.sim_node
        pm = sim_node.model.pin_model
        ee = c.ee_frame if pm.existFrame(c.ee_frame) else c.flange_frame
        self.state = None
        if FrankaRobotState is not None:
            self.state = FrankaStatePublisher(transport.node, sim_node, c.name, c.joints, c.base_frame, ee,
                                              transport.frame_prefix)

    def publish(self) -> None:
        if self.state is not None:
            self.state.publish(self.state.sim_node.sim)
