"""How measurement batches the maximal sets it counts: the engine says its preferred batch."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from dpmatrix._domain import Domain
from dpmatrix._measure.counting import (
    COUNT_BATCH,
    MEASURE_BATCH_CELLS,
    count_batch,
    count_batches,
)
from dpmatrix.engines._duckdb_engine import STREAM_BATCH, DuckDBEngine
from dpmatrix.engines._numpy_engine import NumpyEngine


class Spy:
    """An engine that records the sets of every ``count`` call; ``preferred_batch`` only if
    given (engines without one get the default batch)."""

    def __init__(self, inner, preferred=None):
        self.inner, self.calls = inner, []
        if preferred is not None:
            self.preferred_batch = preferred

    @property
    def domain(self):
        return self.inner.domain

    @property
    def n_records(self):
        return self.inner.n_records

    def count(self, sets, progress=False):
        self.calls.append(list(sets))
        return self.inner.count(sets)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(5)
    domain = Domain.from_sizes([10] * 8)
    df = pd.DataFrame({n: rng.integers(0, 10, 400) for n in domain.names})
    path = tmp_path_factory.mktemp("counting") / "d.parquet"
    df.to_parquet(path, index=False)
    return domain, df, path


def test_count_batch_follows_the_engine(data):
    domain, df, path = data
    ne = NumpyEngine(df, domain)
    assert count_batch(ne) == 512
    assert count_batch(Spy(ne)) == COUNT_BATCH == 16  # an engine that does not say
    assert count_batch(Spy(ne, preferred=3)) == 3
    with DuckDBEngine(path, domain) as de:  # auto: streams big calls, so wants every set
        assert count_batch(de) == STREAM_BATCH
    with DuckDBEngine(path, domain, strategy="grouping_sets", batch_size=12) as de:
        assert count_batch(de) == 12


def test_streaming_engine_counts_all_triples_in_one_call(data):
    """56 triples of 10^3 cells (56,000 cells, under MEASURE_BATCH_CELLS) in one engine call,
    i.e. one scan of the code table; SQL batching would make 4 calls of 16."""
    domain, df, path = data
    top = list(itertools.combinations(range(8), 3))
    assert len(top) * 1000 <= MEASURE_BATCH_CELLS
    ne = NumpyEngine(df, domain)
    with DuckDBEngine(path, domain) as de:
        spy = Spy(de, preferred=de.preferred_batch)
        got = dict(kv for _, tables in count_batches(domain, top, spy) for kv in tables.items())
        assert [len(c) for c in spy.calls] == [56]
        assert de.strategy_for(top) == "stream"
    want = ne.count(top)
    for s in top:
        assert np.array_equal(got[s], want[s]), s
    with DuckDBEngine(path, domain, strategy="grouping_sets") as de:
        spy = Spy(de, preferred=de.preferred_batch)
        list(count_batches(domain, top, spy))
        assert [len(c) for c in spy.calls] == [16, 16, 16, 8]


def test_cells_still_bound_a_streamed_batch():
    """The preferred batch never lifts MEASURE_BATCH_CELLS: tables alive together stay bounded."""
    big = Domain.from_sizes([200] * 4)  # a triple is 8,000,000 cells > 2^22
    assert big.cells((0, 1, 2)) > MEASURE_BATCH_CELLS
    eng = NumpyEngine(np.zeros((3, 4), dtype=np.uint8), big)
    spy = Spy(eng, preferred=STREAM_BATCH)
    top = list(itertools.combinations(range(4), 3))
    for batch, tables in count_batches(big, top, spy):
        assert len(batch) == 1 and int(tables[batch[0]].sum()) == 3
    assert len(spy.calls) == 4


def test_release_workflow_gate_forwards_the_preferred_batch(data):
    """The release workflow wraps the engine (to know when counts reach the noise step); the
    wrapper keeps the engine's batch size."""
    from dpmatrix._workflow import _Gate

    domain, df, path = data
    with DuckDBEngine(path, domain) as de:
        assert count_batch(_Gate(de)) == STREAM_BATCH
    assert count_batch(_Gate(Spy(NumpyEngine(df, domain)))) == COUNT_BATCH
