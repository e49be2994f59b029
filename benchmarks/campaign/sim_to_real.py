"""Sensitivity of ``contact-sim campaign compare`` on a finished campaign: a held-apart "real" cell.

    python benchmarks/campaign/sim_to_real.py RESULTS [--trials 40] [--engine tamsi] [--friction-scale 1.3]
                                                      [--mass-scale 0.8] [--workers 2]

Reruns the first ``--trials`` trials of the campaign in RESULTS (its ``campaign.yaml``) on a held-apart cell:
every object's friction x ``--friction-scale`` and mass x ``--mass-scale`` (on ``--engine``), writes
``RESULTS/held_apart_<engine>_friction<f>_mass<m>/real_trials.csv`` (one folder per cell) with the campaign's
nominal parameters (what the user would have measured) and the held-apart outcomes, and the same trials' own
simulated verdicts as ``identical.csv``; runs the
comparison on both and prints a table per engine: agreement, confusion matrix, Brier score (real / the sim's own
verdicts / excess), ECE, and where the disagreements are (the nominal parameters of the disagreeing trials).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from contact_sim_ros.scenarios.campaign import (Distribution, load_campaign, read_results, run_campaign,  # noqa: E402
                                                run_trial)
from contact_sim_ros.scenarios.compare import compare  # noqa: E402

SCALES = {"friction": 1.3, "mass": 0.8}


def held_apart_trial(spec, k, engine):
    """Trial k with every object's friction and mass scaled (SCALES, set by main before the tasks start)."""
    values = dict(spec.trial_parameters(k))
    objects = {n.split(".")[1] for n in spec.parameters if n.startswith("object.")}
    for name in objects:
        f = f"object.{name}.friction"
        if f in values:
            values[f] = values[f] * SCALES["friction"]
        m = f"object.{name}.mass_scale"
        values[m] = values.get(m, 1.0) * SCALES["mass"]
    return run_trial(spec, k, engine, values)


def write_csv(path: Path, spec, rows) -> Path:
    names = sorted(spec.parameters)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["trial"] + names + ["success", "failure_mode"])
        for r in sorted(rows, key=lambda r: r["trial"]):
            nominal = spec.trial_parameters(r["trial"])
            w.writerow([r["trial"]] + [nominal[n] for n in names] + [int(r["success"]), r["failure_mode"]])
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="a finished campaign's output directory")
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--engine", default="tamsi", help="engine of the held-apart cell")
    ap.add_argument("--friction-scale", type=float, default=1.3)
    ap.add_argument("--mass-scale", type=float, default=0.8)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args(argv)
    import ray.cloudpickle
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])     # Ray workers cannot import this script
    SCALES.update(friction=args.friction_scale, mass=args.mass_scale)
    results = Path(args.results)
    spec = load_campaign(results / "campaign.yaml")
    # the held-apart rows record the mass scale they set: a column of their campaign's schema for every object
    objects = {n.split(".")[1] for n in spec.parameters if n.startswith("object.")}
    parameters = {**{f"object.{o}.mass_scale": Distribution("constant", (1.0,)) for o in objects}, **spec.parameters}
    spec = type(spec)(**{**spec.__dict__, "engines": (args.engine,), "parameters": dict(sorted(parameters.items()))})
    # one folder per held-apart cell: its scales are not in the campaign's fingerprint (they act in trial_fn)
    out = results / f"held_apart_{args.engine}_friction{args.friction_scale:g}_mass{args.mass_scale:g}"
    t0 = time.monotonic()
    s = run_campaign(spec, out, workers=args.workers, trials=args.trials, progress=False, trial_fn=held_apart_trial)
    wall = time.monotonic() - t0
    real = [r for r in read_results(out).to_pylist() if r["trial"] < args.trials]
    own = [r for r in read_results(results).to_pylist() if r["trial"] < args.trials and r["engine"] == args.engine]
    load = os.getloadavg()
    print(f"held-apart cell: friction x {args.friction_scale}, mass x {args.mass_scale}, engine {args.engine}, "
          f"{len(real)} trials ({s['run']} run now in {wall:.0f} s), load average {load[0]:.1f} {load[1]:.1f}")
    print(f"{'real data':>10} {'engine':>8} {'agree':>7} {'S/S':>4} {'S/F':>4} {'F/S':>4} {'F/F':>4} "
          f"{'Brier':>7} {'sim':>7} {'excess':>7} {'ECE':>6}")
    for label, rows in (("identical", own), ("held-apart", real)):
        csv_path = write_csv(out / f"{'identical' if label == 'identical' else 'real_trials'}.csv", spec, rows)
        _, comps = compare(results, csv_path, out / f"compare_{label}")
        for e, c in comps.items():
            cf = c.confusion
            print(f"{label:>10} {e:>8} {c.agreement:7.3f} {cf['success', 'success']:>4} {cf['success', 'failure']:>4} "
                  f"{cf['failure', 'success']:>4} {cf['failure', 'failure']:>4} {c.brier:7.4f} {c.brier_self:7.4f} "
                  f"{c.brier - c.brier_self:+7.4f} {c.ece:6.3f}")
            if label != "identical" and len(c.disagreements):
                params = [spec.trial_parameters(int(c.matched_trial[i])) for i in c.disagreements]
                for name in sorted(spec.parameters):
                    vals = [p[name] for p in params]
                    if all(isinstance(v, (int, float)) for v in vals):
                        print(f"{'':>19} disagreeing trials' {name}: {min(vals):.4g} .. {max(vals):.4g} "
                              f"(median {sorted(vals)[len(vals) // 2]:.4g})")
    print(f"reports: {out}/compare_identical/compare.md, {out}/compare_held-apart/compare.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
