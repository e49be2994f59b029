"""The simulated world below the transports, built in one place: the node parameters (:class:`NodeConfig`) ->
the :class:`~contact_sim_ros.sim.simulator.Simulator` -> one :class:`~contact_sim_ros.driver.robot.Robot` per robot
of the scene -> the hardware System over all of them -> each robot's emulated controller manager (which of its
controllers start inactive: :func:`inactive_controllers`, the rule written once) -> the stepping loop. The ROS node
(ros/sim_node.py), the in-process links of the scenario clients (clients' ``InProcessLink`` and
``InProcessMultiRobotLink``) and so every campaign trial build their world here; they differ only in their
transports (what a robot's controllers publish through, what the loop publishes and reports through).

The counters the loop's diagnostics read (commands rejected or clamped by the transports,
:class:`~contact_sim_ros.driver.loop.CommandCounters`) and the loop's link (whether it runs, calls between two steps,
the command hand-over: :class:`~contact_sim_ros.driver.loop.LoopLink`) are built first and handed to the transports
and to the loop, so that no transport needs the loop. A transport that has work to do between two stages of the
build (the node: its start-up messages, namespace claim, ports and publishers once the Simulator exists, its
services once a controller manager exists) does it in the hooks of :class:`WorldTransports`, which the build calls;
nothing builds a piece of the world outside :meth:`World.build`. Like ros2_control's ``ros2_control_node`` (a
``ControllerManager`` over the ``ResourceManager`` the URDF describes, its executor the transport) or gz-sim's
``Server`` (one ``SimulationRunner`` whatever the systems), nothing here imports rclpy.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from .command_validation import JointLimits
from .config import HardwareInfo, SensorInfo
from .controller_manager import ControllerManagers
from .controllers.base import ControllerTransport
from .franka import franka_hands, with_hand_drives
from .loop import CommandCounters, LoopLink, SteppingLoop, Transport
from .node_config import NodeConfig, read_param_files, share_path
from .robot import Robot, merge_hardware_infos
from .system import SimulatorSystem
from ..errors import ConfigError
from ..sim.default_gains import DefaultGainsWarning
from ..sim.simulator import Simulator


def preset_inactive_controllers(preset: str) -> list | None:
    """``inactive_controllers`` of the preset's node parameter file config/node/<preset>.yaml (None if none)."""
    path = share_path("config", "node", f"{preset}.yaml")
    if not path.is_file():
        return None
    value = read_param_files([str(path)], "contact_sim", "").get("inactive_controllers")
    return list(value) if isinstance(value, (list, tuple)) else None


def inactive_controllers(robot, node_default, own_namespace: bool) -> list:
    """The controllers of ``robot`` (a scene's RobotPreset or None) spawned inactive: the scene robot's own
    ``inactive_controllers``; else, for a robot in its own namespace (a scene with several robots) and no node
    parameter ``inactive_controllers`` (``node_default``), its preset's config/node/<preset>.yaml list; else the
    node parameter."""
    inactive = getattr(robot, "inactive_controllers", None) if robot is not None else None
    if inactive is None and own_namespace and not node_default and robot is not None:
        inactive = preset_inactive_controllers(robot.preset_name or robot.name)
    return list(node_default if inactive is None else inactive)


@dataclass
class WorldRobot:
    """One robot of the world: its driver (``driver``: joints, <ros2_control> block, controllers file, controller
    manager), whether it has its own namespace (a scene with several robots or one that names a namespace), and
    its TF frame prefix (the node's ``frame_prefix`` then the robot's own) and the namespace of its controller
    manager (the keys of a controllers file are matched against it; the node sets its robot node's)."""

    driver: Robot
    own_namespace: bool
    frame_prefix: str
    namespace: str = "/"

    @property
    def name(self) -> str:
        return self.driver.name

    @property
    def preset(self):
        return self.driver.robot


def build_simulator(config: NodeConfig) -> Simulator:
    """The Simulator of the node parameters ``config``: its scene (a Franka Hand left without a drive by its robot's
    <ros2_control> block gets franka_gripper's, driver/franka.py) with the engine, time step and limits. The default
    gains' warnings are not raised here: the node says them in its log."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DefaultGainsWarning)
        return Simulator(with_hand_drives(config.load_scene()), **config.simulator_options())


def world_robots(config: NodeConfig, sim: Simulator) -> list[WorldRobot]:
    """The robots of ``sim``'s scene as the node lays them out (docs/ros_interface.md, "Several robots"): one robot
    and no namespace keeps the node's own namespace; otherwise each robot has its own. A world without a robot
    (objects only) has one driver over the model's joints. A user's URDF (``urdf`` parameter) is no preset."""
    m = sim.model
    presets = list(sim.scene.robots)
    if not presets:
        return [WorldRobot(Robot(None, None, m, preset_files=not config.urdf), False, config.frame_prefix)]
    instances = {r.name: r for r in m.robots}
    several = len(presets) > 1 or any(r.namespace for r in presets)
    return [WorldRobot(Robot(r, instances.get(r.name), m, preset_files=several or not config.urdf), several,
                       config.frame_prefix + (r.frame_prefix or "")) for r in presets]


def scene_sensor_infos(sim: Simulator, infos) -> tuple:
    """The scene's sensors measured on the stepping thread (``sim.scene.sensors`` but cameras: its ``sensors:``
    entries, built through the sensor registry) as ``<ros2_control>`` ``<sensor>``s (driver/config.SensorInfo: the
    type's state interfaces, its parameters with its ``type``), so that a controllers file's broadcaster names one
    by ``sensor_name`` as it names a ``<sensor>`` of a robot's block (force_torque_sensor_broadcaster,
    imu_sensor_broadcaster). ConfigError for a name a robot's block (``infos``: HardwareInfo or None) already has."""
    out = []
    for sensor in sim.scene.sensors:
        if sensor.off_thread:            # cameras: their own process
            continue
        taken = [i.source for i in infos if i is not None and i.sensor(sensor.name) is not None]
        if taken:
            raise ConfigError(f"{sim.scene.source}: {sensor.spec.source} ({sensor.name}): a <sensor> of {taken[0]} "
                              f"has this name already: rename the scene's sensor")
        out.append(SensorInfo(sensor.name, tuple(sensor.interfaces), {"type": sensor.spec.type, **sensor.spec.params}))
    return tuple(out)


class WorldTransports:
    """What the transports give :meth:`World.build` and the hooks it calls, in this order (each a no-op here):

    1. ``simulator_built(sim, robots)``: the Simulator (its scene loaded, the default gains' warnings not raised:
       the node says them in its log) and its robots (WorldRobot) exist, nothing else does (the node says its
       start-up notes, claims its namespace and builds its robot ports and publishers);
    2. ``controllers(robot)``: the ControllerTransport of a robot's controllers (None: none), asked once per robot;
    3. ``start_refused(message)``: the start state is one the first step would refuse; the ConfigError follows
       (the node lets go of what it holds on every failed build, this one included: SimNode.__init__);
    4. ``controller_manager_built(robot, cm)``: after each robot's controller manager is built (the node's
       services, its log line);
    5. ``loop``: the stepping loop's Transport (publish hooks, failure reports; None: none), read once the
       controller managers exist (the node makes it in ``simulator_built``)."""

    loop: Transport | None = None

    def simulator_built(self, sim: Simulator, robots: list) -> None:
        pass

    def controllers(self, robot: WorldRobot) -> ControllerTransport | None:
        return None

    def start_refused(self, message: str) -> None:
        pass

    def controller_manager_built(self, robot: WorldRobot, cm) -> None:
        pass


@dataclass
class World:
    """The built world (see the module docstring): ``config``, ``sim``, ``robots`` (WorldRobot, the scene's order),
    ``system``, ``managers`` (each robot's ControllerManager, the robots' order; empty with ``controllers_file:
    none``), ``controller_manager`` (what the loop runs: the one manager, a ControllerManagers over several, or
    None), ``loop`` (not started), ``counters``, ``limits`` and ``link`` (the loop's LoopLink)."""

    config: NodeConfig
    sim: Simulator
    robots: list
    system: SimulatorSystem
    managers: list
    controller_manager: object
    loop: SteppingLoop
    counters: CommandCounters
    limits: JointLimits = field(repr=False, default=None)
    link: LoopLink = field(repr=False, default=None)

    @classmethod
    def build(cls, config: NodeConfig, transports: WorldTransports, *, counters: CommandCounters | None = None,
              link: LoopLink | None = None) -> "World":
        """The world of ``config`` with ``transports`` (their hooks called on the way: :class:`WorldTransports`).
        ``counters``, ``link``: the transports' (built here if None). ConfigError (a bad scene, URDF, preset,
        controllers file, or a start state the first step would refuse) naming the file or parameter."""
        counters = counters if counters is not None else CommandCounters()
        link = link if link is not None else LoopLink()
        sim = build_simulator(config)
        robots = world_robots(config, sim)
        transports.simulator_built(sim, robots)
        # the robots' <ros2_control> blocks (a user's block's initial_values: the start, as mock hardware); the node
        # parameter ros2_control_file applies to the single-robot layout
        infos = [r.driver.hardware_info(sim, config.ros2_control_file if not r.own_namespace else "")
                 for r in robots]
        sensors = scene_sensor_infos(sim, infos)       # the scene's sensors: as a block's <sensor>s
        if sensors:
            infos.append(HardwareInfo(str(sim.scene.source), (), (), (), sensors))
        config.apply_initial_positions(sim)                # the node parameter wins; a reset returns there
        problem = config.start_pose_error(sim)             # a start the first step would refuse: refused now
        if problem:
            transports.start_refused(problem)
            raise ConfigError(problem)
        system = SimulatorSystem(sim, merge_hardware_infos(infos), gravity_compensation=config.gravity_compensation,
                                 commands=link.commands)
        limits = JointLimits.from_model(sim.model)
        managers = []
        if config.controllers_file.strip().lower() != "none":
            hand_fingers = (tuple(h.finger for h in franka_hands(sim.model)) if config.franka_interfaces else ())
            rates = {"joint_states": config.joint_states_rate, "wrench": config.wrench_rate}
            for r in robots:
                fingers = tuple(f for f in hand_fingers if f in r.driver.joint_names)
                cm = r.driver.build_controller_manager(
                    system, config.controllers_file,
                    inactive_controllers(r.preset, config.inactive_controllers, r.own_namespace),
                    transports.controllers(r), limits=limits, default_rates=rates,
                    name_errors=r.own_namespace, passive_joints=tuple(sim.passive_joints) + fingers,
                    active=config.active_controllers, namespace=r.namespace)
                managers.append(cm)
                transports.controller_manager_built(r, cm)
        cm = (managers[0] if len(managers) == 1 else ControllerManagers(managers)) if managers else None
        loop = SteppingLoop(system, cm, transports.loop, config.real_time_factor, start_paused=config.start_paused,
                            max_lag_s=config.max_lag, thread_priority=config.thread_priority, counters=counters,
                            link=link)
        return cls(config, sim, robots, system, managers, cm, loop, counters, limits, link)
