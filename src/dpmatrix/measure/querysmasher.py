"""Measuring a QuerySmasher plan: every residual space's sub-mechanism on its marginal table.

Only the maximal residual sets are counted by the engine (16 per call); smaller tables are sums
of those, never the data vector. Gaussian noise through each sub-mechanism's own strategy
``B`` (``ω = B x + σ z``); exact discrete Gaussian noise (RP+ §5, Algorithm 3) where the
residual space's factors are plain marginals (see :func:`_measure_discrete`).
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np

from ..engines import engine_for
from ..errors import DataError, PlanError
from ..linalg.kron import kron_apply
from ..mechanisms.basis import identity_basis
from ..mechanisms.residual import ResidualMechanism
from ..reconstruct.query_answers import QSMeasurements
from .counting import marginal_tables
from .discrete import discrete_measure, discrete_randomness, rational_sigma
from .secure import measure_querysmasher_lattice, resolve_noise

__all__ = ["measure_querysmasher", "residual_marginals"]


def measure_querysmasher(
    plan,
    data,
    *,
    rng: np.random.Generator | None = None,
    progress: bool = False,
    noise: str = "auto",
    rel_var_tol: float = 1e-4,
    engine=None,
) -> QSMeasurements:
    """Run every residual mechanism of a QuerySmasher ``plan`` on the marginal counts of ``data``
    (options as in :func:`dpmatrix.measure`)."""
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise DataError("rng must be a numpy.random.Generator")
    noise = resolve_noise(plan, noise, rng)  # secure by default (issue 16)
    if noise == "lattice_gaussian":
        return measure_querysmasher_lattice(plan, data, rng=rng, engine=engine, rel_var_tol=rel_var_tol)
    if noise == "discrete_gaussian":
        return _measure_discrete(plan, data, rng, rel_var_tol, engine)
    randomness = "numpy_generator" if rng is None else "seeded_insecure"
    if rng is None:
        rng = np.random.default_rng()
    omega: dict[tuple[int, ...], np.ndarray] = {}
    for sub, x in residual_marginals(plan, data, engine):
        res = plan.residuals[sub]
        omega[sub] = plan.solutions[res.structure].measure(
            np.asarray(x, dtype=float), math.sqrt(res.sigma2), rng
        )
    return QSMeasurements(plan, omega, randomness=randomness)


def residual_marginals(plan, data, engine):
    """Yield ``(S, marginal table on S)`` for every measured residual space: only the maximal
    sets are counted (:func:`~dpmatrix.measure.counting.marginal_tables`), smaller ones are sums."""
    eng = engine_for(data, plan.domain, engine=engine)
    measured = {S for S, r in plan.residuals.items() if math.isfinite(r.sigma2)}
    yield from marginal_tables(plan.domain, measured, eng)


def _measure_discrete(plan, data, rng, rel_var_tol: float, engine) -> QSMeasurements:
    """Exact discrete Gaussian noise where the factors allow (paper RP+ §5, Algorithm 3).

    A residual space whose mechanism reconstructs with covariance ``σ² Π κ_j ⊗ (I − 11ᵀ/n_j)``
    — every plain-marginal space (identity queries), whatever orthonormal-type basis the
    solver returned — is the same mechanism as ResidualPlanner's at
    ``σ²_RP = σ² Π κ_j``: same residual estimate distribution and same privacy cost
    ``Π (n_j−1)/(n_j κ_j) / σ² = Π (n_j−1)/n_j / σ²_RP``. It is measured by Algorithm 3 at
    that scale (σ rounded up to a rational; the returned plan carries the rounded σ²), and
    its estimate ``r`` is stored as ``ω = B r`` (``B⁺ B r = r`` for centred ``r``). Spaces
    optimized for prefix, range or other queries have real-valued strategies with no integer
    form: they are refused, naming the first one.
    """
    import dataclasses
    from fractions import Fraction

    measured = {S: r for S, r in plan.residuals.items() if math.isfinite(r.sigma2)}
    kappas = {}
    for S, res in measured.items():
        k = plan.solutions[res.structure].marginal_factors()
        if k is None:
            raise PlanError(
                f"discrete Gaussian noise needs integer-able factors, but the residual space of "
                f"{plan.domain.names_of(S)} uses a real-valued optimized strategy (queries other "
                "than plain marginals); measure this plan with noise='gaussian'"
            )
        kappas[S] = math.prod(k)
    randomness = discrete_randomness(rng)
    new_res, sbar = {}, {}
    for S, res in plan.residuals.items():
        if S in measured:
            sb = rational_sigma(res.sigma2 * kappas[S], rel_var_tol)
            sbar[S] = sb
            s2 = float(sb * sb) / kappas[S]
            while Fraction(s2) * Fraction(kappas[S]) > sb * sb:  # never report more noise
                s2 = float(np.nextafter(s2, 0.0))
            new_res[S] = dataclasses.replace(res, sigma2=s2)
        else:
            new_res[S] = res
    plan = dataclasses.replace(plan, residuals=new_res)
    omega: dict[tuple[int, ...], np.ndarray] = {}
    for sub, x in residual_marginals(plan, data, engine):
        sizes = plan.residuals[sub].sizes
        rp = ResidualMechanism(sub, tuple(identity_basis(n) for n in sizes), float(sbar[sub] ** 2))
        w = discrete_measure(rp, x, sbar[sub], rng)
        omega[sub] = kron_apply(plan.solutions[plan.residuals[sub].structure].B, rp.residual(w))
    return QSMeasurements(plan, omega, noise="discrete_gaussian", randomness=randomness)
