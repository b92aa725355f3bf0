"""Independent brute-force oracle for the ResidualPlanner family.

Everything here is built *directly from the paper's definitions* with explicit
dense matrices, for tiny domains only.  This module must never import
``dpmatrix``: its purpose is to catch bugs in the library, so it shares no code
with it.

Paper: He, Xiao, Toksoz, Ding, Zhang, Kifer, "ResidualPlanner+: a scalable matrix
mechanism for marginals and beyond" (arXiv:2305.08175v5), referred to as [RP+].

Conventions
-----------
* Attributes are positions ``0..k-1`` with sizes ``sizes``.
* The data vector ``x`` has ``prod(sizes)`` entries; a record with values
  ``(v_0, ..., v_{k-1})`` is ``kron(e_{v_0}, ..., e_{v_{k-1}})`` ([RP+] Sec. 2),
  i.e. row-major (C) order with attribute 0 varying slowest (Appendix A.1,
  Table 16: ay1, ay2, ay3, an1, ...).  ``x.reshape(sizes)`` is the full table.
* An attribute set ``A`` is a sorted tuple of positions.  Kronecker factors are
  always taken in increasing attribute position, so ``Q_A x`` is the marginal
  table over the attributes of ``A`` flattened in C order.
* Noise scales ``sigma2`` may be given as a scalar (same for every set) or as a
  mapping ``{A: sigma2_A}``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from functools import reduce

import numpy as np
from scipy.stats import norm

__all__ = [
    "canon",
    "kron_all",
    "sub_matrix",
    "sub_pinv",
    "ones_row",
    "marginal_query",
    "residual_matrix",
    "residual_cov",
    "closure",
    "stack_offsets",
    "stack_mechanism",
    "pcost",
    "rho",
    "mu",
    "delta",
    "gls_estimate",
    "gls_covariance",
    "theorem43_pcost_coef",
    "theorem44_cell_variance",
    "algorithm2_reconstruct",
    "data_vector",
    "prefix_matrix",
    "range_matrix",
    "cholesky_psd",
    "algorithm4",
    "residual_matrix_plus",
    "residual_cov_plus",
    "generalized_marginal_query",
    "theorem71_beta",
    "theorem72_covariance",
    "algorithm6_reconstruct",
    "discrete_transform",
    "example3",
    "l2_sensitivity_sq",
]


# ---------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------
def canon(A: Iterable[int]) -> tuple[int, ...]:
    """Canonical form of an attribute set: a sorted tuple of distinct positions."""
    return tuple(sorted(set(int(a) for a in A)))


def kron_all(mats: Sequence[np.ndarray]) -> np.ndarray:
    """Kronecker product of a list of matrices, left to right; [[1]] for an empty list."""
    return reduce(np.kron, [np.atleast_2d(np.asarray(m, dtype=float)) for m in mats],
                  np.ones((1, 1)))


def ones_row(n: int) -> np.ndarray:
    """The row vector 1_n^T (1 x n)."""
    return np.ones((1, n))


def _sigma2_of(sigma2, A) -> float:
    if isinstance(sigma2, Mapping):
        return float(sigma2[canon(A)])
    return float(sigma2)


# ---------------------------------------------------------------------------
# Section 4.2 / Lemma 1: subtraction matrices
# ---------------------------------------------------------------------------
def sub_matrix(n: int) -> np.ndarray:
    """Sub_n ([RP+] Sec. 4.2): the (n-1) x n matrix whose first column is all ones,
    whose (i, i+1) entries are -1 (0-based: row i, column i+1), and zero elsewhere.

    E.g. Sub_2 = [[1, -1]], Sub_3 = [[1, -1, 0], [1, 0, -1]].  Sub_1 is 0 x 1.
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    S = np.zeros((n - 1, n))
    S[:, 0] = 1.0
    for i in range(n - 1):
        S[i, i + 1] = -1.0
    return S


def sub_pinv(n: int) -> np.ndarray:
    """Closed-form pseudo-inverse of Sub_n ([RP+] Lemma 1), an n x (n-1) matrix:

        Sub_n^+ = (1/n) [ 1_{n-1}^T ; 1_{n-1} 1_{n-1}^T - n I_{n-1} ].

    E.g. Sub_4^+ = (1/4) [[1,1,1],[-3,1,1],[1,-3,1],[1,1,-3]].
    """
    m = n - 1
    top = np.ones((1, m))
    bottom = np.ones((m, m)) - n * np.eye(m)
    return np.vstack([top, bottom]) / n


# ---------------------------------------------------------------------------
# Section 2 / 4.2: marginal queries, residual matrices, residual covariances
# ---------------------------------------------------------------------------
def marginal_query(sizes: Sequence[int], A: Iterable[int]) -> np.ndarray:
    """Q_A = V_1 kron ... kron V_k with V_i = I_{n_i} if i in A else 1_{n_i}^T
    ([RP+] Sec. 2).  Q_A x is the marginal table on A, flattened in C order."""
    A = canon(A)
    return kron_all([np.eye(n) if i in A else ones_row(n) for i, n in enumerate(sizes)])


def residual_matrix(sizes: Sequence[int], A: Iterable[int]) -> np.ndarray:
    """R_A = V_1 kron ... kron V_k with V_i = Sub_{n_i} if i in A else 1_{n_i}^T
    ([RP+] Sec. 4.2).  It has prod_{i in A}(n_i - 1) rows."""
    A = canon(A)
    return kron_all([sub_matrix(n) if i in A else ones_row(n) for i, n in enumerate(sizes)])


def residual_cov(sizes: Sequence[int], A: Iterable[int]) -> np.ndarray:
    """Sigma_A = kron_{i in A} (Sub_{n_i} Sub_{n_i}^T) ([RP+] Sec. 4.2); Sigma_emptyset = [[1]]."""
    A = canon(A)
    return kron_all([sub_matrix(sizes[i]) @ sub_matrix(sizes[i]).T for i in A])


def closure(workload: Iterable[Iterable[int]]) -> list[tuple[int, ...]]:
    """Downward closure ([RP+] Sec. 4.2, after Theorem 4.1): every subset of every
    workload set, as sorted tuples, without duplicates, ordered by (size, tuple)."""
    out = set()
    for W in workload:
        W = canon(W)
        for r in range(len(W) + 1):
            for sub in itertools.combinations(W, r):
                out.add(tuple(sub))
    return sorted(out, key=lambda t: (len(t), t))


def stack_offsets(sizes: Sequence[int], sets: Sequence[Iterable[int]]) -> dict:
    """Row slices of each R_A inside the stacked B of :func:`stack_mechanism`
    (blocks in the order given)."""
    out, start = {}, 0
    for A in sets:
        A = canon(A)
        m = residual_matrix(sizes, A).shape[0]
        out[A] = slice(start, start + m)
        start += m
    return out


def stack_mechanism(sizes: Sequence[int], sets: Sequence[Iterable[int]], sigma2):
    """Explicit (B, Sigma) of the linear Gaussian mechanism that releases
    M_A(x; sigma2_A) = R_A x + N(0, sigma2_A Sigma_A) for every A in ``sets``
    ([RP+] eq. (3), and the stacking rule after Definition 2): B stacks the R_A
    vertically, Sigma is block-diagonal with blocks sigma2_A * Sigma_A.

    ``sigma2``: scalar or mapping {A: sigma2_A}.
    """
    from scipy.linalg import block_diag

    Bs, Ss = [], []
    for A in sets:
        A = canon(A)
        Bs.append(residual_matrix(sizes, A))
        Ss.append(_sigma2_of(sigma2, A) * residual_cov(sizes, A))
    return np.vstack(Bs), block_diag(*Ss)


# ---------------------------------------------------------------------------
# Definition 2: privacy cost and conversions
# ---------------------------------------------------------------------------
def pcost(B: np.ndarray, Sigma: np.ndarray) -> float:
    """pcost of M(x) = B x + N(0, Sigma): the largest diagonal entry of
    B^T Sigma^{-1} B ([RP+] Definition 2)."""
    B = np.atleast_2d(np.asarray(B, dtype=float))
    Sigma = np.atleast_2d(np.asarray(Sigma, dtype=float))
    M = B.T @ np.linalg.solve(Sigma, B)
    return float(np.max(np.diag(M)))


def rho(pc: float) -> float:
    """zCDP parameter rho = pcost / 2 ([RP+] Definition 2)."""
    return pc / 2.0


def mu(pc: float) -> float:
    """Gaussian-DP parameter mu = sqrt(pcost) ([RP+] Definition 2)."""
    return math.sqrt(pc)


def delta(eps: float, pc: float) -> float:
    """(eps, delta)-DP delta from pcost ([RP+] Definition 2, transcribed literally):

        delta = Phi( sqrt(pcost)/2 - eps/sqrt(pcost) )
                - e^eps * Phi( -sqrt(pcost)/2 - eps/sqrt(pcost) ).
    """
    s = math.sqrt(pc)
    return float(norm.cdf(s / 2 - eps / s) - math.exp(eps) * norm.cdf(-s / 2 - eps / s))


# ---------------------------------------------------------------------------
# Section 2.2: generalized least squares reconstruction
# ---------------------------------------------------------------------------
def gls_estimate(W, B, Sigma, omega) -> np.ndarray:
    """Best linear unbiased estimate W (B^T Sigma^{-1} B)^+ B^T Sigma^{-1} omega
    ([RP+] Sec. 2.2)."""
    W, B = np.atleast_2d(W).astype(float), np.atleast_2d(B).astype(float)
    SiB = np.linalg.solve(np.atleast_2d(Sigma).astype(float), B)  # Sigma^{-1} B
    return W @ np.linalg.pinv(B.T @ SiB) @ SiB.T @ np.asarray(omega, dtype=float)


def gls_covariance(W, B, Sigma) -> np.ndarray:
    """Covariance W (B^T Sigma^{-1} B)^+ W^T of the GLS estimate ([RP+] Sec. 2.2)."""
    W, B = np.atleast_2d(W).astype(float), np.atleast_2d(B).astype(float)
    SiB = np.linalg.solve(np.atleast_2d(Sigma).astype(float), B)
    return W @ np.linalg.pinv(B.T @ SiB) @ W.T


# ---------------------------------------------------------------------------
# Closed forms of Theorems 4.3 / 4.4 and Algorithm 2 (for comparison with the
# brute-force quantities above; the tests check they agree)
# ---------------------------------------------------------------------------
def theorem43_pcost_coef(sizes: Sequence[int], A: Iterable[int]) -> float:
    """prod_{i in A} (n_i - 1)/n_i: pcost of M_A at sigma2_A = 1 ([RP+] Theorem 4.3)."""
    return float(np.prod([(sizes[i] - 1) / sizes[i] for i in canon(A)]))


def theorem44_cell_variance(sizes: Sequence[int], A: Iterable[int], sigma2) -> float:
    """Common variance of every cell of the reconstructed marginal on A
    ([RP+] Theorem 4.4):
        sum_{A' subset A} sigma2_{A'} prod_{i in A'} (n_i-1)/n_i prod_{j in A \\ A'} 1/n_j^2.
    """
    A = canon(A)
    total = 0.0
    for Ap in closure([A]):
        c = _sigma2_of(sigma2, Ap)
        for i in Ap:
            c *= (sizes[i] - 1) / sizes[i]
        for j in set(A) - set(Ap):
            c /= sizes[j] ** 2
        total += c
    return total


def algorithm2_reconstruct(sizes: Sequence[int], A: Iterable[int], omegas: Mapping) -> np.ndarray:
    """Algorithm 2 of [RP+], expanded densely: q = sum_{A' subset A} U_{A<-A'} omega_{A'},
    U = kron over i in A of (Sub_{n_i}^+ if i in A' else 1_{n_i}/n_i)
    (attributes outside A contribute nothing: their factor is the scalar 1)."""
    A = canon(A)
    q = 0.0
    for Ap in closure([A]):
        U = kron_all([sub_pinv(sizes[i]) if i in Ap else np.ones((sizes[i], 1)) / sizes[i]
                      for i in A])
        q = q + U @ np.asarray(omegas[Ap], dtype=float)
    return q


def data_vector(sizes: Sequence[int], records: Iterable[Sequence[int]]) -> np.ndarray:
    """x = sum over records of kron(e_{v_0}, ..., e_{v_{k-1}}) ([RP+] Sec. 2), built
    literally with Kronecker products of one-hot rows."""
    x = np.zeros(int(np.prod(sizes)))
    for r in records:
        x += kron_all([np.eye(n)[v] for n, v in zip(sizes, r)]).ravel()
    return x


# ---------------------------------------------------------------------------
# Section 7: ResidualPlanner+
# ---------------------------------------------------------------------------
def prefix_matrix(n: int) -> np.ndarray:
    """Prefix-sum workload W_prefix ([RP+] Sec. 7.1): row j sums values 0..j
    (lower-triangular ones)."""
    return np.tril(np.ones((n, n)))


def range_matrix(n: int) -> np.ndarray:
    """All ranges [a, b], 0 <= a <= b < n ([RP+] Sec. 7.1), ordered by length then
    start, as in the paper's W_range for n = 3: identity rows first, then length 2, ..."""
    rows = []
    for length in range(1, n + 1):
        for a in range(0, n - length + 1):
            r = np.zeros(n)
            r[a:a + length] = 1.0
            rows.append(r)
    return np.array(rows)


def cholesky_psd(M: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    """Pivot-free Cholesky L L^T = M for a symmetric PSD (possibly singular) M.

    Plain column-by-column Cholesky (no pivoting); when a pivot is (numerically)
    zero the whole column of L is set to zero, which is exact for PSD matrices
    (a zero pivot forces the rest of its column to vanish).  ``tol`` is relative
    to the largest diagonal entry of M.
    """
    M = np.asarray(M, dtype=float)
    n = M.shape[0]
    scale = max(float(np.max(np.abs(np.diag(M)))), 1.0) if n else 1.0
    L = np.zeros((n, n))
    for j in range(n):
        d = M[j, j] - L[j, :j] @ L[j, :j]
        if d <= tol * scale:
            continue  # zero pivot: column j of L stays zero
        L[j, j] = math.sqrt(d)
        for i in range(j + 1, n):
            L[i, j] = (M[i, j] - L[i, :j] @ L[j, :j]) / L[j, j]
    return L


def algorithm4(S: np.ndarray, tol: float = 1e-10):
    """Algorithm 4 of [RP+]: (Sub_i, Gamma_i) from a strategy matrix S (m x n).

    * S is exactly the identity  ->  Sub = Sub_n,  Gamma = Sub_n.
    * otherwise: P1 = S - S 1 1^T / n; L L^T = P1^T P1 (lower-triangular Cholesky,
      pivot-free, zero pivots give zero columns); P2 = the linearly independent
      (= nonzero) columns of L; r = #columns of P2; Sub = P2^T, Gamma = I_r.
    """
    S = np.atleast_2d(np.asarray(S, dtype=float))
    m, n = S.shape
    if m == n and np.array_equal(S, np.eye(n)):
        sub = sub_matrix(n)
        return sub, sub.copy()
    one = np.ones((n, 1))
    P1 = S - S @ one @ one.T / n
    L = cholesky_psd(P1.T @ P1, tol=tol)
    keep = [j for j in range(n) if L[j, j] > 0.0]
    P2 = L[:, keep]
    r = P2.shape[1]
    return P2.T.copy(), np.eye(r)


def split_residual(S: np.ndarray, tol: float = 1e-10):
    """The "split" residual of a strategy S (dpmatrix's alternative to Algorithm 4), written
    from its definition: P = S^T S is the precision of S x + N(0, I); the total 1^T x is
    estimated from it with variance 1^T P^+ 1, i.e. precision c = 1 / (1^T P^+ 1); the rest of
    the information is P - c 1 1^T (PSD by Cauchy-Schwarz). Returns (Sub, Gamma) with
    Sub^T Sub = P - c 1 1^T (Cholesky, zero pivots dropped) and Gamma = I.
    """
    S = np.atleast_2d(np.asarray(S, dtype=float))
    n = S.shape[1]
    P = S.T @ S
    one = np.ones(n)
    c = 1.0 / (one @ np.linalg.pinv(P) @ one)
    L = cholesky_psd(P - c * np.outer(one, one), tol=tol)
    keep = [j for j in range(n) if L[j, j] > 0.0]
    return L[:, keep].T.copy(), np.eye(len(keep))


def residual_matrix_plus(sizes: Sequence[int], A: Iterable[int], subs: Sequence[np.ndarray]) -> np.ndarray:
    """RP+ residual matrix ([RP+] Sec. 7.2): R_A = kron(V_i), V_i = Sub_i if i in A
    else 1_{n_i}^T.  ``subs[i]`` is attribute i's subtraction matrix (Algorithm 4)."""
    A = canon(A)
    return kron_all([np.asarray(subs[i], dtype=float) if i in A else ones_row(n)
                     for i, n in enumerate(sizes)])


def residual_cov_plus(sizes: Sequence[int], A: Iterable[int], gammas: Sequence[np.ndarray]) -> np.ndarray:
    """RP+ covariance ([RP+] Sec. 7.2): Sigma_A = kron_{i in A} Gamma_i Gamma_i^T
    ([[1]] for the empty set).  ``sizes`` is unused but kept for symmetry."""
    A = canon(A)
    return kron_all([np.asarray(gammas[i], dtype=float) @ np.asarray(gammas[i], dtype=float).T
                     for i in A])


def generalized_marginal_query(sizes: Sequence[int], A: Iterable[int], Ws: Sequence[np.ndarray]) -> np.ndarray:
    """Generalized marginal ([RP+] Sec. 7.1): Q_A = kron(V_i), V_i = W_i if i in A
    else 1_{n_i}^T.  ``Ws[i]`` is attribute i's base matrix."""
    A = canon(A)
    return kron_all([np.asarray(Ws[i], dtype=float) if i in A else ones_row(n)
                     for i, n in enumerate(sizes)])


def theorem71_beta(sub: np.ndarray, gamma: np.ndarray) -> float:
    """beta_i = largest diagonal of Sub_i^T (Gamma_i Gamma_i^T)^{-1} Sub_i
    ([RP+] Theorem 7.1); pcost(M_A) = prod_{i in A} beta_i / sigma2_A."""
    sub = np.atleast_2d(np.asarray(sub, dtype=float))
    G = np.atleast_2d(np.asarray(gamma, dtype=float))
    return float(np.max(np.diag(sub.T @ np.linalg.solve(G @ G.T, sub))))


def theorem72_covariance(sizes, At, Ws, subs, gammas, sigma2) -> np.ndarray:
    """Closed-form covariance of the reconstructed generalized marginal on At
    ([RP+] Theorem 7.2): sum_{A subset At} sigma2_A kron_i Psi_{A,i} Psi_{A,i}^T,
    Psi = W_i Sub_i^+ Gamma_i (i in A), W_i 1/n_i (i in At \\ A), 1 (i not in At)."""
    At = canon(At)
    total = 0.0
    for A in closure([At]):
        factors = []
        for i in At:
            W = np.asarray(Ws[i], dtype=float)
            if i in A:
                Psi = W @ np.linalg.pinv(np.asarray(subs[i], dtype=float)) @ np.asarray(gammas[i], dtype=float)
            else:
                Psi = W @ np.ones((sizes[i], 1)) / sizes[i]
            factors.append(Psi @ Psi.T)
        total = total + _sigma2_of(sigma2, A) * kron_all(factors)
    return np.atleast_2d(total)


def algorithm6_reconstruct(sizes, At, Ws, subs, omegas: Mapping) -> np.ndarray:
    """Algorithm 6 of [RP+], expanded densely: q = sum_{A subset At} U_A omega_A with
    U_A = kron over i in At of (Sub_i^+ if i in A else 1_{n_i}/n_i); answer = (kron_{i in At} W_i) q."""
    At = canon(At)
    q = 0.0
    for A in closure([At]):
        U = kron_all([np.linalg.pinv(np.asarray(subs[i], dtype=float)) if i in A
                      else np.ones((sizes[i], 1)) / sizes[i] for i in At])
        q = q + U @ np.asarray(omegas[A], dtype=float)
    return kron_all([Ws[i] for i in At]) @ q


# ---------------------------------------------------------------------------
# Section 5: discrete Gaussian transformation
# ---------------------------------------------------------------------------
def discrete_transform(sizes: Sequence[int], A: Iterable[int], sigma_bar: float):
    """Equations (5)-(7) of [RP+] Sec. 5 for a general attribute set A:

        Y      = kron_{i in A} |Att_i| * Sub_{|Att_i|}^+          (5)
        Xi     = Y R_A                                            (6)
        gamma2 = sigma_bar^2 * prod_{i in A} |Att_i|^2            (7)

    Returns (Y, Xi, gamma2).  (Eq. (4) just writes sigma_bar = s/t.)
    """
    A = canon(A)
    Y = kron_all([sizes[i] * sub_pinv(sizes[i]) for i in A])
    Xi = Y @ residual_matrix(sizes, A)
    gamma2 = float(sigma_bar) ** 2 * float(np.prod([sizes[i] ** 2 for i in A]))
    return Y, Xi, gamma2


def example3():
    """[RP+] Example 3: one attribute with 4 values, A = {Att_1}, sigma_A = 2/3.
    Returns (Y, Xi, gamma2) via :func:`discrete_transform`."""
    return discrete_transform((4,), (0,), 2.0 / 3.0)


def l2_sensitivity_sq(Xi: np.ndarray) -> float:
    """Squared L2 sensitivity of x -> Xi x under add/remove-one-record neighbours:
    the largest squared column norm of Xi ([RP+] Example 3)."""
    Xi = np.atleast_2d(np.asarray(Xi, dtype=float))
    return float(np.max(np.sum(Xi ** 2, axis=0)))
