"""Where the time of a clutter step goes (ICF paper XII-A scene, 40 objects, dt = 2 ms), compiled Newton kernel
(``newton_kernel="numba"``, the default) against the numpy reference on the SAME step inputs.

    python benchmarks/icf/engine_speed.py                    # lagged, 1 s of clutter from the drop
    python benchmarks/icf/engine_speed.py --model sap --duration 0.5
    python benchmarks/icf/engine_speed.py --start 1.0        # settle 1 s first (not timed), then time 1 s

The simulator runs with the numba engine; at every step the numpy reference engine is also called on the same
StepInputs (its result is discarded; it checks that both agree). Times are CPU time of this process
(time.process_time) per simulated step, plus the wall time of the whole run; "sim rest" is the contact query,
dynamics terms and integration (the simulator, not this engine).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

from contact_sim_ros.engines import icf_kernels  # noqa: E402
from contact_sim_ros.engines.registry import make_engine  # noqa: E402
from contact_sim_ros.sim.simulator import Simulator  # noqa: E402
from make_clutter_scene import clutter_scene  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="lagged", choices=["lagged", "similar", "sap"])
    parser.add_argument("--regularized", action="store_true", help="eq. 26 regularized stiction")
    parser.add_argument("--duration", type=float, default=1.0, help="timed simulated seconds")
    parser.add_argument("--start", type=float, default=0.0, help="untimed settling before (s)")
    parser.add_argument("--dt", type=float, default=2e-3)
    parser.add_argument("--no-reference", action="store_true", help="skip the numpy reference engine")
    args = parser.parse_args(argv)
    opts = {"regularized_stiction": True} if args.regularized else {}
    sim = Simulator(clutter_scene(), engine=args.model, time_step=args.dt,
                    engine_options=dict(opts, newton_kernel="numba"))
    ref = make_engine(args.model, sim.model, dict(opts, newton_kernel="numpy"))
    for _ in range(int(round(args.start / args.dt))):
        sim.step(strict=True)
    sim.step(strict=True)                             # warm-up (numba cache load)

    acc = dict(engine=0.0, kernel=0.0, ref=0.0, it=0, it_ref=0, ls=0, contacts=0, dv=0.0)
    fast_step = sim.engine.step_into                 # the simulator's call (ContactEngine.step_into)
    kernel = icf_kernels.icf_step

    def timed_kernel(*a):
        c = time.process_time()
        out = kernel(*a)
        acc["kernel"] += time.process_time() - c
        return out

    def timed_step(inputs, slot):
        c = time.process_time()
        res = fast_step(inputs, slot)
        acc["engine"] += time.process_time() - c
        acc["it"] += res.stats.iterations
        acc["ls"] += getattr(sim.engine, "last_line_search_evaluations", 0)
        acc["contacts"] += inputs.contacts.size
        if not args.no_reference:
            c = time.process_time()
            r = ref.step(inputs)
            acc["ref"] += time.process_time() - c
            acc["it_ref"] += r.stats.iterations
            acc["dv"] = max(acc["dv"], float(np.abs(r.v_next - res.v_next).max()))
        return res

    icf_kernels.icf_step = timed_kernel
    sim.engine.step_into = timed_step
    n = int(round(args.duration / args.dt))
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        sim.step(strict=True)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    icf_kernels.icf_step = kernel
    cpu_sim = cpu - acc["ref"]                        # the reference's time is not part of the simulation
    rest = cpu_sim - acc["engine"]
    ms = lambda x: f"{1e3 * x / n:.3f}"
    label = args.model + (" (eq. 26)" if args.regularized else "")
    print(f"\nClutter, {label}, dt = {args.dt:g} s, {n} steps from t = {args.start:g} s; mean contacts "
          f"{acc['contacts'] / n:.0f}; load average {open('/proc/loadavg').read().split()[0]} (2 cores)")
    print(f"  Newton iterations per step: numba {acc['it'] / n:.2f}"
          + ("" if args.no_reference else f", numpy {acc['it_ref'] / n:.2f}; max |dv| numba vs numpy "
             f"{acc['dv']:.1e} m/s") + f"; line-search evaluations per iteration {acc['ls'] / max(acc['it'], 1):.1f}")
    rows = [("sim step total (numba engine)", ms(cpu_sim)),
            ("  engine, numba path", ms(acc["engine"])),
            ("    compiled step (icf_kernels.icf_step: setup + Newton loop)", ms(acc["kernel"])),
            ("    Python around it (engine.step, results)", ms(acc["engine"] - acc["kernel"])),
            ("  sim rest (query, dynamics, integration)", ms(rest))]
    if not args.no_reference:
        rows.append(("engine, numpy reference (same inputs)", ms(acc["ref"])))
    print(f"  {'CPU ms per step':64s} ")
    for name, val in rows:
        print(f"  {name:64s} {val:>8s}")
    print(f"  engine CPU per Newton iteration: numba {1e6 * acc['engine'] / max(acc['it'], 1):.0f} us"
          + ("" if args.no_reference else f", numpy {1e6 * acc['ref'] / max(acc['it_ref'], 1):.0f} us"))
    print(f"  real-time factor (sim time / CPU of the simulation): {args.duration / cpu_sim:.3f}; "
          f"with the numpy engine instead: {args.duration / (rest + acc['ref']):.3f}" if not args.no_reference
          else f"  real-time factor (CPU): {args.duration / cpu_sim:.3f}")
    if args.no_reference:
        print(f"  real-time factor (wall, loaded machine): {args.duration / wall:.3f}")


if __name__ == "__main__":
    main()
