"""Query sets on one attribute applied without a dense matrix (the rows of a prefix / range / cell
query type are intervals ``[a_q, b_q]``; a custom type is an explicit matrix).

``IntervalQueries``: ``W x`` is a difference of cumulative sums, ``(Wx)_q = X[b_q+1] - X[a_q]``
with ``X[i] = Σ_{j<i} x_j``, and ``Wᵀ y`` the cumulative sum of a sparse difference array:
O(m + n) per column, where the dense ``W`` of all ranges has ``n(n+1)/2`` rows of ``n`` floats.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

__all__ = ["DenseQueries", "IntervalQueries", "interval_bounds"]


def interval_bounds(kind: str, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(a, b)`` of the rows of a prefix / range / identity query type (in the order of
    :func:`dpmatrix._queries.query_matrix`), without building the matrix; ``None`` otherwise.

    Examples
    --------
    >>> interval_bounds("range", 3)
    (array([0, 1, 2, 0, 1, 0]), array([0, 1, 2, 1, 2, 2]))
    """
    if kind == "prefix":
        return np.zeros(n, dtype=int), np.arange(n)
    if kind == "identity":
        return np.arange(n), np.arange(n)
    if kind == "range":
        lengths = np.repeat(np.arange(1, n + 1), np.arange(n, 0, -1))
        starts = np.concatenate([np.arange(n - length + 1) for length in range(1, n + 1)])
        return starts, starts + lengths - 1
    return None


@dataclass(frozen=True, eq=False)
class IntervalQueries:
    """Interval queries ``[a_q, b_q]`` (prefixes, ranges, cells): ``W x`` is a difference of
    cumulative sums and ``Wᵀ y`` the cumulative sum of a sparse difference array, O(m + n) per
    column.

    Examples
    --------
    >>> q = IntervalQueries(3, np.array([0, 1]), np.array([1, 2]))
    >>> q.apply(np.eye(3)).tolist()
    [[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]
    """

    n: int
    a: np.ndarray
    b: np.ndarray

    @property
    def m(self) -> int:
        return int(self.a.size)

    @cached_property
    def pair_index(self) -> np.ndarray:
        """``a_q (n+1) + b_q + 1``: each query's flat position in an ``(n+1) × (n+1)`` array."""
        return self.a * (self.n + 1) + self.b + 1

    def apply(self, x: np.ndarray) -> np.ndarray:
        c = np.zeros((self.n + 1,) + x.shape[1:])
        np.cumsum(x, axis=0, out=c[1:])
        return c[self.b + 1] - c[self.a]

    def _diff(self):
        import scipy.sparse  # only where an adjoint is asked (planning)

        q = np.arange(self.m)
        rows = np.concatenate([self.a, self.b + 1])
        vals = np.concatenate([np.ones(self.m), -np.ones(self.m)])
        return scipy.sparse.csr_matrix((vals, (rows, np.concatenate([q, q]))), shape=(self.n + 1, self.m))

    def adjoint(self, y: np.ndarray) -> np.ndarray:
        d = self._diff() @ y
        return np.cumsum(np.asarray(d), axis=0)[: self.n]


@dataclass(frozen=True, eq=False)
class DenseQueries:
    """An explicit query matrix ``Q`` (m × n)."""

    q: np.ndarray

    @property
    def n(self) -> int:
        return self.q.shape[1]

    @property
    def m(self) -> int:
        return self.q.shape[0]

    def apply(self, x: np.ndarray) -> np.ndarray:
        return self.q @ x

    def adjoint(self, y: np.ndarray) -> np.ndarray:
        return self.q.T @ y
