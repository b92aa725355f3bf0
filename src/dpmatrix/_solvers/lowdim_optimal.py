r"""Optimal low-dimensional matrix mechanism for one sub-workload (QuerySmasher section 6.3, eq. 4).

Problem
-------
Given a sub-workload matrix ``W`` (m × N, one query per row over the N cells of a marginal) and
nonnegative query weights ``D = diag(weights)``, find a Gaussian linear mechanism ``B x + N(0, I)``
with privacy cost ``max diag(BᵀB) ≤ 1`` and ``rowspace(B) ⊇ rowspace(W)`` minimizing the weighted
sum of variances of the reconstructed answers ``q B⁺ (B x + z)``::

    L(B) = Σ_i D_ii ‖W_i B⁺‖²  =  trace(Wᵀ D W V⁺),   V = BᵀB.                          (eq. 4)

Reduction to the row space
--------------------------
Let ``F = D^{1/2} W`` and let ``H`` (N × r) be any full-column-rank factor with ``H Hᵀ = FᵀF``
(from an SVD of ``F`` or an eigendecomposition of ``FᵀF``); its columns span rowspace(W), r = rank.
Restricting to ``V = H Y Hᵀ`` with ``Y ≻ 0`` (r × r) turns eq. 4 into::

    minimize  tr(Y⁻¹)   subject to   d_i(Y) := h_iᵀ Y h_i ≤ 1   (h_i = i-th row of H).   (P)

(``tr(FᵀF V⁺) = tr(H Hᵀ H⁺ᵀ Y⁻¹ H⁺) = tr(Y⁻¹)``.)  The restriction loses nothing: the lower bound
below holds for *every* feasible V of eq. 4, and strong duality for (P) shows it is attained by (P).

Dual and the optimality certificate
-----------------------------------
Lower bound (SVD bound, Li–Miklau style).  For any feasible B (diag(BᵀB) ≤ 1, rowspace ⊇ W) and
any ``w`` on the probability simplex over the N cells::

    ‖D^{1/2} W diag(w)^{1/2}‖_*  =  ‖(D^{1/2} W B⁺) (B diag(w)^{1/2})‖_*        (W B⁺ B = W)
                                 ≤  ‖D^{1/2} W B⁺‖_F · ‖B diag(w)^{1/2}‖_F        (Hölder / Cauchy–Schwarz
                                                                                 for singular values)
                                 =  sqrt(L(B)) · sqrt(Σ_j w_j ‖B_{:,j}‖²)  ≤  sqrt(L(B)),

so ``L* ≥ ‖D^{1/2} W diag(w)^{1/2}‖_*² = (tr A(w)^{1/2})²`` with ``A(w) = Hᵀ diag(w) H`` (the
nonzero eigenvalues of ``A(w)`` are those of ``F diag(w) Fᵀ``).

The same quantity is the Lagrange dual of (P): with multipliers ``w ≥ 0`` on the N constraints,
``inf_Y tr(Y⁻¹) + tr(Y A(w)) − Σw`` is attained at ``Y = A(w)^{-1/2}`` and equals
``g(w) = 2 tr A(w)^{1/2} − Σ_j w_j``; maximizing ``g(t w)`` over ``t > 0`` gives
``(tr A(w)^{1/2})² / Σ_j w_j``, the bound above.  ``g`` is concave (tr √· is operator concave and
A is linear in w), (P) is strictly feasible, so max g = L* (strong duality).  ``∂g/∂w_j =
d_j(A(w)^{-1/2}) − 1``: the KKT conditions are exactly primal feasibility ``d ≤ 1`` with equality
on the support of w.

Primal from dual: for any w, ``Y(w) = A(w)^{-1/2}`` scaled by ``1 / max_j d_j`` is feasible, with
loss ``tr A(w)^{1/2} · max_j d_j``.  With s = tr A^{1/2} and Σ_j w_j d_j = s this gives

    upper(w) / lower(w) = max_j d_j / (Σ_j w_j d_j / Σ_j w_j),

the classical equivalence-theorem ratio of optimal design.  Both bounds are rigorous for every w
we evaluate; we keep the best of each and stop when ``(upper − lower) / upper ≤ tol``.

Algorithm
---------
1. *Multiplicative (fixed-point) phase*: ``w ← w ∘ d(w)^λ / Σ`` with λ = 2, halving λ whenever
   the lower bound decreases.  When the optimum has (near) full support — prefix, range, random,
   marginal sub-workloads — this reaches 1e-3 in a handful of iterations.
2. If the gap stalls (shrinks by less than half per step, typical when the optimal w is sparse
   and off-support cells have d_j close to the max, e.g. affine / abs queries), switch to
   L-BFGS-B on the smooth concave dual ``max_{w ≥ 0} g(w)`` (box constraints only), warm-started
   at the best w, restarted from the best point if the line search gives up.
Each evaluation costs one r × r eigendecomposition plus two N × r × r products.  No generic SDP
solver is used.  The returned mechanism is built from the w with the best upper bound:
``B = Λ^{-1/4} Qᵀ Hᵀ / sqrt(max_j d_j)`` (r × N, ``A(w) = Q Λ Qᵀ``), so ``BᵀB = H A^{-1/2} Hᵀ /
max d`` and ``max diag(BᵀB) = 1`` (up to rounding).

Weights equal to zero: the query must still be answerable (rowspace constraint) but costs nothing,
so the infimum is not attained.  We give such rows the weight ``zero_weight × mean positive weight``
(default 1e-9); the certificate is then exact for those slightly perturbed weights.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import PlanError, WorkloadError
from .cache import LRUCache, array_digest
from .result import SolverResult

__all__ = [
    "LowDimMechanism",
    "optimize_subworkload",
    "svd_lower_bound",
    "strategy_loss",
    "clear_cache",
]


# --------------------------------------------------------------------------------------------
# Result type
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, kw_only=True)
class LowDimMechanism(SolverResult):
    """A Gaussian linear mechanism ``B x + N(0, I)`` for one sub-workload, at privacy cost ``pcost``.

    ``B`` (= ``solution``) is (r × N), ``Bpinv`` its pseudo-inverse (N × r).  ``loss``
    (= ``objective``) is the weighted sum of the variances of the sub-workload queries at noise
    covariance I (privacy cost ``pcost`` = 1); scaling the noise by σ² multiplies variances by
    σ² and divides the privacy cost by σ².  ``lower_bound`` is the certified lower bound on the
    optimum of eq. 4 and ``gap = (loss − lower_bound) / loss``.  ``dual_weights`` is the
    certificate: a distribution w over the cells with
    ``svd_lower_bound(W, weights, dual_weights) == lower_bound``.  ``iterations`` counts dual
    evaluations (one r × r eigendecomposition each).  ``converged`` is ``status == "optimal"``
    (else ``"max_iter"`` when the evaluation budget ran out, ``"stalled"`` when the ascent
    stopped improving first).
    """

    Bpinv: np.ndarray
    pcost: float
    method: str = "dual-multiplicative"
    dual_weights: np.ndarray | None = field(default=None, repr=False)

    @property
    def B(self) -> np.ndarray:
        return self.solution

    @property
    def loss(self) -> float:
        return self.objective

    @property
    def converged(self) -> bool:
        return self.status == "optimal"

    @property
    def n_cells(self) -> int:
        return int(self.B.shape[1])

    @property
    def rank(self) -> int:
        return int(self.B.shape[0])

    def _as_queries(self, q: np.ndarray) -> tuple[np.ndarray, bool]:
        q = np.asarray(q, dtype=float)
        one = q.ndim == 1
        q2 = np.atleast_2d(q)
        if q2.ndim != 2 or q2.shape[1] != self.n_cells:
            raise WorkloadError(
                f"query must have {self.n_cells} entries (one per cell), got shape {q.shape}"
            )
        return q2, one

    def variance(self, q: np.ndarray) -> float | np.ndarray:
        """Variance ``q B⁺ B⁺ᵀ qᵀ`` of the reconstructed answer at noise N(0, I).

        ``q``: (N,) → float, or (m, N) → (m,) array.  Valid for q in rowspace(B) (e.g. any
        query of the sub-workload); for other q the reconstruction is biased.
        """
        Q, one = self._as_queries(q)
        R = Q @ self.Bpinv
        v = np.einsum("ij,ij->i", R, R)
        return float(v[0]) if one else v

    def covariance(self, Q: np.ndarray) -> np.ndarray:
        """Covariance matrix ``Q B⁺ B⁺ᵀ Qᵀ`` of the reconstructed answers to the rows of Q."""
        Q2, _ = self._as_queries(Q)
        R = Q2 @ self.Bpinv
        return R @ R.T

    def reconstruct(self, q: np.ndarray, omega: np.ndarray) -> float | np.ndarray:
        """Unbiased answer ``q B⁺ ω`` from the noisy measurement ``ω = B x + noise`` (length r).

        ``q`` (N,) or (m, N); ``omega`` (r,) or (r, k) for k independent measurements.
        """
        Q, one = self._as_queries(q)
        om = np.asarray(omega, dtype=float)
        if om.shape[0] != self.rank:
            raise WorkloadError(f"omega must have {self.rank} rows (one per strategy query), got {om.shape}")
        out = Q @ (self.Bpinv @ om)
        return out[0] if one else out

    def in_rowspace(self, q: np.ndarray, rtol: float = 1e-8, atol: float = 1e-12) -> bool | np.ndarray:
        """Whether q is (numerically) answerable without bias: ``‖q − q B⁺ B‖ ≤ rtol ‖q‖ + atol``."""
        Q, one = self._as_queries(q)
        res = np.linalg.norm(Q - (Q @ self.Bpinv) @ self.B, axis=1)
        ok = res <= rtol * np.linalg.norm(Q, axis=1) + atol
        return bool(ok[0]) if one else ok


# --------------------------------------------------------------------------------------------
# Certificates / evaluation helpers (usable independently of the solver, e.g. in tests)
# --------------------------------------------------------------------------------------------


def svd_lower_bound(W: np.ndarray, weights: np.ndarray | None = None, w: np.ndarray | None = None) -> float:
    """``‖D^{1/2} W diag(w)^{1/2}‖_*²`` for a cell distribution ``w`` (default uniform).

    A lower bound on the weighted sum of variances of any mechanism with privacy cost ≤ 1 that
    answers W (see module docstring).  ``w`` is normalized to sum 1.
    """
    W, d = _validate(W, weights)
    N = W.shape[1]
    w = np.full(N, 1.0 / N) if w is None else np.asarray(w, dtype=float)
    if w.shape != (N,) or np.any(w < 0) or not np.all(np.isfinite(w)) or w.sum() <= 0:
        raise WorkloadError("w must be a nonnegative finite vector over the cells with positive sum")
    w = w / w.sum()
    M = np.sqrt(d)[:, None] * W * np.sqrt(w)[None, :]
    return float(np.linalg.svd(M, compute_uv=False).sum() ** 2)


def strategy_loss(B: np.ndarray, W: np.ndarray, weights: np.ndarray | None = None) -> tuple[float, float]:
    """(pcost, loss at privacy cost 1) of an arbitrary strategy B for workload W.

    ``pcost = max diag(BᵀB)``; the loss at privacy cost 1 is ``pcost · Σ_i D_ii ‖W_i B⁺‖²``
    (scaling noise so the cost is 1).  Raises if some row of W is not in rowspace(B).
    """
    W, d = _validate(W, weights)
    B = np.asarray(B, dtype=float)
    Bp = np.linalg.pinv(B)
    R = W @ Bp
    resid = np.linalg.norm(W - R @ B, axis=1)
    if np.any(resid > 1e-8 * np.maximum(np.linalg.norm(W, axis=1), 1.0)):
        raise WorkloadError("some workload rows are not in the row space of the strategy B")
    pcost = float(np.max(np.einsum("ij,ij->j", B, B)))
    return pcost, pcost * float(np.sum(d * np.einsum("ij,ij->i", R, R)))


# --------------------------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------------------------


def _validate(W, weights) -> tuple[np.ndarray, np.ndarray]:
    W = np.asarray(W, dtype=float)
    if W.ndim == 1:
        W = W[None, :]
    if W.ndim != 2 or W.shape[0] == 0 or W.shape[1] == 0:
        raise WorkloadError(f"W must be a non-empty 2-d matrix (queries × cells), got shape {W.shape}")
    if not np.all(np.isfinite(W)):
        raise WorkloadError("W contains NaN or infinite entries")
    if weights is None:
        d = np.ones(W.shape[0])
    else:
        d = np.asarray(weights, dtype=float).reshape(-1)
        if d.shape[0] != W.shape[0]:
            raise WorkloadError(f"weights has {d.shape[0]} entries but W has {W.shape[0]} rows")
        if not np.all(np.isfinite(d)):
            raise WorkloadError("weights contain NaN or infinite entries")
        if np.any(d < 0):
            raise WorkloadError("weights must be nonnegative (got a negative query weight)")
    return W, d


def _check_residual(W: np.ndarray, sizes: tuple[int, ...], atol: float) -> None:
    N = int(np.prod(sizes, dtype=np.int64)) if sizes else 1
    if W.shape[1] != N:
        raise WorkloadError(f"W has {W.shape[1]} columns but sizes {sizes} have {N} cells")
    if not sizes:
        return
    T = W.reshape((W.shape[0],) + sizes)
    scale = max(1.0, float(np.max(np.abs(W))))
    for ax, n in enumerate(sizes):
        s = np.abs(T.sum(axis=1 + ax)).max()
        if s > atol * scale * n:
            raise WorkloadError(
                f"W rows are not in the residual space of sizes {sizes}: they do not sum to zero "
                f"along attribute position {ax} (max |sum| = {s:.3g}); decompose the queries first"
            )


# --------------------------------------------------------------------------------------------
# Solver core
# --------------------------------------------------------------------------------------------


def _factor(F: np.ndarray, sizes: tuple[int, ...] | None) -> np.ndarray:
    """N × r factor H = V_r Σ_r from the thin SVD of F, so H Hᵀ = FᵀF; r = numerical rank.

    The SVD of F (not an eigendecomposition of FᵀF) keeps singular directions with small
    singular values accurate, which matters for the row-space constraint.  If ``sizes`` is given
    the columns are re-centred along every attribute, so that B's rows lie in the residual space to
    rounding precision.
    """
    m, N = F.shape
    eps = np.finfo(float).eps
    _, sv, Vt = np.linalg.svd(F, full_matrices=False)
    if sv.size == 0 or sv[0] <= 0:
        return np.zeros((N, 0))
    keep = sv > sv[0] * max(m, N) * eps * 10
    H = Vt[keep].T * sv[keep]
    if sizes:
        T = H.T.reshape((H.shape[1],) + sizes)
        for ax in range(1, T.ndim):
            T = T - T.mean(axis=ax, keepdims=True)
        H = T.reshape(H.shape[1], N).T
    return H


class _Dual:
    """Evaluates the dual at w: s = tr A^{1/2}, d = diag(H A^{-1/2} Hᵀ); tracks best bounds."""

    def __init__(self, H: np.ndarray):
        self.H = H
        self.evals = 0
        self.best_upper = math.inf
        self.best_upper_w: np.ndarray | None = None
        self.best_upper_eig: tuple[np.ndarray, np.ndarray] | None = None
        self.best_lower = 0.0
        self.best_lower_w: np.ndarray | None = None

    def __call__(self, w: np.ndarray) -> tuple[float, np.ndarray, float, float]:
        self.evals += 1
        H = self.H
        A = (H.T * w) @ H
        lam, Q = np.linalg.eigh(A)
        lam_pos = np.maximum(lam, 0.0)
        # Lower bound: shrink each computed eigenvalue by a backward-error allowance (eigh is
        # backward stable: |λ̂ − λ| ≤ p(r)·eps·‖A‖) so rounding can never inflate the certificate.
        lmax0 = float(lam_pos.max()) if lam_pos.size else 0.0
        slack = 10.0 * max(len(lam), 1) * np.finfo(float).eps * lmax0
        s_cert = float(np.sqrt(np.maximum(lam - slack, 0.0)).sum())
        s_true = float(np.sqrt(lam_pos).sum())
        tw = float(w.sum())
        lower = s_cert * s_cert / tw if tw > 0 else 0.0
        # Y = Q diag(lamc^{-1/2}) Qᵀ with eigenvalues clipped away from 0: a valid PD matrix, so the
        # upper bound tr(Y^{-1}) · max d computed with the *same* clipped values is rigorous.
        lmax = float(lam_pos.max()) if lam_pos.size else 0.0
        lamc = np.maximum(lam_pos, max(lmax, 1e-300) * 1e-13)
        Z = (H @ Q) * lamc ** -0.25
        d = np.einsum("ij,ij->i", Z, Z)
        s_c = float(np.sqrt(lamc).sum())
        dmax = float(d.max())
        upper = s_c * dmax
        if upper < self.best_upper:
            self.best_upper, self.best_upper_w = upper, w.copy()
            self.best_upper_eig = (lamc, Q)  # reused to build B without another eigh
        if lower > self.best_lower:
            self.best_lower, self.best_lower_w = lower, w.copy()
        return s_true, d, lower, upper

    def gap(self) -> float:
        if not math.isfinite(self.best_upper) or self.best_upper <= 0:
            return math.inf
        return (self.best_upper - self.best_lower) / self.best_upper


class _Converged(Exception):
    pass


def _solve_dual(H: np.ndarray, tol: float, max_iter: int) -> tuple[_Dual, float, int, str]:
    """Returns (dual tracker on c·H, c, dual evaluations used, method); bounds scale by 1/c².

    ``max_iter`` caps the number of dual evaluations (one r × r eigendecomposition each).
    """
    from scipy.optimize import Bounds, minimize  # the numerical solve only (closed forms need none)

    N, r = H.shape
    # Normalize so that the optimal scaling of the uniform start has entries ≈ 1.
    u = np.full(N, 1.0 / N)
    s0 = float(np.sqrt(np.maximum(np.linalg.eigvalsh((H.T * u) @ H), 0.0)).sum())
    c = math.sqrt(N) / s0
    Hn = H * c
    dual = _Dual(Hn)

    # Phase 1: multiplicative updates on the simplex.
    w = u.copy()
    lam_exp = 2.0
    prev_gap = math.inf
    prev_lower = -math.inf
    stalls = 0
    w_prev = w
    while dual.evals < max_iter:
        s, d, lower, _ = dual(w)
        g = dual.gap()
        if g <= tol:
            return dual, c, dual.evals, "dual-multiplicative"
        if lower < prev_lower * (1 - 1e-12):  # overshoot: back off
            lam_exp /= 2.0
            w = w_prev
            if lam_exp < 0.25:
                break
            s, d, lower, _ = dual(w)
        else:
            stalls = stalls + 1 if g > 0.5 * prev_gap else 0
            prev_gap = min(prev_gap, g)
            prev_lower = lower
            if stalls >= 2:
                break
        w_prev = w
        # w · d^λ / Σ  (computed in logs for safety; d > 0 always)
        lw = np.log(np.maximum(w, 1e-300)) + lam_exp * np.log(np.maximum(d / d.max(), 1e-300))
        w = np.exp(lw - lw.max())
        w /= w.sum()

    # Phase 2: L-BFGS-B on max_{w ≥ 0} 2 tr A(w)^{1/2} − Σ w  (box constraints only).
    method = "dual-multiplicative+lbfgsb"
    x0 = dual.best_upper_w if dual.best_upper_w is not None else u
    remaining = max_iter - dual.evals

    def fun(x):
        s, d, _, _ = dual(x)
        if dual.gap() <= tol:
            raise _Converged
        return -(2.0 * s - x.sum()), -(d - 1.0)

    restarts = 0
    while remaining > 0 and restarts < 5:
        # warm start at the best w scaled optimally: g(t x) is maximal at t = s(x)² / (Σx)²
        s_b, _, _, _ = dual(x0)
        x0 = x0 * (s_b * s_b / x0.sum() / x0.sum()) if x0.sum() > 0 else x0
        before = dual.evals
        try:
            minimize(
                fun, x0, jac=True, method="L-BFGS-B", bounds=Bounds(np.zeros(N), np.full(N, np.inf)),
                options=dict(maxiter=remaining, maxfun=remaining, maxcor=20, ftol=0.0, gtol=0.0),
            )
        except _Converged:
            return dual, c, dual.evals, method
        used = dual.evals - before
        remaining = max_iter - dual.evals
        restarts += 1
        x0 = dual.best_upper_w
        if used <= 1:
            break
    return dual, c, dual.evals, method


def _build(H: np.ndarray, lamc: np.ndarray, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """B = Λ^{-1/4} Qᵀ Hᵀ / k (r × N), k = sqrt(max d), and B⁺ = k H (HᵀH)⁻¹ Q Λ^{1/4}.

    ``A(w) = Q Λ Qᵀ`` (eigenvalues clipped as in ``_Dual``).  H has orthogonal columns (see
    ``_factor``), so HᵀH is diagonal; C = Λ^{-1/4} Qᵀ / k is invertible and Hᵀ has full row
    rank, hence (C Hᵀ)⁺ = H (HᵀH)⁻¹ C⁻¹.  The result does not depend on the scale of w or H.
    """
    B = ((H @ Q) * lamc ** -0.25).T  # r × N
    k = math.sqrt(float(np.einsum("ij,ij->j", B, B).max()))
    B /= k
    hh = np.einsum("ij,ij->j", H, H)  # diag(HᵀH)
    Bpinv = (H / hh) @ (Q * lamc ** 0.25) * k
    return B, Bpinv


# --------------------------------------------------------------------------------------------
# Public entry point with cache
# --------------------------------------------------------------------------------------------

_CACHE: LRUCache[LowDimMechanism] = LRUCache(256)


def clear_cache() -> None:
    """Forget all cached sub-workload solutions."""
    _CACHE.clear()


def optimize_subworkload(
    W: np.ndarray,
    weights: np.ndarray | Sequence[float] | None = None,
    *,
    sizes: Sequence[int] | None = None,
    check_residual: bool = True,
    tol: float = 1e-3,
    max_iter: int = 2000,
    strict: bool = True,
    zero_weight: float = 1e-9,
    cache: bool = True,
) -> LowDimMechanism:
    """Solve eq. 4 for the sub-workload ``W`` (m × N) with query ``weights`` (default all 1).

    ``sizes``: domain sizes of the attributes of the residual space (C order, Π sizes = N); if
    given and ``check_residual``, every row of W must sum to zero along every attribute (W lies in
    the residual space) or ``WorkloadError`` (a ``ValueError``) is raised.  ``sizes=()`` is the
    total-count space (N = 1).

    Stops when the certified relative gap ``(loss − lower_bound) / loss ≤ tol``.  If ``max_iter``
    dual evaluations are used first: raises ``PlanError`` when ``strict`` else returns the best
    mechanism found with ``converged=False``.  Solutions are cached by (sizes, bytes of WᵀDW,
    tol); identical sub-workloads are solved once.
    """
    W, d = _validate(W, weights)
    if not (tol > 0 and math.isfinite(tol)):
        raise WorkloadError(f"tol must be a positive finite number, got {tol}")
    if max_iter < 1:
        raise WorkloadError(f"max_iter must be at least 1, got {max_iter}")
    sz = None if sizes is None else tuple(int(s) for s in sizes)
    if sz is not None:
        if any(s < 1 for s in sz):
            raise WorkloadError(f"sizes must be positive integers, got {sz}")
        if check_residual:
            _check_residual(W, sz, atol=1e-9)
        elif W.shape[1] != (int(np.prod(sz)) if sz else 1):
            raise WorkloadError(f"W has {W.shape[1]} columns but sizes {sz} have {int(np.prod(sz))} cells")

    pos = d[d > 0]
    d_eff = d.copy()
    if pos.size < d.size:
        d_eff[d == 0] = zero_weight * (pos.mean() if pos.size else 1.0)
    N = W.shape[1]
    F = np.sqrt(d_eff)[:, None] * W
    G = F.T @ F
    scale = float(np.abs(G).max())
    if scale == 0.0:  # all-zero workload: nothing to measure
        return LowDimMechanism(
            solution=np.zeros((0, N)), Bpinv=np.zeros((N, 0)), pcost=0.0, objective=0.0,
            lower_bound=0.0, gap=0.0, iterations=0, status="optimal", method="empty",
        )
    # The solution depends on WᵀDW only, and is invariant to scaling it (losses scale).  Key on
    # the normalized Gram rounded to 11 decimals, so row order / rounding noise still hit.
    Gn = np.round(G / scale, 11) + 0.0
    key = (sz, N, array_digest(Gn), tol)
    mech = _CACHE.get(key) if cache else None
    if mech is None:
        Fn = F / math.sqrt(scale)
        H = _factor(Fn, sz)
        dual, c, iters, method = _solve_dual(H, tol, max_iter)
        lamc, Q = dual.best_upper_eig
        B, Bpinv = _build(H, lamc, Q)
        pcost = float(np.max(np.einsum("ij,ij->j", B, B)))
        R = Fn @ Bpinv
        loss = pcost * float(np.einsum("ij,ij->", R, R))
        lower = min(dual.best_lower / (c * c), loss)
        gap = (loss - lower) / loss if loss > 0 else 0.0
        converged = gap <= tol * (1 + 1e-6) + 1e-12
        if not converged and strict:
            raise PlanError(
                f"low-dimensional solver did not reach relative gap {tol:g} within {max_iter} "
                f"iterations (loss {loss * scale:.6g}, lower bound {lower * scale:.6g}, gap "
                f"{gap:.3g}); raise max_iter or tol, or pass strict=False to accept the best "
                f"mechanism found"
            )
        wl = dual.best_lower_w / dual.best_lower_w.sum()
        for a in (B, Bpinv, wl):
            a.setflags(write=False)
        status = "optimal" if converged else ("max_iter" if iters >= max_iter else "stalled")
        mech = LowDimMechanism(
            solution=B, Bpinv=Bpinv, pcost=pcost, objective=loss, lower_bound=lower, gap=gap,
            iterations=iters, status=status, method=method, dual_weights=wl,
        )
        if cache and converged:
            _CACHE.put(key, mech)
    return replace(mech, objective=mech.objective * scale, lower_bound=mech.lower_bound * scale)
