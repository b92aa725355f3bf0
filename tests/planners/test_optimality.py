"""plan.lower_bound() / plan.optimality_ratio() on every Gaussian plan.

The reference bound is recomputed here from scratch: the workload is written out as one dense
matrix over the full (small) domain with the oracle's explicit Kronecker products, weighted rows
√w, and the singular value bound is (Σσ)²/(N·pcost) from numpy's SVD (Li & Miklau Thm 3.3).
The plan's value (weighted total / max variance) comes from the planners' own, separately
tested, variance formulas.
"""

import math

import numpy as np
import pytest

import dpmatrix as dm
from dpmatrix.planners._pure import plan_pure
from oracle import generalized_marginal_query, prefix_matrix, range_matrix


def dense_bound(sizes, entries, pcost):
    """entries: (attribute positions, per-attribute base matrices {pos: W}, weight)."""
    rows = []
    for A, mats, w in entries:
        Ws = [mats.get(i, np.eye(n)) for i, n in enumerate(sizes)]
        rows.append(math.sqrt(w) * generalized_marginal_query(sizes, A, Ws))
    W = np.vstack(rows)
    s = np.linalg.svd(W, compute_uv=False).sum()
    return s * s / (W.shape[1] * pcost), W.shape[0]


def test_plain_marginals_sum_var_ratio_is_one_and_bound_matches_dense_svd():
    dom = dm.Domain({"a": 3, "b": 4, "c": 2})
    wk = dm.Workload(dom, [("a", "b"), ("c",), ("b", "c"), ()], weights=[1.0, 3.0, 0.5, 2.0])
    p = dm.plan(wk, rho=0.7, objective="sum_var")
    ref, nq = dense_bound(dom.sizes, [((0, 1), {}, 1.0), ((2,), {}, 3.0), ((1, 2), {}, 0.5), ((), {}, 2.0)],
                          p.pcost)
    lb = p.lower_bound()
    assert lb.exact and lb.total == pytest.approx(ref, rel=1e-10)
    assert lb.n_queries == nq
    # ResidualPlanner is optimal for sum_var on marginals and the bound is tight there
    assert p.optimality_ratio() == pytest.approx(1.0, abs=1e-9)
    assert p.loss() == pytest.approx(ref, rel=1e-9)


def test_hundred_attributes_all_three_way_ratio_is_one():
    dom = dm.Domain.from_sizes([2, 3, 4, 5] * 25)
    wk = dm.Workload.marginals(dom, 3, upto=True)
    p = dm.plan(wk, rho=0.5, objective="sum_var")
    o = p.optimality()
    assert o.exact and o.objective == "sum_var"
    assert abs(o.ratio - 1.0) < 1e-9


def test_max_var_ratio_is_weighted_max_over_mean_bound():
    dom = dm.Domain({"a": 5, "b": 4})
    wk = dm.Workload(dom, [("a",), ("a", "b")], weights=[2.0, 1.0])
    p = dm.plan(wk, pcost=1.0, objective="max_var")
    ref, nq = dense_bound(dom.sizes, [((0,), {}, 2.0), ((0, 1), {}, 1.0)], p.pcost)
    o = p.optimality()
    assert o.objective == "max_var" and o.quantity == "weighted max variance"
    assert o.bound == pytest.approx(ref / nq, rel=1e-10)
    weighted_max = max(2.0 * p.query_variance("a").max(), p.query_variance(("a", "b")).max())
    assert o.value == pytest.approx(weighted_max, rel=1e-9)
    assert p.optimality_ratio() == pytest.approx(weighted_max / (ref / nq), rel=1e-9)
    assert p.optimality_ratio() > 1.0


def test_rpplus_single_kron_exact_bound_shows_true_gap():
    dom = dm.Domain({"a": 6, "b": 3})
    wk = dm.Workload(dom, [("a", "b")], query_types={"a": "range"})
    p = dm.plan(wk, pcost=2.0, objective="sum_var")
    ref, _ = dense_bound(dom.sizes, [((0, 1), {0: range_matrix(6)}, 1.0)], 2.0)
    lb = p.lower_bound()
    assert lb.exact and lb.total == pytest.approx(ref, rel=1e-10)
    assert p.optimality_ratio() == pytest.approx(p.loss() / ref, rel=1e-10)
    assert 1.0 < p.optimality_ratio() < 1.5


def test_rpplus_union_of_generalized_marginals_small_union_is_exact():
    # the structured bound of a union of generalized marginals is not exact; on a small union
    # marginal (≤ 1024 cells) the plan uses the exact dense bound instead
    dom = dm.Domain({"a": 5, "b": 4, "c": 3})
    wk = dm.Workload.marginals(dom, 2, query_types={"a": "range", "b": "prefix"})
    p = dm.plan(wk, pcost=1.0, objective="sum_var")
    mats = {0: range_matrix(5), 1: prefix_matrix(4)}
    ref, nq = dense_bound(dom.sizes, [((0, 1), mats, 1.0), ((0, 2), mats, 1.0), ((1, 2), mats, 1.0)], 1.0)
    lb = p.lower_bound()
    assert lb.exact and lb.total == pytest.approx(ref, rel=1e-9) and lb.n_queries == nq
    assert dm.lower_bound(wk, pcost=1.0).total <= ref * (1 + 1e-9)  # the structured one: valid, below
    assert p.optimality_ratio() == pytest.approx(p.loss() / ref, rel=1e-9)
    assert p.optimality_ratio() > 1.0


def test_rpplus_union_large_union_valid_bound():
    dom = dm.Domain({"a": 11, "b": 10, "c": 10})  # 1100 cells: above the dense limit
    wk = dm.Workload(dom, [("a", "b"), ("c",)], query_types={"a": "range", "c": "prefix"})
    p = dm.plan(wk, pcost=1.0, objective="sum_var")
    mats = {0: range_matrix(11), 2: prefix_matrix(10)}
    ref, _ = dense_bound(dom.sizes, [((0, 1), mats, 1.0), ((2,), mats, 1.0)], 1.0)
    lb = p.lower_bound()
    assert not lb.exact and lb.total <= ref * (1 + 1e-9)  # valid, not exact: below the true bound
    assert p.loss() / ref >= 1.0  # the plan is above the true (dense) bound ...
    assert p.optimality_ratio() >= p.loss() / ref * (1 - 1e-9)  # ... and the reported ratio over-states it


def test_querysmasher_explicit_queries_gap_against_dense_bound():
    dom = dm.Domain({"a": 4, "b": 5})
    qw = dm.QueryWorkload.pairs(dom, "affine")
    p = dm.plan(qw, pcost=1.0, planner="querysmasher")
    W = np.vstack([g.dense() for g in qw.groups])  # the only group is on (a, b): its cells are the domain
    assert [g.attrs for g in qw.groups] == [(0, 1)]
    s = np.linalg.svd(W, compute_uv=False).sum()
    ref = s * s / W.shape[1]
    lb = p.lower_bound()
    assert lb.total == pytest.approx(ref, rel=1e-10)
    assert p.optimality_ratio() == pytest.approx(p.weighted_loss() / ref, rel=1e-10)
    assert p.optimality_ratio() >= 1.0 - 1e-9


def test_querysmasher_plain_marginals_ratio_one():
    dom = dm.Domain({"a": 3, "b": 4, "c": 5})
    wk = dm.Workload.marginals(dom, 2)
    p = dm.plan(wk, pcost=1.0, planner="querysmasher")
    assert p.optimality_ratio() == pytest.approx(1.0, abs=1e-6)


def test_custom_objective_is_judged_by_weighted_total():
    cp = pytest.importorskip("cvxpy")
    dom = dm.Domain({"a": 3, "b": 4})
    wk = dm.Workload(dom, [("a",), ("a", "b")])
    p = dm.plan(wk, pcost=1.0, objective=lambda v: cp.sum_squares(v))
    o = p.optimality()
    assert o.objective == "custom" and o.quantity == "weighted total variance"
    assert o.value == pytest.approx(p.total_variance(), rel=1e-12) and o.ratio >= 1.0


def test_pure_plans_have_no_gaussian_bound():
    dom = dm.Domain({"a": 3, "b": 2})
    p = plan_pure(dm.Workload(dom, [("a",), ("a", "b")]), 1.0, strategy="marginals")
    assert p.lower_bound() is None and p.optimality_ratio() is None


def test_manifest_entry_fields():
    dom = dm.Domain({"a": 3, "b": 4})
    p = dm.plan(dm.Workload(dom, [("a", "b")]), pcost=1.0, objective="sum_var")
    d = p.lower_bound_facts()
    assert d["total"] == pytest.approx(12.0)  # identity W: (Σσ)²/N = 12²/12
    assert d["rmse"] == pytest.approx(1.0) and d["exact"] is True
    assert d["ratio"] == pytest.approx(1.0) and d["value"] == pytest.approx(12.0)
