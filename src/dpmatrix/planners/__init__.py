"""Planners: the plan protocol (:mod:`.base`), :func:`plan` (:mod:`.dispatch`), one subpackage per planner."""

from .base import PlanBase
from .dispatch import plan

__all__ = ["PlanBase", "plan"]
