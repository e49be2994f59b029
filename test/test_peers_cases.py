"""The peer benchmark's MuJoCo case builder (benchmarks/peers/mujoco_case.py, issue 45 item 4) writes, for every row
MuJoCo runs, MJCF whose bodies, joints, geoms, masses, sizes, friction, time step and actuators are the case's
scene; checked by parsing the XML in the project's venv, where MuJoCo is not installed (the benchmark itself runs
in benchmarks/peers/.venv-drake and is not part of make test). The UR5's MJCF bodies sit where Pinocchio puts the
URDF's links; the accuracy helpers (ground penetration, creep) against hand computations."""

from __future__ import annotations

import importlib.util
import math
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

PEERS = Path(__file__).resolve().parents[1] / "benchmarks" / "peers"
sys.path.insert(0, str(PEERS))
import cases  # noqa: E402
import mujoco_case  # noqa: E402

UR5_JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
              "wrist_3_joint"]


def _floats(text):
    return [float(x) for x in text.split()]


def _build(name):
    xml, meta = mujoco_case.build_mjcf(cases.CASES[name])
    return ET.fromstring(xml), meta, yaml.safe_load(cases.CASES[name].scene.read_text())


def _quat_mat(q):
    return pin.Quaternion(q[0], q[1], q[2], q[3]).normalized().toRotationMatrix()


def test_mujoco_is_not_a_dependency_of_the_project():
    assert importlib.util.find_spec("mujoco") is None, "mujoco must live in benchmarks/peers/.venv-drake only"


@pytest.mark.parametrize("name", cases.MUJOCO_CASES)
def test_mjcf_has_the_case_time_step_gravity_and_ground(name):
    root, _, scene = _build(name)
    assert root.tag == "mujoco"
    opt = root.find("option")
    assert float(opt.get("timestep")) == cases.CASES[name].dt
    assert _floats(opt.get("gravity")) == [float(x) for x in scene["gravity"]]
    # MuJoCo's default solver: no solver, cone, integrator or contact parameter is set
    for key in ("solver", "cone", "integrator", "iterations", "tolerance", "impratio"):
        assert opt.get(key) is None
    for g in root.iter("geom"):
        assert g.get("solref") is None and g.get("solimp") is None and g.get("margin") is None
    (ground,) = [g for g in root.find("worldbody").findall("geom") if g.get("type") == "plane"]
    assert _floats(ground.get("pos"))[2] == cases.ground_height(scene)


@pytest.mark.parametrize("name", ["box", "sphere", "clutter", "ur5_objects"])
def test_mjcf_free_objects_match_the_scene(name):
    root, meta, scene = _build(name)
    world = root.find("worldbody")
    mu_default = float(scene["materials"]["default"]["friction"])
    assert meta["free"] == [o["name"] for o in scene["objects"]]
    for o in scene["objects"]:
        (body,) = [b for b in world.findall("body") if b.get("name") == o["name"]]
        assert body.find("freejoint") is not None and body.find("joint") is None
        assert np.allclose(_floats(body.get("pos")), o["pose"]["xyz"], rtol=0, atol=0)
        assert np.allclose(_quat_mat(_floats(body.get("quat"))),
                           pin.rpy.rpyToMatrix(*(o["pose"].get("rpy") or [0, 0, 0])), atol=1e-12)
        inertial = body.find("inertial")
        mass = float(inertial.get("mass"))
        geoms = body.findall("geom")
        for g in geoms:
            assert _floats(g.get("friction"))[0] == mu_default
        if "urdf" in o:         # box_corners.urdf: 0.33 kg, 8 spheres r = 5 mm at (+-5, +-5, +-1) cm
            assert mass == 0.33 and len(geoms) == 8
            for g in geoms:
                assert g.get("type") == "sphere" and float(g.get("size")) == 0.005
                assert sorted(map(abs, _floats(g.get("pos")))) == [0.01, 0.05, 0.05]
            continue
        (g,) = geoms
        (kind, size), = o["shape"].items()
        assert g.get("type") == kind
        if kind == "sphere":
            assert float(g.get("size")) == size
            vol, inertia = 4 / 3 * math.pi * size ** 3, [0.4 * mass * size ** 2] * 3
        else:
            assert _floats(g.get("size")) == [0.5 * s for s in size]
            vol = size[0] * size[1] * size[2]
            inertia = [mass / 12 * (size[1] ** 2 + size[2] ** 2), mass / 12 * (size[0] ** 2 + size[2] ** 2),
                       mass / 12 * (size[0] ** 2 + size[1] ** 2)]
        assert mass == pytest.approx(o["mass"] if "mass" in o else o["density"] * vol, rel=1e-14)
        assert np.allclose(_floats(inertial.get("diaginertia")), inertia, rtol=1e-14, atol=0)
    # initial velocities (the sphere's 2 m/s) are carried to the run
    for o in scene["objects"]:
        assert meta["velocities"][o["name"]] == [float(x) for x in (o.get("velocity") or [0] * 6)]


def test_mjcf_planar_box_has_two_passive_slide_joints_and_the_push():
    root, meta, scene = _build("planar")
    world = root.find("worldbody")
    base = world.find("body")
    carriage = base.find("body")
    box = carriage.find("body")
    assert (base.get("name"), carriage.get("name"), box.get("name")) == ("base", "carriage", "box")
    assert base.find("joint") is None and base.find("freejoint") is None       # welded to the world
    jx, jz = carriage.find("joint"), box.find("joint")
    assert (jx.get("name"), jx.get("type"), _floats(jx.get("axis"))) == ("box_x", "slide", [1, 0, 0])
    assert (jz.get("name"), jz.get("type"), _floats(jz.get("axis"))) == ("box_z", "slide", [0, 0, 1])
    assert float(box.find("inertial").get("mass")) == 0.33
    assert float(carriage.find("inertial").get("mass")) == 0.001
    (g,) = box.findall("geom")
    assert g.get("type") == "box" and _floats(g.get("size")) == [0.05, 0.05, 0.01]
    assert _floats(g.get("friction"))[0] == 1.0
    assert root.find("actuator") is None or len(root.find("actuator")) == 0      # passive_joints: no drive
    assert meta["q0"] == {"box_x": 0.0, "box_z": 0.01}
    assert meta["forces"] == [("box", ["2*sin(2*pi*t)", "0", "0"], ["0", "0", "0"])]
    f = mujoco_case._expr(meta["forces"][0][1][0])
    assert f(0.25) == pytest.approx(2.0, rel=1e-15)


@pytest.mark.parametrize("name", ["ur5", "ur5_objects"])
def test_mjcf_ur5_matches_pinocchio_and_holds_with_the_scene_gains(name):
    """Every UR5 link body of the MJCF sits (at q = 0) where Pinocchio's model of the same URDF puts the link,
    with the same mass; the six hinges carry the URDF's joints; one position actuator per joint with the scene's
    kp / kd and the URDF's effort limit; every collision mesh file exists."""
    root, meta, scene = _build(name)
    urdf = cases.resolve_package(scene["robot"]["urdf"], cases.CASES[name].scene.parent)
    model = pin.buildModelFromUrdf(urdf)
    data = model.createData()
    pin.framesForwardKinematics(model, data, pin.neutral(model))
    world = root.find("worldbody")
    poses = {}

    def walk(el, R, p):
        for b in el.findall("body"):
            Rb = R @ _quat_mat(_floats(b.get("quat")))
            pb = p + R @ np.array(_floats(b.get("pos")))
            poses[b.get("name")] = (Rb, pb, b)
            walk(b, Rb, pb)
    walk(world, np.eye(3), np.zeros(3))
    links = [f.name for f in model.frames if f.type == pin.FrameType.BODY and f.name != "world"]
    assert set(links) <= set(poses)
    total = 0.0
    for name_ in links:
        R, p, b = poses[name_]
        X = data.oMf[model.getFrameId(name_)]
        assert np.allclose(p, X.translation, atol=1e-12), name_
        assert np.allclose(R, X.rotation, atol=1e-12), name_
        inertial = b.find("inertial")
        total += float(inertial.get("mass")) if inertial is not None else 0.0
    assert total == pytest.approx(sum(i.mass for i in model.inertias), rel=1e-12)
    assert [j for j, _, _ in meta["joints"]] == UR5_JOINTS
    hinges = {j.get("name"): j for j in world.iter("joint")}
    assert set(hinges) == set(UR5_JOINTS) and all(j.get("type") == "hinge" for j in hinges.values())
    acts = {a.get("joint"): a for a in root.find("actuator").findall("position")}
    assert list(acts) == UR5_JOINTS
    for j in UR5_JOINTS:
        g = scene["robot"]["gains"][j]
        assert (float(acts[j].get("kp")), float(acts[j].get("kv"))) == (g["kp"], g["kd"])
        effort = model.effortLimit[model.joints[model.getJointId(j)].idx_v]
        assert _floats(acts[j].get("forcerange")) == [-effort, effort]
        assert meta["q0"][j] == scene["robot"]["initial_positions"][j]
    meshes = root.find("asset").findall("mesh")
    assert len(meshes) == 7 and all(Path(m.get("file")).is_file() for m in meshes)
    assert sum(1 for g in world.iter("geom") if g.get("type") == "mesh") == 7


def test_ground_penetration_of_a_tilted_box_and_creep():
    """The lowest point of a 10 x 10 x 2 cm box turned 30 deg about x, centred at z = 0.02 m: 0.02 - (0.05 sin 30
    + 0.01 cos 30) = -0.0137 m; a sphere's is its centre minus the radius; creep = the largest drift."""
    R = pin.rpy.rpyToMatrix(math.radians(30), 0, 0)
    geoms = [("box", [0.1, 0.1, 0.02], [0.0, 0.0, 0.0])]
    low = cases.lowest_point(geoms, [0, 0, 0.02], R.tolist())
    assert low == pytest.approx(0.02 - (0.05 * 0.5 + 0.01 * math.cos(math.radians(30))), abs=1e-15)
    assert cases.lowest_point([("sphere", 0.025, [0, 0, 0.01])], [0, 0, 0.03], np.eye(3).tolist()) == \
        pytest.approx(0.015, abs=1e-15)
    pen = cases.Penetration(cases.CASES["planar"])
    pen.add_planar(0.0099)                  # the box's bottom 0.1 mm below the ground
    pen.add_planar(0.0101)
    assert pen.depth == pytest.approx(1e-4, abs=1e-15)
    run = {"names": ["box_x", "box_z"], "samples": [[0.0, [[0.0], [0.01]]], [0.5, [[2e-6], [0.01]]],
                                                     [1.0, [[-1e-6], [0.01]]]]}
    assert cases.creep(cases.CASES["planar"], run) == pytest.approx(2e-6, abs=1e-18)
    bodies = {"names": ["a", "b"], "samples": [[0.0, [[0, 0, 0], [1, 0, 0]]], [0.2, [[0, 0, 0], [1, 0, 0]]],
                                               [1.0, [[3e-6, 4e-6, 0], [1, 0, 0]]]]}
    assert cases.creep(cases.CASES["ur5_objects"], bodies) == pytest.approx(5e-6, abs=1e-18)
    assert cases.creep(cases.CASES["sphere"], bodies) is None       # no resting object in that row
