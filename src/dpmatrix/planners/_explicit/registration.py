"""The registration of the Level Selection Algorithm on explicit small domains (``lsa``): its options (a frozen, keyword-only dataclass that checks
itself) and the call that plans (see :mod:`dpmatrix.planners._registry`). Importing this module
registers the planner; :mod:`dpmatrix.planners._builtin` imports every built-in one in order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..._privacy import Budget
from ...errors import PlanError
from .._registry import PlannerSpec, gaussian_pcost, register_planner
from .evaluation import plan_lsa
from .plan import EXPLICIT_FORMAT

__all__ = ["LSAOptions"]


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
    return plan_lsa(workload, pcost=gaussian_pcost(budget))


register_planner(PlannerSpec(name="lsa", options=LSAOptions, plan=_plan_lsa, formats=(EXPLICIT_FORMAT,),
                             description="LSA"))
