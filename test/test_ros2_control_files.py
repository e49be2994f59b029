"""The shipped ros2_control files: <ros2_control> xacros, controllers YAMLs, the topic_based launch file.

Plain pytest, no DDS: xacro (the PyPI package) expands the files, xml.etree and pinocchio read the results.
For each preset: the <ros2_control> joints are the URDF's actuated non-mimic joints with the preset's initial
positions; the wrapper robot_with_ros2_control.urdf.xacro gives a URDF that pinocchio loads; the controllers
YAML names only existing joints and sensors, with the controller names the scenarios and docs use.
"""

from __future__ import annotations

import ast
import xml.etree.ElementTree as ET
from pathlib import Path

import pinocchio
import pytest
import xacro
import yaml

ROOT = Path(__file__).resolve().parent.parent
R2C = ROOT / "urdf" / "ros2_control"
CONFIG = ROOT / "config" / "ros2_control"
WRAPPER = R2C / "robot_with_ros2_control.urdf.xacro"
LAUNCH = ROOT / "launch" / "topic_based_control.launch.py"
ROBOTS = ("iiwa_wsg", "franka", "allegro", "barrett")
TOPIC_BASED = "topic_based_ros2_control/TopicBasedSystem"
FT_AXES = ["force.x", "force.y", "force.z", "torque.x", "torque.y", "torque.z"]

FORWARD_TYPES = {"position": "position_controllers/JointGroupPositionController",
                 "velocity": "velocity_controllers/JointGroupVelocityController",
                 "effort": "effort_controllers/JointGroupEffortController"}
JTC = "joint_trajectory_controller/JointTrajectoryController"
JSB = "joint_state_broadcaster/JointStateBroadcaster"
GRIPPER_ACTION = "position_controllers/GripperActionController"
FTS = "force_torque_sensor_broadcaster/ForceTorqueSensorBroadcaster"


def _preset(robot):
    return yaml.safe_load((ROOT / "config" / "robots" / f"{robot}.yaml").read_text())


def _urdf(robot):
    return ET.parse(ROOT / "urdf" / f"{robot}.urdf").getroot()


def _actuated_joints(urdf_root):
    """Non-fixed joints without <mimic>, in URDF order."""
    return [j.get("name") for j in urdf_root.findall("joint")
            if j.get("type") not in ("fixed", "floating", "planar") and j.find("mimic") is None]


def _expand(path, **mappings):
    return ET.fromstring(xacro.process_file(str(path), mappings={k: str(v) for k, v in mappings.items()}).toxml())


def _block(doc):
    blocks = doc.findall("ros2_control")
    assert len(blocks) == 1, f"expected exactly one <ros2_control>, got {len(blocks)}"
    return blocks[0]


def _params(element):
    return {p.get("name"): (p.text or "").strip() for p in element.findall("param")}


def _controllers(robot):
    return yaml.safe_load((CONFIG / f"{robot}_controllers.yaml").read_text())


# --------------------------------------------------------------------------------- <ros2_control> xacros

@pytest.mark.parametrize("robot", ROBOTS)
@pytest.mark.parametrize("plugin", [None, TOPIC_BASED])
def test_ros2_control_xacro_joints_interfaces_and_initial_values(robot, plugin):
    mappings = {} if plugin is None else {"plugin": plugin}
    doc = _expand(R2C / f"{robot}.ros2_control.xacro", **mappings)
    assert doc.tag == "robot" and doc.get("name") == f"{robot}_ros2_control"
    block = _block(doc)
    assert block.get("type") == "system" and block.get("name")
    hw = block.find("hardware")
    assert hw.findtext("plugin").strip() == (plugin or "contact_sim_ros/ContactSimSystem")
    assert _params(hw) == {"joint_commands_topic": "/joint_command",
                           "joint_states_topic": "/contact_sim/joint_states",
                           "sum_wrapped_joint_states": "false"}

    urdf_joints = _actuated_joints(_urdf(robot))
    joints = block.findall("joint")
    assert [j.get("name") for j in joints] == urdf_joints
    initial = _preset(robot).get("initial_positions") or {}
    for j in joints:
        name = j.get("name")
        assert [c.get("name") for c in j.findall("command_interface")] == ["position", "velocity", "effort"], name
        states = j.findall("state_interface")
        assert [s.get("name") for s in states] == ["position", "velocity", "effort"], name
        assert float(_params(states[0])["initial_value"]) == pytest.approx(initial.get(name, 0.0)), name
        assert not _params(states[1]) and not _params(states[2])
        expected = ({"mimic": "wsg_finger_left_joint", "multiplier": "1.0"}
                    if name == "wsg_finger_right_joint" else {})
        assert _params(j) == expected, name

    ft = _preset(robot).get("ft_sensor")
    sensors = block.findall("sensor")
    if ft:
        assert [s.get("name") for s in sensors] == [ft["frame"]]
        assert [i.get("name") for i in sensors[0].findall("state_interface")] == FT_AXES
        assert _params(sensors[0]) == {"frame_id": ft["frame"]}
    else:
        assert sensors == []


def test_ros2_control_xacro_arguments():
    doc = _expand(R2C / "iiwa_wsg.ros2_control.xacro", prefix="left/", command_interfaces="position",
                  sensors="false", joint_commands_topic="/a", joint_states_topic="/b")
    block = _block(doc)
    assert _params(block.find("hardware"))["joint_commands_topic"] == "/a"
    assert _params(block.find("hardware"))["joint_states_topic"] == "/b"
    names = [j.get("name") for j in block.findall("joint")]
    assert names[0] == "left/iiwa_joint_1" and names[-1] == "left/wsg_finger_right_joint"
    assert _params(block.findall("joint")[-1])["mimic"] == "left/wsg_finger_left_joint"
    assert all([c.get("name") for c in j.findall("command_interface")] == ["position"]
               for j in block.findall("joint"))
    assert block.findall("sensor") == []
    # standalone:=false only defines the macro
    assert _expand(R2C / "iiwa_wsg.ros2_control.xacro", standalone="false").findall("ros2_control") == []


# ------------------------------------------------------------------------------------------------ wrapper

@pytest.mark.parametrize("robot", ROBOTS)
def test_wrapper_is_the_urdf_plus_its_ros2_control_block(robot):
    xml = xacro.process_file(str(WRAPPER), mappings={"robot": robot, "plugin": TOPIC_BASED}).toxml()
    doc = ET.fromstring(xml)
    urdf = _urdf(robot)
    assert doc.get("name") == urdf.get("name")
    assert [link.get("name") for link in doc.findall("link")] == [link.get("name") for link in urdf.findall("link")]
    assert [j.get("name") for j in doc.findall("joint")] == [j.get("name") for j in urdf.findall("joint")]
    block = _block(doc)
    assert block.find("hardware").findtext("plugin").strip() == TOPIC_BASED
    assert [j.get("name") for j in block.findall("joint")] == _actuated_joints(urdf)

    model = pinocchio.buildModelFromXML(xml)
    reference = pinocchio.buildModelFromXML((ROOT / "urdf" / f"{robot}.urdf").read_text())
    assert list(model.names) == list(reference.names)
    assert model.nq == reference.nq
    for j in _actuated_joints(urdf):
        assert model.existJointName(j), j


def test_wrapper_as_the_launch_file_builds_it():
    """The launch file's mappings: TopicBasedSystem, position only, no sensors (default robot: iiwa_wsg)."""
    doc = ET.fromstring(xacro.process_file(str(WRAPPER), mappings={
        "plugin": TOPIC_BASED, "command_interfaces": "position", "sensors": "false"}).toxml())
    assert doc.get("name") == "iiwa_wsg"
    block = _block(doc)
    assert block.findall("sensor") == []
    assert {c.get("name") for c in block.iter("command_interface")} == {"position"}


# ----------------------------------------------------------------------------------------- controllers YAML

@pytest.mark.parametrize("robot", ROBOTS)
def test_controllers_yaml_types_and_joints(robot):
    data = _controllers(robot)
    manager = data["controller_manager"]["ros__parameters"]
    assert manager["update_rate"] == 1000
    controllers = {k: v for k, v in manager.items() if isinstance(v, dict)}
    assert controllers, "no controllers under controller_manager"
    urdf_joints = {j.get("name") for j in _urdf(robot).findall("joint")}
    ros2_control = _block(_expand(R2C / f"{robot}.ros2_control.xacro"))
    sensors = {s.get("name") for s in ros2_control.findall("sensor")}
    for name, spec in controllers.items():
        assert isinstance(spec.get("type"), str) and "/" in spec["type"], name
        params = (data.get(name) or {}).get("ros__parameters", {})
        named = list(params.get("joints", [])) + ([params["joint"]] if "joint" in params else [])
        for joint in named:
            assert joint in urdf_joints, f"{robot}: {name} names unknown joint {joint!r}"
        if spec["type"] != JSB:
            assert named or spec["type"] == FTS, f"{robot}: {name} names no joints"
        if spec["type"] == FTS:
            assert params["sensor_name"] in sensors
            assert params["frame_id"] in {e.get("name") for e in _urdf(robot).iter("link")}
        if spec["type"] == JTC:
            tolerances = params.get("constraints", {})
            assert set(tolerances) - {"stopped_velocity_tolerance", "goal_time", "decelerate_on_cancel"} \
                <= set(params["joints"]), name
    # every section but the manager's belongs to a declared controller
    assert set(data) - {"controller_manager"} <= set(controllers)


EXPECTED = {
    "iiwa_wsg": ("arm", ["iiwa_joint_%d" % i for i in range(1, 8)], "gripper",
                 ["wsg_finger_left_joint", "wsg_finger_right_joint"]),
    "franka": ("arm", ["panda_joint%d" % i for i in range(1, 8)], "gripper", ["panda_finger_joint1"]),
}


@pytest.mark.parametrize("robot", ["iiwa_wsg", "franka"])
def test_arm_and_gripper_controllers(robot):
    data = _controllers(robot)
    types = {k: v["type"] for k, v in data["controller_manager"]["ros__parameters"].items() if isinstance(v, dict)}
    arm, arm_joints, gripper, gripper_joints = EXPECTED[robot]
    expected = {"joint_state_broadcaster": JSB, "arm_controller": JTC, "gripper_controller": JTC,
                "gripper_action_controller": GRIPPER_ACTION, "ft_sensor": FTS}
    for kind, ctype in FORWARD_TYPES.items():
        expected[f"arm_{kind}_controller"] = ctype
        expected[f"gripper_{kind}_controller"] = ctype
    assert types == expected

    p = {name: data[name]["ros__parameters"] for name in expected if name in data}
    assert p["arm_controller"]["joints"] == arm_joints
    assert p["arm_controller"]["command_interfaces"] == ["position"]
    assert p["arm_controller"]["state_interfaces"] == ["position", "velocity"]
    assert p["arm_controller"]["allow_partial_joints_goal"] is False
    c = p["arm_controller"]["constraints"]
    assert c["stopped_velocity_tolerance"] == 0.05 and c["goal_time"] == 0.5
    assert all(c[j] == {"trajectory": 0.2, "goal": 0.02} for j in arm_joints)
    assert p["gripper_controller"]["joints"] == gripper_joints
    assert all(p["gripper_controller"]["constraints"][j]["goal"] == 0.005 for j in gripper_joints)
    g = p["gripper_action_controller"]
    assert g["joint"] == gripper_joints[0]
    assert g["goal_tolerance"] == 0.002 and g["allow_stalling"] is True and g["stall_timeout"] == 0.5
    assert g["max_effort"] == {"iiwa_wsg": 80.0, "franka": 70.0}[robot]
    assert p["ft_sensor"]["sensor_name"] == p["ft_sensor"]["frame_id"] == _preset(robot)["ft_sensor"]["frame"]
    for kind in FORWARD_TYPES:
        assert p[f"{arm}_{kind}_controller"]["joints"] == arm_joints
        assert p[f"{gripper}_{kind}_controller"]["joints"] == gripper_joints


@pytest.mark.parametrize("robot", ["allegro", "barrett"])
def test_hand_controllers(robot):
    data = _controllers(robot)
    types = {k: v["type"] for k, v in data["controller_manager"]["ros__parameters"].items() if isinstance(v, dict)}
    assert types == {"joint_state_broadcaster": JSB, "hand_controller": JTC,
                     **{f"hand_{kind}_controller": t for kind, t in FORWARD_TYPES.items()}}
    preset_joints = [j for g in _preset(robot)["joint_groups"].values() for j in g["joints"]]
    assert data["hand_controller"]["ros__parameters"]["joints"] == preset_joints
    assert preset_joints == _actuated_joints(_urdf(robot))
    for kind in FORWARD_TYPES:
        assert data[f"hand_{kind}_controller"]["ros__parameters"]["joints"] == preset_joints


# ------------------------------------------------------------------------------------------------ launch file

def test_topic_based_launch_file_compiles_and_starts_the_stack():
    source = LAUNCH.read_text()
    compile(source, str(LAUNCH), "exec")
    tree = ast.parse(source)
    assert ast.get_docstring(tree).startswith("ros2 launch contact_sim_ros topic_based_control.launch.py")
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    for needed in ("ros2_control_node", "spawner", "sim_node", "robot_state_publisher", "controller_manager",
                   "--inactive", TOPIC_BASED, "robot_with_ros2_control.urdf.xacro", "none"):
        assert needed in strings, needed
    functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert "generate_launch_description" in functions


def test_launch_defaults_name_existing_controllers():
    """DEFAULT_ACTIVE of the launch file (a literal) names controllers of each robot's YAML."""
    tree = ast.parse(LAUNCH.read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "DEFAULT_ACTIVE" for t in n.targets))
    defaults = ast.literal_eval(node.value)
    assert set(defaults) == set(ROBOTS)
    for robot, names in defaults.items():
        declared = _controllers(robot)["controller_manager"]["ros__parameters"]
        assert set(names) <= set(declared), robot
