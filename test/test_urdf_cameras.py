"""Cameras a robot's URDF already has (issue 28: realsense2_description's ``sensor_d435`` macro puts
camera_link and, with use_nominal_extrinsics, the color/depth frames and their optical frames in the robot
description): a scene camera of that name is rendered from the URDF's frames, and its TF frames get exactly one
publisher (the node's robot TF for the URDF's, the camera publisher for the rest). In process: the TF message
list the node publishes (ros/frames.py tf_edges + camera_publisher.camera_static_transforms), real renderer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from contact_sim_ros.cameras.rig import CameraRig
from contact_sim_ros.cameras.spec import BODY_TO_OPTICAL
from contact_sim_ros.errors import ContactSimError
from contact_sim_ros.ros.camera_topics import camera_static_transforms
from contact_sim_ros.ros.frames import tf_edges
from contact_sim_ros.sim.simulator import Simulator

XACRO = Path(__file__).parent / "data" / "ur5_d435.urdf.xacro"
FRAMES = ("camera_link", "camera_color_frame", "camera_depth_frame", "camera_color_optical_frame",
          "camera_depth_optical_frame")
CAMERA = {"name": "camera", "width": 64, "height": 48, "fov": 69.4, "rate": 10.0}


def _sim(nominal: bool, camera=None) -> Simulator:
    return Simulator({"robot": {"urdf": f"{XACRO} nominal_extrinsics:={'true' if nominal else 'false'}"},
                      "cameras": [camera or CAMERA]}, engine="tamsi", time_step=0.002)


def _published_tree(sim, spec) -> dict:
    """child frame -> [(parent frame, parent_T_child)] over every transform the node publishes (the robot's TF
    edges and the camera's static TF)."""
    pin.framesForwardKinematics(sim.model.pin_model, sim.pin_data, sim.q)
    oMf = sim.pin_data.oMf
    tree: dict = {}
    for e in tf_edges(sim.model, "", "world"):
        tree.setdefault(e.child, []).append((e.parent, oMf[int(e.parent_frame)].actInv(oMf[int(e.child_frame)])))
    for ts in camera_static_transforms(spec, spec.parent, "", sim.t):
        tr, r = ts.transform.translation, ts.transform.rotation
        M = pin.XYZQUATToSE3(np.array([tr.x, tr.y, tr.z, r.x, r.y, r.z, r.w]))
        tree.setdefault(ts.child_frame_id, []).append((ts.header.frame_id, M))
    return tree


def _world_pose(tree: dict, frame: str) -> pin.SE3:
    M = pin.SE3.Identity()
    while frame != "world":
        (parent, parent_T_child), = tree[frame]
        M, frame = parent_T_child * M, parent
    return M


@pytest.mark.parametrize("nominal", [True, False], ids=["nominal_extrinsics", "camera_link_only"])
def test_a_urdf_camera_is_rendered_where_tf_puts_its_optical_frame_and_no_frame_is_published_twice(nominal):
    sim = _sim(nominal)
    spec = sim.scene.cameras[0]
    assert spec.urdf_frames == (FRAMES if nominal else ("camera_link",))
    # the URDF's depth optical frame is 15 mm beside the color one (rendered from): depth is labelled with the latter
    assert spec.depth_in_color_frame == nominal
    tree = _published_tree(sim, spec)
    twice = {child: [p for p, _ in parents] for child, parents in tree.items() if len(parents) > 1}
    assert not twice, f"frames with two publishers: {twice}"
    assert set(FRAMES) <= set(tree)
    pm, data = sim.model.pin_model, sim.pin_data
    urdf_optical = data.oMf[pm.getFrameId("camera_color_optical_frame")] if nominal else \
        data.oMf[pm.getFrameId("camera_link")] * BODY_TO_OPTICAL
    rig = CameraRig(sim.scene)
    try:
        rendered_from = rig.camera_pose("camera", sim.q)
        frame = rig.render_simulator(sim, "camera")
    finally:
        rig.release()
    for optical in ("camera_color_optical_frame", "camera_depth_optical_frame"):
        tf_pose = _world_pose(tree, optical)
        if optical == "camera_color_optical_frame" or not nominal:     # one viewpoint (the URDF's depth frame is
            np.testing.assert_allclose(tf_pose.homogeneous, rendered_from, atol=1e-12)     # 15 mm off the color)
        else:
            assert np.linalg.norm(tf_pose.translation - rendered_from[:3, 3]) == pytest.approx(0.015, abs=1e-9)
    np.testing.assert_allclose(rendered_from, urdf_optical.homogeneous, atol=1e-12)
    # looking along tool0's z: the optical axis is the flange's axis
    tool0 = data.oMf[pm.getFrameId("tool0")]
    np.testing.assert_allclose(rendered_from[:3, 2], tool0.rotation[:, 2], atol=1e-12)
    assert frame.world_T_optical.tolist() == rendered_from.tolist()


def test_a_urdf_camera_given_a_parent_or_pose_is_refused():
    with pytest.raises(ContactSimError, match=r"cameras\[0\] \(camera\): the robot's URDF already mounts this camera "
                                              r"\(link 'camera_link'\): remove 'parent' and 'pose'"):
        _sim(True, {**CAMERA, "parent": "tool0", "pose": {"xyz": [0, 0, 0.1]}})
