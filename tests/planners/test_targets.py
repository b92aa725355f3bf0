"""Planning from accuracy targets: dm.plan(workload, targets=...).

Expected numbers come from the fitness-for-use paper (Table 2, §5 worked examples, §7.3 PL94),
hand derivations, or an independent explicit computation written here with numpy only
(variances ``w (AᵀA)⁺ wᵀ`` and privacy cost ``max diag AᵀA`` of dense matrices)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import dpmatrix as dm
from dpmatrix.errors import PlanError, TargetError, UnknownAttributeError

Z95 = 1.959963984540054


# -- independent explicit helpers (numpy only) --------------------------------------------------
def marginal_rows(sizes, keep):
    M = np.ones((1, 1))
    for i, s in enumerate(sizes):
        M = np.kron(M, np.eye(s) if i in keep else np.ones((1, s)))
    return M


def explicit_variances(W, A):
    """Variance of every row of W when A x + N(0, I) is measured and answered by least squares."""
    P = np.linalg.pinv(A.T @ A)
    return np.einsum("ij,jk,ik->i", W, P, W)


def explicit_pcost(A):
    return float(np.max(np.sum(A * A, axis=0)))


# -- the paper through dm.plan(QueryWorkload, targets=...) --------------------------------------
@pytest.mark.parametrize("d, paper", [(2, 1.33), (4, 1.76), (8, 2.28), (16, 2.91), (64, 4.46)])
def test_table2_prefix_uniform_targets(d, paper):
    # Paper Table 2: prefix queries over d values, targets 1, privacy cost Δ².
    dom = dm.Domain({"x": d})
    p = dm.plan(dm.QueryWorkload(dom).add_kron("x", "prefix"), targets=1.0)
    assert p.pcost == pytest.approx(paper, abs=0.005)
    cert = p.certificate()
    assert cert["status"] == "optimal" and cert["gap"] <= 1e-6
    assert cert["pcost_lower_bound"] <= p.pcost * (1 + 1e-9)
    # independent check of the returned mechanism: privacy by the definition, variances ≤ 1
    W = np.tril(np.ones((d, d)))
    assert explicit_pcost(p.strategy) == pytest.approx(p.pcost, rel=1e-9)
    assert np.max(explicit_variances(W, p.strategy)) == pytest.approx(1.0, rel=1e-7)
    if d == 4:
        assert p.pcost == pytest.approx(1.758601, abs=2e-6)  # the 7 digits


def test_section5_examples():
    # §5: prefix d = 2 gives Δ² = 4/3; identity + sum with equal targets, d = 5, gives Δ² = 5/3
    # (Σ = 1.2 I − 0.2 J: cell variance 1, total 5·1.2 − 20·0.2 = 1, privacy 1/(1.2−0.2·5)... ).
    p = dm.plan(dm.QueryWorkload(dm.Domain({"x": 2})).add_kron("x", "prefix"), targets=1.0)
    assert p.pcost == pytest.approx(4 / 3, rel=1e-6)
    dom = dm.Domain({"x": 5})
    qw = dm.QueryWorkload(dom).add_kron("x", "identity").add_explicit("x", np.ones((1, 5)), label="sum")
    p = dm.plan(qw, targets=1.0)
    assert p.pcost == pytest.approx(5 / 3, rel=1e-6)
    # Σ⁻¹ of the paper's covariance over the cells is the optimal Gram matrix AᵀA (B = I)
    Sigma = 1.2 * np.eye(5) - 0.2 * np.ones((5, 5))
    assert p.strategy.T @ p.strategy == pytest.approx(np.linalg.inv(Sigma), abs=1e-5)
    t = p.target_table()
    assert list(t.columns[:1]) == ["group"] and t["binding"].all()
    assert t["achieved"].to_numpy() == pytest.approx([1.0, 1.0], rel=1e-6)


def test_pl94_per_marginal_targets_reproduce_the_explicit_optimum():
    # §7.3 PL94 (2 × 2 × 63, targets 1): the certified explicit optimum is Δ² = 3.0134
    # (tests/solvers/test_fitness.py::test_table4_pl94; the paper's SM-II stopped 14 % above).
    # ResidualPlanner with per-marginal targets reaches it (design.md): plain marginals.
    dom = dm.Domain({"va": 2, "eth": 2, "race": 63})
    wk = dm.Workload(dom, [("va",), ("eth",), ("race",), ("va", "eth", "race")])
    p = dm.plan(wk, targets=1.0)
    assert p.pcost == pytest.approx(3.0134, rel=1e-4)
    assert p.certificate()["gap"] <= 1e-6
    sizes = (2, 2, 63)
    W = np.vstack([marginal_rows(sizes, k) for k in [(0,), (1,), (2,), (0, 1, 2)]])
    explicit = dm.plan(dm.QueryWorkload(dom).add_explicit(("va", "eth", "race"), W), targets=1.0)
    assert p.pcost == pytest.approx(explicit.pcost, rel=1e-6)


# -- the two routes agree on plain marginals ------------------------------------------------------
def test_residual_and_explicit_routes_agree_on_plain_marginals():
    dom = dm.Domain({"a": 2, "b": 3, "c": 4})
    sets = [("a", "b"), ("c",), ("b", "c")]
    tg = {"a,b": 2.0, "c": 0.5, "b,c": 3.0}
    res = dm.plan(dm.Workload(dom, sets), targets=tg)
    qw = dm.QueryWorkload(dom)
    for s in sets:
        qw.add_explicit(("a", "b", "c"), marginal_rows((2, 3, 4), tuple(dom.index(a) for a in s)),
                        label=",".join(s))
    exp = dm.plan(qw, targets=tg)
    assert res.pcost == pytest.approx(exp.pcost, rel=1e-6)
    for lab in tg:
        r = res.target_table().set_index("marginal").loc[lab]
        assert r["achieved"] <= tg[lab] * (1 + 1e-9)
    # the residual plan's variances, checked against the explicit definition: per-cell variance
    # of the reconstructed marginal equals the plan's query variance
    assert res.query_variance(("a", "b")).max() == pytest.approx(2.0, rel=1e-9)
    assert res.query_variance("c").max() == pytest.approx(0.5, rel=1e-9)


@pytest.mark.parametrize("t", [2, 4])
def test_table10_marginals_residual_equals_explicit_optimum(t):
    # Paper §7.7 / Table 10 workload: all 1- and 2-way marginals of 3 attributes with t values,
    # targets 1. The residual route must reach the explicit certified optimum (uniform targets
    # per marginal: residual mechanisms are optimal), here solved on the dense matrix.
    from dpmatrix._solvers.fitness import solve_min_privacy_cost

    dom = dm.Domain.from_sizes([t] * 3)
    sets = [s for k in (1, 2) for s in itertools.combinations(range(3), k)]
    p = dm.plan(dm.Workload(dom, sets), targets=1.0)
    W = np.vstack([marginal_rows((t,) * 3, s) for s in sets])
    ref = solve_min_privacy_cost(W, 1.0)
    assert ref.gap <= 1e-6
    assert p.pcost == pytest.approx(ref.privacy_cost, rel=2e-6)


def test_per_cell_targets_in_a_plain_marginal_use_the_smallest():
    # Under ResidualPlanner every cell of a plain marginal has the same variance, so the plan is
    # the one for the marginal's smallest target. Hand derivation for the total (target 1) and
    # the 3 cells of a (targets 1, 1, 9): cell variance x_∅/9 + 2x_a/3, total x_∅, privacy
    # 1/x_∅ + (2/3)/x_a; the optimum is x_∅ = 1, x_a = 4/3: privacy cost 1.5. An explicit
    # mechanism, free to give the third cell more noise, needs only 1.48728 (certified).
    dom = dm.Domain({"a": 3})
    wk = dm.Workload(dom, [(), ("a",)])
    per_cell = dm.plan(wk, targets={"()": 1.0, "a": [1.0, 1.0, 9.0]})
    uniform = dm.plan(wk, targets={"()": 1.0, "a": 1.0})
    assert per_cell.pcost == pytest.approx(1.5, rel=1e-9)
    assert uniform.pcost == pytest.approx(1.5, rel=1e-9)
    qw = dm.QueryWorkload(dom).add_explicit("a", np.ones((1, 3)), label="total")
    qw.add_explicit("a", np.eye(3), label="cells")
    explicit = dm.plan(qw, targets={"total": 1.0, "cells": [1.0, 1.0, 9.0]})
    assert explicit.certificate()["gap"] <= 1e-6
    assert explicit.pcost == pytest.approx(1.48728, abs=2e-5)
    assert explicit.target_table()["group"].tolist() == ["total", "cells"]


# -- Problems 3/4 at a budget ---------------------------------------------------------------------
@pytest.mark.parametrize("route", ["residual", "explicit"])
def test_fixed_budget_minimizes_the_largest_ratio(route):
    dom = dm.Domain({"a": 2, "b": 3, "c": 4})
    wk = dm.Workload(dom, [("a", "b"), ("c",), ("b", "c")])
    workload = wk if route == "residual" else dm.QueryWorkload.from_workload(wk)
    tg = [2.0, 0.5, 3.0] if route == "explicit" else {"a,b": 2.0, "c": 0.5, "b,c": 3.0}
    if route == "explicit":
        tg = dict(enumerate(tg))
    least = dm.plan(workload, targets=tg)
    at = dm.plan(workload, rho=0.5, targets=tg)  # pcost = 1
    assert at.pcost == pytest.approx(1.0, rel=1e-9)
    t = at.target_table()
    top = at.certificate()["max_ratio"]
    assert np.all(t["ratio"].to_numpy() <= top * (1 + 1e-12))
    assert top == pytest.approx(least.pcost / 1.0, rel=1e-6)  # Δ²_opt / P (paper Thms. 5, 12)
    assert at.certificate()["max_ratio_lower_bound"] <= top * (1 + 1e-9)
    assert at.certificate()["gap"] <= 1e-6
    # every budget form gives the same plan
    at_mu = dm.plan(workload, mu=1.0, targets=tg)
    assert at_mu.certificate()["max_ratio"] == pytest.approx(top, rel=1e-6)


# -- generalized marginals: per-query targets ------------------------------------------------------
def test_generalized_marginals_per_query_targets():
    dom = dm.Domain({"age": 8, "sex": 2, "race": 3})
    wk = dm.Workload(dom, [("age",), ("age", "sex"), ("race",)], query_types={"age": "prefix"})
    prefix_t = np.linspace(1.0, 4.0, 8)
    tg = {"age": prefix_t, "age,sex": 10.0, "race": 2.0}
    p = dm.plan(wk, targets=tg, construction="centred")
    cert = p.certificate()
    assert cert["gap"] <= 1e-6 and cert["status"] == "optimal"
    v = p.query_variance("age")
    assert np.all(v <= prefix_t * (1 + 1e-7))
    assert np.max(v / prefix_t) == pytest.approx(1.0, rel=1e-7)
    assert cert["pcost_lower_bound"] <= cert["needed_pcost"] * (1 + 1e-9)
    # per-query weights, not only the marginal's smallest target: all targets 1 cost more
    tighter = dm.plan(wk, targets={"age": 1.0, "age,sex": 10.0, "race": 2.0}, construction="centred")
    assert tighter.pcost > p.pcost * 1.01
    # and the per-query plan is no worse than the per-marginal one scaled to meet the targets
    assert p.pcost <= tighter.pcost


def test_tiny_degenerate_generalized_workload_is_planned():
    # On this tiny workload the interior-point max-variance solve of Algorithm 4 stalls (relative
    # gap 6e-4): the selection falls back to a conic solver, and "auto" would keep the other
    # construction if one failed; either way every target is met with a certified gap.
    dom = dm.Domain({"age": 6, "sex": 2})
    wk = dm.Workload(dom, [("age",), ("age", "sex")], query_types={"age": "prefix"})
    t = np.array([1.0, 1.0, 2.0, 2.0, 4.0, 4.0])
    p = dm.plan(wk, targets={"age": t, "age,sex": 10.0})
    assert np.all(p.query_variance("age") <= t * (1 + 1e-7))
    assert p.certificate()["gap"] <= 1e-6


def test_target_kinds_convert():
    dom = dm.Domain({"a": 2, "b": 2})
    wk = dm.Workload(dom, [("a", "b")])
    # one full marginal: identity noise σ² = target, pcost = 1/σ² (hand derivation)
    assert dm.plan(wk, targets=4.0).pcost == pytest.approx(0.25, rel=1e-9)
    assert dm.plan(wk, targets=2.0, target_kind="std").pcost == pytest.approx(0.25, rel=1e-9)
    assert dm.plan(wk, targets=2 * Z95, target_kind="moe95").pcost == pytest.approx(0.25, rel=1e-9)


# -- bad input --------------------------------------------------------------------------------------
@pytest.fixture
def wk():
    return dm.Workload(dm.Domain({"age": 4, "sex": 2, "race": 3}), [("age", "sex"), ("race",)])


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_non_positive_or_non_finite_targets(wk, bad):
    with pytest.raises(TargetError, match="race"):
        dm.plan(wk, targets={"age,sex": 1.0, "race": bad})


def test_wrong_length_array_names_the_marginal(wk):
    with pytest.raises(TargetError, match="race.*3 queries"):
        dm.plan(wk, targets={"age,sex": 1.0, "race": [1.0, 2.0]})
    with pytest.raises(TargetError, match="11 queries"):
        dm.plan(wk, targets=np.ones(10))


def test_marginal_not_in_workload(wk):
    with pytest.raises(TargetError, match="age,race"):
        dm.plan(wk, targets={"age,race": 1.0, "*": 2.0})
    with pytest.raises(UnknownAttributeError, match="income"):
        dm.plan(wk, targets={"income": 1.0, "*": 2.0})
    with pytest.raises(TargetError, match="no target for race"):
        dm.plan(wk, targets={"age,sex": 1.0})


def test_flat_array_in_query_order(wk):
    flat = np.concatenate([np.full(8, 2.0), [1.0, 1.0, 1.0]])
    a = dm.plan(wk, targets=flat)
    b = dm.plan(wk, targets={"age,sex": 2.0, "race": 1.0})
    assert a.pcost == pytest.approx(b.pcost, rel=1e-12)


def test_query_outside_what_can_be_measured_is_a_plan_error():
    dom = dm.Domain({"x": 3})
    qw = dm.QueryWorkload(dom).add_explicit("x", np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    with pytest.raises(PlanError, match="outside the row space"):
        dm.plan(qw, targets=1.0, measurable=np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))


def test_targets_exclude_objective_and_loss_bound(wk):
    with pytest.raises(PlanError, match="targets= replaces"):
        dm.plan(wk, targets=1.0, objective="max_var")


def test_target_table_feeds_the_report_and_to_dict(wk):
    p = dm.plan(wk, targets={"age,sex": 1.0, "race": 4.0})
    t = p.target_table()
    assert list(t.columns) == ["marginal", "queries", "target", "achieved", "ratio", "binding"]
    assert t["binding"].any()
    d = p.to_dict()
    assert d["targets"]["certificate"]["status"] == "optimal"
    assert p.rho == pytest.approx(p.pcost / 2) and p.epsilon(1e-6) > 0


def test_html_report_has_the_targets_section(wk, tmp_path):
    p = dm.plan(wk, targets={"age,sex": 1.0, "race": 4.0})
    html = p.report(tmp_path / "r.html").read_text()
    assert "Accuracy targets" in html and "achieved / target" in html
