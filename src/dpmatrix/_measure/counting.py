"""Counting marginal tables for measurement: only the maximal sets go to the engine, in batches
bounded in number and cells; every other table is a sum of a superset's (never the data vector)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

import numpy as np

from ..engines import NumpyEngine, maximal_sets, project

__all__ = [
    "COUNT_BATCH",
    "MEASURE_BATCH_CELLS",
    "NUMPY_COUNT_BATCH",
    "count_batch",
    "count_batches",
    "count_order",
    "counted_batches",
    "marginal_tables",
]

AttrSet = tuple[int, ...]

# maximal marginals counted per call by an engine that does not say (``preferred_batch``)
COUNT_BATCH = 16
# maximal marginals counted per call by the in-memory numpy engine (tables of a batch are alive
# together: 512 three-way tables of 10^3 cells are 4 MB)
NUMPY_COUNT_BATCH = NumpyEngine.preferred_batch
# and at most this many cells per batch, so that huge tables (e.g. 256^3) are measured one by one
MEASURE_BATCH_CELLS = 1 << 22


def count_batches(domain, top: list[AttrSet], eng) -> Iterator[tuple[list[AttrSet], dict]]:
    """Yield ``(maximal sets, their count tables)``: at most a batch of sets per engine call and
    ``MEASURE_BATCH_CELLS`` cells (at least one set), so few tables are alive at a time."""
    step = count_batch(eng)
    cells = [domain.cells(m) for m in top]
    start = 0
    while start < len(top):
        stop, total = start + 1, cells[start]
        while stop < len(top) and stop - start < step and total + cells[stop] <= MEASURE_BATCH_CELLS:
            total += cells[stop]
            stop += 1
        batch = top[start:stop]
        start = stop
        yield batch, eng.count(batch)


def count_batch(engine) -> int:
    """Maximal sets counted per engine call: the engine's ``preferred_batch`` when it has one
    (the numpy engine: 512; DuckDB streaming the code columns: every set, one scan per call;
    DuckDB's SQL strategies: their ``batch_size``), else ``COUNT_BATCH``. Whatever the number,
    :func:`count_batches` also bounds a batch by ``MEASURE_BATCH_CELLS``."""
    preferred = getattr(engine, "preferred_batch", None)
    return COUNT_BATCH if preferred is None else max(1, int(preferred))


def _subsets_in_order(m: AttrSet, wanted: set[AttrSet], done: set[AttrSet]) -> Iterator[AttrSet]:
    """The wanted, not yet produced subsets of the maximal set ``m``, from the largest down."""
    for r in range(len(m), -1, -1):
        for sub in itertools.combinations(m, r):
            if sub in done or sub not in wanted:
                continue
            done.add(sub)
            yield sub


def count_order(wanted: Iterable[AttrSet]) -> list[AttrSet]:
    """The order in which :func:`counted_batches` produces the tables of ``wanted``: the maximal
    sets in sorted order, each followed by its not yet produced subsets from the largest down.

    Examples
    --------
    >>> count_order([(0,), (1,), (0, 1), (2,), ()])
    [(0, 1), (0,), (1,), (), (2,)]
    """
    wanted = set(wanted)
    done: set[AttrSet] = set()
    return [sub for m in maximal_sets(wanted) for sub in _subsets_in_order(m, wanted, done)]


def counted_batches(domain, wanted: Iterable[AttrSet], eng,
                    top: list[AttrSet] | None = None) -> Iterator[tuple[list[AttrSet], list[tuple[AttrSet, np.ndarray, AttrSet]]]]:
    """Per engine call (:func:`count_batches`): the maximal sets counted and the list of ``(S,
    count table on S, maximal set it was summed from)`` for every ``S`` of ``wanted`` it covers, in :func:`count_order`; the
    batch's maximal tables are dropped once their subsets are taken."""
    wanted = set(wanted)
    done: set[AttrSet] = set()
    for batch, tables in count_batches(domain, maximal_sets(wanted) if top is None else top, eng):
        out = []
        for m in batch:
            table = tables.pop(m)
            out.extend((sub, project(table, m, sub), m) for sub in _subsets_in_order(m, wanted, done))
        yield batch, out


def marginal_tables(domain, wanted: Iterable[AttrSet], eng) -> Iterator[tuple[AttrSet, np.ndarray]]:
    """Yield ``(S, count table on S)`` for every ``S`` in ``wanted``: the maximal sets are counted
    (:func:`count_batches`), each maximal set's subsets follow it from the largest down."""
    for _, items in counted_batches(domain, wanted, eng):
        for sub, table, _ in items:
            yield sub, table
