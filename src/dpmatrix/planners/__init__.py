"""Planners: the plan protocol (:mod:`.base`), :func:`plan` (:mod:`.dispatch`), one subpackage per planner.

``PlanBase`` and ``plan`` are loaded on first use (PEP 562): reading a release needs its own
planner's module only, not every planner and its solvers."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import PlanBase
    from .dispatch import plan

__all__ = ["PlanBase", "plan"]


def __getattr__(name: str):
    if name == "PlanBase":
        from .base import PlanBase

        return PlanBase
    if name == "plan":
        from .dispatch import plan

        return plan
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
