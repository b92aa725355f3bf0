"""The one result type every solver in :mod:`dpmatrix._solvers` returns.

A solver's output is a point (``solution``), its objective value, a *certified* lower bound on
the optimum (weak duality, a closed form, or the trivial bound where no certificate is known),
the relative gap ``(objective - lower_bound) / objective`` that follows from the two, a status
word from :data:`STATUSES` and the number of iterations spent.  Solver-specific outputs (dual
multipliers, the linear solver used, ...) go in ``extras`` or, for the specialised results, in
extra fields of a subclass; the specialised results keep their historical field names as
read-only properties.

For a minimisation, ``lower_bound <= optimum <= objective``, hence ``gap >= 0`` up to rounding;
``gap <= tol`` is a proof that ``solution`` is ``tol``-optimal (Boyd & Vandenberghe, *Convex
Optimization*, §5.5.1), not a heuristic stopping rule.

Every ndarray field is stored as a read-only view, and ``extras`` as a read-only mapping, so a
result is immutable in practice, not only in name.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["STATUSES", "SolverResult", "relative_gap"]

#: The shared status vocabulary.
#:
#: * ``"optimal"``: the certified relative gap is within the requested tolerance (or the solution
#:   is optimal in closed form);
#: * ``"stalled"``: no progress for many iterations (rounding limits the steps); the bounds
#:   are still rigorous and ``gap`` says how far from optimal the solution may be;
#: * ``"max_iter"``: the iteration limit stopped the solve;
#: * ``"time_limit"``: the wall-clock limit stopped the solve;
#: * ``"heuristic"``: a heuristic (greedy / local) search with no optimality claim; its
#:   ``lower_bound`` is a valid but possibly loose bound.
STATUSES = ("optimal", "stalled", "max_iter", "time_limit", "heuristic")


def relative_gap(objective: float, lower_bound: float) -> float:
    """``(objective - lower_bound) / |objective|``; 0 when both are 0, ``inf`` if unbounded.

    Examples
    --------
    >>> relative_gap(2.0, 1.5)
    0.25
    """
    objective, lower_bound = float(objective), float(lower_bound)
    if objective == lower_bound:
        return 0.0
    if objective == 0.0 or not math.isfinite(objective) or not math.isfinite(lower_bound):
        return math.inf
    return (objective - lower_bound) / abs(objective)


def _frozen_view(value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.flags.writeable:
        view = value.view()
        view.flags.writeable = False
        return view
    return value


@dataclass(frozen=True, eq=False, kw_only=True)
class SolverResult:
    """A solver's answer with its optimality certificate.

    Attributes
    ----------
    solution : ndarray or None
        The point found (read-only), e.g. noise variances or a strategy matrix.
    objective : float
        The objective value at ``solution`` (an upper bound on the minimum).
    lower_bound : float
        A certified lower bound on the minimum.
    gap : float
        Relative gap ``(objective - lower_bound) / objective`` (≥ 0 up to rounding).
    status : str
        One of :data:`STATUSES`.
    iterations : int
        Iterations (or evaluations) the solver spent; 0 for a closed form.
    extras : Mapping
        Solver-specific outputs (read-only).

    Examples
    --------
    >>> r = SolverResult(solution=np.ones(2), objective=2.0, lower_bound=2.0, gap=0.0,
    ...                  status="optimal", iterations=0)
    >>> r.solution.flags.writeable, r.certified(1e-9)
    (False, True)
    """

    solution: Any = field(repr=False)
    objective: float
    lower_bound: float
    gap: float
    status: str
    iterations: int
    extras: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            frozen = _frozen_view(value)
            if frozen is not value:
                object.__setattr__(self, f.name, frozen)
        extras = {k: _frozen_view(v) for k, v in dict(self.extras).items()}
        object.__setattr__(self, "extras", types.MappingProxyType(extras))

    def certified(self, tol: float) -> bool:
        """True when the certificate proves ``solution`` is within relative ``tol`` of optimal."""
        return bool(self.gap <= tol)
