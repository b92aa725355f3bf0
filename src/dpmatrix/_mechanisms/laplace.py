"""Exact discrete Laplace noise for pure ε-DP with rational budgets.

The discrete Laplace (two-sided geometric) with parameter ``ε`` has
``P(y) = (1 - q)/(1 + q) · q^{|y|}``, ``q = e^{-ε}``, on the integers; added to integer answers
of L1 sensitivity ``C`` it is ``(C ε)``-DP (Ghosh, Roughgarden, Sundararajan 2009). Its variance
is ``2q/(1 - q)² = 1 / (2 sinh²(ε/2))``, strictly below the continuous Laplace's ``2/ε²``.

Budget split (``plan``) uses the continuous ``2/ε²`` model of the paper (its closed forms);
reported variances and the GLS weights use the exact discrete variance of the *rounded* rational
budgets actually used by the sampler (:func:`round_budgets`).

Sampler: the magnitude ``M`` with ``P(M ≥ m) = e^{-mε}`` is read off one uniform real ``W`` by
inversion, ``M = max{m : W < e^{-mε}}`` (decided in float64 with proven margins and finished
exactly when the margins cannot decide, :mod:`dpmatrix._mechanisms.exact_exp`); a random sign is
attached and the negative zero rejected, so ``P(y) ∝ e^{-ε|y|}``. This is the law of CKS (2020)
Algorithm 2's ``⌊X/s⌋`` for ``ε = s/t``, drawn without its ``Bernoulli(e^{-1})`` loops. Random
bytes come from the OS CSPRNG (or a seeded source for tests, **not secure**); no floating-point
randomness.
"""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Integral, Rational

import numpy as np

from ..errors import BudgetError, SamplerArgumentError
from .exact_exp import geometric
from .samplers import RandomSource, SecureRandom, SeededRandom

__all__ = [
    "discrete_laplace_variance",
    "discrete_laplace_pmf",
    "row_noise_variance",
    "round_budgets",
    "sample_discrete_laplace_eps",
    "sample_discrete_laplace_many",
]

#: Rounded budgets keep at least this many significant bits (relative loss ≤ 2^-20).
_BUDGET_BITS = 20
#: Draws per vectorized pass (keeps the working set small).
_CHUNK = 1 << 15


def discrete_laplace_variance(epsilon) -> np.ndarray:
    """Exact variance ``1/(2 sinh²(ε/2))`` of the discrete Laplace with parameter ``ε`` (inf at 0)."""
    e = np.asarray(epsilon, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(e > 0, 0.5 / np.sinh(e / 2) ** 2, np.inf)


def row_noise_variance(epsilon, variance_model: str) -> np.ndarray:
    """Noise variance of rows measured with budgets ``ε``: the exact discrete Laplace
    ``1/(2 sinh²(ε/2))`` (``variance_model="discrete"``, the noise released) or the continuous
    model's ``2/ε²`` (``"continuous"``); ``inf`` where ``ε = 0``.

    Parameters
    ----------
    epsilon : array_like
        Per-row budgets.
    variance_model : {"discrete", "continuous"}

    Returns
    -------
    numpy.ndarray
        Variances, shaped like ``epsilon``.

    Examples
    --------
    >>> row_noise_variance([1.0, 0.0], "continuous").tolist()
    [2.0, inf]
    """
    e = np.asarray(epsilon, dtype=float)
    if variance_model == "continuous":
        with np.errstate(divide="ignore"):
            return np.where(e > 0, 2.0 / np.where(e > 0, e, 1.0) ** 2, np.inf)
    return discrete_laplace_variance(e)


def discrete_laplace_pmf(epsilon: float, y) -> np.ndarray:
    """``P(Y = y) = tanh(ε/2) · e^{-ε|y|}`` (``(1-q)/(1+q) = tanh(ε/2)``)."""
    y = np.abs(np.asarray(y, dtype=float))
    return math.tanh(epsilon / 2) * np.exp(-epsilon * y)


def round_budgets(eta, sensitivity, epsilon) -> tuple[Fraction, ...]:
    """Round budgets ``η_g`` down to dyadic rationals with ``Σ_g C_g η_g ≤ ε`` checked exactly.

    Each ``η_g > 0`` becomes ``⌊η_g 2^k⌋ / 2^k`` with ``k`` giving ≥ 20 significant bits; the sum
    ``Σ_g C_g η_g`` is then compared with ``Fraction(ε)`` in exact arithmetic and, if float
    rounding made it exceed ``ε``, all budgets are scaled down by ``(1 - 2⁻⁴⁰)`` until it fits.
    """
    eps = Fraction(float(epsilon))
    out = []
    for e in np.asarray(eta, dtype=float):
        if not np.isfinite(e) or e < 0:
            raise BudgetError(f"group budgets must be finite and >= 0, got {e}")
        out.append(dyadic_floor(float(e)))
    c = [int(x) for x in sensitivity]
    if sum(ci * ei for ci, ei in zip(c, out)) > eps * (1 + Fraction(1, 10**9)):
        raise BudgetError(
            f"group budgets spend {float(sum(ci * ei for ci, ei in zip(c, out)))} > epsilon = {float(eps)}"
        )
    while sum(ci * ei for ci, ei in zip(c, out)) > eps:
        out = [dyadic_floor(float(e) * (1 - 2.0**-40)) for e in out]
    return tuple(out)


def dyadic_floor(e: float) -> Fraction:
    if e <= 0:
        return Fraction(0)
    k = max(_BUDGET_BITS, _BUDGET_BITS - math.floor(math.log2(e)))
    k = min(k, 60)
    return Fraction(math.floor(Fraction(e) * (1 << k)), 1 << k)


def _as_source(rng) -> RandomSource:
    if rng is None:
        return SecureRandom()
    if isinstance(rng, RandomSource):
        return rng
    if isinstance(rng, np.random.Generator):
        return SeededRandom(rng)
    raise SamplerArgumentError(
        f"rng must be None (OS CSPRNG), a RandomSource or a numpy Generator, got {type(rng).__name__}"
    )


def sample_discrete_laplace_eps(epsilon, size: int, rng=None) -> np.ndarray:
    """Exact draws with ``P(y) ∝ exp(-ε|y|)`` on the integers, for a rational ``ε > 0``.

    Parameters
    ----------
    epsilon : int or fractions.Fraction
        The parameter ``ε = s/t`` (exact rational; floats are refused — round with
        :func:`round_budgets`).
    size : int
        Number of draws.
    rng : None, RandomSource or numpy.random.Generator
        ``None`` (default) reads the OS CSPRNG; a Generator is a byte source for tests only
        (**not secure**).

    Returns
    -------
    numpy.ndarray
        ``int64`` array of shape ``(size,)``.

    Examples
    --------
    >>> from fractions import Fraction
    >>> y = sample_discrete_laplace_eps(Fraction(1, 2), 5, np.random.default_rng(0))
    >>> y.dtype, y.shape
    (dtype('int64'), (5,))
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, (Integral, Rational)):
        raise BudgetError(
            f"epsilon must be an exact rational (int or Fraction), got {type(epsilon).__name__}; "
            "round float budgets down with round_budgets()"
        )
    eps = Fraction(epsilon)
    if eps <= 0:
        raise BudgetError(f"epsilon must be positive, got {eps}")
    if isinstance(size, bool) or not isinstance(size, Integral) or size < 0:
        raise SamplerArgumentError(f"size must be a non-negative integer, got {size!r}")
    if eps.denominator >= 1 << 60 or eps.numerator >= 1 << 60:
        raise SamplerArgumentError(f"epsilon = {eps} has a numerator/denominator beyond 2**60")
    src = _as_source(rng)
    return sample_discrete_laplace_many([eps], [int(size)], src)[0]


def sample_discrete_laplace_many(budgets, sizes, rng=None) -> list[np.ndarray]:
    """Independent discrete Laplace vectors, ``sizes[g]`` draws with parameter ``budgets[g]``.

    One vectorized pass for all groups: every pending element draws ``±M`` with
    ``P(M ≥ m) = e^{-m ε_g}`` (its own group's ``ε_g``,
    :func:`~dpmatrix._mechanisms.exact_exp.geometric`); an element whose draw is the negative
    zero is drawn again. ``rng`` as in :func:`sample_discrete_laplace_eps`.
    """
    eps = []
    for b in budgets:
        if isinstance(b, bool) or not isinstance(b, (Integral, Rational)) or Fraction(b) <= 0:
            raise BudgetError(f"budgets must be positive exact rationals, got {b!r}")
        eps.append(Fraction(b))
    sizes = [int(n) for n in sizes]
    if len(sizes) != len(eps) or any(n < 0 for n in sizes):
        raise SamplerArgumentError("need one non-negative size per budget")
    src = _as_source(rng)
    group = np.repeat(np.arange(len(eps), dtype=np.int64), sizes)
    out = np.empty(group.size, dtype=np.int64)
    for start in range(0, group.size, _CHUNK):  # bounded working set
        pending = np.arange(start, min(start + _CHUNK, group.size))
        while pending.size:
            if len(eps) == 1:
                m, negative = geometric(src, eps, pending.size, signs=True)
            else:  # only the chunk's own groups (few: ``group`` is sorted), renumbered from 0
                gp = group[pending]
                starts = np.r_[0, np.flatnonzero(np.diff(gp)) + 1]
                local = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, gp.size]))
                m, negative = geometric(src, [eps[g] for g in gp[starts].tolist()], local, signs=True)
            keep = ~(negative & (m == 0))
            out[pending[keep]] = np.where(negative, -m, m)[keep]
            pending = pending[~keep]
    return np.split(out, np.cumsum(sizes)[:-1]) if sizes else []
