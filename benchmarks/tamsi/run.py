"""TAMSI benchmarks (Castro et al. 2020). One command per experiment, each prints a table and saves PNGs:

    python benchmarks/tamsi/run.py box        # section IV-A: TALS ablation (Fig. 4) + work-precision (Fig. 5)
    python benchmarks/tamsi/run.py coupling   # sections V-A/V-C: one-way vs two-way normal-force coupling
    python benchmarks/tamsi/run.py gripper    # section VI-A: mug shaken in a parallel-jaw gripper (Figs. 7, 8)
    python benchmarks/tamsi/run.py allegro    # section VI-B: Allegro hand reorienting a mug open loop
    python benchmarks/tamsi/run.py timing     # speed targets: 5 s gripper + 3 s Allegro, engine kernels (~1 min)
    python benchmarks/tamsi/run.py all

Run from the repository root. Figures go to benchmarks/tamsi/out/ (``--docs`` also copies them to
docs/figures/tamsi_*.png). ``--quick`` shortens the runs (smoke test).
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import harmonic_box as hb  # noqa: E402
from timing import instrument_engine_cpu, warm_up_compiled_kernel  # noqa: E402
from contact_sim_ros.engines.tamsi import TamsiEngine  # noqa: E402

OUT = HERE / "out"
DOCS_FIGURES = ROOT / "docs" / "figures"
SAVED: list[Path] = []


def save(fig, name: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"tamsi_{name}.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    SAVED.append(path)
    print(f"saved {path.relative_to(ROOT)}")


def table(header, rows) -> None:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(str(h).rjust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))


# ================================================================================================ box (IV-A)
def bench_box(quick: bool) -> None:
    print("\n== Section IV-A: box under a harmonic force (m = 0.33 kg, mu = 1, f = 4 N sin(2 pi t), v_s = 1e-4 m/s)")
    model = hb.prismatic_box_model()
    # --- Fig. 4: Newton history at the first slide -> stick transition, h = 10 ms
    h = 0.01
    no_tals = TamsiEngine(model, {"use_tals": False, "max_iterations": 30})
    t, v, its, statuses, failure = hb.simulate_engine(no_tals, h, 2.0)
    print(f"h = 10 ms without TALS: first non-converged step starts at t = {failure:.3f} s "
          f"(steps before it converged: {sum(s.ok for s in statuses[:-1])}/{len(statuses) - 1})")
    history_plain = [e for e, _ in no_tals.iteration_history]
    tals = TamsiEngine(model, {"use_tals": True})
    t2, v2, its2, statuses2, failure2 = hb.simulate_engine(tals, h, 2.0)
    print(f"h = 10 ms with TALS: {sum(s.ok for s in statuses2)}/{len(statuses2)} steps converged over 2 s, "
          f"Newton iterations per step mean {its2.mean():.2f}, max {its2.max()}")
    # TALS history of the same step
    from contact_sim_ros.engines.base import Actuation, StepInputs
    k = int(round(failure / h))
    inputs = StepInputs(t=failure, dt=h, q=np.zeros(1), v=np.array([v[k]]), mass_matrix=np.array([[hb.MASS]]),
                        generalized_force=np.array([hb.harmonic_force(failure)]), gravity_force=np.zeros(1),
                        joint_damping=np.zeros(1), actuation=Actuation.zeros(1), contacts=hb.box_contact())
    tals.step(inputs)
    history_tals = list(tals.iteration_history)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.semilogy(range(1, len(history_plain) + 1), history_plain, "o-", label="Newton, no TALS (no convergence)")
    ax.semilogy(range(1, len(history_tals) + 1), [e for e, _ in history_tals], "s-", label="Newton + TALS (last: simplified-Newton estimate)")
    ax.axhline(tals.options.relative_tolerance * hb.V_STICTION, color="k", ls=":", label="tolerance")
    ax.set_xlabel("Newton iteration")
    ax.set_ylabel("|dv| (m/s)")
    ax.set_title(f"Step t = {failure:.2f} s -> {failure + h:.2f} s (first slide-to-stick), h = 10 ms")
    ax.legend(fontsize=8)
    save(fig, "box_newton_history")
    table(["iteration", "|dv| no TALS", "|dv| TALS", "alpha TALS"],
          [(i + 1, f"{history_plain[i]:.3e}" if i < len(history_plain) else "",
            f"{history_tals[i][0]:.3e}" if i < len(history_tals) else "",
            f"{history_tals[i][1]:.3g}" if i < len(history_tals) else "")
           for i in range(min(12, max(len(history_plain), len(history_tals))))])

    # --- Fig. 5: work-precision against a fine explicit reference
    duration = 1.0 if quick else 2.0
    sample = 0.04
    start = time.perf_counter()
    reference = hb.reference_solution(duration, sample, h=2e-6)
    print(f"reference: Heun (RK2), h = 2e-6 s, {duration} s, {time.perf_counter() - start:.1f} s wall")
    steps = [0.04, 0.02, 0.01, 0.005, 0.0025, 0.00125, 0.000625] + ([] if quick else [0.0003125])
    rows, curves = [], {}
    for use_tals in (True, False):
        errs, work = [], []
        for hh in steps:
            engine = TamsiEngine(model, {"use_tals": use_tals, "max_iterations": 100})
            _, vv, it, st, fail = hb.simulate_engine(engine, hh, duration, stop_on_failure=False,
                                                     max_substep_levels=8)
            err = float(np.sqrt(np.mean((vv[::int(round(sample / hh))] - reference) ** 2)))
            errs.append(err)
            work.append(int(it.sum()))
            rows.append(("TALS" if use_tals else "no TALS", f"{hh * 1e3:g}", f"{err:.3e}", int(it.sum()),
                         f"{it.mean():.2f}", "-" if fail is None else f"{fail:.3f}"))
        curves[use_tals] = (np.array(errs), np.array(work))
    table(["method", "h (ms)", "velocity error (m/s)", "Newton iterations", "per step",
           "first failed step (s)"], rows)
    errs = curves[True][0]
    slope = np.polyfit(np.log(steps), np.log(errs), 1)[0]
    print(f"TALS: fitted order of the velocity error in h: {slope:.3f} (first order: 1)")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for use_tals, (e, w) in curves.items():
        label = "TAMSI + TALS" if use_tals else "TAMSI, no TALS (sub-steps on failure)"
        axes[0].loglog(np.array(steps) * 1e3, e, "o-", label=label)
        axes[1].loglog(w, e, "o-", label=label)
    hs = np.array(steps) * 1e3
    axes[0].loglog(hs, errs[0] * hs / hs[0], "k:", label="slope 1")
    axes[0].set_xlabel("time step h (ms)")
    axes[0].set_ylabel("L2 velocity error (m/s)")
    axes[1].set_xlabel("work: total Newton iterations")
    axes[1].set_ylabel("L2 velocity error (m/s)")
    for ax in axes:
        ax.axhline(hb.V_STICTION, color="gray", ls="--", lw=0.8)
        ax.legend(fontsize=8)
    fig.suptitle(f"Box under harmonic force, {duration:g} s; reference: RK2 with h = 2 us (fitted order {slope:.2f})")
    save(fig, "box_work_precision")
    fig, ax = plt.subplots(figsize=(6, 3.5))
    tt = np.arange(len(reference)) * sample
    ax.plot(tt, reference, "k-", label="reference")
    ax.plot(t2[t2 <= duration + 1e-9], v2[t2 <= duration + 1e-9], ".", label="TAMSI + TALS, h = 10 ms")
    ax.set_xlabel("t (s)")
    ax.set_ylabel("v (m/s)")
    ax.legend(fontsize=8)
    save(fig, "box_velocity")


# ============================================================================================= gripper (VI-A)
GRIPPER_SCENE = ROOT / "scenes" / "tamsi_gripper_mug.yaml"
AMPLITUDE, PERIOD = 0.15, 0.5


def _gripper_sim(dt, engine_options=None):
    from contact_sim_ros.sim.simulator import Simulator
    return Simulator(str(GRIPPER_SCENE), engine="tamsi", time_step=dt, engine_options=engine_options)


def run_gripper(dt, duration, record_every=None, engine_options=None, strict=True, mug_offset=0.0):
    """Run the gripper scene; returns a dict of traces and timings. ``mug_offset`` (m) moves the mug sideways (x,
    towards a finger) at t = 0: the scene is mirror-symmetric, and the compiled kernel keeps a symmetric state
    exactly symmetric, so an unstable antisymmetric mode (one-way coupling) needs a seed to show."""
    warm_up_compiled_kernel()
    sim = _gripper_sim(dt, engine_options)
    if mug_offset:
        q = sim.q.copy()
        q[sim.model.pin_model.joints[sim.model.free_body("mug").joint_id].idx_q] += mug_offset
        sim.set_state(q, sim.v.copy())
    engine_cpu = instrument_engine_cpu(sim)
    solve_time = 0.0
    iterations = []
    substeps = 0
    steps = int(round(duration / dt))
    every = record_every or 1
    rec_t, rec_mug, rec_base, rec_v, wall_trace = [], [], [], [], []
    slip = []
    start = time.perf_counter()
    cpu_start = time.process_time()
    for i in range(steps):
        report = sim.step(strict=strict)
        iterations.append(report.iterations)
        substeps += report.substeps > 1
        solve_time += sim.last_result.stats.solve_time_s if sim.last_result is not None else 0.0
        if (i + 1) % every == 0:
            rec_t.append(sim.t)
            wall_trace.append(time.perf_counter() - start)
            mug_v = sim.body_velocity("mug")
            base_v = sim.body_velocity("gripper_base")
            rec_mug.append(sim.body_pose("mug").translation.copy())
            rec_base.append(sim.body_pose("gripper_base").translation.copy())
            rec_v.append(np.concatenate([mug_v, sim.v[sim.model.joint_v_index]]))
            slip.append(mug_v[2] - base_v[2])
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    return dict(t=np.array(rec_t), mug=np.array(rec_mug), base=np.array(rec_base), v=np.array(rec_v),
                slip=np.array(slip), wall=wall, cpu=cpu, engine_cpu=engine_cpu[0],
                wall_trace=np.array(wall_trace), solve_time=solve_time,
                iterations=np.array(iterations), substeps=substeps, steps=steps)


def bench_gripper(quick: bool) -> None:
    print("\n== Section VI-A: parallel-jaw gripper shaking a mug (mu = 0.1, 10 N grip, A = 15 cm, T = 0.5 s, "
          "no gravity), TAMSI h = 3 ms")
    duration = 1.0 if quick else 5.0
    repeats = 1 if quick else 3
    runs = [run_gripper(3e-3, duration) for _ in range(repeats)]
    walls = [r["wall"] for r in runs]
    r = runs[int(np.argsort(walls)[len(walls) // 2])]
    median_cpu = statistics.median(rr["cpu"] for rr in runs)
    median_engine_cpu = statistics.median(rr["engine_cpu"] for rr in runs)
    rel = r["mug"][:, 2] - r["base"][:, 2]
    vs = 1e-4
    slipping = np.abs(r["slip"]) > vs
    transitions = int(np.count_nonzero(slipping[1:] != slipping[:-1]))
    median_wall = statistics.median(walls)
    table(["quantity", "value"], [
        ("simulated time (s)", f"{duration:g}"),
        ("runs", repeats),
        ("median wall time (s)", f"{median_wall:.3f}"),
        ("real-time factor (sim/wall)", f"{duration / median_wall:.2f}x"),
        ("median CPU time (s)", f"{median_cpu:.3f}"),
        ("real-time factor by CPU time", f"{duration / median_cpu:.2f}x"),
        ("engine CPU time, median (s)", f"{median_engine_cpu:.3f}"),
        ("engine-only real-time factor (CPU)", f"{duration / median_engine_cpu:.1f}x"),
        ("engine CPU per step (us)", f"{1e6 * median_engine_cpu / r['steps']:.0f}"),
        ("engine wall (solve_time_s), median run (s)", f"{r['solve_time']:.3f}"),
        ("Newton iterations/step mean", f"{r['iterations'].mean():.2f}"),
        ("Newton iterations/step max", int(r["iterations"].max())),
        ("steps retried in sub-steps", r["substeps"]),
        ("mug - gripper height range (mm)", f"{1e3 * rel.min():.2f} .. {1e3 * rel.max():.2f}"),
        ("stick <-> slip transitions", transitions),
        ("fraction of steps slipping", f"{slipping.mean():.2f}"),
        ("paper (C++, i7-6900K)", "0.123 s wall, 40x real time"),
    ])
    fig, axes = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True)
    axes[0].plot(r["t"], r["base"][:, 2] * 100, label="gripper")
    axes[0].plot(r["t"], r["mug"][:, 2] * 100, "--", label="mug")
    axes[0].set_ylabel("height (cm)")
    axes[0].legend(fontsize=8)
    axes[1].plot(r["t"], rel * 1e3, label="mug - gripper (mm)")
    ax2 = axes[1].twinx()
    ax2.semilogy(r["t"], np.abs(r["slip"]) + 1e-12, "r", lw=0.5, alpha=0.6)
    ax2.axhline(vs, color="r", ls=":", lw=0.8)
    ax2.set_ylabel("|slip velocity| (m/s), v_s dotted", color="r")
    axes[1].set_ylabel("relative height (mm)")
    axes[1].set_xlabel("t (s)")
    fig.suptitle("Gripper shaking a mug (section VI-A), TAMSI h = 3 ms")
    save(fig, "gripper_trajectory")
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for rr in runs:
        ax.plot(rr["wall_trace"], rr["t"], lw=1)
    ax.plot([0, duration / 40], [0, duration], "k:", label="40x real time (paper)")
    ax.plot([0, duration / 20], [0, duration], "k--", label="20x real time (target)")
    ax.plot([0, duration], [0, duration], "k-", lw=0.6, label="1x real time")
    ax.set_xlabel("wall-clock time (s)")
    ax.set_ylabel("simulated time (s)")
    ax.legend(fontsize=8)
    ax.set_title("Simulated vs wall-clock time (cf. Fig. 7)")
    save(fig, "gripper_wall_time")

    # ablation (cf. Fig. 7): TALS off, and one-way coupling (semi-implicit Euler), 1 s each, the mug 1 um off centre
    rows = []
    horizon = 0.5 if quick else 1.0
    for label, opts in (("TAMSI (two-way, TALS)", None), ("no TALS", {"use_tals": False}),
                        ("one-way coupling (V-A)", {"coupling": "one_way"})):
        run = run_gripper(3e-3, horizon, engine_options=opts, strict=False, mug_offset=1e-6)
        rel_h = run["mug"][:, 2] - run["base"][:, 2]
        rows.append((label, f"{run['cpu']:.2f}", f"{run['iterations'].mean():.1f}", run["substeps"],
                     f"{1e3 * np.abs(rel_h).max():.1f}", bool(np.abs(rel_h).max() < 0.05)))
    print(f"ablation, {horizon:g} s, mug started 1 um off centre (seeds the antisymmetric modes):")
    table(["engine options", f"CPU s for {horizon:g} s", "Newton it/step", "steps sub-stepped",
           "max |mug - gripper| (mm)", "mug held"], rows)

    # convergence study (Fig. 8): L2 error of the velocities against a small-step TAMSI reference
    horizon = 0.5 if quick else 1.0
    h_ref = 0.75e-3 / 8
    steps = [6e-3, 3e-3, 1.5e-3, 0.75e-3]
    sample = 6e-3
    start = time.perf_counter()
    ref = run_gripper(h_ref, horizon, record_every=int(round(sample / h_ref)))
    print(f"reference: TAMSI h = {h_ref * 1e3:.4f} ms over {horizon} s, {time.perf_counter() - start:.1f} s wall")
    scale = AMPLITUDE / PERIOD
    rows, err_t, err_all = [], [], []
    for hh in steps:
        run = run_gripper(hh, horizon, record_every=int(round(sample / hh)))
        n = min(len(run["v"]), len(ref["v"]))
        dvel = run["v"][:n] - ref["v"][:n]
        e_trans = float(np.sqrt(np.mean(np.sum(dvel[:, :3] ** 2, axis=1)))) / scale
        e_gen = float(np.sqrt(np.mean(np.sum(dvel ** 2, axis=1)))) / scale
        err_t.append(e_trans)
        err_all.append(e_gen)
        rows.append((f"{hh * 1e3:g}", f"{e_trans:.3e}", f"{e_gen:.3e}", f"{run['iterations'].mean():.2f}"))
    table(["h (ms)", "mug translational velocity error / (A/T)", "all velocities error / (A/T)",
           "Newton it/step"], rows)
    slope_t = np.polyfit(np.log(steps), np.log(err_t), 1)[0]
    slope_a = np.polyfit(np.log(steps), np.log(err_all), 1)[0]
    print(f"fitted order: mug translation {slope_t:.2f}, all velocities {slope_a:.2f} (first order: 1)")
    fig, ax = plt.subplots(figsize=(5, 3.8))
    hs = np.array(steps) / PERIOD
    ax.loglog(hs, err_t, "o-", label=f"mug translation (order {slope_t:.2f})")
    ax.loglog(hs, err_all, "s-", label=f"all generalized velocities (order {slope_a:.2f})")
    ax.loglog(hs, err_t[0] * hs / hs[0], "k:", label="slope 1")
    ax.set_xlabel("h / T")
    ax.set_ylabel("L2 velocity error / (A / T)")
    ax.legend(fontsize=8)
    ax.set_title(f"Gripper convergence vs TAMSI h = {h_ref * 1e3:.3g} ms (cf. Fig. 8)")
    save(fig, "gripper_convergence")


# ============================================================================================ coupling (V-A/C)
def drop(coupling: str, h: float, duration: float = 3.0, m: float = 1.0, k: float = 1e5, z0: float = 0.02):
    """A point mass m (kg) dropped from z0 (m) onto a contact of stiffness k (N/m), no dissipation, mu = 0.5:
    heights (m) every step with TAMSI's one-way (semi-implicit Euler) or two-way (eq. 19) coupling."""
    from contact_sim_ros.engines.base import Actuation, StepInputs
    from contact_sim_ros.geometry.contact_set import ContactSet
    engine = TamsiEngine(hb.prismatic_box_model(m), {"coupling": coupling})
    z, v = z0, 0.0
    heights, failed = [], 0
    for _ in range(int(round(duration / h))):
        contact = ContactSet(np.array([0]), np.array([1]), np.array([0]), np.array([1]), np.zeros((1, 3)),
                             np.array([[0.0, 0.0, 1.0]]), np.array([z]), np.eye(3)[None].copy(),
                             np.array([[0.0], [0.0], [1.0]]), np.zeros(3), np.array([k]), np.zeros(1),
                             np.array([0.5]), np.zeros(1))
        res = engine.step(StepInputs(0.0, h, np.zeros(1), np.array([v]), np.array([[m]]),
                                     np.array([-m * 9.81]), np.zeros(1), np.zeros(1), Actuation.zeros(1), contact))
        failed += not res.stats.status.ok
        v = res.v_next[0]
        z += h * v
        heights.append(z)
    return np.array(heights), failed


def bench_coupling(quick: bool) -> None:
    print("\n== Sections V-A / V-C: one-way (semi-implicit Euler) vs two-way (TAMSI, eq. 19) coupling of the "
          "normal force; 1 kg mass dropped 2 cm onto k = 1e5 N/m (omega = 316 rad/s), no dissipation, 3 s")
    rows = []
    traces = {}
    m, k, z0 = 1.0, 1e5, 0.02
    for h in (1e-3, 3e-3, 6e-3, 1e-2):
        for coupling in ("one_way", "two_way"):
            z, failed = drop(coupling, h)
            traces[(coupling, h)] = z
            late = z[len(z) // 2:]
            rows.append((f"{h * 1e3:g}", f"{h * math.sqrt(k / m):.2f}", coupling,
                         f"{z.max() / z0:.3g}", f"{late.max() / z0:.3g}", f"{late.min() * 1e3:.3f}", failed))
    table(["h (ms)", "h omega", "coupling", "max height / drop height", "same, last 1.5 s",
           "lowest z, last 1.5 s (mm)", "failed steps"], rows)
    print(f"static penetration m g / k = {1e3 * m * 9.81 / k:.4f} mm; semi-implicit Euler is stable only for "
          "h omega < 2")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
    for ax, coupling in zip(axes, ("one_way", "two_way")):
        for h in (1e-3, 1e-2):
            z = traces[(coupling, h)]
            ax.plot(np.arange(1, len(z) + 1) * h, z * 100, label=f"h = {h * 1e3:g} ms")
        ax.set_title("one-way (semi-implicit Euler, V-A)" if coupling == "one_way" else "two-way (TAMSI, V-C)")
        ax.set_xlabel("t (s)")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("height (cm)")
    axes[0].set_ylim(-1, 10)
    save(fig, "coupling_drop")


# ============================================================================================= allegro (VI-B)
def bench_allegro(quick: bool) -> None:
    print("\n== Section VI-B: Allegro hand reorienting a mug open loop, TAMSI h = 0.7 ms")
    import allegro_mug
    allegro_mug.bench(quick, save, table)


# ============================================================================================== timing (speed)
def bench_timing(quick: bool) -> None:
    print("\n== Speed targets: gripper (VI-A) >= 20x real time, Allegro (VI-B) >= 1x real time")
    import speed
    speed.bench(quick, save, table)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", choices=["box", "coupling", "gripper", "allegro", "timing", "all"])
    parser.add_argument("--quick", action="store_true", help="shorter runs (smoke test)")
    parser.add_argument("--docs", action="store_true", help="copy the figures to docs/figures/")
    args = parser.parse_args(argv)
    todo = ["box", "coupling", "gripper", "allegro", "timing"] if args.experiment == "all" else [args.experiment]
    for name in todo:
        {"box": bench_box, "coupling": bench_coupling, "gripper": bench_gripper,
         "allegro": bench_allegro, "timing": bench_timing}[name](args.quick)
    if args.docs:
        DOCS_FIGURES.mkdir(parents=True, exist_ok=True)
        for path in SAVED:
            shutil.copy(path, DOCS_FIGURES / path.name)
            print(f"copied to docs/figures/{path.name}")


if __name__ == "__main__":
    main()
