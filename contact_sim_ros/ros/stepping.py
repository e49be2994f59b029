"""The fixed-rate stepping loop that owns the Simulator (no rclpy: ROS callbacks talk to it only through
the thread-safe :class:`CommandBuffer` and the request methods of :class:`SteppingLoop`).

Pacing: with real_time_factor r > 0 the loop keeps absolute deadlines on the monotonic clock,
``deadline_k = deadline_0 + k * dt / r``, and sleeps until the next one; a step that ends after its deadline
counts as an overrun; if the loop falls more than ``max_lag_s`` behind, the deadlines are re-anchored to
now (time is lost rather than caught up in one long burst). With r = 0 it steps as fast as possible.

Failure paths (docs/ros_interface.md, "When things go wrong"): a failed step (the Simulator already retried it
with 2, 4 ... 16 sub-steps) keeps the state and publishes nothing; ``max_failed_steps`` consecutive failed steps
call ``on_failure`` (the node logs the cause) and then pause the loop with a reason (``pause_reason``), so the
cause is in the log before the pause shows anywhere (diagnostics, ~/pause); ``~/reset`` recovers. While paused, the
hooks marked ``while_paused`` (joint states) are republished every ``paused_publish_period`` s of wall time with
the frozen state. An exception escaping the loop ends the thread and calls ``on_error`` (the node exits).
Position targets are rate-limited to the joints' velocity limits (``_limit_rates``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..sim.gravity_feed_forward import GravityFeedForward
from .command_validation import REJECTION_KINDS, JointCommand
from .ros2_control.hardware import EFFORT, POSITION, VELOCITY, JointCommandInterfaces


# steps one ~/step, StepSimulation or SimulateSteps request may ask for: 1e6 s of sim time at 1 ms, days of wall
# time; more is refused with a reason (a uint64 -1 from a C++ client is 2^64 - 1). ``run_steps``'s wait is bounded
# by threading.TIMEOUT_MAX whatever the count (a 1e12-step wait timeout overflowed: issue 31, defect 3)
MAX_STEPS_PER_REQUEST = 10 ** 9


def step_count_problem(n) -> str:
    """'' if ``n`` is a step count one request may ask for (an integer in [0, MAX_STEPS_PER_REQUEST]), else why
    not (for the request's answer)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        return f"the step count must be an integer, got {n!r}"
    if n < 0:
        return f"the step count must be >= 0, got {n}"
    if n > MAX_STEPS_PER_REQUEST:
        return (f"{n} steps exceed the bound of {MAX_STEPS_PER_REQUEST} steps per request (a -1 sent as an "
                f"unsigned integer?): ask for fewer, or resume the simulation")
    return ""


def step_wait_timeout(n: int, per_step_s: float = 1e-2, minimum_s: float = 30.0) -> float:
    """Seconds of wall time a request for ``n`` steps waits at most: ``per_step_s`` per step, at least
    ``minimum_s``, at most threading.TIMEOUT_MAX (a larger timeout raises OverflowError in Condition.wait)."""
    return min(max(minimum_s, per_step_s * float(n)), threading.TIMEOUT_MAX)


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
    """``fn(sim)`` is called from the stepping thread after every ``every`` steps (and once when idle). A ``fn``
    that returns ``False`` published nothing (e.g. a rate-limited viewer that was not due): the state still
    counts as unpublished, so the loop publishes it on pause."""

    name: str
    every: int
    fn: Callable
    last: int = -1      # loop step counter at the last publication (-1: the current state is not published)
    while_paused: bool = False   # republished every paused_publish_period s of wall time while paused


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
    pause_reason: str = ""               # why the loop paused itself ("" = not paused by a failure)
    consecutive_failures: int = 0
    # window values
    real_time_factor: float = float("nan")
    step_time_mean_ms: float = float("nan")
    step_time_max_ms: float = float("nan")
    period_jitter_ms: float = float("nan")   # std of (period - dt / r) between step starts
    period_max_dev_ms: float = float("nan")  # max |period - dt / r|
    cpu_percent: float = float("nan")        # process CPU time / wall time over the window
    step_cpu_mean_ms: float = float("nan")   # the stepping thread's CPU time per step (its publications included):
    #                                          what sets the real-time factor on a free core, whatever the load
    window_steps: int = 0
    window_overruns: int = 0
    window_failures: int = 0


OK, WARN, ERROR = 0, 1, 2    # diagnostic_msgs/DiagnosticStatus levels


def loop_status(s: LoopStats, target_real_time_factor: float, error: BaseException | None = None,
                window_s: float = 1.0) -> tuple[int, str]:
    """(level, message) of the simulation's diagnostic status from a closed window of ``stats()``:
    ERROR if the stepping thread died, if the loop paused itself after failed steps, or if a step failed in
    the window; WARN "starting: compiling kernels" until the first step completes, "stalled" when no step
    completed in the window while not paused, a real-time factor below 95 % of the target, publication errors;
    OK "running" (steps completed) or "paused"."""
    level, msg = OK, "running"
    if s.paused:
        msg = "paused"
    elif s.steps == 0:
        level, msg = WARN, ("starting: compiling kernels (the first step of a fresh process compiles the numba "
                            "kernels; no state is published until it completes)")
    elif s.window_steps == 0:
        level, msg = WARN, f"stalled: no step completed in the last {window_s:.3g} s (sim time {s.sim_time:.6f} s)"
    elif target_real_time_factor > 0 and s.real_time_factor < 0.95 * target_real_time_factor:
        level, msg = WARN, f"real-time factor {s.real_time_factor:.2f} below {target_real_time_factor:g}"
    if s.window_failures:
        level, msg = ERROR, f"{s.window_failures} solver failure(s): {s.last_failure}"
    if s.paused and s.pause_reason:
        level, msg = ERROR, f"paused by a failure (~/reset recovers): {s.pause_reason}"
    if s.publish_errors and level == OK:
        level, msg = WARN, f"publication errors: {s.last_publish_error}"
    if error is not None:
        level, msg = ERROR, f"stepping stopped: {error!r}"
    return level, msg


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
        # g(q) of the actuated joints on the robots alone (sim/gravity_feed_forward.py); None: nothing to hold
        self._gravity = GravityFeedForward.of(sim.model) if self.gravity_compensation else None
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
        self._cpu_clock = None         # the stepping thread's CPU-time clock (start)
        self._thread_cpu0 = float("nan")
        self._calls: list = []         # [fn, result, exception, done] run between two steps (request_call)
        self._stats = LoopStats(paused=self._paused)
        self._stats_lock = threading.Lock()
        self._win = _Window()
        self.error: BaseException | None = None
        self.max_failed_steps = 10          # consecutive failed steps (each after all sub-step levels) -> pause
        self.paused_publish_period = 0.1    # s of wall time between republications of the frozen state
        self.on_failure: Callable | None = None   # fn(report, gave_up: bool), stepping thread, every failed step
        self.on_error: Callable | None = None     # fn(exc), stepping thread, when an exception ends the loop
        self._failures = 0
        self._failure_paused = False
        self._single_done = 0          # steps executed for ~/step requests
        self._in_single = False
        self._preempt_gen = 0          # incremented when pause/reset/a failure cancels pending ~/step steps
        self._preempt_reason = ""
        # rate limit of position targets: |q_sent - q_sent_prev| <= v_max * dt per step
        self.ramp_acceleration_time = 0.25   # s to reach the profile's speed on a jump
        self.ramp_speed_fraction = 0.95      # of the velocity limit: room for the PD's overshoot (a few %)
        v_max = np.asarray(sim.model.velocity_limit, dtype=float)
        v_max = np.where(np.isfinite(v_max) & (v_max > 0), v_max, np.inf)
        self._dq_max = v_max * self.dt
        self._v_max = self.ramp_speed_fraction * v_max
        a_max = self._v_max / self.ramp_acceleration_time
        self._two_a, self._a_dt = 2.0 * a_max, a_max * self.dt
        self._v_sent = np.zeros(len(self.joint_names))
        self._lo = np.zeros(len(self.joint_names))
        self._dq = np.zeros(len(self.joint_names))
        self._v_ramp = np.zeros(len(self.joint_names))
        self._work = np.zeros(len(self.joint_names))
        self._pos = np.zeros(len(self.joint_names), dtype=bool)
        self._cmd_position = np.zeros(len(self.joint_names), dtype=bool)    # joints handed over in position mode
        self._cmd_velocity = np.zeros(len(self.joint_names), dtype=bool)    # ... in velocity mode
        self._was_pos = np.ones(len(self.joint_names), dtype=bool)   # position mode at the last rate limiting
        self._was_all_pos = True                                      # ... of every joint
        self._not_pos = np.zeros(len(self.joint_names), dtype=bool)
        self._clip = np.zeros(len(self.joint_names), dtype=bool)
        self._ramping = False

    # ------------------------------------------------------------------ control (any thread)

    def start(self) -> None:
        self._running = True
        self._thread = threading.Thread(target=self._run_guarded, name="contact_sim_stepping", daemon=True)
        self._thread.start()
        try:                        # its CPU clock, read by stats() from the diagnostics thread (no per-step cost)
            self._cpu_clock = time.pthread_getcpuclockid(self._thread.ident)
        except (AttributeError, OSError):
            self._cpu_clock = None
        self._thread_cpu0 = self._stepping_cpu()

    def _stepping_cpu(self) -> float:
        """CPU seconds the stepping thread has used (nan if unknown or ended)."""
        try:
            return time.clock_gettime(self._cpu_clock) if self._cpu_clock is not None else float("nan")
        except OSError:
            return float("nan")

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

    @property
    def pause_reason(self) -> str:
        """Why the loop paused itself after failed steps ("" if it did not)."""
        return self._stats.pause_reason

    def set_paused(self, paused: bool, reason: str = "") -> None:
        """Pause or resume; either cancels the steps of pending ``~/step`` requests (they answer at once with
        the number of steps that ran). ``reason``: the loop paused itself (a failure)."""
        with self._cv:
            self._paused = bool(paused)
            self._failure_paused = bool(paused and reason)
            self._resync = True
            self._idle_published = False
            self._failures = 0
            self._cancel_steps(reason or ("~/pause" if paused else "resumed"))
            self._cv.notify_all()
        with self._stats_lock:
            self._stats.paused = self._paused
            self._stats.pause_reason = reason if paused else ""

    def _cancel_steps(self, why: str) -> None:
        """(with self._cv held) Drop the pending steps of ~/step requests."""
        if self._pending_steps:
            self._pending_steps = 0
            self._preempt_gen += 1
            self._preempt_reason = why

    def run_steps(self, n: int, timeout: float = 30.0) -> tuple[int, str]:
        """While paused, execute n steps as fast as possible; returns (steps that ran, "" or why fewer ran:
        preempted by ~/pause or ~/reset, the loop paused itself after failures, timeout, not running, a count
        beyond MAX_STEPS_PER_REQUEST)."""
        n = int(n)
        why = step_count_problem(n)
        if why:
            return 0, why
        timeout = min(float(timeout), threading.TIMEOUT_MAX)
        with self._cv:
            if not self._running:
                return 0, "the stepping thread is not running"
            base = self._single_done + self._pending_steps
            gen = self._preempt_gen
            self._pending_steps += n
            self._idle_published = False
            self._cv.notify_all()

            def done():
                return min(max(self._single_done - base, 0), n)
            self._cv.wait_for(lambda: done() >= n or not self._running or self._preempt_gen != gen, timeout)
            if done() >= n:
                return n, ""
            if self._preempt_gen != gen:
                self._cv.wait_for(lambda: not self._in_single, 0.05)   # the step in flight counts
                return done(), f"preempted by {self._preempt_reason}"
            if not self._running:
                return done(), "the stepping thread stopped"
            ran = done()
            self._pending_steps = max(self._pending_steps - (n - ran), 0)
            return ran, f"timed out after {timeout:g} s"

    def request_steps(self, n: int, timeout: float = 30.0) -> bool:
        """While paused, execute exactly n steps (as fast as possible); blocks until done or timeout (s)."""
        return self.run_steps(n, timeout)[0] >= int(n)

    def request_reset(self, timeout: float = 10.0) -> bool:
        """Back to the initial state (time 0, initial positions held, trajectories dropped); cancels pending
        ~/step steps, and resumes a loop that paused itself after failures."""
        with self._cv:
            if not self._running:
                return False
            target = self._resets_done + 1
            self._reset_requested += 1
            self._cancel_steps("~/reset")
            self._cv.notify_all()
            return self._cv.wait_for(lambda: self._resets_done >= target or not self._running, timeout) \
                and self._resets_done >= target

    @property
    def steps_done(self) -> int:
        """Steps executed since start (monotonic, survives reset)."""
        return self._steps_done

    def request_call(self, fn, timeout: float = 30.0, publish: bool = False):
        """Run ``fn()`` on the stepping thread between two steps (also while paused; directly if the thread does
        not run) and return its result; its exception is raised here. TimeoutError if it did not run in time.
        ``publish``: fn changed the state; every hook publishes it (also while paused)."""
        if publish:
            inner = fn

            def fn():
                out = inner()
                for hook in self.hooks:
                    hook.last = -1
                self._idle_published = False
                return out
        if self._thread is None or not self._thread.is_alive():
            return fn()
        call = [fn, None, None, False]
        with self._cv:
            self._calls.append(call)
            self._cv.notify_all()
            self._cv.wait_for(lambda: call[3] or not self._running, timeout)
            if not call[3]:
                if call in self._calls:
                    self._calls.remove(call)
                raise TimeoutError(f"the stepping thread did not take the request within {timeout:g} s")
        if call[2] is not None:
            raise call[2]
        return call[1]

    def replace_simulator(self, sim, then=None, timeout: float = 30.0) -> None:
        """Swap in ``sim``, a Simulator of the same robot with another model (a free object spawned or deleted),
        between two steps: it takes over the current state (``Simulator.carry_over``: robot, remaining objects,
        time, targets), the per-model scratch is rebuilt, ``then(sim)`` runs on the stepping thread (the node's
        model-dependent tables) and every hook publishes the new state. The command buffer, the command
        interfaces and the controllers stay: commands in flight are kept."""
        if tuple(sim.model.joint_names) != self.joint_names:
            raise ValueError("replace_simulator: the robot's actuated joints differ")

        def swap():
            sim.carry_over(self.sim)
            self.sim = sim
            self._gravity = GravityFeedForward.of(sim.model) if self.gravity_compensation else None
            self.v_prev = np.array(sim.v, dtype=float)
            if then is not None:
                then(sim)
        self.request_call(swap, timeout, publish=True)

    def _run_calls(self):
        """(stepping thread, with self._cv held) The requests of request_call, in order."""
        while self._calls:
            call = self._calls.pop(0)
            try:
                call[1] = call[0]()
            except Exception as exc:   # noqa: BLE001 - raised in the caller's thread
                call[2] = exc
            call[3] = True
        self._cv.notify_all()

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
                thread_cpu = self._stepping_cpu()
                if w.n > 0 and wall > 0:
                    s.real_time_factor = w.sim_dt / wall
                    s.step_time_mean_ms = 1e3 * w.step_sum / w.n
                    s.step_cpu_mean_ms = 1e3 * (thread_cpu - self._thread_cpu0) / w.n
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
                self._thread_cpu0 = thread_cpu
            copy = LoopStats(**{**s.__dict__, "rejected": dict(s.rejected)})
        return copy

    # ------------------------------------------------------------------ stepping thread

    def _run_guarded(self):
        try:
            self._run()
        except BaseException as exc:   # the thread ends; on_error: the node exits with the cause
            self.error = exc
            with self._cv:
                self._running = False
                self._cv.notify_all()
            if self.on_error is not None:
                self.on_error(exc)

    def _call(self, hook):
        """Run one publish hook; an exception is counted (diagnostics) instead of stopping the simulation. A hook
        that returns ``False`` did not publish this state (``last`` unchanged)."""
        try:
            if hook.fn(self.sim) is False:
                return
        except Exception as exc:   # noqa: BLE001 - a publication problem must not stop the stepping
            with self._stats_lock:
                self._stats.publish_errors += 1
                self._stats.last_publish_error = f"{hook.name}: {exc!r}"
        hook.last = self._steps_done

    # ------------------------------------------------------------------ synchronous use (no thread)

    def step_now(self):
        """One step on the caller's thread (the loop's thread must not run): commands and controllers applied,
        the velocity before the step kept for the sensors, as the stepping thread does. Returns the StepReport."""
        self._apply_commands()
        np.copyto(self.v_prev, self.sim.v)
        return self.sim.step()

    def detach_control(self) -> None:
        """Drop the publish hooks and the controller manager (the world ends: they refer back to this loop)."""
        self.hooks.clear()
        self.control = None

    def publish_now(self):
        """Every publish hook publishes the current state (as the paused loop does after ~/step)."""
        for hook in self.hooks:
            hook.last = -1
        self._publish_all()

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
        keep_alive = [h for h in self.hooks if h.while_paused]
        while True:
            with self._cv:
                next_publish = time.monotonic() + self.paused_publish_period
                while (self._running and self._paused and self._pending_steps == 0
                       and self._reset_requested == 0 and not self._calls):
                    if not self._idle_published:
                        self._idle_published = True
                        self._cv.release()
                        try:
                            self._publish_all()
                        finally:
                            self._cv.acquire()
                        continue
                    now = time.monotonic()
                    if now >= next_publish:      # the frozen state keeps flowing (same stamp)
                        next_publish = now + self.paused_publish_period
                        self._cv.release()
                        try:
                            for hook in keep_alive:
                                self._call(hook)
                        finally:
                            self._cv.acquire()
                        continue
                    self._cv.wait(next_publish - now)
                    last_start = None
                if not self._running:
                    return
                if self._reset_requested:
                    self._do_reset()
                    self._reset_requested = 0
                    self._resets_done += 1
                    self._idle_published = False
                    self._resync = True
                    self._failures = 0
                    if self._failure_paused:          # ~/reset recovers a loop that paused itself
                        self._paused = self._failure_paused = False
                        with self._stats_lock:
                            self._stats.paused, self._stats.pause_reason = False, ""
                    self._cv.notify_all()
                    continue
                if self._calls:
                    self._run_calls()
                    sim = self.sim
                    continue
                single = self._paused and self._pending_steps > 0
                self._in_single = single
                if self._resync:
                    deadline = time.monotonic()
                    last_start = None
                    self._resync = False
            start = time.monotonic()
            if self.commands.pending or self.control is not None or self._gravity is not None or self._ramping:
                self._apply_commands()
            np.copyto(self.v_prev, sim.v)
            report = sim.step()
            self.last_report = report
            if single:
                with self._cv:
                    if self._pending_steps > 0:
                        self._pending_steps -= 1
                    self._steps_done += 1
                    self._single_done += 1
                    self._in_single = False
                    self._cv.notify_all()
            else:
                self._steps_done += 1
            if report.ok:
                self._failures = 0
                n = sim.step_count
                for hook in self.hooks:
                    if n % hook.every == 0:
                        self._call(hook)
            else:                               # state kept: nothing new to publish
                self._failed(report)
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
                s.consecutive_failures = self._failures
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

    def _failed(self, report) -> None:
        """A step failed after every sub-step level (state kept); ``max_failed_steps`` in a row pause."""
        self._failures += 1
        gave_up = self._failures >= self.max_failed_steps
        if self.on_failure is not None:       # first: the cause is logged before diagnostics can show the pause
            self.on_failure(report, gave_up)
        if gave_up:
            self.set_paused(True, reason=f"{self._failures} consecutive failed steps at t = {report.t:.6f} s: "
                                         f"{report.message}")

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
        self._g = np.zeros(len(self.joint_names))             # g(q) on the actuated joints (N*m or N)
        self._g_dev = np.zeros(len(self.joint_names))         # |g - g_applied|
        self._effort_sent = np.zeros(len(self.joint_names))   # effort + g handed to the simulator
        self._is_effort = np.zeros(len(self.joint_names), dtype=bool)
        self._any_effort = False                              # _is_effort.any(), updated with the modes
        self._q_sent = np.array(hw.position, dtype=float)   # position targets handed to the simulator
        self._ramping = False

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
        applied (Simulator.set_joint_command_arrays)."""
        hw = self.hw
        mode = hw.mode
        effort = hw.effort
        moved = changed or self._ramping
        if moved:
            self._limit_rates()
        if self._gravity is not None:
            g, dev = self._g, self._g_dev      # preallocated: this test runs every step
            self._gravity.compute(self.sim.q, g)
            if changed:                        # the modes change only with a write to the command interfaces
                np.equal(mode, EFFORT, out=self._is_effort)
                self._any_effort = bool(self._is_effort.any())
            if self._any_effort:
                np.copyto(g, 0.0, where=self._is_effort)
            if not moved:                      # the targets stand: hand g over only when it moved enough
                np.subtract(g, self._g_applied, out=dev)
                # max |dev| <= tol: certain when dev.dev <= tol^2 (the usual hold), else checked element-wise
                tol = self.gravity_tolerance
                if dev.dot(dev) <= tol * tol:
                    return
                np.abs(dev, out=dev)
                if np.maximum.reduce(dev, initial=0.0) <= tol:
                    return
            self._g_applied[:] = g
            effort = np.add(effort, g, out=self._effort_sent)
        elif not moved:
            return
        # position mode: target q_sent with the ramp's velocity feed-forward; velocity mode: v_ramp; every joint
        # its effort (feed-forward or alone) - set_joint_targets' semantics, as arrays in joint order
        np.equal(mode, POSITION, out=self._cmd_position)
        np.equal(mode, VELOCITY, out=self._cmd_velocity)
        self.sim.set_joint_command_arrays(self._cmd_position, self._cmd_velocity, self._q_sent, self._v_ramp, effort)

    def _limit_rates(self) -> None:
        """The position targets handed to the simulator follow the commanded ones (``hw.position``) within the
        URDF velocity limits, as a real driver's interpolator does: a target within v_max * dt of the last one
        sent is taken as it is (trajectories below the limit are not delayed); a farther one (a jump) is reached
        on a trapezoidal profile at 95 % of v_max, ``ramp_acceleration_time`` s to reach that speed, with the
        profile's speed as velocity feed-forward (the PD with the presets' gains overshoots a sudden ramp speed
        by 10-20 %, this profile by < 5 %).
        A joint that was in velocity or effort mode, or that a controller holds (``hw.snap``), starts from its
        measured / held position. Allocation-free (preallocated arrays)."""
        hw = self.hw
        pos, clip, work, lo, q_sent, v_sent, dq = (self._pos, self._clip, self._work, self._lo, self._q_sent,
                                                   self._v_sent, self._dq)
        np.equal(hw.mode, POSITION, out=pos)
        # every joint in position mode now and at the last call (the usual case): the mode masks are skipped
        all_pos = bool(pos.all()) and self._was_all_pos
        was_ramping = self._ramping
        if hw.snapped:
            np.copyto(q_sent, hw.position, where=hw.snap)
            np.copyto(v_sent, 0.0, where=hw.snap)
            hw.snap[:] = False
            hw.snapped = False
        if not all_pos:
            # joints in another mode now or at the last call: the next ramp starts where the joint is, at rest
            np.logical_not(pos, out=self._not_pos)
            np.logical_not(self._was_pos, out=clip)
            np.logical_or(clip, self._not_pos, out=clip)
            if clip.any():
                np.copyto(q_sent, self.sim.joint_positions(), where=clip)
                np.copyto(v_sent, 0.0, where=clip)
            np.copyto(self._was_pos, pos)
            self._was_all_pos = bool(pos.all())
        np.subtract(hw.position, q_sent, out=dq)
        np.abs(dq, out=work)
        np.greater(work, self._dq_max, out=clip)          # jumps: on the profile
        if not all_pos:
            np.logical_and(clip, pos, out=clip)
        np.copyto(self._v_ramp, hw.velocity)
        self._ramping = bool(clip.any())
        if self._ramping:
            if not was_ramping:                   # a new jump's profile starts at rest
                v_sent[:] = 0.0
            # speed that still stops at the target: sqrt(2 a |dq|), at most v_max, within a * dt of the last
            np.multiply(work, self._two_a, out=work)
            np.sqrt(work, out=work)
            np.minimum(work, self._v_max, out=work)
            np.copysign(work, dq, out=work)
            np.subtract(v_sent, self._a_dt, out=lo)
            np.maximum(work, lo, out=work)
            np.add(v_sent, self._a_dt, out=lo)
            np.minimum(work, lo, out=work)
            np.multiply(work, self.dt, out=lo)            # the profile's step
            np.copyto(dq, lo, where=clip)
            np.copyto(v_sent, work, where=clip)
            np.copyto(self._v_ramp, work, where=clip)     # feed-forward: the profile's speed
            np.logical_not(clip, out=clip)                # the others: as commanded
            np.divide(dq, self.dt, out=v_sent, where=clip)
        else:
            np.divide(dq, self.dt, out=v_sent)
        np.add(q_sent, dq, out=q_sent)
        if not all_pos:
            np.copyto(v_sent, 0.0, where=self._not_pos)   # no profile state for joints not in position mode
