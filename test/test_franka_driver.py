"""Rules of the Franka driver-side interfaces in sim time, without DDS (driver/franka.py): libfranka's grasp
success by epsilon, the external wrench estimate of FrankaRobotState (pinv(J^T) tau_ext) against the contact
forces on the hand of a Panda pressing on a table, and the franka_robot_state_broadcaster controller type loaded
from an FR3-style controllers file."""

from __future__ import annotations

import numpy as np
import pytest

from contact_sim_ros.driver.command_validation import JointLimits
from contact_sim_ros.driver.config import read_controllers_file
from contact_sim_ros.driver.controller_manager import ControllerManager
from contact_sim_ros.driver.controllers.base import ControllerTransport
from contact_sim_ros.driver.franka import ExternalWrenchEstimate, FrankaGripperGoal, grasp_succeeded
from contact_sim_ros.driver.system import SimulatorSystem
from contact_sim_ros.sim.simulator import Simulator

PANDA = [f"panda_joint{i}" for i in range(1, 8)]


@pytest.mark.parametrize("width,ok", [(0.030, True), (0.0251, True), (0.0349, True), (0.0249, False),
                                      (0.0351, False)])
def test_grasp_succeeds_within_epsilon(width, ok):
    assert grasp_succeeded(width, 0.03, 0.005, 0.005) is ok


def test_grasp_goal_outcome_reports_the_width_and_the_rule():
    g = FrankaGripperGoal("grasp", 0.05, 0.0, 20.0, inner=0.005, outer=0.005)
    g.measured = (0.015, 20.0, True, False)      # stalled on a 30 mm object
    g.finish("succeeded")
    ok, error, width = g.outcome()
    assert not ok and width == pytest.approx(0.03) and "outside [0.0450, 0.0550]" in error
    m = FrankaGripperGoal("move", 0.06, 0.03, 70.0)
    m.measured = (0.0299, 0.0, False, True)
    m.finish("succeeded")
    assert m.outcome()[0]


def test_external_wrench_estimate_equals_the_contact_wrench_on_the_hand():
    probe = Simulator({"robot": "franka", "environment": [{"name": "ground", "shape": "halfspace"}]}, engine="tamsi")
    tcp = probe.body_pose("panda_hand_tcp").translation
    tips = min(probe.body_pose(f).translation[2] for f in ("panda_leftfinger_tip", "panda_rightfinger_tip"))
    top = tips - 0.005
    scene = {"robot": "franka",
             "environment": [{"name": "table", "shape": {"box": [0.4, 0.4, 0.1]},
                              "pose": {"xyz": [float(tcp[0]), 0.0, float(top - 0.05)], "rpy": [0, 0, 0]}}]}
    sim = Simulator(scene, engine="tamsi")
    m = sim.model
    pm = m.pin_model
    arm_v = np.asarray(m.joint_v_index)[[m.joint_index(j) for j in PANDA]]
    est = ExternalWrenchEstimate(pm, arm_v, pm.getFrameId("panda_link0"), pm.getFrameId("panda_hand_tcp"))
    for _ in range(300):
        sim.step()
    forces = sim.contact_forces_world()
    assert forces.shape[0] > 0
    # bodies moved by joint 7 or the fingers: the hand and the fingers (link 7 is far from the table)
    on_hand = np.array([pm.names[go.parentJoint] in ("panda_joint7", "panda_finger_joint1", "panda_finger_joint2")
                        for go in m.collision_model.geometryObjects])
    c = sim.contacts
    f_hand = (forces[on_hand[c.geometry_b]].sum(axis=0) - forces[on_hand[c.geometry_a]].sum(axis=0))
    tau_ext = np.asarray(sim.last_result.generalized_contact_force)[arm_v]
    T, o_f, k_f = est.compute(sim.q, tau_ext)
    assert f_hand[2] > 5.0                               # the table pushes the hand up
    assert np.linalg.norm(o_f[:3] - f_hand) <= 0.05 * np.linalg.norm(f_hand)
    R = T[:3, :3]
    assert np.allclose(k_f[:3], R.T @ o_f[:3])           # the same force in the EE (stiffness) frame's axes
    assert T[2, 3] == pytest.approx(sim.body_pose("panda_hand_tcp").translation[2], abs=1e-9)


FR3_STYLE_FILE = """
/**:
  controller_manager:
    ros__parameters:
      update_rate: 1000
      joint_state_broadcaster:
        type: joint_state_broadcaster/JointStateBroadcaster
      franka_robot_state_broadcaster:
        type: franka_robot_state_broadcaster/FrankaRobotStateBroadcaster
/**:
  franka_robot_state_broadcaster:
    ros__parameters:
      arm_id: fr3
      lock_try_count: 5
      lock_sleep_interval: 5
      convenience_publish_rate: 250
"""


def test_franka_robot_state_broadcaster_controller_on_the_panda(tmp_path):
    """The controller type loads from an FR3-style file on the Panda preset (no fr3_joint*: panda_joint1..7),
    claims no command interface and publishes every 4 steps at 250 Hz (1 ms steps)."""
    cfile = tmp_path / "controllers.yaml"
    cfile.write_text(FR3_STYLE_FILE)
    sim = Simulator({"robot": "franka", "environment": [{"name": "ground", "shape": "halfspace"}]}, engine="tamsi")
    cm = ControllerManager(SimulatorSystem(sim), read_controllers_file(cfile), [], transport=ControllerTransport(),
                           limits=JointLimits.from_model(sim.model),
                           active=["joint_state_broadcaster", "franka_robot_state_broadcaster"])
    c = cm.controllers["franka_robot_state_broadcaster"]
    assert c.active and c.joints == PANDA and c.command_interfaces() == []
    assert (c.base_frame, c.ee_frame) == ("panda_link0", "panda_hand_tcp")
    assert c.publish_every == 4
