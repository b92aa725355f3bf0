"""One plan protocol: every planner's plan answers the same calls with the same shapes."""

from __future__ import annotations

import numpy as np
import pytest

import dpmatrix as dm
from dpmatrix.errors import BudgetError, PlanError, UnknownAttributeError, WorkloadError
from dpmatrix.planners._base import PlanBase
from dpmatrix.planners._querysmasher.planner import plan_querysmasher


@pytest.fixture(scope="module")
def plans():
    dom = dm.Domain({"a": 3, "b": 5, "c": 4})
    wk = dm.Workload.marginals(dom, 2, upto=True)
    return wk, dm.plan(wk, objective="sum_var", pcost=1), dm.plan(wk, pcost=1, planner="querysmasher")


def test_every_plan_is_a_planbase(plans):
    _, rp, qs = plans
    assert isinstance(rp, PlanBase) and isinstance(qs, PlanBase)


def test_query_variance_takes_attrs_on_every_plan(plans):
    """QuerySmasher on a plain marginal workload is ResidualPlanner (paper: same optimum), so
    both plans give the same variances for the same attribute names."""
    wk, rp, qs = plans
    for attrs in (("a", "b"), ("c",), ("b", "c")):
        np.testing.assert_allclose(qs.query_variance(attrs), rp.query_variance(attrs), rtol=1e-9)
    np.testing.assert_allclose(qs.query_variance((2, 1)), rp.query_variance(("b", "c")), rtol=1e-9)


def test_same_mistake_same_error(plans):
    wk, rp, qs = plans
    for p in (rp, qs):
        with pytest.raises(UnknownAttributeError):
            p.query_variance(("nope",))
    with pytest.raises(BudgetError):
        dm.plan(wk, objective="sum_var", pcost=-1)
    with pytest.raises(BudgetError):
        plan_querysmasher(wk, pcost=-1)
    with pytest.raises(BudgetError):
        dm.plan(wk, pcost=-1, planner="querysmasher")


def test_querysmasher_has_no_cell_variances_of_arbitrary_marginals(plans):
    _, _, qs = plans
    with pytest.raises(PlanError):
        qs.variance(("a", "b"))


def test_query_variance_of_a_set_outside_the_workload(plans):
    _, rp, qs = plans
    with pytest.raises(WorkloadError):
        qs.query_variance(("a", "b", "c"))


@pytest.mark.parametrize(
    "budget, kwargs",
    [
        (dm.Budget.zcdp(0.5), {"rho": 0.5}),
        (dm.Budget.gdp(1.5), {"mu": 1.5}),
        (dm.Budget.approx(1.0, 1e-6), {"epsilon": 1.0, "delta": 1e-6}),
    ],
)
def test_budget_constructors_plan_like_the_keywords(plans, budget, kwargs):
    wk, _, _ = plans
    a = dm.plan(wk, budget=budget)
    b = dm.plan(wk, **kwargs)
    assert a.pcost == pytest.approx(b.pcost, rel=1e-12)
    np.testing.assert_allclose(a.sigma2, b.sigma2, rtol=1e-12)


def test_budget_constructors_by_hand():
    assert dm.Budget.zcdp(0.5).pcost == 1.0  # pcost = 2ρ
    assert dm.Budget.gdp(3).pcost == 9.0  # pcost = μ²
    # (ε, δ) → pcost → (ε at that δ) round trip of the analytic Gaussian curve, for continuous noise
    assert dm.Budget.approx(1.0, 1e-6, noise="gaussian").epsilon(1e-6) == pytest.approx(1.0, rel=1e-9)
    # the default converts for the secure (discrete) noise: its continuous claim is below the ask
    assert dm.Budget.approx(1.0, 1e-6).epsilon(1e-6) < 1.0
    with pytest.raises(BudgetError):
        dm.Budget.zcdp(-1)
    with pytest.raises(BudgetError):
        dm.Budget.approx(1.0, 0)


def test_budget_is_one_of_the_budget_forms(plans):
    wk, _, _ = plans
    with pytest.raises(BudgetError, match="exactly one"):
        dm.plan(wk, objective="sum_var", budget=dm.Budget.zcdp(1), rho=1)
    with pytest.raises(BudgetError):
        dm.plan(wk, objective="sum_var", budget=0.5)


def test_measure_options_are_keyword_only(plans):
    wk, rp, _ = plans
    df = np.zeros((4, 3), dtype=int)
    with pytest.raises(TypeError):
        rp.measure(df, np.random.default_rng(0))
    with pytest.raises(TypeError):
        dm.measure(rp, df, np.random.default_rng(0))
