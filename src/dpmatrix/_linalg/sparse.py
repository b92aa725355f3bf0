"""Sparse products with infinite entries (variances of unmeasured sets are +inf)."""

from __future__ import annotations

import numpy as np

__all__ = ["csr_rmatvec", "csr_spmv_inf", "spmv_inf"]


def spmv_inf(m, x: np.ndarray) -> np.ndarray:
    """Sparse matrix-vector product where infinite entries of x propagate only through nonzeros."""
    inf = ~np.isfinite(x)
    out = np.asarray(m @ np.where(inf, 0.0, x)).ravel()
    if inf.any():
        hits = np.asarray(m[:, np.flatnonzero(inf)].sum(axis=1)).ravel() > 0
        out[hits] = np.inf
    return out


def csr_spmv_inf(csr: tuple, x: np.ndarray) -> np.ndarray:
    """:func:`spmv_inf` of a CSR matrix given as ``(data, indices, indptr, shape)``, in NumPy
    alone (no SciPy to import): each row's products summed in storage order, as SciPy's CSR
    product sums them; a row with a positive sum of coefficients on infinite entries of ``x``
    is ``inf``."""
    data, indices, indptr, shape = csr
    rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
    inf = ~np.isfinite(x)
    out = np.bincount(rows, weights=data * np.where(inf, 0.0, x)[indices], minlength=shape[0])
    if inf.any():
        hits = np.bincount(rows, weights=np.where(inf[indices], data, 0.0), minlength=shape[0]) > 0
        out[hits] = np.inf
    return out


def csr_rmatvec(csr: tuple, w: np.ndarray) -> np.ndarray:
    """``Aᵀ w`` of a CSR matrix given as ``(data, indices, indptr, shape)``, in NumPy alone: the
    entries added in storage order, as SciPy's product with the transpose adds them."""
    data, indices, indptr, shape = csr
    rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
    return np.bincount(indices, weights=data * np.asarray(w, dtype=float)[rows], minlength=shape[1])
