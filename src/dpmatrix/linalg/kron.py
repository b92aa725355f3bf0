"""Kronecker-structured linear algebra: products applied axis by axis, never expanded."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["is_identity", "kron_apply"]


def is_identity(S: np.ndarray) -> bool:
    """True when ``S`` is (numerically, to 1e-12) the square identity matrix — the one test of
    "ResidualPlanner's plain-marginal factors" used everywhere."""
    S = np.asarray(S)
    return S.ndim == 2 and S.shape[0] == S.shape[1] and np.allclose(S, np.eye(S.shape[0]), rtol=0, atol=1e-12)


def kron_apply(mats: tuple[np.ndarray, ...], tensor: np.ndarray) -> np.ndarray:
    """``(⊗_i mats[i]) vec(tensor)`` without expanding the Kronecker product.

    ``tensor`` has one axis per factor, in order, optionally after leading batch axes; factor
    ``i`` acts on axis ``i`` of the trailing ``len(mats)`` axes (C-order vectorization).
    Each factor is one broadcast matrix product on a reshaped view,
    ``(pre, n, post) -> (pre, r, post)``, so batches of equal-shape tensors (stacked along the
    leading axes) cost one call per factor.
    """
    k = len(mats)
    out = np.asarray(tensor)
    lead = out.ndim - k
    for i, m in enumerate(mats):
        ax = lead + i
        shape = out.shape
        n = shape[ax]
        pre = math.prod(shape[:ax])
        post = math.prod(shape[ax + 1 :])
        # one small product per leading index (no single large GEMM): each tensor of a batch is
        # transformed exactly as it would be alone, so batched and one-by-one results agree
        res = np.matmul(m, out.reshape(pre, n, post))
        out = res.reshape(shape[:ax] + (m.shape[0],) + shape[ax + 1 :])
    return out
