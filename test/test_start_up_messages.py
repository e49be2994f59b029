"""Start-up messages that are true for a user's robot (issue 41, item 5), without DDS: a controllers file that
still holds a launch substitution (the UR driver's ur_controllers.yaml as it ships, ``$(var tf_prefix)``) is refused
with a message that names the substitution and what to do; a start pose that the first step would refuse (a bare
URDF's zero pose in the ground) is named with the link, the depth and how to give a start pose, and the node
parameter ``initial_positions`` gives one (``~/reset`` returns to it)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from contact_sim_ros.driver.config import read_controllers_file
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.model.robot_description import default_package_dirs
from contact_sim_ros.driver.node_config import NodeConfig
from contact_sim_ros.sim.default_gains import DefaultGainsWarning
from contact_sim_ros.sim.simulator import Simulator
from vendor_files import vendor_path


def test_the_ur_drivers_file_as_shipped_names_the_launch_substitution_and_what_to_do(tmp_path):
    """Universal_Robots_ROS2_Driver's ur_controllers.yaml as it ships holds ``$(var tf_prefix)`` (in its joints,
    frame ids and sensor name), which ur_control.launch.py substitutes: the error names the file, the substitution
    and the two ways out; the first of them (the text with the prefix replaced, '' here) is then read as the
    driver's substituted file is."""
    shipped = vendor_path("ros2_control_files", "ur_controllers.jazzy.verbatim.yaml")
    with pytest.raises(ConfigError) as err:
        read_controllers_file(shipped)
    text = str(err.value)
    assert str(shipped) in text and "'$(var tf_prefix)'" in text and "\n" not in text
    assert "launch" in text and "allow_substs=True" in text and "sed 's/\\$(var tf_prefix)//g'" in text
    fixed = tmp_path / "my_controllers.yaml"
    fixed.write_text(shipped.read_text().replace("$(var tf_prefix)", ""))
    substituted = read_controllers_file(vendor_path("ros2_control_files", "ur_controllers.ur_driver.yaml"))
    mine = read_controllers_file(fixed)
    assert mine.names() == substituted.names()
    assert mine.controller("scaled_joint_trajectory_controller").params["joints"][0] == "shoulder_pan_joint"


def test_other_substitutions_are_named_too(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("controller_manager:\n  ros__parameters:\n    update_rate: 100\n"
                    "    arm: {type: joint_trajectory_controller/JointTrajectoryController}\n"
                    "arm:\n  ros__parameters:\n    joints: [j1]\n"
                    "    params_note: $(find-pkg-share my_robot)/config/limits.yaml\n")
    with pytest.raises(ConfigError, match=r"'\$\(find-pkg-share my_robot\)' in 1 value\(s\), e.g. arm.params_note"):
        read_controllers_file(path)


# ------------------------------------------------------------------------------------------ the start pose

def ur5_urdf() -> str:
    """example-robot-data's UR5, its bare URDF (no <ros2_control> block: every joint starts at 0); a requirement
    of the venv (requirements.txt), found where the model loader finds packages."""
    found = [Path(d) / "example-robot-data" / "robots" / "ur_description" / "urdf" / "ur5_robot.urdf"
             for d in default_package_dirs()]
    found = [p for p in found if p.is_file()]
    assert found, "example-robot-data's ur5_robot.urdf"
    return str(found[0])


def _simulator(cfg):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DefaultGainsWarning)
        return Simulator(cfg.load_scene(), **cfg.simulator_options())


def test_a_start_pose_in_the_ground_is_named_with_how_to_give_one():
    """The UR5's zero pose puts its wrist 4.85 cm into the ground (deeper than the 3.45 cm wrist is thick): the
    first step fails with deep interpenetration. start_pose_error says so before: the link, the depth, the joints
    that place it and the ways to give a start pose."""
    cfg = NodeConfig.from_mapping({"urdf": ur5_urdf()})
    sim = _simulator(cfg)
    text = cfg.start_pose_error(sim)
    assert re.search(r"'wrist_3_link' and 'ground' overlap by 4\.8\d cm at the start pose", text), text
    assert "initial_positions" in text and "initial_value" in text and "base_pose" in text and "\n" not in text
    assert "shoulder_lift_joint" in text
    report = sim.step()                     # what the node would have run into at t = 0
    assert not report.ok and "deep interpenetration: 'wrist_3_link_0' and 'ground' overlap by 4.85 cm" in \
        report.message
    assert NodeConfig.from_mapping({"robot": "iiwa_wsg"}).start_pose_error(
        _simulator(NodeConfig.from_mapping({"robot": "iiwa_wsg"}))) == ""


def test_the_initial_positions_parameter_gives_a_bare_urdf_its_start_and_reset_returns_there():
    """initial_positions (the node parameter, a YAML mapping): the UR5 arm up clears the ground, the simulation
    steps, and a reset returns to that pose; bad values name the parameter."""
    start = {"shoulder_lift_joint": -1.57, "wrist_1_joint": -1.57}
    cfg = NodeConfig.from_mapping({"urdf": ur5_urdf(), "initial_positions": str(start)})
    sim = _simulator(cfg)
    cfg.apply_initial_positions(sim)
    assert cfg.start_pose_error(sim) == ""
    names = list(sim.model.joint_names)
    idx = [sim.model.joint_q_index[sim.model.joint_index(j)] for j in start]
    np.testing.assert_array_equal(sim.q[idx], list(start.values()))
    for _ in range(200):
        assert sim.step().ok
    sim.set_state(np.zeros_like(sim.q), np.zeros_like(sim.v))
    sim.reset()
    np.testing.assert_array_equal(sim.q[idx], list(start.values()))
    with pytest.raises(ConfigError, match=r"parameter 'initial_positions': joint\(s\) \['elbow'\] are not"):
        NodeConfig.from_mapping({"urdf": ur5_urdf(), "initial_positions": "{elbow: 1.0}"}).apply_initial_positions(sim)
    with pytest.raises(ConfigError, match="parameter 'initial_positions': .*outside its limits"):
        cfg = NodeConfig.from_mapping({"urdf": ur5_urdf(), "initial_positions": "{elbow_joint: 9.0}"})
        cfg.apply_initial_positions(sim)
    for bad in ("[1, 2]", "{elbow_joint: up}", "{elbow_joint: .nan}"):
        with pytest.raises(ConfigError, match="parameter 'initial_positions': expected a mapping"):
            NodeConfig.from_mapping({"initial_positions": bad})
    assert names == list(sim.model.joint_names)
