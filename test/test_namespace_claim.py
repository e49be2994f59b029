"""The namespace claim (ros/namespace_claim.py): one simulation node per (user, ROS_DOMAIN_ID, namespace) on a
host, decided by the kernel's file lock: no DDS, no waiting, nothing stale after a killed process."""
import os
import signal
import subprocess
import sys
import tempfile

import pytest

from contact_sim_ros.errors import ConfigError
from contact_sim_ros.ros.namespace_claim import NamespaceClaim, claim_path

RECORD = {"node": "/arm/contact_sim", "robot": "iiwa_wsg", "engine": "tamsi", "pid": os.getpid()}


@pytest.fixture(autouse=True)
def private_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("ROS_DOMAIN_ID", "7")


def test_a_second_claim_on_a_namespace_is_refused_naming_the_holder_until_it_releases():
    first = NamespaceClaim.take("/arm", RECORD)
    with pytest.raises(ConfigError) as refused:
        NamespaceClaim.take("/arm", {**RECORD, "node": "/arm/sim_two"})
    assert str(refused.value) == (f"another simulation node already runs in namespace '/arm': /arm/contact_sim "
                                  f"(robot 'iiwa_wsg', engine 'tamsi'), process {os.getpid()} on this host; stop it "
                                  f"or start this one with another --namespace")
    other = NamespaceClaim.take("/hand", RECORD)       # another namespace is free
    first.release()
    again = NamespaceClaim.take("/arm", RECORD)
    assert again is not None
    again.release()
    other.release()


def test_each_ros_domain_has_its_own_claims(monkeypatch):
    first = NamespaceClaim.take("/", RECORD)
    monkeypatch.setenv("ROS_DOMAIN_ID", "8")
    second = NamespaceClaim.take("/", RECORD)
    assert claim_path("/").parent.name == "domain-8"
    second.release()
    first.release()


HOLDER = """
import sys
from contact_sim_ros.ros.namespace_claim import NamespaceClaim
claim = NamespaceClaim.take("/arm", {"node": "/arm/contact_sim", "robot": "franka", "engine": "sap", "pid": 1})
print("held", flush=True)
sys.stdin.read()
"""


@pytest.mark.process
def test_a_killed_holder_leaves_no_stale_claim(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "TMPDIR": str(tmp_path), "ROS_DOMAIN_ID": "7"})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=r"/arm/contact_sim \(robot 'franka', engine 'sap'\), process 1 on"):
            NamespaceClaim.take("/arm", RECORD)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    claim = NamespaceClaim.take("/arm", RECORD)        # the kernel released the dead process's lock
    assert claim is not None
    claim.release()


def test_a_symbolic_link_in_place_of_the_lock_is_refused_and_its_target_left_unchanged(tmp_path):
    """Issue 44 (finding 5): the claim followed a symbolic link at its path and overwrote the link's target with
    the node's record. Now refused (O_NOFOLLOW), naming the link, and the target keeps its content; the same for a
    hard link (it shares the content of another file) and a linked folder."""
    path = claim_path("/arm")
    path.parent.mkdir(parents=True)
    precious = tmp_path / "precious.txt"
    precious.write_text("the user's data\n")
    path.symlink_to(precious)
    with pytest.raises(ConfigError) as refused:
        NamespaceClaim.take("/arm", RECORD)
    assert str(refused.value).startswith(f"the namespace lock file {path} is a symbolic link (to {precious}); it is "
                                         f"not followed: remove it")
    assert precious.read_text() == "the user's data\n"

    path.unlink()
    os.link(precious, path)
    with pytest.raises(ConfigError, match="has 2 hard links"):
        NamespaceClaim.take("/arm", RECORD)
    assert precious.read_text() == "the user's data\n"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path.unlink()
    path.parent.rmdir()
    path.parent.symlink_to(elsewhere)
    with pytest.raises(ConfigError, match=f"the namespace lock folder {path.parent} is a symbolic link"):
        NamespaceClaim.take("/arm", RECORD)
    assert list(elsewhere.iterdir()) == []


LOCKER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, b"not json")
print("held", flush=True)
sys.stdin.read()
"""


@pytest.mark.process
def test_a_lock_held_by_a_process_that_is_not_a_simulation_node_is_reported_with_its_pid_and_path():
    """Issue 44: such a holder was reported as "a simulation node" with no process id nor path."""
    path = claim_path("/arm")
    path.parent.mkdir(parents=True)
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError) as refused:
            NamespaceClaim.take("/arm", RECORD)
        message = str(refused.value)
        assert message.startswith(f"the namespace lock {path} of namespace '/arm' is held by process {locker.pid} (")
        assert "which is not a simulation node" in message and "another simulation node" not in message
    finally:
        locker.kill()
        locker.wait(10)
    claim = NamespaceClaim.take("/arm", RECORD)
    assert claim is not None
    claim.release()
