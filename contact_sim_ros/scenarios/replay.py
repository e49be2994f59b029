"""Replay a robot's rosbag2 recording in the simulation: ``contact-sim replay BAG``.

The bag (rosbag2 directory, MCAP or sqlite3 storage, read with the pure-Python ``rosbags`` library) was recorded
on the real robot (or by :func:`record_scenario_bag` from a simulation). What is read, by ROS type and topic
name (after the name mapping below):

* commands: every topic whose name is a subscription of the robot's emulated ros2_control controllers in the
  simulation, e.g. ``arm_controller/joint_trajectory`` (trajectory_msgs/JointTrajectory) or
  ``<forward controller>/commands`` (std_msgs/Float64MultiArray). Each message is handed to that controller at
  its bag (receive) time, i.e. before the first simulation step at or after it, exactly as the controller's
  subscription would have received it; a trajectory's non-zero ``header.stamp`` is moved by the same time
  origin.
* ``<controller>/<action>/goal`` (control_msgs/action/FollowJointTrajectory_Goal: the goals the simulation node
  records with ``record:=``, bag_recorder.py): each goal's trajectory is handed to that controller at its bag
  (receive) time, as the action server would start it (its tolerances are not applied).
* ``<controller>/controller_state`` (control_msgs/JointTrajectoryControllerState) of a trajectory controller
  the bag has no commands of (a robot driven through FollowJointTrajectory: ros2 bag in Jazzy does not record
  action goals): its ``reference`` positions become one trajectory through them at their stamps plus one
  controller update period (the controller's command is for the end of its update), linear in between, sent to
  that controller: what the robot's trajectory controller executed, whoever sent the goals.
* ``joint_states`` (sensor_msgs/JointState): the measured joint positions. The first message sets the time
  origin (its ``header.stamp`` is sim time 0) and the simulation's initial joint positions (at rest); every
  message is compared with the simulated positions at its stamp (the nearest step).
* the wrist F/T sensor (geometry_msgs/WrenchStamped), at the name of the simulated robot's force-torque
  broadcaster topic (``ft_sensor/wrench`` for the iiwa + WSG): compared at each stamp with the simulated sensor's
  wrench in the same sensor frame. ``--tare S`` subtracts each signal's mean over its first S seconds (a real
  sensor's bias).

Topic names: a bag topic's simulation name is its name without the leading ``/`` and without ``--namespace NS``
(e.g. ``/robot1/joint_states`` -> ``joint_states``); ``--map BAG_TOPIC=SIM_NAME`` (repeatable) renames one topic
(e.g. ``--map /iiwa/ft=ft_sensor/wrench --map /follow_traj=arm_controller/joint_trajectory``). Commands and
states use the measurement/receive clocks as recorded: state stamps from ``header.stamp``, command times from
the bag's receive timestamps; both must be the same clock (the robot's, as ``ros2 bag record`` stores it).

A bag that cannot be read (missing, metadata.yaml malformed, a listed file missing, an MCAP file cut or corrupt,
a killed recording without metadata.yaml) is refused with one line naming the file and the problem
(``contact_sim_ros.bag_files.check_bag``); ``contact-sim bag-repair DIR`` recovers a killed or cut recording.

The report (``<out>/replay.md``, plots in ``<out>/plots/``) gives, per joint, the RMS and maximum of the
joint-position residual (measured - simulated; rad or m) and, per wrench axis, the RMS and maximum residual
(N, N m), with PNG plots over time.
"""

from __future__ import annotations

import argparse
import importlib
import math
import struct
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml
from builtin_interfaces.msg import Duration
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ..clients.inprocess_link import InProcessLink
from ..clients.pick_shake_place import run_controller
from ..errors import ConfigError
from ..resources import resolve_resource
from ..ros.bag_recorder import (deserialize_message, ensure_message_type, make_typestore, msgtype_name,
                               serialize_message)
from ..sim.scene import load_scene
from ..yaml_files import load_yaml
from .campaign import trial_scene
from .runner import SCENARIOS

JOINT_STATES = "joint_states"
WRENCH_AXES = ("force.x", "force.y", "force.z", "torque.x", "torque.y", "torque.z")


def _msg_class(msgtype: str):
    """'sensor_msgs/msg/JointState' -> the rclpy message class; 'control_msgs/action/FollowJointTrajectory_Goal'
    -> ``FollowJointTrajectory.Goal``."""
    pkg, kind, name = msgtype.split("/")
    try:
        module = importlib.import_module(f"{pkg}.{kind}")
        if kind == "action":
            action, part = name.rsplit("_", 1)
            return getattr(getattr(module, action), part)
        return getattr(module, name)
    except (ImportError, AttributeError, ValueError):
        return None


def _stamp_ns(stamp) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _set_stamp(stamp, ns: int) -> None:
    stamp.sec, stamp.nanosec = divmod(int(ns), 1_000_000_000)


def _wrench6(msg) -> tuple:
    f, t = msg.wrench.force, msg.wrench.torque
    return (f.x, f.y, f.z, t.x, t.y, t.z)


# ------------------------------------------------------------------------------------------- reading a bag

COMMAND_TYPES = ("trajectory_msgs/msg/JointTrajectory", "std_msgs/msg/Float64MultiArray")
TRAJECTORY_GOAL = "control_msgs/action/FollowJointTrajectory_Goal"     # recorded by the node as <action>/goal
CONTROLLER_STATE = "control_msgs/msg/JointTrajectoryControllerState"


@dataclass
class BagData:
    """What replay uses of a bag; times in ns relative to the first joint_states stamp (sim time 0)."""

    path: str
    storage: str                         # mcap or sqlite3
    topics: dict                         # bag topic -> (msgtype, message count)
    commands: list                       # (t_ns, sim_name, bag topic, rclpy message), sorted by time
    js_t: np.ndarray                     # (n,) ns
    js_names: list
    js_q: np.ndarray                     # (n, joints), rad or m (NaN where a message lacks the joint)
    wrenches: dict                       # sim name -> (bag topic, frame_id, t (n,) ns, wrench (n, 6))
    t0_ns: int = 0                       # bag time of sim time 0
    ignored: list = field(default_factory=list)


def sim_name(topic: str, namespace: str = "", mapping: dict | None = None) -> str:
    """The simulation name of a bag topic (see the module docstring)."""
    if mapping and topic in mapping:
        return mapping[topic].lstrip("/")
    name = topic
    ns = "/" + namespace.strip("/") + "/" if namespace.strip("/") else ""
    if ns and name.startswith(ns):
        name = name[len(ns):]
    return name.lstrip("/")


def _reference_trajectory(states: list, trajectory_name: str, topic: str, t0: int) -> tuple:
    """A trajectory controller's ``controller_state`` messages (control_msgs/JointTrajectoryControllerState) ->
    ONE JointTrajectory through their ``reference`` positions at their stamps (linear in between: exact where
    the samples fall on the knots of a linearly interpolated command, else within a dt^2/8 of the reference's
    acceleration), starting at the first stamp: what the robot's controller executed, whatever sent it the goals
    (FollowJointTrajectory, topics). Returns a command entry (bag time, sim name, topic, message)."""
    first = _stamp_ns(states[0].header.stamp)
    msg = JointTrajectory()
    _set_stamp(msg.header.stamp, first)
    msg.joint_names = list(states[0].joint_names)
    points, last = [], None
    for s in states:
        t = _stamp_ns(s.header.stamp) - first
        if last is not None and t <= last:          # a repeated or out-of-order sample
            continue
        last = t
        pt = JointTrajectoryPoint(positions=list(s.reference.positions))   # linear between the samples
        pt.time_from_start = Duration(sec=t // 1_000_000_000, nanosec=t % 1_000_000_000)
        points.append(pt)
    msg.points = points
    return first if first > t0 else t0, trajectory_name, topic, msg


def read_bag(path: str | Path, namespace: str = "", mapping: dict | None = None) -> BagData:
    """Read joint_states, every WrenchStamped topic and the command topics (JointTrajectory,
    Float64MultiArray) of a rosbag2 directory; other topics are listed in ``ignored``."""
    from rosbags.rosbag2 import Reader, ReaderError  # deferred: optional, pip only (no rosdep key)

    from ..bag_files import check_bag      # deferred: loads rosbags and mcap (optional, pip only)
    path = Path(path)
    check_bag(path)                        # ConfigError (one line) for a missing, malformed, cut or corrupt bag
    storage = "mcap" if any(path.glob("*.mcap")) else "sqlite3" if any(path.glob("*.db3")) else "?"
    try:
        return _read_bag(path, storage, namespace, dict(mapping or {}), deserialize_message, Reader)
    except (ReaderError, OSError, ValueError, KeyError, struct.error, EOFError, RuntimeError) as exc:
        raise ConfigError(f"{path}: cannot read the bag: {type(exc).__name__}: {' '.join(str(exc).split())}") \
            from None


def _read_bag(path: Path, storage: str, namespace: str, mapping: dict, deserialize_message, Reader) -> BagData:
    with Reader(path) as reader:
        topics = {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
        unknown = [t for t in mapping if t not in topics]
        if unknown:
            raise ConfigError(f"--map: the bag has no topic {unknown}; its topics: {', '.join(sorted(topics))}")
        use, ignored, js_conn = [], [], None
        for c in reader.connections:
            name = sim_name(c.topic, namespace, mapping)
            if name == JOINT_STATES and c.msgtype == "sensor_msgs/msg/JointState" and js_conn is None:
                js_conn = c
            elif c.msgtype not in COMMAND_TYPES + (CONTROLLER_STATE, TRAJECTORY_GOAL,
                                                   "geometry_msgs/msg/WrenchStamped"):
                ignored.append(c.topic)
                continue
            use.append(c)
        if js_conn is None:
            raise ConfigError(f"{path}: no sensor_msgs/JointState topic named {JOINT_STATES!r} (after --namespace "
                              f"/ --map); topics: {', '.join(f'{t} ({m})' for t, (m, _) in sorted(topics.items()))}")
        commands, js, ws, states = [], [], {}, {}
        classes = {}
        for c, t_bag, raw in reader.messages(connections=use):
            cls = classes.get(c.msgtype) or classes.setdefault(c.msgtype, _msg_class(c.msgtype))
            if cls is None:
                raise ConfigError(f"{path}: topic {c.topic}: message type {c.msgtype} is not installed")
            msg = deserialize_message(bytes(raw), cls)
            if c.id == js_conn.id:
                js.append(msg)
            elif c.msgtype == "geometry_msgs/msg/WrenchStamped":
                ws.setdefault(c.topic, []).append(msg)
            elif c.msgtype == CONTROLLER_STATE:        # at its stamp: the controller's update time
                states.setdefault(c.topic, []).append(msg)
            elif c.msgtype == TRAJECTORY_GOAL:         # <controller>/<action>/goal: its trajectory, when received
                action = sim_name(c.topic, namespace, mapping).removesuffix("/goal")
                commands.append((int(t_bag), action.rsplit("/", 1)[0] + "/joint_trajectory", c.topic, msg.trajectory))
            else:
                commands.append((int(t_bag), sim_name(c.topic, namespace, mapping), c.topic, msg))
    if not js:
        raise ConfigError(f"{path}: topic {js_conn.topic} has no messages")
    t0 = _stamp_ns(js[0].header.stamp)
    names = list(js[0].name)
    js_t = np.array([_stamp_ns(m.header.stamp) - t0 for m in js], dtype=np.int64)
    index = {n: i for i, n in enumerate(names)}
    q = np.full((len(js), len(names)), np.nan)
    for k, m in enumerate(js):             # messages may list joints in another order or a subset
        for n, p in zip(m.name, m.position):
            if n in index:
                q[k, index[n]] = p
    for topic, msgs in states.items():        # a trajectory controller's references -> one trajectory
        name = sim_name(topic, namespace, mapping)
        if name.endswith("/controller_state"):
            commands.append(_reference_trajectory(msgs, name.rsplit("/", 1)[0] + "/joint_trajectory", topic, t0))
        else:
            ignored.append(topic)
    commands.sort(key=lambda c: c[0])
    commands = [(t - t0, name, topic, msg) for t, name, topic, msg in commands]
    for *_, msg in commands:               # trajectory start times: same origin as the states
        header = getattr(msg, "header", None)
        if header is not None and _stamp_ns(header.stamp) > 0:
            _set_stamp(header.stamp, max(_stamp_ns(header.stamp) - t0, 1))
    wrenches = {sim_name(topic, namespace, mapping): (
        topic, msgs[0].header.frame_id, np.array([_stamp_ns(m.header.stamp) - t0 for m in msgs], dtype=np.int64),
        np.array([_wrench6(m) for m in msgs], dtype=float)) for topic, msgs in ws.items()}
    return BagData(str(path), storage, topics, commands, js_t, names, q, wrenches, t0, ignored)


# ------------------------------------------------------------------------------------------- replay

@dataclass
class ReplayResult:
    """Measured and simulated signals at the bag's stamps (times in s from the first joint_states) and residuals
    (measured - simulated)."""

    bag: BagData
    engine: str
    joints: list                         # compared joints
    t_js: np.ndarray
    q_bag: np.ndarray
    q_sim: np.ndarray
    wrench_topic: str | None             # bag topic of the compared wrench
    wrench_frame: str
    t_w: np.ndarray
    w_bag: np.ndarray
    w_sim: np.ndarray
    failures: list
    wall_s: float = 0.0
    delivered: int = 0
    rejected: list = field(default_factory=list)
    unused_commands: list = field(default_factory=list)    # command topics no simulated controller subscribes
    superseded: list = field(default_factory=list)         # controller_state topics of controllers commanded in the bag

    @property
    def q_residual(self) -> np.ndarray:
        return self.q_bag - self.q_sim

    @property
    def w_residual(self) -> np.ndarray:
        return self.w_bag - self.w_sim

    def joint_stats(self) -> dict:
        """joint -> (RMS, max |residual|) in rad or m."""
        r = self.q_residual
        return {n: (float(np.sqrt(np.nanmean(r[:, j] ** 2))), float(np.nanmax(np.abs(r[:, j]))))
                for j, n in enumerate(self.joints)}

    def wrench_stats(self) -> dict:
        """axis -> (RMS, max |residual|) in N or N m; 'force': of the norm of the force residual."""
        if not len(self.t_w):
            return {}
        r = self.w_residual
        out = {a: (float(np.sqrt(np.mean(r[:, i] ** 2))), float(np.max(np.abs(r[:, i]))))
               for i, a in enumerate(WRENCH_AXES)}
        fn = np.linalg.norm(r[:, :3], axis=1)
        out["force"] = (float(np.sqrt(np.mean(fn ** 2))), float(fn.max()))
        return out


def _initial_scene(scene: Path, positions: dict, out_dir: Path) -> Path:
    """A copy of ``scene`` (relative object URDFs resolved) starting at ``positions`` (joint -> rad or m)."""
    copy = trial_scene(scene, {}, out_dir)
    data = load_yaml(copy.read_text()) or {}
    data["initial_positions"] = {**dict(data.get("initial_positions") or {}),
                                 **{k: float(v) for k, v in positions.items()}}
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    return copy


def replay(bag: str | Path, scene: str | Path, engine: str = "tamsi", time_step: float = 0.002, *,
           inactive_controllers=None, engine_options: dict | None = None, namespace: str = "",
           mapping: dict | None = None, tare: float = 0.0, duration: float | None = None) -> ReplayResult:
    """Play ``bag`` into a simulation of ``scene`` (in process: a Simulator and the robot's emulated ros2_control
    controllers through :class:`~contact_sim_ros.clients.inprocess_link.InProcessLink`); see the module
    docstring. ``tare`` (s): subtract each wrench signal's mean over its first ``tare`` s. ``duration`` (s): stop
    after this much bag time (default: its last joint_states)."""
    data = read_bag(bag, namespace, mapping)
    model_joints = set(load_scene(str(scene)).model.joint_names)
    start = {n: float(data.js_q[0, i]) for i, n in enumerate(data.js_names)
             if n in model_joints and np.isfinite(data.js_q[0, i])}
    if not start:
        raise ConfigError(f"{bag}: none of the bag's joints {data.js_names} is a joint of the scene {scene} "
                          f"({sorted(model_joints)})")
    with tempfile.TemporaryDirectory(prefix="contact_sim_replay_") as tmp:
        link = InProcessLink(_initial_scene(Path(scene), start, Path(tmp)), engine, time_step, time_step,
                             inactive_controllers=inactive_controllers, engine_options=engine_options)
        try:
            return _run(link, data, engine, tare, duration)
        finally:
            link.close()


def _run(link, data: BagData, engine, tare, duration) -> ReplayResult:
    """Step the simulation through the bag: at every step time, first sample the states due (the bag's
    joint_states / wrench stamps nearest to it), then deliver the commands received up to it, then step."""
    sim, loop, host = link.sim, link.loop, link.host
    joints = [n for n in data.js_names if n in sim.model.joint_names]
    loop.publish_now()                         # the broadcasters' topics (which wrench the robot publishes)
    sim_wrenches = [t for t, m in host.box.items() if type(m).__name__ == "WrenchStamped"]
    w_name = next((t for t in sim_wrenches if t in data.wrenches), None)
    w_topic, w_frame, w_t, w_meas = data.wrenches[w_name] if w_name else (None, "", np.zeros(0, np.int64),
                                                                           np.zeros((0, 6)))
    subs = host.subscriptions
    direct = {c[1] for c in data.commands if not c[2].endswith("controller_state")}
    # a controller's references (controller_state) only where the bag has no commands of that controller
    use = [c for c in data.commands if c[1] in subs and (c[1] not in direct or not c[2].endswith("controller_state"))]
    # controller_state's reference is the controller's command for the end of its update period (the emulated
    # and the real JointTrajectoryController sample at t + period): the references' trajectory starts a period later
    lead_ns = int(round(sim.time_step * getattr(link.cm, "every", 1) * 1e9))
    for c in use:
        if c[2].endswith("controller_state"):
            _set_stamp(c[3].header.stamp, _stamp_ns(c[3].header.stamp) + lead_ns)
    cmd, used = use, {id(c) for c in use}
    unused = sorted({c[2] for c in data.commands if id(c) not in used and c[1] not in subs})
    superseded = sorted({c[2] for c in data.commands if id(c) not in used and c[1] in subs})
    step_ns = int(round(sim.time_step * 1e9))
    end_ns = int(data.js_t[-1]) if duration is None else min(int(data.js_t[-1]), int(round(duration * 1e9)))
    n_steps = int(math.ceil(end_ns / step_ns))
    js_sel, w_sel = data.js_t <= end_ns, w_t <= end_ns
    js_step = np.floor(data.js_t[js_sel] / step_ns + 0.5).astype(np.int64)     # nearest step (ties: later)
    w_step = np.floor(w_t[w_sel] / step_ns + 0.5).astype(np.int64)
    q_sim = np.full((len(js_step), len(joints)), np.nan)
    w_sim = np.full((len(w_step), 6), np.nan)
    q_index = np.array([sim.model.joint_q_index[sim.model.joint_index(n)] for n in joints])
    i_cmd = i_js = i_w = 0
    wall0 = time.monotonic()
    for n in range(n_steps + 1):
        while i_js < len(js_step) and js_step[i_js] == n:
            q_sim[i_js] = sim.q[q_index]
            i_js += 1
        if i_w < len(w_step) and w_step[i_w] == n:
            loop.publish_now()                     # the F/T broadcaster's reading of this state
            w6 = _wrench6(host.box[w_name])
            while i_w < len(w_step) and w_step[i_w] == n:
                w_sim[i_w] = w6
                i_w += 1
        t_n = n * step_ns
        while i_cmd < len(cmd) and cmd[i_cmd][0] <= t_n:
            subs[cmd[i_cmd][1]](cmd[i_cmd][3])
            i_cmd += 1
        if n == n_steps:
            break
        report = loop.step_now()
        if not report.ok:
            link.failures.append(f"t = {report.t:.4f} s: {report.message}")
    q_bag = data.js_q[js_sel][:, [data.js_names.index(j) for j in joints]]
    w_bag = w_meas[w_sel].copy()
    if tare > 0 and len(w_bag):
        first = w_t[w_sel] <= tare * 1e9
        w_bag -= w_bag[first].mean(axis=0)
        w_sim = w_sim - w_sim[first].mean(axis=0)
    return ReplayResult(data, engine, joints, data.js_t[js_sel] * 1e-9, q_bag, q_sim, w_topic, w_frame,
                        w_t[w_sel] * 1e-9, w_bag, w_sim, list(link.failures), time.monotonic() - wall0, i_cmd,
                        list(host.rejected), unused, superseded)


# ------------------------------------------------------------------------------------------- report

def write_report(result: ReplayResult, out: str | Path, plots: bool = True) -> str:
    """Markdown report (``<out>/replay.md``) and plots (``<out>/plots/joint_residuals.png``, ``wrench.png``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    d, r = result.bag, result
    dur = r.t_js[-1] if len(r.t_js) else 0.0
    lines = [f"# Replay of {d.path} ({d.storage}) on {r.engine}", "",
             f"{dur:.3f} s of bag time from the first joint_states stamp; {r.delivered} command messages delivered "
             f"({', '.join(sorted({c[2] for c in d.commands} - set(r.unused_commands) - set(r.superseded))) or 'none'}"
             f"); {len(r.t_js)} "
             f"joint states, {len(r.t_w)} wrench samples ({r.wrench_topic or 'no wrench topic'}"
             + (f", frame {r.wrench_frame}" if r.wrench_frame else "") + f"); replay wall time {r.wall_s:.1f} s.",
             ]
    if r.unused_commands:
        lines.append(f"Command topics no simulated controller subscribes to (not replayed; --map them): "
                     f"{', '.join(r.unused_commands)}.")
    if r.superseded:
        lines.append(f"Not used (the bag has these controllers' commands): {', '.join(r.superseded)}.")
    if d.ignored:
        lines.append(f"Bag topics not used: {', '.join(sorted(d.ignored))}.")
    if r.failures:
        lines.append(f"Solver failures: {len(r.failures)} (first: {r.failures[0]}).")
    if r.rejected:
        lines.append(f"Commands rejected by the simulated controllers: {len(r.rejected)} (first: {r.rejected[0]}).")
    lines += ["", "## Joint-position residuals (measured - simulated)", "", "| joint | RMS | max |",
              "| --- | --- | --- |"]
    for n, (rms, mx) in r.joint_stats().items():
        lines.append(f"| {n} | {rms:.3e} | {mx:.3e} |")
    ws = r.wrench_stats()
    if ws:
        lines += ["", "## Wrench residuals (measured - simulated, sensor frame; N, N m)", "",
                  "| axis | RMS | max | measured RMS |", "| --- | --- | --- | --- |"]
        for i, a in enumerate(WRENCH_AXES):
            lines.append(f"| {a} | {ws[a][0]:.3e} | {ws[a][1]:.3e} | {np.sqrt(np.mean(r.w_bag[:, i] ** 2)):.3e} |")
        lines.append(f"| force (norm) | {ws['force'][0]:.3e} | {ws['force'][1]:.3e} | |")
    if plots:
        import matplotlib  # deferred: matplotlib (~0.5 s to import), only for the plots
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # deferred: matplotlib (~0.5 s to import), only for the plots
        (out / "plots").mkdir(exist_ok=True)
        fig, ax = plt.subplots(figsize=(8, 4))
        for j, n in enumerate(r.joints):
            ax.plot(r.t_js, r.q_residual[:, j], lw=1, label=n)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("joint position residual (rad or m)")
        ax.set_title("measured - simulated joint positions")
        ax.legend(fontsize=6, ncol=3)
        fig.tight_layout()
        fig.savefig(out / "plots" / "joint_residuals.png", dpi=100)
        plt.close(fig)
        if ws:
            fig, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
            for i in range(3):
                axes[i].plot(r.t_w, r.w_bag[:, i], lw=1, label="measured (bag)")
                axes[i].plot(r.t_w, r.w_sim[:, i], lw=1, ls="--", label="simulated")
                axes[i].plot(r.t_w, r.w_residual[:, i], lw=1, label="residual")
                axes[i].set_ylabel(f"{WRENCH_AXES[i]} (N)")
            axes[0].legend(fontsize=7)
            axes[0].set_title(f"wrist F/T ({r.wrench_topic}): force RMS residual {ws['force'][0]:.3g} N")
            axes[-1].set_xlabel("time (s)")
            fig.tight_layout()
            fig.savefig(out / "plots" / "wrench.png", dpi=100)
            plt.close(fig)
    text = "\n".join(lines) + "\n"
    (out / "replay.md").write_text(text)
    return text


# ------------------------------------------------------------------------------------------- recording

class _RecordingLink:
    """Wraps an InProcessLink: writes what a robot's bag would hold (the scenario controller's trajectory commands
    at their send time; joint_states and the F/T wrench at each control tick; the trajectory controllers'
    controller_state as they publish it) to a rosbag2 writer."""

    def __init__(self, link, writer, store):
        self._link, self._writer, self._store, self._ser = link, writer, store, serialize_message
        self._conns, self._last = {}, {}

    def __getattr__(self, name):
        return getattr(self._link, name)

    def _write(self, topic: str, msg, t_ns: int) -> None:
        conn = self._conns.get(topic)
        if conn is None:
            msgtype = msgtype_name(type(msg))
            ensure_message_type(self._store, msgtype)  # control_msgs: from its .msg files (not in Jazzy's store)
            conn = self._conns[topic] = self._writer.add_connection(topic, msgtype, typestore=self._store)
        self._writer.write(conn, int(t_ns), self._ser(msg))

    def _write_state(self) -> None:
        box = self._link.host.box
        for topic, msg in box.items():
            kind = type(msg).__name__
            if topic == JOINT_STATES or kind in ("WrenchStamped", "JointTrajectoryControllerState"):
                t = _stamp_ns(msg.header.stamp)
                if t != self._last.get(topic):          # the controllers' own rate: each message once
                    self._last[topic] = t
                    self._write("/" + topic, msg, t)

    def start(self):
        self._link.loop.publish_now()             # the initial state (t = 0) opens the bag
        self._write_state()
        out = self._link.start()
        self._write_state()
        return out

    def advance(self):
        t = self._link.advance()
        self._write_state()
        return t

    def publish(self, controller, msg):
        self._write(f"/{controller}/joint_trajectory", msg, self._link.t_ns)
        self._link.publish(controller, msg)


def record_scenario_bag(path: str | Path, scenario: str = "pick_shake_place", engine: str = "tamsi", *,
                        storage: str = "mcap", params: dict | None = None, scene_values: dict | None = None,
                        time_step: float | None = None):
    """Run ``scenario`` in process and record the bag a robot would give (trajectory commands, joint_states,
    the wrist F/T) to the new rosbag2 directory ``path`` (``storage`` mcap or sqlite3). ``scene_values``: campaign
    parameters of the scene (e.g. ``{"object.bottle.mass_scale": 0.8}``: a held-apart "real" cell). Returns the
    controller's verdict."""
    from rosbags.rosbag2 import StoragePlugin, Writer  # deferred: optional, pip only (no rosdep key)
    plugins = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}
    if storage not in plugins:
        raise ConfigError(f"storage {storage!r}; valid: mcap, sqlite3")
    sc = SCENARIOS[scenario]
    controller = sc.client_class()(sc.params_class()(**(params or {})))
    with tempfile.TemporaryDirectory(prefix="contact_sim_record_") as tmp:
        scene = trial_scene(resolve_resource(sc.scene), dict(scene_values or {}), Path(tmp))
        link = InProcessLink(scene, engine, time_step or sc.time_step, sc.period,
                             ft_topic=getattr(controller, "ft_topic", None),
                             trajectory_controllers=controller.trajectory_controllers,
                             inactive_controllers=sc.inactive_controllers, engine_options=sc.engine_options)
        writer = Writer(Path(path), version=9, storage_plugin=plugins[storage])
        writer.open()
        try:
            return run_controller(controller, _RecordingLink(link, writer, make_typestore()))
        finally:
            writer.close()
            link.close()


# ------------------------------------------------------------------------------------------- command line

def main(argv=None) -> int:
    """``contact-sim replay BAG (--scenario NAME | --scene FILE) [--engine E] [--time-step DT] [--namespace NS]
    [--map BAG_TOPIC=SIM_NAME ...] [--tare S] [--duration S] [--out DIR] [--no-plots]``."""
    ap = argparse.ArgumentParser(prog="contact-sim replay", description=__doc__.split("\n\n")[0],
                                 epilog="Topics, types and name mapping: docs/scenarios.md, 'Replaying a robot's bag'.")
    ap.add_argument("bag", help="rosbag2 directory (MCAP or sqlite3)")
    ap.add_argument("--scenario", default=None, help=f"take the scene, time step and controllers of a scenario "
                                                     f"({', '.join(SCENARIOS)})")
    ap.add_argument("--scene", default=None, help="scene file (the real cell: robot and objects)")
    ap.add_argument("--inactive-controllers", default=None,
                    help="comma-separated controllers loaded inactive (default: the scenario's / robot's)")
    ap.add_argument("--engine", default="tamsi")
    ap.add_argument("--time-step", type=float, default=None, help="s (default: the scenario's, else 0.002)")
    ap.add_argument("--namespace", default="", help="strip this namespace from the bag's topic names")
    ap.add_argument("--map", action="append", default=[], metavar="BAG_TOPIC=SIM_NAME",
                    help="rename a bag topic (repeatable)")
    ap.add_argument("--tare", type=float, default=0.0, help="s: subtract each wrench signal's mean over its first "
                                                          "S seconds")
    ap.add_argument("--duration", type=float, default=None, help="s of bag time to replay (default: all)")
    ap.add_argument("--out", default=None, help="report directory (default: out/replay/<bag name>)")
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args(argv)
    try:
        mapping = {}
        for kv in args.map:
            if "=" not in kv:
                raise ConfigError(f"--map {kv!r}: expected BAG_TOPIC=SIM_NAME")
            a, b = kv.split("=", 1)
            mapping[a] = b
        if (args.scenario is None) == (args.scene is None):
            raise ConfigError("give exactly one of --scenario NAME and --scene FILE")
        if args.scenario is not None:
            if args.scenario not in SCENARIOS:
                raise ConfigError(f"unknown scenario {args.scenario!r}; valid: {', '.join(SCENARIOS)}")
            sc = SCENARIOS[args.scenario]
            scene, dt, inactive = resolve_resource(sc.scene), sc.time_step, sc.inactive_controllers
            options = sc.engine_options
        else:
            scene, dt, inactive, options = Path(args.scene), 0.002, None, None
        if args.inactive_controllers is not None:
            inactive = [c.strip() for c in args.inactive_controllers.split(",") if c.strip()]
        result = replay(args.bag, scene, args.engine, args.time_step or dt, inactive_controllers=inactive,
                        engine_options=options, namespace=args.namespace, mapping=mapping, tare=args.tare,
                        duration=args.duration)
        out = args.out or str(Path("out") / "replay" / Path(args.bag).name)
        print(write_report(result, out, plots=not args.no_plots))
        print(f"report: {Path(out) / 'replay.md'}")
    except ConfigError as exc:
        print(f"contact-sim replay: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:                  # the report directory cannot be written ...
        print(f"contact-sim replay: error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0
