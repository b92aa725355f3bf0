"""Which plan class reads which file format: ``plan.to_dict()["format"]`` → the class.

Each plan class registers itself where it is defined (``@plan_format(FORMAT)``), so reading a
plan back (:meth:`dpmatrix.Plan.from_dict`, :func:`dpmatrix.plan_from_dict`) needs no list of
planners. A description without a known ``"format"`` is read by the default class (the
ResidualPlanner family, whose early files had no format entry).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..errors import PlanError

__all__ = ["RESIDUAL_PLAN_FORMAT", "plan_class", "plan_format", "plan_formats"]

T = TypeVar("T", bound=type)

_FORMATS: dict[str, type] = {}
_DEFAULT: list[type] = []

#: the format of the ResidualPlanner family's plans (the default class reads it; early files had
#: no format entry)
RESIDUAL_PLAN_FORMAT = "dpmatrix.plan/1"

#: the module that defines each built-in format's class, imported when a plan of that format is
#: read: reading a release loads its own planner's module only, not every planner and solver
_MODULES: dict[str, str] = {
    RESIDUAL_PLAN_FORMAT: "dpmatrix.planners._residual.plan",
    "dpmatrix.qsplan/1": "dpmatrix.planners._querysmasher.plan",
    "dpmatrix.explicit_plan/1": "dpmatrix.planners._explicit.plan",
    "dpmatrix.pureplan/1": "dpmatrix.planners._pure.plan",
    "dpmatrix.pure_levels_plan/1": "dpmatrix.planners._pure.hierarchical",
    "dpmatrix.pure_matrix_plan/1": "dpmatrix.planners._pure.matrix_strategy",
    "dpmatrix.pure_kron_plan/1": "dpmatrix.planners._pure.kron_plan",
    "dpmatrix.pure_kron_union_plan/1": "dpmatrix.planners._pure.kron_union",
}


def plan_format(name: str, *, default: bool = False) -> Callable[[T], T]:
    """Class decorator: ``cls`` reads plan descriptions whose ``"format"`` is ``name``.

    Parameters
    ----------
    name : str
        The format string the class writes in ``to_dict()["format"]``.
    default : bool, default False
        Also read descriptions with no or an unknown format (one class only).

    Returns
    -------
    callable
        The decorator (returns the class unchanged).
    """

    def register(cls: T) -> T:
        known = _FORMATS.get(name)
        if known is not None and known is not cls:
            raise PlanError(f"plan format {name!r} is already read by {known.__name__}")
        _FORMATS[name] = cls
        if default:
            _DEFAULT[:] = [cls]
        return cls

    return register


def plan_class(fmt: object) -> type:
    """The class that reads plan format ``fmt`` (the default class for an unknown one); a
    built-in format's module is imported on first use."""
    import importlib

    if isinstance(fmt, str) and fmt not in _FORMATS and fmt in _MODULES:
        importlib.import_module(_MODULES[fmt])
    if isinstance(fmt, str) and fmt in _FORMATS:
        return _FORMATS[fmt]
    if not _DEFAULT:
        importlib.import_module(_MODULES[RESIDUAL_PLAN_FORMAT])
    if not _DEFAULT:
        raise PlanError(f"no plan class reads format {fmt!r}")
    return _DEFAULT[0]


def plan_formats() -> dict[str, type]:
    """Every registered format and its class (a copy)."""
    return dict(_FORMATS)
