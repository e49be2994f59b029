"""Emulation of ros2_control inside the simulation node: the user's controllers YAML and ``<ros2_control>``
block (config.py), the robot's command interfaces (hardware.py), one module per controller type behind one
interface (base.py, registry.py), and the controller manager with its services (controller_manager.py).
config.py and hardware.py do not import rclpy."""
