"""Optimized p-Identity strategies (HDMM's OPT_0 family) for one attribute under pure ε-DP.

Expected numbers come from explicit dense matrices built here (prefix / range query matrices
written out with numpy loops, ``np.linalg.inv`` / ``pinv``), finite differences, the explicit
privacy definition (max column L1 norm of the budget-scaled strategy, and the L1 change of every
released integer map between neighbouring tables), and simulation with the real sampler."""

import itertools
import subprocess
import sys
import textwrap
from fractions import Fraction

import numpy as np
import pure_oracle as po
import pytest
import union_oracle as uo

from dpmatrix._domain import Domain
from dpmatrix._measure.discrete import InsecureRandomnessWarning
from dpmatrix._solvers.pidentity import (
    DenseGram,
    DenseQueries,
    IntervalQueries,
    PrefixGram,
    RangeGram,
    WeightedGram,
    optimize_pidentity,
    pidentity_loss,
    pidentity_loss_grad,
    query_variances,
    tree_theta,
)
from dpmatrix._workload import Workload
from dpmatrix.errors import PlanError
from dpmatrix.planners._pure import plan_pure
from dpmatrix.planners._pure.levels import best_levels
from dpmatrix.planners._pure.pidentity_plan import (
    interval_bounds,
    plan_pidentity,
    quantized_strategy,
)


def prefixes(n):
    w = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1):
            w[i, j] = 1
    return w


def ranges(n):
    rows = []
    for a in range(n):
        for b in range(a, n):
            r = np.zeros(n)
            r[a:b + 1] = 1
            rows.append(r)
    return np.array(rows)


def explicit_loss(theta, w):
    n = theta.shape[1]
    a = np.vstack([np.eye(n), theta])
    a = a / np.abs(a).sum(axis=0)
    assert np.allclose(np.abs(a).sum(axis=0), 1)
    return float(np.trace(w.T @ w @ np.linalg.inv(a.T @ a)))


@pytest.mark.parametrize("n", [1, 2, 7, 12])
def test_closed_form_grams(n):
    for gram, w in ((PrefixGram(n), prefixes(n)), (RangeGram(n), ranges(n))):
        g = w.T @ w
        np.testing.assert_allclose(gram.dense(), g)
        np.testing.assert_allclose(gram.diag(), np.diag(g))
        x = np.random.default_rng(n).normal(size=(n, 3))
        np.testing.assert_allclose(gram.matmul(x), g @ x, rtol=1e-12, atol=1e-9)


def test_loss_and_gradient_against_explicit_matrices():
    rng = np.random.default_rng(0)
    n, p = 9, 3
    for gram, w in ((PrefixGram(n), prefixes(n)), (RangeGram(n), ranges(n)), (DenseGram(np.eye(n) * 2), np.eye(n) * 2 ** 0.5)):
        th = rng.random((p, n))
        loss, grad = pidentity_loss_grad(th, gram)
        assert loss == pytest.approx(explicit_loss(th, w), rel=1e-10)
        h = 1e-6
        num = np.zeros_like(th)
        for i, j in itertools.product(range(p), range(n)):
            up, dn = th.copy(), th.copy()
            up[i, j] += h
            dn[i, j] -= h
            num[i, j] = (explicit_loss(up, w) - explicit_loss(dn, w)) / (2 * h)
        np.testing.assert_allclose(grad, num, rtol=1e-5, atol=1e-6)
    # p = 0 is the plain cells: tr(WᵀW)
    assert pidentity_loss(np.zeros((0, 5)), PrefixGram(5)) == pytest.approx(15.0)


def test_tree_in_the_family_is_the_tree_with_equal_shares():
    """A b-ary tree with equal level shares (leaves = cells) is [I; Θ]D exactly."""
    n, b = 9, 3
    th = tree_theta(n, b)
    levels = [np.ones((1, 9)), np.kron(np.eye(3), np.ones((1, 3))), np.eye(9)]
    a = np.vstack(levels) / 3.0
    w = prefixes(n)
    expect = float(np.trace(w.T @ w @ np.linalg.inv(a.T @ a)))
    assert pidentity_loss(th, PrefixGram(n)) == pytest.approx(expect, rel=1e-12)


def test_optimizer_beats_trees_and_is_accurate():
    """The optimum is evaluated without cancellation (explicit pinv agrees) and is no worse than
    the best tree with optimized shares (the existing level search) nor the cells."""
    n = 32
    for gram, w, kind in ((PrefixGram(n), prefixes(n), "prefix"), (RangeGram(n), ranges(n), "range")):
        r = optimize_pidentity(gram, random_starts=1)
        assert r.loss == pytest.approx(explicit_loss(r.theta, w), rel=1e-9)
        tree = best_levels(w, kinds=("tree", "cells"))
        assert r.loss <= tree.factor * (1 + 1e-9)
        assert r.loss <= np.trace(w.T @ w)


def test_seeded_and_deterministic():
    a = optimize_pidentity(RangeGram(24), random_starts=2, seed=5)
    b = optimize_pidentity(RangeGram(24), random_starts=2, seed=5)
    np.testing.assert_array_equal(a.theta, b.theta)
    assert a.starts == b.starts


def test_interval_bounds_match_query_matrices():
    wl = Workload(Domain({"a": 6}), [("a",)], query_types={"a": "range"})
    for kind in ("prefix", "range", "identity"):
        q = np.asarray(wl.query_matrix(0, kind))
        a, b = interval_bounds(kind, 6)
        expect = np.zeros_like(q)
        for r, (lo, hi) in enumerate(zip(a, b)):
            expect[r, lo:hi + 1] = 1
        np.testing.assert_array_equal(q, expect)


@pytest.mark.parametrize("kind,n,eps", [("prefix", 12, 1.0), ("range", 10, 0.3), ("prefix", 5, 2.5)])
@pytest.mark.parametrize("model", ["discrete", "continuous"])
def test_plan_privacy_and_variances_explicit(kind, n, eps, model):
    wl = Workload(Domain({"a": n}), [("a",)], query_types={"a": kind})
    p = plan_pidentity(wl, eps, variance_model=model, random_starts=1)
    s = p.strategy_matrix.astype(np.int64)
    assert np.array_equal(s[:n], np.eye(n, dtype=np.int64)) and (s[n:] >= 0).all()
    e = [float(b) for b in p.budgets]
    # privacy: explicit max column L1 norm of the budget-scaled strategy, in exact arithmetic too
    assert po.privacy([s[r:r + 1] for r in range(s.shape[0])], e) <= eps * (1 + 1e-15)
    exact = max(sum(abs(int(s[r, j])) * p.budgets[r] for r in range(s.shape[0])) for j in range(n))
    assert exact == p.privacy_epsilon() <= Fraction(eps)
    assert float(exact) > eps * (1 - 1e-6)  # the budget is used
    # variances: brute-force GLS with the per-row variances (discrete: from the pmf by summation)
    if model == "continuous":
        v = [2.0 / x**2 for x in e]
    else:
        # pmf summed directly where the support fits, else 2q/(1-q)² (q = e^{-ε}) written out
        v = [po.dlap_var(x) if x > 0.05 else 2 * np.exp(-x) / (-np.expm1(-x)) ** 2 for x in e]
    q = prefixes(n) if kind == "prefix" else ranges(n)
    cov = po.gls_cov([s[r:r + 1].astype(float) for r in range(s.shape[0])], v, q)
    order = np.lexsort((np.arange(q.shape[0]), q.sum(axis=1))) if kind == "range" else np.arange(n)
    np.testing.assert_allclose(p.entry_variance(0), np.diag(cov)[order], rtol=1e-8)
    assert p.total_variance() == pytest.approx(np.trace(cov), rel=1e-8)


def test_quantization_keeps_the_objective():
    """Continuous-model total of the released integer rows = (2/ε²) L(Θ) of the real strategy."""
    n = 40
    wl = Workload(Domain({"a": n}), [("a",)], query_types={"a": "prefix"})
    p = plan_pidentity(wl, 1.0, variance_model="continuous", random_starts=1)
    best = min(c["objective"] for c in p.comparison)
    assert p.total_variance() == pytest.approx(best, rel=1e-5)
    m, b = quantized_strategy(np.array([[3.0, 0.0, 1.0]]), 1.0)
    assert np.array_equal(m[:3], np.eye(3)) and m[3, 1] == 0 and m[3, 0] > m[3, 2] > 0
    assert [str(x) for x in b[:3]] == ["1/4", "1", "1/2"]


def test_released_maps_are_integer_and_private():
    """Every mechanism's integer map on the table: Σ_m ε_m |change| over one record ≤ ε."""
    n = 10
    wl = Workload(Domain({"a": n}), [("a",)], query_types={"a": "range"})
    p = plan_pidentity(wl, 0.7, random_starts=1)
    _, mechs = p.mechanisms()
    worst = 0.0
    for cell in range(n):
        t = np.zeros(n, dtype=np.int64)
        t[cell] = 1
        loss = 0.0
        for m in mechs:
            out = m.signal(t)
            assert out.dtype.kind == "i"
            loss += float(m.scale) * float(np.abs(out).sum())
        worst = max(worst, loss)
    assert worst <= 0.7 and worst == pytest.approx(float(p.privacy_epsilon()), rel=1e-12)


def test_monte_carlo_real_sampler():
    """Unbiased prefix answers with the plan's exact discrete variances (real sampler, seeded)."""
    n = 8
    wl = Workload(Domain.from_sizes([n]), [("a0",)], query_types={"a0": "prefix"})
    p = plan_pidentity(wl, 0.5, random_starts=1)
    gen = np.random.default_rng(11)
    rec = gen.integers(0, n, (200, 1))
    truth = np.cumsum(np.bincount(rec[:, 0], minlength=n))
    with pytest.warns(InsecureRandomnessWarning):
        errs = np.array([p.measure(rec, rng=gen).answer("a0")["estimate"].to_numpy() - truth
                         for _ in range(1500)])
    po.assert_mean_and_variance(errs, p.entry_variance(0))


def test_auto_compares_pidentity_by_its_exact_objective():
    wl = Workload(Domain({"a": 64}), [("a",)], query_types={"a": "range"})
    p = plan_pure(wl, 1.0, variance_model="continuous")
    rows = [r for r in p.comparison if "total_variance" in r]
    assert {"pidentity", "hierarchical", "marginals"} <= {r["strategy"] for r in rows}
    assert p.total_variance() == pytest.approx(min(r["total_variance"] for r in rows), rel=1e-12)
    # range n = 64: HDMM's OPT_0 best of 10 restarts is 64177.6 (benchmarks/results_pure_dp.md)
    assert p.strategy == "pidentity" and p.total_variance() < 64177.6


def test_typed_errors():
    dom = Domain({"a": 100, "b": 100})
    # one product of any size is planned factor-wise (test_pure_kron.py); a union is not
    big = plan_pure(Workload(dom, [("a", "b")], query_types={"a": "prefix"}), 1.0, strategy="pidentity")
    assert big.row_shape[1] == 100 and big.privacy_epsilon() <= 1
    # a union whose attributes carry one query type each is planned factor-wise at any size; an
    # attribute with two query types (two factors, no diagonal form) is planned densely
    two = [{"attributes": ("a",), "query_types": {"a": "range"}}, ("a", "b")]
    with pytest.raises(PlanError, match="at most 4096"):
        plan_pure(Workload(dom, two, query_types={"a": "prefix"}), 1.0, strategy="pidentity")
    with pytest.raises(PlanError, match="variance_model"):
        plan_pidentity(Workload(Domain({"a": 4}), [("a",)], query_types={"a": "prefix"}), 1.0,
                       variance_model="gaussian")


def test_level_search_does_not_depend_on_call_order():
    """The tree level search in a fresh process and after other searches in the same process
    gives the same strategy (the cached shares never change which candidates are refined)."""
    code = textwrap.dedent("""
        import sys, numpy as np
        from dpmatrix.planners._pure.levels import best_levels
        n = 64
        q = np.array([[1.0 if a <= j <= b else 0.0 for j in range(n)] for a in range(n) for b in range(a, n)])
        if sys.argv[1] == "after":
            for b in range(2, 12):
                best_levels(q, kinds=("tree",), branchings=[b])
            best_levels(q)
        t = best_levels(q, kinds=("tree",))
        print(t.label, repr(t.factor))
    """)
    out = [subprocess.run([sys.executable, "-c", code, m], capture_output=True, text=True, check=True).stdout
           for m in ("fresh", "after")]
    assert out[0] == out[1]


# products of attributes (the Kronecker p-Identity plan): test_pure_kron.py


@pytest.mark.parametrize("model", ["discrete", "continuous"])
def test_union_of_products_privacy_and_joint_gls_explicit(model):
    """2-way marginals of 6 (range) × 4 (prefix) × 3 (cells): explicit privacy of the stacked,
    budget-scaled strategy; every query variance against a brute-force GLS over ALL rows on the
    full table (the joint estimate), and consistency of the marginals' estimates."""
    from functools import reduce

    from dpmatrix.planners._pure.pidentity_union import plan_pidentity_union

    dom = Domain({"a": 6, "b": 4, "c": 3})
    wl = Workload(dom, [("a", "b"), ("a", "c"), ("b", "c")], query_types={"a": "range", "b": "prefix"})
    p = plan_pidentity_union(wl, 0.9, variance_model=model)
    s, budgets = uo.stacked(p)
    assert s.shape[1] == 72
    e = [float(b) for b in budgets]
    assert po.privacy([s[r:r + 1] for r in range(s.shape[0])], e) <= 0.9 * (1 + 1e-15)
    assert p.privacy_epsilon() == uo.exact_epsilon(s, budgets) <= Fraction(0.9)
    q = {"a": ranges(6), "b": prefixes(4), "c": np.eye(3)}
    order_a = np.lexsort((np.arange(21), ranges(6).sum(axis=1)))  # the workload's range order
    q["a"] = q["a"][order_a]
    total = 0.0
    for j, st in enumerate(wl.sets):
        names = dom.names_of(st)
        qq = reduce(np.kron, [q[x] for x in names], np.ones((1, 1))) @ po.marginal_matrix((6, 4, 3), st)
        var = uo.estimator_variances(s, budgets, qq, model)  # the continuous-weight GLS, noise as released
        np.testing.assert_allclose(p.entry_variance(j).ravel(), var, rtol=1e-7)
        total += var.sum()
    assert p.total_variance() == pytest.approx(total, rel=1e-9)


def test_union_measure_is_consistent():
    from dpmatrix.planners._pure.pidentity_union import plan_pidentity_union

    dom = Domain({"a": 5, "b": 3})
    wl = Workload(dom, [("a",), ("a", "b")], query_types={"a": "prefix"})
    p = plan_pidentity_union(wl, 1.0)
    gen = np.random.default_rng(3)
    rec = np.stack([gen.integers(0, 5, 300), gen.integers(0, 3, 300)], axis=1)
    with pytest.warns(InsecureRandomnessWarning):
        meas = p.measure(rec, rng=gen)
    ab = meas.answer(("a", "b"))["estimate"].to_numpy()
    a = meas.answer(("a",))["estimate"].to_numpy()
    # prefixes of a = prefixes over a of the (a, b) table summed over b
    np.testing.assert_allclose(a, ab.reshape(5, 3).sum(axis=1), atol=1e-8)


def explicit_query_variances(theta, w):
    n = theta.shape[1]
    a = np.vstack([np.eye(n), theta])
    a = a / np.abs(a).sum(axis=0)
    return np.einsum("ij,jk,ik->i", w, np.linalg.pinv(a.T @ a), w)


@pytest.mark.parametrize("kind", ["prefix", "range", "identity"])
def test_query_variances_and_weighted_gram_explicit(kind):
    n = 9
    w = {"prefix": prefixes(n), "range": ranges(n), "identity": np.eye(n)}[kind]
    a, b = interval_bounds(kind, n)
    q = IntervalQueries(n, a, b)
    got = q.apply(np.eye(n))
    # the same set of rows; compare in the order of the queries (rows matched by their interval)
    key = {tuple(r): i for i, r in enumerate(w.astype(int))}
    w = w[[key[tuple(r)] for r in got.astype(int)]]
    np.testing.assert_array_equal(got, w)
    y = np.random.default_rng(3).random((len(w), 2))
    np.testing.assert_allclose(q.adjoint(y), w.T @ y, atol=1e-12)
    th = np.random.default_rng(4).random((3, n))
    np.testing.assert_allclose(query_variances(th, q), explicit_query_variances(th, w), rtol=1e-10)
    np.testing.assert_allclose(query_variances(th, DenseQueries(w)), explicit_query_variances(th, w), rtol=1e-10)
    c = np.random.default_rng(5).random(len(w))
    g = WeightedGram(q, c)
    np.testing.assert_allclose(g.dense(), w.T @ np.diag(c) @ w, atol=1e-12)
    # the gradient with the weighted Gram is the gradient of Σ_q c_q v_q (finite differences)
    _, grad = pidentity_loss_grad(th, g)
    h = 1e-6
    for idx in [(0, 0), (1, 4), (2, 8)]:
        e = np.zeros_like(th)
        e[idx] = h
        fd = (c @ explicit_query_variances(th + e, w) - c @ explicit_query_variances(th - e, w)) / (2 * h)
        assert grad[idx] == pytest.approx(fd, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("kind,n", [("prefix", 16), ("range", 12)])
def test_max_objective_plan_explicit(kind, n):
    """objective='max': the plan's max variance is the explicit max over the workload's queries of
    the released integer rows (continuous model, dense GLS written out here), it is private by
    the explicit definition, and it beats the best tree / Haar plan for the max objective."""
    wl = Workload(Domain({"a": n}), [("a",)], query_types={"a": kind})
    p = plan_pure(wl, 1.0, strategy="pidentity", objective="max", variance_model="continuous")
    m = np.asarray(p.strategy_matrix, dtype=float)
    eps_r = np.array([float(b) for b in p.budgets])
    assert np.abs(m * eps_r[:, None]).sum(axis=0).max() <= 1.0 + 1e-12
    assert p.privacy_epsilon() <= 1
    cov = np.linalg.inv(m.T @ np.diag(eps_r**2 / 2.0) @ m)
    w = prefixes(n) if kind == "prefix" else ranges(n)
    truth = np.einsum("ij,jk,ik->i", w, cov, w)
    assert p.max_variance() == pytest.approx(truth.max(), rel=1e-9)
    assert p.total_variance() == pytest.approx(truth.sum(), rel=1e-9)
    levels = min(plan_pure(wl, 1.0, strategy=s, objective="max", variance_model="continuous").max_variance()
                 for s in ("hierarchical", "haar"))
    assert p.max_variance() < levels
    summed = plan_pure(wl, 1.0, strategy="pidentity", objective="sum", variance_model="continuous")
    assert p.max_variance() <= summed.max_variance() * (1 + 1e-9)


def test_max_objective_in_auto_and_unions():
    wl = Workload(Domain({"a": 16}), [("a",)], query_types={"a": "prefix"})
    p = plan_pure(wl, 1.0, objective="max", variance_model="continuous")
    rows = [r for r in p.comparison if "max_variance" in r]
    assert "pidentity" in {r["strategy"] for r in rows}
    assert p.max_variance() == pytest.approx(min(r["max_variance"] for r in rows), rel=1e-12)
    # a union of products is planned for the max too (tests/planners/pure/test_pure_union_split.py)
    union = Workload(Domain({"a": 4, "b": 3}), [("a",), ("a", "b")], query_types={"a": "prefix"})
    assert plan_pure(union, 1.0, strategy="pidentity", objective="max").objective == "max"


def test_coarse_stage_keeps_rows_constant_on_blocks_and_descends():
    """The coarse-to-fine stage (rows constant on blocks, the last block shorter): the result is
    constant on every block, no worse than the start, and its loss is the explicit one."""
    from dpmatrix._solvers.pidentity import _minimize

    n, block = 18, 4
    th0 = np.vstack([np.ones((1, n)), np.kron(np.eye(3), np.ones((1, 6)))])
    th, v = _minimize(th0, PrefixGram(n), 60, 1e-12, block)
    for lo in range(0, n, block):
        assert np.ptp(th[:, lo:lo + block], axis=1).max() == 0
    assert v <= pidentity_loss(th0, PrefixGram(n)) * (1 + 1e-12)
    assert v == pytest.approx(explicit_loss(th, prefixes(n)), rel=1e-9)
    # the fine stage from there descends further and stays exact
    th2, v2 = _minimize(th, PrefixGram(n), 60, 1e-12, 1)
    assert v2 <= v * (1 + 1e-12)
    assert v2 == pytest.approx(explicit_loss(th2, prefixes(n)), rel=1e-9)


def test_max_objective_plan_is_deterministic_in_fresh_processes():
    """Same inputs, same plan: the max-objective p-Identity plan in a fresh process and after
    other plans in the same process has the same integer rows and budgets."""
    code = textwrap.dedent("""
        import sys, hashlib
        from dpmatrix._domain import Domain
        from dpmatrix._workload import Workload
        from dpmatrix.planners._pure import plan_pure
        wl = Workload(Domain({"a": 24}), [("a",)], query_types={"a": "range"})
        if sys.argv[1] == "after":
            plan_pure(Workload(Domain({"a": 30}), [("a",)], query_types={"a": "prefix"}), 1.0, strategy="pidentity")
            plan_pure(wl, 1.0, strategy="hierarchical", objective="max")
        p = plan_pure(wl, 1.0, strategy="pidentity", objective="max")
        print(hashlib.sha256(p.strategy_matrix.tobytes()).hexdigest(), [str(b) for b in p.budgets][-3:])
    """)
    out = [subprocess.run([sys.executable, "-c", code, m], capture_output=True, text=True, check=True).stdout
           for m in ("fresh", "after")]
    assert out[0] == out[1] and out[0]
