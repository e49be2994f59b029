"""The contact-engine interface: one abstract base, one input type, one result type.

Learned from Drake's DiscreteUpdateManager / SapDriver (public non-virtual entry point that validates once and
calls a protected override) and MuJoCo's interchangeable solvers.

The simulator assembles ``StepInputs`` once per step (kinematics, dynamics terms, contact query) and calls
``engine.step(inputs)``. The engine returns the generalized velocity at the end of the step; the simulator
integrates the configuration on the manifold, q_next = integrate(q, dt * v_next), unless the engine sets
``q_next`` itself.
"""

from __future__ import annotations

import abc
import enum
import time
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import numpy as np

from ..errors import ConfigError, EngineError
from ..geometry.contact_set import ContactSet
from ..model.multibody_model import MultibodyModel


class SolverStatus(enum.Enum):
    CONVERGED = "converged"
    MAX_ITERATIONS = "max_iterations"   # iteration limit reached before the convergence criterion
    FAILED = "failed"                   # numerical failure (singular system, non-finite values, LCP ray ...)
    INFEASIBLE = "infeasible"           # the problem has no solution (e.g. MIQP infeasible)

    @property
    def ok(self) -> bool:
        return self is SolverStatus.CONVERGED


@dataclass
class SolverStats:
    status: SolverStatus = SolverStatus.CONVERGED
    iterations: int = 0
    residual: float = 0.0          # engine-specific convergence measure at exit (documented per engine)
    solve_time_s: float = 0.0      # wall time of the engine's step (s)
    message: str = ""              # human-readable cause on failure


@dataclass
class Actuation:
    """Joint actuation for the step, per generalized velocity (nv,). Free-body dofs have zeros.

    The actuation force as a function of the end-of-step velocity v (implicit PD, as Drake does):
        tau(v) = clip(effort + kp * (position_error - dt * v) + kd * (velocity_target - v),
                      -effort_limit, effort_limit)
    with position_error = q_target - q at the start of the step (rad or m). Units: effort N*m or N, kp N*m/rad
    or N/m, kd N*m*s/rad or N*s/m.
    """

    effort: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    position_error: np.ndarray
    velocity_target: np.ndarray
    effort_limit: np.ndarray

    @classmethod
    def zeros(cls, nv: int) -> "Actuation":
        return cls(np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv), np.full(nv, np.inf))

    def force(self, v: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """(tau, dtau_dv) at end-of-step velocity v; dtau_dv is the diagonal of d tau / d v (<= 0)."""
        raw = self.effort + self.kp * (self.position_error - dt * v) + self.kd * (self.velocity_target - v)
        tau = np.clip(raw, -self.effort_limit, self.effort_limit)
        unsaturated = np.abs(raw) < self.effort_limit
        return tau, np.where(unsaturated, -(dt * self.kp + self.kd), 0.0)


@dataclass(eq=False)
class StepInputs:
    """Everything an engine needs for one step from (t, q, v) to t + dt. Arrays are owned by the simulator:
    engines must not modify them (copy if needed)."""

    t: float                        # s, time at the start of the step
    dt: float                       # s
    q: np.ndarray                   # (nq,)
    v: np.ndarray                   # (nv,)
    mass_matrix: np.ndarray         # (nv, nv) M(q), symmetric positive definite
    generalized_force: np.ndarray   # (nv,) explicit forces: -C(q,v)v - g(q) + J^T f_ext (N or N*m)
    gravity_force: np.ndarray | None  # (nv,) g(q): generalized gravity (already inside generalized_force); None
    #                                   for an engine whose ``uses_gravity_force`` is False (not computed)
    joint_damping: np.ndarray       # (nv,) viscous damping to apply implicitly: tau = -damping * v
    actuation: Actuation
    contacts: ContactSet


@dataclass(eq=False)
class StepResult:
    """What every engine returns. N = inputs.contacts.size."""

    v_next: np.ndarray                    # (nv,) generalized velocity at t + dt
    contact_impulse: np.ndarray           # (N, 3) N*s in the contact frame (t1, t2, n), acting on B
    generalized_contact_force: np.ndarray  # (nv,) J^T gamma / dt, average over the step (N or N*m)
    actuation_force: np.ndarray           # (nv,) actuation applied over the step (N or N*m)
    stats: SolverStats = field(default_factory=SolverStats)
    q_next: np.ndarray | None = None      # set only by engines that update q themselves (quasistatic)
    # (N,) N*s: the normal impulse that bounds friction, |gamma_t| <= mu * friction_normal_impulse, where the
    # engine's model uses another one than this step's gamma_n (Lagged: the previous step's); None = gamma_n.
    friction_normal_impulse: np.ndarray | None = None


class ResultSlot:
    """A step's output arrays allocated once and reused (``ContactEngine.step_into``): generalized velocity,
    actuation and generalized contact force (nv,) each, and the contact impulses (and an engine's friction normal
    impulses), grown geometrically with the number of contacts, whose (n, 3) / (n,) views are made once per n;
    ``result`` is the one StepResult (with its SolverStats) that an engine filling the slot returns, its fields
    pointing at these arrays. A caller that must keep a result across the next step into the same slot copies it
    (the Simulator alternates two slots: its ``last_result`` stays valid while the next step runs)."""

    def __init__(self, nv: int):
        # (3, nv): rows v_next, generalized contact force, actuation force (a compiled caller takes it whole:
        # sim/free_body_step.py)
        self.outputs = np.zeros((3, nv))
        self.v_next, self.generalized_contact_force, self.actuation_force = self.outputs
        self.result = StepResult(self.v_next, np.zeros((0, 3)), self.generalized_contact_force,
                                 self.actuation_force, SolverStats())
        self._capacity, self._views = -1, {}
        self.rows(8)

    @classmethod
    def for_one_step(cls, nv: int, n: int) -> "ResultSlot":
        """A slot for one step of ``n`` contacts whose result the caller keeps (an engine's allocating ``_do_step``
        is its ``_do_step_into`` on one): its arrays uninitialised (the step writes them all) and sized exactly,
        made as the StepResult's own arrays were before the slots (``np.empty``, no views to cache)."""
        slot = cls.__new__(cls)
        slot.v_next, slot.generalized_contact_force, slot.actuation_force = np.empty(nv), np.empty(nv), np.empty(nv)
        slot.outputs = None
        slot._impulse, slot._normal = np.empty((n, 3)), np.empty(n)
        slot._capacity, slot._views = n, {n: (slot._impulse, slot._normal)}
        slot.result = StepResult(slot.v_next, slot._impulse, slot.generalized_contact_force, slot.actuation_force,
                                 SolverStats())
        return slot

    def rows(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(n, 3) impulse and (n,) friction-normal-impulse views of the slot's contact buffers (N*s)."""
        views = self._views.get(n)            # only sizes up to the capacity are held
        if views is None:
            if n > self._capacity:
                self._capacity = max(n, 2 * self._capacity)
                self._impulse, self._normal = np.zeros((self._capacity, 3)), np.zeros(self._capacity)
                self._views = {}
            views = self._views[n] = (self._impulse[:n], self._normal[:n])
        return views


class ContactEngine(abc.ABC):
    """Base class of all contact engines.

    Subclasses set ``name`` and ``Options`` (a dataclass of engine parameters with defaults) and implement
    ``_do_step``. An engine instance belongs to one simulator: it may keep per-step scratch arrays and state
    carried across steps (e.g. the previous normal impulses); ``reset()`` clears that state.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    # False for quasistatic engines (state = configuration only, velocity-commanded actuated dofs): they are
    # exempt from the dynamic conformance tests (energy, free fall) and get their own.
    dynamic: ClassVar[bool] = True
    # False for engines that ignore ``Actuation.effort`` (the quasistatic ones: actuated dofs follow position or
    # velocity commands, there is no dynamics): ``Simulator.set_joint_targets`` rejects a pure effort command
    # for them (ConfigError naming the engine) instead of accepting a command that never moves anything.
    accepts_effort_commands: ClassVar[bool] = True
    # True for an engine whose ``_do_step`` reports CONVERGED only with a finite ``v_next`` and ``contact_impulse``
    # (TAMSI's compiled kernel checks them as it writes them): ``step`` then skips its two ``np.isfinite`` passes
    # (~2 us each). May be set per instance when it depends on the options.
    results_checked: bool = False
    # True for an engine that reads ``StepInputs.gravity_force`` (the quasistatic ones); the simulator computes g(q)
    # (pin.computeGeneralizedGravity, ~1 us for a 9-dof arm) only for those and passes None to the others
    uses_gravity_force: ClassVar[bool] = False
    # the kernel modules (decorated with contact_sim_ros.jit.njit) of this engine's own step, besides the contact
    # query's and the free bodies' that every engine's step calls, and the scenes (relative to share_dir()) whose
    # steps make them all run: contact_sim_ros.kernel_cache's cold-start note and warm-up (compile-kernels)
    kernel_modules: ClassVar[tuple[str, ...]] = ()
    warm_up_scenes: ClassVar[tuple[str, ...]] = ()

    @dataclass
    class Options:
        pass

    def __init__(self, model: MultibodyModel, options: "ContactEngine.Options | dict | None" = None):
        self.model = model
        self.options = self.make_options(options)

    @classmethod
    def make_options(cls, options) -> Any:
        """Options dataclass from None, a dict (validated: unknown keys listed) or an Options instance."""
        if options is None:
            return cls.Options()
        if isinstance(options, cls.Options):
            return options
        if not isinstance(options, dict):
            raise ConfigError(f"engine {cls.name!r}: options must be a mapping, got {type(options).__name__}")
        valid = {f.name: f for f in fields(cls.Options)}
        unknown = set(options) - set(valid)
        if unknown:
            raise ConfigError(f"engine {cls.name!r}: unknown option(s) {sorted(unknown)}; "
                              f"valid options: {sorted(valid)}")
        try:
            return cls.Options(**options)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"engine {cls.name!r}: invalid options: {exc}") from None

    def reset(self) -> None:
        """Forget state carried across steps."""

    def step(self, inputs: StepInputs) -> StepResult:
        """Advance one step. Checks sizes once, times the solve, and guarantees a finite result or a
        non-OK status (never a silent NaN)."""
        nv = self.model.nv
        if inputs.v.shape != (nv,) or inputs.mass_matrix.shape != (nv, nv):
            raise EngineError(f"engine {self.name!r}: state sizes do not match the model (nv = {nv})")
        if inputs.contacts.jacobian.shape != (3 * inputs.contacts.size, nv):
            raise EngineError(f"engine {self.name!r}: contact Jacobian has shape "
                              f"{inputs.contacts.jacobian.shape}, expected {(3 * inputs.contacts.size, nv)}")
        start = time.perf_counter()
        result = self._do_step(inputs)
        result.stats.solve_time_s = time.perf_counter() - start
        if not self.results_checked and result.stats.status.ok and not (
                np.isfinite(result.v_next).all() and np.isfinite(result.contact_impulse).all()):
            result.stats.status = SolverStatus.FAILED
            result.stats.message = "non-finite velocity or impulse"
        return result

    # True for an engine (or instance) whose ``_do_step_into`` writes a step's outputs into a ResultSlot
    fills_slot: bool = False

    def step_into(self, inputs: StepInputs, slot: ResultSlot) -> StepResult:
        """``step`` for a caller that guarantees the sizes (the Simulator: its model's arrays, its contact query's
        Jacobian): no size checks, and an engine that ``fills_slot`` writes into ``slot``'s arrays and returns
        ``slot.result`` (no array or object made per step; valid until the next step into the same slot); the
        others return a new StepResult as ``step`` does. Same arithmetic as ``step``, bit for bit."""
        start = time.perf_counter()
        result = self._do_step_into(inputs, slot) if self.fills_slot else self._do_step(inputs)
        result.stats.solve_time_s = time.perf_counter() - start
        if not self.results_checked and result.stats.status is SolverStatus.CONVERGED and not (
                np.isfinite(result.v_next).all() and np.isfinite(result.contact_impulse).all()):
            result.stats.status = SolverStatus.FAILED
            result.stats.message = "non-finite velocity or impulse"
        return result

    def _do_step_into(self, inputs: StepInputs, slot: ResultSlot) -> StepResult:
        """``_do_step`` into ``slot`` (engines that set ``fills_slot``)."""
        raise NotImplementedError

    @abc.abstractmethod
    def _do_step(self, inputs: StepInputs) -> StepResult:
        """Engine-specific step; called only with validated inputs."""
