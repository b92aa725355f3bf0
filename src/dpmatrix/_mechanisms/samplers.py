"""Exact, vectorized, cryptographically seeded sampling of the discrete Gaussian.

The measure step of ResidualPlanner's discrete mechanism (paper, section 5, Algorithm 3) rounds the
noise scale up to a rational number and adds independent discrete Gaussian noise
``N_Z(0, sigma2)``, ``P(x) ∝ exp(-x² / (2·sigma2))`` for integer ``x``, to integer query answers.
This module provides that noise:

* :func:`rational_upper_bound` rounds a (float) scale ``σ`` up to a simple rational ``s/t``;
* :func:`sample_discrete_gaussian` draws exact ``N_Z(0, sigma2)`` samples for a rational ``sigma2``;
* :func:`sample_discrete_laplace` draws exact discrete Laplace samples (the proposal distribution);
  pure ε-DP releases use :mod:`.laplace`, built on the same exact primitives;
* :class:`SecureRandom` (default) and :class:`SeededRandom` (tests only, **not secure**) supply
  uniform bits, uniform integers and exact Bernoulli draws to the samplers.

Algorithm
---------
Canonne, Kamath & Steinke (2020), *The Discrete Gaussian for Differential Privacy*, Algorithms
1–3, vectorized with numpy over many candidates at once:

* Discrete Laplace with integer scale ``t``: a magnitude ``M`` with ``P(M ≥ k) = exp(-k/t)``,
  a random sign, the negative zero rejected (``P(x) ∝ exp(-|x|/t)``). ``M`` is the inversion
  ``M = max{k : W < exp(-k/t)}`` of one uniform real ``W`` — the law of CKS Algorithm 2's
  ``U + tV``, without its loops of ``Bernoulli(exp(-1))`` draws.
* Discrete Gaussian: ``t = ⌊σ⌋ + 1``, candidate ``Y`` from the discrete Laplace with scale ``t``,
  accepted with probability ``exp(-(|Y| - σ²/t)² / (2σ²))`` (CKS Algorithm 3). Writing
  ``σ² = a/b`` in lowest terms, the exponent is the rational ``(|Y|·b·t - a)² / (2·a·b·t²)``.
* ``Bernoulli(exp(-E))`` is the event ``W < exp(-E)`` for a uniform real ``W``.

Both comparisons of ``W`` with ``exp(-E)`` are decided from its first random bits against
float64 thresholds with a proven error margin — one 64-bit word per discrete Gaussian candidate:
the sign, 15 bits of the acceptance uniform, 48 bits of the magnitude's — and, in the rare cells
the margin cannot decide (probability ``≈ 2⁻¹⁵`` per acceptance, ``≈ 2⁻⁴⁰/ε`` per inversion with
parameter ``ε``), finished exactly by drawing further bits of the *same* ``W`` and comparing in
:mod:`decimal` interval arithmetic:
:mod:`dpmatrix._mechanisms.exact_exp` states and proves the margins. The common path is numpy
``int64``/``float64`` only; no Python-integer arrays.

``Bernoulli(n/d)`` (:meth:`RandomSource.bernoulli`, rational probability) compares a uniform
real ``u ∈ [0, 1)`` with ``n/d`` lazily, ``k`` random bits at a time, in exact integers.
Uniform integers on ``{0..m-1}`` use Lemire's multiply-and-reject method on 16- or 32-bit words
(``m < 2³²``) or masked rejection on 64-bit words (exact for any ``m`` up to ``2⁶²``).

Exactness and range
-------------------
Every draw is a deterministic function of uniform random bits equal to the exact algorithm's
output: the float path only decides what it can prove. ``σ`` must be below ``2⁴⁰`` (and the
discrete Laplace scale ``t`` below ``2⁴⁰``). The returned noise is an ``int64`` array; values
beyond ``±2⁶³`` are impossible in practice (the probability is below ``exp(-2²³)`` for any
allowed scale) and raise :class:`OverflowError`.

Randomness
----------
:class:`SecureRandom` reads bytes from :func:`os.urandom` (the OS CSPRNG) and is the default. No
``numpy.random`` global state and no floating-point randomness is ever used. :class:`SeededRandom`
wraps a :class:`numpy.random.Generator` and uses it *only* as a source of random bytes; it exists
for reproducible tests and is **not** suitable for privacy-protecting releases.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction
from numbers import Integral, Rational, Real
from typing import Literal

import numpy as np
import numpy.typing as npt

from ..errors import BudgetError, SamplerArgumentError
from .exact_exp import bernoulli_exp_words, geometric, geometric_words, last_true

__all__ = [
    "SamplerArgumentError",
    "RandomSource",
    "SecureRandom",
    "SeededRandom",
    "rational_upper_bound",
    "sample_discrete_gaussian",
    "sample_discrete_laplace",
    "opendp_scale",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

# Operands below this bound can be multiplied/added in int64 without overflow checks.
_I64_SAFE = 1 << 62
# Bits consumed per lazy-comparison round of the int64 Bernoulli (ambiguity probability 2^-8).
_FAST_BITS = 8
# Bits per round of the Python-integer Bernoulli.
_SLOW_BITS = 32
# Candidates per vectorized chunk (keeps the working set in cache).
_CHUNK = 1 << 15


# ---------------------------------------------------------------------------------------------
# Random sources
# ---------------------------------------------------------------------------------------------


class RandomSource:
    """Uniform bits, uniform integers and exact Bernoulli draws built on a source of random bytes.

    Subclasses implement :meth:`random_bytes`; everything else is exact integer arithmetic on
    those bytes (numpy ``int64`` when provably overflow-free, Python integers otherwise).
    """

    #: Whether the bytes come from a cryptographically secure source.
    secure: bool = False

    def random_bytes(self, n: int) -> bytes:
        """Return ``n`` uniformly random bytes."""
        raise NotImplementedError

    # -- raw words ---------------------------------------------------------------------------

    def words(self, size: int, bits: Literal[8, 16, 32, 64]) -> np.ndarray:
        """``size`` independent uniform unsigned integers of ``bits`` bits (numpy uint array)."""
        dtype = {8: "<u1", 16: "<u2", 32: "<u4", 64: "<u8"}[bits]
        if size == 0:
            return np.zeros(0, dtype=dtype)
        return np.frombuffer(self.random_bytes(size * (bits // 8)), dtype=dtype)

    def random_bits(self, size: int) -> BoolArray:
        """``size`` independent fair coin flips as a boolean array."""
        raw = np.frombuffer(self.random_bytes((size + 7) // 8), dtype=np.uint8)
        return np.unpackbits(raw, count=size).astype(bool)

    # -- uniform integers --------------------------------------------------------------------

    def integers(self, high: int, size: int) -> IntArray:
        """``size`` independent uniform integers on ``{0, ..., high - 1}`` (``1 ≤ high ≤ 2⁶²``).

        Lemire's multiply-shift method with rejection of the biased low part (16-bit words for
        ``high ≤ 2⁸``, 32-bit words for ``high < 2³²``), masked rejection on 64-bit words above.
        Exactly uniform.
        """
        high = int(high)
        if not 1 <= high <= _I64_SAFE:
            raise SamplerArgumentError(f"integers(): high must be in [1, 2**62], got {high}")
        out = np.empty(size, dtype=np.int64)
        if high == 1:
            out[:] = 0
            return out
        pending = np.arange(size)
        if high < (1 << 32):
            bits = 16 if high <= (1 << 8) else 32
            mask = (1 << bits) - 1
            threshold = (1 << bits) % high  # low parts below this are biased: reject them
            while pending.size:
                prod = self.words(pending.size, bits).astype(np.uint64) * np.uint64(high)
                ok = (prod & np.uint64(mask)) >= np.uint64(threshold)
                out[pending[ok]] = (prod[ok] >> np.uint64(bits)).astype(np.int64)
                pending = pending[~ok]
        else:
            shift = np.uint64(64 - (high - 1).bit_length())
            while pending.size:
                cand = (self.words(pending.size, 64) >> shift).astype(np.int64)
                ok = cand < high
                out[pending[ok]] = cand[ok]
                pending = pending[~ok]
        return out

    # -- Bernoulli draws -----------------------------------------------------------------------

    def bernoulli(
        self, num: npt.ArrayLike | int, den: npt.ArrayLike | int, size: int | None = None
    ) -> BoolArray:
        """Exact independent ``Bernoulli(num/den)`` draws, ``0 ≤ num ≤ den``, ``den ≥ 1``.

        ``num`` and ``den`` are integers or integer arrays (broadcast to ``size``). Each draw
        compares a uniform real ``u`` with ``num/den`` ``k`` bits at a time: after drawing the
        ``k``-bit prefix ``x`` of ``u``, ``(x+1)·den ≤ num·2^k`` means ``u < num/den`` and
        ``x·den ≥ num·2^k`` means ``u ≥ num/den``; otherwise (probability ``< 2^-k``) the
        comparison continues with the remainder ``num·2^k - x·den``.
        """
        num_a = np.asarray(num)
        den_a = np.asarray(den)
        if size is None:
            size = int(np.broadcast(num_a, den_a).size)
        if num_a.dtype.kind not in "iuO" or den_a.dtype.kind not in "iuO":
            raise SamplerArgumentError("bernoulli(): num and den must be integers")
        if np.any(den_a < 1) or np.any(num_a < 0) or np.any(num_a > den_a):
            raise SamplerArgumentError("bernoulli(): need integers 0 <= num <= den and den >= 1")
        if den_a.ndim == 0:
            d = int(den_a)
            if num_a.ndim == 0:
                return self._bernoulli_scalar(int(num_a), d, size)
            return self._bernoulli_array(np.broadcast_to(num_a, (size,)), d)
        # General case (per-element denominators): Python integers, simple and exact.
        num_o = np.broadcast_to(num_a, (size,)).astype(object)
        den_o = np.broadcast_to(den_a, (size,)).astype(object)
        return self._bernoulli_object(num_o, den_o)

    def _bernoulli_scalar(self, num: int, den: int, size: int) -> BoolArray:
        """``Bernoulli(num/den)`` with one integer probability: thresholds on 8-bit words."""
        if num == den or num == 0:
            return np.full(size, num == den, dtype=bool)
        out = np.empty(size, dtype=bool)
        pending: np.ndarray | None = None
        while True:
            # u < num/den is decided by the 8-bit prefix x unless x == ⌊256·num/den⌋ and the
            # division is inexact; then u's remaining bits are compared with the remainder.
            q, r = divmod(num << 8, den)  # 0 <= q <= 255 since num < den
            x = self.words(size if pending is None else pending.size, 8)
            yes = x < q
            if pending is None:
                out[:] = yes
            else:
                out[pending] = yes
            if r == 0:
                return out
            undecided = np.flatnonzero(x == q)
            if undecided.size == 0:
                return out
            pending = undecided if pending is None else pending[undecided]
            num = r

    def _bernoulli_array(self, num: np.ndarray, den: int) -> BoolArray:
        """``Bernoulli(num[i]/den)`` for an integer array ``num`` and one denominator ``den``."""
        k = min(_FAST_BITS, 62 - den.bit_length())
        if k < 1 or num.dtype == object:
            return self._bernoulli_object(num.astype(object), den)
        num = num.astype(np.int64, copy=False)
        x = self.words(num.shape[0], 8).astype(np.int64)
        if k < 8:
            x >>= 8 - k
        c = num << k
        xd = x * den
        yes = xd <= c - den  # (x+1)·den <= num·2^k: u < num/den whatever the later bits
        undecided = (xd < c) ^ yes  # x·den < num·2^k < (x+1)·den
        if undecided.any():
            idx = np.flatnonzero(undecided)
            yes[idx] = self._bernoulli_array(c[idx] - xd[idx], den)
        return yes

    def _bernoulli_object(self, num: np.ndarray, den: np.ndarray | int) -> BoolArray:
        """Python-integer fallback of :meth:`_bernoulli_array` (any size of integers)."""
        k = _SLOW_BITS
        x = self.words(num.shape[0], 32).astype(object)
        c = num * (1 << k)
        xd = x * den
        yes = np.asarray(xd + den <= c, dtype=bool)
        undecided = np.asarray(xd < c, dtype=bool) ^ yes
        if undecided.any():
            idx = np.flatnonzero(undecided)
            d = den if np.ndim(den) == 0 else den[idx]
            yes[idx] = self._bernoulli_object(c[idx] - xd[idx], d)
        return yes

    def bernoulli_exp(self, num: npt.ArrayLike, den: int) -> BoolArray:
        """Exact independent ``Bernoulli(exp(-num/den))`` draws, integers ``num ≥ 0``, ``den ≥ 1``.

        ``num`` may be an ``int64`` or Python-integer (``object``) array; ``den`` is one integer.
        Each draw is ``W < exp(-num/den)`` for a uniform ``W`` whose first 32 bits are compared
        with float thresholds and, when those cannot decide (probability ``≈ 2⁻³²``), refined
        exactly (:mod:`.exact_exp`).
        """
        den = int(den)
        num_a = np.atleast_1d(np.asarray(num))
        if num_a.dtype.kind not in "iuO" or den < 1:
            raise SamplerArgumentError("bernoulli_exp(): need an integer array num and den >= 1")
        if num_a.size and np.any(num_a < 0):
            raise SamplerArgumentError("bernoulli_exp(): num must be non-negative")
        e_f = _float_ratios(num_a, den)
        return bernoulli_exp_words(
            self.words(num_a.shape[0], 32), 32, e_f, lambda i: (int(num_a[i]), den), self
        )

    def bernoulli_exp_minus_one(self, size: int) -> BoolArray:
        """``size`` exact independent ``Bernoulli(exp(-1))`` draws."""
        return self.bernoulli_exp(np.ones(size, dtype=np.int64), 1)


def _float_ratios(num: np.ndarray, den: int) -> np.ndarray:
    """Float64 values of ``num[i]/den`` with relative error ``≤ 3.01·2⁻⁵³`` (``inf`` if too big)."""
    if num.dtype != object and den < (1 << 1000):
        return num.astype(np.float64) / float(den)
    out = np.empty(num.shape[0], dtype=np.float64)
    for i, p in enumerate(num.tolist()):
        try:
            out[i] = int(p) / den  # int true division is correctly rounded
        except OverflowError:
            out[i] = math.inf
    return out


class SecureRandom(RandomSource):
    """Random bytes from the operating system's CSPRNG (:func:`os.urandom`). The default source."""

    secure = True
    _MAX_REQUEST = 1 << 20

    def random_bytes(self, n: int) -> bytes:
        if n <= self._MAX_REQUEST:
            return os.urandom(n)
        return b"".join(
            os.urandom(min(self._MAX_REQUEST, n - i)) for i in range(0, n, self._MAX_REQUEST)
        )

    def __repr__(self) -> str:
        return "SecureRandom()"


class SeededRandom(RandomSource):
    """Random bytes from a seeded :class:`numpy.random.Generator`. **NOT cryptographically secure.**

    For reproducible tests only: the generator is used solely through ``Generator.bytes`` (so the
    sampling arithmetic is identical to the secure path), but its output is predictable from the
    seed. Never use it for a privacy-protecting release.
    """

    secure = False

    def __init__(self, seed: int | np.random.Generator) -> None:
        if isinstance(seed, np.random.Generator):
            self._gen = seed
        else:
            self._gen = np.random.default_rng(seed)

    def random_bytes(self, n: int) -> bytes:
        return self._gen.bytes(n)

    def __repr__(self) -> str:
        return f"SeededRandom({self._gen!r})"


_DEFAULT_SOURCE = SecureRandom()


def _as_source(rng: RandomSource | np.random.Generator | None) -> RandomSource:
    if rng is None:
        return _DEFAULT_SOURCE
    if isinstance(rng, RandomSource):
        return rng
    if isinstance(rng, np.random.Generator):
        return SeededRandom(rng)
    raise SamplerArgumentError(
        "rng must be None (OS CSPRNG), a dpmatrix RandomSource, or a numpy Generator "
        f"(tests only, not secure); got {type(rng).__name__}"
    )


# ---------------------------------------------------------------------------------------------
# Validation helpers
# ---------------------------------------------------------------------------------------------


def _check_size(size: object) -> int:
    if isinstance(size, bool) or not isinstance(size, Integral):
        raise SamplerArgumentError(f"size must be a non-negative integer, got {size!r}")
    if size < 0:
        raise SamplerArgumentError(f"size must be a non-negative integer, got {size}")
    return int(size)


def _check_sigma2(sigma2: object) -> Fraction:
    """Validate an exact (rational) variance parameter."""
    if isinstance(sigma2, bool) or not isinstance(sigma2, Rational):
        if isinstance(sigma2, float) and not math.isfinite(sigma2):
            raise BudgetError(f"sigma2 must be a finite positive rational, got {sigma2!r}")
        raise BudgetError(
            f"sigma2 must be an exact rational (int or fractions.Fraction), got "
            f"{type(sigma2).__name__} {sigma2!r}; round a float scale up with "
            "rational_upper_bound(sigma) and pass its square"
        )
    value = Fraction(int(sigma2.numerator), int(sigma2.denominator))
    if value <= 0:
        raise BudgetError(f"sigma2 must be positive, got {value}")
    return value


# ---------------------------------------------------------------------------------------------
# Rounding the scale
# ---------------------------------------------------------------------------------------------


def rational_upper_bound(sigma: float | Rational, rel_var_tol: float | Rational = 1e-4) -> Fraction:
    """The simplest rational ``s/t ≥ σ`` whose variance exceeds ``σ²`` by at most ``rel_var_tol``.

    Returns the fraction with the smallest denominator (and, among those, the smallest numerator)
    in the closed interval ``{q : q ≥ σ, q²/σ² - 1 ≤ rel_var_tol}``. ``σ`` and the tolerance are
    taken at their exact values (a float is the dyadic rational it stores). The search walks the
    Stern–Brocot tree using only the two exact predicates ``q < σ`` and ``q² > σ²(1 + tol)`` with
    Fraction arithmetic, jumping over runs of same-direction steps by exponential and binary
    search, so it needs ``O(log²)`` predicate evaluations and never touches an irrational number.

    Raises :class:`~dpmatrix.errors.BudgetError` if ``σ`` is not a finite positive number and
    :class:`SamplerArgumentError` if the tolerance is negative or not finite.
    """
    sig = _exact_positive(sigma, "sigma")
    try:
        if isinstance(rel_var_tol, bool) or not isinstance(rel_var_tol, Real):
            raise TypeError(type(rel_var_tol).__name__)
        tol = Fraction(rel_var_tol)
    except (TypeError, ValueError, OverflowError) as exc:
        raise SamplerArgumentError(
            f"rel_var_tol must be a finite non-negative number, got {rel_var_tol!r}"
        ) from exc
    if tol < 0:
        raise SamplerArgumentError(f"rel_var_tol must be non-negative, got {rel_var_tol!r}")
    var_hi = sig * sig * (1 + tol)

    def too_small(p: int, q: int) -> bool:
        return Fraction(p, q) < sig

    def too_big(p: int, q: int) -> bool:
        return Fraction(p * p, q * q) > var_hi

    # Stern–Brocot bounds lo = ln/ld < target < hi = hn/hd (hi = 1/0 is +infinity).
    ln, ld, hn, hd = 0, 1, 1, 0
    while True:
        mn, md = ln + hn, ld + hd
        if too_small(mn, md):
            # Largest k with (ln + k·hn)/(ld + k·hd) still too small; k ≥ 1 here.
            k = _last_true(lambda k: too_small(ln + k * hn, ld + k * hd))
            ln, ld = ln + k * hn, ld + k * hd
        elif too_big(mn, md):
            k = _last_true(lambda k: too_big(hn + k * ln, hd + k * ld))
            hn, hd = hn + k * ln, hd + k * ld
        else:
            result = Fraction(mn, md)
            assert result >= sig and result * result <= var_hi
            return result


def _last_true(pred) -> int:  # type: ignore[no-untyped-def]
    """Largest ``k ≥ 1`` with ``pred(k)`` for a predicate true at 1 and eventually false."""
    lo, hi = 1, 2
    while pred(hi):
        lo, hi = hi, 2 * hi
    return last_true(pred, lo, hi)


def _exact_positive(value: object, name: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise BudgetError(f"{name} must be a finite positive number, got {value!r}")
    try:
        exact = Fraction(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError) as exc:
        raise BudgetError(f"{name} must be a finite positive number, got {value!r}") from exc
    if exact <= 0:
        raise BudgetError(f"{name} must be a finite positive number, got {value!r}")
    return exact


# ---------------------------------------------------------------------------------------------
# Samplers
# ---------------------------------------------------------------------------------------------


def _laplace_candidates(src: RandomSource, t: int, m: int) -> IntArray:
    """``m`` attempts at ``P(x) ∝ exp(-|x|/t)``: ``±M`` with ``P(M ≥ k) = exp(-k/t)``, the
    negative zero rejected; returns the accepted draws (``≤ m``)."""
    x, negative = geometric(src, [Fraction(1, t)], m, signs=True)
    keep = ~(negative & (x == 0))
    return np.where(negative, -x, x)[keep]


def sample_discrete_laplace(
    t: int, size: int, rng: RandomSource | np.random.Generator | None = None
) -> IntArray:
    """Exact draws with ``P(x) ∝ exp(-|x|/t)`` on the integers, for an integer scale ``t ≥ 1``.

    CKS (2020) Algorithm 2 with ``s = 1``, vectorized. ``rng`` as in
    :func:`sample_discrete_gaussian`.
    """
    if isinstance(t, bool) or not isinstance(t, Integral) or t < 1:
        raise BudgetError(f"discrete Laplace scale t must be a positive integer, got {t!r}")
    t = int(t)
    if t >= 1 << 40:
        raise SamplerArgumentError(f"discrete Laplace scale t must be below 2**40, got {t}")
    size = _check_size(size)
    src = _as_source(rng)
    return _fill(size, 1.0, lambda m: _laplace_candidates(src, t, m))


def _fill(size: int, rate: float, draw) -> IntArray:
    """``size`` accepted values from a rejection sampler: ``draw(m)`` turns ``m`` proposals
    into the accepted ones; chunks are sized from the acceptance rate seen so far."""
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        m = min(_CHUNK, int(need / rate * 1.05) + 16)
        got = draw(m)
        rate = max(0.05, got.shape[0] / m)
        take = min(need, got.shape[0])
        out[filled : filled + take] = got[:take]
        filled += take
    return out


def sample_discrete_gaussian(
    sigma2: Rational | int,
    size: int,
    rng: RandomSource | np.random.Generator | None = None,
    *,
    backend: Literal["dpmatrix", "opendp"] = "dpmatrix",
) -> IntArray:
    """Exact independent draws from the discrete Gaussian ``N_Z(0, sigma2)``.

    ``P(x) = exp(-x²/(2·sigma2)) / Σ_y exp(-y²/(2·sigma2))`` for every integer ``x``.

    Parameters
    ----------
    sigma2:
        The variance *parameter* ``σ²`` as an exact rational (``int`` or
        :class:`fractions.Fraction`). The actual variance of ``N_Z(0, σ²)`` is slightly below
        ``σ²``. Floats are refused: round a float ``σ`` up with :func:`rational_upper_bound`.
    size:
        Number of draws (``≥ 0``).
    rng:
        ``None`` (default) for the OS CSPRNG (:class:`SecureRandom`), any :class:`RandomSource`,
        or a :class:`numpy.random.Generator` used only as a byte source — reproducible but
        **NOT secure**, for tests only.
    backend:
        ``"dpmatrix"`` (this module's vectorized sampler) or ``"opendp"`` (OpenDP's Rust sampler,
        optional dependency; needs ``rng=None``; the scale is rounded *up* to a float, see
        :func:`opendp_scale`, so its noise is never smaller than requested).

    Returns
    -------
    numpy.ndarray
        ``int64`` array of shape ``(size,)``.

    Raises
    ------
    BudgetError
        ``sigma2`` is not a positive rational (zero, negative, NaN, infinite, float).
    SamplerArgumentError
        ``size`` is negative or not an integer, ``rng`` has the wrong type, unknown backend.
    """
    s2 = _check_sigma2(sigma2)
    size = _check_size(size)
    if backend == "opendp":
        if rng is not None:
            raise SamplerArgumentError("backend='opendp' uses OpenDP's own CSPRNG; pass rng=None")
        return _sample_opendp(s2, size)
    if backend != "dpmatrix":
        raise SamplerArgumentError(f"backend must be 'dpmatrix' or 'opendp', got {backend!r}")
    src = _as_source(rng)

    a, b = s2.numerator, s2.denominator
    t = math.isqrt(a // b) + 1  # ⌊σ⌋ + 1 (⌊√x⌋ = isqrt(⌊x⌋))
    if t >= 1 << 40:
        raise SamplerArgumentError(f"sigma2 = {s2} is too large (sigma must be below 2**40)")
    bt = b * t
    den = 2 * a * b * t * t  # exponent = (|Y|·b·t - a)² / den
    # float exponents (|Y| - c)²·inv with c = σ²/t, inv = 1/(2σ²): error ≤ 2⁻⁵⁰(1 + E) when c
    # and inv are normal floats and |Y| < 2⁵² (exact_exp module docstring)
    floats = Fraction(1, 1 << 500) < s2
    c_f = a / bt if floats else 0.0  # int true division: correctly rounded
    inv_f = b / (2 * a) if floats else 0.0
    eps = [Fraction(1, t)]

    def exact(x: IntArray) -> object:
        return lambda i: ((int(x[i]) * bt - a) ** 2, den)

    packed = eps[0] >= Fraction(1, 1 << 24)  # one 64-bit word per candidate (below)

    def draw(m: int) -> IntArray:
        if packed:
            # one uniform word per candidate, split into independent parts: bit 0 the sign,
            # bits 1–15 the first bits of the acceptance uniform, bits 16–63 those of the
            # magnitude's uniform (its inversion cells stay far finer than the float margins)
            raw = src.words(m, 64)
            negative = (raw & np.uint64(1)).astype(bool)
            acc_words, acc_bits = (raw >> np.uint64(1)) & np.uint64(0x7FFF), 15
            x = geometric_words(raw >> np.uint64(16), 1.0 / t, lambda i: eps[0], src, bits=48)
        else:
            x, negative = geometric(src, eps, m, signs=True)  # |Y|: P(|Y| ≥ k) = exp(-k/t)
            acc_words, acc_bits = src.words(m, 32), 32
        keep = ~(negative & (x == 0))
        if floats and int(x.max(initial=0)) < 1 << 52:
            d = x.astype(np.float64) - c_f
            e_f = d * d * inv_f
        else:  # huge |Y| or tiny σ²: correctly rounded exponents one by one (rare)
            e_f = _float_ratios(np.array([(int(v) * bt - a) ** 2 for v in x], dtype=object), den)
        accept = bernoulli_exp_words(acc_words, acc_bits, e_f, exact(x), src)
        return np.where(negative, -x, x)[keep & accept]

    return _fill(size, 0.76, draw)


# ---------------------------------------------------------------------------------------------
# Optional OpenDP backend / reference
# ---------------------------------------------------------------------------------------------


def opendp_scale(sigma2: Rational | int) -> float:
    """The smallest float ``f`` with ``f² ≥ sigma2`` exactly (OpenDP takes its scale as a float).

    OpenDP samples ``N_Z`` with the exact rational value of the float scale, so rounding up keeps
    the noise at least as large as requested (privacy is never weakened).
    """
    s2 = _check_sigma2(sigma2)
    f = math.sqrt(s2.numerator / s2.denominator)
    while Fraction(f) ** 2 < s2:
        f = math.nextafter(f, math.inf)
    while f > 0 and Fraction(math.nextafter(f, 0.0)) ** 2 >= s2:
        f = math.nextafter(f, 0.0)
    return f


def _sample_opendp(s2: Fraction, size: int) -> IntArray:
    try:
        import opendp.prelude as dp
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SamplerArgumentError(
            "backend='opendp' needs the optional dependency 'opendp' (pip install opendp)"
        ) from exc
    dp.enable_features("contrib")
    if size == 0:
        return np.zeros(0, dtype=np.int64)
    meas = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64"), scale=opendp_scale(s2)
    )
    return np.asarray(meas([0] * size), dtype=np.int64)
