"""Mesh objects (issue 29): convex decomposition time (first start, cached start) of the object set, and the CPU
per step of a bin of decomposed mesh objects against the same bin of primitives.

    python benchmarks/meshes/run.py [--objects 10] [--duration 1.0] [--engine tamsi]

1. Decomposition: each mesh of meshes/ (generate_meshes.py) loaded with ``collision: auto`` into an EMPTY
   temporary cache (CoACD runs: the first start), then again from that cache in a fresh process memo (the cached
   start: read the pieces, rebuild the coal hulls, mass properties). Process CPU seconds.
2. Stepping: ``--objects`` objects cycled from the set (mug, bowl, bottle, L bracket, ring) dropped in a walled bin
   and stepped for ``--duration`` s; the same bin with each object replaced by a primitive of about its size and
   mass (mug, bottle: cylinders; bowl: a flat cylinder; bracket: a box; ring: a flat cylinder). CPU ms per step
   (process time over the last half of the run, when the objects have settled into a pile), with the number of
   geometries, candidate pairs and mean contact points.
Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from contact_sim_ros.model import mesh_object  # noqa: E402
from contact_sim_ros.model.loader import meshes_dir  # noqa: E402
from contact_sim_ros.model.mesh_object import MeshSpec, mesh_body  # noqa: E402
from contact_sim_ros.sim.simulator import Simulator  # noqa: E402

SET = [  # name, mesh, density kg/m^3, primitive stand-in of about the same size
    ("mug", "mug.obj", 1100.0, {"cylinder": [0.04, 0.10]}),
    ("bowl", "bowl.obj", 1200.0, {"cylinder": [0.08, 0.04]}),
    ("bottle", "bottle.obj", 900.0, {"cylinder": [0.03, 0.18]}),
    ("bracket", "l_bracket.obj", 2700.0, {"box": [0.08, 0.03, 0.08]}),
    ("ring", "ring.obj", 1000.0, {"cylinder": [0.038, 0.016]}),
]


def decomposition_times():
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        os.environ["CONTACT_SIM_MESH_CACHE"] = cache
        for name, file, density, _ in SET:
            spec = MeshSpec(str(meshes_dir() / file))
            mesh_object._MEMO.clear()
            t0 = time.process_time()
            first = mesh_body(spec, density=density, quiet=True)
            first.collision_geometries()
            t_first = time.process_time() - t0
            mesh_object._MEMO.clear()
            t0 = time.process_time()
            again = mesh_body(spec, density=density, quiet=True)
            again.collision_geometries()
            t_cached = time.process_time() - t0
            rows.append((name, len(first.pieces), first.decomposed, t_first, t_cached, again.from_cache))
        # the stepping part reuses these pieces
        os.environ["CONTACT_SIM_MESH_CACHE"] = os.path.join(tempfile.gettempdir(), "contact_sim_bench_meshes")
        for name, file, density, _ in SET:
            mesh_object._MEMO.clear()
            mesh_body(MeshSpec(str(meshes_dir() / file)), density=density, quiet=True)
    return rows


def bin_scene(n: int, meshes: bool) -> dict:
    walls = [{"name": "ground", "shape": "halfspace"}]
    for k, (xyz, size) in enumerate([([0.21, 0, 0.1], [0.02, 0.44, 0.2]), ([-0.21, 0, 0.1], [0.02, 0.44, 0.2]),
                                     ([0, 0.21, 0.1], [0.44, 0.02, 0.2]), ([0, -0.21, 0.1], [0.44, 0.02, 0.2])]):
        walls.append({"name": f"wall{k}", "shape": {"box": size}, "pose": {"xyz": xyz}})
    rng = np.random.default_rng(3)
    objects = []
    for k in range(n):
        name, file, density, prim = SET[k % len(SET)]
        pose = {"xyz": [float(rng.uniform(-0.1, 0.1)), float(rng.uniform(-0.1, 0.1)), 0.1 + 0.12 * k],
                "rpy": [float(x) for x in rng.uniform(-np.pi, np.pi, 3)]}
        if meshes:
            objects.append({"name": f"{name}{k}", "mesh": file, "density": density, "pose": pose})
        else:
            objects.append({"name": f"{name}{k}", "shape": prim, "density": density * 0.3, "pose": pose})
    return {"environment": walls, "objects": objects, "materials": {"default": {"friction": 0.6}}}


def step_cost(n: int, meshes: bool, duration: float, engine: str):
    sim = Simulator(bin_scene(n, meshes), engine=engine, time_step=1e-3)
    steps = int(round(duration / 1e-3))
    sim.run(duration / 2, strict=False)
    contacts = []
    t0 = time.process_time()
    for _ in range(steps // 2):
        sim.step()
        contacts.append(0 if sim.contacts is None else sim.contacts.size)
    cpu = (time.process_time() - t0) / (steps // 2) * 1e3
    return len(sim.model.geometry_names), len(sim.model.collision_pairs), float(np.mean(contacts)), cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", type=int, default=10)
    ap.add_argument("--duration", type=float, default=1.0)
    ap.add_argument("--engine", default="tamsi")
    args = ap.parse_args()
    print("| object | pieces | first start (CPU s) | cached start (CPU ms) |")
    print("|---|---|---|---|")
    for name, pieces, decomposed, t_first, t_cached, cached in decomposition_times():
        how = "CoACD" if decomposed else "convex as is"
        note = "" if cached or not decomposed else " (not cached!)"
        print(f"| {name} | {pieces} ({how}) | {t_first:.2f} | {t_cached * 1e3:.1f}{note} |")
    print()
    print(f"| bin of {args.objects} objects, {args.engine} | geometries | candidate pairs | contact points (mean) "
          f"| CPU ms / step |")
    print("|---|---|---|---|---|")
    for meshes in (True, False):
        g, p, c, cpu = step_cost(args.objects, meshes, args.duration, args.engine)
        print(f"| {'mesh objects (decomposed)' if meshes else 'primitives'} | {g} | {p} | {c:.1f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()
