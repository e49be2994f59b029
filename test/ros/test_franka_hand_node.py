"""The franka_gripper node of a user's FR3 over DDS, recorded (issue 41, items 4 and 6): the simulation node built in
this process (inprocess_sim_node.py) with franka_description's FR3 xacro (``ros2_control:=true``, from the vendors'
folder) and franka_ros2's own controllers file, recording to a bag (``record``). A client sends a GripperCommand
goal to ``/franka_gripper/gripper_action`` and a franka_msgs Move goal to ``/franka_gripper/move``: the fingers move
to the widths; the bag holds both goals and both results on ``<action>/goal`` and ``<action>/result``, and the
recorder's closing log line counts the topics the bag holds. The rules are test/test_franka_hand.py's (sim time)."""

from __future__ import annotations

import re

from control_msgs.action import GripperCommand
from franka_msgs.action import Move
from sensor_msgs.msg import JointState

from inprocess_sim_node import InProcessSimNode
from ros_testing import ActionClient, wait_until
from vendor_files import vendor_package_path, vendor_path

STATUS_SUCCEEDED = 4


def _result(client, goal, timeout=60.0):
    """Send ``goal``, wait (on conditions) until it is accepted and has ended; returns the GetResult response."""
    assert client.wait_for_server(timeout_sec=30.0)
    sent = client.send_goal_async(goal)
    wait_until(sent.done, timeout, what="the goal's acceptance")
    handle = sent.result()
    assert handle.accepted
    result = handle.get_result_async()
    wait_until(result.done, timeout, what="the goal's result")
    return result.result()


def test_fr3_franka_gripper_goals_move_the_fingers_and_are_recorded(monkeypatch, tmp_path, capfd):
    vendor_package_path(monkeypatch)
    xacro = vendor_path("robot_descriptions", "franka_description", "robots", "fr3", "fr3.urdf.xacro")
    bag = tmp_path / "bag"
    sim = InProcessSimNode(monkeypatch, urdf=f"{xacro} ros2_control:=true", real_time_factor=0.0,
                           controllers_file=str(vendor_path("ros2_control_files",
                                                            "fr3_ros_controllers.franka_ros2.yaml")),
                           record=str(bag))
    try:
        node = sim.node
        finger = node.model.joint_q_index[node.model.joint_index("fr3_finger_joint1")]
        # the description's start: closed (the node already steps: the closed fingers press on each other, ~30 um)
        assert node.sim.q[finger] < 1e-3
        states = []
        sim.client.create_subscription(JointState, "/franka_gripper/joint_states", states.append, 10)

        command = ActionClient(sim.client, GripperCommand, "/franka_gripper/gripper_action")
        goal = GripperCommand.Goal()
        goal.command.position = 0.035                       # half the width (m): open to 70 mm
        answer = _result(command, goal)
        assert answer.status == STATUS_SUCCEEDED and answer.result.reached_goal
        assert abs(answer.result.position - 0.07) < 0.004       # the width at success (m)
        wait_until(lambda: abs(node.sim.q[finger] - 0.035) < 5e-4, 30, what="the fingers at 70 mm")

        move = ActionClient(sim.client, Move, "/franka_gripper/move")
        answer = _result(move, Move.Goal(width=0.02, speed=0.1))
        assert answer.status == STATUS_SUCCEEDED and answer.result.success, answer.result.error
        wait_until(lambda: abs(node.sim.q[finger] - 0.01) < 5e-4, 30, what="the fingers at 20 mm")
        wait_until(lambda: states and list(states[-1].name) == ["fr3_finger_joint1", "fr3_finger_joint2"]
                   and abs(states[-1].position[0] - 0.01) < 5e-4, 30, what="franka_gripper/joint_states")
    finally:
        sim.close()

    output = capfd.readouterr()                 # the node's log (rcutils: stderr, or stdout if so configured)
    logged = re.findall(r"recording: (\d+) messages on (\d+) topics written to (\S+)", output.err + output.out)
    assert logged, "the recorder's closing log line"
    messages, topics, path = int(logged[-1][0]), int(logged[-1][1]), logged[-1][2]
    assert path == str(bag)
    from rosbags.highlevel import AnyReader
    recorded = {}
    with AnyReader([bag]) as reader:
        bag_topics = {c.topic for c in reader.connections}
        for conn, _, raw in reader.messages():
            if conn.topic.startswith("/franka_gripper/") and not conn.topic.endswith("joint_states"):
                recorded.setdefault(conn.topic, []).append(reader.deserialize(raw, conn.msgtype))
        total = sum(c.msgcount for c in reader.connections)
    assert topics == len(bag_topics) and messages == total, (topics, sorted(bag_topics))
    assert "/franka_gripper/joint_states" in bag_topics
    [g] = recorded["/franka_gripper/gripper_action/goal"]
    [r] = recorded["/franka_gripper/gripper_action/result"]
    assert g.command.position == 0.035 and r.reached_goal and abs(r.position - 0.07) < 0.004
    [g] = recorded["/franka_gripper/move/goal"]
    [r] = recorded["/franka_gripper/move/result"]
    assert (g.width, g.speed) == (0.02, 0.1) and r.success


def test_a_bare_fr3_description_leaves_its_finger_to_franka_gripper(monkeypatch):
    """The FR3 xacro without its <ros2_control> block (every joint gets a drive) and without a controllers file:
    the default controller set drives the arm only (as franka_ros2's controllers do), the finger is franka_gripper's
    (its device claims the finger's position interface; a default trajectory controller over it would have
    conflicted), and its joint states come from the joint_state_broadcaster with the arm's."""
    vendor_package_path(monkeypatch)
    xacro = vendor_path("robot_descriptions", "franka_description", "robots", "fr3", "fr3.urdf.xacro")
    sim = InProcessSimNode(monkeypatch, urdf=str(xacro), real_time_factor=0.0, start_paused=True)
    try:
        node = sim.node
        cm = node.controller_manager
        arm = [f"fr3_joint{i}" for i in range(1, 8)]
        assert list(cm.controllers["joint_trajectory_controller"].joints) == arm
        assert all(list(c.joints) == arm for n, c in cm.controllers.items() if n.startswith("forward_"))
        assert cm.ctx.command.claims["fr3_finger_joint1/position"] == "franka_gripper"
        gripper = node.ports[0].franka.gripper_node
        assert gripper.get_fully_qualified_name() == "/franka_gripper" and "franka_gripper" not in cm.controllers
        assert list(cm.controllers["joint_state_broadcaster"].joint_names) == arm + ["fr3_finger_joint1",
                                                                                    "fr3_finger_joint2"]
    finally:
        sim.close()
