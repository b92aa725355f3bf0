"""Tests of the float-guided exact comparisons ``W < exp(-E)`` (``mechanisms/exact_exp.py``).

The oracle never uses the code under test, numpy's ``exp`` or :mod:`decimal`: ``exp(-E)`` for a
rational ``E = k + f`` (``k`` an integer, ``0 ≤ f < 1``) is bracketed by consecutive partial sums
of the alternating series ``Σ (-x)^j / j!`` (``x ≤ 1``: decreasing terms, so the value lies
between any two consecutive partial sums) for ``e^{-1}`` and ``e^{-f}``, in exact fractions,
rounded outwards to 256-bit dyadics before the power ``k``. Far from the boundary (``E`` up to
10⁶) the cruder ``0.69 < ln 2 < 0.7`` suffices.

The exact continuation is forced by handing the samplers the one cell of random words that
straddles ``exp(-E)`` (no float margin can decide it), and its further random bytes are recorded
so the decision can be checked against the whole revealed ``W``.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpmatrix._mechanisms.exact_exp import (
    MAX_SLACK,
    SLACK,
    accept_threshold,
    bernoulli_exp_words,
    geometric,
    geometric_words,
    reject_threshold,
)
from dpmatrix._mechanisms.laplace import (
    sample_discrete_laplace_eps,
    sample_discrete_laplace_many,
)
from dpmatrix._mechanisms.samplers import (
    RandomSource,
    SeededRandom,
    sample_discrete_gaussian,
)
from dpmatrix.errors import SamplerArgumentError

P_MIN = 1e-4

# ---------------------------------------------------------------------------------------------
# Oracle and scripted sources
# ---------------------------------------------------------------------------------------------


def _series_bounds(x: Fraction, terms: int = 60) -> tuple[Fraction, Fraction]:
    s, term, partial = Fraction(0), Fraction(1), []
    for j in range(terms):
        s += term
        partial.append(s)
        term = term * (-x) / (j + 1)
    a, b = partial[-2], partial[-1]
    return min(a, b), max(a, b)


def exp_neg_bounds(e: Fraction) -> tuple[Fraction, Fraction]:
    """``lo ≤ exp(-e) ≤ hi`` in exact fractions (relative width ~1e-70 for e ≤ 1000)."""
    k = math.floor(e)
    lo_f, hi_f = _series_bounds(e - k)
    lo_1, hi_1 = _series_bounds(Fraction(1))
    d = 1 << 256
    lo_1 = Fraction(math.floor(lo_1 * d), d)
    hi_1 = Fraction(math.ceil(hi_1 * d), d)
    return lo_1**k * lo_f, hi_1**k * hi_f


class Recorder(RandomSource):
    """Seeded bytes, optionally after ``zeros`` all-zero requests; every request recorded."""

    def __init__(self, seed: int, zeros: int = 0) -> None:
        self.inner = SeededRandom(seed)
        self.zeros = zeros
        self.log: list[bytes] = []

    def random_bytes(self, n: int) -> bytes:
        b = bytes(n) if len(self.log) < self.zeros else self.inner.random_bytes(n)
        self.log.append(b)
        return b


def revealed(w: int, bits: int, log: list[bytes]) -> tuple[Fraction, Fraction]:
    """The cell ``[lo, hi)`` of ``W`` after the recorded extensions of its prefix ``w``."""
    v, n = w, bits
    for b in log:
        assert len(b) == 8
        v, n = (v << 64) | int.from_bytes(b, "big"), n + 64
    return Fraction(v, 1 << n), Fraction(v + 1, 1 << n)


def decision_is_right(accept: bool, cell: tuple[Fraction, Fraction], e: Fraction) -> bool:
    lo_w, hi_w = cell
    if e > 1000:  # far from any boundary a revealed W reaches: 0.69 < ln 2 < 0.7
        if accept:
            return hi_w <= Fraction(1, 2 ** math.ceil(e / Fraction(69, 100)))
        return lo_w > 0 and lo_w >= Fraction(1, 2 ** math.floor(e / Fraction(7, 10)))
    lo_e, hi_e = exp_neg_bounds(e)
    return hi_w <= lo_e if accept else lo_w >= hi_e


# ---------------------------------------------------------------------------------------------
# The assumptions of the float path
# ---------------------------------------------------------------------------------------------


def test_numpy_exp_is_accurate_enough() -> None:
    """The margins assume numpy's exp errs by at most 2⁻⁴⁸ relative on [-700, 0]; check it here
    (several array lengths so both the SIMD body and the scalar tail are exercised)."""
    rng = np.random.default_rng(0)
    xs = [-rng.uniform(0, 700, 4099), -rng.uniform(0, 1, 1027), -np.exp(rng.uniform(-30, 0, 515)),
          np.array([0.0, -1e-300, -1.0, -700.0, -np.nextafter(700.0, 0)])]  # fmt: skip
    worst = 0.0
    with localcontext() as ctx:
        ctx.prec = 40
        for x in xs:
            got = np.exp(x)
            for xi, gi in zip(x.tolist(), got.tolist()):
                true = Decimal(xi).exp()
                worst = max(worst, float(abs(Decimal(gi) - true) / true))
    assert worst <= 2.0**-48, worst


@pytest.mark.parametrize("bits", [15, 32, 48, 63])
def test_thresholds_bracket_exp(bits: int) -> None:
    """w < A proves W < e^{-E}; w ≥ B proves W ≥ e^{-E} — even when the float exponent carries
    the largest error the callers are allowed (2⁻⁴⁹(1 + E)), in either direction."""
    rng = np.random.default_rng(bits)
    cases = [Fraction(0), Fraction(1, 10**9), Fraction(1), Fraction(699), Fraction(700),
             Fraction(7001, 10), Fraction(750), Fraction(1000)]  # fmt: skip
    cases += [Fraction(int(p), int(q)) for p, q in zip(rng.integers(0, 10**6, 40), rng.integers(1, 10**4, 40))]
    for e in cases:
        lo_e, hi_e = exp_neg_bounds(e) if e <= 1000 else (Fraction(0), Fraction(1, 10**300))
        err = Fraction(1 + e) / 2**49
        for e_f in (float(e), float(max(e - err, Fraction(0))), float(e + err)):
            a = int(accept_threshold(np.array([e_f]), bits)[0])
            b = int(reject_threshold(np.array([e_f]), bits)[0])
            assert Fraction(a, 1 << bits) <= lo_e  # every cell w < a lies below e^{-E}
            assert Fraction(b, 1 << bits) >= hi_e  # every cell w ≥ b lies above
            if e <= 30:  # the undecided zone is narrow (the fast path decides almost all)
                assert b - a <= 2 + (1 << bits) * 2.0**-37


def test_thresholds_nan_and_huge() -> None:
    e = np.array([np.nan, np.inf, 1e300])
    assert accept_threshold(e, 32).tolist() == [0, 0, 0]  # never accept
    assert reject_threshold(e, 32).tolist() == [1 << 32, 1, 1]  # NaN: never reject


# ---------------------------------------------------------------------------------------------
# The exact continuation, forced
# ---------------------------------------------------------------------------------------------

EXPONENTS = [Fraction(1, 3), Fraction(1), Fraction(5, 2), Fraction(186, 5), Fraction(1401, 2),
             Fraction(7453, 10), Fraction(800), Fraction(10**4 + 1, 3), Fraction(10**6 + 1, 7)]  # fmt: skip


def straddling_cell(e: Fraction, bits: int) -> int:
    """The prefix ``w`` whose cell contains ``exp(-e)`` (0 when it is below ``2^-bits``)."""
    if e > 1000:
        return 0
    lo_e, hi_e = exp_neg_bounds(e)
    w = math.floor(lo_e * (1 << bits))
    assert w == math.floor(hi_e * (1 << bits)), "oracle too coarse"
    return w


@pytest.mark.parametrize("bits", [15, 32, 63])
@pytest.mark.parametrize("e", EXPONENTS, ids=str)
def test_undecided_bernoulli_continues_the_same_uniform(e: Fraction, bits: int) -> None:
    w = straddling_cell(e, bits)
    seen = set()
    for seed in range(40):
        src = Recorder(seed)
        out = bernoulli_exp_words(np.array([w], dtype=np.uint64), bits, np.array([float(e)]),
                                  lambda i: (e.numerator, e.denominator), src)  # fmt: skip
        assert src.log, "the straddling cell must go to the exact continuation"
        accept = bool(out[0])
        assert decision_is_right(accept, revealed(w, bits, src.log), e)
        seen.add(accept)
    if e <= 1000 and Fraction(1, 5) < (exp_neg_bounds(e)[0] * (1 << bits)) % 1 < Fraction(4, 5):
        assert seen == {True, False}  # both outcomes occur inside the cell (P(not) < 3e-4)


@pytest.mark.parametrize("e", [Fraction(745), Fraction(800), Fraction(1500)], ids=str)
def test_underflow_region_accepts_tiny_uniforms(e: Fraction) -> None:
    """exp(-E) < 2⁻¹⁰⁷⁴ is 0 in float64, yet W < exp(-E) has positive probability: a uniform
    whose first bits are all zero must be accepted, one with a 1 just above exp(-E) rejected."""
    need = math.ceil(e / Fraction(69, 100)) + 1  # zero bits that put W below exp(-E)
    zeros = -(-(need - 32) // 64)  # all-zero 64-bit extensions after a zero 32-bit prefix
    for seed in range(3):
        src = Recorder(seed, zeros=zeros)
        out = bernoulli_exp_words(np.zeros(1, dtype=np.uint64), 32, np.array([float(e)]),
                                  lambda i: (e.numerator, e.denominator), src)  # fmt: skip
        assert bool(out[0]) and decision_is_right(True, revealed(0, 32, src.log), e)
    few = max(0, math.floor((e / Fraction(7, 10) - 32) / 64) - 1)  # W still far above exp(-E)
    src = Recorder(7, zeros=few)
    out = bernoulli_exp_words(np.zeros(1, dtype=np.uint64), 32, np.array([float(e)]),
                              lambda i: (e.numerator, e.denominator), src)  # fmt: skip
    assert not bool(out[0]) and decision_is_right(False, revealed(0, 32, src.log), e)


@pytest.mark.parametrize(("eps", "m"), [(Fraction(1, 3), 4), (Fraction(1, 31623), 20_000),
                                        (Fraction(2), 1), (Fraction(1, 10**7), 3 * 10**7)])  # fmt: skip
def test_undecided_geometric_continues_the_same_uniform(eps: Fraction, m: int) -> None:
    """A 63-bit prefix straddling the boundary exp(-mε) between M = m-1 and M = m."""
    w = straddling_cell(m * eps, 63)
    for seed in range(6):
        src = Recorder(seed)
        got = int(geometric_words(np.array([w], dtype=np.uint64), float(eps), lambda i: eps, src)[0])
        assert src.log, "the straddling cell must go to the exact continuation"
        cell = revealed(w, 63, src.log)
        assert got in (m - 1, m)
        assert decision_is_right(True, cell, got * eps)  # W < exp(-Mε)
        assert decision_is_right(False, cell, (got + 1) * eps)  # W ≥ exp(-(M+1)ε)


def test_undecided_draws_are_not_redrawn() -> None:
    """Uniforms confined to the undecided cells [A, B) (wide with the largest slack) must be
    accepted with the conditional probability (e^{-E}·2^k − A)/(B − A), not e^{-E}: a fresh
    redraw would give the latter."""
    e = Fraction(1, 3)
    a = int(accept_threshold(np.array([float(e)]), 32, MAX_SLACK)[0])
    b = int(reject_threshold(np.array([float(e)]), 32, MAX_SLACK)[0])
    lo_e, _ = exp_neg_bounds(e)
    p_cond = float((lo_e * (1 << 32) - a) / (b - a))
    n = 20_000
    src = SeededRandom(3)
    words = (a + src.integers(b - a, n)).astype(np.uint64)
    out = bernoulli_exp_words(words, 32, np.full(n, float(e)), lambda i: (1, 3), src, slack=MAX_SLACK)
    k = int(out.sum())
    assert stats.binomtest(k, n, p_cond).pvalue > P_MIN
    assert abs(p_cond - math.exp(-1 / 3)) > 0.05  # the test can tell the two apart


def test_slack_knob_keeps_the_distribution() -> None:
    """With the largest slack a few percent of geometric draws take the exact continuation;
    the two-sided law of ±M (the discrete Laplace with t = 3) is unchanged."""
    src = SeededRandom(8)
    n = 60_000
    m, neg = geometric(src, [Fraction(1, 3)], n, signs=True, slack=MAX_SLACK)
    x = np.where(neg, -m, m)[~(neg & (m == 0))]
    q = math.exp(-1 / 3)
    top = 25
    counts = np.bincount(np.clip(x + top, 0, 2 * top), minlength=2 * top + 1)
    ks = np.arange(-top, top + 1)
    p = (1 - q) / (1 + q) * q ** np.abs(ks)
    p[0] = q**top / (1 + q)
    p[-1] = q**top / (1 + q)
    assert stats.chisquare(counts, p / p.sum() * counts.sum()).pvalue > P_MIN


def test_bad_arguments() -> None:
    src = SeededRandom(0)
    with pytest.raises(SamplerArgumentError):
        bernoulli_exp_words(np.zeros(1, np.uint64), 32, np.zeros(1), lambda i: (0, 1), src, slack=SLACK / 2)
    with pytest.raises(SamplerArgumentError):
        geometric_words(np.zeros(1, np.uint64), 2.0**-30, lambda i: Fraction(1, 2**30), src)
    with pytest.raises(SamplerArgumentError):
        geometric(src, [Fraction(1, 2**70)], 3)
    with pytest.raises(SamplerArgumentError):
        src.bernoulli_exp(np.array([-1]), 2)


# ---------------------------------------------------------------------------------------------
# Large scales (the float path's usual regime, and the split M = K·B + R below ε = 2⁻²⁴)
# ---------------------------------------------------------------------------------------------


def laplace_bins_pvalue(x: np.ndarray, eps: float, edges: np.ndarray) -> float:
    """Chi-square of |x| (and the sign) on magnitude bins ``[edges[j], edges[j+1])`` against the
    closed form ``P(x = 0) = (1-q)/(1+q)``, ``P(|x| ≥ k) = 2q^k/(1+q)`` (k ≥ 1), q = e^{-ε}."""
    q = math.exp(-eps)

    def tail(k):  # P(|x| ≥ k)
        return np.where(k <= 0, 1.0, 2 * np.exp(-eps * k) / (1 + q))

    e = np.asarray(edges, dtype=np.float64)
    if (1 - q) / (1 + q) * x.size < 5:  # P(x = 0) too small for a cell of its own
        e = np.delete(e, 1)
    p = tail(e[:-1]) - tail(e[1:])
    mag = np.abs(x)
    counts = np.histogram(mag, bins=e)[0]
    pos = np.histogram(mag[x > 0], bins=e)[0]  # the zero counts in neither
    neg = np.histogram(mag[x < 0], bins=e)[0]
    p1 = stats.chisquare(counts, p / p.sum() * counts.sum()).pvalue
    keep = (pos + neg) > 0
    p2 = stats.chi2_contingency(np.vstack([pos[keep], neg[keep]])).pvalue
    return min(p1, p2)


@pytest.mark.parametrize("t", [10**7, 2**24 - 1, 2**24 + 1, 10**9, 2**55])
def test_laplace_large_scales(t: int) -> None:
    x = sample_discrete_laplace_eps(Fraction(1, t), 100_000, np.random.default_rng(t % 1000))
    qs = np.r_[0, 1, np.round(-t * np.log(np.linspace(1, 0.002, 30)[1:])), 2.0**62]
    assert laplace_bins_pvalue(x, 1 / t, np.unique(qs)) > P_MIN


def test_laplace_many_mixes_direct_and_split_groups() -> None:
    budgets = [Fraction(1, 2), Fraction(1, 2**30), Fraction(3, 7)]
    ys = sample_discrete_laplace_many(budgets, [40_000, 40_000, 40_000], np.random.default_rng(4))
    for b, y in zip(budgets, ys):
        t = 1 / float(b)
        edges = np.r_[0, 1, np.ceil(-t * np.log(np.linspace(1, 0.002, 20)[1:])), 2.0**62]
        assert laplace_bins_pvalue(y, float(b), np.unique(edges)) > P_MIN


@pytest.mark.parametrize("sigma2", [Fraction(10**9), Fraction(2**50 + 1, 3)], ids=str)
def test_gaussian_large_scales(sigma2: Fraction) -> None:
    """Chi-square on 40 equal-probability bins of the N_Z(0, σ²) CDF: for σ² ≥ 10⁹,
    ``P(X ≤ k) = Φ((k + 1/2)/σ)`` up to ``O(1/σ²) ≈ 1e-9`` (midpoint rule), far below what 10⁵
    draws resolve."""
    x = sample_discrete_gaussian(sigma2, 100_000, rng=np.random.default_rng(5))
    s = math.sqrt(float(sigma2))
    edges = np.round(stats.norm.ppf(np.linspace(0, 1, 41)[1:-1]) * s) + 0.5
    counts = np.bincount(np.searchsorted(edges, x), minlength=40)
    cdf = stats.norm.cdf(np.r_[-np.inf, edges, np.inf] / s)
    p = np.diff(cdf)
    assert stats.chisquare(counts, p / p.sum() * counts.sum()).pvalue > P_MIN


def test_the_samplers_check_numpy_exp_on_the_machine_that_draws(monkeypatch) -> None:
    """An exp less accurate than the proof assumes stops the float path with a typed error before
    any threshold (hence any noise) is computed; an accurate one passes."""
    from dpmatrix._mechanisms import exact_exp as X
    from dpmatrix.errors import SamplerEnvironmentError

    X.exp_self_check.cache_clear()
    assert X.exp_self_check() <= X.EXP_REL_ERROR
    real_exp = np.exp

    def sloppy_exp(x, *args, **kwargs):  # a library erring by 2⁻⁴⁰, relative
        return real_exp(x, *args, **kwargs) * (1 + 2.0**-40)

    monkeypatch.setattr(X.np, "exp", sloppy_exp)
    X.exp_self_check.cache_clear()
    try:
        with pytest.raises(SamplerEnvironmentError, match="exact noise samplers' proof"):
            X.accept_threshold(np.array([1.0]), 32)
        with pytest.raises(SamplerEnvironmentError):
            X.reject_threshold(np.array([1.0]), 32)
    finally:
        monkeypatch.undo()
        X.exp_self_check.cache_clear()
    assert X.exp_self_check() <= X.EXP_REL_ERROR
