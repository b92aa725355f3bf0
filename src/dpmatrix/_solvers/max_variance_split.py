"""Pure-DP budget split that minimizes the largest query variance (objective "max").

Groups ``g`` with column L1 norms ``C_g`` get budgets ``η_g`` with ``Σ_g C_g η_g ≤ ε``
(Cormode et al. §3.1, problem (4)–(6)); a fixed recovery gives query ``q`` the variance
``Σ_g c_qg / η_g²`` (``c_qg ≥ 0``, the noise constant folded in). The program

    minimize_η  max_q Σ_g c_qg / η_g²   subject to  Σ_g C_g η_g ≤ ε,  η > 0

is convex (``1/η²`` is convex on ``η > 0``; a max of convex functions is convex). It is solved
with CVXPY (open solver Clarabel) and **certified** by duality: for weights ``λ`` on the simplex,
``max_q ≥ Σ_q λ_q (·)``, and the inner minimum over the budgets of ``Σ_g (Σ_q λ_q c_qg)/η_g²``
is the cube-root rule's ``(Σ_g (s_g C_g²)^{1/3})³ / ε²`` with ``s = λᵀc`` (Corollary 3.3).
So every ``λ`` gives a lower bound, every feasible ``η`` an upper bound; the solver's dual
variables of the epigraph constraints give a ``λ`` whose bound meets the primal value (strong
duality: Slater holds), and :attr:`MaxVarianceSplit.lower_bound` reports it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import BudgetError, PlanError
from .budget_split import solve_budget_program

__all__ = ["MaxVarianceSplit", "cube_root_lower_bound", "max_variance_split"]


@dataclass(frozen=True)
class MaxVarianceSplit:
    """Budgets ``eta``, the largest variance they give and a certified lower bound on the optimum."""

    eta: np.ndarray
    objective: float
    lower_bound: float
    method: str = "minimax"


def cube_root_lower_bound(c, sens, epsilon: float, lam) -> float:
    """``(Σ_g ((λᵀc)_g C_g²)^{1/3})³ / ε²`` — a lower bound on ``min_η max_q Σ_g c_qg/η_g²``
    for any ``λ ≥ 0`` with ``Σ λ = 1`` (weak duality, see the module docstring)."""
    lam = np.maximum(np.asarray(lam, dtype=float), 0.0)
    lam = lam / lam.sum()
    s = lam @ np.asarray(c, dtype=float)
    return float(np.cbrt(s * np.asarray(sens, dtype=float) ** 2).sum() ** 3 / float(epsilon) ** 2)


def max_variance_split(c, sens, epsilon: float, *, solver: str = "CLARABEL") -> MaxVarianceSplit:
    """Budgets minimizing ``max_q Σ_g c_qg / η_g²`` under ``Σ_g C_g η_g ≤ ε``.

    Parameters
    ----------
    c : array_like, shape (queries, groups)
        ``c_qg ≥ 0``: variance of query ``q`` per unit ``1/η_g²``. Every query needs some
        ``c_qg > 0``; groups no query uses get ``η_g = 0``.
    sens : array_like, shape (groups,)
        Column L1 norms ``C_g > 0``.
    epsilon : float
        Total budget (finite, > 0).
    solver : str, keyword-only
        CVXPY solver (open source).

    Returns
    -------
    MaxVarianceSplit
        ``eta`` (exactly feasible: rescaled so ``Σ C_g η_g ≤ ε``), the max variance it gives, and
        the certified lower bound from the solver's dual weights.

    Examples
    --------
    >>> r = max_variance_split([[2.0, 0.0], [0.0, 16.0]], [1.0, 1.0], 1.0)
    >>> [round(float(e), 4) for e in r.eta], round(r.objective, 3)   # η ∝ (1, 2√2)
    ([0.2612, 0.7388], 29.314)
    """
    import cvxpy as cp

    c = np.asarray(c, dtype=float)
    sens = np.asarray(sens, dtype=float)
    eps = float(epsilon)
    if not np.isfinite(eps) or eps <= 0:
        raise BudgetError(f"epsilon must be a finite positive number, got {epsilon!r}")
    if c.ndim != 2 or sens.shape != (c.shape[1],) or c.size == 0:
        raise PlanError(f"need c of shape (queries, groups) and one C per group, got {c.shape}, {sens.shape}")
    if not (np.all(np.isfinite(c)) and np.all(c >= 0) and np.all(np.isfinite(sens)) and np.all(sens > 0)):
        raise PlanError("coefficients must be finite and >= 0, column norms finite and > 0")
    rows = c.max(axis=1) > 0
    if not rows.all():
        raise PlanError("a query has no coefficient on any group: no budget split can answer it")
    used = c.max(axis=0) > 0
    cu, su = c[:, used], sens[used]
    scale = cu.max()  # conditioning: solve for c / scale at ε = 1
    x = cp.Variable(int(used.sum()), pos=True)
    t = cp.Variable()
    cons = [(cu / scale) @ cp.power(x, -2) <= t, su @ x <= 1.0]
    prob = cp.Problem(cp.Minimize(t), cons)
    solve_budget_program(prob, solver, "max-variance budget program")
    xv = np.maximum(np.asarray(x.value, dtype=float), 1e-300)
    xv = xv / max(1.0, float(su @ xv))  # exactly feasible
    eta = np.zeros(c.shape[1])
    eta[used] = eps * xv
    value = float((cu / eta[used] ** 2).sum(axis=1).max())
    lam = np.asarray(cons[0].dual_value, dtype=float).reshape(-1)
    if not np.isfinite(lam).all() or lam.sum() <= 0:
        lam = (cu / eta[used] ** 2).sum(axis=1) >= value * (1 - 1e-9)
    bound = cube_root_lower_bound(cu, su, eps, lam)
    return MaxVarianceSplit(eta=eta, objective=value, lower_bound=min(bound, value))
