"""Robot and object descriptions: URDF validity, vendor data, docs tables, presets, object mass properties.

Vendor numbers are written here independently of urdf/generate/generate_urdfs.py (sources: docs/robots.md).
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml
from urdf_parser_py.urdf import URDF

from contact_sim_ros.errors import ModelError
from contact_sim_ros.model.loader import default_package_dirs, load_robot_preset, load_urdf
from contact_sim_ros.sim.scene import load_scene

ROOT = Path(__file__).resolve().parents[1]
URDF_DIR = ROOT / "urdf"
OBJ_DIR = URDF_DIR / "objects"
ROBOTS = ["iiwa_wsg", "franka", "allegro", "barrett"]
MESH_VARIANTS = ["franka_mesh_visuals", "allegro_mesh_visuals"]
OBJECTS = sorted(p.stem for p in OBJ_DIR.glob("*.urdf"))


def parse_urdf(path: Path):
    """urdf_parser_py parse; any warning it prints (unknown tag/attribute) is a failure."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        robot = URDF.from_xml_file(str(path))
    assert err.getvalue() == "", f"{path.name}: urdf_parser_py warnings:\n{err.getvalue()}"
    return robot


def pin_model(name: str, mimic=True):
    return pin.buildModelsFromUrdf(str(URDF_DIR / f"{name}.urdf"), geometry_types=[pin.GeometryType.COLLISION],
                                   mimic=mimic)


def erd_share() -> Path:
    """The folder that contains example-robot-data's package folder (package:// root)."""
    for d in default_package_dirs():
        if (Path(d) / "example-robot-data" / "robots").is_dir():
            return Path(d)
    raise AssertionError("example-robot-data (a project requirement) is not installed")


# ------------------------------------------------------------------------------------ validity

@pytest.mark.parametrize("name", ROBOTS + MESH_VARIANTS)
def test_robot_urdf_parses_and_loads(name):
    robot = parse_urdf(URDF_DIR / f"{name}.urdf")
    assert robot.get_root() in {"iiwa_link_0", "panda_link0", "palm_link", "bh_base_link"}
    model, geom = pin_model(name)
    assert model.nq == model.nv > 0
    assert geom.ngeoms > 0
    # every collision geometry is a primitive (coal shapes, no meshes)
    kinds = {type(g.geometry).__name__ for g in geom.geometryObjects}
    assert kinds <= {"Box", "Cylinder", "Sphere"}, kinds
    # the project's loader (mimic=True) agrees with Pinocchio
    loaded = load_urdf(URDF_DIR / f"{name}.urdf")
    assert loaded.model.nq == model.nq and list(loaded.model.names) == list(model.names)


@pytest.mark.parametrize("name", OBJECTS)
def test_object_urdf_parses_and_loads_as_free_body(name):
    robot = parse_urdf(OBJ_DIR / f"{name}.urdf")
    assert len(robot.links) == 1 and not robot.joints
    model = pin.buildModelFromUrdf(str(OBJ_DIR / f"{name}.urdf"), pin.JointModelFreeFlyer())
    assert (model.nq, model.nv) == (7, 6)
    assert model.inertias[1].mass > 0


@pytest.mark.parametrize("name", ROBOTS + OBJECTS)
def test_links_have_physical_inertia(name):
    """Every link with geometry or on a moving joint: mass > 0, inertia SPD and triangle inequality."""
    path = URDF_DIR / f"{name}.urdf" if name in ROBOTS else OBJ_DIR / f"{name}.urdf"
    robot = parse_urdf(path)
    moving_children = {j.child for j in robot.joints if j.type != "fixed"}
    for link in robot.links:
        needs_mass = bool(link.collisions) or link.name in moving_children
        if link.inertial is None:
            assert not needs_mass, f"{name}: link {link.name} has geometry or moves but no inertial"
            continue
        i = link.inertial.inertia
        tensor = np.array([[i.ixx, i.ixy, i.ixz], [i.ixy, i.iyy, i.iyz], [i.ixz, i.iyz, i.izz]])
        eig = np.linalg.eigvalsh(tensor)
        assert link.inertial.mass > 0, link.name
        assert eig.min() > 0, f"{name}: {link.name} inertia not positive definite: {eig}"
        a, b, c = eig
        assert a + b >= c * (1 - 1e-9), f"{name}: {link.name} violates the triangle inequality: {eig}"


@pytest.mark.parametrize("name", ROBOTS)
def test_joints_have_limits_and_small_dynamics(name):
    robot = parse_urdf(URDF_DIR / f"{name}.urdf")
    for j in robot.joints:
        if j.type == "fixed":
            continue
        assert j.limit.lower < j.limit.upper and j.limit.effort > 0 and j.limit.velocity > 0, j.name
        assert j.dynamics is not None and 0 < j.dynamics.damping <= 2.0 and 0 < j.dynamics.friction <= 0.5, j.name


# ------------------------------------------------------------------------------------ docs tables

def docs_joint_table(name: str):
    """Parse the '#### <name>: joints' table of docs/robots.md -> {joint: (type, lower, upper, vel, effort,
    mimic)} and the documented nq."""
    text = (ROOT / "docs" / "robots.md").read_text()
    section = text.split(f"#### {name}: joints", 1)[1].split("####", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 7 or cells[0] in ("joint", "---"):
            continue
        num = [float(c.split()[0]) for c in cells[2:6]]
        rows[cells[0]] = (cells[1], *num, cells[6])
    nq = int(re.search(r"nq = (\d+), nv = (\d+)", section).group(1))
    return rows, nq


@pytest.mark.parametrize("name", ROBOTS)
def test_docs_table_matches_urdf(name):
    rows, nq_doc = docs_joint_table(name)
    robot = parse_urdf(URDF_DIR / f"{name}.urdf")
    moving = [j for j in robot.joints if j.type != "fixed"]
    assert [j.name for j in moving] == list(rows)
    for j in moving:
        jtype, lo, hi, vel, eff, mimic = rows[j.name]
        assert jtype == j.type
        assert lo == pytest.approx(j.limit.lower, abs=1e-4) and hi == pytest.approx(j.limit.upper, abs=1e-4)
        assert vel == pytest.approx(j.limit.velocity, rel=1e-4) and eff == pytest.approx(j.limit.effort, rel=1e-4)
        assert (mimic == "-") == (j.mimic is None)
    model, _ = pin_model(name)
    assert model.nq == model.nv == nq_doc
    dof_names = [model.names[i] for i in range(1, model.njoints) if "Mimic" not in model.joints[i].shortname()]
    assert sorted(dof_names) == sorted(n for n, r in rows.items() if r[5] == "-")


# ------------------------------------------------------------------------------------ vendor data

IIWA_RANGE_DEG = [170, 120, 170, 120, 170, 120, 175]
IIWA_SPEED_DEG_S = [85, 85, 100, 75, 130, 135, 135]
IIWA_TORQUE = [320, 320, 176, 176, 110, 40, 40]
PANDA_LOWER = [-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973]
PANDA_UPPER = [2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973]
PANDA_VEL = [2.175] * 4 + [2.61] * 3
PANDA_TORQUE = [87] * 4 + [12] * 3
# Gaz et al. 2019 (RA-L), identified link masses of links 1-7 (kg)
PANDA_GAZ_MASSES = [4.970684, 0.646926, 3.228604, 3.587895, 1.225946, 1.666555, 0.735522]
ALLEGRO_FINGER_LIMITS = [(-0.47, 0.47), (-0.196, 1.61), (-0.174, 1.709), (-0.227, 1.618)]
ALLEGRO_THUMB_LIMITS = [(0.263, 1.396), (-0.105, 1.163), (-0.189, 1.644), (-0.162, 1.719)]


def joints_by_name(name):
    return {j.name: j for j in parse_urdf(URDF_DIR / f"{name}.urdf").joints}


def link_masses(name):
    return {link.name: link.inertial.mass for link in parse_urdf(URDF_DIR / f"{name}.urdf").links if link.inertial}


def test_iiwa_limits_equal_kuka_spec():
    joints = joints_by_name("iiwa_wsg")
    for i in range(7):
        j = joints[f"iiwa_joint_{i + 1}"]
        assert j.limit.lower == pytest.approx(-math.radians(IIWA_RANGE_DEG[i]), abs=1e-8)
        assert j.limit.upper == pytest.approx(math.radians(IIWA_RANGE_DEG[i]), abs=1e-8)
        assert j.limit.velocity == pytest.approx(math.radians(IIWA_SPEED_DEG_S[i]), abs=1e-8)
        assert j.limit.effort == IIWA_TORQUE[i]


def test_iiwa_mass_within_5_percent_of_kuka():
    masses = link_masses("iiwa_wsg")
    arm = sum(masses[f"iiwa_link_{i}"] for i in range(8))
    assert arm == pytest.approx(29.9, rel=0.05)          # KUKA: 29.9 kg
    wsg = masses["wsg_base"] + masses["wsg_finger_left"] + masses["wsg_finger_right"]
    assert wsg == pytest.approx(1.2, rel=0.05)           # Schunk WSG 50-110: 1.2 kg


def test_wsg_stroke_and_force():
    joints = joints_by_name("iiwa_wsg")
    for side in ("left", "right"):
        j = joints[f"wsg_finger_{side}_joint"]
        assert j.type == "prismatic" and j.mimic is None
        assert (j.limit.lower, j.limit.upper) == (0.0, pytest.approx(0.055))   # 0-110 mm total
        assert j.limit.effort == 80.0


def test_panda_limits_equal_franka_spec():
    joints = joints_by_name("franka")
    for i in range(7):
        j = joints[f"panda_joint{i + 1}"]
        assert (j.limit.lower, j.limit.upper) == (PANDA_LOWER[i], PANDA_UPPER[i])
        assert (j.limit.velocity, j.limit.effort) == (PANDA_VEL[i], PANDA_TORQUE[i])
    f1, f2 = joints["panda_finger_joint1"], joints["panda_finger_joint2"]
    assert (f1.limit.lower, f1.limit.upper, f1.limit.effort) == (0.0, 0.04, 70.0)   # 0-80 mm, 70 N
    assert f2.mimic is not None and f2.mimic.joint == "panda_finger_joint1" and f2.mimic.multiplier == 1.0


def test_panda_masses_match_published_values():
    masses = link_masses("franka")
    for i, m in enumerate(PANDA_GAZ_MASSES):
        assert masses[f"panda_link{i + 1}"] == pytest.approx(m, rel=0.05)
    assert sum(masses.values()) == pytest.approx(18.0, rel=0.05)   # Franka: ~18 kg
    hand = masses["panda_hand"] + masses["panda_leftfinger"] + masses["panda_rightfinger"]
    assert hand == pytest.approx(0.73, rel=0.05)


def test_allegro_limits_equal_vendor_and_mass():
    joints = joints_by_name("allegro")
    for finger in range(3):
        for k in range(4):
            j = joints[f"joint_{4 * finger + k}.0"]
            assert (j.limit.lower, j.limit.upper) == ALLEGRO_FINGER_LIMITS[k]
    for k in range(4):
        j = joints[f"joint_{12 + k}.0"]
        assert (j.limit.lower, j.limit.upper) == ALLEGRO_THUMB_LIMITS[k]
    assert sum(link_masses("allegro").values()) == pytest.approx(1.08, rel=0.05)


def test_barrett_ranges_couplings_and_mass():
    joints = joints_by_name("barrett")
    spread, spread2 = joints["bh_spread_joint"], joints["bh_spread_joint_f2"]
    assert (spread.limit.lower, spread.limit.upper) == (0.0, pytest.approx(math.pi))
    assert spread2.mimic.joint == "bh_spread_joint" and abs(spread2.mimic.multiplier) == 1.0
    for f in (1, 2, 3):
        prox, dist = joints[f"bh_finger_{f}_proximal_joint"], joints[f"bh_finger_{f}_distal_joint"]
        assert (prox.limit.lower, prox.limit.upper) == (0.0, pytest.approx(math.radians(140)))
        assert dist.mimic.joint == prox.name and dist.mimic.multiplier == pytest.approx(48 / 140, rel=1e-6)
        assert dist.limit.upper == pytest.approx(math.radians(48))
    assert sum(link_masses("barrett").values()) == pytest.approx(1.18, rel=0.05)


def frame_position(name, frame, q=None):
    model, _ = pin_model(name)
    data = model.createData()
    q = pin.neutral(model) if q is None else q
    pin.framesForwardKinematics(model, data, q)
    return data.oMf[model.getFrameId(frame)]


def test_iiwa_flange_height_at_zero():
    pose = frame_position("iiwa_wsg", "iiwa_flange")
    np.testing.assert_allclose(pose.translation, [0, 0, 1.306], atol=1e-9)
    np.testing.assert_allclose(pose.rotation[:, 2], [0, 0, 1], atol=1e-9)   # flange normal points up


def test_panda_flange_at_zero():
    pose = frame_position("franka", "panda_link8")
    np.testing.assert_allclose(pose.translation, [0.088, 0, 0.926], atol=1e-9)
    np.testing.assert_allclose(pose.rotation[:, 2], [0, 0, -1], atol=1e-9)  # flange normal points down
    tcp = frame_position("franka", "panda_hand_tcp")
    np.testing.assert_allclose(tcp.translation, [0.088, 0, 0.926 - 0.1034], atol=1e-9)


def test_gripper_pad_faces_are_at_the_joint_coordinate():
    """Opening between pad faces = q_left + q_right (WSG), 2 q (Franka): pads at +-q from the centre plane."""
    model, geom = pin_model("iiwa_wsg")
    data, gdata = model.createData(), pin.GeometryData(geom)
    q = pin.neutral(model)
    q[7], q[8] = 0.03, 0.02
    pin.framesForwardKinematics(model, data, q)
    left = data.oMf[model.getFrameId("wsg_finger_left_tip")].translation
    right = data.oMf[model.getFrameId("wsg_finger_right_tip")].translation
    assert np.linalg.norm(left - right) == pytest.approx(0.05, abs=1e-12)
    # the pad faces are the innermost collision surfaces of the fingers
    pin.updateGeometryPlacements(model, data, geom, gdata, q)
    import coal
    for side, tip in (("left", left), ("right", right)):
        inward = (right - left) if side == "left" else (left - right)
        inward /= np.linalg.norm(inward)
        for k, go in enumerate(geom.geometryObjects):
            if not go.name.startswith(f"wsg_finger_{side}"):
                continue
            m = gdata.oMg[k]
            half = np.asarray(go.geometry.halfSide)
            # support point of the box in the inward direction
            local = m.rotation.T @ inward
            extreme = m.translation + m.rotation @ (np.sign(local) * half)
            assert (extreme - tip) @ inward <= 1e-9
            if go.name.endswith("_1"):        # the pad: its face passes through the tip frame
                assert (extreme - tip) @ inward == pytest.approx(0.0, abs=1e-9)
            assert isinstance(go.geometry, coal.Box)


# ------------------------------------------------------------------------------------ mesh visuals

@pytest.mark.parametrize("name", MESH_VARIANTS)
def test_mesh_visual_variant_same_model(name):
    base = name.replace("_mesh_visuals", "")
    share = erd_share()
    path = URDF_DIR / f"{name}.urdf"
    robot = parse_urdf(path)
    meshes = [v.geometry.filename for link in robot.links for v in link.visuals if hasattr(v.geometry, "filename")]
    assert meshes, "no mesh visuals"
    for uri in meshes:
        assert uri.startswith("package://example-robot-data/")
        assert (share / uri[len("package://"):]).is_file(), uri
    m1, _ = pin_model(base)
    m2, _ = pin_model(name)
    assert list(m1.names) == list(m2.names)
    q = pin.randomConfiguration(m1)
    d1, d2 = m1.createData(), m2.createData()
    np.testing.assert_allclose(pin.crba(m1, d1, q), pin.crba(m2, d2, q), atol=1e-12)
    vmodel = pin.buildGeomFromUrdf(m2, str(path), pin.GeometryType.VISUAL, package_dirs=[str(share)])
    assert vmodel.ngeoms == len(meshes)


# ------------------------------------------------------------------------------------ objects

OBJ_META = yaml.safe_load((OBJ_DIR / "objects.yaml").read_text())


def solid_volume(geometry) -> float:
    kind = type(geometry).__name__
    if kind == "Box":
        return float(np.prod(geometry.size))
    if kind == "Cylinder":
        return math.pi * geometry.radius ** 2 * geometry.length
    if kind == "Sphere":
        return 4 / 3 * math.pi * geometry.radius ** 3
    raise AssertionError(kind)


@pytest.mark.parametrize("name", [o for o in OBJECTS if o != "mug"])
def test_object_mass_is_density_times_volume(name):
    link = parse_urdf(OBJ_DIR / f"{name}.urdf").links[0]
    vol = sum(solid_volume(c.geometry) for c in link.collisions)
    assert link.inertial.mass == pytest.approx(OBJ_META[name]["density"] * vol, rel=1e-7)


@pytest.mark.parametrize("name", ["box_10cm", "box_5cm", "box_flat", "sphere_10cm", "sphere_5cm", "bottle",
                                  "cylinder_4cm", "bronze_rod"])
def test_single_primitive_object_inertia_is_analytic(name):
    link = parse_urdf(OBJ_DIR / f"{name}.urdf").links[0]
    (col,) = link.collisions
    g, m, i = col.geometry, link.inertial.mass, link.inertial.inertia
    kind = type(g).__name__
    if kind == "Box":
        a, b, c = g.size
        expect = [m * (b * b + c * c) / 12, m * (a * a + c * c) / 12, m * (a * a + b * b) / 12]
    elif kind == "Cylinder":
        r, h = g.radius, g.length
        expect = [m * (3 * r * r + h * h) / 12] * 2 + [m * r * r / 2]
    else:
        expect = [0.4 * m * g.radius ** 2] * 3
    np.testing.assert_allclose([i.ixx, i.iyy, i.izz], expect, rtol=1e-7)
    assert (i.ixy, i.ixz, i.iyz) == (0, 0, 0)
    np.testing.assert_allclose(link.inertial.origin.xyz, [0, 0, 0], atol=1e-12)


def test_icf_reference_objects():
    """ICF paper: 10 cm boxes of 1.0 kg and 10 cm spheres of 0.524 kg (water); bronze at 8000 kg/m^3."""
    assert OBJ_META["box_10cm"]["mass"] == pytest.approx(1.0, abs=1e-9)
    assert OBJ_META["sphere_10cm"]["mass"] == pytest.approx(0.524, abs=5e-4)
    assert OBJ_META["bronze_rod"]["density"] == 8000.0


def test_tamsi_mug():
    """TAMSI paper mug: 10 cm tall, 4 cm radius, 100 g; mass = density x (cup shell + handle) volume."""
    link = parse_urdf(OBJ_DIR / "mug.urdf").links[0]
    body = link.collisions[0].geometry
    assert (body.radius, body.length) == (0.04, 0.1)
    assert link.inertial.mass == pytest.approx(0.1, abs=1e-12)
    meta = OBJ_META["mug"]
    t, rho = meta["wall_thickness"], meta["density"]
    handle = link.collisions[1].geometry.size
    shell = math.pi * (0.04 ** 2 - (0.04 - t) ** 2) * (0.1 - t) + math.pi * 0.04 ** 2 * t + np.prod(handle)
    assert rho * shell == pytest.approx(0.1, rel=1e-6)
    # a thin-walled cup: more axial inertia than a solid cylinder of the same mass, less than a thin tube
    izz = link.inertial.inertia.izz
    assert 0.5 * 0.1 * 0.04 ** 2 < izz < 0.1 * 0.04 ** 2 * 1.2


# ------------------------------------------------------------------------------------ presets

@pytest.mark.parametrize("name", ROBOTS)
def test_preset_consistent_with_urdf(name):
    preset = load_robot_preset(name)
    assert Path(preset.urdf) == (URDF_DIR / f"{name}.urdf").resolve()
    scene = load_scene({"robot": name})
    model = scene.model
    pm = model.pin_model
    assert set(preset.initial_positions) == set(model.joint_names)
    assert set(preset.gains) == set(model.joint_names)
    grouped = [j for g in preset.joint_groups.values() for j in g.joints]
    assert sorted(grouped) == sorted(model.joint_names)
    for j, value in preset.initial_positions.items():
        i = model.joint_index(j)
        assert model.position_lower[i] <= value <= model.position_upper[i], j
    frames = [preset.tool_frame, *preset.fingertip_frames, *preset.contact_bodies]
    if preset.ft_sensor is not None:
        frames += [preset.ft_sensor["frame"], preset.ft_sensor["parent_link"], preset.ft_sensor["child_link"]]
    for f in frames:
        assert pm.existFrame(f), f"{name}: frame {f!r} not in the model"
    # no contact at the initial configuration (self-collision filtered as the preset says)
    from contact_sim_ros.geometry.contact_query import ContactQuery
    data, gdata = pm.createData(), pin.GeometryData(model.collision_model)
    pin.forwardKinematics(pm, data, scene.q0)
    pin.updateFramePlacements(pm, data)
    pin.updateGeometryPlacements(pm, data, model.collision_model, gdata)
    contacts = ContactQuery(model, margin=0.0).update(data, gdata, None)
    touching = [(model.geometry_names[a], model.geometry_names[b])
                for a, b, d in zip(contacts.geometry_a, contacts.geometry_b, contacts.signed_distance) if d < 0]
    assert touching == []


def test_preset_with_missing_urdf_names_preset_and_urdf(tmp_path):
    preset = tmp_path / "broken.yaml"
    preset.write_text("name: broken\nurdf: no_such_robot.urdf\n")
    with pytest.raises(ModelError) as err:
        load_robot_preset(preset)
    assert "broken.yaml" in str(err.value) and "no_such_robot.urdf" in str(err.value)


def test_preset_with_unknown_group_joint_names_preset_and_joint(tmp_path):
    data = yaml.safe_load((ROOT / "config" / "robots" / "iiwa_wsg.yaml").read_text())
    data["joint_groups"]["gripper"]["joints"] = ["wsg_finger_left_joint", "wsg_finger_middle_joint"]
    preset = tmp_path / "typo.yaml"
    preset.write_text(yaml.safe_dump(data))
    with pytest.raises(ModelError) as err:
        load_scene({"robot": str(preset)})
    msg = str(err.value)
    assert "typo.yaml" in msg and "wsg_finger_middle_joint" in msg and "gripper" in msg
