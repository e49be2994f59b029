"""The robot's driver as ros2_control runs it, without a transport (no rclpy anywhere in this package).

* system.py: the Simulator as a ros2_control hardware System (as mujoco_ros2_control's MujocoSystemInterface), the
  one seam to the Simulator: ``read()`` fills the state interfaces, ``write()`` hands the command interfaces to
  the Simulator through the driver's rate limits and gravity feed-forward; ``commands``, the thread-safe hand-over
  of commands that bypass the controllers (``joint_command``, forward controllers);
* hardware.py: the command and state interfaces and their claims;
* controllers/: the emulated controllers (``update(time, period)`` from state to command interfaces) and
  controller_manager.py, which loads, activates, switches and runs them;
* loop.py: the stepping loop (pacing, pause / step / reset, failure policy, publish hooks);
* robot.py: one robot of the world (its joints, <ros2_control> block, controllers file, controller manager);
* config.py: the user's controllers files and <ros2_control> blocks; parameters.py: parameter tables;
  command_validation.py: every command checked and clamped before it reaches the stepping thread;
* node_config.py: the node's parameters (NodeConfig) and parameter files;
* world.py: the one composition root, ``World.build(config, transports)``: Simulator, robots, System, controller
  managers, stepping loop, used by the node and the in-process links alike.

Transports plug in at construction (``World.build(config, transports)``): ros/ (the rclpy node: its publish hooks,
``RosControllerTransport`` per robot) and clients/inprocess_link.py (no DDS).

The path of a joint command (FollowJointTrajectory goal): ros/controller_io.py JointTrajectoryIO (the goal checked,
``JointTrajectoryController.goal``, handed over with ``submit``) -> driver/loop.py ``_cycle`` on the stepping thread
-> driver/controller_manager.py ``cycle`` -> driver/controllers/joint_trajectory.py ``update(time, period)``
(state interfaces in, command interfaces out) -> driver/system.py ``write()`` (rate limits, gravity
feed-forward) -> Simulator.set_joint_command_arrays -> ``step()``, ``read()`` -> the joint_state_broadcaster's
values -> ros/controller_io.py JointStateIO publishes /joint_states.
"""
