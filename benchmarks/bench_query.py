"""``dpmatrix query`` end to end on a 30-attribute release (issue 16 item 13: ≤ 0.5 s for a
saved table), as a user runs it: a new Python process each time, start-up and imports included.

Printed beside, in the same run and interleaved with it (the machine may be shared), the floor
of any Python command: ``python -c pass`` and ``python -c "import numpy"`` (Arrow, which reads
the Parquet table, needs NumPy), and ``import dpmatrix`` / ``import dpmatrix.cli``. Each is
the minimum (and median) over ``--repeats`` runs; ratios are to ``python -c "import numpy"``.
Bytecode is cached (in a temporary ``PYTHONPYCACHEPREFIX``), as for an installed package. The
load average is printed before and after. Not a test.

    PYTHONPATH=src python benchmarks/bench_query.py                  # d = 30, n = 10, all <=3-way
    PYTHONPATH=src python benchmarks/bench_query.py --release DIR    # reuse a release folder
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def build_release(out: Path, attrs: int, size: int, rows: int, k: int) -> None:
    import numpy as np
    import pandas as pd

    import dpmatrix as dm

    names = [f"x{i}" for i in range(attrs)]
    dom = dm.Domain.from_dict({n: size for n in names})
    rng = np.random.default_rng(0)
    data = pd.DataFrame({n: rng.integers(0, size, rows) for n in names})
    wk = dm.Workload(dom, [s for j in range(k + 1) for s in itertools.combinations(names, j)])
    t0 = time.perf_counter()
    plan = dm.plan(wk, rho=1.0, objective="sum_var")
    dm.write_release(plan.measure(data, rng=rng), out, formats=["parquet", "csv"])
    size_mb = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 1e6
    print(f"release: {len(wk)} marginals on {attrs} attributes, {size_mb:.0f} MB, built in "
          f"{time.perf_counter() - t0:.0f} s")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--release", type=Path, help="an existing release folder (else one is built)")
    ap.add_argument("--attrs", type=int, default=30)
    ap.add_argument("--size", type=int, default=10)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--baseline-src", type=Path,
                    help="another dpmatrix source tree (e.g. `git archive OLD src | tar -x`) timed in the "
                    "same run, interleaved: its import and saved-table query rows are marked (baseline)")
    a = ap.parse_args()
    out = a.release
    if out is None:
        out = Path(tempfile.mkdtemp()) / "rel"
        build_release(out, a.attrs, a.size, a.rows, a.k)
    def environment(src: Path) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(src) + os.pathsep + env.get("PYTHONPATH", "")
        # bytecode cached, as for an installed package (pip compiles it), in a folder of its
        # own: with PYTHONDONTWRITEBYTECODE every run would compile dpmatrix's sources again
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="bench-query-pycache-")
        return env

    env = environment(Path(__file__).resolve().parents[1] / "src")
    py = sys.executable
    commands = {
        "python -c pass": [py, "-c", "pass"],
        'python -c "import numpy"': [py, "-c", "import numpy"],
        'python -c "import dpmatrix"': [py, "-c", "import dpmatrix"],
        'python -c "import dpmatrix.cli"': [py, "-c", "import dpmatrix.cli"],
        "dpmatrix query --marginal x0,x1 (saved table)": [py, "-m", "dpmatrix", "query", str(out), "--marginal", "x0,x1"],
        "dpmatrix query --marginal x0,x1 --format csv": [py, "-m", "dpmatrix", "query", str(out), "--marginal", "x0,x1",
                                                         "--format", "csv"],
        "dpmatrix query --marginal x0,x1 --level 0.9 (reconstructed)": [py, "-m", "dpmatrix", "query", str(out),
                                                                        "--marginal", "x0,x1", "--level", "0.9"],
    }  # fmt: skip
    envs = {name: env for name in commands}
    if a.baseline_src is not None:
        base = environment(a.baseline_src.resolve())
        for name in ('python -c "import dpmatrix"', 'python -c "import dpmatrix.cli"',
                     "dpmatrix query --marginal x0,x1 (saved table)"):
            commands[f"{name} (baseline)"] = commands[name]
            envs[f"{name} (baseline)"] = base
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(2):  # warm the file cache and the bytecode cache
        for name, cmd in commands.items():
            subprocess.run(cmd, env=envs[name], check=True, stdout=subprocess.DEVNULL)
    load_before = os.getloadavg()
    for _ in range(a.repeats):  # interleaved: every command sees the same load
        for name, cmd in commands.items():
            t = time.perf_counter()
            subprocess.run(cmd, env=envs[name], check=True, stdout=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - t)
    load_after = os.getloadavg()
    ref = min(times['python -c "import numpy"'])
    print(f"{os.cpu_count()} CPUs; load average (1, 5, 15 min) before {load_before[0]:.2f} {load_before[1]:.2f} "
          f"{load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")  # fmt: skip
    print(f"{'command':<73} {'min s':>7} {'median s':>9} {'min / import numpy':>19}")
    for name, ts in times.items():
        print(f"{name:<73} {min(ts):7.3f} {statistics.median(ts):9.3f} {min(ts) / ref:19.2f}")


if __name__ == "__main__":
    main()
