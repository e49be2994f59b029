"""The ``sim_node`` console entry point (``ros2 run contact_sim_ros sim_node``, ``ros2 launch``): loading the node's
modules (numpy, Pinocchio, rclpy, the engines: seconds) happens here, after a SIGINT/SIGTERM handler that ends the
process at once with status 0, so that Ctrl-C (or the SIGINT ``ros2 launch`` sends) during that time exits quietly
instead of printing a KeyboardInterrupt traceback - or not at all: a KeyboardInterrupt raised inside an extension
module's import can be swallowed there, and the node then went on starting (seen under a real ``ros2 launch``).
Nothing needs cleaning up yet (no ROS context, no threads of ours). ``sim_node.main`` replaces the handler with
its own first thing. Light on purpose: nothing heavy is imported before the handler."""

from __future__ import annotations

import os
import signal
import sys


def _exit_now(signum, frame):
    os._exit(0)


def exit_at_once_on_signals() -> None:
    """SIGINT and SIGTERM end the process at once with status 0 (until ``sim_node.main`` replaces the handler);
    also installed by ``contact_sim_ros/ros/__init__.py`` for ``python -m contact_sim_ros.ros.sim_node``."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _exit_now)


def main(argv=None) -> int:
    exit_at_once_on_signals()
    from .sim_node import main as node_main
    return node_main(argv)


if __name__ == "__main__":
    sys.exit(main())
