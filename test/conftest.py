"""Settings of the whole test run.

* Bytecode is cached. The suite starts some hundred Python processes (sim_node, scenario runners, camera and viewer
  processes, Ray workers), each importing ~1100 modules (rclpy, numpy, scipy, numba, pinocchio, this package). The
  venv is installed without precompiled bytecode (scripts/ensure_venv.sh: Python writes it on first use), but an
  environment with PYTHONDONTWRITEBYTECODE=1 (as this machine's does) never writes it: every process
  then compiled every module from source, ~2 s of CPU per process start (a node refusing a bad file: 3.1 s of CPU,
  1.0 s with the bytecode cached). Here this process and every process it starts write and read the cache; where
  it goes (``__pycache__`` beside the sources, or PYTHONPYCACHEPREFIX) is left to the environment.
"""

import os
import sys

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


# ---------------------------------------------------------------------------------------------------- test sizes
# Every test has one size (as Drake's and Bazel's test sizes): make test runs the `unit` and `node` tests on two
# pytest-xdist workers, then the `process` and `campaign` tests.
#   unit      in the pytest process, no DDS, no process started;
#   node      in the pytest process over DDS (an in-process node, ros/inprocess_sim_node.py, an rclpy probe);
#   process   starts processes: the sim_node entry point, a scenario runner, colcon, a compiler, a camera or
#             viewer process (signals, exit codes, the launch path, the install space);
#   campaign  a Ray campaign (Ray's worker processes).
# A test says its size with a marker (`pytestmark = pytest.mark.process` for a whole module); without one it is
# `process` if it uses the `start_node` fixture, else `node` under test/ros/ and `unit` elsewhere. A unit or node
# test that starts a process fails with the reason (starts_no_process below), so the sizes stay true.
import multiprocessing.process  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import warnings  # noqa: E402

import pytest  # noqa: E402

SIZES = ("unit", "node", "process", "campaign")


# The test files that take longest on one make-test worker (test sizes process and campaign; seconds of wall time,
# `make test SIZES="process campaign" PYTEST_ARGS=--durations=30` at load ~10 on the 2-core machine: the install
# space's colcon build 250, test_campaign.py's Ray campaigns 170 + 70, test_campaign_faults.py 170 + 90, the
# viewer's browser tests 200 in all, test_campaign_perception.py 70, test_campaign_interrupt.py's eleven
# moments). pytest-xdist (--dist loadfile) hands files to the workers in collection order: these go first, so
# that none of them starts last and runs alone while the other workers are idle (longest first, as a list
# scheduler does).
LONGEST_FILES = ("test_install_space.py", "test_campaign.py", "test_campaign_faults.py", "test_viewer.py",
                 "test_campaign_interrupt.py", "test_campaign_perception.py",
                 # and of the first phase (unit and node), `make test PYTEST_ARGS=--durations=0` on the quiet machine
                 # (seconds of wall time on one worker, both phases: 90, 60, 59, 56, 48, 47): not listed, these started late ran
                 # alone for the phase's last ~40 s with the second core half idle
                 "test_simulation_interfaces.py", "test_engine_quasistatic.py", "test_packaging.py",
                 "test_request_bounds.py", "test_multi_robot.py", "test_campaign_compare.py")


def pytest_collection_finish(session):
    """What collection made (the modules, the test items) lives as long as the run: frozen out of the cyclic
    collector, the full collections (the memory tests' gc.collect(), an in-process node's model swap) scan only
    what the tests made since (sim_node.main() does the same after its start-up)."""
    import gc
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    rank = {name: k for k, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))      # stable: the rest keep their order
    for item in items:
        sizes = {m.name for m in item.iter_markers() if m.name in SIZES}
        if len(sizes) > 1:
            raise pytest.UsageError(f"{item.nodeid}: more than one size marker {sorted(sizes)}")
        if sizes:
            continue
        if "start_node" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.process)
        elif "ros" in item.path.relative_to(config.rootpath).parts[:2]:
            item.add_marker(pytest.mark.node)
        else:
            item.add_marker(pytest.mark.unit)


def _sigint_ignored() -> bool:
    """Whether this process ignores SIGINT (the kernel's view, /proc/self/status SigIgn: also what C code set)."""
    with open("/proc/self/status") as fh:
        ignored = next(line for line in fh if line.startswith("SigIgn:"))
    return bool(int(ignored.split(":", 1)[1], 16) & (1 << (signal.SIGINT - 1)))


# The Ctrl-C tests stand for a terminal's Ctrl-C, which reaches a foreground job: the processes they start must not
# begin with SIGINT ignored. A make test started as a background job of a non-interactive shell (`make test &` in a
# script, nohup ... &) inherits SIGINT ignored, and so would every process of the run: the tests that interrupt a
# command while it starts then saw it run to its end (found so: three runs started that way failed the same three
# tests, /proc/<pid>/status SigIgn set in the workers; one started in the foreground passed). The run itself gets
# Python's handler back here, as a foreground job has it.
if _sigint_ignored():
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def leaves_sigint_as_found(request):
    """A test that leaves this process ignoring SIGINT gets it back to Python's handler, with a warning naming the
    test: an ignored SIGINT is inherited across fork and exec, so every process a later test starts would ignore an
    early Ctrl-C."""
    before = _sigint_ignored()
    yield
    if _sigint_ignored() and not before:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        warnings.warn(f"SIGINT-LEAK: {request.node.nodeid} left this process ignoring SIGINT; reset",
                      stacklevel=1)


def _LIBRARY_LOOKUP(args) -> bool:
    """ctypes.util.find_library's `ldconfig -p` (the render back-end's EGL look-up): a library's probe, not a test's
    process."""
    argv = [args] if isinstance(args, (str, bytes)) else list(args)
    return bool(argv) and os.path.basename(str(argv[0])) == "ldconfig"


@pytest.fixture(autouse=True)
def starts_no_process(request, monkeypatch):
    """A unit or node test may start no process: subprocess.Popen and multiprocessing's Process.start raise, naming
    the test's size and the command."""
    size = next((m.name for m in request.node.iter_markers() if m.name in SIZES), None)
    if size in ("unit", "node"):
        popen_init = subprocess.Popen.__init__

        def refused(self, args, *a, **kw):
            if _LIBRARY_LOOKUP(args):
                return popen_init(self, args, *a, **kw)
            raise AssertionError(f"a {size} test starts no process (it ran {args!r}): mark the test "
                                 "pytest.mark.process (test/conftest.py, test sizes)")
        def refused_child(self):
            raise AssertionError(f"a {size} test starts no process (it started {self!r}): mark the test "
                                 "pytest.mark.process (test/conftest.py, test sizes)")
        monkeypatch.setattr(subprocess.Popen, "__init__", refused)
        monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refused_child)
    yield
