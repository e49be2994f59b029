"""The package built, installed and started as a ROS 2 user does (README, "With a ROS 2 installation (colcon)").

A temporary workspace gets the checkout as ``src/contact_sim_ros`` (a symlink standing in for the clone); the
README's ``cp`` line and ``colcon build`` line run there as written (colcon, colcon-ros and colcon-bash from
PyPI, pinned in requirements.txt), with the venv as the ROS underlay (``AMENT_PREFIX_PATH``, as
``source /opt/ros/jazzy/setup.bash`` would set it) and without ``--symlink-install``: the install space holds
copies, so a file the package reads at run time but does not install is missing there (issue 41: the installed
node died with FileNotFoundError on ``sim/rigid_body_dynamics.cpp``). The environment is what
``source install/setup.bash`` makes of it; from there ``contact-sim compile-kernels`` and the installed ``sim_node``
(every preset, TAMSI) run as ``ros2 run`` would start them (``install/contact_sim_ros/lib/contact_sim_ros/<name>``;
the venv has no ``ros2`` command), the node until its ``/joint_states`` (with the preset's joints) arrive over DDS
and SIGINT ends it; the scenario runner and a campaign find their scenes in the install space's share dir. The
build (~75-100 s) is done once for the module; each further preset adds ~6-9 s, the runner's check ~10 s.

The compiled kernels: an installed package finds its cache through ``contact_sim_ros.jit.cache_dir()``; with the
venv's Python that is the venv's ``<venv>/.cache/numba`` (filled by ``make venv``), and numba and the C++
modules key their entries by the sources' content (numba: the file's size and modification time, which
``setup.py install`` keeps), so the installed copy of the same sources loads them instead of compiling again
(compile-kernels ~2 s here instead of ~2 min).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.process   # its tests start processes (test/conftest.py, test sizes)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "test" / "ros"))     # ros_testing (its conftest is not this folder's)


def readme_colcon_block() -> list[str]:
    """The command lines of the README's colcon section (its first ```bash block), comments stripped."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## With a ROS 2 installation (colcon)", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def readme_line(prefix: str) -> str:
    """The README's colcon-section command starting with ``prefix`` (exactly one)."""
    lines = [line for line in readme_colcon_block() if line.startswith(prefix)]
    assert len(lines) == 1, f"README colcon section: {len(lines)} lines start with {prefix!r}: {lines}"
    return lines[0]


def shell_env() -> dict:
    """The user's shell after ``source /opt/ros/jazzy/setup.bash``: here the venv's ROS environment (make test
    runs in it), without a PYTHONPATH into the checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "CONTACT_SIM_SHARE_DIR", "COLCON_PREFIX_PATH")}
    assert env.get("AMENT_PREFIX_PATH"), "no ROS underlay (AMENT_PREFIX_PATH): run through scripts/venv_run.sh"
    return env


def run(cmd: str, cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess:
    proc = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, \
        f"`{cmd}` in {cwd}: exit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def install(tmp_path_factory):
    """(workspace, environment after ``source install/setup.bash``) of a colcon build as the README does it."""
    ws = tmp_path_factory.mktemp("ros2_ws")
    src = ws / "src"
    src.mkdir()
    (src / "contact_sim_ros").symlink_to(ROOT, target_is_directory=True)      # git clone <this repository>
    env = shell_env()
    env["COLCON_HOME"] = str(ws / ".colcon")          # no user defaults or mixins
    run(readme_line("cp "), src, env, 60)
    build = readme_line("colcon build")
    assert "--symlink-install" not in build
    start = time.monotonic()
    run(build, ws, env, 600)
    print(f"colcon build: {time.monotonic() - start:.1f} s")
    assert readme_line("source ") == "source install/setup.bash"
    dump = run("source install/setup.bash && env -0", ws, env, 60).stdout
    sourced = dict(item.split("=", 1) for item in dump.split("\0") if "=" in item)
    return ws, sourced


def test_the_install_space_holds_the_package_and_python_imports_it_from_there(install):
    ws, env = install
    prefix = ws / "install" / "contact_sim_ros"
    assert env["AMENT_PREFIX_PATH"].split(":")[0] == str(prefix), env["AMENT_PREFIX_PATH"]
    code = ("import contact_sim_ros, contact_sim_msgs.msg, franka_msgs.msg; from contact_sim_ros import resources, "
            "native_build; print(contact_sim_ros.__file__); print(resources.share_dir()); "
            "print(*[m.source for m in native_build.MODULES], sep='\\n')")
    proc = subprocess.run(["python", "-c", code], cwd=ws, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.split()
    module, share, sources = Path(out[0]), Path(out[1]), [Path(p) for p in out[2:]]
    assert module.is_relative_to(prefix), f"imported {module}, not the install space {prefix}"
    assert share == prefix / "share" / "contact_sim_ros"
    assert sources and all(p.is_relative_to(prefix) and p.is_file() for p in sources), sources
    assert not module.parent.is_symlink() and not module.is_symlink()          # copies, not --symlink-install


def test_compile_kernels_and_the_installed_sim_node_run_from_the_install_space(install, monkeypatch):
    ws, env = install
    bindir = ws / "install" / "contact_sim_ros" / "lib" / "contact_sim_ros"
    # ros2 run contact_sim_ros contact-sim compile-kernels
    assert readme_line("ros2 run contact_sim_ros contact-sim") == "ros2 run contact_sim_ros contact-sim compile-kernels"
    start = time.monotonic()
    done = run(f"{bindir / 'contact-sim'} compile-kernels", ws, env, 600)
    print(f"compile-kernels from the install space: {time.monotonic() - start:.1f} s")
    built = [Path(p) for p in re.findall(r"-> (\S+)", done.stdout + done.stderr)]
    assert len(built) == 2, done.stdout + done.stderr                 # the two C++ modules, in the kernel cache
    for path in built:
        assert path.is_file() and not path.is_relative_to(ws) and not path.is_relative_to(ROOT / "contact_sim_ros")

    output = start_until_joint_states(ws, env, ["--robot", "iiwa_wsg", "--engine", "tamsi"], PRESET_JOINTS["iiwa_wsg"],
                                      monkeypatch)
    # the installed copy of the sources found the kernels compile-kernels just cached: no first-start compilation
    assert "compiling kernels, first start only" not in output and "are not built" not in output, output


# the robot presets (config/robots/<name>.yaml: contact_sim_ros.model.loader.robot_preset_names()) and the joints
# of their joint groups, which /joint_states must name
PRESET_JOINTS = {path.stem: [j for group in yaml.safe_load(path.read_text())["joint_groups"].values()
                             for j in group["joints"]]
                 for path in sorted((ROOT / "config" / "robots").glob("*.yaml"))}


def start_until_joint_states(ws: Path, env: dict, args: list[str], joints: list[str], monkeypatch) -> str:
    """Start the installed sim_node with ``args`` (as ``ros2 run contact_sim_ros sim_node ARGS``), wait for a
    /joint_states naming every one of ``joints`` over DDS, end it with SIGINT; asserts exit code 0 and no traceback.
    Returns its output."""
    import rclpy  # noqa: F401  (the probe below; after the environment is known)
    from sensor_msgs.msg import JointState
    from ros_testing import RosProbe, wait_until

    bindir = ws / "install" / "contact_sim_ros" / "lib" / "contact_sim_ros"
    # the node and the probe in one ROS domain of this run (make test: venv_run.sh --isolated), on this host
    monkeypatch.setenv("ROS_DOMAIN_ID", os.environ.get("ROS_DOMAIN_ID") or str(1 + os.getpid() % 100))
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env = {**env, "ROS_DOMAIN_ID": os.environ["ROS_DOMAIN_ID"], "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    log = ws / f"sim_node_{'_'.join(args).replace('-', '')}.log"
    probe = RosProbe()
    try:
        js = probe.subscribe(JointState, "/joint_states", keep=5)
        with open(log, "w") as out:
            node = subprocess.Popen([str(bindir / "sim_node"), *args], cwd=ws, env=env, stdout=out,
                                    stderr=subprocess.STDOUT)
        start = time.monotonic()
        try:
            wait_until(lambda: js or node.poll() is not None, 120,
                       what=lambda: f"/joint_states of the installed sim_node {args}:\n{log.read_text()}")
            print(f"installed sim_node {' '.join(args)}: first /joint_states after {time.monotonic() - start:.1f} s")
            assert node.poll() is None, log.read_text()
            missing = set(joints) - set(js[-1].name)
            assert not missing, f"/joint_states of {args} lacks {sorted(missing)}: {list(js[-1].name)}"
        finally:
            if node.poll() is None:
                node.send_signal(signal.SIGINT)
            try:
                code = node.wait(30)
            except subprocess.TimeoutExpired:
                node.kill()
                code = node.wait()
    finally:
        probe.close()
    output = log.read_text()
    assert code == 0, output
    assert "Traceback" not in output and "FileNotFoundError" not in output, output
    return output


def test_the_readmes_launch_line_names_every_preset():
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## With a ROS 2 installation (colcon)", 1)[1].split("\n## ", 1)[0]
    launch = [line for line in section.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
              if line.startswith("ros2 launch contact_sim_ros sim.launch.py")]
    assert len(launch) == 1, launch
    missing = set(PRESET_JOINTS) - set(re.findall(r"\w+", launch[0]))
    assert not missing, f"the README's launch line {launch[0]!r} does not name the presets {sorted(missing)}"


@pytest.mark.parametrize("robot", [name for name in PRESET_JOINTS if name != "iiwa_wsg"])
def test_the_installed_sim_node_starts_every_other_preset(install, robot, monkeypatch):
    """The README's colcon section starts the node for every preset (issue 41, "Done when"); iiwa_wsg is the test
    above. One engine (TAMSI): the presets differ in their files (URDF, meshes, controllers, ros2_control), which
    the install space must hold, not in the engine."""
    ws, env = install
    start_until_joint_states(ws, env, ["--robot", robot, "--engine", "tamsi"], PRESET_JOINTS[robot], monkeypatch)


def test_the_installed_scenario_runner_and_campaigns_find_their_scenes_in_the_share_dir(install):
    """The scenario runner, campaigns and replay take their scenes from the package's data folder
    (resources.resolve_resource), which is share/contact_sim_ros of the install space (issue 41: runner.REPO was
    the folder three levels above runner.py, site-packages/ when installed, which holds no scenes/)."""
    ws, env = install
    share = ws / "install" / "contact_sim_ros" / "share" / "contact_sim_ros"
    runner = "python -m contact_sim_ros.scenarios.runner"
    listed = run(f"{runner} --list", ws, env, 120).stdout
    scenes = [Path(p) for p in re.findall(r"\(scene (\S+)\)$", listed, re.M)]
    assert len(scenes) == len(listed.strip().splitlines()) >= 7, listed
    assert all(p.is_relative_to(share) and p.is_file() for p in scenes), listed
    # a scenario run in process from the install space: its scene, robot and object files found there
    done = run(f"{runner} barrett_box --transport inprocess --duration 0.1 --quiet", ws, env, 300).stdout
    assert "SUCCESS (tamsi): ran 0.10 s without failure" in done, done
    # a campaign's checks read the scenario's scene (its object names) from there
    code = ("from contact_sim_ros.scenarios.campaign import load_campaign; import contact_sim_ros.scenarios.replay; "
            "from contact_sim_ros.resources import resolve_resource; "
            "print(load_campaign(resolve_resource('scenes/campaigns/pick_shake_place.yaml')).scenario)")
    assert run(f'python -c "{code}"', ws, env, 120).stdout.split() == ["pick_shake_place"]
