"""The node's cameras rendered and published by a process of their own (``<node>_cameras`` in the node's
namespace, as realsense2_camera is a node of its own beside the robot's driver): the stepping thread shares no
interpreter lock with the render, the depth model and the message building (~36 ms of Python and numpy per
640x480 frame): the step-period jitter a camera adds is halved (docs/benchmarks.md).

Hand-over, per camera, in shared memory: the stepping thread writes (scene number, t, q, "a browser watches")
into the camera's slot under a seqlock (the slot's sequence number is odd while it writes; the child copies the
slot and retries if the number moved) and writes a byte into a pipe that wakes the child (non-blocking: a full
pipe already holds a wake-up). With ``sync`` (node parameter ``camera_sync``, default true) a camera's new state
does not replace one the child has not taken yet: the stepping thread waits (at most ``SYNC_WAIT_S``) until the
child has taken the previous one, as gz-sim's Sensors system waits for its render thread to take the previous
update (gz-sim src/systems/sensors/Sensors.cc, ``PostUpdate``: ``renderCv.wait(... !updateAvailable)``): every
frame of the camera's rate in sim time is rendered while one is rendered and the next is stepped towards, and the
simulation slows down (real-time factor below the target) when rendering cannot keep up. The child says what it
took in a shared array (the slot sequence number per camera) and writes a byte into a second pipe; the stepping
thread waits on that pipe and the child's sentinel (a child that ends is not waited for). Without ``sync`` the
stepping thread never waits for rendering (a newer state replaces an untaken one: ``dropped``). No multiprocessing
Lock or Event: their named semaphores outlive a node that ends with os._exit. The child (spawned:
no fork of a multi-threaded process) makes the GL context, renders each newer slot, publishes the camera's topics
(ros/camera_topics.py) if they have readers, and writes the browser view's frustum image (viewer CameraSlots).

A changed scene (spawned or deleted entities): a thread of the parent builds its RigScene (visual meshes) and
sends it through a pipe with its number; slots carry the number of the scene their q belongs to, and the child
switches before it renders a q of a newer scene. Start-up errors (no render back-end, a bad camera) are raised in
the parent as the child raised them; render errors are logged by the child (throttled) and it goes on. The child
ignores SIGINT (the node stops it) and ends when the node's process does. A child that ends while the node runs
(killed, or a crash in native code: issue 44) is noticed by a watchdog thread of the parent, reaped, logged, shown
in the node's /diagnostics and started again with the newest scene (``MAX_RESTARTS`` times at most).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import queue
import select
import signal
import threading
import time

import numpy as np
import rclpy
from rclpy.signals import SignalHandlerOptions

from .camera_topics import CameraTopics

STARTUP_TIMEOUT_S = 120.0    # s for the child to import, make its GL context and visual scene
SCENE_TIMEOUT_S = 60.0       # s the child waits for a changed scene announced by a slot
Q_CAPACITY = 4096            # configuration entries a slot holds (a robot and ~500 free bodies); a larger state
#                              is not handed over (``request`` returns False: the node says so)
HEADER = 4                   # slot layout: scene number, t (s), nq, watched (0/1), then q
NICE = 5                     # the child's niceness with priority "normal"
SYNC_WAIT_S = 5.0            # s of wall time the stepping thread waits at most for the child to take a camera's
#                              previous state (sync); then the new one replaces it (counted as dropped, ``timeouts``)
MAX_RESTARTS = 3             # children started again after one ended (killed, crashed) before the node gives up


class CameraProcess:
    """Renders the cameras of ``scene`` for ``node`` (its name, namespace and frame prefix) in a child process.

    ``viewer_slots``: the browser view's CameraSlots (or None). ``priority``: "normal" or "idle" (the node
    parameter camera_priority; ``_lower_priority``). ``sync`` (node parameter camera_sync): ``request`` waits (at
    most ``sync_wait_s`` s) for the child to take a camera's previous state (module docstring). The constructor waits
    until the child has made its
    renderer and raises what making it raised.

    A child that ends while the node runs (killed, crashed) is noticed at once by a watchdog thread (it waits on
    the child's sentinel: not the stepping thread), reaped, logged as an error on ``log`` (an rclpy logger, or
    anything with ``error`` and ``info``) and started again with the newest scene, at most ``max_restarts``
    times; then it says that it will not be restarted. ``status()`` reports it (the node's /diagnostics)."""

    def __init__(self, scene, time_step: float, node_name: str, namespace: str, frame_prefix: str,
                 viewer_slots=None, priority: str = "normal", q_capacity: int = Q_CAPACITY, log=None,
                 max_restarts: int = MAX_RESTARTS, sync: bool = True, sync_wait_s: float = SYNC_WAIT_S):
        # deferred: the rig imports trimesh (~2 s); sim_node imports this module for every scene, only a scene with
        # cameras needs it
        from ..cameras.rig import RigScene
        self._rig_scene = RigScene.of
        self._ctx = ctx = multiprocessing.get_context("spawn")
        self.names = [c.name for c in scene.cameras]
        self.index = {n: k for k, n in enumerate(self.names)}
        # their file descriptors only: one byte per wake-up. The read end stays open here too: a restarted child
        # gets it again (the stepping thread keeps writing into the same pipe)
        self._wake_recv, self._wake = ctx.Pipe(duplex=False)
        os.set_blocking(self._wake.fileno(), False)
        self._seq = ctx.RawArray("q", len(self.names))
        # sync: the child -> the stepping thread: per camera the sequence number of the slot it took last, and a
        # byte on a pipe each time it took some
        self._taken = ctx.RawArray("q", len(self.names))
        self._takens = np.frombuffer(self._taken, dtype=np.int64)
        self._taken_recv, self._taken_send = ctx.Pipe(duplex=False)
        os.set_blocking(self._taken_recv.fileno(), False)
        self.sync, self.sync_wait_s = bool(sync), float(sync_wait_s)
        self.waits = 0                         # hand-overs that waited for the child to take the previous state
        self.wait_s = 0.0                      # s of wall time the stepping thread waited in all
        self.timeouts = 0                      # waits given up after sync_wait_s (that state dropped)
        self._live = False                     # a child that has started and not ended: sync waits for it
        self._stop = ctx.RawValue("b", 0)
        self._stats = ctx.RawArray("q", 4 * len(self.names))     # rendered, dropped, skipped, errors per camera
        self.q_capacity = int(q_capacity)
        self._raw = [ctx.RawArray("d", HEADER + self.q_capacity) for _ in self.names]
        self._slots = [np.frombuffer(r, dtype=np.float64) for r in self._raw]
        self._seqs = np.frombuffer(self._seq, dtype=np.int64)
        self._scene = scene
        self._current = (0, scene)             # (number, scene) of the newest scene: one tuple, set at once
        self._scenes: queue.Queue = queue.Queue()
        self._child_args = (float(time_step), f"{node_name}_cameras", namespace, frame_prefix)
        self._viewer_slots, self._priority = viewer_slots, priority
        self._log = log
        self.max_restarts = int(max_restarts)
        self.restarts = 0                      # children started again after one ended
        self.failures = 0                      # children that ended while the node ran
        self.failure = ""                      # why the last one ended
        self.gave_up = False                   # no child any more (max_restarts reached, or a restart failed)
        self._closing = False
        self._lock = threading.Lock()
        self._process = None
        self._start_child(self._rig_scene(scene), 0)
        self._sender = threading.Thread(target=self._send_scenes, name="camera-scenes", daemon=True)
        self._sender.start()
        self._watchdog = threading.Thread(target=self._watch, name="camera-watchdog", daemon=True)
        self._watchdog.start()

    def _start_child(self, parts, scene_number: int) -> None:
        """A child rendering ``parts`` (a RigScene, scene ``scene_number``); returns once it is ready (sets
        ``_process``, ``pid``, ``description``), raises what its start-up raised."""
        ctx = self._ctx
        ready_recv, ready_send = ctx.Pipe(duplex=False)
        scene_recv, scene_send = ctx.Pipe(duplex=False)
        process = ctx.Process(
            target=_camera_process_main, name="contact_sim_cameras", daemon=True,
            args=(parts, *self._child_args, self._wake_recv, self._raw, self._seq, self._stop, self._stats,
                  ready_send, scene_recv, self._viewer_slots, os.getpid(), self._priority, scene_number,
                  self._taken, self._taken_send))
        process.start()
        ready_send.close()
        scene_recv.close()
        ok = ready_recv.poll(STARTUP_TIMEOUT_S)
        try:
            status, value = ready_recv.recv() if ok else ("error", TimeoutError(
                f"the camera process did not start within {STARTUP_TIMEOUT_S:g} s"))
        except EOFError:
            process.join(1.0)
            status, value = "error", RuntimeError(f"the camera process ended at start-up ({_exit_text(process)})")
        ready_recv.close()
        if status != "ready":
            _stop_process(process, 2.0)
            scene_send.close()
            raise value
        with self._lock:
            self._process, self._scene_send, self._sent = process, scene_send, scene_number
            self.pid, self.description = process.pid, value
            self._live = True
        current = self._current
        if current[0] > scene_number:              # a newer scene came while it started (its send may have failed)
            self._scenes.put(current)

    # ------------------------------------------------------------------------ stepping thread

    def request(self, name: str, sim, watched: bool = False) -> bool:
        """Hand camera ``name`` the current state of ``sim`` (a copy of q into its slot); never waits. False when
        the configuration has more entries than a slot holds (``q_capacity``): not handed over."""
        if sim.scene is not self._scene:          # spawned / deleted entities: built and sent by _send_scenes
            self._scene = sim.scene
            number = self._current[0] + 1
            self._current = (number, sim.scene)
            self._scenes.put((number, sim.scene))
        q = sim.q
        n = len(q)
        if n > self.q_capacity:
            return False
        k = self.index[name]
        if self.sync and self._live and self._takens[k] < self._seqs[k]:
            self._wait_taken(k)
        slot, seq = self._slots[k], self._seqs[k:k + 1]
        seq += 1                                   # odd: being written
        slot[0], slot[1], slot[2], slot[3] = self._current[0], sim.t, n, 1.0 if watched else 0.0
        slot[HEADER:HEADER + n] = q
        seq += 1                                   # even: complete
        self._wake_child()
        return True

    def _wait_taken(self, k: int) -> None:
        """Stepping thread (sync): wait until the child has taken camera ``k``'s slot, it ends, the node closes or
        ``sync_wait_s`` passed (counted in ``timeouts``)."""
        start = time.monotonic()
        deadline = start + self.sync_wait_s
        process, fd = self._process, self._taken_recv.fileno()
        self.waits += 1
        try:
            while self._takens[k] < self._seqs[k] and self._live and not self._closing:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.timeouts += 1
                    return
                ready = multiprocessing.connection.wait([self._taken_recv, process.sentinel], remaining)
                if process.sentinel in ready:      # ended: the watchdog restarts it; no waiting meanwhile
                    return
                try:
                    os.read(fd, 4096)              # the child's signals so far (the array says what it took)
                except BlockingIOError:
                    pass
        finally:
            self.wait_s += time.monotonic() - start

    def _wake_child(self) -> None:
        try:
            os.write(self._wake.fileno(), b"\0")
        except (BlockingIOError, BrokenPipeError, OSError):   # full (a wake-up is pending) or the child ended
            pass

    # ------------------------------------------------------------------------ statistics, watchdog, end

    def counts(self, name: str) -> dict:
        """States of camera ``name`` rendered, dropped (replaced before the child took them: without sync, or after
        a sync wait timed out), skipped (no reader, no browser) and failed (render errors)."""
        k = 4 * self.index[name]
        return dict(zip(("rendered", "dropped", "skipped", "errors"), self._stats[k:k + 4]))

    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    def status(self) -> tuple[int, str]:
        """(level, message) for the node's diagnostics: 0 (OK) rendering; 1 (WARN) rendering again after a child
        ended (why); 2 (ERROR) no child now: being restarted, or not any more (why)."""
        with self._lock:
            if self.gave_up:
                return 2, f"cameras not rendered: {self.failure}; not restarted (restarted {self.restarts} of " \
                          f"{self.max_restarts} times)"
            if self._process is not None and not self._process.is_alive():
                return 2, f"cameras not rendered: {self.failure or 'the camera process ended'}; restarting it"
            if self.failures:
                return 1, f"rendering in process {self.pid} (restarted {self.restarts} of {self.max_restarts} " \
                          f"times; last: {self.failure})"
            return 0, f"rendering in process {self.pid}"

    def _say(self, level: str, message: str) -> None:
        if self._log is not None:
            getattr(self._log, level)(message)

    def _watch(self) -> None:
        """Watchdog thread: waits for the child to end; unless the node closes it, reaps it, logs why, restarts
        it (at most ``max_restarts`` times) with the newest scene."""
        while True:
            process = self._process
            multiprocessing.connection.wait([process.sentinel])
            if self._closing:
                return
            process.join(1.0)                      # reaped: no zombie
            with self._lock:
                self._live = False
                self.failures += 1
                self.failure = f"the camera process {process.pid} ended: {_exit_text(process)}"
            if self.restarts >= self.max_restarts:
                with self._lock:
                    self.gave_up = True
                self._say("error", f"{self.failure}; not restarted (restarted {self.restarts} of {self.max_restarts}"
                                   f" times already): the cameras publish nothing until the node is restarted")
                return
            self._say("error", f"{self.failure}; restarting it ({self.restarts + 1} of {self.max_restarts})")
            number, scene = self._current
            try:
                self._start_child(self._rig_scene(scene), number)
            except Exception as exc:           # noqa: BLE001 - reported: the node goes on without cameras
                with self._lock:
                    self.gave_up = True
                    self.failure += f"; its restart failed: {exc}"
                self._say("error", f"the camera process could not be restarted: {exc!r}; the cameras publish "
                                   f"nothing until the node is restarted")
                return
            with self._lock:
                self.restarts += 1
            if self._closing:                      # closed while it started: close() stops it
                return
            self._say("info", f"camera process restarted: {self.description}")
            self._wake_child()

    def _send_scenes(self) -> None:
        while True:
            number, scene = self._scenes.get()
            if scene is None:
                return
            if number <= self._sent:                # the child has it (a restarted child started with it) or newer
                continue
            try:
                parts = self._rig_scene(scene)
            except Exception as exc:           # noqa: BLE001 - a scene that cannot be drawn: the child says so
                parts = exc
            try:
                self._scene_send.send((number, parts))
                self._sent = number
            except (OSError, ValueError):      # the child ended: its restart takes the newest scene
                continue

    def close(self, timeout: float = 2.0) -> None:
        with self._lock:
            self._closing = True
        self._stop.value = 1                       # a child started from now on ends at once too
        self._wake_child()
        self._scenes.put((None, None))
        if self._process is not None:
            _stop_process(self._process, timeout)
        watchdog = getattr(self, "_watchdog", None)
        if watchdog is not None:
            watchdog.join(timeout)
            if self._process is not None:          # one started while closing
                _stop_process(self._process, timeout)


def _stop_process(process, timeout: float) -> None:
    process.join(timeout)
    if process.is_alive():
        process.terminate()
        process.join(1.0)


def _exit_text(process) -> str:
    """``killed by SIGKILL`` / ``exit code 3`` / ``still running``."""
    code = process.exitcode
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}" + (" (a crash in the renderer)" if -code in (signal.SIGSEGV, signal.SIGBUS,
                                                                                   signal.SIGABRT) else "")
    return f"exit code {code}"


# ---------------------------------------------------------------------------- the child

def _camera_process_main(parts, time_step, node_name, namespace, frame_prefix, wake, raw, seq_raw, stop,
                         stats, ready_send, scene_recv, viewer_slots, parent_pid, priority, scene_number=0,
                         taken_raw=None, taken_send=None):
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C reaches the process group: the node stops us
    if priority == "idle":
        os.environ.setdefault("LP_NUM_THREADS", "1")      # read when llvmpipe makes its threads (the GL context)
    try:
        from ..cameras.rig import CameraRig     # deferred as in CameraProcess (the child imports this module first)
        rig = CameraRig(parts, time_step)
        rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
        node = rclpy.create_node(node_name, namespace=namespace, start_parameter_services=False)
        topics = {c.name: CameraTopics(node, c, frame_prefix) for c in parts.cameras}
    except BaseException as exc:    # noqa: BLE001 - raised in the parent
        try:
            ready_send.send(("error", exc))
        except Exception:           # noqa: BLE001 - an exception that does not pickle
            ready_send.send(("error", RuntimeError(repr(exc))))
        return

    def publish_labels():
        for t in topics.values():
            t.publish_label_map(rig.label_map())

    publish_labels()
    _lower_priority(priority)      # after the start-up (imports, GL context, DDS): a busy machine does not delay it
    slots = [np.frombuffer(r, dtype=np.float64) for r in raw]
    seqs = np.frombuffer(seq_raw, dtype=np.int64)
    counts = np.frombuffer(stats, dtype=np.int64).reshape(-1, 4)
    names = [c.name for c in parts.cameras]
    # a restarted child takes the newest state handed over (if any) as new, the older ones not as dropped; read
    # before "ready": the states the parent hands over once it has that are all counted (read after it, a starved
    # child took those handed over in between for a restart's backlog: beside CPU hogs 19 of 20 went uncounted)
    last = np.maximum((seqs.copy() // 2) * 2 - 2, 0)
    ready_send.send(("ready", f"rendering in process {os.getpid()} with {rig.renderer.gl.renderer}, "
                              f"{rig.visual.triangles} triangles, {len(rig.visual.labels)} labels"))
    ready_send.close()
    log = node.get_logger()
    wake_fd = wake.fileno()
    taken = np.frombuffer(taken_raw, dtype=np.int64) if taken_raw is not None else None
    taken_fd = taken_send.fileno() if taken_send is not None else None
    if taken_fd is not None:
        os.set_blocking(taken_fd, False)
    try:
        while not stop.value:
            if not select.select([wake_fd], [], [], 0.5)[0]:
                if os.getppid() != parent_pid:      # the node's process ended
                    break
                continue
            try:
                if not os.read(wake_fd, 4096):      # the parent's end closed: the node's process ended
                    break
            except BlockingIOError:
                pass
            jobs = []
            for k in np.flatnonzero(seqs != last):
                job = _read_slot(slots[k], seqs[k:k + 1])
                if job is None:                     # being written again: the next wake-up brings it
                    continue
                seq, job = job
                counts[k, 1] += max(0, (seq - int(last[k])) // 2 - 1)
                last[k] = seq
                if taken is not None:
                    taken[k] = seq
                jobs.append((k, *job))
            if jobs and taken_fd is not None:       # the stepping thread may hand over the next states (sync)
                try:
                    os.write(taken_fd, b"\0")
                except (BlockingIOError, BrokenPipeError, OSError):   # full: a signal is pending
                    pass
            for k, number, t, q, watched in jobs:
                name = names[k]
                try:
                    while scene_number < number:          # the q of a changed scene: switch first
                        if not scene_recv.poll(SCENE_TIMEOUT_S):
                            raise TimeoutError(f"scene {number} did not arrive within {SCENE_TIMEOUT_S:g} s")
                        number_sent, new = scene_recv.recv()
                        if number_sent <= scene_number:   # sent again after a restart: this child has it
                            continue
                        scene_number = number_sent
                        if isinstance(new, BaseException):
                            raise new
                        rig.release()
                        rig = CameraRig(new, time_step)
                        publish_labels()
                    if not (watched or topics[name].wanted()):
                        counts[k, 2] += 1
                        continue
                    frame = rig.render(name, q, t)
                    topics[name].publish(frame)
                    if viewer_slots is not None:
                        viewer_slots.write(name, frame.world_T_optical, frame.color)
                    counts[k, 0] += 1
                except Exception as exc:     # noqa: BLE001 - the simulation goes on; reported
                    counts[k, 3] += 1
                    log.error(f"camera {name!r} at t = {t:.6f} s: {exc!r}", throttle_duration_sec=5.0)
    finally:
        try:
            rig.release()
            node.destroy_node()
            rclpy.try_shutdown()
        except Exception:   # noqa: BLE001 - ending
            pass


def _lower_priority(priority: str) -> None:
    """The child's scheduling, set once it has started, on all its threads. "idle": SCHED_IDLE (it runs on
    what the other processes leave; a stepping thread that wakes preempts it at once) and llvmpipe with one
    rasteriser thread (``LP_NUM_THREADS`` unless set): the step-period jitter a 640x480 camera at 15 Hz adds on 2
    cores fell from +0.54 to +0.32 ms, and its frames from 11.2 to 9.1 per second (medians of 5 rounds,
    docs/benchmarks.md). On a machine kept busy at normal priority the camera's frames drop first. "normal":
    SCHED_OTHER at niceness +5, llvmpipe's default threads."""
    # every thread the process has (OpenBLAS's, llvmpipe's, DDS's): Linux schedules threads, and os.nice /
    # sched_setscheduler(0) change only the calling one; threads made later inherit their maker's
    for tid in (int(t) for t in os.listdir("/proc/self/task")):
        try:
            if priority == "idle":
                os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
            else:
                os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + NICE)
        except OSError:   # not permitted (a container's seccomp profile), or the thread ended: left as it is
            pass


def _read_slot(slot: np.ndarray, seq: np.ndarray):
    """(sequence number, (scene number, t, q copy, watched)) of a slot the stepping thread is not writing, or None
    after 100 tries (it keeps writing: at the camera's rate, so never in practice)."""
    for _ in range(100):
        before = int(seq[0])
        if before % 2:
            continue
        n = int(slot[2])
        job = (int(slot[0]), float(slot[1]), slot[HEADER:HEADER + n].copy(), bool(slot[3]))
        if int(seq[0]) == before:
            return before, job
    return None
