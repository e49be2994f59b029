"""Simulated RGB-D cameras (issue 28): declared in the scene (``cameras:``), rendered headless off the stepping
thread from a copy of the state: color, metric linear depth (ideal or a RealSense D4xx-like stereo model), point
cloud and segmentation labels per robot link and per object.

Layout: ``spec`` (the scene's camera entries, validated), ``visual_scene`` (every link's and object's visual
geometry as triangle meshes), ``backend`` (the OpenGL context), ``renderer`` (one off-screen pass),
``depth_models`` (ideal / stereo noise), ``rig`` (the API: render a camera from a state to numpy arrays),
``render_thread`` (a thread of its own that owns the rig and renders the states the stepping thread hands it),
``frame_writer`` (``contact-sim run --camera``: PNG files).
Nothing here imports rclpy; ``contact_sim_ros/ros/camera_publisher.py`` is the ROS side.
"""
