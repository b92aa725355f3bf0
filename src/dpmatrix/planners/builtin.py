"""The built-in planners' registrations: options (frozen, keyword-only, self-checking) and the
call that plans, one section per planner (see :mod:`dpmatrix.planners.registry`).

==================  ==================  ==========================================================
name                aliases             plans
==================  ==================  ==========================================================
``residual``        ``rp``, ``rp+``     ResidualPlanner / ResidualPlanner+ (Gaussian, any budget
                                        or a loss bound)
``querysmasher``    ``qs``              QuerySmasher (Gaussian, ``sum_var``, a budget)
``wff``                                 QuerySmasher with the Fourier (WFF) solver
``lsa``                                 Level Selection Algorithm, explicit small domains
``pure``                                pure ε-DP (discrete Laplace), chosen by a pure budget
==================  ==================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..defaults import DEFAULT_OBJECTIVE
from ..errors import PlanError
from ..privacy import Budget, resolve_pcost
from .explicit.evaluation import plan_lsa
from .explicit.plan import EXPLICIT_FORMAT
from .pure.hierarchical import HIERARCHICAL_FORMAT
from .pure.matrix_strategy import MATRIX_FORMAT
from .pure.plan import FORMAT as PURE_FORMAT
from .pure.plan import plan_pure
from .querysmasher.plan import FORMAT as QS_FORMAT
from .querysmasher.planner import plan_querysmasher
from .registry import PlannerSpec, register_planner
from .residual.plan import PLAN_FORMAT, plan_residual

__all__ = ["LSAOptions", "PureOptions", "QuerySmasherOptions", "ResidualOptions"]


def _pcost(budget: Budget | None) -> float:
    """The privacy cost of a Gaussian budget (no budget: the usual typed error)."""
    return budget.pcost if budget is not None else resolve_pcost()


# -- ResidualPlanner / ResidualPlanner+ -------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class ResidualOptions:
    """Options of :func:`~dpmatrix.planners.residual.plan.plan_residual` (see there)."""

    objective: str | Callable[..., Any] = DEFAULT_OBJECTIVE
    loss_bound: float | None = None
    strategies: Mapping[str, str | np.ndarray] | None = None
    construction: str = "auto"
    strategy: Any = None
    budgeting: Any = None

    def __post_init__(self) -> None:
        if self.strategy is not None or self.budgeting is not None:
            raise PlanError(
                "strategy= / budgeting= are options of the pure epsilon-DP planner (delta=0); with a Gaussian "
                "budget dm.plan uses ResidualPlanner, optimal among all Gaussian mechanisms for marginals (the "
                "datacubes strategies with the square-root rule, for comparison: "
                "dpmatrix.planners.pure.plan_datacube_gaussian)"
            )


def _plan_residual(workload: Any, budget: Budget | None, o: ResidualOptions) -> Any:
    return plan_residual(workload, objective=o.objective, budget=budget, loss_bound=o.loss_bound,
                         strategies=o.strategies, construction=o.construction)


register_planner(PlannerSpec(name="residual", aliases=("rp", "rp+"), options=ResidualOptions,
                             plan=_plan_residual, formats=(PLAN_FORMAT,), description="residual"))


# -- QuerySmasher / WFF ------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class QuerySmasherOptions:
    """Options of :func:`~dpmatrix.planners.querysmasher.planner.plan_querysmasher`; the
    objective is ``sum_var`` and a budget is required (no loss bound, strategies or construction)."""

    objective: str | None = "sum_var"
    loss_bound: float | None = None
    strategies: Any = None
    construction: str = "auto"
    solver: str = "auto"
    tol: float = 1e-3
    max_exact_cells: int = 2500
    max_iter: int = 2000
    factor_tol: float = 1e-6

    def __post_init__(self) -> None:
        if (self.objective not in (None, "sum_var") or self.loss_bound is not None or self.strategies is not None
                or str(self.construction).lower() not in ("auto", "centred", "centered")):
            raise PlanError("the QuerySmasher / WFF planners support objective='sum_var' with a "
                            "privacy budget only (no loss_bound, no strategies, no construction)")

    def solver_options(self) -> dict[str, Any]:
        skip = {"objective", "loss_bound", "strategies", "construction"}
        return {k: v for k, v in asdict(self).items() if k not in skip}


def _plan_qs(workload: Any, budget: Budget | None, o: QuerySmasherOptions) -> Any:
    return plan_querysmasher(workload, pcost=_pcost(budget), planner="querysmasher", **o.solver_options())


def _plan_wff(workload: Any, budget: Budget | None, o: QuerySmasherOptions) -> Any:
    return plan_querysmasher(workload, pcost=_pcost(budget), planner="wff",
                             **{**o.solver_options(), "solver": "fourier"})


register_planner(PlannerSpec(name="querysmasher", aliases=("qs",), options=QuerySmasherOptions, plan=_plan_qs,
                             formats=(QS_FORMAT,), description="QuerySmasher"))
register_planner(PlannerSpec(name="wff", options=QuerySmasherOptions, plan=_plan_wff, formats=(QS_FORMAT,),
                             description="WFF"))


# -- Level Selection Algorithm (explicit small domains) ----------------------------------------------
@dataclass(frozen=True, kw_only=True)
class LSAOptions:
    """The LSA planner plans ``sum_var`` under a budget and has no options of its own."""

    objective: str | None = None
    loss_bound: float | None = None
    strategies: Any = None

    def __post_init__(self) -> None:
        if self.objective not in (None, "sum_var") or self.loss_bound is not None or self.strategies is not None:
            raise PlanError("the LSA planner supports objective='sum_var' with a privacy budget only")


def _plan_lsa(workload: Any, budget: Budget | None, o: LSAOptions) -> Any:
    return plan_lsa(workload, pcost=_pcost(budget))


register_planner(PlannerSpec(name="lsa", options=LSAOptions, plan=_plan_lsa, formats=(EXPLICIT_FORMAT,),
                             description="LSA"))


# -- pure ε-DP ---------------------------------------------------------------------------------------
_PURE_OBJECTIVES = {"sum_var": "sum", "max_var": "max", "sum": "sum", "max": "max"}


@dataclass(frozen=True, kw_only=True)
class PureOptions:
    """Options of :func:`~dpmatrix.planners.pure.plan.plan_pure` (``None``: its default);
    the Gaussian options are refused by name."""

    objective: Any = DEFAULT_OBJECTIVE
    strategy: Any = None
    budgeting: str | None = None
    variance_model: str | None = None
    max_identity_cells: int | None = None
    loss_bound: float | None = None
    strategies: Any = None
    construction: str = "auto"
    noise: str | None = None

    def __post_init__(self) -> None:
        gaussian_only = [n for n, bad in (("loss_bound", self.loss_bound is not None),
                                          ("strategies", self.strategies is not None),
                                          ("construction", str(self.construction).lower() != "auto")) if bad]
        if gaussian_only:
            raise PlanError(f"{gaussian_only[0]}= is a Gaussian (ResidualPlanner+) option, not available with "
                            "delta=0 (pure epsilon-DP)")
        if self.noise is not None:
            raise PlanError(f"noise={self.noise!r} with delta=0: pure epsilon-DP is measured with the exact "
                            "discrete Laplace (noise='discrete_gaussian' is a zCDP option; plan with delta > 0)")
        if not isinstance(self.objective, str) or self.objective not in _PURE_OBJECTIVES:
            raise PlanError(f"objective={self.objective!r}: the pure epsilon-DP planner takes 'sum_var' or 'max_var'")

    def planner_options(self) -> dict[str, Any]:
        given = {k: getattr(self, k) for k in ("strategy", "budgeting", "variance_model", "max_identity_cells")}
        return {k: v for k, v in given.items() if v is not None}


def _plan_pure(workload: Any, budget: Budget | None, o: PureOptions) -> Any:
    assert budget is not None and budget.pure_epsilon is not None  # chosen by a pure budget only
    return plan_pure(workload, budget.pure_epsilon, objective=_PURE_OBJECTIVES[o.objective], **o.planner_options())


register_planner(PlannerSpec(name="pure", options=PureOptions, plan=_plan_pure, pure=True,
                             formats=(PURE_FORMAT, HIERARCHICAL_FORMAT, MATRIX_FORMAT),
                             description="pure epsilon-DP"))
