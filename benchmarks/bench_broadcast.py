"""Reconstruction against its plain-numpy floor (issue 18, part 1).

The floor is written independently of dpmatrix: every table of all <=3-way marginals over ``d``
attributes of size ``n`` as a sum of broadcast pieces — a 3-way table is its own full piece
(the expanded residual of the triple) plus three pair pieces broadcast along the missing axis,
batched over the tables that share their first two attributes; 2-way tables likewise with
per-attribute pieces. The pieces are random (the timing does not depend on their values) and
are made before the clock starts, so the floor pays only for producing the cells.

    python benchmarks/bench_broadcast.py --d 100 --n 10
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
    (:func:`dpmatrix.reconstruct.broadcast.plain_blocks`, the API a release writer consumes)."""
    from dpmatrix.reconstruct.broadcast import plain_blocks

    t0 = time.perf_counter()
    cells = 0
    for blk in plain_blocks(meas):
        cells += blk.estimate.size
    return cells, time.perf_counter() - t0


def main() -> None:
    import pandas as pd

    import dpmatrix as dm

    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=100)
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    dom = dm.Domain.from_sizes([args.n] * args.d)
    plan = dm.plan(dm.Workload.marginals(dom, 3, upto=True), pcost=1.0)
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.integers(0, args.n, size=(1000, args.d)), columns=dom.names)
    meas = plan.measure(df, rng=rng)
    best_f = best_o = float("inf")
    for _ in range(args.repeat):  # interleaved: the same machine load for both
        cf, tf = floor_pass(args.d, args.n)
        co, to = ours_pass(meas)
        best_f, best_o = min(best_f, tf), min(best_o, to)
    print(f"floor {best_f:.3f} s ({cf:,} cells), ours {best_o:.3f} s ({co:,} cells), ours/floor {best_o / best_f:.2f}")


if __name__ == "__main__":
    main()
