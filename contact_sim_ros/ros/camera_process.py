"""The node's cameras rendered and published by a process of their own (``<node>_cameras`` in the node's
namespace, as realsense2_camera is a node of its own beside the robot's driver): the stepping thread shares no
interpreter lock with the render, the depth model and the message building (~36 ms of Python and numpy per
640x480 frame): the step-period jitter a camera adds is halved (docs/benchmarks.md).

Hand-over, per camera, in shared memory: the stepping thread writes (scene number, t, q, "a browser watches")
into the camera's slot under a seqlock (the slot's sequence number is odd while it writes; the child copies the
slot and retries if the number moved) and writes a byte into a pipe that wakes the child (non-blocking: a full
pipe already holds a wake-up); it never waits for rendering (a newer state replaces an unrendered one:
``dropped``). No multiprocessing Lock or Event: their named semaphores outlive a node that ends with os._exit. The child (spawned:
no fork of a multi-threaded process) makes the GL context, renders each newer slot, publishes the camera's topics
(ros/camera_topics.py) if they have readers, and writes the browser view's frustum image (viewer CameraSlots).

A changed scene (spawned or deleted entities): a thread of the parent builds its RigScene (visual meshes) and
sends it through a pipe with its number; slots carry the number of the scene their q belongs to, and the child
switches before it renders a q of a newer scene. Start-up errors (no render back-end, a bad camera) are raised in
the parent as the child raised them; render errors are logged by the child (throttled) and it goes on. The child
ignores SIGINT (the node stops it) and ends when the node's process does.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import select
import signal
import threading

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


class CameraProcess:
    """Renders the cameras of ``scene`` for ``node`` (its name, namespace and frame prefix) in a child process.

    ``viewer_slots``: the browser view's CameraSlots (or None). ``priority``: "idle" or "normal" (the node
    parameter camera_priority; ``_lower_priority``). The constructor waits until the child has made its
    renderer and raises what making it raised."""

    def __init__(self, scene, time_step: float, node_name: str, namespace: str, frame_prefix: str,
                 viewer_slots=None, priority: str = "idle", q_capacity: int = Q_CAPACITY):
        # deferred: the rig imports trimesh (~2 s); sim_node imports this module for every scene, only a scene with
        # cameras needs it
        from ..cameras.rig import RigScene
        self._rig_scene = RigScene.of
        ctx = multiprocessing.get_context("spawn")
        self.names = [c.name for c in scene.cameras]
        self.index = {n: k for k, n in enumerate(self.names)}
        wake_recv, self._wake = ctx.Pipe(duplex=False)     # their file descriptors only: one byte per wake-up
        os.set_blocking(self._wake.fileno(), False)
        self._seq = ctx.RawArray("q", len(self.names))
        self._stop = ctx.RawValue("b", 0)
        self._stats = ctx.RawArray("q", 4 * len(self.names))     # rendered, dropped, skipped, errors per camera
        self.q_capacity = int(q_capacity)
        self._raw = [ctx.RawArray("d", HEADER + self.q_capacity) for _ in self.names]
        self._slots = [np.frombuffer(r, dtype=np.float64) for r in self._raw]
        self._seqs = np.frombuffer(self._seq, dtype=np.int64)
        self._scene, self._scene_number = scene, 0
        self._scenes: queue.Queue = queue.Queue()
        ready_recv, ready_send = ctx.Pipe(duplex=False)
        scene_recv, self._scene_send = ctx.Pipe(duplex=False)
        self._process = ctx.Process(
            target=_camera_process_main, name="contact_sim_cameras", daemon=True,
            args=(self._rig_scene(scene), float(time_step), f"{node_name}_cameras", namespace, frame_prefix,
                  wake_recv, self._raw, self._seq, self._stop, self._stats, ready_send, scene_recv,
                  viewer_slots, os.getpid(), priority))
        self._process.start()
        ready_send.close()
        scene_recv.close()
        wake_recv.close()
        ok = ready_recv.poll(STARTUP_TIMEOUT_S)
        try:
            status, value = ready_recv.recv() if ok else ("error", TimeoutError(
                f"the camera process did not start within {STARTUP_TIMEOUT_S:g} s"))
        except EOFError:
            status, value = "error", RuntimeError(f"the camera process ended at start-up (exit code "
                                                  f"{self._process.exitcode})")
        ready_recv.close()
        if status != "ready":
            self.close()
            raise value
        self.description = value
        self.pid = self._process.pid
        self._sender = threading.Thread(target=self._send_scenes, name="camera-scenes", daemon=True)
        self._sender.start()

    # ------------------------------------------------------------------------ stepping thread

    def request(self, name: str, sim, watched: bool = False) -> bool:
        """Hand camera ``name`` the current state of ``sim`` (a copy of q into its slot); never waits. False when
        the configuration has more entries than a slot holds (``q_capacity``): not handed over."""
        if sim.scene is not self._scene:          # spawned / deleted entities: built and sent by _send_scenes
            self._scene = sim.scene
            self._scene_number += 1
            self._scenes.put((self._scene_number, sim.scene))
        q = sim.q
        n = len(q)
        if n > self.q_capacity:
            return False
        k = self.index[name]
        slot, seq = self._slots[k], self._seqs[k:k + 1]
        seq += 1                                   # odd: being written
        slot[0], slot[1], slot[2], slot[3] = self._scene_number, sim.t, n, 1.0 if watched else 0.0
        slot[HEADER:HEADER + n] = q
        seq += 1                                   # even: complete
        self._wake_child()
        return True

    def _wake_child(self) -> None:
        try:
            os.write(self._wake.fileno(), b"\0")
        except (BlockingIOError, BrokenPipeError, OSError):   # full (a wake-up is pending) or the child ended
            pass

    # ------------------------------------------------------------------------ statistics, end

    def counts(self, name: str) -> dict:
        """States of camera ``name`` rendered, dropped (replaced before the child took them), skipped (no reader,
        no browser) and failed (render errors)."""
        k = 4 * self.index[name]
        return dict(zip(("rendered", "dropped", "skipped", "errors"), self._stats[k:k + 4]))

    def alive(self) -> bool:
        return self._process.is_alive()

    def _send_scenes(self) -> None:
        while True:
            number, scene = self._scenes.get()
            if scene is None:
                return
            try:
                self._scene_send.send((number, self._rig_scene(scene)))
            except (OSError, ValueError):      # the child ended (the node stops)
                return
            except Exception as exc:           # noqa: BLE001 - a scene that cannot be drawn: the child says so
                self._scene_send.send((number, exc))

    def close(self, timeout: float = 2.0) -> None:
        self._stop.value = 1
        self._wake_child()
        self._scenes.put((None, None))
        self._process.join(timeout)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(1.0)


# ---------------------------------------------------------------------------- the child

def _camera_process_main(parts, time_step, node_name, namespace, frame_prefix, wake, raw, seq_raw, stop,
                         stats, ready_send, scene_recv, viewer_slots, parent_pid, priority):
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
    ready_send.send(("ready", f"rendering in process {os.getpid()} with {rig.renderer.gl.renderer}, "
                              f"{rig.visual.triangles} triangles, {len(rig.visual.labels)} labels"))
    ready_send.close()
    log = node.get_logger()
    slots = [np.frombuffer(r, dtype=np.float64) for r in raw]
    seqs = np.frombuffer(seq_raw, dtype=np.int64)
    counts = np.frombuffer(stats, dtype=np.int64).reshape(-1, 4)
    names = [c.name for c in parts.cameras]
    last = np.zeros(len(names), np.int64)
    scene_number = 0
    wake_fd = wake.fileno()
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
                jobs.append((k, *job))
            for k, number, t, q, watched in jobs:
                name = names[k]
                try:
                    while scene_number < number:          # the q of a changed scene: switch first
                        if not scene_recv.poll(SCENE_TIMEOUT_S):
                            raise TimeoutError(f"scene {number} did not arrive within {SCENE_TIMEOUT_S:g} s")
                        scene_number, new = scene_recv.recv()
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
