"""A control period's steps on the caller's thread with the control emulation compiled (issue 45 item 3): what
``SteppingLoop.step_now`` does per step - the controllers' updates, the hardware System's write, the physics step
- with one compiled call (control_kernels.period_step) and the physics step per step instead of ~25 Python calls,
whenever every update due is a pure compiled function of the state, the controller's own arrays and the time.

Which updates are (``Controller.compiled_update``): a joint trajectory controller without a trajectory (nothing to
do) and one running a position-mode trajectory (its sample one period ahead, the path tolerance when monitored);
not: a trajectory pending (it starts in Python), its end (goal checks), the closed loop, any other controller
type, a controller_state to publish. Nor is a step compiled when the System's write has something Python must do
first (commands from a transport, a new effort limit, a held joint to snap, a call that ran on the caller's thread).
Such a step runs ``step_now`` as before; the next compiled step packs the plan again. A trajectory that reaches its
end or violates its path tolerance in the middle of a run makes the kernel return NEEDS_PYTHON before writing
anything: that step goes through the controllers' Python updates.

The numbers are the Python path's: the same operations in the same order on the same arrays (the samplers'
last samples, segments and the monitored executions' feedback are written back after each run; the state
interfaces are read once at its end, nothing reads them in between). ``benchmarks/campaign/trial_hashes.py`` checks
full campaign trials bit for bit; test/test_control_period.py the rules on the compiled path.

For the in-process link (clients/inprocess_link.py: the lock-step campaign trial, the scenario runner in process):
no transport thread may hand anything over while a run is under way (the node's stepping thread keeps
``step_now``). Once the physics step is one compiled call too, a run becomes ``advance(model, data, n_steps)``.
"""

from __future__ import annotations

import numpy as np

from . import control_kernels as kernels
from .controller_manager import ControllerManagers
from .controllers.base import IDLE_UPDATE


class ControlPeriod:
    """Runs steps of ``loop`` (loop.SteppingLoop, not stepping in its own thread) with the compiled control
    emulation where it applies (module docstring). ``compiled_steps`` / ``python_steps``: how many steps went
    each way (diagnostics)."""

    def __init__(self, loop):
        self.loop = loop
        self.compiled_steps = 0
        self.python_steps = 0
        self._plan = None          # the packed plan (``_pack``), valid until a Python step
        self._end = -1             # the Simulator's step count after the last compiled run (the plan's validity)

    def run(self, steps: int, failures: list) -> None:
        """``steps`` steps (as ``loop.step_now`` each); a step whose report is not ok is noted in ``failures``
        with its time (``t = ... s: message``)."""
        loop = self.loop
        done = 0
        while done < steps:
            plan = self._compiled_plan()
            if plan is not None:
                done += self._run_compiled(plan, steps - done, failures)
                if done >= steps:
                    break
            self._plan = None           # a Python step changes what the plan packed
            report = loop.step_now()
            self.python_steps += 1
            done += 1
            if not report.ok:
                failures.append(f"t = {report.t:.4f} s: {report.message}")

    # ------------------------------------------------------------------------------------------ the plan

    def _compiled_plan(self):
        """The packed plan for compiled steps from now, or None when the next step needs Python."""
        loop = self.loop
        system = loop.system
        hw = system.command
        if loop.link.ran_directly or system.commands.pending or hw.limits_changed or hw.snapped:
            return None
        control = loop.control
        managers = () if control is None else (control.managers if isinstance(control, ControllerManagers)
                                               else (control,))
        time, step = system.state.time, system.sim.step_count
        entries = []
        for cm in managers:
            updates = cm.compiled_updates(step, time)
            if updates is None:
                return None
            entries += [(c, plan, cm.every, cm.period) for c, plan in updates]
        sim = system.sim
        buffers = sim.joint_command_buffers()
        key = (sim, buffers, *(x for c, plan, _, _ in entries for x in (c, plan)))
        cached = self._plan
        if (cached is not None and sim.step_count == self._end and len(cached[0]) == len(key)
                and all(a is b for a, b in zip(cached[0], key))):
            return cached                       # (nothing stepped nor changed since its last run)
        self._plan = plan = self._pack(key, entries, buffers)
        return plan

    def _pack(self, key, entries, buffers):
        """The plan (control_kernels' ``pint``, ``pflt``: header, a row per running trajectory of ``entries``,
        their arrays, the block) and the period_step arguments after them."""
        running = [(c, ex, every, period) for c, ex, every, period in entries if ex is not IDLE_UPDATE]
        idle = [(c, every) for c, ex, every, _ in entries if ex is IDLE_UPDATE]
        m = len(running)
        system = self.loop.system
        gravity, g_row, write = system.compiled_write()
        rows, masks, status, with_gravity, tolerance, dt = write
        int_head = kernels.N_HEADER + m * kernels.N_PLAN_INT
        float_head = kernels.N_FLOAT_HEADER + m * kernels.N_PLAN_FLOAT
        plan_int = np.zeros((m, kernels.N_PLAN_INT), dtype=np.int64)
        plan_float = np.zeros((m, kernels.N_PLAN_FLOAT))
        floats, ints, columns = [], [], []
        f_off, i_off, col = float_head, int_head, 0
        for r, (c, ex, every, period) in enumerate(running):
            s = ex.sampler
            k, n = s.positions.shape
            row = plan_int[r]
            row[kernels.PI_POSITIONS] = f_off
            floats.append(s.positions.ravel())
            f_off += k * n
            if s.velocities is None:
                row[kernels.PI_VELOCITIES] = row[kernels.PI_POSITIONS]
            else:
                row[kernels.PI_VELOCITIES] = f_off
                floats.append(s.velocities.ravel())
                f_off += k * n
            row[kernels.PI_POINTS], row[kernels.PI_JOINTS] = k, n
            row[kernels.PI_INTS] = i_off
            ints.append(s.ints)
            i_off += len(s.ints)
            row[kernels.PI_IDX] = i_off
            ints.append(ex.hw_idx)
            i_off += n
            row[kernels.PI_COLUMN] = col
            row[kernels.PI_START_NS] = s.start_ns
            row[kernels.PI_MONITOR] = (kernels.UNMONITORED if not ex.monitored else
                                       kernels.MONITORED if ex.feedback is not None else kernels.MONITORED_FIRST)
            row[kernels.PI_EVERY] = every
            plan_float[r, kernels.PF_END] = s.end_time
            plan_float[r, kernels.PF_PERIOD] = period
            columns.append((col, n))
            col += n
        header = np.zeros(kernels.N_HEADER, dtype=np.int64)
        header[kernels.H_TRAJECTORIES], header[kernels.H_COLUMNS] = m, col
        header[kernels.H_GRAVITY], header[kernels.H_BLOCK] = int(with_gravity), f_off
        float_header = np.zeros(kernels.N_FLOAT_HEADER)
        float_header[kernels.F_TOLERANCE], float_header[kernels.F_DT] = tolerance, dt
        block = np.zeros((kernels.N_BLOCK_ROWS, col))
        for (c, ex, _, _), (first, n) in zip(running, columns):
            block[kernels.OUT_Q:kernels.OUT_V + 1, first:first + n] = ex.sampler.out
            block[kernels.MONITOR_ROWS:, first:first + n] = ex.monitor
        pint = np.concatenate((header, plan_int.ravel(), *ints))
        pflt = np.concatenate((float_header, plan_float.ravel(), *floats, block.ravel()))
        hw = system.command
        args = (pint, pflt, system.state.values, hw.mode, hw.values, hw.flags, rows, masks, status, *buffers)
        # views of the plan for the write-back: the rows per trajectory, the block
        plan_int = pint[kernels.N_HEADER:int_head].reshape(m, kernels.N_PLAN_INT)
        plan_float = pflt[kernels.N_FLOAT_HEADER:float_head].reshape(m, kernels.N_PLAN_FLOAT)
        block = pflt[f_off:].reshape(kernels.N_BLOCK_ROWS, col)
        return key, args, running, columns, idle, gravity, g_row, plan_int, plan_float, block

    # ------------------------------------------------------------------------------------------ a run

    def _run_compiled(self, plan, steps: int, failures: list) -> int:
        """Up to ``steps`` compiled steps of ``plan``; returns how many ran (fewer when the next one needs
        Python). The controllers' and the state interfaces' Python side is brought up to date at the end."""
        args, gravity, g_row, plan_int = plan[1], plan[5], plan[6], plan[7]
        system = self.loop.system
        sim = system.sim
        hw = system.command
        v_prev = system.v_prev
        step_kernel = kernels.period_step
        plan_int[:, kernels.PI_UPDATES] = 0
        changed = hw.changed
        first = sim.step_count
        done = 0
        try:
            while done < steps:
                q = sim.q
                if gravity is not None:
                    gravity.compute(q, g_row)
                code = step_kernel(sim.step_count, sim.t, changed, q, sim.v, v_prev, *args)
                if code == kernels.NEEDS_PYTHON:
                    break
                changed = hw.changed = False
                if code > kernels.COMMANDS_SET:
                    system.refuse_hand_over()           # raises the hand-over's ConfigError
                report = sim.step()
                done += 1
                if not report.ok:
                    failures.append(f"t = {report.t:.4f} s: {report.message}")
        finally:
            self.compiled_steps += done
            self._end = first + done
            self._write_back(plan, first, first + done)
            system.read()
        return done

    @staticmethod
    def _write_back(plan, first: int, end: int) -> None:
        """The run's results to the controllers' Python side: each trajectory's last sample, segment and monitor
        rows (and the feedback of its last update when monitored), and every controller's update count (steps
        ``first`` to ``end`` ran)."""
        args, running, columns, idle, plan_int, plan_float, block = plan[1], plan[2], plan[3], plan[4], \
            plan[7], plan[8], plan[9]
        pint = args[0]
        for r, ((c, ex, _, _), (col, n)) in enumerate(zip(running, columns)):
            updates = int(plan_int[r, kernels.PI_UPDATES])
            if updates == 0:
                continue
            s = ex.sampler
            s.out[:] = block[kernels.OUT_Q:kernels.OUT_V + 1, col:col + n]
            s.ints[kernels.SEGMENT] = pint[plan_int[r, kernels.PI_INTS] + kernels.SEGMENT]
            if ex.monitored:
                ex.monitor[:] = block[kernels.MONITOR_ROWS:, col:col + n]
                ex.keep_feedback(float(plan_float[r, kernels.PF_LAST]), ex.monitor[:4].copy())
            c.count_updates(updates)
        for c, every in idle:
            due = (end - 1) // every - (first - 1) // every      # multiples of every in [first, end)
            if due:
                c.count_updates(due)
