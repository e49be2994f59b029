"""Validation of joint commands arriving over ROS (pure numpy: no rclpy, unit-testable without DDS).

Every command kind the node accepts is turned into a :class:`JointCommand` (targets by actuated-joint index)
or a :class:`JointTrajectory` (time-parameterised targets), or rejected with :class:`CommandRejected`, whose
``kind`` is one of :data:`REJECTION_KINDS` (counted per kind in the node's diagnostics).

Rules (the simulation never stops for a bad message):

* unknown joint names, a field whose length differs from the joint list, NaN/Inf values, an empty command,
  duplicated joint names and trajectories whose times do not strictly increase are rejected as a whole;
* position targets outside the joint limits are clamped to the limits; velocity targets beyond the velocity
  limit and efforts beyond the effort limit are clamped to +-limit; each clamp is reported in
  ``JointCommand.clamped`` so that the node can warn.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError

#: Rejection kinds, in the order the diagnostics list them.
REJECTION_KINDS = ("unknown_joint", "wrong_length", "non_finite", "empty", "duplicate_joint", "bad_trajectory",
                   "unsupported")


def reject_unexported(command: "JointCommand", hardware) -> None:
    """CommandRejected 'unsupported' unless ``hardware`` (the System's command interfaces,
    hardware.JointCommandInterfaces: ``joint_names``, ``exported``, ``unavailable_reason``) exports, for every
    joint of ``command``, the interface the command sets: ``position`` if it has positions (a velocity or effort
    with them is their feed-forward), else ``velocity`` if it has velocities, else ``effort``. The message names the
    interfaces and why they are not exported (the quasistatic engines ignore efforts; a <ros2_control> block
    offers the joint other interfaces)."""
    kind = "position" if command.position is not None else "velocity" if command.velocity is not None else "effort"
    names = [f"{hardware.joint_names[int(i)]}/{kind}" for i in command.indices]
    missing = [n for n in names if n not in hardware.exported]
    if missing:
        raise CommandRejected("unsupported", f"{command.source}: the hardware does not export the command "
                                             f"interface(s) {missing}: {hardware.unavailable_reason(missing[0])}")


class CommandRejected(ConfigError):
    """A command message that cannot be applied; ``kind`` is one of REJECTION_KINDS."""

    def __init__(self, kind: str, message: str):
        assert kind in REJECTION_KINDS, kind
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class JointLimits:
    """Limits of the actuated joints, in ``MultibodyModel.joint_names`` order (rad, rad/s, N*m or m, m/s, N)."""

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    mimic: frozenset = frozenset()     # joints the URDF marks <mimic>: they follow their leader

    @classmethod
    def from_model(cls, model) -> "JointLimits":
        return cls(tuple(model.joint_names), np.asarray(model.position_lower, float),
                   np.asarray(model.position_upper, float), np.asarray(model.velocity_limit, float),
                   np.asarray(model.effort_limit, float), frozenset(mj.name for mj in model.mimic_joints))

    def __post_init__(self):
        object.__setattr__(self, "_index", {name: i for i, name in enumerate(self.names)})
        object.__setattr__(self, "_valid_lists", {})    # name tuples found valid -> their indices

    def indices(self, names, source: str) -> np.ndarray:
        """Indices of ``names`` (CommandRejected 'unknown_joint' listing the valid joints, or 'duplicate_joint').
        A name list found valid once is looked up (a controller sends one or two lists at every tick); the
        returned array is the caller's own."""
        hit = self._valid_lists.get(names if type(names) is tuple else tuple(names))
        if hit is not None:
            return hit.copy()
        index = self._index
        unknown = [n for n in names if n not in index]
        if unknown:
            shown = ", ".join(self.names)
            raise CommandRejected("unknown_joint", f"{source}: unknown joint(s) {unknown}; valid joints: {shown}")
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if list(names).count(n) > 1})
            raise CommandRejected("duplicate_joint", f"{source}: joint(s) {dup} listed more than once")
        found = np.fromiter((index[n] for n in names), dtype=int, count=len(names))
        if len(self._valid_lists) < 64:
            self._valid_lists[tuple(names)] = found.copy()
        return found


@dataclass
class JointCommand:
    """Validated targets for a subset of the actuated joints. ``None`` fields are not commanded.

    position: rad or m (clamped to the joint limits); velocity: rad/s or m/s; effort: N*m or N.
    """

    indices: np.ndarray
    position: np.ndarray | None = None
    velocity: np.ndarray | None = None
    effort: np.ndarray | None = None
    clamped: list[str] = field(default_factory=list)
    source: str = ""


def _field(values, n: int, what: str, source: str, names) -> np.ndarray | None:
    if values is None or len(values) == 0:
        return None
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise CommandRejected("wrong_length", f"{source}: {what} has {arr.size} value(s) for {n} joint(s) "
                                              f"{list(names)}")
    if not np.all(np.isfinite(arr)):
        bad = [names[i] for i in np.flatnonzero(~np.isfinite(arr))]
        raise CommandRejected("non_finite", f"{source}: {what} is NaN/Inf for joint(s) {bad}")
    return arr


def _valid_block(rows, count: int, n: int) -> np.ndarray | None:
    """The per-point rows (``count`` of ``n`` values each) as one (count, n) float array when every row is
    valid (n finite numbers): what the per-point ``_field`` checks accept, in one conversion; None otherwise (the
    caller then runs those checks, which reject the first bad point with its reason)."""
    try:
        block = np.array(rows, dtype=float)
    except (TypeError, ValueError):            # ragged rows, non-numbers
        return None
    if block.shape != (count, n) or not np.isfinite(block).all():
        return None
    return block


def _clamp(command: JointCommand, limits: JointLimits) -> JointCommand:
    """Clamp positions to [lower, upper], velocities to +-velocity limit, efforts to +-effort limit."""
    idx = command.indices
    names = limits.names
    if command.position is not None:
        lo, hi = limits.lower[idx], limits.upper[idx]
        clipped = np.clip(command.position, lo, hi)
        for k in np.flatnonzero(clipped != command.position):
            command.clamped.append(f"position {command.position[k]:.6g} of joint {names[idx[k]]!r} clamped to "
                                   f"[{lo[k]:.6g}, {hi[k]:.6g}]")
        command.position = clipped
    for attr, lim in (("velocity", limits.velocity), ("effort", limits.effort)):
        value = getattr(command, attr)
        if value is None:
            continue
        bound = lim[idx]
        clipped = np.clip(value, -bound, bound)
        for k in np.flatnonzero(clipped != value):
            command.clamped.append(f"{attr} {value[k]:.6g} of joint {names[idx[k]]!r} clamped to "
                                   f"+-{bound[k]:.6g}")
        setattr(command, attr, clipped)
    return command


def validate_joint_state_command(limits: JointLimits, names, position=(), velocity=(), effort=(),
                                 source: str = "joint_command") -> JointCommand:
    """A sensor_msgs/JointState command by joint name (topic_based_ros2_control convention): each of the
    position/velocity/effort fields is either empty (not commanded) or has one value per name."""
    names = list(names)
    if not names:
        raise CommandRejected("empty", f"{source}: no joint names")
    fields = [position, velocity, effort]
    if limits.mimic and any(n in limits.mimic for n in names):
        # a controller echoing the whole joint state back: mimic joints follow their leader, they are dropped
        keep = [i for i, n in enumerate(names) if n not in limits.mimic]
        fields = [[f[i] for i in keep] if f is not None and len(f) == len(names) else f for f in fields]
        names = [names[i] for i in keep]
        if not names:
            raise CommandRejected("empty", f"{source}: only mimic joints (they follow their leader)")
    # topic_based_ros2_control sends NaN for every interface no active controller writes: a field that is NaN
    # for every joint, next to a field with values, is "not commanded"; any other NaN is rejected
    all_nan = [f is not None and len(f) > 0 and all(isinstance(x, float) and x != x for x in f) for f in fields]
    if any(all_nan) and not all(a or f is None or len(f) == 0 for a, f in zip(all_nan, fields)):
        fields = [None if a else f for a, f in zip(all_nan, fields)]
    idx = limits.indices(names, source)
    pos = _field(fields[0], len(names), "position", source, names)
    vel = _field(fields[1], len(names), "velocity", source, names)
    eff = _field(fields[2], len(names), "effort", source, names)
    if pos is None and vel is None and eff is None:
        raise CommandRejected("empty", f"{source}: none of position, velocity, effort is set")
    return _clamp(JointCommand(idx, pos, vel, eff, source=source), limits)


INTERFACES = ("position", "velocity", "effort")


def validate_group_command(limits: JointLimits, joints, data, interface: str,
                           source: str = "commands") -> JointCommand:
    """A std_msgs/Float64MultiArray for a forward group controller: one value per joint of the group, in the
    group's joint order, for ``interface`` (position, velocity or effort)."""
    if interface not in INTERFACES:
        raise ConfigError(f"{source}: unknown interface {interface!r}; valid interfaces: {', '.join(INTERFACES)}")
    joints = list(joints)
    idx = limits.indices(joints, source)
    if data is None or len(data) == 0:
        raise CommandRejected("empty", f"{source}: empty data (expected {len(joints)} value(s) for {joints})")
    arr = _field(data, len(joints), "data", source, joints)
    command = JointCommand(idx, source=source)
    setattr(command, interface, arr)
    return _clamp(command, limits)


@dataclass
class JointTrajectory:
    """A validated joint trajectory (trajectory_msgs/JointTrajectory semantics).

    times: (K,) s from the trajectory start, strictly increasing, > 0 for the first point allowed to be 0.
    positions: (K, n) rad or m (clamped to limits); velocities: (K, n) rad/s or None.
    start_time: s, simulation time at which time_from_start = 0 (None: when the node receives it).
    """

    indices: np.ndarray
    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None
    start_time: float | None
    clamped: list[str] = field(default_factory=list)
    source: str = ""


def validate_trajectory(limits: JointLimits, joint_names, times, positions, velocities=None,
                        start_time: float | None = None, source: str = "joint_trajectory") -> JointTrajectory:
    """Validate a trajectory given as per-point times (s), positions and optional velocities.

    ``positions``/``velocities`` are sequences of per-point sequences (one value per joint; an empty
    velocity list on every point means "not given"). Velocities must be given on all points or none.
    """
    names = list(joint_names)
    if not names:
        raise CommandRejected("empty", f"{source}: no joint names")
    idx = limits.indices(names, source)
    n = len(names)
    if len(times) == 0:
        raise CommandRejected("empty", f"{source}: no points")
    t = np.asarray(times, dtype=float)
    # (the ndarray methods, not the numpy functions' wrappers: a few us each, at every command; t[1:] <= t[:-1]
    # is np.diff(t) <= 0 for finite times: with subnormals a - b == 0 only when a == b)
    if not np.isfinite(t).all():
        raise CommandRejected("non_finite", f"{source}: non-finite time_from_start")
    if t[0] < 0.0 or (t[1:] <= t[:-1]).any():
        raise CommandRejected("bad_trajectory", f"{source}: time_from_start must be >= 0 and strictly increasing, "
                                                f"got {t.tolist()}")
    if len(positions) != len(t):
        raise CommandRejected("wrong_length", f"{source}: {len(positions)} position list(s) for {len(t)} points")
    pos = _valid_block(positions, len(t), n)
    if pos is None:                    # a bad point: the per-point checks name it
        pos = np.empty((len(t), n))
        for k, p in enumerate(positions):
            row = _field(p, n, f"point {k} positions", source, names)
            if row is None:
                raise CommandRejected("wrong_length", f"{source}: point {k} has no positions (needed for {names})")
            pos[k] = row
    vel = None
    if velocities is not None and any(len(v) for v in velocities):
        if len(velocities) != len(t):
            raise CommandRejected("wrong_length", f"{source}: {len(velocities)} velocity list(s) for {len(t)} points")
        vel = _valid_block(velocities, len(t), n)
        if vel is None:
            vel = np.empty_like(pos)
            for k, v in enumerate(velocities):
                row = _field(v, n, f"point {k} velocities", source, names)
                if row is None:
                    raise CommandRejected("wrong_length",
                                          f"{source}: velocities given on some points but not on point {k}")
                vel[k] = row
    if start_time is not None and not np.isfinite(start_time):
        raise CommandRejected("non_finite", f"{source}: non-finite header stamp")
    traj = JointTrajectory(idx, t, pos, vel, start_time, source=source)
    lo, hi = limits.lower[idx], limits.upper[idx]
    clipped = pos.clip(lo, hi)              # (np.clip's operation without its wrapper)
    changed = clipped != pos
    for k, j in zip(*np.nonzero(changed)) if changed.any() else ():
        traj.clamped.append(f"point {k} position {pos[k, j]:.6g} of joint {names[j]!r} clamped to "
                            f"[{lo[j]:.6g}, {hi[j]:.6g}]")
    traj.positions = clipped
    if vel is not None:
        bound = limits.velocity[idx]
        vclipped = vel.clip(-bound, bound)
        for k, j in zip(*np.nonzero(vclipped != vel)):
            traj.clamped.append(f"point {k} velocity {vel[k, j]:.6g} of joint {names[j]!r} clamped to "
                                f"+-{bound[j]:.6g}")
        traj.velocities = vclipped
    return traj


class TrajectorySampler:
    """Time-parameterised interpolation of an active trajectory (as joint_trajectory_controller does).

    The segment before the first point starts from the joint state (q0, v0) when the trajectory became active.
    Between points: cubic Hermite in each joint when velocities are known at both ends (point velocities if
    given; else linear interpolation, whose velocity is the segment slope). After the last point the targets
    hold the last point with zero velocity (or the last point's velocity if given: the controller would
    extrapolate; we hold).

    ``sample`` runs every control update: what depends only on the segment (its end points, the Hermite
    tangents, a linear segment's slope) is computed once when the time enters the segment, into preallocated
    arrays, with the same floating-point operations in the same order as the textbook formulas (the samples are
    bit-identical to evaluating them directly).

    Times are kept in integer nanoseconds (the start, the points, the sampled time rounded to the ns): the
    interpolation parameter of a time is then exact, whatever the trajectory's start. A trajectory stamped t_k
    whose first segment repeats the segment [t_k, t_k + T] of the previous one therefore gives bit-identical
    targets in that segment, whether the controller received it before or during the tick (the lock-step
    controllers' determinism, docs/scenarios.md). In float seconds, (t - t_{k-1}) - T and t - t_k differ in
    the last bits for about one sample in four.
    """

    def __init__(self, trajectory: JointTrajectory, start_time: float, q0: np.ndarray, v0: np.ndarray):
        self.indices = trajectory.indices
        self.start_time = float(start_time)
        self.times = np.concatenate(([0.0], trajectory.times))
        self.positions = np.vstack((np.asarray(q0, float)[None, :], trajectory.positions))
        if self.times[1] == 0.0:   # first point at t = 0: jump there (no segment from the current state)
            self.times = self.times[1:]
            self.positions = self.positions[1:]
            v0 = None if trajectory.velocities is None else trajectory.velocities[0]
            vel = trajectory.velocities
        else:
            vel = None if trajectory.velocities is None else np.vstack((np.asarray(v0, float)[None, :],
                                                                        trajectory.velocities))
        self.positions = np.ascontiguousarray(self.positions, dtype=float)
        self.velocities = vel = None if vel is None else np.ascontiguousarray(vel, dtype=float)
        self.start_ns = self._start_ns = round(self.start_time * 1e9)     # the start (ns)
        self._times_ns = [round(x * 1e9) for x in self.times.tolist()]   # (ints: exact differences)
        # the compiled sample's (driver/control_kernels.sample_trajectory): [segment, has velocities, times (ns)]
        self.ints = np.array([-1, int(vel is not None), *self._times_ns], dtype=np.int64)
        self.end_time = (self._start_ns + self._times_ns[-1]) * 1e-9
        n = len(self.indices)
        self.out = self._out = np.empty((2, n))    # rows: the last sample's positions, velocities (returned views)
        self._pos, self._vel = self._out[0], self._out[1]
        self._last_time = self._times_ns[-1]
        self._k = -1                               # the segment of the last sample (-1: none yet)
        self._h, self._h_ns = 1.0, 1
        if vel is None:       # linear segment: p0 + s (p1 - p0), slope (p1 - p0) / h
            self._p0, self._dp, self._slope = None, np.empty(n), np.empty(n)
        else:                 # Hermite: rows p0, m0 = v0 h, p1, m1 = v1 h; coefficients (2, 4): position, velocity
            self._basis = np.empty((4, n))
            self._coef = np.empty((2, 4, 1))
            self._terms = np.empty((2, 4, n))

    def _enter(self, k: int) -> None:
        """Segment k [times[k], times[k + 1]]: its constants."""
        self._k = k
        times, p = self._times_ns, self.positions
        self._h_ns = times[k + 1] - times[k]
        h = self._h = self._h_ns * 1e-9
        if self.velocities is None:
            self._p0 = p[k]
            np.subtract(p[k + 1], p[k], out=self._dp)
            np.divide(self._dp, h, out=self._slope)
        else:
            b = self._basis
            b[0], b[2] = p[k], p[k + 1]
            np.multiply(self.velocities[k], h, out=b[1])
            np.multiply(self.velocities[k + 1], h, out=b[3])

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, bool]:
        """(position target, velocity target, finished) at simulation time t (s). Arrays are reused."""
        tau = round(t * 1e9) - self._start_ns      # ns
        times = self._times_ns
        if tau >= self._last_time or len(times) == 1:
            self._pos[:] = self.positions[-1]
            self._vel[:] = 0.0
            return self._pos, self._vel, tau >= self._last_time
        if tau <= 0.0:
            self._pos[:] = self.positions[0]
            self._vel[:] = 0.0
            return self._pos, self._vel, False
        k = self._k
        if k < 0 or not times[k] <= tau < times[k + 1]:
            self._enter(bisect.bisect_right(times, tau) - 1)
            k = self._k
        h = self._h
        s = (tau - times[k]) / self._h_ns
        if self.velocities is None:
            np.multiply(self._dp, s, out=self._pos)
            np.add(self._p0, self._pos, out=self._pos)
            self._vel[:] = self._slope
        else:
            # position: h00 p0 + h10 m0 + h01 p1 + h11 m1; velocity: (d00 p0 + d10 m0 + d01 p1 + d11 m1) / h,
            # summed left to right as written
            s2, s3 = s * s, s * s * s
            c = self._coef
            c[0, 0, 0], c[0, 1, 0], c[0, 2, 0], c[0, 3, 0] = 2 * s3 - 3 * s2 + 1, s3 - 2 * s2 + s, -2 * s3 + 3 * s2, \
                s3 - s2
            c[1, 0, 0], c[1, 1, 0], c[1, 2, 0], c[1, 3, 0] = 6 * s2 - 6 * s, 3 * s2 - 4 * s + 1, -6 * s2 + 6 * s, \
                3 * s2 - 2 * s
            terms, out = self._terms, self._out
            np.multiply(c, self._basis, out=terms)
            np.add(terms[:, 0], terms[:, 1], out=out)
            np.add(out, terms[:, 2], out=out)
            np.add(out, terms[:, 3], out=out)
            np.divide(self._vel, h, out=self._vel)
        return self._pos, self._vel, False
