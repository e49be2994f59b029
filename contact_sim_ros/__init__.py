"""contact_sim_ros: contact-physics simulation of robots for ROS 2.

The core (``model``, ``geometry``, ``engines``, ``sim``) is plain Python over numpy, Pinocchio and coal;
only ``contact_sim_ros.ros`` (and the scenario clients' link to a robot over ROS 2, ``clients/robot_link.py``)
imports rclpy, and nothing outside ``contact_sim_ros.ros`` imports from it: ``test/test_packaging.py`` checks it.
"""

__version__ = "0.1.0"
