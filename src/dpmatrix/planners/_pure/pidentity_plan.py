"""Optimized p-Identity strategies (HDMM's OPT_0 family) for one ordered attribute, pure ε-DP.

The strategy ``A = [I; Θ]D`` (:mod:`dpmatrix._solvers.pidentity`) is optimized for the
attribute's workload (prefixes, ranges, cells, custom query matrices, weighted). It is released
with exact discrete Laplace noise on *integer* rows:

* cell ``j``: the row ``e_j`` with budget ``ε_j = ⌊ε / s_j⌋`` (``s_j = 1 + Σ_k Θ_kj``; ``⌊·⌋``:
  rounded down to a dyadic rational);
* aggregation row ``k`` (real entries ``a_kj = Θ_kj / s_j``): the integers
  ``m_kj = ⌊a_kj / c_k⌋`` with ``c_k = max_j a_kj / 2^30``, budget ``ε_k = ⌊c_k ε⌋`` (after
  dividing ``m_k`` by the gcd ``g`` of its entries and multiplying ``c_k`` by ``g``).

So ``Σ_r |m_rj| ε_r ≤ ε/s_j + Σ_k (a_kj/c_k) c_k ε = ε`` for every cell ``j``: the max column L1
norm of the budget-scaled strategy is at most ``ε`` (checked in exact rational arithmetic by
:meth:`~.matrix_strategy.MatrixPurePlan.privacy_epsilon`). The quantization moves the
continuous-model objective by a relative ``O(2^-30 max_j a_kj / a_kj)`` (entries far below their row's largest are coarser); the reported variances are those of the
released integer rows. Recovery is GLS with the exact per-row variances (discrete Laplace, or
``2/ε_r²`` with ``variance_model="continuous"``): the precision ``diag(π_cells) + MᵀΠM`` is
inverted by Woodbury in O(n²p).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import numpy as np

from ..._linalg.query_sets import interval_bounds
from ..._mechanisms.laplace import dyadic_floor, row_noise_variance
from ..._solvers.pidentity import (
    DenseGram,
    DenseQueries,
    IntervalQueries,
    PrefixGram,
    RangeGram,
    SumGram,
    optimize_pidentity,
    optimize_pidentity_max,
    tree_theta,
)
from ..._workload import Workload
from ...errors import PlanError
from .levels import quadratic_diagonal
from .matrix_strategy import MatrixPurePlan
from .units import check_epsilon

__all__ = ["PIdentityPlan", "interval_bounds", "plan_pidentity", "quantized_strategy", "single_attribute", "single_product", "workload_gram", "workload_queries"]

#: integer resolution of an aggregation row (its largest entry)
RESOLUTION = 2**30


def _type_gram(workload: Workload, attr: int, kind: str):
    n = workload.domain.sizes[attr]
    if kind == "prefix":
        return PrefixGram(n)
    if kind == "range":
        return RangeGram(n)
    if kind == "identity":
        return DenseGram(np.eye(n))
    q = np.asarray(workload.query_matrix(attr, kind), dtype=float)
    return DenseGram(q.T @ q)


def single_product(workload: Workload) -> tuple[int, ...] | None:
    """The attributes when every marginal of ``workload`` is on the same set of one or two
    attributes (a single Kronecker product of query types per marginal), else None."""
    sets = {tuple(s) for s in workload.sets}
    if len(sets) != 1 or not 1 <= len(next(iter(sets))) <= 2:
        return None
    return next(iter(sets))


def single_attribute(workload: Workload) -> int | None:
    """The attribute when every marginal of ``workload`` is on that one attribute, else None."""
    sets = {tuple(s) for s in workload.sets}
    if len(sets) != 1 or len(next(iter(sets))) != 1:
        return None
    return next(iter(sets))[0]


def _single_attribute(workload: Workload) -> int:
    attr = single_attribute(workload)
    if attr is None:
        raise PlanError("strategy='pidentity' plans a workload on one attribute (every marginal on the "
                        "same single attribute); use 'auto' for several attributes")
    return attr


def workload_gram(workload: Workload):
    """``Σ_j w_j W_jᵀW_j`` of a one-attribute workload (closed forms for prefix / range)."""
    attr = _single_attribute(workload)
    terms, weights = [], []
    for j in range(len(workload)):
        if workload.weights[j] > 0:
            terms.append(_type_gram(workload, attr, workload.types(j)[0]))
            weights.append(float(workload.weights[j]))
    if not terms:
        raise PlanError("the workload has no positively weighted marginal")
    return terms[0] if weights == [1.0] else SumGram(tuple(terms), tuple(weights))


def workload_queries(workload: Workload, attr: int, pos: int = 0):
    """The queries of every positively weighted marginal on attribute ``attr`` (its ``pos``-th
    factor), stacked: :class:`~dpmatrix._solvers.pidentity.IntervalQueries` when every query type
    is an interval family (prefix / range / identity), else a dense stack."""
    n = workload.domain.sizes[attr]
    kinds = [workload.types(j)[pos] for j in range(len(workload)) if workload.weights[j] > 0]
    if not kinds:
        raise PlanError("the workload has no positively weighted marginal")
    bounds = [interval_bounds(k, n) for k in dict.fromkeys(kinds)]
    if all(b is not None for b in bounds):
        return IntervalQueries(n, np.concatenate([b[0] for b in bounds]), np.concatenate([b[1] for b in bounds]))
    return DenseQueries(np.vstack([np.asarray(workload.query_matrix(attr, k), dtype=float)
                                   for k in dict.fromkeys(kinds)]))


def _optimize_factor(gram, queries, objective: str, random_starts: int, seed: int):
    """Optimize one attribute's Θ for the total (``"sum"``) or the maximum (``"max"``) query
    variance. For ``"max"`` the starts are the sum-optimum and (below 512 cells) trees with
    ``b ∈ {4, 16}``; every candidate is compared by its exact maximum."""
    res = optimize_pidentity(gram, random_starts=random_starts, seed=seed)
    if objective == "sum":
        return res
    n = gram.n
    starts = [("sum-optimum", res.theta)]
    if n < 512:
        starts += [(f"tree:{b}", tree_theta(n, b)) for b in (4, 16) if b < n]
    return optimize_pidentity_max(queries, starts)


def quantized_strategy(theta: np.ndarray, epsilon: float, resolution: int = RESOLUTION
                       ) -> tuple[np.ndarray, tuple[Fraction, ...]]:
    """Integer rows and dyadic budgets of ``[I; Θ]D`` at total budget ``ε`` (module doc).

    Examples
    --------
    >>> m, b = quantized_strategy(np.array([[1.0, 1.0]]), 1.0)
    >>> m.tolist(), [str(x) for x in b]
    ([[1, 0], [0, 1], [1, 1]], ['1/2', '1/2', '1/2'])
    """
    theta = np.asarray(theta, dtype=float)
    p, n = theta.shape
    s = 1.0 + theta.sum(axis=0)
    rows = [np.eye(n, dtype=np.int64)]
    budgets = [dyadic_floor(epsilon / float(x)) for x in s]
    a = theta / s
    for k in range(p):
        top = float(a[k].max())
        if top <= 1e-12:
            continue
        c = top / resolution
        m = np.floor(a[k] / c).astype(np.int64)
        if m.max() <= 0:
            continue
        g = int(np.gcd.reduce(m[m > 0]))  # c·m = (c·g)·(m/g): the same row, smaller integers
        rows.append((m // g)[None, :])
        budgets.append(dyadic_floor(c * g * epsilon))
    out = np.vstack(rows)
    out.setflags(write=False)
    return out, tuple(budgets)


@dataclass(frozen=True, eq=False)
class PIdentityVariances(MatrixPurePlan):
    """What every p-Identity plan (one product, :class:`PIdentityPlan`, or a union of products,
    :class:`~.pidentity_union.UnionPIdentityPlan`) shares: per-row Laplace variances in the
    discrete (released, exact discrete Laplace) or continuous (``2/ε_r²``) model, and the
    workload's total and maximum variances from the subclass's per-marginal ``_entry_variances``
    (weighted sum of all entries; largest entry over marginals of positive weight).

    Attributes
    ----------
    variance_model : {"discrete", "continuous"}
        Exact discrete Laplace variances (released) or ``2/ε_r²``.
    comparison : tuple of dict
        What the planner compared (optimizer starts, or per-marginal objectives and budgets).
    """

    variance_model: str = "discrete"
    comparison: tuple = ()

    @cached_property
    def noise_variance(self) -> np.ndarray:
        return row_noise_variance([float(b) for b in self.budgets], self.variance_model)

    def _queries(self, j: int) -> list[np.ndarray]:
        s = self.workload.sets[j]
        return [np.asarray(self.workload.query_matrix(a, k), dtype=float) for a, k in zip(s, self.workload.types(j))]

    def total_variance(self) -> float:
        return float(sum(self.workload.weights[j] * self._entry_variances[j].sum()
                         for j in range(len(self.workload)) if self.workload.weights[j] > 0))

    def max_variance(self) -> float:
        return float(max(self._entry_variances[j].max() for j in range(len(self.workload))
                         if self.workload.weights[j] > 0))


@dataclass(frozen=True, eq=False)
class PIdentityPlan(PIdentityVariances):
    """A :class:`~.matrix_strategy.MatrixPurePlan` whose rows are the cells followed by
    non-negative aggregation rows (an optimized p-Identity strategy), with structured linear
    algebra (Woodbury covariance, interval query variances) and the continuous model option.

    Attributes
    ----------
    variance_model : {"discrete", "continuous"}
        Exact discrete Laplace variances (released) or ``2/ε_r²``.
    comparison : tuple of dict
        The optimizer's starts and their objectives.
    """

    @cached_property
    def _cov_x(self) -> np.ndarray:
        """``(D + UᵀU)⁻¹ = D⁻¹ - D⁻¹Uᵀ(I + UD⁻¹Uᵀ)⁻¹UD⁻¹`` (Woodbury), ``D`` the cells'
        precisions, ``U`` the other rows divided by their noise standard deviations."""
        n = self.strategy_matrix.shape[1]
        v = self.noise_variance
        if not np.all(np.isfinite(v[:n])):
            return super()._cov_x
        dinv = v[:n]
        m = self.strategy_matrix[n:].astype(float)
        live = np.isfinite(v[n:])
        m, va = m[live], v[n:][live]
        if m.shape[0] == 0:
            return np.diag(dinv)
        u = m / np.sqrt(va)[:, None]
        ud = u * dinv
        core = np.eye(u.shape[0]) + ud @ u.T
        return np.diag(dinv) - ud.T @ np.linalg.solve(core, ud)

    def _outside(self, q: np.ndarray) -> np.ndarray:
        n = self.strategy_matrix.shape[1]
        if np.all(np.isfinite(self.noise_variance[:n])):  # every cell measured: full row space
            return np.zeros(q.shape[0], dtype=bool)
        return super()._outside(q)

    @cached_property
    def _entry_variances(self) -> tuple[np.ndarray, ...]:
        out = []
        n = self.strategy_matrix.shape[1]
        for j in range(len(self.workload)):
            kind = self.workload.types(j)[0]
            iv = interval_bounds(kind, n) if kind in ("prefix", "range", "identity") else None
            if iv is None:
                q = self.entry_matrix(j)
                out.append(np.einsum("ij,jk,ik->i", q, self._cov_x, q).reshape(self._entry_shape(j)))
            else:
                out.append(quadratic_diagonal(None, self._cov_x, iv))
        return tuple(out)


def _kron2_diagonal(qs, cov: np.ndarray, shape) -> np.ndarray:
    """``diag((Q1 ⊗ Q2) C (Q1 ⊗ Q2)ᵀ)`` as a ``(m1, m2)`` table: ``Y_c = Σ_{i,k} Q1_ci Q1_ck
    C_{i·k·}`` first (diagonal in ``c``), then the same with ``Q2``; no ``m1 × m2 × N`` object."""
    q1, q2 = qs
    c = cov.reshape(shape[0], shape[1], shape[0], shape[1])
    y = np.tensordot(q1, c, axes=([1], [0]))    # (m1, n2, n1, n2)
    y = np.einsum("ck,cjkl->cjl", q1, y)        # (m1, n2, n2): diagonal in c
    z = np.tensordot(y, q2, axes=([2], [1]))    # (m1, n2, m2)
    return np.einsum("dj,cjd->cd", q2, z)


def plan_pidentity(
    workload: Workload,
    epsilon: float,
    *,
    variance_model: str = "discrete",
    random_starts: int | None = None,
    seed: int = 0,
    objective: str = "sum",
) -> PIdentityPlan:
    """Plan a one-attribute workload with an optimized p-Identity strategy (module doc).

    Parameters
    ----------
    workload : Workload
        Marginals on one attribute (prefix / range / identity / custom query types, weighted).
    epsilon : float
    variance_model : {"discrete", "continuous"}, keyword-only
    random_starts : int, keyword-only
        Random starts per attribute (besides the tree starts); default
        ``max(2, min(16, 1024 // n))``, none from ``n = 512`` (the 16-ary tree start alone: prefix
        n = 1024 reaches 46,473 against 47,074 from a random start and HDMM's best of 10, 46,881): the objective is not convex and small attributes are cheap
        (range, n = 32: 2 starts reach 5457, 10 starts 5343, HDMM's best of 20 restarts 5368).
    seed : int, keyword-only
        Seed of the optimizer's explicit generator (planning is deterministic).
    objective : {"sum", "max"}, keyword-only
        Minimize the total variance of the workload's queries, or the largest one
        (:func:`~dpmatrix._solvers.pidentity.optimize_pidentity_max`: p-norm surrogates from the
        sum-optimum and trees, candidates compared by their exact maximum).

    Returns
    -------
    PIdentityPlan
        (A product of attributes is planned factor-wise by :func:`~.kron_plan.plan_kron_pidentity`.)

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 16}), [("a",)], query_types={"a": "prefix"})
    >>> p = plan_pidentity(wk, 1.0)
    >>> p.privacy_epsilon() <= 1
    True
    """
    eps = check_epsilon(epsilon)
    if variance_model not in ("discrete", "continuous"):
        raise PlanError(f"variance_model must be 'discrete' or 'continuous', got {variance_model!r}")
    if objective not in ("sum", "max"):
        raise PlanError(f"objective must be 'sum' or 'max', got {objective!r}")
    attrs = single_product(workload)
    if attrs is not None and len(attrs) == 2:
        raise PlanError("a product of attributes is planned factor-wise by kron_plan.plan_kron_pidentity "
                        "(plan_pure(..., strategy='pidentity') chooses it)")
    attr = _single_attribute(workload)
    gram = workload_gram(workload)
    starts = default_random_starts(gram.n) if random_starts is None else random_starts
    queries = workload_queries(workload, attr) if objective == "max" else None
    res = _optimize_factor(gram, queries, objective, starts, seed)
    m, budgets = quantized_strategy(res.theta, eps)
    comparison = tuple({"start": label, "objective": 2.0 * v / eps**2} for label, v in res.starts)
    plan = PIdentityPlan(workload, eps, (attr,), m, budgets, "optimal", objective, "pidentity",
                         variance_model=variance_model, comparison=comparison)
    if plan.privacy_epsilon() > Fraction(eps):  # cannot happen: every rounding is downward
        raise PlanError("the quantized p-Identity strategy exceeds epsilon")  # pragma: no cover
    return plan


def default_random_starts(n: int) -> int:
    """Random starts for an attribute of ``n`` cells: ``max(2, min(16, 1024 // n))`` below 512
    cells, none from 512 cells (the tree start is better and each start then costs seconds)."""
    return 0 if n >= 512 else max(2, min(16, 1024 // max(n, 1)))
