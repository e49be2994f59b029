"""The node's names for contact_sim_ros/state_messages.py (the measurements as ROS messages, no rclpy: it moved
below ros/ so that the in-process link builds its messages without importing the node's package)."""

from ..state_messages import (JointStateCdr, TransformsCdr, clock_cdr, fill_external_torques,  # noqa: F401
                              fill_joint_state, fill_trajectory_controller_state, fill_wrench, has_readers, stamp,
                              stamp_parts)
