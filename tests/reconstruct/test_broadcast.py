"""The broadcast reconstruction (faces of shared pieces) equals Algorithm 2 written densely.

The reference is :func:`oracle.algorithm2_reconstruct` (explicit ``Sub⁺`` and ``1/n`` matrices,
Kronecker products, never dpmatrix) applied to the noisy vectors of random small plans, and
:func:`oracle.theorem44_cell_variance` for the variances. The broadcast path covers plain
marginals only (identity bases); generalized marginals (ResidualPlanner+) keep the
Kronecker-product path, checked here to still give Algorithm 6's numbers through ``answer``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from reconstruct_cases import DenseReference, answerable, random_plan

import dpmatrix as dm
from dpmatrix._reconstruct import broadcast as B
from dpmatrix._reconstruct import fused


def _random_plan(seed: int):
    return random_plan(seed, max_size=6, max_sets=9)


@pytest.fixture(params=["numpy", "compiled"])
def three_way_path(request, monkeypatch):
    """Both ways of making three-way tables: numpy's broadcast passes and the compiled kernel
    (forced on for these small workloads by a zero threshold; numba is in the test extra)."""
    if request.param == "compiled":
        assert fused.available(), "numba (the test extra) is needed for the compiled kernel"
        monkeypatch.setattr(fused, "MIN_CELLS", 0)
    else:
        monkeypatch.setattr(fused, "MIN_CELLS", 1 << 62)
    monkeypatch.setattr(fused, "_DECIDED", fused.weakref.WeakKeyDictionary())
    return request.param


@pytest.mark.parametrize("seed", range(12))
def test_broadcast_tables_equal_dense_algorithm2(seed, three_way_path):
    sizes, plan, meas = _random_plan(seed)
    assert plan.is_plain
    has_three_way = any(len(s) == 3 for s in plan.workload.sets)
    assert fused.use_for(plan.workload) == (three_way_path == "compiled" and has_three_way)
    ref = DenseReference(sizes, plan, meas)
    seen, runs = [], []
    # tiny batches: blocks split across batches, lower-order residuals shared and evicted
    for batch in B.plain_batches(meas, max_cells=7, cache_floats=5):
        runs.append(sorted(p for blk in batch for p in blk.positions.tolist()))
        for blk in batch:
            seen += ref.check(blk)
    # every answerable workload marginal once; batches are consecutive runs of the workload
    expected = answerable(plan, meas)
    assert sorted(seen) == expected
    assert [p for run in runs for p in run] == expected
    assert [names for names, _ in meas.iter_marginals()] == [plan.workload.names(i) for i in expected]


def test_unmeasured_marginal_raises_the_usual_error():
    dom = dm.Domain.from_sizes([2, 3, 2])
    plan = dm.plan(dm.Workload(dom, [("a0", "a1")]), pcost=1.0)
    meas = plan.measure(pd.DataFrame({"a0": [0, 1], "a1": [2, 0], "a2": [1, 1]}), rng=np.random.default_rng(0))
    with pytest.raises(dm.errors.NotMeasuredError):
        meas.estimate(("a0", "a2"))


def test_generalized_marginals_keep_the_kronecker_path():
    """Prefix queries on an ordinal attribute (ResidualPlanner+): not plain, so ``answer`` goes
    through Algorithm 6; the estimate is W applied to the dense Algorithm-2 cells."""
    dom = dm.Domain.from_dict({"x": {"size": 4, "kind": "ordinal"}, "y": 3})
    wk = dm.Workload(dom, [("x", "y")], query_types={"x": "prefix"})
    plan = dm.plan(wk, pcost=2.0, objective="sum_var")
    assert not plan.is_plain
    rng = np.random.default_rng(3)
    meas = plan.measure(pd.DataFrame({"x": rng.integers(0, 4, 30), "y": rng.integers(0, 3, 30)}), rng=rng)
    got = dict(meas.iter_marginals())[("x", "y")]
    np.testing.assert_array_equal(got["estimate"], meas.answer(("x", "y"))["estimate"])


def test_compiled_three_way_kernel_equals_the_numpy_formula():
    """The kernel against the face formula written directly with numpy (uneven sizes, nonzero
    lower-order faces, several tables): ``F_0 ⊕ F_1 ⊕ F_2 − P`` with ``F_j`` = its lower part +
    ``Σ_T coef_T Σ_T P`` over the sets ``T`` of axes whose first axis is ``j``."""
    rng = np.random.default_rng(5)
    n0, n1, n2, m = 3, 5, 4, 7
    w = rng.standard_normal((m, n0 - 1, n1 - 1, n2 - 1))
    low = [rng.standard_normal(s) for s in ((m, 1, n1, n2), (m, n0, 1, n2), (m, n0, n1, 1))]
    n = (n0, n1, n2)
    sets = [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]
    coefs = np.array([(-1.0) ** (3 + len(T)) / np.prod([n[c] for c in T]) for T in sets])
    p = np.zeros((m, n0, n1, n2))
    p[:, 1:, 1:, 1:] = w
    faces = [f.copy() for f in low]
    for T, c in zip(sets, coefs):
        faces[T[0]] = faces[T[0]] + c * p.sum(axis=tuple(1 + a for a in T), keepdims=True)
    want = faces[0] + faces[1] + faces[2] - p
    kept = [f.copy() for f in low]
    got = fused.tables3(w, low, coefs, np.empty((m, n0, n1, n2)))
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    for f, k in zip(low, kept):  # the lower faces are read, not written
        np.testing.assert_array_equal(f, k)


def test_compiled_kernel_is_chosen_by_workload_size(monkeypatch):
    monkeypatch.setattr(fused, "_DECIDED", fused.weakref.WeakKeyDictionary())
    dom = dm.Domain.from_sizes([10] * 5)
    wk = dm.Workload.marginals(dom, 3, upto=True)
    assert fused.three_way_cells(wk) == 10 * 1000  # C(5,3) tables of 10^3 cells
    assert fused.three_way_cells(dm.Workload.marginals(dom, 2)) == 0
    monkeypatch.setattr(fused, "MIN_CELLS", 10_001)
    assert not fused.use_for(wk)
    other = dm.Workload.marginals(dom, 3, upto=True)
    monkeypatch.setattr(fused, "MIN_CELLS", 10_000)
    assert fused.use_for(other) and not fused.use_for(wk)  # decided once per workload


def test_fused_kernel_can_be_turned_off_by_environment(monkeypatch):
    monkeypatch.setenv("DPMATRIX_FUSED", "0")
    fused.available.cache_clear()
    try:
        assert not fused.available()
    finally:
        monkeypatch.delenv("DPMATRIX_FUSED")
        fused.available.cache_clear()
    assert fused.available()
