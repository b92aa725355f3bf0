"""The default release (with its SVG report) and the report alone, against a numpy + pyarrow floor.

Data: 100,000 records x 30 attributes of 10 values, all <=3-way marginals (4,526 marginals), as
``bench_release.py``. Measured side by side in one run, each step in a fresh process, wall-clock
and CPU seconds (user + system of the child process, ``resource.getrusage``), with the load
average before and after (the machine is shared; compare the ratios):

* ``floor``            — what any tool must do: read the Parquet records with pyarrow, count every
  3-way marginal with ``numpy.bincount`` and sum the lower-order ones from them, add Gaussian
  noise with numpy, write one Parquet table with pyarrow (no planning, no variances, no report);
* ``release --no-report`` — ``dpmatrix release`` as a user runs it, without the HTML report;
* ``release``          — ``dpmatrix release`` with its default report (SVG charts written
  directly, no plotting library);
* ``report``           — ``dpmatrix report REL --out FILE``: re-rendering the report of the
  release (fresh process: interpreter start, imports, reading the release, writing the page);
* ``report (render)``  — the same page rendered in a running process
  (``dpmatrix._report.write_release_report``), i.e. without the interpreter start and imports;
* ``python -c pass``   — the interpreter's own start, for reference.

Targets (issue 28): the default release <= 3x the floor; the report <= 1 s.

    PYTHONPATH=src python benchmarks/bench_report.py [--repeat 3] [--out benchmarks/results_report.md]
"""

from __future__ import annotations

import argparse
import os
import resource
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


def timed(argv: list[str], env: dict) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{r.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run(argv: list[str], env: dict) -> float:
    """Wall seconds of one child process."""
    return timed(argv, env)[0]


RENDER = r"""
import sys, time
from dpmatrix._report import write_release_report
rel, repeat = sys.argv[1], int(sys.argv[2])
write_release_report(rel)  # warm: imports, the release's files read once
best = (float("inf"), float("inf"))
for _ in range(repeat):
    t, c = time.perf_counter(), time.process_time()
    write_release_report(rel)
    best = min(best, (time.perf_counter() - t, time.process_time() - c))
print(best[0], best[1])
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=ROWS)
    ap.add_argument("--attrs", type=int, default=ATTRS)
    ap.add_argument("--k", type=int, default=WAY)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", help="also append the table to this markdown file")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=SRC, OPENBLAS_NUM_THREADS="1")
    py = sys.executable
    tmp = Path(tempfile.mkdtemp(prefix="bench_report_"))
    try:
        data, dom = make_data(tmp, args.rows, args.attrs, SIZE)
        load0 = os.getloadavg()[0]
        rel = tmp / "rel"
        base = [py, "-m", "dpmatrix", "release", str(data), "--domain", str(dom), "-w", f"all:<={args.k}",
                "--rho", "1", "--no-ledger", "-q", "--encoding", "codes"]
        times: dict[str, tuple[float, float]] = {}
        times["floor"] = timed([py, "-c", FLOOR, str(data), str(tmp / "floor.parquet"), str(args.k)], env)
        times["release --no-report"] = timed(base + ["--out", str(tmp / "rel0"), "--no-report"], env)
        times["release (default, with report)"] = timed(base + ["--out", str(rel)], env)
        times["report (fresh process)"] = min(
            timed([py, "-m", "dpmatrix", "report", str(rel), "--out", str(tmp / f"r{i}.html"), "-q", "--overwrite"], env)
            for i in range(args.repeat))
        r = subprocess.run([py, "-c", RENDER, str(rel), str(args.repeat)], env=env, capture_output=True, text=True,
                           check=True)
        wall, cpu = (float(x) for x in r.stdout.strip().splitlines()[-1].split())
        times["report (render, in process)"] = (wall, cpu)
        times["python -c pass"] = min(timed([py, "-c", "pass"], env) for _ in range(args.repeat))
        load1 = os.getloadavg()[0]
        floor, floor_cpu = times["floor"]
        lines = [f"{args.rows:,} records x {args.attrs} attributes of {SIZE} values, all <={args.k}-way; load average "
                 f"{load0:.1f} before, {load1:.1f} after; {os.cpu_count()} cores; report rows best of {args.repeat}", "",
                 "| step | wall s | / floor (wall) | CPU s | / floor (CPU) |", "|---|---|---|---|---|"]
        for name, (t, cpu) in times.items():
            lines.append(f"| {name} | {t:.2f} | {t / floor:.2f}× | {cpu:.2f} | {cpu / floor_cpu:.2f}× |")
        rel_t, rel_cpu = times["release (default, with report)"]
        lines += ["", f"default release / floor: {rel_t / floor:.2f}× wall, {rel_cpu / floor_cpu:.2f}× CPU (target <= 3×); "
                  f"report share of the release: {rel_t - times['release --no-report'][0]:.2f} s wall; "
                  f"report re-render: {times['report (fresh process)'][0]:.2f} s fresh process, "
                  f"{times['report (render, in process)'][0]:.2f} s rendering ({times['report (render, in process)'][1]:.2f} s CPU; "
                  "target <= 1 s)"]
        text = "\n".join(lines)
        print(text)
        if args.out:
            with open(args.out, "a") as f:
                f.write("\n" + text + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
