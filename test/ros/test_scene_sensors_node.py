"""A scene's ``sensors:`` over DDS (issue 42 item 3): the node (in this process, inprocess_sim_node.py) publishes
sensor_msgs/Imu for the scene's IMU through a controllers file's imu_sensor_broadcaster naming it by sensor_name (as
a <ros2_control> <sensor>): the arm held still reads +g up (REP 145) in the IMU frame, no rotation. The scene's
contact_wrench and external_joint_torques sensors go the generic route, contact_sim_ros/SensorStateBroadcaster
(driver/controllers/sensor_state_broadcaster.py): a box resting on the ground reads m g up, the arm holding still
against gravity reads no external torque while its drive carries g(q). A ``sensors:`` camera (the scene has no
``cameras:``) is published on realsense2_camera's topics: the node renders it in a thread of its own when it records
(record:=, so no camera process is started: node size; the camera process renders the same scene cameras,
test/test_scene_sensors.py renders a ``sensors:`` camera bit for bit as a ``cameras:`` one and test_node_cameras.py
covers the process).

The arm of test_sensors.URDF (j1 held at 0, the ft link straight up)."""

from __future__ import annotations

import numpy as np
import yaml
import pinocchio as pin
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import Image, Imu, JointState

from inprocess_sim_node import InProcessSimNode
from ros_testing import wait_until
from test_sensors import URDF

G = 9.81


def test_a_scenes_imu_is_published_by_its_broadcaster(monkeypatch, tmp_path):
    urdf = tmp_path / "arm.urdf"
    urdf.write_text(URDF)
    scene = tmp_path / "scene.yaml"
    scene.write_text(yaml.safe_dump({
        "robot": {"urdf": str(urdf)},
        "environment": [{"name": "ground", "shape": "halfspace"}],
        "sensors": [{"name": "tip_imu", "type": "imu", "frame_id": "ft"}]}))
    controllers = tmp_path / "controllers.yaml"
    controllers.write_text(yaml.safe_dump({
        "controller_manager": {"ros__parameters": {
            "update_rate": 1000,
            "joint_state_broadcaster": {"type": "joint_state_broadcaster/JointStateBroadcaster"},
            "imu_broadcaster": {"type": "imu_sensor_broadcaster/IMUSensorBroadcaster"}}},
        "imu_broadcaster": {"ros__parameters": {"sensor_name": "tip_imu", "frame_id": "ft", "update_rate": 100.0}}}))
    sim = InProcessSimNode(monkeypatch, scene=str(scene), controllers_file=str(controllers), real_time_factor=0.0)
    try:
        imus = []
        sim.client.create_subscription(Imu, "/imu_broadcaster/imu", imus.append, 10)
        wait_until(lambda: imus and imus[-1].header.stamp.sec + 1e-9 * imus[-1].header.stamp.nanosec > 0.5, 120,
                   what="/imu_broadcaster/imu after 0.5 s of sim time")
        a, w = imus[-1].linear_acceleration, imus[-1].angular_velocity
        assert imus[-1].header.frame_id == "ft"
        np.testing.assert_allclose([a.x, a.y, a.z], [0.0, 0.0, G], atol=1e-2 * G)
        np.testing.assert_allclose([w.x, w.y, w.z], 0.0, atol=1e-3)
        assert not sim.callback_errors
    finally:
        sim.close()


BOX_MASS = 0.5          # kg
BOX = 0.1               # m, edge


def test_a_scenes_contact_wrench_and_external_torques_are_published_by_the_generic_broadcaster(monkeypatch,
                                                                                                 tmp_path):
    """The scene's ``box_contact`` (contact_wrench of the box) and ``arm_tau`` (external_joint_torques of j1, f1),
    each named by a contact_sim_ros/SensorStateBroadcaster, received over DDS after 0.5 s of sim time: the box
    resting on the ground (nothing else touches it) reads, in its frame, a force of m g up within 2 % with no
    tangential force and no torque about its centre beyond 1 % of m g (x 1 m); the arm, tilted 0.3 rad and held
    still by its drives (touching nothing), reads zero external torque on both joints while joint_states' effort of
    j1 is the model's gravity torque g(q) there (within 2 %, several N*m)."""
    urdf = tmp_path / "arm.urdf"
    urdf.write_text(URDF)
    scene = tmp_path / "scene.yaml"
    scene.write_text(yaml.safe_dump({
        "robot": {"urdf": str(urdf), "initial_positions": {"j1": 0.3}},
        "environment": [{"name": "ground", "shape": "halfspace"}],
        "objects": [{"name": "box", "shape": {"box": [BOX, BOX, BOX]}, "mass": BOX_MASS,
                     "pose": {"xyz": [1.0, 0.0, BOX / 2]}}],
        "sensors": [{"name": "box_contact", "type": "contact_wrench", "bodies": ["box"]},
                    {"name": "arm_tau", "type": "external_joint_torques", "joints": ["j1", "f1"]}]}))
    controllers = tmp_path / "controllers.yaml"
    controllers.write_text(yaml.safe_dump({
        "controller_manager": {"ros__parameters": {
            "update_rate": 1000,
            "joint_state_broadcaster": {"type": "joint_state_broadcaster/JointStateBroadcaster"},
            "contacts": {"type": "contact_sim_ros/SensorStateBroadcaster"},
            "torques": {"type": "contact_sim_ros/SensorStateBroadcaster"}}},
        "contacts": {"ros__parameters": {"sensor_name": "box_contact", "update_rate": 100.0}},
        "torques": {"ros__parameters": {"sensor_name": "arm_tau", "update_rate": 100.0}}}))
    sim = InProcessSimNode(monkeypatch, scene=str(scene), controllers_file=str(controllers), real_time_factor=0.0)
    try:
        wrenches, torques, states = [], [], []
        sim.client.create_subscription(WrenchStamped, "/contacts/contact_wrench/box", wrenches.append, 10)
        sim.client.create_subscription(JointState, "/torques/external_joint_torques", torques.append, 10)
        sim.client.create_subscription(JointState, "/joint_states", states.append, 10)

        def seconds(msgs):
            return msgs[-1].header.stamp.sec + 1e-9 * msgs[-1].header.stamp.nanosec if msgs else 0.0

        wait_until(lambda: min(seconds(wrenches), seconds(torques), seconds(states)) > 0.5, 120,
                   what="the contact wrench, external torques and joint states after 0.5 s of sim time")
        w = wrenches[-1]
        assert w.header.frame_id == "box"
        mg = BOX_MASS * G
        f, tau = w.wrench.force, w.wrench.torque
        np.testing.assert_allclose(f.z, mg, rtol=0.02)
        np.testing.assert_allclose([f.x, f.y], 0.0, atol=0.01 * mg)
        np.testing.assert_allclose([tau.x, tau.y, tau.z], 0.0, atol=0.01 * mg)

        t = torques[-1]
        assert list(t.name) == ["j1", "f1"] and not t.position and not t.velocity
        np.testing.assert_allclose(t.effort, 0.0, atol=1e-9)
        js = states[-1]
        model = sim.node.sim.model
        data = model.pin_model.createData()
        q = np.array(sim.node.sim.q)
        g = pin.computeGeneralizedGravity(model.pin_model, data, q)[model.joint_v_index[0]]
        effort = js.effort[list(js.name).index("j1")]
        assert abs(g) > 1.0
        np.testing.assert_allclose(effort, g, rtol=0.02)
        assert not sim.callback_errors
    finally:
        sim.close()


def test_a_scenes_sensors_camera_publishes_its_topics(monkeypatch, tmp_path):
    """A camera given only under ``sensors:`` (1 m over empty floor, looking straight down, 10 Hz): its color and
    depth images arrive over DDS on its realsense2_camera topics, stamped on its 10 Hz grid of sim time, the depth
    of the floor 1000 mm at every pixel."""
    scene = tmp_path / "sensors_camera.yaml"
    scene.write_text(yaml.safe_dump({
        "robot": "iiwa_wsg",
        "environment": [{"name": "ground", "shape": "halfspace"}],
        "sensors": [{"name": "floor_camera", "type": "camera", "parent": "world",
                     "pose": {"xyz": [1.0, 1.0, 1.0], "rpy": [0.0, float(np.pi / 2), 0.0]},
                     "width": 64, "height": 48, "fov": 60.0, "near": 0.1, "far": 5.0, "rate": 10.0}]}))
    sim = InProcessSimNode.from_command_line(monkeypatch, "--scene", str(scene), "--engine", "tamsi", "--namespace",
                                             "scam", "--ros-args", "-p", f"record:={tmp_path / 'bag'}")
    try:
        assert [c.name for c in sim.node.cameras.specs] == ["floor_camera"]
        ns = "/scam/floor_camera/floor_camera"
        colors, depths = [], []
        sim.client.create_subscription(Image, f"{ns}/color/image_raw", colors.append, 10)
        sim.client.create_subscription(Image, f"{ns}/depth/image_rect_raw", depths.append, 10)
        wait_until(lambda: (colors and depths and depths[-1].header.stamp.sec + depths[-1].header.stamp.nanosec > 0)
                   or not sim.node.link.stepping, 120, what=f"{ns} color and depth images after t = 0")
        color, depth = colors[-1], depths[-1]
        assert (color.width, color.height, color.encoding, len(color.data)) == (64, 48, "rgb8", 64 * 48 * 3)
        assert (depth.width, depth.height, depth.encoding) == (64, 48, "16UC1")
        assert depth.header.frame_id == "floor_camera_depth_optical_frame", depth.header.frame_id
        assert all(m.header.stamp.nanosec % 100_000_000 == 0 for m in colors + depths)      # the 10 Hz grid
        mm = np.frombuffer(bytes(depth.data), dtype="<u2").reshape(48, 64)
        assert np.all(np.abs(mm.astype(int) - 1000) <= 1), (mm.min(), mm.max())
        assert sim.node.link.stepping and not sim.callback_errors, sim.callback_errors
    finally:
        sim.close()
