"""Benchmarks of the minimal-coordinate LCP engine (issue 7). One command:

    OPENBLAS_NUM_THREADS=1 python benchmarks/lcp/run.py [--quick] [--sections ball,incline,pendulum,lambda]

Prints one table per section and writes PNGs into benchmarks/lcp/out/ and docs/figures/lcp_*.png:

* ball:     restitution: bounce height / drop height against e^2 (Simulator, scenes/lcp_ball_bounce.yaml);
* incline:  friction: stick/slide against tan(angle) < mu, acceleration against g (sin - mu cos) through the
            Simulator (scenes/lcp_incline.yaml), and the polyhedral-cone error against the sliding direction;
* pendulum: section V-E: Fig. 2 (last link height and normal velocity, minimal vs redundant coordinates,
            12 links); Table I (computation time for 3 .. 30 links) is benchmarks/lcp/table1.py;
* lambda:   cost of the operational-space compliance matrix Lambda = J M^-1 J^T against the number of links
            for 4 contacts: articulated-body columns (pin.aba) vs pin.computeMinverse vs Cholesky of M.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # stable timings on a shared 2-core machine

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402
import yaml  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from contact_sim_ros.engines.lcp_minimal import ImpulseStepper  # noqa: E402
from contact_sim_ros.sim.scene import load_scene  # noqa: E402
from contact_sim_ros.sim.simulator import Simulator  # noqa: E402

import pendulum  # noqa: E402

OUT = HERE / "out"
FIGURES = ROOT / "docs" / "figures"
G = 9.81


def save(fig, name):
    OUT.mkdir(parents=True, exist_ok=True)
    FIGURES.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(OUT / name, dpi=110)
    fig.savefig(FIGURES / name, dpi=110)
    plt.close(fig)
    print(f"  wrote {OUT / name} and {FIGURES / name}")


def scene_dict(name, **material):
    scene = yaml.safe_load((ROOT / "scenes" / name).read_text())
    scene["materials"]["default"].update(material)
    return scene


# ----------------------------------------------------------------------------------------------- ball
def bench_ball(quick):
    print("\n## Ball drop with restitution (1 kg, r = 0.1 m, drop height h = 1 m, dt = 1 ms, Simulator)")
    print(f"{'e':>5} {'apex/h':>9} {'e^2':>7} {'error %':>8} {'min gap (m)':>12} {'wall s':>7}")
    fig, ax = plt.subplots(figsize=(7, 4))
    rows = []
    for e in (0.0, 0.3, 0.5, 0.8, 1.0):
        sim = Simulator(load_scene(scene_dict("lcp_ball_bounce.yaml", restitution=e)), engine="lcp_minimal",
                        time_step=1e-3)
        steps = 1500 if quick else 2500
        z = np.empty(steps)
        start = time.perf_counter()
        for k in range(steps):
            sim.step(strict=True)
            z[k] = sim.body_pose("ball").translation[2] - 0.1
        wall = time.perf_counter() - start
        impact = int(np.argmax(z < 1e-3))
        second = impact + int(np.argmax(z[impact:] > 1e-3)) if e > 0 else impact
        # apex of the first bounce: maximum before the next impact
        after = z[second:]
        nxt = int(np.argmax(after < 1e-3)) if np.any(after < 1e-3) else after.size
        apex = after[:max(nxt, 1)].max() if e > 0 else z[impact:].max()
        err = (apex - e * e) / (e * e) * 100 if e > 0 else float("nan")
        rows.append((e, apex, err))
        print(f"{e:5.2f} {apex:9.4f} {e * e:7.4f} {err:8.3f} {z.min():12.2e} {wall:7.2f}")
        ax.plot(np.arange(1, steps + 1) * 1e-3, z, label=f"e = {e}")
    ax.set_xlabel("t (s)")
    ax.set_ylabel("ball bottom height (m)")
    ax.set_title("lcp_minimal: ball bounces to e^2 of its drop height")
    ax.legend()
    save(fig, "lcp_ball_bounce.png")
    return rows


# -------------------------------------------------------------------------------------------- incline
def point_on_plane_accel(theta, psi, mu, n_dir, steps=200, dt=1e-3):
    """A 1 kg point mass on the plane z = 0 under gravity tilted by theta, downhill at angle psi from the
    contact frame's t1: the ImpulseStepper with M = I, J = I (contact frame = world). Returns the
    acceleration magnitude in the tangent plane after the start (m/s^2)."""
    stepper = ImpulseStepper(n_directions=n_dir)
    g = G * np.array([np.sin(theta) * np.cos(psi), np.sin(theta) * np.sin(psi), -np.cos(theta)])
    v = np.zeros(3)
    X = np.eye(3)
    for _ in range(steps):
        out = stepper.step(dt, v, v + dt * g, X, np.eye(3), np.zeros(3), np.zeros(1), np.array([mu]),
                           np.zeros(1))
        v = out.v_next
    return np.linalg.norm(v[:2]) / (steps * dt)


def bench_incline(quick):
    print("\n## Block on an incline (2 kg cube, mu = 0.5, dt = 1 ms, Simulator, scenes/lcp_incline.yaml)")
    print(f"{'angle':>6} {'tan':>6} {'expected':>9} {'a meas.':>10} {'a exact':>9} {'rel. err':>9}")
    mu = 0.5
    for deg in ((20, 30, 45) if quick else (10, 20, 25, 26.5, 27, 30, 35, 45)):
        th = np.radians(deg)
        scene = scene_dict("lcp_incline.yaml", friction=mu)
        c, s = np.cos(th), np.sin(th)
        scene["objects"][0]["pose"] = {"xyz": [0.1 * s, 0, 0.1 * c], "rpy": [0, float(th), 0]}
        scene["environment"][0]["pose"] = {"xyz": [0, 0, 0], "rpy": [0, float(th), 0]}
        sim = Simulator(load_scene(scene), engine="lcp_minimal", time_step=1e-3)
        vel = []
        for _ in range(300):
            sim.step(strict=True)
            vel.append(sim.body_velocity("block")[:3].copy())
        vel = np.array(vel)
        downhill = np.array([c, 0.0, -s])
        a = (vel[-1] - vel[100]) @ downhill / (199e-3)
        exact = max(0.0, G * (s - mu * c))
        rel = abs(a - exact) / exact if exact > 0 else abs(a)
        print(f"{deg:6.1f} {np.tan(th):6.3f} {'slide' if np.tan(th) > mu else 'stick':>9} {a:10.6f} {exact:9.6f} "
              f"{rel:9.2e}")
    print("\n## Polyhedral cone error: point mass sliding at angle psi to t1 (theta = 35 deg, mu = 0.5)")
    th = np.radians(35.0)
    exact = G * (np.sin(th) - mu * np.cos(th))
    fig, ax = plt.subplots(figsize=(7, 4))
    print(f"{'n_f':>4} {'max error %':>12} {'bound 1-cos(pi/nf) in friction %':>34}")
    for n_dir in (4, 8, 16):
        psis = np.linspace(0.0, 2 * np.pi / n_dir, 9 if quick else 17)
        accel = np.array([point_on_plane_accel(th, p, mu, n_dir) for p in psis])
        friction_err = (accel - exact) / (G * mu * np.cos(th))   # fraction of the friction force lost
        print(f"{n_dir:4d} {100 * friction_err.max():12.3f} {100 * (1 - np.cos(np.pi / n_dir)):34.3f}")
        ax.plot(np.degrees(psis) * n_dir / 360.0, 100 * friction_err, "o-", label=f"n_f = {n_dir}")
        ax.axhline(100 * (1 - np.cos(np.pi / n_dir)), ls="--", lw=0.8, color=ax.lines[-1].get_color())
    ax.set_xlabel("sliding direction between two cone edges (fraction of 2 pi / n_f)")
    ax.set_ylabel("friction force deficit (% of mu N)")
    ax.set_title("Polyhedral friction cone error (dashed: bound 1 - cos(pi / n_f))")
    ax.legend()
    save(fig, "lcp_cone_error.png")


# ------------------------------------------------------------------------------------------- pendulum
def bench_pendulum(quick, dt):
    """Fig. 2 (12 links, last link height and normal velocity, MC vs RC). Table I: benchmarks/lcp/table1.py."""
    duration = 2.0 if quick else 5.0
    n_fig = 12
    print(f"\n## Multi-link pendulum (section V-E), Fig. 2: {n_fig} links, {duration} s, dt = {dt * 1e3:g} ms, "
          "4 friction directions, e = 0.5 (Table I: benchmarks/lcp/table1.py)")
    mc = pendulum.PendulumSim(n_fig, "minimal", dt=dt).run(duration)
    rc = pendulum.PendulumSim(n_fig, "redundant", dt=dt).run(duration)
    diff = np.abs(mc.height - rc.height)
    for t_end in (1.0, 2.0, duration):
        k = mc.t <= t_end + 1e-12
        print(f"  last link height |MC - RC| up to t = {t_end:g} s: max {diff[k].max():.3f} m, "
              f"median {np.median(diff[k]):.4f} m")
    print(f"  max contacts {max(mc.max_contacts, rc.max_contacts)}, solver failures {mc.failures + rc.failures}")
    fig, axes = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    axes[0].plot(mc.t, mc.height, label="minimal coordinates (MC)")
    axes[0].plot(rc.t, rc.height, "--", label="redundant coordinates (RC)")
    axes[0].set_ylabel("last link height (m)")
    axes[0].legend()
    axes[1].plot(mc.t, mc.vertical_velocity, label="MC")
    axes[1].plot(rc.t, rc.vertical_velocity, "--", label="RC")
    axes[1].set_ylabel("last link normal (vertical) velocity (m/s)")
    axes[1].set_xlabel("t (s)")
    axes[0].set_title(f"{n_fig}-link pendulum (cf. Fig. 2 of Jain et al. 2012), dt = {dt * 1e3:g} ms")
    save(fig, "lcp_pendulum_fig2.png")
    return mc, rc


# ---------------------------------------------------------------------------------------------- lambda
def best_time(fn, repeat=5, number=20):
    """Best of ``repeat`` CPU-time (time.process_time) averages over ``number`` calls, s."""
    best = np.inf
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, (time.process_time() - start) / number)
    return best


def bench_lambda(quick):
    """Lambda = J M^-1 J^T for 4 point contacts (12 rows, contact frames) on a chain of N links, four routes:
    articulated-body columns (12 pin.aba calls, O(N) each), pin.computeMinverse (O(N^2)) + products,
    crba + Cholesky (O(N^3)), and pin.computeDelassusMatrix: the O(N) operational-space recursion of section V
    (articulated inertias tips-to-base, then each contact's propagators along its support; Pinocchio's C++,
    the 4 RigidConstraintModels built inside the timed call as a simulator would each step)."""
    import scipy.linalg
    sizes = (8, 32, 128, 512) if quick else (4, 8, 16, 32, 64, 128, 256, 512)
    print("\n## Cost of Lambda = J M^-1 J^T (4 point contacts = 12 rows) against the number of links N "
          "(CPU time, best of 5)")
    print(f"{'N':>5} {'aba cols (us)':>14} {'computeMinverse (us)':>21} {'crba+Cholesky (us)':>19} "
          f"{'Delassus O(N) (us)':>19} {'rel. diff':>10}")
    rows = []
    frame = pin.SE3(pin.utils.rpyToMatrix(0.3, -0.2, 0.1), np.array([0.1, 0.0, -0.05]))   # contact frame
    for n in sizes:
        model, q, _, _ = pendulum.build_minimal(n)
        q = np.random.default_rng(0).uniform(-1, 1, n)
        zg = model.copy()
        zg.gravity = pin.Motion.Zero()
        d = zg.createData()
        pin.computeJointJacobians(zg, d, q)
        links = [max(1, n // 4), max(1, n // 2), max(1, 3 * n // 4), n]
        J = np.vstack([pin.getFrameJacobian(zg, d, k, frame, pin.LOCAL)[:3] for k in links])
        zero = np.zeros(n)
        X = np.empty((n, 12))

        def by_aba():
            for c in range(12):
                X[:, c] = pin.aba(zg, d, q, zero, J[c])
            return J @ X

        def by_minverse():
            Minv = pin.computeMinverse(zg, d, q)
            Minv = np.triu(Minv) + np.triu(Minv, 1).T
            return J @ Minv @ J.T

        def by_cholesky():
            M = pin.crba(zg, d, q)
            M = np.triu(M) + np.triu(M, 1).T
            return J @ scipy.linalg.cho_solve(scipy.linalg.cho_factor(M), J.T)

        def by_delassus():
            models = pin.StdVec_RigidConstraintModel()
            datas = pin.StdVec_RigidConstraintData()
            for k in links:
                cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, zg, k, frame, pin.ReferenceFrame.LOCAL)
                models.append(cm)
                datas.append(cm.createData())
            return pin.computeDelassusMatrix(zg, d, q, models, datas, 0.0)

        ref = by_cholesky()
        scale = np.linalg.norm(ref)
        diffs = [np.linalg.norm(f() - ref) / scale for f in (by_aba, by_minverse, by_delassus)]
        assert max(diffs) < 1e-6, (n, diffs)
        number = max(2, int(1000 / n))
        ta, tm, tc, td = (best_time(f, number=number) * 1e6 for f in (by_aba, by_minverse, by_cholesky,
                                                                        by_delassus))
        rows.append((n, ta, tm, tc, td))
        print(f"{n:5d} {ta:14.1f} {tm:21.1f} {tc:19.1f} {td:19.1f} {max(diffs):10.1e}")
    arr = np.array(rows)
    big = arr[:, 0] >= 128
    slopes = [np.polyfit(np.log(arr[big, 0]), np.log(arr[big, k]), 1)[0] for k in (1, 2, 3, 4)]
    print(f"log-log slope for N >= 128: aba {slopes[0]:.2f}, computeMinverse {slopes[1]:.2f}, "
          f"crba+Cholesky {slopes[2]:.2f}, Delassus {slopes[3]:.2f}  (1 = linear)")
    for k, name in ((1, "aba columns"), (4, "Delassus recursion")):
        faster = arr[arr[:, k] < arr[:, 2], 0]
        print(f"{name} faster than computeMinverse for N in {faster.astype(int).tolist()}")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.loglog(arr[:, 0], arr[:, 4], "D-", label=f"computeDelassusMatrix, O(N) recursion (slope {slopes[3]:.2f})")
    ax.loglog(arr[:, 0], arr[:, 1], "o-", label=f"aba columns, 12 x O(N) (slope {slopes[0]:.2f})")
    ax.loglog(arr[:, 0], arr[:, 2], "s-", label=f"computeMinverse, O(N^2) (slope {slopes[1]:.2f})")
    ax.loglog(arr[:, 0], arr[:, 3], "^-", label=f"crba + Cholesky (slope {slopes[2]:.2f})")
    ref_n = arr[:, 0]
    ax.loglog(ref_n, arr[-1, 4] * ref_n / ref_n[-1], "k:", lw=0.8, label="linear reference")
    ax.set_xlabel("number of links N")
    ax.set_ylabel("CPU time per Lambda (us)")
    ax.set_title("Lambda for 4 contacts (slopes fitted for N >= 128)")
    ax.legend(fontsize=8)
    save(fig, "lcp_lambda_scaling.png")
    return rows, slopes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shorter runs (smoke test, ~1 min)")
    parser.add_argument("--sections", default="ball,incline,pendulum,lambda")
    parser.add_argument("--dt", type=float, default=1e-3, help="pendulum time step (s), paper 1e-4")
    args = parser.parse_args(argv)
    sections = args.sections.split(",")
    valid = {"ball", "incline", "pendulum", "lambda"}
    unknown = set(sections) - valid
    if unknown:
        parser.error(f"unknown section(s) {sorted(unknown)}; valid sections: {sorted(valid)}")
    start = time.perf_counter()
    if "ball" in sections:
        bench_ball(args.quick)
    if "incline" in sections:
        bench_incline(args.quick)
    if "lambda" in sections:
        bench_lambda(args.quick)
    if "pendulum" in sections:
        bench_pendulum(args.quick, args.dt)
    print(f"\ntotal {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
