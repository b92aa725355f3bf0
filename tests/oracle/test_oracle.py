"""Tests of the brute-force oracle itself (tests/oracle.py).

Every expected number comes from the ResidualPlanner+ paper ([RP+],
arXiv:2305.08175v5) or from a hand derivation written next to it.  These tests
must stay tiny: the whole file runs in a few seconds.
"""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

import oracle as o

# ---------------------------------------------------------------------------
# Appendix A running example
# ---------------------------------------------------------------------------
APP_A_SIZES = (2, 2, 3)  # Att1 in {a, b}, Att2 in {y, n}, Att3 in {1, 2, 3}
APP_A_WORKLOAD = [(0,), (0, 1), (1, 2)]
# Table 15, coded: a=0 b=1, y=0 n=1, 1->0 2->1 3->2
TABLE_15 = [(0, 1, 1), (1, 1, 2), (1, 0, 2), (0, 1, 1), (1, 0, 2)]
# Table 16, last row (records ordered ay1 ay2 ay3 an1 an2 an3 by1 by2 by3 bn1 bn2 bn3)
TABLE_16_X = np.array([0, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 1], dtype=float)


def _rank(M):
    return np.linalg.matrix_rank(M, tol=1e-9)


def _same_row_space(A, B):
    r = _rank(np.vstack([A, B]))
    return r == _rank(A) == _rank(B)


# ---------------------------------------------------------------------------
# Section 4.2 / Lemma 1
# ---------------------------------------------------------------------------
def test_sub_matrix_paper_examples():
    assert np.array_equal(o.sub_matrix(2), [[1, -1]])
    assert np.array_equal(o.sub_matrix(3), [[1, -1, 0], [1, 0, -1]])
    assert np.array_equal(o.sub_matrix(4), [[1, -1, 0, 0], [1, 0, -1, 0], [1, 0, 0, -1]])


def test_sub_pinv_lemma1_matches_numpy_and_paper():
    # Sec. 4.3: Sub_4^+ = 1/4 [[1,1,1],[-3,1,1],[1,-3,1],[1,1,-3]]
    expected4 = np.array([[1, 1, 1], [-3, 1, 1], [1, -3, 1], [1, 1, -3]]) / 4
    assert np.allclose(o.sub_pinv(4), expected4)
    for n in range(2, 8):
        S, P = o.sub_matrix(n), o.sub_pinv(n)
        assert P.shape == (n, n - 1)
        assert np.allclose(P, np.linalg.pinv(S))
        assert np.allclose(S @ P, np.eye(n - 1))  # right inverse (Lemma 1)


# ---------------------------------------------------------------------------
# Appendix A: data vector, marginals, closure, base mechanisms, pcost
# ---------------------------------------------------------------------------
def test_appendix_a_data_vector_table16():
    assert np.array_equal(o.data_vector(APP_A_SIZES, TABLE_15), TABLE_16_X)
    # record 'an2' is component 5 (1-based) of the 12-vector, as the paper says
    assert np.argmax(o.data_vector(APP_A_SIZES, [(0, 1, 1)])) == 4


def test_appendix_a_marginals_table17():
    x = TABLE_16_X
    # NOTE: the prose of A.2 says the {Att1} marginal is "a (i.e., 3)" and
    # "b (i.e., 3)", which cannot be right (5 records; 'a' appears twice in
    # Table 15).  Table 17 says a: 2, b: 3 -- the table is right.
    assert np.array_equal(o.marginal_query(APP_A_SIZES, (0,)) @ x, [2, 3])
    # {Att1, Att2}: rows a, b; columns y, n
    assert np.array_equal(o.marginal_query(APP_A_SIZES, (0, 1)) @ x, [0, 2, 2, 1])
    # {Att2, Att3}: rows y, n; columns 1, 2, 3.  The paper prints
    # Q x = [0, 0, 2, 0, 2, 1]^T: that is the table flattened ROW by row (C order),
    # although the A.2 prose says "take the first column ... put the next column
    # below it" (that would give [0, 0, 0, 2, 2, 1]).  The vector is right.
    q23 = o.marginal_query(APP_A_SIZES, (1, 2)) @ x
    assert np.array_equal(q23, [0, 0, 2, 0, 2, 1])
    assert np.array_equal(q23.reshape(2, 3), [[0, 0, 2], [0, 2, 1]])
    # C-order convention: Q_A x equals summing the full table over attributes not in A
    T = x.reshape(APP_A_SIZES)
    for A in o.closure([(0, 1, 2)]):
        drop = tuple(i for i in range(3) if i not in A)
        assert np.array_equal(o.marginal_query(APP_A_SIZES, A) @ x, T.sum(axis=drop).ravel())


def test_appendix_a_query_matrices_printed():
    Q1 = o.marginal_query(APP_A_SIZES, (0,))
    assert np.array_equal(Q1, [[1] * 6 + [0] * 6, [0] * 6 + [1] * 6])
    Q12 = o.marginal_query(APP_A_SIZES, (0, 1))
    assert np.array_equal(Q12, np.kron(np.eye(4), np.ones((1, 3))))
    Q23 = o.marginal_query(APP_A_SIZES, (1, 2))
    assert np.array_equal(Q23, np.hstack([np.eye(6), np.eye(6)]))


def test_appendix_a_closure_and_output_count():
    cl = o.closure(APP_A_WORKLOAD)
    assert cl == [(), (0,), (1,), (2,), (0, 1), (1, 2)]
    rows = {A: o.residual_matrix(APP_A_SIZES, A).shape[0] for A in cl}
    assert rows == {(): 1, (0,): 1, (1,): 1, (2,): 2, (0, 1): 1, (1, 2): 2}
    assert sum(rows.values()) == 8  # "Which gives us 8 total (noisy) numbers"
    B, S = o.stack_mechanism(APP_A_SIZES, cl, 1.0)
    assert B.shape == (8, 12) and S.shape == (8, 8)
    # closure helper: duplicates / unsorted input are canonicalised
    assert o.closure([(2, 1), (1, 2), (0,)]) == [(), (0,), (1,), (2,), (1, 2)]


def test_appendix_a_residual_matrices_and_sigmas():
    one2, one3 = np.ones((1, 2)), np.ones((1, 3))
    s2, s3 = o.sub_matrix(2), o.sub_matrix(3)
    expected_R = {
        (): np.kron(np.kron(one2, one2), one3),
        (0,): np.kron(np.kron(s2, one2), one3),
        (1,): np.kron(np.kron(one2, s2), one3),
        (2,): np.kron(np.kron(one2, one2), s3),
        (0, 1): np.kron(np.kron(s2, s2), one3),
        (1, 2): np.kron(np.kron(one2, s2), s3),
    }
    expected_Sigma = {
        (): [[1]], (0,): [[2]], (1,): [[2]], (2,): [[2, 1], [1, 2]],
        (0, 1): [[4]], (1, 2): [[4, 2], [2, 4]],
    }
    for A in o.closure(APP_A_WORKLOAD):
        assert np.array_equal(o.residual_matrix(APP_A_SIZES, A), expected_R[A])
        assert np.array_equal(o.residual_cov(APP_A_SIZES, A), expected_Sigma[A])


def test_appendix_a_pcost_coefficients_theorem43():
    # A.5: 1, 1/2, 1/2, 2/3, 1/2*1/2, 1/2*2/3
    expected = {(): Fraction(1), (0,): Fraction(1, 2), (1,): Fraction(1, 2),
                (2,): Fraction(2, 3), (0, 1): Fraction(1, 4), (1, 2): Fraction(1, 3)}
    for A, coef in expected.items():
        B, S = o.stack_mechanism(APP_A_SIZES, [A], 1.0)
        assert o.pcost(B, S) == pytest.approx(float(coef), rel=1e-12)
        assert o.theorem43_pcost_coef(APP_A_SIZES, A) == pytest.approx(float(coef))
        # pcost scales as 1/sigma^2
        B, S = o.stack_mechanism(APP_A_SIZES, [A], 3.0)
        assert o.pcost(B, S) == pytest.approx(float(coef) / 3.0, rel=1e-12)
    # privacy cost matrix of each base mechanism has a constant diagonal
    for A in expected:
        R, Sg = o.residual_matrix(APP_A_SIZES, A), o.residual_cov(APP_A_SIZES, A)
        d = np.diag(R.T @ np.linalg.solve(Sg, R))
        assert np.allclose(d, d[0])


def test_appendix_a_cell_variances_a5():
    s = {(): 2.0, (0,): 3.0, (1,): 5.0, (2,): 7.0, (0, 1): 11.0, (1, 2): 13.0}
    cl = o.closure(APP_A_WORKLOAD)
    B, S = o.stack_mechanism(APP_A_SIZES, cl, s)
    expected = {
        (0,): s[()] / 4 + s[(0,)] / 2,
        (0, 1): s[()] / 16 + s[(0,)] / 8 + s[(1,)] / 8 + s[(0, 1)] / 4,
        (1, 2): s[()] / 36 + s[(1,)] / 18 + s[(2,)] * (2 / 3) / 4 + s[(1, 2)] * (1 / 2) * (2 / 3),
    }
    for A, v in expected.items():
        C = o.gls_covariance(o.marginal_query(APP_A_SIZES, A), B, S)
        assert np.allclose(np.diag(C), v)
        assert o.theorem44_cell_variance(APP_A_SIZES, A, s) == pytest.approx(v)


def test_appendix_a6_sum_of_variances_and_closed_form():
    cl = o.closure(APP_A_WORKLOAD)
    # v_A: coefficient of sigma2_A in the total of all workload cell variances
    expected_v = {(): 11 / 12, (0,): 3 / 2, (1,): 5 / 6, (2,): 1.0, (0, 1): 1.0, (1, 2): 2.0}
    # brute force, by linearity in sigma2: total workload variance with all
    # sigma2 = 1, minus the same with sigma2_A = 2
    def total(s):
        B, S = o.stack_mechanism(APP_A_SIZES, cl, s)
        return sum(np.trace(o.gls_covariance(o.marginal_query(APP_A_SIZES, W), B, S))
                   for W in APP_A_WORKLOAD)

    base = total({Ap: 1.0 for Ap in cl})
    for A in cl:
        bumped = {Ap: (2.0 if Ap == A else 1.0) for Ap in cl}
        assert total(bumped) - base == pytest.approx(expected_v[A])
    # Lemma 2 closed form: T = (sum sqrt(v p))^2 / c ~ 21.18 / c, sigma2_A = sqrt(T p/(c v))
    p = {A: o.theorem43_pcost_coef(APP_A_SIZES, A) for A in cl}
    c = 1.0
    T = sum(math.sqrt(expected_v[A] * p[A]) for A in cl) ** 2 / c
    assert T == pytest.approx(21.18, abs=5e-3)
    sig = {A: math.sqrt(T * p[A] / (c * expected_v[A])) for A in cl}
    assert sig[()] == pytest.approx(4.8, abs=0.01)
    B, S = o.stack_mechanism(APP_A_SIZES, cl, sig)
    assert o.pcost(B, S) == pytest.approx(c)  # budget exactly spent
    total = sum(np.trace(o.gls_covariance(o.marginal_query(APP_A_SIZES, W), B, S))
                for W in APP_A_WORKLOAD)
    assert total == pytest.approx(T)  # optimum value equals T


# ---------------------------------------------------------------------------
# Theorem 4.1
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("sizes", [(2, 3, 2), (3, 4), (2, 2, 2, 3)])
def test_theorem41_orthogonality_and_span(sizes):
    k = len(sizes)
    all_sets = o.closure([tuple(range(k))])
    R = {A: o.residual_matrix(sizes, A) for A in all_sets}
    for A1, A2 in itertools.combinations(all_sets, 2):
        assert np.allclose(R[A1] @ R[A2].T, 0.0)
    # the residual rows of all subsets form a basis of R^d
    full = np.vstack([R[A] for A in all_sets])
    assert full.shape[0] == int(np.prod(sizes)) == _rank(full)
    for A in all_sets:
        Q = o.marginal_query(sizes, A)
        stacked = np.vstack([R[Ap] for Ap in o.closure([A])])
        assert stacked.shape[0] == Q.shape[0] == _rank(stacked)  # lin. independent, #rows = #cells
        assert _same_row_space(stacked, Q)


# ---------------------------------------------------------------------------
# Theorems 4.3 / 4.4 on random tiny instances; Algorithm 2 == GLS
# ---------------------------------------------------------------------------
def _random_instance(rng):
    k = int(rng.integers(2, 4))
    sizes = tuple(int(s) for s in rng.integers(2, 5, size=k))
    while np.prod(sizes) > 48:
        sizes = tuple(int(s) for s in rng.integers(2, 4, size=k))
    workload = []
    for _ in range(int(rng.integers(1, 4))):
        r = int(rng.integers(1, k + 1))
        workload.append(tuple(sorted(rng.choice(k, size=r, replace=False).tolist())))
    cl = o.closure(workload)
    sigma2 = {A: float(rng.uniform(0.2, 5.0)) for A in cl}
    return sizes, workload, cl, sigma2


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_theorem43_total_pcost_random(seed):
    rng = np.random.default_rng(seed)
    sizes, _, cl, sigma2 = _random_instance(rng)
    B, S = o.stack_mechanism(sizes, cl, sigma2)
    expected = sum(o.theorem43_pcost_coef(sizes, A) / sigma2[A] for A in cl)
    assert o.pcost(B, S) == pytest.approx(expected, rel=1e-10)
    # and the full privacy-cost matrix has a constant diagonal
    d = np.diag(B.T @ np.linalg.solve(S, B))
    assert np.allclose(d, expected)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_theorem44_variances_random(seed):
    rng = np.random.default_rng(100 + seed)
    sizes, _, cl, sigma2 = _random_instance(rng)
    B, S = o.stack_mechanism(sizes, cl, sigma2)
    for A in cl:
        C = o.gls_covariance(o.marginal_query(sizes, A), B, S)
        expected = 0.0
        for Ap in o.closure([A]):
            term = sigma2[Ap]
            for i in Ap:
                term *= (sizes[i] - 1) / sizes[i]
            for j in set(A) - set(Ap):
                term /= sizes[j] ** 2
            expected += term
        assert np.allclose(np.diag(C), expected)
        assert o.theorem44_cell_variance(sizes, A, sigma2) == pytest.approx(expected)


@pytest.mark.parametrize("seed", [0, 1])
def test_gls_unbiased_and_algorithm2_equals_gls(seed):
    rng = np.random.default_rng(200 + seed)
    sizes, _, cl, sigma2 = _random_instance(rng)
    B, S = o.stack_mechanism(sizes, cl, sigma2)
    x = rng.integers(0, 5, size=B.shape[1]).astype(float)
    off = o.stack_offsets(sizes, cl)
    omega = B @ x + rng.normal(size=B.shape[0]) * 3.0
    for A in cl:
        Q = o.marginal_query(sizes, A)
        assert np.allclose(o.gls_estimate(Q, B, S, B @ x), Q @ x)  # noiseless -> exact
        q_gls = o.gls_estimate(Q, B, S, omega)
        q_alg2 = o.algorithm2_reconstruct(sizes, A, {Ap: omega[off[Ap]] for Ap in cl})
        assert np.allclose(q_gls, q_alg2)


# ---------------------------------------------------------------------------
# Definition 2
# ---------------------------------------------------------------------------
def _delta_by_integration(eps, pc):
    """Hockey-stick divergence between N(mu,1) and N(0,1), mu = sqrt(pc), by quadrature
    (independent of the closed form of Definition 2)."""
    m = math.sqrt(pc)
    f = lambda t: max(norm.pdf(t, loc=m) - math.exp(eps) * norm.pdf(t), 0.0)
    val, _ = integrate.quad(f, -12 + m, 12 + m, points=[m / 2 + eps / m], limit=200)
    return val


@pytest.mark.parametrize("eps,pc", [(0.5, 0.25), (1.0, 1.0), (2.0, 4.0), (0.1, 0.01), (3.0, 0.7)])
def test_definition2_delta_matches_hockey_stick(eps, pc):
    assert o.delta(eps, pc) == pytest.approx(_delta_by_integration(eps, pc), abs=1e-9)


def test_definition2_conversions():
    assert o.rho(1.0) == 0.5 and o.mu(4.0) == 2.0
    # eps = 0: delta = Phi(mu/2) - Phi(-mu/2)
    assert o.delta(0.0, 1.0) == pytest.approx(2 * norm.cdf(0.5) - 1)
    # increasing in pcost
    ds = [o.delta(1.0, p) for p in (0.1, 0.5, 1.0, 2.0, 5.0)]
    assert all(a < b for a, b in zip(ds, ds[1:]))


# ---------------------------------------------------------------------------
# Section 5, Example 3
# ---------------------------------------------------------------------------
def test_example3_numbers():
    Y, Xi, g2 = o.example3()
    assert np.allclose(Y, [[1, 1, 1], [-3, 1, 1], [1, -3, 1], [1, 1, -3]])
    assert np.allclose(Xi, [[3, -1, -1, -1], [-1, 3, -1, -1], [-1, -1, 3, -1], [-1, -1, -1, 3]])
    R = o.residual_matrix((4,), (0,))
    assert np.allclose(Y, 4 * np.linalg.pinv(R))  # "Y = 4 * R_A^+" (here R_A = Sub_4)
    assert g2 == pytest.approx(64 / 9)
    sens = o.l2_sensitivity_sq(Xi)
    assert sens == pytest.approx(12)  # 9 + 1 + 1 + 1
    r = sens / (2 * g2)
    assert r == pytest.approx(27 / 32)
    B, S = o.stack_mechanism((4,), [(0,)], (2 / 3) ** 2)
    assert o.rho(o.pcost(B, S)) == pytest.approx(27 / 32)


@pytest.mark.parametrize("sizes,A,sbar", [((4,), (0,), 2 / 3), ((2, 3), (0, 1), 1.42),
                                          ((3, 2, 2), (0, 2), 0.5), ((2, 3), (), 1.0)])
def test_discrete_transform_equivalence(sizes, A, sbar):
    """Theorem 5.1, checked in the direction Algorithm 3 actually uses:
    Y^+ M'_inter has the law of M_A(x; sbar^2)."""
    Y, Xi, g2 = o.discrete_transform(sizes, A, sbar)
    R, Sg = o.residual_matrix(sizes, A), o.residual_cov(sizes, A)
    Yp = np.linalg.pinv(Y)
    # Algorithm 3 line 2: Y^+ = kron (1/n_i) Sub_{n_i}
    assert np.allclose(Yp, o.kron_all([o.sub_matrix(sizes[i]) / sizes[i] for i in A]))
    assert np.allclose(Yp @ Xi, R)                             # mean
    assert np.allclose(g2 * Yp @ Yp.T, sbar ** 2 * Sg)         # covariance
    # Algorithm 3 note: H v = Xi x with H = kron (n_i I - 1 1^T), v = Q_A x
    H = o.kron_all([sizes[i] * np.eye(sizes[i]) - np.ones((sizes[i], sizes[i])) for i in A])
    assert np.allclose(H @ o.marginal_query(sizes, A), Xi)
    assert np.allclose(Xi, np.round(Xi))                       # integer entries
    # same zCDP rho as the continuous mechanism (Example 3's argument, general A)
    B, S = o.stack_mechanism(sizes, [A], sbar ** 2)
    assert o.l2_sensitivity_sq(Xi) / (2 * g2) == pytest.approx(o.rho(o.pcost(B, S)))
    # NOTE (paper inaccuracy): Sec. 5 states the requirement
    #   sigma^2 Y Sigma_A Y^T = gamma^2 I,
    # but eqs. (5)-(7) give gamma^2 * kron_i (I - 1 1^T / n_i) instead (rank-deficient
    # whenever A is non-empty); e.g. in Example 3 the diagonal is 64/9 * 3/4 = 16/3.
    # So Y M_A is not *equal* in law to M'_inter; it differs by independent noise
    # along directions that Xi annihilates, which is still post-processing.
    P = o.kron_all([np.eye(sizes[i]) - np.ones((sizes[i], sizes[i])) / sizes[i] for i in A])
    assert np.allclose(sbar ** 2 * Y @ Sg @ Y.T, g2 * P)


# ---------------------------------------------------------------------------
# Section 7: ResidualPlanner+
# ---------------------------------------------------------------------------
def test_prefix_and_range_matrices_paper_n3():
    assert np.array_equal(o.prefix_matrix(3), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    assert np.array_equal(o.range_matrix(3), [[1, 0, 0], [0, 1, 0], [0, 0, 1],
                                              [1, 1, 0], [0, 1, 1], [1, 1, 1]])
    assert o.range_matrix(5).shape == (15, 5)


def test_cholesky_psd_singular():
    rng = np.random.default_rng(7)
    for n, r in [(3, 2), (4, 1), (5, 3), (4, 4)]:
        G = rng.normal(size=(r, n))
        M = G.T @ G
        L = o.cholesky_psd(M)
        assert np.allclose(np.tril(L), L)
        assert np.allclose(L @ L.T, M)
        assert sum(L[j, j] > 0 for j in range(n)) == r


def test_algorithm4_hand_derived_prefix2():
    # S = [[1,0],[1,1]]: S 1 = [1,2]^T, P1 = S - S 1 1^T/2 = [[.5,-.5],[0,0]],
    # P1^T P1 = [[.25,-.25],[-.25,.25]] = L L^T with L = [[.5,0],[-.5,0]],
    # so Sub = [[.5,-.5]], Gamma = I_1 and beta = max diag(Sub^T Sub) = 1/4.
    sub, G = o.algorithm4(o.prefix_matrix(2))
    assert np.allclose(sub, [[0.5, -0.5]])
    assert np.array_equal(G, [[1.0]])
    assert o.theorem71_beta(sub, G) == pytest.approx(0.25)


def test_algorithm4_identity_branch():
    for n in (2, 3, 5):
        sub, G = o.algorithm4(np.eye(n))
        assert np.array_equal(sub, o.sub_matrix(n)) and np.array_equal(G, o.sub_matrix(n))
        assert o.theorem71_beta(sub, G) == pytest.approx((n - 1) / n)  # = Theorem 4.3 factor


def _strategies():
    rng = np.random.default_rng(11)
    out = [o.prefix_matrix(3), o.prefix_matrix(5), o.range_matrix(3), o.range_matrix(4),
           np.vstack([np.eye(3), np.ones((1, 3))])]
    out.append(rng.normal(size=(6, 4)))
    out.append(rng.normal(size=(2, 5)))  # row space of P1 has dimension 2 < n-1
    return out


@pytest.mark.parametrize("idx", range(7))
def test_algorithm4_lemma3_and_row_space(idx):
    S = _strategies()[idx]
    n = S.shape[1]
    sub, G = o.algorithm4(S)
    assert np.allclose(sub @ np.ones(n), 0.0)                     # Lemma 3: Sub 1 = 0
    P1 = S @ (np.eye(n) - np.ones((n, n)) / n)                    # rows of S projected off 1
    assert _same_row_space(sub, P1)
    assert sub.shape[0] == _rank(P1) == _rank(sub)                # linearly independent rows
    assert np.allclose(sub.T @ sub, P1.T @ P1)                    # P2 P2^T = L L^T = P1^T P1
    assert np.array_equal(G, np.eye(sub.shape[0]))
    assert o.theorem71_beta(sub, G) == pytest.approx(np.max(np.sum(P1 ** 2, axis=0)))


def _rp_plus_setup():
    # attribute 0: prefix workload, prefix strategy; 1: identity; 2: ranges with prefix strategy
    sizes = (3, 2, 3)
    Ws = [o.prefix_matrix(3), np.eye(2), o.range_matrix(3)]
    Ss = [o.prefix_matrix(3), np.eye(2), o.prefix_matrix(3)]
    pairs = [o.algorithm4(S) for S in Ss]
    subs = [p[0] for p in pairs]
    gammas = [p[1] for p in pairs]
    return sizes, Ws, subs, gammas


def _stack_plus(sizes, sets, subs, gammas, sigma2):
    from scipy.linalg import block_diag
    B = np.vstack([o.residual_matrix_plus(sizes, A, subs) for A in sets])
    S = block_diag(*[sigma2[A] * o.residual_cov_plus(sizes, A, gammas) for A in sets])
    return B, S


def test_rp_plus_identity_strategies_reduce_to_rp():
    sizes = (2, 3)
    pairs = [o.algorithm4(np.eye(n)) for n in sizes]
    subs, gammas = [p[0] for p in pairs], [p[1] for p in pairs]
    for A in o.closure([(0, 1)]):
        assert np.array_equal(o.residual_matrix_plus(sizes, A, subs), o.residual_matrix(sizes, A))
        assert np.array_equal(o.residual_cov_plus(sizes, A, gammas), o.residual_cov(sizes, A))
        assert np.array_equal(o.generalized_marginal_query(sizes, A, [np.eye(n) for n in sizes]),
                              o.marginal_query(sizes, A))


def test_rp_plus_lemma3_and_theorems_71_72():
    sizes, Ws, subs, gammas = _rp_plus_setup()
    workload = [(0, 1), (1, 2), (0, 2)]
    cl = o.closure(workload)
    R = {A: o.residual_matrix_plus(sizes, A, subs) for A in cl}
    for A1, A2 in itertools.combinations(cl, 2):                 # Lemma 3: orthogonal
        assert np.allclose(R[A1] @ R[A2].T, 0.0)
    full = np.vstack([R[A] for A in cl])
    assert _rank(full) == full.shape[0]                           # linearly independent
    for W in workload:                                            # span contains workload rows
        Q = o.generalized_marginal_query(sizes, W, Ws)
        assert _rank(np.vstack([full, Q])) == _rank(full)
    # Theorem 7.1: pcost(M_A) = prod beta_i / sigma2_A
    beta = [o.theorem71_beta(s, g) for s, g in zip(subs, gammas)]
    for A in cl:
        B, S = _stack_plus(sizes, [A], subs, gammas, {A: 2.5})
        assert o.pcost(B, S) == pytest.approx(np.prod([beta[i] for i in A]) / 2.5)
    # Theorem 7.2: covariance of the reconstructed generalized marginal
    rng = np.random.default_rng(5)
    sigma2 = {A: float(rng.uniform(0.5, 3.0)) for A in cl}
    B, S = _stack_plus(sizes, cl, subs, gammas, sigma2)
    for At in cl:
        Q = o.generalized_marginal_query(sizes, At, Ws)
        C = o.gls_covariance(Q, B, S)
        C72 = o.theorem72_covariance(sizes, At, Ws, subs, gammas, sigma2)
        assert np.allclose(C, C72)
        # Theorem 7.2's trace formula -- the trace is the SUM of the cell variances
        # (the paper's wording "sum of the squares of the cell variances" is a slip)
        tr = 0.0
        for A in o.closure([At]):
            t = sigma2[A]
            for i in A:
                t *= np.linalg.norm(Ws[i] @ np.linalg.pinv(subs[i]) @ gammas[i], "fro") ** 2
            for j in set(At) - set(A):
                t *= np.linalg.norm(Ws[j] @ np.ones(sizes[j])) ** 2 / sizes[j] ** 2
            tr += t
        assert np.trace(C) == pytest.approx(tr)
        # noiseless reconstruction is exact; Algorithm 6 equals GLS on noisy answers
        x = rng.integers(0, 4, size=B.shape[1]).astype(float)
        assert np.allclose(o.gls_estimate(Q, B, S, B @ x), Q @ x)
        omega = B @ x + 2.0 * rng.normal(size=B.shape[0])
        off = {}
        start = 0
        for A in cl:
            off[A] = slice(start, start + R[A].shape[0])
            start += R[A].shape[0]
        alg6 = o.algorithm6_reconstruct(sizes, At, Ws, subs, {A: omega[off[A]] for A in cl})
        assert np.allclose(alg6, o.gls_estimate(Q, B, S, omega))
