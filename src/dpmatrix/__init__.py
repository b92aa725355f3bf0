"""dpmatrix: differentially private marginals with optimal matrix mechanisms.

Three phases (paper: ResidualPlanner+, He, Xiao, Toksoz, Ding, Zhang, Kifer):

* describe what is asked: :class:`Domain`, :class:`Workload`;
* plan before touching data: :func:`plan` returns a :class:`Plan` (noise scales, exact
  variances, privacy cost in pcost / ρ-zCDP / (ε, δ) / μ-GDP);
* measure and reconstruct: :meth:`Plan.measure` returns :class:`Measurements`, whose
  :meth:`~Measurements.marginal` gives tidy tables with estimates, variances and confidence
  intervals.

The public names are imported on first use (PEP 562): ``import dpmatrix`` loads no numerical
library, so the command line (``dpmatrix query``) starts fast; ``dm.plan``, ``from dpmatrix
import Plan`` and ``dir(dpmatrix)`` work as if everything were imported up front.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING

from . import _hooks
from ._version import __version__  # noqa: F401  (public)

# public name -> (module that defines it, name there)
_EXPORTS: dict[str, tuple[str, str]] = {
    "Attribute": ("dpmatrix._domain", "Attribute"),
    "Domain": ("dpmatrix._domain", "Domain"),
    "BudgetError": ("dpmatrix.errors", "BudgetError"),
    "DataError": ("dpmatrix.errors", "DataError"),
    "DomainError": ("dpmatrix.errors", "DomainError"),
    "DPMatrixError": ("dpmatrix.errors", "DPMatrixError"),
    "NotMeasuredError": ("dpmatrix.errors", "NotMeasuredError"),
    "PlanError": ("dpmatrix.errors", "PlanError"),
    "ReleaseError": ("dpmatrix.errors", "ReleaseError"),
    "SamplerArgumentError": ("dpmatrix.errors", "SamplerArgumentError"),
    "SamplerEnvironmentError": ("dpmatrix.errors", "SamplerEnvironmentError"),
    "TargetError": ("dpmatrix.errors", "TargetError"),
    "UnknownAttributeError": ("dpmatrix.errors", "UnknownAttributeError"),
    "WorkloadError": ("dpmatrix.errors", "WorkloadError"),
    "BudgetExceededError": ("dpmatrix._ledger", "BudgetExceededError"),
    "Ledger": ("dpmatrix._ledger", "Ledger"),
    "measure": ("dpmatrix._measure.measure_plan", "measure"),
    "PlanBase": ("dpmatrix.planners._base", "PlanBase"),
    "compare": ("dpmatrix.planners._compare", "compare"),
    "plan": ("dpmatrix.planners._dispatch", "plan"),
    "plan_from_dict": ("dpmatrix.planners._read", "plan_from_dict"),
    "ExplicitStrategyPlan": ("dpmatrix.planners._explicit", "ExplicitStrategyPlan"),
    "evaluate": ("dpmatrix.planners._explicit", "evaluate"),
    "PurePlan": ("dpmatrix.planners._pure.plan", "PurePlan"),
    "plan_pure": ("dpmatrix.planners._pure.plan", "plan_pure"),
    "QuerySmasherPlan": ("dpmatrix.planners._querysmasher.plan", "QuerySmasherPlan"),
    "plan_querysmasher": ("dpmatrix.planners._querysmasher.planner", "plan_querysmasher"),
    "Plan": ("dpmatrix.planners._base", "Plan"),
    "ResidualPlan": ("dpmatrix.planners._residual.plan", "ResidualPlan"),
    "PlanFacts": ("dpmatrix.protocols", "PlanFacts"),
    "Budget": ("dpmatrix._privacy", "Budget"),
    "QueryWorkload": ("dpmatrix._queries", "QueryWorkload"),
    "Measurements": ("dpmatrix._reconstruct.measurements", "Measurements"),
    "QueryAnswer": ("dpmatrix._reconstruct.measurements", "QueryAnswer"),
    "SVDBound": ("dpmatrix._solvers.svd_bound", "SVDBound"),
    "lower_bound": ("dpmatrix._solvers.svd_bound", "svd_bound"),
    "Release": ("dpmatrix.release", "Release"),
    "load_release": ("dpmatrix.release", "load_release"),
    "write_release": ("dpmatrix.release", "write_release"),
    "publish": ("dpmatrix._workflow", "publish"),
    "codes": ("dpmatrix._selection", "codes"),
    "Workload": ("dpmatrix._workload", "Workload"),
    "Unit": ("dpmatrix._unit", "Unit"),
    "bound_contributions": ("dpmatrix._unit", "bound_contributions"),
    "record_budget": ("dpmatrix._unit", "record_budget"),
    "code_of": ("dpmatrix._values", "code_of"),
    "infer_domain": ("dpmatrix.engines._infer", "infer_domain"),
    "postprocess": ("dpmatrix._postprocess", "postprocess"),
    "report": ("dpmatrix._report", "report"),
}

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
    "PlanFacts",
    "PlanError",
    "PurePlan",
    "QueryAnswer",
    "QuerySmasherPlan",
    "QueryWorkload",
    "Release",
    "ResidualPlan",
    "SVDBound",
    "ReleaseError",
    "SamplerArgumentError",
    "SamplerEnvironmentError",
    "TargetError",
    "UnknownAttributeError",
    "Workload",
    "Unit",
    "bound_contributions",
    "record_budget",
    "code_of",
    "infer_domain",
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
    "publish",
    "postprocess",
    "report",
]


def __getattr__(name: str):
    """Import a public name on first use and keep it (PEP 562)."""
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'dpmatrix' has no attribute {name!r}") from None
    value = getattr(_importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _hook(name: str):
    """The top-level function ``name``, imported when a method that aliases it is first called."""

    def run(*args, **kwargs):
        return __getattr__(name)(*args, **kwargs)

    return run


# Plan.report / Release.report / Measurements.postprocess live in lower layers; their work is done
# by these top-level functions, registered here (the root runs before any submodule).
_hooks.register("report", _hook("report"))
_hooks.register("postprocess", _hook("postprocess"))

if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from ._domain import Attribute, Domain
    from ._ledger import BudgetExceededError, Ledger
    from ._measure.measure_plan import measure
    from ._postprocess import postprocess
    from ._privacy import Budget
    from ._queries import QueryWorkload
    from ._reconstruct.measurements import Measurements, QueryAnswer
    from ._report import report
    from ._selection import codes
    from ._solvers.svd_bound import SVDBound
    from ._solvers.svd_bound import svd_bound as lower_bound
    from ._unit import Unit, bound_contributions, record_budget
    from ._values import code_of
    from ._workflow import publish
    from ._workload import Workload
    from .engines._infer import infer_domain
    from .errors import (
        BudgetError,
        DataError,
        DomainError,
        DPMatrixError,
        NotMeasuredError,
        PlanError,
        ReleaseError,
        SamplerArgumentError,
        SamplerEnvironmentError,
        TargetError,
        UnknownAttributeError,
        WorkloadError,
    )
    from .planners._base import Plan, PlanBase
    from .planners._compare import compare
    from .planners._dispatch import plan
    from .planners._explicit import ExplicitStrategyPlan, evaluate
    from .planners._pure.plan import PurePlan, plan_pure
    from .planners._querysmasher.plan import QuerySmasherPlan
    from .planners._querysmasher.planner import plan_querysmasher
    from .planners._read import plan_from_dict
    from .planners._residual.plan import ResidualPlan
    from .protocols import PlanFacts
    from .release import Release, load_release, write_release
