"""Counting throughput: all <=3-way marginals of N records x d attributes of size n.

Counts only the maximal sets (the C(d,3) triples) from data and derives every lower-order
marginal by summing (``marginals_from_maximal``). Times the numpy engine on an in-memory frame and
the DuckDB engine on CSV and Parquet files of the same data (both GROUP BY strategies), and checks
that every engine returns identical tables.

    PYTHONPATH=src python benchmarks/bench_counting.py            # 1,000,000 x 20, n = 10
    PYTHONPATH=src python benchmarks/bench_counting.py --rows 200000 --threads 2
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from dpmatrix._domain import Domain
from dpmatrix.engines._base import marginals_from_maximal
from dpmatrix.engines._duckdb_engine import DuckDBEngine
from dpmatrix.engines._numpy_engine import NumpyEngine


def timed(label: str, fn):  # noqa: ANN001, ANN201
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    print(f"  {label:<52s} {dt:8.2f} s", flush=True)
    return out, dt


def make_records(rows: int, attrs: int, size: int, seed: int = 0) -> tuple[Domain, pd.DataFrame]:
    """Uniform random codes: ``rows`` records of ``attrs`` attributes of ``size`` values."""
    domain = Domain.from_sizes([size] * attrs)
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, size, size=(rows, attrs), dtype=np.uint8 if size <= 256 else np.uint16)
    return domain, pd.DataFrame(codes, columns=list(domain.names))


def count_numpy(domain: Domain, df: pd.DataFrame, way: int = 3) -> tuple[dict, float]:
    """All <= ``way``-way marginals with the numpy engine (validation included): tables, seconds."""
    d = len(domain)
    sets = [c for k in range(way + 1) for c in itertools.combinations(range(d), k)]
    t0 = time.perf_counter()
    eng = NumpyEngine(df, domain)
    tables = marginals_from_maximal(eng, sets)
    return tables, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--attrs", type=int, default=20)
    ap.add_argument("--size", type=int, default=10)
    ap.add_argument("--way", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: all)")
    ap.add_argument("--skip-duckdb", action="store_true")
    ap.add_argument("--group-by", action="store_true", help="also time one GROUP BY per set")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    domain = Domain.from_sizes([args.size] * args.attrs)
    rng = np.random.default_rng(args.seed)
    codes = rng.integers(0, args.size, size=(args.rows, args.attrs), dtype=np.uint8)
    df = pd.DataFrame(codes, columns=list(domain.names))
    sets = [c for k in range(args.way + 1) for c in itertools.combinations(range(args.attrs), k)]
    n_max = len(list(itertools.combinations(range(args.attrs), args.way)))
    print(
        f"{args.rows:,} records x {args.attrs} attributes (size {args.size}); all <={args.way}-way "
        f"marginals: {len(sets)} sets, {n_max} maximal sets counted from data"
    )

    print("numpy engine (in memory)")
    eng, _ = timed("validate + compact codes", lambda: NumpyEngine(df, domain))
    ref, t_np = timed(f"count {n_max} maximal + derive {len(sets) - n_max}", lambda: marginals_from_maximal(eng, sets))
    assert all(int(t.sum()) == args.rows for t in ref.values())
    print(f"  => numpy: {t_np:.2f} s for all <= {args.way}-way marginals (target <= 60 s)")
    if args.skip_duckdb:
        return

    with tempfile.TemporaryDirectory() as tmp:
        csv, parquet = Path(tmp) / "data.csv", Path(tmp) / "data.parquet"
        table = pa.Table.from_pandas(df, preserve_index=False)
        pacsv.write_csv(table, csv)
        pq.write_table(table, parquet)
        print(f"files: CSV {csv.stat().st_size / 1e6:.0f} MB, Parquet {parquet.stat().st_size / 1e6:.0f} MB")
        configs = [("CSV", csv, True, "grouping_sets"), ("Parquet", parquet, True, "grouping_sets"),
                   ("Parquet", parquet, False, "grouping_sets")]  # fmt: skip
        if args.group_by:
            configs.append(("CSV", csv, True, "group_by"))
        for name, path, mat, strategy in configs:
            print(f"DuckDB engine: {name}, materialize={mat}, strategy={strategy}")
            de, t_init = timed(
                "read + validate" + (" + load code table" if mat else ""),
                lambda: DuckDBEngine(path, domain, materialize=mat, strategy=strategy,
                                     threads=args.threads),  # fmt: skip
            )
            got, t_cnt = timed(
                f"count {n_max} maximal + derive {len(sets) - n_max}",
                lambda: marginals_from_maximal(de, sets),
            )
            de.close()
            same = all(np.array_equal(ref[s], got[s]) for s in sets)
            print(f"  => total {t_init + t_cnt:.2f} s; identical to numpy: {same}")
            assert same


if __name__ == "__main__":
    main()
