"""contact_sim_ros: contact-physics simulation of robots for ROS 2.

The core (``model``, ``geometry``, ``engines``, ``sim``) is plain Python over numpy, Pinocchio and coal;
only ``contact_sim_ros.ros`` (and the scenario controllers' links to a robot, ``controllers/robot_link.py``,
``controllers/inprocess_link.py``) imports rclpy: ``test/test_packaging.py`` checks it.
"""

__version__ = "0.1.0"
