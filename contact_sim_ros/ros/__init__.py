"""rclpy glue: the simulation node (sim_node), its stepping loop, command validation and parameters.

Only this package imports rclpy; command_validation, stepping, node_config and frames are importable and
testable without a ROS graph.
"""
