"""Several robots in ONE physics model (scene key ``robots:``, contact_sim_ros/model/composition.py).

Real URDFs, no ROS, TAMSI at dt = 1 ms:
(a) a bare iiwa (urdf/iiwa.urdf) with the Allegro hand on its flange (scenes/iiwa_allegro_mug.yaml): the hand
    moves exactly with the flange, finger contacts act on the arm's joints, the mug rests on the hand, the whole
    holds still under PD + gravity compensation;
(b) two iiwa_wsg with prefixes left_/right_ facing each other: 18 prefixed joints, independent control, a box
    squeezed between the two grippers;
(c) errors naming the scene file.
"""

from __future__ import annotations

import re

import numpy as np
import pinocchio as pin
import pytest
from scipy.optimize import fsolve

from contact_sim_ros.errors import ConfigError
from contact_sim_ros.model.composition import prefix_urdf_xml, robot_description_xml
from contact_sim_ros.resources import share_dir
from contact_sim_ros.sim.scene import load_scene
from contact_sim_ros.sim.sensors import joint_contact_wrenches
from contact_sim_ros.sim.simulator import Simulator
from contact_sim_ros.yaml_files import read_mapping

ENGINE = "tamsi"
DT = 1e-3
IIWA_ALLEGRO = str(share_dir() / "scenes" / "iiwa_allegro_mug.yaml")
ARM = [f"iiwa_joint_{i}" for i in range(1, 8)]


def iiwa_allegro(objects=None, environment=None) -> Simulator:
    data = read_mapping(IIWA_ALLEGRO, "a scene")
    if objects is not None:
        data["objects"] = objects
    if environment is not None:
        data["environment"] = data.get("environment", []) + environment
    return Simulator(load_scene(data, source=IIWA_ALLEGRO), engine=ENGINE, time_step=DT)


def hold(sim, targets, steps, data, every=None):
    """PD on ``targets`` (every joint) with gravity feed-forward g(q) for ``steps`` steps."""
    m = sim.model
    joints = list(m.joint_names)
    for k in range(steps):
        g = pin.computeGeneralizedGravity(m.pin_model, data, sim.q)
        sim.set_joint_targets(positions=targets,
                              efforts={j: float(g[m.joint_v_index[i]]) for i, j in enumerate(joints)})
        sim.step(strict=True)
        if every is not None:
            every(k)


def geometry_links(model) -> list[str]:
    """The link owning each geometry (static environment geometry: its own name)."""
    return [model.pin_model.frames[go.parentFrame].name if go.parentFrame else go.name
            for go in model.collision_model.geometryObjects]


# ------------------------------------------------------------------------------------- (a) iiwa + Allegro


def test_iiwa_allegro_model_records_both_robots():
    sim = iiwa_allegro(objects=[])
    m = sim.model
    assert [r.name for r in m.robots] == ["iiwa", "allegro"]
    arm, hand = m.robot("iiwa"), m.robot("allegro")
    assert arm.joint_names == tuple(ARM) and arm.prefix == "" and arm.parent_robot is None
    assert len(hand.joint_names) == 16 and hand.preset == "allegro" and hand.base_frame == "palm_link"
    assert (hand.parent_robot, hand.parent_frame) == ("iiwa", "iiwa_link_7")
    assert sorted(np.concatenate([arm.joint_indices, hand.joint_indices]).tolist()) == list(range(23))
    assert [m.joint_names[i] for i in hand.joint_indices] == list(hand.joint_names)
    assert m.robot_of_joint("joint_3.0") is hand and m.robot_of_joint("iiwa_joint_7") is arm
    assert len(m.tree_velocity_slices) == 1          # one kinematic tree: the hand hangs off the arm
    # the scene's robots carry the ROS-side fields; scene.robot stays the first robot
    assert [r.name for r in sim.scene.robots] == ["iiwa", "allegro"] and sim.scene.robot.name == "iiwa"
    assert sim.scene.scene_robot("allegro").namespace == "allegro"
    # every joint has the gains of its robot (allegro preset: kp 3, iiwa mapping: kp 2000 on joint 1)
    assert sim.data.kp[m.joint_v_index[m.joint_index("joint_5.0")]] == 3.0
    assert sim.data.kp[m.joint_v_index[m.joint_index("iiwa_joint_1")]] == 2000.0
    assert sim.default_gains == {}
    # no contact between the arm and the hand at the start
    assert sim.contact_query.update(sim.pin_data, sim.geometry_data, None).size == 0


def test_allegro_base_moves_exactly_with_the_flange():
    sim = iiwa_allegro(objects=[])
    m = sim.model
    mount = m.robot("allegro").base_placement
    rng = np.random.default_rng(16)
    for _ in range(5):
        q = sim.q.copy()
        for j in ARM:
            i = m.joint_index(j)
            q[m.joint_q_index[i]] = rng.uniform(0.8 * m.position_lower[i], 0.8 * m.position_upper[i])
        sim.set_state(q, np.zeros(m.nv))
        expected = sim.body_pose("iiwa_link_7") * mount
        palm = sim.body_pose("palm_link")
        assert np.allclose(palm.homogeneous, expected.homogeneous, atol=1e-9)


def test_finger_pressing_on_an_obstacle_loads_the_arm_joints():
    """Generalized contact force J^T f of a finger pressing on a fixed block is nonzero on the arm's joints and
    equals sum_j J_j^T w_j over the contact wrenches on the bodies (world Jacobians at the step's start)."""
    sim = iiwa_allegro(objects=[])
    tip = sim.body_pose("link_3.0_tip").translation
    block = {"name": "block", "shape": {"box": [0.04, 0.04, 0.04]},
             "pose": {"xyz": [float(tip[0]), float(tip[1]), float(tip[2] - 0.03)]}}
    sim = iiwa_allegro(objects=[], environment=[block])
    m = sim.model
    data = m.pin_model.createData()
    targets = dict(zip(m.joint_names, sim.joint_positions()))
    hold(sim, targets, 200, data)
    q_start = sim.q.copy()
    hold(sim, targets, 1, data)
    links = geometry_links(m)
    hand_links = set(m.robot("allegro").link_names)
    touching = {links[g] for a, b in zip(sim.contacts.geometry_a, sim.contacts.geometry_b) for g in (a, b)}
    assert "block" in touching and touching - {"block"} <= hand_links and touching & {"link_2.0", "link_3.0"}
    forces = sim.contact_forces_world()
    assert np.linalg.norm(forces, axis=1).max() > 1.0
    gcf = sim.last_result.generalized_contact_force
    arm_v = m.joint_v_index[m.robot("iiwa").joint_indices]
    assert np.abs(gcf[arm_v]).max() > 0.5                      # N*m: the press reaches the arm
    wrenches = joint_contact_wrenches(m, sim.contacts, forces)
    jdata = m.pin_model.createData()
    pin.computeJointJacobians(m.pin_model, jdata, q_start)
    expected = sum(pin.getJointJacobian(m.pin_model, jdata, j, pin.WORLD).T @ wrenches[j]
                   for j in range(1, m.pin_model.njoints) if np.any(wrenches[j]))
    assert np.allclose(gcf, expected, rtol=1e-9, atol=1e-9)


def test_iiwa_allegro_holds_still_under_pd_and_gravity_compensation():
    sim = iiwa_allegro(objects=[])
    m = sim.model
    q0 = sim.joint_positions().copy()
    worst = [0.0]

    def track(_):
        worst[0] = max(worst[0], float(np.abs(sim.joint_positions() - q0).max()))
    hold(sim, dict(zip(m.joint_names, q0)), 1000, m.pin_model.createData(), track)
    assert worst[0] < 1e-3, f"a joint moved {worst[0] * 1e3:.3f} mrad"


def test_mug_rests_on_the_hand_and_loads_the_arm():
    sim = iiwa_allegro()
    m = sim.model
    data = m.pin_model.createData()
    mug = set(np.flatnonzero(m.geometry_parent_joint == m.free_body("mug").joint_id).tolist())
    links = geometry_links(m)
    hand_links = set(m.robot("allegro").link_names)
    arm_v = m.joint_v_index[m.robot("iiwa").joint_indices]
    touched, arm_load = set(), 0.0

    def watch(_):
        nonlocal arm_load
        if sim.contacts is None or sim.contacts.size == 0:
            return
        forces = np.linalg.norm(sim.contact_forces_world(), axis=1)
        for k, (a, b) in enumerate(zip(sim.contacts.geometry_a, sim.contacts.geometry_b)):
            if (a in mug) != (b in mug) and forces[k] > 0.0:
                touched.add(links[b if a in mug else a])
        arm_load = max(arm_load, float(np.abs(sim.last_result.generalized_contact_force[arm_v]).max()))
    hold(sim, dict(zip(m.joint_names, sim.joint_positions())), 600, data, watch)
    assert touched and touched <= hand_links | {"ground"} and "palm_link" in touched
    assert touched & {f"link_{i}.0" for i in range(16)} | {f"link_{i}.0_tip" for i in (3, 7, 11, 15)}
    assert arm_load > 0.3                                      # the mug's weight on the arm's joints (N*m)
    assert sim.body_pose("mug").translation[2] > 0.5           # still on the hand


# --------------------------------------------------------------------------------- (b) two iiwa_wsg

def _arm_positions(x: float, z: float) -> dict:
    """iiwa_wsg joint positions putting wsg_tcp at (x, 0, z) in the robot's frame, gripper horizontal along +x
    (joints 2, 4, 6 in the vertical plane), fingers 10 mm from the centre."""
    one = Simulator({"robot": "iiwa_wsg"}, engine=ENGINE, time_step=DT)
    m = one.model

    def tcp(s):
        q = one.q.copy()
        q[[m.joint_q_index[m.joint_index(j)] for j in ("iiwa_joint_2", "iiwa_joint_4", "iiwa_joint_6")]] = \
            [s[0], s[1], np.pi / 2 - s[0] + s[1]]
        one.set_state(q, np.zeros(m.nv))
        return one.body_pose("wsg_tcp").translation[[0, 2]]
    s = fsolve(lambda s: tcp(s) - np.array([x, z]), [-0.28, -1.5], xtol=1e-12)
    assert np.allclose(tcp(s), [x, z], atol=1e-9)
    return {"iiwa_joint_1": 0.0, "iiwa_joint_2": s[0], "iiwa_joint_3": 0.0, "iiwa_joint_4": s[1],
            "iiwa_joint_5": 0.0, "iiwa_joint_6": np.pi / 2 - s[0] + s[1], "iiwa_joint_7": 0.0,
            "wsg_finger_left_joint": 0.01, "wsg_finger_right_joint": 0.01}


def two_iiwa(initial=None, objects=()):
    scene = {"robots": [
        {"name": "left", "robot": "iiwa_wsg", "prefix": "left_", "namespace": "left", "frame_prefix": "left/",
         "base_pose": {"xyz": [0, 0.6, 0], "rpy": [0, 0, -np.pi / 2]}},
        {"name": "right", "robot": "iiwa_wsg", "prefix": "right_", "namespace": "right", "frame_prefix": "right/",
         "base_pose": {"xyz": [0, -0.6, 0], "rpy": [0, 0, np.pi / 2]}}],
        "objects": list(objects), "environment": [{"name": "ground", "shape": "halfspace"}]}
    if initial:
        scene["initial_positions"] = {p + k: float(v) for p in ("left_", "right_") for k, v in initial.items()}
    return Simulator(scene, engine=ENGINE, time_step=DT)


def test_two_iiwa_wsg_have_18_prefixed_joints_and_independent_control():
    sim = two_iiwa()
    # in the preset's start pose the two grippers (tcp at y = +-0.053 m) touch: one model, one contact query
    links = geometry_links(sim.model)
    owner = {ln: r.name for r in sim.model.robots for ln in r.link_names}
    contacts = sim.contact_query.update(sim.pin_data, sim.geometry_data, None)
    assert any({owner.get(links[a]), owner.get(links[b])} == {"left", "right"}
               for a, b in zip(contacts.geometry_a, contacts.geometry_b))
    # arms drawn back (joint 2 upright): apart
    sim = two_iiwa({"iiwa_joint_2": -0.3, "iiwa_joint_4": -1.6, "iiwa_joint_6": 1.342})
    contacts = sim.contact_query.update(sim.pin_data, sim.geometry_data, None)
    assert not any({owner.get(links[a]), owner.get(links[b])} == {"left", "right"}
                   for a, b in zip(contacts.geometry_a, contacts.geometry_b))
    m = sim.model
    left, right = m.robot("left"), m.robot("right")
    assert len(m.joint_names) == 18
    assert left.joint_names == tuple("left_" + j for j in ARM + ["wsg_finger_left_joint", "wsg_finger_right_joint"])
    assert right.joint_names == tuple("right_" + j for j in ARM + ["wsg_finger_left_joint", "wsg_finger_right_joint"])
    assert left.base_frame == "left_iiwa_link_0" and "right_wsg_tcp" in right.link_names
    assert len(m.tree_velocity_slices) == 2
    # presets are prefixed for the ROS side (joint groups, F/T sensor, frames); names of groups stay
    r = sim.scene.scene_robot("right")
    assert r.joint_groups["gripper"].joints == ("right_wsg_finger_left_joint", "right_wsg_finger_right_joint")
    assert r.ft_sensor["child_link"] == "right_wsg_base" and r.ft_sensor["topic"] == "ft_sensor"
    assert (r.prefix, r.namespace, r.frame_prefix, r.preset_name) == ("right_", "right", "right/", "iiwa_wsg")
    assert r.tool_frame == "right_iiwa_tool0" and r.gains["right_iiwa_joint_1"] == (2000.0, 80.0)
    assert "<joint name=\"right_iiwa_joint_1\"" in robot_description_xml(r)
    # both arms sit at their base poses with the same configuration
    assert np.allclose(sim.body_pose("left_iiwa_link_0").translation, [0, 0.6, 0])
    assert np.allclose(sim.body_pose("right_iiwa_link_0").translation, [0, -0.6, 0])
    # commanding the left arm by prefixed name moves only the left arm: the right arm's motion is the same as in
    # a run without the command (to rounding), and stays within its static PD error
    data = m.pin_model.createData()
    q0 = sim.joint_positions().copy()
    hold(sim, dict(zip(m.joint_names, q0)), 500, data)
    reference = sim.joint_positions().copy()
    sim.reset()
    targets = dict(zip(m.joint_names, q0))
    targets["left_iiwa_joint_1"] = 0.3
    hold(sim, targets, 500, data)
    dq = sim.joint_positions() - q0
    assert dq[m.joint_index("left_iiwa_joint_1")] == pytest.approx(0.3, abs=5e-3)
    assert np.allclose(sim.joint_positions()[right.joint_indices], reference[right.joint_indices], atol=1e-12)
    assert np.abs(dq[right.joint_indices]).max() < 1e-3
    assert np.abs(reference[left.joint_indices] - q0[left.joint_indices]).max() < 1e-3


def test_two_grippers_squeeze_one_box_with_equal_and_opposite_forces():
    """Both grippers, horizontal at 0.9 m and pointing at each other along y, press on the two faces of a 0.2 kg
    box (10 cm along y) 6 mm beyond touching and hold it by friction: the y forces of the two robots on the box
    are equal and opposite (5 %) and carry the squeeze; the box does not fall."""
    touch, push = _arm_positions(0.525, 0.9), _arm_positions(0.531, 0.9)
    box = {"name": "box", "shape": {"box": [0.08, 0.1, 0.08]}, "mass": 0.2, "pose": {"xyz": [0, 0, 0.9]},
           "material": {"friction": 1.0}}
    sim = two_iiwa(touch, [box])
    m = sim.model
    links = geometry_links(m)
    owner = {ln: r.name for r in m.robots for ln in r.link_names}
    g_box = m.geometry_names.index("box")
    samples = []

    def measure(k):
        if k < 800:
            return
        per_robot = {"left": np.zeros(3), "right": np.zeros(3)}
        for i, f in enumerate(sim.contact_forces_world()):
            a, b = sim.contacts.geometry_a[i], sim.contacts.geometry_b[i]
            if g_box in (a, b):
                other, sign = (a, 1.0) if b == g_box else (b, -1.0)
                if links[other] in owner:
                    per_robot[owner[links[other]]] += sign * f
        samples.append((per_robot["left"], per_robot["right"]))
    targets = {p + k: float(v) for p in ("left_", "right_") for k, v in push.items()}
    z0 = sim.body_pose("box").translation[2]
    hold(sim, targets, 1000, m.pin_model.createData(), measure)
    f_left = np.mean([s[0] for s in samples], axis=0)
    f_right = np.mean([s[1] for s in samples], axis=0)
    assert f_left[1] < -5.0 and f_right[1] > 5.0, (f_left, f_right)     # left pushes -y, right +y
    assert abs(f_left[1] + f_right[1]) < 0.05 * abs(f_left[1])
    assert f_left[2] + f_right[2] == pytest.approx(0.2 * 9.81, rel=0.05)   # friction carries the weight
    assert abs(sim.body_pose("box").translation[2] - z0) < 0.02


# -------------------------------------------------------------------------------------------- (c) errors


def _write(tmp_path, text):
    path = tmp_path / "scene.yaml"
    path.write_text(text)
    return path


def test_two_robots_with_the_same_names_need_prefixes(tmp_path):
    path = _write(tmp_path, "robots:\n  - {name: a, robot: iiwa_wsg}\n"
                            "  - {name: b, robot: iiwa_wsg, base_pose: {xyz: [0, 1, 0]}}\n")
    with pytest.raises(ConfigError) as err:
        load_scene(str(path))
    msg = str(err.value)
    assert msg.startswith(str(path)) and "robot 'b' and robot 'a' share the names of joints" in msg
    assert "iiwa_joint_1" in msg and "wsg_finger_right_joint" in msg and "prefix" in msg


def test_composition_errors_name_the_problem(tmp_path):
    cases = [
        ("robots:\n  - {name: a, robot: iiwa_wsg}\n  - {name: a, robot: allegro}\n",
         r"robot names must be unique; repeated: \['a'\]"),
        ("robot: iiwa_wsg\nrobots:\n  - {name: iiwa_wsg, robot: allegro}\n", "repeated: ['iiwa_wsg']"),
        ("robots:\n  - {name: arm, robot: {urdf: iiwa.urdf}}\n"
         "  - {name: hand, robot: allegro, parent: {robot: arm, link: iiwa_link_9}}\n",
         "robot 'hand': parent unknown link of robot 'arm' 'iiwa_link_9'; valid links: iiwa_flange"),
        ("robots:\n  - {name: hand, robot: allegro, parent: {robot: arms, link: iiwa_link_7}}\n",
         "robot 'hand': parent unknown robot 'arms'; valid robots: hand"),
        ("robots:\n  - {name: a, robot: allegro, parent: {robot: b, link: palm_link}}\n"
         "  - {name: b, robot: allegro, prefix: b_, parent: {robot: a, link: palm_link}}\n",
         "robots mounted in a cycle: a -> b -> a"),
        ("robots:\n  - {name: a, robot: allegro, pose: {}}\n", "robots[0] (a): unknown key(s) ['pose']"),
        ("robots:\n  - {robot: allegro}\n", "robots[0]: each robot is a mapping with a unique 'name'"),
        ("robots:\n  - {name: a, robot: allegro, prefix: 'a b'}\n", "prefix must be a string without spaces"),
    ]
    for text, expected in cases:
        path = _write(tmp_path, text)
        with pytest.raises(ConfigError) as err:
            load_scene(str(path))
        assert str(err.value).startswith(str(path)), str(err.value)
        assert expected in str(err.value) or re.search(expected, str(err.value)), str(err.value)


def test_single_robot_scene_is_one_instance_named_after_its_preset():
    sim = Simulator({"robot": "iiwa_wsg"}, engine=ENGINE, time_step=DT)
    (inst,) = sim.model.robots
    assert (inst.name, inst.prefix, inst.preset, inst.parent_frame) == ("iiwa_wsg", "", "iiwa_wsg", "universe")
    assert inst.joint_names == sim.model.joint_names and inst.joint_indices.tolist() == list(range(9))
    assert sim.scene.robots == [sim.scene.robot]
    assert Simulator({"objects": [{"name": "b", "shape": {"sphere": 0.1}, "mass": 1.0}]}).model.robots == ()


def test_prefix_urdf_renames_links_joints_and_references():
    xml = ('<robot name="r"><link name="a"/><link name="b"/><joint name="j" type="revolute"><parent link="a"/>'
           '<child link="b"/><mimic joint="k"/></joint><ros2_control name="x" type="system"><joint name="j"/>'
           '</ros2_control><material name="grey"/></robot>')
    out = prefix_urdf_xml(xml, "p_")
    for s in ('<link name="p_a"', '<link name="p_b"', '<joint name="p_j" type', '<parent link="p_a"',
              '<child link="p_b"', '<mimic joint="p_k"', '<joint name="p_j" />', '<material name="grey"'):
        assert s.replace(" />", "/>") in out.replace(" />", "/>"), (s, out)
