"""ros2 launch contact_sim_ros topic_based_control.launch.py robot:=iiwa_wsg engine:=tamsi
[controllers_file:=/path/to/my_controllers.yaml] [time_step:=0.001] [real_time_factor:=1.0]
[command_interfaces:="position"] [active_controllers:="joint_state_broadcaster arm_controller"]
[tf_source:=sim]

The real ros2_control stack against the simulation, the route Isaac Sim users take: a controller_manager
(ros2_control_node) whose hardware is topic_based_ros2_control/TopicBasedSystem, which publishes its joint
commands on /joint_command and reads joint states from /contact_sim/joint_states; the simulation node plays
the robot on the other end of those two topics. Needs a ROS 2 Jazzy install with controller_manager,
ros2_controllers, topic_based_ros2_control, robot_state_publisher and xacro (docs/ros2_control_files.md).

Started:
  * sim_node (contact_sim_ros): the simulation, with controllers_file "none" (no emulated controllers: it
    takes sensor_msgs/JointState commands on /joint_command and publishes its raw joint states on
    joint_states_topic /contact_sim/joint_states); parameter files as in sim.launch.py;
  * robot_state_publisher: robot_description = xacro of urdf/ros2_control/robot_with_ros2_control.urdf.xacro
    (urdf/<robot>.urdf + the <ros2_control> block of urdf/ros2_control/<robot>.ros2_control.xacro, with
    plugin topic_based_ros2_control/TopicBasedSystem, the two topics, and no <sensor> blocks:
    TopicBasedSystem exports joint interfaces only);
  * ros2_control_node (controller_manager) with the controllers file (default:
    config/ros2_control/<robot>_controllers.yaml), reading robot_description from /robot_description;
  * spawners (controller_manager spawner): the active controllers, then the others of the file --inactive.
    Controllers the TopicBasedSystem cannot serve are not spawned (logged): sensor broadcasters, and
    controllers that need a command interface missing from command_interfaces.
All with use_sim_time (the simulation publishes /clock).

command_interfaces (default "position"): the command interfaces the <ros2_control> joints declare.
TopicBasedSystem sends every declared command interface of every joint in one JointState message, with NaN
for those no active controller writes, and the simulation node rejects non-finite commands; so by default
only position is declared (trajectory, gripper action and forward position controllers). Give
"position velocity effort" only if the simulation node accepts NaN entries as "not commanded".

tf_source: "sim" (default) keeps the simulation node's /tf and /tf_static (robot links and free objects, with
its frame_prefix) and moves robot_state_publisher's to /robot_state_publisher/tf{,_static};
"robot_state_publisher" does the opposite (robot TF from /joint_states as on hardware; the simulation's
goes to /contact_sim/tf{,_static}). Either way each frame has one publisher.
"""

import os

import yaml
from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction
from launch.substitutions import Command, FindExecutable, LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

PACKAGE = "contact_sim_ros"
PLUGIN = "topic_based_ros2_control/TopicBasedSystem"
JOINT_COMMANDS_TOPIC = "/joint_command"
JOINT_STATES_TOPIC = "/contact_sim/joint_states"
CONTROLLER_MANAGER = "/controller_manager"

ARGUMENTS = {
    "robot": ("iiwa_wsg", "robot preset (config/robots/<robot>.yaml): iiwa_wsg, franka, allegro, barrett"),
    "engine": ("tamsi", "contact engine: tamsi, lagged, similar, sap, quasistatic_miqp, quasistatic_lcp, "
                        "lcp_minimal, semi_implicit"),
    "controllers_file": ("", "controller_manager parameter YAML; empty = "
                             "share/contact_sim_ros/config/ros2_control/<robot>_controllers.yaml"),
    "time_step": ("0.001", "simulation time step (s)"),
    "real_time_factor": ("1.0", "1.0 = paced to the wall clock, 0 = as fast as possible"),
    "command_interfaces": ("position", "command interfaces of every <ros2_control> joint, a space-separated "
                                       "subset of 'position velocity effort'"),
    "active_controllers": ("", "space-separated controllers to activate; empty = the robot's defaults "
                               "(the other controllers of the file are loaded inactive)"),
    "tf_source": ("sim", "who publishes the robot's /tf: sim or robot_state_publisher"),
}

# Activated by default; every other controller of the file is loaded and configured but left inactive.
DEFAULT_ACTIVE = {
    "iiwa_wsg": ["joint_state_broadcaster", "arm_controller", "gripper_action_controller", "ft_sensor"],
    "franka": ["joint_state_broadcaster", "arm_controller", "gripper_action_controller", "ft_sensor"],
    "allegro": ["joint_state_broadcaster", "hand_controller"],
    "barrett": ["joint_state_broadcaster", "hand_controller"],
}

# controller types that read <sensor> interfaces, which TopicBasedSystem does not export
SENSOR_TYPES = ("force_torque_sensor_broadcaster/", "imu_sensor_broadcaster/", "range_sensor_broadcaster/")
# command interface a controller type claims, by the plugin's package
TYPE_INTERFACE = {"position_controllers": "position", "velocity_controllers": "velocity",
                  "effort_controllers": "effort"}


def _controllers(path):
    """[(name, type, ros__parameters)] of a controller_manager parameter file, in file order."""
    with open(path) as fh:
        data = yaml.safe_load(fh) or {}
    sections = {}
    for key, value in data.items():
        name = str(key).rstrip("/").split("/")[-1]   # '/**/arm_controller' -> 'arm_controller'
        if isinstance(value, dict):
            sections.setdefault(name, {}).update(value.get("ros__parameters") or {})
    manager = sections.get("controller_manager", {})
    return [(name, spec["type"], sections.get(name, {}))
            for name, spec in manager.items() if isinstance(spec, dict) and "type" in spec]


def _needed_interfaces(ctype, params):
    """Command interfaces a controller claims (empty for broadcasters)."""
    if ctype.startswith("joint_trajectory_controller/"):
        return set(params.get("command_interfaces", ["position"]))
    if ctype.startswith("forward_command_controller/"):
        return {params.get("interface_name", "")}
    package = ctype.split("/")[0]
    return {TYPE_INTERFACE[package]} if package in TYPE_INTERFACE else set()


def _spawner(names, inactive=False):
    args = list(names) + ["--controller-manager", CONTROLLER_MANAGER, "--controller-manager-timeout", "60"]
    if inactive:
        args.append("--inactive")
    return Node(package="controller_manager", executable="spawner", arguments=args,
                parameters=[{"use_sim_time": True}], output="screen")


def _launch(context):
    share = get_package_share_directory(PACKAGE)
    value = {name: LaunchConfiguration(name).perform(context) for name in ARGUMENTS}
    robot = value["robot"]
    controllers_file = value["controllers_file"] or os.path.join(
        share, "config", "ros2_control", f"{robot}_controllers.yaml")
    command_interfaces = value["command_interfaces"].split()
    tf_from_sim = value["tf_source"] != "robot_state_publisher"
    actions = []

    # (a) the simulation: no emulated controllers, raw joint states for TopicBasedSystem
    params = [os.path.join(share, "config", "node.yaml")]
    per_robot = os.path.join(share, "config", "node", f"{robot}.yaml")
    if os.path.isfile(per_robot):
        params.append(per_robot)
    params.append({
        "robot": robot,
        "engine": value["engine"],
        "time_step": float(value["time_step"]),
        "real_time_factor": float(value["real_time_factor"]),
        "use_sim_time": True,
        "controllers_file": "none",
        "joint_states_topic": JOINT_STATES_TOPIC,
    })
    # robot_state_publisher publishes the robot_description the controller manager needs (with the
    # <ros2_control> block); the simulation's own (plain URDF) goes elsewhere
    sim_remaps = [("robot_description", "/contact_sim/robot_description")]
    if not tf_from_sim:
        sim_remaps += [("/tf", "/contact_sim/tf"), ("/tf_static", "/contact_sim/tf_static")]
    actions.append(Node(package=PACKAGE, executable="sim_node", name="contact_sim", parameters=params,
                        remappings=sim_remaps, output="screen", emulate_tty=True))

    # (b) robot_description: the preset's URDF + its <ros2_control> block for TopicBasedSystem
    wrapper = os.path.join(share, "urdf", "ros2_control", "robot_with_ros2_control.urdf.xacro")
    robot_description = ParameterValue(Command([
        FindExecutable(name="xacro"), " ", wrapper,
        f" robot:={robot} plugin:={PLUGIN}",
        f" joint_commands_topic:={JOINT_COMMANDS_TOPIC} joint_states_topic:={JOINT_STATES_TOPIC}",
        f" command_interfaces:='{' '.join(command_interfaces)}' sensors:=false",
    ]), value_type=str)
    rsp_remaps = [] if not tf_from_sim else [("/tf", "/robot_state_publisher/tf"),
                                              ("/tf_static", "/robot_state_publisher/tf_static")]
    actions.append(Node(package="robot_state_publisher", executable="robot_state_publisher",
                        parameters=[{"robot_description": robot_description, "use_sim_time": True}],
                        remappings=rsp_remaps, output="screen"))

    # (c) the real controller manager with the hardware controllers file
    actions.append(Node(package="controller_manager", executable="ros2_control_node",
                        parameters=[controllers_file, {"use_sim_time": True}],
                        remappings=[("~/robot_description", "/robot_description")], output="screen"))

    # (d) spawners: active controllers first, the rest of the file inactive
    wanted_active = value["active_controllers"].split() or DEFAULT_ACTIVE.get(robot, ["joint_state_broadcaster"])
    active, inactive = [], []
    for name, ctype, cparams in _controllers(controllers_file):
        if ctype.startswith(SENSOR_TYPES):
            actions.append(LogInfo(msg=f"not spawning {name} ({ctype}): TopicBasedSystem exports no sensor "
                                       f"interfaces; the simulation publishes the wrench on its own topic"))
            continue
        missing = _needed_interfaces(ctype, cparams) - set(command_interfaces)
        if missing:
            actions.append(LogInfo(msg=f"not spawning {name} ({ctype}): needs command interface(s) "
                                       f"{sorted(missing)}, not in command_interfaces:={command_interfaces}"))
            continue
        (active if name in wanted_active else inactive).append(name)
    if active:
        actions.append(_spawner(active))
    if inactive:
        actions.append(_spawner(inactive, inactive=True))
    return actions


def generate_launch_description():
    return LaunchDescription(
        [DeclareLaunchArgument(name, default_value=default, description=doc)
         for name, (default, doc) in ARGUMENTS.items()] + [OpaqueFunction(function=_launch)])
