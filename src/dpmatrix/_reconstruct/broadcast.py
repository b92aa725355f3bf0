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

— ``k`` broadcast passes over the table, whatever the number of subsets. A face's lower-order
part (``Σ r_A / Π n`` over the ``A ⊊ M`` sent to it) depends on ``M∖{j}`` and ``n_j`` only: it is
built once per pass from the expanded lower-order residuals (each expanded once) and shared by
every marginal that has that face. The rest of a face is ``coef_T · Σ_T P`` for the sets ``T`` of
axes whose first axis is ``j`` (``coef_T = (−1)^{k+|T|} / Π_{c∈T} n_c``), each sum of ``P`` over
``T`` taken from a smaller one.

The tables are made in chunks of about :data:`CHUNK_CELLS` cells of one shape, in the processor's
cache: the noisy vectors are copied once into a zero-bordered work array ``P``, summed along each
axis, the faces completed, and the tables written as ``P`` plus ``k`` broadcast faces — the same
``k`` passes as the plain-numpy floor of ``benchmarks/bench_broadcast.py``. The noisy vectors of
a chunk are read without a copy when they are stored back to back (measurement stores them so,
:mod:`dpmatrix._reconstruct.stacked`; the on-disk store reads them in long runs,
:mod:`dpmatrix._reconstruct.store`). :func:`plain_blocks` writes the tables into one reused
buffer; only the bookkeeping of a run of marginals (positions, variances) and the shared pieces
are kept, so memory stays bounded whatever the number of marginals.

The variances are the closed form of Theorem 4.4, ``Σ_{A⊆M} σ²_A ⊗_{i∈A} d_in ⊗_{j∉A} d_out``;
for Algorithm 4's bases ``d_in = (n−1)/n`` and ``d_out = 1/n²`` are constant (computed in closed
form, not as the numerical diagonal of ``G ΓΓᵀ Gᵀ``), so one number per marginal is computed and
broadcast — never recomputed per cell.

Only plans whose every basis is the identity (``Plan.is_plain``) use this module; ResidualPlanner+
strategies and generalized marginals keep the Kronecker-product path of
:class:`~dpmatrix._reconstruct.measurements.Measurements`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .._mechanisms.residual import apply_pinv
from ..errors import WorkloadError
from . import fused

__all__ = ["MarginalBlock", "plain_batches", "plain_blocks", "plain_estimate", "plain_block_batches", "plain_variance"]

# cells of workload marginals reconstructed together by plain_batches (8 MB of estimates)
BATCH_CELLS = 1 << 20
# cells of workload marginals whose bookkeeping plain_blocks does together (no table memory)
PREPARE_CELLS = 1 << 23
# cells combined at once (about 0.5 MB of tables: the pieces of a chunk stay in cache)
CHUNK_CELLS = 1 << 16
# cells of the reused buffer of plain_blocks (0.5 MB: written and read while in cache)
BLOCK_CELLS = 1 << 16
# expanded lower-order residuals and lower-order faces kept for sharing, in floats (400 MB)
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


class _Pieces:
    """Arrays of lower-order pieces found by closure position: one buffer per kind of piece
    (``key``), each piece computed once and kept until the pieces would exceed ``max_floats``
    (then everything is dropped and recomputed on demand). A caller holds the buffer it was
    given: later growth or clearing replaces the cache's buffers, never their contents."""

    def __init__(self, n_positions: int, max_floats: int):
        self.n = n_positions
        self.max_floats = max_floats
        self._clear()

    def _clear(self) -> None:
        self.slots: dict = {}
        self.bufs: dict = {}  # key -> [array, rows used]
        self.floats = 0

    def find(self, key, shape: tuple[int, ...], positions: np.ndarray, compute) -> tuple[np.ndarray, np.ndarray]:
        """``(buffer, rows)``: the pieces of ``positions`` are ``buffer[rows]``. A missing piece
        is made by ``compute(need, where)`` (``need`` distinct positions, ``where`` the index in
        ``positions`` of each one's first occurrence), which returns them stacked."""
        cells = math.prod(shape)
        slot = self.slots.get(key)
        if slot is None:
            slot = self._new_slots(key)
        missing = slot[positions] < 0
        if missing.any():
            at = np.flatnonzero(missing)
            need, first = np.unique(positions[at], return_index=True)
            if self.floats + need.size * cells > self.max_floats:
                self._clear()  # start afresh: everything this call needs is recomputed
                slot = self._new_slots(key)
                need, at = np.unique(positions, return_index=True)
                first = np.arange(need.size)
            got = compute(need, at[first])
            buf = self.bufs.get(key)
            if buf is None:
                buf = self.bufs[key] = [np.empty((max(need.size, 64),) + shape), 0]
            arr, used = buf
            if used + need.size > len(arr):
                grown = np.empty((max(2 * len(arr), used + need.size),) + shape)
                grown[:used] = arr[:used]
                buf[0] = arr = grown
            arr[used : used + need.size] = got
            slot[need] = np.arange(used, used + need.size)
            buf[1] = used + need.size
            self.floats += need.size * cells
        return self.bufs[key][0], slot[positions]

    def _new_slots(self, key) -> np.ndarray:
        slot = self.slots[key] = np.full(self.n, -1, dtype=np.int64)
        self.floats += self.n  # the index counts too (one int64 per closure member)
        return slot


class _Expanded:
    """Expanded residuals ``r_A = (⊗ G_i) ω_A`` of lower-order closure members, one buffer per
    shape, gathered by closure position (:class:`_Pieces`)."""

    def __init__(self, meas, max_floats: int | None = None):
        self.meas = meas
        self.pieces = _Pieces(len(meas.plan.closure), CACHE_FLOATS if max_floats is None else max_floats)

    def gather(self, ci: np.ndarray, attrs0: tuple[int, ...]) -> np.ndarray:
        """Stacked ``r_A`` of the closure members ``ci`` (all of the shape of ``attrs0``)."""
        plan = self.meas.plan
        bases = tuple(plan.bases[a] for a in attrs0)
        shape = tuple(b.n for b in bases)

        def compute(need, _where):
            return apply_pinv(bases, self.meas._noisy_stack(need, plan.closure.sets))

        buf, rows = self.pieces.find(shape, shape, ci, compute)
        return buf[rows]


def _face_of(cols: tuple[int, ...], k: int) -> int:
    """The face a term spanning the axes ``cols`` goes to: the first axis it does not span."""
    return next(c for c in range(k) if c not in cols)


def _face_shape(shape: tuple[int, ...], j: int) -> tuple[int, ...]:
    return tuple(1 if c == j else n for c, n in enumerate(shape))


def _lower_face(lower: dict, shape: tuple[int, ...], j: int, m: int) -> np.ndarray:
    """``F_j``'s lower-order part, ``Σ r_A / Π_{M∖A} n`` over the subsets ``A`` sent to face
    ``j`` (those holding the axes before ``j`` and not ``j``: it depends on ``M∖{j}`` only, so
    it is computed once per distinct face and shared by every marginal that has it). ``lower``
    maps those subsets' axes (in :func:`_subset_order`) to their stacked ``r_A``."""
    k = len(shape)
    face = np.zeros((m,) + _face_shape(shape, j))
    for cols, r_a in lower.items():
        expand = (m,) + tuple(shape[c] if c in cols else 1 for c in range(k))
        scale = float(math.prod(shape[c] for c in range(k) if c not in cols))
        face += r_a.reshape(expand) / scale
    return face


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class _SumStep:
    """One sum of ``P`` over a set ``T`` of axes (from the sum over ``T`` without its last axis),
    and where ``coef · Σ_T P`` goes: face ``T[0]`` (``P`` is zero at index 0 of every axis, so the
    sum is already zero there on the axes it keeps, as ``ω`` padded)."""

    parent: int  # index of the step summed from (−1: ``P`` itself)
    subscripts: str  # einsum subscripts removing the axis
    keep: tuple[int, ...]  # the kept-dims shape of the sum without the batch axis
    face: int
    coef: float


@dataclass(frozen=True)
class _Recipe:
    """Everything about a table shape the per-chunk arithmetic needs, computed once."""

    shape: tuple[int, ...]
    inner: tuple  # index of ``P``'s ω part: the entries 1: of every axis
    borders: tuple  # indices of the rest of ``P`` (index 0 on axis c, 1: before it), which is zero
    steps: tuple[_SumStep, ...]
    coefs: np.ndarray  # the steps' coefficients, in order (for the compiled kernel)


_RECIPES: dict[tuple[int, ...], _Recipe] = {}


def _recipe(shape: tuple[int, ...]) -> _Recipe:
    """The sums of ``ω`` over every nonempty set ``T`` of axes (each from a smaller one), with
    their coefficients ``(−1)^{k+|T|} / Π_{c∈T} n_c`` and faces (see the module docstring)."""
    rec = _RECIPES.get(shape)
    if rec is not None:
        return rec
    k = len(shape)
    full = tuple(range(k))
    if k + 1 > len(_LETTERS):  # pragma: no cover - 26-way marginals
        raise ValueError("marginals of more than 25 attributes are not supported by the broadcast path")
    sub = _LETTERS[: k + 1]
    order = [T for r in range(1, k + 1) for T in itertools.combinations(full, r)]
    at = {T: i for i, T in enumerate(order)}
    steps = []
    for T in order:
        removed = sub[1 + T[-1]]
        steps.append(_SumStep(
            parent=at.get(T[:-1], -1),
            subscripts=f"{sub}->{sub.replace(removed, '')}",
            keep=tuple(1 if c in T else shape[c] for c in full),
            face=T[0],
            coef=(-1.0) ** (k + len(T)) / float(math.prod(shape[c] for c in T)),
        ))  # fmt: skip
    borders = tuple((slice(None),) + (slice(1, None),) * c + (0,) for c in full)
    rec = _Recipe(shape, (slice(None),) + (slice(1, None),) * k, borders, tuple(steps),
                  np.array([st.coef for st in steps]))
    if len(_RECIPES) < 256:
        _RECIPES[shape] = rec
    return rec


def _tables(omega: np.ndarray, faces: list[np.ndarray], rec: _Recipe, out: np.ndarray,
            compiled: bool = False) -> np.ndarray:
    """The tables of a chunk, ``F_1 ⊕ … ⊕ F_k + (−1)^k P`` (the module docstring), into ``out``.

    With ``compiled``, three-way tables are made by :func:`.fused.tables3` (the same formula in
    one compiled loop per table; ``faces`` are then read only). Otherwise with numpy:

    ``omega`` is ``(m,) + (n−1,…)`` (read only) and ``faces`` their faces' lower-order parts,
    ``(m,)`` + face shape (completed in place). ``P`` is first written into ``out`` itself (``ω``
    at the entries 1: of every axis, zeros elsewhere). Then ``coef_T · Σ_T P`` is added to face
    ``T[0]`` for every nonempty set ``T`` of axes, each sum taken from a smaller one (sums along
    an axis use ``einsum``, whose loop adds along the axis in order for every fibre whatever the
    other axes are: a table computed alone or in a chunk gets the same bits), and the tables are
    ``k`` in-place passes of broadcast sums (as in the plain-numpy floor of the benchmark)."""
    m, k = omega.shape[0], len(rec.shape)
    if k == 0:
        out[...] = omega.reshape(m)
        return out
    if compiled and k == 3:
        return fused.tables3(omega, faces, rec.coefs, out)
    for border in rec.borders:
        out[border] = 0.0
    np.copyto(out[rec.inner], omega)
    sums: list[np.ndarray] = []
    for st in rec.steps:
        sums.append(np.einsum(st.subscripts, out if st.parent < 0 else sums[st.parent]).reshape((m,) + st.keep))
    for st, s in zip(rec.steps, sums):  # (scaled in place once every sum is taken)
        np.multiply(s, st.coef, out=s)
        np.add(faces[st.face], s, out=faces[st.face])
    if k % 2:
        np.subtract(faces[0], out, out=out)
    else:
        np.add(out, faces[0], out=out)
    for f in faces[1:]:
        out += f
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
    """Stacked noisy vectors of the closure members at ``positions``, as floats (read only
    here: a single in-memory vector is used as it is, without the copy a stack would make)."""
    if len(positions) == 1 and getattr(meas.noisy, "stack", None) is None:
        return np.asarray(meas.noisy[sets[int(positions[0])]], dtype=float)[None]
    return meas._noisy_stack(positions, sets)


class _Work:
    """Work arrays of a pass for each table shape (the faces of a chunk of at most
    :data:`CHUNK_CELLS` cells), reused by every chunk."""

    def __init__(self, chunk_cells: int):
        self.chunk_cells = chunk_cells
        self.arrays: dict[tuple[int, ...], tuple[int, list[np.ndarray]]] = {}

    def get(self, shape: tuple[int, ...]) -> tuple[int, list[np.ndarray]]:
        """``(tables per chunk, faces)``."""
        got = self.arrays.get(shape)
        if got is None:
            step = max(1, self.chunk_cells // max(1, math.prod(shape)))
            got = self.arrays[shape] = (step, [np.empty((step,) + _face_shape(shape, j)) for j in range(len(shape))])
        return got


@dataclass(frozen=True, eq=False)
class _Prepared:
    """The bookkeeping of a block, done once: which marginals are answerable, the closure
    positions of their noisy vectors, where their lower-order faces are, and the variances."""

    ok: np.ndarray
    rows: np.ndarray
    top: np.ndarray  # closure positions of the marginals themselves
    faces: list  # per face j: (buffer of lower-order parts, row of each marginal's part)
    variance: np.ndarray
    runs: tuple | None  # where the noisy vectors are stored, if the mapping tells (StackedAnswers.runs)


def _prepare(meas, rows: np.ndarray, shape: tuple[int, ...], expanded: _Expanded, faces: _Pieces) -> _Prepared | None:
    """:class:`_Prepared` for the marginals ``rows`` (one shape); None if none is answerable.

    Face ``j``'s lower-order part depends on ``M∖{j}`` only (and on ``n_j``): it is made once
    per pass for each such set (``faces``, keyed by the shape and ``j``) and shared by every
    marginal that has it."""
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
        return None
    if not ok.all():
        rows = rows[ok]
        idx = {cols: v[ok] for cols, v in idx.items()}
    top = tuple(range(k))
    found = []
    for j in range(k):
        terms = [cols for cols in order[:-1] if _face_of(cols, k) == j]

        def compute(need, where, j=j, terms=terms):
            lower = {cols: expanded.gather(idx[cols][where], tuple(int(a) for a in rows[0, list(cols)]))
                     for cols in terms}  # fmt: skip
            return _lower_face(lower, shape, j, len(need))

        rest = tuple(c for c in top if c != j)
        found.append(faces.find((shape, j), _face_shape(shape, j), idx[rest], compute))
    runs = getattr(meas.noisy, "runs", None)
    return _Prepared(ok, rows, idx[top], found, _variances(plan, rows, idx, shape),
                     None if runs is None else runs(idx[top]))  # fmt: skip


def _chunks(meas, prep: _Prepared, shape: tuple[int, ...], work: _Work, per: int, out_of,
            compiled: bool = False) -> Iterator[tuple[int, int, np.ndarray]]:
    """The estimates of a prepared block, ``per`` tables at a time: ``(a, b, tables a..b−1)``
    written into ``out_of(a, b)``, chunk by chunk: the arithmetic of a chunk stays in the
    processor's cache (its pieces are read, combined and written once) and uses the pass's
    work arrays. Noisy vectors stored back to back are read as a view (no copy)."""
    rec = _recipe(shape)
    step, bufs = work.get(shape)
    step = min(step, per)
    m = len(prep.top)
    runs = prep.runs
    for a in range(0, m, per):
        b = min(m, a + per)
        out = out_of(a, b)
        for c in range(a, b, step):
            e = min(b, c + step)
            if runs is not None and runs[2][c] == runs[2][e - 1]:
                omega = meas.noisy.rows(int(runs[0][c]), int(runs[1][c]), e - c)
            else:
                omega = _omega(meas, prep.top[c:e], meas.plan.closure.sets)
            faces = [q.take(rows[c:e], axis=0, out=buf[: e - c]) for (q, rows), buf in zip(prep.faces, bufs)]
            _tables(omega, faces, rec, out[c - a : e - a], compiled)
        yield a, b, out


def _blocks(meas, limit: int, cache_floats: int | None, block_cells: int | None) -> Iterator[tuple[int, MarginalBlock]]:
    """``(batch number, MarginalBlock)`` for consecutive runs (batches) of workload marginals of
    about ``limit`` cells, prepared per arity and shape of a batch. With ``block_cells`` the
    blocks hold at most that many cells (or one table) written into one reused buffer, valid
    until the next block; without, one block per arity and shape of the batch, in fresh
    arrays."""
    plan = meas.plan
    wk = plan.workload
    sizes = np.asarray(plan.domain.sizes, dtype=np.int64)
    n = len(wk)
    arity = np.empty(n, dtype=np.int64)
    row_of = np.empty(n, dtype=np.int64)
    groups = wk._groups
    for k, (pos, _) in groups.items():
        arity[pos] = k
        row_of[pos] = np.arange(len(pos))
    budget = CACHE_FLOATS if cache_floats is None else cache_floats  # shared by the two caches
    expanded = _Expanded(meas, max(1, budget // 2))
    faces = _Pieces(len(plan.closure), max(1, budget - budget // 2))
    work = _Work(CHUNK_CELLS)
    compiled = fused.use_for(wk)
    buffer = None if block_cells is None else np.empty(block_cells)
    cum = np.cumsum(wk.cells)
    start = batch_no = 0
    while start < n:
        stop = int(np.searchsorted(cum, (cum[start - 1] if start else 0) + limit, "right"))
        stop = min(max(stop, start + 1), n)
        batch = np.arange(start, stop)
        start = stop
        for k in np.unique(arity[batch]).tolist():
            members = batch[arity[batch] == k]
            rows = groups[k][1][row_of[members]]
            shapes = sizes[rows] if k else np.zeros((len(members), 0), dtype=np.int64)
            if (shapes == shapes[:1]).all():  # one shape (e.g. every attribute of one size)
                uniq, inv = shapes[:1], np.zeros(len(members), dtype=np.int64)
            else:
                uniq, inv = np.unique(shapes, axis=0, return_inverse=True)
                inv = np.asarray(inv).reshape(-1)
            for u in range(len(uniq)):
                sel = np.flatnonzero(inv == u) if len(uniq) > 1 else np.arange(len(members))
                shape = tuple(int(v) for v in uniq[u])
                prep = _prepare(meas, rows[sel], shape, expanded, faces)
                if prep is None:
                    continue
                m, cells = len(prep.top), math.prod(shape)
                positions = members[sel][prep.ok]
                if buffer is None:
                    est = np.empty((m,) + shape)
                    for _ in _chunks(meas, prep, shape, work, m, lambda a, b: est[a:b], compiled):
                        pass
                    yield batch_no, MarginalBlock(positions, prep.rows, shape, est, prep.variance)
                    continue
                per = max(1, block_cells // max(1, cells))  # tables per block
                step = work.get(shape)[0]
                if per > step:
                    per -= per % step  # whole chunks

                def out_of(a, b, shape=shape, cells=cells):
                    if (b - a) * cells > buffer.size:
                        return np.empty((b - a,) + shape)  # one table larger than the buffer
                    return buffer[: (b - a) * cells].reshape((b - a,) + shape)

                for a, b, est in _chunks(meas, prep, shape, work, per, out_of, compiled):
                    yield batch_no, MarginalBlock(positions[a:b], prep.rows[a:b], shape, est, prep.variance[a:b])
        batch_no += 1


def plain_batches(
    meas, *, max_cells: int | None = None, cache_floats: int | None = None
) -> Iterator[list[MarginalBlock]]:
    """Every answerable marginal of a plain workload, reconstructed by broadcast sums.

    Yields, for consecutive runs of workload marginals holding about ``max_cells`` cells, the
    list of their :class:`MarginalBlock` (one per arity and shape; together they cover the run's
    answerable marginals — a zero-weight marginal whose residuals were not measured is left out).
    Every block's arrays are its own (see :func:`plain_blocks` for blocks written into one
    reused buffer).

    Parameters
    ----------
    meas : Measurements
        Measurements of a plan with ``plan.is_plain``.
    max_cells : int, optional
        Cells per batch (default :data:`BATCH_CELLS`): bounds the memory in use.
    cache_floats : int, optional
        Floats of shared lower-order pieces kept (default :data:`CACHE_FLOATS`).

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
    [((2, 2), 1), ((2, 3), 1), ((3, 2), 1)]
    """
    limit = BATCH_CELLS if max_cells is None else int(max_cells)
    out: list[MarginalBlock] = []
    current = 0
    for batch_no, blk in _blocks(meas, limit, cache_floats, None):
        if batch_no != current:
            yield out
            out, current = [], batch_no
        out.append(blk)
    if out:
        yield out


def plain_blocks(
    meas, *, block_cells: int | None = None, max_cells: int | None = None, cache_floats: int | None = None
) -> Iterator[MarginalBlock]:
    """Every answerable marginal of a plain workload as blocks of stacked tables written into
    one reused buffer: the fastest way to stream all the tables (e.g. to a release writer).

    Each :class:`MarginalBlock` holds marginals of one arity and shape: ``estimate[i]`` is the
    table of the marginal on ``attrs[i]`` (workload position ``positions[i]``) by Algorithm 2,
    ``x̂_M = Σ_{A⊆M} r_A / Π_{j∈M∖A} n_j`` (Theorem 4.4), computed as ``k`` broadcast sums of
    faces (the module docstring), and ``variance[i]`` its exact per-cell variance in closed form
    (one number per table: shape ``(m,) + (1,)*k``). Blocks come in the order of the runs of
    about ``max_cells`` workload cells (within a run, by arity, then shape, then workload
    position) and cover every answerable workload marginal once; the values are those of
    :func:`plain_batches` and of ``Measurements.estimate`` / ``variance``, bit for bit.

    **A block's estimates are a view of one buffer of** ``block_cells`` **floats that the next
    block overwrites**: use (or copy) a block before asking for the next one. A marginal larger
    than the buffer comes alone, in a fresh array. Memory stays bounded by ``max_cells`` and
    ``block_cells`` (plus the shared lower-order residuals), whatever the number of marginals.

    Parameters
    ----------
    meas : Measurements
        Measurements of a plan with ``plan.is_plain`` (in memory or in an on-disk store).
    block_cells : int, optional
        Cells per block, the size of the reused buffer (default :data:`BLOCK_CELLS`; a small
        buffer stays in the processor's cache, a large one gives fewer, longer blocks).
    max_cells : int, optional
        Workload cells whose bookkeeping is done together (default :data:`PREPARE_CELLS`;
        it holds no tables, only their positions and variances).
    cache_floats : int, optional
        Floats of shared lower-order pieces kept (default :data:`CACHE_FLOATS`).

    Returns
    -------
    iterator of MarginalBlock

    Examples
    --------
    >>> import numpy as np, pandas as pd, dpmatrix as dm
    >>> plan = dm.plan(dm.Workload.marginals(dm.Domain.from_sizes([2, 3, 2]), 2), pcost=1.0)
    >>> meas = plan.measure(pd.DataFrame({"a0": [0, 1], "a1": [2, 0], "a2": [1, 1]}),
    ...                     rng=np.random.default_rng(0))
    >>> for blk in plain_blocks(meas):
    ...     print(blk.shape, blk.attrs.tolist(), blk.estimate.shape, blk.variance.shape)
    (2, 2) [[0, 2]] (1, 2, 2) (1, 1, 1)
    (2, 3) [[0, 1]] (1, 2, 3) (1, 1, 1)
    (3, 2) [[1, 2]] (1, 3, 2) (1, 1, 1)
    """
    limit = PREPARE_CELLS if max_cells is None else int(max_cells)
    cells = BLOCK_CELLS if block_cells is None else int(block_cells)
    if limit < 1 or cells < 1:
        raise WorkloadError(f"max_cells and block_cells must be positive, got {limit} and {cells}")
    for _, blk in _blocks(meas, limit, cache_floats, cells):
        yield blk


def plain_block_batches(
    meas, *, max_cells: int | None = None, cache_floats: int | None = None, block_cells: int | None = None
) -> Iterator[Iterator[MarginalBlock]]:
    """:func:`plain_blocks` grouped by runs of consecutive workload marginals of about
    ``max_cells`` cells (default :data:`BATCH_CELLS`): yields, for each run, an iterator of its
    blocks, which together cover the run's answerable marginals (for callers that put a run back
    in workload order, as ``Measurements.iter_marginals`` does). The blocks share one reused
    buffer, as in :func:`plain_blocks`."""
    limit = BATCH_CELLS if max_cells is None else int(max_cells)
    cells = BLOCK_CELLS if block_cells is None else int(block_cells)
    for _, run in itertools.groupby(_blocks(meas, limit, cache_floats, cells), key=lambda item: item[0]):
        yield (blk for _, blk in run)


def plain_estimate(meas, key: tuple[int, ...]) -> np.ndarray:
    """The table of one closure member ``key`` by the same arithmetic as :func:`plain_batches`
    (so that a marginal asked alone and one streamed in a batch have the same bits)."""
    plan = meas.plan
    k = len(key)
    shape = tuple(plan.domain.sizes[a] for a in key)
    if key not in meas.noisy:
        meas.residual(key)  # raises the NotMeasuredError that says what to do
    omega = np.asarray(meas.noisy[key], dtype=float)[None]
    order = _subset_order(k)[:-1]
    faces = []
    for j in range(k):
        lower = {cols: meas.residual(tuple(key[c] for c in cols))[None] for cols in order if _face_of(cols, k) == j}
        faces.append(_lower_face(lower, shape, j, 1))
    return _tables(omega, faces, _recipe(shape), np.empty((1,) + shape), fused.use_for(plan.workload))[0]
