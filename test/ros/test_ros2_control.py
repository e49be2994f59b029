"""The emulated ros2_control stack over real DDS, driven as MoveIt and the ros2_control tools drive hardware:
FollowJointTrajectory and GripperCommand action clients (rclpy.action), controller_manager services, a user's
own controllers.yaml and <ros2_control> block (UR5 from example-robot-data). These prove the wiring (one test per
interface: the action servers with feedback, cancel and preemption statuses, controller_state, the services); the
controllers' rules (tolerances, error codes, preemption by the topic, stall, switch strictness) are tested in sim
time without DDS in test/test_driver_controllers.py.

Nodes (built in the test's process when a test first needs one, one at a time: inprocess_sim_node.py; one
namespace each, as fast as possible unless said otherwise; the tests are ordered so that each is built once):
  iiwa   iiwa_wsg on the ground, real time (cancel / preemption are timed against the wall clock)
  franka franka on the ground
  wsg    iiwa_wsg with a static 30 mm cube between the open fingers (GripperCommand stalls on it)
  panda  franka with the same cube between the Panda hand's fingers
  ur5    UR5 from example-robot-data with the user's controllers.yaml + <ros2_control> block (tmp files)
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory, GripperCommand
from control_msgs.msg import JointTrajectoryControllerState
from controller_manager_msgs.srv import ListControllers, ListHardwareInterfaces
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectoryPoint

from inprocess_sim_node import OneNodeAtATime
from ros_testing import SCENES, ActionClient, active_controllers, switch_controllers, wait_until

IIWA = [f"iiwa_joint_{i}" for i in range(1, 8)]
PANDA = [f"panda_joint{i}" for i in range(1, 8)]
UR5 = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
       "wrist_3_joint"]
STATUS_SUCCEEDED, STATUS_CANCELED, STATUS_ABORTED = 4, 5, 6
R = FollowJointTrajectory.Result


def _cube_scene(tmp: Path, robot: str, tcp: str) -> Path:
    """A scene with the robot on the ground and a static 30 mm cube centred on its grasp frame."""
    from contact_sim_ros.sim.simulator import Simulator
    sim = Simulator({"robot": robot, "environment": [{"name": "ground", "shape": "halfspace"}]}, engine="tamsi")
    M = sim.body_pose(tcp)
    rpy = pin.rpy.matrixToRpy(M.rotation)
    scene = {"robot": robot,
             "environment": [{"name": "ground", "shape": "halfspace"},
                             {"name": "cube", "shape": {"box": [0.03, 0.03, 0.03]},
                              "pose": {"xyz": M.translation.tolist(), "rpy": rpy.tolist()},
                              "material": {"friction": 1.0}}]}
    path = tmp / f"{robot}_cube.yaml"
    path.write_text(yaml.safe_dump(scene))
    return path


def _ur5_files(tmp: Path) -> tuple[Path, Path, Path]:
    """The UR5 URDF of example-robot-data, a user's controllers.yaml (UR driver names) and a <ros2_control>
    block in a separate xacro, as a user of ur_robot_driver has them."""
    from contact_sim_ros.model.loader import default_package_dirs
    urdf = next(Path(d) / "example-robot-data/robots/ur_description/urdf/ur5_robot.urdf"
                for d in default_package_dirs()
                if (Path(d) / "example-robot-data/robots/ur_description/urdf/ur5_robot.urdf").is_file())
    controllers = {
        "controller_manager": {"ros__parameters": {
            "update_rate": 500,
            "joint_state_broadcaster": {"type": "joint_state_broadcaster/JointStateBroadcaster"},
            "scaled_joint_trajectory_controller": {
                "type": "joint_trajectory_controller/JointTrajectoryController"},
            "forward_position_controller": {"type": "position_controllers/JointGroupPositionController"}}},
        "scaled_joint_trajectory_controller": {"ros__parameters": {
            "joints": UR5, "command_interfaces": ["position"], "state_interfaces": ["position", "velocity"],
            "state_publish_rate": 100.0, "action_monitor_rate": 20.0, "allow_partial_joints_goal": False,
            "speed_scaling_interface_name": "speed_scaling/speed_scaling_factor",   # not emulated: reported
            "constraints": {"stopped_velocity_tolerance": 0.2, "goal_time": 1.0,
                            **{j: {"trajectory": 0.2, "goal": 0.02} for j in UR5}}}},
        "forward_position_controller": {"ros__parameters": {"joints": UR5}}}
    cfile = tmp / "ur5_controllers.yaml"
    cfile.write_text(yaml.safe_dump(controllers))
    joints = "".join(f"""
    <joint name="{j}">
      <command_interface name="position"/>
      <state_interface name="position"><param name="initial_value">{q}</param></state_interface>
      <state_interface name="velocity"/>
    </joint>""" for j, q in zip(UR5, [0.0, -1.57, 1.57, 0.0, 0.0, 0.0]))
    block = tmp / "ur5.ros2_control.xacro"
    block.write_text(f"""<?xml version="1.0"?>
<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="ur5">
  <xacro:arg name="plugin" default="mock_components/GenericSystem"/>
  <ros2_control name="ur5" type="system">
    <hardware><plugin>$(arg plugin)</plugin></hardware>{joints}
  </ros2_control>
</robot>
""")
    return urdf, cfile, block


class Nodes(OneNodeAtATime):
    """``nodes[name]`` -> (the node, its joint states): built in this process on first use, the one built before
    it closed (each steps as fast as it can: one at a time)."""

    def __init__(self, ros, tmp):
        super().__init__(ros, keep=2000)
        urdf, cfile, block = _ur5_files(tmp)
        self.specs = {
            "iiwa": ["--robot", "iiwa_wsg", "--real-time-factor", "1.0"],
            "franka": ["--robot", "franka", "--real-time-factor", "0"],
            "wsg": ["--scene", str(_cube_scene(tmp, "iiwa_wsg", "wsg_tcp")), "--real-time-factor", "0"],
            "panda": ["--scene", str(_cube_scene(tmp, "franka", "panda_hand_tcp")), "--real-time-factor", "0"],
            "ur5": ["--urdf", str(urdf), "--real-time-factor", "0"],
        }
        self.ros_params = {"ur5": ["-p", f"controllers_file:={cfile}", "-p", f"ros2_control_file:={block}",
                                   "-p", "inactive_controllers:=[forward_position_controller]"]}

    def flags(self, name):
        flags = [*self.specs[name], "--namespace", name, "--frame-prefix", f"{name}/", "--engine", "tamsi",
                 "--config", str(SCENES / "no_clock.yaml")]
        if name in self.ros_params:
            flags += ["--ros-args", *self.ros_params[name]]
        return flags


@pytest.fixture(scope="module")
def nodes(ros, tmp_path_factory):
    built = Nodes(ros, tmp_path_factory.mktemp("ros2_control"))
    yield built
    built.close()


def positions(js, names):
    p = dict(zip(js[-1].name, js[-1].position))
    return np.array([p[j] for j in names])


def velocities(js, names):
    v = dict(zip(js[-1].name, js[-1].velocity))
    return np.array([v[j] for j in names])


def stamp_s(js):
    return js[-1].header.stamp.sec + 1e-9 * js[-1].header.stamp.nanosec


class Goal:
    """One FollowJointTrajectory goal sent as MoveIt sends it; result() waits for the outcome."""

    def __init__(self, ros, ns, controller, joints, points, times, stamp=None, action=FollowJointTrajectory,
                 path_tolerance=(), goal_time_tolerance=0.0):
        self.client = ActionClient(ros.node, action, f"/{ns}/{controller}/follow_joint_trajectory")
        assert self.client.wait_for_server(timeout_sec=30), "no follow_joint_trajectory action server"
        goal = FollowJointTrajectory.Goal()
        goal.trajectory.joint_names = list(joints)
        if stamp is not None:
            goal.trajectory.header.stamp.sec = int(stamp)
            goal.trajectory.header.stamp.nanosec = int(round((stamp - int(stamp)) * 1e9))
        for p, t in zip(points, times):
            goal.trajectory.points.append(JointTrajectoryPoint(
                positions=[float(x) for x in p], time_from_start=Duration(sec=int(t), nanosec=int(round((t % 1) * 1e9)))))
        goal.path_tolerance = list(path_tolerance)
        goal.goal_time_tolerance = Duration(sec=int(goal_time_tolerance),
                                            nanosec=int(round((goal_time_tolerance % 1) * 1e9)))
        self.feedback = []
        self._done = threading.Event()
        self.handle = None
        self.outcome = None
        fut = self.client.send_goal_async(goal, feedback_callback=lambda m: self.feedback.append(m.feedback))
        fut.add_done_callback(self._accepted)

    def _accepted(self, fut):
        self.handle = fut.result()
        if not self.handle.accepted:
            self._done.set()
            return
        self.handle.get_result_async().add_done_callback(self._result)

    def _result(self, fut):
        self.outcome = fut.result()
        self._done.set()

    def accepted(self, timeout=30.0) -> bool:
        wait_until(lambda: self.handle is not None, timeout, what="goal response")
        return self.handle.accepted

    def result(self, timeout=60.0):
        assert self._done.wait(timeout), "no result"
        return self.outcome.status, self.outcome.result

    def cancel(self):
        wait_until(lambda: self.handle is not None, 30, what="goal response")
        self.handle.cancel_goal_async()


def five_points(q0, delta, dt=0.4):
    """5 points from q0 to q0 + delta (smoothstep), one every dt s."""
    s = np.array([0.1, 0.35, 0.65, 0.9, 1.0])
    return [q0 + (3 * x * x - 2 * x ** 3) * delta for x in s], [dt * (k + 1) for k in range(5)]


def test_switch_controller_swaps_the_trajectory_controller_for_a_forward_one(nodes, ros):
    js = nodes["franka"][1]
    res = switch_controllers(ros, ["arm_position_controller"], ["arm_controller"], namespace="/franka")
    assert res.ok, res.message
    active = active_controllers(ros, "/franka")
    assert "arm_position_controller" in active and "arm_controller" not in active
    hw = ros.call(ListHardwareInterfaces, "/franka/controller_manager/list_hardware_interfaces",
                  ListHardwareInterfaces.Request())
    claimed = {i.name for i in hw.command_interfaces if i.is_claimed}
    assert {f"{j}/position" for j in PANDA} <= claimed
    # the deactivated trajectory controller refuses goals; the forward controller moves the arm
    q0 = positions(js, PANDA)
    assert not Goal(ros, "franka", "arm_controller", PANDA, [q0], [1.0]).accepted()
    target = q0 + np.array([0.2, 0, 0, 0, 0, 0, 0])
    ros.publish(Float64MultiArray, "/franka/arm_position_controller/commands", Float64MultiArray(data=target.tolist()))
    wait_until(lambda: abs(positions(js, PANDA)[0] - target[0]) < 2e-3, 30, what="panda_joint1 at the target")
    # the other joints settle after the move (coupled dynamics) before the hold below is measured
    wait_until(lambda: np.max(np.abs(velocities(js, PANDA))) < 2e-3, 30, what="the arm at rest after the move")
    # a conflicting activation is refused as a whole with STRICT
    res = switch_controllers(ros, ["arm_controller"], [], namespace="/franka")
    assert not res.ok and "arm_position_controller" in res.message
    # deactivated alone, a position controller leaves its joints holding where they are
    res = switch_controllers(ros, [], ["arm_position_controller"], namespace="/franka")
    assert res.ok, res.message
    q1 = positions(js, PANDA)
    t = stamp_s(js)
    wait_until(lambda: stamp_s(js) > t + 1.0, 30, what="1 s with no active arm controller")
    assert np.max(np.abs(positions(js, PANDA) - q1)) < 2e-3
    res = switch_controllers(ros, ["arm_controller"], [], namespace="/franka")
    assert res.ok, res.message


@pytest.mark.parametrize("ns,joints", [("franka", PANDA), ("iiwa", IIWA)])
def test_follow_joint_trajectory_five_points_succeeds_within_goal_tolerance(nodes, ros, ns, joints):
    js = nodes[ns][1]
    q0 = positions(js, joints)
    delta = np.array([0.3, -0.2, 0.25, 0.2, -0.3, 0.2, 0.4])
    points, times = five_points(q0, delta)
    goal = Goal(ros, ns, "arm_controller", joints, points, times)
    assert goal.accepted()
    status, result = goal.result()
    assert status == STATUS_SUCCEEDED and result.error_code == R.SUCCESSFUL, result.error_string
    q = positions(js, joints)
    assert np.max(np.abs(q - points[-1])) < 0.02          # the controllers file's goal tolerance
    assert goal.feedback, "no feedback"
    fb = goal.feedback[-1]
    assert list(fb.joint_names) == joints and len(fb.actual.positions) == 7
    np.testing.assert_allclose(np.array(fb.desired.positions) - fb.actual.positions, fb.error.positions, atol=1e-9)


def test_controller_state_is_published(nodes, ros):
    nodes["iiwa"]
    states = ros.subscribe(JointTrajectoryControllerState, "/iiwa/arm_controller/controller_state", keep=5)
    wait_until(lambda: states, 10, what="arm_controller/controller_state")
    msg = states[-1]
    assert list(msg.joint_names) == IIWA
    np.testing.assert_allclose(np.array(msg.reference.positions) - msg.feedback.positions, msg.error.positions,
                               atol=1e-9)


def test_cancel_stops_the_arm_and_holds(nodes, ros):
    js = nodes["iiwa"][1]
    q0 = positions(js, IIWA)
    goal = Goal(ros, "iiwa", "arm_controller", IIWA, [q0 + np.array([0.8, 0, 0, 0, 0, 0, 0])], [8.0])
    assert goal.accepted()
    t0 = stamp_s(js)
    wait_until(lambda: stamp_s(js) > t0 + 1.0, 30, what="1 s of motion")
    goal.cancel()
    status, _ = goal.result()
    assert status == STATUS_CANCELED
    # the result and /joint_states are different DDS topics: the last joint state received with the result can be
    # tens of ms older than the stop (seen: 98 ms); read where the arm stands 0.1 s (sim) after the result
    t_result = stamp_s(js)
    wait_until(lambda: stamp_s(js) > t_result + 0.1, 30, what="0.1 s after the cancel result")
    q_cancel = positions(js, IIWA)
    assert 0.02 < q_cancel[0] - q0[0] < 0.4                   # stopped on the way (0.1 rad/s planned); that it
    #                                                           holds there: test_driver_controllers (sim time)


def test_a_new_goal_preempts_the_active_one(nodes, ros):
    js = nodes["iiwa"][1]
    q0 = positions(js, IIWA)
    first = Goal(ros, "iiwa", "arm_controller", IIWA, [q0 + np.array([0, 0, 0, 0, 0, 0, 1.0])], [10.0])
    assert first.accepted()
    t0 = stamp_s(js)
    wait_until(lambda: stamp_s(js) > t0 + 0.5, 30, what="0.5 s of the first goal")
    target = q0 + np.array([0, 0, 0, 0, 0, 0, -0.2])
    second = Goal(ros, "iiwa", "arm_controller", IIWA, [target], [1.0])
    status, result = first.result()
    assert status == STATUS_CANCELED and result.error_code == R.INVALID_GOAL
    assert second.result()[0] == STATUS_SUCCEEDED
    # the last joint state received with the result can be tens of ms older than the trajectory's end (seen: 20 ms
    # before it, 10-20 mrad short while moving at 0.25 rad/s): where the arm stands 0.1 s (sim) after the result
    t_result = stamp_s(js)
    wait_until(lambda: stamp_s(js) > t_result + 0.1, 30, what="0.1 s after the result")
    assert abs(positions(js, IIWA)[6] - target[6]) < 0.02


@pytest.mark.parametrize("ns,joint,max_effort", [("wsg", "wsg_finger_left_joint", 40.0),
                                                 ("panda", "panda_finger_joint1", 30.0)])
def test_gripper_command_stalls_on_the_object_at_max_effort(nodes, ros, ns, joint, max_effort):
    js = nodes[ns][1]
    client = ActionClient(ros.node, GripperCommand, f"/{ns}/gripper_action_controller/gripper_cmd")
    assert client.wait_for_server(timeout_sec=30)
    goal = GripperCommand.Goal()
    goal.command.position, goal.command.max_effort = 0.0, max_effort
    fut = client.send_goal_async(goal)
    wait_until(fut.done, 30, what="goal response")
    res = fut.result().get_result_async()
    wait_until(res.done, 60, what="gripper result")
    out = res.result()
    r = out.result
    assert out.status == STATUS_SUCCEEDED            # allow_stalling: true in the controllers file
    assert r.stalled and not r.reached_goal
    assert 0.012 < r.position < 0.016                 # on the 30 mm cube (half width 15 mm per finger)
    assert abs(r.effort) == pytest.approx(max_effort, rel=0.10)
    # and it holds: the finger stays on the cube, pressing
    t = stamp_s(js)
    wait_until(lambda: stamp_s(js) > t + 0.5, 30, what="0.5 s after the grasp")
    p = dict(zip(js[-1].name, js[-1].position))
    e = dict(zip(js[-1].name, js[-1].effort))
    assert p[joint] == pytest.approx(r.position, abs=1e-3)
    assert abs(e[joint]) == pytest.approx(max_effort, rel=0.10)


def test_users_ur5_with_its_controllers_file_and_ros2_control_block_tracks_a_trajectory(nodes, ros, capfd):
    capfd.readouterr()
    if nodes.name == "ur5":
        nodes.close()                                                 # built anew: its start-up log read here
    _, js = nodes["ur5"]
    captured = capfd.readouterr()
    assert "no PD gains given for 6 joints" in captured.err + captured.out    # the start-up warning, gains named
    names = set(ros.call(ListControllers, "/ur5/controller_manager/list_controllers",
                         ListControllers.Request()).controller[k].name for k in range(3))
    assert names == {"joint_state_broadcaster", "scaled_joint_trajectory_controller", "forward_position_controller"}
    q0 = positions(js, UR5)
    np.testing.assert_allclose(q0, [0.0, -1.57, 1.57, 0.0, 0.0, 0.0], atol=0.02)   # initial_value of the block
    points, times = five_points(q0, np.array([0.4, -0.3, 0.3, -0.2, 0.3, 0.5]), dt=0.5)
    goal = Goal(ros, "ur5", "scaled_joint_trajectory_controller", UR5, points, times)
    status, result = goal.result()
    assert status == STATUS_SUCCEEDED, result.error_string
    assert np.max(np.abs(positions(js, UR5) - points[-1])) < 0.02
