"""Mesh objects (issue 29): convex decomposition time (first start, cached start) of the object set, the CPU
per step of a bin of decomposed mesh objects against the same bin of primitives (and against Drake 1.51.1 on the
same pieces), and scenario 1's pick with the decomposed mug against the primitive bottle.

    python benchmarks/meshes/run.py [--objects 40] [--duration 1.0] [--engine tamsi] [--drake] [--no-pick]

1. Decomposition: each mesh of meshes/ (generate_meshes.py) loaded with ``collision: auto`` into an EMPTY
   temporary cache (CoACD runs: the first start), then again from that cache in a fresh process memo (the cached
   start: read the pieces, rebuild the coal hulls, mass properties). Process CPU seconds.
2. Stepping: ``--objects`` objects cycled from the set (mug, bowl, bottle, L bracket, ring) dropped in a walled bin
   and stepped for ``--duration`` s; the same bin with each object replaced by a primitive of about its size and
   mass (mug, bottle: cylinders; bowl: a flat cylinder; bracket: a box; ring: a flat cylinder). CPU ms per step
   (process time over the last half of the run, when the objects have settled into a pile), with the number of
   geometries, candidate pairs and mean contact points. The objects start on a grid (4 x 4 per layer, 0.2 m
   apart, their bounding spheres apart, random orientations) in a walled bin sized for them, so that 40 of
   them fall in ~0.3 s and are a settled pile in the second half.
   ``--drake``: the same bin of the same convex pieces (written as OBJ files; Drake's ``Convex`` of each, one
   body per object with our mass properties) on Drake 1.51.1 with its TAMSI, in benchmarks/peers/.venv-drake
   (benchmarks/peers/run.py creates it; never the project's venv), the same CPU measure (drake_bin.py).
3. Pick: scenario 1 (pick, shake, place; controller shortened as the tests: 0.5 s moves, 2 shake cycles) in
   process, with the URDF bottle (one cylinder) and with the object set's mug (decomposed) in its place, as the
   campaign pick_mesh_objects does: CPU ms per step, outcome.
Prints markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import trimesh  # noqa: E402

from contact_sim_ros.model import mesh_object  # noqa: E402
from contact_sim_ros.model.loader import meshes_dir  # noqa: E402
from contact_sim_ros.model.mesh_object import MeshSpec, mesh_body  # noqa: E402
from contact_sim_ros.sim.simulator import Simulator  # noqa: E402
import pinocchio as pin  # noqa: E402
from pathlib import Path  # noqa: E402

SET = [  # name, mesh, density kg/m^3, primitive stand-in of about the same size
    ("mug", "mug.obj", 1100.0, {"cylinder": [0.04, 0.10]}),
    ("bowl", "bowl.obj", 1200.0, {"cylinder": [0.08, 0.04]}),
    ("bottle", "bottle.obj", 900.0, {"cylinder": [0.03, 0.18]}),
    ("bracket", "l_bracket.obj", 2700.0, {"box": [0.08, 0.03, 0.08]}),
    ("ring", "ring.obj", 1000.0, {"cylinder": [0.038, 0.016]}),
]


BENCH_CACHE = os.path.join(tempfile.gettempdir(), "contact_sim_bench_meshes")


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
        shutil.copytree(cache, BENCH_CACHE, dirs_exist_ok=True)     # the stepping part reuses these pieces
    return rows


SPACING = 0.2         # m between the objects' bounding-sphere centres at the start
PER_LAYER = 16        # 4 x 4


def _bounding_centre(file: str) -> np.ndarray:
    """The centre of the mesh's bounding box (m, in its frame): placed on the grid point."""
    return np.asarray(trimesh.load(meshes_dir() / file, force="mesh").bounds.mean(axis=0), float)


def bin_scene(n: int, meshes: bool) -> dict:
    side = 4 * SPACING + 0.04
    h = 0.2
    walls = [{"name": "ground", "shape": "halfspace"}]
    for k, (xyz, size) in enumerate([([side / 2, 0, h / 2], [0.02, side, h]), ([-side / 2, 0, h / 2], [0.02, side, h]),
                                     ([0, side / 2, h / 2], [side, 0.02, h]), ([0, -side / 2, h / 2], [side, 0.02, h])]):
        walls.append({"name": f"wall{k}", "shape": {"box": size}, "pose": {"xyz": xyz}})
    rng = np.random.default_rng(3)
    objects = []
    for k in range(n):
        name, file, density, prim = SET[k % len(SET)]
        layer, cell = divmod(k, PER_LAYER)
        grid = np.array([(cell % 4 - 1.5) * SPACING, (cell // 4 - 1.5) * SPACING, 0.12 + SPACING * layer])
        rpy = rng.uniform(-np.pi, np.pi, 3)
        R = pin.rpy.rpyToMatrix(*rpy)
        xyz = grid - R @ _bounding_centre(file) if meshes else grid
        pose = {"xyz": [float(x) for x in xyz], "rpy": [float(x) for x in rpy]}
        if meshes:
            objects.append({"name": f"{name}{k}", "mesh": file, "density": density, "pose": pose})
        else:
            objects.append({"name": f"{name}{k}", "shape": prim, "density": density * 0.3, "pose": pose})
    return {"environment": walls, "objects": objects, "materials": {"default": {"friction": 0.6}}}


def drake_bin(n: int, duration: float, out_dir: str) -> dict | None:
    """The mesh bin on Drake 1.51.1 (benchmarks/meshes/drake_bin.py in benchmarks/peers/.venv-drake): the same
    convex pieces as OBJ files and the same mass properties; None when the venv is missing."""
    drake_py = os.path.join(os.path.dirname(__file__), "..", "peers", ".venv-drake", "bin", "python")
    if not os.path.exists(drake_py):
        print("(no benchmarks/peers/.venv-drake: run benchmarks/peers/run.py once to create it)", file=sys.stderr)
        return None
    scene = bin_scene(n, True)
    objects = []
    for o in scene["objects"]:
        file = o["mesh"]
        density = o["density"]
        body = mesh_body(MeshSpec(str(meshes_dir() / file)), density=density, quiet=True)
        files = []
        for k, verts in enumerate(body.pieces):
            path = os.path.join(out_dir, f"{os.path.splitext(file)[0]}_{k}.obj")
            if not os.path.exists(path):
                trimesh.convex.convex_hull(np.asarray(verts, float)).export(path)
            files.append(path)
        objects.append({"name": o["name"], "pieces": files, "mass": body.mass, "com": body.com.tolist(),
                        "inertia": body.inertia.tolist(), "pose": o["pose"]})
    spec = os.path.join(out_dir, "bin.json")
    with open(spec, "w") as f:
        json.dump({"environment": scene["environment"], "objects": objects, "friction": 0.6, "dt": 1e-3,
                   "duration": duration}, f)
    out = subprocess.run([drake_py, os.path.join(os.path.dirname(__file__), "drake_bin.py"), spec],
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def pick_cost(mesh: str | None) -> tuple:
    """Scenario 1 in process with the URDF bottle (mesh None) or the set's ``mesh`` in its place."""
    from contact_sim_ros.scenarios.campaign import trial_scene
    from contact_sim_ros.scenarios.runner import REPO, SCENARIOS, run_scenario
    fast = dict(motion_time=0.5, hold_time=0.45, shake_cycles=2)
    with tempfile.TemporaryDirectory() as tmp:
        scene = None
        if mesh is not None:
            scene = trial_scene(REPO / SCENARIOS["pick_shake_place"].scene,
                                {"object.bottle.mesh": mesh, "object.bottle.z": -0.0901}, Path(tmp))
            # the pieces decomposed before the timing (the cached start)
            run_scenario("pick_shake_place", "tamsi", params={**fast, "stop_at": "approach"}, scene=scene,
                         transport="inprocess")
        t0 = time.process_time()
        r = run_scenario("pick_shake_place", "tamsi", params=fast, scene=scene, transport="inprocess")
        cpu = time.process_time() - t0
    steps = r.numbers.get("sim_time_s", float("nan")) / SCENARIOS["pick_shake_place"].time_step
    return r.success, r.reason, cpu, steps, cpu / steps * 1e3


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
    ap.add_argument("--objects", type=int, default=40)
    ap.add_argument("--duration", type=float, default=1.0)
    ap.add_argument("--engine", default="tamsi")
    ap.add_argument("--drake", action="store_true", help="also the mesh bin on Drake 1.51.1 (its TAMSI)")
    ap.add_argument("--no-pick", action="store_true", help="skip the pick scenario")
    ap.add_argument("--no-decomposition", action="store_true", help="skip the first-start timing (use the cache)")
    args = ap.parse_args()
    if not args.no_decomposition:
        print("| object | pieces | first start (CPU s) | cached start (CPU ms) |")
        print("|---|---|---|---|")
        for name, pieces, decomposed, t_first, t_cached, cached in decomposition_times():
            how = "CoACD" if decomposed else "convex as is"
            note = "" if cached or not decomposed else " (not cached!)"
            print(f"| {name} | {pieces} ({how}) | {t_first:.2f} | {t_cached * 1e3:.1f}{note} |", flush=True)
        print()
    os.environ["CONTACT_SIM_MESH_CACHE"] = BENCH_CACHE
    print(f"| bin of {args.objects} objects, {args.engine}, dt 1 ms | geometries | candidate pairs "
          f"| contact points (mean) | CPU ms / step |")
    print("|---|---|---|---|---|")
    for meshes in (True, False):
        g, p, c, cpu = step_cost(args.objects, meshes, args.duration, args.engine)
        print(f"| {'mesh objects (decomposed)' if meshes else 'primitives'} | {g} | {p} | {c:.1f} | {cpu:.2f} |",
              flush=True)
    if args.drake:
        with tempfile.TemporaryDirectory() as tmp:
            d = drake_bin(args.objects, args.duration, tmp)
        if d is not None:
            print(f"| Drake 1.51.1 (tamsi), the same pieces | {d['geometries']} | - | {d['contacts']:.1f} "
                  f"| {d['cpu_ms_per_step']:.2f}{' (failed: ' + d['failed'] + ')' if d['failed'] else ''} |")
    if not args.no_pick:
        print()
        print("| scenario 1 (pick, shake, place), tamsi, in process | outcome | CPU s | steps | CPU ms / step |")
        print("|---|---|---|---|---|")
        for label, mesh in (("URDF bottle (one cylinder)", None), ("the set's mug, decomposed", "mug.obj"),
                            ("the set's bottle, decomposed", "bottle.obj")):
            ok, reason, cpu, steps, per = pick_cost(mesh)
            print(f"| {label} | {'success' if ok else 'failed: ' + reason[:80]} | {cpu:.2f} | {steps:.0f} "
                  f"| {per:.3f} |", flush=True)


if __name__ == "__main__":
    main()
