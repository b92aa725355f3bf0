"""Lemma 4.2 / Table 1 (Cormode et al.): Fourier strategy with non-uniform noise on all k-way
marginals of d binary attributes.

Independent derivation (no library code): coefficient β with |β| = j is needed by the
C(d-j, k-j) k-way marginals above it, each cell of such a marginal is 2^{-k} Σ_β ±f_β, so the
direct-recovery weight of β is s_j = C(d-j, k-j)·2^{-k} (per unit of noise variance, summed over the
marginal's 2^k cells: 2^k · 2^{-2k}). Every ±1 row has column L1 norm 1, so the cube-root rule
gives total variance 2(Σ_j C(d,j) s_j^{1/3})³/ε², and equal budgets give 2F²Σ_j C(d,j)s_j/ε² with
F = Σ_j C(d,j) coefficients. Per marginal, E‖error‖₁ ≤ √(2^k · Var(marginal)) (Cauchy–Schwarz);
Lemma 4.2(1) says this is O(k √(C(d,k) C(d+k,k)) / ε): the ratio must stay bounded as d grows.
"""

from math import comb, sqrt

import pytest

from dpmatrix._domain import Domain
from dpmatrix._workload import Workload
from dpmatrix.planners._pure import plan_pure


def closed_forms(d, k):
    s = [comb(d - j, k - j) / 2**k for j in range(k + 1)]
    nonuni = 2 * sum(comb(d, j) * s[j] ** (1 / 3) for j in range(k + 1)) ** 3
    f = sum(comb(d, j) for j in range(k + 1))
    uni = 2 * f**2 * sum(comb(d, j) * s[j] for j in range(k + 1))
    return nonuni, uni


@pytest.mark.parametrize("k,d", [(1, 5), (2, 7), (3, 8), (1, 20), (2, 20), (3, 20)])
def test_library_matches_closed_form(k, d):
    wl = Workload.marginals(Domain.from_sizes([2] * d), k)
    nonuni, uni = closed_forms(d, k)
    p = plan_pure(wl, 1.0, strategy="fourier", variance_model="continuous")
    assert p.total_variance() == pytest.approx(nonuni, rel=1e-5)
    p = plan_pure(wl, 1.0, strategy="fourier", budgeting="uniform", variance_model="continuous")
    assert p.total_variance() == pytest.approx(uni, rel=1e-5)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_lemma_4_2_scaling(k):
    ratios, gains = [], []
    for d in range(2 * k + 1, 21):
        nonuni, uni = closed_forms(d, k)
        per_marginal = nonuni / comb(d, k)
        l1_bound = sqrt(2**k * per_marginal)
        ratios.append(l1_bound / (k * sqrt(comb(d, k) * comb(d + k, k))))
        gains.append(uni / nonuni)
    # bounded (the O(·) constant) and not growing with d
    assert max(ratios) < 2.5  # 2.207 at d = 3, k = 1; decreasing after
    assert all(b <= a + 1e-12 for a, b in zip(ratios, ratios[1:]))
    # non-uniform budgeting always helps, and more so as d grows (Table 1's asymptotic gain)
    assert min(gains) > 1
    assert all(b >= a for a, b in zip(gains, gains[1:]))
