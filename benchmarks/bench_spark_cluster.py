"""Spark on a real standalone cluster vs DuckDB, same Parquet part files, all <= 3-way marginals.

Task: N rows x 30 attributes of 10 values (uniform random codes, seed 0) in ``--parts`` Parquet
part files (a folder, as a lake holds them); count every maximal set of the <= 3-way workload
(the C(30, 3) = 4,060 triples; the pairs, singles and total are sums of those). Engines:

* DuckDB (:class:`DuckDBEngine`, in this process) on the folder's glob;
* Spark (:class:`SparkEngine`, ``strategy="one_pass"``) against a standalone master and
  ``--workers`` worker(s) of ``--cores`` cores started on 127.0.0.1 from PySpark's own scripts
  (``tests/spark_cluster.py``), the executors being separate JVMs.

Both must return identical tables (SHA-256 of all tables compared). Printed: ratios Spark /
DuckDB for *counting* (``engine.count``) and for *build + count* (validation scan included),
and the number of Spark jobs (scans of the data) for validation and for counting; seconds are
printed only as a footnote because this 2-core machine is shared (compare ratios measured side
by side). Spark session start-up is excluded from both ratios and printed separately.

    PYTHONPATH=src python benchmarks/bench_spark_cluster.py --rows 1000000
    PYTHONPATH=src python benchmarks/bench_spark_cluster.py --rows 10000000   # idle machine
    PYTHONPATH=src python benchmarks/bench_spark_cluster.py --rows 1000000 --workers 2 --cores 1
    PYTHONPATH=src python benchmarks/bench_spark_cluster.py --json out.json   # for cost_model
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the cluster helper shared with the tests

ATTRS, SIZE, SEED = 30, 10, 0


def write_lake(folder: Path, rows: int, parts: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    bounds = np.linspace(0, rows, parts + 1).astype(int)
    for p in range(parts):
        n = int(bounds[p + 1] - bounds[p])
        cols = {f"a{i}": rng.integers(0, SIZE, n, dtype=np.int8) for i in range(ATTRS)}
        pq.write_table(pa.table(cols), folder / f"part-{p:05d}.parquet")


def digest(tables: dict) -> str:
    h = hashlib.sha256()
    for s in sorted(tables):
        h.update(repr(s).encode())
        h.update(np.ascontiguousarray(tables[s], dtype=np.int64).tobytes())
    return h.hexdigest()


def run_duckdb(glob: str, domain, sets) -> dict:
    from dpmatrix.engines.duckdb_engine import DuckDBEngine

    t0 = time.perf_counter()
    eng = DuckDBEngine(glob, domain)
    t1 = time.perf_counter()
    got = eng.count(sets)
    t2 = time.perf_counter()
    eng.close()
    return {"build_s": t1 - t0, "count_s": t2 - t1, "digest": digest(got), "scans": 1}


def run_spark(url: str, glob: str, domain, sets, conf: dict[str, str]) -> dict:
    from dpmatrix.engines.spark_engine import SparkEngine, spark_session

    t0 = time.perf_counter()
    spark, _ = spark_session(url, conf)
    t1 = time.perf_counter()
    try:
        eng = SparkEngine(glob, domain, spark=spark)
        build_jobs = eng.jobs
        t2 = time.perf_counter()
        got = eng.count(sets)
        t3 = time.perf_counter()
        count_jobs = eng.jobs - build_jobs
        sc = spark.sparkContext
        executors = [
            (e.host(), e.numRunningTasks())
            for e in sc._jsc.sc().statusTracker().getExecutorInfos()
        ]
        eng.close()
    finally:
        spark.stop()
    return {
        "session_s": t1 - t0, "build_s": t2 - t1, "count_s": t3 - t2, "digest": digest(got),
        "build_jobs": build_jobs, "count_jobs": count_jobs, "executors": len(executors) - 1,
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--way", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--cores", type=int, default=2, help="cores per worker")
    ap.add_argument("--memory", default="2g", help="memory per worker (executor gets it all)")
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="append the result as one JSON line")
    args = ap.parse_args()

    from dpmatrix.domain import Domain
    from spark_cluster import StandaloneCluster

    domain = Domain.from_sizes([SIZE] * ATTRS)
    sets = list(itertools.combinations(range(ATTRS), args.way))
    with tempfile.TemporaryDirectory(prefix="dpm-bench-spark-") as tmp:
        lake = (args.data_dir or Path(tmp)) / f"lake-{args.rows}-{args.parts}"
        if not lake.exists():
            write_lake(lake, args.rows, args.parts)
        glob = str(lake / "*.parquet")
        duck = run_duckdb(glob, domain, sets)
        mem = args.memory
        conf = {
            "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false", "spark.executor.memory": mem,
            "spark.cores.max": str(args.workers * args.cores),
            "spark.default.parallelism": str(args.workers * args.cores),
            "spark.sql.shuffle.partitions": str(args.workers * args.cores),
            "spark.pyspark.python": sys.executable, "spark.driver.memory": "1g",
        }  # fmt: skip
        with StandaloneCluster(Path(tmp) / "cluster", args.workers, args.cores, mem) as cluster:
            spark = run_spark(cluster.url, glob, domain, sets, conf)
    assert spark["digest"] == duck["digest"], "Spark and DuckDB tables differ"
    res = {
        "rows": args.rows, "attrs": ATTRS, "size": SIZE, "way": args.way, "sets": len(sets),
        "parts": args.parts, "workers": args.workers, "cores": args.cores,
        "load1": os.getloadavg()[0], "duckdb": duck, "spark": spark,
        "count_ratio": spark["count_s"] / duck["count_s"],
        "total_ratio": (spark["build_s"] + spark["count_s"]) / (duck["build_s"] + duck["count_s"]),
    }  # fmt: skip
    print(f"{args.rows:,} rows x {ATTRS} x {SIZE}, all <= {args.way}-way ({len(sets):,} maximal sets), "
          f"{args.parts} part files; Spark standalone: {args.workers} worker(s) x {args.cores} core(s), "
          f"{spark['executors']} executor(s)")  # fmt: skip
    print("tables identical (SHA-256): yes")
    print(f"Spark / DuckDB, counting:        {res['count_ratio']:.2f}x")
    print(f"Spark / DuckDB, build + count:   {res['total_ratio']:.2f}x")
    print(f"Spark jobs: schema + validation {spark['build_jobs']}, counting {spark['count_jobs']} "
          f"(scans of the data for {len(sets):,} sets); DuckDB: 1 validation + 1 counting scan")  # fmt: skip
    print(f"(seconds on a shared machine, load {res['load1']:.1f}: DuckDB build {duck['build_s']:.1f} + count "
          f"{duck['count_s']:.1f}; Spark session {spark['session_s']:.1f}, build {spark['build_s']:.1f} + "
          f"count {spark['count_s']:.1f})")  # fmt: skip
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
