"""Exact discrete Laplace with a rational parameter: pmf (chi-square), variance, bad input."""

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpmatrix._mechanisms.laplace import (
    discrete_laplace_variance,
    round_budgets,
    sample_discrete_laplace_eps,
    sample_discrete_laplace_many,
)
from dpmatrix.errors import BudgetError, SamplerArgumentError


def pmf(eps, y):
    # P(y) = (1 - q)/(1 + q) q^|y|, q = e^{-eps}: written out here, not taken from the library
    q = np.exp(-eps)
    return (1 - q) / (1 + q) * q ** np.abs(y)


@pytest.mark.parametrize("eps", [Fraction(1, 2), Fraction(3, 1), Fraction(927975, 2**21), Fraction(1, 20)])
def test_chi_square_against_exact_pmf(eps):
    n = 200_000
    y = sample_discrete_laplace_eps(eps, n, np.random.default_rng(12345))
    e = float(eps)
    k = int(np.ceil(4 / e))  # bins -k..k, tails merged
    edges = np.arange(-k, k + 1)
    obs = np.array([(y < -k).sum()] + [(y == v).sum() for v in edges] + [(y > k).sum()])
    p_mid = pmf(e, edges)
    tail = (1 - p_mid.sum()) / 2
    exp = n * np.concatenate([[tail], p_mid, [tail]])
    keep = exp >= 5
    obs2 = np.concatenate([obs[keep], [obs[~keep].sum()]]) if (~keep).any() else obs
    exp2 = np.concatenate([exp[keep], [exp[~keep].sum()]]) if (~keep).any() else exp
    assert stats.chisquare(obs2, exp2).pvalue > 1e-4
    v = discrete_laplace_variance(e)
    q = np.exp(-e)
    assert v == pytest.approx(2 * q / (1 - q) ** 2, rel=1e-12)
    assert y.var() == pytest.approx(v, rel=0.03)
    assert y.dtype == np.int64


def test_secure_default_source():
    y = sample_discrete_laplace_eps(Fraction(1), 1000)
    assert y.shape == (1000,) and abs(y.mean()) < 0.5


def test_round_budgets_exact_privacy():
    b = round_budgets([0.1, 0.2, 0.7], [1, 1, 1], 1.0)
    assert sum(b) <= Fraction(1.0) and all(isinstance(x, Fraction) for x in b)
    assert float(sum(b)) == pytest.approx(1.0, rel=1e-5)
    b = round_budgets([1 / 3] * 3, [2, 1, 3], 2.0)
    assert 2 * b[0] + b[1] + 3 * b[2] <= Fraction(2.0)
    with pytest.raises(BudgetError, match="spend"):
        round_budgets([0.6, 0.6], [1, 1], 1.0)


@pytest.mark.parametrize("bad", [0.5, 0, -1, Fraction(-1, 2), True, "1"])
def test_bad_epsilon(bad):
    with pytest.raises(BudgetError):
        sample_discrete_laplace_eps(bad, 3)


def test_bad_size_and_rng():
    with pytest.raises(SamplerArgumentError):
        sample_discrete_laplace_eps(Fraction(1), -1)
    with pytest.raises(SamplerArgumentError):
        sample_discrete_laplace_eps(Fraction(1), 3, rng=42)


def _chi2_p(y, e):
    k = int(np.ceil(4 / e))
    edges = np.arange(-k, k + 1)
    obs = np.array([(y < -k).sum()] + [(y == v).sum() for v in edges] + [(y > k).sum()])
    p_mid = pmf(e, edges)
    tail = (1 - p_mid.sum()) / 2
    exp = y.size * np.concatenate([[tail], p_mid, [tail]])
    keep = exp >= 5
    if keep.all():
        return stats.chisquare(obs, exp).pvalue
    return stats.chisquare(np.append(obs[keep], obs[~keep].sum()), np.append(exp[keep], exp[~keep].sum())).pvalue


def test_batched_sampler_per_group_pmf():
    budgets = [Fraction(1, 2), Fraction(927975, 2**21), Fraction(3), Fraction(1, 7)]
    sizes = [100_000, 80_000, 50_000, 60_000]
    ys = sample_discrete_laplace_many(budgets, sizes, np.random.default_rng(99))
    assert [y.size for y in ys] == sizes
    for y, b in zip(ys, budgets):
        assert _chi2_p(y, float(b)) > 1e-4
        assert y.var() == pytest.approx(discrete_laplace_variance(float(b)), rel=0.04)
    with pytest.raises(BudgetError):
        sample_discrete_laplace_many([0.5], [3])
