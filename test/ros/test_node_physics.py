"""Physics through ROS: the iiwa_wsg holding the 0.5 l bottle in static hold (scene test/ros/scenes/
iiwa_wsg_bottle_hold.yaml). The wrist F/T sensor reads the weight of the gripper plus the bottle, the contact
wrenches on the finger pads balance the bottle's weight, and the per-contact detail adds up to it. The node is built
in the test's process (inprocess_sim_node.py), once per engine; paused once the hold has settled."""

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from contact_sim_msgs.msg import ContactArray
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker, MarkerArray

from std_srvs.srv import SetBool

from inprocess_sim_node import InProcessSimNode
from ros_testing import stamp_s, wait_until, world_pose

REPO = Path(__file__).resolve().parents[2]
SCENE = Path(__file__).resolve().parent / "scenes" / "iiwa_wsg_bottle_hold.yaml"
G = 9.81


def urdf_mass(path, links=None):
    root = ET.parse(path).getroot()
    return sum(float(link.find("inertial/mass").get("value")) for link in root.iter("link")
               if link.find("inertial") is not None and (links is None or link.get("name") in links))


GRIPPER_MASS = urdf_mass(REPO / "urdf" / "iiwa_wsg.urdf", {"wsg_base", "wsg_finger_left", "wsg_finger_right"})
BOTTLE_MASS = urdf_mass(REPO / "urdf" / "objects" / "bottle.urdf")


def vec(v):
    return np.array([v.x, v.y, v.z])


@pytest.fixture(scope="module", params=["tamsi", "lagged"])
def held(request, ros):
    engine = request.param
    ns = f"/hold_{engine}"
    topics = {
        "ft": ros.subscribe(WrenchStamped, f"{ns}/ft_sensor/wrench"),
        "left": ros.subscribe(WrenchStamped, f"{ns}/contact_wrench/wsg_finger_left"),
        "right": ros.subscribe(WrenchStamped, f"{ns}/contact_wrench/wsg_finger_right"),
        "bottle": ros.subscribe(WrenchStamped, f"{ns}/contact_wrench/bottle"),
        "contacts": ros.subscribe(ContactArray, f"{ns}/contacts"),
        "markers": ros.subscribe(MarkerArray, f"{ns}/contact_markers"),
        "ext": ros.subscribe(JointState, f"{ns}/external_joint_torques"),
        "tf": ros.subscribe(TFMessage, "/tf"),
        "tf_static": ros.subscribe(TFMessage, "/tf_static", latched=True),
    }
    with pytest.MonkeyPatch.context() as mp:
        sim = InProcessSimNode.from_command_line(
            mp, "--scene", str(SCENE), "--engine", engine, "--time-step", "0.001", "--real-time-factor", "0",
            "--namespace", ns, "--frame-prefix", f"{engine}/",
            "--config", str(Path(__file__).resolve().parent / "scenes" / "no_clock.yaml"))
        try:
            # 0.8 s of sim time: the fingers close (scripted to 20 N squeeze) and the bottle settles (F/T within
            # 1 % of its final value after 0.6 s); every stream read by the tests has a message of then
            def settled():
                return all(topics[k] and stamp_s(topics[k][-1].header.stamp) >= 0.8
                           for k in ("ft", "left", "right", "bottle", "contacts", "ext")) and \
                    topics["markers"] and topics["tf"] and \
                    stamp_s(topics["tf"][-1].transforms[0].header.stamp) >= 0.8
            wait_until(settled, 120, what=lambda: f"0.8 s of simulated static hold ({len(topics['ft'])} F/T "
                                                  "messages)")
            # paused: the messages read are of the settled hold (this process's CPU is the tests')
            assert ros.call(SetBool, f"{ns}/contact_sim/pause", SetBool.Request(data=True)).success
            # the latched static transforms (published once at start-up) reach a subscriber that existed before
            wait_until(lambda: topics["tf_static"], 10, what="the latched /tf_static message")
            yield engine, topics
            assert not sim.callback_errors, sim.callback_errors
        finally:
            sim.close()     # before the other engine's node is built


def frame_tf(topics, frame):
    return world_pose(frame, [topics["tf"][-200:], topics["tf_static"]])


def test_wrist_sensor_reads_gripper_plus_bottle_weight(held):
    engine, topics = held
    msg = topics["ft"][-1]
    assert msg.header.frame_id == f"{engine}/iiwa_ft_sensor"
    R, _ = frame_tf(topics, f"{engine}/iiwa_ft_sensor")
    force_world = R @ vec(msg.wrench.force)
    weight = (GRIPPER_MASS + BOTTLE_MASS) * G
    assert np.linalg.norm(force_world) == pytest.approx(weight, rel=0.05)
    np.testing.assert_allclose(force_world, [0.0, 0.0, -weight], atol=0.05 * weight)   # the load pulls down


def test_finger_pad_contact_wrenches_balance_the_bottle(held):
    engine, topics = held
    total = np.zeros(3)
    for side in ("left", "right"):
        msg = topics[side][-1]
        R, _ = frame_tf(topics, f"{engine}/wsg_finger_{side}")
        total += R @ vec(msg.wrench.force)
    weight = BOTTLE_MASS * G
    np.testing.assert_allclose(total, [0.0, 0.0, -weight], atol=0.05 * weight)
    R, _ = frame_tf(topics, f"{engine}/bottle")
    on_bottle = R @ vec(topics["bottle"][-1].wrench.force)
    np.testing.assert_allclose(on_bottle, [0.0, 0.0, weight], atol=0.05 * weight)
    # both pads squeeze (opposite lateral forces of the PD's order, 2000 N/m x 10 mm)
    left = frame_tf(topics, f"{engine}/wsg_finger_left")[0] @ vec(topics["left"][-1].wrench.force)
    assert abs(left[1]) > 5.0


def test_contact_detail_and_markers(held):
    engine, topics = held
    arr = topics["contacts"][-1]
    assert arr.contacts
    on_bottle = np.zeros(3)
    for c in arr.contacts:
        f = vec(c.force)
        if c.body_b == "bottle":
            on_bottle += f
        elif c.body_a == "bottle":
            on_bottle -= f
        assert c.normal_force == pytest.approx(float(f @ vec(c.normal)), abs=1e-9)
        assert abs(np.linalg.norm(vec(c.normal)) - 1.0) < 1e-9
    assert {c.body_a for c in arr.contacts} | {c.body_b for c in arr.contacts} >= {
        "bottle", "wsg_finger_left", "wsg_finger_right"}
    np.testing.assert_allclose(on_bottle, [0.0, 0.0, BOTTLE_MASS * G], atol=0.05 * BOTTLE_MASS * G)
    markers = topics["markers"][-1].markers
    assert markers[0].action == Marker.DELETEALL
    assert all(m.type == Marker.ARROW and len(m.points) == 2 for m in markers[1:])
    assert len(markers) >= 2


def test_external_joint_torques_reflect_the_squeeze(held):
    _, topics = held
    msg = topics["ext"][-1]
    tau = dict(zip(msg.name, msg.effort))
    assert len(msg.name) == 9
    # the bottle pushes each finger open with the squeeze force (~20 N along the finger axis)
    assert tau["wsg_finger_left_joint"] > 5.0 and tau["wsg_finger_right_joint"] > 5.0
