"""The launch files start what they say: the node started exactly as ``ros2 launch`` starts it (the launch file
itself executed, its parameter files and dictionaries turned into ``--ros-args -r ... --params-file ...`` as
launch_ros does: launch_emulation.py) comes up and publishes joint states, for every robot preset x {tamsi,
lagged} with the README's command (``ros2 launch contact_sim_ros sim.launch.py robot:=R engine:=E``), for
topic_based_control.launch.py's simulation node, and for ``urdf:=`` (a xacro with an argument).

rcl merges the parameter files the launch passes (config/node.yaml, then config/node/<robot>.yaml, then the
launch's own dictionary): a parameter given as "" in one file and as a list in a later one reached the node as
"" (issue 27: 8 of 8 launches exited 2). The inactive controllers of the node's log are checked against
config/node/<robot>.yaml's list. One node start per case, one at a time (they share the topic names).
"""

from __future__ import annotations

import re

import pytest
import yaml
from sensor_msgs.msg import JointState

from launch_emulation import REPO, launch_nodes, ros_arguments
from ros_testing import NodeProcess, wait_until

pytestmark = pytest.mark.process   # its tests start processes (test/conftest.py, test sizes)

LAUNCH = REPO / "launch"
ROBOTS = ("iiwa_wsg", "franka", "allegro", "barrett")
ENGINES = ("tamsi", "lagged")


def _robot_joints(robot: str) -> list[str]:
    from contact_sim_ros.sim.scene import load_scene
    m = load_scene({"robot": robot}).model
    return list(m.joint_names) + [mj.name for mj in m.mimic_joints]


def _sim_node(launch_file: str, **arguments) -> dict:
    nodes = [n for n in launch_nodes(LAUNCH / launch_file, **arguments) if n.get("executable") == "sim_node"]
    assert len(nodes) == 1, nodes
    return nodes[0]


def _start_and_wait(ros, node: dict, folder, topic: str, timeout: float = 120.0):
    """Start the node with launch_ros' arguments; return (first JointState on ``topic``, process)."""
    args = ros_arguments(node, folder)
    msgs = ros.subscribe(JointState, topic)
    proc = NodeProcess(args)
    try:
        wait_until(lambda: msgs or proc.proc.poll() is not None, timeout, what=f"{topic} from {args}")
    except AssertionError:
        proc.stop()
        raise AssertionError(f"no {topic} within {timeout} s; node output:\n{proc.output()}") from None
    if proc.proc.poll() is not None:
        code = proc.stop()
        raise AssertionError(f"the node exited {code} at start-up with {args}:\n{proc.output()}")
    return msgs[0], proc


def _logged_inactive(output: str) -> set:
    found = re.search(r"controllers from .* active \[.*?\], inactive \[(.*?)\]", output)
    assert found, output
    return {n.strip().strip("'") for n in found.group(1).split(",") if n.strip()}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("robot", ROBOTS)
def test_sim_launch_starts_every_robot_and_engine(ros, tmp_path, robot, engine):
    node = _sim_node("sim.launch.py", robot=robot, engine=engine)
    msg, proc = _start_and_wait(ros, node, tmp_path, "/joint_states")
    try:
        assert list(msg.name) == _robot_joints(robot)
        assert msg.header.frame_id == "base_link"           # joint_state_broadcaster's frame_id default
        wanted = yaml.safe_load((REPO / "config" / "node" / f"{robot}.yaml").read_text())
        wanted = set(wanted["/**"]["ros__parameters"]["inactive_controllers"])
        wait_until(lambda: "controllers from" in proc.output(), 10, what="the controllers' log line")
        assert _logged_inactive(proc.output()) == wanted
        assert f"with engine '{engine}'" in proc.output()
    finally:
        assert proc.stop() == 0, proc.output()
    assert "Traceback" not in proc.output(), proc.output()


@pytest.mark.parametrize("robot", ROBOTS)
def test_topic_based_control_launch_starts_the_simulation(ros, tmp_path, robot):
    """topic_based_control.launch.py's simulation node: no emulated controllers, raw joint states on
    /contact_sim/joint_states for topic_based_ros2_control (the rest of that launch needs a ROS 2 install)."""
    node = _sim_node("topic_based_control.launch.py", robot=robot)
    msg, proc = _start_and_wait(ros, node, tmp_path, "/contact_sim/joint_states")
    try:
        assert list(msg.name) == _robot_joints(robot)
        assert "controllers_file none" in proc.output()
    finally:
        assert proc.stop() == 0, proc.output()


def test_sim_launch_urdf_argument_with_xacro_arguments(ros, tmp_path):
    """urdf:="FILE.xacro arg:=value": the robot of that description (no preset, no preset's node file)."""
    xacro = REPO / "test" / "data" / "ur5_with_tool.urdf.xacro"
    node = _sim_node("sim.launch.py", urdf=f"{xacro} tool_mass:=0.5", engine="tamsi")
    assert "robot" not in node["parameters"][-1]
    msg, proc = _start_and_wait(ros, node, tmp_path, "/joint_states")
    try:
        assert "shoulder_pan_joint" in msg.name and not any(n.startswith("iiwa") for n in msg.name)
    finally:
        assert proc.stop() == 0, proc.output()


def test_launch_arguments_are_checked():
    with pytest.raises(ValueError, match="no launch argument"):
        launch_nodes(LAUNCH / "sim.launch.py", robt="franka")
