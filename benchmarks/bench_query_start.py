"""How fast ``dpmatrix query`` starts, for every query path and every release type.

Releases (records: ``--rows`` × ``--attrs`` attributes of 10 values, uniform codes, as
``bench_report.py``):

* ``residual``     — ``dpmatrix release`` on the command line, all ≤``--k``-way marginals of all
  ``--attrs`` attributes (30 attributes, ≤3-way: 4,526 marginals), discrete Gaussian noise;
* ``querysmasher`` — ``dm.plan(planner="querysmasher")``, all ≤2-way marginals of the first 8
  attributes, published by ``dm.write_release`` with the default secure noise;
* ``lsa``          — the explicit-strategy LSA planner, all ≤2-way marginals of the first 3
  attributes (1,000 cells: an explicit strategy is for small domains; a 1,300 × 1,000 strategy
  and its 1,000 × 1,000 eigendecomposition stored in the release);
* ``pure``         — the pure ε-DP planner (ε = 1, δ = 0), all ≤2-way marginals of the first 8;
* ``qs-large``     — QuerySmasher on three Kronecker query groups over the 3-way table of the
  first 3 attributes (prefix/identity/range in rotated orders): their sum is not a Kronecker
  product, so the 9×9×9 residual space gets one dense optimized strategy of more than 250,000
  numbers (its saved table is the first group's queries, ``x0,x1,x2``).

Every path runs in a fresh process, best of ``--repeat``, with Python's bytecode cache on (in a
temporary ``PYTHONPYCACHEPREFIX``, whatever ``PYTHONDONTWRITEBYTECODE`` says: an installed
package has its bytecode compiled, and compiling every module on every start would add ~0.25 s), the cases interleaved so that machine
load affects all alike (the machine is shared): the listing, a saved table, a reconstructed
marginal (``--level 0.9``: not the saved level) as text and JSON, one count (``--where``) as text
and JSON, ``--by`` and ``--contrast``; and, for reference, ``python -c pass`` and
``python -c "import numpy, pyarrow.parquet"`` (what any reader of a Parquet release loads).
Printed: wall seconds, the ratio to the numpy + pyarrow import, the process's CPU seconds (user
+ system of the child, from ``resource.getrusage``) and the load average before and after. The
goal (issue 28): every query starts in ≤ 0.5 s.

    PYTHONPATH=src python benchmarks/bench_query_start.py [--repeat 3] [--out results.md]

``--planners querysmasher,lsa`` times those release types only (no residual release is built
unless named); ``--baseline OTHER/src`` also writes and queries each release with another
checkout's code (its cases labelled ``baseline``), interleaved with this tree's: a before/after
comparison measured side by side.
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

SRC = str(Path(__file__).resolve().parent.parent / "src")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report import SIZE, make_data  # noqa: E402  (the report benchmark's records)

MAKE = r"""
import itertools, sys
import pyarrow.parquet as pq
import dpmatrix as dm
data, out, name, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
names = [f"x{i}" for i in range(k)]
df = pq.read_table(data, columns=names).to_pandas()
dom = dm.Domain({n: 10 for n in names})
sets = [s for r in (1, 2) for s in itertools.combinations(names, r)]
wk = dm.Workload(dom, sets)
if name == "qs-large":
    from dpmatrix._queries import QueryWorkload
    wk = (QueryWorkload(dom).add_kron(names, ["prefix", "identity", "range"])
          .add_kron(names, ["range", "prefix", "identity"]).add_kron(names, ["identity", "range", "prefix"]))
    plan = dm.plan(wk, rho=1.0, planner="querysmasher")
    from dpmatrix.planners._querysmasher.submechanisms import DenseMech
    dense = [s.mech.B.size for s in plan.solutions if isinstance(s, DenseMech)]
    assert max(dense, default=0) > 250_000, f"no dense strategy above 250,000 numbers: {dense}"
elif name == "pure":
    plan = dm.plan(wk, epsilon=1.0, delta=0)
else:
    plan = dm.plan(wk, rho=1.0, planner=name)
dm.write_release(plan.measure(df, encoding="codes"), out)
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


def paths(rel: Path, py: str, a: str, b: str, saved: str | None = None) -> dict[str, list[str]]:
    """The query paths on release ``rel``; ``a``, ``b``: two attributes of a 2-way marginal
    (saved unless ``saved`` names the saved table to print)."""
    q = [py, "-m", "dpmatrix", "query", str(rel), "-q"]
    where = ["--where", f"{a}=1..4", "--where", f"{b}=2"]
    return {
        "listing": q,
        "saved table": q + ["--marginal", saved or f"{a},{b}"],
        "reconstructed": q + ["--marginal", f"{a},{b}", "--level", "0.9"],
        "reconstructed json": q + ["--marginal", f"{a},{b}", "--level", "0.9", "--format", "json"],
        "--where": q + where,
        "--where json": q + where + ["--format", "json"],
        "--by": q + ["--where", f"{a}=1..4", "--by", b],
        "--contrast": q + ["--where", f"{a}=1..4", "--contrast", f"{b}=1", f"{b}=2"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--attrs", type=int, default=30)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", help="also append the table to this markdown file")
    ap.add_argument("--planners", default="residual,querysmasher,lsa,pure",
                    help="comma-separated release types to time (also: qs-large)")
    ap.add_argument("--baseline", help="another checkout's src directory, timed side by side")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_query_start_"))
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env = dict(base, PYTHONPATH=SRC, OPENBLAS_NUM_THREADS="1", PYTHONPYCACHEPREFIX=str(tmp / "pycache"))
    envs = {"": env}
    if args.baseline:
        envs["baseline "] = dict(env, PYTHONPATH=str(Path(args.baseline).resolve()))
    wanted = args.planners.split(",")
    py = sys.executable
    try:
        data, dom = make_data(tmp, args.rows, args.attrs, SIZE)
        cases = {"python -c pass": ([py, "-c", "pass"], env),
                 "import numpy, pyarrow.parquet": ([py, "-c", "import numpy, pyarrow.parquet"], env)}
        for label, e in envs.items():
            rels = {}
            if "residual" in wanted:
                rels["residual"] = tmp / f"{label}residual"
                subprocess.run([py, "-m", "dpmatrix", "release", str(data), "--domain", str(dom), "-w",
                                f"all:<={args.k}", "--rho", "1", "--no-ledger", "-q", "--no-report",
                                "--encoding", "codes", "--out", str(rels["residual"])], env=e, check=True)  # fmt: skip
            for name, k in (("querysmasher", 8), ("lsa", 3), ("pure", 8), ("qs-large", 3)):
                if name in wanted:
                    rels[name] = tmp / f"{label}{name}"
                    subprocess.run([py, "-c", MAKE, str(data), str(rels[name]), name, str(k)], env=e, check=True)
            for name, rel in rels.items():
                saved = "x0,x1,x2" if name == "qs-large" else None
                for path, argv in paths(rel, py, "x0", "x1", saved).items():
                    cases[f"{label}{name}: {path}"] = (argv, e)
        for argv, e in cases.values():  # once untimed: the bytecode cache filled for every checkout
            subprocess.run(argv, env=e, capture_output=True, check=False)
        load0 = os.getloadavg()[0]
        best = dict.fromkeys(cases, (float("inf"), float("inf")))
        for _ in range(args.repeat):  # interleaved: load changes affect every case alike
            for name, (argv, e) in cases.items():
                wall, cpu = timed(argv, e)
                if wall < best[name][0]:
                    best[name] = (wall, cpu)
        load1 = os.getloadavg()[0]
        floor = best["import numpy, pyarrow.parquet"][0]
        lines = [f"{args.rows:,} records x {args.attrs} attributes of {SIZE} values; releases {args.planners}"
                 + (f" (and the baseline {args.baseline})" if args.baseline else "") + f"; residual release all "
                 f"<={args.k}-way; load average {load0:.1f} before, {load1:.1f} after; {os.cpu_count()} "
                 f"cores; best of {args.repeat}, fresh processes, interleaved", "",
                 "| release: path | wall s | / numpy+pyarrow import | CPU s |", "|---|---|---|---|"]
        for name, (wall, cpu) in best.items():
            lines.append(f"| {name} | {wall:.3f} | {wall / floor:.2f}× | {cpu:.3f} |")
        worst = max(((w, n) for n, (w, _) in best.items() if ":" in n))
        lines += ["", f"slowest query: {worst[1]} {worst[0]:.3f} s (goal <= 0.5 s)"]
        text = "\n".join(lines)
        print(text)
        if args.out:
            with open(args.out, "a") as f:
                f.write("\n" + text + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)



if __name__ == "__main__":
    main()
