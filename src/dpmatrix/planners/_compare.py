"""``dm.compare``: every applicable strategy and planner for a workload against the lower bound.

Li & Miklau, *Efficient Batch Query Answering Under Differential Privacy*: one row per
candidate at the same privacy budget — the classic explicit strategies (§2.3: identity, the
workload, hierarchical binary and 4-ary, Haar, Fourier, quarter-root) and LSA (§4) on small
domains, ResidualPlanner / ResidualPlanner+ (sum of variances), QuerySmasher, and the pure ε-DP
planner — with its weighted total variance, RMSE, largest variance and ratio to the singular
value bound (§3.2).

The pure ε-DP planner is compared at ``ε = √(2ρ)``: ε-DP implies ``ε²/2``-zCDP, so that plan
satisfies the same ρ-zCDP guarantee as the Gaussian rows (it is ε-DP as well, a stronger
statement). The singular value bound is a bound on *Gaussian* matrix mechanisms only; the
pure row's ratio is shown for reference and may in principle be below 1.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .._privacy import Budget, resolve_pcost
from .._solvers.svd_bound import svd_bound
from .._workload import Workload
from ..errors import DPMatrixError
from ._dispatch import plan as dm_plan
from ._explicit.evaluation import LSA_MAX_CELLS, evaluate
from ._explicit.plan import MAX_CELLS, workload_attrs
from ._pure import plan_pure

__all__ = ["CLASSIC", "compare"]

CLASSIC = ("identity", "workload", "hierarchical", "hierarchical:4", "haar", "fourier", "quarter-root")
COLUMNS = ["planner", "strategy", "weighted_total_variance", "total_variance", "rmse", "max_variance",
           "ratio", "bound_exact", "privacy", "note"]


def _row(planner: str, strategy: str, plan, bound, privacy: str, note: str = "") -> dict:
    objective, value = plan._objective_value()
    return {"planner": planner, "strategy": strategy, "weighted_total_variance": float(value),
            "total_variance": plan.total_variance(), "rmse": plan.rmse(), "max_variance": plan.max_variance(),
            "ratio": float(value) / bound.total, "bound_exact": bound.exact, "privacy": privacy,
            "note": note}  # fmt: skip


def _skip(planner: str, strategy: str, why: str) -> dict:
    return {"planner": planner, "strategy": strategy, "weighted_total_variance": math.nan,
            "total_variance": math.nan, "rmse": math.nan, "max_variance": math.nan, "ratio": math.nan,
            "bound_exact": None, "privacy": "", "note": f"skipped: {why}"}  # fmt: skip


def compare(
    workload,
    *,
    pcost: float | None = None,
    rho: float | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    mu: float | None = None,
    budget: Budget | None = None,
    lsa: bool = True,
    querysmasher: bool = True,
    pure: bool = True,
) -> pd.DataFrame:
    """A tidy table of every applicable strategy and planner for ``workload`` at one budget.

    Parameters
    ----------
    workload : Workload or QueryWorkload
        What is asked.
    pcost, rho, epsilon, delta, mu, budget :
        Exactly one privacy budget (as :func:`dpmatrix.plan`).
    lsa, querysmasher, pure : bool
        Include the LSA, QuerySmasher and pure ε-DP rows (where they apply).

    Returns
    -------
    pandas.DataFrame
        One row per candidate, best (smallest weighted total variance) first, skipped ones last:
        ``planner``, ``strategy``, ``weighted_total_variance`` (the sum-of-variances objective),
        ``total_variance``, ``rmse``, ``max_variance``, ``ratio`` (weighted total variance /
        singular value bound, ≥ 1 for Gaussian rows), ``bound_exact`` (the bound is exact, not a
        looser valid bound), ``privacy`` (the guarantee of the row) and ``note`` (why a row was
        skipped: too large, not applicable). ``df.attrs["lower_bound"]`` is the
        :class:`~dpmatrix._solvers.svd_bound.SVDBound`.

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 4}), [("a",)], query_types={"a": "range"})
    >>> df = dm.compare(wk, pcost=1, querysmasher=False, pure=False)
    >>> [(r.planner, r.strategy, round(r.ratio, 3)) for r in df.head(3).itertuples()]
    [('ResidualPlanner+', 'sum_var', 1.008), ('explicit', 'lsa', 1.037), ('explicit', 'quarter-root', 1.084)]
    """
    c = resolve_pcost(pcost=pcost, rho=rho, epsilon=epsilon, delta=delta, mu=mu, budget=budget)
    bound = svd_bound(workload, pcost=c)
    gauss = f"rho={c / 2:.6g}-zCDP (Gaussian)"
    rows: list[dict] = []
    attrs = workload_attrs(workload)
    cells = math.prod(workload.domain.sizes[a] for a in attrs)
    names = CLASSIC + (("lsa",) if lsa else ())
    for name in names:
        limit = LSA_MAX_CELLS if name == "lsa" else MAX_CELLS
        if cells > limit:
            rows.append(_skip("explicit", name, f"too large: {cells} cells in the marginal on the "
                              f"workload's attributes (limit {limit})"))
            continue
        try:
            rows.append(_row("explicit", name, evaluate(workload, name, pcost=c), bound, gauss))
        except DPMatrixError as exc:
            rows.append(_skip("explicit", name, str(exc)))
    if isinstance(workload, Workload):
        p = dm_plan(workload, pcost=c, objective="sum_var")
        rows.append(_row("ResidualPlanner" if p.is_plain else "ResidualPlanner+", "sum_var", p, bound, gauss))
    else:
        rows.append(_skip("ResidualPlanner", "sum_var", "needs a Workload of (generalized) marginals"))
    if querysmasher:
        try:
            rows.append(_row("QuerySmasher", "sum_var", dm_plan(workload, pcost=c, planner="querysmasher"),
                             bound, gauss))
        except DPMatrixError as exc:
            rows.append(_skip("QuerySmasher", "sum_var", str(exc)))
    if pure:
        rows.append(_pure_row(workload, c, bound))
    df = pd.DataFrame(rows, columns=COLUMNS)
    order = np.argsort(df["weighted_total_variance"].fillna(np.inf).to_numpy(), kind="stable")
    df = df.iloc[order].reset_index(drop=True)
    df.attrs["lower_bound"] = bound
    return df


def _pure_row(workload, c: float, bound) -> dict:
    eps = math.sqrt(c)  # ρ = c/2 = ε²/2
    if not isinstance(workload, Workload):
        return _skip("pure ε-DP", "auto", "marginal Workloads only")
    try:
        p = plan_pure(workload, eps)
    except DPMatrixError as exc:
        return _skip("pure ε-DP", "auto", str(exc))
    value = p.total_variance()  # weighted (PurePlan's convention)
    cells = float(np.sum(workload.n_queries[np.asarray(workload.weights) > 0]))  # queries (cells if plain)
    return {"planner": "pure ε-DP", "strategy": p.strategy, "weighted_total_variance": value,
            "total_variance": p.rmse() ** 2 * cells, "rmse": p.rmse(), "max_variance": p.max_variance(),
            "ratio": value / bound.total, "bound_exact": bound.exact,
            "privacy": f"epsilon={eps:.6g}-DP (implies rho={c / 2:.6g}-zCDP)",
            "note": "Laplace noise: the bound is for Gaussian mechanisms, ratio for reference"}  # fmt: skip
