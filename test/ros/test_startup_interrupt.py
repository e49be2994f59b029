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


def _maps(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/maps") as fh:
            return fh.read()
    except OSError:
        return ""


MOMENTS = {
    # name: condition on (process, probe) after which SIGINT is sent
    "at once": lambda proc, ros: True,
    "modules loading": lambda proc, ros: "libpinocchio" in _maps(proc.pid),
    "rclpy loaded": lambda proc, ros: "librcl.so" in _maps(proc.pid),
    "node being built": lambda proc, ros: "startup_interrupt" in ros.node.get_node_names(),
}


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_ctrl_c_during_start_up_exits_cleanly(ros, tmp_path, moment):
    log = tmp_path / "out.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "contact_sim_ros.ros.sim_node_entry", "--robot", "iiwa_wsg",
                                 "--node-name", "startup_interrupt"], cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                env=dict(os.environ))
        try:
            wait_until(lambda: MOMENTS[moment](proc, ros) or proc.poll() is not None, 120, period=0.001,
                       what=f"the moment {moment!r}")
            assert proc.poll() is None, log.read_text()
            proc.send_signal(signal.SIGINT)
            code = proc.wait(60)
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
