"""The shared counting kernel against a row-by-row tally (no numpy histogram in the oracle)."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from dpmatrix.engines._bincount import add_counts

SIZES = (2, 3, 5, 4, 7, 3)


def tally(rows: list[tuple[int, ...]], s: tuple[int, ...]) -> np.ndarray:
    """Count table of ``s`` by walking the rows one at a time."""
    out = np.zeros(tuple(SIZES[a] for a in s), dtype=np.int64)
    for cell, n in Counter(tuple(r[a] for a in s) for r in rows).items():
        out[cell] += n
    return out


@pytest.fixture(scope="module")
def data() -> tuple[list[np.ndarray], list[tuple[int, ...]]]:
    rng = np.random.default_rng(3)
    n = 517  # not a multiple of any chunk size below
    cols = [rng.integers(0, k, n).astype(np.uint8) for k in SIZES]
    cols[4][:9] = 6  # the last code of the widest attribute
    rows = list(zip(*(c.tolist() for c in cols)))
    return cols, rows


# every size from the empty set to all six attributes (2,520 cells), and an unsorted request
SETS = [(), (4,), (0, 5), (1, 2, 4), (0, 2, 3, 4), (0, 1, 2, 3, 4, 5), (1, 3), (1, 2), (3, 4, 5)]


@pytest.mark.parametrize("chunk_rows", [1, 7, 64, 100_000])
def test_add_counts_equals_row_tally(data, chunk_rows):
    # chunk_rows=7/64: tables of more cells than chunk_rows take the whole-column pass, the
    # others go chunk by chunk (uneven last chunk); 1 and 100,000 are the extremes
    cols, rows = data
    flat = {s: np.zeros(int(np.prod([SIZES[a] for a in s])), dtype=np.int64) for s in SETS}
    add_counts(cols, SIZES, SETS, flat, n_rows=len(rows), chunk_rows=chunk_rows)
    for s in SETS:
        assert np.array_equal(flat[s].reshape(tuple(SIZES[a] for a in s)), tally(rows, s)), s


def test_add_counts_adds_over_row_blocks(data):
    """Counting two row blocks into the same tables gives the counts of all rows (the streamed
    DuckDB path relies on this), and columns may be a mapping holding only the needed ones."""
    cols, rows = data
    sets = [(0, 1, 2), (2,), ()]
    flat = {s: np.zeros(int(np.prod([SIZES[a] for a in s])), dtype=np.int64) for s in sets}
    for lo, hi in [(0, 200), (200, len(rows))]:
        block = {a: cols[a][lo:hi] for a in (0, 1, 2)}
        add_counts(block, SIZES, sets, flat, n_rows=hi - lo, chunk_rows=13)
    for s in sets:
        assert np.array_equal(flat[s].reshape(tuple(SIZES[a] for a in s)), tally(rows, s)), s
    assert int(flat[()][0]) == len(rows)


def test_add_counts_no_rows():
    flat = {(0, 1): np.zeros(6, dtype=np.int64), (): np.zeros(1, dtype=np.int64)}
    empty = [np.zeros(0, dtype=np.uint8)] * 2
    add_counts(empty, (2, 3), [(0, 1), ()], flat, n_rows=0)
    assert not flat[(0, 1)].any() and int(flat[()][0]) == 0


def test_all_triples_of_one_call(data):
    """Many sets sharing prefixes in one call (the prefix cache is rebuilt along the chain)."""
    cols, rows = data
    sets = list(itertools.combinations(range(len(SIZES)), 3))[::-1]  # any order
    flat = {s: np.zeros(int(np.prod([SIZES[a] for a in s])), dtype=np.int64) for s in sets}
    add_counts(cols, SIZES, sets, flat, n_rows=len(rows), chunk_rows=50)
    for s in sets:
        assert np.array_equal(flat[s].reshape(tuple(SIZES[a] for a in s)), tally(rows, s)), s
