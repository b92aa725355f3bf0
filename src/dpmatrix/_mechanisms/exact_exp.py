"""Exact ``Bernoulli(exp(-E))`` and geometric draws, decided by float64 and finished exactly.

The exact noise samplers (:mod:`.samplers`, :mod:`.laplace`) need two primitives, for exact
rational exponents:

* ``Bernoulli(exp(-E))``, ``E = p/q ≥ 0``: the acceptance step of the discrete Gaussian
  (Canonne, Kamath & Steinke 2020, Algorithm 3) and of CKS Algorithm 2;
* a geometric magnitude ``M`` with ``P(M ≥ m) = exp(-m·ε)`` for rational ``ε > 0`` (the discrete
  Laplace ``P(y) ∝ exp(-ε|y|)`` is ``±M`` with the negative zero rejected).

Both are read off one uniform real ``W ∈ [0, 1)``, revealed lazily: ``Bernoulli(exp(-E))`` is the
event ``W < exp(-E)``, and ``M = max{m ≥ 0 : W < exp(-m·ε)}`` (so ``P(M ≥ m) = exp(-mε)``:
inversion of the geometric law). Any algorithm that outputs this deterministic function of ``W``
is exact, however it evaluates it. The first ``k ≤ 63`` random bits ``w`` put ``W`` in the cell
``[w/2^k, (w+1)/2^k)`` (the samplers use ``k = 15`` or ``32`` for acceptances, ``48`` or ``63``
for inversions, several parts of one 64-bit word being independent uniforms).

Fast path (numpy, float64)
--------------------------
With ``E_f`` a float64 value of ``E`` and ``v = exp_f(-min(E_f, 700))`` (numpy's ``exp``), the
thresholds ``lo = v·(1 - s·(E_c + 3))`` (``0`` if ``E_f > 700`` or NaN) and
``hi = v·(1 + s·(2E_c + 4))``, ``E_c = min(E_f, 700)``, ``s = 2⁻⁴⁴``, satisfy
``lo ≤ exp(-E) ≤ hi`` whenever

(i)  ``|E_f - E| ≤ 2⁻⁴⁹·(1 + E)`` — shown below for every ``E_f`` this module and its callers
     compute; the thresholds allow ``δ = s·(1 + E_f)``, at least 16× more; and
(ii) numpy's ``exp`` has relative error ``≤ s/16 = 2⁻⁴⁸`` on ``[-700, 0]`` (IEEE libraries are
     within a few ulps, ``≤ 2⁻⁵⁰``; :func:`exp_self_check` checks it once per process on the
     machine that draws the noise, against :meth:`decimal.Decimal.exp`, before any threshold is
     computed, and ``tests/mechanisms/test_exact_exp.py`` more thoroughly).

Proof: ``exp(-E) ≥ exp(-E_f - δ) ≥ v(1 - s/16)(1 - δ) ≥ v(1 - s(E_f + 17/16))``, and
``exp(-E) ≤ exp(-E_f + δ) ≤ v(1 + s/8)(1 + 2δ) ≤ v(1 + s(2E_f + 3))`` (``δ ≤ 1``); the extra
``s`` in each threshold covers the four roundings of computing it. Beyond 700 the bound at 700
still holds (``E ≥ 700 - s·701``), and ``lo = 0``. Then, exactly in integers,
``w < ⌊lo·2^k⌋`` implies ``W < (w+1)/2^k ≤ lo ≤ exp(-E)`` (accept), and ``w ≥ ⌈hi·2^k⌉``
implies ``W ≥ exp(-E)`` (reject). The remaining cells (probability about
``2^-k + 3s(E+2)e^{-E}`` for one comparison; ``≈ 2⁻⁴⁰/ε`` for an inversion with parameter
``ε``, whose boundaries are ``ε`` apart in ``-ln W``) are *undecided*.

The float exponents (``u = 2⁻⁵³``): ``fl(fl(p)/fl(q))`` errs by ``≤ 3.01u·E``; the geometric's
``fl(m·ε_f)`` (``m < 2⁵²`` exact) and ``fl(fl(m·ε_f) + ε_f)`` by ``≤ 3.01u·E``; the discrete
Gaussian's ``fl(fl(|Y| - c_f)²·inv_f)`` with ``c = σ²/t``, ``inv = 1/(2σ²)``, ``t > σ``,
``|Y| < 2⁵²`` and normal floats by ``≤ u(1.01·√(2E) + 6.2E) ≤ 2⁻⁵⁰(1 + E)`` (the subtraction's
absolute error ``u(c + |d|)`` times ``2|d|·inv`` is ``u(|d|/t + 2E)`` and ``|d|/t ≤ √(2E)``).

Exact continuation (Python, rare)
---------------------------------
An undecided draw is *not* redrawn (that would condition ``W`` on avoiding the cells near the
boundary and bias the result). The same ``W`` is refined: 64 more random bits at a time are
appended to ``w`` (:class:`LazyUniform`) and the comparison ``W < exp(-E) ⇔ -ln W > E`` is
decided in interval arithmetic with :mod:`decimal`, whose ``ln`` is documented as correctly
rounded: with the cell ``[L, H)``, ``-ln H = n·ln 2 - ln(w+1)`` and ``-ln L = n·ln 2 - ln w``
are bracketed (one ulp outwards, products and differences rounded outwards by
``ROUND_FLOOR``/``ROUND_CEILING`` contexts) and compared with the exact ``Fraction`` ``E``:
``-ln H ≥ E`` accepts, ``-ln L ≤ E`` rejects, otherwise both the cell and the precision are
refined. The log form never underflows (``E`` may be ``10⁶`` or more; ``exp(-E)`` is then far
below the smallest float, and the draw is still exact). The geometric's continuation finds
``M = max{m : W < exp(-mε)}`` by galloping and bisection over the same exact predicate.

Small ``ε``: the inversion cells of ``M`` have relative width ``≈ ε``, so for
``ε < 2⁻²⁴`` undecided draws would become common; there ``M = K·B + R`` with ``K = 2^j``,
``Kε ∈ (2⁻¹¹, 2⁻¹⁰]``: ``B`` geometric with parameter ``Kε`` (inversion as above) and ``R`` on
``{0..K-1}`` with ``P(R = r) ∝ exp(-rε)`` (``j`` uniform bits kept with probability
``exp(-rε) > e^{-2⁻¹⁰}``, retried otherwise; the word's other ``64 - j`` bits begin the
acceptance uniform) — independent, so ``P(M = bK + r) ∝ exp(-(bK + r)ε)``: the same law (CKS
Algorithm 2's split ``X = U + tV``, with a block ``K`` instead of ``t``).

Randomness comes only from the source's bytes (``src.words``, ``src.random_bytes``); no
floating-point randomness and no global state.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal, localcontext
from fractions import Fraction
from typing import Protocol

import numpy as np

from ..errors import SamplerArgumentError, SamplerEnvironmentError

__all__ = [
    "SLACK",
    "LazyUniform",
    "accept_threshold",
    "bernoulli_exp_words",
    "exact_geometric",
    "exp_self_check",
    "geometric",
    "geometric_words",
    "last_true",
    "less_exp",
    "reject_threshold",
]

#: Relative slack ``s`` of the float thresholds (module docstring); larger values are valid too
#: (up to :data:`MAX_SLACK`) and only make undecided draws more frequent (tests force them so).
SLACK = 2.0**-44
MAX_SLACK = 2.0**-10
#: Exponents beyond this are clipped (``exp(-700)`` is still a normal float).
_E_CLIP = 700.0
#: Below this ``ε`` the geometric splits as ``K·B + R`` (module docstring).
_SPLIT_EPS = Fraction(1, 1 << 24)
_MIN_EPS, _MAX_EPS = Fraction(1, 1 << 62), Fraction(1 << 60)
_LN2 = math.log(2.0)


class ByteSource(Protocol):  # what this module needs of a RandomSource
    def random_bytes(self, n: int) -> bytes: ...

    def words(self, size: int, bits: int) -> np.ndarray: ...


def _check_slack(slack: float) -> float:
    if not SLACK <= slack <= MAX_SLACK:
        raise SamplerArgumentError(f"slack must be in [2**-44, 2**-10], got {slack!r}")
    return slack


# ---------------------------------------------------------------------------------------------
# Float thresholds
# ---------------------------------------------------------------------------------------------

#: the largest relative error of numpy's ``exp`` on ``[-700, 0]`` the proof allows (condition (ii))
EXP_REL_ERROR = 2.0**-48


@functools.cache
def exp_self_check() -> float:
    """Condition (ii) of the module docstring, checked on this machine once per process.

    numpy's ``exp`` on 1,038 points of ``[-700, 0]`` (arrays of 1,031 and 7 values, so that both
    a vectorized body and a scalar tail are used) against :meth:`decimal.Decimal.exp` at 40
    digits (correctly rounded). About 20 ms.

    Returns
    -------
    float
        The largest relative error seen (about ``2⁻⁵³`` on common libraries).

    Raises
    ------
    SamplerEnvironmentError
        An error above :data:`EXP_REL_ERROR`: the float path's margins would not be proven, so
        no noise is drawn.

    Examples
    --------
    >>> exp_self_check() <= EXP_REL_ERROR
    True
    """
    worst = 0.0
    with localcontext() as ctx:
        ctx.prec = 40
        for x in (-np.linspace(0.0, 700.0, 1031) * (1.0 - 1e-3 / math.pi), -np.linspace(0.0, 1.0, 7) / math.e):
            for xi, gi in zip(x.tolist(), np.exp(x).tolist()):
                true = Decimal(xi).exp()
                worst = max(worst, float(abs(Decimal(gi) - true) / true))
    if not worst <= EXP_REL_ERROR:
        raise SamplerEnvironmentError(
            f"numpy's exp on this machine errs by {worst:.3g} (relative) where the exact noise "
            f"samplers' proof allows {EXP_REL_ERROR:.3g}: no secure noise is drawn; please report "
            "this with your numpy build (numpy.show_config())")
    return worst



def accept_threshold(e_f: np.ndarray, bits: int, slack: float = SLACK) -> np.ndarray:
    """``A = ⌊lo·2^bits⌋`` (``uint64``): a ``bits``-bit prefix ``w < A`` proves ``W < exp(-E)``.

    ``E_f > 700`` (``exp(-700)·2⁶³ < 1``) and NaN give ``A = 0``: never accept.
    """
    exp_self_check()
    scale = 2.0**bits  # exact power-of-two scaling, folded into the factor
    t = np.fmin(np.asarray(e_f, dtype=np.float64), _E_CLIP)  # NaN → 700
    f = t * (-slack * scale)
    f += (1.0 - 3.0 * slack) * scale  # 2^bits · (1 - s(E_c + 3)) > 0 for s ≤ 2⁻¹⁰
    np.negative(t, out=t)
    np.exp(t, out=t)
    t *= f
    return t.astype(np.uint64)  # truncation = floor (t ≥ 0)


def reject_threshold(e_f: np.ndarray, bits: int, slack: float = SLACK) -> np.ndarray:
    """``B = ⌈hi·2^bits⌉`` (``uint64``): a ``bits``-bit prefix ``w ≥ B`` proves ``W ≥ exp(-E)``.

    ``hi ≥ 1`` and NaN give ``B = 2^bits``: never reject.
    """
    exp_self_check()
    scale = 2.0**bits
    t = np.minimum(np.asarray(e_f, dtype=np.float64), _E_CLIP)  # NaN stays NaN
    f = t * (2.0 * slack * scale)
    f += (1.0 + 4.0 * slack) * scale  # 2^bits · (1 + s(2E_c + 4))
    np.negative(t, out=t)
    np.exp(t, out=t)
    t *= f
    np.fmin(t, scale, out=t)  # NaN → 2^bits
    np.ceil(t, out=t)
    return t.astype(np.uint64)


# ---------------------------------------------------------------------------------------------
# The exact continuation
# ---------------------------------------------------------------------------------------------


class LazyUniform:
    """A uniform real ``W ∈ [value/2^n, (value+1)/2^n)`` whose later bits are drawn on demand."""

    __slots__ = ("n", "value")

    def __init__(self, value: int, n: int) -> None:
        self.value, self.n = int(value), int(n)

    def extend(self, src: ByteSource) -> None:
        """Append 64 fresh random bits (big-endian) to ``W``'s binary expansion."""
        self.value = (self.value << 64) | int.from_bytes(src.random_bytes(8), "big")
        self.n += 64


def _contexts(prec: int) -> tuple[Context, Context]:
    return Context(prec=prec, rounding=ROUND_FLOOR), Context(prec=prec, rounding=ROUND_CEILING)


def _ln_bounds(x: int, dn: Context, up: Context) -> tuple[Decimal, Decimal]:
    """``lo ≤ ln(x) ≤ hi`` for an integer ``x ≥ 1`` (``Decimal.ln`` is correctly rounded)."""
    if x == 1:
        return Decimal(0), Decimal(0)
    r = dn.ln(Decimal(x))  # ln always rounds half-even, whatever the context's rounding
    return dn.next_minus(r), up.next_plus(r)


@functools.lru_cache(maxsize=64)
def _ln2_bounds(prec: int) -> tuple[Decimal, Decimal]:
    dn, up = _contexts(prec)
    ln2 = dn.ln(Decimal(2))
    return dn.next_minus(ln2), up.next_plus(ln2)


def less_exp(u: LazyUniform, p: int, q: int, src: ByteSource) -> bool:
    """Exactly whether ``W < exp(-p/q)`` for the lazy uniform ``u`` (refined in place)."""
    e = Fraction(int(p), int(q))
    if e < 0:
        raise SamplerArgumentError("less_exp(): the exponent must be non-negative")
    if u.n < 64:  # a short prefix the float test left undecided nearly always straddles exp(-E)
        u.extend(src)
    while True:
        v, n = u.value, u.n
        # digits enough to resolve the cell's width in -ln W (≈ 2^-bitlength(v)) at n·ln 2
        prec = 20 + (v.bit_length() * 3) // 10 + len(str(n + 1))
        dn, up = _contexts(prec)
        ln2_lo, ln2_hi = _ln2_bounds(prec)
        # W < H = (v+1)/2^n ≤ exp(-E)  ⇔  -ln H = n ln2 - ln(v+1) ≥ E
        a = dn.subtract(dn.multiply(Decimal(n), ln2_lo), _ln_bounds(v + 1, dn, up)[1])
        if Fraction(a) >= e:
            return True
        if v > 0:  # W ≥ L = v/2^n ≥ exp(-E)  ⇔  -ln L = n ln2 - ln v ≤ E
            b = up.subtract(up.multiply(Decimal(n), ln2_hi), _ln_bounds(v, dn, up)[0])
            if Fraction(b) <= e:
                return False
        u.extend(src)


def exact_geometric(u: LazyUniform, eps: Fraction, src: ByteSource) -> int:
    """Exactly ``M = max{m ≥ 0 : W < exp(-m·eps)}`` for the lazy uniform ``u``."""
    s, t = eps.numerator, eps.denominator

    def below(m: int) -> bool:  # W < exp(-m·eps); true at m = 0, false for large m (a.s.)
        return m == 0 or less_exp(u, m * s, t, src)

    while u.value == 0:  # a guess needs a positive lower end of the cell
        u.extend(src)
    guess = max(0, int((u.n * _LN2 - math.log(u.value)) / float(eps)))
    if below(guess):
        lo, step = guess, 1
        while below(lo + step):
            lo, step = lo + step, step * 2
        hi = lo + step
    else:
        hi, step = guess, 1
        while True:
            cand = max(0, hi - step)
            if below(cand):
                lo = cand
                break
            hi, step = cand, step * 2
    return last_true(below, lo, hi)


def last_true(pred: Callable[[int], bool], lo: int, hi: int) -> int:
    """The largest ``k`` in ``[lo, hi)`` with ``pred(k)``, by bisection, for a predicate true at
    ``lo``, false at ``hi`` and monotone in between."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pred(mid):
            lo = mid
        else:
            hi = mid
    return lo


# ---------------------------------------------------------------------------------------------
# Vectorized draws
# ---------------------------------------------------------------------------------------------


def bernoulli_exp_words(
    words: np.ndarray,
    bits: int,
    e_f: np.ndarray,
    exact: Callable[[int], tuple[int, int]],
    src: ByteSource,
    *,
    slack: float = SLACK,
) -> np.ndarray:
    """``W_i < exp(-E_i)`` for uniforms whose first ``bits`` bits are ``words`` (exact).

    Parameters
    ----------
    words : numpy.ndarray
        Unsigned integers below ``2^bits``: the leading bits of each ``W_i``.
    bits : int
        Prefix length (at most 63).
    e_f : numpy.ndarray
        Float64 values of the exponents with ``|e_f - E| ≤ 2⁻⁴⁹(1 + E)`` (module docstring).
    exact : callable
        ``exact(i) -> (p, q)``: the exact exponent ``E_i = p/q`` (integers), asked only for the
        undecided draws.
    src : RandomSource
        Supplies the further bits of undecided draws.
    slack : float, keyword-only
        Threshold slack ``s`` (default ``2⁻⁴⁴``; larger values force more exact continuations).

    Returns
    -------
    numpy.ndarray
        Boolean array: independent ``Bernoulli(exp(-E_i))`` draws when the words are uniform.
    """
    slack = _check_slack(slack)
    w = np.asarray(words).astype(np.uint64, copy=False)
    out = w < accept_threshold(e_f, bits, slack)
    undecided = np.flatnonzero(~out & (w < reject_threshold(e_f, bits, slack)))
    for i in undecided.tolist():
        p, q = exact(i)
        out[i] = less_exp(LazyUniform(int(w[i]), bits), p, q, src)
    return out


def geometric_words(
    words: np.ndarray,
    eps_f: np.ndarray | float,
    exact_eps: Callable[[int], Fraction],
    src: ByteSource,
    *,
    bits: int = 63,
    slack: float = SLACK,
) -> np.ndarray:
    """``M_i = max{m : W_i < exp(-m ε_i)}`` for uniforms with ``bits``-bit prefixes ``words``.

    ``eps_f`` holds float64 values of ``ε_i ≥ 2⁻²⁴`` (correctly rounded), ``exact_eps(i)`` the
    exact ``Fraction``; undecided draws continue with :func:`exact_geometric`. ``bits`` is at
    most 63 (48 leaves the cells far finer than the threshold margins). Returns ``int64``.
    """
    slack = _check_slack(slack)
    w = np.asarray(words).astype(np.uint64, copy=False)
    eps_f = np.asarray(eps_f, dtype=np.float64)
    if eps_f.size and not float(np.min(eps_f)) >= float(_SPLIT_EPS):
        raise SamplerArgumentError("geometric_words(): eps must be at least 2**-24")
    # a guess m̂ = ⌊-ln(W)/ε⌋ at the cell's midpoint (≤ 44.4·2²⁴ < 2⁵², exact in float64)
    guess = w.astype(np.float64)
    guess += 0.5
    np.log(guess, out=guess)
    np.subtract(bits * _LN2, guess, out=guess)
    guess /= eps_f
    np.floor(guess, out=guess)
    e1 = guess * eps_f  # W < exp(-m̂ε) on the whole cell ...
    e2 = e1 + eps_f  # ... and W ≥ exp(-(m̂+1)ε): then M = m̂
    ok = w < accept_threshold(e1, bits, slack)
    ok &= w >= reject_threshold(e2, bits, slack)
    out = guess.astype(np.int64)
    for i in np.flatnonzero(~ok).tolist():
        m = exact_geometric(LazyUniform(int(w[i]), bits), exact_eps(i), src)
        if m >= 1 << 63:
            raise OverflowError("a geometric draw does not fit in int64")
        out[i] = m
    return out


def geometric(
    src: ByteSource,
    eps: Sequence[Fraction],
    group: np.ndarray | int,
    *,
    signs: bool = False,
    slack: float = SLACK,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Independent ``M_i`` with ``P(M_i ≥ m) = exp(-m·eps[group[i]])`` (exact, ``int64``).

    Parameters
    ----------
    src : RandomSource
    eps : sequence of Fraction
        Positive rational parameters.
    group : numpy.ndarray or int
        Integer array (element ``i`` uses ``eps[group[i]]``), or a number of draws that all use
        ``eps[0]``.
    signs : bool, keyword-only
        Also return independent fair random signs (the spare bit of each draw's 64-bit word).
    slack : float, keyword-only
        As in :func:`bernoulli_exp_words`.

    Returns
    -------
    numpy.ndarray or (numpy.ndarray, numpy.ndarray)
        ``int64`` array, one draw per element of ``group`` (or ``group`` draws); with
        ``signs=True`` also a boolean array (``True``: negative).
    """
    if isinstance(group, (int, np.integer)):
        size, group = int(group), None
    else:
        group = np.asarray(group, dtype=np.int64)
        size = group.shape[0]
    if any(not _MIN_EPS <= e < _MAX_EPS for e in eps):
        raise SamplerArgumentError("geometric(): each eps must be in [2**-62, 2**60)")
    out = np.empty(size, dtype=np.int64)
    negative = np.empty(size, dtype=bool) if signs else None
    small = [g for g, e in enumerate(eps) if e < _SPLIT_EPS]
    if group is None:
        direct = None if not small else np.zeros(0, dtype=np.int64)
    else:
        direct = np.flatnonzero(~np.isin(group, small)) if small else None  # None: all
    n_direct = size if direct is None else direct.size
    if n_direct:
        if group is None:
            eps_f: np.ndarray | float = float(eps[0])
            exact_eps = lambda i: eps[0]
        else:
            gd = group if direct is None else group[direct]
            eps_f = np.array([float(e) for e in eps], dtype=np.float64)[gd]
            exact_eps = lambda i: eps[int(gd[i])]
        raw = src.words(n_direct, 64)
        m = geometric_words(raw >> np.uint64(1), eps_f, exact_eps, src, slack=slack)
        sel = slice(None) if direct is None else direct
        out[sel] = m
        if signs:
            negative[sel] = (raw & np.uint64(1)).astype(bool)
    for g in small:
        idx = np.arange(size) if group is None else np.flatnonzero(group == g)
        out[idx] = _split_geometric(src, eps[g], idx.size, slack)
        if signs:
            negative[idx] = src.random_bits(idx.size)
    return (out, negative) if signs else out


def _split_geometric(src: ByteSource, eps: Fraction, size: int, slack: float) -> np.ndarray:
    """``M = K·B + R`` for a small ``ε`` (module docstring); ``K = 2^j``, ``Kε ∈ (2⁻¹¹, 2⁻¹⁰]``."""
    s, t = eps.numerator, eps.denominator
    j = (t // (s << 10)).bit_length() - 1  # 2^j ≤ t/(2¹⁰ s) < 2^(j+1); j ≥ 14 as ε < 2⁻²⁴
    big_k = 1 << j
    b = geometric(src, [eps * big_k], size, slack=slack)
    r = np.empty(size, dtype=np.int64)
    pending = np.arange(size)
    eps_f = float(eps)
    acc_bits = 64 - j if j <= 40 else 32  # R and its acceptance share a word if j ≤ 40
    while pending.size:
        raw = src.words(pending.size, 64)
        cand = (raw & np.uint64(big_k - 1)).astype(np.int64)
        acc = raw >> np.uint64(j) if j <= 40 else src.words(pending.size, 32)
        keep = bernoulli_exp_words(
            acc, acc_bits, cand.astype(np.float64) * eps_f, lambda i, c=cand: (int(c[i]) * s, t), src,
            slack=slack,
        )  # fmt: skip
        r[pending[keep]] = cand[keep]
        pending = pending[~keep]
    if size and int(b.max()) >= ((1 << 63) - big_k) // big_k:
        raise OverflowError("a geometric draw does not fit in int64")
    return b * big_k + r
