"""dpmatrix: differentially private marginals with optimal matrix mechanisms.

Three phases (paper: ResidualPlanner+, He, Xiao, Toksoz, Ding, Zhang, Kifer):

* describe what is asked: :class:`Domain`, :class:`Workload`;
* plan before touching data: :func:`plan` returns a :class:`Plan` (noise scales, exact
  variances, privacy cost in pcost / ρ-zCDP / (ε, δ) / μ-GDP);
* measure and reconstruct: :meth:`Plan.measure` returns :class:`Measurements`, whose
  :meth:`~Measurements.marginal` gives tidy tables with estimates, variances and confidence
  intervals.
"""

from .domain import Attribute, Domain
from .errors import (
    BudgetError,
    DataError,
    DomainError,
    DPMatrixError,
    NotMeasuredError,
    PlanError,
    ReleaseError,
    SamplerArgumentError,
    TargetError,
    UnknownAttributeError,
    WorkloadError,
)
from .ledger import BudgetExceededError, Ledger
from .measure.measure_plan import measure
from .planners.base import PlanBase
from .planners.compare import compare
from .planners.dispatch import plan, plan_from_dict
from .planners.explicit import ExplicitStrategyPlan, evaluate
from .planners.pure.plan import PurePlan, plan_pure
from .planners.querysmasher.plan import QuerySmasherPlan
from .planners.querysmasher.planner import plan_querysmasher
from .planners.residual.plan import Plan
from .privacy import Budget
from .queries import QueryWorkload
from .reconstruct.measurements import Measurements, QueryAnswer
from .solvers.svd_bound import SVDBound, svd_bound as lower_bound
from .release import Release, load_release, write_release
from .selection import codes
from .version import __version__
from .workload import Workload


__all__ = [
    "codes",
    "Attribute",
    "Budget",
    "BudgetExceededError",
    "BudgetError",
    "DataError",
    "DomainError",
    "DPMatrixError",
    "Domain",
    "ExplicitStrategyPlan",
    "Ledger",
    "Measurements",
    "NotMeasuredError",
    "Plan",
    "PlanBase",
    "PlanError",
    "PurePlan",
    "QueryAnswer",
    "QuerySmasherPlan",
    "QueryWorkload",
    "Release",
    "SVDBound",
    "ReleaseError",
    "SamplerArgumentError",
    "TargetError",
    "UnknownAttributeError",
    "Workload",
    "WorkloadError",
    "compare",
    "evaluate",
    "load_release",
    "lower_bound",
    "measure",
    "plan",
    "plan_from_dict",
    "plan_pure",
    "plan_querysmasher",
    "write_release",
]
