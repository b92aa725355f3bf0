"""Unions of Kronecker p-Identity strategies with one joint GLS (pure ε-DP, explicit domains).

HDMM's union-of-products template (McKenna et al., PVLDB 2018, §6) for a workload of several
marginals with query types ``W = Σ_j w_j ⊗_{i∈A_j} W_{j,i}``: marginal ``j`` gets its own product
strategy ``⊗_{i∈A_j} A_{j,i}`` (each factor an optimized p-Identity strategy,
:mod:`dpmatrix._solvers.pidentity`; plain-cell attributes keep ``I``), with objective
``f_j = 2 w_j Π_i L_{j,i}`` per unit ``1/ε_j²`` when read alone. Every product has L1
sensitivity 1, so the stacked strategy with product budgets ``ε_j`` spends ``Σ_j ε_j = ε``.

Budgets. HDMM (and this module's start) splits by the cube-root rule ``ε_j ∝ f_j^{1/3}``
(Corollary 3.3 of Cormode et al.), optimal when each marginal is answered from its own product
only. The joint GLS answers every marginal from ALL measurements, so the true objective is lower
and depends jointly on the split: it is minimized exactly (continuous ``2/ε²`` model) by
:func:`~dpmatrix._solvers.union_split.optimize_union_split`, from the cube-root split for the
total (``objective="sum"``) or from the split equalizing each product's own largest variance for
the maximum (``objective="max"``, factors optimized for their own maxima); a product whose
marginal the others already determine may get budget 0 (unmeasured). For the total, a few
alternating rounds then re-optimize each attribute's factor against the joint GLS
(:func:`~dpmatrix._solvers.union_factors.optimize_union_factors`). Candidates are compared by
the exact objective and the start is kept unless beaten: never worse than the cube-root plan.
Both searches need one factor per attribute (the same query type on an attribute in every
marginal). Otherwise that plan keeps its start split, a second candidate shares one factor per
attribute (optimized for all its query types) and is searched jointly, and the better plan by the
exact objective of its released rows is kept; the comparison says which.

**Release.** When every attribute carries one factor (one query type over the marginals, or the
shared-factor candidate), the plan is a :class:`~.kron_union.KronUnionPlan`: each factor
quantized once, one Kronecker record per product, the joint GLS by mode products in the diagonal
basis and exact discrete variances — any size (the factor rounds are skipped above
:data:`FACTOR_ROUND_CELLS` cells). On the same rows its answers equal the dense path's below to
10⁻⁸ in the continuous model. Otherwise (two factors on an attribute) the dense path below
releases it, on at most :data:`MAX_CELLS` cells.

Dense path: rows are integers (each of the ``k`` aggregating factors of a product quantized at ``2^⌊30/k⌋``
so that the product rows stay below ``2^30``, :func:`~.pidentity_plan.quantized_strategy`), lifted to the cells of the union ``U`` of
the workload's attributes; row budgets ``ε_j Π_i b_{j,i,r_i}`` are rounded down to dyadic
rationals and the max column L1 norm is re-checked exactly. Recovery is ONE GLS over all
measurements on the cells of ``U`` (dense, at most :data:`MAX_CELLS` cells), with the exact per-row
variances (discrete Laplace as released, or ``2/ε_r²``): every answer comes from one estimate
(consistent), and each workload marginal's query variances are computed from its cells'
covariance by mode products.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, reduce

import numpy as np

from ..._linalg.marginal_map import marginal_map
from ..._measure.kron_records import KronFactorRows
from ..._mechanisms.laplace import dyadic_floor
from ..._solvers.budget_split import cube_root_split
from ..._solvers.pidentity import DenseQueries, IntervalQueries, SumGram, pidentity_loss, query_variances
from ..._solvers.union_factors import normalized_gram, optimize_union_factors
from ..._solvers.union_split import kron_union_model, optimize_union_split
from ..._workload import Workload
from ...errors import PlanError
from .kron_union import KronUnionPlan
from .pidentity_plan import (
    PIdentityVariances,
    _kron2_diagonal,
    _optimize_factor,
    _type_gram,
    default_random_starts,
    interval_bounds,
    quantized_strategy,
)
from .units import check_epsilon

__all__ = ["MAX_CELLS", "UnionPIdentityPlan", "plan_pidentity_union"]

#: largest union planned densely (an attribute carrying two factors: no diagonal form)
MAX_CELLS = 4096
#: largest union whose factors are re-optimized against the joint GLS (the split is searched at
#: every size)
FACTOR_ROUND_CELLS = 1 << 16


@dataclass(frozen=True, eq=False)
class UnionPIdentityPlan(PIdentityVariances):
    """A :class:`~.matrix_strategy.MatrixPurePlan` made of one p-Identity product per workload
    marginal, with the continuous-model option and per-marginal query variances by mode products.

    Attributes
    ----------
    variance_model : {"discrete", "continuous"}
    comparison : tuple of dict
        Per marginal: its objective ``f_j`` and budget ``ε_j``.
    """

    @cached_property
    def _entry_variances(self) -> tuple[np.ndarray, ...]:
        out = []
        for j, s in enumerate(self.workload.sets):
            lift = self._lift(s)
            cov = lift @ self._cov_x @ lift.T
            qs = self._queries(j)
            if len(s) == 2:
                out.append(_kron2_diagonal(qs, cov, tuple(self.domain.sizes[a] for a in s)))
            else:
                q = reduce(np.kron, qs, np.ones((1, 1)))
                out.append(np.einsum("ij,jk,ik->i", q, cov, q).reshape(self._entry_shape(j)))
        return tuple(out)


def _product_rows(factors) -> tuple[np.ndarray, list[Fraction]]:
    """Kronecker product of integer factor rows, budgets the products of the factors' budgets."""
    rows, budgets = np.ones((1, 1), dtype=np.int64), [Fraction(1)]
    for m, b in factors:
        rows = np.vstack([np.kron(r, m) for r in rows])
        budgets = [x * y for x in budgets for y in b]
    return rows, budgets


def _factor(workload: Workload, a: int, kind: str, objective: str, seed: int) -> tuple[np.ndarray, float, float]:
    """``(Θ, L, m)`` of the attribute's optimized factor: its total (``L``, per unit ``1/ε²``
    without the Laplace 2) and largest (``m``) query variance read alone."""
    n = workload.domain.sizes[a]
    if kind == "identity":
        return np.zeros((0, n)), float(n), 1.0
    gram = _type_gram(workload, a, kind)
    queries = _queries_of(workload, a, kind)
    res = _optimize_factor(gram, queries, objective, default_random_starts(n), seed)
    theta = res.theta
    return theta, float(pidentity_loss(theta, gram)), float(query_variances(theta, queries).max())


def _queries_of(workload: Workload, a: int, kind: str):
    """The queries of query type ``kind`` on attribute ``a`` (interval form where possible)."""
    n = workload.domain.sizes[a]
    iv = interval_bounds(kind, n)
    if iv is not None:
        return IntervalQueries(n, iv[0], iv[1])
    return DenseQueries(np.asarray(workload.query_matrix(a, kind), dtype=float))


def plan_pidentity_union(
    workload: Workload,
    epsilon: float,
    *,
    variance_model: str = "discrete",
    seed: int = 0,
    objective: str = "sum",
    joint: bool = True,
) -> UnionPIdentityPlan:
    """Plan a union of p-Identity products with one GLS, budgets split against the joint GLS
    (module doc).

    Parameters
    ----------
    workload : Workload
        Marginals with any query types; the union of their attributes has at most
        :data:`MAX_CELLS` cells.
    epsilon : float
    variance_model : {"discrete", "continuous"}, keyword-only
    seed : int, keyword-only
        Seed of the optimizer's random starts.
    objective : {"sum", "max"}, keyword-only
        Minimize the weighted total variance of the workload's queries, or the largest query
        variance over the positively weighted marginals (factors optimized for their own maxima).
    joint : bool, keyword-only
        Optimize the budget split (and, for ``"sum"``, the factors) against the exact joint GLS
        (default), or keep the start: the cube-root rule for ``"sum"`` (HDMM's union weights),
        each product's own largest variance equalized for ``"max"``.

    Returns
    -------
    UnionPIdentityPlan

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 6, "b": 4}), [("a",), ("a", "b")], query_types={"a": "range"})
    >>> p = plan_pidentity_union(wk, 1.0)
    >>> p.privacy_epsilon() <= 1
    True
    """
    eps = check_epsilon(epsilon)
    if variance_model not in ("discrete", "continuous"):
        raise PlanError(f"variance_model must be 'discrete' or 'continuous', got {variance_model!r}")
    if objective not in ("sum", "max"):
        raise PlanError(f"objective must be 'sum' or 'max', got {objective!r}")
    dom = workload.domain
    union = tuple(sorted(set().union(*[set(s) for s in workload.sets])))
    cells = dom.cells(union)
    if cells > MAX_CELLS and _two_types(workload):
        raise PlanError(f"an attribute carries two query types: the union is planned densely on at most "
                        f"{MAX_CELLS} cells; the workload's attributes have {cells}")
    shape = tuple(dom.sizes[a] for a in union)
    live = [j for j in range(len(workload)) if workload.weights[j] > 0]
    if not live:
        raise PlanError("the workload has no positively weighted marginal")
    cache: dict = {}
    objectives, maxima, grams, queries, kinds = [], [], [], [], []
    for j in live:
        s, types = workload.sets[j], workload.types(j)
        loss, top, gram_j, q_j = 1.0, 1.0, {}, {}
        for a, k in zip(s, types):
            if (a, k) not in cache:
                theta, value, vmax = _factor(workload, a, k, objective, seed)
                cache[a, k] = (theta, value, vmax, normalized_gram(theta))
            theta, value, vmax, gram = cache[a, k]
            loss *= value
            top *= vmax
            gram_j[union.index(a)] = gram
            q_j[union.index(a)] = np.asarray(workload.query_matrix(a, k), dtype=float)
            kinds.append((union.index(a), a, k))
        objectives.append(2.0 * float(workload.weights[j]) * loss)
        maxima.append(2.0 * top)
        grams.append(gram_j)
        queries.append((float(workload.weights[j]), q_j))
    if objective == "sum":  # Corollary 3.3 on the products read alone
        start = cube_root_split(np.array(objectives), np.ones(len(objectives)), eps).eta
    else:  # each product's own largest variance m_j/ε_j² equalized
        start = eps * np.sqrt(maxima) / np.sqrt(maxima).sum()
    eta, summary = np.asarray(start, dtype=float), {"split": "start", "joint": "not searched"}
    thetas = {(a, k): cache[a, k][0] for _, a, k in kinds}
    build = _Assembly(workload, eps, union, shape, live, start, objectives, maxima, objective, variance_model)
    if not joint:
        return build(thetas, eta, summary)
    eta, summary = _joint_split(shape, grams, queries, start, eps, objective)
    if "joint_objective" not in summary:  # two factors on one attribute: try one shared factor too
        plan = build(thetas, eta, summary)
        shared = _shared_factors(workload, kinds, thetas, objective, seed)
        grams_s = [{union.index(a): normalized_gram(shared[a, k]) for a, k in zip(workload.sets[j], workload.types(j))}
                   for j in live]
        eta_s, summary_s = _joint_split(shape, grams_s, queries, start, eps, objective)
        if objective == "sum" and "joint_objective" in summary_s:
            shared, eta_s, summary_s = _joint_factors(shape, kinds, shared, grams_s, queries, eta_s, eps, objective,
                                                      summary_s)
        other = build(shared, eta_s, dict(summary_s, factors="one per attribute (summed query types)"))
        value = (lambda q: q.total_variance()) if objective == "sum" else (lambda q: q.max_variance())
        if value(other) < value(plan) * (1 - 1e-12):
            return dataclasses.replace(other, comparison=other.comparison[:-1] + (
                dict(other.comparison[-1], per_type_factors=value(plan)),))
        return dataclasses.replace(plan, comparison=plan.comparison[:-1] + (
            dict(plan.comparison[-1], shared_factors=value(other)),))
    if objective == "sum":  # one factor per attribute: the factor rounds
        thetas, eta, summary = _joint_factors(shape, kinds, thetas, grams, queries, eta, eps, objective, summary)
    return build(thetas, eta, summary)


@dataclass(frozen=True)
class _Assembly:
    """Integer rows, budgets and the plan from factors ``{(attribute, type): Θ}`` and a split."""

    workload: Workload
    eps: float
    union: tuple
    shape: tuple
    live: list
    start: np.ndarray
    objectives: list
    maxima: list
    objective: str
    variance_model: str

    def __call__(self, thetas, eta, summary) -> UnionPIdentityPlan | KronUnionPlan:
        workload, union, dom = self.workload, self.union, self.workload.domain
        comparison = tuple({"marginal": ",".join(dom.names_of(workload.sets[j])), "objective": f, "max": m,
                            "start_epsilon": float(e0), "epsilon": float(e)}
                           for j, f, m, e0, e in zip(self.live, self.objectives, self.maxima, self.start, eta))
        shared = _one_factor_per_attribute(workload, self.live, thetas)
        if shared is not None:  # the diagonal form: factor-wise, any size
            return self._kron(shared, eta, comparison + (summary,))
        if dom.cells(union) > MAX_CELLS:
            raise PlanError(f"an attribute carries two different factors: the union is planned densely on at "
                            f"most {MAX_CELLS} cells; the workload's attributes have {dom.cells(union)}")
        products = []
        for j in self.live:
            s, types = workload.sets[j], workload.types(j)
            # integer resolution per factor: the product rows stay below 2^30 (int64 answers)
            aggregating = sum(k != "identity" for k in types)
            resolution = 2 ** (30 // max(aggregating, 1))
            factors = [quantized_strategy(thetas[a, k], 1.0, resolution=resolution) for a, k in zip(s, types)]
            rows, budgets = _product_rows(factors)
            lifted = rows @ marginal_map(self.shape, tuple(union.index(a) for a in s)).astype(np.int64)
            products.append((lifted, budgets))
        strategy = np.vstack([m for m, _ in products]).astype(np.int64)
        strategy.setflags(write=False)
        row_budgets = tuple(dyadic_floor(float(Fraction(float(e)) * b)) if e > 0 else Fraction(0)
                            for (_, bs), e in zip(products, eta) for b in bs)
        plan = UnionPIdentityPlan(workload, self.eps, union, strategy, row_budgets, "optimal", self.objective,
                                  "pidentity-union", variance_model=self.variance_model,
                                  comparison=comparison + (summary,))
        if plan.privacy_epsilon() > Fraction(self.eps):  # cannot happen: every rounding is downward
            raise PlanError("the quantized union of p-Identity products exceeds epsilon")  # pragma: no cover
        return plan

    def _kron(self, thetas: dict, eta, comparison: tuple) -> KronUnionPlan:
        """The factor-wise plan: each attribute's factor quantized once (resolution ``2^⌊30/k⌋``,
        ``k`` the most aggregating factors in one product, so every product row stays below
        ``2^30``), product ``j`` scaled by ``s_j = ⌊ε_j⌋`` (dyadic)."""
        workload, union = self.workload, self.union
        k = max(sum(t != "identity" for t in workload.types(j)) for j in self.live)
        resolution = 2 ** (30 // max(k, 1))
        factors = []
        for a in union:
            n = workload.domain.sizes[a]
            m, budgets = quantized_strategy(thetas[a], 1.0, resolution=resolution)
            agg = np.ascontiguousarray(m[n:])
            agg.setflags(write=False)
            factors.append(KronFactorRows(n, agg, budgets))
        products = tuple(tuple(workload.sets[j]) for j in self.live)
        scales = tuple(dyadic_floor(float(e)) if e > 0 else Fraction(0) for e in eta)
        plan = KronUnionPlan(workload, self.eps, union, tuple(factors), products, scales, "optimal",
                             self.objective, "pidentity-union", self.variance_model, comparison)
        if plan.privacy_epsilon() > Fraction(self.eps):  # cannot happen: every rounding is downward
            raise PlanError("the quantized union of p-Identity products exceeds epsilon")  # pragma: no cover
        return plan


def _one_factor_per_attribute(workload: Workload, live, thetas) -> dict | None:
    """``{attribute: Θ}`` when every attribute carries one factor over the live marginals, else None."""
    out: dict = {}
    for j in live:
        for a, k in zip(workload.sets[j], workload.types(j)):
            theta = thetas[a, k]
            if a in out and not (out[a].shape == theta.shape and np.array_equal(out[a], theta)):
                return None
            out[a] = theta
    return out


def _two_types(workload: Workload) -> bool:
    """Whether some attribute carries two query types over the positively weighted marginals."""
    seen: dict = {}
    for j in range(len(workload)):
        if workload.weights[j] > 0:
            for a, k in zip(workload.sets[j], workload.types(j)):
                if seen.setdefault(a, k) != k:
                    return True
    return False


def _shared_factors(workload: Workload, kinds, thetas, objective: str, seed: int) -> dict:
    """One factor per attribute: where an attribute carries several query types, a factor
    optimized for all of them (Gram summed with the marginals' weights; for the max, every
    type's queries stacked), so that the joint GLS has its diagonal form."""
    by_attr: dict = {}
    for _, a, k in kinds:
        by_attr.setdefault(a, set()).add(k)
    out = dict(thetas)
    for a, ks in sorted(by_attr.items()):
        if len(ks) < 2:
            continue
        ks = sorted(ks)
        weight = {k: sum(float(workload.weights[j]) for j in range(len(workload)) if workload.weights[j] > 0
                         for b, t in zip(workload.sets[j], workload.types(j)) if b == a and t == k) for k in ks}
        gram = SumGram(tuple(_type_gram(workload, a, k) for k in ks), tuple(weight[k] for k in ks))
        mats = np.vstack([np.asarray(workload.query_matrix(a, k), dtype=float) for k in ks])
        n = workload.domain.sizes[a]
        theta = _optimize_factor(gram, DenseQueries(mats), objective, default_random_starts(n), seed).theta
        for k in ks:
            out[a, k] = theta
    return out


def _joint_factors(shape, kinds, thetas, grams, queries, eta, eps, objective, summary):
    """Alternating factor / split rounds against the joint total (objective "sum", one factor
    per attribute): the factors of attributes with non-cell queries may change; the summary row
    gains the rounds' total and log."""
    if objective != "sum":
        return thetas, eta, summary
    if int(np.prod(shape)) > FACTOR_ROUND_CELLS:
        return thetas, eta, dict(summary, factor_rounds=(
            f"skipped: the union has {int(np.prod(shape))} > {FACTOR_ROUND_CELLS} cells (each round's Gram "
            "gradients cost O(N n) per marginal and product; the factors stay each attribute's own optimum)"))
    by_axis = {ax: (a, k) for ax, a, k in kinds}  # one factor per axis (shared by its types)
    product_axes = [tuple(g) for g in grams]
    free = sorted({ax for ax, _, k in kinds if k != "identity"})
    res = optimize_union_factors(shape, {ax: thetas[ak] for ax, ak in by_axis.items()}, product_axes, queries,
                                 eta, eps, free=free)
    summary = dict(summary, factor_rounds=" | ".join(res.log))
    if res.objective >= res.start_objective * (1 - 1e-9):
        return thetas, eta, summary
    summary.update(split="joint", factors="joint", joint_objective=res.objective)
    return {(a, k): res.thetas[ax] for ax, a, k in kinds}, res.eta, summary


def _joint_split(shape, grams, queries, start, eps, objective) -> tuple[np.ndarray, dict]:
    """The budget split minimizing the exact joint-GLS objective in the continuous model
    (:func:`~dpmatrix._solvers.union_split.optimize_union_split`), with a summary row for the
    plan's comparison (start and joint objectives, winning candidate)."""
    model = kron_union_model(shape, grams, queries)
    if model is None:  # two query types on one attribute: no common congruence
        return np.asarray(start, dtype=float), {
            "split": "start", "joint": "skipped: an attribute has two different factors (no diagonal "
            "form of the joint GLS); the start split is kept"}
    res = optimize_union_split(model, np.asarray(start, dtype=float), eps, objective)
    # a gain below 1e-9 is noise: keep the start exactly
    if res.objective >= res.start_objective * (1 - 1e-9):
        return np.asarray(start, dtype=float), {"split": "start", "joint": res.method,
                                                "start_objective": res.start_objective,
                                                "joint_objective": res.start_objective}
    return res.eta, {"split": "joint", "joint": res.method, "start_objective": res.start_objective,
                     "joint_objective": res.objective}
