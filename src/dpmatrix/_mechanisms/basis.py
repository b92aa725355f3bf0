"""Per-attribute residual basis of ResidualPlanner+ (paper section 7, Algorithm 4, Thms 7.1/7.2).

For one attribute with base workload ``W`` (``m × n``) and strategy replacement ``S``
(``k × n``), a *subtraction matrix* ``Sub`` (``r × n``) and a noise factor ``Γ`` are built so
that the residual mechanism of an attribute set ``A`` is

    M_A(x) = (⊗_{i∈A} Sub_i ⊗_{i∉A} 1ᵀ) x + N(0, σ²_A ⊗_{i∈A} Γ_i Γ_iᵀ).

Two constructions of ``Sub`` from ``S`` are offered (``construction=``):

* ``"centred"`` — the paper's Algorithm 4: centre the strategy, ``P1 = S (I − 11ᵀ/n)``, and
  take ``Sub = P2ᵀ`` from a Cholesky factor of ``P1ᵀP1`` (``Sub 1 = 0``, ``Γ = I``).
* ``"split"`` — split the strategy's information: with ``P = SᵀS`` (the precision of
  ``S x + N(0, I)``) and ``c = 1 / (1ᵀ P⁺ 1)`` (the precision with which ``S`` measures the
  total ``1ᵀx``), ``P = c 11ᵀ + (P − c 11ᵀ)`` where ``P − c 11ᵀ ⪰ 0`` (Cauchy–Schwarz) has
  rank ``rank S − 1`` and null vector ``P⁺1``; ``Sub`` is a Cholesky factor of it, ``Γ = I``.
  Measuring the total with variance ``1/c`` and ``Sub x + N(0, I)`` has exactly the Fisher
  information ``P`` and the privacy cost ``max diag P`` of ``S x + N(0, I)``: in one dimension
  nothing is lost. Algorithm 4 instead replaces ``P`` by ``CPC`` (``C`` the centring), which
  equals ``P − c 11ᵀ`` only when ``P 1 ∝ 1``; otherwise it changes both the sensitivity and
  the variances. Because the rows of ``Sub`` are not orthogonal to ``1``, the total enters the
  cells through ``a = c P⁺ 1`` instead of ``1/n`` (below). Checked against explicit matrices
  (privacy cost as the largest diagonal of ``Bᵀ Σ⁻¹ B``, generalized least squares) in the
  tests; for a single Kronecker-product workload (paper tables 10, 11) the split construction
  with the optimal 1-D strategies attains HDMM's optimal error, which Algorithm 4 does not.

Everything the planner needs about the attribute then reduces to a few numbers / vectors,
collected in :class:`AttributeBasis`. With ``T = [1ᵀ; Sub]`` and ``[a, G] = T⁺``
(``a = 1/n``, ``G = Sub⁺`` for Algorithm 4), every query row ``w`` in the row space of ``T`` is
``w = (w·a) 1ᵀ + (w G) Sub``, so:

* privacy cost (Theorem 7.1): ``pcost(M_A) = Π_{i∈A} beta_i / σ²_A`` with
  ``beta_i = max diag(Sub_iᵀ (Γ_i Γ_iᵀ)⁻¹ Sub_i)`` (exact: the diagonal of a Kronecker product
  is the product of the diagonals, each maximized at its own value);
* variance of a generalized marginal ``Q_Ã = ⊗_{i∈Ã} W_i ⊗_{i∉Ã} 1ᵀ`` (Theorem 7.2):
  ``Cov = Σ_{A⊆Ã} σ²_A ⊗_i Ψ_{A,i} Ψ_{A,i}ᵀ`` with ``Ψ = W G Γ`` (i ∈ A),
  ``Ψ = W a`` (i ∈ Ã∖A), ``Ψ = 1`` (i ∉ Ã).  Hence the sum of variances is
  ``Σ_A σ²_A Π_{i∈A} trace_in_i Π_{j∈Ã∖A} trace_out_j`` and the query variances are
  ``Σ_A σ²_A ⊗_{i∈A} diag_in_i ⊗_{j∈Ã∖A} diag_out_j``.

For ``S = I`` (categorical attribute, identity workload) both constructions are exactly
ResidualPlanner: ``Sub = Γ = Sub_n``, ``beta = (n-1)/n``, ``trace_in = n-1``, ``trace_out = 1/n``,
``diag_in = (n-1)/n``, ``diag_out = 1/n²``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .._linalg.attribute_queries import validate_query_matrix
from .._linalg.kron import is_identity
from .._linalg.structured import Centring, Identity, Subtraction, SubtractionPinv
from ..errors import WorkloadError

CONSTRUCTIONS = ("centred", "split")

__all__ = [
    "CONSTRUCTIONS",
    "construction_name",
    "subtraction_matrix",
    "subtraction_pinv",
    "psd_cholesky",
    "subtraction_and_gamma",
    "AttributeBasis",
    "attribute_basis",
    "identity_basis",
    "IdentityBasis",
    "is_identity",
]


@dataclass(frozen=True, eq=False)
class AttributeBasis:
    """Per-attribute factors of ResidualPlanner+ for one ``(W, S)`` pair (arrays read-only).

    Attributes
    ----------
    n : domain size of the attribute.
    W, S : the base workload (``m × n``) and the strategy replacement (``k × n``).
    Sub : ``r × n`` subtraction matrix (Algorithm 4: ``Sub 1 = 0``; split: ``Subᵀ Sub =
        SᵀS − c 11ᵀ``, see :mod:`dpmatrix._mechanisms.basis`).
    Gamma : noise factor; the residual noise covariance factor is ``Gamma Gammaᵀ`` (``r × r``).
    Sub_inv : ``G``, ``n × r``: with ``total_inv`` the (pseudo-)inverse ``[a, G]`` of
        ``[1ᵀ; Sub]`` (reconstruction, Algorithm 6); ``Sub⁺`` for Algorithm 4.
    total_inv : ``a``, length ``n``: how the total ``1ᵀx`` enters the cells; ``1/n`` for
        Algorithm 4.
    beta : Theorem 7.1 privacy-cost factor, ``max diag(Subᵀ (Γ Γᵀ)⁻¹ Sub)``.
    resid_cov : ``n × n`` matrix ``G Γ Γᵀ Gᵀ`` — covariance, per unit σ², of the
        reconstructed data-space vector from this attribute's residual.
    trace_in : ``||W G Γ||_F²`` (attribute in the residual set).
    trace_out : ``||W a||²`` (attribute in the query but not in the residual set;
        ``||W 1||² / n²`` for Algorithm 4).
    diag_in : ``diag(W G Γ Γᵀ Gᵀ Wᵀ)`` (length m).
    diag_out : ``(W a)²`` (length m).
    construction : ``"centred"`` (Algorithm 4) or ``"split"``.
    """

    n: int
    W: np.ndarray
    S: np.ndarray
    Sub: np.ndarray
    Gamma: np.ndarray
    Sub_inv: np.ndarray
    total_inv: np.ndarray
    beta: float
    resid_cov: np.ndarray
    trace_in: float
    trace_out: float
    diag_in: np.ndarray
    diag_out: np.ndarray
    construction: str = "centred"

    @property
    def r(self) -> int:
        """Number of rows of ``Sub`` (dimension of this attribute's residual)."""
        return int(self.Sub.shape[0])

    @property
    def m(self) -> int:
        """Number of queries (rows) of ``W``."""
        return int(self.W.shape[0])

    @property
    def n_noise(self) -> int:
        """Number of standard normal draws per value of this attribute (columns of ``Gamma``)."""
        return int(self.Gamma.shape[1])

    @cached_property
    def is_identity(self) -> bool:
        """True for ResidualPlanner's plain-marginal basis (W = S = I, see :func:`is_identity`)."""
        return is_identity(self.W) and is_identity(self.S)

    @property
    def uniform_total(self) -> bool:
        """True when the total enters every cell equally (``a = 1/n``: Algorithm 4, RP — the
        identity basis is built as "centred" by either construction)."""
        return self.construction == "centred"


def subtraction_matrix(n: int) -> np.ndarray:
    """ResidualPlanner's ``Sub_n`` (section 4.2): ``(n-1) × n``, first column 1, ``(i, i+1) = -1``."""
    n = int(n)
    if n < 1:
        raise WorkloadError(f"attribute size must be positive, got {n}")
    return np.hstack([np.ones((n - 1, 1)), -np.eye(n - 1)])


def subtraction_pinv(n: int) -> np.ndarray:
    """Closed-form pseudo-inverse of ``Sub_n``: ``(1/n) [1ᵀ; 11ᵀ - n I]`` (``n × (n-1)``)."""
    n = int(n)
    top = np.ones((1, n - 1))
    bottom = np.ones((n - 1, n - 1)) - n * np.eye(n - 1)
    return np.vstack([top, bottom]) / n


def psd_cholesky(M: np.ndarray, rtol: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
    """Pivot-free Cholesky of a symmetric PSD (possibly singular) matrix.

    Returns ``(L, kept)``: ``L`` lower-triangular with ``L Lᵀ ≈ M`` and ``kept`` the boolean
    mask of columns whose pivot was above ``rtol · max(diag M)``; columns with a (near-)zero
    pivot are set to zero and skipped (for a PSD matrix a zero pivot forces the whole
    remaining column to zero, so nothing is lost).  ``L[:, kept]`` has full column rank.
    """
    M = np.asarray(M, dtype=float)
    n = M.shape[0]
    L = np.zeros((n, n))
    kept = np.zeros(n, dtype=bool)
    tol = rtol * max(float(np.max(np.diag(M))) if n else 0.0, np.finfo(float).tiny)
    for j in range(n):
        d = M[j, j] - L[j, :j] @ L[j, :j]
        if d <= tol:
            continue
        piv = np.sqrt(d)
        L[j, j] = piv
        L[j + 1 :, j] = (M[j + 1 :, j] - L[j + 1 :, :j] @ L[j, :j]) / piv
        kept[j] = True
    return L, kept


def construction_name(construction: str) -> str:
    """Canonical name of a residual construction (``"centered"`` is accepted for ``"centred"``)."""
    name = str(construction).lower()
    name = {"centered": "centred", "algorithm4": "centred"}.get(name, name)
    if name not in CONSTRUCTIONS:
        raise WorkloadError(
            f"unknown residual construction {construction!r}; use 'centred' (the paper's "
            "Algorithm 4) or 'split' (the strategy's total measured separately, nothing lost)"
        )
    return name


def _factor_rows(M: np.ndarray, rank: int) -> np.ndarray:
    """``Sub`` (``rank × n``) with ``Subᵀ Sub = M`` for a symmetric PSD ``M`` of the given rank:
    the non-zero columns of a pivot-free Cholesky factor (an eigen-factor if the Cholesky
    threshold mis-classified a pivot of a badly conditioned ``M``)."""
    M = (M + M.T) / 2
    L, kept = psd_cholesky(M)
    P2 = L[:, kept]
    if P2.shape[1] != rank or (rank and not np.allclose(P2 @ P2.T, M, rtol=1e-7, atol=1e-9 * max(1.0, np.abs(M).max()))):
        w, V = np.linalg.eigh(M)
        idx = np.argsort(w)[::-1][:rank]
        P2 = V[:, idx] * np.sqrt(np.maximum(w[idx], 0.0))
    return P2.T.copy()


def subtraction_and_gamma(S, construction: str = "centred") -> tuple[np.ndarray, np.ndarray]:
    """Subtraction matrix ``Sub`` and noise factor ``Γ`` from a strategy ``S``.

    * ``S`` the identity → ``(Sub_n, Sub_n)`` (ResidualPlanner, section 4.2), either construction.
    * ``"centred"`` (Algorithm 4): ``P1 = S - S 1 1ᵀ / n``; Cholesky ``P1ᵀ P1 = L Lᵀ``
      (pivot-free, skipping the zero pivots that the null vector ``1`` forces); ``P2`` = the
      linearly independent (non-zero) columns of ``L``; ``Sub = P2ᵀ`` (``r × n``), ``Γ = I_r``.
      So ``Subᵀ Sub = P1ᵀ P1``: measuring ``Sub x + N(0, σ² I)`` is equivalent to measuring
      the centred strategy ``P1 x + N(0, σ² I)`` (same Fisher information), with ``r = rank P1``
      linearly independent rows.
    * ``"split"``: ``P = SᵀS``, ``c = 1/(1ᵀ P⁺ 1)``, ``Subᵀ Sub = P − c 11ᵀ`` (Cholesky as
      above, ``r = rank S − 1``), ``Γ = I_r``. Needs ``1`` in the row space of ``S``.
    """
    name = construction_name(construction)
    S = np.asarray(S, dtype=float)
    if S.ndim != 2 or S.shape[1] < 1:
        raise WorkloadError(f"strategy must be a 2-D matrix with one column per value; got shape {S.shape}")
    if not np.all(np.isfinite(S)):
        raise WorkloadError("strategy matrix contains non-finite entries (NaN or inf)")
    n = S.shape[1]
    if is_identity(S):
        Sub = subtraction_matrix(n)
        return Sub, Sub.copy()
    if name == "centred":
        P1 = S - np.outer(S @ np.ones(n), np.ones(n)) / n
        rank = np.linalg.matrix_rank(P1) if P1.size else 0
        Sub = _factor_rows(P1.T @ P1, rank)
        return Sub, np.eye(Sub.shape[0])
    P = S.T @ S
    Pp = np.linalg.pinv(P, rcond=1e-12, hermitian=True)
    ones = np.ones(n)
    u = Pp @ ones
    if np.linalg.norm(P @ u - ones) > 1e-8 * np.sqrt(n):
        raise WorkloadError(
            "the split residual construction needs a strategy whose rows span the total (the "
            "all-ones row); add the total to the strategy or use construction='centred'"
        )
    c = 1.0 / float(ones @ u)
    rank = np.linalg.matrix_rank(S) - 1
    Sub = _factor_rows(P - c * np.ones((n, n)), rank)
    return Sub, np.eye(Sub.shape[0])


def _ro(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=float)
    a.setflags(write=False)
    return a


def _build(W: np.ndarray, S: np.ndarray, construction: str) -> AttributeBasis:
    n = W.shape[1]
    Sub, Gamma = subtraction_and_gamma(S, construction)
    r = Sub.shape[0]
    ones = np.ones(n)
    # for S = I both constructions are ResidualPlanner's (Sub 1 = 0): labelled "centred"
    centred = construction == "centred" or is_identity(S)
    if centred:
        # Sub 1 = 0: [1ᵀ; Sub]⁺ = [1/n, Sub⁺]
        if r == 0:
            G = np.zeros((n, 0))
        elif is_identity(S):
            G = subtraction_pinv(n)
        else:
            G = np.linalg.pinv(Sub)
        a = np.full(n, 1.0 / n)
        Wc = W - np.outer(W @ ones, ones) / n
        back = Wc @ G @ Sub if r else np.zeros_like(Wc)
        err = np.linalg.norm(Wc - back)
    else:
        Tp = np.linalg.pinv(np.vstack([ones, Sub]))
        a, G = Tp[:, 0].copy(), Tp[:, 1:].copy()
        err = np.linalg.norm(W - np.outer(W @ a, ones) - W @ G @ Sub)
    # W must be answerable: every query must lie in the row space of [1ᵀ; Sub]
    if err > 1e-8 * max(1.0, np.linalg.norm(W)):
        raise WorkloadError(
            "strategy does not support the workload: some query, after removing its total "
            f"component, is not in the row space of the strategy (residual {err:.3g}); use a "
            "strategy S whose rows span every query (W = W S⁺ S), e.g. the identity or W itself"
        )
    GGt = Gamma @ Gamma.T
    if r:
        beta = float(np.max(np.diag(Sub.T @ np.linalg.solve(GGt, Sub))))
    else:
        beta = 0.0
    Psi = W @ G @ Gamma
    resid_cov = G @ GGt @ G.T
    if centred:
        w1 = W @ ones
        wa = w1 / n
        trace_out = float(w1 @ w1) / n**2
    else:
        wa = W @ a
        trace_out = float(wa @ wa)
    return AttributeBasis(
        n=n,
        W=_ro(W),
        S=_ro(S),
        Sub=_ro(Sub),
        Gamma=_ro(Gamma),
        Sub_inv=_ro(G),
        total_inv=_ro(a),
        beta=beta,
        resid_cov=_ro((resid_cov + resid_cov.T) / 2),
        trace_in=float(np.sum(Psi**2)),
        trace_out=trace_out,
        diag_in=_ro(np.sum(Psi**2, axis=1)),
        diag_out=_ro(wa**2),
        construction="centred" if centred else "split",
    )


@functools.lru_cache(maxsize=256)
def _cached(wshape, wbytes, sshape, sbytes, construction) -> AttributeBasis:
    W = np.frombuffer(wbytes, dtype=float).reshape(wshape).copy()
    S = np.frombuffer(sbytes, dtype=float).reshape(sshape).copy()
    return _build(W, S, construction)


def attribute_basis(W, S=None, construction: str = "centred") -> AttributeBasis:
    """Per-attribute ResidualPlanner+ factors for base workload ``W`` and strategy ``S``.

    ``S`` defaults to ``W`` (paper section 7.4: "if S_i is missing, we set S_i = W_i").
    ``construction``: ``"centred"`` (Algorithm 4, default) or ``"split"`` (module docstring).
    Results are cached on the bytes of the two matrices; the returned arrays are read-only.
    Raises :class:`WorkloadError` if a matrix is malformed or ``S`` cannot answer ``W``.
    """
    Wa = np.asarray(W, dtype=float) if not isinstance(W, np.ndarray) else W.astype(float, copy=False)
    if Wa.ndim != 2:
        raise WorkloadError(f"workload matrix must be 2-D; got shape {Wa.shape}")
    Wa = validate_query_matrix(Wa, Wa.shape[1], name="workload matrix W")
    Sa = Wa if S is None else np.asarray(S, dtype=float)
    if Sa.ndim != 2 or Sa.shape[1] != Wa.shape[1]:
        raise WorkloadError(
            f"strategy matrix must be 2-D with {Wa.shape[1]} columns (one per value); got shape {Sa.shape}"
        )
    if not np.all(np.isfinite(Sa)):
        raise WorkloadError("strategy matrix contains non-finite entries (NaN or inf)")
    Wa = np.ascontiguousarray(Wa)
    Sa = np.ascontiguousarray(Sa)
    return _cached(Wa.shape, Wa.tobytes(), Sa.shape, Sa.tobytes(), construction_name(construction))


class IdentityBasis:
    """ResidualPlanner's basis of a plain (identity-workload) attribute of size ``n``, in O(n).

    The same quantities as :func:`attribute_basis` of ``(I_n, I_n)`` (tested against it), from
    closed forms: with ``Sub = Γ = Sub_n`` and ``G = Sub_n⁺`` (section 4.2), ``Sub⁺ Sub = K =
    I − 11ᵀ/n`` (the centring projection), so ``β = max diag(K) = (n−1)/n``, the reconstructed
    residual covariance per unit σ² is ``resid_cov = K``, ``W G Γ = K`` gives
    ``trace_in = ||K||_F² = n − 1`` and ``diag_in = (n−1)/n``, and the total enters every cell as
    ``a = 1/n`` so ``trace_out = 1/n`` and ``diag_out = 1/n²`` (Theorem 4.4). Planning reads only
    these vectors and scalars. The matrices (``W = S = I``, ``Sub = Γ = Sub_n``, ``Sub_inv =
    Sub_n⁺``, ``resid_cov = K``) are :mod:`structured matrices <dpmatrix._linalg.structured>`:
    they are applied in O(n) per fibre wherever the dense ones were (``kron_apply`` factors,
    ``M @ x``, ``M.T``) and hold no ``n × n`` array; ``numpy.asarray`` expands one on request.
    """

    construction = "centred"
    is_identity = True
    uniform_total = True

    def __init__(self, n: int):
        n = int(n)
        if n < 1:
            raise WorkloadError(f"an attribute needs at least one value, got n={n}")
        self.n = n
        self.beta = (n - 1) / n
        self.trace_in = float(n - 1)
        self.trace_out = 1.0 / n
        self.diag_in = _ro(np.full(n, (n - 1) / n))
        self.diag_out = _ro(np.full(n, 1.0 / n**2))
        self.total_inv = _ro(np.full(n, 1.0 / n))

    @property
    def r(self) -> int:
        return self.n - 1

    @property
    def m(self) -> int:
        return self.n

    @property
    def n_noise(self) -> int:
        return self.n

    @cached_property
    def W(self) -> Identity:
        return Identity(self.n)

    @cached_property
    def S(self) -> Identity:
        return self.W

    @cached_property
    def Sub(self) -> Subtraction:
        return Subtraction(self.n)

    @cached_property
    def Gamma(self) -> Subtraction:
        return self.Sub

    @cached_property
    def Sub_inv(self) -> SubtractionPinv:
        return SubtractionPinv(self.n)

    @cached_property
    def resid_cov(self) -> Centring:
        return Centring(self.n)

    def __repr__(self) -> str:
        return f"IdentityBasis(n={self.n})"


@functools.cache
def identity_basis(n: int) -> IdentityBasis:
    """ResidualPlanner's basis for a plain (identity-workload) attribute of size ``n``.

    ``Sub = Γ = Sub_n`` so the noise is ``σ H z`` with ``z ~ N(0, I_n)`` (Algorithm 1);
    ``β = (n−1)/n``; ``K = I − 11ᵀ/n`` (the centring projection), so the cell-variance factors are
    ``(n−1)/n`` in the residual set and ``1/n²`` outside it (Theorem 4.4). O(n) to build
    (:class:`IdentityBasis`).
    """
    return IdentityBasis(n)
