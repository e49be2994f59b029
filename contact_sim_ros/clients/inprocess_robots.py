"""Several robots of ONE simulated world in this process: the interface of
:class:`~contact_sim_ros.clients.robot_link.MultiRobotLink` (``start`` -> (t0, {robot: URDF}), ``state`` ->
{robot: state dict}, ``advance``, ``links[robot]``, ``close``) over direct calls into one
:class:`~contact_sim_ros.sim.simulator.Simulator`, no DDS.

The world is built as the simulation node builds it for a scene with ``robots:`` (driver/world.py
``World.build``): one :class:`~contact_sim_ros.driver.robot.Robot` per robot (its controllers file, joints and prefixed joint names,
its <ros2_control> block, its emulated :class:`ControllerManager` over its joints) on one hardware System, and one
:class:`~contact_sim_ros.driver.loop.SteppingLoop` running every robot's controller manager
(:class:`~contact_sim_ros.driver.controller_manager.ControllerManagers`). Each robot's publishers are the mailboxes of its
own :class:`~contact_sim_ros.clients.inprocess_link.InProcessHost` (what ``<ns>/<robot>/...`` topics carry over
ROS); contact wrenches are computed as the node publishes them in the simulation's namespace. One control period
= ``round(period / time_step)`` steps, then every broadcaster publishes the state at the tick.
"""

from __future__ import annotations

import weakref

from sensor_msgs.msg import JointState

from ..driver.control_period import ControlPeriod
from ..errors import ConfigError
from ..state_messages import fill_external_torques
from .inprocess_link import (ContactWrenchTopics, InProcessHost, build_world, control_period_steps, link_config,
                             release_world, run_control_period)
from .link_messages import ControllerError, stamp_ns


class InProcessRobot:
    """One robot's end of the in-process world: ``publish(controller, msg)`` is its
    ``<robot ns>/<controller>/joint_trajectory`` subscription, ``state(need)`` its state at the last tick
    (``js`` its joint_states, ``ext`` its external_joint_torques, ``ft`` its wrist wrench, and each wrench topic)."""

    mode = "lockstep"

    def __init__(self, world, name: str, host: InProcessHost, port):
        # the multi-robot link owns its robots: a weak reference back (a strong one would make a cycle that keeps
        # the whole world alive until Python's full garbage collection)
        self.world = weakref.proxy(world)
        self.name, self.host, self.port = name, host, port
        self._state: dict = {}

    @property
    def period_ns(self) -> int:
        return self.world.period_ns

    @property
    def t_ns(self) -> int:
        return self.world.t_ns

    @property
    def robot_description(self) -> str:
        return self.port.description_xml()

    def publish(self, controller: str, msg) -> None:
        try:
            callback = self.host.subscriptions[f"{controller}/joint_trajectory"]
        except KeyError:
            raise ControllerError(f"robot {self.name!r} has no trajectory controller {controller!r}; its "
                                  f"subscriptions: {sorted(self.host.subscriptions)}") from None
        callback(msg)

    def state(self, need=("ft", "ext")) -> dict:
        st = self._state
        missing = [k for k in ("js",) + tuple(need) if k not in st]
        if missing:
            raise ControllerError(f"in-process robot {self.name!r}: no {missing} (ft_topic / wrench_topics not "
                                  "configured)")
        return {k: st[k] for k in ("js",) + tuple(need)}


class InProcessMultiRobotLink:
    """MultiRobotLink's interface over one Simulator in this process (see the module docstring).

    ``scene``: a scene file with ``robots:``; ``robots``: the robot names, in the order the scenario lists them
    (each must be a robot of the scene); ``engine``, ``time_step`` (s), ``period`` (s, a whole number of steps);
    ``ft_topic``: the wrist F/T topic in each robot's namespace (None: none); ``wrench_topics``: contact wrench
    topics of the simulation's namespace (``contact_wrench/<body>``) every robot's state carries.
    """

    mode = "lockstep"

    def __init__(self, scene: str, robots, engine: str, time_step: float, period: float, *,
                 ft_topic: str | None = None, trajectory_controllers=(), wrench_topics=(),
                 inactive_controllers=None, engine_options: dict | None = None, overrides: dict | None = None):
        self.steps, self.period_ns = control_period_steps(period, time_step)
        # inactive_controllers: the node parameter, every robot's default
        self.config = cfg = link_config(scene, engine, time_step, engine_options=engine_options,
                                        inactive_controllers=inactive_controllers, overrides=overrides)
        world, transports = build_world(cfg)    # every robot of the world, as the node builds them
        self.sim = sim = world.sim
        presets = {r.name: r for r in sim.scene.robots}
        unknown = [r for r in robots if r not in presets]
        if unknown:
            raise ConfigError(f"{scene}: no robot(s) {unknown} in the scene; its robots: {sorted(presets)}")
        self.robots = list(robots)
        self.model = m = sim.model
        self.system, self.cm, self.loop = world.system, world.controller_manager, world.loop
        self.period = ControlPeriod(self.loop)      # the loop's steps, the control emulation compiled
        ports = [r.driver for r in world.robots]
        hosts = transports.hosts
        self._hosts = list(hosts.values())
        self.links = {p.name: InProcessRobot(self, p.name, hosts[p.name], p) for p in ports if p.name in self.robots}
        missing = [c for c in trajectory_controllers
                   if not any(f"{c}/joint_trajectory" in link.host.subscriptions for link in self.links.values())]
        if missing:
            raise ConfigError(f"in-process link: no robot of {self.robots} has the trajectory controller(s) {missing}")
        self.ft_topic = ft_topic.lstrip("/") if ft_topic else None
        self._wrenches = ContactWrenchTopics(m, wrench_topics, list(presets.values()))
        self._ext = {r: JointState(name=list(link.port.joint_names)) for r, link in self.links.items()}
        self.t_ns = 0
        self.failures: list[str] = []

    @property
    def leader(self):
        return self.links[self.robots[0]]

    # ------------------------------------------------------------------ measurements at the tick
    def _publish_tick(self) -> None:
        sim = self.sim
        self.loop.publish_now()               # every robot's broadcasters publish the state at this tick
        wrenches = self._wrenches.messages(sim)
        for r, link in self.links.items():
            box = link.host.box
            ext = self._ext[r]
            fill_external_torques(ext, sim, link.port.v_index)
            st = {"js": box["joint_states"], "ext": ext, **wrenches}
            if self.ft_topic and self.ft_topic in box:
                st["ft"] = box[self.ft_topic]
            link._state = st

    def _run_steps(self) -> None:
        run_control_period(self.period, self.steps, self.failures)

    # ------------------------------------------------------------------ MultiRobotLink's interface
    def start(self):
        """One control period of steps (as the ROS link's first ~/step), then every robot's state at that tick."""
        self._run_steps()
        self._publish_tick()
        self.t_ns = stamp_ns(self.leader._state["js"].header.stamp)
        return self.t_ns, {r: link.robot_description for r, link in self.links.items()}

    def state(self, need=("ft", "ext")) -> dict:
        return {r: link.state(need=need) for r, link in self.links.items()}

    def advance(self) -> int:
        self._run_steps()
        self._publish_tick()
        self.t_ns += self.period_ns
        return self.t_ns

    def close(self) -> None:
        release_world(self.loop, self.cm, self._hosts)

    @property
    def rejected(self) -> list[str]:
        return [x for host in self._hosts for x in host.rejected]
