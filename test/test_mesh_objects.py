"""Mesh objects (issue 29): collision from convex pieces (CoACD, cached), mass properties from the mesh, errors.

The meshes are generated with trimesh (meshes/generate_meshes.py: a mug = cup of revolution + tube handle, a
hemispherical bowl) and written to temporary files once per session. Decompositions go to one temporary cache
(``CONTACT_SIM_MESH_CACHE``) shared by the tests, so that each mesh is decomposed once per session; the mug and the
bowl are decomposed with ``TEST_DECOMPOSITION`` (CoACD's search and sampling resolution lowered: about half the CPU
time of the defaults; since issue 43 closed meshes skip CoACD's manifold pre-processing and get a piece budget
scaled to the mesh: the mug ~18 pieces in ~1.5 CPU s, the bowl 30 in ~2.4 s; the hanging-mug and ball-in-bowl
physics assert what the pieces do).
"""

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import trimesh

from contact_sim_ros.errors import ConfigError, ContactSimError, ModelError
from contact_sim_ros.model import mesh_object
from contact_sim_ros.model.mesh_object import MeshSpec, mesh_body
from contact_sim_ros.sim.scene import load_scene
from contact_sim_ros.sim.simulator import Simulator

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("generate_meshes", ROOT / "meshes" / "generate_meshes.py")
generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate)


# CoACD parameters for the test's mug and bowl (model/mesh_object.DECOMPOSITION_DEFAULTS: resolution 1000,
# mcts_iterations 30, mcts_nodes 10): about half the CPU time (before issue 43, with CoACD's manifold pre-processing:
# the mug 15 CPU s instead of ~30, the bowl 5 instead of ~9)
TEST_DECOMPOSITION = {"resolution": 500, "mcts_iterations": 10, "mcts_nodes": 5, "preprocess_resolution": 30}


@pytest.fixture(scope="session")
def mesh_dir(tmp_path_factory):
    """Meshes written once per session, and the decomposition cache of the session."""
    d = tmp_path_factory.mktemp("meshes")
    generate.mug().export(d / "mug.obj")
    generate.bowl().export(d / "bowl.obj")
    generate.l_bracket().export(d / "l_bracket.obj")
    return d


@pytest.fixture(autouse=True)
def mesh_cache(mesh_dir, monkeypatch):
    monkeypatch.setenv("CONTACT_SIM_MESH_CACHE", str(mesh_dir / "cache"))
    mesh_object._MEMO.clear()          # every test reads the disk cache (or decomposes), not the process memo
    mesh_object._COACD_RUNS.clear()
    yield mesh_dir / "cache"
    mesh_object._MEMO.clear()


def _free_body_inertia(scene, name):
    model = scene.model
    body = model.free_body(name)
    return model.pin_model.inertias[body.joint_id]


# ------------------------------------------------------------------------------------------- mass properties

BOX = np.array([0.1, 0.2, 0.3])          # m
OFFSET = np.array([0.01, -0.02, 0.03])   # m, the box centre in the file's frame


def _assert_relative(actual, expected, rel=1e-6):
    """|actual - expected| <= rel |expected| (Frobenius norms: zero products of inertia come out as 1e-19)."""
    assert np.linalg.norm(actual - expected) <= rel * np.linalg.norm(expected), (actual, expected)


def _box_inertia(mass, dims):
    a, b, c = dims
    return mass / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])


@pytest.mark.parametrize("scale", [1.0, [2.0, 1.0, 0.5]])
def test_mesh_box_mass_com_and_inertia_equal_the_analytic_values(tmp_path, scale):
    box = trimesh.creation.box(extents=BOX)
    box.apply_translation(OFFSET)
    box.export(tmp_path / "box.stl")
    s = np.broadcast_to(np.asarray(scale, float), (3,))
    density = 700.0
    scene = load_scene({"objects": [{"name": "box", "mesh": str(tmp_path / "box.stl"), "density": density,
                                     "scale": scale}]})
    inertia = _free_body_inertia(scene, "box")
    mass = density * np.prod(BOX * s)
    assert inertia.mass == pytest.approx(mass, rel=1e-6)
    np.testing.assert_allclose(inertia.lever, OFFSET * s, rtol=1e-6, atol=1e-12)
    _assert_relative(inertia.inertia, _box_inertia(mass, BOX * s))
    assert len(scene.model.geometry_names) == 1          # a convex mesh is used as it is: one piece

    # a mass instead of a density: the same centre of mass, the inertia scaled with the mass
    scene = load_scene({"objects": [{"name": "box", "mesh": str(tmp_path / "box.stl"), "mass": 2.5,
                                     "scale": scale}]})
    inertia = _free_body_inertia(scene, "box")
    assert inertia.mass == pytest.approx(2.5, rel=1e-12)
    np.testing.assert_allclose(inertia.lever, OFFSET * s, rtol=1e-6, atol=1e-12)
    _assert_relative(inertia.inertia, _box_inertia(2.5, BOX * s))


def test_mesh_with_a_missing_face_is_closed_for_its_mass_properties(tmp_path):
    box = trimesh.creation.box(extents=BOX)
    box.apply_translation(OFFSET)
    open_box = trimesh.Trimesh(box.vertices, box.faces[:-2])        # one face removed: not watertight
    assert not open_box.is_watertight
    open_box.export(tmp_path / "open_box.obj")
    scene = load_scene({"objects": [{"name": "box", "mesh": str(tmp_path / "open_box.obj"), "density": 200.0}]})
    assert len(scene.model.geometry_names) == 1        # closed, it is convex: no decomposition
    inertia = _free_body_inertia(scene, "box")
    assert inertia.mass == pytest.approx(1.2, rel=1e-6)
    np.testing.assert_allclose(inertia.lever, OFFSET, rtol=1e-6, atol=1e-12)
    _assert_relative(inertia.inertia, _box_inertia(1.2, BOX))


# -------------------------------------------------------------------------------------------- bad input

def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _bad_meshes(tmp_path):
    box = trimesh.creation.box(extents=[0.1, 0.1, 0.1])
    box.export(tmp_path / "ok.obj")
    cup = trimesh.creation.cylinder(radius=0.04, height=0.1, sections=24)
    top = cup.triangles_center[:, 2] > 0.049                   # the top cap removed: a 24-gon hole stays open
    trimesh.Trimesh(cup.vertices, cup.faces[~top]).export(tmp_path / "open.obj")
    tri = np.array([[0, 0, 0], [0.1, 0, 0], [0, 0.1, 0]], float)
    # both sides of a triangle: every edge shared by two faces (watertight) and no volume
    trimesh.Trimesh(tri, [[0, 1, 2], [0, 2, 1]], process=False).export(tmp_path / "flat.obj")
    return {
        "missing": ({"mesh": str(tmp_path / "nope.obj"), "mass": 1.0}, ModelError, r"mesh file not found: .*nope\.obj"),
        "unreadable": ({"mesh": str(_write(tmp_path / "junk.glb", "this is not a glTF binary")), "mass": 1.0},
                       ModelError, r"junk\.glb: cannot read the mesh \(\.glb"),
        "unknown format": ({"mesh": str(_write(tmp_path / "part.step", "ISO-10303-21;")), "mass": 1.0},
                           ModelError, r"part\.step: cannot read the mesh \(\.step; readable: \.obj"),
        "empty": ({"mesh": str(_write(tmp_path / "empty.obj", "# nothing\nv 0 0 0\nv 1 0 0\n")), "mass": 1.0},
                  ModelError, r"empty\.obj: the mesh is empty \(no triangles\)"),
        "nan": ({"mesh": str(_write(tmp_path / "nan.obj", "v 0 0 0\nv 1 0 0\nv nan 1 0\nv 0 0 1\n"
                                    "f 1 2 3\nf 1 2 4\nf 1 3 4\nf 2 3 4\n")), "mass": 1.0},
                ModelError, r"nan\.obj: 1 vertex\(es\) with NaN or infinite coordinates"),
        "inf": ({"mesh": str(_write(tmp_path / "inf.obj", "v 0 0 0\nv inf 0 0\nv 0 1 0\nv 0 0 1\n"
                                    "f 1 2 3\nf 1 2 4\nf 1 3 4\nf 2 3 4\n")), "mass": 1.0},
                ModelError, r"inf\.obj: 1 vertex\(es\) with NaN or infinite coordinates"),
        "zero volume": ({"mesh": str(tmp_path / "flat.obj"), "density": 500.0},
                        ModelError, r"flat\.obj: the mesh has zero volume .*give 'mass'"),
        "open with density": ({"mesh": str(tmp_path / "open.obj"), "density": 500.0},
                              ModelError, r"open\.obj: the mesh is not watertight \(24 edges not shared by exactly "
                                          r"two triangles\).*give 'mass'"),
        "scale 0": ({"mesh": str(tmp_path / "ok.obj"), "mass": 1.0, "scale": 0.0},
                    ConfigError, r"scale \(mesh .*ok\.obj\): the scale must be > 0"),
        "scale < 0": ({"mesh": str(tmp_path / "ok.obj"), "mass": 1.0, "scale": [1, -1, 1]},
                      ConfigError, r"scale \(mesh .*ok\.obj\): the scale must be > 0"),
        "mass and density": ({"mesh": str(tmp_path / "ok.obj"), "mass": 1.0, "density": 3.0},
                             ConfigError, r"ok\.obj\): give exactly one of 'mass' \(kg\) and 'density'"),
        "collision mode": ({"mesh": str(tmp_path / "ok.obj"), "mass": 1.0, "collision": "voxels"},
                           ConfigError, r"unknown collision mode 'voxels'; valid collision modes: auto, decompose, "
                                        r"hull"),
    }


CASES = ["missing", "unreadable", "unknown format", "empty", "nan", "inf", "zero volume", "open with density",
         "scale 0", "scale < 0", "mass and density", "collision mode"]


@pytest.mark.parametrize("case", CASES)
def test_bad_mesh_input_is_an_error_naming_the_file_and_the_problem(tmp_path, case):
    entry, error, pattern = _bad_meshes(tmp_path)[case]
    scene_file = tmp_path / "scene.yaml"
    with pytest.raises(error, match=pattern) as info:
        load_scene({"objects": [{"name": "thing", **entry}]}, source=scene_file)
    message = str(info.value)
    assert message.startswith(str(scene_file)) and "\n" not in message


# --------------------------------------------------------------------------------------- decomposition


def test_pieces_of_one_body_never_collide_with_each_other(mesh_dir):
    scene = load_scene({"objects": [{"name": "mug", "mesh": str(mesh_dir / "mug.obj"), "density": 1000.0,
                                     "decomposition": TEST_DECOMPOSITION},
                                    {"name": "cube", "shape": {"box": [0.05, 0.05, 0.05]}, "mass": 0.1,
                                     "pose": {"xyz": [0.3, 0, 0]}}]})
    model = scene.model
    pieces = [g for g, n in enumerate(model.geometry_names) if n.startswith("mug/")]
    assert len(pieces) > 1 and len(pieces) == len(model.geometry_names) - 1
    pairs = {tuple(p) for p in model.collision_pairs.tolist()}
    cube = model.geometry_names.index("cube")
    assert not any((a, b) in pairs for a in pieces for b in pieces)
    assert all((min(g, cube), max(g, cube)) in pairs for g in pieces)      # each piece meets other bodies


def test_second_load_reads_the_cache_and_gives_the_same_pieces(mesh_dir, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("CONTACT_SIM_MESH_CACHE", str(tmp_path / "fresh_cache"))
    spec = MeshSpec(str(mesh_dir / "l_bracket.obj"), (1.0, 1.0, 1.0), "decompose")
    first = mesh_body(spec, mass=0.3)
    assert not first.from_cache and first.decomposed and len(first.pieces) >= 2
    assert Path(first.cache_file).is_file() and Path(first.cache_file).parent == tmp_path / "fresh_cache"
    err = capfd.readouterr().err
    assert re.search(r"decomposing .*l_bracket\.obj \(\d+ triangles\) into convex pieces with CoACD", err)
    assert re.search(r"mesh object .*l_bracket\.obj: \d+ convex pieces \(CoACD; surface error \d+\.\d\d mm .*"
                     r"volume ratio pieces/mesh \d\.\d{3}\); mass 0\.3 kg", err)
    assert first.surface_error is not None and first.surface_error.largest < 0.005

    mesh_object._MEMO.clear()

    def no_decomposition(*args, **kwargs):
        raise AssertionError("decomposed again although the pieces are cached")
    monkeypatch.setattr(mesh_object, "decompose", no_decomposition)
    second = mesh_body(spec, mass=0.3)
    assert second.from_cache and second.cache_file == first.cache_file
    assert len(second.pieces) == len(first.pieces)
    for a, b in zip(first.pieces, second.pieces):
        np.testing.assert_array_equal(a, b)
    assert second.mass == first.mass and np.array_equal(second.inertia, first.inertia)
    assert second.surface_error == first.surface_error and second.method == first.method == "coacd"
    # other parameters are another decomposition (not the cached one)
    with pytest.raises(AssertionError, match="decomposed again"):
        mesh_body(MeshSpec(spec.path, spec.scale, "decompose", {"threshold": 0.2}), mass=0.3)
    with pytest.raises(AssertionError, match="decomposed again"):     # and so is another scale
        mesh_body(MeshSpec(spec.path, (2.0, 2.0, 2.0), "decompose"), mass=0.3)


# ---------------------------------------------------------------------------------------------- physics

ROD_Z = 0.5           # m, height of the horizontal rod's axis
HANDLE_POINT = np.array([0.055, 0.0, 0.062])   # m, a point inside the handle's hole, in the mug's frame


def _mug_on_rod(mesh_dir, collision):
    """The mug with the rod (along y) through its handle, released at rest."""
    xyz = np.array([0.0, 0.0, ROD_Z]) - HANDLE_POINT
    return Simulator({"objects": [{"name": "mug", "mesh": str(mesh_dir / "mug.obj"), "density": 1100.0,
                                   "collision": collision, "decomposition": TEST_DECOMPOSITION,
                                   "pose": {"xyz": xyz.tolist()}}],
                      "environment": [{"name": "rod", "shape": {"cylinder": [0.005, 0.3]},
                                       "pose": {"xyz": [0, 0, ROD_Z], "rpy": [np.pi / 2, 0, 0]}},
                                      {"name": "ground", "shape": "halfspace"}],
                      "materials": {"default": {"friction": 0.5}}},
                     engine="tamsi", time_step=1e-3)


@pytest.mark.timeout(900)
def test_mug_hangs_from_a_rod_through_its_handle_only_when_decomposed(mesh_dir):
    sim = _mug_on_rod(mesh_dir, "decompose")
    assert sum(n.startswith("mug/") for n in sim.model.geometry_names) > 1
    lever = _free_body_inertia(sim.scene, "mug").lever
    for _ in range(6):       # it swings about the rod (little damping): hooked at every look, never falling
        sim.run(0.25)
        mug = sim.body_pose("mug")
        # the rod's axis, in the mug's frame, lies in the handle's hole: between the handle's bars, off the cup
        rod_in_mug = mug.actInv(np.array([0.0, 0.0, ROD_Z]))
        assert 0.040 < rod_in_mug[0] < 0.075 and 0.02 < rod_in_mug[2] < 0.08 and abs(rod_in_mug[1]) < 0.01
        com = mug.act(lever)
        assert ROD_Z - 0.09 < com[2] < ROD_Z and abs(com[0]) < 0.06      # below the rod, within the handle's reach

    hull = _mug_on_rod(mesh_dir, "hull")        # the handle's hole filled: the rod cannot hold the mug
    assert "mug" in hull.model.geometry_names and len(hull.model.geometry_names) == 3
    # the rod starts inside the hull (the hole filled): a state the simulator refuses as deep interpenetration
    # (sim/penetration.py), never a mug hanging on the rod
    with pytest.raises(ContactSimError, match="interpenetration"):
        hull.run(1.5)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("collision", ["auto", "hull"])
def test_ball_dropped_into_a_bowl_rests_at_the_bottom_not_on_the_hull_lid(mesh_dir, collision):
    radius, wall, ball_r = 0.08, 0.008, 0.02       # the bowl of generate_meshes.bowl(): rim at z = radius
    sim = Simulator({"objects": [{"name": "bowl", "mesh": str(mesh_dir / "bowl.obj"), "density": 2000.0,
                                  "collision": collision, "decomposition": TEST_DECOMPOSITION},
                                 {"name": "ball", "shape": {"sphere": ball_r}, "mass": 0.05,
                                  "pose": {"xyz": [0.0, 0.0, radius + ball_r + 0.02]}}],
                     "environment": [{"name": "ground", "shape": "halfspace"}],
                     "materials": {"default": {"friction": 0.5, "dissipation": 20.0}}},
                    engine="tamsi", time_step=1e-3)
    sim.run(1.5)
    ball = sim.body_pose("ball").translation
    bowl = sim.body_pose("bowl").translation
    if collision == "auto":      # non-convex: decomposed; the ball at the bottom of the bowl's inside
        # the inner surface is a sphere of radius - wall about (0, 0, radius): the ball rests at its lowest point
        assert ball[2] - bowl[2] == pytest.approx(wall + ball_r, abs=0.006)
        assert np.hypot(*(ball[:2] - bowl[:2])) < 0.025     # near the centre (it may still roll a little)
    else:                        # the hull: the ball lies on the lid at the rim's height
        assert ball[2] - bowl[2] == pytest.approx(radius + ball_r, abs=0.003)
    assert np.linalg.norm(sim.body_velocity("ball")[:3]) < 0.05     # settled (it may still roll a little)


# ------------------------------------------------------------------------------------------------- URDF


def test_urdf_object_whose_collision_is_a_mesh_gets_its_convex_pieces(mesh_dir, tmp_path):
    urdf = tmp_path / "bracket.urdf"
    urdf.write_text(f"""<robot name="bracket"><link name="bracket_link">
      <inertial><mass value="0.3"/><inertia ixx="1e-4" iyy="1e-4" izz="1e-4" ixy="0" ixz="0" iyz="0"/></inertial>
      <visual><geometry><mesh filename="{mesh_dir / 'l_bracket.obj'}"/></geometry></visual>
      <collision><geometry><mesh filename="{mesh_dir / 'l_bracket.obj'}"/></geometry></collision>
    </link></robot>""")
    scene = load_scene({"objects": [{"name": "bracket", "urdf": str(urdf)}]})
    names = scene.model.geometry_names
    assert len(names) >= 2 and all(n.startswith("bracket_link_0/") for n in names)
    assert _free_body_inertia(scene, "bracket").mass == pytest.approx(0.3)     # the URDF's inertial
    hull = load_scene({"objects": [{"name": "bracket", "urdf": str(urdf), "collision": "hull"}]})
    assert hull.model.geometry_names == ("bracket_link_0",)


def test_urdf_object_without_inertial_takes_the_mass_properties_of_its_collision_mesh(tmp_path):
    box = trimesh.creation.box(extents=BOX)
    box.apply_translation(OFFSET)
    box.export(tmp_path / "box.stl")
    urdf = tmp_path / "part.urdf"
    urdf.write_text("""<robot name="part"><link name="part_link">
      <collision><origin xyz="0.1 0 0" rpy="0 0 1.5707963267948966"/>
        <geometry><mesh filename="box.stl" scale="2 1 1"/></geometry></collision>
    </link></robot>""")
    scene = load_scene({"objects": [{"name": "part", "urdf": str(urdf), "density": 500.0}]})
    inertia = _free_body_inertia(scene, "part")
    dims = BOX * [2, 1, 1]
    mass = 500.0 * np.prod(dims)
    assert inertia.mass == pytest.approx(mass, rel=1e-6)
    # the collision origin: a quarter turn about z, then 0.1 m along x
    np.testing.assert_allclose(inertia.lever, [0.1 - OFFSET[1], 2 * OFFSET[0], OFFSET[2]], rtol=1e-6, atol=1e-12)
    _assert_relative(inertia.inertia, _box_inertia(mass, dims[[1, 0, 2]]))
    # a scene mass next to a URDF <inertial> overrides it from the collision mesh (test_mesh_surface.py); a URDF
    # whose collision is a primitive has no mesh to take the inertia from
    with pytest.raises(ConfigError, match=r"'mass'/'density' need exactly one <collision> and it a <mesh>"):
        load_scene({"objects": [{"name": "b", "urdf": str(ROOT / "urdf/objects/box_5cm.urdf"), "mass": 1.0}]})


# ------------------------------------------------------------------------------- spawn URIs and campaigns


def test_mesh_uri_gives_the_scene_object_and_names_bad_input(mesh_dir):
    from contact_sim_ros.model.loader import resolve_mesh_path
    from contact_sim_ros.model.mesh_object import parse_mesh_uri

    def resolve(f):
        return resolve_mesh_path(f, None)
    name, obj = parse_mesh_uri(f"mesh://{mesh_dir / 'mug.obj'}?mass=0.3&scale=0.5&collision=hull&friction=0.8"
                               f"&threshold=0.1", resolve)
    assert name == "mug"
    assert obj == {"mesh": str(mesh_dir / "mug.obj"), "mass": 0.3, "scale": [0.5, 0.5, 0.5], "collision": "hull",
                   "decomposition": {"threshold": 0.1}, "material": {"friction": 0.8}}
    # the object set; its hull (the URI's decomposition path: test_spawned_mesh_object_is_decomposed_and_rests_on_
    # the_ground; this bowl's decomposition with the default parameters would cost ~9 CPU s here)
    name, obj = parse_mesh_uri("mesh://bowl.obj?density=1200&scale=1,1,2&collision=hull", resolve)
    assert name == "bowl" and Path(obj["mesh"]) == ROOT / "meshes" / "bowl.obj" and obj["scale"] == [1, 1, 2]
    scene = load_scene({"objects": [{"name": "m", **obj}]})
    assert scene.model.geometry_names == ("m",)
    assert scene.model.free_body("m").mass == pytest.approx(1200 * 2 * trimesh.load(obj["mesh"]).volume, rel=1e-6)
    # a visual mesh and its colour (what cameras and the browser view draw)
    name, obj = parse_mesh_uri(f"mesh://bowl.obj?mass=0.2&collision=hull&visual={mesh_dir / 'mug.obj'}"
                               f"&color=0,0,1", resolve)
    assert obj["visual"] == {"mesh": str(mesh_dir / "mug.obj"), "color": [0.0, 0.0, 1.0]}
    visual = load_scene({"objects": [{"name": "b", **obj}]}).objects[0].visual
    assert visual.path == str(mesh_dir / "mug.obj") and visual.color == (0.0, 0.0, 1.0, 1.0)
    with pytest.raises(ConfigError, match=r"visual\.color: \[r, g, b\] or \[r, g, b, a\] with each in 0\.\.1"):
        load_scene({"objects": [{"name": "b", **parse_mesh_uri("mesh://bowl.obj?mass=1&collision=hull&color=0,0,9",
                                                                 resolve)[1]}]})
    bad = [("mesh://nope.obj?mass=1", ModelError, r"mesh file 'nope\.obj' not found"),
           ("mesh://bowl.obj?mass=1&visual=nope.ply", ModelError, r"visual mesh file 'nope\.ply' not found"),
           ("mesh://bowl.obj?mass=1&color=blue", ConfigError, r"color is r,g,b or r,g,b,a in 0\.\.1, got 'blue'"),
           ("mesh://bowl.obj", ConfigError, r"give exactly one of 'mass' \(kg\) and 'density'"),
           ("mesh://bowl.obj?mass=1&density=2", ConfigError, r"give exactly one of 'mass'"),
           ("mesh://bowl.obj?mass=-1", ConfigError, r"mass must be > 0"),
           ("mesh://bowl.obj?mass=1&scale=0", ConfigError, r"scale must be > 0"),
           ("mesh://bowl.obj?mass=1&colour=red", ConfigError, r"unknown key\(s\) \['colour'\]"),
           ("mesh://bowl.obj?mass=1&collision=voxel", ConfigError, r"unknown collision mode 'voxel'"),
           ("mesh://?mass=1", ConfigError, r"no mesh file")]
    for uri, error, pattern in bad:
        with pytest.raises(error, match=pattern):
            parse_mesh_uri(uri, resolve)


def test_campaign_picks_the_object_from_the_mesh_set(tmp_path):
    import yaml
    from contact_sim_ros.scenarios.campaign import load_campaign, trial_scene
    spec = load_campaign(ROOT / "scenes" / "campaigns" / "pick_mesh_objects.yaml")
    picked = {spec.trial_parameters(k)["object.bottle.mesh"] for k in range(spec.trials)}
    assert picked == {"bottle.obj", "mug.obj", "bowl.obj"}
    scene_file = ROOT / "scenes" / "scenario_pick_shake_place.yaml"
    out = trial_scene(scene_file, {"object.bottle.mesh": "mug.obj", "object.bottle.z": -0.0901}, tmp_path)
    bottle = next(o for o in yaml.safe_load(out.read_text())["objects"] if o["name"] == "bottle")
    assert "urdf" not in bottle and Path(bottle["mesh"]) == ROOT / "meshes" / "mug.obj"
    assert bottle["pose"]["xyz"] == pytest.approx([0.55, -0.12, 0.0])


def _object_extent(scene_file, name):
    """(mass kg, rotational inertia 3x3 kg m^2 at the COM, collision AABB extents m) of a scene's free object."""
    model = load_scene(scene_file).model
    inertia = _free_body_inertia(load_scene(scene_file), name)
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    for go in model.collision_model.geometryObjects:
        if go.name == name or go.name.startswith(name + "/"):
            go.geometry.computeLocalAABB()
            box = go.geometry.aabb_local
            lo, hi = np.minimum(lo, box.min_), np.maximum(hi, box.max_)
    return inertia.mass, inertia.inertia.copy(), hi - lo


def test_campaign_mesh_choice_with_a_scale_per_file_gives_the_same_object_as_the_file_in_metres(tmp_path):
    """A campaign picks between a box of 4 x 6 x 18 cm written in metres and the same box written in millimetres
    with ``{mesh: FILE, scale: 0.001}``: a tiny campaign run in process (no Ray; each trial stops after the tare
    phase) writes the scaled file's value with its scale in the rows, and the object each row's value builds has the
    same mass, inertia and collision extents (4 x 6 x 18 cm) as the file in metres. The scale enters the
    fingerprint; a bad scale or option is an error naming the parameter and the option."""
    import pyarrow.parquet as pq
    import yaml
    from contact_sim_ros.scenarios.campaign import load_campaign, run_campaign, trial_scene
    dims = np.array([0.04, 0.06, 0.18])
    box = trimesh.creation.box(dims)
    box.apply_translation([0, 0, dims[2] / 2])              # the frame at its base, as the object set's bottle
    box.export(tmp_path / "box_m.obj")
    box.copy().apply_scale(1000.0).export(tmp_path / "box_mm.obj")

    def campaign(option, name="c.yaml"):
        path = tmp_path / name
        path.write_text(yaml.safe_dump({
            "scenario": "pick_shake_place", "engines": ["tamsi"], "trials": 4, "seed": 3,
            "controller": {"stop_at": "approach"},
            "parameters": {"object.bottle.mesh": {"choice": [str(tmp_path / "box_m.obj"), option]},
                           "object.bottle.z": -0.0901}}))
        return path

    spec = load_campaign(campaign({"mesh": str(tmp_path / "box_mm.obj"), "scale": 0.001}))
    scaled = f"{tmp_path / 'box_mm.obj'}?scale=0.001"
    assert spec.parameters["object.bottle.mesh"].args == (str(tmp_path / "box_m.obj"), scaled)
    assert scaled in json.dumps(spec.fingerprint())
    other = load_campaign(campaign({"mesh": str(tmp_path / "box_mm.obj"), "scale": [0.001, 0.001, 0.002]}, "o.yaml"))
    assert other.fingerprint()["distributions"] != spec.fingerprint()["distributions"]
    picked = [spec.trial_parameters(k)["object.bottle.mesh"] for k in range(spec.trials)]
    k_m, k_mm = picked.index(str(tmp_path / "box_m.obj")), picked.index(scaled)
    n = max(k_m, k_mm) + 1
    summary = run_campaign(spec, tmp_path / "out", trials=n, progress=False, in_process=True)
    assert not summary.get("interrupted")
    rows = pq.read_table(tmp_path / "out" / "results").to_pandas().set_index("trial")
    assert rows.loc[k_mm, "p.object.bottle.mesh"] == scaled and rows.loc[k_m, "p.object.bottle.mesh"] == picked[k_m]
    assert rows["success"].all(), rows["reason"].tolist()          # each trial reached the approach phase
    scene_file = ROOT / "scenes" / "scenario_pick_shake_place.yaml"
    built = {}
    for k in (k_m, k_mm):
        values = {"object.bottle.mesh": rows.loc[k, "p.object.bottle.mesh"], "object.bottle.z": -0.0901}
        built[k] = _object_extent(trial_scene(scene_file, values, tmp_path), "bottle")
    (m1, I1, e1), (m2, I2, e2) = built[k_m], built[k_mm]
    assert e1 == pytest.approx(dims, abs=1e-9) and e2 == pytest.approx(dims, abs=1e-9)
    assert m2 == pytest.approx(m1, rel=1e-12)
    _assert_relative(I2, I1, rel=1e-9)
    for option, message in [({"mesh": "box_mm.obj", "scale": 0}, r"choice\[1\] \(box_mm.obj\) scale: the scale "
                                                                  r"must be > 0"),
                            ({"mesh": "box_mm.obj", "scale": [1, 2]}, r"choice\[1\] \(box_mm.obj\) scale: a number "
                                                                       r"or a list of 3 numbers"),
                            ({"mesh": "box_mm.obj", "scales": 0.001}, r"choice\[1\]: a mesh option is a file name"),
                            ("box_mm.obj?scale=mm", r"choice\[1\]: 'box_mm.obj\?scale=mm': the scale after")]:
        with pytest.raises(ConfigError, match=r"parameters\.object\.bottle\.mesh: " + message):
            load_campaign(campaign(option, "bad.yaml"))


@pytest.mark.timeout(600)
def test_a_campaigns_failure_reasons_name_the_object_picked_from_the_mesh_choice(tmp_path):
    """A campaign trial whose scene object ``bottle`` is replaced by a mesh file names that file's object in its
    failure reason, never "the bottle": a tall box (crate.obj, 4 x 6 x 18 cm, friction 0.01: 20 N per finger hold
    at most ~0.4 N of its 5 N weight) slips out when lifted; a 5 cm box (brick.obj) is below the fingers, which
    close on nothing."""
    import yaml
    from contact_sim_ros.scenarios.campaign import load_campaign, run_trial
    trimesh.creation.box([0.04, 0.06, 0.18], transform=trimesh.transformations.translation_matrix(
        [0, 0, 0.09])).export(tmp_path / "crate.obj")
    trimesh.creation.box([0.04, 0.06, 0.05], transform=trimesh.transformations.translation_matrix(
        [0, 0, 0.025])).export(tmp_path / "brick.obj")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        "scenario": "pick_shake_place", "engines": ["tamsi"], "trials": 1, "seed": 0,
        "controller": {"motion_time": 0.5, "hold_time": 0.45, "shake_cycles": 1, "stop_at": "shake"},
        "parameters": {"object.bottle.mesh": {"choice": [str(tmp_path / "crate.obj"), str(tmp_path / "brick.obj")]},
                       "object.bottle.z": -0.0901, "object.bottle.friction": 0.01}}))
    spec = load_campaign(path)
    base = {"object.bottle.z": -0.0901, "object.bottle.friction": 0.01}
    crate = run_trial(spec, 0, "tamsi", {**base, "object.bottle.mesh": str(tmp_path / "crate.obj")})
    assert not crate["success"] and crate["phase"] in ("lift", "hold"), crate["reason"]
    assert "the crate slipped out of the grasp" in crate["reason"] and "bottle" not in crate["reason"]
    brick = run_trial(spec, 0, "tamsi", {**base, "object.bottle.mesh": str(tmp_path / "brick.obj")})
    assert not brick["success"] and brick["phase"] == "close", brick["reason"]
    assert "nothing between the fingers, the grasp missed the brick" in brick["reason"]
    assert "bottle" not in brick["reason"]


# ------------------------------------------------------------------------------------------------ grasp


@pytest.mark.timeout(900)
def test_wsg_grasps_and_lifts_the_decomposed_bottle_of_the_object_set():
    """The WSG 50 on the iiwa closes on the object set's bottle (meshes/bottle.obj: a neck, so decomposed into
    convex pieces), scaled to half its height to fit under the gripper's palm (9 cm tall, 0.25 kg from its mesh at
    1400 kg/m^3), around its body, and the arm lifts it 10 cm."""
    from test_robot_physics import ARMS, DT, ENGINE, _check_lift, _ik_lift, run_grasp_and_lift
    sim0 = Simulator({"robot": "iiwa_wsg"}, engine=ENGINE, time_step=DT)
    tcp = sim0.body_pose("wsg_tcp").translation
    arm = ARMS["iiwa_wsg"][0]
    up = _ik_lift(sim0, arm, "wsg_tcp", 0.10)
    base = tcp[2] - 0.03                      # the fingers close 3 cm above the bottle's base, on its body
    scene = {"robot": "iiwa_wsg",
             "objects": [{"name": "bottle", "mesh": "bottle.obj", "scale": [1.0, 1.0, 0.5], "density": 1400.0,
                          "pose": {"xyz": [tcp[0], tcp[1], base]}}],
             "environment": [{"name": "ground", "shape": "halfspace"},
                             {"name": "pedestal", "shape": {"box": [0.1, 0.1, 0.1]},
                              "pose": {"xyz": [tcp[0], tcp[1], base - 0.05]}}]}
    model = load_scene(scene).model
    assert sum(n.startswith("bottle/") for n in model.geometry_names) > 1
    assert model.free_body("bottle").mass == pytest.approx(0.5 * 0.498, abs=0.003)
    rise, hand_rise, vmax, touching = run_grasp_and_lift(
        scene, "bottle", "wsg_tcp", {"wsg_finger_left_joint": 0.0, "wsg_finger_right_joint": 0.0}, arm, up)
    _check_lift(rise, hand_rise, vmax)
    assert {"wsg_finger_left", "wsg_finger_right"} <= touching


# ------------------------------------------------------------------------------------------------ visuals


def _top_camera(height=0.5, fov=40.0):
    return {"name": "top", "pose": {"xyz": [0.0, 0.0, height], "rpy": [0.0, np.pi / 2, 0.0]}, "width": 160,
            "height": 160, "fov": fov, "near": 0.05, "far": 4.0}


def test_camera_draws_the_mesh_not_its_collision_hull(mesh_dir):
    """A ring (torus) whose collision is its hull (a disc: the hole filled) is drawn as the torus: seen from
    above, the pixels over the hole see the floor, those over the tube the ring."""
    from contact_sim_ros.cameras.rig import CameraRig
    generate.ring().export(mesh_dir / "ring.obj")
    scene = load_scene({"objects": [{"name": "ring", "mesh": str(mesh_dir / "ring.obj"), "mass": 0.05,
                                     "collision": "hull"}],
                        "environment": [{"name": "ground", "shape": "halfspace"}], "cameras": [_top_camera()]})
    assert scene.model.geometry_names == ("ring", "ground")       # one convex piece: the hole is not in the physics
    rig = CameraRig(scene)
    try:
        f = rig.render("top", scene.q0)
    finally:
        rig.release()
    ring = next(k for k, v in f.label_names.items() if v == "ring")
    # the world point under each pixel from its depth: radial distance from the ring's axis
    v, u = np.mgrid[0:f.spec.height, 0:f.spec.width]
    rays = np.stack([(u - f.spec.cx) / f.spec.fx, (v - f.spec.cy) / f.spec.fy, np.ones(u.shape)], axis=-1)
    pts = (rays * f.depth[..., None]) @ f.world_T_optical[:3, :3].T + f.world_T_optical[:3, 3]
    radial = np.hypot(pts[..., 0], pts[..., 1])
    hole = radial < 0.03 - 0.008 - 0.003                     # inside the tube's inner edge (major - minor)
    tube = np.abs(radial - 0.03) < 0.004                     # over the tube's crest
    assert hole.sum() > 50 and tube.sum() > 50
    assert np.all(f.labels[hole] != ring) and np.all(np.abs(pts[hole][:, 2]) < 1e-3)     # the floor
    assert np.all(f.labels[tube] == ring) and np.all(pts[tube][:, 2] > 0.012)             # the ring's top


def test_visual_mesh_with_its_colours_is_drawn_instead_of_the_collision_mesh(tmp_path):
    """Collision: a 10 cm box mesh; visual: a blue 3 cm sphere (face colours, PLY). The camera sees the sphere's
    disc (its area in pixels, not the box's square) in the sphere's blue, not the default object colour."""
    from contact_sim_ros.cameras.rig import CameraRig
    trimesh.creation.box(extents=[0.1, 0.1, 0.1]).export(tmp_path / "box.obj")
    sphere = trimesh.creation.icosphere(subdivisions=4, radius=0.03)
    sphere.visual.face_colors = np.tile([20, 40, 230, 255], (len(sphere.faces), 1))
    sphere.export(tmp_path / "blue_ball.ply")
    cam = _top_camera(height=0.6)
    scene = load_scene({"objects": [{"name": "part", "mesh": str(tmp_path / "box.obj"), "mass": 0.2,
                                     "visual": str(tmp_path / "blue_ball.ply"), "pose": {"xyz": [0, 0, 0.05]}}],
                        "cameras": [cam]}, source=str(tmp_path / "scene.yaml"))
    assert scene.model.geometry_names == ("part",)
    rig = CameraRig(scene)
    try:
        f = rig.render("top", scene.q0)
    finally:
        rig.release()
    seen = f.labels > 0
    # the sphere's silhouette from 0.55 m: a disc of angular radius asin(r / d), in pixels of focal length fx
    d = 0.6 - 0.05
    radius_px = f.spec.fx * np.tan(np.arcsin(0.03 / d))
    assert seen.sum() == pytest.approx(np.pi * radius_px ** 2, rel=0.05)
    box_px = (f.spec.fx * 0.05 / (0.6 - 0.1)) * 2
    assert seen.sum() < 0.5 * box_px ** 2
    rgb = f.color[seen].astype(float)
    assert np.all(rgb[:, 2] > 2 * rgb[:, 0]) and np.all(rgb[:, 2] > 2 * rgb[:, 1])     # blue (shaded)
    # a visual colour given in the scene overrides the file's; a missing visual file names it at load
    scene = load_scene({"objects": [{"name": "part", "mesh": str(tmp_path / "box.obj"), "mass": 0.2,
                                     "visual": {"mesh": str(tmp_path / "blue_ball.ply"), "color": [1, 0, 0]}}]})
    from contact_sim_ros.cameras.visual_scene import build_visual_scene
    assert {m.color for m in build_visual_scene(scene).meshes} == {(1.0, 0.0, 0.0, 1.0)}
    with pytest.raises(ModelError, match=r"objects\[0\] \(part\)\.visual: visual mesh file not found: nope\.ply"):
        load_scene({"objects": [{"name": "part", "mesh": str(tmp_path / "box.obj"), "mass": 0.2,
                                 "visual": "nope.ply"}]})
    with pytest.raises(ConfigError, match=r"visual\.color: \[r, g, b\] or \[r, g, b, a\] with each in 0\.\.1"):
        load_scene({"objects": [{"name": "part", "mesh": str(tmp_path / "box.obj"), "mass": 0.2,
                                 "visual": {"mesh": str(tmp_path / "blue_ball.ply"), "color": [300, 0, 0]}}]})


def test_visual_mesh_colours_from_materials_and_textures(tmp_path):
    """An OBJ's material colour (Kd, no UVs) and a GLB's texture (left half red, right half blue, sampled at the
    vertices) become the parts' colours."""
    from PIL import Image
    from contact_sim_ros.cameras.visual_scene import mesh_file_visuals
    (tmp_path / "green.mtl").write_text("newmtl green\nKd 0.1 0.8 0.2\n")
    box = trimesh.creation.box(extents=[1, 1, 1])
    lines = ["mtllib green.mtl", *(f"v {x} {y} {z}" for x, y, z in box.vertices), "usemtl green",
             *(f"f {a + 1} {b + 1} {c + 1}" for a, b, c in box.faces)]
    (tmp_path / "green.obj").write_text("\n".join(lines) + "\n")
    parts = mesh_file_visuals(str(tmp_path / "green.obj"), (0.1, 0.1, 0.1))
    assert len(parts) == 1 and parts[0][2] == pytest.approx((0.1, 0.8, 0.2, 1.0), abs=1 / 255) and parts[0][3]
    assert np.ptp(parts[0][0], axis=0) == pytest.approx([0.1, 0.1, 0.1])          # scaled
    uv = np.c_[np.where(box.vertices[:, 0] > 0, 0.95, 0.05), np.full(len(box.vertices), 0.5)]
    box.visual = trimesh.visual.TextureVisuals(uv=uv, image=Image.fromarray(np.array([[[255, 0, 0], [0, 0, 255]]],
                                                                                      np.uint8)))
    box.export(tmp_path / "textured.glb")
    parts = mesh_file_visuals(str(tmp_path / "textured.glb"))
    colors = {tuple(np.round(c[:3], 2)): len(f) for _, f, c, _ in parts}
    assert colors[(1.0, 0.0, 0.0)] == 2 and colors[(0.0, 0.0, 1.0)] == 2       # the -x face red, the +x face blue
    assert sum(colors.values()) == 12


def _world_vertices(vg, sim) -> np.ndarray:
    """The vertices of a drawn mesh where the browser puts them for the simulator's state (the frame's pose of
    geometry ``vg.index``, as ViewerProcess.publish_simulator sends it)."""
    from contact_sim_ros.viewer.scene_viewer import geometry_poses
    pm, cm = sim.model.pin_model, sim.model.collision_model
    gd = pin.GeometryData(cm)
    pin.updateGeometryPlacements(pm, pin.Data(pm), cm, gd, sim.q)
    x, y, z, qw, qx, qy, qz = geometry_poses(gd, [vg.index])[0]
    R = pin.Quaternion(qw, qx, qy, qz).toRotationMatrix()
    return np.asarray(vg.params["vertices"], float) @ R.T + [x, y, z]


def test_the_browser_view_draws_a_mesh_objects_visual_mesh_not_its_convex_pieces(tmp_path):
    """describe_scene (what the browser view draws, viewer/scene_viewer.py) of a decomposed bottle (two convex
    pieces) is the bottle's own mesh at its pose, once; of a box mesh with a blue sphere as its visual: the sphere in
    its colour; an object without a mesh keeps its shape."""
    from contact_sim_ros.viewer.scene_viewer import describe_scene
    trimesh.creation.box(extents=[0.1, 0.1, 0.1]).export(tmp_path / "box.obj")
    sphere = trimesh.creation.icosphere(subdivisions=2, radius=0.03)
    sphere.visual.face_colors = np.tile([20, 40, 230, 255], (len(sphere.faces), 1))
    sphere.export(tmp_path / "blue_ball.ply")
    bottle = ROOT / "meshes" / "bottle.obj"
    scene = load_scene({"objects": [
        {"name": "bottle", "mesh": str(bottle), "mass": 0.3, "collision": "decompose",
         "pose": {"xyz": [0.3, 0.1, 0.05], "rpy": [0.0, 0.0, 0.7]}},
        {"name": "part", "mesh": str(tmp_path / "box.obj"), "mass": 0.2, "visual": str(tmp_path / "blue_ball.ply"),
         "pose": {"xyz": [-0.2, 0.0, 0.05]}},
        {"name": "can", "shape": {"cylinder": [0.03, 0.1]}, "mass": 0.3, "pose": {"xyz": [0, 0.3, 0.05]}}]})
    sim = Simulator(scene, engine="semi_implicit")
    pieces = [n for n in sim.model.geometry_names if n.startswith("bottle")]
    assert len(pieces) == 2, sim.model.geometry_names
    drawn = describe_scene(sim.model, scene.objects)
    bottle_drawn = [vg for vg in drawn if vg.name.startswith("bottle")]
    assert len(bottle_drawn) == 1 and bottle_drawn[0].kind == "mesh" and bottle_drawn[0].moving
    mesh = trimesh.load(bottle, force="mesh")
    M = scene.objects[0].pose
    np.testing.assert_allclose(_world_vertices(bottle_drawn[0], sim), mesh.vertices @ M.rotation.T + M.translation,
                               atol=1e-6)
    part = [vg for vg in drawn if vg.name.startswith("part")]
    assert len(part) == 1 and part[0].color == (20, 40, 230)
    np.testing.assert_allclose(_world_vertices(part[0], sim), sphere.vertices + [-0.2, 0.0, 0.05], atol=1e-6)
    can = [vg for vg in drawn if vg.name.startswith("can")]
    assert [vg.kind for vg in can] == ["cylinder"]
    # without the scene's objects (what it drew before): the collision pieces
    assert len([vg for vg in describe_scene(sim.model) if vg.name.startswith("bottle")]) == 2
