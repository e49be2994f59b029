"""Table I of Jain et al. 2012 (section V-E): computation time of the multi-link pendulum in minimal (MC) and
redundant (RC) coordinates. One command (prints the table, writes docs/figures/lcp_pendulum_table1.png and
benchmarks/lcp/out/table1.json):

    scripts/venv_run.sh python benchmarks/lcp/table1.py [--links 3,6,12,15,24,30] [--duration 5] [--dt 1e-3]
                                                        [--repeats 3] [--modes mc,rc_mixed,rc_schur]

Modes (see docs/benchmarks/lcp.md for why rc_mixed is the paper's comparison):

* mc:        minimal coordinates (n hinge angles), unilateral contacts only, Lambda by articulated-body columns;
* rc_mixed:  redundant coordinates (6n), the whole mixed LCP of eq. 34 over the contacts AND the 5n hinge
             constraints handed to the complementarity solver as one LCP (free multipliers split as
             lam+ - lam-, Lemke) -- what the paper did with PATH;
* rc_schur:  redundant coordinates with the hinge multipliers eliminated first (Schur complement of the
             bilateral block, dense Cholesky), so Lemke sees an LCP of the MC size: a stronger baseline than
             the paper's.

Each cell is the median over ``--repeats`` fresh runs of CPU time (time.process_time) and wall time
(time.perf_counter) for the whole simulated ``--duration`` (after a warm-up run per mode that loads every
compiled kernel); the per-step time (us) is that divided by the number of steps. The paper's numbers are for 5 s at
dt = 0.1 ms (50 000 steps); its ratio RC / MC is the target.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import pendulum  # noqa: E402

PAPER_TABLE_I = {3: (13.3258, 47.7948), 6: (10.5026, 68.7122), 12: (19.0632, 305.2764),
                 15: (21.7605, 558.0966), 24: (38.1993, 1899.8575), 30: (73.7386, 4100.5061)}
MODES = {"mc": ("minimal", "schur"), "rc_mixed": ("redundant", "split"), "rc_schur": ("redundant", "schur")}
LABELS = {"mc": "MC", "rc_mixed": "RC mixed LCP", "rc_schur": "RC Schur"}


_WARMED = set()


def measure(n, mode, duration, dt, repeats):
    """Median CPU and wall time (s) of ``repeats`` fresh runs, plus the run statistics of the last one."""
    coords, bilateral = MODES[mode]
    if mode not in _WARMED:
        # load every compiled kernel of the mode (contacts, impacts, LCP assembly, Lemke) before timing: a 6-link
        # chain through its floor and wall impacts (a 20-step warm-up never reached the contact kernels, so the
        # first timed 3-link run paid the numba cache loading / compilation)
        pendulum.PendulumSim(6, coords, dt=dt, bilateral=bilateral).run(5.0, record=False)
        _WARMED.add(mode)
    pendulum.PendulumSim(n, coords, dt=dt, bilateral=bilateral).run(20 * dt, record=False)   # warm-up
    cpu, wall = [], []
    for _ in range(repeats):
        sim = pendulum.PendulumSim(n, coords, dt=dt, bilateral=bilateral)
        c0, w0 = time.process_time(), time.perf_counter()
        trace = sim.run(duration, record=False)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return {"cpu": float(np.median(cpu)), "wall": float(np.median(wall)), "cpu_all": cpu, "wall_all": wall,
            "steps": int(round(duration / dt)), "max_contacts": trace.max_contacts, "failures": trace.failures,
            "lcp_solves": trace.lcp_solves}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--links", default="3,6,12,15,24,30")
    parser.add_argument("--duration", type=float, default=5.0, help="simulated time (s), paper 5")
    parser.add_argument("--dt", type=float, default=1e-3, help="time step (s), paper 1e-4")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default="mc,rc_mixed,rc_schur")
    parser.add_argument("--no-figure", action="store_true")
    parser.add_argument("--replot", action="store_true",
                        help="only redraw the figure from benchmarks/lcp/out/table1.json (no timing)")
    args = parser.parse_args(argv)
    if args.replot:
        saved = json.loads((HERE / "out" / "table1.json").read_text())
        results = {int(n): row for n, row in saved["results"].items()}
        figure(results, saved["args"]["modes"].split(","), argparse.Namespace(**saved["args"]))
        return results
    links = [int(x) for x in args.links.split(",")]
    modes = args.modes.split(",")
    unknown = set(modes) - set(MODES)
    if unknown or "mc" not in modes:
        parser.error(f"--modes must include mc and only {sorted(MODES)}; got {modes}")
    load = os.getloadavg()[0]
    print(f"## Table I: {args.duration:g} s simulated at dt = {args.dt * 1e3:g} ms ({round(args.duration / args.dt)}"
          f" steps; paper: 5 s at 0.1 ms), median of {args.repeats} runs, load average {load:.1f} at start")
    head = f"{'links':>5}"
    for m in modes:
        head += f" | {LABELS[m] + ' cpu s':>17} {'wall s':>7} {'us/step':>8}"
    for m in modes[1:]:
        head += f" | {LABELS[m] + '/MC cpu':>19} {'wall':>5}"
    head += f" | {'paper RC/MC':>11} | {'contacts':>8} {'fail':>4}"
    print(head)
    results = {}
    start = time.perf_counter()
    for n in links:
        row = {m: measure(n, m, args.duration, args.dt, args.repeats) for m in modes}
        results[n] = row
        line = f"{n:5d}"
        for m in modes:
            r = row[m]
            line += f" | {r['cpu']:17.3f} {r['wall']:7.3f} {1e6 * r['cpu'] / r['steps']:8.1f}"
        for m in modes[1:]:
            line += (f" | {row[m]['cpu'] / row['mc']['cpu']:19.1f} "
                     f"{row[m]['wall'] / row['mc']['wall']:5.1f}")
        paper = PAPER_TABLE_I.get(n)
        line += f" | {paper[1] / paper[0] if paper else float('nan'):11.1f}"
        line += (f" | {max(r['max_contacts'] for r in row.values()):8d} "
                 f"{sum(r['failures'] for r in row.values()):4d}")
        print(line, flush=True)
    print(f"(load average {os.getloadavg()[0]:.1f} at the end; {time.perf_counter() - start:.0f} s total)")
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    (out / "table1.json").write_text(json.dumps({"args": vars(args), "load_start": load, "results": results},
                                                indent=1))
    if not args.no_figure:
        figure(results, modes, args)
    return results


def figure(results, modes, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ns = sorted(results)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ax = axes[0]
    colors = {"mc": "C0", "rc_mixed": "C1", "rc_schur": "C2"}
    for m, marker in zip(modes, "osd"):
        ax.semilogy(ns, [1e6 * results[n][m]["cpu"] / results[n][m]["steps"] for n in ns], marker + "-",
                    color=colors[m], label=f"{LABELS[m]} (CPU, this work)")
    paper_ns = [n for n in ns if n in PAPER_TABLE_I]
    ax.semilogy(paper_ns, [PAPER_TABLE_I[n][0] / 5e4 * 1e6 for n in paper_ns], "o:", color="gray",
                label="MC (paper)")
    ax.semilogy(paper_ns, [PAPER_TABLE_I[n][1] / 5e4 * 1e6 for n in paper_ns], "s:", color="black",
                label="RC (paper)")
    ax.set_xlabel("number of links")
    ax.set_ylabel("time per step (us)")
    ax.set_title(f"Table I per step (dt = {args.dt * 1e3:g} ms; paper 0.1 ms)")
    ax.legend(fontsize=8)
    ax = axes[1]
    for m in modes[1:]:
        ax.plot(ns, [results[n][m]["cpu"] / results[n]["mc"]["cpu"] for n in ns], {"rc_mixed": "s", "rc_schur": "d"}[m]
                + "-", color=colors[m], label=f"{LABELS[m]} / MC (CPU)")
    ax.plot(paper_ns, [PAPER_TABLE_I[n][1] / PAPER_TABLE_I[n][0] for n in paper_ns], "k:", marker="x",
            label="paper RC / MC")
    ax.set_xlabel("number of links")
    ax.set_ylabel("speed-up of minimal coordinates")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    fig.tight_layout()
    for path in (HERE / "out" / "lcp_pendulum_table1.png", ROOT / "docs" / "figures" / "lcp_pendulum_table1.png"):
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        print(f"  wrote {path}")
    plt.close(fig)


if __name__ == "__main__":
    main()
