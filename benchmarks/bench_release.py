"""Release end to end, stage by stage: 100,000 records x 30 attributes of 10 values, all <=3-way
marginals (4,526 marginals, 4.1 M table cells) — issue 18 item 2.

Stages, each timed in wall-clock seconds and in CPU seconds of the process (``time.process_time``:
all threads), with the load average of the machine before and after (the machine is shared: the
CPU times are the comparable numbers when the load is high):

* ``plan``         — ``dm.plan(workload, rho=1)`` (the default objective, as the CLI);
* ``counting``     — time spent inside the DuckDB engine's ``count`` (the Parquet file is read
  by DuckDB, as ``dpmatrix release`` does); measured by wrapping the engine, nothing changed;
* ``noise``        — the rest of ``plan.measure`` (secure default noise: exact discrete Gaussian
  from the OS's random source, and the residual arithmetic);
* ``reconstruct``  — every workload marginal reconstructed as arrays (``plain_batches``): the
  reconstruction the writer does, alone;
* ``write``        — ``write_release`` (default formats) minus ``reconstruct``: building the
  columns, encoding Parquet, SHA-256 digests, manifest, fsync;
* ``write_release``— the whole call;
* ``+csv``         — ``write_release`` with per-marginal CSV files as well (on request);
* ``query``        — one saved table read back: ``load_release(...).table(("x0", "x1"))`` in
  the process, and ``dpmatrix query REL --marginal x0,x1`` in a fresh process (best of 3).

``--before SRC`` runs the same stages a second time in a fresh process with ``PYTHONPATH=SRC``
(e.g. an export of an earlier commit), on the same data file, so both columns come from one run;
the ratio is before / after. ``--cli`` also times ``dpmatrix release`` as a user runs it (a fresh
process: imports, plan, counting, noise, release folder, and with the HTML report: its figures),
wall and CPU, with and without ``--no-report``.

    PYTHONPATH=src python benchmarks/bench_release.py
    git archive b65d2cc src | tar -x -C /tmp/before && \\
        PYTHONPATH=src python benchmarks/bench_release.py --before /tmp/before/src --cli
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ATTRS, SIZE, ROWS, WAY = 30, 10, 100_000, 3


def make_data(folder: Path, rows: int, attrs: int, size: int) -> tuple[Path, Path]:
    """Uniform random codes as a Parquet file and its domain file ``{name: size}``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = [f"x{i}" for i in range(attrs)]
    rng = np.random.default_rng(0)
    codes = rng.integers(0, size, size=(rows, attrs), dtype=np.int64)
    data = folder / "records.parquet"
    pq.write_table(pa.table({n: codes[:, j] for j, n in enumerate(names)}), data)
    dom = folder / "domain.json"
    dom.write_text(json.dumps({n: size for n in names}))
    return data, dom


class TimedEngine:
    """A counting engine whose ``count`` calls are timed (wall and process CPU)."""

    def __init__(self, engine):
        self._engine = engine
        self.wall = self.cpu = 0.0

    def count(self, sets, *a, **k):
        t, c = time.perf_counter(), time.process_time()
        out = self._engine.count(sets, *a, **k)
        self.wall += time.perf_counter() - t
        self.cpu += time.process_time() - c
        return out

    def __getattr__(self, name):
        return getattr(self._engine, name)


def stages(data: Path, domain_file: Path, work: Path, way: int, csv: bool) -> dict:
    """Every stage in this process; returns {stage: [wall, cpu]} and facts."""
    import itertools

    import dpmatrix as dm
    from dpmatrix._reconstruct.broadcast import plain_batches
    from dpmatrix.engines._duckdb_engine import DuckDBEngine

    out: dict = {"load_before": os.getloadavg()[0]}

    def timed(name, fn):
        t, c = time.perf_counter(), time.process_time()
        res = fn()
        out[name] = [time.perf_counter() - t, time.process_time() - c]
        return res

    dom = dm.Domain.from_json(domain_file)
    sets = [s for k in range(way + 1) for s in itertools.combinations(dom.names, k)]
    wk = dm.Workload(dom, sets)
    plan = timed("plan", lambda: dm.plan(wk, rho=1.0))
    eng = TimedEngine(DuckDBEngine(data, dom))
    meas = timed("measure", lambda: plan.measure(None, engine=eng))
    out["counting"] = [eng.wall, eng.cpu]
    out["noise"] = [out["measure"][0] - eng.wall, out["measure"][1] - eng.cpu]
    timed("reconstruct", lambda: sum(b.estimate.size for batch in plain_batches(meas) for b in batch))
    timed("write_release", lambda: dm.write_release(meas, work / "rel"))
    out["write"] = [out["write_release"][i] - out["reconstruct"][i] for i in range(2)]
    if csv:
        timed("+csv", lambda: dm.write_release(meas, work / "rel_csv", formats=("parquet", "csv")))
    # a saved table read back: in process (load_release + the table as pandas), and as a user
    # runs `dpmatrix query` (a fresh process: imports, manifest, one table); best of 3
    def in_process():
        dm.load_release(work / "rel").table(("x0", "x1"))

    def cli_query():
        subprocess.run([sys.executable, "-m", "dpmatrix", "query", str(work / "rel"), "--marginal", "x0,x1"],
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip

    for name, fn in (("query (in process)", in_process), ("query (CLI process)", cli_query)):
        best = None
        for _ in range(3):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t, c = time.perf_counter(), time.process_time()
            fn()
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = time.process_time() - c + (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            run = [time.perf_counter() - t, cpu]
            best = run if best is None or run[0] < best[0] else best
        out[name] = best
    files = [p for p in (work / "rel").rglob("*") if p.is_file()]
    out["files"] = len(files)
    out["mbytes"] = sum(p.stat().st_size for p in files) / 1e6
    out["marginals"] = len(wk)
    out["cells"] = int(sum(wk.cells))
    out["end_to_end"] = [sum(out[s][i] for s in ("plan", "measure", "write_release")) for i in range(2)]
    out["load_after"] = os.getloadavg()[0]
    return out


def spawn_stages(src: str, args, data: Path, dom: Path, csv: bool) -> dict:
    work = Path(tempfile.mkdtemp(prefix="bench_release_"))
    try:
        env = dict(os.environ, PYTHONPATH=src, OPENBLAS_NUM_THREADS="1")
        r = subprocess.run(
            [sys.executable, __file__, "--_stages", str(data), str(dom), str(work), str(args.k), str(int(csv))],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if r.returncode != 0:
            raise SystemExit(f"stages under {src} failed:\n{r.stderr[-3000:]}")
        return json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def cli_release(src: str, data: Path, dom: Path, way: int, *extra: str) -> list[float]:
    """``dpmatrix release`` in a fresh process: [wall, CPU of the child]."""
    work = Path(tempfile.mkdtemp(prefix="bench_release_cli_"))
    try:
        env = dict(os.environ, PYTHONPATH=src, OPENBLAS_NUM_THREADS="1")
        argv = [sys.executable, "-m", "dpmatrix", "release", str(data), "--domain", str(dom), "-w",
                f"all:<={way}", "--rho", "1", "--out", str(work / "rel"), "--no-ledger", "-q", *extra]  # fmt: skip
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        r = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode != 0:
            raise SystemExit(f"dpmatrix release under {src} failed:\n{r.stderr[-3000:]}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return [wall, cpu]
    finally:
        shutil.rmtree(work, ignore_errors=True)


ROWS_SHOWN = ("plan", "counting", "noise", "reconstruct", "write", "write_release", "+csv", "end_to_end",
              "cli --no-report", "cli", "query (in process)", "query (CLI process)")


def render(cols: dict[str, dict]) -> str:
    names = list(cols)
    head = "| stage | " + " | ".join(f"{n} wall s | {n} CPU s" for n in names)
    if len(names) == 2:
        head += " | ratio wall | ratio CPU"
    lines = [head + " |", "|---" * (1 + 2 * len(names) + (2 if len(names) == 2 else 0)) + "|"]
    for s in ROWS_SHOWN:
        if not any(s in c for c in cols.values()):
            continue
        cells = []
        for n in names:
            v = cols[n].get(s)
            cells += [f"{v[0]:.2f}", f"{v[1]:.2f}"] if v else ["—", "—"]
        if len(names) == 2:
            a, b = cols[names[0]].get(s), cols[names[1]].get(s)
            cells += [f"{a[i] / b[i]:.1f}×" if a and b and b[i] > 0 else "—" for i in range(2)]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    for n in names:
        c = cols[n]
        lines.append(f"\n{n}: {c['marginals']} marginals, {c['cells']:,} cells, {c['files']} files, "
                     f"{c['mbytes']:.1f} MB; load average {c['load_before']:.1f} before, {c['load_after']:.1f} after")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--_stages":
        data, dom, work, k, csv = sys.argv[2:7]
        print(json.dumps(stages(Path(data), Path(dom), Path(work), int(k), bool(int(csv)))))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=ROWS)
    ap.add_argument("--attrs", type=int, default=ATTRS)
    ap.add_argument("--size", type=int, default=SIZE)
    ap.add_argument("--k", type=int, default=WAY)
    ap.add_argument("--before", metavar="SRC", help="source folder of the version to compare with")
    ap.add_argument("--cli", action="store_true", help="also time 'dpmatrix release' in a fresh process")
    ap.add_argument("--no-csv", action="store_true", help="skip the write with per-marginal CSV files")
    args = ap.parse_args()
    after_src = str(Path(__file__).resolve().parent.parent / "src")
    tmp = Path(tempfile.mkdtemp(prefix="bench_release_data_"))
    try:
        data, dom = make_data(tmp, args.rows, args.attrs, args.size)
        print(f"{args.rows:,} records x {args.attrs} attributes of {args.size} values, all <={args.k}-way; "
              f"load average {os.getloadavg()[0]:.1f} at start; {os.cpu_count()} cores", flush=True)
        cols: dict[str, dict] = {}
        if args.before:
            cols["before"] = spawn_stages(args.before, args, data, dom, csv=False)
            if args.cli:
                cols["before"]["cli --no-report"] = cli_release(args.before, data, dom, args.k, "--no-report")
                cols["before"]["cli"] = cli_release(args.before, data, dom, args.k)
        cols["after"] = spawn_stages(after_src, args, data, dom, csv=not args.no_csv)
        if args.cli:
            cols["after"]["cli --no-report"] = cli_release(after_src, data, dom, args.k, "--no-report")
            cols["after"]["cli"] = cli_release(after_src, data, dom, args.k)
        print(render(cols))
        print(f"load average at the end {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
