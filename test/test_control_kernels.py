"""The ros2_control emulation's compiled passes (contact_sim_ros/driver/control_kernels.py) give exactly the numbers
of the straightforward numpy / Python computation they replace, on random cases: the trajectory sample (against
TrajectorySampler.sample), a trajectory controller's update (state, path tolerance, command interfaces) and the
hardware System's write (rate limit, gravity bookkeeping, mode masks)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from contact_sim_ros.driver import control_kernels as K
from contact_sim_ros.driver.command_validation import JointLimits, TrajectorySampler, validate_trajectory
from contact_sim_ros.driver.hardware import EFFORT, POSITION, VELOCITY


def _random_samplers(rng, n, with_velocities, start_time, copies=2):
    """``copies`` samplers of one random trajectory (from the state q0, v0 at ``start_time``)."""
    k = int(rng.integers(1, 6))
    times = np.cumsum(rng.uniform(0.01, 0.5, k))
    if rng.random() < 0.2:
        times = times - times[0]           # first point at t = 0
    names = tuple(f"j{i}" for i in range(n))
    limits = JointLimits(names, np.full(n, -10.0), np.full(n, 10.0), np.full(n, 100.0), np.full(n, 100.0))
    positions = rng.uniform(-3, 3, (k, n))
    velocities = rng.uniform(-2, 2, (k, n)) if with_velocities else None
    traj = validate_trajectory(limits, names, times.tolist(), positions.tolist(),
                               None if velocities is None else velocities.tolist())
    q0, v0 = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    return [TrajectorySampler(traj, start_time, q0, v0) for _ in range(copies)]


def _compiled_sample(sampler, t):
    out = np.zeros((2, len(sampler.indices)))
    velocities = sampler.positions if sampler.velocities is None else sampler.velocities
    done = K.sample_trajectory(round(t * 1e9) - sampler.start_ns, sampler.positions, velocities, sampler.ints, out)
    return out, done


@pytest.mark.parametrize("with_velocities", [False, True])
def test_the_compiled_sample_is_the_samplers_bit_for_bit(with_velocities):
    rng = np.random.default_rng(1 if with_velocities else 2)
    for case in range(40):
        n = int(rng.integers(1, 8))
        start = float(rng.uniform(0, 20))
        reference, compiled = _random_samplers(rng, n, with_velocities, start)
        ts = np.concatenate([start + np.sort(rng.uniform(-0.2, reference.times[-1] + 0.2, 60)),
                             start + reference.times, [start - 1.0, reference.end_time + 1.0]])
        for t in ts:                       # in time order and then jumping (the segment search both ways)
            pos, vel, done = reference.sample(float(t))
            out, done_compiled = _compiled_sample(compiled, float(t))
            np.testing.assert_array_equal(out[0], pos)
            np.testing.assert_array_equal(out[1], vel)
            assert done_compiled == done


def _reference_update(tau_t, sampler, idx, mode, commands, monitor, block, state, prev_out):
    """The Python controller's monitored branch and write_position."""
    block = block.copy()
    if monitor != K.UNMONITORED:
        q, v = state[0, idx], state[1, idx]
        ref_q, ref_v = (prev_out[0], prev_out[1]) if monitor == K.MONITORED else (q, v)
        block[:4] = ref_q, ref_v, q, v
        bad = np.abs(ref_q - q) > block[K.PATH_LIMIT]
        if bad.any():
            return int(np.flatnonzero(bad)[0]), block, mode, commands
    pos, vel, _ = sampler.sample(tau_t)
    mode, commands = mode.copy(), commands.copy()
    mode[idx] = POSITION
    commands[0, idx], commands[1, idx], commands[2, idx] = pos, vel, 0.0
    return -1, block, mode, commands


def test_the_compiled_trajectory_update_is_the_controllers_update():
    rng = np.random.default_rng(3)
    outcomes = set()
    for case in range(60):
        n_hw = int(rng.integers(2, 10))
        n = int(rng.integers(1, n_hw + 1))
        idx = np.sort(rng.choice(n_hw, n, replace=False)).astype(np.int64)
        sampler, reference_sampler = _random_samplers(rng, n, bool(rng.random() < 0.5), float(rng.uniform(0, 5)))
        sampler.sample(sampler.start_time + 0.5 * sampler.times[-1])          # a previous sample in ``out``
        prev_out = sampler.out.copy()
        mode = rng.integers(0, 3, n_hw).astype(np.int64)
        commands = rng.uniform(-1, 1, (3, n_hw))
        state = rng.uniform(-3, 3, (3, n_hw))
        block = rng.uniform(-1, 1, (5, n))
        block[K.PATH_LIMIT] = np.where(rng.random(n) < 0.3, np.inf, rng.uniform(0, 4, n))
        monitor = int(rng.integers(0, 3))
        t = float(sampler.start_time + rng.uniform(-0.1, sampler.times[-1] + 0.1))
        expected = _reference_update(t, reference_sampler, idx, mode, commands, monitor, block, state, prev_out)
        got_mode, got_commands, got_block = mode.copy(), commands.copy(), block.copy()
        velocities = sampler.positions if sampler.velocities is None else sampler.velocities
        k = K.trajectory_update(round(t * 1e9) - sampler.start_ns, sampler.positions, velocities, sampler.ints,
                                sampler.out, idx, got_mode, got_commands, monitor, got_block, state)
        assert k == expected[0]
        outcomes.add((monitor, k >= 0))
        np.testing.assert_array_equal(got_block, expected[1])
        np.testing.assert_array_equal(got_mode, expected[2])
        np.testing.assert_array_equal(got_commands, expected[3])
    assert outcomes >= {(K.UNMONITORED, False), (K.MONITORED_FIRST, False), (K.MONITORED, False), (K.MONITORED, True)}


class _ReferenceWrite:
    """SimulatorSystem._push_targets / _limit_rates as straightforward numpy (the code the kernel replaced)."""

    def __init__(self, rows, masks, status):
        self.q_sent, self.v_sent, self.v_ramp = rows[K.Q_SENT].copy(), rows[K.V_SENT].copy(), rows[K.V_RAMP].copy()
        self.dq_max, self.two_a = rows[K.DQ_MAX].copy(), rows[K.TWO_A].copy()
        self.v_max, self.a_dt = rows[K.V_MAX].copy(), rows[K.A_DT].copy()
        self.g_applied, self.effort_sent = rows[K.G_APPLIED].copy(), rows[K.EFFORT_SENT].copy()
        self.was_pos, self.not_pos = masks[K.WAS_POS].copy(), masks[K.NOT_POS].copy()
        self.is_effort = masks[K.IS_EFFORT].copy()
        self.ramping, self.was_all_pos, self.any_effort = (bool(s) for s in status)

    def limit_rates(self, mode, position, velocity, snap, snapped, measured, dt):
        pos = mode == POSITION
        all_pos = bool(pos.all()) and self.was_all_pos
        was_ramping = self.ramping
        if snapped:
            self.q_sent[snap] = measured[snap]      # a held joint starts from its measured position (issue 44)
            self.v_sent[snap] = 0.0
            snap[:] = False
        if not all_pos:
            self.not_pos = ~pos
            clip = ~self.was_pos | self.not_pos
            self.q_sent[clip] = measured[clip]
            self.v_sent[clip] = 0.0
            self.was_pos = pos.copy()
            self.was_all_pos = bool(pos.all())
        dq = position - self.q_sent
        jump = (np.abs(dq) > self.dq_max) & (all_pos | pos)
        self.v_ramp = velocity.copy()
        if jump.any():
            if not was_ramping:
                self.v_sent[:] = 0.0
            with np.errstate(invalid="ignore"):          # (0 * inf on joints without a limit: not used)
                w = np.minimum(np.sqrt(np.abs(dq) * self.two_a), self.v_max)
            w = np.copysign(w, dq)
            w = np.maximum(w, self.v_sent - self.a_dt)
            w = np.minimum(w, self.v_sent + self.a_dt)
            self.v_sent = np.where(jump, w, dq / dt)
            self.v_ramp = np.where(jump, w, self.v_ramp)
            dq = np.where(jump, w * dt, dq)
        else:
            self.v_sent = dq / dt
        self.q_sent = self.q_sent + dq
        if not all_pos:
            self.v_sent[self.not_pos] = 0.0
        self.ramping = bool(jump.any())

    def push(self, mode, values, flags, measured, g, changed, snapped, gravity, tol, dt):
        moved = changed or self.ramping
        if moved:
            self.limit_rates(mode, values[0], values[1], flags[K.SNAP], snapped, measured, dt)
        effort = values[2]
        if gravity:
            g = g.copy()
            if changed:
                self.is_effort = (mode == EFFORT) & flags[K.EFFORT_RAW]
                self.any_effort = bool(self.is_effort.any())
            if self.any_effort:
                g[self.is_effort] = 0.0
            if not moved and np.max(np.abs(g - self.g_applied), initial=0.0) <= tol:
                return K.NO_PUSH, None
            self.g_applied = g
            self.effort_sent = effort + g
            effort = self.effort_sent
        elif not moved:
            return K.NO_PUSH, None
        return (K.PUSH_EFFORT_SENT if gravity else K.PUSH_EFFORT), (mode == POSITION, mode == VELOCITY, effort)


def test_the_compiled_write_is_the_numpy_rate_limit_and_gravity_bookkeeping():
    rng = np.random.default_rng(4)
    dt = 1e-3
    seen = set()
    for case in range(30):
        n = int(rng.integers(1, 10))
        v_max = np.where(rng.random(n) < 0.2, np.inf, rng.uniform(0.5, 3.0, n))
        rows = np.zeros((K.N_ROWS, n))
        rows[K.DQ_MAX] = v_max * dt
        rows[K.V_MAX] = 0.95 * v_max
        a_max = rows[K.V_MAX] / 0.25
        rows[K.TWO_A], rows[K.A_DT] = 2.0 * a_max, a_max * dt
        rows[K.Q_SENT] = rng.uniform(-1, 1, n)
        rows[K.G_APPLIED] = np.inf
        masks = np.zeros((K.N_MASKS, n), dtype=bool)
        masks[K.WAS_POS] = True
        status = np.array([0, 1, 0], dtype=np.int64)
        gravity = bool(rng.random() < 0.8)
        reference = _ReferenceWrite(rows, masks, status)
        q = rng.uniform(-1, 1, n + 3)
        q_index = rng.permutation(n + 3)[:n].astype(np.int64)
        mode = np.zeros(n, dtype=np.int64)
        values = np.zeros((3, n))
        values[0] = rows[K.Q_SENT]
        flags = np.zeros((2, n), dtype=bool)
        flags[K.EFFORT_RAW] = True
        for step in range(120):
            changed = bool(rng.random() < 0.6)
            snapped = False
            if changed:                              # a controller's or a command's write
                kind = rng.random()
                j = rng.random(n) < 0.5
                if kind < 0.5:                       # small moves (tracking)
                    values[0, j] += rng.normal(0, 1e-3, j.sum())
                    values[1, j] = rng.normal(0, 1, j.sum())
                    mode[j] = POSITION
                elif kind < 0.7:                     # a jump
                    values[0, j] = rng.uniform(-2, 2, j.sum())
                    mode[j] = POSITION
                elif kind < 0.8:
                    mode[j] = VELOCITY
                    values[1, j] = rng.normal(0, 1, j.sum())
                elif kind < 0.9:
                    mode[j] = EFFORT
                    values[2, j] = rng.normal(0, 5, j.sum())
                    flags[K.EFFORT_RAW, j] = rng.random(j.sum()) < 0.5
                else:                                # hold
                    mode[j] = POSITION
                    values[0, j] = q[q_index][j]
                    flags[K.SNAP, j] = True
                    snapped = True
            q += rng.normal(0, 1e-3, q.shape)
            g = rng.normal(0, 1e-3, n) + 5.0 if rng.random() < 0.5 else rows[K.G_APPLIED] + rng.normal(0, 4e-4, n)
            g = np.where(np.isfinite(g), g, 1.0)
            rows[K.G] = g
            ref_flags = flags.copy()
            expected, pushed = reference.push(mode, values, ref_flags, q[q_index], g, changed, snapped, gravity,
                                              1e-3, dt)
            result = K.push_targets(mode, values, flags, q, q_index, rows, masks, status, changed, snapped, gravity,
                                    1e-3, dt)
            assert result == expected, (case, step)
            seen.add(result)
            seen.add("ramping" if reference.ramping else "tracking")
            np.testing.assert_array_equal(rows[K.Q_SENT], reference.q_sent)
            np.testing.assert_array_equal(rows[K.V_SENT], reference.v_sent)
            np.testing.assert_array_equal(flags, ref_flags)
            assert bool(status[K.RAMPING]) == reference.ramping
            if pushed is not None:
                np.testing.assert_array_equal(rows[K.V_RAMP], reference.v_ramp)
                np.testing.assert_array_equal(masks[K.CMD_POSITION], pushed[0])
                np.testing.assert_array_equal(masks[K.CMD_VELOCITY], pushed[1])
                effort = rows[K.EFFORT_SENT] if result == K.PUSH_EFFORT_SENT else values[2]
                np.testing.assert_array_equal(effort, pushed[2])
    assert seen == {K.NO_PUSH, K.PUSH_EFFORT, K.PUSH_EFFORT_SENT, "ramping", "tracking"}


def test_the_fused_hand_over_is_push_targets_then_the_simulators_command_kernel():
    """write_targets (the System's write in one call) leaves the System's rows and the Simulator's command arrays
    exactly as push_targets followed by step_kernels.joint_commands (Simulator.set_joint_command_arrays' pass)
    does; on a non-finite value or a pure effort for an engine that ignores efforts it writes nothing to the
    Simulator's arrays and returns the code set_joint_command_arrays raises on."""
    from contact_sim_ros.sim import step_kernels as S
    rng = np.random.default_rng(11)
    dt = 1e-3
    seen = set()
    for case in range(30):
        n = int(rng.integers(1, 8))
        nq = n + 2
        rows = np.zeros((K.N_ROWS, n))
        v_max = rng.uniform(0.5, 3.0, n)
        rows[K.DQ_MAX], rows[K.V_MAX] = v_max * dt, 0.95 * v_max
        rows[K.TWO_A], rows[K.A_DT] = 2.0 * rows[K.V_MAX] / 0.25, rows[K.V_MAX] / 0.25 * dt
        rows[K.G_APPLIED] = np.inf
        masks = np.zeros((K.N_MASKS, n), dtype=bool)
        masks[K.WAS_POS] = True
        status = np.array([0, 1, 0], dtype=np.int64)
        mode = np.zeros(n, dtype=np.int64)
        values = np.zeros((3, n))
        flags = np.zeros((2, n), dtype=bool)
        flags[K.EFFORT_RAW] = True
        q = rng.uniform(-1, 1, nq)
        q_index = rng.permutation(nq)[:n].astype(np.int64)
        v_index = rng.permutation(nq)[:n].astype(np.int64)
        lower, upper = np.full(n, -0.8), np.full(n, 0.8)
        passive = rng.permutation(nq)[:int(rng.integers(0, 2))].astype(np.intp)
        accepts = bool(rng.random() < 0.7)
        gravity = bool(rng.random() < 0.7)
        fused = [rows, masks, status, flags, [np.zeros(nq), np.zeros(nq), np.zeros(nq), np.zeros(nq, dtype=bool),
                                              np.zeros(nq, dtype=bool)]]
        staged = [rows.copy(), masks.copy(), status.copy(), flags.copy(), [a.copy() for a in fused[4]]]
        for step in range(60):
            changed = bool(rng.random() < 0.6)
            if changed:
                j = rng.random(n) < 0.5
                kind = rng.random()
                if kind < 0.6:
                    values[0, j] = rng.uniform(-1, 1, j.sum())
                    mode[j] = POSITION
                elif kind < 0.75:
                    mode[j] = VELOCITY
                    values[1, j] = rng.normal(0, 1, j.sum())
                else:
                    mode[j] = EFFORT
                    values[2, j] = rng.normal(0, 5, j.sum())
                if rng.random() < 0.05:
                    values[2, int(rng.integers(n))] = np.nan     # not finite: nothing handed over
            q += rng.normal(0, 1e-3, nq)
            g = rng.normal(5.0, 1e-2, n)
            fused[0][K.G] = staged[0][K.G] = g
            rows_s, masks_s, status_s, flags_s, out_s = staged
            result = K.push_targets(mode, values, flags_s, q, q_index, rows_s, masks_s, status_s, changed, False,
                                    gravity, 1e-3, dt)
            expected = K.NOT_PUSHED
            if result != K.NO_PUSH:
                effort = rows_s[K.EFFORT_SENT] if result == K.PUSH_EFFORT_SENT else values[2]
                expected = S.joint_commands(masks_s[K.CMD_POSITION], masks_s[K.CMD_VELOCITY], rows_s[K.Q_SENT],
                                            rows_s[K.V_RAMP], effort, q_index, v_index, lower, upper, passive,
                                            accepts, *out_s)
            rows_f, masks_f, status_f, flags_f, out_f = fused
            code = K.write_targets(mode, values, flags_f, q, q_index, rows_f, masks_f, status_f, changed, False,
                                   gravity, 1e-3, dt, q_index, v_index, lower, upper, passive, accepts, *out_f)
            assert code == expected, (case, step)
            seen.add(code)
            for a, b in zip(fused[:4] + out_f, staged[:4] + out_s):
                np.testing.assert_array_equal(a, b)
            if code > K.COMMANDS_SET:
                values[2] = np.where(np.isfinite(values[2]), values[2], 0.0)
    assert seen == {K.NOT_PUSHED, S.COMMANDS_SET, S.COMMAND_NOT_FINITE, S.PURE_EFFORT}


def test_the_compiled_motion_fill_is_take_and_the_state_interfaces_read_it():
    """fill_motion gives the rows q[q_index], v[v_index] exactly (as ndarray.take); a System's StateInterfaces
    fill both rows with it on the first motion() after a read, and a row read first stays as fill_state gave it."""
    rng = np.random.default_rng(5)
    for n in (1, 3, 9):
        q, v = rng.normal(size=n + 4), rng.normal(size=n + 3)
        q_index, v_index = rng.permutation(n + 4)[:n], rng.permutation(n + 3)[:n]
        values = np.full((3, n), np.nan)
        K.fill_motion(q, v, q_index, v_index, values)
        np.testing.assert_array_equal(values[0], q.take(q_index))
        np.testing.assert_array_equal(values[1], v.take(v_index))
        assert np.isnan(values[2]).all()

    from contact_sim_ros.driver.system import SimulatorSystem
    from contact_sim_ros.sim.simulator import Simulator
    scene = Path(__file__).resolve().parents[1] / "scenes" / "scenario_pick_shake_place.yaml"
    sim = Simulator(str(scene), engine="tamsi", time_step=1e-3)
    system = SimulatorSystem(sim)
    m = sim.model
    for _ in range(3):
        system.step()
        expected_q, expected_v = sim.q.take(m.joint_q_index), sim.v.take(m.joint_v_index)
        values = system.state.motion()
        assert values is system.state.values
        np.testing.assert_array_equal(values[0], expected_q)
        np.testing.assert_array_equal(values[1], expected_v)
    system.step()
    position = system.state.position.copy()             # one row first (fill_state), then both
    values = system.state.motion()
    np.testing.assert_array_equal(values[0], position)
    np.testing.assert_array_equal(values[1], sim.v.take(m.joint_v_index))
    assert np.any(values[1] != 0.0)


def test_a_non_finite_command_is_refused_by_the_systems_fused_write_and_nothing_is_handed_over():
    """The System's write (control_kernels.write_targets) on a non-finite effort raises the Simulator's ConfigError
    naming the joint and leaves the Simulator's command arrays as they were; the next finite write goes through."""
    from contact_sim_ros.driver.system import SimulatorSystem
    from contact_sim_ros.errors import ConfigError
    from contact_sim_ros.sim.simulator import Simulator
    scene = Path(__file__).resolve().parents[1] / "scenes" / "scenario_pick_shake_place.yaml"
    sim = Simulator(str(scene), engine="tamsi", time_step=1e-3)
    system = SimulatorSystem(sim)
    system.step()
    system.write()
    d = sim.data
    before = [a.copy() for a in (d.q_target, d.v_target, d.effort, d.position_mode, d.velocity_mode)]
    hw = system.command
    hw.write_effort(np.array([1]), np.array([np.nan]))
    with pytest.raises(ConfigError, match=f"joint '{hw.joint_names[1]}': effort command must be finite"):
        system.write()
    for a, b in zip((d.q_target, d.v_target, d.effort, d.position_mode, d.velocity_mode), before):
        np.testing.assert_array_equal(a, b)
    hw.write_effort(np.array([1]), np.array([2.5]))
    system.write()
    vi = sim.model.joint_v_index[1]
    assert not d.position_mode[vi] and not d.velocity_mode[vi]
    assert d.effort[vi] == 2.5               # a raw effort: no g added
