"""Any robot (issue 16, item 2): a URDF or xacro we do not ship, without a preset, gets default PD gains derived
from the model (sim/default_gains.py) and holds / tracks position commands; xacro descriptions with arguments
(model/robot_description.py). Real URDFs from example-robot-data, TAMSI at dt = 1 ms, no ROS."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from contact_sim_ros.errors import ModelError
from contact_sim_ros.model.loader import default_package_dirs, load_robot_preset
from contact_sim_ros.model.robot_description import split_description, urdf_from_description
from contact_sim_ros.sim.default_gains import (DEFAULT_BANDWIDTH, MAX_POSITION_ERROR, MAX_POSITION_ERROR_PRISMATIC,
                                               default_gains, describe_default_gains)
from contact_sim_ros.sim.scene import load_scene
from contact_sim_ros.sim.simulator import Simulator

ENGINE = "tamsi"
DT = 1e-3
HERE = Path(__file__).resolve().parent
XACRO = HERE / "data" / "ur5_with_tool.urdf.xacro"
UR5_JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
              "wrist_3_joint"]
STEP = np.array([0.3, -0.25, 0.3, 0.3, -0.3, 0.5])     # rad: the commanded position step


def _example_robot_data(rel: str) -> str:
    for d in default_package_dirs():
        cand = os.path.join(d, "example-robot-data", "robots", rel)
        if os.path.isfile(cand):
            return cand
    pytest.skip(f"example-robot-data's {rel} not installed")


def _ur5() -> str:
    return _example_robot_data("ur_description/urdf/ur5_robot.urdf")


class _GravityFeedForward:
    """tau = g(q) on every joint, as the node's ``gravity_compensation`` adds to position-controlled joints."""

    def __init__(self, sim):
        self.sim, self.data = sim, sim.model.pin_model.createData()

    def __call__(self) -> dict:
        m = self.sim.model
        g = pin.computeGeneralizedGravity(m.pin_model, self.data, self.sim.q)[m.joint_v_index]
        return dict(zip(m.joint_names, g))


def _check_gain_rules(sim) -> None:
    """Every joint got default gains: critically damped on M_ii(q0), kp <= effort limit / max error."""
    m = sim.model
    M = pin.crba(m.pin_model, m.pin_model.createData(), sim.scene.q0, pin.Convention.WORLD)
    assert set(sim.default_gains) == set(m.joint_names)
    for name, (kp, kd) in sim.default_gains.items():
        i = m.joint_index(name)
        m_ii = M[m.joint_v_index[i], m.joint_v_index[i]]
        limit = m.effort_limit[i]
        assert kp > 0 and kd > 0
        assert kp * MAX_POSITION_ERROR <= limit * (1 + 1e-12), f"{name}: kp {kp} exceeds {limit} N*m / 0.1 rad"
        assert kp == pytest.approx(min(m_ii * DEFAULT_BANDWIDTH ** 2, limit / MAX_POSITION_ERROR), rel=1e-12)
        assert kd == pytest.approx(2.0 * math.sqrt(kp * m_ii), rel=1e-12)       # critically damped
        vi = m.joint_v_index[i]
        assert (sim.data.kp[vi], sim.data.kd[vi]) == (kp, kd)


def _hold_and_track(sim, joints, hold_s=1.0, track_s=2.0):
    """Hold the initial pose with gravity feed-forward for ``hold_s``, then step every joint by STEP and track
    for ``track_s``. Returns (max hold error, final tracking errors) in rad."""
    m = sim.model
    ff = _GravityFeedForward(sim)
    idx = [m.joint_index(j) for j in joints]
    q0 = sim.joint_positions()[idx].copy()
    hold = 0.0
    for _ in range(int(round(hold_s / DT))):
        sim.set_joint_targets(positions=dict(zip(joints, q0)), efforts=ff())
        sim.step(strict=True)
        hold = max(hold, float(np.abs(sim.joint_positions()[idx] - q0).max()))
    target = q0 + STEP[: len(joints)]
    for _ in range(int(round(track_s / DT))):
        sim.set_joint_targets(positions=dict(zip(joints, target)), efforts=ff())
        sim.step(strict=True)
    return hold, np.abs(sim.joint_positions()[idx] - target)


def test_ur5_without_preset_gets_default_gains_holds_and_tracks():
    """``--urdf ur5_robot.urdf`` (a robot mapping without gains): every joint gets default gains; the arm
    (neutral pose: upper arm and forearm horizontal, the worst case for gravity) holds within 1 mrad for 1 s
    and tracks a 0.25-0.5 rad step in every joint to within 1 % of the step / 3 mrad after 2 s."""
    sim = Simulator({"robot": {"urdf": _ur5()}}, engine=ENGINE, time_step=DT)
    _check_gain_rules(sim)
    hold, err = _hold_and_track(sim, UR5_JOINTS)
    assert hold < 1e-3, f"hold error {hold * 1e3:.3f} mrad"
    assert np.all(err < np.maximum(0.01 * np.abs(STEP), 3e-3)), f"tracking errors {err} rad"


def test_ur5_default_gains_without_gravity_feed_forward_stay_within_the_documented_error():
    """Without the gravity feed-forward the static error is g / kp, at most MAX_POSITION_ERROR (kp is capped at
    effort limit / 0.1 rad and UR5's gravity torques are below its limits); the arm does not fall."""
    sim = Simulator({"robot": {"urdf": _ur5()}}, engine=ENGINE, time_step=DT)
    m = sim.model
    q0 = sim.joint_positions().copy()
    for _ in range(1000):
        sim.set_joint_targets(positions=dict(zip(m.joint_names, q0)))
        sim.step(strict=True)
    err = np.abs(sim.joint_positions() - q0)
    assert err.max() < MAX_POSITION_ERROR
    assert np.abs(sim.joint_velocities()).max() < 1e-3          # settled


def test_xacro_robot_with_arguments_loads_and_tracks():
    """A xacro description with arguments (test/data/ur5_with_tool.urdf.xacro: example-robot-data's UR5
    included through $(find example-robot-data), with a tool of ``tool_mass`` kg on its flange), given as
    ``urdf: "FILE name:=value"`` like ``--urdf``: expanded to a cached URDF outside the user's folders,
    default gains, holds and tracks a step carrying the 3 kg tool."""
    sim = Simulator({"robot": {"urdf": f"{XACRO} tool_mass:=3.0 tool_length:=0.25"}}, engine=ENGINE, time_step=DT)
    urdf = Path(sim.scene.robot.urdf)
    assert urdf.suffix == ".urdf" and urdf.parent != XACRO.parent and urdf.is_file()
    pm = sim.model.pin_model
    tool = pm.inertias[pm.frames[pm.getFrameId("tool")].parentJoint]
    bare = Simulator({"robot": {"urdf": _ur5()}}, engine=ENGINE, time_step=DT).model.pin_model
    assert tool.mass - bare.inertias[pm.frames[pm.getFrameId("tool")].parentJoint].mass == pytest.approx(3.0)
    _check_gain_rules(sim)
    hold, err = _hold_and_track(sim, UR5_JOINTS, hold_s=0.5)
    assert hold < 1e-3
    assert np.all(err < np.maximum(0.01 * np.abs(STEP), 3e-3)), f"tracking errors {err} rad"


def test_xacro_args_key_and_inline_arguments_agree():
    """``xacro_args: {name: value}`` in a robot mapping is the same as inline ``name:=value``; the defaults of
    the xacro:args apply without arguments; same inputs -> the same cached file."""
    inline = load_robot_preset({"urdf": f"{XACRO} tool_mass:=0.5"})
    keyed = load_robot_preset({"urdf": str(XACRO), "xacro_args": {"tool_mass": 0.5}})
    default = load_robot_preset({"urdf": str(XACRO)})
    none = load_robot_preset({"urdf": str(XACRO), "xacro_args": {"tool_mass": 0}})
    assert inline.urdf == keyed.urdf != default.urdf
    assert inline.name == "ur5_with_tool"
    assert '<mass value="0.5"/>' in Path(inline.urdf).read_text()
    assert '<mass value="1.0"/>' in Path(default.urdf).read_text()
    assert 'name="tool"' not in Path(none.urdf).read_text()


def test_split_description():
    assert split_description("/a/b.urdf.xacro x:=1 y:=true") == ("/a/b.urdf.xacro", {"x": "1", "y": "true"})
    assert split_description("/a/my robot.urdf") == ("/a/my robot.urdf", {})
    with pytest.raises(ModelError, match="after the xacro arguments"):
        split_description("/a/b.xacro x:=1 stray")


def test_xacro_errors_name_the_file(tmp_path):
    with pytest.raises(ModelError, match="nope.urdf.xacro"):
        urdf_from_description(tmp_path / "nope.urdf.xacro", {})
    bad = tmp_path / "needs_arg.urdf.xacro"
    bad.write_text('<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="r">'
                   '<link name="$(arg link_name)"/></robot>')
    with pytest.raises(ModelError, match=r"needs_arg\.urdf\.xacro.*link_name"):
        urdf_from_description(bad, {})
    pkg = tmp_path / "unknown_pkg.urdf.xacro"
    pkg.write_text('<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="r">'
                   '<xacro:include filename="$(find no_such_package_xyz)/x.urdf"/></robot>')
    with pytest.raises(ModelError, match=r"unknown_pkg\.urdf\.xacro.*no_such_package_xyz"):
        urdf_from_description(pkg, {})
    with pytest.raises(ModelError, match="needs_arg.urdf.xacro"):        # through the loader and a scene
        load_scene({"robot": {"urdf": str(bad)}})


def test_xacro_relative_mesh_paths_resolve_against_the_xacro_folder(tmp_path):
    """A relative mesh path in a xacro resolves against the xacro's folder, not the cache folder."""
    src = Path(_example_robot_data("ur_description/meshes/ur5/collision/wrist3.stl"))
    (tmp_path / "meshes").mkdir()
    (tmp_path / "meshes" / "wrist3.stl").write_bytes(src.read_bytes())
    x = tmp_path / "one_link.urdf.xacro"
    x.write_text(
        '<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="one_link">'
        '<xacro:arg name="mass" default="1.0"/>'
        '<link name="base"/><link name="l1"><inertial><mass value="$(arg mass)"/>'
        '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>'
        '<collision><geometry><mesh filename="meshes/wrist3.stl"/></geometry></collision></link>'
        '<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>'
        '<limit lower="-3" upper="3" effort="10" velocity="2"/></joint></robot>')
    sim = Simulator({"robot": {"urdf": f"{x} mass:=2.0"}}, engine=ENGINE, time_step=DT)
    assert str(tmp_path / "meshes" / "wrist3.stl") in Path(sim.scene.robot.urdf).read_text()
    assert set(sim.default_gains) == {"j1"}


def test_preset_gains_win_and_only_missing_joints_get_defaults():
    """A robot mapping (scene robot entry) with ``gains`` for some joints: those are used as given, only the
    others get defaults; the shipped presets give every joint, so none of them gets defaults."""
    given = {"shoulder_pan_joint": {"kp": 100.0, "kd": 5.0}, "wrist_3_joint": {"kp": 7.0}}
    sim = Simulator({"robot": {"urdf": _ur5(), "gains": given}}, engine=ENGINE, time_step=DT)
    m = sim.model
    assert set(sim.default_gains) == set(UR5_JOINTS) - set(given)
    vi = m.joint_v_index[m.joint_index("shoulder_pan_joint")]
    assert (sim.data.kp[vi], sim.data.kd[vi]) == (100.0, 5.0)
    vi = m.joint_v_index[m.joint_index("wrist_3_joint")]
    assert (sim.data.kp[vi], sim.data.kd[vi]) == (7.0, 0.0)
    for preset in ("allegro", "barrett", "franka", "iiwa_wsg"):
        scene = load_scene({"robot": preset})
        assert set(scene.robot.gains) == set(scene.model.joint_names), preset   # no defaults for presets


def test_prismatic_joints_cap_at_the_prismatic_error():
    """Franka's finger (prismatic, 70 N): kp <= 70 N / 0.01 m; default_gains works on any joint subset."""
    scene = load_scene({"robot": "franka"})
    gains = default_gains(scene.model, scene.q0, ["panda_finger_joint1", "panda_joint7"])
    kp, _ = gains["panda_finger_joint1"]
    assert kp * MAX_POSITION_ERROR_PRISMATIC <= 70.0 + 1e-9
    assert gains["panda_joint7"][0] * MAX_POSITION_ERROR <= 12.0 + 1e-9


def test_describe_default_gains_names_every_joint():
    text = describe_default_gains({"shoulder_pan_joint": (1500.0, 162.05), "wrist_3_joint": (67.6, 2.15)}, "ur5")
    assert text.startswith("ur5: no PD gains given for 2 joints")
    assert "shoulder_pan_joint kp=1500 kd=162" in text and "wrist_3_joint kp=67.6 kd=2.15" in text
    assert "'gains'" in text and "docs/design.md" in text
    assert describe_default_gains({}) == ""
