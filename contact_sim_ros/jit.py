"""Compiled kernels (numba) with one on-disk cache that every install location of the package shares.

Every kernel module decorates its functions with ``contact_sim_ros.jit.njit`` (numba's ``njit``, always with
``cache=True``). Compiling the kernels takes 15-60 s on 2 cores (TAMSI alone ~17 s), and numba's own caches are
per location: the ``__pycache__`` next to the source (a colcon install, a pip install and the checkout each
compile again; a read-only install never caches) or, with NUMBA_CACHE_DIR, a folder named after the source
directory's absolute path. Here the compiled code of ``contact_sim_ros/<dir>/<module>.py`` goes to
``cache_dir()/contact_sim_ros/<dir>/`` wherever the package is installed: numba keys each entry by a hash of the
source file's content, the signature and the CPU, so identical sources share the entries and a changed file is
compiled again (and its entries replaced).

``cache_dir()``, the first that applies:

1. ``$NUMBA_CACHE_DIR`` (``scripts/venv_env.sh`` sets it to ``<venv>/.cache/numba`` for the project venv);
2. ``<sys.prefix>/.cache/numba`` when Python runs in a writable venv (the same folder for ``.venv/bin/python``
   started without ``venv_run.sh``);
3. ``$XDG_CACHE_HOME/contact_sim_ros/numba``, default ``~/.cache/contact_sim_ros/numba`` (colcon / system
   installs).

If that folder cannot be written, numba's own locations are used (``__pycache__``, then its user-wide cache).

Filling the cache: ``warm_up()`` steps every engine that has kernels a few times on a small scene with contacts
(``contact-sim compile-kernels``; ``scripts/ensure_venv.sh`` runs it after building the venv, and after a colcon
build ``ros2 run contact_sim_ros contact-sim compile-kernels`` does). ``cold_start_note(engine)`` says, before
the first step, whether the engine's kernels still have to be compiled and about how long that takes.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from numba import njit as _numba_njit
from numba.core import caching as _caching

_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # the folder holding the package

# CPU seconds to compile each kernel module on the project's 2-core machine (benchmarks/node/run.py --startup,
# 2026-11-25 10:07 UTC, load ~1.4: a node's first start took 12.4 s with an empty cache against 2.3 s with it for
# TAMSI (contact query + tamsi_kernels), 22.2 s against 2.2 s for Lagged (contact query + icf_kernels); lcp_minimal
# + lemke ~5 s in the warm-up); wall time grows with the machine's load. Used for the announced estimate only.
COMPILE_SECONDS = {
    "contact_sim_ros.geometry.contact_kernels": 6.0,   # + the analytic sphere and box-halfspace pairs (issue 18)
    "contact_sim_ros.geometry.pair_bounds": 1.5,       # the bounding-capsule test of the pairs from q (issue 18)
    "contact_sim_ros.model.free_body_motion": 0.5,
    "contact_sim_ros.sim.divergence": 0.5,
    "contact_sim_ros.sim.penetration": 0.3,        # the deep-interpenetration bound (issue 31)
    "contact_sim_ros.sim.step_kernels": 1.5,
    "contact_sim_ros.sim.free_body_step": 2.0,      # the fused free-body TAMSI step (sphere/box on the ground)
    "contact_sim_ros.engines.tamsi_kernels": 7.0,
    "contact_sim_ros.engines.icf_kernels": 17.0,    # the whole step, deferred contacts, SAP line search (issue 18)
    "contact_sim_ros.engines.lcp_minimal": 2.0,
    "contact_sim_ros.solvers.lemke": 3.0,
}
_COMMON = ("contact_sim_ros.geometry.contact_kernels", "contact_sim_ros.geometry.pair_bounds",
           "contact_sim_ros.model.free_body_motion", "contact_sim_ros.sim.divergence",
           "contact_sim_ros.sim.penetration", "contact_sim_ros.sim.step_kernels", "contact_sim_ros.sim.free_body_step")
# kernel modules each engine's step calls (besides the contact query's, the free-body motion's and the free-body
# models' (sim/free_body_step.FreeBodies), which every engine's step calls)
ENGINE_KERNELS = {
    "tamsi": ("contact_sim_ros.engines.tamsi_kernels",),
    "lagged": ("contact_sim_ros.engines.icf_kernels",),
    "similar": ("contact_sim_ros.engines.icf_kernels",),
    "sap": ("contact_sim_ros.engines.icf_kernels",),
    "lcp_minimal": ("contact_sim_ros.engines.lcp_minimal", "contact_sim_ros.solvers.lemke"),
    "quasistatic_lcp": ("contact_sim_ros.solvers.lemke",),
}
# the engines warm_up() runs, each on a scene that makes its kernels run (contacts, free bodies)
WARM_UP_RUNS = (
    ("tamsi", "scenes/default.yaml"),
    ("tamsi", "scenes/icf_falling_sphere.yaml"),     # free bodies only: sim/free_body_step.py's fused step
    ("lagged", "scenes/default.yaml"),
    ("similar", "scenes/default.yaml"),
    ("sap", "scenes/default.yaml"),
    ("lcp_minimal", "scenes/lcp_incline.yaml"),
    ("quasistatic_lcp", "scenes/quasistatic_iiwa_box.yaml"),
)

KERNELS: list = []   # (module name, dispatcher) of every function decorated with njit below, in definition order


def cache_dir() -> Path:
    """The folder that holds the compiled kernels (see the module docstring)."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        return Path(env)
    if sys.prefix != getattr(sys, "base_prefix", sys.prefix) and os.access(sys.prefix, os.W_OK):
        return Path(sys.prefix) / ".cache" / "numba"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "contact_sim_ros" / "numba"


class _PackageCacheLocator(_caching._SourceFileBackedLocatorMixin, _caching._CacheLocator):
    """numba cache locator for this package's modules: ``cache_dir()/<path of the module's folder relative to
    the folder holding the package>`` (e.g. ``.../numba/contact_sim_ros/engines``), independent of where the
    package is installed. The source stamp is numba's (a hash of the file's content)."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        rel = os.path.relpath(os.path.dirname(os.path.abspath(py_file)), _PACKAGE_PARENT)
        self._cache_path = str(cache_dir() / rel)

    def get_cache_path(self):
        return self._cache_path

    @classmethod
    def from_function(cls, py_func, py_file):
        rel = os.path.relpath(os.path.dirname(os.path.abspath(py_file)), _PACKAGE_PARENT)
        if rel.startswith(".."):
            return None                     # not a module of this package
        return super().from_function(py_func, py_file)   # None when the folder cannot be written


class _PackageCacheImpl(_caching.CompileResultCacheImpl):
    _locator_classes = [_PackageCacheLocator, *_caching.CompileResultCacheImpl._locator_classes]


class _PackageFunctionCache(_caching.FunctionCache):
    _impl_class = _PackageCacheImpl


def njit(*args, **kwargs):
    """``numba.njit`` with the package's shared on-disk cache (``cache=True`` is implied)."""
    kwargs.pop("cache", None)

    def register(dispatcher):
        dispatcher._cache = _PackageFunctionCache(dispatcher.py_func)     # what enable_caching() does
        KERNELS.append((dispatcher.py_func.__module__, dispatcher))
        return dispatcher

    if len(args) == 1 and callable(args[0]) and not kwargs:
        return register(_numba_njit(args[0]))
    decorator = _numba_njit(*args, **kwargs)
    return lambda func: register(decorator(func))


# ------------------------------------------------------------------------------------------- cache state

def _import_kernel_modules(modules) -> None:
    import importlib
    for module in modules:
        importlib.import_module(module)


def _has_cached_code(dispatcher) -> bool:
    """True when the dispatcher's cache index holds entries for the current source of its module."""
    try:
        return bool(dispatcher._cache._cache_file._load_index())
    except Exception:   # noqa: BLE001 - numba internals; unknown means "not known to be cached"
        return False


def uncached_modules(modules=None) -> list[str]:
    """The kernel modules (default: all of ``COMPILE_SECONDS``) none of whose functions has compiled code in
    the cache for the module's current source: their first call compiles."""
    modules = list(COMPILE_SECONDS) if modules is None else list(modules)
    _import_kernel_modules(modules)
    cached = {module for module, dispatcher in KERNELS if _has_cached_code(dispatcher)}
    return [m for m in modules if m not in cached]


def engine_kernel_modules(engine: str) -> tuple[str, ...]:
    """The kernel modules the step of ``engine`` calls (the contact query's, the free-body motion's and the
    engine's own)."""
    return _COMMON + ENGINE_KERNELS.get(engine, ())


def cold_start_note(engine: str) -> str | None:
    """A one-line announcement when the first step of ``engine`` will compile kernels (cache missing or stale),
    else None."""
    missing = uncached_modules(engine_kernel_modules(engine))
    if not missing:
        return None
    seconds = sum(COMPILE_SECONDS.get(m, 5.0) for m in missing)
    names = ", ".join(m.rsplit(".", 1)[1] for m in missing)
    return (f"compiling kernels, first start only: ~{seconds:.0f} s ({names}: no compiled code in {cache_dir()}; "
            "the first step waits for it; 'contact-sim compile-kernels' or 'make venv' fills the cache)")


def kernel_stats() -> dict[str, dict]:
    """Per kernel ``module.function``: the signatures numba loaded from the cache (``hits``) and the ones it
    compiled in this process (``misses``), from the dispatchers' ``stats``."""
    out = {}
    for module, dispatcher in KERNELS:
        stats = dispatcher.stats
        hits, misses = dict(stats.cache_hits), dict(stats.cache_misses)
        if hits or misses:
            out[f"{module}.{dispatcher.py_func.__name__}"] = {"hits": sum(hits.values()),
                                                             "misses": sum(misses.values())}
    return out


# ------------------------------------------------------------------------------------------------ warm-up

def warm_up(engines=None, steps: int = 30, out=None) -> dict:
    """Compile (or load) the kernels of ``engines`` (default: every engine of ``WARM_UP_RUNS``) by stepping each
    ``steps`` times on its warm-up scene, so that the cache holds them. Returns per engine the seconds it took.
    Prints one line per engine to ``out`` (default stderr)."""
    from .resources import share_dir
    from .sim.simulator import Simulator
    out = out or sys.stderr
    runs = [(e, s) for e, s in WARM_UP_RUNS if engines is None or e in engines]
    if engines is not None:
        known = {e for e, _ in WARM_UP_RUNS}
        runs += [(e, "scenes/default.yaml") for e in engines if e not in known]
    times = {}
    print(f"compiling the kernels into {cache_dir()}", file=out, flush=True)
    for engine, scene in runs:
        start = time.perf_counter()
        sim = Simulator(str(share_dir() / scene), engine=engine, time_step=1e-3)
        for _ in range(steps):
            report = sim.step()
            if not report.ok:
                raise RuntimeError(f"warm-up of engine {engine!r} on {scene}: step failed: {report.message}")
        times[engine] = time.perf_counter() - start
        print(f"  {engine:16s} {scene:34s} {times[engine]:6.1f} s", file=out, flush=True)
    missing = uncached_modules()
    if missing:
        raise RuntimeError(f"kernels not cached after the warm-up: {', '.join(missing)} (cache {cache_dir()})")
    return times


def main(argv=None) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m contact_sim_ros.jit",
                                     description="compile the engines' kernels into the shared cache")
    parser.add_argument("--engines", nargs="*", help="engines to warm up (default: all with kernels)")
    parser.add_argument("--status", action="store_true", help="only print which kernel modules are cached")
    args = parser.parse_args(argv)
    if args.status:
        missing = uncached_modules()
        print(f"cache {cache_dir()}: " + ("all kernel modules cached" if not missing
                                           else "not cached: " + ", ".join(missing)))
        return 0 if not missing else 1
    warm_up(args.engines or None)
    return 0


if __name__ == "__main__":
    # run the package's module, not this __main__ copy (the kernel modules register with contact_sim_ros.jit)
    from contact_sim_ros import jit as _jit
    sys.exit(_jit.main())
