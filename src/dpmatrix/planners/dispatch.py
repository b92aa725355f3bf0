"""``plan()``: the one entry point that picks a planner (ResidualPlanner family, QuerySmasher / WFF,
pure ε-DP), and ``plan_from_dict()``: any planner's plan read back from its ``to_dict``."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..defaults import DEFAULT_OBJECTIVE  # the default objective (defined where the CLI reads it cheaply)
from ..errors import BudgetError, PlanError
from ..linalg.threads import blas_threads_for
from ..privacy import Budget, resolve_pcost
from .base import PlanBase
from .explicit.evaluation import plan_lsa
from .explicit.plan import EXPLICIT_FORMAT, ExplicitStrategyPlan
from .pure.hierarchical import HIERARCHICAL_FORMAT, HierarchicalPlan
from .pure.matrix_strategy import MATRIX_FORMAT, MatrixPurePlan
from .pure.plan import FORMAT as PURE_FORMAT
from .pure.plan import PurePlan, check_epsilon, plan_pure
from .querysmasher.plan import FORMAT as QS_FORMAT
from .querysmasher.plan import QuerySmasherPlan
from .querysmasher.planner import plan_querysmasher
from .residual.plan import Plan, plan_residual
from .targets import plan_targets
from .targets_io import with_target_report

__all__ = ["DEFAULT_OBJECTIVE", "plan", "plan_from_dict"]


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
    planner : {"residual", "querysmasher", "qs", "wff", "lsa"}, default "residual"
        ResidualPlanner / RP+, or QuerySmasher / WFF (sum_var and a budget only; extra keyword
        options go to :func:`~dpmatrix.planners.querysmasher.planner.plan_querysmasher`), or
        the Level Selection Algorithm on a small domain (sum_var and a budget only; an
        :class:`~dpmatrix.planners.explicit.plan.ExplicitStrategyPlan`).
        A pure budget (``delta=0`` with ``epsilon=``, or ``budget=Budget.pure(eps)``) selects
        the pure ε-DP planner (:func:`~dpmatrix.planners.pure.plan.plan_pure`; keyword options
        ``strategy="auto"`` (or a name, or a strategy matrix), ``budgeting``, ``variance_model``
        go to it; ``objective`` sum_var or max_var). Prefix/range workloads get per-attribute
        hierarchical / Haar / cell strategies (:mod:`~dpmatrix.planners.pure.hierarchical`).
    targets : float, mapping or array, optional
        Accuracy targets (fitness-for-use, issue 13): without a budget, the least privacy cost
        meeting every target; with one, the least largest variance/target. See
        :func:`~dpmatrix.planners.targets.plan_targets` (options ``measurable=``, ``tol=``).
    target_kind : {"var", "std", "moe95"}, default "var"
        Unit of ``targets``: variance, standard deviation or 95 % margin of error.

    Returns
    -------
    Plan, QuerySmasherPlan, ExplicitStrategyPlan, PurePlan, HierarchicalPlan or MatrixPurePlan
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
    >>> dm.plan(wk, epsilon=1, delta=0).budget.pure_epsilon <= 1
    True
    """
    domain = getattr(workload, "domain", None)
    largest = max(domain.sizes) if domain is not None and len(domain) else 0
    with blas_threads_for(largest):  # per-attribute matrices: one BLAS thread (linalg/threads.py)
        return _dispatch(workload, planner, objective, pcost, rho, epsilon, delta, mu, budget,
                         loss_bound, strategies, construction, targets, target_kind, planner_options)


def _dispatch(workload, planner, objective, pcost, rho, epsilon, delta, mu, budget, loss_bound,
              strategies, construction, targets, target_kind, planner_options):
    if targets is not None:
        if objective is not None or loss_bound is not None or planner not in ("residual", "rp", "rp+"):
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
        if objective not in (None, "sum_var") or loss_bound is not None or strategies is not None or planner_options:
            raise PlanError("the LSA planner supports objective='sum_var' with a privacy budget only")
        return plan_lsa(workload, pcost=resolve_pcost(pcost=pcost, rho=rho, epsilon=epsilon, delta=delta,
                                                      mu=mu, budget=budget))
    if (budget is not None and isinstance(budget, Budget) and budget.is_pure) or (
            delta is not None and not isinstance(delta, (str, bool)) and delta == 0):
        return _plan_pure(workload, DEFAULT_OBJECTIVE if objective is None else objective, pcost, rho, epsilon, delta, mu, budget, loss_bound,
                          strategies, construction, planner, planner_options)
    if planner not in ("residual", "rp", "rp+"):
        return _plan_querysmasher(workload, planner, "sum_var" if objective is None else objective, pcost, rho, epsilon, delta, mu,
                                  budget, loss_bound, strategies, construction, planner_options)
    if "strategy" in planner_options or "budgeting" in planner_options:
        raise PlanError(
            "strategy= / budgeting= are options of the pure epsilon-DP planner (delta=0); with a Gaussian "
            "budget dm.plan uses ResidualPlanner, optimal among all Gaussian mechanisms for marginals (the "
            "datacubes strategies with the square-root rule, for comparison: "
            "dpmatrix.planners.pure.plan_datacube_gaussian)"
        )
    if planner_options:
        raise PlanError(f"unknown options for the residual planner: {sorted(planner_options)}")
    return plan_residual(workload, objective=DEFAULT_OBJECTIVE if objective is None else objective, pcost=pcost, rho=rho, epsilon=epsilon,
                         delta=delta, mu=mu, budget=budget, loss_bound=loss_bound, strategies=strategies,
                         construction=construction)


def _plan_querysmasher(workload, planner, objective, pcost, rho, epsilon, delta, mu, budget, loss_bound,
                       strategies, construction, options):
    name = str(planner).lower()
    if name not in ("querysmasher", "qs", "wff"):
        raise PlanError(f"unknown planner {planner!r}: use 'residual', 'querysmasher', 'wff' or 'lsa'")
    if (objective not in (None, "sum_var") or loss_bound is not None or strategies is not None
            or str(construction).lower() not in ("auto", "centred", "centered")):
        raise PlanError("the QuerySmasher / WFF planners support objective='sum_var' with a "
                        "privacy budget only (no loss_bound, no strategies, no construction)")
    c = resolve_pcost(pcost=pcost, rho=rho, epsilon=epsilon, delta=delta, mu=mu, budget=budget)
    if name == "wff":
        options = {**options, "solver": "fourier"}
    return plan_querysmasher(workload, pcost=c, planner="wff" if name == "wff" else "querysmasher",
                             **options)


def _plan_pure(workload, objective, pcost, rho, epsilon, delta, mu, budget, loss_bound, strategies,
               construction, planner, options):
    """The pure ε-DP planner, refusing every Gaussian-only option by name."""
    if budget is not None and (epsilon is not None or delta is not None):
        raise BudgetError("give exactly one privacy budget, got budget and epsilon/delta")
    others = [n for n, v in dict(pcost=pcost, rho=rho, mu=mu).items() if v is not None]
    if others:
        raise BudgetError(f"give exactly one privacy budget: delta=0 (pure epsilon-DP) with {others[0]}=")
    eps = budget.pure_epsilon if budget is not None else check_epsilon(epsilon) if epsilon is not None else None
    if eps is None:
        raise BudgetError("pure epsilon-DP (delta=0) needs epsilon=")
    if str(planner).lower() not in ("residual", "rp", "pure", "auto"):
        raise PlanError(f"planner={planner!r} is Gaussian only; delta=0 plans with the pure epsilon-DP planner")
    gaussian_only = [n for n, bad in (("loss_bound", loss_bound is not None), ("strategies", strategies is not None),
                                      ("construction", str(construction).lower() != "auto")) if bad]
    if gaussian_only:
        raise PlanError(f"{gaussian_only[0]}= is a Gaussian (ResidualPlanner+) option, not available with "
                        "delta=0 (pure epsilon-DP)")
    if "noise" in options:
        raise PlanError(f"noise={options['noise']!r} with delta=0: pure epsilon-DP is measured with the exact "
                        "discrete Laplace (noise='discrete_gaussian' is a zCDP option; plan with delta > 0)")
    objectives = {"sum_var": "sum", "max_var": "max", "sum": "sum", "max": "max"}
    if not isinstance(objective, str) or objective not in objectives:
        raise PlanError(f"objective={objective!r}: the pure epsilon-DP planner takes 'sum_var' or 'max_var'")
    unknown = sorted(set(options) - {"strategy", "budgeting", "variance_model", "max_identity_cells"})
    if unknown:
        raise PlanError(f"unknown options for the pure epsilon-DP planner: {unknown}")
    return plan_pure(workload, eps, objective=objectives[objective], **options)


def _plan_of_format(spec: Mapping[str, Any]):
    """Any planner's plan from its ``to_dict()`` (dispatched on ``spec["format"]``).

    Parameters
    ----------
    spec : mapping
        ``plan.to_dict()`` of a ResidualPlanner, QuerySmasher, pure ε-DP or explicit-strategy plan.

    Returns
    -------
    PlanBase

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 2, "b": 3}), [("a", "b")])
    >>> type(plan_from_dict(dm.plan(wk, epsilon=1, delta=0).to_dict())).__name__
    'PurePlan'
    """
    return PlanBase.from_dict(spec)


def plan_from_dict(spec: Mapping[str, Any]):
    """Any planner's plan from its ``to_dict()``; a plan planned from accuracy targets (issue 13)
    comes back with its target report (:func:`~dpmatrix.planners.targets_io.with_target_report`).

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 2}), [("a",)])
    >>> plan_from_dict(dm.plan(wk, targets=2.0).to_dict()).target_table()["achieved"].round(9).tolist()
    [2.0]
    """
    plan = _plan_of_format(spec)
    return with_target_report(plan, spec["targets"]) if isinstance(spec, Mapping) and "targets" in spec else plan
