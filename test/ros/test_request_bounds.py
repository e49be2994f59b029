"""Requests and files that used to kill, pause or confuse the node, over real DDS (issue 31, defects 3, 4, 7, 10,
11 and the second node in one namespace):

* StepSimulation with 2^63 - 1 or 2^64 - 1 (a -1 from a C++ client) steps, SimulateSteps with 2^64 - 1 and
  ``step_count`` 1e12 for ``~/step`` are refused with a reason; the node keeps answering and stepping;
* a SetEntityState twist of 1e6 m/s and a spawned 1e12 kg box are refused with a reason; the node keeps playing;
* an object in free fall for 12 s (the Allegro preset has no ground) does not pause the simulation;
* a 1e9 N squeeze through the mug: each step fails with "deep interpenetration", counted on /diagnostics, and the
  node pauses itself after 10 such steps;
* a second node in the namespace of a running one refuses to start, naming it;
* files the node reads at start-up (controllers file, scene, URDF, robot preset, ros2_control description, ROS
  parameter file) that are missing, a directory, malformed or not text: exit 2, one line naming the file;
* SIGINT during the imports or while the node is being built: exit 0 before it simulates, no traceback;
* three FollowJointTrajectory goals of 100k points each (the bound per goal) leave no memory behind in the node
  (defect 6: 60-80 MB each, for good).

What a request or a file does to the node is tested with the node built in the test's process (inprocess_sim_node.py,
node size; its log read from the test's captured stderr); what the process does (its exit code and output for a bad
file, a second node's refusal, the ROS graph look, signals at start-up) with processes (process size): one start
per case there, the files' messages each checked in this process.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectoryPoint

from contact_sim_ros.errors import ContactSimError
from inprocess_sim_node import InProcessSimNode, running_node
from ros_testing import REPO, ActionClient, NodeProcess, error_lines, stamp_s, wait_until

si = pytest.importorskip("simulation_interfaces")
from geometry_msgs.msg import PoseStamped  # noqa: E402
from simulation_interfaces.action import SimulateSteps  # noqa: E402
from simulation_interfaces.msg import Result  # noqa: E402
from simulation_interfaces.srv import SetEntityState, SpawnEntity, StepSimulation  # noqa: E402

NS = "/bounds"
NO_CLOCK = str(Path(__file__).resolve().parent / "scenes" / "no_clock.yaml")
FAILED = Result.RESULT_OPERATION_FAILED
UINT64_MAX, INT64_MAX = 2 ** 64 - 1, 2 ** 63 - 1
STATUS_ABORTED, STATUS_SUCCEEDED = 6, 4
IIWA = [f"iiwa_joint_{i}" for i in range(1, 8)]


def assert_clean(output: str):
    for bad in ("Traceback", "KeyboardInterrupt", "RCLError", "OverflowError"):
        assert bad not in output, output


def simulation_status(msgs, ns: str):
    return [m.status[0] for m in list(msgs) if m.status and m.status[0].name == f"{ns}/contact_sim: simulation"]


def value(status, key):
    return next(kv.value for kv in status.values if kv.key == key)


class Log:
    """The in-process nodes' log as captured on the test's stderr (rcutils; stdout if so configured); ``ns``: the
    lines of the nodes in that namespace."""

    def __init__(self, capfd):
        self.capfd, self.text = capfd, ""

    def __call__(self, ns: str | None = None) -> str:
        captured = self.capfd.readouterr()
        self.text += captured.err + captured.out
        if ns is None:
            return self.text
        return "\n".join(line for line in self.text.splitlines() if f"[{ns}." in line)


@pytest.fixture(scope="module")
def node(ros):
    """iiwa + WSG, real time, one box spawned by the tests; in this process."""
    with running_node(ros, NS, "--robot", "iiwa_wsg", "--engine", "tamsi", "--namespace", NS.strip("/"),
                      "--config", NO_CLOCK) as built:
        yield built


def advancing(js) -> bool:
    """The joint states' stamps advance (the node steps)."""
    t = stamp_s(js[-1].header.stamp)
    wait_until(lambda: stamp_s(js[-1].header.stamp) > t + 0.05, 30, what="joint_states to advance")
    return True


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise AssertionError("no VmRSS")


def test_huge_step_counts_are_refused_with_a_reason(node, ros, capfd):
    sim, js = node
    output = Log(capfd)
    assert ros.call(SetBool, f"{NS}/contact_sim/pause", SetBool.Request(data=True)).success
    try:
        for n in (INT64_MAX, UINT64_MAX):
            res = ros.call(StepSimulation, f"{NS}/step_simulation", StepSimulation.Request(steps=n))
            assert res.result.result == FAILED
            assert f"{n} steps exceed the bound of 1000000000 steps per request" in res.result.error_message
        client = ActionClient(ros.node, SimulateSteps, f"{NS}/simulate_steps")
        assert client.wait_for_server(timeout_sec=30)
        goal = client.send_goal_async(SimulateSteps.Goal(steps=UINT64_MAX))
        wait_until(goal.done, 30, what="goal response")
        result = goal.result().get_result_async()
        wait_until(result.done, 30, what="simulate_steps result")
        assert result.result().status == STATUS_ABORTED
        assert "exceed the bound" in result.result().result.result.error_message
        # ~/step: step_count 1e12 is refused by the parameter callback (it was an OverflowError in ~/step)
        big = Parameter(name="step_count", value=ParameterValue(type=ParameterType.PARAMETER_INTEGER,
                                                                  integer_value=10 ** 12))
        res = ros.call(SetParameters, f"{NS}/contact_sim/set_parameters", SetParameters.Request(parameters=[big]))
        assert not res.results[0].successful and "[1, 1000000000]" in res.results[0].reason
        t0 = stamp_s(js[-1].header.stamp)
        step = ros.call(Trigger, f"{NS}/contact_sim/step", Trigger.Request())
        assert step.success and "stepped 1 step(s)" in step.message, step.message
        assert ros.call(StepSimulation, f"{NS}/step_simulation", StepSimulation.Request(steps=5)).result.result \
            == Result.RESULT_OK
        wait_until(lambda: stamp_s(js[-1].header.stamp) >= t0 + 0.006 - 1e-9, 10, what="6 steps published")
    finally:
        assert ros.call(SetBool, f"{NS}/contact_sim/pause", SetBool.Request(data=False)).success
    assert advancing(js) and not sim.callback_errors, sim.callback_errors
    assert_clean(output())


def test_requests_that_would_diverge_are_refused_and_the_node_keeps_playing(node, ros):
    sim, js = node
    pose = PoseStamped()
    pose.pose.position.x, pose.pose.position.z, pose.pose.orientation.w = 1.0, 0.025, 1.0
    heavy = ros.call(SpawnEntity, f"{NS}/spawn_entity", SpawnEntity.Request(
        name="anvil", uri="primitive://box?size=0.05,0.05,0.05&mass=1e12", initial_pose=pose))
    assert heavy.result.result == SpawnEntity.Response.RESOURCE_PARSE_ERROR
    assert "density of 8e+15 kg/m^3, beyond any solid" in heavy.result.error_message, heavy.result.error_message
    spawned = ros.call(SpawnEntity, f"{NS}/spawn_entity", SpawnEntity.Request(
        name="cube", uri="primitive://box?size=0.05,0.05,0.05&mass=0.2", initial_pose=pose))
    assert spawned.result.result == Result.RESULT_OK, spawned.result.error_message
    try:
        request = SetEntityState.Request(entity="cube")
        request.state.pose = pose.pose
        request.state.twist.linear.x = 1e6
        res = ros.call(SetEntityState, f"{NS}/set_entity_state", request)
        assert res.result.result == FAILED
        assert re.search(r"twist of 'cube' beyond the simulation's divergence bounds at t = [\d.]+ s: speed 1e\+06 "
                         r"m/s \(bound \d+(\.\d+)?\)", res.result.error_message), res.result.error_message
        request.state.twist.linear.x = 2.0          # a physical twist is still taken
        assert ros.call(SetEntityState, f"{NS}/set_entity_state", request).result.result == Result.RESULT_OK
        assert advancing(js)
        diagnostics = ros.subscribe(DiagnosticArray, "/diagnostics")
        wait_until(lambda: simulation_status(diagnostics, NS), 10, what="diagnostics")
        status = simulation_status(diagnostics, NS)[-1]
        assert value(status, "paused") == "False" and value(status, "solver_failures") == "0", status
    finally:
        from simulation_interfaces.srv import DeleteEntity
        ros.call(DeleteEntity, f"{NS}/delete_entity", DeleteEntity.Request(entity="cube"))


@pytest.mark.process
def test_a_second_node_in_the_namespace_refuses_to_start_naming_the_first(node):
    """On one host the namespace claim (ros/namespace_claim.py) refuses it at once, whatever the load: no wait for
    DDS discovery (the graph look alone missed the running node's services on loaded machines)."""
    import subprocess
    for extra in ([], ["--node-name", "sim_two"]):
        second = NodeProcess(["--robot", "iiwa_wsg", "--namespace", NS.strip("/"), "--config", NO_CLOCK, *extra])
        try:
            try:
                code = second.proc.wait(120)
            except subprocess.TimeoutExpired:
                code = None     # it started: its output says why
        finally:
            second.stop()
        out = second.output()
        assert code == 2, out
        assert (f"sim_node: error: another simulation node already runs in namespace '{NS}': {NS}/contact_sim "
                f"(robot 'iiwa_wsg', engine 'tamsi'), process {os.getpid()} on this host") in out, out
        assert_clean(out)
    assert not node[0].callback_errors, node[0].callback_errors


REMOTE_NODE = """
import os, sys, threading, rclpy
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger
rclpy.init()
node = Node("contact_sim", namespace="/remote")
node.declare_parameter("robot", "franka")
node.declare_parameter("engine", "lagged")
node.create_service(SetBool, "~/pause", lambda req, res: res)
node.create_service(Trigger, "~/step", lambda req, res: res)
node.create_publisher(JointState, "joint_states", 10)
threading.Thread(target=rclpy.spin, args=(node,), daemon=True).start()
print("on the graph", flush=True)
sys.stdin.read()
os._exit(0)
"""


@pytest.mark.process
def test_a_simulation_node_seen_only_on_the_ros_graph_is_named_and_refused(ros):
    """A simulation node the namespace claim cannot see (one on another host; here a process that serves what a
    simulation node serves and answers its parameters, without the claim) is found on the ROS graph: the new
    node refuses to start naming it. DDS discovery has no deadline: where the new node has not discovered the
    other's services within its start-up window (GRAPH_DISCOVERY_S; seen once on a loaded machine), it starts and
    its second look, 3 s later, logs the ERROR naming the other node; either way it is named."""
    import subprocess
    import sys
    remote = subprocess.Popen([sys.executable, "-c", REMOTE_NODE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    late = "another simulation node runs in namespace '/remote': /remote/contact_sim: both publish"
    try:
        assert remote.stdout.readline().strip() == "on the graph"
        new = NodeProcess(["--robot", "iiwa_wsg", "--namespace", "remote", "--config", NO_CLOCK])
        try:
            wait_until(lambda: new.proc.poll() is not None or late in new.output(), 120,
                       what=lambda: f"the refusal or the late ERROR: {new.output()}")
            code = new.proc.poll()
        finally:
            new.stop()
        out = new.output()
        if code is None:          # discovered after the start-up window: named by the second look
            assert late in out, out
            return
        assert code == 2, out
        assert ("sim_node: error: another simulation node already runs in namespace '/remote': /remote/contact_sim "
                "(robot 'franka', engine 'lagged'); stop it") in out, out
        assert_clean(out)
    finally:
        remote.stdin.close()
        remote.wait(10)


STALE_ENTRY = """
import sys, rclpy
from rclpy.node import Node
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectoryPoint
rclpy.init()
node = Node("contact_sim", namespace="/stale")
node.create_service(SetBool, "~/pause", lambda req, res: res)
node.create_service(Trigger, "~/step", lambda req, res: res)
print("on the graph", flush=True)
sys.stdin.read()        # never spins: on the graph, answers nothing (a killed process's entry before its lease ends)
"""


@pytest.mark.process
def test_a_stale_graph_entry_of_the_same_name_is_warned_about_and_the_node_starts(ros):
    """The graph entry of a killed simulation node (same name and namespace, answering nothing: a respawn after
    ``on_failure: exit``) does not stop a new one: it starts with a warning. (It used to answer its own parameter
    request, as the entry's /stale/contact_sim/get_parameters, and refuse to start.)"""
    import subprocess
    import sys
    stale = subprocess.Popen([sys.executable, "-c", STALE_ENTRY], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert stale.stdout.readline().strip() == "on the graph"
        new = NodeProcess(["--robot", "iiwa_wsg", "--namespace", "stale", "--config", NO_CLOCK])
        try:
            js = ros.subscribe(JointState, "/stale/joint_states", keep=2)
            wait_until(lambda: js or new.proc.poll() is not None, 120, what="/stale/joint_states")
            out = new.output()
            assert new.proc.poll() is None, out
            # named by the start-up look (a warning) or, where DDS discovered the entry only after the start-up
            # window (seen on a loaded machine), by the second look 3 s later (an ERROR)
            warned = "/stale/contact_sim is on the ROS graph in this namespace but does not answer"
            late = "another simulation node runs in namespace '/stale': /stale/contact_sim"
            wait_until(lambda: warned in new.output() or late in new.output(), 30,
                       what=lambda: f"the stale entry named: {new.output()}")
            assert new.proc.poll() is None, new.output()
        finally:
            new.stop()
    finally:
        stale.stdin.close()
        stale.wait(10)


# ------------------------------------------------------------------------------------ scene-fitting bounds

def test_a_12_s_free_fall_does_not_pause_and_a_squeeze_through_the_mug_does(ros, monkeypatch, capfd, tmp_path):
    falling = tmp_path / "falling.yaml"
    falling.write_text("robot: allegro\nobjects:\n  - {name: can, shape: {cylinder: [0.03, 0.1]}, mass: 0.3, "
                       "pose: {xyz: [0.5, 0, 0.5]}}\n")
    squeeze = tmp_path / "squeeze.yaml"
    ramp = "1e9 * min(t / 0.05, 1)"
    squeeze.write_text(f"""gravity: [0, 0, 0]
robot:
  urdf: {REPO / 'scenes' / 'tamsi_gripper.urdf'}
  initial_positions: {{lift: -0.15, left_finger_slide: 0.0, right_finger_slide: 0.0}}
  gains:
    lift: {{kp: 20000.0, kd: 1000.0}}
objects:
  - {{name: mug, shape: {{cylinder: [0.04, 0.10]}}, mass: 0.1, pose: {{xyz: [0, 0, -0.15]}}}}
materials:
  default: {{stiffness: 2.0e4, dissipation: 5.0, friction: 0.1, restitution: 0.0}}
inputs:
  external_forces:
    - {{body: left_finger, force: ["{ramp}", 0, 0]}}
    - {{body: right_finger, force: ["-{ramp}", 0, 0]}}
""")
    diagnostics = ros.subscribe(DiagnosticArray, "/diagnostics")
    js = ros.subscribe(JointState, "/fall/joint_states", keep=5)
    common = ("--real-time-factor", "0", "--config", NO_CLOCK, "--ros-args", "-p", "diagnostics_rate:=4.0")
    output = Log(capfd)
    # one after the other (each steps as fast as it can in this process)
    squeezed = InProcessSimNode.from_command_line(monkeypatch, "--scene", str(squeeze), "--namespace", "squeeze",
                                                  "--engine", "tamsi", *common)
    try:
        def paused_by_failure():
            s = simulation_status(diagnostics, "/squeeze")
            return s and s[-1].message.startswith("paused by a failure") and s[-1]
        status = wait_until(paused_by_failure, 120, what="/squeeze to pause itself")
        assert "deep interpenetration: " in value(status, "pause_reason")
        assert int(value(status, "solver_failures")) >= 10
        out = output("squeeze")
        assert "10 consecutive failed steps at t = " in out and "deep interpenetration" in out, out
        assert not squeezed.callback_errors, squeezed.callback_errors
    finally:
        squeezed.close()
    fall = InProcessSimNode.from_command_line(monkeypatch, "--scene", str(falling), "--namespace", "fall", *common)
    try:
        wait_until(lambda: js and stamp_s(js[-1].header.stamp) >= 12.0, 240, what="12 s of free fall")
        out = output("fall")
        assert "simulating" in out and "diverged" not in out and "step failed" not in out, out
        n = len(diagnostics)
        wait_until(lambda: simulation_status(diagnostics[n:], "/fall"), 10, what="/fall diagnostics")
        status = simulation_status(diagnostics[n:], "/fall")[-1]
        assert value(status, "paused") == "False" and value(status, "solver_failures") == "0", status.message
        assert not fall.callback_errors, fall.callback_errors
    finally:
        fall.close()


# ------------------------------------------------------------------------------------ files read at start-up

BAD_FILES = {
    # name: (flags, expected text after "sim_node: error: ")
    "controllers_file missing": (["--ros-args", "-p", "controllers_file:={tmp}/none.yaml"],
                                 "{tmp}/none.yaml: controllers file: file not found"),
    "controllers_file directory": (["--ros-args", "-p", "controllers_file:={tmp}"],
                                   "{tmp}: controllers file: is a directory, not a file"),
    "controllers_file malformed": (["--ros-args", "-p", "controllers_file:={tmp}/broken.yaml"],
                                   "{tmp}/broken.yaml: malformed YAML (controllers file): "),
    "controllers_file binary": (["--ros-args", "-p", "controllers_file:={tmp}/binary.yaml"],
                                "{tmp}/binary.yaml: controllers file: not a text file"),
    "controllers_file constraint typo": (["--ros-args", "-p", "controllers_file:={tmp}/typo.yaml"],
                                         "unknown parameter 'constraints.iiwa_joint_1.gaol'; valid parameters: "),
    "scene directory": (["--scene", "{tmp}"], "parameter 'scene': is a directory, not a file: {tmp}"),
    "scene malformed": (["--scene", "{tmp}/broken.yaml"], "{tmp}/broken.yaml: malformed YAML (parameter 'scene')"),
    "urdf directory": (["--urdf", "{tmp}"], "parameter 'urdf': is a directory, not a file: {tmp}"),
    "urdf malformed": (["--urdf", "{tmp}/broken.urdf"], "{tmp}/broken.urdf: malformed URDF XML: "),
    "robot preset malformed": (["--robot", "{tmp}/broken.yaml"], "{tmp}/broken.yaml: malformed YAML (a robot preset)"),
    "robot preset directory": (["--robot", "{tmp}/folder.yaml"], "robot preset {tmp}/folder.yaml: is a directory"),
    "ros2_control_file directory": (["--ros-args", "-p", "ros2_control_file:={tmp}"],
                                    "ros2_control description {tmp}: is a directory, not a file"),
    "parameter file directory": (["--config", "{tmp}"], "parameter file is a directory, not a file: {tmp}"),
}
TYPO = """controller_manager:
  ros__parameters:
    update_rate: 500
    joint_state_broadcaster: {type: joint_state_broadcaster/JointStateBroadcaster}
    arm_controller: {type: joint_trajectory_controller/JointTrajectoryController}
arm_controller:
  ros__parameters:
    joints: [iiwa_joint_1]
    constraints:
      iiwa_joint_1: {trajectory: 0.1, gaol: 0.01}
"""


# the entry point's part (exit 2, one "sim_node: error: " line, no traceback), once for a file read before rclpy
# starts (main(): param_defaults_of) and once for one read while the node is built (SimNode)
IN_A_PROCESS = ("parameter file directory", "controllers_file missing")


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad_files")
    (tmp / "broken.yaml").write_text("robot: iiwa_wsg\nobjects: [\n")
    (tmp / "binary.yaml").write_bytes(b"\xff\xfe\x00binary")
    (tmp / "broken.urdf").write_text('<robot name="x"><link name="a"')
    (tmp / "typo.yaml").write_text(TYPO)
    (tmp / "folder.yaml").mkdir()
    return tmp


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_a_bad_file_is_refused_naming_it(bad_files, name, monkeypatch):
    """What main() prints after "sim_node: error: " (the ContactSimError of reading the parameters or building
    the node, ros/sim_node.py main()): one line naming the file."""
    tmp = bad_files
    flags = ["--namespace", f"bad_file_{list(BAD_FILES).index(name)}", *(a.format(tmp=tmp) for a in BAD_FILES[name][0])]
    with pytest.raises(ContactSimError) as refused:
        InProcessSimNode.from_command_line(monkeypatch, *flags).close()
    message = str(refused.value)
    assert "\n" not in message and BAD_FILES[name][1].format(tmp=tmp) in message, message


@pytest.mark.process
def test_a_bad_file_is_one_line_naming_it_and_exit_2(bad_files):
    # namespaces of their own: a node that failed to build in this process (test_a_bad_file_is_refused_naming_it)
    # keeps its namespace claim while this process lives
    procs = {name: NodeProcess(["--namespace", f"bad_file_exit_{list(BAD_FILES).index(name)}",
                                *(a.format(tmp=bad_files) for a in BAD_FILES[name][0])]) for name in IN_A_PROCESS}
    for name, proc in procs.items():
        code, out = proc.ended(300)
        assert code == 2, out
        errors = error_lines(out)
        assert len(errors) == 1 and BAD_FILES[name][1].format(tmp=bad_files) in errors[0], out
        assert_clean(out)


# ------------------------------------------------------------------------------------ signals at start-up

def catches(pid: int, sig: int) -> bool:
    """The process has a handler for ``sig`` (its SigCgt mask in /proc; False once it has ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(mask & (1 << (sig - 1)))


@pytest.mark.process
def test_sigint_during_the_imports_exits_0_at_once():
    """As soon as the process handles SIGTERM (Python itself does not: the node's package installs it before the
    node's module is compiled) and before the node logs anything, SIGINT ends it with 0, quietly, before it
    simulates."""
    proc = NodeProcess(["--robot", "iiwa_wsg", "--namespace", "sig_imports", "--config", NO_CLOCK])
    try:
        wait_until(lambda: catches(proc.proc.pid, signal.SIGTERM) or proc.proc.poll() is not None, 60, period=0.001,
                   what="the early signal handlers")
        assert proc.proc.poll() is None and "contact_sim]" not in proc.output(), proc.output()
    except BaseException:
        proc.stop()
        raise
    assert_clean(_interrupt(proc))


def _interrupt(proc) -> str:
    """SIGINT to the starting node: it exits 0 before it simulates (it stops building, not finishes first: the
    building left takes seconds more); its output."""
    proc.proc.send_signal(signal.SIGINT)
    try:
        proc.proc.wait(10)
    finally:
        proc.stop()
    out = proc.output()
    assert proc.proc.returncode == 0, out
    assert "simulating" not in out, out
    return out


@pytest.mark.process
def test_sigint_while_the_node_is_built_exits_0_before_it_simulates():
    """A bare URDF: the node warns about default gains right after building its Simulator, then builds controllers,
    publishers and services (~1 s); SIGINT at the warning stops the building: exit 0, quietly, never
    'simulating' (before, the node finished building first)."""
    proc = NodeProcess(["--urdf", str(REPO / "scenes" / "tamsi_gripper.urdf"), "--namespace", "sig_build",
                        "--config", NO_CLOCK])
    try:
        wait_until(lambda: "no PD gains given" in proc.output() or proc.proc.poll() is not None, 300,
                   period=0.002, what="the default gains warning")
    except BaseException:
        proc.stop()
        raise
    assert_clean(_interrupt(proc))


def test_100k_point_goals_leave_no_memory_in_the_node(node, ros):
    """Defect 6 over DDS: three goals of MAX_TRAJECTORY_POINTS = 100k points (one every 10 us of a 1 s move there
    and back) each run to success; the node's resident size after the second and the third is within 60 MB of
    after the first, one goal's worth of the defect (each goal kept 60-80 MB for good: +120 MB or more over two
    more goals; with the fix taken out, the points kept, this test failed: 394, 467, 509 MB). What stays is the
    allocator's: seven goals gave 394, 406, 409, 423, 410, 430, 417 MB (no trend)."""
    sim, js = node
    client = ActionClient(ros.node, FollowJointTrajectory, f"{NS}/arm_controller/follow_joint_trajectory")
    assert client.wait_for_server(timeout_sec=30), "no follow_joint_trajectory action server"
    q0 = np.array([dict(zip(js[-1].name, js[-1].position))[j] for j in IIWA])
    n = 100_000
    s = np.arange(1, n + 1) / n
    goal = FollowJointTrajectory.Goal()          # built once (the node deserializes its own copy of each)
    goal.trajectory.joint_names = IIWA
    bump = 0.05 * np.sin(np.pi * s)              # out and back: every goal ends where it started
    ns_from_start = np.arange(1, n + 1) * 10_000
    goal.trajectory.points = [
        JointTrajectoryPoint(positions=(q0 + b).tolist(), time_from_start=Duration(sec=int(t // 1_000_000_000),
                                                                                   nanosec=int(t % 1_000_000_000)))
        for b, t in zip(bump, ns_from_start)]
    rss = []
    for k in range(3):
        sent = client.send_goal_async(goal)
        wait_until(sent.done, 60, what=f"goal {k} response")
        handle = sent.result()
        assert handle.accepted, f"goal {k} of {n} points refused"
        result = handle.get_result_async()
        wait_until(result.done, 120, what=f"goal {k} result")
        assert result.result().status == STATUS_SUCCEEDED, result.result().result.error_string
        del handle, result, sent
        advancing(js)                            # the node has moved on (the goal's handle released)
        rss.append(rss_mb(os.getpid()))          # the node is in this process
    print(f"RSS after each goal (MB): {[round(r, 1) for r in rss]}")
    assert max(rss[1:]) - rss[0] < 60.0, f"node RSS after each goal (MB): {[round(r, 1) for r in rss]}"
    assert not sim.callback_errors, sim.callback_errors
