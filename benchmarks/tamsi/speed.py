"""TAMSI speed targets (issue 4): `python benchmarks/tamsi/run.py timing` (about 1 minute on a quiet machine).

1. Whole simulation (a ``sim.step()`` loop, everything included) of the section VI-A gripper (h = 3 ms, 5 s) and a
   shortened section VI-B Allegro run (h = 0.7 ms, 3 s of the 15 s), repeated: median wall time, median CPU time
   (``time.process_time``), the engine's CPU time alone, Newton iterations per step and the real-time factors,
   against the targets (gripper >= 20x real time = <= 150 us per step, Allegro >= 1x = <= 700 us per step);
   then where the CPU time of a step goes (timers around the simulator's parts).
2. Engine alone, both kernels: the StepInputs of the first steps of each scene are recorded once and replayed
   through ``TamsiEngine`` with ``kernel="numba"`` (compiled) and ``kernel="numpy"`` (reference): CPU time per
   ``engine.step`` and the largest difference of the results.
3. First-call cost of the compiled kernel in a fresh process: ``import numba``, and the first step with an empty
   cache (JIT compile) and with the cache of ``__pycache__`` (what every later process pays).

Prints tables and saves ``tamsi_timing.png``. On a shared machine wall time is inflated by the other jobs; CPU time
is the steadier measure of the work (the load average is printed with the results).
"""

from __future__ import annotations

import copy
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

SCENES = {  # name: (scene file, time step s, simulated time s for the timing runs, per-step target us, repeats)
    "gripper": ("tamsi_gripper_mug.yaml", 3e-3, 5.0, 150.0, 5),
    "allegro": ("tamsi_allegro_mug.yaml", 7e-4, 3.0, 700.0, 3),
}


def _simulator(name, kernel="numba"):
    from contact_sim_ros.sim.simulator import Simulator
    scene, dt = SCENES[name][:2]
    return Simulator(str(ROOT / "scenes" / scene), engine="tamsi", time_step=dt, engine_options={"kernel": kernel})


def time_simulation(name, duration, kernel="numba", engine_timer=False):
    """One run of ``duration`` s: wall and CPU time of the whole loop (s); with ``engine_timer`` also the CPU time
    inside engine.step (that run's totals then include the timer's own ~1-2 us per step)."""
    from timing import instrument_engine_cpu
    sim = _simulator(name, kernel)
    sim.step(strict=True)                      # first step outside the timing (kernel cache load / compile)
    engine_cpu = instrument_engine_cpu(sim) if engine_timer else [float("nan")]
    steps = int(round(duration / sim.time_step))
    iterations = np.zeros(steps, int)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for i in range(steps):
        iterations[i] = sim.step(strict=True).iterations
    return dict(wall=time.perf_counter() - wall0, cpu=time.process_time() - cpu0, engine_cpu=engine_cpu[0],
                steps=steps, iterations=iterations)


def stage_breakdown(name, duration):
    """CPU time per step (us) of the parts of ``Simulator.step`` that are methods of the simulator's objects, each
    wrapped with a ``process_time`` timer (about 1 us per timer is inside each figure); "rest" is the simulator's own
    code (Pinocchio crba / nonLinearEffects / gravity, actuation arrays, finite checks, joint limits, StepInputs,
    StepReport)."""
    sim = _simulator(name)
    sim.step(strict=True)
    totals = {}

    def timed(label, obj, attr):
        inner = getattr(obj, attr)

        def wrapper(*args, **kwargs):
            start = time.process_time()
            out = inner(*args, **kwargs)
            totals[label] = totals.get(label, 0.0) + time.process_time() - start
            return out
        setattr(obj, attr, wrapper)
    timed("contact query (ContactQuery.update)", sim.contact_query, "update")
    timed("engine.step_into (ContactEngine.step_into)", sim.engine, "step_into")
    timed("  of which TamsiEngine._do_step_into", sim.engine, "_do_step_into")
    timed("scripted inputs (_apply_scripts)", sim, "_apply_scripts")
    timed("kinematics (_update_kinematics)", sim, "_update_kinematics")
    timed("free-body frame force + integration", sim._free_motion, "frame_rotation_force")
    timed("free-body frame force + integration", sim._free_motion, "integrate")
    timed("joint limits (_enforce_joint_limits)", sim, "_enforce_joint_limits")
    steps = int(round(duration / sim.time_step))
    cpu0 = time.process_time()
    for _ in range(steps):
        sim.step(strict=True)
    total = time.process_time() - cpu0
    inner = sum(v for k, v in totals.items() if not k.startswith("  "))
    rows = [(k, f"{1e6 * v / steps:.1f}") for k, v in sorted(totals.items(), key=lambda kv: -kv[1])]
    rows.append(("rest: simulator's own code (see docstring)", f"{1e6 * (total - inner) / steps:.1f}"))
    rows.append(("total (with the timers)", f"{1e6 * total / steps:.1f}"))
    return rows


def record_inputs(name, steps):
    """Deep copies of the StepInputs of the first ``steps`` steps of scene ``name`` (and its model)."""
    sim = _simulator(name, "numba")
    recorded = []
    step = sim.engine.step_into                  # the simulator's call (ContactEngine.step_into)

    def recording(inputs, slot):
        recorded.append(copy.deepcopy(inputs))
        return step(inputs, slot)
    sim.engine.step_into = recording
    for _ in range(steps):
        sim.step(strict=True)
    return sim.model, recorded


def replay(model, inputs, kernel, repeats=3):
    """Best-of-``repeats`` CPU time per engine.step (s) over the recorded inputs, and the results of the last pass."""
    from contact_sim_ros.engines.tamsi import TamsiEngine
    engine = TamsiEngine(model, {"kernel": kernel})
    engine.step(inputs[0])
    best = float("inf")
    for _ in range(repeats):
        results = []
        cpu0 = time.process_time()
        for x in inputs:
            results.append(engine.step(x))
        best = min(best, (time.process_time() - cpu0) / len(inputs))
    return best, results


FIRST_CALL = """
import sys, time
sys.path.insert(0, {root!r}); sys.path.insert(0, {here!r})
t0, c0 = time.perf_counter(), time.process_time()
import numba
t1, c1 = time.perf_counter(), time.process_time()
import numpy as np
import harmonic_box as hb
from contact_sim_ros.engines.base import Actuation, StepInputs
from contact_sim_ros.engines.tamsi import TamsiEngine
engine = TamsiEngine(hb.prismatic_box_model())
inputs = StepInputs(0.0, 0.01, np.zeros(1), np.array([0.1]), np.array([[hb.MASS]]), np.array([1.0]), np.zeros(1),
                    np.zeros(1), Actuation.zeros(1), hb.box_contact())
t2, c2 = time.perf_counter(), time.process_time()
engine.step(inputs)
t3, c3 = time.perf_counter(), time.process_time()
print(t1 - t0, c1 - c0, t3 - t2, c3 - c2)
"""


def first_call_cost(empty_cache: bool):
    """(import numba wall, cpu, first step wall, cpu) in s, in a fresh Python process."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="tamsi_numba_cache_") as cache:
        if empty_cache:
            env["NUMBA_CACHE_DIR"] = cache     # an empty cache: the first step compiles the kernels
        out = subprocess.run([sys.executable, "-c", FIRST_CALL.format(root=str(ROOT), here=str(HERE))], env=env,
                             capture_output=True, text=True, check=True).stdout
    return [float(x) for x in out.split()]


def bench(quick, save, table) -> None:
    import matplotlib.pyplot as plt
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} cores); times are CPU (process_time) and wall (perf_counter)")
    rows, per_step = [], {}
    for name, (_, dt, duration, target_us, repeats) in SCENES.items():
        if quick:
            duration, repeats = duration / 5, 1
        runs = [time_simulation(name, duration) for _ in range(repeats)]
        wall = statistics.median(r["wall"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        engine_cpu = time_simulation(name, duration, engine_timer=True)["engine_cpu"]     # one more, timed run
        steps = runs[0]["steps"]
        its = np.concatenate([r["iterations"] for r in runs])
        per_step[name] = (1e6 * cpu / steps, 1e6 * engine_cpu / steps)
        rows.append((name, f"{dt * 1e3:g}", f"{duration:g}", repeats, f"{wall:.3f}", f"{duration / wall:.2f}x",
                     f"{cpu:.3f}", f"{duration / cpu:.2f}x", f"{1e6 * wall / steps:.0f}", f"{1e6 * cpu / steps:.0f}",
                     f"{1e6 * engine_cpu / steps:.0f}", f"{its.mean():.2f} / {its.max()}",
                     f"{target_us:.0f} us: {'met' if 1e6 * cpu / steps <= target_us else 'NOT met'} (CPU)"))
    print("\nWhole simulation (sim.step loop, kernel numba), median of the repeats; engine CPU from one more run "
          "with a timer around engine.step:")
    table(["scene", "h (ms)", "sim s", "runs", "wall s", "RTF wall", "CPU s", "RTF CPU", "wall us/step",
           "CPU us/step", "engine CPU us/step", "Newton it/step mean/max", "target per step"], rows)

    for name, (_, _, duration, _, _) in SCENES.items():
        print(f"\nWhere the CPU time of a {name} step goes (us per step, {duration / (5 if quick else 1):g} s run):")
        table(["part of Simulator.step", "CPU us/step"], stage_breakdown(name, duration / (5 if quick else 1)))

    rows, replay_us = [], {}
    for name in SCENES:
        steps = 100 if quick else (333 if name == "gripper" else 700)
        model, inputs = record_inputs(name, steps)
        fast, fast_results = replay(model, inputs, "numba")
        ref, ref_results = replay(model, inputs, "numpy", repeats=1 if quick else 3)
        dv = max(float(np.abs(a.v_next - b.v_next).max()) for a, b in zip(fast_results, ref_results))
        same_its = all(a.stats.iterations == b.stats.iterations for a, b in zip(fast_results, ref_results))
        contacts = np.mean([x.contacts.size for x in inputs])
        replay_us[name] = (1e6 * fast, 1e6 * ref)
        rows.append((name, len(inputs), f"{contacts:.1f}", model.nv, f"{1e6 * ref:.1f}", f"{1e6 * fast:.1f}",
                     f"{ref / fast:.1f}x", f"{dv:.1e}", same_its))
    print("\nEngine alone (engine.step on recorded StepInputs of the first steps), best of the repeats:")
    table(["scene", "steps", "contacts mean", "nv", "numpy us/step (CPU)", "numba us/step (CPU)", "speed-up",
           "max |v_next numba - numpy|", "same Newton iterations"], rows)

    rows = []
    for label, empty in (("empty cache (JIT compile)", True), ("cached (__pycache__)", False)):
        imp_wall, imp_cpu, first_wall, first_cpu = first_call_cost(empty)
        rows.append((label, f"{imp_wall:.2f} / {imp_cpu:.2f}", f"{first_wall:.2f} / {first_cpu:.2f}"))
    print("\nFirst-call cost of the compiled kernel in a fresh process (s, wall / CPU):")
    table(["numba cache", "import numba", "first TAMSI step"], rows)

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, name in zip(axes, SCENES):
        whole, engine = per_step[name]
        labels = ["engine, numpy\n(replay)", "engine, numba\n(replay)", "engine, numba\n(in the loop)",
                  "whole step\n(numba)"]
        values = [replay_us[name][1], replay_us[name][0], engine, whole]
        ax.bar(labels, values, color=["0.6", "C0", "C0", "C1"])
        ax.axhline(SCENES[name][3], color="k", ls="--", lw=0.8, label=f"target {SCENES[name][3]:.0f} us/step")
        ax.set_ylabel("CPU time per step (us)")
        ax.set_title(f"{name} (h = {SCENES[name][1] * 1e3:g} ms)")
        ax.legend(fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
    fig.suptitle(f"TAMSI per-step CPU time (load average {os.getloadavg()[0]:.1f} at the end)")
    save(fig, "timing")
