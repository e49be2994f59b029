"""Grasp-validation campaigns (contact_sim_ros/scenarios/campaign.py): distributions, reproducible trials,
Ray execution (local and a two-node cluster on this machine), Parquet streaming and resume, a worker that dies,
and the report (Wilson intervals, failure modes, engine agreement, plots). Real physics in process, real Ray."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from contact_sim_ros.errors import ConfigError
from contact_sim_ros.scenarios.campaign import (Distribution, finished_trials, load_campaign, read_results, report,
                                                run_campaign, run_trial, wilson_interval)

TIMING_KEYS = ("wall_time_s", "cpu_time_s", "worker_rss_mb", "n.wall_time_s", "n.real_time_factor")
SHORT = {"motion_time": 0.5, "hold_time": 0.45, "shake_cycles": 1, "stop_at": "transfer"}


def campaign_file(tmp_path, engines=("tamsi",), trials=4, extra=""):
    p = tmp_path / "c.yaml"
    p.write_text(f"""
scenario: pick_shake_place
engines: [{', '.join(engines)}]
trials: {trials}
seed: 3
controller: {SHORT}
parameters:
  object.bottle.x: {{normal: {{mean: 0.0, std: 0.003}}}}
  object.bottle.friction: {{uniform: [0.15, 1.0]}}
  object.bottle.mass_scale: {{truncated_normal: {{mean: 1.0, std: 0.2, low: 0.7, high: 1.5}}}}
  controller.grip_force: {{choice: [4.0, 20.0]}}
  sensor.ft_noise_std: 0.1
{extra}""")
    return p


def test_distributions_sample_their_laws_and_bad_ones_are_named():
    rng = np.random.default_rng(0)
    u = [Distribution.parse({"uniform": [1.0, 2.0]}, "x").sample(rng) for _ in range(4000)]
    assert 1.0 <= min(u) and max(u) <= 2.0 and np.mean(u) == pytest.approx(1.5, abs=0.02)
    n = [Distribution.parse({"normal": {"mean": 3.0, "std": 0.5}}, "x").sample(rng) for _ in range(4000)]
    assert np.mean(n) == pytest.approx(3.0, abs=0.03) and np.std(n) == pytest.approx(0.5, rel=0.05)
    t = [Distribution.parse({"truncated_normal": {"mean": 0, "std": 1, "low": -0.5, "high": 1.0}}, "x").sample(rng)
         for _ in range(4000)]
    assert -0.5 <= min(t) and max(t) <= 1.0
    c = [Distribution.parse({"choice": ["a", "b"]}, "x").sample(rng) for _ in range(400)]
    assert set(c) == {"a", "b"}
    with pytest.raises(ConfigError, match="unknown distribution 'gauss'"):
        Distribution.parse({"gauss": [1, 2]}, "x")
    with pytest.raises(ConfigError, match="invalid uniform"):
        Distribution.parse({"uniform": [2, 1]}, "x")


def test_campaign_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("scenario: pick_shake_place\nparameters: {object.bottle.colour: 1}\n")
    with pytest.raises(ConfigError) as exc:
        load_campaign(bad)
    assert str(bad) in str(exc.value) and "object.bottle.colour" in str(exc.value)
    bad.write_text("scenario: nope\n")
    with pytest.raises(ConfigError, match="valid scenarios"):
        load_campaign(bad)


def test_wilson_interval_matches_the_formula():
    lo, hi = wilson_interval(8, 10)
    assert (lo, hi) == (pytest.approx(0.4902, abs=1e-4), pytest.approx(0.9433, abs=1e-4))
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(20, 20)[1] == 1.0


def test_a_trial_is_reproducible_alone_bit_for_bit(tmp_path):
    spec = load_campaign(campaign_file(tmp_path))
    assert spec.trial_parameters(2) == spec.trial_parameters(2) != spec.trial_parameters(3)
    a, b = run_trial(spec, 1, "tamsi"), run_trial(spec, 1, "tamsi")
    for key in a:
        if key not in TIMING_KEYS:
            assert a[key] == b[key], key


def test_local_campaign_streams_resumes_and_reports(tmp_path):
    """4 trials on 2 local Ray workers, then resumed to 6: nothing repeated or lost; trial rows equal a rerun of
    the trial alone; the low grip force (4 N) on a slippery bottle fails, 20 N on a grippy one holds."""
    spec = load_campaign(campaign_file(tmp_path, trials=6))
    out = tmp_path / "out"
    s1 = run_campaign(spec, out, workers=2, trials=4, progress=False)
    assert s1["run"] == 4 and finished_trials(out) == {(k, "tamsi") for k in range(4)}
    s2 = run_campaign(spec, out, workers=2, progress=False)
    assert s2["done_before"] == 4 and s2["run"] == 2
    rows = read_results(out).to_pylist()
    assert sorted(r["trial"] for r in rows) == list(range(6))
    alone = run_trial(spec, rows[0]["trial"], "tamsi")
    assert alone["success"] == rows[0]["success"] and alone.get("n.held_load_N") == rows[0].get("n.held_load_N")
    text = report(out)
    assert "Wilson 95 %" in text and "| tamsi | 6 |" in text
    assert (out / "report.md").is_file() and (out / "plots" / "controller_grip_force.png").is_file()
    for r in rows:
        if not r["success"]:
            assert r["failure_mode"] in ("missed", "dropped_during_lift", "dropped_during_shake",
                                         "dropped_during_place", "solver_failure", "other")


def _crash_once_then_run(spec, k, engine):
    """A worker that dies (os._exit) the first time it runs trial 1: only that trial is lost, and retried."""
    from contact_sim_ros.scenarios.campaign import run_trial as real
    marker = Path(os.environ["CAMPAIGN_CRASH_MARKER"])
    if k == 1 and not marker.exists():
        marker.write_text("crashed")
        os._exit(1)
    return real(spec, k, engine)


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_node_cluster_on_this_machine_runs_a_small_campaign(tmp_path):
    ray_bin = shutil.which("ray", path=str(Path(sys.executable).parent))
    assert ray_bin, "the ray command is installed with the ray package"
    port = _free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    temp = Path("/tmp") / f"ray_{os.getpid()}"      # short: Ray's socket paths must fit 107 characters
    head = [ray_bin, "start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
            "--disable-usage-stats", f"--temp-dir={temp}"]
    subprocess.run(head, check=True, env=env, capture_output=True, timeout=120)
    try:
        subprocess.run([ray_bin, "start", f"--address=127.0.0.1:{port}", "--num-cpus=1"], check=True, env=env,
                       capture_output=True, timeout=120)
        import ray
        ray.init(address=f"127.0.0.1:{port}", include_dashboard=False, log_to_driver=False)
        try:
            assert len([n for n in ray.nodes() if n["Alive"]]) == 2
            spec = load_campaign(campaign_file(tmp_path, trials=2))
            s = run_campaign(spec, tmp_path / "out", progress=False)
        finally:
            ray.shutdown()
        assert s["run"] == 2 and sorted(r["trial"] for r in read_results(tmp_path / "out").to_pylist()) == [0, 1]
    finally:
        stop_processes_under(temp)
        shutil.rmtree(temp, ignore_errors=True)


def stop_processes_under(temp: Path, timeout: float = 15.0) -> None:
    """End the processes of the cluster this test started, and only those: every process whose command line names
    its private temp dir (gcs_server, raylets, workers, monitors of both nodes). ``ray stop --force`` would stop
    every Ray process of the machine: another campaign or test running next to this one."""
    import signal
    import time

    def ours() -> list[int]:
        pids = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit() and int(d.name) != os.getpid():
                try:
                    if f"{temp}/".encode() in (d / "cmdline").read_bytes():
                        pids.append(int(d.name))
                except OSError:
                    pass
        return pids
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in ours():
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        end = time.monotonic() + timeout
        while ours() and time.monotonic() < end:
            time.sleep(0.2)
    assert not ours(), "processes of the test's Ray cluster survived SIGKILL"


def test_a_trial_rerun_in_the_browser_viewer_is_the_same_trial(tmp_path):
    """``--trial K --viewer``: the trial is drawn live (frames of its Simulator in the viewer process, the page
    served), paced to the wall clock, held while the page's Pause is pressed (sim time stands still), a Reset click
    is refused (a trial's controller cannot go back), and the row is the one of the trial without the viewer."""
    import io
    import threading
    import time
    import urllib.request
    from contact_sim_ros.scenarios.campaign import TrialViewer
    from contact_sim_ros.viewer.scene_viewer import simulator_frame
    spec = load_campaign(campaign_file(tmp_path))
    plain = run_trial(spec, 1, "tamsi")
    out, rtf = io.StringIO(), 4.0
    watch = TrialViewer(_free_port(), real_time_factor=rtf, out=out)
    held = {}

    def click():       # what the page's buttons do (FrameBuffer requests), 0.5 s of sim time into the trial
        deadline = time.monotonic() + 120
        while not (watch.sim is not None and watch.sim.t > 0.5) and time.monotonic() < deadline:
            time.sleep(0.01)
        buf = watch.viewer.buffer
        buf.request_reset()
        buf.request_pause(True)
        time.sleep(0.3)
        held["t0"] = watch.sim.t
        time.sleep(0.7)
        held["t1"] = watch.sim.t
        buf.request_pause(False)

    clicker = threading.Thread(target=click, daemon=True)
    clicker.start()
    start = time.perf_counter()
    try:
        row = run_trial(spec, 1, "tamsi", on_period=watch)
        wall = time.perf_counter() - start
        clicker.join(10)
        seq, frame = watch.viewer.buffer.read()
        with urllib.request.urlopen(watch.viewer.url, timeout=30) as page:
            assert page.status == 200 and b"<html" in page.read(2000).lower()
        # frames at the viewer's 30 Hz of wall time all along the trial; the last one within a viewer period
        assert seq // 2 > 10 and row["sim_time_s"] - rtf / 30.0 - 0.05 <= frame.t <= row["sim_time_s"]
        watch.viewer.publish_simulator(watch.sim)
        np.testing.assert_array_equal(watch.viewer.buffer.read()[1].poses,
                                      simulator_frame(watch.sim, watch.viewer.buffer.geometry_ids).poses)
    finally:
        watch.finish(wait=False)
    assert watch.viewer is None
    text = out.getvalue()
    assert "viewer: http://127.0.0.1:" in text and "paused at t =" in text and "resumed at t =" in text, text
    assert "reset ignored" in text, text
    assert held["t0"] == held["t1"] > 0.5, held          # paused: the trial did not advance
    assert wall >= row["sim_time_s"] / rtf + 0.7          # paced, plus the pause
    for key in plain:
        if key not in TIMING_KEYS:
            assert row[key] == plain[key] or (row[key] != row[key] and plain[key] != plain[key]), key


def test_campaign_command_trial_viewer_options(tmp_path, capsys):
    """``contact-sim campaign FILE --trial K --viewer --exit-after-run``: the viewer's address and the trial's row;
    ``--viewer`` without ``--trial`` and a bad ``--real-time-factor`` are refused with the reason."""
    from contact_sim_ros.scenarios.campaign import main
    path = str(campaign_file(tmp_path))
    assert main([path, "--trial", "0", "--viewer", "--viewer-port", str(_free_port()), "--exit-after-run",
                 "--real-time-factor", "0"]) == 0
    printed = capsys.readouterr().out
    assert "viewer: http://127.0.0.1:" in printed and "'trial': 0" in printed and "'success':" in printed, printed
    for bad, reason in (([path, "--viewer"], "give --trial K"),
                        ([path, "--trial", "0", "--viewer", "--real-time-factor", "-1"], "real-time-factor")):
        with pytest.raises(SystemExit) as exc:
            main(bad)
        assert exc.value.code == 2 and reason in capsys.readouterr().err
