"""A camera the robot's URDF already has, over DDS (issue 28): the node with example-robot-data's UR5 carrying a
RealSense D435 as realsense2_description's sensor_d435 macro writes it without nominal extrinsics (the URDF has
camera_bottom_screw_frame -> camera_link; the driver publishes the color/depth frames): every camera frame arrives
in TF from exactly one transform (camera_link from the robot's TF, the others from the camera publisher), and the
images are in the camera's optical frames. The nominal-extrinsics variant and the render pose: test/test_urdf_cameras.py."""

from pathlib import Path

import yaml
from sensor_msgs.msg import CameraInfo, Image
from tf2_msgs.msg import TFMessage

from ros_testing import stamp_s, wait_until

XACRO = Path(__file__).resolve().parents[1] / "data" / "ur5_d435.urdf.xacro"
FRAMES = ("camera_link", "camera_color_frame", "camera_depth_frame", "camera_color_optical_frame",
          "camera_depth_optical_frame")


def test_urdf_camera_frames_arrive_once_and_images_in_its_optical_frames(ros, start_node, tmp_path):
    scene = tmp_path / "ur5_d435.yaml"
    scene.write_text(yaml.safe_dump({
        # on a 0.5 m pedestal: at its zero configuration the UR5's wrist reaches 5 mm below its base, into the
        # ground, and the node pauses at t = 0 (no image after the first: the test then raced the first render)
        "robot": {"urdf": f"{XACRO} nominal_extrinsics:=false", "base_pose": {"xyz": [0.0, 0.0, 0.5]}},
        "environment": [{"name": "ground", "shape": "halfspace"}],
        "cameras": [{"name": "camera", "width": 64, "height": 48, "fov": 69.4, "rate": 10.0}]}))
    tf_static = ros.subscribe(TFMessage, "/tf_static", latched=True)
    tf = ros.subscribe(TFMessage, "/tf", keep=20)
    info = ros.subscribe(CameraInfo, "/camera/camera/color/camera_info", keep=3)
    depth = ros.subscribe(Image, "/camera/camera/depth/image_rect_raw", keep=3)
    node = start_node("--scene", str(scene), "--engine", "tamsi", "--time-step", "0.002")

    def children():
        return [t.child_frame_id for m in list(tf_static) + list(tf) for t in m.transforms]
    def missing():
        return (f"the camera's TF, camera_info and depth: missing frames {sorted(set(FRAMES) - set(children()))}, "
                f"{len(info)} camera_info, {len(depth)} depth images, {len(tf)} /tf messages; "
                f"node output:\n{node.output()[-3000:]}")
    # two images: the second is rendered from a state the node stepped to (sim time goes on)
    wait_until(lambda: set(FRAMES) <= set(children()) and info and len(depth) >= 2 and tf, 180.0, what=missing)
    static = [(t.header.frame_id, t.child_frame_id) for m in tf_static for t in m.transforms]
    for frame in FRAMES:
        parents = [p for p, c in static if c == frame]
        assert len(parents) == 1, f"{frame}: published by {parents} on /tf_static"
        assert all(t.child_frame_id != frame for m in tf for t in m.transforms), f"{frame} also on /tf"
    assert ("camera_bottom_screw_frame", "camera_link") in static          # the URDF's, from the robot's TF
    assert ("camera_link", "camera_color_frame") in static                 # the driver's, from the cameras
    assert info[-1].header.frame_id == "camera_color_optical_frame"
    assert depth[-1].header.frame_id == "camera_depth_optical_frame"
    assert (depth[-1].width, depth[-1].height, depth[-1].encoding) == (64, 48, "16UC1")
    assert stamp_s(depth[-1].header.stamp) > stamp_s(depth[0].header.stamp), "the depth images stay at one sim time"
    assert "step failed" not in node.output(), node.output()[-3000:]
