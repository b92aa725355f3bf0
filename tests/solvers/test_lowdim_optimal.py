"""Tests for the optimal low-dimensional matrix mechanism (QuerySmasher section 6.3, eq. 4).

Expected values come from hand derivations (written out next to each test) or from an
independent generic SDP solve with CVXPY, never from the code under test.
"""

from __future__ import annotations

import math
from functools import reduce

import numpy as np
import pytest

from dpmatrix._solvers.lowdim_optimal import (
    LowDimMechanism,
    clear_cache,
    optimize_subworkload,
    strategy_loss,
    svd_lower_bound,
)
from dpmatrix.errors import PlanError
from dpmatrix.planners._querysmasher.decompose import decompose_batch


def centred(Q, sizes):
    """Project rows of Q onto the residual space of all attributes (test-only, explicit)."""
    P = reduce(np.kron, [np.eye(n) - np.ones((n, n)) / n for n in sizes])
    return np.asarray(Q, float) @ P


def prefix(n):
    return np.tril(np.ones((n, n)))


# ------------------------------------------------------------------------------------------
# Paper-style totals for a one-attribute prefix workload, by hand.
#
# Workload: all n prefix queries "A <= c", c = 0..n-1, weight 1.  QuerySmasher splits each query
# into its total-count piece q_{} = (c+1)/n (residual space {}, one cell) and its centred piece
# q_{A} (residual space {A}).  Sub-workload {}: a 1-cell problem, optimum V = 1, so
# L_{} = Σ_c ((c+1)/n)²  (= 5/4 for n = 2, 14/9 for n = 3).
# Sub-workload {A}:
#   n = 2: one nonzero row [1/2, -1/2] = u/√2, u = [1,-1]/√2; best B = b uᵀ with b²/2 = 1, so the
#          variance is (1/2)/b² = 1/4:  L_{A} = 1/4.
#   n = 3: rows [2/3,-1/3,-1/3], [1/3,1/3,-2/3] (and 0).  Upper bound: B ∝ I - J/3 scaled to
#          pcost 1, i.e. BᵀB = (3/2)(I - J/3): variance = (2/3)(‖w1‖² + ‖w2‖²) = (2/3)(4/3) = 8/9.
#          Lower bound with cell weights w = (1/2, 0, 1/2): W diag(w) Wᵀ has eigenvalues 1/2 and
#          1/18, so ‖W diag(w)^{1/2}‖_*² = (1/√2 + 1/(3√2))² = 8/9.  Hence L_{A} = 8/9 exactly.
# Section 6.4 (σ²_{A'} ∝ 1/sqrt(L_{A'})) gives the total at privacy cost 1 = (Σ sqrt(L_{A'}))²:
#   n = 2: (√5/2 + 1/2)² = (3 + √5)/2;   n = 3: (√14/3 + √8/3)² = (22 + 8√7)/9.
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, L_empty, L_A, total",
    [
        (2, 5 / 4, 1 / 4, (3 + math.sqrt(5)) / 2),
        (3, 14 / 9, 8 / 9, (22 + 8 * math.sqrt(7)) / 9),
    ],
)
def test_one_attribute_prefix_totals(n, L_empty, L_A, total):
    clear_cache()
    parts = decompose_batch(prefix(n), (n,))
    m0 = optimize_subworkload(parts[()], sizes=(), tol=1e-8)
    mA = optimize_subworkload(parts[(0,)], sizes=(n,), tol=1e-8)
    for mech, exact in ((m0, L_empty), (mA, L_A)):
        assert mech.lower_bound <= exact * (1 + 1e-9)
        assert mech.loss >= exact * (1 - 1e-9)
        assert mech.loss == pytest.approx(exact, rel=1e-7)
        assert mech.pcost == pytest.approx(1.0, abs=1e-12)
    got = (math.sqrt(m0.loss) + math.sqrt(mA.loss)) ** 2
    assert got == pytest.approx(total, rel=1e-7)


def test_hand_certificate_for_size_3_prefix_is_independent_of_solver():
    W = centred(prefix(3), (3,))
    # centred identity strategy: upper bound 8/9
    pc, L = strategy_loss(np.eye(3) - np.ones((3, 3)) / 3, W)
    assert L == pytest.approx(8 / 9, rel=1e-12)
    # dual weights (1/2, 0, 1/2): lower bound 8/9
    assert svd_lower_bound(W, None, np.array([0.5, 0.0, 0.5])) == pytest.approx(8 / 9, rel=1e-12)
    # uniform weights give a strictly weaker bound (the classical SVD bound)
    assert svd_lower_bound(W) < 8 / 9 - 0.05


# ------------------------------------------------------------------------------------------
# Random sub-workloads: certified gap, independent re-evaluation of both bounds.
# ------------------------------------------------------------------------------------------


def _random_subworkload(rng, sizes, kind):
    N = int(np.prod(sizes))
    m = int(rng.integers(1, 2 * N + 1))
    if kind == "counting":
        Q = (rng.random((m, N)) < rng.uniform(0.1, 0.6)).astype(float)
    elif kind == "gaussian":
        Q = rng.normal(size=(m, N))
    elif kind == "lowrank":
        Q = rng.normal(size=(m, 2)) @ rng.normal(size=(2, N))
    else:  # prefix-like step functions
        Q = np.cumsum(rng.random((m, N)) < 0.15, axis=1).astype(float)
    return centred(Q, sizes)


@pytest.mark.parametrize("seed", range(12))
def test_random_subworkloads_reach_certified_gap(seed):
    rng = np.random.default_rng(100 + seed)
    sizes = [(5,), (8,), (3, 4), (4, 5), (6, 10), (2, 3, 5), (3, 4, 5)][seed % 7]
    kind = ["counting", "gaussian", "lowrank", "prefix"][seed % 4]
    W = _random_subworkload(rng, sizes, kind)
    weights = np.exp(rng.normal(scale=1.5, size=W.shape[0])) if seed % 2 else None
    mech = optimize_subworkload(W, weights, sizes=sizes, tol=1e-3, cache=False)
    assert isinstance(mech, LowDimMechanism)
    assert mech.converged and mech.gap <= 1e-3
    assert 0 < mech.lower_bound <= mech.loss
    # independent re-evaluation of the upper bound (loss of the returned strategy) ...
    pc, L = strategy_loss(mech.B, W, weights)
    assert pc == pytest.approx(1.0, abs=1e-9)
    assert L == pytest.approx(mech.loss, rel=1e-8)
    # ... and of the certificate, from the returned dual cell weights
    lb = svd_lower_bound(W, weights, mech.dual_weights)
    assert lb == pytest.approx(mech.lower_bound, rel=1e-6)
    assert (L - lb) / L <= 1e-3 * (1 + 1e-6)
    # the classical uniform-weight SVD bound is also below the loss
    assert svd_lower_bound(W, weights) <= L * (1 + 1e-12)
    # unbiased reconstruction / variance formula
    x = rng.poisson(3.0, size=W.shape[1]).astype(float)
    np.testing.assert_allclose(mech.reconstruct(W, mech.B @ x), W @ x, rtol=1e-8, atol=1e-8)
    assert np.all(mech.in_rowspace(W))
    var = mech.variance(W)
    w_ = np.ones(W.shape[0]) if weights is None else weights
    assert float(w_ @ var) == pytest.approx(mech.loss, rel=1e-10)
    np.testing.assert_allclose(np.diag(mech.covariance(W)), var, rtol=1e-10)


# ------------------------------------------------------------------------------------------
# Agreement with a generic SDP solver on tiny problems.
# ------------------------------------------------------------------------------------------


def _cvxpy_optimum(W, weights):
    cp = pytest.importorskip("cvxpy")
    F = np.sqrt(weights)[:, None] * W
    m, N = F.shape
    V = cp.Variable((N, N), PSD=True)
    T = cp.Variable((m, m), symmetric=True)
    # tr(Fᵀ F V⁺) = min tr(T) s.t. [[V, Fᵀ], [F, T]] ⪰ 0 (Schur complement)
    M = cp.bmat([[V, F.T], [F, T]])
    prob = cp.Problem(cp.Minimize(cp.trace(T)), [M >> 0, cp.diag(V) <= 1])
    try:
        prob.solve(solver="CLARABEL")
    except Exception:  # pragma: no cover - fallback solver
        prob.solve(solver="SCS", eps=1e-9, max_iters=200000)
    assert prob.status in ("optimal", "optimal_inaccurate")
    return prob.value


@pytest.mark.parametrize(
    "sizes, kind, seed",
    [((3,), "prefix", 0), ((4,), "counting", 1), ((2, 3), "gaussian", 2), ((3, 3), "counting", 3),
     ((2, 4), "lowrank", 4), ((5,), "gaussian", 5)],
)
def test_matches_cvxpy_sdp(sizes, kind, seed):
    rng = np.random.default_rng(seed)
    W = _random_subworkload(rng, sizes, kind)[:8]
    weights = rng.uniform(0.2, 3.0, size=W.shape[0])
    ref = _cvxpy_optimum(W, weights)
    mech = optimize_subworkload(W, weights, sizes=sizes, tol=1e-5, cache=False)
    assert mech.loss == pytest.approx(ref, rel=1e-3)
    # the certificate must hold against the SDP optimum too
    assert mech.lower_bound <= ref * (1 + 1e-5)


def test_matches_cvxpy_without_subspace():
    # general (not residual) workload: more queries than cells, sizes not given
    rng = np.random.default_rng(11)
    W = rng.normal(size=(7, 5))
    weights = rng.uniform(0.5, 2.0, size=7)
    ref = _cvxpy_optimum(W, weights)
    mech = optimize_subworkload(W, weights, tol=1e-5, cache=False)
    assert mech.loss == pytest.approx(ref, rel=1e-3)


# ------------------------------------------------------------------------------------------
# Marginal (identity) sub-workloads: ResidualPlanner is optimal.
# ------------------------------------------------------------------------------------------


def _sub(n):
    return np.hstack([np.ones((n - 1, 1)), -np.eye(n - 1)])


@pytest.mark.parametrize("sizes", [(2, 3), (3, 4), (5, 5), (2, 2, 3)])
def test_centred_identity_equals_residual_planner(sizes):
    N = int(np.prod(sizes))
    W = centred(np.eye(N), sizes)
    # ResidualPlanner: B = ⊗ Sub_{n_i} with noise covariance Σ = ⊗ Sub Subᵀ; whitened strategy
    # Σ^{-1/2} B.  Hand value: L = Π(n_i − 1) · Π(n_i − 1)/n_i (sum of variances Π(n_i − 1) at
    # σ² = 1 times the cost coefficient Π(n_i − 1)/n_i).
    hand = np.prod([n - 1 for n in sizes]) * np.prod([(n - 1) / n for n in sizes])
    B = reduce(np.kron, [_sub(n) for n in sizes])
    S = B @ B.T
    lam, U = np.linalg.eigh(S)
    Bw = (U / np.sqrt(lam)) @ U.T @ B
    pc, L_rp = strategy_loss(Bw, W)
    assert L_rp == pytest.approx(hand, rel=1e-12)
    assert pc == pytest.approx(np.prod([(n - 1) / n for n in sizes]), rel=1e-12)
    mech = optimize_subworkload(W, sizes=sizes, cache=False)
    assert mech.loss <= hand * (1 + 1e-9)
    assert mech.loss == pytest.approx(hand, rel=1e-3)
    assert mech.lower_bound >= hand * (1 - 1e-3)


# ------------------------------------------------------------------------------------------
# Bad input, convergence failure, cache, edge cases.
# ------------------------------------------------------------------------------------------


def test_bad_input_raises_value_error():
    W = centred(prefix(3), (3,))
    with pytest.raises(ValueError, match="nonnegative"):
        optimize_subworkload(W, [1.0, -1.0, 1.0], sizes=(3,))
    with pytest.raises(ValueError, match="NaN or infinite"):
        optimize_subworkload(np.where(W > 0.5, np.inf, W), sizes=(3,))
    with pytest.raises(ValueError, match="NaN or infinite"):
        optimize_subworkload(W, [1.0, np.nan, 1.0], sizes=(3,))
    with pytest.raises(ValueError, match="residual space"):
        optimize_subworkload(prefix(3), sizes=(3,))
    with pytest.raises(ValueError, match="residual space"):
        # centred along attribute 1 only, not along attribute 0
        Q = np.random.default_rng(0).normal(size=(4, 6)).reshape(4, 2, 3)
        optimize_subworkload((Q - Q.mean(axis=2, keepdims=True)).reshape(4, 6), sizes=(2, 3))
    with pytest.raises(ValueError, match="columns"):
        optimize_subworkload(W, sizes=(4,))
    with pytest.raises(ValueError, match="rows"):
        optimize_subworkload(W, [1.0, 1.0], sizes=(3,))
    with pytest.raises(ValueError, match="tol"):
        optimize_subworkload(W, sizes=(3,), tol=0.0)
    with pytest.raises(ValueError, match="2-d"):
        optimize_subworkload(np.zeros((0, 3)))


def _affine(n):
    a = np.arange(n)
    S = a[:, None] + a[None, :]
    return np.array([(S <= c).ravel() for c in range(2 * n - 1)], float)


def test_max_iter_raises_or_flags():
    W = centred(_affine(8), (8, 8))
    with pytest.raises(PlanError, match="did not reach"):
        optimize_subworkload(W, sizes=(8, 8), tol=1e-6, max_iter=3, cache=False)
    mech = optimize_subworkload(W, sizes=(8, 8), tol=1e-6, max_iter=3, strict=False, cache=False)
    assert not mech.converged and mech.gap > 1e-6
    # still a valid (feasible) mechanism with a valid certificate
    pc, L = strategy_loss(mech.B, W)
    assert pc <= 1 + 1e-9 and L == pytest.approx(mech.loss, rel=1e-8)
    full = optimize_subworkload(W, sizes=(8, 8), tol=1e-4, cache=False)
    assert mech.lower_bound <= full.loss and full.lower_bound <= mech.loss


def test_sparse_dual_affine_workload_converges():
    # affine queries A1 + A2 <= c: the optimal dual weights are sparse (multiplicative phase
    # stalls, L-BFGS-B phase finishes)
    W = centred(_affine(12), (12, 12))
    mech = optimize_subworkload(W, sizes=(12, 12), tol=1e-4, cache=False)
    assert mech.converged and mech.gap <= 1e-4
    assert svd_lower_bound(W, None, mech.dual_weights) == pytest.approx(mech.lower_bound, rel=1e-6)


def test_cache_reuses_identical_subworkloads():
    clear_cache()
    W = centred(prefix(6), (6,))
    a = optimize_subworkload(W, sizes=(6,))
    b = optimize_subworkload(W.copy(), sizes=(6,))
    c = optimize_subworkload(W[::-1].copy(), sizes=(6,))  # same WᵀDW, different row order
    assert b.B is a.B and c.B is a.B  # solved once
    assert b.loss == a.loss and c.loss == pytest.approx(a.loss, rel=1e-9)
    d = optimize_subworkload(W, 2 * np.ones(6), sizes=(6,))  # scaled Gram: same solution
    assert d.B is a.B and d.loss == pytest.approx(2 * a.loss, rel=1e-12)
    assert d.lower_bound == pytest.approx(2 * a.lower_bound, rel=1e-12)
    e = optimize_subworkload(W, sizes=(6,), cache=False)
    assert e.B is not a.B and e.loss == pytest.approx(a.loss, rel=1e-9)
    with pytest.raises(ValueError):  # arrays are read-only: cached objects cannot be corrupted
        a.B[0, 0] = 1.0


def test_zero_rows_zero_weights_and_empty():
    W = centred(prefix(4), (4,))  # last row (the total) centres to zero
    mech = optimize_subworkload(W, sizes=(4,), cache=False)
    assert mech.rank == 3
    weights = np.array([1.0, 0.0, 1.0, 1.0])
    m0 = optimize_subworkload(W, weights, sizes=(4,), cache=False)
    assert bool(m0.in_rowspace(W[1]))  # zero-weight query still answerable
    empty = optimize_subworkload(np.zeros((2, 4)), sizes=(4,), cache=False)
    assert empty.rank == 0 and empty.loss == 0.0


def test_moderate_size_is_fast():
    # 3-way prefix sub-workload on the residual space of (6, 6, 6): N = 216, r = 125
    sizes = (6, 6, 6)
    W = centred(reduce(np.kron, [prefix(6)] * 3), sizes)
    mech = optimize_subworkload(W, sizes=sizes, cache=False)
    assert mech.converged and mech.rank == 125
    # Kronecker workloads have Kronecker optima: the loss is the product of the 1-d optima
    one = optimize_subworkload(centred(prefix(6), (6,)), sizes=(6,), tol=1e-7, cache=False)
    assert mech.lower_bound <= one.loss ** 3 * (1 + 1e-6)
    assert mech.loss >= one.lower_bound ** 3 * (1 - 1e-6)
