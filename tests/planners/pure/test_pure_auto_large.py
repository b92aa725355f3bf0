"""``strategy="auto"`` on large ordered attributes (prefix / range queries) under pure ε-DP.

From :data:`LARGE_LEVEL_CELLS` cells on an attribute with non-cell queries, ``auto`` tries the tree
/ Haar level strategies only at a few branchings and at their starting shares, and says so in
its comparison. Expected values come from explicit matrices written out here (tree / Haar rows
by hand in ``pure_oracle``, the explicit GLS covariance, the max column L1 norm of the
budget-scaled strategy) and from the other strategy options planned explicitly."""

from fractions import Fraction

import numpy as np
import pure_oracle as po
import pytest

import dpmatrix as dm
from dpmatrix.planners._pure import plan as pure_plan
from dpmatrix.planners._pure.hierarchical import plan_hierarchical
from dpmatrix.planners._pure.levels import best_levels, level_grams, level_matrices


def prefixes(n):
    return np.tril(np.ones((n, n)))


def one_attribute(n, kind="prefix"):
    return dm.Workload(dm.Domain({"age": n}), [("age",)], query_types={"age": kind})


@pytest.mark.parametrize("kind,n,b", [("tree", 37, 3), ("tree", 64, 4), ("haar", 37, 0), ("cells", 5, 0)])
def test_level_grams_equal_the_integer_products(kind, n, b):
    for k, h in zip(level_grams(kind, n, b), level_matrices(kind, n, b)):
        exact = h.T @ h  # int64 product
        assert np.array_equal(k, exact.astype(float))
        assert not k.flags.writeable


def test_threshold_reads_only_attributes_with_non_cell_queries():
    big = pure_plan.LARGE_LEVEL_CELLS
    assert pure_plan._large_ordered(one_attribute(big - 1)) == 0
    assert pure_plan._large_ordered(one_attribute(big)) == big
    dom = dm.Domain({"age": 8, "zip": big})
    # a plain-cell attribute, however large, does not switch the level search
    wk = dm.Workload(dom, [("age", "zip")], query_types={"age": "range"})
    assert pure_plan._large_ordered(wk) == 0


def test_refine_zero_keeps_the_starting_shares_and_is_never_better_than_refined():
    q = prefixes(48)
    start = best_levels(q, branchings=[2, 4, 8], refine=0)
    refined = best_levels(q, branchings=[2, 4, 8])
    assert refined.factor <= start.factor * (1 + 1e-12)
    # the start factor is the exact F of its shares: tr(Q G⁻¹ Qᵀ) (Σ η)², G from hand-built rows
    rows = po.levels_by_hand(start)
    g = sum(e * e * h.T @ h for e, h in zip(start.shares, rows))
    f = np.trace(q @ np.linalg.inv(g) @ q.T) * sum(start.shares) ** 2
    assert start.factor == pytest.approx(f, rel=1e-9)


@pytest.mark.parametrize("strategy,objective", [("hierarchical", "sum"), ("haar", "max"), ("auto", "max")])
def test_cheap_level_plans_are_private_and_exact_on_a_small_domain(strategy, objective):
    n, eps = 24, 0.7
    wk = one_attribute(n, "range")
    p = plan_hierarchical(wk, eps, strategy=strategy, objective=objective, variance_model="continuous",
                          branchings=(2, 4, 8), refine=0)
    (t,), budgets = p.per_attribute[0], p.budgets[0]
    rows = po.levels_by_hand(t)
    # privacy: the max column L1 norm of the budget-scaled stack, exactly
    cols = [sum(Fraction(b) * int(abs(h[:, j]).sum()) for b, h in zip(budgets, rows)) for j in range(n)]
    assert max(cols) <= Fraction(eps)
    assert po.privacy(rows, [float(b) for b in budgets]) <= eps + 1e-12
    # variances: explicit GLS with 2/ε_ℓ² per level
    q = np.array([[1.0 if a <= j <= c else 0.0 for j in range(n)] for a in range(n) for c in range(a, n)])
    live = [(h, float(b)) for h, b in zip(rows, budgets) if b > 0]
    cov = po.gls_cov([h for h, _ in live], [2 / b**2 for _, b in live], q)
    assert p.total_variance() == pytest.approx(np.trace(cov), rel=1e-8)
    assert p.max_variance() == pytest.approx(np.diag(cov).max(), rel=1e-8)


def test_auto_above_the_threshold_reports_the_restricted_search(monkeypatch):
    monkeypatch.setattr(pure_plan, "LARGE_LEVEL_CELLS", 32)
    wk = one_attribute(40)
    p = dm.plan(wk, epsilon=1, delta=0, objective="sum_var")
    rows = {(r["strategy"], r["budgeting"]): r for r in p.comparison}
    note = rows["tree/haar share search", "optimal"]["skipped"]
    assert "40 >= 32 cells" in note and str(list(pure_plan.LARGE_BRANCHINGS)) in note
    # every kept tree uses one of the fixed branchings; auto keeps the smallest exact objective
    for r in p.comparison:
        for label in r.get("levels", "").split(";"):
            if label.startswith("tree:"):
                assert int(label.split(":")[1]) in pure_plan.LARGE_BRANCHINGS
    kept = [r["total_variance"] for r in p.comparison if "total_variance" in r]
    assert p.total_variance() == pytest.approx(min(kept), rel=1e-12)
    assert float(p.privacy_epsilon()) <= 1
    # below the threshold: no such row (the full search, as before)
    small = dm.plan(one_attribute(12), epsilon=1, delta=0, objective="sum_var")
    assert all(r["strategy"] != "tree/haar share search" for r in small.comparison)


def test_auto_is_deterministic_above_the_threshold(monkeypatch):
    monkeypatch.setattr(pure_plan, "LARGE_LEVEL_CELLS", 32)
    wk = one_attribute(40, "range")
    a = dm.plan(wk, epsilon=1, delta=0)
    b = dm.plan(wk, epsilon=1, delta=0)
    assert a.to_dict() == b.to_dict()


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["sum_var", "max_var"])
def test_auto_on_prefix_1024_is_no_worse_than_pidentity_and_the_best_tree(objective):
    wk = one_attribute(1024)
    auto = dm.plan(wk, epsilon=1, delta=0, objective=objective)
    pid = dm.plan(wk, epsilon=1, delta=0, objective=objective, strategy="pidentity")
    tree = dm.plan(wk, epsilon=1, delta=0, objective=objective, strategy="hierarchical")  # the full search
    value = (lambda p: p.total_variance()) if objective == "sum_var" else (lambda p: p.max_variance())
    assert value(auto) <= value(pid) * (1 + 1e-12)
    assert value(auto) <= value(tree) * (1 + 1e-12)
    assert any(r["strategy"] == "tree/haar share search" and "skipped" in r for r in auto.comparison)
    assert float(auto.privacy_epsilon()) <= 1


@pytest.mark.parametrize("kind,b", [("tree", 16), ("tree", 2), ("haar", 0)])
def test_large_attribute_level_diagonals_match_the_explicit_matrices(kind, b):
    from dpmatrix.planners._pure.joint_levels import ROWS_FORM_CELLS, AttributeBasis
    from dpmatrix.planners._pure.levels import AttributeLevels

    n = ROWS_FORM_CELLS + 7
    rows = po.tree_levels_by_hand(n, b) if kind == "tree" else po.haar_levels_by_hand(n)
    eta = np.linspace(1.0, 2.0, len(rows))
    basis = AttributeBasis.of(AttributeLevels(n, kind, b, tuple(eta / eta.sum()), 1.0))
    assert basis.rows  # the level-rows form is the one under test
    r = prefixes(n)[::37]
    # explicit: G = Σ η² HᵀH, t = G⁻¹1, P = G⁻¹ - ttᵀ/1ᵀt, diag(r P HᵀH P rᵀ) per level
    g = sum(e * e * h.T @ h for e, h in zip(eta / eta.sum(), rows))
    gi = np.linalg.inv(g)
    t = gi.sum(axis=1)
    p = gi - np.outer(t, t) / t.sum()
    want = np.array([np.diag(r @ p @ h.T @ h @ p @ r.T) for h in rows])
    got = basis.diag_forms(r)[0][:, 0, :]
    assert np.allclose(got, want, rtol=1e-8, atol=1e-10 * np.abs(want).max())


def test_no_restriction_where_pidentity_is_not_planned(monkeypatch):
    # a union of two marginals: no single-product p-Identity candidate, so the full tree search
    monkeypatch.setattr(pure_plan, "LARGE_LEVEL_CELLS", 32)
    dom = dm.Domain({"age": 40, "sex": 2})
    wk = dm.Workload(dom, [("age",), ("age", "sex")], query_types={"age": "prefix"})
    p = dm.plan(wk, epsilon=1, delta=0, objective="sum_var")
    assert all(r["strategy"] != "tree/haar share search" for r in p.comparison)
    assert float(p.privacy_epsilon()) <= 1


def test_auto_skips_the_level_candidates_from_the_skip_size_and_names_them(monkeypatch):
    monkeypatch.setattr(pure_plan, "LARGE_LEVEL_CELLS", 16)
    monkeypatch.setattr(pure_plan, "LEVEL_SKIP_CELLS", 32)
    p = dm.plan(one_attribute(40), epsilon=1, delta=0)
    skipped = {r["strategy"] for r in p.comparison if "skipped" in r}
    assert {"hierarchical", "haar", "per-attribute best"} <= skipped
    planned = [r for r in p.comparison if "max_variance" in r]
    assert not any(r["strategy"] in ("hierarchical", "haar", "per-attribute best") for r in planned)
    assert p.max_variance() == pytest.approx(min(r["max_variance"] for r in planned), rel=1e-12)
    assert float(p.privacy_epsilon()) <= 1
    # between the two sizes the level candidates are planned (restricted)
    q = dm.plan(one_attribute(24), epsilon=1, delta=0)
    assert any(r["strategy"] == "hierarchical" and "max_variance" in r for r in q.comparison)
