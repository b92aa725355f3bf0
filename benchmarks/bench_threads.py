"""BLAS threads under load (issue 17 item 7): planning steps with and without the one-thread
limit on small matrices (``dpmatrix.linalg.threads``), side by side in one run, while background
processes keep every core busy (as on a shared machine). Not a test: prints timings and ratios.

    PYTHONPATH=src python benchmarks/bench_threads.py               # 2 busy processes, 3 rounds
    PYTHONPATH=src python benchmarks/bench_threads.py --load 0      # an idle machine

Run it WITHOUT ``OPENBLAS_NUM_THREADS=1`` (the point is the BLAS's default thread count).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time
from importlib.resources import files

import numpy as np

import dpmatrix as dm
from dpmatrix.linalg.threads import limiting


def _busy(stop) -> None:
    """Background load: multi-threaded matrix products until told to stop."""
    a = np.random.default_rng(0).standard_normal((600, 600))
    while not stop.is_set():
        a = np.tanh(a @ a.T / 600.0)


def _steps():
    adult = dm.Domain.from_json(files("dpmatrix") / "data" / "adult-domain.json")
    wk2 = dm.Workload.marginals(adult, 2, upto=True)
    prefix = dm.Workload.marginals(adult, 2, upto=True, query_types={"age": "prefix", "hours-per-week": "range"})
    synth = dm.Workload.marginals(dm.Domain.from_sizes([10] * 20), 3, upto=True)
    return {
        "Adult all<=2, max_var": lambda: dm.plan(wk2, rho=0.5, objective="max_var"),
        "Adult all<=2, sum_var": lambda: dm.plan(wk2, rho=0.5, objective="sum_var"),
        "Adult prefix/range, sum_var (1-D strategies)": lambda: dm.plan(prefix, rho=0.5, objective="sum_var"),
        "Synth 10^20 all<=3, max_var": lambda: dm.plan(synth, rho=0.5, objective="max_var"),
    }


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--load", type=int, default=2, help="background busy processes (default 2)")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print(f"cores: {os.cpu_count()}; OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}; "
          f"background load: {a.load} process(es)")
    steps = _steps()
    for fn in steps.values():  # warm caches and imports once, unlimited and limited
        with limiting(False):
            fn()
    stop = mp.Event()
    procs = [mp.Process(target=_busy, args=(stop,), daemon=True) for _ in range(a.load)]
    for p in procs:
        p.start()
    try:
        time.sleep(1.0 if procs else 0.0)
        print(f"{'step':48s} {'BLAS default (s)':>17s} {'one thread (s)':>15s} {'ratio':>7s}")
        for name, fn in steps.items():
            free, limited = [], []
            for _ in range(a.rounds):  # interleaved, so both see the same load
                with limiting(False):
                    free.append(_time(fn))
                with limiting(True):
                    limited.append(_time(fn))
            f, l = statistics.median(free), statistics.median(limited)
            print(f"{name:48s} {f:17.3f} {l:15.3f} {f / l:7.2f}x")
    finally:
        stop.set()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()


if __name__ == "__main__":
    main()
