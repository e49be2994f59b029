"""Perception in the loop (issue 28): scenario 1's controller locates the bottle in one wrist depth image (the
D435-like stereo depth model: noise, quantisation, min-Z, stereo shadow) instead of being told where it is, and
picks it there. In process, sim time, real renderer (moderngl on EGL), real physics (TAMSI)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from contact_sim_ros.clients.inprocess_link import InProcessLink
from contact_sim_ros.clients.pick_shake_place import PickShakePlace, PickShakePlaceParams, run_controller
from contact_sim_ros.clients.link_messages import ControllerError
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.scenarios.campaign import trial_scene
from contact_sim_ros.scenarios.runner import REPO, SCENARIOS
from contact_sim_ros.yaml_files import load_yaml

SPEC = SCENARIOS["pick_shake_place"]
SHORT = dict(motion_time=0.5, hold_time=0.45, shake_cycles=1)
NOMINAL = np.array([0.55, -0.12])       # scenes/scenario_pick_shake_place*.yaml: the bottle's axis; pick_xy
TOLERANCE = 0.005                       # m, perceived axis against the truth
BOTTLE_MASS = 0.508938                  # kg, urdf/objects/bottle.urdf


def _run(tmp_path: Path, offset, **params):
    """Scenario 1 in process on the camera scene with the bottle moved by ``offset`` (m, x y): the verdict, and
    the true axis (the scene's pose plus the offset, independent of the controller)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    scene = trial_scene(REPO / SPEC.perception_scene, {"object.bottle.x": offset[0], "object.bottle.y": offset[1]},
                        tmp_path)
    truth = np.array(load_yaml(scene.read_text())["objects"][0]["pose"]["xyz"][:2], float)
    c = PickShakePlace(PickShakePlaceParams(**{**SHORT, **params}))
    link = InProcessLink(scene, "tamsi", SPEC.time_step, SPEC.period, ft_topic=c.ft_topic,
                         trajectory_controllers=c.trajectory_controllers,
                         inactive_controllers=SPEC.inactive_controllers)
    try:
        return run_controller(c, link), truth
    finally:
        link.close()


def test_the_camera_scene_is_scenario_1_plus_cameras():
    base, cams = (load_yaml((REPO / f).read_text()) for f in (SPEC.scene, SPEC.perception_scene))
    assert cams.pop("cameras") and "cameras" not in base
    cams.pop("description"), base.pop("description")
    assert cams == base


@pytest.mark.parametrize("offset", [(0.0, 0.0), (0.03, -0.03)], ids=["nominal", "displaced_3cm"])
def test_a_pick_from_the_wrist_depth_image_finds_the_bottle_where_it_is_and_lifts_it(tmp_path, offset):
    v, truth = _run(tmp_path, offset, pick_source="perception", stop_at="shake")
    n = v.numbers
    assert v.success, v.reason
    perceived = np.array([n["pick_x_m"], n["pick_y_m"]])
    assert np.linalg.norm(perceived - truth) < TOLERANCE, (perceived, truth)
    assert n["perception_error_m"] == pytest.approx(np.linalg.norm(perceived - truth), abs=1e-6)
    assert n["perceived_top_z_m"] == pytest.approx(0.18, abs=TOLERANCE)          # bottle 18 cm tall on the floor
    if offset != (0.0, 0.0):     # not the nominal pose: perception saw the displacement
        assert np.linalg.norm(perceived - NOMINAL) > np.linalg.norm(offset) - TOLERANCE
    # picked: after lifting, the wrist carries the bottle's weight
    assert n["held_mass_kg"] == pytest.approx(BOTTLE_MASS, rel=0.05)


def test_the_displaced_bottle_is_missed_at_the_nominal_pose(tmp_path):
    """The control of the test above: told the nominal pose, the grasp closes on nothing."""
    v, _ = _run(tmp_path, (0.03, -0.03), pick_source="given", stop_at="shake")
    assert not v.success and v.reason.startswith("grasp: the fingers closed"), v.reason


def test_label_segmentation_and_truth_sources_locate_the_same_bottle(tmp_path):
    offset = (-0.02, 0.025)
    v, truth = _run(tmp_path / "a", offset, pick_source="perception", segmentation="labels", stop_at="approach")
    assert v.success, v.reason
    assert np.hypot(v.numbers["pick_x_m"] - truth[0], v.numbers["pick_y_m"] - truth[1]) < TOLERANCE
    v, truth = _run(tmp_path / "b", offset, pick_source="truth", stop_at="approach")
    assert (v.numbers["pick_x_m"], v.numbers["pick_y_m"]) == pytest.approx(tuple(truth), abs=1e-4)


def test_a_bottle_outside_the_view_is_a_perception_failure_not_a_nominal_guess(tmp_path):
    v, _ = _run(tmp_path, (0.0, 0.0), pick_source="perception", pick_xy=(0.55, 0.3), stop_at="approach")
    assert not v.success and v.reason.startswith("perception: camera 'wrist_camera' did not find the bottle"), \
        v.reason


def test_bad_pick_sources_are_named():
    with pytest.raises(ConfigError, match="unknown pick_source 'camera'; valid pick_sources: given, perception"):
        PickShakePlace(PickShakePlaceParams(pick_source="camera"))

    class NoCameras:       # a link without rendering (as the ROS link)
        period_ns = 20_000_000
    with pytest.raises(ControllerError, match="pick_source 'perception' needs a link that renders cameras"):
        PickShakePlace(PickShakePlaceParams(pick_source="perception")).setup(NoCameras(), 0, "")
