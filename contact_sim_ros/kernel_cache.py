"""What the compiled-kernel cache holds, and filling it (``contact-sim compile-kernels``).

The decorator and the cache's location are ``contact_sim_ros.jit`` (the bottom layer, which the kernel modules
import); this module is at the top: its warm-up steps a ``Simulator``. ``warm_up()`` steps every engine that has
kernels (an engine's ``kernel_modules``) a few times on its ``warm_up_scenes`` and calls the driver's kernels
(``DRIVER``, the ros2_control emulation's: their module's ``warm_up()``). ``contact-sim compile-kernels``
and ``python -m contact_sim_ros.kernel_cache`` run it; ``scripts/ensure_venv.sh`` runs it after building the venv, and
after a colcon build ``ros2 run contact_sim_ros contact-sim compile-kernels`` does it. ``cold_start_note(engine)``
says, before the first step, whether the engine's kernels still have to be compiled and about how long that
takes.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

from .engines.registry import engine_class, engine_names
from .native_build import MODULES
from .jit import KERNELS, cache_dir
from .resources import share_dir
from .sim.simulator import Simulator

# CPU seconds to compile each kernel module on the project's 2-core machine (benchmarks/node/run.py --startup,
# 2026-11-25 10:07 UTC, load ~1.4: a node's first start took 12.4 s with an empty cache against 2.3 s with it for
# TAMSI (contact query + tamsi_kernels), 22.2 s against 2.2 s for Lagged (contact query + icf_kernels); lcp_minimal
# + lemke ~5 s in the warm-up); wall time grows with the machine's load. Used for the announced estimate only.
COMPILE_SECONDS = {
    "contact_sim_ros.geometry.contact_kernels": 6.0,   # + the analytic sphere and box-halfspace pairs (issue 18)
    "contact_sim_ros.geometry.pair_bound_kernels": 1.5,   # the bounding-capsule test of the pairs from q (issue 18)
    "contact_sim_ros.geometry.contact_pass_kernels": 10.0,  # the query's whole pass with coal's pairs (the tree step)
    "contact_sim_ros.model.free_body_kernels": 0.5,
    "contact_sim_ros.sim.divergence_kernels": 0.5,
    "contact_sim_ros.sim.penetration_kernels": 0.3,   # the deep-interpenetration bound (issue 31)
    "contact_sim_ros.sim.step_kernels": 1.5,
    "contact_sim_ros.sim.free_body_step": 2.0,      # the fused free-body TAMSI step (sphere/box on the ground)
    "contact_sim_ros.sim.tree_step": 40.0,          # the fused tree step (TAMSI's and the ICF engines' kernel_modules)
    "contact_sim_ros.engines.tamsi_kernels": 7.0,
    "contact_sim_ros.engines.icf_kernels": 17.0,    # the whole step, deferred contacts, SAP line search (issue 18)
    "contact_sim_ros.engines.lcp_kernels": 2.0,
    "contact_sim_ros.solvers.lemke_kernels": 3.0,
    "contact_sim_ros.solvers.rtsafe": 0.5,          # the ICF engines' line search (also from their numpy path)
    "contact_sim_ros.driver.control_kernels": 2.0,  # the ros2_control emulation's per-step passes (the driver)
}
# kernel modules every engine's step calls: the contact query's, the free-body motion's and the free-body models'
# (sim/free_body_step.FreeBodies); an engine's own are its class's ``kernel_modules``
_COMMON = ("contact_sim_ros.geometry.contact_kernels", "contact_sim_ros.geometry.pair_bound_kernels",
           "contact_sim_ros.model.free_body_kernels", "contact_sim_ros.sim.divergence_kernels",
           "contact_sim_ros.sim.penetration_kernels", "contact_sim_ros.sim.step_kernels",
           "contact_sim_ros.sim.free_body_step")

# kernel modules of the ros2_control emulation (driver/): not called by a Simulator's step; each has a
# ``warm_up()`` that calls its kernels with the argument types the driver passes
DRIVER = ("contact_sim_ros.driver.control_kernels",)


def engine_kernels() -> dict[str, tuple[str, ...]]:
    """engine name -> the kernel modules of its own step (its class's ``kernel_modules``), for the engines that
    have any."""
    return {name: engine_class(name).kernel_modules for name in engine_names() if engine_class(name).kernel_modules}


def warm_up_runs(engines=None) -> list[tuple[str, str]]:
    """(engine, scene) pairs that make the kernels of ``engines`` (default: every engine with kernels) run: each
    engine's ``warm_up_scenes`` (contacts, free bodies), ``scenes/default.yaml`` for an engine that names none."""
    names = list(engine_kernels()) if engines is None else list(engines)
    return [(name, scene) for name in names for scene in (engine_class(name).warm_up_scenes
                                                          or ("scenes/default.yaml",))]


# ------------------------------------------------------------------------------------------- cache state

def _import_kernel_modules(modules) -> None:
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
    return _COMMON + engine_class(engine).kernel_modules


def cold_start_note(engine: str, driver: bool = False) -> str | None:
    """A one-line announcement when the first step of ``engine`` will compile kernels (cache missing or stale),
    else None. ``driver``: the step runs the ros2_control emulation (the node) and its kernels (``DRIVER``) too."""
    missing = uncached_modules(engine_kernel_modules(engine) + (DRIVER if driver else ()))
    if not missing:
        unbuilt = [m for m in MODULES if not m.library_path().exists()]
        if not unbuilt:
            return None
        return (f"the compiled modules {', '.join(m.source.name for m in unbuilt)} are not built "
                f"({unbuilt[0].library_path().parent}): the step runs their Python reference (the same results, "
                "slower: the narrow phase's ~2x); 'contact-sim compile-kernels' or 'make venv' builds them (g++)")
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

class NativeBuildError(RuntimeError):
    """A compiled module could not be built and the warm-up was told to require them (``require_native``)."""


def native_build_warning(module, error: Exception) -> str:
    """The warning of a failed build of ``module``: the compiler's first error lines and what runs instead."""
    return (f"warning: the compiled module {module.name} ({module.source.name}) is not built: {error}\n"
            f"  the step uses its Python reference path instead: the same results, slower (both modules: 1.1-1.8x "
            f"the step time of scenes/scenario_pick_shake_place.yaml with TAMSI); with --require-native "
            f"compile-kernels exits 1 here")


def warm_up(engines=None, steps: int = 30, out=None, require_native: bool = False) -> dict:
    """Compile (or load) the kernels of ``engines`` (default: every engine with kernels) by stepping each
    ``steps`` times on its warm-up scenes (``warm_up_runs``), so that the cache holds them, after building the
    compiled C++ modules (``native_build.MODULES``). A module that fails to build is a warning naming the
    compiler's first error lines (the steps then take its Python reference path), or, with ``require_native``,
    a NativeBuildError. Returns per engine the seconds it took. Prints one line per module, engine and scene to
    ``out`` (default stderr)."""
    out = out or sys.stderr
    runs = warm_up_runs(engines)
    times = {}
    print(f"compiling the kernels into {cache_dir()}", file=out, flush=True)
    start = time.perf_counter()
    for module in MODULES:                     # before the steps: they take them
        try:
            path = module.build()
        except (RuntimeError, OSError) as exc:
            if require_native:
                raise NativeBuildError(f"{module.name} ({module.source.name}) is not built: {exc}") from exc
            print(native_build_warning(module, exc), file=out, flush=True)
            start = time.perf_counter()
            continue
        print(f"  {module.name:16s} {f'({module.source.name}, g++)':34s} {time.perf_counter() - start:6.1f} s -> "
              f"{path}", file=out, flush=True)
        start = time.perf_counter()
    for engine, scene in runs:
        start = time.perf_counter()
        sim = Simulator(str(share_dir() / scene), engine=engine, time_step=1e-3)
        for _ in range(steps):
            report = sim.step()
            if not report.ok:
                raise RuntimeError(f"warm-up of engine {engine!r} on {scene}: step failed: {report.message}")
        report = sim.advance(2)          # a fused free-body scene's compiled period (free_body_tamsi_advance) too
        if not report.ok:
            raise RuntimeError(f"warm-up of engine {engine!r} on {scene}: advance failed: {report.message}")
        seconds = time.perf_counter() - start
        times[engine] = times.get(engine, 0.0) + seconds
        print(f"  {engine:16s} {scene:34s} {seconds:6.1f} s", file=out, flush=True)
    start = time.perf_counter()
    for module in DRIVER:
        importlib.import_module(module).warm_up()
    print(f"  {'driver':16s} {'(control_kernels.warm_up)':34s} {time.perf_counter() - start:6.1f} s", file=out,
          flush=True)
    missing = uncached_modules(sorted({m for engine, _ in runs for m in engine_kernel_modules(engine)}
                                      | set(DRIVER)))
    if missing:
        raise RuntimeError(f"kernels not cached after the warm-up: {', '.join(missing)} (cache {cache_dir()})")
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m contact_sim_ros.kernel_cache",
                                     description="compile the engines' kernels into the shared cache")
    parser.add_argument("--engines", nargs="*", help="engines to warm up (default: all with kernels)")
    parser.add_argument("--status", action="store_true", help="only print which kernel modules are cached")
    parser.add_argument("--require-native", action="store_true",
                        help="exit 1 when a compiled C++ module cannot be built (default: a warning, and the "
                             "Python reference path is used)")
    args = parser.parse_args(argv)
    if args.status:
        missing = uncached_modules()
        print(f"cache {cache_dir()}: " + ("all kernel modules cached" if not missing
                                           else "not cached: " + ", ".join(missing)))
        return 0 if not missing else 1
    try:
        warm_up(args.engines or None, require_native=args.require_native)
    except NativeBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
