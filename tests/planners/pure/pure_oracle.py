"""Brute-force oracle for the pure ε-DP planner (Cormode et al., datacubes). Never imports dpmatrix.

Explicit dense matrices on tiny domains, built from the definitions:

* the data vector ``x`` is the full table in C order (attribute 0 slowest), as in tests/oracle.py;
* ``marginal_matrix(sizes, A)``: ``⊗_i (I if i ∈ A else 1ᵀ)``;
* ``residual_matrix(sizes, A)``: ``⊗_i (D_{n_i} if i ∈ A else 1ᵀ)`` with ``D_n`` the rows
  ``e_j - e_k`` (``j < k``); for binary attributes, the Hadamard rows ``(-1)^{<α,β>}``;
* privacy of a strategy whose row ``r`` gets budget ``ε_r``: ``max_j Σ_r ε_r |S_rj|``;
* GLS: ``Cov(Q x̂) = Q (Sᵀ Σ⁻¹ S)⁺ Qᵀ``, ``x̂ = (Sᵀ Σ⁻¹ S)⁺ Sᵀ Σ⁻¹ y``.
"""

from __future__ import annotations

import itertools
import math
from functools import reduce

import numpy as np


def kron_all(mats):
    return reduce(np.kron, mats, np.ones((1, 1)))


def diffs(n):
    rows = []
    for j, k in itertools.combinations(range(n), 2):
        r = np.zeros(n)
        r[j], r[k] = 1, -1
        rows.append(r)
    return np.array(rows).reshape(-1, n)


def marginal_matrix(sizes, attrs):
    return kron_all([np.eye(n) if i in attrs else np.ones((1, n)) for i, n in enumerate(sizes)])


def residual_matrix(sizes, attrs):
    return kron_all([diffs(n) if i in attrs else np.ones((1, n)) for i, n in enumerate(sizes)])


def hadamard_row(d, alpha):
    """Fourier vector f^α on {0,1}^d without the 2^{-d/2} factor: (-1)^{<α, β>}."""
    return np.array([(-1) ** sum(a * b for a, b in zip(alpha, beta))
                     for beta in itertools.product((0, 1), repeat=d)], dtype=float)


def privacy(blocks, budgets):
    """max over columns of Σ_g ε_g |S_g| (explicit definition)."""
    s = np.vstack([e * np.abs(b) for b, e in zip(blocks, budgets)])
    return float(s.sum(axis=0).max())


def gls_cov(blocks, noise_var, q):
    s = np.vstack(blocks)
    sig_inv = np.concatenate([np.full(b.shape[0], 1.0 / v) for b, v in zip(blocks, noise_var)])
    g = s.T @ (sig_inv[:, None] * s)
    gp = np.linalg.pinv(g)
    return q @ gp @ q.T


def gls_estimate(blocks, noise_var, y, q):
    s = np.vstack(blocks)
    sig_inv = np.concatenate([np.full(b.shape[0], 1.0 / v) for b, v in zip(blocks, noise_var)])
    g = s.T @ (sig_inv[:, None] * s)
    return q @ np.linalg.pinv(g) @ (s.T @ (sig_inv * np.concatenate(y)))


def in_row_space(s, q, tol=1e-8):
    p = np.linalg.pinv(s) @ s
    return np.allclose(q @ p, q, atol=tol)


def dlap_var(eps):
    """Discrete Laplace variance from the pmf by direct summation."""
    y = np.arange(-4000, 4001)
    p = np.exp(-eps * np.abs(y))
    p /= p.sum()
    return float((p * y * y).sum())


# -- level strategies of one attribute, written out by hand -------------------------------------


def tree_levels_by_hand(n: int, b: int) -> list[np.ndarray]:
    """Level ℓ: blocks of b^(L-ℓ) consecutive cells, L = ⌈log_b n⌉ (0 = total, L = cells)."""
    depth = math.ceil(math.log(n, b) - 1e-12) if n > 1 else 0
    out = []
    for lev in range(depth + 1):
        width = b ** (depth - lev)
        blocks = [list(range(s, min(s + width, n))) for s in range(0, n, width)]
        h = np.zeros((len(blocks), n))
        for r, blk in enumerate(blocks):
            h[r, blk] = 1
        out.append(h)
    return out


def haar_levels_by_hand(n: int) -> list[np.ndarray]:
    """Haar wavelets by recursion: the total, then for an interval [lo, hi) of ≥ 2 cells the row
    +1 on [lo, mid), -1 on [mid, hi), mid = lo + ⌊(hi-lo)/2⌋, at depth d (level d + 1)."""
    rows = {0: [np.ones(n)]}

    def split(lo, hi, d):
        if hi - lo < 2:
            return
        mid = lo + (hi - lo) // 2
        r = np.zeros(n)
        r[lo:mid], r[mid:hi] = 1, -1
        rows.setdefault(d + 1, []).append(r)
        split(lo, mid, d + 1)
        split(mid, hi, d + 1)

    split(0, n, 0)
    return [np.array(rows[k]) for k in sorted(rows)]


def levels_by_hand(t) -> list[np.ndarray]:
    """The level rows of an attribute's level strategy ``t`` (``t.kind``: cells, tree or Haar;
    ``t.n``; ``t.branching``), from the definitions above."""
    if t.kind == "cells":
        return [np.eye(t.n)]
    if t.kind == "tree":
        return tree_levels_by_hand(t.n, t.branching)
    return haar_levels_by_hand(t.n)


def assert_mean_and_variance(errs: np.ndarray, variance: np.ndarray, k: float = 5.0) -> None:
    """Simulated errors (one row per run) have mean 0 and the given per-entry variance, each
    within ``k`` standard errors (of the mean; of the sample variance, from the fourth moment)."""
    reps = errs.shape[0]
    assert np.all(np.abs(errs.mean(axis=0)) < k * np.sqrt(variance / reps))
    s2 = errs.var(axis=0)
    m4 = ((errs - errs.mean(axis=0)) ** 4).mean(axis=0)
    assert np.all(np.abs(s2 - variance) < k * np.sqrt((m4 - s2**2) / reps))
