"""One robot of the simulated world on ROS 2, as its real driver stack would present it (docs/ros_interface.md,
"Several robots"): the robot's ``robot_description``, its emulated ``controller_manager`` with its controllers
(``joint_states`` from its joint_state_broadcaster, trajectory / gripper / forward controllers over ITS joints),
``external_joint_torques`` of its joints and a hardware-level ``joint_command`` topic.

A scene with one robot and no ``namespace`` (every shipped robot preset, ``--urdf``) keeps today's layout: the
port lives in the simulation node itself. A scene whose robots name a ``namespace`` (scene key ``robots:``,
model/composition.py) gives each robot a child node ``<node namespace>/<robot namespace>/<node name>`` in the same
process and context, so that ``/left/arm_controller/follow_joint_trajectory``, ``/left/joint_states`` and
``/left/controller_manager/list_controllers`` are where a real two-arm cell's drivers put them. TF frames of a
robot's links carry the node's ``frame_prefix`` then the robot's own ``frame_prefix``.

Controllers files (``controller_manager`` YAML as on hardware): the robot entry's ``controllers_file``, else the
node parameter ``controllers_file``, else the robot preset's shipped ``config/ros2_control/<preset>_controllers
.yaml``, else a default set from its joint groups. Joint names in the file may be given without the robot's
``prefix`` (a shipped or vendor file): ``prefixed_controllers`` adds it where the prefixed name is one of the
robot's joints (``joints``, ``joint``, ``extra_joints``, ``constraints.<joint>``, the F/T ``frame_id``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from ..errors import ConfigError
from .command_validation import CommandRejected, reject_unsupported_effort, validate_joint_state_command
from .state_messages import JointStateCdr, has_readers


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
            elif k.startswith("constraints.") and k.count(".") >= 2:
                _, j, rest = k.split(".", 2)
                k = f"constraints.{name(j, joints)}.{rest}"
            elif k == "interface_names" and isinstance(v, dict):
                v = {a: (name(s.split("/")[0], frames) + "/" + s.split("/", 1)[1] if "/" in str(s) else s)
                     for a, s in v.items()}
            out[k] = v
        return out
    specs = tuple(dataclasses.replace(c, params=params(c.params)) for c in file.controllers)
    return dataclasses.replace(file, controllers=specs, source=f"{file.source} (prefix {prefix!r})")


def full_namespace(node_namespace: str, robot_namespace: str) -> str:
    """``/scenario`` + ``left`` -> ``/scenario/left``; an absolute robot namespace is taken as it is."""
    ns = robot_namespace.strip()
    if ns.startswith("/"):
        return ns.rstrip("/") or "/"
    base = node_namespace.rstrip("/")
    return f"{base}/{ns.strip('/')}"


def preset_inactive_controllers(preset: str) -> list | None:
    """``inactive_controllers`` of the preset's node parameter file config/node/<preset>.yaml (None if none)."""
    from .node_config import read_param_files, share_path
    path = share_path("config", "node", f"{preset}.yaml")
    if not path.is_file():
        return None
    value = read_param_files([str(path)], "contact_sim", "").get("inactive_controllers")
    return list(value) if isinstance(value, (list, tuple)) else None


# ------------------------------------------------------------------------------------------ node


class RobotNode(Node):
    """The rclpy node of one robot (its namespace): the emulated controllers create their topics, services and
    actions here; what they read of the simulation (config, limits, loop, contact forces, warnings) is the
    simulation node's."""

    def __init__(self, sim_node, namespace: str):
        # the process's global ROS arguments are not applied: a '-r __ns:=...' remap of the simulation node
        # would otherwise replace the robot's namespace (the node's namespace is already part of it)
        super().__init__(sim_node.get_name(), namespace=namespace, context=sim_node.context,
                         start_parameter_services=False, use_global_arguments=False)
        self.sim_node = sim_node

    # what ControllerContext users read of "the node"
    config = property(lambda self: self.sim_node.config)
    limits = property(lambda self: self.sim_node.limits)
    sim = property(lambda self: self.sim_node.sim)
    loop = property(lambda self: self.sim_node.loop)

    def contact_forces(self, sim):
        return self.sim_node.contact_forces(sim)

    def reject_command(self, exc) -> None:
        self.sim_node.reject_command(exc)

    def note_clamped(self, notes, source) -> None:
        self.sim_node.note_clamped(notes, source)

    def warn_throttled(self, message: str, key: str | None = None) -> None:
        self.sim_node.warn_throttled(f"[{self.get_namespace()}] {message}",
                                     key=None if key is None else f"{self.get_namespace()}/{key}")


# ------------------------------------------------------------------------------------------ port


class RobotPort:
    """One robot's ROS interface (see the module docstring). ``node``: the simulation node itself (single-robot
    layout) or a ``RobotNode`` in the robot's namespace."""

    def __init__(self, sim_node, preset, instance, node, frame_prefix: str):
        self.sim_node, self.robot, self.instance, self.node = sim_node, preset, instance, node
        self.name = instance.name if instance is not None else (preset.name if preset is not None else "robot")
        self.frame_prefix = frame_prefix
        self.controller_manager = None
        m = sim_node.model
        joints = list(instance.joint_names) if instance is not None else list(m.joint_names)
        self.joint_names = joints
        self.joint_indices = np.array([m.joint_index(j) for j in joints], dtype=int)
        self.own_node = node is not sim_node
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
        self.pub_description = node.create_publisher(String, "robot_description", latched)
        self.pub_ext_torques = node.create_publisher(JointState, "external_joint_torques", 10)
        # published as serialized bytes (effort only): no rclpy message conversion at wrench_rate
        self._ext_cdr = JointStateCdr("", joints, sequences=("effort",))
        self._ext_tau = np.zeros((1, len(joints)))
        self._v_index = np.asarray(m.joint_v_index)[self.joint_indices]
        if self.own_node:     # the simulation node keeps the hardware-level joint_command of every joint
            node.create_subscription(JointState, "joint_command", self._on_joint_command, 10)

    # ---------------------------------------------------------------------------- robot_description

    def description_xml(self) -> str | None:
        """The robot's URDF as it is in the model (names prefixed), None without a robot."""
        if self.robot is None:
            return None
        from ..model.composition import robot_description_xml
        return robot_description_xml(self.robot)

    def publish_description(self) -> None:
        try:
            text = self.description_xml()
        except OSError as exc:
            self.sim_node.log.warn(f"robot_description of {self.name!r} not published: {exc}")
            return
        if text is not None:
            self.pub_description.publish(String(data=text))

    # ---------------------------------------------------------------------------- hardware

    def hardware_info(self):
        """The robot's <ros2_control> block: node parameter ros2_control_file (single-robot layout), else the
        robot URDF's own block, else the preset's shipped urdf/ros2_control/<preset>.ros2_control.xacro (with
        the robot's prefix), None if there is none. A user's block's position initial_values are applied as
        the robot's start (as mock hardware starts)."""
        from .node_config import share_path
        from .ros2_control.config import parse_ros2_control, read_ros2_control
        cfg, robot, sim_node = self.sim_node.config, self.robot, self.sim_node
        own = None
        if cfg.ros2_control_file and not self.own_node:
            own = read_ros2_control(cfg.ros2_control_file)
        elif robot is not None:
            own = parse_ros2_control(self.description_xml(), str(robot.urdf))
        if own is not None:
            initial = {j.name: j.initial_values["position"] for j in own.joints
                       if "position" in j.initial_values and j.name in self.joint_names}
            if initial:
                sim_node.sim.set_initial_positions(initial)
            return own
        if robot is None:
            return None
        preset = robot.preset_name or robot.name
        shipped = share_path("urdf", "ros2_control", f"{preset}.ros2_control.xacro")
        if not (preset and shipped.is_file()):
            return None
        return read_ros2_control(shipped, {"prefix": robot.prefix} if robot.prefix else None)

    # ---------------------------------------------------------------------------- controllers

    def build_controller_manager(self, loop, inactive_default=(), ros: bool = True):
        """The robot's emulated controller manager (module docstring: which controllers file); ``ros`` False: the
        in-process transport (controllers/inprocess_robots.py: no actions, no services)."""
        from .ros2_control.config import read_controllers_file, resolve_controllers
        from .ros2_control.controller_manager import ControllerManager
        cfg, robot = self.sim_node.config, self.robot
        own_file = getattr(robot, "controllers_file", None) if robot is not None else None
        inactive = getattr(robot, "inactive_controllers", None) if robot is not None else None
        if inactive is None and self.own_node and not inactive_default and robot is not None:
            inactive = preset_inactive_controllers(robot.preset_name or robot.name)
        inactive = list(inactive_default if inactive is None else inactive)
        if own_file:
            file = read_controllers_file(own_file)
        else:
            shipped_robot = (dataclasses.replace(robot, name=robot.preset_name or robot.name)
                             if robot is not None else None)
            passive = set(self.sim_node.sim.passive_joints)      # a default set drives the driven joints only
            file, inactive = resolve_controllers(cfg.controllers_file, shipped_robot,
                                                 [j for j in self.joint_names if j not in passive], inactive)
        if robot is not None and robot.prefix:
            m = self.sim_node.model
            frames = [f.name for f in m.pin_model.frames]
            sensors = [s.name for s in loop.hw.hardware_info.sensors] if loop.hw.hardware_info is not None else []
            file = prefixed_controllers(file, robot.prefix, self.joint_names + list(self.instance.mimic_joint_names),
                                        frames + sensors)
        try:
            cm = ControllerManager(self.node, loop, file, inactive, robot, ros=ros, joints=self.joint_names,
                                   frame_prefix=self.frame_prefix)
        except ConfigError as exc:
            if not self.own_node:
                raise
            raise ConfigError(f"robot {self.name!r}: {exc}") from None
        self.controller_manager = cm
        return cm

    # ---------------------------------------------------------------------------- publications

    def publish_external_torques(self, sim) -> None:
        """External joint torques of this robot's joints: the generalized contact force (N*m or N), as
        franka_ros2 publishes them."""
        if not has_readers(self.pub_ext_torques):
            return
        res, tau = sim.last_result, self._ext_tau
        if res is None:                 # before the first step
            tau[:] = 0.0
        else:
            res.generalized_contact_force.take(self._v_index, out=tau[0])
        self.pub_ext_torques.publish(self._ext_cdr.encode(sim.t, tau))

    def _on_joint_command(self, msg: JointState):
        """Hardware-level commands of this robot's joints (names as in the model, i.e. prefixed)."""
        sim_node = self.sim_node
        unknown = [n for n in msg.name if n not in self.joint_names and n not in self.instance.mimic_joint_names]
        if unknown:
            sim_node.reject_command(CommandRejected(
                "unknown_joint", f"joint_command of robot {self.name!r}: joint(s) {unknown} are not its joints "
                                 f"({', '.join(self.joint_names)})"))
            return
        try:
            cmd = validate_joint_state_command(sim_node.limits, msg.name, msg.position, msg.velocity, msg.effort,
                                               source=f"{self.node.get_namespace()}/joint_command")
            reject_unsupported_effort(cmd, sim_node.sim.engine)
        except CommandRejected as exc:
            sim_node.reject_command(exc)
            return
        sim_node.note_clamped(cmd.clamped, "joint_command")
        sim_node.loop.commands.push_command(cmd)


# ------------------------------------------------------------------------------------------ several


class ControllerManagers:
    """The stepping loop's ``control`` over several robots' controller managers (each at its own update rate)."""

    every = 1

    def __init__(self, managers):
        self.managers = list(managers)

    def update(self, sim) -> None:
        n = sim.step_count
        for cm in self.managers:
            if n % cm.every == 0:
                cm.update(sim)

    def preempt(self, command) -> None:
        for cm in self.managers:
            cm.preempt(command)

    def reset(self, sim) -> None:
        for cm in self.managers:
            cm.reset(sim)

    def on_model_changed(self, model) -> None:
        for cm in self.managers:
            cm.on_model_changed(model)

    def shutdown(self) -> None:
        for cm in self.managers:
            cm.shutdown()

    @property
    def hooks(self):
        return [h for cm in self.managers for h in cm.hooks]


def merge_hardware_infos(infos):
    """One HardwareInfo of several robots' blocks (None where a robot has none; None if all are)."""
    infos = [i for i in infos if i is not None]
    if not infos:
        return None
    if len(infos) == 1:
        return infos[0]
    from .ros2_control.config import HardwareInfo
    return HardwareInfo(" + ".join(i.source for i in infos), sum((i.systems for i in infos), ()),
                        sum((i.plugins for i in infos), ()), sum((i.joints for i in infos), ()),
                        sum((i.sensors for i in infos), ()))

