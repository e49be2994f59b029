"""Contact query cost: Panda (example-robot-data panda.urdf, meshes as convex hulls) grasping a free cylinder
standing on a table.

    python benchmarks/contact_query/run.py [--repeats 30] [--out benchmarks/contact_query]

Prints microseconds per ``ContactQuery.update`` (median over repeats of blocks of calls; includes geometry
placements, broad phase, narrow phase, contact patches with per-point depths, frames, Jacobians, materials)
for several candidate-pair sets, with and without the broad phase, and both Jacobian constructions; saves a
bar plot ``contact_query.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import os
import sys
import time
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from contact_sim_ros.geometry.contact_query import ContactQuery  # noqa: E402
from contact_sim_ros.sim.scene import load_scene  # noqa: E402


def example_robot_data_share() -> str:
    for base in sys.path:
        cand = glob.glob(os.path.join(base, "cmeel.prefix", "share"))
        if cand and os.path.isdir(os.path.join(cand[0], "example-robot-data")):
            return cand[0]
    raise SystemExit("example-robot-data not found (pip install example-robot-data)")


def panda_scene(srdf_filter: bool):
    share = example_robot_data_share()
    desc = os.path.join(share, "example-robot-data", "robots", "panda_description")
    disabled = []
    if srdf_filter:
        robot_links = {f"panda_link{i}" for i in range(8)} | {"panda_hand", "panda_leftfinger", "panda_rightfinger"}
        for e in ET.parse(os.path.join(desc, "srdf", "panda.srdf")).getroot().iter("disable_collisions"):
            a, b = e.get("link1"), e.get("link2")
            if a in robot_links and b in robot_links:
                disabled.append([a, b])
    return load_scene({
        "robot": {"urdf": os.path.join(desc, "urdf", "panda.urdf"), "package_dirs": [share]},
        "objects": [{"name": "can", "shape": {"cylinder": [0.0305, 0.12]}, "mass": 0.3,
                     "pose": {"xyz": [0.5, 0.0, 0.0595]}}],
        "environment": [{"name": "table", "shape": {"box": [1.2, 1.0, 0.1]}, "pose": {"xyz": [0.4, 0.0, -0.05]}}],
        "disabled_collisions": disabled,
        "contact_margin": 0.01,
    })


def grasp_configuration(scene) -> np.ndarray:
    """Hand pointing down, tool centre 0.10 m above the table at x = 0.5 (IK), fingers 0.03 m open."""
    m = scene.model
    pm = m.pin_model
    data = pm.createData()
    fid = pm.getFrameId("panda_hand_tcp")
    target = pin.SE3(np.diag([1.0, -1.0, -1.0]), np.array([0.5, 0.0, 0.10]))
    q = scene.q0.copy()
    q[:7] = [0.0, 0.2, 0.0, -2.4, 0.0, 2.6, 0.785]
    for _ in range(100):
        pin.forwardKinematics(pm, data, q)
        pin.updateFramePlacements(pm, data)
        err = pin.log6(data.oMf[fid].actInv(target)).vector
        if np.linalg.norm(err) < 1e-12:
            break
        jac = pin.computeFrameJacobian(pm, data, q, fid, pin.LOCAL)[:, :7]
        q[:7] += jac.T @ np.linalg.solve(jac @ jac.T + 1e-12 * np.eye(6), err)
    q[m.joint_q_index[m.joint_index("panda_finger_joint1")]] = 0.03
    return q


def all_pairs(model) -> np.ndarray:
    joints = model.geometry_parent_joint
    g = len(joints)
    return np.array([(a, b) for a in range(g) for b in range(a + 1, g)
                     if joints[a] != joints[b] and not (joints[a] == 0 and joints[b] == 0)], dtype=int)


def object_pairs(model) -> np.ndarray:
    """Only robot x {can, table} and can x table: no robot self-collision."""
    names = model.geometry_names
    env = {names.index("can"), names.index("table")}
    return np.array([p for p in model.collision_pairs if p[0] in env or p[1] in env], dtype=int)


def time_update(cq, data, repeats: int) -> tuple[float, float]:
    """(CPU, wall) microseconds per update: medians over ``repeats`` blocks of ~20 ms. CPU time
    (time.process_time) does not count time the process spends descheduled on a shared machine."""
    t0 = time.perf_counter()
    cq.update(data)
    block = max(1, min(200, int(0.02 / max(time.perf_counter() - t0, 1e-6))))
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(block):
            cq.update(data)
        cpu.append((time.process_time() - c0) / block)
        wall.append((time.perf_counter() - w0) / block)
    return float(np.median(cpu) * 1e6), float(np.median(wall) * 1e6)


def _cpu_us(fn, repeats: int, block: int = 20) -> float:
    fn()
    per = []
    for _ in range(repeats):
        t0 = time.process_time()
        for _ in range(block):
            fn()
        per.append((time.process_time() - t0) / block)
    return float(np.median(per) * 1e6)


def stage_breakdown(model, data, repeats: int) -> None:
    """Where the time of one grasp query goes (CPU us, medians): coal calls, line casts, frames, Jacobians."""
    from contact_sim_ros.geometry.contact_query import contact_frames
    cq = ContactQuery(model, 0.01, kernel="numpy")           # the stages of the readable numpy path
    cs = cq.update(data)
    captured = {}
    witnesses = cq._patch_witnesses

    def spy(*args):
        captured["args"] = args
        return witnesses(*args)
    cq._patch_witnesses = spy
    cq.update(data)
    cq._patch_witnesses = witnesses
    pm, gm, gd = model.pin_model, cq._gm, cq._gd
    fast = ContactQuery(model, 0.01)

    def coal_loop():
        pin.updateGeometryPlacements(pm, data, gm, gd)
        cq._broad.update(False)
        pin.computeCollisions(cq._broad, cq._collect)
        for k in cq._always_pairs + list(cq._collect.pair_indexes):
            if pin.computeCollision(gm, gd, k):
                contact = gd.collisionResults[k].getContact(0)
                _ = contact.normal, contact.penetration_depth
                pin.computeContactPatch(gm, gd, k)
                patch = gd.contactPatchResults[k].getContactPatch(0)
                _ = [patch.getPoint(i) for i in range(patch.size())]
    n = cs.size
    ja, jb, point, rot, normal = (x.copy() for x in (cs.joint_a, cs.joint_b, cs.point, cs.rotation, cs.normal))
    out = np.zeros((n, 3, model.nv))
    stages = [
        ("whole update (numpy kernel)", lambda: cq.update(data)),
        ("whole update (numba kernel)", lambda: fast.update(data)),
        ("placements + broad + narrow phase + patches (coal)", coal_loop),
        (f"per-point depths: line casts of {len(captured['args'][0])} patch points",
         lambda: witnesses(*captured["args"])),
        ("contact frames", lambda: contact_frames(normal, out=rot)),
        ("Jacobians, vectorized (+ computeJointJacobians)",
         lambda: (pin.computeJointJacobians(pm, data), cq._jacobian_vectorized(data, ja, jb, point, rot, out))),
        ("Jacobians, getFrameJacobian per point",
         lambda: (pin.computeJointJacobians(pm, data), cq._jacobian_frame(data, ja, jb, point, rot, out))),
    ]
    print(f"\nstage breakdown, loader + SRDF pairs, grasp ({n} contacts): CPU us (median)")
    for label, fn in stages:
        print(f"  {label:58s} {_cpu_us(fn, repeats):8.1f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = parser.parse_args(argv)

    base = panda_scene(srdf_filter=False)
    srdf = panda_scene(srdf_filter=True)
    q = grasp_configuration(base)
    model = base.model
    pair_sets = {
        "all (different bodies)": dataclasses.replace(model, collision_pairs=all_pairs(model)),
        "loader (- parent/child)": model,
        "loader + SRDF": srdf.model,
        "robot x objects only": dataclasses.replace(model, collision_pairs=object_pairs(model)),
    }
    data = model.pin_model.createData()
    pin.forwardKinematics(model.pin_model, data, q)
    q_free = q.copy()
    q_free[model.free_body("can").q_slice][:3] += [0.3, 0.3, 0.5]     # can in the air, away from the hand
    data_free = model.pin_model.createData()
    pin.forwardKinematics(model.pin_model, data_free, q_free)

    rows = []
    for label, mdl in pair_sets.items():
        for broad_phase in (True, False):
            for jac in ("vectorized", "frame"):
                cq = ContactQuery(mdl, 0.01, broad_phase=broad_phase, jacobian=jac)
                cpu, wall = time_update(cq, data, args.repeats)
                cs = cq.update(data)
                pairs = sorted({(mdl.geometry_names[a], mdl.geometry_names[b])
                                for a, b in zip(cs.geometry_a, cs.geometry_b)})
                rows.append((label, len(mdl.collision_pairs), broad_phase, jac, cpu, wall,
                             cq.stats["candidate_pairs"], cq.stats["colliding_pairs"], cs.size))
        for broad_phase in (True, False):
            cq = ContactQuery(mdl, 0.01, broad_phase=broad_phase)
            rows.append((label + " [can lifted]", len(mdl.collision_pairs), broad_phase, "vectorized",
                         *time_update(cq, data_free, args.repeats), cq.stats["candidate_pairs"],
                         cq.stats["colliding_pairs"], cq.update(data_free).size))

    print(f"Panda + table + free cylinder: {len(model.geometry_names)} geometries, nv = {model.nv}, "
          f"margin 0.01 m")
    print("contact pairs in the grasp: " + ", ".join(f"{a}-{b}" for a, b in pairs))
    head = f"{'pair set':36s} {'P':>4s} {'broad':>6s} {'jacobian':>10s} {'cpu us':>8s} {'wall us':>8s} " \
           f"{'cand.':>6s} {'pairs':>6s} {'contacts':>8s}"
    print(head)
    print("-" * len(head))
    for label, p, bp, jac, cpu, wall, cand, coll, n in rows:
        print(f"{label:36s} {p:4d} {str(bp):>6s} {jac:>10s} {cpu:8.1f} {wall:8.1f} {cand:6d} {coll:6d} {n:8d}")
    print("cand. = pairs sent to the narrow phase, pairs = pairs within the margin, contacts = points; "
          "us = median per update")

    stage_breakdown(srdf.model, data, args.repeats)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(11, 0.28 * len(rows) + 1.5))
    labels = [f"{r[0]}, P={r[1]}, {'BP' if r[2] else 'no BP'}, {r[3]}" for r in rows]
    colors = ["tab:blue" if r[2] else "tab:orange" for r in rows]
    ax.barh(range(len(rows)), [r[4] for r in rows], color=colors)
    ax.set_xscale("log")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("CPU microseconds per ContactQuery.update (median, log scale)")
    ax.set_title("Contact query, Panda grasping a cylinder on a table (blue: AABB broad phase)")
    fig.tight_layout()
    path = os.path.join(args.out, "contact_query.png")
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")
    return rows


if __name__ == "__main__":
    main()
