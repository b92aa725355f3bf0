"""Spectra of workload Gram matrices ``WᵀW`` and their square-root traces.

The singular value bound (Li & Miklau, *Efficient Batch Query Answering Under Differential
Privacy*, §3.2) depends on a workload only through ``tr((WᵀW)^{1/2}) = Σᵢ σᵢ(W)`` (the nuclear
norm of ``W``). This module computes that number for three structures, never building an object of
the full domain's size for the structured ones:

* explicit ``W`` (or its Gram matrix): the eigenvalues of ``WᵀW`` (Corollary 3.1);
* a Kronecker product ``W = W_1 ⊗ … ⊗ W_d``: ``σ(W)`` are the products of the factors' singular
  values, so ``Σσ(W) = Πᵢ Σσ(Wᵢ)``;
* a weighted union of plain marginals: ``WᵀW`` is diagonal in the residual bases (below).

Residual diagonalization of plain marginals
-------------------------------------------
On attribute ``i`` (``nᵢ`` values) let ``P⁰ᵢ = 𝟏𝟏ᵀ/nᵢ`` (rank 1) and ``P¹ᵢ = I − P⁰ᵢ`` (rank ``nᵢ−1``).
The marginal on ``M`` is ``Q_M = ⊗_{i∈M} I ⊗_{i∉M} 𝟏ᵀ``, so
``Q_MᵀQ_M = ⊗_{i∈M}(P⁰ᵢ+P¹ᵢ) ⊗_{i∉M} nᵢP⁰ᵢ = Σ_{A'⊆M} (Π_{i∉M} nᵢ) R_{A'}``, where
``R_{A'} = ⊗_{i∈A'}P¹ᵢ ⊗_{i∉A'}P⁰ᵢ`` are orthogonal projectors of rank ``Π_{i∈A'}(nᵢ−1)`` summing to
``I``. The product runs over every attribute *outside* ``M`` (the summed-out ones), not over
``M∖A'``. With weights ``w_M`` (dpmatrix's sum-of-variances objective ``Σ_M w_M Σ_cells Var`` is the
total squared error of the stacked workload ``[√w_M Q_M]``, whose Gram matrix is
``Σ_M w_M Q_MᵀQ_M``) the eigenvalue on ``R_{A'}`` is

    λ(A') = Σ_{M ⊇ A'} w_M Π_{i∉M} nᵢ = N · μ(A'),   μ(A') = Σ_{M ⊇ A'} w_M / Π_{i∈M} nᵢ,

``N = Πᵢ nᵢ``, with multiplicity ``Π_{i∈A'}(nᵢ−1)`` for every ``A'`` in the downward closure
(``λ = 0`` elsewhere). Hence ``tr((WᵀW)^{1/2}) = √N · Σ_{A'} Π_{i∈A'}(nᵢ−1) √μ(A')`` and the bound
``(Σσ)²/N`` needs only the closure: ``N`` cancels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from .._workload import Closure
from ..errors import WorkloadError

__all__ = [
    "ResidualSpectrum",
    "certified_sqrt_trace_gram",
    "gram_eigenvalues",
    "kron_sqrt_trace",
    "marginal_spectrum",
    "sqrt_trace",
    "sqrt_trace_gram",
]


def gram_eigenvalues(gram: np.ndarray) -> np.ndarray:
    """Eigenvalues (ascending, tiny negative round-off clipped to 0) of a symmetric PSD matrix."""
    g = np.asarray(gram, dtype=float)
    if g.ndim != 2 or g.shape[0] != g.shape[1]:
        raise WorkloadError(f"a Gram matrix WᵀW must be square, got shape {g.shape}")
    if not np.all(np.isfinite(g)):
        raise WorkloadError("the Gram matrix has NaN or infinite entries")
    ev = sla.eigvalsh(g, check_finite=False, driver="evd")
    return np.clip(ev, 0.0, None)


def sqrt_trace_gram(gram: np.ndarray) -> float:
    """``tr(G^{1/2}) = Σ √λᵢ(G)`` for a PSD Gram matrix ``G = WᵀW`` (Corollary 3.1).

    Eigenvalues below ``n·ε·λ_max`` (round-off of exact zeros, whose square roots would add
    ``O(√ε)`` each) are taken as 0; for a rank-deficient ``W`` prefer :func:`sqrt_trace` on ``W``
    itself (singular values are accurate to ``ε·σ_max``)."""
    lam = gram_eigenvalues(gram)
    if len(lam):
        lam = np.where(lam > len(lam) * np.finfo(float).eps * lam[-1], lam, 0.0)
    return float(np.sum(np.sqrt(lam)))


def certified_sqrt_trace_gram(gram: np.ndarray) -> float:
    """A value ``≤ tr(G^{1/2})`` whatever the rounding: ``Σ √max(λᵢ − slack, 0)``.

    A computed eigenvalue of a symmetric matrix is within ``‖G‖·O(n ε)`` of the exact one
    (Weyl), so with ``slack = 10·n·ε·λ_max`` each term is at most the exact ``√λᵢ``: the result
    can be used in a certified lower bound (e.g. the SVD bound ``(Σσ)²/n``).

    Examples
    --------
    >>> round(certified_sqrt_trace_gram(np.diag([4.0, 9.0])), 9)
    5.0
    """
    lam = gram_eigenvalues(gram)
    if not len(lam):
        return 0.0
    slack = 10.0 * len(lam) * np.finfo(float).eps * float(lam[-1])
    return float(np.sum(np.sqrt(np.maximum(lam - slack, 0.0))))


def sqrt_trace(W: np.ndarray) -> float:
    """``Σᵢ σᵢ(W)`` of an explicit ``m × n`` workload from its singular values (Theorem 3.3),
    ``O(mn·min(m, n))``."""
    W = np.asarray(W, dtype=float)
    if W.ndim != 2 or W.size == 0:
        raise WorkloadError(f"an explicit workload must be a non-empty 2-D matrix, got shape {W.shape}")
    if not np.all(np.isfinite(W)):
        raise WorkloadError("the workload matrix has NaN or infinite entries")
    return float(np.sum(sla.svdvals(W, check_finite=False)))


def kron_sqrt_trace(factors: Sequence[np.ndarray]) -> float:
    """``Σσ(W_1 ⊗ … ⊗ W_d) = Πᵢ Σσ(Wᵢ)`` (singular values of a Kronecker product multiply)."""
    return math.prod(sqrt_trace(f) for f in factors)


@dataclass(frozen=True, eq=False)
class ResidualSpectrum:
    """Eigen-structure of ``WᵀW`` for a weighted union of plain marginals.

    ``closure`` indexes the residual subsets ``A'``; ``mu[j] = λ(A'_j)/N`` and
    ``multiplicity[j] = Π_{i∈A'_j}(nᵢ−1)``. ``sqrt_trace_over_sqrt_n`` is
    ``tr((WᵀW)^{1/2})/√N = Σ_j multiplicity_j √mu_j``.
    """

    closure: Closure
    mu: np.ndarray
    multiplicity: np.ndarray

    @property
    def sqrt_trace_over_sqrt_n(self) -> float:
        return float(np.sum(self.multiplicity * np.sqrt(np.clip(self.mu, 0.0, None))))


def _rows_by_size(sets: Sequence[tuple[int, ...]]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    lengths = np.fromiter(map(len, sets), dtype=np.int64, count=len(sets))
    out = {}
    for k in np.unique(lengths).tolist():
        pos = np.flatnonzero(lengths == k)
        rows = (np.array([sets[p] for p in pos], dtype=np.int64).reshape(len(pos), k))
        out[k] = (pos, rows)
    return out


def marginal_spectrum(
    sizes: Sequence[int],
    sets: Sequence[tuple[int, ...]] | None,
    weights: Sequence[float],
    *,
    closure: Closure | None = None,
    rows_by_size: dict[int, tuple[np.ndarray, np.ndarray]] | None = None,
) -> ResidualSpectrum:
    """Residual eigen-structure of ``Σ_M w_M Q_MᵀQ_M`` for plain marginals ``M`` (sorted position
    tuples; repeats allowed, their weights add) on attributes of the given sizes.

    Cost: ``Σ_M 2^{|M|}`` scatter-adds over the downward closure; nothing of the domain's size.
    ``closure``: the downward closure of the positive-weight sets, if already computed;
    ``rows_by_size``: instead of ``sets``, ``{k: (positions in weights, (m_k, k) sorted rows)}``
    (vectorized input for very large workloads).
    """
    sizes_a = np.asarray(sizes, dtype=float)
    w = np.asarray(weights, dtype=float)
    if rows_by_size is None:
        if len(w) != len(sets):
            raise WorkloadError(f"{len(w)} weights for {len(sets)} marginals")
        rows_by_size = _rows_by_size([tuple(sorted(int(a) for a in s)) for s in sets])
    keep = w > 0
    if not keep.any():
        raise WorkloadError("the workload is zero (no marginal has a positive weight): nothing to bound")
    groups = {}
    for k, (pos, rows) in rows_by_size.items():
        sel = keep[pos]
        if sel.any():
            groups[k] = (np.asarray(pos)[sel], np.asarray(rows)[sel])
    if closure is None:
        closure = Closure.of(len(sizes_a), groups)
    mu = np.zeros(len(closure))
    empty = None
    for k, (pos, rows) in groups.items():
        c = w[pos] / (np.prod(sizes_a[rows], axis=1) if k else 1.0)
        for mask in range(1 << k):
            cols = [j for j in range(k) if mask >> j & 1]
            if cols:
                idx = closure.indices(rows[:, cols])
                if np.any(idx < 0):  # cannot happen: the closure holds every subset
                    raise AssertionError("closure is missing a subset")
                mu += np.bincount(idx, weights=c, minlength=len(closure))
            else:
                empty = closure.index(()) if empty is None else empty
                mu[empty] += float(np.sum(c))
    mult = np.ones(len(closure))
    for k, (idx, rows) in closure.rows_by_size().items():
        if k:
            mult[idx] = np.prod(sizes_a[rows] - 1.0, axis=1)
    return ResidualSpectrum(closure, mu, mult)
