"""In-memory noisy answers kept back to back, so that reconstruction reads them without a copy.

Measurement produces one noisy vector ``ω_A`` per residual set; kept as separate arrays, every
reconstruction pass must first gather the vectors of a batch of marginals into one array — a
copy of every noisy number, from wherever each array happens to live. :class:`StackedAnswers`
is the ``dict`` that :func:`~dpmatrix._measure.measure` fills instead: each vector is copied once,
when it is stored, into a buffer of vectors of its shape and type (in the order they are
stored), and the dict holds views of those buffers. ``stack(positions)`` — the interface of the
on-disk :class:`~dpmatrix._reconstruct.store.MeasurementStore` — then returns the vectors of
consecutive stored marginals as a read-only *view* (measurement stores the largest marginals in
workload order, which is the order reconstruction reads them in), and gathers them otherwise.

Everything else is an ordinary ``dict`` (iteration, ``in``, ``len``, ``items``); a pickled copy
is a plain ``dict`` of arrays.
"""

from __future__ import annotations

import numpy as np

__all__ = ["StackedAnswers"]

# bytes of vectors per buffer (virtual memory: only the filled part is ever touched)
BUFFER_BYTES = 1 << 25


class StackedAnswers(dict):
    """``{attribute set: noisy vector ω_A}`` with the vectors stored back to back per shape and
    type (see the module docstring).

    Parameters
    ----------
    closure : Closure
        The plan's closure: ``stack`` addresses vectors by closure position.

    Examples
    --------
    >>> import numpy as np, dpmatrix as dm
    >>> plan = dm.plan(dm.Workload(dm.Domain({"a": 2, "b": 3}), [("a", "b")]), pcost=1.0)
    >>> noisy = StackedAnswers(plan.closure)
    >>> noisy[(0,)] = np.array([0.5]); noisy[(1,)] = np.array([1.0, 2.0])
    >>> noisy[(0,)], noisy.stack([plan.closure.index((1,))])
    (array([0.5]), array([[1., 2.]]))
    """

    def __init__(self, closure):
        super().__init__()
        self._closure = closure
        self._buffers: list[np.ndarray] = []
        self._keys: list[list] = []  # per buffer: the key stored in each used row
        self._open: dict[tuple, int] = {}  # (shape, dtype) -> buffer being filled
        self._where: tuple[np.ndarray, np.ndarray] | None = None  # per closure position: (buffer, row)
        self._edited = False  # a key was replaced or removed: the index must check every row

    def __setitem__(self, key, value) -> None:
        if key in self:
            self._edited = True
        arr = np.asarray(value)
        kind = (arr.shape, arr.dtype.str)
        b = self._open.get(kind)
        if b is None or len(self._keys[b]) == len(self._buffers[b]):
            rows = max(1, BUFFER_BYTES // max(1, arr.nbytes))
            if b is not None:  # the first buffers of a shape are small, later ones full size
                rows = min(rows, 2 * len(self._buffers[b]))
            else:
                rows = min(rows, 64)
            self._buffers.append(np.empty((rows,) + arr.shape, dtype=arr.dtype))
            self._keys.append([])
            b = self._open[kind] = len(self._buffers) - 1
        row = len(self._keys[b])
        buf = self._buffers[b]
        buf[row] = arr
        self._keys[b].append(key)
        self._where = None
        super().__setitem__(key, buf[row] if arr.ndim else buf[row : row + 1].reshape(()))

    def __delitem__(self, key) -> None:
        super().__delitem__(key)
        self._where, self._edited = None, True

    def pop(self, key, *default):
        self._where, self._edited = None, True
        return super().pop(key, *default)

    def popitem(self):
        self._where, self._edited = None, True
        return super().popitem()

    def clear(self) -> None:
        super().clear()
        self._where, self._edited = None, True

    def update(self, *args, **kwargs) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def __reduce__(self):
        return (dict, (dict(self),))

    def _positions(self) -> tuple[np.ndarray, np.ndarray]:
        """Buffer and row of every closure position (−1: not stored), built on first use."""
        if self._where is None:
            n = len(self._closure)
            buf_of = np.full(n, -1, dtype=np.int64)
            row_of = np.full(n, -1, dtype=np.int64)
            current = {}
            if self._edited:  # the row each live key was stored in last
                for b, keys in enumerate(self._keys):
                    for row, key in enumerate(keys):
                        current[key] = (b, row)
                current = {key: at for key, at in current.items() if dict.__contains__(self, key)}
            for b, keys in enumerate(self._keys):
                if not keys:
                    continue
                k = len(keys[0])
                rows = np.arange(len(keys))
                if k:
                    pos = self._closure.indices(np.asarray(keys, dtype=np.int64).reshape(len(keys), k))
                else:
                    pos = np.full(len(keys), self._closure.index(()), dtype=np.int64)
                ok = pos >= 0
                if self._edited:
                    ok &= np.array([current.get(key) == (b, row) for row, key in enumerate(keys)], dtype=bool)
                buf_of[pos[ok]] = b
                row_of[pos[ok]] = rows[ok]
            self._where = (buf_of, row_of)
        return self._where

    def runs(self, positions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(buffer, row, run)`` of each of ``positions``: consecutive positions with the same
        ``run`` number lie back to back (see :meth:`rows`)."""
        pos = np.asarray(positions, dtype=np.int64).reshape(-1)
        buf_of, row_of = self._positions()
        b, r = buf_of[pos], row_of[pos]
        if pos.size and b.min() < 0:
            raise KeyError(self._closure.sets[int(pos[np.argmin(b)])])
        breaks = (np.diff(b) != 0) | (np.diff(r) != 1)
        return b, r, np.concatenate([[0], np.cumsum(breaks)])

    def rows(self, buffer: int, row: int, count: int) -> np.ndarray:
        """Read-only view of ``count`` stored vectors from ``row`` of ``buffer`` (:meth:`runs`)."""
        view = self._buffers[buffer][row : row + count]
        view.flags.writeable = False
        return view

    def stack(self, positions) -> np.ndarray:
        """The vectors of the closure members at ``positions`` (one shape), stacked along a new
        first axis: a read-only view when they were stored one after the other, else a copy."""
        pos = np.asarray(positions, dtype=np.int64).reshape(-1)
        if pos.size == 0:
            raise ValueError("stack() needs at least one closure position")
        buf_of, row_of = self._positions()
        b, r = buf_of[pos], row_of[pos]
        if b.min() < 0:
            raise KeyError(self._closure.sets[int(pos[np.argmin(b)])])
        first, last = int(r[0]), int(r[-1])
        if (b == b[0]).all() and last - first == pos.size - 1 and (pos.size < 3 or (np.diff(r) == 1).all()):
            view = self._buffers[int(b[0])][first : last + 1]
            view.flags.writeable = False
            return view
        out = np.empty((pos.size,) + self._buffers[int(b[0])].shape[1:], dtype=self._buffers[int(b[0])].dtype)
        for u in np.unique(b).tolist():
            sel = b == u
            out[sel] = self._buffers[u][r[sel]]
        return out
