"""Per-attribute residual basis of ResidualPlanner+ (paper section 7, Algorithm 4, Thms 7.1/7.2).

For one attribute with base workload ``W`` (``m × n``) and strategy replacement ``S``
(``k × n``), Algorithm 4 builds a *subtraction matrix* ``Sub`` (``r × n``, ``Sub 1 = 0``)
and a noise factor ``Γ`` so that the residual mechanism of an attribute set ``A`` is

    M_A(x) = (⊗_{i∈A} Sub_i ⊗_{i∉A} 1ᵀ) x + N(0, σ²_A ⊗_{i∈A} Γ_i Γ_iᵀ).

Everything the planner needs about the attribute then reduces to a few numbers / vectors,
collected in :class:`AttributeBasis`:

* privacy cost (Theorem 7.1): ``pcost(M_A) = Π_{i∈A} beta_i / σ²_A`` with
  ``beta_i = max diag(Sub_iᵀ (Γ_i Γ_iᵀ)⁻¹ Sub_i)``;
* variance of a generalized marginal ``Q_Ã = ⊗_{i∈Ã} W_i ⊗_{i∉Ã} 1ᵀ`` (Theorem 7.2):
  ``Cov = Σ_{A⊆Ã} σ²_A ⊗_i Ψ_{A,i} Ψ_{A,i}ᵀ`` with ``Ψ = W Sub⁺ Γ`` (i ∈ A),
  ``Ψ = W 1/n`` (i ∈ Ã∖A), ``Ψ = 1`` (i ∉ Ã).  Hence the sum of variances is
  ``Σ_A σ²_A Π_{i∈A} trace_in_i Π_{j∈Ã∖A} trace_out_j`` and the cell variances are
  ``Σ_A σ²_A ⊗_{i∈A} diag_in_i ⊗_{j∈Ã∖A} diag_out_j``.

For ``S = I`` (categorical attribute, identity workload) this is exactly ResidualPlanner:
``Sub = Γ = Sub_n``, ``beta = (n-1)/n``, ``trace_in = n-1``, ``trace_out = 1/n``,
``diag_in = (n-1)/n``, ``diag_out = 1/n²``.
"""

from __future__ import annotations

import functools

import numpy as np

from ..errors import WorkloadError
from ..residual import AttributeBasis, is_identity

__all__ = [
    "subtraction_matrix",
    "subtraction_pinv",
    "psd_cholesky",
    "subtraction_and_gamma",
    "AttributeBasis",
    "attribute_basis",
    "is_identity",
]


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


def subtraction_and_gamma(S) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 4: subtraction matrix ``Sub`` and noise factor ``Γ`` from a strategy ``S``.

    * ``S`` the identity → ``(Sub_n, Sub_n)`` (ResidualPlanner, section 4.2).
    * otherwise ``P1 = S - S 1 1ᵀ / n``; Cholesky ``P1ᵀ P1 = L Lᵀ`` (pivot-free, skipping the
      zero pivots that the null vector ``1`` forces); ``P2`` = the linearly independent
      (non-zero) columns of ``L``; ``Sub = P2ᵀ`` (``r × n``), ``Γ = I_r``.
      So ``Subᵀ Sub = P1ᵀ P1``: measuring ``Sub x + N(0, σ² I)`` is equivalent to measuring
      the centred strategy ``P1 x + N(0, σ² I)`` (same Fisher information), with ``r = rank P1``
      linearly independent rows.
    """
    S = np.asarray(S, dtype=float)
    if S.ndim != 2 or S.shape[1] < 1:
        raise WorkloadError(f"strategy must be a 2-D matrix with one column per value; got shape {S.shape}")
    if not np.all(np.isfinite(S)):
        raise WorkloadError("strategy matrix contains non-finite entries (NaN or inf)")
    n = S.shape[1]
    if is_identity(S):
        Sub = subtraction_matrix(n)
        return Sub, Sub.copy()
    P1 = S - np.outer(S @ np.ones(n), np.ones(n)) / n
    M = P1.T @ P1
    M = (M + M.T) / 2
    L, kept = psd_cholesky(M)
    P2 = L[:, kept]
    r = P2.shape[1]
    # Safety net: the rank must agree with an SVD rank of P1; if the Cholesky threshold
    # mis-classified a pivot (badly conditioned S), fall back to an eigen-factor
    # (still Subᵀ Sub = P1ᵀ P1, Sub 1 = 0, but not triangular).
    rank = np.linalg.matrix_rank(P1) if P1.size else 0
    if r != rank or (r and not np.allclose(P2 @ P2.T, M, rtol=1e-7, atol=1e-9 * max(1.0, np.abs(M).max()))):
        w, V = np.linalg.eigh(M)
        idx = np.argsort(w)[::-1][:rank]
        P2 = V[:, idx] * np.sqrt(np.maximum(w[idx], 0.0))
        r = rank
    Sub = P2.T.copy()
    return Sub, np.eye(r)


def _ro(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=float)
    a.setflags(write=False)
    return a


def _build(W: np.ndarray, S: np.ndarray) -> AttributeBasis:
    n = W.shape[1]
    Sub, Gamma = subtraction_and_gamma(S)
    r = Sub.shape[0]
    if r == 0:
        Sub_pinv = np.zeros((n, 0))
    elif is_identity(S):
        Sub_pinv = subtraction_pinv(n)
    else:
        Sub_pinv = np.linalg.pinv(Sub)
    ones = np.ones(n)
    Wc = W - np.outer(W @ ones, ones) / n
    # W must be answerable: its centred part must lie in the row space of Sub.
    if r:
        back = Wc @ Sub_pinv @ Sub
    else:
        back = np.zeros_like(Wc)
    err = np.linalg.norm(Wc - back)
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
    Psi = W @ Sub_pinv @ Gamma
    resid_cov = Sub_pinv @ GGt @ Sub_pinv.T
    w1 = W @ ones
    return AttributeBasis(
        n=n,
        W=_ro(W),
        S=_ro(S),
        Sub=_ro(Sub),
        Gamma=_ro(Gamma),
        Sub_pinv=_ro(Sub_pinv),
        beta=beta,
        resid_cov=_ro((resid_cov + resid_cov.T) / 2),
        trace_in=float(np.sum(Psi**2)),
        trace_out=float(w1 @ w1) / n**2,
        diag_in=_ro(np.sum(Psi**2, axis=1)),
        diag_out=_ro((w1 / n) ** 2),
    )


@functools.lru_cache(maxsize=256)
def _cached(wshape, wbytes, sshape, sbytes) -> AttributeBasis:
    W = np.frombuffer(wbytes, dtype=float).reshape(wshape).copy()
    S = np.frombuffer(sbytes, dtype=float).reshape(sshape).copy()
    return _build(W, S)


def attribute_basis(W, S=None) -> AttributeBasis:
    """Per-attribute ResidualPlanner+ factors for base workload ``W`` and strategy ``S``.

    ``S`` defaults to ``W`` (paper section 7.4: "if S_i is missing, we set S_i = W_i").
    Results are cached on the bytes of the two matrices; the returned arrays are read-only.
    Raises :class:`WorkloadError` if a matrix is malformed or ``S`` cannot answer ``W``.
    """
    from .attribute_queries import validate_query_matrix

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
    return _cached(Wa.shape, Wa.tobytes(), Sa.shape, Sa.tobytes())
