"""Selection: choose the noise scales ``x_A = σ²_A`` of the residual mechanisms.

The privacy cost is ``Σ p_A / x_A`` (convex in x) and every workload variance is linear in x, so
for any convex loss of the workload variances selection is a convex problem (paper §4.4):

* ``sum_var`` — weighted sum over marginals of the sum of their cell variances,
  ``Σ_M w_M Σ_{A⊆M} c_{M,A} x_A = Σ_A v_A x_A``. Closed form (Lemma 2, §6.1): with
  ``S = Σ_A sqrt(v_A p_A)``, the optimum at privacy cost ``c`` is ``x_A = (S/c) sqrt(p_A/v_A)``
  and the optimal loss is ``S²/c``. No solver.
* ``max_var`` — ``max_M w_M · (cell variance of M)``. By homogeneity (scaling x by s scales every
  variance by s and the privacy cost by 1/s) it is solved as ``min Σ p/x s.t. C x ≤ 1`` and
  rescaled. Solved with CVXPY (Clarabel, an open interior-point solver).
* a user-supplied convex loss: ``objective=callable`` receiving the CVXPY vector of per-marginal
  cell variances (ordered as ``workload.sets``) and returning a convex scalar expression.

Both the privacy-constrained form (eq. 1: minimize loss s.t. pcost ≤ c) and the
utility-constrained form (eq. 2: minimize pcost s.t. loss ≤ bound) are supported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import PlanError
from .coefficients import Coefficients

__all__ = ["Selection", "select"]

Objective = str | Callable


@dataclass(frozen=True, eq=False)
class Selection:
    """Noise scales (``inf`` where a residual set needs no measurement) and the loss reached."""

    sigma2: np.ndarray
    loss: float


def _pcost_of(p: np.ndarray, x: np.ndarray) -> float:
    finite = np.isfinite(x)
    return float(np.sum(p[finite] / x[finite]))


def select_sum_var(coef: Coefficients, weights: np.ndarray) -> np.ndarray:
    """Unit-cost (pcost = 1) optimum of the weighted sum of variances (Lemma 2)."""
    v = np.asarray(coef.sum_var.T @ weights).ravel()
    p = coef.p
    used = v > 0
    s = float(np.sum(np.sqrt(v[used] * p[used])))
    x = np.full(len(p), np.inf)
    x[used] = s * np.sqrt(p[used] / v[used])
    return x


def _weighted_rows(coef: Coefficients, weights: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
    """Cell-variance rows scaled by weight; zero-weight rows dropped; columns used."""
    keep = weights > 0
    C = sp.diags(weights[keep]) @ coef.cell_var[keep]
    C = sp.csr_matrix(C)
    used = np.asarray((C != 0).sum(axis=0)).ravel() > 0
    return C, used


def select_max_var(coef: Coefficients, weights: np.ndarray) -> np.ndarray:
    """Unit-cost optimum of the weighted max cell variance (convex program, CVXPY + Clarabel)."""
    import cvxpy as cp

    C, used = _weighted_rows(coef, weights)
    C = C[:, used]
    p = coef.p[used]
    # min Σ p/x  s.t.  C x ≤ 1; optimal x rescaled to unit privacy cost afterwards.
    x = cp.Variable(int(used.sum()), pos=True)
    prob = cp.Problem(cp.Minimize(p @ cp.inv_pos(x)), [C @ x <= 1])
    _solve(prob)
    xv = np.asarray(x.value, dtype=float)
    if not np.all(np.isfinite(xv)) or np.any(xv <= 0):
        raise PlanError("the max-variance solver returned an invalid point")
    out = np.full(len(coef.p), np.inf)
    out[used] = xv * float(np.sum(p / xv))  # scale to privacy cost 1
    return out


def _solve(prob) -> None:
    import cvxpy as cp

    last = None
    for solver in ("CLARABEL", "ECOS", "SCS"):
        if solver not in cp.installed_solvers():
            continue
        try:
            prob.solve(solver=solver)
        except cp.error.SolverError as exc:  # try the next open solver
            last = exc
            continue
        if prob.status in ("optimal", "optimal_inaccurate"):
            return
        last = PlanError(f"solver {solver} ended with status {prob.status!r}")
    raise PlanError(f"the selection problem could not be solved: {last}")


def select_custom(
    coef: Coefficients, loss: Callable, pcost: float | None, loss_bound: float | None
) -> np.ndarray:
    """Optimum of a user-supplied convex loss of the per-marginal cell variances."""
    import cvxpy as cp

    used = np.asarray((coef.cell_var != 0).sum(axis=0)).ravel() > 0
    C = sp.csr_matrix(coef.cell_var[:, used])
    p = coef.p[used]
    x = cp.Variable(int(used.sum()), pos=True)
    variances = C @ x
    try:
        expr = loss(variances)
    except Exception as exc:  # the user's function failed on a CVXPY expression
        raise PlanError(
            f"the custom objective could not be built from the CVXPY variance vector: {exc}"
        ) from exc
    if not isinstance(expr, cp.Expression) or expr.size != 1:
        raise PlanError("a custom objective must return a scalar CVXPY expression")
    cost = p @ cp.inv_pos(x)
    if loss_bound is None:
        prob = cp.Problem(cp.Minimize(expr), [cost <= pcost])
    else:
        prob = cp.Problem(cp.Minimize(cost), [expr <= loss_bound])
    if not prob.is_dcp():
        raise PlanError(
            "the custom objective is not convex by CVXPY's DCP rules; write it with convex "
            "atoms of the variance vector (e.g. cp.max, cp.sum, cp.norm, cp.sum_squares)"
        )
    _solve(prob)
    out = np.full(len(coef.p), np.inf)
    out[used] = np.asarray(x.value, dtype=float)
    return out


def select(
    coef: Coefficients,
    weights: np.ndarray,
    objective: Objective,
    pcost: float | None = None,
    loss_bound: float | None = None,
) -> Selection:
    """Noise scales for a privacy budget (``pcost``) or an accuracy bound (``loss_bound``)."""
    if callable(objective):
        x = select_custom(coef, objective, pcost, loss_bound)
        return Selection(x, float("nan"))
    if objective == "sum_var":
        unit = select_sum_var(coef, weights)
        unit_loss = float(weights @ (coef.sum_var @ np.where(np.isfinite(unit), unit, 0.0)))
    elif objective == "max_var":
        unit = select_max_var(coef, weights)
        unit_loss = float(np.max(weights * (coef.cell_var @ np.where(np.isfinite(unit), unit, 0.0))))
    else:
        raise PlanError(
            f"unknown objective {objective!r}: use 'sum_var', 'max_var' or a callable convex loss"
        )
    # unit: optimum at privacy cost 1 with loss unit_loss; both scale as 1/c and c.
    if loss_bound is not None:
        c = unit_loss / loss_bound
    else:
        c = float(pcost)
    return Selection(unit / c, unit_loss / c)
