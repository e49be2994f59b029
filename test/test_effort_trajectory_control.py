"""joint_trajectory_controller with ``command_interfaces: [effort]`` or ``[velocity]`` (the real controller's PID,
``gains.<joint>.*``) in sim time without DDS: control_toolbox's Pid against its formula, the franka_ros2 FR3/Panda
arm controller's gains (franka_bringup/config/controllers.yaml: p 600/600/600/600/250/150/50, d 30/30/30/30/10/10/5,
i 0, i_clamp 1) tracking a MoveIt-like trajectory on the Franka preset with TAMSI, default gains on robots brought
without gains, the velocity loop, the hardware's gravity compensation under the effort command (the Franka's torque
interface), and bad gains refused at start-up."""

import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest
from builtin_interfaces.msg import Duration
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from contact_sim_ros.driver.command_validation import JointLimits
from contact_sim_ros.driver.config import ControllersFile, ControllerSpec, read_controllers_file
from contact_sim_ros.driver.controller_manager import ControllerManager
from contact_sim_ros.driver.controllers.base import ControllerTransport
from contact_sim_ros.driver.controllers.joint_trajectory import SUCCESSFUL
from contact_sim_ros.driver.controllers.pid import JointPid
from contact_sim_ros.driver.hardware import EFFORT, VELOCITY
from contact_sim_ros.driver.loop import SteppingLoop
from contact_sim_ros.driver.system import SimulatorSystem
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.sim.simulator import Simulator

DT = 1e-3
JTC = "joint_trajectory_controller/JointTrajectoryController"
FRANKA = [f"panda_joint{i}" for i in range(1, 8)]
IIWA = [f"iiwa_joint_{i}" for i in range(1, 8)]
# franka_ros2 franka_bringup/config/controllers.yaml, joint_trajectory_controller (effort): gains per joint
FR3_P = [600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0]
FR3_D = [30.0, 30.0, 30.0, 30.0, 10.0, 10.0, 5.0]
FINAL_TOLERANCE = 5e-3        # rad: the bound on the final error of a MoveIt-like trajectory


class Reports(ControllerTransport):
    def __init__(self):
        self.warnings = []

    def warn_throttled(self, message, key=None):
        self.warnings.append(message)


def fr3_gains(joints=FRANKA):
    return {j: {"p": p, "d": d, "i": 0.0, "i_clamp": 1.0} for j, p, d in zip(joints, FR3_P, FR3_D)}


def make_world(robot, joints, command="effort", gains=None, gravity_compensation=True, extra=None, engine="tamsi"):
    sim = Simulator({"robot": robot}, engine=engine, time_step=DT)
    system = SimulatorSystem(sim, gravity_compensation=gravity_compensation)
    params = {"joints": joints, "command_interfaces": [command], "state_interfaces": ["position", "velocity"],
              **(extra or {})}
    if gains is not None:
        params["gains"] = gains
    reports = Reports()
    cm = ControllerManager(system, ControllersFile("<test>", 1.0 / DT, (ControllerSpec("arm_controller", JTC, params),)),
                           [], transport=reports, limits=JointLimits.from_model(sim.model))
    loop = SteppingLoop(system, cm, real_time_factor=0.0)
    idx = system.command.indices(joints)
    return SimpleNamespace(sim=sim, system=system, cm=cm, loop=loop, reports=reports, idx=idx,
                           arm=cm.controllers["arm_controller"])


def moveit_like(joints, q0, delta, duration=3.0, n=40):
    """A trajectory as MoveIt's time parameterisation sends it: n points with positions, velocities and
    accelerations (a minimum-jerk move by ``delta`` rad from ``q0`` in ``duration`` s), zero at both ends."""
    msg = JointTrajectory(joint_names=list(joints))
    for k in range(1, n + 1):
        t = duration * k / n
        s = t / duration
        pos = 10 * s**3 - 15 * s**4 + 6 * s**5
        vel = (30 * s**2 - 60 * s**3 + 30 * s**4) / duration
        acc = (60 * s - 180 * s**2 + 120 * s**3) / duration**2
        msg.points.append(JointTrajectoryPoint(
            positions=(q0 + delta * pos).tolist(), velocities=(delta * vel).tolist(),
            accelerations=(delta * acc).tolist(),
            time_from_start=Duration(sec=int(t), nanosec=int(round((t % 1) * 1e9)))))
    return msg


def run_goal(w, joints, delta):
    """Send a MoveIt-like goal, step until it ends; (execution, final |error| per joint (rad), largest tracking
    error while monitored (rad), modes seen on the joints)."""
    q0 = w.system.state.position[w.idx].copy()
    target = q0 + delta
    goal = SimpleNamespace(trajectory=moveit_like(joints, q0, delta), path_tolerance=[], goal_tolerance=[],
                           goal_time_tolerance=Duration())
    ex = w.arm.goal(goal, "handle")
    w.arm.submit(ex)
    tracking, modes = 0.0, set()
    for _ in range(8000):
        if ex.done.is_set():
            break
        report = w.loop.step_now()
        assert report.ok, report.message
        modes |= set(w.system.command.mode[w.idx].tolist())
        if ex.feedback is not None:
            _, desired, _, actual, _ = ex.feedback
            tracking = max(tracking, float(np.abs(desired - actual).max()))
    assert ex.done.is_set(), f"goal not done at t = {w.sim.t:.3f} s"
    return ex, np.abs(w.system.state.position[w.idx] - target), tracking, modes


FRANKA_MOVE = np.array([0.5, 0.4, -0.4, 0.5, 0.6, -0.4, 0.8])
IIWA_MOVE = np.array([0.5, 0.4, -0.4, 0.5, 0.6, -0.4, 0.8])     # within the limits (joint 4 starts at -1.6 of -2.09)


# ------------------------------------------------------------------------------------------------ PID


def test_pid_matches_control_toolbox_formula_with_integral_clamp():
    """Constant errors: u_k = p e + clamp(k i dt e, i_min, i_max) + d e_dot (legacy: the integral includes this
    update's error), per joint; joint 2's integral saturates at i_clamp_max, joint 3's at -i_clamp."""
    p, i, d = np.array([10.0, 4.0, 2.0]), np.array([5.0, 30.0, 8.0]), np.array([0.5, 0.0, 1.0])
    i_max, i_min = np.array([np.inf, 0.2, 0.3]), np.array([-np.inf, -0.2, -0.3])
    pid = JointPid(p, i, d, i_min, i_max)
    e, ed, dt = np.array([0.01, 0.02, -0.05]), np.array([0.1, -0.2, 0.3]), 1e-3
    for k in range(1, 1001):
        u = pid.compute(e, ed, dt)
        expected = p * e + np.clip(k * i * dt * e, i_min, i_max) + d * ed
        np.testing.assert_allclose(u, expected, rtol=1e-12, atol=1e-13)   # summation order
    assert u[1] == pytest.approx(p[1] * e[1] + 0.2) and u[2] == pytest.approx(p[2] * e[2] - 0.3 + d[2] * ed[2])
    assert pid.compute(e, ed, 0.0) is u and np.array_equal(u, pid.command)   # dt 0: the last command
    again = pid.compute(-e, ed, dt)
    assert again is u                                                          # the same array: no allocation
    pid.reset()
    np.testing.assert_allclose(pid.compute(e, ed, dt), p * e + i * dt * e + d * ed, rtol=1e-12)


def test_pid_other_antiwindup_strategies_and_output_clamp():
    """'none' integrates after the command (u_k uses the integral of k - 1 updates); 'conditional_integration'
    stops integrating while the output saturates in the error's direction; u is clamped to u_clamp."""
    e, dt = np.array([1.0, 1.0]), 0.0125          # i dt e = 0.125: exact in binary
    pid = JointPid([0.0, 1.0], [10.0, 10.0], [0.0, 0.0], [-np.inf, -np.inf], [np.inf, np.inf],
                   u_min=[-np.inf, -1.5], u_max=[np.inf, 1.5], antiwindup=["none", "conditional_integration"])
    for k in range(1, 21):
        u = pid.compute(e, np.zeros(2), dt)
        assert u[0] == (k - 1) * 0.125                        # 'none'
        assert u[1] == min(1.0 + (k - 1) * 0.125, 1.5)         # clamped
    assert pid.i_term[1] == 0.625     # integrated up to the first saturated update (u_unsat 1.625), then frozen
    with pytest.raises(ValueError, match="antiwindup"):
        JointPid([1.0], [0.0], [0.0], [-1.0], [1.0], antiwindup=["sometimes"])


def test_pid_update_allocates_no_arrays():
    """Every strategy at once over 7 joints: 1000 updates allocate no temporary array (peak traced memory above
    that of 1000 calls returning at once, dt = 0, smaller than an empty ndarray; a ufunc's ``where=`` alone
    would cost ~1.4 kB)."""
    strategies = ["legacy", "none", "conditional_integration", "back_calculation"] * 2
    pid = JointPid(np.full(7, 100.0), np.full(7, 5.0), np.full(7, 2.0), np.full(7, -1.0), np.full(7, 1.0),
                   np.full(7, -3.0), np.full(7, 3.0), strategies[:7])
    e, ed = np.linspace(-0.1, 0.1, 7), np.linspace(0.2, -0.2, 7)
    pid.compute(e, ed, 1e-3)

    def peak(dt):
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            for _ in range(1000):
                pid.compute(e, ed, dt)
            return tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()

    extra = peak(1e-3) - peak(0.0)
    assert extra < np.empty(0).__sizeof__(), f"{extra} bytes"


# ------------------------------------------------------------------------------------------------ effort JTC


@pytest.mark.parametrize("engine", ["tamsi", "lagged"])
def test_effort_jtc_with_franka_ros2_gains_tracks_a_moveit_trajectory_on_the_franka(engine):
    w = make_world("franka", FRANKA, gains=fr3_gains(), engine=engine)
    assert not any("no PID gains" in m for m in w.reports.warnings)
    np.testing.assert_array_equal(w.arm.gains["p"], FR3_P)
    np.testing.assert_array_equal(w.arm.gains["d"], FR3_D)
    ex, final, tracking, modes = run_goal(w, FRANKA, FRANKA_MOVE)
    assert (ex.status, ex.error_code) == ("succeeded", SUCCESSFUL)
    assert modes == {EFFORT}                                   # torque commands, not the drive's position PD
    assert final.max() <= FINAL_TOLERANCE, f"final errors {final} rad"
    assert tracking < 0.02                                     # rad while moving (MoveIt's default path check)
    print(f"franka_ros2 gains, {engine}: final error {np.round(final * 1e3, 3)} mrad, tracking {tracking * 1e3:.2f} mrad")


def test_effort_command_is_the_pid_of_the_measured_state_on_the_hardware_gravity_compensation():
    """Holding (no trajectory): the effort written is p (q_hold - q) + d (0 - v) per joint, from the state the
    update read; the hardware adds g(q) (the FR3 compensates gravity itself: franka_ros2's
    GravityCompensationExampleController commands 0), so zero gains leave the arm floating where it is, and
    without the hardware's compensation (node gravity_compensation false) the same zero command lets it fall."""
    w = make_world("franka", FRANKA, gains=fr3_gains())
    q_hold = w.system.state.position[w.idx].copy()
    p, d = np.array(FR3_P), np.array(FR3_D)
    for _ in range(50):
        q, v = w.system.state.position[w.idx].copy(), w.system.state.velocity[w.idx].copy()
        w.loop.step_now()
        np.testing.assert_allclose(w.system.command.effort[w.idx], p * (q_hold - q) - d * v, rtol=1e-12,
                                   atol=1e-12)
    assert not w.system.command.effort_raw[w.idx].any()

    zero = {j: {"p": 0.0, "d": 0.0} for j in FRANKA}
    drift = {}
    for compensated in (True, False):
        w = make_world("franka", FRANKA, gains=zero, gravity_compensation=compensated)
        q0 = w.system.state.position[w.idx].copy()
        for _ in range(300):
            w.loop.step_now()
        assert np.all(w.system.command.effort[w.idx] == 0.0)
        drift[compensated] = float(np.abs(w.system.state.position[w.idx] - q0).max())
    assert drift[True] < 1e-4 and drift[False] > 0.05, drift


# franka_ros2 franka_moveit_config/config/panda_ros_controllers.yaml as it is (humble/develop), without its
# franka_robot_state_broadcaster (a vendor type: issue 27's item 5)
PANDA_ROS_CONTROLLERS = """\
controller_manager:
  ros__parameters:
    update_rate: 1000  # Hz

    panda_arm_controller:
      type: joint_trajectory_controller/JointTrajectoryController

    joint_state_broadcaster:
      type: joint_state_broadcaster/JointStateBroadcaster

panda_arm_controller:
  ros__parameters:
    command_interfaces:
      - effort
    state_interfaces:
      - position
      - velocity
    joints:
      - panda_joint1
      - panda_joint2
      - panda_joint3
      - panda_joint4
      - panda_joint5
      - panda_joint6
      - panda_joint7
    gains:
      panda_joint1: { p: 600., d: 30., i: 0., i_clamp: 1. }
      panda_joint2: { p: 600., d: 30., i: 0., i_clamp: 1. }
      panda_joint3: { p: 600., d: 30., i: 0., i_clamp: 1. }
      panda_joint4: { p: 600., d: 30., i: 0., i_clamp: 1. }
      panda_joint5: { p: 250., d: 10., i: 0., i_clamp: 1. }
      panda_joint6: { p: 150., d: 10., i: 0., i_clamp: 1. }
      panda_joint7: { p: 50., d: 5., i: 0., i_clamp: 1. }
"""


def test_franka_ros2_moveit_controllers_file_drives_the_franka_with_its_gains(tmp_path):
    path = tmp_path / "panda_ros_controllers.yaml"
    path.write_text(PANDA_ROS_CONTROLLERS)
    sim = Simulator({"robot": "franka"}, engine="tamsi", time_step=DT)
    system = SimulatorSystem(sim)
    reports = Reports()
    cm = ControllerManager(system, read_controllers_file(path), [], transport=reports,
                           limits=JointLimits.from_model(sim.model))
    arm = cm.controllers["panda_arm_controller"]
    assert arm.active and arm.closed_loop == "effort"
    np.testing.assert_array_equal(arm.gains["p"], FR3_P)
    np.testing.assert_array_equal(arm.gains["d"], FR3_D)
    np.testing.assert_array_equal(arm.gains["i_max"], 1.0)
    w = SimpleNamespace(sim=sim, system=system, cm=cm, loop=SteppingLoop(system, cm, real_time_factor=0.0),
                        idx=system.command.indices(FRANKA), arm=arm)
    ex, final, _, modes = run_goal(w, FRANKA, FRANKA_MOVE)
    assert (ex.status, ex.error_code, modes) == ("succeeded", SUCCESSFUL, {EFFORT})
    assert final.max() <= FINAL_TOLERANCE, f"final errors {final} rad"


@pytest.mark.parametrize("robot, joints, move", [("franka", FRANKA, FRANKA_MOVE), ("iiwa_wsg", IIWA, IIWA_MOVE)])
def test_effort_jtc_without_gains_gets_stiff_defaults_and_says_how_to_set_them(robot, joints, move):
    w = make_world(robot, joints)
    warning = [m for m in w.reports.warnings if "no PID gains" in m]
    assert len(warning) == 1
    assert "arm_controller" in warning[0] and joints[0] in warning[0] and "gains.<joint>." in warning[0]
    assert np.all(w.arm.gains["p"] > 0) and np.all(w.arm.gains["d"] > 0)
    ex, final, _, modes = run_goal(w, joints, move)
    assert (ex.status, ex.error_code) == ("succeeded", SUCCESSFUL)
    assert modes == {EFFORT}
    assert final.max() <= FINAL_TOLERANCE, f"final errors {final} rad"
    print(f"{robot} default gains: final error {np.round(final * 1e3, 3)} mrad")


def test_velocity_jtc_tracks_a_moveit_trajectory():
    w = make_world("franka", FRANKA, command="velocity")
    assert any("no PID gains" in m and "[velocity]" in m for m in w.reports.warnings)
    np.testing.assert_array_equal(w.arm.gains["ff_velocity_scale"], 1.0)
    ex, final, _, modes = run_goal(w, FRANKA, FRANKA_MOVE)
    assert (ex.status, ex.error_code) == ("succeeded", SUCCESSFUL)
    assert modes == {VELOCITY}
    assert final.max() <= FINAL_TOLERANCE, f"final errors {final} rad"
    print(f"franka velocity defaults: final error {np.round(final * 1e3, 3)} mrad")

    # the user's velocity gains: the command is ff * v_desired + p * e (+ d * e_dot), holding: p * (q_hold - q)
    gains = {j: {"p": 5.0, "ff_velocity_scale": 1.0} for j in FRANKA}
    w = make_world("franka", FRANKA, command="velocity", gains=gains)
    q_hold = w.system.state.position[w.idx].copy()
    for _ in range(20):
        q = w.system.state.position[w.idx].copy()
        w.loop.step_now()
        np.testing.assert_allclose(w.system.command.velocity[w.idx], 5.0 * (q_hold - q), rtol=1e-12, atol=1e-15)


# ------------------------------------------------------------------------------------------------ bad gains


@pytest.mark.parametrize("gains, extra, words", [
    ({"panda_joint3": {"p": -600.0}}, {}, ["arm_controller", "gains.panda_joint3.p", ">= 0"]),
    ({"panda_joint2": {"d": float("nan")}}, {}, ["arm_controller", "gains.panda_joint2.d", "finite"]),
    ({"panda_joint5": {"ff_velocity_scale": float("inf")}}, {}, ["gains.panda_joint5.ff_velocity_scale"]),
    ({"panda_joint1": {"i_clamp": float("nan")}}, {}, ["gains.panda_joint1.i_clamp", "nan"]),
    ({"panda_joint4": {"i_clamp_min": 1.0, "i_clamp_max": -1.0}}, {}, ["joint 'panda_joint4'", "i_clamp_min"]),
    ({"panda_joint6": {"u_clamp_min": 2.0, "u_clamp_max": 1.0}}, {}, ["joint 'panda_joint6'", "u_clamp_min"]),
    ({"panda_joint7": {"p": "stiff"}}, {}, ["gains.panda_joint7.p", "expected double"]),
    ({"panda_joint1": {"antiwindup_strategy": "clever"}}, {}, ["gains.panda_joint1.antiwindup_strategy", "legacy"]),
    ({"panda_finger_joint1": {"p": 10.0}}, {}, ["gains.panda_finger_joint1.p", "not one of its joints"]),
    (None, {"state_interfaces": ["position"]}, ["arm_controller", "'velocity' state interfaces"]),
])
def test_bad_gains_are_refused_at_start_up_naming_the_controller_and_joint(gains, extra, words):
    with pytest.raises(ConfigError) as err:
        make_world("franka", FRANKA, gains=gains, extra=extra)
    for word in words:
        assert word in str(err.value), str(err.value)


def test_effort_jtc_is_refused_with_an_engine_that_ignores_efforts():
    """The hardware of a quasistatic engine exports no effort command interface: activating the effort JTC at
    start-up fails with the controller manager's message (ros2_control's wording) and the reason."""
    with pytest.raises(ConfigError, match="Unable to activate controller 'arm_controller' since the command "
                                          "interface 'panda_joint1/effort' is not available.*quasistatic_lcp' "
                                          "ignores effort"):
        make_world("franka", FRANKA, gains=fr3_gains(), engine="quasistatic_lcp")
