"""Reconstruction against its plain-numpy floor (issue 18, part 1).

The floor is written independently of dpmatrix: every table of all <=3-way marginals over ``d``
attributes of size ``n`` as a sum of broadcast pieces — a 3-way table is its own full piece
(the expanded residual of the triple) plus three pair pieces broadcast along the missing axis,
batched over the tables that share their first two attributes; 2-way tables likewise with
per-attribute pieces. The pieces are random (the timing does not depend on their values) and
are made before the clock starts, so the floor pays only for producing the cells.

    python benchmarks/bench_broadcast.py --d 100 --n 10

Both ways of making the three-way tables are timed: numpy's broadcast passes, and the compiled
kernel of :mod:`dpmatrix._reconstruct.fused` (numba), with the
one-off cost of the kernel in a fresh process.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def floor_pass(d: int, n: int, seed: int = 0) -> tuple[int, float]:
    """(cells produced, seconds) of the floor for all <=3-way marginals of Synth-n^d."""
    rng = np.random.default_rng(seed)
    tops3 = rng.standard_normal((max(d - 2, 1), n, n, n))  # a table's own full piece
    tops2 = rng.standard_normal((max(d - 1, 1), n, n))
    pair = rng.standard_normal((d, d, n, n))  # per attribute pair
    single = rng.standard_normal((d, n))
    t0 = time.perf_counter()
    cells = 1  # the total
    out1 = single + 1.0  # the 1-way tables: own piece + the total
    cells += out1.size
    for a in range(d):
        bs = np.arange(a + 1, d)
        if bs.size:
            out2 = tops2[: bs.size] + single[a][None, :, None]
            out2 += single[bs][:, None, :]
            cells += out2.size
        for b in range(a + 1, d):
            cs = np.arange(b + 1, d)
            if not cs.size:
                continue
            out = np.empty((cs.size, n, n, n))
            np.add(tops3[: cs.size], pair[a, b][None, :, :, None], out=out)
            out += pair[a, cs][:, :, None, :]
            out += pair[b, cs][:, None, :, :]
            cells += out.size
    return cells, time.perf_counter() - t0


def ours_pass(meas) -> tuple[int, float]:
    """(cells, seconds) of dpmatrix's streamed reconstruction as arrays: the estimates and
    variances of every workload marginal, in blocks written into one reused buffer
    (:func:`dpmatrix._reconstruct.broadcast.plain_blocks`, the API a release writer consumes)."""
    from dpmatrix._reconstruct.broadcast import plain_blocks

    t0 = time.perf_counter()
    cells = 0
    for blk in plain_blocks(meas):
        cells += blk.estimate.size
    return cells, time.perf_counter() - t0


def main() -> None:
    import subprocess
    import sys

    import pandas as pd

    import dpmatrix as dm
    from dpmatrix._reconstruct import fused

    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=100)
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    dom = dm.Domain.from_sizes([args.n] * args.d)
    wk = dm.Workload.marginals(dom, 3, upto=True)
    plan = dm.plan(wk, pcost=1.0)
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.integers(0, args.n, size=(1000, args.d)), columns=dom.names)
    meas = plan.measure(df, rng=rng)
    # the two ways of making three-way tables, on the same measurements (decided per workload:
    # switched here by resetting the decision)
    paths = {"numpy": False}
    if fused.available():
        paths["compiled"] = True

    def run(compiled: bool) -> tuple[int, float]:
        fused._DECIDED[wk] = compiled
        return ours_pass(meas)

    best_f = float("inf")
    best = dict.fromkeys(paths, float("inf"))
    for _ in range(args.repeat):  # interleaved: the same machine load for all
        cf, tf = floor_pass(args.d, args.n)
        best_f = min(best_f, tf)
        for name, compiled in paths.items():
            co, to = run(compiled)
            best[name] = min(best[name], to)
    print(f"floor {best_f:.3f} s ({cf:,} cells)")
    for name in paths:
        print(f"ours, {name:8s} {best[name]:.3f} s ({co:,} cells), ours/floor {best[name] / best_f:.2f}")
    if "compiled" in paths:
        # what a fresh process pays once for the kernel: numba's import and the cached kernel
        code = ("import time; t = time.perf_counter(); import numpy as np; from dpmatrix._reconstruct import fused; "
                "n = 3; fused.tables3(np.zeros((1, 2, 2, 2)), [np.zeros((1, 1, n, n)), np.zeros((1, n, 1, n)), "
                "np.zeros((1, n, n, 1))], np.zeros(7), np.empty((1, n, n, n))); print(time.perf_counter() - t)")
        once = min(float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                        check=True).stdout) for _ in range(3))  # fmt: skip
        print(f"compiled kernel, once per process (numba import + cached kernel load): {once:.2f} s; used for "
              f"workloads with >= {fused.MIN_CELLS:,} three-way cells (this one: {fused.three_way_cells(wk):,})")


if __name__ == "__main__":
    main()
