"""Bad input gets a typed error with an actionable message, and nothing is lost."""

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm

DOM = dm.Domain({"age": 5, "sex": 2, "race": 3})


def data(n=20, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(0, 5, n), "sex": rng.integers(0, 2, n), "race": rng.integers(0, 3, n)})


def test_unknown_attribute_suggests_a_name():
    with pytest.raises(dm.UnknownAttributeError, match="did you mean 'race'"):
        dm.Workload(DOM, [("age", "rase")])
    with pytest.raises(dm.UnknownAttributeError):
        dm.plan(dm.Workload.marginals(DOM, 1), pcost=1).variance("height")


def test_duplicate_attribute_in_a_marginal():
    with pytest.raises(dm.WorkloadError, match="more than once"):
        dm.Workload(DOM, [("age", "age")])


def test_duplicate_marginal_and_duplicate_domain_attribute():
    with pytest.raises(dm.WorkloadError, match="listed twice"):
        dm.Workload(DOM, [("age", "sex"), ("sex", "age")])
    with pytest.raises(dm.DomainError, match="appears twice"):
        dm.Domain([dm.Attribute("a", 2), dm.Attribute("a", 3)])


@pytest.mark.parametrize("size", [1, 0, -3])
def test_size_below_two(size):
    with pytest.raises(dm.DomainError, match="at least 2"):
        dm.Domain({"a": size})


def test_bad_size_types():
    with pytest.raises(dm.DomainError):
        dm.Domain({"a": 2.5})
    with pytest.raises(dm.DomainError):
        dm.Domain({"a": True})
    with pytest.raises(dm.DomainError):
        dm.Domain({})


def test_codes_outside_domain_name_column_and_rows():
    df = data()
    df.loc[[3, 7], "race"] = 3
    plan = dm.plan(dm.Workload.marginals(DOM, 2), pcost=1)
    with pytest.raises(dm.DataError, match=r"column 'race': 2 rows with a code outside 0\.\.2: 3"):
        plan.measure(df, rng=np.random.default_rng(0))
    df.loc[3, "race"] = -1
    with pytest.raises(dm.DataError, match="outside"):
        plan.measure(df, rng=np.random.default_rng(0))


def test_nan_and_non_integer_and_missing_column():
    plan = dm.plan(dm.Workload.marginals(DOM, 2), pcost=1)
    df = data().astype(float)
    df.loc[2, "age"] = np.nan
    with pytest.raises(dm.DataError, match=r"column 'age': 1 row with a missing value"):
        plan.measure(df, rng=np.random.default_rng(0))
    df = data().astype(float)
    df.loc[2, "age"] = 1.5
    with pytest.raises(dm.DataError, match=r"column 'age': 1 row with a non-integer value, e\.g\. 1\.5"):
        plan.measure(df, rng=np.random.default_rng(0))
    with pytest.raises(dm.DataError, match=r"lack column\(s\) required by the domain: 'sex'"):
        plan.measure(data().drop(columns="sex"), rng=np.random.default_rng(0))


def test_bad_weights():
    with pytest.raises(dm.WorkloadError, match="non-negative"):
        dm.Workload(DOM, [("age",), ("sex",)], weights=[1.0, -2.0])
    with pytest.raises(dm.WorkloadError, match="one weight per marginal"):
        dm.Workload(DOM, [("age",), ("sex",)], weights=[1.0])
    with pytest.raises(dm.WorkloadError, match="finite"):
        dm.Workload(DOM, [("age",)], weights=[np.nan])
    with pytest.raises(dm.WorkloadError, match="at least one weight"):
        dm.Workload(DOM, [("age",)], weights=[0.0])


def test_empty_workload_and_bad_k():
    with pytest.raises(dm.WorkloadError, match="empty"):
        dm.Workload(DOM, [])
    with pytest.raises(dm.WorkloadError, match="between 0 and 3"):
        dm.Workload.marginals(DOM, 4)
    with pytest.raises(dm.WorkloadError):
        dm.Workload.marginals(DOM, -1, upto=True)


@pytest.mark.parametrize("budget", [{"pcost": 0}, {"rho": -0.5}, {"epsilon": 0, "delta": 1e-6}, {}])
def test_zero_negative_or_missing_budget(budget):
    with pytest.raises(dm.BudgetError):
        dm.plan(dm.Workload.marginals(DOM, 1), **budget)


def test_bad_objective_and_rng_and_unmeasured_marginal():
    wk = dm.Workload.marginals(DOM, 1)
    with pytest.raises(dm.PlanError, match="unknown objective"):
        dm.plan(wk, pcost=1, objective="mean_var")
    plan = dm.plan(wk, pcost=1)
    with pytest.raises(dm.DataError, match="numpy.random.Generator"):
        plan.measure(data(), rng=42)
    meas = plan.measure(data(), rng=np.random.default_rng(0))
    with pytest.raises(dm.NotMeasuredError, match="not in the closure"):
        meas.marginal(("age", "sex"))
    with pytest.raises(dm.NotMeasuredError):
        plan.variance(("age", "sex"))


def test_errors_leave_inputs_untouched():
    df = data()
    before = df.copy()
    df2 = df.copy()
    df2.loc[0, "age"] = 99
    plan = dm.plan(dm.Workload.marginals(DOM, 2), pcost=1)
    with pytest.raises(dm.DataError):
        plan.measure(df2, rng=np.random.default_rng(0))
    plan.measure(df, rng=np.random.default_rng(0))
    pd.testing.assert_frame_equal(df, before)
