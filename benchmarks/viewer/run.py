"""Benchmark: what the browser viewer adds to the simulation's step time at its default update rate (30 Hz).

    scripts/venv_run.sh python benchmarks/viewer/run.py [--seconds 3] [--repeats 3] [--engine tamsi]

Steps the default scene (iiwa_wsg, table, bottle, box) as fast as possible for ``--seconds`` of wall time per
run, in the loop of ``contact-sim run --viewer`` (step; poll the buttons; at the viewer's 30 Hz of wall time copy
q and the contacts into the viewer's shared memory). Each repeat runs, back to back, the three configurations:

* ``no viewer``;
* ``viewer, no client``: ``ViewerProcess`` (viser in a child process at nice +10) serving nobody;
* ``viewer + browser``: the same with one headless Chromium (software WebGL: SwiftShader) rendering the page.

Printed per configuration (median over repeats): CPU time per step of the stepping process
(``time.process_time``: all its threads), wall time per step, the overheads against ``no viewer`` of the same
repeats, the CPU use of the viewer process and of Chromium (% of one core, from /proc) and the frames per second
the viewer process actually sent to the browser (it sends none while no browser is connected). Target: the viewer
adds at most 10 % to the step time. On a 2-core machine a software-rendering browser competes with the
simulation for the cores: its cost shows in the wall time, not in the stepping process's CPU time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from contact_sim_ros.sim.simulator import Simulator  # noqa: E402
from contact_sim_ros.viewer.headless_browser import CHROMIUM, HeadlessChromium  # noqa: E402
from contact_sim_ros.viewer.scene_viewer import ViewerProcess  # noqa: E402

CONFIGS = ("no viewer", "viewer, no client", "viewer + browser")
TICK = os.sysconf("SC_CLK_TCK")


def process_tree_cpu(root: int) -> float:
    """CPU seconds (user + system) used so far by process ``root`` and its live descendants (/proc)."""
    parents, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / TICK
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo += [p for p, parent in parents.items() if parent == pid]
    return total


def run(sim, seconds: float, viewer=None, watch: dict | None = None) -> dict:
    """Step for ``seconds`` of wall time; per-step CPU (s) of this process and wall (s), and the CPU use (% of
    one core) of the watched processes (name -> pid) over the run."""
    sim.reset()
    watched0 = {name: process_tree_cpu(pid) for name, pid in (watch or {}).items()}
    shown0 = viewer.frames_shown if viewer is not None else 0
    n = 0
    cpu0, start = time.process_time(), time.perf_counter()
    frame_wall, frame_t = start, sim.t
    while True:
        sim.step()
        n += 1
        if viewer is not None:
            viewer.events()                                  # the runner polls the buttons every step
            if viewer.due():
                now = time.perf_counter()
                viewer.publish_simulator(sim, (sim.t - frame_t) / (now - frame_wall))
                frame_wall, frame_t = now, sim.t
        if n % 16 == 0 and time.perf_counter() - start >= seconds:
            break
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    out = {"cpu": cpu / n, "wall": wall / n, "steps": n,
           "shown": (viewer.frames_shown - shown0) / wall if viewer is not None else float("nan")}
    for name, pid in (watch or {}).items():
        out[name] = 100.0 * (process_tree_cpu(pid) - watched0[name]) / wall
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="wall seconds per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--engine", default="tamsi")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--browser-warmup", type=float, default=2.0,
                        help="s of stepping with the page loaded before measuring")
    parser.add_argument("--no-browser", action="store_true", help="skip the headless-Chromium configuration")
    parser.add_argument("--figure", default=str(REPO / "docs/figures/viewer_overhead.png"),
                        help="PNG to write ('' for none)")
    args = parser.parse_args(argv)
    load0 = os.getloadavg()
    sim = Simulator(str(REPO / "scenes/default.yaml"), engine=args.engine, time_step=1e-3)
    sim.run(0.05)                                            # imports, first-use allocations
    viewer = ViewerProcess(sim.model, port=args.port)
    results = {c: [] for c in CONFIGS}
    idle_browser = []
    try:
        for _ in range(args.repeats):
            results["no viewer"].append(run(sim, args.seconds))
            results["viewer, no client"].append(run(sim, args.seconds, viewer, {"viewer process": viewer.pid}))
            if args.no_browser:
                continue
            if CHROMIUM is None:
                print("chromium not found: no browser configuration")
                args.no_browser = True
                continue
            with HeadlessChromium(viewer.url, timeout=60) as browser:
                browser.wait_for_button("Reset")                 # the page is up and connected
                if not idle_browser:                             # once: the page's own cost, no frames sent
                    time.sleep(1.0)
                    cpu0, wall0 = process_tree_cpu(browser.pid), time.perf_counter()
                    time.sleep(min(args.seconds, 3.0))
                    idle_browser.append(100.0 * (process_tree_cpu(browser.pid) - cpu0)
                                        / (time.perf_counter() - wall0))
                t_end = time.perf_counter() + args.browser_warmup    # it gets the scene and renders
                while time.perf_counter() < t_end:
                    sim.step()
                    if viewer.due():
                        viewer.publish_simulator(sim, None)
                results["viewer + browser"].append(
                    run(sim, args.seconds, viewer, {"viewer process": viewer.pid, "chromium": browser.pid}))
    finally:
        viewer.close()
    load1 = os.getloadavg()
    # the stepping process's cost of one frame, in isolation: poses from oMg + contacts into shared memory
    frame_viewer = ViewerProcess.__new__(ViewerProcess)      # no second child: only the buffer is exercised
    from contact_sim_ros.viewer.scene_viewer import FrameBuffer, describe_scene, moving_geometry_ids
    frame_viewer.buffer = FrameBuffer(moving_geometry_ids(describe_scene(sim.model)))
    n_frames = 2000
    cpu0 = time.process_time()
    for _ in range(n_frames):
        frame_viewer.publish_simulator(sim, 1.0)
    frame_cpu = (time.process_time() - cpu0) / n_frames
    cpu0 = time.process_time()
    for _ in range(20000):
        frame_viewer.buffer.events()
    poll_cpu = (time.process_time() - cpu0) / 20000
    n_contacts = sim.contacts.size if sim.contacts is not None else 0

    def med(config, key):
        return statistics.median(r[key] for r in results[config]) if results[config] else float("nan")

    def overhead(config, key):
        # per repeat against the no-viewer run of the same repeat, then the median
        pairs = zip(results[config], results["no viewer"])
        return 100.0 * statistics.median(r[key] / b[key] - 1.0 for r, b in pairs) if results[config] else float("nan")

    print(f"default scene, engine {args.engine}, dt 1 ms, {args.repeats} x {args.seconds:g} s per configuration; "
          f"viewer update rate {1.0 / viewer.update_period:g} Hz; load average {load0[0]:.2f} -> {load1[0]:.2f} "
          f"on {os.cpu_count()} cores")
    print(f"{'configuration':20s} {'CPU us/step':>12s} {'CPU overhead':>13s} {'wall us/step':>13s} "
          f"{'wall overhead':>14s} {'viewer proc %':>14s} {'chromium %':>11s} {'frames/s':>9s}")
    rows = []
    for config in CONFIGS:
        if not results[config]:
            continue
        vp = med(config, "viewer process") if config != "no viewer" else float("nan")
        ch = med(config, "chromium") if config == "viewer + browser" else float("nan")
        row = (config, 1e6 * med(config, "cpu"), overhead(config, "cpu") if config != "no viewer" else 0.0,
               1e6 * med(config, "wall"), overhead(config, "wall") if config != "no viewer" else 0.0, vp, ch,
               med(config, "shown") if config != "no viewer" else float("nan"))
        rows.append(row)
        print(f"{row[0]:20s} {row[1]:12.1f} {row[2]:+12.1f}% {row[3]:13.1f} {row[4]:+13.1f}% "
              f"{'-' if vp != vp else f'{vp:.1f}':>14s} {'-' if ch != ch else f'{ch:.1f}':>11s} "
              f"{'-' if row[7] != row[7] else f'{row[7]:.1f}':>9s}")
    print("overhead: median over repeats of (configuration / no viewer of the same repeat - 1); "
          "target <= +10 %")
    rate = 1.0 / viewer.update_period
    if idle_browser:
        print(f"Chromium showing the page with no frame sent and the simulation idle: {idle_browser[0]:.1f} % of "
              f"a core (the page renders continuously)")
    print(f"one frame in the stepping process ({len(frame_viewer.buffer.geometry_ids)} moving geometries, "
          f"{n_contacts} contacts): {1e6 * frame_cpu:.1f} us CPU; button poll per step: {1e6 * poll_cpu:.2f} us; "
          f"expected overhead at {rate:g} Hz: {100 * (frame_cpu * rate * med('no viewer', 'wall') + poll_cpu) / med('no viewer', 'cpu'):.2f} %")
    if args.figure:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
        fig, ax = plt.subplots(figsize=(7, 3.6))
        x = np.arange(len(rows))
        ax.bar(x - 0.2, [r[1] for r in rows], 0.4, label="CPU time of the stepping process")
        ax.bar(x + 0.2, [r[3] for r in rows], 0.4, label="wall time")
        base_cpu, base_wall = rows[0][1], rows[0][3]
        ax.axhline(1.1 * base_cpu, color="C0", ls="--", lw=0.8, label="+10 % of no-viewer CPU")
        ax.axhline(1.1 * base_wall, color="C1", ls=":", lw=0.8, label="+10 % of no-viewer wall")
        ax.set_xticks(x, [r[0] for r in rows])
        ax.set_ylabel("median per step (us)")
        ax.set_title(f"viewer overhead, default scene, {args.engine} (load {load0[0]:.1f} on {os.cpu_count()} cores)",
                     fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        fig.savefig(args.figure, dpi=110)
        print(f"figure: {args.figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
