"""Helpers of the ROS integration tests: a sim_node subprocess, a test-side rclpy probe node, wait_until.
Import after conftest.py has set the ROS environment (ROS_DOMAIN_ID)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import rclpy
from rclpy.action import ActionClient as _RclpyActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

REPO = Path(__file__).resolve().parents[2]
SCENES = Path(__file__).resolve().parent / "scenes"


class NodeProcess:
    """A sim_node subprocess; ``output()`` returns what it printed so far (stdout + stderr)."""

    def __init__(self, args: list[str], env=None, new_session: bool = False):
        """``new_session``: the node leads a process group of its own (a terminal's Ctrl-C: ``os.killpg``)."""
        self.args = args
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"sim_node_{os.getpid()}_{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "contact_sim_ros.ros.sim_node", *args], cwd=REPO,
                                     stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                                     start_new_session=new_session)

    def output(self) -> str:
        if self._log.closed:              # stopped: the log file is gone, its text was kept
            return self._final_output
        self._log.flush()
        return self.log_path.read_text()

    def ended(self, timeout: float) -> tuple[int, str]:
        """(exit code, output) of a node that ends by itself within ``timeout`` s (subprocess.TimeoutExpired if it
        does not); stopped in either case."""
        try:
            code = self.proc.wait(timeout)
        finally:
            self.stop()
        return code, self.output()

    def stop(self, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self._log.closed:
            self._final_output = self.output()
            self._log.close()
            keep = os.environ.get("CONTACT_SIM_TEST_NODE_LOGS")   # a folder: every node's output kept there
            if keep:
                Path(keep).mkdir(parents=True, exist_ok=True)
                (Path(keep) / self.log_path.name).write_text(" ".join(self.args) + "\n" + self._final_output)
            self.log_path.unlink(missing_ok=True)    # no log files left behind in /tmp
        return self.proc.returncode


class RosProbe:
    """A test-side rclpy node spinning in a background thread."""

    def __init__(self):
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = Node("contact_sim_test_probe", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._stop = False
        self._thread.start()
        self._lock = threading.Lock()
        self._pubs = {}

    def _spin(self):
        while not self._stop and self.context.ok():
            self.executor.spin_once(timeout_sec=0.05)

    def close(self):
        self._stop = True
        self._thread.join(2.0)
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)

    def subscribe(self, msg_type, topic: str, keep: int | None = None, latched: bool = False) -> list:
        """Messages on ``topic`` are appended to the returned list (as received); with ``keep``, only the
        last ``keep`` are kept (then the list length stops growing)."""
        out: list = []
        qos = QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                         reliability=ReliabilityPolicy.RELIABLE) if latched else 50

        def cb(msg):
            out.append(msg)
            if keep is not None and len(out) > keep:
                del out[: len(out) - keep]
        self.node.create_subscription(msg_type, topic, cb, qos)
        return out

    def publisher(self, msg_type, topic: str):
        if topic not in self._pubs:
            self._pubs[topic] = self.node.create_publisher(msg_type, topic, 10)
        return self._pubs[topic]

    def publish(self, msg_type, topic: str, msg, wait_for_subscriber: float = 10.0):
        pub = self.publisher(msg_type, topic)
        deadline = time.monotonic() + wait_for_subscriber
        while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pub.get_subscription_count() > 0, f"nobody subscribes to {topic}"
        pub.publish(msg)

    def call(self, srv_type, name: str, request, timeout: float = 30.0):
        client = self.node.create_client(srv_type, name)
        assert client.wait_for_service(timeout_sec=timeout), f"service {name} not available"
        future = client.call_async(request)
        deadline = time.monotonic() + timeout
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.005)
        assert future.done(), f"service {name} did not answer within {timeout} s"
        self.node.destroy_client(client)
        return future.result()


def error_lines(out: str) -> list[str]:
    """The ``sim_node: error: ...`` lines of a node's output (main() prints a ContactSimError as one such line)."""
    return [line for line in out.splitlines() if line.startswith("sim_node: error: ")]


def stamp_s(stamp) -> float:
    """A builtin_interfaces/Time in seconds."""
    return stamp.sec + 1e-9 * stamp.nanosec


def wait_until(predicate, timeout: float, period: float = 0.01, what="condition"):
    """Poll ``predicate`` until it is true or ``timeout`` (s) has passed; ``what`` (a string, or a callable giving
    one, called only on time-out: a node's output as it is then) says what was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(period)
    raise AssertionError(f"timed out after {timeout} s waiting for {what() if callable(what) else what}")


def wait_for_joint_states(started: dict, timeout: float = 120.0) -> None:
    """Every node of ``started`` ({name: (NodeProcess, its received joint_states)}) publishes joint states; a node
    that exited instead fails with its output."""
    for name, (proc, js) in started.items():
        try:
            wait_until(lambda: js or proc.proc.poll() is not None, timeout, what=f"/{name}/joint_states")
        except AssertionError:
            raise AssertionError(proc.output()) from None
        assert proc.proc.poll() is None, proc.output()


def quat_to_matrix(x, y, z, w):
    return [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]


def world_pose(frame: str, tf_messages, world: str = "world"):
    """(R 3x3, p 3) of ``frame`` in the world frame, composed from the latest transforms of /tf and /tf_static
    messages (lists of tf2_msgs/TFMessage)."""
    import numpy as np
    latest = {}
    for msgs in tf_messages:
        for m in msgs:
            for t in m.transforms:
                latest[t.child_frame_id] = t
    R, p = np.eye(3), np.zeros(3)
    f = frame
    while f != world:
        if f not in latest:
            raise AssertionError(f"no transform to {f!r} (known: {sorted(latest)})")
        t = latest[f]
        r, tr = t.transform.rotation, t.transform.translation
        Rf = np.array(quat_to_matrix(r.x, r.y, r.z, r.w))
        R, p = Rf @ R, Rf @ p + np.array([tr.x, tr.y, tr.z])
        f = t.header.frame_id
    return R, p


def switch_controllers(ros, activate=(), deactivate=(), namespace: str = "", strictness: int = 2):
    """controller_manager/switch_controller as ``ros2 control switch_controllers`` calls it; returns the
    response (asserted ok unless strictness is BEST_EFFORT and the caller checks)."""
    from controller_manager_msgs.srv import SwitchController
    req = SwitchController.Request(activate_controllers=list(activate), deactivate_controllers=list(deactivate),
                                   strictness=strictness)
    res = ros.call(SwitchController, f"{namespace}/controller_manager/switch_controller", req)
    return res


def active_controllers(ros, namespace: str = "") -> set:
    from controller_manager_msgs.srv import ListControllers
    res = ros.call(ListControllers, f"{namespace}/controller_manager/list_controllers", ListControllers.Request())
    return {c.name for c in res.controller if c.state == "active"}


def use_controllers(ros, wanted, namespace: str = ""):
    """Make ``wanted`` active, deactivating whatever active controller claims the same joints (the caller lists
    what to deactivate implicitly: every active controller of the same family that is not wanted)."""
    active = active_controllers(ros, namespace)
    wanted = set(wanted)
    family = {n.split("_")[0] for n in wanted}
    drop = [n for n in active - wanted
            if n.split("_")[0] in family and not n.endswith(("broadcaster", "sensor"))]
    res = switch_controllers(ros, sorted(wanted - active), drop, namespace)
    assert res.ok, res.message
    return res


class ActionClient(_RclpyActionClient):
    """rclpy's ActionClient without its request/response race (ros2/rclpy#1123, fixed upstream in 2025 by a lock, not
    in the Jazzy wheels here): a request is sent, then its sequence number is registered; a response that the
    executor's thread takes in between is dropped ("Ignoring unexpected goal response. There may be more than one
    action server ...") and its future never completes (make test: test_invalid_goals_get_their_error_codes waited
    60 s for a rejected goal's result). Here sending + registering and taking responses exclude each other."""

    def __init__(self, *args, **kwargs):
        # before rclpy's __init__, which adds this client to its node's waitables: the executor's thread may take
        # data from it at once (beside two CPU hogs it did, before the lock existed, and the probe's spin thread
        # died of the AttributeError: every later test of its worker timed out)
        self._request_lock = threading.RLock()
        super().__init__(*args, **kwargs)

    def take_data(self):
        with self._request_lock:
            return super().take_data()

    def send_goal_async(self, *args, **kwargs):
        with self._request_lock:
            return super().send_goal_async(*args, **kwargs)

    def _cancel_goal_async(self, goal_handle):
        with self._request_lock:
            return super()._cancel_goal_async(goal_handle)

    def _get_result_async(self, goal_handle):
        with self._request_lock:
            return super()._get_result_async(goal_handle)
