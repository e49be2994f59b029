"""The simulation node built in the test's own process (no process start: ~1 s instead of ~5), in a context of its own
with an executor thread spinning it, its robots' and controllers' nodes and a client node of the test.

``InProcessSimNode(monkeypatch, **parameters)``: ``parameters`` are the node's parameter values (as a --params-file
gives them; or ``ros_args``, the node's ROS arguments, and ``defaults`` / ``defaults_for_a_urdf`` as main() gives
them: sim_node.param_defaults_of); ``.node`` the SimNode, ``.client`` a plain node for the test's clients and subscriptions, ``close()``
shuts the node down as main() does (the recorder closes the bag, the stepping thread stops). The look for another
simulation node on the ROS graph (3 s of wall time) is skipped: this host's namespace claim decides at once.
The executor thread spins as main() does: a callback that raises is kept (``callback_errors``, its traceback) and the
spinning goes on (main() logs it as "a callback raised (a bug ...)").
"""

from __future__ import annotations

import threading
import traceback

import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

from contact_sim_ros.ros import sim_node


class InProcessSimNode:
    def __init__(self, monkeypatch, ros_args=(), defaults=None, defaults_for_a_urdf=None, **parameters):
        monkeypatch.setattr(sim_node, "GRAPH_DISCOVERY_S", 0.0)
        self.context = rclpy.Context()
        rclpy.init(args=["sim_node", *ros_args], context=self.context)
        self.node = self.client = self.executor = None
        self.callback_errors: list[str] = []
        self._stop = threading.Event()
        try:
            self.node = sim_node.SimNode(param_defaults={**(defaults or {}), **parameters},
                                         defaults_for_a_urdf=defaults_for_a_urdf, context=self.context)
            self.client = Node("test_client", context=self.context)
            self.executor = MultiThreadedExecutor(num_threads=4, context=self.context)
            for n in [self.node, self.client] + self.node.extra_nodes():
                self.executor.add_node(n)
        except BaseException:
            self.close()
            raise
        self._thread = threading.Thread(target=self._spin, name="inprocess_sim_node", daemon=True)
        self._thread.start()

    @classmethod
    def from_command_line(cls, monkeypatch, *flags) -> "InProcessSimNode":
        """The node of the console command's ``flags`` (``--robot iiwa_wsg --namespace x ...``), built as main()
        builds it from them (sim_node.plain_args_to_ros_args, param_defaults_of)."""
        cmd = sim_node.plain_args_to_ros_args(list(flags))
        defaults, for_a_urdf = sim_node.param_defaults_of(cmd)
        return cls(monkeypatch, ros_args=cmd.ros_args, defaults=defaults, defaults_for_a_urdf=for_a_urdf)

    def _spin(self) -> None:
        executor = self.executor
        while not self._stop.is_set() and self.context.ok():
            try:
                executor.spin_once(timeout_sec=0.1)
            except Exception:   # noqa: BLE001 - as main(): kept, the node goes on
                if self._stop.is_set() or not self.context.ok():
                    return
                self.callback_errors.append(traceback.format_exc())

    def close(self) -> None:
        self._stop.set()
        node = self.node
        if node is not None:
            node.shutdown()
        if self.executor is not None:
            self.executor.shutdown(timeout_sec=2.0)
        if node is not None:
            for n in node.extra_nodes():
                n.destroy_node()
            node.destroy_node()
        if self.client is not None:
            self.client.destroy_node()
        self.node = self.client = self.executor = None
        if self.context.ok():
            rclpy.shutdown(context=self.context)
