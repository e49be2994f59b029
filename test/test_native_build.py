"""The compiled C++ modules (contact_sim_ros/native_build.py) where they cannot be built: ``contact-sim
compile-kernels`` warns naming the compiler's first error lines, exits 0 and the steps take the Python reference
path (the same results); ``--require-native`` makes it exit 1. Eigen's headers are looked for in the usual places.

In sim time: the failed builds are real g++ runs against a Pinocchio prefix without headers (monkeypatched), into a
temporary build folder, so the venv's builds are neither used nor touched.
"""

from __future__ import annotations

import numpy as np
import pytest

from contact_sim_ros import cli, native_build
from contact_sim_ros.resources import share_dir
from contact_sim_ros.sim.simulator import Simulator

SCENE = "scenes/scenario_pick_shake_place.yaml"      # a robot (the rigid-body module) and contacts (the narrow phase)


def _steps(n: int = 40):
    sim = Simulator(str(share_dir() / SCENE), engine="tamsi", time_step=1e-3)
    for _ in range(n):
        report = sim.step()
        assert report.ok, report.message
    return sim


@pytest.fixture(scope="module")
def compiled():
    """The steps with the venv's builds of the modules (make venv built them)."""
    sim = _steps()
    assert sim._rigid is not None and sim.contact_query._native is not None
    return sim.q.copy(), sim.v.copy()


@pytest.fixture
def headerless_prefix(tmp_path, monkeypatch):
    """A Pinocchio prefix with empty include/ and lib/, no Eigen anywhere searched, builds into tmp_path: what a
    ROS install without Eigen's headers (apt's ros-jazzy-pinocchio without libeigen3-dev) gives the build."""
    prefix = tmp_path / "prefix"
    (prefix / "include").mkdir(parents=True)
    (prefix / "lib").mkdir()
    monkeypatch.setattr(native_build, "prefix", lambda: prefix)
    monkeypatch.setattr(native_build, "eigen_candidates", lambda: [prefix / "include" / "eigen3"])
    monkeypatch.setattr(native_build, "cache_dir", lambda: tmp_path / "cache")
    for var in ("CPATH", "CPLUS_INCLUDE_PATH", "CXX"):
        monkeypatch.delenv(var, raising=False)
    for module in native_build.MODULES:
        monkeypatch.setattr(module, "_loaded", {})         # loaded again: from tmp_path's (empty) build folder
    return prefix


@pytest.mark.process
def test_a_failed_native_build_is_a_warning_and_the_steps_take_the_python_path(compiled, headerless_prefix, capsys):
    assert cli.main(["compile-kernels", "--engines", "tamsi"]) == 0
    err = capsys.readouterr().err
    for module in native_build.MODULES:
        assert f"warning: the compiled module {module.name} ({module.source.name}) is not built" in err, err
        assert not module.library_path().exists()
    assert f"compiling narrow_phase.cpp against {headerless_prefix} failed" in err, err
    assert "fatal error" in err and "No such file or directory" in err, err          # the compiler's first error
    assert f"Eigen's headers are in none of {headerless_prefix / 'include' / 'eigen3'}" in err, err
    assert "the step uses its Python reference path instead" in err, err
    assert "tamsi" in err                                    # the engine's kernels were still warmed up

    python = _steps()
    assert python._rigid is None and python.contact_query._native is None
    np.testing.assert_allclose(python.q, compiled[0], rtol=0, atol=1e-12)     # the same results
    np.testing.assert_allclose(python.v, compiled[1], rtol=0, atol=1e-9)


@pytest.mark.process
def test_require_native_makes_a_failed_build_exit_1(headerless_prefix, capsys):
    assert cli.main(["compile-kernels", "--engines", "tamsi", "--require-native"]) == 1
    err = capsys.readouterr().err
    assert "error: _narrow_phase (narrow_phase.cpp) is not built: compiling narrow_phase.cpp" in err, err
    assert "No such file or directory" in err, err


def test_eigen_is_found_in_the_first_place_that_has_it(tmp_path, monkeypatch):
    conda = tmp_path / "conda"
    (conda / "include" / "eigen3" / "Eigen").mkdir(parents=True)
    (conda / "include" / "eigen3" / "Eigen" / "Core").write_text("// Eigen\n")
    monkeypatch.delenv("EIGEN3_INCLUDE_DIR", raising=False)
    monkeypatch.setenv("CONDA_PREFIX", str(conda))
    monkeypatch.setattr(native_build, "prefix", lambda: tmp_path / "pinocchio_without_eigen")
    candidates = native_build.eigen_candidates()
    assert candidates[:2] == [tmp_path / "pinocchio_without_eigen" / "include" / "eigen3", conda / "include" / "eigen3"]
    assert {"/usr/include/eigen3", "/opt/ros/jazzy/include"} <= {str(p) for p in candidates}
    assert native_build.eigen_include_dir() == conda / "include" / "eigen3"
    assert f"-I{conda / 'include' / 'eigen3'}" in native_build.NARROW_PHASE._command(tmp_path / "out.so")
    monkeypatch.setenv("EIGEN3_INCLUDE_DIR", str(tmp_path / "explicit"))
    assert native_build.eigen_candidates()[0] == tmp_path / "explicit"
