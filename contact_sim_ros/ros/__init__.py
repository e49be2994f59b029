"""rclpy code only: the simulation node (sim_node) with its publishers, subscriptions, services, action servers
and parameters, each robot's ROS side (robot_port), the emulated controllers' topics, actions and controller_manager
services (controller_io), simulation_interfaces, the bag recorder. What they plug into (the stepping loop, the hardware
System, the controllers, command validation, the node's parameters, the world they make: driver/world.py) is
contact_sim_ros/driver/, which has no rclpy; nothing outside this package imports from it (test/test_packaging.py).
frames does not import rclpy either and is testable without a ROS graph.
"""

import sys

# ``python -m contact_sim_ros.ros.sim_node``: this package is imported before the node's module is even compiled;
# as under the console script (sim_node_entry.main), SIGINT/SIGTERM end the process at once (status 0, no
# KeyboardInterrupt traceback) while the node's modules load, until sim_node.main installs its own handler
_argv = list(getattr(sys, "orig_argv", []))
if "-m" in _argv[:-1] and _argv[_argv.index("-m") + 1] == __name__ + ".sim_node":
    from .sim_node_entry import exit_at_once_on_signals
    exit_at_once_on_signals()
