"""Scenario runner: start the simulation node with a robot, engine and scene, run a scenario controller against
it over ROS 2, print progress (phase, sim time, real-time factor, grip force) and a final verdict with numbers.

    python -m contact_sim_ros.scenarios.runner                       # scenario 1 (pick, shake, place), TAMSI
    python -m contact_sim_ros.scenarios.runner pick_shake_place --engine lagged
    python -m contact_sim_ros.scenarios.runner pick_shake_place --engine all      # every engine, compared
    python -m contact_sim_ros.scenarios.runner --list

The node runs with real_time_factor 0, paused, and the controller steps it in lock-step through the node's
``~/step`` service (one control period per call), so a run is deterministic (docs/scenarios.md).
Exit code 0 when every run succeeded, 1 when a scenario failed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pkgutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

import contact_sim_ros
from ..clients.inprocess_link import InProcessLink
from ..clients.inprocess_robots import InProcessMultiRobotLink
from ..clients.pick_shake_place import run_controller
from ..engines.registry import engine_names
from ..errors import ConfigError
from ..resources import resolve_resource, share_dir
from ..yaml_files import parse_yaml

# the folder holding the imported contact_sim_ros package: the node's `python -m` runs there, so that it imports
# the same package as this process (the checkout, site-packages or a colcon install space)
_PACKAGE_PARENT = Path(contact_sim_ros.__file__).resolve().parent.parent


def __getattr__(name):
    """``REPO``: the package's data folder, :func:`contact_sim_ros.resources.share_dir` (the source checkout when
    imported from it; ``share/contact_sim_ros`` of a colcon install space), resolved when asked for. Scenario
    scenes are found with :func:`contact_sim_ros.resources.resolve_resource`."""
    if name == "REPO":
        return share_dir()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class ScenarioSpec:
    name: str
    description: str
    scene: str                  # path relative to the package's data folder (resources.share_dir())
    factory: str                # "module:Class" of the controller
    params: str                 # "module:ParamsClass"
    time_step: float = 0.002    # s
    period: float = 0.02        # s, control period (a whole number of time steps)
    duration: float | None = None   # s of sim time (None: until the controller is done)
    engine_options: dict = field(default_factory=dict)
    # controllers loaded inactive (node parameter inactive_controllers); None: the robot's default
    inactive_controllers: tuple | None = None
    # the scene with the cameras a controller perceiving the object uses (pick_source: perception): the same
    # world plus cameras (docs/cameras.md "Perception in the loop"); None: the scenario cannot perceive
    perception_scene: str | None = None

    def scene_for(self, params) -> str:
        """The scene a run with controller ``params`` uses: the perception scene when it perceives."""
        if getattr(params, "pick_source", "given") == "perception":
            if self.perception_scene is None:
                raise ConfigError(f"scenario {self.name} has no scene with cameras: pick_source perception "
                                  f"is not available")
            return self.perception_scene
        return self.scene

    def client_class(self):
        """The scenario client's class (``factory``, imported): called with a ``params_class()`` instance."""
        return pkgutil.resolve_name(self.factory)

    def params_class(self):
        """The dataclass of the client's parameters (``params``, imported)."""
        return pkgutil.resolve_name(self.params)


# the arm scenarios stream the fingers' positions (force loop) through gripper_controller (a trajectory
# controller) instead of the default gripper_action_controller on the same joints
_STREAMED_GRIPPER = ("gripper_action_controller", "arm_position_controller", "arm_velocity_controller",
                     "arm_effort_controller", "gripper_position_controller", "gripper_velocity_controller",
                     "gripper_effort_controller")

SCENARIOS = {
    "pick_shake_place": ScenarioSpec(
        "pick_shake_place", "iiwa + WSG 50: pick the bottle, shake it, place it (force feedback; TAMSI VI-C)",
        "scenes/scenario_pick_shake_place.yaml", "contact_sim_ros.clients.pick_shake_place:PickShakePlace",
        "contact_sim_ros.clients.pick_shake_place:PickShakePlaceParams", inactive_controllers=_STREAMED_GRIPPER,
        perception_scene="scenes/scenario_pick_shake_place_cameras.yaml"),
    "franka_rod": ScenarioSpec(
        "franka_rod", "Franka: grasp the bronze rod, drive a 3 cm circle at a chosen frequency, time to failure "
        "(ICF XII-B)", "scenes/scenario_franka_rod.yaml", "contact_sim_ros.clients.franka_stress:FrankaStress",
        "contact_sim_ros.clients.franka_stress:FrankaStressParams", inactive_controllers=_STREAMED_GRIPPER),
    "allegro_mug": ScenarioSpec(
        "allegro_mug", "Allegro hand: open-loop periodic mug reorientation (TAMSI VI-B)",
        "scenes/scenario_allegro_mug.yaml", "contact_sim_ros.clients.allegro_reorient:AllegroReorient",
        "contact_sim_ros.clients.allegro_reorient:AllegroReorientParams", time_step=0.001),
    "barrett_cylinder": ScenarioSpec(
        "barrett_cylinder", "BarrettHand on a lift stage: close on the bottle (cylinder), lift 10 cm, grasp forces",
        "scenes/scenario_barrett_cylinder.yaml", "contact_sim_ros.clients.hand_grasp:HandGrasp",
        "contact_sim_ros.clients.hand_grasp:HandGraspParams"),
    "barrett_box": ScenarioSpec(
        "barrett_box", "BarrettHand on a lift stage: close on a 6x6x16 cm box, lift 10 cm, grasp forces",
        "scenes/scenario_barrett_box.yaml", "contact_sim_ros.clients.hand_grasp:HandGrasp",
        "contact_sim_ros.clients.hand_grasp:HandGraspParams"),
    "two_arm_handover": ScenarioSpec(
        "two_arm_handover", "two iiwa + WSG 50 in one world: the left arm picks the box and hands it to the right "
        "arm (a controller per robot namespace)", "scenes/two_iiwa_handover.yaml",
        "contact_sim_ros.clients.handover:HandOver", "contact_sim_ros.clients.handover:HandOverParams",
        time_step=0.001, inactive_controllers=_STREAMED_GRIPPER),
    "iiwa_allegro_mug": ScenarioSpec(
        "iiwa_allegro_mug", "Allegro hand on a KUKA iiwa in one world: open-loop mug reorientation in hand while "
        "the arm holds (a controller per robot namespace)", "scenes/iiwa_allegro_mug.yaml",
        "contact_sim_ros.clients.allegro_reorient:ArmHandReorient",
        "contact_sim_ros.clients.allegro_reorient:ArmHandReorientParams", time_step=0.001),
}


@dataclass
class RunResult:
    scenario: str
    engine: str
    success: bool
    reason: str
    numbers: dict
    log: dict                 # t (ns), q, v, grip, load, phase arrays at the control ticks
    node_output: str = ""
    object_poses: dict = field(default_factory=dict)   # ground truth from /tf (not used by the controller)


def _node_command(spec: ScenarioSpec, engine: str, namespace: str, time_step: float, period: float,
                  engine_options: dict | None, extra: list[str], scene: str | None = None) -> list[str]:
    steps = int(round(period / time_step))
    if steps < 1 or abs(steps * time_step - period) > 1e-9:
        raise ConfigError(f"control period {period} s is not a whole number of time steps {time_step} s")
    cmd = [sys.executable, "-m", "contact_sim_ros.ros.sim_node", "--scene",
           str(resolve_resource(scene or spec.scene)),
           "--engine", engine, "--time-step", repr(time_step), "--real-time-factor", "0", "--paused",
           "--namespace", namespace]
    opts = {**spec.engine_options, **(engine_options or {})}
    if opts:
        cmd += ["--engine-options", yaml.safe_dump(opts, default_flow_style=True).strip()]
    cmd += ["--ros-args", "-p", f"step_count:={steps}", "-p", "contacts_rate:=0.0", "-p", "markers_rate:=0.0",
            "-p", "tf_rate:=10.0", "-p", "publish_clock:=false", *extra]
    if spec.inactive_controllers is not None:
        cmd[cmd.index("--ros-args") + 1:cmd.index("--ros-args") + 1] = [
            "-p", f"inactive_controllers:=[{', '.join(spec.inactive_controllers)}]"]
    return cmd


def run_scenario(name: str = "pick_shake_place", engine: str = "tamsi", *, time_step: float | None = None,
                 period: float | None = None, duration: float | None = None, params: dict | None = None,
                 engine_options: dict | None = None, namespace: str | None = None, progress=None,
                 timeout: float = 120.0, node_args: list[str] | None = None,
                 transport: str = "ros", scene: str | Path | None = None, node_factory=None) -> RunResult:
    """Run the scenario's controller in lock-step until done: ``transport`` 'ros' runs the simulation node and talks
    to it over ROS 2 (DDS); 'inprocess' runs the same controllers against a Simulator in this process through
    :class:`~contact_sim_ros.clients.inprocess_link.InProcessLink` (same message semantics and rates, no DDS).
    ``node_factory`` (transport 'ros'): how the node runs - None: a process (``python -m
    contact_sim_ros.ros.sim_node`` with the scenario's flags); else a callable taking those flags (sim_node's
    command-line arguments) and returning a handle with ``state()``, ``output()`` and ``close()`` (returns the
    node's output), e.g. :class:`contact_sim_ros.ros.node_in_process.NodeInThisProcess`: the same node built in
    this process, no process start. ``scene``: a scene file instead of the scenario's own (the same robot and object
    names; e.g. a campaign's ``trial_scene`` with an object moved or picked from the mesh set). ``timeout``: s of
    wall time the controller waits for any one answer of the node (a failure guard)."""
    if name not in SCENARIOS:
        raise ConfigError(f"unknown scenario {name!r}; valid scenarios: {', '.join(SCENARIOS)}")
    if transport not in TRANSPORTS:
        raise ConfigError(f"unknown transport {transport!r}; valid transports: {', '.join(sorted(TRANSPORTS))}")
    spec = SCENARIOS[name]
    if scene is not None:
        spec = dataclasses.replace(spec, scene=str(Path(scene).resolve()))
    dt = spec.time_step if time_step is None else float(time_step)
    T = spec.period if period is None else float(period)
    ns = namespace or f"/scenario_{os.getpid()}_{time.monotonic_ns() % 100000}"
    p = spec.params_class()(**(params or {}))
    controller = spec.client_class()(p)
    robots = getattr(controller, "robots", None)      # several robots in one world: one namespace each
    scene = spec.scene_for(p) if scene is None else str(scene)
    if transport == "inprocess":
        return _run_in_process(spec, controller, engine, dt, T, duration, engine_options, progress, robots, scene)
    # deferred: rclpy, only for a run over ROS (an in-process run, a campaign trial, loads none of it)
    from ..clients.robot_link import MultiRobotLink, RobotLink
    cmd = _node_command(spec, engine, ns, dt, T, engine_options, node_args or [], scene)
    node = (_NodeSubprocess(cmd, f"scenario_{name}_{engine}_") if node_factory is None else
            node_factory(cmd[cmd.index("contact_sim_ros.ros.sim_node") + 1:]))
    link = None
    poses = {}
    out = ""
    try:
        link_args = dict(ft_topic=getattr(controller, "ft_topic", None),
                         trajectory_controllers=controller.trajectory_controllers, timeout=timeout,
                         wrench_topics=getattr(controller, "wrench_topics", ()))
        link = (MultiRobotLink(ns, robots, T, **link_args) if robots else
                RobotLink(ns, T, "lockstep", **link_args))
        try:
            from tf2_msgs.msg import TFMessage
        except ImportError:      # built from msgs/ by scripts/ensure_venv.sh; ground truth is optional
            TFMessage = None

        def on_tf(msg):
            for tr in msg.transforms:
                if tr.header.frame_id == "world":
                    poses[tr.child_frame_id] = (tr.transform.translation.x, tr.transform.translation.y,
                                                tr.transform.translation.z)
        if TFMessage is not None:
            link.node.create_subscription(TFMessage, "/tf", on_tf, 10)
        try:
            verdict = run_controller(controller, link, duration=spec.duration if duration is None else duration,
                                     progress=progress)
        except Exception as exc:
            raise RuntimeError(f"{type(exc).__name__}: {exc}\nthe simulation node is {node.state()}; its output "
                               f"(tail):\n{node.output()[-2000:]}") from exc
        time.sleep(0.05)
    finally:
        if link is not None:
            link.close()
        out = node.close()
    return _result(spec, engine, controller, verdict, out, poses)


TRANSPORTS = ("ros", "inprocess")


class _NodeSubprocess:
    """The simulation node of the command ``cmd`` as a process (run_scenario's 'ros' transport), its output in a
    temporary file; ``close()`` stops it as Ctrl-C would and returns its output."""

    def __init__(self, cmd: list[str], log_prefix: str):
        self.log = tempfile.NamedTemporaryFile("w+", prefix=log_prefix, suffix=".log", delete=False)
        try:
            self.proc = subprocess.Popen(cmd, cwd=_PACKAGE_PARENT, stdout=self.log, stderr=subprocess.STDOUT)
        except BaseException:
            self.log.close()
            os.unlink(self.log.name)
            raise

    def state(self) -> str:
        return f"exited ({self.proc.returncode})" if self.proc.poll() is not None else "still running"

    def output(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()

    def close(self) -> str:
        stop_node_process(self.proc)
        self.log.close()
        out = Path(self.log.name).read_text()
        os.unlink(self.log.name)
        return out


def _result(spec, engine, controller, verdict, node_output: str, poses: dict) -> RunResult:
    c = controller
    logd = {"t": np.array(c.log_t, dtype=np.int64), "q": np.array(c.log_q), "v": np.array(c.log_v),
            "grip": np.array(c.log_grip), "load": np.array(c.log_load), "phase": np.array(c.log_phase)}
    return RunResult(spec.name, engine, verdict.success, verdict.reason, dict(verdict.numbers), logd, node_output,
                     dict(poses))


def _run_in_process(spec, controller, engine, dt, T, duration, engine_options, progress, robots=None,
                    scene: str | None = None) -> RunResult:
    """The scenario against a Simulator in this process: InProcessLink, or InProcessMultiRobotLink for a
    scenario that drives several robots of one world."""
    link_args = dict(ft_topic=getattr(controller, "ft_topic", None),
                     trajectory_controllers=controller.trajectory_controllers,
                     wrench_topics=getattr(controller, "wrench_topics", ()),
                     inactive_controllers=spec.inactive_controllers,
                     engine_options={**spec.engine_options, **(engine_options or {})})
    if robots:
        link = InProcessMultiRobotLink(resolve_resource(scene or spec.scene), robots, engine, dt, T, **link_args)
    else:
        link = InProcessLink(resolve_resource(scene or spec.scene), engine, dt, T, **link_args)
    try:
        verdict = run_controller(controller, link, duration=spec.duration if duration is None else duration,
                                 progress=progress)
    finally:
        link.close()
    poses = {b.name: tuple(float(x) for x in link.sim.body_pose(b.name).translation)
             for b in link.model.free_bodies}
    if link.failures:
        verdict.numbers["solver_failures"] = len(link.failures)
    return _result(spec, engine, controller, verdict, "\n".join(link.failures), poses)


def _fmt(x):
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m contact_sim_ros.scenarios.runner",
                                 description="Run a grasp scenario against the simulation node over ROS 2 "
                                             "(or, --transport inprocess, against a Simulator in this process).")
    ap.add_argument("scenario", nargs="?", default="pick_shake_place", help="scenario name (--list)")
    ap.add_argument("--engine", default="tamsi", help="engine name, comma-separated names, or 'all'")
    ap.add_argument("--time-step", type=float, default=None, help="s (scenario default)")
    ap.add_argument("--period", type=float, default=None, help="control period, s (scenario default)")
    ap.add_argument("--duration", type=float, default=None, help="s of sim time (default: until done)")
    ap.add_argument("--grip-force", type=float, default=None, help="N, commanded grip force (where used)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="controller parameter override (YAML value), repeatable")
    ap.add_argument("--engine-options", default=None, help="YAML mapping passed to the engine")
    ap.add_argument("--log", default=None, help="save the joint-state log of each run to LOG_<engine>.npz")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    ap.add_argument("--transport", choices=TRANSPORTS, default="ros",
                    help="ros: the simulation node over DDS (default); inprocess: the same controllers, no DDS")
    args = ap.parse_args(argv)
    if args.list:
        for s in SCENARIOS.values():
            try:
                where = resolve_resource(s.scene)
            except ConfigError as exc:          # an install without the scene: say so, list the others
                where = f"missing: {exc}"
            print(f"{s.name:20s} {s.description}  (scene {where})")
        return 0
    try:
        if args.scenario not in SCENARIOS:
            raise ConfigError(f"unknown scenario {args.scenario!r}; valid scenarios: {', '.join(SCENARIOS)}")
        names = engine_names()
        engines = names if args.engine == "all" else [e.strip() for e in args.engine.split(",")]
        bad = [e for e in engines if e not in names]
        if bad:
            raise ConfigError(f"unknown engine(s) {bad}; valid engines: {', '.join(names)} (or 'all')")
        params = {}
        for kv in args.set:
            if "=" not in kv:
                raise ConfigError(f"--set {kv!r}: expected KEY=VALUE")
            k, v = kv.split("=", 1)
            params[k] = parse_yaml(v, f"--set {k}")
        if args.grip_force is not None:
            params["grip_force"] = args.grip_force
        eopts = parse_yaml(args.engine_options, "--engine-options") if args.engine_options else None
    except ConfigError as exc:
        print(f"scenario runner: error: {exc}", file=sys.stderr)
        return 2
    results = []
    for engine in engines:
        print(f"=== scenario {args.scenario} with engine {engine} ===", flush=True)

        def progress(d):
            print(f"  [{d['phase']:>11}] t = {d['t']:6.2f} s   real-time factor {d['rtf']:5.2f}   "
                  f"grip force {d['grip_force']:6.2f} N   wrist load {d['load']:6.2f} N", flush=True)
        try:
            r = run_scenario(args.scenario, engine, time_step=args.time_step, period=args.period,
                             duration=args.duration, params=params, engine_options=eopts,
                             progress=None if args.quiet else progress, transport=args.transport)
        except ConfigError as exc:
            print(f"scenario runner: error: {exc}", file=sys.stderr)
            return 2
        except Exception as exc:    # a crashed node or lost connection is a failed run, reported
            print(f"  FAILURE ({engine}): {type(exc).__name__}: {exc}", flush=True)
            results.append((engine, False, f"{type(exc).__name__}: {exc}", {}))
            continue
        print(("  SUCCESS" if r.success else "  FAILURE") + f" ({engine}): {r.reason}")
        for k, v in r.numbers.items():
            print(f"    {k:32s} {_fmt(v)}")
        if args.log:
            np.savez(f"{args.log}_{engine}.npz", **r.log)
        results.append((engine, r.success, r.reason, r.numbers))
    if len(results) > 1:
        print("\nengine          verdict   rtf     grip err (max, static hold)   reason")
        for engine, ok, reason, nums in results:
            print(f"{engine:15s} {'success' if ok else 'FAILURE':9s} "
                  f"{_fmt(nums.get('real_time_factor', float('nan'))):7s} "
                  f"{_fmt(nums.get('hold_grip_force_max_rel_error', float('nan'))):29s} {reason[:70]}")
    return 0 if all(ok for _, ok, _, _ in results) else 1


def stop_node_process(proc, timeout: float = 10.0) -> None:
    """Stop a node subprocess as Ctrl-C would (SIGINT), killing it if it has not exited after ``timeout`` s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    sys.exit(main())
