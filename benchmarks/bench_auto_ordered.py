"""CPU time of ``dm.plan(workload, epsilon=1, delta=0)`` (``strategy="auto"``, the defaults) on one
ordered attribute, for two source trees side by side (e.g. before / after a change).

Each plan runs in a fresh subprocess (no cache shared between the two trees; the process CPU
time is measured inside it, so the machine's load shows in the wall seconds only).

Usage::

    python benchmarks/bench_auto_ordered.py --before /path/to/old/src --after src --n 256 1024
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
import dpmatrix as dm
n, kind, objective = int(sys.argv[1]), sys.argv[2], sys.argv[3]
wk = dm.Workload(dm.Domain({"a": n}), [("a",)], query_types={"a": kind})
t0, w0 = time.process_time(), time.time()
p = dm.plan(wk, epsilon=1, delta=0, objective=objective)
print(json.dumps({"cpu": time.process_time() - t0, "wall": time.time() - w0, "strategy": p.strategy,
                  "max": p.max_variance(), "total": p.total_variance(), "load": os.getloadavg()[0]}))
"""


def run(src: str, n: int, kind: str, objective: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
    out = subprocess.run([sys.executable, "-c", CHILD, str(n), kind, objective], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--n", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--kind", default="prefix")
    ap.add_argument("--objective", default="max_var")
    args = ap.parse_args()
    print(f"{args.kind}, objective={args.objective}, epsilon=1, delta=0 (strategy='auto')")
    print("  n     side    CPU s   wall s  load  picked          max var        total var")
    for n in args.n:
        res = {side: run(src, n, args.kind, args.objective)
               for side, src in (("before", args.before), ("after", args.after))}
        for side, r in res.items():
            print(f"  {n:<5d} {side:7s} {r['cpu']:7.1f} {r['wall']:8.1f} {r['load']:5.1f}  {r['strategy']:14s} "
                  f"{r['max']:12.6g} {r['total']:14.6g}")
        print(f"  {n:<5d} after / before CPU: {res['after']['cpu'] / res['before']['cpu']:.3f}")


if __name__ == "__main__":
    main()
