"""Passive joints stay passive (sim/default_gains.py, drive_plan): a robot that declares its drives (a
<ros2_control> joint with a command interface, a <transmission>, a preset's gains, the scene's joint_targets)
drives exactly those joints; its other joints move freely. A bare URDF keeps default gains on every joint and
every entry point says so; the scene key passive_joints switches a joint's drive off.

The robot: two carts on prismatic slides from a fixed base, without gravity or contact: 'slide' (x) and 'lift'
(y), each carrying a mass. A push F on a passive cart accelerates it as F/m (the discrete integration exactly:
v_k = k dt F/m, x_N = dt^2 F/m N(N+1)/2); a driven cart under the same push holds at the PD's static deflection
F/kp.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

from contact_sim_ros.cli import run_scene
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.sim.default_gains import DEFAULT_BANDWIDTH, DefaultGainsWarning
from contact_sim_ros.sim.simulator import Simulator

M_SLIDE, M_LIFT = 2.0, 3.0        # kg
FORCE = 4.0                       # N
DT = 1e-3                         # s

LINK = """  <link name="{name}"><inertial><mass value="{m}"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><geometry><box size="0.1 0.1 0.1"/></geometry></collision></link>
"""
JOINT = """  <joint name="{name}" type="prismatic"><parent link="base"/><child link="{child}"/>
    <origin xyz="{xyz}"/><axis xyz="{axis}"/><limit lower="-10" upper="10" effort="1000" velocity="10"/></joint>
"""
ROS2_CONTROL = """  <ros2_control name="carts" type="system">
    <hardware><plugin>mock_components/GenericSystem</plugin></hardware>
    <joint name="slide"><state_interface name="position"/><state_interface name="velocity"/></joint>
    <joint name="lift"><command_interface name="position"/><state_interface name="position"/></joint>
  </ros2_control>
"""
TRANSMISSION = """  <transmission name="lift_transmission"><type>transmission_interface/SimpleTransmission</type>
    <joint name="lift"><hardwareInterface>hardware_interface/EffortJointInterface</hardwareInterface></joint>
    <actuator name="lift_motor"><mechanicalReduction>1</mechanicalReduction></actuator></transmission>
"""


def _urdf(tmp_path, block: str = "") -> str:
    text = ('<?xml version="1.0"?>\n<robot name="carts">\n  <link name="base"/>\n'
            + LINK.format(name="cart", m=M_SLIDE) + LINK.format(name="block", m=M_LIFT)
            + JOINT.format(name="slide", child="cart", xyz="0 0 0.5", axis="1 0 0")
            + JOINT.format(name="lift", child="block", xyz="0 1 0.5", axis="0 1 0") + block + "</robot>\n")
    path = tmp_path / "carts.urdf"
    path.write_text(text)
    return str(path)


def _scene(urdf: str, **extra) -> dict:
    return {"robot": {"urdf": urdf}, "gravity": [0, 0, 0],
            "inputs": {"external_forces": [{"body": "cart", "force": [FORCE, 0, 0]},
                                           {"body": "block", "force": [0, FORCE, 0]}]}, **extra}


def _positions(sim) -> dict:
    return dict(zip(sim.model.joint_names, sim.joint_positions()))


def _free_x(n_steps: int, mass: float) -> float:
    """Position after n steps of a mass pushed by FORCE from rest, as the simulator integrates it."""
    return DT * DT * FORCE / mass * n_steps * (n_steps + 1) / 2


@pytest.mark.parametrize("block", [ROS2_CONTROL, TRANSMISSION], ids=["ros2_control", "transmission"])
@pytest.mark.parametrize("engine", ["tamsi", "lagged"])
def test_passive_joint_moves_freely_driven_joint_holds(tmp_path, engine, block):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim = Simulator(_scene(_urdf(tmp_path, block)), engine=engine, time_step=DT)
    assert sim.passive_joints == ("slide",)
    assert list(sim.default_gains) == ["lift"]          # declared driven, no gains given: the defaults
    said = [str(w.message) for w in caught if issubclass(w.category, DefaultGainsWarning)]
    assert len(said) == 1 and "lift kp=" in said[0] and "Passive (no drive): slide" in said[0], said
    kp = sim.default_gains["lift"][0]
    n = 1000
    for _ in range(n):
        assert sim.step().ok
    q = _positions(sim)
    # the passive cart: F/m, to the discrete integration's digits (no drive, no damping, no contact)
    np.testing.assert_allclose(q["slide"], _free_x(n, M_SLIDE), rtol=1e-9)
    # the driven one holds at the static deflection F/kp (settled: 30 Hz critically damped, 1 s)
    np.testing.assert_allclose(q["lift"], FORCE / kp, rtol=1e-3)
    assert q["lift"] < 1e-2 * _free_x(n, M_LIFT)


def test_passive_joint_ignores_efforts_and_position_commands(tmp_path):
    """No actuator: an effort (e.g. the node's gravity feed-forward) or a position target moves it not at all."""
    sim = Simulator({**_scene(_urdf(tmp_path, ROS2_CONTROL)), "inputs": {}}, engine="tamsi", time_step=DT)
    names = list(sim.model.joint_names)
    for _ in range(200):
        sim.set_joint_targets(positions={"slide": 1.0}, efforts={"slide": 50.0})
        assert sim.step().ok
    slide_v = sim.model.joint_v_index[names.index("slide")]
    assert abs(_positions(sim)["slide"]) < 1e-12 and abs(sim.v[slide_v]) < 1e-12
    ones = np.ones(len(names), dtype=bool)
    for _ in range(200):
        sim.set_joint_command_arrays(ones, ~ones, np.ones(len(names)), np.zeros(len(names)), np.full(len(names), 50.0))
        assert sim.step().ok
    q = _positions(sim)
    assert abs(q["slide"]) < 1e-12 and q["lift"] > 0.9       # the driven one follows its target 1 m


def test_bare_urdf_keeps_default_gains_says_so_and_passive_joints_switches_them_off(tmp_path):
    urdf = _urdf(tmp_path)
    with pytest.warns(DefaultGainsWarning, match=r"no PD gains given for 2 joints.*'passive_joints: \[\.\.\.\]'"
                      ) as said:
        sim = Simulator(_scene(urdf), engine="tamsi", time_step=DT)
    assert "slide kp=" in str(said[0].message) and "lift kp=" in str(said[0].message)
    assert sim.passive_joints == () and set(sim.default_gains) == {"slide", "lift"}
    # an axis-aligned prismatic joint (Pinocchio's JointModelPY) is capped at effort / 0.01 m, not / 0.1 m: here
    # M_ii omega^2 (the cart alone moves along y: 1.07e5 N/m at 30 Hz) capped at 1000 N / 0.01 m (/ 0.1 m: 1e4)
    assert M_LIFT * DEFAULT_BANDWIDTH ** 2 > 1000.0 / 0.01
    np.testing.assert_allclose(sim.default_gains["lift"][0], 1000.0 / 0.01, rtol=1e-9)
    for _ in range(1000):
        sim.step()
    q = _positions(sim)
    np.testing.assert_allclose(q["slide"], FORCE / sim.default_gains["slide"][0], rtol=1e-3)   # held, as before

    with pytest.warns(DefaultGainsWarning, match=r"Passive \(no drive\): slide"):
        sim = Simulator(_scene(urdf, passive_joints=["slide"]), engine="tamsi", time_step=DT)
    assert sim.passive_joints == ("slide",) and list(sim.default_gains) == ["lift"]
    for _ in range(500):
        sim.step()
    np.testing.assert_allclose(_positions(sim)["slide"], _free_x(500, M_SLIDE), rtol=1e-9)

    with pytest.raises(ConfigError, match="passive_joints: unknown joint 'slid'"):
        Simulator(_scene(urdf, passive_joints=["slid"]), engine="tamsi", time_step=DT)


def test_scripted_joint_is_driven_the_others_passive(tmp_path):
    """A scene's joint_targets declare a drive: the scripted joint is driven, the robot's other joints passive."""
    scene = _scene(_urdf(tmp_path))
    scene["inputs"]["joint_targets"] = [{"joint": "lift", "position": 0.0}]
    with pytest.warns(DefaultGainsWarning):
        sim = Simulator(scene, engine="tamsi", time_step=DT)
    assert sim.passive_joints == ("slide",) and list(sim.default_gains) == ["lift"]


def test_presets_keep_every_joint_driven():
    for robot in ("iiwa_wsg", "franka", "allegro", "barrett"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", DefaultGainsWarning)    # presets give every joint its gains
            sim = Simulator({"robot": robot}, engine="tamsi", time_step=DT)
        assert sim.passive_joints == () and not sim.default_gains
        assert np.all(sim.data.kp[sim.model.joint_v_index] > 0)


def test_contact_sim_run_says_which_joints_got_default_gains(tmp_path):
    out = io.StringIO()
    run_scene(_scene(_urdf(tmp_path)), "tamsi", DT, 0.01, out=out, progress=False)
    text = out.getvalue()
    assert "warning: carts: no PD gains given for 2 joints" in text and "passive_joints" in text, text
    out = io.StringIO()
    run_scene(_scene(_urdf(tmp_path, ROS2_CONTROL)), "tamsi", DT, 0.01, out=out, progress=False)
    assert "Passive (no drive): slide" in out.getvalue(), out.getvalue()
