"""The registration of QuerySmasher (``querysmasher``, alias ``qs``) and its Fourier solver (``wff``): its options (a frozen, keyword-only dataclass that checks
itself) and the call that plans (see :mod:`dpmatrix.planners._registry`). Importing this module
registers the planner; :mod:`dpmatrix.planners._builtin` imports every built-in one in order."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..._privacy import Budget
from ...errors import PlanError
from .._registry import PlannerSpec, gaussian_pcost, register_planner
from .plan import FORMAT as QS_FORMAT
from .planner import plan_querysmasher

__all__ = ["QuerySmasherOptions"]


@dataclass(frozen=True, kw_only=True)
class QuerySmasherOptions:
    """Options of :func:`~dpmatrix.planners._querysmasher.planner.plan_querysmasher`; the
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
    return plan_querysmasher(workload, pcost=gaussian_pcost(budget), planner="querysmasher", **o.solver_options())


def _plan_wff(workload: Any, budget: Budget | None, o: QuerySmasherOptions) -> Any:
    return plan_querysmasher(workload, pcost=gaussian_pcost(budget), planner="wff",
                             **{**o.solver_options(), "solver": "fourier"})


register_planner(PlannerSpec(name="querysmasher", aliases=("qs",), options=QuerySmasherOptions, plan=_plan_qs,
                             formats=(QS_FORMAT,), description="QuerySmasher"))
register_planner(PlannerSpec(name="wff", options=QuerySmasherOptions, plan=_plan_wff, formats=(QS_FORMAT,),
                             description="WFF"))
