"""The ROS 2 simulation node: ``ros2 run contact_sim_ros sim_node`` or the console command ``sim_node``.

A dedicated stepping thread (``stepping.SteppingLoop``) owns the Simulator and paces it; ROS callbacks only
validate messages (``command_validation``) and hand them over through a lock-protected buffer. Publications
are decimated to the configured rates and published from the stepping thread (rclpy publish is thread-safe
and costs ~10 us). Topic names and conventions: docs/ros_interface.md.
"""

from __future__ import annotations

import array
import gc
import os
import signal
import sys
import threading
import time
import traceback

import numpy as np
import pinocchio as pin
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point, TransformStamped, WrenchStamped
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rcl_interfaces.srv import GetParameters
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter_service import ParameterService
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger
from visualization_msgs.msg import Marker, MarkerArray

from ..driver.command_validation import CommandRejected, JointLimits
from ..driver.node_config import (DEFAULT_ROBOT, NODE_PARAMETERS, NodeConfig, default_param_files,
                                  plain_args_to_ros_args, read_param_files, use_fastdds_writer_profile)
from ..driver.loop import CommandCounters, LoopLink, PublishHook, Transport, loop_status, step_wait_timeout
from ..driver.robot import validate_joint_command
from ..driver.world import World, WorldTransports
from ..errors import ConfigError, ContactSimError
from ..kernel_cache import cold_start_note
from ..model.multibody_model import MimicExpansion, model_body_names
from ..sim.default_gains import (controller_gains, describe_controller_gains,
                                 describe_default_gains, describe_passive_joints)
from ..sensors.base import SensorSpec
from ..sensors.contact_wrench import ContactWrench
from ..sim.sensors import body_frame_of_geometry
from .camera_publisher import CameraPublisher
from .command_intake import CommandIntake
from .entity_reaper import EntityReaper
from .frames import tf_edges
from .namespace_claim import NamespaceClaim
from .robot_port import RobotNode, RobotPort, full_namespace
from .simulation_interfaces import attach_simulation_interfaces
from ..state_messages import TransformsCdr, clock_cdr, fill_wrench, has_readers, stamp, topic_token

try:
    from tf2_msgs.msg import TFMessage
except ImportError:   # built into the venv by scripts/ensure_venv.sh; without it /tf is not published
    TFMessage = None
try:
    from contact_sim_msgs.msg import Contact, ContactArray
except ImportError:
    Contact = ContactArray = None

GRAPH_DISCOVERY_S = 3.0    # s on the ROS graph before a node concludes no other simulation node runs in its namespace
GRAPH_DISCOVERY_HINTED_S = 15.0   # s, the same when the namespace already has a joint_states publisher
OTHER_NODE_ANSWER_S = 5.0  # s a running simulation node found in the namespace has to answer get_parameters (a
                           # loaded machine: 2 s was missed once in make test; no answer: a stale entry, warned)
NODE_NAME = "contact_sim"


def parameter_descriptor(p) -> ParameterDescriptor:
    """The ROS parameter descriptor of a declared parameter (driver.parameters.Parameter): its description with
    the unit, its type, bounds and read-only flag as constraints. Dynamic typing: lists are accepted as arrays or
    as YAML strings, numbers as integers or floats; the values are checked by NodeConfig.from_mapping (one-line
    errors naming the parameter) and, while running, by the parameter callback."""
    unit = f" [{p.unit}]" if p.unit else ""
    constraints = [p.type]
    if p.bounds_text():
        constraints.append(p.bounds_text())
    constraints.append("read-only while running" if p.read_only else "settable while running")
    return ParameterDescriptor(name=p.name, description=p.description + unit,
                               additional_constraints="; ".join(constraints), dynamic_typing=True)


def _set_transform(msg: TransformStamped, M: pin.SE3) -> None:
    x, y, z, qx, qy, qz, qw = pin.SE3ToXYZQUAT(M).tolist()   # one call: ~2 us instead of ~10 (Quaternion + floats)
    tr, rot = msg.transform.translation, msg.transform.rotation
    tr.x, tr.y, tr.z = x, y, z
    rot.x, rot.y, rot.z, rot.w = qx, qy, qz, qw


class _NodeTransports(WorldTransports):
    """The node's transports for World.build (driver/world.py), which calls them in its order: once the Simulator
    exists the node says its start-up notes, claims its namespace and builds its robot ports and publishers
    (``simulator_built``: SimNode.on_simulator, which makes ``loop``: the node's publish hooks and failure reports);
    each robot's controllers publish through its RobotPort's node (ros/controller_io.py); each controller manager
    gets its ROS services. A build that fails at any step lets go of what it took (SimNode.__init__: shutdown)."""

    def __init__(self, node):
        self.node = node
        self.loop: Transport | None = None
        self._ports: dict = {}

    def simulator_built(self, sim, robots) -> None:
        self.loop = self.node.on_simulator(sim, robots)
        self._ports = {id(p.world_robot): p for p in self.node.ports}      # WorldRobot -> its RobotPort

    def controllers(self, robot):
        return self._ports[id(robot)].controller_transport()

    def controller_manager_built(self, robot, cm) -> None:
        self.node.attach_controller_manager(self._ports[id(robot)], cm)


class SimNode(Node):
    """Publishes the simulation and accepts commands; see docs/ros_interface.md."""

    def __init__(self, node_name: str = NODE_NAME, param_defaults: dict | None = None,
                 defaults_for_a_urdf: dict | None = None, start_stepping: bool = True, **kwargs):
        """``param_defaults``: parameter values that replace the built-in defaults (from parameter files);
        ROS parameter overrides (-p, --params-file) still win. ``defaults_for_a_urdf``: the same without a robot
        preset's node file (main(): ``param_defaults_of``), taken instead when the node's ``urdf`` turns out set
        (a urdf:= robot is no preset: none of a preset's lists apply to it). ``start_stepping=False``: the stepping
        thread is started later by ``self.loop.start()`` (main(): once a signal no longer interrupts the build)."""
        # the parameter services start after the look for another simulation node (_refuse_a_second_simulator):
        # asking /<ns>/contact_sim/get_parameters, this node would otherwise answer itself
        super().__init__(node_name, start_parameter_services=False, **kwargs)
        self._joined_graph = time.monotonic()     # discovery of the other nodes' services starts now
        defaults = NodeConfig()
        param_defaults = param_defaults or {}
        if defaults_for_a_urdf is not None:
            # the urdf parameter as rcl gives it to this node (its overrides: -p, --params-file), else the defaults'
            urdf = self._parameter_overrides.get("urdf")
            if urdf.value if urdf is not None else param_defaults.get("urdf"):
                param_defaults = defaults_for_a_urdf
        values = {}
        for p in NODE_PARAMETERS:
            default = param_defaults.get(p.name, getattr(defaults, p.name))
            if isinstance(default, list) and not default:
                default = ""   # lists as YAML strings or arrays (dynamic typing)
            param = self.declare_parameter(p.name, default, parameter_descriptor(p))
            value = param.value
            values[p.name] = list(value) if isinstance(value, (list, tuple, array.array)) else value
        self.config = NodeConfig.from_mapping(values)
        cfg = self.config
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.log = self.get_logger()

        self.counters = CommandCounters()         # rejected / clamped commands: the loop's diagnostics read them
        self.link = LoopLink()     # whether the loop runs, calls between steps, commands: what the transports hold
        # the world, built in one place (driver/world.py): the Simulator first (a bad scene, URDF or preset is named
        # first), then this node's start-up (on_simulator: notes, namespace claim, ports, publishers), the System,
        # each robot's controller manager with its ROS transport and services, the stepping loop with this node as
        # its transport (publish hooks, failure reports); the rejected / clamped command counts (self.counters) are
        # the loop's diagnostics'
        # what the build takes on the way (the namespace claim, the recorder, the viewer's and cameras' processes,
        # the controller managers) is let go in one place when any step of it fails (a bad controllers file, a
        # camera faster than the stepping, a start the first step would refuse, a signal): a node built again in
        # this process (node_in_process.py, the tests' in-process node) finds its namespace free
        self.loop = self.controller_manager = self._claim = self.recorder = self.cameras = self.viewer = None
        try:
            self.sim_world = World.build(cfg, _NodeTransports(self), counters=self.counters, link=self.link)
            sim = self.sim
            self.system = self.sim_world.system
            self.controller_manager = self.sim_world.controller_manager
            if self._drives_later:
                self._say_drives(controller_gains(self.controller_manager))
            self._init_failure_policy()
            self.loop = self.sim_world.loop
            self._build_subscriptions()
            self._build_services()
            self.simulation_interfaces = attach_simulation_interfaces(self, self.loop)
            if cfg.diagnostics_rate > 0:
                self._diag_timer = self.create_timer(1.0 / cfg.diagnostics_rate, self._publish_diagnostics,
                                                     clock=Clock(clock_type=ClockType.STEADY_TIME))
            self.publish_static()
            if self.recorder is not None:
                self.log.info(f"recording the node's publications to {cfg.record} (rosbag2, MCAP)")
            self.log.info(f"simulating {sim.scene.source} ({self.model.nv} dofs, {len(self.model.joint_names)} "
                          f"joints, {len(self.model.free_bodies)} objects) with engine {cfg.engine!r}, "
                          f"time step {cfg.time_step} s, real-time factor {cfg.real_time_factor}"
                          + (" (paused)" if cfg.start_paused else ""))
            if start_stepping:
                self.loop.start()
        except BaseException:
            self.shutdown()
            raise

    # ------------------------------------------------------------------------- start-up (World.build's hooks)

    def on_simulator(self, sim, robots) -> Transport:
        """World.build's first hook: the Simulator ``sim`` and its ``robots`` (driver/world.py WorldRobot) exist.
        Says the start-up notes (compiled-code cache, the joints' drives), claims the namespace, builds the robot
        ports, publishers, viewer and cameras; returns the stepping loop's Transport (publish hooks, failure
        reports)."""
        cfg = self.config
        self.sim = sim           # the default gains are said in the node's log below
        self.model = sim.model
        note = cold_start_note(cfg.engine, driver=True)   # kernels missing from the compiled-code cache
        if note:
            self.get_logger().warn(note)
        # the joints' drives: said now, unless a controllers file may give PID gains for joints with default gains
        # (said once its controllers are built, without the joints they drive with the file's gains)
        self._drives_later = (bool(sim.default_gains) and bool(cfg.controllers_file.strip())
                              and not self.no_controllers)
        if not self._drives_later:
            self._say_drives({})
        self.limits = JointLimits.from_model(self.model)
        self.robot = sim.scene.robot
        self.prefix = cfg.frame_prefix
        self.world = cfg.world_frame
        self._throttle = cfg.warn_throttle_s
        self.step_count = cfg.step_count

        # one simulation node per namespace: on this host the namespace claim decides at once and for certain (after
        # the Simulator, so that a bad scene, URDF or preset is named first); the graph look finds one on another host
        self._claim = NamespaceClaim.take(self.get_namespace(), {
            "node": self.get_fully_qualified_name(), "robot": cfg.robot, "engine": cfg.engine, "pid": os.getpid()})
        self._refuse_a_second_simulator()      # before this node publishes or serves anything
        self._parameter_service = ParameterService(self)     # as Node.__init__ does
        self.command_intake = CommandIntake()     # the command topics, applied before each ~/step (lock-step)
        self.recorder = None
        if cfg.record:    # before any publisher: it taps every one the node (and its controllers) creates
            from .bag_recorder import attach_recorder   # deferred: rosbags, only when recording
            self.recorder = attach_recorder(self, cfg.record)
        self._build_robot_ports(robots)
        self._build_publishers()
        hooks = self._build_hooks()
        # the cameras: the scene's camera sensors (its cameras: and its sensors: of type camera, built through the
        # sensor registry: sensors/camera.py), rendered by a process of their own
        cameras = [s.camera for s in sim.scene.sensors if s.type_name == "camera"]
        self.viewer = None
        if cfg.viewer:
            from ..viewer.scene_viewer import CameraView, ViewerProcess   # deferred: viser, only with the viewer
            self.viewer = ViewerProcess(self.model, port=cfg.viewer_port, update_rate=cfg.viewer_rate,
                                        objects=sim.scene.objects,
                                        cameras=[CameraView(c.name, c.fov_y, c.width, c.height) for c in cameras])
            self._viewer_clock = (time.monotonic(), sim.t)
            hooks.append(PublishHook("viewer", cfg.decimation(cfg.viewer_rate), self._pub_viewer))
            self._viewer_timer = self.create_timer(0.1, self._viewer_events,
                                                   clock=Clock(clock_type=ClockType.STEADY_TIME))
            self.log.info(f"viewer: {self.viewer.url}")
        self.cameras = None
        if cameras:     # simulated RGB-D cameras (issue 28): a process of their own (camera_publisher)
            self.cameras = CameraPublisher(self, sim, cameras, self.viewer, in_node=self.recorder is not None,
                                           priority=cfg.camera_priority)
            hooks += self.cameras.hooks()
        self._warned: dict[str, float] = {}
        if self.no_controllers:
            self.log.info("controllers_file none: no emulated controllers; commands on joint_command, joint "
                          f"states on {cfg.joint_states_topic} (topic_based_ros2_control)")
        self.transport = Transport(hooks, self._on_step_failure, self._on_loop_error, self.log.warn,
                                   before_steps=self.command_intake.drain)
        # publishers a model swap drops (swap_simulator), destroyed once the executor is done with them
        self.reaper = EntityReaper(self)
        return self.transport

    def swap_simulator(self, sim) -> None:
        """Swap in ``sim``, a Simulator rebuilt for a new scene (simulation_interfaces.py: spawn, delete, reset),
        between two steps. What depends on the model follows it: the TF edges, the contact-wrench publishers (a
        body's publisher kept, a body gone retired through ``reaper``), the controller managers' model, the
        browser view, /tf_static. Raises what the loop's swap raised; the old model stays then."""
        old_pubs = dict(self._wrench_pubs)
        tables = self.model_tables(sim.model, publishers=old_pubs)
        old_static = [(e.parent, e.child) for e in self.edges if e.static]
        new_static = [(e.parent, e.child) for e in tables["edges"] if e.static]
        scene = None                  # the browser view's description of the new model, sent to its process
        if self.viewer is not None:
            try:
                scene = self.viewer.send_scene(sim.model, sim.scene.objects)
            except ValueError as exc:
                self.log.warn(f"the browser view keeps the previous scene and stops updating: {exc}")

        def then(new):
            self.sim, self.model = new, new.model
            vars(self).update(tables)
            if self.controller_manager is not None:
                self.controller_manager.on_model_changed(new.model)
            if scene is not None:     # the view's frames from now on: the new model's moving geometries
                self.viewer.use_scene(scene)
            elif self.viewer is not None:
                self.transport.drop_hooks("viewer")
            if new_static != old_static:
                self._tf_static_msg = None
                self.publish_static()
        try:
            self.loop.replace_simulator(sim, then=then)
        except Exception:
            for body, pub in tables["_wrench_pubs"].items():
                if body not in old_pubs:
                    self.reaper.retire(pub, self)
            raise
        for body, pub in old_pubs.items():   # retired: destroyed here they raced with the executor's wait
            if body not in tables["_wrench_pubs"]:
                self.reaper.retire(pub, self)

    # ------------------------------------------------------------------------- publishers

    def _build_publishers(self):
        cfg, m = self.config, self.model
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
        # joint states come from the joint_state_broadcaster; without emulated controllers (controllers_file
        # none, the topic_based_ros2_control route) the node publishes them raw on joint_states_topic
        self.pub_joint_states = (self.create_publisher(JointState, cfg.joint_states_topic, 10)
                                 if self.no_controllers else None)
        self.pub_clock = self.create_publisher(ClockMsg, "/clock", 10) if cfg.publish_clock else None
        if TFMessage is not None:
            self.pub_tf = self.create_publisher(TFMessage, "/tf", 100)
            self.pub_tf_static = self.create_publisher(TFMessage, "/tf_static", latched)
        else:
            self.pub_tf = self.pub_tf_static = None
            self.log.warn("tf2_msgs is not installed: /tf and /tf_static are not published "
                          "(run scripts/ensure_venv.sh)")
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.pub_markers = self.create_publisher(MarkerArray, "contact_markers", 10)
        self.pub_contacts = self.create_publisher(ContactArray, "contacts", 10) if ContactArray else None

        # joint states: actuated joints then mimic joints
        self._mimic = MimicExpansion.of(m)
        self._js = JointState()
        self._js.name = list(m.joint_names) + list(self._mimic.names)

        vars(self).update(self.model_tables(m))

    def model_tables(self, m, publishers: dict | None = None) -> dict:
        """The node's attributes that depend on the physics model: TF edges and messages, contact-wrench bodies
        and their publishers (``publishers``: body -> publisher to reuse), the body of each geometry. Built at
        start-up and for a rebuilt model (simulation_interfaces.py: spawn / delete; bodies that no longer exist
        are dropped then)."""
        cfg, out = self.config, {}
        # TF
        out["edges"] = edges = tf_edges(m, self.prefix, self.world, self.link_prefixes)
        moving = [e for e in edges if not e.static]
        # /tf as serialized bytes (no rclpy message conversion: ~45 us per publication for iiwa_wsg's 11 links)
        out["_tf_cdr"] = TransformsCdr([(e.parent, e.child) for e in moving])
        out["_tf_poses"] = np.zeros((len(moving), 7))       # x y z qx qy qz qw per moving edge, refilled in place
        out["_tf_frames"] = [(int(e.parent_frame), int(e.child_frame)) for e in moving]

        # contact wrench per body
        pm = m.pin_model
        bodies = list(cfg.contact_bodies)
        if not bodies:
            # every robot's contact bodies, and its fingertip frames where they carry collision geometry (else
            # the link holding it is named)
            with_geometry = {pm.frames[body_frame_of_geometry(m, g)].name
                             for g in range(len(m.collision_model.geometryObjects))}
            for robot in self.sim.scene.robots:
                bodies += list(robot.contact_bodies) + [f for f in robot.fingertip_frames if f in with_geometry]
            bodies += [b.name for b in m.free_bodies]
        bodies = list(dict.fromkeys(bodies))
        if publishers is not None:
            known = set(model_body_names(m))
            bodies = [b for b in bodies if b in known]
        out["wrench_bodies"] = accumulator = ContactWrench(     # (sensors/contact_wrench.py)
            SensorSpec("contact_wrench", ContactWrench.type_name, {"bodies": bodies}, "contact_bodies"), m)
        out["_wrench_pubs"] = pubs = {}
        out["_body_pubs"] = []
        for k, body in enumerate(bodies):
            msg = WrenchStamped()
            msg.header.frame_id = self.link_prefixes.get(body, self.prefix) + body
            pub = (publishers or {}).get(body)
            pubs[body] = pub or self.create_publisher(WrenchStamped, f"contact_wrench/{topic_token(body)}", 10)
            out["_body_pubs"].append((pubs[body], msg, int(accumulator.frame_ids[k])))
        # body names per geometry (for the contact detail message)
        free_by_joint = {b.joint_id: b.name for b in m.free_bodies}
        out["_geom_body"] = []
        for g, go in enumerate(m.collision_model.geometryObjects):
            if go.parentJoint in free_by_joint:
                out["_geom_body"].append(free_by_joint[go.parentJoint])
            else:
                f = body_frame_of_geometry(m, g)
                out["_geom_body"].append(self.world if f == 0 else pm.frames[f].name)
        return out

    def publish_static(self):
        """robot_description and /tf_static. The static transforms are computed once, before the stepping
        thread starts (they do not depend on the state), and the same message is republished on reset (and
        computed again after a swap that changed the static edges: swap_simulator)."""
        for port in self.ports:
            port.publish_description()
        if self.pub_tf_static is None:
            return
        if getattr(self, "_tf_static_msg", None) is None:
            sim = self.sim
            msgs = []
            for e in self.edges:
                if not e.static:
                    continue
                ts = TransformStamped()
                ts.header.frame_id, ts.child_frame_id = e.parent, e.child
                stamp(sim.t, ts.header.stamp)
                oMf = sim.pin_data.oMf
                _set_transform(ts, oMf[int(e.parent_frame)].actInv(oMf[int(e.child_frame)]))
                msgs.append(ts)
            self._tf_static_msg = TFMessage(transforms=msgs)
        self.pub_tf_static.publish(self._tf_static_msg)

    def _build_hooks(self) -> list[PublishHook]:
        cfg = self.config
        hooks = []
        for name, rate, fn, enabled in (
                ("clock", cfg.clock_rate, self._pub_clock, self.pub_clock is not None),
                ("joint_states", cfg.joint_states_rate, self._pub_joint_states, self.pub_joint_states is not None),
                # tf and contact wrenches also without moving frames / bodies at start: objects may be spawned
                ("tf", cfg.tf_rate, self._pub_tf, self.pub_tf is not None),
                ("wrench", cfg.wrench_rate, self._pub_wrenches, True),
                ("contact_wrench", cfg.contact_wrench_rate, self._pub_body_wrenches, True),
                ("contacts", cfg.contacts_rate, self._pub_contacts, self.pub_contacts is not None),
                ("markers", cfg.markers_rate, self._pub_markers, True)):
            every = cfg.decimation(rate)
            if enabled and every > 0:
                hooks.append(PublishHook(name, every, fn, while_paused=name == "joint_states"))
        return hooks

    # hooks: called from the stepping thread -------------------------------------------------

    def _pub_viewer(self, sim):
        """The state for the browser view (q and contacts copied into shared memory), at most ``viewer_rate``
        per second of wall time, and always when the loop publishes on pause or after a reset. Returns False
        when it skipped the state (not due), so that the loop's publication on pause still sends it."""
        paused = self.loop.paused
        if not self.viewer.due() and not paused:
            return False
        wall, t = time.monotonic(), sim.t
        wall0, t0 = self._viewer_clock
        self._viewer_clock = (wall, t)
        self.viewer.publish_simulator(sim, (t - t0) / (wall - wall0) if wall > wall0 and t > t0 else None)

    def _viewer_events(self):
        """The viewer's Pause/Reset buttons act through the same paths as the ~/pause and ~/reset services;
        the page's Pause button follows the loop's state however it was paused."""
        for event in self.viewer.events():
            if event[0] == "pause":
                self.loop.set_paused(bool(event[1]))
                self.log.info(("paused" if event[1] else "resumed") + f" from the viewer at t = {self.sim.t:.6f} s")
            elif event[0] == "reset" and self.loop.request_reset():
                self.publish_static()
                self.log.info("reset from the viewer")
        self.viewer.set_paused(self.loop.paused)

    # every hook builds and writes its messages only for a topic someone reads (state_messages.has_readers)

    def _pub_clock(self, sim):
        if has_readers(self.pub_clock):
            self.pub_clock.publish(clock_cdr(sim.t))     # serialized bytes: no per-step message conversion

    def _pub_joint_states(self, sim):
        if not has_readers(self.pub_joint_states):
            return
        msg = self._js
        stamp(sim.t, msg.header.stamp)
        q = sim.joint_positions()
        v = sim.joint_velocities()
        e = sim.joint_efforts()
        mimic = self._mimic
        if len(mimic):
            q = np.concatenate((q, mimic.positions(q)))
            v = np.concatenate((v, mimic.velocities(v)))
            e = np.concatenate((e, np.zeros(len(mimic))))
        msg.position = array.array("d", q.tobytes())
        msg.velocity = array.array("d", v.tobytes())
        msg.effort = array.array("d", e.tobytes())
        self.pub_joint_states.publish(msg)

    def _pub_tf(self, sim):
        """The moving TF edges of the current model (nothing while there are none)."""
        frames, poses = self._tf_frames, self._tf_poses
        if not frames or not has_readers(self.pub_tf):
            return
        oMf, xyzquat = sim.pin_data.oMf, pin.SE3ToXYZQUAT
        for k, (pf, cf) in enumerate(frames):
            poses[k] = xyzquat(oMf[cf] if pf == 0 else oMf[pf].actInv(oMf[cf]))
        self.pub_tf.publish(self._tf_cdr.encode(sim.t, poses))

    def contact_forces(self, sim) -> np.ndarray:
        """World contact forces (N, 3) of the last step (Simulator.contact_forces_world)."""
        return sim.contact_forces_world()

    def _pub_wrenches(self, sim):
        """External joint torques of each robot (RobotPort.publish_external_torques; the wrist F/T sensor is the
        force_torque_sensor_broadcaster's)."""
        for port in self.ports:
            port.publish_external_torques(sim)

    def _pub_body_wrenches(self, sim):
        if not any(has_readers(pub) for pub, _, _ in self._body_pubs):
            return
        wrenches = self.wrench_bodies.measure(sim)
        for (pub, msg, _), wrench in zip(self._body_pubs, wrenches):
            if has_readers(pub):
                fill_wrench(msg, wrench, sim.t)
                pub.publish(msg)

    def _pub_contacts(self, sim):
        if not has_readers(self.pub_contacts):
            return
        contacts = sim.contacts
        msg = ContactArray()
        stamp(sim.t, msg.header.stamp)
        msg.header.frame_id = self.world
        forces = self.contact_forces(sim)
        if contacts is not None and forces.shape[0]:
            names = self.model.geometry_names
            rel = contacts.relative_velocity(sim.v)
            slip = np.linalg.norm(rel[:, :2], axis=1)
            fn = np.einsum("ij,ij->i", forces, contacts.normal)
            out = []
            for i in range(contacts.size):
                c = Contact()
                ga, gb = int(contacts.geometry_a[i]), int(contacts.geometry_b[i])
                c.body_a, c.body_b = self._geom_body[ga], self._geom_body[gb]
                c.geometry_a, c.geometry_b = names[ga], names[gb]
                p, n, f = contacts.point[i], contacts.normal[i], forces[i]
                c.position.x, c.position.y, c.position.z = float(p[0]), float(p[1]), float(p[2])
                c.normal.x, c.normal.y, c.normal.z = float(n[0]), float(n[1]), float(n[2])
                c.force.x, c.force.y, c.force.z = float(f[0]), float(f[1]), float(f[2])
                c.signed_distance = float(contacts.signed_distance[i])
                c.normal_force = float(fn[i])
                c.slip_speed = float(slip[i])
                out.append(c)
            msg.contacts = out
        self.pub_contacts.publish(msg)

    def _pub_markers(self, sim):
        if not has_readers(self.pub_markers):
            return
        contacts = sim.contacts
        forces = self.contact_forces(sim)
        st = stamp(sim.t)
        clear = Marker()
        clear.action = Marker.DELETEALL
        clear.ns = "contact_forces"
        markers = [clear]
        scale = self.config.marker_force_scale
        for i in range(forces.shape[0]):
            mk = Marker()
            mk.header.frame_id = self.world
            mk.header.stamp = st
            mk.ns, mk.id, mk.type, mk.action = "contact_forces", i, Marker.ARROW, Marker.ADD
            p = contacts.point[i]
            q = p + scale * forces[i]
            mk.points = [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])),
                         Point(x=float(q[0]), y=float(q[1]), z=float(q[2]))]
            mk.scale.x, mk.scale.y, mk.scale.z = 0.004, 0.008, 0.01
            mk.color.r, mk.color.g, mk.color.b, mk.color.a = 1.0, 0.2, 0.1, 1.0
            mk.pose.orientation.w = 1.0
            markers.append(mk)
        self.pub_markers.publish(MarkerArray(markers=markers))

    # ------------------------------------------------------------------------- commands

    def _build_robot_ports(self, robots):
        """One RobotPort per robot of the world (``robots``: driver/world.py WorldRobot; robot_port.py): in the node
        itself for a scene with one robot and no namespace, else each in its own namespace (a robot of several
        without one: its name)."""
        self.link_prefixes: dict[str, str] = {}
        self.ports, self.robot_nodes = [], []
        for r in robots:
            inst = r.driver.instance
            if r.preset is not None and r.preset.frame_prefix and inst is not None:
                self.link_prefixes.update({ln: r.frame_prefix for ln in inst.link_names})
            node = self
            if r.own_namespace:
                node = RobotNode(self, full_namespace(self.get_namespace(), r.preset.namespace or r.name))
                self.robot_nodes.append(node)
                if self.recorder is not None:      # its robot_description, controllers' topics ... in the bag
                    self.recorder.follow(node)
            self.ports.append(RobotPort(self, r, node))

    @property
    def stepping_error(self) -> BaseException | None:
        """The error that stopped the stepping thread (None: it runs or stopped normally)."""
        loop = getattr(self, "loop", None)
        return loop.error if loop is not None else None

    def extra_nodes(self) -> list:
        """The nodes spun with this one: each robot's RobotNode (several robots), its controller_manager node and
        its controllers' nodes (those loaded now), a Franka's franka_gripper node (ros/franka.py)."""
        cm_nodes = [n for p in self.ports if p.cm_node is not None for n in p.cm_node.nodes()]
        franka = [p.franka.gripper_node for p in self.ports
                  if p.franka is not None and p.franka.gripper_node is not None]
        return list(self.robot_nodes) + cm_nodes + franka

    def _say_drives(self, by_controller: dict) -> None:
        """The start-up note on the joints' drives: a warning for the joints with default gains (not those that a
        controller drives with the controllers file's PID gains, ``by_controller``: an info line names them), else
        the passive joints (sim/default_gains.py)."""
        sim = self.sim
        text = describe_default_gains(sim.default_gains, sim.scene.robot.name if sim.scene.robot else "robot",
                                      sim.passive_joints, by_controller)
        if text:
            self.log.warn(text)
        elif sim.passive_joints:
            self.log.info(describe_passive_joints(sim.passive_joints))
        note = describe_controller_gains(sim.default_gains, by_controller)
        if note:
            self.log.info(note)

    @property
    def no_controllers(self) -> bool:
        return self.config.controllers_file.strip().lower() == "none"

    def attach_controller_manager(self, port, cm) -> None:
        """A robot's emulated controller manager ``cm``, as World.build made it (its controllers file, else the node
        parameter controllers_file, else the preset's shipped config/ros2_control/<robot>_controllers.yaml, else a
        default set for a bare URDF): its ROS services (RobotPort.attach_controller_manager) and its log line."""
        port.attach_controller_manager(cm)
        active = [n for n, c in cm.controllers.items() if c.active]
        where = f" of robot {port.name!r} in {port.node.get_namespace()}" if port.own_node else ""
        self.log.info(f"controllers{where} from {cm.source} at {cm.update_rate:g} Hz: active {active}, "
                      f"inactive {[n for n in cm.controllers if n not in active]}")

    def _build_subscriptions(self):
        self.command_intake.subscribe(self, JointState, "joint_command", self._on_joint_command, 10)

    def warn_throttled(self, message: str, key: str | None = None) -> None:
        """Log a warning at most once per ``warn_throttle_s`` for each ``key`` (default: the message's first
        word), so one kind of problem does not hide another; long messages are cut at 500 characters."""
        key = key or message.split(":", 1)[0]
        now = time.monotonic()
        if now - self._warned.get(key, -1e9) < self._throttle:
            return
        self._warned[key] = now
        self.log.warn(message if len(message) <= 500 else message[:500] + " ...")

    def reject_command(self, exc: CommandRejected) -> None:
        self.counters.count_rejection(exc.kind)
        self.warn_throttled(f"command rejected ({exc.kind}): {exc}", key=f"rejected/{exc.kind}")

    def note_clamped(self, notes, source) -> None:
        if notes:
            self.counters.count_clamped(len(notes))
            self.warn_throttled(f"{source}: " + "; ".join(notes[:4]) + (" ..." if len(notes) > 4 else ""),
                                key=f"clamped/{source}")

    def _on_joint_command(self, msg: JointState):
        try:
            cmd = validate_joint_command(self.limits, self.system.command, msg.name, msg.position, msg.velocity,
                                         msg.effort)
        except CommandRejected as exc:
            self.reject_command(exc)
            return
        self.note_clamped(cmd.clamped, "joint_command")
        self.link.commands.push_command(cmd)

    # ------------------------------------------------------------------------- services

    def _build_services(self):
        # reentrant (own group): a long ~/step waits on the stepping loop without blocking ~/pause or ~/reset
        # (they answer at once and preempt it) nor the command subscriptions
        group = ReentrantCallbackGroup()
        self._sim_services = True
        self.create_service(Trigger, "~/reset", self._srv_reset, callback_group=group)
        self.create_service(SetBool, "~/pause", self._srv_pause, callback_group=group)
        self.create_service(Trigger, "~/step", self._srv_step, callback_group=group)

    def other_simulators(self) -> list[str]:
        """Fully qualified names of the other simulation nodes in this node's namespace (a node that serves
        ``<node>/pause`` and ``<node>/step``, as this one does): two would publish the same topics and serve the
        same simulation_interfaces services. Counted by the servers of those services, not by node name: the
        graph's per-node queries see one of two nodes of the same name only."""
        ns = self.get_namespace()
        serving = hasattr(self, "_sim_services")       # this node's own ~/pause and ~/step exist
        mine = self.get_fully_qualified_name()
        names = {n for n, _ in self.get_service_names_and_types()}
        found = []
        for name in sorted(names):
            if not name.endswith("/pause"):
                continue
            fqn = name[:-len("/pause")]
            if (fqn.rsplit("/", 1)[0] or "/") != ns or fqn + "/step" not in names:
                continue
            if self.count_services(name) > (1 if serving and fqn == mine else 0):
                found.append(fqn)
        return found

    def _discovery_window(self) -> float:
        """GRAPH_DISCOVERY_S, or GRAPH_DISCOVERY_HINTED_S while the namespace already has a joint_states publisher
        (another simulation node's, whose ~/pause and ~/step, created last of its hundreds of endpoints, a loaded
        machine may not have discovered yet)."""
        hinted = self.count_publishers(f"{self.get_namespace().rstrip('/')}/joint_states") > 0
        return GRAPH_DISCOVERY_HINTED_S if hinted else GRAPH_DISCOVERY_S

    def _refuse_a_second_simulator(self) -> None:
        """Before this node publishes or serves anything: ConfigError naming the simulation node that already runs
        in this namespace (its services are known by now: this node has been on the graph while its Simulator was
        built) if it answers a parameter request within OTHER_NODE_ANSWER_S; one that does not (the stale graph
        entry of a killed process, before its lease expires: a respawn after ``on_failure: exit``) is only warned
        about. Nodes that start at once could each miss the other: a timer looks again 3 s later and logs an ERROR."""
        # DDS discovery of a running node's services takes a while (seconds under load), and the Simulator may be
        # built faster than that (warm kernel cache): look until this node has been on the graph GRAPH_DISCOVERY_S
        found = self.other_simulators()
        while not found and time.monotonic() - self._joined_graph < self._discovery_window():
            time.sleep(0.05)
            found = self.other_simulators()
        for other in found:
            client = self.create_client(GetParameters, other + "/get_parameters")
            # an executor of this node's context: rclpy's global one belongs to the default context, which a node
            # built in another process's context (ros/node_in_process.py, the tests) has not initialised
            executor = SingleThreadedExecutor(context=self.context)
            try:
                future = client.call_async(GetParameters.Request(names=["robot", "engine"]))
                rclpy.spin_until_future_complete(self, future, executor=executor, timeout_sec=OTHER_NODE_ANSWER_S)
                answer = future.result() if future.done() else None
            finally:
                executor.remove_node(self)
                executor.shutdown(timeout_sec=0)
                self.destroy_client(client)
            if answer is not None:
                what = ", ".join(f"{n} {v.string_value!r}" for n, v in zip(("robot", "engine"), answer.values)
                                 if v.string_value)
                raise ConfigError(f"another simulation node already runs in namespace {self.get_namespace()!r}: "
                                  f"{other}" + (f" ({what})" if what else "") +
                                  "; stop it or start this one with another --namespace")
            self.log.warn(f"{other} is on the ROS graph in this namespace but does not answer (a killed process's "
                          f"stale entry?): starting anyway")

        def look_again():
            try:
                late = self.other_simulators()
            except Exception:   # noqa: BLE001 - the node was destroyed meanwhile (a short run)
                return
            if late:
                self.log.error(f"another simulation node runs in namespace {self.get_namespace()!r}: "
                               f"{', '.join(late)}: both publish the same topics and serve the same services; "
                               f"stop one of them")
        # a plain thread, not a node timer: a steady-clock rclpy timer on this node (cancelled in its callback)
        # left the controller_manager services of a node stepping as fast as possible unanswered (make test:
        # test_ros2_control's switch test, 30 s without a response; passes with this thread)
        self._duplicate_timer = threading.Timer(3.0, look_again)
        self._duplicate_timer.daemon = True
        self._duplicate_timer.start()

    def _srv_reset(self, request, response):
        response.success = self.loop.request_reset()
        response.message = (f"reset to t = {self.sim.t:.6f} s" if response.success else
                            "reset timed out" if self.loop.running else "reset failed: the stepping thread stopped")
        if response.success:
            self.publish_static()
        return response

    def _srv_pause(self, request, response):
        self.loop.set_paused(request.data)
        response.success = True
        response.message = ("paused" if request.data else "running") + f" at t = {self.sim.t:.6f} s"
        return response

    def _srv_step(self, request, response):
        n = self.step_count
        if not self.loop.paused:
            response.success = False
            response.message = "the simulation is running: pause it first (~/pause with data: true)"
            return response
        ran, why = self.loop.run_steps(n, timeout=step_wait_timeout(n))
        response.success = ran == n
        response.message = (f"stepped {n} step(s) to t = {self.sim.t:.6f} s" if ran == n
                            else f"stepped {ran} of {n} step(s) to t = {self.sim.t:.6f} s: {why}")
        return response

    # ------------------------------------------------------------------------- failure paths

    def _init_failure_policy(self):
        """docs/ros_interface.md, "When things go wrong": failed steps are logged (ERROR, throttled) and after
        ``loop.max_failed_steps`` in a row the loop pauses itself (on_failure: pause) or the process exits 1
        (on_failure: exit); a dead stepping thread always exits the process (1) with the cause."""
        self.exit_code: int | None = None       # set by fatal(): main() ends the process with it
        self._error_throttle = 0.0

    def _on_loop_error(self, exc) -> None:
        """Stepping thread: an exception ended the loop."""
        self.fatal(f"the stepping thread died at t = {self.sim.t:.6f} s: {exc!r}\n"
                   + "".join(traceback.format_exception(exc)).rstrip())

    def _on_step_failure(self, report, gave_up):
        """Stepping thread, after every failed step."""
        now = time.monotonic()
        if gave_up:
            what = f"{self.loop.max_failed_steps} consecutive failed steps at t = {report.t:.6f} s"
            if self.config.on_failure == "exit":
                self.fatal(f"{what} (on_failure: exit): {report.message}")
            else:
                self.log.error(f"{what}, simulation paused (joint states repeat the last good state; ~/reset "
                               f"recovers): {report.message}")
        elif now >= self._error_throttle:
            self._error_throttle = now + self._throttle
            self.log.error(f"step failed at t = {report.t:.6f} s (state kept): {report.message}")

    def fatal(self, message: str, code: int = 1) -> None:
        """An unrecoverable error (any thread): print the cause, and end the process with ``code`` within 1 s
        (main() leaves its spin loop within 0.1 s and shuts down; a watchdog forces the exit at 0.7 s: the
        rest of the second is for the process to end on a slow, loaded machine; 0.9 s left too little there)."""
        if self.exit_code is not None:
            return
        self.exit_code = code
        self.log.error(f"exiting with code {code}: {message.splitlines()[0]}")
        print(f"sim_node: fatal: {message}", file=sys.stderr, flush=True)

        def force():
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        watchdog = threading.Timer(0.7, force)
        watchdog.daemon = True
        watchdog.start()

    def _on_set_parameters(self, params):
        """While running: the parameters the table marks settable (step_count), checked against it; the others
        are read-only."""
        for p in params:
            declared = NODE_PARAMETERS.find(p.name)
            if declared is None or p.name == "use_sim_time":
                continue
            if declared.read_only:
                settable = [q.name for q in NODE_PARAMETERS if not q.read_only]
                return SetParametersResult(successful=False,
                                           reason=f"parameter {p.name!r} is read-only while running; "
                                                  f"run-time parameters: {', '.join(settable)}")
            try:
                if isinstance(p.value, float) and p.value != int(p.value):
                    raise ConfigError("not an integer")
                value = declared.convert(p.value)
            except (ConfigError, TypeError, ValueError, OverflowError):
                return SetParametersResult(successful=False,
                                           reason=f"{p.name} must be an integer {declared.bounds_text()}")
            setattr(self, p.name, value)
        return SetParametersResult(successful=True)

    # ------------------------------------------------------------------------- diagnostics

    def _publish_diagnostics(self):
        s = self.loop.stats()
        target = self.config.real_time_factor
        status = DiagnosticStatus()
        status.name = f"{self.get_fully_qualified_name()}: simulation"
        status.hardware_id = self.sim.scene.source
        level, msg = loop_status(s, target, self.loop.error, 1.0 / self.config.diagnostics_rate)
        status.level, status.message = bytes([level]), msg

        def kv(k, v):
            return KeyValue(key=k, value=f"{v:.6g}" if isinstance(v, float) else str(v))
        values = [kv("sim_time", s.sim_time), kv("steps", s.steps), kv("paused", s.paused),
                  kv("pause_reason", s.pause_reason), kv("window_steps", s.window_steps),
                  kv("engine", self.config.engine), kv("time_step", self.config.time_step),
                  kv("target_real_time_factor", target), kv("real_time_factor", s.real_time_factor),
                  kv("step_overruns", s.overruns), kv("window_overruns", s.window_overruns),
                  kv("solver_failures", s.solver_failures), kv("substepped_steps", s.substepped_steps),
                  kv("last_solver_failure", s.last_failure),
                  kv("step_time_mean_ms", s.step_time_mean_ms), kv("step_time_max_ms", s.step_time_max_ms),
                  kv("step_cpu_mean_ms", s.step_cpu_mean_ms),
                  kv("step_period_jitter_ms", s.period_jitter_ms),
                  kv("step_period_max_deviation_ms", s.period_max_dev_ms),
                  kv("stepping_thread_scheduling", s.scheduling),
                  kv("cpu_percent", s.cpu_percent), kv("clamped_commands", s.clamped),
                  kv("publish_errors", s.publish_errors), kv("last_publish_error", s.last_publish_error),
                  kv("rejected_commands", sum(s.rejected.values()))]
        values += [kv(f"rejected_{k}", n) for k, n in s.rejected.items()]
        if self.recorder is not None:
            rec = self.recorder
            values += [kv("recorded_messages", rec.written), kv("record_queued", rec.queued),
                       kv("record_dropped", rec.dropped), kv("record_write_errors", rec.errors)]
            if (rec.dropped or rec.errors) and level == 0:
                status.level, status.message = bytes([1]), f"recording: {rec.dropped} messages dropped, " \
                                                           f"{rec.errors} writes failed"
        status.values = values
        arr = DiagnosticArray(status=[status] if self.cameras is None else   # + the cameras' (their process)
                              [status, self.cameras.diagnostic_status(self.get_fully_qualified_name())])
        if getattr(self, "simulation_interfaces", None) is not None:     # + spawned meshes' preparation processes
            arr.status.append(self.simulation_interfaces.diagnostic_status(self.get_fully_qualified_name()))
        arr.header.stamp = self.get_clock().now().to_msg()
        self.pub_diag.publish(arr)
        if self.loop.error is not None and not getattr(self, "_error_logged", False):
            self._error_logged = True
            self.log.error(f"stepping thread stopped: {self.loop.error!r}")

    def shutdown(self):
        """Stop stepping and let go of what the node holds: its namespace claim, cameras, recorder (the bag
        closed), controller managers, viewer. Also what a failed build had taken so far (__init__)."""
        if self.loop is not None:
            self.loop.stop(timeout=0.5)     # a first step still compiling kernels is not waited for (main() exits)
        if self._claim is not None:
            self._claim.release()
        if getattr(self, "cameras", None) is not None:
            self.cameras.close()
        if self.recorder is not None:
            self.recorder.close()
        if self.controller_manager is not None:
            self.controller_manager.shutdown()
        if self.viewer is not None:
            self.viewer.close()


class StartUpInterrupted(BaseException):
    """SIGINT or SIGTERM while main() builds the node: it stops building, cleans up and exits with 0."""


def param_defaults_of(cmd) -> tuple[dict, dict | None]:
    """The node's parameter defaults for the command line ``cmd`` (node_config.CommandLine): config/node.yaml,
    config/node/<robot>.yaml of the robot the command names (DEFAULT_ROBOT if it names none), then the --config
    files; and, when a robot's file is among them, the same without it (SimNode ``defaults_for_a_urdf``: the node
    takes it when its urdf parameter is set, however it was given). ConfigError for an unreadable file."""
    base = default_param_files(None)
    robot_file = default_param_files(DEFAULT_ROBOT if cmd.robot is None else cmd.robot)[len(base):]
    defaults = read_param_files(base + robot_file + cmd.config_files, cmd.node_name, cmd.namespace)
    if not robot_file:
        return defaults, None
    return defaults, read_param_files(base + cmd.config_files, cmd.node_name, cmd.namespace)


def main(argv=None) -> int:
    """Console entry point: ``sim_node [--robot R --engine E --time-step DT --real-time-factor F --scene S
    --namespace NS --frame-prefix P --config FILE ...] [--ros-args ...]``.

    Parameter precedence (lowest first): built-in defaults, config/node.yaml, config/node/<robot>.yaml,
    --config files, then -p values and flags.
    """
    # one handler for SIGINT (also the second one ros2 launch forwards) and SIGTERM: ask the spin loop below to
    # stop; installed first (Ctrl-C at any moment of start-up: no KeyboardInterrupt); rclpy's own handlers are not
    # installed (they shut the context down under running callbacks: "failed to initialize wait set",
    # KeyboardInterrupt tracebacks from the clean-up)
    # While the node is being built (seconds; more with kernels to compile: model, controllers, publishers) a
    # signal raises StartUpInterrupted: main() stops building, cleans up what exists and returns 0 (issue 31,
    # defect 11); a second one (the first swallowed somewhere inside an extension) ends the process at once (ros2
    # launch sends SIGTERM 5 s after SIGINT and SIGKILL 10 s later)
    stop = threading.Event()
    building = threading.Event()

    def on_signal(signum, frame):
        if stop.is_set() and building.is_set():
            os._exit(0)
        stop.set()
        if building.is_set():
            raise StartUpInterrupted()
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        cmd = plain_args_to_ros_args(argv)
        defaults, defaults_for_a_urdf = param_defaults_of(cmd)
    except ConfigError as exc:
        print(f"sim_node: error: {exc}", file=sys.stderr)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        return 2
    writer_profile = use_fastdds_writer_profile()     # read by Fast DDS when rclpy.init creates the participant
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        rclpy.init(args=["sim_node"] + cmd.ros_args, signal_handler_options=SignalHandlerOptions.NO)
    except Exception as exc:   # rcl rejects malformed ROS arguments / parameter files
        print(f"sim_node: error: invalid ROS arguments {cmd.ros_args}: {exc}", file=sys.stderr)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        return 2
    node = executor = None
    code = 0
    try:
        if stop.is_set():        # Ctrl-C before the node was built: not built
            raise ExternalShutdownException()
        building.set()
        # the stepping thread starts once a signal no longer interrupts the build: a SIGINT that raised
        # StartUpInterrupted after it had started (just after "simulating ...") left it stepping while rclpy's
        # context was shut down under it ("publisher's context is invalid": the node exited 1 with a traceback)
        node = SimNode(param_defaults=defaults, defaults_for_a_urdf=defaults_for_a_urdf, start_stepping=False)
        building.clear()
        if stop.is_set():        # Ctrl-C as the build ended: shut down without stepping
            raise ExternalShutdownException()
        # what start-up made (the modules, the model, the node) lives as long as the process: frozen out of the
        # cyclic collector, a full collection (each spawn's or delete's model swap does one, and the automatic
        # ones that pause the stepping thread) scans only what was made since (the Franka node: 166k objects
        # tracked after start-up, 78 ms a full collection; frozen, a collection scans only a swap's new objects)
        gc.collect()
        gc.freeze()
        node.loop.start()
        if writer_profile:
            node.log.debug(f"Fast DDS writer profile {writer_profile}")
        executor = MultiThreadedExecutor(num_threads=6)   # action goals wait in their thread
        executor.add_node(node)
        for robot_node in node.extra_nodes():    # robots' namespaces, controller_manager and controller nodes
            executor.add_node(robot_node)
        while not stop.is_set() and node.exit_code is None and rclpy.ok():
            try:
                executor.spin_once(timeout_sec=0.1)
            except (ExternalShutdownException, KeyboardInterrupt):
                raise
            except Exception:   # noqa: BLE001 - a callback's bug is logged; the node and its stepping go on
                node.log.error("a callback raised (a bug; the simulation keeps running):\n" + traceback.format_exc())
        code = node.exit_code or 0
    except ContactSimError as exc:
        print(f"sim_node: error: {exc}", file=sys.stderr)
        code = 2
    except (ExternalShutdownException, StartUpInterrupted):
        pass
    finally:
        building.clear()
        if node is not None:
            node.shutdown()
        if executor is not None:
            executor.shutdown(timeout_sec=0.5)
        if node is not None:
            for robot_node in node.extra_nodes():
                robot_node.destroy_node()
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_IGN if stop.is_set() else handler)
    stepping = node is not None and node.link.stepping       # the stepping thread alive (driver/loop.LoopLink)
    fatal = node is not None and node.exit_code is not None
    if fatal or stepping or any(t.is_alive() and not t.daemon for t in threading.enumerate()
                                if t is not threading.main_thread()):
        # a first step still compiling kernels, or a callback still waiting: do not wait for them at exit; after
        # fatal() (its promise: the process ends within 1 s) not the interpreter's finalization either - with
        # everything above released, it spent 0.1-1 s (2.7 s at load ~10) in rclpy's and Fast DDS's exit-time
        # clean-up with the GIL held, when fatal()'s watchdog thread no longer runs
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
