"""Budgets of a fixed pure-DP strategy that minimize the largest workload cell variance.

The sum objective uses the cube-root rule on the paper's direct recovery ``R⁰`` (objective (1),
:mod:`.strategies`). For ``objective="max"`` the same direct recovery gives each workload
marginal ``W`` the per-cell variance ``Σ_g c_Wg / ε_g²`` (continuous model, ``κ = 2``):

* ``identity`` (``S = I`` on the union ``U``): a cell of ``W`` sums ``n_U/n_W`` noisy cells,
  ``c_W = 2 n_U / n_W``;
* ``marginals`` (``S = Q``): ``c_{W,W} = 2``;
* ``clustering``: ``W`` is summed from the smallest centroid ``M ⊇ W``, ``c_{W,M} = 2 n_M / n_W``;
* ``fourier``: ``c_{W,B} = 2 Π_{i∈B}(n_i - 1) / n_W²`` for every ``B ⊆ W`` (:mod:`.subspaces`:
  each residual block is alone in its subspace, so GLS = direct recovery).

:func:`dpmatrix._solvers.max_variance_split.max_variance_split` then solves
``min max_W Σ_g c_Wg/ε_g²`` s.t. ``Σ_g C_g ε_g ≤ ε`` (convex, certified by duality). The plan
reports the GLS variances of those budgets, never larger than the direct ones (§3.2).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from math import prod

import numpy as np

from ..._solvers.max_variance_split import MaxVarianceSplit, max_variance_split
from ...errors import PlanError
from .query_factors import fourier_term
from .strategies import GroupedStrategy

__all__ = ["direct_cell_coefficients", "max_variance_budgets"]

AttrSet = tuple[int, ...]


def direct_cell_coefficients(
    strategy: GroupedStrategy, sizes: Sequence[int], sets: Sequence[AttrSet], forms=None
) -> np.ndarray:
    """``c_Wg``: the per-cell variance of workload marginal ``W`` per unit ``1/ε_g²`` under the
    direct recovery of ``strategy`` (rows: ``sets``; columns: ``strategy.groups``). With
    ``forms`` (prefix / range / custom queries, :mod:`.query_factors`): an upper bound on the
    largest query variance, the products of the per-attribute maxima (``‖q‖² ≤ Π max t``;
    ``Π_B c Π d ≤ Π_B max c Π max d``), exact when one query maximizes every factor."""
    cells = lambda a: float(prod(sizes[i] for i in a))
    forms = [None] * len(sets) if forms is None else list(forms)
    groups = strategy.groups
    c = np.zeros((len(sets), len(groups)))
    index = {frozenset(g.attrs): j for j, g in enumerate(groups)}
    # supersets by a membership matrix (groups × attributes), not a Python loop over every pair
    member = np.zeros((len(groups), len(sizes)), dtype=bool)
    for j, g in enumerate(groups):
        member[j, list(g.attrs)] = True
    group_cells = np.array([g.cells for g in groups], dtype=float)
    for r, (w, f) in enumerate(zip(sets, forms)):
        w = tuple(w)
        norm = 1.0 if f is None else prod(x.total_max for x in f)  # max ‖q‖² (1 for a cell)
        if strategy.name == "fourier":  # every group B ⊆ W: the subsets of W that are groups
            for k in range(len(w) + 1):
                for sub in itertools.combinations(w, k):
                    j = index.get(frozenset(sub))
                    if j is not None:
                        c[r, j] = 2 * fourier_term(w, f, sizes, groups[j].attrs, maximum=True)
            continue
        if strategy.name == "marginals" and frozenset(w) in index:
            c[r, index[frozenset(w)]] = 2.0 * norm
            continue
        supers = member[:, list(w)].all(axis=1)
        if not supers.any():
            raise PlanError(f"strategy {strategy.name!r} has no group that answers marginal {w}")
        j = int(np.argmin(np.where(supers, group_cells, np.inf)))  # the smallest (first of ties)
        c[r, j] = 2 * norm * groups[j].cells / cells(w)
    return c


def max_variance_budgets(
    strategy: GroupedStrategy, sizes: Sequence[int], sets: Sequence[AttrSet], epsilon: float, forms=None
) -> MaxVarianceSplit:
    """Budgets of ``strategy``'s groups minimizing the largest direct-recovery cell variance.

    Parameters
    ----------
    strategy : GroupedStrategy
        A fixed strategy of :mod:`.strategies`.
    sizes : sequence of int
        Attribute sizes of the domain.
    sets : sequence of tuples
        The (positively weighted) workload marginals.
    epsilon : float
        Total budget.

    Returns
    -------
    MaxVarianceSplit
        Budgets (0 for groups no marginal uses), the max variance and its certified lower bound.

    Examples
    --------
    >>> from dpmatrix.planners._pure import strategies
    >>> st = strategies.marginals((2, 2, 2), [(0,), (0, 1)], [1.0, 1.0])
    >>> r = max_variance_budgets(st, (2, 2, 2), [(0,), (0, 1)], 1.0)
    >>> [round(float(e), 3) for e in r.eta]   # equal variances 2/ε² on both: equal budgets
    [0.5, 0.5]
    """
    c = direct_cell_coefficients(strategy, sizes, sets, forms)
    return max_variance_split(c, strategy.sensitivity, epsilon)
