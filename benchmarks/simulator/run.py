"""Benchmark: contact query and one full simulator step, Panda + table + object, per engine.

    python benchmarks/simulator/run.py [--steps 300] [--repeats 5]

Prints microseconds per call (median over repeats of the mean over ``--steps`` steps) for two Panda models:
the project's primitive-geometry ``franka`` preset and example-robot-data's ``panda.urdf`` (collision meshes as
convex hulls). The object (a bottle) rests between the fingers' reach on the table, so the query finds contacts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from contact_sim_ros.engines.registry import engine_class, engine_names
from contact_sim_ros.sim.simulator import Simulator


def erd_panda() -> str | None:
    for entry in sys.path:
        p = Path(entry, "cmeel.prefix", "share", "example-robot-data", "robots", "panda_description", "urdf",
                 "panda.urdf")
        if p.is_file():
            return str(p)
    return None


def scene(robot) -> dict:
    return {"robot": robot,
            "environment": [{"name": "ground", "shape": "halfspace"},
                            {"name": "table", "shape": {"box": [0.6, 0.8, 0.04]},
                             "pose": {"xyz": [0.5, 0.0, 0.18]}}],
            "objects": [{"name": "bottle", "shape": {"cylinder": [0.03, 0.18]}, "mass": 0.5,
                         "pose": {"xyz": [0.5, 0.2, 0.29]}},
                        {"name": "box", "shape": {"box": [0.05, 0.05, 0.05]}, "mass": 0.2,
                         "pose": {"xyz": [0.45, -0.2, 0.225]}}],
            "materials": {"default": {"stiffness": 1e5, "dissipation": 10.0, "friction": 0.6}},
            "contact_margin": 0.005}


def time_per_call(fn, steps: int, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            fn()
        samples.append((time.perf_counter() - start) / steps)
    return statistics.median(samples) * 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--engines", nargs="*", default=None)
    parser.add_argument("--figure", default="docs/figures/simulator_step.png")
    args = parser.parse_args(argv)
    robots = {"franka (primitives)": "franka"}
    panda = erd_panda()
    if panda:
        robots["erd panda (convex meshes)"] = {"urdf": panda, "initial_positions": {
            "panda_joint4": -1.5, "panda_joint6": 1.5, "panda_finger_joint1": 0.04},
            "gains": {f"panda_joint{i}": {"kp": 400.0, "kd": 20.0} for i in range(1, 8)}}
    engines = args.engines or [n for n in engine_names() if engine_class(n).dynamic]
    rows = []
    for label, robot in robots.items():
        for engine in engines:
            sim = Simulator(scene(robot), engine=engine, time_step=1e-3)
            sim.run(0.3)                     # settle: objects resting, contacts established
            q_us = time_per_call(lambda: sim.contact_query.update(sim.pin_data, sim.geometry_data),
                                 args.steps, args.repeats)
            n_contacts = sim.contacts.size
            step_us = time_per_call(lambda: sim.step(strict=True), args.steps, args.repeats)
            rows.append((label, engine, len(sim.model.collision_pairs), n_contacts, q_us, step_us,
                         1e6 * sim.time_step / step_us))
    print(f"{'robot':28s} {'engine':16s} {'pairs':>6s} {'contacts':>9s} {'query us':>9s} {'step us':>9s} "
          f"{'RTF':>6s}")
    for r in rows:
        print(f"{r[0]:28s} {r[1]:16s} {r[2]:6d} {r[3]:9d} {r[4]:9.1f} {r[5]:9.1f} {r[6]:6.2f}")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 4))
    labels = [f"{r[1]}\n{r[0].split(' (')[0]}" for r in rows]
    ax.bar(range(len(rows)), [r[5] for r in rows], label="full step")
    ax.bar(range(len(rows)), [r[4] for r in rows], label="contact query")
    ax.axhline(1e6 * 1e-3, color="k", lw=0.8, ls="--", label="1 ms (real time at dt = 1 ms)")
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylabel("microseconds per step (median)")
    ax.set_title("Panda + table + objects: contact query and simulator step")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.figure, dpi=110)
    print(f"figure: {args.figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
