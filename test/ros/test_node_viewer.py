"""The node's live browser view (viewer:=true / --viewer): served while the node steps and publishes."""

import socket
import urllib.request

from sensor_msgs.msg import JointState

from ros_testing import wait_until


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_viewer_flag_serves_the_scene_while_the_node_runs(ros, start_node):
    port = _free_port()
    node = start_node("--robot", "franka", "--engine", "tamsi", "--viewer", "--viewer-port", str(port),
                      "--namespace", "viewed")
    states = ros.subscribe(JointState, "/viewed/joint_states")
    try:
        wait_until(lambda: len(states) > 50 or node.proc.poll() is not None, 120, what="/viewed/joint_states")
    except AssertionError:
        raise AssertionError(node.output())
    assert node.proc.poll() is None, node.output()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}", timeout=30) as page:
        assert page.status == 200 and b"<html" in page.read(2000).lower()
    # stepping goes on with the viewer attached
    n = len(states)
    wait_until(lambda: len(states) > n + 50, 30, what="more /viewed/joint_states with the viewer running")
