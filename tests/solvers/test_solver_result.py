"""Every solver returns the shared frozen :class:`SolverResult` with a finite certificate.

One test per solver on a small instance whose optimum is known by hand or computed
independently with CVXPY (an SDP / power cone program written here from the problem statement,
not from dpmatrix).  The common checks: the result is a ``SolverResult``, frozen (no attribute
can be set, array outputs are read-only), its status is in the shared vocabulary, and
``lower_bound <= objective`` with ``gap = (objective - lower_bound) / objective >= 0``.
"""

from __future__ import annotations

import dataclasses

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp

from dpmatrix._solvers.budget_split import convex_budget_split, cube_root_split, uniform_split
from dpmatrix._solvers.fitness import solve_min_privacy_cost, solve_min_target_ratio, solve_weighted_sum
from dpmatrix._solvers.lowdim_optimal import optimize_subworkload
from dpmatrix._solvers.lsa import lsa
from dpmatrix._solvers.maxvar_solver import solve_max_variance, solve_min_cost
from dpmatrix._solvers.maxvar_strategy import optimize_maxvar_strategy
from dpmatrix._solvers.result import STATUSES, SolverResult
from dpmatrix._solvers.strategy1d import optimize_pidentity

PREFIX2 = np.array([[1.0, 0.0], [1.0, 1.0]])  # prefix sums over 2 cells


def check_certificate(r, *, rel=1e-12):
    assert isinstance(r, SolverResult)
    assert r.status in STATUSES
    assert np.isfinite(r.objective) and np.isfinite(r.lower_bound) and np.isfinite(r.gap)
    assert r.lower_bound <= r.objective * (1 + rel) + 1e-300
    assert r.gap >= -rel
    assert r.gap == pytest.approx((r.objective - r.lower_bound) / r.objective, rel=1e-6, abs=1e-12)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.objective = 0.0
    with pytest.raises(TypeError):
        r.extras["x"] = 1
    if isinstance(r.solution, np.ndarray):
        with pytest.raises(ValueError):
            r.solution[(0,) * r.solution.ndim] = 1.0


def cvxpy_weighted_sum(W, weights=None):
    """min Σ_j ω_j w_j X⁻¹ w_jᵀ  s.t.  diag X ≤ 1, X ≻ 0 (the Gaussian matrix mechanism)."""
    n = W.shape[1]
    om = np.ones(W.shape[0]) if weights is None else np.asarray(weights, dtype=float)
    X = cp.Variable((n, n), PSD=True)
    prob = cp.Problem(cp.Minimize(cp.matrix_frac((np.sqrt(om)[:, None] * W).T, X)), [cp.diag(X) <= 1])
    prob.solve(solver="CLARABEL")
    return prob.value


def cvxpy_max_ratio(W, c):
    """min_X max_j w_j X⁻¹ w_jᵀ / c_j  s.t.  diag X ≤ 1 (fitness-for-use Problem 1, t* = Δ²_opt)."""
    n = W.shape[1]
    X = cp.Variable((n, n), PSD=True)
    t = cp.Variable()
    cons = [cp.diag(X) <= 1] + [cp.matrix_frac(W[j], X) <= c[j] * t for j in range(W.shape[0])]
    prob = cp.Problem(cp.Minimize(t), cons)
    prob.solve(solver="CLARABEL")
    return prob.value


def test_shared_type_is_frozen_and_validates_status():
    r = SolverResult(solution=np.ones(2), objective=1.0, lower_bound=1.0, gap=0.0,
                     status="optimal", iterations=0, extras={"a": np.zeros(1)})
    check_certificate(r)
    with pytest.raises(ValueError):
        r.extras["a"][0] = 1.0  # arrays inside extras are read-only too
    with pytest.raises(ValueError, match="status"):
        SolverResult(solution=None, objective=1.0, lower_bound=1.0, gap=0.0, status="done", iterations=0)


def test_min_cost_hand_optimum():
    # min 1/x1 + 1/x2 s.t. x1 + x2 <= 1: x = (1/2, 1/2), value 4 (by symmetry and AM-HM)
    r = solve_min_cost(np.array([1.0, 1.0]), sp.csr_matrix([[1.0, 1.0]]), tol=1e-9)
    check_certificate(r)
    assert r.status == "optimal" and r.gap <= 1e-9
    assert r.objective == pytest.approx(4.0, rel=1e-9)
    np.testing.assert_allclose(r.solution, [0.5, 0.5], rtol=1e-6)
    # multipliers: stationarity 1/x² = λ gives λ = 4
    assert r.multipliers[0] == pytest.approx(4.0, rel=1e-6)


def test_max_variance_hand_optimum():
    # min max(x1, 2 x2) s.t. 1/x1 + 1/x2 <= 1: x1 = 2 x2 = v, 1/v + 2/v = 1, v = 3
    r = solve_max_variance(np.array([1.0, 1.0]), np.diag([1.0, 2.0]), 1.0, tol=1e-9)
    check_certificate(r)
    assert r.objective == pytest.approx(3.0, rel=1e-8)
    assert r.pcost == pytest.approx(1.0, rel=1e-12)


def test_lowdim_optimal_matches_cvxpy():
    r = optimize_subworkload(PREFIX2, tol=1e-8, cache=False)
    check_certificate(r, rel=1e-9)
    assert r.loss == pytest.approx(cvxpy_weighted_sum(PREFIX2), rel=1e-6)


def test_weighted_sum_matches_cvxpy():
    w = np.array([1.0, 3.0])
    r = solve_weighted_sum(PREFIX2, w, tol=1e-8)
    check_certificate(r, rel=1e-9)
    assert r.objective == pytest.approx(cvxpy_weighted_sum(PREFIX2, w), rel=1e-6)


def test_fitness_problem1_matches_cvxpy():
    c = np.array([1.0, 2.0])
    ref = cvxpy_max_ratio(PREFIX2, c)
    r = solve_min_privacy_cost(PREFIX2, c, tol=1e-8)
    check_certificate(r, rel=1e-9)
    assert r.objective == r.privacy_cost == pytest.approx(ref, rel=1e-6)
    # fixed cost P: the least largest ratio is Δ²_opt / P, certified by lower_bound / P
    f = solve_min_target_ratio(PREFIX2, c, pcost=2.0, tol=1e-8)
    check_certificate(f, rel=1e-9)
    assert f.objective == pytest.approx(ref / 2.0, rel=1e-6)
    assert f.cost_lower_bound <= ref * (1 + 1e-6)


def test_maxvar_strategy_matches_cvxpy():
    c = np.array([1.0, 2.0])
    r = optimize_maxvar_strategy(PREFIX2, c, tol=1e-6)
    check_certificate(r, rel=1e-9)
    assert r.converged and r.max_variance == pytest.approx(cvxpy_max_ratio(PREFIX2, c), rel=1e-6)


def test_lsa_identity_and_total():
    # identity workload: the identity strategy is optimal, error tr(I) = n = SVD bound n²/n
    r = lsa(np.eye(4))
    check_certificate(r)
    assert r.status == "heuristic"  # (LSA keeps tying levels: here copies of the identity)
    assert r.objective == pytest.approx(4.0, rel=1e-12)
    assert r.lower_bound == pytest.approx(4.0, rel=1e-12)
    # the total query over 4 cells: σ(W) = 2, SVD bound 2²/4 = 1; one level (the whole domain)
    # gives sensitivity² 2 and error 2·tr(J (I + J)⁻¹) = 2·(4 − 16/5) = 1.6
    t = lsa(np.ones((1, 4)))
    check_certificate(t)
    assert t.lower_bound == pytest.approx(1.0, rel=1e-12)
    assert t.objective <= 1.6 * (1 + 1e-12)


def test_budget_splits():
    # cube root (closed form, optimal): s = (2, 2), C = (1, 1), ε = 1 → (2^{1/3} + 2^{1/3})³ = 16
    r = cube_root_split([2.0, 2.0], [1.0, 1.0], 1.0)
    check_certificate(r)
    assert r.status == "optimal" and r.objective == pytest.approx(16.0, rel=1e-12)
    # uniform: s = (1, 8), η = 1/2 each → 4 + 32 = 36, bounded by the cube-root optimum 27
    u = uniform_split([1.0, 8.0], [1.0, 1.0], 1.0)
    check_certificate(u)
    assert (u.objective, u.lower_bound) == pytest.approx((36.0, 27.0), rel=1e-12)
    # the convex program on a groupable strategy (a total row + two unit rows, column norms 1
    # per group) equals the cube-root value: x = 1/2 everywhere, 2/¼ + 1/¼ + 1/¼ = 16
    S = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    v = convex_budget_split(S, np.array([2.0, 1.0, 1.0]), 1.0)
    check_certificate(v)
    assert v.status == "optimal" and v.gap <= 1e-6
    assert v.objective == pytest.approx(16.0, rel=1e-6)


def test_pidentity_bound_is_the_svd_bound():
    # identity workload over 3 cells: SVD bound (Σσ)²/n = 9/3 = 3, reached by Θ = 0
    r = optimize_pidentity(np.eye(3), 1, center=False, rng=np.random.default_rng(0), restarts=2)
    check_certificate(r, rel=1e-9)
    assert r.status == "heuristic"
    assert r.lower_bound == pytest.approx(3.0, rel=1e-12)
    assert r.loss >= 3.0 * (1 - 1e-12)
