"""Provably safe noise for real-valued linear queries: snap to a lattice, add discrete Gaussian noise.

The residual mechanisms of ResidualPlanner+ and QuerySmasher answer real-valued linear queries
``q(x) = C x`` (``C`` a Kronecker product ``⊗_i C_i`` of float matrices, ``x`` an integer
marginal table) with Gaussian noise. Floating-point Gaussian noise does not satisfy its
textbook guarantee: the set of floats a sampler can return around ``q(x)`` depends on ``q(x)``,
and Mironov (2012, *On significance of the least significant bits for differential privacy*,
CCS) recovered inputs of the Laplace mechanism from the low-order bits of its outputs. This
module replaces that noise by an integer computation whose privacy is exact.

The lattice mechanism
---------------------
With ``γ = 2^-f`` (data-independent):

1. ``k(x) = round(C x / γ)`` — the *exact* real ``C x`` (every float entry of ``C`` is a dyadic
   rational, so ``C x`` is an exact rational for integer ``x``), rounded to the nearest integer
   (ties upward). :func:`snap` computes it in floating point together with a rigorous error bound
   and recomputes exactly, in Python integers, every coordinate the bound leaves undecided: the
   result equals the exact rounding, bit for bit, whatever the data (only the time differs).
2. ``y = γ (k(x) + z)``, ``z ~ N_Z(0, τ²)`` i.i.d., ``τ² = σ̄²/γ²`` rational (``σ̄ ≥ σ`` the
   rational scale), drawn exactly from the OS CSPRNG (Canonne, Kamath & Steinke 2020, *The
   Discrete Gaussian for Differential Privacy*, NeurIPS; :mod:`.samplers`). Nothing random is a
   float; ``y`` is a post-processing of the integer vector ``k + z``.

Privacy (add/remove one record: ``x' = x ± e_c`` for one cell ``c``). Write
``k(x) = C x/γ + e(x)`` with ``|e_j(x)| ≤ 1/2``. Coordinates ``j`` with ``C_jc = 0`` have
``(Cx)_j = (Cx')_j`` and round identically, so ``k(x) − k(x')`` is supported on the non-zeros of
column ``c`` (at most ``m = max_c nnz(C e_c) = Π_i max_c nnz(C_i e_c)`` of them), where each
entry of ``e(x) − e(x')`` is at most 1 in absolute value. By the triangle inequality

    ‖k(x) − k(x')‖₂ ≤ ‖C e_c‖₂ / γ + √m ≤ (Δ₂ + γ √m) / γ,     Δ₂ = max_c ‖C e_c‖₂.

``k`` is an integer-valued query with L2 sensitivity ``Δ̃ = (Δ₂ + γ√m)/γ``; adding ``N_Z(0, τ²)``
to each coordinate is ``Δ̃²/(2τ²)``-zCDP (CKS 2020, Theorem 4 with their multivariate
extension, Theorem 14), i.e.

    ρ = (Δ₂ + γ √m)² / (2 σ̄²),

the continuous mechanism's ``Δ₂²/(2σ̄²)`` times ``(1 + γ√m/Δ₂)²``. :func:`choose_exponent`
picks the coarsest ``γ = 2^-f`` with ``γ√m ≤ tol·Δ₂`` (default ``tol = 1e-6``: ρ grows by a
factor at most ``1 + 2.000001e-6``), capped so that the integer noise scale ``σ̄/γ`` stays
below ``2³⁹`` (:func:`max_exponent`; only binds when ``σ̄/Δ₂ > 2³⁹/(10⁶√m)``), and the loss is
*accounted* (:func:`lattice_rho`, computed with the ``γ`` actually used), not neglected. If every ``C_i`` is an integer matrix, ``C x`` is already an integer, no rounding
happens and ``γ = 1``, ``ρ = Δ₂²/(2σ̄²)`` exactly (ResidualPlanner's Algorithm 3).

The output ``γ(k + z)`` differs from ``C x + N(0, σ̄²)`` by the deterministic rounding
(``≤ γ/2`` per coordinate, ``≤ 1e-6·Δ₂/(2√m)``) and by the discrete noise having variance at
most ``σ̄²`` (slightly less; CKS Proposition 19): unbiasedness is lost only at that level.

Exactness of the snapping
-------------------------
For the float evaluation ``ŷ = fl(C x)`` (axis by axis, any summation order, with or without
FMA) Higham (2002, *Accuracy and Stability of Numerical Algorithms*, §3.1 and §3.5) gives
``|ŷ − Cx| ≤ ((Π_i (1 + γ_{n_i})) − 1) (⊗|C_i|) |x|`` with ``γ_n = n u/(1 − n u)`` and ``u = 2⁻⁵³``
(no underflow: an absolute ``2⁻⁹⁶⁰`` per coordinate is added for safety). :func:`snap` computes the
bound with a factor 2 of margin; a coordinate whose ``ŷ/γ`` lies further than the bound from a
half-integer rounds to ``rint(ŷ/γ)``, and every other coordinate is recomputed in exact integer
arithmetic (``C_i = K_i 2^{-e_i}`` with integer ``K_i``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import numpy as np

from .._linalg.kron import kron_apply
from .._linalg.structured import Identity, IntegerCentring
from ..errors import BudgetError, SamplerArgumentError
from .samplers import RandomSource, sample_discrete_gaussian

__all__ = [
    "DEFAULT_LATTICE_TOL",
    "LatticeQuery",
    "LatticeSetting",
    "choose_exponent",
    "lattice_measure",
    "lattice_rho",
    "max_exponent",
    "snap",
    "snap_exact",
]

#: Default bound on ``γ√m / Δ₂`` (ρ grows by at most a factor ``(1 + tol)²``).
DEFAULT_LATTICE_TOL = 1e-6
_U = 2.0**-53
_TINY = 2.0**-960


def _dyadic(M: np.ndarray) -> tuple[np.ndarray, int]:
    """``M = K · 2^-e`` exactly: ``K`` an object array of Python ints, ``e ≥ 0`` the smallest such."""
    M = np.asarray(M, dtype=float)
    if not np.all(np.isfinite(M)):
        raise SamplerArgumentError("lattice query factors must be finite")
    ratios = [float(v).as_integer_ratio() for v in M.ravel()]
    e = max((d.bit_length() - 1 for _, d in ratios), default=0)
    K = np.array([p << (e - (d.bit_length() - 1)) for p, d in ratios], dtype=object).reshape(M.shape)
    return K, e


@dataclass(frozen=True, eq=False)
class LatticeQuery:
    """The linear query ``C = ⊗_i C_i`` (float factors) with its exact integer form.

    Attributes
    ----------
    factors : the float matrices ``C_i`` (``r_i × n_i``), exactly the query answered.
    ints, exps : ``C_i = ints[i] · 2^-exps[i]`` exactly (object arrays of Python ints).

    A factor may be the structured :class:`~dpmatrix._linalg.structured.IntegerCentring`
    ``n I − 11ᵀ`` of a plain attribute (ResidualPlanner's integer query): it is its own integer
    form (exponent 0), applied exactly in O(n) per fibre, and its column norms, supports and
    rows are closed forms — no ``n × n`` array.
    """

    factors: tuple[np.ndarray, ...]
    ints: tuple[np.ndarray, ...]
    exps: tuple[int, ...]

    @classmethod
    def of(cls, factors) -> LatticeQuery:
        """The lattice query of float factors ``C_i`` (copied, read-only)."""
        fs: list = []
        for f in factors:
            if isinstance(f, IntegerCentring):
                fs.append(f)
                continue
            a = np.array(f, dtype=float)
            if a.ndim != 2:
                raise SamplerArgumentError(f"lattice query factors must be matrices, got shape {a.shape}")
            a.setflags(write=False)
            fs.append(a)
        pairs = [(f, 0) if isinstance(f, IntegerCentring) else _dyadic(f) for f in fs]
        return cls(tuple(fs), tuple(p[0] for p in pairs), tuple(p[1] for p in pairs))

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the input table."""
        return tuple(f.shape[1] for f in self.factors)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return tuple(f.shape[0] for f in self.factors)

    @property
    def is_integer(self) -> bool:
        """Every factor is an integer matrix: ``C x`` is an integer, no rounding needed."""
        return all(e == 0 for e in self.exps)

    @cached_property
    def sensitivity_squared(self) -> Fraction:
        """``Δ₂² = max_c ‖C e_c‖² = Π_i max_c ‖C_i e_c‖²`` exactly (the largest diagonal of
        ``CᵀC`` is the product of the factors' largest diagonals)."""
        out = Fraction(1)
        for K, e in zip(self.ints, self.exps):
            if isinstance(K, IntegerCentring):
                out *= Fraction(K.max_column_norm_squared(), 1 << (2 * e))
                continue
            cols = [sum(int(v) * int(v) for v in K[:, c]) for c in range(K.shape[1])]
            out *= Fraction(max(cols, default=0), 1 << (2 * e))
        return out

    @cached_property
    def max_support(self) -> int:
        """``m = max_c nnz(C e_c) = Π_i max_c nnz(C_i e_c)``: outputs one record can change."""
        return math.prod(f.max_column_support() if isinstance(f, IntegerCentring)
                         else int(np.max(np.count_nonzero(f, axis=0), initial=0)) for f in self.factors)


def _sqrt_up(q: Fraction, bits: int = 80) -> Fraction:
    """A rational ``≥ √q`` within a relative ``2^-bits``."""
    if q <= 0:
        return Fraction(0)
    scale = 1 << (2 * bits)
    r = math.isqrt(q.numerator * scale // q.denominator) + 1
    return Fraction(r, 1 << bits) if Fraction(r * r, scale) >= q else Fraction(r + 1, 1 << bits)


def choose_exponent(query: LatticeQuery, *, tol: float = DEFAULT_LATTICE_TOL) -> int:
    """The smallest ``f ≥ 0`` with ``γ = 2^-f`` and ``γ²·m ≤ tol²·Δ₂²`` (exact rationals).

    ``f = 0`` (``γ = 1``, no rounding) for an integer query.

    Parameters
    ----------
    query : LatticeQuery
    tol : float
        Largest ``γ√m / Δ₂`` (``> 0``).

    Returns
    -------
    int

    Examples
    --------
    >>> q = LatticeQuery.of([np.array([[0.5, 0.25], [0.0, 1.0]])])
    >>> choose_exponent(q, tol=0.1)   # Δ₂² = 1.0625, m = 2: 2^-2f · 2 ≤ 0.01 · 1.0625
    4
    """
    if query.is_integer:
        return 0
    t = Fraction(tol)
    if not t > 0:
        raise SamplerArgumentError(f"lattice tolerance must be positive, got {tol!r}")
    d2, m = query.sensitivity_squared, query.max_support
    if d2 == 0:
        return 0
    f = 0
    while Fraction(m, 1 << (2 * f)) > t * t * d2:
        f += 1
    return f


def max_exponent(sigma_bar: Fraction) -> int:
    """The largest ``f`` keeping the integer noise scale ``σ̄·2^f`` below ``2³⁹`` (the exact
    sampler's range is ``2⁴⁰``); a coarser lattice than :func:`choose_exponent` asks for only
    when ``σ̄/Δ₂`` is enormous — its (larger) cost is still what :func:`lattice_rho` reports."""
    f = 0
    while sigma_bar * (1 << (f + 1)) < (1 << 39):
        f += 1
    return f


def lattice_rho(query: LatticeQuery, sigma_bar: Fraction, f: int) -> Fraction:
    """A rational upper bound (relative slack ``< 2^-78``) of ``ρ = (Δ₂ + γ√m)² / (2σ̄²)``.

    For an integer query with ``f = 0`` no rounding happens and ``ρ = Δ₂²/(2σ̄²)`` exactly.
    """
    if sigma_bar <= 0:
        raise BudgetError(f"sigma must be positive, got {sigma_bar}")
    d2 = query.sensitivity_squared
    if query.is_integer and f == 0:
        return d2 / (2 * sigma_bar * sigma_bar)
    s = _sqrt_up(d2) + Fraction(1, 1 << f) * _sqrt_up(Fraction(query.max_support))
    return s * s / (2 * sigma_bar * sigma_bar)


@dataclass(frozen=True, eq=False)
class LatticeSetting:
    """Everything a lattice measurement fixes before it reads data: the query ``C``, the rational
    scale ``σ̄``, the exponent ``f`` (``γ = 2^-f``) and the resulting exact cost.

    Attributes
    ----------
    query : LatticeQuery
    sigma_bar : fractions.Fraction
    f : int
        ``min(choose_exponent(query, tol), max_exponent(σ̄))``.
    tau2 : fractions.Fraction
        Variance parameter ``σ̄²/γ² = σ̄² 4^f`` of the integer noise ``z ~ N_Z(0, τ²)``.
    rho : fractions.Fraction
        :func:`lattice_rho` of ``(query, σ̄, f)``: the zCDP cost of releasing ``k(x) + z``.
    """

    query: LatticeQuery
    sigma_bar: Fraction
    f: int
    tau2: Fraction
    rho: Fraction

    @classmethod
    def choose(cls, query: LatticeQuery, sigma_bar: Fraction, *, tol: float = DEFAULT_LATTICE_TOL) -> LatticeSetting:
        """The setting :func:`lattice_measure` uses for ``query`` at scale ``sigma_bar``.

        Examples
        --------
        >>> from fractions import Fraction
        >>> s = LatticeSetting.choose(LatticeQuery.of([np.array([[2.0, -1.0]])]), Fraction(3))
        >>> s.f, s.tau2, s.rho   # an integer query: γ = 1, ρ = Δ₂²/(2σ̄²) = 4/18
        (0, Fraction(9, 1), Fraction(2, 9))
        """
        sb = Fraction(sigma_bar)
        if sb <= 0:
            raise BudgetError(f"sigma must be positive, got {sigma_bar}")
        f = min(choose_exponent(query, tol=tol), max_exponent(sb))
        return cls(query, sb, f, sb * sb * (1 << (2 * f)), lattice_rho(query, sb, f))


def _round_exact(num: int, e: int, f: int) -> int:
    """``round(num · 2^(f−e))`` for integers, ties upward (``⌊x + 1/2⌋``)."""
    if f >= e:
        return num << (f - e)
    sh = e - f
    return (num + (1 << (sh - 1))) >> sh


def _exact_apply(query: LatticeQuery, x: np.ndarray) -> np.ndarray:
    """``(⊗ K_i) x`` in Python integers (object array)."""
    return kron_apply(query.ints, np.asarray(x).astype(object))


def snap_exact(query: LatticeQuery, x: np.ndarray, f: int) -> np.ndarray:
    """``round(C x · 2^f)`` computed entirely in exact integer arithmetic (object array).

    The reference for :func:`snap` (slow; for tests and undecided coordinates)."""
    e = sum(query.exps)
    y = _exact_apply(query, x)
    return np.vectorize(lambda v: _round_exact(int(v), e, f), otypes=[object])(y)


def _exact_coordinates(query: LatticeQuery, x: np.ndarray, idx: np.ndarray) -> list[int]:
    """Exact integer ``((⊗ K_i) x)[j]`` for the multi-indices ``idx`` (one row each)."""
    xo = np.asarray(x).astype(object)
    out = []
    for row in idx:
        t = xo
        for K, r in zip(query.ints, row):
            t = np.tensordot(K.row(int(r)) if isinstance(K, IntegerCentring) else K[int(r)], t, axes=(0, 0))
        out.append(int(t))
    return out


def snap(query: LatticeQuery, x: np.ndarray, f: int) -> np.ndarray:
    """``k = round(C x · 2^f)`` (ties upward) for an integer table ``x``, exactly, as ``int64``.

    Floating point first, with a rigorous error bound (module docstring); coordinates the bound
    cannot decide are recomputed in exact integer arithmetic, so the result never depends on
    floating-point luck.

    Parameters
    ----------
    query : LatticeQuery
    x : numpy.ndarray
        Integer table of shape ``query.shape``.
    f : int
        Lattice exponent, ``γ = 2^-f``.

    Returns
    -------
    numpy.ndarray
        ``int64`` array of shape ``query.output_shape`` (an ``object`` array of Python ints in
        the unlikely case that an entry does not fit below ``2⁶²``).

    Examples
    --------
    >>> q = LatticeQuery.of([np.array([[0.3, 0.3], [1.0, -1.0]])])
    >>> snap(q, np.array([1, 2]), 2).tolist()   # round(0.9·4) = 4 (0.3 is a float), round(-1·4)
    [4, -4]
    """
    x = np.asarray(x)
    if x.shape != query.shape:
        raise SamplerArgumentError(f"table has shape {x.shape}, the query needs {query.shape}")
    if x.dtype.kind not in "iu":
        raise SamplerArgumentError("the lattice mechanism needs an integer table")
    e = sum(query.exps)
    if query.is_integer and f == 0 and np.all(np.abs(x) < 2**31) and all(
            _max_abs_entry(K) < 2**20 for K in query.ints):
        # integer query small enough for exact int64 arithmetic (bounded below 2^62)
        bound = float(np.max(np.abs(x), initial=0)) * math.prod(_max_row_abs_sum(K) for K in query.ints)
        if bound < 2.0**62:
            return kron_apply(tuple(K if isinstance(K, IntegerCentring) else K.astype(np.int64) for K in query.ints),
                              x.astype(np.int64))
    if np.max(np.abs(x), initial=0) >= 2**53:
        return _as_int64_if_fits(snap_exact(query, x, f))
    structured = [isinstance(c, IntegerCentring) for c in query.factors]
    if any(structured):
        # the integer factors first, exactly (Python integers): C x = C_dense (C_int x) with
        # C_int x an exact integer table, and |C_dense| |C_int x| <= |C_dense| (|C_int| |x|), so
        # the bound below (computed over every axis: larger than the dense axes' alone) holds
        xo = np.asarray(x).astype(object)
        xi = kron_apply(tuple(c if s else Identity(c.shape[1]) for c, s in zip(query.factors, structured)), xo)
        ai = kron_apply(tuple(c.abs() if s else Identity(c.shape[1]) for c, s in zip(query.factors, structured)),
                        np.abs(xo))
        if np.max(ai, initial=0) >= 2**53:
            return _as_int64_if_fits(snap_exact(query, x, f))
        rest = tuple(Identity(c.shape[0]) if s else c for c, s in zip(query.factors, structured))
        y = kron_apply(rest, xi.astype(float)) * 2.0**f
        absb = kron_apply(tuple(Identity(c.shape[0]) if s else np.abs(c) for c, s in zip(query.factors, structured)),
                          ai.astype(float)) * 2.0**f
    else:
        xf = x.astype(float)
        y = kron_apply(query.factors, xf) * 2.0**f
        absb = kron_apply(tuple(np.abs(c) for c in query.factors), np.abs(xf)) * 2.0**f
    g = 1.0
    for n in query.shape:
        g *= 1.0 + n * _U / (1.0 - n * _U)
    g -= 1.0
    # exact |ŷ − Cx|·2^f ≤ g·(⊗|C_i|)|x|·2^f ≤ g(1 + 2g)·absb (absb is itself a float product of
    # non-negative terms); 2g(1 + g) covers it, 2^-50 the rounding of the comparison below
    err = 2.0 * g * (1.0 + g) * absb + _TINY * 2.0**f * (1 + sum(query.shape)) + 2.0**-50
    k = np.rint(y)
    ok = (np.abs(y - k) + err < 0.5) & (np.abs(y) < 2.0**62)
    bad = np.argwhere(~ok)
    if not bad.shape[0]:
        return k.astype(np.int64)
    out = np.where(ok, k, 0.0).astype(np.int64).astype(object)  # undecided: overwritten below
    if bad.shape[0] * 4 > out.size or bad.shape[0] > 64:
        full = snap_exact(query, x, f)
        out[~ok] = full[~ok]
    else:
        vals = _exact_coordinates(query, x, bad)
        for row, v in zip(bad, vals):
            out[tuple(row)] = _round_exact(v, e, f)
    return _as_int64_if_fits(out)


def _max_abs_entry(K) -> float:
    """Largest absolute entry of an integer factor."""
    if isinstance(K, IntegerCentring):
        return float(K.max_abs_entry())
    return float(np.max(np.abs(K.astype(float)), initial=0))


def _max_row_abs_sum(K) -> float:
    """Largest absolute row sum of an integer factor (``‖K‖_∞``)."""
    if isinstance(K, IntegerCentring):
        return float(K.max_row_abs_sum())
    return float(np.max(np.sum(np.abs(K.astype(float)), axis=1), initial=0))


def _as_int64_if_fits(a: np.ndarray) -> np.ndarray:
    """An object array of Python ints as ``int64`` when every entry fits (else unchanged)."""
    if a.size == 0 or max(abs(int(v)) for v in a.ravel()) < 2**62:
        return a.astype(np.int64)
    return a


@dataclass(frozen=True)
class LatticeResult:
    """One lattice measurement: the noisy values ``γ(k + z)`` and what was spent.

    Attributes
    ----------
    values : float array ``γ (k + z)`` of shape ``query.output_shape`` (post-processing).
    f : lattice exponent (``γ = 2^-f``).
    tau2 : the integer noise's variance parameter ``σ̄²/γ²`` (exact rational).
    rho : rational upper bound of the zCDP cost (:func:`lattice_rho`).
    """

    values: np.ndarray
    f: int
    tau2: Fraction
    rho: Fraction


def lattice_measure(
    query: LatticeQuery,
    x: np.ndarray,
    sigma_bar: Fraction,
    rng: RandomSource | np.random.Generator | None = None,
    *,
    tol: float = DEFAULT_LATTICE_TOL,
    sample=None,
) -> LatticeResult:
    """Release ``γ(round(C x/γ) + z)`` with ``z ~ N_Z(0, σ̄²/γ²)`` from the OS CSPRNG.

    Parameters
    ----------
    query : LatticeQuery
        The linear query ``C``.
    x : numpy.ndarray
        Integer table of shape ``query.shape``.
    sigma_bar : fractions.Fraction
        The rational noise scale ``σ̄`` (round a float up with
        :func:`~dpmatrix._mechanisms.samplers.rational_upper_bound`).
    rng : None, RandomSource or numpy.random.Generator
        ``None`` (default): the OS CSPRNG. A generator is a reproducible, NOT secure byte source.
    tol : float
        Bound on ``γ√m/Δ₂`` (:func:`choose_exponent`).
    sample : callable, optional
        ``sample(τ², size, rng)``: the exact discrete Gaussian sampler (a noise family's
        ``sample``); :func:`~dpmatrix._mechanisms.samplers.sample_discrete_gaussian` if omitted.

    Returns
    -------
    LatticeResult

    Examples
    --------
    >>> from fractions import Fraction
    >>> q = LatticeQuery.of([np.array([[0.5, -0.5]])])
    >>> r = lattice_measure(q, np.array([3, 1]), Fraction(2))
    >>> r.values.shape, float(r.rho) > 0.25 / 8
    ((1,), True)
    """
    setting = LatticeSetting.choose(query, sigma_bar, tol=tol)
    f, tau2 = setting.f, setting.tau2
    k = snap(query, x, f)
    z = (sample or sample_discrete_gaussian)(tau2, k.size, rng).reshape(k.shape)
    if k.dtype == object or np.max(np.abs(k), initial=0) >= 2**62:
        noisy = k.astype(object) + z.astype(object)  # exact; converted to float below
    else:
        noisy = k + z
    values = np.asarray(noisy, dtype=float) * 2.0**-f  # post-processing of the integers k + z
    return LatticeResult(values, f, tau2, setting.rho)

