"""A Gaussian plan with one explicit (dense) strategy matrix over a small marginal.

Li & Miklau, *Efficient Batch Query Answering Under Differential Privacy*, §2.3 (Prop. 2.4): the
matrix mechanism measures ``y = A x + N(0, σ² I)`` where ``x`` is the vector of counts of the
marginal on ``attrs`` (its cells flattened row-major, attributes in domain order) and ``A`` is a
``k × N`` strategy, and answers every query ``q`` by least squares ``q x̂``, ``x̂ = A⁺ y`` (with
i.i.d. noise, generalized least squares is ordinary least squares).

* privacy cost: ``pcost = max diag(AᵀΣ⁻¹A) = ‖A‖²_{1→2} / σ²`` (``‖A‖_{1→2}`` the largest column
  L2 norm), so a budget fixes ``σ² = ‖A‖²_{1→2} / pcost``;
* exact variances: ``Var(q x̂) = σ² q (AᵀA)⁺ qᵀ`` for every ``q`` in the row space of ``A``
  (``x̂`` is then unbiased for ``q x``); queries outside it cannot be answered (typed error).
  ``A`` need not have full column rank: only the queries the workload asks must lie in its
  row space.

This is an explicit small-domain method: the marginal on ``attrs`` is limited to
:data:`MAX_CELLS` cells (dense ``N × N`` matrices are built).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._domain import Domain
from ..._jsonarray import array_from_json, array_to_json, is_json_array
from ..._jsonfile import json_float
from ..._linalg.marginal_map import marginal_map
from ..._privacy import Budget, PrivacyReport
from ..._queries import QueryGroup, QueryWorkload
from ..._workload import Workload
from ...errors import NotMeasuredError, PlanError, WorkloadError
from .._base import PlanBase
from .._formats import plan_format
from .._optimality import as_query_workload as _as_query_workload
from .._optimality import workload_attrs
from .measurement import ExplicitEstimator, explicit_mechanisms
from .stored import checked_eig, eig_to_dict

if TYPE_CHECKING:
    import pandas as pd  # imported where a table is built: reading a plan needs none

__all__ = ["ExplicitStrategyPlan", "MAX_CELLS", "explicit_plan", "workload_attrs"]

EXPLICIT_FORMAT = "dpmatrix.explicit_plan/1"
# largest marginal (cells) an explicit strategy is built over
MAX_CELLS = 4096
# relative tolerances: eigenvalues of AᵀA kept, and the row-space test of a query
_EIG_TOL = 1e-10
_SPAN_TOL = 1e-7


def check_cells(domain: Domain, attrs: tuple[int, ...], limit: int = MAX_CELLS,
                what: str = "an explicit strategy") -> int:
    """Number of cells of the marginal on ``attrs``; :class:`PlanError` above ``limit``."""
    n = math.prod(domain.sizes[a] for a in attrs)
    if n > limit:
        raise PlanError(
            f"{what} is an explicit small-domain method: the marginal on "
            f"{list(domain.names_of(attrs))} has {n} cells (limit {limit}); use "
            "dm.plan(...) (ResidualPlanner / QuerySmasher) for larger domains"
        )
    return n


@plan_format(EXPLICIT_FORMAT)
@dataclass(frozen=True, eq=False)
class ExplicitStrategyPlan(PlanBase, PrivacyReport):
    """Gaussian plan measuring ``y = strategy @ x + N(0, sigma2·I)`` on the marginal ``attrs``.

    Attributes
    ----------
    workload : Workload or QueryWorkload
        What is answered (every marginal / query group inside ``attrs``).
    attrs : tuple of int
        Sorted attribute positions of the measured marginal; ``x`` is its count table flattened
        row-major (axes in domain order), ``N = Π sizes`` cells.
    strategy : numpy.ndarray
        The ``k × N`` strategy matrix ``A`` (read-only).
    sigma2 : float
        Variance of the i.i.d. Gaussian noise added to each of the ``k`` rows.
    name : str
        Label of the strategy (``"identity"``, ``"hierarchical:4"``, ``"lsa"``, ``"custom"``...).
    """

    workload: Workload | QueryWorkload
    attrs: tuple[int, ...]
    strategy: np.ndarray = field(repr=False)
    sigma2: float
    name: str = "custom"

    @property
    def planner_name(self) -> str:
        """``"explicit (<strategy name>)"``, e.g. ``"explicit (lsa)"``."""
        return f"explicit ({self.name})"

    def _options(self) -> dict[str, Any]:
        return {"strategy": self.name}

    # -- privacy ------------------------------------------------------------------------------
    @cached_property
    def sensitivity2(self) -> float:
        """``‖A‖²_{1→2}``: the largest squared column L2 norm of the strategy."""
        return float(np.max(np.sum(self.strategy * self.strategy, axis=0)))

    @cached_property
    def budget(self) -> Budget:
        """``pcost = max diag(AᵀΣ⁻¹A) = ‖A‖²_{1→2}/σ²`` (Σ = σ²I)."""
        return Budget(self.sensitivity2 / float(self.sigma2))

    @property
    def domain(self) -> Domain:
        return self.workload.domain

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the measured marginal table (sizes of ``attrs``)."""
        return tuple(self.domain.sizes[a] for a in self.attrs)

    @property
    def n_cells(self) -> int:
        return math.prod(self.shape)

    # -- linear algebra --------------------------------------------------------------------------
    @cached_property
    def _eig(self) -> tuple[np.ndarray, np.ndarray]:
        """``(V, λ)``: orthonormal basis of the row space of ``A`` and the eigenvalues of ``AᵀA``."""
        # LAPACK's divide-and-conquer syevd, as scipy.linalg.eigh(driver="evd"): the same
        # numbers, without importing SciPy to read a saved plan
        lam, V = np.linalg.eigh(self.strategy.T @ self.strategy)
        keep = lam > _EIG_TOL * max(float(lam[-1]), 1e-300)
        return V[:, keep], lam[keep]

    def _rescaled(self, sigma2: float) -> ExplicitStrategyPlan:
        """The same strategy at noise variance ``sigma2``, keeping its eigendecomposition (a
        function of ``A`` alone) instead of computing it again."""
        out = dataclasses.replace(self, sigma2=float(sigma2))
        out.__dict__["_eig"] = self._eig
        return out

    @cached_property
    def _groups(self) -> tuple[QueryGroup, ...]:
        return tuple(_as_query_workload(self.workload).groups)

    def _lifted(self, i: int) -> np.ndarray:
        """Queries of group ``i`` as rows over the cells of ``attrs``."""
        g = self._groups[i]
        pos = tuple(self.attrs.index(a) for a in g.attrs)
        return g.dense() @ marginal_map(self.shape, pos)

    def _variances_of(self, Q: np.ndarray) -> np.ndarray:
        """``σ² diag(Q (AᵀA)⁺ Qᵀ)``; ``inf`` for rows outside the strategy's row space."""
        V, lam = self._eig
        C = Q @ V
        resid = np.linalg.norm(Q - C @ V.T, axis=1)
        out = float(self.sigma2) * np.sum((C / np.sqrt(lam)) ** 2, axis=1)
        return np.where(resid > _SPAN_TOL * np.maximum(np.linalg.norm(Q, axis=1), 1e-300), np.inf, out)

    @cached_property
    def _cache(self) -> dict[Any, np.ndarray]:
        """Variances computed so far, by workload group (``int``) or marginal (``tuple``): one
        answer reads one group, not all of them."""
        return {}

    def _group_var(self, i: int) -> np.ndarray:
        if i not in self._cache:
            g = self._groups[i]
            self._cache[i] = (self._variances_of(self._lifted(i)).reshape(g.shape) if set(g.attrs) <= set(self.attrs)
                              else np.full(g.shape, np.inf))  # a zero-weight entry outside the measured marginal
        return self._cache[i]

    @cached_property
    def _group_variances(self) -> tuple[np.ndarray, ...]:
        return tuple(self._group_var(i) for i in range(len(self._groups)))

    @cached_property
    def _positive(self) -> tuple[np.ndarray, ...]:
        return tuple(g.weight_array() > 0 for g in self._groups)

    # -- accuracy -----------------------------------------------------------------------------
    def group_variance(self, i: int) -> np.ndarray:
        """Exact variance of every query of group ``i``, shaped like its table of queries."""
        return self._group_var(i).copy()

    def _query_variance(self, key: tuple[int, ...]) -> np.ndarray:
        hits = [i for i, g in enumerate(self._groups) if tuple(sorted(g.attrs)) == key]
        if len(hits) != 1:
            raise WorkloadError(
                f"the workload has {len(hits)} entries on {list(self.domain.names_of(key))}: "
                + ("use group_variance(i)" if hits else "ask for one of its entries' attributes")
            )
        return self.group_variance(hits[0])

    def _variance(self, key: tuple[int, ...]) -> np.ndarray:
        """Cell variances of the marginal on ``key`` (a subset of ``attrs``)."""
        if not set(key) <= set(self.attrs):
            raise NotMeasuredError(
                f"{list(self.domain.names_of(key))} is not inside the measured marginal "
                f"{list(self.domain.names_of(self.attrs))}"
            )
        if key not in self._cache:
            self._cache[key] = self._variances_of(marginal_map(self.shape, tuple(self.attrs.index(a) for a in key)))
        v = self._cache[key].copy()
        if not np.all(np.isfinite(v)):
            raise NotMeasuredError(
                f"strategy {self.name!r} cannot answer every cell of {list(self.domain.names_of(key))} "
                "(they are outside its row space); ask for the workload's queries (query_variance)"
            )
        return v.reshape(tuple(self.domain.sizes[a] for a in key))

    def total_variance(self) -> float:
        """Sum of the variances of every positive-weight workload query (unweighted)."""
        return float(sum(np.sum(v[p]) for v, p in zip(self._group_variances, self._positive)))

    def weighted_total_variance(self) -> float:
        """``Σ_q w_q Var(q)`` (the sum-of-variances objective)."""
        return float(sum(np.sum(g.weight_array()[p] * v[p])
                         for g, v, p in zip(self._groups, self._group_variances, self._positive)))

    @property
    def n_queries(self) -> int:
        return int(sum(np.count_nonzero(p) for p in self._positive))

    def rmse(self) -> float:
        """``sqrt(total variance / number of queries)``."""
        return math.sqrt(self.total_variance() / self.n_queries)

    def max_variance(self) -> float:
        """Largest variance of a positive-weight workload query."""
        return float(max(np.max(v[p]) for v, p in zip(self._group_variances, self._positive) if p.any()))

    def _objective_value(self) -> tuple[str, float]:
        return "sum_var", self.weighted_total_variance()

    def table(self) -> pd.DataFrame:
        """One row per workload entry: attributes, queries, weight, total and max variance."""
        import pandas as pd

        rows = []
        for g, v, p in zip(self._groups, self._group_variances, self._positive):
            rows.append({
                "attributes": ",".join(self.domain.names_of(g.attrs)), "queries": g.n_queries,
                "weight": float(np.mean(g.weight_array())),
                "total_variance": float(np.sum(v[p])) if p.any() else 0.0,
                "max_variance": float(np.max(v[p])) if p.any() else 0.0,
            })  # fmt: skip
        return pd.DataFrame(rows)

    # -- estimation -------------------------------------------------------------------------------
    def estimate(self, y: np.ndarray) -> np.ndarray:
        """Least-squares cells ``x̂ = A⁺ y`` from the noisy measurements ``y`` (length ``k``),
        shaped like the marginal table on ``attrs``. With i.i.d. noise this is GLS; ``q x̂`` is
        unbiased with variance ``σ² q (AᵀA)⁺ qᵀ`` for every ``q`` in the row space of ``A`` (every
        workload query); if ``A`` is rank-deficient, ``x̂`` is the minimum-norm solution.

        Parameters
        ----------
        y : array of length ``k`` (rows of the strategy)

        Returns
        -------
        numpy.ndarray
            Shape :attr:`shape`.
        """
        y = np.asarray(y, dtype=float).reshape(-1)
        if y.shape[0] != self.strategy.shape[0]:
            raise PlanError(f"need {self.strategy.shape[0]} measurements (rows of the strategy), got {y.shape[0]}")
        V, lam = self._eig
        x = V @ ((V.T @ (self.strategy.T @ y)) / lam)
        return x.reshape(self.shape)

    def answer(self, y: np.ndarray, i: int = 0) -> np.ndarray:
        """Least-squares answers to the queries of workload group ``i`` from measurements ``y``."""
        return (self._lifted(i) @ self.estimate(y).reshape(-1)).reshape(self._groups[i].shape)

    # -- measurement ------------------------------------------------------------------------------
    #: noise of ``measure`` with ``noise=None``/``"auto"`` and no generator (secure sampler)
    secure_noise = "lattice_gaussian"

    def mechanism_keys(self, *, noise: str | None = None) -> tuple[tuple[int, ...]]:
        """The key of the plan's one mechanism (``attrs``), without building it."""
        if noise not in (None, "auto", "lattice_gaussian", "gaussian", "gaussian_float"):
            raise PlanError("an explicit-strategy plan is measured with noise='lattice_gaussian' (secure, the "
                            f"default) or 'gaussian' (floating point), got {noise!r}")
        return (self.attrs,)

    def mechanisms(self, *, noise: str | None = None, rel_var_tol: float = 1e-4):
        """``(plan measured, [LinearMechanism])``: the dense strategy on the flattened marginal
        ``attrs``, keyed by ``attrs`` — with the lattice sampler (``None``/``"auto"``/
        ``"lattice_gaussian"``: the plan re-scored with the sampler's exact ρ) or floating-point
        Gaussian draws (``"gaussian"``); see :mod:`dpmatrix.planners._explicit.measurement`."""
        return explicit_mechanisms(self, noise, rel_var_tol)

    def estimator(self, noisy) -> ExplicitEstimator:
        """Least-squares estimates (``x̂ = A⁺ y``) and exact variances from the noisy outputs."""
        return ExplicitEstimator(self, noisy)

    # -- serialization ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description: domain, workload, measured attributes, the strategy and the
        eigendecomposition of ``AᵀA`` (exact float64, :mod:`.stored`), σ², privacy."""
        if isinstance(self.workload, Workload):
            wk = {"kind": "workload", **self.workload.to_dict()}
        else:
            wk = {"kind": "queries", "groups": [
                {"attributes": list(self.domain.names_of(g.attrs)), "matrix": array_to_json(g.dense()),
                 "weights": np.asarray(g.weight_array(), dtype=float).reshape(-1).tolist(), "label": g.label}
                for g in self._groups]}  # fmt: skip
        return {
            "format": EXPLICIT_FORMAT,
            "planner": "explicit",
            "objective": "sum_var",
            "strategy_name": self.name,
            "domain": self.domain.to_dict(),
            "workload": wk,
            "attributes": list(self.domain.names_of(self.attrs)),
            "strategy": array_to_json(self.strategy),
            "solution": eig_to_dict(*self._eig),
            "sigma2": json_float(self.sigma2),
            "residuals": [],
            "privacy": self._privacy_spec(),  # what the default release states
        }

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> ExplicitStrategyPlan:
        """The plan :meth:`to_dict` describes. A stored eigendecomposition is checked against the
        strategy (:func:`.stored.checked_eig`), not recomputed; a file without one (written
        before it was stored) computes it when first needed. The strategy may be a stored array
        or (older files) a list of rows."""
        if spec.get("format") != EXPLICIT_FORMAT:
            raise PlanError(f"not a dpmatrix explicit-strategy plan (format {spec.get('format')!r})")
        domain = Domain.from_dict(spec["domain"])
        w = spec["workload"]
        if w.get("kind") == "queries":
            wk = QueryWorkload(domain)
            for g in w["groups"]:
                m = _matrix(g["matrix"], "a query group's matrix")
                wk.add_explicit(g["attributes"], m, weight=np.asarray(g["weights"], dtype=float), label=g.get("label", ""))
        else:
            wk = Workload.from_dict(domain, {k: v for k, v in w.items() if k != "kind"})
        attrs = domain.resolve(spec["attributes"])
        strategy = _matrix(spec["strategy"], "the explicit strategy")
        n = math.prod(domain.sizes[a] for a in attrs)
        if strategy.ndim != 2 or strategy.shape[1] != n or not np.all(np.isfinite(strategy)) or not np.any(strategy):
            raise PlanError(f"the stored explicit strategy must be a finite non-zero k × {n} matrix, got shape "
                            f"{list(strategy.shape)}")
        plan = cls(wk, attrs, strategy, float(spec["sigma2"]), spec.get("strategy_name", "custom"))
        if "solution" in spec:  # checked in O(kN) instead of an O(N³) eigendecomposition
            plan.__dict__["_eig"] = checked_eig(strategy, spec["solution"], _EIG_TOL)
        return plan

    def __repr__(self) -> str:
        return (f"ExplicitStrategyPlan({self.name!r} on {list(self.domain.names_of(self.attrs))}, "
                f"{self.strategy.shape[0]}×{self.strategy.shape[1]}, pcost={self.pcost:.6g})")


def _matrix(value: Any, what: str) -> np.ndarray:
    """A read-only float matrix from a stored array or a list of rows (files written before
    arrays were stored)."""
    if is_json_array(value):
        return array_from_json(value, PlanError, what)
    try:
        m = np.array(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise PlanError(f"{what} is not a matrix of numbers ({exc})") from None
    m.setflags(write=False)
    return m


def explicit_plan(workload, strategy: np.ndarray, *, pcost: float, name: str = "custom",
                  attrs: tuple[int, ...] | None = None) -> ExplicitStrategyPlan:
    """An :class:`ExplicitStrategyPlan` for ``strategy`` at privacy cost ``pcost``, checked.

    Parameters
    ----------
    workload : Workload or QueryWorkload
        Its marginals / query groups must lie inside the measured marginal.
    strategy : array
        ``k × N`` strategy over the cells of the marginal on ``attrs`` (row-major).
    pcost : float
        Privacy cost; ``σ² = ‖A‖²_{1→2} / pcost``.
    name : str
        Label used in results and error messages.
    attrs : tuple of int, optional
        Measured marginal (default: the union of the workload's attributes).

    Returns
    -------
    ExplicitStrategyPlan

    Raises
    ------
    PlanError
        Too many cells, a strategy of the wrong shape or not finite, or one that cannot answer a
        workload query (outside its row space), naming the strategy.
    WorkloadError
        A zero workload (no query with a positive weight and a non-zero row).

    Examples
    --------
    >>> import numpy as np, dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 4}), [("a",)])
    >>> explicit_plan(wk, np.eye(4), pcost=1.0).total_variance()
    4.0
    """
    qw = _as_query_workload(workload)
    dom = qw.domain
    key = workload_attrs(workload) if attrs is None else tuple(sorted(attrs))
    N = check_cells(dom, key)
    A = np.array(strategy, dtype=float)
    if A.ndim != 2 or A.shape[1] != N or not np.all(np.isfinite(A)):
        raise PlanError(f"strategy {name!r} must be a finite k × {N} matrix over the cells of "
                        f"{list(dom.names_of(key))}, got shape {A.shape}")
    if not np.any(A):
        raise PlanError(f"strategy {name!r} is zero: it measures nothing")
    A.setflags(write=False)
    plan = ExplicitStrategyPlan(workload, key, A, float(np.max(np.sum(A * A, axis=0))) / float(pcost), name)
    nonzero = 0
    for i, g in enumerate(plan._groups):
        if not plan._positive[i].any():
            continue
        if not set(g.attrs) <= set(key):
            raise PlanError(f"workload entry on {list(dom.names_of(g.attrs))} is outside the measured "
                            f"marginal {list(dom.names_of(key))}")
        pos = plan._positive[i]
        nonzero += int(np.count_nonzero(np.any(plan._lifted(i) != 0, axis=1) & pos.reshape(-1)))
        bad = ~np.isfinite(plan._group_variances[i]) & pos
        if bad.any():
            raise PlanError(
                f"strategy {name!r} cannot answer the workload: {int(bad.sum())} queries of the entry "
                f"on {list(dom.names_of(g.attrs))} are outside its row space (rank "
                f"{plan._eig[1].size} of {N}); choose a strategy that spans them"
            )
    if nonzero == 0:
        raise WorkloadError("the workload is zero (no query has a positive weight and a non-zero row): "
                            "there is nothing to answer")
    return plan
