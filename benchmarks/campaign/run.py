"""Benchmark: grasp-validation campaign throughput (contact_sim_ros/scenarios/campaign.py).

    python benchmarks/campaign/run.py [--trials 8] [--campaign scenes/campaigns/pick_shake_place.yaml]
                                      [--engine tamsi] [--time-step 0.001] [--full-task] [--workers 1,2]
                                      [--breakdown 3] [--rss-every N]

Runs the same ``--trials`` trials of the campaign on local Ray with each worker count of ``--workers`` (fresh
output directories) and prints a table: trials per minute, mean wall and CPU time per trial (the worker's
process time: CPU time per trial growing with the workers means they slow each other down - memory bandwidth,
caches -, wall time growing at the same CPU time means too few cores for the processes), scaling efficiency
(trials/min with 2 workers / (2 x with 1)), the CPU seconds the campaign cost in its worker processes, in the
driver (this process: ray.wait, Parquet, the callbacks) and in Ray's own processes (raylet, GCS, ...; their
CPU time up to the last row), and the 1000-trial estimate at the last rate. ``--full-task``: the
full 12 s pick_shake_place at the campaign's time step instead of the campaign file's shortened task.
``--breakdown K``: first runs K warm trials in this process and splits a trial's CPU time into construction
(scene, model, Simulator, controllers: everything outside the control loop), physics (Simulator.step: the contact
query, the engine, the rest), the per-step control emulation (the control periods' steps less physics:
ControllerManager.update in the steps that run the controllers' Python, the rest: the compiled steps of
driver/control_period.py, the command push and rate limits) and per control period the scenario controller, the broadcasters and the rest of the loop; the
first (cold) trial's extra time is the per-worker start-up (imports, compiled-kernel cache load). ``--workers
0``: only the breakdown, no campaign.
``--rss-every N``: a memory table, every N recorded trials: the driver's resident memory and each worker's (as
reported with its last row); and, as the campaign runs, a line every N trials (flushed: a long run can be
followed with ``tail -f``): trials so far, elapsed wall time, trials per minute, mean worker CPU s per trial,
the 1000-trial time at that rate, the driver's and the workers' resident memory.

The throughput run (1000 full-task trials, 2 workers; issue 19's target < 30 min, issue 30's < 10 min; 8.4 min on
the project's 2-vCPU Xeon on 2026-12-03, docs/benchmarks.md)::

    scripts/venv_run.sh python benchmarks/campaign/run.py --full-task --time-step 0.001 --trials 1000 \
        --workers 2 --rss-every 50 2>&1 | tee /tmp/campaign_1000.log
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import contact_sim_ros.clients.inprocess_link as inprocess_link  # noqa: E402
import contact_sim_ros.clients.pick_shake_place as psp  # noqa: E402
import contact_sim_ros.scenarios.campaign as campaign_module  # noqa: E402
from contact_sim_ros.driver.controller_manager import ControllerManager  # noqa: E402
from contact_sim_ros.driver.loop import SteppingLoop  # noqa: E402
from contact_sim_ros.engines.base import ContactEngine  # noqa: E402
from contact_sim_ros.geometry.contact_query import ContactQuery  # noqa: E402
from contact_sim_ros.scenarios.campaign import (load_campaign, read_results, resident_mb,  # noqa: E402
                                                run_campaign, run_trial)
from contact_sim_ros.scenarios.runner import SCENARIOS  # noqa: E402
from contact_sim_ros.sim.simulator import Simulator  # noqa: E402


def tree_cpu_s() -> dict:
    """CPU time (user + system, s) of this process and each of its live descendants (Ray's raylet, GCS, workers
    of a local ``ray.init()``): pid -> (name, s), read from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    procs = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        procs[int(d.name)] = (name, int(rest[1]), (int(rest[11]) + int(rest[12])) / tick)
    me, out, frontier = os.getpid(), {}, [os.getpid()]
    while frontier:
        pid = frontier.pop()
        if pid in procs:
            out[pid] = (procs[pid][0], procs[pid][2])
        frontier += [c for c, (_, ppid, _) in procs.items() if ppid == pid and c not in out]
    out[me] = ("driver", time.process_time())
    return out


def breakdown(spec, engine: str, trials: int) -> None:
    """CPU time (this process's: the trial runs in one thread) of ``trials`` warm trials split into
    construction, physics (the contact query, the engine, the rest of Simulator.step), the per-step control
    emulation (ControllerManager.update, the command push and rate limits) and, per control period, the
    broadcasters and the scenario controller (CPU, not wall: a loaded machine stretches wall time; the timers
    add ~1 us per wrapped call)."""
    clock = time.process_time
    targets = {"physics": (Simulator, "step"), "contact query": (ContactQuery, "update"),
               "engine": (ContactEngine, "step"), "period": (inprocess_link, "run_control_period"),
               "controller_manager": (ControllerManager, "update"), "broadcasters": (SteppingLoop, "publish_now"),
               "scenario controller": (psp.PickShakePlace, "tick"),
               "loop": (campaign_module, "run_controller")}     # (run_trial calls the name it imported)
    acc = dict.fromkeys(targets, 0.0)
    originals = {key: getattr(owner, name) for key, (owner, name) in targets.items()}

    def timed(key, f):
        def call(*a, **kw):
            t = clock()
            try:
                return f(*a, **kw)
            finally:
                acc[key] += clock() - t
        return call

    t = clock()
    run_trial(spec, 0, engine)
    cold = clock() - t
    for key, (owner, name) in targets.items():
        setattr(owner, name, timed(key, originals[key]))
    try:
        t = clock()
        rows = [run_trial(spec, k, engine) for k in range(1, trials + 1)]
        total = (clock() - t) / trials
    finally:
        for key, (owner, name) in targets.items():
            setattr(owner, name, originals[key])
    m = {k: v / trials for k, v in acc.items()}
    steps = sum(r["sim_time_s"] for r in rows) / trials / spec.time_step

    def us(x):
        return f"{x:.3f} s ({1e6 * x / steps:.0f} us/step, {x / total:.0%})"
    control = m["period"] - m["physics"]
    print(f"one trial, {engine}, in this process, CPU s (mean of {trials} warm trials, {steps:.0f} steps each, load "
          f"{os.getloadavg()[0]:.1f}):")
    print(f"  total {total:.3f} s ({1e6 * total / steps:.0f} us/step) | construction {total - m['loop']:.3f} s | "
          f"first (cold) trial {cold:.3f} s (+{cold - total:.3f} s per worker start-up)")
    print(f"  physics (Simulator.step) {us(m['physics'])}: contact query {us(m['contact query'])}, engine "
          f"{us(m['engine'])}, the rest {us(m['physics'] - m['contact query'] - m['engine'])}")
    print(f"  per-step control emulation {us(control)}: ControllerManager.update (the Python updates) "
          f"{us(m['controller_manager'])}, the rest (compiled steps, command push and limits) "
          f"{us(control - m['controller_manager'])}")
    print(f"  per control period: scenario controller {us(m['scenario controller'])}, broadcasters "
          f"{us(m['broadcasters'])}, the rest of the loop "
          f"{us(m['loop'] - m['period'] - m['scenario controller'] - m['broadcasters'])}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--campaign", default=str(REPO / "scenes" / "campaigns" / "pick_shake_place.yaml"))
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--engine", default="tamsi")
    ap.add_argument("--time-step", type=float, default=None)
    ap.add_argument("--full-task", action="store_true")
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts (default 1,2)")
    ap.add_argument("--breakdown", type=int, default=0, metavar="K")
    ap.add_argument("--rss-every", type=int, default=0, metavar="N")
    args = ap.parse_args(argv)
    spec = load_campaign(args.campaign)
    controller = {} if args.full_task else dict(spec.controller)
    spec = type(spec)(**{**spec.__dict__, "engines": (args.engine,), "controller": controller,
                         "time_step": args.time_step or spec.time_step})
    if spec.time_step is None:
        spec = type(spec)(**{**spec.__dict__, "time_step": SCENARIOS[spec.scenario].time_step})
    load0 = os.getloadavg()
    if args.breakdown:
        breakdown(spec, args.engine, args.breakdown)
    rows, memory = [], []
    for workers in (int(w) for w in args.workers.split(",") if int(w) > 0):
        worker_rss: dict = {}
        cpu0 = time.process_time()
        cpu = {}

        wall0, worker_cpu = time.monotonic(), [0.0]

        def sample(row, n, workers=workers, worker_rss=worker_rss, cpu=cpu, wall0=wall0, worker_cpu=worker_cpu):
            worker_rss[row.get("worker_pid")] = row.get("worker_rss_mb")
            worker_cpu[0] += row.get("cpu_time_s") or 0.0
            if n == 1 or n == args.trials or n % 4 == 0:
                cpu.update(tree_cpu_s())      # Ray's processes end with the campaign: sample before
            if args.rss_every and (n == 1 or n % args.rss_every == 0):
                memory.append((workers, n, resident_mb(), dict(worker_rss)))
                wall = time.monotonic() - wall0
                rate = 60.0 * n / wall if wall > 0 else float("nan")
                print(f"  [{workers} worker(s)] {n:>5} trials {wall:7.0f} s | {rate:6.2f} trials/min | "
                      f"{worker_cpu[0] / n:5.2f} CPU s/trial | 1000 trials: {1000 / rate:5.1f} min | load "
                      f"{os.getloadavg()[0]:.1f} | RSS MB driver {resident_mb():.1f}, workers "
                      + " ".join(f"{mb:.1f}" for _, mb in sorted(worker_rss.items(), key=lambda kv: str(kv[0]))),
                      flush=True)

        with tempfile.TemporaryDirectory(prefix="campaign_bench_") as out:
            s = run_campaign(spec, out, workers=workers, trials=args.trials, progress=False, on_row=sample)
            table = read_results(out).to_pylist()
        n = len(table)
        mean = {k: sum(r[k] for r in table) / n for k in ("wall_time_s", "cpu_time_s", "sim_time_s")}
        ok = sum(bool(r["success"]) for r in table)
        pids = {r["worker_pid"] for r in table}
        cpu["driver"] = ("driver", time.process_time() - cpu0)
        by_kind = {"workers": sum(c for p, (_, c) in cpu.items() if p in pids),
                   "driver": cpu.pop("driver")[1],
                   "Ray": sum(c for p, (nm, c) in cpu.items() if p not in pids and p != os.getpid())}
        rows.append((workers, n, s["wall_s"], 60.0 * n / s["wall_s"], mean, ok, by_kind))
    if not rows:
        return 0
    load = os.getloadavg()
    print(f"campaign benchmark: {spec.scenario}, engine {args.engine}, time step {spec.time_step} s, "
          f"{'full task' if args.full_task else 'campaign task'}, {os.cpu_count()} CPUs, load average (1 min) "
          f"{load0[0]:.1f} before, {load[0]:.1f} after")
    print(f"{'workers':>7} {'trials':>6} {'wall s':>7} {'trials/min':>10} {'wall s/trial':>12} {'CPU s/trial':>11} "
          f"{'CPU/wall':>8} {'sim s':>6} {'RTF/trial':>9} {'success':>7} {'CPU s: workers, driver, Ray':>28}")
    for w, n, wall, rate, m, ok, c in rows:
        print(f"{w:>7} {n:>6} {wall:>7.1f} {rate:>10.2f} {m['wall_time_s']:>12.2f} {m['cpu_time_s']:>11.2f} "
              f"{m['cpu_time_s'] / m['wall_time_s']:>8.2f} {m['sim_time_s']:>6.2f} "
              f"{m['sim_time_s'] / m['wall_time_s']:>9.2f} {ok:>7} "
              f"{c['workers']:>10.1f} {c['driver']:>7.1f} {c['Ray']:>7.1f}")
    if len(rows) >= 2 and rows[0][0] == 1:
        eff = rows[1][3] / (rows[1][0] * rows[0][3])
        print(f"scaling efficiency 1 -> {rows[1][0]} workers: {eff:.2f} (target >= 0.90)")
    print(f"1000 trials at the {rows[-1][0]}-worker rate: {1000 / rows[-1][3]:.1f} min (target < 10)")
    if memory:
        print("resident memory (MB) every", args.rss_every, "trials: driver | each worker (by pid, at its last row)")
        for w, n, drv, wk in memory:
            print(f"  {w} worker(s), {n:>5} trials: driver {drv:7.1f} | "
                  + " ".join(f"{pid}:{mb:.1f}" for pid, mb in sorted(wk.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
