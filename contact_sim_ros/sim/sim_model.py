"""The Simulator's model by name (issue 45 item 1, Model / Data as MuJoCo's mjModel / mjData, Pinocchio's Model /
Data): the constants of a step, built once from the Scene and its MultibodyModel when the Simulator is built and
never changed after; the stages of the step (sim/stages.py) read them here, the arrays that change in sim/sim_data.py.

Arrays only numpy reads are read-only (``writeable`` False). The arrays the compiled passes take (``free_v_index``,
``tree_ptr``, ``finish_index``) are not written either but stay writeable: numba types a read-only array as another
type, which would compile every kernel that takes them again.

Units: s (time_step), rad or m (positions), rad/s or m/s (velocities).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _read_only(a, dtype=None) -> np.ndarray:
    a = np.array(a, dtype=dtype)          # a copy: the model's own
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class SimModel:
    """A Simulator's step constants (see the module docstring)."""

    time_step: float                 # s
    max_substep_levels: int          # a failed step is retried as 2, 4, ... 2**max_substep_levels sub-steps
    nq: int
    nv: int
    joint_q_index: np.ndarray        # (J,) intp, read-only: each actuated joint's position index
    joint_v_index: np.ndarray        # (J,) intp, read-only: its velocity index
    position_lower: np.ndarray       # (J,) rad or m, read-only (-inf: none)
    position_upper: np.ndarray       # (J,) rad or m, read-only (inf: none)
    limited: np.ndarray              # (J,) bool, read-only: a finite position limit
    any_limited: bool
    free_q_index: np.ndarray         # the free-flyer joints' first position indices (FreeBodyMotion.q_index)
    free_v_index: np.ndarray         # ... and first velocity indices (compiled passes: not read-only)
    tree_ptr: np.ndarray             # the kinematic trees' velocity ranges (divergence.tree_velocity_ranges)
    finish_index: np.ndarray         # step_kernels.finish_step's packed index arrays (finish_arrays' first)
    joint_stiction_tolerance: float  # m/s or rad/s: v_s of the lagged Coulomb joint friction
    friction_tolerance: float        # the stiction tolerance prepare_step takes (0: no joint friction)
    has_joint_friction: bool         # a URDF Coulomb friction F_c > 0 somewhere
    has_feed_forward: bool           # the default servo's friction / damping feed-forward on some joint
    vector_space: bool               # revolute and prismatic joints only: q_next = q0 + dt v in finish_step
    uses_gravity_force: bool         # the engine takes g(q) besides nle (engines/base.py)
    has_joint_scripts: bool          # the scene's inputs a step applies (sim/scene.py)
    has_surface_velocities: bool
    has_external_forces: bool
    # per scripted wrench of the scene (Scene.external_forces order): the first velocity index of the free-flyer
    # joint whose joint frame is the wrench's frame (applied as (R^T f, R^T m) there), -1: J^T [f; m] of its frame
    wrench_targets: tuple = ()
    # per scripted joint of the scene (Scene.joint_scripts order): (q index, v index, lower, upper) of its joint
    script_index: tuple = ()

    @classmethod
    def build(cls, scene, model, free_motion, tree_ptr, finish_index, *, time_step: float,
              max_substep_levels: int, joint_stiction_tolerance: float, joint_friction: np.ndarray,
              has_feed_forward: bool, vector_space: bool, uses_gravity_force: bool,
              wrench_targets: tuple = (), script_index: tuple = ()) -> "SimModel":
        """From the Scene, its MultibodyModel (``model``), the FreeBodyMotion and the packed kernel arrays."""
        limited = np.isfinite(model.position_lower) | np.isfinite(model.position_upper)
        has_friction = bool(np.any(joint_friction > 0))
        return cls(time_step=float(time_step), max_substep_levels=int(max_substep_levels),
                   nq=int(model.pin_model.nq), nv=int(model.pin_model.nv),
                   joint_q_index=_read_only(model.joint_q_index, np.intp),
                   joint_v_index=_read_only(model.joint_v_index, np.intp),
                   position_lower=_read_only(model.position_lower, float),
                   position_upper=_read_only(model.position_upper, float),
                   limited=_read_only(limited, bool), any_limited=bool(limited.any()),
                   free_q_index=free_motion.q_index, free_v_index=free_motion.v_index, tree_ptr=tree_ptr,
                   finish_index=finish_index, joint_stiction_tolerance=float(joint_stiction_tolerance),
                   friction_tolerance=float(joint_stiction_tolerance) if has_friction else 0.0,
                   has_joint_friction=has_friction, has_feed_forward=bool(has_feed_forward),
                   vector_space=bool(vector_space), uses_gravity_force=bool(uses_gravity_force),
                   has_joint_scripts=bool(scene.joint_scripts),
                   has_surface_velocities=bool(scene.surface_velocities),
                   has_external_forces=bool(scene.external_forces), wrench_targets=tuple(wrench_targets),
                   script_index=tuple(script_index))
