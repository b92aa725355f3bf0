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

__all__ = ["measure"]

# maximal marginals counted per engine call (DuckDB batches them into GROUPING SETS)
COUNT_BATCH = 16


def _subsets_to_measure(plan, maximal: AttrSet, done: set[AttrSet]) -> Iterator[AttrSet]:
    closure = plan.closure
    for r in range(len(maximal), -1, -1):
        for sub in itertools.combinations(maximal, r):
            if sub in done:
                continue
            done.add(sub)
            if plan.measured[closure.index(sub)]:
                yield sub


def measure(
    plan,
    data,
    rng: np.random.Generator | None = None,
    progress: bool = False,
    engine=None,
    noise: str = "gaussian",
    rel_var_tol: float = 1e-4,
):
    """Noisy answers of every residual mechanism of ``plan`` on ``data``.

    ``data``: a pandas DataFrame (or 2-D integer array in domain column order) of codes, a path
    to a CSV/Parquet file of codes (counted by DuckDB), or a data engine.
    ``rng``: the ``numpy.random.Generator`` the Gaussian noise is drawn from; ``None`` draws a
    fresh generator seeded by the operating system (never numpy's global state).
    ``noise="discrete_gaussian"``: exact integer noise from the OS CSPRNG (Algorithm 3, see
    :mod:`dpmatrix.measure.discrete`); every σ is rounded up to a rational (variance increase at
    most ``rel_var_tol``) and the returned measurements carry the re-scored plan. ``rng`` is then
    used only if given, as a reproducible but insecure byte source for tests.
    """
    from ..engines import engine_for, maximal_sets, project
    from ..reconstruct.measurements import Measurements

    if noise not in ("gaussian", "discrete_gaussian"):
        raise DataError(f"noise must be 'gaussian' or 'discrete_gaussian', got {noise!r}")
    sigma_bar = None
    if noise == "discrete_gaussian":
        from .discrete import discrete_measure, round_plan

        plan, sigma_bar = round_plan(plan, rel_var_tol)
    if rng is None and noise == "gaussian":
        rng = np.random.default_rng()
    elif rng is not None and not isinstance(rng, np.random.Generator):
        raise DataError(
            f"rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )
    eng = engine if engine is not None else engine_for(data, plan.domain)
    measured = tuple(s for s, m in zip(plan.closure.sets, plan.measured) if m)
    top = maximal_sets(measured)
    noisy: dict[AttrSet, np.ndarray] = {}
    done: set[AttrSet] = set()
    bar = tqdm(total=len(top), desc="measuring", unit="marginal", disable=not progress)
    for start in range(0, len(top), COUNT_BATCH):
        batch = top[start : start + COUNT_BATCH]
        tables = eng.count(batch)
        for m in batch:
            table = tables.pop(m)
            for sub in _subsets_to_measure(plan, m, done):
                mech = plan.mechanism(sub)
                v = project(table, m, sub)
                if sigma_bar is None:
                    noisy[sub] = mech.measure(v, rng.standard_normal(mech.noise_shape))
                else:
                    s_bar = sigma_bar[plan.closure.index(sub)]
                    noisy[sub] = discrete_measure(mech, v, s_bar, rng)
            bar.update(1)
    bar.close()
    return Measurements(plan=plan, noisy=noisy, noise=noise)
