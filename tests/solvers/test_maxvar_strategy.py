"""Tests for the max-variance-optimal strategy solver (fitness-for-use, Problem 1).

Expected values come from hand derivations (written out next to each test), from the
fitness-for-use paper (Theorem 7, Table 2), or from an independent generic SDP solve with CVXPY,
never from the code under test.  ``t*`` denotes the optimum of

    min over B  max_j w_j (BᵀB)⁺ w_jᵀ / c_j
    subject to  max diag(BᵀB) ≤ 1,  rowspace(B) ⊇ rowspace(W).
"""

from __future__ import annotations

import numpy as np
import pytest

from dpmatrix._solvers.maxvar_strategy import (
    MaxVarStrategy,
    clear_cache,
    maxvar_lower_bound,
    optimize_maxvar_strategy,
)
from dpmatrix.errors import PlanError, WorkloadError


def prefix(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n)))


def all_ranges(n: int) -> np.ndarray:
    rows = [(a, b) for a in range(n) for b in range(a, n)]
    return np.array([[1.0 if a <= i <= b else 0.0 for i in range(n)] for a, b in rows])


def identity_plus_total(d: int) -> np.ndarray:
    return np.vstack([np.eye(d), np.ones((1, d))])


def variances_from_B(B: np.ndarray, W: np.ndarray) -> np.ndarray:
    """w_j (BᵀB)⁺ w_jᵀ = ‖w_j B⁺‖², recomputed with numpy's pseudo-inverse (independent path)."""
    R = W @ np.linalg.pinv(B)
    return np.einsum("ij,ij->i", R, R)


def nuclear_sq(W, lam, mu, c=None) -> float:
    """‖(ΛC⁻¹)^{1/2} W diag(μ)^{1/2}‖_*², computed here (test-side check of a certificate)."""
    c = np.ones(W.shape[0]) if c is None else np.asarray(c, float)
    M = np.sqrt(np.asarray(lam) / c)[:, None] * W * np.sqrt(np.asarray(mu))[None, :]
    return float(np.linalg.svd(M, compute_uv=False).sum() ** 2)


def check_bracket(res: MaxVarStrategy, expected: float, tol: float, slack: float = 1e-9) -> None:
    assert res.converged
    assert res.gap <= tol * (1 + 1e-9)
    assert res.lower_bound <= expected * (1 + slack)
    assert res.max_variance >= expected * (1 - slack)
    assert abs(res.max_variance - expected) <= max(2 * tol, 1e-12) * expected


# ------------------------------------------------------------------------------------------
# 1. Fitness-for-use Theorem 7: W = [I_d; 1ᵀ], all targets γ, optimal squared privacy cost
#    2d / ((1 + d) γ), i.e. t* = 2d / ((d + 1) γ).
#
#    The paper's Σ = aI + b11ᵀ with a = (d+1)γ/d, b = −γ/d gives variances a + b = γ and
#    da + d²b = γ and max diag Σ⁻¹ = (a + (d−1)b) / (a(a + db)) = 2d/((d+1)γ)  (upper bound).
#    Matching dual certificate (by hand, valid for every d ≥ 2): μ uniform, λ = α/d on each
#    identity query and 1 − α on the total, c = 1.  With M = Λ^{1/2} W / √d,
#    MᵀM = (1/d)[(α/d) I + (1 − α) 11ᵀ] has eigenvalues α/d² (d − 1 times) and α/d² + 1 − α, so
#    ‖M‖_* = a√α + sqrt(1 − bα) with a = (d−1)/d, b = 1 − 1/d².  By Cauchy–Schwarz
#    (a/√b)·√(bα) + 1·sqrt(1 − bα) ≤ sqrt(1 + a²/b) = sqrt(2d/(d+1)), with equality at
#    α* = a² / (b (a² + b)) ∈ (0, 1).  So t* = 2d/(d+1) for every d ≥ 2 (the paper states d ≥ 5).
# ------------------------------------------------------------------------------------------


def thm7_alpha(d: int) -> float:
    a, b = (d - 1) / d, 1 - 1 / d**2
    return a * a / (b * (a * a + b))


@pytest.mark.parametrize("d", [5, 8, 12])
@pytest.mark.parametrize("gamma", [1.0, 2.5])
def test_theorem7_identity_plus_total(d, gamma):
    clear_cache()
    W = identity_plus_total(d)
    expected = 2 * d / ((d + 1) * gamma)
    res = optimize_maxvar_strategy(W, np.full(d + 1, gamma))
    check_bracket(res, expected, 1e-4)


@pytest.mark.parametrize("d", [2, 3, 5, 12])
def test_theorem7_hand_dual_certificate(d):
    """The hand-derived dual (λ*, uniform μ) attains 2d/(d+1); maxvar_lower_bound agrees."""
    W = identity_plus_total(d)
    alpha = thm7_alpha(d)
    lam = np.r_[np.full(d, alpha / d), 1 - alpha]
    expected = 2 * d / (d + 1)
    # sanity check of the derivation itself (numpy only)
    assert nuclear_sq(W, lam, np.full(d, 1 / d)) == pytest.approx(expected, rel=1e-12)
    # L(λ*) = max_μ ≥ value at uniform μ, and ≤ t* = expected (weak duality)
    lb = maxvar_lower_bound(W, lam)
    assert expected * (1 - 1e-5) <= lb <= expected * (1 + 1e-9)
    # a deliberately bad λ (all weight on the total query) gives a strictly smaller bound: the
    # total alone can be answered with variance 1 (B = 1ᵀ), so L(e_total) = 1
    assert maxvar_lower_bound(W, np.r_[np.zeros(d), 1.0]) == pytest.approx(1.0, rel=1e-6)
    res = optimize_maxvar_strategy(W, tol=1e-6)
    check_bracket(res, expected, 1e-6)


# ------------------------------------------------------------------------------------------
# 2. Identity and single queries.
#    Identity: B = I gives variance 1 per query; λ, μ uniform give ‖I/n‖_*² = 1.  So t* = 1.
#    One query w (1 × n): B = w/‖w‖_∞ has max diag(BᵀB) = max_i w_i²/‖w‖_∞² = 1 and variance
#    ‖w‖_∞² (w B⁺ = ‖w‖_∞); μ = e_i at i = argmax |w_i| gives ‖w diag(μ)^{1/2}‖_*² = w_i².  So
#    t* = ‖w‖_∞² / c — NOT ‖w‖_1² (e.g. w = [1, 1]: measuring x1 + x2 has squared sensitivity 1).
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 4, 7])
def test_identity_workload(n):
    res = optimize_maxvar_strategy(np.eye(n), tol=1e-6)
    check_bracket(res, 1.0, 1e-6)


@pytest.mark.parametrize(
    "w, c, expected",
    [
        ([1.0, -3.0, 2.0], 1.0, 9.0),
        ([1.0, 1.0], 1.0, 1.0),
        ([0.5, 0.5, 0.25, 0.0], 1.0, 0.25),
        ([2.0], 4.0, 1.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 0.5, 50.0),
    ],
)
def test_single_query_is_linf_squared(w, c, expected):
    res = optimize_maxvar_strategy(np.array([w]), [c], tol=1e-6)
    check_bracket(res, expected, 1e-6)
    # duplicating the query (same target) changes nothing
    res2 = optimize_maxvar_strategy(np.array([w, w]), [c, c], tol=1e-6)
    check_bracket(res2, expected, 1e-6)


# Paper Table 2 (interior point and SM-II agree): prefix workload, squared privacy cost at
# variance targets 1, printed to 2 decimals.
@pytest.mark.parametrize("n, table", [(2, 1.33), (4, 1.76), (8, 2.28), (16, 2.91), (64, 4.46)])
def test_prefix_matches_paper_table2(n, table):
    res = optimize_maxvar_strategy(prefix(n))
    assert res.converged
    assert abs(res.max_variance - table) <= 0.005 + 1e-4 * table
    assert abs(res.lower_bound - table) <= 0.005 + 1e-4 * table


# ------------------------------------------------------------------------------------------
# 3. Against an independent SDP solve (CVXPY):  min t  s.t.  diag X ≤ t,  w_j X⁻¹ w_jᵀ ≤ c_j
#    (matrix_frac is the Schur-complement form, so singular X with w_j in its range is allowed).
# ------------------------------------------------------------------------------------------


def cvxpy_opt(W: np.ndarray, c: np.ndarray | None = None) -> float:
    cp = pytest.importorskip("cvxpy")
    m, n = W.shape
    c = np.ones(m) if c is None else np.asarray(c, float)
    X = cp.Variable((n, n), PSD=True)
    t = cp.Variable()
    cons = [cp.diag(X) <= t] + [cp.matrix_frac(W[j], X) <= c[j] for j in range(m)]
    prob = cp.Problem(cp.Minimize(t), cons)
    try:
        prob.solve(solver="CLARABEL")
    except Exception:  # pragma: no cover - solver availability
        prob.solve(solver="SCS", eps=1e-9, max_iters=200000)
    assert prob.status == "optimal", prob.status
    return float(prob.value)


def _random_cases():
    rng = np.random.default_rng(20240611)
    cases = []
    for k in range(6):
        m, n = int(rng.integers(2, 9)), int(rng.integers(2, 6))
        cases.append((f"gauss{k}", rng.standard_normal((m, n)), None))
        B01 = (rng.random((m, n)) < 0.5).astype(float) + np.eye(m, n)
        B01[~B01.any(axis=1), int(rng.integers(n))] = 1.0  # no all-zero query
        cases.append((f"binary{k}-targets", B01, rng.uniform(0.3, 3.0, m)))
        aff = np.hstack([np.ones((m, 1)), rng.random((m, n - 1))])
        cases.append((f"affine{k}", aff, None))
    G = rng.standard_normal((6, 4))
    cases.append(("centred-rank3", G - G.mean(axis=1, keepdims=True), None))  # rank n − 1
    P = prefix(5)[:-1]
    cases.append(("centred-prefix", P - P.mean(axis=1, keepdims=True), rng.uniform(0.5, 2.0, 4)))
    cases.append(("unused-cell", np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0]]), None))
    dominated = np.array([[1, 0, 0], [0.5, 0, 0], [0, 1, 1.0], [0, 0, 1.0]])
    cases.append(("dominated-rows", dominated, None))
    cases.append(("near-duplicate", np.array([[1.0, 0.0], [0.5, 0.001]]), None))
    for n in range(3, 7):
        cases.append((f"prefix{n}", prefix(n), None))
        cases.append((f"ranges{n}", all_ranges(n), None))
    return [pytest.param(W, c, id=name) for name, W, c in cases]


@pytest.mark.parametrize("W, c", _random_cases())
def test_against_cvxpy(W, c):
    tol = 1e-6
    ref = cvxpy_opt(W, c)
    res = optimize_maxvar_strategy(W, c, tol=tol)
    assert res.converged and res.gap <= tol * (1 + 1e-9)
    assert abs(res.max_variance - ref) <= max(2 * tol, 1e-5) * ref
    assert res.lower_bound <= ref * (1 + 1e-6)
    assert res.max_variance >= ref * (1 - 1e-6)


def test_against_cvxpy_default_tol():
    W = all_ranges(5)
    ref = cvxpy_opt(W)
    res = optimize_maxvar_strategy(W)  # tol = 1e-4
    assert res.gap <= 1e-4 * (1 + 1e-9)
    assert abs(res.max_variance - ref) <= 2e-4 * ref
    assert res.lower_bound <= ref * (1 + 1e-6) and res.max_variance >= ref * (1 - 1e-6)


# ------------------------------------------------------------------------------------------
# 4. The returned strategy is feasible, reproduces its claimed variance, and the certificate
#    (query_weights, cell_weights) reproduces the claimed lower bound.
# ------------------------------------------------------------------------------------------


def _feasibility_cases():
    rng = np.random.default_rng(7)
    P = prefix(12)[:-1]
    return [
        pytest.param(prefix(20), None, id="prefix20"),
        pytest.param(all_ranges(8), None, id="ranges8"),
        pytest.param(prefix(10), rng.uniform(0.2, 5.0, 10), id="prefix10-targets"),
        # rank 11 over 12 cells
        pytest.param(P - P.mean(axis=1, keepdims=True), None, id="centred-prefix12"),
        # rank 5 over 9 cells
        pytest.param(rng.standard_normal((5, 9)), rng.uniform(0.5, 2.0, 5), id="gauss-wide"),
        # rank 3 < 4 cells < 7 queries
        pytest.param(_centred(rng.standard_normal((7, 4))), None, id="centred-tall"),
    ]


def _centred(G: np.ndarray) -> np.ndarray:
    return G - G.mean(axis=1, keepdims=True)


@pytest.mark.parametrize("W, c", _feasibility_cases())
def test_strategy_is_feasible_and_certified(W, c):
    res = optimize_maxvar_strategy(W, c)
    cc = np.ones(W.shape[0]) if c is None else c
    B = res.B
    assert B.shape == (np.linalg.matrix_rank(W), W.shape[1])
    diag = np.einsum("ij,ij->j", B, B)
    assert diag.max() <= 1 + 1e-9
    assert diag.max() >= 1 - 1e-9  # the budget is used
    assert res.privacy_cost == pytest.approx(diag.max(), rel=1e-12)
    var = variances_from_B(B, W)
    assert np.max(var / cc) == pytest.approx(res.max_variance, rel=1e-9)
    # every query is answered without bias: W in rowspace(B)
    resid = W - (W @ np.linalg.pinv(B)) @ B
    assert np.linalg.norm(resid) <= 1e-9 * np.linalg.norm(W)
    # certificate: weights on the simplex, and the nuclear-norm bound recomputed here
    lam, mu = res.query_weights, res.cell_weights
    assert lam.shape == (W.shape[0],) and mu.shape == (W.shape[1],)
    assert np.all(lam >= 0) and np.all(mu >= 0)
    assert lam.sum() == pytest.approx(1.0, abs=1e-12) and mu.sum() == pytest.approx(1.0, abs=1e-12)
    assert res.lower_bound == pytest.approx(nuclear_sq(W, lam, mu, cc), rel=1e-9)
    assert res.lower_bound <= res.max_variance
    gap = (res.max_variance - res.lower_bound) / res.max_variance
    assert res.gap == pytest.approx(gap, abs=1e-15)
    # L(λ) maximized over μ by the independent lowdim solver is ≥ our bound and ≤ t* ≤ upper
    lb = maxvar_lower_bound(W, lam, c)
    assert res.lower_bound * (1 - 1e-5) <= lb <= res.max_variance


def test_returned_arrays_are_read_only_and_cached():
    clear_cache()
    W = prefix(9)
    res = optimize_maxvar_strategy(W)
    for a in (res.B, res.query_weights, res.cell_weights):
        with pytest.raises(ValueError):
            a[0] = 1.0
    with pytest.raises(AttributeError):
        res.max_variance = 0.0  # frozen
    assert optimize_maxvar_strategy(W.copy()) is res  # cache hit on equal bytes
    assert optimize_maxvar_strategy(W, tol=1e-5) is not res  # tol is part of the key
    other = optimize_maxvar_strategy(W, np.full(9, 2.0))  # targets are part of the key
    assert other is not res
    assert other.max_variance == pytest.approx(res.max_variance / 2, rel=3e-4)
    clear_cache()
    assert optimize_maxvar_strategy(W) is not res


# ------------------------------------------------------------------------------------------
# 5. Targets.  Scaling every target by s scales t* by 1/s (variances are compared with s c).
#    A small target on one query must lower that query's variance.
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("s", [0.1, 3.0, 1e4])
def test_scaling_targets_scales_optimum(s):
    W = all_ranges(6)
    base = optimize_maxvar_strategy(W, tol=1e-6)
    scaled = optimize_maxvar_strategy(W, np.full(W.shape[0], s), tol=1e-6)
    assert scaled.max_variance == pytest.approx(base.max_variance / s, rel=3e-6)
    assert scaled.lower_bound == pytest.approx(base.lower_bound / s, rel=3e-6)


def test_target_favouring_one_query_lowers_its_variance():
    W = prefix(8)
    j = 3
    c = np.ones(8)
    c[j] = 0.25
    uni = optimize_maxvar_strategy(W, tol=1e-6)
    fav = optimize_maxvar_strategy(W, c, tol=1e-6)
    v_uni = variances_from_B(uni.B, W)
    v_fav = variances_from_B(fav.B, W)
    # each strategy respects its own targets at level t
    assert np.all(v_fav <= c * fav.max_variance * (1 + 1e-9))
    assert np.all(v_uni <= uni.max_variance * (1 + 1e-9))
    # the favoured query gets a smaller variance; the optimum cannot improve (c ≤ 1 elementwise)
    assert v_fav[j] < v_uni[j]
    assert fav.max_variance >= uni.lower_bound


def test_targets_equivalent_to_rescaled_rows():
    """var_j / c_j = ‖(w_j/√c_j) B⁺‖²: targets c on W ≡ unit targets on C^{-1/2} W (by hand)."""
    rng = np.random.default_rng(11)
    W = rng.standard_normal((7, 4))
    c = rng.uniform(0.2, 4.0, 7)
    a = optimize_maxvar_strategy(W, c, tol=1e-6)
    b = optimize_maxvar_strategy(W / np.sqrt(c)[:, None], tol=1e-6)
    assert a.max_variance == pytest.approx(b.max_variance, rel=3e-6)


# ------------------------------------------------------------------------------------------
# 6. Errors.
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "W, targets, kwargs, match",
    [
        (np.ones(3), None, {}, "2-d"),
        (np.ones((2, 2, 2)), None, {}, "2-d"),
        (np.zeros((0, 3)), None, {}, "at least one query"),
        (np.array([[1.0, np.nan]]), None, {}, "NaN or infinite"),
        (np.array([[1.0, np.inf]]), None, {}, "NaN or infinite"),
        (np.array([[1.0, 0.0], [0.0, 0.0]]), None, {}, r"all-zero rows \(queries \[1\]\)"),
        (np.eye(3), [1.0, 1.0], {}, "targets has 2 entries but W has 3 rows"),
        (np.eye(2), [1.0, 0.0], {}, "positive finite"),
        (np.eye(2), [1.0, -2.0], {}, "positive finite"),
        (np.eye(2), [1.0, np.nan], {}, "positive finite"),
        (np.eye(2), None, {"tol": 0.0}, r"tol must be in \(0, 1\)"),
        (np.eye(2), None, {"tol": 1.0}, r"tol must be in \(0, 1\)"),
        (np.eye(2), None, {"tol": -1e-3}, r"tol must be in \(0, 1\)"),
        (np.eye(2), None, {"tol": float("nan")}, r"tol must be in \(0, 1\)"),
        (np.eye(2), None, {"max_iter": 0}, "max_iter must be a positive integer"),
    ],
)
def test_bad_input_raises_workload_error(W, targets, kwargs, match):
    with pytest.raises(WorkloadError, match=match):
        optimize_maxvar_strategy(W, targets, **kwargs)


def test_lower_bound_bad_input():
    W = prefix(3)
    with pytest.raises(WorkloadError, match="query_weights has 2 entries"):
        maxvar_lower_bound(W, [0.5, 0.5])
    with pytest.raises(WorkloadError, match="nonnegative"):
        maxvar_lower_bound(W, [1.0, -0.5, 0.5])
    with pytest.raises(WorkloadError, match="positive sum"):
        maxvar_lower_bound(W, [0.0, 0.0, 0.0])
    with pytest.raises(WorkloadError, match="2-d"):
        maxvar_lower_bound(np.ones(3), [1.0])


def test_not_converged_strict_and_lenient():
    clear_cache()
    W = all_ranges(8)
    msg = r"did not reach relative gap 1e-07 within 3 iterations.*strict=False"
    with pytest.raises(PlanError, match=msg):
        optimize_maxvar_strategy(W, tol=1e-7, max_iter=3)
    res = optimize_maxvar_strategy(W, tol=1e-7, max_iter=3, strict=False)
    assert not res.converged and res.gap > 1e-7 and res.iterations == 3
    # still a valid (feasible, certified) pair of bounds
    assert np.einsum("ij,ij->j", res.B, res.B).max() <= 1 + 1e-9
    assert np.max(variances_from_B(res.B, W)) == pytest.approx(res.max_variance, rel=1e-9)
    ref = optimize_maxvar_strategy(W, tol=1e-7)
    assert res.lower_bound <= ref.max_variance and res.max_variance >= ref.lower_bound
    # non-converged results are not cached
    assert optimize_maxvar_strategy(W, tol=1e-7, max_iter=3, strict=False) is not res


# ------------------------------------------------------------------------------------------
# 7. Speed smoke test (prefix n = 100 / 101, cross-checked against the prototype values
#    t* ≈ 5.043966 for n = 100).
# ------------------------------------------------------------------------------------------


def test_prefix_100_smoke():
    clear_cache()
    res = optimize_maxvar_strategy(prefix(100))
    assert res.converged
    assert res.lower_bound <= 5.043966 * (1 + 1e-6)
    assert abs(res.max_variance - 5.043966) <= 2e-4 * 5.043966
    res101 = optimize_maxvar_strategy(prefix(101))
    assert res101.converged and res101.lower_bound > res.lower_bound
