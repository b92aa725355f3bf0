"""Fitness-for-use (Xiao et al., PVLDB 14(1)): Problem 1 solver, certificate, baselines.

Expected values come from the paper (Table 2, §5 worked examples, Tables 4 and 9–10), from hand
derivations (Theorem 7's closed form, IP's cost = largest squared row norm), and from an
independent CVXPY SDP written here from the problem statement (it never calls the solver).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fitness_paper_workloads import (  # noqa: E402
    age_pyramid_workload,
    identity_sum_workload,
    marginals_workload,
    pl94_workload,
    prefix_workload,
    random_pm1_workload,
    random_range_workload,
    random_targets,
)

from dpmatrix._solvers.fitness import (  # noqa: E402
    fitness_lower_bound,
    solve_min_privacy_cost,
    solve_min_target_ratio,
    solve_weighted_sum,
)
from dpmatrix._solvers.fitness_baselines import (  # noqa: E402
    baseline_costs,
    hierarchical_matrix,
    identity_gram,
    required_privacy_cost,
    sum_optimal_gram,
)
from dpmatrix.errors import PlanError  # noqa: E402

# --------------------------------------------------------------------------------------------
# Explicit-definition checks (numpy only)
# --------------------------------------------------------------------------------------------


def explicit_profile_and_variances(W, B, Sigma):
    """Paper Def. 3/4 from scratch: L with W = L B, profile diag(BᵀΣ⁻¹B), variances diag(LΣLᵀ)."""
    L = np.linalg.lstsq(B.T, W.T, rcond=None)[0].T
    assert np.allclose(L @ B, W, atol=1e-9)
    assert np.all(np.linalg.eigvalsh(Sigma) > 0)
    profile = np.diag(B.T @ np.linalg.inv(Sigma) @ B)
    variances = np.diag(L @ Sigma @ L.T)
    return profile, variances


def check_result(res, W, c):
    profile, var = explicit_profile_and_variances(W, np.asarray(res.basis), np.asarray(res.covariance))
    assert profile.max() == pytest.approx(res.privacy_cost, rel=1e-8)
    assert np.allclose(profile, res.privacy_profile, rtol=1e-7, atol=1e-9 * profile.max())
    assert np.allclose(var, res.variances, rtol=1e-7)
    assert np.all(var <= c * (1 + 1e-8))
    assert np.max(var / c) == pytest.approx(1.0, rel=1e-8)  # the binding target is met exactly
    assert res.lower_bound <= res.privacy_cost * (1 + 1e-12)
    assert res.gap == pytest.approx((res.privacy_cost - res.lower_bound) / res.privacy_cost, abs=1e-12)


# --------------------------------------------------------------------------------------------
# Table 2 and §5
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "d, paper", [(2, 1.33), (4, 1.76), (8, 2.28), (16, 2.91), (64, 4.46)]
)
def test_table2_prefix_privacy_cost(d, paper):
    W = prefix_workload(d)
    res = solve_min_privacy_cost(W, 1.0)
    assert res.status == "optimal" and res.gap <= 1e-6
    # Paper Table 2 prints 2 decimals; the certified bracket [lower, Δ²] must round to it.
    assert round(res.privacy_cost, 2) == paper
    assert round(res.lower_bound, 2) == paper
    check_result(res, W, np.ones(d))


def test_table2_d4_to_six_digits():
    res = solve_min_privacy_cost(prefix_workload(4), 1.0)
    assert res.lower_bound <= 1.758601 * (1 + 1e-6) and res.privacy_cost >= 1.758601 * (1 - 1e-6)
    assert res.privacy_cost == pytest.approx(1.758601, rel=1e-6)


def test_section5_prefix_d2_covariance():
    res = solve_min_privacy_cost(prefix_workload(2), 1.0, basis="identity")
    assert res.privacy_cost == pytest.approx(4 / 3, rel=1e-6)
    assert np.allclose(res.covariance, [[1.0, -0.5], [-0.5, 1.0]], atol=1e-5)


@pytest.mark.parametrize("d", [5, 8, 12])
def test_section5_identity_sum_theorem7(d):
    # Theorem 7 (d ≥ 5, targets γ = 1): Σ = ((d+1)/d) I − (1/d) J, Δ² = 2d / (d + 1).
    res = solve_min_privacy_cost(identity_sum_workload(d), 1.0, basis="identity")
    expected = (d + 1) / d * np.eye(d) - np.ones((d, d)) / d
    assert res.privacy_cost == pytest.approx(2 * d / (d + 1), rel=1e-6)
    assert np.allclose(res.covariance, expected, atol=1e-5)
    if d == 5:
        assert np.allclose(res.covariance, 1.2 * np.eye(5) - 0.2 * np.ones((5, 5)), atol=1e-5)
        assert res.privacy_cost == pytest.approx(5 / 3, rel=1e-6)


# --------------------------------------------------------------------------------------------
# Independent optimum: CVXPY SDP (Schur complements), written from Problem 1 only
# --------------------------------------------------------------------------------------------


def cvxpy_problem1(W, c):
    """min α s.t. X_ii ≤ α, w_j X⁻¹ w_jᵀ ≤ c_j ⇔ [[X, w_jᵀ], [w_j, c_j]] ⪰ 0 (X = BᵀΣ⁻¹B, B = I)."""
    cp = pytest.importorskip("cvxpy")
    m, n = W.shape
    X = cp.Variable((n, n), symmetric=True)
    alpha = cp.Variable()
    cons = [cp.diag(X) <= alpha]
    for j in range(m):
        w = W[j][:, None]
        cons.append(cp.bmat([[X, w], [w.T, np.array([[c[j]]])]]) >> 0)
    prob = cp.Problem(cp.Minimize(alpha), cons)
    solver = "CLARABEL" if "CLARABEL" in cp.installed_solvers() else "SCS"
    prob.solve(solver=solver)
    assert prob.status == "optimal"
    return float(alpha.value)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_optimum_matches_independent_sdp(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 6))
    m = int(rng.integers(n, 2 * n + 2))
    W = rng.integers(-1, 3, size=(m, n)).astype(float)
    W[np.all(W == 0, axis=1), 0] = 1.0
    W = np.vstack([W, np.eye(n)])  # full column rank so the SDP's X ≻ 0 optimum is attained
    c = rng.uniform(0.5, 5.0, size=W.shape[0])
    res = solve_min_privacy_cost(W, c)
    assert res.status == "optimal"
    ref = cvxpy_problem1(W, c)
    assert res.privacy_cost == pytest.approx(ref, rel=1e-4)  # interior-point solver accuracy
    assert res.lower_bound <= ref * (1 + 1e-4)
    check_result(res, W, c)


def test_weighted_sum_matches_independent_sdp():
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(7)
    W = np.vstack([rng.integers(0, 2, size=(6, 4)).astype(float), np.ones((1, 4)), np.eye(4)])
    om = rng.uniform(0.2, 3.0, size=W.shape[0])
    n = W.shape[1]
    X = cp.Variable((n, n), symmetric=True)
    T = cp.Variable((W.shape[0], W.shape[0]), symmetric=True)
    Wt = np.sqrt(om)[:, None] * W
    prob = cp.Problem(cp.Minimize(cp.trace(T)), [cp.diag(X) <= 1, cp.bmat([[X, Wt.T], [Wt, T]]) >> 0])
    prob.solve(solver="CLARABEL" if "CLARABEL" in cp.installed_solvers() else "SCS")
    res = solve_weighted_sum(W, om)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(prob.value, rel=1e-4)


# --------------------------------------------------------------------------------------------
# Certificate, bases, Problems 2–4, rank deficiency
# --------------------------------------------------------------------------------------------


def test_dual_bound_is_valid_for_any_weights_and_tight_at_returned_ones():
    rng = np.random.default_rng(3)
    W = random_range_workload(12, rng)
    c = random_targets(W.shape[0], rng)
    res = solve_min_privacy_cost(W, c)
    assert fitness_lower_bound(W, c, res.query_weights, res.cell_weights) == pytest.approx(
        res.lower_bound, rel=1e-9
    )
    for _ in range(5):  # weak duality: every (λ, μ) in the simplices gives a lower bound
        lam, mu = rng.random(W.shape[0]), rng.random(W.shape[1])
        assert fitness_lower_bound(W, c, lam, mu) <= res.privacy_cost * (1 + 1e-9)


def test_basis_choice_changes_sigma_not_the_mechanism():
    # Paper Thms. 2 and 4: the privacy profile and the variances do not depend on B.
    W, c = prefix_workload(6), np.linspace(1, 3, 6)
    results = [solve_min_privacy_cost(W, c, basis=b) for b in ("auto", "identity", "upper")]
    for r in results:
        check_result(r, W, c)
        assert r.privacy_cost == pytest.approx(results[0].privacy_cost, rel=1e-6)
        assert np.allclose(r.variances, results[0].variances, rtol=1e-5)


def test_rank_deficient_workload_uses_row_basis():
    W = marginals_workload(3)  # all 1- and 2-way marginals of 3 × 3 × 3: rank 27 − 8 = 19
    res = solve_min_privacy_cost(W, 1.0)
    assert res.basis.shape == (19, 27)
    check_result(res, W, np.ones(W.shape[0]))
    with pytest.raises(PlanError, match="rank"):
        solve_min_privacy_cost(W, 1.0, basis="identity")


def test_fixed_budget_problem_is_problem1_rescaled():
    rng = np.random.default_rng(11)
    W = random_range_workload(10, rng)
    c = random_targets(W.shape[0], rng)
    p1 = solve_min_privacy_cost(W, c)
    for P in (0.5, p1.privacy_cost, 7.0):
        p3 = solve_min_target_ratio(W, c, pcost=P)
        profile, var = explicit_profile_and_variances(W, np.asarray(p3.basis), np.asarray(p3.covariance))
        assert profile.max() == pytest.approx(P, rel=1e-8)
        assert np.max(var / c) == pytest.approx(p1.privacy_cost / P, rel=1e-8)
        assert p3.max_ratio == pytest.approx(p1.privacy_cost / P, rel=1e-8)
    # Homogeneity in the targets: c → s·c divides the least cost by s (same mechanism shape).
    ps = solve_min_privacy_cost(W, 4.0 * c)
    assert ps.privacy_cost == pytest.approx(p1.privacy_cost / 4.0, rel=2e-6)


def test_fixed_budget_beats_scaled_competitors():
    # At the same cost no fixed strategy has a smaller largest ratio (it is the optimum).
    W, c = prefix_workload(8), np.ones(8)
    p3 = solve_min_target_ratio(W, c, pcost=1.0)
    for X in (identity_gram(8), sum_optimal_gram(W)):
        assert required_privacy_cost(X, W, c) >= p3.max_ratio * (1 - 1e-6)


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0.0, -1.0, np.nan, np.inf])
def test_bad_target_values(bad):
    c = np.ones(4)
    c[2] = bad
    with pytest.raises(PlanError, match=r"queries \[2\]"):
        solve_min_privacy_cost(prefix_workload(4), c)


def test_wrong_length_targets():
    with pytest.raises(PlanError, match="3 entries but the workload has 4 queries"):
        solve_min_privacy_cost(prefix_workload(4), [1.0, 1.0, 1.0])


def test_query_outside_measurable_row_space():
    W = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    measurable = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    with pytest.raises(PlanError, match=r"queries \[2\] lie outside the row space"):
        solve_min_privacy_cost(W, 1.0, measurable=measurable)
    # Inside the row space it is fine.
    res = solve_min_privacy_cost(W[:2], 1.0, measurable=measurable)
    assert res.status == "optimal"


def test_bad_basis_and_pcost():
    W = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    with pytest.raises(PlanError, match="does not span"):
        solve_min_privacy_cost(W, 1.0, basis=np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]))
    with pytest.raises(PlanError, match="independent"):
        solve_min_privacy_cost(W, 1.0, basis=np.array([[1.0, 1.0, 0.0], [2.0, 2.0, 0.0]]))
    with pytest.raises(PlanError):
        solve_min_target_ratio(prefix_workload(3), 1.0, pcost=0.0)
    with pytest.raises(PlanError):
        solve_min_target_ratio(prefix_workload(3), 1.0, pcost=float("nan"))


# --------------------------------------------------------------------------------------------
# Paper tables 4, 9, 10 (deterministic workloads) and 5–8 (random, in distribution)
# --------------------------------------------------------------------------------------------


def ratios(W, c, *, branchings=(2, 16)):
    res = solve_min_privacy_cost(W, c)
    base = baseline_costs(W, c, branchings=branchings)
    return res, {k: v / res.privacy_cost for k, v in base.items()}


def test_ip_cost_is_largest_squared_row_norm():
    # Hand derivation: with X = I the variance of w_j is ‖w_j‖², the cost is 1.
    W = pl94_workload()
    assert required_privacy_cost(identity_gram(252), W, 1.0) == pytest.approx(126.0)


def test_hierarchical_matrix_structure():
    H = hierarchical_matrix(9, 3)
    assert H.shape == (13, 9)  # root, 3 blocks of 3, 9 leaves
    assert np.all(H.sum(axis=0) == 3)  # every cell lies in one node per level


def test_table4_pl94():
    # Paper Table 4: IP 36.56, HM 13.93, CA = wCA-I = wCA-II 3.99, SM-II 1.00.
    W = pl94_workload()
    res, r = ratios(W, 1.0, branchings=(2, 4, 8, 16))
    assert res.status == "optimal"
    check_result(res, W, np.ones(W.shape[0]))
    # Ordering of the paper: IP worst, CA = wCA (uniform targets), SM-II best.
    assert r["IP"] > r["HM-2"] > 1 and r["IP"] > r["CA"] > 1.0
    assert r["CA"] == r["wCA-I"] == r["wCA-II"]
    # The IP/CA ratio does not involve SM-II: paper 36.56 / 3.99 = 9.163, here 9.16 (< 1 %).
    assert r["IP"] / r["CA"] == pytest.approx(36.56 / 3.99, rel=0.01)
    # But both columns are ~14 % above the paper's: the paper's SM-II cost is not optimal.
    # IP needs exactly Δ² = 126 (test above), so the paper's SM-II cost is 126 / 36.56 = 3.446,
    # while the certified optimum here is 3.0134 (lower bound ≥ 3.0134·(1 − 1e-6), and the
    # returned (B, Σ) meets every target at that cost by the explicit definition): the paper's
    # SM-II run stopped 14.4 % above the optimum, and every ratio it reports is 12.6 % low.
    assert res.privacy_cost == pytest.approx(3.0134, rel=1e-4)
    assert res.lower_bound < 126 / 36.56 * 0.9
    assert r["IP"] == pytest.approx(36.56 * (126 / 36.56) / res.privacy_cost, rel=1e-3)


def test_table9_age_pyramid():
    # Paper Table 9: IP 32.49, HM 6.2, CA = wCA 1.58, SM-II 1.00.
    W = age_pyramid_workload()
    res, r = ratios(W, 1.0, branchings=(2, 16))
    assert res.status == "optimal"
    assert r["IP"] == pytest.approx(32.49, rel=0.10)
    assert r["IP"] > r["HM"] > r["CA"] > 1.0
    # CA here is the certified optimum of the sum of variances (unique: WᵀW ≻ 0); its max ratio
    # is 1.766, 11.8 % above the paper's 1.58.  A strategy with a smaller max ratio than the
    # true CA optimum can only come from a not fully converged CA run; recorded, not matched.
    assert r["CA"] == pytest.approx(1.58, rel=0.15)


@pytest.mark.parametrize(
    "t, paper_ip, paper_ca", [(2, 1.82, 1.14), (4, 4.55, 1.42), (6, 8.6, 1.66), (8, 14.03, 1.88)]
)
def test_table10_marginals(t, paper_ip, paper_ca):
    W = marginals_workload(t)
    res, r = ratios(W, 1.0, branchings=(2, 16))
    assert res.status == "optimal"
    assert r["IP"] == pytest.approx(paper_ip, rel=0.10)
    assert r["CA"] == pytest.approx(paper_ca, rel=0.10)
    assert r["CA"] == r["wCA-I"] == r["wCA-II"]
    assert r["IP"] > r["CA"] > 1.0  # paper ordering (HM's branching factor is not given)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_table5_range_uniform_in_distribution(seed):
    # Paper Table 5, d = 64: IP 10.63, HM 2.84, CA 1.27 (random workload: shape, not digits).
    rng = np.random.default_rng(seed)
    W = random_range_workload(64, rng)
    res, r = ratios(W, 1.0, branchings=(2, 16))
    assert res.status == "optimal"
    assert r["IP"] == pytest.approx(10.63, rel=0.25)
    assert 1.1 < r["CA"] < 1.6
    assert r["IP"] > r["HM"] > r["CA"] > 1.0


@pytest.mark.parametrize("seed", [0, 1])
def test_table7_pm1_uniform(seed):
    # Paper Table 7, d = 64: IP = CA = wCA 1.14.  Here IP needs Δ² = d exactly (every ±1 row has
    # squared norm d) and the certified optimum is ≈ 43 for d = 64, so IP's ratio is ≈ 1.49, not
    # 1.14 (which would need an optimum of 56 > our certified upper bound): the paper's queries
    # or its SM-II optimum differ.  What carries over: CA close to optimal and the ordering.
    rng = np.random.default_rng(seed)
    W = random_pm1_workload(64, rng)
    res, r = ratios(W, 1.0, branchings=(2, 16))
    assert res.status == "optimal"
    assert r["IP"] == pytest.approx(64.0 / res.privacy_cost, rel=1e-9)
    assert 1.0 < r["CA"] < 1.3
    assert r["HM"] > r["IP"] > r["CA"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_table6_range_random_targets_ordering(seed):
    # Paper Table 6 (d = 64): IP 16.04 > HM 4.63 > CA 2.53 > wCA-II 1.98 > wCA-I 1.62 > SM-II 1.
    # d = 32 here (rank ≤ 32: the dense barrier polish certifies the degenerate optimum fast).
    rng = np.random.default_rng(100 + seed)
    W = random_range_workload(32, rng)
    c = random_targets(W.shape[0], rng)
    res, r = ratios(W, c)
    assert res.status == "optimal"
    check_result(res, W, c)
    assert r["IP"] > r["HM"] > r["CA"] > r["wCA-II"] > r["wCA-I"] > 1.0


@pytest.mark.parametrize("seed", [0, 1])
def test_table8_pm1_random_targets(seed):
    # Paper Table 8, d = 64: IP 2.58, HM 7.44, CA 2.43, wCA-I 1.15, wCA-II 1.61.
    rng = np.random.default_rng(seed)
    W = random_pm1_workload(64, rng)
    c = random_targets(W.shape[0], rng)
    res, r = ratios(W, c, branchings=(2, 16))
    assert res.gap <= 1e-4
    assert r["HM"] > r["IP"] > r["CA"] > r["wCA-II"] > r["wCA-I"] > 1.0
