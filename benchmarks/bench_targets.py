"""Fitness-for-use (Xiao et al.): reproduction of Tables 2, 4–10 and scale points.

For every workload: the certified least privacy cost Δ² (Problem 1, relative gap), and for each
baseline of paper §7 the Problem-1 cost it needs divided by Δ² (= its largest variance/target
ratio at the optimal cost, the tables' numbers), printed beside the paper's.  Random workloads
(Tables 5–8) are one seed per d here; the paper's are one unknown draw.

Usage::

    OPENBLAS_NUM_THREADS=2 PYTHONPATH=src python benchmarks/bench_targets.py [--quick]

``--quick``: d ≤ 128, t ≤ 6, scale points up to d = 256. ``--residual``: only the table 10
marginal workloads through ``dm.plan(Workload, targets=1)`` (the residual route, issue 13) up to
t = 16, beside the explicit solver where it is small enough (same numbers, time ratio).
``--scale``: only the scale points (d = 64 … 1024, ``--sizes 512,1024``): the default solver
beside the previous first-order method, same instance, same run (see :func:`scale_points`);
``--limit`` / ``--previous-limit`` set their wall-clock limits (60 s each by default).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "solvers"))

from fitness_paper_workloads import (  # noqa: E402
    age_pyramid_workload,
    marginals_workload,
    pl94_workload,
    prefix_workload,
    random_pm1_workload,
    random_range_workload,
    random_targets,
)

import dpmatrix as dm  # noqa: E402
from dpmatrix._solvers.fitness import solve_min_privacy_cost  # noqa: E402
from dpmatrix._solvers.fitness_baselines import baseline_costs  # noqa: E402

COLS = ("IP", "HM", "CA", "wCA-I", "wCA-II")

PAPER = {
    "PL94": (36.56, 13.93, 3.99, 3.99, 3.99),
    "AGE": (32.49, 6.2, 1.58, 1.58, 1.58),
    ("range", 64): (10.63, 2.84, 1.27, 1.27, 1.27),
    ("range", 128): (17.45, 3.48, 1.25, 1.25, 1.25),
    ("range", 256): (28.43, 3.90, 1.29, 1.29, 1.29),
    ("range", 512): (47.36, 4.68, 1.23, 1.23, 1.23),
    ("range", 1024): (77.26, 5.42, 1.24, 1.24, 1.24),
    ("range-rnd", 64): (16.04, 4.63, 2.53, 1.62, 1.98),
    ("range-rnd", 128): (21.28, 5.87, 2.14, 1.49, 1.75),
    ("range-rnd", 256): (41.76, 6.05, 1.91, 1.45, 1.69),
    ("pm1", 64): (1.14, 2.29, 1.14, 1.14, 1.14),
    ("pm1", 128): (1.14, 2.29, 1.07, 1.07, 1.07),
    ("pm1", 256): (1.14, 3.39, 1.06, 1.06, 1.06),
    ("pm1-rnd", 64): (2.58, 7.44, 2.43, 1.15, 1.61),
    ("pm1-rnd", 128): (2.82, 8.28, 2.58, 1.18, 1.72),
    ("pm1-rnd", 256): (2.82, 8.36, 2.58, 1.17, 1.70),
    ("marg", 2): (1.82, 3.02, 1.14, 1.14, 1.14),
    ("marg", 4): (4.55, 10.28, 1.42, 1.42, 1.42),
    ("marg", 6): (8.6, 21.38, 1.66, 1.66, 1.66),
    ("marg", 8): (14.03, 36.72, 1.88, 1.88, 1.88),
    ("marg", 10): (20.84, 56.23, 2.08, 2.08, 2.08),
}


def row(name, W, c, key, *, branchings=(2, 4, 8, 16), max_seconds=120.0) -> None:
    t0 = time.perf_counter()
    res = solve_min_privacy_cost(W, c, max_seconds=max_seconds)
    t1 = time.perf_counter() - t0
    base = baseline_costs(W, c, branchings=branchings)
    ours = [base[k] / res.privacy_cost for k in COLS]
    paper = PAPER.get(key)
    cells = "  ".join(
        f"{o:7.2f}" + (f" ({p:6.2f})" if paper else "") for o, p in zip(ours, paper or ours)
    )
    hm_b = min((v, k) for k, v in base.items() if k.startswith("HM-"))[1]
    print(
        f"{name:<16} {W.shape[0]:>5}x{W.shape[1]:<5} Δ²={res.privacy_cost:9.5f} gap={res.gap:8.1e} "
        f"{res.status:<10} it={res.iterations:<5} {t1:6.1f}s | {cells} | best {hm_b}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes only")
    ap.add_argument("--residual", action="store_true", help="only table 10 through the residual route")
    ap.add_argument("--scale", action="store_true", help="only the scale points, new beside previous solver")
    ap.add_argument("--sizes", help="scale points to run, e.g. 512,1024 (default 64..1024, or ..256 with --quick)")
    ap.add_argument("--limit", type=float, default=60.0, help="wall-clock limit of the solver (s)")
    ap.add_argument("--previous-limit", type=float, default=60.0, help="wall-clock limit of the previous solver (s)")
    args = ap.parse_args()
    if args.residual:
        residual_table10()
        return
    sizes = (64, 128, 256) if args.quick else (64, 128, 256, 512, 1024)
    if args.sizes:
        sizes = tuple(int(v) for v in args.sizes.split(","))
    if args.scale:
        scale_points(sizes, args.limit, args.previous_limit)
        return
    ds = (64, 128) if args.quick else (64, 128, 256)
    ts = (2, 4, 6) if args.quick else (2, 4, 6, 8, 10)

    print("Table 2 (prefix, targets 1): Δ² ours [certified lower bound] (paper)")
    for d, p in zip((2, 4, 8, 16, 64), (1.33, 1.76, 2.28, 2.91, 4.46)):
        r = solve_min_privacy_cost(prefix_workload(d), 1.0)
        print(f"  d={d:<3} {r.privacy_cost:.6f} [{r.lower_bound:.6f}] ({p})  gap={r.gap:.1e}")

    print("\nTables 4-10: baseline cost / optimal cost = max variance ratio at equal cost, "
          "ours (paper); HM = best branching in {2,4,8,16}")
    print(f"{'workload':<16} {'m x n':>11} {'':>52} | " + "  ".join(f"{k:>16}" for k in COLS))
    row("PL94 (T4)", pl94_workload(), 1.0, "PL94")
    row("AGE (T9)", age_pyramid_workload(), 1.0, "AGE")
    for t in ts:
        row(f"marg t={t} (T10)", marginals_workload(t), 1.0, ("marg", t))
    for d in ds:
        rng = np.random.default_rng(d)
        W = random_range_workload(d, rng)
        row(f"range d={d} (T5)", W, 1.0, ("range", d))
        row(f"range d={d} (T6)", W, random_targets(W.shape[0], rng), ("range-rnd", d))
        W = random_pm1_workload(d, rng)
        row(f"±1 d={d} (T7)", W, 1.0, ("pm1", d))
        row(f"±1 d={d} (T8)", W, random_targets(W.shape[0], rng), ("pm1-rnd", d))

    scale_points(sizes, args.limit, args.previous_limit)


def _timed(W, c, method: str, limit: float):
    load = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    r = solve_min_privacy_cost(W, c, max_seconds=limit, method=method)
    return r, time.perf_counter() - t0, time.process_time() - c0, load


def scale_points(ds, limit: float = 60.0, previous_limit: float = 60.0) -> None:
    """Tables 5/6 workloads (2d random ranges, uniform and uniform(1, 10) targets): the default
    solver (reduction + Newton on the dual) beside the previous first-order method
    (``method="fixed_point"``), run one after the other on the same instance, limited to
    ``limit`` and ``previous_limit`` wall-clock seconds.  Ratios are wall and CPU time,
    previous / new; when the previous method stops at its limit without certifying, the ratio is
    a lower bound (printed ``≥``).  On a shared machine the wall limit can stop a solve that
    would certify: the CPU column is the time it used."""
    blas = ", ".join(f"{i['internal_api']} {i['num_threads']} thread(s)" for i in threadpool_info()) or "?"
    print(f"\nScale (tables 5/6 workloads): Problem 1, certified relative gap ≤ 1e-6, limit {limit:.0f} s"
          f" (previous solver {previous_limit:.0f} s); BLAS: {blas}; load = 1-minute load average at the start")
    print(f"  {'d':<5} {'targets':<14} {'Δ²':>10} | {'new: gap':>9} {'status':<10} {'wall':>6} {'cpu':>6} "
          f"{'load':>4} | {'previous: gap':>13} {'status':<10} {'wall':>6} {'cpu':>6} {'load':>4} | "
          f"{'wall ratio':>10} {'cpu ratio':>9}")
    for d in ds:
        rng = np.random.default_rng(10_000 + d)
        W = random_range_workload(d, rng)
        for label, c in (("uniform", 1.0), ("uniform(1,10)", random_targets(W.shape[0], rng))):
            new, tw, tc, ln = _timed(W, c, "newton", limit)
            old, ow, oc, lo = _timed(W, c, "fixed_point", previous_limit)
            ge = "" if old.status == "optimal" else "≥"
            print(
                f"  {d:<5} {label:<14} {new.privacy_cost:10.5f} | {new.gap:9.1e} {new.status:<10} "
                f"{tw:5.1f}s {tc:5.1f}s {ln:4.1f} | {old.gap:13.1e} {old.status:<10} {ow:5.1f}s {oc:5.1f}s "
                f"{lo:4.1f} | {ge + format(ow / tw, '.1f'):>10} {ge + format(oc / tc, '.1f'):>9}",
                flush=True,
            )


def residual_table10(ts=(2, 4, 6, 8, 10, 12, 14, 16), explicit_max_t=8) -> None:
    """Table 10 (all 1- and 2-way marginals of r = 3 attributes with t values, targets 1) planned
    by ``dm.plan(Workload, targets=1.0)``: the residual route, optimal for uniform per-marginal
    targets; the explicit solver beside it (t ≤ explicit_max_t) for the same Δ² and a time ratio."""
    print("Table 10 through the residual route: dm.plan(Workload, targets=1)")
    print(f"{'t':>3} {'Δ² residual':>12} {'gap':>8} {'time':>8} | {'Δ² explicit':>12} {'time':>8} {'ratio':>7}")
    for t in ts:
        dom = dm.Domain.from_sizes([t] * 3)
        wk = dm.Workload(dom, [s for k in (1, 2) for s in itertools.combinations(dom.names, k)])
        t0 = time.perf_counter()
        p = dm.plan(wk, targets=1.0)
        tr = time.perf_counter() - t0
        line = f"{t:>3} {p.pcost:12.6f} {p.certificate()['gap']:8.1e} {tr:7.3f}s |"
        if t <= explicit_max_t:
            t0 = time.perf_counter()
            r = solve_min_privacy_cost(marginals_workload(t), 1.0)
            te = time.perf_counter() - t0
            line += f" {r.privacy_cost:12.6f} {te:7.3f}s {te / tr:6.1f}x"
        print(line, flush=True)


if __name__ == "__main__":
    main()
