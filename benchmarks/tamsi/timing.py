"""CPU-time instrumentation shared by the TAMSI benchmarks."""

from __future__ import annotations

import time


def instrument_engine_cpu(sim) -> list:
    """Wrap sim.engine.step to accumulate its CPU time (time.process_time, s) in the returned 1-list; on a
    shared machine CPU time is a steadier measure of the work than wall time."""
    total = [0.0]
    step = sim.engine.step

    def timed(inputs):
        t0 = time.process_time()
        result = step(inputs)
        total[0] += time.process_time() - t0
        return result
    sim.engine.step = timed
    return total
