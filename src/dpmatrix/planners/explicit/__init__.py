"""Explicit strategy matrices over a small marginal (Li & Miklau): :class:`ExplicitStrategyPlan`,
``dm.evaluate`` (classic strategies by name or any matrix) and the LSA planner."""

from .evaluation import LSA_MAX_CELLS, dense_workload, evaluate, plan_lsa
from .plan import MAX_CELLS, ExplicitStrategyPlan, explicit_plan

__all__ = ["ExplicitStrategyPlan", "LSA_MAX_CELLS", "MAX_CELLS", "dense_workload", "evaluate", "explicit_plan", "plan_lsa"]
