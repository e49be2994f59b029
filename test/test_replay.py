"""contact-sim replay (contact_sim_ros/scenarios/replay.py): bags recorded from in-process pick_shake_place runs
(trajectory commands, joint_states, wrist F/T, written with rosbags) are played into the nominal simulation. The
bag of the identical model replays to zero residuals (same physics, same command timing); the bag of a held-apart
cell whose bottle is 20 % lighter shows the missing weight in the wrench residual. MCAP and sqlite3 storage, a
namespaced bag with a renamed F/T topic, and the command line."""

from __future__ import annotations

import numpy as np
import pytest

from contact_sim_ros.cli import main as cli_main
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.scenarios.replay import read_bag, record_scenario_bag, replay
from contact_sim_ros.scenarios.runner import REPO, SCENARIOS

# pick, lift, hold, shake once; stop after the shake (2.56 s of sim time)
PARAMS = {"motion_time": 0.3, "hold_time": 0.3, "shake_cycles": 1, "stop_at": "after_shake"}
SC = SCENARIOS["pick_shake_place"]
BOTTLE_WEIGHT = 0.509 * 9.81         # N (objects/bottle.urdf)


def copy_bag(src, dst, storage, rename=None, drop=()):
    """Rewrite a bag (raw CDR messages, same timestamps, the bag's own message definitions) in another storage,
    optionally renaming topics or leaving some out."""
    from rosbags.rosbag2 import Reader, StoragePlugin, Writer
    rename = rename or {}
    with Reader(src) as reader:
        writer = Writer(dst, version=9, storage_plugin={"mcap": StoragePlugin.MCAP,
                                                        "sqlite3": StoragePlugin.SQLITE3}[storage])
        writer.open()
        conns = {c.id: writer.add_connection(rename.get(c.topic, c.topic), c.msgtype, msgdef=c.msgdef.data,
                                             rihs01=c.digest)
                 for c in reader.connections if c.topic not in drop}
        for c, t, raw in reader.messages():
            if c.id in conns:
                writer.write(conns[c.id], t, raw)
        writer.close()
    return dst


@pytest.fixture(scope="module")
def bags(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bags")
    nominal = record_scenario_bag(tmp / "nominal_mcap", params=PARAMS, storage="mcap")
    light = record_scenario_bag(tmp / "light_sqlite3", params=PARAMS, storage="sqlite3",
                                scene_values={"object.bottle.mass_scale": 0.8})
    assert nominal.success and light.success, (nominal.reason, light.reason)
    return tmp


def run(bag, **kw):
    return replay(bag, REPO / SC.scene, "tamsi", SC.time_step, inactive_controllers=SC.inactive_controllers, **kw)


def test_bag_contents_and_both_storages(bags):
    copy_bag(bags / "nominal_mcap", bags / "nominal_sqlite3", "sqlite3")
    a, b = read_bag(bags / "nominal_mcap"), read_bag(bags / "nominal_sqlite3")
    assert (a.storage, b.storage) == ("mcap", "sqlite3")
    assert set(a.topics) == {"/joint_states", "/ft_sensor/wrench", "/arm_controller/joint_trajectory",
                             "/gripper_controller/joint_trajectory", "/arm_controller/controller_state",
                             "/gripper_controller/controller_state"}
    assert a.js_t[0] == 0 and np.all(np.diff(a.js_t) == 20_000_000)          # 50 Hz control ticks
    assert np.array_equal(a.js_q, b.js_q) and len(a.commands) == len(b.commands) > 10
    assert a.topics["/arm_controller/controller_state"][1] >= 120      # 50 Hz (state_publish_rate)
    assert "ft_sensor/wrench" in a.wrenches and a.wrenches["ft_sensor/wrench"][1] == "iiwa_ft_sensor"


def test_identical_model_replays_to_zero_residuals(bags):
    for name in ("nominal_mcap", "nominal_sqlite3"):
        r = run(bags / name)
        # the trajectory commands are replayed; the controllers' own controller_state is then not used
        assert r.superseded == ["/arm_controller/controller_state", "/gripper_controller/controller_state"]
        assert r.delivered == len(r.bag.commands) - 2 and not r.failures and not r.rejected
        assert len(r.joints) == 9 and len(r.t_w) == len(r.t_js) > 100
        assert max(mx for _, mx in r.joint_stats().values()) < 1e-9, name
        assert r.wrench_stats()["force"][1] < 1e-6, name
        assert np.sqrt(np.mean(r.w_bag[:, 2] ** 2)) > 5.0        # a real signal (gripper + bottle weight)


def test_lighter_bottle_shows_in_the_wrench_residual(bags, tmp_path):
    same = run(bags / "nominal_mcap")
    r = run(bags / "light_sqlite3")
    ws = r.wrench_stats()
    # the nominal model carries 0.2 x the bottle's weight (1.0 N) more while the bottle is held
    assert ws["force"][0] > 0.3 and ws["force"][1] > 0.7 * 0.2 * BOTTLE_WEIGHT
    assert ws["force"][0] > 1e5 * max(same.wrench_stats()["force"][0], 1e-12)
    held = r.t_w > 1.6                       # lifted and holding (before: approach, grasp on the ground)
    weight_axis = np.argmax(np.abs(np.mean(r.w_bag[held, :3] - same.w_bag[held, :3], axis=0)))
    missing = np.median(np.abs(r.w_residual[held, weight_axis]))
    assert missing == pytest.approx(0.2 * BOTTLE_WEIGHT, rel=0.35)
    # the arm follows the same commands: joint residuals stay small (PD tracking of a different load)
    assert max(mx for _, mx in r.joint_stats().values()) < 0.01
    # --tare 0.3 (before the grasp, where both cells read the same): each signal loses its bias, the residual stays
    tared = run(bags / "light_sqlite3", tare=0.3)
    first = tared.t_w <= 0.3
    assert np.abs(tared.w_bag[first].mean(axis=0)).max() < 1e-9 and np.abs(tared.w_sim[first].mean(axis=0)).max() < 1e-9
    assert np.allclose(tared.w_residual, r.w_residual, atol=1e-9)


def test_namespace_and_topic_map_and_command_line(bags, tmp_path, capsys):
    bag = copy_bag(bags / "nominal_mcap", tmp_path / "robot1", "mcap", rename={
        "/joint_states": "/robot1/joint_states", "/ft_sensor/wrench": "/wrist/ft",
        "/arm_controller/joint_trajectory": "/robot1/arm_controller/joint_trajectory",
        "/gripper_controller/joint_trajectory": "/robot1/gripper_controller/joint_trajectory"})
    with pytest.raises(ConfigError, match="no sensor_msgs/JointState topic named 'joint_states'"):
        read_bag(bag)
    out = tmp_path / "report"
    assert cli_main(["replay", str(bag), "--scenario", "pick_shake_place", "--namespace", "robot1",
                     "--map", "/wrist/ft=ft_sensor/wrench", "--out", str(out)]) == 0
    text = (out / "replay.md").read_text()
    assert "| force (norm) | 0.000e+00 | 0.000e+00 |" in text and "| iiwa_joint_4 | 0.000e+00 | 0.000e+00 |" in text
    for png in ("joint_residuals.png", "wrench.png"):
        assert (out / "plots" / png).stat().st_size > 5000
    assert cli_main(["replay", str(bag), "--scenario", "pick_shake_place", "--map", "/nope=x"]) == 2
    assert "the bag has no topic ['/nope']" in capsys.readouterr().err


def test_without_commands_the_controllers_references_are_replayed(bags, tmp_path):
    """A robot commanded through FollowJointTrajectory (not recordable) still has its trajectory controllers'
    controller_state: their reference positions, one period ahead, reproduce the run."""
    bag = copy_bag(bags / "nominal_mcap", tmp_path / "states_only", "mcap",
                   drop=("/arm_controller/joint_trajectory", "/gripper_controller/joint_trajectory"))
    r = run(bag)
    assert r.delivered == 2 and not r.rejected and not r.superseded
    assert max(mx for _, mx in r.joint_stats().values()) < 1e-6
    assert r.wrench_stats()["force"][1] < 1e-3
