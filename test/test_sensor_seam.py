"""The sensor seam (contact_sim_ros.sensors): the registry, specs from a <ros2_control> <sensor> / a preset, the
force/torque sensor through the hardware System and its broadcaster bit for bit with its kernel, the contact wrench
and external joint torque sensors bit for bit with the node's former computations, and an IMU against analytic
kinematics (REP 145: +g up at rest; the angular velocity of a link on a revolute joint is the joint velocity).

The arm (test_sensors.URDF, without its free object): base - j1 (revolute about y, 0.5 m up) - l1 - fixed - ft
(0.4 m further) - fixed - palm - f1 (prismatic) - finger1.
"""

from types import SimpleNamespace

import numpy as np
import pytest

from contact_sim_ros.driver.command_validation import JointLimits
from contact_sim_ros.driver.config import ControllersFile, ControllerSpec, parse_ros2_control
from contact_sim_ros.driver.controller_manager import ControllerManager
from contact_sim_ros.driver.controllers.base import ControllerTransport
from contact_sim_ros.driver.loop import SteppingLoop
from contact_sim_ros.driver.system import SimulatorSystem
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.sensors import (SensorSpec, make_sensor, sensor_class, sensor_types, spec_from_hardware,
                                     spec_from_preset)
from contact_sim_ros.sensors.force_torque import ForceTorqueSensor
from contact_sim_ros.sim.sensors import ContactWrenchAccumulator, external_joint_torques
from contact_sim_ros.sim.simulator import Simulator
from test_sensors import URDF

DT = 1e-3
G = 9.81
FTS = "force_torque_sensor_broadcaster/ForceTorqueSensorBroadcaster"
IMUB = "imu_sensor_broadcaster/IMUSensorBroadcaster"
SUBTREE_MASS = 0.3 + 1.2 + 0.2          # ft + palm + finger1 (kg)
ROS2_CONTROL = """<robot name="arm"><ros2_control name="arm" type="system">
  <hardware><plugin>mock_components/GenericSystem</plugin></hardware>
  <joint name="j1"><command_interface name="position"/><state_interface name="position"/></joint>
  <joint name="f1"><command_interface name="position"/><state_interface name="position"/></joint>
  <sensor name="wrist_ft">
    <state_interface name="force.x"/><state_interface name="force.y"/><state_interface name="force.z"/>
    <state_interface name="torque.x"/><state_interface name="torque.y"/><state_interface name="torque.z"/>
    <param name="parent_link">l1</param><param name="child_link">ft</param><param name="frame_id">ft</param>
  </sensor>
  <sensor name="wrist_imu">
    <state_interface name="orientation.x"/><state_interface name="angular_velocity.x"/>
    <state_interface name="linear_acceleration.x"/><param name="frame_id">ft</param>
  </sensor>
</ros2_control></robot>"""


class Quiet(ControllerTransport):
    def warn_throttled(self, message, key=None):
        pass

    def reject_command(self, exc):
        raise AssertionError(exc)

    def info(self, message):
        pass


@pytest.fixture(scope="module")
def urdf(tmp_path_factory):
    path = tmp_path_factory.mktemp("arm") / "arm.urdf"
    path.write_text(URDF)
    return path


def arm_world(urdf, q0=0.3):
    info = parse_ros2_control(ROS2_CONTROL, "<arm ros2_control>")
    sim = Simulator({"robot": {"urdf": str(urdf), "initial_positions": {"j1": q0}}}, engine="semi_implicit",
                    time_step=DT)
    system = SimulatorSystem(sim, hardware_info=info)
    specs = (ControllerSpec("ft_broadcaster", FTS, {"sensor_name": "wrist_ft", "frame_id": "ft"}),
             ControllerSpec("imu_broadcaster", IMUB, {"sensor_name": "wrist_imu", "frame_id": "ft"}))
    cm = ControllerManager(system, ControllersFile("<test>", 1000.0, specs), [], transport=Quiet(),
                           limits=JointLimits.from_model(sim.model))
    return SimpleNamespace(sim=sim, system=system, cm=cm, info=info,
                           loop=SteppingLoop(system, cm, real_time_factor=0.0))


def test_the_registry_lists_every_type_and_an_unknown_one_names_them():
    assert {"force_torque", "contact_wrench", "external_joint_torques", "imu", "camera"} <= set(sensor_types())
    assert sensor_class("camera").off_thread and not sensor_class("force_torque").off_thread
    with pytest.raises(ConfigError, match=r"unknown sensor type 'sonar'; valid sensor types: camera, "
                                          r"contact_wrench, external_joint_torques, force_torque, imu"):
        sensor_class("sonar")


def test_specs_from_a_ros2_control_sensor_and_a_preset(urdf):
    info = parse_ros2_control(ROS2_CONTROL, "arm.urdf")
    ft = spec_from_hardware(info.sensor("wrist_ft"), info.source)
    imu = spec_from_hardware(info.sensor("wrist_imu"), info.source)
    assert (ft.type, ft.params["parent_link"], imu.type, imu.params["frame_id"]) == ("force_torque", "l1", "imu",
                                                                                     "ft")
    preset = spec_from_preset({"parent_link": "l1", "child_link": "ft", "frame": "ft"}, "arm.yaml")
    assert (preset.name, preset.type, preset.params["child_link"]) == ("ft", "force_torque", "ft")
    sim = Simulator({"robot": {"urdf": str(urdf)}}, engine="semi_implicit", time_step=DT)
    with pytest.raises(ConfigError, match="arm.urdf: sensor 'bad' \\(force_torque\\): parameter 'child_link' is "
                                          "required"):
        make_sensor(SensorSpec("bad", "force_torque", {"parent_link": "l1"}, "arm.urdf"), sim.model)
    with pytest.raises(ConfigError, match="unknown frame 'nowhere'"):
        make_sensor(SensorSpec("imu", "imu", {"frame_id": "nowhere"}, "arm.urdf"), sim.model)


def test_broadcaster_reads_the_sensors_state_interfaces_bit_for_bit_with_the_kernel_and_without_allocating(urdf):
    """The F/T broadcaster's reading each step = ForceTorqueSensor.compute (the kernel) on the state after the
    step with a = (v - v_prev) / dt; the same array refilled in place; held still, the subtree's weight."""
    w = arm_world(urdf)
    broadcaster = w.cm.controllers["ft_broadcaster"]
    kernel = ForceTorqueSensor(w.sim.model, "l1", "ft", "ft")
    first = broadcaster.reading()
    for _ in range(1500):
        v_prev = w.sim.v.copy()
        assert w.loop.step_now().ok
        reading = broadcaster.reading()
        assert reading is first                      # the sensor's preallocated state interfaces
        forces = w.sim.contact_forces_world()
        expected = kernel.compute(w.sim.q, w.sim.v, (w.sim.v - v_prev) / DT,
                                  w.sim.contacts if forces.shape[0] else None, forces)
        np.testing.assert_array_equal(reading, expected)
    # at rest: the subtree's weight along gravity, expressed in the sensor frame (rotated by q about y)
    q = w.sim.joint_positions()[0]
    weight = SUBTREE_MASS * G * np.array([-np.sin(q), 0.0, np.cos(q)])   # R_y(q)^T (0, 0, -m g), negated
    np.testing.assert_allclose(reading[:3], -weight, atol=2e-3 * SUBTREE_MASS * G)


def test_contact_wrench_and_external_torque_sensors_equal_the_former_computations(urdf):
    """contact_wrench = the arithmetic of the node's former body_wrenches (ros/state_messages.py),
    external_joint_torques = sim.sensors.external_joint_torques of the step's generalized contact force, bit for
    bit: a box dropped onto the hand, then onto the ground."""
    sim = Simulator({"robot": {"urdf": str(urdf)}, "environment": [{"name": "ground", "shape": "halfspace"}],
                     "objects": [{"name": "box", "shape": {"box": [0.1, 0.1, 0.1]}, "mass": 0.2,
                                  "pose": {"xyz": [0.03, 0.0, 1.2]}}]},      # dropped onto the hand
                    engine="semi_implicit", time_step=DT)
    m = sim.model
    wrench = make_sensor(SensorSpec("contacts", "contact_wrench", {"bodies": ["palm", "finger1", "box"]}), m)
    ext = make_sensor(SensorSpec("ext", "external_joint_torques", {}), m)
    np.testing.assert_array_equal(ext.measure(sim, None), 0.0)               # before the first step
    accumulator = ContactWrenchAccumulator(m, ["palm", "finger1", "box"])
    touched, robot_touched = 0, 0
    for _ in range(1500):
        sim.step()
        got = wrench.measure(sim, None)
        forces = sim.contact_forces_world()
        expected = np.zeros((3, 6))
        if forces.shape[0]:
            touched += 1
            w = accumulator.compute(sim.contacts, forces, sim.pin_data)
            for k, f in enumerate(accumulator.frame_ids):
                R = sim.pin_data.oMf[int(f)].rotation
                expected[k, :3], expected[k, 3:] = R.T @ w[k, :3], R.T @ w[k, 3:]
        np.testing.assert_array_equal(got, expected)
        tau = ext.measure(sim, None)
        np.testing.assert_array_equal(tau, external_joint_torques(m, sim.last_result.generalized_contact_force))
        robot_touched += bool(np.any(tau != 0.0))
    assert touched > 100 and robot_touched > 10
    np.testing.assert_allclose(np.linalg.norm(got[2, :3]), 0.2 * G, rtol=1e-3)   # at the end: at rest on the ground


def imu_state(urdf, q, v, a):
    """A state (q, v) whose last step had the mean acceleration ``a`` (v_prev = v - a dt)."""
    sim = Simulator({"robot": {"urdf": str(urdf)}}, engine="semi_implicit", time_step=DT)
    state = SimpleNamespace(q=np.array(q, float), v=np.array(v, float), time_step=DT)
    return sim.model, state, state.v - np.asarray(a, float) * DT


@pytest.mark.parametrize("q", [0.0, 0.3, -1.1])
def test_imu_at_rest_reads_g_up_in_its_frame_and_its_orientation(urdf, q):
    model, state, v_prev = imu_state(urdf, [q, 0.01], [0.0, 0.0], [0.0, 0.0])
    imu = make_sensor(SensorSpec("imu", "imu", {"frame_id": "ft"}), model)
    r = imu.measure(state, v_prev)
    # the ft frame is l1's rotated by q about y: R_y(q)^T (0, 0, g) = g (-sin q, 0, cos q)
    np.testing.assert_allclose(r[7:10], [-G * np.sin(q), 0.0, G * np.cos(q)], atol=1e-12)
    np.testing.assert_allclose(r[4:7], 0.0, atol=1e-15)
    np.testing.assert_allclose(r[0:4], [0.0, np.sin(q / 2), 0.0, np.cos(q / 2)], atol=1e-12)  # x y z w


def test_imu_on_a_rotating_link_reads_the_joint_velocity_and_the_centripetal_acceleration(urdf):
    """j1 at q = 0 turning at omega about y, no angular acceleration: the ft frame (r = 0.4 m above the axis)
    reads omega about y and the specific force (0, 0, g - omega^2 r) (the centripetal acceleration points at the
    axis); with an angular acceleration alpha about y, the tangential acceleration alpha y x (r z) = alpha r x."""
    omega, alpha, r = 2.5, 3.0, 0.4
    model, state, v_prev = imu_state(urdf, [0.0, 0.0], [omega, 0.0], [0.0, 0.0])
    imu = make_sensor(SensorSpec("imu", "imu", {"link": "ft"}), model)
    reading = imu.measure(state, v_prev)
    np.testing.assert_allclose(reading[4:7], [0.0, omega, 0.0], atol=1e-12)
    np.testing.assert_allclose(reading[7:10], [0.0, 0.0, G - omega ** 2 * r], atol=1e-12)
    # angular acceleration alpha about y of a point at r z: alpha y x r z = alpha r x
    model, state, v_prev = imu_state(urdf, [0.0, 0.0], [omega, 0.0], [alpha, 0.0])
    reading = imu.measure(state, v_prev)
    np.testing.assert_allclose(reading[7:10], [alpha * r, 0.0, G - omega ** 2 * r], atol=1e-9)


def test_a_new_model_rebuilds_the_systems_sensors(urdf):
    """replace_simulator (spawn / delete of objects): the F/T sensor is rebuilt on the new model, its reading
    still the kernel's."""
    w = arm_world(urdf)
    for _ in range(5):
        w.loop.step_now()
    sim2 = Simulator({"robot": {"urdf": str(urdf), "initial_positions": {"j1": 0.3}},
                      "objects": [{"name": "box", "shape": {"box": [0.1, 0.1, 0.1]}, "mass": 1.0,
                                   "pose": {"xyz": [2.0, 0.0, 0.05]}}]}, engine="semi_implicit", time_step=DT)
    w.system.replace_simulator(sim2)
    v_prev = sim2.v.copy()
    w.system.step()
    forces = sim2.contact_forces_world()
    expected = ForceTorqueSensor(sim2.model, "l1", "ft", "ft").compute(
        sim2.q, sim2.v, (sim2.v - v_prev) / DT, sim2.contacts if forces.shape[0] else None, forces)
    np.testing.assert_array_equal(w.cm.controllers["ft_broadcaster"].reading(), expected)


def test_a_camera_registers_through_the_seam_and_is_measured_off_thread(urdf):
    """A scene's camera entry is a 'camera' sensor (its CameraSpec parsed by cameras/spec.py); the stepping thread
    never measures it (the camera process renders)."""
    sim = Simulator({"robot": {"urdf": str(urdf)}}, engine="semi_implicit", time_step=DT)
    cam = make_sensor(SensorSpec("wrist_cam", "camera", {"parent": "palm", "width": 64, "height": 48, "fov": 60.0},
                                 "scene.yaml"), sim.model)
    assert cam.off_thread and (cam.camera.parent, cam.camera.width, cam.camera.height) == ("palm", 64, 48)
    np.testing.assert_allclose(cam.camera.fx, 32.0 / np.tan(np.radians(30.0)), rtol=1e-12)
    with pytest.raises(RuntimeError, match="off the stepping thread"):
        cam.measure(sim, sim.v)
    with pytest.raises(ConfigError, match="unknown parent frame 'nowhere'"):
        make_sensor(SensorSpec("c2", "camera", {"parent": "nowhere", "width": 8, "height": 8}, "scene.yaml"),
                    sim.model)


def test_imu_broadcaster_reads_the_imus_state_interfaces_held_still_g_up(urdf):
    """imu_sensor_broadcaster on the <sensor name="wrist_imu"> (typed by its state interfaces): its reading is the
    IMU's values (10 state interfaces); the arm held at q = 0.3 rad reads g (-sin q, 0, cos q), no rotation."""
    w = arm_world(urdf, q0=0.3)
    imu = w.cm.controllers["imu_broadcaster"]
    assert imu.state_interfaces()[0] == "wrist_imu/orientation.x" and len(imu.state_interfaces()) == 10
    for _ in range(1500):
        assert w.loop.step_now().ok
    r = imu.reading()
    q = w.sim.joint_positions()[0]
    np.testing.assert_allclose(r[7:10], [-G * np.sin(q), 0.0, G * np.cos(q)], atol=1e-3 * G)
    np.testing.assert_allclose(r[4:7], 0.0, atol=1e-4)
    np.testing.assert_allclose(r[0:4], [0.0, np.sin(q / 2), 0.0, np.cos(q / 2)], atol=1e-6)


def test_sensor_broadcasters_refuse_unknown_sensors_and_the_wrong_type(urdf):
    for ctype, params, needle in ((IMUB, {"sensor_name": "nope", "frame_id": "ft"}, "unknown sensor 'nope'.*"
                                   "sensors: \\['wrist_ft', 'wrist_imu'\\]"),
                                  (IMUB, {"sensor_name": "wrist_ft", "frame_id": "ft"}, "of type 'force_torque', "
                                   "not imu"),
                                  (FTS, {"sensor_name": "wrist_imu", "frame_id": "ft"}, "unknown sensor 'wrist_imu'")):
        info = parse_ros2_control(ROS2_CONTROL, "<arm ros2_control>")
        sim = Simulator({"robot": {"urdf": str(urdf)}}, engine="semi_implicit", time_step=DT)
        system = SimulatorSystem(sim, hardware_info=info)
        with pytest.raises(ConfigError, match=needle):
            ControllerManager(system, ControllersFile("<test>", 1000.0, (ControllerSpec("b", ctype, params),)), [],
                              transport=Quiet(), limits=JointLimits.from_model(sim.model))
