"""CPU and wall time of ``dm.plan(workload, epsilon=1, delta=0)`` on one ordered attribute
(pure ε-DP), per strategy (``auto``, ``pidentity``, ...), query type, objective and size.

Each plan runs in a fresh subprocess (no planning cache shared between runs). Inside it the
planning modules are imported first (their one-time import CPU is reported apart, ``import s``),
then the process CPU time (``time.process_time``) and the wall time of the plan are measured;
the machine's load shows in the wall seconds only (the load average is printed per run).

Two modes:

* ``--after SRC`` alone: a table of every (kind, objective, n, strategy) for one source tree;
* ``--before OLD --after NEW``: the same runs for both trees side by side, with the CPU ratio.

Usage::

    python benchmarks/bench_auto_ordered.py --after src --n 256 1024 4096 \\
        --kinds prefix range --objectives sum_var max_var --strategies auto pidentity
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, os, sys, time, warnings
warnings.simplefilter("ignore")
t0 = time.process_time()
import dpmatrix as dm
import dpmatrix.planners._dispatch, dpmatrix.planners._pure.hierarchical, dpmatrix.planners._pure.pidentity_plan
imp = time.process_time() - t0
n, kind, objective, strategy = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
wk = dm.Workload(dm.Domain({"a": n}), [("a",)], query_types={"a": kind})
t0, w0 = time.process_time(), time.time()
p = dm.plan(wk, epsilon=1, delta=0, objective=objective, strategy=strategy)
cpu, wall = time.process_time() - t0, time.time() - w0
skipped = [r["strategy"] for r in p.comparison if "skipped" in r and "strategy" in r]
print(json.dumps({"cpu": cpu, "wall": wall, "import": imp, "strategy": p.strategy, "max": p.max_variance(),
                  "total": p.total_variance(), "load": os.getloadavg()[0], "skipped": skipped}))
"""


def run(src: str, n: int, kind: str, objective: str, strategy: str, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, str(n), kind, objective, strategy], env=env,
                             capture_output=True, text=True, check=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _line(n, strategy, side, r) -> str:
    if "timeout" in r:
        return f"  {n:<5d} {strategy:10s} {side:7s} stopped after {r['timeout']:.0f} s wall"
    return (f"  {n:<5d} {strategy:10s} {side:7s} {r['cpu']:7.2f} {r['wall']:8.2f} {r['import']:6.2f} {r['load']:5.1f}  "
            f"{r['strategy']:12s} {r['max']:12.6g} {r['total']:14.8g}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--before")
    ap.add_argument("--after", required=True)
    ap.add_argument("--n", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--kinds", nargs="+", default=["prefix"])
    ap.add_argument("--objectives", nargs="+", default=["max_var"])
    ap.add_argument("--strategies", nargs="+", default=["auto"])
    ap.add_argument("--timeout", type=float, default=1800.0, help="wall seconds per plan")
    args = ap.parse_args()
    sides = [("before", args.before)] if args.before else []
    sides.append(("after", args.after))
    for kind in args.kinds:
        for objective in args.objectives:
            print(f"\n{kind}, objective={objective}, epsilon=1, delta=0")
            print("  n     strategy   side      CPU s   wall s import  load  picked          max var      total var")
            for n in args.n:
                for strategy in args.strategies:
                    res = {side: run(src, n, kind, objective, strategy, args.timeout) for side, src in sides}
                    for side, r in res.items():
                        print(_line(n, strategy, side, r), flush=True)
                    if len(res) == 2 and all("cpu" in r for r in res.values()):
                        print(f"  {n:<5d} {strategy:10s} after / before CPU: "
                              f"{res['after']['cpu'] / res['before']['cpu']:.3f}", flush=True)


if __name__ == "__main__":
    main()
