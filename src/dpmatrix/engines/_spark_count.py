"""The executor side of Spark counting: every marginal table of a pass counted in one scan.

A *pass* is a list of sorted attribute sets whose flat (C-order) tables are laid end to end in
one ``int64`` array of ``C = sum_S prod_{a in S} n_a`` cells (``offsets[j]`` is where the table
of set ``j`` starts). Each Spark partition

1. streams its rows as Arrow record batches of code columns (``mapInArrow``), buffers them into
   chunks of :data:`~.bincount.DEFAULT_CHUNK_ROWS` rows and adds each chunk's counts to its own
   ``C``-cell array with the project's counting kernel :func:`.bincount.add_counts`;
2. emits the array cut into *pieces* of at most ``piece_cells`` cells, as rows
   ``(piece, bytes)``: the piece number and its counts in the smallest unsigned type holding
   the piece's largest count (an all-zero piece is not emitted).

The pieces of all partitions are then summed by key (Spark's ``reduceByKey``: a reduce-scatter,
each reducer adds the pieces of its keys) and only the ``ceil(C / piece_cells)`` summed pieces
reach the driver. Counts of disjoint row blocks add up to the counts of their union, so the
result is the same whatever the partitioning.

Memory of one task: the ``8 C`` bytes of its array, one chunk of buffered codes
(``DEFAULT_CHUNK_ROWS`` rows times the columns' widths) and the kernel's per-chunk index arrays
(``8 * DEFAULT_CHUNK_ROWS`` bytes per prefix level), and one piece being encoded — i.e.
``8 C`` bytes plus a few MiB. The driver bounds ``C`` by its cell budget when it splits the sets
into passes (:func:`plan_passes`).

This module imports only numpy (pyarrow inside the functions) and is shipped to the executors by
value, so a cluster needs no dpmatrix install, only numpy and pyarrow (which PySpark's Arrow
functions need anyway).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from ._bincount import DEFAULT_CHUNK_ROWS, add_counts

AttrSet = tuple[int, ...]


def plan_passes(cells: Sequence[int], budget: int) -> list[list[int]]:
    """Split sets (given by their cell counts, in order) into passes of at most ``budget``
    cells each; a set larger than the budget alone is returned in a pass of its own (the
    caller counts it another way).

    Examples
    --------
    >>> plan_passes([10, 10, 10, 50], budget=25)
    [[0, 1], [2], [3]]
    """
    passes: list[list[int]] = []
    alone: list[list[int]] = []
    cur: list[int] = []
    used = 0
    for j, c in enumerate(cells):
        if c > budget:
            alone.append([j])
            continue
        if cur and used + c > budget:
            passes.append(cur)
            cur, used = [], 0
        cur.append(j)
        used += c
    if cur:
        passes.append(cur)
    return passes + alone


def _piece_bytes(a: np.ndarray) -> bytes:
    """Counts in the smallest unsigned type holding them, prefixed by the type's width."""
    top = int(a.max()) if a.size else 0
    width = 1 if top < 1 << 8 else 2 if top < 1 << 16 else 4 if top < 1 << 32 else 8
    return bytes([width]) + a.astype(f"<u{width}").tobytes()


def piece_array(data: bytes) -> np.ndarray:
    """The ``int64`` counts of a piece emitted by :func:`count_partition`."""
    width = data[0]
    return np.frombuffer(data, dtype=f"<u{width}", offset=1).astype(np.int64)


def add_pieces(a: bytes, b: bytes) -> bytes:
    """Sum of two pieces of the same key (the reduce function)."""
    return _piece_bytes(piece_array(a) + piece_array(b))


def count_partition(
    batches: Iterable,
    sizes: Sequence[int],
    sets: Sequence[AttrSet],
    offsets: Sequence[int],
    columns: Sequence[int],
    piece_cells: int,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> Iterator:
    """``mapInArrow`` function: count the partition's rows into every table of the pass.

    Parameters
    ----------
    batches
        The partition's Arrow record batches; column ``k`` holds the codes of attribute
        ``columns[k]``.
    sizes
        Number of values of every attribute of the domain.
    sets, offsets
        The pass's sorted attribute sets and where each table starts in the flat array
        (``offsets[-1]`` cells in all).
    columns
        The attribute positions of the batches' columns.
    piece_cells
        Cells per emitted piece.
    chunk_rows
        Rows buffered before each call of the counting kernel.

    Yields
    ------
    pyarrow.RecordBatch
        Rows ``(piece: int64, data: binary)``.
    """
    import pyarrow as pa

    total = int(offsets[-1])
    flat_all = np.zeros(total, dtype=np.int64)
    flat = {s: flat_all[int(offsets[j]) : int(offsets[j + 1])] for j, s in enumerate(sets)}
    buf: list[list[np.ndarray]] = [[] for _ in columns]
    buffered = 0

    def flush() -> None:
        nonlocal buffered
        if not buffered:
            return
        cols = [np.concatenate(b) if len(b) > 1 else b[0] for b in buf]
        by_attr = dict(zip(columns, cols))
        add_counts(by_attr, sizes, sets, flat, n_rows=buffered)
        for b in buf:
            b.clear()
        buffered = 0

    for batch in batches:
        m = batch.num_rows
        if not m:
            continue
        for k in range(len(columns)):
            buf[k].append(batch.column(k).to_numpy(zero_copy_only=False))
        buffered += m
        if buffered >= chunk_rows:
            flush()
    flush()

    keys: list[int] = []
    data: list[bytes] = []
    step = max(1, int(piece_cells))
    for p, lo in enumerate(range(0, total, step)):
        piece = flat_all[lo : lo + step]
        if piece.any():
            keys.append(p)
            data.append(_piece_bytes(piece))
    # one small batch per piece: a batch never holds more than one piece's bytes
    for k, d in zip(keys, data):
        yield pa.RecordBatch.from_arrays(
            [pa.array([k], type=pa.int64()), pa.array([d], type=pa.binary())], names=["piece", "data"]
        )
