"""One robot of the simulated world as its real driver stack presents it, without a transport (no rclpy): its
joints, its ``robot_description``, its ``<ros2_control>`` block, its controllers file and its emulated controller
manager over ITS joints, and the hardware-level joint commands it accepts (``joint_command``). The ROS side of a
robot (its node or namespace, publishers, ``joint_command`` subscription) is ros/robot_port.py; the in-process
link builds the same robots (clients/inprocess_robots.py).

Controllers files (``controller_manager`` YAML as on hardware): the robot entry's ``controllers_file``, else the
node parameter ``controllers_file``, else the robot preset's shipped ``config/ros2_control/<preset>_controllers
.yaml``, else a default set from its joint groups. Joint names in the file may be given without the robot's
``prefix`` (a shipped or vendor file): ``prefixed_controllers`` adds it where the prefixed name is one of the
robot's joints (``joints``, ``joint``, ``extra_joints``, ``constraints.<joint>``, the F/T ``frame_id``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import ConfigError
from ..model.composition import robot_description_xml
from ..resources import share_dir
from .command_validation import CommandRejected, reject_unexported, validate_joint_state_command
from .config import HardwareInfo, parse_ros2_control, read_controllers_file, read_ros2_control, resolve_controllers
from .controller_manager import ControllerManager


# ------------------------------------------------------------------------------------------ names


def prefixed_controllers(file, prefix: str, joints, frames=()):
    """``file`` (ros2_control.config.ControllersFile) with ``prefix`` added to the joint names of every
    controller's parameters that are not yet names of ``joints`` but are with the prefix, and to an F/T
    ``frame_id`` / ``sensor_name`` whose prefixed name is in ``frames``. Returns ``file`` itself without a
    prefix."""
    if not prefix:
        return file
    joints, frames = set(joints), set(frames)

    def name(v, known):
        v = str(v)
        return prefix + v if v not in known and prefix + v in known else v

    def params(p: dict) -> dict:
        out = {}
        for k, v in p.items():
            if k in ("joints", "extra_joints", "command_joints") and isinstance(v, (list, tuple)):
                v = [name(j, joints) for j in v]
            elif k == "joint" and isinstance(v, str):
                v = name(v, joints)
            elif k in ("frame_id", "sensor_name") and isinstance(v, str):
                v = name(v, frames)
            elif k == "constraints" and isinstance(v, dict):
                v = {name(j, joints): c for j, c in v.items()}
            elif k.startswith(("constraints.", "gains.")) and k.count(".") >= 2:
                group, j, rest = k.split(".", 2)
                k = f"{group}.{name(j, joints)}.{rest}"
            elif k == "interface_names" and isinstance(v, dict):
                v = {a: (name(s.split("/")[0], frames) + "/" + s.split("/", 1)[1] if "/" in str(s) else s)
                     for a, s in v.items()}
            elif k.startswith("interface_names.") and isinstance(v, str) and "/" in v:   # rcl's dotted form
                v = name(v.split("/")[0], frames) + "/" + v.split("/", 1)[1]
            out[k] = v
        return out
    specs = tuple(dataclasses.replace(c, params=params(c.params)) for c in file.controllers)
    return dataclasses.replace(file, controllers=specs, source=f"{file.source} (prefix {prefix!r})")



def merge_hardware_infos(infos):
    """One HardwareInfo of several robots' blocks (None where a robot has none; None if all are)."""
    infos = [i for i in infos if i is not None]
    if not infos:
        return None
    if len(infos) == 1:
        return infos[0]
    return HardwareInfo(" + ".join(i.source for i in infos), sum((i.systems for i in infos), ()),
                        sum((i.plugins for i in infos), ()), sum((i.joints for i in infos), ()),
                        sum((i.sensors for i in infos), ()))


def validate_joint_command(limits, hardware, names, position=(), velocity=(), effort=(), source="joint_command",
                           joints=None, mimic=(), robot: str = ""):
    """A hardware-level ``joint_command`` (sensor_msgs/JointState fields) checked and clamped
    (command_validation): ``joints`` (None: every actuated joint) and their ``mimic`` joints are the ones it may
    name (another is rejected as unknown_joint, naming ``robot``'s joints); a command on an interface ``hardware``
    (the System's command interfaces, hardware.JointCommandInterfaces) does not export is rejected
    (command_validation.reject_unexported: an effort where the engine ignores efforts). Returns the JointCommand;
    CommandRejected with the reason."""
    if joints is not None:
        own = set(joints) | set(mimic)
        unknown = [n for n in names if n not in own]
        if unknown:
            raise CommandRejected("unknown_joint", f"joint_command of robot {robot!r}: joint(s) {unknown} are not "
                                                   f"its joints ({', '.join(joints)})")
    cmd = validate_joint_state_command(limits, names, position, velocity, effort, source=source)
    reject_unexported(cmd, hardware)
    return cmd


# ------------------------------------------------------------------------------------------ robot


class Robot:
    """One robot of the world (module docstring): ``preset`` (RobotPreset or None for a model without one),
    ``instance`` (its RobotInstance in the model: joint names, mimic joints) and the model."""

    def __init__(self, preset, instance, model, preset_files: bool = True):
        """``preset_files`` False: the robot is a user's URDF (the node's ``urdf`` parameter) whose name may be a
        preset's (a file ``franka.urdf``): the preset's shipped <ros2_control> block and controllers file, looked
        up by that name, are not its own."""
        self.robot, self.instance = preset, instance
        self.preset_files = bool(preset_files)
        self.name = instance.name if instance is not None else (preset.name if preset is not None else "robot")
        joints = list(instance.joint_names) if instance is not None else list(model.joint_names)
        self.joint_names = joints
        self.mimic_joint_names = list(instance.mimic_joint_names) if instance is not None else []
        self.joint_indices = np.array([model.joint_index(j) for j in joints], dtype=int)
        self.v_index = np.asarray(model.joint_v_index)[self.joint_indices]
        self.model = model
        self.controller_manager = None

    def description_xml(self) -> str | None:
        """The robot's URDF as it is in the model (names prefixed), None without a robot."""
        if self.robot is None:
            return None
        return robot_description_xml(self.robot)

    def hardware_info(self, sim, ros2_control_file: str = ""):
        """The robot's <ros2_control> block: ``ros2_control_file`` (the node parameter, single-robot layout),
        else the robot URDF's own block, else the preset's shipped urdf/ros2_control/<preset>.ros2_control.xacro
        (with the robot's prefix), None if there is none. A user's block's position initial_values are applied to
        ``sim`` as the robot's start (as mock hardware starts)."""
        robot = self.robot
        own = None
        if ros2_control_file:
            own = read_ros2_control(ros2_control_file)
        elif robot is not None:
            own = parse_ros2_control(self.description_xml(), str(robot.urdf))
        if own is not None:
            initial = {j.name: j.initial_values["position"] for j in own.joints
                       if "position" in j.initial_values and j.name in self.joint_names}
            if initial:
                sim.set_initial_positions(initial)
            return own
        if robot is None or not self.preset_files:
            return None
        preset = robot.preset_name or robot.name
        shipped = share_dir() / "urdf" / "ros2_control" / f"{preset}.ros2_control.xacro"
        if not (preset and shipped.is_file()):
            return None
        return read_ros2_control(shipped, {"prefix": robot.prefix} if robot.prefix else None)

    def controllers_file(self, controllers_file: str, inactive, passive_joints=(), namespace: str = "/"):
        """(ControllersFile, names to load inactive) of this robot (module docstring: which file) for a controller
        manager in ``namespace``."""
        robot = self.robot
        own_file = getattr(robot, "controllers_file", None) if robot is not None else None
        if own_file:
            file = read_controllers_file(own_file, namespace=namespace)
        else:
            shipped_robot = (dataclasses.replace(robot, name=robot.preset_name or robot.name)
                             if robot is not None and self.preset_files else None)
            passive = set(passive_joints)          # a default set drives the driven joints only
            file, inactive = resolve_controllers(controllers_file, shipped_robot,
                                                 [j for j in self.joint_names if j not in passive], inactive,
                                                 namespace=namespace)
        return file, list(inactive)

    def build_controller_manager(self, system, controllers_file: str, inactive, transport=None, limits=None,
                                 default_rates=None, name_errors: bool = False,
                                 passive_joints=(), active=(), namespace: str = "/"):
        """The robot's emulated ControllerManager over ``system`` (module docstring: which controllers file);
        ``inactive``, ``active``: the controllers spawned inactive / active (controller_manager.
        spawned_controllers); ``namespace``: the controller manager's; ``transport``: its controllers' transport
        side; ``name_errors``: a ConfigError names the robot. Joint names in the file are prefixed with the
        robot's prefix where it names them without it."""
        robot = self.robot
        file, inactive = self.controllers_file(controllers_file, inactive, passive_joints, namespace)
        if robot is not None and robot.prefix:
            frames = [f.name for f in self.model.pin_model.frames]
            info = system.command.hardware_info
            sensors = [s.name for s in info.sensors] if info is not None else []
            file = prefixed_controllers(file, robot.prefix, self.joint_names + self.mimic_joint_names,
                                        frames + sensors)
        try:
            cm = ControllerManager(system, file, inactive, robot, joints=self.joint_names, transport=transport,
                                   limits=limits, default_rates=default_rates, active=active)
        except ConfigError as exc:
            if not name_errors:
                raise
            raise ConfigError(f"robot {self.name!r}: {exc}") from None
        self.controller_manager = cm
        return cm

    def joint_command(self, limits, hardware, names, position=(), velocity=(), effort=(), source="joint_command"):
        """A ``joint_command`` of this robot's joints (validate_joint_command; ``hardware``: the System's command
        interfaces)."""
        return validate_joint_command(limits, hardware, names, position, velocity, effort, source,
                                      joints=self.joint_names, mimic=self.mimic_joint_names, robot=self.name)
