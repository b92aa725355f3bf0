"""Planners register themselves: name, aliases, options, what they plan, and how.

:func:`dpmatrix.plan` looks the planner up here by name (or alias) and hands it the workload,
one :class:`~dpmatrix._privacy.Budget` (or ``None`` when the planner chooses the budget, e.g.
from a loss bound) and its options, a frozen keyword-only dataclass that checks itself in
``__post_init__``. The command line lists its ``--planner`` choices from :func:`planner_names`.
Adding a planner is one module (its plan class, options and ``plan`` function) and one call
to :func:`register_planner`.

Examples
--------
>>> from dataclasses import dataclass
>>> @dataclass(frozen=True, kw_only=True)
... class NoOptions:
...     pass
>>> spec = PlannerSpec(name="example", options=NoOptions, plan=lambda wk, budget, opts: None,
...                    description="does nothing")
>>> spec.accepts("EXAMPLE"), spec.accepts("other")
(True, False)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._privacy import Budget, resolve_pcost
from ..errors import PlanError

__all__ = [
    "PlannerSpec",
    "build_options",
    "find_planner",
    "gaussian_pcost",
    "planner_names",
    "register_planner",
    "registered",
]

PlanFunction = Callable[[Any, "Budget | None", Any], Any]


def gaussian_pcost(budget: Budget | None) -> float:
    """The privacy cost of a Gaussian budget (no budget: the usual typed error of
    :func:`~dpmatrix._privacy.resolve_pcost`)."""
    return budget.pcost if budget is not None else float(resolve_pcost())


def _any_workload(workload: Any) -> bool:
    return True


@dataclass(frozen=True, kw_only=True)
class PlannerSpec:
    """One planner as :func:`dpmatrix.plan` sees it.

    Attributes
    ----------
    name : str
        The planner's name (``planner=name``; lower case).
    aliases : tuple of str
        Other accepted names.
    options : type
        A frozen keyword-only dataclass of the planner's options; its ``__post_init__``
        raises :class:`~dpmatrix.errors.PlanError` for a value it cannot use.
    plan : callable
        ``plan(workload, budget, options) -> Plan``; ``budget`` is a
        :class:`~dpmatrix._privacy.Budget` or ``None`` (no budget given).
    pure : bool
        True for a pure ε-DP planner (chosen by a pure budget, ``Budget.pure(ε)``).
    supports : callable
        ``supports(workload) -> bool``: the workloads the planner can plan.
    formats : tuple of str
        The file formats of its plans (``to_dict()["format"]``).
    description : str
        One line for listings (the command line's help).
    """

    name: str
    options: type
    plan: PlanFunction
    aliases: tuple[str, ...] = ()
    pure: bool = False
    supports: Callable[[Any], bool] = _any_workload
    formats: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.lower():
            raise PlanError(f"a planner's name is a non-empty lower-case word, got {self.name!r}")
        if not (dataclasses.is_dataclass(self.options) and isinstance(self.options, type)):
            raise PlanError(f"planner {self.name!r}: options must be a dataclass type")

    def accepts(self, name: str) -> bool:
        """Whether ``planner=name`` (any case) means this planner."""
        key = str(name).lower()
        return key == self.name or key in self.aliases


_REGISTRY: dict[str, PlannerSpec] = {}


def register_planner(spec: PlannerSpec) -> PlannerSpec:
    """Make ``spec`` available to :func:`dpmatrix.plan` (a name or alias already taken by
    another planner is refused).

    Parameters
    ----------
    spec : PlannerSpec

    Returns
    -------
    PlannerSpec
        ``spec`` itself.
    """
    for key in (spec.name, *spec.aliases):
        for other in _REGISTRY.values():
            if other.name != spec.name and other.accepts(key):
                raise PlanError(f"planner name {key!r} is already taken by {other.name!r}")
    _REGISTRY[spec.name] = spec
    return spec


def registered() -> tuple[PlannerSpec, ...]:
    """Every registered planner, in registration order."""
    return tuple(_REGISTRY.values())


def planner_names(*, aliases: bool = True) -> tuple[str, ...]:
    """Every name ``planner=`` accepts (with the aliases unless ``aliases=False``)."""
    out: list[str] = []
    for spec in _REGISTRY.values():
        out.append(spec.name)
        if aliases:
            out.extend(spec.aliases)
    return tuple(out)


def find_planner(name: str, *, pure: bool | None = None) -> PlannerSpec | None:
    """The planner called ``name`` (any case); with ``pure`` given, only a planner of that kind."""
    for spec in _REGISTRY.values():
        if spec.accepts(name) and (pure is None or spec.pure == pure):
            return spec
    return None


def build_options(spec: PlannerSpec, given: Mapping[str, Any]) -> Any:
    """``spec.options(**given)``, with an unknown keyword reported as a :class:`PlanError`
    naming the planner (the options' own ``__post_init__`` checks the values)."""
    fields = {f.name for f in dataclasses.fields(spec.options)}
    unknown = sorted(set(given) - fields)
    if unknown:
        raise PlanError(f"unknown options for the {spec.description or spec.name} planner: {unknown}")
    return spec.options(**dict(given))
