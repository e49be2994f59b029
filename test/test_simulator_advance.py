"""``Simulator.advance(n)`` (issue 45 item 3, a control period in one call): n steps that are n calls of ``step()``
bit for bit - the states, sim time, step count, last result, contacts, the engine's iteration history and the
reports - whether the fused free-body scenes run them in one compiled call (free_body_step.free_body_tamsi_advance),
the compiled tree step's scenes too (tree_step.tree_advance: robots, coal's pairs, the ICF engines), or a step in
the middle falls back to the staged step's sub-steps, fails, or the scene loops over ``step``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from contact_sim_ros.errors import ConfigError, SolverError
from contact_sim_ros.sim import simulator as simulator_module
from contact_sim_ros.sim.simulator import Simulator

ROOT = Path(__file__).resolve().parent.parent
SPHERE = ROOT / "scenes" / "icf_falling_sphere.yaml"          # the peers' rolling sphere: falls, bounces, rolls
BOX = ROOT / "benchmarks" / "peers" / "scenes" / "box_stick_slip.yaml"   # 8 corner spheres, a scripted push
PERIODS = (1, 7, 2, 50, 3, 120, 1, 17)          # steps per advance call: odd and even (the result slots alternate)


def _ball_scene(**ball):
    return {"objects": [{"name": "ball", "shape": {"sphere": 0.05}, "mass": 1.0, "pose": {"xyz": [0, 0, 0.2]},
                         **ball}],
            "environment": [{"name": "ground", "shape": "halfspace"}]}


def _observed(sim: Simulator, report) -> tuple:
    """What a caller sees after a step, as bytes and values (bit-for-bit comparable)."""
    result, contacts = sim.last_result, sim.contacts
    return (sim.q.tobytes(), sim.v.tobytes(), sim.t, sim.step_count, sim.actuation_force.tobytes(),
            None if result is None else (result.v_next.tobytes(), result.contact_impulse.tobytes(),
                                         result.generalized_contact_force.tobytes(), result.stats.status,
                                         result.stats.iterations, result.stats.residual),
            None if contacts is None else (contacts.size, contacts.signed_distance.tobytes(), contacts.point.tobytes(),
                                           contacts.jacobian.tobytes()),
            tuple(sim.engine.iteration_history) if sim.engine.name == "tamsi" else None,
            (report.t, report.ok, report.status, report.substeps, report.iterations, report.message))


class _CountedSteps:
    """Counts the ``step`` calls of a Simulator (advance calls ``step`` only for the steps its compiled call
    stopped before, or for every step of a scene without one)."""

    def __init__(self, sim: Simulator):
        self.calls, self._step = 0, sim.step
        sim.step = self

    def __call__(self, strict: bool = False):
        self.calls += 1
        return self._step(strict)


def _compare(make, periods=PERIODS) -> tuple[Simulator, _CountedSteps]:
    """Two Simulators from ``make()``: one steps with ``step()``, the other with ``advance(k)`` per period k; after
    every period both are the same bit for bit. Returns the advancing one and its step counter."""
    stepped, advanced = make(), make()
    counter = _CountedSteps(advanced)
    for k in periods:
        for _ in range(k):
            report = stepped.step()
        assert _observed(advanced, advanced.advance(k)) == _observed(stepped, report), f"period of {k} steps"
    return advanced, counter


# a ball pushed and twisted by two scripted wrenches at once (they add up on its six velocities)
PUSHED_BALL = {**_ball_scene(velocity=[0.3, 0, 0, 0, 0, 0]), "inputs": {"external_forces": [
    {"body": "ball", "force": ["3*sin(20*t)", 1.5, "-2 + t"], "torque": [0.01, "0.02*cos(30*t)", 0.003]},
    {"body": "ball", "force": [0.4, "2*cos(10*t)", 0], "torque": ["0.01*t", 0, -0.002]}]}}


@pytest.mark.parametrize("scene, dt", [(SPHERE, 2e-3), (BOX, 1e-3), (PUSHED_BALL, 1e-3)],
                         ids=["sphere", "box", "pushed-ball"])
def test_advance_equals_n_steps_bit_for_bit(scene, dt):
    advanced, counter = _compare(lambda: Simulator(scene, engine="tamsi", time_step=dt))
    assert advanced._fused is not None and advanced.contacts.size > 0
    # one compiled call per period (the scripted wrenches evaluated before it): step() only for 1-step periods
    assert counter.calls == PERIODS.count(1)


def test_an_advance_longer_than_a_chunk_makes_several_compiled_calls():
    def make():
        sim = Simulator(BOX, engine="tamsi", time_step=1e-3)
        sim.ADVANCE_CHUNK = 4                         # 10 steps: calls of 4, 4, 2; 9 steps: 4, 4, then step()
        return sim
    advanced, counter = _compare(make, periods=(10, 9, 2))
    assert counter.calls == 1


def test_a_step_the_compiled_call_cannot_solve_falls_back_to_the_staged_sub_steps_as_step_does():
    """TAMSI limited to 3 Newton iterations: the ball's touch-down steps do not converge in the compiled call; it
    stops before each, ``step`` runs it from its start with the staged step's sub-steps, and the call goes on."""
    def make():
        return Simulator(_ball_scene(velocity=[0.5, 0, -1.0, 0, 0, 3.0]), engine="tamsi", time_step=2e-3,
                         engine_options={"max_iterations": 3})
    advanced, counter = _compare(make, periods=(40, 40, 40))
    stepped = make()
    reports = [stepped.step() for _ in range(120)]
    sub_stepped = sum(r.ok and r.substeps > 1 for r in reports)
    assert sub_stepped > 0 and all(r.ok for r in reports)
    # every fall-back step ran through step(), the others in the compiled calls
    assert sub_stepped <= counter.calls < 120


def test_failed_steps_keep_the_state_as_n_failed_steps_do():
    """A ball beyond the divergence bound: every step fails (state kept, sim time unchanged); advance returns the
    failed report, and with strict raises at the first one."""
    def make():
        sim = Simulator(_ball_scene(), engine="tamsi", time_step=1e-3, max_substep_levels=1)
        v = sim.v.copy()
        v[0] = 6500.0
        sim.set_state(sim.q, v)
        return sim
    advanced, counter = _compare(make, periods=(3, 2))
    assert advanced.step_count == 0 and advanced.t == 0.0 and counter.calls == 5
    report = advanced.advance(4)
    assert not report.ok and "diverged: free body 'ball'" in report.message
    with pytest.raises(SolverError, match="state kept"):
        advanced.advance(3, strict=True)
    assert counter.calls == 4 + 5 + 1


def test_a_contact_beyond_the_penetration_bound_is_left_to_step():
    """A ball sunk deeper than it is thick: the compiled call stops before each step (its penetration pass flags
    it), ``step`` fails it with the bound's message, as n steps do."""
    sunk = {**_ball_scene(), "objects": [{**_ball_scene()["objects"][0], "pose": {"xyz": [0, 0, -0.06]}}]}
    advanced, counter = _compare(lambda: Simulator(sunk, engine="tamsi", time_step=1e-3), periods=(3, 2))
    assert counter.calls == 5 and advanced.step_count == 0
    assert advanced.advance(2).message.startswith("deep interpenetration: 'ball' and 'ground' overlap by 11 cm")


def test_scenes_without_the_fused_step_loop_over_step():
    """An engine neither compiled step takes (the semi-implicit one): advance is step() per step."""
    make = lambda: Simulator(SPHERE, engine="semi_implicit", time_step=2e-3)     # noqa: E731
    advanced, counter = _compare(make, periods=(5, 20))
    assert advanced._fused is None and advanced._tree is None and counter.calls == 25


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "4"])
def test_advance_refuses_a_step_count_that_is_not_a_positive_integer(bad):
    sim = Simulator(SPHERE, engine="tamsi", time_step=2e-3)
    with pytest.raises(ConfigError, match="advance: n_steps must be a positive number of steps"):
        sim.advance(bad)
    assert sim.step_count == 0


# ----------------------------------------------------------------------- the compiled tree step (sim/tree_step.py)
PEERS = ROOT / "benchmarks" / "peers" / "scenes"
TREE_PERIODS = (1, 7, 2, 30, 3, 10)


class _CountedTreeCalls:
    """Counts the compiled tree calls of a Simulator's ``advance`` (``_tree_advance``) and the steps they commit."""

    def __init__(self, sim: Simulator):
        self.calls, self.steps, self._advance = 0, 0, sim._tree_advance
        sim._tree_advance = self

    def __call__(self, n_steps: int):
        done, report = self._advance(n_steps)
        self.calls += 1
        self.steps += done
        return done, report


def _compare_tree(make, periods=TREE_PERIODS) -> tuple[Simulator, _CountedSteps, _CountedTreeCalls]:
    """``_compare`` for a scene of the compiled tree step, counting its compiled calls too."""
    calls = []

    def counted():
        sim = make()
        if not calls:
            calls.append(None)           # the first Simulator steps with step(); the second advances
        else:
            calls.append(_CountedTreeCalls(sim))
        return sim
    advanced, counter = _compare(counted, periods)
    return advanced, counter, calls[1]


@pytest.mark.parametrize("scene, engine, dt, coal", [
    (PEERS / "iiwa_wsg_pd.yaml", "tamsi", 1e-3, True),      # iiwa + WSG held by PD: coal's pairs in the call
    (PEERS / "planar_box.yaml", "tamsi", 1e-3, False),      # the box on planar joints, its push a wrench on a link
    (PEERS / "ur5_objects.yaml", "tamsi", 1e-3, True),      # UR5 + 20 objects: coal's box-box pairs in the call
    (SPHERE, "lagged", 2e-3, False),                        # free bodies only, an ICF engine
    (PEERS / "planar_box.yaml", "sap", 1e-3, False),        # SAP
    (ROOT / "scenes" / "icf_clutter.yaml", "similar", 2e-3, True)],   # 40 objects, coal's pairs, Similar
    ids=["iiwa-tamsi", "planar-tamsi", "ur5-objects-tamsi", "sphere-lagged", "planar-sap", "clutter-similar"])
def test_tree_advance_equals_n_steps_bit_for_bit(scene, engine, dt, coal):
    """advance(k) of a compiled-tree-step scene: one compiled call per period (tree_step.tree_advance) whose
    states, results, contacts, stats and reports are those of k calls of step() bit for bit."""
    advanced, counter, tree_calls = _compare_tree(lambda: Simulator(scene, engine=engine, time_step=dt))
    assert advanced._fused is None and advanced._tree is not None
    assert (advanced._tree.coal_pass is not None) == coal
    # every period of more than one step in one compiled call; step() only for the 1-step periods
    assert counter.calls == TREE_PERIODS.count(1)
    assert tree_calls.calls == len(TREE_PERIODS) - TREE_PERIODS.count(1)
    assert tree_calls.steps == sum(TREE_PERIODS) - TREE_PERIODS.count(1)
    stepped = Simulator(scene, engine=engine, time_step=dt)
    for _ in range(sum(TREE_PERIODS)):
        stepped.step()
    assert stepped.contact_query.stats == advanced.contact_query.stats
    if engine == "tamsi":
        assert advanced.engine.history_count == stepped.engine.history_count
    else:
        assert (advanced.engine.last_line_search_evaluations, advanced.engine.last_deferred_contacts) == (
            stepped.engine.last_line_search_evaluations, stepped.engine.last_deferred_contacts)
        assert advanced.engine.last_stiction_tolerance.tobytes() == stepped.engine.last_stiction_tolerance.tobytes()
    if engine == "lagged":
        assert (advanced.last_result.friction_normal_impulse.tobytes()
                == stepped.last_result.friction_normal_impulse.tobytes())
    if scene.name != "iiwa_wsg_pd.yaml":                   # held clear of everything
        assert advanced.contacts.size > 0


def test_a_tree_step_that_does_not_converge_is_left_to_step_and_the_call_goes_on():
    """The planar box with TAMSI limited to 2 Newton iterations: one step does not converge in the compiled call;
    the call stops before it, step() runs it (its staged sub-steps, then TREE_RETRY_AFTER staged steps), and the
    next compiled calls go on after - bit for bit as the same steps by step()."""
    def make():
        return Simulator(PEERS / "planar_box.yaml", engine="tamsi", time_step=1e-3,
                         engine_options={"max_iterations": 2})
    periods = (40, 40, 40, 30)
    advanced, counter, tree_calls = _compare_tree(make, periods)
    stepped = make()
    reports = [stepped.step() for _ in range(sum(periods))]
    sub_stepped = [i for i, r in enumerate(reports) if r.substeps > 1]
    assert len(sub_stepped) == 1 and all(r.ok for r in reports)
    # the stopped step, and the staged steps after it (no compiled attempt) by step(); the rest compiled
    assert 1 < counter.calls <= 1 + simulator_module.TREE_RETRY_AFTER + len(periods)
    assert tree_calls.steps == sum(periods) - counter.calls > sum(periods) // 2


def test_a_tree_advance_longer_than_a_chunk_makes_several_compiled_calls():
    def make():
        sim = Simulator(PEERS / "planar_box.yaml", engine="tamsi", time_step=1e-3)
        sim.ADVANCE_CHUNK = 4                         # 10 steps: calls of 4, 4, 2; 9 steps: 4, 4, then step()
        return sim
    advanced, counter, tree_calls = _compare_tree(make, periods=(10, 9, 2))
    assert counter.calls == 1 and tree_calls.calls == 6 and tree_calls.steps == 20


def test_failed_tree_steps_keep_the_state_as_n_failed_steps_do():
    """The planar box with TAMSI limited to 1 Newton iteration: no step converges, even sub-stepped. Each compiled
    call stops before its first step (nothing committed), step() fails it (state kept), the staged steps after it
    without a compiled attempt are step()'s too; advance returns the failed report, with strict raises."""
    def make():
        return Simulator(PEERS / "planar_box.yaml", engine="tamsi", time_step=1e-3,
                         engine_options={"max_iterations": 1})
    advanced, counter, tree_calls = _compare_tree(make, periods=(3, 12, 2))
    assert advanced.step_count == 0 and advanced.t == 0.0 and counter.calls == 17
    assert tree_calls.calls >= 2 and tree_calls.steps == 0
    assert not advanced.advance(4).ok
    with pytest.raises(SolverError, match="state kept"):
        advanced.advance(3, strict=True)


def test_a_tree_contact_beyond_the_penetration_bound_is_left_to_step(tmp_path):
    """The planar box sunk 2.2 cm into the ground (2 cm thick): the compiled call stops before each step (its
    penetration pass flags it), step() fails it with the bound's message, as n steps do."""
    urdf = (PEERS / "planar_box.urdf").resolve()
    text = (PEERS / "planar_box.yaml").read_text().replace("urdf: planar_box.urdf", f"urdf: {urdf}")
    assert "box_z: 0.01" in text
    sunk = tmp_path / "sunk.yaml"
    sunk.write_text(text.replace("box_z: 0.01", "box_z: -0.012"))
    advanced, counter, tree_calls = _compare_tree(lambda: Simulator(sunk, engine="tamsi", time_step=1e-3),
                                                  periods=(3, 2))
    assert counter.calls == 5 and advanced.step_count == 0 and tree_calls.calls >= 1 and tree_calls.steps == 0
    assert advanced.advance(2).message.startswith("deep interpenetration: 'box_0' and 'ground' overlap by 2.2 cm")


def test_a_tree_step_whose_coal_rows_exceed_the_buffers_is_left_to_step():
    """The UR5 + 20 objects (50 contacts) with the compiled call told that the query's contact buffers hold 10
    rows: each call returns NEAR before its first step (nothing committed), step() runs the staged step and the
    TREE_RETEST_AFTER staged steps after it; advance then tries the compiled call again - bit for bit as step()."""
    from contact_sim_ros.geometry import contact_pass_kernels

    def make():
        sim = Simulator(PEERS / "ur5_objects.yaml", engine="tamsi", time_step=1e-3)
        sim._tree.coal_pass.table[contact_pass_kernels.P_IDS, 2] = 10     # fewer rows than its 50 contacts
        return sim
    periods = (15, 20, 5)
    advanced, counter, tree_calls = _compare_tree(make, periods)
    assert counter.calls == sum(periods) and tree_calls.steps == 0
    assert 2 <= tree_calls.calls <= len(periods) + sum(periods) // simulator_module.TREE_RETEST_AFTER
    assert advanced.contacts.size == 50


@pytest.mark.parametrize("engine", ["tamsi", "lagged"])
def test_a_scene_with_joint_scripts_advances_step_by_step(engine):
    """The default scene's iiwa joint 1 on a scripted sine: its targets change with t, which the compiled tree
    call (commands fixed for its steps) does not take: advance is step() per step, the same bit for bit."""
    make = lambda: Simulator(ROOT / "scenes" / "default.yaml", engine=engine, time_step=1e-3)   # noqa: E731
    advanced, counter = _compare(make, periods=(5, 12))
    assert advanced.sim_model.has_joint_scripts and counter.calls == 17
