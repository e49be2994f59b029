"""rosbag2 MCAP files as Jazzy writes them, a killed recording's recovery (contact-sim bag-repair) and one-line errors
for bags that cannot be read (contact_sim_ros/bag_files.py, contact-sim replay). No DDS: the bags are written with
the recorder's writer (JazzyBagWriter) in this process or in a child process that SIGKILLs itself; the node's own
bags are tested over DDS in test/ros/test_node_recording.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import yaml
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore

from contact_sim_ros.bag_files import JazzyBagWriter, check_bag, read_mcap_records, repair_bag
from contact_sim_ros.cli import main as cli_main
from contact_sim_ros.errors import ConfigError

STORE = get_typestore(Stores.ROS2_JAZZY)
JointState = STORE.types["sensor_msgs/msg/JointState"]
Header = STORE.types["std_msgs/msg/Header"]
Time = STORE.types["builtin_interfaces/msg/Time"]


def joint_state_cdr(k: int) -> bytes:
    """The CDR of a 3-joint JointState stamped k ms."""
    msg = JointState(header=Header(stamp=Time(sec=k // 1000, nanosec=(k % 1000) * 1_000_000), frame_id="base_link"),
                     name=["a", "b", "c"], position=np.array([0.001 * k, 2.0, -1.0]), velocity=np.zeros(3),
                     effort=np.zeros(0))
    return bytes(STORE.serialize_cdr(msg, "sensor_msgs/msg/JointState"))


def write_bag(path, n: int, first_ns: int = 5_000_000) -> None:
    """A closed bag of n joint states at first_ns + k ms (k = 0 .. n-1) on /joint_states."""
    w = JazzyBagWriter(path)
    w.open()
    conn = w.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=STORE)
    for k in range(n):
        w.write(conn, first_ns + k * 1_000_000, joint_state_cdr(k))
    w.close()


def read_count(path) -> dict:
    with Reader(path) as reader:
        out = {}
        for conn, _, raw in reader.messages():
            STORE.deserialize_cdr(raw, conn.msgtype)
            out[conn.topic] = out.get(conn.topic, 0) + 1
        return out


def test_metadata_as_jazzy_writes_it(tmp_path):
    """metadata.yaml: version 9, ros_distro jazzy, starting_time = the first message, counts, cdr, mcap; the file
    <bag>_0.mcap; the MCAP channel carries offered_qos_profiles and topic_type_hash like rosbag2_storage_mcap."""
    bag = tmp_path / "b"
    write_bag(bag, 20, first_ns=7_000_000_123)
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["ros_distro"] == "jazzy" and meta["version"] == 9 and meta["storage_identifier"] == "mcap"
    assert meta["starting_time"]["nanoseconds_since_epoch"] == 7_000_000_123
    assert meta["duration"]["nanoseconds"] == 19 * 1_000_000
    assert meta["message_count"] == 20 and meta["relative_file_paths"] == ["b_0.mcap"]
    (topic,) = meta["topics_with_message_count"]
    assert topic["message_count"] == 20
    assert topic["topic_metadata"]["serialization_format"] == "cdr"
    assert topic["topic_metadata"]["type_description_hash"] == STORE.hash_rihs01("sensor_msgs/msg/JointState")
    assert list(meta) == ["version", "storage_identifier", "duration", "starting_time", "message_count",
                          "topics_with_message_count", "compression_format", "compression_mode",
                          "relative_file_paths", "files", "custom_data", "ros_distro"]     # rosbag2's order
    _, channels, messages, problem = read_mcap_records(bag / "b_0.mcap")
    assert problem is None and len(messages) == 20
    (ch,) = channels.values()
    assert set(ch.metadata) == {"offered_qos_profiles", "topic_type_hash"} and ch.message_encoding == "cdr"
    assert read_count(bag) == {"/joint_states": 20}
    check_bag(bag)                                     # a complete bag passes


KILLED_WRITER = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {test_dir!r})
    from test_bag_files import STORE, joint_state_cdr
    from contact_sim_ros.bag_files import JazzyBagWriter
    w = JazzyBagWriter({bag!r})
    w.open()
    conn = w.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=STORE)
    for k in range({flushed}):
        w.write(conn, k * 1_000_000, joint_state_cdr(k))
        if k % 700 == 699:
            w.flush()
    w.flush()                                           # what the recorder does every 0.5 s
    for k in range({flushed}, {flushed} + 50):             # written after the last flush: in the pending chunk
        w.write(conn, k * 1_000_000, joint_state_cdr(k))
    os.kill(os.getpid(), signal.SIGKILL)
""")


@pytest.mark.process
def test_a_killed_writer_leaves_every_flushed_message_and_bag_repair_recovers_them(tmp_path, capsys):
    bag = tmp_path / "killed"
    flushed = 2000
    code = KILLED_WRITER.format(test_dir=os.path.dirname(__file__), bag=str(bag), flushed=flushed)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not (bag / "metadata.yaml").exists() and (bag / "killed_0.mcap").is_file()
    with pytest.raises(ConfigError, match=r"metadata.yaml: missing .*contact-sim bag-repair"):
        check_bag(bag)
    assert cli_main(["bag-repair", str(bag)]) == 0
    out = capsys.readouterr().out
    assert f"recovered {flushed} messages on 1 topics" in out, out
    assert read_count(bag) == {"/joint_states": flushed}        # every flushed message, none of the pending
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["message_count"] == flushed and meta["ros_distro"] == "jazzy"
    assert meta["duration"]["nanoseconds"] == (flushed - 1) * 1_000_000
    assert (bag / "killed_0.mcap.orig").is_file()                # the original is kept
    check_bag(bag)


def test_a_cut_file_is_refused_by_replay_and_repaired_up_to_its_last_complete_chunk(tmp_path, capsys):
    bag = tmp_path / "cut"
    write_bag(bag, 30_000)                         # ~5 MB: several 1 MiB chunks
    f = bag / "cut_0.mcap"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    assert cli_main(["replay", str(bag), "--scenario", "pick_shake_place"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert str(f) in err and "truncated MCAP file" in err and "bag-repair" in err
    report = repair_bag(bag)
    assert 5000 < report["messages"] < 15_000 and report["problem"]
    assert read_count(bag) == {"/joint_states": report["messages"]}
    # the recovered messages are the first ones, in order
    with Reader(bag) as reader:
        stamps = [t for _, t, _ in reader.messages()]
    assert stamps == [5_000_000 + k * 1_000_000 for k in range(report["messages"])]


def _bad_bags(tmp_path):
    """(name, bag directory, the file the error must name, words of the problem)."""
    out = []
    good = tmp_path / "good"
    write_bag(good, 3000)
    for name in ("malformed", "no_info", "missing_mcap", "corrupt", "killed", "not_mcap"):
        d = tmp_path / name
        write_bag(d, 3000)
        out.append(d)
    meta = tmp_path / "malformed" / "metadata.yaml"
    meta.write_text("rosbag2_bagfile_information: {version: 9, storage_identifier: [mcap\n")
    (tmp_path / "no_info" / "metadata.yaml").write_text("version: 9\n")
    (tmp_path / "missing_mcap" / "missing_mcap_0.mcap").unlink()
    corrupt = tmp_path / "corrupt" / "corrupt_0.mcap"
    data = bytearray(corrupt.read_bytes())
    data[len(data) // 3: len(data) // 3 + 64] = b"\xff" * 64          # a garbled record inside the data section
    corrupt.write_bytes(bytes(data))
    (tmp_path / "killed" / "metadata.yaml").unlink()
    (tmp_path / "not_mcap" / "not_mcap_0.mcap").write_bytes(b"this is not an MCAP file" * 10)
    return [
        ("malformed", tmp_path / "malformed", meta, "malformed YAML"),
        ("no_info", tmp_path / "no_info", tmp_path / "no_info" / "metadata.yaml", "rosbag2_bagfile_information"),
        ("missing_mcap", tmp_path / "missing_mcap", tmp_path / "missing_mcap" / "missing_mcap_0.mcap", "missing"),
        ("corrupt", tmp_path / "corrupt", corrupt, "corrupt MCAP file"),
        ("killed", tmp_path / "killed", tmp_path / "killed" / "metadata.yaml", "bag-repair"),
        ("not_mcap", tmp_path / "not_mcap", tmp_path / "not_mcap" / "not_mcap_0.mcap", "not an MCAP file"),
        ("absent", tmp_path / "absent", tmp_path / "absent", "no such bag directory"),
    ]


def test_replay_of_a_bad_bag_is_one_line_naming_the_file_and_the_problem(tmp_path, capsys):
    for name, bag, named, words in _bad_bags(tmp_path):
        assert cli_main(["replay", str(bag), "--scenario", "pick_shake_place", "--no-plots",
                         "--out", str(tmp_path / "out")]) == 2, name
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, (name, err)
        assert err.startswith("contact-sim replay: error: ") and str(named) in err and words in err, (name, err)


def test_bag_repair_of_what_cannot_be_recovered_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "junk_0.mcap").write_bytes(b"\x00" * 100)
    for bag, words in ((tmp_path / "empty", "no .mcap file"), (tmp_path / "junk", "no channel could be read"),
                       (tmp_path / "absent", "not a directory")):
        assert cli_main(["bag-repair", str(bag)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err and str(bag) in err, err


def test_bag_repair_of_a_complete_bag_says_so_and_writes_nothing(tmp_path, capsys):
    """Issue 44 (wrong list): each bag-repair of a complete bag wrote another full copy (<file>.orig, .orig<pid>).
    Now it is said to be complete, and the directory is left byte for byte as it was (also after a repair: the
    repaired bag is complete)."""
    bag = tmp_path / "whole"
    write_bag(bag, 500)

    def state():
        return {p.name: (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(bag.iterdir())}
    before = state()
    for _ in range(2):
        assert cli_main(["bag-repair", str(bag)]) == 0
        out = capsys.readouterr().out
        assert "a complete bag" in out and "nothing written" in out, out
        assert state() == before
    assert read_count(bag) == {"/joint_states": 500}
    # a killed one is repaired once; then it is complete
    (bag / "metadata.yaml").unlink()
    assert cli_main(["bag-repair", str(bag)]) == 0
    assert "recovered 500 messages" in capsys.readouterr().out
    repaired = state()
    assert cli_main(["bag-repair", str(bag)]) == 0
    assert "a complete bag" in capsys.readouterr().out and state() == repaired
