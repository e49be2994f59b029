"""The node's live browser view (viewer:=true / --viewer): served while the node steps and publishes. One node start
(the viewer is a process of the node's: process size): the page served, then its buttons clicked. Paused, the node
republishes its frozen state every 0.1 s of wall time (driver/loop.py, paused_publish_period): "no step while
paused" is read from those republications, not from a sleep. A node with the viewer started unpaused (the default)
is seen stepping and serving the view in test_node_cameras' Ctrl-C test (no node start of its own here)."""

import socket
import urllib.request

import numpy as np
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger

from contact_sim_ros.viewer.headless_browser import HeadlessChromium, text_field_js
from ros_testing import wait_until


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stamp(msg) -> float:
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


def frozen(states, n: int = 3) -> bool:
    """The last ``n`` joint states received carry one stamp (a paused node's republications)."""
    return len(states) >= n and len({_stamp(m) for m in states[-n:]}) == 1


def test_viewer_serves_the_page_and_its_buttons_act_through_the_node(ros, start_node):
    """The page is served (HTTP 200, HTML) by a node started with --viewer; headless Chromium clicks its buttons
    of the node, started paused: Resume (sim time advances, stepping goes on with the viewer attached), Pause
    (joint_states stamps stop), Reset (back to t = 0 and the initial joint positions, after a commanded move);
    the ~/pause service and the page's button show the same state."""
    port = _free_port()
    node = start_node("--robot", "franka", "--engine", "tamsi", "--viewer", "--viewer-port", str(port),
                      "--namespace", "clicked", "--paused", "--joint-states-rate", "100")
    states = ros.subscribe(JointState, "/clicked/joint_states")
    # a paused node publishes its state once; under load that can come before discovery has matched our
    # subscription, so ask again through ~/reset (paused at t = 0 it republishes the same initial state)
    try:
        wait_until(lambda: states or node.proc.poll() is not None, 20, what="/clicked/joint_states")
    except AssertionError:
        assert ros.call(Trigger, "/clicked/contact_sim/reset", Trigger.Request(), timeout=60).success, node.output()
        try:
            wait_until(lambda: states or node.proc.poll() is not None, 60, what="/clicked/joint_states after reset")
        except AssertionError:
            raise AssertionError(node.output())
    assert node.proc.poll() is None, node.output()
    initial = states[-1]
    assert _stamp(initial) == 0.0                              # started paused: the state at t = 0
    with urllib.request.urlopen(f"http://127.0.0.1:{port}", timeout=30) as page:
        assert page.status == 200 and b"<html" in page.read(2000).lower()
    names = list(initial.name)
    with HeadlessChromium(f"http://127.0.0.1:{port}", timeout=40) as browser:
        browser.wait_for_button("Resume")                      # the page knows the node is paused
        n = len(states)
        wait_until(lambda: len(states) >= n + 3, 30, what="3 republications of the paused state")
        assert max(_stamp(m) for m in states) == 0.0           # paused: no step
        browser.click_button("Resume")
        wait_until(lambda: _stamp(states[-1]) > 0.1, 30, what="joint_states stamps advancing after Resume")
        n = len(states)                                        # stepping goes on with the viewer attached
        wait_until(lambda: len(states) > n + 50, 30, what="50 more joint states with the viewer running")
        # move a joint away from its initial position
        target = initial.position[0] + 0.4
        ros.publish(JointState, "/clicked/joint_command", JointState(name=[names[0]], position=[target]))
        wait_until(lambda: abs(states[-1].position[0] - initial.position[0]) > 0.1, 30,
                   what=f"{names[0]} to move towards {target:.2f} rad")
        browser.click_button("Pause")
        browser.wait_for_button("Resume")
        wait_until(lambda: frozen(states), 30, what="the paused state republished")   # in-flight ones arrived
        stopped_at = max(_stamp(m) for m in states)
        n = len(states)
        wait_until(lambda: len(states) >= n + 5, 30, what="5 more republications while paused")
        assert max(_stamp(m) for m in states[n:]) <= stopped_at, "joint_states stamps advanced while paused"
        assert browser.text_value("sim time (s)") == f"{stopped_at:.3f}"
        n = len(states)
        browser.click_button("Reset")
        wait_until(lambda: any(_stamp(m) == 0.0 for m in states[n:]), 30, what="joint_states at t = 0 after Reset")
        reset = [m for m in states[n:] if _stamp(m) == 0.0][-1]
        np.testing.assert_allclose(reset.position, initial.position, atol=1e-12)   # the initial state
        np.testing.assert_allclose(reset.velocity, initial.velocity, atol=1e-12)
        browser.wait_for(f"{text_field_js('sim time (s)')} === '0.000'", "sim time 0 on the page after Reset")
        # the service and the page agree: resuming through ~/pause turns the page's button back to Pause
        assert ros.call(SetBool, "/clicked/contact_sim/pause", SetBool.Request(data=False)).success
        browser.wait_for_button("Pause")
        wait_until(lambda: _stamp(states[-1]) > 0.05, 30, what="joint_states stamps advancing after ~/pause false")
        # the commanded move was dropped by the reset: the joint holds its initial position
        assert abs(states[-1].position[0] - initial.position[0]) < 0.02
