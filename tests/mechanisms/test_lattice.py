"""The lattice sampler (mechanisms/lattice.py) against independent computations.

Expected values come from exact rational arithmetic written here (fractions of the float
entries), brute force over every dataset of a small box and its neighbours, and the exact
discrete Gaussian pmf; none of them calls the code under test.
"""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpmatrix._mechanisms.lattice import (
    LatticeQuery,
    choose_exponent,
    lattice_measure,
    lattice_rho,
    max_exponent,
    snap,
)
from dpmatrix._mechanisms.samplers import SeededRandom


# -- independent oracle: exact rationals -----------------------------------------------------------
def dense(factors):
    out = np.ones((1, 1))
    for f in factors:
        out = np.kron(out, f)
    return out


def exact_answers(factors, x):
    """C x with C = ⊗ factors, in Fractions (C's float entries taken at their exact values)."""
    rows = []
    shapes = [f.shape for f in factors]
    for r in itertools.product(*[range(s[0]) for s in shapes]):
        acc = Fraction(0)
        for c in itertools.product(*[range(s[1]) for s in shapes]):
            coef = Fraction(1)
            for f, ri, ci in zip(factors, r, c):
                coef *= Fraction(float(f[ri, ci]))
            acc += coef * int(x[c])
        rows.append(acc)
    return rows


def exact_round(q: Fraction) -> int:
    return math.floor(q + Fraction(1, 2))


def oracle_snap(factors, x, f):
    return np.array([exact_round(v * 2**f) for v in exact_answers(factors, x)], dtype=object)


def oracle_sensitivity2(factors):
    """max column squared norm of the dense Kronecker product, exactly."""
    cols = []
    shapes = [f.shape for f in factors]
    for c in itertools.product(*[range(s[1]) for s in shapes]):
        tot = Fraction(0)
        for r in itertools.product(*[range(s[0]) for s in shapes]):
            coef = Fraction(1)
            for fm, ri, ci in zip(factors, r, c):
                coef *= Fraction(float(fm[ri, ci]))
            tot += coef * coef
        cols.append(tot)
    return max(cols)


def oracle_support(factors):
    C = dense(factors)
    return int(np.max(np.count_nonzero(C, axis=0)))


# -- sensitivity of the snapped query, by brute force ---------------------------------------------
CASES = [
    # one real factor with a structural zero (m = 2 < 3 outputs)
    [np.array([[0.3, 0.7, 0.0], [0.1, -0.45, 0.9], [0.0, 0.0, 0.61]])],
    # a Kronecker product: real strategy factor ⊗ ResidualPlanner's integer centring factor
    [np.array([[0.55, -0.2], [0.35, 0.8]]), np.array([[1.0, -1.0], [-1.0, 1.0]])],
]


@pytest.mark.parametrize("factors", CASES)
@pytest.mark.parametrize("f", [1, 2, 3])
def test_snapped_sensitivity_by_brute_force(factors, f):
    """max ‖k(x) − k(x')‖₂ over all x in a box and neighbours x ± e_c stays within
    (Δ₂ + γ√m)/γ, and the naive Δ₂/γ is exceeded: the rounding term is needed."""
    q = LatticeQuery.of(factors)
    shape = q.shape
    d2 = oracle_sensitivity2(factors)
    m = oracle_support(factors)
    assert q.sensitivity_squared == d2 and q.max_support == m
    worst = Fraction(0)
    cache = {}

    def k(x):
        key = tuple(x.ravel())
        if key not in cache:
            got = snap(q, x, f)
            want = oracle_snap(factors, x, f)
            assert [int(v) for v in got.ravel()] == [int(v) for v in want]
            cache[key] = want
        return cache[key]

    for flat in itertools.product(range(3), repeat=int(np.prod(shape))):
        x = np.array(flat, dtype=np.int64).reshape(shape)
        for c in range(x.size):
            x2 = x.copy().ravel()
            x2[c] += 1  # add one record in cell c (removal is the same pair read backwards)
            diff = k(x) - k(x2.reshape(shape))
            worst = max(worst, Fraction(sum(int(v) * int(v) for v in diff)))
    # (Δ₂/γ + √m)² ≥ worst, checked exactly: worst ≤ Δ₂²/γ² + 2√(Δ₂²m)/γ + m
    g2 = Fraction(1, 4**f)
    lhs = worst - d2 / g2 - m
    assert lhs <= 0 or lhs * lhs <= 4 * d2 * m / g2
    assert worst > d2 / g2  # rounding can move the answer further than Δ₂: accounting for it matters
    # the accounted ρ covers the brute-force sensitivity: ρ ≥ (γ·worst^½)²/(2σ²)
    sigma = Fraction(3, 2)
    assert lattice_rho(q, sigma, f) >= worst * g2 / (2 * sigma * sigma)


def test_integer_query_needs_no_lattice():
    q = LatticeQuery.of([np.array([[2.0, -1.0], [-1.0, 2.0]])])
    assert q.is_integer and choose_exponent(q) == 0
    # Δ₂² = 5, ρ = 5/(2σ²) exactly, no rounding term
    assert lattice_rho(q, Fraction(2), 0) == Fraction(5, 8)
    assert snap(q, np.array([3, 4]), 0).tolist() == [2, 5]


def test_choose_exponent_by_hand():
    # Δ₂² = max(0.25, 0.0625 + 1) = 1.0625, m = 2: need 2/4^f ≤ tol²·1.0625
    q = LatticeQuery.of([np.array([[0.5, 0.25], [0.0, 1.0]])])
    assert choose_exponent(q, tol=0.1) == 4  # 2/256 = 0.0078 ≤ 0.010625 < 2/64
    assert choose_exponent(q, tol=1e-6) == 21  # 2/4^21 = 4.5e-13 ≤ 1.0625e-12 < 2/4^20
    # ρ ≤ (1 + tol)² · Δ₂²/(2σ²)
    f = choose_exponent(q, tol=1e-6)
    rho = lattice_rho(q, Fraction(1), f)
    assert Fraction(17, 32) < rho <= Fraction(17, 32) * Fraction(1000001, 1000000) ** 2


def test_max_exponent_keeps_sampler_range():
    assert Fraction(5) * 2 ** max_exponent(Fraction(5)) < 2**39 <= Fraction(5) * 2 ** (max_exponent(Fraction(5)) + 1)


@pytest.mark.parametrize("seed", range(6))
def test_snap_exact_for_large_counts_and_near_ties(seed):
    """Random real factors, counts up to 1e15 (float error ≫ γ: the exact fallback decides)."""
    rng = np.random.default_rng(seed)
    factors = [rng.standard_normal((int(rng.integers(1, 4)), int(rng.integers(1, 4)))) for _ in range(2)]
    q = LatticeQuery.of(factors)
    x = rng.integers(0, 10 ** int(rng.integers(2, 16)), q.shape)
    for f in (0, 7, 30):
        assert [int(v) for v in snap(q, x, f).ravel()] == [int(v) for v in oracle_snap(factors, x, f)]
    # an exact tie (0.5·3 = 1.5 → 2 with ties upward, and −1.5 → −1)
    q = LatticeQuery.of([np.array([[0.5], [-0.5]])])
    assert snap(q, np.array([3]), 0).tolist() == [2, -1]


# -- the noise --------------------------------------------------------------------------------------
def test_noise_matches_exact_discrete_gaussian_pmf():
    """(γ(k + z) − γk)/γ must be N_Z(0, σ̄²/γ²): chi-square against the exact pmf."""
    n = 20000
    # n outputs 0.75·x with x = 0: Δ₂² = 0.5625 n, m = n; tol = 0.5 needs n/4^f ≤ 0.140625 n → f = 2
    q = LatticeQuery.of([np.full((n, 1), 0.75)])
    sigma = Fraction(3, 2)
    out = lattice_measure(q, np.zeros(1, dtype=np.int64), sigma, SeededRandom(11), tol=0.5)
    assert out.f == 2 and out.tau2 == 36
    scaled = out.values * 4
    ints = np.rint(scaled).astype(int)
    assert np.array_equal(ints, scaled)  # the values lie on the lattice γℤ
    support = np.arange(-40, 41)
    pmf = np.exp(-(support**2) / (2 * 36.0))
    pmf /= pmf.sum()
    counts = np.array([(ints == s).sum() for s in support])
    assert counts.sum() == n  # nothing beyond ±40 = ±6.7τ
    keep = pmf * n >= 5
    exp = np.append(pmf[keep] * n, n - (pmf[keep] * n).sum())
    obs = np.append(counts[keep], n - counts[keep].sum())
    assert stats.chisquare(obs, exp).pvalue > 1e-3


def test_noise_variance_by_simulation():
    """Var of the released value is σ̄² (the discrete Gaussian's variance is within
    e^{-2π²τ²}-ish of τ² for τ ≥ 1), and its mean is the snapped exact answer."""
    n = 40000
    C = np.full((n, 1), 0.3)
    q = LatticeQuery.of([C])
    sigma = Fraction(5, 2)
    out = lattice_measure(q, np.array([7]), sigma, SeededRandom(3))
    exact = Fraction(0.3) * 7
    err = out.values - float(exact)
    var = float(err.var())
    assert abs(var / float(sigma**2) - 1) < 5 * math.sqrt(2 / n)
    assert abs(err.mean()) < 5 * float(sigma) / math.sqrt(n)


def test_default_source_is_the_os_csprng(monkeypatch):
    import dpmatrix._mechanisms.samplers as smp

    calls = []
    real = smp.os.urandom
    monkeypatch.setattr(smp.os, "urandom", lambda k: calls.append(k) or real(k))
    q = LatticeQuery.of([np.array([[0.3, 0.2]])])
    lattice_measure(q, np.array([1, 2]), Fraction(1))
    assert calls
