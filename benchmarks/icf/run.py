"""Benchmarks of the convex ICF engines (lagged, similar, sap): the test cases of Castro, Han, Masterjohn,
"Irrotational Contact Fields", sections XI-XII.

    python benchmarks/icf/run.py                      # all cases, paper durations
    python benchmarks/icf/run.py --case conveyor      # one case: conveyor, sphere, rod, clutter, clutter_sweeps,
                                                      # grasp, grasp_sensitivity (the 'all' run skips none)
    python benchmarks/icf/run.py --quick              # shorter runs (smoke test)

Prints one table per case, saves PNG plots to benchmarks/icf/out/ and copies the figures the docs embed to
docs/figures/icf_*.png. Timings are CPU time of this process (time.process_time) and wall time; the real-time
factor is sim time / wall time of the whole Simulator.step (query + dynamics + engine).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from contact_sim_ros.sim.simulator import Simulator  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
FIGURES = ROOT / "docs" / "figures"
SCENES = ROOT / "scenes"
MODELS = ("lagged", "similar", "sap")
COLORS = {"lagged": "C0", "similar": "C1", "sap": "C2", "lagged (eq. 26)": "C3"}
G = 9.81


def save(fig, name, doc=True):
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    if doc:
        FIGURES.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, FIGURES / name)
    print(f"  saved {path.relative_to(ROOT)}" + (f" and docs/figures/{name}" if doc else ""))


def table(title, header, rows):
    print(f"\n{title}")
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    print("  " + " | ".join(str(h).ljust(w) for h, w in zip(header, widths)))
    print("  " + "-+-".join("-" * w for w in widths))
    for r in rows:
        print("  " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)))


def frozen(v, dt):
    """The engine's end-of-step velocity in the body frame of the step's Jacobian (undo the re-expression of a
    free body's linear velocity in the new body frame)."""
    import pinocchio as pin
    v = np.array(v, float)
    v[:3] = pin.exp3(dt * v[3:6]) @ v[:3]
    return v


# ------------------------------------------------------------------------------------------------------------
def conveyor(quick):
    """XI-A: box on an oscillating belt. Traces at dt = 10 ms; convergence over dt in {2e-3, 1e-2, 5e-2}."""
    duration = 1.0 if quick else 2.0
    dt = 0.01
    traces = {}
    rows = []
    for name in MODELS:
        sim = Simulator(SCENES / "icf_conveyor.yaml", engine=name, time_step=dt)
        tau = sim.engine.options.relaxation_time if name == "sap" else 0.0
        rec = {k: [] for k in ("t", "vz", "fn", "gap", "pred", "slip")}
        slip_prev = None
        for _ in range(int(round(duration / dt))):
            sim.step(strict=True)
            res = sim.last_result
            c = sim.contacts
            if slip_prev is not None and c.size:
                rec["gap"][-1] = c.signed_distance.mean()
            vc = c.relative_velocity(frozen(res.v_next, dt)) if c.size else np.zeros((0, 3))
            slip_prev = np.linalg.norm(vc[:, :2], axis=1).mean() if len(vc) else np.nan
            rec["t"].append(sim.t)
            rec["vz"].append(sim.body_velocity("box")[2])
            rec["fn"].append(res.contact_impulse[:, 2].sum() / dt if c.size else 0.0)
            rec["slip"].append(slip_prev)
            rec["pred"].append(0.7 * (dt + tau) * slip_prev)
            rec["gap"].append(np.nan)
        r = {k: np.array(v) for k, v in rec.items()}
        traces[name] = r
        late = r["t"] > 0.5
        slipping = late & (r["slip"] > 0.05) & np.isfinite(r["gap"])
        ratio = np.median(r["gap"][slipping] / r["pred"][slipping]) if slipping.any() else np.nan
        rows.append([name, f"{np.abs(r['vz'][late]).max():.2e}", f"{r['fn'][late].min():.3f}",
                     f"{r['fn'][late].max():.3f}", f"{1e3 * np.nanmax(r['gap'][late]):.3f}",
                     f"{ratio:.3f}"])
    table(f"Conveyor belt (XI-A), dt = {dt} s, t in (0.5, {duration}] s (m g = {G:.2f} N); "
          "gap/formula = median over slip of phi / (mu (dt + tau_d) |v_t|)",
          ["model", "max |v_z| (m/s)", "min f_n (N)", "max f_n (N)", "max gap (mm)", "gap/formula"], rows)
    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    for name, r in traces.items():
        ax[0].plot(r["t"], r["vz"], label=name, color=COLORS[name])
        ax[1].plot(r["t"], r["fn"], label=name, color=COLORS[name])
        ax[2].plot(r["t"], 1e3 * r["gap"], label=f"{name} gap", color=COLORS[name])
        if name != "lagged":
            ax[2].plot(r["t"], 1e3 * r["pred"], "--", color=COLORS[name], label=f"{name}: formula")
    ax[0].set(xlabel="t (s)", ylabel="box vertical velocity (m/s)", ylim=(-0.03, 0.03),
              title="Conveyor belt, dt = 10 ms (Similar/SAP launch the box at t = 0, clipped)")
    ax[1].set(xlabel="t (s)", ylabel="total normal force (N)", ylim=(8, 12))
    ax[2].set(xlabel="t (s)", ylabel="mean contact gap (mm)", ylim=(-0.1, 1.2),
              title="gliding: Similar mu dt|v_t|, SAP mu(dt+tau_d)|v_t|")
    for a in ax:
        a.legend(fontsize=8)
        a.grid(alpha=0.3)
    save(fig, "icf_conveyor.png")

    # convergence: box position error against a Lagged reference at dt_ref = min(dt) / 10
    T = 1.0 if quick else 2.0
    dts = [2e-3, 1e-2, 5e-2]
    ref_dt = 2e-3 / (2 if quick else 10)
    sample = 0.05

    def trajectory(name, step):
        sim = Simulator(SCENES / "icf_conveyor.yaml", engine=name, time_step=step)
        stride = int(round(sample / step))
        xs = []
        for i in range(int(round(T / step))):
            sim.step(strict=True)
            if (i + 1) % stride == 0:
                xs.append(sim.q[:3].copy())
        return np.array(xs)

    t0 = time.perf_counter()
    ref = trajectory("lagged", ref_dt)
    print(f"  reference (lagged, dt = {ref_dt:g} s, {T} s) took {time.perf_counter() - t0:.1f} s wall")
    errors = {name: [np.sqrt(np.mean(np.sum((trajectory(name, h) - ref) ** 2, axis=1))) for h in dts]
              for name in MODELS}
    rows = []
    for name in MODELS:
        e = errors[name]
        orders = [np.log(e[i + 1] / e[i]) / np.log(dts[i + 1] / dts[i]) for i in range(len(dts) - 1)]
        rows.append([name] + [f"{x:.3e}" for x in e] + [", ".join(f"{o:.2f}" for o in orders)])
    table(f"Conveyor convergence: RMS position error e_q (m) over {T} s against Lagged at dt = {ref_dt:g} s",
          ["model"] + [f"dt={h:g}" for h in dts] + ["observed order"], rows)
    fig, ax = plt.subplots(figsize=(5, 4))
    for name in MODELS:
        ax.loglog(dts, errors[name], "o-", label=name, color=COLORS[name])
    ax.loglog(dts, errors["lagged"][0] * np.array(dts) / dts[0], "k--", label="first order")
    ax.set(xlabel="dt (s)", ylabel="e_q (m)", title="Conveyor belt: convergence")
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    save(fig, "icf_conveyor_convergence.png")


# ------------------------------------------------------------------------------------------------------------
def sphere(quick):
    """XI-B: falling sphere, dt = 2 ms: slides, then rolls at 5/7 vx0."""
    dt, r_s, vx0 = 2e-3, 0.025, 2.0
    duration = 0.3
    rows, traces = [], {}
    for name in MODELS:
        sim = Simulator(SCENES / "icf_falling_sphere.yaml", engine=name, time_step=dt)
        rec = {k: [] for k in ("t", "vx", "wr", "vn", "fn")}
        t_contact = t_roll = None
        for _ in range(int(round(duration / dt))):
            sim.step(strict=True)
            v = sim.body_velocity("sphere")
            res = sim.last_result
            fn = res.contact_impulse[:, 2].sum() / dt if sim.contacts.size else 0.0
            if t_contact is None and fn > 0:
                t_contact = sim.t - dt
            if t_contact is not None and t_roll is None and abs(v[0] - r_s * v[4]) < 1e-3:
                t_roll = sim.t
            rec["t"].append(sim.t)
            rec["vx"].append(v[0])
            rec["wr"].append(r_s * v[4])
            rec["vn"].append(v[2])
            rec["fn"].append(fn)
        traces[name] = {k: np.array(x) for k, x in rec.items()}
        vx = traces[name]["vx"][-1]
        rows.append([name, f"{vx:.4f}", f"{100 * (vx / (5 / 7 * vx0) - 1):+.3f} %",
                     f"{t_contact:.3f}", f"{t_roll:.3f}" if t_roll else "-",
                     f"{t_roll - t_contact:.3f}" if t_roll else "-"])
    table("Falling sphere (XI-B), dt = 2 ms: analytic rolling speed 5/7 vx0 = 1.4286 m/s; rigid-impact estimate of "
          "the sliding time after contact 0.016 s",
          ["model", "final vx (m/s)", "vs 5/7 vx0", "t contact (s)", "t rolling (s)", "sliding time (s)"], rows)
    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    for name, r in traces.items():
        ax[0].plot(r["t"], r["vx"], color=COLORS[name], label=f"{name} v_x")
        ax[0].plot(r["t"], r["wr"], "--", color=COLORS[name], label=f"{name} w r")
        ax[1].plot(r["t"], r["vn"], color=COLORS[name], label=name)
        ax[2].plot(r["t"], r["fn"], color=COLORS[name], label=name)
    ax[0].axhline(5 / 7 * vx0, color="k", lw=0.8, ls=":", label="5/7 vx0")
    ax[0].set(xlabel="t (s)", ylabel="m/s", title="Falling sphere, dt = 2 ms")
    ax[1].set(xlabel="t (s)", ylabel="vertical velocity (m/s)", ylim=(-0.2, 0.2))
    ax[2].set(xlabel="t (s)", ylabel="normal force (N)", yscale="symlog")
    for a in ax:
        a.legend(fontsize=7)
        a.grid(alpha=0.3)
    save(fig, "icf_sphere.png")


# ------------------------------------------------------------------------------------------------------------
def rod(quick):
    """XI-C: sliding rod (0.5 m, 1 cm diameter, 0.3 kg, mu = 2.3, 30 deg, U0 = 10 m/s): it jams and jumps."""
    duration = 0.06
    rows = []
    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    for dt in ([1e-4] if quick else [1e-4, 1e-5]):
        for name in MODELS:
            sim = Simulator(SCENES / "icf_sliding_rod.yaml", engine=name, time_step=dt)
            rec = {k: [] for k in ("t", "vt", "fn", "z", "vz")}
            for _ in range(int(round(duration / dt))):
                sim.step(strict=True)
                res = sim.last_result
                c = sim.contacts
                touching = c.size and res.contact_impulse[:, 2].sum() > 0
                vc = c.relative_velocity(frozen(res.v_next, dt)) if c.size else np.zeros((0, 3))
                rec["t"].append(sim.t)
                rec["vt"].append(np.linalg.norm(vc[0, :2]) if touching else np.nan)
                rec["fn"].append(res.contact_impulse[:, 2].sum() / dt if c.size else 0.0)
                rec["z"].append(sim.body_pose("rod").translation[2])
                rec["vz"].append(sim.body_velocity("rod")[2])
            r = {k: np.array(x) for k, x in rec.items()}
            k_peak = int(np.argmax(r["fn"]))
            stuck = np.nanmin(r["vt"][: k_peak + 5]) if np.isfinite(r["vt"][: k_peak + 5]).any() else np.nan
            airborne = r["fn"][k_peak:] == 0
            t_jump = r["t"][k_peak + int(np.argmax(airborne))] if airborne.any() else np.nan
            rows.append([name, f"{dt:g}", f"{r['t'][k_peak]:.4f}", f"{r['fn'][k_peak]:.1f}", f"{stuck:.2e}",
                         f"{t_jump:.4f}", f"{r['vz'][-1]:+.3f}"])
            if dt == 1e-4:
                ax[0].plot(r["t"], r["fn"], color=COLORS[name], label=name)
                ax[1].plot(r["t"], r["vt"], color=COLORS[name], label=name)
                ax[2].plot(r["t"], r["z"], color=COLORS[name], label=name)
    table(f"Sliding rod (XI-C), {duration} s: peak normal force (impact), slip at the jam, lift-off",
          ["model", "dt (s)", "t impact (s)", "peak f_n (N)", "min slip before (m/s)", "t lift-off (s)",
           "final v_z (m/s)"], rows)
    ax[0].set(xlabel="t (s)", ylabel="normal force (N)", yscale="symlog", title="Sliding rod, dt = 0.1 ms")
    ax[1].set(xlabel="t (s)", ylabel="slip speed (m/s)", yscale="log")
    ax[2].set(xlabel="t (s)", ylabel="centre height (m)")
    for a in ax:
        a.legend(fontsize=8)
        a.grid(alpha=0.3)
    save(fig, "icf_rod.png")


# ------------------------------------------------------------------------------------------------------------
def run_clutter(name, dt, duration, stiffness=1.0e7, options=None, verbose=False):
    """One clutter run; returns per-step iterations, final kinetic energy, mean penetration over the last
    1.25 s (or last 40 %), real-time factor, engine CPU share."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from make_clutter_scene import clutter_scene
    scene = clutter_scene(stiffness=stiffness)
    sim = Simulator(scene, engine=name, time_step=dt, engine_options=options)
    n = int(round(duration / dt))
    window = min(1.25, 0.4 * duration)
    iters, pen, pen_force, eps = [], [], [], []
    engine_time = 0.0
    w0, c0 = time.perf_counter(), time.process_time()
    for i in range(n):
        rep = sim.step(strict=True)
        iters.append(rep.iterations)
        if verbose and (i + 1) % int(round(0.5 / dt)) == 0:
            print(f"    {name} t = {sim.t:.2f} s: mean iterations {np.mean(iters):.1f}, contacts "
                  f"{sim.contacts.size}, KE {sim.kinetic_energy():.3g} J, cpu {time.process_time() - c0:.0f} s",
                  flush=True)
        engine_time += sim.last_result.stats.solve_time_s
        if sim.t > duration - window and sim.contacts.size:
            phi = sim.contacts.signed_distance
            touching = sim.last_result.contact_impulse[:, 2] > 0
            if touching.any():
                pen.append(np.mean(-phi[touching]))
                # the force law's penetration gamma_n / (dt k) (= -(phi0 + dt v_n) at v_n = 0)
                gn = sim.last_result.contact_impulse[touching, 2]
                pen_force.append(np.mean(gn / (dt * sim.contacts.stiffness[touching])))
        if sim.contacts.size:
            eps.append(np.median(sim.engine.last_stiction_tolerance))
        else:
            eps.append(np.nan)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return dict(iters=np.array(iters), ke=sim.kinetic_energy(), pen=np.mean(pen) if pen else np.nan,
                pen_force=np.mean(pen_force) if pen_force else np.nan,
                rtf=duration / wall, cpu_rtf=duration / cpu, engine_share=engine_time / wall, wall=wall,
                eps=np.array(eps), vmax=float(np.max(np.abs(sim.v))))


def clutter(quick):
    """XII-A: 40 objects into an 80 cm box; dt = 2 ms; iterations vs dt; penetration vs stiffness."""
    duration = 0.5 if quick else 3.0
    variants = CLUTTER_VARIANTS
    rows, runs = [], {}
    for label, opts in variants:
        engine = label.split(" ")[0]
        r = run_clutter(engine, 2e-3, duration, options=opts, verbose=True)
        runs[label] = r
        rows.append([label, f"{r['iters'].mean():.2f}", int(r["iters"].max()), f"{r['ke']:.2e}",
                     f"{r['vmax']:.2e}", f"{1e6 * r['pen']:.2f}", f"{r['rtf']:.3f}", f"{r['cpu_rtf']:.3f}",
                     f"{r['engine_share']:.2f}"])
        print("  " + " | ".join(str(x) for x in rows[-1]), flush=True)
    table(f"Clutter (XII-A), dt = 2 ms, {duration} s, k = 1e7 N/m, d = 10 s/m, mu = 1: settled when the final "
          "kinetic energy is ~0; real-time factor = sim time / wall time (target >= 0.5)",
          ["model", "mean iters", "max iters", "final KE (J)", "max |v| (m/s)", "mean penetration (um)",
           "RTF wall", "RTF cpu", "engine share"], rows)
    fig, ax = plt.subplots(1, 2, figsize=(12, 4))
    for label, r in runs.items():
        t = 2e-3 * np.arange(1, r["iters"].size + 1)
        k = max(1, int(0.02 / 2e-3))
        ax[0].plot(t, np.convolve(r["iters"], np.ones(k) / k, mode="same"), label=label, color=COLORS[label])
        ax[1].semilogy(t, r["eps"], label=label, color=COLORS[label])
    ax[0].set(xlabel="t (s)", ylabel="Newton iterations (20 ms average)", title="Clutter, dt = 2 ms (cf. Fig. 15)")
    ax[1].set(xlabel="t (s)", ylabel="median effective stiction tolerance (m/s)", title="cf. Fig. 16")
    for a in ax:
        a.legend(fontsize=8)
        a.grid(alpha=0.3)
    save(fig, "icf_clutter_iterations.png")


CLUTTER_VARIANTS = [("lagged", None), ("lagged (eq. 26)", {"regularized_stiction": True}), ("similar", None),
                    ("sap", None)]


def clutter_sweeps(quick):
    """XII-A sweeps: mean Newton iterations vs dt (cf. Fig. 17), penetration at rest vs stiffness (Fig. 18)."""
    variants = CLUTTER_VARIANTS
    sweep_T = 0.3 if quick else 0.6
    dts = [2e-3, 5e-3, 1e-2]
    rows = []
    it_vs_dt = {}
    for label, opts in variants:
        engine = label.split(" ")[0]
        it_vs_dt[label] = [run_clutter(engine, h, sweep_T, options=opts)["iters"].mean() for h in dts]
        rows.append([label] + [f"{x:.2f}" for x in it_vs_dt[label]])
    table(f"Clutter: mean Newton iterations per step vs dt ({sweep_T} s)", ["model"] + [f"dt={h:g}" for h in dts],
          rows)
    ks = [1e5, 1e6, 1e7, 1e8, 1e9, 1e10]
    pen_T = 0.6 if quick else 3.0          # 1.5 s was not yet at rest (KE ~ 0.1 J): negative 'penetrations'
    rows = []
    pens, pens_force = {}, {}
    for label, opts in variants[:1]:
        engine = label.split(" ")[0]
        pens[label], pens_force[label] = [], []
        for k in ks:
            r = run_clutter(engine, 2e-3, pen_T, stiffness=k, options=opts)
            pens[label].append(r["pen"])
            pens_force[label].append(r["pen_force"])
            print(f"    k = {k:.0e}: mean iterations {r['iters'].mean():.2f}, KE {r['ke']:.2e} J", flush=True)
        rows.append([label + ": geometric -phi0"] + [f"{1e6 * p:.3g}" for p in pens[label]])
        rows.append([label + ": force law gamma_n/(dt k)"] + [f"{1e6 * p:.3g}" for p in pens_force[label]])
    table(f"Clutter: mean penetration (um) of the touching contacts at rest (last 40 % / 1.25 s of {pen_T} s) vs "
          "stiffness (N/m)", ["model"] + [f"k={k:.0e}" for k in ks], rows)
    fig, ax = plt.subplots(1, 2, figsize=(12, 4))
    for label in it_vs_dt:
        ax[0].semilogx(dts, it_vs_dt[label], "o-", label=label, color=COLORS[label])
    for label in pens:
        ax[1].loglog(ks, pens[label], "o-", label=label + ": query -phi0 (negative values not shown)",
                     color=COLORS[label])
        ax[1].loglog(ks, pens_force[label], "s--", label=label + ": force law gamma_n / (dt k)",
                     color=COLORS[label], alpha=0.6)
    ax[1].loglog(ks, [G / k * 1.0 for k in ks], "k:", label="m g / k (1 kg box, 1 contact)")
    ax[0].set(xlabel="dt (s)", ylabel="mean Newton iterations per step", title="cf. Fig. 17")
    ax[1].set(xlabel="stiffness k (N/m)", ylabel="mean penetration (m)", title="cf. Fig. 18")
    for a in ax:
        a.legend(fontsize=8)
        a.grid(alpha=0.3, which="both")
    save(fig, "icf_clutter_sweeps.png")


# ------------------------------------------------------------------------------------------------------------
def grasp(quick):
    """XII-B: Franka hand holding a bronze rod along a 3 cm circle; time to failure vs frequency."""
    preset = ROOT / "config" / "robots" / "franka.yaml"
    if not preset.exists():
        print("\nGrasp stress test (XII-B): MISSING - no franka preset in config/robots/")
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from grasp import grasp_study
    grasp_study(quick, save, table, COLORS)


def grasp_sensitivity(quick):
    """XII-B: the failure boundary against time step, grip force and model (no figure)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from grasp import grasp_sensitivity as study
    study(quick, table)


CASES = {"conveyor": conveyor, "sphere": sphere, "rod": rod, "clutter": clutter, "clutter_sweeps": clutter_sweeps,
         "grasp": grasp, "grasp_sensitivity": grasp_sensitivity}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", choices=sorted(CASES) + ["all"], default="all")
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    args = parser.parse_args(argv)
    for name, fn in CASES.items():
        if args.case in (name, "all"):
            t0 = time.perf_counter()
            fn(args.quick)
            print(f"  [{name}: {time.perf_counter() - t0:.1f} s wall]")


if __name__ == "__main__":
    main()
