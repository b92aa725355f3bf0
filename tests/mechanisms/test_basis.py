"""Algorithm 4 and Theorems 7.1/7.2 checked against explicit (brute-force) matrices."""

import itertools
from functools import reduce

import numpy as np
import pytest

from dpmatrix._linalg.attribute_queries import all_ranges, identity, prefix
from dpmatrix._mechanisms.basis import (
    attribute_basis,
    psd_cholesky,
    subtraction_and_gamma,
    subtraction_matrix,
)
from dpmatrix.errors import WorkloadError


def kron(mats):
    return reduce(np.kron, mats, np.ones((1, 1)))


def proj(M):
    """Orthogonal projector onto the row space of M."""
    return np.linalg.pinv(M) @ M


def some_strategy(n, rng):
    """A random non-negative strategy that spans everything (for Algorithm 4 tests)."""
    return np.vstack([np.eye(n), rng.random((2, n))])


# ---------------------------------------------------------------- Algorithm 4


def test_identity_case_is_residual_planner():
    for n in (2, 3, 5):
        Sub, Gamma = subtraction_and_gamma(np.eye(n))
        expected = np.hstack([np.ones((n - 1, 1)), -np.eye(n - 1)])  # section 4.2 Sub_n
        assert np.array_equal(Sub, expected)
        assert np.array_equal(Gamma, expected)
    assert np.array_equal(subtraction_matrix(3), [[1, -1, 0], [1, 0, -1]])


@pytest.mark.parametrize(
    "S",
    [prefix(4), all_ranges(4), prefix(6)[::2], np.vstack([np.eye(5), np.ones((1, 5))]), "random"],
)
def test_algorithm4_properties(S):
    rng = np.random.default_rng(3)
    if isinstance(S, str):
        S = some_strategy(5, rng)
    n = S.shape[1]
    Sub, Gamma = subtraction_and_gamma(S)
    r = Sub.shape[0]
    # Lemma 3: Sub 1 = 0
    assert np.allclose(Sub @ np.ones(n), 0, atol=1e-10)
    # row space of Sub = row space of S projected orthogonally to 1
    C = np.eye(n) - np.ones((n, n)) / n
    P1 = S @ C
    assert r == np.linalg.matrix_rank(P1)
    assert np.allclose(proj(Sub), proj(P1), atol=1e-9)
    # Γ = I_r, and Subᵀ Sub = P1ᵀ P1 (same information / sensitivity as the centred strategy)
    assert np.array_equal(Gamma, np.eye(r))
    assert np.allclose(Sub.T @ Sub, P1.T @ P1, atol=1e-10)
    # Sub = P2ᵀ with P2 made of columns of a lower-triangular L: Sub is "upper-staircase"
    for k in range(r):
        first = np.flatnonzero(np.abs(Sub[k]) > 1e-12)[0]
        assert k == 0 or first > np.flatnonzero(np.abs(Sub[k - 1]) > 1e-12)[0]


def test_psd_cholesky_skips_zero_pivots():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3, 5))
    X[:, 2] = X[:, 0] + X[:, 1]  # dependent column -> zero pivot at 2
    M = X.T @ X
    L, kept = psd_cholesky(M)
    assert np.allclose(np.triu(L, 1), 0)
    assert np.allclose(L @ L.T, M, atol=1e-10)
    assert kept.tolist() == [True, True, False, True, False]


# ---------------------------------------------------------------- per-attribute factors


@pytest.mark.parametrize("n", [2, 3, 4, 7])
def test_identity_reduces_to_residual_planner(n):
    b = attribute_basis(identity(n), identity(n))
    assert b.beta == pytest.approx((n - 1) / n)
    assert b.trace_in == pytest.approx(n - 1)
    assert b.trace_out == pytest.approx(1 / n)
    assert np.allclose(b.diag_in, (n - 1) / n)
    assert np.allclose(b.diag_out, 1 / n**2)
    assert np.allclose(b.resid_cov, np.eye(n) - 1 / n)
    # section 4.3 closed-form pseudo-inverse of Sub_n
    assert np.allclose(b.Sub_inv, np.linalg.pinv(subtraction_matrix(n)))


def test_prefix_with_itself_hand_values_n2():
    # W = S = [[1,0],[1,1]]: P1 = [[.5,-.5],[0,0]], P1ᵀP1 = [[.25,-.25],[-.25,.25]]
    # -> Cholesky L = [[.5,0],[-.5,0]] -> Sub = [[.5,-.5]], beta = .25,
    # Sub⁺ = [1,-1]ᵀ, W Sub⁺ = [1, 0]ᵀ -> trace_in = 1; W1 = (1,2) -> trace_out = 5/4.
    b = attribute_basis(prefix(2))
    assert np.allclose(b.Sub, [[0.5, -0.5]])
    assert b.beta == pytest.approx(0.25)
    assert b.trace_in == pytest.approx(1.0)
    assert b.trace_out == pytest.approx(1.25)
    assert np.allclose(b.diag_in, [1.0, 0])
    assert np.allclose(b.diag_out, [0.25, 1.0])


def test_caching_and_readonly():
    b1 = attribute_basis(prefix(5), prefix(5))
    b2 = attribute_basis(prefix(5).copy(), prefix(5).copy())
    assert b1 is b2
    with pytest.raises(ValueError):
        b1.Sub[0, 0] = 3.0


def test_bad_inputs():
    with pytest.raises(WorkloadError, match="non-finite"):
        attribute_basis(prefix(3), np.full((3, 3), np.nan))
    with pytest.raises(WorkloadError, match="columns"):
        attribute_basis(prefix(3), np.eye(4))
    with pytest.raises(WorkloadError, match="all-ones"):
        attribute_basis([[1, -1, 0], [0, 1, -1]], np.eye(3))
    # a strategy that cannot answer the workload (misses the direction e0 - e2)
    with pytest.raises(WorkloadError, match="does not support"):
        attribute_basis(prefix(3), [[1, 1, 0]])


# ---------------------------------------------------------------- Theorems 7.1 / 7.2 brute force

CASES = {
    "id2-prefix3-range4": [(identity(2), identity(2)), (prefix(3), prefix(3)), (all_ranges(4), "rand")],
    "prefix4-id3-range3": [(prefix(4), "rand"), (identity(3), identity(3)), (all_ranges(3), prefix(3))],
    "range3-prefix2": [(all_ranges(3), all_ranges(3)), (prefix(2), "rand")],
}


def _bases(case, rng):
    out = []
    for W, S in CASES[case]:
        if isinstance(S, str):
            S = some_strategy(W.shape[1], rng)
        out.append(attribute_basis(W, S))
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_theorems_7_1_and_7_2_brute_force(case):
    rng = np.random.default_rng(42)
    bases = _bases(case, rng)
    d = len(bases)
    ns = [b.n for b in bases]
    closure = [A for k in range(d + 1) for A in itertools.combinations(range(d), k)]
    sig2 = {A: float(rng.uniform(0.5, 3.0)) for A in closure}

    # explicit residual matrices and noise covariances (Section 7.2, eq. 9)
    R, Sig = {}, {}
    for A in closure:
        R[A] = kron([bases[i].Sub if i in A else np.ones((1, ns[i])) for i in range(d)])
        Sig[A] = kron([bases[i].Gamma @ bases[i].Gamma.T for i in A])
    # Lemma 3: mutually orthogonal
    for A, B in itertools.combinations(closure, 2):
        assert np.allclose(R[A] @ R[B].T, 0, atol=1e-9)

    # Theorem 7.1, per mechanism and stacked
    info = np.zeros((np.prod(ns), np.prod(ns)))
    formula_total = 0.0
    for A in closure:
        M = R[A].T @ np.linalg.solve(Sig[A], R[A]) / sig2[A]
        p_formula = np.prod([bases[i].beta for i in A]) / sig2[A]
        assert np.max(np.diag(M)) == pytest.approx(p_formula, rel=1e-9)
        info += M
        formula_total += p_formula
    assert np.max(np.diag(info)) == pytest.approx(formula_total, rel=1e-9)

    # Theorem 7.2: GLS covariance of every generalized marginal in the closure
    info_inv = np.linalg.inv(info)  # closure = all subsets -> full rank
    for At in closure:
        Q = kron([bases[i].W if i in At else np.ones((1, ns[i])) for i in range(d)])
        cov = Q @ info_inv @ Q.T
        trace_f = 0.0
        diag_f = 0.0
        cov_f = 0.0
        for A in closure:
            if not set(A) <= set(At):
                continue
            trace_f += sig2[A] * np.prod(
                [bases[i].trace_in if i in A else bases[i].trace_out for i in At]
            )
            diag_f = diag_f + sig2[A] * kron(
                [(bases[i].diag_in if i in A else bases[i].diag_out)[None, :] for i in At]
            ).ravel()
            cov_f = cov_f + sig2[A] * kron(
                [
                    bases[i].W @ bases[i].resid_cov @ bases[i].W.T
                    if i in A
                    else np.outer(bases[i].W.sum(1), bases[i].W.sum(1)) / ns[i] ** 2
                    for i in At
                ]
            )
        assert np.trace(cov) == pytest.approx(trace_f, rel=1e-8)
        assert np.allclose(np.diag(cov), diag_f, rtol=1e-8, atol=1e-10)
        assert np.allclose(cov, cov_f, rtol=1e-8, atol=1e-9)
