"""Optimal split of a privacy budget across strategy groups (Cormode et al., datacubes, §3.1).

A strategy's rows are partitioned into groups; group ``g`` gets budget ``η_g`` (its rows receive
noise of variance ``κ/η_g²``, ``κ = 2`` for the Laplace mechanism) and the fixed recovery makes the
objective ``Σ_g s_g / η_g²`` where ``s_g = Σ_{rows r in g} b_r`` (``b_r = 2 Σ_j a_j R_jr²``,
program (1)). Two compositions of the groups:

* pure ε-DP (L1): the privacy constraint of every column is ``Σ_g C_g η_g ≤ ε`` where ``C_g`` is the
  (constant) column L1 norm of group ``g`` (Definition 3.1, problem (4)–(6)). Lagrange gives the
  **cube-root rule** ``η_g ∝ (s_g / C_g)^{1/3}`` and the optimum
  ``(Σ_g (s_g C_g²)^{1/3})³ / ε²`` (Corollary 3.3 with unequal ``C_g``).
* (ε, δ) with Gaussian noise (L2): ``Σ_g C_g² η_g² ≤ ε²``; the **square-root rule**
  ``η_g² ∝ √s_g / C_g`` and the optimum ``(Σ_g C_g √s_g)² / ε²`` (Corollary 3.3, second part,
  before the ``2 log(2/δ)`` calibration factor, which the caller multiplies in).

For strategies that are not groupable the general program (1)–(3) — one budget per row, one
L1 constraint per column — is solved with CVXPY (:func:`convex_budget_split`); with a groupable
strategy and a recovery consistent with the grouping its optimum equals the closed form
(Theorem 3.4), which the tests check.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import BudgetError, PlanError
from .result import SolverResult, relative_gap

__all__ = ["BudgetSplit", "cube_root_split", "square_root_split", "uniform_split", "convex_budget_split",
           "convex_max_budget_split"]


@dataclass(frozen=True, eq=False, kw_only=True)
class BudgetSplit(SolverResult):
    """Budgets ``eta`` (one per group or row, = ``solution``) and the objective ``Σ s/η²`` they reach.

    ``objective`` excludes the noise-variance constant ``κ`` (multiply by 2 for Laplace).
    ``lower_bound``: the closed forms are optimal (``lower_bound = objective``); the uniform
    split is bounded by the cube-root optimum of the same problem (``status="heuristic"``); the
    convex program by the dual bound of its CVXPY multipliers (:func:`convex_budget_split`).
    ``method`` names the rule.
    """

    method: str

    @property
    def eta(self) -> np.ndarray:
        return self.solution


def _closed_form(eta: np.ndarray, objective: float, method: str) -> BudgetSplit:
    return BudgetSplit(solution=eta, objective=objective, lower_bound=objective, gap=0.0,
                       status="optimal", iterations=0, method=method)


def _check(s, c, epsilon) -> tuple[np.ndarray, np.ndarray, float]:
    s = np.asarray(s, dtype=float)
    c = np.asarray(c, dtype=float)
    if s.ndim != 1 or c.shape != s.shape or s.size == 0:
        raise PlanError(f"need 1-d arrays of equal length, got shapes {s.shape} and {c.shape}")
    if not (np.all(np.isfinite(s)) and np.all(s >= 0) and np.all(np.isfinite(c)) and np.all(c > 0)):
        raise PlanError("group weights s must be finite and >= 0, column norms C finite and > 0")
    eps = float(epsilon)
    if not np.isfinite(eps) or eps <= 0:
        raise BudgetError(f"epsilon must be a finite positive number, got {epsilon!r}")
    return s, c, eps


def cube_root_split(s, c, epsilon: float) -> BudgetSplit:
    """Optimal pure-DP budgets for groupable strategies: ``η_g ∝ (s_g/C_g)^{1/3}``.

    Parameters
    ----------
    s : array_like
        ``s_g ≥ 0``, the summed recovery weights of each group (objective ``Σ s_g/η_g²``).
    c : array_like
        ``C_g > 0``, each group's column L1 norm.
    epsilon : float
        Total budget; the split satisfies ``Σ_g C_g η_g = ε``.

    Returns
    -------
    BudgetSplit
        ``eta`` and the optimum ``(Σ_g (s_g C_g²)^{1/3})³ / ε²``. Groups with ``s_g = 0`` get
        ``η_g = 0`` (they are useless and should be dropped).

    Examples
    --------
    >>> r = cube_root_split([4.0, 8.0], [1.0, 1.0], 1.0)   # Figure 1, S = Q, with κ = 2 folded in s
    >>> round(float(r.eta[0]), 6), round(r.objective, 4)
    (0.442493, 46.1679)
    """
    s, c, eps = _check(s, c, epsilon)
    w = np.cbrt(s * c * c)
    total = float(w.sum())
    if total == 0:
        raise PlanError("every group has zero weight: the strategy answers nothing")
    eta = eps * np.cbrt(s / c) / total
    return _closed_form(eta, total**3 / eps**2, "cube-root")


def square_root_split(s, c, epsilon: float) -> BudgetSplit:
    """Optimal budgets under L2 composition ``Σ C_g² η_g² ≤ ε²``: ``η_g² ∝ √s_g / C_g``.

    Returns the optimum ``(Σ_g C_g √s_g)² / ε²`` (multiply by the Gaussian calibration constant).

    Examples
    --------
    >>> r = square_root_split([1.0, 4.0], [1.0, 1.0], 1.0)
    >>> round(r.objective, 6)
    9.0
    """
    s, c, eps = _check(s, c, epsilon)
    total = float((c * np.sqrt(s)).sum())
    if total == 0:
        raise PlanError("every group has zero weight: the strategy answers nothing")
    eta = eps * np.sqrt(np.sqrt(s) / c / total)
    return _closed_form(eta, total**2 / eps**2, "square-root")


def uniform_split(s, c, epsilon: float) -> BudgetSplit:
    """Equal budgets ``η_g = ε / Σ_g C_g`` (the paper's "uniform noise").

    Not optimal (``status="heuristic"``); ``lower_bound`` is the optimum of the same problem,
    the cube-root value ``(Σ_g (s_g C_g²)^{1/3})³ / ε²``.

    Examples
    --------
    >>> r = uniform_split([1.0, 8.0], [1.0, 1.0], 1.0)
    >>> r.objective, r.lower_bound
    (36.0, 27.0)
    """
    s, c, eps = _check(s, c, epsilon)
    eta = np.full(s.shape, eps / float(c.sum()))
    objective = float((s / eta**2).sum())
    lower = min(float(np.cbrt(s * c * c).sum()) ** 3 / eps**2, objective)
    return BudgetSplit(solution=eta, objective=objective, lower_bound=lower,
                       gap=relative_gap(objective, lower), status="heuristic", iterations=0,
                       method="uniform")


def _convex_dual_bound(a: np.ndarray, b: np.ndarray, y: np.ndarray) -> float:
    r"""Weak-duality bound on ``min Σ_i b_i / x_i²`` s.t. ``aᵀ x ≤ 1`` from multipliers ``y ≥ 0``.

    With ``u = a y``, ``min_x b x⁻² + u x = 3·2^{-2/3} (b u²)^{1/3}``, so the dual function is
    ``g(y) = 3·2^{-2/3} Σ_i (b_i u_i²)^{1/3} − Σ y``; maximizing ``g(t y)`` over the scale
    ``t > 0`` gives ``(Σ_i (b_i u_i²)^{1/3})³ / (Σ y)²`` (one row, one column: ``b a²``, the
    optimum).  Valid for every ``y ≥ 0``, whatever the solver's accuracy.
    """
    y = np.maximum(np.asarray(y, dtype=float).reshape(-1), 0.0)
    total = float(y.sum())
    if not total > 0:
        return 0.0
    u = a @ y
    return float(np.cbrt(b * u * u).sum()) ** 3 / total**2


def solve_budget_program(prob, solver: str, what: str = "budget program") -> None:
    """Solve the CVXPY budget program ``prob`` with ``solver``; a solver failure or a status
    other than (inaccurately) optimal is a :class:`~dpmatrix.errors.PlanError` naming ``what``."""
    import cvxpy as cp

    try:
        prob.solve(solver=solver)
    except cp.SolverError as exc:  # pragma: no cover - solver availability
        raise PlanError(f"{what} failed with {solver}: {exc}") from exc
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise PlanError(f"{what} status {prob.status!r}")


def convex_budget_split(abs_strategy, b, epsilon: float, *, solver: str = "CLARABEL") -> BudgetSplit:
    """Program (1)–(3): one budget per row, ``min Σ_i b_i/ε_i²`` s.t. ``Σ_i |S_ij| ε_i ≤ ε ∀ j``.

    Parameters
    ----------
    abs_strategy : array_like, shape (m, N)
        ``|S|`` (or one representative column per class of identical columns).
    b : array_like, shape (m,)
        Row weights ``b_i ≥ 0`` of objective (1).
    epsilon : float
        Total budget.
    solver : str, keyword-only
        A CVXPY solver name (open source: CLARABEL, SCS, ECOS).

    Returns
    -------
    BudgetSplit
        Row budgets (rows with ``b_i = 0`` get 0) and the optimum of (1).
    """
    import cvxpy as cp

    a = np.abs(np.asarray(abs_strategy, dtype=float))
    b = np.asarray(b, dtype=float)
    if a.ndim != 2 or b.shape != (a.shape[0],):
        raise PlanError(f"|S| must be (m, N) and b (m,), got {a.shape} and {b.shape}")
    eps = float(epsilon)
    if not np.isfinite(eps) or eps <= 0:
        raise BudgetError(f"epsilon must be a finite positive number, got {epsilon!r}")
    live = b > 0
    if not live.any():
        raise PlanError("every row has zero weight: the strategy answers nothing")
    # Scale to eps = 1 (the optimum scales as 1/eps²) for solver conditioning.
    x = cp.Variable(int(live.sum()), pos=True)
    obj = cp.Minimize(b[live] @ cp.power(x, -2))
    constraint = a[live].T @ x <= 1.0
    prob = cp.Problem(obj, [constraint])
    solve_budget_program(prob, solver)
    xv = np.maximum(np.asarray(x.value, dtype=float), 0.0)
    # Make the solution exactly feasible (solvers allow ~1e-8 violations).
    xv = xv / max(1.0, float((a[live].T @ xv).max()))
    eta = np.zeros(a.shape[0])
    eta[live] = eps * xv
    objective = float((b[live] / eta[live] ** 2).sum())
    lower = min(_convex_dual_bound(a[live], b[live], constraint.dual_value) / eps**2, objective)
    return BudgetSplit(solution=eta, objective=objective, lower_bound=lower,
                       gap=relative_gap(objective, lower),
                       status="optimal" if relative_gap(objective, lower) <= 1e-6 else "stalled",
                       iterations=int(prob.solver_stats.num_iters or 0), method="convex")


def convex_max_budget_split(abs_strategy, c, epsilon: float, *, solver: str = "CLARABEL") -> BudgetSplit:
    """One budget per row minimizing the largest query variance, ``max_q Σ_i c_qi/ε_i²``, s.t.
    ``Σ_i |S_ij| ε_i ≤ ε`` for every column ``j`` (program (1)–(3) with a max objective; convex:
    ``1/ε²`` is convex on ``ε > 0`` and a max of convex functions is convex).

    Parameters
    ----------
    abs_strategy : array_like, shape (m, N)
        ``|S|``.
    c : array_like, shape (queries, m)
        ``c_qi ≥ 0``: variance of query ``q`` per unit ``1/ε_i²`` under a fixed recovery.
    epsilon : float
        Total budget.
    solver : str, keyword-only
        A CVXPY solver name.

    Returns
    -------
    BudgetSplit
        Row budgets (rows no query uses get 0) and the largest variance they give; the lower
        bound is the weak-duality value of the epigraph multipliers (as
        :func:`dpmatrix._solvers.max_variance_split.max_variance_split`, with the convex
        program's :func:`_convex_dual_bound` for the inner problem).

    Examples
    --------
    >>> r = convex_max_budget_split(np.eye(2), np.array([[1.0, 0.0], [0.0, 8.0]]), 1.0)
    >>> round(r.objective, 4)          # equal variances 1/x² = 8/y² with x + y ≤ 1 per column
    8.0
    """
    import cvxpy as cp

    a = np.abs(np.asarray(abs_strategy, dtype=float))
    c = np.asarray(c, dtype=float)
    if a.ndim != 2 or c.ndim != 2 or c.shape[1] != a.shape[0] or np.any(c < 0):
        raise PlanError(f"|S| must be (m, N) and c (queries, m) non-negative, got {a.shape} and {c.shape}")
    eps = float(epsilon)
    if not np.isfinite(eps) or eps <= 0:
        raise BudgetError(f"epsilon must be a finite positive number, got {epsilon!r}")
    live = c.max(axis=0) > 0
    if not live.any():
        raise PlanError("no query uses any row: the strategy answers nothing")
    x = cp.Variable(int(live.sum()), pos=True)
    t = cp.Variable()
    epi = c[:, live] @ cp.power(x, -2) <= t
    cols = a[live].T @ x <= 1.0
    prob = cp.Problem(cp.Minimize(t), [epi, cols])
    solve_budget_program(prob, solver)
    xv = np.maximum(np.asarray(x.value, dtype=float), 1e-300)
    xv = xv / max(1.0, float((a[live].T @ xv).max()))
    eta = np.zeros(a.shape[0])
    eta[live] = eps * xv
    objective = float((c[:, live] / eta[live] ** 2).sum(axis=1).max())
    lam = np.maximum(np.asarray(epi.dual_value, dtype=float).reshape(-1), 0.0)
    lower = 0.0
    if lam.sum() > 0:
        lower = min(_convex_dual_bound(a[live], (lam / lam.sum()) @ c[:, live], cols.dual_value) / eps**2,
                    objective)
    return BudgetSplit(solution=eta, objective=objective, lower_bound=lower,
                       gap=relative_gap(objective, lower), status="optimal" if relative_gap(objective, lower) <= 1e-4
                       else "stalled", iterations=int(prob.solver_stats.num_iters or 0), method="convex-max")
