"""The generic sensor route over DDS (issue 42, item 3): a user's URDF whose <ros2_control> block declares an IMU
<sensor> (typed by its state interfaces) and a controllers file with imu_sensor_broadcaster: the node (in this
process, inprocess_sim_node.py) publishes sensor_msgs/Imu on <name>/imu, read from the IMU's state interfaces; the
arm held still reads +g up (REP 145) in the IMU frame and no rotation rate, with the file's covariance."""

from __future__ import annotations

import numpy as np
import yaml
from sensor_msgs.msg import Imu

from inprocess_sim_node import InProcessSimNode
from ros_testing import wait_until
from test_sensor_seam import ROS2_CONTROL
from test_sensors import URDF

G = 9.81


def test_imu_sensor_broadcaster_publishes_the_imus_state_interfaces(monkeypatch, tmp_path):
    urdf = tmp_path / "arm.urdf"
    urdf.write_text(URDF.replace("</robot>", ROS2_CONTROL.split("<robot name=\"arm\">", 1)[1]))
    controllers = tmp_path / "controllers.yaml"
    controllers.write_text(yaml.safe_dump({
        "controller_manager": {"ros__parameters": {
            "update_rate": 1000,
            "joint_state_broadcaster": {"type": "joint_state_broadcaster/JointStateBroadcaster"},
            "imu_broadcaster": {"type": "imu_sensor_broadcaster/IMUSensorBroadcaster"}}},
        "imu_broadcaster": {"ros__parameters": {
            "sensor_name": "wrist_imu", "frame_id": "ft", "update_rate": 100.0,
            "static_covariance_linear_acceleration": [0.01, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.01]}}}))
    sim = InProcessSimNode(monkeypatch, urdf=str(urdf), controllers_file=str(controllers), real_time_factor=0.0)
    try:
        got: list = []
        sim.client.create_subscription(Imu, "/imu_broadcaster/imu", got.append, 10)
        # a message of a state after 0.5 s of sim time (the hold settled)
        wait_until(lambda: got and got[-1].header.stamp.sec + 1e-9 * got[-1].header.stamp.nanosec > 0.5, 120,
                   what="/imu_broadcaster/imu after 0.5 s of sim time")
        msg = got[-1]
        assert msg.header.frame_id == "ft"
        a, w, o = msg.linear_acceleration, msg.angular_velocity, msg.orientation
        np.testing.assert_allclose([a.x, a.y, a.z], [0.0, 0.0, G], atol=1e-2 * G)     # j1 held at 0: ft up
        np.testing.assert_allclose([w.x, w.y, w.z], 0.0, atol=1e-3)
        np.testing.assert_allclose([o.x, o.y, o.z, o.w], [0.0, 0.0, 0.0, 1.0], atol=1e-3)
        np.testing.assert_array_equal(msg.linear_acceleration_covariance, np.diag([0.01] * 3).ravel())
        assert not sim.callback_errors
    finally:
        sim.close()
