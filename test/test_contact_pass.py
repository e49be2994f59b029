"""The contact query's update with coal's pairs in one compiled call (geometry/contact_pass_kernels.py: coal's
narrow phase through narrow_phase.cpp's C entry point, then the merge, the patches and the finish in numba)
against ContactQuery.update's staged path, bit for bit, on scenes whose contacts are coal's: the UR5 + 20 objects
(box-box pairs beside the analytic sphere / box-ground ones), the campaign's bottle standing on the ground (a
cylinder patch), the iiwa + WSG with a box on a table, and the Allegro hand closing on the mug (mesh patches)."""

import dataclasses
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from contact_sim_ros.errors import ConfigError
from contact_sim_ros.geometry import contact_pass_kernels
from contact_sim_ros.geometry.contact_query import ContactQuery
from contact_sim_ros.native_build import NARROW_PHASE
from contact_sim_ros.sim.simulator import Simulator

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def narrow_phase_built():
    """The project's set-up builds narrow_phase.cpp: a test of its compiled pass fails without it, not skips."""
    assert NARROW_PHASE.load() is not None, "narrow_phase.cpp is not built (python -m contact_sim_ros.jit)"

ROOT = Path(__file__).resolve().parents[1]
SCENES = {"ur5_objects": (ROOT / "benchmarks" / "peers" / "scenes" / "ur5_objects.yaml", 300),
          "bottle": (ROOT / "scenes" / "scenario_pick_shake_place.yaml", 300),
          "iiwa_box": (ROOT / "scenes" / "quasistatic_iiwa_box.yaml", 300),
          "allegro": (ROOT / "scenes" / "iiwa_allegro_mug.yaml", 1500)}


def _copy(found):
    """Every field of a ContactSet, copied (the query's buffers are overwritten by the next update)."""
    return {f.name: np.array(getattr(found, f.name)) for f in dataclasses.fields(found)}


def _staged(cq, pd, q):
    found = cq.update(pd, None, None, joint_jacobians=True, q=q)
    return found.size, dict(cq.stats), _copy(found)


def _compiled(cq, pd, coal_pass, q, bounds):
    placement = cq.analytic_placements
    for slot, joint in cq.analytic_joint_slots:
        placement[slot] = pd.oMi[joint].homogeneous
    n, colliding, candidates = contact_pass_kernels.coal_contact_pass(coal_pass.table, np.array(pd.J), q,
                                                                      bounds)
    return n, colliding, candidates


@pytest.mark.parametrize("bounds", [False, True], ids=["all_pairs", "bounds"])
@pytest.mark.parametrize("scene", sorted(SCENES))
def test_the_compiled_pass_equals_the_staged_update_bit_for_bit(scene, bounds):
    """Along a staged trajectory (objects settling on the ground and on each other, the bottle standing, the hand
    closing on the mug), every 10th step: the compiled pass's contacts (ids, points, normals, distances, frames,
    materials, Jacobian columns, Jacobians, zero bias) and stats equal update's at the same kinematics, bit for
    bit, with both one-point and patch rows among them; without q (every pair to coal) and with q (update's
    bounding-volume tests and their wait count, in the compiled pass too)."""
    path, steps = SCENES[scene]
    # coal's results depend on its history (warm starts): two simulators stepped alike, one queried by update,
    # the other by the compiled pass at the same states, so coal has seen the same calls in both
    staged, fused = Simulator(path, engine="tamsi"), Simulator(path, engine="tamsi")
    staged._tree = fused._tree = None                 # the staged step along both trajectories
    staged.contact_query.compiled_update = False      # the reference: update's staged steps, never the pass
    cq, pd, pm = fused.contact_query, fused.pin_data, fused.step_parts.pin_model
    coal_pass = cq.compiled_coal_pass(pd)
    compared = contacts = patches = 0
    for k in range(steps):
        staged.step()
        fused.step()
        assert staged.q.tobytes() == fused.q.tobytes()
        if k % 10:
            continue
        for sim in (staged, fused):
            pin.forwardKinematics(pm, sim.pin_data, sim.q, sim.v)
            pin.computeJointJacobians(pm, sim.pin_data)
        n_ref, stats, ref = _staged(staged.contact_query, staged.pin_data, staged.q if bounds else None)
        if not coal_pass.current():
            coal_pass = cq.compiled_coal_pass(pd)
        n, colliding, candidates = _compiled(cq, pd, coal_pass, fused.q, bounds)
        assert n == n_ref, (scene, k)
        assert (colliding, candidates) == (stats["colliding_pairs"], stats["candidate_pairs"]), (scene, k)
        got = _copy(cq.contact_set(n))
        for name, want in ref.items():
            assert got[name].tobytes() == want.tobytes(), (scene, k, name)
        compared += 1
        contacts += n
        pairs = np.stack([ref["geometry_a"], ref["geometry_b"]], axis=1)
        patches += bool(n) and len(np.unique(pairs, axis=0)) < n          # a pair with several contacts
    assert compared == steps // 10 and contacts > 0 and patches > 0


def test_update_runs_the_pass_on_the_clutter_bit_for_bit():
    """A query with the compiled narrow phase and no bounding-volume tests (the clutter: 980 pairs, more than
    BOUND_MAX_PAIRS) runs update as the compiled pass (compiled_update): along 300 steps of the clutter settling
    (box-box patches, sphere and box-ground rows), the same trajectory, contacts and stats, bit for bit, as update's
    staged steps."""
    path = ROOT / "scenes" / "icf_clutter.yaml"
    sims = [Simulator(str(path), engine="similar", time_step=2e-3) for _ in range(2)]
    sims[1].contact_query.compiled_update = False
    for sim in sims:
        assert sim._tree is not None
        sim._tree = None        # the staged step, whose query runs update (the fused tree step runs the pass itself)
    assert sims[0].contact_query._bounds is None and sims[0].contact_query.compiled_narrow_phase
    contacts = 0
    for k in range(300):
        for sim in sims:
            sim.step()
        assert sims[0].q.tobytes() == sims[1].q.tobytes() and sims[0].v.tobytes() == sims[1].v.tobytes(), k
        assert sims[0].contact_query.stats == sims[1].contact_query.stats, k
        a, b = _copy(sims[0].contacts), _copy(sims[1].contacts)
        for name, want in b.items():
            assert a[name].tobytes() == want.tobytes(), (k, name)
        contacts += sims[0].contacts.size
    assert sims[0].contact_query._update_pass is not None and sims[1].contact_query._update_pass is None
    assert contacts > 1000 and sims[0].contacts.size > 50


def test_update_falls_back_to_the_staged_steps_when_the_pass_cannot_give_the_set(monkeypatch):
    """When the compiled pass returns OVERFLOW or FAILED (more rows than the buffers, coal failed), update runs its
    staged steps: the same contacts and stats, bit for bit, as a query that never runs the pass."""
    sim = Simulator(str(ROOT / "scenes" / "icf_clutter.yaml"), engine="similar", time_step=2e-3)
    for _ in range(300):
        sim.step()
    pm, q = sim.model.pin_model, sim.q
    queries, data = [], []
    for compiled in (True, False):
        cq = ContactQuery(sim.model, sim.scene.contact_margin, broad_phase="auto")
        cq.compiled_update = compiled
        pd = pm.createData()
        pin.forwardKinematics(pm, pd, q)
        pin.computeJointJacobians(pm, pd)
        queries.append(cq)
        data.append(pd)
    calls = []
    for code in (contact_pass_kernels.OVERFLOW, contact_pass_kernels.FAILED):
        # coal's results depend on its history (warm starts): both queries see the same calls
        reference = _copy(queries[1].update(data[1], joint_jacobians=True, q=q))
        assert reference["signed_distance"].size > 50
        monkeypatch.setattr(contact_pass_kernels, "coal_contact_pass",
                            lambda *args, code=code: calls.append(code) or (code, 0, 0))
        got = _copy(queries[0].update(data[0], joint_jacobians=True, q=q))
        for name, want in reference.items():
            assert got[name].tobytes() == want.tobytes(), (code, name)
        assert queries[0].stats == queries[1].stats
    assert calls == [contact_pass_kernels.OVERFLOW, contact_pass_kernels.FAILED]


def test_a_query_without_the_compiled_narrow_phase_says_so():
    """A numpy-kernel query has no compiled narrow phase: ConfigError naming the method and what it needs."""
    sim = Simulator(SCENES["bottle"][0], engine="tamsi")
    query = ContactQuery(sim.model, kernel="numpy")
    with pytest.raises(ConfigError, match="compiled_coal_pass.*narrow_phase.cpp"):
        query.compiled_coal_pass(sim.pin_data)
