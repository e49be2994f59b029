"""The Franka Hand of a user's own description (issue 41, item 4), in sim time without DDS: franka_description's FR3
(its xacro as a user's workspace expands it, from the vendors' folder) has the hand joints fr3_finger_joint1 and its
<mimic> fr3_finger_joint2; with ``ros2_control:=true`` its <ros2_control> block declares the arm joints only (the
real hand is franka_gripper's device, commanded through libfranka), which left the finger passive. The hand gets
its own drive (driver/franka.py ``with_hand_drives``) and its gripper (``hand_gripper``, a device of the controller
manager beside franka_ros2's own controllers file), on which franka_gripper's move / grasp goals move the fingers.
The ROS side (the franka_gripper node served for any such robot) is test/ros/test_franka_hand_node.py."""

from __future__ import annotations

import numpy as np
import pytest

from contact_sim_ros.driver.controller_manager import ControllerManager
from contact_sim_ros.driver.controllers.base import ControllerTransport
from contact_sim_ros.driver.franka import (HAND_GAINS, FrankaGripper, FrankaHand, franka_hands, hand_gripper,
                                           with_hand_drives)
from contact_sim_ros.driver.loop import SteppingLoop
from contact_sim_ros.driver.robot import Robot
from contact_sim_ros.driver.system import SimulatorSystem
from contact_sim_ros.sim.scene import load_scene
from contact_sim_ros.sim.simulator import Simulator
from vendor_files import vendor_package_path, vendor_path

FR3_ARM = [f"fr3_joint{i}" for i in range(1, 8)]
FR3_HAND = FrankaHand("fr3_finger_joint1", "fr3_finger_joint2")
DT = 1e-3


def fr3_scene(monkeypatch, ros2_control: bool):
    """franka_description's FR3 with its hand on the ground, from the user's xacro (``ros2_control:=true``: with
    its <ros2_control> block)."""
    vendor_package_path(monkeypatch)
    xacro = vendor_path("robot_descriptions", "franka_description", "robots", "fr3", "fr3.urdf.xacro")
    args = {"ros2_control": "true"} if ros2_control else {}
    return load_scene({"robot": {"urdf": str(xacro), "xacro_args": args},
                       "environment": [{"name": "ground", "shape": "halfspace"}]})


def fr3_world(monkeypatch, controllers_file: str):
    """The FR3 with its <ros2_control> block, franka_ros2's controllers file and the hand's gripper, as the node
    builds them (ros/franka.py FrankaInterfaces)."""
    scene = with_hand_drives(fr3_scene(monkeypatch, ros2_control=True))
    sim = Simulator(scene, engine="tamsi", time_step=DT)
    robot = Robot(scene.robot, sim.model.robots[0], sim.model)
    system = SimulatorSystem(sim, robot.hardware_info(sim))
    cm = robot.build_controller_manager(system, controllers_file, [], ControllerTransport())
    [hand] = franka_hands(sim.model)
    device = hand_gripper(hand, cm.ctx)
    cm.add_device(device)
    finger = sim.model.joint_q_index[sim.model.joint_index(hand.finger)]
    gripper = FrankaGripper(device, lambda: sim.q[finger])
    return sim, cm, device, gripper, SteppingLoop(system, cm, real_time_factor=0.0)


def run(loop, steps: int) -> None:
    """``steps`` steps of the loop in this thread (sim time)."""
    for _ in range(steps):
        report = loop.step_now()
        assert report.ok, report.message


def test_the_fr3_description_has_a_franka_hand_whose_block_leaves_the_finger_without_a_drive(monkeypatch):
    """The hand is recognised by franka_description's names; its robot's <ros2_control> block (arm joints only)
    left the finger passive, and with_hand_drives gives it the hand's drive (the arm keeps its own)."""
    scene = fr3_scene(monkeypatch, ros2_control=True)
    assert franka_hands(scene.model) == [FR3_HAND]
    assert set(scene.robot.driven_joints) == set(FR3_ARM)
    assert Simulator(scene, engine="tamsi", time_step=DT).passive_joints == ("fr3_finger_joint1",)   # before
    sim = Simulator(with_hand_drives(fr3_scene(monkeypatch, ros2_control=True)), engine="tamsi", time_step=DT)
    assert sim.passive_joints == ()
    assert sim.scene.robot.gains == {"fr3_finger_joint1": HAND_GAINS}
    assert "fr3_finger_joint1" not in sim.default_gains and set(FR3_ARM) <= set(sim.default_gains)
    # a bare description (no block: every joint gets a drive) is left as it is
    bare = fr3_scene(monkeypatch, ros2_control=False)
    assert with_hand_drives(bare).robot.gains == {} and franka_hands(bare.model) == [FR3_HAND]


def test_the_package_presets_hands_are_recognised_and_others_are_not():
    """The Panda of the franka preset has the same hand (panda_ prefix); the iiwa's WSG 50 is not a Franka Hand."""
    franka = Simulator({"robot": "franka"}, engine="tamsi").model
    assert franka_hands(franka) == [FrankaHand("panda_finger_joint1", "panda_finger_joint2")]
    assert franka_hands(Simulator({"robot": "iiwa_wsg"}, engine="tamsi").model) == []


def test_franka_gripper_goals_move_the_fr3_fingers_beside_franka_ros2s_controllers(monkeypatch):
    """franka_ros2's own controllers file (fr3_arm_controller on the arm's effort interfaces, the broadcasters) and
    the hand's gripper as a device: not a listed controller, its finger's position interface claimed; a move opens
    the fingers to the width (both fingers: the mimic follows), a grasp on nothing closes them and fails by
    libfranka's epsilon rule, while the arm holds its pose."""
    fr3_file = str(vendor_path("ros2_control_files", "fr3_ros_controllers.franka_ros2.yaml"))
    sim, cm, device, gripper, loop = fr3_world(monkeypatch, fr3_file)
    assert "franka_gripper" not in cm.controllers and "fr3_arm_controller" in cm.controllers
    assert cm.ctx.command.claims["fr3_finger_joint1/position"] == "franka_gripper"
    assert gripper.width == pytest.approx(0.0, abs=1e-6)         # the description's start: closed
    assert gripper.max_width == pytest.approx(0.08)              # 2 x the finger's 0.04 m limit
    arm = [sim.model.joint_q_index[sim.model.joint_index(j)] for j in FR3_ARM]
    q_arm = sim.q[arm].copy()

    move = gripper.move(0.06, 0.1)
    gripper.submit(move)
    run(loop, 1500)
    ok, error, width = move.outcome()
    assert move.status == "succeeded" and ok, error
    assert width == pytest.approx(0.06, abs=0.004)      # at success: within the 2 mm goal tolerance per finger
    assert gripper.width == pytest.approx(0.06, abs=5e-4)                   # and on to the target (m)
    assert sim.mimic_positions()["fr3_finger_joint2"] == pytest.approx(gripper.width / 2.0, abs=1e-9)
    np.testing.assert_allclose(sim.q[arm], q_arm, atol=0.02)   # the arm held by fr3_arm_controller (rad)

    grasp = gripper.grasp(0.03, 0.1, 20.0, 0.005, 0.005)
    gripper.submit(grasp)
    run(loop, 1500)
    ok, error, width = grasp.outcome()
    assert width < 0.005 and not ok and "outside [0.0250, 0.0350]" in error


def test_a_controller_of_the_file_on_the_finger_excludes_the_hands_gripper(monkeypatch, tmp_path):
    """A controllers file that commands the finger (franka_ros2's Gazebo set-up puts it in the block): the hand is
    ros2_control's, and the gripper device cannot claim it (the node then serves no franka_gripper)."""
    path = tmp_path / "c.yaml"
    path.write_text("controller_manager:\n  ros__parameters:\n    update_rate: 1000\n"
                    "    hand: {type: position_controllers/JointGroupPositionController}\n"
                    "hand:\n  ros__parameters:\n    joints: [fr3_finger_joint1]\n")
    scene = with_hand_drives(fr3_scene(monkeypatch, ros2_control=True))
    sim = Simulator(scene, engine="tamsi", time_step=DT)
    robot = Robot(scene.robot, sim.model.robots[0], sim.model)
    cm = ControllerManager(SimulatorSystem(sim, robot.hardware_info(sim)),
                           robot.controllers_file(str(path), [])[0], [], transport=ControllerTransport())
    with pytest.raises(Exception, match="fr3_finger_joint1/position"):
        cm.add_device(hand_gripper(FR3_HAND, cm.ctx))
