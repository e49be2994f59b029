"""Tests of the convex ICF engines (lagged, similar, sap) on hand-built StepInputs.

A box is a free body resting on the ground (z = 0) with 4 hand-built corner contacts; the expected values come
from the model equations of Castro, Han, Masterjohn, "Irrotational Contact Fields" (eqs. 18-23) and from
momentum balance.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from contact_sim_ros.engines import Actuation, SolverStatus, StepInputs, engine_names, make_engine
from contact_sim_ros.engines.lagged import hunt_crossley_impulse
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.geometry.contact_set import ContactSet
from contact_sim_ros.model.multibody_model import MultibodyModel

G = 9.81
MODELS = ("lagged", "similar", "sap")


def make_model(joints):
    """A MultibodyModel of independent trees hanging off the universe ('free' or 'px' prismatic joints)."""
    model = pin.Model()
    slices, start = [], 0
    for i, kind in enumerate(joints):
        jm = pin.JointModelFreeFlyer() if kind == "free" else pin.JointModelPX()
        jid = model.addJoint(0, jm, pin.SE3.Identity(), f"j{i}")
        model.appendBodyToJoint(jid, pin.Inertia.FromBox(1.0, 0.05, 0.05, 0.05), pin.SE3.Identity())
        slices.append(slice(start, start + jm.nv))
        start += jm.nv
    nv = model.nv
    z = np.zeros(0)
    return MultibodyModel(
        pin_model=model, collision_model=pin.GeometryModel(), source="<test>", joint_names=(),
        joint_q_index=np.zeros(0, int), joint_v_index=np.zeros(0, int), position_lower=z, position_upper=z,
        velocity_limit=z, effort_limit=z, mimic_joints=(), joint_damping=np.zeros(nv), joint_friction=np.zeros(nv),
        actuated=np.zeros(nv, bool), free_bodies=(), tree_velocity_slices=tuple(slices), geometry_names=(),
        geometry_parent_joint=np.zeros(0, int), geometry_stiffness=z, geometry_dissipation=z,
        geometry_friction=z, geometry_restitution=z, collision_pairs=np.zeros((0, 2), int),
        gravity=np.array([0, 0, -G]))


def box_mass_matrix(m, side):
    inertia = m * side ** 2 / 6.0
    return np.diag([m, m, m, inertia, inertia, inertia])


def box_contacts(phi, half, k, d, mu, nv=6, offset=0, belt_velocity=(0.0, 0.0)):
    """4 corner contacts of a box (body frame = world orientation) with the ground; A = ground, B = box.

    Jacobian rows: velocity of the box corner, v + w x r, in the contact frame (t1, t2, n) = (x, y, z).
    belt_velocity: ground surface velocity (x, y) -> bias -v_belt in the tangential rows."""
    corners = np.array([[sx * half, sy * half, -half] for sx in (-1, 1) for sy in (-1, 1)])
    n = len(corners)
    J = np.zeros((3 * n, nv))
    for i, r in enumerate(corners):
        J[3 * i:3 * i + 3, offset:offset + 3] = np.eye(3)
        J[3 * i:3 * i + 3, offset + 3:offset + 6] = -pin.skew(r)
    bias = np.zeros(3 * n)
    bias[0::3] = -belt_velocity[0]
    bias[1::3] = -belt_velocity[1]
    full = lambda x: np.full(n, float(x))
    return ContactSet(
        geometry_a=np.zeros(n, int), geometry_b=np.ones(n, int), joint_a=np.zeros(n, int),
        joint_b=np.ones(n, int), point=corners + [0, 0, half], normal=np.tile([0.0, 0.0, 1.0], (n, 1)),
        signed_distance=np.broadcast_to(np.asarray(phi, float), (n,)).copy(), rotation=np.tile(np.eye(3), (n, 1, 1)),
        jacobian=J, velocity_bias=bias, stiffness=full(k), dissipation=full(d), friction=full(mu),
        restitution=full(0.0))


def box_inputs(v, contacts, m=1.0, side=0.05, dt=0.01, external=(0.0, 0.0, 0.0)):
    M = box_mass_matrix(m, side)
    gravity = np.array([0, 0, -m * G, 0, 0, 0])
    force = gravity + np.r_[external, 0, 0, 0]
    return StepInputs(t=0.0, dt=dt, q=np.r_[0, 0, side / 2, 0, 0, 0, 1.0], v=np.asarray(v, float),
                      mass_matrix=M, generalized_force=force, gravity_force=gravity, joint_damping=np.zeros(6),
                      actuation=Actuation.zeros(6), contacts=contacts)


def test_engines_registered_under_their_names():
    names = engine_names()
    for name in MODELS:
        assert name in names


def test_hunt_crossley_impulse_matches_force_law_and_antiderivative():
    """n(x) = dt f_n(phi0 + dt x, x) (eqs. 7, 22); dN/dx = n and dn/dx by central differences; zero beyond
    the break velocity of eq. 23."""
    dt, k, d = 0.01, 1e5, 2.0
    phi0 = np.full(7, -1e-3)
    x = np.array([-0.3, -0.1, -0.01, 0.0, 0.05, 0.09, 0.2])   # v_hat = min(0.1, 0.5) = 0.1
    n, dn, N = hunt_crossley_impulse(x, phi0, k, d, dt)
    f = k * np.maximum(-(phi0 + dt * x), 0) * np.maximum(1 - d * x, 0)
    np.testing.assert_allclose(n, dt * f, rtol=1e-12)
    assert n[-1] == 0.0 and dn[-1] == 0.0
    h = 1e-7
    np_, _, Np = hunt_crossley_impulse(x + h, phi0, k, d, dt)
    nm, _, Nm = hunt_crossley_impulse(x - h, phi0, k, d, dt)
    np.testing.assert_allclose((Np - Nm) / (2 * h), n, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose((np_ - nm) / (2 * h), dn, rtol=1e-6, atol=1e-9)
    assert np.all(dn <= 0)


@pytest.mark.parametrize("name", MODELS)
def test_contact_gradient_and_hessian_match_finite_differences(name):
    """gamma = -dl/dv_c (eq. 4) and G = d2l/dv_c2 (symmetric PSD) for random contact velocities."""
    rng = np.random.default_rng(3)
    n = 40
    engine = make_engine(name, make_model(["free"]), {"stiction_tolerance": 1e-2})
    dt = 0.01
    p = {"k": rng.uniform(1e4, 1e6, n), "d": rng.uniform(0, 5, n), "mu": rng.uniform(0.2, 1.0, n),
         "phi0": rng.uniform(-2e-3, 1e-3, n)}
    if name == "sap":
        w = rng.uniform(0.5, 3.0, n)
        p["Rt"], p["Rn"] = 1e-1 * w, 1.0 / (dt * p["k"] * (dt + 1e-3))
        p["vhat"] = -p["phi0"] / (dt + 1e-3)
    else:
        p["eps"] = np.full(n, 1e-2)
        p["gn0"] = rng.uniform(0, 1.0, n)
    vc = rng.normal(0, 0.2, (n, 3))
    gamma, Gm, _ = engine._contact_eval(vc, p, dt)
    h = 1e-7
    for j in range(3):
        e = np.zeros(3)
        e[j] = h
        gp, _, lp = engine._contact_eval(vc + e, p, dt)
        gm, _, lm = engine._contact_eval(vc - e, p, dt)
        # per-contact cost difference: evaluate contact by contact through the sum (contacts are separable)
        np.testing.assert_allclose(-(gp[:, :] - gm[:, :])[:, :] / (2 * h), Gm[:, :, j], rtol=2e-4, atol=1e-6)
        assert np.isfinite(lp) and np.isfinite(lm)
    # gradient of the summed cost along random directions
    for _ in range(3):
        u = rng.normal(size=(n, 3))
        _, _, lp = engine._contact_eval(vc + h * u, p, dt)
        _, _, lm = engine._contact_eval(vc - h * u, p, dt)
        np.testing.assert_allclose((lp - lm) / (2 * h), -np.sum(gamma * u), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(Gm, np.swapaxes(Gm, 1, 2), atol=1e-9 * np.abs(Gm).max())
    assert np.linalg.eigvalsh(Gm).min() >= -1e-9 * np.abs(Gm).max()


@pytest.mark.parametrize("name", MODELS)
def test_free_fall_is_one_exact_newton_step(name):
    engine = make_engine(name, make_model(["free"]))
    inputs = box_inputs([0.3, 0, -0.2, 0, 0, 0], ContactSet.empty(6))
    result = engine.step(inputs)
    assert result.stats.status is SolverStatus.CONVERGED
    assert result.stats.iterations == 1
    np.testing.assert_allclose(result.v_next, [0.3, 0, -0.2 - G * 0.01, 0, 0, 0], atol=1e-14)


@pytest.mark.parametrize("name", ["lagged", "similar"])
def test_box_at_rest_stays_at_rest_with_weight_as_normal_force(name):
    """Penetration phi0 = -m g / (4 k) per corner: the Hunt & Crossley impulse at v = 0 balances the weight."""
    m, k, dt = 1.0, 1e5, 0.01
    contacts = box_contacts(-m * G / (4 * k), 0.025, k, 500.0, 0.7)
    result = make_engine(name, make_model(["free"])).step(box_inputs(np.zeros(6), contacts, dt=dt))
    assert result.stats.status is SolverStatus.CONVERGED
    np.testing.assert_allclose(result.v_next, 0.0, atol=1e-8)
    np.testing.assert_allclose(result.contact_impulse[:, 2].sum(), m * G * dt, rtol=1e-7)
    np.testing.assert_allclose(result.generalized_contact_force[2], m * G, rtol=1e-7)


def sliding_step(name, vx0, dt=0.01, mu=0.7, k=1e7, d=500.0):
    m = 1.0
    contacts = box_contacts(-m * G / (4 * k), 0.025, k, d, mu)
    engine = make_engine(name, make_model(["free"]), {"relative_tolerance": 1e-9})
    result = engine.step(box_inputs([vx0, 0, 0, 0, 0, 0], contacts, dt=dt))
    assert result.stats.status is SolverStatus.CONVERGED, result.stats.message
    vc = contacts.relative_velocity(result.v_next)
    return result, vc


def test_lagged_slip_has_no_normal_velocity_and_coulomb_friction():
    """Lagged (eq. 18): gamma_t = -mu gamma_n0 t_s with gamma_n0 = m g dt / 4 per corner, normal velocity 0."""
    mu, dt, vx0 = 0.7, 0.01, 1.0
    result, vc = sliding_step("lagged", vx0, dt=dt, mu=mu)
    # friction at the base pitches the box (front corners down, back corners up) but the centre of mass does
    # not lift: the mean normal velocity is zero up to the O(v_n^2) nonlinearity of Hunt & Crossley
    assert abs(result.v_next[2]) < 1e-6            # (Similar: 0.44 m/s, see below)
    np.testing.assert_allclose(vc[[0, 1], 2], -vc[[2, 3], 2], rtol=0.05)
    np.testing.assert_allclose(result.contact_impulse[:, 2].sum(), G * dt, rtol=1e-5)
    friction = result.contact_impulse[:, 0].sum()
    np.testing.assert_allclose(friction, -mu * G * dt, rtol=1e-6)
    np.testing.assert_allclose(result.v_next[0], vx0 - mu * G * dt, rtol=1e-6)


def test_similar_slip_glides_at_mu_times_slip_speed():
    """Similar (eq. 19-20): the impulse balancing the weight needs z = v_n - mu ||v_t||_s = 0 at every corner,
    i.e. the box lifts off at v_n = mu ||v_t||_s (gliding of section VII-A)."""
    mu, eps = 0.7, 1e-4
    result, vc = sliding_step("similar", 1.0, mu=mu)
    soft = np.sqrt(np.sum(vc[:, :2] ** 2, axis=1) + eps ** 2) - eps
    np.testing.assert_allclose(vc[:, 2], mu * soft, rtol=2e-3)   # 2e-3: pitching of the box
    assert vc[:, 2].min() > 0.4


def test_sap_slip_glides_at_mu_dt_plus_tau_times_slip_speed():
    """SAP: one step of slip starting from the compliant equilibrium. The normal velocity absorbs the gliding
    offset: phi/(dt + tau_d) - mu ||v_t|| + gamma_n R_n (1 + mu~^2) = -v_n(...) (section VII-A, eq. 24); in the
    stiff limit phi_1 = phi0 + dt v_n -> mu (dt + tau_d) ||v_t|| over the relaxation time scale."""
    mu, dt, tau = 0.7, 0.01, 1e-3
    result, vc = sliding_step("sap", 1.0, dt=dt, mu=mu)
    vt = np.linalg.norm(vc[:, :2], axis=1)
    # with R_n << dt: v_n ~ v_hat + mu v_t  (v_hat = -phi0 / (dt + tau) ~ 0)
    np.testing.assert_allclose(vc[:, 2], mu * vt, rtol=0.05)


@pytest.mark.parametrize("name", MODELS)
def test_stiction_holds_a_box_under_a_subcritical_push(name):
    """A horizontal force 0.5 mu m g: after 50 steps (dt = 1 ms) the box still sticks (slip speed ~ v_s)."""
    m, k, mu, dt = 1.0, 1e6, 0.7, 1e-3
    phi = np.full(4, -m * G / (4 * k))
    v = np.zeros(6)
    engine = make_engine(name, make_model(["free"]))
    for _ in range(50):
        contacts = box_contacts(phi, 0.025, k, 10.0, mu)
        res = engine.step(box_inputs(v, contacts, dt=dt, external=(0.5 * mu * m * G, 0, 0)))
        assert res.stats.status is SolverStatus.CONVERGED
        v = res.v_next
        phi = phi + dt * contacts.relative_velocity(v)[:, 2]
        v = res.v_next
    assert abs(v[0]) < 2e-4


@pytest.mark.parametrize("name", MODELS)
def test_momentum_balance_and_iteration_count(name):
    """At convergence M (v - v0) = dt f + J^T gamma (eq. 2) to the relative tolerance, for a falling tilted box."""
    m, k = 1.0, 1e6
    rng = np.random.default_rng(0)
    phi = np.array([-2e-4, 1e-4, -5e-4, 3e-4])
    contacts = box_contacts(phi, 0.025, k, 5.0, 0.5)
    v0 = np.r_[rng.normal(0, 0.5, 3), rng.normal(0, 3, 3)]
    v0[2] = -1.0
    inputs = box_inputs(v0, contacts, dt=2e-3)
    res = make_engine(name, make_model(["free"]), {"relative_tolerance": 1e-8}).step(inputs)
    assert res.stats.status is SolverStatus.CONVERGED
    assert 1 <= res.stats.iterations <= 30
    lhs = inputs.mass_matrix @ (res.v_next - v0)
    rhs = inputs.dt * inputs.generalized_force \
        + contacts.jacobian.T @ res.contact_impulse.ravel()
    np.testing.assert_allclose(lhs, rhs, atol=1e-7 * np.abs(lhs).max())
    # friction never exceeds the cone (SAP, Similar) / the lagged bound (Lagged)
    gt = np.linalg.norm(res.contact_impulse[:, :2], axis=1)
    assert np.all(gt <= 0.5 * np.maximum(res.contact_impulse[:, 2], 0) * (1 + 1e-9) + 1e-12) or name == "lagged"


def test_two_boxes_coupled_by_contact_match_dense_solution():
    """Contacts between two free bodies couple their Hessian blocks; the block solver must agree with a single
    body pushed by the same impulses (check: total momentum change = dt * total external force)."""
    model = make_model(["free", "free"])
    m, k = 1.0, 1e6
    c1 = box_contacts(np.full(4, -1e-4), 0.025, k, 5.0, 0.5, nv=12, offset=0)
    c2 = box_contacts(np.full(4, -1e-4), 0.025, k, 5.0, 0.5, nv=12, offset=6)
    # box 2 sits on box 1: relative velocity = v_box2 - v_box1 at the corner
    c2.jacobian[:, 0:6] = -c1.jacobian[:, 0:6]
    contacts = ContactSet(*[np.concatenate([getattr(c1, f), getattr(c2, f)]) for f in (
        "geometry_a", "geometry_b", "joint_a", "joint_b", "point", "normal", "signed_distance", "rotation",
        "jacobian", "velocity_bias", "stiffness", "dissipation", "friction", "restitution")])
    M = np.zeros((12, 12))
    M[:6, :6] = M[6:, 6:] = box_mass_matrix(m, 0.05)
    grav = np.r_[0, 0, -m * G, 0, 0, 0, 0, 0, -m * G, 0, 0, 0]
    v0 = np.r_[0.2, 0, -0.3, 0, 0, 0, -0.1, 0.1, -0.5, 0, 0, 0]
    inputs = StepInputs(t=0, dt=0.005, q=np.zeros(14), v=v0, mass_matrix=M, generalized_force=grav,
                        gravity_force=grav, joint_damping=np.zeros(12), actuation=Actuation.zeros(12),
                        contacts=contacts)
    for name in MODELS:
        res = make_engine(name, model, {"relative_tolerance": 1e-9}).step(inputs)
        assert res.stats.status is SolverStatus.CONVERGED
        lhs = M @ (res.v_next - v0)
        rhs = inputs.dt * grav + contacts.jacobian.T @ res.contact_impulse.ravel()
        np.testing.assert_allclose(lhs, rhs, atol=1e-7 * np.abs(lhs).max())
        # the box-box impulses are internal: box 2's downward push shows up on box 1 (action = reaction)
        assert res.contact_impulse[4:, 2].sum() > 0


def test_free_body_spinning_and_translating_keeps_its_world_velocity():
    """Force-free free body with v_lin and w: stepping in the frozen frame keeps the world-frame velocity of the
    origin exactly and moves it along the straight line p0 + dt R0 v_lin (eq. 1); the local-frame velocity is
    rotated into the new frame. (An explicit frame-rotation term w x v would gain energy by sqrt(1 + (w dt)^2)
    per step.) The frozen-frame scheme is the simulator's (model/free_body_motion.py); here it wraps the engine."""
    from contact_sim_ros.model.free_body_motion import FreeBodyMotion
    model = make_model(["free"])
    motion = FreeBodyMotion(model)
    pm = model.pin_model
    pm.gravity = pin.Motion.Zero()
    data = pm.createData()
    engine = make_engine("lagged", model)
    q = np.r_[0, 0, 0, 0, 0, 0, 1.0]
    v = np.r_[1.4, 0, 0, 0, 57.0, 0]
    world_v0 = v[:3].copy()
    dt = 2e-3
    for _ in range(100):
        nle = pin.nonLinearEffects(pm, data, q, v)
        M = pin.crba(pm, data, q)
        M = np.triu(M) + np.triu(M, 1).T
        inputs = StepInputs(t=0, dt=dt, q=q, v=v, mass_matrix=M,
                            generalized_force=-nle + motion.frame_rotation_force(M, v), gravity_force=np.zeros(6),
                            joint_damping=np.zeros(6), actuation=Actuation.zeros(6), contacts=ContactSet.empty(6))
        res = engine.step(inputs)
        R0 = pin.Quaternion(q[3:]).matrix()
        q_next, v_next = motion.integrate(q, res.v_next, dt)
        np.testing.assert_allclose(q_next[:3], q[:3] + dt * R0 @ res.v_next[:3], atol=1e-12)
        q, v = q_next, v_next
        np.testing.assert_allclose(pin.Quaternion(q[3:]).matrix() @ v[:3], world_v0, atol=1e-10)
    np.testing.assert_allclose(q[:3], [100 * dt * 1.4, 0, 0], atol=1e-9)


def test_implicit_pd_with_effort_limit():
    """1-dof prismatic joint (m = 1 kg): unsaturated implicit PD has the closed form
    v = (m v0 + dt (kp (e - 0) + kd vt)) / (m + dt (dt kp + kd)); saturated it accelerates at the limit."""
    model = make_model(["px"])
    dt, m, kp, kd, e = 0.01, 1.0, 100.0, 5.0, 0.2
    M = np.array([[m]])
    mk = lambda limit: Actuation(effort=np.zeros(1), kp=np.array([kp]), kd=np.array([kd]),
                                 position_error=np.array([e]), velocity_target=np.zeros(1),
                                 effort_limit=np.array([limit]))
    inputs = StepInputs(t=0, dt=dt, q=np.zeros(1), v=np.zeros(1), mass_matrix=M, generalized_force=np.zeros(1),
                        gravity_force=np.zeros(1), joint_damping=np.zeros(1), actuation=mk(np.inf),
                        contacts=ContactSet.empty(1))
    res = make_engine("lagged", model).step(inputs)
    expected = dt * kp * e / (m + dt * (dt * kp + kd))
    np.testing.assert_allclose(res.v_next, [expected], rtol=1e-10)
    np.testing.assert_allclose(res.actuation_force, m * res.v_next / dt, rtol=1e-10)
    inputs.actuation = mk(3.0)
    res = make_engine("lagged", model).step(inputs)
    assert res.stats.status is SolverStatus.CONVERGED
    np.testing.assert_allclose(res.v_next, [dt * 3.0 / m], rtol=1e-10)


def test_iteration_limit_is_reported_not_silent():
    contacts = box_contacts(np.array([-2e-4, 1e-4, -5e-4, 3e-4]), 0.025, 1e7, 5.0, 0.5)
    v0 = np.array([1.0, 0.5, -2.0, 3.0, -2.0, 1.0])
    res = make_engine("lagged", make_model(["free"]), {"max_iterations": 1}).step(box_inputs(v0, contacts))
    assert res.stats.status is SolverStatus.MAX_ITERATIONS
    assert "did not converge" in res.stats.message and "t = " in res.stats.message
    assert np.all(np.isfinite(res.v_next))


def test_regularized_stiction_tolerance_eq26():
    """eps_s = max(v_s, sigma w mu gamma_n0): a strong impact raises it, resting contact keeps v_s."""
    k, mu, dt = 1e7, 1.0, 2e-3
    engine = make_engine("lagged", make_model(["free"]), {"regularized_stiction": True})
    contacts = box_contacts(-G / (4 * k), 0.025, k, 10.0, mu)
    engine.step(box_inputs(np.zeros(6), contacts, dt=dt))
    np.testing.assert_allclose(engine.last_stiction_tolerance, 1e-4)
    contacts = box_contacts(-1e-4, 0.025, k, 10.0, mu)
    engine.step(box_inputs([0, 0, -3.0, 0, 0, 0], contacts, dt=dt))
    # gamma_n0 = dt k 1e-4 (1 + 10 * 3) = 62 N s; w ~ inverse mass scale >~ 1 / kg
    assert np.all(engine.last_stiction_tolerance > 1e-2)


def test_bad_options_raise_config_error_naming_the_option():
    model = make_model(["free"])
    with pytest.raises(ConfigError, match="valid options"):
        make_engine("lagged", model, {"stiction_tol": 1e-3})
    with pytest.raises(ConfigError, match="stiction_tolerance"):
        make_engine("similar", model, {"stiction_tolerance": -1.0})
    with pytest.raises(ConfigError, match="max_iterations"):
        make_engine("sap", model, {"max_iterations": 0})


# ----------------------------------------------------------------------------------------------------------
# With the Simulator: the paper's test cases (section XI)

SCENES = Path(__file__).resolve().parents[1] / "scenes"


def _simulator(scene, engine, dt, options=None):
    from contact_sim_ros.sim.simulator import Simulator
    return Simulator(SCENES / Path(scene).name, engine=engine, time_step=dt, engine_options=options)


@pytest.mark.parametrize("name", MODELS)
def test_conveyor_belt_lagged_has_no_gliding_similar_and_sap_glide(name):
    """XI-A (dt = 10 ms, mu = 0.7, d = 500 s/m, k = 1e7 N/m). The box alternates between stick and slip.
    Lagged: vertical velocity zero to solver tolerance and normal force = m g. Similar / SAP: during slip the
    box glides at the offset mu dt ||v_t|| (Similar) and mu (dt + tau_d) ||v_t|| (SAP, eq. 24), within 20 %."""
    dt, m = 0.01, 1.0
    sim = _simulator("scenes/icf_conveyor.yaml", name, dt)
    tau = sim.engine.options.relaxation_time if name == "sap" else 0.0
    vz, fn, ratio, slip_steps, steps = [], [], [], 0, 0
    previous_slip = None
    for _ in range(200):
        sim.step(strict=True)
        res = sim.last_result
        if previous_slip is not None and sim.t > 0.5 and sim.contacts.size:
            gap = sim.contacts.signed_distance.mean()          # phi at the start of this step
            if previous_slip > 0.05:
                ratio.append(gap / (0.7 * (dt + tau) * previous_slip))
        vc = sim.contacts.relative_velocity(
            np.r_[pin.exp3(dt * res.v_next[3:6]) @ res.v_next[:3], res.v_next[3:6]])
        previous_slip = np.linalg.norm(vc[:, :2], axis=1).mean() if len(vc) else None
        if sim.t > 0.5:
            steps += 1
            slip_steps += previous_slip is None or previous_slip > 1e-3
            vz.append(sim.body_velocity("box")[2])
            fn.append(res.contact_impulse[:, 2].sum() / dt)
    assert 0.2 < slip_steps / steps < 0.8                        # both stick and slip phases
    if name == "lagged":
        # typically 1e-9 m/s; isolated 1e-5 m/s steps where the query's contact patch changes (the box's 4
        # corners vs a different patch sampling) - three orders below the gliding of Similar / SAP
        assert np.median(np.abs(vz)) < 1e-7
        assert np.abs(vz).max() < 1e-4
        np.testing.assert_allclose(np.median(fn), m * G, rtol=1e-5)
        np.testing.assert_allclose(fn, m * G, rtol=1e-3)          # (one step: 3e-4 at a patch change)
    else:
        assert np.abs(vz).max() > 1e-2                           # the box moves vertically with the slip speed
        assert len(ratio) > 20
        np.testing.assert_allclose(ratio, 1.0, atol=0.2)


def test_conveyor_convergence_lagged_is_first_order():
    """Position error of the box (RMS over 1 s against dt = 1 ms) halves with dt (first order)."""
    def trajectory(dt):
        sim = _simulator("scenes/icf_conveyor.yaml", "lagged", dt)
        xs = []
        for _ in range(int(round(1.0 / dt))):
            sim.step(strict=True)
            xs.append(sim.body_pose("box").translation[0])
        stride = int(round(0.01 / dt))
        return np.array(xs)[stride - 1::stride]
    ref = trajectory(1e-3)
    errors = [np.sqrt(np.mean((trajectory(dt) - ref) ** 2)) for dt in (1e-2, 5e-3)]
    order = np.log(errors[0] / errors[1]) / np.log(2.0)
    assert 0.7 < order < 1.5, (errors, order)


def test_falling_sphere_slides_then_rolls_at_five_sevenths():
    """XI-B (dt = 2 ms): after the impact the sphere slides, friction spins it up, and it rolls at 5/7 vx0
    (angular momentum about the contact point is conserved). Rigid-impact estimate of the sliding time after
    first contact: the impact's friction impulse mu m |v_z| removes 7/2 mu |v_z| of slip, the rest decays at
    7/2 mu g: (2 - 3.5 * 0.5 * 0.99) / (3.5 * 0.5 * 9.81) = 0.016 s."""
    dt, r = 2e-3, 0.025
    sim = _simulator("scenes/icf_falling_sphere.yaml", "lagged", dt)
    t_contact = t_roll = None
    vx = []
    for _ in range(200):
        sim.step(strict=True)
        v = sim.body_velocity("sphere")
        vx.append(v[0])
        if t_contact is None and np.any(sim.last_result.contact_impulse[:, 2] > 0):
            t_contact = sim.t - dt
        if t_contact is not None and t_roll is None and abs(v[0] - r * v[4]) < 1e-3:
            t_roll = sim.t
    np.testing.assert_allclose(vx[-1], 5.0 / 7.0 * 2.0, rtol=0.02)
    assert abs(vx[-1] - r * sim.body_velocity("sphere")[4]) < 1e-3      # rolling without slip
    assert t_contact == pytest.approx(np.sqrt(2 * 0.05 / G), abs=2 * dt)
    assert 0.005 < t_roll - t_contact < 0.04


def test_sliding_rod_jams_and_jumps_with_lagged():
    """XI-C (mu = 2.3 > 4/3, 30 deg, U0 = 10 m/s, dt = 0.1 ms): friction at the leading end rotates the rod into
    the ground; the normal force grows until the contact sticks (slip -> ~v_s) and the rod jumps: impact
    without collision. After lift-off the rod flies (no contact) with upward velocity."""
    dt = 1e-4
    sim = _simulator("scenes/icf_sliding_rod.yaml", "lagged", dt)
    fn, slip, vz = [], [], []
    for _ in range(300):
        sim.step(strict=True)
        res = sim.last_result
        c = sim.contacts
        fn.append(res.contact_impulse[:, 2].sum() / dt if c.size else 0.0)
        vc = c.relative_velocity(np.r_[pin.exp3(dt * res.v_next[3:6]) @ res.v_next[:3], res.v_next[3:6]]) \
            if c.size else np.zeros((0, 3))
        slip.append(np.linalg.norm(vc[0, :2]) if fn[-1] > 0 else np.nan)
        vz.append(sim.body_velocity("rod")[2])
    fn, slip = np.array(fn), np.array(slip)
    k = int(np.argmax(fn))
    weight = 0.3 * G
    assert fn[k] > 10 * weight                                 # impulsive jam
    assert np.nanmin(slip[: k + 5]) < 1e-3                     # the sliding contact sticks
    assert slip[5] > 5.0                                       # it was sliding before
    assert np.all(fn[k + 20:] == 0.0)                          # then the rod is in the air ...
    assert vz[-1] > 1.0                                        # ... moving up


@pytest.mark.parametrize("name", MODELS)
def test_line_derivatives_match_the_contact_gradient_and_hessian(name):
    """The vectorised line-search derivatives equal gamma . dvc and dvc^T G dvc of _contact_eval."""
    rng = np.random.default_rng(7)
    n, dt = 30, 0.01
    engine = make_engine(name, make_model(["free"]), {"stiction_tolerance": 1e-3})
    p = {"k": rng.uniform(1e4, 1e6, n), "d": rng.uniform(0, 5, n), "mu": rng.uniform(0.2, 1.0, n),
         "phi0": rng.uniform(-2e-3, 1e-3, n)}
    w = rng.uniform(0.5, 3.0, n)
    p["Rt"], p["Rn"] = 1e-1 * w, 1.0 / (dt * p["k"] * (dt + 1e-3))
    p["vhat"] = -p["phi0"] / (dt + 1e-3)
    p["eps"] = np.full(n, 1e-3)
    p["gn0"] = rng.uniform(0, 1.0, n)
    vc = rng.normal(0, 0.2, (n, 3))
    dvc = rng.normal(0, 0.2, (n, 3))
    alphas = np.array([0.0, 0.3, 1.0])
    engine._complete_params(p, dt)
    g_dot, quad = engine._contact_line(alphas, vc, dvc, p, dt)
    for j, a in enumerate(alphas):
        gamma, G, _ = engine._contact_eval(vc + a * dvc, p, dt)
        np.testing.assert_allclose(g_dot[j], np.sum(gamma * dvc), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(quad[j], np.einsum("ni,nij,nj->", dvc, G, dvc), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kernel", ["numpy", "numba"])
def test_stack_of_five_boxes_uses_one_coupled_block_and_balances_momentum(kernel):
    """5 stacked boxes: contacts couple all 5 trees into one 30-dof Hessian block (numpy reference: LAPACK
    Cholesky path; numba: block-sparse Cholesky over the 5 trees); the converged step satisfies momentum
    balance and the stack's weight reaches the ground."""
    nb, m, k, dt = 5, 1.0, 1e6, 2e-3
    model = make_model(["free"] * nb)
    nv = 6 * nb
    parts = []
    for b in range(nb):
        c = box_contacts(np.full(4, -(nb - b) * m * G / (4 * k)), 0.025, k, 5.0, 0.5, nv=nv, offset=6 * b)
        if b > 0:      # box b on box b-1: minus the velocity of box b-1's material point at its top corner
            for i, (sx, sy) in enumerate([(-1, -1), (-1, 1), (1, -1), (1, 1)]):
                r_top = np.array([sx * 0.025, sy * 0.025, 0.025])
                c.jacobian[3 * i:3 * i + 3, 6 * (b - 1):6 * (b - 1) + 3] = -np.eye(3)
                c.jacobian[3 * i:3 * i + 3, 6 * (b - 1) + 3:6 * b] = pin.skew(r_top)
        parts.append(c)
    contacts = ContactSet(*[np.concatenate([getattr(c, f) for c in parts]) for f in (
        "geometry_a", "geometry_b", "joint_a", "joint_b", "point", "normal", "signed_distance", "rotation",
        "jacobian", "velocity_bias", "stiffness", "dissipation", "friction", "restitution")])
    M = np.kron(np.eye(nb), box_mass_matrix(m, 0.05))
    grav = np.tile([0, 0, -m * G, 0, 0, 0], nb).astype(float)
    rng = np.random.default_rng(1)
    v0 = rng.normal(0, 0.05, nv)
    inputs = StepInputs(t=0, dt=dt, q=np.zeros(7 * nb), v=v0, mass_matrix=M, generalized_force=grav,
                        gravity_force=grav, joint_damping=np.zeros(nv), actuation=Actuation.zeros(nv),
                        contacts=contacts)
    engine = make_engine("lagged", model, {"relative_tolerance": 1e-9, "newton_kernel": kernel})
    res = engine.step(inputs)
    assert res.stats.status is SolverStatus.CONVERGED
    if kernel == "numpy":
        H_flat, blocks = engine.last_hessian
        assert [b[0] for b in blocks] == [nv]                 # one coupled block of all 30 dofs
    lhs = M @ (res.v_next - v0)
    rhs = dt * grav + contacts.jacobian.T @ res.contact_impulse.ravel()
    np.testing.assert_allclose(lhs, rhs, atol=1e-7 * np.abs(rhs).max())
    ground = res.contact_impulse[:4, 2].sum()
    np.testing.assert_allclose(ground, nb * m * G * dt, rtol=0.2)


# ---- compiled (numba) Newton path against the numpy reference ------------------------------------------------
def random_pile(nb, n_contacts, seed, reverse_slices=False):
    """nb free boxes (1 kg, 5 cm) with random contacts: each against the ground and between random pairs along
    a cycle (so the block-sparse Cholesky needs fill-in). Jacobian rows of a contact between bodies a and b:
    velocity of b's material point minus a's, each v + w x r in random contact frames."""
    rng = np.random.default_rng(seed)
    model = make_model(["free"] * nb)
    if reverse_slices:                     # trees listed in reverse: the kernel's dof permutation is exercised
        object.__setattr__(model, "tree_velocity_slices", tuple(reversed(model.tree_velocity_slices)))
    nv = 6 * nb
    pairs = [(-1, b) for b in range(nb)] + [(b, (b + 1) % nb) for b in range(nb)]
    pairs += [tuple(rng.choice(nb, 2, replace=False)) for _ in range(max(0, n_contacts - len(pairs)))]
    n = len(pairs)
    J = np.zeros((3 * n, nv))
    for i, (a, b) in enumerate(pairs):
        R = np.linalg.qr(rng.normal(size=(3, 3)))[0]        # rows: contact frame (t1, t2, n) in body axes
        for body, sign in ((a, -1.0), (b, 1.0)):
            if body < 0:
                continue
            r = rng.uniform(-0.025, 0.025, 3)
            J[3 * i:3 * i + 3, 6 * body:6 * body + 3] += sign * R
            J[3 * i:3 * i + 3, 6 * body + 3:6 * body + 6] += -sign * R @ pin.skew(r)
    full = lambda x: np.full(n, float(x))
    contacts = ContactSet(
        geometry_a=np.zeros(n, int), geometry_b=np.ones(n, int), joint_a=np.zeros(n, int),
        joint_b=np.ones(n, int), point=np.zeros((n, 3)), normal=np.tile([0.0, 0.0, 1.0], (n, 1)),
        signed_distance=rng.uniform(-2e-6, 5e-7, n), rotation=np.tile(np.eye(3), (n, 1, 1)), jacobian=J,
        velocity_bias=rng.normal(0, 0.01, 3 * n), stiffness=full(1e7), dissipation=full(10.0),
        friction=rng.uniform(0.3, 1.0, n), restitution=full(0.0))
    M = np.kron(np.eye(nb), box_mass_matrix(1.0, 0.05))
    grav = np.tile([0, 0, -G, 0, 0, 0], nb).astype(float)
    act = Actuation.zeros(nv)
    act.kp[::7] = 50.0                                     # implicit PD on a few dofs, one saturating
    act.kd[::7] = 2.0
    act.position_error[::7] = rng.normal(0, 0.01, act.kp[::7].size)
    act.effort_limit[::7] = np.r_[1e-3, np.full(act.kp[::7].size - 1, 10.0)]
    inputs = StepInputs(t=0, dt=2e-3, q=np.zeros(7 * nb), v=rng.normal(0, 0.2, nv), mass_matrix=M,
                        generalized_force=grav, gravity_force=grav, joint_damping=np.full(nv, 0.01),
                        actuation=act, contacts=contacts)
    return model, inputs


@pytest.mark.parametrize("name, options", [("lagged", {}), ("lagged", {"regularized_stiction": True}),
                                           ("similar", {}), ("sap", {})])
@pytest.mark.parametrize("seed, reverse", [(0, False), (1, True)])
def test_compiled_newton_matches_numpy_reference(name, options, seed, reverse):
    """The numba kernel (block-sparse Cholesky, exact line search on per-contact line data) and the numpy
    reference solve the same convex problem: same velocity, impulses, generalized impulse and actuation, and
    the same number of Newton iterations to within one, on a 10-body pile with coupling cycles."""
    model, inputs = random_pile(10, 40, seed, reverse_slices=reverse)
    opts = dict(options, relative_tolerance=1e-8)
    ref = make_engine(name, model, dict(opts, newton_kernel="numpy")).step(inputs)
    fast = make_engine(name, model, dict(opts, newton_kernel="numba")).step(inputs)
    assert ref.stats.status is SolverStatus.CONVERGED and fast.stats.status is SolverStatus.CONVERGED
    scale = np.abs(ref.v_next).max()
    np.testing.assert_allclose(fast.v_next, ref.v_next, atol=1e-6 * scale)
    np.testing.assert_allclose(fast.contact_impulse, ref.contact_impulse, atol=1e-6 * np.abs(ref.contact_impulse).max())
    np.testing.assert_allclose(fast.generalized_contact_force, ref.generalized_contact_force,
                               atol=1e-6 * np.abs(ref.generalized_contact_force).max())
    np.testing.assert_allclose(fast.actuation_force, ref.actuation_force, atol=1e-9)
    assert abs(fast.stats.iterations - ref.stats.iterations) <= 1
    assert ref.contact_impulse[:, 2].max() > 0 and np.any(ref.contact_impulse[:, 2] == 0)   # touching and not
    # momentum balance of the compiled step: A (v - v0) = dt (k2 + tau) + J^T gamma
    A = inputs.mass_matrix + inputs.dt * np.diag(inputs.joint_damping)
    lhs = A @ fast.v_next - inputs.mass_matrix @ inputs.v
    rhs = inputs.dt * (inputs.generalized_force + fast.actuation_force) \
        + inputs.contacts.jacobian.T @ fast.contact_impulse.ravel()
    np.testing.assert_allclose(lhs, rhs, atol=1e-8 * np.abs(rhs).max())


def test_block_sparse_cholesky_solves_like_dense():
    """The kernel's block-sparse Cholesky (minimum-degree order over trees, fill-in) solves H x = b like a
    dense solve for an SPD matrix with the tree-coupling pattern of a contact graph, and rejects an
    indefinite one."""
    from contact_sim_ros.engines import icf_kernels as K
    rng = np.random.default_rng(3)
    sizes = np.array([6, 6, 3, 6, 1, 6, 6, 2])
    nt = sizes.size
    ptr = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    nv = int(ptr[-1])
    tree_of_dof = np.repeat(np.arange(nt), sizes).astype(np.int64)
    links = [(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 4), (1, 6), (7, 3)]
    cols = np.full((len(links), 2), -1, dtype=np.int64)
    B = np.zeros((nv, nv))
    for c, (a, b) in enumerate(links):
        cols[c] = [ptr[a], ptr[b]]
        for t in (a, b):
            B[ptr[t]:ptr[t + 1], c] = rng.normal(size=sizes[t])
    for t in range(nt):
        Bt = rng.normal(size=(sizes[t], sizes[t]))
        B[ptr[t]:ptr[t + 1], ptr[t]:ptr[t + 1]] += Bt
    # H = block-diagonal part + sum over links of couplings only between linked trees
    H = np.zeros((nv, nv))
    for t in range(nt):
        s = slice(ptr[t], ptr[t + 1])
        H[s, s] = B[s, s] @ B[s, s].T + np.eye(sizes[t])
    for a, b in links:
        u = np.zeros(nv)
        u[ptr[a]:ptr[a + 1]] = rng.normal(size=sizes[a])
        u[ptr[b]:ptr[b + 1]] = rng.normal(size=sizes[b])
        H += np.outer(u, u)
    order, later_ptr, later = K._elimination_structure(nt, tree_of_dof, cols, sizes.astype(np.int64))
    assert sorted(order) == list(range(nt))
    # the compact block storage of the kernel: lower triangles of the tree blocks, then the filled blocks
    dptr, optr, pos = np.zeros(nt + 1, np.int64), np.zeros(max(later.size, 1), np.int64), np.zeros(nt, np.int64)
    length = K._block_offsets(ptr, order, later_ptr, later, dptr, optr, pos)
    assert length < nv * nv
    Hb = np.zeros(length)
    for a in range(nv):
        for b in range(a + 1):
            if tree_of_dof[a] == tree_of_dof[b] or H[a, b] != 0.0:
                Hb[K._entry(a, b, tree_of_dof, ptr, dptr, pos, later_ptr, later, optr)] = H[a, b]
    x = rng.normal(size=nv)
    Hf = Hb.copy()
    assert K._block_cholesky(Hf, order, later_ptr, later, ptr, dptr, optr, pos, np.zeros(nv))
    K._block_solve(Hf, order, later_ptr, later, ptr, dptr, optr, x_sol := x.copy())
    np.testing.assert_allclose(x_sol, np.linalg.solve(H, x), rtol=1e-9, atol=1e-12)
    bad = Hb.copy()
    bad[K._entry(ptr[2], ptr[2], tree_of_dof, ptr, dptr, pos, later_ptr, later, optr)] = -1.0
    assert not K._block_cholesky(bad, order, later_ptr, later, ptr, dptr, optr, pos, np.zeros(nv))


def test_newton_kernel_option_is_validated():
    model = make_model(["free"])
    with pytest.raises(ConfigError, match="newton_kernel"):
        make_engine("lagged", model, {"newton_kernel": "fortran"})


@pytest.mark.parametrize("kernel", ["numpy", "numba"])
@pytest.mark.parametrize("name", MODELS)
def test_small_step_applies_gravity_to_a_fast_body(name, kernel):
    """At dt = 1e-5 s a body moving at 10 m/s changes its momentum by dt m g, far below eps_r of its momentum:
    the solver still takes a Newton step, so gravity acts (it used to stop at iteration 0 with v = v0, and the
    sliding rod of XI-C floated at dt = 1e-5 s)."""
    dt = 1e-5
    contacts = box_contacts(np.full(4, 1.0), 0.025, 1e7, 0.0, 0.5)       # open contacts (1 m gap)
    inputs = box_inputs([10.0, 0, 0, 0, 0, 0], contacts, dt=dt)
    res = make_engine(name, make_model(["free"]), {"newton_kernel": kernel}).step(inputs)
    assert res.stats.status is SolverStatus.CONVERGED and res.stats.iterations >= 1
    np.testing.assert_allclose(res.v_next[:3], [10.0, 0.0, -G * dt], rtol=0, atol=1e-12)


# ---- the whole step in one compiled call (icf_kernels.icf_step) against stored steps of the previous formulation --
REFERENCE = Path(__file__).resolve().parent / "data" / "icf_step_reference.npz"
REFERENCE_CONFIGS = {"lagged": ("lagged", {}), "lagged_reg": ("lagged", {"regularized_stiction": True}),
                     "similar": ("similar", {}), "sap": ("sap", {})}


def _reference_inputs(ref, p):
    """StepInputs of one stored step (test/data/make_icf_step_reference.py); fields no engine reads are zeros."""
    n = ref[p + "c_signed_distance"].shape[0]
    contacts = ContactSet(
        geometry_a=np.zeros(n, int), geometry_b=np.ones(n, int), joint_a=np.zeros(n, int), joint_b=np.ones(n, int),
        point=np.zeros((n, 3)), normal=np.zeros((n, 3)), signed_distance=ref[p + "c_signed_distance"],
        rotation=np.zeros((n, 3, 3)), jacobian=ref[p + "c_jacobian"], velocity_bias=ref[p + "c_velocity_bias"],
        stiffness=ref[p + "c_stiffness"], dissipation=ref[p + "c_dissipation"], friction=ref[p + "c_friction"],
        restitution=np.zeros(n))
    act = Actuation(*[ref[p + "act_" + f] for f in ("effort", "kp", "kd", "position_error", "velocity_target",
                                                    "effort_limit")])
    v = ref[p + "v"]
    return StepInputs(t=float(ref[p + "t"]), dt=float(ref[p + "dt"]), q=np.zeros(v.size + 1), v=v,
                      mass_matrix=ref[p + "mass_matrix"], generalized_force=ref[p + "generalized_force"],
                      gravity_force=ref[p + "gravity_force"], joint_damping=ref[p + "joint_damping"],
                      actuation=act, contacts=contacts)


def test_compiled_step_matches_stored_reference():
    """The whole step in one compiled call (A, p0, Jacobian compression, Delassus estimate, contact parameters,
    Newton) reproduces the previous formulation (numpy setup around the compiled Newton loop, commit 841d610)
    on stored inputs of real scenes - the box stick-slip, the sphere's impact and rolling, the iiwa held by PD
    with no contact, the default scene (robot, table, objects), the conveyor (velocity bias), a clutter pile and
    the 10-box pile with permuted trees - for Lagged (plain and eq. 26), Similar and SAP: velocities, impulses,
    generalized forces, actuation, the lagged normal impulse and the stiction tolerance within 1e-10 relative
    (the summation order of M v0 differs: 1e-16 on the small scenes, up to ~2e-11 through 19 Newton iterations of
    the stiff pile), the same status and iteration count. With ``defer_open_contacts`` off (the previous
    formulation solved every contact in every iteration; the deferred path is checked against this one in
    ``test_deferred_open_contacts_give_the_same_solution``)."""
    from contact_sim_ros.sim.simulator import Simulator
    ref = np.load(REFERENCE)
    root = Path(__file__).resolve().parents[1]
    checked = 0
    cases = [str(entry).split("|") for entry in ref["scenes"]] + [["pile", "", "1"]]
    for key, scene, count in cases:
        if key == "pile":
            model = random_pile(10, 40, 1, reverse_slices=True)[0]
        else:
            model = Simulator(str(root / scene), engine="lagged").model
        for s in range(int(count)):
            p = f"{key}/{s}/"
            inputs = _reference_inputs(ref, p)
            for ckey, (name, options) in REFERENCE_CONFIGS.items():
                engine = make_engine(name, model, dict(options, defer_open_contacts=False))
                res = engine.step(inputs)
                q = p + ckey + "/"
                if q + "v_next" not in ref:
                    # 841d610 raised KeyError for eq. 26 without contacts; now it is a plain step
                    assert inputs.contacts.size == 0 and res.stats.status is SolverStatus.CONVERGED
                    continue
                assert res.stats.status.value == str(ref[q + "status"]), q
                assert res.stats.iterations == int(ref[q + "iterations"]), q
                got = {"v_next": res.v_next, "contact_impulse": res.contact_impulse,
                       "generalized_contact_force": res.generalized_contact_force,
                       "actuation_force": res.actuation_force, "stiction_tolerance": engine.last_stiction_tolerance,
                       "friction_normal_impulse": res.friction_normal_impulse}
                for field, value in got.items():
                    if q + field not in ref:
                        assert value is None, (q, field)
                        continue
                    want = ref[q + field]
                    assert value.shape == want.shape, (q, field)
                    scale = np.abs(want).max() if want.size else 0.0
                    np.testing.assert_allclose(value, want, rtol=0, atol=1e-10 * scale, err_msg=q + field)
                checked += 1
    assert checked == sum(name.endswith("/v_next") for name in ref.files) == 85


def test_deferred_open_contacts_give_the_same_solution():
    """``defer_open_contacts`` (the default) leaves contacts with a positive gap that exert nothing at v0 nor at
    the contact-free velocity out of Newton's problem until an iterate makes them act: on the stored steps of real
    scenes (box, sphere impact, iiwa, default scene, conveyor, clutter pile) and the 10-box pile, for every model,
    it converges to the solution of the whole problem - velocities and impulses within 1e-8 of the solve with
    every contact (both at eps_r = 1e-10), the left-out contacts' impulses exactly zero, the same status at the
    default tolerance - and it does leave contacts out (the clutter pile's margin contacts)."""
    from contact_sim_ros.sim.simulator import Simulator
    ref = np.load(REFERENCE)
    root = Path(__file__).resolve().parents[1]
    cases = [str(entry).split("|") for entry in ref["scenes"]] + [["pile", "", "1"]]
    deferred = 0
    for key, scene, count in cases:
        if key == "pile":
            model = random_pile(10, 40, 1, reverse_slices=True)[0]
        else:
            model = Simulator(str(root / scene), engine="lagged").model
        for s in range(int(count)):
            inputs = _reference_inputs(ref, f"{key}/{s}/")
            for ckey, (name, options) in REFERENCE_CONFIGS.items():
                results = {}
                for defer in (False, True):
                    for tol in (1e-5, 1e-10):
                        engine = make_engine(name, model, dict(options, defer_open_contacts=defer,
                                                               relative_tolerance=tol))
                        res = engine.step(inputs)
                        results[defer, tol] = res
                        if defer and tol == 1e-10:
                            deferred += engine.last_deferred_contacts
                assert results[True, 1e-5].stats.status is results[False, 1e-5].stats.status, (key, s, ckey)
                full, lazy = results[False, 1e-10], results[True, 1e-10]
                assert full.stats.status is SolverStatus.CONVERGED and lazy.stats.status is SolverStatus.CONVERGED
                for field in ("v_next", "contact_impulse", "generalized_contact_force", "actuation_force"):
                    want, got = getattr(full, field), getattr(lazy, field)
                    scale = max(np.abs(want).max() if want.size else 0.0, 1e-12)
                    np.testing.assert_allclose(got, want, rtol=0, atol=1e-8 * scale, err_msg=f"{key}/{s}/{ckey} {field}")
    assert deferred > 0


@pytest.mark.parametrize("name", MODELS)
def test_deferred_open_contact_joins_when_an_iterate_closes_its_gap(name):
    """Box B rests 0.1 mm above box A, which is pressed 2 mm into the ground (k = 1e6 N/m): at v0 (rest) and at
    the contact-free velocity (A falls) the A-B contact is open, so it is deferred; the ground throws A up into B
    within the step, so the contact must join Newton's problem: the step equals the solve with every contact
    (velocities and impulses within 1e-8) and the A-B contact carries a normal impulse."""
    model = make_model(["free", "free"])
    nv = 12
    M = np.kron(np.eye(2), box_mass_matrix(1.0, 0.05))
    J = np.zeros((6, nv))
    J[0:3, 0:3] = np.eye(3)                                # ground (A = world) - box A's centre
    J[3:6, 6:9] = np.eye(3)                                # box A - box B: B's velocity minus A's
    J[3:6, 0:3] = -np.eye(3)
    n = 2
    contacts = ContactSet(
        geometry_a=np.zeros(n, int), geometry_b=np.ones(n, int), joint_a=np.zeros(n, int), joint_b=np.ones(n, int),
        point=np.zeros((n, 3)), normal=np.tile([0.0, 0.0, 1.0], (n, 1)), signed_distance=np.array([-2e-3, 1e-4]),
        rotation=np.tile(np.eye(3), (n, 1, 1)), jacobian=J, velocity_bias=np.zeros(3 * n),
        stiffness=np.full(n, 1e6), dissipation=np.full(n, 1.0), friction=np.full(n, 0.5), restitution=np.zeros(n))
    grav = np.tile([0, 0, -G, 0, 0, 0], 2).astype(float)
    inputs = StepInputs(t=0, dt=2e-3, q=np.zeros(14), v=np.zeros(nv), mass_matrix=M, generalized_force=grav,
                        gravity_force=grav, joint_damping=np.zeros(nv), actuation=Actuation.zeros(nv),
                        contacts=contacts)
    full = make_engine(name, model, {"defer_open_contacts": False, "relative_tolerance": 1e-10}).step(inputs)
    engine = make_engine(name, model, {"relative_tolerance": 1e-10})
    lazy = engine.step(inputs)
    assert full.stats.status is SolverStatus.CONVERGED and lazy.stats.status is SolverStatus.CONVERGED
    assert full.contact_impulse[1, 2] > 0.0 and engine.last_deferred_contacts == 0
    np.testing.assert_allclose(lazy.v_next, full.v_next, rtol=0, atol=1e-8 * np.abs(full.v_next).max())
    np.testing.assert_allclose(lazy.contact_impulse, full.contact_impulse, rtol=0,
                               atol=1e-8 * np.abs(full.contact_impulse).max())


@pytest.mark.parametrize("name", MODELS)
def test_step_without_contacts_is_one_linear_solve_with_the_implicit_pd(name):
    """Without contacts the step is the linear system (M + dt diag(d) + dt diag(dt kp + kd)) v =
    M v0 + dt (k2 + effort + kp e + kd v_target) of the implicit PD (unsaturated): one tree of 6 dofs with a full
    mass matrix, PD on 3 of them, one Newton iteration; also with eq. 26 (no contact, nothing to regularize)."""
    model = make_model(["free"])
    rng = np.random.default_rng(7)
    B = rng.normal(size=(6, 6))
    M = B @ B.T + 6 * np.eye(6)
    dt = 1e-3
    act = Actuation.zeros(6)
    act.kp[:3] = [100.0, 50.0, 10.0]
    act.kd[:3] = [5.0, 1.0, 2.0]
    act.position_error[:3] = [0.01, -0.02, 0.05]
    act.velocity_target[:3] = [0.1, 0.0, -0.2]
    act.effort[2:4] = [0.5, 1.0]
    damping = np.array([0.1, 0.2, 0.0, 0.05, 0.0, 0.3])
    v0 = rng.normal(size=6)
    k2 = rng.normal(size=6)
    inputs = StepInputs(t=0.0, dt=dt, q=np.zeros(7), v=v0, mass_matrix=M, generalized_force=k2,
                        gravity_force=np.zeros(6), joint_damping=damping, actuation=act, contacts=ContactSet.empty(6))
    lhs = M + dt * np.diag(damping) + dt * np.diag(dt * act.kp + act.kd)
    rhs = M @ v0 + dt * (k2 + act.effort + act.kp * act.position_error + act.kd * act.velocity_target)
    expected = np.linalg.solve(lhs, rhs)
    for options in ({}, {"regularized_stiction": True}):
        res = make_engine(name, model, options).step(inputs)
        assert res.stats.status is SolverStatus.CONVERGED and res.stats.iterations == 1
        np.testing.assert_allclose(res.v_next, expected, rtol=1e-12)
        tau = act.effort + act.kp * (act.position_error - dt * res.v_next) + act.kd * (act.velocity_target
                                                                                      - res.v_next)
        np.testing.assert_allclose(res.actuation_force, tau, rtol=1e-12)
        assert res.contact_impulse.shape == (0, 3) and not np.any(res.generalized_contact_force)


@pytest.mark.parametrize("name", MODELS)
def test_compiled_scratch_grows_with_the_number_of_contacts(name):
    """One engine stepped on 4, then 40, then 4 contacts (its scratch grown on the way) gives each step exactly
    what a fresh engine gives, and its results are new arrays (a later step does not overwrite them)."""
    few = box_contacts(-1e-4, 0.025, 1e6, 1.0, 0.5, nv=60)
    model, many = random_pile(10, 40, 2)
    few_inputs = StepInputs(t=0.0, dt=many.dt, q=many.q, v=many.v, mass_matrix=many.mass_matrix,
                            generalized_force=many.generalized_force, gravity_force=many.gravity_force,
                            joint_damping=many.joint_damping, actuation=many.actuation, contacts=few)
    engine = make_engine(name, model)
    results = [engine.step(inputs) for inputs in (few_inputs, many, few_inputs)]
    first = results[0].v_next.copy()
    for inputs, res in zip((few_inputs, many, few_inputs), results):
        fresh = make_engine(name, model).step(inputs)
        assert res.stats.status is SolverStatus.CONVERGED
        np.testing.assert_array_equal(res.v_next, fresh.v_next)
        np.testing.assert_array_equal(res.contact_impulse, fresh.contact_impulse)
        np.testing.assert_array_equal(res.generalized_contact_force, fresh.generalized_contact_force)
    np.testing.assert_array_equal(results[0].v_next, first)
    assert engine.last_stiction_tolerance.shape == (4,)


@pytest.mark.parametrize("engine_name", ["lagged", "sap"])
def test_known_jacobian_columns_give_the_step_of_the_scanned_jacobian(engine_name):
    """The contact query's ContactSet.jacobian_columns let the compiled step read each contact's few Jacobian columns
    instead of scanning its rows: on 0.6 s of the 40-object clutter (contacts with the bin and between objects) the
    step with them equals, to the bit, the step of a second engine that scans the same dense Jacobian (columns not
    known), every step."""
    import dataclasses

    from contact_sim_ros.sim.simulator import Simulator
    root = Path(__file__).resolve().parents[1]
    sim = Simulator(str(root / "scenes" / "icf_clutter.yaml"), engine=engine_name, time_step=2e-3)
    assert sim._tree is not None
    sim._tree = None            # the staged step: the engine's step_into (the fused tree step calls its kernel)
    scanning = make_engine(engine_name, sim.model, {})
    original = sim.engine.step_into        # the simulator's call (ContactEngine.step_into)
    compared = {"steps": 0, "contacts": 0, "two_body": 0}

    def both(inputs, slot):
        known = original(inputs, slot)
        c = inputs.contacts
        if c.size:
            assert c.jacobian_columns is not None and c.jacobian_columns.shape[0] == c.size
            scanned = scanning.step(dataclasses.replace(inputs, contacts=dataclasses.replace(c, jacobian_columns=None)))
            assert known.stats.iterations == scanned.stats.iterations
            for field in ("v_next", "contact_impulse", "generalized_contact_force", "actuation_force"):
                np.testing.assert_array_equal(getattr(known, field), getattr(scanned, field), err_msg=field)
            compared["steps"] += 1
            compared["contacts"] += c.size
            compared["two_body"] += int(((c.joint_a > 0) & (c.joint_b > 0)).sum())
        return known

    sim.engine.step_into = both
    for _ in range(300):
        sim.step(strict=True)
    assert compared["steps"] > 200 and compared["contacts"] > 5000 and compared["two_body"] > 1000, compared
