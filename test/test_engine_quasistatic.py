"""Quasistatic MIQP engine (Pang & Tedrake 2018) and Trinkle's LCP baseline.

The 2-D gripper of the paper's section V-A (eqs. 24-30) is built in benchmarks/quasistatic/gripper_2d.py (one
source for the test and the benchmark): m = 1 kg, r = 0.05 m, mu = 0.5, h = 0.01 s, 60 steps, K = 1e4 N/m.
Steps are numbered from 1 as in the paper; state index l is the configuration after l steps.
"""

import importlib.util
import pathlib

import numpy as np
import pinocchio as pin
import pytest

from contact_sim_ros.engines import Actuation, SolverStatus, StepInputs, engine_names, make_engine
from contact_sim_ros.solvers.miqp import MIQP_BACKENDS
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.geometry.contact_set import ContactSet
from contact_sim_ros.model.multibody_model import FreeBody, MultibodyModel

_path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "quasistatic" / "gripper_2d.py"
_spec = importlib.util.spec_from_file_location("quasistatic_gripper_2d", _path)
g2d = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(g2d)

XC, YC, YG, XL, XR = g2d.V_XC, g2d.V_YC, g2d.V_YG, g2d.V_XL, g2d.V_XR
WEIGHT = g2d.MASS * g2d.GRAVITY            # N
SQUEEZE_FORCE = g2d.K * 0.1 * g2d.H        # N: K x commanded squeeze per step (0.001 m) = 10 N


@pytest.fixture(scope="module")
def model():
    return g2d.build_model()


def miqp(model, **options):
    opts = {"friction_directions": 2, "hypothetical_penetration_stiffness": g2d.K}
    opts.update(options)
    return make_engine("quasistatic_miqp", model, opts)


@pytest.fixture(scope="module", params=sorted(MIQP_BACKENDS))
def paper_run(request, model):
    """The MIQP run of section V-A with the commands of eq. 29, once per installed back-end."""
    return g2d.simulate(miqp(model, solver=request.param))


def test_engines_registered_and_quasistatic():
    assert {"quasistatic_miqp", "quasistatic_lcp"} <= set(engine_names())
    from contact_sim_ros.engines import engine_class
    assert engine_class("quasistatic_miqp").dynamic is False
    assert engine_class("quasistatic_lcp").dynamic is False
    assert {"daqp", "scip"} <= set(MIQP_BACKENDS)   # the open-source default (DAQP) and SCIP are installed


# ------------------------------------------------------------------ paper section V-A, MIQP (Fig. 5)

def test_miqp_fingers_touch_cylinder_at_step_21(paper_run):
    assert all(s is SolverStatus.CONVERGED for s in paper_run["status"])
    phi = paper_run["phi"]
    # 0.02 m gap closed at 0.1 m/s x 0.01 s = 1 mm per step: phi_1 = phi_2 = 0 when step 21 starts
    np.testing.assert_allclose(phi[:21, 0], 0.02 - 0.001 * np.arange(21), atol=1e-9)
    np.testing.assert_allclose(phi[:21, 1], 0.02 - 0.001 * np.arange(21), atol=1e-9)
    finger_force = paper_run["normal_force"][:, :2]
    np.testing.assert_allclose(finger_force[:20], 0.0, atol=1e-6)          # steps 1-20: no finger force
    assert np.all(finger_force[20:39] >= SQUEEZE_FORCE - 1e-4)             # steps 21-39: K bound (eq. 22)


def test_miqp_x_command_not_followed_past_contact_y_command_followed(paper_run):
    q, phi = paper_run["q"], paper_run["phi"]
    # no penetration anywhere (linearised distances are exact for this geometry)
    assert phi.min() >= -1e-9
    # squeezing commanded for steps 21-39 (19 more mm each side), but the fingers stay on the surface
    np.testing.assert_allclose(q[20:40, XL] - q[20:40, XC], -g2d.RADIUS, atol=1e-9)
    np.testing.assert_allclose(q[20:40, XR] - q[20:40, XC], g2d.RADIUS, atol=1e-9)
    # the y command (0.1 m/s for l <= 39, then 0) is followed exactly
    expected_yg = 0.001 * np.minimum(np.arange(61), 39)
    np.testing.assert_allclose(q[:, YG], expected_yg, atol=1e-9)
    # after release (l > 39) the x command (-0.1, +0.1) is followed again
    np.testing.assert_allclose(np.diff(q[39:, XL]), -0.001, atol=1e-9)
    np.testing.assert_allclose(np.diff(q[39:, XR]), 0.001, atol=1e-9)


def test_miqp_cylinder_lifted_then_returns_to_table(paper_run):
    q, phi = paper_run["q"], paper_run["phi"]
    # on the table until the grasp, then lifted with the gripper: y_c = r + (y_g - 0.020) for steps 21-39
    np.testing.assert_allclose(q[:21, YC], g2d.RADIUS, atol=1e-9)
    np.testing.assert_allclose(q[20:40, YC], g2d.RADIUS + q[20:40, YG] - 0.020, atol=1e-9)
    assert q[39, YC] == pytest.approx(g2d.RADIUS + 0.019, abs=1e-9)
    # friction of the two fingers carries the weight while lifted (force balance, eq. 8)
    friction = paper_run["friction_force"]
    np.testing.assert_allclose(friction[20:39, 0] + friction[20:39, 1], WEIGHT, rtol=1e-6)
    np.testing.assert_allclose(paper_run["normal_force"][20:39, 2], 0.0, atol=1e-6)
    # after release the cylinder is back on the table at once (quasistatic: no free fall), table holds mg
    np.testing.assert_allclose(q[40:, YC], g2d.RADIUS, atol=1e-9)
    np.testing.assert_allclose(phi[40:, 2], 0.0, atol=1e-9)
    np.testing.assert_allclose(paper_run["normal_force"][39:, 2], WEIGHT, rtol=1e-6)
    np.testing.assert_allclose(q[:, XC], 0.0, atol=1e-9)


def test_miqp_delayed_force_bound_lags_one_step(model):
    run = g2d.simulate(miqp(model, delayed_force_bound=True))
    assert all(s is SolverStatus.CONVERGED for s in run["status"])
    q, force = run["q"], run["normal_force"]
    # step 21: phi_bar of step 20 is 0 -> no bound yet, fingers slide up without lifting
    np.testing.assert_allclose(force[20, :2], 0.0, atol=1e-6)
    assert q[21, YC] == pytest.approx(g2d.RADIUS, abs=1e-9)
    # from step 22 the bound of the previous step's phi_bar = -1 mm gives 10 N and the cylinder is lifted
    assert np.all(force[21:40, :2] >= SQUEEZE_FORCE - 1e-4)
    assert q[39, YC] == pytest.approx(g2d.RADIUS + 0.018, abs=1e-9)
    # release also lags one step: at step 40 the fingers still hold it, from step 41 it is on the table
    assert q[40, YC] == pytest.approx(g2d.RADIUS + 0.018, abs=1e-9)
    np.testing.assert_allclose(q[41:, YC], g2d.RADIUS, atol=1e-9)


def test_miqp_without_force_bound_does_not_lift(model):
    """K = 0 removes eq. 22: the least-impulse solution leaves the cylinder on the table (the LCP defect)."""
    run = g2d.simulate(miqp(model, hypothetical_penetration_stiffness=0.0), steps=30)
    np.testing.assert_allclose(run["q"][:, YC], g2d.RADIUS, atol=1e-9)
    np.testing.assert_allclose(run["normal_force"][:, :2], 0.0, atol=1e-6)


def test_miqp_big_m_raised_when_active(model):
    """A far too small big-M factor makes the bound active; the engine raises it, re-solves and reports."""
    eng = miqp(model, big_m_factor=0.01)
    run = g2d.simulate(eng, steps=25)
    assert all(s is SolverStatus.CONVERGED for s in run["status"])
    assert any("big-M" in m for m in run["message"])
    reference = g2d.simulate(miqp(model), steps=25)
    np.testing.assert_allclose(run["q"], reference["q"], atol=1e-8)


def test_miqp_warm_start_does_not_change_result(model):
    cold = g2d.simulate(miqp(model, warm_start=False), steps=23)
    warm = g2d.simulate(miqp(model), steps=23)
    np.testing.assert_allclose(warm["q"], cold["q"], atol=1e-9)


def _recorded_miqps(model, steps=g2d.STEPS, **options):
    """The MIQPs an engine with ``options`` hands its back-end during the 2-D run (copies, in order)."""
    from dataclasses import replace

    eng = miqp(model, **options)
    problems = []
    real = eng._solve

    def recording(p):
        problems.append(replace(p))
        return real(p)
    eng._solve = recording
    g2d.simulate(eng, steps=steps)
    return problems


def test_persistent_scip_model_solves_the_same_miqps(model):
    """The engine's SCIP back-end keeps one pyscipopt model and only changes coefficients, right-hand sides and
    bounds from step to step (ScipPersistent); on the 45 MIQPs of the 2-D run (contact is made at step 21, so
    distances, force bounds and big-M values change) it finds the optima of a fresh model per MIQP, also with
    the complete warm start (fixed_mode_start) from the previous step's mode."""
    from dataclasses import replace

    from contact_sim_ros.solvers.miqp import ScipPersistent, _solve_scip, fixed_mode_start
    problems = _recorded_miqps(model, steps=45, complete_warm_start=False, solver="scip")
    persistent = ScipPersistent()
    objectives = []
    for p in problems:
        fresh = _solve_scip(replace(p, params={"reuse_model": False}))
        start = fixed_mode_start(p, p.z_start) if p.z_start is not None else None
        reused = persistent(replace(p, x_start=start))
        assert fresh.status == reused.status == "optimal"
        assert reused.objective == pytest.approx(fresh.objective, rel=1e-4, abs=2e-4)
        objectives.append(fresh.objective)
    assert persistent._key is not None and np.ptp(objectives) > 1.0     # the MIQPs did change


def test_daqp_and_scip_find_the_same_optimal_objective(model):
    """The two open-source back-ends solve the same MIQPs (the 60 steps of the 2-D run, recorded, each without a
    start, i.e. from scratch) to the same optimum within the gap limits (absolute 1e-4 in the scaled objective),
    with integral binaries satisfying every row of eq. 23 to 1e-6."""
    from dataclasses import replace

    from contact_sim_ros.solvers.miqp import _solve_scip, solve_daqp
    problems = _recorded_miqps(model, solver="scip")
    assert len(problems) == 60
    solved = 0
    for p in problems:
        p = replace(p, z_start=None, x_start=None, params={})
        ref = _solve_scip(replace(p, params={"reuse_model": False}))
        d = solve_daqp(replace(p, params={"search_time_limit": 5.0}))
        assert ref.status == "optimal"
        if d.status == "error":              # DAQP stuck in a degenerate node: the engine's fallback takes over
            continue
        solved += 1
        assert d.status == "optimal"
        assert d.objective == pytest.approx(ref.objective, abs=2e-4)
        assert set(np.unique(d.z)) <= {0.0, 1.0}
        viol = p.A_ub @ d.x + p.B_ub @ d.z - p.b_ub
        assert viol.max() <= 1e-6 and np.abs(p.A_eq @ d.x - p.b_eq).max() <= 1e-6
    assert solved >= 45                      # 49 of 60 (DAQP 0.11.0, from scratch; with warm starts: all)


def test_failed_backend_falls_back_or_fails_cleanly(model):
    """A back-end failure is handled: with DAQP's search cut to nothing the engine re-solves with the fallback
    (SCIP), says so in the step message and follows the command as before; without a fallback the step reports
    FAILED with zero motion (the simulator keeps the state, nothing NaN)."""
    starved = {"search_time_limit": 1e-9, "iter_limit": 1}
    ref = g2d.simulate(miqp(model, warm_start=False), steps=3)
    run = g2d.simulate(miqp(model, warm_start=False, solver_parameters=starved), steps=3)
    np.testing.assert_allclose(run["q"], ref["q"], atol=1e-9)
    engine = miqp(model, warm_start=False, solver_parameters=starved)
    data = model.pin_model.createData()
    result = engine.step(g2d.step_inputs(model, data, 0.0, g2d.initial_q(), g2d.command_eq29(1)))
    assert result.stats.status is SolverStatus.CONVERGED
    assert "re-solved with scip" in result.stats.message and "t = 0 s" in result.stats.message
    engine = miqp(model, warm_start=False, solver_parameters=starved, fallback_solver=None)
    result = engine.step(g2d.step_inputs(model, data, 0.0, g2d.initial_q(), g2d.command_eq29(1)))
    assert result.stats.status is SolverStatus.FAILED and "DAQP" in result.stats.message
    np.testing.assert_array_equal(result.v_next, 0.0)
    assert np.all(np.isfinite(result.contact_impulse))


# ------------------------------------------------------------------ paper section V-A, LCP baseline (Fig. 6)

@pytest.mark.parametrize("command", [g2d.command_eq30, g2d.command_eq30_lifting])
def test_lcp_baseline_leaves_normal_force_zero_and_cylinder_on_table(model, command):
    run = g2d.simulate(make_engine("quasistatic_lcp", model, {"friction_directions": 2}), command=command)
    assert all(s is SolverStatus.CONVERGED for s in run["status"])
    np.testing.assert_allclose(run["normal_force"][:, :2], 0.0, atol=1e-9)
    np.testing.assert_allclose(run["q"][:, YC], g2d.RADIUS, atol=1e-12)
    np.testing.assert_allclose(run["phi"][20:, :2], 0.0, atol=1e-12)   # fingers touch from step 21 on
    np.testing.assert_allclose(run["normal_force"][:, 2], WEIGHT, rtol=1e-9)
    if command is g2d.command_eq30_lifting:   # the gripper does move up, the cylinder stays
        assert run["q"][-1, YG] == pytest.approx(0.060, abs=1e-12)


def test_lcp_baseline_infeasible_when_commanded_to_squeeze(model):
    """The commands of eq. 29 penetrate the cylinder after contact: the LCP has no solution (section IV-B)."""
    run = g2d.simulate(make_engine("quasistatic_lcp", model, {"friction_directions": 2}), steps=22)
    assert all(s is SolverStatus.CONVERGED for s in run["status"][:20])
    assert run["status"][20] is SolverStatus.INFEASIBLE
    assert "t = 0.2 s" in run["message"][20] and "penetrat" in run["message"][20]
    np.testing.assert_allclose(run["q"][21], run["q"][20])   # the state is kept, never garbage


# ------------------------------------------------------------------ 3-D: free-flyer box pushed on the floor

def _pusher_box_model(mass=2.0, half=0.05):
    """A free-flyer cube (half size `half`) on the floor z = 0 and a pusher on a prismatic x joint."""
    m = pin.Model()
    m.gravity.linear = np.array([0.0, 0.0, -9.81])
    jp = m.addJoint(0, pin.JointModelPX(), pin.SE3.Identity(), "pusher_x")
    m.appendBodyToJoint(jp, pin.Inertia(0.5, np.zeros(3), 1e-3 * np.eye(3)), pin.SE3.Identity())
    jb = m.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "box")
    m.appendBodyToJoint(jb, pin.Inertia.FromBox(mass, 2 * half, 2 * half, 2 * half), pin.SE3.Identity())
    ro = lambda a: np.asarray(a)  # noqa: E731
    nv = m.nv
    return MultibodyModel(
        pin_model=m, collision_model=pin.GeometryModel(), source="<pusher + box>", joint_names=("pusher_x",),
        joint_q_index=ro([0]), joint_v_index=ro([0]), position_lower=ro([-1.0]), position_upper=ro([1.0]),
        velocity_limit=ro([1.0]), effort_limit=ro([100.0]), mimic_joints=(), joint_damping=np.zeros(nv),
        joint_friction=np.zeros(nv), actuated=np.array([True] + [False] * 6),
        free_bodies=(FreeBody("box", jb, "box", slice(1, 8), slice(1, 7), mass),),
        tree_velocity_slices=(slice(0, 1), slice(1, 7)), geometry_names=("pusher", "box", "floor"),
        geometry_parent_joint=ro([jp, jb, 0]), geometry_stiffness=np.full(3, 1e5),
        geometry_dissipation=np.zeros(3), geometry_friction=np.full(3, 0.4), geometry_restitution=np.zeros(3),
        collision_pairs=np.zeros((0, 2), dtype=int), gravity=np.array([0.0, 0.0, -9.81])), jb, jp


def _box_contacts(model, data, q, jb, jp, half, mu):
    """Four floor contacts at the cube's bottom corners (friction mu) + a frictionless pusher touching the -x face
    centre (with pusher friction the split of the weight between floor and pusher would be indeterminate)."""
    pm = model.pin_model
    pin.forwardKinematics(pm, data, q)
    pin.computeJointJacobians(pm, data, q)
    oMb = data.oMi[jb]
    corners = [np.array([sx * half, sy * half, -half]) for sx in (-1, 1) for sy in (-1, 1)]
    points, normals, rot, jac, phi, ga = [], [], [], [], [], []
    for c in corners:
        p = oMb.act(c)
        Jb = pin.getFrameJacobian(pm, data, jb, pin.SE3(np.eye(3), c), pin.LOCAL_WORLD_ALIGNED)[:3]
        R = np.eye(3)                                          # t1 = x, t2 = y, n = z (floor A -> box B)
        points.append(p), normals.append(R[:, 2]), rot.append(R), jac.append(R.T @ Jb), phi.append(p[2])
        ga.append(2)
    face = np.array([-half, 0.0, 0.0])
    p_box = oMb.act(face)
    Jb = pin.getFrameJacobian(pm, data, jb, pin.SE3(np.eye(3), face), pin.LOCAL_WORLD_ALIGNED)[:3]
    Jp = np.zeros((3, pm.nv))
    Jp[0, 0] = 1.0
    R = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])   # t1 = y, t2 = z, n = x (pusher -> box)
    points.append(p_box), normals.append(R[:, 2]), rot.append(R), jac.append(R.T @ (Jb - Jp))
    phi.append(p_box[0] - q[0]), ga.append(0)
    n = len(points)
    return ContactSet(np.array(ga), np.full(n, 1), np.array([0] * 4 + [jp]), np.full(n, jb), np.array(points),
                      np.array(normals), np.array(phi), np.array(rot), np.concatenate(jac), np.zeros(3 * n),
                      np.full(n, 1e5), np.zeros(n), np.array([mu] * 4 + [0.0]), np.zeros(n))


@pytest.mark.parametrize("engine_name", ["quasistatic_miqp", "quasistatic_lcp"])
def test_3d_pushed_box_slides_with_coulomb_force(engine_name):
    """Quasistatic pushing: the box follows the pusher, the pusher force is mu m g, the floor carries m g.
    Free-flyer (quaternion) state, 4 friction directions aligned with the push, v = dq / h in the LOCAL frame."""
    mass, half, mu, h, speed = 2.0, 0.05, 0.4, 0.01, 0.05
    model, jb, jp = _pusher_box_model(mass, half)
    data = model.pin_model.createData()
    engine = make_engine(engine_name, model, {"friction_directions": 4})
    q = pin.neutral(model.pin_model)
    q[0] = -half                      # pusher touching the -x face
    q[1:4] = [0.0, 0.0, half]         # box resting on the floor
    for k in range(10):
        grav = pin.computeGeneralizedGravity(model.pin_model, data, q).copy()
        act = Actuation.zeros(model.nv)
        act.velocity_target[0] = speed
        inputs = StepInputs(k * h, h, q.copy(), np.zeros(model.nv), pin.crba(model.pin_model, data, q).copy(),
                            -grav, grav, np.zeros(model.nv), act, _box_contacts(model, data, q, jb, jp, half, mu))
        result = engine.step(inputs)
        assert result.stats.status is SolverStatus.CONVERGED, result.stats.message
        impulse = result.contact_impulse
        assert impulse[:4, 2].sum() / h == pytest.approx(mass * 9.81, rel=1e-6)       # floor holds m g
        assert impulse[4, 2] / h == pytest.approx(mu * mass * 9.81, rel=1e-6)        # push = Coulomb force
        assert result.actuation_force[0] == pytest.approx(mu * mass * 9.81, rel=1e-6)  # motor holds the push
        q = pin.integrate(model.pin_model, q, h * result.v_next)
    np.testing.assert_allclose(q[0], -half + 10 * h * speed, atol=1e-9)
    np.testing.assert_allclose(q[1:4], [10 * h * speed, 0.0, half], atol=1e-9)
    np.testing.assert_allclose(q[4:8], [0.0, 0.0, 0.0, 1.0], atol=1e-9)          # no rotation


# ------------------------------------------------------------------ contact reduction (3-D grasps, section V-B)

def _skew(p):
    return np.array([[0.0, -p[2], p[1]], [p[2], 0.0, -p[0]], [-p[1], p[0], 0.0]])


def _rigid_contact_set():
    """A finger pad patch (robot link, joint 1, against an object, joint 2: 4 corners of a 2 x 4 cm pad with
    different distances) and an object-table patch (world, joint 0: 8 points on a 3 cm rim). Jacobians are the
    exact rigid-body ones, v = (v_robot (6), v_object (6)) world-aligned twists: J_world(p) = [I, -[p]x] per body."""
    rng = np.random.default_rng(3)
    pad = np.array([[0.5, 0.03 + dx, z] for z in (0.05, 0.09) for dx in (0.0, 0.0)]) + \
        np.array([[-0.01, 0, 0], [0.01, 0, 0], [-0.01, 0, 0], [0.01, 0, 0]])
    rim = np.array([[0.5 + 0.03 * np.cos(a), 0.03 * np.sin(a), 0.0] for a in np.linspace(0, 2 * np.pi, 9)[:-1]])
    points = np.vstack([pad, rim])
    n = points.shape[0]
    R_pad = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])   # n = -y (finger at +y -> object)
    rotation = np.array([R_pad] * 4 + [np.diag([1.0, -1.0, -1.0])] * 8)     # table normal: object -> world
    joint_a = np.array([1] * 4 + [2] * 8)
    joint_b = np.array([2] * 4 + [0] * 8)
    jac = []
    for p, R, a, b in zip(points, rotation, joint_a, joint_b):
        Jw = np.zeros((3, 12))
        for joint, sign in ((a, -1.0), (b, 1.0)):
            if joint:
                Jw[:, 6 * (joint - 1):6 * joint] += sign * np.hstack([np.eye(3), -_skew(p)])
        jac.append(R.T @ Jw)
    phi = np.concatenate([[0.0, 0.0016, 0.0016, 0.0], rng.uniform(0.0, 1e-4, 8)])
    geometry_a = np.array([5] * 4 + [7] * 8)
    geometry_b = np.array([7] * 4 + [9] * 8)
    cs = ContactSet(geometry_a, geometry_b, joint_a, joint_b, points, rotation[:, :, 2], phi, rotation,
                    np.concatenate(jac), np.zeros(3 * n), np.full(n, 5e4), np.zeros(n), np.full(n, 0.5), np.zeros(n))
    return cs, _skew


def test_contact_reduction_keeps_wrench_and_rigid_jacobian():
    """One pad patch -> 2 points (its halves' centroids) with the exact Jacobian of those centroids and the
    pair's closest distance; 8 rim points -> 4 spread support points; impulses mapped back give the same
    generalized impulse (same force and moment on every body)."""
    from contact_sim_ros.engines.quasistatic_miqp import reduce_contact_patches
    cs, skew = _rigid_contact_set()
    red = reduce_contact_patches(cs, free_joints=np.array([2]), max_support_points=4, grasp_points=2)
    r = red.contacts
    assert r.size == 6
    table = r.joint_b == 0
    assert table.sum() == 4 and (~table).sum() == 2
    # support points: 4 of the rim points, spread (pairwise >= the side of the inscribed square, 0.03 sqrt 2)
    rim = r.point[table]
    d = np.linalg.norm(rim[:, None] - rim[None], axis=2) + np.eye(4)
    assert d.min() >= 0.03 * np.sqrt(2) - 1e-9
    # grasp points: centroids of the pad's halves along its long (z) axis, with the pair's closest distance
    grasp = np.sort(r.point[~table][:, 2])
    np.testing.assert_allclose(grasp, [0.05, 0.09], atol=1e-12)
    np.testing.assert_allclose(r.signed_distance[~table], 0.0, atol=1e-15)
    J = r.jacobian.reshape(-1, 3, 12)
    for i in np.flatnonzero(~table):
        p = r.point[i]
        Jw = np.hstack([-np.eye(3), skew(p), np.eye(3), -skew(p)])
        np.testing.assert_allclose(J[i], r.rotation[i].T @ Jw, atol=1e-12)
    # wrench equivalence: J^T gamma over the query's points == over the reduced points
    gamma = np.random.default_rng(0).normal(size=(6, 3))
    back = red.expand_impulse(cs, gamma)
    np.testing.assert_allclose(cs.jacobian.T @ back.reshape(-1), r.jacobian.T @ gamma.reshape(-1), atol=1e-12)
    # dropped rim points carry no impulse
    assert np.count_nonzero(np.abs(back[4:]).sum(axis=1) > 0) == 4
    red1 = reduce_contact_patches(cs, free_joints=np.array([2]), grasp_points=1)
    assert red1.contacts.size == 5
    np.testing.assert_allclose(red1.contacts.point[red1.contacts.joint_b != 0], [[0.5, 0.03, 0.07]], atol=1e-12)


# ------------------------------------------------------------------ 3-D: iiwa + WSG lifts the cylinder (section V-B)

def _run_module():
    spec = importlib.util.spec_from_file_location("quasistatic_run", _path.parent / "run.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


# SCIP's lift (~60 s of CPU per object) runs with FULL=1: make test covers SCIP's MIQPs by
# test_persistent_scip_model_solves_the_same_miqps and test_daqp_and_scip_find_the_same_optimal_objective
@pytest.mark.parametrize("solver, scale", [("daqp", 1.0), pytest.param("scip", 0.25, marks=pytest.mark.slow)])
@pytest.mark.parametrize("obj", ["cylinder", "box"])
def test_3d_iiwa_wsg_lifts_object(obj, solver, scale):
    """Section V-B with the open-source back-ends, for the cylinder and the box: with DAQP (the default) the whole
    6 s task (1200 steps of 5 ms: descend, close, lift 10 cm, move (-9, +9) cm while turning 45 deg, hold), with
    SCIP its first 125 steps at time scale 0.25 (descend, close, lift). No step fails, the object rises and turns
    with the TCP (the grasp does not slip) and the grasp has at most 8 contacts (2 per finger pad + 4 table
    points: the engine's contact reduction).
    The shortened run allows one step of lag: at time scale 0.25 the first lift step moves the TCP 2 mm, and there
    eq. 23 (with the delayed force bound) admits the fingers sliding 2 mm up the object while it stays on the
    table, with an objective within the optimality gap of lifting it (even lower: eps ||dq_u||^2); which of the
    tied modes a back-end returns depends on its start. From the next step on the object must follow."""
    bench = _run_module()
    n_steps = 125 if scale < 1.0 else None
    rec = bench.run_3d(obj, solver, scale, time_limit_s=5.0, n_steps=n_steps)
    assert rec["ok"].all(), f"failed steps at t = {rec['t'][~rec['ok']]}"
    assert rec["time_limited"].sum() == 0
    assert rec["contacts"].max() <= 8
    if solver == "daqp":      # the start at lift-off (previous mode with the table contacts separated) is needed
        assert not rec["fallback"].any(), f"SCIP fallback at t = {rec['t'][rec['fallback']]}"
    out = bench.outcome(rec, scale)
    assert out["lift_tcp_mm"] == pytest.approx(100.0, abs=1.0)           # the arm follows the lift command
    if n_steps is not None:
        i0, i1 = (int(np.searchsorted(rec["t"], t * scale)) for t in (1.5, 2.5))
        dz_obj, dz_tcp = (np.diff([p.translation[2] for p in rec[k][i0:i1]]) for k in ("obj", "tcp"))
        lag = np.abs(dz_obj - dz_tcp) > 5e-5                             # m per step
        assert not lag[1:].any(), np.flatnonzero(lag)                    # at most the first lift step lags
        assert out["lift_obj_mm"] >= out["lift_tcp_mm"] - 2.5
        return
    assert out["lift_obj_mm"] == pytest.approx(out["lift_tcp_mm"], abs=0.5)
    drift_mm, drift_deg = out["drift"]
    assert drift_mm < 0.5 and drift_deg < 0.5
    assert out["yaw_tcp_deg"] == pytest.approx(45.0, abs=0.5)              # the whole task: moved and turned
    assert out["yaw_obj_deg"] == pytest.approx(out["yaw_tcp_deg"], abs=0.5)
    assert out["lift_end_mm"] == pytest.approx(out["lift_obj_mm"], abs=0.5)


def test_3d_fingers_touching_as_the_lift_starts_needs_no_fallback():
    """The paper's 12 s trajectory (time scale 2) with the box: the fingers touch the box at t = 3.005 s, as the
    lift starts. The previous step's mode (fingers separated) then contradicts the delayed force bound, and so
    does its variant with the table contacts separated; the start "fingers closed and sticking" plus "table
    separated" (QuasistaticMIQPEngine._best_start) lets DAQP prove the step at once (without it: two steps
    re-solved by the SCIP fallback, ~1 s each, one time-limited)."""
    bench = _run_module()
    rec = bench.run_3d("box", "daqp", 2.0, time_limit_s=5.0, n_steps=640)     # to t = 3.2 s
    assert rec["ok"].all() and rec["time_limited"].sum() == 0
    assert not rec["fallback"].any(), f"SCIP fallback at t = {rec['t'][rec['fallback']]}"
    z = np.array([p.translation[2] for p in rec["obj"]])
    z_tcp = np.array([p.translation[2] for p in rec["tcp"]])
    assert z[-1] - z[0] > 0.005                                                # lifted 10 mm by t = 3.2 s
    # carried with the TCP from t = 3.05 s on (in the first lift step, 0.25 mm, the object stays: the fingers
    # have only just touched)
    assert (z[-1] - z[-31]) == pytest.approx(z_tcp[-1] - z_tcp[-31], abs=1e-5)


# ------------------------------------------------------------------ failures and configuration

def test_unsupported_object_is_reported_infeasible_with_time(model):
    """With only one finger contact the cylinder cannot be in force balance: a non-OK status naming the time and
    the likely cause, and a zero motion (the simulator keeps the state)."""
    engine = miqp(model)
    data = model.pin_model.createData()
    inputs = g2d.step_inputs(model, data, 0.37, g2d.initial_q(), g2d.command_eq29(1))
    c = inputs.contacts
    keep = np.array([0])        # only the left finger: no force balance in x and y together
    rows = np.concatenate([np.arange(3 * i, 3 * i + 3) for i in keep])
    inputs.contacts = ContactSet(c.geometry_a[keep], c.geometry_b[keep], c.joint_a[keep], c.joint_b[keep],
                                 c.point[keep], c.normal[keep], c.signed_distance[keep], c.rotation[keep],
                                 c.jacobian[rows], c.velocity_bias[rows], c.stiffness[keep],
                                 c.dissipation[keep], c.friction[keep], c.restitution[keep])
    result = engine.step(inputs)
    assert result.stats.status is SolverStatus.INFEASIBLE
    assert "t = 0.37 s" in result.stats.message and "contact margin" in result.stats.message
    np.testing.assert_array_equal(result.v_next, 0.0)
    assert np.all(np.isfinite(result.contact_impulse))


def test_commanded_increment_rule(model):
    """dq_a_bar = position_error (clipped to velocity_limit h) where kp > 0, else h velocity_target."""
    engine = miqp(model)
    act = Actuation.zeros(model.nv)
    act.kp[XL] = 100.0
    act.position_error[XL] = 0.004          # 4 mm in one step: below 1 m/s x 0.01 s
    act.kp[XR] = 100.0
    act.position_error[XR] = -0.5           # clipped to -1 m/s x 0.01 s
    act.velocity_target[YG] = 0.3
    act.velocity_target[XC] = 7.0           # unactuated: ignored
    inputs = StepInputs(0.0, 0.01, g2d.initial_q(), np.zeros(5), np.eye(5), np.zeros(5), np.zeros(5),
                        np.zeros(5), act, ContactSet.empty(5))
    np.testing.assert_allclose(engine.commanded_increment(inputs), [0.0, 0.0, 0.003, 0.004, -0.01])


def test_bad_options_raise_config_errors(model):
    with pytest.raises(ConfigError, match="valid solvers: .*daqp.*scip"):
        miqp(model, solver="highs")
    with pytest.raises(ConfigError, match="fallback_solver"):
        miqp(model, fallback_solver="highs")
    with pytest.raises(ConfigError, match="even integer"):
        miqp(model, friction_directions=3)
    with pytest.raises(ConfigError, match="valid options"):
        make_engine("quasistatic_lcp", model, {"stiffness": 1.0})


# ------------------------------------------------------------------ through the Simulator (iiwa + WSG scene)

def test_simulator_velocity_and_position_commands_move_the_arm_by_h_per_step():
    """With the quasistatic engine, joint commands are displacements per step: a velocity command moves the joint
    by h v, a position target is reached in one step when within h * velocity_limit, else the joint moves by
    h * velocity_limit; the cylinder resting on the table stays in force balance (table holds m g)."""
    from contact_sim_ros.sim.simulator import Simulator

    scene = pathlib.Path(__file__).resolve().parents[1] / "scenes" / "quasistatic_iiwa_cylinder.yaml"
    h = 0.005
    sim = Simulator(str(scene), engine="quasistatic_miqp", time_step=h)
    m = sim.model
    j1, j2 = m.joint_index("iiwa_joint_1"), m.joint_index("iiwa_joint_2")
    q1, q2 = m.joint_q_index[j1], m.joint_q_index[j2]
    cylinder_z = sim.body_pose("cylinder").translation[2]
    start = sim.q.copy()
    sim.set_joint_targets(velocities={"iiwa_joint_1": 0.2})
    for _ in range(3):
        assert sim.step().ok
    assert sim.q[q1] - start[q1] == pytest.approx(3 * h * 0.2, abs=1e-9)
    target = sim.q[q2] + 0.004                                   # < h * 1.48 rad/s
    sim.set_joint_targets(positions={"iiwa_joint_2": target})
    assert sim.step().ok
    assert sim.q[q2] == pytest.approx(target, abs=1e-9)
    far = sim.q[q2] + 0.5                                        # clipped to h * velocity_limit per step
    sim.set_joint_targets(positions={"iiwa_joint_2": far})
    before = sim.q[q2]
    assert sim.step().ok
    assert sim.q[q2] - before == pytest.approx(h * m.velocity_limit[j2], abs=1e-9)
    assert sim.body_pose("cylinder").translation[2] == pytest.approx(cylinder_z, abs=1e-9)
    impulse = sim.last_result.contact_impulse
    assert impulse[:, 2].sum() / h == pytest.approx(0.3 * 9.81, rel=1e-6)


@pytest.mark.parametrize("engine", ["quasistatic_miqp", "quasistatic_lcp"])
def test_pure_effort_commands_are_rejected_by_the_quasistatic_engines(engine):
    """The quasistatic engines ignore efforts (velocity-commanded): a pure effort command is a ConfigError naming
    the engine and the joints, and changes nothing (the previous command still acts); an effort as
    feed-forward of a position or velocity command is accepted; scripted pure efforts fail at construction."""
    from contact_sim_ros.engines import engine_class
    from contact_sim_ros.sim.simulator import Simulator

    assert not engine_class(engine).accepts_effort_commands
    assert all(engine_class(name).accepts_effort_commands for name in engine_names()
               if engine_class(name).dynamic)
    scene = pathlib.Path(__file__).resolve().parents[1] / "scenes" / "quasistatic_iiwa_cylinder.yaml"
    h = 0.005
    sim = Simulator(str(scene), engine=engine, time_step=h)
    q1 = sim.model.joint_q_index[sim.model.joint_index("iiwa_joint_1")]
    sim.set_joint_targets(velocities={"iiwa_joint_1": 0.2})
    with pytest.raises(ConfigError, match=rf"engine '{engine}' ignores effort commands.*"
                                          r"\['iiwa_joint_1', 'iiwa_joint_2'\] rejected"):
        sim.set_joint_targets(efforts={"iiwa_joint_1": 5.0, "iiwa_joint_2": 1.0})
    with pytest.raises(ConfigError, match=r"\['iiwa_joint_2'\] rejected"):
        sim.set_joint_targets(velocities={"iiwa_joint_1": 0.2}, efforts={"iiwa_joint_2": 1.0})
    start = sim.q[q1]
    assert sim.step().ok
    assert sim.q[q1] - start == pytest.approx(h * 0.2, abs=1e-9)          # the velocity command still acts
    sim.set_joint_targets(positions={"iiwa_joint_1": start}, efforts={"iiwa_joint_1": 5.0})   # feed-forward: ok
    data = {"robot": "iiwa_wsg", "inputs": {"joint_targets": [{"joint": "iiwa_joint_1", "effort": 1.0}]}}
    with pytest.raises(ConfigError, match=rf"scripted inputs of the scene: engine '{engine}' ignores effort"):
        Simulator(data, engine=engine, time_step=h)
    Simulator(data, engine="semi_implicit", time_step=h)                  # dynamic engines take efforts
