"""Counting engines: numpy vs DuckDB vs a plain pandas groupby, validation, no pandas reads."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpmatrix._domain import Domain
from dpmatrix.engines._base import CountEngine, marginals_from_maximal, maximal_sets, project
from dpmatrix.engines._duckdb_engine import DuckDBEngine
from dpmatrix.engines._numpy_engine import NumpyEngine
from dpmatrix.errors import DataError, WorkloadError

DATA = Path(__file__).resolve().parents[2] / "src" / "dpmatrix" / "data"
SIZES = [2, 3, 5, 4, 7, 3]


def all_sets(d: int, k: int) -> list[tuple[int, ...]]:
    return [c for r in range(k + 1) for c in itertools.combinations(range(d), r)]


def reference(df: pd.DataFrame, domain: Domain, s: tuple[int, ...]) -> np.ndarray:
    """Plain pandas groupby, scattered into a dense table."""
    shape = tuple(domain.sizes[i] for i in s)
    out = np.zeros(shape, dtype=np.int64)
    if not s:
        out[()] = len(df)
        return out
    g = df.groupby([domain.names[i] for i in s]).size()
    for key, n in g.items():
        key = key if isinstance(key, tuple) else (key,)
        out[tuple(int(k) for k in key)] = n
    return out


@pytest.fixture(scope="module")
def domain() -> Domain:
    return Domain.from_sizes(SIZES)


@pytest.fixture(scope="module")
def frame(domain: Domain) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 3000
    df = pd.DataFrame({name: rng.integers(0, size, n) for name, size in zip(domain.names, SIZES)})
    df.loc[:10, "a4"] = 6  # a cell-heavy corner; some cells stay empty
    df["ignored"] = "x"  # extra column: ignored by every engine
    return df


@pytest.fixture(scope="module")
def files(frame: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("data")
    csv, parquet = d / "data.csv", d / "data.parquet"
    frame.to_csv(csv, index=False)
    frame.to_parquet(parquet, index=False)
    return {"csv": csv, "parquet": parquet}


@pytest.fixture(scope="module")
def engines(frame, domain, files):
    engs = {
        "numpy": NumpyEngine(frame, domain),
        "duckdb-csv": DuckDBEngine(files["csv"], domain),
        "duckdb-parquet": DuckDBEngine(files["parquet"], domain),
        "duckdb-parquet-scan": DuckDBEngine(files["parquet"], domain, materialize=False),
        "duckdb-csv-groupby": DuckDBEngine(files["csv"], domain, strategy="group_by"),
    }
    yield engs
    for name, e in engs.items():
        if name.startswith("duckdb"):
            e.close()


# -- helpers -------------------------------------------------------------------------------------
def test_maximal_sets_and_project():
    sets = [(0, 1), (1,), (0, 1, 2), (2, 3), (3,), (), (0, 1, 2)]
    assert maximal_sets(sets) == [(0, 1, 2), (2, 3)]
    t = np.arange(24).reshape(2, 3, 4)
    assert np.array_equal(project(t, (0, 1, 2), (0, 2)), t.sum(axis=1))
    assert np.array_equal(project(t, (0, 1, 2), ()), np.asarray(t.sum()))
    assert project(t, (0, 1, 2), (0, 1, 2)) is t
    with pytest.raises(ValueError):
        project(t, (0, 1, 2), (3,))


def test_engines_satisfy_protocol(engines):
    for e in engines.values():
        assert isinstance(e, CountEngine)
        assert e.n_records == 3000


def test_numpy_counts_equal_pandas_groupby(engines, frame, domain):
    sets = all_sets(len(SIZES), 3)
    got = engines["numpy"].count(sets)
    assert set(got) == set(sets)
    for s in sets:
        assert got[s].dtype == np.int64
        assert got[s].shape == tuple(SIZES[i] for i in s)
        assert np.array_equal(got[s], reference(frame, domain, s)), s


@pytest.mark.parametrize(
    "name", ["duckdb-csv", "duckdb-parquet", "duckdb-parquet-scan", "duckdb-csv-groupby"]
)
def test_duckdb_identical_to_numpy(engines, name):
    sets = all_sets(len(SIZES), 3)
    want = engines["numpy"].count(sets)
    got = engines[name].count(sets)
    for s in sets:
        assert got[s].dtype == np.int64
        assert np.array_equal(got[s], want[s]), (name, s)


# -- the DuckDB engine's strategies --------------------------------------------------------------
# sets of every size: the empty set, 1- to 4-way, all six attributes (2,520 cells), unsorted input
MIXED_SETS = [(), (4,), (5, 0), (1, 2, 4), (0, 2, 3, 4), (0, 1, 2, 3, 4, 5), (3, 1), (2,)]


@pytest.mark.parametrize("materialize", [True, False])
@pytest.mark.parametrize(
    "chunk_bytes, arrow_rows, chunks",
    # 1000 bytes per chunk: 33 rows of 6 one-byte codes + 24 index bytes, so 90 chunks of 33
    # rows and a last one of 30; DuckDB's Arrow batches of 7 rows straddle the chunk ends.
    # 10^6 bytes: every row in one chunk, from batches of 128 rows.
    [(1000, 7, [33] * 90 + [30]), (10**6, 128, [3000])],
)
def test_duckdb_stream_in_chunks_equals_groupby(
    frame, domain, files, monkeypatch, materialize, chunk_bytes, arrow_rows, chunks
):
    from dpmatrix.engines import _duckdb_engine as duckdb_engine

    seen: list[int] = []
    real = duckdb_engine.add_counts

    def spy(*args, n_rows, **kwargs):
        seen.append(n_rows)
        return real(*args, n_rows=n_rows, **kwargs)

    monkeypatch.setattr(duckdb_engine, "add_counts", spy)
    monkeypatch.setattr(duckdb_engine, "ARROW_BATCH_ROWS", arrow_rows)
    with DuckDBEngine(files["parquet"], domain, strategy="stream", chunk_bytes=chunk_bytes,
                      materialize=materialize) as de:  # fmt: skip
        got = de.count(MIXED_SETS)
    assert seen == chunks
    assert set(got) == {tuple(sorted(s)) for s in MIXED_SETS}
    for s, t in got.items():
        assert t.dtype == np.int64 and t.shape == tuple(SIZES[i] for i in s)
        assert np.array_equal(t, reference(frame, domain, s)), s


def test_duckdb_stream_no_rows(domain, tmp_path):
    path = tmp_path / "empty.parquet"
    pd.DataFrame({n: np.zeros(0, dtype=np.int64) for n in domain.names}).to_parquet(path, index=False)
    with DuckDBEngine(path, domain, strategy="stream") as de:
        got = de.count(MIXED_SETS)
    assert de.n_records == 0 and all(not t.any() for t in got.values())


def test_duckdb_stream_reads_only_needed_columns(frame, domain, files):
    """Chunk rows come from the byte budget of the columns a call needs: 2 one-byte columns + 24
    index bytes per row, 26 bytes → a 260-byte budget is 10 rows per chunk, 300 chunks."""
    with DuckDBEngine(files["csv"], domain, strategy="stream", chunk_bytes=260) as de:
        got = de.count([(1, 3), (3,)])
    for s in [(1, 3), (3,)]:
        assert np.array_equal(got[s], reference(frame, domain, s)), s


def test_duckdb_auto_strategy_rule(frame, domain, files):
    """auto: SQL for fewer than 2 sets per column read, all of <= 2^16 cells; else streaming."""
    with DuckDBEngine(files["csv"], domain) as de:
        assert de.strategy == "auto"
        assert de.strategy_for([(0, 1, 2)]) == "grouping_sets"  # 1 set, 3 columns
        assert de.strategy_for([(i,) for i in range(6)]) == "grouping_sets"  # 6 sets, 6 columns
        triples = list(itertools.combinations(range(6), 3))
        assert de.strategy_for(triples) == "stream"  # 20 sets, 6 columns
        of_five = list(itertools.combinations(range(5), 3))
        assert de.strategy_for(of_five) == "stream"  # 10 sets, 5 columns: 10 >= 2 * 5
        assert de.strategy_for(of_five[1:]) == "grouping_sets"  # 9 sets, 5 columns
        got = de.count(triples)
        for s in triples:
            assert np.array_equal(got[s], reference(frame, domain, s)), s
    big = Domain({"x": 300, "y": 300})  # 90,000 cells > 2^16: streamed even alone
    df = pd.DataFrame({"x": [299, 0, 299, 5], "y": [1, 0, 1, 299]})
    path = files["csv"].parent / "big.parquet"
    df.to_parquet(path, index=False)
    with DuckDBEngine(path, big) as de:
        assert de.strategy_for([(0, 1)]) == "stream"
        assert de.strategy_for([(0,), (1,)]) == "grouping_sets"
        t = de.count([(0, 1)])[(0, 1)]
    assert t.dtype == np.int64 and t[299, 1] == 2 and t[0, 0] == 1 and t[5, 299] == 1 and t.sum() == 4
    for name, st in [("grouping_sets", "grouping_sets"), ("group_by", "group_by"), ("stream", "stream")]:
        with DuckDBEngine(files["csv"], domain, strategy=st) as de:
            assert de.strategy_for(triples) == de.strategy_for([(0,)]) == name


def test_duckdb_preferred_batch(domain, files):
    """Callers batching many sets (measure.counting) get one call for all sets when streaming."""
    from dpmatrix.engines._duckdb_engine import STREAM_BATCH

    with DuckDBEngine(files["csv"], domain) as de:
        assert de.preferred_batch == STREAM_BATCH
    with DuckDBEngine(files["csv"], domain, strategy="grouping_sets", batch_size=9) as de:
        assert de.preferred_batch == 9
    assert NumpyEngine.preferred_batch == 512


def test_duckdb_bad_strategy_options(domain, files):
    with pytest.raises(ValueError, match="strategy must be one of 'auto', 'stream'"):
        DuckDBEngine(files["csv"], domain, strategy="arrow")
    with pytest.raises(ValueError, match="chunk_bytes must be positive"):
        DuckDBEngine(files["csv"], domain, chunk_bytes=0)


def test_duckdb_stream_sees_a_changed_file(frame, domain, tmp_path):
    """Without a code table the file is read again per call: more rows than at construction
    is an error, not tables that disagree with n_records."""
    path = tmp_path / "grows.parquet"
    frame.to_parquet(path, index=False)
    with DuckDBEngine(path, domain, materialize=False, strategy="stream") as de:
        pd.concat([frame, frame.iloc[:5]]).to_parquet(path, index=False)
        with pytest.raises(DataError, match="now has 3,005 rows, 3,000 when the engine was built"):
            de.count([(0, 1)])


@pytest.mark.parametrize("name", ["numpy", "duckdb-csv", "duckdb-parquet"])
def test_derived_submarginals_equal_direct_counts(engines, frame, domain, name):
    eng = engines[name]
    sets = all_sets(len(SIZES), 3)
    derived = marginals_from_maximal(eng, sets)
    direct = eng.count(sets)
    assert set(derived) == set(sets)
    for s in sets:
        assert np.array_equal(derived[s], direct[s]), s
        assert np.array_equal(derived[s], reference(frame, domain, s)), s


class SpyEngine:
    def __init__(self, inner):
        self.inner, self.calls = inner, []

    domain = property(lambda self: self.inner.domain)
    n_records = property(lambda self: self.inner.n_records)

    def count(self, attr_sets, progress=False):
        self.calls.append(list(attr_sets))
        return self.inner.count(attr_sets, progress)


def test_only_maximal_sets_are_counted(engines):
    spy = SpyEngine(engines["numpy"])
    # (4,) is in (0, 4) [2*7 cells] and (3, 4, 5) [84 cells]: the smaller superset is used
    req = [(1, 0), (4,), (0, 4), (3, 4, 5), (5, 3), ()]
    out = marginals_from_maximal(spy, req)
    assert spy.calls == [[(0, 1), (0, 4), (3, 4, 5)]]
    assert set(out) == {(0, 1), (4,), (0, 4), (3, 4, 5), (3, 5), ()}
    assert int(out[()]) == 3000
    assert marginals_from_maximal(spy, []) == {}


def test_bad_attribute_sets(engines):
    with pytest.raises(WorkloadError, match="out of range"):
        engines["numpy"].count([(0, 9)])
    with pytest.raises(WorkloadError, match="more than once"):
        engines["duckdb-csv"].count([(1, 1)])


def test_progress_goes_to_stderr(engines, capsys):
    engines["numpy"].count([(0, 1)], progress=True)
    engines["duckdb-csv"].count([(0, 1), (2,)], progress=True)
    err = capsys.readouterr().err
    assert "counting marginals: 1/1" in err and "2/2" in err


def test_numpy_array_input_and_compact_codes(frame, domain):
    arr = frame[list(domain.names)].to_numpy()
    e = NumpyEngine(arr, domain)
    assert e.codes(0).dtype == np.uint8
    assert np.array_equal(e.count([(0, 2)])[(0, 2)], reference(frame, domain, (0, 2)))
    with pytest.raises(DataError, match="one column per attribute"):
        NumpyEngine(arr[:, :3], domain)
    big = Domain({"x": 300, "y": 2})
    e2 = NumpyEngine(pd.DataFrame({"x": [299, 0], "y": [1, 0]}), big)
    assert e2.codes(0).dtype == np.uint16
    assert e2.count([(0, 1)])[(0, 1)][299, 1] == 1


def test_empty_data(domain):
    e = NumpyEngine(pd.DataFrame({n: np.zeros(0, dtype=int) for n in domain.names}), domain)
    out = marginals_from_maximal(e, [(0, 1), ()])
    assert out[(0, 1)].sum() == 0 and int(out[()]) == 0


# -- validation: same DataError message from every engine ----------------------------------------
def bad_frames(domain: Domain) -> dict[str, tuple[pd.DataFrame, list[str]]]:
    n = 50
    base = {name: np.arange(n) % size for name, size in zip(domain.names, SIZES)}
    out = {}
    df = pd.DataFrame(base).drop(columns=["a2", "a5"])
    out["missing"] = (df, ["'a2', 'a5'", "lack column"])
    df = pd.DataFrame(base).astype({"a1": float, "a3": float})
    df.loc[[3, 4, 9], "a1"] = np.nan
    df.loc[[7], "a3"] = np.nan
    out["nan"] = (df, ["column 'a1': 3 rows with a missing value", "column 'a3': 1 row with"])
    df = pd.DataFrame(base).astype({"a2": float})
    df.loc[[1, 2], "a2"] = 1.5
    df.loc[[5], "a2"] = 2.25
    out["non-integer"] = (df, ["column 'a2': 3 rows with a non-integer value, e.g. 1.5, 2.25"])
    df = pd.DataFrame(base)
    df.loc[[0, 1, 2, 3], "a4"] = [7, 9, 9, -1]
    df.loc[[10], "a0"] = 2
    out["range"] = (
        df,
        [
            "column 'a4': 4 rows with a code outside 0..6: -1, 7, 9",
            "column 'a0': 1 row with a code outside 0..1: 2",
        ],
    )
    df = pd.DataFrame(base).astype({"a1": object})
    df.loc[[0, 5], "a1"] = "abc"
    out["text"] = (df, ["column 'a1': 2 rows with a non-integer value, e.g. 'abc'"])
    return out


@pytest.mark.parametrize("case", ["missing", "nan", "non-integer", "range", "text"])
def test_validation_errors_identical(case, domain, tmp_path):
    df, fragments = bad_frames(domain)[case]
    with pytest.raises(DataError) as np_err:
        NumpyEngine(df, domain)
    msg = str(np_err.value)
    for f in fragments:
        assert f in msg, msg
    csv, parquet = tmp_path / "bad.csv", tmp_path / "bad.parquet"
    df.to_csv(csv, index=False)
    if case != "text":  # a mixed object column is not a valid Parquet column
        df.to_parquet(parquet, index=False)
    # pandas re-reads the CSV as the numpy engine sees it from the file (every column text)
    with pytest.raises(DataError) as csv_np_err:
        NumpyEngine(pd.read_csv(csv, dtype=str), domain)
    with pytest.raises(DataError) as csv_err:
        DuckDBEngine(csv, domain)
    assert str(csv_err.value) == str(csv_np_err.value)
    if case != "text":
        with pytest.raises(DataError) as pq_err:
            DuckDBEngine(parquet, domain)
        assert str(pq_err.value) == msg
        with pytest.raises(DataError) as pq_err2:
            DuckDBEngine(parquet, domain, materialize=False)
        assert str(pq_err2.value) == msg


def test_many_offending_values_are_summarised(domain):
    df = pd.DataFrame({n: np.zeros(40, dtype=int) for n in domain.names})
    df["a4"] = np.arange(40) + 7
    with pytest.raises(DataError, match=r"40 rows with a code outside 0\.\.6: 7, 8, 9, 10, 11, \.\.\. "
                       r"\(40 distinct values\)"):  # fmt: skip
        NumpyEngine(df, domain)


def test_duckdb_file_errors(domain, tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        DuckDBEngine(tmp_path / "nope.csv", domain)
    p = tmp_path / "data.bin"
    p.write_text("a0\n1\n")
    with pytest.raises(DataError, match="format="):
        DuckDBEngine(p, domain)
    with pytest.raises(DataError, match="'a1'"):
        DuckDBEngine(p, domain, format="csv")


# -- shipped Adult data --------------------------------------------------------------------------
def test_adult_both_engines():
    domain = Domain.from_json(DATA / "adult-domain.json")
    df = pd.read_csv(DATA / "adult.csv")
    ne = NumpyEngine(df, domain)
    pairs = [("age", "sex"), ("education-num", "income>50K"), ("race", "native-country"),
             ("workclass", "occupation"), ("capital-gain", "hours-per-week")]  # fmt: skip
    sets = [domain.resolve(p) for p in pairs]
    with DuckDBEngine(DATA / "adult.csv", domain) as de:
        assert de.n_records == ne.n_records == len(df)
        a = marginals_from_maximal(ne, sets)
        b = marginals_from_maximal(de, sets)
    for s in sets:
        assert np.array_equal(a[s], b[s])
        assert np.array_equal(a[s], reference(df, domain, s))


# -- the DuckDB path never reads through pandas --------------------------------------------------
def test_duckdb_never_reads_through_pandas(monkeypatch, domain, files, frame):
    def boom(*args, **kwargs):
        raise AssertionError("pandas was used to read or build the data")

    monkeypatch.setattr(pd, "read_csv", boom)
    monkeypatch.setattr(pd, "read_parquet", boom)
    monkeypatch.setattr(pd.io.parsers, "read_csv", boom)
    # no DataFrame may be built at all while the engine reads, validates and counts
    monkeypatch.setattr(pd.DataFrame, "__init__", boom)
    sets = all_sets(len(SIZES), 2)
    for path in files.values():
        for strategy in ("stream", "grouping_sets", "group_by"):
            with DuckDBEngine(path, domain, strategy=strategy) as de:
                got = marginals_from_maximal(de, sets)
            assert int(got[()]) == 3000
    with pytest.raises(DataError):  # the validation path (error messages) too
        DuckDBEngine(files["csv"], Domain({"a0": 2, "a4": 5}))
    monkeypatch.undo()
    for s in sets:
        assert np.array_equal(got[s], reference(frame, domain, s))
