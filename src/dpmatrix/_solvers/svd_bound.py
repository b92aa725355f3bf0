"""The singular value bound: the least total squared error of any Gaussian matrix mechanism.

Li & Miklau, *Efficient Batch Query Answering Under Differential Privacy*, §3.2, Theorem 3.3 and
Corollary 3.1.

Derivation in dpmatrix's units
------------------------------
A Gaussian matrix mechanism measures ``y = Bx + N(0, Σ)`` and answers ``W`` by generalized least
squares. Its privacy cost is ``pcost = max diag(BᵀΣ⁻¹B)`` (= 2ρ of ρ-zCDP, μ² of μ-GDP) and, with
``X = BᵀΣ⁻¹B``, the total variance of the answers is ``tr(W X⁺ Wᵀ) = tr(WᵀW X⁺)``. Every cell
``j`` has ``X_jj ≤ pcost``, so ``tr X ≤ N·pcost`` (``N`` cells). For PSD ``G = WᵀW``, Cauchy–Schwarz
in the trace inner product gives ``tr(G^{1/2}) = tr(X^{1/2}·X^{-1/2}G^{1/2}) ≤ (tr X)^{1/2}
tr(G X⁻¹)^{1/2}`` (singular ``X`` by a limit), hence

    total variance ≥ (tr G^{1/2})² / (N · pcost) = (Σᵢ σᵢ(W))² / (N · pcost),

equality iff ``X ∝ G^{1/2}`` with a constant diagonal (the paper's Theorem 3.3 proof, App. D.1,
reaches the same quantity through column-uniform strategies). The paper writes the error of a
strategy ``A`` as ``P(ε,δ)·‖A‖₂²·tr(WᵀW(AᵀA)⁻¹)`` with ``P(ε,δ) = 2 log(2/δ)/ε²`` and ``‖A‖₂`` the
largest column norm; that is dpmatrix's total variance at ``pcost = 1/P(ε,δ)``. The paper's own
numbers (``P = 1``) are dpmatrix's at ``pcost = 1``; ``paper_factor=P`` selects that convention.

Weights: dpmatrix's sum-of-variances objective ``Σ_M w_M Σ_{queries of M} Var`` is the total
variance of the stacked workload ``[√w_M W_M]`` whose Gram matrix is ``Σ_M w_M W_MᵀW_M``; the bound
reported is a bound on that weighted objective (``Plan.loss()``; with unit weights it is
``Plan.total_variance()``).

Structures
----------
* explicit ``W`` or ``WᵀW``: exact (eigenvalues);
* one Kronecker product ``⊗ Wᵢ`` (a generalized marginal, a Kronecker query group): exact,
  ``(Πᵢ Σσ(Wᵢ))²/(N·pcost) = Πᵢ [(Σσ(Wᵢ))²/nᵢ] / pcost`` (attributes summed out contribute 1);
* a weighted union of plain marginals: exact through the residual spectrum
  (:func:`~dpmatrix._solvers.spectra.marginal_spectrum`):
  ``(Σ_{A'} Π_{i∈A'}(nᵢ−1) √μ(A'))² / pcost`` with ``μ(A') = Σ_{M⊇A'} w_M/Π_{i∈M} nᵢ``;
* any other union (generalized marginals, mixed query groups): a valid lower bound
  (``exact=False``), the larger of
  - *superadditivity*: for ``G = Σ_g G_g`` (PSD), operator concavity of ``√·`` gives
    ``G^{1/2} ⪰ Σ_g √α_g G_g^{1/2}`` for any ``α`` on the simplex; taking traces and
    ``α_g ∝ (tr G_g^{1/2})²`` gives ``tr G^{1/2} ≥ (Σ_g (tr G_g^{1/2})²)^{1/2}``, i.e. the bound of a
    union is at least the *sum* of the (exact) bounds of its parts. Parts: all plain marginals
    together, each other group alone;
  - *Loewner residual relaxation*: each attribute Gram ``Gᵢ = WᵢᵀWᵢ`` is replaced by
    ``aᵢP⁰ + bᵢP¹ ⪯ Gᵢ`` (``0 ≤ b < λ_min(Gᵢ)``, ``a = b + 1/(uᵀ(Gᵢ−bI)⁻¹u)``, ``u = 𝟏/√nᵢ``, the
    largest ``a`` by a Schur complement). Kronecker products and sums of Loewner-ordered PSD
    matrices keep the order, and ``tr √·`` is monotone (``√·`` is operator monotone), so the exact
    residual-spectrum bound of the relaxed workload is a lower bound; ``b = t·λ_min`` on a small
    grid of ``t`` and the best is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._privacy import resolve_pcost
from .._queries import QueryGroup, QueryWorkload
from .._workload import Closure, Workload
from ..errors import BudgetError, WorkloadError
from .spectra import (
    gram_eigenvalues,
    marginal_spectrum,
    sqrt_trace,
    sqrt_trace_gram,
)

__all__ = ["SVDBound", "p_factor", "svd_bound"]

# largest group marginal (cells) whose Gram matrix is built for a non-Kronecker group
DENSE_GROUP_MAX = 4096
# relaxation grid b = t·λ_min for the Loewner residual bound
_LOEWNER_GRID = (0.0, 0.5, 0.9, 0.99)


@dataclass(frozen=True)
class SVDBound:
    """The singular value bound of a workload at a privacy cost.

    Attributes
    ----------
    total : float
        Lower bound on the (weighted) total variance of any Gaussian matrix mechanism.
    rmse : float
        ``sqrt(total / n_queries)``.
    exact : bool
        True when ``total`` is the singular value bound itself; False for a valid but possibly
        loose lower bound on it (unions of generalized marginals).
    method : str
        ``"dense"``, ``"kron"``, ``"residual"``, ``"superadditive"`` or ``"loewner-residual"``.
    pcost : float
        The privacy cost the bound is stated at (``1/P(ε,δ)`` in the paper's convention).
    n_queries : float
        Number of queries (positive weight) the RMSE is averaged over.
    """

    total: float
    rmse: float
    exact: bool
    method: str
    pcost: float
    n_queries: float


def p_factor(epsilon: float, delta: float) -> float:
    """The paper's ``P(ε, δ) = 2 log(2/δ)/ε²`` (Prop. 2.4); ``pcost = 1/P`` in dpmatrix units."""
    if not (epsilon > 0 and 0 < delta < 1):
        raise BudgetError(f"need epsilon > 0 and 0 < delta < 1, got ({epsilon!r}, {delta!r})")
    return 2.0 * math.log(2.0 / delta) / epsilon**2


def _budget(pcost, rho, epsilon, delta, mu, paper) -> float:
    if paper is not None:
        if any(v is not None for v in (pcost, rho, epsilon, delta, mu)):
            raise BudgetError("give either paper_factor= or a dpmatrix budget, not both")
        p = float(paper)
        if not (math.isfinite(p) and p > 0):
            raise BudgetError(f"paper_factor must be a positive number, got {paper!r}")
        return 1.0 / p
    return resolve_pcost(pcost=pcost, rho=rho, epsilon=epsilon, delta=delta, mu=mu)


def _result(s2_over_n: float, c: float, nq: float, exact: bool, method: str) -> SVDBound:
    total = float(s2_over_n) / c
    rmse = math.sqrt(total / nq) if nq > 0 else float("nan")
    return SVDBound(total, rmse, exact, method, c, float(nq))


def svd_bound(
    workload,
    *,
    pcost: float | None = None,
    rho: float | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    mu: float | None = None,
    paper_factor: float | None = None,
    gram: bool = False,
    n_queries: float | None = None,
) -> SVDBound:
    """Singular value bound (Theorem 3.3): least total variance of any Gaussian matrix mechanism.

    ``total ≥ (Σᵢ σᵢ(W))² / (N · pcost)``, ``N`` the number of cells (module docstring).

    Parameters
    ----------
    workload : Workload, QueryWorkload or array
        A :class:`~dpmatrix._workload.Workload` (plain marginals: exact; generalized: a valid
        lower bound), a :class:`~dpmatrix._queries.QueryWorkload` (one Kronecker group or only
        plain groups: exact; otherwise a valid lower bound), or an explicit ``m × N`` matrix ``W``
        (``gram=True``: the ``N × N`` matrix ``WᵀW``).
    pcost, rho, epsilon, delta, mu : float, optional
        The privacy budget (exactly one form, as :func:`dpmatrix.plan`).
    paper_factor : float, optional
        Instead of a budget: the paper's ``P(ε, δ)`` multiplier (``pcost = 1/P``; ``1`` gives the
        paper's printed numbers).
    gram : bool
        ``workload`` is ``WᵀW`` rather than ``W``.
    n_queries : float, optional
        Number of queries for the RMSE when only ``WᵀW`` is given.

    Returns
    -------
    SVDBound

    Examples
    --------
    >>> import numpy as np
    >>> W = np.array([[1., 0], [0, 1], [1, 1]])
    >>> round(svd_bound(W, pcost=1).total, 6)   # σ = (√3, 1): (√3 + 1)²/2
    3.732051
    """
    c = _budget(pcost, rho, epsilon, delta, mu, paper_factor)
    if isinstance(workload, Workload):
        return _workload_bound(workload, c)
    if isinstance(workload, QueryWorkload):
        return _query_workload_bound(workload, c)
    if isinstance(workload, QueryGroup):
        nq = float(np.count_nonzero(workload.weight_array()))
        return _result(_group_s2n(workload), c, nq, True, "kron" if workload.is_kron else "dense")
    W = np.asarray(workload, dtype=float)
    if W.ndim != 2 or W.size == 0:
        raise WorkloadError(f"an explicit workload must be a non-empty 2-D matrix, got shape {W.shape}")
    if gram:
        s = sqrt_trace_gram(W)
        nq = float(n_queries) if n_queries is not None else float("nan")
    else:
        s = sqrt_trace(W)
        nq = float(np.count_nonzero(np.any(W != 0, axis=1)))
    if s <= 0:
        raise WorkloadError("the workload is zero (every query is all-zero): nothing to bound")
    return _result(s * s / W.shape[1], c, nq, True, "dense")


# -- per-structure pieces: each returns (Σσ)²/N_cells of the part ------------------------------
def _factor_s2n(W: np.ndarray) -> float:
    """(Σσ(W))²/n for one attribute's query matrix."""
    s = sqrt_trace(W)
    return s * s / W.shape[1]


def _group_s2n(g: QueryGroup) -> float:
    """(Σσ)²/N of one weighted query group (the summed-out attributes contribute 1)."""
    if g.is_kron and g.scalar_weight:
        return float(g.weights) * math.prod(_factor_s2n(f) for f in g.factors)
    if g.n_cells > DENSE_GROUP_MAX:
        raise WorkloadError(
            f"group {g.label or g.attrs} has {g.n_cells} cells and is not a scalar-weighted "
            f"Kronecker product; its exact bound needs a {g.n_cells}² Gram matrix "
            f"(limit {DENSE_GROUP_MAX}). Give it one weight, or split it."
        )
    W = g.dense() * np.sqrt(g.weight_array().reshape(-1))[:, None]
    s = sqrt_trace(W) if np.any(W) else 0.0
    return s * s / g.n_cells


def _is_identity(f: np.ndarray) -> bool:
    return f.shape[0] == f.shape[1] and np.array_equal(f, np.eye(f.shape[0]))


def _loewner_pair(W: np.ndarray, t: float) -> tuple[float, float]:
    """``(a, b)`` with ``aP⁰ + bP¹ ⪯ WᵀW``: ``b = t·λ_min``, ``a`` the largest allowed."""
    G = W.T @ W
    n = G.shape[0]
    if n == 1:
        return float(G[0, 0]), 0.0
    lam = gram_eigenvalues(G)
    lmin = lam[0] if lam[0] > 1e-12 * max(lam[-1], 1e-300) else 0.0
    b = t * lmin
    u = np.full(n, 1.0 / math.sqrt(n))
    H = G - b * np.eye(n)
    if lmin == 0.0:
        # G singular: a P⁰ ⪯ G iff u ∈ range(G) and a ≤ 1/(uᵀG⁺u)
        Gp = np.linalg.pinv(G, hermitian=True)
        if np.linalg.norm(G @ (Gp @ u) - u) > 1e-9:
            return 0.0, 0.0
        return float(1.0 / (u @ Gp @ u)), 0.0
    return float(b + 1.0 / (u @ np.linalg.solve(H, u))), float(b)


def _loewner_residual_s2n(sizes, sets, weights, mats) -> float:
    """Exact residual-spectrum (Σσ)²/N of the relaxed workload (every Gᵢ ↦ aᵢP⁰ + bᵢP¹),
    vectorized by marginal size; the best over the grid of ``t``."""
    sizes_a = np.asarray(sizes, dtype=float)
    keys = list(mats)
    key_id = {k: i for i, k in enumerate(keys)}
    by_size: dict[int, list[int]] = {}
    for j, (s, _) in enumerate(sets):
        by_size.setdefault(len(s), []).append(j)
    w = np.asarray(weights, dtype=float)
    groups = {}
    for k, js in by_size.items():
        rows = np.array([sets[j][0] for j in js], dtype=np.int64).reshape(len(js), k)
        ids = np.array([[key_id[(a, t)] for a, t in zip(*sets[j])] for j in js],
                       dtype=np.int64).reshape(len(js), k)
        groups[k] = (np.asarray(js), rows, ids)
    closure = Closure.of(len(sizes), {k: (js, rows) for k, (js, rows, _) in groups.items()})
    mult = np.ones(len(closure))
    for kk, (idx, rows) in closure.rows_by_size().items():
        if kk:
            mult[idx] = np.prod(sizes_a[rows] - 1.0, axis=1)
    ident = np.array([_is_identity(mats[k]) for k in keys])
    best = 0.0
    for t in _LOEWNER_GRID:
        ab = np.array([(1.0, 1.0) if ident[i] else _loewner_pair(mats[k], t) for i, k in enumerate(keys)])
        mu = np.zeros(len(closure))
        for k, (js, rows, ids) in groups.items():
            base = w[js] / (np.prod(sizes_a[rows], axis=1) if k else 1.0)
            a, b = ab[ids, 0], ab[ids, 1]
            for mask in range(1 << k):
                bits = np.array([(mask >> j) & 1 for j in range(k)], dtype=bool)
                f = base * np.prod(np.where(bits, b, a), axis=1) if k else base
                cols = np.flatnonzero(bits)
                if len(cols):
                    mu += np.bincount(closure.indices(rows[:, cols]), weights=f, minlength=len(closure))
                else:
                    mu[closure.index(())] += float(np.sum(f))
        best = max(best, float(np.sum(mult * np.sqrt(np.clip(mu, 0, None)))) ** 2)
    return best


def _union_bound(sizes, plain_sets, plain_w, others: list, kron_terms, c, nq) -> SVDBound:
    """Plain marginals (exact, together) + other groups; exact if only one part."""
    parts = []
    if plain_sets:
        parts.append(marginal_spectrum(sizes, plain_sets, plain_w).sqrt_trace_over_sqrt_n ** 2)
    parts.extend(others)
    if not parts or sum(parts) <= 0:
        raise WorkloadError("the workload is zero (no query has a positive weight): nothing to bound")
    if len(parts) == 1:
        return _result(parts[0], c, nq, True, "residual" if plain_sets else "kron")
    total, method = sum(parts), "superadditive"
    if kron_terms is not None:
        lr = _loewner_residual_s2n(sizes, *kron_terms)
        if lr > total:
            total, method = lr, "loewner-residual"
    return _result(total, c, nq, False, method)


def _per_attribute_bound(wk: Workload, groups: dict, c: float) -> SVDBound:
    """Generalized workload whose attributes have one query type each (no per-marginal
    override): the same bounds as the general path, vectorized by marginal size."""
    d = len(wk.domain)
    sizes_a = np.asarray(wk.domain.sizes, dtype=float)
    ident = np.array([wk.attr_types[a] == "identity" for a in range(d)])
    mats = [None if ident[a] else np.asarray(wk.query_matrix(a, wk.attr_types[a]), dtype=float)
            for a in range(d)]  # no n×n identity matrices are built
    m_rows = np.array([sizes_a[a] if ident[a] else float(mats[a].shape[0]) for a in range(d)])
    # (Σσ(Wₐ))²/nₐ per attribute; the identity gives nₐ (its n singular values are 1)
    fac = np.array([sizes_a[a] if ident[a] else _factor_s2n(mats[a]) for a in range(d)])
    w = wk.weights
    pos_groups, nq = {}, 0.0
    for k, (pos, rows) in groups.items():
        sel = w[pos] > 0
        if sel.any():
            pos_groups[k] = (np.asarray(pos)[sel], np.asarray(rows)[sel])
            nq += float(np.sum(np.prod(m_rows[pos_groups[k][1]], axis=1))) if k else float(sel.sum())
    if not pos_groups:
        raise WorkloadError("the workload is zero (no marginal has a positive weight): nothing to bound")
    plain, others = {}, 0.0
    n_parts = 0
    for k, (pos, rows) in pos_groups.items():
        is_plain = np.all(ident[rows], axis=1) if k else np.ones(len(pos), dtype=bool)
        if is_plain.any():
            plain[k] = (pos[is_plain], rows[is_plain])
        gen = ~is_plain
        others += float(np.sum(w[pos[gen]] * np.prod(fac[rows[gen]], axis=1)))
        n_parts += int(gen.sum())
    total = others
    if plain:
        total += marginal_spectrum(wk.domain.sizes, None, w, rows_by_size=plain).sqrt_trace_over_sqrt_n ** 2
        n_parts += 1
    if n_parts == 1:
        return _result(total, c, nq, True, "residual" if plain else "kron")
    method = "superadditive"
    closure = Closure.of(d, pos_groups)
    mult = np.ones(len(closure))
    for kk, (idx, rows) in closure.rows_by_size().items():
        if kk:
            mult[idx] = np.prod(sizes_a[rows] - 1.0, axis=1)
    for t in _LOEWNER_GRID:
        ab = np.array([(1.0, 1.0) if ident[a] else _loewner_pair(mats[a], t) for a in range(d)])
        mu = np.zeros(len(closure))
        for k, (pos, rows) in pos_groups.items():
            base = w[pos] / (np.prod(sizes_a[rows], axis=1) if k else 1.0)
            for mask in range(1 << k):
                bits = np.array([(mask >> j) & 1 for j in range(k)], dtype=bool)
                f = base * np.prod(np.where(bits, ab[rows, 1], ab[rows, 0]), axis=1) if k else base
                cols = np.flatnonzero(bits)
                if len(cols):
                    mu += np.bincount(closure.indices(rows[:, cols]), weights=f, minlength=len(closure))
                else:
                    mu[closure.index(())] += float(np.sum(f))
        lr = float(np.sum(mult * np.sqrt(np.clip(mu, 0, None)))) ** 2
        if lr > total:
            total, method = lr, "loewner-residual"
    return _result(total, c, nq, False, method)


def _workload_bound(wk: Workload, c: float) -> SVDBound:
    pos = wk.weights > 0
    if not pos.any():
        raise WorkloadError("the workload is zero (no marginal has a positive weight): nothing to bound")
    groups = wk.sets_by_size
    if not wk.is_plain and not wk.overrides:
        return _per_attribute_bound(wk, groups, c)
    nq = float(np.sum(wk.n_queries[pos]))
    sizes = wk.domain.sizes
    if wk.is_plain:
        closure = wk.closure if bool(np.all(pos)) else None
        # the workload's vectorized grouping {k: (positions, rows)} (avoids 10⁵-10⁶ Python
        # tuples at 100+ attributes)
        spec = marginal_spectrum(sizes, None, wk.weights, closure=closure, rows_by_size=groups)
        return _result(spec.sqrt_trace_over_sqrt_n ** 2, c, nq, True, "residual")
    plain_sets, plain_w, others = [], [], []
    cache: dict = {}
    sets_types, weights, mats = [], [], {}
    for i, s in enumerate(wk.sets):
        w = float(wk.weights[i])
        if w <= 0:
            continue
        types = wk.types(i)
        for a, t in zip(s, types):
            if (a, t) not in mats:
                mats[(a, t)] = np.asarray(wk.query_matrix(a, t), dtype=float)
        sets_types.append((s, types))
        weights.append(w)
        if all(t == "identity" for t in types):
            plain_sets.append(s)
            plain_w.append(w)
            continue
        val = w
        for a, t in zip(s, types):
            if (a, t) not in cache:
                cache[(a, t)] = _factor_s2n(mats[(a, t)])
            val *= cache[(a, t)]
        others.append(val)
    return _union_bound(sizes, plain_sets, plain_w, others, (sets_types, weights, mats), c, nq)


def _query_workload_bound(qw: QueryWorkload, c: float) -> SVDBound:
    if not qw.groups:
        raise WorkloadError("the query workload has no groups: nothing to bound")
    nq = float(sum(np.count_nonzero(g.weight_array()) for g in qw.groups))
    plain_sets, plain_w, others = [], [], []
    kron_ok = True
    sets_types, weights, mats = [], [], {}
    for g in qw.groups:
        if g.scalar_weight and float(g.weights) == 0.0:
            continue
        if g.is_kron and g.scalar_weight:
            types = tuple((f.shape, f.tobytes()) for f in g.factors)
            for a, t, f in zip(g.attrs, types, g.factors):
                mats.setdefault((a, t), np.asarray(f, dtype=float))
            sets_types.append((g.attrs, types))
            weights.append(float(g.weights))
            if all(_is_identity(f) for f in g.factors):
                plain_sets.append(g.attrs)
                plain_w.append(float(g.weights))
                continue
        else:
            kron_ok = False
        others.append(_group_s2n(g))
    kron_terms = (sets_types, weights, mats) if kron_ok else None
    return _union_bound(qw.domain.sizes, plain_sets, plain_w, others, kron_terms, c, nq)
