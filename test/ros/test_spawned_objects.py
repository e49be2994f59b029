"""Objects spawned into a running node whose scene had no moving TF edge at start (no robot, only the ground;
test/ros/scenes/ground_only.yaml), over real DDS: from the spawn on /tf carries world -> object (falling, then at
rest on the ground), contact_wrench/<object> carries the ground's support (its weight), and the browser view
draws it; deleted, it leaves /tf and the view."""

import socket
import time

import numpy as np
import pytest
from geometry_msgs.msg import WrenchStamped
from tf2_msgs.msg import TFMessage

from contact_sim_ros.viewer.headless_browser import HeadlessChromium, object_pixel_fraction
from ros_testing import SCENES, wait_until

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


def test_spawned_object_on_tf_with_its_contact_wrench_and_in_the_view(ros, start_node, tmp_path):
    port = _free_port()
    node = start_node("--scene", str(SCENES / "ground_only.yaml"), "--engine", "tamsi", "--namespace",
                      NS.strip("/"), "--viewer", "--viewer-port", str(port))
    tf = ros.subscribe(TFMessage, "/tf", keep=2000)
    wrench = ros.subscribe(WrenchStamped, f"{NS}/contact_wrench/crate", keep=50)
    wait_until(lambda: "simulating" in node.output() or node.proc.poll() is not None, 120, what="the node")
    assert node.proc.poll() is None, node.output()
    time.sleep(1.0)
    assert not _crate(tf)

    with HeadlessChromium(f"http://127.0.0.1:{port}", timeout=60) as browser:
        def blue(tag):
            browser.screenshot(tmp_path / f"{tag}.png")
            return object_pixel_fraction(tmp_path / f"{tag}.png")

        def wait_blue(predicate, what, timeout=60.0):
            deadline, k = time.monotonic() + timeout, 0
            while True:
                k += 1
                value = blue(f"{what}_{k}")
                if predicate(value):
                    return value
                assert time.monotonic() < deadline, f"{what}: blue fraction {value:.4f}"
                time.sleep(0.5)
        browser.wait_for_button("Pause")
        assert blue("empty") == 0.0

        req = SpawnEntity.Request(name="crate", uri=f"primitive://box?size={EDGE},{EDGE},{EDGE}&mass={MASS}")
        pose = req.initial_pose.pose
        pose.position.x, pose.position.y, pose.position.z = XYZ0
        pose.orientation.w = 1.0
        res = ros.call(SpawnEntity, f"{NS}/spawn_entity", req, timeout=60)
        assert res.result.result == Result.RESULT_OK, res.result.error_message
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
        # the browser view draws it
        shown = wait_blue(lambda v: v > 0.005, "the spawned crate")

        res = ros.call(DeleteEntity, f"{NS}/delete_entity", DeleteEntity.Request(entity="crate"), timeout=60)
        assert res.result.result == Result.RESULT_OK, res.result.error_message
        time.sleep(0.3)                         # messages published before the swap, still in flight
        n = len(tf)
        time.sleep(1.0)
        assert not [t for m in tf[n:] for t in m.transforms if t.child_frame_id == "crate"]
        wait_blue(lambda v: v == 0.0, "the crate deleted")
    assert node.proc.poll() is None, node.output()
    print(f"crate in the view: {shown:.4f} of the scene's pixels")
