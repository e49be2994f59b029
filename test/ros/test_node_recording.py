"""``record:=PATH``: the simulation node writes its own publications to a rosbag2 (MCAP) directory; read back
with rosbags: message counts match the publication rates over the recorded sim time, stamps are sim time and
increase, and the content decodes (joint names of the robot, clock = header stamps)."""

import time

import pytest

from ros_testing import wait_until


@pytest.mark.xfail(reason="known defect (issue 16 open): inside the running node the recorder keeps only ~2-3 "
                          "messages per second per topic while an outside subscriber receives 280-380/s (measured "
                          "2026-11-25); the recorder alone records every message (test_bag_recorder.py)", strict=False)
def test_node_records_its_publications_to_mcap(ros, start_node, tmp_path):
    from rosbags.highlevel import AnyReader
    from sensor_msgs.msg import JointState
    bag = tmp_path / "run"
    seen = ros.subscribe(JointState, "/rec/joint_states", keep=2)
    proc = start_node("--robot", "iiwa_wsg", "--real-time-factor", "0", "--namespace", "rec", "--ros-args",
                      "-p", f"record:={bag}", "-p", "joint_states_rate:=100.0", "-p", "clock_rate:=100.0",
                      "-p", "tf_rate:=50.0")
    wait_until(lambda: "recording the node's publications" in proc.output() or proc.proc.poll() is not None, 90,
               what="the recorder to start")
    assert proc.proc.poll() is None, proc.output()
    wait_until(lambda: seen and seen[-1].header.stamp.sec >= 2, 120, what="2 s of simulated time")
    assert proc.stop() == 0, proc.output()
    assert (bag / "metadata.yaml").is_file()
    assert "storage_identifier: mcap" in (bag / "metadata.yaml").read_text()
    with AnyReader([bag]) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        js = [reader.deserialize(raw, c.msgtype) for c, t, raw in reader.messages()
              if c.topic == "/rec/joint_states"]
        clock_times = [t for c, t, raw in reader.messages() if c.topic == "/clock"]
    for topic in ("/rec/joint_states", "/clock", "/tf", "/tf_static", "/rec/robot_description",
                  "/rec/ft_sensor/wrench"):
        assert counts.get(topic, 0) > 0, f"{topic} not recorded: {counts}"
    stamps = [m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec for m in js]
    assert all(b > a for a, b in zip(stamps, stamps[1:]))
    span = stamps[-1] - stamps[0]
    assert span > 1.0                                                    # as fast as possible: > 1 s of sim time
    assert len(js) == pytest.approx(100.0 * span + 1, rel=0.05)          # 100 Hz of sim time, none lost
    assert counts["/clock"] == pytest.approx(len(js), rel=0.05)
    assert js[0].name[:7] == [f"iiwa_joint_{i}" for i in range(1, 8)]
    assert clock_times == sorted(clock_times)
