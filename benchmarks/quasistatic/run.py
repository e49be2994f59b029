"""Quasistatic MIQP engine benchmarks (Pang & Tedrake 2018): one command, tables on stdout, PNGs in out/.

    PYTHONPATH=. python benchmarks/quasistatic/run.py                 # everything (2-D + 3-D, all back-ends)
    PYTHONPATH=. python benchmarks/quasistatic/run.py --part 2d       # section V-A only (seconds)
    PYTHONPATH=. python benchmarks/quasistatic/run.py --part 3d --solvers daqp,scip --objects cylinder
    ... --docs-figures    also copies the figures to docs/figures/quasistatic_*.png
    ... --record          pickles every 3-D MIQP to out/problems_<object>_<solver>.pkl (for scip_profile.py)

Part 2d: the 2-D gripper of section V-A (Fig. 5 with the MIQP, Fig. 6 with the LCP baseline) and its numbers.
Part 3d: section V-B: the iiwa + WSG picks a cylinder (then a box) from the table, lifts it and moves it through
a translation and a rotation about z; per-step solver times in the form of the paper's Table I, for every
installed MIQP back-end (the back-end's own solve time, as the paper read Gurobi's Runtime, plus the whole
engine step: problem assembly, solve, polish and least-impulse LP).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import pickle
import shutil
import sys
import time
from dataclasses import replace

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # small dense algebra: threads only thrash on 2 cores

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import gripper_2d as g2d  # noqa: E402

from contact_sim_ros.engines import make_engine  # noqa: E402
from contact_sim_ros.engines.quasistatic_miqp import MIQP_BACKENDS  # noqa: E402

OUT = HERE / "out"
FIG_DIR = ROOT / "docs" / "figures"
PAPER_TABLE_I = {"cylinder": (36, 2.7, 11.8, 0.83), "box": (72, 6.6, 118.7, 9.7)}   # binaries, mean, worst, std


# ---------------------------------------------------------------------------------------------------- 2-D

def part_2d(solvers, figures):
    model = g2d.build_model()
    opts = {"friction_directions": 2, "hypothetical_penetration_stiffness": g2d.K}
    runs = {}
    for solver in solvers:
        runs[f"miqp/{solver}"] = g2d.simulate(make_engine("quasistatic_miqp", model, dict(opts, solver=solver)))
    runs[f"miqp/{solvers[0]} delayed"] = g2d.simulate(make_engine("quasistatic_miqp", model,
                                                         dict(opts, solver=solvers[0], delayed_force_bound=True)))
    runs["lcp eq.30"] = g2d.simulate(make_engine("quasistatic_lcp", model, {"friction_directions": 2}),
                                     command=g2d.command_eq30_lifting)
    runs["lcp eq.29"] = g2d.simulate(make_engine("quasistatic_lcp", model, {"friction_directions": 2}))

    print("\n== Section V-A: 2-D gripper, m = 1 kg, r = 0.05 m, mu = 0.5, h = 0.01 s, K = 1e4 N/m, 60 steps ==")
    print(f"{'run':22s} {'ok steps':>8s} {'touch step':>10s} {'min phi (m)':>12s} {'max y_c-r (mm)':>14s} "
          f"{'y_c-r @60 (mm)':>14s} {'finger N 21-39 (N)':>18s} {'y_g err (m)':>11s} {'solver mean/max (ms)':>20s}")
    for name, r in runs.items():
        ok = np.array([s.ok for s in r["status"]])
        touch = next((l for l in range(61) if r["phi"][l, 0] <= 1e-9), None)
        fing = r["normal_force"][20:39, :2]
        if "eq.29" in name and "lcp" in name:
            cmd = g2d.command_eq29
        elif "lcp" in name:
            cmd = g2d.command_eq30_lifting
        else:
            cmd = g2d.command_eq29
        yg_cmd = np.concatenate([[0.0], np.cumsum([cmd(l)[2] * g2d.H for l in range(1, 61)])])
        yg_err = np.abs(r["q"][:, g2d.V_YG] - yg_cmd).max()
        t = r["solver_time_s"] * 1e3
        print(f"{name:22s} {ok.sum():8d} {('step ' + str(touch + 1)) if touch is not None else '-':>10s} "
              f"{r['phi'].min():12.2e} {1e3 * (r['q'][:, g2d.V_YC].max() - g2d.RADIUS):14.3f} "
              f"{1e3 * (r['q'][-1, g2d.V_YC] - g2d.RADIUS):14.3f} {fing.min():8.3f}..{fing.max():<8.3f} "
              f"{yg_err:11.1e} {t.mean():9.2f} / {t.max():<8.2f}")
    print("touch step: first step that starts with phi_1 = 0 (paper: 21). lcp eq.29 fails from step 21 (infeasible, "
          "state kept); 'y_g err' compares with the command of each run.")
    if figures:
        _figure_2d(runs, solvers[0], figures)
    return runs


def _figure_2d(runs, solver, figures):
    steps = np.arange(61)
    for key, fname, title in ((f"miqp/{solver}", "quasistatic_2d_miqp.png", "MIQP (paper Fig. 5)"),
                              ("lcp eq.30", "quasistatic_2d_lcp.png", "LCP baseline, eq. 30 (paper Fig. 6)")):
        r = runs[key]
        fig, ax = plt.subplots(2, 3, figsize=(13, 6.5))
        q = r["q"]
        ax[0, 0].plot(steps, q[:, g2d.V_XL], label="x_l")
        ax[0, 0].plot(steps, q[:, g2d.V_XR], label="x_r")
        ax[0, 0].plot(steps, q[:, g2d.V_XC], label="x_c")
        ax[0, 0].set_title("x positions (m)")
        ax[0, 1].plot(steps, r["phi"][:, 0], label="phi_1 (left)")
        ax[0, 1].plot(steps, r["phi"][:, 1], "--", label="phi_2 (right)")
        ax[0, 1].plot(steps, r["phi"][:, 2], label="phi_3 (table)")
        ax[0, 1].set_title("signed distances (m)")
        ax[0, 2].plot(steps, q[:, g2d.V_YG], label="y_g")
        ax[0, 2].set_title("gripper height y_g (m)")
        ax[1, 0].plot(steps, q[:, g2d.V_YC], label="y_c")
        ax[1, 0].set_title("cylinder height y_c (m)")
        ax[1, 1].plot(steps[1:], r["normal_force"][:, 0], label="finger left")
        ax[1, 1].plot(steps[1:], r["normal_force"][:, 1], "--", label="finger right")
        ax[1, 1].plot(steps[1:], r["normal_force"][:, 2], label="table")
        ax[1, 1].set_title("normal force P_n / h (N)")
        ax[1, 2].plot(steps[1:], r["friction_force"][:, 0] + r["friction_force"][:, 1], label="fingers (sum)")
        ax[1, 2].set_title("finger friction on the cylinder (N)")
        for a in ax.flat:
            a.set_xlabel("step")
            a.legend(fontsize=8)
            a.grid(alpha=0.3)
        fig.suptitle(f"2-D gripper picking up a cylinder: {title}")
        fig.tight_layout()
        _save(fig, fname, figures)


# ---------------------------------------------------------------------------------------------------- 3-D

def tcp_schedule(t: float, scale: float = 1.0):
    """TCP twist (world frame: linear m/s, angular rad/s) and finger joint velocity (m/s) at time t (s).
    Phases: descend 1 s, close 0.5 s, lift 1 s, move 3 s (translation (-0.09, 0.09, 0) m + 45 deg about z),
    hold 0.5 s (all scaled by ``scale``); the fingers keep squeezing once closing started."""
    T = np.array([1.0, 0.5, 1.0, 3.0, 0.5]) * scale
    ends = np.cumsum(T)
    zero = np.zeros(3)
    squeeze = -0.015 / T[1]                     # closes 15 mm in the closing phase (10 mm gap), keeps squeezing
    if t < ends[0]:
        return np.array([0.0, 0.0, -0.1932 / T[0]]), zero, 0.0
    if t < ends[1]:
        return zero, zero, squeeze
    if t < ends[2]:
        return np.array([0.0, 0.0, 0.10 / T[2]]), zero, squeeze
    if t < ends[3]:
        return np.array([-0.09, 0.09, 0.0]) / T[3], np.array([0.0, 0.0, np.pi / 4 / T[3]]), squeeze
    return zero, zero, squeeze


ARM_JOINTS = [f"iiwa_joint_{i}" for i in range(1, 8)]
# section V-B engine options: the paper's delayed force bound; the arm 100x stiffer than the fingers in the
# objective (a finger blocked by the object stops instead of the arm turning to let it close further)
ENGINE_OPTIONS_3D = {"delayed_force_bound": True, "command_weights": {j: 100.0 for j in ARM_JOINTS}}


def run_3d(obj: str, solver: str, scale: float, time_limit_s: float = 1.0, n_steps: int | None = None,
           engine_options: dict | None = None, record: list | None = None):
    """Simulate the section V-B task (or its first n_steps); returns per-step records (see rec). ``record``: a
    list that receives (step, MIQP, solution) of every back-end call (for scip_profile.py)."""
    from contact_sim_ros.sim.simulator import Simulator

    scene = ROOT / "scenes" / f"quasistatic_iiwa_{obj}.yaml"
    h = 0.005
    opts = dict(ENGINE_OPTIONS_3D, solver=solver, time_limit_s=time_limit_s, **(engine_options or {}))
    sim = Simulator(str(scene), engine="quasistatic_miqp", time_step=h, engine_options=opts)
    m = sim.model
    arm = [m.joint_index(f"iiwa_joint_{i}") for i in range(1, 8)]
    arm_v = m.joint_v_index[arm]
    tcp = m.pin_model.getFrameId("wsg_tcp")
    body = m.free_bodies[0].name
    n_steps = int(round(6.0 * scale / h)) if n_steps is None else n_steps
    if record is not None:
        solve = sim.engine._solve

        def recording_solve(problem):
            sol = solve(problem)
            record.append((len(rec["t"]), replace(problem, params=dict(problem.params)), sol))
            return sol
        sim.engine._solve = recording_solve
    rec = {k: [] for k in ("t", "solver_ms", "engine_ms", "engine_cpu_ms", "binaries", "contacts", "obj", "tcp", "ok",
                           "raises", "time_limited", "build_ms", "warm_ms", "warm_ok", "nodes", "fallback")}
    for _ in range(n_steps):
        vlin, wang, finger_v = tcp_schedule(sim.t, scale)
        J = pin.getFrameJacobian(m.pin_model, sim.pin_data, tcp, pin.LOCAL_WORLD_ALIGNED)[:, arm_v]
        qd = J.T @ np.linalg.solve(J @ J.T + 1e-6 * np.eye(6), np.concatenate([vlin, wang]))
        vel = {m.joint_names[i]: float(qd[k]) for k, i in enumerate(arm)}
        vel["wsg_finger_left_joint"] = vel["wsg_finger_right_joint"] = finger_v
        sim.set_joint_targets(velocities=vel)
        cpu0 = time.process_time()
        report = sim.step()
        rec["engine_cpu_ms"].append(1e3 * (time.process_time() - cpu0))
        info = sim.engine.last_solve_info
        rec["t"].append(sim.t)
        rec["ok"].append(report.ok)
        rec["solver_ms"].append(info.solver_time_s * 1e3)
        rec["engine_ms"].append(sim.last_result.stats.solve_time_s * 1e3 if sim.last_result is not None else np.nan)
        rec["binaries"].append(info.n_binaries)
        rec["contacts"].append(info.n_contacts)
        rec["raises"].append(info.big_m_raises)
        rec["time_limited"].append(info.time_limited)
        rec["build_ms"].append(info.build_time_s * 1e3)
        rec["warm_ms"].append(info.warm_start_time_s * 1e3)
        rec["warm_ok"].append(info.warm_start_feasible)
        rec["nodes"].append(info.nodes)
        rec["fallback"].append(bool(info.fallback))
        rec["obj"].append(sim.body_pose(body).copy())
        rec["tcp"].append(sim.body_pose("wsg_tcp").copy())
    return {k: (np.array(v) if k not in ("obj", "tcp") else v) for k, v in rec.items()}


def grasp_drift(rec, scale):
    """Object pose in the TCP frame from the end of the closing phase to the end: translation (mm) and angle
    (deg) of the change (0 = the object moved rigidly with the gripper)."""
    i0 = int(np.searchsorted(rec["t"], 1.5 * scale))
    rel0 = rec["tcp"][i0].inverse() * rec["obj"][i0]
    rel1 = rec["tcp"][-1].inverse() * rec["obj"][-1]
    d = rel0.inverse() * rel1
    return 1e3 * np.linalg.norm(d.translation), np.degrees(np.linalg.norm(pin.log3(d.rotation)))


def outcome(rec, scale):
    """Task numbers of one run: object lift at the end of the lift phase and at the end (mm), TCP lift (mm),
    object and TCP yaw at the end (deg), grasp drift (mm, deg)."""
    z0 = rec["obj"][0].translation[2]
    i_lift = min(int(np.searchsorted(rec["t"], 2.5 * scale)), len(rec["t"]) - 1)
    i_close = min(int(np.searchsorted(rec["t"], 1.5 * scale)), len(rec["t"]) - 1)
    return {"lift_obj_mm": 1e3 * (rec["obj"][i_lift].translation[2] - z0),
            "lift_end_mm": 1e3 * (rec["obj"][-1].translation[2] - z0),
            "lift_tcp_mm": 1e3 * (rec["tcp"][i_lift].translation[2] - rec["tcp"][i_close].translation[2]),
            "yaw_obj_deg": np.degrees(pin.rpy.matrixToRpy(rec["obj"][-1].rotation)[2]),
            "yaw_tcp_deg": np.degrees(pin.rpy.matrixToRpy(rec["tcp"][-1].rotation)[2]
                                      - pin.rpy.matrixToRpy(rec["tcp"][0].rotation)[2]),
            "drift": grasp_drift(rec, scale)}


def part_3d(solvers, objects, scale, figures, time_limit_s, record=False):
    print(f"\n== Section V-B: iiwa + WSG, pick, lift 0.10 m, move (-0.09, 0.09) m + 45 deg about z; h = 5 ms, "
          f"{int(round(6 * scale / 0.005))} steps; options {ENGINE_OPTIONS_3D['delayed_force_bound']=}, arm "
          f"command weight 100 ==")
    results = {}
    print(f"load average at the start: {os.getloadavg()}")
    for obj in objects:
        for solver in solvers:
            start, cpu = time.perf_counter(), time.process_time()
            problems = [] if record else None
            rec = run_3d(obj, solver, scale, time_limit_s, record=problems)
            results[(obj, solver)] = rec
            if record:
                OUT.mkdir(parents=True, exist_ok=True)
                path = OUT / f"problems_{obj}_{solver}.pkl"
                with open(path, "wb") as f:
                    pickle.dump(problems, f)
                print(f"  recorded {len(problems)} MIQPs to {path.relative_to(ROOT)}")
            rec["wall_s"], rec["cpu_s"] = time.perf_counter() - start, time.process_time() - cpu
            print(f"  done: {obj} / {solver}: {len(rec['t'])} steps in {rec['wall_s']:.0f} s wall, "
                  f"{rec['cpu_s']:.0f} s CPU, back-end mean {rec['solver_ms'].mean():.1f} ms", flush=True)
    print("\nTable I (paper: Gurobi Runtime per step; here every installed back-end, the back-end's own time: CPU time "
          "of the DAQP call / SCIP's optimize() / Gurobi Runtime, plus the complete warm start (the best of the "
          "previous mode and its per-pair separations, QPs); steps with contacts; "
          "times in ms; 'build': CPU time of building the solver's model in Python, not in the solver time)")
    print(f"{'object':9s} {'solver':7s} {'binaries (median/max)':>21s} {'average':>8s} {'worst':>8s} {'std':>8s} "
          f"{'median':>7s} {'warm start':>10s} {'warm ok':>7s} {'nodes':>6s} {'build':>6s} "
          f"{'engine CPU avg':>14s} {'engine wall avg':>15s} {'failed':>6s} {'M raised':>8s} {'t-limit':>7s} "
          f"{'fallback':>8s} "
          f"{'paper bin: avg/worst/std':>24s}")
    for (obj, solver), rec in results.items():
        has = rec["binaries"] > 0
        s, e = rec["solver_ms"][has], rec["engine_ms"]
        pb = PAPER_TABLE_I["cylinder" if obj == "cylinder" else "box"]
        print(f"{obj:9s} {solver:7s} {int(np.median(rec['binaries'][has])):10d} / {int(rec['binaries'].max()):<8d} "
              f"{s.mean():8.2f} {s.max():8.1f} {s.std():8.2f} {np.median(s):7.2f} {rec['warm_ms'][has].mean():10.2f} "
              f"{rec['warm_ok'][has].mean():7.2f} {rec['nodes'][has].mean():6.1f} {rec['build_ms'][has].mean():6.2f} "
              f"{np.nanmean(rec['engine_cpu_ms']):14.2f} "
              f"{np.nanmean(e):15.2f} {int((~rec['ok']).sum()):6d} {int((rec['raises'] > 0).sum()):8d} "
              f"{int(rec['time_limited'].sum()):7d} {int(rec['fallback'].sum()):8d} {pb[0]:>8d}: {pb[1]}/{pb[2]}/{pb[3]}")
    print(f"load average at the end: {os.getloadavg()}")
    print("\nTask outcome (lift: object height gain at the end of the lift phase and at the end; drift: change of the "
          "object's pose in the TCP frame from the closed grasp to the end)")
    print(f"{'object':9s} {'solver':7s} {'lift obj (mm)':>13s} {'lift TCP (mm)':>13s} {'obj z at end (mm)':>17s} "
          f"{'yaw obj / TCP (deg)':>19s} {'drift (mm / deg)':>16s} {'wall (s)':>8s} {'CPU (s)':>7s}")
    for (obj, solver), rec in results.items():
        o = outcome(rec, scale)
        print(f"{obj:9s} {solver:7s} {o['lift_obj_mm']:13.2f} {o['lift_tcp_mm']:13.2f} {o['lift_end_mm']:17.2f} "
              f"{o['yaw_obj_deg']:9.2f} / {o['yaw_tcp_deg']:<7.2f} {o['drift'][0]:7.3f} / {o['drift'][1]:<6.3f} "
              f"{rec['wall_s']:8.1f} {rec['cpu_s']:7.1f}")
    if figures:
        _figure_3d(results, figures)
    return results


def _figure_3d(results, figures):
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    for (obj, solver), rec in results.items():
        z = np.array([p.translation[2] for p in rec["obj"]])
        ax[0].plot(rec["t"], z, label=f"{obj} ({solver})")
        ax[1].semilogy(rec["t"], np.maximum(rec["solver_ms"], 1e-3), lw=0.6, label=f"{obj} / {solver}")
        ax[2].hist(rec["solver_ms"], bins=60, histtype="step", label=f"{obj} / {solver}")
    ax[0].set_title("object height (m)")
    ax[0].set_xlabel("t (s)")
    ax[1].set_title("MIQP back-end time per step (ms)")
    ax[1].set_xlabel("t (s)")
    ax[2].set_title("distribution of back-end time (ms)")
    ax[2].set_xlabel("ms")
    for a in ax:
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
    fig.suptitle("iiwa + WSG: pick, lift, translate and rotate (quasistatic MIQP, h = 5 ms)")
    fig.tight_layout()
    _save(fig, "quasistatic_3d_grasp.png", figures)


def _save(fig, name, figures):
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"saved {path.relative_to(ROOT)}")
    if figures == "docs":
        FIG_DIR.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, FIG_DIR / name)
        print(f"copied to {(FIG_DIR / name).relative_to(ROOT)}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=["2d", "3d", "all"], default="all")
    ap.add_argument("--solvers", default=",".join(sorted(MIQP_BACKENDS, key=lambda s: (s != "daqp", s))),
                    help="comma-separated MIQP back-ends (installed: %(default)s)")
    ap.add_argument("--objects", default="cylinder,box")
    ap.add_argument("--duration-scale", type=float, default=1.0,
                    help="scale of the 6 s trajectory (the paper's is 12 s: use 2)")
    ap.add_argument("--time-limit", type=float, default=1.0, help="MIQP time limit per step (s)")
    ap.add_argument("--record", action="store_true",
                    help="pickle every 3-D MIQP to out/problems_<object>_<solver>.pkl (for scip_profile.py)")
    ap.add_argument("--docs-figures", action="store_true", help="also copy the PNGs to docs/figures/")
    args = ap.parse_args(argv)
    solvers = [s for s in args.solvers.split(",") if s]
    unknown = [s for s in solvers if s not in MIQP_BACKENDS]
    if unknown:
        ap.error(f"back-end(s) {unknown} not installed; installed: {sorted(MIQP_BACKENDS)}")
    figures = "docs" if args.docs_figures else "out"
    if args.part in ("2d", "all"):
        part_2d(solvers, figures)
    if args.part in ("3d", "all"):
        part_3d(solvers, [o for o in args.objects.split(",") if o], args.duration_scale, figures,
                args.time_limit, args.record)


if __name__ == "__main__":
    main()
