"""``plan()``: the one entry point that picks a planner (ResidualPlanner family, QuerySmasher / WFF,
pure ε-DP); ``plan_from_dict()`` (any planner's plan read back) lives in :mod:`._read` and is
re-exported here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._defaults import DEFAULT_OBJECTIVE  # the default objective (defined where the CLI reads it cheaply)
from .._linalg.threads import blas_threads_for
from .._privacy import Budget, resolve_pcost
from .._unit import Unit, record_budget
from ..errors import BudgetError, PlanError
from . import _builtin as builtin  # noqa: F401  (registers the built-in planners)
from ._base import PlanBase
from ._pure.plan import check_epsilon
from ._read import plan_from_dict  # (re-exported: where it was first defined)
from ._registry import PlannerSpec, build_options, find_planner, registered
from ._targets import plan_targets

__all__ = ["DEFAULT_OBJECTIVE", "plan", "plan_from_dict"]


def plan(
    workload,
    budget: Budget | None = None,
    *,
    planner: str = "auto",
    objective: str | Callable | None = None,
    pcost: float | None = None,
    rho: float | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    mu: float | None = None,
    targets=None,
    target_kind: str = "var",
    privacy_unit: Unit | None = None,
    **options: Any,
):
    """Plan a release: select the mechanisms for ``workload`` under a privacy budget.

    No data are touched: the plan knows its privacy cost and the exact variance of every answer.

    Parameters
    ----------
    workload : Workload or QueryWorkload
        What is asked (QueryWorkload: QuerySmasher / WFF planners only).
    budget : Budget, optional
        The privacy budget, e.g. ``Budget.zcdp(0.5)`` or ``Budget.pure(1.0)`` (which selects the
        pure ε-DP planner). The keywords ``pcost``, ``rho``, ``mu``, ``epsilon``/``delta`` are
        sugar for it, converted once here (:func:`budget_of`; ``delta=0`` means pure ε-DP).
    objective : {"max_var", "sum_var"} or callable, optional
        Weighted maximum variance (default: :data:`DEFAULT_OBJECTIVE`, the same as the command
        line's; every published table stays accurate, paper §6.2), weighted sum of variances
        (closed form, Lemma 2), or ``f(v) -> cvxpy scalar`` of the per-marginal variances.
        QuerySmasher / WFF plans support ``"sum_var"`` only, which is their default.
    pcost, rho, mu, epsilon, delta : float, optional
        Exactly one budget (instead of ``budget``): the privacy cost, ρ-zCDP, μ-GDP, (ε, δ)-DP
        (both; ``delta=0`` is pure ε-DP).
    planner : str, default "auto"
        A registered planner (:mod:`~dpmatrix.planners._registry`; built in:
        :mod:`~dpmatrix.planners._builtin`). ``"auto"``: ResidualPlanner for a Gaussian budget,
        the pure ε-DP planner for a pure one. ResidualPlanner / RP+ (``"residual"``), or QuerySmasher / WFF (sum_var and a budget only; extra keyword
        options go to :func:`~dpmatrix.planners._querysmasher.planner.plan_querysmasher`), or
        the Level Selection Algorithm on a small domain (sum_var and a budget only; an
        :class:`~dpmatrix.planners._explicit.plan.ExplicitStrategyPlan`).
        A pure budget (``delta=0`` with ``epsilon=``, or ``budget=Budget.pure(eps)``) selects
        the pure ε-DP planner (:func:`~dpmatrix.planners._pure.plan.plan_pure`; keyword options
        ``strategy="auto"`` (or a name, or a strategy matrix), ``budgeting``, ``variance_model``
        go to it; ``objective`` sum_var or max_var). Prefix/range workloads get per-attribute
        hierarchical / Haar / cell strategies (:mod:`~dpmatrix.planners._pure.hierarchical`).
    **options :
        The planner's options (a frozen dataclass that checks itself, e.g.
        :class:`~dpmatrix.planners._builtin.ResidualOptions`: ``loss_bound`` — instead of a budget,
        the least private plan whose objective is at most this (eq. 2) —, ``strategies``,
        ``construction``); an option the planner does not have is a PlanError.
    targets : float, mapping or array, optional
        Accuracy targets (fitness-for-use): without a budget, the least privacy cost
        meeting every target; with one, the least largest variance/target. See
        :func:`~dpmatrix.planners._targets.plan_targets` (options ``measurable=``, ``tol=``).
    target_kind : {"var", "std", "moe95"}, default "var"
        Unit of ``targets``: variance, standard deviation or 95 % margin of error.
    privacy_unit : Unit, optional
        Protect a person with up to ``k`` records (:class:`~dpmatrix._unit.Unit`) instead of one
        record: the budget is per person; the plan is made for the record-level budget
        :func:`~dpmatrix._unit.record_budget` (ρ/k² Gaussian, ε/k pure ε-DP — one person moves up
        to ``k`` records, possibly all into one cell) and carries the unit
        (:attr:`~dpmatrix.planners._base.PlanBase.privacy_unit`), so measuring it keeps at most
        ``k`` records per identifier and every statement names the person.

    Returns
    -------
    Plan, QuerySmasherPlan, ExplicitStrategyPlan, PurePlan, HierarchicalPlan or MatrixPurePlan
        A :class:`~dpmatrix.planners._base.PlanBase`: ``variance``, ``query_variance``,
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
    budget = budget_of(budget, pcost=pcost, rho=rho, epsilon=epsilon, delta=delta, mu=mu)
    if privacy_unit is not None:
        if not isinstance(privacy_unit, Unit):
            raise PlanError(f"privacy_unit must be a dpmatrix.Unit, got {type(privacy_unit).__name__}")
        if budget is None:
            raise BudgetError("a privacy unit needs a privacy budget (per person): targets or loss_bound plan "
                              "per record")  # fmt: skip
        budget = record_budget(budget, privacy_unit)
        return plan(workload, budget, planner=planner, objective=objective, targets=targets,
                    target_kind=target_kind, **options).with_privacy_unit(privacy_unit)
    domain = getattr(workload, "domain", None)
    largest = max(domain.sizes) if domain is not None and len(domain) else 0
    with blas_threads_for(largest):  # per-attribute matrices: one BLAS thread (linalg/threads.py)
        if targets is not None:
            return _remember(_plan_from_targets(workload, budget, planner, objective, targets, target_kind, options),
                             budget)
        spec = _planner_for(planner, budget)
        if objective is not None:
            options["objective"] = objective
        return _remember(spec.plan(workload, budget, build_options(spec, options)), budget)


def _remember(plan_: Any, budget: Budget | None) -> Any:
    """The plan, told the budget it was planned with (:attr:`PlanBase.planned_budget`), so that a
    measurement can refuse noise the budget's (ε, δ) conversion does not hold for."""
    if budget is not None and isinstance(plan_, PlanBase):
        object.__setattr__(plan_, "planned_budget", budget)  # plans are frozen dataclasses
    return plan_


def budget_of(budget: Budget | None = None, *, pcost: float | None = None, rho: float | None = None,
              epsilon: float | None = None, delta: float | None = None, mu: float | None = None) -> Budget | None:
    """The one :class:`~dpmatrix._privacy.Budget` of :func:`plan`'s keyword sugar (``None``: no
    budget given). ``epsilon=`` with ``delta=0`` is pure ε-DP (``Budget.pure(epsilon)``); every
    other form is converted by :func:`~dpmatrix._privacy.resolve_pcost` (exactly one is allowed).

    Examples
    --------
    >>> budget_of(epsilon=1.0, delta=0).is_pure, budget_of(rho=0.5).pcost, budget_of() is None
    (True, 1.0, True)
    """
    if delta is not None and not isinstance(delta, (str, bool)) and delta == 0:
        if budget is not None:
            raise BudgetError("give exactly one privacy budget, got budget and epsilon/delta")
        others = [n for n, v in dict(pcost=pcost, rho=rho, mu=mu).items() if v is not None]
        if others:
            raise BudgetError(f"give exactly one privacy budget: delta=0 (pure epsilon-DP) with {others[0]}=")
        if epsilon is None:
            raise BudgetError("pure epsilon-DP (delta=0) needs epsilon=")
        return Budget.pure(check_epsilon(epsilon))
    keywords = any(v is not None for v in (pcost, rho, epsilon, delta, mu))
    if not keywords and (budget is None or isinstance(budget, Budget)):
        return budget  # kept whole: a converted (epsilon, delta) remembers its accounting
    if epsilon is not None and delta is not None and not any(v is not None for v in (pcost, rho, mu, budget)):
        return Budget.approx(epsilon, delta)  # converted for the secure (discrete) default noise
    return Budget(resolve_pcost(pcost=pcost, rho=rho, epsilon=epsilon, delta=delta, mu=mu, budget=budget))


def _planner_for(planner: str, budget: Budget | None) -> PlannerSpec:
    """The registered planner ``planner=`` names for this budget: ``"auto"`` is ResidualPlanner
    for a Gaussian budget and the pure ε-DP planner for a pure one, which is also what the
    ResidualPlanner names mean with a pure budget."""
    name = str(planner).lower()
    residual = find_planner("residual")
    if budget is not None and budget.is_pure:
        if name == "auto" or (residual is not None and residual.accepts(name)):
            name = "pure"
        spec = find_planner(name, pure=True)
        if spec is None:
            raise PlanError(f"planner={planner!r} is Gaussian only; delta=0 plans with the pure epsilon-DP planner")
        return spec
    spec = find_planner("residual" if name == "auto" else name, pure=False)
    if spec is None:
        names = ", ".join(repr(s.name) for s in registered() if not s.pure)
        raise PlanError(f"unknown planner {planner!r}: use {names}")
    return spec


def _plan_from_targets(workload, budget, planner, objective, targets, target_kind, options):
    """Accuracy targets: the least privacy cost meeting every target, or with a budget the least
    largest variance/target (:func:`~dpmatrix.planners._targets.plan_targets`)."""
    residual = find_planner("residual")
    if (objective is not None or "loss_bound" in options
            or not (str(planner).lower() == "auto" or (residual is not None and residual.accepts(planner)))):
        raise PlanError("targets= replaces objective=, loss_bound= and planner=: the route is "
                        "chosen from the workload (marginals: residual planner; query groups: "
                        "explicit solver)")
    unknown = set(options) - {"measurable", "tol", "strategies", "construction"}
    if unknown:
        raise PlanError(f"unknown options for planning from targets: {sorted(unknown)}")
    return plan_targets(workload, targets, target_kind=target_kind, budget=budget, **options)
