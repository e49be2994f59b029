"""Start-up messages that are true for a user's robot (issue 41, item 5), without DDS: a controllers file that
still holds a launch substitution (the UR driver's ur_controllers.yaml as it ships, ``$(var tf_prefix)``) is refused
with a message that names the substitution and what to do."""

from __future__ import annotations

import pytest

from contact_sim_ros.driver.config import read_controllers_file
from contact_sim_ros.errors import ConfigError
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
