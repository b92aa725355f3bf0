"""Streaming every table in blocks written into one reused buffer.

The reference is :func:`oracle.algorithm2_reconstruct` (explicit ``Sub⁺`` and ``1/n`` matrices and
Kronecker products, never dpmatrix) applied to the noisy vectors, and
:func:`oracle.theorem44_cell_variance` for the variances. Block, chunk and bookkeeping sizes are
made tiny so that blocks split a shape, chunks split a block, a table larger than the buffer
comes alone and the shared lower-order pieces are evicted and recomputed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from reconstruct_cases import DenseReference, answerable, random_plan

import dpmatrix as dm
from dpmatrix._reconstruct import broadcast as B


def _random_plan(seed: int):
    return random_plan(seed, max_size=5, max_sets=10, objective="sum_var")


@pytest.mark.parametrize("seed", range(10))
def test_blocks_equal_dense_algorithm2(seed, monkeypatch):
    sizes, plan, meas = _random_plan(seed)
    monkeypatch.setattr(B, "CHUNK_CELLS", 5)  # several chunks per block
    ref = DenseReference(sizes, plan, meas)
    seen, buffers = [], []
    block_cells = 12
    for blk in B.plain_blocks(meas, block_cells=block_cells, max_cells=30, cache_floats=5):
        m, cells = len(blk.positions), int(np.prod(blk.shape))
        assert blk.estimate.shape == (m,) + blk.shape and blk.variance.shape == (m,) + (1,) * len(blk.shape)
        assert m * cells <= block_cells or m == 1  # a table larger than the buffer comes alone
        if m * cells <= block_cells:
            buffers.append(blk.estimate)
        seen += ref.check(blk)
    assert sorted(seen) == answerable(plan, meas)  # every answerable marginal once
    # the blocks that fit are views of one buffer, reused from block to block
    for a, b in zip(buffers, buffers[1:]):
        assert np.shares_memory(a, b)


def test_blocks_equal_batches_and_iter_blocks():
    _, plan, meas = _random_plan(3)
    batched = {int(p): (blk.estimate[j].copy(), blk.variance[j].copy())
               for batch in B.plain_batches(meas) for blk in batch for j, p in enumerate(blk.positions)}  # fmt: skip
    for stream in (B.plain_blocks(meas), meas.iter_blocks(block_cells=7)):
        got = {}
        for blk in stream:
            for j, p in enumerate(blk.positions.tolist()):
                got[p] = (blk.estimate[j].copy(), blk.variance[j].copy())
        assert got.keys() == batched.keys()
        for p, (est, var) in got.items():
            np.testing.assert_array_equal(est, batched[p][0])
            np.testing.assert_array_equal(var, batched[p][1])


def test_block_batches_cover_the_runs_of_plain_batches():
    _, plan, meas = _random_plan(5)
    runs = [sorted(int(p) for blk in batch for p in blk.positions) for batch in B.plain_batches(meas, max_cells=9)]
    got = [sorted(int(p) for blk in run for p in blk.positions)
           for run in B.plain_block_batches(meas, max_cells=9, block_cells=4)]  # fmt: skip
    assert got == runs


def test_iter_blocks_is_for_plain_marginals():
    dom = dm.Domain.from_dict({"x": {"size": 4, "kind": "ordinal"}, "y": 3})
    wk = dm.Workload(dom, [("x", "y")], query_types={"x": "prefix"})
    plan = dm.plan(wk, pcost=2.0, objective="sum_var")
    rng = np.random.default_rng(0)
    meas = plan.measure(pd.DataFrame({"x": rng.integers(0, 4, 30), "y": rng.integers(0, 3, 30)}), rng=rng)
    with pytest.raises(dm.errors.PlanError, match="iter_marginals"):
        meas.iter_blocks()


def test_block_sizes_must_be_positive():
    _, _, meas = _random_plan(1)
    with pytest.raises(dm.errors.WorkloadError):
        next(B.plain_blocks(meas, block_cells=0))
