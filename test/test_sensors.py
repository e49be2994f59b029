"""F/T sensor (contact_sim_ros.sensors.force_torque) and contact-wrench computations (contact_sim_ros.sim.sensors)
against statics and momentum balance.

The model is built here (no loader): an arm with a revolute shoulder, a wrist F/T sensor on a fixed joint,
a palm merged by a second fixed joint and a prismatic finger, plus a free-flying held object.
"""

import coal
import numpy as np
import pinocchio as pin
import pytest

from contact_sim_ros.errors import ConfigError
from contact_sim_ros.geometry.contact_set import ContactSet
from contact_sim_ros.model.multibody_model import FreeBody, MultibodyModel
from contact_sim_ros.sensors.force_torque import ForceTorqueSensor
from contact_sim_ros.sim.sensors import ContactWrenchAccumulator, contact_world_forces, external_joint_torques

G = 9.81
# link: (mass kg, inertial origin in the link frame m)
SUBTREE = {"ft": (0.3, [0.0, 0.0, 0.01]), "palm": (1.2, [0.01, 0.0, 0.05]), "finger1": (0.2, [0.0, 0.0, 0.03])}
OBJECT_MASS = 0.5

URDF = """<robot name="arm">
  <link name="base"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>
  </inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 0.5"/>
    <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="100" velocity="2"/></joint>
  <link name="l1"><inertial><origin xyz="0 0 0.2"/><mass value="2"/>
    <inertia ixx="0.02" iyy="0.02" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="sensor_joint" type="fixed"><parent link="l1"/><child link="ft"/><origin xyz="0 0 0.4"/></joint>
  <link name="ft"><inertial><origin xyz="0 0 0.01"/><mass value="0.3"/>
    <inertia ixx="0.001" iyy="0.001" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="grip_mount" type="fixed"><parent link="ft"/><child link="palm"/><origin xyz="0 0 0.02" rpy="0 0 0.3"/>
  </joint>
  <link name="palm"><inertial><origin xyz="0.01 0 0.05"/><mass value="1.2"/>
    <inertia ixx="0.003" iyy="0.004" izz="0.002" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><origin xyz="0 0 0.05"/><geometry><box size="0.1 0.1 0.1"/></geometry></collision></link>
  <joint name="f1" type="prismatic"><parent link="palm"/><child link="finger1"/><origin xyz="0 0 0.1"/>
    <axis xyz="1 0 0"/><limit lower="0" upper="0.05" effort="50" velocity="0.5"/></joint>
  <link name="finger1"><inertial><origin xyz="0 0 0.03"/><mass value="0.2"/>
    <inertia ixx="0.0002" iyy="0.0002" izz="0.0001" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><origin xyz="0 0 0.03"/><geometry><box size="0.01 0.02 0.06"/></geometry></collision></link>
</robot>
"""


def build_model(tmp_path) -> MultibodyModel:
    path = tmp_path / "arm.urdf"
    path.write_text(URDF)
    pm = pin.buildModelFromUrdf(str(path))
    gm = pin.buildGeomFromUrdf(pm, str(path), pin.GeometryType.COLLISION)
    jid = pm.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "object")
    pm.appendBodyToJoint(jid, pin.Inertia.FromBox(OBJECT_MASS, 0.04, 0.04, 0.1), pin.SE3.Identity())
    jf = pm.addJointFrame(jid, 0)
    fid = pm.addBodyFrame("object", jid, pin.SE3.Identity(), jf)
    gm.addGeometryObject(pin.GeometryObject("object_box", jid, fid, pin.SE3.Identity(), coal.Box(0.04, 0.04, 0.1)))
    names = ("j1", "f1")
    qi = np.array([pm.joints[pm.getJointId(n)].idx_q for n in names])
    vi = np.array([pm.joints[pm.getJointId(n)].idx_v for n in names])
    nv, ng = pm.nv, len(gm.geometryObjects)
    zeros = np.zeros(ng)
    return MultibodyModel(
        pin_model=pm, collision_model=gm, source=str(path), joint_names=names, joint_q_index=qi,
        joint_v_index=vi, position_lower=np.array([-2.0, 0.0]), position_upper=np.array([2.0, 0.05]),
        velocity_limit=np.array([2.0, 0.5]), effort_limit=np.array([100.0, 50.0]), mimic_joints=(),
        joint_damping=np.zeros(nv), joint_friction=np.zeros(nv), actuated=np.arange(nv) < 2,
        free_bodies=(FreeBody("object", jid, "object", slice(2, 9), slice(2, 8), OBJECT_MASS),),
        tree_velocity_slices=(slice(0, 2), slice(2, 8)),
        geometry_names=tuple(g.name for g in gm.geometryObjects),
        geometry_parent_joint=np.array([g.parentJoint for g in gm.geometryObjects]),
        geometry_stiffness=zeros + 1e5, geometry_dissipation=zeros, geometry_friction=zeros + 1.0,
        geometry_restitution=zeros, collision_pairs=np.zeros((0, 2), int), gravity=np.array([0.0, 0.0, -G]))


def geometry_index(model, link):
    return next(i for i, g in enumerate(model.collision_model.geometryObjects)
                if model.pin_model.frames[g.parentFrame].name == link)


def hand_contacts(model, geometry_a, geometry_b, points, forces):
    """A ContactSet whose contact frames make the impulse gamma = R^T f dt (so world_forces returns f)."""
    n = len(points)
    rot = np.zeros((n, 3, 3))
    normal = np.zeros((n, 3))
    for i, f in enumerate(forces):
        nrm = np.asarray(f) / np.linalg.norm(f)
        t1 = np.cross(nrm, [1.0, 0.0, 0.0] if abs(nrm[0]) < 0.9 else [0.0, 1.0, 0.0])
        t1 /= np.linalg.norm(t1)
        rot[i] = np.column_stack((t1, np.cross(nrm, t1), nrm))
        normal[i] = nrm
    parent = np.asarray(model.geometry_parent_joint)
    ga, gb = np.asarray(geometry_a), np.asarray(geometry_b)
    z = np.zeros(n)
    return ContactSet(ga, gb, parent[ga], parent[gb], np.asarray(points, float), normal, z - 1e-4, rot,
                      np.zeros((3 * n, model.nv)), np.zeros(3 * n), z + 1e5, z, z + 1.0, z)


def state(model, q_arm=(0.3, 0.01)):
    q = pin.neutral(model.pin_model)
    q[:2] = q_arm
    return q


def subtree_static_wrench(model, q):
    """Statics by hand: the wrench (world axes, about the sensor origin) that the subtree's weight exerts."""
    pm = model.pin_model
    d = pm.createData()
    pin.framesForwardKinematics(pm, d, q)
    origin = d.oMf[pm.getFrameId("ft")].translation
    force, torque = np.zeros(3), np.zeros(3)
    for link, (mass, com) in SUBTREE.items():
        oMl = d.oMf[pm.getFrameId(link)]
        weight = np.array([0.0, 0.0, -mass * G])
        force += weight
        torque += np.cross(oMl.act(np.array(com)) - origin, weight)
    return force, torque, origin, d.oMf[pm.getFrameId("ft")].rotation


def test_static_sensor_reads_supported_weight(tmp_path):
    model = build_model(tmp_path)
    sensor = ForceTorqueSensor(model, "l1", "ft")
    q = state(model)
    reading = sensor.compute(q, np.zeros(model.nv), np.zeros(model.nv))
    force, torque, _, rot = subtree_static_wrench(model, q)
    np.testing.assert_allclose(reading[:3], rot.T @ force, atol=1e-9)
    np.testing.assert_allclose(reading[3:], rot.T @ torque, atol=1e-9)
    assert np.linalg.norm(reading[:3]) == pytest.approx(sum(m for m, _ in SUBTREE.values()) * G, rel=1e-12)


def test_static_hold_adds_held_object_weight(tmp_path):
    """The object's weight reaches the sensor through the contacts on the palm and the finger (with a squeeze
    that cancels): the reading is (m_subtree + m_object) g along gravity, torque from the contact points."""
    model = build_model(tmp_path)
    sensor = ForceTorqueSensor(model, "l1", "ft")
    q = state(model)
    obj = geometry_index(model, "object")
    finger, palm = geometry_index(model, "finger1"), geometry_index(model, "palm")
    squeeze = 20.0
    lift = OBJECT_MASS * G
    forces = np.array([[squeeze, 0.0, 0.6 * lift], [-squeeze, 0.0, 0.4 * lift]])   # on the object (B)
    points = np.array([[0.62, 0.0, 0.95], [0.55, 0.01, 0.9]])
    contacts = hand_contacts(model, [finger, palm], [obj, obj], points, forces)
    impulse = np.einsum("nji,nj->ni", contacts.rotation, forces) * 1e-3
    f_world = contact_world_forces(contacts, impulse, 1e-3)
    np.testing.assert_allclose(f_world, forces, atol=1e-12)
    reading = sensor.compute(q, np.zeros(model.nv), np.zeros(model.nv), contacts, f_world)
    force, torque, origin, rot = subtree_static_wrench(model, q)
    force = force - forces.sum(axis=0)
    torque = torque + np.cross(points - origin, -forces).sum(axis=0)
    np.testing.assert_allclose(reading[:3], rot.T @ force, atol=1e-9)
    np.testing.assert_allclose(reading[3:], rot.T @ torque, atol=1e-9)
    total = (sum(m for m, _ in SUBTREE.values()) + OBJECT_MASS) * G
    assert np.linalg.norm(reading[:3]) == pytest.approx(total, rel=1e-12)

    # the net contact wrench on the object balances its weight; the pads carry the opposite
    acc = ContactWrenchAccumulator(model, ["object", "finger1", "palm"])
    pm = model.pin_model
    d = pm.createData()
    pin.framesForwardKinematics(pm, d, q)
    w = acc.compute(contacts, f_world, d)
    np.testing.assert_allclose(w[0, :3], [0.0, 0.0, OBJECT_MASS * G], atol=1e-12)
    np.testing.assert_allclose(w[1, :3] + w[2, :3], [0.0, 0.0, -OBJECT_MASS * G], atol=1e-12)
    o_finger = d.oMf[pm.getFrameId("finger1")].translation
    np.testing.assert_allclose(w[1, 3:], np.cross(points[0] - o_finger, -forces[0]), atol=1e-12)


def subtree_linear_momentum(model, q, v):
    pm = model.pin_model
    d = pm.createData()
    pin.forwardKinematics(pm, d, q, v)
    pin.updateFramePlacements(pm, d)
    h = np.zeros(3)
    for link, (mass, com) in SUBTREE.items():
        fid = pm.getFrameId(link)
        joint = pm.frames[fid].parentJoint
        com_in_joint = pm.frames[fid].placement.act(np.array(com))
        vel = d.v[joint]   # joint-local spatial velocity
        h += mass * (d.oMi[joint].rotation @ (vel.linear + np.cross(vel.angular, com_in_joint)))
    return h


def test_moving_sensor_force_matches_momentum_rate(tmp_path):
    """Newton's second law on the subtree: -reading (parent -> child force) = dh/dt - m g, h by central
    differences of the subtree's linear momentum along the motion (q, v, a)."""
    model = build_model(tmp_path)
    pm = model.pin_model
    sensor = ForceTorqueSensor(model, "l1", "ft")
    q = state(model)
    v = np.zeros(model.nv)
    a = np.zeros(model.nv)
    v[:2] = [0.8, -0.1]
    a[:2] = [-2.0, 0.7]
    reading = sensor.compute(q, v, a)
    eps = 1e-5

    def h_at(t):
        return subtree_linear_momentum(model, pin.integrate(pm, q, v * t + 0.5 * a * t * t), v + a * t)
    dh = (h_at(eps) - h_at(-eps)) / (2 * eps)
    mass = sum(m for m, _ in SUBTREE.values())
    parent_on_child_world = dh - mass * np.array([0.0, 0.0, -G])
    d = pm.createData()
    pin.framesForwardKinematics(pm, d, q)
    rot = d.oMf[pm.getFrameId("ft")].rotation
    np.testing.assert_allclose(-reading[:3], rot.T @ parent_on_child_world, atol=1e-5)


def test_sensor_at_moving_joint_uses_transmitted_wrench(tmp_path):
    """A sensor between palm and finger1 (prismatic joint f1) reads the finger's weight at rest."""
    model = build_model(tmp_path)
    sensor = ForceTorqueSensor(model, "palm", "finger1")
    q = state(model)
    reading = sensor.compute(q, np.zeros(model.nv), np.zeros(model.nv))
    pm = model.pin_model
    d = pm.createData()
    pin.framesForwardKinematics(pm, d, q)
    rot = d.oMf[pm.getFrameId("finger1")].rotation
    np.testing.assert_allclose(reading[:3], rot.T @ [0.0, 0.0, -SUBTREE["finger1"][0] * G], atol=1e-9)


@pytest.mark.parametrize("links", [("l1", "ft"), ("palm", "finger1")])
def test_sensor_on_the_robot_alone_reads_what_the_whole_model_reads(tmp_path, monkeypatch, links):
    """The sensor's dynamics run on the arm alone (the held object's free flyer locked away: nv 2 instead of 8);
    at random states, accelerations and contacts (pads against the object, the object against the ground) it
    reads what the same sensor on the whole model reads (to round-off), at the wrist and at the finger joint."""
    import contact_sim_ros.sensors.force_torque as sensors
    from contact_sim_ros.model.robots_only import RobotsOnly
    model = build_model(tmp_path)
    pm = model.pin_model
    sensor = ForceTorqueSensor(model, *links)
    assert sensor.robots.model.nv == model.nv - 6
    monkeypatch.setattr(sensors, "robots_only", lambda m: RobotsOnly.whole(m.pin_model))
    whole = ForceTorqueSensor(model, *links)
    assert whole.robots.model is pm
    obj, finger, palm = (geometry_index(model, name) for name in ("object", "finger1", "palm"))
    rng = np.random.default_rng(11)
    for _ in range(20):
        q = pin.randomConfiguration(pm, -np.ones(pm.nq), np.ones(pm.nq))
        q[:2] = rng.uniform([-1.5, 0.0], [1.5, 0.05])
        v, a = rng.normal(size=pm.nv), rng.normal(size=pm.nv)
        points = rng.uniform(-1.0, 1.0, (3, 3))
        forces = rng.normal(size=(3, 3)) * 10.0
        contacts = hand_contacts(model, [finger, palm, 0], [obj, obj, obj], points, forces)
        if links[1] == "finger1":
            contacts = hand_contacts(model, [finger, obj, palm], [obj, finger, obj], points, forces)
        for c, f in ((None, None), (contacts, forces)):
            expected = whole.compute(q, v, a, c, f)
            np.testing.assert_allclose(sensor.compute(q, v, a, c, f), expected, rtol=0.0,
                                       atol=1e-11 * (1.0 + np.abs(expected).max()))


def test_bad_sensor_links_name_valid_choices(tmp_path):
    model = build_model(tmp_path)
    with pytest.raises(ConfigError, match="unknown F/T sensor child link 'nope'.*palm"):
        ForceTorqueSensor(model, "l1", "nope")
    with pytest.raises(ConfigError, match="not a child of link 'base'"):
        ForceTorqueSensor(model, "base", "ft")
    with pytest.raises(ConfigError, match="unknown contact body 'pad'.*finger1"):
        ContactWrenchAccumulator(model, ["pad"])


def test_external_joint_torques_pick_actuated_dofs(tmp_path):
    model = build_model(tmp_path)
    tau = np.arange(model.nv, dtype=float)
    np.testing.assert_array_equal(external_joint_torques(model, tau), [0.0, 1.0])


def test_joint_contact_wrenches_equal_the_straightforward_sums_bit_for_bit():
    """``joint_contact_wrenches`` (one (N, 6) array, two np.add.at calls, p x f from one product of column takes)
    equals, bit for bit, the straightforward sums: p x f by cross_rows, forces and torques added per joint, B's
    contacts then A's (what the F/T sensor's reading and so the campaign's hashes depend on)."""
    from types import SimpleNamespace

    from contact_sim_ros.sim.sensors import cross_rows, joint_contact_wrenches
    rng = np.random.default_rng(3)
    nj = 9
    model = SimpleNamespace(pin_model=SimpleNamespace(njoints=nj))
    for _ in range(300):
        n = int(rng.integers(1, 30))
        scale = 10.0 ** rng.integers(-4, 4)
        contacts = SimpleNamespace(size=n, point=rng.normal(size=(n, 3)) * scale,
                                   joint_a=rng.integers(0, nj, n), joint_b=rng.integers(0, nj, n))
        forces = rng.normal(size=(n, 3)) * 10.0 ** rng.integers(-4, 4)
        expected = np.zeros((nj, 6))
        torque = cross_rows(contacts.point, forces)
        for k in range(n):
            expected[contacts.joint_b[k], :3] += forces[k]
            expected[contacts.joint_b[k], 3:] += torque[k]
        for k in range(n):
            expected[contacts.joint_a[k], :3] -= forces[k]
            expected[contacts.joint_a[k], 3:] -= torque[k]
        got = joint_contact_wrenches(model, contacts, forces, np.full((nj, 6), np.nan))
        assert got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("links", [("l1", "ft"), ("palm", "finger1")])
def test_compiled_reading_equals_the_python_reading_bit_for_bit(tmp_path, links):
    """The reading in one compiled call (sim/rigid_body_dynamics.cpp) equals ``compute_python`` (Pinocchio's
    Python calls) bit for bit at random states, accelerations and contact sets of 0 to 24 contacts on every body
    (the palm merged into the wrist sensor's joint among them, on either side, many at once), at the wrist and at
    the finger joint, over consecutive readings (the external forces of the last reading cleared)."""
    model = build_model(tmp_path)
    pm = model.pin_model
    sensor = ForceTorqueSensor(model, *links)
    assert sensor._native is not None
    geometries = [geometry_index(model, name) for name in ("object", "finger1", "palm")] + [0]
    rng = np.random.default_rng(12)
    seen_fixed = 0
    for _ in range(60):
        q = pin.randomConfiguration(pm, -np.ones(pm.nq), np.ones(pm.nq))
        q[:2] = rng.uniform([-1.5, 0.0], [1.5, 0.05])
        v, a = rng.normal(size=pm.nv), rng.normal(size=pm.nv)
        n = int(rng.integers(0, 25))
        ga, gb = rng.choice(geometries, n), rng.choice(geometries, n)
        points = rng.uniform(-1.0, 1.0, (n, 3))
        forces = rng.normal(size=(n, 3)) * 10.0 ** rng.integers(-2, 3, (n, 1))
        contacts = hand_contacts(model, ga, gb, points, forces) if n else None
        seen_fixed += int(np.sum(ga == geometries[2]) + np.sum(gb == geometries[2]) >= 8)
        expected = sensor.compute_python(q, v, a, contacts, forces if n else None)
        got = sensor.compute(q, v, a, contacts, forces if n else None)
        assert got.tobytes() == expected.tobytes(), (got, expected)
    assert seen_fixed > 5
