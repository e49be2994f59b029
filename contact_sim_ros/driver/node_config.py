"""Node parameters: defaults, validation with messages that name the valid values, the ROS parameter files
(``read_param_files``) and the plain command-line flags of the console entry point mapped onto ROS arguments. No
rclpy here: the ROS node (ros/sim_node.py) declares these parameters, and the in-process route (the scenario
clients' in-process links, campaign trials: driver/world.py) reads the same files without loading node code."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

import yaml

from .parameters import Parameter, ParameterTable
from .loop import MAX_STEPS_PER_REQUEST
from ..engines.registry import engine_names
from ..errors import ConfigError, unknown_choice
from ..model.loader import load_robot_preset, robot_preset_names
from ..model.robot_description import split_description
from ..resources import share_dir
from ..sim.scene import load_scene
from ..sim.divergence import DivergenceLimits
from ..sim.penetration import start_overlap
from ..sim.simulator import MAX_TIME_STEP
from ..yaml_files import missing_file, parse_yaml, read_mapping


DEFAULT_ROBOT = "iiwa_wsg"


def check_record_path(path) -> Path:
    """``path`` as a new bag directory the recorder can create: ConfigError (one line) if it is empty or exists,
    or if its nearest existing ancestor is not a directory or cannot be written. Creates nothing."""
    if not str(path).strip():
        raise ConfigError("parameter 'record': empty path")
    path = Path(path)
    if path.exists() or path.is_symlink():
        raise ConfigError(f"parameter 'record': {path} exists already; rosbag2 writes a new directory")
    ancestor = path.absolute().parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(f"parameter 'record': cannot create {path}: {ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConfigError(f"parameter 'record': cannot create {path}: no permission to write in {ancestor}")
    return path


def _p(default, kind: str, unit: str = "", description: str = "", **bounds):
    """A NodeConfig field declared with its parameter (driver.parameters.Parameter: type, unit, default, bounds,
    read-only, description); the field's name is the parameter's."""
    meta = {"parameter": Parameter("", kind, default, unit, description, **bounds)}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def _rate(default, description):
    return _p(default, "double", "Hz", description + " (0 = off)", lower=0.0, what="a rate")


@dataclass
class NodeConfig:
    """Parameters of the simulation node (ROS parameter names = field names), each declared once with its type,
    unit, default, bounds and description: from these come the validation (``from_mapping``), the ROS parameter
    descriptors (sim_node) and docs (``NODE_PARAMETERS.rows()``). All are read-only while the node runs but
    ``step_count``."""

    robot: str = _p("", "string", description="robot preset in config/robots/ (overrides a scene's robot; with "
                    "neither robot, urdf nor scene: DEFAULT_ROBOT)")
    urdf: str = _p("", "string", description="a URDF path (or 'file.urdf.xacro arg:=value') instead of a preset")
    scene: str = _p("", "string", description="scene YAML (objects, environment); '' = the robot (on a ground "
                    "plane)")
    ground: bool = _p(True, "bool", description="without a scene: add the ground plane z = 0 (off for the hands)")
    passive_joints: list = _p([], "string_array", description="joints left without a drive (with the scene's "
                              "own passive_joints; sim/default_gains.py)")
    initial_positions: str = _p("", "string", "rad, m", "YAML mapping joint -> the robot's start position, e.g. "
                                "\"{shoulder_lift_joint: -1.57}\": over the scene's initial_positions and the "
                                "<ros2_control> block's initial_value (a bare URDF's joints start at 0 or within "
                                "their limits); ~/reset returns to it; '' = those")
    engine: str = _p("tamsi", "string", description="contact engine (engines/registry.py)")
    engine_options: str = _p("", "string", description="YAML mapping of the engine's options, e.g. "
                             "\"{max_iterations: 50}\"")
    divergence_limits: str = _p("", "string", description="YAML mapping overriding the divergence bounds of free "
                                "bodies (sim/divergence.py: max_speed m/s, max_angular_speed rad/s, max_distance "
                                "m; .inf: unbounded), e.g. \"{max_speed: 500}\"; 'off': no divergence check")
    penetration_limit: float = _p(1.0, "double", "", "a contact deeper than this fraction of the thinner body's "
                                  "thickness fails the step (sim/penetration.py); 0 = off", lower=0.0)
    time_step: float = _p(1e-3, "double", "s", "simulation time step", lower=0.0, lower_open=True,
                          upper=MAX_TIME_STEP)
    real_time_factor: float = _p(1.0, "double", "", "1 = paced to the wall clock, 0 = as fast as possible",
                                 lower=0.0)
    start_paused: bool = _p(False, "bool", description="start paused (~/pause, ~/step)")
    thread_priority: int = _p(0, "int", description="SCHED_FIFO priority of the stepping thread while it keeps "
                              "real time (as ros2_control's controller_manager's thread_priority, e.g. 50: no other "
                              "process delays its steps; not permitted: a warning and normal scheduling); 0 = "
                              "normal scheduling (driver/thread_priority.py)",
                              lower=0, upper=99)
    max_lag: float = _p(0.5, "double", "s", "wall time the paced loop may fall behind and still catch up (steps "
                        "without sleeping); beyond, the schedule is re-anchored (time is lost)", lower=0.0)
    gravity_compensation: bool = _p(True, "bool", description="add g(q) to the effort of position/velocity-"
                                    "controlled joints (as the iiwa's and Panda's own controllers do); effort "
                                    "commands stay raw")
    frame_prefix: str = _p("", "string", description="prepended to every TF frame but the world frame")
    world_frame: str = _p("world", "string", description="the fixed frame (not empty)")
    base_pose: list = _p([], "double_array", "m, rad", "[x, y, z, roll, pitch, yaw] overriding the preset's")
    publish_clock: bool = _p(True, "bool", description="publish /clock (sim time)")
    clock_rate: float = _rate(1000.0, "/clock")
    joint_states_rate: float = _rate(500.0, "joint_states")
    tf_rate: float = _rate(100.0, "/tf")
    wrench_rate: float = _rate(250.0, "wrist F/T sensor and external joint torques")
    contact_wrench_rate: float = _rate(50.0, "net contact wrench per body (contact_wrench/<body>)")
    contacts_rate: float = _rate(50.0, "per-contact detail (contact_sim_msgs/ContactArray)")
    markers_rate: float = _rate(10.0, "visualization_msgs/MarkerArray of contact forces")
    diagnostics_rate: float = _rate(1.0, "/diagnostics")
    contact_bodies: list = _p([], "string_array", description="bodies with a net contact wrench topic ([] = the "
                              "preset's contact_bodies + fingertip frames + free objects)")
    marker_force_scale: float = _p(0.01, "double", "m/N", "arrow length per N of contact force")
    step_count: int = _p(1, "int", description="steps executed per call of the ~/step service (settable while "
                         "running)", lower=1, upper=MAX_STEPS_PER_REQUEST, read_only=False)
    viewer: bool = _p(False, "bool", description="serve the live browser view (viser, in a child process)")
    viewer_port: int = _p(8080, "int", description="port of the browser view")
    viewer_rate: float = _rate(30.0, "frames sent to the viewer (at most, in wall time)")
    warn_throttle_s: float = _p(2.0, "double", "s", "a warning of one kind at most once per this time")
    on_failure: str = _p("pause", "string", description="after 10 consecutive failed steps: 'pause' (~/reset "
                         "recovers) or 'exit' (the process exits 1 with the cause; respawn restarts it)",
                         choices=("pause", "exit"))
    # ros2_control emulation (docs/ros_interface.md, "ros2_control and MoveIt")
    controllers_file: str = _p("", "string", description="controller_manager parameter YAML as on hardware; '' = "
                               "the robot's shipped config/ros2_control/<robot>_controllers.yaml (or a default set "
                               "for a bare URDF); 'none' = no emulated controllers (joint_command in, raw joint "
                               "states out on joint_states_topic: the topic_based_ros2_control route)")
    active_controllers: list = _p([], "string_array", description="controllers of the controllers file loaded "
                                  "and activated (spawner NAME); [] = every declared controller of an emulated "
                                  "type but the inactive ones")
    inactive_controllers: list = _p([], "string_array", description="controllers loaded but not activated "
                                    "(spawner --inactive)")
    franka_interfaces: bool = _p(True, "bool", description="any robot with a Franka Hand (franka_description's "
                                 "<arm_id>_finger_joint1/2, e.g. the FR3's or the franka preset's): serve "
                                 "franka_ros2's franka_gripper node (~/homing, ~/move, ~/grasp, ~/gripper_action, "
                                 "~/joint_states) on the hand; the robot preset 'franka' also "
                                 "franka_robot_state_broadcaster/robot_state (franka_msgs/FrankaRobotState); "
                                 "other robots: ignored")
    franka_gripper_name: str = _p("franka_gripper", "string", description="node name of the emulated "
                                  "franka_gripper (franka_gripper's launch: franka_gripper; MoveIt's FR3 config "
                                  "expects fr3_gripper/gripper_action: fr3_gripper)")
    ros2_control_file: str = _p("", "string", description="URDF/xacro with the <ros2_control> block; '' = the robot "
                                "URDF's own block, else the shipped urdf/ros2_control/<robot>.ros2_control.xacro")
    joint_states_topic: str = _p("joint_states", "string", description="raw joint states when controllers_file is "
                                 "'none'")
    record: str = _p("", "string", description="rosbag2 (MCAP) directory recording the node's own publications; "
                     "'' = off")
    camera_priority: str = _p("normal", "string", description="scheduling of the process rendering the scene's "
                              "cameras: 'normal' (niceness +5) or 'idle' (SCHED_IDLE, llvmpipe on one thread: less "
                              "step jitter, but on a CPU kept busy by other processes it gets almost no time: with "
                              "camera_sync the simulation then slows down, without it the frames drop)",
                              choices=("idle", "normal"))
    camera_sync: bool = _p(True, "bool", description="the stepping thread waits (at most 5 s) for the camera "
                           "process to take a camera's previous state before it hands over the next, as gz-sim's "
                           "sensors: every frame of the camera's rate in sim time is rendered and the real-time "
                           "factor drops when rendering cannot keep up; false: frames are dropped instead")

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_mapping(cls, values: dict) -> "NodeConfig":
        """Build and validate; unknown names and bad values raise ConfigError naming the valid values."""
        valid = cls.names()
        unknown = [k for k in values if k not in valid]
        if unknown:
            raise ConfigError(unknown_choice("parameter", unknown[0], valid))
        cfg = cls()
        for f in fields(cls):
            if f.name not in values or values[f.name] is None:
                continue
            raw = values[f.name]
            default = getattr(cfg, f.name)
            try:
                if isinstance(default, bool):
                    if isinstance(raw, str) and raw.lower() in ("true", "false"):
                        raw = raw.lower() == "true"
                    if not isinstance(raw, bool):
                        raise ValueError
                    value = raw
                elif isinstance(default, int):
                    if isinstance(raw, bool) or float(raw) != int(float(raw)):
                        raise ValueError
                    value = int(float(raw))
                elif isinstance(default, float):
                    if isinstance(raw, bool):
                        raise ValueError
                    value = float(raw)
                elif isinstance(default, list):
                    value = (list(raw) if not isinstance(raw, str)
                             else [] if raw == "" else parse_yaml(raw, f"parameter {f.name!r}"))
                    if not isinstance(value, list):
                        raise ValueError
                else:
                    value = str(raw)
            except (TypeError, ValueError):
                raise ConfigError(f"parameter {f.name!r}: expected {type(default).__name__}, got {raw!r}") from None
            setattr(cfg, f.name, value)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        engines = engine_names()
        if self.engine not in engines:
            raise ConfigError("parameter 'engine': " + unknown_choice("engine", self.engine, engines))
        if self.robot and not self.urdf and self.robot not in robot_names() and not self.robot.endswith(".yaml"):
            raise ConfigError("parameter 'robot': " + unknown_choice("robot", self.robot, robot_names()))
        if self.urdf:
            urdf_path = split_description(self.urdf)[0]     # "robot.urdf.xacro arm_id:=fr3": xacro arguments
            if not Path(urdf_path).is_file():
                raise ConfigError(f"parameter 'urdf': {missing_file(urdf_path)}: {urdf_path}")
        for p in NODE_PARAMETERS:          # bounds and finiteness from the table (arrays: checked below)
            if not p.is_array:
                p.check(getattr(self, p.name))
        if self.base_pose and (len(self.base_pose) != 6
                               or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in self.base_pose)):
            raise ConfigError(f"parameter 'base_pose': expected [x, y, z, roll, pitch, yaw] (m, rad), "
                              f"got {self.base_pose!r}")
        if self.engine_options:
            self.engine_options_dict()
        self.initial_positions_dict()
        self.simulator_options()
        if not self.world_frame:
            raise ConfigError("parameter 'world_frame': must not be empty")
        if self.record:    # refused at start-up, before the scene is loaded (one line)
            check_record_path(self.record)

    def engine_options_dict(self) -> dict:
        opts = parse_yaml(self.engine_options, "parameter 'engine_options'") if self.engine_options else {}
        if opts is None:
            return {}
        if not isinstance(opts, dict):
            raise ConfigError(f"parameter 'engine_options': expected a mapping, e.g. '{{max_iterations: 50}}', "
                              f"got {self.engine_options!r}")
        return opts

    def initial_positions_dict(self) -> dict:
        """``initial_positions`` as {joint: float} (rad or m); ConfigError naming the parameter if malformed."""
        if not self.initial_positions.strip():
            return {}
        value = parse_yaml(self.initial_positions, "parameter 'initial_positions'")
        if not isinstance(value, dict) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value.values()):
            raise ConfigError(f"parameter 'initial_positions': expected a mapping {{joint: rad or m}}, e.g. "
                              f"'{{shoulder_lift_joint: -1.57}}', got {self.initial_positions!r}")
        return {str(k): float(v) for k, v in value.items()}

    def apply_initial_positions(self, sim) -> None:
        """Set ``initial_positions`` as the start of ``sim`` (a Simulator; its reset returns there): ConfigError
        naming the parameter for a joint the model does not have or a value outside the joint's limits."""
        positions = self.initial_positions_dict()
        if not positions:
            return
        joints = list(sim.model.joint_names)
        unknown = [j for j in positions if j not in joints]
        if unknown:
            raise ConfigError(f"parameter 'initial_positions': joint(s) {unknown} are not actuated joints of the "
                              f"model; its joints: {', '.join(joints)}")
        try:
            sim.set_initial_positions(positions)
        except ConfigError as exc:
            raise ConfigError(f"parameter 'initial_positions': {exc}") from None

    def start_pose_error(self, sim) -> str:
        """'' if ``sim`` (a Simulator) can step from its start state, else why not, one line: the two bodies that
        overlap deeper than the penetration bound at the start (sim/penetration.py ``start_overlap``: the first step
        would fail with 'deep interpenetration'), the depth, and how to give the start pose."""
        overlap = start_overlap(sim)
        if overlap is None:
            return ""
        pm, m = sim.model.pin_model, sim.model
        actuated = set(m.joint_names)
        chain = []
        for j in (overlap.joint_a, overlap.joint_b):
            while j > 0:
                if pm.names[j] in actuated and pm.names[j] not in chain:
                    chain.append(pm.names[j])
                j = pm.parents[j]
        chain.sort(key=lambda name: pm.getJointId(name))
        where = (f"{overlap.link_a!r} and {overlap.link_b!r} overlap by {100 * overlap.depth:.3g} cm at the start "
                 f"pose (more than the thinner body is thick, {100 * overlap.thickness:.3g} cm: the first step would "
                 f"fail with deep interpenetration)")
        if not chain:
            return (f"start pose: {where}; move the object in the scene (its pose) or leave the simulation's "
                    f"ground out (ground: false)")
        how = [f"the node parameter initial_positions (a YAML mapping joint -> rad or m as a string; e.g. "
               f"--ros-args -p 'initial_positions:=\"{{{chain[min(1, len(chain) - 1)]}: <value>}}\"', or in a "
               f"parameter file: sim_node --config FILE, sim.launch.py config:=FILE)"]
        how.append("the <ros2_control> block's <state_interface name=\"position\"><param "
                   "name=\"initial_value\">...</param> of each joint (as mock hardware starts)")
        how.append("the scene's robot 'initial_positions: {joint: value}' (a scene file with robot: {urdf: ..., "
                   "initial_positions: ...})" if self.urdf or not self.scene else
                   f"the 'initial_positions' of the robot in the scene {self.scene}")
        how.append("or raise the robot with base_pose")
        return (f"start pose: {where}. The joints that place them: {', '.join(chain)}. Give the robot a start pose "
                f"clear of it: " + "; ".join(how))

    def simulator_options(self) -> dict:
        """The Simulator's keyword arguments these parameters give (engine, time step, engine options, divergence
        and penetration limits); ConfigError naming the parameter when one is malformed."""
        limits = None
        if self.divergence_limits.strip().lower() == "off":
            limits = False
        elif self.divergence_limits.strip():
            limits = parse_yaml(self.divergence_limits, "parameter 'divergence_limits'")
            if not isinstance(limits, dict):
                raise ConfigError(f"parameter 'divergence_limits': expected a mapping, e.g. '{{max_speed: 500}}', "
                                  f"or 'off', got {self.divergence_limits!r}")
            try:
                DivergenceLimits.make(limits)
            except ConfigError as exc:
                raise ConfigError(f"parameter {exc}") from None
        return dict(engine=self.engine, time_step=self.time_step, engine_options=self.engine_options_dict(),
                    divergence_limits=limits, penetration_limit=self.penetration_limit or False)

    def decimation(self, rate: float) -> int:
        """Steps between publications for ``rate`` Hz (0 = never, returned as 0)."""
        if rate <= 0.0:
            return 0
        return max(1, int(round(1.0 / (rate * self.time_step))))

    def load_scene(self, spec=None):
        """The Scene of ``spec`` (default: ``scene_spec()``), named after the ``scene`` file when there is one:
        errors name it and relative paths in it (URDFs, controllers files) resolve against its folder."""
        return load_scene(self.scene_spec() if spec is None else spec,
                          source=str(Path(self.scene).resolve()) if self.scene else None)

    def scene_spec(self):
        """The scene for ``load_scene``: a path, or a dict built from robot/urdf/scene/base_pose."""
        data = None
        if self.scene:
            data = _read_yaml(self.scene, "parameter 'scene'")
        else:
            data = {"environment": [{"name": "ground", "shape": "halfspace"}]} if self.ground else {}
        if self.urdf:
            path, xacro_args = split_description(self.urdf)
            robot = {"urdf": str(Path(path).resolve()), "xacro_args": xacro_args}
        elif self.robot:
            robot = self.robot
        else:
            robot = data.get("robot") if self.scene else DEFAULT_ROBOT
        if self.base_pose and robot is not None:
            if not isinstance(robot, dict):
                preset = load_robot_preset(robot)
                mapping = _read_yaml(preset.source, "robot preset")
                mapping["urdf"] = preset.urdf          # already expanded from a xacro
                mapping.pop("xacro_args", None)
                mapping["package_dirs"] = list(preset.package_dirs)
                robot = mapping
            robot = dict(robot)
            robot["base_pose"] = {"xyz": list(map(float, self.base_pose[:3])),
                                  "rpy": list(map(float, self.base_pose[3:]))}
        if robot is not None:
            data["robot"] = robot
        if self.passive_joints:
            data["passive_joints"] = list(dict.fromkeys(list(data.get("passive_joints") or [])
                                                        + [str(j) for j in self.passive_joints]))
        return data


NODE_PARAMETERS = ParameterTable(*(dataclasses.replace(f.metadata["parameter"], name=f.name)
                                   for f in fields(NodeConfig)))


def _read_yaml(path, what) -> dict:
    p = Path(path)
    if not p.is_file():
        cand = Path(share_dir()) / "scenes" / p
        cand = cand if cand.suffix else cand.with_suffix(".yaml")
        if not cand.is_file():
            raise ConfigError(f"{what}: {missing_file(path)}: {path}")
        p = cand
    return read_mapping(p, what)


def robot_names() -> list[str]:
    return robot_preset_names()


def share_path(*parts) -> Path:
    """A file of the package's share directory (config/, scenes/, ...), installed or in the source tree."""
    return Path(share_dir()).joinpath(*parts)


FASTDDS_PROFILES_VARIABLE = "FASTRTPS_DEFAULT_PROFILES_FILE"    # Fast DDS 2.x (rmw_fastrtps_cpp in Jazzy)


def use_fastdds_writer_profile(environ=None) -> str | None:
    """Before rclpy.init of the node's own process: point Fast DDS at config/fastdds_writers.xml (the writers'
    NACK-suppression time; why: the file's comment), unless the user set a profiles file (their choice wins) or
    ``RMW_IMPLEMENTATION`` names another middleware. ``environ``: the process environment (default os.environ).
    Returns the profile's path if it was set, else None."""
    environ = os.environ if environ is None else environ
    rmw = environ.get("RMW_IMPLEMENTATION", "")
    if FASTDDS_PROFILES_VARIABLE in environ or (rmw and not rmw.startswith("rmw_fastrtps")):
        return None
    path = share_path("config", "fastdds_writers.xml")
    if not path.is_file():
        return None
    environ[FASTDDS_PROFILES_VARIABLE] = str(path)
    return str(path)


# ------------------------------------------------------------------ plain command-line flags -> ROS args

_FLAGS = {
    # flag: parameter
    "--robot": "robot", "--urdf": "urdf", "--scene": "scene", "--engine": "engine",
    "--engine-options": "engine_options", "--time-step": "time_step", "--real-time-factor": "real_time_factor",
    "--frame-prefix": "frame_prefix", "--joint-states-rate": "joint_states_rate", "--tf-rate": "tf_rate",
    "--clock-rate": "clock_rate", "--wrench-rate": "wrench_rate", "--base-pose": "base_pose",
    "--viewer-port": "viewer_port",
}


@dataclass
class CommandLine:
    """The console command's arguments: ROS arguments for rclpy and what the node needs before rclpy."""

    ros_args: list
    robot: str | None = None
    config_files: list = field(default_factory=list)
    node_name: str = "contact_sim"
    namespace: str = ""


def plain_args_to_ros_args(argv: list[str]) -> CommandLine:
    """Map plain flags (``--robot iiwa_wsg --time-step 0.001 --namespace ns ...``) onto ROS arguments.

    ``ros_args``: the untouched ROS arguments then ``--ros-args -p name:=value ...``; ``--namespace NS`` becomes
    the remap ``__ns:=/NS``, ``--node-name N`` the remap ``__node:=N``, ``--paused`` ``start_paused:=true``,
    ``--use-sim-time`` ``use_sim_time:=true``. ``--config FILE`` files are returned in ``config_files``: their
    values become the node's parameter defaults (``read_param_files``), so that command-line values override
    them (rcl would let a --params-file override -p).
    """
    argv = list(argv)
    ros_part: list[str] = []
    if "--ros-args" in argv:
        k = argv.index("--ros-args")
        argv, ros_part = argv[:k], argv[k:]
    parser = argparse.ArgumentParser(prog="sim_node", description="contact_sim_ros simulation node",
                                     epilog="Any --ros-args ... given after these flags are passed to ROS.")
    helps = {"robot": "robot preset: " + ", ".join(robot_names()), "urdf": "URDF file instead of a preset",
             "scene": "scene YAML (objects, environment)", "engine": "contact engine (default tamsi)",
             "engine_options": "engine options as a YAML mapping", "time_step": "s (default 0.001)",
             "real_time_factor": "1 = real time (default), 0 = as fast as possible",
             "frame_prefix": "prefix of every TF frame but the world frame",
             "base_pose": "x,y,z,roll,pitch,yaw of the robot base (m, rad)"}
    for flag, param in _FLAGS.items():
        parser.add_argument(flag, dest=param, default=None, metavar=param.upper(),
                            help=helps.get(param, f"ROS parameter {param}"))
    parser.add_argument("--namespace", default=None, help="ROS namespace of topics and services")
    parser.add_argument("--node-name", default=None, help="node name (default contact_sim)")
    parser.add_argument("--config", action="append", default=[], metavar="PARAMS_YAML",
                        help="ROS parameter file (repeatable; flags override it)")
    parser.add_argument("--paused", action="store_true", help="start paused (use the ~/step service)")
    parser.add_argument("--use-sim-time", action="store_true", help="the node's own ROS clock follows /clock")
    parser.add_argument("--viewer", action="store_true", help="serve the live browser view (viser)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code == 0:
            raise
        raise ConfigError("invalid command line; valid flags: " + ", ".join(
            sorted(list(_FLAGS) + ["--namespace", "--node-name", "--config", "--paused", "--use-sim-time",
                                   "--viewer"])))
    extra = ["--ros-args"]
    for param in _FLAGS.values():
        value = getattr(args, param)
        if value is not None:
            if param == "base_pose":
                try:
                    numbers = [float(x) for x in value.replace(",", " ").split()]
                except ValueError:
                    raise ConfigError(f"--base-pose: expected 'x,y,z,roll,pitch,yaw' (m, rad), got {value!r}") \
                        from None
                value = "[" + ",".join(repr(x) for x in numbers) + "]"
            elif param in ("frame_prefix", "engine_options", "scene", "urdf", "robot"):
                value = yaml.safe_dump(str(value), default_style="'").strip().replace("\n...", "")
            extra += ["-p", f"{param}:={value}"]
    if args.namespace:
        ns = args.namespace if args.namespace.startswith("/") else "/" + args.namespace
        extra += ["-r", f"__ns:={ns}"]
    if args.node_name:
        extra += ["-r", f"__node:={args.node_name}"]
    if args.paused:
        extra += ["-p", "start_paused:=true"]
    if args.viewer:
        extra += ["-p", "viewer:=true"]
    if args.use_sim_time:
        extra += ["-p", "use_sim_time:=true"]
    node_name, namespace = args.node_name or "contact_sim", args.namespace or ""
    for a in ros_part:
        if a.startswith("__node:="):
            node_name = a.split(":=", 1)[1]
        elif a.startswith("__ns:="):
            namespace = a.split(":=", 1)[1]
    # robot, urdf and scene as the node will have them (--config files, --params-file files as launch passes
    # them, -p values, then the flags): they choose config/node/<robot>.yaml
    config_args = [x for path in args.config for x in ("--params-file", path)]
    given = {**_ros_args_parameters(config_args + ros_part, node_name, namespace),
             **{k: getattr(args, k) for k in ("robot", "urdf", "scene") if getattr(args, k) is not None}}
    robot, urdf, scene = (str(given[k]) if given.get(k) is not None else None for k in ("robot", "urdf", "scene"))
    if urdf:      # a URDF instead of a preset (NodeConfig: urdf wins): no preset's node file
        robot = ""
    elif not robot and scene:
        # a scene's preset: its config/node/<robot>.yaml applies too; a robot mapping: none ("")
        robot = scene_robot_name(scene) or ""
    elif not robot:
        robot = None    # neither robot, urdf nor scene: main() takes DEFAULT_ROBOT's file, as NodeConfig the robot
    return CommandLine(ros_part + (extra if len(extra) > 1 else []), robot, list(args.config), node_name,
                       namespace)


def _ros_args_parameters(ros_args: list[str], node_name: str, namespace: str) -> dict:
    """robot, urdf and scene of ROS arguments as rcl gives them to the node: ``--params-file`` files in order,
    then ``-p name:=value``. Unreadable files are skipped here (rcl reports them)."""
    files, values = [], {}
    for flag, value in zip(ros_args, ros_args[1:]):
        if flag == "--params-file":
            files.append(value)
        elif flag in ("-p", "--param") and value.split(":=", 1)[0] in ("robot", "urdf", "scene") and ":=" in value:
            name, text = value.split(":=", 1)
            try:
                values[name] = yaml.safe_load(text)
            except yaml.YAMLError:
                values[name] = text
    try:
        merged = read_param_files(files, node_name, namespace.strip("/"), strict=False) if files else {}
    except ConfigError:
        merged = {}
    return {**{k: merged[k] for k in ("robot", "urdf", "scene") if k in merged}, **values}


def scene_robot_name(scene: str) -> str | None:
    """The preset name a scene file's ``robot:`` names (None for a mapping, no robot or an unreadable file:
    the node reports a bad scene when it loads it)."""
    try:
        robot = _read_yaml(scene, "scene").get("robot")
    except ConfigError:
        return None
    return robot if isinstance(robot, str) and robot in robot_names() else None


def default_param_files(robot: str | None) -> list[str]:
    """config/node.yaml and, if present, config/node/<robot>.yaml (what launch/sim.launch.py passes)."""
    out = []
    base = share_path("config", "node.yaml")
    if base.is_file():
        out.append(str(base))
    if robot:
        per = share_path("config", "node", f"{robot}.yaml")
        if per.is_file():
            out.append(str(per))
    return out


def read_param_files(paths, node_name: str = "contact_sim", namespace: str = "", strict: bool = True) -> dict:
    """Merge the ``ros__parameters`` of ROS parameter YAML files (later files win) for this node: sections
    ``/**``, ``<node_name>``, ``/<node_name>``, ``<ns>/<node_name>``. Unknown parameters are a ConfigError
    (``strict`` False: ignored)."""
    ns = "/" + namespace.strip("/") if namespace.strip("/") else ""
    keys = {"/**", "**", node_name, "/" + node_name, f"{ns}/{node_name}", f"{ns}/{node_name}".lstrip("/"),
            f"{ns}/**"}
    valid = set(NodeConfig.names()) | {"use_sim_time"}
    merged = {}
    for path in paths:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"parameter file is a directory, not a file: {path}" if p.is_dir() else
                              f"parameter file not found: {path}")
        data = read_mapping(p, "a ROS parameter file ('/**: {ros__parameters: {...}}')")
        for key, section in data.items():
            if key not in keys or not isinstance(section, dict):
                continue
            params = section.get("ros__parameters") or {}
            if not isinstance(params, dict):
                raise ConfigError(f"parameter file {path}: {key}.ros__parameters must be a mapping")
            unknown = sorted(set(params) - valid)
            if unknown and strict:
                raise ConfigError(f"parameter file {path}: " + unknown_choice("parameter", unknown[0], valid))
            merged.update(params)
    return merged
