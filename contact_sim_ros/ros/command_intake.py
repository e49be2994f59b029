"""The simulation node's command topics (``joint_command``, each trajectory controller's ``joint_trajectory``,
each forward controller's ``commands``) in one mutually exclusive callback group, so that a step request applies
every command already received before its first step (:meth:`CommandIntake.drain`, the stepping loop's
``Transport.before_steps``, called by ``~/step``, StepSimulation and SimulateSteps).

Why (issue 42, item 4): in lock-step a controller publishes its commands, then calls ``~/step``. The node's
multi-threaded executor runs the step service and the command callbacks on different threads, so the steps could
start before a command's callback ran, even with the message already in the node's reader: the command then took
effect some steps into the tick, or after it. A trajectory that keeps the plan of the current tick
(clients/robot_link.py ``TickTrajectory``) gives the same position targets anyway, but not the same velocity
at the tick's end (the tick's last update samples ``t + period``, the next tick, in the segment the new command
defines): scenario 1's lock-step run differed from the in-process run by 7.4e-6 rad about one run in three, when
the second of the two gripper commands of one tick (force loop, then release) was taken 20 ms late, after the
tick. Drained here, a command sent before ``~/step`` acts from the tick's first step, as in process.

What it relies on: the command is in the node's reader when the step request is handled. A publisher publishes
synchronously (rmw_fastrtps' default) before the client sends the request, from the same DDS participant to the
same one, so the sample arrives first on the same transport; ``Publisher.wait_for_all_acked`` would state it
formally but waits for the writer's next heartbeat (Fast DDS default: every 3 s) on every tick.
"""

from __future__ import annotations

import threading
import time

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.exceptions import InvalidHandle


class CommandIntake:
    """The command subscriptions of a simulation node and its robot nodes (``subscribe``) and ``drain``."""

    def __init__(self):
        self.group = MutuallyExclusiveCallbackGroup()
        self._subscriptions: list = []       # [(node, Subscription)] in creation order
        self._lock = threading.Lock()
        self._token = None     # a guard condition of the group (never triggered): what holds the group in drain

    def subscribe(self, node, msg_type, topic: str, callback, qos=10):
        """``node.create_subscription`` in the intake's callback group; the subscription is drained by ``drain``
        (a destroyed one is dropped there)."""
        sub = node.create_subscription(msg_type, topic, callback, qos, callback_group=self.group)
        with self._lock:
            self._subscriptions.append((node, sub))
            if self._token is None:
                self._token = node.create_guard_condition(lambda: None, callback_group=self.group)
        return sub

    def forget(self, sub) -> None:
        """``sub`` is no command subscription any more (its controller was unloaded): not drained, not kept."""
        with self._lock:
            self._subscriptions = [e for e in self._subscriptions if e[1] is not sub]

    def drain(self, timeout: float = 10.0) -> int:
        """Run the callback of every command message already received, in order per topic, on the caller's thread
        (never from a callback of this group); returns how many. Waits first for a callback of the group that an
        executor thread runs (its message came earlier); while draining, the executor starts none (the group is
        held), and it is woken afterwards. TimeoutError if the group stays busy ``timeout`` s (s)."""
        token = self._token
        if token is None:           # no command topic
            return 0
        deadline = time.monotonic() + timeout
        while not self.group.beginning_execution(token):      # an executor thread runs one of these callbacks
            if time.monotonic() > deadline:
                raise TimeoutError(f"command subscriptions busy for {timeout:g} s")
            time.sleep(1e-4)
        taken = 0
        nodes = []
        try:
            with self._lock:
                subscriptions = list(self._subscriptions)
            gone = []
            for node, sub in subscriptions:
                if node not in nodes:
                    nodes.append(node)
                while True:
                    try:
                        with sub.handle:
                            got = sub.handle.take_message(sub.msg_type, sub.raw)
                    except InvalidHandle:          # destroyed (its controller was unloaded)
                        gone.append((node, sub))
                        break
                    if got is None:
                        break
                    taken += 1
                    sub.callback(got[0])
            if gone:
                with self._lock:
                    self._subscriptions = [e for e in self._subscriptions if e not in gone]
        finally:
            self.group.ending_execution(token)
            for node in nodes:     # the executor left these subscriptions out of its wait while the group was held
                executor = node.executor
                if executor is not None:
                    executor.wake()
        return taken
