"""No robot preset's files or lists for a ``urdf:=`` robot (issue 41, item 5a), the node built in this process
(inprocess_sim_node.py): a user's URDF named like a preset (``iiwa_wsg.urdf.xacro``: the robot's name is the file's)
gets neither the preset's shipped controllers file nor its <ros2_control> block; and a urdf given where main()'s
reading of the command line does not see it (a parameter file's wildcard key ``/**/contact_sim``, which rcl applies)
does not bring config/node/iiwa_wsg.yaml's inactive controllers (their 'not in <file>' warning)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from contact_sim_ros.driver.node_config import plain_args_to_ros_args
from contact_sim_ros.ros.sim_node import param_defaults_of
from inprocess_sim_node import InProcessSimNode

UR5_XACRO = Path(__file__).resolve().parents[1] / "data" / "ur5_with_tool.urdf.xacro"
UR5 = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint", "wrist_3_joint"]


def test_a_user_urdf_named_like_a_preset_gets_no_preset_files(monkeypatch, tmp_path):
    urdf = tmp_path / "iiwa_wsg.urdf.xacro"
    shutil.copy(UR5_XACRO, urdf)
    sim = InProcessSimNode(monkeypatch, urdf=str(urdf), real_time_factor=0.0, start_paused=True)
    try:
        node = sim.node
        assert node.robot.name == "iiwa_wsg"                  # the URDF's file name: a preset's
        cm = node.controller_manager
        assert cm.source == "<default controllers>"           # not config/ros2_control/iiwa_wsg_controllers.yaml
        assert list(cm.controllers["joint_trajectory_controller"].joints) == UR5
        assert node.system.command.hardware_info is None      # not urdf/ros2_control/iiwa_wsg.ros2_control.xacro
    finally:
        sim.close()


def test_a_urdf_main_does_not_see_takes_no_presets_node_file(monkeypatch, tmp_path, capfd):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"/**/contact_sim": {"ros__parameters": {
        "urdf": str(UR5_XACRO), "real_time_factor": 0.0, "start_paused": True}}}))
    cmd = plain_args_to_ros_args(["--ros-args", "--params-file", str(params)])
    assert cmd.robot is None                 # main() takes DEFAULT_ROBOT's config/node/iiwa_wsg.yaml ...
    defaults, for_a_urdf = param_defaults_of(cmd)
    assert "gripper_controller" in defaults["inactive_controllers"] and for_a_urdf is not None
    sim = InProcessSimNode(monkeypatch, ros_args=cmd.ros_args, defaults=defaults, defaults_for_a_urdf=for_a_urdf)
    try:
        node = sim.node
        assert node.config.urdf == str(UR5_XACRO)            # ... rcl gives the node the urdf
        assert node.config.inactive_controllers == [] and node.config.marker_force_scale == 0.01
        cm = node.controller_manager
        assert sorted(n for n, c in cm.controllers.items() if not c.active) == [
            "forward_effort_controller", "forward_position_controller", "forward_velocity_controller"]
    finally:
        sim.close()
    output = capfd.readouterr()                 # the node's log (rcutils: stderr, or stdout if so configured)
    log = output.err + output.out
    assert "controllers from <default controllers>" in log                 # the log was captured
    assert "not in" not in log and "inactive_controllers" not in log, log
