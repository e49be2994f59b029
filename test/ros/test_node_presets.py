"""Every robot preset runs as a node: /joint_states names every joint of the preset, /tf and /tf_static cover
every link of its URDF, and a command on the preset's hand/gripper position controller moves the joints.
One node per preset, each built in the test's process (inprocess_sim_node.py) in a namespace of its own, one after
the other (each steps as fast as it can)."""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from tf2_msgs.msg import TFMessage

from inprocess_sim_node import InProcessSimNode
from ros_testing import use_controllers, wait_until

REPO = Path(__file__).resolve().parents[2]
NO_CLOCK = Path(__file__).resolve().parent / "scenes" / "no_clock.yaml"
PRESETS = ["franka", "allegro", "barrett"]   # iiwa_wsg: test_node_interfaces.py


@pytest.fixture(scope="module", params=PRESETS)
def preset(request, ros):
    """(robot, its topics, /tf, /tf_static) of the preset's node, built in this process."""
    robot = request.param
    topics = {"js": ros.subscribe(JointState, f"/{robot}/joint_states"),
              "desc": ros.subscribe(String, f"/{robot}/robot_description", latched=True),
              "tf": ros.subscribe(TFMessage, "/tf"), "tf_static": ros.subscribe(TFMessage, "/tf_static", latched=True)}
    with pytest.MonkeyPatch.context() as mp:
        sim = InProcessSimNode.from_command_line(mp, "--robot", robot, "--engine", "tamsi", "--namespace", robot,
                                                 "--frame-prefix", f"{robot}/", "--real-time-factor", "0", "--config",
                                                 str(NO_CLOCK))
        try:
            wait_until(lambda: topics["js"], 120, what=f"/{robot}/joint_states")
            yield robot, topics
            assert not sim.callback_errors, sim.callback_errors
        finally:
            sim.close()


def test_preset_publishes_every_joint_and_link(preset):
    robot, topics = preset
    desc = wait_until(lambda: topics["desc"], 10, what="robot_description")[-1].data
    root = ET.fromstring(desc)
    links = {f"{robot}/{link.get('name')}" for link in root.iter("link")}
    joints = {j.get("name") for j in root.iter("joint") if j.get("type") in ("revolute", "prismatic", "continuous")}
    assert set(topics["js"][-1].name) == joints
    wait_until(lambda: links <= {t.child_frame_id for m in topics["tf"][-50:] + topics["tf_static"]
                                 for t in m.transforms}, 10, what=f"every {robot} link on /tf or /tf_static")


def test_hand_position_controller_moves_the_joints(preset, ros):
    robot, topics = preset
    preset = yaml.safe_load((REPO / "config" / "robots" / f"{robot}.yaml").read_text())
    group, spec = next((g, s) for g, s in preset["joint_groups"].items() if g in ("gripper", "hand", "index"))
    root = ET.fromstring(topics["desc"][-1].data)
    limits = {j.get("name"): (float(j.find("limit").get("lower")), float(j.find("limit").get("upper")))
              for j in root.iter("joint") if j.find("limit") is not None}
    friction = {j.get("name"): float(j.find("dynamics").get("friction", 0.0))
                for j in root.iter("joint") if j.find("dynamics") is not None}
    # 10 % into the range: clear of finger-finger contact for every hand
    targets = {j: limits[j][0] + 0.1 * (limits[j][1] - limits[j][0]) for j in spec["joints"]}
    # a PD joint with Coulomb friction F stops anywhere within F / kp of its target (stiction)
    tol = {j: 1e-3 + friction.get(j, 0.0) / float(preset["gains"][j]["kp"]) for j in spec["joints"]}
    # the robot's forward position group controller (config/ros2_control/<robot>_controllers.yaml), switched in
    # for its trajectory controller; joints of the group outside ``spec`` hold their current position
    controllers = yaml.safe_load((REPO / "config" / "ros2_control" / f"{robot}_controllers.yaml").read_text())
    name = next(n for n, v in controllers["controller_manager"]["ros__parameters"].items()
                if isinstance(v, dict) and v.get("type") == "position_controllers/JointGroupPositionController"
                and set(spec["joints"]) <= set(controllers[n]["ros__parameters"]["joints"]))
    use_controllers(ros, [name], namespace=f"/{robot}")
    now = dict(zip(topics["js"][-1].name, topics["js"][-1].position))
    group_joints = controllers[name]["ros__parameters"]["joints"]
    ros.publish(Float64MultiArray, f"/{robot}/{name}/commands",
                Float64MultiArray(data=[targets.get(j, now[j]) for j in group_joints]))

    def reached():
        p = dict(zip(topics["js"][-1].name, topics["js"][-1].position))
        return all(abs(p[j] - v) < tol[j] for j, v in targets.items())
    wait_until(reached, 60, what=f"{robot} {group} joints at {targets}")
