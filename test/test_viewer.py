"""The browser viewer: a real viser server, rendered by headless Chromium, compared pixel by pixel."""

import shutil
import socket
import subprocess
import time
import urllib.request

import matplotlib.image
import numpy as np
import pytest

from contact_sim_ros.sim.simulator import Simulator
from contact_sim_ros.viewer.scene_viewer import ROBOT_COLOR, SceneViewer, ViewerProcess, simulator_frame

BOX_MASS = 0.5
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _screenshot(url: str, path) -> np.ndarray:
    """Screenshot of the page once the scene has arrived over the websocket (the ground's colour is on
    screen); a loaded machine gets longer virtual-time budgets."""
    assert CHROMIUM, "Debian's chromium is not installed (the project's set-up installs it)"
    for attempt, budget in enumerate((4000, 12000, 4000)):
        try:      # headless Chromium's virtual time now and then never ends: kill it and try again
            subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader",
                            "--use-angle=swiftshader", "--disable-background-networking",
                            "--disable-component-update", "--disable-sync", "--no-first-run",
                            f"--user-data-dir={path.parent / f'chromium-profile-{path.stem}-{attempt}'}", "--window-size=1000,700",
                            f"--virtual-time-budget={budget}", f"--screenshot={path}", url],
                           check=True, capture_output=True, timeout=60)
        except subprocess.TimeoutExpired:
            continue
        image = matplotlib.image.imread(str(path))[..., :3]
        r, g, b = image[..., 0], image[..., 1], image[..., 2]
        ground = (r > g) & (g > b) & (r - b > 0.04)         # the warm-tinted floor, whatever the lighting
        if ground.mean() > 0.01:
            return image
    raise AssertionError(f"the scene never appeared in the browser at {url}")


def _changed_fraction(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(np.abs(a - b).max(axis=2) > 0.1))


@pytest.fixture(scope="module")
def viewer_on_table(tmp_path_factory):
    sim = Simulator({"robot": "franka",
                     "environment": [{"name": "ground", "shape": "halfspace"},
                                     {"name": "table", "shape": {"box": [0.6, 0.8, 0.04]},
                                      "pose": {"xyz": [0.5, 0.0, 0.18]}}],
                     "objects": [{"name": "box", "shape": {"box": [0.06, 0.06, 0.06]}, "mass": BOX_MASS,
                                  "pose": {"xyz": [0.45, 0.15, 0.23]}}]},
                    engine="semi_implicit", time_step=1e-3)
    sim.run(0.3)
    # camera close to the box so that its force arrows (0.1 m/N: 12 cm for a 1.2 N corner force) fill pixels
    viewer = SceneViewer(sim.model, port=_free_port(), force_scale=0.1,
                         camera_position=(1.0, -0.45, 0.75), camera_target=(0.4, 0.1, 0.25))
    viewer.update_from_simulator(sim, 1.0)
    full = _screenshot(viewer.url, tmp_path_factory.mktemp("viewer") / "scene.png")   # shared reference
    yield sim, viewer, full
    viewer.close()


def test_robot_is_visible_in_the_browser(viewer_on_table, tmp_path):
    sim, viewer, with_robot = viewer_on_table
    robot = [viewer._handles[g] for g in viewer._moving if viewer.geometries[g].color == ROBOT_COLOR]
    assert robot, "no robot geometry in the viewer"
    for h in robot:
        h.visible = False
    try:
        without_robot = _screenshot(viewer.url, tmp_path / "empty.png")
    finally:
        for h in robot:
            h.visible = True
    assert _changed_fraction(with_robot, without_robot) > 0.005, "hiding the robot changed no pixels"


def test_force_arrows_appear_for_an_object_resting_on_the_table(viewer_on_table, tmp_path):
    sim, viewer, with_arrows = viewer_on_table
    assert viewer.contact_count >= 3
    # the drawn forces are those on the box: together they carry its weight, pointing up
    np.testing.assert_allclose(viewer.total_force, [0.0, 0.0, BOX_MASS * 9.81], rtol=0.02, atol=0.02)
    viewer._arrows.visible = False
    try:
        without_arrows = _screenshot(viewer.url, tmp_path / "no_arrows.png")
    finally:
        viewer._arrows.visible = True
    assert _changed_fraction(with_arrows, without_arrows) > 3e-4, "the force arrows are not drawn"


def test_viewer_process_serves_the_scene_and_takes_frames(tmp_path):
    """The out-of-process viewer used by the CLI and the node: it starts, serves the page and takes frames
    without blocking the caller."""
    sim = Simulator({"objects": [{"name": "ball", "shape": {"sphere": 0.05}, "mass": 0.2,
                                  "pose": {"xyz": [0, 0, 0.05]}}],
                     "environment": [{"name": "ground", "shape": "halfspace"}]}, engine="semi_implicit")
    viewer = ViewerProcess(sim.model, port=_free_port())
    try:
        sim.run(0.05)
        start = time.perf_counter()
        accepted = [viewer.publish(simulator_frame(sim, 1.0)) for _ in range(50)]
        assert time.perf_counter() - start < 1.0            # never blocks
        assert accepted[0]
        with urllib.request.urlopen(viewer.url, timeout=30) as page:   # the page is served
            assert page.status == 200 and b"<html" in page.read(2000).lower()
    finally:
        viewer.close()
