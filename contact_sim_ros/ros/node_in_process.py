"""The simulation node built in the calling process from sim_node's command line (a scenario run or a test without
a process start): :class:`NodeInThisProcess`."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

from ..driver.node_config import plain_args_to_ros_args
from . import sim_node


class NodeInThisProcess:
    """The simulation node of the command line ``argv`` (sim_node's flags and ROS arguments, as
    ``python -m contact_sim_ros.ros.sim_node`` takes them) built in this process: the same parameters (the same
    defaults and parameter files: sim_node.param_defaults_of), the same SimNode, in an rclpy context of its own,
    spun with its robots' and controllers' nodes by an executor thread as sim_node.main() spins them (a callback
    that raises is kept in ``callback_errors`` and the spinning goes on). No process start: a scenario run without
    the node's ~5 s start-up (imports, compiled-kernel loads) and without a second process's DDS discovery
    (``run_scenario(..., node_factory=NodeInThisProcess)``; the tests' node size). Not the entry point: signals,
    exit codes and the Fast DDS writer profile are main()'s (a run with a node process covers them). The node's log
    goes to this process's stderr; ``output()`` gives what the node kept (callback errors, a stopped stepping
    thread's error). ``close()`` shuts it down as main() does.

    ``argv`` None: the node of ``ros_args`` (ROS arguments, e.g. ``["--ros-args", "-p", "x:=1"]``) over the
    parameter values ``param_defaults`` and ``defaults_for_a_urdf`` as given (what param_defaults_of gives main();
    none of the preset parameter files unless named there). ``client_node``: the name of a plain node built in the
    same context and spun by the same executor (``.client``: a caller's clients and subscriptions; None: no such
    node)."""

    def __init__(self, argv: Sequence[str] | None, *, ros_args: Sequence[str] = (),
                 param_defaults: Mapping[str, Any] | None = None,
                 defaults_for_a_urdf: Mapping[str, Any] | None = None, client_node: str | None = None):
        if argv is not None:
            cmd = plain_args_to_ros_args(list(argv))
            ros_args = cmd.ros_args
            param_defaults, defaults_for_a_urdf = sim_node.param_defaults_of(cmd)
        self.context = rclpy.Context()
        rclpy.init(args=["sim_node", *ros_args], context=self.context)
        self.node = self.client = self.executor = None
        self.callback_errors: list[str] = []
        self._stop = threading.Event()
        self._thread = None
        try:
            self.node = sim_node.SimNode(param_defaults=dict(param_defaults or {}),
                                         defaults_for_a_urdf=defaults_for_a_urdf, context=self.context)
            if client_node is not None:
                self.client = Node(client_node, context=self.context)
            self.executor = MultiThreadedExecutor(num_threads=6, context=self.context)   # as main()
            for n in [self.node, *([self.client] if self.client is not None else []), *self.node.extra_nodes()]:
                self.executor.add_node(n)
            self._thread = threading.Thread(target=self._spin, name="scenario_sim_node", daemon=True)
            self._thread.start()
        except BaseException:
            self.close()
            raise

    def _spin(self) -> None:
        while not self._stop.is_set() and self.context.ok() and self.node.exit_code is None:
            try:
                self.executor.spin_once(timeout_sec=0.1)
            except Exception:   # noqa: BLE001 - as main(): a callback's bug is kept, the node goes on
                if self._stop.is_set() or not self.context.ok():
                    return
                self.callback_errors.append(traceback.format_exc())

    def state(self) -> str:
        if self.node is None:
            return "shut down"
        if self.node.exit_code is not None:
            return f"stopped (exit code {self.node.exit_code})"
        error = self.node.stepping_error
        return "still running" if error is None else f"stepping stopped: {error!r}"

    def output(self) -> str:
        error = None if self.node is None else self.node.stepping_error
        return "\n".join(self.callback_errors + ([f"stepping thread stopped: {error!r}"] if error else []))

    def close(self) -> str:
        """Shut the node down (its stepping thread, controller managers, claim), stop the executor thread, destroy
        the nodes and the context; returns ``output()``."""
        out = self.output()
        self._stop.set()
        node = self.node
        if node is not None:
            node.shutdown()
        if self._thread is not None:
            self._thread.join(5.0)
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
        return out
