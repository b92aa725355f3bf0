"""The registration of pure ε-DP with the exact discrete Laplace (``pure``, chosen by a pure budget): its options (a frozen, keyword-only dataclass that checks
itself) and the call that plans (see :mod:`dpmatrix.planners._registry`). Importing this module
registers the planner; :mod:`dpmatrix.planners._builtin` imports every built-in one in order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..._defaults import DEFAULT_OBJECTIVE
from ..._privacy import Budget
from ...errors import PlanError
from .._registry import PlannerSpec, register_planner
from .hierarchical import HIERARCHICAL_FORMAT
from .kron_plan import KRON_FORMAT
from .matrix_strategy import MATRIX_FORMAT
from .plan import FORMAT as PURE_FORMAT
from .plan import plan_pure

__all__ = ["PureOptions"]


_PURE_OBJECTIVES = {"sum_var": "sum", "max_var": "max", "sum": "sum", "max": "max"}


@dataclass(frozen=True, kw_only=True)
class PureOptions:
    """Options of :func:`~dpmatrix.planners._pure.plan.plan_pure` (``None``: its default);
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
                             formats=(PURE_FORMAT, HIERARCHICAL_FORMAT, MATRIX_FORMAT, KRON_FORMAT),
                             description="pure epsilon-DP"))
