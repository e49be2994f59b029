"""Packaging: package.xml, setup.py (as colcon installs it), requirements.txt, console scripts, resources.

The install test runs setup.py the way colcon's ament_python build does (egg_info/build/install with
--single-version-externally-managed into a prefix) in a temporary directory, then checks the installed layout
and that a Python started in that prefix (ament index, no source tree) finds the package data.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import contact_sim_ros
from contact_sim_ros import resources
from contact_sim_ros.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
SHARE_FOLDERS = ("launch", "config", "urdf", "scenes", "meshes")
CONSOLE_SCRIPTS = {
    "contact-sim": "contact_sim_ros.cli:main",
    "sim_node": "contact_sim_ros.ros.sim_node_entry:main",
}

# import name -> rosdep key in package.xml (ROS packages whose key is their own name are not listed)
ROSDEP_KEY = {
    "numpy": "python3-numpy",
    "scipy": "python3-scipy",
    "yaml": "python3-yaml",
    "pinocchio": "pinocchio",
    "urdf_parser_py": "urdfdom_py",
    "pytest": "python3-pytest",
    "numba": "python3-numba",
    "websockets": "python3-websockets",
    "matplotlib": "python3-matplotlib",
    "PIL": "python3-pil",
}
# import name -> PyPI distribution in requirements.txt (ROS packages: ros-jazzy-<name with dashes>)
PYPI_DIST = {
    "numpy": "numpy",
    "scipy": "scipy",
    "yaml": "PyYAML",
    "pinocchio": "pin",
    "coal": "coal",
    "urdf_parser_py": "urdf-parser-py",
    "pyscipopt": "pyscipopt",
    "daqp": "daqp",
    "matplotlib": "matplotlib",
    "PIL": "pillow",
    "pytest": "pytest",
    "viser": "viser",
    "numba": "numba",
    "websockets": "websockets",
    "xacro": "xacro",
    "rosbags": "rosbags",
    "mcap": "mcap",
    "ray": "ray",
    "pyarrow": "pyarrow",
    "tqdm": "tqdm",
    "moderngl": "moderngl",
    "trimesh": "trimesh",
    "coacd": "coacd",
}
# imports with no rosdep key: installed with pip (README's colcon section and package.xml's comment say so)
PIP_ONLY = {"daqp", "pyscipopt", "viser", "rosbags", "mcap", "ray", "pyarrow", "tqdm", "moderngl", "trimesh", "coacd"}
# Every key package.xml may declare, checked against rosdistro (github.com/ros/rosdistro, commit 8468e88ccd,
# 2026-08-22): ROS 2 Jazzy packages in jazzy/distribution.yaml (release repository in the comment) and system
# keys in rosdep/python.yaml. `rosdep install --from-paths src` fails on any other key (e.g. ament_python, a
# build type, not a key). contact_sim_msgs is not a rosdep key: it is built from msgs/ in the same workspace,
# which --from-paths src resolves. Add a key here only after finding it in those files.
ROSDEP_KEYS_JAZZY = {
    "rclpy",                                                                  # rclpy
    "builtin_interfaces", "rcl_interfaces", "rosgraph_msgs", "lifecycle_msgs",  # rcl_interfaces
    "std_msgs", "std_srvs", "sensor_msgs", "geometry_msgs", "trajectory_msgs",
    "visualization_msgs", "diagnostic_msgs",                                 # common_interfaces
    "tf2_msgs",                                                               # geometry2
    "ament_index_python",                                                     # ament_index
    "launch", "launch_ros",                                                   # launch, launch_ros
    "pinocchio", "coal",                                                      # pinocchio, coal
    "urdfdom_py",                                                             # urdf_parser_py
    "control_msgs", "controller_manager_msgs", "xacro",                      # control_msgs, ros2_control, xacro
    "simulation_interfaces",                                                  # simulation_interfaces
    "ament_copyright", "ament_flake8", "ament_pep257",                       # ament_lint
    "python3-numpy", "python3-scipy", "python3-yaml", "python3-numba", "python3-websockets",
    "python3-pytest", "python3-matplotlib", "python3-pil",                                          # rosdep/python.yaml
}
# built from msgs/ in the same workspace (colcon finds msgs/*/package.xml under src/): franka_msgs is franka_ros2's
# (jazzy branch 3.4.0), whose presence in rosdistro's jazzy/distribution.yaml was not checked
IN_WORKSPACE = {"contact_sim_msgs", "franka_msgs"}
# optional back-ends, imported lazily with a clear error when missing; not required by any test
OPTIONAL = {"gurobipy"}
# interface packages without a wheel, built from msgs/ into the venv
BUILT_FROM_MSGS = {"tf2_msgs", "contact_sim_msgs", "control_msgs", "controller_manager_msgs",
                   "simulation_interfaces", "franka_msgs"}


def _package_xml():
    root = ET.parse(ROOT / "package.xml").getroot()
    deps = {}
    for tag in ("depend", "exec_depend", "build_depend", "buildtool_depend", "test_depend"):
        deps[tag] = {e.text.strip() for e in root.findall(tag)}
    return root, deps


def _third_party_imports(paths):
    """{top-level module: [files]} of absolute imports that are neither stdlib nor this package."""
    found = {}
    for path in paths:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == "contact_sim_ros":
                    continue
                found.setdefault(top, []).append(str(path.relative_to(ROOT)))
    return found


def _code_files(with_launch=True):
    """The package's modules, and the launch files (which only run under a ROS 2 install: `launch` and
    `launch_ros` have no wheels, so they are declared in package.xml but not pinned in requirements.txt)."""
    files = sorted((ROOT / "contact_sim_ros").rglob("*.py"))
    if with_launch and (ROOT / "launch").is_dir():
        files += sorted((ROOT / "launch").rglob("*.py"))
    return files


def _requirements():
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.+\-!]+)", line)
            assert m, f"requirements.txt line {line!r} is not an exact pin name==version"
            pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    return pins


# ------------------------------------------------------------------------------------------------ package.xml

def test_package_xml_is_format_3_ament_python_with_matching_version():
    root, deps = _package_xml()
    assert root.tag == "package" and root.get("format") == "3"
    assert root.findtext("name") == "contact_sim_ros"
    assert root.findtext("export/build_type") == "ament_python"
    # ament_python is a build type, not a rosdep key: a buildtool_depend on it makes `rosdep install` fail
    assert "ament_python" not in deps["buildtool_depend"] | deps["depend"] | deps["build_depend"]
    assert root.findtext("version") == contact_sim_ros.__version__
    assert {"python3-pytest", "ament_flake8", "ament_pep257"} <= deps["test_depend"]


def test_package_xml_declares_every_module_the_code_imports():
    _, deps = _package_xml()
    runtime = deps["depend"] | deps["exec_depend"]
    missing = {}
    for module, files in _third_party_imports(_code_files()).items():
        if module in OPTIONAL or module in PIP_ONLY:
            continue
        key = ROSDEP_KEY.get(module, module)
        if key not in runtime:
            missing[module] = (key, files[:3])
    assert not missing, f"imported but not an exec_depend of package.xml (module: (rosdep key, files)): {missing}"
    # the contract's list of run-time dependencies
    assert {"rclpy", "std_msgs", "std_srvs", "sensor_msgs", "geometry_msgs", "trajectory_msgs",
            "visualization_msgs", "rosgraph_msgs", "diagnostic_msgs", "tf2_msgs", "builtin_interfaces",
            "contact_sim_msgs", "python3-numpy", "python3-scipy", "python3-yaml", "pinocchio", "coal"} <= runtime


def test_package_xml_declares_only_keys_rosdep_resolves():
    _, deps = _package_xml()
    unknown = {tag: sorted(keys - ROSDEP_KEYS_JAZZY - IN_WORKSPACE) for tag, keys in deps.items()}
    assert not any(unknown.values()), f"not a ROS 2 Jazzy rosdep key (rosdep install would fail): {unknown}"


def test_package_xml_run_dependencies_are_imported_by_the_code():
    """No stale exec_depend (urdfdom_py was one: only a test imports urdf_parser_py, so it is a test_depend)."""
    _, deps = _package_xml()
    imported = {ROSDEP_KEY.get(m, m) for m in _third_party_imports(_code_files())}
    # message packages and launch machinery are used through rclpy / launch files, not always imported
    used_indirectly = {"rcl_interfaces", "ament_index_python", "contact_sim_msgs", "tf2_msgs", "launch",
                       "launch_ros", "builtin_interfaces", "rosgraph_msgs"}
    stale = sorted((deps["depend"] | deps["exec_depend"]) - imported - used_indirectly)
    assert not stale, f"exec_depend of package.xml that no module or launch file imports: {stale}"


def test_requirements_pin_every_module_the_code_imports():
    pins = _requirements()
    missing = {}
    for module in _third_party_imports(_code_files(with_launch=False)):
        if module in OPTIONAL:
            continue
        if module in BUILT_FROM_MSGS:
            if not (ROOT / "msgs" / module / "package.xml").is_file():
                missing[module] = f"msgs/{module}/package.xml"
            continue
        dist = PYPI_DIST.get(module, "ros-jazzy-" + module.replace("_", "-")).lower()
        if dist not in pins:
            missing[module] = dist
    assert not missing, f"imported but not pinned in requirements.txt (module: distribution): {missing}"
    for tool in ("pytest", "pytest-timeout", "matplotlib", "daqp", "pyscipopt", "viser", "ros-jazzy-rmw-fastrtps-cpp"):
        assert tool in pins, f"{tool} not pinned in requirements.txt"


def test_every_required_import_works_in_this_environment():
    """What the code imports unconditionally is installed (tf2_msgs/contact_sim_msgs: built from msgs/)."""
    failed = {}
    for module in _third_party_imports(_code_files(with_launch=False)):
        if module in OPTIONAL:
            continue
        try:
            importlib.import_module(module)
        except ImportError as exc:
            failed[module] = str(exc)
    assert not failed, f"not importable here (run through scripts/venv_run.sh): {failed}"


def test_interface_package_sources_declare_their_messages():
    for pkg, msgs in {"tf2_msgs": ["TFMessage"], "contact_sim_msgs": ["Contact", "ContactArray"],
                      "control_msgs": ["JointTrajectoryControllerState", "GripperCommand", "DynamicJointState"],
                      "controller_manager_msgs": ["ControllerState", "HardwareInterface"],
                      "franka_msgs": ["FrankaRobotState", "Errors", "CollisionIndicators", "Elbow"]}.items():
        src = ROOT / "msgs" / pkg
        manifest = ET.parse(src / "package.xml").getroot()
        assert manifest.findtext("name") == pkg
        assert "rosidl_interface_packages" in {e.text for e in manifest.findall("member_of_group")}
        cmake = (src / "CMakeLists.txt").read_text()
        for msg in msgs:
            assert (src / "msg" / f"{msg}.msg").is_file()
            assert f'"msg/{msg}.msg"' in cmake, f"{pkg}/CMakeLists.txt does not generate {msg}"


# ------------------------------------------------------------------------------------- install as colcon does

def _share_tree_files():
    files = []
    for folder in SHARE_FOLDERS:
        base = ROOT / folder
        if base.is_dir():
            files += [p.relative_to(ROOT) for p in base.rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")
                      and p.suffix not in (".pyc", ".pyo")]
    return files


@pytest.fixture(scope="module")
def colcon_install(tmp_path_factory):
    """Run setup.py as colcon's ament_python build does; return the install prefix."""
    tmp = tmp_path_factory.mktemp("colcon")
    build, prefix = tmp / "build", tmp / "install"
    build.mkdir()
    cmd = [sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(build),
           "build", "--build-base", str(build / "build"),
           "install", "--prefix", str(prefix), "--record", str(build / "install.log"),
           "--single-version-externally-managed"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"setup.py install failed:\n{proc.stdout}\n{proc.stderr}"
    return prefix


def test_colcon_install_puts_data_files_into_share(colcon_install):
    share = colcon_install / "share" / "contact_sim_ros"
    assert (colcon_install / "share/ament_index/resource_index/packages/contact_sim_ros").is_file()
    assert (share / "package.xml").read_text() == (ROOT / "package.xml").read_text()
    tree = _share_tree_files()
    assert any(p.parts[0] == "config" and p.parts[1] == "robots" for p in tree), "no config/robots/ in the checkout"
    assert any(p.parts[0] == "urdf" and len(p.parts) > 2 for p in tree), "no urdf/<subfolder>/ in the checkout"
    missing = [str(p) for p in tree if not (share / p).is_file()]
    assert not missing, f"not installed into share/contact_sim_ros: {missing}"


def test_colcon_install_puts_executables_where_ros2_run_looks(colcon_install):
    for name in CONSOLE_SCRIPTS:
        exe = colcon_install / "lib" / "contact_sim_ros" / name
        assert exe.is_file() and os.access(exe, os.X_OK), f"{exe} missing (ros2 run contact_sim_ros {name})"


def test_installed_package_finds_its_data_through_the_ament_index(colcon_install, tmp_path):
    site = next((colcon_install / "lib").glob("python3*/site-packages"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CONTACT_SIM_SHARE_DIR")}
    env["PYTHONPATH"] = str(site)
    env["AMENT_PREFIX_PATH"] = str(colcon_install)
    code = ("import contact_sim_ros, contact_sim_ros.resources as r; print(contact_sim_ros.__file__); "
            "print(r.share_dir()); print(r.resolve_resource('scenes/default.yaml'))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    module_file, share, scene = proc.stdout.split()
    assert Path(module_file).is_relative_to(colcon_install), "the test imported the checkout, not the install"
    assert Path(share) == colcon_install / "share" / "contact_sim_ros"
    assert Path(scene) == colcon_install / "share" / "contact_sim_ros" / "scenes" / "default.yaml"


# ---------------------------------------------------------------------------------------------- entry points

def test_console_scripts_are_declared_and_resolve_to_callables():
    eps = {ep.name: ep for ep in importlib.metadata.entry_points(group="console_scripts")
           if ep.dist is not None and ep.dist.name == "contact_sim_ros"}
    assert {name: ep.value for name, ep in eps.items()} == CONSOLE_SCRIPTS
    for name, target in CONSOLE_SCRIPTS.items():
        module, attr = target.split(":")
        func = getattr(importlib.import_module(module), attr)
        assert callable(func), f"{name} -> {target} is not callable"


# ------------------------------------------------------------------------------------------------ resources

def test_share_dir_is_the_checkout_with_config():
    share = resources.share_dir()
    assert share == ROOT
    assert (share / "config" / "robots").is_dir()
    assert resources.resolve_resource("config/robots") == ROOT / "config" / "robots"
    assert resources.resolve_resource(ROOT / "package.xml") == ROOT / "package.xml"


def test_share_dir_override_by_environment(monkeypatch, tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "x.yaml").write_text("a: 1\n")
    monkeypatch.setenv(resources.SHARE_DIR_ENV, str(tmp_path))
    assert resources.share_dir() == tmp_path
    assert resources.resolve_resource("config/x.yaml") == tmp_path / "config" / "x.yaml"

    monkeypatch.setenv(resources.SHARE_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="CONTACT_SIM_SHARE_DIR.*no config/"):
        resources.share_dir()


def test_missing_resource_names_the_path_and_the_searched_dirs():
    with pytest.raises(ConfigError) as info:
        resources.resolve_resource("config/robots/no_such_robot.yaml")
    message = str(info.value)
    assert "config/robots/no_such_robot.yaml" in message
    assert str(ROOT) in message
    with pytest.raises(ConfigError, match="does not exist"):
        resources.resolve_resource(ROOT / "no_such_file.yaml")


# ------------------------------------------------------------------------------------------------ make targets

def _make_dry_run(target: str, **env_overrides) -> list[str]:
    """The recipe lines ``make -n TARGET`` would run, with ROS_DOMAIN_ID taken out of the environment unless
    given."""
    env = {k: v for k, v in os.environ.items() if k not in ("ROS_DOMAIN_ID", "MAKEFLAGS", "MAKELEVEL")}
    env.update(env_overrides)
    proc = subprocess.run(["make", "-n", "--no-print-directory", target], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if "venv_run.sh" in line]


def _domain_of(recipe: str, env: dict) -> str:
    """Run the recipe's venv_run.sh with its flags but ``printenv ROS_DOMAIN_ID`` as the command."""
    flags = ["--isolated"] if "--isolated" in recipe.split() else []
    proc = subprocess.run(["scripts/venv_run.sh", *flags, "printenv", "ROS_DOMAIN_ID"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    return proc.stdout.strip()


def test_make_demo_keeps_the_users_ros_domain_id_and_make_test_is_isolated():
    base = {k: v for k, v in os.environ.items() if k not in ("ROS_DOMAIN_ID", "MAKEFLAGS", "MAKELEVEL")}
    (demo_set,) = _make_dry_run("demo", ROS_DOMAIN_ID="42")
    assert "--isolated" not in demo_set.split()
    assert _domain_of(demo_set, {**base, "ROS_DOMAIN_ID": "42"}) == "42"
    (demo_unset,) = _make_dry_run("demo")
    assert "--isolated" in demo_unset.split()
    assert 1 <= int(_domain_of(demo_unset, base)) <= 100
    (test_set,) = _make_dry_run("test", ROS_DOMAIN_ID="42")
    assert "--isolated" in test_set.split()          # concurrent test runs never hear each other
    # make demo ROS_DOMAIN_ID=N on the command line counts as set too
    env = {**base}
    proc = subprocess.run(["make", "-n", "--no-print-directory", "demo", "ROS_DOMAIN_ID=7"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert "--isolated" not in proc.stdout and "ROS_DOMAIN_ID=7" in proc.stdout


# ------------------------------------------------------------------------------------------------ layering

PACKAGE = ROOT / "contact_sim_ros"
# The only places that may import rclpy, relative to contact_sim_ros/ (a folder ends with '/'): the ROS 2 package,
# and the scenario controllers' links to a robot's ROS 2 interface: robot_link (over ROS 2) and inprocess_link (the
# same interface in process; it turns the node's serialized publications back into messages).
RCLPY_PLACES = ("ros/", "controllers/robot_link.py", "controllers/inprocess_link.py")
# what a kernel module (one with a function decorated with njit) may import besides other kernel modules
KERNEL_MODULE_IMPORTS = {"__future__", "math", "numpy", "contact_sim_ros.jit"}


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_main_guard(node) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__" and len(node.test.comparators) == 1
            and isinstance(node.test.comparators[0], ast.Constant) and node.test.comparators[0].value == "__main__")


def _imports(tree):
    """Every import statement of a module, at module level or inside a function or class alike, with the
    enclosing function (None at module level); not those under ``if __name__ == "__main__":`` (script code, not
    run on import)."""
    out = []

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            if _is_main_guard(child):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out.append((child, function))
            visit(child, child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function)
    visit(tree, None)
    return out


def _package_modules():
    return {_module_of(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _import_graph():
    """The package's import graph from its sources: {module: {imported name: [(line, function or None)]}}, where
    an imported name is the package module it loads (``from . import x`` of a submodule x: that submodule; of a
    name defined in a package: the package's __init__) or, outside the package, the full dotted module name."""
    modules = _package_modules()
    graph = {}
    for module, path in modules.items():
        edges = graph.setdefault(module, {})
        is_package = path.name == "__init__.py"
        for node, function in _imports(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    full = ".".join(base + ([node.module] if node.module else []))
                else:
                    full = node.module
                targets = [f"{full}.{a.name}" if f"{full}.{a.name}" in modules else full for a in node.names]
            for target in targets:
                if target.split(".")[0] == "contact_sim_ros":
                    while target not in modules:          # an attribute of a module: the module
                        target = target.rsplit(".", 1)[0]
                if target != module:
                    edges.setdefault(target, []).append((node.lineno, function))
    return graph


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(t for t in graph[root] if t in graph)))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(t for t in graph[w] if t in graph))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_import_graph_builder_sees_every_kind_of_import():
    """The graph the layering tests check: module-level, function-local and relative imports, submodules and
    attributes, and the script-only code under ``if __name__ == "__main__":`` left out."""
    graph = _import_graph()
    assert set(graph) == set(_package_modules())
    assert "contact_sim_ros.engines.base" in graph["contact_sim_ros.engines"]                  # from .base import
    assert "contact_sim_ros.sim.simulator" in graph["contact_sim_ros.kernel_cache"]
    assert "numba" in graph["contact_sim_ros.jit"]
    assert "contact_sim_ros.kernel_cache" not in graph["contact_sim_ros.jit"]                 # under __main__
    tree = ast.parse("import a.b\ndef f():\n    from c import d\nif __name__ == '__main__':\n    import e\n")
    assert [(type(n).__name__, f) for n, f in _imports(tree)] == [("Import", None), ("ImportFrom", "f")]
    cyclic = {"a": {"b": []}, "b": {"c": []}, "c": {"a": [], "d": []}, "d": {}}
    assert _cycles(cyclic) == [["a", "b", "c"]] and _cycles({"a": {"b": []}, "b": {}}) == []


def test_no_import_cycle_between_the_packages_modules():
    """No circle in the package's import graph, counting function-local imports too (a deferred import only
    hides a circle): a module is importable, and testable, without the modules above it."""
    graph = _import_graph()
    cycles = _cycles(graph)
    detail = ["  " + " | ".join(f"{m.removeprefix('contact_sim_ros.')} -> "
                                 + ", ".join(t.removeprefix("contact_sim_ros.") for t in sorted(graph[m]) if t in c)
                                 for m in c) for c in cycles]
    assert not cycles, f"{len(cycles)} import cycle(s) (module -> the modules of its cycle it imports):\n" + \
        "\n".join(detail)


def test_kernel_modules_import_only_the_jit_decorator_numpy_and_math():
    """A kernel module (its functions carry contact_sim_ros.jit's njit) is the bottom layer: it imports only the
    decorator, numpy, math and other kernel modules, so compiled code never pulls in the model, an engine or
    the simulator, and the warm-up (kernel_cache.py) may import the Simulator without a circle."""
    graph = _import_graph()
    kernels = set()
    for module, path in _package_modules().items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef) and any(
                    (d.func if isinstance(d, ast.Call) else d).__dict__.get("id") == "njit"
                    for d in node.decorator_list):
                kernels.add(module)
    assert {"contact_sim_ros.engines.tamsi_kernels", "contact_sim_ros.engines.icf_kernels"} <= kernels
    extra = {m: sorted(t for t in graph[m] if t not in KERNEL_MODULE_IMPORTS and t not in kernels)
             for m in sorted(kernels)}
    extra = {m: t for m, t in extra.items() if t}
    assert not extra, f"kernel modules importing more than the jit decorator, numpy, math and other kernels: {extra}"


def test_rclpy_is_imported_only_in_its_places():
    graph = _import_graph()
    allowed = [f"contact_sim_ros.{p.rstrip('/').removesuffix('.py').replace('/', '.')}" for p in RCLPY_PLACES]
    outside = {}
    for module, edges in graph.items():
        if any(module == a or module.startswith(a + ".") for a in allowed):
            continue
        lines = [line for target, where in edges.items() if target.split(".")[0] == "rclpy" for line, _ in where]
        if lines:
            outside[module] = sorted(lines)
    assert not outside, f"rclpy imported outside {', '.join(RCLPY_PLACES)} (module: lines): {outside}"


def test_readme_engine_table_lists_exactly_the_registered_engines():
    """The engine names are written once, in the registry (the engines' ``name``); the README's table and the kernel
    table (the engines' ``kernel_modules``) follow it."""
    from contact_sim_ros.engines.registry import engine_names
    section = (ROOT / "README.md").read_text().split("\n## Engines", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    listed = {name for row in rows for name in re.findall(r"`([a-z_]+)`", row)}
    assert listed == set(engine_names()), listed ^ set(engine_names())
