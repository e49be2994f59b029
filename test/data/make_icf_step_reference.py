"""Writes test/data/icf_step_reference.npz: engine steps of the convex ICF engines (Lagged, Similar, SAP) on
recorded step inputs, for test_engine_lagged.py::test_compiled_step_matches_stored_reference.

Produced with commit 841d610 (before the whole ICF step became one compiled call, issue 18 rank 1), with this
script copied into an export of that commit and that export first on PYTHONPATH:

    mkdir /tmp/ref && git archive 841d610 | tar -x -C /tmp/ref && cp test/data/make_icf_step_reference.py
    /tmp/ref/test/data/ && cd /tmp/ref && PYTHONPATH=/tmp/ref python test/data/make_icf_step_reference.py OUT.npz

For each scene a Simulator with the Lagged engine runs and the engine's StepInputs are recorded at a few steps
(contacts opening, closing, sticking and slipping; the iiwa with no contact at all). Each recorded input is then
stepped by a fresh engine of every configuration below (the ICF engines keep no state between steps) and the
results are stored. The test feeds the same inputs to today's engines and compares at 1e-10 relative.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from contact_sim_ros.engines import make_engine
from contact_sim_ros.sim.simulator import Simulator

ROOT = Path(__file__).resolve().parents[2]

# (key, scene, dt, steps at which the engine inputs are recorded)
SCENES = (
    ("box", "benchmarks/peers/scenes/box_stick_slip.yaml", 1e-3, (1, 40, 130, 260, 400, 600)),
    ("sphere", "scenes/icf_falling_sphere.yaml", 2e-3, (1, 50, 52, 54, 60, 150)),
    ("iiwa", "benchmarks/peers/scenes/iiwa_wsg_pd.yaml", 1e-3, (1, 100)),
    ("default", "scenes/default.yaml", 1e-3, (1, 50, 200)),
    ("conveyor", "scenes/icf_conveyor.yaml", 1e-3, (1, 100, 300)),
    ("clutter", "scenes/icf_clutter.yaml", 2e-3, (150,)),
)
# (key, engine, options)
CONFIGS = (
    ("lagged", "lagged", {}),
    ("lagged_reg", "lagged", {"regularized_stiction": True}),
    ("similar", "similar", {}),
    ("sap", "sap", {}),
)
INPUT_FIELDS = ("v", "mass_matrix", "generalized_force", "gravity_force", "joint_damping")
ACTUATION_FIELDS = ("effort", "kp", "kd", "position_error", "velocity_target", "effort_limit")
CONTACT_FIELDS = ("jacobian", "velocity_bias", "signed_distance", "stiffness", "dissipation", "friction")


def record(scene, dt, steps):
    sim = Simulator(str(ROOT / scene), engine="lagged", time_step=dt)
    recorded = []
    engine_step = sim.engine.step_into           # the simulator's call (ContactEngine.step_into)

    def capture(inputs, slot):
        if len(steps_done) in wanted:
            recorded.append(inputs)
        return engine_step(inputs, slot)

    steps_done, wanted = [], set(steps)
    sim.engine.step_into = capture
    for _ in range(max(steps) + 1):
        report = sim.step()
        assert report.ok, report.message
        steps_done.append(1)
    return sim.model, recorded


def pile():
    """The 10-box random pile of test_engine_lagged.py with its trees listed in reverse (dof permutation)."""
    sys.path.insert(0, str(ROOT / "test"))
    from test_engine_lagged import random_pile
    model, inputs = random_pile(10, 40, 1, reverse_slices=True)
    return model, [inputs]


def main(out):
    data = {}
    for key, scene, dt, steps in SCENES + (("pile", "", 0.0, (0,)),):
        model, recorded = record(scene, dt, steps) if scene else pile()
        print(f"{key}: {len(recorded)} inputs, contacts {[i.contacts.size for i in recorded]}", flush=True)
        for s, inputs in enumerate(recorded):
            p = f"{key}/{s}/"
            data[p + "t"], data[p + "dt"] = inputs.t, inputs.dt
            for f in INPUT_FIELDS:
                data[p + f] = np.asarray(getattr(inputs, f))
            for f in ACTUATION_FIELDS:
                data[p + "act_" + f] = np.asarray(getattr(inputs.actuation, f))
            for f in CONTACT_FIELDS:
                data[p + "c_" + f] = np.asarray(getattr(inputs.contacts, f))
            for ckey, name, options in CONFIGS:
                engine = make_engine(name, model, options)
                q = p + ckey + "/"
                try:
                    res = engine.step(inputs)
                except KeyError as exc:     # 841d610: regularized_stiction without contacts -> KeyError 'w'
                    print(f"  {q}: {exc!r}: not stored")
                    continue
                data[q + "status"] = res.stats.status.value
                data[q + "iterations"] = res.stats.iterations
                data[q + "v_next"] = res.v_next
                data[q + "contact_impulse"] = res.contact_impulse
                data[q + "generalized_contact_force"] = res.generalized_contact_force
                data[q + "actuation_force"] = res.actuation_force
                data[q + "stiction_tolerance"] = np.asarray(engine.last_stiction_tolerance)
                if res.friction_normal_impulse is not None:
                    data[q + "friction_normal_impulse"] = res.friction_normal_impulse
    data["scenes"] = np.array([f"{key}|{scene}|{len(steps)}" for key, scene, _, steps in SCENES])
    data["configs"] = np.array([k for k, _, _ in CONFIGS])
    np.savez_compressed(out, **data)
    print(f"wrote {out} ({Path(out).stat().st_size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).with_name("icf_step_reference.npz")))
