"""Quasistatic time stepping as a mixed-integer QP (Pang & Tedrake, IROS 2018), and Trinkle's LCP baseline.

Paper: T. Pang, R. Tedrake, "A Robust Time-Stepping Scheme for Quasistatic Rigid Multibody Systems", IROS 2018;
the LCP baseline is J. Trinkle, S. Berard, J.-S. Pang,
"A time-stepping scheme for quasistatic multibody systems", ISATP 2005 (the paper's ref. [14], section III).

State = configuration only. One step advances q by the tangent increment dq (nv,) (``v_next = dq / h``; the
simulator integrates q_next = integrate(q, h * v_next), so free-body quaternions stay on the manifold). The
paper's q-space Jacobians J^q = J^v G are not needed: everything is written in the tangent space (v-space).

Notation (paper, section IV; all vectors over the nc contacts of the ContactSet, nd friction directions each):

* actuated dofs a (``model.actuated``) take a *commanded* increment dq_a_bar (m or rad); the unactuated dofs u
  (free bodies) are in force balance (eq. 8 integrated over the step, eq. 23a):
      Jn_u^T P_n + Jf_u^T P_f + h tau_u = 0,        tau_u = -g_u(q) + external forces   (N or N*m)
* linearised signed distance (eq. 13):  phi_next = phi + Jn dq + h bias_n            (m)
* polyhedral friction cone (eq. 7) with directions d_ij = cos(2 pi j / nd) t1 + sin(2 pi j / nd) t2
  (balanced for even nd); sliding distances Psi = Jf dq (eq. 15), Jf = D^T J_t;
* complementarity (eqs. 12, 16, 17):
      0 <= phi_next                  _|_ P_n   >= 0      (non-penetration)
      0 <= rho = E Gamma + Jf dq     _|_ P_f   >= 0      (maximal dissipation)
      0 <= s = U P_n - E^T P_f       _|_ Gamma >= 0      (friction cone)
  each written with a binary z and big-M values (eqs. 19-20, 23d-e): row <= M_row z, variable <= M_var (1 - z);
* hypothetical-penetration force bound (eqs. 21-22, 23f), stiffness K (N/m):
      P_n / h >= -K phi_bar,   phi_bar = phi + Jn_u dq_u + Jn_a dq_a_bar + h bias_n
  or, in the one-step-delayed variant the paper uses for stiff cases (section V-B), with the constant phi_bar
  computed at the previous step for the same contact;
* objective (section IV-B):  minimise ||dq_a - dq_a_bar||^2, plus a small eps ||dq_u||^2 (scaled units,
  ``unactuated_regularization``, 1e-4) that picks the least motion where eq. 23 allows many: a box pushed along
  a vertex of the polyhedral cone may otherwise slide diagonally or spin, a cylinder spin about its axis.
  Within the chosen contact mode the QP is then re-solved exactly (``polish``) with eps = 1e-9, so that an
  object carried by the robot follows the command without the 1e-4 lag the mode-selection eps would cause.
* where eq. 23 leaves the impulses non-unique for the optimal motion (a squeezed object may carry any internal
  force above the K bound), the engine reports the least-impulse ones: with the contact mode and dq fixed, an LP
  minimises sum(P_n + P_f) (``least_impulse``). Putting that cost into the MIQP instead makes SCIP branch
  hundreds of nodes (many modes tie in motion), so it is a second, cheap stage. Gamma is not regularised; at a
  contact without friction capacity it is arbitrary and meaningless.

Commanded actuated motion (from ``inputs.actuation``, per velocity index): where kp > 0 the command is a
position target and dq_a_bar = position_error = q_target - q, clipped to +-velocity_limit * h; elsewhere it is
a velocity command and dq_a_bar = h * velocity_target. Efforts, gains kd and joint damping are not used
(there is no dynamics); the reported ``actuation_force`` is the actuator force that holds the quasistatic
balance of the actuated dofs, u_a = -(J^T P)_a / h - tau_a.

Big-M values come from the problem's own scales (commanded motion, signed distances, weight, K times
commanded squeeze), times ``big_m_factor``; after each solve the engine checks whether a big-M bound is active
and, if so, raises it tenfold and re-solves (up to ``big_m_retries`` times); the raise is reported in
``stats.message`` and ``last_solve_info``.

Warm start (``_warm_start``, ``_best_start``): the previous step's contact mode (binaries of the contacts matched
by geometry pair and position; separated contacts with the canonical separated binaries), that mode with the
separated contacts the force bound presses closed, and, for each geometry pair with closed contacts, the latter
with the pair separated; the feasible one whose QP has the least objective is handed to the back-end as a
complete start (its CPU time is counted as solver time). The MIQP is still solved
to the gap limits (relative 1e-4, absolute 1e-4 scaled): the start only prunes.

Solvers (``contact_sim_ros/solvers/miqp.py``): DAQP's branch and bound (default, open source: QP relaxations,
dual active set), SCIP through pyscipopt (open source) and gurobipy when installed. When the chosen back-end
fails on a step (DAQP: search stopped by its time budget, iteration limit or cycling), ``fallback_solver``
(SCIP) re-solves it from the failed search's best mode, and the step message says so.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np
import pinocchio as pin

from ..errors import ConfigError, EngineError, unknown_choice
from ..geometry.contact_set import ContactSet
from ..solvers import lemke_kernels
from ..solvers.lemke import LemkeSolver
from ..solvers.miqp import (MIQP, MIQP_BACKENDS, MIQPSolution, ScipPersistent, daqp_fixed_mode, fixed_mode_start,
                            import_lp_solver, least_impulse_fixed_motion, polish_fixed_mode)
from .base import ContactEngine, SolverStats, SolverStatus, StepInputs, StepResult
from .registry import register_engine

# --------------------------------------------------------------------------------------------------------------
# Contact reduction: the points the quasistatic formulation needs (one per grasp pair, a support polygon per
# object-environment pair)
# --------------------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class ContactReduction:
    """A reduced ContactSet and the map back to the query's points.

    ``source_rep[i]`` is the reduced contact that stands for query point i and ``source_weight[i]`` its share
    (1 / n for the n points of a merged patch, 1 for a kept support point, 0 for a dropped one). Impulses are
    mapped back through the world frame, gamma_i = w_i R_i^T R_rep gamma_rep, so that the force and the moment of
    every pair are unchanged: the representative point of a merged patch is the patch's centroid.
    """

    contacts: ContactSet
    source_rep: np.ndarray       # (N,) int
    source_weight: np.ndarray    # (N,) float

    def expand_impulse(self, source: ContactSet, impulse: np.ndarray) -> np.ndarray:
        """(N, 3) contact-frame impulses on the query's points from the reduced set's (n, 3) (N*s)."""
        world = np.einsum("nij,nj->ni", self.contacts.rotation, impulse)[self.source_rep]
        world *= self.source_weight[:, None]
        return np.einsum("nji,nj->ni", source.rotation, world)


def reduce_contact_patches(contacts: ContactSet, free_joints: np.ndarray, max_support_points: int = 4,
                           grasp_points: int = 2) -> ContactReduction:
    """Reduce a query's contact points to what the quasistatic MIQP needs (paper section V-B: one contact per
    finger, four table contacts under the cylinder).

    * A pair that involves a robot link (a joint that is neither the world, 0, nor a free body's) is a grasp
      (or push) contact. Its patch becomes ``grasp_points`` points: 1 = the patch's centroid; 2 = the patch is
      split in two halves across its longest (principal) axis and each half becomes its centroid. A merged
      point has the patch's normal (the contact frame of its deepest point), the pair's closest signed distance
      (min phi over the patch, m: the pair's distance, as a signed-distance query gives it; the patch points'
      own distances differ by the curvature of the object across the pad, ~1.6 mm at the corners of a 2 cm pad
      on a 3 cm cylinder, and which corner coal reports deepest changes from step to step) and the material of
      its deepest point; its Jacobian is the mean
      of its points' world-frame Jacobians rotated into that frame, which is exactly the Jacobian of the
      centroid (the Jacobian is affine in the point). Two points per finger are the least that hold a grasped
      object against pivoting about the line through the two fingers' contacts (a line or face contact carries
      that moment, one point per finger cannot: the object then turns in the grasp under gravity).
    * Any other pair (object on the table, object on object) keeps its support polygon: at most
      ``max_support_points`` points, chosen by farthest-point sampling from the deepest point (4 of the 8 rim
      points of a standing cylinder, the 4 corners of a box face).
    ``free_joints``: Pinocchio joint ids of the free bodies.
    """
    n = contacts.size
    if n == 0:
        return ContactReduction(contacts, np.zeros(0, int), np.zeros(0))
    ja, jb = contacts.joint_a, contacts.joint_b
    robot = ((ja != 0) & ~np.isin(ja, free_joints)) | ((jb != 0) & ~np.isin(jb, free_joints))
    n_geom = int(max(contacts.geometry_a.max(), contacts.geometry_b.max())) + 1
    pair_code = contacts.geometry_a.astype(np.int64) * n_geom + contacts.geometry_b
    _, pair, count = np.unique(pair_code, return_inverse=True, return_counts=True)
    pair = pair.reshape(-1)
    n_pair = count.size
    phi = contacts.signed_distance
    points = contacts.point
    grasp_pair = np.zeros(n_pair, bool)
    grasp_pair[pair[robot]] = True
    keep = ~grasp_pair[pair] & (count[pair] <= max_support_points)
    # group = the merged point a grasp point belongs to (pair x half); the loops run over the few patches
    group = np.where(grasp_pair[pair], 2 * pair, -1)
    for p in np.flatnonzero(grasp_pair & (count > 1)).tolist():
        if grasp_points < 2:
            break
        idx = np.flatnonzero(pair == p)
        centred = points[idx] - points[idx].mean(axis=0)
        _, sv, vt = np.linalg.svd(centred, full_matrices=False)
        if sv[0] > 1e-6:                                  # split across the patch's longest (principal) axis
            group[idx] += (centred @ vt[0] > 0.0).astype(int)
    for p in np.flatnonzero(~grasp_pair & (count > max_support_points)).tolist():
        idx = np.flatnonzero(pair == p)
        pts = points[idx]
        chosen = [int(np.argmin(phi[idx]))]
        dist = np.linalg.norm(pts - pts[chosen[0]], axis=1)
        for _ in range(max_support_points - 1):
            k = int(np.argmax(dist))
            chosen.append(k)
            dist = np.minimum(dist, np.linalg.norm(pts - pts[k], axis=1))
        keep[idx[chosen]] = True
    in_grasp = group >= 0
    src = np.flatnonzero(in_grasp)
    groups, g_of_src, g_count = np.unique(group[src], return_inverse=True, return_counts=True)
    g_of_src = g_of_src.reshape(-1)
    n_kept, n_groups = int(keep.sum()), groups.size
    srt = np.lexsort((phi[src], g_of_src))                # by group, then by phi: each block starts deepest
    deepest = src[srt][np.searchsorted(g_of_src[srt], np.arange(n_groups))]
    # reduced set: the kept support points, then one point per grasp group (its deepest point's frame)
    rep_src = np.concatenate([np.flatnonzero(keep), deepest])
    m = rep_src.size
    rep_of_point = np.zeros(n, int)                       # dropped support points: weight 0
    weight = np.zeros(n)
    rep_of_point[keep] = np.arange(n_kept)
    weight[keep] = 1.0
    rep_of_point[src] = n_kept + g_of_src
    weight[src] = 1.0 / g_count[g_of_src]
    nv = contacts.jacobian.shape[1]
    point = points[rep_src].copy()
    jac = contacts.jacobian.reshape(n, 3, nv)[rep_src].copy()
    bias = contacts.velocity_bias.reshape(n, 3)[rep_src].copy()
    rotation = contacts.rotation[rep_src]
    if n_groups:
        rows = n_kept + np.arange(n_groups)
        w = weight[src]
        point[rows] = 0.0
        np.add.at(point, rep_of_point[src], w[:, None] * points[src])
        # world-frame Jacobians and biases of the patch points, averaged, rotated into the representative frame
        Jw = np.einsum("nij,njv->niv", contacts.rotation[src], contacts.jacobian.reshape(n, 3, nv)[src])
        bw = np.einsum("nij,nj->ni", contacts.rotation[src], contacts.velocity_bias.reshape(n, 3)[src])
        Jw_sum = np.zeros((n_groups, 3, nv))
        bw_sum = np.zeros((n_groups, 3))
        np.add.at(Jw_sum, g_of_src, w[:, None, None] * Jw)
        np.add.at(bw_sum, g_of_src, w[:, None] * bw)
        jac[rows] = np.einsum("nji,njv->niv", rotation[rows], Jw_sum)
        bias[rows] = np.einsum("nji,nj->ni", rotation[rows], bw_sum)
    phi_rep = phi[rep_src].copy()
    if n_groups:
        pair_min = np.full(n_pair, np.inf)
        np.minimum.at(pair_min, pair, phi)
        phi_rep[n_kept:] = pair_min[pair[deepest]]
    reduced = ContactSet(contacts.geometry_a[rep_src], contacts.geometry_b[rep_src], contacts.joint_a[rep_src],
                         contacts.joint_b[rep_src], point, contacts.normal[rep_src], phi_rep, rotation,
                         jac.reshape(3 * m, nv), bias.reshape(-1), contacts.stiffness[rep_src],
                         contacts.dissipation[rep_src], contacts.friction[rep_src], contacts.restitution[rep_src])
    return ContactReduction(reduced, rep_of_point, weight)


# --------------------------------------------------------------------------------------------------------------
# The step's data in the paper's notation
# --------------------------------------------------------------------------------------------------------------


@dataclass
class QuasistaticSolveInfo:
    """Per-step record of the last solve (for benchmarks and diagnostics)."""

    backend: str = ""
    solver_time_s: float = 0.0    # back-end's own time summed over re-solves (Gurobi Runtime / SCIP time)
    n_binaries: int = 0
    n_contacts: int = 0
    big_m_raises: int = 0
    time_limited: bool = False    # the solve stopped at time_limit_s with a feasible, maybe suboptimal, mode
    nodes: int = 0
    build_time_s: float = 0.0     # CPU time of building the back-end model in Python (not in solver_time_s)
    warm_start_time_s: float = 0.0   # CPU time of _best_start (included in solver_time_s)
    warm_start_feasible: bool = False  # a start candidate (see _best_start) was feasible for this step's MIQP
    fallback: str = ""            # why the fallback back-end solved this step's MIQP ("" if it did not)
    objective: float = math.nan   # ||dq_a - dq_a_bar||^2 (m^2 or rad^2, mixed)
    phi_bar: np.ndarray = field(default_factory=lambda: np.zeros(0))   # hypothetical penetration (m)


def friction_direction_coefficients(nd: int) -> np.ndarray:
    """(nd, 2) coefficients of the nd unit directions in the tangent basis (t1, t2): d_j = cos t1 + sin t2."""
    angles = 2.0 * np.pi * np.arange(nd) / nd
    return np.stack([np.cos(angles), np.sin(angles)], axis=1)


class _QuasistaticBase(ContactEngine):
    """Shared assembly: contact Jacobians split into normal / polyhedral-friction rows, commands, tau."""

    dynamic = False
    accepts_effort_commands = False      # efforts are not used (module docstring): pure effort commands rejected
    uses_gravity_force = True            # applied_force removes g(q) from the simulator's -C v - g

    def __init__(self, model, options=None):
        super().__init__(model, options)
        nd = self.options.friction_directions
        if not isinstance(nd, (int, np.integer)) or nd < 2 or nd % 2:
            raise ConfigError(f"engine {self.name!r}: option friction_directions must be an even integer >= 2 "
                              f"(balanced polyhedral cone, paper eq. 7), got {nd!r}")
        self._dcoef = friction_direction_coefficients(int(nd))
        self._actuated = np.asarray(model.actuated, bool)
        self._ia = np.flatnonzero(self._actuated)
        self._iu = np.flatnonzero(~self._actuated)
        vlim = np.full(model.nv, np.inf)
        if len(model.joint_v_index):
            vlim[np.asarray(model.joint_v_index, int)] = model.velocity_limit
        self._velocity_limit = vlim
        self._pin_data = pin.Data(model.pin_model)
        self._zero_v = np.zeros(model.nv)

    # -- commanded motion ---------------------------------------------------------------------------------------
    def commanded_increment(self, inputs: StepInputs) -> np.ndarray:
        """dq_bar (nv,): position_error (clipped to +-velocity_limit h) where kp > 0, else h velocity_target;
        zero on unactuated dofs (m or rad)."""
        act, h = inputs.actuation, inputs.dt
        step_limit = self._velocity_limit * h
        dq_bar = np.where(act.kp > 0.0, np.clip(act.position_error, -step_limit, step_limit),
                          h * act.velocity_target)
        dq_bar[~self._actuated] = 0.0
        return dq_bar

    def applied_force(self, inputs: StepInputs) -> np.ndarray:
        """tau (nv,) = -g(q) + J^T f_ext: inputs.generalized_force without the velocity product -C(q, v) v
        (a quasistatic state has no velocity; the simulator's v is only last step's dq / h)."""
        tau = np.array(inputs.generalized_force, dtype=float)
        if np.any(inputs.v != 0.0):
            cv_plus_g = pin.rnea(self.model.pin_model, self._pin_data, inputs.q, inputs.v, self._zero_v)
            tau += cv_plus_g - inputs.gravity_force
        return tau

    def _step_start(self, inputs: StepInputs, backend: str):
        """What every quasistatic step starts with: (dq_bar, tau, rows) from the commanded increment and the applied
        force, a fresh ``last_solve_info`` for ``backend``, and with contacts ``rows`` = (Jn, Jf, bias_f, phi),
        phi = signed distance + h bias_n (m, includes prescribed surface motion); ``rows`` is None without contacts
        (the step is then ``_no_contact_step``)."""
        dq_bar = self.commanded_increment(inputs)
        tau = self.applied_force(inputs)
        self.last_solve_info = QuasistaticSolveInfo(backend=backend)
        if inputs.contacts.size == 0:
            return dq_bar, tau, None
        Jn, Jf, bias_n, bias_f = self.contact_rows(inputs)
        return dq_bar, tau, (Jn, Jf, bias_f, inputs.contacts.signed_distance + inputs.dt * bias_n)

    def contact_rows(self, inputs: StepInputs):
        """(Jn (nc, nv), Jf (nc nd, nv), bias_n (nc,), bias_f (nc nd,)): normal rows (eq. 3) and polyhedral
        friction rows Jf_i = d_i^T J_c_i (eq. 4), v-space (per unit tangent increment, m per m or rad)."""
        c = inputs.contacts
        nc, nv = c.size, self.model.nv
        J = c.jacobian.reshape(nc, 3, nv)
        bias = c.velocity_bias.reshape(nc, 3)
        Jn = J[:, 2, :]
        Jf = np.einsum("jk,nkv->njv", self._dcoef, J[:, :2, :]).reshape(nc * len(self._dcoef), nv)
        bias_f = (bias[:, :2] @ self._dcoef.T).reshape(-1)
        return Jn, Jf, bias[:, 2].copy(), bias_f

    def contact_impulse(self, Pn: np.ndarray, Pf: np.ndarray) -> np.ndarray:
        """(nc, 3) contact-frame impulses (t1, t2, n) in N*s from normal and per-direction friction impulses."""
        nd = len(self._dcoef)
        out = np.empty((Pn.size, 3))
        out[:, :2] = Pf.reshape(-1, nd) @ self._dcoef
        out[:, 2] = Pn
        return out

    def _result(self, inputs, dq, Pn, Pf, tau, status, message, iterations=0, residual=0.0):
        c = inputs.contacts
        h = inputs.dt
        gamma = self.contact_impulse(Pn, Pf) if c.size else np.zeros((0, 3))
        gen_impulse = c.jacobian.T @ gamma.reshape(-1) if c.size else np.zeros(self.model.nv)
        actuation = np.zeros(self.model.nv)
        actuation[self._ia] = -gen_impulse[self._ia] / h - tau[self._ia]
        return StepResult(v_next=dq / h, contact_impulse=gamma, generalized_contact_force=gen_impulse / h,
                          actuation_force=actuation,
                          stats=SolverStats(status=status, iterations=iterations, residual=residual,
                                            message=message))

    def _failure(self, inputs, status, message):
        """Keep the state (dq = 0, no impulses) and report a non-OK status with the sim time."""
        nc = inputs.contacts.size
        nd = len(self._dcoef)
        return self._result(inputs, np.zeros(self.model.nv), np.zeros(nc), np.zeros(nc * nd),
                            np.zeros(self.model.nv), status, f"t = {inputs.t:.6g} s: {message}")

    def _no_contact_step(self, inputs, dq_bar, tau):
        """Without contacts the actuated dofs follow the command; unactuated ones must be force-free."""
        loaded = np.abs(tau[self._iu]) > 1e-9 * max(1.0, float(np.abs(tau).max(initial=0.0)))
        if np.any(loaded):
            return self._failure(inputs, SolverStatus.INFEASIBLE, self._unsupported_message())
        return self._result(inputs, dq_bar.copy(), np.zeros(0), np.zeros(0), tau, SolverStatus.CONVERGED, "")

    def _unsupported_message(self) -> str:
        names = [body.name for body in self.model.free_bodies]
        return (f"{self.name}: no quasistatic equilibrium: a free body ({', '.join(names) or 'unactuated dof'}) "
                "is loaded (gravity) but has no contact that can hold it; likely cause: the supporting surface is "
                "farther than the contact margin (a quasistatic object cannot fall freely: raise the scene's "
                "contact_margin to cover the largest drop)")


# --------------------------------------------------------------------------------------------------------------
# MIQP engine
# --------------------------------------------------------------------------------------------------------------


def _with_contact_modes(z: np.ndarray, nc: int, nd: int, idx: np.ndarray, separated: bool) -> np.ndarray:
    """A copy of the binaries z = [z_n (nc), z_f (nc nd), z_c (nc)] with contacts idx set to the canonical
    separated mode (z_n = 1: P_n = 0; z_f = 1: P_f = 0, rho free; z_c = 0: s = 0 holds, Gamma free) or to
    closed and sticking (z_n = 0: phi_next = 0; z_f = 0: rho = 0; z_c = 1: Gamma = 0)."""
    z = z.copy()
    z[idx] = 1.0 if separated else 0.0
    z[nc:nc + nc * nd].reshape(nc, nd)[idx] = 1.0 if separated else 0.0
    z[nc + nc * nd + idx] = 0.0 if separated else 1.0
    return z


@register_engine
class QuasistaticMIQPEngine(_QuasistaticBase):
    """Quasistatic MIQP time stepping (Pang & Tedrake 2018, eq. 23). See the module docstring."""

    name = "quasistatic_miqp"
    MATCH_DISTANCE = 0.01                  # m: a contact point moves less than this per step to keep its key
    description = "quasistatic time stepping as an MIQP (Pang & Tedrake 2018): velocity-commanded robot"

    @dataclass
    class Options:
        friction_directions: int = 4            # nd per contact (even): polyhedral cone, eq. 7
        hypothetical_penetration_stiffness: float | None = None   # K (N/m), eq. 22; None: pair stiffness
        delayed_force_bound: bool = False       # use phi_bar of the previous step (section V-B)
        solver: str = "daqp"                    # MIQP back-end: 'daqp', 'scip' (pyscipopt) or 'gurobi' (gurobipy)
        # back-end that re-solves an MIQP on which `solver` failed (DAQP: cycling or iteration limit in a
        # degenerate node), from the failed solve's best mode; None: the step fails instead
        fallback_solver: str | None = "scip"
        big_m_factor: float = 10.0              # big-M = factor x the problem's own scale
        big_m_retries: int = 3                  # times a big-M value is raised tenfold when found active
        time_limit_s: float = 10.0              # per MIQP solve
        accept_time_limit_solution: bool = True  # at the time limit use the best (feasible) mode found so far
        unactuated_regularization: float = 1e-4  # eps of eps ||dq_u||^2 when choosing the contact mode
        least_impulse: bool = True              # among equal motions, report the least-impulse forces (LP)
        warm_start: bool = True                 # start from the previous step's contact mode
        # ... as a complete solution: the QP optimum of the best start candidate (_best_start; its CPU time is
        # counted in the solver time), the back-end's incumbent. False: only the binaries (partial solution)
        complete_warm_start: bool = True
        solver_parameters: dict = field(default_factory=dict)   # passed to the back-end (SCIP / Gurobi names)
        polish: bool = True                     # re-solve the QP of the optimal contact mode exactly (KKT)
        # one contact per robot-object pair (patch centroid, closest distance), at most max_support_points per
        # object-environment pair (reduce_contact_patches); the impulses are mapped back to the query's points
        reduce_contacts: bool = True
        max_support_points: int = 4
        grasp_points: int = 2                   # points per robot-object patch: 1 (centroid) or 2 (see above)
        # joint name -> weight w_j of its term in the objective sum_j w_j (dq_j - dq_bar_j)^2 (default 1, the
        # paper's unweighted norm). A large weight on the arm joints makes the arm the stiff part of the robot:
        # a blocked finger then stops instead of being pushed on by turning the arm (see the docs page)
        command_weights: dict = field(default_factory=dict)

    def __init__(self, model, options=None):
        super().__init__(model, options)
        import_lp_solver()                  # scipy.optimize now (0.3-0.8 s), not in the first step
        o = self.options
        if o.solver not in MIQP_BACKENDS:
            if not MIQP_BACKENDS:
                raise EngineError(f"engine {self.name!r} needs an MIQP solver: pip install pyscipopt "
                                  "(or gurobipy)")
            raise ConfigError(f"engine {self.name!r}: " + unknown_choice("solver", str(o.solver), MIQP_BACKENDS)
                              + " (an MIQP back-end is listed only when its Python package is installed)")
        K = o.hypothetical_penetration_stiffness
        if K is not None and not (np.isfinite(K) and K >= 0):
            raise ConfigError(f"engine {self.name!r}: hypothetical_penetration_stiffness must be >= 0 N/m or "
                              f"null (use the contact pair's stiffness), got {K!r}")
        for key in ("big_m_factor", "time_limit_s"):
            if not getattr(o, key) > 0:
                raise ConfigError(f"engine {self.name!r}: {key} must be > 0, got {getattr(o, key)!r}")
        if not (isinstance(o.max_support_points, (int, np.integer)) and o.max_support_points >= 3):
            raise ConfigError(f"engine {self.name!r}: max_support_points must be an integer >= 3 (a support "
                              f"polygon), got {o.max_support_points!r}")
        if o.grasp_points not in (1, 2):
            raise ConfigError(f"engine {self.name!r}: grasp_points must be 1 or 2 (points per robot-object "
                              f"contact patch), got {o.grasp_points!r}")
        self._command_weight = np.ones(model.nv)
        for joint, weight in dict(o.command_weights).items():
            j = model.joint_index(joint)
            if not (np.isfinite(weight) and weight > 0):
                raise ConfigError(f"engine {self.name!r}: command_weights[{joint!r}] must be > 0, got {weight!r}")
            self._command_weight[model.joint_v_index[j]] = float(weight)
        self._free_joints = np.array([body.joint_id for body in model.free_bodies], dtype=int)
        self.last_reduction: ContactReduction | None = None
        if o.fallback_solver is not None and o.fallback_solver not in MIQP_BACKENDS:
            raise ConfigError(f"engine {self.name!r}: " + unknown_choice("fallback_solver", str(o.fallback_solver),
                                                                         MIQP_BACKENDS) + " (or null)")
        # SCIP: one persistent model per engine (and role), updated in place step to step (ScipPersistent)
        def backend(name):
            return ScipPersistent() if name == "scip" else MIQP_BACKENDS[name]
        self._solve = backend(o.solver)
        self._fallback = None
        if o.fallback_solver is not None and o.fallback_solver != o.solver:
            self._fallback = backend(o.fallback_solver)
        self.last_solve_info = QuasistaticSolveInfo(backend=o.solver)
        self.reset()

    def reset(self) -> None:
        self._prev_modes: dict = {}        # contact key -> binaries (z_n, z_f (nd), z_c)
        self._prev_phi_bar: dict = {}      # contact key -> hypothetical penetration phi_bar (m)
        self._prev_points: dict = {}       # geometry pair -> (labels, world points (m)) of the last solved step

    def _contact_keys(self, contacts) -> list:
        """Match contacts across steps: key (geometry A, geometry B, label); within a pair the points are matched
        to the previous step's points of that pair by nearest world position (greedy, within
        ``MATCH_DISTANCE``), new points get new labels. The order of a patch's points changes between queries,
        so matching by occurrence would hand one point's delayed force bound (and mode) to another."""
        by_pair: dict = {}
        for i, ab in enumerate(zip(contacts.geometry_a.tolist(), contacts.geometry_b.tolist())):
            by_pair.setdefault(ab, []).append(i)
        keys = [None] * contacts.size
        points = {}
        for ab, idx in by_pair.items():
            pts = contacts.point[idx]
            labels = [None] * len(idx)
            prev = self._prev_points.get(ab)
            next_label = 0
            if prev is not None:
                prev_labels, prev_pts = prev
                d = np.linalg.norm(pts[:, None, :] - prev_pts[None, :, :], axis=2)
                used = set()
                for flat in np.argsort(d, axis=None).tolist():
                    i, j = divmod(flat, len(prev_labels))
                    if d[i, j] > self.MATCH_DISTANCE:
                        break
                    if labels[i] is None and j not in used:
                        labels[i] = prev_labels[j]
                        used.add(j)
                next_label = max(prev_labels) + 1
            for i in range(len(idx)):
                if labels[i] is None:
                    labels[i] = next_label
                    next_label += 1
            for i, label in zip(idx, labels):
                keys[i] = (ab[0], ab[1], label)
            points[ab] = (labels, pts)
        self._current_points = points
        return keys

    def _do_step(self, inputs: StepInputs) -> StepResult:
        if not self.options.reduce_contacts or inputs.contacts.size == 0:
            return self._solve_step(inputs)
        reduction = reduce_contact_patches(inputs.contacts, self._free_joints, self.options.max_support_points,
                                           self.options.grasp_points)
        result = self._solve_step(replace(inputs, contacts=reduction.contacts))
        result.contact_impulse = reduction.expand_impulse(inputs.contacts, result.contact_impulse)
        self.last_reduction = reduction
        return result

    def _solve_step(self, inputs: StepInputs) -> StepResult:
        o = self.options
        c = inputs.contacts
        h = inputs.dt
        nv, nc, nd = self.model.nv, c.size, len(self._dcoef)
        ia, iu = self._ia, self._iu
        dq_bar, tau, rows = self._step_start(inputs, o.solver)
        if rows is None:
            return self._no_contact_step(inputs, dq_bar, tau)
        Jn, Jf, bias_f, phi = rows
        nf = nc * nd
        K = (np.full(nc, float(o.hypothetical_penetration_stiffness))
             if o.hypothetical_penetration_stiffness is not None else np.asarray(c.stiffness, float))
        mu = np.asarray(c.friction, float)
        keys = self._contact_keys(c)
        # phi_bar without the dq_u part: phi + Jn_a dq_a_bar (eq. 21)
        phi_bar_a = phi + Jn[:, ia] @ dq_bar[ia]
        if o.delayed_force_bound:
            prev = np.array([self._prev_phi_bar.get(k, np.inf) for k in keys])
            bound_const = np.where(np.isfinite(prev), prev, np.inf)   # inf: no bound on new contacts
        # ---------------- scales (for conditioning and big-M) ----------------
        L = max(float(np.abs(dq_bar).max(initial=0.0)), 1e-4)       # length scale, m
        F = max(float(np.abs(tau[iu]).max(initial=0.0)),
                float((K * np.maximum(0.0, -np.minimum(phi_bar_a, 0.0))).max(initial=0.0)), 1e-6)
        if o.delayed_force_bound:
            F = max(F, float((K * np.maximum(0.0, -np.where(np.isfinite(bound_const), bound_const, 0.0)))
                             .max(initial=0.0)))
        S = h * F                                                   # impulse scale, N*s
        factor = float(o.big_m_factor)
        reach = factor * (1.0 + float(np.abs(phi).max()) / L + float(np.abs(dq_bar).max()) / L)  # |dq'| bound
        M = {"dq": reach, "P": factor * 2.0 * max(1.0, nc / 2.0)}
        M["Gamma"] = float(np.abs(Jf).sum(axis=1).max()) * M["dq"] + 1.0
        raises = 0
        z_start = self._warm_start(keys, phi) if o.warm_start else None
        total_time, nodes = 0.0, 0
        while True:
            problem, layout = self._assemble(inputs, Jn, Jf, bias_f, phi, phi_bar_a, dq_bar, tau, K, mu, L, S, M,
                                             bound_const if o.delayed_force_bound else None)
            problem.z_start = z_start
            problem.time_limit_s = o.time_limit_s
            problem.params = o.solver_parameters
            if z_start is not None and o.complete_warm_start:
                cpu = time.process_time()
                # contacts the force bound of eq. 23f presses (P_n > 0 demanded): delayed, the previous step's
                # phi_bar < 0; otherwise phi_bar_a < 0 (the robot's commanded motion alone would penetrate)
                pressed = ((bound_const if o.delayed_force_bound else phi_bar_a) < -1e-9) & (K > 0.0)
                problem.z_start, problem.x_start = self._best_start(problem, z_start, keys, pressed)
                ws_time = time.process_time() - cpu
                total_time += ws_time                      # counted as solver time: it is part of the solve
                self.last_solve_info.warm_start_time_s += ws_time
                self.last_solve_info.warm_start_feasible = problem.x_start is not None
            sol = self._solve(problem)
            if sol.status == "error" and self._fallback is not None:
                total_time += sol.solver_time_s
                self.last_solve_info.fallback = (f"t = {inputs.t:.6g} s: {o.solver}: {sol.message}; re-solved with "
                                                 f"{o.fallback_solver}")
                if sol.x is not None:          # the failed search's best mode as the fallback's complete start
                    problem.x_start, problem.z_start = sol.x, sol.z
                problem.params = {}
                sol = self._fallback(problem)
            total_time += sol.solver_time_s
            self.last_solve_info.build_time_s += sol.build_time_s
            nodes += sol.nodes
            if sol.status == "infeasible" and raises < o.big_m_retries:
                for key in M:            # too small a big-M can cut off every solution: raise all, re-solve
                    M[key] *= 10.0
                raises += 1
                continue
            if sol.status != "optimal" and not (sol.status == "time_limit" and sol.x is not None):
                break
            if o.polish:
                polish_q = problem.qdiag.copy()
                polish_q[iu] = 1e-9            # weak regulariser: no lag of carried objects (see Options)
                sol.x = polish_fixed_mode(problem, sol.x, sol.z, qdiag=polish_q)
            if o.least_impulse:
                cost = np.zeros(problem.c.size)
                cost[layout["Pn"]] = 1.0
                cost[layout["Pf"]] = 1.0
                sol.x = least_impulse_fixed_motion(problem, sol.x, sol.z, nv, cost)
            active = self._active_big_m(sol, layout, M)
            if not active or raises >= o.big_m_retries or sol.status == "time_limit":
                break
            for key in active:
                M[key] *= 10.0
            raises += 1
            z_start = sol.z
        info = self.last_solve_info
        info.solver_time_s, info.nodes, info.big_m_raises = total_time, nodes, raises
        info.n_binaries, info.n_contacts = problem.n_bin, nc
        if sol.status == "infeasible":
            return self._failure(inputs, SolverStatus.INFEASIBLE,
                                 "quasistatic MIQP infeasible: no motion keeps the free bodies in force balance "
                                 f"(eq. 23a) without penetration (also with big-M raised {10 ** raises}x); likely "
                                 "cause: an object's support is beyond the contact margin, or the "
                                 "hypothetical-penetration bound (K) demands more force than friction can balance")
        if sol.status == "time_limit" and (sol.x is None or not o.accept_time_limit_solution):
            return self._failure(inputs, SolverStatus.MAX_ITERATIONS,
                                 f"quasistatic MIQP: solver time limit {o.time_limit_s} s reached without a solution "
                                 f"({problem.n_bin} binaries); raise time_limit_s or use fewer friction directions")
        suboptimal = sol.status == "time_limit"
        if suboptimal:
            sol.status = "optimal"
        if sol.status != "optimal":
            return self._failure(inputs, SolverStatus.FAILED, f"quasistatic MIQP solver failed: {sol.message}")
        x = sol.x
        dq = x[layout["dq"]] * L
        Pn = np.maximum(x[layout["Pn"]], 0.0) * S
        Pf = np.maximum(x[layout["Pf"]], 0.0) * S
        # force-balance residual (N or N*m), eq. 23a
        residual = float(np.abs(Jn[:, iu].T @ Pn + Jf[:, iu].T @ Pf + h * tau[iu]).max(initial=0.0)) / h
        da = dq[ia] - dq_bar[ia]
        info.objective = float(self._command_weight[ia] @ (da * da))
        info.phi_bar = phi + Jn[:, iu] @ dq[iu] + Jn[:, ia] @ dq_bar[ia]
        # carry the contact mode and phi_bar to the next step
        zn, zf, zc = sol.z[:nc], sol.z[nc:nc + nf].reshape(nc, nd), sol.z[nc + nf:]
        self._prev_modes = {k: (zn[i], zf[i].copy(), zc[i]) for i, k in enumerate(keys)}
        self._prev_phi_bar = {k: float(info.phi_bar[i]) for i, k in enumerate(keys)}
        self._prev_points = self._current_points
        message = ""
        if suboptimal:
            info.time_limited = True
            message = (f"t = {inputs.t:.6g} s: MIQP time limit {o.time_limit_s} s reached ({problem.n_bin} binaries): "
                       "the best contact mode found is used (it satisfies eq. 23; the command may not be followed "
                       "as closely as possible). ")
        if info.fallback:
            message += info.fallback + ". "
        if raises:
            message += (f"t = {inputs.t:.6g} s: big-M bound was active; raised {raises} time(s) "
                       f"(dq {M['dq'] * L:.3g}, impulse {M['P'] * S:.3g} N*s) and re-solved")
        return self._result(inputs, dq, Pn, Pf, tau, SolverStatus.CONVERGED, message,
                            iterations=nodes, residual=residual)

    # -- warm start ---------------------------------------------------------------------------------------------
    def _warm_start(self, keys, phi) -> np.ndarray:
        """Binaries of the previous step's contact mode; new contacts: separated if phi > 0 else sticking.

        A separated contact (z_n = 1: P_n = 0) gets the canonical separated binaries z_f = 1 (P_f = 0, rho free)
        and z_c = 0 (s = mu P_n - E^T P_f = 0 holds, Gamma free), whatever the solver returned for it: where
        P_n = P_f = 0 and rho = 0 both binaries satisfy eq. 23, but z_f = 0 / z_c = 1 would pin the contact's
        sliding rho = E Gamma + Jf dq to zero, so the next step's start forbids any tangential motion there (on
        the section V-B runs such starts were infeasible or 3000x worse than the optimum at the lift-off step)."""
        nd = len(self._dcoef)
        nc = len(keys)
        zn, zf, zc = np.empty(nc), np.empty((nc, nd)), np.empty(nc)
        for i, k in enumerate(keys):
            prev = self._prev_modes.get(k)
            if prev is not None:
                zn[i], zf[i], zc[i] = prev
            else:   # separated if phi > 0 (z_n = 1, P_n = 0); else sticking (set just below)
                zn[i] = 1.0 if phi[i] > 0.0 else 0.0
                zf[i] = 0.0
                zc[i] = 1.0
        z = np.concatenate([zn, zf.reshape(-1), zc])
        return _with_contact_modes(z, nc, nd, np.flatnonzero(zn == 1.0), separated=True)

    def _best_start(self, problem: MIQP, z_prev: np.ndarray, keys, pressed: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray | None]:
        """The complete start: the feasible candidate mode whose QP (fixed_mode_start) has the least objective.
        Candidates: the previous mode; if some of its separated contacts are ``pressed`` (the force bound of
        eq. 23f demands P_n > 0 there: the robot squeezes into them), that mode with them closed and sticking;
        and, for each geometry pair with closed contacts, the latter with that pair separated (canonical
        binaries, see _warm_start). The alternatives catch the steps where contacts open or close together: at
        lift-off the previous mode keeps the object on the table, and its QP (the arm cannot follow) was 3700x
        above the optimum, an incumbent that DAQP's depth-first search did not improve in 1 s (48 binaries),
        while "table contacts separated" is the optimum; when the fingers touch as the lift starts (the paper's
        12 s trajectory), the previous mode (fingers still separated) contradicts the force bound and only
        "fingers closed, table separated" is a good start. Returns (z, x), or (z_prev, None) if no candidate is
        feasible."""
        nd = len(self._dcoef)
        nc = len(keys)
        candidates = [z_prev]
        base = z_prev
        if pressed is not None:
            close = np.flatnonzero(pressed & (z_prev[:nc] == 1.0))
            if close.size:
                base = _with_contact_modes(z_prev, nc, nd, close, separated=False)
                candidates.append(base)
        pairs: dict = {}
        for i, k in enumerate(keys):
            if base[i] == 0.0:
                pairs.setdefault(k[:2], []).append(i)
        candidates += [_with_contact_modes(base, nc, nd, np.array(idx), separated=True) for idx in pairs.values()]
        best, best_x, best_f = z_prev, None, np.inf
        for k, z in enumerate(candidates):
            # the alternatives only through DAQP (~0.1 ms each; fixed_mode_start's LP path costs ~3 ms)
            x = fixed_mode_start(problem, z) if k == 0 or "daqp" not in MIQP_BACKENDS else daqp_fixed_mode(problem, z)
            if x is not None:
                f = problem.objective(x)
                if best_x is None or f < best_f - 1e-9 * (1.0 + abs(best_f)):
                    best, best_x, best_f = z, x, f
        return best, best_x

    # -- assembly (scaled units: dq' = dq / L, P' = P / S, Gamma' = Gamma / L) ------------------------------------
    def _assemble(self, inputs, Jn, Jf, bias_f, phi, phi_bar_a, dq_bar, tau, K, mu, L, S, M, bound_const):
        h = inputs.dt
        nv = self.model.nv
        nc, nf = Jn.shape[0], Jf.shape[0]
        nd = nf // nc
        ia, iu = self._ia, self._iu
        o = self.options
        # continuous x = [dq' (nv), Pn' (nc), Pf' (nf), Gamma' (nc)]; binaries z = [z_n (nc), z_f (nf), z_c (nc)]
        i_dq, i_pn = slice(0, nv), slice(nv, nv + nc)
        i_pf, i_g = slice(nv + nc, nv + nc + nf), slice(nv + nc + nf, nv + 2 * nc + nf)
        nx, nz = nv + 2 * nc + nf, 2 * nc + nf
        E = np.kron(np.eye(nc), np.ones((nd, 1)))                  # (nf, nc), eq. 18
        # complementarity rows r = G x + g (eq. 23b), paired with variables y = x[idx]
        G = np.zeros((nz, nx))
        g = np.zeros(nz)
        G[:nc, i_dq] = Jn                                          # phi_next / L
        g[:nc] = phi / L
        G[nc:nc + nf, i_dq] = Jf                                   # rho / L
        G[nc:nc + nf, i_g] = E
        g[nc:nc + nf] = h * bias_f / L
        G[nc + nf:, i_pn] = np.diag(mu)                            # s / S
        G[nc + nf:, i_pf] = -E.T
        pair_var = np.concatenate([np.arange(nv, nv + nc), np.arange(nv + nc, nv + nc + nf),
                                   np.arange(nv + nc + nf, nx)])
        # big-M of each row (the bound on r when z = 1) and of each variable (when z = 0)
        M_row = np.concatenate([np.abs(phi) / L + np.abs(Jn).sum(axis=1) * M["dq"],
                                np.abs(Jf).sum(axis=1) * M["dq"] + M["Gamma"],
                                mu * M["P"]])
        M_var = np.concatenate([np.full(nc + nf, M["P"]), np.full(nc, M["Gamma"])])
        Xsel = np.zeros((nz, nx))
        Xsel[np.arange(nz), pair_var] = 1.0
        A_ub = [-G, G, Xsel]
        B_ub = [np.zeros((nz, nz)), -np.diag(M_row), np.diag(M_var)]
        b_ub = [g, -g, M_var]
        # hypothetical-penetration bound (eq. 23f): P_n / h >= -K phi_bar
        Kh = K * h / S
        if bound_const is None:
            rows = np.zeros((nc, nx))
            rows[:, i_pn] = -np.eye(nc)
            rows[:, iu] = -(Kh * L)[:, None] * Jn[:, iu]
            A_ub.append(rows)
            B_ub.append(np.zeros((nc, nz)))
            b_ub.append(Kh * phi_bar_a)
        else:
            bounded = np.isfinite(bound_const) & (bound_const < 0.0) & (K > 0)
            if np.any(bounded):
                idx = np.flatnonzero(bounded)
                rows = np.zeros((idx.size, nx))
                rows[np.arange(idx.size), nv + idx] = -1.0
                A_ub.append(rows)
                B_ub.append(np.zeros((idx.size, nz)))
                b_ub.append(Kh[idx] * bound_const[idx])
        # force balance on the unactuated dofs (eq. 23a), divided by S
        A_eq = np.zeros((iu.size, nx))
        A_eq[:, i_pn] = Jn[:, iu].T
        A_eq[:, i_pf] = Jf[:, iu].T
        b_eq = -h * tau[iu] / S
        # objective ||dq_a' - dq_a_bar'||^2 + eps ||dq_u'||^2 + eps_P sum(P'), >= 0 (const = ||dq_a_bar'||^2)
        qdiag = np.zeros(nx)
        cvec = np.zeros(nx)
        w = self._command_weight[ia]
        qdiag[ia] = w
        cvec[ia] = -2.0 * w * dq_bar[ia] / L
        qdiag[iu] = o.unactuated_regularization
        lb = np.concatenate([np.full(nv, -M["dq"]), np.zeros(2 * nc + nf)])
        ub = np.concatenate([np.full(nv, M["dq"]), np.full(nc + nf, M["P"]), np.full(nc, M["Gamma"])])
        problem = MIQP(qdiag, cvec, A_eq, b_eq, np.vstack(A_ub), np.vstack(B_ub), np.concatenate(b_ub), lb, ub, nz,
                       const=float(w @ (dq_bar[ia] / L) ** 2))
        layout = {"dq": i_dq, "Pn": i_pn, "Pf": i_pf, "Gamma": i_g, "G": G, "g": g, "M_row": M_row,
                  "M_var": M_var, "pair_var": pair_var, "mu": mu}
        return problem, layout

    @staticmethod
    def _active_big_m(sol: MIQPSolution, layout, M) -> list:
        """Which big-M classes bind at the solution (value within 0.1 % of its big-M). Gamma and the sliding
        rows rho of a contact without normal impulse are ignored: there Gamma is free and meaningless."""
        x = sol.x
        active = set()
        tol = 1e-3
        Pn = x[layout["Pn"]]
        nc = Pn.size
        nd = x[layout["Pf"]].size // nc
        loaded = layout["mu"] * Pn > 1e-9 * M["P"]        # friction capacity > 0: Gamma means something
        if np.any(np.abs(x[layout["dq"]]) >= (1 - tol) * M["dq"]):
            active.add("dq")
        P = np.concatenate([Pn, x[layout["Pf"]]])
        if np.any(P >= (1 - tol) * M["P"]):
            active.add("P")
        if np.any(x[layout["Gamma"]][loaded] >= (1 - tol) * M["Gamma"]):
            active.add("Gamma")
        r = layout["G"] @ x + layout["g"]
        hit = (r >= (1 - tol) * layout["M_row"]) & (layout["M_row"] > 0.0)
        hit[nc:nc + nc * nd] &= np.repeat(loaded, nd)
        if np.any(hit[:nc + nc * nd]):
            active.add("dq")
        if np.any(hit[nc + nc * nd:]):
            active.add("P")
        return sorted(active)


# --------------------------------------------------------------------------------------------------------------
# Trinkle's LCP baseline (paper section III / ref. [14])
# --------------------------------------------------------------------------------------------------------------


@register_engine
class QuasistaticLCPEngine(_QuasistaticBase):
    """Trinkle-style quasistatic time stepping as an LCP (the baseline of Pang & Tedrake, section III).

    The actuated increment is substituted by the command, dq_a = dq_a_bar (section IV-B), there is no objective
    and no force lower bound. Unknowns: dq_u (free) and the impulses. The force balance (eq. 8) is the
    equality pair of a mixed LCP, turned into a standard LCP by splitting dq_u = dq_u+ - dq_u- (>= 0):

        x = [P_n, P_f, Gamma, dq_u+, dq_u-],   w = M x + q >= 0,  x >= 0,  x^T w = 0, with
        w_n = Jn_u (dq_u+ - dq_u-) + phi + Jn_a dq_a_bar                 _|_ P_n     (eqs. 12-13)
        w_f = E Gamma + Jf_u (dq_u+ - dq_u-) + Jf_a dq_a_bar             _|_ P_f     (eq. 16)
        w_s = U P_n - E^T P_f                                           _|_ Gamma   (eq. 17)
        w_+ = -(Jn_u^T P_n + Jf_u^T P_f) - h tau_u  (= 0 with w_-)       _|_ dq_u+   (eq. 8)
        w_- =  (Jn_u^T P_n + Jf_u^T P_f) + h tau_u                       _|_ dq_u-

    solved by Lemke's method (contact_sim_ros.solvers.lemke). M is copositive (x^T M x = Gamma^T U P_n), so a
    ray termination means the LCP has no solution: typically the commanded motion penetrates an object that
    cannot move out of the way (the MIQP engine exists for that case).
    """

    name = "quasistatic_lcp"
    description = "Trinkle's quasistatic LCP time stepping (baseline of the MIQP engine), Lemke's method"
    kernel_modules = (lemke_kernels.__name__,)
    warm_up_scenes = ("scenes/quasistatic_iiwa_box.yaml",)

    @dataclass
    class Options:
        friction_directions: int = 4      # nd per contact (even): polyhedral cone, eq. 7
        max_pivots: int | None = None     # Lemke pivot limit (None: 50 (n + 1))

    def __init__(self, model, options=None):
        super().__init__(model, options)
        self._lemke = LemkeSolver(max_pivots=self.options.max_pivots)
        self.last_solve_info = QuasistaticSolveInfo(backend="lemke")

    def _do_step(self, inputs: StepInputs) -> StepResult:
        c = inputs.contacts
        h = inputs.dt
        nv, nc, nd = self.model.nv, c.size, len(self._dcoef)
        ia, iu = self._ia, self._iu
        dq_bar, tau, rows = self._step_start(inputs, "lemke")
        if rows is None:
            return self._no_contact_step(inputs, dq_bar, tau)
        Jn, Jf, bias_f, phi = rows
        nf, nu = nc * nd, iu.size
        # scaled units (conditioning): dq' = dq / L, Gamma' = Gamma / L, P' = P / S
        L = max(float(np.abs(dq_bar).max(initial=0.0)), float(np.abs(phi).min(initial=1.0)), 1e-4)
        S = h * max(float(np.abs(tau[iu]).max(initial=0.0)), 1e-6)
        E = np.kron(np.eye(nc), np.ones((nd, 1)))
        Jn_u, Jf_u = Jn[:, iu], Jf[:, iu]
        n = 2 * nc + nf + 2 * nu
        M = np.zeros((n, n))
        q = np.zeros(n)
        r_n, r_f, r_s = slice(0, nc), slice(nc, nc + nf), slice(nc + nf, 2 * nc + nf)
        r_p, r_m = slice(2 * nc + nf, 2 * nc + nf + nu), slice(2 * nc + nf + nu, n)
        # distance rows (/ L)
        M[r_n, r_p], M[r_n, r_m] = Jn_u, -Jn_u
        q[r_n] = (phi + Jn[:, ia] @ dq_bar[ia]) / L
        M[r_f, r_s] = E
        M[r_f, r_p], M[r_f, r_m] = Jf_u, -Jf_u
        q[r_f] = (Jf[:, ia] @ dq_bar[ia] + h * bias_f) / L
        # cone rows (/ S)
        M[r_s, r_n] = np.diag(np.asarray(c.friction, float))
        M[r_s, r_f] = -E.T
        # force balance rows (/ S)
        M[r_p, r_n], M[r_p, r_f] = -Jn_u.T, -Jf_u.T
        M[r_m, r_n], M[r_m, r_f] = Jn_u.T, Jf_u.T
        q[r_p] = -h * tau[iu] / S
        q[r_m] = h * tau[iu] / S
        start = time.perf_counter()
        result = self._lemke.solve(M, q)
        self.last_solve_info.solver_time_s = time.perf_counter() - start
        self.last_solve_info.n_contacts = nc
        if not result.status.ok:
            status = SolverStatus.INFEASIBLE if result.status.name == "RAY_TERMINATION" else SolverStatus.MAX_ITERATIONS
            return self._failure(inputs, status,
                                 f"quasistatic LCP has no solution ({result.message}); likely cause: the commanded "
                                 "actuated motion penetrates a body that force balance cannot move away "
                                 "(use the quasistatic_miqp engine, which follows commands softly)")
        x = result.z
        Pn, Pf = x[r_n] * S, x[r_f] * S
        dq = dq_bar.copy()
        dq[iu] = (x[r_p] - x[r_m]) * L
        residual = float(np.abs(Jn_u.T @ Pn + Jf_u.T @ Pf + h * tau[iu]).max(initial=0.0)) / h
        return self._result(inputs, dq, Pn, Pf, tau, SolverStatus.CONVERGED, "",
                            iterations=result.pivots, residual=residual)
