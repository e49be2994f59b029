"""rclpy glue: the simulation node (sim_node), its stepping loop, command validation and parameters.

Only this package imports rclpy; command_validation, stepping, node_config and frames are importable and
testable without a ROS graph.
"""

import sys


def exit_on_signals_during_imports() -> None:
    """SIGINT and SIGTERM end the process at once, with code 0 and without a KeyboardInterrupt traceback, until
    ``sim_node.main`` installs its own handlers: the node's imports (rclpy, Pinocchio, numba: ~1 s) hold nothing
    to clean up. Only for the node's own process (the console entry point, ``python -m ...sim_node``)."""
    import os
    import signal

    def leave(signum, frame):
        os._exit(0)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, leave)


def sim_node_main():
    """The ``sim_node`` console entry point: signals handled before the heavy imports, then ``sim_node.main``."""
    exit_on_signals_during_imports()
    from .sim_node import main
    return main()


# ``python -m contact_sim_ros.ros.sim_node``: this package is imported before the node's module is even compiled
_argv = list(getattr(sys, "orig_argv", []))
if "-m" in _argv[:-1] and _argv[_argv.index("-m") + 1] == __name__ + ".sim_node":
    exit_on_signals_during_imports()
