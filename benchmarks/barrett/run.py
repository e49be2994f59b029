"""Benchmark: BarrettHand grasp-and-lift (scenario 4's scenes, in-process) and the mass-matrix fix behind it.

    scripts/venv_run.sh python benchmarks/barrett/run.py [--engines tamsi,lagged] [--calls 200]

Table 1 - Pinocchio 4.1 ``crba`` called again on one reused Data (as the simulator does every step) against a
fresh-Data reference over random configurations, default LOCAL vs WORLD convention: max |M error| and CPU us per
call per robot URDF. LOCAL is wrong on the Barrett lift rig (a mimic joint with actuated children below an
actuated joint); the simulator uses WORLD.

Table 2 - the scenario scenes (``scenes/scenario_barrett_{cylinder,box}.yaml``) stepped in-process with the
scenario controller's default profile (close the proximal joints to 1.2 rad in 0.5 s, squeeze 0.3 s, lift the stage
10 cm in 0.6 s, hold 0.4 s; 2 ms step): object rise (m), max object speed (m/s), net contact force per finger at
the end (N), CPU and wall ms per step, real-time factor (sim time / wall time).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pinocchio as pin

from contact_sim_ros.sim.simulator import Simulator

REPO = Path(__file__).resolve().parents[2]
URDFS = ["barrett_lift_rig.urdf", "barrett.urdf", "franka.urdf", "iiwa_wsg.urdf", "allegro.urdf"]
SCENES = [("scenario_barrett_cylinder.yaml", "bottle"), ("scenario_barrett_box.yaml", "box")]
DT = 0.002


def crba_table(calls: int) -> None:
    print(f"crba on a reused Data vs a fresh Data, {calls} random configurations")
    print(f"{'urdf':24s} {'nv':>3s} {'LOCAL max err':>14s} {'LOCAL us':>9s} {'WORLD max err':>14s} {'WORLD us':>9s}")
    for urdf in URDFS:
        m = pin.buildModelFromXML((REPO / "urdf" / urdf).read_text(), mimic=True)
        np.random.seed(1)
        lo, hi = np.maximum(m.lowerPositionLimit, -3.0), np.minimum(m.upperPositionLimit, 3.0)
        qs = [pin.randomConfiguration(m, lo, hi) for _ in range(calls)]
        ref = [np.triu(pin.crba(m, m.createData(), q)) for q in qs]
        row = []
        for conv in (pin.Convention.LOCAL, pin.Convention.WORLD):
            d = m.createData()
            t0 = time.process_time()
            out = [np.triu(pin.crba(m, d, q, conv)) for q in qs]
            cpu = (time.process_time() - t0) / calls * 1e6
            row += [max(float(np.abs(a - b).max()) for a, b in zip(out, ref)), cpu]
        print(f"{urdf:24s} {m.nv:3d} {row[0]:14.2e} {row[1]:9.1f} {row[2]:14.2e} {row[3]:9.1f}")


def smooth(t, t0, duration):
    s = min(1.0, max(0.0, (t - t0) / duration))
    return s * s * (3 - 2 * s)


def grasp(scene_file, obj, engine):
    sim = Simulator(scene_file, engine=engine, time_step=DT)
    m = sim.model
    data = m.pin_model.createData()
    joints = list(m.joint_names)
    start = {j: float(sim.q[m.joint_q_index[m.joint_index(j)]]) for j in joints}
    z0 = sim.body_pose(obj).translation[2]
    vmax, steps = 0.0, 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while sim.t < 1.9 - 1e-9:
        c, s = smooth(sim.t, 0.1, 0.5), smooth(sim.t, 0.9, 0.6)
        pos = dict(start)
        pos.update({f"bh_finger_{f}_proximal_joint": 1.2 * c for f in (1, 2, 3)})
        pos["lift_joint"] = 0.10 * s
        g = pin.computeGeneralizedGravity(m.pin_model, data, sim.q)
        sim.set_joint_targets(positions=pos, efforts={j: float(g[m.joint_v_index[m.joint_index(j)]]) for j in joints})
        if not sim.step().ok:
            break
        steps += 1
        vmax = max(vmax, float(np.linalg.norm(sim.body_velocity(obj)[:3])))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    net = np.zeros((4, 3))
    if sim.contacts is not None:
        for a, b, f in zip(sim.contacts.geometry_a, sim.contacts.geometry_b, sim.contact_forces_world()):
            for gid, sign in ((a, -1.0), (b, 1.0)):
                name = m.geometry_names[gid]
                if name.startswith("bh_finger_"):
                    net[int(name[len("bh_finger_")])] += sign * f
    return (sim.t, sim.body_pose(obj).translation[2] - z0, vmax, np.linalg.norm(net[1:], axis=1),
            cpu / max(steps, 1) * 1e3, wall / max(steps, 1) * 1e3, sim.t / wall)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engines", default="tamsi,lagged")
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    crba_table(args.calls)
    print(f"\nscenario 4 scenes in-process, dt = {DT * 1e3:g} ms, 1.9 s of sim time")
    print(f"{'scene':30s} {'engine':8s} {'t end':>6s} {'rise m':>7s} {'vmax m/s':>9s} {'F1 N':>6s} {'F2 N':>6s} "
          f"{'F3 N':>6s} {'CPU ms/step':>12s} {'wall ms/step':>13s} {'RTF':>5s}")
    for scene_file, obj in SCENES:
        for engine in args.engines.split(","):
            t, rise, vmax, f, cpu, wall, rtf = grasp(scene_file, obj, engine)
            print(f"{scene_file:30s} {engine:8s} {t:6.2f} {rise:7.4f} {vmax:9.3f} {f[0]:6.2f} {f[1]:6.2f} {f[2]:6.2f} "
                  f"{cpu:12.3f} {wall:13.3f} {rtf:5.2f}")


if __name__ == "__main__":
    main()
