"""Fast, exact solver for ResidualPlanner's max-variance selection problem.

The problem
-----------
ResidualPlanner measures one base mechanism per attribute set ``A`` in the closure of the
workload, with noise variance ``x_A = sigma_A^2 > 0``.

* Privacy cost (Theorem 4.3):  ``pcost(x) = sum_A p_A / x_A`` with
  ``p_A = prod_{i in A} (n_i - 1) / n_i``.
* Cell variance of workload marginal ``M`` (Theorem 4.4), identical for every cell of ``M``:
  ``Var_M(x) = sum_{A subset of M} c_{M,A} x_A`` with
  ``c_{M,A} = prod_{i in A} (n_i - 1)/n_i * prod_{j in M \\ A} 1/n_j^2``.

Max-variance selection: minimise ``max_M w_M Var_M(x)`` subject to ``pcost(x) <= c``.  Both
sides are homogeneous (``x -> s x`` multiplies variances by ``s`` and the cost by ``1/s``), so
it is equivalent to the *utility-constrained* problem

    (P)   minimise  f(x) = sum_j p_j / x_j   subject to   C x <= 1,  x > 0,

with ``C[M, A] = w_M c_{M,A}`` (``C >= 0``, one row per workload marginal).  If ``x*`` solves
(P) with value ``f*`` then ``sigma^2 = x* f* / c`` has cost exactly ``c`` and max weighted
variance ``f* / c``, and that is optimal (:func:`solve_max_variance`).

Duality (the certificate)
-------------------------
The Lagrangian is ``L(x, lam) = sum_j p_j/x_j + lam^T (C x - 1)`` with ``lam >= 0``.  Writing
``u = C^T lam``, the minimisation over ``x_j > 0`` separates: ``p_j/x_j + u_j x_j`` is minimised
at ``x_j = sqrt(p_j / u_j)`` with value ``2 sqrt(p_j u_j)`` (and infimum 0 when ``u_j = 0``).
Hence the concave dual function is

    g(lam) = 2 sum_j sqrt(p_j (C^T lam)_j) - sum_i lam_i,

and every ``lam >= 0`` gives a lower bound ``g(lam) <= f*`` (weak duality); at the optimum
``x*_j = sqrt(p_j / (C^T lam*)_j)`` and ``g(lam*) = f*`` (Slater holds: a small multiple of the
all-ones vector is strictly feasible).  Because ``g(t lam) = 2 sqrt(t) a - t b`` with
``a = sum sqrt(p u)``, ``b = sum lam``, the best multiple of a given ``lam`` gives the sharper
bound ``max_t g(t lam) = a^2 / b``; that is the lower bound we report.  Symmetrically, any
``x > 0`` rescaled to ``x / max(C x)`` is feasible, so ``f(x) * max(C x)`` is an upper bound.
The solver stops when ``(upper - lower) / upper <= tol``: the returned gap is a proof of
optimality, not a heuristic stopping rule.

The method: primal-dual interior point with a structurally feasible primal
---------------------------------------------------------------------------
We solve the KKT system of (P) with slacks ``s = 1 - C x``::

    C^T lam = p / x^2          (stationarity; the p/x term is its own barrier for x > 0)
    lam * s  = sigma * mu       (perturbed complementarity, mu = lam^T s / m)
    lam, s, x > 0

by Mehrotra predictor-corrector Newton steps.  The slack is never an independent variable: it
is always recomputed as ``s = 1 - C x`` and the Newton direction satisfies ``ds = -C dx``, so the
primal iterates stay *exactly* feasible whatever the accuracy of the linear solves (inexact
solves only perturb the dual residual, which the next iteration corrects).  With
``H = diag(2 p / x^3)`` and ``r_d = C^T lam - p/x^2``, ``r_c = lam*s - sigma mu``, eliminating
``dx = -H^{-1}(r_d + C^T dlam)`` gives the reduced system in the constraint space

    (C H^{-1} C^T + diag(s / lam)) dlam = -r_c / lam - C H^{-1} r_d.

* By default the matrix is never formed -- for all <=3-way marginals it would be dense,
  because the empty set is a subset of every marginal -- and the system is solved with
  preconditioned conjugate gradients.  A matrix-vector product costs two sparse products with
  ``C`` (``C^T v`` then ``C (h * .)``), i.e. ``O(nnz(C))``, and the Jacobi preconditioner
  ``diag = (C o C) h + s/lam`` costs one more.  Near the optimum inactive rows have huge
  ``s/lam`` (decoupled, handled exactly by Jacobi) and active rows have ``s/lam -> 0``, so the
  preconditioned system stays well conditioned on non-degenerate problems; CG tolerances are
  tightened together with the duality gap.  Everything is vectorised numpy/scipy.  (Even for
  real schemas with a few hundred rows PCG beats forming and factoring the dense matrix by
  ~100x; a dense Cholesky path is kept as a fallback for small systems on which CG stalls.)

Start point: ``x0 = t sqrt(p / colsum(C))`` with ``t`` chosen so ``max(C x0) = 1/2`` and
``lam0 = 1/t^2``.  Then ``C^T lam0 = p / x0^2`` exactly (dual residual zero) and ``s0 in [1/2,1]``,
a well-centred start.  Marginal workloads need 5-15 interior-point iterations (each: two reduced
solves, predictor and corrector), with a step fraction of 0.95 to the boundary; badly scaled
random sparse instances (entries spanning 1e-10..1e3) took 30-80 in our tests.

Why this is fast on the paper's benchmark: on Synth-n^d every attribute has the same size, so
the problem is invariant under permuting attributes; the CG right-hand sides stay in the
invariant subspace (dimension = number of distinct marginal sizes, 4 for <=3-way), and CG
converges in a handful of iterations.  This is a property of Krylov methods, not a special
case in the code; asymmetric instances simply take more CG iterations (the benchmark script also
times one).

Zero columns of ``C`` (a variable that no constraint mentions) make the infimum of (P)
unattained (``p_j/x_j -> 0`` only as ``x_j -> infinity``): that is rejected with ``ValueError``;
for marginal workloads it means the closure contains a set that no workload marginal uses.
All-zero rows (a vacuous constraint ``0 <= 1``) are allowed and get multiplier 0.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from .result import SolverResult, relative_gap

__all__ = [
    "MaxVarProblem",
    "MaxVarianceResult",
    "MinCostResult",
    "dual_bound",
    "solve_max_variance",
    "solve_min_cost",
]


# --------------------------------------------------------------------------------------------
# Problem builder for marginal workloads
# --------------------------------------------------------------------------------------------


class MaxVarProblem(NamedTuple):
    """Data of the max-variance problem for a marginal workload.

    ``p[j]`` is the privacy-cost coefficient of closure set ``closure[j]``; ``C`` has one row
    per workload marginal (in input order) and one column per closure set.  ``closure`` is an
    ``(n_sets, k_max)`` int array of sorted attribute indices padded with ``-1``; closure sets
    are ordered by size, then lexicographically (the empty set, if present, comes first).
    """

    p: np.ndarray
    C: sp.csr_matrix
    closure: np.ndarray
    workload: list[tuple[int, ...]] | None

    def closure_sets(self) -> list[tuple[int, ...]]:
        """The closure as a list of tuples (slow for millions of sets)."""
        return [tuple(int(a) for a in row if a >= 0) for row in self.closure]


def _validate(p: Any, C: Any) -> tuple[np.ndarray, sp.csr_matrix]:
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"p must be a non-empty 1-D array, got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p <= 0):
        raise ValueError("p must be finite and strictly positive (p_A = prod (n_i-1)/n_i > 0)")
    if sp.issparse(C):
        C = sp.csr_matrix(C, dtype=np.float64)
    else:
        Cd = np.asarray(C, dtype=np.float64)
        if Cd.ndim != 2:
            raise ValueError(f"C must be a 2-D matrix, got {Cd.ndim} dimensions")
        C = sp.csr_matrix(Cd)
    if C.shape[1] != p.size:
        raise ValueError(
            f"shape mismatch: C has {C.shape[1]} columns but p has {p.size} entries "
            "(one column per variable)"
        )
    C.sum_duplicates()
    if not np.all(np.isfinite(C.data)):
        raise ValueError("C contains NaN or infinite entries")
    if np.any(C.data < 0):
        raise ValueError("C must be entrywise >= 0 (variances are positive combinations)")
    C.eliminate_zeros()
    colnnz = np.bincount(C.indices, minlength=p.size)
    if np.any(colnnz == 0):
        bad = np.nonzero(colnnz == 0)[0]
        raise ValueError(
            f"{bad.size} column(s) of C are all zero (first: {bad[:5].tolist()}): such a variable "
            "is unconstrained, the cost p_j/x_j only tends to 0 as x_j -> infinity and the "
            "minimum is not attained; remove these variables (noise-free sets are not "
            "allowed) or add the constraint that uses them"
        )
    return p, C


def dual_bound(p: np.ndarray, C: sp.csr_matrix, lam: np.ndarray) -> tuple[float, float]:
    """Lower bounds on ``min sum p/x s.t. Cx <= 1`` from multipliers ``lam >= 0``.

    Returns ``(g(lam), max_t g(t lam))`` with ``g(lam) = 2 sum sqrt(p * C^T lam) - sum lam``;
    the second is ``(sum sqrt(p * C^T lam))^2 / sum lam``.
    """
    lam = np.maximum(np.asarray(lam, dtype=np.float64), 0.0)
    u = np.maximum(C.T @ lam, 0.0)
    a = float(np.sum(np.sqrt(p * u)))
    b = float(lam.sum())
    g = 2.0 * a - b
    scaled = a * a / b if b > 0 else 0.0
    return g, scaled


# --------------------------------------------------------------------------------------------
# Solver
# --------------------------------------------------------------------------------------------


# iterations without a 10 % gain in the certified gap after which the solver stops ("stalled")
_STALL = 40
# iterations without a 10 % gain after which 'auto' switches to the exactly preconditioned CG
_SWITCH = 8


def _max_step(v: np.ndarray, dv: np.ndarray) -> float:
    neg = dv < 0
    if not np.any(neg):
        return math.inf
    return float(np.min(-v[neg] / dv[neg]))


def _pcg(matvec, b, minv, x0, rtol, maxiter):
    """Preconditioned conjugate gradients for an SPD operator (vectorised numpy); ``minv`` is
    the inverse of a diagonal preconditioner (a vector) or a function applying an SPD one.

    Stops when the *preconditioned* residual norm ``sqrt(r^T M^{-1} r)`` is ``rtol`` times that
    of the right-hand side.  This is invariant under the diagonal scaling, which matters here:
    rows of the reduced system differ by many orders of magnitude near the optimum, and a plain
    residual norm is dominated by the (harmless) inactive rows.
    """
    apply = minv if callable(minv) else (lambda r: minv * r)
    bz = float(b @ apply(b))
    if bz == 0.0:
        return np.zeros_like(b), 0
    if x0 is None:
        x = np.zeros_like(b)
        r = b.copy()
    else:
        x = x0.copy()
        r = b - matvec(x)
    z = apply(r)
    pdir = z.copy()
    rz = float(r @ z)
    it = 0
    thresh = rtol * rtol * bz
    while it < maxiter and rz > thresh:
        ap = matvec(pdir)
        pap = float(pdir @ ap)
        if not pap > 0:
            break
        alpha = rz / pap
        x += alpha * pdir
        r -= alpha * ap
        z = apply(r)
        rz_new = float(r @ z)
        pdir *= rz_new / rz
        pdir += z
        rz = rz_new
        it += 1
    return x, it


def _cho_factor(K: np.ndarray):
    """Dense Cholesky of an SPD matrix, with a 1e-12 relative ridge if rounding made it fail."""
    try:
        return scipy.linalg.cho_factor(K, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        K[np.diag_indices(K.shape[0])] += 1e-12 * np.max(np.diag(K))
        return scipy.linalg.cho_factor(K, lower=True, check_finite=False)


def _spd_solver(K: sp.csc_matrix):
    """Solver for the sparse symmetric positive definite primal Newton matrix: a dense
    Cholesky for small or dense matrices, else a sparse LU (SuperLU, fill-reducing COLAMD
    order) — the matrix couples only variables that share a constraint, plus the few
    (low-order) sets that appear in every constraint."""
    n = K.shape[0]
    if n <= 2000 or K.nnz > 0.2 * n * n:
        fac = _cho_factor(K.toarray())
        return lambda b: scipy.linalg.cho_solve(fac, b, check_finite=False)
    import scipy.sparse.linalg as spla

    lu = spla.splu(K, permc_spec="COLAMD")
    return lu.solve


@dataclass(frozen=True, eq=False, kw_only=True)
class MinCostResult(SolverResult):
    """Result of :func:`solve_min_cost` for ``min Σ p/x s.t. C x ≤ 1``.

    ``solution`` is ``x`` (feasible: ``max(C x) = 1`` up to rounding), ``objective`` the primal
    value ``Σ p/x`` (an upper bound), ``lower_bound`` the certified dual bound
    ``max_t g(t λ)`` and ``gap = (objective − lower_bound) / objective``.  ``multipliers`` is
    ``λ`` (one per row of ``C``, 0 on all-zero rows; ``g(multipliers) = lower_bound``),
    ``linear_solver`` the last reduced-system solver used (``"pcg"``, ``"primal"`` or
    ``"cholesky"``), ``cg_iterations`` the total CG iterations and ``time`` the wall-clock
    seconds.  ``x``, ``lam``, ``primal_objective``, ``dual_bound`` and ``rel_gap`` are the
    historical names (of the former ``info`` dict).
    """

    multipliers: np.ndarray = field(repr=False)
    linear_solver: str
    cg_iterations: int
    time: float

    @property
    def x(self) -> np.ndarray:
        return self.solution

    @property
    def lam(self) -> np.ndarray:
        return self.multipliers

    @property
    def primal_objective(self) -> float:
        return self.objective

    @property
    def dual_bound(self) -> float:
        return self.lower_bound

    @property
    def rel_gap(self) -> float:
        return self.gap


@dataclass(frozen=True, eq=False, kw_only=True)
class MaxVarianceResult(SolverResult):
    """Result of :func:`solve_max_variance`: minimise ``max (C x)`` at privacy cost ``pcost``.

    ``solution`` is ``x`` (spending ``pcost``), ``objective = max(C x)`` (the max weighted
    variance), ``lower_bound = dual_bound / pcost`` (certified) and ``gap`` the relative gap;
    ``pcost`` is ``Σ p/x`` as spent and ``min_cost`` the underlying :class:`MinCostResult`.
    """

    pcost: float
    min_cost: MinCostResult = field(repr=False)

    @property
    def max_var(self) -> float:
        return self.objective

    @property
    def max_var_lower_bound(self) -> float:
        return self.lower_bound

    @property
    def linear_solver(self) -> str:
        return self.min_cost.linear_solver


# ---- the certificate -----------------------------------------------------------------------


class _Certificate(NamedTuple):
    """Bounds read off one iterate: feasible primal candidates ``(value, x)`` (in the order
    they are tried), the dual bound ``lower`` with the multiple ``lam_lower`` of ``lam`` that
    attains it (``g(lam_lower) = lower``), and ``u = Cᵀ lam``."""

    uppers: tuple[tuple[float, np.ndarray], ...]
    lower: float
    lam_lower: np.ndarray
    u: np.ndarray


def _certificate(p, Ck, CT, x, s, lam) -> _Certificate:
    """Upper and lower bounds on (P) at the iterate ``(x, s = 1 − C x, lam)`` (module docstring,
    "Duality"): ``f(x) · max(C x)`` from ``x`` rescaled to feasibility; the same for the primal
    point ``sqrt(p / Cᵀ lam)`` implied by ``lam`` (when ``Cᵀ lam > 0``); and the scaled dual
    bound ``max_t g(t lam) = (Σ sqrt(p Cᵀ lam))² / Σ lam``."""
    cx = 1.0 - s
    f = float(np.sum(p / x))
    uppers = [(f * float(np.max(cx)), x / float(np.max(cx)))]
    u = CT @ lam
    a = float(np.sum(np.sqrt(p * np.maximum(u, 0.0))))
    lower = a * a / float(lam.sum())
    lam_lower = lam * (a / float(lam.sum())) ** 2
    if np.all(u > 0):
        xl = np.sqrt(p / u)
        cxl = float(np.max(Ck @ xl))
        uppers.append((float(np.sum(p / xl)) * cxl, xl / cxl))
    return _Certificate(tuple(uppers), lower, lam_lower, u)


class _Best(NamedTuple):
    """Best bounds so far: the certified gap is ``(upper − lower) / upper``."""

    upper: float
    x: np.ndarray
    lower: float
    lam: np.ndarray

    @property
    def gap(self) -> float:
        return (self.upper - self.lower) / self.upper


def _improve(best: _Best, cert: _Certificate) -> _Best:
    """Keep the smallest upper and the largest lower bound of ``best`` and ``cert``."""
    upper, x, lower, lam = best
    for value, xv in cert.uppers:
        if value < upper:
            upper, x = value, xv
    if cert.lower > lower:
        lower, lam = cert.lower, cert.lam_lower
    return _Best(upper, x, lower, lam)


# ---- the linear-solver switch --------------------------------------------------------------


class _LinearSolverChoice(NamedTuple):
    """Which solver the reduced Newton system uses, and which switches ``"auto"`` may make.

    ``dense``: dense Cholesky of the ``m × m`` reduced matrix; ``primal``: CG preconditioned
    by the exact inverse (Woodbury through the ``n × n`` primal matrix); neither: Jacobi-
    preconditioned CG.  ``can_primal`` / ``can_dense``: the switches ``"auto"`` allows."""

    dense: bool
    primal: bool
    can_primal: bool
    can_dense: bool

    @classmethod
    def initial(cls, linear_solver: str, m: int, n: int) -> _LinearSolverChoice:
        if linear_solver not in ("auto", "pcg", "cholesky", "primal"):
            raise ValueError("linear_solver must be 'auto', 'pcg', 'cholesky' or 'primal'")
        auto = linear_solver == "auto"
        # 'auto' uses PCG and switches to a factorisation when CG stalls: of the n x n primal
        # system if there are not too many variables (n <= 50000), else of the m x m reduced one
        return cls(dense=linear_solver == "cholesky", primal=linear_solver == "primal",
                   can_primal=auto and n <= 50_000, can_dense=auto and m <= 4000)

    def after_progress_check(self, gaps: list[float]) -> _LinearSolverChoice:
        """No 10 % gain of the gap in ``_SWITCH`` iterations: inexact CG directions near a
        degenerate optimum; precondition with the exact inverse from now on."""
        if (not self.primal and self.can_primal and len(gaps) > _SWITCH
                and gaps[-1] > 0.9 * gaps[-1 - _SWITCH]):
            return self._replace(primal=True)
        return self

    def after_cg(self, k: int, cg_max_iter: int) -> _LinearSolverChoice:
        """CG needed ``k`` iterations for one solve: switch if it (nearly) stalled."""
        if not self.dense and not self.primal and self.can_primal and k >= 200:
            return self._replace(primal=True)
        if not self.dense and not self.primal and self.can_dense and k >= cg_max_iter:
            return self._replace(dense=True)
        return self

    @property
    def label(self) -> str:
        return "primal" if self.primal else ("cholesky" if self.dense else "pcg")


def _reduced_solver(choice: _LinearSolverChoice, Ck, CT, C2, hinv, dvec, dinv, cg_rtol,
                    cg_max_iter):
    """A function ``rhs, x0 -> (dlam, cg_iterations)`` solving the reduced system
    ``(C H⁻¹ Cᵀ + diag(dvec)) dlam = rhs`` with ``hinv = diag H⁻¹``, ``dvec = s/lam``,
    ``dinv = lam/s`` (module docstring, "The method")."""
    if choice.dense:
        m = Ck.shape[0]
        Ch = Ck.multiply(np.sqrt(hinv)[None, :]).tocsr()
        K = (Ch @ Ch.T).toarray()
        K[np.diag_indices(m)] += dvec
        fac = _cho_factor(K)

        def solve(rhs, x0=None):
            return scipy.linalg.cho_solve(fac, rhs, check_finite=False), 0

        return solve
    if choice.primal:
        # exact inverse of the reduced matrix through the n x n primal one (Woodbury):
        # (C H⁻¹ Cᵀ + S Λ⁻¹)⁻¹ = D − D C (H + Cᵀ D C)⁻¹ Cᵀ D,  D = Λ S⁻¹; as the
        # preconditioner, CG converges in a few iterations and keeps the accuracy
        # control of the reduced system
        psolve = _spd_solver((CT @ sp.diags(dinv) @ Ck + sp.diags(1.0 / hinv)).tocsc())

        def minv(r):
            dr = dinv * r
            return dr - dinv * (Ck @ psolve(CT @ dr))
    else:
        minv = 1.0 / (C2 @ hinv + dvec)  # Jacobi

    def matvec(v):
        return Ck @ (hinv * (CT @ v)) + dvec * v

    def solve(rhs, x0=None):
        return _pcg(matvec, rhs, minv, x0, cg_rtol, cg_max_iter)

    return solve


# ---- the Newton step -----------------------------------------------------------------------


class _Step(NamedTuple):
    x: np.ndarray
    lam: np.ndarray
    s: np.ndarray
    dlam: np.ndarray
    cg_iterations: tuple[int, int]
    steps: tuple[float, float]


def _newton_step(p, Ck, CT, x, lam, s, u, mu, solve, dl_prev) -> _Step:
    """One Mehrotra predictor-corrector step on the KKT system of (P), primal kept exactly
    feasible (``s`` recomputed as ``1 − C x``); ``u = Cᵀ lam``, ``mu = lamᵀ s / m``."""
    m = Ck.shape[0]
    hinv = x**3 / (2.0 * p)
    r_d = u - p / x**2
    base_rhs = -(Ck @ (hinv * r_d))

    def direction(r_c, x0=None):
        rhs = base_rhs - r_c / lam
        dl, k = solve(rhs, x0)
        dx = -hinv * (r_d + CT @ dl)
        ds = -(Ck @ dx)
        return dx, dl, ds, k

    # predictor (affine scaling)
    dx_a, dl_a, ds_a, k1 = direction(lam * s, dl_prev)
    ap = min(1.0, _max_step(x, dx_a), _max_step(s, ds_a))
    ad = min(1.0, _max_step(lam, dl_a))
    mu_aff = float((lam + ad * dl_a) @ (s + ap * ds_a)) / m
    sigma = min(1.0, (mu_aff / mu) ** 3)
    # corrector (centring + second-order term)
    r_c = lam * s + dl_a * ds_a - sigma * mu
    dx, dl, ds, k2 = direction(r_c, dl_a)
    # fraction to the boundary.  0.95 rather than the 0.99-0.999 common for LPs: letting a
    # slack drop 1000x in one step ruins the centring, and the next Newton step (whose
    # linearisation of p/x is poor far from the current x) can then collapse a variable
    # such as x_{} that appears in every row (seen at d=200 on Synth-10^d).
    eta = 0.95
    ap = min(1.0, eta * _max_step(x, dx), eta * _max_step(s, ds))
    ad = min(1.0, eta * _max_step(lam, dl))
    x = x + ap * dx
    lam = lam + ad * dl
    # keep the primal exactly feasible: recompute the slack from x
    s = 1.0 - Ck @ x
    if np.any(s <= 0) or np.any(x <= 0):  # rounding only; pull back into the interior
        x = np.maximum(x, 1e-300)
        x /= max(1.0, float(np.max(Ck @ x))) * (1.0 + 1e-12)
        s = np.maximum(1.0 - Ck @ x, 1e-300)
    return _Step(x, lam, s, dl, (k1, k2), (round(ap, 4), round(ad, 4)))


def _start_point(p, Ck, CT) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``x0 = t sqrt(p / colsum C)`` with ``max(C x0) = 1/2`` and ``lam0 = 1/t²``: dual residual
    zero and ``s0 = 1 − C x0 ∈ [1/2, 1]`` (module docstring)."""
    m = Ck.shape[0]
    colsum = CT @ np.ones(m)
    x = np.sqrt(p / colsum)
    t = 0.5 / float(np.max(Ck @ x))
    x *= t
    lam = np.full(m, 1.0 / t**2)
    s = 1.0 - Ck @ x
    return x, lam, s


def solve_min_cost(
    p: np.ndarray,
    C: sp.spmatrix | np.ndarray,
    tol: float = 1e-7,
    max_iter: int = 200,
    linear_solver: str = "auto",
    cg_max_iter: int = 2000,
    verbose: bool = False,
) -> MinCostResult:
    """Solve ``min sum_j p_j / x_j  s.t.  C x <= 1, x > 0`` to relative duality gap ``tol``.

    See the module docstring for the method and the certificate.

    Parameters
    ----------
    p : ndarray (n,)
        Positive cost coefficients.
    C : sparse or dense matrix (m × n)
        Entrywise non-negative; every column has a positive entry.
    tol : float
        Target relative duality gap, in (0, 1).
    max_iter : int
        Interior-point iteration limit.
    linear_solver : str
        ``"pcg"`` (matrix-free preconditioned CG on the reduced system), ``"cholesky"`` (dense
        factorisation of the ``m x m`` reduced matrix; only for small ``m``), ``"primal"`` (CG
        preconditioned by the exact inverse of the reduced matrix, obtained by Woodbury from a
        factorisation of the ``n x n`` primal matrix ``H + Cᵀ diag(lam/s) C`` — dense Cholesky,
        sparse LU past 2000 variables; for few variables and many constraints) or ``"auto"``
        (Jacobi-preconditioned CG; after 8 iterations without progress, or if CG stalls, the
        primal preconditioner when ``n <= 50000``, else Cholesky when ``m <= 4000``).  Jacobi
        CG stalls on degenerate problems where many constraints are active together — e.g.
        ResidualPlanner+ workloads whose 1-D strategies equalize all query variances.
    cg_max_iter : int
        CG iteration limit per solve.
    verbose : bool
        Print one line per iteration.

    Returns
    -------
    MinCostResult
        ``solution`` = ``x`` (feasible), ``objective`` = ``Σ p/x``, ``lower_bound`` = the
        certified dual bound, ``gap``, ``status`` (``"optimal"``, ``"max_iter"`` or
        ``"stalled"``: no 10 % gain of the certified gap in 40 iterations — rounding limits the
        steps; the bounds are still rigorous), ``iterations``, ``multipliers`` (λ),
        ``linear_solver``, ``cg_iterations`` and ``time``.  A ``RuntimeWarning`` is issued
        unless the status is ``"optimal"``.

    Examples
    --------
    >>> r = solve_min_cost(np.array([3.0]), sp.csr_matrix([[0.5], [0.25]]))
    >>> r.status, round(r.objective, 9), r.lower_bound <= r.objective
    ('optimal', 1.5, True)
    """
    t_start = time.perf_counter()
    if not (0 < tol < 1):
        raise ValueError("tol must be in (0, 1)")
    p, C = _validate(p, C)
    m_all, n = C.shape
    # drop vacuous all-zero rows (their multiplier is 0)
    row_nnz = np.diff(C.indptr)
    keep = np.nonzero(row_nnz > 0)[0]
    Ck = C[keep] if keep.size < m_all else C
    m = Ck.shape[0]
    CT = Ck.T.tocsr()
    C2 = Ck.multiply(Ck).tocsr()
    choice = _LinearSolverChoice.initial(linear_solver, m, n)

    x, lam, s = _start_point(p, Ck, CT)
    best = _Best(math.inf, x / float(np.max(Ck @ x)), -math.inf, lam.copy())
    it = 0
    cg_total = 0
    status = "max_iter"
    dl_prev = None
    gaps: list[float] = []
    steps = (0.0, 0.0)
    while True:
        # ---- bounds and stopping test
        cert = _certificate(p, Ck, CT, x, s, lam)
        best = _improve(best, cert)
        gap = best.gap
        mu = float(lam @ s) / m
        if verbose:
            rd = float(np.linalg.norm(cert.u - p / x**2) / np.linalg.norm(p / x**2))
            print(
                f"it {it:3d}  upper {best.upper:.10g}  lower {best.lower:.10g}  gap {gap:.2e}"
                f"  mu {mu:.2e}  |r_d| {rd:.1e}  steps {steps}  cg {cg_total}"
            )
        if gap <= tol:
            status = "optimal"
            break
        if it >= max_iter:
            break
        gaps.append(gap)
        choice = choice.after_progress_check(gaps)
        if len(gaps) > _STALL and gap > 0.9 * gaps[-1 - _STALL]:
            # no progress for _STALL iterations: rounding limits the Newton steps (seen on
            # degenerate problems with many constraints active together); the bounds so far
            # are still rigorous, so stop and report the certified gap
            status = "stalled"
            break
        it += 1

        # ---- one Newton step with the current linear solver
        hinv = x**3 / (2.0 * p)
        cg_rtol = max(1e-12, min(1e-2, 1e-2 * gap))
        solve = _reduced_solver(choice, Ck, CT, C2, hinv, s / lam, lam / s, cg_rtol, cg_max_iter)
        step = _newton_step(p, Ck, CT, x, lam, s, cert.u, mu, solve, dl_prev)
        x, lam, s, dl_prev = step.x, step.lam, step.s, step.dlam
        cg_total += sum(step.cg_iterations)
        choice = choice.after_cg(max(step.cg_iterations), cg_max_iter)
        steps = step.steps

    lam_full = np.zeros(m_all)
    lam_full[keep] = best.lam
    x_out = best.x
    cx_out = Ck @ x_out
    x_out = x_out / float(np.max(cx_out))
    primal = float(np.sum(p / x_out))
    rel_gap = (primal - best.lower) / primal
    if status != "optimal":
        warnings.warn(
            f"max-variance solver stopped after {it} iterations with relative gap "
            f"{rel_gap:.2e} > tol={tol:g}",
            RuntimeWarning,
            stacklevel=2,
        )
    return MinCostResult(
        solution=x_out, objective=primal, lower_bound=best.lower, gap=rel_gap, status=status,
        iterations=it, multipliers=lam_full, linear_solver=choice.label,
        cg_iterations=cg_total, time=time.perf_counter() - t_start,
    )


def solve_max_variance(
    p: np.ndarray,
    C: sp.spmatrix | np.ndarray,
    pcost: float,
    tol: float = 1e-7,
    **kwargs: Any,
) -> MaxVarianceResult:
    """Minimise ``max_i (C x)_i`` subject to ``sum_j p_j / x_j <= pcost``.

    Solves (P) with :func:`solve_min_cost` and rescales ``x <- x * f* / pcost`` (both sides
    are homogeneous, module docstring).

    Parameters
    ----------
    p, C, tol, **kwargs
        As for :func:`solve_min_cost`.
    pcost : float
        The privacy-cost budget, finite and > 0.

    Returns
    -------
    MaxVarianceResult
        ``solution`` = ``x`` spending exactly ``pcost``, ``objective`` = ``max(C x)``,
        ``lower_bound`` = the certified ``dual_bound / pcost``, ``pcost`` = ``Σ p/x`` as spent
        and ``min_cost`` the result of (P).

    Examples
    --------
    >>> r = solve_max_variance(np.array([1.0, 1.0]), np.eye(2), 4.0)
    >>> round(r.objective, 9), r.lower_bound <= r.objective
    (0.5, True)
    """
    pcost = float(pcost)
    if not math.isfinite(pcost) or pcost <= 0:
        raise ValueError("pcost (privacy cost budget) must be finite and > 0")
    res = solve_min_cost(p, C, tol=tol, **kwargs)
    scale = res.objective / pcost
    xs = res.solution * scale
    Cs = C if sp.issparse(C) else np.asarray(C, dtype=np.float64)
    max_var = float(np.max(Cs @ xs))
    lower = res.lower_bound / pcost
    return MaxVarianceResult(
        solution=xs, objective=max_var, lower_bound=lower, gap=relative_gap(max_var, lower),
        status=res.status, iterations=res.iterations,
        pcost=float(np.sum(np.asarray(p, dtype=np.float64) / xs)), min_cost=res,
    )
