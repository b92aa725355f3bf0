"""Exact discrete Laplace noise for pure ε-DP with rational budgets.

The discrete Laplace (two-sided geometric) with parameter ``ε`` has
``P(y) = (1 - q)/(1 + q) · q^{|y|}``, ``q = e^{-ε}``, on the integers; added to integer answers
of L1 sensitivity ``C`` it is ``(C ε)``-DP (Ghosh, Roughgarden, Sundararajan 2009). Its variance
is ``2q/(1 - q)² = 1 / (2 sinh²(ε/2))``, strictly below the continuous Laplace's ``2/ε²``.

Budget split (``plan``) uses the continuous ``2/ε²`` model of the paper (its closed forms);
reported variances and the GLS weights use the exact discrete variance of the *rounded* rational
budgets actually used by the sampler (:func:`round_budgets`).

Sampler: Canonne, Kamath & Steinke (2020) Algorithm 2 for the rational scale ``t/s``
(``ε = s/t``): ``U`` uniform on ``{0..t-1}`` kept with probability ``e^{-U/t}``, ``V`` geometric
with ``P(V ≥ v) = e^{-v}``, ``X = U + tV`` (so ``P(X = x) ∝ e^{-x/t}``), ``Y = ⌊X/s⌋``
(``P(Y = y) ∝ e^{-ys/t}``), random sign with the negative zero rejected. The exact Bernoulli
draws and the OS-CSPRNG byte source are reused from :mod:`dpmatrix.mechanisms.samplers`;
no floating point touches the randomness.
"""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Integral, Rational

import numpy as np

from ..errors import BudgetError, SamplerArgumentError
from .samplers import RandomSource, SecureRandom, SeededRandom

__all__ = [
    "discrete_laplace_variance",
    "discrete_laplace_pmf",
    "round_budgets",
    "sample_discrete_laplace_eps",
    "sample_discrete_laplace_many",
]

#: Rounded budgets keep at least this many significant bits (relative loss ≤ 2^-20).
_BUDGET_BITS = 20


def discrete_laplace_variance(epsilon) -> np.ndarray:
    """Exact variance ``1/(2 sinh²(ε/2))`` of the discrete Laplace with parameter ``ε`` (inf at 0)."""
    e = np.asarray(epsilon, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(e > 0, 0.5 / np.sinh(e / 2) ** 2, np.inf)


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
    s, t = eps.numerator, eps.denominator
    if t >= 1 << 60 or s >= 1 << 60:
        raise SamplerArgumentError(f"epsilon = {eps} has a numerator/denominator beyond 2**60")
    src = _as_source(rng)
    out = np.empty(int(size), dtype=np.int64)
    filled = 0
    rate = 0.3
    while filled < size:
        need = size - filled
        m = min(1 << 17, int(need / rate * 1.05) + 16)
        got = _candidates(src, s, t, m)
        rate = max(0.02, got.shape[0] / m)
        take = min(need, got.shape[0])
        out[filled : filled + take] = got[:take]
        filled += take
    return out


def sample_discrete_laplace_many(budgets, sizes, rng=None) -> list[np.ndarray]:
    """Independent discrete Laplace vectors, ``sizes[g]`` draws with parameter ``budgets[g]``.

    One vectorized pass for all groups: the rational parameters are written over a common
    denominator ``T`` (``ε_g = s_g/T``), and CKS Algorithm 2 runs with the shared ``T`` and a
    per-element ``s``: ``X`` with ``P(X = x) ∝ e^{-x/T}``, ``Y = ⌊X/s_g⌋``, random sign, negative
    zero rejected (per element; rejected elements are redrawn). Falls back to one call per group
    when ``T ≥ 2⁴⁸``. ``rng`` as in :func:`sample_discrete_laplace_eps`.

    The candidates ``X`` do not depend on the element (only ``Y = ⌊X/s_g⌋`` does), so they are
    drawn as one i.i.d. pool per pass (:func:`_magnitudes`) and handed to the pending elements in
    order; an element whose ``(X, sign)`` is rejected takes the next fresh ``X`` — the same
    per-element rejection sampler, without the per-element bookkeeping of rejected attempts.
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
    big_t = math.lcm(*[e.denominator for e in eps]) if eps else 1
    nums = [e.numerator * (big_t // e.denominator) for e in eps]
    if big_t >= 1 << 48 or (nums and max(nums) >= 1 << 60):
        return [sample_discrete_laplace_eps(e, n, src) for e, n in zip(eps, sizes)]
    s_elem = np.repeat(np.asarray(nums, dtype=np.int64), sizes)
    total = s_elem.size
    out = np.empty(total, dtype=np.int64)
    pending = np.arange(total)
    rate = 0.6
    while pending.size:
        need = pending.size
        m = min(1 << 20, int(need / rate * 1.05) + 16)
        x = _magnitudes(src, big_t, m)
        rate = max(0.02, x.size / m)
        take = min(need, x.size)
        idx = pending[:take]
        y = x[:take] // s_elem[idx]
        negative = src.random_bits(take)
        keep = ~(negative & (y == 0))
        out[idx[keep]] = np.where(negative, -y, y)[keep]
        pending = np.concatenate([idx[~keep], pending[take:]])
    return np.split(out, np.cumsum(sizes)[:-1]) if sizes else []


def _magnitudes(src: RandomSource, t: int, m: int) -> np.ndarray:
    """The accepted ones of ``m`` attempts at ``X`` with ``P(X = x) ∝ e^{-x/t}`` (CKS Alg. 2 steps
    1–3: ``U`` uniform on ``{0..t-1}`` kept w.p. ``e^{-U/t}``, ``V`` with ``P(V ≥ v) = e^{-v}``,
    ``X = U + tV``); ``t < 2⁴⁸``, exact int64 (Python integers if ``tV`` could overflow)."""
    u = src.integers(t, m)
    u = u[src.bernoulli_exp(u, t)]
    v = np.zeros(u.shape[0], dtype=np.int64)
    alive = np.arange(u.shape[0])
    while alive.size:
        alive = alive[src.bernoulli_exp_minus_one(alive.size)]
        v[alive] += 1
    if v.size and int(v.max()) >= (1 << 62) // t:
        return (u.astype(object) + t * v.astype(object)).astype(np.int64)
    return u + t * v


def _candidates(src: RandomSource, s: int, t: int, m: int) -> np.ndarray:
    """``m`` attempts of CKS Algorithm 2 with scale ``t/s``; the accepted draws."""
    u = src.integers(t, m)
    u = u[src.bernoulli_exp(u, t)]
    n = u.shape[0]
    v = np.zeros(n, dtype=np.int64)
    alive = np.arange(n)
    while alive.size:
        alive = alive[src.bernoulli_exp_minus_one(alive.size)]
        v[alive] += 1
    if t < (1 << 40):
        x = u + t * v
        y = x // s
    else:  # exact Python integers
        x = u.astype(object) + t * v.astype(object)
        y = (x // s).astype(np.int64)
    negative = src.random_bits(n)
    keep = ~(negative & (y == 0))
    return np.where(negative, -y, y)[keep]
