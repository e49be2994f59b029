"""Conformance suite: physical invariants every registered dynamic engine must satisfy.

Parameterised over the registry, so a new engine is tested by registering it. Quasistatic engines
(``dynamic = False``) have their own tests.
"""

import numpy as np
import pytest

from contact_sim_ros.engines.registry import engine_class, engine_names
from contact_sim_ros.sim.simulator import Simulator

DYNAMIC_ENGINES = [n for n in engine_names() if engine_class(n).dynamic]
G = 9.81


def _scene(objects, gravity=(0.0, 0.0, -G), ground=True, material=None):
    material = material or {"stiffness": 1.0e5, "dissipation": 10.0, "friction": 0.5}
    return {"gravity": list(gravity), "objects": objects,
            "environment": [{"name": "ground", "shape": "halfspace"}] if ground else [],
            "materials": {"default": material}, "contact_margin": 0.005}


def _normal_force_sum(sim):
    c = sim.contacts
    return float(np.sum(sim.last_result.contact_impulse[:, 2])) / sim.time_step if c.size else 0.0


@pytest.mark.parametrize("engine", DYNAMIC_ENGINES)
def test_resting_box_holds_its_weight(engine):
    """A 1 kg box resting flat: at rest the summed normal force is m g (1 %) and it does not move."""
    m = 1.0
    sim = Simulator(_scene([{"name": "box", "shape": {"box": [0.1, 0.1, 0.1]}, "mass": m,
                             "pose": {"xyz": [0, 0, 0.05]}}]), engine=engine, time_step=1e-3)
    sim.run(0.5)
    assert np.linalg.norm(sim.v) < 1e-3
    assert sim.contacts.size >= 3, "a flat box needs at least 3 contact points to rest"
    assert _normal_force_sum(sim) == pytest.approx(m * G, rel=0.01)
    assert abs(sim.body_pose("box").translation[2] - 0.05) < 2e-3


def _two_spheres(friction, lateral_speed):
    r, m1, m2 = 0.05, 1.0, 2.0
    objects = [{"name": "a", "shape": {"sphere": r}, "mass": m1, "pose": {"xyz": [0, 0, 0]},
                "velocity": [0.5, 0.0, 0.0, 0, 0, 0]},
               {"name": "b", "shape": {"sphere": r}, "mass": m2, "pose": {"xyz": [0.11, 0.0, 0.0]},
                "velocity": [-0.25, lateral_speed, 0.0, 0, 0, 0]}]
    return _scene(objects, gravity=(0, 0, 0), ground=False,
                  material={"stiffness": 1.0e5, "dissipation": 10.0, "friction": friction}), m1, m2


def _world_contact_force(sim, body, rotation):
    """World-frame contact force on a free body from the step's generalized contact force (free-flyer
    velocities are body-local: rotate with the orientation at the start of the step)."""
    fb = sim.model.free_body(body)
    return rotation @ sim.last_result.generalized_contact_force[fb.v_slice][:3]


@pytest.mark.parametrize("engine", DYNAMIC_ENGINES)
def test_contact_forces_on_the_two_bodies_are_equal_and_opposite(engine):
    """Two spheres collide off-centre with friction: at every step the contact force on A is minus the
    force on B (Newton's third law through J^T gamma)."""
    scene, _, _ = _two_spheres(friction=0.5, lateral_speed=0.2)
    sim = Simulator(scene, engine=engine, time_step=1e-3)
    touched = False
    for _ in range(200):
        ra, rb = sim.body_pose("a").rotation, sim.body_pose("b").rotation
        sim.step(strict=True)
        fa, fb = _world_contact_force(sim, "a", ra), _world_contact_force(sim, "b", rb)
        np.testing.assert_allclose(fa + fb, 0.0, atol=1e-9 * (1 + np.linalg.norm(fa)))
        touched |= np.linalg.norm(fa) > 1.0
    assert touched, "the spheres never touched: the test scene is wrong"


@pytest.mark.parametrize("engine", DYNAMIC_ENGINES)
def test_frictionless_collision_conserves_linear_momentum(engine):
    """Head-on frictionless collision without gravity: total linear momentum is conserved through the impact."""
    scene, m1, m2 = _two_spheres(friction=0.0, lateral_speed=0.0)
    sim = Simulator(scene, engine=engine, time_step=1e-3)
    p0 = m1 * sim.body_velocity("a")[:3] + m2 * sim.body_velocity("b")[:3]
    for _ in range(200):
        sim.step(strict=True)
        p = m1 * sim.body_velocity("a")[:3] + m2 * sim.body_velocity("b")[:3]
        np.testing.assert_allclose(p, p0, atol=1e-9 + 1e-9 * np.linalg.norm(p0))
    # the collision happened and ended: the spheres no longer approach (they separate, or move together for a
    # perfectly inelastic rigid contact, restitution 0)
    assert sim.body_velocity("b")[0] - sim.body_velocity("a")[0] > -1e-9
    assert abs(sim.body_velocity("a")[0] - 0.5) > 0.1


@pytest.mark.parametrize("engine", DYNAMIC_ENGINES)
def test_friction_inside_the_cone_while_sliding(engine):
    """A box thrown along the ground slides to rest; every contact impulse lies in the friction cone."""
    mu = 0.5
    sim = Simulator(_scene([{"name": "box", "shape": {"box": [0.1, 0.1, 0.1]}, "mass": 1.0,
                             "pose": {"xyz": [0, 0, 0.0499]}, "velocity": [1.0, 0.3, 0, 0, 0, 0]}],
                           material={"stiffness": 1.0e5, "dissipation": 10.0, "friction": mu}),
                    engine=engine, time_step=1e-3)
    slid = False
    for _ in range(400):
        sim.step(strict=True)
        result = sim.last_result
        g = result.contact_impulse
        if len(g):
            assert np.all(g[:, 2] >= -1e-12)
            tangential = np.linalg.norm(g[:, :2], axis=1)
            # engines whose friction law uses another normal impulse (Lagged: the previous step's) report it
            bound = g[:, 2] if result.friction_normal_impulse is None else result.friction_normal_impulse
            assert np.all(tangential <= mu * bound * (1 + 1e-6) + 1e-12), \
                f"friction outside the cone at t = {sim.t}: |gamma_t| {tangential} > mu * {bound}"
            slid |= bool(np.any(tangential > 0.5 * mu * bound))
    assert slid, "friction never approached the cone boundary: the box did not slide"
    # Coulomb: sliding distance v0^2 / (2 mu g) for the initial speed
    v0 = np.hypot(1.0, 0.3)
    travelled = np.linalg.norm(sim.body_pose("box").translation[:2])
    assert travelled == pytest.approx(v0 ** 2 / (2 * mu * G), rel=0.1)


@pytest.mark.parametrize("engine", DYNAMIC_ENGINES)
def test_passive_drop_gains_no_energy(engine):
    """A sphere dropped on the ground: mechanical energy never exceeds its initial value."""
    r, m, h = 0.05, 0.5, 0.1
    sim = Simulator(_scene([{"name": "ball", "shape": {"sphere": r}, "mass": m, "pose": {"xyz": [0, 0, r + h]},
                             "velocity": [0.2, 0, 0, 0, 0, 0]}],
                           material={"stiffness": 1.0e5, "dissipation": 5.0, "friction": 0.5}),
                    engine=engine, time_step=1e-3)
    e0 = sim.kinetic_energy() + sim.potential_energy()
    peak_after_contact, touched = -np.inf, False
    for _ in range(600):
        sim.step(strict=True)
        e = sim.kinetic_energy() + sim.potential_energy()
        assert e <= e0 + 1e-6 * abs(e0) + 1e-9, f"energy grew from {e0} to {e} at t = {sim.t}"
        touched |= sim.contacts.size > 0 and bool(np.any(sim.last_result.contact_impulse[:, 2] > 0))
        if touched:
            peak_after_contact = max(peak_after_contact, sim.body_pose("ball").translation[2])
    assert touched
    assert peak_after_contact < r + h


@pytest.mark.parametrize("engine", DYNAMIC_ENGINES)
def test_block_on_incline_below_friction_angle_stays_stuck(engine):
    """Gravity tilted by theta with tan(theta) = 0.6 mu: the block must not slide (< 1 mm in 1 s)."""
    mu = 0.8
    theta = np.arctan(0.6 * mu)
    gravity = (G * np.sin(theta), 0.0, -G * np.cos(theta))
    sim = Simulator(_scene([{"name": "box", "shape": {"box": [0.1, 0.1, 0.1]}, "mass": 1.0,
                             "pose": {"xyz": [0, 0, 0.0499]}}], gravity=gravity,
                           material={"stiffness": 1.0e5, "dissipation": 10.0, "friction": mu}),
                    engine=engine, time_step=1e-3)
    sim.run(0.2)
    x0 = sim.body_pose("box").translation[0]
    sim.run(1.0)
    assert abs(sim.body_pose("box").translation[0] - x0) < 1e-3
