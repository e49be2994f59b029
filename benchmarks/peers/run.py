"""Ours vs Drake 1.51.1 vs MuJoCo 4.0.0 on the same scenes (issue 18, item 1; issue 45, item 4): one command,
a table on stdout.

    python benchmarks/peers/run.py                      # all cases, 3 rounds (make bench BENCH=peers)
    python benchmarks/peers/run.py --cases box,iiwa --rounds 5 --json out.json
    python benchmarks/peers/run.py --profile            # also the per-step profile (step_profile.py)
    python benchmarks/peers/run.py --targets none       # without the TAMSI speed-target scenes

The full run also times, in the same rounds, the TAMSI speed-target scenes of the papers (targets_case.py: the
gripper shaking the mug >= 40x real time, the Allegro hand >= 2.14x; the papers' C++ figures).

Every case runs in a fresh process: ours in the project's venv (scripts/venv_run.sh python ours_case.py),
Drake and MuJoCo in benchmarks/peers/.venv-drake (created here from the pinned requirements-peers.txt on first
use; git-ignored; never the project's venv). MuJoCo (mujoco_case.py: the scene written as MJCF, MuJoCo's default
solver at the case's time step) runs the rows of cases.MUJOCO_CASES, once per row (it has no engine choice).
Accuracy beside the speed (cases.py): creep = largest drift of a resting object (m), penetration = deepest
sampled penetration into the ground (m), per side from its first round. Runs are interleaved (round r: ours, Drake, next engine ...; the order
flips every round) and the table gives the median over the rounds of the CPU time per step
(time.process_time; the first step untimed) next to the wall time, the ratio ours / Drake, and the largest
deviation between the two trajectories (free-body positions in m, or joint positions for the iiwa, sampled
every 10 ms). The load average and the CPU are printed and stored in the JSON (default
benchmarks/peers/out/peers.json).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from cases import CASES, MUJOCO_CASES, creep  # noqa: E402

VENV = HERE / ".venv-drake"
REQUIREMENTS = HERE / "requirements-peers.txt"
DRAKE_PY = VENV / "bin" / "python"


def ensure_drake_venv() -> None:
    """Create / refresh .venv-drake from requirements-peers.txt (a hash stamp skips a no-op)."""
    stamp = VENV / ".requirements.sha256"
    want = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if DRAKE_PY.exists() and stamp.exists() and stamp.read_text().strip() == want:
        return
    print(f"[peers] installing Drake into {VENV} from {REQUIREMENTS.name} (first use only) ...", flush=True)
    python = os.environ.get("PEERS_PYTHON", "python3.11")
    subprocess.run([python, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(DRAKE_PY), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)], check=True)
    stamp.write_text(want + "\n")


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        info = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        return f"{info.get('Model name', '?').strip()}, {info.get('CPU(s)', '?').strip()} CPUs"
    except OSError:
        return platform.processor() or "?"


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def run_one(side: str, case: str, engine: str, duration: float | None) -> dict:
    script = HERE / {"ours": "ours_case.py", "drake": "drake_case.py", "mujoco": "mujoco_case.py"}[side]
    args = [str(script), "--case", case, "--engine", engine]
    if duration:
        args += ["--duration", str(duration)]
    cmd = ([str(ROOT / "scripts" / "venv_run.sh"), "python"] if side == "ours" else [str(DRAKE_PY)]) + args
    load0 = loadavg()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"{side} {case} {engine} failed:\n{p.stderr[-3000:]}")
    line = [x for x in p.stdout.splitlines() if x.startswith("{")][-1]
    d = json.loads(line)
    d["load"] = [load0, loadavg()]
    return d


def run_target(scene: str) -> dict:
    """One timing run of a TAMSI speed-target scene (targets_case.py) in a fresh process of the project's venv."""
    cmd = [str(ROOT / "scripts" / "venv_run.sh"), "python", str(HERE / "targets_case.py"), "--scene", scene]
    load0 = loadavg()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"target {scene} failed:\n{p.stderr[-3000:]}")
    d = json.loads([x for x in p.stdout.splitlines() if x.startswith("{")][-1])
    d["load"] = [load0, loadavg()]
    return d


def deviation(a: dict, b: dict) -> float:
    """Largest distance between the two trajectories at common sample times (m or rad)."""
    ib = {n: i for i, n in enumerate(b["names"])}
    sb = {round(t, 9): p for t, p in b["samples"]}
    worst = 0.0
    for t, pa in a["samples"]:
        pb = sb.get(round(t, 9))
        if pb is None:
            continue
        for i, n in enumerate(a["names"]):
            if n in ib:
                d = sum((x - y) ** 2 for x, y in zip(pa[i], pb[ib[n]])) ** 0.5
                worst = max(worst, d)
    return worst


def fmt_dev(x: float, unit: str) -> str:
    if x < 1e-9:
        return f"{x:.1e} {unit}"
    if x < 1e-3:
        return f"{x * 1e6:.3g} u{unit}"
    if x < 1:
        return f"{x * 1e3:.3g} m{unit}"
    return f"{x:.3g} {unit}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {list(CASES)}")
    ap.add_argument("--engines", default=None, help="comma-separated subset of the engines (default: per case)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=None, help="override every case's sim duration (s)")
    ap.add_argument("--json", default=str(HERE / "out" / "peers.json"))
    ap.add_argument("--no-mujoco", action="store_true", help="without the MuJoCo column")
    ap.add_argument("--profile", action="store_true", help="then run step_profile.py (per-step stages, floor)")
    ap.add_argument("--targets", default=None,
                    help="TAMSI speed-target scenes timed in the same rounds (gripper,allegro; 'none'); default: "
                         "both when every case runs, none for a --cases subset")
    a = ap.parse_args()
    ensure_drake_venv()
    cases = [CASES[c] for c in a.cases.split(",")]
    wanted = set(a.engines.split(",")) if a.engines else None
    jobs = [(c, e) for c in cases for e in c.engines if wanted is None or e in wanted]
    if a.targets is None:
        a.targets = "gripper,allegro" if a.cases == ",".join(CASES) and wanted is None else "none"
    targets = [] if a.targets == "none" else a.targets.split(",")
    target_runs = {t: [] for t in targets}
    start = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    start_load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"[peers] {start}; CPU: {cpu_model()}; load average {Path('/proc/loadavg').read_text().split()[:3]}; "
          f"{len(jobs)} cases x {a.rounds} rounds x 2 sides (+ MuJoCo once per row)", flush=True)
    results = {(c.name, e): {"ours": [], "drake": []} for c, e in jobs}
    mujoco = {c.name: [] for c in cases if c.name in MUJOCO_CASES and not a.no_mujoco}
    for r in range(a.rounds):
        done_mj = set()
        for c, e in jobs:
            sides = ["ours", "drake"] if r % 2 == 0 else ["drake", "ours"]
            if c.name in mujoco and c.name not in done_mj:
                sides.insert(1, "mujoco")
                done_mj.add(c.name)
            for side in sides:
                d = run_one(side, c.name, e, a.duration)
                (mujoco[c.name] if side == "mujoco" else results[(c.name, e)][side]).append(d)
                print(f"  round {r + 1} {c.name:8s} {e:8s} {side:5s} cpu {d['cpu_s'] / d['steps'] * 1e6:8.1f} us/step"
                      f"  wall {d['wall_s'] / d['steps'] * 1e6:8.1f} us/step  load {d['load'][0]:.1f}", flush=True)
        for t in targets:
            d = run_target(t)
            target_runs[t].append(d)
            print(f"  round {r + 1} {t:8s} tamsi    ours  cpu {d['cpu_s'] / d['steps'] * 1e6:8.1f} us/step"
                  f"  wall {d['wall_s'] / d['steps'] * 1e6:8.1f} us/step  load {d['load'][0]:.1f}  "
                  f"{d['sim_s'] / d['cpu_s']:.2f}x real time (CPU)", flush=True)
    end = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    loads = ([x for v in results.values() for s in v.values() for d in s for x in d["load"]]
             + [x for v in target_runs.values() for d in v for x in d["load"]]
             + [x for v in mujoco.values() for d in v for x in d["load"]])
    rows = []
    for c, e in jobs:
        v = results[(c.name, e)]
        med = {s: {k: statistics.median(d[k] / d["steps"] * 1e6 for d in v[s]) for k in ("cpu_s", "wall_s")}
               for s in ("ours", "drake")}
        dev = deviation(v["ours"][0], v["drake"][0])
        mj = mujoco.get(c.name) or []
        mj_cpu = statistics.median(d["cpu_s"] / d["steps"] * 1e6 for d in mj) if mj else None
        mj_wall = statistics.median(d["wall_s"] / d["steps"] * 1e6 for d in mj) if mj else None
        rows.append({"case": c.name, "title": c.title, "dt_ms": c.dt * 1e3, "engine": e,
                     "duration_s": a.duration or c.duration, "steps": v["ours"][0]["steps"],
                     "ours_cpu_us": med["ours"]["cpu_s"], "drake_cpu_us": med["drake"]["cpu_s"],
                     "ours_wall_us": med["ours"]["wall_s"], "drake_wall_us": med["drake"]["wall_s"],
                     "ratio_cpu": med["ours"]["cpu_s"] / med["drake"]["cpu_s"],
                     "ratio_wall": med["ours"]["wall_s"] / med["drake"]["wall_s"],
                     "deviation": dev, "deviation_unit": "m" if c.compare == "bodies" else "rad|m",
                     "mujoco_cpu_us": mj_cpu, "mujoco_wall_us": mj_wall,
                     "ratio_cpu_mujoco": med["ours"]["cpu_s"] / mj_cpu if mj else None,
                     "creep": {"ours": creep(c, v["ours"][0]), "drake": creep(c, v["drake"][0]),
                               "mujoco": creep(c, mj[0]) if mj else None},
                     "penetration": {"ours": v["ours"][0].get("penetration"),
                                     "drake": v["drake"][0].get("penetration"),
                                     "mujoco": mj[0].get("penetration") if mj else None},
                     "deviation_mujoco": deviation(v["ours"][0], mj[0]) if mj else None,
                     "drake_failed_at": v["drake"][0].get("failed_at"),
                     "ours_failed_at": v["ours"][0].get("failed_at")})
    print()
    print(f"Ours vs Drake 1.51.1 vs MuJoCo 4.0.0 (default solver), median of {a.rounds} interleaved rounds, "
          f"fresh process per run; {start} - {end}")
    print(f"CPU: {cpu_model()}; load average during the runs {min(loads):.1f} - {max(loads):.1f} "
          f"(median {statistics.median(loads):.1f}); us/step = CPU time (wall time)")
    print()
    print("| scene (dt) | engine | sim s | ours us/step | Drake us/step | MuJoCo us/step | ours / Drake | "
          "ours / MuJoCo | creep ours / Drake / MuJoCo | penetration ours / Drake / MuJoCo | deviation from Drake | "
          "note |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")

    def acc(d):
        return " / ".join("-" if d[k] is None else fmt_dev(d[k], "m") if d[k] > 0 else "0"
                          for k in ("ours", "drake", "mujoco"))
    for x in rows:
        unit = "m" if x["deviation_unit"] == "m" else "rad"
        mjc = "-" if x["mujoco_cpu_us"] is None else f"{x['mujoco_cpu_us']:.1f} ({x['mujoco_wall_us']:.1f})"
        mjr = "-" if x["ratio_cpu_mujoco"] is None else f"{x['ratio_cpu_mujoco']:.2f}"
        print(f"| {x['title']} ({x['dt_ms']:g} ms) | {x['engine']} | {x['duration_s']:g} | "
              f"{x['ours_cpu_us']:.0f} ({x['ours_wall_us']:.0f}) | {x['drake_cpu_us']:.0f} ({x['drake_wall_us']:.0f}) | "
              f"{mjc} | {x['ratio_cpu']:.2f} ({x['ratio_wall']:.2f}) | {mjr} | {acc(x['creep'])} | "
              f"{acc(x['penetration'])} | {fmt_dev(x['deviation'], unit)} | "
              + "; ".join(f"{who} failed at t = {x[key]:.3f} s (us/step up to there)"
                          for who, key in (("ours", "ours_failed_at"), ("Drake", "drake_failed_at")) if x[key])
              + " |")
    target_rows = []
    if targets:
        from targets_case import TARGETS
        print()
        print("TAMSI speed targets in the same rounds (sim.step loop, fresh process per run, median):")
        print()
        print("| scene (dt) | sim s | CPU us/step (wall) | real-time factor CPU (wall) | target | |")
        print("| --- | --- | --- | --- | --- | --- |")
        for t in targets:
            v = target_runs[t]
            cpu = statistics.median(d["cpu_s"] for d in v)
            wall = statistics.median(d["wall_s"] for d in v)
            goal, source = TARGETS[t]
            row = {"scene": t, "dt_ms": v[0]["dt"] * 1e3, "sim_s": v[0]["sim_s"], "cpu_us": cpu / v[0]["steps"] * 1e6,
                   "wall_us": wall / v[0]["steps"] * 1e6, "rtf_cpu": v[0]["sim_s"] / cpu,
                   "rtf_wall": v[0]["sim_s"] / wall, "target_rtf": goal, "target_source": source}
            target_rows.append(row)
            print(f"| {t} ({row['dt_ms']:g} ms) | {row['sim_s']:g} | {row['cpu_us']:.0f} ({row['wall_us']:.0f}) | "
                  f"{row['rtf_cpu']:.2f}x ({row['rtf_wall']:.2f}x) | >= {goal:g}x ({source}) | "
                  f"{'met' if row['rtf_cpu'] >= goal else 'NOT met'} (CPU) |")
    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"start": start, "end": end, "cpu": cpu_model(), "load_min": min(loads),
                               "load_max": max(loads), "rounds": a.rounds, "rows": rows, "targets": target_rows,
                               "runs": {f"{k[0]}/{k[1]}": {s: [{kk: d[kk] for kk in ("cpu_s", "wall_s", "steps",
                                                                                       "load")} for d in v[s]]
                                                           for s in v} for k, v in results.items()},
                               "mujoco_runs": {k: [{kk: d[kk] for kk in ("cpu_s", "wall_s", "steps", "load")}
                                                   for d in v] for k, v in mujoco.items()},
                               "loadavg_start_end": [start_load, Path("/proc/loadavg").read_text().split()[:3]]},
                              indent=1))
    print(f"\n[peers] JSON: {out}")
    if a.profile:
        subprocess.run([str(ROOT / "scripts" / "venv_run.sh"), "python", str(HERE / "step_profile.py")], cwd=ROOT,
                       check=True)


if __name__ == "__main__":
    main()
