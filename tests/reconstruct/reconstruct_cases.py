"""Random small ResidualPlanner plans and their measurements, shared by the reconstruction tests
(each test's dense Algorithm 2 / Theorem 4.4 oracle is computed from them independently)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

import dpmatrix as dm
import oracle


def random_plan(seed: int, *, max_size: int, max_sets: int, **plan_options):
    """``(sizes, plan, measurements)`` of a random domain (2–5 attributes of sizes 2..max_size−1),
    a random set of ≤3-way marginals (fewer than ``max_sets``) with weights 0, 1 or 2.5, a random
    privacy cost and 40 random records."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 6))
    sizes = [int(s) for s in rng.integers(2, max_size, size=d)]
    dom = dm.Domain.from_sizes(sizes)
    pool = [s for r in range(4) for s in itertools.combinations(range(d), r)]
    pick = rng.choice(len(pool), size=min(len(pool), int(rng.integers(2, max_sets))), replace=False)
    sets = [pool[i] for i in sorted(pick)]
    weights = rng.choice([0.0, 1.0, 2.5], size=len(sets), p=[0.15, 0.6, 0.25])
    if not weights.any():
        weights[0] = 1.0
    wk = dm.Workload(dom, [tuple(dom.names[a] for a in s) for s in sets], weights=weights.tolist())
    plan = dm.plan(wk, pcost=float(rng.uniform(0.5, 5)), **plan_options)
    df = pd.DataFrame({n: rng.integers(0, s, 40) for n, s in zip(dom.names, sizes)})
    return sizes, plan, plan.measure(df, rng=rng)


def answerable(plan, meas) -> list[int]:
    """Workload positions whose every closure member was measured (by the oracle's closure)."""
    return [i for i, s in enumerate(plan.workload.sets) if all(k in meas.noisy for k in oracle.closure([s]))]


class DenseReference:
    """The dense oracle of one plan's measurements: Algorithm 2's estimates and Theorem 4.4's
    variances from the noisy vectors (read once)."""

    def __init__(self, sizes, plan, meas):
        self.sizes, self.plan, self.meas = sizes, plan, meas
        self.omegas = {key: np.asarray(v, dtype=float).reshape(-1) for key, v in meas.noisy.items()}
        self.sigma2 = {key: float(plan.sigma2[plan.closure.index(key)]) for key in meas.noisy}

    def check(self, blk) -> list[int]:
        """Every table of a ``MarginalBlock`` against the oracle and, bit for bit, against the
        same marginal asked alone; returns the block's workload positions."""
        plan, meas = self.plan, self.meas
        for j, pos in enumerate(blk.positions.tolist()):
            key = tuple(int(a) for a in blk.attrs[j])
            assert key == plan.workload.sets[pos]
            want = oracle.algorithm2_reconstruct(self.sizes, key, self.omegas)
            np.testing.assert_allclose(blk.estimate[j].reshape(-1), want, rtol=1e-12, atol=1e-9)
            var = oracle.theorem44_cell_variance(self.sizes, key, self.sigma2)
            np.testing.assert_allclose(np.broadcast_to(blk.variance[j], blk.shape), var, rtol=1e-13)
            # streamed or asked alone: the same bits
            np.testing.assert_array_equal(meas.estimate(key), blk.estimate[j])
            np.testing.assert_array_equal(meas.variance(key), np.broadcast_to(blk.variance[j], blk.shape))
        return blk.positions.tolist()
