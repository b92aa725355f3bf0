"""p-Identity strategies under L1 sensitivity (pure ε-DP) for one attribute: HDMM's OPT_0 family.

McKenna, Miklau, Hay, Machanavajjhala, *Optimizing error of high-dimensional statistical queries
under differential privacy* (PVLDB 2018), §5 ("p-Identity strategies"): the strategy

    A(Θ) = [I; Θ] D,   Θ ∈ R^{p×n}, Θ ≥ 0,   D = diag(1 / (1 + 1ᵀΘ))

has every column of L1 norm exactly 1 (sensitivity 1), and the expected total squared error of
the workload ``W`` under Laplace noise of scale ``1/ε`` with least-squares recovery is
``(2/ε²) L(Θ)``, ``L(Θ) = tr(G (AᵀA)⁻¹)`` with ``G = WᵀW``.

**Linear algebra.** With ``s = 1 + 1ᵀΘ``, ``S = diag(s)``: ``AᵀA = S⁻¹(I + ΘᵀΘ)S⁻¹`` and by
Woodbury ``(I + ΘᵀΘ)⁻¹ = I - ΘᵀRΘ``, ``R = (I_p + ΘΘᵀ)⁻¹``. With ``C = SGS``:

    L = Σ_j s_j² G_jj - tr(R K),        P = ΘC (p×n),  K = PΘᵀ (p×p).

Gradient (``M = I - ΘᵀRΘ``, so ``ΘM = RΘ``; ``Z = MCM``):

    ∂L/∂Θ = -2ΘZ + 1_p vᵀ,   ΘZ = RP - RK(RΘ),   v_j = 2 (s_j G_jj - Σ_k (RΘ)_kj P_kj / s_j).

``G`` enters only through ``G·X`` for ``X`` with ``p`` columns and through ``diag(G)``; for
prefix and all-range workloads both have closed forms (:class:`PrefixGram`, :class:`RangeGram`)
applied in O(np) with cumulative sums, so one evaluation costs O(np² + p³) — not O(n³).

**Search.** L-BFGS-B on ``Θ ≥ 0`` (as HDMM) from (i) ``b``-ary trees expressed in the family (the
internal nodes as rows of ``Θ`` with equal level shares: a tree whose leaf level is the cells is
exactly ``[I; Θ]D``), (ii) random points drawn from an explicitly seeded generator. The result is
a deterministic function of the inputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import numpy as np
import scipy.linalg
import scipy.optimize

from .._linalg.query_sets import DenseQueries, IntervalQueries
from .._linalg.threads import blas_threads_for

__all__ = [
    "DenseGram",
    "DenseQueries",
    "GramOperator",
    "IntervalQueries",
    "PIdentityResult",
    "PrefixGram",
    "RangeGram",
    "SumGram",
    "WeightedGram",
    "optimize_pidentity",
    "optimize_pidentity_max",
    "pidentity_loss",
    "pidentity_loss_grad",
    "query_variances",
    "tree_theta",
]


class GramOperator(Protocol):
    """``G = WᵀW`` of a workload on ``n`` cells, applied without forming ``W``."""

    n: int

    def matmul(self, x: np.ndarray) -> np.ndarray:
        """``G @ x`` for ``x`` of shape ``(n, k)``."""

    def diag(self) -> np.ndarray:
        """``diag(G)``."""

    def dense(self) -> np.ndarray:
        """``G`` as an ``n × n`` array (tests and small domains)."""


@dataclass(frozen=True)
class PrefixGram:
    """Prefixes ``[0, i]``, ``i = 0..n-1``: ``G_jk = n - max(j, k)`` (0-based).

    ``W`` is the lower-triangular ones matrix: ``Wx = cumsum(x)`` and ``Wᵀy`` the reversed
    cumulative sum, so ``Gx = Wᵀ(Wx)`` costs O(n) per column.

    Examples
    --------
    >>> PrefixGram(3).dense().tolist()
    [[3.0, 2.0, 1.0], [2.0, 2.0, 1.0], [1.0, 1.0, 1.0]]
    """

    n: int

    def matmul(self, x: np.ndarray) -> np.ndarray:
        y = np.cumsum(x, axis=0)
        return np.cumsum(y[::-1], axis=0)[::-1]

    def diag(self) -> np.ndarray:
        return (self.n - np.arange(self.n)).astype(float)

    def dense(self) -> np.ndarray:
        i = np.arange(self.n)
        return (self.n - np.maximum.outer(i, i)).astype(float)


@dataclass(frozen=True)
class RangeGram:
    """All ranges ``[a, b]``, ``0 ≤ a ≤ b < n``: ``G_jk = (min(j,k) + 1)(n - max(j,k))``
    (the number of ranges containing both ``j`` and ``k``).

    ``(Gx)_i = (n - i) Σ_{j≤i} (j+1) x_j + (i+1) Σ_{j>i} (n-j) x_j``: two cumulative sums.

    Examples
    --------
    >>> RangeGram(3).dense().tolist()
    [[3.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 3.0]]
    """

    n: int

    def matmul(self, x: np.ndarray) -> np.ndarray:
        n = self.n
        i = np.arange(n, dtype=float)[:, None]
        lo = np.cumsum((i + 1) * x, axis=0)                       # Σ_{j≤i} (j+1) x_j
        hi_all = np.cumsum(((n - i) * x)[::-1], axis=0)[::-1]     # Σ_{j≥i} (n-j) x_j
        hi = np.zeros_like(hi_all)
        hi[:-1] = hi_all[1:]                                      # Σ_{j>i}
        return (n - i) * lo + (i + 1) * hi

    def diag(self) -> np.ndarray:
        i = np.arange(self.n, dtype=float)
        return (i + 1) * (self.n - i)

    def dense(self) -> np.ndarray:
        i = np.arange(self.n)
        return ((np.minimum.outer(i, i) + 1) * (self.n - np.maximum.outer(i, i))).astype(float)


@dataclass(frozen=True)
class DenseGram:
    """An explicit ``G`` (any workload; O(n²) per column)."""

    g: np.ndarray

    @property
    def n(self) -> int:
        return self.g.shape[0]

    def matmul(self, x: np.ndarray) -> np.ndarray:
        return self.g @ x

    def diag(self) -> np.ndarray:
        return np.diag(self.g).astype(float)

    def dense(self) -> np.ndarray:
        return np.asarray(self.g, dtype=float)


@dataclass(frozen=True)
class SumGram:
    """``Σ_t c_t G_t`` (a weighted union of query sets on one attribute)."""

    terms: tuple
    weights: tuple

    @property
    def n(self) -> int:
        return self.terms[0].n

    def matmul(self, x: np.ndarray) -> np.ndarray:
        return sum(c * t.matmul(x) for c, t in zip(self.weights, self.terms))

    def diag(self) -> np.ndarray:
        return sum(c * t.diag() for c, t in zip(self.weights, self.terms))

    def dense(self) -> np.ndarray:
        return sum(c * t.dense() for c, t in zip(self.weights, self.terms))


def pidentity_loss_grad(theta: np.ndarray, gram: GramOperator, *, grad: bool = True):
    """``L(Θ) = tr(G (AᵀA)⁻¹)`` of ``A = [I; Θ]D`` and its gradient (module doc), O(np² + p³).

    Parameters
    ----------
    theta : array, shape (p, n)
        Non-negative aggregation weights.
    gram : GramOperator
    grad : bool, keyword-only

    Returns
    -------
    (float, numpy.ndarray or None)

    Examples
    --------
    A = [I; 1 1]/2: AᵀA = [[2, 1], [1, 2]]/4, (AᵀA)⁻¹ = [[8, -4], [-4, 8]]/3, G = [[2, 1], [1, 1]],
    so tr(G (AᵀA)⁻¹) = (16 - 4 - 4 + 8)/3 = 16/3:

    >>> round(pidentity_loss_grad(np.ones((1, 2)), PrefixGram(2))[0], 6)
    5.333333
    """
    p = theta.shape[0]
    s = 1.0 + theta.sum(axis=0)
    gd = gram.diag()
    base = float(np.sum(s * s * gd))
    if p == 0:
        return base, (np.zeros_like(theta) if grad else None)
    # I + ΘΘᵀ = LLᵀ (⪰ I: well conditioned), Y = L⁻¹Θ: tr(RK) = tr(Y C Yᵀ) and
    # ΘZ = RP - RK RΘ = L⁻ᵀ(YC - (YCYᵀ)Y), Σ_k (RΘ)_kj P_kj = Σ_k Y_kj (YC)_kj
    # (L⁻¹ explicitly, O(p³): products with it are BLAS-3 GEMMs, faster than triangular solves)
    chol = scipy.linalg.cholesky(np.eye(p) + theta @ theta.T, lower=True)
    linv = scipy.linalg.solve_triangular(chol, np.eye(p), lower=True)
    y = linv @ theta
    yc = gram.matmul((y * s).T).T * s                # YC = Y S G S, O(np) for closed forms
    loss = base - float(np.sum(yc * y))
    if not grad:
        return loss, None
    theta_z = linv.T @ (yc - (yc @ y.T) @ y)
    v = 2.0 * (s * gd - np.sum(y * yc, axis=0) / s)
    return loss, -2.0 * theta_z + v[None, :]


def pidentity_loss(theta: np.ndarray, gram: GramOperator) -> float:
    """``L(Θ)`` only (see :func:`pidentity_loss_grad`)."""
    return pidentity_loss_grad(theta, gram, grad=False)[0]


def tree_theta(n: int, b: int, *, max_rows: int | None = None) -> np.ndarray:
    """The internal nodes of the ``b``-ary tree on ``n`` cells (root first) as rows of ``Θ``:
    with equal level shares the tree strategy is exactly ``[I; Θ]D`` (every entry 1 on the
    node's block). Deepest internal levels are dropped first when there are more than
    ``max_rows`` rows.

    Examples
    --------
    >>> tree_theta(4, 2).tolist()
    [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]]
    """
    depth = 0
    while b**depth < n:
        depth += 1
    rows = []
    for lev in range(depth):
        width = b ** (depth - lev)
        blocks = -(-n // width)
        if max_rows is not None and len(rows) + blocks > max_rows:
            break
        h = np.zeros((blocks, n))
        h[np.arange(n) // width, np.arange(n)] = 1.0
        rows.append(h)
    return np.vstack(rows) if rows else np.zeros((0, n))


@dataclass(frozen=True)
class PIdentityResult:
    """The best ``Θ`` found, its loss ``L``, and every start's outcome ``(label, loss)``."""

    theta: np.ndarray
    loss: float
    starts: tuple[tuple[str, float], ...]


#: upper bound on the entries of Θ: ``L = Σ s_j² G_jj - tr(RK)`` cancels catastrophically when a
#: column's ``s_j`` is huge (a cell whose own row is almost unmeasured); the bound keeps the
#: evaluated loss accurate (checked against an explicit pinv in the tests)
THETA_CAP = 100.0


def _bounds(size: int) -> scipy.optimize.Bounds:
    """``0 ≤ Θ ≤ THETA_CAP`` as arrays (a list of ``size`` tuples costs scipy a Python loop)."""
    return scipy.optimize.Bounds(np.zeros(size), np.full(size, THETA_CAP))


def _minimize(theta0: np.ndarray, gram: GramOperator, maxiter: int, ftol: float,
              block: int = 1) -> tuple[np.ndarray, float]:
    """L-BFGS-B on ``0 ≤ Θ ≤ THETA_CAP``. With ``block > 1`` the rows are constant on blocks of
    ``block`` consecutive cells (``Θ = Φ Bᵀ``, ``B`` the n × ⌈n/block⌉ block indicator, the last
    block possibly shorter; gradient ``∂L/∂Φ = (∂L/∂Θ) B``): a coarse problem with ``block``
    times fewer parameters, evaluated exactly on the fine cells."""
    p, n = theta0.shape
    edges = np.arange(0, n, block)
    widths = np.diff(np.append(edges, n))
    phi0 = np.add.reduceat(theta0, edges, axis=1) / widths if block > 1 else theta0
    shape = phi0.shape

    def expand(z):
        ph = z.reshape(shape)
        return np.repeat(ph, widths, axis=1) if block > 1 else ph

    def f(z):
        try:
            val, g = pidentity_loss_grad(expand(z), gram)
        except (np.linalg.LinAlgError, ValueError):
            return 1e300, np.zeros(z.size)
        if not math.isfinite(val) or val <= 0:
            return 1e300, np.zeros(z.size)
        return val, (np.add.reduceat(g, edges, axis=1) if block > 1 else g).ravel()

    r = scipy.optimize.minimize(f, phi0.ravel(), jac=True, method="L-BFGS-B",
                                bounds=_bounds(phi0.size),
                                options={"maxiter": maxiter, "ftol": ftol, "gtol": 1e-10, "maxcor": 10})
    th = np.maximum(expand(r.x), 0.0)
    return th, pidentity_loss(th, gram)


def default_schedule(n: int) -> tuple[tuple[int, int], ...]:
    """``(block, iterations)`` stages of one start: below 2048 cells one stage on the cells (400
    iterations); from 2048 cells a coarse-to-fine continuation: 100 iterations with rows constant
    on blocks of 16, 100 on blocks of 4, 60 on single cells (prefix n = 4096 from the 16-ary tree:
    322,944 after the 16-blocks, 299,837 after the 4-blocks in 26 s of CPU, 295,033 after 100
    more on the cells in 50 s; 200 direct iterations on the cells: 335,062 in 54 s)."""
    return ((1, 400),) if n < 2048 else ((16, 100), (4, 100), (1, 60))


def default_branchings(n: int) -> list[int]:
    """Tree starts tried: ``b ∈ {4, 16}`` (below ``n``; only 16 from ``n ≥ 512``), else ``b = 2``."""
    return sorted({b for b in ((16,) if n >= 512 else (4, 16)) if b < n}) or [2]


def optimize_pidentity(
    gram: GramOperator,
    *,
    ps: Sequence[int] | None = None,
    branchings: Sequence[int] | None = None,
    random_starts: int = 4,
    seed: int = 0,
    max_rows: int | None = None,
    maxiter: int | None = None,
    ftol: float = 1e-9,
) -> PIdentityResult:
    """Minimize ``L(Θ)`` over non-negative ``Θ`` from tree starts and seeded random starts.

    Parameters
    ----------
    gram : GramOperator
        ``WᵀW`` of the attribute's workload.
    ps : sequence of int, keyword-only
        Row counts ``p`` of the random starts (default ``max(n//16, 1)`` as HDMM's OPT_0).
    branchings : sequence of int, keyword-only
        Tree starts (default :func:`default_branchings`).
    random_starts : int, keyword-only
        Random starts per ``p`` (entries uniform on [0, 1), as HDMM).
    seed : int, keyword-only
        Seed of the explicit generator of the random starts (``numpy.random.default_rng``).
    max_rows : int, keyword-only
        Cap on ``p`` for tree starts (default ``max(n // 8, 16)``; deeper levels are dropped).
    maxiter : int, keyword-only
        L-BFGS-B iterations of one start (one stage on the cells); default
        :func:`default_schedule` (coarse-to-fine from 2048 cells).
    ftol : float, keyword-only
        L-BFGS-B's relative tolerance on the loss.

    Returns
    -------
    PIdentityResult

    Examples
    --------
    >>> r = optimize_pidentity(PrefixGram(16), random_starts=1)
    >>> bool(r.loss < pidentity_loss(np.zeros((0, 16)), PrefixGram(16)))   # beats the cells
    True
    """
    n = gram.n
    cap = max(n // 8, 16) if max_rows is None else int(max_rows)
    starts: list[tuple[str, np.ndarray]] = []
    for b in (default_branchings(n) if branchings is None else branchings):
        th = tree_theta(n, int(b), max_rows=cap)
        if th.shape[0]:
            starts.append((f"tree:{int(b)}", th))
    rng = np.random.default_rng(seed)
    for p in ([max(n // 16, 1)] if ps is None else ps):
        for r in range(random_starts):
            starts.append((f"random:p={int(p)}#{r}", rng.random((int(p), n))))
    best_th, best_v = np.zeros((0, n)), pidentity_loss(np.zeros((0, n)), gram)
    log = [("cells", best_v)]
    # dense factors are p × p and p × n: one BLAS thread (no spinning threads on a busy machine)
    with blas_threads_for(max((th.shape[0] for _, th in starts), default=1)):
        schedule = default_schedule(n) if maxiter is None else ((1, int(maxiter)),)
        for label, th0 in starts:
            th = th0
            for block, its in schedule:
                th, v = _minimize(th, gram, its, ftol, block)
            log.append((label, v))
            if v < best_v * (1 - 1e-12):
                best_th, best_v = th, v
    return PIdentityResult(best_th, best_v, tuple(log))


# ---------------------------------------------------------------------------------------------
# Maximum variance over the workload's queries (objective "max")
# ---------------------------------------------------------------------------------------------


class QuerySet(Protocol):
    """The rows ``w_q`` of a workload on ``n`` cells, applied without forming a dense matrix."""

    n: int
    m: int

    def apply(self, x: np.ndarray) -> np.ndarray:
        """``W x`` for ``x`` of shape ``(n, k)``: shape ``(m, k)``."""

    def adjoint(self, y: np.ndarray) -> np.ndarray:
        """``Wᵀ y`` for ``y`` of shape ``(m, k)``: shape ``(n, k)``."""


@dataclass(frozen=True, eq=False)
class WeightedGram:
    """``G_c = Σ_q c_q w_q w_qᵀ = Wᵀ diag(c) W`` of a :class:`QuerySet` (a :class:`GramOperator`):
    ``Σ_q c_q var_q = tr(G_c Σ)``, so the gradient of a weighted sum of query variances is the
    p-Identity gradient with this Gram."""

    queries: QuerySet
    c: np.ndarray

    @property
    def n(self) -> int:
        return self.queries.n

    @cached_property
    def _pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """``Λ = Σ_q c_q (e_{b+1} - e_a)(e_{b+1} - e_a)ᵀ = diag(dg) - off - offᵀ`` of interval
        queries as ``(off, dg)`` (``off`` the (n+1) × (n+1) strictly upper weights: no transposed
        copy is formed, the GEMM reads ``offᵀ`` in place)."""
        return _pair_parts(self.queries, self.c)

    def matmul(self, x: np.ndarray) -> np.ndarray:
        if _pairwise(self.queries):
            # W = E D with D the padded cumulative sum ((Dx)_i = Σ_{j<i} x_j) and E the pair
            # differences: Wᵀ diag(c) W x = Dᵀ Λ D x, (Dᵀ y)_j = Σ_{i>j} y_i — one GEMM, O(n² k)
            cx = np.zeros((self.n + 1, x.shape[1]))
            np.cumsum(x, axis=0, out=cx[1:])
            off, dg = self._pairs
            y = dg[:, None] * cx - off @ cx - off.T @ cx      # Λ = diag(dg) - off - offᵀ
            return np.cumsum(y[:0:-1], axis=0)[::-1]
        return self.queries.adjoint(self.c[:, None] * self.queries.apply(x))

    def diag(self) -> np.ndarray:
        # diag(WᵀCW)_j = Σ_q c_q w_qj²; w_qj ∈ {0, 1} for intervals, general for dense queries
        if isinstance(self.queries, DenseQueries):
            return (self.c[:, None] * self.queries.q**2).sum(axis=0)
        q = self.queries  # Σ_q c_q [a_q ≤ j ≤ b_q]: a difference array, O(m + n)
        d = np.bincount(q.a, weights=self.c, minlength=q.n + 1) - np.bincount(q.b + 1, weights=self.c,
                                                                                minlength=q.n + 1)
        return np.cumsum(d)[: q.n]

    def dense(self) -> np.ndarray:
        w = self.queries.apply(np.eye(self.n))
        return w.T @ (self.c[:, None] * w)


#: queries per block when all query variances are formed (memory: block × p doubles)
_BLOCK = 1 << 16
#: interval query sets with more than this many queries per cell (all ranges: (n+1)/2) use the
#: pairwise forms: per-query work of one scalar instead of ``p``, the rest O(n² p) in one GEMM
PAIRWISE_RATIO = 8


def _pairwise(queries) -> bool:
    return isinstance(queries, IntervalQueries) and queries.m > PAIRWISE_RATIO * queries.n


def _pair_parts(queries: IntervalQueries, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(off, dg)`` with ``Σ_q c_q (e_{b_q+1} - e_{a_q})(e_{b_q+1} - e_{a_q})ᵀ = diag(dg) - off - offᵀ``."""
    n1 = queries.n + 1
    off = np.bincount(queries.pair_index, weights=c, minlength=n1 * n1).reshape(n1, n1)
    dg = np.bincount(queries.a, weights=c, minlength=n1) + np.bincount(queries.b + 1, weights=c, minlength=n1)
    return off, dg


def _pair_matrix(queries: IntervalQueries, c: np.ndarray) -> np.ndarray:
    """``Σ_q c_q (e_{b_q+1} - e_{a_q})(e_{b_q+1} - e_{a_q})ᵀ`` as an ``(n+1) × (n+1)`` array."""
    off, dg = _pair_parts(queries, c)
    out = -(off + off.T)
    out[np.diag_indices(queries.n + 1)] += dg
    return out


def query_variances(theta: np.ndarray, queries: QuerySet) -> np.ndarray:
    """``v_q = w_qᵀ (AᵀA)⁻¹ w_q`` for every query of ``queries`` (``A = [I; Θ]D``, unit noise):
    ``(AᵀA)⁻¹ = S² - UᵀU`` with ``U = L⁻¹ΘS`` (``I + ΘΘᵀ = LLᵀ``), so
    ``v_q = Σ_j w_qj² s_j² - ‖U w_q‖²`` — O(mp) with structured queries, never an n × n matrix.

    Examples
    --------
    Cells only (Θ empty): the variance of a prefix ``[0, i]`` is ``i + 1``.

    >>> query_variances(np.zeros((0, 3)), IntervalQueries(3, np.zeros(3, int), np.arange(3))).tolist()
    [1.0, 2.0, 3.0]
    """
    p, n = theta.shape
    s = 1.0 + theta.sum(axis=0)
    out = np.empty(queries.m)
    if isinstance(queries, IntervalQueries):
        own = np.concatenate([[0.0], np.cumsum(s * s)])
        # (the pairwise form below folds ``own`` into its own two gathers)
        base = None if p and _pairwise(queries) else own[queries.b + 1] - own[queries.a]
    else:
        base = (queries.q**2) @ (s * s)
    if p == 0:
        return base
    chol = scipy.linalg.cholesky(np.eye(p) + theta @ theta.T, lower=True)
    u = scipy.linalg.solve_triangular(chol, theta * s, lower=True)
    uw = u.T
    if _pairwise(queries):
        # ‖U w_q‖² = ‖C_{b+1} - C_a‖² = g_{b+1,b+1} + g_aa - 2 g_{a,b+1} with C the padded
        # cumulative sums of the columns of U and g = CCᵀ (one GEMM): one scalar per query
        c = np.zeros((n + 1, p))
        np.cumsum(uw, axis=0, out=c[1:])
        g = c @ c.T
        d = np.einsum("ij,ij->i", c, c)
        # base = own[b+1] - own[a]: v = (own - d)[b+1] - (own + d)[a] + 2 g[a, b+1] (two gathers)
        v = (own - d)[queries.b + 1] - (own + d)[queries.a]
        v += 2.0 * np.take(g.ravel(), queries.pair_index)
        return v
    for lo in range(0, queries.m, _BLOCK):
        hi = min(lo + _BLOCK, queries.m)
        if isinstance(queries, IntervalQueries):
            part = IntervalQueries(n, queries.a[lo:hi], queries.b[lo:hi]).apply(uw)
        else:
            part = queries.q[lo:hi] @ uw
        out[lo:hi] = base[lo:hi] - np.einsum("ij,ij->i", part, part)
    return out


def _pnorm_minimize(theta0, queries, t: float, maxiter: int, block: int = 1):
    """Minimize the smooth surrogate ``F_t(Θ) = (Σ_q v_q^t)^{1/t}`` of ``max_q v_q`` (``F_t``
    decreases to the max as ``t → ∞``; ``max ≤ F_t ≤ m^{1/t} max``). ``∂F_t = Σ_q c_q ∂v_q`` with
    ``c_q = (v_q / F_t)^{t-1}``: the p-Identity gradient with the Gram ``Wᵀ diag(c) W``.

    With ``block > 1`` the rows of ``Θ`` are constant on blocks of ``block`` consecutive cells
    (as in :func:`_minimize`; every evaluation is exact on the fine cells). Every evaluation
    computes the exact maximum ``max_q v_q`` anyway, so the iterate of the smallest exact maximum
    is returned with it: ``(Θ_best, max_best, Θ_final)``."""
    if theta0.size == 0:
        return theta0, math.inf, theta0
    n = theta0.shape[1]
    edges = np.arange(0, n, block)
    widths = np.diff(np.append(edges, n))
    phi0 = np.add.reduceat(theta0, edges, axis=1) / widths[None, :] if block > 1 else theta0
    shape = phi0.shape
    best: list = [math.inf, None]

    def expand(z):
        ph = z.reshape(shape)
        return np.repeat(ph, widths, axis=1) if block > 1 else ph

    def f(z):
        th = expand(z)
        try:
            v = query_variances(th, queries)
            top = float(v.max())
            if not math.isfinite(top) or top <= 0:
                return 1e300, np.zeros(z.size)
            if top < best[0] and np.all(z >= 0):
                best[0], best[1] = top, th.copy()
            r = v / top
            c = r ** (t - 1.0)                     # one power: Σ r^t = Σ r^{t-1} r
            big = float(np.dot(c, r)) ** (1.0 / t)
            c *= big ** (1.0 - t)                  # c_q = (r_q / big)^{t-1}
            _, g = pidentity_loss_grad(th, WeightedGram(queries, c))
        except (np.linalg.LinAlgError, ValueError):
            return 1e300, np.zeros(z.size)
        if block > 1:
            g = np.add.reduceat(g, edges, axis=1)
        return top * big, g.ravel()

    r = scipy.optimize.minimize(f, phi0.ravel(), jac=True, method="L-BFGS-B",
                                bounds=_bounds(phi0.size),
                                options={"maxiter": maxiter, "ftol": 1e-10, "gtol": 1e-12, "maxcor": 10})
    final = np.maximum(expand(r.x), 0.0)
    if best[1] is None:
        return final, math.inf, final
    return best[1], best[0], final


#: ``(t, block, iterations)`` stages of the max refinement below :data:`MAX_COARSE_FROM` cells
MAX_STAGES_FINE = ((8.0, 1, 150), (32.0, 1, 150), (128.0, 1, 150))
#: from :data:`MAX_COARSE_FROM` cells: coarse-to-fine (rows constant on blocks of 4 cells for
#: the first three stages, evaluated exactly on the cells; then 150 iterations on the cells).
#: From the sum-optimum (sequential CPU on a loaded machine): prefix n = 1024 max 48.314 in
#: 3.5 s vs 48.243 in 6.0 s with :data:`MAX_STAGES_FINE`; all ranges n = 1024 74.968 in 15 s
#: vs 74.792 in 21 s; n = 256 (three starts): prefix 28.691 in 1.3 s vs 28.691 in 2.3 s,
#: ranges 42.035 in 2.3 s vs 42.069 in 3.7 s. Cutting the last stage to 100 iterations lost
#: 2 % on ranges n = 1024.
MAX_STAGES_COARSE = ((8.0, 4, 40), (32.0, 4, 40), (128.0, 4, 60), (128.0, 1, 150))
MAX_COARSE_FROM = 256


def default_max_stages(n: int, coarse_from: int = MAX_COARSE_FROM) -> tuple[tuple[float, int, int], ...]:
    """The ``(t, block, iterations)`` stages for ``n`` cells (see :data:`MAX_STAGES_COARSE`)."""
    return MAX_STAGES_COARSE if n >= coarse_from else MAX_STAGES_FINE


def optimize_pidentity_max(
    queries: QuerySet,
    starts: Sequence[tuple[str, np.ndarray]],
    *,
    exponents: Sequence[float] | None = None,
    maxiter: int | None = None,
    stages: Sequence[tuple[float, int, int]] | None = None,
    coarse_from: int = MAX_COARSE_FROM,
) -> PIdentityResult:
    """Minimize the maximum query variance ``max_q w_qᵀ(AᵀA)⁻¹w_q`` over non-negative ``Θ``.

    The max is not smooth; each start is refined through the p-norm surrogates
    ``F_t = (Σ_q v_q^t)^{1/t}`` for increasing ``t`` (each stage starting where the previous
    stopped), and every candidate (the starts themselves, every stage's result and the iterate
    of the smallest maximum seen during the stage, the cells) is compared by its EXACT maximum (:func:`query_variances`). Deterministic: no random draws.

    Parameters
    ----------
    queries : QuerySet
        The workload's queries on one attribute.
    starts : sequence of (label, Θ)
        Starting points (e.g. the sum-optimal Θ and tree strategies in the family).
    exponents : sequence of float, keyword-only
        Surrogate exponents ``t``, in order, each on the cells (with ``maxiter``, default 150).
    maxiter : int, keyword-only
        L-BFGS-B iterations per stage (with ``exponents``).
    stages : sequence of (t, block, iterations), keyword-only
        Explicit stages (overrides ``exponents``/``maxiter``); ``block > 1`` keeps the rows
        constant on blocks of ``block`` cells (the loss is still evaluated on the cells).
    coarse_from : int, keyword-only
        Default stages: :data:`MAX_STAGES_COARSE` from this many cells, else
        :data:`MAX_STAGES_FINE`.

    Returns
    -------
    PIdentityResult
        ``loss`` is the exact maximum query variance (unit noise, sensitivity 1).

    Examples
    --------
    >>> q = IntervalQueries(8, np.zeros(8, int), np.arange(8))          # prefixes of 8 cells
    >>> r = optimize_pidentity_max(q, [("tree:2", tree_theta(8, 2))], exponents=(8.0,), maxiter=30)
    >>> bool(r.loss < query_variances(np.zeros((0, 8)), q).max())       # beats the cells (8)
    True
    """
    n = queries.n
    if stages is not None:
        plan = tuple(stages)
    elif exponents is not None or maxiter is not None:
        plan = tuple((float(t), 1, 150 if maxiter is None else int(maxiter))
                     for t in ((8.0, 32.0, 128.0) if exponents is None else exponents))
    else:
        plan = default_max_stages(n, coarse_from)
    best_th, best_v = np.zeros((0, n)), float(query_variances(np.zeros((0, n)), queries).max())
    log = [("cells", best_v)]
    with blas_threads_for(max((th.shape[0] for _, th in starts), default=1)):
        for label, th0 in starts:
            th = np.asarray(th0, dtype=float)
            cand = [(label, th)]
            for t, block, its in plan:
                seen, _, th = _pnorm_minimize(th, queries, float(t), int(its), int(block))
                tag = f"{label}>max:t={t:g}" + (f"/b{int(block)}" if block > 1 else "")
                cand += [(tag, th), (tag + ":best-seen", seen)]
            for lab, c in cand:
                v = float(query_variances(c, queries).max())
                log.append((lab, v))
                if v < best_v * (1 - 1e-12):
                    best_th, best_v = c, v
    return PIdentityResult(best_th, best_v, tuple(log))
