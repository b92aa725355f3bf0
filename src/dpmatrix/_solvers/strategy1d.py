"""One-dimensional strategy optimizer for ResidualPlanner+ (HDMM's OPT_0, p-identity template).

ResidualPlanner+ needs, for every attribute with a non-identity base workload ``W_i``
(prefix sums, ranges, ...), a *strategy replacement* ``S_i`` (paper section 7.2) that
Algorithm 4 turns into the subtraction matrix ``Sub_i``.  Following the paper's section 9
("We use the 1-dimensional optimizer included with HDMM to obtain a replacement strategy
matrix S_i for each base matrix W_i after projecting out the 1 vector from each workload
query") we optimize HDMM's p-identity template (McKenna et al., 2018) for the **centred**
workload

    W_c = W (I - 1 1ᵀ / n).

Why centred: ResidualPlanner+ measures the ``1`` direction of every attribute separately —
it is the ∅ residual (and ``1ᵀ`` factors of higher residuals), whose noise is chosen by the
σ² optimization, not by ``S_i``.  Algorithm 4 itself centres the strategy
(``P1 = S (I - 11ᵀ/n)``), so only the part of ``W`` orthogonal to ``1`` is answered through
``Sub_i``; optimizing for ``W`` itself would waste strategy rows on the total.

Template (Gaussian noise, L2 sensitivity): ``A(Θ) = [I_n; Θ] D``, ``Θ ≥ 0`` (``p × n``),
``D = diag(1 / ||column_j of [I; Θ]||_2)`` so every column of ``A`` has unit L2 norm
(sensitivity 1).  The loss is the total squared error of answering ``W_c`` from ``A x + N(0, I)``:

    f(Θ) = ||W_c A⁺||_F² = tr[(AᵀA)⁻¹ W_cᵀ W_c],

minimized with L-BFGS-B (bounds ``Θ ≥ 0``) and an analytic gradient, from several random
restarts drawn from an explicit ``numpy.random.Generator``.

Per-attribute objective of ResidualPlanner+: for the weighted sum-of-variances objective the
strategy of attribute ``i`` enters the optimal total only through ``beta_i · trace_in_i``
(Theorems 7.1/7.2 and Lemma 2: every term ``sqrt(v_A p_A)`` with ``i ∈ A`` carries the factor
``sqrt(beta_i trace_in_i)``), i.e. ``max col-norm²(P1) · ||W_c P1⁺||_F²``.  The HDMM loss
above is a surrogate for it: centring can only shrink the trace factor
(``||W_c P1⁺||_F ≤ ||W_c S⁺||_F``) and usually, but not always, the sensitivity factor; so
:func:`strategy_matrix` with ``"pidentity"`` keeps whichever of {optimized, identity, W} has
the smaller ``beta · trace_in``. Because that cost is exactly the low-dimensional
matrix-mechanism objective for the centred workload, ``"auto"``/``"optimal"`` minimizes it
directly (:func:`optimal_strategy`, certified by a duality gap) and is the default.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from .._linalg.kron import is_identity
from .._mechanisms.basis import attribute_basis
from ..errors import WorkloadError
from .lowdim_optimal import optimize_subworkload
from .maxvar_strategy import optimize_maxvar_strategy
from .result import SolverResult, relative_gap
from .spectra import certified_sqrt_trace_gram

__all__ = [
    "default_p",
    "auto_p",
    "centered",
    "pidentity_strategy",
    "pidentity_loss_and_grad",
    "optimize_pidentity",
    "optimized_strategy",
    "strategy_loss",
    "rp_attribute_cost",
    "l2_strategy",
    "maxvar_strategy",
    "default_strategy_kind",
    "strategy_matrix",
]


def default_p(n: int) -> int:
    """Default number of extra p-identity rows: ``ceil(n / 16)``, at least 1."""
    return max(1, math.ceil(int(n) / 16))


def auto_p(n: int) -> int:
    """``p`` used by ``strategy_matrix(W, "auto")``: ``max(default_p(n), ceil(n / 2))``."""
    return max(default_p(n), math.ceil(int(n) / 2))


def centered(W: np.ndarray) -> np.ndarray:
    """``W (I - 1 1ᵀ / n)``: every query with its projection on ``1`` removed."""
    W = np.asarray(W, dtype=float)
    return W - W.mean(axis=1, keepdims=True)


def pidentity_strategy(theta: np.ndarray) -> np.ndarray:
    """``[I; Θ] D`` with columns scaled to unit L2 norm (``Θ`` is ``p × n``)."""
    theta = np.asarray(theta, dtype=float)
    n = theta.shape[1]
    A = np.vstack([np.eye(n), theta])
    return A / np.sqrt(1.0 + np.sum(theta**2, axis=0))


def pidentity_loss_and_grad(theta_flat: np.ndarray, G: np.ndarray, p: int) -> tuple[float, np.ndarray]:
    """Loss ``tr[(AᵀA)⁻¹ G]`` of the L2 p-identity strategy and its gradient in ``Θ``.

    ``G = W_cᵀ W_c`` (``n × n``).  With ``s_j = sqrt(1 + Σ_i Θ_ij²)``, ``C = diag(s) G diag(s)``
    and ``X = (I + ΘᵀΘ)⁻¹`` we have ``AᵀA = D (I + ΘᵀΘ) D``, ``f = tr(X C)`` and

        ∂f/∂Θ = -2 Θ X C X + 2 Θ diag(u / s),   u_j = Σ_k X_jk G_jk s_k.

    ``X`` is never inverted at size n: Woodbury gives ``X = I - Θᵀ R`` with
    ``R = (I_p + ΘΘᵀ)⁻¹ Θ``, and ``Θ X = R``; the cost is ``O(n² p)``.
    """
    n = G.shape[0]
    theta = np.reshape(theta_flat, (p, n))
    s = np.sqrt(1.0 + np.sum(theta**2, axis=0))
    C = G * np.outer(s, s)
    K = np.eye(p) + theta @ theta.T
    R = np.linalg.solve(K, theta)  # p × n, equals Θ X
    ThR = theta.T @ R  # n × n, X = I - ThR
    loss = float(np.trace(C) - np.sum(ThR * C))
    RC = R @ C  # p × n
    RCX = RC - (RC @ theta.T) @ R  # Θ X C X = R C X
    X = np.eye(n) - ThR
    u = (X * G) @ s
    grad = -2.0 * RCX + 2.0 * theta * (u / s)[None, :]
    return loss, grad.ravel()


def strategy_loss(W, S, *, center: bool = True) -> float:
    """HDMM-style loss ``||W_c S⁺||_F² · max_j ||S[:, j]||²`` (scale invariant).

    Total squared error of answering ``W_c`` (or ``W`` if ``center=False``) from ``S x`` with
    Gaussian noise calibrated to unit L2 sensitivity.  Returns ``inf`` if ``S`` cannot answer it.
    """
    W = np.asarray(W, dtype=float)
    S = np.asarray(S, dtype=float)
    Wq = centered(W) if center else W
    Sp = np.linalg.pinv(S)
    if np.linalg.norm(Wq - Wq @ Sp @ S) > 1e-8 * max(1.0, np.linalg.norm(Wq)):
        return math.inf
    return float(np.sum((Wq @ Sp) ** 2) * np.max(np.sum(S**2, axis=0)))


def rp_attribute_cost(W, S) -> float:
    """ResidualPlanner+ per-attribute factor ``beta · trace_in`` of strategy ``S`` for ``W``.

    This is what a strategy changes in the optimal sum of variances (see module docstring).
    ``inf`` if ``S`` cannot answer ``W``.
    """
    try:
        b = attribute_basis(W, S)
    except WorkloadError:
        return math.inf
    return b.beta * b.trace_in


@dataclass(frozen=True, eq=False, kw_only=True)
class PIdentityResult(SolverResult):
    """Result of :func:`optimize_pidentity`.

    ``S`` (= ``solution``) is the strategy (unit L2 column norms), ``theta`` its ``Θ``, ``loss``
    (= ``objective``) its loss ``tr[(SᵀS)⁻¹ W_cᵀW_c]`` and ``losses`` every restart's loss.  The
    search is non-convex (``status="heuristic"``); ``lower_bound`` is the SVD bound
    ``(Σσ(W_c))² / n`` (Li & Miklau §3.2: no strategy of L2 sensitivity 1 does better), computed
    with a rounding allowance; ``iterations`` sums the L-BFGS-B iterations of all restarts.
    """

    theta: np.ndarray = field(repr=False)
    losses: tuple[float, ...]

    @property
    def S(self) -> np.ndarray:
        return self.solution

    @property
    def loss(self) -> float:
        return self.objective


def optimize_pidentity(
    W,
    p: int | None = None,
    *,
    rng: np.random.Generator | None = None,
    restarts: int = 5,
    center: bool = True,
    maxiter: int = 1000,
) -> PIdentityResult:
    """Optimize the L2 p-identity template for ``W_c`` (or ``W``) with L-BFGS-B restarts.

    ``rng`` must be an explicit ``numpy.random.Generator`` (default: ``default_rng(0)``); it
    draws each restart's initial ``Θ`` uniformly in ``[0, 1)`` as HDMM does.  Returns the best
    restart.  Uncached: use :func:`optimized_strategy` for the cached version.
    """
    W = np.asarray(W, dtype=float)
    if W.ndim != 2 or W.shape[1] < 1:
        raise WorkloadError(f"workload must be a 2-D matrix; got shape {W.shape}")
    n = W.shape[1]
    p = default_p(n) if p is None else int(p)
    if p < 1:
        raise WorkloadError(f"p (extra strategy rows) must be ≥ 1, got {p}")
    if restarts < 1:
        raise WorkloadError(f"restarts must be ≥ 1, got {restarts}")
    if rng is None:
        rng = np.random.default_rng(0)
    elif not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator (use numpy.random.default_rng(seed))")
    Wq = centered(W) if center else W
    G = Wq.T @ Wq
    scale = float(np.trace(G)) or 1.0
    Gs = G / scale  # keep the loss O(1) for L-BFGS-B's tolerances
    best = None
    losses = []
    iterations = 0
    bounds = [(0.0, None)] * (p * n)
    for _ in range(restarts):
        x0 = rng.random(p * n)
        res = minimize(
            pidentity_loss_and_grad,
            x0,
            args=(Gs, p),
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": maxiter, "ftol": 1e-10, "gtol": 1e-7},
        )
        loss = float(res.fun) * scale
        losses.append(loss)
        iterations += int(res.nit)
        if best is None or loss < best[0]:
            best = (loss, np.maximum(res.x, 0.0).reshape(p, n))
    loss, theta = best
    lower = min(certified_sqrt_trace_gram(G) ** 2 / n, loss)
    return PIdentityResult(
        solution=pidentity_strategy(theta), objective=loss, lower_bound=lower,
        gap=relative_gap(loss, lower), status="heuristic", iterations=iterations, theta=theta,
        losses=tuple(losses),
    )


@functools.lru_cache(maxsize=128)
def _optimized_cached(shape, wbytes, p, seed, restarts, center) -> np.ndarray:
    W = np.frombuffer(wbytes, dtype=float).reshape(shape)
    res = optimize_pidentity(W, p, rng=np.random.default_rng(seed), restarts=restarts, center=center)
    S = res.S
    S.setflags(write=False)
    return S


def optimized_strategy(W, p: int | None = None, *, seed: int = 0, restarts: int = 5, center: bool = True) -> np.ndarray:
    """Cached :func:`optimize_pidentity` strategy, keyed by (W bytes, n, p, seed, restarts, center).

    The returned array is read-only (it is shared through the cache); ``.copy()`` it to edit.
    """
    W = np.ascontiguousarray(W, dtype=float)
    if W.ndim != 2:
        raise WorkloadError(f"workload must be a 2-D matrix; got shape {W.shape}")
    n = W.shape[1]
    p = default_p(n) if p is None else int(p)
    return _optimized_cached(W.shape, W.tobytes(), p, int(seed), int(restarts), bool(center))


_KINDS = ("auto", "optimal", "l2", "maxvar", "pidentity", "optimize", "identity", "workload")


def optimal_strategy(W, *, tol: float = 1e-6) -> np.ndarray:
    """The certified optimal strategy for ResidualPlanner+'s per-attribute factor.

    ResidualPlanner+ pays ``β · trace_in`` per attribute in every residual set (Theorems 7.1,
    7.2, Lemma 2), with ``β = max diag(Subᵀ Sub)`` and ``trace_in = ||W Sub⁺||_F²``; since
    ``Sub`` spans the centred strategy, minimizing it over strategies is exactly the
    low-dimensional matrix-mechanism problem (QuerySmasher eq. 4) for the centred workload
    ``W (I − 11ᵀ/n)``: minimize ``tr(W_cᵀ W_c X⁺)`` s.t. ``diag X ≤ 1``. It is solved by
    :func:`~dpmatrix._solvers.lowdim_optimal.optimize_subworkload` with a duality-gap certificate;
    the returned strategy is its ``B`` (rows centred). Cached by the solver.
    """
    W = np.asarray(W, dtype=float)
    mech = optimize_subworkload(centered(W), sizes=(W.shape[1],), tol=tol)
    S = np.array(mech.B)
    S.setflags(write=False)
    return S


def l2_strategy(W, *, tol: float = 1e-6) -> np.ndarray:
    """The optimal Gaussian strategy for ``W`` itself: ``min ||W S⁺||_F² · max_j ||S_{:,j}||²``
    (QuerySmasher eq. 4 on the uncentred ``W``; HDMM's convex 1-D optimizer with L2
    sensitivity, the paper's section 9). Certified to a relative duality gap ``tol`` by
    :func:`~dpmatrix._solvers.lowdim_optimal.optimize_subworkload`; its rows span ``W`` (so the
    total, as every workload matrix contains it). With the split residual construction the
    1-D mechanism it defines is kept whole, so a single Kronecker-product workload gets
    HDMM's optimal error. Read-only; cached by the solver."""
    S = np.array(optimize_subworkload(np.asarray(W, dtype=float), tol=tol).B)
    S.setflags(write=False)
    return S


def maxvar_strategy(W) -> np.ndarray:
    """The max-variance-optimal Gaussian strategy for ``W`` (fitness-for-use, Problem 1, with
    equal targets): minimizes ``max_j var_j · max_j ||S_{:,j}||²``; see
    :mod:`~dpmatrix._solvers.maxvar_strategy`. Read-only; cached by the solver."""
    S = np.array(optimize_maxvar_strategy(np.asarray(W, dtype=float)).B)
    S.setflags(write=False)
    return S


def default_strategy_kind(construction: str = "centred", objective: str = "sum_var") -> str:
    """What ``"auto"``/``"optimal"`` means for a non-identity workload: the certified optimum of
    Algorithm 4's per-attribute factor (``construction="centred"``); for the split construction,
    the optimal strategy for ``W`` itself under the objective (``"maxvar"`` for ``max_var``,
    ``"l2"`` otherwise)."""
    if construction != "split":
        return "centred_optimal"
    return "maxvar" if objective == "max_var" else "l2"


def strategy_matrix(
    W, strategy="auto", *, p: int | None = None, seed: int = 0, restarts: int = 5,
    construction: str = "centred", objective: str = "sum_var",
) -> np.ndarray:
    """The strategy replacement ``S_i`` for base workload ``W`` (``m × n``).

    ``strategy``:
      * ``"auto"`` (default): the identity if ``W`` is the identity (ResidualPlanner's case),
        otherwise ``"optimal"``.
      * ``"optimal"``: the best per-attribute strategy for the residual ``construction`` and
        the ``objective`` (:func:`default_strategy_kind`): for Algorithm 4 (``"centred"``)
        :func:`optimal_strategy`, the certified minimizer of the per-attribute factor
        ``beta · trace_in`` (QuerySmasher eq. 4 on the centred ``W``); for ``"split"``,
        ``"l2"`` (sums of variances) or ``"maxvar"`` (maximum variance).
      * ``"l2"``: :func:`l2_strategy`, the optimal Gaussian strategy for ``W`` itself.
      * ``"maxvar"``: :func:`maxvar_strategy`, the max-variance-optimal strategy for ``W``.
      * ``"pidentity"``: the candidate among {optimized p-identity with ``p = auto_p(n)`` (or the
        given ``p``), identity, ``W``} with the smallest ``beta · trace_in``
        (:func:`rp_attribute_cost`) — HDMM's OPT_0 idea as in the paper's section 9.
        ``auto_p(n) = ceil(n/2)``: HDMM's ``ceil(n/16)`` is tuned for large domains and loses
        up to ~15-40 % RMSE per attribute on small per-attribute domains (8-64 values).
      * ``"optimize"`` (alias ``"hdmm"``, ``"opt"``): :func:`optimized_strategy`.
      * ``"identity"``: ``I_n``.   * ``"workload"``: ``S = W``.
      * a matrix with ``n`` columns whose rows can answer every centred query of ``W``.
    """
    W = np.asarray(W, dtype=float)
    if W.ndim != 2:
        raise WorkloadError(f"workload must be a 2-D matrix; got shape {W.shape}")
    n = W.shape[1]
    if isinstance(strategy, str):
        kind = strategy.lower()
        if kind in ("hdmm", "opt", "optimized"):
            kind = "optimize"
        if kind == "pidentity":
            kind = "pidentity_auto"
        if kind not in _KINDS and kind != "pidentity_auto":
            raise WorkloadError(f"unknown strategy {strategy!r}; use one of {list(_KINDS)} or a matrix with {n} columns")
        if kind == "identity":
            return np.eye(n)
        if kind == "auto" and is_identity(W):
            return np.eye(n)
        if kind in ("auto", "optimal"):
            kind = default_strategy_kind(construction, objective)
            if kind == "centred_optimal":
                return optimal_strategy(W)
        if kind == "l2":
            return l2_strategy(W)
        if kind == "maxvar":
            return maxvar_strategy(W)
        if kind == "workload":
            return W.copy()
        if kind == "optimize":
            return optimized_strategy(W, p, seed=seed, restarts=restarts)
        # pidentity (the only kind left): best of p-identity / identity / W; on the identity
        # workload that is the identity (ResidualPlanner)
        if is_identity(W):
            return np.eye(n)
        p_auto = auto_p(n) if p is None else p
        cands = [optimized_strategy(W, p_auto, seed=seed, restarts=restarts), np.eye(n), W]
        costs = [rp_attribute_cost(W, S) for S in cands]
        return cands[int(np.argmin(costs))]
    S = np.asarray(strategy, dtype=float)
    if S.ndim != 2 or S.shape[1] != n:
        raise WorkloadError(f"strategy matrix must be 2-D with {n} columns (one per value); got shape {S.shape}")
    if not np.all(np.isfinite(S)):
        raise WorkloadError("strategy matrix contains non-finite entries (NaN or inf)")
    Wc, Sc = centered(W), centered(S)
    if np.linalg.norm(Wc - Wc @ np.linalg.pinv(Sc) @ Sc) > 1e-8 * max(1.0, np.linalg.norm(Wc)):
        raise WorkloadError(
            "strategy matrix cannot answer the workload: some query (minus its total component) is "
            "not a linear combination of the strategy rows; add rows (e.g. the identity) to the strategy"
        )
    return S
