"""The fixed-rate stepping loop of the driver (no rclpy): each cycle hands the commands of the transports to the
command interfaces, runs the controllers due (``update(time, period)``), writes the commands to the hardware
System and steps it (system.py: the one seam to the Simulator), then calls the publish hooks due. Transports (the
ROS node in ros/, the in-process link in clients/) talk to it only through the thread-safe
``system.commands`` buffer and the request methods of :class:`SteppingLoop`, and plug in at construction
through a :class:`Transport` (publish hooks, failure reports).

Pacing: with real_time_factor r > 0 the loop keeps absolute deadlines on the monotonic clock,
``deadline_k = deadline_0 + k * dt / r``, and sleeps until the next one; a step that ends after its deadline
counts as an overrun; if the loop falls more than ``max_lag_s`` behind, the deadlines are re-anchored to
now (time is lost rather than caught up in one long burst). With r = 0 it steps as fast as possible.

Failure paths (docs/ros_interface.md, "When things go wrong"): a failed step (the Simulator already retried it
with 2, 4 ... 16 sub-steps) keeps the state and publishes nothing; ``max_failed_steps`` consecutive failed steps
call the transport's ``on_step_failure`` (the node logs the cause) and then pause the loop with a reason
(``pause_reason``), so the cause is in the log before the pause shows anywhere (diagnostics, ~/pause); ``~/reset``
recovers. While paused, the hooks marked ``while_paused`` (joint states) are republished every
``paused_publish_period`` s of wall time with the frozen state. An exception escaping the loop ends the thread and
calls the transport's ``on_error`` (the node exits), unless ``stop()`` was asked first: then it is the shutdown
taking the transport down under a cycle (kept as ``error_after_stop``, not reported).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from .command_validation import REJECTION_KINDS
from .system import CommandBuffer, SimulatorSystem
from .thread_priority import SteppingThreadPriority


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


class Transport:
    """What a transport gives the stepping loop, passed at construction: ``hooks`` (PublishHook list: its
    publications of the state), ``on_step_failure(report, gave_up)`` (stepping thread, after every failed step;
    ``gave_up``: the loop pauses next), ``on_error(exc)`` (stepping thread, an exception ended the loop),
    ``on_warning(message)`` (stepping thread, once: e.g. SCHED_FIFO not permitted) and ``before_steps()`` (the
    thread of a step request, before its steps are queued: the transport applies the commands it has received,
    so that in lock-step a command sent before the request is in force from its first step; ros/command_intake.py).
    Without arguments: publishes nothing, reports nothing."""

    def __init__(self, hooks=(), on_step_failure: Callable | None = None, on_error: Callable | None = None,
                 on_warning: Callable | None = None, before_steps: Callable | None = None):
        self.hooks = list(hooks)
        self._on_step_failure, self._on_error, self._on_warning = on_step_failure, on_error, on_warning
        self._before_steps = before_steps

    def drop_hooks(self, name: str) -> None:
        """Stop the publications named ``name`` (call it between two steps: ``SteppingLoop.request_call``; the
        loop takes the change after the call)."""
        self.hooks = [h for h in self.hooks if h.name != name]

    def on_step_failure(self, report, gave_up: bool) -> None:
        if self._on_step_failure is not None:
            self._on_step_failure(report, gave_up)

    def on_error(self, exc: BaseException) -> None:
        if self._on_error is not None:
            self._on_error(exc)

    def on_warning(self, message: str) -> None:
        if self._on_warning is not None:
            self._on_warning(message)

    def before_steps(self) -> None:
        if self._before_steps is not None:
            self._before_steps()


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
    scheduling: str = "normal"               # the stepping thread's scheduling now (thread_priority.py)


class CommandCounters:
    """The commands the transports rejected (by kind, REJECTION_KINDS) or clamped, counted for the loop's
    diagnostics (``SteppingLoop.stats``). Built before the loop and the transports and handed to both (World.build),
    so that a transport counts without a reference to the loop. Thread-safe (the transports count from their
    callback threads)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.rejected = {k: 0 for k in REJECTION_KINDS}
        self.clamped = 0

    def count_rejection(self, kind: str) -> None:
        with self._lock:
            self.rejected[kind] = self.rejected.get(kind, 0) + 1

    def count_clamped(self, n: int = 1) -> None:
        with self._lock:
            self.clamped += n

    def snapshot(self) -> tuple[dict, int]:
        """(rejected by kind, clamped) now (copies)."""
        with self._lock:
            return dict(self.rejected), self.clamped


class LoopLink:
    """What the transports hold of the stepping loop: whether its thread runs (``running``), calls run between two
    steps (:meth:`between_steps`: a controller manager's switch, load and unload) and the hand-over of commands
    (``commands``, the hardware System's CommandBuffer). Built before the loop and the transports and handed to
    both (World.build), as :class:`CommandCounters`: a transport built before the loop (a robot's ports, its
    controllers' topics and actions) holds this and never the loop. The loop keeps its run state here: the
    ``running`` flag, the condition variable it waits on (``cv``) and the queue of calls (``calls``); it never
    refers to the loop."""

    def __init__(self, commands: CommandBuffer | None = None):
        self.commands = commands if commands is not None else CommandBuffer()
        self.cv = threading.Condition()
        self.running = False           # the stepping thread runs (set by the loop: start, stop, an error)
        self.calls: list = []          # [fn, result, exception, done] run between two steps (between_steps)
        self.thread: threading.Thread | None = None     # the stepping thread (set by the loop's start)
        self.ran_directly = False      # a call ran on its caller's thread: the loop reads the System again first

    @property
    def stepping(self) -> bool:
        """The stepping thread is alive (calls wait for it; otherwise they run on the caller's thread)."""
        return self.thread is not None and self.thread.is_alive()

    def between_steps(self, fn, timeout: float = 30.0):
        """Run ``fn()`` on the stepping thread between two steps (also while paused; directly, on this thread, if
        the stepping thread is not alive) and return its result; its exception is raised here. TimeoutError if it
        did not run within ``timeout`` s."""
        if not self.stepping:
            try:
                return fn()
            finally:
                self.ran_directly = True      # the loop reads the System and collects its hooks before using them
        call = [fn, None, None, False]
        with self.cv:
            self.calls.append(call)
            self.cv.notify_all()
            self.cv.wait_for(lambda: call[3] or not self.running, timeout)
            if not call[3]:
                if call in self.calls:
                    self.calls.remove(call)
                raise TimeoutError(f"the stepping thread did not take the request within {timeout:g} s")
        if call[2] is not None:
            raise call[2]
        return call[1]


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


class SteppingControl(Protocol):
    """What a front-end that controls the simulation (ros/simulation_interfaces.py: pause, step, reset, entity
    state) may use of the stepping loop: the state of the run and the requests served between two steps. The
    swap of a rebuilt Simulator is the node's (SimNode.swap_simulator), not the front-end's. SteppingLoop is one."""

    @property
    def sim(self): ...                       # the Simulator now (read it inside ``request_call``)

    @property
    def v_prev(self) -> np.ndarray: ...      # generalized velocities before the last step [m/s, rad/s]

    @property
    def steps_done(self) -> int: ...

    @property
    def running(self) -> bool: ...

    @property
    def paused(self) -> bool: ...

    def set_paused(self, paused: bool, reason: str = "") -> None: ...

    def request_steps(self, n: int, timeout: float = 30.0) -> bool: ...

    def request_reset(self, timeout: float = 10.0) -> bool: ...

    def request_call(self, fn, timeout: float = 30.0, publish: bool = False): ...


class SteppingLoop:
    """Steps a hardware System (system.py) in a dedicated thread, with its controllers (a ControllerManager or
    ControllerManagers: ``cycle(step, time)``, ``preempt(command)``, ``reset()``, ``hooks``; None: commands go to
    the System as they arrive) and a :class:`Transport` (publish hooks, failure reports). ``sim`` is the System's
    Simulator (what publish hooks get). ``thread_priority``: SCHED_FIFO priority of the stepping thread while it
    keeps real time (1..99; 0: normal scheduling; only with real_time_factor > 0: thread_priority.py).
    ``counters``: the transports' rejected / clamped command counts its statistics report (a new one if None)."""

    def __init__(self, system: SimulatorSystem, controllers=None, transport: Transport | None = None,
                 real_time_factor: float = 1.0, start_paused: bool = False, max_lag_s: float = 0.5,
                 thread_priority: int = 0, counters: CommandCounters | None = None, link: LoopLink | None = None):
        self.system = system
        self.counters = counters if counters is not None else CommandCounters()
        self.link = link if link is not None else LoopLink(system.commands)
        if self.link.commands is not system.commands:
            raise ValueError("SteppingLoop: the link's command buffer is not the System's (build the System with "
                             "commands=link.commands)")
        self.priority = SteppingThreadPriority(thread_priority)
        self.dt = system.dt
        self.real_time_factor = float(real_time_factor)
        self.control = controllers
        self.transport = transport if transport is not None else Transport()
        self.hooks: list[PublishHook] = []
        self._collect_hooks()
        self.max_lag_s = float(max_lag_s)
        self.commands = system.commands
        self.joint_names = system.joint_names
        self.last_report = None
        self._cv = self.link.cv        # the run state lives in the link: the transports see it, not the loop
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
        self._calls = self.link.calls  # [fn, result, exception, done] run between two steps (request_call)
        self._stats = LoopStats(paused=self._paused)
        self._stats_lock = threading.Lock()
        self._win = _Window()
        self.error: BaseException | None = None            # what ended the stepping thread (on_error called)
        self.error_after_stop: BaseException | None = None  # raised after stop() was asked: the shutdown's
        self.max_failed_steps = 10          # consecutive failed steps (each after all sub-step levels) -> pause
        self.paused_publish_period = 0.1    # s of wall time between republications of the frozen state
        # a stepping thread that has not slept for yield_period_s s of wall time (stepping flat out, or paced but
        # late) sleeps yield_s s: the threads waiting for the GIL (the node's ROS callbacks and services,
        # request_call's callers) take it then. Without it they starved: the step gives the GIL up and takes it back
        # within every switch interval (seen in SimulatorSystem.write's gravity feed-forward call alone), so a
        # waiting thread's drop request is never set (CPython's GIL hand-over) and it runs only when it wins a race;
        # 100 controller switches through request_call took 101-145 s (test_driver_controllers, each waiting
        # 0.05-1.6 s), a thread sleeping 1 ms in a loop woke up to 1.6 s late. The sleeps are yield_s /
        # yield_period_s (2 %) of a flat-out loop's time; measured, the flat-out node lost ~8 % of its real-time
        # factor (the sleeps wake up late, the other threads run meanwhile; docs/benchmarks.md).
        self.yield_period_s = 5e-3
        self.yield_s = 1e-4
        self._failures = 0
        self._failure_paused = False
        self._single_done = 0          # steps executed for ~/step requests
        self._in_single = False
        self._preempt_gen = 0          # incremented when pause/reset/a failure cancels pending ~/step steps
        self._preempt_reason = ""

    @property
    def _running(self) -> bool:
        return self.link.running

    @_running.setter
    def _running(self, value: bool) -> None:
        self.link.running = value

    @property
    def sim(self):
        """The System's Simulator (replaced by ``replace_simulator``)."""
        return self.system.sim

    @property
    def v_prev(self) -> np.ndarray:
        """Generalized velocity before the last step (for accelerations)."""
        return self.system.v_prev

    # ------------------------------------------------------------------ control (any thread)

    def start(self) -> None:
        self._sync_direct_calls()
        self._running = True
        self._thread = self.link.thread = threading.Thread(target=self._run_guarded, name="contact_sim_stepping",
                                                           daemon=True)
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
        beyond MAX_STEPS_PER_REQUEST, the transport's commands not applied); ``timeout`` is capped to what a wait
        takes (threading.TIMEOUT_MAX), never an overflow. First the transport's ``before_steps``: the commands it
        received before this request act from the first step."""
        n = int(n)
        why = step_count_problem(n)
        if why:
            return 0, why
        timeout = min(float(timeout), threading.TIMEOUT_MAX)
        if self._paused and self._running:
            # the commands received so far, in force from the first of these steps (lock-step determinism)
            try:
                self.transport.before_steps()
            except TimeoutError as exc:
                return 0, f"the commands received were not applied: {exc}"
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
        if not self.link.stepping:
            try:
                return fn()
            finally:
                self.system.read()
                self._collect_hooks()
        return self.link.between_steps(fn, timeout)

    def _sync_direct_calls(self) -> None:
        """A call the link ran on its caller's thread (no stepping thread then) may have changed the state or the
        publications: the System is read and the hooks collected before the loop steps or publishes."""
        if self.link.ran_directly:
            self.link.ran_directly = False
            self.system.read()
            self._collect_hooks()

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
            self.system.replace_simulator(sim)
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
        self.system.read()          # a call may have changed the state (SetEntityState, reset of an entity)
        self._collect_hooks()       # ... or the publications (a controller loaded or unloaded, the viewer gone)
        self._cv.notify_all()

    def _collect_hooks(self) -> None:
        """The publish hooks the loop calls: the transport's and the controller managers' (they change only
        between two steps, in request_call, after which they are collected again; each keeps its own timing)."""
        control = self.control.hooks if self.control is not None else ()
        self.hooks = list(self.transport.hooks) + list(control)

    def count_rejection(self, kind: str) -> None:
        self.counters.count_rejection(kind)

    def count_clamped(self, n: int = 1) -> None:
        self.counters.count_clamped(n)

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
            s.scheduling = self.priority.describe()
            s.rejected, s.clamped = self.counters.snapshot()
            copy = LoopStats(**{**s.__dict__, "rejected": dict(s.rejected)})
        return copy

    # ------------------------------------------------------------------ stepping thread

    def _run_guarded(self):
        try:
            if self.real_time_factor > 0:
                problem = self.priority.acquire()
                if problem:
                    self.transport.on_warning(problem)
            self._run()
        except BaseException as exc:   # the thread ends; on_error: the node exits with the cause
            with self._cv:
                stopping = not self._running
                self._running = False
                self._cv.notify_all()
            if stopping:
                # stop() was called first: the transport is being taken down under a cycle still running (a
                # publisher whose context rclpy.shutdown invalidated, a first step still compiling when stop()
                # stopped waiting). That is the shutdown, not a death: kept for inspection, not reported.
                self.error_after_stop = exc
                return
            self.error = exc
            self.transport.on_error(exc)

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
        self._sync_direct_calls()
        self._cycle()
        return self.system.step()

    def detach_control(self) -> None:
        """Drop the publish hooks and the controller manager (the world ends: they refer back to this loop)."""
        self.hooks.clear()
        self.control = None

    def publish_now(self):
        """Every publish hook publishes the current state (as the paused loop does after ~/step)."""
        self._sync_direct_calls()
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
        link = self.link                # its running flag read directly: no property call per step
        period = self.dt / self.real_time_factor if self.real_time_factor > 0 else 0.0
        deadline = time.monotonic()
        slept = deadline                # when this thread last let the GIL go for a while (yield_period_s)
        last_start = None
        while True:
            with self._cv:
                next_publish = time.monotonic() + self.paused_publish_period
                while (link.running and self._paused and self._pending_steps == 0
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
                            for hook in [h for h in self.hooks if h.while_paused]:   # also one loaded since
                                self._call(hook)
                        finally:
                            self._cv.acquire()
                        continue
                    self._cv.wait(next_publish - now)
                    last_start = None
                if not link.running:
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
                    if self.priority.fifo:   # spawns, model swaps, mesh decompositions: not at real-time priority
                        self.priority.after_step(False, time.monotonic())
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
            if self.control is not None or self.system.needs_write:
                self._cycle()
            report = self.system.step()
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
            paced = period > 0 and not single
            if paced:
                deadline += period
                lag = end - deadline
                if lag > 0:
                    overrun = True
                    if lag > self.max_lag_s:
                        deadline = end
            if self.priority.granted:       # SCHED_FIFO only while paced and on time
                self.priority.after_step(paced and lag <= self.priority.demote_lag_s, end)
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
                if last_start is not None and paced:
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
            if paced:
                delay = deadline - time.monotonic()
                if delay > 2e-4:   # shorter sleeps cost more in wake-up latency than they wait
                    time.sleep(delay)
                    slept = deadline
            if end - slept > self.yield_period_s:
                time.sleep(self.yield_s)
                slept = time.monotonic()

    def _failed(self, report) -> None:
        """A step failed after every sub-step level (state kept); ``max_failed_steps`` in a row pause."""
        self._failures += 1
        gave_up = self._failures >= self.max_failed_steps
        # first: the cause is logged before diagnostics can show the pause
        self.transport.on_step_failure(report, gave_up)
        if gave_up:
            self.set_paused(True, reason=f"{self._failures} consecutive failed steps at t = {report.t:.6f} s: "
                                         f"{report.message}")

    def _do_reset(self):
        for hook in self.hooks:
            hook.last = -1
        self.system.reset()
        if self.control is not None:
            self.control.reset()

    def _cycle(self) -> None:
        """One control cycle before a step: the transports' commands into the command interfaces (a command
        preempts a controller's trajectory on its joints), the controllers due update from the state interfaces
        to the command interfaces, and the System writes the commands to the Simulator."""
        system, control = self.system, self.control
        if system.commands.pending:
            for c in system.take_commands():
                if control is not None:
                    control.preempt(c)
        if control is not None:
            control.cycle(system.sim.step_count, system.state.time)
        system.write()
