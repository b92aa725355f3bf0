"""ResidualPlanner+ (paper §7, §9) through the public API.

Expected values come from the explicit-matrix oracle (tests/oracle.py: Algorithm 4, Theorems
7.1/7.2 and GLS written independently), from the paper's tables, or from hand derivations.
"""

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
import oracle
from dpmatrix._linalg.attribute_queries import all_ranges, prefix

TYPES = ["identity", "prefix", "range"]


def random_instance(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 4))
    sizes = [int(s) for s in rng.integers(2, 5, size=k)]
    dom = dm.Domain.from_sizes(sizes)
    qt = {n: TYPES[int(rng.integers(0, 3))] for n in dom.names}
    sets = set()
    while len(sets) < int(rng.integers(1, 4)):
        r = int(rng.integers(1, k + 1))
        sets.add(tuple(sorted(rng.choice(k, size=r, replace=False).tolist())))
    wk = dm.Workload(dom, sorted(sets), weights=rng.uniform(0.5, 2, len(sets)), query_types=qt)
    data = pd.DataFrame({n: rng.integers(0, s, 50) for n, s in zip(dom.names, sizes)})
    strategies = {}
    if rng.random() < 0.5:  # sometimes a user strategy: the workload itself
        strategies = {n: "workload" for n in dom.names if qt[n] != "identity"}
    return dom, wk, data, strategies


def explicit(plan):
    sizes = plan.domain.sizes
    subs, gammas = [], []
    for a, S in enumerate(plan.strategies):
        if plan.bases[a].is_identity:
            sub, gam = oracle.sub_matrix(sizes[a]), oracle.sub_matrix(sizes[a])
        elif plan.construction == "split":
            sub, gam = oracle.split_residual(S)
        else:
            sub, gam = oracle.algorithm4(S)
        # Algorithm 4 (or the split residual) implemented twice, independently: same factors
        np.testing.assert_allclose(plan.bases[a].Sub, sub, atol=1e-9)
        np.testing.assert_allclose(plan.bases[a].Gamma, gam, atol=1e-9)
        subs.append(sub)
        gammas.append(gam)
    sets = list(plan.closure.sets)
    blocks_B, blocks_S = [], []
    for A in sets:
        s2 = float(plan.sigma2[plan.closure.index(A)])
        blocks_B.append(oracle.residual_matrix_plus(sizes, A, subs))
        blocks_S.append(s2 * oracle.residual_cov_plus(sizes, A, gammas))
    B = np.vstack(blocks_B)
    Sigma = np.zeros((B.shape[0], B.shape[0]))
    o = 0
    for blk in blocks_S:
        m = blk.shape[0]
        Sigma[o : o + m, o : o + m] = blk
        o += m
    return sets, B, Sigma


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("objective", ["sum_var", "max_var"])
@pytest.mark.parametrize("construction", ["centred", "split"])
def test_bruteforce_privacy_answers_and_variances(seed, objective, construction):
    dom, wk, data, strategies = random_instance(seed)
    plan = dm.plan(wk, pcost=0.9, objective=objective, strategies=strategies, construction=construction)
    sets, B, Sigma = explicit(plan)
    assert oracle.pcost(B, Sigma) == pytest.approx(plan.pcost, rel=1e-8)
    assert plan.pcost == pytest.approx(0.9, rel=1e-6)
    meas = plan.measure(data, rng=np.random.default_rng(seed))
    omega = np.concatenate([meas.noisy[A].ravel() for A in sets])
    sizes = dom.sizes
    worst = 0.0
    for i, A in enumerate(wk.sets):
        Ws = [wk.query_matrix(a, t) if a in A else None for a, t in zip(range(len(sizes)), [dict(zip(A, wk.types(i))).get(a) for a in range(len(sizes))])]
        Q = oracle.generalized_marginal_query(sizes, A, [w if w is not None else np.eye(n) for w, n in zip(Ws, sizes)])
        got = meas.answer(A)
        np.testing.assert_allclose(got["estimate"], oracle.gls_estimate(Q, B, Sigma, omega), atol=1e-7)
        cov = oracle.gls_covariance(Q, B, Sigma)
        np.testing.assert_allclose(plan.query_variance(A).ravel(), np.diag(cov), rtol=1e-8)
        np.testing.assert_allclose(got["variance"], np.diag(cov), rtol=1e-8)
        worst = max(worst, float(np.max(wk.weights[i] * np.diag(cov))))
        # any linear query on the marginal's cells, with its exact variance
        q = np.random.default_rng(seed + 100).normal(size=int(np.prod([sizes[a] for a in A])))
        qa = meas.query_vector(A, q)
        Qfull = q @ oracle.marginal_query(sizes, A)
        assert qa.estimate == pytest.approx(float(oracle.gls_estimate(Qfull[None], B, Sigma, omega)[0]), abs=1e-7)
        assert qa.variance == pytest.approx(float(oracle.gls_covariance(Qfull[None], B, Sigma)[0, 0]), rel=1e-8)
    if objective == "max_var":
        assert plan.loss() == pytest.approx(worst, rel=1e-7)


def test_identity_everywhere_equals_residualplanner():
    dom = dm.Domain.from_sizes([3, 4, 2, 5])
    wk = dm.Workload.marginals(dom, 2, upto=True)
    for objective in ("sum_var", "max_var"):
        rp = dm.plan(wk, pcost=1, objective=objective)
        # S = 2I takes Algorithm 4's generic (Cholesky) branch: Γ = I, a different Sub spanning
        # the same space; β·trace_in = 4(n−1)/n · (n−1)/4 is RP's (n−1)²/n, so everything agrees
        rpp = dm.plan(wk, pcost=1, objective=objective, strategies={n: 2 * np.eye(s) for n, s in zip(dom.names, dom.sizes)})
        assert not any(b.is_identity for b in rpp.bases)
        np.testing.assert_allclose(rpp.sigma2 * rpp.coefficients.p / rpp.coefficients.p, rpp.sigma2)
        assert rpp.rmse() == pytest.approx(rp.rmse(), rel=1e-10)
        assert rpp.max_variance() == pytest.approx(rp.max_variance(), rel=1e-7)
        for A in wk.sets:
            np.testing.assert_allclose(rpp.variance(A), rp.variance(A), rtol=1e-7)


ADULT = [100, 100, 100, 99, 85, 42, 16, 15, 9, 7, 6, 5, 2, 2]
CPS = [100, 50, 7, 4, 2]
LOANS = [101, 101, 101, 101, 3, 8, 36, 6, 51, 4, 5, 15]
# Table 8, ResidualPlanner+ column (prefix sums on the numeric attributes: Adult's five largest
# domains, CPS's 100 and 50, Loans's four 101s), rows 1-way, 2-way, 3-way, <=3-way.
TABLE8 = {
    "Adult": (ADULT, 5, [5.114, 17.632, 47.193, 48.903]),
    "CPS": (CPS, 2, [3.181, 6.357, 8.124, 8.392]),
    "Loans": (LOANS, 4, [4.728, 14.913, 36.108, 36.651]),
}
# Measured signed differences (ours / paper − 1):
#   default "optimal" strategies (certified per-attribute optimum) — never above the paper:
#     Adult −1.3 / −2.5 / −3.5 / −7.0 %, CPS −1.4 / −2.6 / −2.9 / −3.0 %,
#     Loans −1.2 / −2.3 / −3.1 / −4.7 %
#   "pidentity" (HDMM's OPT_0 idea, L2 p-identity) — within [−0.5 %, +4 %]:
#     Adult +1.3 / +2.5 / +3.6 / −0.2 %, CPS +1.2 / +2.1 / +2.4 / +2.3 %,
#     Loans +1.2 / +2.3 / +3.3 / +1.6 %
#   split construction (optimal Gaussian 1-D strategies for W):
#     Adult −0.6 / −2.0 / −4.2 / −7.6 %, CPS −3.1 / −8.4 / −10.1 / −9.8 %,
#     Loans −1.0 / −2.8 / −5.4 / −6.8 %
#   default ("auto", the better of the two per workload): Adult −1.3 (centred) / −2.5 (centred)
#     / −4.2 / −7.6 %, CPS −3.1 / −8.4 / −10.1 / −9.8 %, Loans −1.2 (centred) / −2.8 / −5.4 /
#     −6.8 % — always below the paper; "within 2 %" holds only for the 1-way rows, because the
#     paper's own 1-D strategies are 3-8 % from optimal (see the structure test at the end).


def table8_workloads(sizes, n_numeric):
    dom = dm.Domain.from_sizes(sizes)
    qt = {f"a{i}": "prefix" for i in range(n_numeric)}
    return [dm.Workload.marginals(dom, k, query_types=qt) for k in (1, 2, 3)] + [
        dm.Workload.marginals(dom, 3, upto=True, query_types=qt)
    ]


@pytest.mark.parametrize("dataset", list(TABLE8))
def test_table8_optimal_strategies_never_above_paper(dataset):
    sizes, nnum, paper = TABLE8[dataset]
    for wk, value in zip(table8_workloads(sizes, nnum), paper):
        got = dm.plan(wk, objective="sum_var", pcost=1, construction="centred").rmse()
        assert -0.075 < got / value - 1 <= 0.0005, (dataset, got, value)


@pytest.mark.parametrize("dataset", list(TABLE8))
def test_table8_default_is_the_better_construction(dataset):
    sizes, nnum, paper = TABLE8[dataset]
    for wk, value in zip(table8_workloads(sizes, nnum), paper):
        got = dm.plan(wk, objective="sum_var", pcost=1)
        centred = dm.plan(wk, objective="sum_var", pcost=1, construction="centred").rmse()
        split = dm.plan(wk, objective="sum_var", pcost=1, construction="split").rmse()
        assert got.rmse() == pytest.approx(min(centred, split), rel=1e-12)
        assert got.construction == ("split" if split < centred else "centred")
        assert -0.11 < got.rmse() / value - 1 < -0.005, (dataset, got.rmse(), value)


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["CPS"])  # Loans (4 × n=101) is checked the same way but takes ~40 s
def test_table8_pidentity_strategies(dataset):
    sizes, nnum, paper = TABLE8[dataset]
    for wk, value in zip(table8_workloads(sizes, nnum), paper):
        strategies = {f"a{i}": "pidentity" for i in range(nnum)}
        got = dm.plan(wk, objective="sum_var", pcost=1, strategies=strategies, construction="centred").rmse()
        assert -0.005 < got / value - 1 < 0.04, (dataset, got, value)


# Tables 10 (all d-dim ranges) and 11 (all d-dim prefixes), RP+ column, and table 12 (k-way
# prefix, d = 5, n = 10). With the default optimal strategies we are never above the paper
# (printed to 2 decimals: allow half a unit) — e.g. table 11 d=5 n=8: 8.97 vs 10.12 (−11 %),
# table 12: 2.85 / 5.50 / 8.26 / 10.31 / 11.12 vs 2.94 / 5.84 / 9.00 / 11.48 / 12.58 — and never
# below the certified optimum: the same closed form (Lemma 2) evaluated with the per-attribute
# factor replaced by the solver's duality lower bound.
TABLE10 = {3: [1.39, 2.25, 3.64, 5.77], 4: [1.55, 2.95, 5.59, 10.34], 5: [1.73, 3.86, 8.60, 18.54]}
TABLE11 = {3: [1.50, 2.54, 4.01, 5.89], 4: [1.71, 3.47, 6.37, 10.64], 5: [1.96, 4.74, 10.12, 19.23]}


def certified_rmse_bound(W, d, k):
    """Lemma 2 optimum of all k-way generalized marginals (base W on each of d identical
    attributes) with the per-attribute factor β·trace_in at its certified lower bound."""
    from math import comb, sqrt

    from dpmatrix._solvers.lowdim_optimal import optimize_subworkload
    from dpmatrix._solvers.strategy1d import centered

    n = W.shape[1]
    c = optimize_subworkload(centered(W), sizes=(n,), tol=1e-6).lower_bound
    t_out = float(np.sum((W @ np.ones(n)) ** 2)) / n**2
    root = sum(comb(d, j) * sqrt(comb(d - j, k - j) * c**j * t_out ** (k - j)) for j in range(k + 1))
    return sqrt(root**2 / (comb(d, k) * W.shape[0] ** k))


@pytest.mark.parametrize("kind,table,make", [("range", TABLE10, all_ranges), ("prefix", TABLE11, prefix)])
def test_tables_10_11_kronecker_workloads(kind, table, make):
    for d, values in table.items():
        for n, value in zip([2, 4, 8, 16], values):
            dom = dm.Domain.from_sizes([n] * d)
            wk = dm.Workload(dom, [tuple(range(d))], query_types={a: kind for a in dom.names})
            got = dm.plan(wk, objective="sum_var", pcost=1, construction="centred").rmse()
            assert got <= value + 0.005, (kind, d, n, got)
            lb = certified_rmse_bound(make(n), d, d)
            assert lb * (1 - 1e-9) <= got <= lb * (1 + 1e-3), (kind, d, n, got, lb)


def test_table12_kway_prefix_d5():
    paper = [2.94, 5.84, 9.00, 11.48, 12.58]  # RP+ column
    dom = dm.Domain.from_sizes([10] * 5)
    qt = {a: "prefix" for a in dom.names}
    for k, value in zip(range(1, 6), paper):
        got = dm.plan(dm.Workload.marginals(dom, k, query_types=qt), objective="sum_var", pcost=1, construction="centred").rmse()
        lb = certified_rmse_bound(prefix(10), 5, k)
        assert got <= value + 0.005, (k, got)
        assert lb * (1 - 1e-9) <= got <= lb * (1 + 1e-3), (k, got, lb)


def test_hand_derived_prefix_size_two():
    # one attribute of size 2, workload = prefix sums {x0, x0 + x1}; Sub = [1/2, −1/2]·(scale),
    # β·trace_in = 1/4 (Algorithm 4 on W, or any strategy: the centred space is 1-dimensional);
    # trace_out = (1² + 2²)/4 = 5/4; Lemma 2 at cost 1: total = (sqrt(5/4·1) + sqrt(1/4))² =
    # (3 + sqrt 5)/2, so RMSE = sqrt(total / 2).
    wk = dm.Workload(dm.Domain({"x": 2}), [("x",)], query_types={"x": "prefix"})
    assert dm.plan(wk, objective="sum_var", pcost=1).total_variance() == pytest.approx((3 + np.sqrt(5)) / 2, rel=1e-6)


def test_queries_by_labels_and_bounds():
    ages = [str(a) for a in range(18, 28)]
    dom = dm.Domain([dm.Attribute("age", 10, "ordinal", tuple(ages)),
                     dm.Attribute("race", 3, labels=("White", "Black", "Asian"))])
    wk = dm.Workload(dom, [("age", "race")], query_types={"age": "prefix"})  # prefix asked by name
    assert wk.types(0) == ("prefix", "identity")
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"age": rng.integers(0, 10, 400), "race": rng.integers(0, 3, 400)})
    plan = dm.plan(wk, objective="sum_var", rho=1.0)
    meas = plan.measure(df, rng=np.random.default_rng(5))
    ans = meas.query({"age": ("20", "23"), "race": "Black"})
    cells = meas.estimate(("age", "race"))
    assert ans.estimate == pytest.approx(cells[2:6, 1].sum(), abs=1e-8)
    q = np.zeros((10, 3))
    q[2:6, 1] = 1
    cov = meas.covariance(("age", "race"))
    assert ans.variance == pytest.approx(q.ravel() @ cov @ q.ravel(), rel=1e-9)
    assert ans.lower < ans.estimate < ans.upper
    # labelled prefix answers: rows "<= 18", ..., "<= 27" for each race
    table = meas.answer(("age", "race"))
    assert len(table) == 30 and table["age"].iloc[0] == "<= 18" and table["race"].iloc[0] == "White"
    truth = ((df.age <= 3) & (df.race == 0)).sum()
    row = table[(table.age == "<= 21") & (table.race == "White")].iloc[0]
    assert abs(row.estimate - truth) < 6 * row["std"]
    with pytest.raises(dm.WorkloadError, match="not a value of 'race'"):
        meas.query({"race": "Martian"})
    with pytest.raises(dm.WorkloadError, match="empty range"):
        meas.query({"age": ("25", "20")})


def test_query_type_errors():
    dom = dm.Domain.from_sizes([4, 3])
    with pytest.raises(dm.WorkloadError, match="unknown query type"):
        dm.Workload.marginals(dom, 1, query_types={"a0": "sideways"})
    with pytest.raises(dm.WorkloadError, match="all-ones row"):
        dm.Workload.marginals(dom, 1, query_types={"a0": np.array([[1.0, -1.0, 0.0, 0.0]])})
    with pytest.raises(dm.UnknownAttributeError):
        dm.Workload.marginals(dom, 1, query_types={"zz": "prefix"})
    wk = dm.Workload.marginals(dom, 1, query_types={"a0": "prefix"})
    with pytest.raises(dm.WorkloadError):
        dm.plan(wk, objective="sum_var", pcost=1, strategies={"a0": np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0]])})
    with pytest.raises(dm.WorkloadError, match="unknown strategy"):
        dm.plan(wk, objective="sum_var", pcost=1, strategies={"a0": "magic"})


def test_custom_query_matrix_and_json_round_trip():
    dom = dm.Domain.from_sizes([5, 3])
    W = np.vstack([np.ones(5), [1, 1, 0, 0, 0], [0, 0, 1, 1, 1]])  # total and two bands
    wk = dm.Workload(dom, [("a0", "a1"), {"attributes": ("a0",), "query_types": {"a0": "range"}}],
                     query_types={"a0": W})
    plan = dm.plan(wk, pcost=1, objective="max_var")
    back = dm.Plan.from_json(plan.to_json())
    assert back.rmse() == pytest.approx(plan.rmse(), rel=1e-12)
    assert back.max_variance() == pytest.approx(plan.max_variance(), rel=1e-12)
    np.testing.assert_allclose(back.query_variance(("a0", "a1")), plan.query_variance(("a0", "a1")))
    assert back.workload.types(1) == ("range",)


# ---------------------------------------------------------------- what the paper's numbers are

def test_tables_10_to_12_are_algorithm4_with_a_suboptimal_1d_factor():
    # Structure check of the paper's RP+ columns. Under Algorithm 4 a single d-way Kronecker
    # workload with base W on every attribute has, by Lemma 2,
    #     RMSE = (sqrt(c) + sqrt(t_out))^d / m^(d/2),   t_out = ||W 1||²/n², m = rows of W,
    # where c = β·trace_in is the only number the 1-D strategy decides. Solving for c from the
    # paper's d = 3 value must then predict its d = 4 and 5 values (to the printed digits) —
    # it does, for every n: the paper used Algorithm 4 and our closed form. The implied c(n)
    # lies above the certified optimum c*(n) (ours) by 0.2-8 %, which is why our RP+ column is
    # lower than the paper's: the paper's 1-D strategies are not optimal for Algorithm 4, and
    # how they were obtained is not published in enough detail to reproduce them (the
    # authors' public code, HDMM's convex optimizer on the uncentred W, gives +16-117 %).
    from dpmatrix._solvers.lowdim_optimal import optimize_subworkload
    from dpmatrix._solvers.strategy1d import centered

    ns = [2, 4, 8, 16, 32, 64]
    rp10 = {3: [1.39, 2.25, 3.64, 5.77, 8.87, 13.18], 4: [1.55, 2.95, 5.59, 10.34, 18.37, 31.13],
            5: [1.73, 3.86, 8.60, 18.54, 38.03, 73.54]}
    rp11 = {3: [1.50, 2.54, 4.01, 5.89, 8.23, 11.09], 4: [1.71, 3.47, 6.37, 10.64, 16.62, 24.73],
            5: [1.96, 4.74, 10.12, 19.23, 33.56, 55.16]}
    for make, table in ((all_ranges, rp10), (prefix, rp11)):
        for i, n in enumerate(ns):
            W = make(n)
            m = W.shape[0]
            t_out = float(np.sum((W @ np.ones(n)) ** 2)) / n**2
            c = ((table[3][i] * m**1.5) ** (1 / 3) - np.sqrt(t_out)) ** 2
            for d in (4, 5):
                predicted = (np.sqrt(c) + np.sqrt(t_out)) ** d / m ** (d / 2)
                # d = 3 is printed to 2 decimals: propagate half a unit of the last digit
                slack = 0.005 * d / 3 * table[d][i] / table[3][i] + 0.005
                assert abs(predicted - table[d][i]) <= slack, (make.__name__, n, d, predicted, table[d][i])
            c_star = optimize_subworkload(centered(W), sizes=(n,), tol=1e-6).loss
            assert c >= c_star * (1 - 0.005), (make.__name__, n, c, c_star)
    # table 12 (k-way prefix sums, d = 5, n = 10): the union of k-way marginals has the Lemma 2
    # total (Σ_j C(5,j) sqrt(C(5-j,k-j) c^j t_out^(k-j)))² over C(5,k)·10^k queries; c from the
    # 1-way value predicts the 2- to 5-way values
    from math import comb

    W = prefix(10)
    t_out = float(np.sum((W @ np.ones(10)) ** 2)) / 100

    def rmse12(c, k):
        root = sum(comb(5, j) * np.sqrt(comb(5 - j, k - j) * c**j * t_out ** (k - j)) for j in range(k + 1))
        return np.sqrt(root**2 / (comb(5, k) * 10**k))

    paper12 = [2.94, 5.84, 9.00, 11.48, 12.58]
    lo, hi = 1.0, 100.0  # bisection for c from the 1-way value (rmse12 increases with c)
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if rmse12(mid, 1) < paper12[0] else (lo, mid)
    for k in range(2, 6):
        assert abs(rmse12(lo, k) - paper12[k - 1]) <= 0.005 * paper12[k - 1] / paper12[0] * k + 0.005, k
    assert lo > optimize_subworkload(centered(W), sizes=(10,), tol=1e-6).loss * 1.05  # +8 %


def _certified_maxvar_bound(W):
    """A lower bound on min over Gaussian mechanisms of (max query variance × privacy cost) for
    the 1-D workload W, computed here from its definition: for any query weights λ and cell
    weights μ on the simplices, t* ≥ ||diag(λ)^½ W diag(μ)^½||_*² (weak duality, see
    dpmatrix.plan.maxvar_strategy). The library only supplies good weights; the bound holds for
    any weights, whatever their origin."""
    from dpmatrix._solvers.maxvar_strategy import optimize_maxvar_strategy

    sol = optimize_maxvar_strategy(W)
    lam = np.asarray(sol.query_weights) / np.sum(sol.query_weights)
    mu = np.asarray(sol.cell_weights) / np.sum(sol.cell_weights)
    M = np.sqrt(lam)[:, None] * W * np.sqrt(mu)[None, :]
    return float(np.sum(np.linalg.svd(M, compute_uv=False))) ** 2 * (1 - 1e-9)


def test_table9_has_entries_no_gaussian_mechanism_can_reach():
    # Table 9 (max variance of the prefix-sum workloads at privacy cost 1), RP+ column. A
    # workload containing the generalized marginal W_1 ⊗ W_2 ⊗ W_3 (prefix, prefix, identity...)
    # has max variance ≥ that marginal's own optimum, which is at least Π_i t*(W_i)'s dual bound:
    # product weights λ_1⊗λ_2⊗λ_3, μ_1⊗μ_2⊗μ_3 make the nuclear norm factor, and uniform weights
    # on a marginalized attribute contribute ||(1/√N)1ᵀ||_* = 1. Our bounds:
    b100, b50, b101 = (_certified_maxvar_bound(prefix(n)) for n in (100, 50, 101))
    assert 5.04 < b100 < 5.05 and 4.15 < b50 < 4.16 and 5.05 < b101 < 5.06
    # identity on k values: λ, μ uniform give ||I/k||_* = 1, so the factor is 1 (and 1 is attained)
    # CPS 3-way contains prefix(100) ⊗ prefix(50) ⊗ identity(7): ≥ 20.94 > the printed 12.814
    assert b100 * b50 > 12.814 * 1.6
    # Loans 3-way and ≤3-way contain prefix(101)^⊗3: ≥ 129.4 > the printed 90.632 and 124.318
    assert b101**3 > 124.318 > 90.632
    # so "within 5 %" of these entries is impossible for any correct mechanism; what a correct
    # ResidualPlanner+ reaches is far above the others too (test below). We could not find how
    # the printed values were computed: one version of the authors' public code takes the
    # privacy cost from Γ = Sub (leverage scores ≤ 1) but the variances from Γ = I, which
    # underestimates the cost, yet recomputing that way gives CPS 4.68 / 9.94 / 12.43 / 13.56,
    # not the printed 7.158 / 24.193 / 12.814 / 28.526.
    # Sanity of the product rule used above, on an explicit Kronecker product:
    from dpmatrix._solvers.maxvar_strategy import optimize_maxvar_strategy

    kron = optimize_maxvar_strategy(np.kron(prefix(4), prefix(3)), tol=1e-7)
    assert kron.max_variance == pytest.approx(
        optimize_maxvar_strategy(prefix(4), tol=1e-7).max_variance
        * optimize_maxvar_strategy(prefix(3), tol=1e-7).max_variance, rel=1e-5)


TABLE9 = {
    "CPS": (CPS, 2, [7.158, 24.193, 12.814, 28.526]),
    "Loans": (LOANS, 4, [14.631, 66.074, 90.632, 124.318]),
    "Adult": (ADULT, 5, [16.247, 88.718, 139.103, 165.942]),
}
# Measured max variances (privacy cost 1), rows 1-way / 2-way / 3-way / ≤3-way:
#   Algorithm 4 ("centred", certified optimal strategies): CPS 12.446 / 63.918 / 118.872 /
#     131.639, Loans 26.036 / 311.121 / 2275.478 / 2275.478, Adult 29.854 / 414.130 / 3558.663 /
#     3558.663;
#   default ("auto", here always the split construction with max-variance-optimal strategies):
#     CPS 9.879 / 35.639 / 57.845 / 63.723, Loans 23.272 / 235.986 / 1381.304 / 1381.304,
#     Adult 27.297 / 330.682 / 2354.850 / 2354.850 — 9-52 % below Algorithm 4 (CPS 21-52 %), and all above
#     the paper (+38 % / +47 % / +351 % / +123 % for CPS).


@pytest.mark.parametrize("dataset", ["CPS"])  # Loans/Adult are measured the same way (~10 s)
def test_table9_default_split_beats_algorithm4_max_variance(dataset):
    sizes, nnum, paper = TABLE9[dataset]
    for wk, value in zip(table8_workloads(sizes, nnum), paper):
        centred = dm.plan(wk, pcost=1, objective="max_var", construction="centred")
        best = dm.plan(wk, pcost=1, objective="max_var")
        assert best.construction == "split"
        assert best.max_variance() < 0.9 * centred.max_variance()  # CPS: 21-52 % lower
        assert best.max_variance() > value  # see the infeasibility test above
