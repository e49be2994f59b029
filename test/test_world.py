"""The one composition root below the transports (driver/world.py, issue 42 item 1): what the transports hold of
the stepping loop (driver/loop.LoopLink), the ROS modules' layering (none but the node reaches a loop through
another object), World.build's hooks for the node's start-up between the Simulator and the System.

No ROS: the world of the default scene (iiwa_wsg, table, bottle, box) built as the in-process links build it.
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import numpy as np
import pytest

import contact_sim_ros
from contact_sim_ros.clients.inprocess_link import InProcessTransports, build_world, link_config
from contact_sim_ros.driver.node_config import scene_robot_name
from contact_sim_ros.driver.robot import validate_joint_command
from contact_sim_ros.driver.world import World
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.resources import share_dir

PACKAGE = Path(contact_sim_ros.__file__).parent
SCENE = str(share_dir() / "scenes" / "default.yaml")
DT = 1e-3


def config(**overrides):
    return link_config(SCENE, "tamsi", DT, robot_params=scene_robot_name(SCENE) or "", overrides=overrides)


# ------------------------------------------------------------------------------------------------ layering

def loop_reaches(tree) -> list[tuple[int, str]]:
    """(line, source) of each read of a ``loop`` attribute on another object than ``self`` (``sim_node.loop``,
    ``self.node.loop``, ``getattr(node, "loop")``): a module that holds its own loop, handed to it (``self.loop``),
    is not one."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "loop" and not (
                isinstance(node.value, ast.Name) and node.value.id == "self"):
            found.append((node.lineno, ast.unparse(node)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "hasattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and node.args[1].value == "loop"):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_layering_check_sees_every_way_to_reach_a_nodes_loop():
    source = ("class T:\n"
              "    def f(self, node):\n"
              "        a = self.sim_node.loop.running\n"
              "        b = node.loop\n"
              "        c = getattr(node, 'loop')\n"
              "        d = self.loop.paused\n"          # its own loop, handed to it: allowed
              "        e = loop.transport\n")           # a local loop's attribute: allowed
    assert sorted(line for line, _ in loop_reaches(ast.parse(source))) == [3, 4, 5]


def test_no_ros_module_but_the_node_reaches_the_stepping_loop_through_another_object():
    """The transports (a robot's ports, its controllers' topics and actions, the controller_manager node, the
    franka_gripper node) hold the loop's LoopLink, built before the loop; only sim_node.py, which builds the
    world, hands the loop itself to what steers it (simulation_interfaces)."""
    offenders = []
    for path in sorted((PACKAGE / "ros").rglob("*.py")):
        if path.name == "sim_node.py":
            continue
        offenders += [f"{path.relative_to(PACKAGE)}:{line}: {text}"
                      for line, text in loop_reaches(ast.parse(path.read_text()))]
    assert offenders == [], "modules under ros/ reach the stepping loop:\n" + "\n".join(offenders)


def test_simulation_interfaces_uses_only_the_stepping_control_of_the_loop_and_no_private_part_of_the_node():
    """simulation_interfaces (pause, step, reset, spawn, delete, entity state) steers the run through
    driver/loop.SteppingControl, and swaps a rebuilt model through the node's public swap_simulator: it reads
    nothing else of the loop (its transport, its simulator swap) and no private attribute of the node."""
    from contact_sim_ros.driver.loop import SteppingControl, SteppingLoop
    allowed = {n for n in vars(SteppingControl) if not n.startswith("_")}
    assert allowed <= {n for n in dir(SteppingLoop) if not n.startswith("_")}     # the loop is one
    tree = ast.parse((PACKAGE / "ros" / "simulation_interfaces.py").read_text())
    loop_uses, node_privates = set(), []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = ast.unparse(node.value)
        if owner in ("self.loop", "loop"):
            loop_uses.add(node.attr)
        elif owner in ("self.node", "node") and node.attr.startswith("_"):
            node_privates.append(f"{node.lineno}: {ast.unparse(node)}")
    assert loop_uses and loop_uses <= allowed, f"beyond SteppingControl: {sorted(loop_uses - allowed)}"
    assert node_privates == []


# ------------------------------------------------------------------------------------------------ LoopLink

def test_the_link_follows_the_loop_and_runs_calls_between_steps():
    """The link the transports hold: ``running`` follows the stepping thread; ``between_steps`` runs on the caller's
    thread while no thread steps (the System read again before the next step), on the stepping thread while one
    does; commands pushed into it reach the System."""
    world, _ = build_world(config(start_paused=True, controllers_file="none"))   # commands go to the System
    link, loop = world.link, world.loop
    assert link.commands is world.system.commands and loop.link is link
    assert not link.running
    assert link.between_steps(lambda: threading.current_thread().name) == threading.current_thread().name
    loop.start()
    try:
        assert link.running
        assert link.between_steps(lambda: threading.current_thread().name) == "contact_sim_stepping"
        # a command through the link, then two steps: the joint's position target is the command
        name = world.sim.model.joint_names[0]
        cmd = validate_joint_command(world.limits, world.system.command, [name], [0.25], [], [])
        link.commands.push_command(cmd)
        assert loop.request_steps(2, timeout=60.0)
        assert link.between_steps(lambda: float(world.system.command.position[0])) == 0.25
        with pytest.raises(ZeroDivisionError):        # the call's exception is raised in the caller
            link.between_steps(lambda: 1 / 0)
    finally:
        loop.stop()
    assert not link.running


def test_a_loop_refuses_a_link_whose_commands_are_not_its_systems():
    world, _ = build_world(config())
    from contact_sim_ros.driver.loop import LoopLink, SteppingLoop
    with pytest.raises(ValueError, match="command buffer"):
        SteppingLoop(world.system, link=LoopLink())


# ------------------------------------------------------------------------------------------------ one builder

def test_nothing_but_world_build_builds_a_simulator_for_a_world():
    """The node and the in-process links hand their configuration to World.build and build no piece of the world
    themselves: no module but driver/world.py names ``build_simulator`` or ``world_robots``."""
    users = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "driver" / "world.py":
            continue
        users += [f"{path.relative_to(PACKAGE)}:{n.lineno}" for n in ast.walk(ast.parse(path.read_text()))
                  if (isinstance(n, ast.Name) and n.id in ("build_simulator", "world_robots"))
                  or (isinstance(n, ast.Attribute) and n.attr in ("build_simulator", "world_robots"))
                  or (isinstance(n, ast.alias) and n.name in ("build_simulator", "world_robots"))]
    assert users == [], f"a world built outside World.build: {users}"


class Recorder(InProcessTransports):
    """The in-process transports, recording World.build's calls of the hooks in order (the node does its start-up
    in them: its messages, namespace claim, ports, publishers, services)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def simulator_built(self, sim, robots):
        self.calls.append(("simulator_built", len(sim.model.joint_names), [r.name for r in robots]))

    def controllers(self, robot):
        self.calls.append(("controllers", robot.name))
        return super().controllers(robot)

    def start_refused(self, message):
        self.calls.append(("start_refused", message))

    def controller_manager_built(self, robot, cm):
        self.calls.append(("controller_manager_built", robot.name, sorted(cm.controllers)))

    @property
    def loop(self):
        self.calls.append(("loop",))
        return None


def test_world_build_calls_the_hooks_in_order():
    """The Simulator first (the hook sees it and its robots, before anything else exists), then per robot its
    controllers' transport and its manager, then the loop's transport."""
    transports = Recorder()
    world = World.build(config(), transports, counters=transports.counters)
    names = [c[0] for c in transports.calls]
    assert names == ["simulator_built", "controllers", "controller_manager_built", "loop"], transports.calls
    assert transports.calls[0] == ("simulator_built", len(world.sim.model.joint_names), ["iiwa_wsg"])
    assert transports.calls[2][2] == sorted(world.controller_manager.controllers)
    assert world.link.commands is world.system.commands


def test_a_refused_start_calls_its_hook_before_the_error(tmp_path):
    """A bare UR5's zero pose puts its wrist into the ground (test_start_up_messages): World.build calls
    start_refused with the message, then raises it; no controller transport is asked for."""
    from contact_sim_ros.driver.node_config import NodeConfig
    from contact_sim_ros.model.robot_description import default_package_dirs
    found = [p for p in (Path(d) / "example-robot-data" / "robots" / "ur_description" / "urdf" / "ur5_robot.urdf"
                         for d in default_package_dirs()) if p.is_file()]
    assert found, "example-robot-data's ur5_robot.urdf"
    transports = Recorder()
    with pytest.raises(ConfigError, match="overlap by 4.8") as err:
        World.build(NodeConfig.from_mapping({"urdf": str(found[0])}), transports)
    assert [c[0] for c in transports.calls] == ["simulator_built", "start_refused"]
    assert transports.calls[1][1] == str(err.value)
