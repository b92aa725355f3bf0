"""How fast ``dpmatrix query`` starts, against the interpreter's own start (issue 28 item 5).

A release of 100,000 records x 30 attributes of 10 values, all <=3-way marginals (4,526
marginals, as ``bench_report.py``), is made once; then, each in a fresh process and measured
side by side (best of ``--repeat``, interleaved so that machine load affects all alike):

* ``python -c pass``                   — the bare interpreter;
* ``python -c "import numpy, pyarrow.parquet"`` — the libraries any reader of a Parquet release needs;
* ``query --marginal x0,x1``           — a saved table, printed from its file and the manifest;
* ``query --marginal x0,x1 --level 0.9`` — the same table reconstructed from the measurements;
* ``query --where x0=1..4 --where x1=2`` — a range count with its exact variance;
* ``query --where ... --format json``  — the same as JSON.

Printed: wall seconds, the ratio to ``python -c pass`` and to the numpy + pyarrow import
(the goal of issue 28: every query starts in <= 0.5 s on an idle machine).

    PYTHONPATH=src python benchmarks/bench_query_start.py [--attrs 30] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

SRC = str(Path(__file__).resolve().parent.parent / "src")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report import SIZE, make_data, run  # noqa: E402  (same data and timing as the report benchmark)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--attrs", type=int, default=30)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=SRC, OPENBLAS_NUM_THREADS="1")
    py = sys.executable
    tmp = Path(tempfile.mkdtemp(prefix="bench_query_start_"))
    try:
        data, dom = make_data(tmp, args.rows, args.attrs, SIZE)
        rel = tmp / "rel"
        run([py, "-m", "dpmatrix", "release", str(data), "--domain", str(dom), "-w", f"all:<={args.k}",
             "--rho", "1", "--no-ledger", "-q", "--no-report", "--out", str(rel)], env)  # fmt: skip
        q = [py, "-m", "dpmatrix", "query", str(rel), "-q"]
        where = ["--where", "x0=1..4", "--where", "x1=2"]
        cases = {
            "python -c pass": [py, "-c", "pass"],
            "import numpy, pyarrow.parquet": [py, "-c", "import numpy, pyarrow.parquet"],
            "query --marginal (saved)": q + ["--marginal", "x0,x1"],
            "query --marginal --level 0.9 (reconstructed)": q + ["--marginal", "x0,x1", "--level", "0.9"],
            "query --where": q + where,
            "query --where --format json": q + where + ["--format", "json"],
        }
        best = dict.fromkeys(cases, float("inf"))
        for _ in range(args.repeat):  # interleaved: load changes affect every case alike
            for name, argv in cases.items():
                best[name] = min(best[name], run(argv, env))
        bare, floor = best["python -c pass"], best["import numpy, pyarrow.parquet"]
        print(f"{args.rows:,} records x {args.attrs} attributes of {SIZE} values, all <={args.k}-way; "
              f"load average {os.getloadavg()[0]:.1f}; {os.cpu_count()} cores; best of {args.repeat}")
        print("| command | wall s | / python -c pass | / import numpy, pyarrow |\n|---|---|---|---|")
        for name, t in best.items():
            print(f"| {name} | {t:.3f} | {t / bare:.1f}× | {t / floor:.2f}× |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
