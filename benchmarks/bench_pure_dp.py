"""Pure ε-DP planner (Cormode et al., datacubes): scale, sampler throughput, §5 on Adult.

    PYTHONPATH=src python benchmarks/bench_pure_dp.py scale      # 30 attrs x 10, all <=3-way
    PYTHONPATH=src python benchmarks/bench_pure_dp.py sampler    # discrete Laplace draws/s
    PYTHONPATH=src python benchmarks/bench_pure_dp.py adult --runs 5
    PYTHONPATH=src python benchmarks/bench_pure_dp.py hierarchical   # prefix/range: trees, Haar, cells
    PYTHONPATH=src python benchmarks/bench_pure_dp.py gaussian       # (eps, delta): square-root rule vs RP
    PYTHONPATH=src python benchmarks/bench_pure_dp.py hdmm --hdmm /path/to/hdmm/checkout
    PYTHONPATH=src python benchmarks/bench_pure_dp.py pidentity --hdmm /path/to/hdmm/checkout
    PYTHONPATH=src python benchmarks/bench_pure_dp.py pidentity --sizes prefix:4096 --hdmm-max-n 1024
    PYTHONPATH=src python benchmarks/bench_pure_dp.py pidentity --objective max --sizes prefix:64,range:64 --hdmm PATH
    PYTHONPATH=src python benchmarks/bench_pure_dp.py pidentity-union auto-1d --sizes prefix:1024 --hdmm PATH
    PYTHONPATH=src python benchmarks/bench_pure_dp.py union-split --unions issue,mixed --hdmm PATH

``pidentity`` plans one-attribute prefix / range workloads with ``strategy="pidentity"`` (the
optimized p-Identity family, continuous ``2/ε²`` model and the released discrete Laplace model)
and runs HDMM's ``PIdentity(max(n//16, 1), n)`` (OPT_0's optimized member) best of
``--hdmm-restarts`` seeded restarts side by side. HDMM's total variance is computed from its
strategy matrix explicitly (``2/ε² · sens² · tr(WᵀW (AᵀA)⁺)``): ``hdmm.error.expected_error`` fails
with current numpy (``EkteloMatrix`` refuses ``np.abs``).

``hdmm`` runs HDMM's marginals optimizer (OPT_M: ``hdmm.templates.Marginals(approx=False)``, the
L1 / pure-DP parameterization, from the public dpcomp-org/hdmm code) side by side with
``strategy="optimized"`` on the §5 Adult workloads and a synthetic scale ladder, and prints the
total variance (continuous Laplace ``2/ε²`` model on both sides, ε = 1, HDMM's
``error.expected_error``) and the planning-time ratio. HDMM is a yardstick, not a dependency: the
checkout is found through ``--hdmm PATH`` or the ``HDMM_PATH`` environment variable (its ``src``
folder is put on ``sys.path``); without it the benchmark prints "HDMM not installed".

``adult`` reproduces §5 (Figure 4) on the shipped Adult file: the paper's 8 attributes (named
``education-num`` and ``income>50K`` in adult-domain.json; sizes 9, 16, 7, 15, 6, 5, 2, 2 as in the
paper), workloads Q1, Q1*, Q1a, Q2, Q2*, Q2a, ε in {0.1, 0.25, 0.5, 1}. For every strategy with
uniform and optimal (non-uniform) budgets it prints the expected relative RMSE (exact GLS variance,
before touching data; relative to the marginal's mean cell count) and the measured mean relative
absolute error over ``--runs`` releases with the real sampler (the paper's metric). The two
columns measure different things: for Laplace-like noise E|e| ≈ 0.71 σ, so "meas" ≈ 0.7 "exp".
The file has 48,842 records (the paper used the 32,561-record training split) and the non-binary
attributes are NOT binary-encoded for Fourier (the paper's §4.1 encoding); ``fourier`` here uses
the pairwise-difference residual blocks of dpmatrix.planners._pure.groups. Noise comes from a
seeded byte source for reproducibility (not a secure release).
"""

from __future__ import annotations

import argparse
import itertools
import time
from fractions import Fraction
from math import prod

import numpy as np
import pandas as pd

from dpmatrix._domain import Domain
from dpmatrix._mechanisms.laplace import sample_discrete_laplace_many
from dpmatrix._mechanisms.samplers import sample_discrete_laplace
from dpmatrix._workload import Workload
from dpmatrix.planners._pure import plan_pure, sample_discrete_laplace_eps

ADULT8 = ["workclass", "education-num", "marital-status", "occupation", "relationship", "race",
          "sex", "income>50K"]


def bench_scale() -> None:
    dom = Domain.from_sizes([10] * 30)
    wl = Workload.marginals(dom, 3, upto=True)
    print(f"all <=3-way marginals of 30 attributes of size 10: {len(wl)} marginals")
    for s in ["marginals", "fourier", "optimized", "auto"]:
        t0 = time.perf_counter()
        p = plan_pure(wl, 1.0, strategy=s)
        tv, mv = p.total_variance(), p.max_variance()
        dt = time.perf_counter() - t0
        print(f"  {s:<10s} {dt:7.2f} s  groups {len(p.groups):5d}  total var {tv:.4e}  max var {mv:.4e}")


def bench_sampler(n: int = 2_000_000) -> None:
    print(f"discrete Laplace, {n:,} draws, OS CSPRNG")
    rows = []
    for label, fn in [
        ("existing sample_discrete_laplace(t=2) [scale 2]", lambda: sample_discrete_laplace(2, n)),
        ("sample_discrete_laplace_eps(1/2)", lambda: sample_discrete_laplace_eps(Fraction(1, 2), n)),
        ("sample_discrete_laplace_eps(dyadic 0.4425)", lambda: sample_discrete_laplace_eps(Fraction(927975, 2**21), n)),
        ("sample_discrete_laplace_eps(1/100)", lambda: sample_discrete_laplace_eps(Fraction(1, 100), n)),
        ("sample_discrete_laplace_eps(5)", lambda: sample_discrete_laplace_eps(Fraction(5), n)),
        ("sample_discrete_laplace_many(2000 budgets x 1000)", lambda: sample_discrete_laplace_many(
            [Fraction(1000 + j, 2**22) for j in range(n // 1000)], [1000] * (n // 1000))),
    ]:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        rows.append((label, dt))
    base = rows[0][1]
    for label, dt in rows:
        print(f"  {label:<48s} {n / dt / 1e6:6.2f} M draws/s  (time ratio {dt / base:4.2f})")


def adult_workloads(dom: Domain, seed: int = 0) -> dict[str, Workload]:
    rng = np.random.default_rng(seed)
    names = list(dom.names)
    one = [(a,) for a in names]
    two = list(itertools.combinations(names, 2))
    three = list(itertools.combinations(names, 3))
    fixed = "income>50K"
    half2 = [two[i] for i in sorted(rng.choice(len(two), len(two) // 2, replace=False))]
    half3 = [three[i] for i in sorted(rng.choice(len(three), len(three) // 2, replace=False))]
    return {
        "Q1": Workload(dom, one),
        "Q1*": Workload(dom, one + half2),
        "Q1a": Workload(dom, one + [t for t in two if fixed in t]),
        "Q2": Workload(dom, two),
        "Q2*": Workload(dom, two + half3),
        "Q2a": Workload(dom, two + [t for t in three if fixed in t]),
    }


def bench_adult(runs: int, path: str) -> None:
    full = Domain.from_json(path.replace("adult.csv", "adult-domain.json"))
    dom = Domain({a: full.size(a) for a in ADULT8})
    df = pd.read_csv(path, usecols=ADULT8)[ADULT8]
    rec = df.to_numpy(dtype=np.int64)
    n = rec.shape[0]
    print(f"Adult: {n} records, attributes {dict(zip(ADULT8, dom.sizes))}")
    rng = np.random.default_rng(2026)  # reproducible benchmark noise (NOT a secure release)
    strategies = [("identity", "optimal"), ("marginals", "uniform"), ("marginals", "optimal"),
                  ("fourier", "uniform"), ("fourier", "optimal"), ("clustering", "uniform"),
                  ("clustering", "optimal"), ("optimized", "optimal")]
    for wname, wl in adult_workloads(dom).items():
        sets = [tuple(s) for s in wl.sets]
        truth = {}
        for s in sets:
            ns = tuple(dom.sizes[i] for i in s)
            truth[s] = np.bincount(np.ravel_multi_index(tuple(rec[:, i] for i in s), ns),
                                   minlength=prod(ns)).reshape(ns)
        print(f"\n{wname}: {len(sets)} marginals")
        print(f"  {'strategy':<22s}" + "".join(f"  eps={e:<4g} exp / meas" for e in (0.1, 0.25, 0.5, 1.0))
              + "   plan s")
        for strat, bud in strategies:
            cells = []
            t_plan = 0.0
            for eps in (0.1, 0.25, 0.5, 1.0):
                t0 = time.perf_counter()
                p = plan_pure(wl, eps, strategy=strat, budgeting=bud)
                t_plan += time.perf_counter() - t0
                mean = {s: n / dom.cells(s) for s in sets}
                exp_rel = np.mean([np.sqrt(p.variance(s)) / mean[s] for s in sets])
                meas = []
                for _ in range(runs):
                    est = p.measure(rec, rng=rng)
                    meas.append(np.mean([np.abs(est.estimate(s) - truth[s]).mean() / mean[s] for s in sets]))
                cells.append(f"  {exp_rel:8.4f} / {np.mean(meas):7.4f}")
            label = f"{strat}{'+' if bud == 'optimal' and strat in ('marginals', 'fourier', 'clustering') else ''}"
            print(f"  {label:<22s}" + "".join(cells) + f"   {t_plan:6.2f}", flush=True)
        p = plan_pure(wl, 1.0)
        print(f"  auto picks: {p.strategy} ({p.budgeting})")


def bench_hierarchical() -> None:
    """Prefix / range workloads under pure DP: plain cells vs trees vs Haar (optimal level shares;
    a uniform binary tree for reference), sum and max objectives, and what "auto" keeps (it also
    plans the consistent cell strategies: identity, marginals, fourier, clustering, optimized)."""
    from dpmatrix.planners._pure.hierarchical import plan_hierarchical

    cases = []
    for n in (16, 64, 256):
        for kind in ("prefix", "range"):
            dom = Domain.from_sizes([n])
            cases.append((f"1 attr n={n} {kind}", Workload(dom, [("a0",)], query_types={"a0": kind})))
    dom = Domain.from_sizes([32, 9, 24])
    cases.append(("32x9x24 2-way, prefix/range", Workload(dom, [("a0", "a1"), ("a1", "a2"), ("a0", "a2")],
                                                          query_types={"a0": "prefix", "a2": "range"})))
    for objective, what in (("sum", "total variance"), ("max", "max variance")):
        print(f"\nlevel strategies (pure DP, eps=1, exact discrete Laplace variances): {what} "
              f"(objective {objective})")
        print(f"  {'workload':<28s} {'cells':>11s} {'binary unif':>11s} {'trees':>11s} {'haar':>11s}"
              f" {'auto picks':>22s} {'plan s':>7s}")
        for label, wl in cases:
            val = (lambda p: p.total_variance()) if objective == "sum" else (lambda p: p.max_variance())
            row = {}
            for name, kw in (("cells", dict(strategy="marginals")),
                             ("binary unif", dict(strategy="hierarchical", branching=2, budgeting="uniform")),
                             ("trees", dict(strategy="hierarchical")), ("haar", dict(strategy="haar"))):
                row[name] = val(plan_hierarchical(wl, 1.0, objective=objective, **kw))
            t0 = time.perf_counter()
            best = plan_pure(wl, 1.0, objective=objective)
            dt = time.perf_counter() - t0
            pick = best.strategy + ("" if not hasattr(best, "per_attribute") else
                                    " " + ",".join(t.label for t in best.per_attribute[0]))
            print(f"  {label:<28s}" + "".join(f" {row[k]:11.4e}" for k in row) + f" {pick:>22s} {dt:7.2f}",
                  flush=True)


def bench_gaussian(path: str) -> None:
    """The paper's (eps, delta) variant: its strategies with Gaussian noise and the square-root rule
    vs equal noise, against ResidualPlanner (what dm.plan uses with delta > 0) at the same privacy
    cost (eps = 1, delta = 1e-9, exact analytic Gaussian conversion); weighted total variance."""
    from dpmatrix._privacy import Budget
    from dpmatrix.planners._dispatch import plan as dm_plan
    from dpmatrix.planners._pure.gaussian_variant import plan_datacube_gaussian

    full = Domain.from_json(path.replace("adult.csv", "adult-domain.json"))
    dom = Domain({a: full.size(a) for a in ADULT8})
    pcost = Budget.approx(1.0, 1e-9).pcost
    print(f"\n(eps, delta) = (1, 1e-9), pcost {pcost:.4f}: total variance, square-root rule / equal noise; "
          "ratio = strategy (sqrt) / ResidualPlanner")
    names = ("identity", "marginals", "fourier", "clustering")
    print(f"  {'workload':<6s} {'ResidualPl.':>11s}" + "".join(f" {n + ' sqrt/unif':>24s} {'ratio':>6s}" for n in names))
    for wname, wl in adult_workloads(dom).items():
        rp = dm_plan(wl, pcost=pcost, objective="sum_var").total_variance()
        cells = []
        for n in names:
            sq = plan_datacube_gaussian(wl, pcost=pcost, strategy=n).total_variance()
            un = plan_datacube_gaussian(wl, pcost=pcost, strategy=n, budgeting="uniform").total_variance()
            cells.append(f" {sq:11.4e} /{un:11.4e} {sq / rp:6.2f}")
        print(f"  {wname:<6s} {rp:11.4e}" + "".join(cells), flush=True)


def _import_hdmm(path: str | None):
    """HDMM's ``templates``, ``workload`` and ``error`` modules from a checkout, or None."""
    import importlib
    import os
    import sys

    path = path or os.environ.get("HDMM_PATH")
    if path:
        src = os.path.join(path, "src")
        sys.path.insert(0, src if os.path.isdir(src) else path)
    try:
        return tuple(importlib.import_module(f"hdmm.{m}") for m in ("templates", "workload", "error"))
    except ImportError:
        return None


def _hdmm_workload(hw, dom: Domain, wl: Workload):
    """The workload as HDMM's ``Marginals``: key bit ``d-1-i`` set iff attribute ``i`` is kept;
    row weight ``√w`` so that HDMM's squared error ``Σ ||W_i x̂ - W_i x||²`` equals our
    ``Σ_W w_W n_W Var(cell)``."""
    d = len(dom)
    vect = np.zeros(2**d)
    for s, w in zip(wl.sets, wl.weights):
        vect[sum(2 ** (d - 1 - i) for i in s)] = np.sqrt(w)
    return hw.Marginals(tuple(dom.sizes), vect)


def bench_hdmm(path: str | None, restarts: int, data: str) -> None:
    mods = _import_hdmm(path)
    if mods is None:
        print("HDMM not installed (pass --hdmm PATH to a dpcomp-org/hdmm checkout or set HDMM_PATH)")
        return
    ht, hw, he = mods
    full = Domain.from_json(data.replace("adult.csv", "adult-domain.json"))
    adult = Domain({a: full.size(a) for a in ADULT8})
    cases = [("Adult " + k, adult, wl) for k, wl in adult_workloads(adult).items()]
    for d in (6, 10):
        dom = Domain.from_sizes([10] * d)
        cases.append((f"{d}x10 <=3-way", dom, Workload.marginals(dom, 3, upto=True)))
    eps = 1.0
    print(f"HDMM OPT_M (templates.Marginals, approx=False), best of {restarts} restarts, vs "
          f"strategy='optimized'; total variance at eps={eps} (2/eps^2 model); time ratio = "
          "HDMM (all restarts) / ours")
    print(f"  {'workload':<18s} {'marg':>5s} {'ours':>12s} {'HDMM best':>12s} {'ours/HDMM':>9s}"
          f" {'ours s':>7s} {'HDMM s':>8s} {'t HDMM/ours':>11s}")
    for label, dom, wl in cases:
        t0 = time.perf_counter()
        p = plan_pure(wl, eps, strategy="optimized", variance_model="continuous")
        ours = p.total_variance()
        t_ours = time.perf_counter() - t0
        W = _hdmm_workload(hw, dom, wl)
        t0 = time.perf_counter()
        best = np.inf
        for seed in range(restarts):
            tmpl = ht.Marginals(tuple(dom.sizes), approx=False, seed=seed)
            tmpl.optimize(W)
            best = min(best, he.expected_error(W, tmpl.strategy(), eps=eps))
        t_h = time.perf_counter() - t0
        print(f"  {label:<18s} {len(wl):5d} {ours:12.5e} {best:12.5e} {ours / best:9.4f}"
              f" {t_ours:7.2f} {t_h:8.2f} {t_h / t_ours:11.1f}", flush=True)
    print("  30x10 <=3-way: not run for HDMM - its marginals template has 2^30 parameters, a "
          "3^30-entry sparse matrix and a Python loop over 2^30 keys per gradient")


def _clock():
    """(wall, process CPU) now: on the shared machine the CPU time is the comparable figure."""
    return time.perf_counter(), time.process_time()


def bench_pidentity(path: str | None, restarts: int, sizes: str, hdmm_max_n: int = 1024,
                    objective: str = "sum") -> None:
    """One attribute (``kind:n``) or a product of two equal ones (``kind2:n``): ours =
    ``strategy="pidentity"`` (continuous 2/eps^2 model; the released discrete model beside it);
    HDMM = ``PIdentity(max(n//16, 1), n)`` best of ``restarts`` seeded restarts (skipped above
    ``hdmm_max_n`` cells: one HDMM restart on 4096 cells takes hours here). Times: wall and
    process CPU of both sides, measured in this process one after the other, and the load.
    ``objective="max"``: ours minimizes the largest query variance; beside it the best tree /
    Haar plan for the same objective and the largest query variance of HDMM's strategy (HDMM's
    OPT_0 minimizes the total)."""
    import dataclasses
    import os

    mods = _import_hdmm(path)
    eps = 1.0
    cases = []
    for item in sizes.split(","):
        kind, n = item.split(":")
        cases.append((kind, int(n)))
    stat = "max" if objective == "max" else "total"
    print(f"\neps={eps}, {stat} variance of the workload's queries; ours = strategy='pidentity', objective={objective!r}; "
          f"HDMM = PIdentity(n//16) best of {restarts} restarts (by total variance); load {os.getloadavg()}")
    extra = f" {'tree/Haar':>12s}" if objective == "max" else ""
    print(f"  {'workload':<20s} {'ours cont.':>12s} {'ours discr.':>12s}{extra} {'HDMM best':>12s} {'ours/HDMM':>9s}"
          f" {'ours wall':>9s} {'ours cpu':>8s} {'HDMM wall':>9s} {'HDMM cpu':>8s} {'cpu H/o':>7s}")

    def hdmm_factor(ht, hw, kind, n, seed):
        """HDMM PIdentity on one attribute: (total, max) of sens^2 (AᵀA)⁺ over the queries."""
        W = hw.Prefix(n) if kind == "prefix" else hw.AllRange(n)
        tmpl = ht.PIdentity(max(n // 16, 1), n, seed=seed)
        tmpl.optimize(W)
        a = np.asarray(tmpl.strategy().dense_matrix())
        sens = np.abs(a).sum(axis=0).max()
        cov = np.linalg.pinv(a.T @ a)
        total = sens**2 * np.trace(W.gram().dense_matrix() @ cov)
        if objective != "max":
            return total, np.nan
        wd = np.asarray(W.dense_matrix())
        return total, sens**2 * np.einsum("ij,jk,ik->i", wd, cov, wd).max()

    for kind, n in cases:
        two = kind.endswith("2")
        kind = kind.rstrip("2")
        dom = Domain({"a": n, "b": n}) if two else Domain({"a": n})
        wl = Workload(dom, [("a", "b") if two else ("a",)], query_types={x: kind for x in dom.names})
        load0 = os.getloadavg()[0]
        w0, c0 = _clock()
        p = plan_pure(wl, eps, strategy="pidentity", variance_model="continuous", objective=objective)
        ours = p.max_variance() if objective == "max" else p.total_variance()
        w1, c1 = _clock()
        t_ours, c_ours = w1 - w0, c1 - c0
        q = dataclasses.replace(p, variance_model="discrete")
        disc = q.max_variance() if objective == "max" else q.total_variance()
        lev = ""
        if objective == "max":
            lev_v = min(plan_pure(wl, eps, strategy=s, objective="max", variance_model="continuous").max_variance()
                        for s in ("hierarchical", "haar"))
            lev = f" {lev_v:12.5e}"
        best, t_h, c_h = float("nan"), float("nan"), float("nan")
        if mods is not None and n <= hdmm_max_n:
            ht, hw, _ = mods
            w0, c0 = _clock()
            runs = []
            for seed in range(restarts):
                # Kronecker([PIdentity, PIdentity]) on a Kronecker workload optimizes each factor
                # alone (HDMM's templates.Kronecker.optimize); error = product of the factors'
                if two:
                    f1, f2 = hdmm_factor(ht, hw, kind, n, 2 * seed), hdmm_factor(ht, hw, kind, n, 2 * seed + 1)
                    runs.append((f1[0] * f2[0], f1[1] * f2[1]))
                else:
                    runs.append(hdmm_factor(ht, hw, kind, n, seed))
            tot, mx = min(runs)   # HDMM keeps its best restart by the total
            best = 2 / eps**2 * (mx if objective == "max" else tot)
            w1, c1 = _clock()
            t_h, c_h = w1 - w0, c1 - c0
        label = f"{kind}({n})x{kind}({n})" if two else f"{kind} n={n}"
        print(f"  {label:<20s} {ours:12.5e} {disc:12.5e}{lev} {best:12.5e} {ours / best:9.4f}"
              f" {t_ours:9.2f} {c_ours:8.2f} {t_h:9.2f} {c_h:8.2f} {c_h / c_ours:7.2f}"
              f"   (load {load0:.1f} -> {os.getloadavg()[0]:.1f})", flush=True)


def bench_kron(path: str | None, restarts: int, products: str, hdmm_max_n: int = 256) -> None:
    """Single products of any size (``kind:n*kind:n*...``, ``identity`` = plain cells) planned by
    ``plan_pure(strategy="pidentity")`` (the Kronecker p-Identity plan: factor-wise, no dense
    rows): total variance at ε = 1 in the ``2/ε²`` model ("cont.") and the released discrete
    model, plan and measurement wall and process CPU (measurement of a seeded synthetic table of
    100,000 records, NOT private: timing only). HDMM = its ``Kronecker`` of ``PIdentity(n//16)``
    factors (plain ``Identity`` for cells), which optimizes each factor alone, so its error is the
    product of each factor's best of ``restarts`` (computed explicitly from the factor's strategy;
    skipped when a factor has more than ``hdmm_max_n`` cells)."""
    import dataclasses
    import os
    import warnings

    mods = _import_hdmm(path)
    eps = 1.0
    print(f"\nKronecker p-Identity, eps={eps}, total variance; HDMM = product of each factor's best of {restarts} "
          f"PIdentity restarts; load {os.getloadavg()}")
    print(f"  {'workload':<34s} {'ours cont.':>12s} {'ours discr.':>12s} {'HDMM best':>12s} {'ours/HDMM':>9s}"
          f" {'plan wall':>9s} {'plan cpu':>8s} {'meas wall':>9s} {'meas cpu':>8s} {'HDMM wall':>9s} {'HDMM cpu':>8s}")
    for item in products.split(","):
        factors = [(k, int(n)) for k, n in (f.split(":") for f in item.split("*"))]
        names = [f"a{i}" for i in range(len(factors))]
        dom = Domain({a: n for a, (_, n) in zip(names, factors)})
        wl = Workload(dom, [tuple(names)], query_types={a: k for a, (k, _) in zip(names, factors) if k != "identity"})
        load0 = os.getloadavg()[0]
        w0, c0 = _clock()
        p = plan_pure(wl, eps, strategy="pidentity", variance_model="continuous")
        ours = p.total_variance()
        w1, c1 = _clock()
        disc = dataclasses.replace(p, variance_model="discrete").total_variance()
        gen = np.random.default_rng(0)
        rec = np.column_stack([gen.integers(0, n, 100_000) for _, n in factors])
        w2, c2 = _clock()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p.measure(rec, rng=gen)
        w3, c3 = _clock()
        best, t_h, c_h = float("nan"), float("nan"), float("nan")
        if mods is not None and max(n for k, n in factors if k != "identity") <= hdmm_max_n:
            ht, hw, _ = mods
            w4, c4 = _clock()
            value = 1.0
            for k, n in factors:
                if k == "identity":
                    value *= n  # tr(I (IᵀI)⁻¹)
                    continue
                W = hw.Prefix(n) if k == "prefix" else hw.AllRange(n)
                runs = []
                for seed in range(restarts):
                    tmpl = ht.PIdentity(max(n // 16, 1), n, seed=seed)
                    tmpl.optimize(W)
                    a = np.asarray(tmpl.strategy().dense_matrix())
                    sens = np.abs(a).sum(axis=0).max()
                    runs.append(sens**2 * np.trace(W.gram().dense_matrix() @ np.linalg.pinv(a.T @ a)))
                value *= min(runs)
            best = 2 / eps**2 * value
            w5, c5 = _clock()
            t_h, c_h = w5 - w4, c5 - c4
        label = "x".join(f"{k}({n})" for k, n in factors)
        print(f"  {label:<34s} {ours:12.5e} {disc:12.5e} {best:12.5e} {ours / best:9.4f} {w1 - w0:9.2f} {c1 - c0:8.2f}"
              f" {w3 - w2:9.2f} {c3 - c2:8.2f} {t_h:9.2f} {c_h:8.2f}   (load {load0:.1f} -> {os.getloadavg()[0]:.1f})",
              flush=True)


def bench_auto_1d(sizes: str) -> None:
    """``strategy="auto"`` on one attribute (every candidate incl. the level search of trees):
    wall and CPU time, what it picked."""
    import os

    for item in sizes.split(","):
        kind, n = item.split(":")
        wl = Workload(Domain({"a": int(n)}), [("a",)], query_types={"a": kind})
        w0, c0 = _clock()
        p = plan_pure(wl, 1.0, variance_model="continuous")
        w1, c1 = _clock()
        print(f"  auto {kind} n={n}: picked {p.strategy}, total {p.total_variance():.5e}, "
              f"wall {w1 - w0:.2f} s, cpu {c1 - c0:.2f} s, load {os.getloadavg()[0]:.1f}", flush=True)


def bench_pidentity_union(path: str | None, restarts: int) -> None:
    """2-way marginals of 16 (range) x 32 (range) x 8 (cells): a union of p-Identity products
    (plan_pidentity_union: per-product factors, cube-root split, one GLS) vs HDMM's union of
    KronPIdentity products. HDMM side, generous to it: each range factor is HDMM's best
    PIdentity over ``restarts`` seeds (the best factors combined, then one union), HDMM's cube-root
    union weights, and the explicit GLS error 2/eps^2 sens^2 tr(WᵀW (AᵀA)⁺) on the 4096 cells."""
    from dpmatrix._linalg.marginal_map import marginal_map
    from dpmatrix.planners._pure.pidentity_union import plan_pidentity_union

    eps = 1.0
    dom = Domain({"a": 16, "b": 32, "c": 8})
    wl = Workload(dom, [("a", "b"), ("a", "c"), ("b", "c")], query_types={"a": "range", "b": "range"})
    t0, c0 = _clock()
    p = plan_pidentity_union(wl, eps, variance_model="continuous")
    ours = p.total_variance()
    t_ours, c_ours = time.perf_counter() - t0, time.process_time() - c0
    import dataclasses
    disc = dataclasses.replace(p, variance_model="discrete").total_variance()
    t_auto0 = time.perf_counter()
    auto = plan_pure(wl, eps, variance_model="continuous")
    t_auto = time.perf_counter() - t_auto0
    best, t_h, c_h = float("nan"), float("nan"), float("nan")
    mods = _import_hdmm(path)
    if mods is not None:
        ht, hw, _ = mods
        t0, c0 = _clock()
        fac = {}
        for name, n in (("a", 16), ("b", 32)):
            W = hw.AllRange(n)
            g = W.gram().dense_matrix()
            cand = []
            for seed in range(restarts):
                tmpl = ht.PIdentity(max(n // 16, 1), n, seed=seed)
                tmpl.optimize(W)
                a = np.asarray(tmpl.strategy().dense_matrix())
                cand.append((np.abs(a).sum(0).max() ** 2 * np.trace(g @ np.linalg.pinv(a.T @ a)), a, g))
            fac[name] = min(cand, key=lambda t: t[0])
        fac["c"] = (8.0, np.eye(8), np.eye(8))
        losses = [fac[x][0] * fac[y][0] for x, y in (dom.names_of(s) for s in wl.sets)]
        wts = (2 * np.array(losses)) ** (1 / 3)
        wts /= wts.sum()
        q = {"a": np.asarray(wl.query_matrix(0, "range"), float),
             "b": np.asarray(wl.query_matrix(1, "range"), float), "c": np.eye(8)}
        blocks, wblocks = [], []
        for s, wt in zip(wl.sets, wts):
            x, y = dom.names_of(s)
            lift = marginal_map(dom.sizes, tuple(s))
            blocks.append(wt * np.kron(fac[x][1], fac[y][1]) @ lift)
            wblocks.append(np.kron(q[x], q[y]) @ lift)
        A = np.vstack(blocks)
        sens = np.abs(A).sum(0).max()
        WtW = sum(wb.T @ wb for wb in wblocks)
        best = 2 / eps**2 * sens**2 * np.trace(WtW @ np.linalg.pinv(A.T @ A, hermitian=True))
        t_h, c_h = time.perf_counter() - t0, time.process_time() - c0
    print(f"\n2-way marginals of 16 (range) x 32 (range) x 8 (cells), eps={eps}, total variance")
    print(f"  ours (pidentity-union) cont. {ours:.7e}  discr. {disc:.7e}  plan {t_ours:.2f} s wall, {c_ours:.2f} s cpu")
    print(f"  auto picks {auto.strategy}: {auto.total_variance():.7e}  plan {t_auto:.2f} s")
    print(f"  HDMM union of KronPIdentity (best factors of {restarts} seeds): {best:.7e}  {t_h:.2f} s wall, {c_h:.2f} s cpu")
    print(f"  ours/HDMM {ours / best:.6f}   time ratio HDMM/ours wall {t_h / t_ours:.2f}, cpu {c_h / c_ours:.2f}", flush=True)


UNION_CASES = {
    # the issue's union: 2-way marginals of 16 (range) x 32 (range) x 8 (cells)
    "issue": ({"a": 16, "b": 32, "c": 8}, [("a", "b"), ("a", "c"), ("b", "c")], {"a": "range", "b": "range"}),
    # all 2-way marginals of 3 range attributes of 16 (symmetric: the equal split is stationary)
    "range3x16": ({"a": 16, "b": 16, "c": 16}, [("a", "b"), ("a", "c"), ("b", "c")],
                  {"a": "range", "b": "range", "c": "range"}),
    # prefixes of a 64-cell attribute, its cross table with 16 cells, and the cells alone
    "prefix-x-cells": ({"a": 64, "b": 16}, [("a",), ("a", "b"), ("b",)], {"a": "prefix"}),
    # large: all 2-way marginals of 3 range attributes of 64 (262,144 cells; factor-wise plan only)
    "range3x64": ({"a": 64, "b": 64, "c": 64}, [("a", "b"), ("a", "c"), ("b", "c")],
                  {"a": "range", "b": "range", "c": "range"}),
    # mixed: range 24, prefix 12, cells 6; two 2-way and two 1-way marginals
    "mixed": ({"a": 24, "b": 12, "c": 6}, [("a", "b"), ("b", "c"), ("a",), ("c",)],
              {"a": "range", "b": "prefix"}),
}


def _hdmm_union(mods, case, restarts: int, eps: float, objective: str) -> tuple[float, float, float]:
    """HDMM's union of KronPIdentity products, made generous (as in bench_pidentity_union): each
    prefix / range factor is HDMM's best PIdentity(max(n//16, 1), n) over ``restarts`` seeds (by
    its total), cells keep I, the products get HDMM's cube-root union weights, and the GLS error
    of the stacked strategy is computed explicitly on the union's cells: (total, max, cpu s)."""
    from functools import reduce

    from dpmatrix._linalg.marginal_map import marginal_map
    from dpmatrix.planners._pure.pidentity_plan import _kron2_diagonal

    ht, hw, _ = mods
    sizes, sets, types = case
    names = list(sizes)
    c0 = time.process_time()
    fac = {}
    for x in names:
        n, kind = sizes[x], types.get(x, "identity")
        if kind == "identity":
            fac[x] = (float(n), np.eye(n), np.eye(n))
            continue
        W = hw.Prefix(n) if kind == "prefix" else hw.AllRange(n)
        g = W.gram().dense_matrix()
        cand = []
        for seed in range(restarts):
            tmpl = ht.PIdentity(max(n // 16, 1), n, seed=seed)
            tmpl.optimize(W)
            a = np.asarray(tmpl.strategy().dense_matrix())
            a = a / np.abs(a).sum(axis=0).max()
            cand.append((float(np.trace(g @ np.linalg.pinv(a.T @ a))), a, np.asarray(W.dense_matrix(), float)))
        fac[x] = min(cand, key=lambda t: t[0])
    shape = tuple(sizes.values())
    losses = [prod(fac[x][0] for x in s) for s in sets]
    wts = (2 * np.array(losses)) ** (1 / 3)
    wts /= wts.sum()
    blocks = [wt * reduce(np.kron, [fac[x][1] for x in s]) @ marginal_map(shape, tuple(names.index(x) for x in s))
              for s, wt in zip(sets, wts)]
    a = np.vstack(blocks)
    a /= np.abs(a).sum(axis=0).max()
    cov = 2 / eps**2 * np.linalg.pinv(a.T @ a, hermitian=True)
    total, top = 0.0, 0.0
    for s in sets:
        lift = marginal_map(shape, tuple(names.index(x) for x in s))
        c = lift @ cov @ lift.T
        qs = [fac[x][2] for x in s]
        if len(s) == 2:
            v = _kron2_diagonal(qs, c, tuple(sizes[x] for x in s))
        else:
            v = np.einsum("ij,jk,ik->i", qs[0], c, qs[0])
        total, top = total + float(v.sum()), max(top, float(v.max()))
    return total, top, time.process_time() - c0


def bench_union_split(path: str | None, restarts: int, cases: str) -> None:
    """Unions of p-Identity products: the budget split optimized against the exact joint GLS
    (``plan_pidentity_union``, default) vs its start (``joint=False``: the cube-root rule for the
    total, each product's own largest variance equalized for the max), both objectives; total /
    max variance in the continuous 2/eps^2 model (the search's) and the released discrete model;
    plan time (wall, process CPU; the dense GLS variance evaluation is timed apart). HDMM's union
    of KronPIdentity (generous: best factors of ``restarts`` seeds, cube-root weights) where a
    checkout is found."""
    import dataclasses
    import os

    from dpmatrix.planners._pure.pidentity_union import plan_pidentity_union

    eps = 1.0
    mods = _import_hdmm(path)
    for name in cases.split(","):
        sizes, sets, types = UNION_CASES[name]
        wl = Workload(Domain(sizes), sets, query_types=types)
        hd = _hdmm_union(mods, UNION_CASES[name], restarts, eps, "sum") if mods is not None else None
        print(f"\nunion {name}: {sizes} {sets} {types}, eps={eps}, load {os.getloadavg()[0]:.1f}", flush=True)
        print(f"  {'objective':<9s} {'split':<6s} {'cont.':>13s} {'discr.':>13s} {'joint/start':>11s} {'/HDMM':>9s}"
              f" {'plan wall':>9s} {'plan cpu':>8s} {'var cpu':>7s}  budgets", flush=True)
        for objective in ("sum", "max"):
            vals = {}
            for joint in (False, True):
                w0, c0 = _clock()
                p = plan_pidentity_union(wl, eps, variance_model="continuous", objective=objective, joint=joint)
                w1, c1 = _clock()
                stat = (lambda q: q.total_variance()) if objective == "sum" else (lambda q: q.max_variance())
                cont = stat(p)
                disc = stat(dataclasses.replace(p, variance_model="discrete"))
                c2 = time.process_time()
                vals[joint] = cont
                ratio = cont / vals[False] if joint else 1.0
                ref = float("nan") if hd is None else hd[0 if objective == "sum" else 1]
                budgets = ",".join(f"{r['epsilon']:.4f}" for r in p.comparison[:-1])
                print(f"  {objective:<9s} {'joint' if joint else 'start':<6s} {cont:13.7e} {disc:13.7e} {ratio:11.6f}"
                      f" {cont / ref:9.6f} {w1 - w0:9.2f} {c1 - c0:8.2f} {c2 - c1:7.2f}  {budgets}", flush=True)
        if hd is not None:
            print(f"  HDMM union of KronPIdentity (best factors of {restarts} seeds, cube-root weights): "
                  f"total {hd[0]:.7e}, max {hd[1]:.7e}, cpu {hd[2]:.2f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", nargs="*", default=["scale", "sampler", "adult"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--data", default="/work/shared/data/adult.csv")
    ap.add_argument("--hdmm", default=None, help="path to a dpcomp-org/hdmm checkout (or HDMM_PATH)")
    ap.add_argument("--hdmm-restarts", type=int, default=10)
    ap.add_argument("--sizes", default="prefix:256,prefix:1024,range:64,range:256,prefix2:64,range2:32")
    ap.add_argument("--hdmm-max-n", type=int, default=1024, help="largest attribute HDMM is run on")
    ap.add_argument("--objective", default="sum", choices=["sum", "max"])
    ap.add_argument("--unions", default=",".join(UNION_CASES), help="union-split cases: " + ",".join(UNION_CASES))
    ap.add_argument("--products", default="prefix:64*prefix:64,range:32*range:32,prefix:256*prefix:256,"
                    "prefix:1024*prefix:1024,range:256*range:64*identity:10")
    a = ap.parse_args()
    if "scale" in a.what:
        bench_scale()
    if "sampler" in a.what:
        bench_sampler()
    if "adult" in a.what:
        bench_adult(a.runs, a.data)
    if "hierarchical" in a.what:
        bench_hierarchical()
    if "gaussian" in a.what:
        bench_gaussian(a.data)
    if "hdmm" in a.what:
        bench_hdmm(a.hdmm, a.hdmm_restarts, a.data)
    if "pidentity" in a.what:
        bench_pidentity(a.hdmm, a.hdmm_restarts, a.sizes, a.hdmm_max_n, a.objective)
    if "kron" in a.what:
        bench_kron(a.hdmm, a.hdmm_restarts, a.products, min(a.hdmm_max_n, 256))
    if "auto-1d" in a.what:
        bench_auto_1d(a.sizes)
    if "pidentity-union" in a.what:
        bench_pidentity_union(a.hdmm, a.hdmm_restarts)
    if "union-split" in a.what:
        bench_union_split(a.hdmm, a.hdmm_restarts, a.unions)


if __name__ == "__main__":
    main()
