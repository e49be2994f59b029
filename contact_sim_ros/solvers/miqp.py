"""Mixed-integer QPs with binary variables in one dense generic form (``MIQP``), and their back-ends.

The quasistatic engine (``engines/quasistatic_miqp.py``) writes each time step as an ``MIQP`` and hands it to a
back-end from ``MIQP_BACKENDS``; nothing here knows about contacts. Back-ends (registered only when their
Python package imports):

* ``daqp`` (default): BnB-DAQP (D. Arnstrom, D. Axehill, "BnB-DAQP: A mixed-integer QP solver for embedded
  applications", IFAC 2023; MIT licence): depth-first branch and bound whose relaxations are *QPs*, solved by a
  dual active-set method warm-started from the parent node. See ``solve_daqp``.
* ``scip``: SCIP through pyscipopt (LP-based branch and bound with an outer approximation of the quadratic
  objective). ``ScipPersistent`` keeps the model between steps.
* ``gurobi``: gurobipy (commercial; optional).

Helpers shared by all back-ends: ``polish_fixed_mode`` (the exact QP of a contact mode), ``fixed_mode_start``
(a complete start from a mode: LP + polish) and ``least_impulse_fixed_motion`` (an LP with motion and mode
fixed).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import ConfigError
import scipy.sparse as sp


def import_lp_solver():
    """scipy's ``linprog`` (HiGHS LPs). scipy.optimize costs 0.3-0.8 s to import: it is imported on first use,
    not with the package (every node start paid it through the engine registry, issue 17), and
    QuasistaticMIQPEngine's constructor calls this so that no step pays it."""
    from scipy.optimize import linprog
    return linprog


# --------------------------------------------------------------------------------------------------------------
# MIQP back-ends (generic form) -- registered only when their Python package imports.
# --------------------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class MIQP:
    """min  sum_i qdiag_i x_i^2 + c^T x + const   s.t.  A_eq x = b_eq,  A_ub x + B_ub z <= b_ub,  lb <= x <= ub,
    z binary. Dense arrays (problems are small: tens to a few hundred variables)."""

    qdiag: np.ndarray
    c: np.ndarray
    A_eq: np.ndarray
    b_eq: np.ndarray
    A_ub: np.ndarray
    B_ub: np.ndarray
    b_ub: np.ndarray
    lb: np.ndarray
    ub: np.ndarray
    n_bin: int
    z_start: np.ndarray | None = None
    x_start: np.ndarray | None = None    # with z_start: a complete feasible start (fixed_mode_start)
    time_limit_s: float = 10.0
    const: float = 0.0
    params: dict = field(default_factory=dict)   # back-end parameters (SCIP setParam / Gurobi Params names)

    def objective(self, x: np.ndarray) -> float:
        """sum_i qdiag_i x_i^2 + c^T x + const at x."""
        return float(self.qdiag @ (x * x) + self.c @ x + self.const)


@dataclass
class MIQPSolution:
    status: str                  # "optimal", "infeasible", "time_limit", "error"
    x: np.ndarray | None
    z: np.ndarray | None
    objective: float = math.nan
    solver_time_s: float = 0.0   # the back-end's own solve time (CPU time of SCIP's optimize() / Gurobi Runtime)
    nodes: int = 0
    message: str = ""
    build_time_s: float = 0.0    # CPU time spent building the back-end's model in Python (not in solver_time_s)
    lp_iterations: int = 0


_SCIP_SETTINGS = {"presolving": "setPresolve", "heuristics": "setHeuristics", "separating": "setSeparating"}


def _scip_model(p: MIQP, params: dict):
    """A pyscipopt Model with the engine's settings and the user's ``params``."""
    import pyscipopt as scip  # deferred: optional MIQP back-end

    m = scip.Model()
    m.hideOutput()
    m.setParam("timing/clocktype", 1)        # CPU time: the time limit and getSolvingTime do not count waiting
    m.setParam("limits/time", float(p.time_limit_s))
    m.setParam("randomization/randomseedshift", 0)
    # optimality gap: relative 1e-4 (Gurobi's default) and absolute 1e-4 in the scaled objective (||dq_a -
    # dq_a_bar||^2 / L^2): SCIP's default gap 0 makes it branch hundreds of nodes to close the outer
    # approximation of the quadratic; the contact mode's QP is then solved exactly by polish_fixed_mode.
    m.setParam("limits/gap", 1e-4)
    m.setParam("limits/absgap", 1e-4)
    # SCIP's primal heuristics stay on by default: with 'heuristics': 'off' (and 'presolving/maxrestarts': 0)
    # the section V-B runs take half the time, but SCIP then returns another of the tied contact modes in the
    # pushed-box test (push force 2.5e-5 relative below mu m g): see docs/benchmarks/quasistatic.md.
    params = dict(params)
    for key, value in params.items():
        if key in _SCIP_SETTINGS:        # 'presolving' / 'heuristics' / 'separating': 'off', 'fast', ...
            getattr(m, _SCIP_SETTINGS[key])(getattr(scip.SCIP_PARAMSETTING, str(value).upper()))
        elif key == "emphasis":          # 'optimality', 'feasibility', 'easycip', ...
            m.setEmphasis(getattr(scip.SCIP_PARAMEMPHASIS, str(value).upper()))
        else:
            m.setParam(key, value)
    return m


def _bound(value: float) -> float | None:
    """A variable bound for pyscipopt: None for an infinite one."""
    return float(value) if np.isfinite(value) else None


def _stacked_rows(p: MIQP) -> tuple[np.ndarray, np.ndarray, int]:
    """[A_eq 0; A_ub B_ub] over (x, z), the right-hand sides and the number of equality rows (first)."""
    AB = np.vstack([np.hstack([p.A_eq, np.zeros((p.A_eq.shape[0], p.n_bin))]), np.hstack([p.A_ub, p.B_ub])])
    return AB, np.concatenate([p.b_eq, p.b_ub]), p.A_eq.shape[0]


def _scip_add_rows(m, terms, AB, rhs, n_eq) -> list:
    """The linear rows AB (x, z) = rhs (first n_eq) / <= rhs as SCIP constraints built directly from term
    dictionaries (pyscipopt's quicksum of coef * var products costs ~10 us per term in Python)."""
    import pyscipopt as scip  # deferred: optional MIQP back-end

    cons = []
    for r, b in enumerate(rhs.tolist()):
        cols = np.flatnonzero(AB[r])
        expr = scip.scip.Expr(dict(zip([terms[j] for j in cols.tolist()], AB[r, cols].tolist())))
        cons.append(m.addCons(scip.scip.ExprCons(expr, lhs=b if r < n_eq else None, rhs=b)))
    return cons


def _scip_warm_start(m, p: MIQP, x, z, t, t_values, partial: bool = True) -> None:
    """Give SCIP the start: a complete solution (p.x_start; SCIP checks it when the problem is transformed and
    keeps it as incumbent if feasible, otherwise discards it), else the binaries only (a partial solution;
    SCIP's completesol heuristic fills in the rest)."""
    if p.z_start is None or not p.n_bin:
        return
    if p.x_start is not None:
        sol = m.createSol()
        for v, val in zip(x + z, np.concatenate([p.x_start, p.z_start]).tolist()):
            m.setSolVal(sol, v, val)
        for v, val in zip(t, t_values):
            m.setSolVal(sol, v, val)
        m.addSol(sol)                    # stored as an original solution; SCIP checks it when it transforms
        return
    if not partial:
        return
    sol = m.createPartialSol()
    for v, val in zip(z, p.z_start.tolist()):
        m.setSolVal(sol, v, float(val))
    m.addSol(sol)


def _scip_result(m, x, z, build, cpu) -> MIQPSolution:
    status = m.getStatus()
    out = MIQPSolution("error", None, None, solver_time_s=cpu, nodes=int(m.getNNodes()), build_time_s=build,
                       lp_iterations=int(m.getNLPIterations()))
    if m.getNSols() > 0 and status in ("optimal", "timelimit", "gaplimit"):
        sol = m.getBestSol()
        out.x = np.array([m.getSolVal(sol, v) for v in x])
        out.z = np.array([round(m.getSolVal(sol, v)) for v in z], dtype=float)
        out.objective = float(m.getSolObjVal(sol))
        out.status = "optimal" if status != "timelimit" else "time_limit"
    elif status == "infeasible":
        out.status = "infeasible"
    elif status == "timelimit":
        out.status = "time_limit"
    else:
        out.message = f"SCIP status {status!r}"
    return out


class ScipPersistent:
    """SCIP back-end that builds the pyscipopt model once per problem shape and afterwards only changes what
    differs from the previous step (freeTransform, then chgCoefLinear / chgRhs / chgLhs / bounds / objective
    coefficients), instead of creating a Model (SCIP's ~200 default plugins) and every row from Python each
    step. The objective is separable: min sum_j t_j + c^T x + const with t_j >= q_j x_j^2 (q fixed per shape).
    Same MIQP, same settings as ``_solve_scip``; ``params['reuse_model'] = False`` selects that one."""

    def __init__(self):
        self._m = None
        self._key = None

    def __call__(self, p: MIQP) -> MIQPSolution:
        params = dict(p.params)
        if not params.pop("reuse_model", True) or params.get("objective_form", "separable") != "separable":
            return _solve_scip(p)
        params.pop("objective_form", None)
        import pyscipopt as scip  # deferred: optional MIQP back-end

        build = time.process_time()
        n, nb = p.c.size, p.n_bin
        AB, rhs, n_eq = _stacked_rows(p)
        qcols = np.flatnonzero(p.qdiag)
        key = (n, nb, n_eq, p.A_ub.shape[0], p.qdiag.tobytes(), repr(sorted(params.items())))
        if key != self._key:
            self._build(p, params, AB, rhs, qcols)
            self._key = key
        else:
            m = self._m
            m.freeTransform()
            rows, cols = np.nonzero(AB != self._AB)
            cons, var = self._cons, self._vars
            for r, j, v in zip(rows.tolist(), cols.tolist(), AB[rows, cols].tolist()):
                m.chgCoefLinear(cons[r], var[j], v)
            for r in np.flatnonzero(rhs != self._rhs).tolist():
                if r >= n_eq:
                    m.chgRhs(cons[r], float(rhs[r]))
                elif rhs[r] > self._rhs[r]:          # equality row: keep lhs <= rhs while changing both
                    m.chgRhs(cons[r], float(rhs[r]))
                    m.chgLhs(cons[r], float(rhs[r]))
                else:
                    m.chgLhs(cons[r], float(rhs[r]))
                    m.chgRhs(cons[r], float(rhs[r]))
            for j in np.flatnonzero(p.lb != self._lb).tolist():
                m.chgVarLb(var[j], _bound(p.lb[j]))
            for j in np.flatnonzero(p.ub != self._ub).tolist():
                m.chgVarUb(var[j], _bound(p.ub[j]))
            changed = np.flatnonzero(p.c != self._c).tolist()
            if changed:                          # objective coefficients (pyscipopt has no chgVarObj)
                m.setObjective(scip.scip.Expr({self._terms[j]: float(p.c[j]) for j in changed}), clear=False)
            m.addObjoffset(float(p.const) - m.getObjoffset())
            m.setParam("limits/time", float(p.time_limit_s))
            self._AB, self._rhs, self._lb, self._ub, self._c = AB, rhs, p.lb.copy(), p.ub.copy(), p.c.copy()
        m = self._m
        x, z = self._vars[:n], self._vars[n:]
        xs = p.x_start[qcols] if p.x_start is not None else None
        # no partial solutions on a reused model: SCIP keeps them across freeTransform and refuses more than
        # limits/maxorigsol (10); without a complete start this model starts cold
        _scip_warm_start(m, p, x, z, self._t, (p.qdiag[qcols] * xs * xs).tolist() if xs is not None else [],
                         partial=False)
        build = time.process_time() - build
        cpu = time.process_time()
        m.optimize()
        cpu = time.process_time() - cpu
        return _scip_result(m, x, z, build, cpu)

    def _build(self, p, params, AB, rhs, qcols):
        import pyscipopt as scip  # deferred: optional MIQP back-end

        m = _scip_model(p, params)
        x = [m.addVar(lb=_bound(lo), ub=_bound(hi), vtype="C", obj=float(c)) for lo, hi, c in zip(p.lb, p.ub, p.c)]
        z = [m.addVar(vtype="B") for _ in range(p.n_bin)]
        terms = [scip.scip.Term(v) for v in x + z]
        cons = _scip_add_rows(m, terms, AB, rhs, p.A_eq.shape[0])
        t = []
        for j, qj in zip(qcols.tolist(), p.qdiag[qcols].tolist()):
            tj = m.addVar(lb=0.0, ub=None, vtype="C", obj=1.0)
            m.addCons(qj * x[j] * x[j] <= tj)
            t.append(tj)
        m.addObjoffset(float(p.const))
        m.setMinimize()
        self._m, self._vars, self._cons, self._t, self._terms = m, x + z, cons, t, terms
        self._AB, self._rhs, self._lb, self._ub, self._c = AB, rhs, p.lb.copy(), p.ub.copy(), p.c.copy()


def _solve_scip(p: MIQP) -> MIQPSolution:
    """SCIP through pyscipopt. Besides SCIP's own parameter names, ``p.params`` takes the setting groups
    'presolving' / 'heuristics' / 'separating' ('off', 'fast', 'aggressive', 'default'), 'emphasis' and
    'objective_form': 'separable' (default: one epigraph variable per squared term, t_j >= q_j (x_j - a_j)^2,
    min sum t_j; each t_j is a univariate convex constraint whose tangent cuts are exact at the point of tangency)
    or 'epigraph' (one t >= sum q_j x_j^2 + c^T x: SCIP's outer approximation of the whole sum is much weaker,
    so it branches more). Linear rows: ``_scip_add_rows``."""
    import pyscipopt as scip  # deferred: optional MIQP back-end

    build = time.process_time()
    params = dict(p.params)
    form = params.pop("objective_form", "separable")
    params.pop("reuse_model", None)
    m = _scip_model(p, params)
    x = [m.addVar(lb=_bound(lo), ub=_bound(hi), vtype="C") for lo, hi in zip(p.lb, p.ub)]
    z = [m.addVar(vtype="B") for _ in range(p.n_bin)]
    terms = [scip.scip.Term(v) for v in x + z]
    _scip_add_rows(m, terms, *_stacked_rows(p))
    qcols = np.flatnonzero(p.qdiag)
    lin = np.flatnonzero((p.c != 0.0) & (p.qdiag == 0.0))
    if form == "separable":
        # q x^2 + c x = q (x - a)^2 - q a^2 with a = -c / (2 q): t_j >= q_j (x_j - a_j)^2 >= 0
        a = -p.c[qcols] / (2.0 * p.qdiag[qcols])
        t = []
        for j, qj, aj in zip(qcols.tolist(), p.qdiag[qcols].tolist(), a.tolist()):
            tj = m.addVar(lb=0.0, ub=None, vtype="C", obj=1.0)
            m.addCons(qj * (x[j] - aj) * (x[j] - aj) <= tj)
            t.append(tj)
        if lin.size:
            m.setObjective(scip.scip.Expr({terms[j]: float(p.c[j]) for j in lin.tolist()}), clear=False)
        m.addObjoffset(float(p.const - p.qdiag[qcols] @ (a * a)))
    elif form == "epigraph":
        t = [m.addVar(lb=None, ub=None, vtype="C", obj=1.0)]
        m.addCons(scip.quicksum(float(p.qdiag[j]) * x[j] * x[j] for j in qcols)
                  + scip.quicksum(float(p.c[j]) * x[j] for j in np.flatnonzero(p.c)) + float(p.const) <= t[0])
    else:
        raise ConfigError(f"SCIP back-end: objective_form must be 'separable' or 'epigraph', got {form!r}")
    m.setMinimize()
    if form == "epigraph":
        t_values = [float(p.qdiag @ p.x_start ** 2 + p.c @ p.x_start + p.const)] if p.x_start is not None else []
    else:
        t_values = (p.qdiag[qcols] * (p.x_start[qcols] - a) ** 2).tolist() if p.x_start is not None else []
    _scip_warm_start(m, p, x, z, t, t_values)
    build = time.process_time() - build
    cpu = time.process_time()
    m.optimize()
    cpu = time.process_time() - cpu         # SCIP's own CPU clock ticks in 10 ms steps: measure it here
    return _scip_result(m, x, z, build, cpu)


def _solve_gurobi(p: MIQP) -> MIQPSolution:
    import gurobipy as gp  # deferred: optional MIQP back-end

    env = _gurobi_env()
    m = gp.Model(env=env)
    m.Params.TimeLimit = float(p.time_limit_s)
    m.Params.MIPGapAbs = 1e-4
    for key, value in p.params.items():
        m.setParam(key, value)
    n, nb = p.c.size, p.n_bin
    x = m.addMVar(n, lb=np.where(np.isfinite(p.lb), p.lb, -gp.GRB.INFINITY),
                  ub=np.where(np.isfinite(p.ub), p.ub, gp.GRB.INFINITY))
    z = m.addMVar(nb, vtype=gp.GRB.BINARY)
    if p.A_eq.shape[0]:
        m.addConstr(p.A_eq @ x == p.b_eq)
    if p.A_ub.shape[0]:
        m.addConstr(p.A_ub @ x + p.B_ub @ z <= p.b_ub)
    m.update()
    m.setMObjective(sp.diags(np.concatenate([p.qdiag, np.zeros(nb)])).tocsr(),
                    np.concatenate([p.c, np.zeros(nb)]), float(p.const), sense=gp.GRB.MINIMIZE)
    if p.z_start is not None and nb:
        z.Start = p.z_start
    try:
        m.optimize()
    except gp.GurobiError as exc:      # e.g. the size-limited license refuses a large model
        m.dispose()
        return MIQPSolution("error", None, None, message=f"Gurobi: {exc}")
    out = MIQPSolution("error", None, None, solver_time_s=float(m.Runtime), nodes=int(m.NodeCount))
    if m.SolCount > 0 and m.Status in (gp.GRB.OPTIMAL, gp.GRB.TIME_LIMIT, gp.GRB.SUBOPTIMAL):
        out.x = np.array(x.X)
        out.z = np.round(np.array(z.X)) if nb else np.zeros(0)
        out.objective = float(m.ObjVal)
        out.status = "optimal" if m.Status != gp.GRB.TIME_LIMIT else "time_limit"
    elif m.Status in (gp.GRB.INFEASIBLE, gp.GRB.INF_OR_UNBD):
        out.status = "infeasible"
    elif m.Status == gp.GRB.TIME_LIMIT:
        out.status = "time_limit"
    else:
        out.message = f"Gurobi status {m.Status}"
    m.dispose()
    return out


_GUROBI_ENV = None


def _gurobi_env():
    global _GUROBI_ENV
    if _GUROBI_ENV is None:
        import gurobipy as gp  # deferred: optional MIQP back-end
        env = gp.Env(empty=True)
        env.setParam("OutputFlag", 0)
        env.setParam("Threads", 1)
        env.start()
        _GUROBI_ENV = env
    return _GUROBI_ENV


# --------------------------------------------------------------------------------------------------------------
# DAQP back-end (BnB-DAQP): branch and bound over QP relaxations
# --------------------------------------------------------------------------------------------------------------

_DAQP_INF = 1e30                # DAQP's "no bound"
_DAQP_EQUALITY = 5              # sense flags (daqp.solve docstring): equality row
_DAQP_BINARY = 16               # the row's lower or upper bound holds with equality
_DAQP_FLAGS = {2: "soft optimal", 4: "optimal (inexact)", 5: "feasible, search stopped early", -1: "infeasible",
               -2: "cycling", -3: "unbounded", -4: "iteration limit", -5: "non-convex", -6: "overdetermined "
               "initial working set", -7: "time limit", -8: "unsupported problem"}
# DAQP's branch and bound needs a positive definite Hessian (its semidefinite path, proximal-point iterations,
# returned inexact modes on the section V-B MIQPs). Variables without curvature (impulses, Gamma) get
# DAQP_REGULARIZATION / 2 x^2 in scaled units (100x below the optimality gap 1e-4 for |x| <= 1); the binaries get
# DAQP_REGULARIZATION / 2 (z^2 - z), which is zero at z in {0, 1}: the integer solutions keep their objective.
# The chosen mode's QP is then re-solved without it (polish_fixed_mode).
DAQP_REGULARIZATION = 1e-6
# CPU time (s) DAQP's search may take before it gives up and reports an error (for the engine's fallback
# back-end): on the section V-B runs a warm-started search takes < 5 ms, but where the previous contact mode is a
# poor incumbent (the step the object leaves the table) depth-first search explored thousands of nodes or cycled
# in a degenerate node (0.4 s) without improving it
DAQP_SEARCH_TIME_LIMIT = 0.05


def _daqp_qp(p: MIQP, regularization: float) -> tuple[np.ndarray, np.ndarray]:
    """Hessian and linear term of (x, z) in DAQP's form 0.5 v^T H v + f^T v (see DAQP_REGULARIZATION)."""
    n, nb = p.c.size, p.n_bin
    h = np.empty(n + nb)
    h[:n] = 2.0 * p.qdiag
    h[:n][p.qdiag == 0.0] = regularization
    h[n:] = regularization
    f = np.concatenate([p.c, np.full(nb, -0.5 * regularization)])
    return np.diag(h), f


def daqp_fixed_mode(p: MIQP, z: np.ndarray, regularization: float = DAQP_REGULARIZATION,
                    settings: dict | None = None) -> np.ndarray | None:
    """The QP of contact mode z solved by DAQP (tens of microseconds): x of min f(x) + regularization subject to
    the MIQP's rows with z fixed, or None if DAQP finds the mode infeasible.

    With z fixed, the big-M complementarity rows come in opposite pairs (r <= 0 and -r <= 0, i.e. r = 0) and
    single-variable rows (y <= 0 with y >= 0): as separate inequalities they make the active-set method's working
    set degenerate and DAQP reported feasible modes infeasible. Here each opposite pair becomes one two-sided row
    (an equality where its sides meet) and each single-variable row a bound."""
    import daqp  # deferred: optional MIQP back-end

    n = p.c.size
    rhs = p.b_ub - p.B_ub @ z
    A = p.A_ub
    nnz = np.count_nonzero(A, axis=1)
    lb, ub = p.lb.copy(), p.ub.copy()
    for i in np.flatnonzero(nnz == 1).tolist():              # a x_j <= rhs -> a bound on x_j
        j = int(np.flatnonzero(A[i])[0])
        if A[i, j] > 0.0:
            ub[j] = min(ub[j], rhs[i] / A[i, j])
        else:
            lb[j] = max(lb[j], rhs[i] / A[i, j])
    tol = 1e-9 * (1.0 + np.abs(rhs))
    if np.any(lb > ub + 1e-9 * (1.0 + np.abs(ub))) or np.any(rhs[nnz == 0] < -tol[nnz == 0]):
        return None                          # contradictory bounds, or a violated row without x: infeasible mode
    rows = np.flatnonzero(nnz > 1)
    index = {A[i].tobytes(): i for i in rows.tolist()}
    upper = rhs[rows].copy()
    lower = np.full(rows.size, -_DAQP_INF)
    keep = np.ones(rows.size, dtype=bool)
    for k, i in enumerate(rows.tolist()):                    # a x <= r1 and -a x <= r2 -> -r2 <= a x <= r1
        if not keep[k]:
            continue
        j = index.get((-A[i]).tobytes())
        if j is not None and j != i:
            kj = int(np.searchsorted(rows, j))
            if keep[kj] and kj > k:
                lower[k] = -rhs[j]
                keep[kj] = False
    rows, upper, lower = rows[keep], upper[keep], lower[keep]
    lower = np.minimum(lower, upper)        # sides crossed by round-off: an equality
    bu = np.concatenate([np.minimum(ub, _DAQP_INF), p.b_eq, upper])
    bl = np.concatenate([np.maximum(lb, -_DAQP_INF), p.b_eq, lower])
    sense = np.zeros(bu.size, dtype=np.intc)
    sense[n:n + p.b_eq.size] = _DAQP_EQUALITY
    sense[(bu - bl) <= 1e-12 * (1.0 + np.abs(bu))] = _DAQP_EQUALITY
    H, f = _daqp_qp(replace(p, n_bin=0), regularization)
    x, _, flag, _ = daqp.solve(H, f, np.vstack([p.A_eq, A[rows]]), bu, bl, sense, **(settings or {}))
    if flag not in (1, 4):
        return None
    x = np.array(x)
    feasible = (np.all(p.A_ub @ x <= rhs + 1e-6) and np.all(np.abs(p.A_eq @ x - p.b_eq) <= 1e-6)
                and np.all(x >= p.lb - 1e-6) and np.all(x <= p.ub + 1e-6))
    return x if feasible else None


def solve_daqp(p: MIQP) -> MIQPSolution:
    """BnB-DAQP: depth-first branch and bound; every node's relaxation is the QP with the binaries relaxed to
    [0, 1], solved by DAQP's dual active-set method warm-started from the parent node. Unlike SCIP's outer
    approximation, the relaxation sees the quadratic objective exactly, so the bound is tight.

    Gap limits as the SCIP back-end: absolute 1e-4 and relative 1e-4 in the (scaled) objective. Start: the
    complete start p.x_start (with p.z_start) when given, else the QP of the mode p.z_start (daqp_fixed_mode);
    DAQP takes it as the incumbent, which prunes every node whose relaxation cannot beat it by the gap.
    ``p.params``: DAQP settings (``iter_limit``, ``primal_tol``, ...), ``regularization`` (DAQP_REGULARIZATION)
    and ``search_time_limit`` (DAQP_SEARCH_TIME_LIMIT, s): a search
    stopped by it, by DAQP's iteration limit or by cycling returns status "error" with its best mode (if any) so
    that the engine's fallback back-end can continue from it; at p.time_limit_s it is "time_limit".
    Times are CPU times of the whole call (start included)."""
    import daqp  # deferred: optional MIQP back-end

    cpu = time.process_time()
    params = dict(p.params)
    reg = float(params.pop("regularization", DAQP_REGULARIZATION))
    n, nb = p.c.size, p.n_bin
    H, f = _daqp_qp(p, reg)
    A, rhs, n_eq = _stacked_rows(p)
    bu = np.concatenate([np.minimum(p.ub, _DAQP_INF), np.ones(nb), rhs])
    bl = np.concatenate([np.maximum(p.lb, -_DAQP_INF), np.zeros(nb), p.b_eq, np.full(p.b_ub.size, -_DAQP_INF)])
    sense = np.zeros(bu.size, dtype=np.intc)
    sense[n:n + nb] = _DAQP_BINARY
    sense[n + nb:n + nb + n_eq] = _DAQP_EQUALITY
    search_limit = float(params.pop("search_time_limit", DAQP_SEARCH_TIME_LIMIT))
    settings = {"abs_subopt": 1e-4, "rel_subopt": 1e-4, "time_limit": min(float(p.time_limit_s), search_limit),
                **params}
    start = None
    if p.z_start is not None and nb:
        x_start = p.x_start if p.x_start is not None else daqp_fixed_mode(p, p.z_start, reg)
        if x_start is not None:
            start = np.concatenate([x_start, p.z_start])
    v, _, flag, info = daqp.solve(H, f, A, bu, bl, sense, primal_start=start, **settings)
    cpu = time.process_time() - cpu
    out = MIQPSolution("error", None, None, solver_time_s=cpu, nodes=int(info["nodes"]),
                       lp_iterations=int(info["iterations"]), build_time_s=0.0)
    if flag in (1, 4, 5):
        v = np.array(v)
        out.x, out.z = v[:n], np.round(v[n:])
        out.objective = p.objective(out.x)
        out.status = "optimal"
        if flag == 5:       # the search stopped early with an incumbent: time limit, iteration limit or cycling
            out.status = "time_limit" if cpu >= 0.99 * p.time_limit_s else "error"
            out.message = (f"DAQP stopped the search after {info['nodes']} nodes, {info['iterations']} iterations, "
                           f"{1e3 * cpu:.0f} ms (search time limit {1e3 * search_limit:.0f} ms, iteration limit or "
                           "cycling in a degenerate node)")
    elif flag == -1:
        out.status = "infeasible"
    elif flag == -7 and cpu >= 0.99 * p.time_limit_s:
        out.status = "time_limit"
    else:
        out.message = f"DAQP exit flag {flag} ({_DAQP_FLAGS.get(flag, 'unknown')}) after {info['nodes']} nodes"
    return out


MIQP_BACKENDS: dict = {}
try:  # the open-source default
    import daqp  # noqa: F401
    MIQP_BACKENDS["daqp"] = solve_daqp
except ImportError:  # pragma: no cover - depends on the installation
    pass
try:  # open source
    import pyscipopt  # noqa: F401
    MIQP_BACKENDS["scip"] = _solve_scip
except ImportError:  # pragma: no cover - depends on the installation
    pass
try:  # optional commercial back-end
    import gurobipy  # noqa: F401
    MIQP_BACKENDS["gurobi"] = _solve_gurobi
except ImportError:  # pragma: no cover
    pass


def polish_fixed_mode(p: MIQP, x0: np.ndarray, z: np.ndarray, max_rounds: int = 6,
                      tol: float = 1e-7, qdiag: np.ndarray | None = None) -> np.ndarray:
    """Exact solution of the convex QP left when the binaries are fixed to the solver's optimal mode z.

    MIQP back-ends return x0 within their feasibility tolerance (SCIP's outer approximation of the quadratic
    objective leaves errors ~1e-5 relative). With z fixed the problem is min f(x) = sum qdiag x^2 + c^T x
    s.t. A_eq x = b_eq, A_ub x <= b_ub - B_ub z, x >= 0 where lb == 0 (the other variable bounds are big-M
    artefacts and are left out, so that a free variable lands on its regularised value).
    Primal active-set polish: the inequalities active at x0 (slack <= tol) become equalities, the
    equality-constrained QP is solved by its KKT system (null-space method; zero-curvature variables get a
    proximal term 1e-12 (x - x0)^2 so the reduced Hessian is positive definite), and constraints
    it violates are added until it is feasible. Returns x0 unchanged if that fails or does not improve f.
    ``qdiag`` replaces the MIQP's curvature (the engine polishes with a weaker regulariser than it selects the
    mode with).
    """
    qdiag = p.qdiag if qdiag is None else qdiag
    n = x0.size
    rhs = p.b_ub - p.B_ub @ z
    nonneg = p.lb == 0.0
    G = np.vstack([p.A_ub, -np.eye(n)[nonneg]])
    hvec = np.concatenate([rhs, np.zeros(int(nonneg.sum()))])
    scale = 1.0 + np.abs(hvec)
    active = (hvec - G @ x0) <= tol * scale
    curvature = 2.0 * qdiag
    prox = np.where(curvature > 0.0, 0.0, 1e-12)
    H = np.diag(curvature + 2.0 * prox)
    grad_const = p.c - 2.0 * prox * x0

    def f(x):
        return float(qdiag @ (x * x) + p.c @ x)

    for _ in range(max_rounds):
        C = np.vstack([p.A_eq, G[active]])
        d = np.concatenate([p.b_eq, hvec[active]])
        # null-space method (active sets are often redundant): x = x_p + N y, N spans null(C)
        U, sv, Vt = np.linalg.svd(C, full_matrices=True)
        rank = int(np.sum(sv > 1e-10 * max(1.0, sv[0] if sv.size else 1.0)))
        x_p = Vt[:rank].T @ ((U[:, :rank].T @ d) / sv[:rank])
        if np.abs(C @ x_p - d).max(initial=0.0) > 1e-9 * (1.0 + np.abs(d).max(initial=0.0)):
            return x0                      # inconsistent active set
        N = Vt[rank:].T
        if N.shape[1]:
            y = np.linalg.solve(N.T @ H @ N, -N.T @ (H @ x_p + grad_const))
            x = x_p + N @ y
        else:
            x = x_p
        violated = (G @ x - hvec) > tol * scale
        if not np.any(violated):
            eq_ok = np.all(np.abs(p.A_eq @ x - p.b_eq) <= 1e-9 * (1.0 + np.abs(p.b_eq)))
            if eq_ok and np.all(np.isfinite(x)) and f(x) <= f(x0) + 1e-9 * (1.0 + abs(f(x0))):
                return x
            return x0
        active |= violated
    return x0


def fixed_mode_start(p: MIQP, z: np.ndarray) -> np.ndarray | None:
    """A complete start for the MIQP from a contact mode z (the previous step's). With DAQP installed, the mode's
    QP solved by DAQP (``daqp_fixed_mode``, ~0.1 ms); otherwise, or if DAQP finds the mode infeasible, an LP
    (HiGHS via scipy, ~3 ms) finds a point of the mode's polyhedron closest in weighted L1 to the objective's
    minimiser and polish_fixed_mode moves it to the mode's exact QP optimum. None if the mode is infeasible for
    this step's data. Any feasible point is a valid incumbent: the MIQP is still solved to optimality from it."""
    if "daqp" in MIQP_BACKENDS:
        x = daqp_fixed_mode(p, z)
        if x is not None:
            return x

    n = p.c.size
    q = np.flatnonzero(p.qdiag)
    a = -p.c[q] / (2.0 * p.qdiag[q])
    nq = q.size
    sel = np.zeros((nq, n))
    sel[np.arange(nq), q] = 1.0
    # variables [x (n), u (nq)], u_j >= |x_j - a_j|
    A_ub = np.block([[p.A_ub, np.zeros((p.A_ub.shape[0], nq))], [sel, -np.eye(nq)], [-sel, -np.eye(nq)]])
    b_ub = np.concatenate([p.b_ub - p.B_ub @ z, a, -a])
    A_eq = np.hstack([p.A_eq, np.zeros((p.A_eq.shape[0], nq))]) if p.A_eq.shape[0] else None
    cost = np.concatenate([np.zeros(n), np.sqrt(p.qdiag[q])])
    bounds = [(lo if np.isfinite(lo) else None, hi if np.isfinite(hi) else None) for lo, hi in zip(p.lb, p.ub)]
    bounds += [(0.0, None)] * nq
    try:
        linprog = import_lp_solver()
        res = linprog(cost, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=p.b_eq if A_eq is not None else None,
                      bounds=bounds, method="highs")
    except ValueError:
        return None
    if res.status != 0:
        return None
    return polish_fixed_mode(p, res.x[:n], z)


def least_impulse_fixed_motion(p: MIQP, x0: np.ndarray, z: np.ndarray, n_fixed: int,
                               cost: np.ndarray) -> np.ndarray:
    """With the binaries z and the first n_fixed variables (the motion dq) fixed, minimise cost^T x over the
    rest (impulses, Gamma) subject to the same constraints: an LP (HiGHS via scipy). Returns x0 on failure."""
    fixed = x0[:n_fixed]
    A_ub = p.A_ub[:, n_fixed:]
    b_ub = p.b_ub - p.B_ub @ z - p.A_ub[:, :n_fixed] @ fixed
    A_eq = p.A_eq[:, n_fixed:]
    b_eq = p.b_eq - p.A_eq[:, :n_fixed] @ fixed
    slack = 1e-9 * (1.0 + np.abs(b_ub))          # x0 satisfies the rows only to the solver's tolerance
    bounds = [(0.0, None) if lb == 0.0 else (None, None) for lb in p.lb[n_fixed:]]
    try:
        linprog = import_lp_solver()
        res = linprog(cost[n_fixed:], A_ub=A_ub, b_ub=b_ub + slack, A_eq=A_eq if A_eq.size else None,
                      b_eq=b_eq if A_eq.size else None, bounds=bounds, method="highs",
                      options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
    except ValueError:
        return x0
    if res.status != 0 or cost[n_fixed:] @ res.x > cost[n_fixed:] @ x0[n_fixed:]:
        return x0
    return np.concatenate([fixed, res.x])
