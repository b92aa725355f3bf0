"""Sparse products with infinite entries (variances of unmeasured sets are +inf)."""

from __future__ import annotations

import numpy as np

__all__ = ["spmv_inf"]


def spmv_inf(m, x: np.ndarray) -> np.ndarray:
    """Sparse matrix-vector product where infinite entries of x propagate only through nonzeros."""
    inf = ~np.isfinite(x)
    out = np.asarray(m @ np.where(inf, 0.0, x)).ravel()
    if inf.any():
        hits = np.asarray(m[:, np.flatnonzero(inf)].sum(axis=1)).ravel() > 0
        out[hits] = np.inf
    return out
