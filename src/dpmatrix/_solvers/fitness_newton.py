r"""Newton's method on the fitness-for-use dual, in square-root weights, with primal completion.

Problem 1 of Xiao et al. (PVLDB 14(1), §3.3) in the form of :mod:`dpmatrix._solvers.fitness`:
F (m × n) the target-scaled workload, ``Δ²_opt = min_X max_i X_ii · max_j f_j X⁺ f_jᵀ``, and its
dual ``Δ_opt = max_{λ, μ} φ(λ, μ)``, ``φ = ‖Λ^{1/2} F D_μ^{1/2}‖_*`` over the simplices of queries
and cells.  The first-order fixed point of that module gets the dual value fast but the primal
(the strategy) slowly: the primal error is first order in the error of (λ, μ) while the dual
value's is second order, and near-degenerate weights (queries or cells whose optimal weight is
0 or tiny) converge sublinearly.  This module finishes the solve with second-order steps.

Gradient and Hessian of the dual (derivation)
---------------------------------------------
``φ(λ, μ) = min_{Y ≻ 0} ½[tr(N Y) + tr(M Y⁻¹)]`` with ``M = Σ_j λ_j f_j f_jᵀ``,
``N = Σ_i μ_i e_i e_iᵀ`` (in the rowspace of F), minimizer ``Y N Y = M``.  With the SVD
``A = Λ^{1/2} F D_μ^{1/2} = U S Qᵀ`` and ``R = M D^{1/2} Q S^{-3/2}`` one has ``Y = R Rᵀ`` and
``Rᵀ N R = S``.  Writing ``â_j = R⁻¹ f_jᵀ = S^{-1/2} Qᵀ D^{1/2} f_jᵀ`` and
``b̂_i = Rᵀ e_i = S^{-3/2} Qᵀ D^{1/2} M e_i``:

* envelope theorem: ``∂φ/∂λ_j = ½ ‖â_j‖² = ½ f_j Y⁻¹ f_jᵀ`` (half the query's variance
  at the primal ``X = Y``) and ``∂φ/∂μ_i = ½ ‖b̂_i‖² = ½ X_ii``;
* the Hessian of a minimum of functions linear in (λ, μ):
  ``∇²φ = −Jᵀ (∂²_Y L)⁻¹ J``; in the basis above ``∂²_Y L`` is diagonal with entries
  ``(s_a + s_b)/2`` on symmetric matrices, which gives::

      d²φ[θ, θ] = −½ Σ_{a,b} c_ab(θ)² / (s_a + s_b),
      c(θ) = Σ_i θ_μi b̂_i b̂_iᵀ − Σ_j θ_λj â_j â_jᵀ.

The Cauchy kernel ``1/(s_a + s_b)`` is replaced by an exponential sum
(:func:`~dpmatrix._solvers.expsum.reciprocal_expsum`, relative accuracy 10 %: the Newton steps
only need an approximate Hessian — measured at d = 256, 10 % and 1e-6 take the same number of
steps), so the (m + n)² Hessian costs about ten rank-r products ``Σ_k w_k (Z e^{−ρ_k S} Zᵀ)^{∘2}``
(``Z`` stacks the â and b̂; a term with a large rate only keeps the few directions with small
``s_a``) instead of ``O(m² r²)``.

Square-root weights
-------------------
Newton runs in ``v = √λ``, ``w = √μ`` on the unit spheres (``‖v‖ = ‖w‖ = 1``).  There φ is
smooth at a zero weight in the directions that matter: a slack query (variance below the
largest) has ``φ ≈ const + ½(r_j − Δ)v_j²`` — a concave quadratic whose maximum is ``v_j = 0``,
found in one step, where in λ the function is linear with a kink at the simplex boundary —
and a barely active cell (optimal μ_i tiny, as with unequal targets) has
``φ ≈ a + b w_i − c w_i²``, a smooth maximum at ``w_i = b/2c`` that the λ-form sees as a
square-root cusp.  Every iterate is a feasible dual point, so ``φ²`` is a valid lower bound and
the primal ``X = Y`` (range = rowspace F) a valid upper bound ``max_i X_ii · max_j var_j``.
The step model replaces the diagonal term ``r_j − Δ`` of a violated query (``r_j > Δ``,
convex in ``v_j``) by ``−|r_j − Δ|``, so it stays concave and every step is an ascent
direction.  Steps are damped by a backtracking search on φ; a Hessian serves two steps (the second a chord
step) while the singular values are well spread; tiny weights of clearly slack queries are set
to 0 (and given back if their variance becomes the largest).  Evaluations use an SVD of
``Λ^{1/2} F D^{1/2}`` (through a QR of ``Λ^{1/2} F``) once the singular values spread over more
than five decades, where the eigen-decomposition of the Gram matrix loses them.

Cells with zero optimal weight (primal completion)
--------------------------------------------------
A cell i with ``μ_i = 0`` at the optimum (its privacy-profile entry is not needed) makes the
dual degenerate: ``X(λ, μ)`` is undefined in its direction.  Such a cell is dropped from the
dual when its weight falls below 1e-4 of the largest (``w_i² < 10⁻⁸ max w²``; if the completion
below fails, the dropped cells are put back and kept for good).  For the kept
cells A the dual is the same problem on the columns F_A, whose primal ``X_A`` is
``X_AA`` of an optimal X; the rest of X follows from ``X D_μ X = M`` (stationarity)::

    X_AI = X_A E,  E = M_A⁻¹ F_Aᵀ Λ F_I   (the Λ-weighted least-squares fit of F_I on F_A),

and ``X_II = Z + Eᵀ X_A E`` with any ``Z ≻ 0`` such that ``Z_ii ≤ α_i = 1 − (Eᵀ X_A E)_ii``
(cells) and ``g_j Z⁻¹ g_jᵀ ≤ β_j = t(1 + δ) − r_j`` (queries; ``g_j = f_{j,I} − f_{j,A} E``,
``r_j`` the variance under ``X_A``, t the largest).  That is again a fitness-for-use problem,
with |I| cells, solved by the caller's certified solver; if its cost is ≤ 1 the assembled X
meets every target within ``t(1 + δ)`` and every profile entry within 1.  Whatever happens the
returned bounds are computed from the returned X and dual weights.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla

from .expsum import reciprocal_expsum
from .squarem import normalize_log_weights, squarem

__all__ = ["NewtonOutcome", "newton_dual", "warm_start"]

_HESSIAN_EPS = 0.1  # relative accuracy of the exponential sum (the Hessian is a step model)
_SVD_SPREAD = 1e-5  # s_min / s_max below which evaluations use the SVD
_SINGULAR = 1e-13  # s_min / s_max below which a trial point is refused (numerically singular)
_DROP_CELL = 1e-8  # w_i² / max w² below which a cell leaves the dual (primal completion)
_ZERO_QUERY = 1e-8  # v_j² / max v² below which a slack query's weight is set to 0 …
_SLACK = 1e-4  # … if its variance is below (1 − _SLACK) × the largest
_REENTER = 1e-2  # a zero-weight query above the largest variance restarts at this × max v
_STALL = 8  # iterations without halving the gap before giving up
_REUSE = 2  # Newton steps per Hessian (the second one a chord step)

SubSolver = Callable[[np.ndarray, np.ndarray, float], tuple[np.ndarray, float]]


@dataclass(frozen=True, eq=False, kw_only=True)
class NewtonOutcome:
    """Best dual and primal found.

    Attributes
    ----------
    strategy : ndarray (k × n)
        A factor with ``strategyᵀ strategy = X`` (any positive scale).
    query_weights, cell_weights : ndarray
        λ (m) and μ (n) on the simplices, certifying ``lower``.
    lower, upper : float
        ``φ(λ, μ)²`` and ``max_i X_ii · max_j f_j X⁺ f_jᵀ`` (evaluated here; the caller
        recomputes its certificate from the strategy and the weights).
    evaluations : int
        Evaluations of φ and its derivatives.
    """

    strategy: np.ndarray = field(repr=False)
    query_weights: np.ndarray = field(repr=False)
    cell_weights: np.ndarray = field(repr=False)
    lower: float
    upper: float
    evaluations: int

    @property
    def gap(self) -> float:
        return max(self.upper - self.lower, 0.0) / self.upper


@dataclass(frozen=True, eq=False)
class _Point:
    """φ and its first-order data at (v, w), restricted to the cells with ``w ≠ 0``."""

    v: np.ndarray
    w: np.ndarray
    cells: np.ndarray
    s: np.ndarray  # singular values of Λ^{1/2} F_A D^{1/2}, descending
    ahat: np.ndarray  # k × m
    bhat: np.ndarray  # k × |A|
    r: np.ndarray  # f_j Y⁻¹ f_jᵀ
    x: np.ndarray  # X_ii on the cells A
    gram: np.ndarray  # M_A = F_Aᵀ Λ F_A

    @property
    def phi(self) -> float:
        return float(self.s.sum())

    @property
    def spread(self) -> float:
        return float(self.s[-1] / self.s[0])

    @property
    def upper(self) -> float:
        return float(self.r.max() * self.x.max())


def _evaluate(
    F: np.ndarray, v: np.ndarray, w: np.ndarray, rank: int, accurate: bool, clamp: bool = False
) -> _Point | None:
    """``clamp``: singular values below 1e-12 of the largest are raised to it (the first-order
    warm start, whose weights may underflow), else such a point is refused (None)."""
    cells = np.flatnonzero(w != 0)
    Fa = F[:, cells]
    th = np.abs(w[cells])
    k = min(rank, cells.size)
    M = (Fa * (v * v)[:, None]).T @ Fa
    if accurate:
        R = np.linalg.qr(Fa * np.abs(v)[:, None], mode="r")
        _, s, Vt = np.linalg.svd(R * th[None, :], full_matrices=False)
        s, Q = s[:k], Vt[:k].T
    else:
        K = th[:, None] * M * th[None, :]
        kap, Q = np.linalg.eigh(0.5 * (K + K.T))
        kap, Q = kap[::-1][:k], Q[:, ::-1][:, :k]
        s = np.sqrt(np.maximum(kap, 0.0))
    if clamp and s.size and np.isfinite(s[0]) and s[0] > 0:
        s = np.maximum(s, 1e-12 * s[0])
    if not (s.size and s[-1] > 0 and np.all(np.isfinite(s))):
        return None
    QT = Q.T * th[None, :]
    ahat = (QT @ Fa.T) / np.sqrt(s)[:, None]
    bhat = (QT @ M) / (s**1.5)[:, None]
    r = np.einsum("ij,ij->j", ahat, ahat)
    x = np.einsum("ij,ij->j", bhat, bhat)
    return _Point(v=v, w=w, cells=cells, s=s, ahat=ahat, bhat=bhat, r=r, x=x, gram=M)


def _dual_hessian(Z: np.ndarray, sign: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``−½ σσᵀ ∘ Σ_ab z_pa z_pb z_qa z_qb / (s_a + s_b)`` for the rows z of Z (module doc).

    Each exponential-sum term is a rank-k Gram matrix ``Z e^{−ρ_k S} Zᵀ``, formed, squared and
    summed in single precision: the Hessian only models the Newton step (10 % is enough, the
    search on φ judges every step), and every term is nonnegative, so the sum loses nothing.
    A term keeps only the singular directions with ``ρ_k (s_a − s_min) ≤ log(1/ε) + 4``: the
    others carry ``e^{−ρ_k (s_a + s_b)}`` below ``ε e^{−4}`` of the kernel's largest term, so
    each kernel entry ``1/(s_a + s_b)`` keeps its relative accuracy (about ε) while the terms
    with large rates, which only see the smallest singular values, cost little.
    """
    weights, rates = reciprocal_expsum(2.0 * float(s[-1]), 2.0 * float(s[0]), _HESSIAN_EPS)
    rho = np.linalg.norm(Z, axis=1)  # rows scaled to norm 1: no underflow in single precision
    rho = np.where(rho > 0, rho, 1.0)
    Zs = (Z / rho[:, None]).astype(np.float32)
    s_min = float(s[-1])
    reach = math.log(1.0 / _HESSIAN_EPS) + 4.0
    H = None
    for wk, rk in zip(weights, rates):
        first = int(np.searchsorted(-s, -(s_min + reach / rk)))  # s is descending
        Zd = Zs[:, first:] * np.exp(-0.5 * rk * (s[first:] - s_min)).astype(np.float32)[None, :]
        G = Zd @ Zd.T  # Z e^{−ρ_k S} Zᵀ / e^{−ρ_k s_min} (a full product: as fast as syrk here)
        np.square(G, out=G)
        G *= np.float32(wk * math.exp(-2.0 * rk * s_min))
        if H is None:
            H = G
        else:
            H += G
    H = H.astype(np.float64)
    scale = sign * rho * rho
    H *= -0.5 * scale[:, None]
    H *= scale[None, :]
    return H


@dataclass(frozen=True, eq=False)
class _Hessian:
    """Dual Hessian (λ, μ coordinates) built at some iterate for queries ``queries`` and the
    kept cells ``cells``; reused for a chord step while they still cover the active queries
    and the cells are unchanged."""

    H: np.ndarray
    queries: np.ndarray
    cells: np.ndarray
    age: int = 0

    def covers(self, pt: _Point, active: np.ndarray) -> bool:
        return np.array_equal(self.cells, pt.cells) and bool(np.all(np.isin(active, self.queries)))


def _build_hessian(pt: _Point, active: np.ndarray) -> _Hessian:
    Z = np.vstack([pt.ahat[:, active].T, pt.bhat.T])
    sign = np.concatenate([-np.ones(active.size), np.ones(pt.cells.size)])
    return _Hessian(H=_dual_hessian(Z, sign, pt.s), queries=active, cells=pt.cells)


def _newton_direction(
    pt: _Point, active: np.ndarray, hess: _Hessian
) -> tuple[np.ndarray, np.ndarray, float] | None:
    """Step (dv on ``active`` queries, dw on the kept cells) of the Lagrangian Newton system
    in square-root weights on the two unit spheres (module doc)."""
    phi = pt.phi
    ns, nc = active.size, pt.cells.size
    idx = np.concatenate([np.searchsorted(hess.queries, active), hess.queries.size + np.arange(nc)])
    y = np.concatenate([pt.v[active], pt.w[pt.cells]])
    g = np.concatenate([pt.r[active], pt.x])
    p = y.size
    K = np.zeros((p + 2, p + 2))
    K[:p, :p] = hess.H[np.ix_(idx, idx)]
    K[:p, :p] *= 4.0 * y[:, None] * y[None, :]
    # ∂²/∂y_p² of the Lagrangian has the term g_p − φ: negative for a slack query or cell (its
    # weight goes to 0), but positive for a violated one (r_j > Δ), where the exact Newton step
    # would move to the minimum of that convex direction (y = 0) instead of growing the weight.
    # −|g_p − φ| keeps the model concave (4 y H y is negative semidefinite), so every step is an
    # ascent direction; near the optimum g_p − φ → 0 on the support and nothing changes.
    K[np.arange(p), np.arange(p)] -= np.abs(g - phi)
    grad = y * (g - phi)
    K[:ns, p] = K[p, :ns] = y[:ns]
    K[ns:p, p + 1] = K[p + 1, ns:p] = y[ns:]
    try:
        with warnings.catch_warnings():  # an ill-conditioned step is judged by the line search
            warnings.simplefilter("ignore", sla.LinAlgWarning)
            sol = sla.solve(K, np.concatenate([-grad, [0.0, 0.0]]), assume_a="sym", check_finite=False)
    except (np.linalg.LinAlgError, ValueError, sla.LinAlgError):
        return None
    d = sol[:p]
    if not np.all(np.isfinite(d)):
        return None
    return d[:ns], d[ns:], float(grad @ d)


def _unit(a: np.ndarray) -> np.ndarray:
    return a / np.linalg.norm(a)


def _active_queries(pt: _Point) -> np.ndarray:
    return np.flatnonzero(pt.v != 0)


def _zero_slack(v: np.ndarray, pt: _Point) -> np.ndarray:
    """Set to 0 the weights of queries that are tiny and clearly slack at ``pt``: a slack
    query's square-root weight shrinks by a factor per Newton step instead of reaching 0, and a
    zero weight takes its row out of the next Hessian.  A wrongly zeroed query comes back
    through :meth:`_Run.reenter`."""
    v2 = v * v
    zero = (v2 < _ZERO_QUERY * float(v2.max())) & (pt.r < (1.0 - _SLACK) * float(pt.r.max()))
    return _unit(np.where(zero, 0.0, v))


def _complete(
    F: np.ndarray, pt: _Point, delta: float, subsolve: SubSolver
) -> tuple[np.ndarray, float] | None:
    """Factor of an X on all cells from the dual on the kept cells (module doc), and its upper
    bound ``max X_ii · max var``; None when no completion is found."""
    n = F.shape[1]
    A = pt.cells
    I = np.setdiff1d(np.arange(n), A)
    scale = float(pt.x.max())
    XA = (pt.bhat.T @ pt.bhat) / scale  # max diagonal 1
    r = pt.r * scale
    t = float(r.max())
    Fa, Fi = F[:, A], F[:, I]
    lam = pt.v * pt.v
    try:
        E = sla.solve(pt.gram, (Fa * lam[:, None]).T @ Fi, assume_a="pos", check_finite=False)
    except (np.linalg.LinAlgError, ValueError, sla.LinAlgError):
        return None
    G = Fi - Fa @ E
    alpha = 1.0 - np.einsum("ai,ab,bi->i", E, XA, E)
    if not np.all(alpha > 0):
        return None
    beta = t * (1.0 + delta) - r
    gn = np.linalg.norm(G, axis=1)
    rows = np.flatnonzero(gn > 1e-12 * max(float(gn.max()), 1e-300))
    sq = np.sqrt(alpha)
    if rows.size:
        As, cost = subsolve(G[rows] / sq[None, :], beta[rows], delta)
        Xs = As.T @ As
        if cost > 1.0:
            Xs = Xs / cost  # the queries then need t·cost: the bound below says so
    else:
        Xs = np.eye(I.size)
    Zm = sq[:, None] * Xs * sq[None, :]
    X = np.empty((n, n))
    XAE = XA @ E
    X[np.ix_(A, A)] = XA
    X[np.ix_(A, I)] = XAE
    X[np.ix_(I, A)] = XAE.T
    X[np.ix_(I, I)] = Zm + E.T @ XAE
    X = 0.5 * (X + X.T)
    try:
        L = np.linalg.cholesky(X)
    except np.linalg.LinAlgError:
        return None
    Rq = sla.solve_triangular(L, F.T, lower=True, check_finite=False)
    var = np.einsum("ij,ij->j", Rq, Rq)
    return L.T, float(np.max(np.diag(X)) * var.max())


def warm_start(
    F: np.ndarray, *, rank: int, evaluations: int, deadline: float = math.inf
) -> tuple[np.ndarray, np.ndarray, float]:
    r"""First-order start: the multiplicative fixed point ``λ_j ← λ_j r_j/Δ``,
    ``μ_i ← μ_i X_ii/Δ`` of :mod:`dpmatrix._solvers.fitness`, SQUAREM-accelerated
    (:func:`~dpmatrix._solvers.squarem.squarem`), evaluated like the Newton iterates (no
    rowspace basis, no triangular solves).

    Returns
    -------
    (λ, μ, φ²) : the weights with the best dual bound seen and that bound.

    Examples
    --------
    Three cells each asked once (Δ² = 1, X = I):

    >>> lam, mu, low = warm_start(np.eye(3), rank=3, evaluations=5)
    >>> round(low, 9), mu.round(6).tolist()
    (1.0, [0.333333, 0.333333, 0.333333])
    """
    m, n = F.shape
    best: list = [-math.inf, None, None]
    count = [0]

    def step(x: np.ndarray) -> tuple[np.ndarray, float]:
        lam, mu = np.exp(x[:m]), np.exp(x[m:])
        count[0] += 1
        pt = _evaluate(F, _unit(np.sqrt(lam)), _unit(np.sqrt(mu)), rank, False, clamp=True)
        if pt is None:
            raise FloatingPointError("warm start: non-finite dual evaluation")
        low = pt.phi**2
        if low > best[0]:
            best[:] = [low, lam / lam.sum(), mu / mu.sum()]
        tiny = np.finfo(float).tiny
        xl = x[:m] + np.log(np.maximum(pt.r / pt.r.max(), tiny))
        xm = x[m:] + np.log(np.maximum(pt.x / pt.x.max(), tiny))
        return normalize_log_weights(np.concatenate([xl, xm]), m), low

    def done() -> bool:
        return count[0] >= evaluations or time.perf_counter() > deadline

    squarem(step, np.zeros(m + n), m, done)
    return best[1], best[2], float(best[0])


def newton_dual(
    F: np.ndarray,
    lam: np.ndarray,
    mu: np.ndarray,
    *,
    rank: int,
    tol: float,
    deadline: float = math.inf,
    subsolve: SubSolver | None = None,
    max_iter: int = 60,
) -> NewtonOutcome | None:
    r"""Newton's method on the fitness-for-use dual from a warm start (module doc).

    Parameters
    ----------
    F : ndarray (m × n)
        Target-scaled workload without proportional rows or columns
        (:func:`~dpmatrix._solvers.fitness_reduction.reduce_instance`).
    lam, mu : ndarray
        Warm start on the simplices (e.g. from the first-order fixed point).
    rank : int
        ``rank F``; cells are dropped (primal completion) only when it equals n.
    tol : float
        Target relative gap ``(upper − lower)/upper``.
    deadline : float
        ``time.perf_counter()`` value after which no new iteration starts.
    subsolve : callable, optional
        ``(W_sub, targets_sub, tol) -> (factor, cost)``: a certified Problem-1 solver for the
        completion (a factor ``A`` with ``AᵀA = X``, max diag = cost, variances ≤ targets).
        Without it no cell is dropped.
    max_iter : int
        Newton iterations at most.

    Returns
    -------
    NewtonOutcome or None
        None when the iteration broke down (singular system, no ascent); the caller then
        keeps its own iterate.

    Examples
    --------
    Cells and total of d = 3 values, equal targets (paper §5.1: Δ² = 2d/(d + 1)):

    >>> F = np.vstack([np.eye(3), np.ones((1, 3))])
    >>> out = newton_dual(F, np.full(4, .25), np.full(3, 1 / 3), rank=3, tol=1e-9)
    >>> round(out.lower, 6), round(out.upper, 6)
    (1.5, 1.5)
    """
    F = np.asarray(F, dtype=float)
    n = F.shape[1]
    run = _Run(F, rank, tol, deadline, can_drop=subsolve is not None and rank == n)
    v = _unit(np.sqrt(np.maximum(np.asarray(lam, dtype=float), 0.0)))
    w = _unit(np.sqrt(np.maximum(np.asarray(mu, dtype=float), 0.0)))
    w = run.drop_small(w) if run.can_drop else _unit(np.maximum(w, 1e-6 * w.max()))
    pt = run.start(v, w)
    if pt is None:
        return None
    for attempt in range(2):
        pt = run.iterate(pt, max_iter)
        if pt.cells.size == n:
            factor, upper = pt.bhat, pt.upper
            break
        done = _complete(F, pt, 0.25 * tol, subsolve)
        factor, upper = done if done is not None else (None, math.inf)
        if upper <= run.best_lower / (1.0 - tol) or attempt == 1:
            break
        # The completion failed: a dropped cell is needed after all (a weight that passed
        # near 0 on the way).  Put the dropped cells back, never to drop them again.
        dropped = np.setdiff1d(np.arange(n), pt.cells)
        run.keep[dropped] = True
        w = pt.w.copy()
        w[dropped] = 1e-3 * float(np.max(np.abs(w)))
        pt = run.start(pt.v, _unit(w))
        if pt is None:
            break
    if factor is None:
        return None
    lam_out, mu_out = run.best_dual[0] ** 2, run.best_dual[1] ** 2
    return NewtonOutcome(
        strategy=factor, query_weights=lam_out / lam_out.sum(), cell_weights=mu_out / mu_out.sum(),
        lower=float(run.best_lower), upper=float(upper), evaluations=run.evals,
    )


class _Run:
    """State of one Newton solve: evaluation mode, best dual, cells that may not be dropped."""

    def __init__(self, F: np.ndarray, rank: int, tol: float, deadline: float, *, can_drop: bool):
        self.F, self.rank, self.tol, self.deadline, self.can_drop = F, rank, tol, deadline, can_drop
        self.keep = np.zeros(F.shape[1], dtype=bool)
        self.evals = 0
        self.accurate = False
        self.best_lower = -math.inf
        self.best_dual: tuple[np.ndarray, np.ndarray] | None = None

    def drop_small(self, w: np.ndarray) -> np.ndarray:
        small = (w * w < _DROP_CELL * float(np.max(w * w))) & ~self.keep
        return _unit(np.where(small, 0.0, w))

    def evaluate(self, v: np.ndarray, w: np.ndarray) -> _Point | None:
        pt = _evaluate(self.F, v, w, self.rank, self.accurate)
        self.evals += 1
        if pt is not None and pt.phi**2 > self.best_lower:
            self.best_lower, self.best_dual = pt.phi**2, (pt.v, pt.w)
        return pt

    def reenter(self, pt: _Point) -> _Point | None:
        """Give a small weight back to zero-weight queries whose variance exceeds all others'
        (their target binds after all)."""
        back = (pt.v == 0) & (pt.r > float(pt.r[pt.v != 0].max()) * (1.0 + 1e-12))
        if not back.any():
            return pt
        v = pt.v.copy()
        v[back] = _REENTER * float(np.abs(v).max())
        return self.evaluate(_unit(v), pt.w)

    def start(self, v: np.ndarray, w: np.ndarray) -> _Point | None:
        pt = self.evaluate(v, w)
        if (pt is None or pt.spread < _SVD_SPREAD) and not self.accurate:
            self.accurate = True
            pt = self.evaluate(v, w)
        return pt

    def iterate(self, pt: _Point, max_iter: int) -> _Point:
        """Newton steps from ``pt`` until the gap on the kept cells is ≤ tol/4, a stall, the
        deadline or ``max_iter`` evaluations in all."""
        n = self.F.shape[1]
        mark = (0, math.inf)
        hess: _Hessian | None = None
        it = 0
        while self.evals < max_iter and time.perf_counter() <= self.deadline:
            it += 1
            gap_a = max(pt.upper - pt.phi**2, 0.0) / pt.upper
            if gap_a <= 0.25 * self.tol:
                break
            if gap_a < 0.5 * mark[1]:
                mark = (it, gap_a)
            elif it - mark[0] > _STALL:
                break
            self.accurate = self.accurate or pt.spread < _SVD_SPREAD
            pt = self.reenter(pt)
            if pt is None:
                break
            active = _active_queries(pt)
            # A chord step (stale Hessian) only while the singular values are well spread:
            # near a barely active cell the Hessian changes too fast from step to step.
            reuse = 1 if self.accurate else _REUSE
            if hess is None or hess.age >= reuse or not hess.covers(pt, active):
                hess = _build_hessian(pt, active)
            hess = _Hessian(H=hess.H, queries=hess.queries, cells=hess.cells, age=hess.age + 1)
            step = _newton_direction(pt, active, hess)
            if step is None:
                if hess.age > 1:  # a stale Hessian: rebuild
                    hess = None
                    continue
                break
            dv, dw, slope = step
            a, nxt, prune = 1.0, None, 2
            while a > 1e-8:
                v2 = pt.v.copy()
                v2[active] += a * dv
                w2 = np.zeros(n)
                w2[pt.cells] = pt.w[pt.cells] + a * dw
                v2, w2 = _unit(v2), _unit(w2)
                if prune == 2:
                    v2 = _zero_slack(v2, pt)
                if prune >= 1 and self.can_drop:
                    w2 = self.drop_small(w2)
                cand = self.evaluate(v2, w2)
                if cand is not None and cand.spread < _SINGULAR:
                    # numerically singular (zeroed query weights no longer cover some kept
                    # cell, or a weight passed near 0): its primal cannot be trusted.  Retry
                    # the step zeroing cell weights only, then zeroing nothing.
                    if prune:
                        prune -= 1
                        continue
                    cand = None
                if cand is not None and (cand.phi >= pt.phi * (1 - 1e-13) or abs(slope) < 1e-12 * pt.phi):
                    nxt = cand
                    break
                a *= 0.5
                prune = 2
            if nxt is None:
                if hess.age > 1:
                    hess = None  # retry with a fresh Hessian
                    continue
                break
            pt = nxt
        return pt
