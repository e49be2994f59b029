"""Build and load the compiled narrow phase (``narrow_phase.cpp``, a Boost.Python module ``_narrow_phase``).

The module is compiled with g++ against the headers and shared libraries that the pinocchio, coal, eigenpy and
cmeel-eigen wheels install (``<site-packages>/cmeel.prefix``), with the compile definitions of their CMake targets,
into the kernel cache's folder ``jit.cache_dir() / "native"``, named after a hash of
the source, the flags and the Python version: a changed source is built anew, every install location shares one
build. It is built by the warm-up (``python -m contact_sim_ros.jit``, run by the project's set-up; ~40-90 s on 2
cores) and only loaded at run time: a process never compiles it in its first step. Without it (no compiler, a
failed build) ``ContactQuery`` takes the Python narrow phase, which gives the same contacts (tests compare them).
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

from ..jit import cache_dir

SOURCE = Path(__file__).with_name("narrow_phase.cpp")
MODULE = "_narrow_phase"
# the compile definitions of the wheels' CMake targets (pinocchio::pinocchio_collision, coal::coal)
DEFINES = ("PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION", "PINOCCHIO_WITH_COLLISION", "PINOCCHIO_WITH_HPP_FCL",
           "COAL_BACKWARD_COMPATIBILITY_WITH_HPP_FCL", "COAL_HAS_OCTOMAP", "COAL_HAVE_OCTOMAP",
           "OCTOMAP_MAJOR_VERSION=1", "OCTOMAP_MINOR_VERSION=10", "OCTOMAP_PATCH_VERSION=0",
           "BOOST_MPL_LIMIT_LIST_SIZE=30", "BOOST_MPL_LIMIT_VECTOR_SIZE=30", "BOOST_MPL_CFG_NO_PREPROCESSED_HEADERS",
           "BOOST_FUSION_INVOKE_MAX_ARITY=12", "NDEBUG")
LIBRARIES = ("pinocchio_collision", "pinocchio_default", "coal", f"boost_python{sys.version_info[0]}{sys.version_info[1]}")
# no -march: the wheels' baseline x86-64 code; no FMA contraction: the arithmetic of the Python path
FLAGS = ("-O2", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off", "-w")

_loaded: dict = {}


def prefix() -> Path:
    """The cmeel prefix of the pinocchio / coal wheels (include/, lib/): pinocchio's package is in its
    lib/python3.X/site-packages."""
    import pinocchio
    return Path(pinocchio.__file__).resolve().parents[4]


def _command(output: Path) -> list[str]:
    p = prefix()
    cxx = os.environ.get("CXX", "g++")
    return ([cxx, *FLAGS, *(f"-D{d}" for d in DEFINES), f"-I{p / 'include'}", f"-I{p / 'include' / 'eigen3'}",
             f"-I{sysconfig.get_paths()['include']}", str(SOURCE), "-o", str(output), f"-L{p / 'lib'}",
             f"-Wl,-rpath,{p / 'lib'}", *(f"-l{lib}" for lib in LIBRARIES)])


def library_path() -> Path:
    """Where the build of the current source lives (it may not exist)."""
    h = hashlib.sha256(SOURCE.read_bytes())
    h.update(" ".join((*FLAGS, *DEFINES, *LIBRARIES, sys.version)).encode())
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return cache_dir() / "native" / f"{MODULE}-{h.hexdigest()[:16]}{suffix}"


def build(force: bool = False) -> Path:
    """Compile the module unless its build exists (``force``: again); returns its path. Raises RuntimeError with
    the compiler's last lines on failure. Older builds in the folder are removed."""
    path = library_path()
    if path.exists() and not force:
        return path
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        raise RuntimeError("no C++ compiler (g++; set CXX): the compiled narrow phase is not built")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        out = Path(tmp) / path.name
        done = subprocess.run(_command(out), capture_output=True, text=True)
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
            raise RuntimeError(f"compiling {SOURCE.name} failed:\n{tail}")
        os.replace(out, path)
    for old in path.parent.glob(f"{MODULE}-*"):
        if old != path:
            old.unlink(missing_ok=True)
    return path


def load():
    """The compiled module if its build of the current source exists, else None (never compiles)."""
    if "module" not in _loaded:
        path = library_path()
        module = None
        if path.exists():
            import pinocchio  # noqa: F401  (registers the Boost.Python converters the module uses)
            spec = importlib.util.spec_from_file_location(MODULE, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        _loaded["module"] = module
    return _loaded["module"]
