"""The Level Selection Algorithm (LSA) for explicit workloads.

Li & Miklau, *Efficient Batch Query Answering Under Differential Privacy*, §4, Program 4.1, with
the incremental inverse of App. D.2, workload separation (§4.3.1, Theorem 4.2) and workload
generalization (§4.3.2).

The strategy starts as the identity ``A = I``. Each *level* is a partition of the cells into
boxes (0/1 queries), so adding a level adds exactly 1 to every column's squared norm: the strategy
stays column-uniform (minimal, Theorem 3.1) and ``‖A‖²_{1→2} = 1 + #levels``. A level starts as
the single query ``[1 … 1]`` (the total); each of its boxes is repeatedly cut in two (at position
``p`` along dimension ``j``) when the cut lowers ``Error(A') = ‖A'‖² · tr(WᵀW (A'ᵀA')⁻¹)`` the most
among that box's cuts; when a full pass cuts nothing the level is complete, and it is kept iff
``Error([A; level]) ≤ Error(A)`` — else the algorithm stops (also at ``max_levels``).

Incremental inverse (App. D.2). Replacing the row ``v = v' + v''`` by ``v'`` and ``v''`` changes
``X = AᵀA`` by ``−(v'v''ᵀ + v''v'ᵀ) = U D Uᵀ`` with ``U = [v', v'']``, ``D = [[0,−1],[−1,0]]`` — a
rank-2 update (the paper writes it as a rank-3 Woodbury update with ``[v, v', v'']``; the signs
of its ``Λ`` are those of removing ``v`` and adding ``v'``, ``v''``). With ``M = X⁻¹`` and
``Z = M G M`` (``G = WᵀW``), Woodbury gives ``M'' = M − F K⁻¹ Fᵀ`` with ``F = MU``,
``K = D⁻¹ + UᵀMU`` and ``tr(G M'') = tr(G M) − tr(K⁻¹ UᵀZU)``; ``UᵀMU`` and ``UᵀZU`` for every cut
of a box come from 2-D prefix sums of the box's block of ``M`` and ``Z``, so all cuts of a box
cost ``O(L²)`` (``L`` its cells) and an accepted cut ``O(n²)`` (``Z`` is updated by the same
rank-2 algebra). ``M`` and ``Z`` are recomputed from the exact integer ``X`` at every level to
stop round-off drift.

Units: ``error`` is the paper's total error with ``P(ε,δ) = 1``; dpmatrix's total variance at
privacy cost ``pcost`` is ``error / pcost`` (:meth:`LSAResult.total_variance`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from ..errors import PlanError, WorkloadError
from .result import SolverResult, relative_gap
from .spectra import certified_sqrt_trace_gram

__all__ = ["LSAResult", "SeparatedLSA", "lsa", "lsa_generalized", "lsa_separated"]

Box = tuple[tuple[int, int], ...]  # per dimension [lo, hi)


@dataclass(frozen=True, eq=False, kw_only=True)
class LSAResult(SolverResult):
    """Output of the Level Selection Algorithm (a :class:`~dpmatrix._solvers.result.SolverResult`).

    LSA is greedy: ``status`` is ``"heuristic"``; ``solution`` is the tuple of levels,
    ``objective`` the total error, ``lower_bound`` the singular value bound
    ``(Σσ(W))² / n`` (Li & Miklau §3.2: no strategy has a smaller
    ``‖A‖²_{1→2} tr(WᵀW(AᵀA)⁻¹)``; computed with a rounding allowance), ``gap`` the relative
    gap to it and ``iterations`` the number of levels selected.

    Attributes
    ----------
    shape : tuple of int
        Domain shape (cells in C order).
    levels : tuple of tuple of Box
        The selected levels (each a partition of the cells into boxes), identity excluded
        (= ``solution``).
    error : float
        Total error ``‖A‖²_{1→2}·tr(WᵀW(AᵀA)⁻¹)`` (paper units, ``P(ε,δ) = 1``; = ``objective``).
    history : tuple of float
        Error after 0 (identity), 1, 2, … levels.
    n_queries : int
        Rows of the strategy as built: the ``n`` cells plus every level's boxes.
    n_distinct : int
        Distinct queries once redundant copies are merged (Theorem 3.2).
    """

    shape: tuple[int, ...]
    history: tuple[float, ...]
    n_queries: int
    n_distinct: int

    @property
    def levels(self) -> tuple[tuple[Box, ...], ...]:
        return self.solution

    @property
    def error(self) -> float:
        return self.objective

    @property
    def n_levels(self) -> int:
        return len(self.levels)

    @property
    def sensitivity2(self) -> float:
        """``‖A‖²_{1→2} = 1 + #levels`` (every level adds one query per cell)."""
        return 1.0 + len(self.levels)

    def total_variance(self, pcost: float = 1.0) -> float:
        """Total variance of the workload's answers at privacy cost ``pcost`` (dpmatrix units)."""
        return self.error / float(pcost)

    def strategy(self, *, reduced: bool = True) -> np.ndarray:
        """The strategy matrix: identity rows then every level's box indicators, or (``reduced``)
        each distinct query once, scaled by √(number of copies) (Theorem 3.2: equivalent)."""
        counts = _box_counts(self.shape, self.levels)
        n = math.prod(self.shape)
        if reduced:
            rows = [math.sqrt(c) * _indicator(self.shape, b) for b, c in counts.items()]
        else:
            rows = [np.eye(n)[i] for i in range(n)]
            rows += [_indicator(self.shape, b) for lev in self.levels for b in lev]
        return np.array(rows)


def _indicator(shape, box: Box) -> np.ndarray:
    v = np.zeros(shape)
    v[tuple(slice(lo, hi) for lo, hi in box)] = 1.0
    return v.reshape(-1)


def _box_counts(shape, levels) -> dict:
    counts: dict = {}
    for idx in np.ndindex(*shape):
        counts[tuple((i, i + 1) for i in idx)] = 1
    for lev in levels:
        for b in lev:
            counts[b] = counts.get(b, 0) + 1
    return counts


def _cells(shape, box: Box) -> np.ndarray:
    grids = np.meshgrid(*[np.arange(lo, hi) for lo, hi in box], indexing="ij")
    return np.ravel_multi_index(tuple(g.reshape(-1) for g in grids), shape)


def _spd_inverse(X: np.ndarray) -> np.ndarray:
    """``X⁻¹`` of a symmetric positive definite ``X`` by its Cholesky factor, symmetrized."""
    c = sla.cho_factor(X, lower=True, check_finite=False)
    M = sla.cho_solve(c, np.eye(len(X)), check_finite=False)
    return (M + M.T) / 2


class _State:
    """``X = AᵀA`` (exact), ``M = X⁻¹``, ``Z = M G M`` and ``tr(G M)``."""

    def __init__(self, G: np.ndarray, X: np.ndarray):
        self.G = G
        self.X = X
        self.refresh()

    def refresh(self) -> None:
        self.M = _spd_inverse(self.X)
        self.Z = self.M @ self.G @ self.M
        self.trGM = float(np.sum(self.G * self.M))

    def update(self, U: np.ndarray, D: np.ndarray) -> None:
        """``X ← X + U D Uᵀ`` with Woodbury updates of ``M`` and ``Z``."""
        F = self.M @ U
        K = np.linalg.inv(D) + U.T @ F
        Kinv = np.linalg.inv(K)
        Y = self.Z @ U
        S = U.T @ Y
        FK = F @ Kinv
        self.M -= FK @ F.T
        self.Z += -(Y @ Kinv) @ F.T - FK @ Y.T + FK @ S @ FK.T
        self.trGM -= float(np.sum(Kinv * S))  # tr(K⁻¹S), both symmetric
        self.X += U @ D @ U.T


_SPLIT_D = np.array([[0.0, -1.0], [-1.0, 0.0]])


def _table(B: np.ndarray) -> np.ndarray:
    """Summed-area table ``C[i, k] = Σ_{r<i, c<k} B[r, c]`` (shape ``(n+1, n+1)``)."""
    C = np.zeros((B.shape[0] + 1, B.shape[1] + 1))
    C[1:, 1:] = B.cumsum(0).cumsum(1)
    return C


class _Tables1D:
    """1-D fast path: only the summed-area tables of ``M`` and ``Z`` are kept between refreshes.

    Every cut of every interval ``[lo, hi)`` at ``p`` needs ``UᵀMU`` and ``UᵀZU`` (``U = [1[lo,p),
    1[p,hi)]``): four table look-ups each, vectorized over all candidates of a level. An accepted
    cut updates the tables by the same rank-2 Woodbury algebra (the table of ``f gᵀ`` is
    ``cumsum(f) cumsum(g)ᵀ``; ``cumsum(MU)`` is a difference of two table columns), ``O(n²)``.
    """

    def __init__(self, G: np.ndarray, X: np.ndarray):
        self.G = G
        self.X = X
        self.refresh()

    def refresh(self) -> None:
        M = _spd_inverse(self.X)
        Z = M @ self.G @ M
        self.trGM = float(np.sum(self.G * M))
        self.CM = _table(M)
        self.CZ = _table((Z + Z.T) / 2)

    @staticmethod
    def _q(C, r0, r1, c0, c1):
        return C[r1, c1] - C[r0, c1] - C[r1, c0] + C[r0, c0]

    def candidates(self, edges: np.ndarray):
        """Reduction of tr(GM) of every cut ``p`` of every interval of the level given by its
        sorted ``edges`` (0, the cut points, n), vectorized; returns ``(red, lo, p, hi)``."""
        n = len(self.X)
        free = np.ones(n + 1, dtype=bool)
        free[edges] = False
        p = np.flatnonzero(free)
        if len(p) == 0:
            return None
        j = np.searchsorted(edges, p)
        lo, hi = edges[j - 1], edges[j]
        q = self._q
        a, b, c = q(self.CM, lo, p, lo, p), q(self.CM, lo, p, p, hi), q(self.CM, p, hi, p, hi)
        az, bz, cz = q(self.CZ, lo, p, lo, p), q(self.CZ, lo, p, p, hi), q(self.CZ, p, hi, p, hi)
        b1 = b - 1.0
        red = (c * az - 2.0 * b1 * bz + a * cz) / (a * c - b1 * b1)
        return red, lo, p, hi

    def apply(self, lo: int, p: int, hi: int) -> None:
        CM, CZ = self.CM, self.CZ
        q = self._q
        a, b, c = q(CM, lo, p, lo, p), q(CM, lo, p, p, hi), q(CM, p, hi, p, hi)
        az, bz, cz = q(CZ, lo, p, lo, p), q(CZ, lo, p, p, hi), q(CZ, p, hi, p, hi)
        K = np.array([[a, b - 1.0], [b - 1.0, c]])
        S = np.array([[az, bz], [bz, cz]])
        Ki = np.linalg.inv(K)
        cF = np.stack([CM[:, p] - CM[:, lo], CM[:, hi] - CM[:, p]], axis=1)
        cY = np.stack([CZ[:, p] - CZ[:, lo], CZ[:, hi] - CZ[:, p]], axis=1)
        self.CM -= cF @ (Ki @ cF.T)
        B = np.hstack([cY, cF])
        KSK = Ki @ S @ Ki
        coef = np.block([[np.zeros((2, 2)), -Ki], [-Ki, KSK]])
        self.CZ += B @ (coef @ B.T)
        self.trGM -= float(np.sum(Ki * S))
        self.X[lo:p, p:hi] -= 1.0
        self.X[p:hi, lo:p] -= 1.0


def _best_cut(st: _State, shape, box: Box):
    """Best cut of one box: ``(reduction of tr(GM), dim, absolute position)`` or None."""
    one_d = len(shape) == 1
    if one_d:
        lo, hi = box[0]
        blocks = [(0, st.M[lo:hi, lo:hi], st.Z[lo:hi, lo:hi])]
    else:
        idx = _cells(shape, box)
        bshape = tuple(hi - lo for lo, hi in box)
        Mb = st.M[np.ix_(idx, idx)].reshape(bshape + bshape)
        Zb = st.Z[np.ix_(idx, idx)].reshape(bshape + bshape)
        d = len(shape)
        blocks = []
        for j in range(d):
            if bshape[j] < 2:
                continue
            axes = tuple(a for a in range(2 * d) if a not in (j, d + j))
            blocks.append((j, Mb.sum(axis=axes), Zb.sum(axis=axes)))
    best = None
    for j, Mj, Zj in blocks:
        L = Mj.shape[0]
        if L < 2:
            continue
        p = np.arange(1, L)
        a, b, c = _cut_sums(Mj, p)
        az, bz, cz = _cut_sums(Zj, p)
        b1 = b - 1.0
        det = a * c - b1 * b1
        red = (c * az - 2.0 * b1 * bz + a * cz) / det
        k = int(np.argmax(red))
        if best is None or red[k] > best[0]:
            best = (float(red[k]), j, box[j][0] + int(p[k]))
    return best


def _cut_sums(B: np.ndarray, p: np.ndarray):
    """For every cut ``p``: ``(v'ᵀBv', v'ᵀBv'', v''ᵀBv'')`` with ``v' = 1[:p]``, ``v'' = 1[p:]``."""
    L = B.shape[0]
    C = np.zeros((L + 1, L + 1))
    C[1:, 1:] = B.cumsum(0).cumsum(1)
    a = C[p, p]
    R = C[p, L]
    T = C[L, L]
    return a, R - a, T - 2.0 * R + a


def _as_gram(workload, gram: bool, n_expected: int | None = None) -> np.ndarray:
    G = np.asarray(workload, dtype=float)
    if G.ndim != 2 or G.size == 0 or not np.all(np.isfinite(G)):
        raise WorkloadError(f"the workload must be a finite non-empty 2-D matrix, got shape {G.shape}")
    if not gram:
        G = G.T @ G
    elif G.shape[0] != G.shape[1]:
        raise WorkloadError(f"a Gram matrix WᵀW must be square, got shape {G.shape}")
    if not np.any(G):
        raise WorkloadError("the workload is zero (every query is all-zero): there is nothing to answer")
    if n_expected is not None and G.shape[0] != n_expected:
        raise WorkloadError(f"the workload has {G.shape[0]} cells but the shape has {n_expected}")
    return G


def _apply_cut(st: _State, shape, box: Box, cut) -> list[Box]:
    """Replace ``box`` by its two halves in the strategy (rank-2 update); returns the halves."""
    _, j, pos = cut
    left = tuple((lo, pos) if d == j else (lo, hi) for d, (lo, hi) in enumerate(box))
    right = tuple((pos, hi) if d == j else (lo, hi) for d, (lo, hi) in enumerate(box))
    U = np.stack([_indicator(shape, left), _indicator(shape, right)], axis=1)
    st.update(U, _SPLIT_D)
    return [left, right]


def _run(G, shape, *, base_levels=(), start=None, max_levels=None, rule="best",
         tol=1e-12) -> LSAResult:
    n = math.prod(shape)
    whole: Box = tuple((0, s) for s in shape)
    start = list(start) if start is not None else [whole]
    levels = [tuple(lev) for lev in base_levels]
    X = np.eye(n)
    for lev in levels:
        for b in lev:
            v = _indicator(shape, b)
            X += np.outer(v, v)
    fast = rule == "best" and len(shape) == 1
    st = (_Tables1D if fast else _State)(G, X)
    err = (1 + len(levels)) * st.trGM
    history = [err]
    # a level that ties is kept (Program 4.1 line 10 uses ≤; round-off must not break exact ties,
    # e.g. AllPredicate(n), whose optimum needs a tying first level); ties could repeat, so the
    # number of levels is capped at 4n when no max_levels is given
    cap = max_levels if max_levels is not None else 4 * n
    while len(levels) < cap:
        X_before = st.X.copy()
        level = list(start)
        for b in level:
            v = _indicator(shape, b)
            st.X += np.outer(v, v)
        st.refresh()
        if fast:
            # the level as its sorted edges (the start is a partition into intervals)
            edges = np.array(sorted({0, n} | {b[0][0] for b in level}), dtype=np.int64)
            while True:
                cand = st.candidates(edges)
                if cand is None:
                    break
                red, lo, p, hi = cand
                k = int(np.argmax(red))
                if red[k] <= tol * st.trGM:
                    break
                st.apply(int(lo[k]), int(p[k]), int(hi[k]))
                edges = np.insert(edges, np.searchsorted(edges, p[k]), p[k])
            level = [((int(a), int(b)),) for a, b in zip(edges[:-1], edges[1:])]
        elif rule == "best":
            # Program 4.1 lines 4-9: the for-loop finds each box's best cut; δA is updated once
            # per iteration, with the cut that lowers the error most
            while True:
                cuts = [(_best_cut(st, shape, box), i) for i, box in enumerate(level)]
                cuts = [(c, i) for c, i in cuts if c is not None]
                if not cuts:
                    break
                cut, i = max(cuts, key=lambda ci: ci[0][0])
                if cut[0] <= tol * st.trGM:
                    break
                level[i:i + 1] = _apply_cut(st, shape, level[i], cut)
        else:
            # sweep: cut each box in turn whenever its best cut helps, until a pass cuts nothing
            changed = True
            while changed:
                changed = False
                i = 0
                while i < len(level):
                    cut = _best_cut(st, shape, level[i])
                    if cut is not None and cut[0] > tol * st.trGM:
                        level[i:i + 1] = _apply_cut(st, shape, level[i], cut)
                        changed = True
                        i += 2
                    else:
                        i += 1
        new_err = (2 + len(levels)) * st.trGM
        if new_err <= err * (1.0 + 1e-12):
            levels.append(tuple(level))
            err = new_err
            history.append(err)
        else:
            st.X = X_before
            break
    st.refresh()  # the reported error from the exact X (no accumulated round-off)
    err = (1 + len(levels)) * st.trGM
    counts = _box_counts(shape, levels)
    lower = certified_sqrt_trace_gram(G) ** 2 / n  # the SVD bound (Li & Miklau §3.2)
    return LSAResult(
        solution=tuple(levels), objective=float(err), lower_bound=min(lower, float(err)),
        gap=relative_gap(float(err), min(lower, float(err))), status="heuristic",
        iterations=len(levels), shape=tuple(shape), history=tuple(history),
        n_queries=int(n + sum(len(lev) for lev in levels)), n_distinct=int(len(counts)),
    )


def lsa(
    workload: np.ndarray,
    *,
    shape: Sequence[int] | None = None,
    gram: bool = False,
    max_levels: int | None = None,
    rule: str = "best",
) -> LSAResult:
    """Run the Level Selection Algorithm (Program 4.1) on an explicit workload.

    Parameters
    ----------
    workload : array
        ``m × n`` workload ``W`` (``gram=True``: ``WᵀW``; Program 4.1 only needs ``WᵀW``, §4.2).
    shape : sequence of int, optional
        Domain shape for multi-dimensional cuts (cells in C order); default ``(n,)``.
    gram : bool
        ``workload`` is ``WᵀW``.
    max_levels : int, optional
        Upper bound on the number of levels (the paper's ``k`` is ``max_levels + 1``); default
        ``4n`` (only reached if levels keep tying).
    rule : {"best", "sweep"}
        ``"best"`` (Program 4.1 as printed): each step applies the single best cut among all the
        level's boxes. ``"sweep"``: each box is cut in turn whenever its best cut helps (fewer
        evaluations; usually a slightly different strategy).

    Returns
    -------
    LSAResult

    Examples
    --------
    >>> import numpy as np
    >>> W = np.array([[1.0 if a <= j <= b else 0.0 for j in range(4)]
    ...               for a in range(4) for b in range(a, 4)])
    >>> r = lsa(W)
    >>> r.error <= 20.0   # never worse than the identity (error 20 for AllRange(4))
    True
    """
    n_cols = np.asarray(workload).shape[-1]
    shape = tuple(int(s) for s in shape) if shape is not None else (n_cols,)
    if any(s < 1 for s in shape):
        raise WorkloadError(f"shape entries must be positive, got {shape}")
    G = _as_gram(workload, gram, math.prod(shape))
    if rule not in ("best", "sweep"):
        raise PlanError(f"rule must be 'best' or 'sweep', got {rule!r}")
    if max_levels is not None and (isinstance(max_levels, bool) or int(max_levels) < 0):
        raise PlanError(f"max_levels must be a non-negative integer, got {max_levels!r}")
    return _run(G, shape, max_levels=max_levels, rule=rule)


def lsa_generalized(
    workload: np.ndarray,
    *,
    m: int | None = None,
    gram: bool = False,
    max_levels: int | None = None,
) -> LSAResult:
    """Workload generalization (§4.3.2) for a 1-D workload over ``n`` cells.

    Phase 1: merge the cells into ``m`` contiguous blocks (default ``m ≈ n^{1/3}``, the paper's
    choice), approximate the workload by ``W T`` with ``T`` the block-averaging matrix (``Gram
    Tᵀ G T``), and run LSA on the ``m`` blocks. Phase 2: expand those levels to the cells and keep
    adding levels on the full domain that start from the block partition and only cut inside
    blocks (the paper's "modified Program 4.1 over each merged cell", with error and sensitivity
    of the phase-1 strategy taken into account; here the blocks are processed together rather
    than as ``m`` separate problems). The error reported is the exact error on the original
    workload.
    """
    G = _as_gram(workload, gram)
    n = G.shape[0]
    m = int(m) if m is not None else max(1, round(n ** (1 / 3)))
    if not 1 <= m <= n:
        raise PlanError(f"the number of blocks m must be in [1, {n}], got {m}")
    edges = [n * j // m for j in range(m + 1)]
    T = np.zeros((n, m))
    for j in range(m):
        T[edges[j]:edges[j + 1], j] = 1.0 / (edges[j + 1] - edges[j])
    phase1 = _run(T.T @ G @ T, (m,), max_levels=max_levels)
    base = [tuple(((edges[lo], edges[hi]),) for ((lo, hi),) in lev) for lev in phase1.levels]
    blocks = [((edges[j], edges[j + 1]),) for j in range(m)]
    rest = None if max_levels is None else max(0, max_levels - len(base))
    return _run(G, (n,), base_levels=base, start=blocks, max_levels=rest)


@dataclass(frozen=True, eq=False)
class SeparatedLSA:
    """Workload separation (§4.3.1): one LSA strategy per attribute.

    ``total_error`` is ``(Σ_i √(s_i e_i))²`` — ``e_i`` and ``s_i`` the error and ``‖A_i‖²`` of part
    ``i`` — the least total error of the parts under the best split of the privacy budget
    between them (paper units; dpmatrix total variance = ``total_error / pcost``). It is an upper
    bound on the exact error of the stacked strategy ``[t_i A_i ⊗ 𝟏ᵀ]``, whose least-squares
    answers can also pool the totals the parts share.
    """

    parts: tuple[LSAResult, ...]
    scales: tuple[float, ...]
    total_error: float

    def total_variance(self, pcost: float = 1.0) -> float:
        return self.total_error / float(pcost)


def lsa_separated(
    workloads: Sequence[np.ndarray], *, gram: bool = False, max_levels: int | None = None
) -> SeparatedLSA:
    """Workload separation (§4.3.1, Theorem 4.2) for predicate queries over one-way marginals.

    Parameters
    ----------
    workloads : sequence of arrays
        Workload ``W_i`` (``m_i × n_i``) on the one-way marginal of attribute ``i`` (``gram``:
        ``W_iᵀW_i``).
    gram, max_levels :
        As :func:`lsa`.

    Returns
    -------
    SeparatedLSA
        Per-attribute LSA results, the scale ``t_i`` of each part at unit privacy cost
        (``Σ t_i² s_i = 1``) and the combined error.
    """
    if not workloads:
        raise WorkloadError("workload separation needs at least one per-attribute workload")
    parts = tuple(lsa(W, gram=gram, max_levels=max_levels) for W in workloads)
    e = np.array([p.error / p.sensitivity2 for p in parts])  # tr(G_i M_i) at unit scale
    s = np.array([p.sensitivity2 for p in parts])
    root = np.sqrt(e * s)
    S = float(root.sum())
    # t_i² ∝ √(e_i/s_i), normalised so that Σ t_i² s_i = 1
    t2 = np.sqrt(e / s) / S
    return SeparatedLSA(parts, tuple(float(math.sqrt(x)) for x in t2), S * S)
