"""A user's strategy matrix through ``dm.plan(..., epsilon=, delta=0, strategy=<matrix>)`` for prefix
and range workloads: privacy against the explicit definition, GLS variances against the oracle,
the max-variance budget program against brute force, typed errors, and release round trips."""

import itertools

import numpy as np
import pandas as pd
import pure_oracle as po
import pytest

import dpmatrix as dm
from dpmatrix._solvers.budget_split import convex_max_budget_split
from dpmatrix.errors import PlanError, WorkloadError
from dpmatrix.planners._dispatch import plan_from_dict
from dpmatrix.planners._pure import MatrixPurePlan


def _tree8():
    """Binary tree on 8 cells, written out: total, halves, quarters, cells (15 × 8, 0/1)."""
    rows = []
    for width in (8, 4, 2, 1):
        for start in range(0, 8, width):
            r = np.zeros(8)
            r[start:start + width] = 1
            rows.append(r)
    return np.array(rows)


def _rows(s):
    """One block per row (the oracle takes one budget per block)."""
    return [r[None, :] for r in s]


def _prefix(n):
    return np.tril(np.ones((n, n)))


def _ranges(n):
    """Every [a, b], by length then start (the order of the "range" query type's rows)."""
    return np.array([[1.0 if a <= c <= a + length - 1 else 0.0 for c in range(n)]
                     for length in range(1, n + 1) for a in range(n - length + 1)])


DOM = dm.Domain({"t": 8, "s": 2})


@pytest.mark.parametrize("budgeting,objective", [("uniform", "sum"), ("optimal", "sum"), ("optimal", "max")])
def test_tree_matrix_on_prefixes(budgeting, objective):
    wk = dm.Workload(DOM, [("t",)], query_types={"t": "prefix"})
    s = _tree8()
    p = dm.plan(wk, epsilon=0.8, delta=0, strategy=s, budgeting=budgeting,
                objective={"sum": "sum_var", "max": "max_var"}[objective])
    assert isinstance(p, MatrixPurePlan) and p.attrs == (0,)  # the union of the workload's attributes
    e = [float(b) for b in p.budgets]
    assert po.privacy(_rows(s), e) <= 0.8 + 1e-12
    assert po.privacy(_rows(s), e) == pytest.approx(float(p.privacy_epsilon()), rel=1e-12)
    v = [po.dlap_var(x) for x in e]
    cov = po.gls_cov([r[None, :] for r in s], v, _prefix(8))
    np.testing.assert_allclose(p.query_variance("t"), np.diag(cov), rtol=1e-8)
    assert p.total_variance() == pytest.approx(np.trace(cov), rel=1e-8)
    if budgeting == "optimal":
        u = dm.plan(wk, epsilon=0.8, delta=0, strategy=s, budgeting="uniform")
        if objective == "sum":
            assert p.total_variance() <= u.total_variance() * (1 + 1e-6)
        else:
            assert p.max_variance() <= u.max_variance() * (1 + 1e-6)


def test_max_budget_program_brute_force():
    # every column is covered by two of the three rows; query variances Σ_r c_qr / ε_r²
    s_abs = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]], dtype=float)
    c = np.array([[1.0, 0.0, 2.0], [0.0, 5.0, 1.0], [3.0, 1.0, 0.0]])
    r = convex_max_budget_split(s_abs, c, 1.0)
    assert (s_abs.T @ r.eta).max() <= 1 + 1e-9
    g = np.linspace(0.005, 0.995, 397)
    x, y = np.meshgrid(g, g)
    z = np.minimum(1 - x, 1 - y)  # given two budgets, the third is as large as the columns allow
    ok = (x + y <= 1) & (z > 0)
    e = [x[ok], y[ok], z[ok]]
    brute = np.max([sum(c[q, i] / e[i] ** 2 for i in range(3)) for q in range(3)], axis=0).min()
    assert r.objective <= brute * (1 + 1e-6)
    assert r.objective == pytest.approx(brute, rel=5e-3)
    assert r.lower_bound <= r.objective * (1 + 1e-9) and r.lower_bound >= 0.99 * r.objective


def test_ranges_on_two_attributes_with_a_scaled_matrix():
    """A Kronecker strategy (Haar-like ±1/2 rows on t, cells on s) given with real entries that
    rescale exactly to integers; ranges on t × cells of s."""
    wk = dm.Workload(DOM, [("t", "s")], query_types={"t": "range"})
    haar = np.array([[1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, -1, -1, -1, -1], [1, 1, -1, -1, 0, 0, 0, 0],
                     [0, 0, 0, 0, 1, 1, -1, -1], [1, -1, 0, 0, 0, 0, 0, 0], [0, 0, 1, -1, 0, 0, 0, 0],
                     [0, 0, 0, 0, 1, -1, 0, 0], [0, 0, 0, 0, 0, 0, 1, -1]], dtype=float)
    s = np.kron(0.5 * haar, np.eye(2))
    p = dm.plan(wk, epsilon=1.0, delta=0, strategy=s, objective="sum_var")
    np.testing.assert_array_equal(p.strategy_matrix, np.kron(haar, np.eye(2)).astype(int))
    e = [float(b) for b in p.budgets]
    assert po.privacy(_rows(np.kron(haar, np.eye(2))), e) == pytest.approx(float(p.privacy_epsilon()), rel=1e-12)
    q = np.kron(_ranges(8), np.eye(2))
    cov = po.gls_cov([r[None, :] for r in np.kron(haar, np.eye(2))], [po.dlap_var(x) for x in e], q)
    np.testing.assert_allclose(p.query_variance(("t", "s")).reshape(-1), np.diag(cov), rtol=1e-8)
    # the cells of s alone are answered (sums of the t-total rows); of t alone too
    assert p.variance("s").shape == (2,) and p.variance("t").shape == (8,)


def test_typed_errors():
    wk = dm.Workload(DOM, [("t",)], query_types={"t": "prefix"})
    with pytest.raises(WorkloadError, match="row space"):
        dm.plan(wk, epsilon=1, delta=0, strategy=_tree8()[:7])  # no cells below the quarters
    with pytest.raises(PlanError, match="integer"):
        dm.plan(wk, epsilon=1, delta=0, strategy=np.vstack([_tree8(), [1, np.sqrt(2), 0, 0, 0, 0, 0, 1]]))
    with pytest.raises(PlanError, match="columns"):
        dm.plan(wk, epsilon=1, delta=0, strategy=np.eye(5))
    with pytest.raises(PlanError, match="NaN"):
        dm.plan(wk, epsilon=1, delta=0, strategy=np.full((2, 8), np.nan))
    with pytest.raises(PlanError, match="zero"):
        dm.plan(wk, epsilon=1, delta=0, strategy=np.vstack([np.eye(8), np.zeros(8)]))
    with pytest.raises(dm.BudgetError):
        dm.plan(wk, epsilon=-1, delta=0, strategy=np.eye(8))


def test_measure_release_round_trip(tmp_path):
    wk = dm.Workload(DOM, [("t", "s"), ("t",)], query_types={"t": "prefix"})
    s = np.kron(_tree8(), np.eye(2))
    p = dm.plan(wk, epsilon=1.0, delta=0, strategy=s, objective="sum_var")
    g = np.random.default_rng(2)
    df = pd.DataFrame({"t": g.integers(0, 8, 200), "s": g.integers(0, 2, 200)})
    meas = p.measure(df)
    assert meas.noise == "discrete_laplace" and meas.randomness == "os_csprng"
    # consistent: one x̂ answers every marginal, so t's prefixes are the (t, s) prefixes summed
    ts = meas.answer(("t", "s"))["estimate"].to_numpy().reshape(8, 2).sum(axis=1)
    np.testing.assert_allclose(meas.answer("t")["estimate"].to_numpy(), ts, atol=1e-8)
    out = dm.write_release(meas, tmp_path / "rel")
    rel = dm.load_release(out)
    assert isinstance(rel.plan, MatrixPurePlan) and rel.plan.budgets == p.budgets
    assert rel.privacy["delta"] == 0.0 and rel.privacy["pure_epsilon"] == pytest.approx(p.pure_epsilon)
    np.testing.assert_allclose(rel.table(("t", "s"))["estimate"], meas.answer(("t", "s"))["estimate"], atol=1e-9)
    assert isinstance(plan_from_dict(p.to_dict()), MatrixPurePlan)
    bad = p.to_dict()
    bad["budgets"] = ["1/1"] * len(bad["budgets"])
    with pytest.raises(PlanError, match="more than its epsilon"):
        MatrixPurePlan.from_dict(bad)


def test_privacy_of_the_released_maps():
    wk = dm.Workload(DOM, [("t", "s")], query_types={"t": "range"})
    s = np.kron(_tree8(), np.eye(2))
    p = dm.plan(wk, epsilon=0.6, delta=0, strategy=s, objective="sum_var")
    _, mechs = p.mechanisms()
    worst = 0.0
    for cell in itertools.product(range(8), range(2)):
        loss = 0.0
        for m in mechs:
            table = np.zeros((8, 2), dtype=np.int64)
            table[cell] = 1
            out = m.signal(table)
            assert out.dtype.kind == "i"
            loss += float(m.scale) * float(np.abs(out).sum())
        worst = max(worst, loss)
    assert worst == pytest.approx(p.pure_epsilon, rel=1e-12) and worst <= 0.6
