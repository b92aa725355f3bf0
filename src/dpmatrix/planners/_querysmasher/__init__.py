"""QuerySmasher / WFF: the plan, its sub-mechanisms, the planner and the residual decomposition of query workloads."""

from . import planner as _planner  # noqa: F401  (registers the planning function for from_dict)
