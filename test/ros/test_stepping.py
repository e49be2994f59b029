"""The stepping loop without DDS: exact step counts, pause/step/reset, command hand-over, gravity compensation,
pacing never ahead of the wall clock."""

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from contact_sim_ros.driver.command_validation import (JointLimits, TrajectorySampler, validate_group_command,
                                                       validate_joint_state_command, validate_trajectory)
from contact_sim_ros.driver.loop import MAX_STEPS_PER_REQUEST, PublishHook, SteppingLoop, Transport
from contact_sim_ros.driver.system import SimulatorSystem
from contact_sim_ros.sim.simulator import Simulator

SCENE = {"robot": "iiwa_wsg", "environment": [{"name": "ground", "shape": "halfspace"}]}


@pytest.fixture(scope="module")
def sim():
    return Simulator(SCENE, engine="semi_implicit", time_step=2e-3)


def make_loop(sim, real_time_factor=1.0, hooks=(), controllers=None, on_step_failure=None, **kw):
    """A stepping loop over ``sim`` as its hardware System, with ``hooks`` as its transport's publications."""
    return SteppingLoop(SimulatorSystem(sim), controllers, Transport(hooks, on_step_failure), real_time_factor, **kw)


def run_steps(loop, n):
    for _ in range(n):
        loop.step_now()


def test_paused_loop_steps_exactly_n_and_resets(sim):
    sim.reset()
    published = []
    loop = make_loop(sim, 1.0, [PublishHook("t", 1, lambda s: published.append(s.t))], start_paused=True)
    loop.start()
    try:
        time.sleep(0.1)
        assert sim.step_count == 0
        assert loop.request_steps(7, timeout=20.0)
        assert sim.step_count == 7 and sim.t == pytest.approx(7 * 2e-3, abs=1e-12)
        assert loop.request_steps(3, timeout=20.0)
        assert sim.step_count == 10
        time.sleep(0.1)
        assert sim.step_count == 10                       # paused: no further steps
        assert np.allclose(np.diff(published[:10]), 2e-3)  # hook after every step
        assert loop.request_reset(timeout=20.0)
        assert sim.t == 0.0 and sim.step_count == 0
        np.testing.assert_array_equal(sim.q, sim.q0)
        s = loop.stats()
        assert s.steps == 10 and s.solver_failures == 0
    finally:
        loop.stop()


def test_paced_loop_is_never_ahead_of_the_wall_clock(sim):
    sim.reset()
    loop = make_loop(sim, 2.0)   # 2x real time: 4 ms of sim time per 2 ms of wall time at most
    t0 = time.monotonic()
    loop.start()
    time.sleep(0.3)
    loop.stop()
    wall = time.monotonic() - t0
    assert 0 < sim.t <= 2.0 * wall + 2e-3


def test_stepping_thread_cpu_per_step_is_measured_apart_from_sleeping(sim):
    """step_cpu_mean_ms: the stepping thread's CPU time per step over the window (its own CPU clock, read by
    stats()), a busy hook's CPU included, the paced loop's sleep not."""
    sim.reset()

    def busy(_sim):                                   # 1 ms of CPU per step on the stepping thread
        end = time.thread_time() + 1e-3
        while time.thread_time() < end:
            pass
    loop = make_loop(sim, 0.5, [PublishHook("busy", 1, busy)])   # paced: 4 ms of wall time per 2 ms step
    loop.start()
    try:
        deadline = time.monotonic() + 120.0           # the first step of a fresh process may compile kernels
        while loop.stats(close_window=False).steps < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        loop.stats()                                  # a new window
        time.sleep(0.5)
        s = loop.stats()
    finally:
        loop.stop()
    assert s.window_steps > 10
    assert 1.0 <= s.step_cpu_mean_ms < 4.0, s.step_cpu_mean_ms       # the hook's 1 ms + the step, not the sleep


def test_gravity_compensated_hold_and_commands(sim):
    sim.reset()
    loop = make_loop(sim, 0.0)
    limits = JointLimits.from_model(sim.model)
    q0 = sim.joint_positions().copy()
    run_steps(loop, 200)
    assert np.max(np.abs(sim.joint_positions() - q0)) < 1e-4   # holds the initial pose against gravity

    target = q0.copy()
    target[:7] += [0.2, -0.1, 0.1, 0.15, -0.2, 0.1, 0.3]
    loop.commands.push_command(validate_group_command(limits, sim.model.joint_names[:7], target[:7], "position"))
    run_steps(loop, 1500)
    np.testing.assert_allclose(sim.joint_positions()[:7], target[:7], atol=1e-3)

    # an out-of-limit finger target is clamped to the limit (0.055 m) and reached
    cmd = validate_joint_state_command(limits, ["wsg_finger_left_joint"], position=[0.2])
    assert cmd.clamped
    loop.commands.push_command(cmd)
    run_steps(loop, 500)
    assert sim.joint_positions()[7] == pytest.approx(0.055, abs=1e-3)


def test_a_step_request_first_applies_the_commands_its_transport_received(sim):
    """Lock-step determinism (issue 42, item 4): a step request calls the transport's ``before_steps`` on the
    requesting thread before any of its steps (the node drains its command subscriptions there:
    ros/command_intake.py), so a command handed over then acts from the request's first step: the 5 steps give the
    state, bit for bit, of a loop that had the command before its first step."""
    limits = JointLimits.from_model(sim.model)
    q0 = sim.q0[np.asarray(sim.model.joint_q_index)]
    target = q0[:7] + [0.2, -0.1, 0.1, 0.15, -0.2, 0.1, 0.3]

    def command():
        return validate_group_command(limits, sim.model.joint_names[:7], target, "position")
    sim.reset()
    reference = make_loop(sim, 0.0)
    reference.commands.push_command(command())
    run_steps(reference, 5)
    expected_q, expected_v = sim.q.copy(), sim.v.copy()

    sim.reset()
    asked = []

    def before_steps():          # (the request's thread; the stepping thread waits for the steps)
        asked.append((threading.current_thread() is threading.main_thread(), sim.step_count))
        loop.commands.push_command(command())
    loop = SteppingLoop(SimulatorSystem(sim), None, Transport(before_steps=before_steps), 0.0, start_paused=True)
    loop.start()
    try:
        assert loop.run_steps(5, timeout=60.0) == (5, "")
        assert asked == [(True, 0)]
        np.testing.assert_array_equal(sim.q, expected_q)
        np.testing.assert_array_equal(sim.v, expected_v)
    finally:
        loop.stop()


def test_a_scene_without_actuated_joints_makes_no_gravity_data():
    """Gravity compensation needs a Pinocchio Data of its own (four nv^3 tensors in Pinocchio 4.1: ~0.5 GB for
    the 40-object bin); a scene of free objects has no joint to compensate, so its loop makes none and steps the
    same trajectory as the simulator alone."""
    ball = Path(__file__).resolve().parents[2] / "scenes" / "icf_falling_sphere.yaml"     # one free sphere
    alone = Simulator(ball, engine="tamsi", time_step=2e-3)
    sim = Simulator(ball, engine="tamsi", time_step=2e-3)
    loop = make_loop(sim, 0.0)
    assert loop.system.gravity_compensation and loop.system._gravity is None
    for _ in range(100):
        alone.step()
        loop.step_now()
    np.testing.assert_array_equal(sim.q, alone.q)
    robot = SimulatorSystem(Simulator(SCENE, engine="semi_implicit", time_step=2e-3))
    assert robot._gravity is not None                         # a robot's joints are compensated


def test_trajectory_is_sampled_in_sim_time(sim):
    """The loop's controllers (what the controller manager is) run before every step and write the command
    interfaces: a trajectory sampled there at the end of each step is followed in sim time."""
    sim.reset()
    system = SimulatorSystem(sim)
    limits = JointLimits.from_model(sim.model)
    q0 = sim.joint_positions()[0]
    traj = validate_trajectory(limits, ["iiwa_joint_1"], [0.5, 1.0], [[q0 + 0.2], [q0 + 0.3]])
    sampler = TrajectorySampler(traj, 0.0, np.array([q0]), np.zeros(1))

    class Control:
        hooks = ()

        def cycle(self, step, t):
            pos, vel, _ = sampler.sample(t + sim.time_step)
            system.command.write_position(traj.indices, pos, vel)
    loop = SteppingLoop(system, Control(), real_time_factor=0.0)
    errors = []
    for k in range(750):
        loop.step_now()
        t = sim.t
        expected = q0 + (0.4 * t if t <= 0.5 else 0.2 + 0.2 * (t - 0.5)) if t <= 1.0 else q0 + 0.3
        errors.append(abs(sim.joint_positions()[0] - expected))
    assert max(errors[100:]) < 5e-3          # follows the timing (after the start-up transient)
    assert errors[-1] < 1e-3                 # and ends on the last point


def test_solver_failures_are_counted_and_stepping_goes_on():
    """An engine that reports FAILED on every attempt: the simulator keeps the state, the loop counts the
    failure with the engine's message and keeps stepping (no exception, no NaN)."""
    from contact_sim_ros.engines.base import SolverStatus

    sim = Simulator(SCENE, engine="semi_implicit", time_step=2e-3, max_substep_levels=1)
    real_step = sim.engine._do_step
    calls = {"n": 0}

    def flaky(inputs):
        result = real_step(inputs)
        calls["n"] += 1
        # attempts 10-12 fail: step 10 fails whole and as 2 sub-steps (the first one fails); step 11's first
        # attempt fails and it succeeds as 2 sub-steps
        if 10 <= calls["n"] < 13:
            result.stats.status = SolverStatus.FAILED
            result.stats.message = "injected failure"
        return result
    sim.engine._do_step = flaky
    loop = make_loop(sim, 0.0, start_paused=True)
    loop.start()
    try:
        assert loop.request_steps(20, timeout=30.0)
    finally:
        loop.stop()
    s = loop.stats()
    assert s.steps == 20 and s.solver_failures == 1 and "injected failure" in s.last_failure
    assert s.substepped_steps == 1
    assert sim.step_count == 19                      # the failed step left the state where it was
    assert np.all(np.isfinite(sim.q))


def test_persistent_failures_are_reported_before_the_loop_pauses():
    """Every attempt fails: after ``max_failed_steps`` in a row the loop calls ``on_failure`` (the node logs the
    cause there) while it still runs, and pauses right after with the reason, so nothing can show the pause before
    the cause is logged."""
    from contact_sim_ros.engines.base import SolverStatus

    sim = Simulator(SCENE, engine="semi_implicit", time_step=2e-3, max_substep_levels=0)
    real_step = sim.engine._do_step

    def failing(inputs):
        result = real_step(inputs)
        result.stats.status, result.stats.message = SolverStatus.FAILED, "injected failure"
        return result
    sim.engine._do_step = failing
    seen = []
    loop = make_loop(sim, 0.0, on_step_failure=lambda report, gave_up: seen.append(
        (gave_up, loop.paused, loop.stats(False).paused)))
    loop.start()
    try:
        wait_deadline = time.monotonic() + 20.0
        while not loop.paused and time.monotonic() < wait_deadline:
            time.sleep(0.01)
        assert loop.paused and "consecutive failed steps" in loop.pause_reason
    finally:
        loop.stop()
    assert len(seen) == loop.max_failed_steps
    assert [g for g, _, _ in seen] == [False] * (loop.max_failed_steps - 1) + [True]
    assert all(not paused and not reported for _, paused, reported in seen)   # not paused yet at the report


def test_a_failing_publication_does_not_stop_the_simulation(sim):
    sim.reset()

    def broken(s):
        raise RuntimeError("publisher gone")
    loop = make_loop(sim, 0.0, [PublishHook("broken", 5, broken)], start_paused=True)
    loop.start()
    try:
        assert loop.request_steps(20, timeout=30.0)
    finally:
        loop.stop()
    s = loop.stats()
    assert sim.step_count == 20 and s.publish_errors == 4 + 1   # every 5th step, + once when idle at start
    assert "publisher gone" in s.last_publish_error and loop.error is None


def test_a_rate_limited_hook_that_skipped_a_state_gets_it_on_pause(sim):
    """A hook that returns False published nothing (the node's viewer between two of its frames): when the loop
    pauses, that hook gets the state it stopped at, so a paused view shows where the simulation stands."""
    sim.reset()
    shown = []

    def viewer(s):                        # draws one state in 20 while running, like a frame-rate-limited viewer
        if s.step_count % 20 and not loop.paused:
            return False
        shown.append(s.t)

    def pause_click(s):                   # a Pause click that arrives after the viewer skipped step 33
        if s.step_count == 33:
            loop.set_paused(True)
    loop = make_loop(sim, 0.0, [PublishHook("viewer", 1, viewer), PublishHook("click", 1, pause_click)])
    loop.start()
    try:
        deadline = time.monotonic() + 20.0
        while not (loop.paused and shown and shown[-1] == sim.t) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
    finally:
        loop.stop()
    assert sim.step_count == 33
    assert shown[0] == pytest.approx(20 * 2e-3, abs=1e-12)              # running: every 20th state
    assert shown[-1] == sim.t == pytest.approx(33 * 2e-3, abs=1e-12)    # step 33's state, not step 20's


def test_a_huge_step_request_is_refused_or_a_long_run_never_an_overflow(sim):
    """StepSimulation with 2^63 - 1 steps (or a -1 wrapped by a C++ client) is refused with its reason; a count at
    the bound (MAX_STEPS_PER_REQUEST, with a 1e-2 s per step timeout: 1e7 s) is a long run whose wait is capped and
    which a pause preempts (issue 31: an OverflowError in the wait killed the node)."""
    sim.reset()
    loop = make_loop(sim, 0.0, start_paused=True)
    loop.start()
    try:
        ran, why = loop.run_steps(2 ** 63 - 1, timeout=1e-2 * (2 ** 63 - 1))
        assert ran == 0 and "exceed the bound" in why and sim.step_count == 0
        out = []
        worker = threading.Thread(target=lambda: out.append(
            loop.run_steps(MAX_STEPS_PER_REQUEST, timeout=1e-2 * MAX_STEPS_PER_REQUEST)))
        worker.start()
        deadline = time.monotonic() + 60.0
        while sim.step_count < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        loop.set_paused(True)
        worker.join(30.0)
        ran, why = out[0]
        assert 5 <= ran < MAX_STEPS_PER_REQUEST and why == "preempted by ~/pause"
    finally:
        loop.stop()


class _ControllersThatRaise:
    """Controllers whose first cycle waits for ``release`` and then raises, as a controller publishing its state
    does once rclpy.shutdown has invalidated its publisher's context."""

    hooks = ()

    def __init__(self):
        self.entered, self.release = threading.Event(), threading.Event()

    def cycle(self, step_count, t):
        self.entered.set()
        assert self.release.wait(60)
        raise RuntimeError("failed to get subscription count: publisher's context is invalid")

    def preempt(self, command):
        pass

    def reset(self):
        pass


@pytest.mark.parametrize("stop_first", [True, False], ids=["raised after stop", "raised while running"])
def test_an_exception_after_stop_is_the_shutdown_not_a_death(sim, stop_first):
    """Ctrl-C: the node stops the loop (waiting 0.5 s), destroys its publishers and shuts rclpy down; a cycle still
    running then raises. That must not be reported as the stepping thread's death (the node would print a
    traceback and exit 1). The same exception with no stop asked is a death and is reported."""
    sim.reset()
    errors = []
    controllers = _ControllersThatRaise()
    loop = SteppingLoop(SimulatorSystem(sim), controllers, Transport(on_error=errors.append), 0.0)
    loop.start()
    try:
        assert controllers.entered.wait(60)
        if stop_first:
            loop.stop(timeout=0.0)
        controllers.release.set()
        loop._thread.join(60)
        assert not loop._thread.is_alive() and not loop.running
        if stop_first:
            assert errors == [] and loop.error is None
            assert "context is invalid" in str(loop.error_after_stop)
        else:
            assert len(errors) == 1 and errors[0] is loop.error and "context is invalid" in str(loop.error)
    finally:
        controllers.release.set()
        loop.stop()
