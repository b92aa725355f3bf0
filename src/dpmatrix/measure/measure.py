"""Measurement: the only phase that touches data, and only through marginal counts.

For every residual mechanism of the plan (Algorithm 1 / 5) we need the true marginal on its
attribute set. Marginals are counted only for the *maximal* sets of the closure (the workload
marginals not contained in another one); every subset's marginal is obtained by summing axes of
the maximal table, and measured right away, so at most one maximal table is alive at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
from tqdm.auto import tqdm

from ..errors import DataError
from ..workload import AttrSet

__all__ = ["maximal_sets", "measure"]


def maximal_sets(sets: tuple[AttrSet, ...]) -> list[AttrSet]:
    """Sets not strictly contained in another set of the collection (largest first)."""
    by_size = sorted(set(sets), key=lambda s: (-len(s), s))
    out: list[AttrSet] = []
    covered: set[AttrSet] = set()
    for s in by_size:
        if s in covered:
            continue
        out.append(s)
        for r in range(len(s)):
            covered.update(itertools.combinations(s, r))
    return out


def sum_to(table: np.ndarray, attrs: AttrSet, sub: AttrSet) -> np.ndarray:
    """Marginal on ``sub`` from the marginal table on ``attrs`` (``sub ⊆ attrs``)."""
    drop = tuple(i for i, a in enumerate(attrs) if a not in sub)
    return table.sum(axis=drop) if drop else table


def _subsets_to_measure(plan, maximal: AttrSet, done: set[AttrSet]) -> Iterator[AttrSet]:
    closure = plan.closure
    for r in range(len(maximal), -1, -1):
        for sub in itertools.combinations(maximal, r):
            if sub in done:
                continue
            done.add(sub)
            if plan.measured[closure.index(sub)]:
                yield sub


def measure(plan, data, rng: np.random.Generator | None = None, progress: bool = False, engine=None):
    """Noisy answers of every residual mechanism of ``plan`` on ``data``.

    ``data``: a pandas DataFrame (or 2-D integer array in domain column order) of codes, or any
    object with a ``count(attr_sets)`` method returning marginal tables (a data engine).
    ``rng``: the ``numpy.random.Generator`` the Gaussian noise is drawn from; ``None`` draws a
    fresh generator seeded by the operating system (never numpy's global state).
    """
    from ..engines import engine_for
    from ..reconstruct.measurements import Measurements

    if rng is None:
        rng = np.random.default_rng()
    elif not isinstance(rng, np.random.Generator):
        raise DataError(
            f"rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )
    eng = engine if engine is not None else engine_for(data, plan.domain)
    workload_sets = plan.workload.sets
    top = maximal_sets(tuple(s for s, m in zip(plan.closure.sets, plan.measured) if m) or workload_sets)
    noisy: dict[AttrSet, np.ndarray] = {}
    done: set[AttrSet] = set()
    for m in tqdm(top, desc="measuring", unit="marginal", disable=not progress):
        table = eng.count([m])[m]
        for sub in _subsets_to_measure(plan, m, done):
            mech = plan.mechanism(sub)
            v = sum_to(table, m, sub)
            z = rng.standard_normal(mech.noise_shape)
            noisy[sub] = mech.measure(v, z)
    return Measurements(plan=plan, noisy=noisy)
