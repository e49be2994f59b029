"""TAMSI engine (Castro et al. 2020): contact model, Newton Jacobian, TALS, and the section IV-A box.

Everything here runs on hand-built StepInputs (no scene, no collision query) so that the engine math is checked
against closed-form results and the paper's box experiment.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from scipy.optimize import brentq

from contact_sim_ros.engines.base import Actuation, SolverStatus, StepInputs
from contact_sim_ros.engines.registry import engine_names, make_engine
from contact_sim_ros.engines.tamsi import TamsiEngine
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.geometry.contact_set import ContactSet

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "tamsi"))
import harmonic_box as hb  # noqa: E402

G = 9.81


def chain_model(nv: int):
    """A MultibodyModel with nv unactuated prismatic dofs (the engine only needs nv)."""
    model = hb.prismatic_box_model()
    pm = pin.Model()
    parent = 0
    for i in range(nv):
        parent = pm.addJoint(parent, pin.JointModelPX(), pin.SE3.Identity(), f"x{i}")
        pm.appendBodyToJoint(parent, pin.Inertia(1.0, np.zeros(3), np.eye(3)), pin.SE3.Identity())
    z = np.zeros(nv)
    from dataclasses import replace
    return replace(model, pin_model=pm, joint_damping=z, joint_friction=z, actuated=np.zeros(nv, bool),
                   tree_velocity_slices=(slice(0, nv),))


def contact_set(jacobian, signed_distance, stiffness, dissipation, friction, bias=None) -> ContactSet:
    n = len(signed_distance)
    zi = np.zeros(n, int)
    return ContactSet(zi, zi + 1, zi, zi + 1, np.zeros((n, 3)), np.tile([0.0, 0.0, 1.0], (n, 1)),
                      np.asarray(signed_distance, float), np.tile(np.eye(3), (n, 1, 1)),
                      np.asarray(jacobian, float), np.zeros(3 * n) if bias is None else np.asarray(bias, float),
                      np.full(n, stiffness, float), np.full(n, dissipation, float), np.full(n, friction, float),
                      np.zeros(n))


def step_inputs(M, v, force, contacts, dt, actuation=None, damping=None, t=0.0):
    nv = len(v)
    return StepInputs(t=t, dt=dt, q=np.zeros(nv), v=np.asarray(v, float), mass_matrix=np.asarray(M, float),
                      generalized_force=np.asarray(force, float), gravity_force=np.zeros(nv),
                      joint_damping=np.zeros(nv) if damping is None else np.asarray(damping, float),
                      actuation=actuation or Actuation.zeros(nv), contacts=contacts)


# ----------------------------------------------------------------------------------------------- options
def test_registered_and_options_validated():
    assert "tamsi" in engine_names()
    model = hb.prismatic_box_model()
    engine = make_engine("tamsi", model, {"stiction_tolerance": 1e-3, "coupling": "one_way"})
    assert isinstance(engine, TamsiEngine) and engine.options.stiction_tolerance == 1e-3
    defaults = TamsiEngine.Options()
    assert (defaults.stiction_tolerance, defaults.use_tals, defaults.theta_max, defaults.smooth_friction,
            defaults.coupling) == (1e-4, True, math.pi / 3, False, "two_way")
    with pytest.raises(ConfigError, match="one_way, two_way"):
        make_engine("tamsi", model, {"coupling": "three_way"})
    with pytest.raises(ConfigError, match="stiction_tolerance"):
        make_engine("tamsi", model, {"stiction_tolerance": -1.0})
    with pytest.raises(ConfigError, match="valid options"):
        make_engine("tamsi", model, {"stiction_tol": 1e-4})
    with pytest.raises(ConfigError, match="max_iterations"):
        make_engine("tamsi", model, {"max_iterations": 0})
    with pytest.raises(ConfigError, match="valid kernels: numba, numpy"):
        make_engine("tamsi", model, {"kernel": "fortran"})
    assert defaults.kernel == "numba"


# ----------------------------------------------------------------------------------------------- contact model
@pytest.mark.parametrize("coupling", ["two_way", "one_way"])
@pytest.mark.parametrize("smooth", [False, True])
def test_sliding_box_decelerates_at_mu_g(coupling, smooth):
    """A box sliding at 1 m/s with no push: Coulomb friction mu W decelerates it at mu g exactly."""
    engine = TamsiEngine(hb.prismatic_box_model(), {"coupling": coupling, "smooth_friction": smooth})
    contact = hb.box_contact(mu=0.5)
    v, dt = 1.0, 1e-3
    for i in range(50):
        res = engine.step(step_inputs([[hb.MASS]], [v], [0.0], contact, dt))
        assert res.stats.status is SolverStatus.CONVERGED
        v = res.v_next[0]
    assert v == pytest.approx(1.0 - 0.5 * hb.GRAVITY * 50 * dt, rel=1e-12)
    # the impulse is on the box (B): tangential -mu pi h, normal pi h = W h
    assert res.contact_impulse[0] == pytest.approx([-0.5 * hb.WEIGHT * dt, 0.0, hb.WEIGHT * dt], rel=1e-9)


def test_stiction_creeps_at_the_regularized_rate():
    """Below the friction limit, the steady state of eq. (7) is the creep velocity v = f v_s / (mu W)."""
    engine = TamsiEngine(hb.prismatic_box_model())
    contact = hb.box_contact()
    push = 0.5 * hb.MU * hb.WEIGHT
    v = 0.0
    for _ in range(20):
        res = engine.step(step_inputs([[hb.MASS]], [v], [push], contact, 0.01))
        v = res.v_next[0]
    assert v == pytest.approx(push * hb.V_STICTION / (hb.MU * hb.WEIGHT), rel=1e-9)


def test_implicit_penetration_solves_eq19():
    """Two-way coupling: m (v - v0) = h (-m g + pi(v)) with pi = k (1 - d v)(delta0 - h v), eq. (5) + (19)."""
    m, k, d, h = 2.0, 1e4, 0.5, 5e-3
    delta0, v0 = 1e-3, -0.3
    engine = TamsiEngine(hb.prismatic_box_model(m))
    contacts = contact_set([[0.0], [0.0], [1.0]], [-delta0], k, d, 0.3)
    res = engine.step(step_inputs([[m]], [v0], [-m * G], contacts, h))
    v = res.v_next[0]
    # closed form: the quadratic m (v - v0) + h m g - h k (1 - d v)(delta0 - h v) = 0, root near v0
    a = -h * k * d * h
    b = m + h * k * (d * delta0 + h)
    c = -m * v0 + h * m * G - h * k * delta0
    roots = np.roots([a, b, c])
    expected = roots[np.argmin(np.abs(roots - v0))].real
    assert v == pytest.approx(expected, rel=1e-10)
    assert res.contact_impulse[0, 2] == pytest.approx(h * k * (1 - d * v) * (delta0 - h * v), rel=1e-9)
    # a contact inside the margin that the step does not close carries no force
    far = contact_set([[0.0], [0.0], [1.0]], [1e-2], k, d, 0.3)
    res = engine.step(step_inputs([[m]], [0.1], [0.0], far, h))
    assert res.v_next[0] == pytest.approx(0.1) and np.all(res.contact_impulse == 0.0)


def _random_problem(rng, nv=5, n=3, coupling="two_way", smooth=False):
    A = rng.normal(size=(nv, nv))
    M = A @ A.T + nv * np.eye(nv)
    J = rng.normal(size=(3 * n, nv))
    engine = TamsiEngine(chain_model(nv), {"coupling": coupling, "smooth_friction": smooth,
                                            "stiction_tolerance": 1e-2})
    contacts = contact_set(J, -rng.uniform(1e-3, 5e-3, n), 1e4, 2.0, 0.7, bias=rng.normal(size=3 * n) * 1e-3)
    act = Actuation(effort=rng.normal(size=nv), kp=np.full(nv, 50.0), kd=np.full(nv, 3.0),
                    position_error=rng.normal(size=nv) * 0.1, velocity_target=rng.normal(size=nv),
                    effort_limit=np.full(nv, 1e3))
    inputs = step_inputs(M, rng.normal(size=nv) * 0.01, rng.normal(size=nv), contacts, 2e-3, actuation=act,
                         damping=np.full(nv, 0.4))
    return engine, inputs


@pytest.mark.parametrize("coupling", ["two_way", "one_way"])
@pytest.mark.parametrize("smooth", [False, True])
def test_newton_jacobian_is_the_derivative_of_the_residual(coupling, smooth):
    """Eq. (23) (W_nn + W_tt + W_tn, non-symmetric for two-way) against central differences of eq. (21)."""
    rng = np.random.default_rng(3)
    engine, inputs = _random_problem(rng, coupling=coupling, smooth=smooth)
    engine._setup(inputs)
    nv = inputs.v.size
    J = inputs.contacts.jacobian
    checked_states = set()
    for trial in range(30):
        v = rng.normal(size=nv) * rng.choice([1e-3, 1e-2, 0.3])
        vc = (J @ v + inputs.contacts.velocity_bias).reshape(-1, 3)
        s = np.linalg.norm(vc[:, :2], axis=1) / engine.options.stiction_tolerance
        if np.any(np.abs(s - 1.0) < 0.05):
            continue          # stay away from the kink of eq. (7)
        r, A = engine._evaluate(v)
        A = A.copy()
        eps = 1e-7 * max(1e-3, np.abs(v).max())
        fd = np.empty((nv, nv))
        for j in range(nv):
            e = np.zeros(nv)
            e[j] = eps
            fd[:, j] = (engine._evaluate(v + e)[0] - engine._evaluate(v - e)[0]) / (2 * eps)
        assert np.allclose(A, fd, rtol=1e-5, atol=1e-6 * np.abs(A).max()), (trial, np.abs(A - fd).max())
        checked_states.add((bool(np.any(s < 1)), bool(np.any(s > 1))))
    assert (True, True) in checked_states or {(True, False), (False, True)} <= checked_states
    if coupling == "two_way":
        assert not np.allclose(A, A.T)        # W_tn makes the Jacobian non-symmetric (eq. 22)
    else:
        assert np.allclose(A, A.T)            # semi-implicit Euler: SPD Jacobian (eq. 17)


def test_friction_cone_and_momentum_between_two_free_bodies():
    """Point masses A and B colliding obliquely (no gravity): the contact impulse is equal and opposite (total
    momentum conserved) and inside the Coulomb cone |gamma_t| <= mu gamma_n."""
    m_a, m_b, mu = 1.0, 0.5, 0.4
    R = np.eye(3)
    J = np.hstack([-R.T, R.T])          # velocity of B relative to A in the contact frame (t1, t2, n)
    M = np.diag([m_a] * 3 + [m_b] * 3)
    engine = TamsiEngine(chain_model(6))
    contacts = contact_set(J, [-1e-3], 1e5, 1.0, mu)
    v = np.array([0.3, -0.1, 0.5, -0.2, 0.4, -1.0])
    p0 = m_a * v[:3] + m_b * v[3:]
    for _ in range(10):
        res = engine.step(step_inputs(M, v, np.zeros(6), contacts, 1e-3))
        assert res.stats.status is SolverStatus.CONVERGED
        gamma = res.contact_impulse[0]
        assert gamma[2] > 0
        assert np.hypot(gamma[0], gamma[1]) <= mu * gamma[2] * (1 + 1e-12)
        v = res.v_next
    np.testing.assert_allclose(m_a * v[:3] + m_b * v[3:], p0, atol=1e-13)


def test_two_way_coupling_is_stable_where_semi_implicit_euler_is_not():
    """Section V: a 1 kg mass dropped on a k = 1e5 N/m contact with h = 10 ms (h sqrt(k/m) = 3.2 > 2).
    Semi-implicit Euler (one-way) gains energy and bounces higher than it was dropped from; TAMSI (two-way,
    eq. 19) never exceeds the drop height and comes to rest at the static penetration m g / k."""
    m, k, h, z0 = 1.0, 1e5, 1e-2, 0.02
    results = {}
    for coupling in ("one_way", "two_way"):
        engine = TamsiEngine(hb.prismatic_box_model(m), {"coupling": coupling})
        z, v = z0, 0.0
        heights = []
        for i in range(300):
            contacts = contact_set([[0.0], [0.0], [1.0]], [z], k, 0.0, 0.5)
            res = engine.step(step_inputs([[m]], [v], [-m * G], contacts, h))
            assert res.stats.status is SolverStatus.CONVERGED
            v = res.v_next[0]
            z += h * v
            heights.append(z)
        results[coupling] = (np.array(heights), v)
    heights, v = results["two_way"]
    assert heights.max() <= z0
    assert heights[-1] == pytest.approx(-m * G / k, rel=1e-6) and abs(v) < 1e-9
    assert results["one_way"][0][100:].max() > 2 * z0


# ----------------------------------------------------------------------------------------------- actuation
def test_implicit_pd_and_effort_limit_enter_the_newton_system():
    m, h, kp, kd, effort, damping = 2.0, 1e-2, 400.0, 5.0, 1.5, 0.7
    act = Actuation(np.array([effort]), np.array([kp]), np.array([kd]), np.array([0.1]), np.array([0.2]),
                    np.array([np.inf]))
    engine = TamsiEngine(hb.prismatic_box_model(m))
    v0 = -0.3
    res = engine.step(step_inputs([[m]], [v0], [0.0], ContactSet.empty(1), h, act, damping=[damping]))
    # (m + h kd + h^2 kp + h D) v = m v0 + h (effort + kp e + kd v_target)
    expected = (m * v0 + h * (effort + kp * 0.1 + kd * 0.2)) / (m + h * kd + h * h * kp + h * damping)
    assert res.v_next[0] == pytest.approx(expected, rel=1e-12)
    assert res.stats.iterations == 1
    assert res.actuation_force[0] == pytest.approx(effort + kp * (0.1 - h * expected) + kd * (0.2 - expected))
    act.effort_limit[:] = 3.0          # saturates: tau = +3 N
    res = engine.step(step_inputs([[m]], [v0], [0.0], ContactSet.empty(1), h, act, damping=[damping]))
    assert res.v_next[0] == pytest.approx((m * v0 + 3.0 * h) / (m + h * damping), rel=1e-12)
    assert res.actuation_force[0] == pytest.approx(3.0)


# ----------------------------------------------------------------------------------------------- TALS
def test_tals_limits_at_the_stiction_crossing_and_at_theta_max():
    engine = TamsiEngine(hb.prismatic_box_model())
    vs = engine.options.stiction_tolerance
    # sliding -> sliding through the stiction circle: stop where v^{k+1} . dv = 0 (section III-A)
    v = np.array([[1e-2, 0.0]])
    dv = np.array([[-2e-2, 4e-5]])
    alpha = engine._tals_alpha(v, dv, np.linalg.norm(v, axis=1))[0]
    v1 = v[0] + alpha * dv[0]
    assert 0 < alpha < 1 and abs(v1 @ dv[0]) < 1e-12 * np.linalg.norm(dv) ** 2 and np.linalg.norm(v1) < vs
    # a large turn outside the circle: limited to theta_max = pi/3
    v = np.array([[1e-2, 0.0]])
    dv = np.array([[0.0, 1e-1]])
    alpha = engine._tals_alpha(v, dv, np.linalg.norm(v, axis=1))[0]
    v1 = v[0] + alpha * dv[0]
    assert math.atan2(v1[1], v1[0]) == pytest.approx(math.pi / 3, rel=1e-12)
    # a small turn is not limited, and a vectorised call mixes the cases
    v = np.array([[1e-2, 0.0], [1e-2, 0.0]])
    dv = np.array([[1e-3, 1e-3], [0.0, 1e-1]])
    alphas = engine._tals_alpha(v, dv, np.linalg.norm(v, axis=1))
    assert alphas[0] == 1.0 and alphas[1] < 1.0


# ----------------------------------------------------------------------------------------------- section IV-A
def _first_slide_to_stick_time():
    """Rigid Coulomb solution of the box from rest: slip starts when f = W (t1), ends when v returns to 0."""
    w, a = hb.WEIGHT, hb.FORCE_AMPLITUDE
    t1 = math.asin(w / a) / (2 * math.pi)

    def momentum(t):  # m v(t) during the first slip
        return a / (2 * math.pi) * (math.cos(2 * math.pi * t1) - math.cos(2 * math.pi * t)) - w * (t - t1)

    return brentq(momentum, 0.3, 0.6)


def test_box_with_tals_converges_through_every_stick_slip_transition():
    engine = TamsiEngine(hb.prismatic_box_model(), {"use_tals": True})
    t, v, iterations, statuses, failure = hb.simulate_engine(engine, 0.01, 2.0)
    assert failure is None and all(s is SolverStatus.CONVERGED for s in statuses)
    sliding = np.abs(v) > hb.V_STICTION
    to_stick = np.flatnonzero(sliding[:-1] & ~sliding[1:])
    to_slide = np.flatnonzero(~sliding[:-1] & sliding[1:])
    assert len(to_stick) >= 3 and len(to_slide) >= 3
    assert iterations.max() <= 6
    # the first slide -> stick step lands in stiction within the step that contains the rigid solution's stop
    t_stop = _first_slide_to_stick_time()
    assert t[to_stick[0]] < t_stop <= t[to_stick[0]] + 0.01 + 1e-12


def test_box_without_tals_fails_at_the_first_slide_to_stick_transition():
    engine = TamsiEngine(hb.prismatic_box_model(), {"use_tals": False, "max_iterations": 100})
    t, v, iterations, statuses, failure = hb.simulate_engine(engine, 0.01, 2.0)
    t_stop = _first_slide_to_stick_time()
    assert failure is not None and failure < t_stop <= failure + 0.01 + 1e-12
    assert all(s is SolverStatus.CONVERGED for s in statuses[:-1])
    assert statuses[-1] is SolverStatus.MAX_ITERATIONS
    # the failed step reports the cause and returns a finite state
    inputs = step_inputs([[hb.MASS]], [v[-1]], [hb.harmonic_force(failure)], hb.box_contact(), 0.01, t=failure)
    res = engine.step(inputs)
    assert res.stats.status is SolverStatus.MAX_ITERATIONS and "t = " in res.stats.message
    assert np.all(np.isfinite(res.v_next)) and np.all(np.isfinite(res.contact_impulse))
    # Newton cycles between the two sides of the stiction region (Fig. 2/4): the updates do not shrink
    errors = np.array([e for e, _ in engine.iteration_history])
    assert errors[-10:].min() > 10 * engine.options.relative_tolerance * hb.V_STICTION
    # TALS converges at the same step (Fig. 4 bottom)
    tals = TamsiEngine(hb.prismatic_box_model())
    assert tals.step(inputs).stats.status is SolverStatus.CONVERGED


def test_box_velocity_error_is_first_order_in_the_time_step():
    duration, sample = 1.0, 0.04
    reference = hb.reference_solution(duration, sample, h=2e-6)
    steps = np.array([1e-2, 5e-3, 2.5e-3, 1.25e-3])
    errors = []
    for h in steps:
        t, v, _, statuses, failure = hb.simulate_engine(TamsiEngine(hb.prismatic_box_model()), h, duration)
        assert failure is None
        errors.append(np.sqrt(np.mean((v[::int(round(sample / h))] - reference) ** 2)))
    slope = np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert 0.8 <= slope <= 1.2, (slope, errors)


# ----------------------------------------------------------------------------------------------- section VI-A
def gripper_scene():
    """scenes/tamsi_gripper_mug.yaml (its URDF path is relative to the package's urdf/ folder)."""
    return str(Path(__file__).resolve().parents[1] / "scenes" / "tamsi_gripper_mug.yaml")


def test_gripper_holds_the_shaken_mug_through_stick_slip():
    """Section VI-A for 1 s (2 periods) at h = 3 ms: every step converges without sub-steps, the mug stays in
    the grasp while it alternately sticks and slips, and while it slips the friction of eq. (6) accelerates it
    at mu (pi_left + pi_right) / m relative to nothing else (no gravity)."""
    from contact_sim_ros.sim.simulator import Simulator
    h, mu, m = 3e-3, 0.1, 0.1
    sim = Simulator(gripper_scene(), engine="tamsi", time_step=h)
    mug = sim.model.free_body("mug")
    slip, rel, checked = [], [], 0
    for _ in range(int(round(1.0 / h))):
        v_before = sim.body_velocity("mug")[2]
        report = sim.step(strict=True)
        assert report.ok and report.substeps == 1 and report.status is SolverStatus.CONVERGED
        mug_v = sim.body_velocity("mug")
        slip.append(mug_v[2] - sim.body_velocity("gripper_base")[2])
        rel.append(sim.body_pose("mug").translation[2] - sim.body_pose("gripper_base").translation[2])
        gamma = sim.last_result.contact_impulse
        on_mug = (sim.contacts.joint_a == mug.joint_id) | (sim.contacts.joint_b == mug.joint_id)
        assert on_mug.sum() == 2 and np.all(gamma[on_mug, 2] > 0)
        slipping = np.linalg.norm(sim.contacts.relative_velocity(sim.v)[:, :2], axis=1) > 10 * 1e-4
        if slipping[on_mug].all():
            expected = mu * gamma[on_mug, 2].sum() / h / m
            assert abs(mug_v[2] - v_before) / h == pytest.approx(expected, rel=0.02)
            checked += 1
    slip, rel = np.abs(np.array(slip)), np.array(rel)
    assert np.abs(rel).max() < 0.03                                  # pads stay on the mug's 10 cm side
    assert np.abs(sim.body_pose("mug").translation[:2]).max() < 1e-3
    sticking = slip < 1e-4
    assert sticking.mean() > 0.2 and (slip > 1e-2).mean() > 0.2
    assert np.count_nonzero(sticking[1:] != sticking[:-1]) >= 6       # stick <-> slip at least 3 times each way
    assert checked > 20


# ----------------------------------------------------------------------------------------------- section VI-B
def _allegro(duration):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "tamsi"))
    import allegro_mug
    return allegro_mug, allegro_mug.run(duration, record_every=10)


def test_allegro_hand_reorients_the_mug_without_dropping_it():
    """Section VI-B (scenes/tamsi_allegro_mug.yaml), first 0.7 s at h = 0.7 ms: every step converges without
    sub-steps while the mug rolls into the curled fingers (a rotation of more than 45 deg) with several
    simultaneous loaded contacts, and it stays on the palm."""
    allegro_mug, r = _allegro(0.7)
    assert r["substeps"] == 0
    assert allegro_mug.held(r)
    assert np.degrees(r["angle"].max()) > 45.0
    assert r["loaded"].max() >= 3


def test_allegro_hand_full_15_s():
    """Section VI-B at full length (h = 0.7 ms, 15 s; ~5 s CPU): no sub-steps, the mug is never dropped."""
    allegro_mug, r = _allegro(15.0)
    assert r["substeps"] == 0 and allegro_mug.held(r)
    # periodic reorientation: the mug turns back and forth by more than 60 deg in every 3 s finger cycle
    for k in range(5):
        window = (r["t"] > 3 * k) & (r["t"] <= 3 * (k + 1))
        assert np.degrees(np.ptp(r["angle"][window])) > 60.0


def test_gripper_full_5_s():
    """Section VI-A at full length (h = 3 ms, 5 s): every step converges, the mug stays within 3 cm of the jaws."""
    from contact_sim_ros.sim.simulator import Simulator
    sim = Simulator(gripper_scene(), engine="tamsi", time_step=3e-3)
    for _ in range(int(round(5.0 / 3e-3))):
        report = sim.step(strict=True)
        assert report.substeps == 1
        rel = sim.body_pose("mug").translation[2] - sim.body_pose("gripper_base").translation[2]
        assert abs(rel) < 0.03


def test_sphere_dropped_with_spin_free_rolls_at_five_sevenths():
    """A solid sphere thrown horizontally at U0 = 2 m/s onto the ground: friction brings it to rolling without
    slipping at 5/7 U0 (angular momentum about the contact point is conserved), after which it rolls at a
    constant height r - m g / k without gaining energy (free bodies stepped with q = q0 + h N0 v, eq. 10)."""
    from contact_sim_ros.sim.simulator import Simulator
    r, m, k = 0.025, 0.5, 1.0e7
    scene = {"gravity": [0, 0, -G], "contact_margin": 0.01,
             "objects": [{"name": "sphere", "shape": {"sphere": r}, "mass": m,
                          "pose": {"xyz": [0, 0, r + 0.01]}, "velocity": [2.0, 0, 0, 0, 0, 0]}],
             "environment": [{"name": "ground", "shape": "halfspace"}],
             "materials": {"default": {"stiffness": 2 * k, "dissipation": 500.0, "friction": 0.5}}}
    sim = Simulator(scene, engine="tamsi", time_step=1e-3)
    energies = []
    for i in range(300):
        assert sim.step(strict=True).substeps == 1
        if i >= 150:
            energies.append(sim.kinetic_energy() + sim.potential_energy())
    v = sim.body_velocity("sphere")
    assert v[0] == pytest.approx(5.0 / 7.0 * 2.0, rel=2e-3)
    assert v[4] * r == pytest.approx(v[0], rel=1e-3)                 # rolling: w r = v
    assert sim.body_pose("sphere").translation[2] == pytest.approx(r - m * G / k, abs=2e-6)
    assert max(energies) <= energies[0] * (1 + 1e-6)


# ----------------------------------------------------------------------------------------------- compiled kernel
# The default kernel="numba" runs the whole step in one compiled call (contact_sim_ros/engines/tamsi_kernels.py);
# kernel="numpy" is the readable reference (the methods tested above). Both must agree to round-off.
def _mixed_problem(rng, nv, n, coupling="two_way", smooth=False, use_tals=True, kernel="numba"):
    """A random step with contacts in every regime: separated (inside the margin), in stiction and sliding (v_s =
    1e-3 m/s), H&C damping factor saturated or not, actuators saturated or not."""
    A = rng.normal(size=(nv, nv))
    M = A @ A.T + 0.5 * nv * np.eye(nv)
    J = rng.normal(size=(3 * n, nv)) * (rng.uniform(size=(3 * n, nv)) < 0.6)    # sparse rows like a real tree
    scale = rng.choice([1e-5, 1e-3, 1e-1], size=3 * n)
    contacts = contact_set(J, rng.uniform(-4e-3, 1e-3, n), 1.0, 1.0, 1.0, bias=rng.normal(size=3 * n) * scale)
    contacts.stiffness[:] = rng.uniform(1e3, 1e5, n)
    contacts.dissipation[:] = rng.uniform(0.0, 20.0, n)
    contacts.friction[:] = rng.uniform(0.1, 1.0, n)
    act = Actuation(effort=rng.normal(size=nv), kp=rng.uniform(0, 100, nv), kd=rng.uniform(0, 5, nv),
                    position_error=rng.normal(size=nv) * 0.1, velocity_target=rng.normal(size=nv),
                    effort_limit=np.where(rng.uniform(size=nv) < 0.5, np.inf, rng.uniform(0.5, 5.0, nv)))
    inputs = step_inputs(M, rng.normal(size=nv) * rng.choice([1e-4, 1e-2, 0.3]), rng.normal(size=nv) * 10,
                         contacts, rng.choice([5e-4, 2e-3, 1e-2]), actuation=act,
                         damping=rng.uniform(0, 1, nv))
    options = {"coupling": coupling, "smooth_friction": smooth, "use_tals": use_tals, "stiction_tolerance": 1e-3,
               "max_iterations": 60}
    return TamsiEngine(chain_model(nv), dict(options, kernel="numba")), \
        TamsiEngine(chain_model(nv), dict(options, kernel="numpy")), inputs


@pytest.mark.parametrize("coupling", ["two_way", "one_way"])
@pytest.mark.parametrize("smooth", [False, True])
def test_compiled_step_matches_the_numpy_reference(coupling, smooth):
    """The same step through both kernels: same status and Newton history, same v_next, impulses, generalized
    contact force and actuation to round-off, on random problems (with and without TALS, 0-12 contacts)."""
    rng = np.random.default_rng(11)
    statuses, iterations, regimes, limited = set(), [], set(), 0
    for trial in range(40):
        nv, n = int(rng.integers(1, 12)), int(rng.integers(0, 13))
        fast, reference, inputs = _mixed_problem(rng, nv, n, coupling, smooth, use_tals=trial % 4 != 3)
        a, b = fast.step(inputs), reference.step(inputs)
        assert a.stats.status is b.stats.status and a.stats.iterations == b.stats.iterations, trial
        assert len(fast.iteration_history) == len(reference.iteration_history)
        np.testing.assert_allclose(fast.iteration_history, reference.iteration_history, rtol=1e-7, atol=1e-14)
        for x, y in ((a.v_next, b.v_next), (a.contact_impulse, b.contact_impulse),
                     (a.generalized_contact_force, b.generalized_contact_force),
                     (a.actuation_force, b.actuation_force)):
            assert x.shape == y.shape
            np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12 * max(1.0, np.abs(y).max(initial=0.0)))
        # a converged residual (~1e-11) is round-off: compare it to that level
        assert a.stats.residual == pytest.approx(b.stats.residual, rel=1e-6, abs=1e-13)
        statuses.add(a.stats.status)
        iterations.append(a.stats.iterations)
        limited += any(0.0 < alpha < 1.0 for _, alpha in fast.iteration_history)      # TALS acted
        if n:
            vc = inputs.contacts.relative_velocity(a.v_next)
            loaded = a.contact_impulse[:, 2] > 0
            slip = np.hypot(vc[:, 0], vc[:, 1]) > 1e-3
            regimes |= {(bool(l), bool(s)) for l, s in zip(loaded, slip)}
    assert SolverStatus.CONVERGED in statuses and max(iterations) >= 3 and limited >= 3
    assert {(False, False), (True, False), (True, True)} <= regimes | {(False, False)} and len(regimes) >= 3


def test_compiled_residual_jacobian_and_tals_match_the_reference_functions():
    """Kernel by kernel: residual (eq. 21), Newton Jacobian (eq. 23) and TALS alpha_i (section III-A)."""
    from contact_sim_ros.engines import tamsi_kernels as K
    rng = np.random.default_rng(5)
    for coupling in ("two_way", "one_way"):
        for smooth in (False, True):
            _, ref, inputs = _mixed_problem(rng, 7, 6, coupling, smooth, kernel="numpy")
            ref._setup(inputs)
            c, act, h, nv, n = inputs.contacts, inputs.actuation, inputs.dt, 7, 6
            tau, dtau, r = np.empty(nv), np.empty(nv), np.empty(nv)
            vc, f, cwork = np.empty((n, 3)), np.empty((n, 3)), np.empty((n, 5))
            A, BJ = np.empty((nv, nv)), np.empty((3, nv))
            pi_frozen = ref._pi_frozen if coupling == "one_way" else np.zeros(n)
            for _ in range(10):
                v = rng.normal(size=nv) * rng.choice([1e-4, 1e-2, 1.0])
                r_ref, A_ref = ref._evaluate(v)
                K.actuation_force(act.effort, act.kp, act.kd, act.position_error, act.velocity_target,
                                  act.effort_limit, v, h, tau, dtau)
                K.residual(inputs.mass_matrix, ref._p_star, ref._hD, h, tau, c.jacobian, c.velocity_bias,
                           -c.signed_distance, c.stiffness, c.dissipation, c.friction, 1e-3, smooth,
                           coupling == "two_way", pi_frozen, v, r, vc, f, cwork)
                K.newton_jacobian(inputs.mass_matrix, ref._hD, h, dtau, c.jacobian, vc, cwork, n, A, BJ)
                np.testing.assert_allclose(r, r_ref, rtol=1e-12, atol=1e-13 * np.abs(r_ref).max())
                np.testing.assert_allclose(A, A_ref, rtol=1e-12, atol=1e-13 * np.abs(A_ref).max())
                np.testing.assert_allclose(f, ref._f[:n], rtol=1e-12, atol=1e-300)
    # TALS: every case of the limiter (no limit, stiction -> sliding, sliding -> ~0, crossing the stiction
    # circle, angle limit) on random tangential velocities and updates of all scales
    engine = TamsiEngine(hb.prismatic_box_model())
    vs, eps = 1e-4, 1e-6
    scales = np.array([1e-8, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2])
    vt = rng.normal(size=(4000, 2)) * rng.choice(scales, size=(4000, 1))
    dvt = rng.normal(size=(4000, 2)) * rng.choice(scales, size=(4000, 1))
    dvt[:500] = -vt[:500] * rng.uniform(0.5, 1.5, size=(500, 1)) + rng.normal(size=(500, 2)) * 1e-5
    dvt[500:700] = -vt[500:700] + rng.normal(size=(200, 2)) * 1e-7                         # to (almost) zero
    vt_norm = np.hypot(vt[:, 0], vt[:, 1])
    alpha_ref = engine._tals_alpha(vt, dvt, vt_norm)
    alpha = np.array([K.tals_alpha(a[0], a[1], b[0], b[1], s, vs, eps, math.cos(math.pi / 3), math.sin(math.pi / 3))
                      for a, b, s in zip(vt, dvt, vt_norm)])
    np.testing.assert_allclose(alpha, alpha_ref, rtol=1e-13, atol=0)
    v1 = np.hypot(*(vt + dvt).T)
    limited = alpha < 1
    assert np.any(limited & (vt_norm < eps) & (v1 > vs))                                  # stiction -> sliding
    assert np.any(limited & (vt_norm > vs) & (v1 < eps))                                  # sliding -> ~0
    both = limited & (vt_norm > vs) & (v1 > vs)
    v_new = vt + alpha[:, None] * dvt
    turned = np.abs(np.arctan2(vt[:, 0] * v_new[:, 1] - vt[:, 1] * v_new[:, 0], np.sum(vt * v_new, axis=1)))
    assert np.any(both & np.isclose(turned, math.pi / 3, rtol=1e-9))                       # angle limit
    assert np.any(both & (np.hypot(*v_new.T) < vs))                                         # circle crossing
    assert limited.mean() > 0.1 and (~limited).mean() > 0.1


def test_compiled_kernel_reports_singular_and_non_converged_steps():
    """A singular Newton matrix (a massless, unconstrained dof) is FAILED with the cause, not NaN; an iteration
    limit is MAX_ITERATIONS with a finite state -- both kernels."""
    for kernel in ("numba", "numpy"):
        engine = TamsiEngine(chain_model(2), {"kernel": kernel})
        res = engine.step(step_inputs(np.diag([1.0, 0.0]), [0.1, 0.2], [0.0, 1.0], ContactSet.empty(2), 1e-3))
        assert res.stats.status is SolverStatus.FAILED and "singular" in res.stats.message, kernel
        assert np.all(np.isfinite(res.v_next))
        engine = TamsiEngine(hb.prismatic_box_model(), {"kernel": kernel, "use_tals": False, "max_iterations": 5})
        res = engine.step(step_inputs([[hb.MASS]], [0.05], [0.0], hb.box_contact(), 0.01, t=0.45))
        assert res.stats.status is SolverStatus.MAX_ITERATIONS and res.stats.iterations == 5, kernel
        assert "did not converge in 5 iterations at t = 0.45 s" in res.stats.message
        assert np.all(np.isfinite(res.v_next)) and np.all(np.isfinite(res.contact_impulse))


def test_compiled_kernel_reproduces_the_reference_gripper_trajectory():
    """Section VI-A scene for 0.6 s through both kernels: the same Newton iterations at every step and the same
    velocities to round-off (the numpy path is the readable reference of the compiled one)."""
    from contact_sim_ros.sim.simulator import Simulator
    runs = {}
    for kernel in ("numba", "numpy"):
        sim = Simulator(gripper_scene(), engine="tamsi", time_step=3e-3, engine_options={"kernel": kernel})
        iterations, velocities = [], []
        for _ in range(200):
            iterations.append(sim.step(strict=True).iterations)
            velocities.append(sim.v.copy())
        runs[kernel] = np.array(iterations), np.array(velocities)
    assert np.array_equal(runs["numba"][0], runs["numpy"][0])
    np.testing.assert_allclose(runs["numba"][1], runs["numpy"][1], rtol=0, atol=1e-10)
    assert np.abs(runs["numpy"][1]).max() > 0.5           # the mug and gripper did move (m/s)


def test_one_way_coupling_throws_the_mug_out_of_the_gripper_and_two_way_holds_it():
    """Section V on the VI-A scene (h = 3 ms, 0.1 kg fingers on 1e4 N/m pads): with the normal forces explicit
    (one-way, semi-implicit Euler) a 1 um sideways offset of the mug grows until the mug leaves the grasp; with
    TAMSI's implicit penetration (two-way, eq. 19) it does not grow (0.34 um after 0.3 s) and the mug is held.
    (The scene is mirror-symmetric and the compiled kernel keeps a symmetric state exactly symmetric: without the
    offset nothing would seed the unstable antisymmetric mode.)"""
    from contact_sim_ros.sim.simulator import Simulator
    offsets = {}
    for coupling in ("one_way", "two_way"):
        sim = Simulator(gripper_scene(), engine="tamsi", time_step=3e-3, engine_options={"coupling": coupling})
        q = sim.q.copy()
        q[sim.model.pin_model.joints[sim.model.free_body("mug").joint_id].idx_q] += 1e-6      # x, towards a pad
        sim.set_state(q, sim.v.copy())
        for _ in range(100):
            sim.step(strict=False)
        offsets[coupling] = abs(sim.body_pose("mug").translation[0])
    assert offsets["one_way"] > 0.04          # beyond the pads (the mug's radius is 4 cm)
    assert offsets["two_way"] < 1e-6
