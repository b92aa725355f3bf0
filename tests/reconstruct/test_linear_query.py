"""Counts, ranges and contrasts with exact variances (reconstruct/linear_query.py) and
``Estimator.query_vector`` of every planner, checked against brute force on small domains:
the explicit stacked strategy, its noise covariance and the GLS / pseudo-inverse estimator built
independently (tests/oracle), against simulation, and against the naive sum of cell variances
(which is wrong)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
import oracle
from dpmatrix._queries import QueryWorkload
from dpmatrix._reconstruct.linear_query import count, naive_cell_sum_variance, parse_where, query_vectors
from dpmatrix.planners._querysmasher.planner import plan_querysmasher
from planners.test_querysmasher import stacked

SIZES = [2, 3, 4]
DATA = pd.DataFrame({"a0": [0, 1, 1, 0, 1, 0], "a1": [2, 0, 1, 1, 2, 0], "a2": [3, 0, 1, 2, 2, 1]})


def _rp_oracle(plan):
    """Explicit (B, Σ) of a plain ResidualPlanner plan: every measured closure set's residual
    matrix and noise covariance (RP+ eq. 3)."""
    sets = [s for s, m in zip(plan.closure.sets, plan.measured) if m]
    s2 = {s: float(plan.sigma2[i]) for i, s in enumerate(plan.closure.sets)}
    return oracle.stack_mechanism(SIZES, sets, s2)


def _lift(key, q):
    """Query over the marginal on ``key`` as a query over the full domain's cells."""
    return np.asarray(q, dtype=float).reshape(1, -1) @ oracle.marginal_query(SIZES, key)


@pytest.fixture(scope="module")
def rp():
    dom = dm.Domain.from_sizes(SIZES)
    plan = dm.plan(dm.Workload(dom, [(0, 1), (1, 2)]), rho=0.7)
    return plan, plan.measure(DATA, rng=np.random.default_rng(3))


def test_residual_plan_query_variance_is_the_gls_variance(rp):
    plan, meas = rp
    B, Sigma = _rp_oracle(plan)
    rng = np.random.default_rng(0)
    for key in [(0, 1), (1, 2), (1,), ()]:
        shape = tuple(SIZES[a] for a in key)
        for q in [np.ones(shape), rng.normal(size=shape), (rng.random(shape) < 0.5).astype(float)]:
            got = meas.query_vector(key, q)
            want = oracle.gls_covariance(_lift(key, q), B, Sigma)[0, 0]
            assert got.variance == pytest.approx(want, rel=1e-9)
            est = oracle.gls_estimate(_lift(key, q), B, Sigma, _stacked_outputs(plan, meas))[0]
            assert got.estimate == pytest.approx(est, rel=1e-9, abs=1e-9)


def _stacked_outputs(plan, meas):
    """The noisy outputs in the oracle's basis: ``R_A x + noise`` re-expressed from the plan's
    residual estimates (``R_A`` rows span the residual space, so ``R_A`` applied to ``r_A``)."""
    out = []
    for s, m in zip(plan.closure.sets, plan.measured):
        if not m:
            continue
        R = oracle.kron_all([oracle.sub_matrix(SIZES[i]) for i in s]) if s else np.ones((1, 1))
        out.append(R @ np.asarray(meas.residual(s), dtype=float).reshape(-1))
    return np.concatenate(out)


def test_count_range_and_contrast_match_brute_force(rp):
    plan, meas = rp
    B, Sigma = _rp_oracle(plan)
    # a1 in 1..2 and a2 = 2: a count over the cells of the (a1, a2) marginal
    a = count(meas, {"a1": (1, 2), "a2": 2})
    q = np.zeros((3, 4))
    q[1:3, 2] = 1
    assert a.variance == pytest.approx(oracle.gls_covariance(_lift((1, 2), q), B, Sigma)[0, 0], rel=1e-9)
    assert a.estimate == pytest.approx(float(np.sum(q * meas.estimate((1, 2)))), rel=1e-12)
    # a difference of two counts: its own variance, not the sum of the two
    d = count(meas, {"a1": 0}, contrast=({"a0": 0}, {"a0": 1}))
    qd = np.zeros((2, 3))
    qd[0, 0], qd[1, 0] = 1, -1
    want = oracle.gls_covariance(_lift((0, 1), qd), B, Sigma)[0, 0]
    assert d.variance == pytest.approx(want, rel=1e-9)
    a0 = count(meas, {"a1": 0, "a0": 0}).variance
    a1 = count(meas, {"a1": 0, "a0": 1}).variance
    assert abs(d.variance - (a0 + a1)) > 1e-3 * d.variance  # correlated: the sum is not the variance
    # interval at the asked level
    assert d.upper - d.lower == pytest.approx(2 * 1.959963984540054 * np.sqrt(want), rel=1e-9)


def test_by_gives_one_exact_row_per_group(rp):
    plan, meas = rp
    B, Sigma = _rp_oracle(plan)
    df = count(meas, {"a2": (0, 1)}, by="a1", level=0.9).to_frame()
    assert list(df.columns) == ["a1", "estimate", "variance", "std", "lower", "upper", "level"]
    assert len(df) == 3
    for v in range(3):
        q = np.zeros((3, 4))
        q[v, 0:2] = 1
        assert df["variance"][v] == pytest.approx(oracle.gls_covariance(_lift((1, 2), q), B, Sigma)[0, 0], rel=1e-9)
    assert (df["level"] == 0.9).all()


@pytest.mark.parametrize(
    ("where", "by", "key", "kept"),
    [
        ({"a1": (1, 2), "a2": (0, 1)}, "a1", (1, 2), {"a1": [1, 2]}),  # a condition on the by attribute
        ({"a1": [0, 2], "a2": 3}, ["a1", "a2"], (1, 2), {"a1": [0, 2], "a2": [3]}),
        ({"a0": 1, "a1": [0, 1]}, ["a0", "a1"], (0, 1), {"a0": [1], "a1": [0, 1]}),
    ],
)
def test_by_with_a_condition_on_the_by_attribute_is_one_grouped_pass(rp, monkeypatch, where, by, key, kept):
    """``count(where, by=X)`` with ``where`` naming ``X``: each group is the query of its value
    when the condition keeps it (exact GLS variance, built here over the whole domain) and the
    zero query (0, variance 0) when it leaves it out — answered in one grouped pass over the
    marginal, not one query vector per group."""
    plan, meas = rp
    B, Sigma = _rp_oracle(plan)
    calls = []
    monkeypatch.setattr(type(meas), "query_vector", lambda *a, **k: pytest.fail("one query per group"))
    real = type(meas).grouped_answers
    monkeypatch.setattr(type(meas), "grouped_answers", lambda *a, **k: calls.append(1) or real(*a, **k))
    got = count(meas, where, by=by)
    assert calls == [1]
    names = ["a0", "a1", "a2"]
    by_names = [by] if isinstance(by, str) else by
    key_sizes = [SIZES[a] for a in key]
    rows = got.to_frame()
    estimate = meas.estimate(key)
    for i, row in rows.iterrows():
        q = np.ones(key_sizes)
        for a, size in zip(key, key_sizes):  # the condition and the group, attribute by attribute
            sel = np.zeros(size)
            name = names[a]
            if name in by_names:
                value = int(row[name])
                sel[value] = 1.0 if value in kept.get(name, range(size)) else 0.0
            elif name in where:
                w = where[name]
                sel[list(range(w[0], w[1] + 1)) if isinstance(w, tuple) else w] = 1.0
            else:
                sel[:] = 1.0
            q = q * sel.reshape([-1 if b == a else 1 for b in key])
        want = oracle.gls_covariance(_lift(key, q), B, Sigma)[0, 0] if q.any() else 0.0
        assert row["variance"] == pytest.approx(want, rel=1e-9, abs=1e-15), i
        assert row["estimate"] == pytest.approx(float(np.sum(q * estimate)), rel=1e-9, abs=1e-12), i
    assert (rows["variance"] == 0).sum() == len(rows) - np.prod([len(v) for v in kept.values()]) * np.prod(
        [SIZES[names.index(b)] for b in by_names if b not in kept])


def test_naive_sum_of_cell_variances_is_wrong(rp):
    """The total of the 12-cell (a1, a2) table: the exact variance is the 0-way residual's
    alone; summing the cells' variances ignores their covariances and doubles it."""
    plan, meas = rp
    B, Sigma = _rp_oracle(plan)
    q = np.ones((3, 4))
    exact = meas.query_vector((1, 2), q).variance
    naive = naive_cell_sum_variance(meas, (1, 2), q)
    assert exact == pytest.approx(oracle.gls_covariance(_lift((1, 2), q), B, Sigma)[0, 0], rel=1e-9)
    assert naive > 2 * exact
    # and the count API answers the total exactly, from the smallest marginal
    assert count(meas).variance == pytest.approx(exact, rel=1e-9)


def test_query_variance_matches_simulation():
    """Empirical variance of 2000 independent releases (floating-point Gaussian noise, the same
    data) against the exact variance: the ratio (a mean of 2000 χ²₁, sd 0.032) lies within
    about 3 sd of 1."""
    dom = dm.Domain.from_sizes(SIZES)
    plan = dm.plan(dm.Workload(dom, [(0, 1), (1, 2)]), rho=0.7)
    qw = {"a1": (1, 2), "a2": 2}
    rng = np.random.default_rng(11)
    ests = np.array([count(plan.measure(DATA, rng=rng), qw).estimate for _ in range(2000)])
    exact = count(plan.measure(DATA, rng=rng), qw).variance
    truth = float(((DATA.a1 >= 1) & (DATA.a2 == 2)).sum())
    ratio = np.mean((ests - truth) ** 2) / exact
    assert 0.9 < ratio < 1.1
    assert abs(np.mean(ests) - truth) < 4 * np.sqrt(exact / 2000)


def test_refusal_names_the_missing_marginal(rp):
    _, meas = rp
    with pytest.raises(dm.NotMeasuredError, match=r"needs the marginal on \['a0', 'a2'\]"):
        count(meas, {"a0": 1, "a2": 0})
    # every value of a2 selected: summed out, answered from a0's marginal
    assert count(meas, {"a0": 1, "a2": [0, 1, 2, 3]}).variance == pytest.approx(count(meas, {"a0": 1}).variance)


# -- QuerySmasher: sub-marginals and any query of the row space ------------------------------------
def _qs_workload():
    dom = dm.Domain.from_sizes(SIZES)
    return (QueryWorkload(dom)
            .add_kron((0, 1), ["prefix", "range"], weight=2.0)
            .add_kron((1, 2), ["prefix", "prefix"]))


@pytest.fixture(scope="module")
def qs():
    plan = plan_querysmasher(_qs_workload(), pcost=1.0)
    return plan, plan.measure(DATA, noise="gaussian", rng=np.random.default_rng(4))


def test_querysmasher_answers_sub_marginals_and_cells_with_gls_variance(qs):
    plan, meas = qs
    B, Sigma = stacked(meas.plan, SIZES)
    # cells of a full-rank prefix x range group: every cell is answerable
    for key in [(0, 1), (0,), (1,), (1, 2), ()]:
        Q = oracle.marginal_query(SIZES, key)
        cov = oracle.gls_covariance(Q, B, Sigma)
        np.testing.assert_allclose(meas.variance(key).reshape(-1), np.diag(cov), rtol=1e-8)
        est = oracle.gls_estimate(Q, B, Sigma, _qs_outputs(meas))
        np.testing.assert_allclose(meas.estimate(key).reshape(-1), est, rtol=1e-8, atol=1e-8)
        rng = np.random.default_rng(len(key))
        q = rng.normal(size=tuple(SIZES[a] for a in key))
        got = meas.query_vector(key, q)
        assert got.variance == pytest.approx(float(q.reshape(-1) @ cov @ q.reshape(-1)), rel=1e-8)


def _qs_outputs(meas):
    from planners.test_querysmasher import explicit_strategy

    out = []
    for S, r in meas.plan.residuals.items():
        Bs = explicit_strategy(meas.plan.solutions[r.structure])
        out.append(np.asarray(meas.noisy[S], dtype=float).reshape(-1)[: Bs.shape[0]])
    return np.concatenate(out)


def test_querysmasher_refuses_outside_the_closure_by_name(qs):
    _, meas = qs
    with pytest.raises(dm.NotMeasuredError, match="did not measure"):
        meas.query_vector((0, 2), np.ones((2, 4)) - np.eye(2, 4))


# -- explicit (LSA) ------------------------------------------------------------------------------
def test_explicit_lsa_query_vector_is_the_pinv_variance():
    dom = dm.Domain.from_sizes([3, 4])
    plan = dm.plan(dm.Workload(dom, [(0, 1)]), pcost=1.0, planner="lsa")
    meas = plan.measure(pd.DataFrame({"a0": [0, 1, 2], "a1": [3, 0, 1]}), noise="gaussian",
                        rng=np.random.default_rng(1))
    A = np.asarray(meas.plan.strategy, dtype=float)
    P = np.linalg.pinv(A.T @ A)
    rng = np.random.default_rng(2)
    for _ in range(3):
        q = rng.normal(size=(3, 4))
        got = meas.query_vector((0, 1), q)
        u = q.reshape(-1)
        assert got.variance == pytest.approx(float(meas.plan.sigma2) * u @ P @ u, rel=1e-8)
        assert got.estimate == pytest.approx(float(u @ np.linalg.pinv(A) @ meas.noisy[(0, 1)]), rel=1e-8, abs=1e-8)
    # a sub-marginal count through the strategy: the lifted query
    sub = count(meas, {"a0": 1})
    u = np.zeros((3, 4))
    u[1] = 1
    assert sub.variance == pytest.approx(float(meas.plan.sigma2) * u.reshape(-1) @ P @ u.reshape(-1), rel=1e-8)


# -- parsing -------------------------------------------------------------------------------------
def test_parse_where_labels_ranges_bins_and_codes():
    dom = dm.Domain.from_dict({
        "age": {"size": 90, "kind": "ordinal"},
        "race": {"labels": ["White", "Black", "Other"]},
        "wage": {"size": 3, "bins": [0, 500, 1000, 5000]},
        "edu": {"kind": "ordinal", "labels": ["HS", "BA", "MA", "PhD"]},
    })
    w = parse_where(dom, ["age=25..54", "race=White,Black", "wage=0..1000", "edu=BA..PhD"])
    key, qs, _ = query_vectors(dom, w)
    assert key == (0, 1, 2, 3) and len(qs) == 1
    q = qs[0]
    assert q.sum() == 30 * 2 * 2 * 3
    assert q[25, 0, 0, 1] == 1 and q[24, 0, 0, 1] == 0 and q[54, 1, 1, 3] == 1 and q[55, 1, 1, 3] == 0
    assert q[30, 2, 0, 1] == 0 and q[30, 0, 2, 1] == 0 and q[30, 0, 0, 0] == 0
    codes = parse_where(dom, ["race=0,1"], encoding="codes")
    assert query_vectors(dom, codes)[1][0].tolist() == [1, 1, 0]
    assert query_vectors(dom, parse_where(dom, ["edu=1..2"], encoding="codes"))[1][0].tolist() == [0, 1, 1, 0]
    # a range on an unordered attribute means nothing, in labels or in codes: the same refusal
    for text, encoding in (("race=White..Black", "labels"), ("race=0..1", "codes")):
        with pytest.raises(dm.WorkloadError, match=r"'race' is categorical: its values have no order, so a "
                           r"range '.*' means nothing; list the values instead \(race=V1,V2,...\)"):
            parse_where(dom, [text], encoding=encoding)
    with pytest.raises(dm.WorkloadError, match="cuts the bin"):
        query_vectors(dom, parse_where(dom, ["wage=0..700"]))
    with pytest.raises(dm.WorkloadError, match="ATTR=VALUE"):
        parse_where(dom, ["age"])


# -- pure ε-DP (Laplace / discrete Laplace noise): tree, Haar, cells, matrix strategies -----------
PURE_DOM = {"a": {"size": 8, "kind": "ordinal"}, "b": 3}
PURE_DATA = pd.DataFrame({"a": [0, 3, 5, 7, 2, 4], "b": [0, 1, 2, 1, 0, 2]})


@pytest.mark.filterwarnings("ignore::dpmatrix._measure.discrete.InsecureRandomnessWarning")
@pytest.mark.parametrize("types, options", [
    (None, {}),                                         # per-residual cells (PurePlan)
    ({"a": "prefix"}, {}),                              # hierarchical / Haar on a (HierarchicalPlan)
    (None, {"strategy": np.kron(oracle.prefix_matrix(8), np.eye(3))}),  # a strategy matrix
])
def test_pure_plans_count_variance_matches_simulation(types, options):
    """A range × set count of a pure ε-DP release: the exact variance from the estimator's
    covariance against 1,500 independent releases (Laplace-type noise: the mean squared error
    over 1,500 draws has sd ≲ 0.06 of its mean; band ±25 %)."""
    dom = dm.Domain.from_dict(PURE_DOM)
    wk = dm.Workload(dom, [("a", "b")], query_types=types) if types else dm.Workload(dom, [("a", "b")])
    plan = dm.plan(wk, epsilon=1.0, delta=0, **options)
    where = {"a": (2, 5), "b": [0, 2]}
    truth = float(((PURE_DATA.a >= 2) & (PURE_DATA.a <= 5) & PURE_DATA.b.isin([0, 2])).sum())
    rng = np.random.default_rng(5)
    exact = count(plan.measure(PURE_DATA, rng=rng), where).variance
    ests = np.array([count(plan.measure(PURE_DATA, rng=rng), where).estimate for _ in range(1500)])
    assert 0.75 < np.mean((ests - truth) ** 2) / exact < 1.25

