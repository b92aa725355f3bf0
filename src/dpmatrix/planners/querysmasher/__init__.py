"""QuerySmasher / WFF: the plan, its sub-mechanisms, the planner and the residual decomposition of query workloads."""
