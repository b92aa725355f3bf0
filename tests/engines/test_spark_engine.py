"""Spark engine: identical counts and identical errors to the numpy and DuckDB engines.

The reference for every count is an independent brute force (a pandas ``groupby`` scattered into
a dense table, or a hand count); numpy and DuckDB are compared as well so that the three engines
are seen to agree on the same data. All tests run on one local[2] session (``conftest.py``).
"""

from __future__ import annotations

import itertools
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._domain import Domain
from dpmatrix._encode import RemappedValuesWarning, encode_frame
from dpmatrix.engines._base import CountEngine, marginals_from_maximal
from dpmatrix.engines._duckdb_engine import DuckDBEngine
from dpmatrix.engines._numpy_engine import NumpyEngine
from dpmatrix.engines._spark_engine import JAVA_HINT, SparkEngine, spark_session
from dpmatrix.errors import DataError

DATA = Path(__file__).resolve().parents[2] / "src" / "dpmatrix" / "data"

SPEC = {  # the raw-value domain of tests/test_encode.py
    "age": {"bins": [0, 18, 65, 120]},
    "color": {"labels": ["red", "green", "blue"]},
    "grade": {"labels": ["1", "2", "3", "other"], "kind": "ordinal"},
    "income": {"bins": [0, 1000.5, 50000], "labels": ["low", "high", "other"]},
    "n": 4,
}


def all_sets(d: int, k: int) -> list[tuple[int, ...]]:
    return [c for r in range(k + 1) for c in itertools.combinations(range(d), r)]


def reference(codes: pd.DataFrame, domain: Domain, s: tuple[int, ...]) -> np.ndarray:
    """Brute force: a pandas groupby of the codes, scattered into a dense table."""
    out = np.zeros(tuple(domain.sizes[i] for i in s), dtype=np.int64)
    if not s:
        out[()] = len(codes)
        return out
    for key, n in codes.groupby([domain.names[i] for i in s]).size().items():
        key = key if isinstance(key, tuple) else (key,)
        out[tuple(int(k) for k in key)] = n
    return out


def write(df: pd.DataFrame, path: Path) -> Path:
    df.to_csv(path, index=False) if path.suffix == ".csv" else df.to_parquet(path, index=False)
    return path


# -- identical counts ------------------------------------------------------------------------------
# seed 0 in the everyday run; the other four (several seconds each in Spark) are marked slow
@pytest.mark.parametrize("seed", [0] + [pytest.param(k, marks=pytest.mark.slow) for k in range(1, 5)])
def test_random_domains_identical_counts(spark, tmp_path, seed):
    """Random domains (1-6 attributes of 2-9 values, 0-2000 rows, some cells empty): Spark on a
    DataFrame, Parquet and CSV == numpy == DuckDB == brute force, for every set of <= 3
    attributes, the empty set (the total) included."""
    rng = np.random.default_rng(100 + seed)
    d = int(rng.integers(1, 7))
    sizes = [int(x) for x in rng.integers(2, 10, d)]
    n = [0, 1, 37, 500, 2000][seed]
    domain = Domain.from_sizes(sizes)
    codes = pd.DataFrame({nm: rng.integers(0, sz, n) for nm, sz in zip(domain.names, sizes)})
    if n:
        codes.iloc[: n // 2, -1] = 0  # skewed: some cells stay empty
    sets = all_sets(d, 3)
    truth = {s: reference(codes, domain, s) for s in sets}
    pq, csv = write(codes, tmp_path / "c.parquet"), write(codes, tmp_path / "c.csv")
    engines: dict[str, CountEngine] = {
        "numpy": NumpyEngine(codes, domain),
        "duckdb": DuckDBEngine(pq, domain),
        "spark-parquet": SparkEngine(str(pq), domain, spark=spark),
        "spark-csv": SparkEngine(str(csv), domain, spark=spark, batch_size=3),
        "spark-grouping-sets": SparkEngine(str(pq), domain, spark=spark, strategy="grouping_sets"),
        "spark-df": SparkEngine(spark.read.parquet(str(pq)), domain, cache=False),
    }
    for name, eng in engines.items():
        assert eng.n_records == n, name
        got = marginals_from_maximal(eng, sets)
        for s in sets:
            assert got[s].dtype == np.int64 and np.array_equal(got[s], truth[s]), (name, s)
        getattr(eng, "close", lambda: None)()


def test_adult_identical_to_numpy_and_duckdb(spark):
    """The shipped Adult data (CSV of codes, read by Spark as text): total, 1-, 2- and 3-way."""
    domain = Domain.from_json(DATA / "adult-domain.json")
    df = pd.read_csv(DATA / "adult.csv")
    pairs = [("age", "sex"), ("education-num", "income>50K"), ("race", "native-country"),
             ("capital-gain", "hours-per-week"), ("workclass", "occupation", "sex"), ("fnlwgt",)]  # fmt: skip
    sets = [domain.resolve(p) for p in pairs] + [()]
    ne = NumpyEngine(df, domain)
    with DuckDBEngine(DATA / "adult.csv", domain) as de, SparkEngine(
        str(DATA / "adult.csv"), domain, spark=spark
    ) as se:
        assert se.n_records == ne.n_records == de.n_records == len(df) == 48842
        a, b, c = (marginals_from_maximal(e, sets) for e in (ne, de, se))
    for s in sets:
        assert np.array_equal(c[s], reference(df, domain, s)), s
        assert np.array_equal(c[s], a[s]) and np.array_equal(c[s], b[s]), s


def clean_raw(n: int = 400, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.uniform(0, 120, n).round(1),
            "color": rng.choice(["red", "green", "blue"], n),
            "grade": rng.integers(1, 4, n),
            "income": rng.uniform(0, 50000, n).round(2),
            "n": rng.integers(0, 4, n),
            "unused": "zzz",
        }
    )


def raw_with_problems() -> pd.DataFrame:
    df = clean_raw(300, seed=11)
    df.loc[[0, 1, 2], "age"] = [-5.0, 130.0, 500.0]
    df.loc[[3, 4], "color"] = ["purple", "Red"]
    df.loc[[5, 6], "grade"] = [9, 0]
    df.loc[[7], "income"] = 60000.0
    df.loc[[8], "n"] = 5
    df.loc[[10, 11, 12], "age"] = [0.0, 18.0, 120.0]  # bin edges: left-closed, last bin closed
    df.loc[[13], "income"] = 1000.5
    return df


MIXED = {"age": "clip", "grade": "other", "income": "other", "n": "clip", "color": "error"}


@pytest.mark.filterwarnings("ignore::dpmatrix._encode.RemappedValuesWarning")  # DuckDB's copy
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("policy", ["error", "mixed"])
def test_raw_encoding_identical(spark, tmp_path, fmt, policy):
    """Labels, bins (edges included), codes and the clip/other policies: same codes (hence
    counts) and the same RemappedValuesWarning text as encode_frame and DuckDB."""
    domain = Domain.from_dict(SPEC)
    df = clean_raw() if policy == "error" else raw_with_problems().drop(index=[3, 4])
    pol = "error" if policy == "error" else MIXED
    path = write(df, tmp_path / f"raw.{fmt}")
    back = pd.read_csv(path) if fmt == "csv" else df
    sets = all_sets(len(domain), 2)
    with warnings.catch_warnings(record=True) as w_np:
        warnings.simplefilter("always")
        codes = encode_frame(back, domain, on_unknown=pol)
    with warnings.catch_warnings(record=True) as w_sp:
        warnings.simplefilter("always")
        se = SparkEngine(str(path), domain, "raw", on_unknown=pol, spark=spark)
    with DuckDBEngine(path, domain, encoding="raw", on_unknown=pol) as de, se:
        b, c = marginals_from_maximal(de, sets), marginals_from_maximal(se, sets)
    assert [str(x.message) for x in w_sp if x.category is RemappedValuesWarning] == [
        str(x.message) for x in w_np
    ]
    assert len(w_np) == (0 if policy == "error" else 1)
    for s in sets:
        truth = reference(codes, domain, s)
        assert np.array_equal(c[s], truth), s
        assert np.array_equal(b[s], truth), s


@pytest.mark.parametrize("policy", ["error", "clip", "other"])
@pytest.mark.parametrize("fmt", ["csv", pytest.param("parquet", marks=pytest.mark.slow)])
def test_raw_errors_identical(spark, tmp_path, policy, fmt):
    domain = Domain.from_dict(SPEC)
    df = raw_with_problems()
    df.loc[[9], "age"] = np.nan
    path = write(df, tmp_path / f"raw.{fmt}")
    back = pd.read_csv(path) if fmt == "csv" else df
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RemappedValuesWarning)
        with pytest.raises(DataError) as e_np:
            encode_frame(back, domain, on_unknown=policy)
        with pytest.raises(DataError) as e_sp:
            SparkEngine(str(path), domain, "raw", on_unknown=policy, spark=spark)
    assert str(e_sp.value) == str(e_np.value)
    assert ("column 'color': 2 rows with a value that matches no label: 'Red' (1 row), 'purple' (1 row)"
            in str(e_sp.value))


def test_csv_is_read_as_text_and_labels_match_as_written(spark, tmp_path):
    """yes/no, NA and zero-padded codes stay strings (a sniffing reader would make booleans,
    missing values and the integer 1): counted by hand."""
    domain = Domain.from_dict({"smoker": {"labels": ["yes", "no"]},
                               "region": {"labels": ["01", "02", "NA"]}})  # fmt: skip
    path = tmp_path / "t.csv"
    path.write_text("smoker,region\nyes,01\nno,02\nyes,NA\nyes,01\nno,01\n")
    with SparkEngine(str(path), domain, "raw", spark=spark) as se:
        t = se.count([(0, 1)])[(0, 1)]
    assert t.tolist() == [[2, 0, 1], [1, 1, 0]]


def test_table_name_and_spark_dataframe(spark, tmp_path):
    domain = Domain.from_sizes([3, 2])
    codes = pd.DataFrame({"a0": [0, 1, 2, 2, 1, 0, 2], "a1": [0, 0, 1, 1, 1, 0, 1]})
    sdf = spark.read.parquet(str(write(codes, tmp_path / "t.parquet")))
    sdf.createOrReplaceTempView("dpmatrix_test_people")
    want = np.array([[2, 0], [1, 1], [0, 3]])  # by hand
    for data in ("dpmatrix_test_people", sdf):
        with SparkEngine(data, domain, spark=spark) as se:
            assert np.array_equal(se.count([(0, 1)])[(0, 1)], want)
            assert int(se.count([()])[()]) == 7
    with pytest.raises(DataError, match="cannot read the table 'no_such_table'"):
        SparkEngine("no_such_table", domain, spark=spark)


# -- same errors as the other engines ------------------------------------------------------------
SIZES = [2, 3, 5, 4, 7, 3]


def bad_frames() -> dict[str, pd.DataFrame]:
    """The invalid code tables of tests/test_engines.py."""
    n = 50
    base = {f"a{i}": np.arange(n) % s for i, s in enumerate(SIZES)}
    out = {"missing": pd.DataFrame(base).drop(columns=["a2", "a5"])}
    df = pd.DataFrame(base).astype({"a1": float, "a3": float})
    df.loc[[3, 4, 9], "a1"] = np.nan
    df.loc[[7], "a3"] = np.nan
    out["nan"] = df
    df = pd.DataFrame(base).astype({"a2": float})
    df.loc[[1, 2], "a2"] = 1.5
    df.loc[[5], "a2"] = 2.25
    out["non-integer"] = df
    df = pd.DataFrame(base)
    df.loc[[0, 1, 2, 3], "a4"] = [7, 9, 9, -1]
    df.loc[[10], "a0"] = 2
    df.loc[[11], "a1"] = 40
    out["range"] = df
    df = pd.DataFrame(base).astype({"a1": object})
    df.loc[[0, 5], "a1"] = "abc"
    out["text"] = df
    return out


@pytest.mark.parametrize("case", ["missing", "nan", "non-integer", "range", "text"])
def test_validation_errors_identical(spark, tmp_path, case):
    domain = Domain.from_sizes(SIZES)
    df = bad_frames()[case]
    csv = write(df, tmp_path / "bad.csv")
    with pytest.raises(DataError) as csv_db:
        DuckDBEngine(csv, domain)
    with pytest.raises(DataError) as csv_sp:
        SparkEngine(str(csv), domain, spark=spark)
    assert str(csv_sp.value) == str(csv_db.value)
    if case != "text":  # a mixed object column is not a valid Parquet column
        with pytest.raises(DataError) as np_err:
            NumpyEngine(df, domain)
        pq = write(df, tmp_path / "bad.parquet")
        with pytest.raises(DataError) as pq_sp:
            SparkEngine(str(pq), domain, spark=spark)
        assert str(pq_sp.value) == str(np_err.value)


def test_wrong_column_types_and_missing_files(spark, tmp_path):
    domain = Domain.from_sizes([3, 2])
    sdf = spark.createDataFrame([([1, 2], 0), ([0], 1)], "a0 array<int>, a1 int")
    with pytest.raises(DataError, match=r"column 'a0' has Spark type array<int>, not a number or text"):
        SparkEngine(sdf, domain)
    sdf = spark.createDataFrame([("x", True), ("1", False)], "a0 string, a1 boolean")
    with pytest.raises(DataError, match=r"column 'a0': 1 row with a non-integer value, e.g. 'x'"):
        SparkEngine(sdf, domain)
    with pytest.raises(DataError, match="does not exist"):
        SparkEngine(str(tmp_path / "nope.parquet"), domain, spark=spark)
    with pytest.raises(DataError, match="no data file matches"):
        SparkEngine(str(tmp_path / "*.parquet"), domain, spark=spark)
    with pytest.raises(DataError, match="format="):
        SparkEngine(str(tmp_path / "data.bin"), domain, spark=spark)


def test_glob_of_parquet_parts(spark, tmp_path):
    domain = Domain.from_sizes([4, 3])
    rng = np.random.default_rng(0)
    parts = [pd.DataFrame({"a0": rng.integers(0, 4, 100), "a1": rng.integers(0, 3, 100)}) for _ in range(3)]
    for i, p in enumerate(parts):
        write(p, tmp_path / f"part-{i}.parquet")
    with SparkEngine(str(tmp_path / "part-*.parquet"), domain, spark=spark) as se:
        t = se.count([(0, 1)])[(0, 1)]
    assert np.array_equal(t, reference(pd.concat(parts), domain, (0, 1)))


# -- session handling ------------------------------------------------------------------------------
def test_java_missing_is_one_clear_line(monkeypatch):
    from pyspark.sql import SparkSession

    import dpmatrix.engines._spark_engine as se

    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    monkeypatch.setattr(se.shutil, "which", lambda name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(DataError) as err:
        spark_session("local[1]")
    assert str(err.value) == JAVA_HINT and "\n" not in JAVA_HINT and "openjdk-17" in JAVA_HINT


def test_active_session_used_as_given_and_not_stopped(spark, tmp_path):
    session, owned = spark_session()
    assert session is spark and not owned
    with pytest.raises(DataError, match="already running"):
        spark_session("spark://example.invalid:7077")
    domain = Domain.from_sizes([2])
    path = write(pd.DataFrame({"a0": [0, 1, 1]}), tmp_path / "x.parquet")
    SparkEngine(str(path), domain).close()  # uses the active session: must not stop it
    assert spark.range(3).count() == 3


# -- entry points and privacy hygiene --------------------------------------------------------------
def test_measure_spark_dataframe_and_path_equal_numpy(spark, tmp_path):
    """Same counts => bit-identical noisy answers from the same seed, whatever the engine."""
    domain = Domain.from_sizes([3, 4, 2])
    rng = np.random.default_rng(3)
    codes = pd.DataFrame({nm: rng.integers(0, s, 500) for nm, s in zip(domain.names, domain.sizes)})
    path = write(codes, tmp_path / "m.parquet")
    plan = dm.plan(dm.Workload.marginals(domain, 2, upto=True), rho=1.0)
    ref = plan.measure(codes, rng=np.random.default_rng(9))
    for data, engine in [(spark.read.parquet(str(path)), None), (str(path), "spark")]:
        got = plan.measure(data, rng=np.random.default_rng(9), engine=engine)
        assert ref.noisy.keys() == got.noisy.keys()
        for k in ref.noisy:
            np.testing.assert_array_equal(ref.noisy[k], got.noisy[k])


def test_cli_release_records_engine_not_cluster(spark, tmp_path, capsys):
    from dpmatrix.cli import main

    domain = {"age": {"bins": [0, 40, 120]}, "sex": {"labels": ["F", "M"]}}
    (tmp_path / "d.json").write_text(json.dumps(domain))
    df = pd.DataFrame({"age": [20.5, 50, 70, 33], "sex": ["F", "M", "M", "F"]})
    write(df, tmp_path / "secret_lake.csv")
    out = tmp_path / "rel"
    rc = main([
        "release", str(tmp_path / "secret_lake.csv"), "--domain", str(tmp_path / "d.json"),
        "--workload", "all:<=2", "--rho", "1", "--out", str(out), "--seed", "1", "--quiet",
        "--engine", "spark", "--spark-conf", "spark.sql.shuffle.partitions=2",
    ])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    text = (out / "manifest.json").read_text()
    assert json.loads(text)["notes"]["data"]["engine"] == "spark"
    master = spark.sparkContext.master
    for leak in ("secret_lake", str(tmp_path), master, "local[", "spark://", "shuffle"):
        assert leak not in text, leak


def test_spark_agrees_on_missing_values_and_numeric_forms(spark, tmp_path):
    """Spark reads values by the one rule (dpmatrix._values): the same hand counts as the numpy
    and DuckDB engines in tests/engines/test_values.py."""
    from test_values import DOMAIN, FRAME, NA  # same directory (pytest puts it on sys.path)

    from dpmatrix.engines._projected import ProjectedEngine, subdomain

    csv, pq = tmp_path / "x.csv", tmp_path / "x.parquet"
    FRAME.to_csv(csv, index=False)
    FRAME.to_parquet(pq)
    sub, pos = subdomain(DOMAIN, (0, 1, 2))
    for src in (csv, pq):
        eng = ProjectedEngine(SparkEngine(str(src), sub, "raw", spark=spark, na_values=NA), DOMAIN, pos)
        t = eng.count([(0,), (1,), (2,), (0, 2)])
        assert eng.n_records == 5
        assert t[(0,)].tolist() == [1, 2, 0, 2] and t[(1,)].tolist() == [2, 3]
        assert t[(2,)].tolist() == [2, 3, 0] and int(t[(0, 2)][3, 0]) == 1
        eng.close()


def test_a_relative_path_is_read_from_pythons_working_folder(spark, tmp_path, monkeypatch):
    """The session's JVM keeps the folder it started in; a relative path names a file in the
    folder Python is in now (a notebook or a script that changed folders after the first read)."""
    domain = Domain({"a": 2, "b": 3})
    here = tmp_path / "elsewhere"
    here.mkdir()
    pd.DataFrame({"a": [0, 1, 1, 0], "b": [2, 2, 0, 1]}).to_parquet(here / "d.parquet", index=False)
    monkeypatch.chdir(here)
    assert not (Path(spark.sparkContext._jvm.java.lang.System.getProperty("user.dir")) / "d.parquet").exists()
    with SparkEngine("d.parquet", domain, spark=spark) as se:
        got = se.count([(0, 1)])[(0, 1)]
    np.testing.assert_array_equal(got, np.array([[0, 1, 1], [1, 0, 1]]))  # (a, b) = (0,2) (1,2) (1,0) (0,1)
