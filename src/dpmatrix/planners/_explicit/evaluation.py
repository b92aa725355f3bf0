"""``dm.evaluate``: any explicit strategy as a plan; ``planner="lsa"``: the Level Selection Algorithm.

Li & Miklau, *Efficient Batch Query Answering Under Differential Privacy*, §2.3 (error of a
strategy, Prop. 2.4) and §4 (Program 4.1). Both return an
:class:`~dpmatrix.planners._explicit.plan.ExplicitStrategyPlan` over the marginal on the union of
the workload's attributes (a small domain: at most ``MAX_CELLS`` cells, ``LSA_MAX_CELLS`` for LSA).
"""

from __future__ import annotations

import numpy as np

from ..._privacy import Budget, resolve_pcost
from .._optimality import as_query_workload as _as_query_workload
from .._optimality import dense_queries, workload_attrs
from .named import named_strategy, normalize_name
from .plan import ExplicitStrategyPlan, check_cells, explicit_plan

__all__ = ["LSA_MAX_CELLS", "dense_workload", "evaluate", "plan_lsa"]

# LSA is O(k N³) (App. D.2): AllRange(512) takes tens of seconds on two cores
LSA_MAX_CELLS = 1024


def dense_workload(workload, attrs: tuple[int, ...] | None = None) -> tuple[np.ndarray, tuple[int, ...]]:
    """``(W, attrs)``: every positive-weight query of the workload as a row over the cells of the
    marginal on ``attrs`` (row-major), scaled by √weight (so ``WᵀW`` is the weighted Gram);
    :class:`~dpmatrix.errors.PlanError` above ``MAX_CELLS`` cells."""
    key = workload_attrs(workload) if attrs is None else tuple(attrs)
    check_cells(_as_query_workload(workload).domain, key)
    return dense_queries(workload, key), key


def evaluate(
    workload,
    strategy: str | np.ndarray,
    *,
    pcost: float | None = None,
    rho: float | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    mu: float | None = None,
    budget: Budget | None = None,
    name: str | None = None,
) -> ExplicitStrategyPlan:
    """The plan that answers ``workload`` from one explicit strategy (exact error, Prop. 2.4).

    Parameters
    ----------
    workload : Workload or QueryWorkload
        Marginals / query groups over a small domain: the strategy lives on the cells of the
        marginal on the union of their attributes (row-major, attributes in domain order).
    strategy : str or array
        A ``k × N`` matrix over those cells, or a name: ``"identity"``, ``"workload"``,
        ``"hierarchical"`` (binary) / ``"hierarchical:b"`` (b-ary), ``"haar"``, ``"fourier"``,
        ``"quarter-root"``, ``"lsa"``. ``identity``, ``hierarchical``, ``haar`` and ``fourier`` are
        per-attribute strategies combined by the Kronecker product on multi-attribute workloads;
        ``workload``, ``quarter-root`` and ``lsa`` are built on the whole flattened marginal
        (:mod:`~dpmatrix.planners._explicit.named`).
    pcost, rho, epsilon, delta, mu, budget :
        Exactly one privacy budget (as :func:`dpmatrix.plan`); ``σ² = ‖A‖²_{1→2}/pcost``.
    name : str, optional
        Label of a matrix strategy (default ``"custom"``).

    Returns
    -------
    ExplicitStrategyPlan
        ``total_variance()``, ``rmse()``, ``max_variance()``, ``query_variance(attrs)``,
        ``lower_bound()``, ``optimality_ratio()``, ``estimate(y)``, ``to_dict()`` ...

    Raises
    ------
    PlanError
        Unknown name, a marginal above the cell limit, or a strategy that cannot answer the
        workload (naming it).
    WorkloadError
        A zero workload.

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 4}), [("a",)], query_types={"a": "range"})
    >>> [round(dm.evaluate(wk, s, pcost=1).total_variance(), 6) for s in ("identity", "workload", "haar")]
    [20.0, 24.0, 18.0]
    """
    c = resolve_pcost(pcost=pcost, rho=rho, epsilon=epsilon, delta=delta, mu=mu, budget=budget)
    if isinstance(strategy, str):
        label = name or strategy
        W, key = dense_workload(workload)
        if not np.any(W):
            # named strategies need a non-zero workload; explicit_plan reports it the same way
            return explicit_plan(workload, np.eye(W.shape[1]), pcost=c, name=label, attrs=key)
        kind, _ = normalize_name(strategy)
        if kind == "lsa":
            check_cells(_as_query_workload(workload).domain, key, LSA_MAX_CELLS, "LSA")
        shape = tuple(_as_query_workload(workload).domain.sizes[a] for a in key)
        A = named_strategy(strategy, W, shape)
        return explicit_plan(workload, A, pcost=c, name=label, attrs=key)
    return explicit_plan(workload, np.asarray(strategy, dtype=float), pcost=c, name=name or "custom")


def plan_lsa(workload, *, pcost: float) -> ExplicitStrategyPlan:
    """``dm.plan(workload, planner="lsa", ...)``: the Level Selection Algorithm (Program 4.1) on
    the dense workload over the marginal on its attributes (multi-dimensional cuts over its
    shape), as an :class:`ExplicitStrategyPlan` (reduced strategy: each distinct query once,
    scaled by √copies, Theorem 3.2).

    Parameters
    ----------
    workload : Workload or QueryWorkload
        At most ``LSA_MAX_CELLS`` cells in the marginal on its attributes.
    pcost : float
        Privacy cost.

    Returns
    -------
    ExplicitStrategyPlan

    Raises
    ------
    PlanError
        The marginal has more than ``LSA_MAX_CELLS`` cells (the message gives its size).
    """
    return evaluate(workload, "lsa", pcost=pcost)
