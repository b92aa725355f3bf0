"""Measurements: the frozen result of measuring a plan, and its tidy tables."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm


@pytest.fixture(scope="module")
def measured():
    dom = dm.Domain({"a": 2, "b": 3})
    data = pd.DataFrame({"a": [0, 0, 1, 1, 1, 0], "b": [0, 1, 2, 2, 0, 0]})
    plan = dm.plan(dm.Workload(dom, [("a", "b")]), pcost=1e12)  # noise sd ~1e-6
    return data, plan, plan.measure(data, rng=np.random.default_rng(0))


def test_is_frozen(measured):
    _, _, meas = measured
    with pytest.raises(dataclasses.FrozenInstanceError):
        meas.noise = "x"


def test_marginal_is_the_count_table_at_a_huge_budget(measured):
    data, plan, meas = measured
    counts = np.zeros((2, 3))
    for a, b in zip(data["a"], data["b"]):  # counted by hand
        counts[a, b] += 1
    np.testing.assert_allclose(meas.estimate(("a", "b")), counts, atol=1e-3)
    np.testing.assert_allclose(meas.estimate("a"), counts.sum(axis=1), atol=1e-3)
    table = meas.marginal(("a", "b"))
    assert {"estimate", "variance", "std", "lower", "upper"} <= set(table.columns)
    np.testing.assert_allclose(table["variance"].to_numpy(), plan.variance(("a", "b")).ravel())
    assert np.all(table["lower"] <= table["estimate"]) and np.all(table["estimate"] <= table["upper"])


def test_query_of_a_sum_of_cells(measured):
    data, _, meas = measured
    ans = meas.query({"a": [1], "b": [0, 2]})
    assert ans.estimate == pytest.approx(3.0, abs=1e-3)  # rows (1,2), (1,2), (1,0)
