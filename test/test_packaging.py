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
    "rtree": "python3-rtree",
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
    "rtree": "rtree",
}
# imports with no rosdep key: installed with pip (README's colcon section and package.xml's comment say so)
PIP_ONLY = {"daqp", "pyscipopt", "viser", "rosbags", "mcap", "ray", "pyarrow", "tqdm", "moderngl", "trimesh", "coacd"}
# The rosdep database of a stock ROS 2 Jazzy machine: a snapshot of rosdistro's files (test/data/rosdistro/README.md:
# commit, how it was made). Every key of package.xml must be a package of jazzy/distribution.yaml or a rule of
# rosdep/base.yaml / python.yaml for Debian and Ubuntu, or a package the README's colcon section copies into src/
# (`rosdep install --from-paths src --ignore-src` takes those from the workspace); anything else makes
# `rosdep install` fail (issue 41: franka_msgs, which Jazzy does not release).
ROSDISTRO = ROOT / "test" / "data" / "rosdistro"
ROS_DISTRO = "jazzy"
# the platforms the README's rosdep line is checked for (Jazzy's release platforms that have apt)
ROSDEP_OSES = ("ubuntu:noble", "debian:bookworm")
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


def _jazzy_packages() -> set[str]:
    """The packages ROS 2 Jazzy releases (the snapshot's jazzy/distribution.yaml): rosdep keys that resolve to
    ``ros-jazzy-<name>``."""
    import yaml
    dist = yaml.safe_load((ROSDISTRO / ROS_DISTRO / "distribution.yaml").read_text())
    return {pkg for name, repo in dist["repositories"].items() for pkg in repo["release"].get("packages", [name])}


def _jazzy_keys() -> set[str]:
    """The rosdep keys of the snapshot: Jazzy's released packages, and the system rules (rosdep/base.yaml,
    python.yaml) with an entry for both Debian and Ubuntu."""
    import yaml
    keys = _jazzy_packages()
    for rules in ("base.yaml", "python.yaml"):
        for key, rule in yaml.safe_load((ROSDISTRO / "rosdep" / rules).read_text()).items():
            if isinstance(rule, dict) and {"debian", "ubuntu"} <= set(rule):
                keys.add(key)
    return keys


def _readme_workspace_packages() -> set[str]:
    """The packages the README's colcon section copies into the workspace's src/ (its ``cp`` line)."""
    from test_install_space import readme_line
    return {Path(arg).name for arg in readme_line("cp ").split()[2:-1]}


def test_package_xml_declares_only_keys_rosdep_resolves():
    _, deps = _package_xml()
    known, in_workspace = _jazzy_keys(), _readme_workspace_packages()
    assert {"rclpy", "tf2_msgs", "pinocchio", "coal", "urdfdom_py", "python3-numpy", "python3-numba"} <= known
    assert "franka_msgs" not in known and "ament_python" not in known
    unknown = {tag: sorted(keys - known - in_workspace) for tag, keys in deps.items()}
    assert not any(unknown.values()), (f"not a ROS 2 Jazzy rosdep key (rosdistro snapshot {ROSDISTRO}) nor a "
                                       f"package the README copies into src/ (rosdep install would fail): {unknown}")


def test_readme_copies_the_message_packages_jazzy_does_not_release_and_no_others():
    """msgs/ packages a ROS 2 Jazzy installation lacks are copied into src/ (built there); the others (tf2_msgs,
    control_msgs, ...) are Jazzy's, which rosdep installs: a copy would shadow them."""
    _, deps = _package_xml()
    known = _jazzy_keys()
    msgs = {p.parent.name for p in (ROOT / "msgs").glob("*/package.xml")}
    needed = {pkg for pkg in msgs & (deps["depend"] | deps["exec_depend"]) if pkg not in known}
    assert needed == {"contact_sim_msgs", "franka_msgs"}
    assert _readme_workspace_packages() == needed
    from test_install_space import readme_line
    assert set(readme_line("colcon build").split()) >= needed | {"contact_sim_ros"}


@pytest.fixture(scope="module")
def rosdep_workspace(tmp_path_factory):
    """(workspace, environment): src/ laid out as the README's colcon section does (the checkout as the clone, its
    ``cp`` line), and a rosdep database made by ``rosdep update`` from the snapshot (file:// sources list,
    ``ROSDISTRO_INDEX_URL``) in a temporary ``ROS_HOME``: nothing from the network, nothing of the machine's."""
    from test_install_space import readme_line
    tmp = tmp_path_factory.mktemp("rosdep")
    sources = tmp / "sources.list.d"
    sources.mkdir()
    (sources / "20-default.list").write_text("".join(f"yaml {(ROSDISTRO / 'rosdep' / name).as_uri()}\n"
                                                     for name in ("base.yaml", "python.yaml")))
    # no AMENT_PREFIX_PATH / ROS_PACKAGE_PATH: rosdep skips the keys of packages found there (the venv has
    # franka_msgs, built from msgs/), and a clean machine has none of them yet
    env = {k: v for k, v in os.environ.items()
           if k not in ("ROS_PYTHON_VERSION", "ROS_VERSION", "AMENT_PREFIX_PATH", "ROS_PACKAGE_PATH",
                        "CMAKE_PREFIX_PATH", "COLCON_PREFIX_PATH")}
    env.update(ROSDEP_SOURCE_PATH=str(sources), ROSDISTRO_INDEX_URL=(ROSDISTRO / "index-v4.yaml").as_uri(),
               ROS_HOME=str(tmp / "ros_home"), ROS_DISTRO=ROS_DISTRO,
               PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    update = subprocess.run(["rosdep", "update", "--rosdistro", ROS_DISTRO], env=env, capture_output=True,
                            text=True, timeout=120)
    assert update.returncode == 0 and f'Add distro "{ROS_DISTRO}"' in update.stdout, update.stdout + update.stderr
    src = tmp / "ws" / "src"
    src.mkdir(parents=True)
    (src / "contact_sim_ros").symlink_to(ROOT, target_is_directory=True)
    cp = subprocess.run(["bash", "-c", readme_line("cp ")], cwd=src, capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    return src.parent, env


@pytest.mark.process
@pytest.mark.parametrize("os_name", ROSDEP_OSES)
def test_readme_rosdep_line_resolves_every_dependency(rosdep_workspace, os_name):
    """The README's ``rosdep install --from-paths src --ignore-src -y``, simulated for a Jazzy platform."""
    from test_install_space import readme_line
    ws, env = rosdep_workspace
    line = readme_line("rosdep install")
    assert line == "rosdep install --from-paths src --ignore-src -y"
    proc = subprocess.run(["bash", "-c", f"{line} --simulate --os={os_name}"], cwd=ws, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Cannot locate rosdep definition" not in proc.stdout + proc.stderr


@pytest.mark.process
@pytest.mark.parametrize("os_name", ROSDEP_OSES)
def test_rosdep_resolves_every_key_of_the_workspace_to_jazzy_packages(rosdep_workspace, os_name):
    """``rosdep keys`` lists the dependencies of src/ that the workspace does not provide: each resolves with apt,
    the ROS packages to Jazzy's ros-jazzy-* and the rest to the platform's own packages."""
    ws, env = rosdep_workspace
    keys = subprocess.run(["rosdep", "keys", "--from-paths", "src", "--ignore-src"], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=120)
    assert keys.returncode == 0, keys.stderr
    keys = set(keys.stdout.split())
    _, deps = _package_xml()
    workspace = {p.parent.name for p in (ws / "src").glob("*/package.xml")}
    assert workspace == {"contact_sim_ros", "contact_sim_msgs", "franka_msgs"}
    assert set().union(*deps.values()) - workspace <= keys
    proc = subprocess.run(["rosdep", "resolve", *sorted(keys), f"--os={os_name}"], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    resolved = {m.group(1): (m.group(2), m.group(3).split())
                for m in re.finditer(r"#ROSDEP\[(\S+)\]\n#(\w+)\n([^#]*)", proc.stdout)}
    assert set(resolved) == keys, keys ^ set(resolved)
    ros_packages = _jazzy_packages()
    for key, (installer, packages) in resolved.items():
        assert installer == "apt" and packages, (key, installer, packages)
        if key in ros_packages:
            assert packages == [f"ros-{ROS_DISTRO}-{key.replace('_', '-')}"], (key, packages)
        else:
            assert all(p.startswith("python3-") for p in packages), (key, packages)   # python.yaml's rules
    assert {"rclpy", "pinocchio", "coal", "tf2_msgs", "urdfdom_py", "action_msgs"} <= ros_packages & keys


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


def _installed_package(prefix: Path) -> Path:
    return next((prefix / "lib").glob("python3*/site-packages")) / "contact_sim_ros"


def test_colcon_install_puts_every_file_of_the_package_that_is_not_python_beside_its_modules(colcon_install):
    """The C++ sources of the compiled modules (and whatever non-Python file a later change puts beside the
    modules) are package data: issue 41's install lacked sim/rigid_body_dynamics.cpp, which the Simulator reads
    at start (FileNotFoundError in every installed node)."""
    site = _installed_package(colcon_install)
    files = [p.relative_to(ROOT / "contact_sim_ros") for p in (ROOT / "contact_sim_ros").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")
             and p.suffix not in (".py", ".pyc", ".pyo", ".so", ".o")]
    assert {"geometry/narrow_phase.cpp", "sim/rigid_body_dynamics.cpp"} <= {str(p) for p in files}
    missing = [str(p) for p in files if not (site / p).is_file()]
    assert not missing, f"not installed beside the modules (setup.py package_data): {missing}"


# a string constant of the package's code that names a file (a run-time read, or a write: writes name no file
# of the checkout and are left alone)
_FILE_NAME = re.compile(r"[\w.\-]+(/[\w.\-]+)*\.(cpp|hpp|h|yaml|yml|urdf|xacro|sdf|srdf|xml|json|csv|npz|npy|txt|"
                        r"obj|stl|dae|mtl|png|jpg)")


def test_every_file_the_code_names_is_installed(colcon_install):
    """The package's run-time file reads against the install: every string constant of its code that names a file
    of the checkout (``scenes/default.yaml``, ``"narrow_phase.cpp"`` joined to the module's folder, ...) has its
    installed copy: a path relative to the checkout in share/contact_sim_ros, a file name of the package's
    folders beside the installed modules."""
    site = _installed_package(colcon_install)
    share = colcon_install / "share" / "contact_sim_ros"
    named, missing = {}, {}
    for path in _code_files(with_launch=False):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _FILE_NAME.fullmatch(node.value):
                named.setdefault(node.value, set()).add(str(path.relative_to(ROOT)))
    checked = 0
    for name, where in sorted(named.items()):
        if (ROOT / name).is_file() and (name == "package.xml" or Path(name).parts[0] in SHARE_FOLDERS):
            targets = [share / name]
        else:                                # a file beside the modules, named by its name or a relative path
            targets = [site / p.relative_to(ROOT / "contact_sim_ros")
                       for p in (ROOT / "contact_sim_ros").rglob(Path(name).name)
                       if p.is_file() and str(p).endswith("/" + name)]
        checked += bool(targets)
        for target in targets:
            if not target.is_file():
                missing[name] = (str(target.relative_to(colcon_install)), sorted(where)[:3])
    assert checked >= 8 and {"narrow_phase.cpp", "rigid_body_dynamics.cpp", "scenes/default.yaml"} <= set(named)
    assert not missing, f"named by the code but not installed (file: (expected install path, named in)): {missing}"


def test_colcon_install_puts_executables_where_ros2_run_looks(colcon_install):
    for name in CONSOLE_SCRIPTS:
        exe = colcon_install / "lib" / "contact_sim_ros" / name
        assert exe.is_file() and os.access(exe, os.X_OK), f"{exe} missing (ros2 run contact_sim_ros {name})"


@pytest.mark.process
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


# modules that may locate files from their own location: resources.py (share_dir: the one way to the package's data
# folder), jit.py (the kernel cache's keys), native_build.py (the package's own .cpp sources: package data beside
# the modules), engines/registry.py (the engine modules), scenarios/runner.py (the folder the node's `python -m`
# runs in, so that it imports the same package)
FILE_RELATIVE_ALLOWED = {"resources.py", "jit.py", "native_build.py", "engines/registry.py", "scenarios/runner.py"}


def _file_relative_uses(path: Path) -> list[int]:
    """Lines of ``path`` that use a module's ``__file__`` (``__file__`` or ``<module>.__file__``)."""
    tree = ast.parse(path.read_text(), str(path))
    return sorted({node.lineno for node in ast.walk(tree)
                   if (isinstance(node, ast.Name) and node.id == "__file__")
                   or (isinstance(node, ast.Attribute) and node.attr == "__file__")})


def test_the_package_finds_its_data_only_through_resources():
    """A path into config/, urdf/, scenes/, meshes/, launch/ or msgs/ built from a module's own location
    (``Path(__file__).parents[2] / ...``) points into site-packages when the package is installed (issue 41:
    scenarios/runner.py's REPO: the installed runner, campaigns and replay looked for their scenes there); every
    module but the listed ones goes through resources.share_dir() / resolve_resource()."""
    package = ROOT / "contact_sim_ros"
    found = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        lines = _file_relative_uses(path)
        if lines and rel not in FILE_RELATIVE_ALLOWED:
            found[rel] = lines
    assert not found, f"__file__-relative paths outside {sorted(FILE_RELATIVE_ALLOWED)} (file: lines): {found}"
    assert _file_relative_uses(package / "resources.py")           # the check sees what it looks for


# ------------------------------------------------------------------------------------------------ make targets

def _make_dry_run(target: str, **env_overrides) -> list[str]:
    """The recipe lines ``make -n TARGET`` would run, with ROS_DOMAIN_ID taken out of the environment unless
    given."""
    # (the Makefile's own variables as well: a `make test JOBS=4` running this test exports JOBS to it)
    env = {k: v for k, v in os.environ.items()
           if k not in ("ROS_DOMAIN_ID", "MAKEFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "JOBS", "PROCESS_JOBS", "SIZES",
                        "FULL", "TIMEOUT", "PYTEST_ARGS")}
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


@pytest.mark.process
def test_make_demo_keeps_the_users_ros_domain_id_and_make_test_is_isolated():
    base = {k: v for k, v in os.environ.items() if k not in ("ROS_DOMAIN_ID", "MAKEFLAGS", "MAKELEVEL")}
    (demo_set,) = _make_dry_run("demo", ROS_DOMAIN_ID="42")
    assert "--isolated" not in demo_set.split()
    assert _domain_of(demo_set, {**base, "ROS_DOMAIN_ID": "42"}) == "42"
    (demo_unset,) = _make_dry_run("demo")
    assert "--isolated" in demo_unset.split()
    assert 1 <= int(_domain_of(demo_unset, base)) <= 100
    test_phases = _make_dry_run("test", ROS_DOMAIN_ID="42")
    assert test_phases and all("--isolated" in line.split() for line in test_phases)   # concurrent runs never meet
    # make demo ROS_DOMAIN_ID=N on the command line counts as set too
    env = {**base}
    proc = subprocess.run(["make", "-n", "--no-print-directory", "demo", "ROS_DOMAIN_ID=7"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert "--isolated" not in proc.stdout and "ROS_DOMAIN_ID=7" in proc.stdout


@pytest.mark.process
def test_make_test_runs_unit_and_node_tests_on_four_workers_then_the_tests_that_start_processes_on_three():
    """The suite by size (test/conftest.py): the in-process sizes on four xdist workers, then the sizes that start
    processes on three (PROCESS_JOBS); every size in one of the two phases; JOBS=0 runs both in one process."""
    first, second = _make_dry_run("test")
    assert "-n 4 --dist loadfile" in first and '-m "(unit or node) and not slow"' in first
    assert "-n 3 --dist loadfile" in second and '-m "(process or campaign) and not slow"' in second
    (only_unit,) = _make_dry_run("test", SIZES="unit", JOBS="0")
    assert "-p no:xdist" in only_unit and '-m "(unit) and not slow"' in only_unit
    (only_process,) = _make_dry_run("test", SIZES="process", JOBS="0")
    assert "-p no:xdist" in only_process and '-m "(process) and not slow"' in only_process


# ------------------------------------------------------------------------------------------------ layering

PACKAGE = ROOT / "contact_sim_ros"
# The only places that may import rclpy, relative to contact_sim_ros/ (a folder ends with '/'): the ROS 2 package,
# and the scenario controllers' links to a robot's ROS 2 interface: robot_link (over ROS 2) and inprocess_link (the
# same interface in process; it turns the node's serialized publications back into messages).
RCLPY_PLACES = ("ros/", "clients/robot_link.py")
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
    """A kernel module (its functions carry contact_sim_ros.jit's njit or inline_helper) is the bottom layer: it
    imports only the decorator, numpy, math and other kernel modules, so compiled code never pulls in the model, an
    engine or the simulator, and the warm-up (kernel_cache.py) may import the Simulator without a circle."""
    graph = _import_graph()
    kernels = set()
    for module, path in _package_modules().items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef) and any(
                    (d.func if isinstance(d, ast.Call) else d).__dict__.get("id") in ("njit", "inline_helper")
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


# modules outside contact_sim_ros/ros/ that may import from it, with why (cli.py's ``node`` subcommand runs the node,
# a function-local import; scenarios/replay.py reads bags with the recorder's message type tables)
ROS_IMPORTERS = {"contact_sim_ros.cli": "the `node` subcommand starts the node (deferred, in its function)",
                 "contact_sim_ros.scenarios.replay": "reads bags with ros/bag_recorder.py's type tables"}


def _allowed_ros_import(module: str, function) -> bool:
    """cli.py only from inside a function (its ``node`` subcommand); replay.py anywhere."""
    return module == "contact_sim_ros.scenarios.replay" or (module == "contact_sim_ros.cli" and function is not None)


def test_only_the_ros_package_imports_from_it():
    """contact_sim_ros.ros is the top layer (rclpy: the node and its transports): nothing below it imports from
    it (the driver, the in-process links, the scenario clients, campaigns), so a campaign worker or a unit test
    never loads node code. The listed exceptions are entry points into ROS itself."""
    graph = _import_graph()
    outside = {}
    for module, edges in graph.items():
        if module == "contact_sim_ros.ros" or module.startswith("contact_sim_ros.ros."):
            continue
        lines = sorted(line for target, where in edges.items()
                       if target == "contact_sim_ros.ros" or target.startswith("contact_sim_ros.ros.")
                       for line, function in where
                       if not _allowed_ros_import(module, function))
        if lines:
            outside[module] = lines
    assert not outside, f"modules outside contact_sim_ros/ros/ importing from it (module: lines): {outside}"


@pytest.mark.process
def test_a_campaign_trial_loads_no_rclpy_and_no_node_code(tmp_path):
    """A campaign worker's trial (scenarios/campaign.run_trial: the in-process link and the scenario's client, what
    each Ray task runs), in a fresh interpreter: it succeeds and has loaded neither rclpy nor any module of
    contact_sim_ros.ros (the world is built by driver/, the in-process transport is not the node's)."""
    campaign = tmp_path / "c.yaml"
    campaign.write_text("scenario: pick_shake_place\nengines: [tamsi]\ntrials: 1\nseed: 3\n"
                        "controller: {motion_time: 0.5, hold_time: 0.45, shake_cycles: 1, stop_at: transfer}\n"
                        "parameters:\n  object.bottle.friction: {uniform: [0.6, 1.0]}\n")
    code = ("import sys, json\n"
            "from contact_sim_ros.scenarios.campaign import load_campaign, run_trial\n"
            f"row = run_trial(load_campaign({str(campaign)!r}), 0, 'tamsi')\n"
            "print(json.dumps({'success': row['success'], 'reason': row['reason'],\n"
            "                  'rclpy': sorted(m for m in sys.modules if m.split('.')[0] == 'rclpy'),\n"
            "                  'ros': sorted(m for m in sys.modules if m.startswith('contact_sim_ros.ros'))}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    import json
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["success"], result["reason"]
    assert result["rclpy"] == [], f"a campaign trial loaded rclpy: {result['rclpy'][:10]}"
    assert result["ros"] == [], f"a campaign trial loaded node code: {result['ros']}"


# ------------------------------------------------------------------------------------------- private names

# the calls that read a module attribute by name: getattr(module, "_name") reaches a private as module._name does
_ATTRIBUTE_CALLS = {"getattr", "hasattr", "setattr", "delattr"}


def _is_private(name: str) -> bool:
    """One leading underscore (``_load``, ``_MEMO``); a dunder (``__version__``, ``__all__``) is public."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_uses(tree, module: str, is_package: bool, modules) -> list[tuple[int, str]]:
    """(line, dotted name) of each private name of another package module that the module ``module`` (its source
    parsed to ``tree``; ``is_package``: an __init__.py) reaches: imported (``from .loader import _x``, absolute or
    relative, or anything from or of a private module ``a._m``), or read on a package module it imported
    (``loader._x`` after ``from . import loader``, ``contact_sim_ros.a.b._x``, ``getattr(m, "_x")``) or on a class
    or function it imported from one (``Simulator._x``), anywhere in the file (module level or in a function).
    Its own privates are its own business."""
    found, bound = [], {}        # bound: local name -> the package module it names
    imported = {}                # local name -> (module, name) of a class or function imported from another module
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] != "contact_sim_ros":
                    continue
                if any(_is_private(p) for p in a.name.split(".")):
                    found.append((node.lineno, a.name))
                if a.asname:
                    bound[a.asname] = a.name
                else:
                    bound[a.name.split(".")[0]] = "contact_sim_ros"
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                full = ".".join(base + ([node.module] if node.module else []))
            else:
                full = node.module or ""
            if full.split(".")[0] != "contact_sim_ros":
                continue
            for a in node.names:
                if f"{full}.{a.name}" in modules:
                    bound[a.asname or a.name] = f"{full}.{a.name}"
                elif full != module:
                    imported[a.asname or a.name] = f"{full}.{a.name}"
                if full != module and (_is_private(a.name) or any(_is_private(p) for p in full.split("."))):
                    found.append((node.lineno, f"{full}.{a.name}"))

    def module_named(expr):
        """The package module an expression (``m``, ``contact_sim_ros.a.b``) names, or the dotted name of the
        class or function it names, or None."""
        chain = []
        while isinstance(expr, ast.Attribute):
            chain.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return None
        if expr.id in imported and not chain:
            return imported[expr.id]
        if expr.id not in bound:
            return None
        dotted = ".".join([bound[expr.id]] + chain[::-1])
        return dotted if dotted in modules else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            owner, name = module_named(node.value), node.attr
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _ATTRIBUTE_CALLS
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and _is_private(node.args[1].value)):
            owner, name = module_named(node.args[0]), node.args[1].value
        else:
            continue
        if owner is not None and owner != module:
            found.append((node.lineno, f"{owner}.{name}"))
    return sorted(found)


def test_the_private_name_finder_sees_every_way_to_reach_a_private():
    """The finder the next test runs: imports (absolute, relative, in a function, of a private module) and
    attribute reads of an imported package module or of a class imported from one; not a module's own privates,
    not dunders, not privates of objects (``self._x``) or of other packages."""
    modules = {"contact_sim_ros", "contact_sim_ros.model", "contact_sim_ros.model.loader",
               "contact_sim_ros.model.composition", "contact_sim_ros.model._impl", "contact_sim_ros.jit"}
    source = ("import contact_sim_ros.model.loader\n"                                   # 1
              "import contact_sim_ros.model.loader as L\n"                              # 2
              "from contact_sim_ros.model.loader import _resolve, load_urdf\n"          # 3
              "from .loader import _check, __doc__\n"                                   # 4
              "from . import loader\n"                                                  # 5
              "from .._impl import thing\n"                                             # 6 (a private module)
              "from ..model import _impl\n"                                             # 7
              "from .composition import _own, _also_own\n"                              # 8 (its own)
              "def f(self):\n"                                                          # 9
              "    from ..jit import _cache\n"                                          # 10
              "    x = loader._memo + L._memo + L.public + L.__name__\n"                # 11
              "    y = contact_sim_ros.model.loader._memo\n"                            # 12
              "    z = getattr(loader, '_memo'), getattr(loader, 'public'), self._memo\n"  # 13
              "    import numpy as np\n"                                                # 14
              "    return np._core, _impl._x\n"                                         # 15
              "from .loader import Preset\n"                                            # 16
              "w = Preset._cache, Preset.load, _own._x\n")                              # 17
    found = _private_uses(ast.parse(source), "contact_sim_ros.model.composition", False, modules)
    assert found == [(3, "contact_sim_ros.model.loader._resolve"), (4, "contact_sim_ros.model.loader._check"),
                     (6, "contact_sim_ros._impl.thing"), (7, "contact_sim_ros.model._impl"),
                     (10, "contact_sim_ros.jit._cache"), (11, "contact_sim_ros.model.loader._memo"),
                     (11, "contact_sim_ros.model.loader._memo"), (12, "contact_sim_ros.model.loader._memo"),
                     (13, "contact_sim_ros.model.loader._memo"), (15, "contact_sim_ros.model._impl._x"),
                     (17, "contact_sim_ros.model.loader.Preset._cache")], found
    # a package's __init__: ``from .x import`` is relative to the package itself
    assert _private_uses(ast.parse("from .loader import _x\n"), "contact_sim_ros.model", True, modules) == \
        [(1, "contact_sim_ros.model.loader._x")]


def test_no_private_name_is_imported_or_read_across_the_packages_modules():
    """A name with a leading underscore is its module's own (issue 42): no module of contact_sim_ros imports or
    reads another module's private (a function, a constant, a kernel), so a module's privates can change without
    breaking another. What modules share is public, with a docstring. Tests under test/ are not held to this:
    a unit test may look inside the unit it tests (a kernel's pieces, a memo it clears)."""
    modules = _package_modules()
    found = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        found += [f"{path.relative_to(ROOT)}:{line}: {name}"
                  for line, name in _private_uses(tree, module, path.name == "__init__.py", modules)]
    assert not found, f"{len(found)} private name(s) of another module imported or read:\n  " + "\n  ".join(found)
