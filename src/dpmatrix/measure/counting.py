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


def marginal_tables(domain, wanted: Iterable[AttrSet], eng) -> Iterator[tuple[AttrSet, np.ndarray]]:
    """Yield ``(S, count table on S)`` for every ``S`` in ``wanted``: the maximal sets are counted
    (:func:`count_batches`), each maximal set's subsets follow it from the largest down."""
    wanted = set(wanted)
    done: set[AttrSet] = set()
    for batch, tables in count_batches(domain, maximal_sets(wanted), eng):
        for m in batch:
            table = tables.pop(m)
            for r in range(len(m), -1, -1):
                for sub in itertools.combinations(m, r):
                    if sub in done or sub not in wanted:
                        continue
                    done.add(sub)
                    yield sub, project(table, m, sub)
