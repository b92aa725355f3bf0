"""BLAS threads under load (issue 17 item 7): planning steps with and without the one-thread
limit on small matrices (``dpmatrix._linalg.threads``), side by side in one run, while background
processes keep every core busy (as on a shared machine). Not a test: prints timings and ratios.

Each mode runs in its own worker process (warm-up, then timed repeats), the two modes
alternating round by round under the same load: toggling the limit inside one process would
also time OpenBLAS rebuilding its thread pool, which a real process does not do per step.

    PYTHONPATH=src python benchmarks/bench_threads.py               # 2 busy processes, 3 rounds
    PYTHONPATH=src python benchmarks/bench_threads.py --load 0      # an idle machine

Run it WITHOUT ``OPENBLAS_NUM_THREADS=1`` (the point is the BLAS's default thread count).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from importlib.resources import files

import numpy as np

import dpmatrix as dm
from dpmatrix._linalg.threads import limiting


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


def worker(mode: str, repeats: int) -> None:
    """Time every step in this process with the limit on or off; print JSON timings."""
    steps = _steps()
    out = {}
    with limiting(mode == "on"):
        for name, fn in steps.items():
            fn()  # warm-up: imports, caches
            out[name] = min(_time(fn) for _ in range(repeats))
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--load", type=int, default=2, help="background busy processes (default 2)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats per worker (best kept)")
    ap.add_argument("--worker", choices=["on", "off"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a.worker, a.repeats)
        return
    print(f"cores: {os.cpu_count()}; OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}; "
          f"background load: {a.load} process(es); {a.rounds} rounds x {a.repeats} repeats, medians of the best")
    stop = mp.Event()
    procs = [mp.Process(target=_busy, args=(stop,), daemon=True) for _ in range(a.load)]
    for p in procs:
        p.start()
    times: dict[str, dict[str, list[float]]] = {"off": {}, "on": {}}
    try:
        for _ in range(a.rounds):  # alternating, so both modes see the same load
            for mode in ("off", "on"):
                r = subprocess.run([sys.executable, __file__, "--worker", mode, "--repeats", str(a.repeats)],
                                   capture_output=True, text=True, check=True)
                for name, t in json.loads(r.stdout.strip().splitlines()[-1]).items():
                    times[mode].setdefault(name, []).append(t)
    finally:
        stop.set()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
    print(f"{'step':48s} {'BLAS default (s)':>17s} {'one thread (s)':>15s} {'default/limited':>16s}")
    for name in times["off"]:
        f, l = statistics.median(times["off"][name]), statistics.median(times["on"][name])
        print(f"{name:48s} {f:17.4f} {l:15.4f} {f / l:15.2f}x")


if __name__ == "__main__":
    main()
