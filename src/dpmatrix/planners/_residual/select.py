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
  average query variances (ordered as ``workload.sets``; for plain marginals every cell has this
  variance) and returning a convex scalar expression.

Both the privacy-constrained form (eq. 1: minimize loss s.t. pcost ≤ c) and the
utility-constrained form (eq. 2: minimize pcost s.t. loss ≤ bound) are supported.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..._linalg.sparse import csr_rmatvec, csr_spmv_inf
from ...errors import PlanError
from .coefficients import Coefficients, outer_variances

if TYPE_CHECKING:  # pragma: no cover - annotations only
    import scipy.sparse as sp

__all__ = ["Selection", "select"]

Objective = str | Callable


@dataclass(frozen=True, eq=False)
class Selection:
    """Noise scales (``inf`` where a residual set needs no measurement) and the loss reached."""

    sigma2: np.ndarray
    loss: float


def select_sum_var(coef: Coefficients, weights: np.ndarray) -> np.ndarray:
    """Unit-cost (pcost = 1) optimum of the weighted sum of variances (Lemma 2)."""
    v = csr_rmatvec(coef.sum_var_csr, weights)
    p = coef.p
    used = v > 0
    s = float(np.sum(np.sqrt(v[used] * p[used])))
    x = np.full(len(p), np.inf)
    x[used] = s * np.sqrt(p[used] / v[used])
    return x


ACCEPT_GAP = 1e-6


def _min_cost(p: np.ndarray, C: sp.csr_matrix) -> np.ndarray:
    """argmin Σ p/x s.t. C x ≤ 1, x > 0 (every column of C has a positive entry), by the
    certified interior-point solver of :mod:`dpmatrix._solvers.maxvar_solver`."""
    from ..._solvers.maxvar_solver import solve_min_cost  # SciPy's linear algebra only when planning

    with warnings.catch_warnings():  # judged here, not by the solver's own warning
        warnings.simplefilter("ignore", RuntimeWarning)
        res = solve_min_cost(p, C, tol=1e-9)
    # the target gap is 1e-9; a solve that stalls on rounding (degenerate problems, e.g. RP+
    # with max-variance-optimal strategies) is accepted when its certified gap is below 1e-6
    if res.status != "optimal" and not res.gap <= ACCEPT_GAP:
        xc = _min_cost_conic(p, C) if C.shape[0] * C.shape[1] <= CONIC_MAX else None
        if xc is not None:
            return xc
        raise PlanError(
            f"the max-variance solver stopped without reaching the optimum (relative duality gap "
            f"{res.gap:.2e} after {res.iterations} iterations)"
        )
    return res.solution


# fallback for small problems on which the interior-point method stalls (degenerate RP+ problems
# with many parallel constraints): the same convex program through CVXPY's conic solvers
CONIC_MAX = 4_000_000


def _min_cost_conic(p: np.ndarray, C: sp.csr_matrix) -> np.ndarray | None:
    """argmin Σ p/x s.t. C x ≤ 1 by CVXPY (Clarabel/ECOS/SCS), or None if no solver succeeds."""
    import cvxpy as cp

    x = cp.Variable(len(p), pos=True)
    prob = cp.Problem(cp.Minimize(p @ cp.inv_pos(x)), [C @ x <= 1])
    try:
        _solve(prob)
    except PlanError:
        return None
    xv = np.maximum(np.asarray(x.value, dtype=float), 1e-300)
    return xv / max(1.0, float(np.max(C @ xv)))  # exactly feasible


def _solve_rows(p: np.ndarray, C: sp.csr_matrix) -> np.ndarray:
    """Unit-cost optimum of ``max (C x)`` over the closure: columns without constraint → inf."""
    import scipy.sparse as sp  # SciPy only when planning
    used = np.asarray((C != 0).sum(axis=0)).ravel() > 0
    xu = _min_cost(p[used], sp.csr_matrix(C[:, used]))
    out = np.full(len(p), np.inf)
    out[used] = xu * float(np.sum(p[used] / xu))  # scale to privacy cost 1
    return out


def select_max_var(
    coef: Coefficients, weights: np.ndarray, max_rounds: int = 100,
    query_weights: Sequence[np.ndarray] | None = None,
) -> np.ndarray:
    """Unit-cost optimum of the weighted maximum query variance.

    By homogeneity, ``min_x max_q w_q Var_q(x)`` at privacy cost 1 is ``min Σ p/x s.t.
    w_q Var_q(x) ≤ 1`` rescaled. When every query of a marginal has the same variance (plain
    marginals) there is one constraint per marginal. Otherwise (prefix/range queries) the
    constraints are generated: start from, for each marginal M and residual set A ⊆ M, the query
    with the largest (weighted) coefficient on x_A; solve; add, for each marginal whose exact
    maximum weighted variance exceeds the bound, its worst query; repeat until none does. The last
    solution is optimal for the full problem (optimal for a relaxation and feasible for all
    constraints).

    ``query_weights`` (optional, one array per workload marginal shaped like its table of
    queries) multiplies ``weights``: the weight of query ``q`` of marginal ``M`` is
    ``w_M · query_weights[M][q]`` (accuracy targets: ``1/target``). The worst query is
    then ranked by weighted variance, over every query (the Pareto pruning of
    :meth:`Coefficients.max_query_variance` holds for one weight per marginal only). With plain
    marginals every cell has the same variance, so only the largest weight of a marginal binds.
    """
    weights = np.asarray(weights, dtype=float)
    if query_weights is not None and coef.uniform:
        weights = weights * np.array([float(np.max(q)) for q in query_weights])
        query_weights = None
    import scipy.sparse as sp

    keep = np.flatnonzero(weights > 0)
    if coef.uniform:
        C = sp.csr_matrix(sp.diags(weights[keep]) @ coef.cell_var[keep])
        return _solve_rows(coef.p, C)
    rows: dict[tuple[int, tuple[int, ...]], tuple[np.ndarray, np.ndarray]] = {}

    def add(i: int, q: tuple[int, ...]) -> None:
        if (i, q) not in rows:
            idx, val = coef.query_row(i, q)
            w = weights[i] if query_weights is None else weights[i] * float(query_weights[i][q])
            rows[i, q] = (idx, val * w)

    for i in keep.tolist():
        key, bases = coef._factors(i)
        for cols, _, _ in coef.workload.closure.subsets(key):
            if query_weights is None:
                q = tuple(int(np.argmax(b.diag_in if c in cols else b.diag_out))
                          for c, b in enumerate(bases))
            else:
                term = outer_variances(bases, [(cols, 1.0)]) * query_weights[i]
                q = tuple(int(v) for v in np.unravel_index(int(np.argmax(term)), term.shape))
            add(i, q)
    for _ in range(max_rounds):
        n = len(rows)
        data = list(rows.values())
        r_idx = np.repeat(np.arange(n), [len(v[0]) for v in data])
        C = sp.csr_matrix(
            (np.concatenate([v[1] for v in data]), (r_idx, np.concatenate([v[0] for v in data]))),
            shape=(n, len(coef.p)),
        )
        x = _solve_rows(coef.p, C)
        bound = max(C @ np.where(np.isfinite(x), x, 0.0))
        violated = False
        xf = np.where(np.isfinite(x), x, 0.0)
        for i in keep.tolist():
            v, q = _worst_query(coef, i, xf, None if query_weights is None else query_weights[i])
            if v * weights[i] > bound * (1 + 1e-7):
                add(i, q)
                violated = True
        if not violated:
            return x
    raise PlanError(f"max-variance constraint generation did not converge in {max_rounds} rounds")


def _worst_query(coef: Coefficients, i: int, x: np.ndarray,
                 query_weight: np.ndarray | None) -> tuple[float, tuple[int, ...]]:
    """Largest (query-weighted) variance of workload marginal ``i`` and a query attaining it."""
    if query_weight is None:
        return coef.max_query_variance(i, x)
    v = coef.query_variances(i, x) * query_weight
    j = np.unravel_index(int(np.argmax(v)), v.shape)
    return float(v[j]), tuple(int(a) for a in j)


def weighted_max_query_variance(coef: Coefficients, x: np.ndarray,
                                query_weights: Sequence[np.ndarray]) -> np.ndarray:
    """Largest ``query_weights[M][q] · Var_q(x)`` of each workload marginal (``inf`` where a
    needed residual set is not measured)."""
    xi = np.where(np.isfinite(x), x, np.inf)
    return np.array([float(np.max(coef.query_variances(i, xi) * np.asarray(w)))
                     for i, w in enumerate(query_weights)])


def max_query_variance(coef: Coefficients, x: np.ndarray) -> np.ndarray:
    """Largest (unweighted) query variance of each workload marginal for noise scales x
    (``inf`` where a needed residual set is not measured)."""
    if coef.uniform:
        return csr_spmv_inf(coef.cell_var_csr, x)
    wk = coef.workload
    finite = np.isfinite(x)
    xf = np.where(finite, x, 0.0)
    out = np.empty(len(wk))
    for i, key in enumerate(wk.sets):
        if all(finite[j] for _, _, j in wk.closure.subsets(key)):
            out[i] = coef.max_query_variance(i, xf)[0]
        else:
            out[i] = np.inf
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
) -> Selection:
    """Optimum of a user-supplied convex loss of the per-marginal cell variances (and the loss
    reached)."""
    import cvxpy as cp
    import scipy.sparse as sp

    # per-marginal average query variance (SoV / number of queries, paper §7.5); for plain
    # marginals every cell has this variance
    avg = sp.csr_matrix(sp.diags(1.0 / coef.workload.n_queries) @ coef.sum_var)
    used = np.asarray((avg != 0).sum(axis=0)).ravel() > 0
    C = sp.csr_matrix(avg[:, used])
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
    return Selection(out, float(expr.value))


def select(
    coef: Coefficients,
    weights: np.ndarray,
    objective: Objective,
    pcost: float | None = None,
    loss_bound: float | None = None,
    query_weights: Sequence[np.ndarray] | None = None,
) -> Selection:
    """Noise scales for a privacy budget (``pcost``) or an accuracy bound (``loss_bound``);
    ``query_weights`` (``max_var`` only): per-query weights, see :func:`select_max_var`."""
    if query_weights is not None and objective != "max_var":
        raise PlanError("per-query weights (accuracy targets) need objective='max_var'")
    if callable(objective):
        return select_custom(coef, objective, pcost, loss_bound)
    if objective == "sum_var":
        unit = select_sum_var(coef, weights)
        unit_loss = float(weights @ csr_spmv_inf(coef.sum_var_csr, np.where(np.isfinite(unit), unit, 0.0)))
    elif objective == "max_var":
        unit = select_max_var(coef, weights, query_weights=query_weights)
        keep = weights > 0
        if query_weights is None:
            unit_loss = float(np.max(weights[keep] * max_query_variance(coef, unit)[keep]))
        else:
            wmax = weighted_max_query_variance(coef, unit, query_weights)
            unit_loss = float(np.max(weights[keep] * wmax[keep]))
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
