"""Simulated RGB-D cameras against geometry (contact_sim_ros/cameras): the real renderer (EGL, llvmpipe), depth and
projection against analytic truth, the stereo depth model against its parameters, a wrist camera on a moving arm,
and the scene file's camera errors."""

import pickle
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

from contact_sim_ros.cameras.depth_models import measured_depth
from contact_sim_ros.cameras.rig import CameraRig, RigScene, mimic_joint_recipes, rebuild_mimic_joints
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.sim.scene import load_scene

REPO = Path(__file__).resolve().parents[1]
DOWN = [0.0, np.pi / 2, 0.0]         # body x (the viewing direction) along world -z


def scene_with(cameras, objects=(), environment=({"name": "ground", "shape": "halfspace"},), robot=None):
    data = {"environment": list(environment), "objects": list(objects), "cameras": cameras}
    if robot:
        data["robot"] = robot
    return load_scene(data)


def camera(name="cam", xyz=(0, 0, 1), rpy=DOWN, **kw):
    entry = {"name": name, "pose": {"xyz": list(xyz), "rpy": list(rpy)}, "width": 160, "height": 120, "fov": 70.0,
             "near": 0.05, "far": 8.0}
    entry.update(kw)
    return entry


def rays_world(frame):
    """(H, W, 3) world directions of every pixel centre's ray, scaled so that their optical z is 1."""
    s = frame.spec
    v, u = np.mgrid[0:s.height, 0:s.width]
    d = np.stack([(u - s.cx) / s.fx, (v - s.cy) / s.fy, np.ones(u.shape)], axis=-1)
    return d @ frame.world_T_optical[:3, :3].T


def box_distance(points, center, half, R=np.eye(3)):
    """Unsigned distance (m) of points to the surface of a box (centre, half sides, rotation)."""
    local = (points - center) @ R
    q = np.abs(local) - half
    outside = np.linalg.norm(np.maximum(q, 0.0), axis=1)
    inside = np.minimum(np.max(q, axis=1), 0.0)
    return np.abs(outside + inside)


# ------------------------------------------------------------------------------------------- ideal depth


def test_ideal_depth_of_a_tilted_plane_is_the_ray_intersection():
    """Ground plane seen from 1.3 m, pitched 35 deg off the vertical and yawed: every pixel's depth equals the
    optical z of its ray's intersection with z = 0 within 1 mm (in fact float rounding)."""
    sc = scene_with([camera(xyz=(0.2, -0.1, 1.3), rpy=(0.0, np.radians(55), 0.4), far=20.0)])
    rig = CameraRig(sc)
    f = rig.render("cam", sc.q0)
    c = f.world_T_optical[:3, 3]
    d = rays_world(f)
    truth = -c[2] / d[..., 2]                   # ray c + s d meets z = 0 at s = -c_z / d_z; optical z = s
    seen = f.labels > 0
    assert seen.mean() > 0.95 and set(np.unique(f.labels[seen])) == {1}
    err = np.abs(f.depth[seen] - truth[seen])
    assert err.max() < 1e-3, err.max()
    assert err.max() < 1e-5                      # float32 linear depth: micrometres, not a depth-buffer's mm
    rig.release()


@pytest.mark.parametrize("distance", [0.35, 1.0, 2.7])
def test_ideal_depth_of_a_box_face(distance):
    """A camera looking along world +x at a 0.4 m cube: the face's pixels read the face's distance within 1 mm,
    and they are labelled as the box."""
    half = 0.2
    objects = [{"name": "box", "shape": {"box": [2 * half] * 3}, "mass": 1.0,
                "pose": {"xyz": [distance + half, 0.0, 1.0]}}]
    sc = scene_with([camera(xyz=(0, 0, 1.0), rpy=(0, 0, 0), fov=40.0, near=0.1)], objects)
    rig = CameraRig(sc)
    f = rig.render("cam", sc.q0)
    box = f.labels == 1
    assert box.sum() > 100
    assert np.abs(f.depth[box] - distance).max() < 1e-3
    # the face fills the pixels whose rays pass through it: |y|, |z - 1| < half at x = distance
    d = rays_world(f)
    hit = (np.abs(d[..., 1] * distance) < half - 1e-3) & (np.abs(d[..., 2] * distance) < half - 1e-3)
    assert np.all(box[hit])
    rig.release()


def test_known_points_project_where_K_predicts():
    """Small spheres (r 12 mm) at known world points: each one's labelled-pixel centroid lies within 0.5 px of
    K [R|t] p (the camera pose from the scene, not from the renderer)."""
    points = np.array([[0.0, 0.0, 0.0], [0.25, 0.12, 0.05], [-0.15, 0.1, -0.1], [0.1, -0.28, 0.2]])
    objects = [{"name": f"s{i}", "shape": {"sphere": 0.012}, "mass": 0.01, "pose": {"xyz": list(p)}}
               for i, p in enumerate(points)]
    rpy = (0.1, np.radians(80), 0.3)
    sc = scene_with([camera(xyz=(0.05, 0.02, 1.2), rpy=rpy, width=640, height=480, fov=60.0)], objects,
                    environment=())
    spec = sc.cameras[0]
    rig = CameraRig(sc)
    f = rig.render("cam", sc.q0)
    T = (pin.SE3(pin.rpy.rpyToMatrix(*rpy), np.array([0.05, 0.02, 1.2])) * pin.SE3(
        pin.rpy.rpyToMatrix(-np.pi / 2, 0, -np.pi / 2), np.zeros(3))).homogeneous
    np.testing.assert_allclose(f.world_T_optical, T, atol=1e-12)
    for i, p in enumerate(points):
        pc = np.linalg.inv(T) @ np.append(p, 1.0)
        uv = (spec.K @ pc[:3])[:2] / pc[2]
        v, u = np.nonzero(f.labels == i + 1)
        assert len(u) > 50
        centroid = np.array([u.mean(), v.mean()])
        assert np.linalg.norm(centroid - uv) < 0.5, (i, centroid, uv)
    rig.release()


def test_point_cloud_in_the_world_lies_on_the_surfaces():
    """A tilted camera over the ground, a rotated box and a cylinder: every point of the cloud, moved into the
    world by the camera pose, lies on the surface of the entity its pixel is labelled with, within 2 mm."""
    R_box = pin.rpy.rpyToMatrix(0.0, 0.0, 0.5)
    objects = [{"name": "box", "shape": {"box": [0.2, 0.3, 0.1]}, "mass": 1.0,
                "pose": {"xyz": [0.1, 0.05, 0.05], "rpy": [0.0, 0.0, 0.5]}},
               {"name": "can", "shape": {"cylinder": [0.04, 0.2]}, "mass": 0.3, "pose": {"xyz": [-0.15, -0.2, 0.1]}}]
    sc = scene_with([camera(xyz=(-0.6, -0.4, 0.9), rpy=(0.0, np.radians(45), np.radians(35)), width=320,
                            height=240, fov=60.0)], objects)
    rig = CameraRig(sc)
    f = rig.render("cam", sc.q0)
    names = f.label_names
    assert {names[k] for k in np.unique(f.labels) if k} == {"box", "can", "ground"}
    pts = f.points_world()
    labels = f.labels[f.depth > 0]
    by = {names[k]: labels == k for k in np.unique(labels)}
    assert np.abs(pts[by["ground"], 2]).max() < 2e-3
    assert box_distance(pts[by["box"]], np.array([0.1, 0.05, 0.05]), np.array([0.1, 0.15, 0.05]),
                        R_box).max() < 2e-3
    can = pts[by["can"]] - np.array([-0.15, -0.2, 0.1])
    radial = np.abs(np.hypot(can[:, 0], can[:, 1]) - 0.04)
    cap = np.abs(np.abs(can[:, 2]) - 0.1)
    assert np.minimum(radial, cap).max() < 2e-3
    assert by["box"].sum() > 500 and by["can"].sum() > 100
    rig.release()


# --------------------------------------------------------------------------------------- stereo depth model


def stereo_plane(distance, seed=7, fov=87.0, **model):
    depth_model = {"type": "d435", **model}
    sc = scene_with([camera(xyz=(0, 0, distance), width=640, height=480, fov=fov, far=12.0,
                            depth_model=depth_model, seed=seed)])
    return sc


# the D435's depth imagers: 87 deg horizontal field of view (Intel D400 datasheet) -> focal length at 640 px
D435_DEPTH_FOCAL_640 = 320.0 / np.tan(np.radians(87.0 / 2))     # 337.2 px


@pytest.mark.parametrize("distance,fov", [(0.5, 87.0), (1.0, 87.0), (2.0, 87.0), (3.5, 87.0), (2.0, 69.4)])
def test_stereo_noise_std_grows_with_the_square_of_distance(distance, fov):
    """A plane facing the camera: std(measured - true) = sqrt((z^2 s / (f B))^2 + q^2 / 12) within 4 % (s 0.08 px,
    B 50 mm, f the depth imager's focal length: 337.2 px at 640 px from its 87 deg field of view, also for a camera
    with the color imager's 69.4 deg (fx 462 px): the D435's noise comes from its depth imagers; q the 1 mm depth
    unit); no depth in the band the second imager cannot see (its width the disparity in the rendered image's
    pixels, fx B / z)."""
    sc = stereo_plane(distance, fov=fov)
    rig = CameraRig(sc)
    f = rig.render("cam", sc.q0, t=0.25)
    spec = f.spec
    assert np.all(f.exact_depth > 0)
    assert spec.depth_model.focal(spec) == pytest.approx(337.2, abs=0.05)
    fb = D435_DEPTH_FOCAL_640 * 0.050
    valid = f.depth > 0
    sigma = distance ** 2 * 0.08 / fb
    expected = np.sqrt(sigma ** 2 + 1e-6 / 12)
    err = (f.depth[valid] - distance)
    assert abs(err.std() / expected - 1) < 0.04, (err.std(), expected)
    assert abs(err.mean()) < 0.1 * expected + 1e-4
    # quantised to the 1 mm depth unit
    assert np.allclose(f.depth[valid] * 1000, np.round(f.depth[valid] * 1000), atol=1e-3)
    # the left band of width ~ disparity has no depth (the second imager, 50 mm to the right, does not see it)
    disparity = spec.fx * 0.050 / distance
    band = int(np.ceil(disparity - 0.5))
    assert not valid[:, :band - 1].any()
    assert valid[:, band + 2:].mean() > 0.999
    rig.release()


def test_stereo_depth_is_reproducible_and_range_limited():
    sc = stereo_plane(1.2, seed=3)
    rig = CameraRig(sc)
    a = rig.render("cam", sc.q0, t=0.5).depth
    b = rig.render("cam", sc.q0, t=0.5).depth
    c = rig.render("cam", sc.q0, t=0.501).depth
    assert np.array_equal(a, b)                  # same seed, same state: the same image
    assert not np.array_equal(a, c)              # the next frame draws new noise
    spec = sc.cameras[0]
    other = type(spec)(**{**spec.__dict__, "seed": 4})
    exact = rig.render("cam", sc.q0, t=0.5).exact_depth
    assert not np.array_equal(measured_depth(other, exact, 0.5), a)
    near = stereo_plane(0.2)                     # below the D435's min-Z 0.28 m: no depth at all
    rig2 = CameraRig(near)
    assert not rig2.render("cam", near.q0).depth.any()
    rig.release()
    rig2.release()


def test_stereo_occlusion_shadow_beside_a_box():
    """A box on the ground seen from above: the ground just left of the box (in the image) is hidden from the
    second imager, and has no depth over a width of the disparity difference."""
    objects = [{"name": "box", "shape": {"box": [0.2, 0.2, 0.4]}, "mass": 1.0, "pose": {"xyz": [0, 0, 0.2]}}]
    sc = scene_with([camera(xyz=(0, 0, 1.2), width=320, height=240, fov=87.0,
                            depth_model={"type": "d435", "subpixel": 0.0})], objects)
    rig = CameraRig(sc)
    f = rig.render("cam", sc.q0)
    row = f.spec.height // 2
    labels, depth = f.labels[row], f.depth[row]
    box_cols = np.nonzero(labels == 1)[0]
    right_edge = box_cols.max()
    fb = f.spec.fx * 0.05
    shadow = fb / 0.8 - fb / 1.2                 # disparity of the box top minus that of the ground (px)
    # the second imager sits 50 mm to the right (optical +x): the ground just LEFT of the box is hidden from it,
    # the ground right of the box is seen
    left_edge = box_cols.min()
    hidden = np.nonzero((labels == 2) & (depth == 0))[0]
    hidden = hidden[(hidden < left_edge) & (hidden > left_edge - 3 * shadow)]
    assert abs(len(hidden) - shadow) <= 2, (len(hidden), shadow)
    assert (depth[right_edge + 1: right_edge + 20] > 0).all()
    assert np.allclose(depth[box_cols], 0.8, atol=1e-3)
    rig.release()


# ------------------------------------------------------------------------------------------ wrist camera


@pytest.mark.parametrize("scene_file, robot, link, joints, finger", [
    ("iiwa_wsg_cameras.yaml", "iiwa_wsg", "iiwa_link_7", ("iiwa_joint_1", "iiwa_joint_6"), "wsg_finger_left"),
    ("franka_cameras.yaml", "franka", "panda_hand", ("panda_joint1", "panda_joint6"), "panda_leftfinger")])
def test_shipped_wrist_camera_view_moves_with_the_arm(scene_file, robot, link, joints, finger):
    """The wrist camera of a shipped scene (its mount and field of view, 320x240) and a ball 0.35 m ahead of it in
    the start pose: after the arm moves, the ball's pixel centroid is where the projection through the new link
    pose predicts (Pinocchio's kinematics, independent of the renderer), within 1 px, and it moved by many pixels;
    the gripper's fingers are in view."""
    shipped = yaml.safe_load((REPO / "scenes" / scene_file).read_text())
    cam = {**next(c for c in shipped["cameras"] if c["name"] == "wrist_camera"), "width": 320, "height": 240,
           "depth_model": "ideal"}
    sc = scene_with([cam], robot=robot)
    model = sc.model
    data = pin.Data(model.pin_model)
    frame = model.pin_model.getFrameId(link)
    pin.framesForwardKinematics(model.pin_model, data, sc.q0)
    rig = CameraRig(sc)
    spec = rig.camera("wrist_camera")
    ball_xyz = (data.oMf[frame] * spec.optical_pose).act(np.array([0.0, 0.0, 0.35]))
    rig.release()
    objects = [{"name": "ball", "shape": {"sphere": 0.02}, "mass": 0.05, "pose": {"xyz": ball_xyz.tolist()}}]
    sc = scene_with([cam], objects, robot=robot)
    model = sc.model
    data = pin.Data(model.pin_model)
    frame = model.pin_model.getFrameId(link)
    rig = CameraRig(sc)
    ball = 1 + [e.name for e in rig.visual.labels].index("ball")
    centroids = []
    for dq in (0.0, 0.1, -0.08):
        q = sc.q0.copy()
        for joint in joints:
            q[model.joint_q_index[model.joint_index(joint)]] += dq
        f = rig.render("wrist_camera", q)
        pin.framesForwardKinematics(model.pin_model, data, q)
        p = (data.oMf[frame] * spec.optical_pose).actInv(ball_xyz)
        uv = (spec.K @ p)[:2] / p[2]
        v, u = np.nonzero(f.labels == ball)
        assert len(u) > 200, dq
        centroid = np.array([u.mean(), v.mean()])
        assert np.linalg.norm(centroid - uv) < 1.0, (dq, centroid, uv)
        centroids.append(centroid)
        names = {f.label_names[k] for k in np.unique(f.labels)}      # robot links are labelled by link name
        assert finger in names and "ground" in names, names
    assert np.linalg.norm(centroids[1] - centroids[0]) > 20 and np.linalg.norm(centroids[2] - centroids[0]) > 20
    rig.release()


# ------------------------------------------------------------------ the rig's scene crossing to another process

MIMIC_URDF = """<?xml version="1.0"?>
<robot name="mimics">
  <link name="base"/>
  <link name="a"><inertial><mass value="1"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/>
    </inertial></link>
  <link name="b"><inertial><mass value="1"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/>
    </inertial></link>
  <link name="c"><inertial><mass value="1"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/>
    </inertial></link>
  <link name="d"><inertial><mass value="1"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/>
    </inertial></link>
  <link name="e"><inertial><mass value="1"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/>
    </inertial></link>
  <link name="f"><inertial><mass value="1"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/>
    </inertial></link>
  <joint name="hinge" type="revolute"><parent link="base"/><child link="a"/><axis xyz="0 0 1"/>
    <limit lower="-2" upper="2" velocity="1" effort="1"/></joint>
  <joint name="hinge_mimic" type="revolute"><parent link="a"/><child link="b"/><origin xyz="0.3 0 0"/>
    <axis xyz="0.6 0 -0.8"/><limit lower="-2" upper="2" velocity="1" effort="1"/>
    <mimic joint="hinge" multiplier="-0.5" offset="0.1"/></joint>
  <joint name="slide" type="prismatic"><parent link="b"/><child link="c"/><origin xyz="0.2 0 0"/><axis xyz="1 0 0"/>
    <limit lower="0" upper="0.1" velocity="1" effort="1"/></joint>
  <joint name="slide_mimic" type="prismatic"><parent link="b"/><child link="d"/><origin xyz="0 0.2 0"/>
    <axis xyz="0 -1 0"/><limit lower="0" upper="0.2" velocity="1" effort="1"/>
    <mimic joint="slide" multiplier="2.0" offset="0.01"/></joint>
  <joint name="wheel" type="continuous"><parent link="d"/><child link="e"/><axis xyz="0 1 0"/></joint>
  <joint name="wheel_mimic" type="continuous"><parent link="e"/><child link="f"/><origin xyz="0 0 0.1"/>
    <axis xyz="0 1 0"/><mimic joint="wheel" multiplier="3.0" offset="-0.2"/></joint>
</robot>
"""


def _joint_sizes(pin_model):
    return [(j.shortname(), j.id, j.idx_q, j.idx_v, j.idx_vExtended, j.nq, j.nv, j.nvExtended)
            for j in pin_model.joints]


def _frame_poses(pin_model, q):
    data = pin.Data(pin_model)
    pin.framesForwardKinematics(pin_model, data, q)
    return np.stack([M.homogeneous for M in data.oMf])


def test_mimic_joints_of_every_kind_cross_a_pickle_with_their_kinematics():
    """Pinocchio 4.1 pickles mimic joints with their sizes unset (nvExtended -1; kinematics on the loaded model
    crashed the process): rebuilt after loading, a revolute mimic on an unaligned axis with a negative multiplier
    and an offset, a prismatic one on -y and a continuous one have their sizes, indices and frame poses back."""
    model = pin.buildModelFromXML(MIMIC_URDF, mimic=True)
    assert len(model.mimicking_joints) == 3
    loaded = pickle.loads(pickle.dumps(model))
    rebuild_mimic_joints(loaded, mimic_joint_recipes(model))
    assert _joint_sizes(loaded) == _joint_sizes(model)
    for _ in range(5):
        q = pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq))
        np.testing.assert_array_equal(_frame_poses(loaded, q), _frame_poses(model, q))


@pytest.mark.process
def test_a_franka_camera_scene_crosses_to_the_camera_process_and_renders_the_same_image():
    """Issue 44 (finding 1): the RigScene that the camera process receives (pickled) of scenes/franka_cameras.yaml
    (the Panda's second finger is a mimic joint) has the model's joints as they were and renders the wrist camera's
    image of the same state exactly as the rig made from the scene in this process."""
    sc = load_scene(str(REPO / "scenes" / "franka_cameras.yaml"))
    parts = pickle.loads(pickle.dumps(RigScene.of(sc)))
    original = sc.model.pin_model
    assert len(original.mimicking_joints) == 1
    assert _joint_sizes(parts.pin_model) == _joint_sizes(original)
    q = sc.q0.copy()
    q[sc.model.joint_q_index[sc.model.joint_index("panda_finger_joint1")]] = 0.03     # fingers apart
    np.testing.assert_array_equal(_frame_poses(parts.pin_model, q), _frame_poses(original, q))
    here = CameraRig(sc)
    expected = here.render("wrist_camera", q, 0.5)
    here.release()
    there = CameraRig(parts)
    got = there.render("wrist_camera", q, 0.5)
    there.release()
    finger = 1 + [e.name for e in there.visual.labels].index("panda_rightfinger")    # the mimic joint's link
    assert np.count_nonzero(expected.labels == finger) > 100
    for image in ("color", "depth", "labels"):
        np.testing.assert_array_equal(getattr(got, image), getattr(expected, image))


# ------------------------------------------------------------------------------------------------- errors


BAD = [
    ({"parent": "no_such_link"}, "unknown parent frame 'no_such_link'"),
    ({"width": 0}, "width must be an integer from 1 to 8192"),
    ({"height": 9000}, "height must be an integer from 1 to 8192"),
    ({"fov": 0.0}, "fov (horizontal field of view) must be > 0 and < 180 deg"),
    ({"fov": 180.0}, "fov (horizontal field of view) must be > 0 and < 180 deg"),
    ({"near": 2.0, "far": 1.0}, "near (2 m) must be below far (1 m)"),
    ({"near": 1.0, "far": 1.0}, "near (1 m) must be below far (1 m)"),
    ({"streams": ["color", "infra1"]}, "unknown stream 'infra1'"),
    ({"depth_model": "kinect"}, "unknown depth model 'kinect'"),
    ({"depth_model": {"type": "d435", "depth_fov": 180.0}}, "depth_fov (the depth imager's horizontal field of view) "
                                                            "must be > 0 and < 180 deg"),
    ({"fx": 500.0}, "give either 'fov'"),
]


@pytest.mark.parametrize("change,message", BAD, ids=[m.split()[0] + str(i) for i, (_, m) in enumerate(BAD)])
def test_bad_camera_is_an_error_naming_the_camera_and_the_file(tmp_path, change, message):
    import yaml
    entry = camera(name="top_cam")
    entry.update(change)
    path = tmp_path / "bad_cameras.yaml"
    path.write_text(yaml.safe_dump({"environment": [{"name": "ground", "shape": "halfspace"}], "cameras": [entry]}))
    with pytest.raises(ConfigError) as info:
        load_scene(str(path))
    msg = str(info.value)
    assert str(path) in msg and "top_cam" in msg and message in msg, msg
    assert "\n" not in msg


def test_camera_rate_above_the_step_rate_is_an_error(tmp_path):
    import yaml
    path = tmp_path / "fast_camera.yaml"
    path.write_text(yaml.safe_dump({"environment": [{"name": "ground", "shape": "halfspace"}],
                                    "cameras": [camera(name="fast_cam", rate=2000.0)]}))
    sc = load_scene(str(path))
    with pytest.raises(ConfigError) as info:
        CameraRig(sc, time_step=1e-3)
    msg = str(info.value)
    assert str(path) in msg and "fast_cam" in msg and "above the step rate 1000 Hz" in msg, msg
    sc.cameras[0].check_rate(4e-4)               # 2500 Hz stepping: fine
    assert sc.cameras[0].decimation(4e-4) == 1


def test_camera_on_an_object_moves_with_it():
    """A camera parented to a free box (looking down from 0.5 m above its origin) sees the box's top 0.475 m away
    in the middle of the image and the ground at the box's height + 0.5 m around it, wherever the box is moved."""
    objects = [{"name": "carrier", "shape": {"box": [0.05, 0.05, 0.05]}, "mass": 0.2, "pose": {"xyz": [0, 0, 0.3]}}]
    sc = scene_with([camera(parent="carrier", xyz=(0, 0, 0.5), near=0.3)], objects)
    rig = CameraRig(sc)
    body = sc.model.free_body("carrier")
    for xyz in ((0.0, 0.0, 0.3), (0.4, -0.2, 1.1)):
        q = sc.q0.copy()
        q[body.q_slice][:3] = xyz
        f = rig.render("cam", q)
        np.testing.assert_allclose(f.world_T_optical[:3, 3], np.add(xyz, (0, 0, 0.5)), atol=1e-12)
        ground, carrier = f.labels == 2, f.labels == 1
        assert (ground | carrier).all() and carrier[60, 80] and ground[0, 0]
        assert np.abs(f.depth[ground] - (xyz[2] + 0.5)).max() < 1e-5
        assert np.abs(f.depth[carrier] - 0.475).max() < 1e-5
    rig.release()


# ------------------------------------------------------------------------------------ contact-sim run --camera


def test_run_writes_the_camera_frames_as_png(tmp_path, capsys):
    """``contact-sim run scenes/franka_cameras.yaml --camera table_camera``: 15 Hz at 1 ms steps is an image every
    round(66.7) = 67 steps, so 0.21 s writes 3 frames stamped 0.067, 0.134, 0.201 s; the table camera 1.2 m above the floor sees the table top (0.2 m
    high) at the image centre 1.0 m away in its 16-bit millimetre depth (D435 noise: within 10 mm), labelled
    'table' in labels.json; color is RGB 640x480. An unknown camera is exit 2 naming the scene's cameras."""
    from PIL import Image
    import json
    from contact_sim_ros.cli import main
    out = tmp_path / "frames"
    assert main(["run", str(REPO / "scenes" / "franka_cameras.yaml"), "--duration", "0.21", "--camera",
                 "table_camera", "--frames-dir", str(out)]) == 0
    folder = out / "table_camera"
    rows = (folder / "frames.csv").read_text().split()[1:]
    times = [float(r.split(",")[1]) for r in rows]
    assert times == pytest.approx([0.067, 0.134, 0.201], abs=1e-9)
    color = np.asarray(Image.open(folder / "color_000002.png"))
    depth = np.asarray(Image.open(folder / "depth_000002.png"))
    labels = np.asarray(Image.open(folder / "labels_000002.png"))
    assert color.shape == (480, 640, 3) and color.dtype == np.uint8
    assert depth.dtype == np.uint16 and abs(int(depth[240, 320]) - 1000) <= 10, depth[240, 320]
    names = json.loads((out / "labels.json").read_text())
    assert names[str(int(labels[240, 320]))]["name"] == "table"
    assert main(["run", str(REPO / "scenes" / "franka_cameras.yaml"), "--duration", "0.01", "--camera", "eye",
                 "--frames-dir", str(out)]) == 2
    assert "unknown camera 'eye'" in capsys.readouterr().err


def test_depth_imager_focal_length_from_its_field_of_view():
    """The stereo model's focal length (px) at the camera's width: the D435's depth imagers' 87 deg (337.2 px at
    640 px, not the 462 px of a camera given the color imager's 69.4 deg), the D415's 65 deg, ``focal_px`` over
    ``depth_fov``, and the camera's fx for a ``stereo`` model given neither."""
    def focal(depth_model, fov=69.4, width=640):
        spec = scene_with([camera(width=width, height=480, fov=fov, depth_model=depth_model)]).cameras[0]
        return spec.depth_model.focal(spec), spec.fx
    assert focal("d435")[0] == pytest.approx(337.2, abs=0.05) and focal("d435")[1] == pytest.approx(462.0, abs=0.5)
    assert focal("d435", width=1280)[0] == pytest.approx(674.4, abs=0.1)
    assert focal("d415")[0] == pytest.approx(320.0 / np.tan(np.radians(32.5)))
    assert focal({"type": "d435", "focal_px": 400.0})[0] == 400.0
    assert focal({"type": "d435", "depth_fov": 69.4}) == pytest.approx(focal("ideal"))
    assert focal("stereo") == pytest.approx((focal("ideal")[1],) * 2)
