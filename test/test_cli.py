"""The headless runner: runs a scene file, prints the real-time factor, writes a numpy-readable log."""

import numpy as np

from contact_sim_ros.cli import main

SCENE = """
gravity: [0, 0, -9.81]
objects:
  - {name: ball, shape: {sphere: 0.05}, mass: 0.5, pose: {xyz: [0, 0, 0.2]}, velocity: [0.3, 0, 0, 0, 0, 0]}
environment:
  - {name: ground, shape: halfspace}
materials:
  default: {stiffness: 1.0e5, dissipation: 10.0, friction: 0.5}
inputs:
  external_forces:
    - {body: ball, force: ["0.5 * sin(2 * pi * t)", 0, 0]}
"""


def test_run_scene_writes_log_and_prints_real_time_factor(tmp_path, capsys):
    scene = tmp_path / "drop.yaml"
    scene.write_text(SCENE)
    log = tmp_path / "log.npz"
    assert main(["run", str(scene), "--engine", "semi_implicit", "--time-step", "0.002", "--duration", "0.5",
                 "--log", str(log)]) == 0
    out = capsys.readouterr().out
    assert "real-time factor" in out and "250 steps" in out
    data = np.load(log)
    assert data["t"].shape == (250,) and np.isclose(data["t"][-1], 0.5)
    assert data["q"].shape == (250, 7) and data["v"].shape == (250, 6)
    # the ball fell and touched the ground: contacts logged with finite impulses and positive normal impulse
    assert data["contact_step"].size > 0
    assert np.all(np.isfinite(data["contact_impulse"])) and data["contact_impulse"][:, 2].max() > 0
    assert abs(data["q"][-1, 2] - 0.05) < 2e-3   # resting on the ground at its radius


def test_unknown_engine_is_a_clear_error(tmp_path, capsys):
    scene = tmp_path / "s.yaml"
    scene.write_text(SCENE)
    assert main(["run", str(scene), "--engine", "warp_drive"]) == 2
    assert "unknown engine 'warp_drive'; valid engines:" in capsys.readouterr().err


def test_engines_lists_the_registry(capsys):
    assert main(["engines"]) == 0
    assert "semi_implicit" in capsys.readouterr().out


# ------------------------------------------------------------------- argument validation (issue 17)
import pytest  # noqa: E402


@pytest.mark.parametrize("args, message", [
    (["--duration", "nan"], "argument --duration: duration must be a finite number of seconds > 0, got 'nan'"),
    (["--duration", "inf"], "argument --duration: duration must be a finite number of seconds > 0, got 'inf'"),
    (["--duration", "-1"], "argument --duration: duration must be a finite number of seconds > 0, got '-1'"),
    (["--time-step", "5"], "argument --time-step: time step must be a finite number of seconds > 0 and <= 0.1"),
    (["--time-step", "nan"], "argument --time-step: time step must be a finite number of seconds > 0"),
    (["--time-step", "0"], "argument --time-step: time step must be a finite number of seconds > 0"),
    (["-o", "max_iterations=[1"], "argument -o/--engine-option: engine option 'max_iterations': malformed YAML"),
    (["-o", "max_iterations"], "argument -o/--engine-option: engine option 'max_iterations' must be key=value"),
    (["--real-time-factor", "nan"], "argument --real-time-factor: real-time factor must be a finite number >= 0"),
])
def test_bad_run_arguments_are_one_line_argparse_errors_before_anything_runs(tmp_path, capsys, args, message):
    scene = tmp_path / "s.yaml"
    scene.write_text(SCENE)
    with pytest.raises(SystemExit) as info:
        main(["run", str(scene), "--engine", "semi_implicit", *args])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if "error:" in line]) == 1


def test_log_into_a_missing_directory_fails_before_the_run(tmp_path, capsys):
    scene = tmp_path / "s.yaml"
    scene.write_text(SCENE)
    missing = tmp_path / "no" / "such" / "dir" / "log.npz"
    with pytest.raises(SystemExit) as info:
        main(["run", str(scene), "--engine", "semi_implicit", "--log", str(missing)])
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert f"argument --log: directory '{missing.parent}' does not exist" in captured.err
    assert "real-time factor" not in captured.out                 # nothing ran
    assert not missing.parent.exists()                            # and nothing was created


def test_run_scene_api_validates_like_the_command(tmp_path):
    from contact_sim_ros.cli import run_scene
    from contact_sim_ros.errors import ConfigError
    scene = tmp_path / "s.yaml"
    scene.write_text(SCENE)
    for kwargs, message in (({"duration": float("nan")}, "duration"), ({"time_step": 0.5}, "time_step"),
                            ({"log_path": str(tmp_path / "x" / "l.npz")}, "does not exist")):
        args = {"engine": "semi_implicit", "time_step": 1e-3, "duration": 0.01, **kwargs}
        with pytest.raises(ConfigError, match=message):
            run_scene(str(scene), **args)


def test_the_cli_time_step_cap_is_the_simulators():
    from contact_sim_ros import cli
    from contact_sim_ros.sim import simulator
    assert cli.MAX_TIME_STEP is simulator.MAX_TIME_STEP == 0.1


DIVERGING = """
gravity: [0, 0, -9.81]
objects:
  - {name: mug, shape: {cylinder: [0.04, 0.1]}, mass: 0.3, pose: {xyz: [0, 0, 0.05]}}
environment:
  - {name: ground, shape: halfspace}
inputs:
  external_forces:
    - {body: mug, force: ["1e9 * t", 0, 0]}      # an effort ramp to 1e9 N: the mug leaves at km/s
"""


def test_a_diverging_run_exits_non_zero_and_says_so(tmp_path, capsys):
    scene = tmp_path / "diverging.yaml"
    scene.write_text(DIVERGING)
    code = main(["run", str(scene), "--engine", "semi_implicit", "--time-step", "0.001", "--duration", "0.5"])
    out = capsys.readouterr().out
    assert code == 1
    assert "failures 1" in out
    assert "FAILED: the run diverged at t = " in out
    assert "diverged: free body 'mug' speed" in out
