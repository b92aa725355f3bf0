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


def tree_cpu(pids: list[int], python_only: bool = False) -> float:
    """CPU seconds (user + system, including reaped children) of the processes ``pids`` and all
    their descendants, from /proc: the executors' JVMs and their Python workers (only the
    Python workers, ``pyspark.daemon``, with ``python_only``)."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    times: dict[int, float] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            f = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(d.name)] = int(f[1])
        times[int(d.name)] = sum(int(x) for x in f[11:15]) / tick  # utime stime cutime cstime
    todo, seen = list(pids), set()
    while todo:
        p = todo.pop()
        if p in seen or p not in times:
            continue
        seen.add(p)
        todo.extend(c for c, q in parent.items() if q == p)
    if python_only:
        seen = {p for p in seen if _is_python_worker(p)}
    return sum(times[p] for p in seen)


def _is_python_worker(pid: int) -> bool:
    try:
        return b"pyspark.daemon" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def run_duckdb(glob: str, domain, sets) -> dict:
    from dpmatrix.engines._duckdb_engine import DuckDBEngine

    c0, t0 = time.process_time(), time.perf_counter()
    eng = DuckDBEngine(glob, domain)
    c1, t1 = time.process_time(), time.perf_counter()
    got = eng.count(sets)
    c2, t2 = time.process_time(), time.perf_counter()
    eng.close()
    return {"build_s": t1 - t0, "count_s": t2 - t1, "build_cpu_s": c1 - c0, "count_cpu_s": c2 - c1,
            "digest": digest(got), "scans": 1}  # fmt: skip


def run_spark(spark, glob: str, domain, sets, workers: list[int]) -> dict:
    """One build + count on an open session; CPU = this driver process + the worker daemons'
    process trees (executor JVMs, Python workers)."""
    from dpmatrix.engines._spark_engine import SparkEngine

    def cpu() -> tuple[float, float]:
        return time.process_time(), tree_cpu(workers)

    (d0, e0), t0 = cpu(), time.perf_counter()
    eng = SparkEngine(glob, domain, spark=spark)
    build_jobs = eng.jobs
    (d1, e1), t1 = cpu(), time.perf_counter()
    p1 = tree_cpu(workers, python_only=True)
    got = eng.count(sets)
    (d2, e2), t2 = cpu(), time.perf_counter()
    p2 = tree_cpu(workers, python_only=True)
    count_jobs = eng.jobs - build_jobs
    executors = len(spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) - 1
    eng.close()
    return {
        "build_s": t1 - t0, "count_s": t2 - t1, "digest": digest(got),
        "build_cpu_s": (d1 - d0) + (e1 - e0), "count_cpu_s": (d2 - d1) + (e2 - e1),
        "count_driver_cpu_s": d2 - d1, "count_executor_cpu_s": e2 - e1, "count_python_cpu_s": p2 - p1,
        "build_jobs": build_jobs, "count_jobs": count_jobs, "executors": executors,
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
    ap.add_argument("--reps", type=int, default=1, help="repetitions, DuckDB and Spark alternating")
    ap.add_argument("--conf", action="append", default=[], metavar="K=V", help="extra Spark setting")
    args = ap.parse_args()

    from dpmatrix._domain import Domain
    from spark_cluster import StandaloneCluster

    domain = Domain.from_sizes([SIZE] * ATTRS)
    sets = list(itertools.combinations(range(ATTRS), args.way))
    with tempfile.TemporaryDirectory(prefix="dpm-bench-spark-") as tmp:
        lake = (args.data_dir or Path(tmp)) / f"lake-{args.rows}-{args.parts}"
        if not lake.exists():
            write_lake(lake, args.rows, args.parts)
        glob = str(lake / "*.parquet")
        mem = args.memory
        conf = {
            "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false", "spark.executor.memory": mem,
            "spark.cores.max": str(args.workers * args.cores),
            "spark.default.parallelism": str(args.workers * args.cores),
            "spark.sql.shuffle.partitions": str(args.workers * args.cores),
            "spark.pyspark.python": sys.executable, "spark.driver.memory": "1g",
        }  # fmt: skip
        conf.update(kv.split("=", 1) for kv in args.conf)
        from dpmatrix.engines._spark_engine import spark_session

        reps = []
        with StandaloneCluster(Path(tmp) / "cluster", args.workers, args.cores, mem) as cluster:
            workers = [cluster.pid("org.apache.spark.deploy.worker.Worker", i + 1) for i in range(args.workers)]
            t0 = time.perf_counter()
            session, _ = spark_session(cluster.url, conf)
            session_s = time.perf_counter() - t0
            try:
                for r in range(args.reps):
                    load0 = os.getloadavg()[0]
                    order = ("duckdb", "spark") if r % 2 == 0 else ("spark", "duckdb")
                    got = {}
                    for which in order:
                        got[which] = (run_duckdb(glob, domain, sets) if which == "duckdb"
                                      else run_spark(session, glob, domain, sets, workers))  # fmt: skip
                    assert got["spark"]["digest"] == got["duckdb"]["digest"], "Spark and DuckDB tables differ"
                    got.update(order=list(order), load_start=load0, load_end=os.getloadavg()[0],
                               count_ratio=got["spark"]["count_s"] / got["duckdb"]["count_s"])
                    reps.append(got)
                    print(f"rep {r + 1}: {order[0]} first, load {load0:.1f}->{got['load_end']:.1f}; "
                          f"count DuckDB {got['duckdb']['count_s']:.1f} s (CPU {got['duckdb']['count_cpu_s']:.1f}), "
                          f"Spark {got['spark']['count_s']:.1f} s (CPU {got['spark']['count_cpu_s']:.1f}: driver "
                          f"{got['spark']['count_driver_cpu_s']:.1f} + executors {got['spark']['count_executor_cpu_s']:.1f}, of which "
                          f"Python workers {got['spark']['count_python_cpu_s']:.1f}); "
                          f"ratio {got['count_ratio']:.2f}x", flush=True)  # fmt: skip
            finally:
                session.stop()

    def best(which: str, key: str) -> float:
        return min(r[which][key] for r in reps)

    duck = {k: best("duckdb", k) for k in ("build_s", "count_s", "build_cpu_s", "count_cpu_s")}
    spark = {k: best("spark", k) for k in ("build_s", "count_s", "build_cpu_s", "count_cpu_s",
                                           "count_driver_cpu_s", "count_executor_cpu_s")}  # fmt: skip
    spark.update(session_s=session_s, build_jobs=reps[0]["spark"]["build_jobs"],
                 count_jobs=reps[0]["spark"]["count_jobs"], executors=reps[0]["spark"]["executors"])
    ratios = sorted(r["count_ratio"] for r in reps)
    res = {
        "rows": args.rows, "attrs": ATTRS, "size": SIZE, "way": args.way, "sets": len(sets),
        "parts": args.parts, "workers": args.workers, "cores": args.cores, "conf": args.conf,
        "load1": float(np.mean([r["load_start"] for r in reps] + [r["load_end"] for r in reps])),
        "duckdb": duck, "spark": spark, "reps": reps,
        "count_ratio": spark["count_s"] / duck["count_s"],
        "count_ratio_median": float(np.median(ratios)),
        "count_cpu_ratio": spark["count_cpu_s"] / duck["count_cpu_s"],
        "total_ratio": (spark["build_s"] + spark["count_s"]) / (duck["build_s"] + duck["count_s"]),
    }  # fmt: skip
    print(f"{args.rows:,} rows x {ATTRS} x {SIZE}, all <= {args.way}-way ({len(sets):,} maximal sets), "
          f"{args.parts} part files; Spark standalone: {args.workers} worker(s) x {args.cores} core(s), "
          f"{spark['executors']} executor(s); {len(reps)} repetition(s), DuckDB and Spark alternating")  # fmt: skip
    print("tables identical (SHA-256): yes, every repetition")
    print(f"Spark / DuckDB, counting (best of each):  {res['count_ratio']:.2f}x  "
          f"(median of side-by-side ratios {res['count_ratio_median']:.2f}x)")  # fmt: skip
    print(f"Spark / DuckDB, counting CPU seconds:      {res['count_cpu_ratio']:.2f}x")
    print(f"Spark / DuckDB, build + count:             {res['total_ratio']:.2f}x")
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
