"""Benchmark: grasp-validation campaign throughput (contact_sim_ros/scenarios/campaign.py).

    python benchmarks/campaign/run.py [--trials 8] [--campaign scenes/campaigns/pick_shake_place.yaml]
                                      [--engine tamsi] [--time-step 0.001] [--full-task]

Runs the same ``--trials`` trials of the campaign on local Ray with 1 and then 2 workers (fresh output
directories) and prints a table: trials per minute, mean wall time per trial, the physics share (the trial's
simulated steps x the engine's mean step time measured in the same run, from the per-trial CPU time), the
per-trial overhead beyond physics, scaling efficiency (trials/min with 2 workers / (2 x with 1)), and the
driver's resident memory before/after. ``--full-task``: the full 12 s pick_shake_place at the campaign's time
step instead of the campaign file's shortened task; the 1000-trial estimate is printed for the 2-worker rate.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from contact_sim_ros.scenarios.campaign import load_campaign, read_results, run_campaign  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--campaign", default=str(REPO / "scenes" / "campaigns" / "pick_shake_place.yaml"))
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--engine", default="tamsi")
    ap.add_argument("--time-step", type=float, default=None)
    ap.add_argument("--full-task", action="store_true")
    args = ap.parse_args(argv)
    spec = load_campaign(args.campaign)
    controller = {} if args.full_task else dict(spec.controller)
    spec = type(spec)(**{**spec.__dict__, "engines": (args.engine,), "controller": controller,
                         "time_step": args.time_step or spec.time_step})
    rows = []
    for workers in (1, 2):
        with tempfile.TemporaryDirectory(prefix="campaign_bench_") as out:
            rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            s = run_campaign(spec, out, workers=workers, trials=args.trials, progress=False)
            table = read_results(out).to_pylist()
            rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        wall_trial = sum(r["wall_time_s"] for r in table) / len(table)
        sim = sum(r["sim_time_s"] for r in table) / len(table)
        ok = sum(bool(r["success"]) for r in table)
        rows.append((workers, len(table), s["wall_s"], 60.0 * len(table) / s["wall_s"], wall_trial, sim, ok, rss0, rss1))
    load = os.getloadavg()
    print(f"campaign benchmark: {spec.scenario}, engine {args.engine}, time step {spec.time_step or 'scenario'} s, "
          f"{'full task' if args.full_task else 'campaign task'}, {os.cpu_count()} CPUs, load average "
          f"{load[0]:.1f} {load[1]:.1f}")
    print(f"{'workers':>7} {'trials':>6} {'wall s':>7} {'trials/min':>10} {'s/trial':>8} {'sim s':>6} "
          f"{'RTF/trial':>9} {'success':>7} {'driver RSS MB':>14}")
    for w, n, wall, rate, wt, sim, ok, r0, r1 in rows:
        print(f"{w:>7} {n:>6} {wall:>7.1f} {rate:>10.2f} {wt:>8.2f} {sim:>6.2f} {sim / wt:>9.2f} {ok:>7} "
              f"{r0:>6.0f}->{r1:<6.0f}")
    eff = rows[1][3] / (2 * rows[0][3])
    print(f"scaling efficiency 1 -> 2 workers: {eff:.2f} (target >= 0.90); "
          f"1000 trials at the 2-worker rate: {1000 / rows[1][3]:.1f} min (target < 30)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
