"""The simulated measurements as ROS messages, built in one place for the node's publishers and for the in-process
link of the scenario controllers (controllers/inprocess_link.py), so both hand over the same numbers:

* ``fill_external_torques``: sensor_msgs/JointState ``external_joint_torques`` of some joints: the generalized
  contact force on them (N*m or N), as franka_ros2 publishes them;
* ``body_wrenches`` / ``fill_wrench``: geometry_msgs/WrenchStamped ``contact_wrench/<body>``: the net contact
  wrench on a body about its frame origin, in its frame (N, N*m).

Stamps are sim time (``stamp``). No rclpy: message classes only.
"""

from __future__ import annotations

import array

import numpy as np
from builtin_interfaces.msg import Time


def stamp(t: float, out: Time | None = None) -> Time:
    """builtin_interfaces/Time of a sim time t (s), rounded to the nanosecond."""
    ns = int(round(t * 1e9))
    out = out or Time()
    out.sec, out.nanosec = ns // 1_000_000_000, ns % 1_000_000_000
    return out


def fill_external_torques(msg, sim, v_index: np.ndarray) -> None:
    """``msg.effort`` = the last step's generalized contact force at the velocity indices ``v_index`` (zeros
    before the first step), ``msg.header.stamp`` = sim time; ``msg.name`` is the caller's."""
    res = sim.last_result
    stamp(sim.t, msg.header.stamp)
    tau = res.generalized_contact_force[v_index] if res is not None else np.zeros(len(v_index))
    msg.effort = array.array("d", np.ascontiguousarray(tau, dtype=float).tobytes())


def body_wrenches(accumulator, sim, forces: np.ndarray) -> np.ndarray:
    """(n, 6) net contact wrench (force, torque) on each body of ``accumulator`` (sim.sensors.
    ContactWrenchAccumulator) about its frame origin, in its own frame, from the world contact ``forces``."""
    n = len(accumulator.frame_ids)
    if not forces.shape[0]:
        return np.zeros((n, 6))
    w = accumulator.compute(sim.contacts, forces, sim.pin_data)
    oMf = sim.pin_data.oMf
    out = np.empty((n, 6))
    for k in range(n):
        R = oMf[int(accumulator.frame_ids[k])].rotation
        out[k, :3], out[k, 3:] = R.T @ w[k, :3], R.T @ w[k, 3:]
    return out


def fill_wrench(msg, wrench: np.ndarray, t: float) -> None:
    """geometry_msgs/WrenchStamped ``msg`` := (force, torque) ``wrench`` (6,) stamped ``t`` (s of sim time)."""
    stamp(t, msg.header.stamp)
    f, tau = msg.wrench.force, msg.wrench.torque
    f.x, f.y, f.z = float(wrench[0]), float(wrench[1]), float(wrench[2])
    tau.x, tau.y, tau.z = float(wrench[3]), float(wrench[4]), float(wrench[5])
