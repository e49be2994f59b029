"""Objects spawned into a running node whose scene had no moving TF edge at start (no robot, only the ground;
test/ros/scenes/ground_only.yaml), over real DDS, the node built in this process (inprocess_sim_node.py): from the
spawn on /tf carries world -> object (falling, then at rest on the ground), contact_wrench/<object> carries the
ground's support (its weight); deleted, it leaves /tf. The browser view draws it and, deleted, no longer: a
`process` test (the viewer and the browser are processes)."""

import socket

import numpy as np
import pytest
from geometry_msgs.msg import WrenchStamped
from rosgraph_msgs.msg import Clock
from tf2_msgs.msg import TFMessage

from contact_sim_ros.viewer.headless_browser import HeadlessChromium
from inprocess_sim_node import InProcessSimNode
from ros_testing import SCENES, wait_until
from viewer_testing import BluePixels

pytest.importorskip("simulation_interfaces")
from simulation_interfaces.msg import Result  # noqa: E402
from simulation_interfaces.srv import DeleteEntity, SpawnEntity  # noqa: E402

NS = "/spawned"
EDGE, MASS = 0.3, 2.0            # the crate: m, kg
XYZ0 = (0.3, 0.0, 0.5)           # spawned 0.35 m above its resting height


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _crate(tf) -> list:
    return [t for m in list(tf) for t in m.transforms if t.child_frame_id == "crate"]


def _ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def _node(monkeypatch, *flags) -> InProcessSimNode:
    """The ground-only node (TAMSI, real time, namespace /spawned) built in this process."""
    return InProcessSimNode.from_command_line(monkeypatch, "--scene", str(SCENES / "ground_only.yaml"), "--engine",
                                              "tamsi", "--namespace", NS.strip("/"), *flags)


def _spawn_crate(ros):
    req = SpawnEntity.Request(name="crate", uri=f"primitive://box?size={EDGE},{EDGE},{EDGE}&mass={MASS}")
    pose = req.initial_pose.pose
    pose.position.x, pose.position.y, pose.position.z = XYZ0
    pose.orientation.w = 1.0
    res = ros.call(SpawnEntity, f"{NS}/spawn_entity", req, timeout=60)
    assert res.result.result == Result.RESULT_OK, res.result.error_message


def _delete_crate(ros):
    res = ros.call(DeleteEntity, f"{NS}/delete_entity", DeleteEntity.Request(entity="crate"), timeout=60)
    assert res.result.result == Result.RESULT_OK, res.result.error_message


def test_spawned_object_on_tf_with_its_contact_wrench_and_gone_when_deleted(ros, monkeypatch):
    tf = ros.subscribe(TFMessage, "/tf", keep=2000)
    clock = ros.subscribe(Clock, "/clock", keep=10)
    wrench = ros.subscribe(WrenchStamped, f"{NS}/contact_wrench/crate", keep=50)
    sim = _node(monkeypatch)
    try:
        wait_until(lambda: (clock and _ns(clock[-1].clock) > 500_000_000) or not sim.node.link.stepping, 60,
                   what="0.5 s of sim time")
        assert sim.node.link.stepping, f"the stepping thread stopped: {sim.node.loop.error!r}"
        assert not _crate(tf)
        _spawn_crate(ros)
        # /tf: world -> crate from the spawn on, falling onto the ground and resting there
        wait_until(lambda: _crate(tf), 30, what="world -> crate on /tf")
        first = _crate(tf)[0]
        assert first.header.frame_id == "world"
        assert first.transform.translation.z > EDGE / 2 + 0.05          # seen before it landed

        def resting():
            z = [t.transform.translation.z for t in _crate(tf)[-20:]]
            return len(z) == 20 and max(abs(v - EDGE / 2) for v in z) < 2e-3
        wait_until(resting, 30, what="the crate at rest on the ground in /tf")
        last = _crate(tf)[-1].transform.translation
        np.testing.assert_allclose([last.x, last.y], XYZ0[:2], atol=2e-3)
        # its contact wrench: the ground carries its weight
        wait_until(lambda: wrench and abs(np.linalg.norm([wrench[-1].wrench.force.x, wrench[-1].wrench.force.y,
                                                          wrench[-1].wrench.force.z]) - MASS * 9.81) < 0.05 * MASS
                   * 9.81, 30, what="contact_wrench/crate = its weight")
        assert wrench[-1].header.frame_id == "crate"

        _delete_crate(ros)
        t_deleted = int(round(sim.node.sim.t * 1e9))    # the swap is done when the service answered: the node's
        # sim time now is after it (a transform of the crate published before it, still in flight, is stamped before)
        wait_until(lambda: _ns(clock[-1].clock) > t_deleted + 500_000_000, 30, what="0.5 s of sim time on")
        assert not [t for t in _crate(tf) if _ns(t.header.stamp) > t_deleted]
        assert sim.node.link.stepping and not sim.callback_errors, sim.callback_errors
    finally:
        sim.close()


@pytest.mark.process
def test_spawned_object_in_the_view_and_gone_when_deleted(ros, monkeypatch, tmp_path):
    """The browser view (the viewer process, a headless Chromium) draws the spawned crate, and no longer once it is
    deleted."""
    port = _free_port()
    tf = ros.subscribe(TFMessage, "/tf", keep=2000)
    sim = _node(monkeypatch, "--viewer", "--viewer-port", str(port))
    try:
        with HeadlessChromium(f"http://127.0.0.1:{port}", timeout=60) as browser:
            blue = BluePixels(browser, tmp_path)
            browser.wait_for_button("Pause")
            assert blue("empty") == 0.0
            _spawn_crate(ros)
            wait_until(lambda: _crate(tf), 30, what="world -> crate on /tf")
            shown = blue.wait(lambda v: v > 0.005, "the spawned crate")
            _delete_crate(ros)
            blue.wait(lambda v: v == 0.0, "the crate deleted")
        assert sim.node.link.stepping and not sim.callback_errors, sim.callback_errors
    finally:
        sim.close()
    print(f"crate in the view: {shown:.4f} of the scene's pixels")
