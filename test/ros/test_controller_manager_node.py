"""The /<namespace>/controller_manager node over real DDS, driven as ros2_control's spawner and ``ros2 param`` /
``ros2 control`` drive the real one (their service calls, made here directly): its parameters (get_parameters),
a controller not in the controllers file loaded from a params file as spawner loads it (set_parameters
``<name>.type`` and ``<name>.params_file``, load_controller, configure_controller, switch_controller) and then
commanded, its own node's parameters, unload_controller refused while active and done when inactive,
configure / cleanup_controller (``ros2 control set_controller_state``), list_hardware_components. The load /
configure / unload rules are tested in sim time in test/test_driver_controllers.py.

One node: iiwa_wsg in namespace /cm, real time, built in this process (inprocess_sim_node.py); its log is read from
the test's captured stderr."""

from __future__ import annotations

import pytest
import yaml
from controller_manager_msgs.srv import (CleanupController, ConfigureController, ListControllers,
                                         ListHardwareComponents, LoadController, UnloadController)
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import GetParameters, SetParameters
from std_msgs.msg import Float64MultiArray

from inprocess_sim_node import running_node
from ros_testing import SCENES, switch_controllers, wait_until

NS = "/cm"
CM = f"{NS}/controller_manager"
IIWA = [f"iiwa_joint_{i}" for i in range(1, 8)]
JTC = "joint_trajectory_controller/JointTrajectoryController"
POSITION = "position_controllers/JointGroupPositionController"


@pytest.fixture(scope="module")
def node(ros):
    with running_node(ros, NS, "--robot", "iiwa_wsg", "--namespace", "cm", "--engine", "tamsi",
                      "--real-time-factor", "1.0", "--config", str(SCENES / "no_clock.yaml")) as built:
        yield built


def get_params(ros, node_name, names):
    res = ros.call(GetParameters, f"{node_name}/get_parameters", GetParameters.Request(names=list(names)))
    return res.values


def set_params(ros, node_name, **values):
    params = []
    for name, value in values.items():
        if isinstance(value, list):
            v = ParameterValue(type=ParameterType.PARAMETER_STRING_ARRAY, string_array_value=value)
        else:
            v = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=value)
        params.append(Parameter(name=name, value=v))
    return ros.call(SetParameters, f"{node_name}/set_parameters", SetParameters.Request(parameters=params)).results


def controllers(ros) -> dict:
    res = ros.call(ListControllers, f"{CM}/list_controllers", ListControllers.Request())
    return {c.name: c for c in res.controller}


def call(ros, srv, name: str, controller: str):
    return ros.call(srv, f"{CM}/{name}", srv.Request(name=controller)).ok


def test_controller_manager_parameters_over_get_parameters(ros, node):
    """``ros2 param get /cm/controller_manager update_rate`` and ``arm_controller.type``."""
    update_rate, arm_type = get_params(ros, CM, ["update_rate", "arm_controller.type"])
    assert (update_rate.type, update_rate.integer_value) == (ParameterType.PARAMETER_INTEGER, 1000)
    assert (arm_type.type, arm_type.string_value) == (ParameterType.PARAMETER_STRING, JTC)
    joints, = get_params(ros, f"{NS}/arm_controller", ["joints"])        # the controller's own node
    assert list(joints.string_array_value) == IIWA
    # ros2 param set: update_rate accepted (read at start-up, as the real one), a controller's parameter refused
    rate = Parameter(name="update_rate", value=ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=500))
    result, = ros.call(SetParameters, f"{CM}/set_parameters", SetParameters.Request(parameters=[rate])).results
    assert result.successful, result.reason
    result, = set_params(ros, f"{NS}/arm_controller", joints=["iiwa_joint_1"])
    assert not result.successful and "unload it and load it again" in result.reason
    joints, = get_params(ros, f"{NS}/arm_controller", ["joints"])
    assert list(joints.string_array_value) == IIWA


def test_spawner_sequence_loads_a_new_controller_from_a_params_file_and_it_moves_the_joint(ros, node, tmp_path):
    _, js = node
    params = tmp_path / "new_controller.yaml"
    params.write_text(yaml.safe_dump({"/**/new_arm_position": {"ros__parameters": {
        "type": POSITION, "joints": IIWA}}}))
    assert "new_arm_position" not in controllers(ros)
    # spawner new_arm_position -p new_controller.yaml: params_file (a list, as spawner sends it) and type
    results = set_params(ros, CM, **{"new_arm_position.params_file": [str(params)],
                                     "new_arm_position.type": POSITION})
    assert all(r.successful for r in results), [r.reason for r in results]
    assert call(ros, LoadController, "load_controller", "new_arm_position")
    listed = controllers(ros)["new_arm_position"]
    assert (listed.state, listed.type) == ("unconfigured", POSITION)
    joints, = get_params(ros, f"{NS}/new_arm_position", ["joints"])
    assert list(joints.string_array_value) == IIWA
    assert not switch_controllers(ros, ["new_arm_position"], ["arm_controller"], NS).ok   # not configured yet
    assert call(ros, ConfigureController, "configure_controller", "new_arm_position")
    res = switch_controllers(ros, ["new_arm_position"], ["arm_controller"], NS)
    assert res.ok, res.message
    assert controllers(ros)["new_arm_position"].state == "active"
    target = [0.4, 0.2, 0.0, -0.5, 0.0, 0.3, 0.0]
    ros.publish(Float64MultiArray, f"{NS}/new_arm_position/commands", Float64MultiArray(data=target))

    def at_target():
        if not js:
            return False
        q = dict(zip(js[-1].name, js[-1].position))
        return all(abs(q[j] - t) < 0.01 for j, t in zip(IIWA, target))
    wait_until(at_target, 60, what="the arm at the commanded positions")

    # unload: refused while active (it stays), done once inactive (gone from list_controllers)
    assert not call(ros, UnloadController, "unload_controller", "new_arm_position")
    assert controllers(ros)["new_arm_position"].state == "active"
    res = switch_controllers(ros, ["arm_controller"], ["new_arm_position"], NS)
    assert res.ok, res.message
    assert call(ros, UnloadController, "unload_controller", "new_arm_position")
    assert "new_arm_position" not in controllers(ros)
    assert not call(ros, UnloadController, "unload_controller", "new_arm_position")   # not loaded any more
    # loaded again from the same parameters (its node and topics were destroyed and are made anew)
    assert call(ros, LoadController, "load_controller", "new_arm_position")
    assert controllers(ros)["new_arm_position"].state == "unconfigured"
    # ros2 control set_controller_state new_arm_position inactive, then unconfigured (configure, cleanup)
    assert not call(ros, CleanupController, "cleanup_controller", "new_arm_position")    # not inactive
    assert call(ros, ConfigureController, "configure_controller", "new_arm_position")
    assert controllers(ros)["new_arm_position"].state == "inactive"
    assert call(ros, CleanupController, "cleanup_controller", "new_arm_position")
    assert controllers(ros)["new_arm_position"].state == "unconfigured"


def test_load_of_an_unknown_type_or_bad_parameters_is_refused_and_nothing_is_loaded(ros, node, tmp_path):
    assert all(r.successful for r in set_params(ros, CM, **{"mystery.type": "acme_controllers/Mystery"}))
    assert not call(ros, LoadController, "load_controller", "mystery")
    params = tmp_path / "bad.yaml"
    params.write_text(yaml.safe_dump({"bad_position": {"ros__parameters": {"joints": ["no_such_joint"]}}}))
    assert all(r.successful for r in set_params(ros, CM, **{"bad_position.type": POSITION,
                                                             "bad_position.params_file": str(params)}))
    assert not call(ros, LoadController, "load_controller", "bad_position")
    assert not call(ros, LoadController, "load_controller", "nobody")          # no type at all
    listed = controllers(ros)
    assert not {"mystery", "bad_position", "nobody"} & set(listed)
    assert not call(ros, LoadController, "load_controller", "arm_controller")   # already loaded, as the real one
    # a controller of the controllers file, unloaded, loads again from the file (its type and parameters)
    assert call(ros, UnloadController, "unload_controller", "arm_velocity_controller")
    assert "arm_velocity_controller" not in controllers(ros)
    assert call(ros, LoadController, "load_controller", "arm_velocity_controller")
    assert call(ros, ConfigureController, "configure_controller", "arm_velocity_controller")
    listed = controllers(ros)["arm_velocity_controller"]
    assert listed.state == "inactive" and listed.required_command_interfaces == [f"{j}/velocity" for j in IIWA]


@pytest.mark.parametrize("name", ["arm-2", "a/b", "2arm"])
def test_load_of_a_name_that_is_not_a_ros_node_name_is_answered_refused_and_loads_nothing(ros, node, tmp_path, name,
                                                                                          capfd):
    """Issue 44 (finding 6): every loaded controller has a node of its own, so its name must be a valid ROS node
    name. 'arm-2' and 'a/b' were loaded into the controller manager and then its node could not be made: no
    answer (the callback raised), and 'a/b' stayed loaded without its node. Now refused with the rule, logged."""
    params = tmp_path / "odd.yaml"
    params.write_text(yaml.safe_dump({"/**": {"ros__parameters": {"joints": IIWA}}}))
    assert all(r.successful for r in set_params(ros, CM, **{f"{name}.type": POSITION,
                                                             f"{name}.params_file": str(params)}))
    capfd.readouterr()
    log = []

    def output():                  # the node's log since the call (rcutils: stderr, or stdout if so configured)
        captured = capfd.readouterr()
        log.append(captured.err + captured.out)
        return "".join(log)
    assert not call(ros, LoadController, "load_controller", name)
    assert name not in controllers(ros)
    wait_until(lambda: f"load_controller '{name}': not a valid controller name: its node '{NS}/{name}' would "
                       f"have an invalid ROS node name" in output(), 30, what="the reason in the node's log")
    assert "Traceback" not in output()
    assert not node[0].callback_errors, node[0].callback_errors


def test_list_hardware_components_names_the_simulated_system_with_its_interfaces(ros, node):
    res = ros.call(ListHardwareComponents, f"{CM}/list_hardware_components", ListHardwareComponents.Request())
    assert len(res.component) == 1
    c = res.component[0]
    assert c.type == "system" and c.state.label == "active" and c.name
    command = {i.name: i.is_claimed for i in c.command_interfaces}
    state = {i.name for i in c.state_interfaces}
    assert {f"{j}/position" for j in IIWA} <= set(command) and {f"{j}/velocity" for j in IIWA} <= state
    active = {n for n, ctl in controllers(ros).items() if ctl.state == "active"}
    claimed = {n for n, is_claimed in command.items() if is_claimed}
    expected = {i for n, ctl in controllers(ros).items() if n in active for i in ctl.claimed_interfaces}
    assert claimed == expected and f"{IIWA[0]}/position" in claimed
