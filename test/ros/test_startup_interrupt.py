"""Ctrl-C at any moment of start-up exits cleanly (status 0, no traceback): the ``sim_node`` console entry point
(contact_sim_ros/ros/sim_node_entry.py, what ``ros2 run`` / ``ros2 launch`` start) interrupted at once, while the
interpreter loads the node's modules, once rclpy's library is loaded, and while the node is being built (it is on
the ROS graph, its simulator not yet stepping). Each moment is a condition on the process, not a delay."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from ros_testing import REPO, wait_until
from signal_state import sigint_state

pytestmark = pytest.mark.process   # its tests start processes (test/conftest.py, test sizes)


def _maps(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/maps") as fh:
            return fh.read()
    except OSError:
        return ""


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


MOMENTS = {
    # name: condition on (process, probe) after which SIGINT is sent
    # "at once": as soon as the process runs the interpreter (a signal between fork and exec reaches the forked copy
    # of pytest, not the program: in a full run such a signal was lost and the node started)
    "at once": lambda proc, ros: "sim_node_entry" in _cmdline(proc.pid),
    "modules loading": lambda proc, ros: "libpinocchio" in _maps(proc.pid),
    "rclpy loaded": lambda proc, ros: "librcl.so" in _maps(proc.pid),
    "node being built": lambda proc, ros: NODE_NAME["node being built"] in ros.node.get_node_names(),
}
# a node name per moment: a graph entry of an earlier case's process must not count as this one's
NODE_NAME = {moment: f"startup_interrupt_{k}" for k, moment in enumerate(MOMENTS)}


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_ctrl_c_during_start_up_exits_cleanly(ros, tmp_path, moment):
    log = tmp_path / "out.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "contact_sim_ros.ros.sim_node_entry", "--robot", "iiwa_wsg",
                                 "--node-name", NODE_NAME[moment]], cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                env=dict(os.environ))
        try:
            wait_until(lambda: MOMENTS[moment](proc, ros) or proc.poll() is not None, 120, period=0.001,
                       what=f"the moment {moment!r}")
            assert proc.poll() is None, log.read_text()
            state = f"{sigint_state(proc.pid)} when signalled; this test's process: {sigint_state()}"
            proc.send_signal(signal.SIGINT)
            try:
                code = proc.wait(60)
            except subprocess.TimeoutExpired:
                pytest.fail(f"no exit 60 s after SIGINT ({state}; now {sigint_state(proc.pid)}): {log.read_text()}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = log.read_text()
    if moment == "at once" and code == -signal.SIGINT:
        # before the interpreter has installed its own SIGINT handler the default action ends the process, silently
        assert text == "", text
    else:
        assert code == 0, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
