r"""Fitness-for-use: the least Gaussian privacy cost meeting per-query variance targets.

Paper: Xiao, Ding, Wang, Zhang, Kifer, *Optimizing Fitness-For-Use of Differentially Private
Linear Queries* (PVLDB 14(1)), §3.3 Problems 1–2, §6 Problems 3–4.

Problem 1 (paper Eq. 3)
-----------------------
Workload ``W`` (m × n), targets ``c > 0`` (length m), a basis ``B`` (k × n, linearly independent
rows, ``rowspace B = rowspace W``, ``W = L B``).  The mechanism releases ``L (B x + N(0, Σ))``::

    Δ²_opt = min_{Σ ≻ 0}  max_i b_iᵀ Σ⁻¹ b_i     s.t.  (L Σ Lᵀ)_jj ≤ c_j   for every query j.

``b_iᵀ Σ⁻¹ b_i`` is the privacy profile (paper Def. 4) and its maximum the squared privacy cost
Δ² (Cor. 1).  Units: with neighbours differing by one record (‖x − x'‖₁ = 1) the mechanism is
ρ-zCDP with ``Δ² = 2ρ`` (paper footnote 2), so Δ² is exactly dpmatrix's ``pcost`` (= 2ρ).

Reduction used here
-------------------
Write ``X = Bᵀ Σ⁻¹ B`` (n × n, PSD, range = rowspace W).  Then ``Σ = B X⁺ Bᵀ``, the privacy profile
is ``diag X`` and the query variances are ``w_j X⁺ w_jᵀ`` — neither depends on the basis (paper
Thms. 2, 4).  Both are homogeneous (``X → sX`` multiplies the cost by s, divides the variances by
s), so::

    Δ²_opt = min_X  max_i X_ii · max_j w_j X⁺ w_jᵀ / c_j                          (1)

and Problem 2/3 at a fixed cost P is the same X rescaled: its least largest ratio var/target is
``Δ²_opt / P`` (paper Thms. 5, 12).

Dual and certificate (derivation)
---------------------------------
For any λ in the simplex of queries, μ in the simplex of cells and any feasible X, with
``F = C^{-1/2} W`` and ``A(λ, μ) = Λ^{1/2} F D_μ^{1/2}``::

    ‖A‖_* = ‖(Λ^{1/2} F X⁺ᐟ²) (X^{1/2} D_μ^{1/2})‖_*  ≤  ‖Λ^{1/2} F X⁺ᐟ²‖_F ‖X^{1/2} D_μ^{1/2}‖_F
          = sqrt(Σ_j λ_j var_j / c_j) · sqrt(Σ_i μ_i X_ii)  ≤  sqrt(max_j var_j/c_j · max_i X_ii),

(Hölder for singular values; ``F X⁺ X = F`` because rowspace F ⊆ range X), so
``Δ²_opt ≥ ‖A(λ, μ)‖_*²`` for every (λ, μ): the issue's dual.  It is tight: (1) equals
``min_X max_{λ,μ} ¼[tr(D_μ X) + tr(Fᵀ Λ F X⁺)]²`` (AM–GM after optimizing the scale of X), the
bracket is convex in X and linear in (λ, μ) over compact simplices, so by Sion's theorem
``Δ_opt = max_{λ,μ} min_X ½[tr(D_μ X) + tr(FᵀΛF X⁺)] = max_{λ,μ} ‖A(λ, μ)‖_*``, with inner
minimizer ``X(λ, μ) = Fᵀ Λ^{1/2} P S⁻¹ Pᵀ Λ^{1/2} F`` (``A = P S Qᵀ``), at which
``Σ_i μ_i X_ii = Σ_j λ_j var_j/c_j = tr S``.  Hence every evaluation gives an upper bound (the
cost of ``X(λ, μ)``) and a lower bound, and::

    upper / lower = [max_i X_ii / Σ μ_i X_ii] · [max_j r_j / Σ λ_j r_j],   r_j = var_j / c_j.

Algorithm (a certified alternative to the paper's SM-II)
--------------------------------------------------------
1. Exact reduction (:mod:`~dpmatrix._solvers.fitness_reduction`): queries along the same direction
   keep only the largest (the others never bind), cells along the same direction are merged
   (random range queries leave adjacent cells no end point separates).
2. Warm start: 10 evaluations of the joint multiplicative fixed point ``μ_i ← μ_i X_ii / tr S``,
   ``λ_j ← λ_j r_j / tr S`` (it is the saddle-point / optimal-design equivalence condition
   above), in log coordinates, accelerated by SQUAREM (Varadhan & Roland 2008).
3. Newton on the dual in square-root weights with an exponential-sum Hessian, completing the
   primal where cells have zero weight (:mod:`~dpmatrix._solvers.fitness_newton`): the dual
   value of the fixed point converges in ~100 evaluations but its primal ``X(λ, μ)`` lags (its
   error is first order in that of (λ, μ)), so the fixed point alone needed ~800 evaluations at
   d = 128 and did not certify d = 512 in a minute; Newton certifies d = 1024 random ranges in
   about ten steps (``benchmarks/bench_targets.py --scale``).
4. Fallback (and ``method="fixed_point"``): the fixed point run to the certificate, computed in
   an orthonormal basis V of rowspace W (r = rank W), with a dense barrier polish for r ≤ 64
   when it stalls (:func:`_barrier_polish`).

Every evaluation of both methods gives certified bounds; the solve stops when the relative gap
``(upper − lower) / upper`` is ≤ ``tol`` (default 1e-6), and the returned certificate is
recomputed from the returned strategy and dual weights (:func:`_finish`).  The paper's SM-II
(soft max + Newton–CG) only approximates the max and stops at a tolerance without a certificate;
here the gap is always reported.  The fixed point with λ frozen solves the weighted
sum-of-variances problem (the CA baseline of paper §7, Yuan et al. 2016), whose dual is
``max_μ ‖A(λ, μ)‖_*²``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla

from dpmatrix.errors import PlanError, WorkloadError

from .fitness_newton import newton_dual, warm_start
from .fitness_reduction import identity_reduction, reduce_instance
from .result import SolverResult
from .squarem import LOG_FLOOR, normalize_log_weights, squarem

__all__ = [
    "FitnessResult",
    "WeightedSumResult",
    "solve_min_privacy_cost",
    "solve_min_target_ratio",
    "solve_weighted_sum",
    "fitness_lower_bound",
    "row_basis",
    "prefix_upper_basis",
    "privacy_profile",
    "query_variances",
]

_EPS = np.finfo(float).eps
_LOG_FLOOR = LOG_FLOOR


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, kw_only=True)
class FitnessResult(SolverResult):
    r"""A Problem-1 (or Problem-2/3) solution with its duality certificate.

    As a :class:`~dpmatrix._solvers.result.SolverResult`: ``solution`` is the covariance Σ; for
    Problem 1 (:func:`solve_min_privacy_cost`) ``objective`` is the privacy cost Δ² and
    ``lower_bound`` the certified bound on Δ²_opt; for a fixed-cost result
    (:func:`solve_min_target_ratio`) the objective is the largest ratio ``max_j var_j / c_j``
    and ``lower_bound`` its certified bound ``Δ²_opt-bound / pcost`` (the same relative ``gap``).
    :attr:`cost_lower_bound` is the Problem-1 bound in both cases.

    Attributes
    ----------
    basis : ndarray (k × n)
        ``B`` of Definition 3 (linearly independent rows, rowspace = rowspace W).
    covariance : ndarray (k × k)
        ``Σ`` (= ``solution``): release ``L (B x + N(0, Σ))`` with the representation ``L = W B⁺``.
    strategy : ndarray (r × n)
        An equivalent factor ``A`` with ``AᵀA = Bᵀ Σ⁻¹ B``: measuring ``A x + N(0, I)`` and
        answering by least squares gives the same output distribution.
    privacy_cost : float
        ``Δ² = max_i b_iᵀ Σ⁻¹ b_i`` (= dpmatrix ``pcost`` = 2ρ).
    privacy_profile : ndarray (n)
        ``diag(Bᵀ Σ⁻¹ B)`` (paper Def. 4).
    variances : ndarray (m)
        Per-query variances ``diag(L Σ Lᵀ)``.
    targets : ndarray (m)
        The targets c.
    lower_bound : float
        Certified lower bound on ``objective``'s minimum (see above).
    cost_lower_bound : float
        Certified lower bound on the optimal Δ² for Problem 1 (``‖A(λ, μ)‖_*²``).
    gap : float
        Relative gap ``(Δ²_found − lower) / Δ²_found`` of the Problem-1 solution.
    status : str
        ``"optimal"`` (gap ≤ tol), ``"max_iter"`` or ``"time_limit"`` (stopped short; the
        certified ``gap`` says by how much).
    iterations : int
        Evaluations of the fixed-point map (one set of r × r factorizations each).
    query_weights, cell_weights : ndarray
        The dual (λ, μ) certifying ``cost_lower_bound``.
    """

    basis: np.ndarray = field(repr=False)
    strategy: np.ndarray = field(repr=False)
    privacy_profile: np.ndarray = field(repr=False)
    variances: np.ndarray = field(repr=False)
    targets: np.ndarray = field(repr=False)
    cost_lower_bound: float
    tol: float
    query_weights: np.ndarray = field(repr=False)
    cell_weights: np.ndarray = field(repr=False)

    @property
    def covariance(self) -> np.ndarray:
        return self.solution

    @property
    def privacy_cost(self) -> float:
        """``Δ² = max_i b_iᵀ Σ⁻¹ b_i`` (the largest entry of the privacy profile)."""
        return float(self.privacy_profile.max())

    @property
    def rho(self) -> float:
        """zCDP parameter ``ρ = Δ² / 2``."""
        return 0.5 * self.privacy_cost

    @property
    def ratios(self) -> np.ndarray:
        """``variances / targets``; ≤ 1 for a Problem-1 result."""
        return self.variances / self.targets

    @property
    def max_ratio(self) -> float:
        """Largest ``variance / target`` (the objective of Problems 2–4)."""
        return float(np.max(self.ratios))

    @property
    def binding(self) -> np.ndarray:
        """Boolean mask of the queries whose ratio is within 1e-6 of the largest."""
        r = self.ratios
        return r >= r.max() * (1.0 - 1e-6)


@dataclass(frozen=True, eq=False, kw_only=True)
class WeightedSumResult(SolverResult):
    """Optimum of ``min Σ_j ω_j w_j X⁺ w_jᵀ`` s.t. ``diag X ≤ 1`` (CA / Yuan et al. 2016).

    ``gram`` (= ``solution``) is X (n × n, max diagonal 1), ``objective`` its weighted sum of
    variances, ``lower_bound`` the certified ``max_μ ‖Ω^{1/2} W D_μ^{1/2}‖_*²`` value at the μ
    found.
    """

    @property
    def gram(self) -> np.ndarray:
        return self.solution


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def _as_workload(W) -> np.ndarray:
    try:
        A = np.array(W, dtype=float)
    except (TypeError, ValueError) as exc:
        raise WorkloadError(f"the workload must be a numeric matrix (queries × cells): {exc}") from None
    if A.ndim != 2 or A.shape[0] == 0 or A.shape[1] == 0:
        raise WorkloadError(
            f"the workload must be a non-empty 2-d matrix (queries × cells), got shape {A.shape}"
        )
    if not np.all(np.isfinite(A)):
        raise WorkloadError("the workload matrix contains NaN or infinite entries")
    zero = np.flatnonzero(~np.any(A != 0.0, axis=1))
    if zero.size:
        raise WorkloadError(
            f"queries {zero[:10].tolist()} are all zero: their variance is 0 for free; drop them"
        )
    return A


def _as_targets(targets, m: int, name: str = "targets") -> np.ndarray:
    if np.isscalar(targets):
        targets = [targets] * m
    try:
        c = np.array(targets, dtype=float).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise PlanError(f"{name} must be numbers (one variance target per query): {exc}") from None
    if c.shape[0] != m:
        raise PlanError(
            f"{name} has {c.shape[0]} entries but the workload has {m} queries; give one "
            f"variance target per query, in the workload's query order (or one number for all)"
        )
    bad = np.flatnonzero(~np.isfinite(c) | ~(c > 0))
    if bad.size:
        raise PlanError(
            f"{name} must be positive finite variances; queries {bad[:10].tolist()} have "
            f"{c[bad[:10]].tolist()}"
        )
    return c


def _check_tol(tol) -> float:
    t = float(tol)
    if not (0.0 < t < 1.0):
        raise PlanError(f"tol must be a relative gap in (0, 1), got {tol!r}")
    return t


# --------------------------------------------------------------------------------------------
# Bases
# --------------------------------------------------------------------------------------------


def _rank_tol(s: np.ndarray, shape) -> float:
    return float(s[0]) * max(shape) * _EPS * 100.0 if s.size else 0.0


def row_basis(W: np.ndarray) -> np.ndarray:
    """A row basis of W: its rows chosen by QR with column pivoting on ``Wᵀ`` (paper §3.1).

    Parameters
    ----------
    W : array (m × n)

    Returns
    -------
    ndarray (k × n), k = rank W, a subset of W's rows in their original order.

    Examples
    --------
    >>> row_basis(np.array([[1., 0.], [2., 0.], [1., 1.]])).shape
    (2, 2)
    """
    W = _as_workload(W)
    _, R, piv = sla.qr(W.T, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    k = int(np.sum(d > _rank_tol(d, W.shape)))
    return W[np.sort(piv[:k])]


def prefix_upper_basis(n: int) -> np.ndarray:
    """The paper's ``B = U`` (§7): ``U[i, j] = 1`` if ``i ≤ j`` else 0 (n × n)."""
    return np.triu(np.ones((int(n), int(n))))


def _resolve_basis(basis, W: np.ndarray, V: np.ndarray) -> np.ndarray:
    n = W.shape[1]
    r = V.shape[1]
    if isinstance(basis, str):
        if basis == "auto":
            return row_basis(W)
        if basis in ("identity", "I"):
            B = np.eye(n)
        elif basis in ("upper", "U"):
            B = prefix_upper_basis(n)
        else:
            raise PlanError(f"basis must be 'auto', 'identity', 'upper' or a matrix, got {basis!r}")
    else:
        B = np.array(basis, dtype=float)
        if B.ndim != 2 or B.shape[1] != n or not np.all(np.isfinite(B)):
            raise PlanError(f"basis must be a finite k × {n} matrix, got shape {B.shape}")
    s = np.linalg.svd(B, compute_uv=False)
    k = int(np.sum(s > _rank_tol(s, B.shape)))
    if k < B.shape[0]:
        raise PlanError(f"the basis has {B.shape[0]} rows but rank {k}: its rows must be independent")
    if k != r:
        raise PlanError(
            f"the basis has rank {k} but the workload has rank {r}; Definition 3 of the paper needs "
            f"rowspace(B) = rowspace(W) (in extra directions the optimal noise is infinite): "
            f"use basis='auto' (a row basis of W)"
        )
    # rowspace(B) must contain rowspace(W): compare projections.
    Qb = np.linalg.svd(B, full_matrices=False)[2].T  # n × k
    resid = np.linalg.norm(V - Qb @ (Qb.T @ V))
    if resid > 1e-8 * max(1.0, math.sqrt(r)):
        raise PlanError("the basis does not span the workload's row space; use basis='auto'")
    return B


def _check_measurable(W: np.ndarray, measurable) -> None:
    """PlanError naming the queries outside the row space of ``measurable`` (no finite cost)."""
    if measurable is None:
        return
    Mb = np.array(measurable, dtype=float)
    if Mb.ndim != 2 or Mb.shape[1] != W.shape[1]:
        raise PlanError(
            f"measurable must be a matrix with {W.shape[1]} columns, got shape {Mb.shape}"
        )
    _, s, Vt = np.linalg.svd(Mb, full_matrices=False)
    k = int(np.sum(s > _rank_tol(s, Mb.shape)))
    Q = Vt[:k].T
    res = np.linalg.norm(W - (W @ Q) @ Q.T, axis=1)
    bad = np.flatnonzero(res > 1e-8 * np.maximum(np.linalg.norm(W, axis=1), 1.0))
    if bad.size:
        raise PlanError(
            f"queries {bad[:10].tolist()}{'…' if bad.size > 10 else ''} lie outside the row space "
            f"of what can be measured: no mechanism meets their targets at any finite privacy "
            f"cost; add queries that answer them to the measurable set or drop these targets"
        )


# --------------------------------------------------------------------------------------------
# Core evaluation
# --------------------------------------------------------------------------------------------


def _psd_sqrt(T: np.ndarray) -> np.ndarray:
    w, E = np.linalg.eigh(T)
    return (E * np.sqrt(np.maximum(w, 0.0))) @ E.T


class _Core:
    """Evaluates bounds, primal and fixed-point image at (log λ, log μ) in rowspace coordinates.

    ``Fr = F V`` (m × r) with ``F = C^{-1/2} W / scale`` and V (n × r) orthonormal.
    """

    def __init__(self, Fr: np.ndarray, V: np.ndarray, *, fixed_lam: np.ndarray | None = None):
        self.Fr, self.V = Fr, V
        self.m, self.r = Fr.shape
        self.n = V.shape[0]
        self.fixed_lam = fixed_lam
        self.full = self.r == self.n and np.array_equal(V, np.eye(self.n))
        self.evals = 0
        self.best_lower = 0.0
        self.best_dual: tuple[np.ndarray, np.ndarray] | None = None
        self.best_upper = math.inf
        self.best_primal: np.ndarray | None = None  # Z (r × r) with Y = ZᵀZ, X = V Y Vᵀ
        self.last_obj = math.inf
        self.timed_out = False

    def gap(self) -> float:
        if not math.isfinite(self.best_upper):
            return math.inf
        return max(self.best_upper - self.best_lower, 0.0) / self.best_upper

    @staticmethod
    def _softmax(x: np.ndarray) -> np.ndarray:
        w = np.exp(x - x.max())
        return w / w.sum()

    def evaluate(self, x: np.ndarray) -> tuple[np.ndarray, float]:
        m = self.m
        lam = self.fixed_lam if self.fixed_lam is not None else self._softmax(x[:m])
        mu = self._softmax(x[m:])
        self.evals += 1
        H = (self.Fr * lam[:, None]).T @ self.Fr  # Frᵀ Λ Fr
        if self.full:  # V = I: T = D_μ is diagonal
            smu = np.sqrt(mu)
            ThH = smu[:, None] * H
            K = ThH * smu[None, :]
        else:
            Th = _psd_sqrt((self.V * mu[:, None]).T @ self.V)  # (Vᵀ D_μ V)^{1/2}
            ThH = Th @ H
            K = ThH @ Th
        K = 0.5 * (K + K.T)
        kap, Q = np.linalg.eigh(K)  # ascending; singular values of A are sqrt(kap)
        s = np.sqrt(np.maximum(kap, 0.0))
        smax = float(s[-1])
        slack = 50.0 * max(m, self.n) * _EPS * smax
        lower = float(np.maximum(s - slack, 0.0).sum()) ** 2
        if lower > self.best_lower:
            self.best_lower, self.best_dual = lower, (lam.copy(), mu.copy())
        sc = np.maximum(s, smax * 1e-12)
        Z = (Q.T @ ThH) / (sc ** 1.5)[:, None]  # Y = ZᵀZ = H Th Q S⁻³ Qᵀ Th H
        dx, var = _diag_and_var(Z, self.V, self.Fr)
        vmax, dmax = float(var.max()), float(dx.max())
        upper = vmax * dmax
        if self.fixed_lam is not None:
            upper = float(lam @ var) * dmax
        self.last_obj = upper
        if upper < self.best_upper:
            self.best_upper, self.best_primal = upper, Z
        tiny = np.finfo(float).tiny
        xl = x[:m] if self.fixed_lam is not None else x[:m] + np.log(np.maximum(var / vmax, tiny))
        xm = x[m:] + np.log(np.maximum(dx / dmax, tiny))
        return self._normalize(np.concatenate([xl, xm])), lower

    def _normalize(self, x: np.ndarray) -> np.ndarray:
        return normalize_log_weights(x, self.m)

    def run(
        self, tol: float, max_iter: int, max_seconds: float = math.inf, stall: int | None = None
    ) -> None:
        """SQUAREM-accelerated fixed point (Varadhan & Roland 2008, scheme S3, |α| ≤ 4).

        The extrapolated point is kept only if its lower bound does not drop; every evaluation
        yields valid bounds, so the safeguard affects speed, never the certificate.
        """
        x = np.zeros(self.m + self.n)
        t0 = time.perf_counter()
        mark = [0, math.inf]  # (evaluation count, gap) at the last 10 % improvement

        def done() -> bool:
            if self.gap() <= tol or self.evals >= max_iter:
                return True
            if stall is not None:
                if self.gap() < 0.9 * mark[1]:
                    mark[:] = [self.evals, self.gap()]
                elif self.evals - mark[0] > stall:
                    return True
            self.timed_out = time.perf_counter() - t0 > max_seconds
            return self.timed_out

        squarem(self.evaluate, x, self.m, done)


_POLISH_MAX_RANK = 64  # dense Newton on r(r+1)/2 + 1 ≤ 2081 unknowns


def _barrier_polish(core: _Core, tol: float, max_newton: int = 400) -> None:
    r"""Primal log-barrier Newton polish (small r), feeding both bounds of ``core``.

    When the optimal query weights λ are supported on fewer than r queries (typical with
    unequal targets) the closed-form primal ``X(λ, μ)`` of the fixed point is not unique in the
    limit and the upper bound stalls.  This solves, in rowspace coordinates (``X = V Y Vᵀ``)::

        min t   s.t.   v_i Y v_iᵀ ≤ 1  (cells),   f_j Y⁻¹ f_jᵀ ≤ t  (queries),

    by the barrier method (Boyd & Vandenberghe §11.3) with dense Newton steps in
    ``(vech Y, t)``: Hessian of ``−log(t − f Y⁻¹ fᵀ)`` = rank one + ``2 tr(E Y⁻¹ E S)``
    (``S = Σ_j y_j y_jᵀ / h_j``, ``y_j = Y⁻¹ f_jᵀ``), of ``−log(1 − v Y vᵀ)`` = rank one.
    Every iterate is strictly feasible, so ``t`` is an upper bound; the central-path multipliers
    ``λ_j ∝ 1/h_j``, ``μ_i ∝ 1/g_i`` are fed to the dual bound, which stays certified.
    """
    Vc, Fr = core.V, core.Fr
    n, r = Vc.shape
    m = Fr.shape[0]
    iu0, iu1 = np.triu_indices(r)
    p = iu0.size
    wgt = np.where(iu0 == iu1, 1.0, 2.0)
    half = np.where(iu0 == iu1, 0.5, 1.0)

    def mat(y: np.ndarray) -> np.ndarray:
        Y = np.zeros((r, r))
        Y[iu0, iu1] = y
        return Y + Y.T - np.diag(np.diag(Y))

    Z = core.best_primal
    Y = Z.T @ Z
    Y /= float(np.max(np.einsum("ij,jk,ik->i", Vc, Y, Vc))) * (1.0 + 1e-3)
    y = Y[iu0, iu1].copy()
    A = (Vc[:, iu0] * Vc[:, iu1]) * wgt  # ⟨v_iᵀv_i, E_k⟩

    def parts(y: np.ndarray, t: float):
        Y = mat(y)
        try:
            Lc = np.linalg.cholesky(Y)
        except np.linalg.LinAlgError:
            return None
        g = 1.0 - A @ y
        Yq = sla.cho_solve((Lc, True), Fr.T)  # r × m, columns y_j
        q = np.einsum("ji,ij->j", Fr, Yq)
        h = t - q
        if np.any(g <= 0) or np.any(h <= 0):
            return None
        return Y, Lc, g, Yq, h

    pr = parts(y, np.inf)
    Yq0 = pr[3]
    t = float(np.max(np.einsum("ji,ij->j", Fr, Yq0))) * (1.0 + 1e-3)
    lower = max(core.best_lower, 1e-300)
    tau = (n + m) / max(t - lower, 1e-3 * t)

    def phi(y, t, tau):
        pr = parts(y, t)
        if pr is None:
            return math.inf
        _, Lc, g, _, h = pr
        return tau * t - np.sum(np.log(g)) - np.sum(np.log(h))

    for _ in range(max_newton):
        if core.gap() <= tol:
            return
        Y, Lc, g, Yq, h = parts(y, t)
        # Certified bounds from this strictly feasible point and its central-path multipliers.
        xd = np.concatenate([np.log(1.0 / h) - np.log(1.0 / h).max(), np.log(1.0 / g) - np.log(1.0 / g).max()])
        core.evaluate(np.maximum(xd, _LOG_FLOOR))
        zpr = np.linalg.cholesky(Y).T
        up = float(np.max(np.einsum("ji,ij->j", Fr, Yq))) * float(np.max(A @ y))
        if up < core.best_upper:
            core.best_upper, core.best_primal = up, zpr
        if core.gap() <= tol:
            return
        P = sla.cho_solve((Lc, True), np.eye(r))
        S = (Yq / h) @ Yq.T
        grad_Y = (Vc.T / g) @ Vc - S
        gy = grad_Y[iu0, iu1] * wgt
        gt = tau - np.sum(1.0 / h)
        Bq = (Yq[iu0, :] * Yq[iu1, :]).T * wgt  # m × p: ⟨y_j y_jᵀ, E_k⟩
        H = np.empty((p + 1, p + 1))
        H[:p, :p] = (A.T / g**2) @ A + (Bq.T / h**2) @ Bq
        # Kronecker part: T[(a,b),(c,d)] = P_bc S_da for unit matrices, symmetrized to E_k.
        a_, b_, c_, d_ = iu0[:, None], iu1[:, None], iu0[None, :], iu1[None, :]
        Tk = P[b_, c_] * S[d_, a_] + P[a_, c_] * S[d_, b_] + P[b_, d_] * S[c_, a_] + P[a_, d_] * S[c_, b_]
        Tk *= half[:, None] * half[None, :]
        H[:p, :p] += Tk + Tk.T
        H[:p, p] = H[p, :p] = (Bq.T / h**2).sum(axis=1)
        H[p, p] = np.sum(1.0 / h**2)
        grad = np.concatenate([gy, [gt]])
        try:
            step = -sla.solve(H + 1e-14 * np.trace(H) / (p + 1) * np.eye(p + 1), grad, assume_a="pos")
        except (np.linalg.LinAlgError, ValueError):
            return
        dec = float(-grad @ step)
        if dec / 2 <= 1e-9:
            if (n + m) / tau <= 0.1 * tol * t:
                return
            tau *= 8.0
            continue
        f0, a = phi(y, t, tau), 1.0
        while a > 1e-12:
            f1 = phi(y + a * step[:p], t + a * step[p], tau)
            if f1 <= f0 - 0.25 * a * dec:
                break
            a *= 0.5
        else:
            return
        y, t = y + a * step[:p], t + a * step[p]


def _diag_and_var(Z: np.ndarray, V: np.ndarray, Fr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For X = V ZᵀZ Vᵀ: ``diag X`` and ``f_j X⁺ f_jᵀ = ‖Z⁻ᵀ f_jᵀ‖²`` (rows of ``F = Fr Vᵀ``).

    Used inside the iteration only (an LU solve); the returned strategy and its bounds are
    recomputed from an SVD factor in :func:`_finish`.
    """
    G = Z @ V.T if V.shape[0] != V.shape[1] or not np.array_equal(V, np.eye(V.shape[0])) else Z
    dx = np.einsum("ij,ij->j", G, G)
    try:
        R = sla.lu_solve(sla.lu_factor(Z.T, check_finite=False), Fr.T, check_finite=False)
        var = np.einsum("ij,ij->j", R, R)
        if not np.all(np.isfinite(var)):
            raise ValueError
    except (ValueError, np.linalg.LinAlgError, sla.LinAlgError):
        _, zeta, Vzt = np.linalg.svd(Z)
        zeta = np.maximum(zeta, float(zeta[0]) * 1e-13)
        Rs = (Fr @ Vzt.T) / zeta[None, :]
        var = np.einsum("ij,ij->i", Rs, Rs)
    return dx, var


def _factor(Z: np.ndarray, V: np.ndarray) -> np.ndarray:
    """A full-row-rank factor A (r × n) with AᵀA = V ZᵀZ Vᵀ."""
    _, zeta, Vzt = np.linalg.svd(Z)
    zeta = np.maximum(zeta, float(zeta[0]) * 1e-13)
    return zeta[:, None] * (V @ Vzt.T).T


def _rowspace(W: np.ndarray) -> np.ndarray:
    """Orthonormal basis (n × r) of rowspace W; the identity when W has full column rank."""
    s = np.linalg.svd(W, compute_uv=False)
    r = int(np.sum(s > _rank_tol(s, W.shape)))
    if r == W.shape[1]:
        return np.eye(r)
    _, s, Vt = np.linalg.svd(W, full_matrices=False)
    return np.ascontiguousarray(Vt[:r].T)


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def privacy_profile(B: np.ndarray, covariance: np.ndarray) -> np.ndarray:
    """``diag(Bᵀ Σ⁻¹ B)`` (paper Def. 4); its max is Δ² (Cor. 1)."""
    B = np.asarray(B, dtype=float)
    S = np.linalg.solve(np.asarray(covariance, dtype=float), B)
    return np.einsum("ij,ij->j", B, S)


def query_variances(W: np.ndarray, B: np.ndarray, covariance: np.ndarray) -> np.ndarray:
    """``diag(L Σ Lᵀ)`` with ``L = W B⁺`` (paper §3.3)."""
    L = np.asarray(W, dtype=float) @ np.linalg.pinv(np.asarray(B, dtype=float))
    return np.einsum("ij,jk,ik->i", L, np.asarray(covariance, dtype=float), L)


def solve_min_privacy_cost(
    W,
    targets,
    *,
    basis="auto",
    measurable=None,
    tol: float = 1e-6,
    max_iter: int = 20000,
    max_seconds: float = math.inf,
    method: str = "newton",
) -> FitnessResult:
    r"""Problem 1: the least privacy cost Δ² such that every query variance is ≤ its target.

    Parameters
    ----------
    W : array (m × n)
        Explicit workload matrix (one linear query per row).
    targets : float or array (m)
        Variance targets ``c_j > 0`` (one number applies to every query).
    basis : {"auto", "identity", "upper"} or array (k × n), keyword-only
        The paper's basis ``B``: ``"auto"`` a row basis of W (pivoted QR), ``"identity"``
        (``B = I``) or ``"upper"`` (``B = U``) — the latter two need W of full column rank.
        The optimum does not depend on it (paper Thm. 2); only ``covariance`` does.
    measurable : array (p × n), optional
        Queries a mechanism is allowed to measure; a workload query outside their row space
        raises :class:`~dpmatrix.errors.PlanError` (no finite privacy cost answers it).
    tol : float
        Relative duality gap to reach (default 1e-6).
    max_iter : int
        Evaluation limit; if reached, ``status == "max_iter"`` and ``gap`` says how far.
    max_seconds : float
        Wall-clock limit (``status == "time_limit"`` when it stops the solve).
    method : {"newton", "fixed_point"}, keyword-only
        ``"newton"`` (default): the instance without proportional queries/cells
        (:mod:`~dpmatrix._solvers.fitness_reduction`), 10 fixed-point evaluations, then Newton on
        the dual (:mod:`~dpmatrix._solvers.fitness_newton`), falling back to the fixed point and
        its polish if Newton does not certify.  ``"fixed_point"``: that first-order method
        alone on the instance as given (the method of earlier versions; for comparisons).

    Returns
    -------
    FitnessResult
        ``privacy_cost`` = Δ² (= dpmatrix ``pcost`` = 2ρ), ``covariance`` Σ for ``basis``,
        per-query ``variances`` (≤ targets), certified ``lower_bound`` and ``gap``.

    Examples
    --------
    >>> res = solve_min_privacy_cost(np.tril(np.ones((2, 2))), 1.0, basis="identity")
    >>> round(res.privacy_cost, 6), res.covariance.round(6).tolist()
    (1.333333, [[1.0, -0.5], [-0.5, 1.0]])
    """
    W = _as_workload(W)
    m = W.shape[0]
    c = _as_targets(targets, m)
    tol = _check_tol(tol)
    _check_measurable(W, measurable)
    t0 = time.perf_counter()
    F = W / np.sqrt(c)[:, None]
    scale = float(np.max(np.abs(F)))
    F = F / scale
    if method not in ("newton", "fixed_point"):
        raise PlanError(f"method must be 'newton' or 'fixed_point', got {method!r}")
    B = row_basis(W) if isinstance(basis, str) and basis == "auto" else None
    red = reduce_instance(F) if method == "newton" else identity_reduction(F)
    if B is None:
        B = _resolve_basis(basis, W, _rowspace(F))
    deadline = t0 + float(max_seconds)
    # First-order warm start, then Newton on the dual (fitness_newton); the fixed point of
    # _Core with its dense polish remains the fallback when Newton does not certify.
    best = None
    out, used = None, 0
    if method == "newton":
        out, used = _newton(red.matrix, _rank(red.matrix), tol, deadline, int(max_iter))
    if out is not None:
        best = _finish(
            out.strategy @ red.expand, red.query_weights(out.query_weights, m),
            red.cell_weights(out.cell_weights), W, c, B, tol, iterations=used,
            timed_out=time.perf_counter() > deadline,
        )
        if best.gap <= tol or time.perf_counter() > deadline or used >= max_iter:
            return best
    V = _rowspace(red.matrix)
    core = _Core(red.matrix @ V, V)
    polish = core.r <= _POLISH_MAX_RANK
    # With the polish available, hand over when the fixed point stalls (no 10 % gain of the
    # gap in 300 evaluations: a degenerate optimum, see _barrier_polish).
    core.run(tol, int(max_iter), deadline - time.perf_counter(), stall=300 if polish else None)
    if core.gap() > tol and polish and not core.timed_out:
        _barrier_polish(core, tol)
    res = _finish(
        _factor(core.best_primal, V) @ red.expand, red.query_weights(core.best_dual[0], m),
        red.cell_weights(core.best_dual[1]), W, c, B, tol, iterations=used + core.evals,
        timed_out=core.timed_out,
    )
    return res if best is None or res.gap <= best.gap else best


def _newton(F: np.ndarray, rank: int, tol: float, deadline: float, max_iter: int):
    """Warm start and Newton (:mod:`fitness_newton`) on the reduced instance F: the outcome
    (None if Newton broke down) and the evaluations used."""
    used = min(max_iter, _WARM_START)
    try:
        lam0, mu0, _ = warm_start(F, rank=rank, evaluations=used, deadline=deadline)
        out = newton_dual(F, lam0, mu0, rank=rank, tol=tol, deadline=deadline,
                          subsolve=_completion_solver, max_iter=max(max_iter - used, 0))
    except FloatingPointError:
        return None, used
    return out, used + (out.evaluations if out is not None else 0)


def _rank(F: np.ndarray) -> int:
    """Numerical rank of F (singular values of its triangular factor)."""
    R = np.linalg.qr(F, mode="r") if F.shape[0] > F.shape[1] else F
    s = np.linalg.svd(R, compute_uv=False)
    return int(np.sum(s > _rank_tol(s, F.shape)))


_WARM_START = 10  # fixed-point evaluations before Newton


def _completion_solver(W_sub: np.ndarray, c_sub: np.ndarray, tol: float) -> tuple[np.ndarray, float]:
    """Problem 1 on the small completion instance of :mod:`fitness_newton` (|I| cells)."""
    res = solve_min_privacy_cost(W_sub, c_sub, tol=tol)
    return np.asarray(res.strategy), res.privacy_cost


def _finish(A, lam, mu, W, c, B, tol, *, iterations: int, timed_out: bool) -> FitnessResult:
    """The result for a strategy factor A (``AᵀA = X``, any scale) and dual weights (λ, μ)."""
    Xd = np.einsum("ij,ij->j", A, A)
    A = A / math.sqrt(float(Xd.max()))  # privacy cost 1 in normalized units
    # Variances for cost 1: w_j X⁺ w_jᵀ; exact via the factor (A full row rank r).
    Ap = np.linalg.pinv(A)  # n × r
    R = W @ Ap
    var1 = np.einsum("ij,ij->i", R, R)
    delta2 = float(np.max(var1 / c))  # Δ² needed = max_j var_j(cost 1) / c_j
    # The certificate is recomputed by a direct SVD of diag(√(λ/c)) W diag(√μ) (the iteration
    # used eigenvalues of a Gram matrix, less accurate for small singular values).
    lower = min(fitness_lower_bound(W, c, lam, mu), delta2)
    gap = (delta2 - lower) / delta2
    A = A * math.sqrt(delta2)  # AᵀA = X* with max diag Δ²
    variances = var1 / delta2
    Xd = np.einsum("ij,ij->j", A, A)
    # Σ = B X⁺ Bᵀ with X⁺ = A⁺ A⁺ᵀ.
    BAp = B @ (Ap / math.sqrt(delta2))
    Sigma = BAp @ BAp.T
    Sigma = 0.5 * (Sigma + Sigma.T)
    status = "optimal" if gap <= tol * (1 + 1e-9) else ("time_limit" if timed_out else "max_iter")
    arrays = dict(
        basis=np.ascontiguousarray(B), covariance=Sigma, strategy=A, privacy_profile=Xd,
        variances=variances, targets=c, query_weights=lam / lam.sum(), cell_weights=mu / mu.sum(),
    )
    for a in arrays.values():
        a.setflags(write=False)
    covariance = arrays.pop("covariance")
    return FitnessResult(
        solution=covariance, objective=float(Xd.max()), lower_bound=float(lower),
        cost_lower_bound=float(lower), gap=float(gap), status=status, iterations=int(iterations),
        tol=tol, **arrays,
    )


def solve_min_target_ratio(
    W,
    targets,
    *,
    pcost: float,
    basis="auto",
    measurable=None,
    tol: float = 1e-6,
    max_iter: int = 20000,
    max_seconds: float = math.inf,
) -> FitnessResult:
    r"""Problems 2–4: at privacy cost ``pcost`` (= Δ² = 2ρ), minimize ``max_j var_j / c_j``.

    By homogeneity (paper Thms. 5, 12) the answer is the Problem-1 solution with Σ multiplied by
    ``Δ²_opt / pcost``; the least largest ratio is ``Δ²_opt / pcost`` and every ratio is scaled
    by the same factor, so the binding queries are those of Problem 1.

    Parameters
    ----------
    W, targets, basis, measurable, tol, max_iter, max_seconds
        As for :func:`solve_min_privacy_cost` (``targets`` act as relative priorities).
    pcost : float, keyword-only
        The privacy cost Δ² the release must have.

    Returns
    -------
    FitnessResult
        With ``privacy_cost == pcost`` and ``max_ratio`` the optimal largest variance/target;
        ``lower_bound`` and ``gap`` certify Problem 1 (the ratio bound is ``lower_bound/pcost``).

    Examples
    --------
    >>> r = solve_min_target_ratio(np.tril(np.ones((2, 2))), 1.0, pcost=2.0)
    >>> round(r.max_ratio, 6)
    0.666667
    """
    try:
        P = float(pcost)
    except (TypeError, ValueError):
        raise PlanError(f"pcost must be a positive number, got {pcost!r}") from None
    if not (math.isfinite(P) and P > 0):
        raise PlanError(f"pcost must be a positive finite number, got {pcost!r}")
    res = solve_min_privacy_cost(
        W, targets, basis=basis, measurable=measurable, tol=tol, max_iter=max_iter,
        max_seconds=max_seconds,
    )
    k = res.privacy_cost / P  # variances scale by k, profile by 1/k
    arrays = dict(
        basis=res.basis, covariance=res.covariance * k, strategy=res.strategy / math.sqrt(k),
        privacy_profile=res.privacy_profile / k, variances=res.variances * k,
        targets=res.targets, query_weights=res.query_weights, cell_weights=res.cell_weights,
    )
    for a in arrays.values():
        if a.flags.writeable:
            a.setflags(write=False)
    covariance = arrays.pop("covariance")
    ratio = float(np.max(arrays["variances"] / arrays["targets"]))
    return FitnessResult(
        solution=covariance, objective=ratio, lower_bound=min(res.cost_lower_bound / P, ratio),
        cost_lower_bound=res.cost_lower_bound, gap=res.gap, status=res.status,
        iterations=res.iterations, tol=res.tol, **arrays,
    )


def solve_weighted_sum(
    W, weights=None, *, tol: float = 1e-6, max_iter: int = 20000
) -> WeightedSumResult:
    r"""``min Σ_j ω_j w_j X⁺ w_jᵀ`` s.t. ``diag X ≤ 1`` — the Gaussian matrix mechanism optimum.

    This is CA of paper §7 (Yuan et al. 2016, the convex (ε, δ) formulation); query weights
    ``ω`` give wCA.  Dual: ``max_μ ‖Ω^{1/2} W D_μ^{1/2}‖_*²``; same fixed point as Problem 1 with
    the query weights frozen.

    Parameters
    ----------
    W : array (m × n)
    weights : array (m), optional
        Nonnegative weights on the query variances (default all 1).
    tol, max_iter : keyword-only
        Certified relative gap to reach, evaluation limit.

    Returns
    -------
    WeightedSumResult

    Examples
    --------
    >>> round(solve_weighted_sum(np.eye(3)).objective, 6)
    3.0
    """
    W = _as_workload(W)
    m, n = W.shape
    om = np.ones(m) if weights is None else np.array(weights, dtype=float).reshape(-1)
    if om.shape[0] != m or not np.all(np.isfinite(om)) or np.any(om < 0) or not om.sum() > 0:
        raise PlanError(f"weights must be {m} nonnegative finite numbers with a positive sum")
    tol = _check_tol(tol)
    total = float(om.sum())
    lam = om / total
    scale = float(np.max(np.abs(W)))
    F = W / scale
    V = _rowspace(F)
    core = _Core(F @ V, V, fixed_lam=lam)
    core.run(tol, int(max_iter))
    A = _factor(core.best_primal, V)
    X = A.T @ A
    X = X / float(np.max(np.diag(X)))
    P = np.linalg.pinv(X, hermitian=True)
    obj = float(np.einsum("i,ij,jk,ik->", om, W, P, W))
    lower = min(core.best_lower * scale * scale * total, obj)
    gap = (obj - lower) / obj
    X.setflags(write=False)
    return WeightedSumResult(
        solution=X, objective=obj, lower_bound=lower, gap=gap,
        status="optimal" if gap <= tol * (1 + 1e-9) else "max_iter", iterations=core.evals,
    )


def fitness_lower_bound(W, targets, query_weights, cell_weights) -> float:
    r"""The certified dual bound ``‖diag(√(λ/c)) W diag(√μ)‖_*²`` ≤ Δ²_opt (λ, μ normalized).

    Parameters
    ----------
    W : array (m × n)
    targets : float or array (m)
    query_weights : array (m), nonnegative
    cell_weights : array (n), nonnegative

    Returns
    -------
    float
        A lower bound on the Problem-1 optimum for every choice of the weights.

    Examples
    --------
    >>> round(fitness_lower_bound(np.eye(2), 1.0, [.5, .5], [.5, .5]), 6)
    1.0
    """
    W = _as_workload(W)
    m, n = W.shape
    c = _as_targets(targets, m)
    lam = np.array(query_weights, dtype=float).reshape(-1)
    mu = np.array(cell_weights, dtype=float).reshape(-1)
    if lam.shape != (m,) or mu.shape != (n,) or np.any(lam < 0) or np.any(mu < 0):
        raise PlanError("query_weights (m) and cell_weights (n) must be nonnegative vectors")
    lam, mu = lam / lam.sum(), mu / mu.sum()
    A = (np.sqrt(lam / c)[:, None] * W) * np.sqrt(mu)[None, :]
    s = np.linalg.svd(A, compute_uv=False)
    slack = 50.0 * max(A.shape) * _EPS * float(s[0])
    return float(np.maximum(s - slack, 0.0).sum()) ** 2
