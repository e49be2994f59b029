"""franka_ros2's driver-side interfaces over real DDS (ros/franka.py): the franka_gripper node's actions on a
Panda with a static 30 mm cube between its fingers, and franka_robot_state_broadcaster/robot_state's estimated
external wrench against the contact forces on the hand while the arm presses on a table. The rules (grasp
epsilon, the wrench estimate) are tested in sim time in test/test_franka_driver.py.

Nodes (built in the test's process when a test first needs one, one at a time: inprocess_sim_node.py; one namespace
each, as fast as possible):
  grip   franka with the cube between the open fingers
  press  franka with a static table 2 cm under the fingertips, its gripper node named fr3_gripper, a controllers
         file that spawns franka_robot_state_broadcaster (the controller publishes robot_state; grip: the preset's
         publisher does)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml
from contact_sim_msgs.msg import ContactArray
from control_msgs.action import GripperCommand
from franka_msgs.action import Grasp, Homing, Move
from franka_msgs.msg import FrankaRobotState
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from inprocess_sim_node import OneNodeAtATime
from ros_testing import SCENES, ActionClient, active_controllers, wait_until

ROOT = Path(__file__).resolve().parents[2]

PANDA = [f"panda_joint{i}" for i in range(1, 8)]
HAND_BODIES = {"panda_hand", "panda_leftfinger", "panda_rightfinger"}
STATUS_SUCCEEDED, STATUS_ABORTED = 4, 6
READY = [0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398]


def _scenes(tmp):
    from contact_sim_ros.sim.simulator import Simulator
    sim = Simulator({"robot": "franka", "environment": [{"name": "ground", "shape": "halfspace"}]}, engine="tamsi")
    M = sim.body_pose("panda_hand_tcp")
    rpy = pin.rpy.matrixToRpy(M.rotation)
    ground = {"name": "ground", "shape": "halfspace"}
    cube = {"name": "cube", "shape": {"box": [0.03, 0.03, 0.03]},
            "pose": {"xyz": M.translation.tolist(), "rpy": rpy.tolist()}, "material": {"friction": 1.0}}
    tips = min(sim.body_pose(f).translation[2] for f in ("panda_leftfinger_tip", "panda_rightfinger_tip"))
    top = tips - 0.02
    table = {"name": "table", "shape": {"box": [0.4, 0.4, 0.1]},
             "pose": {"xyz": [float(M.translation[0]), 0.0, float(top - 0.05)], "rpy": [0, 0, 0]}}
    out = {}
    for name, env in (("grip", [ground, cube]), ("press", [ground, table])):
        path = tmp / f"franka_{name}.yaml"
        path.write_text(yaml.safe_dump({"robot": "franka", "environment": env}))
        out[name] = path
    # the shipped controllers file plus franka_ros2's broadcaster, declared as franka_bringup's file declares it
    controllers = yaml.safe_load((ROOT / "config" / "ros2_control" / "franka_controllers.yaml").read_text())
    controllers["controller_manager"]["ros__parameters"]["franka_robot_state_broadcaster"] = {
        "type": "franka_robot_state_broadcaster/FrankaRobotStateBroadcaster", "state_interfaces": "robot_state"}
    controllers["franka_robot_state_broadcaster"] = {"ros__parameters": {"convenience_publish_rate": 250}}
    out["controllers"] = tmp / "franka_controllers_with_state_broadcaster.yaml"
    out["controllers"].write_text(yaml.safe_dump(controllers))
    return out


class Nodes(OneNodeAtATime):
    """``nodes[name]`` -> (the node, its joint states): built in this process on first use, the one built before
    it closed (each steps as fast as it can: one at a time)."""

    def __init__(self, ros, tmp):
        super().__init__(ros, keep=200)
        self.scenes = _scenes(tmp)

    def flags(self, name):
        flags = ["--scene", str(self.scenes[name]), "--real-time-factor", "0", "--namespace", name, "--engine",
                 "tamsi", "--config", str(SCENES / "no_clock.yaml")]
        if name == "press":     # the gripper node named as MoveIt's FR3 config expects it, the state broadcaster
            flags += ["--ros-args", "-p", "franka_gripper_name:=fr3_gripper",
                      "-p", f"controllers_file:={self.scenes['controllers']}"]
        return flags


@pytest.fixture(scope="module")
def nodes(ros, tmp_path_factory):
    built = Nodes(ros, tmp_path_factory.mktemp("franka"))
    yield built
    built.close()


def _run(ros, action, name, goal, timeout=60):
    client = ActionClient(ros.node, action, name)
    assert client.wait_for_server(timeout_sec=30), name
    fut = client.send_goal_async(goal)
    wait_until(fut.done, 30, what=f"{name} goal response")
    handle = fut.result()
    assert handle.accepted, name
    res = handle.get_result_async()
    wait_until(res.done, timeout, what=f"{name} result")
    return res.result()


def _finger_state(js):
    p = dict(zip(js[-1].name, js[-1].position))
    e = dict(zip(js[-1].name, js[-1].effort))
    return p["panda_finger_joint1"], e["panda_finger_joint1"]


def test_franka_gripper_homing_grasp_of_the_cube_and_move(nodes, ros):
    js = nodes["grip"][1]
    states = ros.subscribe(FrankaRobotState, "/grip/franka_robot_state_broadcaster/robot_state", keep=2)
    gripper_states = ros.subscribe(JointState, "/grip/franka_gripper/joint_states", keep=10)
    out = _run(ros, Homing, "/grip/franka_gripper/homing", Homing.Goal())
    assert out.status == STATUS_SUCCEEDED and out.result.success, out.result.error
    # joint_states arrive after the result: wait for the width rather than read the last message at once
    wait_until(lambda: abs(2 * _finger_state(js)[0] - 0.08) < 0.004, 30, what="width 80 mm")

    goal = Grasp.Goal(width=0.03, speed=0.05, force=30.0)
    goal.epsilon.inner = goal.epsilon.outer = 0.005
    out = _run(ros, Grasp, "/grip/franka_gripper/grasp", goal)
    assert out.status == STATUS_SUCCEEDED and out.result.success, out.result.error
    t = js[-1].header.stamp.sec + 1e-9 * js[-1].header.stamp.nanosec
    wait_until(lambda: js[-1].header.stamp.sec + 1e-9 * js[-1].header.stamp.nanosec > t + 0.3, 30,
               what="0.3 s after the grasp")
    assert 0.025 <= 2 * _finger_state(js)[0] <= 0.035       # on the 30 mm cube, within epsilon
    assert abs(_finger_state(js)[1]) == pytest.approx(30.0, rel=0.10)    # pressing with the grasp force

    # a grasp expecting a 50 mm object fails: the fingers stop on the 30 mm cube
    goal = Grasp.Goal(width=0.05, speed=0.05, force=20.0)
    goal.epsilon.inner = goal.epsilon.outer = 0.005
    out = _run(ros, Grasp, "/grip/franka_gripper/grasp", goal)
    assert out.status == STATUS_ABORTED and not out.result.success and "grasp failed" in out.result.error

    out = _run(ros, Move, "/grip/franka_gripper/move", Move.Goal(width=0.06, speed=0.1))
    assert out.status == STATUS_SUCCEEDED and out.result.success, out.result.error
    wait_until(lambda: abs(2 * _finger_state(js)[0] - 0.06) < 0.004, 30, what="width 60 mm")

    # franka_gripper's own joint states: both fingers at width / 2
    wait_until(lambda: gripper_states and abs(gripper_states[-1].position[0] * 2 - 0.06) < 0.004,
               30, what="franka_gripper/joint_states at 60 mm")
    assert list(gripper_states[-1].name) == ["panda_finger_joint1", "panda_finger_joint2"]
    wait_until(lambda: states, 30, what="the preset's robot_state")
    assert list(states[-1].measured_joint_state.name) == PANDA

    # GripperCommand (MoveIt's franka_gripper/gripper_action): closing on the cube is a grasp with max_effort
    goal = GripperCommand.Goal()
    goal.command.position, goal.command.max_effort = 0.015, 20.0     # half the width, as franka_gripper
    out = _run(ros, GripperCommand, "/grip/franka_gripper/gripper_action", goal)
    assert out.status == STATUS_SUCCEEDED and out.result.reached_goal
    assert out.result.position == pytest.approx(0.03, abs=0.005)     # the width


def test_robot_state_external_wrench_equals_the_hand_contact_wrench(nodes, ros):
    nodes["press"]
    states = ros.subscribe(FrankaRobotState, "/press/franka_robot_state_broadcaster/robot_state", keep=100)
    contacts = ros.subscribe(ContactArray, "/press/contacts", keep=5)
    wait_until(lambda: states, 60, what="robot_state")
    # one publisher: the spawned controller's, not also the preset's
    assert "franka_robot_state_broadcaster" in active_controllers(ros, "/press")
    assert ros.node.count_publishers("/press/franka_robot_state_broadcaster/robot_state") == 1
    s = states[-1]
    assert list(s.measured_joint_state.name) == PANDA
    assert np.allclose(s.measured_joint_state.position, READY, atol=0.02)
    assert len(s.tau_ext_hat_filtered.effort) == 7
    z0 = s.o_t_ee.pose.position.z

    # the arm's target puts the hand 4 cm lower (joints 2, 4, 6 by the Jacobian at the ready pose: -4 cm in z, 0 in
    # x and pitch): the fingertips 2 cm below the table's surface
    target = list(READY)
    target[1] -= 0.0271
    target[3] -= 0.1196
    target[5] += 0.0925
    traj = JointTrajectory(joint_names=PANDA, points=[JointTrajectoryPoint(positions=target)])
    traj.points[0].time_from_start.sec = 1
    ros.publish(JointTrajectory, "/press/arm_controller/joint_trajectory", traj)

    def hand_force(msg=None):
        """The hand's contact force (N, world) of contacts message ``msg`` (default: the latest)."""
        if msg is None:
            if not contacts:
                return None
            msg = contacts[-1]
        f = np.zeros(3)
        for c in msg.contacts:
            v = np.array([c.force.x, c.force.y, c.force.z])
            if c.body_b in HAND_BODIES:
                f += v
            elif c.body_a in HAND_BODIES:
                f -= v
        return f

    def pressing():
        f = hand_force()
        return f is not None and f[2] > 20.0
    wait_until(pressing, 60, what="the hand pressing on the table with > 20 N")
    # steady pressing, frozen by ~/pause: compare the estimate and the contact wrench of the same sim time. Stepping
    # flat out, the node publishes robot_state at 250 Hz of sim time, faster than a loaded test process reads them:
    # its subscription drops some, and matching a running stream's stamps failed (no robot_state of a contacts
    # message's stamp in 50 tries). On pause every publisher that has not published the current state publishes
    # it once (driver/loop.py), so the last contacts message and a robot_state of its stamp both arrive.
    def paused_pair():
        if not contacts:
            return None
        contact_msg = contacts[-1]
        match = [m for m in list(states) if m.header.stamp == contact_msg.header.stamp]
        return (contact_msg, match[-1]) if match else None

    assert ros.call(SetBool, "/press/contact_sim/pause", SetBool.Request(data=True)).success
    try:
        contact_msg, state = wait_until(paused_pair, 30, what="a robot_state at the stamp of the paused contacts")
    finally:
        assert ros.call(SetBool, "/press/contact_sim/pause", SetBool.Request(data=False)).success
    f = hand_force(contact_msg)
    est = state.o_f_ext_hat_k.wrench.force
    f_est = np.array([est.x, est.y, est.z])
    assert np.linalg.norm(f_est - f) <= 0.05 * np.linalg.norm(f), (f_est, f)
    assert state.o_t_ee.pose.position.z < z0                # the hand went down onto the table


def test_gripper_node_name_as_moveit_fr3_config_expects(nodes, ros):
    nodes["press"]
    client = ActionClient(ros.node, GripperCommand, "/press/fr3_gripper/gripper_action")
    assert client.wait_for_server(timeout_sec=30)
