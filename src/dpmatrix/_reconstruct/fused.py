"""A compiled kernel for three-way tables: one read of the noisy vector, one write of the table.

:mod:`dpmatrix._reconstruct.broadcast` writes a ``k``-way table as ``F_1 ⊕ … ⊕ F_k + (−1)^k P``:
``P`` is the noisy residual vector ``ω`` padded with a zero at index 0 of every axis, and the
face ``F_j`` (the table's axes without the ``j``-th) holds the lower-order residuals sent to it
plus ``coef_T · Σ_T P`` for every nonempty set ``T`` of axes whose first axis is ``j``
(``coef_T = (−1)^{k+|T|} / Π_{c∈T} n_c``; ResidualPlanner paper, Algorithm 2 / Theorem 4.4 with
Algorithm 4's bases, derivation in that module's docstring). With numpy this is a copy of ``ω``,
three sums along the axes, a dozen small face operations and ``k`` broadcast passes — numpy's short
inner loops make it about 2.3–2.6× the plain broadcast floor of
``benchmarks/bench_broadcast.py``. For ``k = 3`` this kernel does the same arithmetic per table
in one compiled loop (numba): it reads ``ω`` once, accumulating the three single-axis sums, takes
the smaller sums from those, completes the three faces and writes the table once.

The arithmetic is the same formula with a different order of floating-point additions, so the
results agree with the numpy path to rounding (the tests check both against each other and the
brute-force oracle). :mod:`.broadcast` uses one path per workload (:func:`use_for`), so every way
of asking for a table of one set of measurements (streamed in blocks, in batches or alone) gets
the same bits.

numba is imported on first use only (it costs ~0.3 s), and only for workloads with at least
:data:`MIN_CELLS` cells in three-way tables, where the kernel saves more than that; the compiled
kernel is cached on disk by numba (the first call of a new installation compiles it, ~2 s).
``DPMATRIX_FUSED=0`` in the environment turns the kernel off (the numpy path is always there).
"""

from __future__ import annotations

import os
import weakref
from functools import cache

import numpy as np

__all__ = ["MIN_CELLS", "available", "tables3", "use_for"]

#: three-way table cells of a workload from which the kernel is used: importing numba and loading
#: the cached kernel cost ~0.5 s once per process, the kernel saves ~3.5 ms per million cells, so
#: smaller workloads are faster with numpy alone (Synth-10^100, all ≤3-way: 161.7 M cells)
MIN_CELLS = 1 << 27

_DECIDED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@cache
def available() -> bool:
    """True when numba can be imported and ``DPMATRIX_FUSED`` is not ``0``."""
    if os.environ.get("DPMATRIX_FUSED", "1").strip() == "0":
        return False
    try:
        import numba  # noqa: F401
    except ImportError:  # pragma: no cover - numba is a dependency; an install without it falls back
        return False
    return True


def three_way_cells(workload) -> int:
    """Cells of the workload's three-way marginals."""
    group = workload._groups.get(3)
    if group is None:
        return 0
    sizes = np.asarray(workload.domain.sizes, dtype=np.int64)
    return int(np.prod(sizes[group[1]], axis=1).sum())


def use_for(workload) -> bool:
    """Whether the three-way tables of ``workload`` are made by :func:`tables3` (decided once per
    workload, so every table of one set of measurements comes from the same arithmetic)."""
    got = _DECIDED.get(workload)
    if got is None:
        cells = three_way_cells(workload)
        got = _DECIDED[workload] = 0 < cells and MIN_CELLS <= cells and available()
    return got


@cache
def _kernel():
    from numba import njit

    @njit(cache=True, nogil=True)
    def kernel(W, F0, F1, F2, c, out):  # pragma: no cover - compiled; checked against numpy
        m, r0, r1, r2 = W.shape
        n0, n1, n2 = r0 + 1, r1 + 1, r2 + 1
        s0 = np.zeros((n1, n2))  # Σ over axis 0 of P (zero at index 0 of the kept axes)
        s1 = np.zeros((n0, n2))
        s2 = np.zeros((n0, n1))
        g0 = np.empty((n1, n2))  # the completed faces of one table
        g1 = np.empty((n0, n2))
        g2 = np.empty((n0, n1))
        s01 = np.empty(n2)
        s02 = np.empty(n1)
        s12 = np.empty(n0)
        for t in range(m):
            s0[:, :] = 0.0
            s1[:, :] = 0.0
            for a in range(r0):  # one read of ω: the three single-axis sums
                for b in range(r1):
                    acc = 0.0
                    for e in range(r2):
                        w = W[t, a, b, e]
                        s0[b + 1, e + 1] += w
                        s1[a + 1, e + 1] += w
                        acc += w
                    s2[a + 1, b + 1] = acc
            for b in range(n1):
                s2[0, b] = 0.0
            for a in range(n0):
                s2[a, 0] = 0.0
            s01[:] = 0.0
            s012 = 0.0
            for b in range(n1):
                acc = 0.0
                for e in range(n2):
                    s01[e] += s0[b, e]
                    acc += s0[b, e]
                s02[b] = acc
            for e in range(n2):
                s012 += s01[e]
            for a in range(n0):
                acc = 0.0
                for e in range(n2):
                    acc += s1[a, e]
                s12[a] = acc
            # faces: T = (0), (1), (2), (0,1), (0,2), (1,2), (0,1,2) -> coefficients c[0..6]
            for b in range(n1):
                for e in range(n2):
                    g0[b, e] = F0[t, 0, b, e] + c[0] * s0[b, e] + c[3] * s01[e] + c[4] * s02[b] + c[6] * s012
            for a in range(n0):
                for e in range(n2):
                    g1[a, e] = F1[t, a, 0, e] + c[1] * s1[a, e] + c[5] * s12[a]
            for a in range(n0):
                for b in range(n1):
                    g2[a, b] = F2[t, a, b, 0] + c[2] * s2[a, b]
            # one write of the table: F_0 ⊕ F_1 ⊕ F_2 − P (k = 3 is odd)
            for a in range(n0):
                for b in range(n1):
                    h = g2[a, b]
                    if a == 0 or b == 0:
                        for e in range(n2):
                            out[t, a, b, e] = g0[b, e] + g1[a, e] + h
                    else:
                        out[t, a, b, 0] = g0[b, 0] + g1[a, 0] + h
                        for e in range(1, n2):
                            out[t, a, b, e] = g0[b, e] + g1[a, e] + h - W[t, a - 1, b - 1, e - 1]

    return kernel


def tables3(omega: np.ndarray, faces: list[np.ndarray], coefs: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Three-way tables ``F_0 ⊕ F_1 ⊕ F_2 − P`` of a chunk, into ``out``.

    Parameters
    ----------
    omega : numpy.ndarray
        ``(m, n0−1, n1−1, n2−1)`` noisy residual vectors (read only).
    faces : list of numpy.ndarray
        The lower-order parts of the three faces, shaped ``(m, 1, n1, n2)``, ``(m, n0, 1, n2)``
        and ``(m, n0, n1, 1)`` (read only: the own-part sums are added in the kernel).
    coefs : numpy.ndarray
        ``coef_T`` for ``T`` = (0), (1), (2), (0,1), (0,2), (1,2), (0,1,2).
    out : numpy.ndarray
        ``(m, n0, n1, n2)`` output.

    Returns
    -------
    numpy.ndarray
        ``out``.

    Examples
    --------
    >>> import numpy as np
    >>> n = 3
    >>> w = np.arange(8.0).reshape(1, 2, 2, 2)
    >>> faces = [np.zeros((1, 1, n, n)), np.zeros((1, n, 1, n)), np.zeros((1, n, n, 1))]
    >>> coefs = np.array([1 / n] * 3 + [-1 / n**2] * 3 + [1 / n**3])  # (−1)^(3+|T|) / Π n
    >>> t = tables3(w, faces, coefs, np.empty((1, n, n, n)))
    >>> bool(np.allclose(t.sum(axis=1), 0.0))  # an expanded residual sums to zero along each axis
    True
    """
    _kernel()(omega, faces[0], faces[1], faces[2], coefs, out)
    return out
