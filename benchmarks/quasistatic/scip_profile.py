"""Where SCIP's time goes on the section V-B MIQPs: replay recorded problems with several formulations/settings.

    PYTHONPATH=. python benchmarks/quasistatic/run.py --part 3d --solvers scip --objects cylinder --record
    PYTHONPATH=. python benchmarks/quasistatic/scip_profile.py \
        --problems benchmarks/quasistatic/out/problems_cylinder_scip.pkl --every 12

1. SCIP's fixed cost per solve, measured on trivial models (CPU time, time.process_time): Model() creation
   (default plugins), optimize() of an empty model, of one binary + one linear row, of one univariate convex
   quadratic epigraph constraint.
   Variant times include fixed_mode_start (the complete warm start) where used.
2. Every recorded MIQP (or every k-th) re-solved with each variant: CPU time of building the pyscipopt model,
   CPU time of optimize(), branch-and-bound nodes, LP iterations, objective (checked against the first variant:
   all variants solve the same MIQP to the same gap).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import pickle
import sys
import time
from dataclasses import replace

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from contact_sim_ros.solvers.miqp import ScipPersistent, fixed_mode_start  # noqa: E402

# SCIP's own defaults, stated explicitly (a variant's params override them)
SCIP_DEFAULTS = {"heuristics": "default", "presolving/maxrestarts": -1}
VARIANTS = {
    "separable": {"reuse_model": False},
    "epigraph": {"objective_form": "epigraph"},
    "separable, presolve off": {"presolving": "off"},
    "separable, heur off": {"heuristics": "off"},
    "separable, sepa off": {"separating": "off"},
    "separable, all off": {"presolving": "off", "heuristics": "off", "separating": "off"},
    "separable, nlp off": {"nlp/disable": True},
    "separable, all off + nlp off": {"presolving": "off", "heuristics": "off", "separating": "off",
                                     "nlp/disable": True},
    "separable, no warm start": {"warm_start": False},
    "separable, complete start": {"complete": True},
    "separable, complete, all off": {"complete": True, "presolving": "off", "heuristics": "off",
                                     "separating": "off"},
    "complete, all off + nlp off": {"complete": True, "presolving": "off", "heuristics": "off",
                                    "separating": "off", "nlp/disable": True},
    "persistent": {},
    "persistent, complete": {"complete": True},
    "persistent, complete, all off": {"complete": True, "presolving": "off", "heuristics": "off",
                                      "separating": "off"},
    "persistent, complete, heur off": {"complete": True, "heuristics": "off"},
    "persistent, complete, heur+nlp off": {"complete": True, "heuristics": "off", "nlp/disable": True},
    "persistent, complete, heur+sepa off": {"complete": True, "heuristics": "off", "separating": "off"},
    "separable, heur off, complete": {"complete": True, "heuristics": "off"},
    "separable, heur off, complete, no restarts": {"complete": True, "heuristics": "off",
                                                   "presolving/maxrestarts": 0},
    "separable, complete, no restarts": {"complete": True, "presolving/maxrestarts": 0},
    "persistent, heur off": {"heuristics": "off"},
    "persistent, complete, heur off, no restarts": {"complete": True, "heuristics": "off",
                                                    "presolving/maxrestarts": 0},
}


def fixed_overhead(reps: int = 50):
    import pyscipopt as scip

    def cpu(f):
        t = time.process_time()
        f()
        return time.process_time() - t

    rows = {}
    create, empty, onebin, quad = [], [], [], []
    off = scip.SCIP_PARAMSETTING.OFF
    quad_variants = {
        "heuristics off": lambda m: m.setHeuristics(off),
        "nlp/disable": lambda m: m.setParam("nlp/disable", True),
        "presolving off": lambda m: m.setPresolve(off),
        "all three off + nlp/disable": lambda m: (m.setHeuristics(off), m.setPresolve(off), m.setSeparating(off),
                                                  m.setParam("nlp/disable", True)),
    }
    quad_more = {k: [] for k in quad_variants}
    for _ in range(reps):
        m = None

        def mk():
            nonlocal m
            m = scip.Model()
            m.hideOutput()
        create.append(cpu(mk))
        empty.append(cpu(m.optimize))
        m = scip.Model()
        m.hideOutput()
        x = m.addVar(lb=0.0, ub=1.0)
        b = m.addVar(vtype="B")
        m.addCons(x - b <= 0)
        m.setObjective(-x)
        onebin.append(cpu(m.optimize))
        m = scip.Model()
        m.hideOutput()
        x = m.addVar(lb=-10.0, ub=10.0)
        t = m.addVar(lb=0.0, obj=1.0)
        m.addCons((x - 0.3) * (x - 0.3) <= t)
        quad.append(cpu(m.optimize))
        for key, setup in quad_variants.items():
            m = scip.Model()
            m.hideOutput()
            setup(m)
            x = m.addVar(lb=-10.0, ub=10.0)
            t = m.addVar(lb=0.0, obj=1.0)
            m.addCons((x - 0.3) * (x - 0.3) <= t)
            quad_more[key].append(cpu(m.optimize))
    for name, v in (("Model() + hideOutput", create), ("optimize(): empty model", empty),
                    ("optimize(): 1 binary, 1 row", onebin), ("optimize(): t >= (x - 0.3)^2", quad),
                    *((f"optimize(): t >= (x - 0.3)^2, {k}", v) for k, v in quad_more.items())):
        v = 1e3 * np.array(v)
        rows[name] = v
        print(f"  {name:34s} mean {v.mean():7.3f} ms  median {np.median(v):7.3f}  min {v.min():7.3f}")
    return rows


def replay(problems, variants, time_limit=None):
    out = {}
    for name, params in variants.items():
        solve = ScipPersistent()
        rec = {"opt": [], "build": [], "nodes": [], "lpit": [], "obj": [], "status": [], "nbin": []}
        for _, p, _ in problems:
            pp = {**SCIP_DEFAULTS, **params}
            if not name.startswith("persistent"):
                pp.setdefault("reuse_model", False)         # a fresh pyscipopt Model per MIQP
            q = replace(p, params=pp, x_start=None)
            if not pp.pop("warm_start", True):
                q.z_start = None
            ws = 0.0
            if pp.pop("complete", False) and q.z_start is not None:
                ws = time.process_time()
                q.x_start = fixed_mode_start(q, q.z_start)
                ws = time.process_time() - ws
            if time_limit is not None:
                q.time_limit_s = time_limit
            sol = solve(q)
            rec["opt"].append((sol.solver_time_s + ws) * 1e3)
            rec["build"].append(sol.build_time_s * 1e3)
            rec["nodes"].append(sol.nodes)
            rec["lpit"].append(sol.lp_iterations)
            rec["obj"].append(sol.objective)
            rec["status"].append(sol.status)
            rec["nbin"].append(p.n_bin)
        out[name] = {k: np.array(v) for k, v in rec.items()}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", required=True)
    ap.add_argument("--every", type=int, default=1, help="replay every k-th recorded MIQP")
    ap.add_argument("--variants", default=";".join(VARIANTS), help="variant names separated by ;")
    ap.add_argument("--time-limit", type=float, default=None)
    ap.add_argument("--no-overhead", action="store_true")
    ap.add_argument("--eps", type=float, default=None,
                    help="replace the recorded unactuated regularisation (curvature 1e-4) by this value")
    args = ap.parse_args(argv)
    with open(args.problems, "rb") as f:
        problems = pickle.load(f)[::args.every]
    if args.eps is not None:
        problems = [(k, replace(p, qdiag=np.where(p.qdiag == 1e-4, args.eps, p.qdiag)), s) for k, p, s in problems]
    print(f"load average {os.getloadavg()}; {len(problems)} MIQPs from {args.problems}")
    if not args.no_overhead:
        print("SCIP fixed cost per solve (CPU):")
        fixed_overhead()
    variants = {k: VARIANTS[k] for k in args.variants.split(";")}
    res = replay(problems, variants, time_limit=args.time_limit)
    ref = None
    print(f"{'variant':28s} {'optimize mean':>13s} {'median':>7s} {'worst':>8s} {'std':>7s} {'build mean':>10s} "
          f"{'nodes mean/max':>14s} {'LP it mean':>10s} {'not optimal':>11s} {'max rel obj diff':>16s}")
    for name, r in res.items():
        if ref is None:
            ref = r["obj"]
        diff = np.abs(r["obj"] - ref) / np.maximum(1e-3, np.abs(ref))
        print(f"{name:28s} {r['opt'].mean():13.2f} {np.median(r['opt']):7.2f} {r['opt'].max():8.1f} "
              f"{r['opt'].std():7.2f} {r['build'].mean():10.2f} {r['nodes'].mean():7.1f}/{r['nodes'].max():<6d} "
              f"{r['lpit'].mean():10.0f} {int((r['status'] != 'optimal').sum()):11d} {np.nanmax(diff):16.1e}")
    print(f"load average {os.getloadavg()}")
    return res


if __name__ == "__main__":
    main()
