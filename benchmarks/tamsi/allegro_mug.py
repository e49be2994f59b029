"""Section VI-B: the Allegro hand reorienting a mug open loop (scenes/tamsi_allegro_mug.yaml), TAMSI h = 0.7 ms."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pinocchio as pin

ROOT = Path(__file__).resolve().parents[2]
SCENE = ROOT / "scenes" / "tamsi_allegro_mug.yaml"
PALM_TOP = 0.211          # m, world height of the palm's upper face (config/robots/allegro.yaml base pose)


def run(duration: float, dt: float = 7e-4, record_every: int = 20):
    """Simulate; returns traces (t, mug position, mug rotation angle from the start, contacts) and timings."""
    from contact_sim_ros.sim.simulator import Simulator
    from timing import instrument_engine_cpu, warm_up_compiled_kernel
    warm_up_compiled_kernel()
    sim = Simulator(str(SCENE), engine="tamsi", time_step=dt)
    engine_cpu = instrument_engine_cpu(sim)
    R0 = sim.body_pose("mug").rotation.copy()
    steps = int(round(duration / dt))
    t, pos, angle, ncontacts, loaded = [], [], [], [], []
    iterations = np.zeros(steps, int)
    substeps = 0
    solve = 0.0
    start = time.perf_counter()
    cpu_start = time.process_time()
    wall_trace = []
    for i in range(steps):
        report = sim.step(strict=True)
        iterations[i] = report.iterations
        substeps += report.substeps > 1
        solve += sim.last_result.stats.solve_time_s
        if (i + 1) % record_every == 0:
            pose = sim.body_pose("mug")
            t.append(sim.t)
            pos.append(pose.translation.copy())
            angle.append(np.linalg.norm(pin.log3(R0.T @ pose.rotation)))
            ncontacts.append(sim.contacts.size)
            loaded.append(int(np.count_nonzero(sim.last_result.contact_impulse[:, 2] > 0)))
            wall_trace.append(time.perf_counter() - start)
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    return dict(cpu=cpu, engine_cpu=engine_cpu[0], t=np.array(t), pos=np.array(pos), angle=np.array(angle),
                contacts=np.array(ncontacts),
                loaded=np.array(loaded), iterations=iterations, substeps=substeps, wall=wall, solve=solve,
                wall_trace=np.array(wall_trace), steps=steps)


def held(result) -> bool:
    """The mug was not dropped: its centre stayed above the palm's face and within 12 cm of the palm centre."""
    pos = result["pos"]
    return bool(np.all(pos[:, 2] > PALM_TOP) and np.all(np.hypot(pos[:, 0] - 0.0475, pos[:, 1]) < 0.12))


def bench(quick: bool, save, table) -> None:
    import matplotlib.pyplot as plt
    duration = 1.5 if quick else 15.0
    r = run(duration)
    table(["quantity", "value"], [
        ("simulated time (s)", f"{duration:g}"),
        ("wall time (s)", f"{r['wall']:.2f}"),
        ("real-time factor (sim/wall)", f"{duration / r['wall']:.3f}x"),
        ("CPU time (s)", f"{r['cpu']:.2f}"),
        ("real-time factor by CPU time", f"{duration / r['cpu']:.3f}x"),
        ("engine CPU time (s)", f"{r['engine_cpu']:.2f}"),
        ("engine-only real-time factor (CPU)", f"{duration / r['engine_cpu']:.2f}x"),
        ("engine CPU per step (us)", f"{1e6 * r['engine_cpu'] / r['steps']:.0f}"),
        ("engine wall (solve_time_s) (s)", f"{r['solve']:.2f}"),
        ("Newton iterations/step mean", f"{r['iterations'].mean():.2f}"),
        ("Newton iterations/step max", int(r["iterations"].max())),
        ("steps retried in sub-steps", r["substeps"]),
        ("contact points mean / max", f"{r['contacts'].mean():.1f} / {r['contacts'].max()}"),
        ("loaded contacts mean / max", f"{r['loaded'].mean():.1f} / {r['loaded'].max()}"),
        ("mug rotation from start, max (deg)", f"{np.degrees(r['angle'].max()):.0f}"),
        ("mug held (not dropped)", held(r)),
        ("paper (C++, i7-6900K)", "7.0 s wall for 15 s, 2.14x real time"),
    ])
    fig, axes = plt.subplots(3, 1, figsize=(7, 7), sharex=True)
    axes[0].plot(r["t"], r["pos"][:, 0] * 100, label="x")
    axes[0].plot(r["t"], r["pos"][:, 1] * 100, label="y")
    axes[0].plot(r["t"], (r["pos"][:, 2] - PALM_TOP) * 100, label="z above palm")
    axes[0].set_ylabel("mug centre (cm)")
    axes[0].legend(fontsize=8, ncol=3)
    axes[1].plot(r["t"], np.degrees(r["angle"]))
    axes[1].set_ylabel("mug rotation (deg)")
    axes[2].plot(r["t"], r["loaded"], label="loaded contacts")
    axes[2].plot(r["t"], r["contacts"], lw=0.6, label="contact points (margin)")
    axes[2].set_ylabel("contacts")
    axes[2].set_xlabel("t (s)")
    axes[2].legend(fontsize=8)
    fig.suptitle(f"Allegro hand reorienting a mug, TAMSI h = 0.7 ms ({duration / r['wall']:.2f}x real time)")
    save(fig, "allegro_mug")
