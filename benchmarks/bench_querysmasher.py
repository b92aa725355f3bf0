"""QuerySmasher: scalability (paper section 8.6) and the paper's tables 2, 4, 5.

Scale (each configuration in its own subprocess, so peak memory is per run):

    PYTHONPATH=src python benchmarks/bench_querysmasher.py scale              # n = 40, d = 10 and 40
    PYTHONPATH=src python benchmarks/bench_querysmasher.py scale --d 10 --n 40 --measure 100000

Workload: all 1-way range queries, all 2-way affine queries, all 3-way prefix queries.  Reports
decomposition / solve / assembly time, peak RSS, RMSE at privacy cost 1, distinct solves.  With
``--measure N`` also counts N random records (numpy engine, maximal marginals only) and measures.

Tables (QS and WFF columns vs the paper; signed difference; certified duality gap):

    PYTHONPATH=src python benchmarks/bench_querysmasher.py tables
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "2")

import numpy as np  # noqa: E402  (after the thread limits: BLAS reads them when NumPy loads)


def _workload(n: int, d: int):
    import dpmatrix as dm
    from dpmatrix._queries import QueryWorkload

    dom = dm.Domain.from_sizes([n] * d)
    return (QueryWorkload.kway(dom, 1, "range") + QueryWorkload.pairs(dom, "affine")
            + QueryWorkload.kway(dom, 3, "prefix"))


def run_one(n: int, d: int, measure: int, max_exact_cells: int) -> dict:
    from dpmatrix.planners._querysmasher.planner import plan_querysmasher

    t0 = time.perf_counter()
    wk = _workload(n, d)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    p = plan_querysmasher(wk, pcost=1.0, max_exact_cells=max_exact_cells)
    t_plan = time.perf_counter() - t0
    t0 = time.perf_counter()
    rmse = p.rmse()
    t_rmse = time.perf_counter() - t0
    out = dict(n=n, d=d, views=len(wk.groups), queries=wk.n_queries, build_s=round(t_build, 2),
               **{k + "_s": round(v, 2) for k, v in p.timings.items()}, plan_s=round(t_plan, 2),
               rmse_s=round(t_rmse, 2), rmse=rmse, solves=len(p.solutions),
               residual_spaces=len(p.residuals), gap=p.certificate()["gap"],
               methods=sorted({c["method"] for c in p.certificates()}))
    if measure:
        import pandas as pd

        rng = np.random.default_rng(0)
        data = pd.DataFrame(rng.integers(0, n, size=(measure, d)), columns=wk.domain.names)
        t0 = time.perf_counter()
        m = p.measure(data, rng=rng)
        out["measure_s"] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        m.answer(len(wk.groups) - 1)
        out["answer_one_group_s"] = round(time.perf_counter() - t0, 3)
    out["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)
    return out


def scale(args) -> None:
    configs = [(args.n, d) for d in (args.d or [10, 40])]
    print(f"{'n':>3} {'d':>3} {'views':>6} {'queries':>11} {'decomp':>7} {'solve':>7} {'assem':>7} "
          f"{'plan s':>7} {'RSS GB':>7} {'RMSE':>9} {'solves':>6}  extra")
    for n, d in configs:
        cmd = [sys.executable, __file__, "_one", str(n), str(d), str(args.measure), str(args.max_exact_cells)]
        res = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
        if res.returncode:
            print(res.stderr)
            continue
        r = json.loads(res.stdout.strip().splitlines()[-1])
        extra = {k: r[k] for k in ("measure_s", "answer_one_group_s", "gap", "methods") if k in r}
        print(f"{n:>3} {d:>3} {r['views']:>6} {r['queries']:>11} {r['decompose_s']:>7} {r['solve_s']:>7} "
              f"{r['assemble_s']:>7} {r['plan_s']:>7} {r['peak_rss_gb']:>7} {r['rmse']:>9.3f} "
              f"{r['solves']:>6}  {extra}", flush=True)


# -- tables --------------------------------------------------------------------------------------
CPS = ([7, 4, 2], [50, 100])
ADULT = ([42, 16, 15, 9, 7, 6, 5, 2, 2], [100, 100, 100, 99, 85])
LOANS = ([51, 36, 15, 8, 6, 5, 4, 3], [101, 101, 101, 101])
TABLE2 = [  # dataset, k, upto, WFF, QS
    ("Adult", ADULT, 1, False, 5.804, 5.047), ("Adult", ADULT, 2, False, 22.493, 17.632),
    ("Adult", ADULT, 3, False, 66.934, 47.055), ("Adult", ADULT, 3, True, 66.794, 47.853),
    ("CPS", CPS, 1, False, 3.589, 3.135), ("CPS", CPS, 2, False, 7.841, 6.194),
    ("CPS", CPS, 3, False, 10.267, 7.903), ("CPS", CPS, 3, True, 10.594, 8.140),
    ("Loans", LOANS, 1, False, 5.330, 4.670), ("Loans", LOANS, 2, False, 18.736, 14.822),
    ("Loans", LOANS, 3, False, 49.823, 36.095), ("Loans", LOANS, 3, True, 49.721, 36.410),
]
TABLE4 = [("marginal", 23.48, 23.48), ("prefix", 39.70, 33.70), ("range", 41.36, 41.08),
          ("circular", 39.77, 39.77), ("affine", 45.23, 28.25), ("abs", 64.11, 35.85)]
TABLE5 = [(10, 25.37, 20.41), (20, 65.13, 51.63), (30, 113.98, 93.50), (40, 170.18, 138.38),
          (50, 232.72, 187.24)]


def _row(name, p_wff, p_qs, wff_paper, qs_paper, digits):
    w, q = p_wff.rmse(), p_qs.rmse()
    cert = p_qs.certificate()
    print(f"{name:<24} WFF {w:9.{digits + 1}f} (paper {wff_paper:.{digits}f}, {w - wff_paper:+.{digits + 1}f})"
          f"   QS {q:9.{digits + 1}f} (paper {qs_paper:.{digits}f}, {100 * (q / qs_paper - 1):+.2f}%)"
          f"   gap {cert['gap']:.1e}", flush=True)


def tables(_args) -> None:
    import dpmatrix as dm
    from dpmatrix._queries import QueryWorkload
    from dpmatrix.planners._querysmasher.planner import plan_querysmasher

    print("Table 2 (hybrid marginal/prefix), privacy cost 1")
    for name, (cat, num), k, upto, wffp, qsp in TABLE2:
        dom = dm.Domain.from_sizes(list(cat) + list(num))
        kinds = {f"a{i}": "prefix" for i in range(len(cat), len(cat) + len(num))}
        wk = QueryWorkload.kway(dom, k, kinds, upto=upto)
        _row(f"{name} {'<=' if upto else ''}{k}-way", plan_querysmasher(wk, solver="fourier"),
             plan_querysmasher(wk), wffp, qsp, 3)
    print("Table 4 (1-way + 2-way, n = 10, d = 40)")
    dom = dm.Domain.from_sizes([10] * 40)
    for kind, wffp, qsp in TABLE4:
        if kind in ("affine", "abs"):
            wk = QueryWorkload.kway(dom, 1, "prefix") + QueryWorkload.pairs(dom, kind)
        else:
            k1 = "identity" if kind == "marginal" else kind
            wk = QueryWorkload.kway(dom, 1, k1) + QueryWorkload.kway(dom, 2, k1)
        _row(kind, plan_querysmasher(wk, solver="fourier"), plan_querysmasher(wk), wffp, qsp, 2)
    print("Table 5 (1-way range + 2-way affine + 3-way prefix, n = 10)")
    for d, wffp, qsp in TABLE5:
        wk = _workload(10, d)
        _row(f"d = {d}", plan_querysmasher(wk, solver="fourier"), plan_querysmasher(wk), wffp, qsp, 2)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_one":
        n, d, meas, mec = map(int, sys.argv[2:6])
        print(json.dumps(run_one(n, d, meas, mec)))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("scale")
    s.add_argument("--n", type=int, default=40)
    s.add_argument("--d", type=int, nargs="*")
    s.add_argument("--measure", type=int, default=0, help="records to count and measure (0: plan only)")
    s.add_argument("--max-exact-cells", type=int, default=2500)
    sub.add_parser("tables")
    args = ap.parse_args()
    {"scale": scale, "tables": tables}[args.cmd](args)


if __name__ == "__main__":
    main()
