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
