"""Bit-for-bit check of the Simulator's step across a refactoring (issue 45 item 1: Model / Data and named stages).

    scripts/venv_run.sh python benchmarks/peers/step_hashes.py --save /tmp/before.json     # on the old commit
    scripts/venv_run.sh python benchmarks/peers/step_hashes.py --check /tmp/before.json    # exit 1 on a difference

Steps the peers benchmark's planar box, sphere, box, iiwa + WSG and UR5 + objects scenes, a conveyor and a scripted
joint (``EXTRA``) with TAMSI, Lagged, SAP and semi-implicit for ``--steps`` steps each and hashes, every step, the bytes of q, v, the actuation force, the last
result's contact impulses and the step report (ok, status, sub-steps, iterations, message): one SHA-256 per
(scene, engine). A refactoring that keeps the arithmetic keeps every hash.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import CASES  # noqa: E402

SCENES = ("planar", "sphere", "box", "iiwa", "ur5_objects", "conveyor", "scripted")
ROOT = Path(__file__).resolve().parents[2]
# besides the peers' cases: the scene inputs they lack - surface velocities (a conveyor) and a scripted joint (the
# default scene's iiwa joint 1 on a sine); (scene file, time step s). The planar box and the box have scripted
# wrenches (on a link through its Jacobian, on a free body in its frame).
EXTRA = {"conveyor": (ROOT / "scenes" / "icf_conveyor.yaml", 1e-3), "scripted": (ROOT / "scenes" / "default.yaml", 1e-3)}
ENGINES = ("tamsi", "lagged", "sap", "semi_implicit")


def trajectory_hash(case: str, engine: str, steps: int) -> str:
    """SHA-256 over every step's q, v, actuation force, contact impulses and report of ``case`` with ``engine``."""
    from contact_sim_ros.sim.simulator import Simulator
    scene, dt = EXTRA[case] if case in EXTRA else (CASES[case].scene, CASES[case].dt)
    h = hashlib.sha256()
    try:
        sim = Simulator(str(scene), engine=engine, time_step=dt)
    except Exception as e:          # an engine that refuses the scene: its error is the hashed outcome
        h.update(f"construction: {type(e).__name__}: {e}".encode())
        return h.hexdigest()
    for _ in range(steps):
        r = sim.step()
        h.update(np.ascontiguousarray(sim.q).tobytes())
        h.update(np.ascontiguousarray(sim.v).tobytes())
        h.update(np.ascontiguousarray(sim.actuation_force).tobytes())
        if sim.last_result is not None:
            h.update(np.ascontiguousarray(sim.last_result.contact_impulse).tobytes())
        status = getattr(r.status, "value", r.status)      # the SolverStatus's string (a plain string before b722585)
        h.update(repr((r.t, r.ok, status, r.substeps, r.iterations, r.message)).encode())
    return h.hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--cases", default=",".join(SCENES))
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--save", help="write the hashes to this JSON file")
    ap.add_argument("--check", help="compare with the hashes of this JSON file; exit 1 on a difference")
    a = ap.parse_args()
    hashes = {f"{case}/{engine}": trajectory_hash(case, engine, a.steps)
              for case in a.cases.split(",") for engine in a.engines.split(",")}
    if a.save:
        Path(a.save).write_text(json.dumps({"steps": a.steps, "hashes": hashes}, indent=1) + "\n")
    bad = 0
    if a.check:
        ref = json.loads(Path(a.check).read_text())
        if ref["steps"] != a.steps:
            print(f"{a.check} has {ref['steps']} steps, this run {a.steps}")
            return 1
        for key, value in hashes.items():
            same = ref["hashes"].get(key) == value
            bad += not same
            print(f"{key:28s} {'same' if same else 'DIFFERENT'}")
    else:
        for key, value in hashes.items():
            print(f"{key:28s} {value[:16]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
