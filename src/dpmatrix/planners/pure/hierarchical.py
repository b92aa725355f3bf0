"""Pure ε-DP plans of prefix / range / custom-query workloads with per-attribute level strategies.

Strategy (Cormode et al. §3 with one group per level tuple). For a workload marginal ``A`` each
attribute ``i ∈ A`` carries a level strategy ``H_i^0..H_i^{L_i}`` (:mod:`.levels`: plain cells, a
``b``-ary tree, or the Haar wavelet; attributes with plain-cell queries always use cells). Group
``(A, ℓ)``, ``ℓ = (ℓ_i)_{i∈A}``, releases the integer rows ``⊗_{i∈A} H_i^{ℓ_i}`` applied to the
``A``-table plus discrete Laplace noise of parameter ``ε_{A,ℓ}``.

Budgets (product form): ``ε_{A,ℓ} = ε_A Π_i η_{i,ℓ_i}`` with ``Σ_ℓ η_{i,ℓ} = 1``, so the groups
of ``A`` spend ``ε_A`` and the plan ``Σ_A ε_A ≤ ε``: every level has column L1 norm ≤ 1 and
the deepest cells reach 1 in every level tuple, so the max column L1 norm of the budget-scaled
strategy is exactly ``Σ_{A,ℓ} ε_{A,ℓ}`` (:meth:`HierarchicalPlan.privacy_epsilon`). Continuous
model ``2/ε²``: the precision of ``A``'s stack is ``(ε_A²/2) ⊗_i G_i`` and the sum / maximum of
its query variances are ``(2/ε_A²) Π_i F_i`` / ``(2/ε_A²) Π_i M_i`` (:mod:`.levels`), so each
attribute chooses its level strategy alone, and the marginals' budgets follow in closed form:
``objective="sum"``: the cube-root rule (Corollary 3.3) on ``s_A = 2 w_A Π F_i``;
``objective="max"``: ``min max_A w_A c_A/ε_A²`` s.t. ``Σ ε_A = ε`` equalizes the terms,
``ε_A ∝ √(w_A c_A)`` with ``c_A = 2 Π M_i``. Budgets are rounded down to dyadic rationals
(``Σ ≤ ε`` checked exactly).

Recovery (§3.2): GLS *within each marginal's stack*, with the product-form precisions
``ω_ℓ = Π_i η_{i,ℓ_i}²`` as weights (so the Gram stays ``⊗ G_i`` and is inverted attribute by
attribute): ``x̂_A = (⊗ G_i⁻¹) Σ_ℓ ω_ℓ (⊗ H_i^{ℓ_i})ᵀ y_ℓ``. This is the exact GLS for the
continuous model; under the released discrete Laplace noise (exact variances ``v_ℓ``, not in
product form) it stays unbiased and its covariance is computed exactly as the sandwich

    Cov(x̂_A) = Σ_ℓ ω_ℓ² v_ℓ ⊗_i G_i⁻¹ H_i^{ℓ_iᵀ} H_i^{ℓ_i} G_i⁻¹,

so the variance of any linear query is a mode product of a ``(L_1+1) × … `` coefficient tensor
with per-attribute diagonals (no object of the full domain's size).

Consistency: each workload marginal's answers (and the cells of any marginal inside it) come from
one estimate, so they are consistent with each other; two workload marginals that share
attributes are estimated from their own groups and are NOT consistent with each other on their
common sub-marginal (a joint GLS across marginals would need the full Gram
``Σ_A ⊗_{i∈A} G_i ⊗_{i∉A} 11ᵀ``, which has no per-attribute inverse when a tree's blocks are
uneven). A sub-marginal that is not in the workload is read from the workload marginal containing
it with the smallest variance. The cell strategies of :mod:`.plan` (marginals, Fourier,
optimized...) are consistent across marginals.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from math import prod
from typing import Any

import numpy as np
import pandas as pd

from ...domain import Domain
from ...errors import NotMeasuredError, PlanError
from ...measure import measure as _measure
from ...mechanisms.laplace import discrete_laplace_variance, round_budgets
from ...mechanisms.linear import LinearMechanism
from ...reconstruct.estimator import EntryAnswer, Estimator
from ...reconstruct.measurements import query_labels
from ...solvers.budget_split import cube_root_split
from ...workload import Workload
from ..base import PlanBase
from .levels import (
    KINDS,
    AttributeLevels,
    best_levels,
    interval_rows,
    quadratic_diagonal,
)
from .entry_summaries import EntryVarianceSummaries
from .units import PureUnits, check_epsilon

__all__ = ["HIERARCHICAL_FORMAT", "LEVEL_STRATEGIES", "HierarchicalPlan", "plan_hierarchical"]

HIERARCHICAL_FORMAT = "dpmatrix.pure_levels_plan/1"

#: strategies of generalized (prefix/range/custom) workloads → the level kinds they allow on
#: attributes whose queries are not plain cells
LEVEL_STRATEGIES = {"marginals": ("cells",), "hierarchical": ("tree",), "haar": ("haar",), "auto": KINDS}

AttrSet = tuple[int, ...]


def mode_products(mats, t: np.ndarray) -> np.ndarray:
    """``(⊗ mats) · vec(t)`` as a tensor: ``mats[k]`` applied along axis ``k`` (C order)."""
    for ax, m in enumerate(mats):
        t = np.moveaxis(np.tensordot(m, t, axes=([1], [ax])), 0, ax)
    return t


def _fraction_str(f: Fraction) -> str:
    return f"{f.numerator}/{f.denominator}"


@dataclass(frozen=True, eq=False)
class HierarchicalPlan(PureUnits, EntryVarianceSummaries, PlanBase):
    """Pure ε-DP plan of a generalized marginal workload with per-attribute level strategies.

    Attributes
    ----------
    domain, workload
        What is released (marginals whose attributes carry prefix/range/custom query types).
    epsilon : float
        The total budget asked; :meth:`privacy_epsilon` is what is spent (≤ it, exact).
    per_attribute : tuple of tuple of AttributeLevels
        ``per_attribute[j][k]``: level strategy of the ``k``-th attribute of workload marginal ``j``.
    budgets : tuple of tuple of Fraction
        ``budgets[j][t]``: exact discrete Laplace parameter of level tuple ``t`` of marginal ``j``
        (``itertools.product`` order over the marginal's attributes' levels).
    strategy : str
        ``"cells"`` (each marginal's cells, estimated alone), ``"hierarchical"`` (trees),
        ``"haar"``, or ``"mixed"`` (each attribute its best kind).
    budgeting, objective, variance_model : str
        ``"optimal"`` / ``"uniform"``; ``"sum"`` / ``"max"``; ``"discrete"`` (exact discrete
        Laplace variances, what is released) / ``"continuous"`` (``2/ε²``).
    comparison : tuple of dict
        For ``strategy="auto"``: every candidate's objective.
    """

    domain: Domain
    workload: Workload
    epsilon: float
    per_attribute: tuple[tuple[AttributeLevels, ...], ...]
    budgets: tuple[tuple[Fraction, ...], ...]
    strategy: str = "hierarchical"
    budgeting: str = "optimal"
    objective: str = "sum"
    variance_model: str = "discrete"
    comparison: tuple[dict, ...] = field(default=(), compare=False)

    # -- structure ------------------------------------------------------------------------------
    def level_tuples(self, j: int) -> list[tuple[int, ...]]:
        """Level tuples of workload marginal ``j`` (the order of ``budgets[j]``)."""
        return list(itertools.product(*[range(len(t.shares)) for t in self.per_attribute[j]]))

    @property
    def groups(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """``(marginal j, level tuple)`` of every group with a positive budget."""
        return tuple((j, lev) for j in range(len(self.budgets))
                     for lev, b in zip(self.level_tuples(j), self.budgets[j]) if b > 0)

    def measured(self, j: int) -> bool:
        """Whether workload marginal ``j`` is measured (its budget is positive)."""
        return any(b > 0 for b in self.budgets[j])

    def _queries(self, j: int) -> list[np.ndarray]:
        s = self.workload.sets[j]
        return [np.asarray(self.workload.query_matrix(a, k), dtype=float)
                for a, k in zip(s, self.workload.types(j))]

    # -- privacy --------------------------------------------------------------------------------
    def privacy_epsilon(self) -> Fraction:
        """``Σ_{A,ℓ} ε_{A,ℓ}``: the max column L1 norm of the budget-scaled strategy (module doc)."""
        return sum((b for bs in self.budgets for b in bs), Fraction(0))

    # -- variances ------------------------------------------------------------------------------
    def _noise_var(self, j: int) -> np.ndarray:
        e = np.array([float(b) for b in self.budgets[j]])
        if self.variance_model == "continuous":
            with np.errstate(divide="ignore"):
                return np.where(e > 0, 2.0 / np.where(e > 0, e, 1.0) ** 2, np.inf)
        return discrete_laplace_variance(e)

    @cached_property
    def _weights(self) -> tuple[np.ndarray, ...]:
        """GLS weight ``ω_ℓ = Π_i η_{i,ℓ_i}²`` of each level tuple (product form)."""
        return tuple(np.array([prod(t.shares[k] ** 2 for t, k in zip(self.per_attribute[j], lev))
                               for lev in self.level_tuples(j)]) for j in range(len(self.budgets)))

    @cached_property
    def _coefficients(self) -> tuple[np.ndarray, ...]:
        """``ω_ℓ² v_ℓ`` as a tensor of shape ``(L_1+1, …)`` per marginal (0 where ``ω = 0``)."""
        out = []
        for j in range(len(self.budgets)):
            w, v = self._weights[j], self._noise_var(j)
            c = np.where(w > 0, w * w * np.where(np.isfinite(v), v, 0.0), 0.0)
            out.append(c.reshape([len(t.shares) for t in self.per_attribute[j]]))
        return tuple(out)

    @cached_property
    def _sandwich(self) -> dict[AttributeLevels, list[np.ndarray]]:
        """``M_ℓ = G⁻¹ H^{ℓᵀ} H^ℓ G⁻¹`` of every distinct attribute strategy."""
        out: dict[AttributeLevels, list[np.ndarray]] = {}
        for ts in self.per_attribute:
            for t in ts:
                if t not in out:
                    gi = t.gram_inverse
                    out[t] = [gi @ (h.T @ h) @ gi for h in t.levels()]
        return out

    def _require(self, j: int) -> None:
        if not self.measured(j):
            raise NotMeasuredError(
                f"marginal {self.domain.names_of(self.workload.sets[j])} has weight 0 and is not measured"
            )

    def _kron_variance(self, j: int, rows: list[np.ndarray]) -> np.ndarray:
        """Variances of the queries ``⊗_k rows[k]`` on marginal ``j``'s table (a tensor of shape
        ``(rows[k].shape[0], …)``): ``Σ_ℓ ω_ℓ² v_ℓ ⊗_k diag(R_k M_{kℓ_k} R_kᵀ)`` as mode products
        of the coefficient tensor."""
        self._require(j)
        diags = []
        for t, r in zip(self.per_attribute[j], rows):
            iv = interval_rows(r)
            diags.append(np.array([quadratic_diagonal(r, m, iv) for m in self._sandwich[t]]).T)
        return mode_products(diags, self._coefficients[j])

    @cached_property
    def _entry_variances(self) -> tuple[np.ndarray | None, ...]:
        return tuple(self._kron_variance(j, self._queries(j)) if self.measured(j) else None
                     for j in range(len(self.budgets)))

    def entry_variance(self, j: int) -> np.ndarray:
        """Exact variance of every query of workload marginal ``j`` (shape: its table of queries)."""
        self._require(j)
        return self._entry_variances[j].copy()

    def _rows_for(self, j: int, key: AttrSet) -> list[np.ndarray]:
        """Per-attribute maps from marginal ``j``'s table to the cells of ``key ⊆ A_j``."""
        return [np.eye(self.domain.sizes[a]) if a in key else np.ones((1, self.domain.sizes[a]))
                for a in self.workload.sets[j]]

    def _cells_variance(self, j: int, key: AttrSet) -> np.ndarray:
        v = self._kron_variance(j, self._rows_for(j, key))
        return v.reshape(tuple(self.domain.sizes[a] for a in key))

    @cached_property
    def _source_cache(self) -> dict:
        return {}

    def source(self, key: AttrSet) -> int:
        """The workload marginal the ``key``-marginal is estimated from: itself if it is a
        measured workload marginal, else the measured one containing it with the smallest total
        cell variance."""
        key = tuple(key)
        if key in self._source_cache:
            return self._source_cache[key]
        pos = self.workload._position.get(key)
        if pos is not None and self.measured(pos):
            j = pos
        else:
            cands = [j for j, s in enumerate(self.workload.sets) if set(key) <= set(s) and self.measured(j)]
            if not cands:
                raise NotMeasuredError(
                    f"{list(self.domain.names_of(key))} is not inside a measured marginal of the workload"
                )
            j = min(cands, key=lambda c: float(self._cells_variance(c, key).sum()))
        self._source_cache[key] = j
        return j

    def _variance(self, key: AttrSet) -> np.ndarray:
        return self._cells_variance(self.source(key), key)

    def _query_variance(self, key: AttrSet) -> np.ndarray:
        return self.entry_variance(self.workload.index(key))

    def lifted_variance(self, j: int, q: np.ndarray) -> float:
        """Variance of ``⟨q, x̂_{A_j}⟩`` for a query ``q`` shaped like marginal ``j``'s table."""
        self._require(j)
        q = np.asarray(q, dtype=float)
        total = 0.0
        c = self._coefficients[j]
        ms = [self._sandwich[t] for t in self.per_attribute[j]]
        for lev in self.level_tuples(j):
            if c[lev] == 0:
                continue
            total += float(c[lev]) * float(np.sum(q * mode_products([m[k] for m, k in zip(ms, lev)], q)))
        return total

    def covariance(self, attrs) -> np.ndarray:
        """Dense covariance of the estimate of the marginal on ``attrs`` (C order; ≤ 4,096 cells)."""
        key = self.domain.resolve(attrs)
        j = self.source(key)
        cells = self.domain.cells(key)
        if cells > 4096:
            raise PlanError(f"covariance of a {cells}-cell marginal is too large to build densely")
        rows = self._rows_for(j, key)
        c = self._coefficients[j]
        ms = [self._sandwich[t] for t in self.per_attribute[j]]
        out = np.zeros((cells, cells))
        for lev in self.level_tuples(j):
            if c[lev] == 0:
                continue
            k = np.ones((1, 1))
            for r, m, l in zip(rows, ms, lev):
                k = np.kron(k, r @ m[l] @ r.T)
            out += float(c[lev]) * k
        return out

    def table(self) -> pd.DataFrame:
        """One row per measured group: marginal, level strategies, level tuple, rows, budget
        ``ε_g``, share of ε, per-row noise variance.

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> import dpmatrix as dm
        >>> wk = dm.Workload(dm.Domain({"a": 8}), [("a",)], query_types={"a": "prefix"})
        >>> t = dm.plan(wk, epsilon=1, delta=0, strategy="haar").table()
        >>> round(float(t["share"].sum()), 6) <= 1.0
        True
        """
        rows = []
        for j, s in enumerate(self.workload.sets):
            var = self._noise_var(j)
            ts = self.per_attribute[j]
            for lev, b, v in zip(self.level_tuples(j), self.budgets[j], var):
                if b <= 0:
                    continue
                rows.append({
                    "attributes": ",".join(self.domain.names_of(s)),
                    "levels": ",".join(t.label for t in ts),
                    "level": ",".join(str(k) for k in lev),
                    "rows": int(prod(t.levels()[k].shape[0] for t, k in zip(ts, lev))),
                    "epsilon": float(b),
                    "share": float(b) / self.epsilon,
                    "noise_variance": float(v),
                })  # fmt: skip
        return pd.DataFrame(rows)

    def marginal_table(self) -> pd.DataFrame:
        """One row per workload marginal: queries, weight, ε spent, total and max variance."""
        rows = []
        for j in range(len(self.workload)):
            v = self._entry_variances[j]
            rows.append({"marginal": ",".join(self.workload.names(j)),
                         "levels": ",".join(t.label for t in self.per_attribute[j]),
                         "queries": int(self.workload.n_queries[j]),
                         "weight": float(self.workload.weights[j]),
                         "epsilon": float(sum(self.budgets[j], Fraction(0))),
                         "total_variance": math.inf if v is None else float(v.sum()),
                         "max_variance": math.inf if v is None else float(v.max())})
        return pd.DataFrame(rows)

    # -- measurement ------------------------------------------------------------------------------
    def measure(self, data, *, rng: np.random.Generator | None = None, progress: bool = False,
                noise: str | None = None, engine=None, store=None):
        """Noisy integer level counts of every group (exact discrete Laplace, OS CSPRNG unless a
        generator is given: then reproducible and NOT private), through :func:`dpmatrix.measure`.

        Returns
        -------
        Measurements
        """
        return _measure(self, data, rng=rng, progress=progress, noise=noise, engine=engine, store=store)

    def mechanisms(self, *, noise: str | None = None, rel_var_tol: float = 1e-4):
        """``(self, [LinearMechanism])``: group ``(j, ℓ)`` releases ``⊗ H^{ℓ}`` applied to marginal
        ``j``'s integer table plus discrete Laplace noise of parameter ``ε_{j,ℓ}`` (key ``(j, ℓ)``)."""
        if noise not in (None, "discrete_laplace"):
            raise PlanError(
                f"a pure epsilon-DP plan is measured with exact discrete Laplace noise; noise={noise!r} "
                "is a Gaussian (zCDP / (epsilon, delta)) option: plan with delta > 0 for it"
            )
        out = []
        for j, s in enumerate(self.workload.sets):
            levels = [t.levels() for t in self.per_attribute[j]]
            for lev, b in zip(self.level_tuples(j), self.budgets[j]):
                if b <= 0:
                    continue
                mats = tuple(levels[k][l] for k, l in enumerate(lev))
                out.append(LinearMechanism((j, lev), tuple(s), _IntegerLevels(mats),
                                           tuple(m.shape[0] for m in mats), "discrete_laplace", b))
        return self, out

    def estimator(self, noisy) -> "HierarchicalEstimator":
        """GLS estimates (within each marginal) from the noisy group outputs ``noisy[(j, ℓ)]``."""
        return HierarchicalEstimator(self, noisy)

    # -- serialization ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": HIERARCHICAL_FORMAT,
            "planner": "pure",
            "domain": self.domain.to_dict(),
            "workload": self.workload.to_dict(),
            "epsilon": self.epsilon,
            "strategy": self.strategy,
            "budgeting": self.budgeting,
            "objective": self.objective,
            "variance_model": self.variance_model,
            "per_attribute": [[t.to_dict() for t in ts] for ts in self.per_attribute],
            "budgets": [[_fraction_str(b) for b in bs] for bs in self.budgets],
            "comparison": [dict(c) for c in self.comparison],
            "residuals": [],
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "HierarchicalPlan":
        """The plan written by :meth:`to_dict` (structure and exact privacy re-checked).

        Examples
        --------
        >>> import dpmatrix as dm
        >>> wk = dm.Workload(dm.Domain({"a": 8}), [("a",)], query_types={"a": "range"})
        >>> p = dm.plan(wk, epsilon=1, delta=0, strategy="hierarchical")
        >>> HierarchicalPlan.from_dict(p.to_dict()).budgets == p.budgets
        True
        """
        if d.get("format") != HIERARCHICAL_FORMAT:
            raise PlanError(f"not a dpmatrix pure level-strategy plan (format {d.get('format')!r})")
        dom = Domain.from_dict(d["domain"])
        wk = Workload.from_dict(dom, d["workload"])
        per = tuple(tuple(AttributeLevels.from_dict(t) for t in ts) for ts in d["per_attribute"])
        budgets = tuple(tuple(Fraction(b) for b in bs) for bs in d["budgets"])
        if len(per) != len(wk) or len(budgets) != len(wk):
            raise PlanError("the stored plan's level strategies do not match its workload")
        for s, ts, bs in zip(wk.sets, per, budgets):
            if [t.n for t in ts] != [dom.sizes[a] for a in s] or len(bs) != prod(len(t.shares) for t in ts):
                raise PlanError(f"the stored level strategies of {dom.names_of(s)} do not match the domain")
            if any(b < 0 for b in bs):
                raise PlanError("the stored plan has a negative budget")
        plan = cls(domain=dom, workload=wk, epsilon=float(d["epsilon"]), per_attribute=per, budgets=budgets,
                   strategy=str(d["strategy"]), budgeting=str(d["budgeting"]),
                   objective=str(d.get("objective", "sum")), variance_model=str(d.get("variance_model", "discrete")),
                   comparison=tuple(d.get("comparison", ())))
        if plan.privacy_epsilon() > Fraction(plan.epsilon):
            raise PlanError("stored plan spends more than its epsilon: refusing it")
        return plan


class _IntegerLevels:
    """The linear map of one group: integer mode products (exact int64 arithmetic)."""

    def __init__(self, mats):
        self.mats = mats

    def __call__(self, table: np.ndarray) -> np.ndarray:
        return mode_products(self.mats, np.asarray(table))


class HierarchicalEstimator(Estimator):
    """The :class:`~dpmatrix.reconstruct.estimator.Estimator` of a :class:`HierarchicalPlan`."""

    def __init__(self, plan: HierarchicalPlan, noisy):
        self.plan = plan
        self.noisy = noisy
        self._cells: dict[int, np.ndarray] = {}

    def cells(self, j: int) -> np.ndarray:
        """GLS estimate of workload marginal ``j``'s table from its own groups."""
        if j not in self._cells:
            p = self.plan
            p._require(j)
            ts = p.per_attribute[j]
            levels = [t.levels() for t in ts]
            acc = np.zeros(tuple(t.n for t in ts))
            for w, lev, b in zip(p._weights[j], p.level_tuples(j), p.budgets[j]):
                if b <= 0 or w == 0:
                    continue
                if (j, lev) not in self.noisy:
                    raise NotMeasuredError(f"the measurements hold no output of group {(j, lev)}")
                hs = [levels[k][l].astype(float) for k, l in enumerate(lev)]
                y = np.asarray(self.noisy[(j, lev)], dtype=float).reshape([h.shape[0] for h in hs])
                acc += w * mode_products([h.T for h in hs], y)
            self._cells[j] = mode_products([t.gram_inverse for t in ts], acc)
        return self._cells[j]

    def estimate(self, key):
        j = self.plan.source(key)
        s = self.plan.workload.sets[j]
        drop = tuple(k for k, a in enumerate(s) if a not in key)
        t = self.cells(j)
        return t.sum(axis=drop) if drop else t.copy()

    def variance(self, key):
        return self.plan._variance(key)

    def covariance(self, key):
        return self.plan.covariance(key)

    def query_vector(self, key, q):
        j = self.plan.source(key)
        s = self.plan.workload.sets[j]
        shape = tuple(self.plan.domain.sizes[a] if a in key else 1 for a in s)
        qa = np.broadcast_to(np.asarray(q, dtype=float).reshape(shape), self.cells(j).shape)
        return float(np.sum(qa * self.cells(j))), self.plan.lifted_variance(j, qa)

    def entries(self):
        return iter([j for j in range(len(self.plan.workload)) if self.plan.measured(j)])

    def entry_of(self, key):
        return self.plan.workload.index(key)

    def entry(self, i):
        p = self.plan
        wk, dom = p.workload, p.domain
        key = wk.sets[i]
        qs = p._queries(i)
        est = mode_products(qs, self.cells(i))
        labels = []
        for a, t, q in zip(key, wk.types(i), qs):
            attr = dom.attributes[a]
            plain = t == "identity" and attr.labels is None and getattr(attr, "bins", None) is None
            labels.append(None if plain else query_labels(attr, t, q))
        names = dom.names_of(key)
        return EntryAnswer(names, names, labels, est, p.entry_variance(i))


# -------------------------------------------------------------------------------------------
# Planning
# -------------------------------------------------------------------------------------------


def _choose_levels(workload: Workload, kinds, objective: str, shares: str, branching: int | None):
    cache: dict = {}
    out = []
    for j, s in enumerate(workload.sets):
        row = []
        for a, k in zip(s, workload.types(j)):
            key = (a, k)
            if key not in cache:
                q = np.asarray(workload.query_matrix(a, k), dtype=float)
                allowed = ("cells",) if k == "identity" else tuple(kinds)
                try:
                    cache[key] = best_levels(q, kinds=allowed, objective=objective, shares=shares,
                                             branchings=None if branching is None else [int(branching)])
                except PlanError:
                    if "cells" in allowed:
                        raise
                    # e.g. a tree on 1 cell: that attribute keeps its cells
                    cache[key] = best_levels(q, kinds=("cells",), objective=objective)
            row.append(cache[key])
        out.append(tuple(row))
    return out


def _strategy_name(per) -> str:
    kinds = {t.kind for ts in per for t in ts} - {"cells"}
    if not kinds:
        return "cells"
    if kinds == {"tree"}:
        return "hierarchical"
    if kinds == {"haar"}:
        return "haar"
    return "mixed"


def plan_hierarchical(
    workload: Workload,
    epsilon: float,
    *,
    strategy: str = "auto",
    budgeting: str = "optimal",
    objective: str = "sum",
    variance_model: str = "discrete",
    branching: int | None = None,
) -> HierarchicalPlan:
    """Plan a generalized marginal workload with per-attribute level strategies (module doc).

    Parameters
    ----------
    workload : Workload
        Marginals whose attributes carry query types (identity, prefix, range, a matrix).
    epsilon : float
        Total pure-DP budget.
    strategy : {"auto", "hierarchical", "haar", "marginals"}, keyword-only
        The level kind allowed on attributes with prefix/range/custom queries: b-ary trees
        (branching chosen per attribute, or ``branching``), the Haar wavelet, plain cells, or
        (``"auto"``) whichever of the three gives that attribute the smallest factor.
    budgeting : {"optimal", "uniform"}, keyword-only
        Optimized level shares and closed-form marginal budgets, or one equal budget for every
        group (``ε / number of groups``; the kind then chosen at equal shares).
    objective : {"sum", "max"}, keyword-only
        What the shares and budgets minimize: weighted sum, or largest weighted query variance.
    variance_model : {"discrete", "continuous"}, keyword-only
        Exact discrete Laplace variances of the rounded budgets, or the paper's ``2/ε²``.
    branching : int, keyword-only
        Force this tree branching (with ``strategy="hierarchical"``).

    Returns
    -------
    HierarchicalPlan

    Examples
    --------
    >>> from dpmatrix.domain import Domain
    >>> wl = Workload(Domain.from_sizes([16]), [("a0",)], query_types={"a0": "prefix"})
    >>> p = plan_hierarchical(wl, 1.0, strategy="haar")
    >>> p.per_attribute[0][0].kind, float(p.privacy_epsilon()) <= 1.0
    ('haar', True)
    """
    eps = check_epsilon(epsilon)
    if strategy not in LEVEL_STRATEGIES:
        raise PlanError(f"unknown strategy {strategy!r} for prefix/range/custom queries; choose one of "
                        f"{sorted(LEVEL_STRATEGIES)}")
    if objective not in ("sum", "max"):
        raise PlanError(f"objective must be 'sum' or 'max', got {objective!r}")
    if variance_model not in ("discrete", "continuous"):
        raise PlanError(f"variance_model must be 'discrete' or 'continuous', got {variance_model!r}")
    if budgeting not in ("optimal", "uniform"):
        raise PlanError(f"budgeting must be 'optimal' or 'uniform', got {budgeting!r}")
    if branching is not None and strategy != "hierarchical":
        raise PlanError("branching= is an option of strategy='hierarchical'")
    per = _choose_levels(workload, LEVEL_STRATEGIES[strategy], objective, budgeting, branching)
    w = np.asarray(workload.weights, dtype=float)
    n_groups = np.array([prod(len(t.shares) for t in ts) for ts in per], dtype=float)
    if budgeting == "uniform":
        eps_a = eps * n_groups * (w > 0) / float(n_groups[w > 0].sum())
    elif objective == "sum":
        s = np.array([2 * x * prod(t.factor for t in ts) for x, ts in zip(w, per)])
        eps_a = cube_root_split(s, np.ones(len(s)), eps).eta
    else:
        r = np.sqrt([2 * x * prod(t.factor for t in ts) for x, ts in zip(w, per)])
        eps_a = eps * r / r.sum()
    eta, idx = [], []
    for j, ts in enumerate(per):
        for lev in itertools.product(*[range(len(t.shares)) for t in ts]):
            eta.append(eps_a[j] * prod(t.shares[k] for t, k in zip(ts, lev)))
            idx.append(j)
    flat = round_budgets(eta, [1] * len(eta), eps)
    budgets = tuple(tuple(b for b, i in zip(flat, idx) if i == j) for j in range(len(per)))
    return HierarchicalPlan(domain=workload.domain, workload=workload, epsilon=eps, per_attribute=tuple(per),
                            budgets=budgets, strategy=_strategy_name(per), budgeting=budgeting,
                            objective=objective, variance_model=variance_model)
