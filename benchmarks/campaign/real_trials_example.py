"""The shipped example of real trials, ``scenes/campaigns/real_trials_example.csv``, made from the example campaign's
own plans (``scenes/campaigns/pick_shake_place.yaml``) so that ``contact-sim campaign compare`` on the example
campaign gives a meaningful, documented result (docs/scenarios.md, "Against the real robot").

    python benchmarks/campaign/real_trials_example.py            # (re)write the CSV (~10 s: 14 trials in process)
    python benchmarks/campaign/real_trials_example.py --check    # exit 1 (and a diff) when the CSV differs
    python benchmarks/campaign/real_trials_example.py --agreement # the agreement compare gives (~25 s more)

No robot ran these trials: the "real cell" is the simulation itself (TAMSI), set up and measured the way a real
cell is. Each row is a trial of the campaign (``ROWS``): its planned parameters, the object placed and measured
with the errors of a real set-up (position: N(0, 0.5 mm) per axis, read to 0.1 mm; friction from a tilt test:
N(0, 0.02), read to 0.01; mass: weighed, N(0, 1 %), read to 0.01; the grip force as commanded), and its outcome
(success, failure mode) is the trial run at those measured values; the yaw (the bottle is round) and the F/T
noise are not measured (the plan's values run). The errors depend only on (``ERROR_SEED``, row), so the file is
reproducible. Two rows have no trial id (unplanned trials near planned ones: matched by nearest parameters) and
one was set up wrongly (trial 1 with the gripper left at 8 N instead of the planned 20 N: ``compare`` flags it
as far from its plan). ``--agreement``: the matched campaign trial of each row (by id, else nearest parameters
over the campaign's 200 plans, as ``compare`` matches) run as planned on each engine, and the share of rows
whose outcome it predicts: what ``compare`` reports as the verdict agreement on the finished campaign.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import io
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from contact_sim_ros.scenarios.campaign import load_campaign, run_trial  # noqa: E402
from contact_sim_ros.scenarios.compare import parameter_distances, parameter_features  # noqa: E402

CAMPAIGN = REPO / "scenes" / "campaigns" / "pick_shake_place.yaml"
CSV_PATH = REPO / "scenes" / "campaigns" / "real_trials_example.csv"
REAL_ENGINE = "tamsi"           # the engine that plays the real cell
ERROR_SEED = 44                 # set-up and measurement errors: numpy default_rng([ERROR_SEED, row])
MEASURED = ("object.bottle.x", "object.bottle.y", "object.bottle.mass_scale", "object.bottle.friction",
            "controller.grip_force")
# (campaign trial whose plan is set up, trial id written in the CSV or None, set-up changes, note): the first
# trials of the campaign, and the risky ones it found (its failures and engine disagreements: 13, 18, 51, 60,
# 98, 127, 198 fail on TAMSI at seed 7), as a user would choose them to run on the robot
ROWS = [(0, 0, {}, ""), (1, 1, {"controller.grip_force": 8.0},
                         "gripper left at 8 N from the previous set-up (planned 20 N)"),
        (2, 2, {}, "x and y measured with the camera (mm)"), (3, 3, {}, ""), (5, 5, {}, ""),
        (13, 13, {}, ""), (18, 18, {}, "x and y measured with the camera (mm)"), (51, 51, {}, ""),
        (60, 60, {}, ""), (98, 98, {}, "bottle label side towards the camera"), (127, 127, {}, ""),
        (198, 198, {}, ""), (81, None, {}, "extra trial (no campaign id): matched by nearest parameters"),
        (22, None, {}, "extra trial (no campaign id), bottle wet from the previous trial, wiped")]
IN_MM = {2, 6}                  # rows (index) whose positions are written in mm and grip force in N


def measured_values(spec, index: int, k: int, changes: dict) -> dict:
    """Trial k's plan as set up and measured on the real cell (row ``index`` of ROWS): every parameter the run
    uses, the measured ones with their errors and resolution."""
    plan = {**spec.trial_parameters(k), **changes}
    rng = np.random.default_rng([ERROR_SEED, index])
    values = dict(plan)
    values["object.bottle.x"] = round(plan["object.bottle.x"] + rng.normal(0.0, 0.0005), 4)
    values["object.bottle.y"] = round(plan["object.bottle.y"] + rng.normal(0.0, 0.0005), 4)
    values["object.bottle.friction"] = round(plan["object.bottle.friction"] + rng.normal(0.0, 0.02), 2)
    values["object.bottle.mass_scale"] = round(plan["object.bottle.mass_scale"] * (1 + rng.normal(0.0, 0.01)), 2)
    return values


def _cell(name: str, value: float, in_mm: bool) -> str:
    if name in ("object.bottle.x", "object.bottle.y"):
        return f"{value * 1e3 + 0.0:.1f} mm" if in_mm else f"{value + 0.0:.4f}"      # (+ 0.0: no -0.0)
    if name == "controller.grip_force":
        return f"{value:g} N" if in_mm else f"{value:g}"
    return f"{value:.2f}"


def make_csv(spec) -> str:
    """The CSV text: one row per ROWS entry, its outcome from the trial run at the measured values."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["trial", *MEASURED, "success", "failure_mode", "notes"])
    for index, (k, trial_id, changes, note) in enumerate(ROWS):
        values = measured_values(spec, index, k, changes)
        row = run_trial(spec, k, REAL_ENGINE, values)
        w.writerow(["" if trial_id is None else trial_id, *(_cell(n, values[n], index in IN_MM) for n in MEASURED),
                    int(row["success"]), row["failure_mode"] or "", note])
    return buf.getvalue()


def matched_trials(spec) -> list[int]:
    """The campaign trial ``compare`` matches to each row: its id, else the nearest plan (the campaign's
    standard deviation of each parameter as its scale, over the plans of all its trials)."""
    plans = [spec.trial_parameters(k) for k in range(spec.trials)]
    scales = {n: float(np.std([p[n] for p in plans])) or 1.0 for n in MEASURED}
    Xs = parameter_features(plans, list(MEASURED), scales, {})
    out = []
    for index, (k, trial_id, changes, _) in enumerate(ROWS):
        if trial_id is not None:
            out.append(trial_id)
            continue
        Xr = parameter_features([measured_values(spec, index, k, changes)], list(MEASURED), scales, {})
        out.append(int(np.argmin(parameter_distances(Xr, Xs, np.zeros(len(MEASURED), bool))[0])))
    return out


def agreement(spec, text: str) -> dict:
    """engine -> (rows whose real outcome equals the matched planned trial's verdict, rows)."""
    real = [r["success"] == "1" for r in csv.DictReader(io.StringIO(text))]
    matched = matched_trials(spec)
    result = {}
    for e in spec.engines:
        sim = [run_trial(spec, k, e)["success"] for k in matched]
        result[e] = (sum(a == b for a, b in zip(sim, real)), len(real))
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the CSV differs from what this makes")
    ap.add_argument("--agreement", action="store_true", help="also print the verdict agreement per engine")
    args = ap.parse_args(argv)
    spec = load_campaign(CAMPAIGN)
    text = make_csv(spec)
    status = 0
    if args.check:
        old = CSV_PATH.read_text() if CSV_PATH.exists() else ""
        if old != text:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                       str(CSV_PATH), "made now"))
            print(f"{CSV_PATH}: differs from what {Path(__file__).name} makes", file=sys.stderr)
            status = 1
        else:
            print(f"{CSV_PATH}: as made")
    else:
        CSV_PATH.write_text(text)
        print(f"wrote {CSV_PATH}")
    if args.agreement:
        for e, (a, n) in agreement(spec, text).items():
            print(f"agreement {e}: {a}/{n}")
    return status


if __name__ == "__main__":
    sys.exit(main())
