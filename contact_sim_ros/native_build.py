"""Build and load the package's compiled C++ modules (Boost.Python):

* ``NARROW_PHASE``: ``geometry/narrow_phase.cpp`` (``_narrow_phase``), the contact query's coal loop;
* ``RIGID_BODY``: ``sim/rigid_body_dynamics.cpp`` (``_rigid_body_dynamics``), the Simulator's Pinocchio calls of a
  step (M, nle, g, the position error, the integration, the kinematics) into preallocated buffers.

Each is compiled with g++ against the headers and shared libraries of the installed Pinocchio (:func:`prefix`:
the pinocchio, coal, eigenpy and cmeel-eigen wheels' ``<site-packages>/cmeel.prefix``, or apt's
``/opt/ros/jazzy`` for ros-jazzy-pinocchio) and Eigen's headers (:func:`eigen_include_dir`: the same prefix,
``$CONDA_PREFIX``, ``/usr/include/eigen3``, ...), with the compile definitions of their CMake targets, into the
kernel cache's folder ``jit.cache_dir() / "native"``, named after a hash of the source, the flags and the Python
version: a changed source is built anew, every install location shares one build. They are built by the warm-up
(``contact-sim compile-kernels`` = ``python -m contact_sim_ros.jit``, run by the project's set-up; ~40-90 s each on
2 cores) and only loaded at run time: a process never compiles them in its first step. Without them (no compiler,
a failed build: the warm-up warns and goes on) the package takes its Python paths, which give the same results
(tests compare them), a few times slower.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from .jit import cache_dir

# the compile definitions of the wheels' CMake targets (pinocchio::pinocchio_collision, coal::coal)
DEFINES = ("PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION", "PINOCCHIO_WITH_COLLISION", "PINOCCHIO_WITH_HPP_FCL",
           "COAL_BACKWARD_COMPATIBILITY_WITH_HPP_FCL", "COAL_HAS_OCTOMAP", "COAL_HAVE_OCTOMAP",
           "OCTOMAP_MAJOR_VERSION=1", "OCTOMAP_MINOR_VERSION=10", "OCTOMAP_PATCH_VERSION=0",
           "BOOST_MPL_LIMIT_LIST_SIZE=30", "BOOST_MPL_LIMIT_VECTOR_SIZE=30", "BOOST_MPL_CFG_NO_PREPROCESSED_HEADERS",
           "BOOST_FUSION_INVOKE_MAX_ARITY=12", "NDEBUG")
LIBRARIES = ("pinocchio_collision", "pinocchio_default", "coal", f"boost_python{sys.version_info[0]}{sys.version_info[1]}")
# no -march: the wheels' baseline x86-64 code; no FMA contraction: the arithmetic of the Python path
FLAGS = ("-O2", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off", "-w")


def prefix() -> Path:
    """The prefix of the installed Pinocchio (include/, lib/): pinocchio's Python package is in its
    lib/python3.X/site-packages (the wheels' cmeel prefix; /opt/ros/jazzy for apt's ros-jazzy-pinocchio)."""
    import pinocchio
    return Path(pinocchio.__file__).resolve().parents[4]


def eigen_candidates() -> list[Path]:
    """The folders searched for Eigen's headers (``<folder>/Eigen/Core``), in order: ``$EIGEN3_INCLUDE_DIR``,
    Pinocchio's prefix (the cmeel-eigen wheel), ``$CONDA_PREFIX``, the system's (apt libeigen3-dev), a ROS
    install's."""
    found = [Path(os.environ["EIGEN3_INCLUDE_DIR"])] if os.environ.get("EIGEN3_INCLUDE_DIR") else []
    found.append(prefix() / "include" / "eigen3")
    if os.environ.get("CONDA_PREFIX"):
        found.append(Path(os.environ["CONDA_PREFIX"]) / "include" / "eigen3")
    found += [Path("/usr/include/eigen3"), Path("/usr/local/include/eigen3"), Path("/opt/ros/jazzy/include/eigen3"),
              Path("/opt/ros/jazzy/include")]
    return found


def eigen_include_dir() -> Path | None:
    """The first of :func:`eigen_candidates` that holds ``Eigen/Core``; None if none does (the compiler's own
    search path may still have it)."""
    return next((d for d in eigen_candidates() if (d / "Eigen" / "Core").is_file()), None)


def _first_error_lines(output: str, n: int = 6) -> str:
    """The compiler's first error and the ``n - 1`` lines after it (else the output's first ``n`` lines): the
    first error is the cause, what follows it mostly its consequences."""
    lines = output.strip().splitlines()
    start = next((i for i, line in enumerate(lines) if "error" in line.lower()), 0)
    return "\n".join(lines[start:start + n])


class NativeModule:
    """One compiled module: ``source`` (a .cpp file of the package) built as the extension module ``name``."""

    def __init__(self, source: Path, name: str):
        self.source, self.name = source, name
        self._loaded: dict = {}

    def _command(self, output: Path) -> list[str]:
        p = prefix()
        eigen = eigen_include_dir()
        cxx = os.environ.get("CXX", "g++")
        return ([cxx, *FLAGS, *(f"-D{d}" for d in DEFINES), f"-I{p / 'include'}",
                 *([f"-I{eigen}"] if eigen is not None else []), f"-I{sysconfig.get_paths()['include']}",
                 str(self.source), "-o", str(output), f"-L{p / 'lib'}", f"-Wl,-rpath,{p / 'lib'}",
                 *(f"-l{lib}" for lib in LIBRARIES)])

    def library_path(self) -> Path:
        """Where the build of the current source lives (it may not exist)."""
        h = hashlib.sha256(self.source.read_bytes())
        h.update(" ".join((*FLAGS, *DEFINES, *LIBRARIES, sys.version)).encode())
        suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
        return cache_dir() / "native" / f"{self.name}-{h.hexdigest()[:16]}{suffix}"

    def build(self, force: bool = False) -> Path:
        """Compile the module unless its build exists (``force``: again); returns its path. Raises RuntimeError
        with the compiler's first error lines on failure (and, when Eigen's headers were not found, where they
        were looked for). Older builds of this module in the folder are removed."""
        path = self.library_path()
        if path.exists() and not force:
            return path
        if shutil.which(os.environ.get("CXX", "g++")) is None:
            raise RuntimeError(f"no C++ compiler (g++; set CXX): {self.source.name} is not built")
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            out = Path(tmp) / path.name
            done = subprocess.run(self._command(out), capture_output=True, text=True)
            if done.returncode != 0:
                first = _first_error_lines(done.stderr or done.stdout)
                hint = ""
                if eigen_include_dir() is None:
                    hint = ("\n(Eigen's headers are in none of " + ", ".join(map(str, eigen_candidates()))
                            + ": install them, e.g. apt libeigen3-dev, or set EIGEN3_INCLUDE_DIR)")
                raise RuntimeError(f"compiling {self.source.name} against {prefix()} failed:\n{first}{hint}")
            os.replace(out, path)
        for old in path.parent.glob(f"{self.name}-*"):
            if old != path:
                old.unlink(missing_ok=True)
        return path

    def load(self):
        """The compiled module if its build of the current source exists, else None (never compiles)."""
        if "module" not in self._loaded:
            path = self.library_path()
            module = None
            if path.exists():
                import pinocchio  # noqa: F401  (registers the Boost.Python converters the module uses)
                spec = importlib.util.spec_from_file_location(self.name, path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
            self._loaded["module"] = module
        return self._loaded["module"]


_PACKAGE = Path(__file__).resolve().parent
NARROW_PHASE = NativeModule(_PACKAGE / "geometry" / "narrow_phase.cpp", "_narrow_phase")
RIGID_BODY = NativeModule(_PACKAGE / "sim" / "rigid_body_dynamics.cpp", "_rigid_body_dynamics")
MODULES = (NARROW_PHASE, RIGID_BODY)
