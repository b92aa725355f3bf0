"""Benchmark the max-variance selection solver on Synth-10^d, all <=3-way marginals, pcost 1.

    PYTHONPATH=src python benchmarks/bench_maxvar.py            # d = 10, 20, 30, 50, 100
    PYTHONPATH=src python benchmarks/bench_maxvar.py --full     # ... and d = 200
    PYTHONPATH=src python benchmarks/bench_maxvar.py --dims 100 --repeat 3

For each d: time to build (p, C) (workload enumeration + builder), time to solve, the
certified max variance (upper value and dual lower bound) against table 22 of the
ResidualPlanner+ paper, the peak traced memory of build and solve (tracemalloc; numpy reports
its buffers to it), and, for small d, CVXPY + Clarabel on the same (p, C) for comparison.  The
paper's own times (table 22, Python + CVXPY/ECOS on 12 cores) are quoted for the ratio column.
An extra row solves an asymmetric instance (random sizes 2..40, d = --asym-d) for which the
permutation symmetry of Synth-n^d does not help the Krylov solver.

Prints a markdown table.  Timings on a shared machine are noisy: report the machine load.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import sys
import time
import tracemalloc

import numpy as np

from dpmatrix._solvers.maxvar_solver import solve_max_variance
from dpmatrix.planners._residual.maxvar_problem import build_marginal_maxvar_problem

# table 22 of the paper: d -> (ResPlan time in s, ResPlan max variance)
TABLE22 = {
    2: (0.007, 3.306),
    4: (0.010, 10.480),
    6: (0.009, 26.904),
    8: (0.015, 56.961),
    10: (0.018, 105.031),
    12: (0.028, 175.496),
    14: (0.041, 272.738),
    15: (0.050, 332.769),
    20: (0.123, 768.941),
    30: (0.461, 2540.440),
    50: (4.011, 11597.037),
    100: (121.224, 91960.917),
    200: (None, None),  # "killed after more than 1 hour"
}


def workload_upto3(d: int) -> list[tuple[int, ...]]:
    return [s for j in range(4) for s in itertools.combinations(range(d), j)]


def run_cvxpy(p, C):
    import cvxpy as cp

    x = cp.Variable(C.shape[1])
    prob = cp.Problem(cp.Minimize(p @ cp.inv_pos(x)), [C @ x <= 1])
    t = time.perf_counter()
    prob.solve(solver=cp.CLARABEL)
    return time.perf_counter() - t, float(prob.value)


def bench_one(sizes, label, paper, cvxpy_ok, repeat, memory, tol):
    d = len(sizes)
    t0 = time.perf_counter()
    wl = workload_upto3(d)
    t_wl = time.perf_counter() - t0
    t0 = time.perf_counter()
    prob = build_marginal_maxvar_problem(sizes, wl)
    t_build = time.perf_counter() - t0
    solve_times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = solve_max_variance(prob.p, prob.C, 1.0, tol=tol)
        solve_times.append(time.perf_counter() - t0)
    t_solve = min(solve_times)
    peak_build = peak_solve = None
    if memory:  # separate, traced pass: tracemalloc slows Python-object-heavy code down
        tracemalloc.start()
        prob2 = build_marginal_maxvar_problem(sizes, wl)
        peak_build = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        del prob2
        tracemalloc.start()
        solve_max_variance(prob.p, prob.C, 1.0, tol=tol)
        peak_solve = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    del wl
    row = {
        "label": label,
        "d": d,
        "vars": prob.C.shape[1],
        "nnz": prob.C.nnz,
        "wl": t_wl,
        "build": t_build,
        "solve": t_solve,
        "iters": res.iterations,
        "cg": res.min_cost.cg_iterations,
        "mv": res.objective,
        "lb": res.lower_bound,
        "gap": res.min_cost.gap,
        "paper_mv": paper[1] if paper else None,
        "paper_t": paper[0] if paper else None,
        "mem_build": peak_build,
        "mem_solve": peak_solve,
        "cvx_t": None,
        "cvx_v": None,
    }
    if cvxpy_ok:
        row["cvx_t"], row["cvx_v"] = run_cvxpy(prob.p, prob.C)
    return row


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", type=int, nargs="*", default=None)
    ap.add_argument("--full", action="store_true", help="also run d = 200")
    ap.add_argument("--cvxpy-max-d", type=int, default=30)
    ap.add_argument("--asym-d", type=int, default=100, help="0 to skip the asymmetric row")
    ap.add_argument("--repeat", type=int, default=1, help="solve repeats (min time reported)")
    ap.add_argument("--tol", type=float, default=1e-9, help="relative duality gap (default "
                    "1e-9, tight enough that the upper value prints to table 22's 3 decimals)")
    ap.add_argument("--no-memory", action="store_true", help="skip the traced memory pass")
    args = ap.parse_args(argv)
    dims = args.dims or [10, 20, 30, 50, 100]
    if args.full and 200 not in dims:
        dims = dims + [200]

    rows = []
    for d in dims:
        r = bench_one([10] * d, "Synth-10^d", TABLE22.get(d), d <= args.cvxpy_max_d, args.repeat,
                     not args.no_memory, args.tol)
        rows.append(r)
        print(f"done d={d}: solve {r['solve']:.2f}s, max var {r['mv']:.3f}", file=sys.stderr)
    if args.asym_d:
        sizes = np.random.default_rng(0).integers(2, 41, size=args.asym_d)
        r = bench_one(sizes, "random sizes 2..40", None, args.asym_d <= args.cvxpy_max_d, 1,
                      not args.no_memory, args.tol)
        rows.append(r)
        print(f"done asym d={args.asym_d}: solve {r['solve']:.2f}s", file=sys.stderr)

    print()
    print(
        "| instance | d | vars = rows | nnz(C) | workload s | build s | solve s | IPM it | CG it "
        "| max var (ours) | dual lower bound | rel gap | table 22 | paper s | paper/ours "
        "| CVXPY+Clarabel s | Clarabel/ours | Clarabel value | peak MiB build/solve |"
    )
    print("|" + "---|" * 19)
    for r in rows:
        ratio_paper = r["paper_t"] / r["solve"] if r["paper_t"] else None
        ratio_cvx = r["cvx_t"] / r["solve"] if r["cvx_t"] else None
        print(
            f"| {r['label']} | {r['d']} | {r['vars']:,} | {r['nnz']:,} | {r['wl']:.2f} "
            f"| {r['build']:.2f} "
            f"| {r['solve']:.2f} | {r['iters']} | {r['cg']} | {r['mv']:.3f} | {r['lb']:.3f} "
            f"| {r['gap']:.1e} | {fmt(r['paper_mv'], '.3f')} | {fmt(r['paper_t'], '.3f')} "
            f"| {fmt(ratio_paper, '.1f')} | {fmt(r['cvx_t'], '.2f')} | {fmt(ratio_cvx, '.1f')} "
            f"| {fmt(r['cvx_v'], '.3f')} | {fmt(r['mem_build'], '.0f')} / {fmt(r['mem_solve'], '.0f')} |"
        )
    print()
    print(f"relative duality gap tolerance {args.tol:g}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print()
    print(
        f"process max RSS {rss:.0f} MiB; load average {os.getloadavg()}; "
        f"{os.cpu_count()} CPUs (shared with other jobs: timings are noisy)"
    )


if __name__ == "__main__":
    main()
