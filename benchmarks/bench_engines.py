"""Counting engines side by side: numpy vs DuckDB vs Apache Spark (local[2]) on one machine.

Task: every <= 2-way marginal (the total, 20 one-way and 190 two-way tables) of N generated
records x 20 attributes of 10 values, read from one Parquet file (written once into a temporary
or given folder, reused across runs). Only the 190 maximal pairs are counted from data; the
rest are sums (``marginals_from_maximal``). Each engine runs in a fresh subprocess, from the file
to the dense tables (validation included), and all engines must return identical tables (a
SHA-256 of the tables is compared). Printed: seconds, rows/s, ratio to numpy in the same run,
peak resident memory of the Python driver (VmHWM) and, for Spark, of its JVM (in local mode the
JVM is driver *and* executors, so that number is not driver-only).

    PYTHONPATH=src python benchmarks/bench_engines.py --quick        # 1 M rows only
    PYTHONPATH=src python benchmarks/bench_engines.py                # 1 M, 10 M, 50 M
    PYTHONPATH=src python benchmarks/bench_engines.py --rows 10000000 --data-dir /big/tmp

Projection to a cluster (printed after the table, computed from this run's Spark points; a
model, not a measurement). The Spark engine's work per batch of 16 pairs is one job: scan the
cached code columns, expand every row into 16 (grouping set, cell key) pairs, aggregate per
partition, shuffle at most (partitions x 16 x 100) partial counts, and send <= 1,600
``(set, cell, count)`` rows to the driver. Nothing in our part grows with N on the driver: no
per-row Python, no collect of records, the driver holds only the dense tables it must return.
So the time is T(N) ~ a + b N / cores with ``a`` the per-job scheduling (about 12 jobs here, plus
the validation pass) and ``b`` the per-row cost per core, both fitted to the local[2] points.
With k executors of c cores each: T ~ a + b N / (k c) (plus remote-storage reads and a shuffle of
a few KB per job); once b N / (k c) drops below ``a`` more executors no longer help, which the
printout shows as the break-even number of cores.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ATTRS, SIZE, SEED = 20, 10, 0
ENGINES = ("numpy", "duckdb", "spark")


def peak_rss_mb(pid: int | str = "self") -> float:
    """Peak resident set size (VmHWM) of a process, MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def write_parquet(path: Path, rows: int, chunk: int = 5_000_000) -> None:
    """Uniform random codes in row groups of ``chunk`` rows (never all in memory at once)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(SEED)
    names = [f"a{i}" for i in range(ATTRS)]
    tmp = path.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, pa.schema([(n, pa.uint8()) for n in names])) as w:
        for lo in range(0, rows, chunk):
            block = rng.integers(0, SIZE, size=(min(chunk, rows - lo), ATTRS), dtype=np.uint8)
            w.write_table(pa.table({n: block[:, j] for j, n in enumerate(names)}), row_group_size=1 << 20)
    tmp.rename(path)


def point(engine: str, path: str, workers: int, spark_conf: dict[str, str]) -> dict:
    """One engine, in this (fresh) process: file -> every <= 2-way table."""
    from dpmatrix._domain import Domain
    from dpmatrix.engines._base import marginals_from_maximal

    domain = Domain.from_sizes([SIZE] * ATTRS)
    sets = [c for k in range(3) for c in itertools.combinations(range(ATTRS), k)]
    info: dict = {}
    if engine == "spark":
        from dpmatrix.engines._spark_engine import SparkEngine, spark_session

        t0 = time.perf_counter()
        spark, _ = spark_session(f"local[{workers}]", spark_conf)
        info["startup_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if engine == "numpy":
        import pyarrow.parquet as pq

        from dpmatrix.engines._numpy_engine import NumpyEngine

        eng = NumpyEngine(pq.read_table(path).to_pandas(), domain)
    elif engine == "duckdb":
        from dpmatrix.engines._duckdb_engine import DuckDBEngine

        eng = DuckDBEngine(path, domain, threads=workers)
    else:
        eng = SparkEngine(path, domain, spark=spark)
    tables = marginals_from_maximal(eng, sets)
    info["seconds"] = time.perf_counter() - t0
    info["n"] = eng.n_records
    digest = hashlib.sha256()
    for s in sorted(tables):
        digest.update(np.ascontiguousarray(tables[s], dtype=np.int64).tobytes())
    info["sha"] = digest.hexdigest()[:16]
    info["py_rss_mb"] = peak_rss_mb()
    if engine == "spark":
        info["jvm_rss_mb"] = peak_rss_mb(spark._jvm.ProcessHandle.current().pid())
        eng.close()
        spark.stop()
    elif hasattr(eng, "close"):
        eng.close()
    return info


def run_point(engine: str, path: Path, workers: int, spark_conf: dict[str, str]) -> dict:
    cmd = [sys.executable, __file__, "--_point", engine, str(path), "--workers", str(workers)]
    for k, v in spark_conf.items():
        cmd += ["--spark-conf", f"{k}={v}"]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise SystemExit(f"{engine} on {path} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares T = a + b N (a >= 0)."""
    n = np.array([p[0] for p in points], dtype=float)
    t = np.array([p[1] for p in points], dtype=float)
    if len(points) == 1:
        return 0.0, float(t[0] / n[0])
    b, a = np.polyfit(n, t, 1)
    return max(float(a), 0.0), float(b)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 M rows only")
    ap.add_argument("--rows", type=int, nargs="*", default=[1_000_000, 10_000_000, 50_000_000])
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--workers", type=int, default=2, help="Spark local[W] and DuckDB threads")
    ap.add_argument("--spark-conf", action="append", default=[], metavar="K=V")
    ap.add_argument("--data-dir", help="folder for the Parquet files (kept; default: a temp dir)")
    ap.add_argument("--_point", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    conf = dict(item.split("=", 1) for item in args.spark_conf)
    conf.setdefault("spark.driver.memory", "2g")
    conf.setdefault("spark.sql.shuffle.partitions", str(4 * args.workers))
    if args._point:
        print(json.dumps(point(args._point[0], args._point[1], args.workers, conf)))
        return
    rows = [1_000_000] if args.quick else args.rows
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    tmp = None if args.data_dir else tempfile.TemporaryDirectory(prefix="dpmatrix-bench-")
    folder = Path(args.data_dir or tmp.name)  # type: ignore[union-attr]
    folder.mkdir(parents=True, exist_ok=True)
    print(f"all <=2-way marginals (190 pairs counted) of N x {ATTRS} attributes of {SIZE} values, "
          f"Parquet; Spark local[{args.workers}], DuckDB threads={args.workers}, numpy 1 thread; "
          f"{os.cpu_count()} cores\n")  # fmt: skip
    head = f"{'rows':>11s} {'engine':<7s} {'seconds':>8s} {'rows/s':>11s} {'vs numpy':>8s} " \
           f"{'py RSS MB':>9s} {'JVM RSS MB':>10s}  tables"  # fmt: skip
    print(head)
    spark_pts: list[tuple[int, float]] = []
    startup = []
    for n in rows:
        path = folder / f"codes-{n}.parquet"
        if not path.exists():
            t0 = time.perf_counter()
            write_parquet(path, n)
            print(f"{'':>11s} (wrote {path.name}, {path.stat().st_size / 1e6:.0f} MB, "
                  f"{time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
        res = {e: run_point(e, path, args.workers, conf) for e in engines}
        shas = {r["sha"] for r in res.values()}
        base = res.get("numpy", next(iter(res.values())))["seconds"]
        for e, r in res.items():
            assert r["n"] == n, (e, r["n"], n)
            jvm = f"{r['jvm_rss_mb']:10.0f}" if "jvm_rss_mb" in r else f"{'':>10s}"
            print(f"{n:>11,d} {e:<7s} {r['seconds']:8.2f} {n / r['seconds']:11,.0f} "
                  f"{base / r['seconds']:7.2f}x {r['py_rss_mb']:9.0f} {jvm}  "
                  f"{'identical' if len(shas) == 1 else 'DIFFER ' + r['sha']}", flush=True)  # fmt: skip
            if e == "spark":
                spark_pts.append((n, r["seconds"]))
                startup.append(r["startup_s"])
        if len(shas) != 1:
            raise SystemExit("engines disagree")
    if spark_pts:
        a, b = fit(spark_pts)
        cores0 = args.workers
        print(f"\nSpark session start-up (not in the times above): {np.median(startup):.1f} s")
        print(f"Projection (model T = a + b*N*{cores0}/cores fitted to the local[{cores0}] points: "
              f"a = {a:.1f} s fixed per run, b = {b * 1e9:.1f} s per 10^9 rows at {cores0} cores):")  # fmt: skip
        for n in sorted({spark_pts[-1][0], 1_000_000_000}):
            cells = []
            for k, c in [(1, cores0), (4, 4), (16, 4), (64, 4)]:
                t = a + b * n * cores0 / (k * c)
                cells.append(f"{k} x {c} cores: {t:7.1f} s ({n / t:,.0f} rows/s)")
            print(f"  N = {n:,d}: " + "; ".join(cells))
        if len(spark_pts) < 2:
            print("  (one N only: the fixed per-run cost a cannot be separated from b; run more sizes)")
        elif b > 0 and a > 0:
            print(f"  more cores stop paying off near b*N*{cores0}/cores = a, i.e. "
                  f"cores ~ {b * 1e9 * cores0 / max(a, 1e-9):,.0f} per 10^9 rows")
        print("  Our part does not serialize: the driver only plans ~13 jobs and receives "
              "<= 1,600 counts per job; records never leave the executors.")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
