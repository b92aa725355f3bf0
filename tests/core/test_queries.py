"""Query families and QueryWorkload builders (QuerySmasher section 8.1)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import dpmatrix as dm
from dpmatrix._queries import (
    QueryWorkload,
    abs_queries,
    affine_queries,
    circular_range_rows,
    prefix_rows,
    random_queries,
    range_rows,
)
from dpmatrix.errors import WorkloadError


def test_rows_by_hand():
    np.testing.assert_array_equal(prefix_rows(3), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    R = range_rows(3)
    assert R.shape == (6, 3)
    assert {tuple(r) for r in R} == {(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (0, 1, 1), (1, 1, 1)}
    C = circular_range_rows(3)
    assert C.shape == (9, 3)
    assert {tuple(r) for r in C} == {(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (0, 1, 1), (1, 0, 1), (1, 1, 1)}
    assert sum(tuple(r) == (1, 1, 1) for r in C) == 3  # full range once per start


def test_affine_abs_by_hand():
    A = affine_queries(2, 3)  # cells (a, b) in C order: (0,0) (0,1) (0,2) (1,0) (1,1) (1,2)
    assert A.shape == (4, 6)
    np.testing.assert_array_equal(A[0], [1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(A[1], [1, 1, 0, 1, 0, 0])
    np.testing.assert_array_equal(A[3], np.ones(6))
    B = abs_queries(3, 3)
    assert B.shape == (3, 9)
    np.testing.assert_array_equal(B[0], np.eye(3).ravel())
    np.testing.assert_array_equal(B[1], [1, 1, 0, 1, 1, 1, 0, 1, 1])


def test_random_queries_reproducible():
    a = random_queries((3, 4), 50, 0.3, np.random.default_rng(5))
    b = random_queries((3, 4), 50, 0.3, np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)
    assert a.shape == (50, 12) and set(np.unique(a)) <= {0.0, 1.0}
    assert 0.2 < a.mean() < 0.4
    with pytest.raises(WorkloadError):
        random_queries((3,), 2, 0.3, rng=None)


def test_explicit_reordered_to_domain_order():
    dom = dm.Domain({"a": 2, "b": 3})
    rng = np.random.default_rng(0)
    table = rng.integers(0, 9, size=(2, 3)).astype(float)  # axes (a, b)
    Q_ba = rng.normal(size=(4, 6))  # over cells of (b, a)
    wk = QueryWorkload(dom).add_explicit(("b", "a"), Q_ba)
    g = wk.groups[0]
    assert g.attrs == (0, 1)
    expected = Q_ba @ table.T.ravel()
    np.testing.assert_allclose(g.answer(table), expected)


def test_kron_group_answers():
    dom = dm.Domain({"a": 3, "b": 4})
    wk = QueryWorkload(dom).add_kron(("b", "a"), ["prefix", "identity"])
    g = wk.groups[0]
    assert g.attrs == (0, 1) and g.shape == (3, 4)
    t = np.arange(12.0).reshape(3, 4)
    ans = g.answer(t)
    for i, j in itertools.product(range(3), range(4)):
        assert ans[i, j] == pytest.approx(t[i, : j + 1].sum())


def test_paper_query_counts():
    dom = dm.Domain.from_sizes([10] * 40)  # Table 4, n = 10, d = 40
    def two(kind):
        return QueryWorkload.kway(dom, 1, kind) + QueryWorkload.kway(dom, 2, kind)
    assert two("identity").n_queries == 78_400
    assert two("range").n_queries == 2_361_700
    assert two("circular").n_queries == 7_804_000
    assert (QueryWorkload.kway(dom, 1, "prefix") + QueryWorkload.pairs(dom, "affine")).n_queries == 15_220
    assert (QueryWorkload.kway(dom, 1, "prefix") + QueryWorkload.pairs(dom, "abs")).n_queries == 8_200
    adult = dm.Domain.from_sizes([42, 16, 15, 9, 7, 6, 5, 2, 2, 100, 100, 100, 99, 85])
    kinds = {f"a{i}": "prefix" for i in range(9, 14)}
    assert QueryWorkload.kway(adult, 1, kinds).n_queries == 588
    assert QueryWorkload.kway(adult, 2, kinds).n_queries == 148_137


def test_from_workload_matches_counts():
    dom = dm.Domain({"a": 4, "b": 5, "c": 3})
    wk = dm.Workload.marginals(dom, 2, upto=True, query_types={"a": "prefix", "b": "range"})
    qw = QueryWorkload.from_workload(wk)
    assert qw.n_queries == int(wk.n_queries.sum())
    assert len(qw) == len(wk)


def test_bad_input():
    dom = dm.Domain({"a": 3, "b": 3})
    with pytest.raises(WorkloadError):
        QueryWorkload(dom).add_explicit(("a", "b"), np.ones((2, 8)))
    with pytest.raises(WorkloadError):
        QueryWorkload(dom).add_kron(("a",), ["nonsense"])
    with pytest.raises(WorkloadError):
        QueryWorkload(dom).add_kron(("a",), ["prefix"], weight=-1)
