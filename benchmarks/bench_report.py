"""The report and the query command, against a numpy + pyarrow floor (issue 28 items 5).

Data: 100,000 records x 30 attributes of 10 values, all <=3-way marginals (4,526 marginals), as
``bench_release.py``. Measured side by side, in fresh processes, wall-clock seconds:

* ``floor``            — what any tool must do: read the Parquet records with pyarrow, count every
  3-way marginal with ``numpy.bincount`` and sum the lower-order ones from them, add Gaussian
  noise with numpy, write one Parquet table with pyarrow (no planning, no variances, no report);
* ``cli --no-report``  — ``dpmatrix release`` as a user runs it, without the HTML report;
* ``cli``              — ``dpmatrix release`` with its default HTML report;
* ``report``           — ``dpmatrix report REL`` (re-rendering the report of the release);
* ``query --marginal`` — ``dpmatrix query REL --marginal x0,x1`` (a saved table, fresh process);
* ``query --where``    — ``dpmatrix query REL --where x0=1..4 --where x1=2`` (a range count with
  its exact variance, reconstructed from the measurements, fresh process);
* ``python -c pass``   — the interpreter's own start, for reference.

Printed: each time and its ratio to the floor (release rows) or absolute (query rows; the goal
is <= 0.5 s). Best of ``--repeat`` runs for the short commands.

    PYTHONPATH=src python benchmarks/bench_report.py
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ATTRS, SIZE, ROWS, WAY = 30, 10, 100_000, 3
SRC = str(Path(__file__).resolve().parent.parent / "src")


def make_data(folder: Path, rows: int, attrs: int, size: int) -> tuple[Path, Path]:
    import json

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = [f"x{i}" for i in range(attrs)]
    codes = np.random.default_rng(0).integers(0, size, size=(rows, attrs), dtype=np.int64)
    data = folder / "records.parquet"
    pq.write_table(pa.table({n: codes[:, j] for j, n in enumerate(names)}), data)
    dom = folder / "domain.json"
    dom.write_text(json.dumps({n: size for n in names}))
    return data, dom


FLOOR = r"""
import itertools, sys, numpy as np, pyarrow as pa, pyarrow.parquet as pq
data, out, way = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = pq.read_table(data)
X = np.column_stack([t.column(i).to_numpy() for i in range(t.num_columns)])
n, k = X.shape
size = int(X.max()) + 1
rng = np.random.default_rng()
X = X.astype(np.int32)
tables, prefix = {}, {}
for s in itertools.combinations(range(k), way):  # the top-order tables counted from the records
    head = s[:-1]
    if head not in prefix:  # the code of the first way-1 attributes, shared by every table
        idx = np.zeros(n, dtype=np.int32)
        for a in head:
            idx = idx * size + X[:, a]
        prefix = {head: idx * size}
    tables[s] = np.bincount(prefix[head] + X[:, s[-1]], minlength=size ** way).reshape((size,) * way)
for r in range(way - 1, -1, -1):  # every lower-order table summed from a table that contains it
    for s in itertools.combinations(range(k), r):
        sup = next(t for t in tables if len(t) == r + 1 and set(s) <= set(t))
        drop = next(j for j, a in enumerate(sup) if a not in s)
        tables[s] = tables[sup].sum(axis=drop)
keys, values = [], []
for j, c in enumerate(tables.values()):
    c = c.reshape(-1).astype(float)
    values.append(c + rng.normal(0, 10, c.size))
    keys.append(np.full(c.size, j, dtype=np.int32))
pq.write_table(pa.table({"marginal": np.concatenate(keys), "estimate": np.concatenate(values)}), out)
"""


def run(argv: list[str], env: dict) -> float:
    t = time.perf_counter()
    r = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{r.stderr[-3000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=ROWS)
    ap.add_argument("--attrs", type=int, default=ATTRS)
    ap.add_argument("--k", type=int, default=WAY)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=SRC, OPENBLAS_NUM_THREADS="1")
    py = sys.executable
    tmp = Path(tempfile.mkdtemp(prefix="bench_report_"))
    try:
        data, dom = make_data(tmp, args.rows, args.attrs, SIZE)
        print(f"{args.rows:,} records x {args.attrs} attributes of {SIZE} values, all <={args.k}-way; "
              f"load average {os.getloadavg()[0]:.1f}; {os.cpu_count()} cores", flush=True)
        rel = tmp / "rel"
        base = [py, "-m", "dpmatrix", "release", str(data), "--domain", str(dom), "-w", f"all:<={args.k}",
                "--rho", "1", "--no-ledger", "-q"]
        times: dict[str, float] = {}
        times["floor"] = run([py, "-c", FLOOR, str(data), str(tmp / "floor.parquet"), str(args.k)], env)
        times["cli --no-report"] = run(base + ["--out", str(tmp / "rel0"), "--no-report"], env)
        times["cli"] = run(base + ["--out", str(rel)], env)
        times["report"] = min(run([py, "-m", "dpmatrix", "report", str(rel), "--out", str(tmp / f"r{i}.html"), "-q"], env)
                              for i in range(args.repeat))
        q = [py, "-m", "dpmatrix", "query", str(rel)]
        times["query --marginal"] = min(run(q + ["--marginal", "x0,x1"], env) for _ in range(args.repeat))
        times["query --where"] = min(run(q + ["--where", "x0=1..4", "--where", "x1=2"], env) for _ in range(args.repeat))
        times["python -c pass"] = min(run([py, "-c", "pass"], env) for _ in range(args.repeat))
        floor = times["floor"]
        print("| step | wall s | / floor |\n|---|---|---|")
        for name, t in times.items():
            print(f"| {name} | {t:.2f} | {t / floor:.2f}× |")
        print(f"\nreport share of the default release: {(times['cli'] - times['cli --no-report']):.2f} s; "
              f"load average at the end {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
