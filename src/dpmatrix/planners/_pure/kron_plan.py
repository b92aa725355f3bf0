"""Kronecker p-Identity plans for one product workload of any size, pure ε-DP, factor-wise.

The workload is one product ``W = ⊗_i W_i`` on the attributes ``attrs`` (one marginal: a
workload lists each attribute set once). The strategy is ``A = ⊗_i A_i`` with ``A_i = [I; Θ_i]D_i`` an
optimized p-Identity strategy of attribute ``i`` (McKenna et al., *Optimizing error of
high-dimensional statistical queries under differential privacy*, PVLDB 2018, §5 and §6.2
"Kronecker products"), ``A_i = I`` for an attribute with cell queries. Nothing of size
``Π n_i × Π n_i`` or ``#queries × Π n_i`` is formed: every operation is a sequence of mode
products with the factors (O(Π n_i · Σ_i m_i) for ``m_i`` rows of factor ``i``).

**Optimality within the product family.** Each ``A_i`` has unit L1 sensitivity (columns of L1
norm 1), so ``‖⊗A_i‖_1 = Π ‖A_i‖_1 = 1`` and in the continuous model the total variance is
``(2/ε²) tr((⊗W_iᵀW_i)(⊗A_iᵀA_i)⁻¹) = (2/ε²) Π_i tr(W_iᵀW_i (A_iᵀA_i)⁻¹) = (2/ε²) Π_i L_i(Θ_i)``:
the factors' losses are positive and independent, so minimizing each alone minimizes the product
(HDMM, §6.2). For the maximum objective, the variance of the product query ``⊗q_i`` is
``(2/ε²) Π_i v_i(q_i)`` and ``max_{q_1..q_k} Π_i v_i(q_i) = Π_i max_{q_i} v_i(q_i)`` (non-negative
independent factors): again each factor alone. (Checked numerically by perturbing one factor.)

**Integer rows and budgets.** Factor ``i`` is quantized as :func:`~.pidentity_plan.quantized_strategy`
at ``ε = 1`` with resolution ``2^⌊30/k⌋`` (``k`` the number of factors with aggregation rows), so
a product row's integers are at most ``2^30``: rows ``M_i`` (the cells, then integer aggregation
rows) with dyadic budgets ``b_{i,r}`` and ``P_i = max_j Σ_r |M_i[r, j]| b_{i,r} ≤ 1`` (checked
exactly). Row ``r = (r_1, …, r_k)`` of ``⊗M_i`` gets ``ε_r = ε_0 Π_i b_{i,r_i}`` with
``ε_0 = ⌊ε⌋`` (dyadic, 20 significant bits): a product of dyadic rationals is dyadic, so no
further rounding is needed and the budgets are exact products. Then for every cell
``j = (j_1, …, j_k)``: ``Σ_r |M_{rj}| ε_r = ε_0 Π_i Σ_{r_i} |M_i[r_i, j_i]| b_{i,r_i}`` and the
max column L1 norm of the budget-scaled strategy is exactly ``ε_0 Π_i P_i ≤ ε``
(:meth:`KronPIdentityPlan.privacy_epsilon`; checked against the dense definition in the tests).

**Recovery.** The continuous-model noise precision of row ``r`` is ``ε_r²/2 = (ε_0²/2) Π_i b_{i,r_i}²``:
a Kronecker product, so GLS is factor-wise, ``x̂ = ⊗_i R_i · y`` with
``R_i = (M_iᵀ B_i² M_i)⁻¹ M_iᵀ B_i²`` (``B_i = diag(b_i)``). The released noise is the exact
discrete Laplace, whose variance ``D_r = 1/(2 sinh²(ε_r/2))`` is not a product; the same
Kronecker estimator is kept (unbiased — ``R_i M_i = I`` — and the GLS of the continuous model;
``D_r`` and ``2/ε_r²`` differ by under 1 % at the budgets used, so the weights are near optimal),
and its variances are computed EXACTLY for the noise released: for ``q = ⊗q_i``,
``Var(q x̂) = Σ_r D_r Π_i (q_i R_i)²_{r_i}``; over a workload ``⊗W_i`` the total is
``Σ_r D_r Π_i c_{i,r_i}`` with ``c_i = diag(R_iᵀ W_iᵀW_i R_i)`` (closed-form Grams for prefixes
and ranges), and the per-query table is ``D`` mode-multiplied by each ``(W_i R_i)²``. With
``variance_model="continuous"`` ``D_r = 2/ε_r²``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._domain import Domain
from ..._measure.kron_records import KronFactorRows, KronLaplaceRecord
from ..._mechanisms.laplace import dyadic_floor, row_noise_variance
from ..._reconstruct.estimator import EntryAnswer, Estimator
from ..._reconstruct.measurements import axis_labels
from ..._solvers.pidentity import DenseQueries, IntervalQueries, SumGram
from ..._workload import Workload
from ...errors import NotMeasuredError, PlanError
from .._base import PlanBase
from .._formats import plan_format
from .entry_summaries import EntryVarianceSummaries
from .pidentity_plan import (
    RESOLUTION,
    _optimize_factor,
    _type_gram,
    default_random_starts,
    interval_bounds,
    quantized_strategy,
    workload_queries,
)
from .units import PureUnits, check_epsilon, check_pure_noise

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["KRON_FORMAT", "KronEstimator", "KronPIdentityPlan", "factor_l1", "kron_product_attributes",
           "plan_kron_pidentity", "use_kron_plan"]

KRON_FORMAT = "dpmatrix.pure_kron_plan/1"
#: largest marginal whose dense covariance :meth:`KronPIdentityPlan.covariance` builds
MAX_COVARIANCE_CELLS = 4096
#: query variances formed at a time when the largest one is searched
MAX_BLOCK_ENTRIES = 1 << 22


def kron_product_attributes(workload: Workload) -> tuple[int, ...] | None:
    """The attributes when every marginal of ``workload`` is on one and the same set, else None."""
    sets = {tuple(s) for s in workload.sets}
    if len(sets) != 1 or not next(iter(sets)):
        return None
    return next(iter(sets))


def use_kron_plan(workload: Workload) -> bool:
    """Whether ``strategy="pidentity"`` plans ``workload`` with :class:`KronPIdentityPlan`: every
    marginal on the same set of at least two attributes (one product, any size; one attribute
    is a :class:`~.pidentity_plan.PIdentityPlan`). Below 4,096 cells a dense GLS with the exact
    discrete weights was used before: its totals differ from this plan's by under 3·10⁻⁵
    relative (prefix 64 ⊗ prefix 64, range 32 ⊗ range 32, prefix 40 ⊗ range 20; the
    continuous-model totals agree to 10⁻⁶), so there is one path for every size."""
    attrs = kron_product_attributes(workload)
    return attrs is not None and len(attrs) >= 2


def _mode(mats, t: np.ndarray) -> np.ndarray:
    """``mats[i]`` applied along axis ``i`` of ``t`` (C order), one GEMM per axis (``None``:
    the axis is left as it is)."""
    for ax, m in enumerate(mats):
        if m is None:
            continue
        t = np.moveaxis(np.tensordot(m, t, axes=([1], [ax])), 0, ax)
    return t


def factor_l1(f: KronFactorRows) -> Fraction:
    """``max_j Σ_r |M[r, j]| b_r`` of one factor in exact arithmetic (the columns within 10⁻⁹ of
    the float maximum are summed with Fractions).

    Examples
    --------
    >>> f = KronFactorRows(2, np.array([[1, 1]]), (Fraction(1, 2),) * 3)
    >>> factor_l1(f)
    Fraction(1, 1)
    """
    b = f.budgets
    bf = np.array([float(x) for x in b])
    n = f.n
    col = (bf[:n].copy() if f.cells else np.zeros(n)) + bf[n if f.cells else 0:] @ np.abs(f.agg)
    top = np.flatnonzero(col >= col.max() * (1 - 1e-9))
    off = n if f.cells else 0
    live = [k for k in range(f.agg.shape[0]) if b[off + k] > 0]
    best = Fraction(0)
    for j in top.tolist():
        s = b[j] if f.cells else Fraction(0)
        s += sum((abs(int(f.agg[k, j])) * b[off + k] for k in live), Fraction(0))
        best = max(best, s)
    return best


def _recovery(f: KronFactorRows) -> np.ndarray:
    """``R = (MᵀB²M)⁻¹MᵀB²`` (``n × m``), the factor's weighted least squares."""
    b = np.array([float(x) for x in f.budgets])
    w = b * b
    n = f.n
    if f.cells and f.agg.shape[0] == 0:
        return np.eye(n)
    off = n if f.cells else 0
    a = f.agg.astype(float)
    prec = (a.T * w[off:]) @ a
    if f.cells:
        prec[np.diag_indices(n)] += w[:n]
    inv = np.linalg.inv(prec)
    parts = [inv * w[:n]] if f.cells else []
    parts.append((inv @ a.T) * w[off:])
    return np.hstack(parts)


def _apply_queries(queries, t: np.ndarray, axis: int) -> np.ndarray:
    """A :class:`~dpmatrix._solvers.pidentity.QuerySet` applied along ``axis`` of ``t``."""
    moved = np.moveaxis(t, axis, 0)
    shape = moved.shape
    out = queries.apply(np.ascontiguousarray(moved).reshape(shape[0], -1))
    return np.moveaxis(out.reshape((out.shape[0],) + shape[1:]), 0, axis)


class KronTable:
    """Mixin of the Kronecker plans (one product, a union of products): the measured table is
    the cells of ``attrs`` with one :class:`KronFactorRows` per attribute; per-query variances
    come from ``_entry_variances``."""

    workload: Workload
    attrs: tuple[int, ...]
    factors: tuple[KronFactorRows, ...]
    _entry_variances: tuple[np.ndarray, ...]

    @property
    def domain(self) -> Domain:
        return self.workload.domain

    @property
    def shape(self) -> tuple[int, ...]:
        """Cells of the measured table, per attribute."""
        return tuple(f.n for f in self.factors)

    def entry_variance(self, j: int) -> np.ndarray:
        """Exact variance of every query of workload marginal ``j`` (shape: its table of queries)."""
        return self._entry_variances[j].copy()

    def _query_variance(self, key) -> np.ndarray:
        return self.entry_variance(self.workload.index(key))

    def _require_key(self, key) -> None:
        if not set(key) <= set(self.attrs):
            raise NotMeasuredError(f"{list(self.domain.names_of(key))} is not inside the measured table "
                                   f"{list(self.domain.names_of(self.attrs))}")


def factor_row(name: str, f: KronFactorRows) -> dict[str, Any]:
    """A factor's report row: attribute, cells, rows, aggregation rows, exact column L1 norm."""
    return {"attribute": name, "cells": f.n, "rows": f.m, "aggregation_rows": int(f.agg.shape[0]),
            "column_l1": float(factor_l1(f))}


def stored_factor(fd: Mapping, size: int, what: str, *, cell_rows: bool = False) -> KronFactorRows:
    """The factor stored by a Kronecker plan's ``to_dict`` (``fd``), checked against the
    attribute's ``size`` (and, with ``cell_rows``, that it holds its cell rows); ``what`` names
    the factors in the error."""
    n = int(fd["cells"])
    agg = np.asarray(fd["aggregation"], dtype=np.int64).reshape(-1, n)
    agg.setflags(write=False)
    f = KronFactorRows(n, agg, tuple(Fraction(b) for b in fd["budgets"]))
    if cell_rows and not fd.get("cell_rows", True):
        raise PlanError("a stored Kronecker factor without its cell rows is not a p-Identity factor")
    if n != size or len(f.budgets) != f.m or any(b <= 0 for b in f.budgets):
        raise PlanError(f"the stored {what} do not match the domain, or a budget is not positive")
    return f


@plan_format(KRON_FORMAT)
@dataclass(frozen=True, eq=False)
class KronPIdentityPlan(KronTable, PureUnits, EntryVarianceSummaries, PlanBase):
    """A Kronecker product of per-attribute p-Identity strategies (module docstring).

    Attributes
    ----------
    workload : Workload
        One product of query types (every marginal on ``attrs``).
    epsilon : float
        Budget asked; :meth:`privacy_epsilon` is what is spent (exact, ≤ it).
    attrs : tuple of int
        The measured table's attributes (sorted).
    factors : tuple of KronFactorRows
        Per attribute: integer rows ``[I; agg]`` and their dyadic budgets at ``ε_0 = 1``.
    scale : Fraction
        ``ε_0``: row ``r`` has budget ``ε_0 Π_i b_{i, r_i}``.
    variance_model : {"discrete", "continuous"}
        Exact discrete Laplace variances (released) or ``2/ε_r²``.
    comparison : tuple of dict
        Each factor's optimizer starts and their losses.
    """

    workload: Workload
    epsilon: float
    attrs: tuple[int, ...]
    factors: tuple[KronFactorRows, ...] = field(repr=False)
    scale: Fraction
    budgeting: str = "optimal"
    objective: str = "sum"
    strategy: str = "pidentity"
    variance_model: str = "discrete"
    comparison: tuple = field(default=(), compare=False)

    @property
    def row_shape(self) -> tuple[int, ...]:
        """Rows of the strategy, per factor (the shape of the noisy answers)."""
        return tuple(f.m for f in self.factors)

    @property
    def groups(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """One mechanism: ``(0, row shape)``."""
        return ((0, self.row_shape),)

    # -- privacy ----------------------------------------------------------------------------------
    def privacy_epsilon(self) -> Fraction:
        """``ε_0 Π_i P_i``: the exact max column L1 norm of the budget-scaled ``⊗M_i`` (module doc)."""
        return self.scale * math.prod((factor_l1(f) for f in self.factors), start=Fraction(1))

    # -- noise ------------------------------------------------------------------------------------
    @cached_property
    def _budget_tensor(self) -> np.ndarray:
        """``ε_r`` as floats, shape :attr:`row_shape` (exact products to a relative 2⁻⁵²)."""
        t = np.array(float(self.scale))
        for f in self.factors:
            t = np.multiply.outer(t, np.array([float(b) for b in f.budgets]))
        return t

    @cached_property
    def noise_variance(self) -> np.ndarray:
        """Per-row noise variance ``D_r`` (discrete Laplace, or ``2/ε_r²``), shape :attr:`row_shape`."""
        return row_noise_variance(self._budget_tensor, self.variance_model)

    @cached_property
    def recovery(self) -> tuple[np.ndarray, ...]:
        """``R_i`` per factor (``n_i × m_i``): ``x̂ = ⊗R_i · y``."""
        return tuple(_recovery(f) for f in self.factors)

    # -- variances --------------------------------------------------------------------------------
    def _factor_queries(self, j: int, pos: int):
        a = self.attrs[pos]
        kind = self.workload.types(j)[pos]
        n = self.domain.sizes[a]
        iv = interval_bounds(kind, n)
        if iv is not None:
            return IntervalQueries(n, iv[0], iv[1])
        return DenseQueries(np.asarray(self.workload.query_matrix(a, kind), dtype=float))

    def _column_terms(self, j: int) -> list[np.ndarray]:
        """``c_i = diag(R_iᵀ G_i R_i)`` per factor for workload entry ``j`` (closed-form Grams)."""
        out = []
        for pos, a in enumerate(self.attrs):
            r = self.recovery[pos]
            g = _type_gram(self.workload, a, self.workload.types(j)[pos])
            out.append(np.sum(r * g.matmul(r), axis=0))
        return out

    def _entry_total(self, j: int) -> float:
        return float(_mode([c[None, :] for c in self._column_terms(j)], self.noise_variance).reshape(()))

    def total_variance(self) -> float:
        """``Σ_j w_j Σ_r D_r Π_i c_{j,i,r_i}`` (module doc), no per-query table."""
        return float(sum(self.workload.weights[j] * self._entry_total(j) for j in self._positive()))

    def rmse(self) -> float:
        js = self._positive()
        return math.sqrt(sum(self._entry_total(j) for j in js) / sum(int(self.workload.n_queries[j]) for j in js))

    def _squared_answers(self, j: int) -> list[np.ndarray]:
        return [_apply_queries(self._factor_queries(j, pos), r, 0) ** 2 for pos, r in enumerate(self.recovery)]

    @cached_property
    def _entry_variances(self) -> tuple[np.ndarray, ...]:
        return tuple(_mode(self._squared_answers(j), self.noise_variance) for j in range(len(self.workload)))

    def _entry_max(self, j: int) -> float:
        """``max_q Var(q)`` over workload marginal ``j``, in blocks of the first attribute's
        queries (at most :data:`MAX_BLOCK_ENTRIES` variances at a time, never the whole table)."""
        sq = self._squared_answers(j)
        rest = math.prod(a.shape[0] for a in sq[1:])
        step = max(1, MAX_BLOCK_ENTRIES // max(rest, 1))
        tail = _mode([None] + sq[1:], self.noise_variance)  # (m_1, q_2, …)
        return max(float(_mode([sq[0][lo:lo + step]], tail).max()) for lo in range(0, sq[0].shape[0], step))

    def max_variance(self) -> float:
        """Largest variance of a workload query. Continuous model: ``(2/ε_0²) Π_i max_q Σ_r
        (q R_i)²_r / b_{i,r}²`` (product of the factors' maxima, no table); discrete: the exact
        per-query variances, block by block."""
        if self.variance_model != "continuous":
            return max(self._entry_max(j) for j in self._positive())
        best = 0.0
        for j in self._positive():
            v = 2.0 / float(self.scale) ** 2
            for sq, f in zip(self._squared_answers(j), self.factors):
                b = np.array([float(x) for x in f.budgets])
                v *= float((sq @ (1.0 / b**2)).max())
            best = max(best, v)
        return best

    def _variance(self, key) -> np.ndarray:
        """Cell variances of the marginal on ``key`` (a sum over the other attributes)."""
        self._require_key(key)
        mats = [r**2 if a in key else r.sum(axis=0, keepdims=True) ** 2 for a, r in zip(self.attrs, self.recovery)]
        return _mode(mats, self.noise_variance).reshape(tuple(self.domain.sizes[a] for a in key))

    def _lifted(self, key, q: np.ndarray) -> np.ndarray:
        """``u = (q lifted to the measured table) · ⊗R_i``, a tensor of :attr:`row_shape`."""
        self._require_key(key)
        t = np.asarray(q, dtype=float).reshape(tuple(self.domain.sizes[a] for a in key))
        mats = []
        for pos, (a, r) in enumerate(zip(self.attrs, self.recovery)):
            if a in key:
                mats.append(r.T)
            else:
                t = np.expand_dims(t, pos)
                mats.append(r.sum(axis=0)[:, None])
        return _mode(mats, t)

    def lifted_variance(self, key, q: np.ndarray) -> float:
        """Variance of ``⟨q, x̂_key⟩`` for a query ``q`` shaped like the ``key``-table."""
        return float(np.sum(self.noise_variance * self._lifted(key, q) ** 2))

    def covariance(self, attrs) -> np.ndarray:
        """Dense covariance of the estimate of the marginal on ``attrs`` (C order; small only)."""
        key = self.domain.resolve(attrs)
        self._require_key(key)
        cells = self.domain.cells(key)
        rows = math.prod(self.row_shape)
        if cells > MAX_COVARIANCE_CELLS or cells * rows > 1 << 25:
            raise PlanError(f"the covariance of a {cells}-cell marginal over {rows} strategy rows is too "
                            "large to build densely; ask for variances or single queries")
        mats = [r if a in key else r.sum(axis=0, keepdims=True) for a, r in zip(self.attrs, self.recovery)]
        f = mats[0]
        for m in mats[1:]:
            f = np.kron(f, m)
        return (f * self.noise_variance.reshape(-1)) @ f.T

    # -- reports ----------------------------------------------------------------------------------
    def table(self) -> pd.DataFrame:
        """One row per factor: attribute, cells, aggregation rows, the factor's exact column L1
        norm and its budgets' range (row ``r`` has ``ε_0 Π_i b_{i, r_i}``)."""
        import pandas as pd

        rows = []
        for a, f in zip(self.attrs, self.factors):
            b = [float(x) for x in f.budgets]
            rows.append({**factor_row(self.domain.names_of((a,))[0], f),
                         "min_budget": min(b), "max_budget": max(b), "epsilon_0": float(self.scale)})
        return pd.DataFrame(rows)

    def marginal_table(self) -> pd.DataFrame:
        """One row per workload marginal: queries, weight, total variance."""
        import pandas as pd

        return pd.DataFrame([{"marginal": ",".join(self.workload.names(j)),
                              "queries": int(self.workload.n_queries[j]),
                              "weight": float(self.workload.weights[j]),
                              "total_variance": self._entry_total(j)} for j in range(len(self.workload))])

    # -- measurement ------------------------------------------------------------------------------
    def mechanisms(self, *, noise: str | None = None, rel_var_tol: float = 1e-4):
        """``(self, [KronLaplaceRecord])``: one record, ``⊗M_i`` on the table of ``attrs`` plus
        exact discrete Laplace noise of parameter ``ε_r`` on each row (key 0)."""
        check_pure_noise(noise)
        return self, [KronLaplaceRecord(0, tuple(self.attrs), tuple(self.factors), self.scale)]

    def estimator(self, noisy) -> KronEstimator:
        return KronEstimator(self, noisy)

    # -- serialization ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        names = self.domain.names_of(self.attrs)
        return {"format": KRON_FORMAT, "planner": "pure", "domain": self.domain.to_dict(),
                "workload": self.workload.to_dict(), "epsilon": self.epsilon,
                "attributes": list(names), "scale": fraction_str(self.scale),
                "factors": [{"attribute": a, "cells": f.n, "cell_rows": f.cells, "aggregation": f.agg.tolist(),
                             "budgets": [fraction_str(b) for b in f.budgets]} for a, f in zip(names, self.factors)],
                "strategy": self.strategy, "budgeting": self.budgeting, "objective": self.objective,
                "variance_model": self.variance_model, "comparison": [dict(c) for c in self.comparison],
                "residuals": []}

    @classmethod
    def from_dict(cls, d: Mapping) -> KronPIdentityPlan:
        """The plan written by :meth:`to_dict` (shapes and exact privacy re-checked)."""
        if d.get("format") != KRON_FORMAT:
            raise PlanError(f"not a dpmatrix pure Kronecker plan (format {d.get('format')!r})")
        dom = Domain.from_dict(d["domain"])
        wk = Workload.from_dict(dom, d["workload"])
        attrs = dom.resolve(d["attributes"])
        if len(d["factors"]) != len(attrs):
            raise PlanError("the stored Kronecker plan has one factor per attribute")
        factors = []
        for a, fd in zip(attrs, d["factors"]):
            factors.append(stored_factor(fd, dom.sizes[a], "Kronecker factors", cell_rows=True))
        plan = cls(wk, float(d["epsilon"]), attrs, tuple(factors), Fraction(d["scale"]),
                   str(d.get("budgeting", "optimal")), str(d.get("objective", "sum")),
                   str(d.get("strategy", "pidentity")), str(d.get("variance_model", "discrete")),
                   tuple(d.get("comparison", ())))
        if plan.privacy_epsilon() > Fraction(plan.epsilon):
            raise PlanError("stored plan spends more than its epsilon: refusing it")
        return plan


def fraction_str(f: Fraction) -> str:
    """``"p/q"``: an exact budget as stored in a plan file."""
    return f"{f.numerator}/{f.denominator}"


class KronEstimatorBase(Estimator):
    """What the Kronecker plans' estimators share: variances and covariances come from the plan,
    and every workload marginal has an answer."""

    plan: Any

    def variance(self, key):
        return self.plan._variance(key)

    def covariance(self, key):
        return self.plan.covariance(key)

    def entries(self):
        return iter(range(len(self.plan.workload)))

    def entry_of(self, key):
        return self.plan.workload.index(key)


class KronEstimator(KronEstimatorBase):
    """The Kronecker GLS ``x̂ = ⊗R_i · y`` of a :class:`KronPIdentityPlan` (``noisy[0]``: the
    noisy rows, shape :attr:`~KronPIdentityPlan.row_shape`); every answer is a linear function of
    the one ``x̂``, so answers are consistent."""

    def __init__(self, plan: KronPIdentityPlan, noisy):
        if 0 not in noisy:
            raise NotMeasuredError("the measurements hold no output of the Kronecker strategy")
        self.plan = plan
        y = np.asarray(noisy[0], dtype=float).reshape(plan.row_shape)
        self.cells = _mode(plan.recovery, y)

    def estimate(self, key):
        p = self.plan
        p._require_key(key)
        drop = tuple(pos for pos, a in enumerate(p.attrs) if a not in key)
        return self.cells.sum(axis=drop) if drop else self.cells.copy()

    def query_vector(self, key, q):
        return float(np.sum(np.asarray(q, dtype=float) * self.estimate(key))), self.plan.lifted_variance(key, q)

    def grouped_queries(self, key, by, shape, w):
        """Estimates and exact variances of ``e_g ⊗ w`` for every cell ``g`` of the ``by`` axes of
        the ``key`` table, all at once: the query separates into the cells of ``by`` and ``w`` on
        the other axes, so ``Var_g = Σ_r D_r Π_{i∈by} R_i[g_i, r_i]² · ũ_r²`` with ``ũ`` the lift of
        ``w`` (ones outside ``key``) through the other factors — two rounds of mode products."""
        p = self.plan
        key = tuple(key)
        p._require_key(key)
        rest = [j for j in range(len(key)) if j not in by]
        wt = np.asarray(w, dtype=float).reshape(tuple(shape[j] for j in rest)) if rest else np.ones(())
        table = self.estimate(key)
        est = np.tensordot(table, wt, axes=(rest, list(range(len(rest))))) if rest else table
        by_attrs = [key[j] for j in by]
        t, mats = wt, []
        for pos, (a, r) in enumerate(zip(p.attrs, p.recovery)):
            if a in by_attrs or a not in key:
                t = np.expand_dims(t, pos)
            mats.append(None if a in by_attrs else r.T if a in key else r.sum(axis=0)[:, None])
        other = tuple(pos for pos, a in enumerate(p.attrs) if a not in by_attrs)
        c = (p.noise_variance * _mode(mats, t) ** 2).sum(axis=other)
        var = _mode([p.recovery[p.attrs.index(a)] ** 2 for a in by_attrs], c)
        return np.asarray(est, dtype=float), var

    def entry(self, i):
        p = self.plan
        wk, dom = p.workload, p.domain
        key = wk.sets[i]
        est = self.cells
        for pos in range(len(p.attrs)):
            est = _apply_queries(p._factor_queries(i, pos), est, pos)
        types = wk.types(i)
        labels = axis_labels(dom, key, types, [wk.query_matrix(a, t) for a, t in zip(key, types)])
        names = dom.names_of(key)
        return EntryAnswer(names, names, labels, est, p.entry_variance(i))


def _factor(workload: Workload, pos: int, attr: int, objective: str, random_starts, seed: int, resolution: int):
    """One attribute's optimized p-Identity rows at ``ε = 1`` (``I`` for cell queries only)."""
    n = workload.domain.sizes[attr]
    live = [j for j in range(len(workload)) if workload.weights[j] > 0]
    kinds = [workload.types(j)[pos] for j in live]
    if all(k == "identity" for k in kinds):
        agg = np.zeros((0, n), dtype=np.int64)
        agg.setflags(write=False)
        return KronFactorRows(n, agg, (Fraction(1),) * n), []
    terms = [_type_gram(workload, attr, k) for k in kinds]
    weights = [float(workload.weights[j]) for j in live]
    gram = terms[0] if len(terms) == 1 else SumGram(tuple(terms), tuple(weights))
    starts = default_random_starts(n) if random_starts is None else random_starts
    queries = workload_queries(workload, attr, pos) if objective == "max" else None
    res = _optimize_factor(gram, queries, objective, starts, seed)
    m, budgets = quantized_strategy(res.theta, 1.0, resolution=resolution)
    agg = np.ascontiguousarray(m[n:])
    agg.setflags(write=False)
    name = workload.domain.names[attr]
    return KronFactorRows(n, agg, budgets), [{"attribute": name, "start": label, "factor": v} for label, v in res.starts]


def plan_kron_pidentity(
    workload: Workload,
    epsilon: float,
    *,
    variance_model: str = "discrete",
    random_starts: int | None = None,
    seed: int = 0,
    objective: str = "sum",
) -> KronPIdentityPlan:
    """Plan one product workload with a Kronecker product of optimized p-Identity factors.

    Parameters
    ----------
    workload : Workload
        One marginal (a product of query types: prefix, range, cells or custom matrices).
    epsilon : float
    variance_model : {"discrete", "continuous"}, keyword-only
    random_starts : int, keyword-only
        Random starts per attribute (default :func:`~.pidentity_plan.default_random_starts`).
    seed : int, keyword-only
        Seed of the optimizer's explicit generator (planning is deterministic).
    objective : {"sum", "max"}, keyword-only
        Each factor minimizes its total or its maximum query variance (both factorise).

    Returns
    -------
    KronPIdentityPlan

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 8, "b": 6, "c": 3}), [("a", "b", "c")],
    ...                  query_types={"a": "prefix", "b": "range"})
    >>> p = plan_kron_pidentity(wk, 1.0, random_starts=1)
    >>> p.privacy_epsilon() <= 1, p.row_shape[2]
    (True, 3)
    """
    eps = check_epsilon(epsilon)
    if variance_model not in ("discrete", "continuous"):
        raise PlanError(f"variance_model must be 'discrete' or 'continuous', got {variance_model!r}")
    if objective not in ("sum", "max"):
        raise PlanError(f"objective must be 'sum' or 'max', got {objective!r}")
    attrs = kron_product_attributes(workload)
    if attrs is None:
        raise PlanError("a Kronecker p-Identity plan needs every marginal on the same attributes (one product)")
    if not any(w > 0 for w in workload.weights):
        raise PlanError("the workload has no positively weighted marginal")
    live = [j for j in range(len(workload)) if workload.weights[j] > 0]
    k = sum(1 for pos in range(len(attrs)) if any(workload.types(j)[pos] != "identity" for j in live))
    resolution = RESOLUTION if k <= 1 else 2 ** (30 // k)
    factors, comparison = [], []
    for pos, a in enumerate(attrs):
        f, rows = _factor(workload, pos, a, objective, random_starts, seed, resolution)
        factors.append(f)
        comparison += rows
    plan = KronPIdentityPlan(workload, eps, tuple(attrs), tuple(factors), dyadic_floor(eps), "optimal", objective,
                             "pidentity", variance_model, tuple(comparison))
    if plan.privacy_epsilon() > Fraction(eps):  # cannot happen: every rounding is downward
        raise PlanError("the quantized Kronecker p-Identity strategy exceeds epsilon")  # pragma: no cover
    return plan
