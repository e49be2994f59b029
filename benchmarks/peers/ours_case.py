"""One peer-benchmark case on OUR simulator, in a fresh process of the project's venv; prints one JSON line.

    scripts/venv_run.sh python benchmarks/peers/ours_case.py --case box --engine tamsi [--duration S]
        [--period-steps K]

The first step (kernels loaded from numba's cache, first-use allocations) is not timed; the remaining steps are
timed in CPU time (time.process_time) and wall time, recording the compared positions every ``sample`` s (the
sampling and the penetration measurement, cases.Penetration, are not timed). By default one ``Simulator.step()``
call per step; ``--period-steps K``: ``Simulator.advance(K)`` per K steps (a control period of K steps with no
controller: the fused free-body scenes run them in one compiled call), cut short where a sample is due.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import CASES, Penetration  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--engine", required=True)
    ap.add_argument("--duration", type=float, default=None)
    ap.add_argument("--period-steps", type=int, default=0,
                    help="time Simulator.advance(K) per K steps instead of step() per step (default: step())")
    a = ap.parse_args()
    c = CASES[a.case]
    from contact_sim_ros.sim.simulator import Simulator
    sim = Simulator(str(c.scene), engine=a.engine, time_step=c.dt)
    n = int(round((a.duration or c.duration) / c.dt))
    every = int(round(c.sample / c.dt))
    if c.compare == "bodies":
        names = [b.name for b in sim.model.free_bodies]

        def positions():
            return [list(sim.body_pose(b).translation) for b in names]
    else:
        names = list(sim.model.joint_names)

        def positions():
            return [[float(x)] for x in sim.joint_positions()]
    pen = Penetration(c)
    free = [b.name for b in sim.model.free_bodies]
    zi = list(sim.model.joint_names).index("box_z") if c.penetration == "planar" else None

    def sample():
        if c.penetration == "bodies":
            poses = {}
            for b in free:
                X = sim.body_pose(b)
                poses[b] = (X.translation, X.rotation)
            pen.add_bodies(poses)
        elif c.penetration == "planar":
            pen.add_planar(float(sim.joint_positions()[zi]))
        return positions()
    samples = [[0.0, sample()]]
    period = a.period_steps
    warm = 2 if period > 0 else 1
    if period > 0:
        sim.advance(2, strict=True)            # untimed: the same, and advance's compiled call (2 steps)
    else:
        sim.step(strict=True)                  # untimed: kernel cache load, first-use allocations
    failed = None
    done = n
    untimed = untimed_wall = 0.0
    c0, w0 = time.process_time(), time.perf_counter()

    def sample_untimed():
        nonlocal untimed, untimed_wall
        s0, sw = time.process_time(), time.perf_counter()       # sampling is not timed
        samples.append([round(sim.t, 9), sample()])
        untimed += time.process_time() - s0
        untimed_wall += time.perf_counter() - sw
    if period <= 0:
        for i in range(1, n):
            report = sim.step()
            if not report.ok:          # e.g. TAMSI's Newton iteration on the clutter: report, keep the timing
                failed, done = report.message[:200], i
                break
            if (i + 1) % every == 0:
                sample_untimed()
    else:                          # advance(K) per period, cut short where a sample is due
        i = warm                   # steps done
        while i < n:
            k = min(period, n - i, every - i % every)
            report = sim.advance(k)
            if not report.ok:
                failed, done = report.message[:200], i
                break
            i += k
            if i % every == 0:
                sample_untimed()
    cpu, wall = time.process_time() - c0 - untimed, time.perf_counter() - w0 - untimed_wall
    contacts = sim.contacts.size if sim.contacts is not None else 0
    print(json.dumps({"side": "ours", "case": a.case, "engine": a.engine, "period_steps": period,
                      "steps": max(done - warm, 1), "cpu_s": cpu,
                      "wall_s": wall, "names": names, "samples": samples, "penetration": pen.depth, "final_contacts": int(contacts),
                      "failed": failed, "failed_at": done * c.dt if failed else None}))


if __name__ == "__main__":
    main()
