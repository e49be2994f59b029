"""Faults of a grasp-validation campaign (contact_sim_ros/scenarios/campaign.py) on real Ray: a worker that dies
loses only its trial, which is retried; a Ctrl-C writes what is done and says how to resume, and the same command
runs the rest. (Apart from test_campaign.py so that make test's workers, one test file each, run these two
minute-long Ray campaigns beside that file's, not after them.)"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from contact_sim_ros.scenarios.campaign import finished_trials, load_campaign, read_results, run_campaign

from test_campaign import campaign_file


def _crash_once_then_run(spec, k, engine):
    """A worker that dies (os._exit) the first time it runs trial 1: only that trial is lost, and retried."""
    from contact_sim_ros.scenarios.campaign import run_trial as real
    marker = Path(os.environ["CAMPAIGN_CRASH_MARKER"])
    if k == 1 and not marker.exists():
        marker.write_text("crashed")
        os._exit(1)
    return real(spec, k, engine)


@pytest.mark.campaign
def test_a_worker_that_dies_loses_only_its_trial_which_is_retried(tmp_path, monkeypatch):
    import ray.cloudpickle
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])   # the workers cannot import test modules
    spec = load_campaign(campaign_file(tmp_path, trials=3))
    marker = tmp_path / "crashed"
    monkeypatch.setenv("CAMPAIGN_CRASH_MARKER", str(marker))
    out = tmp_path / "out"
    s = run_campaign(spec, out, workers=2, progress=False, trial_fn=_crash_once_then_run)
    assert marker.exists()                              # the worker did die
    rows = read_results(out).to_pylist()
    assert s["failed_tasks"] == 0 and s["run"] == 3, (s, [r["reason"] for r in rows])
    assert sorted(r["trial"] for r in rows) == [0, 1, 2] and all(r["reason"] for r in rows)


@pytest.mark.campaign
def test_ctrl_c_writes_what_is_done_and_says_how_to_resume(tmp_path, capfd, monkeypatch):
    """A KeyboardInterrupt (Ctrl-C) after the 2nd row: both rows are on disk (the part is flushed), the command
    says how many are saved and how to resume, exit 130, no traceback; the same command then runs the rest."""
    from contact_sim_ros.scenarios import campaign as cm
    real = cm.run_campaign

    def interrupted(*args, **kwargs):
        def stop(row, n):
            if n == 2:
                raise KeyboardInterrupt
        return real(*args, **{**kwargs, "on_row": stop})
    path = str(campaign_file(tmp_path, trials=4))
    out = str(tmp_path / "out")
    monkeypatch.setattr(cm, "run_campaign", interrupted)
    assert cm.main([path, "--out", out, "--workers", "2", "--no-progress"]) == 130
    err = capfd.readouterr().err
    assert "interrupted: 2 trial run(s) of this run saved" in err and "2 not run" in err, err
    assert "run the same command again to resume" in err and "Traceback" not in err
    assert len(finished_trials(out)) == 2
    monkeypatch.setattr(cm, "run_campaign", real)
    assert cm.main([path, "--out", out, "--workers", "2", "--no-progress"]) == 0
    assert "2 trial run(s) in" in capfd.readouterr().out
    assert sorted(r["trial"] for r in read_results(out).to_pylist()) == [0, 1, 2, 3]
    for png in ("object_bottle_friction.png", "failure_modes_object_bottle_friction.png"):
        assert (tmp_path / "out" / "plots" / png).stat().st_size > 5000
