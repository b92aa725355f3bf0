"""ResidualPlanner+ scaling (paper tables 6 and 7): all range queries on <= 3 attributes,
Synth-10^d, privacy cost 1.

The paper's mechanism is ResidualPlanner+ with Algorithm 4, so every point plans with
``construction="centred"`` (the library's default "auto" would also plan the split
construction and keep the better one, about doubling the selection time).

Runs, side by side in one process per point (fresh peak memory):
  * select, sum_var (closed form) and max_var (constraint generation + interior point);
  * reconstruction of every workload marginal's cell estimates from measurements.
Prints a markdown table with our time, the paper's reported time (12-core desktop) and the ratio.

    python benchmarks/bench_rpplus.py            # d = 10, 20, 30, 50, 100
    python benchmarks/bench_rpplus.py --quick    # d = 10, 20, 30
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

# Paper table 6 (select) and table 7 (reconstruct), ResidualPlanner+ columns, seconds.
PAPER_SUM = {10: 0.164, 20: 0.474, 30: 1.210, 100: 38.005}
PAPER_MAX = {10: 9.994, 20: 57.918, 30: 172.041}  # d = 100: "Out of memory"
PAPER_REC = {10: 0.0297, 20: 0.247, 30: 0.8455, 50: 3.987}  # d = 100: "Out of memory"


def point(step: str, d: int) -> dict:
    """Run one measurement in this process (called in a subprocess by main)."""
    import resource

    import numpy as np
    import pandas as pd

    import dpmatrix as dm

    dom = dm.Domain.from_sizes([10] * d)
    wk = dm.Workload.marginals(dom, 3, upto=True, query_types={a: "range" for a in dom.names})
    out: dict = {"step": step, "d": d}
    if step in ("sum_var", "max_var"):
        t = time.perf_counter()
        plan = dm.plan(wk, pcost=1, objective=step, construction="centred")
        out["seconds"] = time.perf_counter() - t
        out["value"] = plan.rmse() if step == "sum_var" else plan.max_variance()
    else:
        plan = dm.plan(wk, pcost=1, construction="centred")
        rng = np.random.default_rng(0)
        df = pd.DataFrame(rng.integers(0, 10, size=(2000, d)), columns=dom.names)
        meas = plan.measure(df, rng=rng)
        t = time.perf_counter()
        cells = 0
        for key in wk.sets:  # every workload marginal's cell estimates and their variances
            est = meas.estimate(key)
            var = plan.variance(key)
            cells += est.size + 0 * var.size
        out["seconds"] = time.perf_counter() - t
        out["value"] = cells
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def run_point(step: str, d: int, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--point", step, str(d)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return {"step": step, "d": d, "seconds": float("nan"), "value": float("nan"), "peak_mb": float("nan"),
                "note": f"> {timeout:.0f} s"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--point", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    if args.point:
        print(json.dumps(point(args.point[0], int(args.point[1]))))
        return
    ds = [10, 20, 30] if args.quick else [10, 20, 30, 50, 100]
    rows = []
    for step, paper, dlist in [
        ("sum_var", PAPER_SUM, ds),
        ("max_var", PAPER_MAX, ds),
        ("reconstruct", PAPER_REC, [d for d in ds if d <= 50]),
    ]:
        for d in dlist:
            r = run_point(step, d, args.timeout)
            p = paper.get(d)
            ratio = f"{p / r['seconds']:.1f}x" if p and r["seconds"] == r["seconds"] else "—"
            paper_txt = f"{p:g}" if p else ("out of memory" if d == 100 and step != "sum_var" else "—")
            rows.append(
                f"| {step} | {d} | {r['seconds']:.2f}{' ' + r.get('note', '') if 'note' in r else ''} "
                f"| {paper_txt} | {ratio} | {r['peak_mb']:.0f} | {r['value']:.6g} |"
            )
            print(rows[-1], flush=True)
    print("\n| step | d | ours (s) | paper (s, 12 cores) | paper/ours | peak MB | RMSE / max var / cells |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
