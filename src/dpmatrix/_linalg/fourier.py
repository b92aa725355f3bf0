r"""Weighted Fourier factorization (WFF) on one residual space (QuerySmasher appendix C, [15]).

The residual space of an attribute set with sizes ``(n_1, ..., n_k)`` is spanned by the
multidimensional Fourier vectors ``e_f(x) = exp(2πi f·x / n) / sqrt(N)`` (``N = Π n_j``) whose
frequencies have *every* component non-zero.  WFF adds independent noise of variance ``h_f`` to
each Fourier coefficient ``⟨x, e_f⟩`` (real and imaginary parts ``h_f / 2`` each, conjugate
frequencies tied: ``h_f = h_{-f}``).  Then, for a sub-workload with weighted Gram ``G``,

* privacy cost  ``Σ_f 1 / (N h_f)``  (constant diagonal: ``|e_f(x)|² = 1/N`` for every cell x);
* weighted sum of variances ``Σ_f γ_f h_f`` with ``γ_f = e_fᴴ G e_f``.

Minimizing at privacy cost 1 gives the closed form ``h_f = S / sqrt(N γ_f)``,
``loss = S²``, ``S = Σ_f sqrt(γ_f / N)`` (frequencies with ``γ_f = 0`` are not measured).  For a
circulant (circular-shift-invariant) sub-workload this is the optimum of eq. 4: the uniform dual
certificate ``w = 1/N`` attains it.

For a Kronecker Gram ``G = ⊗ G_j``, ``γ = ⊗ γ_j`` (1-d transforms only).  Nothing of size N² is
formed unless the Gram itself is dense.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["gamma_1d", "gamma_dense", "gamma_rows", "wff_noise"]


def gamma_dense(G: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """``γ_f = e_fᴴ G e_f`` for every frequency, shaped ``sizes`` (G is N × N, C order)."""
    sizes = tuple(int(s) for s in sizes)
    k = len(sizes)
    if k == 0:
        return np.asarray(G, dtype=float).reshape(())
    T = np.asarray(G, dtype=float).reshape(sizes + sizes)
    A = np.fft.fftn(T, axes=tuple(range(k)), norm="ortho")
    A = np.fft.ifftn(A, axes=tuple(range(k, 2 * k)), norm="ortho")
    N = math.prod(sizes)
    diag = A.reshape(N, N)[np.arange(N), np.arange(N)].real
    g = diag.reshape(sizes)
    return _symmetrize(np.maximum(g, 0.0))


def gamma_1d(G: np.ndarray) -> np.ndarray:
    """``γ`` of a single-attribute Gram matrix (length n)."""
    G = np.asarray(G, dtype=float)
    return gamma_dense(G, (G.shape[0],))


def gamma_rows(P: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """``|⟨q, e_f⟩|²`` for each row q of P (m × N): shape ``(m, *sizes)``."""
    sizes = tuple(int(s) for s in sizes)
    P = np.asarray(P, dtype=float).reshape((-1,) + sizes)
    if not sizes:
        return P**2
    F = np.fft.fftn(P, axes=tuple(range(1, len(sizes) + 1)), norm="ortho")
    return F.real**2 + F.imag**2


def _symmetrize(g: np.ndarray) -> np.ndarray:
    """Average γ with its reflection f → −f (exact for real G up to rounding)."""
    if g.ndim == 0:
        return g
    ref = g
    for ax in range(g.ndim):
        ref = np.roll(np.flip(ref, axis=ax), 1, axis=ax)
    return (g + ref) / 2


def residual_mask(sizes: Sequence[int]) -> np.ndarray:
    """Boolean tensor: frequencies with every component non-zero (the residual space)."""
    sizes = tuple(int(s) for s in sizes)
    m = np.ones(sizes, dtype=bool)
    for ax, n in enumerate(sizes):
        idx = [slice(None)] * len(sizes)
        idx[ax] = 0
        m[tuple(idx)] = False
    return m


def wff_noise(gamma: np.ndarray, rtol: float = 1e-12) -> tuple[np.ndarray, float]:
    """Optimal per-frequency noise ``h`` (inf where not measured) and the loss at privacy cost 1."""
    g = np.asarray(gamma, dtype=float)
    sizes = g.shape
    N = math.prod(sizes) if sizes else 1
    mask = residual_mask(sizes) if sizes else np.ones((), dtype=bool)
    gmax = float(g.max()) if g.size else 0.0
    use = mask & (g > rtol * max(gmax, 1e-300))
    S = float(np.sqrt(np.where(use, g, 0.0) / N).sum())
    h = np.full(sizes, np.inf)
    if S > 0:
        h[use] = S / np.sqrt(N * g[use])
    return h, S * S
