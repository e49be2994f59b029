"""A scene's ``sensors:`` over DDS (issue 42 item 3): the node (in this process, inprocess_sim_node.py) publishes
sensor_msgs/Imu for the scene's IMU through a controllers file's imu_sensor_broadcaster naming it by sensor_name (as
a <ros2_control> <sensor>): the arm held still reads +g up (REP 145) in the IMU frame, no rotation. (A ``sensors:``
camera is one of the scene's cameras, which the node renders in their process: test/test_scene_sensors.py renders it
bit for bit as a ``cameras:`` one; test_node_cameras.py covers the node's cameras.)

The arm of test_sensors.URDF (j1 held at 0, the ft link straight up)."""

from __future__ import annotations

import numpy as np
import yaml
from sensor_msgs.msg import Imu

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
