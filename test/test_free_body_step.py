"""The fused free-body TAMSI step (contact_sim_ros/sim/free_body_step.py): selected only for the scenes it covers,
its kinematics and dynamics equal Pinocchio's, its trajectories equal the staged step's to round-off, and its
failures are handled by the staged step's sub-stepping exactly as elsewhere."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from contact_sim_ros.engines.base import SolverStatus
from contact_sim_ros.errors import SolverError
from contact_sim_ros.sim import free_body_step as F
from contact_sim_ros.sim.simulator import Simulator

ROOT = Path(__file__).resolve().parent.parent
SPHERE = ROOT / "scenes" / "icf_falling_sphere.yaml"          # the ICF paper's rolling sphere (the peers' row)
BOX = ROOT / "benchmarks" / "peers" / "scenes" / "box_stick_slip.yaml"   # 8 corner spheres, a scripted push


def _ball_scene(**ball):
    return {"objects": [{"name": "ball", "shape": {"sphere": 0.05}, "mass": 1.0, "pose": {"xyz": [0, 0, 0.049]},
                         **ball}],
            "environment": [{"name": "ground", "shape": "halfspace"}]}


def test_selected_only_for_free_bodies_on_sphere_halfspace_pairs_with_compiled_tamsi():
    assert Simulator(SPHERE, engine="tamsi", time_step=2e-3)._fused is not None
    assert Simulator(BOX, engine="tamsi")._fused is not None
    assert Simulator(SPHERE, engine="lagged")._fused is None
    assert Simulator(SPHERE, engine="tamsi", engine_options={"kernel": "numpy"})._fused is None
    box_on_ground = {"objects": [{"name": "b", "shape": {"box": [0.1, 0.1, 0.1]}, "mass": 1.0,
                                  "pose": {"xyz": [0, 0, 0.05]}}],
                     "environment": [{"name": "ground", "shape": "halfspace"}]}
    assert Simulator(box_on_ground, engine="tamsi")._fused is None          # box-halfspace: coal's pair
    assert Simulator(ROOT / "benchmarks" / "peers" / "scenes" / "iiwa_wsg_pd.yaml", engine="tamsi")._fused is None


def _free_flyer_model():
    """Three free flyers with non-identity joint placements and off-centre, non-diagonal inertias."""
    rng = np.random.default_rng(3)
    model = pin.Model()
    for k in range(3):
        placement = pin.SE3(pin.exp3(rng.normal(size=3)), rng.normal(size=3))
        j = model.addJoint(0, pin.JointModelFreeFlyer(), placement, f"free{k}")
        A = rng.normal(size=(3, 3))
        model.appendBodyToJoint(j, pin.Inertia(0.3 + k, rng.normal(size=3) * 0.1, A @ A.T + np.eye(3) * 0.01),
                                pin.SE3.Identity())
    return model


def test_kinematics_dynamics_and_rotation_update_equal_pinocchio():
    """M, nle = C v + g, the world joint Jacobians and the quaternion part of pin.integrate, for random states."""
    model = _free_flyer_model()
    data = model.createData()
    rng = np.random.default_rng(5)
    nb = model.njoints - 1
    body_int = np.array([[model.joints[j].idx_q, model.joints[j].idx_v, j] for j in range(1, model.njoints)])
    body_float = np.zeros((nb, F.BODY_FLOATS))
    for row, j in zip(body_float, range(1, model.njoints)):
        placement, inertia = model.jointPlacements[j], model.inertias[j]
        row[F.BF_R:F.BF_R + 9] = placement.rotation.reshape(-1)
        row[F.BF_T:F.BF_T + 3] = placement.translation
        row[F.BF_MASS], row[F.BF_LEVER:F.BF_LEVER + 3] = inertia.mass, inertia.lever
        row[F.BF_INERTIA:F.BF_INERTIA + 9] = inertia.inertia.reshape(-1)
    for trial in range(20):
        q = pin.randomConfiguration(model, -np.ones(model.nq) * 3, np.ones(model.nq) * 3)
        v = rng.normal(size=model.nv) * (10.0 if trial % 2 else 0.1)
        M = pin.crba(model, data, q, pin.Convention.WORLD)
        M = np.triu(M) + np.triu(M, 1).T
        for j in range(1, model.njoints):
            iv = model.joints[j].idx_v
            np.testing.assert_allclose(M[iv:iv + 6, iv:iv + 6], model.inertias[j].matrix(), atol=1e-12)
        nle = np.zeros(model.nv)
        F.free_body_bias_force(q, v, body_int, body_float, model.gravity.linear.copy(), nle)
        np.testing.assert_allclose(nle, pin.nonLinearEffects(model, data, q, v), rtol=1e-12, atol=1e-12)
        placement = np.tile(np.eye(4), (model.njoints, 1, 1))     # as ContactQuery keeps it: slot 0 the world
        J = np.zeros((6, model.nv))
        F.free_body_kinematics(q, body_int, body_float, placement, J)
        pin.forwardKinematics(model, data, q)
        pin.computeJointJacobians(model, data, q)
        np.testing.assert_allclose(J, data.J, atol=1e-12)
        for j in range(1, model.njoints):
            np.testing.assert_allclose(placement[j], data.oMi[j].homogeneous, atol=1e-14)
        for dt in (1e-3, 0.5):                                   # Taylor branch and a large rotation
            q_next = q.copy()
            F.integrate_rotations(q, v, dt, body_int, q_next)
            reference = pin.integrate(model, q, dt * v)
            for j in range(1, model.njoints):
                iq = model.joints[j].idx_q
                np.testing.assert_allclose(q_next[iq + 3:iq + 7], reference[iq + 3:iq + 7], atol=1e-13)


@pytest.mark.parametrize("scene, dt, seconds", [(SPHERE, 2e-3, 1.0), (BOX, 1e-3, 1.0)])
def test_trajectories_equal_the_staged_step(scene, dt, seconds):
    """The peers' sphere (drop, impact, sliding, rolling) and box (scripted push, stick-slip on 4 corners): q, v,
    the contacts and their impulses step by step as the staged step's, within round-off, and the engine's
    ``iteration_history`` (the fused call runs TAMSI's kernel on the engine's scratch) as long as the staged step's
    when both took as many iterations."""
    fused, staged = Simulator(scene, engine="tamsi", time_step=dt), Simulator(scene, engine="tamsi", time_step=dt)
    staged._fused = None
    for _ in range(int(round(seconds / dt))):
        a, b = fused.step(), staged.step()
        assert a.ok and b.ok and a.substeps == b.substeps == 1 and a.t == b.t
        assert abs(a.iterations - b.iterations) <= 1
        history = fused.engine.iteration_history
        assert a.iterations <= len(history) <= a.iterations + 1 and all(np.isfinite(history).ravel())
        if a.iterations == b.iterations:
            assert len(history) == len(staged.engine.iteration_history)
        np.testing.assert_allclose(fused.q, staged.q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(fused.v, staged.v, rtol=0, atol=1e-10)
        assert fused.contacts.size == staged.contacts.size
        for name in ("point", "normal", "signed_distance", "rotation", "jacobian", "stiffness", "friction"):
            np.testing.assert_allclose(getattr(fused.contacts, name), getattr(staged.contacts, name), rtol=0,
                                       atol=1e-12, err_msg=name)
        np.testing.assert_array_equal(fused.contacts.geometry_b, staged.contacts.geometry_b)
        np.testing.assert_allclose(fused.last_result.contact_impulse, staged.last_result.contact_impulse, rtol=0,
                                   atol=1e-11)
        np.testing.assert_allclose(fused.contact_forces_world(), staged.contact_forces_world(), rtol=0, atol=1e-8)
    assert fused.step_count == staged.step_count
    # the kinematics the node and the sensors read are the new state's
    name = fused.model.free_bodies[0].name
    np.testing.assert_allclose(fused.body_pose(name).homogeneous, staged.body_pose(name).homogeneous, atol=1e-12)
    np.testing.assert_allclose(fused.body_velocity(name), staged.body_velocity(name), atol=1e-10)
    if scene == SPHERE:    # rolling without slipping at 5/7 v0 (ICF paper, section XI-B)
        assert abs(fused.body_velocity(name)[0] - 2.0 * 5.0 / 7.0) < 0.01


def test_the_pieces_the_fused_step_runs_are_refused_where_they_do_not_exist():
    """The compiled TAMSI scratch (``TamsiEngine.kernel_scratch``) of a numpy-kernel engine and the analytic pass's
    arguments (``ContactQuery.analytic_step_arguments``) of a query with a coal pair: clear errors naming them."""
    from contact_sim_ros.errors import ConfigError, EngineError
    numpy_kernel = Simulator(SPHERE, engine="tamsi", time_step=2e-3, engine_options={"kernel": "numpy"})
    assert not numpy_kernel.engine.compiled
    with pytest.raises(EngineError, match="kernel_scratch needs the compiled kernel"):
        numpy_kernel.engine.kernel_scratch(1)
    box_on_ground = {"objects": [{"name": "b", "shape": {"box": [0.1, 0.1, 0.1]}, "mass": 1.0,
                                  "pose": {"xyz": [0, 0, 0.05]}}],
                     "environment": [{"name": "ground", "shape": "halfspace"}]}
    coal_pair = Simulator(box_on_ground, engine="tamsi")
    assert coal_pair.engine.compiled and not coal_pair.contact_query.all_analytic
    with pytest.raises(ConfigError, match="analytic_step_arguments.*all_analytic is False"):
        coal_pair.contact_query.analytic_step_arguments()


def test_the_fused_steps_packed_blocks_are_the_buffers_the_query_and_the_engine_read():
    """The fused step's packed data (FreeBodyTamsiStep.data_float / data_int) holds the contact query's analytic
    buffers and TAMSI's scratch (moved there once): after a fused step the query's ContactSet, the result's
    impulses and the engine's history are views of what the one call wrote; a buffer of another shape, dtype or
    name is refused naming it."""
    from contact_sim_ros.errors import ConfigError, EngineError
    sim = Simulator(BOX, engine="tamsi", time_step=1e-3)
    fused = sim._fused
    for _ in range(50):
        assert sim.step().ok
    contacts = sim.contacts
    assert contacts.size == 4                                    # the box's four bottom corners on the ground
    for name in ("point", "normal", "signed_distance", "rotation", "jacobian", "stiffness"):
        assert np.shares_memory(getattr(contacts, name), fused.data_float), name
    assert np.shares_memory(contacts.geometry_a, fused.data_int)
    # after 50 ms on its corners (the push, 4 sin(2 pi t) N, is horizontal): the normal impulses carry its weight
    weight = sum(b.mass for b in sim.model.free_bodies) * 9.81
    assert abs(sim.last_result.contact_impulse[:, 2].sum() / 1e-3 - weight) < 0.05 * weight
    assert len(sim.engine.iteration_history) >= sim.last_result.stats.iterations
    buffers = sim.contact_query.analytic_buffers()
    with pytest.raises(ConfigError, match="buffer 'phi' must be a C-contiguous float64 array of shape"):
        sim.contact_query.use_analytic_buffers({"phi": np.zeros(len(buffers["phi"]) + 1)})
    with pytest.raises(ConfigError, match="unknown buffer 'phase'"):
        sim.contact_query.use_analytic_buffers({"phase": np.zeros(3)})
    fixed, ifixed, contact, icontact = sim.engine.kernel_scratch(fused.pairs)
    with pytest.raises(EngineError, match="use_kernel_scratch: ifixed must be a C-contiguous int64 array"):
        sim.engine.use_kernel_scratch(fixed, ifixed.astype(float), contact, icontact)
    assert sim.step().ok                          # the refused calls changed nothing


def test_the_address_table_points_at_the_arrays_the_call_reads_and_follows_a_grown_result_slot():
    """The fused call's table (FreeBodyTamsiStep.table) holds the address and shape of every array it reads: the
    packed blocks' sections, the Simulator's data rows and modes, both result slots. A result slot whose impulse
    buffer was replaced (grown) is pointed at again after a staged step (``check_slots``): the results then land in
    the new buffer, equal to a Simulator whose slots never grew."""
    sim, twin = Simulator(BOX, engine="tamsi", time_step=1e-3), Simulator(BOX, engine="tamsi", time_step=1e-3)
    fused = sim._fused
    table = fused.table
    assert table.shape == (F.N_TABLE, 4) and table.dtype == np.int64
    for k, arr in fused.arrays.items():
        assert table[k, 0] == arr.ctypes.data and tuple(table[k, 1:1 + arr.ndim]) == arr.shape, k
    assert np.shares_memory(fused.arrays[F.T_ROWS], sim.data.rows)
    assert np.shares_memory(fused.arrays[F.T_MODES], sim.data.modes)
    assert np.shares_memory(fused.arrays[F.T_PARAMS], fused.data_float)       # TAMSI's scratch, in the block
    for _ in range(20):
        assert sim.step().ok and twin.step().ok
    for slot in sim.data.slots:                        # as a staged step with more contacts would grow them
        old = slot.rows(fused.pairs)[0]
        slot.rows(4 * fused.pairs)
        assert not np.shares_memory(slot.rows(fused.pairs)[0], old)
    fused.check_slots = True                           # what the Simulator sets when its staged step runs
    for _ in range(3):
        assert sim.step().ok and twin.step().ok
        assert sim.last_result.contact_impulse.shape == (4, 3)
        np.testing.assert_array_equal(sim.last_result.contact_impulse, twin.last_result.contact_impulse)
        np.testing.assert_array_equal(sim.q, twin.q)
    for k in (F.T_IMPULSE_A, F.T_IMPULSE_B):
        assert table[k, 0] == fused.arrays[k].ctypes.data
    assert sim.advance(7).ok and twin.advance(7).ok                # the advance call reads the same table
    np.testing.assert_array_equal(sim.last_result.contact_impulse, twin.last_result.contact_impulse)
    np.testing.assert_array_equal(sim.v, twin.v)


def test_a_step_the_fused_call_cannot_solve_is_sub_stepped_then_failed_as_elsewhere():
    """TAMSI not converging: the staged step's sub-steps are tried, then the step fails with the state kept."""
    sim = Simulator(_ball_scene(), engine="tamsi", time_step=1e-3, max_substep_levels=2,
                    engine_options={"max_iterations": 1, "relative_tolerance": 1e-12})
    assert sim._fused is not None
    q0, v0 = sim.q.copy(), sim.v.copy()
    report = sim.step()
    assert not report.ok and report.substeps == 4 and report.status is SolverStatus.MAX_ITERATIONS
    assert "engine 'tamsi' failed at t = 0.000000 s" in report.message
    np.testing.assert_array_equal(sim.q, q0)
    np.testing.assert_array_equal(sim.v, v0)
    assert sim.t == 0.0 and sim.step_count == 0 and sim.contacts is None
    with pytest.raises(SolverError, match="state kept"):
        sim.step(strict=True)


def test_a_diverged_free_body_fails_the_step_naming_it():
    sim = Simulator(_ball_scene(), engine="tamsi", time_step=1e-3, max_substep_levels=1)
    v = sim.v.copy()
    v[0] = 6500.0
    sim.set_state(sim.q, v)
    q0 = sim.q.copy()
    report = sim.step()
    assert not report.ok and report.substeps == 2
    assert re.search(r"diverged: free body 'ball' speed 6500 m/s > 100 m/s at t = 0.000\d+ s", report.message)
    np.testing.assert_array_equal(sim.q, q0)
    off = Simulator(_ball_scene(), engine="tamsi", time_step=1e-3, divergence_limits=False)
    off.set_state(off.q, v)
    assert off.step().ok and off._fused is not None


def test_more_contacts_than_the_contact_buffers_preallocate(tmp_path):
    """A plate on 70 small spheres resting on the ground (the query preallocates 64 contacts): 70 contacts, fused
    and staged alike (the contact query's buffers hold one contact per sphere-halfspace pair)."""
    spheres = "".join(f'<collision><origin xyz="{0.01 * (i % 10)} {0.01 * (i // 10)} 0"/><geometry><sphere '
                      f'radius="0.002"/></geometry></collision>' for i in range(70))
    (tmp_path / "plate.urdf").write_text(
        f'<robot name="plate"><link name="plate"><inertial><mass value="0.2"/><inertia ixx="1e-4" iyy="1e-4" '
        f'izz="2e-4" ixy="0" ixz="0" iyz="0"/></inertial>{spheres}</link></robot>')
    scene = {"objects": [{"name": "plate", "urdf": str(tmp_path / "plate.urdf"), "pose": {"xyz": [0, 0, 0.0019]}}],
             "environment": [{"name": "ground", "shape": "halfspace"}]}
    fused, staged = Simulator(scene, engine="tamsi"), Simulator(scene, engine="tamsi")
    assert fused._fused is not None
    staged._fused = None
    for _ in range(3):
        assert fused.step().ok and staged.step().ok
    assert fused.contacts.size == staged.contacts.size == 70
    np.testing.assert_allclose(fused.q, staged.q, rtol=0, atol=1e-12)


CLUTTER = ROOT / "scenes" / "icf_clutter.yaml"      # 40 free spheres and boxes in a box: the peers' clutter row


@pytest.mark.parametrize("engine", ["lagged", "sap"])
def test_staged_step_of_free_bodies_equals_the_pinocchio_path(engine):
    """A model of free bodies only steps with M constant, nle, g(q), the contact query's joint placements and the
    quaternion update from q in compiled passes (FreeBodies): the same step as with Pinocchio's crba,
    nonLinearEffects, computeGeneralizedGravity, data.oMi and integrate, within round-off, from every 30th state
    of the clutter's first 0.6 s (drop, impacts, the pile). One step each: the pile is chaotic (one ulp in every
    coordinate grows to ~1e-8 m/s within 3 steps) and at the default tolerance a round-off difference can move an
    ill-conditioned impact step's solution by the tolerance; hence eps_r = 1e-10."""
    options = {"relative_tolerance": 1e-10}
    trajectory, fast, reference = (Simulator(CLUTTER, engine=engine, time_step=2e-3, engine_options=options)
                                   for _ in range(3))
    assert fast._free_bodies is not None and fast._fused is None
    reference._free_bodies = None
    reference.contact_query.set_placement_source(None)
    pm = fast.model.pin_model
    M = pin.crba(pm, pm.createData(), fast.q, pin.Convention.WORLD)
    np.testing.assert_allclose(fast._free_bodies.mass_matrix, np.triu(M) + np.triu(M, 1).T, rtol=0, atol=1e-15)
    contacts = []
    for i in range(300):
        trajectory.step(strict=True)
        if i % 30 != 29:
            continue
        for sim in (fast, reference):
            sim.set_state(trajectory.q, trajectory.v)
        a, b = fast.step(), reference.step()
        assert a.ok and b.ok and a.substeps == b.substeps == 1
        np.testing.assert_allclose(fast.q, reference.q, rtol=0, atol=1e-13)
        np.testing.assert_allclose(fast.v, reference.v, rtol=0, atol=1e-10)
        assert fast.contacts.size == reference.contacts.size
        np.testing.assert_allclose(fast.contacts.signed_distance, reference.contacts.signed_distance, rtol=0,
                                   atol=1e-14)
        contacts.append(fast.contacts.size)
    assert max(contacts) > 80                             # the objects have landed


def test_kinetic_energy_check_sums_the_trees_diagonal_blocks():
    """divergence.bounds_exceeded sums v^T M v over each kinematic tree's block (M is zero between trees): one
    block per free body, one for a robot; a non-finite energy in the last body is still found."""
    from contact_sim_ros.sim.divergence import ENERGY, bounds_exceeded, tree_velocity_ranges
    clutter = Simulator(CLUTTER, engine="lagged", time_step=2e-3)
    np.testing.assert_array_equal(tree_velocity_ranges(clutter.model.pin_model), np.arange(41) * 6)
    iiwa = Simulator(ROOT / "benchmarks" / "peers" / "scenes" / "iiwa_wsg_pd.yaml", engine="tamsi")
    np.testing.assert_array_equal(tree_velocity_ranges(iiwa.model.pin_model), [0, iiwa.model.pin_model.nv])
    M = clutter._free_bodies.mass_matrix
    tree_ptr = tree_velocity_ranges(clutter.model.pin_model)
    none = np.zeros(0, dtype=np.int64)
    v = np.zeros(240)
    assert bounds_exceeded(clutter.q, v, M, none, np.zeros(0), none, np.zeros(0), tree_ptr) == 0
    v[-1] = 1e160
    with np.errstate(over="ignore"):
        assert bounds_exceeded(clutter.q, v, M, none, np.zeros(0), none, np.zeros(0), tree_ptr) == ENERGY


@pytest.mark.parametrize("scene, exact", [(BOX, True), ("two wrenches", False)], ids=["box", "two-wrenches"])
def test_the_scripted_wrenches_applied_in_the_call_equal_the_staged_ones(scene, exact):
    """``body_wrenches`` (in the fused call) against ``stages.external_forces`` (Pinocchio's rotation, numpy's
    w @ R): to round-off, to the bit for the box's push along x (two of the three components zero)."""
    if scene == "two wrenches":
        scene = {**_ball_scene(), "inputs": {"external_forces": [
            {"body": "ball", "force": ["3*sin(20*t)", 1.5, -2], "torque": [0.01, "0.02*cos(30*t)", 0.003]},
            {"body": "ball", "force": [0.4, "2*cos(10*t)", 0], "torque": [0.01, 0, -0.002]}]}}
    sim = Simulator(scene, engine="tamsi", time_step=1e-3)
    assert sim._fused.wrenches_in_kernel
    v = sim.v.copy()
    v[3:6] = (3.0, -2.0, 5.0)                     # turning: the body frame leaves the world's
    sim.set_state(sim.q, v)
    for _ in range(40):
        q, v, t = sim.q.copy(), sim.v.copy(), sim.t
        assert sim.step().ok
        in_call = sim.data.external.copy()
        sim.set_state(q, v)                            # the staged stage at the step's start
        staged = sim._external_forces(t).copy()
        assert np.any(staged[3:6] != 0.0) or exact     # the rotation matters (the box: a pure force)
        if exact:
            np.testing.assert_array_equal(in_call, staged)
        else:
            np.testing.assert_allclose(in_call, staged, rtol=0, atol=1e-15 * max(1.0, np.abs(staged).max()))
        assert sim.step().ok                           # on to the next state (the repeated step as the first)
