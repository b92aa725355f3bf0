"""Planners register themselves; dm.plan looks them up and converts the budget once."""

from __future__ import annotations

import numpy as np
import pytest

import dpmatrix as dm
from dpmatrix.errors import BudgetError, PlanError
from dpmatrix.planners._builtin import PureOptions, QuerySmasherOptions, ResidualOptions
from dpmatrix.planners._dispatch import budget_of
from dpmatrix.planners._formats import plan_formats
from dpmatrix.planners._registry import PlannerSpec, find_planner, planner_names, register_planner

WK = dm.Workload(dm.Domain({"a": 3, "b": 4}), [("a", "b"), ("a",)])


def test_builtin_planners_and_formats_are_registered():
    assert {"residual", "rp", "rp+", "querysmasher", "qs", "wff", "lsa", "pure"} <= set(planner_names())
    assert set(planner_names(aliases=False)) >= {"residual", "querysmasher", "wff", "lsa", "pure"}
    assert find_planner("RP+").name == "residual" and find_planner("pure", pure=False) is None
    fmts = plan_formats()
    assert {"dpmatrix.plan/1", "dpmatrix.qsplan/1", "dpmatrix.explicit_plan/1", "dpmatrix.pureplan/1",
            "dpmatrix.pure_levels_plan/1", "dpmatrix.pure_matrix_plan/1"} <= set(fmts)


def test_budget_sugar_is_one_budget():
    """Hand values: ρ = 0.5 is pcost 1; μ = 2 is pcost 4; ε = 1 with δ = 0 is pure."""
    assert budget_of(rho=0.5) == dm.Budget(1.0)
    assert budget_of(mu=2.0).pcost == pytest.approx(4.0)
    assert budget_of(epsilon=1.0, delta=0) == dm.Budget.pure(1.0)
    assert budget_of(dm.Budget.pure(0.5)).is_pure and budget_of() is None
    with pytest.raises(BudgetError, match="exactly one"):
        budget_of(dm.Budget(1.0), rho=0.5)
    with pytest.raises(BudgetError, match="delta=0 .* with rho="):
        budget_of(rho=0.5, epsilon=1.0, delta=0)
    with pytest.raises(BudgetError, match="needs epsilon="):
        budget_of(delta=0)


def test_budget_type_chooses_pure_and_keywords_equal_budget():
    by_kw = dm.plan(WK, epsilon=1.0, delta=0)
    by_budget = dm.plan(WK, dm.Budget.pure(1.0))
    assert by_kw.budget.is_pure and type(by_kw) is type(by_budget)
    assert by_kw.total_variance() == by_budget.total_variance()
    g1, g2 = dm.plan(WK, rho=0.5), dm.plan(WK, dm.Budget.zcdp(0.5))
    np.testing.assert_array_equal(g1.sigma2, g2.sigma2)
    with pytest.raises(PlanError, match="Gaussian only"):
        dm.plan(WK, dm.Budget.pure(1.0), planner="querysmasher")


def test_options_check_themselves():
    with pytest.raises(PlanError, match="sum_var"):
        QuerySmasherOptions(objective="max_var")
    with pytest.raises(PlanError, match="plan_datacube_gaussian"):
        ResidualOptions(strategy="identity")
    with pytest.raises(PlanError, match="Gaussian"):
        PureOptions(loss_bound=3.0)
    with pytest.raises(TypeError):
        ResidualOptions("sum_var")  # keyword-only
    with pytest.raises(PlanError, match=r"unknown options for the residual planner: \['colour'\]"):
        dm.plan(WK, rho=0.5, colour="red")
    with pytest.raises(PlanError, match="unknown planner 'nope'"):
        dm.plan(WK, rho=0.5, planner="nope")


def test_a_name_cannot_be_taken_twice():
    spec = find_planner("residual")
    with pytest.raises(PlanError, match="already taken"):
        register_planner(PlannerSpec(name="other", aliases=("rp",), options=spec.options, plan=spec.plan))
    with pytest.raises(PlanError, match="lower-case"):
        PlannerSpec(name="Bad", options=spec.options, plan=spec.plan)
