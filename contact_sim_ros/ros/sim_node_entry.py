"""The ``sim_node`` console entry point (``ros2 run contact_sim_ros sim_node``, ``ros2 launch``): loading the node's
modules (numpy, Pinocchio, rclpy, the engines: seconds) happens here, under a guard, so that Ctrl-C (or the SIGINT
``ros2 launch`` sends) during that time exits quietly with status 0 instead of a KeyboardInterrupt traceback;
``sim_node.main`` then installs its own SIGINT/SIGTERM handler first thing. Light on purpose: nothing heavy is
imported before the guard."""

from __future__ import annotations

import sys


def main(argv=None) -> int:
    try:
        from .sim_node import main as node_main
    except KeyboardInterrupt:
        return 0
    return node_main(argv)


if __name__ == "__main__":
    sys.exit(main())
