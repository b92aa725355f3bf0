"""What honest accounting of the noise actually drawn costs in accuracy.

A release's default noise is the discrete Gaussian (or lattice noise), whose (ε, δ) guarantee is
stated through its ρ-zCDP (Canonne, Kamath, Steinke 2020, Theorem 14 + Corollary 13). An asked
(ε, δ) is therefore converted with that bound (``dm.plan(wk, epsilon=, delta=)``), not with the
continuous Gaussian's exact analytic curve, which would state a larger ε than asked for discrete
noise (issue: ``--epsilon 1 --delta 1e-9`` stated ε = 1.054). This script measures, over the
grid of asked budgets, how much RMSE and max variance that costs against the continuous claim
(``dm.Budget.approx(ε, δ, noise="gaussian")``), on all 2-way marginals of 6 Adult attributes:

* plan level: RMSE and max cell variance of the two plans (for a fixed strategy both scale as
  1/pcost, so the ratio is the ratio of privacy costs);
* release level: the variances of the discrete release actually drawn (σ rounded up to
  rationals) against the continuous plan;
* ρ and μ asks cost nothing (the conversion is the identity for both noises); pure ε is planned
  by the pure planner with discrete Laplace noise (no Gaussian accounting involved).

    python benchmarks/bench_accounting.py          # a few seconds

Results: ``benchmarks/results_accounting.md``.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

import dpmatrix as dm
from dpmatrix._accounting import epsilon_for

DATA = Path(dm.__file__).parent / "data"
ATTRS = ["age", "workclass", "education-num", "marital-status", "race", "sex"]
EPS = (0.1, 1.0, 5.0, 10.0, 50.0)
DELTAS = (1e-5, 1e-9)


def main() -> None:
    sizes = dm.Domain.from_json(DATA / "adult-domain.json")
    dom = dm.Domain.from_dict({a: sizes.sizes[sizes.index(a)] for a in ATTRS})
    wk = dm.Workload.marginals(dom, 2)
    df = pd.read_csv(DATA / "adult.csv", usecols=ATTRS)[ATTRS]
    print(f"workload: all {len(wk)} 2-way marginals of {ATTRS} (Adult, {len(df)} rows)")
    print("| eps | delta | rho discrete | rho continuous | RMSE ratio (plan) | max var ratio (plan) | "
          "max var ratio (discrete release) | stated eps discrete | continuous claim at same plan |")
    print("|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for d in DELTAS:
        for e in EPS:
            honest = dm.plan(wk, epsilon=e, delta=d)  # converted for the secure default noise
            cont = dm.plan(wk, budget=dm.Budget.approx(e, d, noise="gaussian"))  # the continuous claim
            meas = honest.measure(df)  # the default release: discrete Gaussian from the OS CSPRNG
            r_rmse = honest.rmse() / cont.rmse()
            r_max = honest.max_variance() / cont.max_variance()
            r_rel = meas.plan.max_variance() / cont.max_variance()
            ratios.append(r_max)
            stated = epsilon_for(meas.plan.rho, d, meas.noise)
            print(f"| {e:g} | {d:g} | {honest.rho:.6g} | {cont.rho:.6g} | {r_rmse:.4f} | {r_max:.4f} | "
                  f"{r_rel:.4f} | {stated:.6g} | {epsilon_for(honest.rho, d, 'gaussian'):.6g} |")
    print(f"\nmax variance ratio over the (eps, delta) grid: min {min(ratios):.4f}, "
          f"max {max(ratios):.4f}, geometric mean {math.exp(sum(map(math.log, ratios)) / len(ratios)):.4f}")
    print("rho asks {0.01, 0.1, 0.5, 1, 5, 20} and mu asks {0.5, 1, 3}: ratio 1 (no conversion)")


if __name__ == "__main__":
    main()
