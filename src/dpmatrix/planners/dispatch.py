"""``plan()``: the one entry point that picks a planner (ResidualPlanner family or QuerySmasher / WFF)."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..errors import PlanError
from ..linalg.threads import blas_threads_for
from ..privacy import Budget, resolve_pcost
from .querysmasher.planner import plan_querysmasher
from .residual.plan import plan_residual

__all__ = ["DEFAULT_OBJECTIVE", "plan"]

#: The objective of ``dm.plan`` and of the command line when none is given (issue 17): a
#: statistics office publishes every marginal as a table, and ``max_var`` bounds the worst
#: cell of every table, where ``sum_var`` lets small tables carry large variances (§6.2).
DEFAULT_OBJECTIVE = "max_var"


def plan(
    workload,
    *,
    objective: str | Callable | None = None,
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
    **planner_options: Any,
):
    """Plan a release: select the mechanisms for ``workload`` under a privacy budget.

    No data are touched: the plan knows its privacy cost and the exact variance of every answer.

    Parameters
    ----------
    workload : Workload or QueryWorkload
        What is asked (QueryWorkload: QuerySmasher / WFF planners only).
    objective : {"max_var", "sum_var"} or callable, optional
        Weighted maximum variance (default: :data:`DEFAULT_OBJECTIVE`, the same as the command
        line's; every published table stays accurate, paper §6.2), weighted sum of variances
        (closed form, Lemma 2), or ``f(v) -> cvxpy scalar`` of the per-marginal variances.
        QuerySmasher / WFF plans support ``"sum_var"`` only, which is their default.
    pcost, rho, mu, epsilon, delta, budget : float or Budget, optional
        Exactly one budget: the privacy cost, ρ-zCDP, μ-GDP, (ε, δ)-DP (both), or a
        :class:`~dpmatrix.privacy.Budget` such as ``Budget.zcdp(0.5)``.
    loss_bound : float, optional
        Instead of a budget: the least private plan whose objective is at most this (eq. 2).
    strategies, construction :
        ResidualPlanner+ options (see
        :func:`~dpmatrix.planners.residual.plan.plan_residual`).
    planner : {"residual", "querysmasher", "qs", "wff"}, default "residual"
        ResidualPlanner / RP+, or QuerySmasher / WFF (sum_var and a budget only; extra keyword
        options go to :func:`~dpmatrix.planners.querysmasher.planner.plan_querysmasher`).

    Returns
    -------
    Plan or QuerySmasherPlan
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
    domain = getattr(workload, "domain", None)
    largest = max(domain.sizes) if domain is not None and len(domain) else 0
    with blas_threads_for(largest):  # per-attribute matrices: one BLAS thread (linalg/threads.py)
        return _dispatch(workload, planner, objective, pcost, rho, epsilon, delta, mu, budget,
                         loss_bound, strategies, construction, planner_options)


def _dispatch(workload, planner, objective, pcost, rho, epsilon, delta, mu, budget, loss_bound,
              strategies, construction, planner_options):
    if planner not in ("residual", "rp", "rp+"):
        return _plan_querysmasher(workload, planner, "sum_var" if objective is None else objective, pcost, rho, epsilon, delta, mu,
                                  budget, loss_bound, strategies, construction, planner_options)
    if planner_options:
        raise PlanError(f"unknown options for the residual planner: {sorted(planner_options)}")
    return plan_residual(workload, objective=DEFAULT_OBJECTIVE if objective is None else objective, pcost=pcost, rho=rho, epsilon=epsilon,
                         delta=delta, mu=mu, budget=budget, loss_bound=loss_bound, strategies=strategies,
                         construction=construction)


def _plan_querysmasher(workload, planner, objective, pcost, rho, epsilon, delta, mu, budget, loss_bound,
                       strategies, construction, options):
    name = str(planner).lower()
    if name not in ("querysmasher", "qs", "wff"):
        raise PlanError(f"unknown planner {planner!r}: use 'residual', 'querysmasher' or 'wff'")
    if (objective != "sum_var" or loss_bound is not None or strategies is not None
            or str(construction).lower() not in ("auto", "centred", "centered")):
        raise PlanError("the QuerySmasher / WFF planners support objective='sum_var' with a "
                        "privacy budget only (no loss_bound, no strategies, no construction)")
    c = resolve_pcost(pcost=pcost, rho=rho, epsilon=epsilon, delta=delta, mu=mu, budget=budget)
    if name == "wff":
        options = {**options, "solver": "fourier"}
    return plan_querysmasher(workload, pcost=c, planner="wff" if name == "wff" else "querysmasher",
                             **options)
