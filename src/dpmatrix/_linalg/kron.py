"""Kronecker-structured linear algebra: products applied axis by axis, never expanded."""

from __future__ import annotations

import math

import numpy as np

from .structured import AxisOperator, Identity, StructuredMatrix

__all__ = ["is_identity", "kron_apply"]


def is_identity(S: np.ndarray) -> bool:
    """True when ``S`` is (numerically, to 1e-12) the square identity matrix — the one test of
    "ResidualPlanner's plain-marginal factors" used everywhere (a structured
    :class:`~dpmatrix._linalg.structured.Identity` is answered without expanding it)."""
    if isinstance(S, Identity):
        return True
    if isinstance(S, StructuredMatrix):
        return False
    S = np.asarray(S)
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        return False
    n = S.shape[0]
    if not np.all(np.abs(np.diagonal(S) - 1.0) <= 1e-12):
        return False
    if np.count_nonzero(S) == n:  # exactly diagonal: no n x n temporary (large attributes)
        return True
    block = max(1, (1 << 22) // max(n, 1))  # rows per block: about 32 MB of temporaries
    for start in range(0, n, block):
        rows = np.array(S[start : start + block], dtype=float)
        idx = np.arange(start, min(start + block, n))
        rows[idx - start, idx] -= 1.0
        if not np.all(np.abs(rows) <= 1e-12):
            return False
    return True


def kron_apply(mats: tuple[np.ndarray, ...], tensor: np.ndarray) -> np.ndarray:
    """``(⊗_i mats[i]) vec(tensor)`` without expanding the Kronecker product.

    ``tensor`` has one axis per factor, in order, optionally after leading batch axes; factor
    ``i`` acts on axis ``i`` of the trailing ``len(mats)`` axes (C-order vectorization).
    Each factor is one broadcast matrix product on a reshaped view,
    ``(pre, n, post) -> (pre, r, post)``, so batches of equal-shape tensors (stacked along the
    leading axes) cost one call per factor. A factor that is an
    :class:`~dpmatrix._linalg.structured.AxisOperator` (a structured matrix of a plain attribute)
    multiplies along its axis itself, in O(n) per fibre; it is never expanded.
    """
    k = len(mats)
    out = np.asarray(tensor)
    lead = out.ndim - k
    for i, m in enumerate(mats):
        ax = lead + i
        if isinstance(m, AxisOperator):
            out = m.apply(out, ax)
            continue
        shape = out.shape
        n = shape[ax]
        pre = math.prod(shape[:ax])
        post = math.prod(shape[ax + 1 :])
        # one small product per leading index (no single large GEMM): each tensor of a batch is
        # transformed exactly as it would be alone, so batched and one-by-one results agree
        res = np.matmul(m, out.reshape(pre, n, post))
        out = res.reshape(shape[:ax] + (m.shape[0],) + shape[ax + 1 :])
    return out
