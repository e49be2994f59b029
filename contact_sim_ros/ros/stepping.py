"""The fixed-rate stepping loop that owns the Simulator (no rclpy: ROS callbacks talk to it only through
the thread-safe :class:`CommandBuffer` and the request methods of :class:`SteppingLoop`).

Pacing: with real_time_factor r > 0 the loop keeps absolute deadlines on the monotonic clock,
``deadline_k = deadline_0 + k * dt / r``, and sleeps until the next one; a step that ends after its deadline
counts as an overrun; if the loop falls more than ``max_lag_s`` behind, the deadlines are re-anchored to
now (time is lost rather than caught up in one long burst). With r = 0 it steps as fast as possible.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .command_validation import REJECTION_KINDS, JointCommand
from .ros2_control.hardware import EFFORT, POSITION, VELOCITY, JointCommandInterfaces


class CommandBuffer:
    """Lock-protected hand-over of validated commands from ROS callbacks to the stepping thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._commands: list[JointCommand] = []
        self.pending = False

    def push_command(self, command: JointCommand) -> None:
        with self._lock:
            self._commands.append(command)
            self.pending = True

    def drain(self) -> list[JointCommand]:
        with self._lock:
            commands = self._commands
            self._commands = []
            self.pending = False
        return commands


@dataclass
class PublishHook:
    """``fn(sim)`` is called from the stepping thread after every ``every`` steps (and once when idle)."""

    name: str
    every: int
    fn: Callable
    last: int = -1      # loop step counter at the last publication (-1: the current state is not published)


@dataclass
class LoopStats:
    """Totals since start and values over the last diagnostics window."""

    steps: int = 0
    sim_time: float = 0.0
    overruns: int = 0
    solver_failures: int = 0
    substepped_steps: int = 0
    last_failure: str = ""
    rejected: dict = field(default_factory=lambda: {k: 0 for k in REJECTION_KINDS})
    clamped: int = 0
    publish_errors: int = 0              # exceptions raised by publish hooks (the loop goes on)
    last_publish_error: str = ""
    paused: bool = False
    # window values
    real_time_factor: float = float("nan")
    step_time_mean_ms: float = float("nan")
    step_time_max_ms: float = float("nan")
    period_jitter_ms: float = float("nan")   # std of (period - dt / r) between step starts
    period_max_dev_ms: float = float("nan")  # max |period - dt / r|
    cpu_percent: float = float("nan")        # process CPU time / wall time over the window
    window_steps: int = 0
    window_overruns: int = 0
    window_failures: int = 0


class _Window:
    """Running sums over one diagnostics window (allocation-free per step)."""

    def __init__(self):
        self.reset(time.monotonic(), 0.0)

    def reset(self, wall: float, sim_t: float):
        self.wall0, self.sim0, self.cpu0 = wall, sim_t, time.process_time()
        self.n = 0
        self.step_sum = self.step_max = 0.0
        self.np = 0
        self.dev_sum = self.dev_sq = self.dev_max = 0.0
        self.overruns = self.failures = 0
        self.sim_dt = 0.0


class SteppingLoop:
    """Owns a Simulator and steps it in a dedicated thread."""

    def __init__(self, sim, real_time_factor: float = 1.0, hooks: list[PublishHook] | None = None,
                 start_paused: bool = False, max_lag_s: float = 0.5, gravity_compensation: bool = True,
                 hardware: JointCommandInterfaces | None = None):
        self.sim = sim
        self.dt = float(sim.time_step)
        self.real_time_factor = float(real_time_factor)
        self.hooks = list(hooks or [])
        self.max_lag_s = float(max_lag_s)
        self.commands = CommandBuffer()
        self.joint_names = tuple(sim.model.joint_names)
        self.v_prev = np.array(sim.v, dtype=float)   # velocity before the last step (for accelerations)
        self.last_report = None
        self.gravity_compensation = bool(gravity_compensation)
        self.gravity_tolerance = 1e-3   # N*m or N
        self._gravity_data = sim.model.pin_model.createData()
        # the robot's command interfaces (ros2_control hardware); controllers write them from ``control``
        self.hw = hardware if hardware is not None else JointCommandInterfaces(self.joint_names)
        self.control = None           # ControllerManager-like: update(sim) -> bool, every, preempt(cmd), reset()
        self._init_targets()
        self._cv = threading.Condition()
        self._running = False
        self._paused = bool(start_paused)
        self._pending_steps = 0
        self._steps_done = 0           # steps executed (monotonic, survives reset)
        self._reset_requested = 0
        self._resets_done = 0
        self._resync = True
        self._idle_published = False
        self._thread: threading.Thread | None = None
        self._stats = LoopStats(paused=self._paused)
        self._stats_lock = threading.Lock()
        self._win = _Window()
        self.error: BaseException | None = None

    # ------------------------------------------------------------------ control (any thread)

    def start(self) -> None:
        self._running = True
        self._thread = threading.Thread(target=self._run_guarded, name="contact_sim_stepping", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cv:
            self._running = False
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        """The stepping thread runs (started, not stopped, not ended by an error)."""
        return self._running

    @property
    def paused(self) -> bool:
        return self._paused

    def set_paused(self, paused: bool) -> None:
        with self._cv:
            self._paused = bool(paused)
            self._resync = True
            self._idle_published = False
            self._cv.notify_all()
        with self._stats_lock:
            self._stats.paused = self._paused

    def request_steps(self, n: int, timeout: float = 30.0) -> bool:
        """While paused, execute exactly n steps (as fast as possible); blocks until done or timeout (s)."""
        with self._cv:
            target = self._steps_done + self._pending_steps + int(n)
            self._pending_steps += int(n)
            self._idle_published = False
            self._cv.notify_all()
            return self._cv.wait_for(lambda: self._steps_done >= target or not self._running, timeout) \
                and self._steps_done >= target

    def request_reset(self, timeout: float = 10.0) -> bool:
        """Back to the initial state (time 0, initial positions held, trajectories dropped)."""
        with self._cv:
            target = self._resets_done + 1
            self._reset_requested += 1
            self._cv.notify_all()
            return self._cv.wait_for(lambda: self._resets_done >= target or not self._running, timeout) \
                and self._resets_done >= target

    def count_rejection(self, kind: str) -> None:
        with self._stats_lock:
            self._stats.rejected[kind] = self._stats.rejected.get(kind, 0) + 1

    def count_clamped(self, n: int = 1) -> None:
        with self._stats_lock:
            self._stats.clamped += n

    def stats(self, close_window: bool = True) -> LoopStats:
        """A copy of the statistics; ``close_window`` computes the window values and starts a new window."""
        with self._stats_lock:
            s = self._stats
            w = self._win
            if close_window:
                now = time.monotonic()
                wall = now - w.wall0
                if w.n > 0 and wall > 0:
                    s.real_time_factor = w.sim_dt / wall
                    s.step_time_mean_ms = 1e3 * w.step_sum / w.n
                    s.step_time_max_ms = 1e3 * w.step_max
                    s.cpu_percent = 100.0 * (time.process_time() - w.cpu0) / wall
                else:
                    s.real_time_factor = 0.0
                    s.cpu_percent = 100.0 * (time.process_time() - w.cpu0) / max(wall, 1e-9)
                if w.np > 0:
                    mean = w.dev_sum / w.np
                    s.period_jitter_ms = 1e3 * float(np.sqrt(max(w.dev_sq / w.np - mean * mean, 0.0)))
                    s.period_max_dev_ms = 1e3 * w.dev_max
                s.window_steps, s.window_overruns, s.window_failures = w.n, w.overruns, w.failures
                w.reset(now, 0.0)
            copy = LoopStats(**{**s.__dict__, "rejected": dict(s.rejected)})
        return copy

    # ------------------------------------------------------------------ stepping thread

    def _run_guarded(self):
        try:
            self._run()
        except BaseException as exc:   # surfaced by the node (diagnostics + log); the thread ends
            self.error = exc
            with self._cv:
                self._running = False
                self._cv.notify_all()

    def _call(self, hook):
        """Run one publish hook; an exception is counted (diagnostics) instead of stopping the simulation."""
        try:
            hook.fn(self.sim)
        except Exception as exc:   # noqa: BLE001 - a publication problem must not stop the stepping
            with self._stats_lock:
                self._stats.publish_errors += 1
                self._stats.last_publish_error = f"{hook.name}: {exc!r}"
        hook.last = self._steps_done

    def _publish_all(self):
        """Publish the current state on every hook that has not published it yet (on pause, after reset)."""
        for hook in self.hooks:
            if hook.last != self._steps_done:
                self._call(hook)

    def _run(self):
        sim = self.sim
        period = self.dt / self.real_time_factor if self.real_time_factor > 0 else 0.0
        deadline = time.monotonic()
        last_start = None
        while True:
            with self._cv:
                while (self._running and self._paused and self._pending_steps == 0
                       and self._reset_requested == 0):
                    if not self._idle_published:
                        self._idle_published = True
                        self._cv.release()
                        try:
                            self._publish_all()
                        finally:
                            self._cv.acquire()
                        continue
                    self._cv.wait(0.2)
                    last_start = None
                if not self._running:
                    return
                if self._reset_requested:
                    self._do_reset()
                    self._reset_requested = 0
                    self._resets_done += 1
                    self._idle_published = False
                    self._resync = True
                    self._cv.notify_all()
                    continue
                single = self._paused and self._pending_steps > 0
                if self._resync:
                    deadline = time.monotonic()
                    last_start = None
                    self._resync = False
            start = time.monotonic()
            if self.commands.pending or self.control is not None or self.gravity_compensation:
                self._apply_commands()
            np.copyto(self.v_prev, sim.v)
            report = sim.step()
            self.last_report = report
            if single:
                with self._cv:
                    self._pending_steps -= 1
                    self._steps_done += 1
                    self._cv.notify_all()
            else:
                self._steps_done += 1
            n = sim.step_count
            for hook in self.hooks:
                if n % hook.every == 0:
                    self._call(hook)
            end = time.monotonic()
            overrun = False
            if period > 0 and not single:
                deadline += period
                if end > deadline:
                    overrun = True
                    if end - deadline > self.max_lag_s:
                        deadline = end
            with self._stats_lock:
                s, w = self._stats, self._win
                s.steps += 1
                s.sim_time = report.t
                w.n += 1
                w.sim_dt += self.dt if report.ok else 0.0
                dur = end - start
                w.step_sum += dur
                if dur > w.step_max:
                    w.step_max = dur
                if last_start is not None and period > 0 and not single:
                    dev = (start - last_start) - period
                    w.np += 1
                    w.dev_sum += dev
                    w.dev_sq += dev * dev
                    if abs(dev) > w.dev_max:
                        w.dev_max = abs(dev)
                if overrun:
                    s.overruns += 1
                    w.overruns += 1
                if not report.ok:
                    s.solver_failures += 1
                    w.failures += 1
                    s.last_failure = report.message
                elif report.substeps > 1:
                    s.substepped_steps += 1
            last_start = start if not single else None
            if period > 0 and not single:
                delay = deadline - time.monotonic()
                if delay > 2e-4:   # shorter sleeps cost more in wake-up latency than they wait
                    time.sleep(delay)

    def _do_reset(self):
        for hook in self.hooks:
            hook.last = -1
        self.sim.reset()
        self.commands.drain()
        self._init_targets()
        if self.control is not None:
            self.control.reset(self.sim)
        np.copyto(self.v_prev, self.sim.v)

    # ------------------------------------------------------------------ joint targets

    def _init_targets(self):
        """Every actuated joint holds its current position (the Simulator's state after reset)."""
        hw = self.hw
        hw.hold(np.arange(len(self.joint_names)), self.sim.joint_positions())
        self._g_applied = np.full(len(self.joint_names), np.inf)

    def _apply_commands(self):
        """Write new hardware-level commands (joint_command topic, forward controllers) into the command
        interfaces (latest command per joint wins; a command preempts a controller's trajectory on its joints),
        run the controllers' update when due, and hand the targets to the simulator (with gravity
        compensation g(q) added to the effort of position- and velocity-controlled joints)."""
        hw = self.hw
        if self.commands.pending:
            for c in self.commands.drain():
                hw.write_command(c)
                if self.control is not None:
                    self.control.preempt(c)
        control = self.control
        if control is not None and self.sim.step_count % control.every == 0:
            control.update(self.sim)
        changed = hw.changed
        hw.changed = False
        self._push_targets(changed)

    def _push_targets(self, changed: bool):
        """Hand the targets to the simulator: always after a command or a controller's write; for gravity
        compensation only when g(q) moved by more than ``gravity_tolerance`` (N*m or N) since it was last
        applied (Simulator.set_joint_targets costs ~0.1 ms)."""
        hw = self.hw
        mode = hw.mode
        effort = hw.effort
        if self.gravity_compensation:
            g = self._gravity_torques()
            g[mode == EFFORT] = 0.0
            if not changed and np.max(np.abs(g - self._g_applied)) <= self.gravity_tolerance:
                return
            self._g_applied[:] = g
            effort = effort + g
        elif not changed:
            return
        positions, velocities, efforts = {}, {}, {}
        q_t, v_t = hw.position, hw.velocity
        for i, name in enumerate(self.joint_names):
            m = mode[i]
            if m == POSITION:
                positions[name] = q_t[i]
                velocities[name] = v_t[i]
            elif m == VELOCITY:
                velocities[name] = v_t[i]
            efforts[name] = effort[i]
        self.sim.set_joint_targets(positions=positions, velocities=velocities, efforts=efforts)

    def _gravity_torques(self) -> np.ndarray:
        """Generalized gravity g(q) on the actuated joints (N*m or N) at the current configuration."""
        import pinocchio as pin
        model = self.sim.model
        g = pin.computeGeneralizedGravity(model.pin_model, self._gravity_data, self.sim.q)
        return g[model.joint_v_index]
