"""The simulation node built in the test's own process (no process start: ~1 s instead of ~5): the package's
NodeInThisProcess (its own context, an executor thread spinning it as main() does, its robots' and controllers' nodes
and ``.client``, a plain node for the test's clients and subscriptions) with the look for another simulation node on
the ROS graph (3 s of wall time) skipped: this host's namespace claim decides at once.

``InProcessSimNode.from_command_line(monkeypatch, *flags)``: the node of the console command's flags, built as main()
builds it. ``InProcessSimNode(monkeypatch, **parameters)``: ``parameters`` are the node's parameter values (as a
--params-file gives them; or ``ros_args``, the node's ROS arguments, and ``defaults`` / ``defaults_for_a_urdf`` as
main() gives them: sim_node.param_defaults_of). ``.node`` the SimNode, ``close()`` shuts the node down as main()
does (the recorder closes the bag, the stepping thread stops); a callback that raises is kept (``callback_errors``,
its traceback) and the spinning goes on (main() logs it as "a callback raised (a bug ...)").
"""

from __future__ import annotations

import contextlib

import pytest
from sensor_msgs.msg import JointState

from contact_sim_ros.ros import sim_node
from contact_sim_ros.ros.node_in_process import NodeInThisProcess
from ros_testing import wait_until


def skip_graph_look(monkeypatch) -> None:
    """A node built in this process: the namespace claim on this host decides at once, without the 3 s (wall time)
    look for another simulation node on the ROS graph (sim_node.GRAPH_DISCOVERY_S)."""
    monkeypatch.setattr(sim_node, "GRAPH_DISCOVERY_S", 0.0)


@pytest.fixture(scope="module")
def no_graph_look():
    """skip_graph_look for the tests of a module (``pytestmark = pytest.mark.usefixtures("no_graph_look")``) that
    build NodeInThisProcess themselves (e.g. run_scenario's node_factory)."""
    with pytest.MonkeyPatch.context() as mp:
        skip_graph_look(mp)
        yield


class InProcessSimNode(NodeInThisProcess):
    def __init__(self, monkeypatch, ros_args=(), defaults=None, defaults_for_a_urdf=None, *, flags=None,
                 **parameters):
        """``flags`` not None: the console command's flags (from_command_line), and the other arguments unused."""
        skip_graph_look(monkeypatch)
        super().__init__(flags, ros_args=ros_args, param_defaults={**(defaults or {}), **parameters},
                         defaults_for_a_urdf=defaults_for_a_urdf, client_node="test_client")

    @classmethod
    def from_command_line(cls, monkeypatch, *flags) -> "InProcessSimNode":
        """The node of the console command's ``flags`` (``--robot iiwa_wsg --namespace x ...``), built as main()
        builds it (NodeInThisProcess: plain_args_to_ros_args, param_defaults_of)."""
        return cls(monkeypatch, flags=list(flags))


@contextlib.contextmanager
def running_node(ros, namespace: str, *flags, keep: int = 50):
    """(the node of the console command's ``flags`` built in this process, its ``{namespace}/joint_states`` as the
    probe ``ros`` receives them) once the first joint state arrived (120 s at most); at the end: no callback of the
    node raised, and the node closed."""
    with pytest.MonkeyPatch.context() as mp:
        sim = InProcessSimNode.from_command_line(mp, *flags)
        try:
            js = ros.subscribe(JointState, f"{namespace}/joint_states", keep=keep)
            wait_until(lambda: js, 120, what=f"{namespace}/joint_states")
            yield sim, js
            assert not sim.callback_errors, sim.callback_errors
        finally:
            sim.close()


class OneNodeAtATime:
    """``nodes[name]`` -> (the node, its joint states /<name>/joint_states, the last ``keep``): the node of the
    console command's flags ``self.flags(name)`` built in this process on first use, the one built before it
    closed (each steps as fast as it can: one at a time). ``close()``: no callback of the last node raised, and it
    is closed."""

    def __init__(self, ros, keep: int):
        self.ros, self.keep = ros, keep
        self.name = self.sim = self.js = None

    def flags(self, name: str) -> list[str]:
        raise NotImplementedError

    def __getitem__(self, name):
        if name != self.name:
            self.close()
            flags = self.flags(name)
            js = self.ros.subscribe(JointState, f"/{name}/joint_states", keep=self.keep)
            self._mp = pytest.MonkeyPatch()
            self.sim = InProcessSimNode.from_command_line(self._mp, *flags)
            self.name, self.js = name, js
            wait_until(lambda: js, 120, what=f"/{name}/joint_states")
        return self.sim, self.js

    def close(self):
        if self.sim is not None:
            sim, self.sim, self.name = self.sim, None, None
            try:
                assert not sim.callback_errors, sim.callback_errors
            finally:
                sim.close()
                self._mp.undo()
