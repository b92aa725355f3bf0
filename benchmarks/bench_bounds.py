"""Lower bounds, classic strategies and LSA (Li & Miklau, *Efficient Batch Query Answering*).

Prints, in one run:
  1. the singular value bound for all <= 3-way marginals of 100 attributes (random sizes 2-30),
     timed side by side with ResidualPlanner's plan (which reaches it: the relative gap is shown);
  2. the explicit bound (eigenvalues of WᵀW) for AllRange(n), n up to 4096;
  3. LSA on AllRange(512) (paper Example 4.1: 33 levels, 4746 queries, 1931 distinct);
  4. a table of total error / singular value bound on the paper's workloads for identity,
     workload, hierarchical (b = 2, 4), Haar, quarter-root, LSA (and LSA generalized /
     separated where the paper uses them).

    python benchmarks/bench_bounds.py            # full
    python benchmarks/bench_bounds.py --quick    # smaller sizes, about a minute

Run with OPENBLAS_NUM_THREADS=1 on a shared machine; timings are wall-clock seconds of this
process.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import dpmatrix as dm
from dpmatrix._linalg.strategies import evaluate, haar, hierarchical, kron, quarter_root
from dpmatrix._solvers.lsa import lsa, lsa_generalized, lsa_separated
from dpmatrix._solvers.svd_bound import svd_bound


def all_range_gram(n: int) -> np.ndarray:
    r = np.arange(n)
    return (np.minimum.outer(r, r) + 1.0) * (n - np.maximum.outer(r, r))


def timed(f, *a, **k):
    t = time.perf_counter()
    out = f(*a, **k)
    return out, time.perf_counter() - t


def part_marginals() -> None:
    print("\n## 1. Bound for all <= 3-way marginals of 100 attributes (sizes 2-30)\n")
    rng = np.random.default_rng(0)
    dom = dm.Domain.from_sizes([int(x) for x in rng.integers(2, 31, size=100)])
    wk, t_wk = timed(dm.Workload.marginals, dom, 3, upto=True)
    b, t_b = timed(svd_bound, wk, pcost=1.0)  # includes the downward closure
    p, t_p = timed(dm.plan, wk, pcost=1.0)  # closure already cached
    print(f"marginals: {len(wk)}, closure {len(wk.closure)}; workload build {t_wk:.2f}s")
    print(f"svd_bound (closure included): {t_b:.2f}s; dm.plan afterwards: {t_p:.2f}s "
          f"(ratio bound/plan time {t_b / t_p:.2f})")
    print(f"bound {b.total:.10e}, ResidualPlanner loss {p.loss():.10e}, "
          f"relative gap {p.loss() / b.total - 1:.2e}")


def part_explicit(sizes) -> None:
    print("\n## 2. Explicit bound for AllRange(n) from WᵀW (eigenvalues)\n")
    print("| n | bound (pcost=1) | seconds |")
    print("|---|---|---|")
    for n in sizes:
        G = all_range_gram(n)
        b, t = timed(svd_bound, G, gram=True, pcost=1.0)
        print(f"| {n} | {b.total:.6e} | {t:.2f} |")


def part_lsa512(n: int) -> None:
    print(f"\n## 3. LSA on AllRange({n}) (paper Example 4.1, n = 512: 33 levels, 4746 queries, 1931 distinct)\n")
    G = all_range_gram(n)
    b = svd_bound(G, gram=True, pcost=1.0).total
    r, t = timed(lsa, G, gram=True)
    print(f"levels {r.n_levels}, queries {r.n_queries}, distinct {r.n_distinct}, "
          f"error/bound {r.error / b:.4f}, {t:.1f}s")
    r2, t2 = timed(lsa, G, gram=True, rule="sweep")
    print(f"(sweep rule: levels {r2.n_levels}, queries {r2.n_queries}, distinct {r2.n_distinct}, "
          f"error/bound {r2.error / b:.4f}, {t2:.1f}s)")


def _random_ranges(n, m, rng, biased=False):
    W = np.zeros((m, n))
    for i in range(m):
        if biased:  # centres far from the middle, probability decaying with the distance
            c = int(np.clip(rng.exponential(n / 8), 0, n - 1))
            c = c if rng.random() < 0.5 else n - 1 - c
            half = int(rng.integers(0, n // 4 + 1))
            a, b = max(0, c - half), min(n - 1, c + half)
        else:
            a, b = sorted(rng.integers(0, n, 2))
        W[i, a:b + 1] = 1.0
    return W


def part_table(quick: bool) -> None:
    print("\n## 4. Total error / singular value bound (pcost = 1, the paper's P(ε,δ) = 1)\n")
    rng = np.random.default_rng(1)
    n1 = 128 if quick else 512
    n2 = 8 if quick else 16
    cases = []
    G = all_range_gram(n1)
    cases.append((f"AllRange({n1})", G, (n1,)))
    G2 = np.kron(all_range_gram(n2), all_range_gram(n2))
    cases.append((f"AllRange({n2},{n2})", G2, (n2, n2)))
    W = _random_ranges(n1, 2000, rng)
    cases.append((f"random ranges n={n1}", W.T @ W, (n1,)))
    W = _random_ranges(n1, 2000, rng, biased=True)
    cases.append((f"biased ranges n={n1}", W.T @ W, (n1,)))
    k = 7 if quick else 9
    P = np.array([[(r >> j) & 1 for j in range(k)] for r in range(2 ** k)], float)
    cases.append((f"AllPredicate({k})", P.T @ P, (k,)))
    cols = ["identity", "workload", "hier2", "hier4", "haar", "quarter_root", "LSA", "LSA-gen"]
    print("| workload | " + " | ".join(cols) + " | LSA s |")
    print("|---" * (len(cols) + 2) + "|")
    for name, Gw, shape in cases:
        b = svd_bound(Gw, gram=True, pcost=1.0).total
        n = Gw.shape[0]
        row = {}
        row["identity"] = evaluate(Gw, np.eye(n), gram=True).total
        row["workload"] = float(np.max(np.diag(Gw))) * n if np.linalg.matrix_rank(Gw) == n else float("nan")
        if len(shape) == 1:
            row["hier2"] = evaluate(Gw, hierarchical(n), gram=True).total
            row["hier4"] = evaluate(Gw, hierarchical(n, 4), gram=True).total
            row["haar"] = evaluate(Gw, haar(n), gram=True).total
        else:
            row["hier2"] = evaluate(Gw, kron(*(hierarchical(s) for s in shape)), gram=True).total
            row["hier4"] = evaluate(Gw, kron(*(hierarchical(s, 4) for s in shape)), gram=True).total
            row["haar"] = evaluate(Gw, kron(*(haar(s) for s in shape)), gram=True).total
        row["quarter_root"] = evaluate(Gw, quarter_root(Gw, gram=True), gram=True).total
        r, t = timed(lsa, Gw, gram=True, shape=shape)
        row["LSA"] = r.error
        if len(shape) == 1 and n >= 27:
            row["LSA-gen"] = lsa_generalized(Gw, gram=True).error
        else:
            row["LSA-gen"] = float("nan")
        print(f"| {name} | " + " | ".join(f"{row[c] / b:.3f}" for c in cols) + f" | {t:.1f} |")
    # workload separation (§4.3.1, Fig. 3c): ranges on each of two one-way marginals
    m = 16 if quick else 32
    W1 = np.array([[1.0 if a <= j <= b_ else 0.0 for j in range(m)] for a in range(m) for b_ in range(a, m)])
    Wfull = np.vstack([np.kron(W1, np.ones((1, m))), np.kron(np.ones((1, m)), W1)])
    Gf = Wfull.T @ Wfull
    b = svd_bound(Gf, gram=True, pcost=1.0).total
    sep, ts = timed(lsa_separated, [W1, W1])
    ident = np.trace(Gf)
    print(f"\nseparation, 1-way ranges on {m}x{m}: separated LSA {sep.total_error / b:.3f} x bound "
          f"({ts:.1f}s), identity {ident / b:.3f} x bound")
    if quick:
        full, tf = timed(lsa, Gf, gram=True, shape=(m, m))
        print(f"  full 2-D LSA on the {m * m} cells: {full.error / b:.3f} x bound ({tf:.1f}s)")


def part_marginals_vs_lsa() -> None:
    print("\n## 5. Plain marginals: ResidualPlanner vs LSA (all <= 2-way marginals of 4x4x4)\n")
    sizes = (4, 4, 4)
    sets = [(), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2)]
    rows = []
    for s in sets:
        q = np.ones((1, 1))
        for i, n in enumerate(sizes):
            q = np.kron(q, np.eye(n) if i in s else np.ones((1, n)))
        rows.append(q)
    W = np.vstack(rows)
    G = W.T @ W
    b = svd_bound(W, pcost=1.0).total
    wk = dm.Workload.marginals(dm.Domain.from_sizes(list(sizes)), 2, upto=True)
    rp = dm.plan(wk, pcost=1.0).loss()
    r, t = timed(lsa, G, gram=True, shape=sizes)
    q = evaluate(G, quarter_root(G, gram=True), gram=True).total
    print(f"ResidualPlanner {rp / b:.6f}, LSA {r.error / b:.3f} ({t:.1f}s), quarter-root {q / b:.3f}, "
          f"identity {np.trace(G) / b:.3f} (x bound)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    part_marginals()
    part_explicit([512, 1024] if args.quick else [512, 1024, 2048, 4096])
    part_lsa512(128 if args.quick else 512)
    part_table(args.quick)
    part_marginals_vs_lsa()


if __name__ == "__main__":
    main()
