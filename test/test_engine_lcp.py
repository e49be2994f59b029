"""Minimal-coordinate LCP engine (Jain et al. 2012): restitution, friction on an incline, bilateral
constraints (mixed LCP, eq. 34), the operational-space compliance routes, failure reporting."""

import numpy as np
import pinocchio as pin
import pytest

from contact_sim_ros.engines import engine_names, make_engine
from contact_sim_ros.engines.base import SolverStatus
from contact_sim_ros.engines.lcp_minimal import (ComplianceColumns, ContactLCP, ImpulseStepper, LCPMinimalEngine,
                                                 friction_basis)
from contact_sim_ros.errors import ConfigError

from lcp_harness import FreeBodyScene

G = 9.81


def test_registered_as_lcp_minimal():
    assert "lcp_minimal" in engine_names()


def drop_ball(e, h=1.0, r=0.1, dt=1e-3, duration=None):
    """Drop a 1 kg sphere from bottom height h onto z = 0; return heights of the sphere's bottom."""
    scene = FreeBodyScene(LCPMinimalEngine, [[0.0, 0.0, 0.0]], 1.0, np.eye(3) * 0.4 * r * r, [0, 0, -G],
                          0.5, e, sphere_radius=r)
    scene.q[2] = h + r
    steps = int((duration or (np.sqrt(2 * h / G) * (1 + 2 * e) + 0.1)) / dt)
    z = np.empty(steps)
    for k in range(steps):
        scene.step(dt)
        z[k] = scene.q[2] - r
    return z, scene


@pytest.mark.parametrize("e", [0.5, 0.8])
def test_ball_bounces_to_e_squared_of_drop_height(e):
    h = 1.0
    z, _ = drop_ball(e, h)
    impact = int(np.argmin(z[: int(np.sqrt(2 * h / G) / 1e-3) + 20]))
    assert z[impact] < 1e-3                      # it reached the floor ...
    assert z.min() > -1e-6                       # ... without penetrating
    apex = z[impact:].max()
    assert abs(apex - e * e * h) / (e * e * h) < 0.02


def test_ball_without_restitution_does_not_bounce():
    z, scene = drop_ball(0.0, 1.0, duration=0.8)
    impact = int(np.argmax(z < 1e-4))
    assert z[impact:].max() < 1e-4
    assert abs(scene.v[2]) < 1e-9
    # resting: the normal impulse carries the weight, m g dt
    np.testing.assert_allclose(scene.last.contact_impulse[:, 2].sum(), 1.0 * G * 1e-3, rtol=1e-9)


def incline_block(theta, mu, psi=0.0, n_dir=8, steps=300, dt=1e-3):
    """A 2 kg cube (0.2 m) on a plane tilted by theta: gravity tilted instead of the plane; psi rotates the
    downhill direction in the tangent plane relative to the contact frame's t1."""
    m, a = 2.0, 0.1
    corners = [[sx * a, sy * a, -a] for sx in (1, -1) for sy in (1, -1)]
    grav = G * np.array([np.sin(theta) * np.cos(psi), np.sin(theta) * np.sin(psi), -np.cos(theta)])
    scene = FreeBodyScene(LCPMinimalEngine, corners, m, np.eye(3) * m * (2 * a) ** 2 / 6, grav, mu, 0.0,
                          options={"friction_directions": n_dir})
    scene.q[2] = a
    velocities = np.empty((steps, 3))
    for k in range(steps):
        scene.step(dt)
        velocities[k] = scene.world_velocity()
    accel = (velocities[-1] - velocities[steps // 3]) / ((steps - 1 - steps // 3) * dt)
    return accel, scene


def test_block_sticks_when_tan_angle_below_mu():
    mu = 0.5
    theta = np.arctan(mu) * 0.9
    accel, scene = incline_block(theta, mu)
    assert np.linalg.norm(scene.v) < 1e-9
    assert abs(scene.q[2] - 0.1) < 1e-9
    # friction impulse balances the downhill weight m g sin(theta) dt
    np.testing.assert_allclose(-scene.last.contact_impulse[:, 0].sum(), 2.0 * G * np.sin(theta) * 1e-3, rtol=1e-9)


def test_block_slides_with_coulomb_acceleration_along_a_cone_direction():
    mu = 0.5
    theta = np.arctan(mu) * 1.3
    accel, scene = incline_block(theta, mu)
    expected = G * (np.sin(theta) - mu * np.cos(theta))
    np.testing.assert_allclose(accel[0], expected, rtol=1e-6)
    assert abs(accel[1]) < 1e-9 and abs(accel[2]) < 1e-9


@pytest.mark.parametrize("n_dir", [8, 16])
def test_polyhedral_cone_error_is_bounded_by_cos_pi_over_nf(n_dir):
    """Sliding midway between two friction directions is the worst case of the inscribed polygon: the
    friction magnitude is mu N cos(pi / n_f), so the acceleration is g (sin - mu cos * cos(pi / n_f))."""
    mu = 0.5
    theta = np.arctan(mu) * 1.3
    accel, _ = incline_block(theta, mu, psi=np.pi / n_dir, n_dir=n_dir)
    exact = G * (np.sin(theta) - mu * np.cos(theta))
    worst = G * (np.sin(theta) - mu * np.cos(theta) * np.cos(np.pi / n_dir))
    speed_accel = np.linalg.norm(accel[:2])
    assert exact < speed_accel
    np.testing.assert_allclose(speed_accel, worst, rtol=1e-6)


def test_friction_basis_is_symmetric_unit_directions():
    D = friction_basis(8)
    np.testing.assert_allclose(np.linalg.norm(D, axis=0), 1.0)
    np.testing.assert_allclose(D[:, 1:].sum(axis=1), 0.0, atol=1e-14)   # each direction has its opposite


def test_bilateral_coupling_mixed_lcp_carries_both_weights():
    """Eq. 34: two point masses on vertical sliders (z1, z2) coupled by the bilateral constraint
    v1 - v2 = 0 (a closed loop / coupled fingers); only mass 1 touches the floor. At rest the floor's normal
    impulse carries (m1 + m2) g dt and the coupling carries m2 g dt."""
    m1, m2, dt = 1.0, 3.0, 1e-3
    M = np.diag([m1, m2])
    J = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]])     # contact frame rows t1, t2, n of mass 1
    Jb = np.array([[1.0, -1.0]])
    stepper = ImpulseStepper(n_directions=4)
    v = np.zeros(2)
    for _ in range(5):
        v_free = v + dt * np.array([-G, -G])
        X = np.linalg.solve(M, np.vstack([J, Jb]).T)
        out = stepper.step(dt, v, v_free, X, J, np.zeros(3), np.array([0.0]), np.array([0.5]), np.array([0.0]),
                           Jb=Jb)
        assert out.status.ok
        v = out.v_next
    np.testing.assert_allclose(v, 0.0, atol=1e-12)
    np.testing.assert_allclose(out.impulse[0, 2], (m1 + m2) * G * dt, rtol=1e-9)
    np.testing.assert_allclose(abs(out.bilateral[0]), m2 * G * dt, rtol=1e-9)


@pytest.mark.parametrize("bilateral", ["schur", "split"])
def test_compiled_contact_lcp_assembly_matches_the_numpy_blocks(bilateral):
    """ContactLCP.solve_rows with the compiled assembly (default) and with the numpy reference (block extraction,
    D^T W D, eq. 28 template) give the same LCP solution on random operational-space data: contact subsets,
    normal-row gap terms, with and without bilateral rows (Schur-eliminated or split)."""
    rng = np.random.default_rng(3)
    fast, ref = ContactLCP(4, bilateral=bilateral), ContactLCP(4, bilateral=bilateral, kernel="numpy")
    assert fast.kernel == "numba"
    pivots = 0
    for trial in range(80):
        N = int(rng.integers(1, 7))
        nb = int(rng.integers(1, 5)) if trial % 2 else 0
        A = rng.normal(size=(3 * N + nb, 3 * N + nb + 2))
        W = A @ A.T
        c = rng.normal(size=3 * N)
        mu = rng.uniform(0.1, 1.0, N)
        sel = np.flatnonzero(rng.random(N) < 0.7)
        gap = rng.normal(size=sel.size) if trial % 3 else None
        c_b = rng.normal(size=nb) if nb else None
        a = fast.solve_rows(W, sel, c, mu, nb, c_b, gap)
        b = ref.solve_rows(W, sel, c, mu, nb, c_b, gap)
        assert (a.status, a.pivots) == (b.status, b.pivots)
        pivots += a.pivots
        scale = max(1.0, np.abs(b.impulse).max(initial=0.0), np.abs(b.bilateral).max(initial=0.0))
        np.testing.assert_allclose(a.impulse, b.impulse, atol=1e-9 * scale)
        np.testing.assert_allclose(a.bilateral, b.bilateral, atol=1e-9 * scale)
        np.testing.assert_allclose(a.sliding_speed, b.sliding_speed, atol=1e-9 * scale)
    assert pivots > 80


def test_stepper_forms_compliance_columns_only_when_an_impulse_is_needed():
    """X may be a callable: the stepper calls it only when a contact touches or collides within the step, and
    the step is the same as with the precomputed X."""
    M = np.diag([2.0, 3.0])
    J = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]])      # contact frame rows t1, t2, n
    X = np.linalg.solve(M, J.T)
    calls = []

    def X_lazy():
        calls.append(1)
        return X

    stepper = ImpulseStepper(n_directions=4)
    v, dt = np.array([0.1, -0.5]), 1e-3
    v_free = v + dt * np.array([0.0, -G])
    for phi, touched in ((0.01, False), (4e-4, True), (0.0, True)):   # separated, colliding in-step, touching
        a, b = (stepper.step(dt, v, v_free, x, J, np.zeros(3), np.array([phi]), np.array([0.5]), np.array([0.5]))
                for x in (X_lazy, X))
        assert len(calls) == int(touched)
        calls.clear()
        np.testing.assert_array_equal(a.v_next, b.v_next)
        np.testing.assert_array_equal(a.impulse, b.impulse)
        assert a.impact_fraction == b.impact_fraction
        if not touched:
            np.testing.assert_array_equal(a.v_next, v + (v_free - v))
        else:
            assert a.impulse[0, 2] > 0.0


def test_compliance_routes_agree_with_dense_solve():
    model = pin.buildSampleModelManipulator()
    data = model.createData()
    q = pin.randomConfiguration(model)
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    rng = np.random.default_rng(0)
    rhs = rng.normal(size=(model.nv, 7))
    extra = rng.uniform(0.0, 0.5, model.nv)
    expected = np.linalg.solve(M + np.diag(extra), rhs)
    for method in ("aba", "cholesky", "minverse"):
        X = ComplianceColumns(model, method, has_mimic=False).compute(q, M, extra, rhs)
        np.testing.assert_allclose(X, expected, rtol=1e-9, atol=1e-12, err_msg=method)


def test_auto_compliance_route_is_minverse_for_small_and_aba_for_large_trees():
    """'auto' picks the route the lambda benchmark measured faster: computeMinverse up to 256 dofs, the O(nv)
    articulated-body columns above; both solve M_hat X = J^T on a 300-link chain."""
    assert ComplianceColumns(pin.buildSampleModelManipulator(), "auto", has_mimic=False).method == "minverse"
    chain, q, _, _ = _pendulum().build_minimal(300)
    auto = ComplianceColumns(chain, "auto", has_mimic=False)
    assert auto.method == "aba"
    data = chain.createData()
    M = pin.crba(chain, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    rhs = np.random.default_rng(1).normal(size=(300, 3))
    extra = np.full(300, 1e-3)
    for X in (auto.compute(q, M, extra, rhs),
              ComplianceColumns(chain, "minverse", has_mimic=False).compute(q, M, extra, rhs)):
        # (M + diag(extra)) X = rhs, to round-off relative to the (ill-conditioned) chain's mass matrix
        residual = (M + np.diag(extra)) @ X - rhs
        assert np.linalg.norm(residual) < 1e-10 * np.linalg.norm(M) * np.linalg.norm(X)


def test_mimic_models_refuse_aba_and_fall_back_to_cholesky():
    model = pin.buildSampleModelManipulator()
    assert ComplianceColumns(model, "auto", has_mimic=True).method == "cholesky"
    with pytest.raises(ConfigError, match="mimic"):
        ComplianceColumns(model, "aba", has_mimic=True)


def test_bad_options_name_the_option_and_choices():
    scene = FreeBodyScene(LCPMinimalEngine, [[0, 0, 0]], 1.0, np.eye(3), [0, 0, -G], 0.5, 0.0)
    with pytest.raises(ConfigError, match="valid methods: auto, aba, cholesky, minverse"):
        make_engine("lcp_minimal", scene.model, {"delassus": "qr"})
    with pytest.raises(ConfigError, match="friction_directions"):
        make_engine("lcp_minimal", scene.model, {"friction_directions": 2})
    with pytest.raises(ConfigError, match="valid options"):
        make_engine("lcp_minimal", scene.model, {"frictiondirections": 8})


def test_lcp_failure_is_reported_with_sim_time_not_nan():
    """A pivot limit of 1 cannot solve the 4-corner resting LCP: the engine must say so (status, time)."""
    m, a = 2.0, 0.1
    corners = [[sx * a, sy * a, -a] for sx in (1, -1) for sy in (1, -1)]
    scene = FreeBodyScene(LCPMinimalEngine, corners, m, np.eye(3), [0, 0, -G], 0.5, 0.0,
                          options={"max_pivots": 1})
    scene.q[2] = a
    scene.t = 1.25
    with pytest.raises(AssertionError, match=r"t = 1\.250000 s"):
        scene.step(1e-3)


def test_failed_step_returns_finite_velocity_and_non_ok_status():
    m, a = 2.0, 0.1
    corners = [[sx * a, sy * a, -a] for sx in (1, -1) for sy in (1, -1)]
    scene = FreeBodyScene(LCPMinimalEngine, corners, m, np.eye(3), [0, 0, -G], 0.5, 0.0,
                          options={"max_pivots": 1})
    scene.q[2] = a
    contacts = scene.contacts()
    from contact_sim_ros.engines.base import Actuation, StepInputs
    Mm = pin.crba(scene.pin_model, scene.data, scene.q)
    Mm = np.triu(Mm) + np.triu(Mm, 1).T
    g = pin.computeGeneralizedGravity(scene.pin_model, scene.data, scene.q)
    result = scene.engine.step(StepInputs(0.5, 1e-3, scene.q, scene.v, Mm, -g, g, np.zeros(6),
                                          Actuation.zeros(6), contacts))
    assert result.stats.status is SolverStatus.MAX_ITERATIONS
    assert "pivot limit" in result.stats.message and "t = 0.500000 s" in result.stats.message
    assert np.all(np.isfinite(result.v_next))


def _pendulum():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "lcp"))
    import pendulum
    return pendulum


def test_pendulum_kinematics_match_pinocchio():
    """The benchmark's compiled kinematics against Pinocchio and the numpy references: sphere centres (closed-form
    planar chain) against forwardKinematics, every contact Jacobian row against pin.getFrameJacobian of the
    contact point projected on the contact frame, and the compiled contact set equal to the numpy one."""
    pendulum = _pendulum()
    rng = np.random.default_rng(5)
    for mode in ("minimal", "redundant"):
        sim = pendulum.PendulumSim(12, mode)
        sim.margin = 4.0                        # many floor, wall and sphere-pair contacts
        if mode == "minimal":
            sim.q = rng.uniform(-1.5, 1.5, 12)
        m, d = sim.model, sim.data
        pin.computeJointJacobians(m, d, sim.q)
        centres = sim._centres()
        np.testing.assert_allclose(centres, [d.oMi[k + 1].act(sim.centre_local) for k in range(12)], atol=1e-12)
        J, phi = sim.contacts(centres)
        J_np, phi_np = sim.contacts_numpy(centres)
        assert phi.size > 20
        np.testing.assert_allclose(phi, phi_np, atol=1e-13)
        np.testing.assert_allclose(J, J_np, atol=1e-12)
        # independent reference for the pair contacts (the last rows): Pinocchio's point Jacobians
        pairs = sim.pairs[np.flatnonzero(np.linalg.norm(centres[sim.pairs[:, 1]] - centres[sim.pairs[:, 0]], axis=1)
                                         - 2 * sim.r < sim.margin)]
        for row, (i, j) in zip(range(phi.size - len(pairs), phi.size), pairs):
            normal = (centres[j] - centres[i]) / np.linalg.norm(centres[j] - centres[i])
            point = centres[i] + normal * (sim.r + 0.5 * phi[row])

            def point_jacobian(link):
                local = d.oMi[int(link) + 1].actInv(point)
                return pin.getFrameJacobian(m, d, int(link) + 1, pin.SE3(np.eye(3), local),
                                            pin.LOCAL_WORLD_ALIGNED)[:3]
            np.testing.assert_allclose(J[3 * row + 2], normal @ (point_jacobian(j) - point_jacobian(i)), atol=1e-12)
        if mode == "minimal":
            np.testing.assert_allclose(centres, sim._centres_numpy(), atol=1e-12)


def test_pendulum_hinge_constraint_jacobian_is_the_derivative_of_the_hinge_error():
    """Redundant coordinates: Jb v = dC/dt along any velocity (central finite difference on the manifold), and
    the compiled hinge kernel equals the numpy reference."""
    pendulum = _pendulum()
    sim = pendulum.PendulumSim(5, "redundant")
    for _ in range(200):
        sim.step()
    rng = np.random.default_rng(2)
    v = rng.normal(size=sim.nv)
    Jb, C = (a.copy() for a in sim.hinge_constraints())
    Jb_np, C_np = sim.hinge_constraints_numpy()
    np.testing.assert_allclose(Jb, Jb_np, atol=1e-14)
    np.testing.assert_allclose(C, C_np, atol=1e-14)
    q0, h = sim.q.copy(), 1e-6
    sim.q = pin.integrate(sim.model, q0, h * v)
    C_plus = sim.hinge_constraints()[1].copy()
    sim.q = pin.integrate(sim.model, q0, -h * v)
    C_minus = sim.hinge_constraints()[1].copy()
    np.testing.assert_allclose(Jb @ v, (C_plus - C_minus) / (2 * h), atol=1e-6)


def test_bilateral_only_step_is_the_same_in_schur_and_split_modes():
    """No contact, bilateral rows only (the redundant pendulum between impacts): the Schur-eliminated and the
    one-LCP (split) mixed problem give the same velocity, which satisfies the constraint Jb v+ = -b."""
    pendulum = _pendulum()
    outs = []
    for bilateral in ("schur", "split"):
        sim = pendulum.PendulumSim(4, "redundant", bilateral=bilateral)
        pin.computeJointJacobians(sim.model, sim.data, sim.q)
        Jb, C = sim.hinge_constraints()
        v_free = sim.v + 1e-3 * pin.aba(sim.model, sim.data, sim.q, sim.v, np.zeros(sim.nv))
        X = sim.inv_mass_diag[:, None] * Jb.T
        b = 0.2 * C / 1e-3
        out = sim.stepper.step(1e-3, sim.v, v_free, X, np.zeros((0, sim.nv)), np.zeros(0), np.zeros(0),
                               np.zeros(0), np.zeros(0), Jb=Jb, b_bias=b)
        assert out.status.ok and out.lcp_solves == 1
        np.testing.assert_allclose(Jb @ out.v_next, -b, atol=1e-9)
        outs.append(out.v_next)
    np.testing.assert_allclose(outs[0], outs[1], atol=1e-9)


def test_pendulum_minimal_and_redundant_coordinates_agree():
    """Section V-E, 3 links, 2 s through the first floor impact and bounce (dt = 1 ms): the last link's
    height agrees between minimal and redundant coordinates to 2 cm; its vertical velocity agrees to 0.01 m/s
    before the impact and, after it, except within a few steps of an impact (the two may hit one step apart)."""
    pendulum = _pendulum()
    mc = pendulum.PendulumSim(3, "minimal", dt=1e-3).run(2.0)
    rc = pendulum.PendulumSim(3, "redundant", dt=1e-3).run(2.0)
    assert mc.failures == 0 and rc.failures == 0
    assert mc.max_contacts >= 1                      # it does hit the floor
    assert mc.height.min() < pendulum.LENGTH / 6 + 0.01   # last sphere (r = 2 m) reached the floor
    np.testing.assert_allclose(mc.height, rc.height, atol=0.02)
    before = mc.t < 0.5
    np.testing.assert_allclose(mc.vertical_velocity[before], rc.vertical_velocity[before], atol=0.01)
    assert np.median(np.abs(mc.vertical_velocity - rc.vertical_velocity)) < 0.01


def test_pendulum_free_swing_conserves_energy():
    """Before the first contact the minimal-coordinate chain is conservative: energy drift < 0.5 % of the
    kinetic energy gained (semi-implicit Euler, dt = 1 ms)."""
    pendulum = _pendulum()
    sim = pendulum.PendulumSim(6, "minimal", dt=1e-3)
    m, d = sim.model, sim.data

    def energy():
        pin.computeAllTerms(m, d, sim.q, sim.v)
        return pin.computeKineticEnergy(m, d, sim.q, sim.v) + pin.computePotentialEnergy(m, d, sim.q)

    e0 = energy()
    pin.computeAllTerms(m, d, sim.q, sim.v)
    for _ in range(400):
        assert sim.step() == 0
    kinetic = pin.computeKineticEnergy(m, d, sim.q, sim.v)
    assert abs(energy() - e0) < 5e-3 * kinetic


# ------------------------------------------------------------------ through the Simulator (scene files)

def _scene_dict(name, **material):
    from pathlib import Path
    import yaml
    scene = yaml.safe_load((Path(__file__).resolve().parents[1] / "scenes" / name).read_text())
    scene["materials"]["default"].update(material)
    return scene


@pytest.mark.parametrize("e", [0.0, 0.5])
def test_simulator_ball_bounce_scene(e):
    from contact_sim_ros.sim.scene import load_scene
    from contact_sim_ros.sim.simulator import Simulator
    sim = Simulator(load_scene(_scene_dict("lcp_ball_bounce.yaml", restitution=e)), engine="lcp_minimal",
                    time_step=1e-3)
    z = np.empty(1200)
    for k in range(z.size):
        sim.step(strict=True)
        z[k] = sim.body_pose("ball").translation[2] - 0.1
    impact = int(np.argmax(z < 1e-3))
    assert impact > 0 and z.min() > -1e-6
    if e == 0.0:
        assert z[impact:].max() < 1e-3
        assert np.linalg.norm(sim.body_velocity("ball")) < 1e-9
    else:
        assert abs(z[impact:].max() - e * e * 1.0) / (e * e) < 0.02


@pytest.mark.parametrize("mu", [0.5, 0.7])
def test_simulator_incline_scene_slides_or_sticks(mu):
    """30 degree incline: mu = 0.5 < tan 30 slides with g (sin - mu cos) (the slope lies along a cone
    direction of the contact frame, so the polyhedral cone is exact), mu = 0.7 sticks."""
    from contact_sim_ros.sim.scene import load_scene
    from contact_sim_ros.sim.simulator import Simulator
    sim = Simulator(load_scene(_scene_dict("lcp_incline.yaml", friction=mu)), engine="lcp_minimal",
                    time_step=1e-3)
    theta = np.pi / 6
    velocities = np.empty((300, 3))
    for k in range(300):
        sim.step(strict=True)
        velocities[k] = sim.body_velocity("block")[:3]
    accel = (velocities[-1] - velocities[100]) / (199 * 1e-3)
    downhill = np.array([np.cos(theta), 0.0, -np.sin(theta)])
    if mu < np.tan(theta):
        np.testing.assert_allclose(accel @ downhill, G * (np.sin(theta) - mu * np.cos(theta)), rtol=1e-6)
        np.testing.assert_allclose(np.cross(accel, downhill), 0.0, atol=1e-9)
    else:
        assert np.linalg.norm(velocities[-1]) < 1e-9


def test_simulator_head_on_collision_restitution_and_momentum():
    """Two spheres (1 kg, 2 kg), head-on, no gravity, restitution e = 0.6, frictionless: momentum is
    conserved and the relative normal velocity after the impact is -e times the one before (Newton)."""
    from contact_sim_ros.sim.scene import load_scene
    from contact_sim_ros.sim.simulator import Simulator
    e = 0.6
    scene = {"gravity": [0, 0, 0],
             "objects": [{"name": "a", "shape": {"sphere": 0.05}, "mass": 1.0, "pose": {"xyz": [0, 0, 0]},
                          "velocity": [0.5, 0, 0, 0, 0, 0]},
                         {"name": "b", "shape": {"sphere": 0.05}, "mass": 2.0, "pose": {"xyz": [0.11, 0, 0]},
                          "velocity": [-0.25, 0, 0, 0, 0, 0]}],
             "environment": [], "materials": {"default": {"friction": 0.0, "restitution": e}},
             "contact_margin": 0.005}
    sim = Simulator(load_scene(scene), engine="lcp_minimal", time_step=1e-3)
    for _ in range(100):
        sim.step(strict=True)
    va, vb = sim.body_velocity("a")[:3], sim.body_velocity("b")[:3]
    np.testing.assert_allclose(1.0 * va + 2.0 * vb, 0.0, atol=1e-12)
    np.testing.assert_allclose(vb[0] - va[0], e * 0.75, rtol=1e-9)
