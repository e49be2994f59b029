"""The user's ros2_control files read as the controller_manager reads them (no DDS): controllers YAML with
namespaced/wildcard keys, <ros2_control> blocks (joints, interfaces, initial values, mimic, sensors), clear
errors naming the file, and the supported controller types."""

import textwrap

import pytest

from contact_sim_ros.driver.config import default_controllers, parse_ros2_control, read_controllers_file, read_ros2_control
from contact_sim_ros.driver.controllers.registry import CONTROLLER_TYPES, controller_class
from contact_sim_ros.errors import ConfigError


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_controllers_file_with_namespaces_wildcards_and_nested_parameters(tmp_path):
    f = write(tmp_path, "c.yaml", """
        /**/controller_manager:
          ros__parameters:
            update_rate: 500
            jsb: {type: joint_state_broadcaster/JointStateBroadcaster}
            arm: {type: joint_trajectory_controller/JointTrajectoryController}
        /robot/arm:
          ros__parameters:
            joints: [a, b]
            constraints: {goal_time: 0.5, a: {goal: 0.01}}
        /**:
          ros__parameters:
            use_sim_time: true
        """)
    cf = read_controllers_file(f, namespace="/robot")
    assert cf.update_rate == 500 and cf.names() == ["jsb", "arm"]
    arm = cf.controllers[1]
    assert arm.type.endswith("JointTrajectoryController")
    assert arm.params["joints"] == ["a", "b"] and arm.params["constraints.a.goal"] == 0.01   # rcl's dotted names
    assert arm.params["use_sim_time"] is True
    # '/robot/arm' is the node arm in /robot only (rclcpp's match): a manager in '/' does not give it to its arm
    assert read_controllers_file(f).controller("arm").params == {"use_sim_time": True}


@pytest.mark.parametrize("text,needle", [
    ("arm: {ros__parameters: {joints: [a]}}\n", "no 'controller_manager"),
    ("controller_manager: {ros__parameters: {update_rate: 100, arm: {joints: [a]}}}\n", "have no 'type'"),
    ("controller_manager: {ros__parameters: {update_rate: -5, arm: {type: a/B}}}\n", "update_rate"),
    ("controller_manager: {ros__parameters: {update_rate: 100}}\n", "lists no controller"),
    ("controller_manager: [1, 2]\n", "ros__parameters"),
])
def test_malformed_controllers_files_name_the_file_and_the_problem(tmp_path, text, needle):
    f = write(tmp_path, "bad.yaml", text)
    with pytest.raises(ConfigError) as exc:
        read_controllers_file(f)
    assert str(f) in str(exc.value) and needle in str(exc.value)


def test_ros2_control_block_joints_interfaces_initial_values_mimic_and_sensors(tmp_path):
    urdf = """<robot name="r">
      <link name="base"/>
      <ros2_control name="sys" type="system">
        <hardware><plugin>mock_components/GenericSystem</plugin></hardware>
        <joint name="j1">
          <command_interface name="position"/>
          <state_interface name="position"><param name="initial_value">0.25</param></state_interface>
          <state_interface name="velocity"/>
        </joint>
        <joint name="j2"><param name="mimic">j1</param><param name="multiplier">-1</param>
          <state_interface name="position"/></joint>
        <sensor name="ft"><state_interface name="force.x"/><param name="frame_id">ft_frame</param></sensor>
      </ros2_control>
    </robot>"""
    info = parse_ros2_control(urdf, "r.urdf")
    assert info.systems == ("sys",) and info.plugins == ("mock_components/GenericSystem",)
    j1, j2 = info.joints
    assert j1.command_interfaces == ("position",) and j1.state_interfaces == ("position", "velocity")
    assert j1.initial_values == {"position": 0.25}
    assert j2.mimic == "j1" and j2.multiplier == -1.0
    assert info.sensor("ft").params["frame_id"] == "ft_frame"
    assert parse_ros2_control("<robot name='x'/>", "x.urdf") is None
    with pytest.raises(ConfigError, match="bad.urdf"):
        parse_ros2_control("<robot><ros2_control name='s'><joint name='j'><state_interface name='position'>"
                           "<param name='initial_value'>abc</param></state_interface></joint></ros2_control></robot>",
                           "bad.urdf")
    with pytest.raises(ConfigError, match="listed twice"):
        parse_ros2_control("<robot><ros2_control name='s'><joint name='j'/><joint name='j'/></ros2_control></robot>",
                           "twice.urdf")


def test_shipped_xacro_blocks_expand_to_the_preset_joints():
    from contact_sim_ros.resources import share_dir
    from pathlib import Path
    info = read_ros2_control(Path(share_dir()) / "urdf" / "ros2_control" / "iiwa_wsg.ros2_control.xacro")
    names = [j.name for j in info.joints]
    assert names[:7] == [f"iiwa_joint_{i}" for i in range(1, 8)]
    assert info.joint("wsg_finger_right_joint").mimic == "wsg_finger_left_joint"
    assert info.joint("iiwa_joint_2").initial_values["position"] == pytest.approx(0.5)


def test_unsupported_controller_type_lists_the_supported_ones():
    with pytest.raises(ConfigError) as exc:
        controller_class("admittance_controller/AdmittanceController", "adm", "my.yaml")
    msg = str(exc.value)
    assert "my.yaml" in msg and "'adm'" in msg
    for t in ("joint_trajectory_controller/JointTrajectoryController", "joint_state_broadcaster/JointStateBroadcaster",
              "forward_command_controller/ForwardCommandController",
              "position_controllers/JointGroupPositionController", "velocity_controllers/JointGroupVelocityController",
              "effort_controllers/JointGroupEffortController", "position_controllers/GripperActionController",
              "force_torque_sensor_broadcaster/ForceTorqueSensorBroadcaster"):
        assert t in CONTROLLER_TYPES and t in msg


def test_default_controllers_of_a_bare_urdf_and_of_joint_groups():
    cf, inactive = default_controllers(["a", "b"])
    assert cf.names() == ["joint_state_broadcaster", "joint_trajectory_controller", "forward_position_controller",
                          "forward_velocity_controller", "forward_effort_controller"]
    assert inactive == cf.names()[2:]

    class G:
        def __init__(self, joints, controller):
            self.joints, self.controller = joints, controller
    cf, inactive = default_controllers(["a", "b", "c"], {"hand": G(["a", "b"], "hand_controller"),
                                                         "lift": G(["c"], "lift_controller")})
    assert "hand_controller" in cf.names() and "lift_controller" in cf.names()
    assert "hand_position_controller" in inactive and "lift_effort_controller" in inactive
