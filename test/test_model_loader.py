"""Model loading: URDFs nobody here wrote, package:// resolution, scenes, and the specific errors."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from contact_sim_ros.errors import ConfigError, ModelError
from contact_sim_ros.model.loader import load_robot_preset, load_urdf
from contact_sim_ros.sim.scene import load_scene
from contact_sim_ros.sim.simulator import Simulator


def _erd(*parts):
    for entry in sys.path:
        p = Path(entry, "cmeel.prefix", "share", "example-robot-data", "robots", *parts)
        if p.exists():
            return str(p)
    pytest.fail("example-robot-data is not installed (it is a test dependency in requirements.txt)")


def test_example_robot_data_panda_loads_with_mimic_and_convex_meshes():
    urdf = load_urdf(_erd("panda_description", "urdf", "panda.urdf"))
    assert urdf.model.nq == 8                      # finger_joint2 mimics finger_joint1
    assert [m.name for m in urdf.mimic_joints] == ["panda_finger_joint2"]
    kinds = {type(go.geometry).__name__ for go in urdf.collision_model.geometryObjects}
    assert "Convex" in kinds and not any(k.startswith("BVH") for k in kinds)


@pytest.mark.parametrize("path", [("panda_description", "urdf", "panda.urdf"),
                                  ("allegro_hand_description", "urdf", "allegro_right_hand.urdf")])
def test_foreign_urdfs_simulate_on_a_table(path):
    scene = {"robot": {"urdf": _erd(*path), "base_pose": {"xyz": [0, 0, 0.3]}},
             "objects": [{"name": "cube", "shape": {"box": [0.04, 0.04, 0.04]}, "mass": 0.1,
                          "pose": {"xyz": [0.3, 0.0, 0.02]}}],
             "environment": [{"name": "ground", "shape": "halfspace"}]}
    sim = Simulator(scene, time_step=1e-3)
    joints = sim.model.joint_names
    sim.set_gains(kp={j: 50.0 for j in joints}, kd={j: 2.0 for j in joints})
    sim.reset()
    sim.run(0.2)
    assert np.all(np.isfinite(sim.q)) and np.all(np.isfinite(sim.v))
    assert abs(sim.body_pose("cube").translation[2] - 0.02) < 1e-3   # the cube rests on the ground


def test_package_uri_resolved_through_ros_package_path(tmp_path, monkeypatch):
    mesh_dir = tmp_path / "my_robot_description" / "meshes"
    mesh_dir.mkdir(parents=True)
    # a tetrahedron as ASCII STL
    v = np.array([[0, 0, 0], [0.1, 0, 0], [0, 0.1, 0], [0, 0, 0.1]])
    faces = [(0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3)]
    lines = ["solid t"]
    for f in faces:
        lines += ["facet normal 0 0 0", "outer loop"] + [f"vertex {' '.join(map(str, v[i]))}" for i in f] + \
                 ["endloop", "endfacet"]
    (mesh_dir / "tet.stl").write_text("\n".join(lines + ["endsolid t"]))
    urdf = """<robot name="r"><link name="a"><collision><geometry>
      <mesh filename="package://my_robot_description/meshes/tet.stl"/></geometry></collision></link></robot>"""
    monkeypatch.setenv("ROS_PACKAGE_PATH", str(tmp_path))
    model = load_urdf(urdf)
    assert type(model.collision_model.geometryObjects[0].geometry).__name__ == "Convex"
    monkeypatch.setenv("ROS_PACKAGE_PATH", "")
    with pytest.raises(ModelError, match=r"link 'a': collision mesh 'package://my_robot_description/meshes/tet.stl' not found"):
        load_urdf(urdf)


def test_malformed_urdf_names_the_file(tmp_path):
    bad = tmp_path / "broken.urdf"
    bad.write_text("<robot name='x'><link name='a'>")
    with pytest.raises(ModelError, match=r"broken.urdf: malformed URDF XML: .*line 1"):
        load_urdf(str(bad))
    bad.write_text("<robot name='x'><link name='a'/><link name='b'/><joint name='j' type='revolute'>"
                   "<parent link='a'/><child link='b'/></joint></robot>")
    with pytest.raises(ModelError, match=r"broken.urdf: invalid URDF: .*Joint \[j\].*does not specify limits"):
        load_urdf(str(bad))
    bad.write_text("<robot name='x'><link name='a'/><joint name='j' type='fixed'>"
                   "<parent link='a'/><child link='c'/></joint></robot>")
    with pytest.raises(ModelError, match=r"broken.urdf: joint 'j' refers to link 'c', which is not defined"):
        load_urdf(str(bad))


def test_unknown_robot_preset_lists_the_valid_ones():
    with pytest.raises(ConfigError, match=r"unknown robot 'no_such_robot'; valid robots: "):
        load_robot_preset("no_such_robot")


def test_preset_with_missing_urdf_and_unknown_joint(tmp_path):
    preset = tmp_path / "mine.yaml"
    preset.write_text("urdf: does_not_exist.urdf\n")
    with pytest.raises(ModelError, match=r"mine.yaml: URDF 'does_not_exist.urdf' not found"):
        load_robot_preset(str(preset))
    (tmp_path / "one.urdf").write_text(
        "<robot name='o'><link name='a'/><link name='b'><inertial><mass value='1'/>"
        "<inertia ixx='1' iyy='1' izz='1' ixy='0' ixz='0' iyz='0'/></inertial></link>"
        "<joint name='j1' type='revolute'><parent link='a'/><child link='b'/><axis xyz='0 0 1'/>"
        "<limit lower='-1' upper='1' effort='1' velocity='1'/></joint></robot>")
    preset.write_text("urdf: one.urdf\njoint_groups:\n  arm: {joints: [j1, j9]}\n")
    with pytest.raises(ModelError, match=r"mine.yaml: joint group 'arm' names joint 'j9', which is not in .*one.urdf"):
        load_scene({"robot": str(preset)})


@pytest.mark.parametrize("scene, message", [
    ({"objects": [{"name": "b", "shape": {"sphere": 0.1}, "mass": -1}]}, r"object 'b' needs a mass > 0 kg"),
    ({"objects": [{"name": "b", "shape": {"cone": [1, 2]}, "mass": 1}]}, r"unknown shape 'cone'; valid shapes: box"),
    ({"gravity": [0, 0]}, r"gravity: expected 3 finite numbers"),
    ({"materials": {"default": {"friction": -0.1}}}, r"materials.default: contact material friction must be finite and >= 0"),
    ({"materials": {"default": {"stifness": 1}}}, r"unknown key\(s\) \['stifness'\]; valid keys"),
    ({"objects": [{"name": "b", "shape": {"sphere": 0.1}, "mass": 1}],
      "inputs": {"external_forces": [{"body": "b", "force": ["sin(w*t)", 0, 0]}]}},
     r"unknown name 'w' in 'sin\(w\*t\)'"),
    ({"objects": [{"name": "b", "shape": {"sphere": 0.1}, "mass": 1}],
      "inputs": {"external_forces": [{"body": "c", "force": [1, 0, 0]}]}}, r"unknown body 'c'; valid bodies: b"),
    ({"robot": "x"}, r"unknown robot 'x'; valid robots: "),
    ({"robotz": "x"}, r"unknown key\(s\) \['robotz'\]; valid keys"),
    ({"robots": "x"}, r"'robots' is a non-empty list of robot entries"),
])
def test_bad_scene_values_name_the_parameter(scene, message):
    with pytest.raises((ConfigError, ModelError), match=message):
        load_scene(scene)


def test_scene_file_errors_name_the_file(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("objects: [{name: b, shape: {sphere: 0.1}}]\n")
    with pytest.raises(ConfigError, match=r"s.yaml: object 'b' needs a mass"):
        load_scene(str(f))
    f.write_text("objects: [\n")
    with pytest.raises(ConfigError, match=r"s.yaml: malformed YAML"):
        load_scene(str(f))


def test_collision_filter_skips_same_body_parent_child_and_disabled():
    scene = load_scene({"robot": {"urdf": _erd("panda_description", "urdf", "panda.urdf")},
                        "environment": [{"name": "ground", "shape": "halfspace"}],
                        "disabled_collisions": [["panda_link5", "panda_link7"]]})
    m = scene.model
    link = {i: m.pin_model.frames[go.parentFrame].name for i, go in enumerate(m.collision_model.geometryObjects)}
    pairs = {frozenset((link[a], link[b])) for a, b in m.collision_pairs}
    assert frozenset(("panda_link1", "panda_link2")) not in pairs       # parent/child
    assert frozenset(("panda_link5", "panda_link7")) not in pairs       # disabled in config
    assert frozenset(("panda_link1", "panda_link4")) in pairs
    joints = m.geometry_parent_joint
    assert all(joints[a] != joints[b] for a, b in m.collision_pairs)   # never the same body


def test_robot_urdf_in_a_scene_file_resolves_against_the_scene_folder(tmp_path, monkeypatch):
    (tmp_path / "robots").mkdir()
    (tmp_path / "robots" / "one.urdf").write_text(
        "<robot name='o'><link name='a'/><link name='b'><inertial><mass value='1'/>"
        "<inertia ixx='1' iyy='1' izz='1' ixy='0' ixz='0' iyz='0'/></inertial></link>"
        "<joint name='j1' type='revolute'><parent link='a'/><child link='b'/><axis xyz='0 0 1'/>"
        "<limit lower='-1' upper='1' effort='1' velocity='1'/></joint></robot>")
    scene = tmp_path / "scene.yaml"
    scene.write_text("robot: {urdf: robots/one.urdf, initial_positions: {j1: 0.5}}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    loaded = load_scene(str(scene))
    assert loaded.model.joint_names == ("j1",) and loaded.q0[0] == 0.5


def test_preset_armature_adds_reflected_inertia_to_the_mass_matrix(tmp_path):
    import pinocchio as pin
    urdf = tmp_path / "one.urdf"
    urdf.write_text(
        "<robot name='o'><link name='a'/><link name='b'><inertial><mass value='1'/>"
        "<inertia ixx='0.1' iyy='0.1' izz='0.2' ixy='0' ixz='0' iyz='0'/></inertial></link>"
        "<joint name='j1' type='revolute'><parent link='a'/><child link='b'/><axis xyz='0 0 1'/>"
        "<limit lower='-1' upper='1' effort='1' velocity='1'/></joint></robot>")
    plain = load_scene({"robot": {"urdf": str(urdf)}}).model.pin_model
    geared = load_scene({"robot": {"urdf": str(urdf), "armature": {"j1": 0.3}}}).model.pin_model
    q = pin.neutral(plain)
    m_plain = pin.crba(plain, plain.createData(), q)[0, 0]
    assert m_plain == pytest.approx(0.2)
    assert pin.crba(geared, geared.createData(), q)[0, 0] == pytest.approx(m_plain + 0.3)
    with pytest.raises(ConfigError, match=r"armature of 'j1' must be a number >= 0"):
        load_scene({"robot": {"urdf": str(urdf), "armature": {"j1": -1}}})


# ------------------------------------------------------------------------ mass properties (issue 17)
ONE_LINK = ("<robot name='o'><link name='a'/><link name='b'><inertial><mass value='{m}'/>"
            "<inertia ixx='{ixx}' iyy='{iyy}' izz='{izz}' ixy='{ixy}' ixz='0' iyz='0'/></inertial></link>{extra}"
            "<joint name='j1' type='revolute'><parent link='a'/><child link='b'/><axis xyz='0 0 1'/>"
            "<limit lower='-1' upper='1' effort='1' velocity='1'/></joint></robot>")


def _one_link(m="1", ixx="0.1", iyy="0.1", izz="0.1", ixy="0", extra=""):
    return ONE_LINK.format(m=m, ixx=ixx, iyy=iyy, izz=izz, ixy=ixy, extra=extra)


@pytest.mark.parametrize("values, message", [
    ({"m": "0"}, r"moving link 'b' \(joint 'j1'.*mass must be > 0 kg and finite, got 0.0"),
    ({"m": "nan"}, r"moving link 'b': <mass>: value must be a finite number, got 'nan'"),
    ({"m": "inf"}, r"moving link 'b': <mass>: value must be a finite number, got 'inf'"),
    ({"m": "-1"}, r"moving link 'b': mass must be >= 0 kg, got -1.0"),
    ({"ixx": "nan"}, r"moving link 'b': <inertia>: ixx must be a finite number, got 'nan'"),
    ({"ixx": "-0.1"}, r"moving link 'b' \(joint 'j1'.*inertia must be positive definite"),
    ({"ixx": "0.5"}, r"moving link 'b' \(joint 'j1'.*inertia violates the triangle inequality I1 \+ I2 >= I3"),
    ({"ixy": "0.2"}, r"moving link 'b' \(joint 'j1'.*inertia must be positive definite"),   # eigenvalue -0.1
    ({"ixx": "0", "iyy": "0", "izz": "0"}, r"moving link 'b' \(joint 'j1'.*must be positive definite"),
])
def test_unphysical_mass_or_inertia_of_a_moving_link_names_the_link_and_the_file(tmp_path, values, message):
    path = tmp_path / "bad_arm.urdf"
    path.write_text(_one_link(**values))
    with pytest.raises(ModelError, match=r"bad_arm.urdf: " + message):
        load_urdf(str(path))
    with pytest.raises(ModelError, match=r"bad_arm.urdf: " + message):        # through a scene too
        load_scene({"robot": {"urdf": str(path)}})


def test_mass_checks_accept_physical_limits_and_skip_links_that_do_not_move(tmp_path):
    # a flat plate sits on the triangle bound (Izz = Ixx + Iyy): accepted within the tolerance
    load_urdf(_one_link(ixx="0.0100000", iyy="0.0400000", izz="0.05000005"))
    # a massless link welded to a moving link with mass: the composed body is checked, not the massless link
    load_urdf(_one_link(extra="<link name='tool0'/><joint name='tool_mount' type='fixed'><parent link='b'/>"
                              "<child link='tool0'/></joint>"))
    # garbage on a link welded to the world does not move anything: not checked
    load_urdf(_one_link(extra="<link name='stand'><inertial><mass value='-5'/><inertia ixx='nan' iyy='0' "
                              "izz='0' ixy='0' ixz='0' iyz='0'/></inertial></link><joint name='stand_mount' "
                              "type='fixed'><parent link='a'/><child link='stand'/></joint>"))
    # a free object: its root link moves
    with pytest.raises(ModelError, match=r"<urdf string>: moving link 'b'.*mass must be > 0"):
        load_urdf("<robot name='o'><link name='b'/></robot>", floating_base_name="o_freejoint")


def test_shipped_robots_objects_and_scenes_pass_the_mass_checks():
    root = Path(__file__).resolve().parents[1]
    robots = sorted((root / "urdf").glob("*.urdf")) + sorted((root / "scenes").glob("*.urdf"))
    objects = sorted((root / "urdf" / "objects").glob("*.urdf"))
    assert robots and objects
    for path in robots:
        load_urdf(str(path))
    for path in objects:
        load_urdf(str(path), floating_base_name="object_freejoint")
    for path in (_erd("panda_description", "urdf", "panda.urdf"),
                 _erd("allegro_hand_description", "urdf", "allegro_right_hand.urdf")):
        load_urdf(path)


def test_scene_read_into_a_dict_names_its_file_and_resolves_against_its_folder(tmp_path, monkeypatch):
    """The node reads the scene file into a mapping (to merge robot overrides) and loads that: errors name the
    file, not '<scene dict>', and relative URDF paths resolve against the scene's folder."""
    from contact_sim_ros.yaml_files import read_mapping
    path = tmp_path / "my_scene.yaml"
    path.write_text("objects: [{name: b, shape: {sphere: 0.1}}]\n")
    data = read_mapping(path, "a scene")
    with pytest.raises(ConfigError, match=r"^.*my_scene.yaml: object 'b' needs a mass") as info:
        load_scene(data, source=str(path))
    assert "<scene dict>" not in str(info.value)
    with pytest.raises(ConfigError, match=r"^<scene dict>: object 'b' needs a mass"):     # no file: said so
        load_scene(data)
    (tmp_path / "robots").mkdir()
    (tmp_path / "robots" / "one.urdf").write_text(_one_link())
    path.write_text("robot: {urdf: robots/one.urdf}\n")
    monkeypatch.chdir(tmp_path / "robots")                  # not the scene's folder
    scene = load_scene(read_mapping(path, "a scene"), source=str(path))
    assert scene.source == str(path) and scene.model.joint_names == ("j1",)


@pytest.mark.parametrize("robot", ["franka", "barrett"])
def test_mimic_expansion_reproduces_pinocchios_mimic_kinematics(robot):
    """MimicExpansion (the one place the URDF <mimic> rule is applied to the actuated joints' state): the robot
    built WITHOUT mimic joints (each mimic joint free), set to the actuated q, v and the expansion's mimic q, v,
    puts every link where Pinocchio's mimic model puts it and moves it with the same spatial velocity."""
    import pinocchio as pin

    from contact_sim_ros.model.composition import build_scene_model
    from contact_sim_ros.model.multibody_model import MimicExpansion
    preset = load_robot_preset(robot)
    model = build_scene_model(preset, [], [])
    mimic = MimicExpansion.of(model)
    assert len(mimic) >= 1 and set(mimic.names) == {mj.name for mj in model.mimic_joints}
    pm = model.pin_model
    free = pin.buildModelFromUrdf(str(preset.urdf))           # every URDF joint a degree of freedom
    assert free.nv == pm.nv + len(mimic)
    dm, df = pm.createData(), free.createData()
    rng = np.random.default_rng(7)
    lo, hi = np.asarray(model.position_lower), np.asarray(model.position_upper)
    for _ in range(5):
        qa = rng.uniform(np.where(np.isfinite(lo), lo, -1.0), np.where(np.isfinite(hi), hi, 1.0))
        va = rng.normal(size=qa.size)
        q, v = pin.neutral(pm), np.zeros(pm.nv)
        q[model.joint_q_index], v[model.joint_v_index] = qa, va
        qf, vf = pin.neutral(free), np.zeros(free.nv)
        for name, qj, vj in zip((*model.joint_names, *mimic.names), (*qa, *mimic.positions(qa)),
                                (*va, *mimic.velocities(va))):
            joint = free.joints[free.getJointId(name)]
            qf[joint.idx_q], vf[joint.idx_v] = qj, vj
        pin.forwardKinematics(pm, dm, q, v)
        pin.updateFramePlacements(pm, dm)
        pin.forwardKinematics(free, df, qf, vf)
        pin.updateFramePlacements(free, df)
        links = [f.name for f in free.frames if f.type == pin.FrameType.BODY]
        for link in links:
            fm, ff = pm.getFrameId(link), free.getFrameId(link)
            assert np.allclose(dm.oMf[fm].homogeneous, df.oMf[ff].homogeneous, atol=1e-12), link
            vm = pin.getFrameVelocity(pm, dm, fm, pin.LOCAL_WORLD_ALIGNED).vector
            vff = pin.getFrameVelocity(free, df, ff, pin.LOCAL_WORLD_ALIGNED).vector
            assert np.allclose(vm, vff, atol=1e-12), link
