"""Benchmark: what the browser viewer adds to the simulation's step time at its default update rate.

    python benchmarks/viewer/run.py [--seconds 3] [--repeats 3] [--engine tamsi]

Runs the default scene (iiwa_wsg, table, bottle, box) as fast as possible for ``--seconds`` of wall time per
run, alternating runs without and with a live viewer (``ViewerProcess``: viser in a child process, fed a
snapshot at its default 30 Hz of wall time; without and with one headless-Chromium client attached), and prints the median step time of each and
the overhead ratio. Target: overhead <= 10 %.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

from contact_sim_ros.sim.simulator import Simulator
from contact_sim_ros.viewer.scene_viewer import ViewerProcess, simulator_frame


def run(sim, seconds: float, viewer=None) -> float:
    """Mean wall time per step (s) over ``seconds`` of stepping."""
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        sim.step()
        if viewer is not None and viewer.due():
            viewer.publish(simulator_frame(sim, 1.0))
        n += 1
    return (time.perf_counter() - start) / n


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--engine", default="tamsi")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--figure", default="docs/figures/viewer_overhead.png")
    args = parser.parse_args(argv)
    sim = Simulator("scenes/default.yaml", engine=args.engine, time_step=1e-3)
    viewer = ViewerProcess(sim.model, port=args.port)
    browser = None
    chromium = shutil.which("chromium")
    results = {"no viewer": [], "viewer, no client": [], "viewer + browser": []}
    for _ in range(args.repeats):
        sim.reset()
        results["no viewer"].append(run(sim, args.seconds))
        sim.reset()
        results["viewer, no client"].append(run(sim, args.seconds, viewer))
    if chromium:
        browser = subprocess.Popen([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                    "--enable-unsafe-swiftshader", "--use-angle=swiftshader",
                                    "--disable-background-networking", "--user-data-dir=/tmp/viewer-bench-profile",
                                    "--remote-debugging-port=0", viewer.url],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3.0)
        for _ in range(args.repeats):
            sim.reset()
            results["viewer + browser"].append(run(sim, args.seconds, viewer))
        browser.terminate()
    viewer.close()
    base = statistics.median(results["no viewer"])
    print(f"{'configuration':24s} {'median step us':>15s} {'overhead':>9s}")
    labels, medians = [], []
    for label, samples in results.items():
        if samples:
            med = statistics.median(samples)
            labels.append(label)
            medians.append(med * 1e6)
            print(f"{label:24s} {med * 1e6:15.1f} {100 * (med / base - 1):8.1f}%")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(labels, medians)
    ax.axhline(1.1 * base * 1e6, color="r", ls="--", lw=0.8, label="+10 % (target)")
    ax.set_ylabel("median step time (us)")
    ax.set_title(f"viewer overhead, default scene, {args.engine}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.figure, dpi=110)
    print(f"figure: {args.figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
