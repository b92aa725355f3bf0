"""Interval query rows (cells, prefixes, ranges) in the pure ε-DP planners: no dense query matrix.

Every form the planners read from a prefix / range query type (Grams, row sums, level diagonals,
joint budgets, cell-strategy variances, answers, labels) is computed from the interval bounds.
Expected values: the same forms from the explicit matrices written out here (ranges by loops),
the explicit GLS covariance of the stacked level rows (``pure_oracle``: rows by hand, ``pinv``),
and the exact max column L1 norm of the budget-scaled strategy (``Fraction``)."""

import json
import os
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import numpy as np
import pure_oracle as po
import pytest

import dpmatrix as dm
from dpmatrix._linalg.query_sets import DenseQueries, IntervalQueries
from dpmatrix._solvers.pidentity import PrefixGram, RangeGram
from dpmatrix.planners._pure import joint_levels
from dpmatrix.planners._pure.hierarchical import plan_hierarchical
from dpmatrix.planners._pure.joint_levels import AttributeBasis
from dpmatrix.planners._pure.levels import best_levels
from dpmatrix.planners._pure.query_factors import AttributeForms
from dpmatrix.planners._pure.query_rows import attribute_queries, gram, quad_diag


def ranges_by_hand(n):
    return np.array([[1.0 if a <= j <= b else 0.0 for j in range(n)]
                     for length in range(1, n + 1) for a in range(n - length + 1) for b in [a + length - 1]])


def prefixes_by_hand(n):
    return np.array([[1.0 if j <= i else 0.0 for j in range(n)] for i in range(n)])


def one_attribute(n, kind):
    return dm.Workload(dm.Domain({"a": n}), [("a",)], query_types={"a": kind})


@pytest.mark.parametrize("n", [2, 7, 33])
def test_interval_rows_and_grams_equal_the_explicit_matrices(n):
    for kind, dense, closed in (("range", ranges_by_hand(n), RangeGram(n)),
                                ("prefix", prefixes_by_hand(n), PrefixGram(n))):
        q = attribute_queries(one_attribute(n, kind), 0, kind)
        assert isinstance(q, IntervalQueries) and q.m == dense.shape[0]
        assert np.array_equal(q.apply(np.eye(n)), dense)  # the workload's row order
        g = gram(q)
        assert np.array_equal(g, dense.T @ dense) and np.array_equal(g, closed.dense())
        x = np.random.default_rng(n).normal(size=(n, n))
        m = x + x.T
        assert np.allclose(quad_diag(q, m), np.einsum("ij,jk,ik->i", dense, m, dense), rtol=1e-12, atol=1e-9)
        f, fd = AttributeForms.of(q), AttributeForms.of(DenseQueries(dense))
        assert np.allclose([f.total, f.centred, f.mean, f.total_max, f.centred_max, f.mean_max],
                           [fd.total, fd.centred, fd.mean, fd.total_max, fd.centred_max, fd.mean_max], rtol=1e-12)


@pytest.mark.parametrize("kind,b,rows_form", [("tree", 3, False), ("tree", 4, True), ("haar", 0, False),
                                              ("haar", 0, True)])
def test_level_diagonals_of_intervals_equal_the_dense_ones(kind, b, rows_form, monkeypatch):
    if rows_form:  # the large-attribute form (level rows), on a small attribute
        monkeypatch.setattr(joint_levels, "ROWS_FORM_CELLS", 1)
    n = 37
    t = best_levels(ranges_by_hand(n), kinds=(kind,), branchings=[b] if b else None, refine=0)
    base = AttributeBasis.of(t)
    for dense in (ranges_by_hand(n), prefixes_by_hand(n)):
        iv = IntervalQueries(n, dense.argmax(axis=1), n - 1 - dense[:, ::-1].argmax(axis=1))
        d_iv, o_iv = base.diag_forms(iv)
        d_dn, o_dn = base.diag_forms(DenseQueries(dense))
        assert np.allclose(d_iv, d_dn, rtol=1e-9, atol=1e-12 * np.abs(d_dn).max())
        assert np.allclose(o_iv, o_dn, rtol=1e-12)


@pytest.mark.parametrize("strategy", ["hierarchical", "haar"])
def test_contracted_levels_equal_the_per_level_sum(strategy):
    p = plan_hierarchical(one_attribute(45, "range"), 1.0, strategy=strategy, branchings=(3,), refine=0)
    q = attribute_queries(p.workload, 0, "range")
    one = p._joint._diag_one(0, q)
    per_level = p._joint._diag_levels((0,), [q])
    assert np.allclose(one, per_level, rtol=1e-10)


def _stack(p):
    (t,), budgets = p.per_attribute[0], p.budgets[0]
    return po.levels_by_hand(t), budgets, t.shares


@pytest.mark.parametrize("strategy,b", [("hierarchical", 4), ("hierarchical", 16), ("haar", 0)])
@pytest.mark.parametrize("model", ["discrete", "continuous"])
def test_range_variances_at_256_equal_the_explicit_gls(strategy, b, model):
    """All 32,896 ranges of 256 cells: the plan's variances (interval forms) against the explicit
    covariance of the estimator it releases, ``Γ⁻¹ (Σ_ℓ ω_ℓ² v_ℓ H_ℓᵀH_ℓ) Γ⁻¹`` with
    ``Γ = Σ_ℓ ω_ℓ H_ℓᵀH_ℓ``, ``ω_ℓ = η_ℓ²`` (continuous: the GLS, ``v_ℓ = 2/ε_ℓ²``)."""
    n = 256
    p = plan_hierarchical(one_attribute(n, "range"), 1.0, strategy=strategy, branchings=(b,) if b else None,
                          refine=0, variance_model=model)
    rows, budgets, shares = _stack(p)
    eps = [float(x) for x in budgets]
    v = [2 / e**2 if model == "continuous" else po.dlap_var(e) for e in eps]
    w = [s * s for s in shares]
    gam = sum(wi * h.T @ h for wi, h, e in zip(w, rows, eps) if e > 0)
    mid = sum(wi * wi * vi * h.T @ h for wi, vi, h, e in zip(w, v, rows, eps) if e > 0)
    gi = np.linalg.inv(gam)
    cov = gi @ mid @ gi
    q = ranges_by_hand(n)
    var = np.einsum("ij,jk,ik->i", q, cov, q)
    got = p.entry_variance(0)
    assert got.shape == var.shape
    assert np.allclose(got, var, rtol=1e-8)
    assert p.total_variance() == pytest.approx(var.sum(), rel=1e-9)
    assert p.max_variance() == pytest.approx(var.max(), rel=1e-9)
    # privacy: the max column L1 norm of the budget-scaled stack, exactly
    cols = [sum(Fraction(x) * int(abs(h[:, j]).sum()) for x, h in zip(budgets, rows)) for j in range(n)]
    assert max(cols) == p.privacy_epsilon() <= Fraction(1)


@pytest.mark.parametrize("strategy", ["marginals", "fourier", "optimized"])
def test_cell_strategy_range_variances_equal_the_dense_path(strategy):
    n = 40
    p = dm.plan(one_attribute(n, "range"), epsilon=1.0, delta=0, strategy=strategy)
    cov = p.covariance(("a",))
    q = ranges_by_hand(n)
    assert np.allclose(p.entry_variance(0), np.einsum("ij,jk,ik->i", q, cov, q), rtol=1e-9)


def test_pidentity_release_answers_ranges_from_the_bounds():
    n = 24
    p = dm.plan(one_attribute(n, "range"), epsilon=1.0, delta=0, strategy="pidentity")
    from dpmatrix.planners._pure.matrix_strategy import MatrixEstimator

    y = {g: np.arange(len(rows), dtype=float) for g, (_, rows) in enumerate(p.groups)}
    est = MatrixEstimator(p, y)
    ans = est.entry(0)
    assert np.allclose(ans.estimate, ranges_by_hand(n) @ est.cells, rtol=1e-12, atol=1e-9)
    assert len(ans.labels[0]) == n * (n + 1) // 2


def test_labels_of_interval_rows_equal_the_dense_labels():
    from dpmatrix._reconstruct.labels import query_labels

    wk = one_attribute(9, "range")
    attr = wk.domain.attributes[0]
    for kind, dense in (("range", ranges_by_hand(9)), ("prefix", prefixes_by_hand(9))):
        assert query_labels(attr, kind, attribute_queries(wk, 0, kind)) == query_labels(attr, kind, dense)


_FRESH = textwrap.dedent("""
    import json, sys, warnings
    warnings.simplefilter("ignore")
    import dpmatrix as dm
    from dpmatrix.planners._pure.hierarchical import plan_hierarchical
    n, kind, opts = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    wk = dm.Workload(dm.Domain({"a": n}), [("a",)], query_types={"a": kind})
    p = plan_hierarchical(wk, 1.0, **opts)
    print(json.dumps({"total": p.total_variance().hex(), "max": p.max_variance().hex(), "plan": p.to_dict()}))
""")


def _fresh(n, kind, opts):
    src = str(Path(dm.__file__).parent.parent)
    out = subprocess.run([sys.executable, "-c", _FRESH, str(n), kind, json.dumps(opts)], check=True,
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=src))
    return json.loads(out.stdout.strip().splitlines()[-1])


def _other_plans_first(n):
    """Fill every planning cache with other work on the same attribute size first."""
    for kind in ("prefix", "range"):
        for strategy in ("haar", "hierarchical"):
            plan_hierarchical(one_attribute(n, kind), 0.5, strategy=strategy, branchings=(2, 4), refine=1)
    if n <= 256:  # the full share search (minutes at 1024 cells)
        dm.plan(one_attribute(n, "prefix"), epsilon=1, delta=0, objective="sum_var", strategy="hierarchical")


def _same_as_fresh(n, kind, opts):
    fresh = _fresh(n, kind, opts)
    _other_plans_first(n)
    p = plan_hierarchical(one_attribute(n, kind), 1.0, **opts)
    assert p.total_variance().hex() == fresh["total"]
    assert p.max_variance().hex() == fresh["max"]
    assert json.loads(json.dumps(p.to_dict())) == fresh["plan"]


@pytest.mark.parametrize("objective", ["sum", "max"])
def test_hierarchical_range_256_is_bit_identical_whatever_ran_before(objective):
    _same_as_fresh(256, "range", {"strategy": "hierarchical", "objective": objective})


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["range", "prefix"])
def test_large_level_plans_are_bit_identical_whatever_ran_before(kind):
    from dpmatrix.planners._pure.plan import LARGE_BRANCHINGS

    _same_as_fresh(1024, kind, {"strategy": "auto", "branchings": list(LARGE_BRANCHINGS), "refine": 0})


# -- structured tree bases (level operators) ----------------------------------------------------


@pytest.mark.parametrize("kind,n,b", [("tree", 37, 3), ("tree", 100, 16), ("tree", 64, 4), ("haar", 37, 0),
                                      ("cells", 5, 0)])
def test_level_operators_equal_the_level_rows_by_hand(kind, n, b):
    from dpmatrix.planners._pure.level_operators import LevelOperator

    rows = {"tree": lambda: po.tree_levels_by_hand(n, b), "haar": lambda: po.haar_levels_by_hand(n),
            "cells": lambda: [np.eye(n)]}[kind]()
    op = LevelOperator(kind, n, b)
    assert op.n_levels == len(rows)
    rng = np.random.default_rng(n + b)
    x = rng.normal(size=(n, 3))
    xi = rng.integers(-5, 9, size=(4, n))
    for lev, h in enumerate(rows):
        assert op.rows(lev) == h.shape[0]
        assert np.allclose(op.apply(lev, x), h @ x, rtol=1e-12, atol=1e-12)
        got = op.apply(lev, xi, axis=1)  # integer tables stay exact integers
        assert got.dtype.kind == "i" and np.array_equal(got, xi @ h.T.astype(np.int64))
        y = rng.normal(size=(h.shape[0], 2))
        assert np.allclose(op.adjoint(lev, y), h.T @ y, rtol=1e-12, atol=1e-12)
    if kind != "haar":
        w = rng.uniform(0.2, 1.0, len(rows))
        if kind == "tree":
            w[0] = 0.0  # a level without budget: passed through by the two passes
        g = sum(wi * h.T @ h for wi, h in zip(w, rows))
        assert np.allclose(op.solve(w, x), np.linalg.solve(g, x), rtol=1e-10, atol=1e-12)
        assert np.allclose(op.solve(w, x.T, axis=1), np.linalg.solve(g, x).T, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["prefix", "identity", "range"])
def test_structured_tree_plan_equals_the_explicit_gls(kind, monkeypatch):
    """A tree plan with the structured basis (threshold lowered to this small attribute): its
    variances, exact privacy and estimates against the explicit matrices (``pure_oracle``)."""
    monkeypatch.setattr(joint_levels, "STRUCTURED_CELLS", 8)
    n = 75
    wk = dm.Workload(dm.Domain({"a": n}), [("a",)], query_types={"a": kind})
    p = plan_hierarchical(wk, 1.0, strategy="hierarchical", branchings=(4,), refine=0)
    assert p._joint.bases[0].op is not None  # the structured basis is the one planned
    rows, budgets, shares = _stack(p)
    eps = [float(x) for x in budgets]
    v = [po.dlap_var(e) for e in eps]
    w = [s * s for s in shares]
    gi = np.linalg.inv(sum(wi * h.T @ h for wi, h, e in zip(w, rows, eps) if e > 0))
    cov = gi @ sum(wi * wi * vi * h.T @ h for wi, vi, h, e in zip(w, v, rows, eps) if e > 0) @ gi
    q = {"prefix": prefixes_by_hand(n), "identity": np.eye(n), "range": ranges_by_hand(n)}[kind]
    assert np.allclose(p.entry_variance(0), np.einsum("ij,jk,ik->i", q, cov, q), rtol=1e-8)
    cols = [sum(Fraction(x) * int(abs(h[:, j]).sum()) for x, h in zip(budgets, rows)) for j in range(n)]
    assert max(cols) == p.privacy_epsilon() <= Fraction(1)
    # the estimate from noisy outputs: the weighted least squares of the stacked rows, by hand
    _, mechs = p.mechanisms()
    rng = np.random.default_rng(5)
    table = rng.integers(0, 20, n)
    noisy = {}
    for m, h in zip(mechs, [h for h, e in zip(rows, eps) if e > 0]):
        out = np.asarray(m.apply(table))  # the released integer rows: exact block sums
        assert out.dtype.kind == "i" and np.array_equal(out.reshape(-1), h.astype(np.int64) @ table)
        noisy[m.key] = h @ table + rng.normal(size=h.shape[0])
    est = p.estimator(noisy)
    live = [(h, wi) for h, wi, e in zip(rows, w, eps) if e > 0]
    lhs = sum(wi * h.T @ h for h, wi in live)
    rhs = sum(wi * h.T @ noisy[m.key] for (h, wi), m in zip(live, mechs))
    assert np.allclose(est.marginal((0,)), np.linalg.solve(lhs, rhs), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kind", ["range", "prefix"])
def test_pidentity_pairwise_range_forms_equal_the_dense_ones(kind):
    """All ranges (more than ``PAIRWISE_RATIO`` queries per cell) use the pairwise forms: query
    variances from ``CCᵀ`` and the weighted Gram ``Dᵀ Λ D``; prefixes keep the per-query forms.
    Both against the explicit rows, and the variances against ``diag(W (AᵀA)⁻¹ Wᵀ)`` by hand."""
    from dpmatrix._solvers import pidentity as pid

    n = 40
    dense = ranges_by_hand(n) if kind == "range" else prefixes_by_hand(n)
    q = attribute_queries(one_attribute(n, kind), 0, kind)
    assert pid._pairwise(q) == (kind == "range")
    rng = np.random.default_rng(11)
    theta = rng.random((5, n))
    s = 1 + theta.sum(axis=0)
    a = np.vstack([np.eye(n), theta]) / s
    explicit = np.einsum("ij,jk,ik->i", dense, np.linalg.inv(a.T @ a), dense)
    assert np.allclose(pid.query_variances(theta, q), explicit, rtol=1e-9)
    c = rng.random(q.m)
    wg = pid.WeightedGram(q, c)
    x = rng.normal(size=(n, 3))
    g = dense.T @ (c[:, None] * dense)
    assert np.allclose(wg.matmul(x), g @ x, rtol=1e-10, atol=1e-9)
    assert np.allclose(wg.diag(), np.diag(g), rtol=1e-12)
