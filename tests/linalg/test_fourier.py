"""Weighted Fourier factorization (WFF): closed form vs explicit DFT matrices, optimality on
circulant workloads (independent nuclear-norm bound), brute-force privacy cost and variances,
and the WFF column of the paper's tables 2, 4, 5 (closed form: printed digits)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import dpmatrix as dm
import oracle
from dpmatrix._linalg import fourier as ff
from dpmatrix._queries import QueryWorkload, circular_range_rows
from dpmatrix.planners._querysmasher.planner import plan_querysmasher


def dft_vectors(sizes):
    """Unitary multidimensional DFT vectors e_f (rows), f in C order."""
    out = []
    for f in itertools.product(*[range(n) for n in sizes]):
        v = np.ones(1, dtype=complex)
        for fj, n in zip(f, sizes):
            v = np.kron(v, np.exp(2j * np.pi * fj * np.arange(n) / n) / np.sqrt(n))
        out.append(v)
    return np.array(out)


def test_gamma_matches_explicit_dft():
    rng = np.random.default_rng(1)
    sizes = (3, 4)
    Q = rng.normal(size=(5, 12))
    G = Q.T @ Q
    E = dft_vectors(sizes)
    expected = np.real(np.einsum("fi,ij,fj->f", E.conj(), G, E)).reshape(sizes)
    np.testing.assert_allclose(ff.gamma_dense(G, sizes), expected, atol=1e-10)
    np.testing.assert_allclose(ff.gamma_rows(Q, sizes).sum(axis=0), expected, atol=1e-10)


def test_circulant_is_optimal_uniform_certificate():
    # Circular ranges on n = 7, centred: WFF loss equals the nuclear-norm lower bound at the
    # uniform distribution, computed here directly with an SVD.
    n = 7
    W = circular_range_rows(n)
    Wc = W - W.mean(axis=1, keepdims=True)
    gam = ff.gamma_1d(Wc.T @ Wc)
    _, loss = ff.wff_noise(gam)
    bound = np.linalg.svd(Wc * np.sqrt(1.0 / n), compute_uv=False).sum() ** 2
    assert loss == pytest.approx(bound, rel=1e-10)


def _explicit_fourier_strategy(mech):
    """Real B with BᵀB = Σ_f e_f e_fᴴ / h_f (the WFF mechanism's Fisher information)."""
    sizes = mech.sizes
    if not sizes:  # the total: B = [1] at privacy cost 1 for every planner
        return np.array([[1.0]])
    E = dft_vectors(sizes)
    h = mech.h.reshape(-1)
    fin = np.isfinite(h)
    M = (E[fin].T * (1.0 / h[fin])) @ E[fin].conj()
    assert np.abs(M.imag).max() < 1e-10
    lam, V = np.linalg.eigh(M.real)
    keep = lam > 1e-10 * lam.max()
    return (V[:, keep] * np.sqrt(lam[keep])).T


def test_wff_bruteforce_pcost_and_variances():
    sizes = [3, 4, 2]
    dom = dm.Domain.from_sizes(sizes)
    wk = (QueryWorkload(dom).add_kron((0, 1), ["prefix", "range"], weight=2.0)
          .add_explicit((1, 2), np.random.default_rng(3).integers(0, 2, size=(6, 8)))
          .add_kron((2,), ["identity"]))
    p = plan_querysmasher(wk, solver="fourier", pcost=1.5)
    blocks, sig = [], []
    for S, r in p.residuals.items():
        B = _explicit_fourier_strategy(p.solutions[r.structure])
        blocks.append(B @ oracle.marginal_query(sizes, S))
        sig += [r.sigma2] * B.shape[0]
    B = np.vstack(blocks)
    Sigma = np.diag(sig)
    assert oracle.pcost(B, Sigma) == pytest.approx(p.pcost, rel=1e-9)
    assert p.pcost == pytest.approx(1.5)
    for i, g in enumerate(wk.groups):
        Qf = g.dense() @ oracle.marginal_query(sizes, g.attrs)
        var = np.diag(oracle.gls_covariance(Qf, B, Sigma))
        np.testing.assert_allclose(p.group_variance(i).reshape(-1), var, rtol=1e-8)


def _hybrid(cat, num, k, upto=False):
    dom = dm.Domain.from_sizes(list(cat) + list(num))
    kinds = {f"a{i}": "prefix" for i in range(len(cat), len(cat) + len(num))}
    return QueryWorkload.kway(dom, k, kinds, upto=upto)


CPS = ([7, 4, 2], [50, 100])
ADULT = ([42, 16, 15, 9, 7, 6, 5, 2, 2], [100, 100, 100, 99, 85])
LOANS = ([51, 36, 15, 8, 6, 5, 4, 3], [101, 101, 101, 101])

TABLE2_WFF = [
    (CPS, 1, False, 3.589), (CPS, 2, False, 7.841), (CPS, 3, False, 10.267), (CPS, 3, True, 10.594),
    (ADULT, 1, False, 5.804), (ADULT, 2, False, 22.493), (ADULT, 3, False, 66.934), (ADULT, 3, True, 66.794),
    (LOANS, 1, False, 5.330), (LOANS, 2, False, 18.736), (LOANS, 3, False, 49.823), (LOANS, 3, True, 49.721),
]


@pytest.mark.parametrize("schema,k,upto,expected", TABLE2_WFF)
def test_table2_wff(schema, k, upto, expected):
    p = dm.plan(_hybrid(*schema, k, upto), pcost=1, planner="wff")
    assert round(p.rmse(), 3) == pytest.approx(expected, abs=1e-9)


def _table4(kind, n=10, d=40):
    dom = dm.Domain.from_sizes([n] * d)
    if kind in ("affine", "abs"):
        return QueryWorkload.kway(dom, 1, "prefix") + QueryWorkload.pairs(dom, kind)
    return QueryWorkload.kway(dom, 1, kind) + QueryWorkload.kway(dom, 2, kind)


@pytest.mark.parametrize("kind,expected", [("identity", 23.48), ("prefix", 39.70), ("range", 41.36),
                                           ("circular", 39.77), ("affine", 45.23), ("abs", 64.11)])
def test_table4_wff(kind, expected):
    p = plan_querysmasher(_table4(kind), solver="fourier")
    assert round(p.rmse(), 2) == pytest.approx(expected, abs=1e-9)


def _table5(n, d):
    dom = dm.Domain.from_sizes([n] * d)
    return QueryWorkload.kway(dom, 1, "range") + QueryWorkload.pairs(dom, "affine") + QueryWorkload.kway(dom, 3, "prefix")


@pytest.mark.parametrize("d,expected", [(10, 25.37), (20, 65.13), (30, 113.98)])
def test_table5_wff(d, expected):
    p = plan_querysmasher(_table5(10, d), solver="fourier")
    assert round(p.rmse(), 2) == pytest.approx(expected, abs=1e-9)
