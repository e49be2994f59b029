"""Per-step cost of the contact query and of the whole simulator step on four scenes, before/after side by side.

    python benchmarks/contact_query/steps.py                  # current tree vs the hot-path files of --baseline
    python benchmarks/contact_query/steps.py --baseline none  # current tree only
    python benchmarks/contact_query/steps.py --scenes gripper allegro

Scenes: the TAMSI gripper shaking a mug (h = 3 ms), the Allegro hand holding a mug (h = 0.7 ms), a Panda
(franka preset) over a table with a bottle and a box (h = 1 ms, benchmarks/simulator's scene) and the ICF clutter
(40 free bodies, Lagged, dt = 2 ms). Each scene first runs ``--settle`` s of sim time from its initial state
(objects resting, grasps closed); then ``ContactQuery.update`` and ``Simulator.step`` are timed, CPU time
(time.process_time: not inflated when the 2-core machine is shared) and wall time, medians over blocks.

Before/after: the "before" column runs this same script in a subprocess on a copy of the current package whose
hot-path files (contact_sim_ros/geometry/, sim/simulator.py, model/free_body_motion.py, engines/base.py) are
taken from git revision ``--baseline`` (default: the commit before the hot-path work); engines and everything
else are the current ones, so the difference is the hot path only. The copy lives in
/tmp/contact_sim_baseline_<rev>/ and is reused (its numba caches too). The settle runs of both are compared:
``max|dq|`` is the largest configuration difference over the settle trajectory (round-off differences grow in
the chaotic clutter and grasp scenes; the gripper stays bit-identical).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
HOT_PATH = ["contact_sim_ros/geometry", "contact_sim_ros/sim/simulator.py",
            "contact_sim_ros/model/free_body_motion.py", "contact_sim_ros/engines/base.py"]
DEFAULT_BASELINE = "0f67bce^"        # the commit before the hot-path work (geometry kernels, simulator)


def panda_scene() -> dict:
    """benchmarks/simulator's scene: franka preset over a table with a bottle and a box."""
    spec = importlib.util.spec_from_file_location("simulator_benchmark", ROOT / "benchmarks" / "simulator" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.scene("franka")


# name: (scene, engine, time step s)
SCENES = {
    "gripper": ("scenes/tamsi_gripper_mug.yaml", "tamsi", 3e-3),
    "allegro": ("scenes/tamsi_allegro_mug.yaml", "tamsi", 7e-4),
    "panda": (None, "tamsi", 1e-3),
    "clutter": ("scenes/icf_clutter.yaml", "lagged", 2e-3),
}


def _per_call(fn, calls: int, blocks: int = 5) -> tuple[float, float]:
    """(CPU, wall) microseconds per call: medians over ``blocks`` blocks of calls // blocks calls."""
    per = max(1, calls // blocks)
    cpu, wall = [], []
    for _ in range(blocks):
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(per):
            fn()
        cpu.append((time.process_time() - c0) / per)
        wall.append((time.perf_counter() - w0) / per)
    return float(np.median(cpu) * 1e6), float(np.median(wall) * 1e6)


def measure(names, settle: float, calls: int) -> dict:
    from contact_sim_ros.sim.scene import load_scene
    from contact_sim_ros.sim.simulator import Simulator
    out = {}
    for name in names:
        path, engine, dt = SCENES[name]
        scene = load_scene(str(ROOT / path) if path else panda_scene())
        sim = Simulator(scene, engine=engine, time_step=dt)
        qs = []
        for _ in range(int(round(settle / dt))):
            sim.step(strict=True)
            qs.append(sim.q.copy())
        cq = sim.contact_query
        cq.update(sim.pin_data, sim.geometry_data)
        stats = dict(cq.stats)
        query = _per_call(lambda: cq.update(sim.pin_data, sim.geometry_data), calls)
        step = _per_call(lambda: sim.step(strict=True), calls)
        out[name] = {"query_cpu": query[0], "query_wall": query[1], "step_cpu": step[0], "step_wall": step[1],
                     "pairs": cq.num_pairs, "broad_phase": bool(cq.broad_phase), **stats,
                     "engine": engine, "dt": dt, "trajectory": np.array(qs).tolist()}
    return out


def baseline_tree(rev: str) -> Path:
    """A copy of the current package with the hot-path files of ``rev`` (reused across runs)."""
    sha = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, check=True, capture_output=True,
                         text=True).stdout.strip()
    tree = Path(f"/tmp/contact_sim_baseline_{sha}")
    pkg = tree / "contact_sim_ros"
    if pkg.exists():
        shutil.rmtree(pkg)
    shutil.copytree(ROOT / "contact_sim_ros", pkg, ignore=shutil.ignore_patterns("*.py[co]"),
                    dirs_exist_ok=True)
    for path in HOT_PATH:
        if (ROOT / path).is_dir():
            for f in (ROOT / path).glob("*.py"):
                (tree / path / f.name).unlink()
        listing = subprocess.run(["git", "ls-tree", "-r", "--name-only", sha, path], cwd=ROOT, check=True,
                                 capture_output=True, text=True).stdout.split()
        for f in listing:
            text = subprocess.run(["git", "show", f"{sha}:{f}"], cwd=ROOT, check=True, capture_output=True).stdout
            (tree / f).parent.mkdir(parents=True, exist_ok=True)
            (tree / f).write_bytes(text)
    return tree


def run_baseline(rev: str, names, settle: float, calls: int) -> dict:
    tree = baseline_tree(rev)
    env = dict(os.environ, PYTHONPATH=str(tree), CONTACT_SIM_SHARE_DIR=str(ROOT))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--baseline", "none", "--json", "--settle", str(settle),
           "--calls", str(calls), "--scenes", *names]
    done = subprocess.run(cmd, cwd=tree, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenes", nargs="*", default=list(SCENES), choices=list(SCENES))
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision, or 'none'")
    parser.add_argument("--settle", type=float, default=1.0, help="s of sim time before timing (compared)")
    parser.add_argument("--calls", type=int, default=200, help="timed calls per measurement")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.json:                             # the baseline subprocess
        sys.path.insert(0, os.getcwd())
        print(json.dumps(measure(args.scenes, args.settle, args.calls)))
        return 0
    sys.path.insert(0, str(ROOT))
    before = None
    if args.baseline != "none":
        print(f"before: hot-path files of {args.baseline} (subprocess) ...", flush=True)
        before = run_baseline(args.baseline, args.scenes, args.settle, args.calls)
    after = measure(args.scenes, args.settle, args.calls)
    load = os.getloadavg()[0]
    print(f"\nper-step contact query and simulator step, CPU us (wall us), medians of 5 blocks of {args.calls // 5}; "
          f"after {args.settle:g} s settle; load average {load:.2f} on {os.cpu_count()} cores")
    head = (f"{'scene':8s} {'engine':7s} {'dt ms':>5s} {'pairs':>5s} {'cand.':>5s} {'pts':>4s} "
            f"{'query before':>16s} {'query after':>16s} {'x':>5s} {'step before':>16s} {'step after':>16s} "
            f"{'x':>5s} {'max|dq|':>8s}")
    print(head)
    print("-" * len(head))
    for name in args.scenes:
        a = after[name]
        b = before[name] if before else None

        def cell(d, key):
            return f"{d[key + '_cpu']:7.0f} ({d[key + '_wall']:6.0f})" if d else f"{'-':>16s}"
        ratio_q = f"{b['query_cpu'] / a['query_cpu']:5.1f}" if b else f"{'-':>5s}"
        ratio_s = f"{b['step_cpu'] / a['step_cpu']:5.1f}" if b else f"{'-':>5s}"
        dq = f"{np.abs(np.array(a['trajectory']) - np.array(b['trajectory'])).max():8.1e}" if b else f"{'-':>8s}"
        print(f"{name:8s} {a['engine']:7s} {1e3 * a['dt']:5.1f} {a['pairs']:5d} {a['candidate_pairs']:5d} "
              f"{a['contacts']:4d} {cell(b, 'query'):>16s} {cell(a, 'query'):>16s} {ratio_q} "
              f"{cell(b, 'step'):>16s} {cell(a, 'step'):>16s} {ratio_s} {dq}")
    print("pairs = candidate pairs of the model, cand. = pairs narrow-phased per step, pts = contact points; "
          "x = CPU speed-up; real-time factor = dt / step time")
    for name in args.scenes:
        a = after[name]
        print(f"  {name:8s} real-time factor after: {1e6 * a['dt'] / a['step_cpu']:6.2f} (CPU)" +
              (f", before: {1e6 * a['dt'] / before[name]['step_cpu']:6.2f}" if before else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
