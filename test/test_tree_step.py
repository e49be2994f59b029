"""The whole TAMSI (or Lagged, Similar, SAP) step of a tree in one compiled call (contact_sim_ros/sim/tree_step.py,
issue 45 item 2).

The C-ABI bridge: the numba-called Pinocchio calls (rigid_body_dynamics.cpp's C entry points) equal the
Boost.Python methods and the pin.* calls bit for bit on a revolute arm, a prismatic / planar model, a free flyer
carrying every joint kind and a hand with mimic joints. The fused step: the same trajectories as the staged step
bit for bit."""

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from contact_sim_ros.errors import SolverError
from contact_sim_ros.native_build import NARROW_PHASE, RIGID_BODY
from contact_sim_ros.sim import simulator, tree_step
from contact_sim_ros.sim.simulator import Simulator
from test_pair_bounds import _every_joint_kind, _random_q, _robot_near_objects


def _planar_model():
    """A planar joint (x, y, theta) carrying a prismatic z joint and a revolute joint, offset and rotated."""
    pm = pin.Model()
    base = pm.addJoint(0, pin.JointModelPlanar(), pin.SE3(pin.rpy.rpyToMatrix(0.1, -0.2, 0.3), np.array([0.1, 0, 0.2])),
                       "planar")
    pm.appendBodyToJoint(base, pin.Inertia.FromBox(0.33, 0.1, 0.1, 0.02), pin.SE3.Identity())
    lift = pm.addJoint(base, pin.JointModelPZ(), pin.SE3(np.eye(3), np.array([0.0, 0.05, 0.0])), "lift")
    pm.appendBodyToJoint(lift, pin.Inertia.FromSphere(0.2, 0.03), pin.SE3.Identity())
    arm = pm.addJoint(lift, pin.JointModelRY(), pin.SE3(np.eye(3), np.array([0.1, 0.0, 0.0])), "arm")
    pm.appendBodyToJoint(arm, pin.Inertia.FromCylinder(0.5, 0.02, 0.3), pin.SE3.Identity())
    return pm


MODELS = {"revolute (iiwa + WSG)": lambda: _robot_near_objects("iiwa_wsg").pin_model,
          "prismatic + planar": _planar_model,
          "free flyer + every joint kind": lambda: _every_joint_kind().pin_model,
          "mimic (BarrettHand)": lambda: _robot_near_objects("barrett").pin_model}


@pytest.mark.parametrize("name", list(MODELS))
def test_the_numba_called_pinocchio_calls_equal_the_boost_ones(name):
    """At random states, through the C entry points from compiled code: M (WORLD), nle, g, the position error,
    pin.integrate, the joint placements and Jacobians of forwardKinematics + computeJointJacobians and frames'
    world-aligned Jacobians, equal the Boost.Python methods' and the pin.* calls' bit for bit (a mimic model's J
    has its extended columns)."""
    pm = MODELS[name]()
    module = RIGID_BODY.load()
    assert module is not None, "the warm-up builds rigid_body_dynamics.cpp"
    functions = np.array(module.c_functions(), dtype=np.int64)
    rng = np.random.default_rng(11)
    data, boost_data, ref = pin.Data(pm), pin.Data(pm), pin.Data(pm)
    nv, nq = pm.nv, pm.nq
    M, nle, g, error = np.zeros((nv, nv)), np.zeros(nv), np.zeros(nv), np.zeros(nv)
    rigid = module.RigidBodyDynamics(pm, data, M, nle, g)
    bM, bnle, bg, berror = np.zeros((nv, nv)), np.zeros(nv), np.zeros(nv), np.zeros(nv)
    boost = module.RigidBodyDynamics(pm, boost_data, bM, bnle, bg)
    handle = rigid.handle()
    joints = np.arange(1, pm.njoints, dtype=np.int64)
    slots = joints[::-1] - 1                       # any slot order
    J = np.full((6, rigid.jacobian_columns()), np.nan)
    placement = np.full((len(joints), 4, 4), np.nan)
    moved = 0.0
    for _ in range(15):
        q, target = _random_q(pm, rng), _random_q(pm, rng)
        v, dt = rng.normal(0.0, 2.0, nv), float(rng.uniform(1e-4, 1e-2))
        M[:], nle[:], g[:], error[:] = np.nan, np.nan, np.nan, np.nan
        assert tree_step.rbd_dynamics(functions, handle, q, v, target, M, nle, g, error, True) == 0
        boost.dynamics(q, v, target, berror, True)
        for a, b in ((M, bM), (nle, bnle), (g, bg), (error, berror)):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(M, pin.crba(pm, ref, q, pin.Convention.WORLD))
        np.testing.assert_array_equal(nle, pin.nonLinearEffects(pm, ref, q, v))
        np.testing.assert_array_equal(g, pin.computeGeneralizedGravity(pm, ref, q))
        np.testing.assert_array_equal(error, pin.difference(pm, q, target))
        q_next, b_next = np.full(nq, np.nan), np.empty(nq)
        tree_step.rbd_integrate(functions, handle, q, v, dt, q_next)
        boost.integrate(q, v, dt, b_next)
        np.testing.assert_array_equal(q_next, b_next)
        np.testing.assert_array_equal(q_next, pin.integrate(pm, q, dt * v))
        moved = max(moved, float(np.abs(q_next - q).max()))
        tree_step.rbd_kinematics(functions, handle, q, v)
        tree_step.rbd_read_kinematics(functions, handle, J, placement, joints, slots)
        pin.forwardKinematics(pm, ref, q, v)
        pin.computeJointJacobians(pm, ref)
        np.testing.assert_array_equal(J, ref.J)
        np.testing.assert_array_equal(data.J, ref.J)
        pin.updateFramePlacements(pm, ref)
        for frame in rng.choice(pm.nframes, size=min(5, pm.nframes), replace=False):
            jt = np.full((nv, 6), np.nan)
            tree_step.rbd_frame_jacobian(functions, handle, int(frame), jt)
            np.testing.assert_array_equal(jt, pin.getFrameJacobian(pm, ref, int(frame), pin.LOCAL_WORLD_ALIGNED).T)
        for j, s in zip(joints, slots):
            np.testing.assert_array_equal(placement[s], ref.oMi[int(j)].homogeneous)
            np.testing.assert_array_equal(data.v[int(j)].vector, ref.v[int(j)].vector)
    assert np.abs(M).max() > 0 and np.abs(nle).max() > 0 and np.abs(error).max() > 0 and moved > 0
    if name.startswith("mimic"):
        assert J.shape[1] > nv            # the mimic joints' own columns (nvExtended)


ROOT = Path(__file__).resolve().parent.parent
PLANAR = ROOT / "benchmarks" / "peers" / "scenes" / "planar_box.yaml"   # the peers' box on prismatic x, z joints
IIWA = ROOT / "benchmarks" / "peers" / "scenes" / "iiwa_wsg_pd.yaml"      # iiwa + WSG held by PD clear of the ground
ALLEGRO = ROOT / "scenes" / "iiwa_allegro_mug.yaml"      # the Allegro hand closing on a mug: mesh pairs come near
UR5_OBJECTS = ROOT / "benchmarks" / "peers" / "scenes" / "ur5_objects.yaml"   # UR5 + 20 objects: coal's box-box pairs
BOTTLE = ROOT / "scenes" / "scenario_pick_shake_place.yaml"   # the campaign's bottle (coal's cylinder) on the ground
BARRETT = ROOT / "scenes" / "scenario_barrett_box.yaml"       # a mimic hand with mesh pairs over a box
SCRIPTED = ROOT / "scenes" / "default.yaml"      # iiwa + WSG, joint 1 scripted on a sine; a bottle, a box on a table
GRIPPER = ROOT / "scenes" / "tamsi_gripper_mug.yaml"   # scripted lift (position + velocity), fingers (efforts) on a mug
CONVEYOR = ROOT / "scenes" / "icf_conveyor.yaml"    # the ICF paper's box on a belt oscillating at 1 Hz (free bodies)
TUMBLER_URDF = """<?xml version="1.0"?>
<robot name="tumbler">
  <link name="base"/>
  <link name="carriage"><inertial><mass value="0.001"/>
    <inertia ixx="1e-8" ixy="0" ixz="0" iyy="1e-8" iyz="0" izz="1e-8"/></inertial></link>
  <link name="lift"><inertial><mass value="0.001"/>
    <inertia ixx="1e-8" ixy="0" ixz="0" iyy="1e-8" iyz="0" izz="1e-8"/></inertial></link>
  <link name="box"><inertial><mass value="0.33"/>
    <inertia ixx="2.86e-4" ixy="0" ixz="0" iyy="2.86e-4" iyz="0" izz="5.5e-4"/></inertial>
    <collision name="box_geom"><geometry><box size="0.1 0.1 0.02"/></geometry></collision></link>
  <link name="flap"><inertial><origin xyz="0.02 0 0"/><mass value="0.05"/>
    <inertia ixx="1e-5" ixy="0" ixz="0" iyy="1e-5" iyz="0" izz="1e-5"/></inertial>
    <collision name="flap_ball"><origin xyz="0.04 0 0"/><geometry><sphere radius="0.01"/></geometry></collision></link>
  <joint name="x" type="prismatic"><parent link="base"/><child link="carriage"/><axis xyz="1 0 0"/>
    <limit lower="-10" upper="10" effort="0" velocity="100"/></joint>
  <joint name="z" type="prismatic"><parent link="carriage"/><child link="lift"/><axis xyz="0 0 1"/>
    <limit lower="-10" upper="10" effort="0" velocity="100"/></joint>
  <joint name="tilt" type="revolute"><parent link="lift"/><child link="box"/><axis xyz="0 1 0"/>
    <limit lower="-3" upper="3" effort="0" velocity="100"/></joint>
  <joint name="flap_joint" type="revolute"><parent link="box"/><child link="flap"/><origin xyz="0.05 0 0.01"/>
    <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="0" velocity="100"/>
    <mimic joint="tilt" multiplier="0.5" offset="0"/></joint>
</robot>
"""


def _tumbler(tmp_path):
    """A box on prismatic x, z and a revolute tilt joint with a mimic flap carrying a ball, dropped tilted onto
    the ground (a corner first: a one-point box-halfspace contact, then its face: a patch), a ball falling onto it
    (sphere-box, sphere-sphere with the flap's ball) and a ball resting on the ground (sphere-halfspace): every
    compiled pair kind, a mimic joint and free flyers beside the robot (pin.integrate, not q + dt v)."""
    (tmp_path / "tumbler.urdf").write_text(TUMBLER_URDF)
    return {"robot": {"urdf": str(tmp_path / "tumbler.urdf"), "initial_positions": {"x": 0.0, "z": 0.06, "tilt": 0.3}},
            "passive_joints": ["x", "z", "tilt"],
            "objects": [{"name": "ball", "shape": {"sphere": 0.02}, "mass": 0.1, "pose": {"xyz": [0.0, 0.0, 0.2]}},
                        {"name": "rest", "shape": {"sphere": 0.03}, "mass": 0.2, "pose": {"xyz": [0.5, 0.3, 0.0299]}}],
            "environment": [{"name": "ground", "shape": "halfspace"}]}


def test_selected_for_trees_on_compiled_pairs_with_compiled_tamsi_or_icf_only(tmp_path):
    """The planar box, a robot + free objects on compiled pairs and robots with coal's pairs (coal's narrow phase
    compiled: narrow_phase.cpp's C entry point in the call), with TAMSI or an ICF engine (Lagged, Similar, SAP:
    tree_icf_step), scripted joint commands included, take the fused tree step; free bodies only keep theirs; another engine, TAMSI's or ICF's numpy
    kernel, a mimic hand with mesh pairs (no bounding-volume test of its joints) without
    the compiled narrow phase and a tree without the compiled Pinocchio module take the staged step."""
    sim = Simulator(PLANAR, engine="tamsi")
    assert sim._tree is not None and sim._fused is None and sim._tree.applies_wrenches
    assert Simulator(_tumbler(tmp_path), engine="tamsi")._tree is not None
    assert Simulator(IIWA, engine="tamsi")._tree is not None
    assert not sim._tree.icf
    for engine in ("lagged", "similar", "sap"):
        tree = Simulator(PLANAR, engine=engine)._tree
        assert tree is not None and tree.icf and tree.lagged == (engine == "lagged")
    assert Simulator(IIWA, engine="lagged")._tree is not None
    assert Simulator(PLANAR, engine="semi_implicit")._tree is None
    assert Simulator(PLANAR, engine="tamsi", engine_options={"kernel": "numpy"})._tree is None
    assert Simulator(PLANAR, engine="lagged", engine_options={"newton_kernel": "numpy"})._tree is None
    assert Simulator(SCRIPTED, engine="tamsi")._tree is not None         # scripted joint commands
    assert Simulator(BARRETT, engine="tamsi")._tree.coal_pass is not None
    saved = NARROW_PHASE.load()
    NARROW_PHASE._loaded["module"] = None
    try:
        assert Simulator(BARRETT, engine="tamsi")._tree is None
        assert Simulator(IIWA, engine="tamsi")._tree.coal_pass is None        # its bounding-volume test only
    finally:
        NARROW_PHASE._loaded["module"] = saved
    ball = Simulator(ROOT / "scenes" / "icf_falling_sphere.yaml", engine="tamsi", time_step=2e-3)
    assert ball._fused is not None and ball._tree is None
    saved = RIGID_BODY.load()
    RIGID_BODY._loaded["module"] = None
    try:
        assert Simulator(PLANAR, engine="tamsi")._tree is None
    finally:
        RIGID_BODY._loaded["module"] = saved


def _assert_same_step(a, b, ra, rb, k):
    where = f"step {k + 1}"
    assert (ra.ok, ra.t, ra.status, ra.substeps, ra.iterations, ra.message) == \
        (rb.ok, rb.t, rb.status, rb.substeps, rb.iterations, rb.message), where
    for name in ("q", "v", "actuation_force"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=f"{where}: {name}")
    if not ra.ok:
        assert a.contacts is None and b.contacts is None
        return
    assert a.contacts.size == b.contacts.size, where
    for name in ("geometry_a", "geometry_b", "joint_a", "joint_b", "point", "normal", "signed_distance", "rotation",
                 "jacobian", "velocity_bias", "stiffness", "dissipation", "friction"):
        np.testing.assert_array_equal(getattr(a.contacts, name), getattr(b.contacts, name), err_msg=f"{where}: {name}")
    np.testing.assert_array_equal(a.last_result.contact_impulse, b.last_result.contact_impulse, err_msg=where)
    np.testing.assert_array_equal(a.last_result.generalized_contact_force, b.last_result.generalized_contact_force,
                                  err_msg=where)
    sa, sb = a.contact_query.stats, b.contact_query.stats
    assert (sa["colliding_pairs"], sa["contacts"]) == (sb["colliding_pairs"], sb["contacts"]), where
    if a._tree is not None and a._tree.coal_pass is not None:      # update's candidates: the call's count
        assert sa["candidate_pairs"] == sb["candidate_pairs"], where
    sa, sb = a.last_result.stats, b.last_result.stats
    assert (sa.status, sa.iterations, sa.residual, sa.message) == (sb.status, sb.iterations, sb.residual,
                                                                   sb.message), where
    if a.engine.name == "tamsi":
        assert a.engine.iteration_history == b.engine.iteration_history, where
    else:       # ICF: the lagged normal impulses (Lagged), the stiction tolerances, the line search's work
        fa, fb = a.last_result.friction_normal_impulse, b.last_result.friction_normal_impulse
        assert (fa is None) == (fb is None) == (a.engine.name != "lagged"), where
        if fa is not None:
            np.testing.assert_array_equal(fa, fb, err_msg=f"{where}: friction_normal_impulse")
        np.testing.assert_array_equal(a.engine.last_stiction_tolerance, b.engine.last_stiction_tolerance,
                                      err_msg=f"{where}: last_stiction_tolerance")
        assert (a.engine.last_line_search_evaluations, a.engine.last_deferred_contacts) == \
            (b.engine.last_line_search_evaluations, b.engine.last_deferred_contacts), where


@pytest.mark.parametrize("scene, steps, engine", [
    ("planar", 2000, "tamsi"), ("tumbler", 1500, "tamsi"), ("iiwa", 1000, "tamsi"), ("allegro", 1500, "tamsi"),
    ("ur5_objects", 500, "tamsi"), ("bottle", 500, "tamsi"), ("barrett", 500, "tamsi"),
    ("planar", 2000, "lagged"), ("planar", 2000, "similar"), ("planar", 2000, "sap"), ("tumbler", 1500, "lagged"),
    ("tumbler", 1500, "sap"), ("iiwa", 1000, "lagged"), ("iiwa", 1000, "similar"), ("iiwa", 1000, "sap"),
    ("allegro", 1500, "lagged"), ("ur5_objects", 500, "lagged"), ("bottle", 500, "lagged")])
def test_trajectories_equal_the_staged_step_bit_for_bit(scene, steps, engine, tmp_path):
    """The peers' planar box (2 s, its scripted push on the link through J^T in the call), the tumbler (a corner
    impact, face contact, a ball landing on the box, the mimic flap), the iiwa + WSG held by PD (coal's mesh pairs
    beyond the margin by the bounding-volume test), the Allegro hand closing on the mug (coal's mesh patches), the
    UR5 + 20 resting objects (coal's box-box pairs beside the compiled ones), the campaign's bottle standing on
    the ground (coal's cylinder patch) and the Barrett hand (mimic) over its box, all fused every step with
    coal's pairs in the call: every step's report, q, v, actuation, contacts (every field), impulses, generalized
    contact force, the solver's stats and TAMSI's iteration history (ICF's lagged normal impulses, stiction
    tolerances and line-search counts) equal the staged step's bit for bit, and the kinematics left for the node
    and the sensors (pin_data) too; with TAMSI and with the ICF engines (Lagged, Similar, SAP: tree_icf_step)."""
    path = {"planar": PLANAR, "iiwa": IIWA, "allegro": ALLEGRO, "ur5_objects": UR5_OBJECTS, "bottle": BOTTLE,
            "barrett": BARRETT}.get(scene) or _tumbler(tmp_path)
    fused, staged = Simulator(path, engine=engine), Simulator(path, engine=engine)
    staged._tree = None
    assert fused._tree is not None and fused._tree.icf == (engine != "tamsi")
    calls = []
    step = fused._tree_step
    fused._tree_step = lambda: calls.append(step()) or calls[-1]
    held, sizes = fused.q, set()
    for k in range(steps):
        ra, rb = fused.step(), staged.step()
        _assert_same_step(fused, staged, ra, rb, k)
        sizes.add(fused.contacts.size)
    assert all(r is not None for r in calls) and len(calls) == steps    # no staged fall-back was needed
    assert held is not fused.q and not np.array_equal(held, fused.q)        # a held q is not overwritten
    pm = fused.model.pin_model
    for j in range(1, pm.njoints):
        np.testing.assert_array_equal(fused.pin_data.oMi[j].homogeneous, staged.pin_data.oMi[j].homogeneous)
        np.testing.assert_array_equal(fused.pin_data.oMf[j].homogeneous, staged.pin_data.oMf[j].homogeneous)
    if scene == "planar":       # resting on its face (4 corners), pushed below the friction limit: it sticks
        assert sizes == {4} and abs(fused.q[0]) < 1e-6
    elif scene == "tumbler":    # a corner (1), the face (4), the ball on the box and the resting ball
        assert {1, 4} <= sizes and max(sizes) >= 6
    elif scene == "iiwa":       # held clear of everything
        assert sizes == {0}
    elif scene == "ur5_objects":        # 10 boxes (4 corners) and 10 spheres on the ground, boxes touching
        assert sizes == {50}
    elif scene == "bottle":     # the bottle's base: coal's cylinder-halfspace patch
        assert sizes == {8}
    elif scene == "barrett":
        assert max(sizes) >= 4
    else:                       # the fingers on the mug
        assert max(sizes) >= 4


@pytest.mark.parametrize("engine", ["tamsi", "lagged"])
def test_a_step_the_fused_call_cannot_solve_is_sub_stepped_then_failed_as_the_staged_step(engine):
    """TAMSI (or an ICF engine) not converging in the fused call: the staged step runs, tries its sub-steps and
    fails with the state kept, exactly as a Simulator without the fused step does."""
    options = {"max_iterations": 1, "relative_tolerance": 1e-12}
    fused = Simulator(PLANAR, engine=engine, max_substep_levels=2, engine_options=options)
    staged = Simulator(PLANAR, engine=engine, max_substep_levels=2, engine_options=options)
    staged._tree = None
    assert fused._tree is not None
    q0 = fused.q.copy()
    ra, rb = fused.step(), staged.step()
    assert not ra.ok and ra.substeps == 4 and f"engine '{engine}' failed at t = 0.000000 s" in ra.message
    _assert_same_step(fused, staged, ra, rb, 0)
    np.testing.assert_array_equal(fused.q, q0)
    assert fused.t == 0.0 and fused.step_count == 0
    with pytest.raises(SolverError, match="state kept"):
        fused.step(strict=True)


@pytest.mark.parametrize("engine", ["tamsi", "lagged"])
def test_buffers_grown_by_a_staged_step_are_taken_over(engine):
    """A staged step (a fall-back) may grow the query's contact buffers and the engine's scratch (more contacts
    than ever before): the next fused step finds its address table stale and builds it again over the new arrays,
    and the trajectory stays the staged step's bit for bit."""
    fused, staged = Simulator(ALLEGRO, engine=engine), Simulator(ALLEGRO, engine=engine)
    staged._tree = None
    for k in range(200):
        _assert_same_step(fused, staged, fused.step(), staged.step(), k)
    old = fused._tree
    assert old.current()
    fused.contact_query._allocate(3 * old.max_rows + 100)      # what a step with more contacts does
    fused.engine.kernel_scratch(3 * old.max_rows + 100)
    assert not old.current()
    fused._tree_check = True                                  # as after a staged step
    for k in range(200, 1200):
        _assert_same_step(fused, staged, fused.step(), staged.step(), k)
    assert fused._tree is not old and fused._tree.current()


def test_a_start_deeper_than_the_bound_fails_as_the_staged_step(tmp_path):
    """The planar box started 3 cm into the ground (it is 2 cm thick): the call flags the contacts beyond the
    penetration bound, the check names them, and the step fails with the staged step's report, the state kept."""
    scene = (tmp_path / "deep.yaml")
    scene.write_text(PLANAR.read_text().replace("planar_box.urdf", str(PLANAR.parent / "planar_box.urdf"))
                     .replace("box_z: 0.01", "box_z: -0.03"))
    fused, staged = Simulator(scene, engine="tamsi"), Simulator(scene, engine="tamsi")
    staged._tree = None
    assert fused._tree is not None
    q0 = fused.q.copy()
    ra, rb = fused.step(), staged.step()
    assert not ra.ok and "penetrat" in ra.message, ra.message
    _assert_same_step(fused, staged, ra, rb, 0)
    np.testing.assert_array_equal(fused.q, q0)


@pytest.mark.parametrize("engine", ["tamsi", "lagged"])
def test_scripted_joint_commands_equal_the_staged_step_bit_for_bit(engine):
    """The default scene (step_hashes' "scripted" case): iiwa joint 1 on the scene's script 0.3 sin(pi t), the
    bottle and the box resting on the table (coal's pairs in the call). The Simulator applies the script at t + dt
    before each fused call (as the staged step before its kinematics): 600 steps, by step() and by advance(5),
    equal the staged step's bit for bit, every step fused (no fall-back); the joint follows its scripted target."""
    fused, staged = Simulator(SCRIPTED, engine=engine), Simulator(SCRIPTED, engine=engine)
    staged._tree = None
    assert fused._tree is not None and fused.sim_model.has_joint_scripts
    calls = []
    step = fused._tree_step
    fused._tree_step = lambda: calls.append(step()) or calls[-1]
    k, track = 0, []
    qi = fused.model.joint_q_index[fused.model.joint_index("iiwa_joint_1")]
    while k < 600:
        if k % 100 < 50:
            ra, rb = fused.step(), staged.step()
            k += 1
        else:
            ra = fused.advance(5)
            for _ in range(5):
                rb = staged.step()
            k += 5
        _assert_same_step(fused, staged, ra, rb, k - 1)
        target = 0.3 * np.sin(np.pi * fused.t)
        assert fused.data.q_target[qi] == staged.data.q_target[qi] and abs(fused.data.q_target[qi] - target) < 1e-12
        track.append(abs(fused.q[qi] - target))
    assert len(calls) == 600 and all(r is not None for r in calls)    # no staged fall-back was needed
    assert fused.contacts.size >= 8                                    # the bottle and the box on the table
    assert fused.q[qi] > 0.25 and max(track[100:]) < 0.05             # joint 1 swung out to ~0.3 rad, following


def test_scripted_efforts_and_velocities_with_coal_pairs_near_equal_the_staged_step():
    """The gripper on a scripted lift (position + velocity commands) squeezing a mug with scripted finger efforts:
    coal's mesh pairs within the margin, so the fused attempts hand the steps to the staged step (which applies the
    scripts again at the same time): 500 steps equal the staged step's bit for bit."""
    with pytest.warns(Warning, match="default"):
        fused = Simulator(GRIPPER, engine="tamsi")
    with pytest.warns(Warning, match="default"):
        staged = Simulator(GRIPPER, engine="tamsi")
    staged._tree = None
    assert fused._tree is not None and fused._tree.coal_pass is None
    calls = []
    step = fused._tree_step
    fused._tree_step = lambda: calls.append(step()) or calls[-1]
    for k in range(500):
        _assert_same_step(fused, staged, fused.step(), staged.step(), k)
    assert calls and fused.contacts.size > 0
    vi = fused.model.joint_v_index[fused.model.joint_index("left_finger_slide")]
    assert fused.data.effort[vi] == 10.0 and not fused.data.position_mode[vi]


def _tilted_belt_under_the_tumbler(tmp_path):
    """The tumbler (a robot on prismatic x, z and a tilt joint, with the mimic flap) over a belt tilted about x and
    y moving diagonally in the world (three components, all varying), and a ball resting on the belt: contacts of
    a robot link and of a free body on a moving surface with non-trivial contact frames."""
    scene = _tumbler(tmp_path)
    scene["environment"] = [{"name": "belt", "shape": "halfspace", "pose": {"xyz": [0, 0, 0], "rpy": [0.05, -0.04, 0]},
                             "surface_velocity": ["0.3*cos(2*pi*t)", "0.2*sin(3*t)", "0.01*sin(5*t)"]}]
    scene["objects"] = [{"name": "rest", "shape": {"sphere": 0.03}, "mass": 0.2, "pose": {"xyz": [0.5, 0.3, 0.06]}}]
    return scene


@pytest.mark.parametrize("scene, steps, engine", [
    ("conveyor", 1500, "tamsi"), ("conveyor", 1500, "lagged"), ("conveyor", 500, "sap"), ("belt", 1500, "tamsi"),
    ("belt", 1500, "lagged"), ("ball", 1000, "tamsi")])
def test_moving_surfaces_equal_the_staged_step_bit_for_bit(scene, steps, engine, tmp_path):
    """Moving surfaces in the fused call (the Simulator writes data.surface_velocity at t before it; the call's
    surface_velocity_bias): step_hashes' conveyor (a free box carried by the ICF paper's belt oscillating at
    1 Hz; box-halfspace patches) and the tumbler dropped onto a tilted belt moving diagonally beside a ball
    resting on it, and a ball alone on a belt with TAMSI (sphere-halfspace: the free-body TAMSI step excludes
    moving surfaces, this one takes them): every step's report, state, contacts (the velocity bias included),
    impulses and stats equal the staged step's bit for bit, every step fused (no fall-back); the belt carries
    what rests on it."""
    path = {"conveyor": CONVEYOR, "belt": _tilted_belt_under_the_tumbler(tmp_path)}.get(scene) or {
        "objects": [{"name": "ball", "shape": {"sphere": 0.03}, "mass": 0.2, "pose": {"xyz": [0, 0, 0.0299]}}],
        "environment": [{"name": "belt", "shape": "halfspace",
                         "surface_velocity": ["0.3*cos(2*pi*t)", "0.2*sin(3*t)", 0]}]}
    fused, staged = Simulator(path, engine=engine), Simulator(path, engine=engine)
    staged._tree = None
    assert fused._tree is not None and fused._fused is None and fused.sim_model.has_surface_velocities
    calls = []
    step = fused._tree_step
    fused._tree_step = lambda: calls.append(step()) or calls[-1]
    moving = 0
    for k in range(steps):
        _assert_same_step(fused, staged, fused.step(), staged.step(), k)
        moving += fused.contacts.size > 0 and np.abs(fused.contacts.velocity_bias).max() > 1e-3
    assert len(calls) == steps and all(r is not None for r in calls)    # no staged fall-back was needed
    assert moving > steps // 2                                          # the bias acted on most steps
    if scene == "conveyor":     # the belt at 0.4 pi cos(2 pi t) m/s: at its speed's extreme (t = 0.5 s, 1.5 s:
        assert fused.contacts.size == 4         # no acceleration) the box, slipping only near the reversals, rides it
        v_belt = 0.4 * np.pi * np.cos(2 * np.pi * fused.t)
        assert v_belt < -1.25 and abs(fused.v[0] - v_belt) < 1e-3, (fused.t, fused.v[0])
    elif scene == "belt":       # the ball on the belt is carried off its start (x 0.5, y 0.3)
        ball = fused.model.pin_model.joints[fused.model.pin_model.getJointId("rest_freejoint")].idx_q
        assert np.hypot(fused.q[ball] - 0.5, fused.q[ball + 1] - 0.3) > 0.01
    else:                       # rolling: carried along y (the belt's mean y speed is positive), resting on it
        assert fused.q[1] > 0.01 and fused.contacts.size == 1


def test_surface_velocity_bias_equals_the_contact_querys_bit_for_bit(tmp_path):
    """The call's velocity bias (tree_step.surface_velocity_bias) equals ContactQuery.update's (its per-contact
    matmul R^T (v_B - v_A)) bit for bit for random surface velocities on every geometry (only the static ones
    count) at 20 states of the tumbler and a ball on the tilted belt (contact frames with every entry nonzero)."""
    sim = Simulator(_tilted_belt_under_the_tumbler(tmp_path), engine="tamsi")
    cq = sim.contact_query
    rng = np.random.default_rng(3)
    n_geometries = len(sim.model.collision_model.geometryObjects)
    checked = 0
    for _ in range(20):
        for _ in range(25):
            sim.step()
        surface = rng.normal(size=(n_geometries, 3))
        found = cq.update(sim.pin_data, None, surface, q=sim.q)
        n = found.size
        if n == 0:
            continue
        ids = np.stack([found.geometry_a, found.geometry_b, found.joint_a, found.joint_b]).astype(np.int64)
        assert np.all((ids[2] == 0) != (ids[3] == 0))      # on the belt (its row only counts)
        assert np.count_nonzero(found.rotation) >= 8 * n    # tilted frames: (nearly) every product counts
        bias = np.full(3 * n, np.nan)
        tree_step.surface_velocity_bias(ids, np.ascontiguousarray(found.rotation), surface, n, bias)
        np.testing.assert_array_equal(bias, found.velocity_bias)
        assert np.all(bias != 0)
        checked += n
    assert checked >= 60


def test_a_driven_joint_with_the_servos_feed_forward_equals_the_staged_step(tmp_path):
    """The tumbler's tilt joint driven by the default servo (no gains given: defaults and the URDF friction and
    damping's feed-forward at the velocity target) on a commanded sine: the call's feed-forward pass gives the
    staged step's numbers bit for bit, step by step."""
    urdf = TUMBLER_URDF.replace(
        '<joint name="tilt" type="revolute"><parent link="lift"/><child link="box"/><axis xyz="0 1 0"/>',
        '<joint name="tilt" type="revolute"><parent link="lift"/><child link="box"/><axis xyz="0 1 0"/>'
        '<dynamics damping="0.05" friction="0.02"/>')
    scene = _tumbler(tmp_path)
    (tmp_path / "tumbler.urdf").write_text(urdf)
    scene["passive_joints"] = ["x", "z"]
    with pytest.warns(Warning, match="default"):
        fused = Simulator(scene, engine="tamsi")
    with pytest.warns(Warning, match="default"):
        staged = Simulator(scene, engine="tamsi")
    staged._tree = None
    assert fused._tree is not None and fused.sim_model.has_feed_forward
    for k in range(1000):
        t = k * 1e-3
        for sim in (fused, staged):
            sim.set_joint_targets(positions={"tilt": 0.3 * np.cos(6.0 * t)},
                                  velocities={"tilt": -1.8 * np.sin(6.0 * t)})
        _assert_same_step(fused, staged, fused.step(), staged.step(), k)
    assert np.abs(fused.data.actuation_effort).max() > 0          # the feed-forward acted


def test_more_coal_rows_than_the_buffers_take_the_staged_step():
    """The UR5 + 20 objects (50 contacts) with the fused call told that the query's contact buffers hold 10 rows
    (its table's row of them): the call finds more rows than that and returns NEAR with nothing written; the
    staged step runs instead (then TREE_RETEST_AFTER steps without an attempt), and the trajectory equals the
    staged step's bit for bit."""
    from contact_sim_ros.geometry import contact_pass_kernels
    fused, staged = Simulator(UR5_OBJECTS, engine="tamsi"), Simulator(UR5_OBJECTS, engine="tamsi")
    staged._tree = None
    fused._tree.coal_pass.table[contact_pass_kernels.P_IDS, 2] = 10     # (4, 10): fewer rows than 50 contacts
    calls = []
    step = fused._tree_step
    fused._tree_step = lambda: calls.append(step()) or calls[-1]
    for k in range(100):
        _assert_same_step(fused, staged, fused.step(), staged.step(), k)
    assert calls and all(r is None for r in calls) and len(calls) < 20 and fused.contacts.size == 50



def test_after_a_non_converged_fused_step_the_next_steps_are_staged_then_fused_is_retried():
    """The 40-object clutter with TAMSI (2 ms) does not converge on many steps from ~0.15 s on, in runs: after a
    fused attempt that did not converge (the staged step then needs sub-steps: the full step failed there too) the
    next TREE_RETRY_AFTER steps take the staged step without an attempt, then the fused step is tried again; the
    trajectory is the staged step's bit for bit throughout (the same arithmetic)."""
    assert simulator.TREE_RETRY_AFTER > 0
    fused = Simulator(CLUTTER, engine="tamsi", time_step=2e-3)
    staged = Simulator(CLUTTER, engine="tamsi", time_step=2e-3)
    staged._tree = None
    assert fused._tree is not None and not fused._tree.icf
    calls = []
    step = fused._tree_step
    fused._tree_step = lambda: calls.append(step()) or calls[-1]
    attempts, substeps = [], []             # per step: the fused attempt's outcome (None: no attempt), sub-steps
    for k in range(170):
        before = len(calls)
        ra, rb = fused.step(), staged.step()
        _assert_same_step(fused, staged, ra, rb, k)
        attempts.append(("fused" if calls[-1] is not None else "failed") if len(calls) > before else None)
        substeps.append(ra.substeps)
    failed = [k for k, a in enumerate(attempts) if a == "failed"]
    assert len(failed) >= 3, attempts
    wait = simulator.TREE_RETRY_AFTER
    for k in failed:
        assert substeps[k] > 1                                      # not converged over the full step
        following = attempts[k + 1:k + 1 + wait]
        assert following == [None] * len(following), (k, attempts)  # staged, no attempt
        if k + 1 + wait < len(attempts):
            assert attempts[k + 1 + wait] is not None, (k, attempts)    # then the fused step again
    # every step without an attempt follows a failed one by at most TREE_RETRY_AFTER steps
    for k, a in enumerate(attempts):
        if a is None:
            assert any(0 < k - f <= wait for f in failed), (k, attempts)
    assert attempts.count("fused") > 100 and fused.step_count == staged.step_count == 170



@pytest.mark.parametrize("scene, engine", [("ur5_objects", "tamsi"), ("allegro", "lagged"), ("planar", "tamsi"),
                                           ("free_box", "lagged")])
def test_the_fused_steps_contact_stats_are_the_staged_steps(scene, engine, tmp_path):
    """The contact query's stats after a fused tree step (candidate pairs, colliding pairs, contacts) are the ones
    the staged step leaves at the same state: with coal's pairs in the call, the candidates of the broad phase
    (and the unbounded and sphere-primitive pairs) as update counts them, not the call's compiled pairs
    (TreeStep.pairs): the UR5 + 20 objects (187 of 398 pairs; 176 compiled), the Allegro hand closing on the mug
    (the count changing as the fingers close). Every pair compiled: every pair (the call tests them all), as
    update while its bounding-volume test finds a pair within the margin (the planar box, in contact throughout);
    the documented difference: update counts 0 when it finds none, the call still every pair (the free box and
    ball falling: the colliding pairs and contacts still equal)."""
    path = {"ur5_objects": UR5_OBJECTS, "allegro": ALLEGRO, "planar": PLANAR}.get(scene) or _free_box(tmp_path)
    fused, staged = Simulator(path, engine=engine), Simulator(path, engine=engine)
    staged._tree = None
    calls = []
    step = fused._tree_step
    fused._tree_step = lambda: calls.append(step()) or calls[-1]
    counts, skipped = set(), 0
    for k in range(300):
        ra, rb = fused.step(), staged.step()
        _assert_same_step(fused, staged, ra, rb, k)
        if scene == "free_box" and staged.contact_query.stats["candidate_pairs"] == 0:
            # nothing within the margin while falling: update's bounding-volume test skips every pair
            assert fused.contact_query.stats == {"candidate_pairs": 3, "colliding_pairs": 0, "contacts": 0}, k
            skipped += 1
        else:
            assert fused.contact_query.stats == staged.contact_query.stats, k
        counts.add(fused.contact_query.stats["candidate_pairs"])
    assert len(calls) == 300 and all(r is not None for r in calls)        # every step fused
    cq = fused.contact_query
    if scene in ("planar", "free_box"):
        assert cq.all_compiled and counts == {cq.num_pairs} == {fused._tree.pairs}
        assert (0 < skipped < 100) if scene == "free_box" else skipped == 0
    else:
        assert fused._tree.coal_pass is not None and fused._tree.pairs not in counts and max(counts) < cq.num_pairs
        if scene == "ur5_objects":
            assert counts == {187}
        else:
            assert len(counts) > 1


SPHERE = ROOT / "scenes" / "icf_falling_sphere.yaml"     # the ICF paper's rolling sphere (peers' "sphere")
CLUTTER = ROOT / "scenes" / "icf_clutter.yaml"           # 40 spheres and boxes in a bin: coal's box-box pairs
BOX_PUSH = ROOT / "benchmarks" / "peers" / "scenes" / "box_stick_slip.yaml"   # a box on corner spheres, pushed


def _free_box(tmp_path):
    """A free box dropped tilted onto a half-space (a corner first: a one-point box-halfspace contact, then an
    edge and its face: patches) and a ball beside it, pushed by a scripted wrench on the box's frame: free bodies
    only, no pair the fused free-body TAMSI step takes (a box-halfspace pair)."""
    return {"objects": [{"name": "box", "shape": {"box": [0.1, 0.08, 0.04]}, "mass": 0.4,
                         "pose": {"xyz": [0.0, 0.0, 0.08], "rpy": [0.3, 0.2, 0.1]}},
                        {"name": "ball", "shape": {"sphere": 0.02}, "mass": 0.1,
                         "pose": {"xyz": [0.3, 0.0, 0.05]}, "velocity": [-0.5, 0.0, 0.0, 0.0, 0.0, 0.0]}],
            "environment": [{"name": "ground", "shape": "halfspace"}],
            "inputs": {"external_forces": [{"body": "box", "force": ["0.5*sin(3*t)", 0, 0], "torque": [0, 0, 0]}]}}


def test_free_bodies_only_take_the_fused_tree_step_where_the_free_body_tamsi_step_does_not(tmp_path):
    """A scene of free bodies only: TAMSI on sphere-halfspace pairs keeps the fused free-body step
    (FreeBodyTamsiStep); the ICF engines there, and every engine on other pairs (box-halfspace, the clutter's
    sphere-sphere, sphere-box and coal's box-box pairs), take the tree step with FreeBodies' kernels
    (free_bodies in its table), Pinocchio's kinematics in the call only for coal's narrow phase; the numpy
    kernels and a missing compiled Pinocchio module take the staged step."""
    assert Simulator(SPHERE, engine="tamsi", time_step=2e-3)._fused is not None
    for engine in ("lagged", "similar", "sap"):
        sim = Simulator(SPHERE, engine=engine, time_step=2e-3)
        assert sim._fused is None and sim._tree is not None and sim._tree.icf
        assert sim.step_parts.free_bodies is not None and sim.step_parts.rigid is None
        assert not sim._tree.pin_kinematics and sim._tree.arrays[tree_step.T_INTS][tree_step.I_FREE_BODIES] == 1
    box = Simulator(_free_box(tmp_path), engine="tamsi")
    assert box._fused is None and box._tree is not None and not box._tree.icf and not box._tree.applies_wrenches
    clutter = Simulator(CLUTTER, engine="lagged", time_step=2e-3)
    assert clutter._tree is not None and len(clutter.contact_query.coal_pairs) > 0
    assert clutter._tree.coal_pass is not None and clutter._tree.pin_kinematics
    assert Simulator(SPHERE, engine="lagged", engine_options={"newton_kernel": "numpy"})._tree is None
    saved = RIGID_BODY.load()
    RIGID_BODY._loaded["module"] = None
    try:
        assert Simulator(SPHERE, engine="lagged", time_step=2e-3)._tree is None
    finally:
        RIGID_BODY._loaded["module"] = saved


@pytest.mark.parametrize("scene, steps, engine", [
    ("sphere", 500, "lagged"), ("sphere", 500, "similar"), ("sphere", 500, "sap"), ("clutter", 300, "lagged"),
    ("clutter", 300, "similar"), ("box", 1000, "tamsi"), ("box", 1000, "lagged"), ("box_push", 1000, "lagged")])
def test_free_body_trajectories_equal_the_staged_step_bit_for_bit(scene, steps, engine, tmp_path):
    """Free bodies only in the tree step (FreeBodies' placements, Jacobians, nle, constant M and quaternion
    integration): the rolling sphere (2 ms; Lagged, Similar, SAP), the 40-object clutter falling into its bin
    (2 ms; sphere-halfspace, sphere-sphere, sphere-box, box-halfspace and coal's box-box pairs in the call), a
    tilted box landing on a half-space beside a rolling ball with a scripted push on it (TAMSI, Lagged; written
    into data.external as the staged step does) and the peers' pushed box on corner spheres: every step's report,
    state, contacts, impulses, stats equal the staged step's bit for bit, every step in the fused call (no
    fall-back), and the kinematics read afterwards (pin_data) too."""
    path, dt = {"sphere": (SPHERE, 2e-3), "clutter": (CLUTTER, 2e-3), "box_push": (BOX_PUSH, 1e-3)}.get(
        scene) or (_free_box(tmp_path), 1e-3)
    fused, staged = Simulator(path, engine=engine, time_step=dt), Simulator(path, engine=engine, time_step=dt)
    staged._tree = None
    assert fused._tree is not None and fused._fused is None and fused.step_parts.free_bodies is not None
    calls = []
    step = fused._tree_step
    fused._tree_step = lambda: calls.append(step()) or calls[-1]
    sizes = set()
    for k in range(steps):
        ra, rb = fused.step(), staged.step()
        _assert_same_step(fused, staged, ra, rb, k)
        sizes.add(fused.contacts.size)
    assert all(r is not None for r in calls) and len(calls) == steps    # no staged fall-back was needed
    pm = fused.model.pin_model
    for j in range(1, pm.njoints):
        np.testing.assert_array_equal(fused.pin_data.oMi[j].homogeneous, staged.pin_data.oMi[j].homogeneous)
    if scene == "sphere":         # dropped: in flight, then rolling on its one contact
        assert sizes == {0, 1}
    elif scene == "clutter":      # the objects land on the floor and on each other
        assert max(sizes) >= 40
        kinds = {(fused.model.collision_model.geometryObjects[int(a)].geometry.__class__.__name__,
                  fused.model.collision_model.geometryObjects[int(b)].geometry.__class__.__name__)
                 for a, b in zip(fused.contacts.geometry_a, fused.contacts.geometry_b)}
        assert len(kinds) >= 3, kinds
    elif scene == "box":          # a corner, then the face (4 points), and the ball
        assert 1 in sizes and max(sizes) >= 5
        assert abs(fused.q[0]) > 1e-4         # pushed along x
    else:                         # the 8 corner spheres: 4 on the ground
        assert 4 in sizes


def test_a_free_body_step_the_fused_call_cannot_solve_is_sub_stepped_then_failed_as_the_staged_step(tmp_path):
    """Lagged not converging in the tree step of free bodies: the staged step runs (Pinocchio's kinematics made
    first), tries its sub-steps and fails with the state kept, exactly as without the fused step."""
    options = {"max_iterations": 1, "relative_tolerance": 1e-12}
    scene = _free_box(tmp_path)
    scene["objects"][0]["pose"]["xyz"] = [0.0, 0.0, 0.03]         # its corner in contact from the start
    fused = Simulator(scene, engine="lagged", max_substep_levels=2, engine_options=options)
    staged = Simulator(scene, engine="lagged", max_substep_levels=2, engine_options=options)
    staged._tree = None
    assert fused._tree is not None
    calls = []
    step = fused._tree_step
    fused._tree_step = lambda: calls.append(step()) or calls[-1]
    q0 = fused.q.copy()
    ra, rb = fused.step(), staged.step()
    assert calls == [None] and not ra.ok and ra.substeps == 4, ra.message
    _assert_same_step(fused, staged, ra, rb, 0)
    np.testing.assert_array_equal(fused.q, q0)


def test_free_body_jacobians_equal_pinocchios_bit_for_bit_at_identity_joint_placements():
    """The tree step of free bodies takes the joint Jacobians from q (free_body_kinematics) instead of Pinocchio's
    Data where that is the staged step's J bit for bit: at 500 random states of six free flyers, the bodies whose
    joint placement is the identity (every scene's free object) get computeJointJacobians' columns exactly; a
    body with another joint placement may differ in round-off, so such a model reads the Data's J in the call
    (FreeBodies.identity_placements False: TreeStep.pin_kinematics)."""
    from types import SimpleNamespace

    from contact_sim_ros.sim.free_body_step import FreeBodies, free_body_kinematics
    pm = pin.Model()
    for k in range(6):
        placement = pin.SE3(pin.rpy.rpyToMatrix(0.3 * k, -0.2, 0.1 * k), np.array([0.1 * k, -0.2, 0.05])) \
            if k % 2 else pin.SE3.Identity()
        j = pm.addJoint(0, pin.JointModelFreeFlyer(), placement, f"body{k}")
        pm.appendBodyToJoint(j, pin.Inertia.FromBox(0.4 + 0.1 * k, 0.1, 0.08, 0.04), pin.SE3.Identity())
    no_pairs = SimpleNamespace(analytic_joint_slots=[])         # the query's slots: no analytic pair here
    bodies = FreeBodies(pm, no_pairs)
    assert not bodies.identity_placements
    identity = [6 * k + c for k in range(0, 6, 2) for c in range(6)]
    other = [6 * k + c for k in range(1, 6, 2) for c in range(6)]
    rng = np.random.default_rng(5)
    data = pin.Data(pm)
    differs = 0
    for _ in range(500):
        q = pin.randomConfiguration(pm, -2.0 * np.ones(pm.nq), 2.0 * np.ones(pm.nq))
        pin.forwardKinematics(pm, data, q, rng.normal(size=pm.nv))
        pin.computeJointJacobians(pm, data)
        J = np.full((6, pm.nv), np.nan)
        free_body_kinematics(q, bodies.body_int, bodies.body_float, np.zeros((1, 4, 4)), J)
        np.testing.assert_array_equal(J[:, identity], data.J[:, identity])
        np.testing.assert_allclose(J[:, other], data.J[:, other], rtol=0, atol=1e-14)
        differs += not np.array_equal(J[:, other], data.J[:, other])
    assert differs > 0
    assert Simulator(SPHERE, engine="lagged", time_step=2e-3).step_parts.free_bodies.identity_placements
