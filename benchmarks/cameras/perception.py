"""Benchmark: perception in the loop (docs/cameras.md "Perception in the loop"; docs/scenarios.md).

    python benchmarks/cameras/perception.py [--placements 20] [--trials 10] [--engine tamsi]

1. Cost of one perception in process (scenes/scenario_pick_shake_place_cameras.yaml, the wrist camera 640x480
   with the D435 depth model, the arm at the look pose over the nominal pick location): making the CameraRig (the
   EGL context and the visual scene: once per trial), one render, segmentation + cylinder fit; median and p95 of
   wall time over the ``--placements`` runs.
2. Perception error over ``--placements`` bottle positions drawn uniformly within +-3 cm of the nominal one in x
   and y (seeded): the horizontal distance of the perceived axis to the true one (median, p95, max) and the top
   height error, for the height segmentation and the label segmentation.
3. ``--trials`` trials of scenes/campaigns/pick_shake_place_perception.yaml, run in process (no Ray), each with
   the three pick sources: successes per source.

Prints Markdown tables with the machine's load average (the 2-core machine is shared).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from contact_sim_ros.cameras.perception import locate_upright_cylinder, segment_object  # noqa: E402
from contact_sim_ros.clients.inprocess_link import InProcessLink  # noqa: E402
from contact_sim_ros.clients.pick_shake_place import (PickShakePlace, PickShakePlaceParams,  # noqa: E402
                                                          run_controller)
from contact_sim_ros.scenarios.campaign import load_campaign, run_trial, trial_scene  # noqa: E402
from contact_sim_ros.scenarios.runner import SCENARIOS  # noqa: E402

SPEC = SCENARIOS["pick_shake_place"]
NOMINAL = np.array([0.55, -0.12])


class TimedLink(InProcessLink):
    """The in-process link, timing its renders (CameraRig made at the first one)."""

    def camera_frame(self, camera):
        t0 = time.perf_counter()
        first = self._rig is None
        if first:
            from contact_sim_ros.cameras.rig import CameraRig
            self._rig = CameraRig(self.sim.scene)
            self.rig_s = time.perf_counter() - t0
            t0 = time.perf_counter()
        frame = super().camera_frame(camera)
        self.render_s = time.perf_counter() - t0
        self.frame = frame
        return frame


def one_placement(offset, engine: str, tmp: Path) -> dict:
    scene = trial_scene(REPO / SPEC.perception_scene, {"object.bottle.x": offset[0], "object.bottle.y": offset[1]},
                        tmp)
    c = PickShakePlace(PickShakePlaceParams(pick_source="perception", motion_time=0.5, stop_at="approach"))
    link = TimedLink(scene, engine, SPEC.time_step, SPEC.period, ft_topic=c.ft_topic,
                     trajectory_controllers=c.trajectory_controllers, inactive_controllers=SPEC.inactive_controllers)
    try:
        v = run_controller(c, link)
        assert v.success, v.reason
        truth = NOMINAL + np.asarray(offset)
        robot = [int(k) for k, e in link.camera_label_map().items() if e["kind"] == "link"]
        t0 = time.perf_counter()
        pts = segment_object(link.frame, robot_labels=robot, near_xy=NOMINAL, search_radius=0.15)
        est = locate_upright_cylinder(pts)
        fit_s = time.perf_counter() - t0
        lab = locate_upright_cylinder(segment_object(link.frame, segmentation="labels", object_name="bottle"))
        return {"rig_s": link.rig_s, "render_s": link.render_s, "fit_s": fit_s,
                "err_height": float(np.linalg.norm(est.axis_xy - truth)), "top_err": abs(est.top_z - 0.18),
                "err_labels": float(np.linalg.norm(lab.axis_xy - truth)),
                "controller_err": v.numbers["perception_error_m"]}
    finally:
        link.close()


def stats(x):
    x = np.asarray(x, float)
    return np.median(x), np.percentile(x, 95), x.max()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--placements", type=int, default=20)
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--engine", default="tamsi")
    args = ap.parse_args(argv)
    print(f"load average before: {os.getloadavg()}")
    rng = np.random.default_rng(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.placements):
            rows.append(one_placement(rng.uniform(-0.03, 0.03, 2), args.engine, Path(tmp)))
    col = {k: [r[k] for r in rows] for k in rows[0]}
    print(f"\n{args.placements} placements, wrist camera 640x480, D435 depth\n")
    print("| step | median (ms) | p95 (ms) | max (ms) |\n| --- | --- | --- | --- |")
    for k, name in (("rig_s", "CameraRig (EGL context, visual scene)"), ("render_s", "one render + D435 depth"),
                    ("fit_s", "segmentation + cylinder fit")):
        m, p, x = stats(col[k])
        print(f"| {name} | {m * 1e3:.1f} | {p * 1e3:.1f} | {x * 1e3:.1f} |")
    print("\n| error | median (mm) | p95 (mm) | max (mm) |\n| --- | --- | --- | --- |")
    for k, name in (("err_height", "axis, height segmentation"), ("err_labels", "axis, label segmentation"),
                    ("top_err", "top height")):
        m, p, x = stats(col[k])
        print(f"| {name} | {m * 1e3:.2f} | {p * 1e3:.2f} | {x * 1e3:.2f} |")
    if args.trials:
        spec = load_campaign(REPO / "scenes/campaigns/pick_shake_place_perception.yaml")
        wins = {s: 0 for s in spec.pick_sources}
        cpu0 = time.process_time()
        for k in range(args.trials):
            for values in spec.runs(k):
                r = run_trial(spec, k, args.engine, values)
                wins[values["controller.pick_source"]] += bool(r["success"])
        print(f"\n{args.trials} trials of scenes/campaigns/pick_shake_place_perception.yaml ({args.engine}, in "
              f"process, {time.process_time() - cpu0:.0f} s CPU)\n")
        print("| pick source | successes |\n| --- | --- |")
        for s, n in wins.items():
            print(f"| {s} | {n} / {args.trials} |")
    print(f"\nload average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
