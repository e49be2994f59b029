"""Per-step profile of the small scenes (issue 18, item 2): where a step's time goes, and the floor.

    scripts/venv_run.sh python benchmarks/peers/step_profile.py [--scenes box,sphere,iiwa,planar,gripper] [--steps 1000] [--detail]
    scripts/venv_run.sh python benchmarks/peers/step_profile.py --micro     # per-call costs of the small calls

For each scene and engine: a fresh Simulator settles ``--settle`` steps, then ``--steps`` steps run
uninstrumented (CPU time, time.process_time: the true cost per step) and ``--steps`` steps run with every stage
wrapped in time.perf_counter (the library is not edited: module-level ``pin`` of the simulator and the contact
query and the methods of the instances are replaced by timing wrappers in this process only). Each wrapper's
time is exclusive (its wrapped children subtracted) and corrected for the wrappers' own cost (calibrated on a
no-op). The stage shares are then scaled to the uninstrumented CPU time per step (the load on a shared machine
inflates wall time; the shares are what the instrumented run says). Stages:

* kinematics: Pinocchio forwardKinematics, updateFramePlacements, updateGeometryPlacements, computeJointJacobians,
  crba, nonLinearEffects, computeGeneralizedGravity, difference, getFrameJacobian (external forces), integrate;
* contact query: the broad phase (Pinocchio's AABB tree), coal's narrow phase (computeCollision per pair),
  contact patches (computeContactPatch per pair), and the Python loop of ContactQuery.update around them;
* assembly: contact frames, materials and Jacobians (ContactQuery._finish_numba incl. its computeJointJacobians,
  the patch kernel, building the ContactSet);
* engine: the compiled kernels (TAMSI's Newton; ICF's Jacobian compression, Delassus estimate, Newton) and the
  engine's Python around them (StepInputs checks, arrays, StepResult);
* Python overhead: the rest of Simulator.step / _advance (actuation arrays, scripts, damping, limits,
  divergence check, StepReport ...).

The floor: what Pinocchio and coal alone need for the same state, each timed in a loop: one crba, one
nonLinearEffects, forward kinematics + geometry placements, computeJointJacobians + one point Jacobian per
contact (getFrameJacobian, LOCAL_WORLD_ALIGNED), and the filtered geometry query in ONE call
(pin.computeCollisions over the query's filtered pair list, + computeContactPatches).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pinocchio as pin

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from cases import CASES  # noqa: E402

SCENES = {   # name: (scene, dt, engines)
    "box": (CASES["box"].scene, 1e-3, ("tamsi", "lagged")),
    "sphere": (CASES["sphere"].scene, 2e-3, ("tamsi", "lagged")),
    "iiwa": (CASES["iiwa"].scene, 1e-3, ("tamsi", "lagged")),
    "planar": (CASES["planar"].scene, 1e-3, ("tamsi", "lagged")),      # a URDF robot: the generic (staged) path
    "gripper": (ROOT / "scenes" / "tamsi_gripper_mug.yaml", 3e-3, ("tamsi", "lagged")),
}

CATEGORY = {}
for k in ("sim.forwardKinematics", "sim.updateFramePlacements", "sim.updateGeometryPlacements",
          "sim.computeJointJacobians", "sim.crba", "sim.nonLinearEffects", "sim.computeGeneralizedGravity",
          "sim.difference", "sim.getFrameJacobian", "free_motion.integrate", "free_motion.frame_rotation_force"):
    CATEGORY[k] = "kinematics / dynamics (Pinocchio)"
for k in ("cq.updateGeometryPlacements", "cq.broad.update", "cq.computeCollisions", "cq.computeCollision",
          "cq.computeContactPatch"):
    CATEGORY[k] = "contact query (coal / Pinocchio calls)"
CATEGORY["cq.update"] = "contact query (Python loop)"
for k in ("coal.CollisionResult.getContact", "coal.Contact.getNearestPoint1", "coal.Contact.getNearestPoint2",
          "coal.ContactPatchResult.getContactPatch", "coal.ContactPatchResult.numContactPatches",
          "coal.ContactPatch.getPoint", "coal.ContactPatch.size", "coal.Contact.normal",
          "coal.Contact.penetration_depth"):
    CATEGORY[k] = "contact query (coal result accessors)"
for k in ("cq._finish_numba", "cq._finish_numpy", "cq.computeJointJacobians", "cq._patch_contacts_numba",
          "cq.contact_set", "cq.kernels.finish_contacts"):
    CATEGORY[k] = "assembly (frames, Jacobians, ContactSet)"
CATEGORY["engine.step"] = "engine (Python around kernels)"
CATEGORY["engine._do_step"] = "engine (Python around kernels)"
CATEGORY["engine.step_into"] = "engine (Python around kernels)"
CATEGORY["engine._do_step_into"] = "engine (Python around kernels)"
for k in ("kern.newton_step_packed", "kern.icf_step"):
    CATEGORY[k] = "engine (compiled kernels)"
for k in ("sim.step", "sim._advance", "sim._update_kinematics", "sim._apply_scripts", "sim._external_forces",
          "sim._joint_damping", "sim._enforce_joint_limits", "divergence.check"):
    CATEGORY[k] = "Python overhead (Simulator)"
ORDER = ["kinematics / dynamics (Pinocchio)", "contact query (coal / Pinocchio calls)",
         "contact query (coal result accessors)", "contact query (Python loop)", "assembly (frames, Jacobians, ContactSet)", "engine (compiled kernels)",
         "engine (Python around kernels)", "Python overhead (Simulator)"]


class Profiler:
    def __init__(self):
        self.excl = defaultdict(float)
        self.calls = defaultdict(int)
        self.stack = []          # per open wrapper: [child time, child calls]
        self.enabled = False
        self.cost_inner = 0.0    # time a wrapper adds to its parent beyond the wrapped call (s)

    clock = staticmethod(time.process_time)   # CPU time: a preemption on the loaded machine is not counted

    def wrap(self, key, f):
        pc = self.clock
        stack, excl, calls = self.stack, self.excl, self.calls

        def w(*a, **k):
            if not self.enabled:
                return f(*a, **k)
            stack.append([0.0, 0])
            t0 = pc()
            r = f(*a, **k)
            dt = pc() - t0
            child, nchild = stack.pop()
            excl[key] += dt - child - nchild * self.cost_inner
            calls[key] += 1
            if stack:
                stack[-1][0] += dt
                stack[-1][1] += 1
            return r
        return w

    def calibrate(self):
        """The cost one wrapped no-op adds to its parent's exclusive time."""
        noop = lambda: None  # noqa: E731
        inner = self.wrap("_cal_inner", noop)
        outer_body = lambda: [inner() for _ in range(100)]  # noqa: E731
        plain_body = lambda: [noop() for _ in range(100)]   # noqa: E731
        self.enabled = True
        best = []
        for _ in range(50):
            c = self.clock
            t0 = c(); outer_body(); t1 = c(); plain_body(); t2 = c()
            best.append(((t1 - t0) - (t2 - t1)) / 100)
        self.enabled = False
        self.excl.clear(); self.calls.clear()
        self.cost_inner = max(sorted(best)[len(best) // 4], 0.0)


class PinProxy:
    def __init__(self, prof, prefix, names, real_broad=None):
        self._prof, self._wrapped = prof, {}
        for n in names:
            f = getattr(pin, n)
            if n == "computeCollisions":
                g = f
                f = lambda *a, _g=g: _g(*[x.real if isinstance(x, BroadProxy) else x for x in a])  # noqa: E731
            self._wrapped[n] = prof.wrap(f"{prefix}.{n}", f)

    def __getattr__(self, n):
        w = self.__dict__["_wrapped"].get(n)
        return w if w is not None else getattr(pin, n)


class BroadProxy:
    def __init__(self, prof, real):
        self.real = real
        self.update = prof.wrap("cq.broad.update", real.update)


class KernelProxy:
    def __init__(self, prof, module, names):
        self._m = module
        self._w = {n: prof.wrap(f"kern.{n}", getattr(module, n)) for n in names if hasattr(module, n)}

    def __getattr__(self, n):
        w = self.__dict__["_w"].get(n)
        return w if w is not None else getattr(self.__dict__["_m"], n)


_COAL_WRAPPED = []


def instrument_coal(prof):
    """coal's result accessors (class attributes: methods and the Contact properties), once per process."""
    if _COAL_WRAPPED:
        return
    import coal
    for cls, names in ((coal.CollisionResult, ["getContact"]), (coal.Contact, ["getNearestPoint1",
                        "getNearestPoint2"]), (coal.ContactPatchResult, ["getContactPatch", "numContactPatches"]),
                       (coal.ContactPatch, ["getPoint", "size"])):
        for n in names:
            setattr(cls, n, prof.wrap(f"coal.{cls.__name__}.{n}", getattr(cls, n)))
    for n in ("normal", "penetration_depth"):
        prop = coal.Contact.__dict__[n]
        setattr(coal.Contact, n, property(prof.wrap(f"coal.Contact.{n}", prop.fget)))
    _COAL_WRAPPED.append(True)


def instrument(sim, prof):
    instrument_coal(prof)
    import contact_sim_ros.engines.lagged as lagged_mod
    import contact_sim_ros.geometry.contact_query as cq_mod
    import contact_sim_ros.sim.simulator as sim_mod
    sim_mod.pin = PinProxy(prof, "sim", ["forwardKinematics", "updateFramePlacements", "updateGeometryPlacements",
                                         "computeJointJacobians", "crba", "nonLinearEffects",
                                         "computeGeneralizedGravity", "difference", "getFrameJacobian"])
    cq_mod.pin = PinProxy(prof, "cq", ["updateGeometryPlacements", "computeCollisions", "computeCollision",
                                       "computeContactPatch", "computeJointJacobians"])
    q = sim.contact_query
    if q._broad is not None:
        q._broad = BroadProxy(prof, q._broad)
    for name in ("update", "_finish_numba", "_finish_numpy", "_patch_contacts_numba", "contact_set"):
        setattr(q, name, prof.wrap(f"cq.{name}", getattr(q, name)))
    e = sim.engine
    for name in ("step", "_do_step", "step_into", "_do_step_into"):
        if hasattr(e, name):
            setattr(e, name, prof.wrap(f"engine.{name}", getattr(e, name)))
    if getattr(e, "_kernels", None) is not None:
        e._kernels = KernelProxy(prof, e._kernels, ["newton_step_packed"])
    lagged_mod.icf_kernels = KernelProxy(prof, lagged_mod.icf_kernels, ["icf_step"])
    fm = sim._free_motion
    for name in ("integrate", "frame_rotation_force"):
        setattr(fm, name, prof.wrap(f"free_motion.{name}", getattr(fm, name)))
    if sim._divergence:
        sim._divergence.check = prof.wrap("divergence.check", sim._divergence.check)
    for name in ("step", "_advance", "_update_kinematics", "_apply_scripts", "_external_forces", "_joint_damping",
                 "_enforce_joint_limits"):
        setattr(sim, name, prof.wrap(f"sim.{name}", getattr(sim, name)))


def timeit(f, n=2000):
    best = []
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(n):
            f()
        best.append((time.process_time() - t0) / n)
    return min(best) * 1e6


def floor(sim) -> dict:
    """Pinocchio and coal alone at the simulator's current state (us, best of 5 loops, CPU time)."""
    pm, data = sim._pm, pin.Data(sim._pm)
    q, v = sim.q.copy(), sim.v.copy()
    cq = sim.contact_query
    gm = cq._gm
    gd = pin.GeometryData(gm)
    for k in range(len(gm.collisionPairs)):
        r0, r = cq._gd.collisionRequests[k], gd.collisionRequests[k]
        r.enable_contact, r.num_max_contacts = True, 1
        r.security_margin, r.distance_upper_bound = r0.security_margin, r0.distance_upper_bound
    out = {}
    out["crba"] = timeit(lambda: pin.crba(pm, data, q))
    out["nonLinearEffects"] = timeit(lambda: pin.nonLinearEffects(pm, data, q, v))
    out["FK + geometry placements"] = timeit(lambda: (pin.forwardKinematics(pm, data, q, v),
                                                      pin.updateGeometryPlacements(pm, data, gm, gd)))
    pin.forwardKinematics(pm, data, q, v)
    pin.updateGeometryPlacements(pm, data, gm, gd)
    c = sim.contacts
    n = c.size if c is not None else 0
    joints = [int(j) for j in (list(c.joint_b[:n]) + list(c.joint_a[:n])) if j > 0] if n else []
    pts = [pin.SE3(np.eye(3), np.zeros(3))] * len(joints)

    def jac():
        pin.computeJointJacobians(pm, data, q)
        for j, p in zip(joints, pts):
            pin.getFrameJacobian(pm, data, j, p, pin.LOCAL_WORLD_ALIGNED)
    out[f"joint Jacobians + {len(joints)} point Jacobians"] = timeit(jac)
    out[f"geometry query, {len(gm.collisionPairs)} filtered pairs, one call"] = timeit(
        lambda: pin.computeCollisions(gm, gd, False))
    out["  + contact patches, one call"] = timeit(lambda: (pin.computeCollisions(gm, gd, False),
                                                           pin.computeContactPatches(gm, gd))) - \
        out[f"geometry query, {len(gm.collisionPairs)} filtered pairs, one call"]
    out["sum (floor)"] = sum(v for k, v in out.items())
    return out, n, len(gm.collisionPairs)


PROF = Profiler()


def micro(scene, dt, engine, settle):
    """Per-call CPU cost (us, best of 5 loops) of the small calls one step makes, at a settled state: the
    cross-check of the instrumented shares (a wrapper costs about as much as the smallest of these calls)."""
    from contact_sim_ros.engines.base import StepInputs
    from contact_sim_ros.sim.simulator import Simulator
    sim = Simulator(str(scene), engine=engine, time_step=dt)
    for _ in range(settle):
        sim.step(strict=True)
    cq = sim.contact_query
    gm, gd = cq._gm, cq._gd
    cq.update(sim.pin_data, sim.geometry_data)
    k = next((int(i) for i in range(len(gm.collisionPairs))
              if pin.computeCollision(gm, gd, i) and cq._collision_results[i].numContacts() > 0), None)
    if k is not None:
        pin.computeContactPatch(gm, gd, k)
        res = cq._collision_results[k]
        c = res.getContact(0)
        patch = cq._patch_results[k].getContactPatch(0)
    pm, data = sim._pm, sim.pin_data
    q, v = sim.q, sim.v
    n = sim.contacts.size if sim.contacts is not None else 0
    M = pin.crba(pm, data, q)
    out = {} if k is None else {
        "pin.computeCollision (one pair)": timeit(lambda: pin.computeCollision(gm, gd, k)),
        "pin.computeContactPatch (one pair)": timeit(lambda: pin.computeContactPatch(gm, gd, k)),
        "CollisionResult.getContact(0)": timeit(lambda: res.getContact(0)),
        "Contact.normal (numpy copy)": timeit(lambda: c.normal),
        "Contact.getNearestPoint1()": timeit(lambda: c.getNearestPoint1()),
        "Contact.penetration_depth": timeit(lambda: c.penetration_depth),
        "ContactPatch.getPoint(0)": timeit(lambda: patch.getPoint(0)),
    }
    out |= {
        "ContactQuery.update (whole query)": timeit(lambda: cq.update(data, sim.geometry_data), 500),
        "Simulator._update_kinematics": timeit(sim._update_kinematics, 500),
        "pin.crba + nonLinearEffects + gravity": timeit(lambda: (pin.crba(pm, data, q, pin.Convention.WORLD),
                                                                 pin.nonLinearEffects(pm, data, q, v),
                                                                 pin.computeGeneralizedGravity(pm, data, q))),
        "Simulator._external_forces": timeit(lambda: sim._external_forces(sim.t), 500),
        "Simulator._apply_scripts": timeit(lambda: sim._apply_scripts(sim.t), 500),
        "np.where(mask, a, 0.0) (nv)": timeit(lambda: np.where(sim.data.position_mode, sim.data.kp, 0.0)),
        "pin.difference (q, q_target)": timeit(lambda: pin.difference(pm, q, sim.data.q_target)),
        "divergence check": timeit(lambda: sim._divergence.check(q, v, M, 0.0)) if sim._divergence else 0.0,
        "free_motion.integrate": timeit(lambda: sim._free_motion.integrate(q, v, dt)),
        "engine.step (whole engine)": timeit(lambda: sim.engine.step(StepInputs(
            sim.t, dt, q, v, M, np.zeros(len(v)), np.zeros(len(v)), sim._joint_damping(v), sim._actuation,
            sim.contacts if sim.contacts is not None else cq.update(data, sim.geometry_data))), 500),
        "Simulator.step (whole step)": timeit(lambda: sim.step(strict=True), 500),
    }
    return out, n


def run(scene, dt, engine, settle, steps):
    from contact_sim_ros.sim.simulator import Simulator
    import contact_sim_ros.engines.lagged as lagged_mod
    import contact_sim_ros.geometry.contact_query as cq_mod
    import contact_sim_ros.sim.simulator as sim_mod
    sim_mod.pin = cq_mod.pin = pin                 # undo a previous case's proxies
    icf = getattr(lagged_mod.icf_kernels, "_m", lagged_mod.icf_kernels)
    lagged_mod.icf_kernels = icf
    sim = Simulator(str(scene), engine=engine, time_step=dt)
    for _ in range(settle):
        sim.step(strict=True)
    t0 = time.process_time()
    for _ in range(steps):
        sim.step(strict=True)
    cpu_us = (time.process_time() - t0) / steps * 1e6
    prof = PROF
    prof.excl.clear(); prof.calls.clear()
    if not prof.cost_inner:
        prof.calibrate()
    instrument(sim, prof)
    prof.enabled = True
    w0 = time.process_time()
    for _ in range(steps):
        sim.step(strict=True)
    wall_instr = (time.process_time() - w0) / steps * 1e6
    prof.enabled = False
    fl, ncontacts, npairs = floor(sim)
    per_key = {k: prof.excl[k] / steps * 1e6 for k in prof.excl}
    calls = {k: prof.calls[k] / steps for k in prof.calls}
    return cpu_us, wall_instr, per_key, calls, fl, ncontacts, npairs, prof.cost_inner * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenes", default=",".join(SCENES))
    ap.add_argument("--engines", default=None)
    ap.add_argument("--settle", type=int, default=200)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--detail", action="store_true", help="also every wrapped call (us/step, calls/step)")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="the wrappers' clock: process_time (default) or perf_counter")
    ap.add_argument("--micro", action="store_true", help="only the per-call costs of the small calls")
    a = ap.parse_args()
    if a.micro:
        for name in a.scenes.split(","):
            scene, dt, engines = SCENES[name]
            for engine in (a.engines.split(",") if a.engines else engines):
                out, n = micro(scene, dt, engine, a.settle)
                print(f"\n## {name}, {engine} ({n} contacts): per-call CPU us (best of 5 loops)")
                print(" | ".join(f"{k} {v:.2f}" for k, v in out.items()))
        return
    if a.clock == "wall":
        Profiler.clock = staticmethod(time.perf_counter)
    print(f"[profile] {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; load average "
          f"{Path('/proc/loadavg').read_text().split()[:3]}")
    for name in a.scenes.split(","):
        scene, dt, engines = SCENES[name]
        for engine in (a.engines.split(",") if a.engines else engines):
            cpu_us, wall_instr, per_key, calls, fl, nc, npairs, cost = run(scene, dt, engine, a.settle, a.steps)
            cats = defaultdict(float)
            ncalls = defaultdict(float)
            for k, v in per_key.items():
                cats[CATEGORY.get(k, "Python overhead (Simulator)")] += v
                ncalls[CATEGORY.get(k, "Python overhead (Simulator)")] += calls[k]
            total = sum(cats.values())
            print(f"\n## {name} ({Path(scene).name}, dt {dt * 1e3:g} ms), {engine}: {nc} contacts, {npairs} "
                  f"filtered pairs; uninstrumented {cpu_us:.1f} us/step CPU; instrumented {wall_instr:.1f} "
                  f"us/step CPU (wrapper cost {cost:.2f} us/call removed)")
            print("| stage | us/step (scaled to CPU) | share | wrapped calls/step |")
            print("| --- | --- | --- | --- |")
            for c in ORDER:
                print(f"| {c} | {cats[c] / total * cpu_us:.1f} | {cats[c] / total * 100:.0f} % | "
                      f"{ncalls[c]:.0f} |")
            print(f"| total | {cpu_us:.1f} | 100 % | {sum(ncalls.values()):.0f} |")
            print("floor (Pinocchio + coal alone, us CPU): " + "; ".join(f"{k} {v:.1f}" for k, v in fl.items()))
            if a.detail:
                for k in sorted(per_key, key=lambda k: -per_key[k]):
                    print(f"    {k:34s} {per_key[k] / total * cpu_us:7.2f} us/step  {calls[k]:6.1f} calls/step")


if __name__ == "__main__":
    main()
