"""The compiled kernels' shared on-disk cache (contact_sim_ros/jit.py, the decorator; contact_sim_ros/kernel_cache.py,
what it holds and the warm-up): a fresh process loads every kernel its
first steps need from the cache (numba's dispatcher stats: cache hits, no compilation), from any install
location of the package, and a missing cache is announced before the first step.

Not timed: the assertions are on numba's own record of what it loaded and what it compiled.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# steps two engines (and the contact query, free bodies) and prints what numba loaded / compiled: on the default
# scene (the fused tree step) and on the ICF paper's rod sliding on the ground (coal's pair near: the staged step)
_PROBE = r"""
import json, sys
from contact_sim_ros import jit, kernel_cache
from contact_sim_ros.resources import share_dir
from contact_sim_ros.sim.simulator import Simulator
for engine in sys.argv[1:]:
    for scene in ("scenes/default.yaml", "scenes/icf_sliding_rod.yaml"):
        sim = Simulator(str(share_dir() / scene), engine=engine, time_step=1e-3)
        for _ in range(10):
            assert sim.step().ok
        assert sim.contacts is not None and sim.contacts.size > 0
print(json.dumps({"stats": kernel_cache.kernel_stats(), "uncached": kernel_cache.uncached_modules(),
                  "cache_dir": str(jit.cache_dir()), "jit_file": jit.__file__}))
"""


def _python(code_or_args, env=None, cwd=None, timeout=600):
    args = ["-c", code_or_args] if isinstance(code_or_args, str) else list(code_or_args)
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=cwd or ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def filled_cache():
    """make venv's warm-up (quick when the cache is already filled)."""
    _python(["-m", "contact_sim_ros.kernel_cache", "--engines", "tamsi", "lagged"])


@pytest.mark.process
def test_a_fresh_process_loads_the_kernels_from_the_cache_and_compiles_nothing(filled_cache):
    out = json.loads(_python([*("-c", _PROBE), "tamsi", "lagged"]).stdout.splitlines()[-1])
    stats = out["stats"]
    compiled = {name: s for name, s in stats.items() if s["misses"]}
    assert not compiled, f"compiled in a fresh process although the cache was filled: {compiled}"
    loaded = {name for name, s in stats.items() if s["hits"]}
    for kernel in ("geometry.contact_kernels.finish_contacts", "engines.tamsi_kernels.newton_step_packed",
                   "engines.icf_kernels.icf_step", "sim.tree_step.tree_tamsi_step", "sim.tree_step.tree_icf_step"):
        assert f"contact_sim_ros.{kernel}" in loaded, (kernel, sorted(loaded))
    assert out["uncached"] == []


@pytest.mark.process
def test_icf_engines_load_their_step_from_the_cache_on_scenes_unlike_the_warm_up(filled_cache):
    """The warm-up steps the ICF engines on the default scene (a robot with joint friction, contacts); a node on a
    scene without joint friction (read-only joint damping) or without any contact, with Lagged or SAP, still
    loads its one compiled step (the fused tree step's sim/tree_step.tree_icf_step, which calls
    icf_kernels.icf_step: the rolling sphere of free bodies and the iiwa + WSG held clear both take it) from
    the cache and compiles none of the ICF kernels nor the tree step."""
    code = r"""
import json
from contact_sim_ros import kernel_cache
from contact_sim_ros.resources import share_dir
from contact_sim_ros.sim.simulator import Simulator
for scene, engine in (("scenes/icf_falling_sphere.yaml", "lagged"), ("scenes/icf_falling_sphere.yaml", "sap"),
                      ("benchmarks/peers/scenes/iiwa_wsg_pd.yaml", "lagged")):
    sim = Simulator(str(share_dir() / scene), engine=engine, time_step=1e-3)
    for _ in range(5):
        assert sim.step().ok
print(json.dumps(kernel_cache.kernel_stats()))
"""
    stats = json.loads(_python(code).stdout.splitlines()[-1])
    icf = {name: s for name, s in stats.items() if ".icf_kernels." in name or ".tree_step." in name}
    assert icf["contact_sim_ros.sim.tree_step.tree_icf_step"]["hits"] == 1, icf
    assert not {name: s for name, s in icf.items() if s["misses"]}, icf


@pytest.mark.process
def test_the_fused_free_body_step_loads_from_the_cache(filled_cache):
    """The warm-up also steps TAMSI on the falling sphere: a fresh process stepping free bodies on sphere-halfspace
    pairs with TAMSI (sim/free_body_step.py, one compiled call per step) loads that call and compiles nothing."""
    code = r"""
import json
from contact_sim_ros import kernel_cache
from contact_sim_ros.resources import share_dir
from contact_sim_ros.sim.simulator import Simulator
sim = Simulator(str(share_dir() / "scenes/icf_falling_sphere.yaml"), engine="tamsi", time_step=2e-3)
assert sim._fused is not None
for _ in range(5):
    assert sim.step().ok
print(json.dumps(kernel_cache.kernel_stats()))
"""
    stats = json.loads(_python(code).stdout.splitlines()[-1])
    assert stats["contact_sim_ros.sim.free_body_step.free_body_tamsi_step"]["hits"] == 1, stats
    assert not {name: s for name, s in stats.items() if s["misses"]}, stats


@pytest.mark.process
@pytest.mark.parametrize("engine, kernel", [("tamsi", "tree_tamsi_step"), ("lagged", "tree_icf_step")])
def test_the_fused_tree_step_loads_from_the_cache(filled_cache, engine, kernel):
    """The warm-up also steps TAMSI and the ICF engines on the Allegro hand far from its mug (the fused tree step,
    sim/tree_step.py): a fresh process stepping the box on planar joints, another tree on compiled pairs with a
    scripted wrench, loads that call (tree_tamsi_step, or tree_icf_step with Lagged) and compiles nothing."""
    code = r"""
import json, sys
from contact_sim_ros import kernel_cache
from contact_sim_ros.resources import share_dir
from contact_sim_ros.sim.simulator import Simulator
sim = Simulator(str(share_dir() / "benchmarks/peers/scenes/planar_box.yaml"), engine=sys.argv[1], time_step=1e-3)
assert sim._tree is not None
for _ in range(5):
    assert sim.step().ok
print(json.dumps(kernel_cache.kernel_stats()))
"""
    stats = json.loads(_python(["-c", code, engine]).stdout.splitlines()[-1])
    assert stats[f"contact_sim_ros.sim.tree_step.{kernel}"]["hits"] == 1, stats
    assert not {name: s for name, s in stats.items() if s["misses"]}, stats


@pytest.mark.process
def test_another_install_location_shares_the_cache(tmp_path, filled_cache):
    """A copy of the package elsewhere (as a colcon or pip install would place it) finds the compiled code
    the checkout's processes wrote: the cache is keyed by the module's path inside the package and its
    content, not by where it is installed."""
    site = tmp_path / "site-packages"
    shutil.copytree(ROOT / "contact_sim_ros", site / "contact_sim_ros",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(site), "CONTACT_SIM_SHARE_DIR": str(ROOT)}
    out = json.loads(_python([*("-c", _PROBE), "tamsi"], env=env, cwd=tmp_path).stdout.splitlines()[-1])
    assert Path(out["jit_file"]).is_relative_to(site)          # really the copy
    stats = out["stats"]
    assert not {n: s for n, s in stats.items() if s["misses"]}, stats
    assert stats["contact_sim_ros.engines.tamsi_kernels.newton_step_packed"]["hits"] >= 1


@pytest.mark.process
def test_cache_location_and_cold_start_announcement(tmp_path, filled_cache):
    empty = tmp_path / "numba"
    code = ("import json; from contact_sim_ros import jit, kernel_cache as kc; "
            "print(json.dumps([str(jit.cache_dir()), kc.cold_start_note('tamsi'), kc.cold_start_note('lagged'),"
            " kc.uncached_modules(), kc.cold_start_note('tamsi', driver=True)]))")
    where, tamsi, lagged, uncached, node = json.loads(_python(code, env={"NUMBA_CACHE_DIR": str(empty)}).stdout)
    assert where == str(empty)
    assert tamsi.startswith("compiling kernels, first start only: ~") and "tamsi_kernels" in tamsi
    # the node's first step also runs the driver's kernels (the ros2_control emulation); contact-sim run does not
    assert "control_kernels" in node and "tamsi_kernels" in node and "control_kernels" not in tamsi
    assert "icf_kernels" in lagged and "tamsi_kernels" not in lagged
    assert str(empty) in tamsi
    assert "contact_sim_ros.engines.tamsi_kernels" in uncached
    # nothing was compiled by asking: the per-module folders exist, no compiled code in them
    assert not list(empty.rglob("*.nbc"))
    # with the cache filled (the venv's), nothing is announced
    code = "from contact_sim_ros import kernel_cache; print(repr(kernel_cache.cold_start_note('tamsi')))"
    assert _python(code).stdout.strip() == "None"


def test_cache_dir_fallbacks(monkeypatch, tmp_path):
    from contact_sim_ros import jit
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "explicit"))
    assert jit.cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    (tmp_path / "venv").mkdir()
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    assert jit.cache_dir() == tmp_path / "venv" / ".cache" / "numba"
    monkeypatch.setattr(sys, "prefix", "/usr")                    # not a venv: the user's cache
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert jit.cache_dir() == tmp_path / "xdg" / "contact_sim_ros" / "numba"


@pytest.mark.process
def test_the_decorator_module_still_runs_the_warm_up_as_a_script(filled_cache):
    """``python -m contact_sim_ros.jit`` (scripts/ensure_venv.sh's step 6) is ``python -m
    contact_sim_ros.kernel_cache``: the warm-up, which fails unless the engines' kernel modules are then cached."""
    proc = _python(["-m", "contact_sim_ros.jit", "--engines", "tamsi"])
    assert "compiling the kernels into" in proc.stderr and "tamsi" in proc.stderr


def test_every_kernel_module_is_warmed_up_by_some_engine():
    """The kernel table is the engines' own ``kernel_modules``: every module whose functions carry the njit
    decorator is called by every engine's step (the contact query's, the free bodies') or named by an engine
    that has a warm-up scene, and every module an engine names holds kernels."""
    from contact_sim_ros import jit, kernel_cache
    from contact_sim_ros.engines.registry import engine_class, engine_names
    kernel_cache.uncached_modules()                    # imports every module of COMPILE_SECONDS
    for name in engine_names():
        engine_class(name)
    decorated = {module for module, _ in jit.KERNELS}
    named = {m for modules in kernel_cache.engine_kernels().values() for m in modules}
    assert named <= decorated, named - decorated
    assert decorated == set(kernel_cache.COMPILE_SECONDS), decorated ^ set(kernel_cache.COMPILE_SECONDS)
    warmed = named | set(kernel_cache.engine_kernel_modules("semi_implicit")) | set(kernel_cache.DRIVER)
    assert decorated == warmed, decorated - warmed
    runs = kernel_cache.warm_up_runs()
    assert {engine for engine, _ in runs} == set(kernel_cache.engine_kernels())
    assert all((ROOT / scene).is_file() for _, scene in runs)


# ------------------------------------------------------------------------------------- the cache entries' stamp

def _kernel_modules(root: Path) -> list[Path]:
    return sorted(p for p in (root / "contact_sim_ros").rglob("*.py") if "from ..jit import njit" in p.read_text())


def test_a_kernel_modules_stamp_is_its_sources_and_its_imports_content_wherever_installed(tmp_path):
    """jit.source_stamp (numba's validity stamp of a kernel module's cache entries): two copies of the package in
    different folders give every kernel module the same stamp; a changed callee module changes the stamp of the
    modules that import it, directly or through another kernel module, and of no other."""
    from contact_sim_ros import jit
    copies = []
    for name in ("checkout", "site-packages"):
        shutil.copytree(ROOT / "contact_sim_ros", tmp_path / name / "contact_sim_ros",
                        ignore=shutil.ignore_patterns("__pycache__"))
        copies.append(tmp_path / name)
    a, b = ({p.relative_to(root).as_posix(): jit.source_stamp(str(p), str(root)) for p in _kernel_modules(root)}
            for root in copies)
    assert a == b and len(a) >= 10 and len(set(a.values())) == len(a)
    # the free-body step calls the TAMSI kernels (inline) and the step kernels, which call free_body_kernels
    for callee, callers in (("engines/tamsi_kernels.py", {"engines/tamsi_kernels.py", "sim/free_body_step.py"}),
                            ("model/free_body_kernels.py", {"model/free_body_kernels.py", "sim/step_kernels.py",
                                                            "sim/free_body_step.py", "driver/control_kernels.py"})):
        path = copies[1] / "contact_sim_ros" / callee
        original = path.read_text()
        path.write_text(original.replace("import math", "import math  # changed", 1))
        changed = {p.relative_to(copies[1]).as_posix(): jit.source_stamp(str(p), str(copies[1]))
                   for p in _kernel_modules(copies[1])}
        assert {m for m in a if a[m] != changed[m]} == {f"contact_sim_ros/{m}" for m in callers}, callee
        path.write_text(original)
    # a module of the package imported in a function or in an `if` block (jit's __main__ block imports the
    # warm-up, which imports the whole package) is no part of the stamp
    probe = copies[1] / "contact_sim_ros" / "kernel_cache.py"
    probe.write_text(probe.read_text() + "\n# changed\n")
    assert {p.relative_to(copies[1]).as_posix(): jit.source_stamp(str(p), str(copies[1]))
            for p in _kernel_modules(copies[1])} == a


def test_package_imports_resolve_relative_absolute_and_submodule_imports(tmp_path):
    from contact_sim_ros import jit
    pkg = tmp_path / "contact_sim_ros"
    files = {"__init__.py": "", "jit.py": "", "a/__init__.py": "X = 1\n", "a/k.py": "", "a/m.py": "",
             "b/__init__.py": "", "b/deep/__init__.py": "", "b/deep/d.py": "",
             "b/caller.py": ('"""A docstring.\nfrom the cache: not an import\n"""\nimport math, numpy as np\n'
                             "from ..jit import njit\nfrom ..a import k, X\nfrom .deep import (\n    d,\n)\n"
                             "import contact_sim_ros.a.m\n\ndef f():\n    from ..a import nothing\n")}
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    found = jit.package_imports(str(pkg / "b/caller.py"), str(tmp_path))
    assert sorted(Path(p).relative_to(pkg).as_posix() for p in found) == [
        "a/__init__.py", "a/k.py", "a/m.py", "b/deep/d.py", "jit.py"]
    assert jit.package_parent("contact_sim_ros.b.caller", str(pkg / "b/caller.py")) == str(tmp_path)
    assert jit.package_parent("contact_sim_ros.b", str(pkg / "b/__init__.py")) == str(tmp_path)
    assert jit.package_parent("contact_sim_ros.a.caller", str(pkg / "b/caller.py")) is None
    assert jit.package_parent("other.b.caller", str(pkg / "b/caller.py")) is None


_CALLEE = """from ..jit import njit


@njit(inline="always")
def scale(x):
    return {factor} * x
"""

_CALLER = """from ..jit import njit
from .callee import scale


@njit
def twice(x):
    return 2.0 * scale(x)
"""


def test_a_cached_caller_compiles_again_when_only_its_callee_changed(tmp_path, monkeypatch):
    """End to end in this process: a kernel module (caller.py) that calls an inlined kernel of another module
    (callee.py), both under a temporary ``contact_sim_ros.stamp_probe`` package, numba's cache in tmp_path.
    Loaded again with only the callee changed (a checkout), the caller compiles again and computes with the new
    callee (with numba's stamp, the caller's own file's hash, it loaded the old callee's code from the cache);
    the same sources in a third folder (another install) load from the cache."""
    import contact_sim_ros
    from contact_sim_ros import jit
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    monkeypatch.setattr(jit, "KERNELS", [])                       # the probe's kernels are no package kernels
    package_path = list(contact_sim_ros.__path__)

    def forget():
        for name in [n for n in sys.modules if n.startswith("contact_sim_ros.stamp_probe")]:
            del sys.modules[name]
        vars(contact_sim_ros).pop("stamp_probe", None)

    def load(folder, factor):
        pkg = tmp_path / folder / "contact_sim_ros" / "stamp_probe"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "callee.py").write_text(_CALLEE.format(factor=factor))
        (pkg / "caller.py").write_text(_CALLER)
        forget()
        monkeypatch.setattr(contact_sim_ros, "__path__", [*package_path, str(pkg.parent)])
        importlib.invalidate_caches()
        caller = importlib.import_module("contact_sim_ros.stamp_probe.caller")
        assert Path(caller.__file__).is_relative_to(tmp_path / folder)
        value = caller.twice(1.5)
        stats = caller.twice.stats
        assert Path(stats.cache_path) == tmp_path / "numba" / "contact_sim_ros" / "stamp_probe"
        return value, sum(stats.cache_hits.values()), sum(stats.cache_misses.values())

    try:
        assert load("v1", 3.0) == (9.0, 0, 1)          # compiled, saved
        assert load("v1-again", 3.0) == (9.0, 1, 0)    # the same sources elsewhere: loaded
        assert load("v2", 5.0) == (15.0, 0, 1)         # the callee changed: compiled again
        assert load("v2-again", 5.0) == (15.0, 1, 0)
    finally:
        forget()
