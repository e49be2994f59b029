"""Destroying rclpy entities that a multi-threaded executor may be waiting on, or running a callback of, without
racing with it (issue 44, fuzz finding 4).

Why: rclpy's executor gathers a node's entities into lists, then enters each one's handle, builds a wait set, waits,
and hands the ready ones to its thread pool, which takes their data there. An entity destroyed from another thread
between the gathering and the entering is still added to the wait set (rclpy 7.1: ``add_to_wait_set`` of an
action server, or of a publisher's QoS event handler, whose handle is gone: "action server pointer is invalid",
"cannot use Destroyable because destruction was requested"); one destroyed between the wait and its thread's take
raises there (an action server's ``take_data`` holds no handle). Either ends the executor's ``spin_once`` with the
exception: the node logged "a callback raised (a bug)" (6 times in 300 load/unload cycles of a controller; 12 in
60 cycles with a goal each, test/ros/test_controller_lifetime.py).

How: :meth:`EntityReaper.retire` takes the entity out of its node's lists at once (no wait set gathered from then
on holds it, its names leave the graph when it is destroyed) and destroys it later, from the reaper's timer callback
on an executor thread, once it is idle: at least two reaper passes and ``grace`` s (steady clock) after it was
retired (every gathering that could still hold it has entered its handle, which defers the destruction
while in use), no executor task pending for it (a taken message, a goal's execute coroutine of an action server),
no handler of it queued. A retired node (a controller's) is removed from its executor at once and destroyed the
same way. Nothing is lost: what is retired is destroyed within about a second.
"""

from __future__ import annotations

import threading
import time
import weakref

from rclpy.action import ActionServer
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.exceptions import InvalidHandle
from rclpy.guard_condition import GuardCondition
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.subscription import Subscription
from rclpy.timer import Timer


class EntityReaper:
    """Retires entities of ``node``'s executor (see the module docstring). ``period``: s between reaper passes while
    something is retired (an hour when nothing is: an idle node is not woken); ``grace``: s an entity stays retired
    at least."""

    IDLE_PERIOD_NS = 3600 * 10 ** 9

    def __init__(self, node: Node, period: float = 0.1, grace: float = 0.2):
        self._node = node
        self._period_ns = int(period * 1e9)
        self._grace = grace
        self._lock = threading.Lock()
        self._retired: list[list] = []          # [entity, its node, retired at (s, monotonic), passes seen]
        self._timer = node.create_timer(period, self._reap, clock=Clock(clock_type=ClockType.STEADY_TIME),
                                        callback_group=MutuallyExclusiveCallbackGroup())
        self._timer.timer_period_ns = self.IDLE_PERIOD_NS
        self._timer.reset()

    def __len__(self) -> int:
        """How many retired entities are not destroyed yet."""
        with self._lock:
            return len(self._retired)

    def retire(self, entity, node: Node) -> None:
        """``entity`` of ``node`` (a Publisher, Subscription, Timer, GuardCondition, ActionServer, or ``node`` itself
        for a whole node) leaves the node's lists (or the node its executor) now and is destroyed later. Any
        thread."""
        if entity is node:
            executor = node.executor
            if executor is not None:
                executor.remove_node(node)
        elif isinstance(entity, ActionServer):
            _remove_waitable(node, entity)
        else:
            for handler in getattr(entity, "event_handlers", ()):        # a publisher's / subscription's QoS events
                _remove_waitable(node, handler)
            lists = {Publisher: node._publishers, Subscription: node._subscriptions, Timer: node._timers,
                     GuardCondition: node._guards}                        # the node's own lists (rclpy 7)
            for cls, entities in lists.items():
                if isinstance(entity, cls):
                    _remove(entities, entity)
        with self._lock:
            self._retired.append([entity, node, time.monotonic(), 0])
            if len(self._retired) == 1:
                self._timer.timer_period_ns = self._period_ns
                self._timer.reset()
        executor = self._node.executor
        if executor is not None:
            executor.wake()

    def destroy_all(self) -> None:
        """Destroy whatever is retired now (the executor no longer spins: at shutdown)."""
        with self._lock:
            retired, self._retired = self._retired, []
        for entity, node, _, _ in retired:
            _destroy(entity, node)

    def _reap(self) -> None:
        now = time.monotonic()
        executor = self._node.executor
        with self._lock:
            for entry in self._retired:
                entry[3] += 1
            due = [e for e in self._retired if e[3] >= 2 and now - e[2] >= self._grace and not _busy(e, executor)]
            self._retired = [e for e in self._retired if not any(e is d for d in due)]
            if not self._retired:
                self._timer.timer_period_ns = self.IDLE_PERIOD_NS
                self._timer.reset()
        for entity, node, _, _ in due:
            _destroy(entity, node)


def _remove(entities: list, entity) -> None:
    try:
        entities.remove(entity)
    except ValueError:
        pass


def _remove_waitable(node, waitable) -> None:
    try:
        node.remove_waitable(waitable)
    except ValueError:
        pass


def _busy(entry, executor) -> bool:
    """A handler of the entity is queued, or an executor task still runs for it (its taken data, a goal's execute
    coroutine of an action server, a callback of a retired node)."""
    entity, node = entry[0], entry[1]
    parts = [entity, *getattr(entity, "event_handlers", ())]
    if any(getattr(p, "_executor_event", False) for p in parts):
        return True
    if executor is None:
        return False
    with executor._tasks_lock:
        tasks = list(executor._tasks)
    for task, task_entity, task_node in tasks:
        if task.done():
            continue
        if entity is node and task_node is node:
            return True
        if any(task_entity is p for p in parts):
            return True
        if getattr(getattr(task, "_handler", None), "__self__", None) is entity:   # ActionServer._execute_goal
            return True
    return False


def _forget_in_group(entity) -> None:
    """rclpy's callback groups keep a weak reference to every entity ever added to them and never drop it (80 B per
    entity: the robot node's default group grew by one per timer, guard condition and event handler of every
    controller ever loaded)."""
    group = getattr(entity, "callback_group", None)
    if group is not None:
        group.entities.discard(weakref.ref(entity))


def _destroy(entity, node) -> None:
    if entity is not node:
        for part in [entity, *getattr(entity, "event_handlers", ())]:
            _forget_in_group(part)
    try:
        if entity is node:
            node.destroy_node()
        elif isinstance(entity, ActionServer):
            for goal_handle in list(entity._goal_handles.values()):
                goal_handle.destroy()
            entity._handle.destroy_when_not_in_use()     # (ActionServer.destroy would remove it from the node again)
        else:
            entity.destroy()          # (a publisher's or subscription's destroys its event handlers)
    except InvalidHandle:          # destroyed already (the node shut down)
        pass
