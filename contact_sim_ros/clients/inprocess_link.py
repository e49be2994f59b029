"""The controllers' connection to a simulation in the same process: the interface of
:class:`~contact_sim_ros.clients.robot_link.RobotLink` (``start``, ``state``, ``publish``, ``advance``,
``close``) over direct calls into a :class:`~contact_sim_ros.sim.simulator.Simulator`, no DDS.

Same message semantics and rates as the node in lock-step mode: the world the node builds (driver/world.py
``World.build``: the Simulator, the hardware System, each robot's emulated ros2_control controllers from the same
controllers file with the same inactive ones, run by the same :class:`ControllerManager` and
:class:`SteppingLoop`) with this module's transport (``InProcessHost``: no actions, no services): ``publish(controller, msg)`` is the ``<controller>/joint_trajectory`` subscription, and the
joint_state / force-torque broadcasters publish their messages into the host's mailboxes (``box``: topic -> the
latest message). External joint torques and contact wrenches are computed as the node's publications compute them.
One control period = ``round(period / time_step)`` steps, then every broadcaster publishes the state at the tick
(as the node does when paused after ``~/step``). A trial then costs only physics.
"""

from __future__ import annotations

import logging

import numpy as np
import yaml
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState

try:   # built into the venv by scripts/ensure_venv.sh (msgs/control_msgs), as ros/controller_io.py imports it
    from control_msgs.msg import JointTrajectoryControllerState
except ImportError:    # pragma: no cover - no control_msgs: no controller_state, as the node
    JointTrajectoryControllerState = None

from ..driver.control_period import ControlPeriod
from ..driver.controllers.base import ControllerIO, ControllerTransport
from ..driver.controllers.force_torque_sensor_broadcaster import ForceTorqueSensorBroadcaster
from ..driver.controllers.joint_state_broadcaster import JointStateBroadcaster
from ..driver.controllers.joint_trajectory import JointTrajectoryController
from ..driver.controllers.sensor_state_broadcaster import WRENCH, SensorStateBroadcaster
from ..driver.loop import CommandCounters
from ..driver.node_config import NodeConfig, default_param_files, read_param_files, scene_robot_name
from ..driver.world import World, WorldTransports
from ..errors import ConfigError
from ..sensors.base import SensorSpec
from ..sensors.contact_wrench import ContactWrench
from ..state_messages import (fill_external_torques, fill_joint_state, fill_trajectory_controller_state,
                              fill_wrench, stamp, topic_token)
from .link_messages import ControllerError, stamp_ns


def _noisy_wrench(msg: WrenchStamped, dfx: float, dfy: float, dfz: float) -> WrenchStamped:
    """A copy of ``msg`` with (dfx, dfy, dfz) N added to its force (field by field: copy.deepcopy of a message
    costs ~50 us)."""
    out = WrenchStamped()
    out.header.stamp.sec, out.header.stamp.nanosec = msg.header.stamp.sec, msg.header.stamp.nanosec
    out.header.frame_id = msg.header.frame_id
    f, t = msg.wrench.force, msg.wrench.torque
    g, u = out.wrench.force, out.wrench.torque
    g.x, g.y, g.z = f.x + dfx, f.y + dfy, f.z + dfz
    u.x, u.y, u.z = t.x, t.y, t.z
    return out


class _Logger:
    """rclpy logger calls onto Python logging (logger 'contact_sim_ros.inprocess')."""

    def __init__(self):
        self._log = logging.getLogger("contact_sim_ros.inprocess")

    def info(self, msg, **_):
        self._log.info(msg)

    def warn(self, msg, **_):
        self._log.warning(msg)

    warning = warn

    def error(self, msg, **_):
        self._log.error(msg)


class _JointStates(ControllerIO):
    """A joint_state_broadcaster's ``joint_states`` in process: a new sensor_msgs/JointState per publication (the
    reader keeps it)."""

    def __init__(self, c, box: dict):
        self.c, self.box = c, box
        self.topic = (f"{c.name}/" if c.local else "") + "joint_states"

    def publish(self) -> None:
        msg = JointState(name=list(self.c.names))
        fill_joint_state(msg, self.c, self.c.values())
        self.box[self.topic] = msg


class _Wrench(ControllerIO):
    """A force_torque_sensor_broadcaster's ``<name>/wrench`` in process."""

    def __init__(self, c, box: dict, frame_prefix: str):
        self.c, self.box, self.topic = c, box, f"{c.name}/wrench"
        self.frame_id = frame_prefix + c.frame_id

    def publish(self) -> None:
        w = WrenchStamped()
        w.header.frame_id = self.frame_id
        fill_wrench(w, self.c.reading(), self.c.ctx.state.time)
        self.box[self.topic] = w


class _SensorState(ControllerIO):
    """A contact_sim_ros/SensorStateBroadcaster's messages in process (the topics and fields of ros/controller_io.py
    SensorStateIO): a new WrenchStamped per row, or JointState, per publication."""

    def __init__(self, c, box: dict, frame_prefix: str):
        self.c, self.box = c, box
        base = f"{c.name}/{c.sensor_type}"
        self.wrench = c.message_type == WRENCH
        self.topics = [(f"{base}/{topic_token(suffix)}" if suffix else base, frame_prefix + frame)
                       for suffix, frame in c.messages()]

    def publish(self) -> None:
        reading, t = self.c.reading(), self.c.ctx.state.time
        if self.wrench:
            for row, (topic, frame) in zip(reading.reshape(-1, 6), self.topics):
                w = WrenchStamped()
                w.header.frame_id = frame
                fill_wrench(w, row, t)
                self.box[topic] = w
            return
        msg = JointState(name=list(self.c.labels or ()), effort=[float(x) for x in reading])
        stamp(t, msg.header.stamp)
        self.box[self.topics[0][0]] = msg


class _TrajectoryState(ControllerIO):
    """A joint_trajectory_controller's ``<name>/controller_state`` in process (the fields ros/controller_io.py's
    JointTrajectoryIO.publish_state fills): a new control_msgs/JointTrajectoryControllerState per publication."""

    def __init__(self, c, box: dict):
        self.c, self.box, self.topic = c, box, f"{c.name}/controller_state"

    def publish_state(self, execution) -> None:
        msg = JointTrajectoryControllerState(joint_names=list(self.c.joints))
        fill_trajectory_controller_state(msg, self.c)
        self.box[self.topic] = msg


class InProcessHost(ControllerTransport):
    """The in-process transport of one robot's controllers: broadcasters publish into ``box`` (topic -> latest
    message), trajectory controllers' ``joint_trajectory`` subscriptions are callbacks in ``subscriptions`` (the
    link calls them), reports go to Python logging and to ``counters`` (the world's, which the loop's diagnostics
    read).
    ``trajectory_states``: False when nothing reads the trajectory controllers' ``controller_state`` (the
    campaign trial's controller reads joint states and wrenches only): they then build no message (a
    JointTrajectoryControllerState every control period of each controller, ~3 % of a campaign trial's CPU)."""

    def __init__(self, frame_prefix: str = "", trajectory_states: bool = True,
                 counters: CommandCounters | None = None):
        self.counters = counters if counters is not None else CommandCounters()
        self.frame_prefix = frame_prefix
        self.trajectory_states = trajectory_states
        self.box: dict = {}
        self.subscriptions: dict = {}
        self.rejected: list[str] = []
        self._logger = _Logger()

    def attach(self, controller):
        if isinstance(controller, JointTrajectoryController):
            self.subscriptions[f"{controller.name}/joint_trajectory"] = controller.on_trajectory
            if JointTrajectoryControllerState is not None and self.trajectory_states:
                return _TrajectoryState(controller, self.box)
        elif isinstance(controller, JointStateBroadcaster):
            return _JointStates(controller, self.box)
        elif isinstance(controller, ForceTorqueSensorBroadcaster):
            return _Wrench(controller, self.box, self.frame_prefix)
        elif isinstance(controller, SensorStateBroadcaster):
            return _SensorState(controller, self.box, self.frame_prefix)
        return None

    def info(self, message: str) -> None:
        self._logger.info(message)

    def error(self, message: str) -> None:
        self._logger.error(message)

    def warn_throttled(self, message: str, key: str | None = None) -> None:
        self._logger.warn(message)

    def reject_command(self, exc) -> None:
        self.rejected.append(str(exc))
        self.counters.count_rejection(exc.kind)
        self._logger.warn(f"command rejected ({exc.kind}): {exc}")

    def note_clamped(self, notes, source) -> None:
        if notes:
            self.counters.count_clamped(len(notes))

    def close(self) -> None:
        """Drop the subscriptions (the controllers' callbacks) and the mailboxes' last messages."""
        self.subscriptions.clear()
        self.box.clear()


def release_world(loop, cm, hosts) -> None:
    """End a link's world: the controllers finish what waits on them, then the references between them and the
    stepping loop are dropped (the loop's publish hooks and controller manager, the hosts' subscriptions). The
    controllers refer to the loop through their context, so these references form cycles that only Python's full
    garbage collection would free, which runs every few dozen trials of a campaign: each finished trial's whole
    world (Simulator, Pinocchio and coal data, ~1.3 MB) waited for it, ~60 MB per campaign worker. Broken here, a
    trial's world is freed by reference counting when the link goes."""
    cm.shutdown()
    for host in hosts:
        host.close()
    loop.detach_control()


def control_period_steps(period: float, time_step: float) -> tuple[int, int]:
    """(steps per control period, the period in ns): the period must be a whole number of time steps (s)."""
    steps = int(round(period / time_step))
    if steps < 1 or abs(steps * time_step - period) > 1e-9:
        raise ConfigError(f"control period {period} s is not a whole number of time steps {time_step} s")
    return steps, int(round(period * 1e9))


class InProcessTransports(WorldTransports):
    """The in-process transports of a world (World.build): an :class:`InProcessHost` per robot (``hosts``: robot
    name -> host, the world's order; its frame prefix the robot's), all counting into ``counters``; the stepping
    loop publishes nothing of its own (``loop`` None: the link publishes at the tick)."""

    loop = None

    def __init__(self, trajectory_states: bool = True):
        self.counters = CommandCounters()
        self.trajectory_states = trajectory_states
        self.hosts: dict[str, InProcessHost] = {}

    def controllers(self, robot) -> InProcessHost:
        host = self.hosts[robot.name] = InProcessHost(robot.frame_prefix, self.trajectory_states, self.counters)
        return host


def build_world(config: NodeConfig, trajectory_states: bool = True) -> tuple[World, InProcessTransports]:
    """The world of ``config`` (driver/world.py, as the node builds it) with in-process transports."""
    transports = InProcessTransports(trajectory_states)
    return World.build(config, transports, counters=transports.counters), transports


def link_config(scene: str, engine: str, time_step: float, *, robot_params: str = "",
                engine_options: dict | None = None, inactive_controllers=None,
                overrides: dict | None = None) -> NodeConfig:
    """The node's parameters for a link: its parameter files (config/node.yaml and, for ``robot_params``,
    config/node/<robot>.yaml) under ``scene``, ``engine``, ``time_step`` (s), lock-step (real-time factor 0),
    ``engine_options``, ``inactive_controllers`` (None: the robots' defaults) and ``overrides``."""
    values = read_param_files(default_param_files(robot_params), "contact_sim")
    values.update({"scene": str(scene), "engine": engine, "time_step": float(time_step),
                   "real_time_factor": 0.0, **(overrides or {})})
    if engine_options:
        values["engine_options"] = yaml.safe_dump(dict(engine_options), default_flow_style=True).strip()
    if inactive_controllers is not None:
        values["inactive_controllers"] = list(inactive_controllers)
    return NodeConfig.from_mapping(values)


class ContactWrenchTopics:
    """The ``contact_wrench/<body>`` topics a link's state carries, computed as the node publishes them: a topic
    names (by its topic token) a contact body or fingertip frame of one of ``robots`` (robot presets) or a free body
    of ``model``."""

    def __init__(self, model, topics, robots=()):
        known = {topic_token(b): b for r in robots for b in list(r.contact_bodies) + list(r.fingertip_frames)}
        known.update({topic_token(b.name): b.name for b in model.free_bodies})
        bodies = {}
        for topic in topics:
            token = topic.split("/", 1)[1] if topic.startswith("contact_wrench/") else topic
            if token not in known:
                raise ConfigError(f"in-process link: {topic!r} names no contact body; bodies: {sorted(known)}")
            bodies[topic] = known[token]
        self.topics = list(bodies)
        self._acc = ContactWrench(SensorSpec("contact_wrench", ContactWrench.type_name,
                                             {"bodies": list(bodies.values())}), model) if bodies else None

    def messages(self, sim) -> dict:
        """{topic: WrenchStamped} of the last step (N, N m, stamped with the simulation time)."""
        if self._acc is None:
            return {}
        out = {}
        for topic, wrench in zip(self.topics, self._acc.measure(sim)):
            msg = WrenchStamped()
            fill_wrench(msg, wrench, sim.t)
            out[topic] = msg
        return out


def run_control_period(period: ControlPeriod, steps: int, failures: list) -> None:
    """``steps`` steps of the stepping loop of ``period`` (driver/control_period.ControlPeriod: each step as
    ``SteppingLoop.step_now``, the control emulation compiled where it can be); a step that failed is noted in
    ``failures`` with its time."""
    period.run(steps, failures)


class InProcessLink:
    """RobotLink's interface over a Simulator in this process (see the module docstring).

    ``scene``: a scene file (as the node's ``--scene``); ``engine``, ``time_step`` (s), ``period`` (s, a whole
    number of steps); ``inactive_controllers``: as the node parameter (None: the robot's default);
    ``engine_options``: mapping; ``ft_noise_std`` (N): Gaussian noise on the wrist force the controller reads
    (``noise_seed`` seeds it: a trial stays reproducible); ``on_period(sim)``: called after every control period's
    steps (e.g. a browser view of the run; it must only read the simulation); ``trajectory_states``: False when
    nothing reads the trajectory controllers' ``controller_state`` messages in ``host.box`` (a campaign's trial;
    a replay's recording writes them to its bag).
    """

    mode = "lockstep"

    def __init__(self, scene: str, engine: str, time_step: float, period: float, *, ft_topic: str | None = None,
                 trajectory_controllers=(), wrench_topics=(), inactive_controllers=None,
                 engine_options: dict | None = None, timeout: float = 60.0, overrides: dict | None = None,
                 ft_noise_std: float = 0.0, noise_seed=0, on_period=None, trajectory_states: bool = True):
        self.steps, self.period_ns = control_period_steps(period, time_step)
        # the node's parameter files: config/node.yaml and the scene robot's config/node/<robot>.yaml
        self.config = cfg = link_config(
            scene, engine, time_step, robot_params=scene_robot_name(str(scene)) or "",
            engine_options=engine_options, inactive_controllers=inactive_controllers, overrides=overrides)
        world, transports = build_world(cfg, trajectory_states)
        self.sim = sim = world.sim
        self.system, self.cm, self.loop = world.system, world.controller_manager, world.loop
        self.period = ControlPeriod(self.loop)      # the loop's steps, the control emulation compiled
        self.model = m = sim.model
        self.robot = sim.scene.robot
        self.host = transports.hosts[world.robots[0].name]
        self.ft_topic = ft_topic
        missing = [c for c in trajectory_controllers if f"{c}/joint_trajectory" not in self.host.subscriptions]
        if missing:
            source = world.managers[0].source if world.managers else "(no controllers)"
            raise ConfigError(f"in-process link: no active-capable trajectory controller {missing} in {source}")
        self.trajectory_controllers = tuple(trajectory_controllers)
        # external joint torques and contact wrenches: as the node publishes them
        self.wrench_topics = tuple(wrench_topics)
        self._wrenches = ContactWrenchTopics(m, self.wrench_topics, [self.robot] if self.robot else [])
        self._ext = JointState()
        self._ext.name = list(m.joint_names)
        self._v_index = np.asarray(m.joint_v_index)
        self._ft_box = ft_topic.lstrip("/") if ft_topic else None
        self.t_ns = 0
        self.failures: list[str] = []
        # sensor noise the controller sees (a campaign's uncertainty): N, Gaussian on each wrist force axis
        self.ft_noise_std = float(ft_noise_std)
        self._rng = np.random.default_rng(noise_seed)
        self.on_period = on_period
        self._rig = None                         # cameras.rig.CameraRig, made at the first camera_frame()

    # ------------------------------------------------------------------ measurements at the tick
    def _publish_tick(self) -> dict:
        sim = self.sim
        self.loop.publish_now()                  # every broadcaster publishes the state at this tick
        box = dict(self.host.box)
        ext = self._ext
        fill_external_torques(ext, sim, self._v_index)
        out = {"js": box["joint_states"], "ext": ext}
        if self.ft_topic:
            ft = box[self._ft_box]
            if self.ft_noise_std > 0:          # a noisy copy (the broadcaster's message stays as published)
                n = self._rng.normal(0.0, self.ft_noise_std, 3)
                ft = _noisy_wrench(ft, float(n[0]), float(n[1]), float(n[2]))
            out["ft"] = ft
        out.update(self._wrenches.messages(sim))
        return out

    # ------------------------------------------------------------------ RobotLink's interface
    def start(self) -> tuple[int, str]:
        """One control period of steps (as the ROS link's first ~/step), then the state at that tick."""
        self._run_steps()
        self._state = self._publish_tick()
        self.t_ns = stamp_ns(self._state["js"].header.stamp)
        with open(self.robot.urdf) as fh:
            return self.t_ns, fh.read()

    def state(self, need=("ft", "ext")) -> dict:
        st = self._state
        missing = [k for k in ("js",) + tuple(need) if k not in st]
        if missing:
            raise ControllerError(f"in-process link: no {missing} (ft_topic / wrench_topics not configured)")
        return {k: st[k] for k in ("js",) + tuple(need)}

    def publish(self, controller: str, msg) -> None:
        self.host.subscriptions[f"{controller}/joint_trajectory"](msg)

    def _run_steps(self) -> None:
        run_control_period(self.period, self.steps, self.failures)
        if self.on_period is not None:
            self.on_period(self.sim)

    def advance(self) -> int:
        self._run_steps()
        self._state = self._publish_tick()
        self.t_ns += self.period_ns
        return self.t_ns

    # ------------------------------------------------------------------ perception
    def watch_camera(self, camera: str, labels: bool = True) -> None:
        """(RobotLink subscribes to the camera's topics here; in process the camera is rendered on demand.)"""

    def unwatch_camera(self, camera: str) -> None:
        """(RobotLink drops the camera's subscriptions.)"""

    def camera_ready(self, camera: str) -> bool:
        """In process a camera renders on demand: always ready."""
        return True

    def camera_frame(self, camera: str):
        """Camera ``camera`` of the scene rendered now, from the state at the current tick: a
        :class:`~contact_sim_ros.cameras.rig.CameraFrame` (color, depth as its depth model measures it, labels).
        The renderer (its GL context) is made at the first call, in this thread, and released by ``close``."""
        if self._rig is None:
            # deferred: the renderer imports moderngl / EGL, needed only by a controller that perceives
            from ..cameras.rig import CameraRig
            self._rig = CameraRig(self.sim.scene)
        return self._rig.render_simulator(self.sim, camera)

    def camera_label_map(self) -> dict:
        """The cameras' segmentation labels: label (str) -> {name, kind (link/object/environment), robot}."""
        if self._rig is None:
            raise ControllerError("in-process link: camera_label_map() before any camera_frame()")
        return self._rig.label_map()

    def object_position(self, name: str) -> np.ndarray:
        """The true position (m, world) of free object ``name`` now (ground truth: a controller's 'truth' pick
        source, and the reported perception error)."""
        return self.sim.body_pose(name).translation.copy()

    def close(self) -> None:
        if self._rig is not None:
            self._rig.release()
            self._rig = None
        release_world(self.loop, self.cm, [self.host])
