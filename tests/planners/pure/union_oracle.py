"""Explicit dense rebuilds of a union-of-products plan (small domains only), independent of the
plan's own linear algebra: the stacked integer strategy on the union's cells with its exact row
budgets, and the variances of the GLS estimator with continuous-model weights ``ε_r²/2`` under
either noise (``2/ε_r²``, or the exact discrete Laplace ``2e^{-ε}/(1-e^{-ε})²``)."""

from fractions import Fraction
from functools import reduce

import numpy as np
import pure_oracle as po


def stacked(p):
    """``(S, budgets)``: every released row on the cells of the union (C order), measured rows only."""
    if hasattr(p, "strategy_matrix"):  # the dense plan (an attribute carries two factors)
        s = p.strategy_matrix.astype(np.int64)
        return s, list(p.budgets)
    shape = tuple(f.n for f in p.factors)
    blocks, budgets = [], []
    for prod, scale in zip(p.products, p.scales):
        if scale == 0:
            continue
        axes = tuple(p.attrs.index(a) for a in prod)
        mats, bs = [], [scale]
        for ax in axes:
            f = p.factors[ax]
            mats.append(np.vstack([np.eye(f.n, dtype=np.int64), np.asarray(f.agg, dtype=np.int64)]))
            bs = [x * y for x in bs for y in f.budgets]
        rows = reduce(np.kron, mats, np.ones((1, 1), dtype=np.int64))
        blocks.append(rows @ po.marginal_matrix(shape, axes).astype(np.int64))
        budgets += bs
    return np.vstack(blocks), budgets


def exact_epsilon(s, budgets) -> Fraction:
    """Max column L1 norm of the budget-scaled strategy, in exact rationals (every column)."""
    live = [r for r, b in enumerate(budgets) if b > 0]
    return max(sum((abs(int(s[r, j])) * budgets[r] for r in live), Fraction(0)) for j in range(s.shape[1]))


def dlap(e):
    return 2 * np.exp(-e) / (-np.expm1(-e)) ** 2


def estimator_variances(s, budgets, q, model):
    """Variances of the rows of ``q`` estimated by ``q G Sᵀ Ω y`` with ``Ω = diag(ε_r²/2)`` and ``G``
    the pseudo-inverse of ``SᵀΩS`` on its non-null eigenspace (the BLUE coefficient is unique for
    estimable queries): ``Σ_r D_r c_r²``."""
    e = np.array([float(b) for b in budgets])
    s = s.astype(float)
    w = e**2 / 2
    g = s.T @ (s * w[:, None])
    lam, v = np.linalg.eigh(g)
    keep = lam > 1e-10 * lam.max()
    coef = (q @ v[:, keep] / lam[keep]) @ v[:, keep].T @ s.T * w
    d = 2.0 / e**2 if model == "continuous" else dlap(e)
    return (coef**2) @ d


def blue_variances(s, budgets, q, model):
    """Variances of the GLS with the released noise's own precision ``1/D_r`` (the best linear
    unbiased estimator under that noise)."""
    e = np.array([float(b) for b in budgets])
    d = 2.0 / e**2 if model == "continuous" else dlap(e)
    s = s.astype(float)
    g = s.T @ (s / d[:, None])
    lam, v = np.linalg.eigh(g)
    keep = lam > 1e-10 * lam.max()
    qv = q @ v[:, keep]
    return np.einsum("ij,j,ij->i", qv, 1.0 / lam[keep], qv)
