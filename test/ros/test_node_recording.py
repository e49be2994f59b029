"""``record:=PATH``: the simulation node writes its own publications to a rosbag2 (MCAP) directory (the recorder
taps the node's publishers, contact_sim_ros/ros/bag_recorder.py); read back with rosbags: every message published
over the recorded sim time is in the bag (counts = the publication rates x sim time, to the message), stamps are
sim time and increase per topic, and the content is what a subscriber in another process received for the same
stamp."""

import pytest
import yaml

from ros_testing import wait_until

JS_HZ, CLOCK_HZ, TF_HZ = 100.0, 100.0, 50.0        # sim-time rates asked of the node


def _ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def test_node_records_every_publication_to_mcap(ros, start_node, tmp_path):
    from rosbags.highlevel import AnyReader
    from sensor_msgs.msg import JointState
    bag = tmp_path / "run"
    from diagnostic_msgs.msg import DiagnosticArray
    seen = ros.subscribe(JointState, "/rec/joint_states", keep=100_000)
    diag_seen = ros.subscribe(DiagnosticArray, "/diagnostics", keep=20)
    proc = start_node("--robot", "iiwa_wsg", "--real-time-factor", "0", "--namespace", "rec", "--ros-args",
                      "-p", f"record:={bag}", "-p", f"joint_states_rate:={JS_HZ}", "-p", f"clock_rate:={CLOCK_HZ}",
                      "-p", f"tf_rate:={TF_HZ}")
    wait_until(lambda: "recording the node's publications" in proc.output() or proc.proc.poll() is not None, 90,
               what="the recorder to start")
    assert proc.proc.poll() is None, proc.output()
    wait_until(lambda: seen and seen[-1].header.stamp.sec >= 2, 120, what="2 s of simulated time")
    # and one /diagnostics (1 Hz of wall time: 2 s of sim time can take less than a second)
    wait_until(lambda: any(s.name.startswith("/rec/contact_sim") for m in list(diag_seen) for s in m.status), 30,
               what="the node's /diagnostics")
    assert proc.stop() == 0, proc.output()
    assert "recording: " in proc.output() and "messages dropped" not in proc.output(), proc.output()
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


def test_node_with_several_robots_records_each_robots_topics(ros, start_node, tmp_path):
    """Two robots in one world (scenes/two_iiwa_handover.yaml): each robot's node (its namespace) is recorded too:
    its joint states at their rate over the recorded sim time, its robot_description, its controllers' topics."""
    from rosbags.highlevel import AnyReader
    from sensor_msgs.msg import JointState
    from ros_testing import REPO
    bag = tmp_path / "two"
    seen = ros.subscribe(JointState, "/left/joint_states", keep=5)
    proc = start_node("--scene", str(REPO / "scenes" / "two_iiwa_handover.yaml"), "--real-time-factor", "0",
                      "--ros-args", "-p", f"record:={bag}", "-p", f"joint_states_rate:={JS_HZ}")
    wait_until(lambda: (seen and seen[-1].header.stamp.sec >= 1) or proc.proc.poll() is not None, 180,
               what="1 s of simulated time")
    assert proc.stop() == 0, proc.output()
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
