"""Cost model of one-pass Spark counting, checked against bench_spark_cluster.py runs, and its
projection to 10^9 rows on 50 nodes (a projection, not a measurement).

Model (symbols: N rows, d attributes, M maximal attribute sets counted, C = sum of their cells,
P partitions = counting tasks, K cores in the cluster, B bytes per row on disk):

* **scans**: 2, whatever M (validation + fingerprint, then counting); passes beyond one only when
  C exceeds the cell budget (``max_cells``, default 2^24): ``ceil(C / max_cells)`` counting scans.
* **per-row work**: every row adds one to every table: N * M index updates in the numpy kernel,
  ``t_row_set`` seconds each, spread over min(P, K) cores: ``T_rows = N * M * t_row_set / min(P, K)``.
* **fixed**: ``T_fixed`` per counting job (scheduling, the Python workers' start, allocating and
  emitting the P tables, the piece reduce) — independent of N.
* **shuffle bytes**: each task sends its C cells once, in the narrowest unsigned type that holds
  its counts (about N / P / (cells per table) per cell): ``S = P * C * w`` bytes, w in {1,2,4,8}.
* **executor memory** per task: ``8 C`` bytes (its tables) + one chunk of codes (65,536 rows).
* **driver memory**: the collected summed pieces and the dense result: about ``C * (8 + w)``.

Fitting, in **CPU seconds** (the machine is shared: wall seconds carry the load of the minute,
CPU seconds much less): ``CPU_count = C_fixed + N * M * t_row_set`` by least squares over the
one-worker runs of ``bench_spark_cluster.py`` (CPU of the executors' process trees and the
driver, best of the repetitions); the two-worker runs are then *predicted* and the model's error
printed for every measured point. Wall time on an idle cluster is ``passes * T_fixed +
CPU_rows / min(P, K)``; it is not validated here (2 cores, load 10-20 during the runs). The
script also reports every run's Spark/DuckDB ratios (DuckDB runs the same kernel in the same
minutes, a load-robust unit).

    PYTHONPATH=src python benchmarks/cost_model_spark.py benchmarks/results_spark_cluster.jsonl
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path


def width(count: float) -> int:
    return 1 if count < 1 << 8 else 2 if count < 1 << 16 else 4 if count < 1 << 32 else 8


def work(r: dict) -> float:
    return float(r["rows"]) * r["sets"]


def fit(runs: list[dict]) -> tuple[float, float]:
    """``(C_fixed, t_row_set)``: least squares of ``count_cpu_s = C_fixed + N M t_row_set`` over
    the one-worker runs (CPU seconds of Spark's counting, best of the repetitions)."""
    one = [r for r in runs if r["workers"] == 1 and "count_cpu_s" in r["spark"]]
    x = [work(r) for r in one]
    y = [r["spark"]["count_cpu_s"] for r in one]
    n, mx, my = len(x), sum(x) / len(x), sum(y) / len(y)
    sxx = sum((xi - mx) ** 2 for xi in x)
    slope = sum((xi - mx) * (yi - my) for xi, yi in zip(x, y)) / sxx if n > 1 and sxx > 0 else my / mx
    return my - slope * mx, slope


def split(runs: list[dict]) -> tuple[float, float] | None:
    """``(t_row, t_row_set)`` from the repetitions that measured the Python workers' CPU apart:
    the Python workers run the counting kernel (``N M t_row_set``), the executor JVM reads,
    validates and converts the rows to Arrow (``N t_row``); from the repetition of least executor
    CPU of each run (the first repetition of a session also pays the JIT's warm-up), medians over
    the runs."""
    per_set, per_row = [], []
    for r in runs:
        reps = [rep["spark"] for rep in r["reps"] if rep["spark"].get("count_python_cpu_s")]
        if reps:
            best = min(reps, key=lambda sp: sp["count_executor_cpu_s"])
            per_set.append(best["count_python_cpu_s"] / work(r))
            per_row.append((best["count_executor_cpu_s"] - best["count_python_cpu_s"]) / r["rows"])
    if not per_set:
        return None
    med = lambda v: sorted(v)[len(v) // 2]
    return med(per_row), med(per_set)


def project(rows: float, attrs: int, size: int, way: int, nodes: int, cores_per_node: int,
            t_fixed: float, t_row_set: float, bytes_per_row: float, max_cells: int = 1 << 24) -> dict:  # fmt: skip
    m = math.comb(attrs, way)
    cells = m * size**way
    cores = nodes * cores_per_node
    partitions = max(cores, math.ceil(rows * bytes_per_row / (128 << 20)))
    per_cell = rows / partitions / size**way
    w = width(2 * per_cell)
    passes = math.ceil(cells / max_cells)
    return {
        "sets": m, "cells": cells, "passes": passes, "scans": 1 + passes, "partitions": partitions,
        "cpu_s": rows * m * t_row_set, "wall_s": passes * t_fixed + rows * m * t_row_set / cores,
        "shuffle_gb": partitions * cells * w / 1e9, "task_mem_mb": 8 * min(cells, max_cells) / 2**20,
        "driver_mb": cells * (8 + w) / 2**20,
    }  # fmt: skip


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).with_name("results_spark_cluster.jsonl"))
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    runs = [r for r in runs if "count_cpu_s" in r["spark"]]  # runs that recorded CPU time
    c_fixed, t_row_set = fit(runs)
    duck_ns = [r["duckdb"]["count_cpu_s"] / work(r) * 1e9 for r in runs]
    print(f"fitted on the {sum(r['workers'] == 1 for r in runs)} one-worker runs (CPU seconds): C_fixed = "
          f"{c_fixed:.1f} s, t_row_set = {t_row_set * 1e9:.2f} ns; DuckDB's kernel in the same runs: "
          f"{min(duck_ns):.2f}-{max(duck_ns):.2f} ns per row x set")  # fmt: skip
    print("| rows | workers x cores | load | Spark count CPU s | model CPU s | model error | Spark count wall s "
          "| DuckDB count wall s | Spark/DuckDB wall (best) | Spark/DuckDB CPU |")  # fmt: skip
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in sorted(runs, key=lambda r: (r["workers"], r["cores"], r["rows"])):
        model = c_fixed + work(r) * t_row_set
        meas = r["spark"]["count_cpu_s"]
        fitted = " (fit)" if r["workers"] == 1 else ""
        print(f"| {r['rows']:,} | {r['workers']} x {r['cores']} | {r['load1']:.1f} | {meas:.1f} | {model:.1f} | "
              f"{(model - meas) / meas:+.0%}{fitted} | {r['spark']['count_s']:.1f} | {r['duckdb']['count_s']:.1f} | "
              f"{r['count_ratio']:.2f}x | {r['count_cpu_ratio']:.2f}x |")  # fmt: skip
    two = split(runs)
    if two is not None:
        t_row, t_set = two
        print(f"\nCPU split (Python workers vs executor JVM, best repetition of each run, median over runs): "
              f"kernel {t_set * 1e9:.2f} ns per row x set, JVM {t_row * 1e6:.2f} us per row (read, codes, Arrow)")  # fmt: skip
    bpr = 15.2  # bytes per row of the 30 x int8 Parquet lake (measured: 15,197,686 B / 10^6 rows)
    print(f"\nProjection (model, not measured): 10^9 rows, 50 nodes x 16 cores, t_row_set = {t_row_set * 1e9:.2f} ns, "
          f"T_fixed = C_fixed = {c_fixed:.1f} s per counting job")  # fmt: skip
    for attrs, way in ((30, 2), (30, 3), (100, 3)):
        p = project(1e9, attrs, 10, way, 50, 16, c_fixed, t_row_set, bpr)
        print(f"  {attrs} attrs x 10, <= {way}-way: {p['sets']:,} sets, {p['cells']:,} cells, {p['scans']} scans, "
              f"{p['partitions']} tasks, CPU {p['cpu_s']:.3g} s, wall ~{p['wall_s'] / 60:.1f} min, "
              f"shuffle {p['shuffle_gb']:.1f} GB, task tables {p['task_mem_mb']:.0f} MiB, "
              f"driver {p['driver_mb']:.0f} MiB")  # fmt: skip
        if two is not None:
            cpu2 = 1e9 * (two[0] + p["sets"] * two[1])
            print(f"      two-term CPU (JVM per row + kernel per row x set): {cpu2:.3g} s, "
                  f"wall ~{(p['passes'] * c_fixed + cpu2 / 800) / 60:.1f} min")  # fmt: skip


if __name__ == "__main__":
    main()
