"""The emulated ros2_control controllers, one module per controller type behind one interface (base.py,
registry.py). They read state interfaces and write command interfaces (driver/hardware.py) and never see the
Simulator nor a transport's node; their topics and actions are attached by the transport (ros/controller_io.py,
clients/inprocess_link.py). No rclpy."""
