r"""Max-variance-optimal Gaussian strategy for one small workload (fitness-for-use, Problem 1).

Problem (fitness-for-use, Problem 1; Xiao et al., "Optimizing fitness-for-use of differentially
private linear queries")
------------------------------------------------------------------------------------------------
Given a workload ``W`` (m × n, every row nonzero) and positive variance targets ``c`` (length m),
find a Gaussian linear mechanism ``B x + N(0, I)`` (B is r × n) with privacy cost
``max diag(BᵀB) ≤ 1`` and ``rowspace(B) ⊇ rowspace(W)`` minimizing the largest target-scaled
variance of the generalized-least-squares answers ``w_j B⁺ (B x + z)``::

    t(B) = max_j  w_j (BᵀB)⁺ w_jᵀ / c_j  =  max_j ‖w_j B⁺‖² / c_j.

Equivalently ``t* = min { max_j w_j X⁺ w_jᵀ / c_j : X = BᵀB ⪰ 0, diag X ≤ 1 }``.  Both the
privacy cost and the variances are homogeneous (``B → βB`` multiplies the cost by β² and divides
the variances by β²), so ``t*`` is also the minimal privacy cost (squared sensitivity, the
paper's Δ²) subject to ``var_j ≤ c_j`` — the paper's formulation — and ``t*(W, s·c) = t*(W, c)/s``.
Only ``F₀ = C^{-1/2} W`` (rows ``w_j / √c_j``) matters.

Certified lower bound (weak duality, no minimax theorem needed)
---------------------------------------------------------------
Let ``λ`` be any distribution over the m queries and ``μ`` any distribution over the n cells, and
``M(λ, μ) = (ΛC⁻¹)^{1/2} W diag(μ)^{1/2}`` (Λ = diag λ, C = diag c).  For every feasible B
(``W B⁺ B = W``, ``diag(BᵀB) ≤ 1``)::

    ‖M‖_* = ‖((ΛC⁻¹)^{1/2} W B⁺) (B diag(μ)^{1/2})‖_*
          ≤ ‖(ΛC⁻¹)^{1/2} W B⁺‖_F · ‖B diag(μ)^{1/2}‖_F              (Hölder for singular values)
          = sqrt(Σ_j λ_j var_j / c_j) · sqrt(Σ_i μ_i (BᵀB)_ii)  ≤  sqrt(t(B)) · 1,

so ``t* ≥ ‖M(λ, μ)‖_*²`` for *every* (λ, μ) — the quantity :func:`maxvar_lower_bound` and the
solver report (computed from an SVD with a rounding allowance subtracted from every singular
value, so rounding cannot inflate it).

Duality (why the bound is tight)
--------------------------------
``max_j v_j / c_j = max_{λ ∈ simplex} Σ_j λ_j v_j / c_j``, and ``f(X, λ) = tr(Wᵀ Λ C⁻¹ W X⁺)`` is
linear in λ and convex in X on ``{X ⪰ 0, diag X ≤ 1, range X ⊇ rowspace W}`` (matrix-fractional
function), λ ranges over a compact simplex, so by Sion's minimax theorem::

    t* = max_{λ ∈ simplex} L(λ),    L(λ) = min_{diag X ≤ 1} tr(Wᵀ Λ C⁻¹ W X⁺).

For fixed λ the inner problem is exactly the weighted-sum problem solved by
:func:`dpmatrix._solvers.lowdim_optimal.optimize_subworkload` with query weights ``λ / c``, whose dual
is ``L(λ) = max_{μ ∈ simplex} ‖M(λ, μ)‖_*²``.  Hence ``t* = max_{λ, μ} ‖M(λ, μ)‖_*²``.  The
function ``s(λ, μ) = ‖M(λ, μ)‖_*`` is jointly concave (it equals
``min_{X ≻ 0} ½[tr(diag(μ) X) + tr(Wᵀ Λ C⁻¹ W X⁻¹)]``, a minimum of linear functions of (λ, μ)),
so a joint ascent on (λ, μ) is sound.

Primal from dual, and the fixed-point map
-----------------------------------------
Let ``M = P Σ Qᵀ`` be a thin SVD (top r = rank W triplets) and ``F = (ΛC⁻¹)^{1/2} W``.  The
minimizer of ``½[tr(diag(μ) X) + tr(FᵀF X⁺)]`` over X with range ⊇ rowspace(W) is
``X(λ, μ) = Fᵀ P Σ⁻¹ Pᵀ F`` (``= diag(μ)^{-1/2} Q Σ Qᵀ diag(μ)^{-1/2}`` when μ > 0), and at it::

    var_j / c_j = (P Σ Pᵀ)_jj / λ_j,        X_ii = (Q Σ Qᵀ)_ii / μ_i,
    Σ_j λ_j var_j / c_j = Σ_i μ_i X_ii = s = tr Σ.

Any X with range = rowspace(W), scaled by ``1 / max_i X_ii``, is feasible, so
``upper = max_j (var_j / c_j) · max_i X_ii`` is a rigorous upper bound, and with the identities
above::

    upper / lower = [max_j (var_j/c_j) / Σ_j λ_j var_j/c_j] · [max_i X_ii / Σ_i μ_i X_ii],

the product of two equivalence-theorem ratios of optimal design: the gap vanishes exactly when
the scaled variances are equal (and maximal) on the support of λ and the diagonal of X is equal
(and maximal) on the support of μ — the KKT conditions of the saddle point.  The natural
fixed-point map is therefore the joint multiplicative update

    λ_j ← λ_j · (var_j / c_j) / s = (P Σ Pᵀ)_jj / s,      μ_i ← μ_i · X_ii / s = (Q Σ Qᵀ)_ii / s,

one SVD of the m × n matrix M per step, with no division by small weights when written in terms
of (λ, μ) and the primal X.

Algorithm
---------
* Work in ``rowspace(W)``: ``W = W_r Vᵀ`` (V: n × r orthonormal, r = numerical rank of W), so
  rank-deficient workloads (e.g. rows with their means removed) are handled by writing
  ``X = V Y Vᵀ``; B has r rows and the same row space as W.
* Each evaluation at (λ, μ): SVD of M → certified lower bound ``(Σ σ_k − slack)²``; the r × r
  factor ``Z = Σ^{-1/2} Pᵀ F V`` (``Y = ZᵀZ``) and its SVD ``Z = U_z diag(ζ) Ṽᵀ`` give the primal
  ``B = diag(ζ) (V Ṽ)ᵀ`` (ζ clipped at 1e-13·max so B stays full rank: any such B is a valid
  candidate), its diagonal ``diag(BᵀB)`` and variances ``‖w_j V Ṽ diag(ζ)^{-1}‖² / c_j`` — the
  upper bound is evaluated on the B that is returned.
* The fixed-point map above (exponent 1) in log-coordinates, accelerated by SQUAREM
  (Varadhan & Roland 2008, step length ``α = −‖r‖/‖v‖`` clamped to [−4, −1]) with a fallback to
  the plain double step when the extrapolated point lowers the lower bound.  Exponents > 1 (the
  "κ = 2" updates used by lowdim_optimal) make the relative scale of weakly coupled blocks
  (e.g. a block of queries that is inactive at the optimum) oscillate: the linearized map of that
  mode is 1 − κ = −1, and the plain κ = 2 iteration stalls at a gap of several percent on such
  workloads.  Exponent 1 maps that mode to 0; with extrapolation it is robust and ~3× faster
  than the plain iteration on prefix / range workloads.
* Weights are kept ≥ 1e-200 × max (in log-coordinates), so queries / cells that are inactive at
  the optimum decay geometrically without underflow.
* Stop when the certified relative gap ``(upper − lower) / upper ≤ tol`` (best bounds over all
  evaluations; every evaluation gives valid bounds).  No generic SDP solver is used.

Typical cost at tol = 1e-4: prefix workloads n = 100 converge in ~30 evaluations (one 100 × 100
SVD plus one r × r SVD each), all 55 ranges over n = 10 in ~60, all 1275 ranges over n = 50 in
~300.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import PlanError, WorkloadError
from .cache import LRUCache, array_digest
from .lowdim_optimal import optimize_subworkload
from .result import SolverResult
from .squarem import normalize_log_weights, squarem

__all__ = [
    "MaxVarStrategy",
    "optimize_maxvar_strategy",
    "maxvar_lower_bound",
    "clear_cache",
]

_EPS = np.finfo(float).eps


# --------------------------------------------------------------------------------------------
# Result type
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, kw_only=True)
class MaxVarStrategy(SolverResult):
    """A max-variance-optimal Gaussian strategy (fitness-for-use, Problem 1) with its certificate.

    ``B`` (= ``solution``, r × n, r = rank W, read-only): measure ``B x + N(0, I)``; its privacy
    cost ``max diag(BᵀB)`` is 1 (up to rounding) and ``rowspace(B) = rowspace(W)``.
    ``max_variance`` (= ``objective``) is ``t(B) = max_j w_j (BᵀB)⁺ w_jᵀ / c_j`` evaluated on
    this B (an upper bound on the optimum t*); ``lower_bound`` is the certified
    ``‖(ΛC⁻¹)^{1/2} W diag(μ)^{1/2}‖_*²`` for ``λ = query_weights`` and ``μ = cell_weights``
    (both on the simplex, read-only), so ``lower_bound ≤ t* ≤ max_variance`` and
    ``gap = (max_variance − lower_bound) / max_variance``.  ``iterations`` counts evaluations
    (one SVD of an m × n matrix each); ``converged`` is ``status == "optimal"`` (else
    ``"max_iter"``).

    Scaling: at privacy cost ρ (noise ``N(0, I/ρ)``, or B scaled by √ρ) the target-scaled
    variances are ``max_variance / ρ``; to meet ``var_j ≤ c_j`` exactly, use ρ = max_variance.
    """

    query_weights: np.ndarray = field(repr=False)
    cell_weights: np.ndarray = field(repr=False)

    @property
    def B(self) -> np.ndarray:
        return self.solution

    @property
    def max_variance(self) -> float:
        return self.objective

    @property
    def converged(self) -> bool:
        return self.status == "optimal"

    @property
    def privacy_cost(self) -> float:
        """``max diag(BᵀB)`` (1 up to rounding)."""
        return float(np.max(np.einsum("ij,ij->j", self.B, self.B)))


# --------------------------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------------------------


def _validate(W, targets) -> tuple[np.ndarray, np.ndarray]:
    try:
        W = np.array(W, dtype=float)
    except (TypeError, ValueError) as exc:
        raise WorkloadError(f"W must be a numeric 2-d matrix (queries × cells): {exc}") from None
    if W.ndim != 2:
        raise WorkloadError(
            f"W must be a 2-d matrix (queries × cells), got {W.ndim}-d with shape {W.shape}; "
            f"wrap a single query as [q]"
        )
    m, n = W.shape
    if m == 0 or n == 0:
        raise WorkloadError(f"W must have at least one query and one cell, got shape {W.shape}")
    if not np.all(np.isfinite(W)):
        raise WorkloadError("W contains NaN or infinite entries; every entry must be finite")
    zero = np.flatnonzero(~np.any(W != 0.0, axis=1))
    if zero.size:
        raise WorkloadError(
            f"W has all-zero rows (queries {zero[:10].tolist()}{'…' if zero.size > 10 else ''}); "
            f"a zero query has variance 0 for free: drop these rows"
        )
    if targets is None:
        c = np.ones(m)
    else:
        try:
            c = np.array(targets, dtype=float).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise WorkloadError(f"targets must be a numeric vector: {exc}") from None
        if c.shape[0] != m:
            raise WorkloadError(
                f"targets has {c.shape[0]} entries but W has {m} rows (one target per query)"
            )
        if not np.all(np.isfinite(c)) or np.any(c <= 0):
            raise WorkloadError(
                "targets must be positive finite numbers (variance targets c_j > 0)"
            )
    W.setflags(write=False)
    return W, c


def _check_tol(tol) -> float:
    try:
        t = float(tol)
    except (TypeError, ValueError):
        raise WorkloadError(f"tol must be a number in (0, 1), got {tol!r}") from None
    if not (0.0 < t < 1.0):
        raise WorkloadError(f"tol must be in (0, 1) (a relative optimality gap), got {tol!r}")
    return t


# --------------------------------------------------------------------------------------------
# Certified lower bound
# --------------------------------------------------------------------------------------------


def _certified_nuclear(S: np.ndarray, shape: tuple[int, int]) -> float:
    """``Σ_k max(σ_k − slack, 0)`` for computed singular values S of a matrix of this shape.

    ``slack = 10·max(m, n)·eps·σ_max`` covers the backward error of the SVD and of forming the
    matrix, so rounding cannot inflate the certificate.
    """
    slack = 10.0 * max(shape) * _EPS * float(S[0]) if S.size else 0.0
    return float(np.maximum(S - slack, 0.0).sum())


def maxvar_lower_bound(
    W: np.ndarray,
    query_weights: np.ndarray | Sequence[float],
    targets: np.ndarray | Sequence[float] | None = None,
    *,
    tol: float = 1e-6,
) -> float:
    """Certified lower bound on t* (fitness-for-use, Problem 1) from query weights λ.

    Returns ``max_μ ‖(ΛC⁻¹)^{1/2} W diag(μ)^{1/2}‖_*²`` (λ normalized to sum 1) — i.e. ``L(λ)``,
    the optimal weighted sum of target-scaled variances for weights λ — up to a relative
    ``tol`` *from below*: the maximization over the cell distribution μ is done by
    :func:`~dpmatrix._solvers.lowdim_optimal.optimize_subworkload` (weights ``λ / c``) and the bound
    is then re-evaluated here, for the exact λ (zeros allowed) and the μ it found, with a rounding
    allowance.  So the result is always ``≤ t*``, for every λ, whatever the solver's accuracy.
    """
    W, c = _validate(W, targets)
    m, _ = W.shape
    try:
        lam = np.array(query_weights, dtype=float).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise WorkloadError(f"query_weights must be a numeric vector: {exc}") from None
    if lam.shape[0] != m:
        raise WorkloadError(f"query_weights has {lam.shape[0]} entries but W has {m} rows")
    if not np.all(np.isfinite(lam)) or np.any(lam < 0) or not lam.sum() > 0:
        raise WorkloadError("query_weights must be nonnegative finite numbers with a positive sum")
    tol = _check_tol(tol)
    lam = lam / lam.sum()
    d = lam / c
    keep = d > 0
    mech = optimize_subworkload(W[keep], d[keep], tol=tol, strict=False)
    n = W.shape[1]
    mu = mech.dual_weights if mech.dual_weights is not None else np.full(n, 1.0 / n)
    M = (np.sqrt(d)[:, None] * W) * np.sqrt(mu)[None, :]
    s = _certified_nuclear(np.linalg.svd(M, compute_uv=False), M.shape)
    return s * s / (float(lam.sum()) * float(mu.sum()))


# --------------------------------------------------------------------------------------------
# Solver core
# --------------------------------------------------------------------------------------------


class _Solver:
    """Evaluates (bounds, primal, fixed-point map) at (λ, μ) for the normalized workload Wn."""

    def __init__(self, Wn: np.ndarray):
        self.Wn = Wn
        m, n = Wn.shape
        self.m, self.n = m, n
        _, sv, Vt = np.linalg.svd(Wn, full_matrices=False)
        self.r = int(np.sum(sv > sv[0] * max(m, n) * _EPS * 10))
        self.V = np.ascontiguousarray(Vt[: self.r].T)  # n × r, orthonormal basis of rowspace(W)
        self.Wr = Wn @ self.V  # m × r
        self.evals = 0
        self.best_lower = 0.0
        self.best_lower_w: tuple[np.ndarray, np.ndarray] | None = None
        self.best_upper = math.inf
        self.best_upper_primal: tuple[np.ndarray, np.ndarray] | None = None

    def gap(self) -> float:
        if not math.isfinite(self.best_upper) or self.best_upper <= 0:
            return math.inf
        return (self.best_upper - self.best_lower) / self.best_upper

    @staticmethod
    def _weights(x: np.ndarray) -> np.ndarray:
        w = np.exp(x - x.max())
        return w / w.sum()

    def step(self, x: np.ndarray) -> tuple[np.ndarray, float]:
        """One evaluation at x = (log λ, log μ); returns (fixed-point image of x, lower bound)."""
        m, r = self.m, self.r
        lam, mu = self._weights(x[:m]), self._weights(x[m:])
        self.evals += 1
        sl = np.sqrt(lam)
        M = (sl[:, None] * self.Wn) * np.sqrt(mu)[None, :]
        P, S, _ = np.linalg.svd(M, full_matrices=False)
        s_cert = _certified_nuclear(S, M.shape)
        lower = s_cert * s_cert / (float(lam.sum()) * float(mu.sum()))
        if lower > self.best_lower:
            self.best_lower, self.best_lower_w = lower, (lam, mu)

        # Primal X(λ, μ) = V ZᵀZ Vᵀ with Z = Σ^{-1/2} Pᵀ F V (F = Λ^{1/2} Wn).
        Sr = np.maximum(S[:r], float(S[0]) * 1e-15)
        Z = (P[:, :r].T @ (sl[:, None] * self.Wr)) / np.sqrt(Sr)[:, None]
        _, zeta, Vzt = np.linalg.svd(Z)
        zeta = np.maximum(zeta, float(zeta[0]) * 1e-13)
        U = self.V @ Vzt.T  # n × r, orthonormal; B = diag(ζ) Uᵀ
        dx = (U * U) @ (zeta * zeta)  # diag(BᵀB)
        R = (self.Wr @ Vzt.T) / zeta[None, :]  # rows w_j B⁺
        var = np.einsum("ij,ij->i", R, R)  # var_j / c_j (normalized units)
        vmax, dmax = float(var.max()), float(dx.max())
        upper = vmax * dmax
        if upper < self.best_upper:
            self.best_upper, self.best_upper_primal = upper, (zeta, Vzt)

        # Fixed-point map λ ← λ ∘ var/c, μ ← μ ∘ diag X (normalized; logs relative to the max).
        tiny = np.finfo(float).tiny
        xl = x[:m] + np.log(np.maximum(var / vmax, tiny))
        xm = x[m:] + np.log(np.maximum(dx / dmax, tiny))
        return self._normalize(np.concatenate([xl, xm])), lower

    def _normalize(self, x: np.ndarray) -> np.ndarray:
        return normalize_log_weights(x, self.m)

    def run(self, tol: float, max_iter: int) -> None:
        """SQUAREM-accelerated fixed-point iteration until gap ≤ tol or max_iter evaluations."""
        x = np.zeros(self.m + self.n)

        def done() -> bool:
            return self.gap() <= tol or self.evals >= max_iter

        squarem(self.step, x, self.m, done)


# --------------------------------------------------------------------------------------------
# Public entry point with cache
# --------------------------------------------------------------------------------------------

_CACHE: LRUCache[MaxVarStrategy] = LRUCache(128)


def clear_cache() -> None:
    """Forget all cached solutions of :func:`optimize_maxvar_strategy`."""
    _CACHE.clear()


def optimize_maxvar_strategy(
    W: np.ndarray,
    targets: np.ndarray | Sequence[float] | None = None,
    *,
    tol: float = 1e-4,
    max_iter: int = 5000,
    strict: bool = True,
) -> MaxVarStrategy:
    """Solve fitness-for-use, Problem 1 for the workload ``W`` (m × n) with variance ``targets``.

    Minimizes ``t(B) = max_j w_j (BᵀB)⁺ w_jᵀ / c_j`` over strategies B with
    ``max diag(BᵀB) ≤ 1`` and ``rowspace(B) ⊇ rowspace(W)`` (``targets`` c: positive, default
    all ones).  ``t*`` equals the minimal privacy cost subject to ``var_j ≤ c_j``.  See the module
    docstring for the duality, the certificate and the algorithm.

    Stops when the certified relative gap ``(max_variance − lower_bound) / max_variance ≤ tol``.
    If ``max_iter`` evaluations are used first: raises :class:`~dpmatrix.errors.PlanError` when
    ``strict``, else returns the best strategy found with ``converged=False``.  Invalid input
    raises :class:`~dpmatrix.errors.WorkloadError`.  Converged results are cached (LRU, keyed on
    the bytes of W and targets and on tol); the returned arrays are read-only.
    """
    W, c = _validate(W, targets)
    tol = _check_tol(tol)
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise WorkloadError(f"max_iter must be a positive integer, got {max_iter!r}")
    m, n = W.shape
    key = (m, n, array_digest(W, c), tol)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit

    # Only C^{-1/2} W matters; normalize its scale (t* scales with its square).
    Wc = W / np.sqrt(c)[:, None]
    scale = float(np.max(np.abs(Wc)))
    solver = _Solver(Wc / scale)
    solver.run(tol, int(max_iter))

    zeta, Vzt = solver.best_upper_primal
    U = solver.V @ Vzt.T
    dmax = float(((U * U) @ (zeta * zeta)).max())
    B = np.ascontiguousarray((zeta / math.sqrt(dmax))[:, None] * U.T)
    R = (solver.Wr @ Vzt.T) / zeta[None, :]
    upper_n = float(np.einsum("ij,ij->i", R, R).max()) * dmax  # t(B) for the normalized workload
    lower_n = min(solver.best_lower, upper_n)
    gap = (upper_n - lower_n) / upper_n
    max_variance, lower = upper_n * scale * scale, lower_n * scale * scale
    converged = gap <= tol * (1 + 1e-9)
    if not converged and strict:
        raise PlanError(
            f"max-variance strategy solver did not reach relative gap {tol:g} within {max_iter} "
            f"iterations (max variance {max_variance:.6g}, lower bound {lower:.6g}, "
            f"gap {gap:.3g}); "
            f"raise max_iter or tol, or pass strict=False to accept the best strategy found"
        )
    lam, mu = solver.best_lower_w
    lam, mu = lam / lam.sum(), mu / mu.sum()
    for a in (B, lam, mu):
        a.setflags(write=False)
    result = MaxVarStrategy(
        solution=B, objective=max_variance, lower_bound=lower, gap=gap,
        status="optimal" if converged else "max_iter", iterations=solver.evals,
        query_weights=lam, cell_weights=mu,
    )
    if converged:
        _CACHE.put(key, result)
    return result
