"""rclpy code only: the simulation node (sim_node) with its publishers, subscriptions, services, action servers
and parameters, each robot's ROS side (robot_port), the emulated controllers' topics, actions and controller_manager
services (controllers), simulation_interfaces, the bag recorder. What they plug into (the stepping loop, the hardware
System, the controllers, command validation) is contact_sim_ros/driver/, which has no rclpy. node_config, frames
and state_messages do not import rclpy either (message classes only) and are testable without a ROS graph.
"""
