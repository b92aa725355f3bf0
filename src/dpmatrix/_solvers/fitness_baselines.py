r"""Baseline strategies of the fitness-for-use experiments (paper §7, Tables 4–11).

Each baseline is a fixed Gaussian strategy: a Gram matrix ``X = AᵀA`` (measure ``A x + N(0, I)``,
answer by least squares).  Its privacy cost is ``max diag X`` and query j's variance is
``w_j X⁺ w_jᵀ``.  Scaling the noise until the binding target is met gives the Problem-1 privacy
cost the strategy needs::

    Δ²_needed(X) = max_i X_ii · max_j w_j X⁺ w_jᵀ / c_j.

At the optimal (SM-II) cost Δ²_opt the strategy's largest variance/target ratio is
``Δ²_needed / Δ²_opt`` — the number in the paper's tables (equal costs, §7 first paragraph).

Baselines (paper §7):

* IP — input perturbation, ``X = I``.
* HM — hierarchical tree over the (flattened) domain, branching factor b (Hay et al. 2010,
  Qardaji et al. 2013), every node measured with the same noise.  The paper says "optimal
  branching factor" without the value; :func:`hierarchical_gram` takes b, and
  :func:`baseline_costs` reports the best b in 2..16 (``"HM"``) — the best case for HM.
* CA — the Gaussian matrix-mechanism optimum ``min Σ_j w_j X⁺ w_jᵀ`` s.t. ``diag X ≤ 1``
  (Yuan et al. 2016, the convex (ε, δ) formulation), solved with a certificate by
  :func:`dpmatrix._solvers.fitness.solve_weighted_sum`.  It is *not* in general
  ``(WᵀW)^{1/2}`` (that is the optimum only when its diagonal is constant).
* wCA-I / wCA-II — CA on the workload with query row j multiplied by ``1/c_j`` / ``1/√c_j``
  (paper: "weights each query by the inverse of its target variance / of the square root"), i.e.
  the variance of query j weighted by ``1/c_j²`` / ``1/c_j``.  Reading "weight" as a row weight
  (the matrix-mechanism convention) is what reproduces the paper: on a Table-6 workload
  (d = 64, random ranges, targets uniform(1, 10)) it gives wCA-I 1.62 / wCA-II 1.92 against the
  paper's 1.62 / 1.98, while variance weights 1/c, 1/√c give 1.92 / 2.13.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dpmatrix._solvers.fitness import _as_targets, _as_workload, solve_weighted_sum
from dpmatrix.errors import PlanError

__all__ = [
    "required_privacy_cost",
    "identity_gram",
    "hierarchical_matrix",
    "hierarchical_gram",
    "sum_optimal_gram",
    "baseline_costs",
]


def required_privacy_cost(X, W, targets) -> float:
    r"""``max_i X_ii · max_j w_j X⁺ w_jᵀ / c_j``: the Δ² a fixed strategy needs to meet the targets.

    Parameters
    ----------
    X : array (n × n)
        Strategy Gram matrix ``AᵀA`` (PSD); its range must contain every query.
    W : array (m × n)
    targets : float or array (m)

    Returns
    -------
    float

    Examples
    --------
    >>> required_privacy_cost(np.eye(2), np.array([[1., 1.]]), 1.0)
    2.0
    """
    W = _as_workload(W)
    c = _as_targets(targets, W.shape[0])
    X = np.asarray(X, dtype=float)
    w, E = np.linalg.eigh(0.5 * (X + X.T))
    keep = w > w.max() * X.shape[0] * 1e-13
    R = W @ E[:, keep]
    if np.any(np.linalg.norm(W - R @ E[:, keep].T, axis=1) > 1e-8 * np.linalg.norm(W, axis=1)):
        raise PlanError("the strategy does not answer every query (a query is outside its range)")
    var = np.einsum("ij,j,ij->i", R, 1.0 / w[keep], R)
    return float(np.max(np.diag(X))) * float(np.max(var / c))


def identity_gram(n: int) -> np.ndarray:
    """IP: ``X = I`` (independent noise on every cell)."""
    return np.eye(int(n))


def hierarchical_matrix(n: int, branching: int = 2) -> np.ndarray:
    """The tree strategy ``H``: one row per node, the sum of a contiguous block of cells.

    The root covers all n cells; a node of size s > 1 has ``min(b, s)`` children of sizes
    differing by at most one; leaves are single cells (so H has full column rank).
    """
    n, b = int(n), int(branching)
    if n < 1 or b < 2:
        raise PlanError(f"need n ≥ 1 cells and branching ≥ 2, got n={n}, branching={b}")
    rows: list[tuple[int, int]] = []
    stack = [(0, n)]
    while stack:
        lo, hi = stack.pop()
        rows.append((lo, hi))
        size = hi - lo
        if size > 1:
            k = min(b, size)
            edges = lo + (np.arange(k + 1) * size) // k
            stack.extend((int(edges[i]), int(edges[i + 1])) for i in range(k))
    H = np.zeros((len(rows), n))
    for r, (lo, hi) in enumerate(rows):
        H[r, lo:hi] = 1.0
    return H


def hierarchical_gram(n: int, branching: int = 2) -> np.ndarray:
    """HM: ``X = HᵀH`` for :func:`hierarchical_matrix` (equal noise on every node)."""
    H = hierarchical_matrix(n, branching)
    return H.T @ H


def sum_optimal_gram(W, weights=None, *, tol: float = 1e-6) -> np.ndarray:
    """CA / wCA: the certified optimum of ``Σ_j weights_j · var_j`` (max diagonal 1).

    ``weights`` multiply the *variances*; wCA-I is ``1/c²`` and wCA-II ``1/c`` (row weights
    ``1/c`` and ``1/√c``).
    """
    res = solve_weighted_sum(W, weights, tol=tol)
    return np.asarray(res.gram)


def baseline_costs(
    W,
    targets,
    *,
    branchings: Sequence[int] = tuple(range(2, 17)),
    tol: float = 1e-6,
) -> dict[str, float]:
    r"""Problem-1 privacy cost needed by each baseline of paper §7.

    Parameters
    ----------
    W : array (m × n)
    targets : float or array (m)
    branchings : sequence of int, keyword-only
        Branching factors tried for HM (the best is reported as ``"HM"``, each as ``"HM-b"``).
    tol : float, keyword-only
        Certified gap for the CA solves.

    Returns
    -------
    dict
        ``{"IP", "HM", "HM-<b>"…, "CA", "wCA-I", "wCA-II"}`` → Δ² needed.  Divide by the
        Problem-1 optimum for the paper's "max variance ratio at equal privacy cost".

    Examples
    --------
    >>> sorted(baseline_costs(np.eye(2), 1.0, branchings=(2,)))
    ['CA', 'HM', 'HM-2', 'IP', 'wCA-I', 'wCA-II']
    """
    W = _as_workload(W)
    m, n = W.shape
    c = _as_targets(targets, m)
    out: dict[str, float] = {"IP": required_privacy_cost(identity_gram(n), W, c)}
    hm = {}
    for b in branchings:
        hm[f"HM-{b}"] = required_privacy_cost(hierarchical_gram(n, b), W, c)
    out["HM"] = min(hm.values())
    out.update(hm)
    out["CA"] = required_privacy_cost(sum_optimal_gram(W, None, tol=tol), W, c)
    if np.allclose(c, c[0]):
        out["wCA-I"] = out["wCA-II"] = out["CA"]
    else:
        out["wCA-I"] = required_privacy_cost(sum_optimal_gram(W, 1.0 / c**2, tol=tol), W, c)
        out["wCA-II"] = required_privacy_cost(sum_optimal_gram(W, 1.0 / c, tol=tol), W, c)
    return out
