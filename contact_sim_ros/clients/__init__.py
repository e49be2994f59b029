"""Scenario controllers: rclpy nodes that drive a robot (simulated or real) only through the driver-stack ROS
interfaces (docs/scenarios.md). ``ik`` has no rclpy dependency."""
