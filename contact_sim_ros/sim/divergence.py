"""Divergence detection: a step whose result leaves physically plausible bounds fails instead of being stored.

An engine can return a finite, "converged" velocity that is nonsense (finger efforts ramped to 1e9 N throw a
mug off at 6.5 km/s). ``DivergenceCheck.check`` runs on every (sub-)step result, after the non-finite check:

* the linear speed of every free body's origin (m/s) and its angular speed (rad/s);
* the distance of every free body's origin from the world origin (m);
* the kinetic energy 0.5 v^T M v of the whole system (finite; M of the step), which also covers the robot.

The bounds fit the scene (issue 31, defect 4): a free fall is physical however long it lasts (the Allegro and
Barrett presets have no ground), so at sim time t the speed bound is ``max_speed + |g| t`` (the speed a body
that had ``max_speed`` reaches by falling for t), the distance bound ``max_distance + R0 + max_speed t +
|g| t^2 / 2`` (the ``max_speed t`` term only for a finite ``max_speed``) with R0 the scene's size (the farthest
joint origin from the world origin in the initial configuration); the angular speed bound is constant.
``set_time`` refreshes the compiled pass's scales (the Simulator calls it on reset; ``check`` when the pass flags
a state, so the happy path stays one compiled call: its bounds are those of an earlier time, never looser).

A violation is reported like a solver failure (``Simulator.step`` retries with sub-steps, then the step fails,
the state is kept and the report's message starts with ``diverged:`` and names the body, the value, the bound and
the sim time). Cost: one compiled pass over the free bodies and v^T M v (``bounds_exceeded``; the simulator runs
it inside its fused post-step pass, sim/step_kernels.py), no Python loop over bodies unless a bound is exceeded
(``DivergenceCheck``).

Limits: ``Simulator(divergence_limits={...})`` with the keys of ``DivergenceLimits`` (defaults below; ``inf``
switches one bound off, ``divergence_limits=False`` all of them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
import pinocchio as pin

from ..errors import ConfigError
from ..model.multibody_model import MultibodyModel
from .divergence_kernels import ENERGY, SPEED_OR_DISTANCE, bounds_exceeded


def tree_velocity_ranges(pin_model) -> np.ndarray:
    """tree_ptr (nt + 1,) int: the velocities of kinematic tree t (a child of the world and its subtree) are
    tree_ptr[t]:tree_ptr[t + 1]; the mass matrix is zero between trees. Pinocchio numbers the velocities depth
    first, so each tree's are contiguous; should they not be, one range over all velocities (always correct)."""
    nv = pin_model.nv
    bounds = [0]
    for j in range(1, pin_model.njoints):
        if pin_model.parents[j] != 0:
            continue
        joints = list(pin_model.subtrees[j])
        lo = min(pin_model.joints[k].idx_v for k in joints)
        hi = max(pin_model.joints[k].idx_v + pin_model.joints[k].nv for k in joints)
        if lo != bounds[-1] or hi - lo != sum(pin_model.joints[k].nv for k in joints):
            return np.array([0, nv], dtype=np.int64)
        bounds.append(hi)
    if bounds[-1] != nv:
        return np.array([0, nv], dtype=np.int64)
    return np.array(bounds, dtype=np.int64)


@dataclass(frozen=True)
class DivergenceLimits:
    """Bounds on the free bodies of a scene (defaults far above anything a manipulation scene does)."""

    max_speed: float = 100.0              # m/s, linear speed of a free body's origin
    max_angular_speed: float = 1000.0     # rad/s, angular speed of a free body
    max_distance: float = 1.0e3           # m, distance of a free body's origin from the world origin

    @classmethod
    def make(cls, value) -> "DivergenceLimits | None":
        """None: the defaults; False: no checks (returns None); a mapping of overrides (keys validated, values
        > 0, ``inf`` allowed); or an instance."""
        if value is None or value is True:
            return cls()
        if value is False:
            return None
        if isinstance(value, cls):
            limits = value
        elif isinstance(value, dict):
            valid = [f.name for f in fields(cls)]
            unknown = set(value) - set(valid)
            if unknown:
                raise ConfigError(f"divergence_limits: unknown key(s) {sorted(unknown)}; valid keys: {valid}")
            try:
                limits = cls(**{k: float(v) for k, v in value.items()})
            except (TypeError, ValueError):
                raise ConfigError(f"divergence_limits: values must be numbers, got {value!r}") from None
        else:
            raise ConfigError(f"divergence_limits: expected a mapping with keys "
                              f"{[f.name for f in fields(cls)]}, None or False, got {value!r}")
        for f in fields(cls):
            x = getattr(limits, f.name)
            if math.isnan(x) or x <= 0.0:
                raise ConfigError(f"divergence_limits.{f.name} must be > 0 (inf: unbounded), got {x!r}")
        return limits


class DivergenceCheck:
    """The bounds of ``limits`` on one model's state (index arrays and scratch built once).

    Happy path (one compiled call, ``bounds_exceeded``): the free bodies' linear and angular velocity components
    divided by their bounds, summed squared over ALL bodies, <= 1 implies every body is within both bounds; the
    same for the positions. Only when that sum exceeds 1 are the bodies looked at one by one
    (``_first_violation``).
    """

    def __init__(self, model: MultibodyModel, limits: DivergenceLimits, q0: np.ndarray | None = None):
        """``q0``: the scene's initial configuration (its size R0; None: 0 m)."""
        self.limits = limits
        self.gravity = float(np.linalg.norm(model.pin_model.gravity.linear))     # m/s^2
        self.scene_size = scene_size(model.pin_model, q0) if q0 is not None else 0.0   # m
        bodies = model.free_bodies
        self.names = [b.name for b in bodies]
        self._n = len(bodies)
        q0 = np.array([b.q_slice.start for b in bodies], dtype=int)
        v0 = np.array([b.v_slice.start for b in bodies], dtype=int)
        self._v_index = (v0[:, None] + np.arange(6)).reshape(-1)      # (6n,) linear then angular per body
        self._q_index = (q0[:, None] + np.arange(3)).reshape(-1)      # (3n,) positions
        self._linear = np.tile([True] * 3 + [False] * 3, self._n)    # linear entries of _v_scale
        self._v_scale = np.zeros(6 * self._n)          # 1 / bound (0 for an infinite one); set_time fills them
        self._q_scale = np.zeros(3 * self._n)
        self.set_time(0.0)
        self._no_mass_matrix = np.zeros((0, 0))
        self._tree_ptr = tree_velocity_ranges(model.pin_model)
        # bounds_exceeded's index and scale arrays (q_index, q_scale, v_index, v_scale, tree_ptr), for
        # sim/step_kernels.py
        self.kernel_arrays = (self._q_index, self._q_scale, self._v_index, self._v_scale, self._tree_ptr)

    def bounds(self, t: float) -> tuple[float, float, float]:
        """(speed m/s, angular speed rad/s, distance m) bounds at sim time ``t`` (s; see the module docstring)."""
        lim, g, t = self.limits, self.gravity, max(float(t), 0.0)
        reach = lim.max_speed * t if math.isfinite(lim.max_speed) else 0.0   # no speed bound: no reach term
        return (lim.max_speed + g * t, lim.max_angular_speed,
                lim.max_distance + self.scene_size + reach + 0.5 * g * t * t)

    def set_time(self, t: float) -> None:
        """The compiled pass's scales for the bounds at sim time ``t`` (s), in place (also in the arrays
        ``bind`` gave)."""
        speed, angular, distance = self.bounds(t)
        self._v_scale[self._linear] = 1.0 / speed
        self._v_scale[~self._linear] = 1.0 / angular
        self._q_scale[:] = 1.0 / distance
        self._scaled_at = float(t)

    def bind(self, q_scale: np.ndarray, v_scale: np.ndarray) -> None:
        """Use ``q_scale`` and ``v_scale`` (views into a packed array the compiled step reads:
        step_kernels.finish_arrays) as the scale arrays, so that ``set_time`` updates them there."""
        q_scale[:] = self._q_scale
        v_scale[:] = self._v_scale
        self._q_scale, self._v_scale = q_scale, v_scale
        self.kernel_arrays = (self._q_index, q_scale, self._v_index, v_scale, self._tree_ptr)

    def check(self, q: np.ndarray, v: np.ndarray, mass_matrix: np.ndarray | None, t: float) -> str:
        """'' if (q, v) at sim time ``t`` (s) is within the bounds, else the reason ('diverged: ...').
        ``q``, ``v`` finite (the simulator checks that first). Costs about 1 us (one compiled call)."""
        if t != self._scaled_at:
            self.set_time(t)
        code = bounds_exceeded(q, v, self._no_mass_matrix if mass_matrix is None else mass_matrix,
                               self._q_index, self._q_scale, self._v_index, self._v_scale, self._tree_ptr)
        if code & SPEED_OR_DISTANCE:
            message, how = self._first_violation(q, v, t)
            if message:
                return f"{message} at t = {t:.6f} s{how}"
        # finite v and M can still give an infinite energy (|v| > 1e150)
        if code & ENERGY:
            return f"diverged: kinetic energy is not finite at t = {t:.6f} s"
        return ""

    def _first_violation(self, q: np.ndarray, v: np.ndarray, t: float) -> tuple[str, str]:
        """(the body and bound with the largest excess at sim time ``t``, how the bound is made), ('', '') if none
        (the sum over bodies exceeded 1 only)."""
        vel = v[self._v_index].reshape(self._n, 6)
        pos = q[self._q_index].reshape(self._n, 3)
        lim = self.limits
        speed, angular, distance = self.bounds(t)
        worst, message, made = 1.0, "", ""
        for what, values, bound, unit, how in (
                ("speed", vel[:, :3], speed, "m/s",
                 f" (bound: max_speed {lim.max_speed:g} m/s + |g| t)" if self.gravity else ""),
                ("angular speed", vel[:, 3:], angular, "rad/s", ""),
                ("distance from the world origin", pos, distance, "m",
                 f" (bound: max_distance {lim.max_distance:g} m + the scene's size {self.scene_size:.3g} m + "
                 f"max_speed t + |g| t^2 / 2)")):
            norms = np.linalg.norm(values, axis=1)
            k = int(np.argmax(norms))
            if norms[k] > bound and norms[k] / bound > worst:
                worst = norms[k] / bound
                message = f"diverged: free body {self.names[k]!r} {what} {norms[k]:.4g} {unit} > {bound:.4g} {unit}"
                made = how
        return message, made


def scene_size(pin_model, q0: np.ndarray) -> float:
    """The largest distance (m) of a joint origin from the world origin in configuration ``q0``: the joint
    placements oMi = oMi[parent] * jointPlacement * M_j(q0), each joint's own data only. Not through a
    ``pin.Data``: Pinocchio 4.1's holds four nv^3 tensors (pinocchio#2949), so the Simulator of the 40-object bin
    (nv 240) peaked at 1.14 GB for its second Data here (0.70 GB resident after; 216 ms for this call, 0.5 ms now),
    and a spawn on a running node made one on a service thread."""
    q0 = np.asarray(q0, dtype=float)
    placements = [pin.SE3.Identity()] * pin_model.njoints
    size = 0.0
    for j in range(1, pin_model.njoints):
        joint = pin_model.joints[j]
        joint_data = joint.createData()
        joint.calc(joint_data, q0)
        placements[j] = placements[pin_model.parents[j]] * pin_model.jointPlacements[j] * joint_data.M
        size = max(size, float(np.linalg.norm(placements[j].translation)))
    return size
