"""The robot descriptions in simulation: gravity compensation, mimic couplings, grasp-and-lift smoke tests.

Engine: the reference "semi_implicit" engine at dt = 1 ms (the others are checked by their own suites).
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest
import yaml

from contact_sim_ros.model.loader import presets_dir
from contact_sim_ros.sim.simulator import Simulator

ENGINE = "semi_implicit"
DT = 1e-3


def gravity_efforts(sim, joints, data):
    """tau = g(q) for the named joints (N m or N), at the simulator's current q."""
    m = sim.model
    g = pin.computeGeneralizedGravity(m.pin_model, data, sim.q)
    return {j: float(g[m.joint_v_index[m.joint_index(j)]]) for j in joints}


def touching_pairs(sim):
    m = sim.model
    contacts = sim.contact_query.update(sim.pin_data, sim.geometry_data, None)
    return [(m.geometry_names[a], m.geometry_names[b])
            for a, b, d in zip(contacts.geometry_a, contacts.geometry_b, contacts.signed_distance) if d < 0.002]


def random_free_configuration(sim, arm, rng):
    """A random arm configuration in the middle 80 % of every joint range, free of self contact."""
    m = sim.model
    for _ in range(200):
        q = sim.q.copy()
        for j in arm:
            i = m.joint_index(j)
            lo, hi = m.position_lower[i], m.position_upper[i]
            q[m.joint_q_index[i]] = rng.uniform(lo + 0.1 * (hi - lo), hi - 0.1 * (hi - lo))
        sim.set_state(q, np.zeros(m.nv))
        if not touching_pairs(sim):
            return q
    raise AssertionError("no collision-free random configuration found")


ARMS = {
    "iiwa_wsg": ([f"iiwa_joint_{i}" for i in range(1, 8)], "iiwa_flange"),
    "franka": ([f"panda_joint{i}" for i in range(1, 8)], "panda_link8"),
}


@pytest.mark.parametrize("robot", sorted(ARMS))
def test_gravity_compensation_holds_random_configuration(robot):
    """With tau = g(q) (no PD) the arm stays put: flange drift < 1 mm over 2 s; without it, it falls."""
    arm, flange = ARMS[robot]
    sim = Simulator({"robot": robot}, engine=ENGINE, time_step=DT)
    m = sim.model
    joints = list(m.joint_names)
    sim.set_gains(kp={j: 0.0 for j in joints}, kd={j: 0.0 for j in joints})
    data = m.pin_model.createData()
    rng = np.random.default_rng(20261122)
    for trial in range(2):
        q0 = random_free_configuration(sim, arm, rng)
        sim.set_state(q0, np.zeros(m.nv))
        p0 = sim.body_pose(flange).translation.copy()
        drift = 0.0
        for _ in range(int(round(2.0 / DT))):
            sim.set_joint_targets(efforts=gravity_efforts(sim, joints, data))
            sim.step()
            drift = max(drift, float(np.linalg.norm(sim.body_pose(flange).translation - p0)))
        assert drift < 1e-3, f"{robot} trial {trial}: flange drifted {drift * 1000:.2f} mm"
    # control: the same arm without compensation sags visibly within 0.3 s
    sim.set_state(q0, np.zeros(m.nv))
    for _ in range(300):
        sim.set_joint_targets(efforts={j: 0.0 for j in joints})
        sim.step()
    assert np.linalg.norm(sim.body_pose(flange).translation - p0) > 0.01


def test_franka_fingers_mimic_symmetric():
    """panda_finger_joint2 mimics joint1: the pads stay symmetric about the hand's centre plane while the
    hand closes, the opening is 2 q, and the finger dof carries the mass of both fingers."""
    sim = Simulator({"robot": "franka"}, engine=ENGINE, time_step=DT)
    m = sim.model
    pm = m.pin_model
    fi = m.joint_index("panda_finger_joint1")
    vi = m.joint_v_index[fi]
    M = pin.crba(pm, pm.createData(), sim.q)
    assert M[vi, vi] == pytest.approx(2 * 0.015, rel=1e-9)   # kg: both fingers move with q
    assert "panda_finger_joint2" not in m.joint_names
    opening = []
    for k in range(400):
        sim.set_joint_targets(positions={"panda_finger_joint1": 0.04 - 0.03 * min(1.0, k / 200)})
        sim.step()
        hand = sim.body_pose("panda_hand")
        left = hand.actInv(sim.body_pose("panda_leftfinger_tip").translation)
        right = hand.actInv(sim.body_pose("panda_rightfinger_tip").translation)
        q = sim.q[m.joint_q_index[fi]]
        np.testing.assert_allclose(left, right * np.array([1, -1, 1]), atol=1e-12)
        assert left[1] == pytest.approx(q, abs=1e-12)
        opening.append(np.linalg.norm(left - right))
    assert opening[0] > 0.075 and opening[-1] == pytest.approx(0.02, abs=2e-3)   # the hand really closed


def _rotation_angle_about_x(rot):
    return math.atan2(rot[2, 1], rot[1, 1])


def test_barrett_couplings_hold():
    """Distal joints follow proximal ones at 48/140; one spread angle opens F1 and F2 mirror-symmetrically."""
    sim = Simulator({"robot": "barrett"}, engine=ENGINE, time_step=DT)
    targets = {"bh_spread_joint": 0.7, "bh_finger_1_proximal_joint": 0.3, "bh_finger_2_proximal_joint": 0.2,
               "bh_finger_3_proximal_joint": 0.15}
    ratio = 48.0 / 140.0
    m = sim.model
    for k in range(600):
        sim.set_joint_targets(positions=targets)
        sim.step()
        if k % 100 == 99:
            for f in (1, 2, 3):
                prox = sim.body_pose(f"bh_finger_{f}_proximal")
                dist = sim.body_pose(f"bh_finger_{f}_distal")
                rel = prox.actInv(dist)
                q2 = sim.q[m.joint_q_index[m.joint_index(f"bh_finger_{f}_proximal_joint")]]
                assert _rotation_angle_about_x(rel.rotation) == pytest.approx(ratio * q2, abs=1e-9)
            k1 = sim.body_pose("bh_finger_1_knuckle")
            k2 = sim.body_pose("bh_finger_2_knuckle")
            # F2's knuckle frame is F1's mirrored in the plane x = 0 (F1's frame has roll pi)
            np.testing.assert_allclose(k1.translation * [-1, 1, 1], k2.translation, atol=1e-12)
            d1 = k1.rotation @ np.array([0, 1, 0])          # F1 J2 direction from its spread axis (local +y)
            d2 = k2.rotation @ np.array([0, -1, 0])         # F2 J2 direction (local -y)
            np.testing.assert_allclose(d1 * [-1, 1, 1], d2, atol=1e-12)
    q = dict(zip(m.joint_names, sim.joint_positions()))
    assert q["bh_spread_joint"] == pytest.approx(0.7, abs=0.05)
    assert q["bh_finger_1_proximal_joint"] == pytest.approx(0.3, abs=0.05)
    assert touching_pairs(sim) == []



def test_barrett_on_rig_fingers_close_symmetrically():
    """On the lift rig (an actuated joint above the hand) F1 and F2 closing in free space stay mirror images, and
    the mass matrix every step hands the engine equals the independent-joint model's G^T M G (G: the mimic
    couplings). Regression: Pinocchio 4.1's default (LOCAL) crba, called again on the same Data, accumulated a
    stale data.Fcrb below the mimic spread joint (M[lift, F2 proximal] wrong by up to 1.1 kg*m), so finger 2
    alone accelerated away from its PD target (1.4 -> 4.5 rad/s in 5 ms at q = 0.14 rad)."""
    sim = Simulator({"robot": _rig_preset("barrett", (0, 0, 0.3))}, engine=ENGINE, time_step=DT)
    m, pm = sim.model, sim.model.pin_model
    full = pin.buildModelFromXML((presets_dir().parents[1] / "urdf" / "barrett_lift_rig.urdf").read_text())
    mimic = {mj.name: (mj.primary, mj.multiplier) for mj in m.mimic_joints}
    G = np.zeros((full.nv, pm.nv))          # v_full = G v
    for jid in range(1, full.njoints):
        primary, k = mimic.get(full.names[jid], (full.names[jid], 1.0))
        G[full.joints[jid].idx_v, pm.joints[pm.getJointId(primary)].idx_v] = k
    full_data = full.createData()
    step, worst_m = sim.engine.step_into, [0.0]       # the simulator's call (ContactEngine.step_into)

    def checked_step(inputs, slot):
        Mf = pin.crba(full, full_data, G @ inputs.q)        # no mimic joints: no stale terms
        Mf = np.triu(Mf) + np.triu(Mf, 1).T
        worst_m[0] = max(worst_m[0], float(np.abs(inputs.mass_matrix - G.T @ Mf @ G).max()))
        return step(inputs, slot)
    sim.engine.step_into = checked_step
    joints = list(m.joint_names)
    data = pm.createData()
    start = {j: float(sim.q[m.joint_q_index[m.joint_index(j)]]) for j in joints}
    i1, i2 = (m.joint_q_index[m.joint_index(f"bh_finger_{f}_proximal_joint")] for f in (1, 2))
    worst = 0.0
    for _ in range(400):
        c = _smooth(sim.t, 0.0, 0.3)
        pos = dict(start)
        pos.update({f"bh_finger_{f}_proximal_joint": 0.8 * c for f in (1, 2, 3)})
        sim.set_joint_targets(positions=pos, efforts=gravity_efforts(sim, joints, data))
        sim.step(strict=True)
        worst = max(worst, abs(sim.q[i1] - sim.q[i2]))
    assert worst_m[0] < 1e-12, f"the engine was handed an M off by {worst_m[0]:.3g}"
    assert worst < 1e-9, f"F1 and F2 proximal angles differ by {worst:.3g} rad"
    assert sim.q[i1] > 0.6, sim.q[i1]       # closed past the point where F3 passes between F1 and F2 (~0.4 rad)

# ------------------------------------------------------------------------------------------ grasping

def _preset(name):
    return yaml.safe_load((presets_dir() / f"{name}.yaml").read_text())


def _rig_preset(hand, base_xyz):
    """The hand's preset on its lift rig (urdf/<hand>_lift_rig.urdf): one more joint, lift_joint."""
    data = _preset(hand)
    data["urdf"] = f"{hand}_lift_rig.urdf"
    data["base_pose"] = {"xyz": list(base_xyz), "rpy": [0, 0, 0]}
    data["initial_positions"]["lift_joint"] = 0.0
    data["joint_groups"]["lift"] = {"joints": ["lift_joint"], "controller": "lift_controller"}
    data["gains"]["lift_joint"] = {"kp": 5000.0, "kd": 400.0}
    return data


def _ik_lift(sim, arm, frame, dz):
    """Arm configuration that raises ``frame`` by dz (m) at constant orientation (damped least squares)."""
    m, pm = sim.model, sim.model.pin_model
    d = pm.createData()
    fid = pm.getFrameId(frame)
    q = sim.q.copy()
    pin.framesForwardKinematics(pm, d, q)
    goal = d.oMf[fid].copy()
    goal.translation[2] += dz
    cols = [m.joint_v_index[m.joint_index(j)] for j in arm]
    for _ in range(100):
        pin.framesForwardKinematics(pm, d, q)
        err = pin.log6(d.oMf[fid].actInv(goal)).vector
        if np.linalg.norm(err) < 1e-10:
            break
        J = pin.computeFrameJacobian(pm, d, q, fid)[:, cols]
        dq = np.zeros(pm.nv)
        dq[cols] = J.T @ np.linalg.solve(J @ J.T + 1e-9 * np.eye(6), err)
        q = pin.integrate(pm, q, dq)
    return {j: float(q[m.joint_q_index[m.joint_index(j)]]) for j in arm}


def _smooth(t, t0, duration):
    s = min(1.0, max(0.0, (t - t0) / duration))
    return s * s * (3 - 2 * s)


def run_grasp_and_lift(scene, obj, hand_frame, close_targets, lift_joints, lift_targets_up, t_close=0.35,
                       t_lift=0.7, t_hold=0.25, engine=ENGINE):
    """Close (position targets ramped over 0.8 t_close), then move ``lift_joints`` smoothly to
    ``lift_targets_up`` with gravity feed-forward, then hold. Returns (object rise m, hand frame rise m, max
    object speed m/s, names of the links touching the object at the end)."""
    sim = Simulator(scene, engine=engine, time_step=DT)
    m = sim.model
    data = m.pin_model.createData()
    joints = list(m.joint_names)
    start = {j: float(sim.q[m.joint_q_index[m.joint_index(j)]]) for j in joints}   # others hold these
    z_obj0 = sim.body_pose(obj).translation[2]
    z_hand0 = sim.body_pose(hand_frame).translation[2]
    vmax = 0.0
    n = int(round((t_close + t_lift + t_hold) / DT))
    for _ in range(n):
        s = _smooth(sim.t, t_close, t_lift)
        pos = dict(start)       # every joint under PD (an effort-only command would switch PD off)
        pos.update({j: (1 - s) * start[j] + s * lift_targets_up[j] for j in lift_joints})
        c = _smooth(sim.t, 0.0, 0.8 * t_close)
        pos.update({j: (1 - c) * start[j] + c * target for j, target in close_targets.items()})
        sim.set_joint_targets(positions=pos, efforts=gravity_efforts(sim, joints, data))
        sim.step(strict=True)       # a solver failure (even after sub-stepping) fails the test at once
        vmax = max(vmax, float(np.linalg.norm(sim.body_velocity(obj)[:3])))
    touching = links_touching(sim, obj)
    return (sim.body_pose(obj).translation[2] - z_obj0, sim.body_pose(hand_frame).translation[2] - z_hand0, vmax,
            touching)


def links_touching(sim, obj, gap=0.002):
    """Robot links (Pinocchio geometry '<link>_<k>' -> '<link>') within ``gap`` m of the free body ``obj``."""
    m = sim.model
    joint = m.free_body(obj).joint_id
    contacts = sim.contact_query.update(sim.pin_data, sim.geometry_data, None)
    out = set()
    for a, b, d in zip(contacts.geometry_a, contacts.geometry_b, contacts.signed_distance):
        if d < gap and joint in (m.geometry_parent_joint[a], m.geometry_parent_joint[b]):
            other = b if m.geometry_parent_joint[a] == joint else a
            if m.geometry_parent_joint[other] != 0:
                out.add(m.geometry_names[other].rsplit("_", 1)[0])
    return out


def _check_lift(rise, hand_rise, vmax):
    assert hand_rise == pytest.approx(0.10, abs=0.005)          # the hand was lifted 10 cm
    assert rise > 0.09, f"object rose only {rise * 100:.1f} cm"  # ... and the object with it (< 1 cm slip)
    assert vmax < 0.5, f"object reached {vmax:.2f} m/s"


def test_iiwa_wsg_grasps_and_lifts_bottle():
    """WSG 50 on the iiwa closes on the TAMSI water bottle (0.5 kg) and the arm lifts it 10 cm."""
    sim0 = Simulator({"robot": "iiwa_wsg"}, engine=ENGINE, time_step=DT)
    tcp = sim0.body_pose("wsg_tcp").translation
    arm = ARMS["iiwa_wsg"][0]
    up = _ik_lift(sim0, arm, "wsg_tcp", 0.10)
    scene = {"robot": "iiwa_wsg",
             "objects": [{"name": "bottle", "urdf": "objects/bottle.urdf",
                          "pose": {"xyz": [tcp[0], tcp[1], tcp[2] - 0.03]}}],
             "environment": [{"name": "ground", "shape": "halfspace"},
                             {"name": "pedestal", "shape": {"box": [0.1, 0.1, 0.1]},
                              "pose": {"xyz": [tcp[0], tcp[1], tcp[2] - 0.03 - 0.09 - 0.05]}}]}
    rise, hand_rise, vmax, touching = run_grasp_and_lift(
        scene, "bottle", "wsg_tcp", {"wsg_finger_left_joint": 0.0, "wsg_finger_right_joint": 0.0}, arm, up)
    _check_lift(rise, hand_rise, vmax)
    assert {"wsg_finger_left", "wsg_finger_right"} <= touching


def test_franka_grasps_and_lifts_bronze_rod():
    """Franka Hand closes on the ICF bronze rod (8000 kg/m^3, 0.5 kg) and the Panda lifts it 10 cm."""
    sim0 = Simulator({"robot": "franka"}, engine=ENGINE, time_step=DT)
    tcp = sim0.body_pose("panda_hand_tcp")
    finger_dir = tcp.rotation[:, 1]                    # fingers move along the hand's y axis
    yaw = math.atan2(finger_dir[1], finger_dir[0]) + math.pi / 2   # rod axis (x after pitch pi/2) across it
    arm = ARMS["franka"][0]
    up = _ik_lift(sim0, arm, "panda_hand_tcp", 0.10)
    p = tcp.translation
    scene = {"robot": "franka",
             "objects": [{"name": "rod", "urdf": "objects/bronze_rod.urdf",
                          "pose": {"xyz": [p[0], p[1], p[2]], "rpy": [0, math.pi / 2, yaw]}}],
             # a narrow pedestal (12 mm across the finger motion) that the closing fingers straddle
             "environment": [{"name": "ground", "shape": "halfspace"},
                             {"name": "pedestal", "shape": {"box": [0.06, 0.012, p[2] - 0.0105]},
                              "pose": {"xyz": [p[0], p[1], (p[2] - 0.0105) / 2], "rpy": [0, 0, yaw]}}]}
    rise, hand_rise, vmax, touching = run_grasp_and_lift(scene, "rod", "panda_hand_tcp", {"panda_finger_joint1": 0.0},
                                               arm, up)
    _check_lift(rise, hand_rise, vmax)
    assert {"panda_leftfinger", "panda_rightfinger"} <= touching


def test_barrett_grasps_and_lifts_block():
    """BarrettHand (fingers down, on a lift rig) closes F1/F2 against F3 on a standing 12 x 4 x 6 cm block
    (0.2 kg) and lifts it 10 cm. (Until the simulator's crba used Pinocchio's WORLD convention, finger 2 ran away
    here and every engine failed ~10 ms after the pads touched: see test_barrett_on_rig_fingers_close_symmetrically.)"""
    hand_z = 0.215          # distal pads level with the block's upper half (wrist -> pad centre ~ 0.18 m)
    scene = {"robot": _rig_preset("barrett", (0, 0, hand_z)),
             "objects": [{"name": "block", "urdf": "objects/box_flat.urdf",
                          "pose": {"xyz": [0, 0, 0.03], "rpy": [math.pi / 2, 0, 0]}}],   # 4 cm across the grasp
             "environment": [{"name": "ground", "shape": "halfspace"}]}
    close = {"bh_spread_joint": 0.0, "bh_finger_1_proximal_joint": 0.35, "bh_finger_2_proximal_joint": 0.35,
             "bh_finger_3_proximal_joint": 0.35}
    rise, hand_rise, vmax, touching = run_grasp_and_lift(scene, "block", "bh_palm_surface", close,
                                                         ["lift_joint"], {"lift_joint": 0.10})
    _check_lift(rise, hand_rise, vmax)
    assert "bh_finger_3_distal" in touching and touching & {"bh_finger_1_distal", "bh_finger_2_distal"}, touching


BARRETT_SCENARIO_DT = 0.002     # s, the scenario runner's time step for barrett_cylinder / barrett_box


@pytest.mark.parametrize("engine", ["tamsi", "lagged"])
@pytest.mark.parametrize("scene_file, obj", [("scenario_barrett_cylinder.yaml", "bottle"),
                                             ("scenario_barrett_box.yaml", "box")])
def test_barrett_scenario_scenes_grasp_and_lift(scene_file, obj, engine):
    """Scenario 4's scenes in-process with the controller's default profile (docs/scenarios.md): close the three
    proximal joints to 1.2 rad in 0.5 s, squeeze 0.3 s, lift the stage 10 cm in 0.6 s, hold 0.4 s, at the
    scenario's 2 ms step. The object rises with the hand (< 1 cm slip), never exceeds 0.5 m/s, and ends held by
    all three distal links, F1 and F2 pressing equally (mirror-symmetric grasp)."""
    sim = Simulator(scene_file, engine=engine, time_step=BARRETT_SCENARIO_DT)
    m = sim.model
    data = m.pin_model.createData()
    joints = list(m.joint_names)
    start = {j: float(sim.q[m.joint_q_index[m.joint_index(j)]]) for j in joints}
    fingers = [f"bh_finger_{f}_proximal_joint" for f in (1, 2, 3)]
    z_obj0 = sim.body_pose(obj).translation[2]
    z_hand0 = sim.body_pose("bh_palm_surface").translation[2]
    t_close, t_lift, t_end = 0.1, 0.9, 1.9
    vmax = 0.0
    while sim.t < t_end - 1e-9:
        c, s = _smooth(sim.t, t_close, 0.5), _smooth(sim.t, t_lift, 0.6)
        pos = dict(start)
        pos.update({j: 1.2 * c for j in fingers})
        pos["lift_joint"] = 0.10 * s
        sim.set_joint_targets(positions=pos, efforts=gravity_efforts(sim, joints, data))
        sim.step(strict=True)
        vmax = max(vmax, float(np.linalg.norm(sim.body_velocity(obj)[:3])))
    rise = sim.body_pose(obj).translation[2] - z_obj0
    _check_lift(rise, sim.body_pose("bh_palm_surface").translation[2] - z_hand0, vmax)
    forces = sim.contact_forces_world()          # N, on geometry B; -f on A
    cs = sim.contacts
    net = np.zeros((4, 3))                        # net contact force on finger k (rows 1-3), N
    for a, b, f in zip(cs.geometry_a, cs.geometry_b, forces):
        for g, sign in ((a, -1.0), (b, 1.0)):
            name = m.geometry_names[g]
            if name.startswith("bh_finger_"):
                net[int(name[len("bh_finger_")])] += sign * f
    f1, f2 = np.linalg.norm(net[1]), np.linalg.norm(net[2])
    # (links_touching runs a new contact query: the last step's forces are read before it)
    assert {f"bh_finger_{f}_distal" for f in (1, 2, 3)} <= links_touching(sim, obj)
    assert f1 > 1.0 and f1 == pytest.approx(f2, rel=0.05), (f1, f2)


def test_allegro_cages_and_lifts_ball():
    """Allegro hand (palm up, on a lift rig) curls its fingers onto a 5 cm ball lying in the palm and lifts it
    10 cm; at the end the ball is held between the palm and a fingertip."""
    hand_z = 0.2
    # palm_link frame at (0, 0, hand_z) with its +x (palm normal) up; palm face at x = +0.0111 m
    scene = {"robot": _rig_preset("allegro", (0, 0, hand_z)),
             "objects": [{"name": "ball", "urdf": "objects/sphere_5cm.urdf",
                          "pose": {"xyz": [0.025, 0, hand_z + 0.0111 + 0.0255]}}],
             "environment": [{"name": "ground", "shape": "halfspace"}]}
    close = {f"joint_{i}.0": 1.3 for i in (1, 2, 3, 5, 6, 7, 9, 10, 11)}
    rise, hand_rise, vmax, touching = run_grasp_and_lift(scene, "ball", "palm_link", close, ["lift_joint"],
                                                         {"lift_joint": 0.10})
    _check_lift(rise, hand_rise, vmax)
    assert "palm_link" in touching and touching & {"link_3.0_tip", "link_7.0_tip", "link_11.0_tip"}, touching
