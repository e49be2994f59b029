"""The Simulator's data by name (issue 45 item 1, Model / Data as MuJoCo's mjData, Pinocchio's Data): every array a
step reads or writes besides the state (t, q, v) and Pinocchio's Data, allocated once when the Simulator is built
and changed in place only.

The compiled passes around the engine take some of them whole, as one argument: ``rows`` (``N_ROWS``, nv), whose
rows the kernels of sim/step_kernels.py index by that module's constants (KP ... DAMPING_OUT: a compiled call costs
~0.05-0.2 us per argument), and ``modes`` (2, nv). The named fields below are views of those rows: the Python side
reads and writes them by name and never indexes the blocks itself.

Units, per generalized velocity (nv,) unless said: gains kp N*m/rad or N/m, kd N*m*s/rad or N*s/m; damping
N*m*s/rad or N*s/m; forces and efforts N*m or N; velocities rad/s or m/s; positions (nq,) rad or m.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engines.base import ResultSlot
from . import step_kernels


@dataclass(eq=False)
class SimData:
    """Named preallocated arrays of one Simulator (see the module docstring)."""

    q0: np.ndarray               # (nq,) the initial state reset() returns to: the Scene's, copied (the Scene is
    v0: np.ndarray               # (nv,) never written: set_initial_positions and carry_over change these)
    rows: np.ndarray             # (N_ROWS, nv) the block step_kernels.prepare_step takes whole
    kp: np.ndarray               # rows[KP]: PD gains of the drives (0: passive)
    kd: np.ndarray               # rows[KD]
    viscous_damping: np.ndarray  # rows[VISCOUS_DAMPING]: the URDF's joint damping
    joint_friction: np.ndarray   # rows[JOINT_FRICTION]: the URDF's Coulomb joint friction F_c
    external: np.ndarray         # rows[EXTERNAL]: the scene's scripted wrenches as generalized forces, J^T [f; m]
    tau: np.ndarray              # rows[TAU]: the step's explicit generalized force (StepInputs.generalized_force)
    kp_out: np.ndarray           # rows[KP_OUT]: the step's actuation gains by the joints' modes (Actuation.kp)
    kd_out: np.ndarray           # rows[KD_OUT]
    error_out: np.ndarray        # rows[ERROR_OUT]: position error of the joints in position mode (rad or m)
    damping: np.ndarray          # rows[DAMPING_OUT]: viscous + lagged friction damping of the step
    modes: np.ndarray            # (2, nv) bool, the block prepare_step takes whole
    position_mode: np.ndarray    # modes[POSITION_MODE]
    velocity_mode: np.ndarray    # modes[VELOCITY_MODE]
    q_target: np.ndarray         # (nq,) position targets
    v_target: np.ndarray         # rows[V_TARGET]: velocity targets (or feed-forward in position mode)
    effort: np.ndarray           # rows[EFFORT]: commanded efforts (or feed-forward)
    effort_limit: np.ndarray     # rows[EFFORT_LIMIT]: |actuation| bound (inf: none)
    ff_friction: np.ndarray      # the default servo's friction feed-forward F_c (sim/default_gains.py)
    ff_damping: np.ndarray       # ... and damping feed-forward d
    ff: np.ndarray               # scratch of the feed-forward
    ff_scratch: np.ndarray
    actuation_effort: np.ndarray  # effort + feed-forward (the Actuation's effort when there is a feed-forward)
    mass_matrix: np.ndarray      # (nv, nv) M(q) of the compiled dynamics (rigid_body_dynamics.cpp)
    nle: np.ndarray              # C(q, v) v + g(q)
    gravity: np.ndarray          # g(q)
    position_error: np.ndarray   # q_target - q on the manifold (pin.difference)
    wrench_force: np.ndarray     # J^T [f; m] of one scripted wrench on a link
    surface_velocity: np.ndarray  # (G, 3) m/s, world frame, per collision geometry (conveyor surfaces)
    # the engine's outputs, written in place (ContactEngine.step_into): a step writes into the slot that the
    # Simulator's last_result does not hold
    slots: tuple
    # step_kernels.finish_step's packed values (finish_arrays' second): the divergence bounds' scales, which grow
    # with sim time (DivergenceCheck.bind / set_time write them), and the joint limits
    finish_values: np.ndarray = None
    # per scripted wrench of the scene: the (2, 3) view of ``external`` on the free body's (linear, angular)
    # velocities it is written into (its frame is the body's joint frame and no other wrench acts on that body),
    # else None (stages.external_forces)
    wrench_views: tuple = ()

    @classmethod
    def allocate(cls, nq: int, nv: int, n_geometries: int) -> "SimData":
        """Zeros (effort_limit inf) for a model of nq positions, nv velocities and ``n_geometries`` geometries."""
        K = step_kernels
        rows = np.zeros((K.N_ROWS, nv))
        modes = np.zeros((2, nv), dtype=bool)
        rows[K.EFFORT_LIMIT] = np.inf
        ff_friction, ff_damping, ff, ff_scratch, actuation_effort, wrench_force = np.zeros((6, nv))
        nle, gravity, position_error = np.zeros((3, nv))
        return cls(q0=np.zeros(nq), v0=np.zeros(nv), rows=rows, kp=rows[K.KP], kd=rows[K.KD], viscous_damping=rows[K.VISCOUS_DAMPING],
                   joint_friction=rows[K.JOINT_FRICTION], external=rows[K.EXTERNAL], tau=rows[K.TAU],
                   kp_out=rows[K.KP_OUT], kd_out=rows[K.KD_OUT], error_out=rows[K.ERROR_OUT],
                   damping=rows[K.DAMPING_OUT], modes=modes, position_mode=modes[K.POSITION_MODE],
                   velocity_mode=modes[K.VELOCITY_MODE], q_target=np.zeros(nq), v_target=rows[K.V_TARGET], effort=rows[K.EFFORT],
                   effort_limit=rows[K.EFFORT_LIMIT], ff_friction=ff_friction, ff_damping=ff_damping, ff=ff,
                   ff_scratch=ff_scratch, actuation_effort=actuation_effort, mass_matrix=np.zeros((nv, nv)),
                   nle=nle, gravity=gravity, position_error=position_error, wrench_force=wrench_force,
                   surface_velocity=np.zeros((n_geometries, 3)), slots=(ResultSlot(nv), ResultSlot(nv)))
