"""The vectorized paths behind the scaling work give the results of the simple ones.

Scale itself is measured by ``benchmarks/run.py``; these tests are small and fast.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._linalg.kron import kron_apply
from dpmatrix._mechanisms.basis import identity_basis
from dpmatrix._mechanisms.residual import apply_pinv, apply_sub
from dpmatrix._workload import Closure, _combinations


@pytest.mark.parametrize("d,k", [(5, 0), (5, 1), (5, 3), (7, 4), (3, 3), (3, 4), (9, 5)])
def test_combinations_match_itertools(d, k):
    want = list(itertools.combinations(range(d), k))
    got = _combinations(d, k)
    assert got.shape == (len(want), k)
    assert [tuple(r) for r in got.tolist()] == want


def test_builder_sets_and_closure_match_brute_force():
    dom = dm.Domain.from_sizes([3] * 7)
    wk = dm.Workload.marginals(dom, 3, upto=True, attributes=["a6", "a1", "a3", "a4", "a0"])
    pool = (0, 1, 3, 4, 6)
    assert wk.sets == tuple(c for j in range(4) for c in itertools.combinations(pool, j))
    assert len(wk) == len(wk.sets) and np.all(wk.cells == [3 ** len(s) for s in wk.sets])
    rng = np.random.default_rng(0)
    for _ in range(20):
        d = int(rng.integers(1, 9))
        marg = {tuple(sorted(rng.choice(d, size=int(rng.integers(0, min(d, 4) + 1)), replace=False).tolist()))
                for _ in range(int(rng.integers(1, 6)))}
        marg = sorted(marg)
        brute = sorted({s for m in marg for r in range(len(m) + 1) for s in itertools.combinations(m, r)},
                       key=lambda s: (len(s), sum((a + 1) * (d + 1) ** p for p, a in enumerate(s))))
        cl = Closure.of(d, marg)
        assert list(cl.sets) == brute
        for i, s in enumerate(brute):
            assert cl.index(s) == i
        rows = np.array([s for s in brute if len(s) == 1] or [[0]], dtype=np.int64).reshape(-1, 1)
        assert np.all(cl.indices(rows) >= 0) == all((int(r[0]),) in cl for r in rows)
        assert (d,) not in cl and (0, 0) not in cl


def test_identity_closed_forms_equal_products():
    rng = np.random.default_rng(1)
    bases = (identity_basis(4), identity_basis(1), identity_basis(3))
    v = rng.integers(0, 50, size=(6, 4, 1, 3)).astype(float)
    assert np.array_equal(apply_sub(bases, v), kron_apply(tuple(b.Sub for b in bases), v))
    z = rng.standard_normal((6, 4, 1, 3))
    assert np.array_equal(apply_sub(bases, z, "Gamma"), kron_apply(tuple(b.Gamma for b in bases), z))
    w = rng.standard_normal((6, 3, 0, 2))
    np.testing.assert_allclose(apply_pinv(bases, w), kron_apply(tuple(b.Sub_inv for b in bases), w),
                               rtol=1e-12, atol=1e-12)
    w = rng.standard_normal((5, 3, 2))
    two = (identity_basis(4), identity_basis(3))
    batch = apply_pinv(two, w)
    assert all(np.array_equal(batch[i], apply_pinv(two, w[i])) for i in range(5))


def _reference_measure(plan, df, rng):
    """The one-mechanism-at-a-time Algorithm 1 (largest subsets of each maximal set first)."""
    from dpmatrix.engines import NumpyEngine, maximal_sets, project

    eng = NumpyEngine(df, plan.domain)
    measured = [s for s, m in zip(plan.closure.sets, plan.measured) if m]
    out, done = {}, set()
    for m in maximal_sets(measured):
        table = eng.count([m])[m]
        for r in range(len(m), -1, -1):
            for sub in itertools.combinations(m, r):
                if sub in done:
                    continue
                done.add(sub)
                if plan.measured[plan.closure.index(sub)]:
                    mech = plan.mechanism(sub)
                    out[sub] = mech.measure(project(table, m, sub), rng.standard_normal(mech.noise_shape))
    return out


@pytest.mark.parametrize("case", ["plain", "mixed", "prefix"])
def test_batched_measurement_reproduces_the_per_set_algorithm(case):
    if case == "plain":
        dom = dm.Domain.from_sizes([4, 3, 5, 2, 3, 4])
        wk = dm.Workload.marginals(dom, 3, upto=True)
    elif case == "mixed":
        dom = dm.Domain.from_sizes([2, 3, 4, 5, 3])
        wk = dm.Workload(dom, [("a0", "a1"), ("a1", "a2", "a3"), ("a4",), ()], weights=[1, 2, 0, 1])
    else:
        dom = dm.Domain.from_sizes([6, 5, 4])
        wk = dm.Workload(dom, [("a0", "a1"), ("a2",)], query_types={"a0": "prefix", "a2": "range"})
    plan = dm.plan(wk, pcost=1.0)
    df = pd.DataFrame(np.random.default_rng(2).integers(0, 2, size=(400, len(dom))), columns=dom.names)
    got = plan.measure(df, rng=np.random.default_rng(5)).noisy
    want = _reference_measure(plan, df, np.random.default_rng(5))
    assert list(got) == list(want)
    for key in want:
        assert np.allclose(got[key], want[key], rtol=0, atol=1e-9), key


def test_iter_marginals_streams_the_tables_of_marginal():
    dom = dm.Domain.from_dict({"x": {"size": 3, "labels": ["p", "q", "r"]}, "y": 4, "z": 2,
                               "w": {"bins": [0, 10, 20, 40], "kind": "categorical"}})  # fmt: skip
    assert dm.Workload(dom, [("w",)]).is_plain
    wk = dm.Workload(dom, [("x", "y"), ("y", "z", "w"), ("z",), ("x", "w"), ()], weights=[1, 1, 0, 2, 1])
    plan = dm.plan(wk, rho=1.0)
    df = pd.DataFrame(np.random.default_rng(3).integers(0, 2, size=(200, 4)), columns=dom.names)
    meas = plan.measure(df, rng=np.random.default_rng(4))
    it = meas.iter_marginals(level=0.9)
    assert iter(it) is it  # a generator
    names = []
    for nm, table in it:
        names.append(nm)
        ref = meas.marginal(nm, level=0.9)
        pd.testing.assert_frame_equal(table, ref, check_exact=True)
        assert table.attrs == ref.attrs
    # every marginal whose residuals were all measured, in workload order (("z",) has weight 0
    # but lies inside ("y", "z", "w"), so it is measured and answered)
    answerable = [
        wk.names(i) for i, s in enumerate(wk.sets)
        if all(plan.measured[plan.closure.index(sub)] for r in range(len(s) + 1)
               for sub in itertools.combinations(s, r))
    ]  # fmt: skip
    assert names == answerable and ("z",) in names


def test_iter_marginals_batches_many_same_shape_tables(monkeypatch):
    from dpmatrix._reconstruct import measurements as M

    monkeypatch.setattr(M, "_BATCH_CELLS", 300)  # several batches, groups split across them
    dom = dm.Domain.from_sizes([3] * 8)
    plan = dm.plan(dm.Workload.marginals(dom, 3, upto=True), pcost=1.0)
    df = pd.DataFrame(np.random.default_rng(5).integers(0, 3, size=(100, 8)), columns=dom.names)
    meas = plan.measure(df, rng=np.random.default_rng(6))
    n = 0
    for nm, table in meas.iter_marginals():
        pd.testing.assert_frame_equal(table, meas.marginal(nm), check_exact=True)
        n += 1
    assert n == len(plan.workload)


def test_streamed_tables_survive_cache_eviction(monkeypatch):
    """A residual cache too small for one batch is emptied while the batch is being built; the
    tables must still equal the one-at-a-time reconstruction."""
    import numpy as np
    import pandas as pd

    import dpmatrix as dm
    from dpmatrix._reconstruct import measurements as M

    monkeypatch.setattr(M, "_CACHE_FLOATS", 7)
    monkeypatch.setattr(M, "_BATCH_CELLS", 300)  # many batches, so lower-order residuals are reused
    dom = dm.Domain.from_sizes([3, 4, 2, 3, 2])
    wk = dm.Workload.marginals(dom, 3, upto=True)
    rng = np.random.default_rng(1)
    df = pd.DataFrame({n: rng.integers(0, s, 100) for n, s in zip(dom.names, dom.sizes)})
    meas = dm.plan(wk, pcost=1).measure(df, rng=rng)
    for names, table in meas.iter_marginals():
        pd.testing.assert_frame_equal(table, meas.marginal(names), check_exact=False, rtol=1e-12)
