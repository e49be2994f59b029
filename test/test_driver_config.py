"""Controllers files read as the real controller_manager reads them, in sim time without DDS (issue 27, item 2).

rcl's parameter-file rules (rcl_yaml_param_parser parse.c, rclcpp parameter_map.cpp and
resolve_parameter_overrides.cpp): nested node-name keys are joined with '/', a repeated key is merged into its first
occurrence parameter by parameter, a node gets the parameters of every key matching its fully qualified name ('/*'
one token, '/**' any number) in the order of the keys' first appearance, later ones overriding earlier ones; nested
parameter mappings are dotted names. Jazzy's controller_manager parameters (controller_manager_parameters.yaml,
ros2_control_node.cpp) are never controllers; a controller is loaded only if a spawner would load it (node
parameters active_controllers / inactive_controllers).

The vendor files below have the structure of franka_ros2's FR3 ``franka_bringup/config/controllers.yaml`` (one
``/**:`` key holding ``controller_manager:`` with its parameters, a second ``/**:`` with the controllers' sections,
the arm's effort JointTrajectoryController with PID ``gains``, the franka_robot_state_broadcaster) and of the UR
driver's Jazzy ``ur_robot_driver/config/ur_controllers.yaml`` (every UR controller type, the
scaled_joint_trajectory_controller, ``$(var tf_prefix)`` substituted with '' as the launch file does), on a
two-joint arm whose joints carry the vendor's first two joint names.
"""

import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from builtin_interfaces.msg import Duration, Time
from control_msgs.msg import JointTolerance
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from contact_sim_ros.driver.command_validation import JointLimits
from contact_sim_ros.driver.config import name_matches, node_parameters, read_controllers_file, read_parameter_file
from contact_sim_ros.driver.controller_manager import ControllerManager
from contact_sim_ros.driver.controllers.base import ControllerTransport
from contact_sim_ros.driver.controllers.joint_trajectory import SUCCESSFUL, JointTrajectoryController
from contact_sim_ros.driver.controllers.registry import CONTROLLER_TYPES
from contact_sim_ros.driver.controllers.scaled_joint_trajectory import ScaledJointTrajectoryController
from contact_sim_ros.driver.loop import SteppingLoop
from contact_sim_ros.driver.robot import prefixed_controllers
from contact_sim_ros.driver.system import SimulatorSystem
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.sim.simulator import Simulator
from vendor_files import vendor_path

DT = 1e-3

URDF = """<?xml version="1.0"?>
<robot name="arm">
  <link name="base"/>
  <link name="l1"><inertial><mass value="1.0"/><origin xyz="0.15 0 0"/>
    <inertia ixx="0.002" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="l2"><inertial><mass value="0.5"/><origin xyz="0.1 0 0"/>
    <inertia ixx="0.001" iyy="0.004" izz="0.004" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="{j1}" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
    <limit lower="-2.5" upper="2.5" velocity="2.0" effort="50"/></joint>
  <joint name="{j2}" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0.3 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-2.5" upper="2.5" velocity="2.0" effort="20"/></joint>
</robot>
"""

FR3_JOINTS = ["fr3_joint1", "fr3_joint2"]
UR_JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint"]

# franka_ros2 (FR3) franka_bringup/config/controllers.yaml, as structured upstream
FR3_FILE = """
/**:
  controller_manager:
    ros__parameters:
      update_rate: 1000  # Hz
      thread_priority: 50
      overruns:
        manage: true
        print_warnings: false

      fr3_arm_controller:
        type: joint_trajectory_controller/JointTrajectoryController

      joint_state_broadcaster:
        type: joint_state_broadcaster/JointStateBroadcaster

      franka_robot_state_broadcaster:
        type: franka_robot_state_broadcaster/FrankaRobotStateBroadcaster

/**:
  franka_robot_state_broadcaster:
    ros__parameters:
      arm_id: fr3
      lock_try_count: 5 # attempts to acquire the lock in a single on_update()
      lock_sleep_interval: 5 # microseconds between attempts

  fr3_arm_controller:
    ros__parameters:
      command_interfaces:
        - effort
      state_interfaces:
        - position
        - velocity
      joints:
        - fr3_joint1
        - fr3_joint2
      gains:
        fr3_joint1: { p: 600., d: 30., i: 0., i_clamp: 1. }
        fr3_joint2: { p: 600., d: 30., i: 0., i_clamp: 1. }
"""

# a later '/**' key of the user's (as a second parameters file would add): the arm on the position interface
FR3_POSITION = """
/**:
  fr3_arm_controller:
    ros__parameters:
      command_interfaces: [position]
"""

# Universal_Robots_ROS2_Driver (Jazzy) ur_robot_driver/config/ur_controllers.yaml, tf_prefix ''
UR_FILE = """
controller_manager:
  ros__parameters:
    joint_state_broadcaster:
      type: joint_state_broadcaster/JointStateBroadcaster
    io_and_status_controller:
      type: ur_controllers/GPIOController
    speed_scaling_state_broadcaster:
      type: ur_controllers/SpeedScalingStateBroadcaster
    force_torque_sensor_broadcaster:
      type: force_torque_sensor_broadcaster/ForceTorqueSensorBroadcaster
    joint_trajectory_controller:
      type: joint_trajectory_controller/JointTrajectoryController
    scaled_joint_trajectory_controller:
      type: ur_controllers/ScaledJointTrajectoryController
    forward_velocity_controller:
      type: velocity_controllers/JointGroupVelocityController
    forward_effort_controller:
      type: effort_controllers/JointGroupEffortController
    forward_position_controller:
      type: position_controllers/JointGroupPositionController
    force_mode_controller:
      type: ur_controllers/ForceModeController
    friction_model_controller:
      type: ur_controllers/FrictionModelController
    freedrive_mode_controller:
      type: ur_controllers/FreedriveModeController
    passthrough_trajectory_controller:
      type: ur_controllers/PassthroughTrajectoryController
    tcp_pose_broadcaster:
      type: pose_broadcaster/PoseBroadcaster
    ur_configuration_controller:
      type: ur_controllers/URConfigurationController
    tool_contact_controller:
      type: ur_controllers/ToolContactController
    gravity_update_controller:
      type: ur_controllers/GravityUpdateController
    enforce_command_limits: false

speed_scaling_state_broadcaster:
  ros__parameters:
    state_publish_rate: 100.0
    tf_prefix: ""

io_and_status_controller:
  ros__parameters:
    tf_prefix: ""

force_torque_sensor_broadcaster:
  ros__parameters:
    sensor_name: tcp_fts_sensor
    state_interface_names: [force.x, force.y, force.z, torque.x, torque.y, torque.z]
    frame_id: tool0_controller
    topic_name: ft_data

joint_trajectory_controller:
  ros__parameters:
    joints: [shoulder_pan_joint, shoulder_lift_joint]
    command_interfaces: [position]
    state_interfaces: [position, velocity]
    state_publish_rate: 100.0
    action_monitor_rate: 20.0
    allow_partial_joints_goal: false
    constraints:
      stopped_velocity_tolerance: 0.2
      goal_time: 0.0
      shoulder_pan_joint: { trajectory: 0.2, goal: 0.1 }
      shoulder_lift_joint: { trajectory: 0.2, goal: 0.1 }

scaled_joint_trajectory_controller:
  ros__parameters:
    joints: [shoulder_pan_joint, shoulder_lift_joint]
    command_interfaces: [position]
    state_interfaces: [position, velocity]
    state_publish_rate: 100.0
    action_monitor_rate: 20.0
    allow_partial_joints_goal: false
    constraints:
      stopped_velocity_tolerance: 0.2
      goal_time: 0.0
      shoulder_pan_joint: { trajectory: 0.2, goal: 0.1 }
      shoulder_lift_joint: { trajectory: 0.2, goal: 0.1 }
    speed_scaling_interface_name: speed_scaling/speed_scaling_factor

passthrough_trajectory_controller:
  ros__parameters:
    tf_prefix: ""
    joints: [shoulder_pan_joint, shoulder_lift_joint]
    state_interfaces: [position, velocity]
    speed_scaling_interface_name: speed_scaling/speed_scaling_factor

forward_velocity_controller:
  ros__parameters:
    joints: [shoulder_pan_joint, shoulder_lift_joint]
    interface_name: velocity

forward_effort_controller:
  ros__parameters:
    joints: [shoulder_pan_joint, shoulder_lift_joint]
    interface_name: effort

forward_position_controller:
  ros__parameters:
    joints: [shoulder_pan_joint, shoulder_lift_joint]
    interface_name: position

tcp_pose_broadcaster:
  ros__parameters:
    frame_id: base
    pose_name: tcp_pose
    tf:
      child_frame_id: tool0_controller
"""

# ur_robot_driver/launch/ur_control.launch.py (Jazzy): its two spawners, initial_joint_controller
# scaled_joint_trajectory_controller activated
UR_ACTIVE = ["joint_state_broadcaster", "io_and_status_controller", "speed_scaling_state_broadcaster",
             "force_torque_sensor_broadcaster", "tcp_pose_broadcaster", "ur_configuration_controller",
             "gravity_update_controller", "friction_model_controller", "scaled_joint_trajectory_controller"]
UR_INACTIVE = ["joint_trajectory_controller", "forward_velocity_controller", "forward_position_controller",
               "forward_effort_controller", "force_mode_controller", "passthrough_trajectory_controller",
               "freedrive_mode_controller", "tool_contact_controller"]


class Reports(ControllerTransport):
    """The transport's reports, kept (no topics: goals are handed to the controllers directly)."""

    def __init__(self):
        self.warnings, self.infos = [], []

    def warn_throttled(self, message, key=None):
        self.warnings.append(message)

    def info(self, message):
        self.infos.append(message)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def world(tmp_path, joints, file_text, active=(), inactive=(), namespace="/"):
    urdf = write(tmp_path, "arm.urdf", URDF.format(j1=joints[0], j2=joints[1]))
    cfile = write(tmp_path, "controllers.yaml", file_text)
    sim = Simulator({"robot": {"urdf": str(urdf)}}, engine="semi_implicit", time_step=DT)
    system = SimulatorSystem(sim)
    reports = Reports()
    cm = ControllerManager(system, read_controllers_file(cfile, namespace=namespace), list(inactive),
                           transport=reports, limits=JointLimits.from_model(sim.model),
                           active=list(active))
    return SimpleNamespace(sim=sim, cm=cm, loop=SteppingLoop(system, cm, real_time_factor=0.0), reports=reports,
                           file=cfile)


def run_trajectory(w, controller, joints, target):
    """A FollowJointTrajectory goal to ``target`` in 1 s through ``controller``, stepped in sim time until it
    ends; the execution."""
    msg = JointTrajectory(joint_names=list(joints))
    msg.header.stamp = Time()
    for t, q in ((0.5, [x / 2 for x in target]), (1.0, target)):
        msg.points.append(JointTrajectoryPoint(positions=[float(x) for x in q],
                                               time_from_start=Duration(sec=int(t), nanosec=int((t % 1) * 1e9))))
    goal = SimpleNamespace(trajectory=msg, path_tolerance=[],
                           goal_tolerance=[JointTolerance(name=j, position=1e-3) for j in joints],
                           goal_time_tolerance=Duration(nanosec=500_000_000))
    c = w.cm.controllers[controller]
    ex = c.goal(goal, "handle")
    c.submit(ex)
    for _ in range(2000):
        if ex.done.is_set():
            break
        report = w.loop.step_now()
        assert report.ok, report.message
    return ex


# ------------------------------------------------------------------------------------------ rcl's rules


def test_several_top_level_keys_merge_per_parameter_in_rcls_order(tmp_path):
    f = write(tmp_path, "p.yaml", """
        /**:
          ros__parameters: {a: 1, b: 1, d: 1}
        arm:
          ros__parameters:
            a: 2
            gains: {j1: {p: 5.0, d: 0.5}}
        /**:
          ros__parameters: {a: 3, b: 3, c: 3}
        /**/arm:
          ros__parameters:
            gains.j1.p: 7.0
        /*/arm:
          ros__parameters: {e: 4}
        """)
    entries = read_parameter_file(f)
    # rcl's structure: one entry per node name in order of first appearance; the repeated '/**' merged into the
    # first (d of the first block kept, b and c of the second), not replaced by the last block
    assert [e[0] for e in entries] == ["/**", "/arm", "/**/arm", "/*/arm"]
    assert entries[0][2] == {"a": 3, "b": 3, "d": 1, "c": 3}
    params, _ = node_parameters(entries, "/arm")
    # '/arm' comes after '/**' (first appearance): its a = 2 wins over the later '/**' block's a = 3; the nested
    # gains.j1.p of 'arm' and the dotted one of '/**/arm' are one parameter (the later wins); '/*/arm' needs a
    # namespace token, so /arm does not get e
    assert params == {"a": 2, "b": 3, "d": 1, "c": 3, "gains.j1.p": 7.0, "gains.j1.d": 0.5}
    left, _ = node_parameters(entries, "/left/arm")
    assert left["e"] == 4 and left["gains.j1.p"] == 7.0


@pytest.mark.parametrize("key,fqn,matches", [
    ("/**", "/controller_manager", True), ("/**", "/a/b/arm", True),
    ("/**/arm", "/arm", True), ("/**/arm", "/a/b/arm", True), ("/**/arm", "/a/b/arm2", False),
    ("/*/arm", "/arm", False), ("/*/arm", "/left/arm", True), ("/*/arm", "/a/b/arm", False),
    ("/arm", "/left/arm", False), ("/left/arm", "/left/arm", True), ("/left/*", "/left/cm", True),
])
def test_node_name_wildcards_match_as_rclcpp_matches_them(key, fqn, matches):
    assert name_matches(key, fqn) is matches


def test_namespaced_manager_keys_apply_in_their_namespace_only(tmp_path):
    f = write(tmp_path, "c.yaml", """
        /left/controller_manager:
          ros__parameters:
            update_rate: 250
            arm: {type: joint_trajectory_controller/JointTrajectoryController}
        /right/controller_manager:
          ros__parameters:
            update_rate: 500
            arm: {type: joint_trajectory_controller/JointTrajectoryController}
        """)
    assert read_controllers_file(f, namespace="/left").update_rate == 250
    assert read_controllers_file(f, namespace="right").update_rate == 500
    with pytest.raises(ConfigError) as exc:
        read_controllers_file(f)
    assert str(f) in str(exc.value) and "/left/controller_manager" in str(exc.value) and "/**/" in str(exc.value)


def test_controller_manager_parameters_are_not_controllers(tmp_path):
    f = write(tmp_path, "c.yaml", """
        controller_manager:
          ros__parameters:
            update_rate: 500
            enforce_command_limits: true
            handle_exceptions: false
            thread_priority: 40
            cpu_affinity: [0, 1]
            lock_memory: false
            use_sim_time: true
            overruns:
              manage: false
              print_warnings: false
            hardware_components_initial_state:
              unconfigured: [gripper_hw]
              inactive: [arm_hw]
            defaults:
              switch_controller: {strictness: strict}
            diagnostics:
              threshold:
                controllers:
                  periodicity: {mean_error: {warn: 5.0, error: 10.0}}
            hardware_synchronization: {expect_blocking_read_write: false}
            jsb:
              type: joint_state_broadcaster/JointStateBroadcaster
            arm:
              type: joint_trajectory_controller/JointTrajectoryController
              params_file: []
            not_a_controller:
              joints: [a]
        """)
    cf = read_controllers_file(f)
    assert cf.names() == ["jsb", "arm"]
    assert cf.update_rate == 500
    assert cf.manager_params["overruns.manage"] is False
    assert cf.manager_params["hardware_components_initial_state.inactive"] == ["arm_hw"]
    assert cf.manager_params["diagnostics.threshold.controllers.periodicity.mean_error.warn"] == 5.0
    # a group without a type is a parameter of the manager (the real one declares it from the overrides), said once
    assert len(cf.notes) == 1 and "not_a_controller" in cf.notes[0] and "no 'type'" in cf.notes[0]


def test_a_controllers_params_file_overrides_the_main_files_sections(tmp_path):
    extra = write(tmp_path, "arm_params.yaml", """
        /**/arm:
          ros__parameters:
            constraints: {goal_time: 2.0}
        """)
    f = write(tmp_path, "c.yaml", f"""
        controller_manager:
          ros__parameters:
            arm:
              type: joint_trajectory_controller/JointTrajectoryController
              params_file: {extra}
        arm:
          ros__parameters:
            joints: [a]
            constraints.goal_time: 0.5
        """)
    arm = read_controllers_file(f).controller("arm")
    assert arm.params == {"joints": ["a"], "constraints.goal_time": 2.0}


# ------------------------------------------------------------------------------------------ vendor files


def test_fr3_file_nested_and_repeated_wildcards_overruns_and_gains_are_read(tmp_path):
    cf = read_controllers_file(write(tmp_path, "fr3.yaml", FR3_FILE))
    assert cf.update_rate == 1000
    assert cf.names() == ["fr3_arm_controller", "joint_state_broadcaster", "franka_robot_state_broadcaster"]
    assert cf.manager_params["overruns.manage"] is True and cf.manager_params["thread_priority"] == 50
    arm = cf.controller("fr3_arm_controller")
    assert arm.params["joints"] == FR3_JOINTS and arm.params["command_interfaces"] == ["effort"]
    assert arm.params["gains.fr3_joint1.p"] == 600.0 and arm.params["gains.fr3_joint2.d"] == 30.0
    assert cf.controller("franka_robot_state_broadcaster").params == {
        "arm_id": "fr3", "lock_try_count": 5, "lock_sleep_interval": 5}
    assert cf.notes == ()


def test_fr3_file_spawned_franka_robot_state_broadcaster_needs_the_seven_arm_joints(tmp_path):
    """franka_bringup's launch spawns joint_state_broadcaster and franka_robot_state_broadcaster: the latter is
    emulated (driver/controllers/franka_robot_state_broadcaster.py; over DDS: test/ros/test_franka_interfaces.py)
    on the arm's joints <arm_id>_joint1..7; this two-joint arm lacks them, a start-up error naming the file, the
    controller and the joints."""
    with pytest.raises(ConfigError) as exc:
        world(tmp_path, FR3_JOINTS, FR3_FILE + FR3_POSITION,
              active=["joint_state_broadcaster", "franka_robot_state_broadcaster", "fr3_arm_controller"])
    text = str(exc.value)
    assert "controllers.yaml" in text and "franka_robot_state_broadcaster" in text
    assert "fr3_joint1..7" in text and "\n" not in text


def test_fr3_file_spawned_arm_runs_a_trajectory_in_sim_time(tmp_path):
    w = world(tmp_path, FR3_JOINTS, FR3_FILE + FR3_POSITION,
              active=["joint_state_broadcaster", "fr3_arm_controller"])
    assert list(w.cm.controllers) == ["fr3_arm_controller", "joint_state_broadcaster"]
    assert all(c.active for c in w.cm.controllers.values())
    arm = w.cm.controllers["fr3_arm_controller"]
    assert arm.params["command_interfaces"] == ["position"] and arm.params["gains.fr3_joint1.p"] == 600.0
    # the not spawned franka_robot_state_broadcaster (an emulated type): not loaded, nothing to warn about
    assert not [m for m in w.reports.warnings if "franka_robot_state_broadcaster" in m]
    ex = run_trajectory(w, "fr3_arm_controller", FR3_JOINTS, [0.4, -0.3])
    assert (ex.status, ex.error_code) == ("succeeded", SUCCESSFUL)
    assert 1.0 <= w.sim.t < 1.5
    np.testing.assert_allclose(w.sim.joint_positions()[:2], [0.4, -0.3], atol=1e-3)


def test_ur_file_with_its_launch_spawn_lists_refuses_the_first_spawned_ur_type(tmp_path):
    with pytest.raises(ConfigError) as exc:
        world(tmp_path, UR_JOINTS, UR_FILE, active=UR_ACTIVE, inactive=UR_INACTIVE)
    text = str(exc.value)
    assert "'io_and_status_controller'" in text and "ur_controllers/GPIOController" in text
    assert "ur_controllers/ScaledJointTrajectoryController" in text     # among the supported types


def test_ur_file_scaled_trajectory_controller_runs_as_a_jtc_at_full_speed(tmp_path):
    """The UR launch's lists restricted to the emulated types: the scaled JTC (MoveIt's default for UR) and the
    speed_scaling_state_broadcaster active, the JTC and forward controllers inactive; the UR hardware controllers
    not spawned are one warning."""
    emulated = {n for n in UR_ACTIVE + UR_INACTIVE if n in (
        "joint_state_broadcaster", "speed_scaling_state_broadcaster", "scaled_joint_trajectory_controller",
        "joint_trajectory_controller", "forward_velocity_controller", "forward_position_controller",
        "forward_effort_controller")}
    active = [n for n in UR_ACTIVE if n in emulated]
    inactive = [n for n in UR_INACTIVE if n in emulated]
    w = world(tmp_path, UR_JOINTS, UR_FILE, active=active, inactive=inactive)
    assert sorted(w.cm.controllers) == sorted(active + inactive)
    scaled = w.cm.controllers["scaled_joint_trajectory_controller"]
    assert isinstance(scaled, ScaledJointTrajectoryController) and isinstance(scaled, JointTrajectoryController)
    assert scaled.active and not w.cm.controllers["joint_trajectory_controller"].active
    assert "speed_scaling_interface_name" not in scaled.unhonoured_parameters()
    speed = w.cm.controllers["speed_scaling_state_broadcaster"]      # its speed_scaling topic: percent, 100 Hz
    assert speed.active and speed.speed_scaling_percent() == 100.0 and speed.publish_every == 10
    assert speed.unhonoured_parameters() == []
    [warning] = [m for m in w.reports.warnings if "not loaded" in m]
    for name in ("io_and_status_controller", "force_mode_controller", "tcp_pose_broadcaster"):
        assert f"'{name}'" in warning
    ex = run_trajectory(w, "scaled_joint_trajectory_controller", UR_JOINTS, [0.5, -0.4])
    assert (ex.status, ex.error_code) == ("succeeded", SUCCESSFUL)
    assert 1.0 <= w.sim.t < 1.5               # the trajectory time ran at speed scaling 1.0
    np.testing.assert_allclose(w.sim.joint_positions()[:2], [0.5, -0.4], atol=1e-3)


# ------------------------------------------------------------------------------------------ spawn lists


SMALL = """
controller_manager:
  ros__parameters:
    update_rate: 500
    joint_state_broadcaster: {type: joint_state_broadcaster/JointStateBroadcaster}
    arm: {type: joint_trajectory_controller/JointTrajectoryController}
    forward: {type: position_controllers/JointGroupPositionController}
    vendor_broadcaster: {type: vendor_controllers/StateBroadcaster}
arm:
  ros__parameters: {joints: [j1, j2]}
forward:
  ros__parameters: {joints: [j1, j2]}
"""


def test_without_spawn_lists_every_emulated_controller_loads_and_the_others_are_one_warning(tmp_path):
    w = world(tmp_path, ["j1", "j2"], SMALL, inactive=["forward"])
    assert list(w.cm.controllers) == ["joint_state_broadcaster", "arm", "forward"]
    assert [n for n, c in w.cm.controllers.items() if c.active] == ["joint_state_broadcaster", "arm"]
    [warning] = [m for m in w.reports.warnings if "vendor_broadcaster" in m]
    assert "vendor_controllers/StateBroadcaster" in warning and "\n" not in warning


def test_only_the_spawned_controllers_load(tmp_path):
    w = world(tmp_path, ["j1", "j2"], SMALL, active=["forward"], inactive=["arm"])
    assert list(w.cm.controllers) == ["arm", "forward"]
    assert w.cm.controllers["forward"].active and not w.cm.controllers["arm"].active


@pytest.mark.parametrize("active,inactive,needle", [
    (["arm", "vendor_broadcaster"], [], "spawned by the node parameter active_controllers"),
    ([], ["vendor_broadcaster"], "spawned by the node parameter inactive_controllers"),
    (["arm", "gripper"], [], "['gripper'] are not declared"),
    (["arm"], ["arm"], "are in both active_controllers and inactive_controllers"),
])
def test_spawning_what_cannot_be_loaded_is_a_start_up_error(tmp_path, active, inactive, needle):
    with pytest.raises(ConfigError) as exc:
        world(tmp_path, ["j1", "j2"], SMALL, active=active, inactive=inactive)
    assert "controllers.yaml" in str(exc.value) and needle in str(exc.value)
    if "spawned" in needle:
        assert "supported types" in str(exc.value)


def test_a_robots_prefix_is_added_to_the_joints_of_dotted_parameters(tmp_path):
    """A vendor file names joints without the robot's prefix (left_): joints, constraints.<joint>.*,
    gains.<joint>.* and the F/T interface_names.* (rcl's dotted names) get it where the prefixed name exists."""
    f = write(tmp_path, "c.yaml", """
        /**:
          controller_manager:
            ros__parameters:
              arm: {type: joint_trajectory_controller/JointTrajectoryController}
              ft: {type: force_torque_sensor_broadcaster/ForceTorqueSensorBroadcaster}
          arm:
            ros__parameters:
              joints: [j1, j2]
              constraints: {goal_time: 1.0, j1: {goal: 0.01}}
              gains: {j2: {p: 50.0}}
          ft:
            ros__parameters:
              interface_names: {force.x: ft_sensor/force.x}
        """)
    cf = prefixed_controllers(read_controllers_file(f), "left_", ["left_j1", "left_j2"], ["left_ft_sensor"])
    assert cf.controller("arm").params == {"joints": ["left_j1", "left_j2"], "constraints.goal_time": 1.0,
                                           "constraints.left_j1.goal": 0.01, "gains.left_j2.p": 50.0}
    assert cf.controller("ft").params == {"interface_names.force.x": "left_ft_sensor/force.x"}


def test_relative_keys_are_read_in_a_namespace_with_a_note(tmp_path):
    """'controller_manager:' and 'arm:' are, for rclcpp, the nodes of the root namespace; the node in /ur5 reads
    them anyway (every shipped file has that layout) and says once how the real one would need them."""
    cf = read_controllers_file(write(tmp_path, "c.yaml", SMALL), namespace="/ur5")
    assert cf.update_rate == 500 and cf.controller("arm").params == {"joints": ["j1", "j2"]}
    [note] = cf.notes
    assert "/ur5/controller_manager" in note and "'/**/controller_manager:'" in note


# ------------------------------------------------------------------------------------------ the LBR stack

LBR_FILE = ("ros2_control_files", "lbr_controllers.lbr_fri_ros2_stack.yaml")    # vendor_files.vendor_path
LBR_JOINTS = [f"lbr_A{i}" for i in range(1, 8)]


def test_lbr_stacks_own_file_with_its_mock_launch_spawns_runs_a_trajectory(tmp_path):
    """lbr_fri_ros2_stack's lbr_controllers.yaml as it ships (``/**/controller_manager``, ``/**/<controller>``
    sections, LBR controller types the simulation does not emulate), read in the namespace its launch files give
    (``lbr``) with what mock.launch.py spawns (joint_state_broadcaster and its default ctrl,
    joint_trajectory_controller), on the package's iiwa (its preset's drive gains) with the LBR description's
    joint and link names: the two
    load, the manager runs at the file's 100 Hz, the unemulated types are one warning naming them, and a
    FollowJointTrajectory goal ends within its 1 mrad goal tolerance in sim time."""
    iiwa = (Path(__file__).resolve().parents[1] / "urdf" / "iiwa.urdf").read_text()
    urdf = tmp_path / "lbr.urdf"
    urdf.write_text(iiwa.replace("iiwa_joint_", "lbr_A").replace("iiwa_link_", "lbr_link_"))
    gains = dict(zip(LBR_JOINTS, ({"kp": kp, "kd": kp / 25.0} for kp in (2000, 2000, 1000, 1000, 500, 200, 100))))
    sim = Simulator({"robot": {"urdf": str(urdf), "gains": gains}}, engine="semi_implicit", time_step=DT)
    system = SimulatorSystem(sim)
    reports = Reports()
    lbr_file = read_controllers_file(vendor_path(*LBR_FILE), namespace="/lbr")
    cm = ControllerManager(system, lbr_file, [], transport=reports,
                           limits=JointLimits.from_model(sim.model),
                           active=["joint_state_broadcaster", "joint_trajectory_controller"])
    w = SimpleNamespace(sim=sim, cm=cm, loop=SteppingLoop(system, cm, real_time_factor=0.0), reports=reports)
    assert set(cm.controllers) == {"joint_state_broadcaster", "joint_trajectory_controller"}
    assert cm.every * DT == pytest.approx(1 / 100.0)          # update_rate: 100
    jtc = cm.controllers["joint_trajectory_controller"]
    assert list(jtc.joints) == LBR_JOINTS and jtc.commands == ["position"]
    unemulated = " ".join(reports.warnings + reports.infos)
    for t in ("LBRStateBroadcaster", "AdmittanceController", "TwistController"):
        assert t in unemulated, unemulated
    target = [0.3, -0.2, 0.1, -0.4, 0.2, 0.3, -0.1]
    ex = run_trajectory(w, "joint_trajectory_controller", LBR_JOINTS, target)
    assert (ex.status, ex.error_code) == ("succeeded", SUCCESSFUL), ex.error_string
    idx = [list(sim.model.joint_names).index(j) for j in LBR_JOINTS]
    np.testing.assert_allclose(system.state.position[idx], target, atol=1e-3)

