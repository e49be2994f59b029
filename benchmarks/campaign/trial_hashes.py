"""Bit-for-bit check of full pick_shake_place campaign trials across a change of the control emulation (issue 45
item 3: the control period's Python).

    python benchmarks/campaign/trial_hashes.py --save /tmp/trials_before.json     # on the old commit
    python benchmarks/campaign/trial_hashes.py --check /tmp/trials_before.json    # exit 1 on a difference

Runs full-task trials (the 12 s task at a 1 ms step, as ``benchmarks/campaign/run.py --full-task --time-step
0.001``) of scenes/campaigns/pick_shake_place.yaml in process: by default TAMSI trials 1 and 2 (successes) and
Lagged trials 3 (a success) and 7 (a failure, dropped after the shake). Per trial one SHA-256 over the bytes of q
and v after every control period (``run_trial``'s ``on_period``) and one over every result row's number and text
(not the wall / CPU times, the worker's pid and memory). A change that keeps the arithmetic keeps every hash.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from contact_sim_ros.scenarios.campaign import load_campaign, run_trial  # noqa: E402

TRIALS = (("tamsi", 1), ("tamsi", 2), ("lagged", 3), ("lagged", 7))
NOT_HASHED = ("wall_time_s", "cpu_time_s", "worker_pid", "worker_rss_mb", "n.wall_time_s", "n.real_time_factor")


def trial_hashes(engine: str, k: int, campaign: str, time_step: float) -> dict:
    """{'periods': hash of q, v after every control period, 'row': hash of the result row, 'periods_count',
    'success'} of full-task trial ``k`` on ``engine``."""
    spec = load_campaign(campaign)
    spec = type(spec)(**{**spec.__dict__, "engines": (engine,), "controller": {}, "time_step": time_step})
    h = hashlib.sha256()
    count = [0]

    def on_period(sim):
        h.update(np.ascontiguousarray(sim.q).tobytes())
        h.update(np.ascontiguousarray(sim.v).tobytes())
        count[0] += 1
    row = run_trial(spec, k, engine, on_period=on_period)
    r = hashlib.sha256()
    for key in sorted(row):
        if key not in NOT_HASHED:
            r.update(repr((key, row[key])).encode())
    return {"periods": h.hexdigest(), "row": r.hexdigest(), "periods_count": count[0],
            "success": bool(row["success"]), "reason": str(row["reason"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--campaign", default=str(REPO / "scenes" / "campaigns" / "pick_shake_place.yaml"))
    ap.add_argument("--time-step", type=float, default=0.001)
    ap.add_argument("--trials", default=",".join(f"{e}:{k}" for e, k in TRIALS),
                    help="engine:trial,... (default tamsi:1,tamsi:2,lagged:3,lagged:7)")
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", metavar="JSON")
    group.add_argument("--check", metavar="JSON")
    args = ap.parse_args()
    out = {}
    for item in args.trials.split(","):
        engine, k = item.split(":")
        out[item] = trial_hashes(engine, int(k), args.campaign, args.time_step)
        print(f"{item}: {out[item]['periods_count']} periods, success {out[item]['success']}, "
              f"periods {out[item]['periods'][:16]}, row {out[item]['row'][:16]}", flush=True)
    if args.save:
        Path(args.save).write_text(json.dumps(out, indent=1))
        return 0
    saved = json.loads(Path(args.check).read_text())
    bad = [item for item in out if saved.get(item, {}).get("periods") != out[item]["periods"]
           or saved.get(item, {}).get("row") != out[item]["row"]]
    print("all trials bit-identical" if not bad else f"DIFFERENT: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
