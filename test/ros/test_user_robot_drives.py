"""Start-up messages about the joints' drives that are true for a user's robot (issue 41, item 5), the node built in
this process (inprocess_sim_node.py): the FR3 from franka_description with franka_ros2's own controllers file (an
effort joint_trajectory_controller whose PID gains the file gives) gets no "no PD gains" warning for the arm joints
that those gains drive, and an info line that names them; the LBR iiwa 7 with the LBR stack's file (a position
controller: the simulated drive's default servo does the tracking; what its mock.launch.py spawns) still gets the
warning, with its gains."""

from __future__ import annotations

import math
import os

import yaml
from vendor_files import vendor_package_path, vendor_path

from inprocess_sim_node import InProcessSimNode

FR3_JOINTS = [f"fr3_joint{i}" for i in range(1, 8)]
FR3_READY = [0.0, -math.pi / 4, 0.0, -3 * math.pi / 4, 0.0, math.pi / 2, math.pi / 4]


def _warnings(err: str) -> list:
    return [line for line in err.splitlines() if "no PD gains given" in line]


def test_franka_ros2s_effort_file_gains_are_not_reported_missing(monkeypatch, capfd):
    root = vendor_package_path(monkeypatch)
    sim = InProcessSimNode(monkeypatch, urdf=str(root / "franka_description" / "robots" / "fr3" / "fr3.urdf.xacro"),
                           controllers_file=str(vendor_path("ros2_control_files",
                                                            "fr3_ros_controllers.franka_ros2.yaml")),
                           initial_positions=yaml.safe_dump(dict(zip(FR3_JOINTS, FR3_READY)), default_flow_style=True),
                           real_time_factor=0.0, start_paused=True)
    try:
        node = sim.node
        arm = node.controller_manager.controllers["fr3_arm_controller"]
        assert arm.active and arm.closed_loop == "effort" and arm.gains["p"][-1] == 50.0
        assert set(FR3_JOINTS) <= set(node.sim.default_gains)     # the URDF gives none: the drive's servo has defaults
    finally:
        sim.close()
    err = capfd.readouterr().err
    for line in _warnings(err):
        assert not any(f"{j} kp=" in line for j in FR3_JOINTS), line
    [info] = [line for line in err.splitlines() if "PID gains from the controllers file drive" in line]
    assert "fr3_arm_controller: " + ", ".join(FR3_JOINTS) in info, info


def test_the_lbr_stacks_position_file_still_gets_the_default_gains_warning(monkeypatch, tmp_path, capfd):
    root = vendor_package_path(monkeypatch)
    config = tmp_path / "ws" / "lbr_ros2_control" / "config"        # $(find lbr_ros2_control) in its xacro
    config.mkdir(parents=True)
    lbr_file = vendor_path("ros2_control_files", "lbr_controllers.lbr_fri_ros2_stack.yaml")
    (config / "lbr_controllers.yaml").symlink_to(lbr_file)
    monkeypatch.setenv("ROS_PACKAGE_PATH", os.pathsep.join([os.environ["ROS_PACKAGE_PATH"], str(tmp_path / "ws")]))
    sim = InProcessSimNode(monkeypatch, urdf=str(root / "lbr_description" / "urdf" / "iiwa7" / "iiwa7.xacro"),
                           controllers_file=str(lbr_file), real_time_factor=0.0, start_paused=True,
                           active_controllers=["joint_state_broadcaster", "joint_trajectory_controller"])
    try:
        assert sim.node.controller_manager.controllers["joint_trajectory_controller"].commands == ["position"]
    finally:
        sim.close()
    err = capfd.readouterr().err
    [warning] = _warnings(err)
    assert "lbr_A7 kp=1874" in warning and "30 Hz" in warning, warning
    assert "PID gains from the controllers file" not in err
