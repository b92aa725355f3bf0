"""ExplicitStrategyPlan, dm.evaluate, dm.plan(planner="lsa") and dm.compare.

Expected numbers: the paper (Li & Miklau, AllRange(4) with P(ε,δ) = 1, i.e. pcost = 1: identity
20, the workload 24, hierarchical 20.857143, Haar 18, bound 16.312243) or brute force here with
explicit matrices: privacy cost = largest diagonal of AᵀΣ⁻¹A with Σ = σ²I written out, variances
σ² diag(W pinv(AᵀA) Wᵀ) with numpy's pinv, the workload built with the oracle's Kronecker helpers.
"""

import math

import numpy as np
import pytest

import dpmatrix as dm
from dpmatrix.errors import NotMeasuredError, PlanError, WorkloadError
from dpmatrix.planners._explicit import ExplicitStrategyPlan, explicit_plan
from oracle import generalized_marginal_query, range_matrix
from oracle import pcost as oracle_pcost


def allrange4():
    return dm.Workload(dm.Domain({"a": 4}), [("a",)], query_types={"a": "range"})


@pytest.mark.parametrize("name, total", [("identity", 20.0), ("workload", 24.0),
                                         ("hierarchical", 20.857143), ("haar", 18.0)])
def test_paper_allrange4_numbers(name, total):
    p = dm.evaluate(allrange4(), name, pcost=1)
    assert isinstance(p, ExplicitStrategyPlan)
    assert p.total_variance() == pytest.approx(total, abs=5e-7)
    assert p.lower_bound().total == pytest.approx(16.312243, abs=5e-7)
    assert p.optimality_ratio() == pytest.approx(total / 16.312242831688, rel=1e-6)


def test_identity_just_works_and_budget_units():
    wk = allrange4()
    assert dm.evaluate(wk, "identity", pcost=1).total_variance() == pytest.approx(20.0)
    assert dm.evaluate(wk, "identity", rho=0.5).total_variance() == pytest.approx(20.0)
    p = dm.evaluate(wk, "identity", budget=dm.Budget.zcdp(2.0))
    assert p.rho == pytest.approx(2.0) and p.total_variance() == pytest.approx(5.0)


def two_attr_workload():
    dom = dm.Domain({"a": 4, "b": 3})
    return dm.Workload(dom, [("a", "b"), ("a",), ("b",)], weights=[1.0, 2.0, 0.5],
                       query_types={"a": "range"})


def brute_dense(wk):
    """Positive-weight queries over the cells of (a, b) with the oracle, and their weights."""
    sizes = wk.domain.sizes
    Ws = [range_matrix(4), np.eye(3)]
    rows, w = [], []
    for s, wt in zip(wk.sets, wk.weights):
        Q = generalized_marginal_query(sizes, s, Ws)
        rows.append(Q)
        w.extend([wt] * Q.shape[0])
    return np.vstack(rows), np.array(w)


@pytest.mark.parametrize("name", ["identity", "hierarchical", "hierarchical:4", "haar", "fourier",
                                  "workload", "quarter-root", "lsa"])
def test_privacy_and_variances_against_explicit_definitions(name):
    wk = two_attr_workload()
    p = dm.evaluate(wk, name, pcost=0.8)
    A = p.strategy
    assert A.shape[1] == 12 and p.attrs == (0, 1)
    Sigma = p.sigma2 * np.eye(A.shape[0])
    assert oracle_pcost(A, Sigma) == pytest.approx(0.8, rel=1e-12)
    assert p.pcost == pytest.approx(0.8, rel=1e-12)
    W, w = brute_dense(wk)
    qv = p.sigma2 * np.einsum("ij,jk,ik->i", W, np.linalg.pinv(A.T @ A), W)
    assert p.total_variance() == pytest.approx(qv.sum(), rel=1e-8)
    assert p.optimality().value == pytest.approx((w * qv).sum(), rel=1e-8)
    assert p.max_variance() == pytest.approx(qv.max(), rel=1e-8)
    assert np.sort(p.query_variance("a").ravel()) == pytest.approx(np.sort(qv[30:40]), rel=1e-8)  # 30 rows of (a, b), then 10 of a
    cell = p.sigma2 * np.diag(np.linalg.pinv(A.T @ A))
    assert p.variance(("a", "b")).ravel() == pytest.approx(cell, rel=1e-8)
    assert p.optimality_ratio() >= 1.0 - 1e-9


def test_per_attribute_names_are_kronecker_products():
    from dpmatrix._linalg.strategies import haar, hierarchical

    wk = two_attr_workload()
    assert np.array_equal(dm.evaluate(wk, "haar", pcost=1).strategy, np.kron(haar(4), haar(3)))
    assert np.array_equal(dm.evaluate(wk, "hierarchical:4", pcost=1).strategy,
                          np.kron(hierarchical(4, 4), hierarchical(3, 4)))


def test_estimate_recovers_noise_free_data_and_simulated_variance():
    wk = allrange4()
    p = dm.evaluate(wk, "hierarchical", pcost=1.0)
    x = np.array([3.0, 0.0, 7.0, 2.0])
    assert p.estimate(p.strategy @ x) == pytest.approx(x)
    rng = np.random.default_rng(7)
    reps = 2000
    Y = (p.strategy @ x)[:, None] + rng.normal(0.0, math.sqrt(p.sigma2), size=(reps, p.strategy.shape[0])).T
    ests = np.array([p.answer(Y[:, r]) for r in range(reps)])
    W = range_matrix(4)
    # answers of 2000 draws: unbiased and with the predicted variances (loose tolerance)
    emp = ests.var(axis=0)
    assert np.sort(emp) == pytest.approx(np.sort(p.query_variance("a")), rel=0.15)
    assert np.sort(ests.mean(axis=0)) == pytest.approx(np.sort(W @ x), abs=0.25)


def test_rank_deficient_strategy_answers_only_its_row_space():
    dom = dm.Domain({"a": 3, "b": 2})
    wk = dm.Workload(dom, [("a",)])
    A = np.kron(np.eye(3), np.ones((1, 2)))  # measures the a-marginal only: rank 3 of 6
    p = explicit_plan(wk, A, pcost=1.0, attrs=(0, 1))
    # σ² = ‖A‖²_{1→2} = 1; q = a row of A, AᵀA = I ⊗ 11ᵀ, (AᵀA)⁺ = I ⊗ 11ᵀ/4: q(AᵀA)⁺qᵀ = 4/4
    assert p.variance("a") == pytest.approx(np.full(3, 1.0))
    with pytest.raises(NotMeasuredError, match="row space"):
        p.variance(("a", "b"))
    x = np.arange(6.0)
    assert p.estimate(A @ x).sum(axis=1) == pytest.approx(x.reshape(3, 2).sum(axis=1))


def test_strategy_that_cannot_answer_is_a_typed_error_naming_it():
    with pytest.raises(PlanError, match="'three-cells'.*cannot answer"):
        dm.evaluate(allrange4(), np.eye(4)[:3], pcost=1, name="three-cells")


def test_zero_workload_is_a_clear_error():
    dom = dm.Domain({"a": 4})
    qw = dm.QueryWorkload(dom).add_explicit(("a",), np.zeros((2, 4)))
    with pytest.raises(WorkloadError, match="zero"):
        dm.evaluate(qw, "identity", pcost=1)


def test_unknown_name_and_domain_too_large():
    with pytest.raises(PlanError, match="unknown strategy"):
        dm.evaluate(allrange4(), "wavelets", pcost=1)
    big = dm.Workload(dm.Domain({"a": 100, "b": 50}), [("a", "b")])
    with pytest.raises(PlanError, match="5000 cells"):
        dm.evaluate(big, "identity", pcost=1)


def test_lsa_planner():
    p = dm.plan(allrange4(), planner="lsa", pcost=1)
    assert isinstance(p, ExplicitStrategyPlan) and p.name == "lsa"
    A = p.strategy
    brute = np.max(np.sum(A * A, axis=0)) * np.trace(range_matrix(4).T @ range_matrix(4) @ np.linalg.pinv(A.T @ A))
    assert p.total_variance() == pytest.approx(brute, rel=1e-9)
    assert 16.312243 <= p.total_variance() <= 18.0  # between the bound and Haar
    with pytest.raises(PlanError, match="2048 cells"):
        dm.plan(dm.Workload(dm.Domain({"a": 2048}), [("a",)]), planner="lsa", pcost=1)
    with pytest.raises(PlanError, match="sum_var"):
        dm.plan(allrange4(), planner="lsa", pcost=1, objective="max_var")


def test_to_dict_round_trip():
    p = dm.evaluate(two_attr_workload(), "haar", pcost=1.5)
    q = ExplicitStrategyPlan.from_dict(p.to_dict())
    assert q.total_variance() == pytest.approx(p.total_variance()) and q.pcost == pytest.approx(1.5)
    dom = dm.Domain({"a": 4, "b": 5})
    qw = dm.QueryWorkload.pairs(dom, "abs")
    p = dm.evaluate(qw, "identity", pcost=1)
    q = ExplicitStrategyPlan.from_dict(p.to_dict())
    assert q.total_variance() == pytest.approx(p.total_variance())


def test_compare_allrange4():
    df = dm.compare(allrange4(), pcost=1)
    gauss = df[df["planner"] != "pure ε-DP"]  # the pure row may name the same strategies
    got = dict(zip(gauss["strategy"], gauss["total_variance"]))
    assert got["identity"] == pytest.approx(20.0) and got["haar"] == pytest.approx(18.0)
    assert got["hierarchical"] == pytest.approx(20.857143, abs=5e-7)
    assert df.attrs["lower_bound"].total == pytest.approx(16.312243, abs=5e-7)
    done = df[df["note"].str.startswith("skipped") == False]  # noqa: E712
    assert list(done["weighted_total_variance"]) == sorted(done["weighted_total_variance"])
    assert (done["ratio"] >= 1 - 1e-9).all()
    assert "ResidualPlanner+" in set(df["planner"])
    pure = df[df["planner"] == "pure ε-DP"]
    # range queries under pure ε-DP: cell or level strategies, planned, not skipped
    assert not pure["note"].iloc[0].startswith("skipped") and pure["total_variance"].iloc[0] > 0


def test_compare_skips_large_explicit_and_labels_pure():
    dom = dm.Domain({"a": 100, "b": 60, "c": 3})
    df = dm.compare(dm.Workload.marginals(dom, 1), rho=0.5, querysmasher=False)
    skipped = df[df["planner"] == "explicit"]
    assert skipped["note"].str.contains("too large: 18000 cells").all()
    assert df.iloc[0]["planner"] == "ResidualPlanner" and df.iloc[0]["ratio"] == pytest.approx(1.0)
    pure = df[df["planner"] == "pure ε-DP"].iloc[0]
    assert "epsilon=1-DP" in pure["privacy"] and pure["ratio"] > 1


def test_zero_weight_entry_outside_the_measured_marginal_is_ignored():
    dom = dm.Domain({"a": 3, "b": 2, "c": 4})
    wk = dm.Workload(dom, [("a", "b"), ("c",)], weights=[1.0, 0.0])
    p = dm.evaluate(wk, "identity", pcost=1)
    assert p.attrs == (0, 1) and p.total_variance() == pytest.approx(6.0)
    assert p.optimality_ratio() == pytest.approx(1.0)  # identity is optimal for one full marginal
