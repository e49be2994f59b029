"""Console entry point ``contact-sim``.

    contact-sim run SCENE [--engine E] [--time-step DT] [--duration T] [--log FILE.npz] [-o key=value ...]
        run a scene headless; print progress and the real-time factor; optionally write a numpy log
        [--viewer [--viewer-port P] [--paused] [--exit-after-run]]: serve the live browser view; its Pause/Reset
        buttons act on the run (--paused: wait for its Resume button before the first step); after the run the
        page stays up, showing the final state, until Ctrl-C (--exit-after-run, alias --no-wait: exit at once)
    contact-sim node [node flags]      run the ROS 2 node without ``ros2 launch`` (see docs/ros_interface.md)
    contact-sim campaign CAMPAIGN.yaml | report RESULTS | compare RESULTS REAL.csv
        grasp-validation campaigns on Ray, their report, the comparison with real trials (docs/scenarios.md)
    contact-sim replay BAG (--scenario NAME | --scene FILE)
        play a robot's rosbag2 (commands, joint states, wrist F/T) into the simulation: residuals and plots
    contact-sim bag-repair DIR
        recover a rosbag2 MCAP recording whose process was killed (no metadata.yaml, no MCAP summary) or whose
        file was cut: a complete bag of every message in the file's complete chunks
    contact-sim engines                list the registered engines
    contact-sim compile-kernels [--status] [--engines E ...] [--require-native]
        compile the engines' numba kernels into the shared on-disk cache (contact_sim_ros/kernel_cache.py; make
        venv does it), so that the first step of a new process loads them instead of compiling for 15-60 s, and
        build the compiled C++ modules (a failed build: a warning, exit 0, the Python path; --require-native: 1)

Exit status of ``run``: 0 when every step succeeded, 1 when a step failed (solver failure or divergence: the
run stops there and says ``FAILED: the run diverged|failed at t = ...``), 2 for invalid arguments or input
files (checked before the run: --duration > 0, 0 < --time-step <= MAX_TIME_STEP, -o values valid YAML, the
--log directory exists and is writable; it is not created).
"""

from __future__ import annotations

import _signal  # the interpreter's built-in signal module (loaded at start-up: importing it takes no time)
import os
import sys

INTERRUPTED_EXIT = 130        # exit status of a Ctrl-C, as a shell gives for SIGINT


def _interrupted_line(argv) -> str:
    """The documented line of a Ctrl-C that ends the command: ``contact-sim campaign: interrupted`` for a campaign
    (docs/scenarios.md; before any trial), ``contact-sim: interrupted`` otherwise."""
    return "contact-sim campaign: interrupted" if list(argv[:1]) == ["campaign"] else "contact-sim: interrupted"


def _interrupted_while_loading(signum, frame):
    """SIGINT while this module's imports load (issue 44: a Ctrl-C then printed Python's KeyboardInterrupt
    traceback): nothing is under way yet, so say the line and exit 130 at once."""
    os.write(2, (_interrupted_line(sys.argv[1:]) + "\n").encode())
    os._exit(INTERRUPTED_EXIT)


# As the program's entry (the console script contact-sim, python -m contact_sim_ros.cli; not when a program imports
# this module) a Ctrl-C from here until main() runs (numpy, the simulator: ~0.5 s) ends the command with the line
# and 130; main() catches one after. Not where SIGINT is ignored (a background job inherits SIG_IGN).
# (_signal, not signal: importing signal.py takes milliseconds in which a Ctrl-C still gave the traceback)
_LOADING = ((__name__ == "__main__" or os.path.basename(sys.argv[0] if sys.argv else "").startswith("contact-sim"))
            and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler)
if _LOADING:
    _signal.signal(_signal.SIGINT, _interrupted_while_loading)

import argparse  # noqa: E402  (below the SIGINT handler of the loading)
import math  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np

from . import kernel_cache
from .cameras.frame_writer import FrameWriter
from .engines.registry import engine_class, engine_names
from .errors import ConfigError, ContactSimError
from .kernel_cache import cold_start_note
from .sim.default_gains import DefaultGainsWarning, describe_default_gains, describe_passive_joints
from .sim.simulator import MAX_TIME_STEP, Simulator
from .viewer.run_controls import pace, publish_if_due, serve_until_interrupted, viewer_controls
from .viewer.scene_viewer import ViewerProcess
from .yaml_files import parse_yaml

if _LOADING and _signal.getsignal(_signal.SIGINT) is _interrupted_while_loading:
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)       # main() catches a KeyboardInterrupt from here


def _parse_option(text: str):
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"engine option {text!r} must be key=value")
    key, value = text.split("=", 1)
    try:
        return key, parse_yaml(value, f"engine option {key!r}")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _check_seconds(value, name: str, maximum: float | None = None) -> float:
    """``value`` as a finite number of seconds > 0 (and <= ``maximum``); ConfigError naming ``name``."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    if not (math.isfinite(x) and x > 0.0 and (maximum is None or x <= maximum)):
        bound = f" and <= {maximum:g}" if maximum is not None else ""
        raise ConfigError(f"{name} must be a finite number of seconds > 0{bound}, got {value!r}")
    return x


def _argument(check):
    """An argparse ``type`` from a checker raising ConfigError (argparse prints 'argument X: message', exit 2)."""
    def parse(text: str):
        try:
            return check(text)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def _check_log_path(path: str) -> str:
    """The --log file must be writable BEFORE the run (a missing folder is an error, not created: a typo
    should not silently make directories, and the results of a long run must not be lost at its end)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ConfigError(f"{path!r} is a directory; give a file name (.npz)")
    if not os.path.isdir(folder):
        raise ConfigError(f"directory {folder!r} does not exist (create it first)")
    if not os.access(folder, os.W_OK):
        raise ConfigError(f"directory {folder!r} is not writable")
    return path


def _check_real_time_factor(value) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    if not (math.isfinite(x) and x >= 0.0):
        raise ConfigError(f"real-time factor must be a finite number >= 0 (0: as fast as possible), got {value!r}")
    return x


def run_scene(scene, engine: str, time_step: float, duration: float, log_path: str | None = None,
              engine_options: dict | None = None, out=None, progress: bool = True, viewer_port: int | None = None,
              real_time_factor: float = 0.0, start_paused: bool = False, wait_after_run: bool = False,
              cameras=(), frames_dir: str | None = None) -> dict:
    """Run a scene headless (or with the browser viewer on ``viewer_port``). ``real_time_factor`` > 0 paces
    the run to that multiple of the wall clock (0: as fast as possible). ``start_paused`` (with the viewer):
    wait for the viewer's Resume button before the first step. ``wait_after_run`` (with the viewer): after the
    run (and its log) keep serving the page, showing the final state, until Ctrl-C or SIGTERM (the command's
    default; ``--exit-after-run`` turns it off). ``cameras``: names of the scene's cameras whose images are
    written as PNG files into ``frames_dir`` (cameras/frame_writer.py; default ``frames/``). Returns a summary dict (steps, wall time, real-time factor, failures, frames written)."""
    if start_paused and viewer_port is None:
        raise ConfigError("start_paused needs the viewer (its Resume button starts the run)")
    duration = _check_seconds(duration, "duration")
    time_step = _check_seconds(time_step, "time_step", MAX_TIME_STEP)
    real_time_factor = _check_real_time_factor(real_time_factor)
    if log_path:
        _check_log_path(log_path)
    out = out or sys.stdout
    with warnings.catch_warnings():              # printed below
        warnings.simplefilter("ignore", DefaultGainsWarning)
        sim = Simulator(scene, engine=engine, time_step=time_step, engine_options=engine_options)
    robots = ", ".join(r.name for r in sim.scene.robots)
    drives = (describe_default_gains(sim.default_gains, robots, sim.passive_joints)
              or describe_passive_joints(sim.passive_joints))
    if drives:
        print(("warning: " if sim.default_gains else "") + drives, file=out, flush=True)
    note = cold_start_note(engine)
    if note:
        print(note, file=out, flush=True)
    frames = None
    if cameras:
        frames_dir = frames_dir or "frames"
        frames = FrameWriter(sim, cameras, frames_dir)
        print(f"cameras {', '.join(frames.every)}: frames into {frames_dir}/<camera>/ ({frames.renderer.description})",
              file=out, flush=True)
    viewer = None
    if viewer_port is not None:
        viewer = ViewerProcess(sim.model, port=viewer_port, objects=sim.scene.objects)
        print(f"viewer: {viewer.url}", file=out, flush=True)
        viewer.set_paused(start_paused)
        viewer.publish_simulator(sim)
    n_steps = int(round(duration / time_step))
    log = _Log(sim, n_steps) if log_path else None
    failures, substeps, failure = 0, 0, ""
    start = last_print = time.perf_counter()
    pace_origin = start                     # wall time at which sim time 0 is due (moved by pause and reset)
    frame_clock = (start, sim.t)            # (wall, sim time) at the last viewer frame: the shown real-time factor
    print(f"scene {sim.scene.source}: engine {engine}, dt = {time_step:g} s, {duration:g} s "
          f"({n_steps} steps), nq = {sim.model.nq}, nv = {sim.model.nv}", file=out)
    if start_paused:
        print(f"  paused at t = {sim.t:.3f} s: press Resume in the viewer", file=out, flush=True)
        pace_origin = viewer_controls(viewer, sim, out, pace_origin, real_time_factor, paused=True)
    for k in range(n_steps):
        if viewer is not None:
            pace_origin = viewer_controls(viewer, sim, out, pace_origin, real_time_factor)
        pace(sim.t, pace_origin, real_time_factor)
        report = sim.step()
        if not report.ok:
            failures += 1
            failure = report.message
            print(f"  step failed: {report.message}", file=out)
            break
        substeps += report.substeps > 1
        if log:
            log.record(sim)
        if frames is not None:
            frames.after_step(sim)
        now = time.perf_counter()
        if viewer is not None:
            frame_clock = publish_if_due(viewer, sim, frame_clock, now)
        if progress and (now - last_print > 1.0 or k == n_steps - 1):
            last_print = now
            print(f"  t = {sim.t:8.3f} s  {100.0 * (k + 1) / n_steps:5.1f} %  real-time factor "
                  f"{sim.t / (now - start):7.2f}  contacts {sim.contacts.size if sim.contacts else 0}",
                  file=out, flush=True)
    if frames is not None:
        frames.close()
    wall = time.perf_counter() - start
    summary = {"steps": sim.step_count, "sim_time": sim.t, "wall_time": wall,
               "real_time_factor": sim.t / wall if wall > 0 else float("inf"),
               "failures": failures, "substepped_steps": substeps, "failure": failure,
               "frames": dict(frames.written) if frames is not None else {}}
    print(f"done: {summary['steps']} steps, sim time {sim.t:.3f} s in {wall:.3f} s wall: real-time factor "
          f"{summary['real_time_factor']:.2f}; sub-stepped steps {substeps}; failures {failures}", file=out)
    if failures:
        kind = "diverged" if "diverged" in failure else "failed"
        print(f"FAILED: the run {kind} at t = {sim.t:.3f} s of {duration:g} s (the state before the failed step "
              f"is kept): {failure}", file=out)
    if frames is not None:
        print(f"frames written: {', '.join(f'{n} {k}' for n, k in frames.written.items())}"
              + (f"; render errors {len(frames.render_errors)}: {frames.render_errors[0]}"
                 if frames.render_errors else ""), file=out)
    if log:
        log.save(log_path)
        print(f"log written to {log_path} (numpy .npz: t, q, v, contact_* arrays)", file=out)
    if viewer is not None:
        try:
            if wait_after_run:
                serve_until_interrupted(viewer, sim, out, summary["real_time_factor"])
        finally:
            viewer.close()
    return summary


class _Log:
    """Time, q, v and per-contact points/normals/impulses of every step; saved as one .npz."""

    def __init__(self, sim, n_steps):
        self.t = np.zeros(n_steps)
        self.q = np.zeros((n_steps, sim.model.nq))
        self.v = np.zeros((n_steps, sim.model.nv))
        self.k = 0
        self.contacts = {"step": [], "geometry_a": [], "geometry_b": [], "point": [], "normal": [],
                         "signed_distance": [], "impulse": []}
        self.geometry_names = np.array(sim.model.geometry_names)
        self.joint_names = np.array(sim.model.joint_names)

    def record(self, sim):
        k = self.k
        self.t[k], self.q[k], self.v[k] = sim.t, sim.q, sim.v
        c = sim.contacts
        if c is not None and c.size:
            n = c.size
            self.contacts["step"].append(np.full(n, k))
            self.contacts["geometry_a"].append(c.geometry_a.copy())
            self.contacts["geometry_b"].append(c.geometry_b.copy())
            self.contacts["point"].append(c.point.copy())
            self.contacts["normal"].append(c.normal.copy())
            self.contacts["signed_distance"].append(c.signed_distance.copy())
            self.contacts["impulse"].append(sim.last_result.contact_impulse.copy())
        self.k += 1

    def save(self, path):
        k = self.k
        shapes = {"step": (0,), "geometry_a": (0,), "geometry_b": (0,), "point": (0, 3), "normal": (0, 3),
                  "signed_distance": (0,), "impulse": (0, 3)}
        arrays = {f"contact_{key}": (np.concatenate(v) if v else np.zeros(shapes[key]))
                  for key, v in self.contacts.items()}
        np.savez_compressed(path, t=self.t[:k], q=self.q[:k], v=self.v[:k], geometry_names=self.geometry_names,
                            joint_names=self.joint_names, **arrays)


def main(argv=None) -> int:
    """The console entry point: the subcommand's exit status; a Ctrl-C (KeyboardInterrupt) not handled by the
    subcommand ends it with ``contact-sim[ campaign]: interrupted`` and 130, no traceback."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print(_interrupted_line(argv), file=sys.stderr, flush=True)
        return INTERRUPTED_EXIT


def _main(argv) -> int:
    parser = argparse.ArgumentParser(prog="contact-sim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a scene headless")
    run.add_argument("scene", help="scene YAML file (or a name under scenes/)")
    run.add_argument("--engine", default="tamsi", help="contact engine (see `contact-sim engines`)")
    run.add_argument("--time-step", type=_argument(lambda x: _check_seconds(x, "time step", MAX_TIME_STEP)),
                     default=1e-3, help=f"s, in (0, {MAX_TIME_STEP:g}]")
    run.add_argument("--duration", type=_argument(lambda x: _check_seconds(x, "duration")), default=2.0,
                     help="s of simulated time, > 0")
    run.add_argument("--log", type=_argument(_check_log_path), default=None,
                     help="write a .npz log (t, q, v, contacts); its directory must exist (checked before the run)")
    run.add_argument("--camera", action="append", default=[], metavar="NAME",
                     help="write the images of the scene's camera NAME as PNG files (repeatable; color, 16-bit "
                          "depth in mm, 16-bit labels, frames.csv; docs/cameras.md)")
    run.add_argument("--frames-dir", default=None, help="with --camera: the folder of the frames (default: frames/)")
    run.add_argument("--viewer", action="store_true", help="serve the live browser view (viser)")
    run.add_argument("--viewer-port", type=int, default=8080)
    run.add_argument("--paused", action="store_true", help="with --viewer: wait for the viewer's Resume button")
    run.add_argument("--exit-after-run", "--no-wait", dest="exit_after_run", action="store_true",
                     help="with --viewer: exit when the run ends (default: keep serving the page until Ctrl-C)")
    run.add_argument("--real-time-factor", type=_argument(_check_real_time_factor), default=None,
                     help="pace to this multiple of the wall clock (default: 1 with --viewer, else as fast as "
                          "possible)")
    run.add_argument("-o", "--engine-option", type=_parse_option, action="append", default=[],
                     help="engine option key=value (repeatable)")
    sub.add_parser("engines", help="list the registered engines")
    kernels = sub.add_parser("compile-kernels", help="compile the engines' kernels into the shared cache "
                             "(done by make venv; after a colcon build: ros2 run contact_sim_ros contact-sim "
                             "compile-kernels)")
    kernels.add_argument("--engines", nargs="*", help="only these engines (default: every engine with kernels)")
    kernels.add_argument("--status", action="store_true",
                         help="only say which kernel modules are cached (exit 1 when some are not)")
    kernels.add_argument("--require-native", action="store_true",
                         help="exit 1 when a compiled C++ module cannot be built (default: a warning naming the "
                              "compiler's error, exit 0, and the steps take the Python reference path)")
    sub.add_parser("node", help="run the ROS 2 node (flags: see contact_sim_ros.ros.sim_node)", add_help=False)
    sub.add_parser("campaign", help="randomized grasp-validation campaign on Ray; report, compare with real trials "
                   "(contact-sim campaign -h)", add_help=False)
    sub.add_parser("replay", help="replay a robot's rosbag2 in the simulation: joint and wrench residuals "
                   "(contact-sim replay -h)", add_help=False)
    sub.add_parser("bag-repair", help="recover a killed recording's rosbag2 MCAP directory (contact-sim bag-repair "
                   "-h)", add_help=False)
    # the subcommands' own modules are imported when they run: the node and replay import rclpy, campaign and
    # compare the in-process link and Ray's driver code, bag-repair rosbags and mcap; `contact-sim run` needs none
    # of them
    if argv and argv[0] == "bag-repair":
        from .bag_files import main as repair_main
        return repair_main(argv[1:])
    if argv and argv[0] == "node":
        from .ros.sim_node import main as node_main
        return node_main(argv[1:]) or 0
    if argv[:2] == ["campaign", "compare"]:
        from .scenarios.compare import main as compare_main
        return compare_main(argv[2:])
    if argv and argv[0] == "campaign":
        from .scenarios import campaign_supervisor     # light: a campaign runs in a child it supervises (Ctrl-C)
        if campaign_supervisor.supervised(argv[1:]):
            return campaign_supervisor.run(argv[1:])
        from .scenarios.campaign import main as campaign_main
        return campaign_main(argv[1:])
    if argv and argv[0] == "replay":
        from .scenarios.replay import main as replay_main
        return replay_main(argv[1:])
    args = parser.parse_args(argv)
    try:
        if args.command == "engines":
            for name in engine_names():
                print(f"{name:20s} {engine_class(name).description}")
            return 0
        if args.command == "compile-kernels":
            return kernel_cache.main((["--status"] if args.status else [])
                                     + (["--require-native"] if args.require_native else [])
                                     + (["--engines", *args.engines] if args.engines else []))
        if args.paused and not args.viewer:
            parser.error("--paused needs --viewer (its Resume button starts the run)")
        rtf = args.real_time_factor if args.real_time_factor is not None else (1.0 if args.viewer else 0.0)
        summary = run_scene(args.scene, args.engine, args.time_step, args.duration, args.log,
                            dict(args.engine_option), viewer_port=args.viewer_port if args.viewer else None,
                            real_time_factor=rtf, start_paused=args.paused,
                            wait_after_run=args.viewer and not args.exit_after_run, cameras=args.camera,
                            frames_dir=args.frames_dir)
        return 0 if summary["failures"] == 0 else 1
    except ContactSimError as exc:
        print(f"contact-sim: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:                  # e.g. the log could not be written after all (disk full)
        print(f"contact-sim: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
