"""Explicit strategy matrices over a small marginal (Li & Miklau): :class:`ExplicitStrategyPlan`,
``dm.evaluate`` (classic strategies by name or any matrix) and the LSA planner.

The names are loaded on first use (PEP 562): reading a saved explicit plan needs :mod:`.plan`
only, not the LSA solver and the SVD bound of :mod:`.evaluation`."""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .evaluation import LSA_MAX_CELLS, dense_workload, evaluate, plan_lsa
    from .plan import MAX_CELLS, ExplicitStrategyPlan, explicit_plan

_WHERE = {"LSA_MAX_CELLS": "evaluation", "dense_workload": "evaluation", "evaluate": "evaluation",
          "plan_lsa": "evaluation", "MAX_CELLS": "plan", "ExplicitStrategyPlan": "plan", "explicit_plan": "plan"}

__all__ = ["ExplicitStrategyPlan", "LSA_MAX_CELLS", "MAX_CELLS", "dense_workload", "evaluate", "explicit_plan", "plan_lsa"]


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
