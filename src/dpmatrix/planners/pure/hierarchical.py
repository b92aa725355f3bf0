"""Hierarchical (b-ary tree) strategies for prefix / range / any per-attribute queries, pure ε-DP.

Per attribute ``i`` of query matrix ``Q_i`` (``n_i`` columns): a ``b``-ary tree with levels
``ℓ = 0..L`` (``L = ⌈log_b n_i⌉``; level ``ℓ`` partitions ``0..n_i-1`` into contiguous blocks of
``b^{L-ℓ}`` cells, the last possibly shorter; level 0 is the total, level ``L`` the cells).
``H_i^ℓ`` (0/1, one 1 per column) is that level's block-sum matrix; identity-type attributes use
the one "level" ``I``.

Strategy for a generalized marginal ``A`` (Kronecker-combined, Cormode et al. §3 with tree groups):
one group per level tuple ``ℓ = (ℓ_i)_{i∈A}``, rows ``⊗_{i∈A} H_i^{ℓ_i}`` on the ``A``-table. Every
column of such a group (as a full-domain block) has exactly one 1: column L1 norm ``C = 1`` —
groupable (Definition 3.1). With uniform budgets the L1 sensitivity of marginal ``A``'s stack is
``Π_{i∈A} (L_i + 1)``, the number of level tuples (the "levels per attribute product").

Budgets (product form): ``ε_{A,ℓ} = ε_A Π_{i∈A} η_{i,ℓ_i}`` with ``Σ_ℓ η_{i,ℓ} = 1``, so the stack
of ``A`` spends ``Σ_ℓ ε_{A,ℓ} = ε_A Π_i Σ_ℓ η_{i,ℓ} = ε_A`` and the plan ``Σ_A ε_A ≤ ε``.
With the continuous-model noise ``2/ε_{A,ℓ}²`` the precision is a Kronecker product, hence so is
the GLS Gram of ``A``'s stack:

    S_Aᵀ Σ⁻¹ S_A = (ε_A²/2) ⊗_{i∈A} G_i,   G_i = Σ_ℓ η_{i,ℓ}² H_i^{ℓᵀ} H_i^ℓ   (n_i × n_i),

and GLS recovery, its covariance ``(2/ε_A²) ⊗ G_i⁻¹`` and the total variance of all queries of
``A``, ``(2/ε_A²) Π_i tr(Q_iᵀ Q_i G_i⁻¹)``, are per-attribute computations (no full-domain or
dense-workload object). The per-attribute factor ``F_i(b, η) = tr(Q_iᵀQ_i G_i⁻¹) (Σ_ℓ η_ℓ)²`` is
scale free, so the product-form optimum splits into independent 1-D problems: each attribute
picks the branching ``b`` and level shares ``η_i`` minimizing ``F_i`` (L-BFGS-B from the uniform
shares and from the cube-root rule on the per-level GLS weights, Corollary 3.3; never worse than
uniform). The marginals' budgets ``ε_A`` follow the cube-root rule on ``s_A = 2 w_A Π_i F_i``.

Recovery is GLS *within* each marginal's stack (each generalized marginal is estimated from its
own trees: consistent within a marginal, not across marginals — the cross-marginal GLS of
:mod:`.subspaces` does not cover tree groups). The estimator weights the level tuples by the
product-form precisions ``ω_ℓ = Π_i η_{i,ℓ_i}²`` (so its Gram stays ``⊗ G_i``); it is the exact
GLS for the continuous model, and its variances under the released discrete Laplace noise
(whose exact variances are not in product form) are computed exactly as a sandwich, per level
tuple (:meth:`HierarchicalPlan.query_variance`). Not done: Haar strategies, cross-marginal GLS,
``objective="max"`` budgets for trees, and the binary encoding of non-ordinal attributes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, reduce
from math import prod
from typing import Any

import numpy as np
import scipy.optimize

from ...domain import Domain
from ...errors import DataError, PlanError
from ...mechanisms.laplace import (
    discrete_laplace_variance,
    round_budgets,
    sample_discrete_laplace_many,
)
from ...solvers.budget_split import cube_root_split
from ...workload import Workload

__all__ = ["AttributeTree", "HierarchicalPlan", "best_tree", "plan_hierarchical", "tree_levels"]

AttrSet = tuple[int, ...]


def tree_levels(n: int, b: int) -> list[np.ndarray]:
    """Block-sum matrices ``H^0..H^L`` of the ``b``-ary tree on ``n`` ordered cells (root first).

    Examples
    --------
    >>> [h.tolist() for h in tree_levels(3, 2)]
    [[[1, 1, 1]], [[1, 1, 0], [0, 0, 1]], [[1, 0, 0], [0, 1, 0], [0, 0, 1]]]
    """
    if n < 1 or b < 2:
        raise PlanError(f"a tree needs n >= 1 cells and branching b >= 2, got n={n}, b={b}")
    depth = 0
    while b**depth < n:
        depth += 1
    out = []
    for lev in range(depth + 1):
        width = b ** (depth - lev)
        blocks = -(-n // width)
        h = np.zeros((blocks, n), dtype=np.int64)
        h[np.arange(n) // width, np.arange(n)] = 1
        out.append(h)
    return out


def _gram(levels, eta) -> np.ndarray:
    return sum(e * e * (h.T @ h) for h, e in zip(levels, eta))


def _factor(qtq: np.ndarray, levels, eta) -> float:
    """``tr(QᵀQ G⁻¹) (Σ η)²`` (inf when ``G`` is singular on the queries' row space)."""
    g = _gram(levels, eta)
    try:
        ginv = np.linalg.inv(g)
    except np.linalg.LinAlgError:
        return math.inf
    if not np.allclose(g @ ginv, np.eye(g.shape[0]), atol=1e-8):
        return math.inf
    return float(np.trace(qtq @ ginv)) * float(np.sum(eta)) ** 2


@dataclass(frozen=True)
class AttributeTree:
    """Per-attribute tree: branching ``b`` (0 = identity, one level), level shares ``η`` (sum 1)
    and the scale-free variance factor ``F = tr(QᵀQ G⁻¹)`` at those shares."""

    n: int
    branching: int
    shares: tuple[float, ...]
    factor: float

    def levels(self) -> list[np.ndarray]:
        if self.branching == 0:
            return [np.eye(self.n, dtype=np.int64)]
        return tree_levels(self.n, self.branching)

    def gram(self) -> np.ndarray:
        return _gram(self.levels(), self.shares)


def _optimize_shares(qtq: np.ndarray, levels) -> tuple[np.ndarray, float]:
    k = len(levels)
    # cube-root start: level weights from the uniform-share GLS (Corollary 3.3 on s_ℓ)
    u = np.full(k, 1.0 / k)
    ginv = np.linalg.inv(_gram(levels, u))
    s = np.array([np.trace(qtq @ ginv @ (h.T @ h) @ ginv) * (1.0 / k) ** 2 for h in levels])
    starts = [u]
    if np.all(np.isfinite(s)) and s.sum() > 0:
        starts.append(np.maximum(cube_root_split(s, np.ones(k), 1.0).eta, 1e-3 / k))
    best = (u, _factor(qtq, levels, u))

    def f(x):
        return _factor(qtq, levels, np.abs(x) + 1e-12)

    for x0 in starts:
        r = scipy.optimize.minimize(f, x0, method="L-BFGS-B", bounds=[(1e-6, None)] * k,
                                    options={"maxiter": 200})
        x = np.abs(r.x)
        x = x / x.sum()
        v = _factor(qtq, levels, x)
        if v < best[1]:
            best = (x, v)
    return best


def _branchings(n: int) -> list[int]:
    """Branchings tried by default: 2..16 and ``⌈n^{1/k}⌉`` (the smallest ``b`` of each depth)."""
    out = set(range(2, min(n, 17)))
    out |= {math.ceil(n ** (1 / k) - 1e-9) for k in range(1, max(2, n.bit_length()))}
    return sorted(b for b in out if 2 <= b < n)


def best_tree(q: np.ndarray, *, branchings: Sequence[int] | None = None,
              allow_identity: bool = True) -> AttributeTree:
    """The branching and level shares minimizing ``F`` for one attribute's query matrix ``q``.

    Identity (one level, ``F = tr(QᵀQ)``) is a candidate unless ``allow_identity=False``, so a
    tree is used only when it helps: under pure DP with the sum objective that is prefixes from
    about 16 cells and all ranges from about 64 (the levels multiply the L1 sensitivity).

    Examples
    --------
    >>> t = best_tree(np.eye(4))
    >>> t.branching, t.factor
    (0, 4.0)
    """
    q = np.asarray(q, dtype=float)
    n = q.shape[1]
    qtq = q.T @ q
    best = AttributeTree(n, 0, (1.0,), float(np.trace(qtq)) if allow_identity else math.inf)
    if n <= 1:
        return AttributeTree(n, 0, (1.0,), float(np.trace(qtq)))
    for b in branchings or _branchings(n):
        levels = tree_levels(n, b)
        eta, v = _optimize_shares(qtq, levels)
        if v < best.factor * (1 - 1e-12):
            best = AttributeTree(n, b, tuple(float(e) for e in eta), v)
    return best


def _kron(mats) -> np.ndarray:
    return reduce(np.kron, mats, np.ones((1, 1)))


def _apply(mats, table: np.ndarray) -> np.ndarray:
    """``(⊗ mats) · vec(table)`` as a table (mode products, C order)."""
    t = np.asarray(table, dtype=float)
    for ax, m in enumerate(mats):
        t = np.moveaxis(np.tensordot(m, t, axes=([1], [ax])), 0, ax)
    return t


@dataclass(frozen=True)
class HierarchicalPlan:
    """Pure ε-DP plan of a generalized marginal workload with per-attribute tree strategies.

    ``budgets[j][ℓ]`` is the exact (dyadic) discrete Laplace parameter of level tuple ``ℓ``
    (``itertools.product`` order over the marginal's attributes) of workload marginal ``j``.
    """

    domain: Domain
    workload: Workload
    epsilon: float
    trees: tuple[tuple[AttributeTree, ...], ...]
    budgets: tuple[tuple[Fraction, ...], ...]
    strategy: str = "hierarchical"
    budgeting: str = "optimal"
    variance_model: str = "discrete"

    # -- structure ----------------------------------------------------------------------------
    def _level_tuples(self, j: int):
        return list(itertools.product(*[range(len(t.levels())) for t in self.trees[j]]))

    def _queries(self, j: int) -> list[np.ndarray]:
        s = self.workload.sets[j]
        return [np.asarray(self.workload.query_matrix(a, k), dtype=float)
                for a, k in zip(s, self.workload.types(j))]

    def privacy_epsilon(self) -> Fraction:
        """``Σ_{A,ℓ} ε_{A,ℓ}``: every group has column L1 norm 1 on every cell."""
        return sum((b for bs in self.budgets for b in bs), Fraction(0))

    def privacy_rho(self) -> float:
        return float(self.privacy_epsilon()) ** 2 / 2

    def _noise_var(self, j: int) -> np.ndarray:
        e = np.array([float(b) for b in self.budgets[j]])
        if self.variance_model == "continuous":
            with np.errstate(divide="ignore"):
                return np.where(e > 0, 2.0 / e**2, np.inf)
        return discrete_laplace_variance(e)

    @cached_property
    def _weights(self) -> tuple[np.ndarray, ...]:
        """GLS weights: the precision of each level tuple *in product form* (continuous model of
        the unrounded shares), so the Gram is ``⊗ G_i``."""
        return tuple(np.array([prod(t.shares[k] ** 2 for t, k in zip(self.trees[j], lev))
                               for lev in self._level_tuples(j)]) for j in range(len(self.trees)))

    @cached_property
    def _ginv(self) -> tuple[tuple[np.ndarray, ...], ...]:
        return tuple(tuple(np.linalg.inv(t.gram()) for t in ts) for ts in self.trees)

    # -- variances -------------------------------------------------------------------------------
    def query_variance(self, j: int) -> np.ndarray:
        """Exact variance of every query of workload marginal ``j`` (rows of ``⊗ Q_i``).

        Estimator ``x̂_A = (⊗G_i)⁻¹ Σ_ℓ ω_ℓ (⊗H^{ℓ})ᵀ y_ℓ`` with product weights ``ω_ℓ``; its
        covariance is ``Σ_ℓ ω_ℓ² v_ℓ ⊗_i (G_i⁻¹ H_i^{ℓ_iᵀ} H_i^{ℓ_i} G_i⁻¹)`` for noise variances
        ``v_ℓ`` (exact for the discrete noise; equals ``(ω-proportional) ⊗G_i⁻¹`` when
        ``v_ℓ ∝ 1/ω_ℓ``). Query variances: ``Σ_ℓ ω_ℓ² v_ℓ ⊗_i diag(Q_i M_{iℓ} Q_iᵀ)``.
        """
        qs = self._queries(j)
        ginv = self._ginv[j]
        levels = [t.levels() for t in self.trees[j]]
        per = [[np.einsum("ij,jk,ik->i", q, gi @ (h.T @ h) @ gi, q) for h in lv]
               for q, gi, lv in zip(qs, ginv, levels)]
        out = 0.0
        for w, v, lev in zip(self._weights[j], self._noise_var(j), self._level_tuples(j)):
            out = out + w * w * v * _kron([per[i][k][None, :] for i, k in enumerate(lev)])[0]
        return np.asarray(out)

    def total_variance(self) -> float:
        """``Σ_A w_A Σ_{q of A} Var(q)``."""
        return float(sum(w * self.query_variance(j).sum()
                         for j, w in enumerate(self.workload.weights) if w > 0))

    def max_variance(self) -> float:
        return float(max(self.query_variance(j).max()
                         for j, w in enumerate(self.workload.weights) if w > 0))

    def table(self) -> list[dict[str, Any]]:
        rows = []
        for j, s in enumerate(self.workload.sets):
            rows.append({"attributes": self.domain.names_of(s),
                         "branching": [t.branching for t in self.trees[j]],
                         "groups": len(self.budgets[j]),
                         "epsilon": float(sum(self.budgets[j], Fraction(0))),
                         "share": float(sum(self.budgets[j], Fraction(0))) / self.epsilon})
        return rows

    # -- measurement and reconstruction ---------------------------------------------------------
    def measure(self, data, *, rng=None) -> tuple[tuple[np.ndarray, ...], ...]:
        """Noisy integer tree counts ``(⊗H^ℓ)·(A-table) + DLap(ε_{A,ℓ})`` for every group.

        ``data``: ``(n, d)`` integer record array (codes ``0..n_i-1``) or callable attrs → table.
        ``rng``: None (OS CSPRNG), a RandomSource or a numpy Generator (tests only, NOT secure).
        """
        exact, budgets, sizes = [], [], []
        for j, s in enumerate(self.workload.sets):
            t = _table(self.domain, data, tuple(s))
            levels = [tr.levels() for tr in self.trees[j]]
            for lev, b in zip(self._level_tuples(j), self.budgets[j]):
                y = _apply([levels[i][k] for i, k in enumerate(lev)], t).astype(np.int64).reshape(-1)
                exact.append(y)
                budgets.append(b)
                sizes.append(y.size)
        live = [k for k, b in enumerate(budgets) if b > 0]
        noise = sample_discrete_laplace_many([budgets[k] for k in live], [sizes[k] for k in live], rng)
        for k, z in zip(live, noise):
            exact[k] = exact[k] + z
        out, pos = [], 0
        for j in range(len(self.trees)):
            n = len(self.budgets[j])
            out.append(tuple(exact[pos:pos + n]))
            pos += n
        return tuple(out)

    def estimate(self, outputs, j: int) -> np.ndarray:
        """GLS estimate of the ``A_j``-table from its own tree counts (flat, C order)."""
        s = self.workload.sets[j]
        shape = tuple(self.domain.sizes[a] for a in s)
        levels = [t.levels() for t in self.trees[j]]
        acc = np.zeros(shape)
        for w, lev, y in zip(self._weights[j], self._level_tuples(j), outputs[j]):
            hs = [levels[i][k] for i, k in enumerate(lev)]
            acc += w * _apply([h.T for h in hs], np.asarray(y, float).reshape([h.shape[0] for h in hs]))
        return _apply(list(self._ginv[j]), acc).reshape(-1)

    def answer(self, outputs, j: int) -> np.ndarray:
        """Estimated answers of workload marginal ``j``'s queries (rows of ``⊗ Q_i``)."""
        s = self.workload.sets[j]
        shape = tuple(self.domain.sizes[a] for a in s)
        return _apply(self._queries(j), self.estimate(outputs, j).reshape(shape)).reshape(-1)


def _table(domain: Domain, data, attrs: AttrSet) -> np.ndarray:
    if callable(data):
        t = np.asarray(data(attrs))
    else:
        rec = np.asarray(data)
        if rec.ndim != 2 or rec.shape[1] != len(domain) or not np.issubdtype(rec.dtype, np.integer):
            raise DataError(f"data must be a callable or an (n, {len(domain)}) integer record array")
        ns = tuple(domain.sizes[i] for i in attrs)
        if rec.size and (rec.min() < 0 or np.any(rec.max(axis=0) >= np.asarray(domain.sizes))):
            raise DataError("record codes must lie in 0..size-1 for every attribute")
        idx = np.ravel_multi_index(tuple(rec[:, i] for i in attrs), ns) if attrs else np.zeros(len(rec), int)
        t = np.bincount(idx, minlength=prod(ns)).reshape(ns)
    if not np.issubdtype(t.dtype, np.integer):
        raise DataError("marginal tables must hold integer counts")
    return t


def plan_hierarchical(workload: Workload, epsilon: float, *, variance_model: str = "discrete",
                      budgeting: str = "optimal", branching: int | None = None) -> HierarchicalPlan:
    """Plan a generalized marginal workload with per-attribute tree strategies (see module doc).

    Parameters
    ----------
    workload : Workload
        Marginals whose attributes carry query types (identity, prefix, range, a matrix).
    epsilon : float
        Total pure-DP budget.
    variance_model : {"discrete", "continuous"}, keyword-only
        Exact discrete Laplace variances of the rounded budgets, or the paper's ``2/ε²``.
    budgeting : {"optimal", "uniform"}, keyword-only
        Optimal: per-attribute optimized level shares and cube-root marginal budgets. Uniform:
        equal budget for every group (``ε / Σ_A Π_i (L_i+1)``) with the same branching.
    branching : int, keyword-only
        Force this branching on every attribute whose query type is not ``"identity"`` (default:
        each attribute picks the branching, or plain cells, with the smallest factor ``F``).

    Returns
    -------
    HierarchicalPlan

    Examples
    --------
    >>> from dpmatrix.domain import Domain
    >>> dom = Domain.from_sizes([16])
    >>> wl = Workload(dom, [("a0",)], query_types={"a0": "prefix"})
    >>> p = plan_hierarchical(wl, 1.0)   # prefixes on 16 cells: a tree beats the cells
    >>> p.trees[0][0].branching > 0, float(p.privacy_epsilon()) <= 1.0
    (True, True)
    """
    eps = float(epsilon)
    trees, weights = [], []
    cache: dict = {}
    for j, s in enumerate(workload.sets):
        row = []
        for a, k in zip(s, workload.types(j)):
            q = np.asarray(workload.query_matrix(a, k), dtype=float)
            key = (q.shape, q.tobytes())
            if key not in cache:
                if branching is not None and k != "identity":
                    cache[key] = best_tree(q, branchings=[int(branching)], allow_identity=False)
                else:
                    cache[key] = best_tree(q)
            row.append(cache[key])
        trees.append(tuple(row))
        weights.append(float(workload.weights[j]))
    w = np.array(weights)
    n_groups = [prod(len(t.levels()) for t in ts) for ts in trees]
    if budgeting == "uniform":
        trees = [tuple(AttributeTree(t.n, t.branching, tuple([1.0 / len(t.levels())] * len(t.levels())),
                                     t.factor) for t in ts) for ts in trees]
        eps_a = np.array([eps * g / sum(n_groups) for g in n_groups]) * (w > 0)
    elif budgeting == "optimal":
        s = np.array([2 * x * prod(t.factor for t in ts) for x, ts in zip(w, trees)])
        eps_a = cube_root_split(s, np.ones(len(s)), eps).eta
    else:
        raise PlanError(f"budgeting must be 'optimal' or 'uniform', got {budgeting!r}")
    eta, idx = [], []
    for j, ts in enumerate(trees):
        for lev in itertools.product(*[range(len(t.shares)) for t in ts]):
            eta.append(eps_a[j] * prod(t.shares[k] for t, k in zip(ts, lev)))
            idx.append(j)
    flat = round_budgets(eta, [1] * len(eta), eps)
    budgets = tuple(tuple(b for b, i in zip(flat, idx) if i == j) for j in range(len(trees)))
    return HierarchicalPlan(domain=workload.domain, workload=workload, epsilon=eps,
                            trees=tuple(trees), budgets=budgets, budgeting=budgeting,
                            variance_model=variance_model)
