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
  on its right half (left half ``⌊len/2⌋`` cells, as :func:`dpmatrix.linalg.strategies.haar`).
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
best (never worse than uniform shares). ``M`` is a maximum: it is minimized through the smooth
``p``-norm of the diagonal (``p`` = 16, then 64), and the exact maximum is reported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.optimize

from ...errors import PlanError
from ...solvers.budget_split import cube_root_split

__all__ = ["AttributeLevels", "KINDS", "best_levels", "haar_levels", "level_matrices", "tree_levels"]

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


def _inverse(g: np.ndarray) -> np.ndarray | None:
    try:
        ginv = np.linalg.inv(g)
    except np.linalg.LinAlgError:
        return None
    if not np.allclose(g @ ginv, np.eye(g.shape[0]), atol=1e-8):
        return None
    return ginv


def _prefix_variances(ginv: np.ndarray) -> np.ndarray:
    """``C[a, b] = Σ_{i≤a, j≤b} G⁻¹_ij``: prefix ``≤ a`` has variance ``C[a, a]``."""
    return np.cumsum(np.cumsum(ginv, axis=0), axis=1)


def query_diagonal(q: np.ndarray, ginv: np.ndarray, kind: str | None = None) -> np.ndarray:
    """``diag(Q G⁻¹ Qᵀ)``; for ``kind="prefix"`` / ``"range"`` from 2-D prefix sums in O(n²)
    (a range ``[a, b]`` is ``prefix(b) - prefix(a-1)``); the values are then in the order
    ``prefix``: ``0..n-1``, ``range``: every ``a ≤ b`` (not the workload's row order: use them
    for sums and maxima)."""
    if kind in ("prefix", "range"):
        c = _prefix_variances(ginv)
        d = np.diag(c)
        if kind == "prefix":
            return d.copy()
        n = c.shape[0]
        cp = np.zeros((n + 1, n + 1))
        cp[1:, 1:] = c
        dp = np.concatenate([[0.0], d])
        a, b = np.triu_indices(n)
        # Var[a..b] = C[b,b] - C[a-1,b] - C[b,a-1] + C[a-1,a-1]   (index shifted by one)
        return dp[b + 1] - cp[a, b + 1] - cp[b + 1, a] + dp[a]
    return np.einsum("ij,jk,ik->i", q, ginv, q)


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
        if len(self.shares) != len(self.levels()):
            raise PlanError(f"{self.kind} on {self.n} cells has {len(self.levels())} levels, "
                            f"got {len(self.shares)} shares")

    def levels(self) -> list[np.ndarray]:
        """The integer level matrices ``H^0..H^L``."""
        return _cached_levels(self.kind, self.n, self.branching)

    @cached_property
    def gram(self) -> np.ndarray:
        """``G = Σ_ℓ η_ℓ² H^{ℓᵀ} H^ℓ`` (continuous-model precision per unit ``ε²/2``)."""
        return _gram([(h.T @ h).astype(float) for h in self.levels()], self.shares)

    @cached_property
    def gram_inverse(self) -> np.ndarray:
        g = _inverse(self.gram)
        if g is None:
            raise PlanError(f"{self.label} levels with shares {self.shares} do not identify the cells")
        return g

    @property
    def label(self) -> str:
        """``"cells"``, ``"tree:b"`` or ``"haar"``."""
        return f"tree:{self.branching}" if self.kind == "tree" else self.kind

    def to_dict(self) -> dict:
        return {"n": self.n, "kind": self.kind, "branching": self.branching,
                "shares": list(self.shares), "factor": self.factor}

    @classmethod
    def from_dict(cls, d) -> "AttributeLevels":
        return cls(int(d["n"]), str(d["kind"]), int(d.get("branching", 0)),
                   tuple(float(x) for x in d["shares"]), float(d["factor"]))


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


class _Factor:
    """``F`` or ``M`` (or its smooth ``p``-norm surrogate) of one attribute's queries."""

    def __init__(self, q: np.ndarray, grams, objective: str, kind: str | None):
        self.q = q
        self.qtq = q.T @ q
        self.grams = grams
        self.objective = objective
        self.kind = kind

    def value(self, eta, p: float | None = None) -> float:
        eta = np.asarray(eta, dtype=float)
        ginv = _inverse(_gram(self.grams, eta))
        if ginv is None:
            return math.inf
        scale = float(np.sum(eta)) ** 2
        if self.objective == "sum":
            return float(np.sum(self.qtq * ginv)) * scale
        d = query_diagonal(self.q, ginv, self.kind)
        top = float(d.max())
        if p is None or top <= 0:
            return top * scale
        return top * float(np.sum((d / top) ** p)) ** (1.0 / p) * scale


def _cube_root_start(fac: _Factor, k: int) -> np.ndarray | None:
    u = np.full(k, 1.0 / k)
    ginv = _inverse(_gram(fac.grams, u))
    if ginv is None:
        return None
    m = ginv @ fac.qtq @ ginv
    s = np.array([float(np.sum(g * m)) for g in fac.grams]) * (1.0 / k) ** 2
    if not (np.all(np.isfinite(s)) and s.sum() > 0):
        return None
    return np.maximum(cube_root_split(s, np.ones(k), 1.0).eta, 1e-3 / k)


def _optimize_shares(fac: _Factor) -> tuple[np.ndarray, float]:
    k = len(fac.grams)
    u = np.full(k, 1.0 / k)
    best = (u, fac.value(u))
    if k == 1:
        return best
    starts = [u]
    cr = _cube_root_start(fac, k)
    if cr is not None:
        starts.append(cr)
    stages = [None] if fac.objective == "sum" else [16.0, 64.0]
    for x0 in starts:
        x = x0
        for p in stages:
            r = scipy.optimize.minimize(lambda z, p=p: min(fac.value(np.abs(z) + 1e-12, p), 1e300), x,
                                        method="L-BFGS-B", bounds=[(1e-6, None)] * k,
                                        options={"maxiter": 200})
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


def _branchings(n: int) -> list[int]:
    """Branchings tried by default: 2..16 and ``⌈n^{1/k}⌉`` (the smallest ``b`` of each depth;
    ``b = n`` is the two-level tree: the total and the cells)."""
    out = set(range(2, min(n, 17)))
    out |= {math.ceil(n ** (1 / k) - 1e-9) for k in range(1, max(2, n.bit_length()))}
    return sorted(b for b in out if 2 <= b <= n)


def best_levels(
    q: np.ndarray,
    *,
    kinds: Sequence[str] = KINDS,
    branchings: Sequence[int] | None = None,
    objective: str = "sum",
    shares: str = "optimal",
    query_kind: str | None = None,
) -> AttributeLevels:
    """The level strategy (kind, branching, shares) minimizing one attribute's factor.

    Parameters
    ----------
    q : array, shape (m, n)
        The attribute's query matrix.
    kinds : sequence of {"cells", "tree", "haar"}, keyword-only
        Candidates. ``"cells"`` always identifies the cells; a tree or Haar is used only when
        its factor is smaller.
    branchings : sequence of int, keyword-only
        Tree branchings tried (default: 2..16 and ``⌈n^{1/k}⌉``).
    objective : {"sum", "max"}, keyword-only
        Factor ``F`` (sum of the query variances) or ``M`` (largest query variance).
    shares : {"optimal", "uniform"}, keyword-only
        Optimized level shares, or equal shares (the kind is then chosen at equal shares).
    query_kind : str, keyword-only
        ``"prefix"`` / ``"range"`` when ``q`` is that standard matrix (faster maxima).

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
    q = np.asarray(q, dtype=float)
    n = q.shape[1]
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
    best: AttributeLevels | None = None
    qkey = (q.shape, q.tobytes(), objective, shares, query_kind)
    for kind, b in candidates:
        key = (qkey, kind, b)
        if key not in _SHARES_CACHE:
            mats = _cached_levels(kind, n, b)
            fac = _Factor(q, [(h.T @ h).astype(float) for h in mats], objective, query_kind)
            if shares == "uniform" or len(mats) == 1:
                eta = np.full(len(mats), 1.0 / len(mats))
                _SHARES_CACHE[key] = (eta, fac.value(eta))
            else:
                _SHARES_CACHE[key] = _optimize_shares(fac)
            if len(_SHARES_CACHE) > 4096:
                _SHARES_CACHE.pop(next(iter(_SHARES_CACHE)))
        eta, v = _SHARES_CACHE[key]
        if best is None or v < best.factor * (1 - 1e-12):
            best = AttributeLevels(n, kind, b, tuple(float(e) for e in eta), float(v))
    assert best is not None
    if not math.isfinite(best.factor):
        raise PlanError("no level strategy identifies this attribute's queries")
    return best
