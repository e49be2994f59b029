"""``contact-sim run --camera NAME``: a scene's camera images written as PNG files while a headless run steps.

Per camera, in ``<out>/<camera>/``: ``color_<k>.png`` (RGB, 8 bit), ``depth_<k>.png`` (16-bit millimetres as
realsense2_camera's 16UC1, 0 = no depth), ``labels_<k>.png`` (16-bit segmentation labels, 0 = nothing) and
``frames.csv`` (k, sim time t in s); ``labels.json`` maps labels to entities. Frame k is the state after the step
that reached the camera's (k+1)-th image time (every ``round(1 / (rate dt))`` steps). Rendering runs in
a thread of its own (cameras/render_thread.py, ``drop=False``: the run waits rather than lose a frame).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import ConfigError, unknown_choice
from .depth_models import depth_mm
from .render_thread import RenderThread


class FrameWriter:
    """Writes the images of the cameras ``names`` of ``sim``'s scene into ``out_dir`` (module docstring).
    ConfigError: an unknown camera (naming the scene's cameras), a camera faster than the steps, ``out_dir`` not
    writable; errors of the render back-end as RenderThread raises them."""

    def __init__(self, sim, names, out_dir):
        cameras = {c.name: c for c in sim.scene.cameras}
        for name in names:
            if name not in cameras:
                raise ConfigError(f"{sim.scene.source}: " + unknown_choice("camera", name, cameras))
        self.out = Path(out_dir)
        self.every = {}
        self._csv = {}
        for name in dict.fromkeys(names):
            cameras[name].check_rate(sim.time_step)
            self.every[name] = cameras[name].decimation(sim.time_step)
            folder = self.out / name
            try:
                folder.mkdir(parents=True, exist_ok=True)
                self._csv[name] = open(folder / "frames.csv", "w")
            except OSError as exc:
                raise ConfigError(f"--frames-dir {out_dir}: cannot write there: {exc.strerror or exc}") from None
            self._csv[name].write("k,t\n")
        self.written = {name: 0 for name in self.every}
        self.render_errors: list[str] = []
        self.renderer = RenderThread(sim.scene, sim.time_step, on_frame=self._write, on_ready=self._write_labels,
                                     on_error=lambda name, t, exc: self.render_errors.append(
                                         f"camera {name!r} at t = {t:.6f} s: {exc!r}"), drop=False)

    def after_step(self, sim) -> None:
        """(the stepping loop, after a successful step) queue the cameras whose image time it is."""
        for name, every in self.every.items():
            if sim.step_count % every == 0:
                self.renderer.request(name, sim)

    def close(self) -> None:
        """Render what is queued, write it, stop the render thread."""
        try:
            self.renderer.flush()
        finally:
            self.renderer.close()
            for f in self._csv.values():
                f.close()

    # ------------------------------------------------------------------------ render thread

    def _write_labels(self, rig) -> None:
        (self.out / "labels.json").write_text(json.dumps(rig.label_map(), indent=1))

    def _write(self, name: str, frame) -> None:
        from PIL import Image  # deferred: Pillow (installed with matplotlib) only for runs that write frames
        k = self.written[name]
        folder = self.out / name
        Image.fromarray(np.ascontiguousarray(frame.color), "RGB").save(folder / f"color_{k:06d}.png")
        Image.fromarray(depth_mm(frame.depth)).save(folder / f"depth_{k:06d}.png")
        Image.fromarray(np.ascontiguousarray(frame.labels.astype(np.uint16))).save(folder / f"labels_{k:06d}.png")
        self._csv[name].write(f"{k},{frame.t:.9f}\n")
        self.written[name] = k + 1
