"""Per-attribute level strategies for prefix / range / any per-attribute queries (pure ε-DP).

An attribute of ``n`` ordered cells is measured by *levels* ``H^0 .. H^L``, integer matrices with
``n`` columns, each level with its own share ``η_ℓ`` of the attribute's budget. Kinds:

* ``"cells"``: one level, ``I_n`` (the attribute's cells; a prefix or range is a sum of cells).
* ``"tree"`` (Hay et al., *Boosting the accuracy of differentially private histograms through
  consistency*, PVLDB 2010; Cormode et al. §3 with one group per level): a ``b``-ary tree,
  ``L = ⌈log_b n⌉``, level ``ℓ`` partitions ``0..n-1`` into contiguous blocks of ``b^{L-ℓ}``
  cells (the last possibly shorter); 0/1 rows, exactly one 1 in every column of every level.
* ``"haar"`` (Xiao, Wang, Gehrke, *Differential privacy via wavelet transforms*, ICDE 2010,
  Privelet): level 0 is the total ``1ᵀ``; level ``d ≥ 1`` has one row per node at depth ``d-1``
  of the binary tree over ``0..n-1`` with at least two cells, ``+1`` on its left half and ``-1``
  on its right half (left half ``⌊len/2⌋`` cells, as :func:`dpmatrix._linalg.strategies.haar`).
  The rows are the unnormalized Haar wavelets: integer ``±1`` entries, so exact discrete
  Laplace noise applies without any rescaling.

**Privacy.** Every column of every level has L1 norm at most 1 (trees: exactly 1; Haar: 1, or 0
for a cell whose branch ended above that depth), and a cell of largest depth reaches 1 on every
level at once; so a budget ``ε_ℓ`` per level spends exactly ``Σ_ℓ ε_ℓ`` (max column L1 norm of
the budget-scaled stack). On several attributes the Kronecker products keep both facts (column
norms multiply; the deepest cells of each attribute give a column of norm 1 in every level tuple).

**Shares.** With continuous-model noise ``2/ε_ℓ²`` and ``ε_ℓ = ε η_ℓ`` the GLS precision of the
stack is ``(ε²/2) G(η)``, ``G(η) = Σ_ℓ η_ℓ² H^{ℓᵀ} H^ℓ``, and the queries ``Q`` of the attribute
have covariance ``(2/ε²) Q G⁻¹ Qᵀ``. Two scale-free factors (invariant under ``η → cη``):

    F(η) = tr(Q G(η)⁻¹ Qᵀ) (Σ_ℓ η_ℓ)²          (sum of the query variances, per unit 2/ε²)
    M(η) = max_q (Q G(η)⁻¹ Qᵀ)_qq (Σ_ℓ η_ℓ)²    (largest query variance, per unit 2/ε²)

On a marginal the level tuples' precisions are products, so the Gram is ``⊗_i G_i``, the sum of
all query variances is ``Π_i F_i`` and the largest (a Kronecker product of non-negative
diagonals) ``Π_i M_i``: each attribute's shares are chosen alone, by L-BFGS-B from the uniform
shares and from the cube-root rule on the per-level GLS weights (Corollary 3.3), keeping the
best (never worse than uniform shares); every candidate (kind, branching) starts from the better
of the two and the :data:`REFINE` most promising ones are optimized, with analytic gradients
(:class:`_Factor`). ``M`` is a maximum: it is minimized through the smooth ``p``-norm of the
diagonal (``p`` = 16, then 64), and the exact maximum is reported.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..._linalg.query_sets import IntervalQueries
from ..._solvers.budget_split import cube_root_split
from ...errors import PlanError
from .query_rows import as_query_rows, gram, interval_rows, quadratic_diagonal, query_key  # noqa: F401

__all__ = ["AttributeLevels", "KINDS", "best_levels", "haar_levels", "interval_rows", "level_grams", "level_matrices",
           "quadratic_diagonal", "tree_levels", "with_factor"]

#: per-attribute level kinds
KINDS = ("cells", "tree", "haar")


def tree_levels(n: int, b: int) -> list[np.ndarray]:
    """Block-sum matrices ``H^0..H^L`` of the ``b``-ary tree on ``n`` ordered cells (root first).

    Parameters
    ----------
    n : int
        Number of cells (≥ 1).
    b : int
        Branching (≥ 2).

    Returns
    -------
    list of numpy.ndarray
        Integer 0/1 matrices, one per level, each with exactly one 1 per column.

    Examples
    --------
    >>> [h.tolist() for h in tree_levels(3, 2)]
    [[[1, 1, 1]], [[1, 1, 0], [0, 0, 1]], [[1, 0, 0], [0, 1, 0], [0, 0, 1]]]
    """
    if n < 1 or b < 2:
        raise PlanError(f"a tree needs n >= 1 cells and branching b >= 2, got n={n}, b={b}")
    depth = 0
    while b**depth < n:
        depth += 1
    out = []
    for lev in range(depth + 1):
        width = b ** (depth - lev)
        blocks = -(-n // width)
        h = np.zeros((blocks, n), dtype=np.int64)
        h[np.arange(n) // width, np.arange(n)] = 1
        out.append(h)
    return out


def haar_levels(n: int) -> list[np.ndarray]:
    """Levels of the (unnormalized) Haar wavelet strategy on ``n`` ordered cells.

    Parameters
    ----------
    n : int
        Number of cells (≥ 1).

    Returns
    -------
    list of numpy.ndarray
        Level 0: the total ``1ᵀ``; level ``d``: one ``±1`` row per node of depth ``d-1`` with at
        least two cells (``+1`` left half, ``-1`` right half). ``n`` rows in all.

    Examples
    --------
    >>> [h.tolist() for h in haar_levels(4)]
    [[[1, 1, 1, 1]], [[1, 1, -1, -1]], [[1, -1, 0, 0], [0, 0, 1, -1]]]
    """
    if n < 1:
        raise PlanError(f"a Haar strategy needs n >= 1 cells, got {n}")
    out = [np.ones((1, n), dtype=np.int64)]
    nodes = [(0, n)]
    while True:
        rows, nxt = [], []
        for lo, hi in nodes:
            if hi - lo < 2:
                continue
            mid = lo + (hi - lo) // 2
            r = np.zeros(n, dtype=np.int64)
            r[lo:mid] = 1
            r[mid:hi] = -1
            rows.append(r)
            nxt += [(lo, mid), (mid, hi)]
        if not rows:
            return out
        out.append(np.array(rows))
        nodes = nxt


def level_matrices(kind: str, n: int, branching: int = 0) -> list[np.ndarray]:
    """The level matrices of a kind (``"cells"``, ``"tree"`` with ``branching``, ``"haar"``)."""
    if kind == "cells":
        return [np.eye(n, dtype=np.int64)]
    if kind == "tree":
        return tree_levels(n, branching)
    if kind == "haar":
        return haar_levels(n)
    raise PlanError(f"unknown level kind {kind!r}; use one of {KINDS}")


def _gram(grams: Sequence[np.ndarray], eta) -> np.ndarray:
    return sum(e * e * g for g, e in zip(grams, eta))


def spd_inverse(g: np.ndarray) -> np.ndarray | None:
    """``G⁻¹`` of a symmetric positive definite ``G`` from its Cholesky factor (LAPACK
    ``potrf`` + ``potri``: ~n³ flops, a third of solving ``G X = I``), or ``None`` when ``G``
    is not numerically positive definite.

    Examples
    --------
    >>> spd_inverse(np.array([[2.0, 1.0], [1.0, 2.0]])).round(6).tolist()
    [[0.666667, -0.333333], [-0.333333, 0.666667]]
    """
    import scipy.linalg  # planning only: reading a plan of levels needs no SciPy

    try:
        c, _ = scipy.linalg.cho_factor(g, lower=True)
    except (np.linalg.LinAlgError, ValueError):
        return None
    inv, info = scipy.linalg.lapack.dpotri(c, lower=True)
    if info != 0:
        return None
    np.copyto(inv, inv.T, where=_upper(inv.shape[0]))  # potri fills the lower triangle only
    return inv if np.all(np.isfinite(inv)) else None


@functools.lru_cache(maxsize=4)
def _upper(n: int) -> np.ndarray:
    mask = np.triu(np.ones((n, n), dtype=bool), 1)
    mask.setflags(write=False)
    return mask


def _inverse(g: np.ndarray) -> np.ndarray | None:
    ginv = spd_inverse(g)
    if ginv is None or not np.allclose(g @ ginv, np.eye(g.shape[0]), atol=1e-8):
        return None
    return ginv


@dataclass(frozen=True)
class AttributeLevels:
    """One attribute's level strategy: kind, branching (trees), level shares ``η`` (sum 1) and
    the scale-free factor at those shares (``F`` for ``objective="sum"``, ``M`` for ``"max"``).

    Examples
    --------
    >>> a = AttributeLevels(4, "haar", 0, (0.5, 0.25, 0.25), 1.0)
    >>> [h.shape for h in a.levels()]
    [(1, 4), (1, 4), (2, 4)]
    """

    n: int
    kind: str
    branching: int
    shares: tuple[float, ...]
    factor: float

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise PlanError(f"unknown level kind {self.kind!r}; use one of {KINDS}")
        if len(self.shares) != self.operator.n_levels:
            raise PlanError(f"{self.kind} on {self.n} cells has {self.operator.n_levels} levels, "
                            f"got {len(self.shares)} shares")

    def levels(self) -> list[np.ndarray]:
        """The integer level matrices ``H^0..H^L`` (dense; :attr:`operator` applies them without
        forming them)."""
        return _cached_levels(self.kind, self.n, self.branching)

    @property
    def operator(self):
        """The levels as a :class:`~.level_operators.LevelOperator` (O(n) per level, no matrix)."""
        return _operator(self.kind, self.n, self.branching)

    @cached_property
    def gram(self) -> np.ndarray:
        """``G = Σ_ℓ η_ℓ² H^{ℓᵀ} H^ℓ`` (continuous-model precision per unit ``ε²/2``)."""
        return _gram(level_grams(self.kind, self.n, self.branching), self.shares)

    @cached_property
    def gram_inverse(self) -> np.ndarray:
        g = _inverse(self.gram)
        if g is None:
            raise PlanError(f"{self.label} levels with shares {self.shares} do not identify the cells")
        return g

    @property
    def weights(self) -> tuple[float, ...]:
        """``ω_ℓ = η_ℓ²``: the levels' weights in ``G = Σ_ℓ ω_ℓ H^{ℓᵀ}H^ℓ``."""
        return tuple(e * e for e in self.shares)

    @property
    def label(self) -> str:
        """``"cells"``, ``"tree:b"`` or ``"haar"``."""
        return f"tree:{self.branching}" if self.kind == "tree" else self.kind

    def to_dict(self) -> dict:
        return {"n": self.n, "kind": self.kind, "branching": self.branching,
                "shares": list(self.shares), "factor": self.factor}

    @classmethod
    def from_dict(cls, d) -> AttributeLevels:
        return cls(int(d["n"]), str(d["kind"]), int(d.get("branching", 0)),
                   tuple(float(x) for x in d["shares"]), float(d["factor"]))


@functools.lru_cache(maxsize=64)
def _operator(kind: str, n: int, branching: int):
    from .level_operators import LevelOperator

    if kind not in KINDS:
        raise PlanError(f"unknown level kind {kind!r}; use one of {KINDS}")
    if kind == "tree" and (n < 1 or branching < 2):
        raise PlanError(f"a tree needs n >= 1 cells and branching b >= 2, got n={n}, b={branching}")
    return LevelOperator(kind, n, branching)


_LEVEL_CACHE: dict[tuple[str, int, int], list[np.ndarray]] = {}


def _cached_levels(kind: str, n: int, branching: int) -> list[np.ndarray]:
    key = (kind, n, branching)
    if key not in _LEVEL_CACHE:
        if len(_LEVEL_CACHE) > 256:
            _LEVEL_CACHE.clear()
        mats = level_matrices(kind, n, branching)
        for m in mats:
            m.setflags(write=False)
        _LEVEL_CACHE[key] = mats
    return _LEVEL_CACHE[key]


_GRAM_CACHE: dict[tuple[str, int, int], tuple[np.ndarray, ...]] = {}


def level_grams(kind: str, n: int, branching: int = 0) -> tuple[np.ndarray, ...]:
    """``K_ℓ = H^{ℓᵀ}H^ℓ`` of every level, as read-only float matrices (cached).

    Computed by a float (BLAS) product: the entries of ``H`` are 0 / ±1 and every entry of
    ``K_ℓ`` is an integer of magnitude ≤ n, so the float product is exact and equals the integer
    one (which NumPy computes without BLAS: ~100× slower, seconds at n = 512).

    Examples
    --------
    >>> level_grams("tree", 3, 2)[1].tolist()
    [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    key = (kind, n, branching)
    if key not in _GRAM_CACHE:
        if len(_GRAM_CACHE) > 64:
            _GRAM_CACHE.clear()
        out = []
        for h in _cached_levels(kind, n, branching):
            if kind == "tree":  # one 1 per column: K_jk = [j and k in the same block]
                blk = h.argmax(axis=0)
                k = (blk[:, None] == blk[None, :]).astype(float)
            else:
                hf = h.astype(float)
                k = hf.T @ hf
            k.setflags(write=False)
            out.append(k)
        _GRAM_CACHE[key] = tuple(out)
    return _GRAM_CACHE[key]


class _Factor:
    """``F`` or ``M`` of one attribute's queries (or the smooth ``p``-norm surrogate of ``M``),
    with its analytic gradient in the shares.

    With ``G = Σ_ℓ η_ℓ² K_ℓ`` (``K_ℓ = H^{ℓᵀ}H^ℓ``), ``∂G⁻¹/∂η_ℓ = -2η_ℓ G⁻¹ K_ℓ G⁻¹``, so for
    ``T = Σ_q w_q (Q G⁻¹ Qᵀ)_qq`` (fixed ``w``) ``∂T/∂η_ℓ = -2η_ℓ ⟨A, K_ℓ⟩`` with
    ``A = G⁻¹ (Σ_q w_q q qᵀ) G⁻¹``: ``w = 1`` for ``F``; for the ``p``-norm ``f = (Σ_q d_q^p)^{1/p}``
    of the diagonal ``d``, ``∂f = Σ_q (d_q/f)^{p-1} ∂d_q``, i.e. ``w_q = (d_q/f)^{p-1}``. When
    every query is an interval of cells (prefixes, ranges) ``d`` and ``Σ_q w_q q qᵀ`` come from
    2-D prefix sums in O(n²) (:func:`quadratic_diagonal`), so an evaluation is O(n³) whatever
    the number of queries. The scale factor ``(Σ η)²`` is differentiated by the product rule.
    """

    def __init__(self, q, grams, objective: str):
        self.q = as_query_rows(q)
        self.qtq = gram(self.q)
        self.grams = grams
        self.objective = objective
        self.n = self.q.n
        self.intervals = (self.q.a, self.q.b) if isinstance(self.q, IntervalQueries) else None
        self._last: tuple[bytes, np.ndarray | None] | None = None

    def _ginv(self, eta) -> np.ndarray | None:
        eta = np.asarray(eta, dtype=float)
        key = eta.tobytes()
        if self._last is not None and self._last[0] == key:  # the starts ask the same shares twice
            return self._last[1]
        ginv = spd_inverse(_gram(self.grams, eta))
        self._last = (key, ginv)
        return ginv

    def _diag(self, ginv: np.ndarray) -> np.ndarray:
        if self.intervals is None:
            return np.einsum("ij,jk,ik->i", self.q.q, ginv, self.q.q)
        return quadratic_diagonal(None, ginv, self.intervals)

    def _weighted_outer(self, w: np.ndarray) -> np.ndarray:
        """``Σ_q w_q q qᵀ``; an interval ``[a, b]`` is ``p_{b+1} - p_a`` in the padded prefixes."""
        if self.intervals is None:
            return (self.q.q * w[:, None]).T @ self.q.q
        n = self.n
        k = np.zeros((n + 1, n + 1))
        a, b = self.intervals
        b = b + 1
        np.add.at(k, (b, b), w)
        np.add.at(k, (a, a), w)  # p_0 = 0: the a = 0 terms land in the dropped row and column
        np.add.at(k, (a, b), -w)
        np.add.at(k, (b, a), -w)
        # padded prefix p_k = [cells < k]: Σ K_kl p_k p_lᵀ = reverse cumulative sums of K
        r = np.cumsum(np.cumsum(k[::-1, ::-1], axis=0), axis=1)[::-1, ::-1]
        return r[1:, 1:]

    def value(self, eta, p: float | None = None) -> float:
        return self.value_grad(eta, p, grad=False)[0]

    def value_grad(self, eta, p: float | None = None, *, grad: bool = True):
        eta = np.asarray(eta, dtype=float)
        ginv = self._ginv(eta)
        if ginv is None:
            return math.inf, np.zeros(eta.size)
        s = float(np.sum(eta))
        if self.objective == "sum":
            t = float(np.sum(self.qtq * ginv))
            w_outer = self.qtq
        else:
            d = self._diag(ginv)
            top = float(d.max())
            if p is None or top <= 0:
                t, w_outer = top, None
            else:
                r = d / top
                t = top * float(np.sum(r**p)) ** (1.0 / p)
                w_outer = self._weighted_outer((d / t) ** (p - 1)) if grad else None
        if not grad or w_outer is None:
            return t * s * s, np.zeros(eta.size)
        a = ginv @ w_outer @ ginv
        dt = np.array([-2.0 * e * float(np.sum(a * g)) for e, g in zip(eta, self.grams)])
        return t * s * s, dt * s * s + 2.0 * t * s


def with_factor(levels: AttributeLevels, q, objective: str) -> AttributeLevels:
    """The same level strategy (kind, branching, shares) with the factor of the queries ``q``.

    Examples
    --------
    >>> t = best_levels(np.tril(np.ones((8, 8))), kinds=("haar",))
    >>> with_factor(t, np.eye(8), "sum").shares == t.shares
    True
    """
    fac = _Factor(q, list(level_grams(levels.kind, levels.n, levels.branching)), objective)
    return AttributeLevels(levels.n, levels.kind, levels.branching, levels.shares,
                           float(fac.value(np.asarray(levels.shares, dtype=float))))


def _cube_root_start(fac: _Factor, k: int) -> np.ndarray | None:
    u = np.full(k, 1.0 / k)
    ginv = fac._ginv(u)
    if ginv is None:
        return None
    m = ginv @ fac.qtq @ ginv
    s = np.array([float(np.sum(g * m)) for g in fac.grams]) * (1.0 / k) ** 2
    if not (np.all(np.isfinite(s)) and s.sum() > 0):
        return None
    return np.maximum(cube_root_split(s, np.ones(k), 1.0).eta, 1e-3 / k)


def _start(fac: _Factor, uniform_value: float | None = None) -> tuple[np.ndarray, float]:
    """The better of the uniform shares (value ``uniform_value`` when known) and the cube-root start."""
    k = len(fac.grams)
    u = np.full(k, 1.0 / k)
    best = (u, fac.value(u) if uniform_value is None else uniform_value)
    cr = _cube_root_start(fac, k)
    if cr is not None:
        cr = cr / cr.sum()
        v = fac.value(cr)
        if v < best[1]:
            best = (cr, v)
    return best


def _optimize_shares(fac: _Factor, start: tuple[np.ndarray, float]) -> tuple[np.ndarray, float]:
    import scipy.optimize  # planning only: reading a plan of levels needs no SciPy

    k = len(fac.grams)
    best = start
    if k == 1:
        return best
    stages = [None] if fac.objective == "sum" else [16.0, 64.0]
    x = start[0]
    for p in stages:
        def f(z, p=p):
            v, g = fac.value_grad(z, p)
            return (v, g) if math.isfinite(v) else (1e300, np.zeros(k))

        r = scipy.optimize.minimize(f, x, jac=True, method="L-BFGS-B", bounds=[(1e-6, None)] * k,
                                    options={"maxiter": 300})
        x = np.abs(r.x) / np.abs(r.x).sum()
    v = fac.value(x)
    if v < best[1]:
        best = (x, v)
    return _prune(fac, *best)


def _prune(fac: _Factor, eta: np.ndarray, value: float) -> tuple[np.ndarray, float]:
    """Drop levels whose share is below 10⁻³ of the largest if that keeps the cells identified
    and does not increase the factor (fewer noisy outputs for the same accuracy)."""
    small = eta < 1e-3 * eta.max()
    if not small.any():
        return eta, value
    cut = np.where(small, 0.0, eta)
    cut = cut / cut.sum()
    v = fac.value(cut)
    return (cut, v) if v <= value * (1 + 1e-9) else (eta, value)


#: optimized shares per (query matrix, objective, kind, branching): planning "auto" re-uses the
#: fixed strategies' searches
_SHARES_CACHE: dict = {}
#: candidates (kind, branching) whose shares are optimized, the best at their starting shares
REFINE = 4


def _branchings(n: int) -> list[int]:
    """Branchings tried by default: 2..16 and ``⌈n^{1/k}⌉`` (the smallest ``b`` of each depth;
    ``b = n`` is the two-level tree: the total and the cells)."""
    out = set(range(2, min(n, 17)))
    out |= {math.ceil(n ** (1 / k) - 1e-9) for k in range(1, max(2, n.bit_length()))}
    return sorted(b for b in out if 2 <= b <= n)


def best_levels(
    q,
    *,
    kinds: Sequence[str] = KINDS,
    branchings: Sequence[int] | None = None,
    objective: str = "sum",
    shares: str = "optimal",
    refine: int = REFINE,
) -> AttributeLevels:
    """The level strategy (kind, branching, shares) minimizing one attribute's factor.

    Parameters
    ----------
    q : array, shape (m, n), or query rows (:mod:`.query_rows`)
        The attribute's queries (intervals are never expanded to a matrix).
    kinds : sequence of {"cells", "tree", "haar"}, keyword-only
        Candidates. ``"cells"`` always identifies the cells; a tree or Haar is used only when
        its factor is smaller.
    branchings : sequence of int, keyword-only
        Tree branchings tried (default: 2..16 and ``⌈n^{1/k}⌉``).
    objective : {"sum", "max"}, keyword-only
        Factor ``F`` (sum of the query variances) or ``M`` (largest query variance).
    shares : {"optimal", "uniform"}, keyword-only
        Optimized level shares, or equal shares (the kind is then chosen at equal shares).
    refine : int, keyword-only
        How many candidates (the best at their starting shares) get their shares optimized by
        L-BFGS-B (default :data:`REFINE`); ``0`` keeps every candidate at its starting shares
        (the better of equal shares and the cube-root rule), a few O(n³) evaluations each.

    Returns
    -------
    AttributeLevels

    Examples
    --------
    >>> t = best_levels(np.eye(4))
    >>> t.kind, t.factor
    ('cells', 4.0)
    >>> best_levels(np.tril(np.ones((16, 16)))).kind != "cells"    # prefixes on 16 cells
    True
    """
    if objective not in ("sum", "max"):
        raise PlanError(f"objective must be 'sum' or 'max', got {objective!r}")
    if shares not in ("optimal", "uniform"):
        raise PlanError(f"shares must be 'optimal' or 'uniform', got {shares!r}")
    q = as_query_rows(q)
    n = q.n
    unknown = set(kinds) - set(KINDS)
    if unknown or not kinds:
        raise PlanError(f"level kinds must be among {KINDS}, got {list(kinds)}")
    candidates: list[tuple[str, int]] = []
    if "cells" in kinds or n <= 1:
        candidates.append(("cells", 0))
    if n > 1:
        if "tree" in kinds:
            candidates += [("tree", int(b)) for b in (branchings or _branchings(n))]
        if "haar" in kinds:
            candidates.append(("haar", 0))
    qkey = (query_key(q), objective, shares)
    # Planning is a pure function of its inputs: the cache holds each candidate's starting shares
    # and its optimized shares under separate keys, and which candidates are optimized depends on
    # the starting values only, never on what an earlier call happened to optimize.
    found: list[tuple[float, str, int, np.ndarray]] = []
    pending: list[tuple[float, str, int, tuple]] = []
    for kind, b in candidates:
        key = (qkey, kind, b, "start")
        if key not in _SHARES_CACHE:
            mats = _cached_levels(kind, n, b)
            fac = _Factor(q, list(level_grams(kind, n, b)), objective)
            # the value at equal shares is shared by both share modes (one evaluation)
            ukey = ((qkey[0], objective), kind, b, "uniform")
            if ukey not in _SHARES_CACHE:
                _SHARES_CACHE[ukey] = fac.value(np.full(len(mats), 1.0 / len(mats)))
            if shares == "uniform" or len(mats) == 1:
                eta = np.full(len(mats), 1.0 / len(mats))
                _SHARES_CACHE[key] = (eta, _SHARES_CACHE[ukey], True)
            else:
                _SHARES_CACHE[key] = (*_start(fac, _SHARES_CACHE[ukey]), False)
        eta, v, final = _SHARES_CACHE[key]
        if final:
            found.append((v, kind, b, eta))
        else:
            pending.append((v, kind, b, (eta, v)))
    # the most promising candidates at their starting shares are optimized (each start is the
    # better of equal shares and the cube-root rule, so no candidate is ever worse than those);
    # ties broken by (kind, branching) so that the order is total
    pending.sort(key=lambda t: (t[0], t[1], t[2]))
    for i, (v0, kind, b, st) in enumerate(pending):
        key = (qkey, kind, b, "optimized")
        if i < refine:
            if key not in _SHARES_CACHE:
                fac = _Factor(q, list(level_grams(kind, n, b)), objective)
                _SHARES_CACHE[key] = _optimize_shares(fac, st)
            eta, v = _SHARES_CACHE[key]
        else:
            eta, v = st
        found.append((v, kind, b, eta))
    if len(_SHARES_CACHE) > 4096:
        _SHARES_CACHE.clear()
    best: AttributeLevels | None = None
    for v, kind, b, eta in found:
        if best is None or v < best.factor * (1 - 1e-12):
            best = AttributeLevels(n, kind, b, tuple(float(e) for e in eta), float(v))
    assert best is not None
    if not math.isfinite(best.factor):
        raise PlanError("no level strategy identifies this attribute's queries")
    return best
