"""contact_sim_ros: contact-physics simulation of robots for ROS 2.

The core (``model``, ``geometry``, ``engines``, ``sim``) is plain Python over numpy, Pinocchio and coal;
only ``contact_sim_ros.ros`` imports rclpy.
"""

__version__ = "0.1.0"
