"""One attribute's query rows without a dense query matrix: intervals (cells, prefixes, ranges)
or an explicit matrix, and the few forms the pure ε-DP planners read from them.

A built-in query type of an attribute of ``n`` cells is a family of intervals ``[a_q, b_q]``
(:func:`~dpmatrix._linalg.query_sets.interval_bounds`: ``n`` cells, ``n`` prefixes, ``n(n+1)/2`` ranges).
Every quantity the planners need is a closed form or a prefix-sum identity in ``(a, b)``, so no
``m × n`` matrix is ever built (``m = n(n+1)/2`` rows of ``n`` floats is 4.3 GB at ``n = 1024``):

* row sums and squared norms: the lengths ``b - a + 1`` (0/1 rows);
* ``W x``: differences of cumulative sums, ``(Wx)_q = X[b_q+1] - X[a_q]`` with
  ``X[i] = Σ_{j<i} x_j`` (:class:`~dpmatrix._solvers.pidentity.IntervalQueries`);
* ``diag(W M Wᵀ)`` for a symmetric ``n × n`` ``M``: ``C[b+1, b+1] - 2C[a, b+1] + C[a, a]`` with
  ``C`` the 2-D prefix sums of ``M`` (:func:`~.levels.quadratic_diagonal`), O(n² + m);
* the Gram ``WᵀW = Σ_q 1_q 1_qᵀ`` from a difference array of the ``(a, b+1)`` pairs and two
  reverse cumulative sums, O(m + n²) (for prefixes ``n - max(j, k)``, for all ranges
  ``(min(j, k)+1)(n - max(j, k))``: :class:`~dpmatrix._solvers.pidentity.PrefixGram`,
  :class:`~dpmatrix._solvers.pidentity.RangeGram`, checked in the tests).

An explicit (custom) query matrix is kept as :class:`~dpmatrix._solvers.pidentity.DenseQueries`
and every form is the dense one.
"""

from __future__ import annotations

import functools

import numpy as np

from ..._linalg.query_sets import DenseQueries, IntervalQueries, interval_bounds

__all__ = ["QueryRows", "interval_rows", "quadratic_diagonal", "apply_modes", "as_query_rows", "attribute_queries", "dense_rows", "gram",
           "query_key", "quad_diag", "row_squares", "row_sums", "stack_rows"]

QueryRows = IntervalQueries | DenseQueries


def attribute_queries(workload, attr: int, key) -> QueryRows:
    """The rows of query type ``key`` on attribute position ``attr`` of ``workload``: intervals for
    the built-in types (no matrix built), the explicit matrix otherwise.

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 3}), [("a",)], query_types={"a": "range"})
    >>> q = attribute_queries(wk, 0, "range")
    >>> q.m, q.a.tolist(), q.b.tolist()
    (6, [0, 1, 2, 0, 1, 0], [0, 1, 2, 1, 2, 2])
    """
    n = workload.domain.sizes[attr]
    if isinstance(key, str) and key not in workload.matrices:
        hit = _builtin(key, n)
        if hit is not None:
            return hit
    return as_query_rows(np.asarray(workload.query_matrix(attr, key), dtype=float))


@functools.lru_cache(maxsize=16)
def _builtin(key: str, n: int) -> IntervalQueries | None:
    iv = interval_bounds(key, n)
    if iv is None:
        return None
    for x in iv:
        x.setflags(write=False)
    return IntervalQueries(n, iv[0], iv[1])


def as_query_rows(q) -> QueryRows:
    """``q`` as query rows: itself if it already is, intervals when every row of the array is the
    0/1 indicator of an interval, else the dense matrix."""
    if isinstance(q, (IntervalQueries, DenseQueries)):
        return q
    q = np.asarray(q, dtype=float)
    iv = interval_rows(q)
    if iv is not None:
        return IntervalQueries(q.shape[1], iv[0], iv[1])
    return DenseQueries(q)


def stack_rows(qs) -> QueryRows:
    """The rows of several query sets on one attribute, stacked in order."""
    qs = [as_query_rows(q) for q in qs]
    if all(isinstance(q, IntervalQueries) for q in qs):
        return IntervalQueries(qs[0].n, np.concatenate([q.a for q in qs]), np.concatenate([q.b for q in qs]))
    return DenseQueries(np.vstack([dense_rows(q) for q in qs]))


def query_key(q: QueryRows) -> tuple:
    """A hashable key of the rows (caches): the interval bounds or the matrix bytes."""
    if isinstance(q, IntervalQueries):
        return ("intervals", q.n, q.a.tobytes(), q.b.tobytes())
    return ("dense", q.q.shape, np.ascontiguousarray(q.q).tobytes())


def dense_rows(q: QueryRows) -> np.ndarray:
    """The ``m × n`` matrix (small query sets only: tests, explicit covariances)."""
    if isinstance(q, IntervalQueries):
        return q.apply(np.eye(q.n))
    return q.q


def row_sums(q: QueryRows) -> np.ndarray:
    """``W 1``: each row's sum (an interval's length)."""
    if isinstance(q, IntervalQueries):
        return (q.b - q.a + 1).astype(float)
    return q.q.sum(axis=1)


def row_squares(q: QueryRows) -> np.ndarray:
    """``‖w_q‖²`` of each row (an interval's length)."""
    if isinstance(q, IntervalQueries):
        return (q.b - q.a + 1).astype(float)
    return (q.q * q.q).sum(axis=1)


def quad_diag(q: QueryRows, m: np.ndarray) -> np.ndarray:
    """``diag(W M Wᵀ)`` for a symmetric ``M`` (module doc)."""
    if isinstance(q, IntervalQueries):
        return quadratic_diagonal(None, m, (q.a, q.b))
    return np.einsum("ij,jk,ik->i", q.q, m, q.q)


def interval_rows(q: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(a, b)`` when every row of ``q`` is the 0/1 indicator of a contiguous interval
    ``[a_r, b_r]`` of cells (cells, prefixes, ranges, totals), else ``None``.

    Examples
    --------
    >>> interval_rows(np.tril(np.ones((3, 3))))
    (array([0, 0, 0]), array([0, 1, 2]))
    """
    q = np.asarray(q)
    if q.ndim != 2 or q.shape[1] == 0 or not np.all((q == 0) | (q == 1)):
        return None
    nz = q != 0
    if not nz.any(axis=1).all():
        return None
    a = nz.argmax(axis=1)
    b = q.shape[1] - 1 - nz[:, ::-1].argmax(axis=1)
    if not np.array_equal(nz.sum(axis=1), b - a + 1):
        return None
    return a, b


def quadratic_diagonal(q: np.ndarray, m: np.ndarray, intervals=None) -> np.ndarray:
    """``diag(Q M Qᵀ)`` for a symmetric ``M``; interval rows (``intervals`` from
    :func:`interval_rows`) in O(n² + rows) from 2-D prefix sums of ``M``: the interval
    ``[a, b]`` is ``C[b+1, b+1] - 2 C[a, b+1] + C[a, a]`` with ``C[i, j] = Σ_{k<i, l<j} M_kl``.

    Examples
    --------
    >>> m = np.array([[2.0, 1.0], [1.0, 3.0]])
    >>> quadratic_diagonal(np.array([[1.0, 1.0], [0.0, 1.0]]), m)
    array([7., 3.])
    """
    if intervals is None:
        intervals = interval_rows(q)
    if intervals is None:
        return np.einsum("ij,jk,ik->i", q, m, q)
    a, b = intervals
    n = m.shape[0]
    c = np.zeros((n + 1, n + 1))
    c[1:, 1:] = np.cumsum(np.cumsum(m, axis=0), axis=1)
    return c[b + 1, b + 1] - 2 * c[a, b + 1] + c[a, a]


_GRAMS: dict[tuple, np.ndarray] = {}


def gram(q: QueryRows) -> np.ndarray:
    """``WᵀW`` (``n × n``, read-only and cached per query set; exact integers for intervals,
    module doc).

    Examples
    --------
    >>> gram(IntervalQueries(3, np.array([0, 0, 0]), np.array([0, 1, 2]))).tolist()
    [[3.0, 2.0, 1.0], [2.0, 2.0, 1.0], [1.0, 1.0, 1.0]]
    """
    key = query_key(q)
    hit = _GRAMS.get(key)
    if hit is not None:
        return hit
    if not isinstance(q, IntervalQueries):
        out = q.q.T @ q.q
    else:
        n1 = q.n + 1
        b = q.b + 1
        # difference array of the pairs: +1 at (a, a) and (b+1, b+1), -1 at (a, b+1) and (b+1, a)
        idx = np.concatenate([b * n1 + b, q.a * n1 + q.a, q.a * n1 + b, b * n1 + q.a])
        sign = np.concatenate([np.ones(2 * q.m), -np.ones(2 * q.m)])
        k = np.bincount(idx, weights=sign, minlength=n1 * n1).reshape(n1, n1)
        # 1_[a, b] = p_{b+1} - p_a with the padded prefix p_k = [cells < k]: Σ K_kl p_k p_lᵀ is the
        # reverse 2-D cumulative sum of K (the row and column 0 hold p_0 = 0)
        r = np.cumsum(np.cumsum(k[::-1, ::-1], axis=0), axis=1)[::-1, ::-1]
        out = np.ascontiguousarray(r[1:, 1:])
    out.setflags(write=False)
    if len(_GRAMS) >= 8:
        _GRAMS.clear()
    _GRAMS[key] = out
    return out


def apply_modes(qs, t: np.ndarray) -> np.ndarray:
    """``(⊗ qs) · vec(t)`` as a tensor: ``qs[k]`` applied along axis ``k`` (C order)."""
    for ax, q in enumerate(qs):
        q = as_query_rows(q)
        moved = np.moveaxis(np.asarray(t, dtype=float), ax, 0)
        flat = moved.reshape(moved.shape[0], -1)
        out = q.apply(flat).reshape((q.m,) + moved.shape[1:])
        t = np.moveaxis(out, 0, ax)
    return t
