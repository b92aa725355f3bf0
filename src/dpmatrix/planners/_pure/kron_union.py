"""A union of Kronecker p-Identity products released factor-wise, pure ε-DP, any size.

The workload is a union of marginals ``W = Σ_W w_W ⊗_{i∈A_W} Q_{W,i}`` on the union ``U`` of their
attributes, with ONE factor per attribute: attribute ``i`` carries integer rows ``M_i`` (the cells,
then integer aggregation rows; :func:`~.pidentity_plan.quantized_strategy`) with dyadic budgets
``b_i`` at ``ε = 1`` and column L1 norms at most 1, shared by every product that contains it.
Product ``j`` measures ``S_j = ⊗_{i∈A_j} M_i`` on its marginal, row ``r`` with the budget
``ε_{j,r} = s_j Π_i b_{i,r_i}`` (``s_j`` the product's dyadic scale; a product of dyadic rationals
is dyadic, no further rounding), with exact discrete Laplace noise: one
:class:`~dpmatrix._measure.kron_records.KronLaplaceRecord` per product.

**Privacy.** Cell ``c`` of ``U`` is read by product ``j`` through its marginal cell, with column
L1 norm ``s_j Π_{i∈A_j} κ_i(c_i)`` (``κ_i`` the column L1 norms of the budget-scaled factor), so
the stacked strategy spends exactly ``max_c Σ_j s_j Π_{i∈A_j} κ_i(c_i) ≤ Σ_j s_j ≤ ε``
(:meth:`KronUnionPlan.privacy_epsilon`, Fractions on the candidate maxima).

**Recovery** (McKenna et al., PVLDB 2018, §6; the diagonal form of
:mod:`dpmatrix._solvers.union_split`). The GLS with the continuous-model weights
``ω_{j,r} = ε_{j,r}²/2`` has precision ``P = Σ_j s_j² K_j``, ``K_j = ½ ⊗_{i∈A_j} B_i ⊗_{i∉A_j} 11ᵀ``
with ``B_i = M_iᵀ diag(b_i²) M_i``. One congruence ``T_i`` per attribute (``T_iᵀB_iT_i = I``,
``T_iᵀ1 = t_i`` with a single non-zero) makes it diagonal: ``TᵀPT = diag(p)``,
``p = Σ_j s_j² d_j``, ``d_j = ½ ⊗_i (1 or t_i²)``. With ``z = Σ_j lift_jᵀ S_jᵀ diag(ω_j) y_j``,

    x̂ = T diag(p)⁺ Tᵀ z

(``T diag(p)⁺ Tᵀ`` is a generalized inverse of ``P``): all by mode products, holding the ``Π n_i``
cells of ``U`` and never an ``N × N`` matrix. A query ``q`` on ``U`` is estimable iff ``Tᵀq`` vanishes
where ``p = 0``; its estimate ``q x̂`` is then unbiased. In the continuous model (noise ``2/ε²``)
``Var(q) = Σ_c (Tᵀq)_c² / p_c``. The released noise is the exact discrete Laplace, variance
``D_{j,r} = 1/(2 sinh²(ε_{j,r}/2))``; the estimator keeps the continuous weights (they differ from
``1/D`` by under 1 % at the budgets used) and its variance is computed exactly for the noise
released:

    Var(q) = Σ_j Σ_r D_{j,r} (ω_j ⊙ S_j lift_j T diag(p)⁺ Tᵀ q)_r²,

For one query this is a round of mode products (``O(N Σ_i n_i)``). For a whole table of queries
``⊗_i Q_i`` it is never formed query by query: ``p_c`` depends only on which coordinates of ``c``
are 0 (``t_i`` has its one non-zero at 0), so ``diag(p)⁺`` is a sum of ``2^d`` Kronecker products
and every product's coefficients are a sum of ``2^{|A_j|}`` Kronecker products; the variance
table is then ``O(4^{|A_j|})`` mode products of ``D_j`` per product
(:meth:`KronUnionPlan._discrete_table`) — the cost of the continuous-model table times a
constant, checked against the per-query computation and a dense oracle in the tests.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property, reduce
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._domain import Domain
from ..._measure.kron_records import KronFactorRows, KronLaplaceRecord
from ..._mechanisms.laplace import row_noise_variance
from ..._reconstruct.estimator import EntryAnswer
from ..._reconstruct.measurements import axis_labels
from ..._solvers.union_split import KronUnionModel, kron_union_model
from ..._workload import Workload
from ...errors import NotMeasuredError, PlanError
from .._base import PlanBase
from .._formats import plan_format
from .entry_summaries import EntryVarianceSummaries
from .kron_plan import KronEstimatorBase, KronTable, _mode, factor_row, fraction_str, stored_factor
from .units import PureUnits, check_pure_noise

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["KRON_UNION_FORMAT", "KronUnionEstimator", "KronUnionPlan"]

KRON_UNION_FORMAT = "dpmatrix.pure_kron_union_plan/1"
#: largest marginal whose dense covariance is built
MAX_COVARIANCE_CELLS = 4096
#: share of a query's transformed mass allowed where the precision is 0 (round-off)
_SPAN_TOL = 1e-9


def _dense(f: KronFactorRows) -> np.ndarray:
    """The factor's rows ``[I; agg]`` as floats (``m × n``)."""
    parts = [np.eye(f.n)] if f.cells else []
    parts.append(f.agg.astype(float))
    return np.vstack(parts)


def _col_norms(f: KronFactorRows) -> list[Fraction]:
    """``κ(j) = Σ_r |M[r, j]| b_r`` of every column, exactly."""
    off = f.n if f.cells else 0
    out = [f.budgets[j] if f.cells else Fraction(0) for j in range(f.n)]
    for k in range(f.agg.shape[0]):
        b = f.budgets[off + k]
        for j in np.flatnonzero(f.agg[k]).tolist():
            out[j] += abs(int(f.agg[k, j])) * b
    return out


def _contract_small_first(t: np.ndarray, mats: list[np.ndarray]) -> np.ndarray:
    """``V[k_0, …] = Σ_c t[c] Π_i F_i[k_i, c_i]``, the axes that shrink most contracted first
    (a summed axis, one row, before the query axes: the intermediate tables stay small)."""
    d = len(mats)
    order = sorted(range(d), key=lambda ax: mats[ax].shape[0] / mats[ax].shape[1])
    out, axes = t, list(range(d))  # axes: which original axis each current leading axis is
    for ax in order:
        pos = axes.index(ax)
        out = np.moveaxis(np.tensordot(out, mats[ax], axes=([pos], [1])), -1, pos)
    return out


@plan_format(KRON_UNION_FORMAT)
@dataclass(frozen=True, eq=False)
class KronUnionPlan(KronTable, PureUnits, EntryVarianceSummaries, PlanBase):
    """A union of Kronecker products of shared per-attribute p-Identity factors (module doc).

    Attributes
    ----------
    workload : Workload
    epsilon : float
        Budget asked; :meth:`privacy_epsilon` is what is spent (exact, ≤ it).
    attrs : tuple of int
        The union ``U`` of the workload's attributes (sorted).
    factors : tuple of KronFactorRows
        One per attribute of ``U``: integer rows and budgets at scale 1.
    products : tuple of tuple of int
        The attributes of each product (sorted; one product per workload marginal of positive
        weight).
    scales : tuple of Fraction
        ``s_j`` per product (0: not measured).
    variance_model : {"discrete", "continuous"}
    comparison : tuple of dict
        Per marginal: objective and budget; the last row summarizes the split search.
    """

    workload: Workload
    epsilon: float
    attrs: tuple[int, ...]
    factors: tuple[KronFactorRows, ...] = field(repr=False)
    products: tuple[tuple[int, ...], ...]
    scales: tuple[Fraction, ...]
    budgeting: str = "optimal"
    objective: str = "sum"
    strategy: str = "pidentity-union"
    variance_model: str = "discrete"
    comparison: tuple = field(default=(), compare=False)

    def _axes(self, j: int) -> tuple[int, ...]:
        return tuple(self.attrs.index(a) for a in self.products[j])

    @property
    def _live(self) -> list[int]:
        return [j for j, s in enumerate(self.scales) if s > 0]

    def row_shape(self, j: int) -> tuple[int, ...]:
        """Rows of product ``j`` per factor (the shape of its noisy answers)."""
        return tuple(self.factors[ax].m for ax in self._axes(j))

    @property
    def groups(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """One mechanism per measured product: ``(j, row shape)``."""
        return tuple((j, self.row_shape(j)) for j in self._live)

    # -- privacy ----------------------------------------------------------------------------------
    def privacy_epsilon(self) -> Fraction:
        """``max_c Σ_j s_j Π_{i∈A_j} κ_i(c_i)`` exactly (module doc): the float maximum's
        candidate cells are re-summed in Fractions, once per distinct tuple of column norms."""
        kappa = [_col_norms(f) for f in self.factors]
        codes, values = [], []
        for col in kappa:
            distinct = sorted(set(col))
            where = {v: i for i, v in enumerate(distinct)}
            codes.append(np.array([where[v] for v in col], dtype=np.int64))
            values.append(distinct)
        total = np.zeros(self.shape)
        for j in self._live:
            axes = self._axes(j)
            vecs = [np.array([float(v) for v in kappa[ax]]) if ax in axes else np.ones(n)
                    for ax, n in enumerate(self.shape)]
            total = total + float(self.scales[j]) * reduce(np.multiply.outer, vecs)
        top = np.flatnonzero(total.ravel() >= total.max() * (1 - 1e-9))
        idx = np.unravel_index(top, self.shape)
        combos = np.unique(np.stack([c[i] for c, i in zip(codes, idx)], axis=1), axis=0)
        best = Fraction(0)
        for combo in combos.tolist():
            s = Fraction(0)
            for j in self._live:
                s += self.scales[j] * math.prod((values[ax][combo[ax]] for ax in self._axes(j)), start=Fraction(1))
            best = max(best, s)
        return best

    # -- the diagonal model -----------------------------------------------------------------------
    @cached_property
    def _dense_factors(self) -> tuple[np.ndarray, ...]:
        return tuple(_dense(f) for f in self.factors)

    @cached_property
    def _factor_budgets(self) -> tuple[np.ndarray, ...]:
        return tuple(np.array([float(b) for b in f.budgets]) for f in self.factors)

    @cached_property
    def _model(self) -> KronUnionModel:
        grams = self._grams()
        prods = [{ax: grams[ax] for ax in self._axes(j)} for j in range(len(self.products))]
        model = kron_union_model(self.shape, prods, [])
        if model is None:  # pragma: no cover - one Gram per axis by construction
            raise PlanError("the union's factors have no common congruence")
        return model

    @cached_property
    def _eta(self) -> np.ndarray:
        return np.array([float(s) for s in self.scales])

    @cached_property
    def _inverse(self) -> np.ndarray:
        """``diag(p)⁺`` as a tensor of :attr:`shape`."""
        p = self._model.cell_precision(self._eta)
        return np.where(p > 0, 1.0 / np.where(p > 0, p, 1.0), 0.0).reshape(self.shape)

    @property
    def _transforms(self) -> tuple[np.ndarray, ...]:
        return tuple(t for t, _ in self._model.transforms)

    def _transformed(self, ax: int, q: np.ndarray | None) -> np.ndarray:
        """``q T_i`` (rows of queries on axis ``ax``), or ``t_iᵀ`` when the axis is summed."""
        t, tv = self._model.transforms[ax]
        return tv[None, :] if q is None else np.asarray(q, dtype=float) @ t

    def _weights(self, j: int) -> np.ndarray:
        """``ω_{j,r} = ε_{j,r}²/2`` over the rows of product ``j``."""
        vecs = [self._factor_budgets[ax] ** 2 for ax in self._axes(j)]
        return float(self.scales[j]) ** 2 / 2 * reduce(np.multiply.outer, vecs, np.ones(()))

    def _noise(self, j: int) -> np.ndarray:
        vecs = [self._factor_budgets[ax] for ax in self._axes(j)]
        return row_noise_variance(float(self.scales[j]) * reduce(np.multiply.outer, vecs, np.ones(())),
                                  self.variance_model)

    @cached_property
    def _per_product(self) -> tuple[tuple[int, tuple[int, ...], np.ndarray, np.ndarray], ...]:
        return tuple((j, self._axes(j), self._weights(j), self._noise(j)) for j in self._live)

    # -- variances --------------------------------------------------------------------------------
    def _coefficients(self, v: np.ndarray) -> list[np.ndarray]:
        """Per measured product, the x̂-coefficients of a batch of queries given as
        ``v = diag(p)⁺ Tᵀq`` (leading batch axis, then the axes of ``U``)."""
        d = len(self.shape)
        u = _mode([None, *self._transforms], v)
        out = []
        for _, axes, w, _ in self._per_product:
            drop = tuple(1 + ax for ax in range(d) if ax not in axes)
            s = u.sum(axis=drop) if drop else u
            c = _mode([None] + [self._dense_factors[ax] for ax in axes], s) * w
            out.append(c.reshape(c.shape[0], -1))
        return out

    def _batch_variance(self, tq: np.ndarray) -> np.ndarray:
        """Variances of a batch of queries given by ``Tᵀq`` (batch axis first)."""
        if self.variance_model == "continuous":
            return (tq.reshape(tq.shape[0], -1) ** 2 @ self._inverse.ravel()).reshape(-1)
        cs = self._coefficients(tq * self._inverse)
        return sum(c**2 @ dn.ravel() for c, (_, _, _, dn) in zip(cs, self._per_product))

    def _check_span(self, xs: list[np.ndarray], what: str) -> None:
        """Refuse a table of queries (``Tᵀq = ⊗ xs``) with mass where the precision is 0."""
        dead = (self._inverse == 0).astype(float)
        if not dead.any():
            return
        sq = [x**2 for x in xs]
        out = _contract_small_first(dead, sq)
        tot = _contract_small_first(np.ones(self.shape), sq)
        if np.any(out > _SPAN_TOL * np.maximum(tot, 1e-300)):
            raise NotMeasuredError(f"the strategy cannot answer every query of {what} (outside its row space: "
                                   "a product it needs was given no budget)")

    def _table_variance(self, mats: list[np.ndarray | None]) -> np.ndarray:
        """Exact variance of every query of the table ``⊗_i Q_i`` on ``U`` (``None``: the axis is
        summed), shaped like the table (module doc)."""
        xs = [self._transformed(ax, q) for ax, q in enumerate(mats)]
        if self.variance_model == "continuous":
            return _contract_small_first(self._inverse, [x**2 for x in xs])
        return self._discrete_table(xs)

    def _pattern_inverse(self, z) -> float:
        """``1/p`` on the cells whose zero pattern is ``z`` (``z_i = 0``: ``c_i = 0``)."""
        if any(zi and n == 1 for zi, n in zip(z, self.shape)):  # no cell has that pattern
            return 0.0
        return float(self._inverse[tuple(0 if zi == 0 else 1 for zi in z)])

    def _discrete_table(self, xs: list[np.ndarray]) -> np.ndarray:
        """Exact discrete variances of the table ``Tᵀq = ⊗_i xs_i`` (module doc, "patterns").

        ``p_c`` depends only on which coordinates of ``c`` are 0 (``d_j`` is ``t_i²``, one
        non-zero at 0, on the axes ``j`` sums), so ``diag(p)⁺ = Σ_z v_z ⊗_i diag(π_{z_i})`` with
        ``π_0 = e_0``, ``π_1 = 1 - e_0``: the x̂-coefficients of product ``j`` are a sum of Kronecker
        products, ``c_j[q, r] = (s_j²/2) α(q) Σ_z v_z Π_{i∈A_j} F_{i,z_i}[q_i, r_i]`` with
        ``F_{i,a} = X_i diag(π_a) T_iᵀ M_iᵀ diag(b_i²)`` and ``α(q) = Π_{i∉A_j} t_{i,0} X_i[q_i, 0]``
        (only ``z_i = 0`` survives a summed axis). Squaring and summing with ``D_{j,r}`` gives
        ``Σ_{z,z'} v_z v_{z'}`` mode products of ``D_j`` with ``F_{i,z_i} ⊙ F_{i,z'_i}``:
        ``O(4^{|A_j|})`` mode products per product, no ``queries × cells`` table."""
        ks = tuple(x.shape[0] for x in xs)
        d = len(self.shape)
        out = np.zeros(ks)
        pis = [(np.eye(n)[0], 1.0 - np.eye(n)[0]) for n in self.shape]
        for j, axes, _, dn in self._per_product:
            alpha = [np.ones(ks[ax]) if ax in axes else
                     (self._model.transforms[ax][1][0] * xs[ax][:, 0]) ** 2 for ax in range(d)]
            f = {}
            for ax in axes:
                right = self._transforms[ax].T @ self._dense_factors[ax].T * self._factor_budgets[ax] ** 2
                for a in (0, 1):
                    f[ax, a] = (xs[ax] * pis[ax][a]) @ right
            pats = list(itertools.product((0, 1), repeat=len(axes)))
            acc = np.zeros(tuple(ks[ax] for ax in axes))
            for ia, za in enumerate(pats):
                for zb in pats[ia:]:
                    full_a, full_b = [0] * d, [0] * d
                    for ax, u, w in zip(axes, za, zb):
                        full_a[ax], full_b[ax] = u, w
                    coef = self._pattern_inverse(full_a) * self._pattern_inverse(full_b)
                    if coef == 0:
                        continue
                    h = [f[ax, u] * f[ax, w] for ax, u, w in zip(axes, za, zb)]
                    acc += (1.0 if za == zb else 2.0) * coef * _mode(h, dn)
            acc *= (float(self.scales[j]) ** 2 / 2) ** 2
            for ax in range(d):
                if ax not in axes:
                    acc = np.expand_dims(acc, ax)
            out += acc * reduce(np.multiply.outer, alpha, np.ones(()))
        return out

    def _marginal_mats(self, key, queries=None) -> list[np.ndarray | None]:
        mats: list[np.ndarray | None] = [None] * len(self.attrs)
        for pos, a in enumerate(key):
            mats[self.attrs.index(a)] = np.eye(self.domain.sizes[a]) if queries is None else queries[pos]
        return mats

    def _entry_mats(self, j: int) -> list[np.ndarray | None]:
        s = self.workload.sets[j]
        return self._marginal_mats(s, [np.asarray(self.workload.query_matrix(a, k), dtype=float)
                                       for a, k in zip(s, self.workload.types(j))])

    @cached_property
    def _entry_variances(self) -> tuple[np.ndarray, ...]:
        out = []
        for j in range(len(self.workload)):
            mats = self._entry_mats(j)
            self._check_span([self._transformed(ax, q) for ax, q in enumerate(mats)],
                             ",".join(self.workload.names(j)))
            shape = tuple(self.workload.query_matrix(a, k).shape[0]
                          for a, k in zip(self.workload.sets[j], self.workload.types(j)))
            out.append(self._table_variance(mats).reshape(shape))
        return tuple(out)

    def total_variance(self) -> float:
        """Weighted total of the workload's query variances; the continuous model's is the
        closed form ``Σ_c g_c / p_c`` (:mod:`~dpmatrix._solvers.union_split`), no table."""
        if self.variance_model == "continuous":
            qs = [(float(self.workload.weights[j]), {self.attrs.index(a): np.asarray(
                self.workload.query_matrix(a, k), dtype=float) for a, k in zip(self.workload.sets[j],
                                                                                self.workload.types(j))})
                  for j in self._positive()]
            grams = self._grams()
            prods = [{ax: grams[ax] for ax in self._axes(j)} for j in range(len(self.products))]
            model = kron_union_model(self.shape, prods, qs)
            assert model is not None  # one Gram per axis by construction
            return model.total(self._eta)
        return super().total_variance()

    def _grams(self) -> list[np.ndarray]:
        return [(m.T * b**2) @ m for m, b in zip(self._dense_factors, self._factor_budgets)]

    def _variance(self, key) -> np.ndarray:
        """Cell variances of the marginal on ``key``."""
        self._require_key(key)
        mats = self._marginal_mats(key)
        self._check_span([self._transformed(ax, q) for ax, q in enumerate(mats)], str(list(self.domain.names_of(key))))
        return self._table_variance(mats).reshape(tuple(self.domain.sizes[a] for a in key))

    def _lifted_tq(self, key, q: np.ndarray) -> np.ndarray:
        """``Tᵀq`` for one query ``q`` on the ``key``-table (a batch of one)."""
        self._require_key(key)
        t = np.asarray(q, dtype=float).reshape(tuple(self.domain.sizes[a] for a in key))
        mats = []
        for ax, a in enumerate(self.attrs):
            if a in key:
                mats.append(self._model.transforms[ax][0].T)
            else:
                t = np.expand_dims(t, ax)
                mats.append(self._model.transforms[ax][1][:, None])
        tq = _mode(mats, t)[None]
        dead = self._inverse == 0
        if dead.any() and np.sum(tq[0][dead] ** 2) > _SPAN_TOL * max(float(np.sum(tq**2)), 1e-300):
            raise NotMeasuredError("the strategy cannot answer this query: it is not in the row space of the "
                                   "measured products (no unbiased linear estimate exists)")
        return tq

    def lifted_variance(self, key, q: np.ndarray) -> float:
        """Variance of ``⟨q, x̂_key⟩`` for a query ``q`` shaped like the ``key``-table."""
        return float(self._batch_variance(self._lifted_tq(key, q))[0])

    def covariance(self, attrs) -> np.ndarray:
        """Dense covariance of the estimate of the marginal on ``attrs`` (small marginals only)."""
        key = self.domain.resolve(attrs)
        self._require_key(key)
        cells = self.domain.cells(key)
        if cells > MAX_COVARIANCE_CELLS:
            raise PlanError(f"the covariance of a {cells}-cell marginal is too large to build densely; "
                            "ask for variances or single queries")
        mats = self._marginal_mats(key)
        xs = [self._transformed(ax, q) for ax, q in enumerate(mats)]
        self._check_span(xs, str(list(self.domain.names_of(key))))
        v = reduce(np.multiply.outer, xs, np.ones(()))  # (k_0, n_0, k_1, n_1, …)
        d = len(xs)
        v = np.transpose(v, [2 * i for i in range(d)] + [2 * i + 1 for i in range(d)]).reshape((cells,) + self.shape)
        if self.variance_model == "continuous":
            flat = v.reshape(cells, -1)
            return (flat * self._inverse.ravel()) @ flat.T
        cs = self._coefficients(v * self._inverse)
        return sum((c * dn.ravel()) @ c.T for c, (_, _, _, dn) in zip(cs, self._per_product))

    # -- reports ----------------------------------------------------------------------------------
    def table(self) -> pd.DataFrame:
        """One row per measured product: attributes, rows, scale ``s_j``."""
        import pandas as pd

        return pd.DataFrame([{"product": ",".join(self.domain.names_of(self.products[j])),
                              "rows": math.prod(self.row_shape(j)), "scale": float(self.scales[j])}
                             for j in range(len(self.products))])

    def factor_table(self) -> pd.DataFrame:
        """One row per attribute's factor: cells, rows, exact column L1 norm."""
        import pandas as pd

        return pd.DataFrame([factor_row(self.domain.names_of((a,))[0], f) for a, f in zip(self.attrs, self.factors)])

    # -- measurement ------------------------------------------------------------------------------
    def mechanisms(self, *, noise: str | None = None, rel_var_tol: float = 1e-4):
        """``(self, records)``: one :class:`KronLaplaceRecord` per measured product (key ``j``)."""
        check_pure_noise(noise)
        return self, [KronLaplaceRecord(j, tuple(self.products[j]), tuple(self.factors[ax] for ax in self._axes(j)),
                                        self.scales[j]) for j in self._live]

    def estimator(self, noisy) -> KronUnionEstimator:
        return KronUnionEstimator(self, noisy)

    # -- serialization ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        names = self.domain.names_of(self.attrs)
        return {"format": KRON_UNION_FORMAT, "planner": "pure", "domain": self.domain.to_dict(),
                "workload": self.workload.to_dict(), "epsilon": self.epsilon, "attributes": list(names),
                "factors": [{"attribute": a, "cells": f.n, "aggregation": f.agg.tolist(),
                             "budgets": [fraction_str(b) for b in f.budgets]} for a, f in zip(names, self.factors)],
                "products": [list(self.domain.names_of(p)) for p in self.products],
                "scales": [fraction_str(s) for s in self.scales],
                "strategy": self.strategy, "budgeting": self.budgeting, "objective": self.objective,
                "variance_model": self.variance_model, "comparison": [dict(c) for c in self.comparison],
                "residuals": []}

    @classmethod
    def from_dict(cls, d: Mapping) -> KronUnionPlan:
        """The plan written by :meth:`to_dict` (shapes and exact privacy re-checked)."""
        if d.get("format") != KRON_UNION_FORMAT:
            raise PlanError(f"not a dpmatrix pure Kronecker-union plan (format {d.get('format')!r})")
        dom = Domain.from_dict(d["domain"])
        wk = Workload.from_dict(dom, d["workload"])
        attrs = dom.resolve(d["attributes"])
        if len(d["factors"]) != len(attrs) or len(d["products"]) != len(d["scales"]):
            raise PlanError("the stored union plan has one factor per attribute and one scale per product")
        factors = []
        for a, fd in zip(attrs, d["factors"]):
            factors.append(stored_factor(fd, dom.sizes[a], "factors"))
        products = tuple(tuple(dom.resolve(p)) for p in d["products"])
        if any(not set(p) <= set(attrs) for p in products):
            raise PlanError("a stored product is not inside the union's attributes")
        scales = tuple(Fraction(s) for s in d["scales"])
        if any(s < 0 for s in scales):
            raise PlanError("a stored product scale is negative")
        plan = cls(wk, float(d["epsilon"]), attrs, tuple(factors), products, scales,
                   str(d.get("budgeting", "optimal")), str(d.get("objective", "sum")),
                   str(d.get("strategy", "pidentity-union")), str(d.get("variance_model", "discrete")),
                   tuple(d.get("comparison", ())))
        if plan.privacy_epsilon() > Fraction(plan.epsilon):
            raise PlanError("stored plan spends more than its epsilon: refusing it")
        return plan


class KronUnionEstimator(KronEstimatorBase):
    """``x̂ = T diag(p)⁺ Tᵀ Σ_j lift_jᵀ S_jᵀ diag(ω_j) y_j`` by mode products (module doc); every
    answer is a linear function of the one ``x̂`` (consistent)."""

    def __init__(self, plan: KronUnionPlan, noisy):
        self.plan = plan
        d = len(plan.shape)
        z = np.zeros(plan.shape)
        for j, axes, w, _ in plan._per_product:
            if j not in noisy:
                raise NotMeasuredError(f"the measurements hold no output of product {j}")
            y = np.asarray(noisy[j], dtype=float).reshape(plan.row_shape(j)) * w
            t = _mode([plan._dense_factors[ax].T for ax in axes], y)
            for ax in range(d):
                if ax not in axes:
                    t = np.expand_dims(t, ax)
            z = z + t
        tz = _mode([t.T for t in plan._transforms], z)
        self.cells = _mode(list(plan._transforms), tz * plan._inverse)

    def estimate(self, key):
        p = self.plan
        p._require_key(key)
        p._check_span([p._transformed(ax, q) for ax, q in enumerate(p._marginal_mats(key))],
                      str(list(p.domain.names_of(key))))
        drop = tuple(ax for ax, a in enumerate(p.attrs) if a not in key)
        return self.cells.sum(axis=drop) if drop else self.cells.copy()

    def query_vector(self, key, q):
        var = self.plan.lifted_variance(key, q)
        drop = tuple(ax for ax, a in enumerate(self.plan.attrs) if a not in key)
        table = self.cells.sum(axis=drop) if drop else self.cells
        return float(np.sum(np.asarray(q, dtype=float) * table)), var

    def entry(self, i):
        p = self.plan
        wk, dom = p.workload, p.domain
        key = wk.sets[i]
        drop = tuple(ax for ax, a in enumerate(p.attrs) if a not in key)
        est = self.cells.sum(axis=drop) if drop else self.cells
        types = wk.types(i)
        qs = [np.asarray(wk.query_matrix(a, t), dtype=float) for a, t in zip(key, types)]
        est = _mode(qs, est)
        labels = axis_labels(dom, key, types, [wk.query_matrix(a, t) for a, t in zip(key, types)])
        names = dom.names_of(key)
        return EntryAnswer(names, names, labels, est, p.entry_variance(i))
