"""What the scenario clients share whatever link they run over (clients/robot_link.py over ROS 2,
clients/inprocess_link.py in process): stamps in integer ns, the link's error, the tick-grid trajectory plan,
joint values by name from a JointState and a parallel gripper's measurements. Message classes only, no rclpy: a
campaign trial (in process) imports this, never robot_link."""

from __future__ import annotations

import array

import numpy as np
from builtin_interfaces.msg import Duration, Time
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint


def stamp_ns(stamp) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def to_time(ns: int) -> Time:
    return Time(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


def to_duration(ns: int) -> Duration:
    return Duration(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


class ControllerError(RuntimeError):
    """The robot link failed (node gone, service missing, state not received in time)."""


class TickTrajectory:
    """A joint group's committed position plan on the control-tick grid (integer ns times -> positions).

    ``command(t_k, ...)`` builds the ``JointTrajectory`` to send at tick t_k: it starts at t_k with the plan's
    own segment [t_k, t_k + T] (linear interpolation, what the node already executes) and only then the new
    points, so the node executes the same targets whether it receives the message before or during the tick.
    """

    def __init__(self, joints, q0, period_ns: int):
        self.joints = list(joints)
        self.period = int(period_ns)
        self.times = np.array([0], dtype=np.int64)
        self.points = np.asarray(q0, float)[None, :].copy()

    def at(self, t_ns: int) -> np.ndarray:
        """The committed target at time t (ns): linear between plan points, holding the last one."""
        t = self.times
        if t_ns >= t[-1]:
            return self.points[-1].copy()
        if t_ns <= t[0]:
            return self.points[0].copy()
        k = int(np.searchsorted(t, t_ns, side="right")) - 1
        s = (t_ns - t[k]) / (t[k + 1] - t[k])
        return self.points[k] + s * (self.points[k + 1] - self.points[k])

    def replace_after(self, t_k: int, new_times_ns, new_points) -> JointTrajectory:
        """Keep the plan up to t_k + T, replace everything after by ``new_points`` at absolute ``new_times_ns``
        (each > t_k + T); returns the message to publish at tick t_k."""
        t1 = t_k + self.period
        head_t = np.array([t_k, t1], dtype=np.int64)
        new_times_ns = np.asarray(new_times_ns, dtype=np.int64)
        if len(new_times_ns) and new_times_ns[0] <= t1:
            raise ValueError("new plan points must start after the next tick")
        points = (self.at(t_k), self.at(t1), np.asarray(new_points, float).reshape(len(new_times_ns), -1))
        self.times = np.concatenate((head_t, new_times_ns))
        self.points = np.vstack(points)
        msg = JointTrajectory()
        msg.header.stamp = to_time(t_k)
        msg.joint_names = self.joints
        # positions as array.array('d'), what the message stores a list of floats as (the rows are C-contiguous
        # float64: the same numbers, without a Python float per value and the setter's per-value checks)
        for dt, q in zip((self.times - t_k).tolist(), self.points):
            msg.points.append(JointTrajectoryPoint(positions=array.array("d", q.tobytes()),
                                                   time_from_start=to_duration(dt)))
        return msg


NAME_INDEX_CACHE: dict = {}      # message joint names (tuple) -> {name: index}; a robot has one or two name lists


def name_index(names) -> dict:
    key = tuple(names)
    index = NAME_INDEX_CACHE.get(key)
    if index is None:
        index = NAME_INDEX_CACHE[key] = {n: i for i, n in enumerate(key)}
    return index


def positions_of(msg: JointState, names) -> np.ndarray:
    index = name_index(msg.name)
    return np.array([msg.position[index[n]] for n in names])


def efforts_of(msg: JointState, names) -> np.ndarray:
    index = name_index(msg.name)
    return np.array([msg.effort[index[n]] for n in names])


def gripper_measurements(ik, q_full: np.ndarray, st: dict, fingers, ft_frame: str) -> tuple[float, float, float]:
    """What a parallel-gripper controller reads each tick: updates ``q_full`` (the IK model's configuration)
    from /joint_states in place and returns (wrist load along gravity in N from the F/T sensor, mean finger
    effort in N from the external joint torques, mean finger opening in m)."""
    js = st["js"]
    src, dst = ik.configuration_indices(js.name)
    q_full[dst] = np.asarray(js.position, dtype=float)[src]
    R_ws = ik.frame_pose(ft_frame, q_full).rotation
    f = st["ft"].wrench.force
    load = float(np.array([f.x, f.y, f.z]) @ (R_ws.T @ DOWN))
    ext_index, js_index = name_index(st["ext"].name), name_index(js.name)
    effort, position = st["ext"].effort, js.position
    grip = mean_of([effort[ext_index[n]] for n in fingers])
    width = mean_of([position[js_index[n]] for n in fingers])
    return load, grip, width


DOWN = np.array([0.0, 0.0, -1.0])


def mean_of(values: list) -> float:
    """``float(np.mean(values))`` of a few floats without its ~5 us of overhead: numpy sums fewer than 8 values one
    after the other from +0.0 (its pairwise sum's base case), then divides by the count: the same operations."""
    if len(values) >= 8:
        return float(np.mean(values))
    total = 0.0
    for x in values:
        total += x
    return total / len(values)
