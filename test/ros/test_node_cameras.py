"""The simulated cameras over DDS (contact_sim_ros/ros/camera_publisher.py): a node with the shipped camera scene
publishes realsense2_camera's topics with the driver's encodings, sizes, frames and fields, stamps at the sim time
of the rendered state (multiples of the camera period), the label map, and the optical frames in TF."""

import json
import os
import signal

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import CameraInfo, Image, PointCloud2, PointField
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from contact_sim_ros.sim.scene import load_scene
from ros_testing import wait_until

SCENE = "iiwa_wsg_cameras.yaml"
TIME_STEP = 1e-3


@pytest.fixture(scope="module")
def camera_node(ros, start_node):
    node = start_node("--scene", SCENE, "--engine", "tamsi", "--time-step", str(TIME_STEP))
    topics = {}
    for cam in ("wrist_camera", "table_camera"):
        ns = f"/{cam}/{cam}"
        topics[cam] = {
            "color": ros.subscribe(Image, f"{ns}/color/image_raw", keep=4),
            "color_info": ros.subscribe(CameraInfo, f"{ns}/color/camera_info", keep=4),
            "depth": ros.subscribe(Image, f"{ns}/depth/image_rect_raw", keep=4),
            "depth_info": ros.subscribe(CameraInfo, f"{ns}/depth/camera_info", keep=4),
            "aligned": ros.subscribe(Image, f"{ns}/aligned_depth_to_color/image_raw", keep=4),
            "points": ros.subscribe(PointCloud2, f"{ns}/depth/color/points", keep=4),
            "labels": ros.subscribe(Image, f"{ns}/segmentation/image_raw", keep=4),
            "label_map": ros.subscribe(String, f"{ns}/segmentation/labels", latched=True),
        }
    tf_static = ros.subscribe(TFMessage, "/tf_static", latched=True)
    for cam, subs in topics.items():
        for name, msgs in subs.items():
            wait_until(lambda msgs=msgs: len(msgs) >= (1 if name == "label_map" else 2), 180.0,
                       what=lambda: f"{cam} {name} (node output: {node.output()[-1500:]})")
    return node, topics, tf_static


def _stamp_ns(msg):
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def test_images_and_camera_info_as_the_driver(camera_node):
    _, topics, _ = camera_node
    specs = {c.name: c for c in load_scene(SCENE).cameras}
    period_ns = specs["wrist_camera"].decimation(TIME_STEP) * 1_000_000   # 67 steps of 1 ms
    for cam, subs in topics.items():
        spec = specs[cam]
        color, depth, aligned, labels = subs["color"][-1], subs["depth"][-1], subs["aligned"][-1], subs["labels"][-1]
        assert (color.encoding, color.width, color.height, color.step) == ("rgb8", 640, 480, 640 * 3)
        assert (depth.encoding, depth.width, depth.height, depth.step) == ("16UC1", 640, 480, 640 * 2)
        assert (aligned.encoding, aligned.step, labels.encoding) == ("16UC1", 640 * 2, "16UC1")
        assert len(color.data) == 640 * 480 * 3 and len(depth.data) == 640 * 480 * 2
        assert color.header.frame_id == aligned.header.frame_id == f"{cam}_color_optical_frame"
        assert depth.header.frame_id == f"{cam}_depth_optical_frame"
        for info_name, frame in (("color_info", "color"), ("depth_info", "depth")):
            info = subs[info_name][-1]
            assert info.header.frame_id == f"{cam}_{frame}_optical_frame"
            assert (info.width, info.height, info.distortion_model) == (640, 480, "plumb_bob")
            np.testing.assert_allclose(np.reshape(info.k, (3, 3)), spec.K)
            np.testing.assert_allclose(np.reshape(info.p, (3, 4))[:, :3], spec.K)
        # stamps: the sim time of a rendered state, every 67th step; color and depth of one frame share it
        for msg in (color, depth, aligned, labels, subs["points"][-1]):
            assert _stamp_ns(msg) % period_ns == 0 and _stamp_ns(msg) > 0, _stamp_ns(msg)
        stamps = {name: {_stamp_ns(m) for m in subs[name]} for name in ("color", "depth", "color_info")}
        assert stamps["color"] & stamps["depth"] and stamps["color"] & stamps["color_info"]
        assert len(stamps["color"]) >= 2                 # frames go on


def test_table_camera_sees_the_table_top_at_its_distance(camera_node):
    """The table camera is 1.6 m above the floor, the table top at 0.75 m: its labelled pixels read 850 mm
    (D435 noise at 0.85 m: 0.85^2 * 0.08 / (337.2 * 0.05) = 3.4 mm RMS, the depth imager's focal length); the label
    map names the entities."""
    _, topics, _ = camera_node
    subs = topics["table_camera"]
    names = json.loads(subs["label_map"][-1].data)
    by_name = {v["name"]: int(k) for k, v in names.items()}
    assert {"table", "bottle", "box", "ground", "iiwa_link_7"} <= set(by_name)
    assert names[str(by_name["iiwa_link_7"])]["kind"] == "link" and names[str(by_name["bottle"])]["kind"] == "object"
    stamp = {_stamp_ns(m): m for m in subs["labels"]}
    depth = next(m for m in reversed(subs["depth"]) if _stamp_ns(m) in stamp)
    labels = np.frombuffer(stamp[_stamp_ns(depth)].data, np.uint16).reshape(480, 640)
    mm = np.frombuffer(depth.data, np.uint16).reshape(480, 640)
    table = (labels == by_name["table"]) & (mm > 0)
    assert table.sum() > 10000
    assert abs(np.median(mm[table]) - 850) <= 2 and np.percentile(np.abs(mm[table] - 850.0), 99) < 10
    ground = (labels == by_name["ground"]) & (mm > 0)
    assert abs(np.median(mm[ground]) - 1600) <= 3


def test_point_cloud_fields_as_the_driver(camera_node):
    _, topics, _ = camera_node
    subs = topics["table_camera"]
    cloud = subs["points"][-1]
    fields = [(f.name, f.offset, f.datatype, f.count) for f in cloud.fields]
    assert fields == [("x", 0, PointField.FLOAT32, 1), ("y", 4, PointField.FLOAT32, 1),
                      ("z", 8, PointField.FLOAT32, 1), ("rgb", 16, PointField.FLOAT32, 1)]
    assert (cloud.point_step, cloud.height, cloud.is_dense) == (20, 1, True)
    assert cloud.header.frame_id == "table_camera_depth_optical_frame"
    assert cloud.row_step == 20 * cloud.width and len(cloud.data) == cloud.row_step
    # as many points as depth pixels of the same frame, and the points' z is that depth
    depth = next((m for m in subs["depth"] if _stamp_ns(m) == _stamp_ns(cloud)), None)
    if depth is not None:
        mm = np.frombuffer(depth.data, np.uint16)
        assert cloud.width == int((mm > 0).sum())
    raw = np.frombuffer(cloud.data, np.uint8).reshape(cloud.width, 20)
    xyz = raw[:, :12].copy().view(np.float32).reshape(-1, 3)
    assert np.all(xyz[:, 2] > 0.28) and np.all(xyz[:, 2] < 1.7)
    assert np.any(raw[:, 16:19] > 0)


def test_optical_frames_in_tf(camera_node):
    """REP 103: parent -> C_link (the scene pose) -> C_color_frame -> C_color_optical_frame (rpy -pi/2 0 -pi/2)."""
    _, _, tf_static = camera_node
    edges = {(t.header.frame_id, t.child_frame_id): t.transform for m in tf_static for t in m.transforms}
    assert ("iiwa_link_7", "wrist_camera_link") in edges and ("world", "table_camera_link") in edges
    tr = edges[("world", "table_camera_link")].translation
    assert (tr.x, tr.y, tr.z) == pytest.approx((0.75, 0.0, 1.6))
    for cam in ("wrist_camera", "table_camera"):
        for kind in ("color", "depth"):
            q = edges[(f"{cam}_{kind}_frame", f"{cam}_{kind}_optical_frame")].rotation
            assert (q.x, q.y, q.z, q.w) == pytest.approx((-0.5, 0.5, -0.5, 0.5), abs=1e-9)


def test_a_killed_camera_process_is_logged_shown_in_diagnostics_reaped_and_restarted(ros, camera_node):
    """Issue 44 (finding 3): after a SIGKILL of the camera process the images stopped for good, nothing was logged,
    /diagnostics said nothing and a zombie was left. The node logs it, reaps it, restarts it (images flow again) and
    its /diagnostics cameras status names what happened. (Last of the module's tests on its node.)"""
    node, topics, _ = camera_node
    diagnostics = ros.subscribe(DiagnosticArray, "/diagnostics", keep=5)

    def cameras():
        for msg in reversed(list(diagnostics)):
            for status in msg.status:
                if status.name == "/contact_sim: cameras":
                    return status, {kv.key: kv.value for kv in status.values}
        return None, {}
    wait_until(lambda: cameras()[0] is not None, 30, what="the cameras' status on /diagnostics")
    status, values = cameras()
    assert (status.level, values["failures"]) == (bytes([0]), "0"), status
    pid = int(values["process_id"])
    color = topics["table_camera"]["color"]
    stamp = _stamp_ns(color[-1])
    before = len(node.output())
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: f"the camera process {pid} ended: killed by SIGKILL; restarting it (1 of 3)" in
               node.output()[before:], 30, what="the error in the node's log")
    wait_until(lambda: cameras()[1].get("restarts") == "1", 120, what=lambda: f"a restart ({node.output()[before:]})")
    status, values = cameras()
    assert status.level == bytes([1]) and int(values["process_id"]) != pid, status
    assert status.message.endswith(f"(restarted 1 of 3 times; last: the camera process {pid} ended: killed by "
                                   f"SIGKILL)"), status.message
    assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    wait_until(lambda: _stamp_ns(color[-1]) > stamp, 120, what="images again")


@pytest.mark.process
def test_camera_start_up_error_without_the_render_back_end(tmp_path):
    """A node whose scene has cameras stops at start-up (exit 2, one line) when the render back-end is missing
    (found by its camera process), naming what to install."""
    import os

    from ros_testing import NodeProcess, error_lines
    fake = tmp_path / "no_backend"
    fake.mkdir()
    (fake / "moderngl.py").write_text("raise ImportError('No module named moderngl')\n")
    env = {"PYTHONPATH": f"{fake}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    # a namespace of its own: the module's camera node runs in '/' (a second node there is refused first)
    no_backend = NodeProcess(["--scene", SCENE, "--engine", "tamsi", "--namespace", "cam_no_backend"], env=env)
    code, out = no_backend.ended(300)
    assert code == 2, out
    err = error_lines(out)
    assert len(err) == 1 and "moderngl" in err[0] and "apt-get install libegl1 libegl-mesa0 libgl1 libgl1-mesa-dri" in \
        err[0] and "Traceback" not in out, out


def test_a_camera_faster_than_the_stepping_is_refused_naming_it(monkeypatch):
    """A camera faster than the stepping stops the node at start-up (before any camera process), naming the camera
    and the file: the ContactSimError main() prints as its one "sim_node: error:" line (exit 2: the bad files of
    test_request_bounds.py)."""
    from contact_sim_ros.errors import ContactSimError
    from inprocess_sim_node import InProcessSimNode
    with pytest.raises(ContactSimError) as refused:
        InProcessSimNode.from_command_line(monkeypatch, "--scene", SCENE, "--engine", "tamsi", "--time-step", "0.1",
                                           "--namespace", "cam_too_fast").close()
    message = str(refused.value)
    assert "\n" not in message, message
    assert "iiwa_wsg_cameras.yaml: camera 'wrist_camera': rate 15 Hz is above the step rate 10 Hz" in message, message


@pytest.mark.process
def test_ctrl_c_of_a_node_with_cameras_and_the_browser_view_ends_every_process_cleanly(ros):
    """The node with the browser view started unpaused (the default) steps and serves the view: its sim time
    advances, the page is served (HTTP 200, HTML), offers Pause and shows a sim time past one the node published.
    Then Ctrl-C in a terminal signals the whole process group (the node, its camera process, its viewer process):
    the node exits 0, no process prints a traceback, nothing is left running and no semaphore is leaked."""
    import os
    import signal
    import socket
    import urllib.request

    from sensor_msgs.msg import JointState

    from contact_sim_ros.viewer.headless_browser import HeadlessChromium, text_field_js
    from ros_testing import NodeProcess
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    js = ros.subscribe(JointState, "/cam_ctrl_c/joint_states", keep=10)
    node = NodeProcess(["--scene", SCENE, "--engine", "tamsi", "--namespace", "cam_ctrl_c", "--viewer", "--ros-args",
                        "-p", f"viewer_port:={port}"], new_session=True)
    try:
        wait_until(lambda: "simulating " in node.output() or node.proc.poll() is not None, 240,
                   what="the node with cameras and the viewer to start")
        assert node.proc.poll() is None, node.output()
        wait_until(lambda: (js and 1e-9 * _stamp_ns(js[-1]) > 0.2) or node.proc.poll() is not None, 120,
                   what="0.2 s of sim time (the node steps, not paused)")
        assert node.proc.poll() is None, node.output()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}", timeout=30) as page:
            assert page.status == 200 and b"<html" in page.read(2000).lower()
        with HeadlessChromium(f"http://127.0.0.1:{port}", timeout=60) as browser:
            browser.wait_for_button("Pause")                   # the page knows the node runs
            t = 1e-9 * _stamp_ns(js[-1])
            browser.wait_for(f"parseFloat({text_field_js('sim time (s)')}) > {t}",
                             f"the page's sim time past {t:.3f} s (frames of the stepping node)")
        children = [int(c) for t in os.listdir(f"/proc/{node.proc.pid}/task")
                    for c in open(f"/proc/{node.proc.pid}/task/{t}/children").read().split()]
        assert "rendering in process " in node.output()
        os.killpg(node.proc.pid, signal.SIGINT)
        code = node.proc.wait(60)
    finally:
        node.stop()
    out = node.output()
    assert code == 0, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out and "leaked semaphore" not in out, out

    def alive(pid):
        try:
            return "(zombie)" not in open(f"/proc/{pid}/status").read()
        except OSError:
            return False
    assert len(children) >= 2, children          # the camera process and the viewer process
    wait_until(lambda: not any(alive(c) for c in children), 30, what="the node's child processes to end")
