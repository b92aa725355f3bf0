"""Classic strategy matrices and the exact error of any explicit strategy for a workload.

Li & Miklau, *Efficient Batch Query Answering Under Differential Privacy*, §2.3 (Prop. 2.4) and
Fig. 4; the strategies are the ones the paper compares with: the identity, the workload itself,
hierarchical trees (Hay et al.), the Haar wavelet (Xiao et al.), the Fourier basis (Barak et al.)
and the eigen-based "quarter root" ``(WᵀW)^{1/4}`` (the strategy the singular value bound's proof
constructs: ``AᵀA = (WᵀW)^{1/2}``, App. D.1, eq. 20).

Error of a strategy (Gaussian, dpmatrix units)
----------------------------------------------
Measuring ``Ax + N(0, σ²I)`` costs ``pcost = ‖A‖²_{1→2}/σ²`` (``‖A‖_{1→2}`` the largest column norm,
the largest diagonal of ``AᵀA``), so at a given ``pcost`` the noise is ``σ² = ‖A‖²_{1→2}/pcost``
and the least-squares answer to query ``q`` (a row of ``W`` in the row space of ``A``) has variance
``σ² q (AᵀA)⁺ qᵀ``. The total is ``σ² tr(WᵀW (AᵀA)⁺)``, the paper's Prop. 2.4 with
``P(ε,δ) = 1/pcost``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from ..errors import PlanError, WorkloadError

__all__ = [
    "StrategyProfile",
    "STRATEGIES",
    "evaluate",
    "fourier",
    "haar",
    "hierarchical",
    "identity",
    "kron",
    "quarter_root",
    "classic_strategy",
]


# -- classic strategies ------------------------------------------------------------------------
def _n(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise WorkloadError(f"domain size must be a positive integer, got {n!r}")
    return int(n)


def identity(n: int) -> np.ndarray:
    """The cells themselves: ``I_n``."""
    return np.eye(_n(n))


def _split(lo: int, hi: int, b: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` cut into ``min(b, hi − lo)`` contiguous parts of near-equal size."""
    k = min(b, hi - lo)
    edges = [lo + (hi - lo) * j // k for j in range(k + 1)]
    return [(edges[j], edges[j + 1]) for j in range(k)]


def hierarchical(n: int, branching: int = 2) -> np.ndarray:
    """The hierarchical strategy (Hay et al.; paper Fig. 4 ``H``): one 0/1 row per node of a
    ``branching``-ary tree over ``[0, n)``, root (the total) first, leaves (the cells) last; a node
    covering ``L`` cells has ``min(branching, L)`` children of near-equal size."""
    n = _n(n)
    if isinstance(branching, bool) or not isinstance(branching, (int, np.integer)) or branching < 2:
        raise WorkloadError(f"branching must be an integer ≥ 2, got {branching!r}")
    rows, level = [], [(0, n)]
    while level:
        nxt = []
        for lo, hi in level:
            r = np.zeros(n)
            r[lo:hi] = 1.0
            rows.append(r)
            if hi - lo > 1:
                nxt.extend(_split(lo, hi, int(branching)))
        level = nxt
    return np.array(rows)


def haar(n: int) -> np.ndarray:
    """The Haar wavelet strategy (Xiao et al.; paper Fig. 4 ``Y``): the total, then for every
    node of the binary tree over ``[0, n)`` with at least two cells ``+1`` on its left half and
    ``−1`` on its right half (``n`` rows; for ``n`` not a power of two the halves differ by one)."""
    n = _n(n)
    rows = [np.ones(n)]
    level = [(0, n)]
    while level:
        nxt = []
        for lo, hi in level:
            if hi - lo < 2:
                continue
            (a, m), (_, b) = _split(lo, hi, 2)
            r = np.zeros(n)
            r[a:m] = 1.0
            r[m:b] = -1.0
            rows.append(r)
            nxt.extend([(a, m), (m, b)])
        level = nxt
    return np.array(rows)


def fourier(n: int, workload: np.ndarray | None = None, *, tol: float = 1e-9) -> np.ndarray:
    """Real orthonormal Fourier basis of ``Rⁿ`` (cosines and sines of every frequency). With a
    ``workload``, only the basis vectors the workload has a non-zero coefficient on are kept
    (Barak et al.'s idea: measure just the Fourier coefficients the queries need)."""
    n = _n(n)
    rows = [np.ones(n) / math.sqrt(n)]
    t = np.arange(n)
    for k in range(1, n // 2 + 1):
        c = np.cos(2 * np.pi * k * t / n)
        rows.append(c / np.linalg.norm(c))
        if 2 * k != n:
            s = np.sin(2 * np.pi * k * t / n)
            rows.append(s / np.linalg.norm(s))
    B = np.array(rows)
    if workload is None:
        return B
    W = np.asarray(workload, dtype=float)
    if W.ndim != 2 or W.shape[1] != n:
        raise WorkloadError(f"the workload must have {n} columns, got shape {W.shape}")
    coef = W @ B.T
    keep = np.max(np.abs(coef), axis=0) > tol * max(1.0, float(np.max(np.abs(coef))))
    return B[keep]


def quarter_root(W: np.ndarray, *, gram: bool = False) -> np.ndarray:
    """The eigen-based strategy ``A = (WᵀW)^{1/4}`` (so ``AᵀA = (WᵀW)^{1/2}``): the optimum of the
    relaxation behind the singular value bound (App. D.1); it reaches the bound exactly when
    ``(WᵀW)^{1/2}`` has a constant diagonal, and in general its error is the bound times
    ``max diag (WᵀW)^{1/2} / mean diag (WᵀW)^{1/2}``."""
    G = np.asarray(W, dtype=float)
    if not gram:
        G = G.T @ G
    lam, V = sla.eigh(G, driver="evd")
    lam = np.clip(lam, 0.0, None)
    return (V * lam**0.25) @ V.T


def kron(*factors: np.ndarray) -> np.ndarray:
    """Kronecker product of per-attribute strategies (multi-dimensional strategies)."""
    out = np.ones((1, 1))
    for f in factors:
        out = np.kron(out, np.asarray(f, dtype=float))
    return out


STRATEGIES = ("identity", "workload", "hierarchical", "hierarchical4", "haar", "fourier", "quarter_root")


def classic_strategy(name: str, W: np.ndarray) -> np.ndarray:
    """A classic 1-D strategy by name for the explicit workload ``W`` (``m × n``):
    ``identity``, ``workload``, ``hierarchical`` (binary), ``hierarchical<b>`` (b-ary),
    ``haar``, ``fourier``, ``quarter_root``."""
    W = np.asarray(W, dtype=float)
    n = W.shape[1]
    if name == "identity":
        return identity(n)
    if name == "workload":
        return W
    if name.startswith("hierarchical"):
        b = name[len("hierarchical"):]
        return hierarchical(n, int(b) if b else 2)
    if name == "haar":
        return haar(n)
    if name == "fourier":
        return fourier(n, W)
    if name in ("quarter_root", "eigen"):
        return quarter_root(W)
    raise PlanError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)} or pass a matrix")


# -- exact error of a strategy ---------------------------------------------------------------
@dataclass(frozen=True)
class StrategyProfile:
    """Exact error of answering a workload from a strategy with Gaussian noise at ``pcost``.

    ``query_variances`` is ``None`` when only ``WᵀW`` was given (then ``max_variance`` is NaN).
    """

    name: str
    total: float
    rmse: float
    max_variance: float
    query_variances: np.ndarray | None
    sensitivity2: float
    pcost: float
    n_queries: int

    def ratio_to(self, bound: float) -> float:
        """``total / bound`` (e.g. the singular value bound at the same pcost)."""
        return self.total / bound


def _row_space(A: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal basis ``V_r`` of the row space of ``A`` and the eigenvalues ``λ_r`` of ``AᵀA``
    on it."""
    lam, V = sla.eigh(A.T @ A, driver="evd")
    keep = lam > tol * max(float(lam[-1]), 1e-300)
    return V[:, keep], lam[keep]


def evaluate(
    workload: np.ndarray,
    strategy: np.ndarray | str,
    *,
    pcost: float = 1.0,
    name: str | None = None,
    gram: bool = False,
    tol: float = 1e-10,
) -> StrategyProfile:
    """Exact error profile of an explicit strategy for an explicit workload (Prop. 2.4).

    Parameters
    ----------
    workload : array
        ``m × n`` workload ``W`` (``gram=True``: its ``n × n`` Gram matrix ``WᵀW``).
    strategy : array or str
        ``k × n`` strategy ``A``, or a classic one by name (:func:`classic_strategy`; not with ``gram``
        for ``workload``/``fourier``/``quarter_root``, which need ``W``).
    pcost : float
        Privacy cost (``1/P(ε,δ)`` in the paper's convention; ``1`` reproduces its numbers).
    name : str, optional
        Label used in the result and in error messages.
    gram : bool
        ``workload`` is ``WᵀW`` (totals only).
    tol : float
        Relative tolerance of the row-space test and of the pseudo-inverse.

    Returns
    -------
    StrategyProfile
        ``total = (‖A‖²_{1→2}/pcost)·tr(WᵀW(AᵀA)⁺)``; per-query ``(‖A‖²/pcost)·w(AᵀA)⁺wᵀ``.

    Raises
    ------
    WorkloadError
        zero workload, shape mismatch, non-finite entries.
    PlanError
        the strategy cannot answer the workload (a query outside its row space), naming it.

    Examples
    --------
    >>> import numpy as np
    >>> W = np.array([[1., 1.], [1., 0.]])
    >>> evaluate(W, "identity").total
    3.0
    """
    if not (isinstance(pcost, (int, float)) and math.isfinite(pcost) and pcost > 0):
        raise PlanError(f"pcost must be a positive number, got {pcost!r}")
    W = np.asarray(workload, dtype=float)
    if W.ndim != 2 or W.size == 0 or not np.all(np.isfinite(W)):
        raise WorkloadError(f"the workload must be a finite non-empty 2-D matrix, got shape {W.shape}")
    if not np.any(W):
        raise WorkloadError("the workload is zero (every query is all-zero): there is nothing to answer")
    n = W.shape[1]
    if isinstance(strategy, str):
        label = name or strategy
        if gram and strategy in ("workload", "fourier", "quarter_root"):
            if strategy != "quarter_root":
                raise PlanError(f"strategy {strategy!r} needs the workload matrix, not only WᵀW")
            A = quarter_root(W, gram=True)
        else:
            A = classic_strategy(strategy, W if not gram else np.eye(n))
    else:
        label = name or "custom"
        A = np.asarray(strategy, dtype=float)
    if A.ndim != 2 or A.shape[1] != n or not np.all(np.isfinite(A)):
        raise PlanError(f"strategy {label!r} must be a finite k × {n} matrix, got shape {A.shape}")
    if not np.any(A):
        raise PlanError(f"strategy {label!r} is zero: it measures nothing")
    s2 = float(np.max(np.sum(A * A, axis=0)))
    sigma2 = s2 / float(pcost)
    V, lam = _row_space(A, tol)
    if gram:
        G = W
        outside = float(np.trace(G) - np.trace(V.T @ G @ V))
        if outside > 1e-8 * max(float(np.trace(G)), 1e-300):
            raise PlanError(
                f"strategy {label!r} cannot answer the workload: part of it lies outside the "
                f"strategy's row space (rank {V.shape[1]} of {n}); add the missing queries"
            )
        total = sigma2 * float(np.sum((V.T @ G @ V) * np.diag(1.0 / lam)))
        return StrategyProfile(label, total, float("nan"), float("nan"), None, s2, float(pcost), 0)
    resid = W - (W @ V) @ V.T
    rnorm = np.linalg.norm(resid, axis=1)
    bad = np.flatnonzero(rnorm > 1e-7 * np.maximum(np.linalg.norm(W, axis=1), 1e-300))
    if bad.size:
        raise PlanError(
            f"strategy {label!r} cannot answer the workload: {bad.size} of {W.shape[0]} queries "
            f"(first: row {int(bad[0])}) are outside its row space (rank {V.shape[1]} of {n}); "
            "choose a strategy that spans them"
        )
    Y = (W @ V) / np.sqrt(lam)
    qv = sigma2 * np.sum(Y * Y, axis=1)
    total = float(np.sum(qv))
    return StrategyProfile(label, total, math.sqrt(total / len(qv)), float(np.max(qv)), qv, s2,
                           float(pcost), int(len(qv)))
