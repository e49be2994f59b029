"""A user's bare URDF at the node's start (issue 41, item 5c), the node built in this process (inprocess_sim_node.py):
example-robot-data's UR5, whose zero pose puts its wrist 4.85 cm into the ground, is refused at start-up with the
link, the depth and how to give a start pose (main() prints it and exits 2) instead of pausing at t = 0; with the node
parameter ``initial_positions`` it starts there, and ``~/reset`` returns there. The rules:
test/test_start_up_messages.py."""

from __future__ import annotations

import re

import numpy as np
import pytest
from std_srvs.srv import Trigger

from contact_sim_ros.errors import ConfigError
from inprocess_sim_node import InProcessSimNode
from ros_testing import wait_until
from test_start_up_messages import ur5_urdf

START = {"shoulder_lift_joint": -1.57, "wrist_1_joint": -1.57}


def test_a_bare_urdf_in_the_ground_is_refused_at_start_naming_the_link_and_the_start_pose(monkeypatch):
    with pytest.raises(ConfigError) as err:
        InProcessSimNode(monkeypatch, urdf=ur5_urdf(), real_time_factor=0.0)
    text = str(err.value)
    assert re.match(r"start pose: 'wrist_3_link' and 'ground' overlap by 4\.8\d cm", text), text
    assert "-p 'initial_positions:=\"{shoulder_lift_joint: <value>}\"'" in text and "initial_value" in text


def test_initial_positions_is_the_start_and_reset_returns_to_it(monkeypatch):
    # given as the refusal says: --ros-args -p 'initial_positions:="{...}"' (rcl parses the command line)
    value = "{" + ", ".join(f"{j}: {q}" for j, q in START.items()) + "}"
    sim = InProcessSimNode(monkeypatch, ros_args=["--ros-args", "-p", f'initial_positions:="{value}"'],
                           urdf=ur5_urdf(), real_time_factor=0.0)
    try:
        node = sim.node
        m = node.model
        idx = [m.joint_q_index[m.joint_index(j)] for j in START]
        wait_until(lambda: node.sim.t > 0.2, 60, what="0.2 s of sim time")
        assert node.loop.error is None and not node.loop.paused, node.loop.pause_reason
        np.testing.assert_allclose(node.sim.q[idx], list(START.values()), atol=0.01)    # held there (rad)
        node.loop.set_paused(True)                   # elsewhere (paused, so that the drives do not pull it back)
        moved = np.array(node.sim.q)
        moved[idx] = 0.0
        node.loop.request_call(lambda: node.sim.set_state(moved, np.zeros_like(node.sim.v)))
        np.testing.assert_array_equal(node.sim.q[idx], 0.0)
        client = sim.client.create_client(Trigger, "/contact_sim/reset")
        assert client.wait_for_service(timeout_sec=30.0)
        answer = client.call_async(Trigger.Request())
        wait_until(answer.done, 30, what="~/reset's answer")
        assert answer.result().success, answer.result().message
        np.testing.assert_allclose(node.sim.q[idx], list(START.values()), atol=0.01)
    finally:
        sim.close()
