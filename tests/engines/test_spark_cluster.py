"""A real Spark standalone cluster: one master and two workers on 127.0.0.1, started from the
scripts PySpark ships (``tests/spark_cluster.py``), each Spark driver in its own process.

What is checked (data: the UCI Adult codes shipped in ``dpmatrix/data``, cut into Parquet part
files):

* ``dpmatrix release --engine spark --spark-master spark://127.0.0.1:PORT`` on a folder of part
  files writes the same release as ``--engine duckdb`` with the same testing seed (the noise is
  a function of the seed and the counts, so equal releases mean equal counts), and Spark's own
  event log shows every task ran on a cluster executor (executor ids, never ``"driver"``);
* a worker killed with ``kill -9`` while the counting job runs: Spark loses that executor
  (``SparkListenerExecutorRemoved`` in the event log), re-runs its tasks on the other worker, and
  the counts equal a pandas brute force;
* a master with no worker: the job is cancelled after ``executor_timeout`` with a one-line
  DataError, and the wait is reported on stderr first.

The daemons are stopped by the fixture's finalizer, which then checks no process is left.
Starting a cluster and a driver JVM takes about a minute on this machine: every test is slow.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpmatrix._domain import Domain

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from spark_cluster import (
    StandaloneCluster,
    _alive,
    driver_conf,
    event_log,
    task_executors,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "src" / "dpmatrix" / "data"
COLUMNS = ["age", "workclass", "education-num", "marital-status", "race", "sex", "income>50K"]


def run(cmd: list[str], timeout: float = 900, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False, **kw)


def adult_lake(folder: Path, parts: int = 3, copies: int = 1) -> pd.DataFrame:
    """The Adult codes of COLUMNS in ``parts`` Parquet part files (``copies`` of every row)."""
    df = pd.read_csv(DATA / "adult.csv")[COLUMNS]
    df = pd.concat([df] * copies, ignore_index=True)
    folder.mkdir(parents=True)
    for k, part in enumerate(np.array_split(np.arange(len(df)), parts)):
        df.iloc[part].to_parquet(folder / f"part-{k:05d}.parquet", index=False)
    return df


def adult_domain(path: Path) -> Path:
    spec = json.loads((DATA / "adult-domain.json").read_text())
    path.write_text(json.dumps({c: spec[c] for c in COLUMNS}))
    return path


def brute_force(df: pd.DataFrame, sizes: list[int], s: tuple[int, ...]) -> np.ndarray:
    out = np.zeros([sizes[i] for i in s], dtype=np.int64)
    for key, n in df.groupby([COLUMNS[i] for i in s]).size().items():
        out[tuple(int(k) for k in (key if isinstance(key, tuple) else (key,)))] = n
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cl = StandaloneCluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=1, memory="1g")
    try:
        cl.start()
    except BaseException:
        cl.stop()
        raise
    pids = [cl.pid(cls, i) for cls, i in cl.started]
    yield cl
    cl.stop()
    assert not [p for p in pids if p is not None and _alive(p)], "a Spark daemon survived stop()"


def test_release_on_cluster_equals_duckdb_and_runs_on_executors(cluster, tmp_path):
    adult_lake(tmp_path / "lake")
    dom = adult_domain(tmp_path / "domain.json")
    events = tmp_path / "events"
    common = ["--domain", str(dom), "-w", "all:<=2", "--rho", "1", "--seed", "7", "--encoding", "codes",
              "--no-ledger", "--no-report", "--quiet"]  # fmt: skip
    conf = [a for k, v in driver_conf(cluster, events).items() for a in ("--conf", f"{k}={v}")]
    spark = run([sys.executable, "-m", "dpmatrix", "release", str(tmp_path / "lake"), "--data-format", "parquet",
                 "--engine", "spark", "--spark-master", cluster.url, *conf, "--out", str(tmp_path / "s"), *common])  # fmt: skip
    assert spark.returncode == 0, spark.stderr[-3000:]
    duck = run([sys.executable, "-m", "dpmatrix", "release", str(tmp_path / "lake" / "*.parquet"),
                "--engine", "duckdb", "--out", str(tmp_path / "d"), *common])  # fmt: skip
    assert duck.returncode == 0, duck.stderr[-3000:]
    a = pd.read_parquet(tmp_path / "s" / "measurements.parquet")
    b = pd.read_parquet(tmp_path / "d" / "measurements.parquet")
    pd.testing.assert_frame_equal(a, b)
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["notes"]["data"]["encoding"] == "codes"
    ran_on = task_executors(event_log(events))
    assert ran_on and "driver" not in ran_on, ran_on  # tasks ran on cluster executors only
    assert "FutureWarning" not in spark.stderr and "Py4J" not in spark.stderr, spark.stderr[-2000:]


KILL_JOB = textwrap.dedent(
    """
    import itertools, json, sys, numpy as np
    from dpmatrix._domain import Domain
    from dpmatrix.engines._spark_engine import SparkEngine, spark_session
    url, lake, dom, out, conf = sys.argv[1:6]
    spark, _ = spark_session(url, json.loads(conf))
    eng = SparkEngine(lake + "/*.parquet", Domain.from_json(dom), spark=spark, encoding="codes")
    sets = list(itertools.combinations(range(len(eng.domain)), 3))
    print("COUNTING", flush=True)
    got = eng.count(sets)
    np.savez(out, **{"-".join(map(str, s)): t for s, t in got.items()})
    eng.close(); spark.stop()
    print("DONE", flush=True)
    """
)


def test_worker_killed_mid_count_is_recovered(cluster, tmp_path):
    df = adult_lake(tmp_path / "lake", parts=4, copies=4)
    dom = adult_domain(tmp_path / "domain.json")
    events = tmp_path / "events"
    script = tmp_path / "job.py"
    script.write_text(KILL_JOB)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.Popen(
        [sys.executable, str(script), cluster.url, str(tmp_path / "lake"), str(dom), str(tmp_path / "c.npz"),
         json.dumps(driver_conf(cluster, events))],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "COUNTING", proc.stderr.read()[-3000:]
        # wait until the counting job has tasks running on both executors, then kill worker 1
        import time

        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            started = [e for e in _events(events) if e.get("Event") == "SparkListenerTaskStart"]
            if len({e["Task Info"]["Executor ID"] for e in started}) >= 2 and _job_running(events, "counting"):
                break
            time.sleep(0.5)
        cluster.kill_worker(1)
        out, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and out.strip().endswith("DONE"), err[-3000:]
    log = event_log(events)
    removed = [e for e in log if e.get("Event") == "SparkListenerExecutorRemoved"]
    assert removed, "no executor was lost: the kill did not hit a running executor"
    counting_end = max(e["Completion Time"] for e in log if e.get("Event") == "SparkListenerJobEnd")
    assert min(e["Timestamp"] for e in removed) < counting_end, "the executor was lost after counting"
    sizes = list(Domain.from_json(dom).sizes)
    got = np.load(tmp_path / "c.npz")
    for s in itertools.combinations(range(len(COLUMNS)), 3):
        assert np.array_equal(got["-".join(map(str, s))], brute_force(df, sizes, s)), s


def _events(folder: Path) -> list[dict]:
    try:
        return event_log(folder)
    except (OSError, ValueError):  # the log is being written
        return []


def _job_running(folder: Path, what: str) -> bool:
    started, ended = set(), set()
    for e in _events(folder):
        if e.get("Event") == "SparkListenerJobStart":
            props = e.get("Properties") or {}
            if what in str(props.get("spark.job.description", "")):
                started.add(e["Job ID"])
        elif e.get("Event") == "SparkListenerJobEnd":
            ended.add(e["Job ID"])
    return bool(started - ended)


NO_EXECUTOR_JOB = textwrap.dedent(
    """
    import sys, json
    import pandas as pd
    from dpmatrix._domain import Domain
    from dpmatrix.engines._spark_engine import SparkEngine, spark_session
    from dpmatrix.errors import DataError
    url, path, conf = sys.argv[1:4]
    spark, _ = spark_session(url, json.loads(conf))
    try:
        SparkEngine(path, Domain.from_sizes([2]), spark=spark, executor_timeout=25)
    except DataError as exc:
        print("DataError:", exc)
    finally:
        spark.stop()
    """
)


def test_no_executor_is_reported_and_times_out(tmp_path):
    """A master without any worker: the wait is reported on stderr, then the job is cancelled
    with a one-line DataError after executor_timeout (25 s here)."""
    pd.DataFrame({"a0": [0, 1, 1]}).to_parquet(tmp_path / "d.parquet", index=False)
    script = tmp_path / "job.py"
    script.write_text(NO_EXECUTOR_JOB)
    with StandaloneCluster(tmp_path / "cluster", workers=0) as master_only:
        res = run([sys.executable, str(script), master_only.url, str(tmp_path / "d.parquet"),
                   json.dumps(driver_conf(master_only))])  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert "DataError: no Spark executor ran the job" in res.stdout and "within 25 s" in res.stdout, res.stdout
    assert "dpmatrix: no Spark executor is running" in res.stderr
