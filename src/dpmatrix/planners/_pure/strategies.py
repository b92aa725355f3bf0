"""Fixed strategies of Cormode et al. §3–4 as groups, with the paper's direct-recovery weights.

Each builder returns :class:`GroupedStrategy`: the groups and ``s_g``, the weight of group ``g``
in the objective (1) of the paper's *fixed* recovery ``R⁰`` (``Σ_g s_g σ_g²`` is the weighted
sum of the workload's cell variances when each workload marginal is answered the paper's way).
The budgets of :mod:`dpmatrix._solvers.budget_split` minimize that objective; the planner then
*reports* the variance of the GLS estimate (never larger: GLS is the best linear unbiased
recovery, §3.2).

* ``identity``: one marginal group on the union ``U`` of the workload's attributes (the base
  cells of the only attributes a marginal workload touches; ``S = I`` on ``U``). A workload
  marginal ``W`` sums ``n_{U∖W}`` noisy cells: ``s = Σ_W w_W n_U``.
* ``marginals`` (``S = Q``): one group per workload marginal, ``s_W = w_W n_W``.
* ``fourier``: one residual group per subset ``B`` of a workload marginal; alone in its
  subspace, so GLS = direct recovery and ``s_B = Σ_{W⊇B} w_W Π_{i∈B}(n_i-1) / n_W``
  (binary: ``Σ_{W⊇B} w_W 2^{-|W|}``, §4.1).
* ``clustering``: the greedy of Ding et al. (SIGMOD 2011, the paper's [6]): start with one
  cluster per workload marginal, repeatedly merge the two clusters whose union centroid most
  reduces the uniform-noise error ``C² Σ_M |members(M)| n_M`` (``C`` clusters), stop when no
  merge helps. Centroid ``M`` answers its members by summing cells: ``s_M = Σ_{W∈M} w_W n_M``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

import numpy as np

from ...errors import PlanError
from .groups import StrategyGroup
from .query_factors import fourier_term
from .subspaces import downward_closure

__all__ = ["GroupedStrategy", "identity", "marginals", "fourier", "clustering"]

AttrSet = tuple[int, ...]


@dataclass(frozen=True)
class GroupedStrategy:
    """Groups and their direct-recovery weights ``s_g`` (objective ``Σ_g s_g σ_g²``)."""

    name: str
    groups: tuple[StrategyGroup, ...]
    direct_weight: np.ndarray

    @property
    def sensitivity(self) -> np.ndarray:
        return np.array([g.sensitivity for g in self.groups], dtype=float)


def _group(sizes, attrs, kind="marginal") -> StrategyGroup:
    return StrategyGroup(tuple(attrs), tuple(sizes[i] for i in attrs), kind)


def _live(sets, weights):
    return [(tuple(s), float(w)) for s, w in zip(sets, weights) if w > 0]


def identity(sizes: Sequence[int], sets: Sequence[AttrSet], weights) -> GroupedStrategy:
    """``S = I`` on the union of the workload's attributes (one marginal group)."""
    live = _live(sets, weights)
    union = tuple(sorted(set().union(*[set(s) for s, _ in live])))
    nu = prod(sizes[i] for i in union)
    s = np.array([sum(w for _, w in live) * nu], dtype=float)
    return GroupedStrategy("identity", (_group(sizes, union),), s)


def marginals(sizes: Sequence[int], sets: Sequence[AttrSet], weights) -> GroupedStrategy:
    """``S = Q``: one group per (positively weighted) workload marginal."""
    live = _live(sets, weights)
    groups = tuple(_group(sizes, s) for s, _ in live)
    s = np.array([w * g.cells for (_, w), g in zip(live, groups)], dtype=float)
    return GroupedStrategy("marginals", groups, s)


def fourier(sizes: Sequence[int], sets: Sequence[AttrSet], weights, forms=None) -> GroupedStrategy:
    """Residual (Fourier for binary attributes) blocks of every subset of a workload marginal.

    ``forms`` (one tuple of :class:`~.query_factors.AttributeForms` per marginal, for prefix /
    range / custom queries) weighs subspace ``B`` of ``W`` by its share of ``W``'s summed query
    variance (:func:`~.query_factors.fourier_term`); ``None``: plain cells."""
    forms = [None] * len(sets) if forms is None else list(forms)
    live = [(tuple(s), float(w), f) for s, w, f in zip(sets, weights, forms) if w > 0]
    closure = downward_closure(s for s, _, _ in live)
    index = {b: i for i, b in enumerate(closure)}
    s = np.zeros(len(closure))
    from itertools import combinations

    for w_set, w, f in live:
        for k in range(len(w_set) + 1):
            for b in combinations(w_set, k):
                s[index[b]] += w * fourier_term(w_set, f, sizes, b)
    groups = tuple(_group(sizes, b, "residual") for b in closure)
    return GroupedStrategy("fourier", groups, s)


def clustering(
    sizes: Sequence[int], sets: Sequence[AttrSet], weights, *, max_marginals: int = 128
) -> GroupedStrategy:
    """Greedy clustering of the workload marginals into centroid marginals ([6], §4.x)."""
    live = _live(sets, weights)
    if len(live) > max_marginals:
        raise PlanError(
            f"clustering is cubic in the number of marginals; {len(live)} > max_marginals="
            f"{max_marginals} (use strategy='optimized', which scales)"
        )
    cells = lambda a: float(prod(sizes[i] for i in a))  # noqa: E731
    # cluster: (centroid, summed member weight)
    cents: list[frozenset] = [frozenset(s) for s, _ in live]
    mass: list[float] = [w for _, w in live]

    def cost(cs, ms):
        return len(cs) ** 2 * sum(m * cells(c) for c, m in zip(cs, ms))

    current = cost(cents, mass)
    while len(cents) > 1:
        best = None
        c2 = len(cents) - 1
        base = sum(m * cells(c) for c, m in zip(cents, mass))
        for i in range(len(cents)):
            for j in range(i + 1, len(cents)):
                u = cents[i] | cents[j]
                new = base - mass[i] * cells(cents[i]) - mass[j] * cells(cents[j])
                new += (mass[i] + mass[j]) * cells(u)
                # A merged centroid may coincide with an existing one: merge those too.
                val = c2**2 * new
                if best is None or val < best[0]:
                    best = (val, i, j)
        if best is None or best[0] >= current:
            break
        _, i, j = best
        u = cents[i] | cents[j]
        m = mass[i] + mass[j]
        cents = [c for k, c in enumerate(cents) if k not in (i, j)]
        mass = [x for k, x in enumerate(mass) if k not in (i, j)]
        if u in cents:
            mass[cents.index(u)] += m
        else:
            cents.append(u)
            mass.append(m)
        current = cost(cents, mass)
    groups = tuple(_group(sizes, tuple(sorted(c))) for c in cents)
    s = np.array([m * g.cells for m, g in zip(mass, groups)], dtype=float)
    return GroupedStrategy("clustering", groups, s)
