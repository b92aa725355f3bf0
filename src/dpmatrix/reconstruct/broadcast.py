"""Broadcast reconstruction of plain marginals: every table as a few sums of shared pieces.

For ResidualPlanner (Algorithm 4: identity bases, ``a_j = 1/n_j``) the marginal on a closure
member ``M`` (``k = |M|`` attributes) is (Algorithm 2, Theorem 4.4)::

    x̂_M = r_M + Σ_{A ⊊ M} r_A / Π_{j ∈ M∖A} n_j,         r_A = (⊗_{i∈A} G_i) ω_A.

With ``G_n = Sub_n⁺ = (1/n)[1ᵀ; 11ᵀ − nI]`` one has ``G ω = (J/n − I) p = −C p`` where ``p`` is
``ω`` padded with a leading zero and ``C = I − J/n`` centres a vector. Hence
``r_M = (−1)^k (⊗ C) P_M = (−1)^k Σ_{T ⊆ M} (−1)^{|T|} mean_T(P_M)`` (``P_M`` the padded
``ω_M``, ``mean_T`` the mean over the axes ``T`` broadcast back). Every term but ``(−1)^k P_M``
lives on fewer than ``k`` axes, and so does every ``r_A / Π n`` with ``A ⊊ M``. Each such term is
added to one *face* ``F_j`` (the axes of ``M`` without its ``j``-th: the first axis the term
does not span), and the table is::

    x̂_M = F_1 ⊕ F_2 ⊕ … ⊕ F_k + (−1)^k P_M        (⊕: broadcast sum)

— ``k`` broadcast passes over the table, whatever the number of subsets, with the faces built
from the small lower-order residuals (expanded once per subset and shared by every marginal that
contains it) and from sums of ``ω_M`` over its axes. Marginals of one arity and shape are
processed together (a batch of stacked arrays), in batches of a bounded number of cells; the
noisy vectors are read per batch (from memory or from the on-disk store,
:mod:`dpmatrix.reconstruct.store`), so memory stays bounded.

The variances are the closed form of Theorem 4.4, ``Σ_{A⊆M} σ²_A ⊗_{i∈A} d_in ⊗_{j∉A} d_out``;
for Algorithm 4's bases ``d_in = (n−1)/n`` and ``d_out = 1/n²`` are constant (computed in closed
form, not as the numerical diagonal of ``G ΓΓᵀ Gᵀ``), so one number per marginal is computed and
broadcast — never recomputed per cell.

Only plans whose every basis is the identity (``Plan.is_plain``) use this module; ResidualPlanner+
strategies and generalized marginals keep the Kronecker-product path of
:class:`~dpmatrix.reconstruct.measurements.Measurements`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..mechanisms.residual import apply_pinv

__all__ = ["MarginalBlock", "plain_batches", "plain_estimate", "plain_variance"]

# cells of workload marginals reconstructed together (about 8 MB of estimates)
BATCH_CELLS = 1 << 20
# cells combined at once inside a block (about 0.5 MB of table: the pieces stay in cache)
CHUNK_CELLS = 1 << 16
# expanded lower-order residuals kept for sharing, in floats (about 400 MB)
CACHE_FLOATS = 50_000_000


@dataclass(frozen=True, eq=False)
class MarginalBlock:
    """Reconstructed marginals of one arity and shape.

    Attributes
    ----------
    positions : numpy.ndarray
        Workload positions of the marginals (int64, ascending), length ``m``.
    attrs : numpy.ndarray
        ``(m, k)`` attribute positions of each marginal (domain order).
    shape : tuple of int
        Shape of each table.
    estimate : numpy.ndarray
        ``(m,) + shape``: the unbiased estimates (Algorithm 2).
    variance : numpy.ndarray
        Exact per-cell variances (Theorem 4.4), broadcastable to ``estimate``: ``(m,) + (1,)*k``
        when they are constant within each table (Algorithm 4), else ``(m,) + shape``.
    """

    positions: np.ndarray
    attrs: np.ndarray
    shape: tuple[int, ...]
    estimate: np.ndarray
    variance: np.ndarray


class _Expanded:
    """Expanded residuals ``r_A`` of lower-order closure members, one buffer per shape, gathered
    by closure position; emptied when they would exceed :data:`CACHE_FLOATS`."""

    def __init__(self, meas, max_floats: int | None = None):
        self.meas = meas
        self.max_floats = CACHE_FLOATS if max_floats is None else max_floats
        self.n = len(meas.plan.closure)
        self._clear()

    def _clear(self) -> None:
        self.slots: dict[tuple[int, ...], np.ndarray] = {}
        self.bufs: dict[tuple[int, ...], list] = {}  # shape -> [array, rows used]
        self.floats = 0

    def gather(self, ci: np.ndarray, attrs0: tuple[int, ...]) -> np.ndarray:
        """Stacked ``r_A`` of the closure members ``ci`` (all of the shape of ``attrs0``)."""
        plan = self.meas.plan
        bases = tuple(plan.bases[a] for a in attrs0)
        shape = tuple(b.n for b in bases)
        cells = math.prod(shape)
        slot = self.slots.get(shape)
        if slot is None:
            slot = self.slots[shape] = np.full(self.n, -1, dtype=np.int64)
        need = np.unique(ci[slot[ci] < 0])
        if need.size:
            if self.floats + need.size * cells > self.max_floats:
                self._clear()  # start afresh: everything this call needs is recomputed
                slot = self.slots[shape] = np.full(self.n, -1, dtype=np.int64)
                need = np.unique(ci)
            got = apply_pinv(bases, self.meas._noisy_stack(need, plan.closure.sets))
            buf = self.bufs.get(shape)
            if buf is None:
                buf = self.bufs[shape] = [np.empty((max(need.size, 64),) + shape), 0]
            arr, used = buf
            if used + need.size > len(arr):
                grown = np.empty((max(2 * len(arr), used + need.size),) + shape)
                grown[:used] = arr[:used]
                buf[0] = arr = grown
            arr[used : used + need.size] = got
            slot[need] = np.arange(used, used + need.size)
            buf[1] = used + need.size
            self.floats += need.size * cells
        return self.bufs[shape][0][slot[ci]]


def _face_of(cols: tuple[int, ...], k: int) -> int:
    """The face a term spanning the axes ``cols`` goes to: the first axis it does not span."""
    return next(c for c in range(k) if c not in cols)


def _lower_faces(lower: dict, shape: tuple[int, ...], m: int) -> list[np.ndarray]:
    """``F_j``'s lower-order part, ``Σ r_A / Π_{M∖A} n`` over the subsets ``A`` sent to face
    ``j`` (those holding the axes before ``j`` and not ``j``: it depends on ``M∖{j}`` only, so
    it is computed once per distinct face and shared by every marginal that has it)."""
    k = len(shape)
    full = tuple(range(k))
    faces = [np.zeros((m,) + tuple(1 if c == j else shape[c] for c in full)) for j in range(k)]
    for cols, r_a in lower.items():
        expand = (m,) + tuple(shape[c] if c in cols else 1 for c in full)
        scale = float(math.prod(shape[c] for c in full if c not in cols))
        faces[_face_of(cols, k)] += r_a.reshape(expand) / scale
    return faces


def _faces(omega: np.ndarray, faces: list[np.ndarray], shape: tuple[int, ...]) -> list[np.ndarray]:
    """The ``k`` faces of a batch (see the module docstring): ``omega`` is ``(m,) + (n−1,…)``,
    ``faces`` their lower-order parts (:func:`_lower_faces`, fresh arrays: updated in place)
    to which the sums of ``ω`` over the axes are added."""
    k = len(shape)
    full = tuple(range(k))
    # sums of ω over every nonempty set T of axes (keepdims), from smaller ones
    sums: dict[tuple[int, ...], np.ndarray] = {(): omega}
    for r in range(1, k + 1):
        for T in itertools.combinations(full, r):
            sums[T] = _axis_sum(sums[T[:-1]], 1 + T[-1])
    for T, s in sums.items():
        if not T:
            continue
        support = tuple(c for c in full if c not in T)
        coef = (-1.0) ** (k + len(T)) / float(math.prod(shape[c] for c in T))
        view = faces[T[0]][(slice(None),) + tuple(slice(1, None) if c in support else slice(None) for c in full)]
        view += coef * s  # padded ω: the support axes' leading entry stays untouched (zero)
    return faces


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _axis_sum(x: np.ndarray, axis: int) -> np.ndarray:
    """``x`` summed along ``axis`` (kept, size 1). ``einsum``'s loop adds along the axis in order
    for every fibre, whatever the other axes are: a table summed alone or in a batch gets the
    same bits (and it is several times faster than ``np.add.reduce`` on short inner axes)."""
    if x.ndim > len(_LETTERS):  # pragma: no cover - 26-way marginals
        return np.add.reduce(x, axis=axis, keepdims=True)
    sub = _LETTERS[: x.ndim]
    return np.expand_dims(np.einsum(f"{sub}->{sub.replace(sub[axis], '')}", x), axis)


def _assemble(omega: np.ndarray, faces: list[np.ndarray], shape: tuple[int, ...], out=None) -> np.ndarray:
    """``F_1 ⊕ … ⊕ F_k + (−1)^k P``: the tables of a batch, ``(m,) + shape`` (into ``out``)."""
    m, k = omega.shape[0], len(shape)
    if out is None:
        out = np.empty((m,) + shape)
    if k == 0:
        out[...] = omega.reshape(m)
        return out
    if k == 1:
        out[...] = faces[0]
    else:
        np.add(faces[0], faces[1], out=out)
        for f in faces[2:]:
            out += f
    inner = out[(slice(None),) + (slice(1, None),) * k]
    if k % 2:
        inner -= omega
    else:
        inner += omega
    return out


def _factors(n: int) -> tuple[float, float]:
    """Algorithm 4's per-attribute variance factors in closed form: ``d_in = (n−1)/n`` (the
    diagonal of the centring projection ``K = I − J/n``) and ``d_out = 1/n²``."""
    return (n - 1) / n, 1.0 / (n * n)


def _variances(plan, rows: np.ndarray, ci: dict, shape: tuple[int, ...]) -> np.ndarray:
    """Theorem 4.4's variances, one number per table (the factors are constant along every
    axis), summed over the subsets in the order of :func:`_subset_order`; ``(m,) + (1,)*k``."""
    m, k = rows.shape
    fac = [_factors(n) for n in shape]
    var = np.zeros(m)
    for cols, idx in ci.items():
        term = plan.sigma2[idx]
        for c in range(k):
            term = term * fac[c][0 if c in cols else 1]
        var += term
    return var.reshape((m,) + (1,) * k)


def plain_variance(plan, key: tuple[int, ...]) -> np.ndarray:
    """Exact per-cell variances of the marginal on ``key`` (Theorem 4.4, Algorithm 4's closed
    form), with the bits of :func:`plain_batches`; shaped like the table."""
    shape = tuple(plan.domain.sizes[a] for a in key)
    for a in key:
        plan.cell_basis(a)
    fac = [_factors(n) for n in shape]
    var = 0.0
    pos = {a: c for c, a in enumerate(key)}
    for sub, s2 in plan._subset_terms(key):
        term = np.float64(s2)
        cols = {pos[a] for a in sub}
        for c in range(len(key)):
            term = term * fac[c][0 if c in cols else 1]
        var = var + term
    return np.full(shape, var)


def _subset_order(k: int) -> list[tuple[int, ...]]:
    return [cols for r in range(k + 1) for cols in itertools.combinations(range(k), r)]


def _omega(meas, positions: np.ndarray, sets) -> np.ndarray:
    """Stacked noisy vectors of the closure members at ``positions`` (read only here: a single
    in-memory vector is used as it is, without the copy a stack would make)."""
    if len(positions) == 1 and getattr(meas.noisy, "stack", None) is None:
        return np.asarray(meas.noisy[sets[int(positions[0])]], dtype=float)[None]
    return meas._noisy_stack(positions, sets)


def _block(meas, rows: np.ndarray, shape: tuple[int, ...], expanded: _Expanded):
    """Estimates and variances of the marginals ``rows`` (one shape): ``(answerable, est, var)``."""
    plan = meas.plan
    closure = plan.closure
    g, k = rows.shape
    order = _subset_order(k)
    idx = {cols: closure.indices(rows[:, cols]) if cols else np.full(g, closure.index(()))
           for cols in order}  # fmt: skip
    ok = np.ones(g, dtype=bool)
    for cols in order:
        ok &= idx[cols] >= 0
        ok[ok] &= plan.measured[idx[cols][ok]]
    if not ok.any():
        return ok, None, None
    if not ok.all():
        rows = rows[ok]
        idx = {cols: v[ok] for cols, v in idx.items()}
    top = tuple(range(k))
    m = len(rows)
    # the lower-order part of each face, once per distinct face (shared by the marginals)
    shared = []
    for j in range(k):
        rest = tuple(c for c in top if c != j)
        _, first, inv = np.unique(idx[rest], return_index=True, return_inverse=True)
        lower = {cols: expanded.gather(idx[cols][first], tuple(int(a) for a in rows[0, list(cols)]))
                 for cols in order[:-1] if _face_of(cols, k) == j}  # fmt: skip
        shared.append((_lower_faces(lower, shape, len(first))[j], np.asarray(inv).reshape(-1)))
    est = np.empty((m,) + shape)
    # the arithmetic runs on chunks that stay in the processor's cache (the pieces of a chunk
    # are read, combined and written once); the block's bookkeeping is done once per block
    step = max(1, CHUNK_CELLS // max(1, math.prod(shape)))
    for a in range(0, m, step):
        b = min(m, a + step)
        omega = _omega(meas, idx[top][a:b], closure.sets)
        faces = [q[inv[a:b]] for q, inv in shared]
        _assemble(omega, _faces(omega, faces, shape), shape, out=est[a:b])
    return ok, est, _variances(plan, rows, idx, shape)


def plain_batches(
    meas, *, max_cells: int | None = None, cache_floats: int | None = None
) -> Iterator[list[MarginalBlock]]:
    """Every answerable marginal of a plain workload, reconstructed by broadcast sums.

    Yields, for consecutive runs of workload marginals holding about ``max_cells`` cells, the
    list of their :class:`MarginalBlock` (one per arity and shape; together they cover the run's
    answerable marginals — a zero-weight marginal whose residuals were not measured is left out).

    Parameters
    ----------
    meas : Measurements
        Measurements of a plan with ``plan.is_plain``.
    max_cells : int, optional
        Cells per batch (default :data:`BATCH_CELLS`): bounds the memory in use.
    cache_floats : int, optional
        Budget of the shared lower-order residuals (default :data:`CACHE_FLOATS`).

    Returns
    -------
    iterator of list of MarginalBlock

    Examples
    --------
    >>> import numpy as np, pandas as pd, dpmatrix as dm
    >>> plan = dm.plan(dm.Workload.marginals(dm.Domain.from_sizes([2, 3, 2]), 2), pcost=1.0)
    >>> meas = plan.measure(pd.DataFrame({"a0": [0, 1], "a1": [2, 0], "a2": [1, 1]}),
    ...                     rng=np.random.default_rng(0))
    >>> [(b.shape, len(b.positions)) for batch in plain_batches(meas) for b in batch]
    [((2, 3), 1), ((2, 2), 1), ((3, 2), 1)]
    """
    plan = meas.plan
    wk = plan.workload
    sizes = np.asarray(plan.domain.sizes, dtype=np.int64)
    limit = BATCH_CELLS if max_cells is None else int(max_cells)
    n = len(wk)
    arity = np.empty(n, dtype=np.int64)
    row_of = np.empty(n, dtype=np.int64)
    groups = wk._groups
    for k, (pos, _) in groups.items():
        arity[pos] = k
        row_of[pos] = np.arange(len(pos))
    expanded = _Expanded(meas, cache_floats)
    cum = np.cumsum(wk.cells)
    start = 0
    while start < n:
        stop = int(np.searchsorted(cum, (cum[start - 1] if start else 0) + limit, "right"))
        stop = min(max(stop, start + 1), n)
        batch = np.arange(start, stop)
        start = stop
        out: list[MarginalBlock] = []
        for k in np.unique(arity[batch]).tolist():
            members = batch[arity[batch] == k]
            rows = groups[k][1][row_of[members]]
            shapes = sizes[rows] if k else np.zeros((len(members), 0), dtype=np.int64)
            uniq, inv = np.unique(shapes, axis=0, return_inverse=True)
            inv = np.asarray(inv).reshape(-1)
            for u in range(len(uniq)):
                sel = np.flatnonzero(inv == u)
                shape = tuple(int(v) for v in uniq[u])
                ok, est, var = _block(meas, rows[sel], shape, expanded)
                if est is None:
                    continue
                out.append(MarginalBlock(members[sel][ok], rows[sel][ok], shape, est, var))
        yield out


def plain_estimate(meas, key: tuple[int, ...]) -> np.ndarray:
    """The table of one closure member ``key`` by the same arithmetic as :func:`plain_batches`
    (so that a marginal asked alone and one streamed in a batch have the same bits)."""
    plan = meas.plan
    k = len(key)
    shape = tuple(plan.domain.sizes[a] for a in key)
    if key not in meas.noisy:
        meas.residual(key)  # raises the NotMeasuredError that says what to do
    omega = np.asarray(meas.noisy[key], dtype=float)[None]
    lower = {cols: meas.residual(tuple(key[c] for c in cols))[None] for cols in _subset_order(k)[:-1]}
    return _assemble(omega, _faces(omega, _lower_faces(lower, shape, 1), shape), shape)[0]
