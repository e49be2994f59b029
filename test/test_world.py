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
        cmd = validate_joint_command(world.limits, world.sim.engine, [name], [0.25], [], [])
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
