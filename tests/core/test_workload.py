"""Workload: marginal sets, their downward closure and query counts."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import dpmatrix as dm
from dpmatrix.errors import DPMatrixError


def test_all_two_way_marginals_and_their_closure():
    dom = dm.Domain({"a": 3, "b": 4, "c": 5})
    wk = dm.Workload.marginals(dom, 2)
    assert wk.sets == ((0, 1), (0, 2), (1, 2))
    # downward closure by hand: ∅, the three singletons and the three pairs
    want = {()} | {(i,) for i in range(3)} | set(itertools.combinations(range(3), 2))
    assert set(wk.closure.sets) == want
    np.testing.assert_array_equal(wk.cells, [12, 15, 20])
    assert wk.index(("c", "a")) == 1


def test_upto_includes_lower_orders():
    dom = dm.Domain.from_sizes([2, 2, 2])
    wk = dm.Workload.marginals(dom, 2, upto=True)
    assert len(wk) == 1 + 3 + 3  # ∅, singletons, pairs
    assert sum(wk.cells) == 1 + 3 * 2 + 3 * 4


def test_query_types_change_query_counts():
    dom = dm.Domain({"age": 10, "sex": 2})
    wk = dm.Workload(dom, [{"attributes": ("age", "sex"), "query_types": {"age": "prefix"}}])
    assert int(wk.n_queries[0]) == 10 * 2  # one prefix query per age value
    wk2 = dm.Workload(dom, [("age",)], query_types={"age": "range"})
    assert int(wk2.n_queries[0]) == math.comb(10, 2) + 10  # all ranges [i, j], i ≤ j


def test_dict_round_trip():
    dom = dm.Domain({"a": 3, "b": 4})
    wk = dm.Workload(dom, [("a",), ("a", "b")], weights=[1.0, 2.0])
    back = dm.Workload.from_dict(dom, wk.to_dict())
    assert back.sets == wk.sets
    np.testing.assert_array_equal(back.weights, wk.weights)


def test_unknown_attribute():
    dom = dm.Domain({"a": 3})
    with pytest.raises(DPMatrixError):
        dm.Workload(dom, [("b",)])
