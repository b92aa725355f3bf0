"""Noisy answers kept on disk (``measure(..., store=...)``): same numbers as in memory, bounded
reads, clear errors, nothing overwritten."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._measure.discrete import InsecureRandomnessWarning
from dpmatrix._reconstruct import store as store_mod
from dpmatrix._reconstruct.store import MeasurementStore, open_store
from dpmatrix.errors import DataError


def _setup(d=6, n=4, rows=300, seed=0):
    dom = dm.Domain.from_sizes([n] * d)
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.integers(0, n, size=(rows, d)), columns=dom.names)
    plan = dm.plan(dm.Workload.marginals(dom, 3, upto=True), pcost=1.0)
    return dom, df, plan


def test_store_gives_the_in_memory_numbers_and_tables(tmp_path):
    _, df, plan = _setup()
    mem = plan.measure(df, rng=np.random.default_rng(3))
    disk = plan.measure(df, rng=np.random.default_rng(3), store=tmp_path / "st")
    assert isinstance(disk.noisy, MeasurementStore)
    assert set(disk.noisy) == set(mem.noisy) and len(disk.noisy) == len(mem.noisy)
    for key, value in mem.noisy.items():
        np.testing.assert_array_equal(disk.noisy[key], value)
    for (n1, t1), (n2, t2) in zip(mem.iter_marginals(), disk.iter_marginals(), strict=True):
        assert n1 == n2
        pd.testing.assert_frame_equal(t1, t2)
    np.testing.assert_array_equal(disk.estimate(["a0", "a2"]), mem.estimate(["a0", "a2"]))
    assert disk.query({"a1": (0, 2)}).estimate == mem.query({"a1": (0, 2)}).estimate
    assert repr(disk) == repr(mem)


def test_kept_store_reopens_and_temporary_store_is_removed(tmp_path):
    _, df, plan = _setup()
    folder = tmp_path / "kept"
    meas = plan.measure(df, rng=np.random.default_rng(5), store=folder)
    assert sorted(p.name for p in folder.iterdir()) == ["index.npy", "meta.json", "noisy.f64"]
    again = dm.Measurements.from_store(folder, dm.Plan.from_json(plan.to_json()))
    assert again.noise == "gaussian" and again.randomness == "seeded_insecure"  # a user's generator
    np.testing.assert_array_equal(again.estimate(["a3", "a4", "a5"]), meas.estimate(["a3", "a4", "a5"]))
    meas.noisy.close()
    assert folder.is_dir()  # the user's folder is kept

    tmp = plan.measure(df, rng=np.random.default_rng(5), store=True)
    path = tmp.noisy.path
    assert path.is_dir()
    del tmp
    import gc

    gc.collect()
    assert not path.exists()


def test_store_file_holds_only_the_noisy_values(tmp_path):
    # values are the little-endian float64 ω vectors: nothing but noisy answers is on disk
    _, df, plan = _setup()
    meas = plan.measure(df, rng=np.random.default_rng(1), store=tmp_path / "s")
    raw = np.fromfile(tmp_path / "s" / "noisy.f64", dtype="<f8")
    offsets = np.load(tmp_path / "s" / "index.npy")
    assert raw.size == meas.noisy.n_values == sum(plan.mechanism(k).n_outputs for k in meas.noisy)
    for key in meas.noisy:
        i = plan.closure.index(key)
        size = plan.mechanism(key).n_outputs
        got = raw[offsets[i] // 8 : offsets[i] // 8 + size]
        np.testing.assert_array_equal(got, np.asarray(meas.noisy[key]).reshape(-1))


def test_reconstruction_reads_contiguous_runs(tmp_path, monkeypatch):
    # a batch's marginals of one shape are written back to back in workload order, the order
    # reconstruction reads them in, so stacked reads need far fewer positioned reads than marginals
    _, df, plan = _setup(d=9, n=3)
    meas = plan.measure(df, rng=np.random.default_rng(0), store=tmp_path / "s")
    calls = []
    real = os.preadv

    def counting(fd, buffers, offset):
        calls.append(offset)
        return real(fd, buffers, offset)

    monkeypatch.setattr(store_mod.os, "preadv", counting)
    three = [plan.closure.index(s) for s in plan.workload.sets if len(s) == 3]
    stack = meas.noisy.stack(three)
    assert stack.shape == (len(three), 2, 2, 2)
    assert len(calls) < len(three) / 4
    for row, i in zip(stack, three):
        np.testing.assert_array_equal(row, meas.noisy[plan.closure.sets[i]])


def test_discrete_noise_into_a_store(tmp_path):
    _, df, plan = _setup(d=4, n=3)
    with pytest.warns(InsecureRandomnessWarning):
        meas = plan.measure(df, rng=np.random.default_rng(2), noise="discrete_gaussian", store=tmp_path / "s")
    again = dm.Measurements.from_store(tmp_path / "s", meas.plan)
    assert again.noise == "discrete_gaussian" and again.randomness == "seeded_insecure"
    np.testing.assert_array_equal(again.estimate(["a0", "a1"]), meas.estimate(["a0", "a1"]))


def test_store_errors(tmp_path):
    dom, df, plan = _setup(d=4, n=3)
    folder = tmp_path / "s"
    meas = plan.measure(df, rng=np.random.default_rng(0), store=folder)
    # an existing store is never overwritten
    with pytest.raises(DataError, match="already holds measurements"):
        plan.measure(df, rng=np.random.default_rng(0), store=folder)
    (tmp_path / "file").write_text("x")
    with pytest.raises(DataError, match="not a folder"):
        plan.measure(df, rng=np.random.default_rng(0), store=tmp_path / "file")
    # sealed: read-only
    with pytest.raises(DataError, match="sealed"):
        meas.noisy[("a0",)] = np.zeros(2)
    # writing: wrong shape, twice the same set
    st = MeasurementStore(plan, True)
    with pytest.raises(DataError, match="shape"):
        st[(0,)] = np.zeros(3)
    st[(0,)] = np.zeros(2)
    with pytest.raises(DataError, match="already measured"):
        st[(0,)] = np.zeros(2)
    with pytest.raises(KeyError):
        st[(1,)]
    st.close()
    # re-opening with another plan, or a damaged folder
    other = dm.plan(dm.Workload.marginals(dom, 2, upto=True), pcost=1.0)
    with pytest.raises(DataError, match="another plan|measured residual sets"):
        open_store(folder, other)
    with pytest.raises(DataError, match="not a sealed measurement store"):
        open_store(tmp_path / "nowhere", plan)
    with open(folder / "noisy.f64", "r+b") as f:
        f.truncate(8)
    with pytest.raises(DataError, match="size differs"):
        open_store(folder, plan)
    # QuerySmasher plans measure themselves: no store
    qs = dm.plan(dm.Workload.marginals(dom, 2), pcost=1.0, planner="querysmasher")
    with pytest.raises(DataError, match="ResidualPlanner plans only"):
        dm.measure(qs, df, rng=np.random.default_rng(0), store=True)
