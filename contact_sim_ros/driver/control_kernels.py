"""The per-step control emulation's array work as compiled passes (numba, cached with the engines' kernels:
contact_sim_ros/jit.py), instead of ~10-20 numpy calls each on arrays of a few entries (a campaign trial's
control emulation: ~50 -> ~15 us per step).

* ``trajectory_update``: a position-mode joint trajectory controller's update while its trajectory runs
  (driver/controllers/joint_trajectory.py ``JointTrajectoryController._update``): the state of its joints and the
  path tolerance (when monitored), the trajectory's sample one period ahead (``TrajectorySampler.sample``) written
  to the command interfaces (``JointCommandInterfaces.write_position``);
* ``push_targets``: the hardware System's write (driver/system.py ``SimulatorSystem._push_targets``): the
  position targets' rate limit (the driver's interpolator), the gravity feed-forward's bookkeeping and the mode
  masks that ``Simulator.set_joint_command_arrays`` takes.

Both give the same numbers as the numpy code they replace (the same floating-point operations in the same order;
test/test_control_kernels.py compares them on random cases).
"""

from __future__ import annotations

import math

import numpy as np

from ..jit import njit
from ..sim.step_kernels import COMMANDS_SET, joint_commands

# JointCommandInterfaces.mode values (driver/hardware.py: POSITION, VELOCITY, EFFORT)
_POSITION, _VELOCITY, _EFFORT = 0, 1, 2

# rows of JointCommandInterfaces.values / StateInterfaces.values: position, velocity, effort
POSITION_ROW, VELOCITY_ROW, EFFORT_ROW = range(3)

# trajectory_update's ``monitor``: no state read; monitored, the reference is the measured state (the first
# update of the goal); monitored, the reference is the previous sample (``out`` before this update)
UNMONITORED, MONITORED_FIRST, MONITORED = range(3)
# rows of an Execution's ``monitor`` block: feedback (reference q, v; measured q, v), the path tolerance
REF_Q, REF_V, MEASURED_Q, MEASURED_V, PATH_LIMIT = range(5)
# TrajectorySampler's ``ints``: the segment of the last sample, 1 when velocities are given, then the times (ns)
SEGMENT, HAS_VELOCITIES, TIMES = range(3)


@njit(cache=True)
def sample_trajectory(tau, positions, velocities, ints, out):
    """``TrajectorySampler.sample`` at ``tau`` ns after the trajectory's start into ``out`` (rows position,
    velocity); ``ints``: [segment of the last sample (updated), has velocities, times (ns) of the points...].
    Returns whether tau is at or after the last point."""
    k_points = ints.shape[0] - TIMES
    n = out.shape[1]
    last = ints[TIMES + k_points - 1]
    if tau >= last or k_points == 1:
        for i in range(n):
            out[0, i] = positions[k_points - 1, i]
            out[1, i] = 0.0
        return tau >= last
    if tau <= 0:
        for i in range(n):
            out[0, i] = positions[0, i]
            out[1, i] = 0.0
        return False
    k = ints[SEGMENT]
    if k < 0 or not (ints[TIMES + k] <= tau < ints[TIMES + k + 1]):
        k = 0                                # bisect_right(times, tau) - 1
        lo, hi = 0, k_points
        while lo < hi:
            mid = (lo + hi) // 2
            if tau < ints[TIMES + mid]:
                hi = mid
            else:
                lo = mid + 1
        k = lo - 1
        ints[SEGMENT] = k
    t0 = ints[TIMES + k]
    h_ns = ints[TIMES + k + 1] - t0
    h = h_ns * 1e-9
    s = float(tau - t0) / float(h_ns)
    if ints[HAS_VELOCITIES] == 0:
        for i in range(n):
            dp = positions[k + 1, i] - positions[k, i]
            out[0, i] = positions[k, i] + dp * s
            out[1, i] = dp / h
    else:
        s2, s3 = s * s, s * s * s
        c00, c01, c02, c03 = 2 * s3 - 3 * s2 + 1, s3 - 2 * s2 + s, -2 * s3 + 3 * s2, s3 - s2
        c10, c11, c12, c13 = 6 * s2 - 6 * s, 3 * s2 - 4 * s + 1, -6 * s2 + 6 * s, 3 * s2 - 2 * s
        for i in range(n):
            b0, b1 = positions[k, i], velocities[k, i] * h
            b2, b3 = positions[k + 1, i], velocities[k + 1, i] * h
            out[0, i] = c00 * b0 + c01 * b1 + c02 * b2 + c03 * b3
            out[1, i] = (c10 * b0 + c11 * b1 + c12 * b2 + c13 * b3) / h
    return False


@njit(cache=True)
def trajectory_update(tau, positions, velocities, ints, out, idx, mode, commands, monitor, block, state):
    """One update of a running position-mode trajectory (joints ``idx``, hardware indices): when ``monitor`` is
    not UNMONITORED, ``block``'s rows REF_Q, REF_V (the previous sample ``out``, or the measured state for
    MONITORED_FIRST), MEASURED_Q, MEASURED_V from ``state`` (StateInterfaces.values: positions, velocities of every
    joint), and the path tolerance: the first joint whose |reference - measured| exceeds its PATH_LIMIT row is
    returned (nothing sampled nor written); else the sample at ``tau`` ns (``sample_trajectory``) into ``out`` and
    the command interfaces (``mode`` POSITION, ``commands`` rows position, velocity, effort 0) and -1."""
    n = idx.shape[0]
    if monitor != UNMONITORED:
        for j in range(n):
            q, v = state[POSITION_ROW, idx[j]], state[VELOCITY_ROW, idx[j]]
            block[MEASURED_Q, j] = q
            block[MEASURED_V, j] = v
            if monitor == MONITORED:
                block[REF_Q, j] = out[0, j]
                block[REF_V, j] = out[1, j]
            else:
                block[REF_Q, j] = q
                block[REF_V, j] = v
        for j in range(n):
            if abs(block[REF_Q, j] - block[MEASURED_Q, j]) > block[PATH_LIMIT, j]:
                return j
    sample_trajectory(tau, positions, velocities, ints, out)
    for j in range(n):
        i = idx[j]
        mode[i] = _POSITION
        commands[POSITION_ROW, i] = out[0, j]
        commands[VELOCITY_ROW, i] = out[1, j]
        commands[EFFORT_ROW, i] = 0.0
    return -1


@njit(cache=True)
def fill_motion(q, v, q_index, v_index, values):
    """The joints' positions ``q[q_index]`` and velocities ``v[v_index]`` into ``values``' rows POSITION_ROW and
    VELOCITY_ROW (StateInterfaces.values; the hardware System's ``fill_motion``): both rows in one call (the
    same numbers as ``take``: copies)."""
    for i in range(q_index.shape[0]):
        values[POSITION_ROW, i] = q[q_index[i]]
        values[VELOCITY_ROW, i] = v[v_index[i]]


# rows of SimulatorSystem's float ``rows`` block
Q_SENT, V_SENT, DQ, V_RAMP, DQ_MAX, TWO_A, V_MAX, A_DT, G, G_APPLIED, EFFORT_SENT = range(11)
N_ROWS = 11
# rows of its bool ``masks`` block: position mode now, at the last rate limit, not in position mode, to restart
# from the measured position, raw effort (no g), the modes handed to the simulator
POS, WAS_POS, NOT_POS, CLIP, IS_EFFORT, CMD_POSITION, CMD_VELOCITY = range(7)
N_MASKS = 7
# rows of JointCommandInterfaces' bool ``flags`` block
EFFORT_RAW, SNAP = range(2)
# SimulatorSystem's int ``status``: a joint on its ramp, every joint in position mode at the last rate limit, a
# joint in raw effort mode
RAMPING, WAS_ALL_POS, ANY_EFFORT = range(3)
# push_targets' result: nothing to hand over, the targets with hw's effort, with EFFORT_SENT (effort + g)
NO_PUSH, PUSH_EFFORT, PUSH_EFFORT_SENT = range(3)


@njit(cache=True)
def _minimum(a, b):
    """np.minimum of two floats (nan propagates; equal values: the first)."""
    return a if (a <= b or a != a) else b


@njit(cache=True)
def _maximum(a, b):
    """np.maximum of two floats (nan propagates; equal values: the first)."""
    return a if (a >= b or a != a) else b


@njit(cache=True)
def _limit_rates(mode, commands, flags, q, q_index, rows, masks, status, snapped, dt):
    """The position targets' rate limit (driver/system.py, the comment after ``_push_targets``), in place on ``rows``
    (Q_SENT, V_SENT, DQ, V_RAMP), ``masks`` (POS, WAS_POS, NOT_POS, CLIP), ``status`` (RAMPING, WAS_ALL_POS) and
    ``flags``' SNAP row (cleared when ``snapped``); ``q``, ``q_index``: the measured positions of the joints are
    q[q_index]."""
    n = mode.shape[0]
    position_cmd, velocity_cmd = commands[POSITION_ROW], commands[VELOCITY_ROW]
    q_sent, v_sent, dq, v_ramp = rows[Q_SENT], rows[V_SENT], rows[DQ], rows[V_RAMP]
    dq_max, two_a, v_max, a_dt = rows[DQ_MAX], rows[TWO_A], rows[V_MAX], rows[A_DT]
    pos, was_pos, not_pos, clip = masks[POS], masks[WAS_POS], masks[NOT_POS], masks[CLIP]
    every = True
    for i in range(n):
        pos[i] = mode[i] == _POSITION
        every = every and pos[i]
    all_pos = every and status[WAS_ALL_POS] != 0
    was_ramping = status[RAMPING] != 0
    if snapped:
        # a held joint starts from where it was held: its measured position (every hold is at the measured
        # position of its cycle); the command may already be a newer target written after the hold in the same
        # cycle (a gripper goal at t = 0 or after a reset, both of which hold every joint), reached on the profile
        snap = flags[SNAP]
        for i in range(n):
            if snap[i]:
                q_sent[i] = q[q_index[i]]
                v_sent[i] = 0.0
            snap[i] = False
    if not all_pos:
        for i in range(n):
            not_pos[i] = not pos[i]
            clip[i] = (not was_pos[i]) or not_pos[i]
            if clip[i]:
                q_sent[i] = q[q_index[i]]
                v_sent[i] = 0.0
            was_pos[i] = pos[i]
        status[WAS_ALL_POS] = 1 if every else 0
    # the profile per joint (formerly sim/step_kernels.rate_limited_targets)
    ramping = False
    for i in range(n):
        d = position_cmd[i] - q_sent[i]
        dq[i] = d
        v_ramp[i] = velocity_cmd[i]
        if abs(d) > dq_max[i] and (all_pos or pos[i]):
            ramping = True
    if ramping:
        if not was_ramping:
            for i in range(n):
                v_sent[i] = 0.0
        for i in range(n):
            d = dq[i]
            w = abs(d)
            if w > dq_max[i] and (all_pos or pos[i]):
                w = _minimum(math.sqrt(w * two_a[i]), v_max[i])
                w = math.copysign(w, d)
                w = _maximum(w, v_sent[i] - a_dt[i])
                w = _minimum(w, v_sent[i] + a_dt[i])
                dq[i] = w * dt
                v_sent[i] = w
                v_ramp[i] = w
            else:
                v_sent[i] = d / dt
    else:
        for i in range(n):
            v_sent[i] = dq[i] / dt
    for i in range(n):
        q_sent[i] = q_sent[i] + dq[i]
    if not all_pos:
        for i in range(n):
            if not_pos[i]:
                v_sent[i] = 0.0
    status[RAMPING] = 1 if ramping else 0


@njit(cache=True)
def push_targets(mode, commands, flags, q, q_index, rows, masks, status, changed, snapped, gravity, tolerance, dt):
    """``SimulatorSystem._push_targets`` (its docstring) after g(q) was computed into rows[G] (``gravity``: the
    System has a gravity feed-forward): the rate limit when ``changed`` (a write to the command interfaces) or a
    ramp runs; the joints in raw effort mode get no g; without a move, g is handed over only when it moved by
    more than ``tolerance`` from G_APPLIED. Returns NO_PUSH, or PUSH_EFFORT / PUSH_EFFORT_SENT (the efforts to
    hand over: the command interfaces' or EFFORT_SENT = effort + g) with the CMD_POSITION and CMD_VELOCITY masks
    filled; Q_SENT and V_RAMP are the position and velocity targets."""
    n = mode.shape[0]
    moved = changed or status[RAMPING] != 0
    if moved:
        _limit_rates(mode, commands, flags, q, q_index, rows, masks, status, snapped, dt)
    result = PUSH_EFFORT
    if gravity:
        g, g_applied, effort_sent, is_effort = rows[G], rows[G_APPLIED], rows[EFFORT_SENT], masks[IS_EFFORT]
        if changed:                  # the modes change only with a write to the command interfaces
            anyone = False
            for i in range(n):
                is_effort[i] = mode[i] == _EFFORT and flags[EFFORT_RAW, i]
                anyone = anyone or is_effort[i]
            status[ANY_EFFORT] = 1 if anyone else 0
        if status[ANY_EFFORT] != 0:
            for i in range(n):
                if is_effort[i]:
                    g[i] = 0.0
        if not moved:                # the targets stand: hand g over only when it moved enough
            still = True
            for i in range(n):
                if not abs(g[i] - g_applied[i]) <= tolerance:     # (nan: moved)
                    still = False
                    break
            if still:
                return NO_PUSH
        effort = commands[EFFORT_ROW]
        for i in range(n):
            g_applied[i] = g[i]
            effort_sent[i] = effort[i] + g[i]
        result = PUSH_EFFORT_SENT
    elif not moved:
        return NO_PUSH
    cmd_position, cmd_velocity = masks[CMD_POSITION], masks[CMD_VELOCITY]
    for i in range(n):
        cmd_position[i] = mode[i] == _POSITION
        cmd_velocity[i] = mode[i] == _VELOCITY
    return result


# write_targets' result besides joint_commands' codes (step_kernels: COMMANDS_SET, COMMAND_NOT_FINITE, PURE_EFFORT)
NOT_PUSHED = -1


@njit(cache=True)
def write_targets(mode, commands, flags, q, q_index, rows, masks, status, changed, snapped, gravity, tolerance, dt,
                  joint_q_index, joint_v_index, lower, upper, passive_v, accepts_effort, q_target, v_target, effort,
                  position_mode_out, velocity_mode_out):
    """``push_targets`` (the arguments up to ``dt``) and, unless it returns NO_PUSH, the hand-over to the
    Simulator in the same call: ``sim/step_kernels.joint_commands`` with the CMD_POSITION and CMD_VELOCITY masks,
    the targets Q_SENT and V_RAMP, the efforts push_targets chose (EFFORT_SENT or the command interfaces' effort
    row) and the Simulator's buffers after them (``Simulator.joint_command_buffers``), as
    ``Simulator.set_joint_command_arrays`` calls it. Returns NOT_PUSHED, or joint_commands' code (COMMANDS_SET;
    COMMAND_NOT_FINITE or PURE_EFFORT: nothing written to the Simulator, the caller raises as
    set_joint_command_arrays does)."""
    result = push_targets(mode, commands, flags, q, q_index, rows, masks, status, changed, snapped, gravity,
                          tolerance, dt)
    if result == NO_PUSH:
        return NOT_PUSHED
    efforts = rows[EFFORT_SENT] if result == PUSH_EFFORT_SENT else commands[EFFORT_ROW]
    return joint_commands(masks[CMD_POSITION], masks[CMD_VELOCITY], rows[Q_SENT], rows[V_RAMP], efforts,
                          joint_q_index, joint_v_index, lower, upper, passive_v, accepts_effort, q_target, v_target,
                          effort, position_mode_out, velocity_mode_out)


def warm_up() -> None:
    """Compile (or load from the cache) every kernel of this module for the argument types the driver passes
    (contact_sim_ros.kernel_cache's warm-up calls it): a 2-joint trajectory, linear and cubic, monitored and not,
    and a write of each kind."""
    n, k_points = 2, 3
    positions = np.arange(k_points * n, dtype=float).reshape(k_points, n)
    ints = np.array([-1, 0, 0, 500_000_000, 1_000_000_000], dtype=np.int64)
    out = np.zeros((2, n))
    idx = np.arange(n, dtype=np.int64)
    idx_ro = idx.copy()
    idx_ro.setflags(write=False)          # (as MultibodyModel.joint_q_index, joint_v_index)
    mode = np.zeros(n, dtype=np.int64)
    commands = np.zeros((3, n))
    state = np.zeros((3, n))
    block = np.zeros((5, n))
    block[PATH_LIMIT] = np.inf
    for has_velocities, monitor in ((0, UNMONITORED), (1, MONITORED_FIRST), (1, MONITORED)):
        ints[HAS_VELOCITIES] = has_velocities
        trajectory_update(250_000_000, positions, positions, ints, out, idx, mode, commands, monitor, block, state)
    sample_trajectory(750_000_000, positions, positions, ints, out)
    fill_motion(np.zeros(n), np.zeros(n), idx_ro, idx_ro, state)
    flags = np.zeros((2, n), dtype=bool)
    rows = np.zeros((N_ROWS, n))
    rows[DQ_MAX] = rows[V_MAX] = np.inf
    masks = np.zeros((N_MASKS, n), dtype=bool)
    status = np.zeros(3, dtype=np.int64)
    q = np.zeros(n)
    q_index = idx.copy()
    q_index.setflags(write=False)         # (MultibodyModel.joint_q_index is read-only)
    for changed in (True, False):
        push_targets(mode, commands, flags, q, q_index, rows, masks, status, changed, False, True, 1e-3, 1e-3)
    lower, upper = np.full(n, -np.inf), np.full(n, np.inf)
    for a in (lower, upper):
        a.setflags(write=False)           # (as the model's limits: Simulator.joint_command_buffers)
    buffers = (q_index, q_index, lower, upper, np.zeros(0, dtype=np.intp), True, np.zeros(n), np.zeros(n),
               np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool))
    for changed, gravity in ((True, True), (False, False)):
        write_targets(mode, commands, flags, q, q_index, rows, masks, status, changed, False, gravity, 1e-3, 1e-3,
                      *buffers)
    # period_step: one trajectory, monitored, over both joints (as driver/control_period.ControlPeriod packs it)
    head = N_HEADER + N_PLAN_INT
    pint = np.concatenate((np.zeros(head, dtype=np.int64), ints, idx))
    pint[H_TRAJECTORIES], pint[H_COLUMNS], pint[H_GRAVITY] = 1, n, 1
    fhead = N_FLOAT_HEADER + N_PLAN_FLOAT
    pflt = np.concatenate((np.zeros(fhead), positions.ravel(), positions.ravel(), np.zeros(N_BLOCK_ROWS * n)))
    pint[H_BLOCK] = fhead + 2 * k_points * n
    pint[N_HEADER + PI_POSITIONS], pint[N_HEADER + PI_VELOCITIES] = fhead, fhead + k_points * n
    pint[N_HEADER + PI_POINTS], pint[N_HEADER + PI_JOINTS] = k_points, n
    pint[N_HEADER + PI_INTS], pint[N_HEADER + PI_IDX] = head, head + ints.shape[0]
    pint[N_HEADER + PI_MONITOR], pint[N_HEADER + PI_EVERY] = MONITORED_FIRST, 1
    pflt[F_TOLERANCE], pflt[F_DT] = 1e-3, 1e-3
    pflt[N_FLOAT_HEADER + PF_END], pflt[N_FLOAT_HEADER + PF_PERIOD] = 1.0, 1e-3
    pflt[pint[H_BLOCK] + (MONITOR_ROWS + PATH_LIMIT) * n:pint[H_BLOCK] + (MONITOR_ROWS + PATH_LIMIT + 1) * n] = np.inf
    for changed in (True, False):
        period_step(0, 0.25, changed, q, np.zeros(n), np.zeros(n), pint, pflt, state, mode, commands, flags, rows,
                    masks, status, *buffers)


# ------------------------------------------------------------------------------------- the control period
# (driver/control_period.py) Every due controller's update and the System's write of one step in one compiled
# call, over a *plan* packed from the controllers whose update is a pure function of (state, their trajectory
# arrays, t): running position-mode joint trajectories (``ControlPeriod``). The plan is two arrays (few arguments:
# a compiled call costs ~0.08 us per array argument):
# * ``pint`` (int64): a header (H_*), then per trajectory a row of N_PLAN_INT (PI_*: offsets are absolute indices
#   into pint or pflt), then the trajectories' ints (TrajectorySampler.ints: segment, has velocities, times ns)
#   and hardware joint indices;
# * ``pflt`` (float64): a header (F_*), then per trajectory a row of N_PLAN_FLOAT (PF_*), then the trajectories'
#   positions and velocities (row-major, k points x n joints), then the block: N_BLOCK_ROWS rows of H_COLUMNS
#   columns (one per joint of the trajectories, in plan order): the last sample (OUT_Q, OUT_V:
#   TrajectorySampler.out), then an Execution's monitor rows (MONITOR_ROWS + REF_Q ... PATH_LIMIT).
H_TRAJECTORIES, H_COLUMNS, H_GRAVITY, H_BLOCK = range(4)
N_HEADER = 4
PI_POSITIONS, PI_VELOCITIES, PI_POINTS, PI_JOINTS, PI_INTS, PI_IDX, PI_COLUMN, PI_START_NS, PI_MONITOR, PI_EVERY, \
    PI_UPDATES = range(11)
N_PLAN_INT = 11
F_TOLERANCE, F_DT = range(2)        # the System's gravity tolerance (N*m or N), the time step (s)
N_FLOAT_HEADER = 2
PF_END, PF_PERIOD, PF_LAST = range(3)      # end time (s), the controller manager's period (s), last update (s)
N_PLAN_FLOAT = 3
OUT_Q, OUT_V = range(2)
MONITOR_ROWS = 2
N_BLOCK_ROWS = 7
# period_step's result besides write_targets' (NOT_PUSHED, COMMANDS_SET, COMMAND_NOT_FINITE, PURE_EFFORT): a due
# trajectory needs its controller's Python update at this step (it reached its end, or its path tolerance is
# violated); nothing was written
NEEDS_PYTHON = -2


@njit(cache=True)
def _sample_packed(tau, pflt, pos, vel, n, pint, io, k_points, b_q, b_v):
    """``sample_trajectory`` on a plan's packed arrays: the positions of the trajectory are pflt[pos + k * n + i],
    its velocities pflt[vel + k * n + i], its ints pint[io:io + TIMES + k_points], the sample goes to
    pflt[b_q + i] (position) and pflt[b_v + i] (velocity) (the same floating-point operations in the same order)."""
    last = pint[io + TIMES + k_points - 1]
    if tau >= last or k_points == 1:
        for i in range(n):
            pflt[b_q + i] = pflt[pos + (k_points - 1) * n + i]
            pflt[b_v + i] = 0.0
        return
    if tau <= 0:
        for i in range(n):
            pflt[b_q + i] = pflt[pos + i]
            pflt[b_v + i] = 0.0
        return
    k = pint[io + SEGMENT]
    if k < 0 or not (pint[io + TIMES + k] <= tau < pint[io + TIMES + k + 1]):
        lo, hi = 0, k_points
        while lo < hi:
            mid = (lo + hi) // 2
            if tau < pint[io + TIMES + mid]:
                hi = mid
            else:
                lo = mid + 1
        k = lo - 1
        pint[io + SEGMENT] = k
    t0 = pint[io + TIMES + k]
    h_ns = pint[io + TIMES + k + 1] - t0
    h = h_ns * 1e-9
    s = float(tau - t0) / float(h_ns)
    p0, p1 = pos + k * n, pos + (k + 1) * n
    if pint[io + HAS_VELOCITIES] == 0:
        for i in range(n):
            dp = pflt[p1 + i] - pflt[p0 + i]
            pflt[b_q + i] = pflt[p0 + i] + dp * s
            pflt[b_v + i] = dp / h
    else:
        v0, v1 = vel + k * n, vel + (k + 1) * n
        s2, s3 = s * s, s * s * s
        c00, c01, c02, c03 = 2 * s3 - 3 * s2 + 1, s3 - 2 * s2 + s, -2 * s3 + 3 * s2, s3 - s2
        c10, c11, c12, c13 = 6 * s2 - 6 * s, 3 * s2 - 4 * s + 1, -6 * s2 + 6 * s, 3 * s2 - 2 * s
        for i in range(n):
            b0, b1 = pflt[p0 + i], pflt[v0 + i] * h
            b2, b3 = pflt[p1 + i], pflt[v1 + i] * h
            pflt[b_q + i] = c00 * b0 + c01 * b1 + c02 * b2 + c03 * b3
            pflt[b_v + i] = (c10 * b0 + c11 * b1 + c12 * b2 + c13 * b3) / h


@njit(cache=True)
def period_step(step, t, changed, q, v, v_prev, pint, pflt, state, mode, commands, flags, rows, masks, status,
                joint_q_index, joint_v_index, lower, upper, passive_v, accepts_effort, q_target, v_target, effort,
                position_mode_out, velocity_mode_out):
    """One step's control emulation before the physics step (loop.SteppingLoop.step_now's ``_cycle``) when every
    controller update due is a plan trajectory's (``pint``, ``pflt``: the layout above): at step ``step`` and sim
    time ``t`` (s), the trajectories whose manager is due (``step % every == 0``) update as ``trajectory_update``
    (when monitored, the state of their joints, ``state``'s rows POSITION_ROW, VELOCITY_ROW filled from ``q``,
    ``v`` at ``joint_q_index``, ``joint_v_index`` as ``fill_motion`` does, and the path tolerance; the sample one
    period ahead written to the command interfaces ``mode``, ``commands``); then the System's write
    (``write_targets`` with ``changed`` or a trajectory written, no snap; g(q) already in ``rows[G]`` when the
    header's H_GRAVITY is set; the arguments from ``joint_q_index`` on: Simulator.joint_command_buffers()); then
    ``v_prev`` takes ``v`` (SimulatorSystem.step). Returns write_targets' code, or NEEDS_PYTHON before anything is
    written when a due trajectory is not running at ``t`` (``t >= end``) or violates its path tolerance: the step
    then goes through the controllers' Python updates."""
    m, cols, b = pint[H_TRAJECTORIES], pint[H_COLUMNS], pint[H_BLOCK]
    filled = False
    for c in range(m):                         # first the checks: nothing written when one fails
        r = N_HEADER + c * N_PLAN_INT
        if step % pint[r + PI_EVERY] != 0:
            continue
        f = N_FLOAT_HEADER + c * N_PLAN_FLOAT
        if not t < pflt[f + PF_END]:
            return NEEDS_PYTHON
        monitor = pint[r + PI_MONITOR]
        if monitor == UNMONITORED:
            continue
        if not filled:
            for i in range(joint_q_index.shape[0]):
                state[POSITION_ROW, i] = q[joint_q_index[i]]
                state[VELOCITY_ROW, i] = v[joint_v_index[i]]
            filled = True
        n, col, io = pint[r + PI_JOINTS], pint[r + PI_COLUMN], pint[r + PI_IDX]
        for j in range(n):
            measured = state[POSITION_ROW, pint[io + j]]
            ref = pflt[b + OUT_Q * cols + col + j] if monitor == MONITORED else measured
            if abs(ref - measured) > pflt[b + (MONITOR_ROWS + PATH_LIMIT) * cols + col + j]:
                return NEEDS_PYTHON
    wrote = False
    for c in range(m):
        r = N_HEADER + c * N_PLAN_INT
        if step % pint[r + PI_EVERY] != 0:
            continue
        f = N_FLOAT_HEADER + c * N_PLAN_FLOAT
        monitor = pint[r + PI_MONITOR]
        n, col, io = pint[r + PI_JOINTS], pint[r + PI_COLUMN], pint[r + PI_IDX]
        b_q, b_v = b + OUT_Q * cols + col, b + OUT_V * cols + col
        if monitor != UNMONITORED:
            b_m = b + MONITOR_ROWS * cols + col
            for j in range(n):
                i = pint[io + j]
                qj, vj = state[POSITION_ROW, i], state[VELOCITY_ROW, i]
                pflt[b_m + MEASURED_Q * cols + j] = qj
                pflt[b_m + MEASURED_V * cols + j] = vj
                if monitor == MONITORED:
                    pflt[b_m + REF_Q * cols + j] = pflt[b_q + j]
                    pflt[b_m + REF_V * cols + j] = pflt[b_v + j]
                else:
                    pflt[b_m + REF_Q * cols + j] = qj
                    pflt[b_m + REF_V * cols + j] = vj
            pint[r + PI_MONITOR] = MONITORED
        tau = np.int64(np.rint((t + pflt[f + PF_PERIOD]) * 1e9)) - pint[r + PI_START_NS]
        _sample_packed(tau, pflt, pint[r + PI_POSITIONS], pint[r + PI_VELOCITIES], n, pint, pint[r + PI_INTS],
                       pint[r + PI_POINTS], b_q, b_v)
        for j in range(n):
            i = pint[io + j]
            mode[i] = _POSITION
            commands[POSITION_ROW, i] = pflt[b_q + j]
            commands[VELOCITY_ROW, i] = pflt[b_v + j]
            commands[EFFORT_ROW, i] = 0.0
        pint[r + PI_UPDATES] += 1
        pflt[f + PF_LAST] = t
        wrote = True
    code = write_targets(mode, commands, flags, q, joint_q_index, rows, masks, status, changed or wrote, False,
                         pint[H_GRAVITY] != 0, pflt[F_TOLERANCE], pflt[F_DT], joint_q_index, joint_v_index, lower,
                         upper, passive_v, accepts_effort, q_target, v_target, effort, position_mode_out,
                         velocity_mode_out)
    if code <= COMMANDS_SET:                   # (an error code raises before the step, as the System's write)
        for i in range(v.shape[0]):
            v_prev[i] = v[i]
    return code
