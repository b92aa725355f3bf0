"""Paper appendix A (the worked ResidualPlanner example), reproduced with dpmatrix.

Expected numbers are the paper's (A.3–A.6) or derived by hand in the comments.
"""

import math

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix.engines import project

DOM = dm.Domain(
    [
        dm.Attribute("Att1", 2, labels=("a", "b")),
        dm.Attribute("Att2", 2, labels=("y", "n")),
        dm.Attribute("Att3", 3, labels=("1", "2", "3")),
    ]
)
WK = dm.Workload(DOM, [("Att1",), ("Att1", "Att2"), ("Att2", "Att3")])
# Table 15: (a,n,2) (b,n,3) (b,y,3) (a,n,2) (b,y,3) as codes
DATA = pd.DataFrame(
    [(0, 1, 1), (1, 1, 2), (1, 0, 2), (0, 1, 1), (1, 0, 2)], columns=["Att1", "Att2", "Att3"]
)


def test_closure():
    assert list(WK.closure.sets) == [(), (0,), (1,), (2,), (0, 1), (1, 2)]


def test_pcost_coefficients_A5():
    plan = dm.plan(WK, pcost=1.0)
    coef = dict(zip(plan.closure.sets, plan.coefficients.p))
    expected = {(): 1, (0,): 1 / 2, (1,): 1 / 2, (2,): 2 / 3, (0, 1): 1 / 4, (1, 2): 1 / 3}
    for k, v in expected.items():
        assert coef[k] == pytest.approx(v, rel=1e-15)


def test_eight_noisy_numbers_and_their_noiseless_values():
    plan = dm.plan(WK, pcost=1.0)
    meas = plan.measure(DATA, rng=np.random.default_rng(1))
    assert sum(v.size for v in meas.noisy.values()) == 8
    # Noiseless outputs R_A x, derived by hand from Table 15 (counts: a=2, b=3, y=2, n=3,
    # Att3: 1→0, 2→2, 3→3; ay=0, an=2, by=2, bn=1; y1=0,y2=0,y3=2; n1=0,n2=2,n3=1):
    expected = {
        (): [5],  # total
        (0,): [2 - 3],  # a − b
        (1,): [2 - 3],  # y − n
        (2,): [0 - 2, 0 - 3],  # (1 − 2, 1 − 3)
        (0, 1): [0 - 2 - 2 + 1],  # (a−b)⊗(y−n)
        (1, 2): [(0 - 0) - (0 - 2), (0 - 2) - (0 - 1)],  # (y−n)⊗Sub3
    }
    full = DATA.groupby(["Att1", "Att2", "Att3"]).size()
    table = np.zeros((2, 2, 3))
    for (i, j, k), c in full.items():
        table[i, j, k] = c
    for key, vals in expected.items():
        mech = plan.mechanism(key)
        v = project(table, (0, 1, 2), key)
        out = mech.measure(v, np.zeros(mech.noise_shape))
        np.testing.assert_allclose(out.ravel(), vals, atol=1e-12)


def test_variance_coefficients_A6():
    plan = dm.plan(WK, pcost=1.0)
    v = np.asarray(plan.coefficients.sum_var.T @ WK.weights).ravel()
    got = dict(zip(plan.closure.sets, v))
    expected = {(): 11 / 12, (0,): 3 / 2, (1,): 5 / 6, (2,): 1, (0, 1): 1, (1, 2): 2}
    for k, val in expected.items():
        assert got[k] == pytest.approx(val, rel=1e-14)


@pytest.mark.parametrize("c", [1.0, 2.5])
def test_optimal_sum_of_variances_A6(c):
    plan = dm.plan(WK, pcost=c, objective="sum_var")
    # T = (√(11/12·1) + √(3/2·1/2) + √(5/6·1/2) + √(2/3) + √(1/4) + √(2/3))² / c ≈ 21.18 / c
    T = (
        math.sqrt(11 / 12) + math.sqrt(3 / 4) + math.sqrt(5 / 12) + math.sqrt(2 / 3) + 0.5
        + math.sqrt(2 / 3)
    ) ** 2 / c
    assert round(T * c, 2) == 21.18
    assert plan.loss() == pytest.approx(T, rel=1e-12)
    assert plan.total_variance() == pytest.approx(T, rel=1e-12)
    s2_empty = plan.sigma2[plan.closure.index(())]
    assert s2_empty == pytest.approx(math.sqrt(T * c * 12 / 11) / c, rel=1e-12)
    assert round(s2_empty * c, 1) == 4.8
    assert plan.pcost == pytest.approx(c, rel=1e-12)


def test_marginal_variances_A5():
    sigma2 = {(): 1.3, (0,): 0.7, (1,): 2.1, (2,): 0.4, (0, 1): 1.9, (1, 2): 0.8}
    base = dm.plan(WK, pcost=1.0)
    plan = dm.ResidualPlan(WK, np.array([sigma2[s] for s in WK.closure.sets]), "sum_var", base.strategies)
    # A.5 formulas
    v1 = sigma2[()] / 4 + sigma2[(0,)] / 2
    v12 = sigma2[()] / 16 + sigma2[(0,)] / 8 + sigma2[(1,)] / 8 + sigma2[(0, 1)] / 4
    v23 = sigma2[()] / 36 + sigma2[(1,)] / 18 + sigma2[(2,)] * (2 / 3) / 4 + sigma2[(1, 2)] / 3
    np.testing.assert_allclose(plan.variance("Att1"), np.full(2, v1), rtol=1e-14)
    np.testing.assert_allclose(plan.variance(("Att1", "Att2")), np.full((2, 2), v12), rtol=1e-14)
    np.testing.assert_allclose(plan.variance(("Att2", "Att3")), np.full((2, 3), v23), rtol=1e-14)


def test_labelled_answers_are_consistent_and_unbiased_in_expectation():
    plan = dm.plan(WK, pcost=1.0)
    meas = plan.measure(DATA, rng=np.random.default_rng(3))
    t = meas.marginal(("Att1", "Att2"))
    assert list(t.columns) == ["Att1", "Att2", "estimate", "variance", "std", "lower", "upper"]
    assert list(t["Att1"].astype(str)) == ["a", "a", "b", "b"]
    # consistency: the Att1 marginal equals the row sums of the (Att1, Att2) marginal,
    # and the totals of the two 2-way marginals agree
    e12 = meas.estimate(("Att1", "Att2"))
    np.testing.assert_allclose(meas.estimate("Att1"), e12.sum(axis=1), atol=1e-9)
    np.testing.assert_allclose(e12.sum(), meas.estimate(("Att2", "Att3")).sum(), atol=1e-9)
    np.testing.assert_allclose(meas.estimate("Att2"), meas.estimate(("Att2", "Att3")).sum(axis=1), atol=1e-9)
