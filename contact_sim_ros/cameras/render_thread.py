"""A thread of its own that renders the scene's cameras: the stepping thread hands it (scene, t, copy of q) and
never renders itself (a GL context belongs to the thread that made it: the CameraRig is made in this thread).

Used by the node's camera topics (ros/camera_publisher.py: ``drop=True``, a camera's newer state replaces its
unrendered older one, so the stepping thread never waits) and by ``contact-sim run --camera`` (cameras/
frame_writer.py: ``drop=False``, the stepping waits for a free slot, so an offline run loses no frame).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

STARTUP_TIMEOUT_S = 120.0     # s for the thread to make its GL context and visual scene (trimesh import, meshes)


class RenderThread:
    """Renders the cameras ``names`` of ``scene`` in a thread of its own.

    ``on_ready(rig)`` (render thread) once the CameraRig is made, and again when a request brings a new scene
    (spawned or deleted entities: the model was rebuilt); ``on_frame(name, frame)`` (render thread) with each
    rendered CameraFrame; ``on_error(name, t, exc)`` (render thread) when rendering or ``on_frame`` failed (the
    thread goes on). The constructor waits for the rig and raises what making it raised (render back-end missing,
    a bad camera). ``time_step`` (s): each camera's rate is checked against it."""

    def __init__(self, scene, time_step: float, on_frame: Callable, on_ready: Callable | None = None,
                 on_error: Callable | None = None, drop: bool = True):
        self.scene, self.time_step, self.drop = scene, time_step, drop
        self._on_frame, self._on_ready, self._on_error = on_frame, on_ready, on_error
        self._cond = threading.Condition()
        self._pending: dict[str, tuple] = {}          # camera -> (scene, t, q): the newest state to render
        self._busy = False                            # the thread renders a job taken from _pending
        self._stop = False
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self.rendered: dict[str, int] = {}
        self.dropped: dict[str, int] = {}
        self.render_ms: list[float] = []              # wall time per rendered frame (the last 1000)
        self.errors = 0
        self.description = ""                         # the GL renderer, triangles, labels (after start-up)
        self._thread = threading.Thread(target=self._run, name="camera-render", daemon=True)
        self._thread.start()
        if not self._ready.wait(STARTUP_TIMEOUT_S):
            raise TimeoutError(f"the camera render thread did not start within {STARTUP_TIMEOUT_S:g} s")
        if self._startup_error is not None:
            raise self._startup_error

    # ------------------------------------------------------------------------ stepping thread

    def request(self, name: str, sim) -> None:
        """Queue camera ``name``'s image of ``sim``'s current state (a copy of q). ``drop``: never waits (a newer
        state replaces the camera's unrendered one, counted in ``dropped``); else waits until that slot is free."""
        job = (sim.scene, sim.t, sim.q.copy())
        with self._cond:
            if name in self._pending:
                if self.drop:
                    self.dropped[name] = self.dropped.get(name, 0) + 1
                else:
                    self._cond.wait_for(lambda: name not in self._pending or self._stop or
                                        not self._thread.is_alive())
            self._pending[name] = job
            self._cond.notify_all()

    def flush(self, timeout: float = 60.0) -> bool:
        """Wait until every queued image is rendered (and handed to ``on_frame``); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: (not self._pending and not self._busy) or
                                       not self._thread.is_alive(), timeout)

    def close(self, timeout: float = 2.0) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(timeout)

    # ------------------------------------------------------------------------ render thread

    def _make_rig(self, scene):
        # deferred: the rig imports trimesh (~11 s at load 42, 4x Pinocchio) and makes the moderngl context; the
        # node imports this module for every scene, and only a scene with cameras needs them
        from .rig import CameraRig
        rig = CameraRig(scene, self.time_step)
        self.description = (f"rendering with {rig.renderer.gl.renderer}, {rig.visual.triangles} triangles, "
                            f"{len(rig.visual.labels)} labels")
        if self._on_ready is not None:
            self._on_ready(rig)
        return rig

    def _run(self):
        try:
            rig = self._make_rig(self.scene)
        except BaseException as exc:      # noqa: BLE001 - raised by the constructor in the caller's thread
            self._startup_error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            while True:
                with self._cond:
                    while not self._pending and not self._stop:
                        self._cond.wait()
                    if self._stop:
                        break
                    jobs = list(self._pending.items())
                    self._pending.clear()
                    self._busy = True
                    self._cond.notify_all()
                for name, (scene, t, q) in jobs:
                    try:
                        if scene is not rig.scene:       # spawned / deleted entities: the model was rebuilt
                            rig.release()
                            rig = self._make_rig(scene)
                        t0 = time.perf_counter()
                        frame = rig.render(name, q, t)
                        self._on_frame(name, frame)
                        self.render_ms.append(1e3 * (time.perf_counter() - t0))
                        del self.render_ms[:-1000]
                        self.rendered[name] = self.rendered.get(name, 0) + 1
                    except Exception as exc:     # noqa: BLE001 - the simulation goes on; reported
                        self.errors += 1
                        if self._on_error is not None:
                            self._on_error(name, t, exc)
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
        finally:
            rig.release()
            with self._cond:
                self._busy = False
                self._cond.notify_all()
