"""The compiled ICF step (``icf_kernels.icf_step``) of two checkouts on the SAME captured clutter steps: CPU time
per call, Newton iterations, and the largest difference of their results (issue 18: kernel changes measured
without the simulator's noise, and checked bit-for-bit).

    scripts/venv_run.sh python benchmarks/icf/kernel_ab.py --model sap --other /tmp/export_of_an_older_commit
    scripts/venv_run.sh python benchmarks/icf/kernel_ab.py --model lagged            # this checkout only

Capture: the 40-object clutter (scenes/icf_clutter.yaml, dt 2 ms) is simulated for ``--steps`` steps with this
checkout; every ``--every``-th step's icf_step arguments are kept. Each checkout then runs in its own fresh
process (its package first on sys.path; export one with ``git archive <commit> | tar -x -C DIR``), calls
icf_step on copies of every captured step ``--passes`` times (scratch sized by that checkout's ``work_sizes``)
and reports the best pass. The passes alternate between the checkouts' processes only in that they run one
after the other: on a loaded machine, repeat the command.
"""

from __future__ import annotations

import argparse
import inspect
import json
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def capture(model: str, steps: int, every: int, path: str) -> None:
    sys.path.insert(0, str(ROOT))
    from contact_sim_ros.engines import icf_kernels
    from contact_sim_ros.sim.simulator import Simulator
    original, kept = icf_kernels.icf_step, []
    names = list(inspect.signature(original.py_func).parameters)

    def recording(*args):
        out = original(*args)
        kept.append({n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in zip(names, args)})
        return out

    icf_kernels.icf_step = recording
    sim = Simulator(str(ROOT / "scenes" / "icf_clutter.yaml"), engine=model, time_step=2e-3)
    for _ in range(steps):
        sim.step()
    icf_kernels.icf_step = original
    with open(path, "wb") as f:
        pickle.dump(kept[::every], f)


def run(root: str, path: str, passes: int, out: str) -> dict:
    """In a fresh process: icf_step of the checkout at ``root`` on the captured steps."""
    sys.path.insert(0, root)
    from contact_sim_ros.engines import icf_kernels as K
    with open(path, "rb") as f:
        captured = pickle.load(f)
    four = len(inspect.signature(K.work_sizes.py_func).parameters) == 4
    names = list(inspect.signature(K.icf_step.py_func).parameters)
    calls = []
    for a in captured:                                # this checkout's arguments (by name) and scratch layout
        nv, structure = a["M"].shape[0], a["structure"]
        nt = structure.shape[0] - 3 * nv - 1
        cap = max(a["signed_distance"].shape[0], 8)
        sizes = K.work_sizes(nv, nt, cap, K.max_contact_dofs(np.diff(structure[:nt + 1]))) if four \
            else K.work_sizes(nv, nt, cap)
        a = dict(a, fwork=np.zeros(sizes[0]), iwork=np.zeros(sizes[1], dtype=np.int64), stiction=np.zeros(cap))
        a.setdefault("jacobian_columns", np.zeros((0, 0), dtype=np.int64))   # checkouts before it existed
        calls.append([a[n] for n in names])
    v_next, impulse = names.index("v_next"), names.index("impulse")
    K.icf_step(*calls[0])                             # cache load
    best, results = np.inf, None
    for _ in range(passes):
        c0 = time.process_time()
        res = [K.icf_step(*a) for a in calls]
        best = min(best, time.process_time() - c0)
        results = res
    values = np.concatenate([np.concatenate([a[v_next].ravel(), a[impulse].ravel()]) for a in calls])
    np.save(out, values)
    iterations = sum(r[1] for r in results)
    return {"root": root, "us_per_call": best / len(calls) * 1e6, "iterations_per_call": iterations / len(calls),
            "us_per_iteration": best / max(iterations, 1) * 1e6,
            "line_search_evaluations_per_call": sum(r[4] for r in results) / len(calls)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="sap", choices=["lagged", "similar", "sap"])
    ap.add_argument("--other", default=None, help="another checkout (export) to compare with")
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--_run", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._run:
        print(json.dumps(run(a._run[0], a._run[1], a.passes, a._run[2])))
        return
    tmp = Path(tempfile.mkdtemp(prefix="kernel_ab_"))
    cap = str(tmp / "steps.pkl")
    capture(a.model, a.steps, a.every, cap)
    rows, values = [], []
    for i, root in enumerate([str(ROOT)] + ([str(Path(a.other).resolve())] if a.other else [])):
        out = str(tmp / f"values{i}.npy")
        p = subprocess.run([sys.executable, __file__, "--passes", str(a.passes), "--_run", root, cap, out],
                           capture_output=True, text=True, check=True)
        rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
        values.append(np.load(out))
    load = open("/proc/loadavg").read().split()[0]
    print(f"icf_step on {a.steps // a.every} captured clutter steps ({a.model}), best of {a.passes} passes, "
          f"CPU time; load average {load}")
    for r in rows:
        print(f"  {r['root']}: {r['us_per_call']:.1f} us/call, {r['iterations_per_call']:.2f} iterations/call, "
              f"{r['us_per_iteration']:.1f} us/iteration, {r['line_search_evaluations_per_call']:.1f} "
              "line-search evaluations/call")
    if len(values) == 2:
        same = values[0].shape == values[1].shape
        diff = float(np.abs(values[0] - values[1]).max()) if same else float("nan")
        print(f"  largest |difference| of v_next and impulses: {diff:.3g}" + ("" if same else " (shapes differ)"))


if __name__ == "__main__":
    main()
