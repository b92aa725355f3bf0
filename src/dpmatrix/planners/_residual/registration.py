"""The registration of ResidualPlanner / ResidualPlanner+ (``residual``, aliases ``rp``, ``rp+``): its options (a frozen, keyword-only dataclass that checks
itself) and the call that plans (see :mod:`dpmatrix.planners._registry`). Importing this module
registers the planner; :mod:`dpmatrix.planners._builtin` imports every built-in one in order."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._defaults import DEFAULT_OBJECTIVE
from ..._privacy import Budget
from ...errors import PlanError
from .._registry import PlannerSpec, register_planner
from .plan import PLAN_FORMAT, plan_residual

__all__ = ["ResidualOptions"]


@dataclass(frozen=True, kw_only=True)
class ResidualOptions:
    """Options of :func:`~dpmatrix.planners._residual.plan.plan_residual` (see there)."""

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
                "dpmatrix.planners._pure.plan_datacube_gaussian)"
            )


def _plan_residual(workload: Any, budget: Budget | None, o: ResidualOptions) -> Any:
    return plan_residual(workload, objective=o.objective, budget=budget, loss_bound=o.loss_bound,
                         strategies=o.strategies, construction=o.construction)


register_planner(PlannerSpec(name="residual", aliases=("rp", "rp+"), options=ResidualOptions,
                             plan=_plan_residual, formats=(PLAN_FORMAT,), description="residual"))
