"""Measuring any plan that lists its mechanisms (:class:`~dpmatrix.mechanisms.linear.LinearMechanism`).

The plan says what to run (``plan.mechanisms(noise=..., rel_var_tol=...)`` returns the plan
actually measured — re-scored when discrete noise rounds its scales — and its mechanisms); this
module counts every needed marginal once (the maximal sets through the engine, in batches,
smaller tables as sums: :func:`~dpmatrix.measure.counting.marginal_tables`), applies each linear
map, draws the noise and returns :class:`~dpmatrix.reconstruct.measurements.Measurements`.

Randomness: Gaussian draws come from the explicit ``numpy.random.Generator`` (a fresh OS-seeded
one when ``rng=None``), in the order of the plan's mechanisms; exact discrete draws (discrete
Gaussian, discrete Laplace, and the lattice family's discrete Gaussian on its snapped integers)
come from the OS CSPRNG unless a generator is passed, which makes them reproducible and NOT
private (warned, and recorded as ``"seeded_insecure"``).
"""

from __future__ import annotations

import numpy as np

from ..engines import engine_for
from ..errors import DataError, PlanError
from ..mechanisms.linear import LinearMechanism
from ..mechanisms.noise_families import noise_family, noise_family_names
from ..reconstruct.measurements import Measurements
from .counting import marginal_tables
from .discrete import discrete_randomness

__all__ = ["measure_linear"]


def measure_linear(plan, data, *, rng=None, noise: str = "gaussian", rel_var_tol: float = 1e-4,
                   engine=None) -> Measurements:
    """Noisy outputs of every mechanism of ``plan`` on ``data`` (options as :func:`dpmatrix.measure`).

    Parameters
    ----------
    plan : PlanBase
        A plan with ``mechanisms(noise=..., rel_var_tol=...)`` and ``estimator(noisy)``.
    data : DataFrame, array, path or engine
    rng : numpy.random.Generator, optional
    noise : str
        Passed to the plan, which refuses what it cannot run.
    rel_var_tol : float
    engine : engine, optional

    Returns
    -------
    Measurements
    """
    measured, mechs = plan.mechanisms(noise=noise, rel_var_tol=rel_var_tol)
    mechs = list(mechs)
    keys = [m.key for m in mechs]
    if len(set(keys)) != len(keys):
        raise PlanError("the plan lists two mechanisms with the same key")
    for m in mechs:
        if not isinstance(m, LinearMechanism):
            raise PlanError(f"plan.mechanisms() must give LinearMechanism, got {type(m).__name__}")
    families = {m.family for m in mechs}
    exact = any(noise_family(f).exact for f in families)
    # a user's generator is reproducible by whoever has the seed: recorded as not private
    randomness = discrete_randomness(rng) if exact else ("numpy_generator" if rng is None else "seeded_insecure")
    eng = engine if engine is not None else engine_for(data, plan.domain)
    by_attrs: dict[tuple[int, ...], list[int]] = {}
    for j, m in enumerate(mechs):
        by_attrs.setdefault(tuple(m.attrs), []).append(j)
    signal: list[np.ndarray | None] = [None] * len(mechs)
    for S, table in marginal_tables(plan.domain, by_attrs, eng):
        for j in by_attrs[S]:
            signal[j] = mechs[j].signal(table)
    noisy: dict = {}
    for name in noise_family_names():  # each family draws its mechanisms' noise, in their order
        members = [j for j, m in enumerate(mechs) if m.family == name]
        family = noise_family(name)
        for j, z in zip(members, family.draw([mechs[j] for j in members], rng)):
            out = family.add(signal[j], z)
            noisy[mechs[j].key] = out if mechs[j].post is None else mechs[j].post(out)
    noisy = {m.key: noisy[m.key] for m in mechs}  # in the plan's order
    return Measurements(plan=measured, noisy=noisy, noise=_noise_name(families, noise), randomness=randomness)


def _noise_name(families: set[str], asked: str) -> str:
    if len(families) == 1:
        return next(iter(families))
    if not families:
        return asked
    raise DataError(f"a plan mixing noise families {sorted(families)} cannot be described by one noise name")
