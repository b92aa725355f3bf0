"""The public API of the core issue works as documented."""

import cvxpy as cp
import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm


def adult():
    from importlib.resources import files

    path = files("dpmatrix") / "data" / "adult.csv"
    dom = dm.Domain.from_json(files("dpmatrix") / "data" / "adult-domain.json")
    return dom, pd.read_csv(path)


def test_issue_snippet_runs():
    dom = dm.Domain({"age": 85, "sex": 2, "race": 5})
    assert dm.Domain.from_sizes([10] * 5).names == ("a0", "a1", "a2", "a3", "a4")
    assert len(dm.Workload.marginals(dom, k=3, upto=True)) == 1 + 3 + 3 + 1
    assert len(dm.Workload.marginals(dom, k=2)) == 3
    wk = dm.Workload(dom, [("age", "sex"), ("race",)], weights=[1.0, 2.0])
    plan = dm.plan(wk, rho=0.5, objective="sum_var")
    assert (plan.pcost, plan.rho, plan.mu) == pytest.approx((1.0, 0.5, 1.0))
    assert plan.epsilon(delta=1e-9) > 0
    assert plan.rmse() > 0 and plan.max_variance() > 0
    assert plan.variance(("age", "sex")).shape == (85, 2)
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"age": rng.integers(0, 85, 500), "sex": rng.integers(0, 2, 500), "race": rng.integers(0, 5, 500)})
    meas = plan.measure(df, rng=np.random.default_rng(0))
    ans = meas.marginal(("age", "sex"))
    assert list(ans.columns) == ["age", "sex", "estimate", "variance", "std", "lower", "upper"]
    assert len(ans) == 170
    np.testing.assert_allclose(ans["std"], np.sqrt(ans["variance"]))
    # the 95% interval is estimate ± 1.959964 std
    np.testing.assert_allclose(ans["upper"] - ans["estimate"], 1.959963984540054 * ans["std"], rtol=1e-12)
    # same seed, same answers
    again = plan.measure(df, rng=np.random.default_rng(0)).marginal(("age", "sex"))
    pd.testing.assert_frame_equal(ans, again)


def test_rmse_is_root_mean_cell_variance():
    dom = dm.Domain.from_sizes([3, 4, 2])
    wk = dm.Workload(dom, [(0, 1), (2,)], weights=[1, 5])
    plan = dm.plan(wk, pcost=2.0)
    total = plan.variance((0, 1)).sum() + plan.variance((2,)).sum()
    assert plan.rmse() == pytest.approx(np.sqrt(total / (12 + 2)), rel=1e-12)
    assert plan.max_variance() == pytest.approx(max(plan.variance((0, 1)).max(), plan.variance((2,)).max()))


def test_custom_objectives_reproduce_builtins():
    dom = dm.Domain.from_sizes([4, 3, 5, 2])
    wk = dm.Workload.marginals(dom, 2, upto=True)
    cells = wk.cells
    mx = dm.plan(wk, pcost=1, objective="max_var")
    custom_max = dm.plan(wk, pcost=1, objective=lambda v: cp.max(v))
    assert custom_max.max_variance() == pytest.approx(mx.max_variance(), rel=1e-5)
    sv = dm.plan(wk, pcost=1, objective="sum_var")
    custom_sum = dm.plan(wk, pcost=1, objective=lambda v: cells @ v)
    assert custom_sum.total_variance() == pytest.approx(sv.total_variance(), rel=1e-5)
    # a loss of another shape: sum of squared per-marginal variances
    sq = dm.plan(wk, pcost=1, objective=lambda v: cp.sum_squares(v))
    assert sq.pcost == pytest.approx(1.0, rel=1e-5)
    assert np.sum(sq._workload_cell_var ** 2) <= np.sum(sv._workload_cell_var ** 2) * (1 + 1e-6)
    with pytest.raises(dm.PlanError, match="not convex"):
        dm.plan(wk, pcost=1, objective=lambda v: cp.sqrt(cp.sum(v)))


@pytest.mark.parametrize("objective", ["sum_var", "max_var"])
def test_utility_constrained_selection(objective):
    wk = dm.Workload.marginals(dm.Domain.from_sizes([5, 3, 4]), 2, upto=True)
    ref = dm.plan(wk, pcost=0.7, objective=objective)
    inv = dm.plan(wk, loss_bound=ref.loss(), objective=objective)
    assert inv.pcost == pytest.approx(0.7, rel=1e-5)
    assert inv.loss() == pytest.approx(ref.loss(), rel=1e-5)


def test_plan_serialization_round_trip(tmp_path):
    dom = dm.Domain({"age": 6, "sex": 2, "race": 3})
    wk = dm.Workload(dom, [("age", "sex"), ("race",), ()], weights=[1, 2, 0.5])
    plan = dm.plan(wk, epsilon=1.0, delta=1e-8, objective="max_var")
    path = tmp_path / "plan.json"
    plan.to_json(path)
    back = dm.Plan.from_json(path)
    np.testing.assert_array_equal(back.sigma2, plan.sigma2)
    assert back.pcost == pytest.approx(plan.pcost)
    assert back.workload.sets == plan.workload.sets
    assert back.objective == "max_var"
    assert dm.Plan.from_json(plan.to_json()).rmse() == pytest.approx(plan.rmse())


def test_zero_weight_marginal():
    dom = dm.Domain.from_sizes([3, 3, 3])
    wk = dm.Workload(dom, [(0, 1), (0,), (2,)], weights=[1, 0, 0])
    plan = dm.plan(wk, pcost=1)
    # (0,) is answerable (its residuals serve (0,1)); (2,) has no positive-weight superset
    assert np.all(np.isfinite(plan.variance((0,))))
    assert np.all(np.isinf(plan.variance((2,))))
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.integers(0, 3, (30, 3)), columns=dom.names)
    meas = plan.measure(df, rng=rng)
    assert [names for names, _ in meas.iter_marginals()] == [("a0", "a1"), ("a0",)]
    with pytest.raises(dm.NotMeasuredError):
        meas.marginal((2,))


def test_adult_release_end_to_end():
    dom, df = adult()
    assert dom.sizes == (85, 9, 100, 16, 7, 15, 6, 5, 2, 100, 100, 99, 42, 2)
    wk = dm.Workload.marginals(dom, 2, attributes=["age", "sex", "race", "income>50K", "education-num"])
    plan = dm.plan(wk, rho=0.5)
    meas = plan.measure(df, rng=np.random.default_rng(7))
    tables = dict(meas.iter_marginals())
    assert len(tables) == 10
    t = tables[("sex", "income>50K")]
    truth = df.groupby(["sex", "income>50K"]).size().to_numpy()
    # with 48,842 records and σ ~ a few units, the estimates are within 6 std of the truth
    assert np.all(np.abs(t["estimate"].to_numpy() - truth) < 6 * t["std"].to_numpy())


def test_zero_weight_marginal_does_not_poison_accuracy_summaries():
    dom = dm.Domain.from_sizes([3, 3, 3])
    wk = dm.Workload(dom, [(0, 1), (1, 2), (0, 2)], weights=[1, 1, 0])
    plan = dm.plan(wk, pcost=1)
    assert np.all(np.isinf(plan.variance((0, 2))))  # (0, 2)'s own residual is not measured
    want_total = plan.variance((0, 1)).sum() + plan.variance((1, 2)).sum()
    assert plan.total_variance() == pytest.approx(want_total, rel=1e-12)
    assert plan.rmse() == pytest.approx(np.sqrt(want_total / 18), rel=1e-12)
    assert plan.max_variance() == pytest.approx(max(plan.variance((0, 1)).max(), plan.variance((1, 2)).max()))


def test_cells_not_estimable_from_a_non_spanning_query_matrix():
    dom = dm.Domain.from_sizes([4, 2])
    halves = np.array([[1.0, 1, 0, 0], [0, 0, 1, 1]])  # spans the total but not the cells
    wk = dm.Workload(dom, [("a0", "a1")], query_types={"a0": halves})
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"a0": rng.integers(0, 4, 300), "a1": rng.integers(0, 2, 300)})
    meas = dm.plan(wk, pcost=1, strategies={"a0": "workload"}).measure(df, rng=rng)
    with pytest.raises(dm.NotMeasuredError, match="cannot be estimated"):
        meas.estimate(("a0", "a1"))
    with pytest.raises(dm.NotMeasuredError):
        meas.marginal(("a0", "a1"))
    ans = meas.answer(("a0", "a1"))  # the workload's own queries are still answerable
    truth = [((df.a0 < 2) & (df.a1 == 0)).sum(), ((df.a0 < 2) & (df.a1 == 1)).sum(),
             ((df.a0 >= 2) & (df.a1 == 0)).sum(), ((df.a0 >= 2) & (df.a1 == 1)).sum()]
    assert np.all(np.abs(ans["estimate"].to_numpy() - truth) < 6 * ans["std"].to_numpy())
