"""Throughput of dpmatrix's exact discrete Gaussian sampler vs OpenDP's, side by side; of the
secure default noise (exact discrete Gaussian / lattice sampler) vs the old floating-point path;
and (``--part speed``) of the exact samplers against an earlier version of dpmatrix.

Usage::

    PYTHONPATH=src python benchmarks/bench_discrete_gaussian.py [--n 2000000] [--n-opendp 20000]
    PYTHONPATH=src python benchmarks/bench_discrete_gaussian.py --part secure [--rows 200000]
    git archive a5b4d51 src | tar -x -C /tmp/before && \\
        PYTHONPATH=src python benchmarks/bench_discrete_gaussian.py --part speed --before /tmp/before/src

``--part speed`` times the discrete Gaussian (σ² from 10 to 10⁹, and the γ² of a 3-way residual
of the 30-attribute release: a rounded σ̄² times 10⁶) and the discrete Laplace (integer scale
``t``, and the pure ε-DP sampler with ``ε = 1/t``) in two fresh processes, this tree's ``src``
and ``--before``, one after the other in the same run; each rate is draws per second of *CPU*
time (``time.process_time``, best of ``--repeat``), so a shared machine distorts it little.

``--part samplers`` (with OpenDP): both samplers draw from N_Z(0, σ²) with randomness from the
OS CSPRNG, in the same process and run. For each σ² the best of ``--repeat`` timings is reported (the machine may be shared; the
1-minute load average is printed so busy runs can be recognized). OpenDP is optional: without it
only dpmatrix's column is filled.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

import dpmatrix as dm
from dpmatrix._mechanisms.lattice import LatticeQuery, lattice_measure
from dpmatrix._mechanisms.samplers import rational_upper_bound, sample_discrete_gaussian


def best_rate(fn, n: int, repeat: int) -> float:  # type: ignore[no-untyped-def]
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn(n)
        dt = time.perf_counter() - t0
        assert len(out) == n
        best = min(best, dt)
    return n / best


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=2_000_000, help="draws per timing (dpmatrix)")
    ap.add_argument("--n-opendp", type=int, default=20_000, help="draws per timing (OpenDP)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--part", choices=["samplers", "secure", "speed", "all"], default="all")
    ap.add_argument("--rows", type=int, default=200_000, help="records for the end-to-end timings")
    ap.add_argument("--before", metavar="SRC", help="source folder of the version to compare with")
    ap.add_argument("--n-speed", type=int, default=1_000_000, help="draws per timing (--part speed)")
    args = ap.parse_args()
    if args.part in ("speed", "all"):
        speed_vs_before(args)
    if args.part == "speed":
        return
    if args.part in ("secure", "all"):
        secure_vs_float(args)
    if args.part == "secure":
        return

    try:
        import opendp  # noqa: F401

        have_opendp = True
    except ImportError:
        have_opendp = False

    # a σ² as the measure step produces it: σ rounded up to a simple rational, squared
    rounded = rational_upper_bound(math.sqrt(1234.5678)) ** 2
    cases: list[tuple[str, Fraction]] = [
        ("1", Fraction(1)),
        ("64/9", Fraction(64, 9)),
        ("100", Fraction(100)),
        (f"{rounded} (≈1234.57)", rounded),
        ("10^4", Fraction(10**4)),
        ("10^6", Fraction(10**6)),
    ]

    print(f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs, "
          f"load average before: {os.getloadavg()[0]:.2f}")
    print(f"dpmatrix: {args.n:,} draws/timing; OpenDP: {args.n_opendp:,} draws/timing; "
          f"best of {args.repeat}\n")
    print("| σ² | dpmatrix draws/s | OpenDP draws/s | ratio |")
    print("|---|---:|---:|---:|")
    for label, s2 in cases:
        sample_discrete_gaussian(s2, 1000)  # warm-up
        ours = best_rate(lambda n: sample_discrete_gaussian(s2, n), args.n, args.repeat)
        if have_opendp:
            sample_discrete_gaussian(s2, 100, backend="opendp")
            theirs = best_rate(
                lambda n: sample_discrete_gaussian(s2, n, backend="opendp"),
                args.n_opendp,
                args.repeat,
            )
            print(f"| {label} | {ours:,.0f} | {theirs:,.0f} | {ours / theirs:.0f}× |")
        else:
            print(f"| {label} | {ours:,.0f} | (opendp not installed) | – |")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


def best_time(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def secure_vs_float(args) -> None:  # type: ignore[no-untyped-def]
    """The default (secure) noise against the old float path, measured side by side."""
    print(f"secure default vs floating-point Gaussian (best of {args.repeat}), load average "
          f"{os.getloadavg()[0]:.2f}\n")
    print("| what | secure | float (PCG64) | secure / float time |")
    print("|---|---:|---:|---:|")
    # 1. raw noise on a real-valued query: lattice (snap + exact N_Z) vs x + σ·standard_normal
    n = 1_000_000
    rng = np.random.default_rng()
    C = rng.uniform(0.1, 1.0, (n, 1))
    q = LatticeQuery.of([C])
    x = np.array([1234], dtype=np.int64)
    sb = rational_upper_bound(10.0)
    t_sec = best_time(lambda: lattice_measure(q, x, sb), args.repeat)
    gen = np.random.default_rng()
    t_flt = best_time(lambda: C @ x.astype(float) + 10.0 * gen.standard_normal(n), args.repeat)
    print(f"| {n:,} noisy real answers, σ = 10 (lattice, γ·√m ≤ 1e-6·Δ₂) | {n / t_sec:,.0f}/s | "
          f"{n / t_flt:,.0f}/s | {t_sec / t_flt:.1f}× |")
    # 2. end to end: plan.measure(df) with the default noise vs noise="gaussian_float"
    dom = dm.Domain({f"x{i}": s for i, s in enumerate((8, 6, 10, 5, 12, 4))})
    df = pd.DataFrame({nm: gen.integers(0, s, args.rows) for nm, s in zip(dom.names, dom.sizes)})
    plain = dm.plan(dm.Workload.marginals(dom, 2, upto=True), rho=1.0)
    mixed = dm.plan(dm.Workload.marginals(dom, 2, upto=True, query_types={"x2": "prefix", "x4": "range"}),
                    rho=1.0)
    for label, plan in (("all 2-way marginals (discrete Gaussian)", plain),
                        ("2-way, prefix x2 + range x4 (lattice)", mixed)):
        plan.measure(df)  # warm-up (engine, caches)
        t_sec = best_time(lambda p=plan: p.measure(df), args.repeat)
        t_flt = best_time(lambda p=plan: p.measure(df, noise="gaussian_float"), args.repeat)
        print(f"| measure, {args.rows:,} rows, {label} | {t_sec:.3f} s | {t_flt:.3f} s | "
              f"{t_sec / t_flt:.1f}× |")
    print()


def speed_cases() -> list[tuple[str, str, object]]:
    """(sampler, scale label, parameter) for ``--part speed``."""
    gamma2 = rational_upper_bound(math.sqrt(11.7)) ** 2 * 10**6  # a 3-way residual's γ² = σ̄²·10⁶
    cases: list[tuple[str, str, object]] = [("gaussian", f"σ² = {lab}", Fraction(v))
                                            for lab, v in (("10", 10), ("10³", 10**3), ("10⁶", 10**6), ("10⁹", 10**9))]
    cases.append(("gaussian", f"γ² = {gamma2.numerator}/{gamma2.denominator} (≈{float(gamma2):.3g})", gamma2))
    for lab, t in (("10", 10), ("10⁴", 10**4), ("10⁸", 10**8)):
        cases.append(("laplace", f"t = {lab}", t))
    for lab, t in (("10", 10), ("10⁴", 10**4), ("10⁸", 10**8)):
        cases.append(("laplace_eps", f"ε = 1/{lab}", Fraction(1, t)))
    return cases


def rates_here(n: int, repeat: int) -> list[float]:
    """Draws per CPU second of every :func:`speed_cases` case, in this process."""
    from dpmatrix._mechanisms.laplace import sample_discrete_laplace_eps
    from dpmatrix._mechanisms.samplers import sample_discrete_laplace

    fns = {"gaussian": sample_discrete_gaussian, "laplace": sample_discrete_laplace,
           "laplace_eps": sample_discrete_laplace_eps}  # fmt: skip
    out = []
    for kind, _, param in speed_cases():
        fn = fns[kind]
        fn(param, 10_000)  # warm-up
        best = math.inf
        for _ in range(repeat):
            c = time.process_time()
            x = fn(param, n)
            best = min(best, time.process_time() - c)
            assert len(x) == n
        out.append(n / best)
    return out


def spawn_rates(src: str, n: int, repeat: int) -> list[float]:
    env = dict(os.environ, PYTHONPATH=src, OPENBLAS_NUM_THREADS="1")
    r = subprocess.run([sys.executable, __file__, "--_rates", str(n), str(repeat)], env=env,
                       capture_output=True, text=True, check=False)  # fmt: skip
    if r.returncode != 0:
        raise SystemExit(f"rates under {src} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def speed_vs_before(args) -> None:  # type: ignore[no-untyped-def]
    """Draws per CPU second, this tree vs ``--before``, each in a fresh process, same run."""
    here = str(Path(__file__).resolve().parent.parent / "src")
    print(f"exact samplers, {args.n_speed:,} draws per timing, best of {args.repeat} (CPU time); "
          f"load average {os.getloadavg()[0]:.2f}\n")
    before = spawn_rates(args.before, args.n_speed, args.repeat) if args.before else None
    after = spawn_rates(here, args.n_speed, args.repeat)
    if before:
        print("| sampler | scale | before draws/s | after draws/s | after / before |")
        print("|---|---|---:|---:|---:|")
    else:
        print("| sampler | scale | draws/s |")
        print("|---|---|---:|")
    for i, (kind, label, _) in enumerate(speed_cases()):
        if before:
            print(f"| {kind} | {label} | {before[i]:,.0f} | {after[i]:,.0f} | {after[i] / before[i]:.1f}× |")
        else:
            print(f"| {kind} | {label} | {after[i]:,.0f} |")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}\n")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--_rates":
        print(json.dumps(rates_here(int(sys.argv[2]), int(sys.argv[3]))))
    else:
        main()
