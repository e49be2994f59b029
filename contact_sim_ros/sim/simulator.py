"""The Simulator: state (t, q, v), commands, and the staged step.

    kinematics -> contact query -> dynamics terms -> engine -> integrate on the manifold -> joint limits

A step whose engine reports a non-OK status is retried as 2, 4, 8, ... sub-steps (``max_substep_levels``);
if that also fails, the state is left unchanged and the failure is reported with the sim time (the step
report's ``ok`` is False; ``step(strict=True)`` raises ``SolverError``). A NaN state is never stored, nor a
diverged one (free-body speed or distance beyond ``divergence_limits``, non-finite kinetic energy:
sim/divergence.py); divergence is handled as a solver failure, its message starts with ``diverged:``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..engines.base import Actuation, SolverStatus, StepResult
from ..engines.registry import make_engine
from ..errors import ConfigError, SolverError, unknown_choice
from .. import native_build
from ..geometry.contact_query import BOUND_MAX_PAIRS, ContactQuery
from ..geometry.pair_bounds import PairBounds
from ..model.free_body_motion import FreeBodyMotion
from ..model.multibody_model import MimicExpansion, model_body_names
from .default_gains import default_feed_forward, default_gains, drive_plan, warn_default_gains
from . import step_kernels
from .divergence import DivergenceCheck, DivergenceLimits, tree_velocity_ranges
from .penetration import DEEP_PENETRATION, PenetrationCheck
from .free_body_step import FreeBodies, FreeBodyTamsiStep, free_body_tamsi_advance, free_body_tamsi_step
from .tree_step import NEAR as TREE_NEAR, TreeStep, tree_icf_step, tree_tamsi_step
from .tree_step import tree_advance
from .scene import Scene, load_scene
from .sim_data import SimData
from .sim_model import SimModel
from . import stages
from .stages import StepParts
# the stages the step calls, bound here (a global look-up per call instead of a global and an attribute)
from .stages import (actuation as _actuation_stage, contacts as _contacts_stage, dynamics as _dynamics_stage,
                     external_forces as _external_forces_stage, integrate as _integrate_stage,
                     kinematics as _kinematics_stage, solve as _solve_stage)

# what of the kinematics of the current state is still to be computed when ``pin_data`` / ``geometry_data`` are read
# (the step itself needs neither the frame nor the geometry placements of the new state, the fused step not even
# its joint placements)
KINEMATICS_CURRENT = 0
PLACEMENTS_STALE = 1       # frame and geometry placements; joint placements, velocities and Jacobians are current
ALL_STALE = 2              # nothing computed at the current state
CONVERGED = SolverStatus.CONVERGED
STEP_OK = step_kernels.OK  # a compiled step's finish code: the step succeeded
perf_counter = time.perf_counter

# steps that take the staged step without a fused tree attempt after one found a coal pair within its bounding
# volumes' margin (the contact query's own retest interval, geometry/contact_query.BOUND_RETEST_AFTER)
TREE_RETEST_AFTER = 10
# steps that take the staged step without a fused tree attempt after one whose engine did not converge (the staged
# step then repeats the same Newton iteration and fails the same way before its sub-steps: such steps come in runs,
# the 40-object clutter with TAMSI; docs/benchmarks.md, "Back-off after a non-converged fused tree step")
TREE_RETRY_AFTER = 10

# s: the largest time step the front ends accept (`contact-sim run --time-step`, the node's `time_step`
# parameter); the Simulator itself does not enforce it
MAX_TIME_STEP = 0.1


@dataclass
class StepReport:
    t: float                 # s, sim time after the step (unchanged if the step failed)
    ok: bool
    status: SolverStatus     # the engine's status of the last attempt (SolverStatus.CONVERGED when ok)
    substeps: int            # 1 if the first attempt succeeded
    iterations: int          # engine iterations summed over sub-steps
    message: str = ""


class Simulator:
    """Steps one scene with one engine at a fixed time step (s)."""

    # the most steps ``advance`` runs in one compiled call (a longer advance makes several: its scripted wrenches'
    # values are evaluated per call, into a buffer of that many steps)
    ADVANCE_CHUNK = 1024

    def __init__(self, scene, engine: str = "semi_implicit", time_step: float = 1e-3, engine_options=None,
                 max_substep_levels: int = 4, joint_stiction_tolerance: float = 1e-3, divergence_limits=None,
                 penetration_limit=None):
        """``divergence_limits``: overrides of ``DivergenceLimits`` (max_speed 100 m/s, max_angular_speed
        1000 rad/s, max_distance 1000 m, for free bodies), False to switch the check off.
        ``penetration_limit``: a contact deeper than this fraction of the thinner body's thickness fails the step
        (sim/penetration.py; default 1: deeper than the thinner body is thick; False: off)."""
        self.scene: Scene = load_scene(scene)
        if not (isinstance(time_step, (int, float)) and np.isfinite(time_step) and time_step > 0):
            raise ConfigError(f"time_step must be a positive number of seconds, got {time_step!r}")
        if not (isinstance(joint_stiction_tolerance, (int, float)) and np.isfinite(joint_stiction_tolerance)
                and joint_stiction_tolerance > 0):
            raise ConfigError("joint_stiction_tolerance must be a positive speed (rad/s or m/s), got "
                              f"{joint_stiction_tolerance!r}")
        # URDF Coulomb joint friction F_c (N*m or N), applied as lagged implicit damping (see _joint_damping)
        self.joint_stiction_tolerance = float(joint_stiction_tolerance)
        self._settings = dict(engine=engine, time_step=time_step, engine_options=engine_options,
                              max_substep_levels=max_substep_levels,
                              joint_stiction_tolerance=joint_stiction_tolerance, divergence_limits=divergence_limits,
                              penetration_limit=penetration_limit)
        time_step = float(time_step)          # s; the model's (sim_model.time_step, read-only as time_step)
        self.model = self.scene.model
        pm = self.model.pin_model
        self._pm = pm
        # read through pin_data (see _stale). pin.Data(pm) builds in place; pm.createData() returns a copy, and
        # Pinocchio 4.1's Data holds four nv^3 tensors (pinocchio#2949): twice ~0.45 GB at once for a 40-object bin
        self._pin_data = pin.Data(pm)
        self._geometry_data = pin.GeometryData(self.model.collision_model)
        self._stale = ALL_STALE
        self.contact_query = ContactQuery(self.model, margin=self.scene.contact_margin, broad_phase="auto")
        self._free_motion = FreeBodyMotion(self.model)
        self.engine = make_engine(engine, self.model, engine_options)
        self._reject_pure_efforts([s.joint for s in self.scene.joint_scripts
                                   if s.effort and not s.position and not s.velocity], "scripted inputs of the scene")
        limits = DivergenceLimits.make(divergence_limits)
        self._divergence = DivergenceCheck(self.model, limits, self.scene.q0) if limits is not None else None
        self._penetration = PenetrationCheck.make(self.model, penetration_limit)
        nv, nq = pm.nv, pm.nq
        m = self.model
        # every array a step reads or writes, by name (sim/sim_data.py): gains, commands, the rows of the compiled
        # pass before the engine, the dynamics buffers, the engine's output slots
        d = self.data = SimData.allocate(nq, nv, len(m.geometry_names))
        d.q0[:], d.v0[:] = self.scene.q0, self.scene.v0       # the Scene itself is never written
        # the joints the robots declare driven get their gains or defaults derived from the model, the others stay
        # passive (sim/default_gains.py: drive_plan); a DefaultGainsWarning names the joints that got defaults
        self.default_gains: dict = {}           # joint -> (kp, kd) of the joints that got defaults
        self.passive_joints: tuple = ()         # joints without a drive: no PD, efforts ignored
        if self.scene.robots:      # every robot's gains (prefixed names)
            plan = drive_plan(self.scene)
            self.default_gains = default_gains(m, self.scene.q0, plan.defaults, time_step=time_step)
            self.passive_joints = plan.passive
            for joint, (kp, kd) in {**plan.given, **self.default_gains}.items():
                vi = m.joint_v_index[m.joint_index(joint)]
                d.kp[vi], d.kd[vi] = kp, kd
            warn_default_gains(self.default_gains, ", ".join(r.name for r in self.scene.robots),
                               self.passive_joints)
        self._passive_v = np.array([m.joint_v_index[m.joint_index(j)] for j in self.passive_joints], dtype=np.intp)
        d.effort_limit[m.joint_v_index] = m.effort_limit
        self._command_buffers = None      # (model, passive joints, joint_command_buffers())
        # the step's actuation (engines/base.py): effort, velocity target and effort limit are the command arrays
        # themselves (changed in place only); kp, kd and the position error are written by
        # step_kernels.prepare_step from the gains and the joints' modes every step
        self._actuation = Actuation(d.effort, d.kp_out, d.kd_out, d.error_out, d.v_target, d.effort_limit)
        # the default servo's feed-forward of the URDF's friction and damping at the velocity target
        # (sim/default_gains.py: default_feed_forward) on the joints that got default gains, in position mode: then
        # the actuation's effort is the commanded effort + Fc v_t / max(|v_t|, v_s) + d v_t (N*m or N)
        for joint, (friction, damping) in default_feed_forward(m, self.default_gains).items():
            vi = m.joint_v_index[m.joint_index(joint)]
            d.ff_friction[vi], d.ff_damping[vi] = friction, damping
        has_feed_forward = bool(np.any(d.ff_friction > 0) or np.any(d.ff_damping > 0))
        if has_feed_forward:
            self._actuation.effort = d.actuation_effort
        # per scripted wrench: the free body's first velocity index it is applied on in the body's frame, or -1
        # (J^T [f; m]); a (2, 3) view of data.external for a free body no other wrench acts on (stages.external_forces)
        targets = [self._wrench_target(f) for f in self.scene.external_forces]
        free = [v0 for v0 in targets if v0 is not None]
        d.wrench_views = tuple(None if v0 is None or free.count(v0) != 1 else d.external[v0:v0 + 6].reshape(2, 3)
                               for v0 in targets)
        wrench_targets = tuple(-1 if v0 is None else v0 for v0 in targets)
        # every scripted wrench on a free body's joint frame as one wrench function: the joint placements are all
        # that stages.external_forces reads of the kinematics (no Jacobian: _body_rotations)
        self._wrenches_by_rotation = all(v0 >= 0 and f.wrench is not None
                                         for f, v0 in zip(self.scene.external_forces, wrench_targets))
        script_index = []                         # per scripted joint: (q index, v index, lower, upper)
        for script in self.scene.joint_scripts:
            i = m.joint_index(script.joint)
            script_index.append((m.joint_q_index[i], m.joint_v_index[i], m.position_lower[i], m.position_upper[i]))
        # constants of the compiled passes around the engine (sim/step_kernels.py)
        d.viscous_damping[:] = m.joint_damping
        d.joint_friction[:] = np.asarray(m.joint_friction, dtype=float)
        tree_ptr = tree_velocity_ranges(pm)                    # M's diagonal blocks (prepare_step)
        limited = np.flatnonzero(np.isfinite(m.position_lower) | np.isfinite(m.position_upper))
        finish_index, d.finish_values = step_kernels.finish_arrays(
            self._free_motion.q_index, self._free_motion.v_index,
            self._divergence.kernel_arrays if self._divergence is not None else None,
            np.asarray(m.joint_q_index)[limited], np.asarray(m.joint_v_index)[limited],
            np.asarray(m.position_lower)[limited], np.asarray(m.position_upper)[limited])
        if self._divergence is not None:      # its bounds grow with sim time (set_time): the packed scales follow
            ndq, ndv = len(self._divergence.kernel_arrays[0]), len(self._divergence.kernel_arrays[2])
            values = d.finish_values
            self._divergence.bind(values[:ndq], values[ndq:ndq + ndv])
        # the step's constants by name (sim/sim_model.py), built once: what the stages read (sim/stages.py)
        self.sim_model = SimModel.build(
            self.scene, m, self._free_motion, tree_ptr, finish_index, time_step=time_step,
            max_substep_levels=max_substep_levels, joint_stiction_tolerance=self.joint_stiction_tolerance,
            joint_friction=d.joint_friction, has_feed_forward=has_feed_forward,
            # revolute and prismatic joints only: finish_step integrates q_next = q0 + dt v itself (as pin.integrate)
            vector_space=pm.nq == pm.nv and all(pm.joints[j].shortname() in step_kernels.VECTOR_SPACE_JOINTS
                                                for j in range(1, pm.njoints)),
            uses_gravity_force=self.engine.uses_gravity_force, wrench_targets=wrench_targets,
            script_index=script_index)
        # a model of free bodies only: constant M, nle, g(q) and the query's joint placements from q, compiled
        self._free_bodies = FreeBodies.of(self.model, self.contact_query)
        if self._free_bodies is not None and self.contact_query.analytic_joint_slots:
            self.contact_query.set_placement_source(self._free_body_placements)
        # every other model: the step's Pinocchio calls (M, nle, g, the position error, the integration, the
        # kinematics) in three compiled calls into these buffers (sim/rigid_body_dynamics.cpp, when it is built;
        # the same Pinocchio functions as the pin.* calls of the reference path, bit-identical results)
        self._rigid = None
        if self._free_bodies is None:
            module = native_build.RIGID_BODY.load()
            if module is not None:
                self._rigid = module.RigidBodyDynamics(pm, self._pin_data, d.mass_matrix, d.nle, d.gravity)
        # the objects the stages call (sim/stages.py), fixed for the Simulator's life
        self.step_parts = StepParts(pm, self._pin_data, self.engine, self.contact_query, self._actuation,
                                self._free_bodies, self._rigid, self._penetration, self._divergence,
                                tuple(self.scene.external_forces), tuple(self.scene.joint_scripts),
                                tuple(self.scene.surface_velocities.items()))
        # free bodies on sphere-halfspace pairs with TAMSI: the whole step in one compiled call (_fused_step), built
        # from the model, the data and the parts as the stages take them
        self._fused = (FreeBodyTamsiStep(self.sim_model, self.data, self.step_parts)
                       if FreeBodyTamsiStep.qualifies(self.sim_model, self.step_parts) else None)
        # any other tree (robots, joints of every kind, mimic; free bodies only with FreeBodies' kernels) whose
        # contact pairs are compiled analytic kinds, or coal's pairs while their bounding volumes keep them beyond
        # the margin (a robot held clear of everything), with TAMSI or an ICF engine: the whole step in one
        # compiled call too (_tree_step, sim/tree_step.py)
        self._tree = self._tree_args = None
        self._tree_check = False             # a staged step ran since the last fused one (_tree_step)
        self._tree_wait = 0                  # steps left that take the staged step without a fused attempt
        rigid_module = native_build.RIGID_BODY.load() if self._fused is None else None
        if rigid_module is not None and (self._rigid is not None or self._free_bodies is not None):
            coal = self.contact_query.coal_pairs
            bounds = (PairBounds.make(pm, m.collision_model, self.contact_query.pairs[coal], self.contact_query.margin)
                      if 0 < len(coal) and self.contact_query.num_pairs <= BOUND_MAX_PAIRS else None)
            if TreeStep.qualifies(self.sim_model, self.step_parts, bounds):
                # scripted wrenches all on links: J^T [f; m] in the call (their values written before it); on free
                # bodies only: into data.external by stages.external_forces (Pinocchio's kinematics)
                frames = (tuple(f.frame_id for f in self.scene.external_forces)
                          if self.scene.external_forces and all(t < 0 for t in wrench_targets)
                          and self._free_bodies is None else None)
                # free bodies only: the Pinocchio kinematics coal's narrow phase reads, compiled (as the tree's)
                rigid = self._rigid if self._rigid is not None else rigid_module.RigidBodyDynamics(
                    pm, self._pin_data, d.mass_matrix, d.nle, d.gravity)
                self._tree_args = (self.sim_model, self.data, self.step_parts, rigid_module.c_functions(), bounds,
                                   frames, rigid)
                self._tree = TreeStep(*self._tree_args)
        self.reset()

    # ------------------------------------------------------------------------------------ state

    @property
    def t(self) -> float:
        return self._t

    @property
    def time_step(self) -> float:
        """s, the step (``sim_model.time_step``: fixed when the Simulator is built)."""
        return self.sim_model.time_step

    @property
    def max_substep_levels(self) -> int:
        """A failed step is retried as 2, 4, ... 2**max_substep_levels sub-steps (``sim_model``)."""
        return self.sim_model.max_substep_levels

    @property
    def q(self) -> np.ndarray:
        return self._q

    @property
    def pin_data(self) -> pin.Data:
        """Pinocchio's Data at the current state: joint and frame placements (oMi, oMf), joint velocities (v),
        joint Jacobians (J); what a step left to compute is computed here, when it is first read."""
        if self._stale:
            self._refresh_kinematics()
        return self._pin_data

    @property
    def geometry_data(self) -> pin.GeometryData:
        """The collision geometries' world placements (oMg) at the current state (computed when first read)."""
        if self._stale:
            self._refresh_kinematics()
        return self._geometry_data

    @property
    def v(self) -> np.ndarray:
        return self._v

    @property
    def q0(self) -> np.ndarray:
        """(nq,) the initial configuration ``reset`` returns to (rad or m; a copy): the scene's, changed by
        ``set_initial_positions`` and ``carry_over`` (which leave the Scene as it was loaded)."""
        return self.data.q0.copy()

    @property
    def v0(self) -> np.ndarray:
        """(nv,) the initial velocity ``reset`` returns to (rad/s or m/s; a copy)."""
        return self.data.v0.copy()

    def reset(self) -> None:
        """Back to the scene's initial state; position targets hold the initial configuration."""
        self._t = 0.0
        self.step_count = 0
        self._q = self.data.q0.copy()
        self._v = self.data.v0.copy()
        d = self.data
        d.q_target[:] = self._q
        d.v_target[:] = 0.0
        d.effort[:] = 0.0
        d.position_mode[:] = self.model.actuated & (d.kp > 0)
        d.velocity_mode[:] = False
        self.engine.reset()
        self.contacts = None
        self.last_result: StepResult | None = None
        self._last_dt = self.time_step
        self.actuation_force = np.zeros(self._pm.nv)
        if self._divergence is not None:
            self._divergence.set_time(0.0)
        self._update_kinematics()

    def divergence_bounds(self) -> tuple[float, float, float] | None:
        """(speed m/s, angular speed rad/s, distance from the world origin m): what a free body may have at the
        current sim time before a step fails as diverged (sim/divergence.py); None: no divergence check."""
        return None if self._divergence is None else self._divergence.bounds(self._t)

    def set_state(self, q: np.ndarray, v: np.ndarray) -> None:
        q = np.asarray(q, float)
        v = np.asarray(v, float)
        if q.shape != (self._pm.nq,) or v.shape != (self._pm.nv,) or not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
            raise ConfigError(f"set_state: expected finite q ({self._pm.nq},) and v ({self._pm.nv},)")
        self._q = q.copy()
        self._v = v.copy()
        self._update_kinematics()

    def rebuilt(self, scene) -> "Simulator":
        """A Simulator of another ``scene`` with this one's engine and settings, taking over this one's state
        (``carry_over``): the model is immutable, so spawning or deleting a free object builds a new Simulator
        of the scene with the object added or removed. Built off the stepping thread; the state is taken over
        again by ``carry_over`` when it is swapped in (SteppingLoop.replace_simulator)."""
        new = Simulator(scene, **self._settings)
        new.carry_over(self)
        return new

    def carry_over(self, old: "Simulator") -> None:
        """Take over ``old``'s state for every joint of this model that ``old`` has too (same name and size: the
        robot's joints, which keep their indices since objects come after the robot, and the free joints of
        objects in both): q, v, the initial state (reset), actuation targets and modes, gains, effort limits and
        the last actuation; and the sim time and step count. Objects new here keep their initial state."""
        pm, po = self._pm, old._pm
        for jid in range(1, pm.njoints):
            name = pm.names[jid]
            if not po.existJointName(name):
                continue
            jn, jo = pm.joints[jid], po.joints[po.getJointId(name)]
            if (jn.nq, jn.nv) != (jo.nq, jo.nv):
                continue
            qn, qo = slice(jn.idx_q, jn.idx_q + jn.nq), slice(jo.idx_q, jo.idx_q + jo.nq)
            vn, vo = slice(jn.idx_v, jn.idx_v + jn.nv), slice(jo.idx_v, jo.idx_v + jo.nv)
            self._q[qn] = old._q[qo]
            self.data.q_target[qn] = old.data.q_target[qo]
            self.data.q0[qn] = old.data.q0[qo]
            self.data.v0[vn] = old.data.v0[vo]
            self._v[vn] = old._v[vo]
            self.actuation_force[vn] = old.actuation_force[vo]
            for field in ("kp", "kd", "effort_limit", "v_target", "effort", "position_mode", "velocity_mode"):
                getattr(self.data, field)[vn] = getattr(old.data, field)[vo]
        self._t, self.step_count = old._t, old.step_count
        if self._divergence is not None:
            self._divergence.set_time(self._t)
        self.default_gains = dict(old.default_gains)
        m = self.model
        self.passive_joints = tuple(j for j in old.passive_joints if j in m.joint_names)
        self._passive_v = np.array([m.joint_v_index[m.joint_index(j)] for j in self.passive_joints], dtype=np.intp)
        self._update_kinematics()

    # --------------------------------------------------------------------------------- commands

    def set_gains(self, kp: dict | None = None, kd: dict | None = None) -> None:
        """PD gains per joint name (N*m/rad, N*m*s/rad or N/m, N*s/m); a passive joint given gains is driven."""
        named = set(kp or {}) | set(kd or {})
        if named & set(self.passive_joints):
            self.passive_joints = tuple(j for j in self.passive_joints if j not in named)
            m = self.model
            self._passive_v = np.array([m.joint_v_index[m.joint_index(j)] for j in self.passive_joints],
                                       dtype=np.intp)
        for gains, out in ((kp, self.data.kp), (kd, self.data.kd)):
            for name, value in (gains or {}).items():
                value = float(value)
                if not np.isfinite(value) or value < 0:
                    raise ConfigError(f"gain of joint {name!r} must be finite and >= 0, got {value!r}")
                out[self.model.joint_v_index[self.model.joint_index(name)]] = value
        for name in named:                 # the given gains are a plain PD: no default feed-forward
            vi = self.model.joint_v_index[self.model.joint_index(name)]
            self.data.ff_friction[vi] = self.data.ff_damping[vi] = 0.0

    def set_initial_positions(self, positions: dict) -> None:
        """Replace the initial position of joints by name (rad or m; e.g. the ``initial_value`` of a
        ``<ros2_control>`` block) and reset to the new initial state."""
        m = self.model
        for name, value in positions.items():
            value = float(value)
            i = m.joint_index(name)
            if not (np.isfinite(value) and m.position_lower[i] <= value <= m.position_upper[i]):
                raise ConfigError(f"initial position {value!r} of joint {name!r} is outside its limits "
                                  f"[{m.position_lower[i]:.6g}, {m.position_upper[i]:.6g}]")
            self.data.q0[m.joint_q_index[i]] = value
        self.reset()

    def set_effort_limit(self, joint: str, limit: float | None) -> None:
        """Limit a joint's actuation (N*m or N) below its URDF effort limit, as a gripper's force setting does;
        ``None`` restores the URDF limit. Values above the URDF limit are capped to it."""
        i = self.model.joint_index(joint)
        urdf_limit = float(self.model.effort_limit[i])
        if limit is None:
            value = urdf_limit
        else:
            value = float(limit)
            if not (np.isfinite(value) and value >= 0.0):
                raise ConfigError(f"effort limit of joint {joint!r} must be finite and >= 0, got {limit!r}")
            value = min(value, urdf_limit)
        self.data.effort_limit[self.model.joint_v_index[i]] = value

    def set_joint_targets(self, positions: dict | None = None, velocities: dict | None = None,
                          efforts: dict | None = None) -> list[str]:
        """Command joints by name. A position (with optional velocity/effort feed-forward) puts the joint
        under PD; a velocity alone under velocity control (kd); an effort alone under pure effort control.
        Positions outside the joint limits are clamped; returns the names of clamped joints."""
        m = self.model
        clamped = []
        names = set(positions or {}) | set(velocities or {}) | set(efforts or {})
        for name in names:
            i = m.joint_index(name)
            for d, kind in ((positions, "position"), (velocities, "velocity"), (efforts, "effort")):
                if d and name in d and not np.isfinite(d[name]):
                    raise ConfigError(f"joint {name!r}: {kind} command must be finite, got {d[name]!r}")
        if efforts and not self.engine.accepts_effort_commands:
            commanded = set(positions or {}) | set(velocities or {})
            self._reject_pure_efforts([n for n in efforts if n not in commanded], "set_joint_targets")
        for name in names:
            i = m.joint_index(name)
            vi, qi = m.joint_v_index[i], m.joint_q_index[i]
            has_p = positions is not None and name in positions
            has_v = velocities is not None and name in velocities
            has_e = efforts is not None and name in efforts
            if has_p:
                p = float(positions[name])
                lo, hi = m.position_lower[i], m.position_upper[i]
                if p < lo or p > hi:
                    p = min(max(p, lo), hi)
                    clamped.append(name)
                self.data.q_target[qi] = p
            self.data.v_target[vi] = float(velocities[name]) if has_v else 0.0
            self.data.effort[vi] = float(efforts[name]) if has_e else 0.0
            self.data.position_mode[vi] = has_p
            self.data.velocity_mode[vi] = has_v and not has_p
        if self._passive_v.size:         # passive joints: no actuator (their gains are 0)
            self.data.effort[self._passive_v] = 0.0
        return clamped

    def set_joint_command_arrays(self, position_mode: np.ndarray, velocity_mode: np.ndarray, positions: np.ndarray,
                                 velocities: np.ndarray, efforts: np.ndarray) -> None:
        """``set_joint_targets`` for EVERY actuated joint at once, as arrays in ``model.joint_names`` order (what a
        stepping loop hands over each step, without building name dicts): joint i gets a position target
        ``positions[i]`` (rad or m, clamped to its limits) with velocity feed-forward ``velocities[i]`` (rad/s or
        m/s) where ``position_mode[i]``; a velocity command ``velocities[i]`` where ``velocity_mode[i]`` (and not
        position mode); otherwise an effort alone; ``efforts[i]`` (N*m or N) is every joint's effort or
        feed-forward. Same checks and result as ``set_joint_targets(positions={...}, velocities={...},
        efforts={every joint})``: a non-finite used value or a pure effort the engine ignores raises ConfigError
        and changes nothing."""
        # one compiled pass (this runs every step of a moving robot: the node's stepping loop, a campaign's trial)
        code = step_kernels.joint_commands(position_mode, velocity_mode, positions, velocities, efforts,
                                           *self.joint_command_buffers())
        m = self.model
        if code == step_kernels.COMMAND_NOT_FINITE:
            has_v = np.logical_or(position_mode, velocity_mode)
            for d, kind, used in ((positions, "position", position_mode), (velocities, "velocity", has_v),
                                  (efforts, "effort", np.ones_like(has_v))):
                bad = np.flatnonzero(used & ~np.isfinite(d))
                if bad.size:
                    raise ConfigError(f"joint {m.joint_names[bad[0]]!r}: {kind} command must be finite, got "
                                      f"{d[bad[0]]!r}")
        if code == step_kernels.PURE_EFFORT:
            has_v = np.logical_or(position_mode, velocity_mode)
            self._reject_pure_efforts([m.joint_names[i] for i in np.flatnonzero(~has_v)], "set_joint_targets")

    def joint_command_buffers(self) -> tuple:
        """The arguments of ``step_kernels.joint_commands`` after ``efforts``: the joints' q and v indices, their
        position limits (rad or m), the passive joints' v indices, whether the engine accepts effort commands and
        the command arrays it writes (q_target, v_target, effort, position_mode, velocity_mode). For a compiled
        hand-over every step (``set_joint_command_arrays``; driver/control_kernels.write_targets, the hardware
        System's write): one tuple, rebuilt when the model or the passive joints changed (a spawn, set_gains).
        Call it at each hand-over (do not keep it)."""
        m, passive = self.model, self._passive_v
        cached = self._command_buffers
        if cached is None or cached[0] is not m or cached[1] is not passive:
            d = self.data
            self._command_buffers = cached = (m, passive, (
                np.asarray(m.joint_q_index, dtype=np.intp), np.asarray(m.joint_v_index, dtype=np.intp),
                np.asarray(m.position_lower, dtype=float), np.asarray(m.position_upper, dtype=float), passive,
                bool(self.engine.accepts_effort_commands), d.q_target, d.v_target, d.effort, d.position_mode,
                d.velocity_mode))
        return cached[2]

    def _reject_pure_efforts(self, joints, where: str) -> None:
        """ConfigError if ``joints`` get an effort without a position or velocity and the engine ignores efforts
        (``ContactEngine.accepts_effort_commands``); nothing is changed then."""
        if joints and not self.engine.accepts_effort_commands:
            raise ConfigError(f"{where}: engine {self.engine.name!r} ignores effort commands (its actuated joints "
                              f"follow position or velocity commands); pure effort command for joint(s) "
                              f"{sorted(set(joints))} rejected: send a position or a velocity")

    # ------------------------------------------------------------------------------------- step

    def step(self, strict: bool = False) -> StepReport:
        """Advance by ``time_step`` (sub-stepping on solver failure)."""
        if self._fused is not None:
            report = self._fused_step()
            if report is not None:
                return report
            if self._stale == ALL_STALE:
                self._update_kinematics()                         # the staged step reads them
        elif self._tree is not None:
            if self._tree_wait:                  # a coal pair near, or no convergence, a few steps ago: staged
                self._tree_wait -= 1
            else:
                report = self._tree_step()
                if report is not None:
                    return report
            if self._stale == ALL_STALE:
                self._update_kinematics()        # the attempt moved Pinocchio's Data: the staged step from q0
            self._tree_check = True              # the staged step may grow the query's buffers (_tree_step)
        q0, v0, t0 = self._q, self._v, self._t
        time_step, levels = self.sim_model.time_step, self.sim_model.max_substep_levels
        # the first attempt: the whole step at once (the loop below from its level 1 when it fails)
        result, q_next = self._advance(q0, v0, t0, time_step)
        iterations = result.stats.iterations
        status = result.stats.status
        if q_next is not None:
            self._q, self._v, self._t = q_next, result.v_next, t0 + time_step
            self.step_count += 1
            self._update_kinematics()
            return StepReport(self._t, True, status, 1, iterations, "")
        message = result.stats.message
        n = 1
        for level in range(1, levels + 1) if not message.startswith(DEEP_PENETRATION) else ():
            n = 2 ** level
            dt = time_step / n
            q, v, t = q0, v0, t0
            ok = True
            for _ in range(n):
                result, q_next = self._advance(q, v, t, dt)
                iterations += result.stats.iterations
                status = result.stats.status
                if q_next is None:
                    ok = False
                    message = result.stats.message
                    break
                q, v, t = q_next, result.v_next, t + dt
            if not ok and message.startswith(DEEP_PENETRATION):
                break            # the contacts of the step's start (or a sub-step's) are too deep: no retry
            if ok:
                self._q, self._v, self._t = q, v, t0 + time_step
                self.step_count += 1
                self._update_kinematics()
                note = "" if n == 1 else f"solved in {n} sub-steps after: {message}"
                return StepReport(self._t, True, status, n, iterations, note)
            # retry from the start of the step with smaller sub-steps
            self._q, self._v, self._t = q0, v0, t0
            if q is not q0:
                self._update_kinematics()
        # the contact query's buffers now hold the failed attempt's contacts: publish no contact data
        self.contacts, self.last_result = None, None
        if message.startswith(DEEP_PENETRATION):
            report = StepReport(t0, False, status, n, iterations, f"{message}; state kept")
        else:
            report = StepReport(t0, False, status, 2 ** levels, iterations,
                                f"engine {self.engine.name!r} failed at t = {t0:.6f} s even with "
                                f"{2 ** levels} sub-steps: {message}; state kept")
        if strict:
            raise SolverError(report.message)
        return report

    def advance(self, n_steps: int, strict: bool = False) -> StepReport:
        """``n_steps`` calls of ``step(strict)`` (a control period between two controller updates): the same
        states, sim time, step count, last result, contacts and reports, bit for bit. A scene of the fused
        free-body step (sim/free_body_step.py; its scripted wrenches, if any, on free bodies at their joint frames,
        evaluated at each step's start before the call) runs them in ONE compiled call
        (``free_body_tamsi_advance``) up to a step that is not a clean success, which ``step`` then runs from its
        start as it would (the staged step's sub-steps on a failure), and the call goes on after it; a scene of the
        compiled tree step (sim/tree_step.py; robots, free bodies with an ICF engine or coal's pairs; its scripted
        wrenches on links evaluated at each step's start before the call) likewise (``tree_advance``), except while
        ``step`` takes the staged step without a compiled attempt (``_tree_wait``) or when its scripted wrenches are
        on free bodies (written into data.external per step) or it has joint scripts or moving surfaces (inputs
        that change with t: ``step`` per step); every other scene loops over ``step``. Returns the report of the
        first step that failed (not ok), else of the last step; ``strict``: SolverError at a failed step (as
        ``step(strict=True)``, the steps after it not run)."""
        if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
            raise ConfigError(f"advance: n_steps must be a positive number of steps, got {n_steps!r}")
        failed = report = None
        left = int(n_steps)
        while left > 0:
            if left > 1 and self._fused is not None and (self._fused.wrenches_in_kernel
                                                         or not self.sim_model.has_external_forces):
                chunk = min(left, self.ADVANCE_CHUNK)
                done, report = self._fused_advance(chunk)
                left -= done
                if done == chunk:
                    continue
            # the call's commands are the same for every step: no joint scripts (their targets change with t),
            # scripted wrenches only on links (their values per step into the call), no moving surfaces
            if (left > 1 and self._tree is not None and not self._tree_wait
                    and not self.sim_model.has_joint_scripts and not self.sim_model.has_surface_velocities
                    and (self._tree.applies_wrenches or not self.sim_model.has_external_forces)):
                chunk = min(left, self.ADVANCE_CHUNK)
                done, report = self._tree_advance(chunk)      # the compiled tree step's, n at once
                left -= done
                if done == chunk:
                    continue
            report = self.step(strict)            # a step the compiled call stopped before (or any scene's)
            left -= 1
            if failed is None and not report.ok:
                failed = report
        return failed if failed is not None else report

    def _fused_advance(self, n_steps: int) -> tuple[int, StepReport | None]:
        """Up to ``n_steps`` fused steps in one compiled call (``advance``): (steps committed, the last one's
        report or None). The Simulator is left as those steps of ``_fused_step`` leave it."""
        t, dt = self._t, self.sim_model.time_step
        slots = self.data.slots
        first = 1 if self.last_result is slots[0].result else 0
        fused = self._fused
        if fused.check_slots:                 # a staged step ran since the last fused call
            fused.check_slots = False
            fused.current_slots()
        q, v = np.empty(self.sim_model.nq), np.empty(self.sim_model.nv)
        wrenches = fused.wrench_steps(t, dt, n_steps)     # the scripted wrenches at each step's start
        start = time.perf_counter()
        m, iterations, err, count, n, r = free_body_tamsi_advance(self._q, self._v, dt, n_steps, fused.table, first,
                                                                  wrenches, q, v)
        elapsed = time.perf_counter() - start
        if m == 0:
            fused.check_slots = True                      # step() runs it, maybe staged
            return 0, None
        slot = slots[first] if m % 2 == 1 else slots[1 - first]
        self.engine.history_count = count                 # its iteration_history: the last step's updates
        stats = self.contact_query.stats
        stats["candidate_pairs"], stats["colliding_pairs"], stats["contacts"] = fused.pairs, r, n
        self.contacts = self.contact_query.contact_set(n)
        for _ in range(m):                                # the sim time as m steps add it up
            t += dt
        report = self._commit_compiled(slot, n, q, v, t, m, iterations, err if iterations else 0.0, elapsed / m)
        self._stale = ALL_STALE
        return m, report

    def _current_tree(self) -> TreeStep:
        """The TreeStep whose table the next compiled call takes (``_tree_step``, ``_tree_advance``): built again when
        a staged step since the last call replaced a buffer it points into; Pinocchio's Data brought to q when the
        call reads it (``pin_kinematics``)."""
        if self._tree_check:                   # after a staged step: the table's buffers may have been replaced
            self._tree_check = False
            if not self._tree.current():
                self._tree = TreeStep(*self._tree_args)
        if self._stale == ALL_STALE and self._tree.pin_kinematics:
            self._update_kinematics()                             # the call reads Pinocchio's Data at q
        return self._tree

    def _tree_advance(self, n_steps: int) -> tuple[int, StepReport | None]:
        """Up to ``n_steps`` steps of ``_tree_step`` in one compiled call (``advance``; tree_step.tree_advance):
        (steps committed, the last one's report or None). The Simulator is left as those steps of ``_tree_step``
        leave it; at a step the call stopped before, Pinocchio's Data is stale as after a failed ``_tree_step``
        (``step`` runs that step: ``_tree_step`` again from the same state, then the staged step if it fails)."""
        t, dt = self._t, self.sim_model.time_step
        tree = self._current_tree()
        forces = self.step_parts.external_forces if self.sim_model.has_external_forces else ()
        wrenches = np.empty((n_steps, len(forces), 6))           # on links (applies_wrenches): at each step's start
        if forces:
            ts = t
            for j in range(n_steps):
                for i, f in enumerate(forces):
                    wrenches[j, i] = stages.scripted_wrench(f, ts)
                ts += dt
        slots = self.data.slots                # step j into the slot ``first`` when j is even, else the other
        first = 1 if self.last_result is slots[0].result else 0
        a, b = slots[first], slots[1 - first]
        q, v = np.empty(self.sim_model.nq), np.empty(self.sim_model.nv)
        q_state, v_state = np.empty((2, self.sim_model.nq)), np.empty((2, self.sim_model.nv))
        start = time.perf_counter()
        m, iterations, err, count, evaluations, deferred, n, colliding, candidates = tree_advance(
            self._q, self._v, dt, n_steps, tree.table, self.data.modes, tree.icf, a.outputs,
            *a.rows(tree.max_rows), b.outputs, *b.rows(tree.max_rows), wrenches, q_state, v_state, q, v)
        elapsed = time.perf_counter() - start
        if m < n_steps:
            self._stale = ALL_STALE               # the stopped step moved Pinocchio's Data: step() runs it
        if m == 0:
            return 0, None
        slot = a if m % 2 == 1 else b
        if tree.icf:
            self.engine.record_compiled_step(n, evaluations, deferred)
        else:
            self.engine.history_count = count                 # its iteration_history: the last step's updates
        stats = self.contact_query.stats
        stats["candidate_pairs"] = candidates if candidates >= 0 else tree.pairs
        stats["colliding_pairs"], stats["contacts"] = colliding, n
        self.contacts = self.contact_query.contact_set(n)
        for _ in range(m):                                # the sim time as m steps add it up
            t += dt
        report = self._commit_compiled(slot, n, q, v, t, m, iterations, err if iterations or tree.icf else 0.0,
                                       elapsed / m, slot.rows(n)[1] if tree.lagged else None)
        if not tree.pin_kinematics:
            self._stale = ALL_STALE                       # computed when read (pin_data); the call needs none
        elif m == n_steps:
            self._stale = PLACEMENTS_STALE                # the call computed the new state's kinematics
        return m, report

    def _fused_step(self) -> StepReport | None:
        """The step of a scene of free bodies on sphere-halfspace pairs with TAMSI in one compiled call
        (sim/free_body_step.py): the same step as ``_advance`` to round-off. None when it did not succeed (not
        converged, non-finite, diverged): ``step`` then runs the staged step, which fails the same way and
        retries with sub-steps."""
        t, dt = self._t, self.sim_model.time_step
        fused = self._fused
        if self.sim_model.has_external_forces:
            if fused.wrenches_in_kernel:
                fused.wrench_at(t)                                # the call writes data.external from them
            else:
                if self._stale == ALL_STALE:
                    self._body_rotations()                        # the bodies' rotations
                stages.external_forces(self.sim_model, self.data, self.step_parts, t)    # into data.external
        if fused.check_slots:                 # a staged step ran since the last fused call
            fused.check_slots = False
            fused.current_slots()
        slots = self.data.slots                # the engine's outputs into the slot last_result does not hold
        k = 1 if self.last_result is slots[0].result else 0
        slot = slots[k]
        # the new state: fresh arrays (callers may hold sim.q / sim.v across steps); the rest is written in place
        m = self.sim_model
        q, v = np.empty(m.nq), np.empty(m.nv)
        start = perf_counter()
        status, iterations, err, count, info, n, r, code, deep = free_body_tamsi_step(self._q, self._v, dt,
                                                                                      fused.table, k, q, v)
        elapsed = perf_counter() - start
        self.engine.history_count = count                 # its iteration_history: this step's Newton updates
        stats = self.contact_query.stats
        stats["candidate_pairs"] = fused.pairs
        stats["colliding_pairs"] = r
        stats["contacts"] = n
        if code != STEP_OK:                               # -1: not converged
            if code != step_kernels.DIVERGED or self._divergence.check(q, v, fused.mass_matrix, t + dt):
                fused.check_slots = True                  # the staged step runs
                return None
        contacts = self.contact_query.contact_set(n)
        if deep and self._penetration.check(contacts, t, self._v, dt):       # deep: beyond the bound alone
            fused.check_slots = True
            return None            # the staged step fails with the reason
        self.contacts = contacts
        report = self._commit_compiled(slot, n, q, v, t + dt, 1, iterations, err if iterations else 0.0, elapsed)
        self._stale = ALL_STALE                  # computed when read (pin_data); the fused step needs none
        return report

    def _tree_step(self) -> StepReport | None:
        """The step of a tree whose contact pairs are compiled analytic kinds, or coal's pairs held beyond the margin
        by their bounding volumes, with TAMSI or an ICF engine in one compiled call (sim/tree_step.py): the stages of
        ``_advance`` in the same order on the same functions, bit-identical. None when it did not succeed (a coal
        pair may be within the margin, not converged, non-finite, diverged, too deep): ``step`` then runs the staged
        step, which covers the coal pairs, or fails the same way and retries with sub-steps."""
        t, dt = self._t, self.sim_model.time_step
        tree = self._current_tree()
        self._apply_scripts(t + dt)           # the data's targets and modes the call reads (as _advance's)
        if self.sim_model.has_surface_velocities:     # data.surface_velocity at t: the call's velocity bias
            stages.surface_velocities(self.sim_model, self.data, self.step_parts, t)
        if self.sim_model.has_external_forces:
            if tree.applies_wrenches:          # the wrenches' values; the call applies them (stages.external_forces)
                values = tree.wrench
                for i, f in enumerate(self.step_parts.external_forces):
                    values[i] = stages.scripted_wrench(f, t)
            else:
                if self._stale == ALL_STALE:
                    self._body_rotations()                        # the bodies' rotations (free bodies only)
                stages.external_forces(self.sim_model, self.data, self.step_parts, t)    # into data.external
        data = self.data
        slots = data.slots                     # the engine's outputs into the slot last_result does not hold
        slot = slots[1] if self.last_result is slots[0].result else slots[0]
        # the new state: fresh arrays (callers may hold sim.q / sim.v across steps); the rest is written in place
        m = self.sim_model
        q, v = np.empty(m.nq), np.empty(m.nv)
        impulse, friction_normal = slot.rows(tree.max_rows)
        if tree.icf:                          # Lagged, Similar, SAP: icf_step (ConvexICFEngine._do_step_into's)
            start = perf_counter()
            status, iterations, err, failed_at, n_eval, deferred, n, colliding, candidates, code, deep = tree_icf_step(
                self._q, self._v, dt, tree.table, data.modes, slot.outputs, impulse, friction_normal, q, v)
            elapsed = perf_counter() - start
            self.engine.record_compiled_step(n, n_eval, deferred)
        else:
            start = perf_counter()
            status, iterations, err, count, info, n, colliding, candidates, code, deep = tree_tamsi_step(
                self._q, self._v, dt, tree.table, data.modes, slot.outputs, impulse, q, v)
            elapsed = perf_counter() - start
            self.engine.history_count = count                 # its iteration_history: this step's Newton updates
        stats = self.contact_query.stats
        # update's candidate pairs: the call's count with coal's pairs in it, else the compiled pairs (TreeStep.pairs)
        stats["candidate_pairs"] = candidates if candidates >= 0 else tree.pairs
        stats["colliding_pairs"] = colliding
        stats["contacts"] = n
        if code != STEP_OK:               # not converged, non-finite, diverged (rare); a coal pair near (NEAR)
            if code == TREE_NEAR:
                self._tree_wait = TREE_RETEST_AFTER     # the staged step for these next steps (no attempt)
            else:
                if code == -1:                    # not converged: the staged step for these next steps too
                    self._tree_wait = TREE_RETRY_AFTER
                self._stale = ALL_STALE           # the call moved Pinocchio's Data
            return None
        contacts = self.contact_query.contact_set(n)
        if deep:                                          # beyond the bound alone: the check decides
            if self._penetration.check(contacts, t, self._v, dt):
                self._stale = ALL_STALE                   # the call moved Pinocchio's Data
                return None                               # the staged step fails with the reason
        self.contacts = contacts
        impulse, friction_normal = slot.rows(n)
        report = self._commit_compiled(slot, n, q, v, t + dt, 1, iterations,
                                       err if iterations or tree.icf else 0.0, elapsed,
                                       friction_normal if tree.lagged else None, impulse)   # as ConvexICFEngine's
        if not tree.pin_kinematics:
            self._stale = ALL_STALE                       # computed when read (pin_data); the call needs none
        elif deep:
            self._update_kinematics()                     # the call left it to here
        else:
            self._stale = PLACEMENTS_STALE                # the call computed the new state's kinematics
        return report

    def _commit_compiled(self, slot, n, q, v, t_next, steps, iterations, residual, solve_time,
                         friction_normal_impulse=None, impulse=None) -> StepReport:
        """What ``steps`` successful steps of a compiled call (``_fused_step``, ``_fused_advance``, ``_tree_step``)
        leave, as the staged step leaves them: the slot's result (the engine's outputs of the last step, its ``n``
        contacts' impulses: ``impulse``, ``slot.rows(n)[0]`` when None) as ``last_result`` with converged stats
        (``solve_time`` s per step), the actuation force, the new state (q, v, sim time ``t_next`` s) and the step
        count. Returns the last step's report."""
        result = self.last_result = slot.result
        result.v_next = v
        result.contact_impulse = impulse if impulse is not None else slot.rows(n)[0]
        result.friction_normal_impulse = friction_normal_impulse
        stats = result.stats
        stats.status = CONVERGED
        stats.iterations = iterations
        stats.residual = residual
        stats.solve_time_s = solve_time
        stats.message = ""
        self._last_dt = self.sim_model.time_step
        self.actuation_force = slot.actuation_force
        self._q, self._v, self._t = q, v, t_next
        self.step_count += steps
        return StepReport(t_next, True, CONVERGED, 1, iterations, "")

    def _advance(self, q, v, t, dt) -> tuple[StepResult, np.ndarray | None]:
        """One attempt at a (sub-)step from (q, v, t): the stages of sim/stages.py in order, on the model
        (``sim_model``) and the data (``data``). Returns (result, q_next or None on failure)."""
        m, d, p = self.sim_model, self.data, self.step_parts
        if q is not self._q or v is not self._v:     # sub-steps: kinematics of the intermediate state
            self._q, self._v = q, v
            self._update_kinematics()
        if m.has_joint_scripts:
            stages.joint_scripts(m, d, p, t + dt)
        surface_velocity = stages.surface_velocities(m, d, p, t) if m.has_surface_velocities else None
        contacts, deep = _contacts_stage(m, d, p, q, v, t, dt, surface_velocity)
        if deep:                       # the start state is the problem: step() does not retry with sub-steps
            self.contacts = contacts
            return stages.deep_penetration_result(m, v, contacts.size, deep), None
        M, nle, gravity, position_error = _dynamics_stage(m, d, p, q, v)
        if m.has_external_forces:
            _external_forces_stage(m, d, p, t)                    # into data.external, a row of data.rows
        _actuation_stage(m, d, p, M, v, nle, position_error)
        result = _solve_stage(m, d, p, t, dt, q, v, M, gravity, contacts, self.last_result)
        self.contacts = contacts
        if result.stats.status is not SolverStatus.CONVERGED:
            return result, None
        q_next = _integrate_stage(m, d, p, q, result, M, t, dt)
        if q_next is None:
            return result, None
        self.last_result = result
        self._last_dt = dt
        self.actuation_force = result.actuation_force
        return result, q_next

    def _free_body_placements(self) -> None:
        """The contact query's joint placements at the current q (a free-body model's placement source)."""
        self._free_bodies.update_placements(self._q)

    def _joint_damping(self, v: np.ndarray) -> np.ndarray:
        """Damping (N*m*s/rad or N*s/m per dof) that every engine applies implicitly, tau = -d v_next: the URDF's
        viscous ``damping`` plus its Coulomb ``friction`` F_c as the lagged regularized friction
        d_f = F_c / max(|v0|, v_s) with v0 the velocity at the start of the step and v_s the
        ``joint_stiction_tolerance``. Sliding (|v0| > v_s): friction F_c v_next / |v0| = F_c sign(v) to first
        order in the velocity change of the step; sticking: a stiff damping that lets a torque below F_c creep
        at most at v_s. It is dissipative at every step (d_f >= 0) and stable for any d_f (implicit).
        The step computes the same in its compiled pass (sim/step_kernels.prepare_step); this is the reference."""
        if not self.sim_model.has_joint_friction:
            return self.model.joint_damping
        d = np.abs(v)
        np.maximum(d, self.joint_stiction_tolerance, out=d)
        np.divide(self.data.joint_friction, d, out=d)
        d += self.model.joint_damping
        return d

    def _enforce_joint_limits(self, q, v) -> None:
        """Clamp limited joints to [lower, upper] and remove the velocity component into the limit
        (a perfectly inelastic joint stop): ``stages.enforce_joint_limits``."""
        stages.enforce_joint_limits(self.sim_model, q, v)

    def _apply_scripts(self, t_end: float) -> None:
        """The scene's scripted joint commands at ``t_end`` (``stages.joint_scripts``): per script exactly
        ``set_joint_targets`` with that joint's position / velocity / effort, without its dicts."""
        if self.sim_model.has_joint_scripts:
            stages.joint_scripts(self.sim_model, self.data, self.step_parts, t_end)

    def _external_forces(self, t: float) -> np.ndarray:
        """Generalized force (N or N*m) of the scene's scripted wrenches at t into data.external
        (``stages.external_forces``); returns it."""
        if self.sim_model.has_external_forces:
            stages.external_forces(self.sim_model, self.data, self.step_parts, t)
        return self.data.external

    def _wrench_target(self, f) -> int | None:
        """The first velocity index of the free-flyer joint whose joint frame is ``f``'s frame, else None."""
        pm = self._pm
        frame = pm.frames[f.frame_id]
        joint = pm.joints[f.joint_id]
        if joint.shortname() == "JointModelFreeFlyer" and frame.parentJoint == f.joint_id \
                and frame.placement.isIdentity():
            return int(joint.idx_v)
        return None

    def _update_kinematics(self) -> None:
        """Kinematics of the current state that the next step reads: joint placements and velocities, joint
        Jacobians (the contact query uses them). Frame and geometry placements (the node, the sensors, the viewer)
        are computed when ``pin_data`` / ``geometry_data`` are next read (``_refresh_kinematics``)."""
        _kinematics_stage(self.sim_model, self.data, self.step_parts, self._q, self._v)
        self._stale = PLACEMENTS_STALE

    def _body_rotations(self) -> None:
        """The joint placements of the current q in Pinocchio's Data (what ``stages.external_forces`` reads of the
        kinematics), for a compiled step that needs no more: Pinocchio's zeroth-order forward kinematics (the same
        placements as ``_update_kinematics``' first-order pass), ``_stale`` left ALL_STALE (the velocities and
        Jacobians are not computed), when every scripted wrench is applied by the rotation of its free body
        (``_wrenches_by_rotation``). Otherwise, or with the compiled Pinocchio calls (``rigid``: their placements
        need not be bitwise Pinocchio's Python binding's), the full kinematics (``_update_kinematics``)."""
        if self._rigid is None and self._wrenches_by_rotation:
            pin.forwardKinematics(self._pm, self._pin_data, self._q)
        else:
            self._update_kinematics()                     # a wrench's frame Jacobian (J^T [f; m]) needs them all

    def _refresh_kinematics(self) -> None:
        """What ``_stale`` says is missing of the current state's kinematics: joint placements, velocities and
        Jacobians (after a fused step), frame placements and geometry placements."""
        if self._stale == ALL_STALE:
            self._update_kinematics()
        pm, data = self._pm, self._pin_data
        pin.updateFramePlacements(pm, data)
        pin.updateGeometryPlacements(pm, data, self.model.collision_model, self._geometry_data)
        self._stale = KINEMATICS_CURRENT

    # ---------------------------------------------------------------------------------- queries

    def run(self, duration: float, strict: bool = True) -> None:
        """Step until sim time has advanced by ``duration`` seconds."""
        n = int(round(duration / self.time_step))
        if n > 0:
            self.advance(n, strict=strict)        # n calls of step(strict), one compiled call where it can

    def _frame_id(self, name: str) -> int:
        pm = self._pm
        for fb in self.model.free_bodies:
            if fb.name == name:
                return pm.getFrameId(fb.frame_name)
        if pm.existFrame(name):
            return pm.getFrameId(name)
        raise ConfigError(unknown_choice("body", name, model_body_names(self.model)))

    def body_pose(self, name: str) -> pin.SE3:
        """World pose of a free body or a link/frame."""
        return self.pin_data.oMf[self._frame_id(name)].copy()

    def body_velocity(self, name: str) -> np.ndarray:
        """(6,) world-frame (linear m/s at the body origin, angular rad/s)."""
        return pin.getFrameVelocity(self._pm, self.pin_data, self._frame_id(name), pin.LOCAL_WORLD_ALIGNED).vector

    def joint_positions(self) -> np.ndarray:
        return self._q[self.model.joint_q_index]

    def joint_velocities(self) -> np.ndarray:
        return self._v[self.model.joint_v_index]

    def joint_efforts(self) -> np.ndarray:
        return self.actuation_force[self.model.joint_v_index]

    def mimic_positions(self) -> dict:
        """mimic joint name -> position (rad or m), from the actuated joints' (``MimicExpansion``)."""
        mimic = MimicExpansion.of(self.model)
        return dict(zip(mimic.names, mimic.positions(self.joint_positions()).tolist()))

    def kinetic_energy(self) -> float:
        return float(pin.computeKineticEnergy(self._pm, self.pin_data, self._q, self._v))

    def potential_energy(self) -> float:
        return float(pin.computePotentialEnergy(self._pm, self.pin_data, self._q))

    def contact_forces_world(self) -> np.ndarray:
        """(N, 3) world-frame forces on geometry B of the last step's contacts (N); (0, 3) when there are none or
        when the last contact set and the last successful result do not belong together (after a failed step)."""
        if self.contacts is None or self.last_result is None or self.contacts.size == 0 \
                or self.last_result.contact_impulse.shape[0] != self.contacts.size:
            return np.zeros((0, 3))
        return self.contacts.world_forces(self.last_result.contact_impulse, self._last_dt)
