"""One-pass Spark counting, fingerprints of data Spark holds, and Spark's failures as one line.

References are independent: a pandas ``groupby`` of the shipped UCI Adult codes (brute force),
hand-derived passes and pieces, and DuckDB on the same files. Spark runs on the local[2] session
of ``conftest.py`` (the real-cluster tests are in ``test_spark_cluster.py``).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dpmatrix._domain import Domain
from dpmatrix.cli import main
from dpmatrix.engines import engine_for
from dpmatrix.engines._spark_count import (
    add_pieces,
    count_partition,
    piece_array,
    plan_passes,
)
from dpmatrix.engines._spark_engine import (
    SparkEngine,
    check_master_reachable,
    quiet_pyspark,
)
from dpmatrix.errors import DataError

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "src" / "dpmatrix" / "data"
COLUMNS = ["age", "workclass", "education-num", "race", "sex", "income>50K"]


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    return pd.read_csv(DATA / "adult.csv")[COLUMNS]


@pytest.fixture(scope="module")
def domain() -> Domain:
    spec = json.loads((DATA / "adult-domain.json").read_text())
    return Domain.from_dict({c: spec[c] for c in COLUMNS})


def brute_force(df: pd.DataFrame, domain: Domain, s: tuple[int, ...]) -> np.ndarray:
    out = np.zeros([domain.sizes[i] for i in s], dtype=np.int64)
    for key, n in df.groupby([domain.names[i] for i in s]).size().items():
        out[tuple(int(k) for k in (key if isinstance(key, tuple) else (key,)))] = n
    return out


def lake(df: pd.DataFrame, folder: Path, parts: int, seed: int | None = None) -> Path:
    """``df`` in ``parts`` Parquet part files (rows shuffled first when ``seed`` is given)."""
    if seed is not None:
        df = df.sample(frac=1.0, random_state=seed)
    folder.mkdir(parents=True, exist_ok=True)
    for k, idx in enumerate(np.array_split(np.arange(len(df)), parts)):
        df.iloc[idx].to_parquet(folder / f"part-{k:05d}.parquet", index=False)
    return folder


TRIPLES = list(itertools.combinations(range(len(COLUMNS)), 3))


# -- the executor-side kernel, without Spark ---------------------------------------------------
def test_plan_passes_by_hand():
    assert plan_passes([4, 4, 4, 4], budget=8) == [[0, 1], [2, 3]]
    assert plan_passes([4, 9, 4], budget=8) == [[0, 2], [1]]  # 9 > 8: alone, counted another way
    assert plan_passes([], budget=8) == []
    assert plan_passes([8, 1], budget=8) == [[0], [1]]


def test_pieces_smallest_width_and_sum():
    a = np.array([0, 255, 3], dtype=np.int64)
    b = np.array([1, 1, 70_000], dtype=np.int64)
    from dpmatrix.engines._spark_count import _piece_bytes

    pa_, pb = _piece_bytes(a), _piece_bytes(b)
    assert pa_[0] == 1 and len(pa_) == 1 + 3  # max 255 fits one byte
    assert pb[0] == 4 and len(pb) == 1 + 12  # 70,000 needs four
    assert piece_array(add_pieces(pa_, pb)).tolist() == [1, 256, 70_003]


def test_count_partition_sums_to_brute_force(adult, domain):
    """Three 'partitions' of Adult rows in Arrow batches of odd sizes, counted by the kernel
    and summed piece by piece (pieces of 100 cells): every triple equals the groupby."""
    sets = TRIPLES
    offsets = np.cumsum([0] + [domain.cells(s) for s in sets]).tolist()
    cols = list(range(len(COLUMNS)))
    total: dict[int, bytes] = {}
    for part in np.array_split(adult.to_numpy(dtype=np.int16), 3):
        batches = [
            pa.RecordBatch.from_arrays([pa.array(part[lo : lo + 777, j]) for j in cols], names=[f"c{j}" for j in cols])
            for lo in range(0, len(part), 777)
        ]
        for rb in count_partition(iter(batches), domain.sizes, sets, offsets, cols, piece_cells=100, chunk_rows=5000):
            k, d = rb.column(0)[0].as_py(), rb.column(1)[0].as_py()
            total[k] = add_pieces(total[k], d) if k in total else d
    flat = np.zeros(offsets[-1], dtype=np.int64)
    for k, d in total.items():
        got = piece_array(d)
        flat[k * 100 : k * 100 + got.size] = got
    for j, s in enumerate(sets):
        want = brute_force(adult, domain, s)
        assert np.array_equal(flat[offsets[j] : offsets[j + 1]].reshape(want.shape), want), s


# -- the engine on Spark --------------------------------------------------------------------------
def test_one_pass_budgeted_passes_and_sql_fallback_agree(spark, adult, domain, tmp_path):
    """All 20 triples of six Adult attributes from 3 part files: one counting job with the
    default budget; several passes plus the SQL fallback (a table larger than the budget) with
    a tiny budget; the old per-batch SQL strategy — all equal the brute force."""
    folder = lake(adult, tmp_path / "lake", 3)
    glob = str(folder / "*.parquet")
    one = SparkEngine(glob, domain, spark=spark)
    before = one.jobs
    got = one.count(TRIPLES)
    assert one.jobs - before == 1  # one scan for every table
    big = max(domain.cells(s) for s in TRIPLES)
    tiny = SparkEngine(glob, domain, spark=spark, max_cells=big - 1)  # the largest table is over it
    before = tiny.jobs
    got_tiny = tiny.count(TRIPLES)
    assert tiny.jobs - before > 1  # several passes
    keys = SparkEngine(glob, domain, spark=spark, strategy="keys", batch_size=7)
    got_keys = keys.count(TRIPLES)
    for s in TRIPLES:
        want = brute_force(adult, domain, s)
        for name, g in (("one", got), ("tiny", got_tiny), ("keys", got_keys)):
            assert np.array_equal(g[s], want), (name, s)
    for e in (one, tiny, keys):
        e.close()


def test_fingerprint_identifies_rows_not_files(spark, adult, domain, tmp_path):
    """The same rows cut into other part files in another order give the same fingerprint; one
    changed value, or one row fewer, changes it; the driver never reads the files."""
    a = SparkEngine(str(lake(adult, tmp_path / "a", 3) / "*.parquet"), domain, spark=spark)
    b = SparkEngine(str(lake(adult, tmp_path / "b", 5, seed=1) / "*.parquet"), domain, spark=spark)
    changed = adult.copy()
    changed.iloc[100, 0] = (changed.iloc[100, 0] + 1) % domain.sizes[0]
    c = SparkEngine(str(lake(changed, tmp_path / "c", 3) / "*.parquet"), domain, spark=spark)
    d = SparkEngine(str(lake(adult.iloc[1:], tmp_path / "d", 3) / "*.parquet"), domain, spark=spark)
    fa = a.fingerprint()
    assert fa.startswith("spark-xxhash64-sum:") and len(fa) == len("spark-xxhash64-sum:") + 64
    assert fa == b.fingerprint()
    assert c.fingerprint() != fa and d.fingerprint() != fa


def test_type_drift_between_part_files_is_one_line_naming_the_file(spark, tmp_path):
    folder = tmp_path / "drift"
    folder.mkdir()
    pd.DataFrame({"a0": np.array([0, 1, 2], dtype="int8")}).to_parquet(folder / "part-0.parquet", index=False)
    pd.DataFrame({"a0": np.array([2, 1, 0], dtype="int64")}).to_parquet(folder / "part-1.parquet", index=False)
    with pytest.raises(DataError) as err:
        SparkEngine(str(folder / "*.parquet"), Domain.from_sizes([3]), spark=spark)
    msg = str(err.value)
    assert "\n" not in msg and len(msg) < 400, msg
    assert "part-" in msg and "column 'a0'" in msg and "disagree in type" in msg, msg


def test_missing_values_name_the_part_file(spark, tmp_path):
    """A column absent from one part file reads as missing values there: the message names it."""
    folder = tmp_path / "lake"
    folder.mkdir()
    pd.DataFrame({"a0": [0, 1, 2], "a1": [1, 1, 0]}).to_parquet(folder / "part-0.parquet", index=False)
    pd.DataFrame({"a0": [2, 2]}).to_parquet(folder / "part-1.parquet", index=False)
    dom = Domain.from_sizes([3, 2])
    with pytest.raises(DataError) as err:
        SparkEngine(str(folder), dom, spark=spark, format="parquet")
    assert "column 'a1': 2 rows with a missing value" in str(err.value)
    assert "part-1.parquet" in str(err.value) and "part-0.parquet" not in str(err.value)


def test_codes_with_a_labelled_domain(spark, adult, domain, tmp_path):
    """Adult codes (a labelled domain) in Parquet: encoding='codes' counts them on Spark as on
    DuckDB; 'auto' takes the same reading as DuckDB's 'auto' (or refuses the same way)."""
    folder = lake(adult, tmp_path / "lake", 2)
    glob = str(folder / "*.parquet")
    eng = engine_for(glob, domain, engine="spark", encoding="codes", spark=spark)
    assert eng.encoding == "codes"
    s = (0, 4, 5)
    assert np.array_equal(eng.count([s])[s], brute_force(adult, domain, s))
    try:
        duck = engine_for(glob, domain, engine="duckdb", encoding="auto")
    except DataError as exc:
        with pytest.raises(DataError, match="neither reading|both as raw values"):
            engine_for(glob, domain, engine="spark", encoding="auto", spark=spark)
        assert "neither" in str(exc) or "both" in str(exc)
    else:
        spark_auto = engine_for(glob, domain, engine="spark", encoding="auto", spark=spark)
        assert spark_auto.encoding == duck.encoding


def test_unreachable_master_is_named():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(DataError, match=rf"cannot reach the Spark master at spark://127.0.0.1:{port} "):
        check_master_reachable(f"spark://127.0.0.1:{port}", timeout=2)


def test_cli_unreachable_master_is_one_line_and_not_about_java(tmp_path):
    """In a fresh process (no JVM is started: the master is checked first)."""
    import socket

    pd.DataFrame({"a0": [0, 1]}).to_parquet(tmp_path / "d.parquet", index=False)
    (tmp_path / "dom.json").write_text('{"a0": 2}')
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    res = subprocess.run(
        [sys.executable, "-m", "dpmatrix", "release", str(tmp_path / "d.parquet"), "--engine", "spark",
         "--spark-master", f"spark://127.0.0.1:{port}", "--domain", str(tmp_path / "dom.json"),
         "-w", "all:<=1", "--rho", "1", "--out", str(tmp_path / "r"), "--no-ledger", "--quiet"],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert any(f"cannot reach the Spark master at spark://127.0.0.1:{port}" in ln for ln in lines), res.stderr
    assert "Java" not in res.stderr and "pip install" not in res.stderr
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


def test_ctrl_c_cancels_the_job_and_the_session_lives_on(spark, tmp_path):
    """SIGINT while a Spark job runs: KeyboardInterrupt (the CLI turns it into 'interrupted',
    exit 130), the job group cancelled, and the session still counts afterwards."""
    pd.DataFrame({"a0": [0, 1, 1]}).to_parquet(tmp_path / "d.parquet", index=False)
    eng = SparkEngine(str(tmp_path / "d.parquet"), Domain.from_sizes([2]), spark=spark)

    def slow(batches):
        import time as _t

        for b in batches:
            _t.sleep(120)
            yield b

    with quiet_pyspark():  # the test's own mapInArrow call
        job = eng._codes.mapInArrow(slow, eng._codes.schema)
    timer = threading.Timer(8.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            eng._run("sleeping", job.collect)
    finally:
        timer.cancel()
    # the cancelled job ends (cancellation is asynchronous: wait for it, at most two minutes)
    import time

    deadline = time.monotonic() + 120
    while list(spark.sparkContext.statusTracker().getActiveJobsIds()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert list(spark.sparkContext.statusTracker().getActiveJobsIds()) == []
    assert int(eng.count([(0,)])[(0,)][1]) == 2
    eng.close()


def test_cli_release_from_a_folder_charges_the_fingerprint(spark, adult, domain, tmp_path, capsys):
    """`release FOLDER --engine spark` (not a file, no glob) with a ledger: a second release of
    the same rows, re-split into other part files and named another dataset, is charged to the
    same data (the ledger reports the first spend before it)."""
    spec = json.loads((DATA / "adult-domain.json").read_text())
    (tmp_path / "dom.json").write_text(json.dumps({c: spec[c] for c in COLUMNS}))
    first = lake(adult, tmp_path / "lake1", 2)
    second = lake(adult, tmp_path / "lake2", 3, seed=4)
    common = ["--domain", str(tmp_path / "dom.json"), "--engine", "spark", "--data-format", "parquet",
              "--encoding", "codes", "-w", "all:<=1", "--rho", "0.5", "--ledger", str(tmp_path / "l.sqlite3"),
              "--no-report"]  # fmt: skip
    assert main(["release", str(first), *common, "--out", str(tmp_path / "r1"), "--dataset", "one"]) == 0
    capsys.readouterr()
    assert main(["release", str(second), *common, "--out", str(tmp_path / "r2"), "--dataset", "two"]) == 0
    captured = capsys.readouterr()
    said = captured.err + captured.out
    manifest = json.loads((tmp_path / "r2" / "manifest.json").read_text())
    assert manifest["notes"]["data"]["encoding"] == "codes"
    # spent before the second release: the first one's rho, found by the data's fingerprint
    assert "dataset 'two' has spent rho = 0.5" in said, said
