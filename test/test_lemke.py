"""Lemke's method on textbook, random P-matrix, degenerate and infeasible LCPs."""

import numpy as np
import pytest

from contact_sim_ros.errors import ConfigError
from contact_sim_ros.solvers import LCPResult, LCPStatus, LemkeSolver, lemke


def assert_lcp_solution(M, q, result, tol=1e-9):
    assert result.status is LCPStatus.SOLVED, result.message
    z = result.z
    w = M @ z + q
    scale = max(1.0, np.max(np.abs(q)))
    assert np.all(z >= -tol * scale)
    assert np.all(w >= -tol * scale)
    assert np.max(np.abs(z * w)) <= tol * scale * max(1.0, np.max(np.abs(z)))


def test_trivial_q_nonnegative_gives_zero():
    M = np.array([[2.0, 1.0], [1.0, 2.0]])
    result = lemke(M, np.array([1.0, 0.0]))
    assert result.status is LCPStatus.SOLVED and result.pivots == 0
    np.testing.assert_array_equal(result.z, 0.0)


def test_murty_textbook_example():
    # Murty (1988), the lower-triangular matrices M_n (1 on the diagonal, 2 below) - unique solution
    M = np.array([[1.0, 0.0, 0.0], [2.0, 1.0, 0.0], [2.0, 2.0, 1.0]])
    q = np.array([-8.0, -12.0, -14.0])
    result = lemke(M, q)
    assert_lcp_solution(M, q, result)
    np.testing.assert_allclose(result.z, [8.0, 0.0, 0.0], atol=1e-12)


def test_2x2_example_with_known_solution():
    # w = M z + q with M = [[2, 1], [0, 2]], q = [-1, -2]: z = (0, 1), w = (0, 0)
    M = np.array([[2.0, 1.0], [0.0, 2.0]])
    q = np.array([-1.0, -2.0])
    result = lemke(M, q)
    assert_lcp_solution(M, q, result)
    np.testing.assert_allclose(result.z, [0.0, 1.0], atol=1e-12)


def test_ray_termination_on_infeasible_lcp():
    # w2 = -2 z2 - 2 < 0 for every z2 >= 0: infeasible, Lemke must end on a ray (not loop, not NaN)
    M = np.array([[2.0, -1.0], [0.0, -2.0]])
    q = np.array([-1.0, -2.0])
    result = lemke(M, q)
    assert result.status is LCPStatus.RAY_TERMINATION
    assert "ray" in result.message
    assert np.all(np.isfinite(result.z))


@pytest.mark.parametrize("seed", range(20))
def test_random_p_matrix_lcps(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    A = rng.normal(size=(n, n))
    # P-matrix: positive definite (non-symmetric) part
    M = A @ A.T + 0.1 * np.eye(n) + (A - A.T) * 0.5
    q = rng.normal(size=n) * 3.0
    result = lemke(M, q)
    assert_lcp_solution(M, q, result)
    assert result.complementarity_error < 1e-9 * max(1.0, np.max(np.abs(result.z)))


def test_p_matrix_solution_is_unique_and_matches_active_set_solve():
    rng = np.random.default_rng(7)
    n = 12
    A = rng.normal(size=(n, n))
    M = A @ A.T + np.eye(n)
    q = rng.normal(size=n)
    z = lemke(M, q).z
    active = z > 1e-12
    # on the active set w = 0: M_AA z_A = -q_A
    np.testing.assert_allclose(np.linalg.solve(M[np.ix_(active, active)], -q[active]), z[active], atol=1e-10)


def test_degenerate_redundant_contacts():
    """Four coplanar normal contacts of one box (rank-3 Delassus matrix) with equal q: every ratio test ties
    and the basis is degenerate; the lexicographic rule must still finish with a valid solution."""
    m, a = 2.0, 0.1
    corners = np.array([[a, a], [a, -a], [-a, a], [-a, -a]])
    # normal rows of the contact Jacobian for a box with (vz, wx, wy) dofs, inertia 1/6 m (2a)^2
    J = np.column_stack([np.ones(4), corners[:, 1], -corners[:, 0]])
    inertia = np.diag([m, m * (2 * a) ** 2 / 6, m * (2 * a) ** 2 / 6])
    M = J @ np.linalg.solve(inertia, J.T)
    assert np.linalg.matrix_rank(M) == 3
    q = np.full(4, -1.0)   # all corners approaching at 1 m/s
    result = lemke(M, q)
    assert_lcp_solution(M, q, result)
    # total impulse stops the box: sum z = m * 1 m/s
    np.testing.assert_allclose(result.z.sum(), m * 1.0, rtol=1e-9)


def test_degenerate_zero_entries_in_q():
    M = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 2.0], [2.0, 0.0, 1.0]])
    q = np.array([0.0, -1.0, -1.0])
    result = lemke(M, q)
    assert_lcp_solution(M, q, result)


def test_pivot_limit_reported():
    rng = np.random.default_rng(11)
    n = 30
    A = rng.normal(size=(n, n))
    M = A @ A.T + np.eye(n)
    q = -np.abs(rng.normal(size=n))
    full = LemkeSolver().solve(M, q)
    assert_lcp_solution(M, q, full)
    assert full.pivots > 5
    limited = LemkeSolver(max_pivots=5).solve(M, q)
    assert limited.status is LCPStatus.MAX_PIVOTS
    assert "pivot limit" in limited.message


def test_bad_input_names_the_problem():
    with pytest.raises(ConfigError, match="shape"):
        lemke(np.eye(3), np.ones(2))
    with pytest.raises(ConfigError, match="pivot_tol"):
        LemkeSolver(pivot_tol=0.0)


def test_solver_reuses_scratch_between_sizes():
    solver = LemkeSolver()
    rng = np.random.default_rng(3)
    for n in (5, 5, 9, 5):
        A = rng.normal(size=(n, n))
        M = A @ A.T + np.eye(n)
        q = rng.normal(size=n)
        assert_lcp_solution(M, q, solver.solve(M, q))


def test_round_off_negative_q_is_not_a_ray():
    """A friction LCP (eq. 28 layout, one contact, 4 directions) whose exact q is 0 but arrives with
    round-off negatives ~1e-17: the answer is z = 0, not a ray termination."""
    W = np.diag([5.0, 5.0, 1.5])
    D = np.array([[0, 1, 0, -1, 0], [0, 0, 1, 0, -1], [1, 0, 0, 0, 0]], float)
    A = D.T @ W @ D
    M = np.zeros((6, 6))
    M[:5, :5] = A
    M[1:5, 5] = 1.0
    M[5, 0] = 0.5
    M[5, 1:5] = -1.0
    q = np.array([1e-16, -5.5e-17, 3.9e-17, -3.9e-17, 5.5e-17, 0.0])
    result = lemke(M, q)
    assert result.status is LCPStatus.SOLVED
    np.testing.assert_array_equal(result.z, 0.0)


def test_compiled_and_numpy_kernels_visit_the_same_bases():
    """The numba kernel (default) and the numpy reference apply the same pivoting rules with the same
    floating-point operations: identical status, pivot count, z, w and message on P-matrix, general (many
    ray terminations) and degenerate integer problems (lexicographic tie-breaks)."""
    compiled, reference = LemkeSolver(kernel="numba"), LemkeSolver(kernel="numpy")
    rng = np.random.default_rng(11)
    statuses = set()
    for trial in range(240):
        n = int(rng.integers(1, 30))
        kind = trial % 3
        if kind == 0:
            A = rng.normal(size=(n, n))
            M, q = A @ A.T, rng.normal(size=n)
        elif kind == 1:
            M, q = rng.normal(size=(n, n)), rng.normal(size=n)
        else:
            A = rng.integers(-2, 3, size=(n, n)).astype(float)
            M, q = A @ A.T, rng.integers(-2, 2, size=n).astype(float)
        a, b = compiled.solve(M, q), reference.solve(M, q)
        statuses.add(a.status)
        assert (a.status, a.pivots, a.message) == (b.status, b.pivots, b.message)
        np.testing.assert_array_equal(a.z, b.z)
        np.testing.assert_array_equal(a.w, b.w)
        # the compiled complementarity error is the numpy formula's maximum, exactly
        reference_error = max(np.max(-np.minimum(b.z, 0.0)), np.max(-np.minimum(b.w, 0.0)),
                              np.max(np.abs(b.z * b.w)))
        assert a.complementarity_error == reference_error
    assert statuses == {LCPStatus.SOLVED, LCPStatus.RAY_TERMINATION}


def test_complementarity_error_measures_the_worst_violation_and_propagates_nan():
    result = LCPResult(np.array([1.0, -0.25, 0.0]), np.array([0.5, 0.0, -0.125]), LCPStatus.SOLVED, 0)
    assert result.complementarity_error == 0.5          # z_0 w_0 = 0.5 beats -z_1 = 0.25 and -w_2 = 0.125
    result = LCPResult(np.array([0.0, 3.0]), np.array([-2.0, 0.0]), LCPStatus.SOLVED, 0)
    assert result.complementarity_error == 2.0
    assert np.isnan(LCPResult(np.array([0.0, np.nan]), np.zeros(2), LCPStatus.SOLVED, 0).complementarity_error)


@pytest.mark.parametrize("kernel", ["numba", "numpy"])
def test_non_finite_data_is_reported_by_both_kernels(kernel):
    solver = LemkeSolver(kernel=kernel)
    for M, q in ((np.eye(2), np.array([np.nan, -1.0])), (np.array([[np.inf, 0.0], [0.0, 1.0]]), -np.ones(2))):
        result = solver.solve(M, q)
        assert result.status is LCPStatus.RAY_TERMINATION and "non-finite" in result.message


def test_unknown_kernel_is_rejected():
    with pytest.raises(ConfigError, match="kernel"):
        LemkeSolver(kernel="fortran")
