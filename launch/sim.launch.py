"""ros2 launch contact_sim_ros sim.launch.py robot:=iiwa_wsg engine:=tamsi [time_step:=0.001]
[real_time_factor:=1.0] [use_sim_time:=true] [config:=my_params.yaml] [scene:=...] [namespace:=...]
[frame_prefix:=...] [viewer:=true] [viewer_port:=8080] [urdf:=my_robot.urdf | urdf:="my_robot.urdf.xacro arg:=v"]

Thin on purpose: arguments -> parameters of the one node: config/node.yaml, config/node/<robot>.yaml (not with
urdf:=), config:=, then the arguments, as --params-file in that order (rcl merges them; list-valued parameters
are lists in every file). The console command ``sim_node --robot iiwa_wsg --engine tamsi ...``
(contact_sim_ros/ros/sim_node.py) does the same without launch. test/ros/test_launch_files.py starts the node
with the parameters this file gives, for every robot and engine.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

ARGUMENTS = {
    "robot": ("iiwa_wsg", "robot preset (config/robots/<robot>.yaml): iiwa_wsg, franka, allegro, barrett"),
    "urdf": ("", "a URDF (or \"FILE.xacro arg:=value ...\") instead of the robot preset (robot is then ignored)"),
    "engine": ("tamsi", "contact engine: tamsi, lagged, similar, sap, quasistatic_miqp, quasistatic_lcp, "
                        "lcp_minimal, semi_implicit"),
    "time_step": ("0.001", "simulation time step (s)"),
    "real_time_factor": ("1.0", "1.0 = paced to the wall clock, 0 = as fast as possible"),
    "use_sim_time": ("false", "the node's own ROS clock (logging) follows /clock; its stamps are always sim time"),
    "config": ("", "extra parameter YAML file (overrides config/node.yaml and config/node/<robot>.yaml)"),
    "scene": ("", "scene YAML (objects and environment); empty = the robot on a ground plane"),
    "namespace": ("", "ROS namespace of the node's topics and services (two robots: two namespaces)"),
    "frame_prefix": ("", "prefix of every TF frame but the world frame"),
    "viewer": ("false", "serve the live browser view (viser) on http://127.0.0.1:<viewer_port>"),
    "viewer_port": ("8080", "port of the browser view"),
    "controllers_file": ("", "controller_manager parameter YAML as on the robot (empty = the robot's shipped "
                             "config/ros2_control/<robot>_controllers.yaml; none = no emulated controllers)"),
    "ros2_control_file": ("", "URDF/xacro with the robot's <ros2_control> block (empty = the URDF's own or the "
                              "shipped one)"),
    "active_controllers": ("", "controllers loaded and activated (as spawner NAME), e.g. '[joint_state_broadcaster, "
                               "arm_controller]' (empty = every controller of the file but the inactive ones)"),
    "inactive_controllers": ("", "controllers loaded but not activated, e.g. '[forward_position_controller]' "
                                 "(empty = config/node/<robot>.yaml's list)"),
    "record": ("", "rosbag2 (MCAP) directory recording the node's publications"),
}


def _node(context):
    share = get_package_share_directory("contact_sim_ros")
    value = {name: LaunchConfiguration(name).perform(context) for name in ARGUMENTS}
    params = [os.path.join(share, "config", "node.yaml")]
    per_robot = os.path.join(share, "config", "node", f"{value['robot']}.yaml")
    if os.path.isfile(per_robot) and not value["urdf"]:
        params.append(per_robot)
    if value["config"]:
        params.append(value["config"])
    overrides = {
        "engine": value["engine"],
        "time_step": float(value["time_step"]),
        "real_time_factor": float(value["real_time_factor"]),
        "use_sim_time": value["use_sim_time"].lower() in ("true", "1", "yes"),
        "frame_prefix": value["frame_prefix"],
        "viewer": value["viewer"].lower() in ("true", "1", "yes"),
        "viewer_port": int(value["viewer_port"]),
    }
    if value["urdf"]:
        overrides["urdf"] = value["urdf"]
    else:
        overrides["robot"] = value["robot"]
    for name in ("scene", "controllers_file", "ros2_control_file", "record"):
        if value[name]:
            overrides[name] = value[name]
    for name in ("active_controllers", "inactive_controllers"):     # string arrays (rcl merges them by type)
        if value[name]:
            overrides[name] = [n.strip() for n in value[name].strip("[]").split(",") if n.strip()]
    params.append(overrides)
    return [Node(package="contact_sim_ros", executable="sim_node", name="contact_sim",
                 namespace=value["namespace"], parameters=params, output="screen", emulate_tty=True)]


def generate_launch_description():
    return LaunchDescription(
        [DeclareLaunchArgument(name, default_value=default, description=doc)
         for name, (default, doc) in ARGUMENTS.items()] + [OpaqueFunction(function=_node)])
