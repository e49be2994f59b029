"""One peer-benchmark case on Drake 1.51.1, in a fresh process of benchmarks/peers/.venv-drake; one JSON line.

    benchmarks/peers/.venv-drake/bin/python benchmarks/peers/drake_case.py --case box --engine tamsi

Builds the scene from OUR scene file (the subset the peer scenes use: gravity, objects with a primitive shape or
a one-link URDF, mass or density, pose and world-frame velocity; static halfspace / box environment; materials;
contact_margin is ignored (Drake's point contact has none); external forces at a body origin in the world frame;
a robot preset of config/robots/: its URDF welded at base_pose, its initial positions held by an explicit
PidController with the preset's gains, its disabled_collisions as collision filters). Every geometry gets our
material values through Drake's point-contact properties (point_stiffness, hunt_crossley_dissipation,
friction; SAP: relaxation_time tau_d / 2 per geometry, since Drake adds the two). Drake's pair combination
rules are ours (contact_sim_ros/model/materials.py). Timing as in ours_case.py: the first step untimed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import (CASES, ROOT, SAP_RELAXATION_TIME, STICTION_TOLERANCE, Penetration,  # noqa: E402
                   package_dirs, resolve_package)

from pydrake.common.value import AbstractValue  # noqa: E402
from pydrake.geometry import (Box, CollisionFilterDeclaration, Cylinder, GeometrySet, HalfSpace,  # noqa: E402
                              ProximityProperties, Role, RoleAssign, Sphere, AddContactMaterial, Capsule)
from pydrake.math import RigidTransform, RollPitchYaw  # noqa: E402
from pydrake.multibody.math import SpatialForce, SpatialVelocity  # noqa: E402
from pydrake.multibody.parsing import Parser  # noqa: E402
from pydrake.multibody.plant import (AddMultibodyPlant, ExternallyAppliedSpatialForce,  # noqa: E402
                                     MultibodyPlantConfig, CoulombFriction)
from pydrake.multibody.tree import SpatialInertia, UnitInertia  # noqa: E402
from pydrake.systems.analysis import Simulator  # noqa: E402
from pydrake.systems.controllers import PidController  # noqa: E402
from pydrake.systems.framework import DiagramBuilder, LeafSystem  # noqa: E402
from pydrake.systems.primitives import ConstantVectorSource, MatrixGain  # noqa: E402

ENV = {k: getattr(np, k) for k in ("sin", "cos", "tan", "exp", "sqrt", "abs", "pi", "minimum", "maximum",
                                   "clip", "sign", "tanh")}


def expr(value):
    """A number or an expression of t (numpy names), as our scene format allows."""
    if isinstance(value, (int, float)):
        return lambda t, v=float(value): v
    code = compile(str(value), "<scene>", "eval")
    return lambda t: float(eval(code, ENV, {"t": t}))


def pose(p):
    p = p or {}
    return RigidTransform(RollPitchYaw(*(p.get("rpy") or [0, 0, 0])), np.array(p.get("xyz") or [0, 0, 0], float))


def shape_of(spec):
    if spec == "halfspace":
        return HalfSpace(), None
    (kind, size), = spec.items()
    if kind == "sphere":
        r = float(size)
        return Sphere(r), ("sphere", r)
    if kind == "box":
        return Box(*map(float, size)), ("box", tuple(map(float, size)))
    if kind == "cylinder":
        return Cylinder(float(size[0]), float(size[1])), ("cylinder", tuple(map(float, size)))
    if kind == "capsule":
        return Capsule(float(size[0]), float(size[1])), ("capsule", tuple(map(float, size)))
    raise ValueError(f"shape {spec!r} not supported by the peer benchmark")


def volume_and_unit_inertia(info):
    kind, s = info
    if kind == "sphere":
        return 4.0 / 3.0 * math.pi * s ** 3, UnitInertia.SolidSphere(s)
    if kind == "box":
        return s[0] * s[1] * s[2], UnitInertia.SolidBox(*s)
    if kind == "cylinder":
        return math.pi * s[0] ** 2 * s[1], UnitInertia.SolidCylinder(s[0], s[1], [0, 0, 1])
    raise ValueError(kind)


def props(material, approximation):
    p = ProximityProperties()
    mu = float(material.get("friction", 0.5))
    AddContactMaterial(float(material.get("dissipation", 0.0)), float(material.get("stiffness", 1e5)),
                       CoulombFriction(mu, mu), p)
    if approximation == "sap":
        p.AddProperty("material", "relaxation_time", SAP_RELAXATION_TIME / 2)
    return p


class ExternalForces(LeafSystem):
    """The scene's scripted forces (world frame, at the body origin) -> the plant's applied spatial force port."""

    def __init__(self, items):
        super().__init__()
        self._items = items
        self.DeclareAbstractOutputPort("forces", lambda: AbstractValue.Make([ExternallyAppliedSpatialForce()]), self._calc)

    def _calc(self, context, output):
        t = context.get_time()
        out = []
        for body_index, force, torque in self._items:
            f = ExternallyAppliedSpatialForce()
            f.body_index = body_index
            f.p_BoBq_B = np.zeros(3)
            f.F_Bq_W = SpatialForce(np.array([g(t) for g in torque]), np.array([g(t) for g in force]))
            out.append(f)
        output.set_value(out)


def stl_to_obj_urdf(urdf_path: str) -> str:
    """Drake 1.51.1 reads no .stl collision mesh (MakeConvexHull: .obj, .vtk, .gltf): a copy of the URDF in
    benchmarks/peers/out/drake_meshes/ whose .stl meshes are converted to .obj (same triangles, binary STL), without
    visuals and <transmission>s."""
    import struct
    import xml.etree.ElementTree as ET
    root = ET.parse(urdf_path).getroot()
    meshes = [m for m in root.iter("mesh") if m.get("filename", "").lower().endswith(".stl")]
    if not meshes:
        return urdf_path
    out = Path(__file__).resolve().parent / "out" / "drake_meshes"
    out.mkdir(parents=True, exist_ok=True)
    for m in meshes:
        src = Path(resolve_package(m.get("filename"), Path(urdf_path).parent))
        dst = out / (hashlib.sha1(str(src).encode()).hexdigest()[:8] + "_" + src.stem + ".obj")
        if not dst.exists():
            raw = src.read_bytes()
            (n,) = struct.unpack_from("<I", raw, 80)
            lines = []
            for k in range(n):
                v = struct.unpack_from("<12f", raw, 84 + 50 * k)
                lines += [f"v {v[3 + 3 * i]!r} {v[4 + 3 * i]!r} {v[5 + 3 * i]!r}" for i in range(3)]
                lines.append(f"f {3 * k + 1} {3 * k + 2} {3 * k + 3}")
            dst.write_text("\n".join(lines) + "\n")
        m.set("filename", str(dst))
    for tr in root.findall("transmission"):    # actuators: one per driven joint, added by build() as for the presets
        root.remove(tr)
    for link in root.iter("link"):             # visuals (.dae) are not needed for contact
        for v in link.findall("visual"):
            link.remove(v)
    copy = out / (Path(urdf_path).stem + "_obj.urdf")
    ET.ElementTree(root).write(copy)
    return str(copy)


def build(case, approximation):
    scene = yaml.safe_load(case.scene.read_text())
    base = case.scene.parent
    materials = scene.get("materials") or {}
    default = dict(materials.get("default") or {"stiffness": 1e5, "dissipation": 10.0, "friction": 0.5})
    builder = DiagramBuilder()
    cfg = MultibodyPlantConfig(time_step=case.dt, discrete_contact_approximation=approximation,
                               contact_model="point", stiction_tolerance=STICTION_TOLERANCE)
    plant, scene_graph = AddMultibodyPlant(cfg, builder)
    plant.mutable_gravity_field().set_gravity_vector(np.array(scene.get("gravity", [0, 0, -9.81]), float))
    parser = Parser(plant)
    world = plant.world_body()
    for e in scene.get("environment") or []:
        shape, _ = shape_of(e["shape"])
        m = {**default, **(e.get("material") or {})}
        plant.RegisterCollisionGeometry(world, pose(e.get("pose")), shape, e["name"], props(m, approximation))
    objects = []            # (body, initial pose, world velocity)
    relabel = []            # URDF-loaded bodies whose geometries get our material
    for o in scene.get("objects") or []:
        m = {**default, **(o.get("material") or {})}
        if "urdf" in o:
            (model,) = parser.AddModels(str((base / o["urdf"]).resolve()))
            (bi,) = plant.GetBodyIndices(model)
            body = plant.get_body(bi)
            relabel.append((body, m))
        else:
            shape, info = shape_of(o["shape"])
            vol, unit = volume_and_unit_inertia(info)
            mass = float(o["mass"]) if "mass" in o else float(o["density"]) * vol
            body = plant.AddRigidBody(o["name"], SpatialInertia(mass, np.zeros(3), unit))
            plant.RegisterCollisionGeometry(body, RigidTransform(), shape, o["name"], props(m, approximation))
        objects.append((o["name"], body, pose(o.get("pose")), np.array(o.get("velocity") or [0] * 6, float)))
    robot = None
    if "robot" in scene:
        if isinstance(scene["robot"], dict):       # a robot mapping (issue 45 item 4): a URDF and its gains
            preset = dict(scene["robot"])
            urdf_path = stl_to_obj_urdf(resolve_package(preset["urdf"], base))
            for d in package_dirs():
                for pkg in Path(d).iterdir():
                    if pkg.is_dir() and not parser.package_map().Contains(pkg.name):
                        parser.package_map().Add(pkg.name, str(pkg))
        else:
            preset = yaml.safe_load((ROOT / "config" / "robots" / f"{scene['robot']}.yaml").read_text())
            urdf_path = str(ROOT / "urdf" / preset["urdf"])
        preset["urdf"] = urdf_path
        (model,) = parser.AddModels(urdf_path)
        # the URDF's root link: the body of this model instance with no parent joint (none: a link named world)
        children = {plant.get_joint(j).child_body().index() for j in plant.GetJointIndices(model)}
        roots = [plant.get_body(b) for b in plant.GetBodyIndices(model) if b not in children]
        if roots:
            plant.WeldFrames(world.body_frame(), roots[0].body_frame(), pose(preset.get("base_pose")))
        robot = (model, preset)
        rmat = preset.get("materials") or {}
        rdefault = {**default, **(rmat.get("default") or {})}
        for b in plant.GetBodyIndices(model):
            body = plant.get_body(b)
            relabel.append((body, {**rdefault, **(rmat.get(body.name()) or {})}))
    joints = []
    if robot is not None:    # one actuator per 1-dof joint, the URDF's effort limit (as ours)
        model, preset = robot
        passive = set(scene.get("passive_joints") or [])
        joints = [plant.get_joint(j) for j in plant.GetJointIndices(model)
                  if plant.get_joint(j).num_velocities() == 1 and plant.get_joint(j).name() not in passive]
        import xml.etree.ElementTree as ET
        effort = {j.get("name"): float(j.find("limit").get("effort", "inf"))
                  for j in ET.parse(preset["urdf"]).getroot().iter("joint")
                  if j.find("limit") is not None}
        for joint in joints:
            lim = effort.get(joint.name(), float("inf"))
            plant.AddJointActuator(joint.name(), joint, lim if np.isfinite(lim) and lim > 0 else float("inf"))
    plant.Finalize()
    if robot is not None:
        model, preset = robot
        for a, b in preset.get("disabled_collisions") or []:
            ga = plant.GetCollisionGeometriesForBody(plant.GetBodyByName(a, model))
            gb = plant.GetCollisionGeometriesForBody(plant.GetBodyByName(b, model))
            scene_graph.collision_filter_manager().Apply(
                CollisionFilterDeclaration().ExcludeBetween(GeometrySet(ga), GeometrySet(gb)))
    source = plant.get_source_id()
    for body, m in relabel:
        for g in plant.GetCollisionGeometriesForBody(body):
            scene_graph.AssignRole(source, g, props(m, approximation), RoleAssign.kReplace)
    # scripted external forces
    forces = (scene.get("inputs") or {}).get("external_forces") or []
    if forces:
        items = []
        for f in forces:
            body = plant.GetBodyByName(f["body"])
            items.append((body.index(), [expr(x) for x in f.get("force", [0, 0, 0])],
                          [expr(x) for x in f.get("torque", [0, 0, 0])]))
        ext = builder.AddSystem(ExternalForces(items))
        builder.Connect(ext.get_output_port(0), plant.get_applied_spatial_force_input_port())
    if robot is not None and joints:    # explicit PID (ki = 0) with the preset's gains, holding the initial positions
        model, preset = robot
        gains, q0 = preset["gains"], preset.get("initial_positions") or {}
        nq, nv, na = plant.num_positions(), plant.num_velocities(), len(joints)
        select = np.zeros((2 * na, nq + nv))
        for i, j in enumerate(joints):
            select[i, j.position_start()] = 1.0
            select[na + i, nq + j.velocity_start()] = 1.0
        kp = np.array([gains[j.name()]["kp"] for j in joints], float)
        kd = np.array([gains[j.name()]["kd"] for j in joints], float)
        pid = builder.AddSystem(PidController(kp, np.zeros(na), kd))
        sel = builder.AddSystem(MatrixGain(select))
        target = builder.AddSystem(ConstantVectorSource(
            np.concatenate([[float(q0.get(j.name(), 0.0)) for j in joints], np.zeros(na)])))
        builder.Connect(plant.get_state_output_port(), sel.get_input_port())
        builder.Connect(sel.get_output_port(), pid.get_input_port_estimated_state())
        builder.Connect(target.get_output_port(), pid.get_input_port_desired_state())
        builder.Connect(pid.get_output_port_control(), plant.get_actuation_input_port())
    return builder, plant, scene_graph, objects, joints, robot, scene.get("passive_joints") or []


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--engine", required=True, choices=["tamsi", "lagged", "similar", "sap"])
    ap.add_argument("--duration", type=float, default=None)
    a = ap.parse_args()
    c = CASES[a.case]
    builder, plant, scene_graph, objects, joints, robot, passive = build(c, a.engine)
    diagram = builder.Build()
    run(c, a, diagram, plant, objects, joints, robot, passive)


def run(c, a, diagram, plant, objects, joints, robot, passive=()):
    sim = Simulator(diagram)
    ctx = sim.get_mutable_context()
    pctx = plant.GetMyMutableContextFromRoot(ctx)
    for name, body, X, vel in objects:
        plant.SetFreeBodyPose(pctx, body, X)
        plant.SetFreeBodySpatialVelocity(pctx, body, SpatialVelocity(vel[3:], vel[:3]))
    all_joints = list(joints)
    if robot is not None:
        model, preset = robot
        all_joints = [plant.get_joint(j) for j in plant.GetJointIndices(model)
                      if plant.get_joint(j).num_velocities() == 1]
        q = plant.GetPositions(pctx).copy()
        for j in all_joints:
            q[j.position_start()] = float((preset.get("initial_positions") or {}).get(j.name(), 0.0))
        plant.SetPositions(pctx, q)
    if c.compare == "bodies":
        names = [o[0] for o in objects]

        def positions():
            return [list(plant.EvalBodyPoseInWorld(pctx, o[1]).translation()) for o in objects]
    else:
        names = [j.name() for j in all_joints]

        def positions():
            q = plant.GetPositions(pctx)
            return [[float(q[j.position_start()])] for j in all_joints]
    pen = Penetration(c)
    zjoint = next((j for j in all_joints if j.name() == "box_z"), None)

    def sample():
        if c.penetration == "bodies":
            poses = {}
            for name, body, _, _ in objects:
                X = plant.EvalBodyPoseInWorld(pctx, body)
                poses[name] = (X.translation(), X.rotation().matrix())
            pen.add_bodies(poses)
        elif c.penetration == "planar":
            pen.add_planar(float(plant.GetPositions(pctx)[zjoint.position_start()]))
        return positions()
    sim.Initialize()
    n = int(round((a.duration or c.duration) / c.dt))
    every = int(round(c.sample / c.dt))
    samples = [[0.0, sample()]]
    sim.AdvanceTo(c.dt)                          # untimed first step
    i = 1
    failed = None
    untimed = untimed_wall = 0.0
    c0, w0 = time.process_time(), time.perf_counter()
    while i < n:
        k = min(every - (i % every), n - i)
        try:
            sim.AdvanceTo((i + k) * c.dt)
        except RuntimeError as err:     # e.g. TAMSI's Newton iteration on the clutter: report, keep the timing
            failed = f"{str(err).splitlines()[0][:160]}"
            break
        i += k
        if i % every == 0:
            s0, sw = time.process_time(), time.perf_counter()       # sampling is not timed
            samples.append([round(i * c.dt, 9), sample()])
            untimed += time.process_time() - s0
            untimed_wall += time.perf_counter() - sw
    cpu, wall = time.process_time() - c0 - untimed, time.perf_counter() - w0 - untimed_wall
    print(json.dumps({"side": "drake", "case": a.case, "engine": a.engine, "steps": max(i - 1, 1), "cpu_s": cpu,
                      "wall_s": wall, "names": names, "samples": samples, "penetration": pen.depth, "failed": failed,
                      "failed_at": i * c.dt if failed else None}))


if __name__ == "__main__":
    main()
