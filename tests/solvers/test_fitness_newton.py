"""Newton on the fitness-for-use dual (solvers/fitness_newton.py) and its helpers.

References are independent of the code under test: an SDP written here from the problem
statement (CVXPY), the previous first-order solver (``method="fixed_point"``, no reduction, no
Newton) whose certified interval [lower bound, cost] must overlap the new one, closed forms
(a diagonal instance), finite differences of the dual's gradient for its Hessian, and ``1/x``
itself for the exponential sums.  No wall-clock assertion: timings are in
``benchmarks/bench_targets.py --scale``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fitness_paper_workloads import (
    marginals_workload,
    random_pm1_workload,
    random_range_workload,
    random_targets,
)

import dpmatrix._solvers.fitness_newton as fn
from dpmatrix._solvers.expsum import reciprocal_expsum
from dpmatrix._solvers.fitness import solve_min_privacy_cost
from dpmatrix._solvers.fitness_reduction import identity_reduction, reduce_instance


def sdp_problem1(W, c):
    """min α s.t. X_ii ≤ α and w_j X⁻¹ w_jᵀ ≤ c_j, i.e. [[X, w_jᵀ], [w_j, c_j]] ⪰ 0 (W full rank)."""
    cp = pytest.importorskip("cvxpy")
    m, n = W.shape
    X = cp.Variable((n, n), symmetric=True)
    a = cp.Variable()
    cons = [cp.diag(X) <= a] + [cp.bmat([[X, W[j][:, None]], [W[j][None, :], np.array([[c[j]]])]]) >> 0
                                for j in range(m)]
    prob = cp.Problem(cp.Minimize(a), cons)
    prob.solve(solver="CLARABEL" if "CLARABEL" in cp.installed_solvers() else "SCS")
    assert prob.status == "optimal"
    return float(a.value)


def explicit_cost_and_variances(W, A):
    """Privacy cost max diag AᵀA and variances w (AᵀA)⁺ wᵀ of a strategy A (numpy only)."""
    G = A.T @ A
    return float(np.max(np.diag(G))), np.einsum("ij,jk,ik->i", W, np.linalg.pinv(G), W)


def assert_intervals_overlap(a, b):
    """Two certified results: each one's lower bound is at most the other's achieved cost."""
    assert a.status == "optimal" and b.status == "optimal"
    assert a.lower_bound <= b.privacy_cost * (1 + 1e-12)
    assert b.lower_bound <= a.privacy_cost * (1 + 1e-12)


# ---------------------------------------------------------------------------------------------
# Against an independent SDP and against the previous solver
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_newton_matches_an_independent_sdp(seed):
    rng = np.random.default_rng(100 + seed)
    d = 7
    W = np.vstack([random_range_workload(d, rng), np.eye(d)])  # full column rank
    c = random_targets(W.shape[0], rng)
    res = solve_min_privacy_cost(W, c)
    assert res.status == "optimal" and res.gap <= 1e-6
    assert res.privacy_cost == pytest.approx(sdp_problem1(W, c), rel=1e-4)  # SDP solver accuracy
    cost, var = explicit_cost_and_variances(W, np.asarray(res.strategy))
    assert cost == pytest.approx(res.privacy_cost, rel=1e-9)
    assert np.max(var / c) == pytest.approx(1.0, rel=1e-7)


@pytest.mark.parametrize("kind", ["range", "pm1", "marginals"])
@pytest.mark.parametrize("uniform", [True, False])
def test_newton_agrees_with_the_fixed_point_solver(kind, uniform):
    rng = np.random.default_rng(7)
    W = {"range": lambda: random_range_workload(48, rng), "pm1": lambda: random_pm1_workload(24, rng),
         "marginals": lambda: marginals_workload(4)}[kind]()  # marginals: rank 37 < 64 cells
    c = 1.0 if uniform else random_targets(W.shape[0], rng)
    new = solve_min_privacy_cost(W, c)
    old = solve_min_privacy_cost(W, c, method="fixed_point")
    assert new.gap <= 1e-6
    assert_intervals_overlap(new, old)
    cost, var = explicit_cost_and_variances(W, np.asarray(new.strategy))
    assert cost == pytest.approx(new.privacy_cost, rel=1e-9)
    assert np.all(var <= np.broadcast_to(c, var.shape) * (1 + 1e-7))


@pytest.mark.slow
@pytest.mark.parametrize("d", [128, 256])
def test_newton_agrees_with_the_fixed_point_solver_mid_size(d):
    # the benchmark's scale instances (bench_targets.py seeds), both target kinds
    rng = np.random.default_rng(10_000 + d)
    W = random_range_workload(d, rng)
    for c in (1.0, random_targets(W.shape[0], rng)):
        new = solve_min_privacy_cost(W, c)
        assert new.gap <= 1e-6
        assert_intervals_overlap(new, solve_min_privacy_cost(W, c, method="fixed_point"))


# ---------------------------------------------------------------------------------------------
# Cells with zero optimal weight: the primal completion
# ---------------------------------------------------------------------------------------------


def test_inactive_cell_is_completed(monkeypatch):
    # Identity with targets (1, 1, 1/4, 100): X = diag(1, 1, 4, 0.01) is optimal (Δ² = 4 = the
    # third cell's 1/c); cells 0, 1 and 3 are strictly inactive (X_ii < 4), their dual weight
    # is 0 and Newton drops them, so X must be completed.
    calls = []
    real = fn._complete
    monkeypatch.setattr(fn, "_complete", lambda *a: calls.append(1) or real(*a))
    W = np.vstack([np.eye(4), np.ones((1, 4))])
    c = np.array([1.0, 1.0, 0.25, 100.0, 1e6])
    res = solve_min_privacy_cost(W, c)
    assert calls, "the completion was not used"
    assert res.status == "optimal" and res.privacy_cost == pytest.approx(4.0, rel=1e-6)
    cost, var = explicit_cost_and_variances(W, np.asarray(res.strategy))
    assert cost == pytest.approx(res.privacy_cost, rel=1e-9) and np.all(var <= c * (1 + 1e-7))


def test_degenerate_random_instance_with_completion_matches_the_previous_solver(monkeypatch):
    # d = 32 random ranges, uniform(1, 10) targets (bench seed): one cell has zero optimal weight
    calls = []
    real = fn._complete
    monkeypatch.setattr(fn, "_complete", lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(10_032)
    W = random_range_workload(32, rng)
    c = random_targets(W.shape[0], rng)
    new = solve_min_privacy_cost(W, c)
    assert calls and new.gap <= 1e-6
    assert_intervals_overlap(new, solve_min_privacy_cost(W, c, method="fixed_point"))


# ---------------------------------------------------------------------------------------------
# Pieces: Hessian, exponential sums, reduction, warm start
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [1e-10, fn._HESSIAN_EPS])
def test_dual_hessian_matches_finite_differences_of_the_gradient(monkeypatch, eps):
    # ∇φ = (½ r, ½ x) (envelope theorem), checked by φ's homogeneity; the Hessian
    # −½ Σ_ab c_ab²/(s_a + s_b) against central differences of that gradient.  With an accurate
    # exponential sum it is exact up to single precision; with the solver's (1 %) every
    # quadratic form dᵀHd is within that relative error (all terms of the sum are positive).
    monkeypatch.setattr(fn, "_HESSIAN_EPS", eps)
    rng = np.random.default_rng(3)
    F = np.vstack([random_range_workload(10, rng), np.eye(10)]) / 3.0
    m, n = F.shape
    lam = rng.uniform(0.5, 1.5, m)
    lam /= lam.sum()
    mu = rng.uniform(0.5, 1.5, n)
    mu /= mu.sum()

    def grad(l, u):
        pt = fn._evaluate(F, np.sqrt(l), np.sqrt(u), n, True)
        return 0.5 * np.concatenate([pt.r, pt.x]), pt

    _, pt = grad(lam, mu)
    assert lam @ pt.r == pytest.approx(pt.phi, rel=1e-10) and mu @ pt.x == pytest.approx(pt.phi, rel=1e-10)
    H = fn._build_hessian(pt, np.arange(m)).H
    for _ in range(3):
        d = rng.standard_normal(m + n) * np.concatenate([lam, mu])
        h = 1e-5
        fd = (grad(lam + h * d[:m], mu + h * d[m:])[0] - grad(lam - h * d[:m], mu - h * d[m:])[0]) / (2 * h)
        assert d @ H @ d == pytest.approx(d @ fd, rel=2 * max(eps, 1e-5))
        if eps < 1e-6:
            assert np.linalg.norm(H @ d - fd) <= 1e-4 * np.linalg.norm(fd)


@pytest.mark.parametrize("lo, hi, eps", [(1e-6, 1.0, 1e-2), (1.0, 50.0, 1e-8), (3e-3, 7.0, 1e-4)])
def test_reciprocal_expsum_accuracy(lo, hi, eps):
    w, r = reciprocal_expsum(lo, hi, eps)
    x = np.geomspace(lo, hi, 500)
    err = np.abs(x * (w[None, :] * np.exp(-np.outer(x, r))).sum(axis=1) - 1)
    assert err.max() <= 20 * eps
    with pytest.raises(ValueError):
        reciprocal_expsum(0.0, 1.0, 1e-3)


def test_reduction_is_exact_and_merges_proportional_rows_and_cells():
    rng = np.random.default_rng(5)
    base = rng.standard_normal((6, 4))
    # columns: cell 4 = −0.5 × cell 1, cell 5 = cell 2, cell 6 untouched by any query
    F = np.hstack([base, -0.5 * base[:, [1]], base[:, [2]], np.zeros((6, 1))])
    F = np.vstack([F, 0.3 * F[0], -F[2]])  # rows 6, 7 along rows 0, 2 (not larger)
    red = reduce_instance(F)
    assert red.rows.tolist() == [0, 1, 2, 3, 4, 5] or set(red.rows) >= {0, 1, 3, 4, 5}
    assert red.matrix.shape == (6, 4)
    np.testing.assert_allclose(red.matrix @ red.expand, F[red.rows], atol=1e-12)
    assert np.all(np.abs(red.expand).max(axis=0) <= 1.0 + 1e-12)
    assert np.all(red.expand[:, 6] == 0)
    ident = identity_reduction(F)
    np.testing.assert_array_equal(ident.matrix @ ident.expand, F)
    # the optimum is unchanged (duplicated cells make W rank-deficient: the previous solver
    # works in the row space, the new one on the reduced matrix)
    W = np.vstack([np.eye(3), np.ones((1, 3)), [[1.0, 1.0, 0.0]]])
    W = np.hstack([W, W[:, [0]]])  # a duplicated cell
    W = np.vstack([W, 2 * W[1]])  # a parallel query with a looser target below
    c = np.array([1.0, 2.0, 1.0, 3.0, 1.5, 8.0])
    assert_intervals_overlap(solve_min_privacy_cost(W, c), solve_min_privacy_cost(W, c, method="fixed_point"))


def test_warm_start_returns_simplex_weights_and_a_valid_bound():
    rng = np.random.default_rng(9)
    W = random_range_workload(20, rng)
    c = random_targets(W.shape[0], rng)
    red = reduce_instance(W / np.sqrt(c)[:, None])
    lam, mu, low = fn.warm_start(red.matrix, rank=red.matrix.shape[1], evaluations=10)
    assert lam.sum() == pytest.approx(1.0) and mu.sum() == pytest.approx(1.0)
    assert np.all(lam >= 0) and np.all(mu >= 0)
    ref = solve_min_privacy_cost(W, c, method="fixed_point")
    assert low <= ref.privacy_cost * (1 + 1e-9)


def test_unknown_method_is_a_plan_error():
    from dpmatrix.errors import PlanError

    with pytest.raises(PlanError, match="method"):
        solve_min_privacy_cost(np.eye(2), 1.0, method="bfgs")
