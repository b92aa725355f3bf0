"""StackedAnswers: a dict of noisy vectors kept back to back, read as views when consecutive."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._reconstruct import stacked as S


@pytest.fixture()
def plan():
    dom = dm.Domain.from_sizes([2, 3, 4, 2])
    return dm.plan(dm.Workload.marginals(dom, 2, upto=True), pcost=1.0, objective="sum_var")


def _fill(plan, rng, order=None):
    noisy = S.StackedAnswers(plan.closure)
    ref = {}
    keys = list(plan.closure.sets) if order is None else order
    for key in keys:
        v = rng.standard_normal(tuple(plan.domain.sizes[a] - 1 for a in key))
        noisy[key] = v
        ref[key] = v.copy()
    return noisy, ref


def test_is_a_dict_of_copies(plan):
    noisy, ref = _fill(plan, np.random.default_rng(0))
    assert isinstance(noisy, dict) and list(noisy) == list(ref) and len(noisy) == len(ref)
    for key, v in ref.items():
        np.testing.assert_array_equal(noisy[key], v)
        assert noisy[key].shape == v.shape
    plain = pickle.loads(pickle.dumps(noisy))
    assert type(plain) is dict and plain.keys() == ref.keys()
    for key, v in ref.items():
        np.testing.assert_array_equal(plain[key], v)


def test_consecutive_vectors_are_a_read_only_view(monkeypatch):
    monkeypatch.setattr(S, "BUFFER_BYTES", 4 * 4 * 8)  # four 2x2 vectors per buffer
    plan = dm.plan(dm.Workload.marginals(dm.Domain.from_sizes([3] * 5), 2), pcost=1.0, objective="sum_var")
    noisy, ref = _fill(plan, np.random.default_rng(1))
    cl = plan.closure
    pairs = [cl.index(s) for s in cl.sets if len(s) == 2]  # stored in this order, 4 per buffer
    assert len(pairs) == 10
    got = noisy.stack(pairs[4:8])  # the second buffer, whole
    assert not got.flags.writeable
    assert all(np.shares_memory(row, noisy[cl.sets[i]]) for row, i in zip(got, pairs[4:8]))
    with pytest.raises(ValueError):
        got[0, 0, 0] = 1.0  # the stored answers cannot be changed through the view
    for positions in (pairs[2:6], pairs[::-1], pairs[0:8:2]):  # across buffers, reversed, gaps
        got = noisy.stack(positions)
        assert got.flags.writeable and not np.shares_memory(got, noisy[cl.sets[positions[0]]])
        for row, i in zip(got, positions):
            np.testing.assert_array_equal(row, ref[cl.sets[i]])
    buf, row, run = noisy.runs(pairs)
    assert buf.tolist() == [int(buf[0])] * 4 + [int(buf[4])] * 4 + [int(buf[8])] * 2
    assert run.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    np.testing.assert_array_equal(noisy.rows(int(buf[4]), int(row[4]), 4), noisy.stack(pairs[4:8]))


def test_replaced_and_deleted_keys(plan):
    noisy, _ = _fill(plan, np.random.default_rng(2))
    cl = plan.closure
    key = (1, 2)
    noisy[key] = np.full((2, 3), 7.0)
    np.testing.assert_array_equal(noisy.stack([cl.index(key)])[0], np.full((2, 3), 7.0))
    del noisy[(0, 1)]
    with pytest.raises(KeyError):
        noisy.stack([cl.index((0, 1))])
    noisy.update({(0, 1): np.ones((1, 2))})
    np.testing.assert_array_equal(noisy.stack([cl.index((0, 1))])[0], np.ones((1, 2)))


def test_measure_stores_the_largest_marginals_in_workload_order():
    dom = dm.Domain.from_sizes([3] * 6)
    plan = dm.plan(dm.Workload.marginals(dom, 3), pcost=1.0, objective="sum_var")
    rng = np.random.default_rng(0)
    meas = plan.measure(pd.DataFrame(rng.integers(0, 3, size=(50, 6)), columns=dom.names), rng=rng)
    assert isinstance(meas.noisy, S.StackedAnswers)
    top = [plan.closure.index(s) for s in plan.workload.sets]
    got = meas.noisy.stack(top)  # what reconstruction reads: one view, no copy
    assert not got.flags.writeable
    for row, s in zip(got, plan.workload.sets):
        assert np.shares_memory(row, meas.noisy[s])
