"""Bounds of a step that fit the scene (issue 31, defects 4 and 7), in sim time without ROS:

* divergence bounds grow as a free fall's: an object falling for 12 s (the hand presets have no ground) steps on,
  at the analytic speed g t, while a launch beyond the bound of its time still fails (sim/divergence.py);
* deep interpenetration: a 1e9 N squeeze drives the gripper's finger pads through the 4 cm-radius mug (4.1 cm deep
  with every compliant engine); the step fails with the reason, keeps the state, and the same scene with its
  10 N grip steps without a failure; a ball pushed through the ground fails the fused free-body step the same way
  (sim/penetration.py);
* step counts of a ~/step / StepSimulation request are bounded (driver/loop.py).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from contact_sim_ros.errors import ConfigError
from contact_sim_ros.resources import share_dir
from contact_sim_ros.sim.penetration import PenetrationCheck, shape_thickness
from contact_sim_ros.sim.simulator import Simulator
from contact_sim_ros.yaml_files import read_mapping

G = 9.81


def _falling(**limits):
    return Simulator({"objects": [{"name": "mug", "shape": {"cylinder": [0.04, 0.1]}, "mass": 0.3,
                                   "pose": {"xyz": [0, 0, 0.5]}}]}, time_step=5e-3, **limits)


def test_a_free_fall_of_12_s_steps_on_at_the_analytic_speed():
    """Without a ground the mug falls: at 12 s it moves at g t = 117.7 m/s, beyond the old fixed 100 m/s bound,
    590 m below the start; every step succeeds and the speed is the analytic one."""
    sim = _falling()
    reports = [sim.step() for _ in range(2400)]
    failed = [r.message for r in reports if not r.ok]
    assert not failed, failed[:1]
    assert sim.t == pytest.approx(12.0)
    v = sim.body_velocity("mug")[:3]
    np.testing.assert_allclose(v, [0.0, 0.0, -G * sim.t], rtol=1e-9, atol=1e-9)
    assert sim.body_pose("mug").translation[2] == pytest.approx(0.5 - 0.5 * G * 12.0 * 12.0, rel=2e-3)


def test_the_bound_of_a_later_time_still_catches_a_launch_and_reset_restores_the_tight_one():
    """At 12 s the speed bound is 100 + g 12 = 217.7 m/s: a 6500 m/s launch fails naming that bound; after reset
    (t = 0) 150 m/s fails again at once (the compiled pass's scales follow the time back)."""
    sim = _falling()
    for _ in range(2400):
        assert sim.step().ok
    v = sim.v.copy()
    v[2] = 6500.0
    sim.set_state(sim.q, v)
    report = sim.step()
    assert not report.ok
    assert re.search(r"diverged: free body 'mug' speed 6500 m/s > 217\.\d m/s at t = 12\.\d+ s "
                     r"\(bound: max_speed 100 m/s \+ \|g\| t\)", report.message), report.message
    v[2] = 150.0                        # within the bound at 12 s
    sim.set_state(sim.q, v)
    assert sim.step().ok
    sim.reset()
    v = sim.v.copy()
    v[2] = 150.0
    sim.set_state(sim.q, v)
    report = sim.step()
    assert not report.ok and "speed 150 m/s > 100 m/s" in report.message, report.message


def test_the_distance_bound_counts_the_scene_size_and_the_configured_limit():
    sim = _falling(divergence_limits={"max_distance": 10.0, "max_speed": 1.0})
    check = sim._divergence
    assert check.scene_size == pytest.approx(0.5)
    speed, angular, distance = check.bounds(2.0)
    assert speed == pytest.approx(1.0 + 2.0 * G)
    assert distance == pytest.approx(10.0 + 0.5 + 1.0 * 2.0 + 0.5 * G * 4.0)
    assert angular == 1000.0


@pytest.mark.parametrize("scene", ["default.yaml", "scenario_barrett_cylinder.yaml", "iiwa_allegro_mug.yaml",
                                   "icf_clutter.yaml"])
def test_scene_size_is_the_farthest_joint_origin_of_pinocchios_kinematics_without_a_pinocchio_data(
        scene, monkeypatch):
    """scene_size equals the largest |oMi[j].translation| of pin.forwardKinematics at q0 (revolute and prismatic
    joints, the BarrettHand's mimic joints, free flyers), bit for bit, and builds no pin.Data: Pinocchio 4.1's
    holds four nv^3 tensors, 0.45 GB for the 40-object bin (nv 240), which the Simulator's build held twice at
    once (peak 1.14 GB, 0.70 GB resident after)."""
    import pinocchio as pin
    from contact_sim_ros.sim.divergence import scene_size
    from contact_sim_ros.sim.scene import load_scene
    s = load_scene(share_dir() / "scenes" / scene)
    pm = s.model.pin_model
    data = pin.Data(pm)
    pin.forwardKinematics(pm, data, s.q0)
    expected = max(float(np.linalg.norm(data.oMi[j].translation)) for j in range(1, pm.njoints))
    del data

    def no_data(*args):
        raise AssertionError("scene_size built a pin.Data")
    monkeypatch.setattr(pin, "Data", no_data)
    assert scene_size(pm, s.q0) == expected > 0.2


# ---------------------------------------------------------------------------------------- interpenetration

def _gripper_mug(squeeze_N: float | None):
    """scenes/tamsi_gripper_mug.yaml (10 N per finger on a 4 cm-radius mug); with ``squeeze_N`` the fingers are
    pushed together by that force instead (external forces ramped over 50 ms; the joints' effort limit is 100 N)."""
    scene = read_mapping(share_dir() / "scenes" / "tamsi_gripper_mug.yaml", "scene")
    scene["robot"]["urdf"] = str(share_dir() / "scenes" / "tamsi_gripper.urdf")
    if squeeze_N is not None:
        ramp = f"{squeeze_N} * min(t / 0.05, 1)"
        scene["inputs"] = {"joint_targets": [{"joint": "lift", "position": -0.15}],
                           "external_forces": [{"body": "left_finger", "force": [ramp, 0, 0]},
                                               {"body": "right_finger", "force": [f"-{ramp}", 0, 0]}]}
    return scene


@pytest.mark.parametrize("engine", ["tamsi", "semi_implicit", "sap"])
def test_a_1e9_N_squeeze_through_the_mug_fails_the_step_and_keeps_the_state(engine):
    unchecked = Simulator(_gripper_mug(1e9), engine=engine, time_step=1e-3, penetration_limit=False)
    depth = 0.0
    for _ in range(20):
        assert unchecked.step().ok          # nothing else sees it: every step "converged"
        depth = max(depth, -unchecked.contacts.signed_distance.min())
    assert depth > 0.04                     # the pads' centres are past the mug's surface (4 cm radius)

    sim = Simulator(_gripper_mug(1e9), engine=engine, time_step=1e-3)
    reports = [sim.step() for _ in range(20)]
    failed = [r for r in reports if not r.ok]
    assert failed and all(not r.ok for r in reports[reports.index(failed[0]):])
    r = failed[0]
    assert re.search(r"^deep interpenetration: '(left|right)_finger_0' and 'mug' overlap by \d(\.\d+)? cm > 1 x the "
                     r"thickness of the thinner one \('(left|right)_finger_0', 2 cm\) at t = 0\.\d+ s", r.message), \
        r.message
    assert r.message.endswith("state kept") and r.t == failed[-1].t          # the state stays where it failed
    q, v = sim.q.copy(), sim.v.copy()
    assert not sim.step().ok
    np.testing.assert_array_equal(sim.q, q)
    np.testing.assert_array_equal(sim.v, v)


@pytest.mark.parametrize("engine", ["tamsi", "sap"])
def test_the_10_N_grip_on_the_mug_never_trips_the_bound(engine):
    sim = Simulator(_gripper_mug(None), engine=engine, time_step=3e-3)
    failed = [r.message for r in (sim.step() for _ in range(300)) if not r.ok]
    assert not failed, failed[:1]


def test_a_ball_pushed_through_the_ground_fails_the_fused_step():
    """TAMSI on a free sphere on the ground runs the fused compiled step; 1e6 N (ramped over 0.1 s) pushes the
    100 kg, 5 cm-radius ball through the ground (0.98 m deep after 0.3 s unchecked): the step fails with the reason
    once the ball is deeper than its diameter (the staged step reports it)."""
    scene = {"objects": [{"name": "ball", "shape": {"sphere": 0.05}, "mass": 100.0, "pose": {"xyz": [0, 0, 0.049]}}],
             "environment": [{"name": "ground", "shape": "halfspace"}],
             "inputs": {"external_forces": [{"body": "ball", "force": [0, 0, "-1e6 * min(t / 0.1, 1)"]}]}}
    sim = Simulator(scene, engine="tamsi", time_step=1e-3)
    assert sim._fused is not None
    reports = [sim.step() for _ in range(300)]
    failed = [r for r in reports if not r.ok]
    assert failed, "the ball went through the ground unnoticed"
    assert re.search(r"deep interpenetration: '(ball|ground)' and '(ball|ground)' overlap by .* cm > 1 x the "
                     r"thickness of the thinner one \('ball', 10 cm\)", failed[0].message), failed[0].message


@pytest.mark.process
def test_the_penetration_pass_is_loaded_with_the_simulator_not_at_the_first_touch_down():
    """A fresh process: the compiled penetration pass has the variant a step's contacts call once the Simulator is
    built, so the first step with a contact loads nothing (loading it there stalled that step for ~2.5 ms)."""
    import subprocess
    import sys
    script = (
        "from contact_sim_ros.sim.penetration_kernels import deepest_excess as k\n"
        "from contact_sim_ros.sim.simulator import Simulator\n"
        "sim = Simulator({'objects': [{'name': 'ball', 'shape': {'sphere': 0.025}, 'mass': 0.5,\n"
        "                  'pose': {'xyz': [0, 0, 0.05]}}], 'environment': [{'name': 'g', 'shape': 'halfspace'}]},\n"
        "                engine='tamsi', time_step=2e-3)\n"
        "built = sorted(map(str, k.signatures))\n"
        "touched = 0\n"
        "for _ in range(100):\n"
        "    sim.step(strict=True)\n"
        "    touched += sim.contacts.size > 0\n"
        "print(touched, built == sorted(map(str, k.signatures)), len(built))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    touched, same, variants = out.stdout.split()
    assert int(touched) > 10 and same == "True" and int(variants) == 1, out.stdout


def test_thickness_of_shapes_and_bodies():
    import coal
    assert shape_thickness(coal.Sphere(0.05)) == pytest.approx(0.1)
    assert shape_thickness(coal.Box(0.3, 0.02, 0.5)) == pytest.approx(0.02)
    assert shape_thickness(coal.Cylinder(0.04, 0.3)) == pytest.approx(0.08)
    assert shape_thickness(coal.Capsule(0.01, 0.5)) == pytest.approx(0.02)
    assert shape_thickness(coal.Halfspace(np.array([0, 0, 1.0]), 0.0)) == np.inf
    sim = Simulator(str(share_dir() / "scenes" / "default.yaml"), engine="tamsi")
    th = dict(zip(sim.model.geometry_names, sim._penetration.thickness))
    # the WSG's 3 mm pad counts as thick as its 14 mm finger (one body); the ground is infinitely thick
    assert th["wsg_finger_left_1"] == th["wsg_finger_left_0"] == pytest.approx(0.014, abs=1e-3)
    assert th["ground"] == np.inf and th["box"] == pytest.approx(0.05)


def test_penetration_limit_is_configurable_and_checked():
    scene = _gripper_mug(1e9)
    loose = Simulator(scene, engine="tamsi", time_step=1e-3, penetration_limit=10.0)
    assert all(loose.step().ok for _ in range(20))
    assert Simulator(scene, engine="tamsi", penetration_limit=float("inf"))._penetration is None
    assert isinstance(Simulator(scene, engine="tamsi", penetration_limit=0.5)._penetration, PenetrationCheck)
    for bad in (0.0, -1.0, float("nan"), "deep"):
        with pytest.raises(ConfigError, match="penetration_limit"):
            Simulator(scene, engine="tamsi", penetration_limit=bad)


# ---------------------------------------------------------------------------------------- step counts

def test_step_counts_are_bounded_and_a_huge_wait_never_overflows():
    import threading
    from contact_sim_ros.driver.loop import MAX_STEPS_PER_REQUEST, SteppingLoop, step_count_problem, \
        step_wait_timeout
    from contact_sim_ros.driver.system import SimulatorSystem
    assert step_count_problem(0) == "" and step_count_problem(MAX_STEPS_PER_REQUEST) == ""
    for n in (2 ** 63 - 1, 2 ** 64 - 1, MAX_STEPS_PER_REQUEST + 1):
        assert f"{n} steps exceed the bound of {MAX_STEPS_PER_REQUEST} steps per request" in step_count_problem(n)
    assert "must be >= 0" in step_count_problem(-1)
    assert step_wait_timeout(10 ** 12) == threading.TIMEOUT_MAX and step_wait_timeout(10) == 30.0
    loop = SteppingLoop(SimulatorSystem(_falling()), real_time_factor=0.0, start_paused=True)
    loop.start()
    try:
        ran, why = loop.run_steps(2 ** 63 - 1, timeout=1e300)        # refused, not an OverflowError
        assert ran == 0 and "exceed the bound" in why
        assert loop.run_steps(3, timeout=1e300) == (3, "")          # an overlong timeout is clipped
    finally:
        loop.stop()
