"""``record:=PATH``: the simulation node writes its own publications to a rosbag2 (MCAP) directory (the recorder
taps the node's publishers, contact_sim_ros/ros/bag_recorder.py); read back with rosbags: every message published
over the recorded sim time is in the bag (counts = the publication rates x sim time, to the message), stamps are
sim time and increase per topic, and the content is what a subscriber of another node (a DDS participant of its
own) received for the same stamp. The nodes are built in this process (inprocess_sim_node.py) but for the SIGKILLed
one and the refused start-up (exit code 2): those are `process` tests."""

import signal

import numpy as np
import pytest
import yaml

from inprocess_sim_node import InProcessSimNode
from ros_testing import wait_until

JS_HZ, CLOCK_HZ, TF_HZ = 100.0, 100.0, 50.0        # sim-time rates asked of the node


def _ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def _node(monkeypatch, *flags) -> InProcessSimNode:
    """The simulation node of ``sim_node *flags`` built in this process."""
    return InProcessSimNode.from_command_line(monkeypatch, *flags)


def _closed(sim) -> None:
    """The node shut down as main() does at exit (the recorder writes what is queued and closes the bag); none of
    its callbacks raised."""
    sim.close()
    assert not sim.callback_errors, sim.callback_errors[0]


def test_node_records_every_publication_to_mcap(ros, monkeypatch, tmp_path, capfd):
    from rosbags.highlevel import AnyReader
    from sensor_msgs.msg import JointState
    bag = tmp_path / "run"
    from diagnostic_msgs.msg import DiagnosticArray
    seen = ros.subscribe(JointState, "/rec/joint_states", keep=100_000)
    diag_seen = ros.subscribe(DiagnosticArray, "/diagnostics", keep=20)
    sim = _node(monkeypatch, "--robot", "iiwa_wsg", "--real-time-factor", "0", "--namespace", "rec", "--ros-args",
                "-p", f"record:={bag}", "-p", f"joint_states_rate:={JS_HZ}", "-p", f"clock_rate:={CLOCK_HZ}",
                "-p", f"tf_rate:={TF_HZ}")
    try:
        wait_until(lambda: (seen and seen[-1].header.stamp.sec >= 2) or not sim.node.link.stepping, 120,
                   what="2 s of simulated time")
        # and one /diagnostics (1 Hz of wall time: 2 s of sim time can take less than a second)
        wait_until(lambda: any(s.name.startswith("/rec/contact_sim") for m in list(diag_seen) for s in m.status), 30,
                   what="the node's /diagnostics")
    finally:
        _closed(sim)
    log = "".join(capfd.readouterr())           # the node's log (rcutils: stderr, or stdout if so configured)
    assert "recording the node's publications" in log and "recording: " in log, log
    assert "messages dropped" not in log, log
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["storage_identifier"] == "mcap" and meta["version"] == 9

    with AnyReader([bag]) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        stamps: dict[str, list[int]] = {}
        js = {}
        for conn, t, raw in reader.messages():
            stamps.setdefault(conn.topic, []).append(t)
            if conn.topic == "/rec/joint_states":
                js[t] = reader.deserialize(raw, conn.msgtype)
            elif conn.topic == "/diagnostics":
                diagnostics = reader.deserialize(raw, conn.msgtype)
    assert meta["message_count"] == sum(counts.values())
    # bag time is sim time for every topic (/diagnostics is stamped with the wall clock: recorded at sim time)
    last = max(max(t) for t in stamps.values())
    assert 0 <= last - stamps["/clock"][-1] < 1e9 / CLOCK_HZ            # a step after the last /clock at most
    assert meta["duration"]["nanoseconds"] == last and meta["starting_time"]["nanoseconds_since_epoch"] == 0
    for topic in ("/rec/joint_states", "/clock", "/tf", "/tf_static", "/rec/robot_description",
                  "/rec/ft_sensor/wrench", "/rec/external_joint_torques", "/diagnostics"):
        assert counts.get(topic, 0) > 0, f"{topic} not recorded: {counts}"

    # every message at its rate over the recorded sim time (the node ran as fast as possible: ~2 s of sim time)
    for topic, hz in (("/rec/joint_states", JS_HZ), ("/clock", CLOCK_HZ), ("/tf", TF_HZ)):
        t = stamps[topic]
        assert all(b > a for a, b in zip(t, t[1:])), f"{topic}: stamps not increasing"
        span = 1e-9 * (t[-1] - t[0])
        assert span > 1.9, f"{topic}: {span:.3f} s of sim time recorded"
        assert abs(len(t) - (hz * span + 1)) <= 1, f"{topic}: {len(t)} messages over {span:.3f} s at {hz} Hz"
        gaps = {b - a for a, b in zip(t, t[1:])}
        assert gaps == {round(1e9 / hz)}, f"{topic}: stamp gaps {sorted(gaps)[:5]} ns (a message missing?)"

    # content: the joint states another process received are the recorded ones, stamp for stamp
    first = next(iter(js.values()))
    assert list(first.name[:7]) == [f"iiwa_joint_{i}" for i in range(1, 8)]
    got = list(seen)
    matched = [m for m in got if _ns(m.header.stamp) in js]
    # every state another process received is in the bag (how many it received depends on the machine's load: its
    # KEEP_LAST queue drops when its executor falls behind; 72 at load 15)
    assert len(matched) == len(got) and len(matched) >= 20, \
        f"{len(matched)} of {len(got)} received joint states are in the bag"
    for m in matched:
        rec = js[_ns(m.header.stamp)]
        assert list(rec.name) == list(m.name)
        assert list(rec.position) == list(m.position) and list(rec.velocity) == list(m.velocity)
    moved = [max(abs(a - b) for a, b in zip(m.position, matched[0].position)) for m in matched]
    assert max(moved) > 0 or all(v == 0 for v in matched[0].velocity)    # not one frozen state compared
    assert stamps["/tf_static"] == [0] and counts["/rec/robot_description"] == 1
    # the recorder's counters in the node's diagnostics (recorded themselves)
    values = {kv.key: kv.value for kv in diagnostics.status[0].values}
    assert values["record_dropped"] == "0" and values["record_write_errors"] == "0"
    assert int(values["recorded_messages"]) > 0
    assert pytest.approx(1e-9 * stamps["/clock"][-1], abs=0.02) == 1e-9 * stamps["/rec/joint_states"][-1]


def test_node_with_several_robots_records_each_robots_topics(ros, monkeypatch, tmp_path):
    """Two robots in one world (scenes/two_iiwa_handover.yaml): each robot's node (its namespace) is recorded too:
    its joint states at their rate over the recorded sim time, its robot_description, its controllers' topics."""
    from rosbags.highlevel import AnyReader
    from sensor_msgs.msg import JointState
    from ros_testing import REPO
    bag = tmp_path / "two"
    seen = ros.subscribe(JointState, "/left/joint_states", keep=5)
    sim = _node(monkeypatch, "--scene", str(REPO / "scenes" / "two_iiwa_handover.yaml"), "--real-time-factor", "0",
                "--ros-args", "-p", f"record:={bag}", "-p", f"joint_states_rate:={JS_HZ}")
    try:
        wait_until(lambda: (seen and seen[-1].header.stamp.sec >= 1) or not sim.node.link.stepping, 180,
                   what="1 s of simulated time")
    finally:
        _closed(sim)
    with AnyReader([bag]) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        stamps = {}
        for conn, t, _ in reader.messages():
            stamps.setdefault(conn.topic, []).append(t)
    for ns in ("left", "right"):
        assert counts.get(f"/{ns}/robot_description") == 1, counts
        assert counts.get(f"/{ns}/arm_controller/controller_state", 0) > 0, counts
        t = stamps[f"/{ns}/joint_states"]
        span = 1e-9 * (t[-1] - t[0])
        assert span > 0.9 and abs(len(t) - (JS_HZ * span + 1)) <= 1, (ns, len(t), span)


IIWA = [f"iiwa_joint_{i}" for i in range(1, 8)]


def _decode_every_message(bag):
    """{topic: [rosbags message]}, {topic: [mcap-ros2-support message]}: every message of the bag decoded by both
    (rosbags strictly: nothing after the message's end), the same count per topic."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import get_types_from_msg
    from contact_sim_ros.ros.bag_recorder import make_typestore
    store = make_typestore()
    by_rosbags, by_mcap = {}, {}
    with Reader(bag) as reader:
        for conn in reader.connections:
            if conn.msgtype not in store.fielddefs:       # from the bag's own definitions, as a reader has them
                store.register(get_types_from_msg(conn.msgdef.data, conn.msgtype))
        for conn, t, raw in reader.messages():
            msg = store.deserialize_cdr(raw, conn.msgtype)
            assert len(store.serialize_cdr(msg, conn.msgtype)) == len(raw), f"{conn.topic}: bytes after the message"
            by_rosbags.setdefault(conn.topic, []).append((t, msg))
    (mcap_file,) = bag.glob("*.mcap")
    with open(mcap_file, "rb") as f:
        for _, channel, _, decoded in make_reader(f, decoder_factories=[DecoderFactory()]).iter_decoded_messages():
            by_mcap.setdefault(channel.topic, []).append(decoded)
    assert {t: len(m) for t, m in by_mcap.items()} == {t: len(m) for t, m in by_rosbags.items()}
    return by_rosbags, by_mcap


def test_node_bag_every_topic_decodes_with_rosbags_and_mcap_with_its_inputs_and_replays(ros, monkeypatch, tmp_path):
    """The real node records what it publishes AND what it is asked (a FollowJointTrajectory goal, a trajectory on
    the topic, a /joint_command): every message of every topic decodes with rosbags and with mcap-ros2-support
    (controller_state too: the defect of issue 27), metadata.yaml as Jazzy writes it, and ``contact-sim replay``
    replays the bag: the goal and the topic trajectory drive the simulated arm along the recorded joint states."""
    from control_msgs.action import FollowJointTrajectory
    from builtin_interfaces.msg import Duration
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
    from ros_testing import REPO, ActionClient
    from contact_sim_ros.scenarios.replay import replay
    bag = tmp_path / "asked"
    js = ros.subscribe(JointState, "/rec2/joint_states", keep=100_000)
    sim = _node(monkeypatch, "--robot", "iiwa_wsg", "--real-time-factor", "1", "--namespace", "rec2", "--ros-args",
                "-p", f"record:={bag}", "-p", f"joint_states_rate:={JS_HZ}")
    try:
        wait_until(lambda: js or not sim.node.link.stepping, 120, what="the node's joint states")
        q0 = dict(zip(js[-1].name, js[-1].position))
        # a /joint_command (a direct target 0.02 rad from where the joint is, so that its arrival can be seen: the goal
        # must come after it, or the command would preempt the goal); then a goal; then a trajectory on the topic
        ros.publish(JointState, "/rec2/joint_command", JointState(name=["iiwa_joint_7"],
                                                                 position=[q0["iiwa_joint_7"] + 0.02]))
        wait_until(lambda: abs(dict(zip(js[-1].name, js[-1].position))["iiwa_joint_7"] - q0["iiwa_joint_7"]) > 0.01,
                   120, what="the joint command's effect on iiwa_joint_7")
        client = ActionClient(ros.node, FollowJointTrajectory, "/rec2/arm_controller/follow_joint_trajectory")
        assert client.wait_for_server(timeout_sec=60)
        goal = FollowJointTrajectory.Goal()
        target = [q0[j] + (0.3 if j == "iiwa_joint_1" else 0.0) for j in IIWA]
        goal.trajectory = JointTrajectory(joint_names=IIWA, points=[
            JointTrajectoryPoint(positions=target, velocities=[0.0] * 7, time_from_start=Duration(sec=1))])
        fut = client.send_goal_async(goal)
        wait_until(fut.done, 60, what="the goal response")
        assert fut.result().accepted
        res = fut.result().get_result_async()
        wait_until(res.done, 120, what="the goal result")
        assert res.result().result.error_code == 0, res.result().result.error_string
        back = [q0[j] for j in IIWA]                       # and back, by the topic
        ros.publish(JointTrajectory, "/rec2/arm_controller/joint_trajectory", JointTrajectory(joint_names=IIWA, points=[
            JointTrajectoryPoint(positions=back, velocities=[0.0] * 7, time_from_start=Duration(sec=1))]))
        t_sent = js[-1].header.stamp.sec + 1e-9 * js[-1].header.stamp.nanosec
        wait_until(lambda: _ns(js[-1].header.stamp) * 1e-9 > t_sent + 1.5, 120, what="the return trajectory's end")
        assert abs(dict(zip(js[-1].name, js[-1].position))["iiwa_joint_1"] - q0["iiwa_joint_1"]) < 0.01
    finally:
        _closed(sim)

    by_rosbags, _ = _decode_every_message(bag)
    counts = {t: len(m) for t, m in by_rosbags.items()}
    for topic in ("/rec2/joint_states", "/clock", "/tf", "/rec2/arm_controller/controller_state",
                  "/rec2/robot_description", "/tf_static"):
        assert counts.get(topic, 0) > 0, (topic, counts)
    # the inputs, as they were sent, beside the responses
    (_, g), = by_rosbags["/rec2/arm_controller/follow_joint_trajectory/goal"]
    assert list(g.trajectory.joint_names) == IIWA and g.trajectory.points[0].positions.tolist() == target
    (t_topic, traj), = by_rosbags["/rec2/arm_controller/joint_trajectory"]
    assert traj.points[0].positions.tolist() == back
    (t_command, command), = by_rosbags["/rec2/joint_command"]
    assert list(command.name) == ["iiwa_joint_7"]
    t_goal = by_rosbags["/rec2/arm_controller/follow_joint_trajectory/goal"][0][0]
    assert t_command <= t_goal < t_topic            # at their receive sim time
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["ros_distro"] == "jazzy" and meta["relative_file_paths"] == ["asked_0.mcap"]
    first = min(t for msgs in by_rosbags.values() for t, _ in msgs)
    assert meta["starting_time"]["nanoseconds_since_epoch"] == first
    assert {x["topic_metadata"]["name"]: x["message_count"] for x in meta["topics_with_message_count"]} == counts

    # contact-sim replay of the node's bag: the goal's and the topic's trajectories reach the simulated controller
    scene = tmp_path / "iiwa_wsg_ground.yaml"
    scene.write_text("robot: iiwa_wsg\nenvironment:\n  - {name: ground, shape: halfspace}\n")
    inactive = yaml.safe_load((REPO / "config" / "node" / "iiwa_wsg.yaml").read_text())["/**"]["ros__parameters"][
        "inactive_controllers"]
    result = replay(bag, scene, "tamsi", 0.001, inactive_controllers=inactive, namespace="rec2")
    assert result.delivered == 2 and not result.failures
    assert result.superseded == ["/rec2/arm_controller/controller_state"]
    j1 = result.joints.index("iiwa_joint_1")
    moved = np.nanmax(np.abs(result.q_bag[:, j1] - result.q_bag[0, j1]))
    assert moved > 0.25                             # the recorded arm went 0.3 rad out and back
    rms, mx = result.joint_stats()["iiwa_joint_1"]
    print(f"replay of the node's bag: joint 1 moved {moved:.3f} rad; residual RMS {rms:.2e} rad, max {mx:.2e} rad")
    assert mx < 0.1 * moved                         # the replay follows the recording (timing: receive vs start)


def test_sigkilled_node_leaves_a_bag_that_bag_repair_recovers(ros, start_node, tmp_path, capsys):
    """A node SIGKILLed while recording (no metadata.yaml, no MCAP summary): its complete chunks hold every message
    written up to the last flush (0.5 s of wall time); here the simulation is paused first and the kill comes once
    the live file holds the last joint state before the pause, so bag-repair must give back EVERY joint state
    published up to the kill, stamp for stamp."""
    from sensor_msgs.msg import JointState
    from std_srvs.srv import SetBool
    from contact_sim_ros.bag_files import read_mcap_records
    from contact_sim_ros.cli import main as cli_main
    from rosbags.rosbag2 import Reader
    bag = tmp_path / "killed"
    js = ros.subscribe(JointState, "/rec3/joint_states", keep=100_000)
    proc = start_node("--robot", "iiwa_wsg", "--real-time-factor", "1", "--namespace", "rec3", "--ros-args",
                      "-p", f"record:={bag}", "-p", f"joint_states_rate:={JS_HZ}")
    wait_until(lambda: (js and js[-1].header.stamp.sec >= 2) or proc.proc.poll() is not None, 120,
               what="2 s of simulated time")
    assert proc.proc.poll() is None, proc.output()
    assert ros.call(SetBool, "/rec3/contact_sim/pause", SetBool.Request(data=True)).success
    # the last stamp before the pause: joint states keep coming while paused, at the paused time
    wait_until(lambda: len(js) > 2 and _ns(js[-1].header.stamp) == _ns(js[-2].header.stamp), 60,
               what="joint states at the paused time")
    last = _ns(js[-1].header.stamp)
    mcap_file = bag / "killed_0.mcap"

    def file_has_last():
        _, channels, messages, _ = read_mcap_records(mcap_file)
        ids = {i for i, c in channels.items() if c.topic == "/rec3/joint_states"}
        return any(m.channel_id in ids and m.log_time == last for m in messages)
    wait_until(file_has_last, 60, period=0.2, what="the last joint state in the live file")
    published = len([m for m in list(js)])
    proc.proc.send_signal(signal.SIGKILL)
    proc.proc.wait(30)
    proc.stop()
    assert not (bag / "metadata.yaml").exists()
    assert cli_main(["bag-repair", str(bag)]) == 0
    out = capsys.readouterr().out
    by_rosbags, _ = _decode_every_message(bag)          # the repaired bag: every message decodes with both
    with Reader(bag) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        stamps = [t for c, t, _ in reader.messages() if c.topic == "/rec3/joint_states"]
    assert {t: len(m) for t, m in by_rosbags.items()} == {t: n for t, n in counts.items() if n}
    unique = sorted(set(stamps))
    period = round(1e9 / JS_HZ)
    # every joint state from the first to the one at the pause (the loop publishes the paused state too, off the
    # rate's grid), none missing
    assert unique[0] <= period and unique[-1] == last, (unique[:3], unique[-3:])
    missing = sorted(set(range(unique[0], last + 1, period)) - set(unique))
    assert not missing, f"{len(missing)} joint states missing, first at {missing[:3]} ns"
    print(f"SIGKILLed node: {sum(counts.values())} messages recovered on {len(counts)} topics; joint states: "
          f"{len(stamps)} recovered, {published} received by a subscriber; bag-repair: {out.strip()}")
    assert len(stamps) >= published - 2 * JS_HZ        # those written after the last flush (<= 0.5 s) may be lost


def test_record_into_an_invalid_directory_is_refused_at_start_up(start_node, tmp_path):
    """record:= a path under a regular file, or an existing directory: exit 2, one line naming the path."""
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "exists").mkdir()
    for path, expected in (
            (tmp_path / "a_file" / "bag", f"cannot create {tmp_path / 'a_file' / 'bag'}: {tmp_path / 'a_file'} is not "
                                          f"a directory"),
            (tmp_path / "exists", f"{tmp_path / 'exists'} exists already; rosbag2 writes a new directory")):
        proc = start_node("--robot", "iiwa_wsg", "--ros-args", "-p", f"record:={path}")
        assert proc.proc.wait(120) == 2
        out = proc.output()
        errors = [line for line in out.splitlines() if "error" in line]
        assert errors == [f"sim_node: error: parameter 'record': {expected}"] and "Traceback" not in out, out


CAMERA_SCENE = """
robot: iiwa_wsg
environment:
  - {name: ground, shape: halfspace}
cameras:
  - name: floor_camera               # 1 m over empty floor, looking straight down
    parent: world
    pose: {xyz: [1.0, 1.0, 1.0], rpy: [0, 1.5707963267948966, 0]}
    width: 64
    height: 48
    fov: 60.0
    near: 0.1
    far: 5.0
    rate: 10.0
"""


def test_camera_topics_are_recorded_and_decode_with_rosbags_and_mcap(ros, monkeypatch, tmp_path):
    """Issue 28 item 6: with record:=PATH the camera's topics go into the bag like every other publication (the
    recorder counts as a reader: the node renders for it with no subscriber), each message decodes with rosbags
    and mcap-ros2-support, stamped on the camera's 10 Hz grid of sim time; the ideal depth of the floor 1 m below
    the camera is 1000 mm at every pixel and the point cloud lies on the floor."""
    from sensor_msgs.msg import JointState
    scene = tmp_path / "floor_camera.yaml"
    scene.write_text(CAMERA_SCENE)
    bag = tmp_path / "cam"
    seen = ros.subscribe(JointState, "/reccam/joint_states", keep=10)
    sim = _node(monkeypatch, "--scene", str(scene), "--engine", "tamsi", "--namespace", "reccam", "--ros-args",
                "-p", f"record:={bag}")
    try:
        wait_until(lambda: (seen and seen[-1].header.stamp.sec >= 1) or not sim.node.link.stepping, 120,
                   what="1 s of simulated time")
    finally:
        _closed(sim)
    by_rosbags, by_mcap = _decode_every_message(bag)
    ns = "/reccam/floor_camera/floor_camera"
    for topic in ("color/image_raw", "color/camera_info", "depth/image_rect_raw", "aligned_depth_to_color/image_raw",
                  "depth/color/points", "segmentation/image_raw"):
        assert by_rosbags.get(f"{ns}/{topic}"), f"{topic} not recorded: {sorted(by_rosbags)}"
    colors = by_rosbags[f"{ns}/color/image_raw"]
    assert all(t % 100_000_000 == 0 for t, _ in colors), [t for t, _ in colors]       # the 10 Hz grid
    _, color = colors[-1]
    assert (color.width, color.height, color.encoding, len(color.data)) == (64, 48, "rgb8", 64 * 48 * 3)
    _, depth = by_rosbags[f"{ns}/depth/image_rect_raw"][-1]
    assert depth.encoding == "16UC1"
    mm = np.frombuffer(bytes(depth.data), dtype="<u2").reshape(48, 64)
    assert np.all(np.abs(mm.astype(int) - 1000) <= 1), (mm.min(), mm.max())
    decoded = by_mcap[f"{ns}/depth/image_rect_raw"][-1]
    assert decoded.encoding == "16UC1" and bytes(decoded.data) == bytes(depth.data)
    _, cloud = by_rosbags[f"{ns}/depth/color/points"][-1]
    xyz = np.frombuffer(bytes(cloud.data), dtype=np.float32).reshape(-1, 5)[:, :3]
    assert len(xyz) == 64 * 48 and np.allclose(xyz[:, 2], 1.0, atol=1e-3)      # optical z: 1 m to the floor
