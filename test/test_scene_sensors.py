"""A scene's sensors through the sensor seam (issue 42 item 3): the scene key ``sensors:`` (a list of
``{name, type, <parameters>}``, the parameters as a <ros2_control> <sensor>'s <param>s) is parsed by the sensor
registry (sensors/base.scene_sensors), as are the ``cameras:`` entries (``camera`` sensors): the cameras the node
renders are the scene's camera sensors, a ``sensors:`` camera renders as a ``cameras:`` one, and a force/torque or
IMU sensor of the scene is named by a controllers file's broadcaster as a <ros2_control> <sensor> is
(driver/world.py). A bad entry is a ConfigError naming the scene file and the entry.

The arm of test_sensors.URDF: base - j1 (revolute about y, 0.5 m up) - l1 - fixed - ft (0.4 m further) - fixed -
palm - f1 (prismatic) - finger1. No ROS.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import yaml

from contact_sim_ros.cameras.rig import CameraRig
from contact_sim_ros.clients.inprocess_link import InProcessTransports
from contact_sim_ros.driver.node_config import NodeConfig
from contact_sim_ros.driver.world import World
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.sensors.camera import Camera
from contact_sim_ros.sensors.force_torque import ForceTorque
from contact_sim_ros.sensors.imu import Imu
from contact_sim_ros.sim.scene import load_scene
from test_sensor_seam import ROS2_CONTROL
from test_sensors import URDF

G = 9.81
Q0 = 0.3                                # rad, j1's start (the arm tilted: the IMU and F/T read a rotated g)
SUBTREE_MASS = 0.3 + 1.2 + 0.2          # ft + palm + finger1 (kg): what the l1 -> ft joint carries
DOWN = [0.0, np.pi / 2, 0.0]            # body x (the viewing direction) along world -z
CAMERA = {"pose": {"xyz": [1.0, 0.0, 1.2], "rpy": DOWN}, "width": 80, "height": 60, "fov": 70.0, "near": 0.05,
          "far": 8.0}
SENSORS = [{"name": "tip_imu", "type": "imu", "frame_id": "ft"},
           {"name": "tip_ft", "type": "force_torque", "parent_link": "l1", "child_link": "ft", "frame_id": "ft"},
           {"name": "above_b", "type": "camera", "parent": "world", **CAMERA}]


@pytest.fixture()
def urdf(tmp_path):
    path = tmp_path / "arm.urdf"
    path.write_text(URDF)
    return path


def write_scene(tmp_path, urdf, sensors=SENSORS, cameras=({"name": "above_a", "parent": "world", **CAMERA},)):
    data = {"robot": {"urdf": str(urdf), "initial_positions": {"j1": Q0}},
            "environment": [{"name": "ground", "shape": "halfspace"}],
            "cameras": list(cameras), "sensors": sensors}
    path = tmp_path / "scene.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_scenes_cameras_and_sensors_are_the_registrys_sensors(tmp_path, urdf):
    """``cameras:`` then ``sensors:``, each built by its registered type; the scene's cameras (what the node and its
    render process render) are its camera sensors', the ``sensors:`` camera included."""
    scene = load_scene(str(write_scene(tmp_path, urdf)))
    assert [(s.name, type(s)) for s in scene.sensors] == [
        ("above_a", Camera), ("tip_imu", Imu), ("tip_ft", ForceTorque), ("above_b", Camera)]
    assert [c.name for c in scene.cameras] == ["above_a", "above_b"]
    assert scene.cameras[0] is scene.sensors[0].camera and scene.cameras[1] is scene.sensors[3].camera


def test_a_sensors_camera_renders_as_a_cameras_one(tmp_path, urdf):
    """The same camera declared under ``sensors:`` and under ``cameras:`` renders the same frame, bit for bit (the
    ground 1.2 m below: every pixel that sees it is 1.2 m deep)."""
    scene = load_scene(str(write_scene(tmp_path, urdf)))
    rig = CameraRig(scene)
    try:
        a, b = rig.render("above_a", scene.q0), rig.render("above_b", scene.q0)
        np.testing.assert_array_equal(a.depth, b.depth)
        np.testing.assert_array_equal(a.color, b.color)
        ground = a.depth > 0
        assert ground.mean() > 0.9
        np.testing.assert_allclose(a.depth[ground], 1.2, atol=1e-3)
    finally:
        rig.release()


def world_of(scene_path, tmp_path, broadcasters: dict, urdf_params=None, transports=None):
    controllers = tmp_path / "controllers.yaml"
    names = {n: {"type": t} for n, (t, _) in broadcasters.items()}
    data = {"controller_manager": {"ros__parameters": {"update_rate": 1000, **names}}}
    data.update({n: {"ros__parameters": p} for n, (_, p) in broadcasters.items()})
    controllers.write_text(yaml.safe_dump(data))
    cfg = NodeConfig.from_mapping({"scene": str(scene_path), "controllers_file": str(controllers),
                                   "engine": "semi_implicit", "time_step": 1e-3, "real_time_factor": 0.0})
    transports = transports if transports is not None else InProcessTransports()
    return World.build(cfg, transports, counters=transports.counters)


def test_a_scenes_imu_and_force_torque_sensors_are_read_by_their_broadcasters(tmp_path, urdf):
    """A controllers file's imu_sensor_broadcaster and force_torque_sensor_broadcaster name the scene's sensors by
    sensor_name (as a <ros2_control> <sensor>): the arm held still at j1 = 0.3 rad, the IMU reads g
    (-sin q, 0, cos q) in its frame (REP 145) and no rotation; the F/T sensor carries the weight of the 1.7 kg below
    it, |F| = m g."""
    world = world_of(write_scene(tmp_path, urdf), tmp_path, {
        "imu_broadcaster": ("imu_sensor_broadcaster/IMUSensorBroadcaster", {"sensor_name": "tip_imu",
                                                                            "frame_id": "ft"}),
        "ft_broadcaster": ("force_torque_sensor_broadcaster/ForceTorqueSensorBroadcaster",
                           {"sensor_name": "tip_ft", "frame_id": "ft"})})
    for _ in range(1500):
        assert world.loop.step_now().ok
    imu, ft = (world.controller_manager.controllers[n] for n in ("imu_broadcaster", "ft_broadcaster"))
    assert imu.state_interfaces()[0] == "tip_imu/orientation.x"
    q = world.sim.joint_positions()[0]
    assert abs(q - Q0) < 1e-2
    r = imu.reading()
    np.testing.assert_allclose(r[7:10], [-G * np.sin(q), 0.0, G * np.cos(q)], atol=1e-3 * G)
    np.testing.assert_allclose(r[4:7], 0.0, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(ft.reading()[:3]), SUBTREE_MASS * G, rtol=1e-3)


def test_a_scenes_contact_wrench_and_external_torques_reach_the_generic_broadcaster_in_process(tmp_path, urdf):
    """contact_sim_ros/SensorStateBroadcaster names the scene's contact_wrench (a 0.5 kg box on the ground) and
    external_joint_torques (the arm's joints) sensors: in sim time, through the in-process transport, the box's
    WrenchStamped (``contacts/contact_wrench/box``, frame ``box``) reads m g up (0.2 %) and no torque, the arm's
    JointState (``torques/external_joint_torques``) zero on j1, f1; its claimed state interfaces are the sensors'
    (``box/force.x`` ..., ``j1/external_effort``); naming an IMU is a ConfigError pointing to its broadcaster."""
    mass = 0.5
    scene = tmp_path / "scene.yaml"
    scene.write_text(yaml.safe_dump({
        "robot": {"urdf": str(urdf), "initial_positions": {"j1": Q0}},
        "environment": [{"name": "ground", "shape": "halfspace"}],
        "objects": [{"name": "box", "shape": {"box": [0.1, 0.1, 0.1]}, "mass": mass,
                     "pose": {"xyz": [1.0, 0.0, 0.05]}}],
        "sensors": [{"name": "box_contact", "type": "contact_wrench", "bodies": ["box"]},
                    {"name": "arm_tau", "type": "external_joint_torques", "joints": ["j1", "f1"]},
                    {"name": "tip_imu", "type": "imu", "frame_id": "ft"}]}))
    generic = "contact_sim_ros/SensorStateBroadcaster"
    transports = InProcessTransports()
    world = world_of(scene, tmp_path, {"contacts": (generic, {"sensor_name": "box_contact"}),
                                       "torques": (generic, {"sensor_name": "arm_tau"})}, transports=transports)
    cm = world.controller_manager
    assert cm.controllers["contacts"].state_interfaces()[:2] == ["box/force.x", "box/force.y"]
    assert cm.controllers["torques"].state_interfaces() == ["j1/external_effort", "f1/external_effort"]
    for _ in range(1000):
        assert world.loop.step_now().ok
    world.loop.publish_now()                      # (what the paused loop does after ~/step)
    box = next(iter(transports.hosts.values())).box
    w = box["contacts/contact_wrench/box"]
    assert w.header.frame_id == "box" and w.header.stamp.sec == 1
    f, tau = w.wrench.force, w.wrench.torque
    np.testing.assert_allclose([f.x, f.y, f.z], [0.0, 0.0, mass * G], atol=2e-3 * mass * G)
    np.testing.assert_allclose([tau.x, tau.y, tau.z], 0.0, atol=1e-3 * mass * G)
    t = box["torques/external_joint_torques"]
    assert list(t.name) == ["j1", "f1"] and list(t.effort) == [0.0, 0.0]

    with pytest.raises(ConfigError, match=r"sensor 'tip_imu' \(imu\) publishes sensor_msgs/msg/Imu, which this "
                                          r"broadcaster does not; use imu_sensor_broadcaster/IMUSensorBroadcaster"):
        world_of(scene, tmp_path, {"imus": (generic, {"sensor_name": "tip_imu"})})


def test_a_scene_sensor_may_not_take_the_name_of_a_ros2_control_sensor(tmp_path):
    urdf = tmp_path / "arm.urdf"
    urdf.write_text(URDF.replace("</robot>", ROS2_CONTROL.split("<robot name=\"arm\">", 1)[1]))
    scene = write_scene(tmp_path, urdf, sensors=[{"name": "wrist_imu", "type": "imu", "frame_id": "ft"}], cameras=())
    with pytest.raises(ConfigError, match=r"scene.yaml: sensors\[0\] \(wrist_imu\): a <sensor> of .*arm.urdf"):
        world_of(scene, tmp_path, {})


@pytest.mark.parametrize("sensors, needle", [
    ({"tip_imu": {"type": "imu"}}, r"sensors: a list of sensor entries .* sensor types: camera, "),
    (["tip_imu"], r"sensors\[0\]: a mapping \{name, type, <parameters>\}, got 'tip_imu'"),
    ([{"type": "imu", "frame_id": "ft"}], r"sensors\[0\]: each sensor has a 'name'"),
    ([{"name": "tip_imu", "frame_id": "ft"}], r"sensors\[0\] \(tip_imu\): each sensor has a 'type'; sensor types: "),
    ([SENSORS[0], {"name": "t", "type": "tactile"}], r"sensors\[1\]: sensor 't' \(tactile\): unknown sensor type "
                                                    r"'tactile'.*force_torque.*imu"),
    ([{"name": "tip_ft", "type": "force_torque", "parent_link": "l1"}],
     r"sensors\[0\]: sensor 'tip_ft' \(force_torque\): parameter 'child_link' is required"),
    ([{"name": "tip_imu", "type": "imu", "frame_id": "elbow"}], r"sensors\[0\]: sensor 'tip_imu' \(imu\): .*'elbow'"),
    ([{"name": "cam", "type": "camera", "parent": "world", "fov": 60.0, "height": 10}],
     r"sensors\[0\] \(cam\): missing key 'width'"),
    ([{"name": "above_a", "type": "imu", "frame_id": "ft"}], r"sensors: names must be unique .* \['above_a'\]"),
])
def test_a_bad_sensor_entry_names_the_scene_file_and_the_entry(tmp_path, urdf, sensors, needle):
    path = write_scene(tmp_path, urdf, sensors=sensors)
    with pytest.raises(ConfigError) as err:
        load_scene(str(path))
    text = str(err.value)
    assert text.startswith(f"{path}: "), text
    assert re.search(needle, text), text
