"""The mesh bin of benchmarks/meshes/run.py on Drake 1.51.1 (its TAMSI, point contact), in a fresh process of
benchmarks/peers/.venv-drake; prints one JSON line.

    benchmarks/peers/.venv-drake/bin/python benchmarks/meshes/drake_bin.py BIN.json

BIN.json (written by run.py --drake): the walls and ground, and per object its convex pieces (OBJ files, our CoACD
pieces), mass, centre of mass, inertia about it and pose. Each object is one body with one ``Convex`` per piece
(Drake does not collide geometries of one body); the materials are ours (benchmarks/peers/drake_case.props: point
stiffness 1e5 N/m, Hunt-Crossley dissipation 10 s/m, friction). CPU per step over the second half of the run.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "peers"))
from drake_case import pose, props, shape_of  # noqa: E402

from pydrake.geometry import Convex  # noqa: E402
from pydrake.math import RigidTransform  # noqa: E402
from pydrake.multibody.plant import AddMultibodyPlant, MultibodyPlantConfig  # noqa: E402
from pydrake.multibody.tree import RotationalInertia, SpatialInertia  # noqa: E402
from pydrake.systems.analysis import Simulator  # noqa: E402
from pydrake.systems.framework import DiagramBuilder  # noqa: E402


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    material = {"friction": spec["friction"], "stiffness": 1e5, "dissipation": 10.0}
    builder = DiagramBuilder()
    plant, scene_graph = AddMultibodyPlant(MultibodyPlantConfig(time_step=spec["dt"], discrete_contact_approximation=
                                                                "tamsi", contact_model="point"), builder)
    world = plant.world_body()
    geometries = 0
    for e in spec["environment"]:
        shape, _ = shape_of(e["shape"])
        plant.RegisterCollisionGeometry(world, pose(e.get("pose")), shape, e["name"], props(material, "tamsi"))
        geometries += 1
    bodies = []
    for o in spec["objects"]:
        I = np.asarray(o["inertia"], float)
        inertia = RotationalInertia(I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2])
        body = plant.AddRigidBody(o["name"], SpatialInertia.MakeFromCentralInertia(o["mass"], np.asarray(o["com"]),
                                                                                    inertia))
        for k, f in enumerate(o["pieces"]):
            plant.RegisterCollisionGeometry(body, RigidTransform(), Convex(f), f"{o['name']}/{k}",
                                            props(material, "tamsi"))
            geometries += 1
        bodies.append((body, pose(o["pose"])))
    plant.Finalize()
    diagram = builder.Build()
    sim = Simulator(diagram)
    ctx = sim.get_mutable_context()
    pctx = plant.GetMyMutableContextFromRoot(ctx)
    for body, X in bodies:
        plant.SetFreeBodyPose(pctx, body, X)
    sim.Initialize()
    dt, n = spec["dt"], int(round(spec["duration"] / spec["dt"]))
    failed = None
    try:
        sim.AdvanceTo(n // 2 * dt)
    except RuntimeError as err:
        failed = str(err).splitlines()[0][:160]
    contacts, steps = [], 0
    c0 = time.process_time()
    if failed is None:
        try:
            for i in range(n // 2, n):
                sim.AdvanceTo((i + 1) * dt)
                steps += 1
                if i % 10 == 0:
                    contacts.append(plant.get_contact_results_output_port().Eval(pctx).num_point_pair_contacts())
        except RuntimeError as err:
            failed = str(err).splitlines()[0][:160]
    cpu = time.process_time() - c0
    print(json.dumps({"geometries": geometries, "steps": steps, "cpu_ms_per_step": cpu / max(steps, 1) * 1e3,
                      "contacts": float(np.mean(contacts)) if contacts else 0.0, "failed": failed}))


if __name__ == "__main__":
    main()
