"""``plan()``: the one entry point that picks a planner (ResidualPlanner family or QuerySmasher / WFF)."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..errors import PlanError
from ..privacy import Budget, resolve_pcost
from .explicit.evaluation import plan_lsa
from .querysmasher.planner import plan_querysmasher
from .residual.plan import plan_residual
from .targets import plan_targets

__all__ = ["plan"]


def plan(
    workload,
    *,
    objective: str | Callable = "sum_var",
    pcost: float | None = None,
    rho: float | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    mu: float | None = None,
    budget: Budget | None = None,
    loss_bound: float | None = None,
    strategies: Mapping[str, str | np.ndarray] | None = None,
    construction: str = "auto",
    planner: str = "residual",
    targets=None,
    target_kind: str = "var",
    **planner_options: Any,
):
    """Plan a release: select the mechanisms for ``workload`` under a privacy budget.

    No data are touched: the plan knows its privacy cost and the exact variance of every answer.

    Parameters
    ----------
    workload : Workload or QueryWorkload
        What is asked (QueryWorkload: QuerySmasher / WFF planners only).
    objective : {"sum_var", "max_var"} or callable, default "sum_var"
        Weighted sum of variances (closed form, Lemma 2), weighted maximum variance (convex
        program), or ``f(v) -> cvxpy scalar`` of the per-marginal variances.
    pcost, rho, mu, epsilon, delta, budget : float or Budget, optional
        Exactly one budget: the privacy cost, ρ-zCDP, μ-GDP, (ε, δ)-DP (both), or a
        :class:`~dpmatrix.privacy.Budget` such as ``Budget.zcdp(0.5)``.
    loss_bound : float, optional
        Instead of a budget: the least private plan whose objective is at most this (eq. 2).
    strategies, construction :
        ResidualPlanner+ options (see
        :func:`~dpmatrix.planners.residual.plan.plan_residual`).
    planner : {"residual", "querysmasher", "qs", "wff", "lsa"}, default "residual"
        ResidualPlanner / RP+, or QuerySmasher / WFF (sum_var and a budget only; extra keyword
        options go to :func:`~dpmatrix.planners.querysmasher.planner.plan_querysmasher`), or
        the Level Selection Algorithm on a small domain (sum_var and a budget only; an
        :class:`~dpmatrix.planners.explicit.plan.ExplicitStrategyPlan`).
    targets : float, mapping or array, optional
        Accuracy targets (fitness-for-use, issue 13): without a budget, the least privacy cost
        meeting every target; with one, the least largest variance/target. See
        :func:`~dpmatrix.planners.targets.plan_targets` (options ``measurable=``, ``tol=``).
    target_kind : {"var", "std", "moe95"}, default "var"
        Unit of ``targets``: variance, standard deviation or 95 % margin of error.

    Returns
    -------
    Plan, QuerySmasherPlan or ExplicitStrategyPlan
        A :class:`~dpmatrix.planners.base.PlanBase`: ``variance``, ``query_variance``,
        ``rmse``, ``max_variance``, ``table``, ``measure`` ...

    Raises
    ------
    BudgetError
        No budget, more than one, or a value that is not positive and finite.

    Examples
    --------
    >>> import dpmatrix as dm
    >>> dom = dm.Domain({"age": 85, "sex": 2, "race": 5})
    >>> wk = dm.Workload(dom, [("age", "sex"), ("race",)])
    >>> plan = dm.plan(wk, budget=dm.Budget.zcdp(0.5))
    >>> round(plan.rho, 12)
    0.5
    """
    if targets is not None:
        if objective != "sum_var" or loss_bound is not None or planner not in ("residual", "rp", "rp+"):
            raise PlanError("targets= replaces objective=, loss_bound= and planner=: the route is "
                            "chosen from the workload (marginals: residual planner; query groups: "
                            "explicit solver)")
        unknown = set(planner_options) - {"measurable", "tol"}
        if unknown:
            raise PlanError(f"unknown options for planning from targets: {sorted(unknown)}")
        return plan_targets(workload, targets, target_kind=target_kind, pcost=pcost, rho=rho,
                            epsilon=epsilon, delta=delta, mu=mu, budget=budget, strategies=strategies,
                            construction=construction, **planner_options)
    if str(planner).lower() == "lsa":
        if objective != "sum_var" or loss_bound is not None or strategies is not None or planner_options:
            raise PlanError("the LSA planner supports objective='sum_var' with a privacy budget only")
        return plan_lsa(workload, pcost=resolve_pcost(pcost=pcost, rho=rho, epsilon=epsilon, delta=delta,
                                                      mu=mu, budget=budget))
    if planner not in ("residual", "rp", "rp+"):
        return _plan_querysmasher(workload, planner, objective, pcost, rho, epsilon, delta, mu,
                                  budget, loss_bound, strategies, construction, planner_options)
    if planner_options:
        raise PlanError(f"unknown options for the residual planner: {sorted(planner_options)}")
    return plan_residual(workload, objective=objective, pcost=pcost, rho=rho, epsilon=epsilon,
                         delta=delta, mu=mu, budget=budget, loss_bound=loss_bound, strategies=strategies,
                         construction=construction)


def _plan_querysmasher(workload, planner, objective, pcost, rho, epsilon, delta, mu, budget, loss_bound,
                       strategies, construction, options):
    name = str(planner).lower()
    if name not in ("querysmasher", "qs", "wff"):
        raise PlanError(f"unknown planner {planner!r}: use 'residual', 'querysmasher', 'wff' or 'lsa'")
    if (objective != "sum_var" or loss_bound is not None or strategies is not None
            or str(construction).lower() not in ("auto", "centred", "centered")):
        raise PlanError("the QuerySmasher / WFF planners support objective='sum_var' with a "
                        "privacy budget only (no loss_bound, no strategies, no construction)")
    c = resolve_pcost(pcost=pcost, rho=rho, epsilon=epsilon, delta=delta, mu=mu, budget=budget)
    if name == "wff":
        options = {**options, "solver": "fourier"}
    return plan_querysmasher(workload, pcost=c, planner="wff" if name == "wff" else "querysmasher",
                             **options)
