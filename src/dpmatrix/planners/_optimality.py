"""How far a Gaussian plan is from the best any matrix mechanism can do.

The singular value bound (Li & Miklau §3.2, :func:`~dpmatrix._solvers.svd_bound.svd_bound`) is a
lower bound ``T*`` on the *weighted total variance* ``Σ_M w_M Σ_{q∈M} Var(q)`` of every Gaussian
matrix mechanism answering the plan's workload at the plan's privacy cost. What a plan reports
against it depends on the objective the plan was selected for:

* ``sum_var`` (and plans with no objective of their own: explicit strategies, QuerySmasher):
  ratio = weighted total variance / ``T*`` ≥ 1 (``= 1`` iff the plan attains the bound; exact
  for plain marginals, where ResidualPlanner is optimal and the bound is tight);
* ``max_var``: the largest weighted query variance is at least the weighted mean, so
  ``max_q w_q Var(q) ≥ T*/n`` (``n`` queries of positive weight) is a valid lower bound on the
  objective and ratio = weighted max variance / (``T*``/n) ≥ 1. It is a *bound-based* ratio:
  ``T*/n`` is usually not attainable for the maximum, so a ratio above 1 does not by itself
  show that a better max-variance plan exists;
* custom convex objectives: no bound on the objective itself; the ratio of the plan's weighted
  total variance to ``T*`` is reported (quantity ``"weighted total variance"``).

``exact`` is the bound's own flag: ``False`` for unions of generalized marginals, where the
structured ``T*`` is a valid but possibly loose lower bound (then the ratio over-states the
plan's gap). When the marginal on the union of the workload's attributes is small (at most
:data:`DENSE_EXACT_CELLS` cells) the exact bound is computed instead from the dense weighted
workload over that marginal: ``W ⊗ 𝟏ᵀ`` over the full domain has the same ``(Σσ)²/N`` as ``W``
over the marginal (the singular values scale by ``√n_rest``, ``N`` by ``n_rest``).

Pure ε-DP plans (Laplace noise) have no Gaussian privacy cost: the bound does not apply and
their ``lower_bound()`` / ``optimality_ratio()`` return ``None``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .._linalg.marginal_map import marginal_map
from .._queries import QueryWorkload
from .._workload import Workload
from ..errors import WorkloadError

if TYPE_CHECKING:
    from .._solvers.svd_bound import SVDBound  # SciPy's spectra: imported where a bound is computed

__all__ = ["DENSE_EXACT_CELLS", "Optimality", "as_query_workload", "dense_queries", "optimality",
           "workload_attrs"]

# largest marginal (cells) on which a non-exact structured bound is replaced by the exact one
DENSE_EXACT_CELLS = 1024


def workload_attrs(workload) -> tuple[int, ...]:
    """Sorted union of the attribute positions of a workload's positive-weight marginals (a
    :class:`~dpmatrix._workload.Workload`) or query groups (a QueryWorkload)."""
    if isinstance(workload, Workload):
        sets = [s for s, w in zip(workload.sets, workload.weights) if w > 0]
    else:
        sets = [g.attrs for g in workload.groups]
    return tuple(sorted({a for s in sets for a in s}))


def as_query_workload(workload) -> QueryWorkload:
    """The workload's queries as a :class:`~dpmatrix._queries.QueryWorkload`."""
    if isinstance(workload, QueryWorkload):
        return workload
    if isinstance(workload, Workload):
        return QueryWorkload.from_workload(workload)
    raise WorkloadError(f"need a Workload or QueryWorkload, got {type(workload).__name__}")


def dense_queries(workload, attrs: tuple[int, ...]) -> np.ndarray:
    """Every positive-weight query as a row over the cells of the marginal on ``attrs``
    (row-major, attributes in domain order), scaled by √weight (explicit small domains only)."""
    qw = as_query_workload(workload)
    shape = tuple(qw.domain.sizes[a] for a in attrs)
    rows = [np.zeros((0, math.prod(shape)))]
    for g in qw.groups:
        w = np.asarray(g.weight_array(), dtype=float).reshape(-1)
        if not np.any(w > 0):
            continue
        pos = tuple(attrs.index(a) for a in g.attrs)
        rows.append(((g.dense() @ marginal_map(shape, pos)) * np.sqrt(w)[:, None])[w > 0])
    return np.vstack(rows)


def exact_bound(workload, pcost: float) -> SVDBound:
    """:func:`svd_bound`, made exact by the dense computation when it is not and the marginal on
    the workload's attributes has at most :data:`DENSE_EXACT_CELLS` cells."""
    from .._solvers.svd_bound import svd_bound

    svd = svd_bound(workload, pcost=pcost)
    if svd.exact:
        return svd
    attrs = workload_attrs(workload)
    if math.prod(workload.domain.sizes[a] for a in attrs) > DENSE_EXACT_CELLS:
        return svd
    W = dense_queries(workload, attrs)
    dense = svd_bound(W.T @ W, gram=True, pcost=pcost, n_queries=svd.n_queries)
    return replace(dense, method="dense (union marginal)")


@dataclass(frozen=True)
class Optimality:
    """A plan's objective against the singular value bound.

    Attributes
    ----------
    objective : str
        ``"sum_var"``, ``"max_var"`` or ``"custom"``.
    quantity : str
        What ``value`` and ``bound`` measure (``"weighted total variance"`` or ``"weighted max
        variance"``).
    value : float
        The plan's value of ``quantity``.
    bound : float
        Lower bound on ``quantity`` for any Gaussian matrix mechanism at the plan's privacy cost.
    ratio : float
        ``value / bound`` (≥ 1).
    svd : SVDBound
        The singular value bound on the weighted total variance it derives from.
    """

    objective: str
    quantity: str
    value: float
    bound: float
    ratio: float
    svd: SVDBound

    @property
    def exact(self) -> bool:
        return self.svd.exact

    def to_dict(self) -> dict[str, Any]:
        """The manifest / report entry: ``total``, ``rmse``, ``exact``, ``ratio`` plus
        ``value`` (the bound on ``quantity``), ``quantity``, ``plan_value``, ``method``, ``pcost``."""
        return {
            "total": self.svd.total, "rmse": self.svd.rmse, "exact": bool(self.svd.exact),
            "ratio": self.ratio, "objective": self.objective, "quantity": self.quantity,
            "value": self.bound, "plan_value": self.value, "method": self.svd.method,
            "pcost": self.svd.pcost,
        }  # fmt: skip


def optimality(workload, pcost: float, objective: str, value: float) -> Optimality:
    """Compare a plan's objective ``value`` with the singular value bound (module docstring).

    Parameters
    ----------
    workload : Workload or QueryWorkload
        The plan's workload (weights included).
    pcost : float
        The plan's privacy cost.
    objective : {"sum_var", "max_var", "custom"}
        What ``value`` is: the weighted total variance (``sum_var``/``custom``) or the weighted
        maximum variance (``max_var``).
    value : float
        The plan's value of that quantity.

    Returns
    -------
    Optimality

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 3, "b": 4}), [("a",), ("a", "b")])
    >>> p = dm.plan(wk, pcost=1.0, objective="sum_var")
    >>> o = optimality(wk, p.pcost, "sum_var", p.loss())
    >>> round(o.ratio, 9), o.exact
    (1.0, True)
    """
    svd = exact_bound(workload, pcost)
    if objective == "max_var":
        bound, quantity = svd.total / svd.n_queries, "weighted max variance"
    else:
        bound, quantity = svd.total, "weighted total variance"
    return Optimality(objective if objective in ("sum_var", "max_var") else "custom", quantity,
                      float(value), float(bound), float(value) / float(bound), svd)
