"""Pure ε-DP plans of prefix / range / custom-query workloads with per-attribute level strategies.

Strategy (Cormode et al. §3 with one group per level tuple). For a workload marginal ``A`` each
attribute ``i ∈ A`` carries a level strategy ``H_i^0..H_i^{L_i}`` (:mod:`.levels`: plain cells, a
``b``-ary tree, or the Haar wavelet; attributes asked only for plain cells use cells). Group
``(A, ℓ)``, ``ℓ = (ℓ_i)_{i∈A}``, releases the integer rows ``⊗_{i∈A} H_i^{ℓ_i}`` applied to the
``A``-table plus discrete Laplace noise of parameter ``ε_{A,ℓ}``.

Budgets (product form): ``ε_{A,ℓ} = ε_A Π_i η_{i,ℓ_i}`` with ``Σ_ℓ η_{i,ℓ} = 1``, so the groups
of ``A`` spend ``ε_A`` and the plan ``Σ_A ε_A ≤ ε``: every level has column L1 norm ≤ 1 and
the deepest cells reach 1 in every level tuple, so the max column L1 norm of the budget-scaled
strategy is exactly ``Σ_{A,ℓ} ε_{A,ℓ}`` (:meth:`HierarchicalPlan.privacy_epsilon`). Continuous
model ``2/ε²``: the precision of ``A``'s stack is ``(ε_A²/2) ⊗_i G_i`` and the sum / maximum of
its query variances are ``(2/ε_A²) Π_i F_i`` / ``(2/ε_A²) Π_i M_i`` (:mod:`.levels`), so each
attribute chooses its level strategy alone, and the marginals' budgets follow in closed form:
``objective="sum"``: the cube-root rule (Corollary 3.3) on ``s_A = 2 w_A Π F_i``;
``objective="max"``: ``min max_A w_A c_A/ε_A²`` s.t. ``Σ ε_A = ε`` equalizes the terms,
``ε_A ∝ √(w_A c_A)`` with ``c_A = 2 Π M_i``. With ``objective="sum"`` the marginals' budgets
are then re-split for the joint estimate below (:mod:`.joint_budgets`: a marginal read well
from the others, e.g. a 1-way marginal inside a measured 2-way one, may get no budget of its
own), and that split is kept when its exact objective is smaller. Budgets are rounded down to
dyadic rationals (``Σ ≤ ε`` checked exactly).

Levels are chosen per attribute, once: every marginal containing attribute ``i`` measures it
with the same levels and shares (an attribute asked with different query types in different
marginals gets the strategy best for all of them, each marginal keeping its own factor).

Recovery (§3.2): the joint GLS over every group of every workload marginal
(:mod:`.joint_levels`), with the continuous-model precisions ``ω_A ω_ℓ`` as weights (``ω_A =
ε_A²``, ``ω_ℓ = Π_i η_{i,ℓ_i}²``). Its Gram ``Σ_A ω_A ⊗_{i∈A} G_i ⊗_{i∉A} 11ᵀ`` is diagonalized
attribute by attribute in the basis ``[G_i⁻¹1, B_i]`` (``B_i`` a ``G_i``-orthonormal basis of the
sum-zero vectors), even for uneven trees, so the estimate decomposes over attribute subsets as
ResidualPlanner's does and never touches the full domain. This is the exact GLS for the
continuous model (no query is worse than from its own marginal's groups, the previous
estimator); under the released discrete Laplace noise (exact variances ``v_{A,ℓ}``, not in
product form) it stays unbiased and its covariance is computed exactly as the sandwich
``Γ⁺ (Σ_g ω_g² v_g H_gᵀH_g) Γ⁺``, per attribute (mode products of per-level coefficient
tensors; no object of the full domain's size). Reported variances and objectives are those of
this estimator.

Consistency: every answer — each workload marginal's queries, the cells of any marginal inside a
measured one, any linear query on them — is read from the one joint estimate, so two workload
marginals agree on their common sub-marginal. A marginal inside no measured workload marginal is
not identified (:class:`~dpmatrix.errors.NotMeasuredError`); a zero-weight workload marginal
inside a measured one is answered (not planned for), and so is a workload marginal whose budget
went to the others. The level shares, and the budgets of ``objective="max"``, are still chosen
with the per-marginal model above (the joint estimate only improves on it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from math import prod
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._domain import Domain
from ..._mechanisms.laplace import round_budgets, row_noise_variance
from ..._mechanisms.linear import LinearMechanism
from ..._reconstruct.estimator import EntryAnswer, Estimator
from ..._reconstruct.measurements import axis_labels
from ..._solvers.budget_split import cube_root_split
from ..._workload import Workload
from ...errors import NotMeasuredError, PlanError
from .._base import PlanBase
from .._formats import plan_format
from .entry_summaries import EntryVarianceSummaries
from .joint_levels import AttributeBasis, JointLevelGLS
from .levels import (
    KINDS,
    REFINE,
    AttributeLevels,
    best_levels,
    with_factor,
)
from .query_rows import QueryRows, apply_modes, attribute_queries, stack_rows
from .units import PureUnits, check_epsilon

if TYPE_CHECKING:
    import pandas as pd  # imported where a table is built: reading a plan needs none

__all__ = ["HIERARCHICAL_FORMAT", "LEVEL_STRATEGIES", "HierarchicalPlan", "plan_hierarchical"]

HIERARCHICAL_FORMAT = "dpmatrix.pure_levels_plan/1"

#: strategies of generalized (prefix/range/custom) workloads → the level kinds they allow on
#: attributes whose queries are not plain cells
LEVEL_STRATEGIES = {"marginals": ("cells",), "hierarchical": ("tree",), "haar": ("haar",), "auto": KINDS}

AttrSet = tuple[int, ...]


def _fraction_str(f: Fraction) -> str:
    return f"{f.numerator}/{f.denominator}"


@plan_format(HIERARCHICAL_FORMAT)
@dataclass(frozen=True, eq=False)
class HierarchicalPlan(PureUnits, EntryVarianceSummaries, PlanBase):
    """Pure ε-DP plan of a generalized marginal workload with per-attribute level strategies.

    Attributes
    ----------
    domain, workload
        What is released (marginals whose attributes carry prefix/range/custom query types).
    epsilon : float
        The total budget asked; :meth:`privacy_epsilon` is what is spent (≤ it, exact).
    per_attribute : tuple of tuple of AttributeLevels
        ``per_attribute[j][k]``: level strategy of the ``k``-th attribute of workload marginal ``j``.
    budgets : tuple of tuple of Fraction
        ``budgets[j][t]``: exact discrete Laplace parameter of level tuple ``t`` of marginal ``j``
        (``itertools.product`` order over the marginal's attributes' levels).
    strategy : str
        ``"cells"`` (each marginal's cells), ``"hierarchical"`` (trees),
        ``"haar"``, or ``"mixed"`` (each attribute its best kind).
    budgeting, objective, variance_model : str
        ``"optimal"`` / ``"uniform"``; ``"sum"`` / ``"max"``; ``"discrete"`` (exact discrete
        Laplace variances, what is released) / ``"continuous"`` (``2/ε²``).
    comparison : tuple of dict
        For ``strategy="auto"``: every candidate's objective.
    """

    domain: Domain
    workload: Workload
    epsilon: float
    per_attribute: tuple[tuple[AttributeLevels, ...], ...]
    budgets: tuple[tuple[Fraction, ...], ...]
    strategy: str = "hierarchical"
    budgeting: str = "optimal"
    objective: str = "sum"
    variance_model: str = "discrete"
    comparison: tuple[dict, ...] = field(default=(), compare=False)

    # -- structure ------------------------------------------------------------------------------
    def level_tuples(self, j: int) -> list[tuple[int, ...]]:
        """Level tuples of workload marginal ``j`` (the order of ``budgets[j]``)."""
        return list(itertools.product(*[range(len(t.shares)) for t in self.per_attribute[j]]))

    @property
    def groups(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """``(marginal j, level tuple)`` of every group with a positive budget."""
        return tuple((j, lev) for j in range(len(self.budgets))
                     for lev, b in zip(self.level_tuples(j), self.budgets[j]) if b > 0)

    def measured(self, j: int) -> bool:
        """Whether workload marginal ``j`` is measured (its budget is positive)."""
        return any(b > 0 for b in self.budgets[j])

    def _queries(self, j: int) -> list[QueryRows]:
        """Each attribute's query rows (intervals for cells / prefixes / ranges: no matrix)."""
        s = self.workload.sets[j]
        return [attribute_queries(self.workload, a, k) for a, k in zip(s, self.workload.types(j))]

    # -- privacy --------------------------------------------------------------------------------
    def privacy_epsilon(self) -> Fraction:
        """``Σ_{A,ℓ} ε_{A,ℓ}``: the max column L1 norm of the budget-scaled strategy (module doc)."""
        return sum((b for bs in self.budgets for b in bs), Fraction(0))

    # -- variances ------------------------------------------------------------------------------
    def _noise_var(self, j: int) -> np.ndarray:
        return row_noise_variance(np.array([float(b) for b in self.budgets[j]]), self.variance_model)

    @cached_property
    def _weights(self) -> tuple[np.ndarray, ...]:
        """GLS weight ``ω_ℓ = Π_i η_{i,ℓ_i}²`` of each level tuple (product form)."""
        return tuple(np.array([prod(t.shares[k] ** 2 for t, k in zip(self.per_attribute[j], lev))
                               for lev in self.level_tuples(j)]) for j in range(len(self.budgets)))

    @cached_property
    def _coefficients(self) -> tuple[np.ndarray, ...]:
        """``ω_ℓ² v_ℓ`` as a tensor of shape ``(L_1+1, …)`` per marginal (0 where ``ω = 0``)."""
        out = []
        for j in range(len(self.budgets)):
            w, v = self._weights[j], self._noise_var(j)
            c = np.where(w > 0, w * w * np.where(np.isfinite(v), v, 0.0), 0.0)
            out.append(c.reshape([len(t.shares) for t in self.per_attribute[j]]))
        return tuple(out)

    @cached_property
    def _joint(self) -> JointLevelGLS:
        """The joint GLS over every measured group (:mod:`.joint_levels`): one level strategy per
        attribute, ``ω_A = ε_A²`` with ``ε_A`` the budget the marginal's groups spend."""
        return JointLevelGLS(
            bases={i: AttributeBasis.of(t) for i, t in _shared_levels(self.workload.sets, self.per_attribute,
                                                                       self.measured, self.domain).items()},
            marginals=tuple(tuple(self.workload.sets[j]) for j in self._measured),
            omega=tuple(float(sum(self.budgets[j], Fraction(0))) ** 2 for j in self._measured),
            coefficients=tuple(self._coefficients[j] for j in self._measured),
        )

    @cached_property
    def _measured(self) -> tuple[int, ...]:
        return tuple(j for j in range(len(self.budgets)) if self.measured(j))

    def answerable(self, key: AttrSet) -> bool:
        """Whether the marginal on ``key`` lies inside a measured workload marginal."""
        return bool(self._measured) and self._joint.answerable(tuple(key))

    def _require_key(self, key: AttrSet) -> None:
        if not self.answerable(key):
            raise NotMeasuredError(f"{list(self.domain.names_of(key))} is not inside a measured marginal "
                                   "of the workload")

    def _require(self, j: int) -> None:
        self._require_key(tuple(self.workload.sets[j]))

    def _kron_variance(self, key: AttrSet, rows: list[np.ndarray]) -> np.ndarray:
        """Variances of the queries ``⊗_k rows[k]`` on the ``key``-table (a tensor of shape
        ``(rows[k].shape[0], …)``), exact for the joint estimator under the released noise."""
        self._require_key(key)
        return self._joint.kron_variance(tuple(key), rows)

    @cached_property
    def _entry_variances(self) -> tuple[np.ndarray | None, ...]:
        return tuple(self._kron_variance(s, self._queries(j)) if self.answerable(s) else None
                     for j, s in enumerate(self.workload.sets))

    def entry_variance(self, j: int) -> np.ndarray:
        """Exact variance of every query of workload marginal ``j`` (shape: its table of queries)."""
        self._require(j)
        return self._entry_variances[j].copy()

    def _cells(self, key: AttrSet) -> list[np.ndarray]:
        return [np.eye(self.domain.sizes[a]) for a in key]

    def _variance(self, key: AttrSet) -> np.ndarray:
        return self._kron_variance(key, self._cells(key))

    def _query_variance(self, key: AttrSet) -> np.ndarray:
        return self.entry_variance(self.workload.index(key))

    def lifted_variance(self, key: AttrSet, q: np.ndarray) -> float:
        """Variance of ``⟨q, x̂_key⟩`` for a query ``q`` shaped like the ``key``-table."""
        key = tuple(key)
        self._require_key(key)
        return self._joint.vector_variance(key, q)

    def covariance(self, attrs) -> np.ndarray:
        """Dense covariance of the estimate of the marginal on ``attrs`` (C order; ≤ 4,096 cells)."""
        key = self.domain.resolve(attrs)
        self._require_key(key)
        cells = self.domain.cells(key)
        if cells > 4096:
            raise PlanError(f"covariance of a {cells}-cell marginal is too large to build densely")
        return self._joint.kron_covariance(key, self._cells(key))

    def table(self) -> pd.DataFrame:
        """One row per measured group: marginal, level strategies, level tuple, rows, budget
        ``ε_g``, share of ε, per-row noise variance.

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> import dpmatrix as dm
        >>> wk = dm.Workload(dm.Domain({"a": 8}), [("a",)], query_types={"a": "prefix"})
        >>> t = dm.plan(wk, epsilon=1, delta=0, strategy="haar").table()
        >>> round(float(t["share"].sum()), 6) <= 1.0
        True
        """
        import pandas as pd

        rows = []
        for j, s in enumerate(self.workload.sets):
            var = self._noise_var(j)
            ts = self.per_attribute[j]
            for lev, b, v in zip(self.level_tuples(j), self.budgets[j], var):
                if b <= 0:
                    continue
                rows.append({
                    "attributes": ",".join(self.domain.names_of(s)),
                    "levels": ",".join(t.label for t in ts),
                    "level": ",".join(str(k) for k in lev),
                    "rows": int(prod(t.operator.rows(k) for t, k in zip(ts, lev))),
                    "epsilon": float(b),
                    "share": float(b) / self.epsilon,
                    "noise_variance": float(v),
                })  # fmt: skip
        return pd.DataFrame(rows)

    def marginal_table(self) -> pd.DataFrame:
        """One row per workload marginal: queries, weight, ε spent, total and max variance."""
        import pandas as pd

        rows = []
        for j in range(len(self.workload)):
            v = self._entry_variances[j]
            rows.append({"marginal": ",".join(self.workload.names(j)),
                         "levels": ",".join(t.label for t in self.per_attribute[j]),
                         "queries": int(self.workload.n_queries[j]),
                         "weight": float(self.workload.weights[j]),
                         "epsilon": float(sum(self.budgets[j], Fraction(0))),
                         "total_variance": math.inf if v is None else float(v.sum()),
                         "max_variance": math.inf if v is None else float(v.max())})
        return pd.DataFrame(rows)

    # -- measurement ------------------------------------------------------------------------------
    def mechanisms(self, *, noise: str | None = None, rel_var_tol: float = 1e-4):
        """``(self, [LinearMechanism])``: group ``(j, ℓ)`` releases ``⊗ H^{ℓ}`` applied to marginal
        ``j``'s integer table plus discrete Laplace noise of parameter ``ε_{j,ℓ}`` (key ``(j, ℓ)``)."""
        if noise not in (None, "discrete_laplace"):
            raise PlanError(
                f"a pure epsilon-DP plan is measured with exact discrete Laplace noise; noise={noise!r} "
                "is a Gaussian (zCDP / (epsilon, delta)) option: plan with delta > 0 for it"
            )
        out = []
        for j, s in enumerate(self.workload.sets):
            ops = [t.operator for t in self.per_attribute[j]]
            for lev, b in zip(self.level_tuples(j), self.budgets[j]):
                if b <= 0:
                    continue
                out.append(LinearMechanism((j, lev), tuple(s), _IntegerLevels(tuple(ops), lev),
                                           tuple(op.rows(k) for op, k in zip(ops, lev)), "discrete_laplace", b))
        return self, out

    def estimator(self, noisy) -> HierarchicalEstimator:
        """Joint GLS estimates (every group of every marginal, :mod:`.joint_levels`) from the noisy
        group outputs ``noisy[(j, ℓ)]``."""
        return HierarchicalEstimator(self, noisy)

    # -- serialization ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": HIERARCHICAL_FORMAT,
            "planner": "pure",
            "domain": self.domain.to_dict(),
            "workload": self.workload.to_dict(),
            "epsilon": self.epsilon,
            "strategy": self.strategy,
            "budgeting": self.budgeting,
            "objective": self.objective,
            "variance_model": self.variance_model,
            "per_attribute": [[t.to_dict() for t in ts] for ts in self.per_attribute],
            "budgets": [[_fraction_str(b) for b in bs] for bs in self.budgets],
            "comparison": [dict(c) for c in self.comparison],
            "residuals": [],
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> HierarchicalPlan:
        """The plan written by :meth:`to_dict` (structure and exact privacy re-checked).

        Examples
        --------
        >>> import dpmatrix as dm
        >>> wk = dm.Workload(dm.Domain({"a": 8}), [("a",)], query_types={"a": "range"})
        >>> p = dm.plan(wk, epsilon=1, delta=0, strategy="hierarchical")
        >>> HierarchicalPlan.from_dict(p.to_dict()).budgets == p.budgets
        True
        """
        if d.get("format") != HIERARCHICAL_FORMAT:
            raise PlanError(f"not a dpmatrix pure level-strategy plan (format {d.get('format')!r})")
        dom = Domain.from_dict(d["domain"])
        wk = Workload.from_dict(dom, d["workload"])
        per = tuple(tuple(AttributeLevels.from_dict(t) for t in ts) for ts in d["per_attribute"])
        budgets = tuple(tuple(Fraction(b) for b in bs) for bs in d["budgets"])
        if len(per) != len(wk) or len(budgets) != len(wk):
            raise PlanError("the stored plan's level strategies do not match its workload")
        for s, ts, bs in zip(wk.sets, per, budgets):
            if [t.n for t in ts] != [dom.sizes[a] for a in s] or len(bs) != prod(len(t.shares) for t in ts):
                raise PlanError(f"the stored level strategies of {dom.names_of(s)} do not match the domain")
            if any(b < 0 for b in bs):
                raise PlanError("the stored plan has a negative budget")
        plan = cls(domain=dom, workload=wk, epsilon=float(d["epsilon"]), per_attribute=per, budgets=budgets,
                   strategy=str(d["strategy"]), budgeting=str(d["budgeting"]),
                   objective=str(d.get("objective", "sum")), variance_model=str(d.get("variance_model", "discrete")),
                   comparison=tuple(d.get("comparison", ())))
        if plan.privacy_epsilon() > Fraction(plan.epsilon):
            raise PlanError("stored plan spends more than its epsilon: refusing it")
        _shared_levels(wk.sets, per, plan.measured, dom)
        return plan


class _IntegerLevels:
    """The linear map of one group: level ``lev[k]`` of each attribute applied along axis ``k`` by
    its operator (block sums / cumulative-sum differences: exact int64 arithmetic, no matrix)."""

    def __init__(self, ops, lev):
        self.ops = ops
        self.lev = lev

    def __call__(self, table: np.ndarray) -> np.ndarray:
        t = np.asarray(table)
        for ax, (op, k) in enumerate(zip(self.ops, self.lev)):
            t = op.apply(k, t, axis=ax)
        return t


class HierarchicalEstimator(Estimator):
    """The :class:`~dpmatrix._reconstruct.estimator.Estimator` of a :class:`HierarchicalPlan`: the
    joint GLS over every group (:mod:`.joint_levels`), one estimate behind every answer."""

    def __init__(self, plan: HierarchicalPlan, noisy):
        self.plan = plan
        self.noisy = noisy
        self._tables: dict[int, np.ndarray] = {}
        self._components: dict[AttrSet, np.ndarray] = {}
        self._marginals: dict[AttrSet, np.ndarray] = {}

    def _table(self, pos: int) -> np.ndarray:
        """``b_A = Σ_ℓ ω_ℓ (⊗ H^{ℓᵀ}) y_{A,ℓ}`` of the ``pos``-th measured marginal."""
        if pos not in self._tables:
            p = self.plan
            j = p._measured[pos]
            ts = p.per_attribute[j]
            ops = [t.operator for t in ts]
            acc = np.zeros(tuple(t.n for t in ts))
            for w, lev, b in zip(p._weights[j], p.level_tuples(j), p.budgets[j]):
                if b <= 0 or w == 0:
                    continue
                if (j, lev) not in self.noisy:
                    raise NotMeasuredError(f"the measurements hold no output of group {(j, lev)}")
                y = np.asarray(self.noisy[(j, lev)], dtype=float).reshape([op.rows(k) for op, k in zip(ops, lev)])
                for ax, (op, k) in enumerate(zip(ops, lev)):  # ⊗ H^{ℓᵀ}, axis by axis
                    y = op.adjoint(k, y, axis=ax)
                acc += w * y
            self._tables[pos] = acc
        return self._tables[pos]

    def _component(self, s: AttrSet) -> np.ndarray:
        if s not in self._components:
            self._components[s] = self.plan._joint.component(s, self._table)
        return self._components[s]

    def marginal(self, key: AttrSet) -> np.ndarray:
        """Joint GLS estimate of the marginal table on ``key`` (inside a measured marginal)."""
        key = tuple(key)
        if key not in self._marginals:
            self.plan._require_key(key)
            self._marginals[key] = self.plan._joint.marginal(key, self._component)
        return self._marginals[key]

    def estimate(self, key):
        return self.marginal(key).copy()

    def variance(self, key):
        return self.plan._variance(key)

    def covariance(self, key):
        return self.plan.covariance(key)

    def query_vector(self, key, q):
        key = tuple(key)
        qa = np.asarray(q, dtype=float).reshape(self.marginal(key).shape)
        return float(np.sum(qa * self.marginal(key))), self.plan.lifted_variance(key, qa)

    def entries(self):
        return iter([j for j, s in enumerate(self.plan.workload.sets) if self.plan.answerable(s)])

    def entry_of(self, key):
        return self.plan.workload.index(key)

    def entry(self, i):
        p = self.plan
        wk, dom = p.workload, p.domain
        key = wk.sets[i]
        qs = p._queries(i)
        est = apply_modes(qs, self.marginal(key))
        labels = axis_labels(dom, key, wk.types(i), qs)
        names = dom.names_of(key)
        return EntryAnswer(names, names, labels, est, p.entry_variance(i))


# -------------------------------------------------------------------------------------------
# Planning
# -------------------------------------------------------------------------------------------


def _choose_levels(workload: Workload, kinds, objective: str, shares: str, branching: int | None,
                   branchings=None, refine: int = REFINE):
    """One level strategy per attribute (what the joint estimate needs), with each marginal's
    factor for its own query type. An attribute whose marginals ask different query types (per
    marginal overrides) whose best strategies differ gets the best strategy for all their distinct
    query matrices stacked (a heuristic: the sum / max objective over the union of its queries)."""

    def best(q, allowed):
        try:
            return best_levels(q, kinds=allowed, objective=objective, shares=shares, refine=refine,
                               branchings=branchings if branching is None else [int(branching)])
        except PlanError:
            if "cells" in allowed:
                raise
            # e.g. a tree on 1 cell: that attribute keeps its cells
            return best_levels(q, kinds=("cells",), objective=objective)

    def allowed(k):
        return ("cells",) if k == "identity" else tuple(kinds)

    types: dict[int, list[str]] = {}
    for j, s in enumerate(workload.sets):
        for a, k in zip(s, workload.types(j)):
            if k not in types.setdefault(a, []):
                types[a].append(k)
    chosen: dict[tuple[int, str], AttributeLevels] = {}
    for a, ks in types.items():
        qs = {k: attribute_queries(workload, a, k) for k in ks}
        own = {k: best(qs[k], allowed(k)) for k in ks}
        first = own[ks[0]]
        if all(_same_strategy(first, t) for t in own.values()):
            chosen.update({(a, k): t for k, t in own.items()})
            continue
        kinds_all = tuple(dict.fromkeys(x for k in ks for x in allowed(k)))
        shared = best(stack_rows([qs[k] for k in ks]), kinds_all)
        chosen.update({(a, k): with_factor(shared, qs[k], objective) for k in ks})
    return [tuple(chosen[a, k] for a, k in zip(s, workload.types(j))) for j, s in enumerate(workload.sets)]


def _same_strategy(a: AttributeLevels, b: AttributeLevels) -> bool:
    """Same levels and shares (so the same Gram ``G``), whatever the queries' factor."""
    return (a.n, a.kind, a.branching, a.shares) == (b.n, b.kind, b.branching, b.shares)


def _shared_levels(sets, per_attribute, measured, domain: Domain) -> dict[int, AttributeLevels]:
    """The level strategy of each attribute of a measured marginal; :class:`PlanError` if two
    measured marginals measure one attribute with different strategies (the joint estimate's
    decomposition needs one Gram per attribute; :func:`plan_hierarchical` never plans that)."""
    out: dict[int, AttributeLevels] = {}
    for j, (s, ts) in enumerate(zip(sets, per_attribute)):
        if not measured(j):
            continue
        for a, t in zip(s, ts):
            if a in out and not _same_strategy(out[a], t):
                raise PlanError(
                    f"attribute {domain.names[a]!r} is measured with two different level strategies "
                    f"({out[a].label} {list(out[a].shares)} and {t.label} {list(t.shares)}); a consistent "
                    "joint estimate needs one per attribute: plan the workload again"
                )
            out.setdefault(a, t)
    return out


def _strategy_name(per) -> str:
    kinds = {t.kind for ts in per for t in ts} - {"cells"}
    if not kinds:
        return "cells"
    if kinds == {"tree"}:
        return "hierarchical"
    if kinds == {"haar"}:
        return "haar"
    return "mixed"


def plan_hierarchical(
    workload: Workload,
    epsilon: float,
    *,
    strategy: str = "auto",
    budgeting: str = "optimal",
    objective: str = "sum",
    variance_model: str = "discrete",
    branching: int | None = None,
    branchings: Sequence[int] | None = None,
    refine: int = REFINE,
) -> HierarchicalPlan:
    """Plan a generalized marginal workload with per-attribute level strategies (module doc).

    Parameters
    ----------
    workload : Workload
        Marginals whose attributes carry query types (identity, prefix, range, a matrix).
    epsilon : float
        Total pure-DP budget.
    strategy : {"auto", "hierarchical", "haar", "marginals"}, keyword-only
        The level kind allowed on attributes with prefix/range/custom queries: b-ary trees
        (branching chosen per attribute, or ``branching``), the Haar wavelet, plain cells, or
        (``"auto"``) whichever of the three gives that attribute the smallest factor.
    budgeting : {"optimal", "uniform"}, keyword-only
        Optimized level shares and closed-form marginal budgets, or one equal budget for every
        group (``ε / number of groups``; the kind then chosen at equal shares).
    objective : {"sum", "max"}, keyword-only
        What the shares and budgets minimize: weighted sum, or largest weighted query variance.
    variance_model : {"discrete", "continuous"}, keyword-only
        Exact discrete Laplace variances of the rounded budgets, or the paper's ``2/ε²``.
    branching : int, keyword-only
        Force this tree branching (with ``strategy="hierarchical"``).
    branchings : sequence of int, keyword-only
        The tree branchings searched (default: 2..16 and ``⌈n^{1/k}⌉``,
        :func:`~.levels.best_levels`); ``branching`` takes precedence.
    refine : int, keyword-only
        How many of the candidates (best at their starting shares) get their level shares
        optimized (default :data:`~.levels.REFINE`; ``0``: starting shares only).

    Returns
    -------
    HierarchicalPlan

    Examples
    --------
    >>> from dpmatrix._domain import Domain
    >>> wl = Workload(Domain.from_sizes([16]), [("a0",)], query_types={"a0": "prefix"})
    >>> p = plan_hierarchical(wl, 1.0, strategy="haar")
    >>> p.per_attribute[0][0].kind, float(p.privacy_epsilon()) <= 1.0
    ('haar', True)
    """
    eps = check_epsilon(epsilon)
    if strategy not in LEVEL_STRATEGIES:
        raise PlanError(f"unknown strategy {strategy!r} for prefix/range/custom queries; choose one of "
                        f"{sorted(LEVEL_STRATEGIES)}")
    if objective not in ("sum", "max"):
        raise PlanError(f"objective must be 'sum' or 'max', got {objective!r}")
    if variance_model not in ("discrete", "continuous"):
        raise PlanError(f"variance_model must be 'discrete' or 'continuous', got {variance_model!r}")
    if budgeting not in ("optimal", "uniform"):
        raise PlanError(f"budgeting must be 'optimal' or 'uniform', got {budgeting!r}")
    if branching is not None and strategy != "hierarchical":
        raise PlanError("branching= is an option of strategy='hierarchical'")
    per = _choose_levels(workload, LEVEL_STRATEGIES[strategy], objective, budgeting, branching,
                         branchings, refine)
    w = np.asarray(workload.weights, dtype=float)
    n_groups = np.array([prod(len(t.shares) for t in ts) for ts in per], dtype=float)
    if budgeting == "uniform":
        eps_a = eps * n_groups * (w > 0) / float(n_groups[w > 0].sum())
    elif objective == "sum":
        s = np.array([2 * x * prod(t.factor for t in ts) for x, ts in zip(w, per)])
        eps_a = cube_root_split(s, np.ones(len(s)), eps).eta
    else:
        r = np.sqrt([2 * x * prod(t.factor for t in ts) for x, ts in zip(w, per)])
        eps_a = eps * r / r.sum()
    plan = _with_split(workload, eps, per, eps_a, budgeting, objective, variance_model)
    if budgeting == "optimal" and objective == "sum":
        # the joint GLS reads each marginal from all the others: re-split the marginals' budgets
        # for it (:mod:`.joint_budgets`) and keep whichever split has the smaller exact objective
        bases = {i: AttributeBasis.of(t) for i, t in _shared_levels(workload.sets, per, lambda j: w[j] > 0,
                                                                     workload.domain).items()}
        rows = [[attribute_queries(workload, a, k) for a, k in zip(s, workload.types(j))]
                for j, s in enumerate(workload.sets)]
        from .joint_budgets import JointSumObjective  # planning only (SciPy's optimizer)

        split = JointSumObjective(workload.sets, w, rows, bases, w > 0).minimize(eps_a)
        joint = _with_split(workload, eps, per, split, budgeting, objective, variance_model)
        if joint.total_variance() < plan.total_variance():
            plan = joint
    return plan


def _with_split(workload, eps, per, eps_a, budgeting, objective, variance_model) -> HierarchicalPlan:
    """The plan spending ``eps_a[j]`` on marginal ``j`` (product-form level budgets, rounded down)."""
    eta, ends = [], []
    for j, ts in enumerate(per):
        for lev in itertools.product(*[range(len(t.shares)) for t in ts]):
            eta.append(eps_a[j] * prod(t.shares[k] for t, k in zip(ts, lev)))
        ends.append(len(eta))
    flat = round_budgets(eta, [1] * len(eta), eps)
    budgets = tuple(tuple(flat[lo:hi]) for lo, hi in zip([0, *ends[:-1]], ends))
    return HierarchicalPlan(domain=workload.domain, workload=workload, epsilon=eps, per_attribute=tuple(per),
                            budgets=budgets, strategy=_strategy_name(per), budgeting=budgeting,
                            objective=objective, variance_model=variance_model)
