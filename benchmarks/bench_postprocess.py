"""Post-processing (private-pgm) against the unbiased tables on the shipped Adult data.

For each ρ, each repetition releases all ≤2-way marginals (``max_var`` plan, fresh noise), then
post-processes the release (``dpmatrix.postprocess``, method ``auto``: the mixture of products
here, the graphical model's junction tree being the whole domain) and draws as many synthetic
records as the estimated total. Reported, averaged over repetitions (mean absolute error per
cell against the true counts):

* ``mae_unbiased`` / ``mae_post`` / ``mae_synth``: the 2-way tables from the unbiased
  reconstruction, the post-processed model and the synthetic records;
* ``mae3_*``: the same on 3-way marginals that were NOT measured (a fixed random sample of them):
  the unbiased reconstruction cannot answer them (outside the closure); the post-processed
  model and the synthetic data extrapolate;
* ``neg_cells``: negative cells of the unbiased 2-way tables; ``fit_s`` / ``synth_s``: seconds;
  ``peak_mb``: peak resident memory of the process so far.

Also times a 30-attribute release of all ≤2-way marginals (synthetic data, sizes 2-10).

    python benchmarks/bench_postprocess.py            # ρ in 0.01, 0.1, 1 x 3 runs + 30 attributes
    python benchmarks/bench_postprocess.py --quick    # ρ in 0.01, 1, one run, no 30-attribute case
"""

from __future__ import annotations

import argparse
import itertools
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import dpmatrix as dm  # noqa: E402
from dpmatrix._postprocess import postprocess  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "src" / "dpmatrix" / "data"


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def true_table(df: pd.DataFrame, dom, names) -> np.ndarray:
    shape = tuple(dom[n].size for n in names)
    idx = np.ravel_multi_index(tuple(df[n].to_numpy() for n in names), shape)
    return np.bincount(idx, minlength=int(np.prod(shape))).reshape(shape).astype(float)


def synth_table(syn: pd.DataFrame, dom, names, scale: float) -> np.ndarray:
    codes = pd.DataFrame({n: syn[n].cat.codes if hasattr(syn[n], "cat") else syn[n] for n in names})
    return true_table(codes, dom, names) * scale


def run(rhos, reps, n3, seed, options=None) -> pd.DataFrame:
    dom = dm.Domain.from_json(DATA / "adult-domain.json")
    df = pd.read_csv(DATA / "adult.csv")
    wk = dm.Workload.marginals(dom, 2, upto=True)
    pairs = [tuple(dom.names_of(s)) for s in wk.sets if len(s) == 2]
    rng = np.random.default_rng(seed)
    triples = [tuple(t) for t in itertools.combinations(dom.names, 3)]
    triples = [triples[i] for i in rng.choice(len(triples), size=n3, replace=False)]
    truth2 = {p: true_table(df, dom, p) for p in pairs}
    truth3 = {t: true_table(df, dom, t) for t in triples}
    rows = []
    for rho in rhos:
        plan = dm.plan(wk, rho=rho, objective="max_var")
        for r in range(reps):
            meas = plan.measure(df, rng=np.random.default_rng([seed, r, int(rho * 1e6)]))
            unb = {p: meas.estimate(p) for p in pairs}
            t0 = time.perf_counter()
            pp = postprocess(meas, **(options or {}))
            fit_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            syn = pp.synthetic(rng=np.random.default_rng([seed, r, 7]))
            synth_s = time.perf_counter() - t0
            scale = pp.total / len(syn)
            rows.append({
                "rho": rho, "rep": r, "method": pp.method,
                "mae_unbiased": np.mean([np.abs(unb[p] - truth2[p]).mean() for p in pairs]),
                "mae_post": np.mean([np.abs(pp.estimate(p) - truth2[p]).mean() for p in pairs]),
                "mae_synth": np.mean([np.abs(synth_table(syn, dom, p, scale) - truth2[p]).mean() for p in pairs]),
                "mae3_post": np.mean([np.abs(pp.estimate(t) - truth3[t]).mean() for t in triples]),
                "mae3_synth": np.mean([np.abs(synth_table(syn, dom, t, scale) - truth3[t]).mean() for t in triples]),
                "neg_cells": int(sum((unb[p] < 0).sum() for p in pairs)),
                "cells": int(sum(unb[p].size for p in pairs)),
                "fit_s": fit_s, "synth_s": synth_s, "peak_mb": peak_mb(),
            })
            print(pd.DataFrame(rows[-1:]).round(2).to_string(index=False, header=r == 0 and rho == rhos[0]), flush=True)
    return pd.DataFrame(rows)


def thirty_attributes(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 11, size=30).tolist()
    dom = dm.Domain.from_sizes(sizes)
    n = 20_000
    # correlated records: each attribute copies the previous one with probability 1/2
    cols = [rng.integers(0, sizes[0], n)]
    for s in sizes[1:]:
        copy = rng.random(n) < 0.5
        cols.append(np.where(copy, cols[-1] % s, rng.integers(0, s, n)))
    df = pd.DataFrame(dict(zip(dom.names, cols)))
    wk = dm.Workload.marginals(dom, 2, upto=True)
    t0 = time.perf_counter()
    meas = dm.plan(wk, rho=0.5).measure(df, rng=rng)
    release_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    pp = postprocess(meas)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    syn = pp.synthetic(rng=rng)
    synth_s = time.perf_counter() - t0
    pairs = [tuple(dom.names_of(s)) for s in wk.sets if len(s) == 2]
    mae_u = np.mean([np.abs(meas.estimate(p) - true_table(df, dom, p)).mean() for p in pairs])
    mae_p = np.mean([np.abs(pp.estimate(p) - true_table(df, dom, p)).mean() for p in pairs])
    return {"attributes": 30, "marginals": len(wk), "method": pp.method, "release_s": release_s,
            "fit_s": fit_s, "synth_s": synth_s, "rows": len(syn),
            "mae_unbiased": mae_u, "mae_post": mae_p, "peak_mb": peak_mb()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="two budgets, one run, no 30-attribute case")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--components", type=int, help="mixture components (default: postprocess's)")
    ap.add_argument("--iters", type=int, help="optimizer iterations (default: postprocess's)")
    args = ap.parse_args()
    options = {k: v for k, v in (("components", args.components), ("iters", args.iters)) if v is not None}
    rhos = [0.01, 1.0] if args.quick else [0.01, 0.03, 0.1, 0.3, 1.0]
    reps = 1 if args.quick else args.reps
    res = run(rhos, reps, n3=10 if args.quick else 30, seed=args.seed, options=options)
    cols = ["mae_unbiased", "mae_post", "mae_synth", "mae3_post", "mae3_synth", "neg_cells", "fit_s", "synth_s"]
    summary = res.groupby("rho")[cols].mean()
    summary["post/unbiased"] = summary["mae_post"] / summary["mae_unbiased"]
    print("\nAdult, all <=2-way marginals, mean over repetitions (MAE per cell, counts):")
    print(summary.round(3).to_string())
    print(f"cells per release: {res['cells'].iloc[0]}, peak memory {res['peak_mb'].max():.0f} MB")
    if not args.quick:
        print("\n30 attributes (sizes 2-10), all <=2-way, 20,000 records, rho = 0.5:")
        print(thirty_attributes(args.seed))


if __name__ == "__main__":
    main()
