"""DuckDB counting engine, stage by stage: N rows x 30 attributes of 10 values, all <=3-way.

Issue 18 item 3. The maximal sets of "all <=3-way marginals" of 30 attributes are the
C(30, 3) = 4,060 triples; they are counted from data (everything else is a sum of them). The data
(uniform random codes) are generated once, written as Parquet and CSV to a temporary folder
(deleted at the end), and counted

* by the DuckDB engine from each file, through ``dpmatrix._measure.counting.count_batches`` (the
  batches the release path uses, which follow the engine's ``preferred_batch``), once with the
  default ``strategy="auto"`` (the code columns streamed into numpy chunks: every triple in one
  call, one scan) and once with ``strategy="grouping_sets"`` (16 triples per ``GROUPING SETS``
  query: the SQL and batches of the default before issue 18's streaming, commit a5b4d51);
* by the numpy engine on the in-memory frame (single thread), through the same function (its
  batches are 512 triples), in the same run, so the ratios are side by side.

Counting is timed in wall-clock and process CPU seconds (all threads: DuckDB's and numpy's), and
its memory as the peak resident set *added* while counting (the kernel's high-water mark is reset
through ``/proc/self/clear_refs`` before each engine's counting; Linux only).

Every SQL statement DuckDB runs is logged (the engine's connection is wrapped, nothing of the
library is changed), so the report splits the engine's set-up into its statements (file read,
validation, encoding into the code table) and counts how many statements read the *file*: a
statement reads the file iff DuckDB's physical plan (``EXPLAIN``) has a ``READ_PARQUET`` /
``READ_CSV`` operator. ``materialize=False`` (no code table: the file is read per engine call) is
timed on a few ``GROUPING SETS`` batches and, streamed, on every triple (one call, one file read).
All engines must return identical tables. Last, calls of a few sets (and one 256^3 table) are timed
strategy by strategy on one code table, best of 3, to show where ``strategy="auto"`` switches.

    PYTHONPATH=src python benchmarks/bench_duckdb_counting.py --quick      # 1,000,000 rows
    PYTHONPATH=src python benchmarks/bench_duckdb_counting.py              # 10,000,000 rows
    PYTHONPATH=src python benchmarks/bench_duckdb_counting.py --batches 40 # first 40 x 16 triples
    PYTHONPATH=src python benchmarks/bench_duckdb_counting.py --no-before  # auto only
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from dpmatrix._domain import Domain
from dpmatrix._measure.counting import count_batches
from dpmatrix.engines import _duckdb_engine as duckdb_engine
from dpmatrix.engines._duckdb_engine import DuckDBEngine
from dpmatrix.engines._numpy_engine import NumpyEngine

ATTRS, SIZE, WAY, SEED = 30, 10, 3, 0
FILE_OPS = ("READ_PARQUET", "READ_CSV", "PARQUET_SCAN", "READ_CSV_AUTO")


class LoggedConnection:
    """A DuckDB connection that records (sql, seconds of ``execute``) for every statement."""

    def __init__(self, con):
        self._con = con
        self.log: list[tuple[str, float, bool]] = []  # (sql, seconds, reads the file)
        self._batch_reads: bool | None = None
        self.explain_batch_s = 0.0  # EXPLAINs of ours inside the engine calls (not the engine's)

    def execute(self, sql: str, *args):
        # the plan is taken before the statement runs (its inputs still exist) and not timed;
        # every counting batch has the same plan shape, so only the first is explained
        if classify(sql) == "count batch":
            if self._batch_reads is None:
                t0 = time.perf_counter()
                self._batch_reads = reads_file(self._con, sql)
                self.explain_batch_s = time.perf_counter() - t0
            reads = self._batch_reads
        else:
            reads = reads_file(self._con, sql)
        t0 = time.perf_counter()
        res = self._con.execute(sql, *args)
        self.log.append((sql, time.perf_counter() - t0, reads))
        return res

    def sql(self, sql: str, *args):
        # the streamed path builds a relation and reads it as Arrow batches: the statement runs
        # while the engine call (timed by count_all) reads it, so only its plan is logged here
        t0 = time.perf_counter()
        reads = reads_file(self._con, sql)
        self.explain_batch_s += time.perf_counter() - t0
        self.log.append((sql, 0.0, reads))
        return self._con.sql(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self._con, name)


def reads_file(con, sql: str) -> bool:
    """True iff DuckDB's physical plan of ``sql`` scans a Parquet / CSV file."""
    if sql.lstrip().startswith("CREATE TEMP VIEW"):
        return False  # defining a view reads nothing; the statements using it are counted
    body = re.sub(r"^\s*CREATE TEMP TABLE \w+ AS ", "", sql)
    if not body.lstrip().upper().startswith(("SELECT", "DESCRIBE")):
        return False
    if body.lstrip().upper().startswith("DESCRIBE"):
        return False  # schema only (Parquet footer / CSV sniff sample), no scan of the rows
    plan = "\n".join(str(r[1]) for r in con.execute(f"EXPLAIN {body}").fetchall())
    return any(op in plan.upper() for op in FILE_OPS)


def write_files(folder: Path, rows: int, chunk: int = 1_000_000) -> tuple[Path, Path, float]:
    """Parquet and CSV of uniform random codes, written in chunks; returns paths and seconds."""
    t0 = time.perf_counter()
    names = [f"a{i}" for i in range(ATTRS)]
    schema = pa.schema([(n, pa.uint8()) for n in names])
    parquet, csv = folder / "data.parquet", folder / "data.csv"
    rng = np.random.default_rng(SEED)
    with pq.ParquetWriter(parquet, schema) as pw, pacsv.CSVWriter(csv, schema) as cw:
        for lo in range(0, rows, chunk):
            block = rng.integers(0, SIZE, size=(min(chunk, rows - lo), ATTRS), dtype=np.uint8)
            t = pa.table({n: block[:, j] for j, n in enumerate(names)}, schema=schema)
            pw.write_table(t, row_group_size=1 << 20)
            cw.write_table(t)
    return parquet, csv, time.perf_counter() - t0


def _status_kb(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def count_all(eng, domain: Domain, top: list) -> tuple[dict, list[float], dict]:
    """Tables of the maximal sets, the seconds of each engine call (batch), and the counting's
    CPU seconds (process, all threads) and peak added resident memory (MB)."""
    tables: dict = {}
    times: list[float] = []
    try:  # reset the peak-RSS high-water mark (Linux >= 4.0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        rss0 = _status_kb("VmRSS")
    except OSError:
        rss0 = None
    cpu0 = time.process_time()
    it = count_batches(domain, top, eng)
    while True:
        t0 = time.perf_counter()
        try:
            _, got = next(it)
        except StopIteration:
            break
        times.append(time.perf_counter() - t0)
        tables.update(got)
    cpu = time.process_time() - cpu0
    peak = (_status_kb("VmHWM") - rss0) / 1e3 if rss0 is not None else float("nan")
    return tables, times, {"cpu": cpu, "peak_mb": peak}


def classify(sql: str) -> str:
    s = sql.lstrip()
    if s.startswith("DESCRIBE"):
        return "describe (schema)"
    if s.startswith("CREATE TEMP TABLE raw"):
        return "read file -> raw table"
    if s.startswith("CREATE TEMP TABLE codes"):
        return "encode -> code table"
    if s.startswith("CREATE TEMP VIEW"):
        return "create view over file"
    if "GROUPING SETS" in s or "GROUP BY" in s:
        return "count batch"
    if re.match(r"SELECT c\d+(, c\d+)* FROM codes$", s):
        return "stream code columns"
    if s.startswith("DROP"):
        return "drop raw table"
    if "count(*) FILTER" in s:
        return "validate"
    return "other"


def duckdb_point(path: Path, domain: Domain, top: list, threads: int, materialize: bool,
                 strategy: str = "auto"):  # fmt: skip
    """Engine set-up + counting, with each statement logged: (tables, report dict)."""
    logged: list[LoggedConnection] = []
    real_connect = duckdb_engine.connect

    def connect(*a, **k):
        c = LoggedConnection(real_connect(*a, **k))
        logged.append(c)
        return c

    duckdb_engine.connect = connect
    try:
        t0 = time.perf_counter()
        eng = DuckDBEngine(path, domain, materialize=materialize, threads=threads, strategy=strategy)
        t_init = time.perf_counter() - t0
        tables, times, use = count_all(eng, domain, top)
        t_total = time.perf_counter() - t0
        if times:  # the first batch's EXPLAIN is ours, not the engine's
            times[0] -= logged[0].explain_batch_s
            t_total -= logged[0].explain_batch_s
        log = list(logged[0].log)
        stages: dict[str, list[float]] = {}
        for sql, dt, _ in log:
            stages.setdefault(classify(sql), []).append(dt)
        file_scans = sum(reads for _, _, reads in log)
        eng.close()
    finally:
        duckdb_engine.connect = real_connect
    return tables, {"init": t_init, "batches": times, "total": t_total, "stages": stages,
                    "file_scans": file_scans, "statements": len(log), **use}  # fmt: skip


def summary(times: list[float]) -> str:
    if not times:
        return ""
    return (f"{len(times)} calls: sum {sum(times):.2f} s, median {statistics.median(times):.3f} s, "
            f"min {min(times):.3f}, max {max(times):.3f}")  # fmt: skip


def best_of(fn, reps: int = 3) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def few_sets(parquet: Path, domain: Domain, rows: int, threads: int, folder: Path) -> None:
    """Calls of a few sets (where ``strategy="auto"`` keeps SQL) and one huge table (where it
    streams even a single set): each strategy on the same code table, best of 3, beside numpy."""
    ne = NumpyEngine(pq.read_table(parquet).to_pandas(), domain)
    eng = DuckDBEngine(parquet, domain, threads=threads)
    triples = list(itertools.combinations(range(ATTRS), 3))
    pairs = list(itertools.combinations(range(ATTRS), 2))
    cases = [("1 triple", triples[:1]), ("4 triples", triples[:4]), ("16 triples", triples[:16]),
             ("16 pairs", pairs[:16]), (f"{ATTRS} one-way", [(i,) for i in range(ATTRS)]),
             ("406 triples with a0", [t for t in triples if t[0] == 0])]  # fmt: skip
    print("| call | sets | columns | auto picks | numpy ms | stream ms | grouping_sets ms "
          "| grouping_sets / stream |")  # fmt: skip
    print("|---|---:|---:|---|---:|---:|---:|---:|")

    def row(label, e, n, sets):
        pick = e.strategy_for(sets)
        t_np = best_of(lambda: n.count(sets))
        times = {}
        for st in ("stream", "grouping_sets"):
            e.strategy = st  # the same code table, one strategy at a time
            times[st] = best_of(lambda: e.count(sets))
        e.strategy = "auto"
        cols = len({a for s in sets for a in s})
        print(f"| {label} | {len(sets)} | {cols} | {pick} | {t_np * 1e3:.0f} | {times['stream'] * 1e3:.0f} | "
              f"{times['grouping_sets'] * 1e3:.0f} | {times['grouping_sets'] / times['stream']:.2f}x |",
              flush=True)  # fmt: skip

    for label, sets in cases:
        row(label, eng, ne, sets)
    eng.close()
    del ne
    # one table of 256^3 = 16.8 M cells (more than 2^16: auto streams it)
    big = Domain.from_sizes([256] * 3)
    rng = np.random.default_rng(SEED)
    codes = rng.integers(0, 256, size=(rows, 3), dtype=np.uint8)
    path = folder / "big.parquet"
    pq.write_table(pa.table({n: codes[:, j] for j, n in enumerate(big.names)}), path)
    with DuckDBEngine(path, big, threads=threads) as be:
        row("one 256^3 table", be, NumpyEngine(codes, big), [(0, 1, 2)])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1,000,000 rows")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--threads", type=int, default=2, help="DuckDB threads (numpy: 1)")
    ap.add_argument("--batches", type=int, default=None,
                    help="count only the first B DuckDB batches (B x 16 triples), same for numpy")  # fmt: skip
    ap.add_argument("--rescan-batches", type=int, default=4,
                    help="batches timed with materialize=False (file re-read per batch); 0: skip")  # fmt: skip
    ap.add_argument("--no-csv", action="store_true")
    ap.add_argument("--no-few-sets", action="store_true",
                    help="skip the calls of a few sets / one huge table (strategy by strategy)")  # fmt: skip
    ap.add_argument("--no-before", action="store_true",
                    help="skip strategy='grouping_sets' (the counting of a5b4d51) on the code table")  # fmt: skip
    args = ap.parse_args(argv)
    rows = 1_000_000 if args.quick else args.rows
    domain = Domain.from_sizes([SIZE] * ATTRS)
    top = list(itertools.combinations(range(ATTRS), WAY))
    if args.batches is not None:
        top = top[: 16 * args.batches]
    print(f"{rows:,} rows x {ATTRS} attributes of {SIZE} values; all <={WAY}-way marginals: "
          f"{len(top):,} maximal triples counted from data"
          f"{' (of 4,060: --batches ' + str(args.batches) + ')' if args.batches else ''}; "
          f"DuckDB {duckdb.__version__} threads={args.threads}, numpy 1 thread; "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}\n")  # fmt: skip

    with tempfile.TemporaryDirectory(prefix="dpmatrix-countbench-") as tmp:
        parquet, csv, t_write = write_files(Path(tmp), rows)
        print(f"wrote Parquet {parquet.stat().st_size / 1e6:,.0f} MB + CSV "
              f"{csv.stat().st_size / 1e6:,.0f} MB in {t_write:.1f} s\n", flush=True)  # fmt: skip

        # numpy: file -> frame (not counted in its counting time), frame -> tables
        t0 = time.perf_counter()
        df = pq.read_table(parquet).to_pandas()
        t_read = time.perf_counter() - t0
        t0 = time.perf_counter()
        ne = NumpyEngine(df, domain)
        t_val = time.perf_counter() - t0
        ref, np_times, np_use = count_all(ne, domain, top)
        t_np = t_val + sum(np_times)
        del ne, df
        print(f"numpy (in memory): Parquet -> pandas {t_read:.2f} s (outside); validate + compact "
              f"codes {t_val:.2f} s; count {summary(np_times)}, CPU {np_use['cpu']:.2f} s, peak "
              f"{np_use['peak_mb']:+.0f} MB; total {t_np:.2f} s\n", flush=True)  # fmt: skip

        # (label, set-up, counting wall, counting CPU, peak MB, total, file scans, calls, same)
        rowsout = [("numpy (frame in memory)", t_val, sum(np_times), np_use["cpu"], np_use["peak_mb"],
                    t_np, 0, len(np_times), True)]  # fmt: skip
        counting: dict[tuple[str, str], float] = {}
        batch_times: dict[tuple[str, str], list[float]] = {}
        configs = [("Parquet", parquet)] + ([] if args.no_csv else [("CSV", csv)])
        strategies = ["auto"] + ([] if args.no_before else ["grouping_sets"])
        for name, path in configs:
            for strategy in strategies:
                got, rep = duckdb_point(path, domain, top, args.threads, materialize=True, strategy=strategy)
                same = set(got) == set(ref) and all(np.array_equal(ref[s], got[s]) for s in ref)
                print(f"DuckDB {name} (materialize=True, strategy={strategy!r}): {rep['statements']} SQL "
                      f"statements, {rep['file_scans']} read the file; identical to numpy: {same}")  # fmt: skip
                for kind, ts in rep["stages"].items():
                    print(f"  {kind:<24s} {summary(ts)}")
                print(f"  engine calls (batches)   {summary(rep['batches'])}")
                print(f"  total {rep['total']:.2f} s = set-up {rep['init']:.2f} s + counting "
                      f"{sum(rep['batches']):.2f} s (CPU {rep['cpu']:.2f} s, peak {rep['peak_mb']:+.0f} MB)\n",
                      flush=True)  # fmt: skip
                assert same, f"DuckDB on {name} ({strategy}) differs from numpy"
                batch_times[name, strategy] = rep["batches"]
                counting[name, strategy] = sum(rep["batches"])
                rowsout.append((f"DuckDB {name} {strategy}", rep["init"], sum(rep["batches"]), rep["cpu"],
                                rep["peak_mb"], rep["total"], rep["file_scans"], len(rep["batches"]), same))  # fmt: skip

        if args.rescan_batches:
            # without a code table: GROUPING SETS re-reads the file per batch of 16 ...
            sub = top[: 16 * args.rescan_batches]
            got, rep = duckdb_point(parquet, domain, sub, args.threads, materialize=False,
                                    strategy="grouping_sets")  # fmt: skip
            same = all(np.array_equal(ref[s], got[s]) for s in sub)
            per = statistics.median(rep["batches"])
            print(f"DuckDB Parquet (materialize=False, grouping_sets, first {len(rep['batches'])} batches): "
                  f"{rep['file_scans']} of {rep['statements']} statements read the file; "
                  f"set-up {rep['init']:.2f} s, batch median {per:.3f} s; identical: {same}",
                  flush=True)  # fmt: skip
            assert same
            # like for like: the same first batches, read from the code table
            gs = batch_times.get(("Parquet", "grouping_sets"))
            rescan = (per, statistics.median(gs[: len(rep["batches"])])) if gs else None
            # ... streaming reads it once per engine call, here one call for every triple
            got, rep = duckdb_point(parquet, domain, top, args.threads, materialize=False, strategy="auto")
            same = set(got) == set(ref) and all(np.array_equal(ref[s], got[s]) for s in ref)
            print(f"DuckDB Parquet (materialize=False, auto, all {len(top):,} triples): "
                  f"{rep['file_scans']} of {rep['statements']} statements read the file; "
                  f"set-up {rep['init']:.2f} s, counting {summary(rep['batches'])} (CPU {rep['cpu']:.2f} s, "
                  f"peak {rep['peak_mb']:+.0f} MB); identical: {same}\n", flush=True)  # fmt: skip
            assert same
            rowsout.append(("DuckDB Parquet auto, no code table", rep["init"], sum(rep["batches"]), rep["cpu"],
                            rep["peak_mb"], rep["total"], rep["file_scans"], len(rep["batches"]), same))  # fmt: skip
        t_np_count = sum(np_times)
        print("| engine | set-up s | counting s | counting CPU s | peak MB (counting) | total s | calls "
              "| file scans | rows/s (counting) | numpy / this (counting) | identical |")  # fmt: skip
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for label, init, cnt, cpu, peak, tot, scans, nb, same in rowsout:
            print(f"| {label} | {init:.2f} | {cnt:.2f} | {cpu:.2f} | {peak:+.0f} | {tot:.2f} | {nb} | {scans} | "
                  f"{rows / cnt:,.0f} | {t_np_count / cnt:.2f}x | {'yes' if same else 'NO'} |")  # fmt: skip
        for name, _ in configs:
            if (name, "grouping_sets") in counting:
                a, b = counting[name, "grouping_sets"], counting[name, "auto"]
                print(f"\n{name}: counting grouping_sets (a5b4d51's default) / auto = {a:.2f} s / {b:.2f} s "
                      f"= {a / b:.2f}x; auto / numpy = {b / t_np_count:.2f}x")  # fmt: skip
        if args.rescan_batches and rescan:
            print(f"\nre-reading the Parquet file per GROUPING SETS batch (materialize=False): median "
                  f"{rescan[0]:.3f} s per batch vs {rescan[1]:.3f} s for the same batches on the code table "
                  f"({rescan[0] / rescan[1]:.2f}x)")  # fmt: skip
        if not args.no_few_sets:
            print("\ncalls of a few sets, and one huge table, on the code table of the Parquet file:")
            few_sets(parquet, domain, rows, args.threads, Path(tmp))

if __name__ == "__main__":
    main()
