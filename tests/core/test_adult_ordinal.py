"""Adult's binned numbers (age, fnlwgt, capital-gain, capital-loss, hours-per-week) are ordinal
in the shipped domain: ranges are allowed on them, and the kind changes no plan."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import dpmatrix as dm
from dpmatrix._reconstruct.linear_query import parse_where

DATA = Path(dm.__file__).resolve().parent / "data"
NUMBERS = ("age", "fnlwgt", "capital-gain", "capital-loss", "hours-per-week")


def _domains():
    spec = json.loads((DATA / "adult-domain.json").read_text())
    plain = {a: (v["size"] if a in NUMBERS else v) for a, v in spec.items()}  # the same sizes, categorical
    return dm.Domain.from_dict(spec), dm.Domain.from_dict(plain)


def test_numbers_are_ordinal_without_labels():
    shipped, _ = _domains()
    for a in NUMBERS:
        attr = shipped.attributes[shipped.index(a)]
        assert attr.kind == "ordinal" and attr.labels is None


@pytest.mark.parametrize("objective", ["max_var", "sum_var"])
def test_the_kind_changes_no_plan(objective):
    shipped, plain = _domains()
    attrs = ["age", "sex", "hours-per-week", "income>50K"]
    plans = []
    for dom in (shipped, plain):
        sub = dm.Domain([dom.attributes[dom.index(a)] for a in attrs])
        plans.append(dm.plan(dm.Workload.marginals(sub, 2, upto=True), rho=0.5, objective=objective))
    a, b = plans
    assert a.workload.sets == b.workload.sets
    np.testing.assert_array_equal(np.asarray(a.sigma2), np.asarray(b.sigma2))


def test_a_range_of_age_is_a_range_and_of_race_is_refused():
    shipped, _ = _domains()
    assert parse_where(shipped, ["age=8..37"], "labels") == {"age": (8, 37)}
    with pytest.raises(dm.DPMatrixError, match="'race' is categorical"):
        parse_where(shipped, ["race=White..Other"], "labels")
