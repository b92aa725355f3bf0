"""Query decomposition onto residual spaces (QuerySmasher, section 6.2, equation 3, Theorem 2).

A linear query ``q`` over the cells of the marginal on attributes ``A = (A_1, ..., A_k)`` (domain
sizes ``sizes``, cells in C / row-major order) is split into one sub-query ``q_{A'}`` per subset
``A'`` of ``A``::

    q_{A'} = q (W_1 ⊗ ... ⊗ W_k),   W_j = 1_{d_j} / d_j              if A_j not in A'
                                    W_j = I_{d_j} - 1 1ᵀ / d_j        if A_j in A'

``q_{A'}`` is a vector over the cells of the marginal on ``A'``.  In the tensor view: average ``q``
over the attributes that are dropped, then centre along every attribute that is kept.  We compute
exactly that with reshapes and means; the Kronecker matrices are never formed.

Properties (Theorem 2), checked in ``tests/test_decompose.py``:

* ``q · x_A = Σ_{A'} q_{A'} · x_{A'}`` for every table ``x_A`` (``x_{A'}`` = its marginal on ``A'``);
* the *lifted* pieces ``lift(q_{A'})`` (the query over the cells of ``A`` that ``q_{A'}`` computes,
  i.e. ``q_{A'}`` broadcast along the dropped attributes) are mutually orthogonal and sum to ``q``.
  ``lift(q_{A'}) = q P_{A'}`` where ``P_{A'}`` is the orthogonal projector onto the residual space
  of ``A'`` inside the marginal on ``A``.

Subsets are tuples of *positions* ``0..k-1`` within the query's attributes, sorted ascending; the
empty tuple ``()`` is the total-count piece (a vector of length 1).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import combinations

import numpy as np

from ...errors import WorkloadError

__all__ = [
    "all_subsets",
    "decompose",
    "decompose_batch",
    "decompose_subset",
    "lift",
    "marginalize",
]


def all_subsets(k: int) -> list[tuple[int, ...]]:
    """All subsets of ``range(k)`` as sorted tuples, by size then lexicographically."""
    return [c for r in range(k + 1) for c in combinations(range(k), r)]


def _check_sizes(sizes: Iterable[int]) -> tuple[int, ...]:
    try:
        out = tuple(int(s) for s in sizes)
    except (TypeError, ValueError) as exc:
        raise WorkloadError(f"sizes must be a sequence of positive integers, got {sizes!r}") from exc
    if any(s < 1 for s in out):
        raise WorkloadError(f"sizes must be positive integers, got {out}")
    return out


def _check_subset(subset: Iterable[int], k: int) -> tuple[int, ...]:
    sub = tuple(int(i) for i in subset)
    if any(i < 0 or i >= k for i in sub):
        raise WorkloadError(f"subset {sub} has positions outside 0..{k - 1}")
    if len(set(sub)) != len(sub) or list(sub) != sorted(sub):
        raise WorkloadError(f"subset {sub} must be strictly increasing positions")
    return sub


def _as_batch(Q: np.ndarray, sizes: tuple[int, ...], name: str) -> np.ndarray:
    Q = np.asarray(Q, dtype=float)
    if Q.ndim != 2:
        raise WorkloadError(f"{name} must be a 2-d array with one query per row, got shape {Q.shape}")
    n_cells = int(np.prod(sizes, dtype=np.int64))
    if Q.shape[1] != n_cells:
        raise WorkloadError(
            f"{name} has {Q.shape[1]} columns but the marginal on sizes {sizes} has {n_cells} cells"
        )
    if not np.all(np.isfinite(Q)):
        raise WorkloadError(f"{name} contains NaN or infinite entries")
    return Q


def _decompose_tensor(T: np.ndarray, k: int, subset: tuple[int, ...]) -> np.ndarray:
    """T has shape (m, *sizes). Average over dropped axes, centre kept axes; returns (m, *kept)."""
    dropped = tuple(1 + i for i in range(k) if i not in subset)
    if dropped:
        T = T.mean(axis=dropped)
    # Axes of T are now (batch, *kept) in increasing attribute order.
    for ax in range(1, T.ndim):
        T = T - T.mean(axis=ax, keepdims=True)
    return T


def decompose_subset(Q: np.ndarray, sizes: tuple[int, ...], subset: tuple[int, ...]) -> np.ndarray:
    """Sub-queries ``q_{A'}`` of every row of ``Q`` for one subset ``A'``.

    ``Q``: (m, Π sizes) array, one query per row (a 1-d query is accepted and treated as m = 1,
    returning a 1-d result).  Returns (m, Π_{i in subset} sizes[i]).
    """
    sizes = _check_sizes(sizes)
    one = np.ndim(Q) == 1
    Q = _as_batch(np.atleast_2d(Q), sizes, "Q")
    sub = _check_subset(subset, len(sizes))
    T = Q.reshape((Q.shape[0],) + sizes)
    out = _decompose_tensor(T, len(sizes), sub).reshape(Q.shape[0], -1)
    return out[0] if one else out


def decompose_batch(
    Q: np.ndarray,
    sizes: tuple[int, ...],
    subsets: Iterable[tuple[int, ...]] | None = None,
) -> dict[tuple[int, ...], np.ndarray]:
    """Decompose many queries at once.

    ``Q`` is an (m, Π sizes) matrix with one query per row.  Returns ``{subset: (m, Π sizes[subset])}``
    for every subset (default: all ``2**k`` subsets).  Cost O(m · Π sizes) per subset.
    """
    sizes = _check_sizes(sizes)
    Q = _as_batch(Q, sizes, "Q")
    k = len(sizes)
    subsets = all_subsets(k) if subsets is None else [_check_subset(s, k) for s in subsets]
    T = Q.reshape((Q.shape[0],) + sizes)
    return {
        s: _decompose_tensor(T, k, s).reshape(Q.shape[0], -1) for s in subsets
    }


def decompose(q: np.ndarray, sizes: tuple[int, ...]) -> dict[tuple[int, ...], np.ndarray]:
    """Decompose one query vector ``q`` (length Π sizes, C order) into ``{A': q_{A'}}``.

    Keys are all subsets of positions ``0..k-1`` (sorted tuples, ``()`` included); values are
    1-d vectors over the cells of the marginal on ``A'`` (C order, length 1 for ``()``).
    """
    q = np.asarray(q, dtype=float)
    if q.ndim != 1:
        raise WorkloadError(f"q must be a 1-d query vector, got shape {q.shape}; use decompose_batch")
    return {s: v[0] for s, v in decompose_batch(q[None, :], sizes).items()}


def lift(piece: np.ndarray, sizes: tuple[int, ...], subset: tuple[int, ...]) -> np.ndarray:
    """Rewrite sub-queries over the marginal on ``subset`` as queries over the cells of ``sizes``.

    ``piece`` is (Π sizes[subset],) or (m, Π sizes[subset]).  The result answers the same query on
    the marginal on all attributes: ``lift(p) · x_A == p · x_{A'}`` (broadcast along dropped axes).
    """
    sizes = _check_sizes(sizes)
    sub = _check_subset(subset, len(sizes))
    P = np.asarray(piece, dtype=float)
    one = P.ndim == 1
    P = np.atleast_2d(P)
    kept = tuple(sizes[i] for i in sub)
    if P.shape[1] != int(np.prod(kept, dtype=np.int64)):
        raise WorkloadError(f"piece has {P.shape[1]} entries, expected {int(np.prod(kept))} for {sub}")
    shape = (P.shape[0],) + tuple(sizes[i] if i in sub else 1 for i in range(len(sizes)))
    out = np.broadcast_to(P.reshape(shape), (P.shape[0],) + sizes).reshape(P.shape[0], -1).copy()
    return out[0] if one else out


def marginalize(x: np.ndarray, sizes: tuple[int, ...], subset: tuple[int, ...]) -> np.ndarray:
    """Marginal ``x_{A'}`` of a table ``x`` over the cells of ``sizes`` (sum over dropped axes)."""
    sizes = _check_sizes(sizes)
    sub = _check_subset(subset, len(sizes))
    x = np.asarray(x, dtype=float).reshape(sizes)
    dropped = tuple(i for i in range(len(sizes)) if i not in sub)
    return (x.sum(axis=dropped) if dropped else x).reshape(-1)
