"""Query latency on a 30-attribute release (issue 16 item 13): a saved table is read directly,
reconstruction opens only the residuals of the asked marginal; compared side by side, in one
run, with reading every noisy value (what ``query`` did before). Not a test: prints timings and
their ratio.

    PYTHONPATH=src python benchmarks/bench_query.py                 # d = 30, n = 10, all <=3-way
    PYTHONPATH=src python benchmarks/bench_query.py --size 6 --rows 5000
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

import dpmatrix as dm


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--attrs", type=int, default=30)
    ap.add_argument("--size", type=int, default=10)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--k", type=int, default=3)
    a = ap.parse_args()
    names = [f"x{i}" for i in range(a.attrs)]
    dom = dm.Domain.from_dict({n: a.size for n in names})
    rng = np.random.default_rng(0)
    data = pd.DataFrame({n: rng.integers(0, a.size, a.rows) for n in names})
    wk = dm.Workload(dom, [s for k in range(a.k + 1) for s in __import__("itertools").combinations(names, k)])
    t0 = time.perf_counter()
    plan = dm.plan(wk, rho=1.0, objective="sum_var")
    meas = plan.measure(data, rng=rng)
    out = Path(tempfile.mkdtemp()) / "rel"
    dm.write_release(meas, out, formats=["parquet"])
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"release: {len(wk)} marginals, {size / 1e6:.1f} MB, built in {time.perf_counter() - t0:.1f} s")

    def cli(*argv: str) -> float:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dpmatrix", "query", str(out), *argv], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        return time.perf_counter() - t

    def full_load() -> float:
        t = time.perf_counter()
        n = 0
        for batch in pq.ParquetFile(str(out / "measurements.parquet")).iter_batches():
            for v in batch.column("values").to_pylist():
                n += len(v)
        rel = dm.load_release(out)
        rel.table(("x0", "x1"))
        return time.perf_counter() - t

    def startup() -> float:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import dpmatrix.cli"], check=True)
        return time.perf_counter() - t

    def in_process(level=None) -> float:
        t = time.perf_counter()
        rel = dm.load_release(out)
        rel.table(("x0", "x1")) if level is None else rel.marginal(("x0", "x1"), level)
        return time.perf_counter() - t

    cli("--marginal", "x0")  # warm the file cache
    saved = min(cli("--marginal", "x0,x1") for _ in range(3))
    recon = min(cli("--marginal", "x0,x1", "--level", "0.9") for _ in range(3))
    full = min(full_load() for _ in range(3))
    boot = min(startup() for _ in range(3))
    ip_saved = min(in_process() for _ in range(3))
    ip_recon = min(in_process(0.9) for _ in range(3))
    print(f"python start-up + import dpmatrix.cli:            {boot:.2f} s")
    print(f"load_release + saved table (in process):         {ip_saved:.2f} s")
    print(f"load_release + reconstructed marginal (in proc): {ip_recon:.2f} s")
    print(f"query saved table (CLI process, incl. start-up): {saved:.2f} s")
    print(f"query reconstructed marginal (CLI process):      {recon:.2f} s")
    print(f"reading every noisy value + table (in process):  {full:.2f} s  ratio in-process saved/full = {ip_saved / full:.2f}")


if __name__ == "__main__":
    main()
