"""The compiled Pinocchio calls of a step (contact_sim_ros/sim/rigid_body_dynamics.cpp) against the pin.* calls
they replace: the same Pinocchio functions, so the same numbers bit for bit, call by call on every robot preset
(a mimic joint, a free object, every joint kind) and along whole simulations."""

import numpy as np
import pinocchio as pin
import pytest

from contact_sim_ros.native_build import RIGID_BODY
from contact_sim_ros.resources import share_dir
from contact_sim_ros.sim.gravity_feed_forward import GravityFeedForward
from contact_sim_ros.sim.simulator import Simulator
from test_pair_bounds import _every_joint_kind, _random_q, _robot_near_objects


def _reference(module):
    """A context in which Simulators and feed-forwards built are given ``module`` (None: the pin.* calls)."""
    class Use:
        def __enter__(self):
            self.saved = RIGID_BODY.load()
            RIGID_BODY._loaded["module"] = module

        def __exit__(self, *exc):
            RIGID_BODY._loaded["module"] = self.saved
    return Use()


def test_the_set_up_built_it_and_the_simulator_uses_it():
    """The project's set-up (the warm-up) built the module of the current source; a robot's Simulator and its
    gravity feed-forward take it, a model of free bodies only does not (its own compiled step)."""
    assert RIGID_BODY.library_path().exists(), RIGID_BODY.library_path()
    assert RIGID_BODY.load() is not None
    sim = Simulator(str(share_dir() / "scenes" / "scenario_pick_shake_place.yaml"), engine="tamsi")
    assert sim._rigid is not None
    assert GravityFeedForward.of(sim.model)._rigid is not None
    assert Simulator(str(share_dir() / "scenes" / "icf_falling_sphere.yaml"), engine="tamsi")._rigid is None
    with _reference(None):
        assert Simulator(str(share_dir() / "scenes" / "scenario_pick_shake_place.yaml"), engine="tamsi")._rigid is None


@pytest.mark.parametrize("robot", ["iiwa_wsg", "franka", "allegro", "barrett", "every joint kind"])
def test_each_call_equals_pinocchio(robot):
    """At random states: M (WORLD convention; a mimic joint's terms added into its leader's), nle, g, the position error, the integration, the
    joint placements, velocities and Jacobians, and g of chosen dofs equal the pin.* calls' bit for bit."""
    model = _every_joint_kind() if robot == "every joint kind" else _robot_near_objects(robot)
    pm = model.pin_model
    module = RIGID_BODY.load()
    rng = np.random.default_rng(5)
    data, ref = pin.Data(pm), pin.Data(pm)
    M, nle, g, error = np.zeros((pm.nv, pm.nv)), np.zeros(pm.nv), np.zeros(pm.nv), np.zeros(pm.nv)
    rigid = module.RigidBodyDynamics(pm, data, M, nle, g)
    v_index = rng.permutation(pm.nv)[: max(1, pm.nv // 2)].astype(np.int64)
    for _ in range(20):
        q, target = _random_q(pm, rng), _random_q(pm, rng)
        v, dt = rng.normal(0.0, 2.0, pm.nv), float(rng.uniform(1e-4, 1e-2))
        rigid.dynamics(q, v, target, error, True)
        np.testing.assert_array_equal(M, pin.crba(pm, ref, q, pin.Convention.WORLD))
        np.testing.assert_array_equal(nle, pin.nonLinearEffects(pm, ref, q, v))
        np.testing.assert_array_equal(g, pin.computeGeneralizedGravity(pm, ref, q))
        np.testing.assert_array_equal(error, pin.difference(pm, q, target))
        q_next = np.empty(pm.nq)
        rigid.integrate(q, v, dt, q_next)
        np.testing.assert_array_equal(q_next, pin.integrate(pm, q, dt * v))
        rigid.kinematics(q, v)
        pin.forwardKinematics(pm, ref, q, v)
        pin.computeJointJacobians(pm, ref)
        np.testing.assert_array_equal(data.J, ref.J)
        for j in range(pm.njoints):
            np.testing.assert_array_equal(data.oMi[j].homogeneous, ref.oMi[j].homogeneous)
            np.testing.assert_array_equal(data.v[j].vector, ref.v[j].vector)
        out = np.full(len(v_index), np.nan)
        rigid.joint_gravity(q, v_index, out)
        np.testing.assert_array_equal(out, pin.computeGeneralizedGravity(pm, ref, q)[v_index])
    assert np.abs(M).max() > 0 and np.abs(nle).max() > 0 and np.abs(error).max() > 0


def test_wrong_arrays_are_refused_not_misread():
    """An integer, a too short or a non-contiguous array is refused with the argument's name, never read as
    float64 memory."""
    pm = _robot_near_objects("iiwa_wsg").pin_model
    rigid = RIGID_BODY.load().RigidBodyDynamics(pm, pin.Data(pm), np.zeros((pm.nv, pm.nv)), np.zeros(pm.nv),
                                                np.zeros(pm.nv))
    q, v, err = pin.neutral(pm), np.zeros(pm.nv), np.zeros(pm.nv)
    for bad, name in ((q.astype(np.int64), "q"), (q[:-1], "q"), (np.repeat(q, 2)[::2], "q")):
        with pytest.raises((ValueError, BufferError), match=name if bad.flags.c_contiguous else "contiguous"):
            rigid.dynamics(bad, v, q, err, False)
    with pytest.raises(ValueError, match="v_index"):
        rigid.joint_gravity(q, np.arange(3, dtype=np.float64), np.zeros(3))
    with pytest.raises(IndexError):
        rigid.joint_gravity(q, np.array([pm.nv], dtype=np.int64), np.zeros(1))
    with pytest.raises(ValueError, match="mass_matrix"):
        RIGID_BODY.load().RigidBodyDynamics(pm, pin.Data(pm), np.zeros(3), np.zeros(pm.nv), np.zeros(pm.nv))


@pytest.mark.parametrize("scene, engine", [("scenario_pick_shake_place.yaml", "tamsi"),
                                           ("scenario_barrett_cylinder.yaml", "lagged"),
                                           ("quasistatic_iiwa_box.yaml", "quasistatic_miqp")])
def test_same_simulation_as_the_pinocchio_calls(scene, engine):
    """A robot scene stepped with the compiled calls and with the pin.* calls: the same states and contact
    forces bit for bit at every step (the arm holding against gravity with its feed-forward, the hand closing on
    the object)."""
    path = str(share_dir() / "scenes" / scene)
    runs = []
    for module in (RIGID_BODY.load(), None):
        with _reference(module):
            sim = Simulator(path, engine=engine, time_step=1e-3)
            assert (sim._rigid is not None) == (module is not None)
            ff = GravityFeedForward.of(sim.model)
            g = np.zeros(len(sim.model.joint_names))
            states, touching = [], 0
            for _ in range(300):
                assert sim.step().ok
                ff.compute(sim.q, g)
                forces = sim.contact_forces_world().reshape(-1)
                touching += forces.size > 0
                states.append(np.concatenate([sim.q, sim.v, g, forces]))
            runs.append(states)
    for k, (a, b) in enumerate(zip(*runs)):
        np.testing.assert_array_equal(a, b, err_msg=f"step {k + 1}")
    assert touching > 100          # steps with contacts: the run exercised the contact step, not only free motion
