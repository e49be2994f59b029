"""The simulation node over real DDS (iiwa_wsg on the ground, TAMSI, 1 ms, real time): commands on every
interface move the joints, trajectories keep their timing, /tf covers every link, /clock advances by exactly
one time step per step, pause/step/reset, and bad commands are rejected and counted while stepping goes on. The node
is built in this process (inprocess_sim_node.py); the stepping thread's SCHED_FIFO is a node process's (`process`)."""

import math
import os
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from builtin_interfaces.msg import Duration
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger
from tf2_msgs.msg import TFMessage
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from inprocess_sim_node import InProcessSimNode
from ros_testing import use_controllers, wait_until

ARM = [f"iiwa_joint_{i}" for i in range(1, 8)]
FINGERS = ["wsg_finger_left_joint", "wsg_finger_right_joint"]
DT = 1e-3


@pytest.fixture(scope="module")
def node(ros):
    """iiwa_wsg (TAMSI, 1 ms, real time) built in this process, and the probe's subscriptions."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        sim = InProcessSimNode.from_command_line(monkeypatch, "--robot", "iiwa_wsg", "--engine", "tamsi",
                                                 "--time-step", str(DT), "--real-time-factor", "1.0")
        try:
            yield from _subscribed(ros, sim)
        finally:
            sim.close()
    assert not sim.callback_errors, sim.callback_errors[0]


def _subscribed(ros, sim):
    topics = {
        "joint_states": ros.subscribe(JointState, "/joint_states"),
        "clock": ros.subscribe(Clock, "/clock"),
        "tf": ros.subscribe(TFMessage, "/tf"),
        "tf_static": ros.subscribe(TFMessage, "/tf_static", latched=True),
        "description": ros.subscribe(String, "/robot_description", latched=True),
        "diagnostics": ros.subscribe(DiagnosticArray, "/diagnostics"),
    }
    wait_until(lambda: topics["joint_states"] or not sim.node.link.stepping, 60, what="/joint_states")
    assert sim.node.link.stepping, f"the stepping thread stopped: {sim.node.loop.error!r}"
    yield sim, topics


def positions(msg):
    return dict(zip(msg.name, msg.position))


def sim_time(msg_stamp):
    return msg_stamp.sec + 1e-9 * msg_stamp.nanosec


def wait_joints(topics, targets: dict, tol=1e-3, timeout=30.0):
    """Wait until the latest /joint_states is within tol of every target; returns that message."""
    def ok():
        js = topics["joint_states"]
        if not js:
            return None
        p = positions(js[-1])
        return js[-1] if all(abs(p[j] - v) <= tol for j, v in targets.items()) else None
    try:
        return wait_until(ok, timeout, what=f"joints at {targets}")
    except AssertionError:
        p = positions(topics["joint_states"][-1])
        raise AssertionError(f"joints did not reach targets: {[(j, p[j], v) for j, v in targets.items()]}")


def current(topics):
    return positions(topics["joint_states"][-1])


def next_diagnostics(topics):
    """Key -> value of the next /diagnostics message (published at 1 Hz)."""
    n = len(topics["diagnostics"])
    wait_until(lambda: len(topics["diagnostics"]) > n, 10, what="/diagnostics")
    return {kv.key: kv.value for kv in topics["diagnostics"][-1].status[0].values}


def test_joint_states_and_robot_description(node):
    _, topics = node
    js = topics["joint_states"][-1]
    assert set(ARM + FINGERS) <= set(js.name)
    assert len(js.position) == len(js.velocity) == len(js.effort) == len(js.name)
    desc = wait_until(lambda: topics["description"], 10, what="/robot_description")
    assert "<robot" in desc[-1].data and 'name="iiwa_joint_1"' in desc[-1].data


def test_tf_covers_every_link(node):
    _, topics = node
    desc = wait_until(lambda: topics["description"], 10, what="/robot_description")[-1].data
    links = {link.get("name") for link in ET.fromstring(desc).iter("link")}
    wait_until(lambda: topics["tf"] and topics["tf_static"], 10, what="/tf and /tf_static")
    moving = {t.child_frame_id for m in topics["tf"][-5:] for t in m.transforms}
    static = {t.child_frame_id for m in topics["tf_static"] for t in m.transforms}
    assert moving | static == links
    assert not moving & static
    assert {"iiwa_link_1", "iiwa_link_7", "wsg_finger_left", "wsg_finger_right"} <= moving
    parents = {t.child_frame_id: t.header.frame_id for m in topics["tf_static"] for t in m.transforms}
    assert parents["iiwa_link_0"] == "world"


def test_clock_advances_one_time_step_per_step(node):
    _, topics = node
    n0 = len(topics["clock"])
    t0 = sim_time(topics["clock"][-1].clock)
    wait_until(lambda: sim_time(topics["clock"][-1].clock) > t0 + 0.2, 30, what="0.2 s of sim time on /clock")
    ns = [m.clock.sec * 1_000_000_000 + m.clock.nanosec for m in topics["clock"][n0:]]
    assert len(ns) > 50
    steps = np.diff(ns)
    assert np.all(steps > 0) and np.all(steps % 1_000_000 == 0)   # whole steps (a lost message skips one)
    assert np.count_nonzero(steps == 1_000_000) >= 0.9 * len(steps)


def test_topics_subscribed_late_get_every_publication(node, ros):
    """The node builds and writes a topic's messages only while someone reads it (state_messages.has_readers):
    topics nobody read since the start (the F/T wrench, external torques, contact wrenches, dynamic joint states)
    flow at their configured sim-time rates as soon as a subscriber matches."""
    from control_msgs.msg import DynamicJointState
    from geometry_msgs.msg import WrenchStamped
    rates = {("/ft_sensor/wrench", WrenchStamped): 250.0, ("/external_joint_torques", JointState): 250.0,
             ("/contact_wrench/wsg_finger_left", WrenchStamped): 50.0, ("/dynamic_joint_states", DynamicJointState):
             100.0}
    got = {key: ros.subscribe(key[1], key[0]) for key in rates}
    for (topic, _), msgs in got.items():
        wait_until(lambda: len(msgs) > 3, 10, what=topic)
    n0 = {key: len(msgs) for key, msgs in got.items()}
    t0 = sim_time(node[1]["clock"][-1].clock)
    wait_until(lambda: all(sim_time(msgs[-1].header.stamp) > t0 + 0.6 for msgs in got.values()), 30,
               what="0.6 s of sim time on every topic")
    for key, rate in rates.items():
        ns = np.array([m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec for m in got[key][n0[key]:]])
        period = int(round(1e9 / rate))
        assert len(ns) >= 0.6 * rate * 0.5, (key[0], len(ns))
        steps = np.diff(ns)
        assert np.all(steps % period == 0), (key[0], steps)        # whole periods (a lost message skips one)
        assert np.count_nonzero(steps == period) >= 0.9 * len(steps), (key[0], steps)


def test_has_readers(ros, tmp_path):
    """has_readers: False for a publisher nobody subscribes to, True once a subscription matched (here in the same
    process), for a publisher the bag recorder taps (recorded without a subscriber), and for a publisher that is not
    a DDS one."""
    from contact_sim_ros.ros.bag_recorder import BagRecorder
    from contact_sim_ros.ros.state_messages import has_readers
    alone = ros.node.create_publisher(Clock, "/has_readers_alone", 10)
    read = ros.node.create_publisher(Clock, "/has_readers_read", 10)
    recorded = ros.node.create_publisher(Clock, "/has_readers_recorded", 10)
    assert not has_readers(alone) and not has_readers(read) and not has_readers(recorded)
    ros.subscribe(Clock, "/has_readers_read")
    wait_until(lambda: has_readers(read), 5, what="a matched subscription")
    assert not has_readers(alone) and not has_readers(recorded)     # as long as discovery took: still no reader
    recorder = BagRecorder(tmp_path / "bag")
    recorder.tap(recorded)
    assert has_readers(recorded) and not has_readers(alone)
    recorder.close()
    assert not has_readers(recorded)
    assert has_readers(object())


def test_position_command_on_joint_command(node, ros):
    _, topics = node
    q = current(topics)
    targets = {j: q[j] + d for j, d in zip(ARM, [0.2, -0.1, 0.15, 0.1, -0.2, 0.1, 0.3])}
    targets.update({f: 0.03 for f in FINGERS})
    ros.publish(JointState, "/joint_command", JointState(name=list(targets), position=list(targets.values())))
    wait_joints(topics, targets)


def test_position_command_on_group_controllers(node, ros):
    _, topics = node
    q = current(topics)
    arm = [q[j] + d for j, d in zip(ARM, [-0.2, 0.1, -0.15, -0.1, 0.2, -0.1, -0.3])]
    use_controllers(ros, ["arm_position_controller", "gripper_position_controller"])
    ros.publish(Float64MultiArray, "/arm_position_controller/commands", Float64MultiArray(data=arm))
    ros.publish(Float64MultiArray, "/gripper_position_controller/commands", Float64MultiArray(data=[0.02, 0.025]))
    wait_joints(topics, {**dict(zip(ARM, arm)), "wsg_finger_left_joint": 0.02, "wsg_finger_right_joint": 0.025})


def test_velocity_and_effort_interfaces(node, ros):
    """Joint 1 (vertical axis) under velocity control reaches the commanded rate, reduced only by its viscous
    joint damping: v = kd v* / (kd + d) with kd = 80, d = 0.5 N*m*s/rad; the fingers under a constant opening
    effort (raw, no gravity compensation) run to their upper limit 0.055 m."""
    _, topics = node
    use_controllers(ros, ["arm_velocity_controller", "gripper_effort_controller"])
    ros.publish(Float64MultiArray, "/arm_velocity_controller/commands",
                Float64MultiArray(data=[0.2, 0, 0, 0, 0, 0, 0]))
    ros.publish(Float64MultiArray, "/gripper_effort_controller/commands", Float64MultiArray(data=[15.0, 15.0]))
    n0 = len(topics["joint_states"])
    wait_until(lambda: len(topics["joint_states"]) > n0 + 600, 30, what="joint states under velocity control")
    v1 = [dict(zip(m.name, m.velocity))["iiwa_joint_1"] for m in topics["joint_states"][-100:]]
    assert np.mean(v1) == pytest.approx(0.2 * 80.0 / 80.5, rel=0.01)
    wait_joints(topics, {f: 0.055 for f in FINGERS})
    # back to position control where we are
    q = current(topics)
    use_controllers(ros, ["arm_position_controller", "gripper_position_controller"])
    ros.publish(Float64MultiArray, "/arm_position_controller/commands", Float64MultiArray(data=[q[j] for j in ARM]))
    ros.publish(Float64MultiArray, "/gripper_position_controller/commands", Float64MultiArray(data=[0.04, 0.04]))
    wait_joints(topics, {"wsg_finger_left_joint": 0.04, "wsg_finger_right_joint": 0.04}, tol=1e-3)


def test_trajectory_is_followed_with_its_timing(node, ros):
    """A 2-point trajectory stamped to start 0.3 s (sim time) ahead: joint 1 follows the linear interpolation
    in sim time (/joint_states stamps) and ends on the last point."""
    _, topics = node
    use_controllers(ros, ["arm_controller"])
    q = current(topics)
    t_now = sim_time(topics["clock"][-1].clock)
    start = t_now + 0.3
    q0 = {j: q[j] for j in ARM}
    p1 = dict(q0, iiwa_joint_1=q0["iiwa_joint_1"] + 0.25, iiwa_joint_4=q0["iiwa_joint_4"] - 0.1)
    p2 = dict(q0, iiwa_joint_1=q0["iiwa_joint_1"] + 0.4, iiwa_joint_4=q0["iiwa_joint_4"] - 0.2)
    msg = JointTrajectory(joint_names=ARM, points=[
        JointTrajectoryPoint(positions=[p1[j] for j in ARM], time_from_start=Duration(sec=1)),
        JointTrajectoryPoint(positions=[p2[j] for j in ARM], time_from_start=Duration(sec=1, nanosec=500_000_000))])
    ns = int(round(start * 1e9))
    msg.header.stamp.sec, msg.header.stamp.nanosec = ns // 1_000_000_000, ns % 1_000_000_000
    n0 = len(topics["joint_states"])
    ros.publish(JointTrajectory, "/arm_controller/joint_trajectory", msg)
    # settled: 1 s of sim time after the last point
    wait_until(lambda: sim_time(topics["clock"][-1].clock) > start + 2.5, 30, what="trajectory end + 1 s")

    def expected(j, t):
        s = t - start
        if s <= 0:
            return q0[j]
        if s <= 1.0:
            return q0[j] + s * (p1[j] - q0[j])
        if s <= 1.5:
            return p1[j] + (s - 1.0) / 0.5 * (p2[j] - p1[j])
        return p2[j]
    samples = [(sim_time(m.header.stamp), positions(m)) for m in topics["joint_states"][n0:]]
    samples = [(t, p) for t, p in samples if t >= start + 0.1]
    assert samples and samples[-1][0] > start + 1.6
    err = max(abs(p[j] - expected(j, t)) for t, p in samples for j in ("iiwa_joint_1", "iiwa_joint_4"))
    assert err < 0.01, err
    assert abs(samples[-1][1]["iiwa_joint_1"] - p2["iiwa_joint_1"]) < 1e-3
    assert abs(samples[-1][1]["iiwa_joint_4"] - p2["iiwa_joint_4"]) < 1e-3


def set_param(ros, name, value: int):
    req = SetParameters.Request(parameters=[Parameter(
        name=name, value=ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=value))])
    res = ros.call(SetParameters, "/contact_sim/set_parameters", req)
    assert res.results[0].successful, res.results[0].reason


def test_pause_step_and_reset(node, ros):
    sim, topics = node

    def clock_ns(m):
        return m.clock.sec * 1_000_000_000 + m.clock.nanosec
    res = ros.call(SetBool, "/contact_sim/pause", SetBool.Request(data=True))
    assert res.success
    t0_ns = int(round(sim.node.sim.t * 1e9))          # paused: the node's sim time stays; its last /clock arrives
    wait_until(lambda: clock_ns(topics["clock"][-1]) == t0_ns, 5, what="the paused time on /clock")
    n0 = len(topics["clock"])

    res = ros.call(Trigger, "/contact_sim/step", Trigger.Request())
    assert res.success, res.message
    wait_until(lambda: len(topics["clock"]) > n0, 5, what="/clock after one step")
    # paused: no /clock and no step since the pause, then exactly the one step asked
    assert [clock_ns(m) for m in topics["clock"][n0:]] == [t0_ns + 1_000_000]

    set_param(ros, "step_count", 250)
    n1 = len(topics["clock"])
    res = ros.call(Trigger, "/contact_sim/step", Trigger.Request())
    assert res.success, res.message
    target = t0_ns + 251 * 1_000_000
    wait_until(lambda: clock_ns(topics["clock"][-1]) == target, 10, what="/clock at t0 + 251 steps")
    set_param(ros, "step_count", 1)
    # still paused after the 250 steps: one more step asked is the next /clock, at target + 1 step
    res = ros.call(Trigger, "/contact_sim/step", Trigger.Request())
    assert res.success, res.message
    wait_until(lambda: clock_ns(topics["clock"][-1]) > target, 5, what="/clock after one more step")
    stamps = [clock_ns(m) for m in topics["clock"][n1:]]
    assert stamps[-1] == target + 1_000_000 and max(stamps[:-1]) == target    # exactly 250 steps, then paused
    assert np.all(np.diff(stamps) > 0) and np.all((np.array(stamps) - t0_ns) % 1_000_000 == 0)

    res = ros.call(Trigger, "/contact_sim/reset", Trigger.Request())
    assert res.success, res.message
    wait_until(lambda: topics["clock"][-1].clock.sec == 0 and topics["clock"][-1].clock.nanosec == 0, 5,
               what="/clock back to 0")
    initial = {"iiwa_joint_2": 0.5, "iiwa_joint_4": -1.6, "iiwa_joint_6": 1.042, "wsg_finger_left_joint": 0.04}
    js = wait_joints(topics, initial, tol=1e-9, timeout=5)
    assert sim_time(js.header.stamp) == 0.0
    res = ros.call(SetBool, "/contact_sim/pause", SetBool.Request(data=False))
    assert res.success
    wait_until(lambda: sim_time(topics["clock"][-1].clock) > 0.1, 10, what="/clock running again")


def test_bad_commands_are_rejected_counted_and_stepping_continues(node, ros):
    _, topics = node
    before = next_diagnostics(topics)
    nan = float("nan")
    ros.publish(JointState, "/joint_command", JointState(name=["iiwa_joint_1", "no_such_joint"], position=[0.0, 0.0]))
    ros.publish(JointState, "/joint_command", JointState(name=["iiwa_joint_1"], position=[nan]))
    ros.publish(JointState, "/joint_command", JointState(name=["iiwa_joint_1", "iiwa_joint_2"], position=[0.1]))
    ros.publish(JointState, "/joint_command", JointState(name=["iiwa_joint_1"]))
    ros.publish(JointState, "/joint_command", JointState(name=["iiwa_joint_1", "iiwa_joint_1"], position=[0.1, 0.1]))
    ros.publish(Float64MultiArray, "/arm_position_controller/commands", Float64MultiArray(data=[0.0] * 6))
    ros.publish(Float64MultiArray, "/arm_velocity_controller/commands", Float64MultiArray(data=[math.inf] * 7))
    bad = JointTrajectory(joint_names=ARM, points=[
        JointTrajectoryPoint(positions=[0.0] * 7, time_from_start=Duration(sec=2)),
        JointTrajectoryPoint(positions=[0.1] * 7, time_from_start=Duration(sec=1))])
    ros.publish(JointTrajectory, "/arm_controller/joint_trajectory", bad)
    # out of limits: clamped (joint 1 limit 2.967 rad), not rejected
    ros.publish(JointState, "/joint_command", JointState(name=["wsg_finger_left_joint"], position=[0.5]))
    t0 = sim_time(topics["clock"][-1].clock)
    counted = {"rejected_commands": 8, "clamped_commands": 1}

    def delta():
        after = next_diagnostics(topics)
        return {k: int(after[k]) - int(before[k]) for k in before if k.startswith("rejected_") or
                k == "clamped_commands"}
    wait_until(lambda: all(delta()[k] >= n for k, n in counted.items()), 30, what="the 9 commands counted")
    wait_until(lambda: sim_time(topics["clock"][-1].clock) > t0 + 0.3, 30, what="0.3 s of sim time")
    assert delta() == {"rejected_unknown_joint": 1, "rejected_non_finite": 2, "rejected_wrong_length": 2,
                     "rejected_empty": 1, "rejected_duplicate_joint": 1, "rejected_bad_trajectory": 1,
                     "rejected_unsupported": 0, "rejected_commands": 8, "clamped_commands": 1}
    wait_joints(topics, {"wsg_finger_left_joint": 0.055})      # clamped target reached


def _thread_policies(pid: int) -> dict:
    """Thread id -> (policy, priority) of every thread of process ``pid``, as the kernel reports them."""
    policies = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            policies[int(task.name)] = (os.sched_getscheduler(int(task.name)),
                                        os.sched_getparam(int(task.name)).sched_priority)
        except OSError:                       # a thread that just ended
            continue
    return policies


def test_the_stepping_thread_runs_normal_scheduling_by_default(node):
    """thread_priority (default 0): the stepping thread at normal scheduling, /diagnostics says so, and no thread of
    the node (here: of this process) runs under a real-time policy. (A thread of this process that an earlier test
    started may run at SCHED_IDLE: Mesa's shader disk-cache thread "disk$0", started by a camera's render thread at
    idle priority, keeps its policy.)"""
    sim, topics = node
    assert next_diagnostics(topics)["stepping_thread_scheduling"] == "normal"
    policies = _thread_policies(os.getpid())
    assert policies[sim.node.link.thread.native_id] == (os.SCHED_OTHER, 0)
    names = {t.native_id: t.name for t in threading.enumerate()}
    realtime = {names.get(tid, tid): p for tid, p in policies.items() if p[0] in (os.SCHED_FIFO, os.SCHED_RR)}
    assert not realtime, realtime


@pytest.mark.process
def test_the_stepping_thread_runs_sched_fifo_with_thread_priority_as_diagnostics_say(ros, start_node):
    """thread_priority 50 (as ros2_control's controller_manager): exactly one thread of the node process, the
    stepping thread, runs under SCHED_FIFO 50 once it has kept real time for a second (the test runs as root, as CI
    does; driver/thread_priority.py), /diagnostics says so, and the node's other threads (executor, DDS) keep
    normal scheduling."""
    diagnostics = ros.subscribe(DiagnosticArray, "/diagnostics")
    fifo = start_node("--robot", "iiwa_wsg", "--namespace", "fifo", "--time-step", str(DT), "--real-time-factor",
                      "1.0", "--ros-args", "-p", "thread_priority:=50", "-p", "diagnostics_rate:=4.0")

    def scheduling():
        assert fifo.proc.poll() is None, fifo.output()
        said = [kv.value for m in list(diagnostics) for st in m.status if st.name == "/fifo/contact_sim: simulation"
                for kv in st.values if kv.key == "stepping_thread_scheduling"]
        return said and said[-1] == "SCHED_FIFO 50"
    wait_until(scheduling, 90, what="/fifo diagnostics saying SCHED_FIFO 50")
    policies = _thread_policies(fifo.proc.pid)
    assert len(policies) > 3
    assert sorted(policies.values()).count((os.SCHED_FIFO, 50)) == 1, policies
    assert all(p == (os.SCHED_OTHER, 0) for p in policies.values() if p != (os.SCHED_FIFO, 50)), policies
