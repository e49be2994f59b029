"""Start-up: bad robot/engine/config parameters stop the node with a clear message (exit code 2), and two
simulated robots run side by side with their own namespaces and frame prefixes."""

import time
from pathlib import Path

import numpy as np
import pytest
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage

from ros_testing import NodeProcess, wait_until, world_pose


BAD_STARTS = {
    # name: (flags, expected message)
    "robot": (["--robot", "ur5"], "unknown robot 'ur5'; valid robots: allegro, barrett, franka, iiwa_wsg"),
    "engine": (["--engine", "physx"], "unknown engine 'physx'; valid engines: "),
    "time_step": (["--time-step", "-0.001"], "parameter 'time_step': must be in (0, 0.1] s"),
    "flag": (["--robto", "iiwa_wsg"], "valid flags: "),
    "config": (["--config", "{tmp}/bad.yaml"], "parameter 'real_time_factor': must be >= 0"),
    "scene": (["--scene", "{tmp}/scene.yaml"], "cone"),
}


@pytest.fixture(scope="module")
def bad_starts(tmp_path_factory):
    """Every bad start-up at once (in parallel: each costs a Python + rclpy + Pinocchio start)."""
    tmp = tmp_path_factory.mktemp("bad")
    (tmp / "bad.yaml").write_text("/**:\n  ros__parameters:\n    real_time_factor: -1.0\n")
    (tmp / "scene.yaml").write_text("robot: iiwa_wsg\nobjects:\n  - {name: cup, shape: {cone: 1}}\n")
    procs = {name: NodeProcess([a.format(tmp=tmp) for a in flags]) for name, (flags, _) in BAD_STARTS.items()}
    results = {}
    for name, proc in procs.items():
        try:
            code = proc.proc.wait(90)
        finally:
            out = proc.output()
            proc.stop()
        results[name] = (code, out)
    return results


@pytest.mark.parametrize("name", list(BAD_STARTS))
def test_bad_parameters_fail_at_start_up(bad_starts, name):
    code, out = bad_starts[name]
    assert code == 2, out
    assert BAD_STARTS[name][1] in out and "sim_node: error:" in out, out


def test_two_robots_side_by_side(ros, start_node):
    left = start_node("--robot", "iiwa_wsg", "--namespace", "left", "--frame-prefix", "left/",
                      "--base-pose", "0,0.6,0,0,0,0", "--engine", "tamsi")
    right = start_node("--robot", "iiwa_wsg", "--namespace", "right", "--frame-prefix", "right/",
                       "--base-pose", "0,-0.6,0,0,0,0", "--engine", "tamsi",
                       "--config", str(Path(__file__).resolve().parent / "scenes" / "no_clock.yaml"))
    js = {side: ros.subscribe(JointState, f"/{side}/joint_states") for side in ("left", "right")}
    tf = ros.subscribe(TFMessage, "/tf")
    tf_static = ros.subscribe(TFMessage, "/tf_static", latched=True)
    for side, proc in (("left", left), ("right", right)):
        try:
            wait_until(lambda: js[side] or proc.proc.poll() is not None, 90, what=f"/{side}/joint_states")
        except AssertionError:
            raise AssertionError(proc.output())
        assert proc.proc.poll() is None, proc.output()
    wait_until(lambda: len(tf_static) >= 2, 10, what="both /tf_static")
    _, p_left = world_pose("left/iiwa_link_0", [tf_static])
    _, p_right = world_pose("right/iiwa_link_0", [tf_static])
    np.testing.assert_allclose(p_left, [0, 0.6, 0], atol=1e-12)
    np.testing.assert_allclose(p_right, [0, -0.6, 0], atol=1e-12)
    wait_until(lambda: {t.child_frame_id for m in tf[-20:] for t in m.transforms}
               >= {"left/iiwa_link_7", "right/iiwa_link_7"}, 10, what="both robots on /tf")

    # a command to the left robot moves it and not the right one
    q_right = dict(zip(js["right"][-1].name, js["right"][-1].position))["iiwa_joint_1"]
    ros.publish(JointState, "/left/joint_command", JointState(name=["iiwa_joint_1"], position=[0.5]))
    wait_until(lambda: abs(dict(zip(js["left"][-1].name, js["left"][-1].position))["iiwa_joint_1"] - 0.5) < 1e-3,
               30, what="left joint 1 at 0.5 rad")
    assert abs(dict(zip(js["right"][-1].name, js["right"][-1].position))["iiwa_joint_1"] - q_right) < 1e-4
    _, tip_left = world_pose("left/wsg_tcp", [tf[-50:], tf_static])
    _, tip_right = world_pose("right/wsg_tcp", [tf[-50:], tf_static])
    assert tip_left[1] > 0.6 and abs(tip_right[1] + 0.6) < 1e-3   # left turned towards +y, right did not
    time.sleep(0.1)


@pytest.mark.node
def test_a_failed_in_process_build_lets_go_of_its_namespace_claim(monkeypatch, tmp_path, capfd):
    """A node built in this process whose build fails after it has claimed its namespace (a controllers file naming
    without a controller type: World.build fails after the node's on_simulator took the claim) lets the claim go:
    a good node built next in the same namespace, in the same process, starts and steps without a second-node
    complaint. The refused build's exception (and with it the half-built node) is kept alive meanwhile, so that no
    garbage collection can release a leaked claim for it."""
    from contact_sim_ros.errors import ConfigError
    from inprocess_sim_node import InProcessSimNode
    bad = tmp_path / "controllers.yaml"
    bad.write_text("controller_manager:\n  ros__parameters:\n    update_rate: 100\n"
                   "    arm_controller:\n      type: NoSuchController\n")
    flags = ("--robot", "iiwa_wsg", "--namespace", "claim_after_failure", "--real-time-factor", "0")
    with pytest.raises(ConfigError) as refused:
        InProcessSimNode.from_command_line(monkeypatch, *flags, "--ros-args", "-p", f"controllers_file:={bad}")
    assert f"{bad}: controller 'arm_controller' needs 'type: <package>/<Class>'" in str(refused.value), refused.value
    capfd.readouterr()
    sim = InProcessSimNode.from_command_line(monkeypatch, *flags)
    try:
        wait_until(lambda: sim.node.sim.t > 0.1 or not sim.node.link.stepping, 60, what="0.1 s of sim time")
        assert sim.node.link.stepping and not sim.callback_errors, sim.callback_errors
    finally:
        sim.close()
    log = "".join(capfd.readouterr())
    assert "another simulation node" not in log, log
    assert refused.value.__traceback__ is not None          # the failed build's frames lived until here
