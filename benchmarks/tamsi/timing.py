"""CPU-time instrumentation shared by the TAMSI benchmarks."""

from __future__ import annotations

import time


def instrument_engine_cpu(sim) -> list:
    """Wrap sim.engine.step to accumulate its CPU time (time.process_time, s) in the returned 1-list; on a
    shared machine CPU time is a steadier measure of the work than wall time."""
    total = [0.0]
    step = sim.engine.step_into                  # the simulator's call (ContactEngine.step_into)

    def timed(inputs, slot):
        t0 = time.process_time()
        result = step(inputs, slot)
        total[0] += time.process_time() - t0
        return result
    sim.engine.step_into = timed
    return total


def warm_up_compiled_kernel() -> None:
    """One TAMSI step on the harmonic box so that importing numba and loading (or compiling) the compiled kernel
    happens before a timed run rather than in its first step (about 1.7 s CPU in a fresh process)."""
    import numpy as np
    import harmonic_box as hb
    from contact_sim_ros.engines.base import Actuation, StepInputs
    from contact_sim_ros.engines.tamsi import TamsiEngine
    engine = TamsiEngine(hb.prismatic_box_model())
    engine.step(StepInputs(0.0, 0.01, np.zeros(1), np.zeros(1), np.array([[hb.MASS]]), np.zeros(1), np.zeros(1),
                           np.zeros(1), Actuation.zeros(1), hb.box_contact()))
