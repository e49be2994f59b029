"""Node parameters, the console command's plain flags and the node's Fast DDS writer profile (its XML parsed by the
middleware in a child process; no DDS traffic)."""

import os
import subprocess
import sys

import pytest

from contact_sim_ros.errors import ConfigError
from contact_sim_ros.driver.node_config import (DEFAULT_ROBOT, FASTDDS_PROFILES_VARIABLE, NodeConfig,
                                            plain_args_to_ros_args, read_param_files, share_path,
                                            use_fastdds_writer_profile)


def test_plain_flags_map_onto_ros_arguments():
    cmd = plain_args_to_ros_args(["--robot", "franka", "--engine", "lagged", "--time-step", "0.002",
                                  "--real-time-factor", "0", "--namespace", "left", "--frame-prefix",
                                  "l_", "--config", "p.yaml", "--paused", "--base-pose", "1,0,0,0,0,1.57"])
    args = cmd.ros_args
    assert cmd.robot == "franka" and cmd.config_files == ["p.yaml"] and cmd.namespace == "left"
    assert args[0] == "--ros-args"
    pairs = [args[i + 1] for i, a in enumerate(args) if a == "-p"]
    assert "robot:='franka'" in pairs and "engine:=lagged" in pairs and "time_step:=0.002" in pairs
    assert "real_time_factor:=0" in pairs and "frame_prefix:='l_'" in pairs and "start_paused:=true" in pairs
    assert "base_pose:=[1.0,0.0,0.0,0.0,0.0,1.57]" in pairs   # all doubles: rcl rejects mixed arrays
    assert args[args.index("-r") + 1] == "__ns:=/left"


def test_ros_arguments_pass_through():
    cmd = plain_args_to_ros_args(["--ros-args", "-p", "robot:=allegro", "-r", "__ns:=/x"])
    assert cmd.ros_args == ["--ros-args", "-p", "robot:=allegro", "-r", "__ns:=/x"]
    assert cmd.robot == "allegro" and cmd.namespace == "/x"


def test_parameter_files_merge_in_order_and_reject_unknown_names(tmp_path):
    a, b, bad = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "bad.yaml"
    a.write_text("/**:\n  ros__parameters:\n    engine: lagged\n    tf_rate: 50.0\n")
    b.write_text("contact_sim:\n  ros__parameters:\n    tf_rate: 20.0\nother_node:\n  ros__parameters:\n"
                 "    engine: sap\n")
    bad.write_text("/**:\n  ros__parameters:\n    tf_hz: 3\n")
    assert read_param_files([a, b]) == {"engine": "lagged", "tf_rate": 20.0}
    with pytest.raises(ConfigError, match="unknown parameter 'tf_hz'; valid parameters: .*tf_rate"):
        read_param_files([bad])
    with pytest.raises(ConfigError, match="parameter file not found"):
        read_param_files([tmp_path / "none.yaml"])
    broken, listed = tmp_path / "broken.yaml", tmp_path / "list.yaml"
    broken.write_text("/**:\n  ros__parameters: {engine: [tamsi\n")
    listed.write_text("- engine: tamsi\n")
    with pytest.raises(ConfigError, match=r"broken.yaml: malformed YAML"):
        read_param_files([broken])
    with pytest.raises(ConfigError, match=r"list.yaml: a ROS parameter file .* is a mapping, got list"):
        read_param_files([listed])


def test_unknown_flag_lists_the_valid_flags(capsys):
    with pytest.raises(ConfigError, match="valid flags: .*--robot"):
        plain_args_to_ros_args(["--robto", "iiwa_wsg"])


@pytest.mark.parametrize("values, match", [
    ({"engine": "bullet"}, r"unknown engine 'bullet'; valid engines: .*lagged.*tamsi"),
    ({"robot": "ur5"}, r"unknown robot 'ur5'; valid robots: allegro, barrett, franka, iiwa_wsg"),
    ({"time_step": -1.0}, r"'time_step': must be in \(0, 0.1\] s"),
    ({"time_step": "fast"}, r"'time_step': expected float"),
    ({"real_time_factor": -2}, r"'real_time_factor': must be >= 0"),
    ({"tf_rate": float("nan")}, r"'tf_rate': must be a rate >= 0 Hz"),
    ({"base_pose": [0, 0, 0]}, r"'base_pose': expected \[x, y, z, roll, pitch, yaw\]"),
    ({"engine_options": "[1, 2]"}, r"'engine_options': expected a mapping"),
    ({"urdf": "/no/such.urdf"}, r"'urdf': file not found"),
    ({"step_count": 0}, r"'step_count': must be in \[1, 1000000000\]"),
    ({"step_count": 10 ** 12}, r"'step_count': must be in \[1, 1000000000\]"),    # bounded (issue 31, defect 3)
    ({"rate": 3}, r"unknown parameter 'rate'; valid parameters: .*joint_states_rate"),
])
def test_bad_parameters_name_the_valid_values(values, match):
    with pytest.raises(ConfigError, match=match):
        NodeConfig.from_mapping(values)


def test_decimation_and_default_scene():
    cfg = NodeConfig.from_mapping({"time_step": 0.001, "joint_states_rate": 500.0, "tf_rate": 30.0,
                                   "markers_rate": 0.0, "clock_rate": 5000.0})
    assert cfg.decimation(cfg.joint_states_rate) == 2
    assert cfg.decimation(cfg.tf_rate) == 33
    assert cfg.decimation(cfg.markers_rate) == 0          # off
    assert cfg.decimation(cfg.clock_rate) == 1            # at most every step
    spec = cfg.scene_spec()
    assert spec["robot"] == DEFAULT_ROBOT and spec["environment"][0]["shape"] == "halfspace"
    moved = NodeConfig.from_mapping({"robot": "franka", "base_pose": [1.0, 2.0, 0.0, 0.0, 0.0, 0.5]}).scene_spec()
    assert moved["robot"]["base_pose"] == {"xyz": [1.0, 2.0, 0.0], "rpy": [0.0, 0.0, 0.5]}
    assert moved["robot"]["urdf"].endswith("franka.urdf")


def test_engine_options_read_exponent_floats_and_name_the_parameter():
    cfg = NodeConfig.from_mapping({"engine_options": "{stiction_tolerance: 1e-4}"})
    opts = cfg.engine_options_dict()
    assert isinstance(opts["stiction_tolerance"], float) and opts["stiction_tolerance"] == 1e-4
    with pytest.raises(ConfigError, match=r"parameter 'engine_options': malformed YAML"):
        NodeConfig.from_mapping({"engine_options": "{stiction_tolerance: [1e-4"})
    with pytest.raises(ConfigError, match=r"parameter 'base_pose': malformed YAML"):
        NodeConfig.from_mapping({"base_pose": "[0, 0"})
    assert NodeConfig.from_mapping({"base_pose": "[1e-3, 0, 0, 0, 0, 0]"}).base_pose[0] == 1e-3


def test_time_step_cap_is_the_simulators():
    from contact_sim_ros.sim.simulator import MAX_TIME_STEP
    assert NodeConfig.from_mapping({"time_step": MAX_TIME_STEP}).time_step == MAX_TIME_STEP
    with pytest.raises(ConfigError, match=rf"'time_step': must be in \(0, {MAX_TIME_STEP:g}\] s"):
        NodeConfig.from_mapping({"time_step": MAX_TIME_STEP * 1.01})


def test_fastdds_writer_profile_only_where_the_user_chose_nothing():
    profile = str(share_path("config", "fastdds_writers.xml"))
    for env in ({}, {"RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}):
        assert use_fastdds_writer_profile(env) == profile and env[FASTDDS_PROFILES_VARIABLE] == profile
    own = {FASTDDS_PROFILES_VARIABLE: "/home/me/fastdds.xml"}
    assert use_fastdds_writer_profile(own) is None and own[FASTDDS_PROFILES_VARIABLE] == "/home/me/fastdds.xml"
    cyclone = {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}
    assert use_fastdds_writer_profile(cyclone) is None and FASTDDS_PROFILES_VARIABLE not in cyclone


@pytest.mark.process
def test_fastdds_writer_profile_is_read_by_the_middleware_without_errors(tmp_path):
    """Fast DDS reports a profile it cannot parse (e.g. the element spelled correctly, "nackSuppressionDuration")
    as an XMLPARSER error and then ignores the profile: the shipped one must load cleanly where a node creates its
    publishers (and a broken copy shows that the check sees such errors)."""
    code = ("import rclpy; from std_msgs.msg import String; rclpy.init(); n = rclpy.create_node('profile_check'); "
            "n.create_publisher(String, 'profile_check', 10); n.destroy_node(); rclpy.shutdown(); print('done')")
    broken = tmp_path / "broken.xml"
    broken.write_text(share_path("config", "fastdds_writers.xml").read_text().replace("nackSupression",
                                                                                     "nackSuppression"))
    env = {}
    use_fastdds_writer_profile(env)
    for profile, clean in ((env[FASTDDS_PROFILES_VARIABLE], True), (str(broken), False)):
        run = subprocess.run([sys.executable, "-c", code], env={**os.environ, FASTDDS_PROFILES_VARIABLE: profile},
                             capture_output=True, text=True, timeout=60)
        out = run.stdout + run.stderr          # Fast DDS's log consumer may print errors on either
        assert run.returncode == 0 and "done" in run.stdout, out
        assert ("XMLPARSER" not in out) == clean, out


def test_every_node_parameter_is_declared_once_with_type_unit_and_description():
    """NodeConfig's fields are the table (driver/parameters.py): each has a description, a ROS type (lists as
    arrays, so that several --params-file merge as on a real node), and the bounds its validation uses."""
    from contact_sim_ros.driver.node_config import NODE_PARAMETERS
    from contact_sim_ros.sim.simulator import MAX_TIME_STEP
    assert NODE_PARAMETERS.names() == NodeConfig.names()
    for p in NODE_PARAMETERS:
        assert p.description, p.name
    kinds = {p.name: p.type for p in NODE_PARAMETERS}
    assert kinds["inactive_controllers"] == kinds["contact_bodies"] == "string_array"
    assert kinds["base_pose"] == "double_array" and kinds["time_step"] == "double"
    time_step = NODE_PARAMETERS.find("time_step")
    assert (time_step.unit, time_step.bounds_text()) == ("s", f"in (0, {MAX_TIME_STEP:g}]")
    assert [p.name for p in NODE_PARAMETERS if not p.read_only] == ["step_count"]
