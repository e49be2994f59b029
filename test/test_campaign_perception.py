"""Campaigns in perception mode (``pick_sources``, docs/scenarios.md): every trial runs once with the bottle's
true pose and once with the pose perceived in the wrist depth image (and once at the nominal pose), with the same
sampled parameters; the report puts the successes side by side. Real physics, real renderer, in process (and one
small local Ray campaign for the resume keys)."""

from __future__ import annotations

import numpy as np
import pytest

from contact_sim_ros.errors import ConfigError
from contact_sim_ros.scenarios.campaign import (finished_trials, load_campaign, read_results, report, run_campaign,
                                                run_trial)
from contact_sim_ros.scenarios.results import PartWriter, write_fingerprint

SHORT = {"motion_time": 0.5, "hold_time": 0.45, "shake_cycles": 1, "stop_at": "shake"}
TOLERANCE = 0.005          # m, perceived axis against the truth


def campaign_file(tmp_path, sources="[given, truth, perception]", trials=3, extra=""):
    p = tmp_path / "c.yaml"
    p.write_text(f"""
scenario: pick_shake_place
engines: [tamsi]
trials: {trials}
seed: 5
controller: {SHORT}
pick_sources: {sources}
parameters:
  object.bottle.x: {{choice: [-0.03, 0.03]}}      # m: far enough that the nominal pose misses
  object.bottle.y: {{uniform: [-0.03, 0.03]}}
{extra}""")
    return p


def test_perceived_and_true_poses_side_by_side_in_the_report(tmp_path):
    spec = load_campaign(campaign_file(tmp_path))
    assert spec.pick_sources == ("given", "truth", "perception")
    out = tmp_path / "out"
    writer = PartWriter(out, spec.schema())
    rows = []
    for k in range(spec.trials):
        runs = spec.runs(k)
        assert [v["controller.pick_source"] for v in runs] == ["given", "truth", "perception"]
        assert all({n: x for n, x in v.items() if n != "controller.pick_source"} == spec.trial_parameters(k)
                   for v in runs)
        for values in runs:
            rows.append(run_trial(spec, k, "tamsi", values))
            writer.add(rows[-1])
    writer.flush()
    by = {(r["trial"], r["p.controller.pick_source"]): r for r in rows}
    for k in range(spec.trials):
        p = spec.trial_parameters(k)
        truth = np.array([0.55 + p["object.bottle.x"], -0.12 + p["object.bottle.y"]])
        t, s, g = by[k, "truth"], by[k, "perception"], by[k, "given"]
        assert t["success"] and s["success"], (t["reason"], s["reason"])
        assert not g["success"] and g["failure_mode"] == "missed", g["reason"]
        perceived = np.array([s["n.pick_x_m"], s["n.pick_y_m"]])
        assert np.linalg.norm(perceived - truth) < TOLERANCE, (k, perceived, truth)
        assert s["n.perception_error_m"] < TOLERANCE
        assert np.hypot(t["n.pick_x_m"] - truth[0], t["n.pick_y_m"] - truth[1]) < 1e-3
    table = read_results(out)
    assert "p.controller.pick_source" in table.column_names
    text = report(out, plots=False)
    n = spec.trials
    assert "## Success by pick source (perceived against true poses)" in text
    assert f"| tamsi | 0 / {n} (0.000" in text and f"perception: successes / trials" in text
    assert text.count(f"{n} / {n} (1.000") == 2                       # perception and truth, side by side
    assert f"| tamsi | perception, truth | {n} | {n} | 0 | 0 |" in text
    assert f"| tamsi | given, perception | {n} | 0 | 0 | {n} |" in text
    assert f"over {n} perceived runs: median" in text


@pytest.mark.campaign
def test_a_local_campaign_with_pick_sources_resumes_by_trial_engine_and_source(tmp_path):
    """Trial 0's truth run already written: the local Ray campaign runs the other three (trial 0 with perception
    too: a run is done per trial, engine and source), and its rows equal the runs alone."""
    spec = load_campaign(campaign_file(tmp_path, sources="[truth, perception]", trials=2))
    out = tmp_path / "out"
    write_fingerprint(out, spec.fingerprint())           # the folder of this campaign (as run_campaign binds it)
    writer = PartWriter(out, spec.schema())
    writer.add(run_trial(spec, 0, "tamsi", spec.runs(0)[0]))
    writer.flush()
    assert finished_trials(out, ("p.controller.pick_source",)) == {(0, "tamsi", "truth")}
    s = run_campaign(spec, out, workers=2, progress=False)
    assert s["done_before"] == 1 and s["run"] == 3
    rows = read_results(out).to_pylist()
    assert sorted((r["trial"], r["p.controller.pick_source"]) for r in rows) == [
        (0, "perception"), (0, "truth"), (1, "perception"), (1, "truth")]
    assert all(r["success"] for r in rows), [r["reason"] for r in rows]
    ray_row = next(r for r in rows if (r["trial"], r["p.controller.pick_source"]) == (0, "perception"))
    alone = run_trial(spec, 0, "tamsi", spec.runs(0)[1])
    assert alone["n.pick_x_m"] == ray_row["n.pick_x_m"] and alone["n.pick_y_m"] == ray_row["n.pick_y_m"]


@pytest.mark.parametrize("extra, sources, message", [
    ("", "[truth, camera]", "pick_sources: unknown pick source 'camera'; valid pick sources: given, perception, "
                            "truth"),
    ("", "[truth, truth]", "pick_sources must be a list of distinct names"),
    ("  controller.pick_source: {choice: [truth, given]}", "[truth, perception]",
     "pick_source is set by pick_sources (one run per source); remove it from parameters"),
])
def test_bad_pick_sources_are_named(tmp_path, extra, sources, message):
    with pytest.raises(ConfigError) as exc:
        load_campaign(campaign_file(tmp_path, sources=sources, extra=extra))
    assert message in str(exc.value) and str(tmp_path / "c.yaml") in str(exc.value)


def test_a_pick_source_as_a_controller_field_or_parameter_is_checked_and_gets_the_camera_scene(tmp_path):
    p = tmp_path / "f.yaml"
    p.write_text("scenario: pick_shake_place\ncontroller: {pick_source: perception}\n")
    spec = load_campaign(p)
    assert spec.scene() == "scenes/scenario_pick_shake_place_cameras.yaml" and spec.runs(0) == [{}]
    p.write_text("scenario: pick_shake_place\nparameters: {controller.pick_source: {choice: [truth, given]}}\n")
    assert load_campaign(p).scene() == "scenes/scenario_pick_shake_place_cameras.yaml"
    p.write_text("scenario: pick_shake_place\ncontroller: {pick_source: camera}\n")
    with pytest.raises(ConfigError, match="controller.pick_source: unknown pick source 'camera'; valid pick "
                                          "sources: given, perception, truth"):
        load_campaign(p)
    p.write_text("scenario: pick_shake_place\n")
    assert load_campaign(p).scene() == "scenes/scenario_pick_shake_place.yaml"


def test_a_scenario_without_a_pick_source_refuses_pick_sources(tmp_path):
    p = tmp_path / "f.yaml"
    p.write_text("scenario: franka_rod\npick_sources: [perception]\n")
    with pytest.raises(ConfigError, match="scenario franka_rod does not locate its object "):
        load_campaign(p)
