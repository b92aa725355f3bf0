"""Throughput of dpmatrix's exact discrete Gaussian sampler vs OpenDP's, side by side.

Usage::

    PYTHONPATH=src python benchmarks/bench_discrete_gaussian.py [--n 2000000] [--n-opendp 20000]

Both samplers draw from N_Z(0, σ²) with randomness from the OS CSPRNG, in the same process and
run. For each σ² the best of ``--repeat`` timings is reported (the machine may be shared; the
1-minute load average is printed so busy runs can be recognized). OpenDP is optional: without it
only dpmatrix's column is filled.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from fractions import Fraction

import numpy as np

from dpmatrix.measure.discrete_gaussian import rational_upper_bound, sample_discrete_gaussian


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
    args = ap.parse_args()

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


if __name__ == "__main__":
    main()
