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
