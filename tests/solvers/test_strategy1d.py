import itertools

import numpy as np
import pytest

from dpmatrix._linalg.attribute_queries import all_ranges, identity, prefix
from dpmatrix._mechanisms.basis import attribute_basis
from dpmatrix._solvers.strategy1d import (
    default_p,
    optimize_pidentity,
    optimized_strategy,
    pidentity_loss_and_grad,
    pidentity_strategy,
    strategy_matrix,
)
from dpmatrix.errors import WorkloadError


def centred(W):
    n = W.shape[1]
    return W @ (np.eye(n) - np.ones((n, n)) / n)


def explicit_loss(W, S):
    """||W_c S⁺||_F² times the squared L2 sensitivity (max column norm²) of S."""
    Wc = centred(W)
    return np.sum((Wc @ np.linalg.pinv(S)) ** 2) * np.max(np.sum(S**2, axis=0))


def test_default_p():
    assert default_p(1) == 1 and default_p(16) == 1 and default_p(17) == 2 and default_p(64) == 4


def test_pidentity_strategy_unit_columns_and_loss_value():
    rng = np.random.default_rng(0)
    theta = rng.random((2, 6))
    A = pidentity_strategy(theta)
    assert A.shape == (8, 6)
    assert np.allclose(np.linalg.norm(A, axis=0), 1.0)
    W = prefix(6)
    G = centred(W).T @ centred(W)
    loss, _ = pidentity_loss_and_grad(theta.ravel(), G, 2)
    assert loss == pytest.approx(np.sum((centred(W) @ np.linalg.pinv(A)) ** 2), rel=1e-10)


@pytest.mark.parametrize("W,p", [(prefix(7), 2), (all_ranges(5), 1), (prefix(12), 3)])
def test_gradient_matches_finite_differences(W, p):
    n = W.shape[1]
    G = centred(W).T @ centred(W)
    rng = np.random.default_rng(1)
    x = rng.random(p * n)
    _, g = pidentity_loss_and_grad(x, G, p)
    h = 1e-6
    fd = np.empty_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e[k] = h
        fd[k] = (pidentity_loss_and_grad(x + e, G, p)[0] - pidentity_loss_and_grad(x - e, G, p)[0]) / (2 * h)
    assert np.allclose(g, fd, rtol=1e-5, atol=1e-6 * np.abs(fd).max())


@pytest.mark.parametrize("n", [8, 16, 32])
def test_optimized_prefix_beats_workload_and_identity(n):
    W = prefix(n)
    S = optimized_strategy(W, seed=0)
    opt = explicit_loss(W, S)
    assert opt < explicit_loss(W, W)
    assert opt < explicit_loss(W, np.eye(n))


def test_deterministic_given_seed_and_no_global_state():
    W = all_ranges(6)
    np.random.seed(123)
    r1 = optimize_pidentity(W, 2, rng=np.random.default_rng(7), restarts=3)
    np.random.seed(999)  # global state must not matter
    r2 = optimize_pidentity(W, 2, rng=np.random.default_rng(7), restarts=3)
    assert np.array_equal(r1.S, r2.S)
    assert r1.losses == r2.losses
    with pytest.raises(TypeError):
        optimize_pidentity(W, 2, rng=np.random.RandomState(0))


def test_cache_returns_same_readonly_array():
    W = prefix(10)
    S1 = optimized_strategy(W, seed=3)
    S2 = optimized_strategy(W.copy(), seed=3)
    assert S1 is S2
    assert not S1.flags.writeable


def test_strategy_matrix_modes():
    assert np.array_equal(strategy_matrix(identity(5)), np.eye(5))  # RP's case
    assert np.array_equal(strategy_matrix(prefix(5), "identity"), np.eye(5))
    assert np.array_equal(strategy_matrix(prefix(5), "workload"), prefix(5))
    S = strategy_matrix(prefix(5), "optimize")
    assert S.shape == (5 + default_p(5), 5)
    user = all_ranges(4)
    assert np.array_equal(strategy_matrix(prefix(4), user), user)
    # auto is never worse (in the RP+ per-attribute factor beta * trace_in) than I or W
    W = prefix(8)
    cost = lambda S: attribute_basis(W, S).beta * attribute_basis(W, S).trace_in
    Sa = strategy_matrix(W)
    assert cost(Sa) <= min(cost(np.eye(8)), cost(W)) + 1e-12


def test_strategy_matrix_bad_inputs():
    with pytest.raises(WorkloadError, match="unknown strategy"):
        strategy_matrix(prefix(4), "wavelet9")
    with pytest.raises(WorkloadError, match="columns"):
        strategy_matrix(prefix(4), np.eye(3))
    with pytest.raises(WorkloadError, match="non-finite"):
        strategy_matrix(prefix(3), np.array([[1, np.inf, 0], [0, 1, 0], [0, 0, 1]]))
    with pytest.raises(WorkloadError, match="cannot answer"):
        strategy_matrix(prefix(3), [[1, 1, 0], [1, 1, 1]])


# ------------------------------------------------------------ paper sanity number (Table 11)


def rp_plus_rmse_kron(W, S, d):
    """RMSE of the single generalized marginal ⊗_{i<d} W (all d attributes, same W and S).

    closure = all subsets A of the d attributes; p_A = Π_{i∈A} beta_i (Thm 7.1),
    v_A = Π_{i∈A} trace_in_i Π_{i∉A} trace_out_i (Thm 7.2); Lemma 2 with privacy cost c = 1:
    T = (Σ_A sqrt(v_A p_A))² / c,  σ²_A = sqrt(T p_A / (c v_A)),  RMSE = sqrt(T / #queries).
    """
    b = attribute_basis(W, S)
    c = 1.0
    closure = [A for k in range(d + 1) for A in itertools.combinations(range(d), k)]
    p = {A: b.beta ** len(A) for A in closure}
    v = {A: b.trace_in ** len(A) * b.trace_out ** (d - len(A)) for A in closure}
    T = sum(np.sqrt(v[A] * p[A]) for A in closure) ** 2 / c
    sig2 = {A: np.sqrt(T * p[A] / (c * v[A])) for A in closure}
    # the σ² really spend the budget and achieve T
    assert sum(p[A] / sig2[A] for A in closure) == pytest.approx(c)
    assert sum(v[A] * sig2[A] for A in closure) == pytest.approx(T)
    return np.sqrt(T / W.shape[0] ** d)


@pytest.mark.parametrize(
    "n,paper,lo,hi",
    [
        # n = 2: every strategy gives the same Sub (1-dim centred space): 1.498 vs 1.50 (-0.15 %)
        (2, 1.50, -0.02, 0.02),
        # n = 4: ours 2.484, 2.2 % BELOW (better than) the paper's 2.54.  (With HDMM's p = 1
        # we get 2.587, +1.9 %; the paper's HDMM PIdentity is L1-normalised with p = n//16.)
        (4, 2.54, -0.03, 0.02),
        # n = 8: ours 4.008 vs 4.01 (-0.05 %)
        (8, 4.01, -0.02, 0.02),
    ],
)
def test_table11_kron_prefix_d3(n, paper, lo, hi):
    W = prefix(n)
    rmse = rp_plus_rmse_kron(W, strategy_matrix(W, "pidentity"), 3)
    assert lo <= rmse / paper - 1 <= hi, rmse


# Table 11, d = 3, with the default "optimal" strategy (certified per-attribute optimum of
# beta · trace_in, QuerySmasher eq. 4 on the centred prefix workload): never above the paper,
# whose HDMM strategies are feasible points of the same problem. Measured (signed vs paper):
# n=2 1.50 (-0.2%), 4 2.43 (-4.3%), 8 3.73 (-7.0%), 16 5.48 (-6.9%), 32 7.74 (-6.0%).
@pytest.mark.parametrize("n,paper", [(2, 1.50), (4, 2.54), (8, 4.01), (16, 5.89), (32, 8.23)])
def test_table11_optimal_strategy_never_above_paper(n, paper):
    from dpmatrix._solvers.lowdim_optimal import optimize_subworkload
    from dpmatrix._solvers.strategy1d import centered, rp_attribute_cost

    W = prefix(n)
    S = strategy_matrix(W)  # default: optimal
    rmse = rp_plus_rmse_kron(W, S, 3)
    assert rmse <= paper * 1.0034  # printed values are rounded to 2 decimals
    # certificate: the per-attribute factor is within the solver's duality gap of its lower bound
    mech = optimize_subworkload(centered(W), sizes=(n,), tol=1e-6)
    assert rp_attribute_cost(W, S) <= mech.lower_bound * (1 + 1e-5)
    assert rp_attribute_cost(W, S) <= rp_attribute_cost(W, strategy_matrix(W, "pidentity")) * (1 + 1e-9)


def test_table11_identity_strategy_n2_matches_exactly():
    # n = 2 hand check: a = sqrt(beta trace_in) = 1/2, sqrt(trace_out) = sqrt(5)/2,
    # RMSE = ((a + sqrt(5)/2) / sqrt 2)^3 = 1.4976...
    expected = ((0.5 + np.sqrt(5) / 2) / np.sqrt(2)) ** 3
    assert rp_plus_rmse_kron(prefix(2), np.eye(2), 3) == pytest.approx(expected)
    assert round(expected, 2) == 1.50
