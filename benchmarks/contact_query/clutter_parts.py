"""The clutter's contact query in parts (issue 45): scenes/icf_clutter.yaml stepped 500 steps (Similar, dt 2 ms), its
states every 5 steps recorded; then on a fresh query (its placements read from ``pin_data.oMi``):

    PYTHONPATH=<tree> python benchmarks/contact_query/clutter_parts.py time [--calls 30]
    PYTHONPATH=<tree> python benchmarks/contact_query/clutter_parts.py hash OUT.json

``time``: CPU us per call, averaged over every 4th state (25), ``calls`` calls each: the staged
``ContactQuery.update``, the compiled pass (``contact_pass_kernels.coal_contact_pass``, what a compiled whole step
calls) and, called alone on the pass's buffers in a compiled loop, its kernels: the narrow phase (narrow_phase.cpp:
geometry placements, broad phase, coal's tests and patches), ``sphere_primitive_raw``, ``box_halfspace_contacts``
and ``finish_contacts`` (of the state's contacts). Prints one JSON line.
``hash``: SHA-256 of every ContactSet field and the stats of ``update`` and of the pass at the 100 states, written
to OUT.json (two trees give the same hashes when their contacts are bit-identical). PYTHONPATH picks the tree, so
that main and a branch are alternated with the same script.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import time
from pathlib import Path

import numpy as np
import pinocchio as pin
from numba import njit

from contact_sim_ros.address_table import float_view1 as f1, float_view2 as f2, float_view3 as f3
from contact_sim_ros.address_table import int_view1 as i1, int_view2 as i2
from contact_sim_ros.geometry import contact_kernels as ck, contact_pass_kernels as K
from contact_sim_ros.geometry.contact_query import ContactQuery
from contact_sim_ros.sim.simulator import Simulator

SCENE = Path(__file__).resolve().parents[2] / "scenes" / "icf_clutter.yaml"


@njit
def _pass(t, J, q, calls):
    s = 0
    for _ in range(calls):
        s += K.coal_contact_pass(t, J, q, True)[0]
    return s


@njit
def _narrow(t, calls):
    ints, s = i1(t, K.P_INTS), 0
    for _ in range(calls):
        s += K.narrow_phase(ints[K.I_NARROW_FN], ints[K.I_NARROW_HANDLE], i1(t, K.P_WITHIN), ints[K.I_N_ALWAYS],
                            i1(t, K.P_COUNTS), True)
    return s


@njit
def _sphere_pairs(t, calls):
    s = 0
    for _ in range(calls):
        s += ck.sphere_primitive_raw(f3(t, K.P_PLACEMENT), i2(t, K.P_SP_INT), f2(t, K.P_SP_FLOAT),
                                     f1(t, K.P_SCALARS)[K.S_MARGIN], i1(t, K.P_PAIR_OUT), f3(t, K.P_RAW), 0)
    return s


@njit
def _box_ground(t, calls):
    sc, s = f1(t, K.P_SCALARS), 0
    for _ in range(calls):
        r, _ = ck.box_halfspace_contacts(
            f3(t, K.P_PLACEMENT), i2(t, K.P_BH_INT), f2(t, K.P_BH_FLOAT), sc[K.S_MARGIN], sc[K.S_PATCH_TOLERANCE],
            i1(t, K.P_PAIR_OUT), f3(t, K.P_RAW), 0, i1(t, K.P_B_PAIR), i1(t, K.P_B_START), f2(t, K.P_B_MID),
            f2(t, K.P_B_NORMAL), f1(t, K.P_B_DEPTH), f2(t, K.P_B_WA), f2(t, K.P_B_WB), i2(t, K.P_B_GEOMETRY),
            f3(t, K.P_B_PLACEMENT), f2(t, K.P_BH_WORK), i2(t, K.P_BH_IWORK))
        s += r
    return s


@njit
def _finish(t, J, rows, calls):
    s = 0
    for _ in range(calls):
        s += ck.finish_contacts(
            i1(t, K.P_MR_PAIR)[:rows], f2(t, K.P_MR_A)[:rows], f2(t, K.P_MR_B)[:rows], f2(t, K.P_MR_N)[:rows],
            f1(t, K.P_SCALARS)[K.S_MARGIN], i2(t, K.P_PAIR_IDS), f2(t, K.P_PAIR_MATERIAL), J, i1(t, K.P_JOINT_COLUMNS),
            i1(t, K.P_COLUMN_DOF), i2(t, K.P_IDS), f2(t, K.P_POINT), f2(t, K.P_NORMAL), f1(t, K.P_PHI),
            f3(t, K.P_ROTATION), f2(t, K.P_JACOBIAN), f2(t, K.P_MATERIAL), f2(t, K.P_REL), i2(t, K.P_COLUMNS))
    return s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("time", "hash"))
    ap.add_argument("out", nargs="?")
    ap.add_argument("--calls", type=int, default=30)
    a = ap.parse_args()
    sim = Simulator(str(SCENE), engine="similar", time_step=2e-3)
    states = []
    for i in range(500):
        sim.step()
        if i % 5 == 0:
            states.append(sim.q.copy())
    pm, model, margin = sim.model.pin_model, sim.model, sim.scene.contact_margin
    staged, compiled = (ContactQuery(model, margin, broad_phase="auto") for _ in range(2))
    pd, pd_pass = pin.Data(pm), pin.Data(pm)
    cp = compiled.compiled_coal_pass(pd_pass)

    def kinematics(data, q):
        pin.forwardKinematics(pm, data, q)
        pin.computeJointJacobians(pm, data)

    def run_pass(q):
        placement = compiled.analytic_placements
        for slot, joint in compiled.analytic_joint_slots:
            placement[slot] = pd_pass.oMi[joint].homogeneous
        return K.coal_contact_pass(cp.table, pd_pass.J, q, True)

    if a.mode == "hash":
        h_update, h_pass = hashlib.sha256(), hashlib.sha256()
        for q in states:
            kinematics(pd, q)
            kinematics(pd_pass, q)
            found = staged.update(pd, None, None, joint_jacobians=True, q=q)
            n, colliding, candidates = run_pass(q)
            for h, cs in ((h_update, found), (h_pass, compiled.contact_set(n))):
                for f in dataclasses.fields(cs):
                    if getattr(cs, f.name) is not None:
                        h.update(np.ascontiguousarray(getattr(cs, f.name)).tobytes())
            h_update.update(json.dumps(staged.stats, sort_keys=True).encode())
            h_pass.update(repr((n, colliding, candidates)).encode())
        result = {"update": h_update.hexdigest(), "pass": h_pass.hexdigest()}
        Path(a.out).write_text(json.dumps(result))
        print(json.dumps(result))
        return
    total: dict[str, float] = {}
    for q in states[::4]:
        kinematics(pd, q)
        kinematics(pd_pass, q)
        staged.update(pd, None, None, joint_jacobians=True, q=q)
        n = run_pass(q)[0]
        c0 = time.process_time()
        for _ in range(a.calls):
            staged.update(pd, None, None, joint_jacobians=True, q=q)
        total["update"] = total.get("update", 0.0) + time.process_time() - c0
        t, J = cp.table, pd_pass.J
        for name, f, args in (("pass", _pass, (t, J, q)), ("narrow_phase", _narrow, (t,)),
                              ("sphere_primitive_raw", _sphere_pairs, (t,)), ("box_halfspace", _box_ground, (t,)),
                              ("finish_contacts", _finish, (t, J, n))):
            f(*args, 1)
            c0 = time.process_time()
            f(*args, a.calls)
            total[name] = total.get(name, 0.0) + time.process_time() - c0
    print(json.dumps({k: round(v / a.calls / len(states[::4]) * 1e6, 2) for k, v in total.items()}))


if __name__ == "__main__":
    main()
