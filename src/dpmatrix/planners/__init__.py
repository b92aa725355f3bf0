"""Planners: :func:`plan`, the plan classes' base, and what adding a planner takes.

* :func:`plan` / :func:`plan_from_dict` / :func:`compare`: plan a workload under a budget, read a
  plan back, compare planners (also ``dm.plan``, ``dm.plan_from_dict``, ``dm.compare``).
* :class:`Plan` (``PlanBase``): the base every planner's plan subclasses.
* :class:`PlannerSpec`, :func:`register_planner`, :func:`find_planner`, :func:`planner_names`:
  the planner registry; :func:`plan_format` registers a plan class's file format.
* :class:`LinearMechanism`, :class:`Estimator`, :class:`EntryAnswer`, :class:`PrivacyReport`,
  :func:`axis_labels`: what a new planner's plan returns from ``mechanisms()``, ``estimator()``
  and ``privacy()``, and the labels of a marginal's cells.

The names are loaded on first use (PEP 562): reading a release needs its own planner's module
only, not every planner and its solvers.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING

# public name -> (module that defines it, name there)
_EXPORTS: dict[str, tuple[str, str]] = {
    "EntryAnswer": ("dpmatrix._reconstruct.estimator", "EntryAnswer"),
    "Estimator": ("dpmatrix._reconstruct.estimator", "Estimator"),
    "LinearMechanism": ("dpmatrix._mechanisms.linear", "LinearMechanism"),
    "Plan": ("dpmatrix.planners._base", "Plan"),
    "PlanBase": ("dpmatrix.planners._base", "PlanBase"),
    "PlannerSpec": ("dpmatrix.planners._registry", "PlannerSpec"),
    "PrivacyReport": ("dpmatrix._privacy", "PrivacyReport"),
    "axis_labels": ("dpmatrix._reconstruct.measurements", "axis_labels"),
    "compare": ("dpmatrix.planners._compare", "compare"),
    "find_planner": ("dpmatrix.planners._registry", "find_planner"),
    "plan": ("dpmatrix.planners._dispatch", "plan"),
    "plan_format": ("dpmatrix.planners._formats", "plan_format"),
    "plan_from_dict": ("dpmatrix.planners._read", "plan_from_dict"),
    "planner_names": ("dpmatrix.planners._registry", "planner_names"),
    "register_planner": ("dpmatrix.planners._registry", "register_planner"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """Import a public name on first use and keep it (PEP 562)."""
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(_importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from .._mechanisms.linear import LinearMechanism
    from .._privacy import PrivacyReport
    from .._reconstruct.estimator import EntryAnswer, Estimator
    from .._reconstruct.measurements import axis_labels
    from ._base import Plan, PlanBase
    from ._compare import compare
    from ._dispatch import plan
    from ._formats import plan_format
    from ._read import plan_from_dict
    from ._registry import PlannerSpec, find_planner, planner_names, register_planner
