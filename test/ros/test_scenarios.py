"""Scenario 1 (iiwa + WSG 50 pick, shake and place with force feedback): the controller steps the simulation node
(real_time_factor 0, paused) in lock-step through ~/step. Durations are shortened (0.5 s keyframe moves, 2 shake
cycles at 2 Hz, 2 ms time step, 20 ms control period).

The lock-step ROS run is the in-process run's twin, bit for bit (docs/scenarios.md "Determinism"), which two tests
here show: the runner's command (`make demo`: a runner process starting a sim_node process, real DDS) and the node
built in the test's process (run_scenario's node_factory NodeInThisProcess, real DDS) log the in-process run's joint states, grip forces
and wrist loads bit-identically. The verdict tests (engines, grip forces) then run in process (transport
'inprocess'); perception over ROS needs the node's camera process (a process test)."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from contact_sim_ros.clients.inprocess_link import InProcessLink
from contact_sim_ros.clients.pick_shake_place import PickShakePlaceParams
from contact_sim_ros.clients.link_messages import TickTrajectory, positions_of, to_duration, to_time
from contact_sim_ros.clients.robot_link import RobotLink
from contact_sim_ros.driver.command_validation import JointLimits, TrajectorySampler, validate_trajectory
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.scenarios.campaign import trial_scene
from contact_sim_ros.clients import robot_link
from contact_sim_ros.ros.node_in_process import NodeInThisProcess
from contact_sim_ros.scenarios.runner import SCENARIOS, _fmt, main as runner_main, run_scenario
from contact_sim_ros.yaml_files import load_yaml
from inprocess_sim_node import no_graph_look  # noqa: F401 (a fixture)

REPO = Path(__file__).resolve().parents[2]
BOTTLE_MASS = float(ET.parse(REPO / "urdf" / "objects" / "bottle.urdf").getroot()
                    .find("link/inertial/mass").get("value"))
G = 9.81
FAST = dict(motion_time=0.5, hold_time=0.45, shake_cycles=2)
# a node built in this process (NodeInThisProcess) in its own fresh namespace: no 3 s graph look
pytestmark = pytest.mark.usefixtures("no_graph_look")


def explain(r) -> str:
    return f"{r.engine}: {r.reason}\nnumbers: {r.numbers}\nnode output (tail):\n{r.node_output[-1500:]}"


@pytest.fixture(scope="module", params=["tamsi", pytest.param("lagged", marks=pytest.mark.slow)])
def full_run(request):
    """The whole scenario in process (the ROS run's bit-identical twin: test_the_node_in_this_process_over_dds...,
    test_readme_main_command_runs_scenario_1_to_the_in_process_runs_verdict_and_logs)."""
    return run_scenario("pick_shake_place", request.param, params=FAST, transport="inprocess")


def test_lagged_grasp_hold_and_shake():
    """Fast variant for the Lagged (ICF) engine: the scenario up to the end of the shake check (~4.1 s)."""
    r = run_scenario("pick_shake_place", "lagged", params={**FAST, "stop_at": "transfer"}, transport="inprocess")
    assert r.success, explain(r)
    assert "load_after_shake_N" in r.numbers, f"the run ended before the shake was checked: {explain(r)}"
    n = r.numbers
    assert n["hold_grip_force_max_rel_error"] < 0.10, explain(r)
    assert n["held_mass_kg"] == pytest.approx(BOTTLE_MASS, rel=0.05), explain(r)
    assert n["load_after_shake_N"] == pytest.approx(n["held_load_N"], rel=0.10), explain(r)


def test_pick_shake_place_succeeds(full_run):
    r = full_run
    assert r.success, explain(r)
    n = r.numbers
    # static hold: the force loop holds the commanded 20 N within 10 %
    assert n["hold_grip_force_max_rel_error"] < 0.10, explain(r)
    # the wrist F/T sensor weighs the bottle (URDF mass 0.509 kg) after lifting and still after the shake
    assert n["held_mass_kg"] == pytest.approx(BOTTLE_MASS, rel=0.05), explain(r)
    assert n["load_after_shake_N"] == pytest.approx(n["held_load_N"], rel=0.10), explain(r)
    # the support took the load when the bottle bottom reached the floor: no slip in the grasp
    p = PickShakePlaceParams(**FAST)
    assert n["placed_at_tcp_z_m"] == pytest.approx(p.grasp_z, abs=0.01), explain(r)
    assert abs(n["final_load_N"]) < 0.3 * n["held_load_N"]
    # the grip force log stays near 20 N throughout the shake (the bottle never left the fingers)
    shake = r.log["phase"] == "shake"
    assert shake.sum() > 40 and np.all(r.log["grip"][shake] > 10.0), r.log["grip"][shake]
    np.testing.assert_allclose(r.object_poses["bottle"][:2], p.place_xy, atol=0.02)


@pytest.mark.process
def test_a_pick_from_the_wrist_camera_topics_finds_the_displaced_bottle_and_lifts_it(ros, tmp_path):
    """Perception over ROS (docs/cameras.md): the bottle moved 3 cm in x and y from the nominal pick_xy (where the
    grasp would close on nothing: test_perception.py), the controller subscribes to the node's wrist camera topics
    (aligned depth 16UC1, camera_info, segmentation for the robot self-filter) and /tf, takes the image stamped
    with its tick, locates the bottle and lifts it from there (stopped when the held weight is measured)."""
    spec = SCENARIOS["pick_shake_place"]
    scene = trial_scene(REPO / spec.perception_scene, {"object.bottle.x": 0.03, "object.bottle.y": -0.03}, tmp_path)
    truth = np.array(load_yaml(scene.read_text())["objects"][0]["pose"]["xyz"][:2], float)
    r = run_scenario("pick_shake_place", "tamsi", params={**FAST, "pick_source": "perception", "stop_at": "shake"},
                     scene=scene)
    assert r.success, explain(r)
    n = r.numbers
    perceived = np.array([n["pick_x_m"], n["pick_y_m"]])
    assert np.linalg.norm(perceived - truth) < 0.005, (perceived, truth)
    nominal = np.array(PickShakePlaceParams().pick_xy)
    assert np.linalg.norm(perceived - nominal) > np.hypot(0.03, 0.03) - 0.005, perceived
    assert n["perceived_top_z_m"] == pytest.approx(0.18, abs=0.005)      # bottle 18 cm tall on the floor
    # the image of the control tick (stamps on the 20 ms grid), taken at rest after the look move
    p = PickShakePlaceParams(**FAST)
    t_image = n["perception_sim_time_s"]
    assert t_image == pytest.approx(round(t_image / spec.period) * spec.period, abs=1e-9)
    assert t_image >= 0.3 + p.motion_time + 0.2 - 1e-9      # tare, look move, 0.2 s at rest
    assert n["held_mass_kg"] == pytest.approx(BOTTLE_MASS, rel=0.05), explain(r)


def test_perception_over_ros_without_the_camera_is_a_clear_error(monkeypatch):
    """The node (built in this process, over DDS) runs scenario 1's scene without cameras: the controller names the
    missing camera topic. (It waits CAMERA_DISCOVERY_S for the camera process's publishers; here there is no camera
    process at all, so 2 s instead of 15 s decide the same.)"""
    monkeypatch.setattr(robot_link, "CAMERA_DISCOVERY_S", 2.0)
    spec = SCENARIOS["pick_shake_place"]
    with pytest.raises(RuntimeError, match=r"no publisher of /\S+/wrist_camera/wrist_camera/aligned_depth_to_color/"
                                           r"image_raw or .*does the simulation node run a scene with camera "
                                           r"'wrist_camera'"):
        run_scenario("pick_shake_place", "tamsi", params={**FAST, "pick_source": "perception"},
                     scene=REPO / spec.scene, node_factory=NodeInThisProcess)


def test_too_low_grip_force_slips_and_is_reported():
    # 2 N per finger with mu = 0.67 carries at most 2.7 N < 5.0 N bottle weight
    r = run_scenario("pick_shake_place", "tamsi", params={**FAST, "grip_force": 2.0}, transport="inprocess")
    assert not r.success, explain(r)
    assert "slip" in r.reason, explain(r)
    # the grip itself was regulated to the (too low) command before lifting
    assert r.numbers["close_time_s"] < 2.0


def test_the_node_in_this_process_over_dds_gives_the_in_process_runs_bit_identical_logs(full_run):
    """Lock-step determinism over ROS: the simulation node built in the test's process from the runner's command
    line (NodeInThisProcess: the same SimNode, parameters and services as the process) and the controller over DDS
    log the in-process run's joint positions, velocities and grip forces bit for bit (2 s: through the lift)."""
    first = full_run
    second = run_scenario("pick_shake_place", first.engine, params=FAST, duration=2.0,
                          node_factory=NodeInThisProcess)
    n = len(second.log["t"])
    assert n > 100
    np.testing.assert_array_equal(second.log["t"], first.log["t"][:n])
    assert np.array_equal(second.log["q"], first.log["q"][:n]), "joint positions differ between runs"
    assert np.array_equal(second.log["v"], first.log["v"][:n]), "joint velocities differ between runs"
    assert np.array_equal(second.log["grip"], first.log["grip"][:n])


def test_tick_trajectory_keeps_the_committed_segment():
    """Determinism mechanism: a new command never changes the targets before the next tick, so the node
    executes the same targets whenever within the tick it receives the message."""
    T = 20_000_000
    plan = TickTrajectory(["a", "b"], [0.0, 1.0], T)
    plan.replace_after(0, [2 * T, 5 * T], [[1.0, 1.0], [4.0, -2.0]])
    before = [plan.at(t) for t in range(3 * T, 4 * T + 1, T // 4)]
    msg = plan.replace_after(3 * T, [6 * T], [[0.0, 0.0]])
    after = [plan.at(t) for t in range(3 * T, 4 * T + 1, T // 4)]
    np.testing.assert_allclose(after, before)
    assert msg.points[0].time_from_start.sec == 0 and msg.points[0].time_from_start.nanosec == 0
    assert msg.header.stamp.nanosec == (3 * T) % 1_000_000_000
    with pytest.raises(ValueError):
        plan.replace_after(3 * T, [4 * T], [[0.0, 0.0]])


def test_a_command_received_during_its_tick_gives_the_same_targets_as_one_received_before():
    """Determinism, the node's side: the trajectory sent at tick t_k (stamp t_k, first segment = the old
    plan's [t_k, t_k + T]) sampled at the node's sub-steps inside that tick gives bit-identical targets to the
    previous trajectory, which the node executes until the new one arrives (the CI run of 6200126 differed)."""
    T, dt_ns = 20_000_000, 2_000_000
    rng = np.random.default_rng(0)
    plan = TickTrajectory(["a", "b"], [0.3, -1.2], T)
    limits = JointLimits(("a", "b"), np.full(2, -10.0), np.full(2, 10.0), np.full(2, 1e3), np.full(2, 1e3))

    def sampler(msg):
        times = [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in msg.points]
        traj = validate_trajectory(limits, ["a", "b"], times, [p.positions for p in msg.points],
                                   [[] for _ in msg.points], start_time=msg.header.stamp.sec + 1e-9 *
                                   msg.header.stamp.nanosec)
        return TrajectorySampler(traj, traj.start_time, np.zeros(2), np.zeros(2))

    previous, compared = None, 0
    for k in range(1, 120):
        t_k = k * T
        if k % 30 == 1:      # a longer move now and then, else the force loop's one-point commands
            msg = plan.replace_after(t_k, t_k + T * np.arange(2, 9), rng.normal(size=(7, 2)))
        else:
            msg = plan.replace_after(t_k, [t_k + 2 * T], rng.normal(size=(1, 2)))
        new = sampler(msg)
        if previous is not None:
            for step in range(t_k // dt_ns, (t_k + T) // dt_ns):
                for t in (step * 2e-3, (step + 1) * 2e-3):       # the update's time and one period ahead
                    a, b = previous.sample(t)[0].copy(), new.sample(t)[0].copy()
                    assert np.array_equal(a, b), (k, step, a - b)
                    compared += 1
        previous = new
    assert compared == 2 * 10 * 118


def test_runner_rejects_bad_scenario_and_engine(capsys):
    assert runner_main(["no_such_scenario"]) == 2
    assert "valid scenarios: pick_shake_place" in capsys.readouterr().err
    assert runner_main(["pick_shake_place", "--engine", "warp"]) == 2
    assert "valid engines" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="valid scenarios"):
        run_scenario("nope")
    with pytest.raises(ConfigError, match="unknown transport 'dds'; valid transports: inprocess, ros"):
        run_scenario("pick_shake_place", transport="dds")


@pytest.mark.process
def test_readme_main_command_runs_scenario_1_to_the_in_process_runs_verdict_and_logs(ros, tmp_path):
    """What `make demo` runs (`python -m contact_sim_ros.scenarios.runner`, default scenario and engine: a runner
    process that starts a sim_node process, real DDS), shortened: it exits 0 with the success verdict and its
    numbers; and the run is the in-process run's twin (InProcessLink: the node's ros2_control classes and stepping
    loop, no DDS): the lock-step ROS run is deterministic (every command acts from the first step of its tick, as in
    process: ros/command_intake.py), so the same verdict, the same numbers (as printed) and the logged joint states,
    grip forces and wrist loads (--log) bit-identical. `ros` only for the isolated ROS domain of conftest.py."""
    fast = [f"--set={k}={v}" for k, v in FAST.items()]
    proc = subprocess.run([sys.executable, "-m", "contact_sim_ros.scenarios.runner", *fast, "--quiet",
                           "--log", str(tmp_path / "run")], cwd=REPO, capture_output=True, text=True, timeout=240)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "pick_shake_place" in out and "SUCCESS (tamsi)" in out, out[-3000:]
    assert "held_mass_kg" in out and "Traceback" not in out, out[-3000:]
    ros_log = dict(np.load(tmp_path / "run_tamsi.npz"))
    r = run_scenario("pick_shake_place", "tamsi", params=FAST, transport="inprocess")
    assert r.success and f"SUCCESS (tamsi): {r.reason}\n" in out, (r.reason, out[-3000:])
    timing = ("wall_time_s", "real_time_factor")
    for k, v in r.numbers.items():
        if k not in timing:
            assert f"    {k:32s} {_fmt(v)}\n" in out, (k, v, out[-3000:])
    assert r.log["q"].shape == ros_log["q"].shape
    for key in ("t", "q", "v", "grip", "load"):
        same = r.log[key] == ros_log[key]
        assert np.all(same), (key, "first difference at tick", int(np.argmin(same.reshape(len(same), -1).all(1))),
                              "of", len(same), float(np.max(np.abs(r.log[key] - ros_log[key]))))
    # (no comparison of the two runs' real-time factors: wall-clock ratios of runs made one after the other follow
    # the machine's load - at load 23 the in-process run had 0.37, the ROS run 1.92; docs/scenarios.md gives the times)


def test_a_node_in_this_process_with_a_bad_scene_is_a_clear_error_and_leaves_nothing_running(tmp_path):
    """NodeInThisProcess: a scene file that does not exist is named (the node's ConfigError, as sim_node's exit 2
    message), and no executor thread is left spinning; a good command line afterwards builds and closes a node."""
    import threading
    before = {t.name for t in threading.enumerate()}
    missing = tmp_path / "no_such_scene.yaml"
    with pytest.raises(ConfigError, match="no_such_scene.yaml"):
        NodeInThisProcess(["--scene", str(missing), "--real-time-factor", "0", "--paused"])
    assert "scenario_sim_node" not in {t.name for t in threading.enumerate()} - before
    node = NodeInThisProcess(["--scene", str(REPO / SCENARIOS["franka_rod"].scene), "--real-time-factor", "0",
                              "--paused", "--namespace", f"/bad_scene_{os.getpid()}"])
    try:
        assert node.state() == "still running"
        assert Path(node.node.sim.scene.source).name == "scenario_franka_rod.yaml" and node.node.model.nv == 14
    finally:
        out = node.close()
    assert out == "" and node.state() == "shut down"


def test_in_process_hand_scenario_with_contact_wrench_topics():
    """A hand scenario (per-link contact wrenches, a lift stage robot mapping with default controllers) in
    process: the BarrettHand lifts the bottle with the stage carrying its weight."""
    r = run_scenario("barrett_cylinder", "tamsi", transport="inprocess")
    assert r.success, f"{r.reason}\n{r.numbers}"
    assert r.object_poses and max(p[2] for p in r.object_poses.values()) > 0.0901 + 0.08   # lifted ~10 cm


def test_commands_published_before_a_step_act_from_its_first_step():
    """Lock-step determinism, the node's side (issue 42, item 4; ros/command_intake.py): each tick the client
    publishes a burst of 8 arm trajectories and then calls ~/step. Each trajectory starts from the joint state when
    the controller takes it (first point 2 periods ahead), so a trajectory taken some steps into the tick moves
    the arm differently; the last one of the burst wins. The node applies the whole burst before the tick's first
    step, as the in-process link does: the joint states of 15 ticks are bit-identical to the in-process run's.
    (Before, the executor took the burst's later messages while the steps ran, in most ticks.)"""
    spec = SCENARIOS["pick_shake_place"]
    dt, period, steps = spec.time_step, spec.period, int(round(spec.period / spec.time_step))
    ns = f"/lockstep_burst_{os.getpid()}"
    # the node built in this process from sim_node's command line (ros/node_in_process.py), over DDS
    node = NodeInThisProcess(["--scene", str(REPO / spec.scene), "--engine", "tamsi", "--time-step", repr(dt),
                              "--real-time-factor", "0", "--paused", "--namespace", ns, "--ros-args", "-p",
                              f"step_count:={steps}", "-p", "publish_clock:=false", "-p", "tf_rate:=0.0"])
    arm = [f"iiwa_joint_{k}" for k in range(1, 8)]
    rng = np.random.default_rng(7)
    offsets = rng.normal(0.0, 0.05, size=(15, 8, 7))       # tick, message of the burst, joint (rad)
    runs = {}
    links = {"ros": lambda: RobotLink(ns, period, "lockstep", trajectory_controllers=("arm_controller",),
                                      timeout=120.0),
             "inprocess": lambda: InProcessLink(REPO / spec.scene, "tamsi", dt, period,
                                                trajectory_controllers=("arm_controller",))}
    try:
        for name, make in links.items():
            link = make()
            try:
                t, _ = link.start()
                q0 = positions_of(link.state(need=())["js"], arm)
                log = []
                for burst in offsets:
                    for offset in burst:
                        msg = JointTrajectory(joint_names=arm)
                        msg.header.stamp = to_time(t)
                        msg.points.append(JointTrajectoryPoint(positions=(q0 + offset).tolist(),
                                                               time_from_start=to_duration(2 * link.period_ns)))
                        link.publish("arm_controller", msg)
                    t = link.advance()
                    js = link.state(need=())["js"]
                    log.append((t, np.array(js.position), np.array(js.velocity)))
            except Exception as exc:
                raise AssertionError(f"{name}: {exc}\nnode output (tail):\n{node.output()[-2000:]}") from exc
            finally:
                link.close()
            runs[name] = log
    finally:
        node.close()
    for k, ((t_ros, q_ros, v_ros), (t_in, q_in, v_in)) in enumerate(zip(runs["ros"], runs["inprocess"])):
        assert t_ros == t_in
        assert np.array_equal(q_ros, q_in) and np.array_equal(v_ros, v_in), \
            (k, np.max(np.abs(q_ros - q_in)), "the ROS run differs from the in-process run at this tick")
