"""Marginal budgets of a level-strategy plan for its joint GLS (weighted sum of the variances).

The closed-form budgets of :mod:`.hierarchical` (cube-root rule on the per-marginal factors) are
optimal when each marginal is estimated from its own groups. The joint GLS (:mod:`.joint_levels`)
reads a marginal's answers from every marginal that shares attributes with it, so a 1-way
marginal inside a measured 2-way one, for instance, may need no budget of its own.

Continuous model (noise ``2/ε_{A,ℓ}²``, level shares fixed): the covariance of the ``K``-table
is ``2 Σ_{S⊆K} C_S/(C_K² δ_S) ⊗_{i∈S} P_i ⊗_{i∈K∖S} t_i t_iᵀ`` (``δ_S = Σ_{A⊇S} ε_A²/C_A``;
notation of :mod:`.joint_levels`), so the weighted sum of the variances of all the product
queries ``⊗ R_i`` of the workload is

    f(ε) = Σ_S a_S / δ_S(ε),   a_S = 2 C_S Σ_{K⊇S} (w_K / C_K²) Π_{i∈S} tr(R_i P_i R_iᵀ) Π_{i∈K∖S} ‖R_i t_i‖²,

homogeneous of degree -2 in ``ε``. As for the level shares (:mod:`.levels`), the scale-free
``F(ε) = f(ε) (Σ_A ε_A)²`` is minimized by L-BFGS-B with its analytic gradient
(``∂f/∂ε_A = -(2ε_A/C_A) Σ_{S⊆A} a_S/δ_S²``) from the closed-form split, and budgets below 10⁻³
of the largest are dropped when that does not increase ``F``. The caller keeps this split only if
the plan's exact objective (discrete Laplace variances) is smaller than with the closed form.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from math import prod

import numpy as np
import scipy.optimize
import scipy.sparse

from .joint_levels import AttributeBasis
from .query_rows import as_query_rows, quad_diag

__all__ = ["JointSumObjective"]

AttrSet = tuple[int, ...]


def _subsets(a: AttrSet):
    for k in range(len(a) + 1):
        yield from itertools.combinations(a, k)


class JointSumObjective:
    """``F(ε) = f(ε) (Σ ε)²`` of the module docstring for a fixed set of level strategies.

    Parameters
    ----------
    sets : sequence of tuple of int
        The workload marginals (sorted attribute positions).
    weights : sequence of float
        Their weights ``w_K``.
    rows : sequence of sequence of numpy.ndarray or query rows
        ``rows[j][k]``: the queries ``R_i`` of the ``k``-th attribute of marginal ``j``
        (a matrix, or :mod:`.query_rows`).
    bases : mapping of int to AttributeBasis
        Each attribute's ``t``, ``c``, ``P``.
    budgeted : sequence of bool
        Which marginals may receive a budget (the others stay at 0).

    Examples
    --------
    >>> from dpmatrix.planners._pure.levels import AttributeLevels
    >>> b = {0: AttributeBasis.of(AttributeLevels(2, "cells", 0, (1.0,), 2.0))}
    >>> obj = JointSumObjective([(0,)], [1.0], [[np.eye(2)]], b, [True])
    >>> round(obj.value(np.array([1.0])), 9)     # two cells, each 2/ε²
    4.0
    """

    def __init__(self, sets: Sequence[AttrSet], weights, rows, bases: Mapping[int, AttributeBasis], budgeted):
        self.sets = [tuple(s) for s in sets]
        self.budgeted = np.asarray(budgeted, dtype=bool)
        c = {i: b.c for i, b in bases.items()}
        terms: dict[AttrSet, float] = {}
        for s, w, rs in zip(self.sets, weights, rows):
            if w <= 0:
                continue
            rs = [as_query_rows(r) for r in rs]  # intervals: prefix-sum forms, no m × n matrix
            pi = [float(np.sum(quad_diag(r, bases[i].p))) for i, r in zip(s, rs)]
            th = [float(np.sum(r.apply(bases[i].t[:, None]) ** 2)) for i, r in zip(s, rs)]
            ck = prod(c[i] for i in s)
            for sub in _subsets(s):
                val = 2.0 * prod(c[i] for i in sub) * float(w) / ck**2
                val *= prod(pi[k] if i in sub else th[k] for k, i in enumerate(s))
                terms[sub] = terms.get(sub, 0.0) + val
        self.subsets = list(terms)
        self.a = np.array([terms[x] for x in self.subsets])
        pos = {x: n for n, x in enumerate(self.subsets)}
        ri, ci, val = [], [], []
        for j, s in enumerate(self.sets):
            if not self.budgeted[j]:
                continue
            inv_c = 1.0 / prod(c[i] for i in s)
            for sub in _subsets(s):
                if sub in pos:
                    ri.append(pos[sub])
                    ci.append(j)
                    val.append(inv_c)
        self.m = scipy.sparse.csr_matrix((val, (ri, ci)), shape=(len(self.subsets), len(self.sets)))

    def value_grad(self, eps: np.ndarray) -> tuple[float, np.ndarray]:
        """``F(ε)`` and its gradient (``inf`` if some needed subset has no precision)."""
        eps = np.where(self.budgeted, np.asarray(eps, dtype=float), 0.0)
        delta = self.m @ (eps * eps)
        if np.any((delta <= 0) & (self.a > 0)):
            return np.inf, np.zeros(eps.size)
        live = self.a > 0
        ratio = np.zeros_like(self.a)
        ratio[live] = self.a[live] / delta[live]
        f = float(ratio.sum())
        s = float(eps.sum())
        df = -2.0 * eps * (self.m.T @ np.where(live, ratio / np.where(live, delta, 1.0), 0.0))
        return f * s * s, np.where(self.budgeted, df * s * s + 2.0 * f * s, 0.0)

    def value(self, eps: np.ndarray) -> float:
        return self.value_grad(eps)[0]

    def minimize(self, start: np.ndarray) -> np.ndarray:
        """A split ``ε`` (same total as ``start``) with ``F`` no larger than at ``start``."""
        start = np.where(self.budgeted, np.asarray(start, dtype=float), 0.0)
        total = float(start.sum())
        x0 = start / total
        best = (x0, self.value(x0))
        idx = np.flatnonzero(self.budgeted)
        if idx.size > 1 and np.isfinite(best[1]):

            def f(z):
                x = np.zeros(len(self.sets))
                x[idx] = z
                v, g = self.value_grad(x)
                return (v, g[idx]) if np.isfinite(v) else (1e300, np.zeros(idx.size))

            r = scipy.optimize.minimize(f, x0[idx], jac=True, method="L-BFGS-B",
                                        bounds=[(1e-9, None)] * idx.size, options={"maxiter": 500})
            x = np.zeros(len(self.sets))
            x[idx] = np.abs(r.x)
            x /= x.sum()
            v = self.value(x)
            if v < best[1]:
                best = (x, v)
            x, v = best
            cut = np.where(x < 1e-3 * x.max(), 0.0, x)
            cut /= cut.sum()
            vc = self.value(cut)
            if vc <= v * (1 + 1e-9):
                best = (cut, vc)
        return best[0] * total
