"""``plan_from_dict()``: any planner's plan read back from its ``to_dict()``, loading only the
module of the planner its ``"format"`` names (:func:`~dpmatrix.planners._formats.plan_class`,
the lookup reading a release uses) — not every planner and its solvers — and the targets reader
only for a plan planned from accuracy targets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._base import PlanBase

__all__ = ["plan_from_dict"]


def plan_from_dict(spec: Mapping[str, Any]):
    """Any planner's plan from its ``to_dict()`` (dispatched on ``spec["format"]``); a plan
    planned from accuracy targets comes back with its target report
    (:func:`~dpmatrix.planners._targets_io.with_target_report`).

    Parameters
    ----------
    spec : mapping
        ``plan.to_dict()`` of a ResidualPlanner, QuerySmasher, pure ε-DP or explicit-strategy plan.

    Returns
    -------
    Plan

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 2, "b": 3}), [("a", "b")])
    >>> type(plan_from_dict(dm.plan(wk, epsilon=1, delta=0).to_dict())).__name__
    'PurePlan'
    >>> plan_from_dict(dm.plan(wk, targets=2.0).to_dict()).target_table()["achieved"].round(9).tolist()
    [2.0]
    """
    plan = PlanBase.from_dict(spec)
    if isinstance(spec, Mapping) and "targets" in spec:
        from ._targets_io import with_target_report  # the targets planner: only for its plans

        return with_target_report(plan, spec["targets"])
    return plan
