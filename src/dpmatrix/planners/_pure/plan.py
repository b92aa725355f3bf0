"""Pure ε-DP plans for marginal workloads: strategy choice, optimal budgets, exact variances.

Pipeline (Cormode et al. §3): (1) a strategy = groups of integer rows (:mod:`.strategies`,
:mod:`.optimize`); (2) budgets ``ε_g`` with ``Σ_g C_g ε_g ≤ ε`` — the cube-root rule
(Corollary 3.3) on the paper's direct-recovery objective, equal budgets (``budgeting="uniform"``),
or the numerically optimized marginal weights; budgets are rounded *down* to dyadic rationals
and the privacy sum is checked in exact arithmetic; (3) discrete Laplace noise with parameter
``ε_g`` on each group's integer answers (exact sampler, OS CSPRNG); (4) GLS recovery per
residual subspace with the *exact* discrete Laplace variances ``1/(2 sinh²(ε_g/2))`` as weights
(:mod:`.subspaces`): consistent marginals, exact variances known before any data is touched.

Prefix / range / custom query types: the same strategies; every query ``⊗ W_i`` of a marginal is
answered from its GLS cells (consistent across marginals), its exact variance computed per
subspace without a dense query matrix (:meth:`SubspaceGLS.kron_query_variance`), and the budgets
weigh each group by the queries it serves (:mod:`.query_factors`). The per-attribute tree / Haar
strategies (:mod:`.hierarchical`) are planned alongside by ``strategy="auto"``; a user's matrix
goes to :mod:`.matrix_strategy`.

Privacy: every group's rows have the same column L1 norm ``C_g`` on every cell of the full domain
(marginal cells: 1; residual blocks: ``Π(n_i-1)``), so the strategy's sensitivity under the
budget scaling is exactly ``max_cell Σ_g ε_g C_g = Σ_g ε_g C_g`` (Definition 3.1; the tests check
it against the explicit max column L1 norm of the ε_g-scaled stacked matrix).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ..._domain import Domain
from ..._mechanisms.laplace import round_budgets, row_noise_variance
from ..._mechanisms.linear import LinearMechanism
from ..._reconstruct.estimator import EntryAnswer, Estimator
from ..._reconstruct.labels import cell_labels
from ..._reconstruct.measurements import axis_labels
from ..._solvers.budget_split import cube_root_split, uniform_split
from ..._workload import Workload
from ...errors import PlanError
from .._base import PlanBase
from .._formats import plan_format
from . import strategies as _strategies
from .groups import StrategyGroup
from .query_factors import cell_weight, query_forms
from .subspaces import SubspaceGLS
from .units import PureUnits, check_epsilon

if TYPE_CHECKING:
    import pandas as pd  # imported where a table is built: reading a plan needs none

__all__ = ["PurePlan", "plan_pure", "STRATEGIES", "FORMAT", "check_epsilon"]

FORMAT = "dpmatrix.pureplan/1"

STRATEGIES = ("identity", "marginals", "fourier", "clustering", "optimized")
AttrSet = tuple[int, ...]


def _fraction_str(f: Fraction) -> str:
    return f"{f.numerator}/{f.denominator}"


@plan_format(FORMAT)
@dataclass(frozen=True, eq=False)
class PurePlan(PureUnits, PlanBase):
    """A pure ε-DP measurement plan: groups, their budgets, and exact GLS variances.

    Attributes
    ----------
    domain, workload
        What is released (marginals of ``workload``; prefix / range / custom query types are
        answered from the GLS cells).
    epsilon : float
        The total budget; :meth:`privacy_epsilon` is the exact ``Σ_g C_g ε_g ≤ epsilon``.
    strategy, budgeting : str
        Which strategy and budget rule produced the groups (``"optimal"``, ``"uniform"`` or
        ``"optimized"``).
    groups : tuple of StrategyGroup
        Each group: attribute set + integer map on that marginal's table.
    budgets : tuple of Fraction
        ``ε_g``, the exact discrete Laplace parameter of each group (noise ``∝ e^{-ε_g|y|}``).
    variance_model : {"discrete", "continuous"}
        ``"discrete"``: exact discrete Laplace variances (what is released). ``"continuous"``:
        ``2/ε_g²`` (the paper's model; used to reproduce its numbers).
    comparison : tuple of dict
        For ``strategy="auto"``: every candidate's objective (or why it was skipped).
    """

    domain: Domain
    workload: Workload
    epsilon: float
    strategy: str
    budgeting: str
    groups: tuple[StrategyGroup, ...]
    budgets: tuple[Fraction, ...]
    variance_model: str = "discrete"
    comparison: tuple[dict, ...] = field(default=(), compare=False)


    def optimality_ratio(self) -> None:
        """``None``: not applicable to pure ε-DP plans (see :meth:`lower_bound`)."""
        return None

    # -- variances ---------------------------------------------------------------------------

    @cached_property
    def noise_variance(self) -> np.ndarray:
        """Per-row noise variance of each group (inf for a group with budget 0)."""
        return row_noise_variance([float(b) for b in self.budgets], self.variance_model)

    @cached_property
    def _sets(self) -> tuple[AttrSet, ...]:
        return tuple(tuple(s) for s in self.workload.sets)

    @cached_property
    def _gls(self) -> SubspaceGLS:
        return SubspaceGLS.build(self.domain.sizes, self.groups, self.noise_variance, self._sets)

    @cached_property
    def _cell_variances(self) -> np.ndarray:
        return np.array([self._gls.cell_variance(s) if w > 0 or self._gls.answerable(s) else np.inf
                         for s, w in zip(self._sets, self.workload.weights)])

    def _resolve(self, attrs) -> AttrSet:
        return tuple(sorted(self.domain.resolve(attrs)))

    def cell_variance(self, attrs) -> float:
        """Variance of each cell of the GLS estimate of the ``attrs``-marginal (the same for every
        cell; any marginal the strategy identifies, not only the workload's)."""
        a = self._resolve(attrs)
        if a in self._sets:
            return float(self._cell_variances[self._sets.index(a)])
        gls = SubspaceGLS.build(self.domain.sizes, self.groups, self.noise_variance, [a])
        return gls.cell_variance(a)

    def _variance(self, key) -> np.ndarray:
        return np.full(tuple(self.domain.sizes[i] for i in key), self.cell_variance(key))

    def _query_mats(self, j: int) -> list:
        """Each attribute's query rows (:mod:`.query_rows`: intervals are never expanded)."""
        from .query_rows import attribute_queries

        s, wk = self._sets[j], self.workload
        return [attribute_queries(wk, a, k) for a, k in zip(s, wk.types(j))]

    @cached_property
    def _entry_cache(self) -> dict:
        return {}

    def entry_variance(self, j: int) -> np.ndarray:
        """Exact variance of every query of workload marginal ``j`` (shaped like its table of
        queries: cells for plain marginals, ``⊗ W_i`` rows for prefix / range / custom types)."""
        if self.workload.is_plain:
            return self._variance(self._sets[j])
        if j not in self._entry_cache:
            self._entry_cache[j] = self._gls.kron_query_variance(self._sets[j], self._query_mats(j))
        return self._entry_cache[j].copy()

    def _query_variance(self, key) -> np.ndarray:
        pos = self.workload._position.get(tuple(key))
        if self.workload.is_plain or pos is None:
            return self._variance(key)
        return self.entry_variance(pos)

    def covariance(self, attrs, other=None) -> np.ndarray:
        """Dense covariance of the ``attrs``-marginal estimate (C order of its table), or the
        cross-covariance between the ``attrs`` and ``other`` marginal estimates."""
        a = self._resolve(attrs)
        if other is None:
            return SubspaceGLS.build(self.domain.sizes, self.groups, self.noise_variance, [a]).covariance(a)
        b = self._resolve(other)
        gls = SubspaceGLS.build(self.domain.sizes, self.groups, self.noise_variance, [a, b])
        return gls.cross_covariance(a, b)

    def query_variance(self, attrs, queries: np.ndarray | None = None) -> np.ndarray:
        """Variances of linear queries (rows of ``queries``) on the ``attrs``-marginal table;
        ``queries=None`` gives the variances of the workload's queries on it (the cells for a
        plain marginal, or a marginal outside the workload)."""
        a = self._resolve(attrs)
        if queries is None:
            return self._query_variance(a)
        gls = SubspaceGLS.build(self.domain.sizes, self.groups, self.noise_variance, [a])
        return gls.query_variance(a, queries)

    def _live(self) -> list[int]:
        return [j for j, w in enumerate(self.workload.weights) if w > 0]

    def total_variance(self) -> float:
        """``Σ_W w_W · n_W · Var(cell of W)``: the weighted sum of all workload cell variances
        (prefix / range / custom types: ``Σ_W w_W Σ_{q of W} Var(q)``)."""
        if not self.workload.is_plain:
            return float(sum(self.workload.weights[j] * self.entry_variance(j).sum() for j in self._live()))
        cells = np.array([self.domain.cells(s) for s in self._sets], dtype=float)
        return float((self.workload.weights * cells * self._cell_variances).sum())

    def rmse(self) -> float:
        """Root mean squared error over all cells (queries) of all workload marginals (unweighted)."""
        if not self.workload.is_plain:
            ev = [self.entry_variance(j) for j in self._live()]
            return math.sqrt(sum(float(v.sum()) for v in ev) / sum(v.size for v in ev))
        cells = np.array([self.domain.cells(s) for s in self._sets], dtype=float)
        return math.sqrt(float((cells * self._cell_variances).sum() / cells.sum()))

    def max_variance(self) -> float:
        """Largest cell (query) variance over the (positively weighted) workload marginals."""
        if not self.workload.is_plain:
            return float(max(self.entry_variance(j).max() for j in self._live()))
        return float(self._cell_variances[self.workload.weights > 0].max())

    # -- privacy ------------------------------------------------------------------------------

    def privacy_epsilon(self) -> Fraction:
        """Exact ``Σ_g C_g ε_g`` (the max column L1 norm of the budget-scaled strategy)."""
        return sum((g.sensitivity * b for g, b in zip(self.groups, self.budgets)), Fraction(0))

    def table(self) -> pd.DataFrame:
        """One row per strategy group: attributes, kind, rows, sensitivity ``C_g``, budget ``ε_g``,
        share of ε (``C_g ε_g / ε``), per-row noise variance and the variance of each cell of
        the group's own marginal.

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> import dpmatrix as dm
        >>> wk = dm.Workload(dm.Domain({"A": 2, "B": 2}), [("A",), ("A", "B")])
        >>> t = dm.plan(wk, epsilon=1, delta=0, strategy="marginals").table()
        >>> round(float(t["share"].sum()), 6)
        1.0
        """
        import pandas as pd

        rows = []
        for g, b, v in zip(self.groups, self.budgets, self.noise_variance):
            try:
                cell = self.cell_variance(g.attrs)
            except Exception:  # noqa: BLE001 - a group whose marginal is not identified alone
                cell = math.nan
            rows.append(
                {
                    "attributes": ",".join(self.domain.names_of(g.attrs)),
                    "kind": g.kind,
                    "rows": g.n_rows,
                    "sensitivity": g.sensitivity,
                    "epsilon": float(b),
                    "share": float(b * g.sensitivity) / self.epsilon,
                    "noise_variance": float(v),
                    "cell_variance": cell,
                }
            )
        return pd.DataFrame(rows)

    # -- measurement and reconstruction --------------------------------------------------------

    def mechanisms(self, *, noise: str | None = None, rel_var_tol: float = 1e-4):
        """``(self, [LinearMechanism])``: group ``j`` (budget ``ε_j > 0``) releases its integer
        rows plus exact discrete Laplace noise of parameter ``ε_j`` (key ``j``)."""
        if noise not in (None, "discrete_laplace"):
            raise PlanError(
                f"a pure epsilon-DP plan is measured with exact discrete Laplace noise; noise={noise!r} "
                "is a Gaussian (zCDP / (epsilon, delta)) option: plan with delta > 0 for it"
            )
        return self, [
            LinearMechanism(j, g.attrs, g.answer, (g.n_rows,), "discrete_laplace", b)
            for j, (g, b) in enumerate(zip(self.groups, self.budgets)) if b > 0
        ]

    def estimator(self, noisy) -> PureEstimator:
        """GLS estimates from the noisy group outputs ``noisy[j]``."""
        return PureEstimator(self, noisy)

    def reconstruct(self, outputs: Sequence[np.ndarray]):
        """GLS estimator bound to one output per group (``.marginal(attrs)`` returns a table)."""
        return _NamedEstimator(self, self._gls.estimator(outputs))

    # -- serialization ------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "planner": "pure",
            "domain": self.domain.to_dict(),
            "workload": self.workload.to_dict(),
            "epsilon": self.epsilon,
            "strategy": self.strategy,
            "budgeting": self.budgeting,
            "variance_model": self.variance_model,
            "groups": [g.to_dict() for g in self.groups],
            "budgets": [_fraction_str(b) for b in self.budgets],
            "comparison": [dict(c) for c in self.comparison],
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> PurePlan:
        """The plan written by :meth:`to_dict` (its exact budgets are re-checked).

        Parameters
        ----------
        d : mapping

        Returns
        -------
        PurePlan

        Examples
        --------
        >>> import dpmatrix as dm
        >>> p = dm.plan(dm.Workload(dm.Domain({"A": 2}), [("A",)]), budget=dm.Budget.pure(1))
        >>> PurePlan.from_dict(p.to_dict()).budgets == p.budgets
        True
        """
        if d.get("format", FORMAT) != FORMAT:
            raise PlanError(f"not a pure epsilon-DP plan (format {d.get('format')!r})")
        dom = Domain.from_dict(d["domain"])
        plan = cls(
            domain=dom,
            workload=Workload.from_dict(dom, d["workload"]),
            epsilon=float(d["epsilon"]),
            strategy=d["strategy"],
            budgeting=d["budgeting"],
            groups=tuple(StrategyGroup.from_dict(g) for g in d["groups"]),
            budgets=tuple(Fraction(b) for b in d["budgets"]),
            variance_model=d.get("variance_model", "discrete"),
            comparison=tuple(d.get("comparison", ())),
        )
        if plan.privacy_epsilon() > Fraction(plan.epsilon):
            raise PlanError("stored plan spends more than its epsilon: refusing it")
        return plan


class PureEstimator(Estimator):
    """The :class:`~dpmatrix._reconstruct.estimator.Estimator` of a pure plan: GLS per residual
    subspace (:mod:`.subspaces`), consistent across marginals."""

    def __init__(self, plan: PurePlan, noisy):
        self.plan = plan
        outs = [np.asarray(noisy[j], dtype=float) if j in noisy else np.zeros(g.n_rows)
                for j, g in enumerate(plan.groups)]
        self._est = plan._gls.estimator(outs)

    def estimate(self, key):
        return self._est.marginal(key)

    def variance(self, key):
        return self.plan._variance(key)

    def covariance(self, key):
        return self.plan.covariance(key)

    def query_vector(self, key, q):
        est = float(np.sum(q * self.estimate(key)))
        return est, float(self.plan.query_variance(key, q.reshape(1, -1))[0])

    def entries(self):
        gls = self.plan._gls
        return iter([j for j, s in enumerate(self.plan._sets) if gls.answerable(s)])

    def entry_of(self, key):
        return self.plan.workload.index(key)

    def entry(self, i):
        wk = self.plan.workload
        key = tuple(wk.sets[i])
        dom = self.plan.domain
        names = dom.names_of(key)
        if wk.is_plain:
            labels = cell_labels(dom, key)
            return EntryAnswer(names, names, labels, self.estimate(key), self.variance(key))
        from .query_rows import apply_modes

        mats = self.plan._query_mats(i)
        est = apply_modes(mats, self.estimate(key))  # ⊗ W_i applied axis by axis
        labels = axis_labels(dom, key, wk.types(i), mats)
        return EntryAnswer(names, names, labels, est, self.plan.entry_variance(i))


class _NamedEstimator:
    def __init__(self, plan: PurePlan, est):
        self._plan = plan
        self._est = est

    def marginal(self, attrs) -> np.ndarray:
        return self._est.marginal(self._plan._resolve(attrs))


# -------------------------------------------------------------------------------------------
# Planning
# -------------------------------------------------------------------------------------------


def _fixed(name: str, sizes, sets, weights, max_identity_cells: int, forms=None):
    if name == "identity":
        st = _strategies.identity(sizes, sets, weights)
        if st.groups[0].cells > max_identity_cells:
            raise PlanError(
                f"identity on the union of the workload's attributes has {st.groups[0].cells:.3g} "
                f"cells > max_identity_cells={max_identity_cells}; choose another strategy"
            )
        return st
    if name == "fourier":
        return _strategies.fourier(sizes, sets, weights, forms)
    return getattr(_strategies, name)(sizes, sets, weights)


def _make(workload, eps, name, budgeting, groups, eta, model, comparison=()):
    budgets = round_budgets(eta, [g.sensitivity for g in groups], eps)
    return PurePlan(
        domain=workload.domain,
        workload=workload,
        epsilon=eps,
        strategy=name,
        budgeting=budgeting,
        groups=tuple(groups),
        budgets=budgets,
        variance_model=model,
        comparison=tuple(comparison),
    )


def _plan_one(workload, eps, name, budgeting, model, max_identity_cells, objective="sum") -> PurePlan:
    from .max_objective import max_variance_budgets  # planning only: its solvers and SciPy
    from .optimize import candidate_marginals, optimize_marginal_budgets, random_starts_for

    sizes = workload.domain.sizes
    sets = [tuple(s) for s in workload.sets]
    w = np.asarray(workload.weights, dtype=float)
    # prefix / range / custom queries: the weights of the summed query variances (query_factors);
    # plain cells: forms None, the paper's formulas
    forms = None if workload.is_plain else list(query_forms(workload))
    # identity / marginals / clustering answer W by summing cells: its cells weigh w_W Π T_i / n_W
    wc = w if forms is None else w * np.array([cell_weight(f, tuple(sizes[i] for i in s)) for f, s in zip(forms, sets)])
    live_forms = None if forms is None else [f for f, x in zip(forms, w) if x > 0]
    if name == "optimized":
        if budgeting == "uniform":
            raise PlanError("strategy='optimized' chooses its own budgets; drop budgeting='uniform'")
        live = [(s, x, y) for s, x, y in zip(sets, w, wc) if x > 0]
        lsets, lw, lwc = [s for s, _, _ in live], np.array([x for _, x, _ in live]), np.array([y for _, _, y in live])
        # candidates: every subset of the workload's attributes (few attributes) or its downward
        # closure, plus the greedy clustering's centroids, so that the search contains Q⁺ and C⁺
        fixed = [_strategies.marginals(sizes, lsets, lwc)]
        try:
            fixed.append(_strategies.clustering(sizes, lsets, lwc))
        except PlanError:  # too many marginals for the cubic greedy: closure only
            pass
        cands = candidate_marginals(lsets)
        extra = sorted({g.attrs for st in fixed for g in st.groups} - set(cands), key=lambda t: (len(t), t))
        cands = tuple(cands) + tuple(extra)
        pos = {c: i for i, c in enumerate(cands)}
        starts = []
        for st in fixed:
            start = np.full(len(cands), 1e-3 * eps / len(cands))
            for g, e in zip(st.groups, cube_root_split(2 * st.direct_weight, st.sensitivity, eps).eta):
                start[pos[g.attrs]] = e
            starts.append(start)
        res = optimize_marginal_budgets(sizes, lsets, lw, eps, candidates=cands, starts=starts,
                                        objective=objective, forms=live_forms,
                                        random_starts=random_starts_for(len(cands)))
        keep = res.eta > 1e-6 * res.eta.max()
        groups = [StrategyGroup(c, tuple(sizes[i] for i in c)) for c in cands]
        plan = _make(workload, eps, name, "optimized",
                     [g for g, k in zip(groups, keep) if k], res.eta[keep], model)
        if not all(plan._gls.answerable(s) for s in lsets):  # pruning lost a subspace: keep all
            plan = _make(workload, eps, name, "optimized", groups, res.eta, model)
        return plan
    st = _fixed(name, sizes, sets, w if name == "fourier" else wc, max_identity_cells, forms)
    if budgeting == "optimal" and objective == "max":
        split = max_variance_budgets(st, sizes, [s for s, x in zip(sets, w) if x > 0], eps, live_forms)
    elif budgeting == "optimal":
        split = cube_root_split(2 * st.direct_weight, st.sensitivity, eps)
    elif budgeting == "uniform":
        split = uniform_split(2 * st.direct_weight, st.sensitivity, eps)
    else:
        raise PlanError(f"budgeting must be 'optimal' or 'uniform', got {budgeting!r}")
    return _make(workload, eps, name, budgeting, st.groups, split.eta, model)


def plan_pure(
    workload: Workload,
    epsilon: float,
    *,
    strategy: str = "auto",
    budgeting: str = "optimal",
    objective: str = "sum",
    variance_model: str = "discrete",
    max_identity_cells: int = 10**7,
) -> PurePlan:
    """Plan a pure ε-DP release of a marginal workload (Cormode et al. framework).

    Parameters
    ----------
    workload : Workload
        Plain marginals (identity query type on every attribute) with weights.
    epsilon : float
        Total pure-DP budget (finite, > 0).
    strategy : {"auto", "identity", "marginals", "fourier", "clustering", "optimized", "hierarchical", "haar"} or array
        ``"auto"`` plans every strategy (optimal budgets, plus the uniform variants for the
        comparison) and keeps the one with the smallest ``objective``. Workloads with
        prefix/range/matrix query types take the same cell strategies (their queries answered
        from the consistent GLS cells; budgets weighted by the queries, :mod:`.query_factors`)
        and the per-attribute level strategies ``"hierarchical"`` (trees) and ``"haar"``
        (:mod:`.hierarchical`, a :class:`~.hierarchical.HierarchicalPlan`, one joint GLS
        over all marginals, consistent); ``"auto"`` compares them all. A matrix is a user
        strategy on the cells of the union of the workload's attributes
        (:func:`~.matrix_strategy.plan_pure_matrix`).
    budgeting : {"optimal", "uniform"}
        Cube-root rule (Corollary 3.3) or equal budgets per unit of sensitivity.
    objective : {"sum", "max"}
        ``auto``'s criterion: weighted total variance or largest cell variance, and what the
        optimal budgets minimize (fixed strategies: cube-root rule for "sum", the certified
        convex min-max split of :mod:`.max_objective` for "max"; ``optimized``: its own search).
    variance_model : {"discrete", "continuous"}
        Variances reported with the exact discrete Laplace (default) or the paper's ``2/ε²``.
    max_identity_cells : int
        ``identity`` is refused (and skipped by ``auto``) when the union of the workload's
        attributes has more cells than this (its noisy table must be built).

    Returns
    -------
    PurePlan, HierarchicalPlan or MatrixPurePlan

    Examples
    --------
    >>> from dpmatrix._domain import Domain
    >>> from dpmatrix._workload import Workload
    >>> dom = Domain({"A": 2, "B": 2, "C": 2})
    >>> wl = Workload(dom, [("A",), ("A", "B")])
    >>> p = plan_pure(wl, 1.0, strategy="marginals", variance_model="continuous")
    >>> [round(float(b), 4) for b in p.budgets]
    [0.4425, 0.5575]
    """
    from .matrix_strategy import plan_pure_matrix  # planning only

    eps = check_epsilon(epsilon)
    if not isinstance(workload, Workload):
        raise PlanError(f"plan_pure needs a Workload, got {type(workload).__name__}")
    if not isinstance(strategy, str):  # a user's strategy matrix (explicit, small domains)
        if objective not in ("sum", "max"):
            raise PlanError(f"objective must be 'sum' or 'max', got {objective!r}")
        return plan_pure_matrix(workload, eps, strategy, budgeting=budgeting, objective=objective)
    if variance_model not in ("discrete", "continuous"):
        raise PlanError(f"variance_model must be 'discrete' or 'continuous', got {variance_model!r}")
    if not workload.is_plain:
        return _plan_generalized(workload, eps, strategy, budgeting, objective, variance_model, max_identity_cells)
    if strategy in ("hierarchical", "haar"):
        raise PlanError(f"strategy={strategy!r} is for prefix/range/custom query types; this workload "
                        "has plain marginals only (use 'marginals' or 'auto')")
    if objective not in ("sum", "max"):
        raise PlanError(f"objective must be 'sum' or 'max', got {objective!r}")
    if strategy != "auto":
        if strategy not in STRATEGIES:
            raise PlanError(f"unknown strategy {strategy!r}; choose 'auto' or one of {STRATEGIES}")
        return _plan_one(workload, eps, strategy, budgeting, variance_model, max_identity_cells, objective)
    key = (lambda p: p.total_variance()) if objective == "sum" else (lambda p: p.max_variance())
    rows, best = [], None
    for name in STRATEGIES:
        for bud in (("optimized",) if name == "optimized" else ("optimal", "uniform")):
            try:
                p = _plan_one(workload, eps, name, "optimal" if bud == "optimized" else bud,
                              variance_model, max_identity_cells, objective)
            except PlanError as exc:
                rows.append({"strategy": name, "budgeting": bud, "skipped": str(exc)})
                break
            rows.append({"strategy": name, "budgeting": bud, "total_variance": p.total_variance(),
                         "max_variance": p.max_variance(), "rmse": p.rmse(), "groups": len(p.groups)})
            if best is None or key(p) < key(best):
                best = p
    return dataclasses.replace(best, comparison=tuple(rows))


def _plan_generalized(workload, eps, strategy, budgeting, objective, variance_model, max_identity_cells):
    """Prefix / range / custom query types. The cell strategies (identity, marginals, fourier,
    clustering, optimized: a :class:`PurePlan` whose queries are answered from its consistent
    GLS cells) and the per-attribute level strategies (hierarchical, haar: a
    :class:`~.hierarchical.HierarchicalPlan`); ``"auto"`` plans them all (and the per-attribute
    best of cells / trees / Haar) and keeps the smallest ``objective``, reporting the comparison.
    On a single product with an ordered attribute of ≥ :data:`LARGE_LEVEL_CELLS` cells the tree /
    Haar candidates are planned at :data:`LARGE_BRANCHINGS` and starting shares (the p-Identity
    candidate contains every tree with level shares), and from :data:`LEVEL_SKIP_CELLS` not at
    all; the comparison's rows say so."""
    from .hierarchical import HierarchicalPlan, plan_hierarchical  # planning only: its solvers and SciPy
    from .kron_plan import kron_product_attributes, plan_kron_pidentity, use_kron_plan
    from .pidentity_plan import plan_pidentity, single_product
    from .pidentity_union import MAX_CELLS as _UNION_CELLS
    from .pidentity_union import _two_types, plan_pidentity_union

    if objective not in ("sum", "max"):
        raise PlanError(f"objective must be 'sum' or 'max', got {objective!r}")
    if strategy in ("hierarchical", "haar"):
        return plan_hierarchical(workload, eps, strategy=strategy, budgeting=budgeting, objective=objective,
                                 variance_model=variance_model)
    if strategy == "pidentity":
        if use_kron_plan(workload):  # one product, factor-wise (any size)
            return plan_kron_pidentity(workload, eps, variance_model=variance_model, objective=objective)
        if single_product(workload) is not None:
            return plan_pidentity(workload, eps, variance_model=variance_model, objective=objective)
        return plan_pidentity_union(workload, eps, variance_model=variance_model, objective=objective)
    if strategy != "auto":
        if strategy not in STRATEGIES:
            raise PlanError(f"unknown strategy {strategy!r}; choose 'auto' or one of "
                            f"{STRATEGIES + ('hierarchical', 'haar')}")
        return _plan_one(workload, eps, strategy, budgeting, variance_model, max_identity_cells, objective)
    key = (lambda p: p.total_variance()) if objective == "sum" else (lambda p: p.max_variance())
    rows, best = [], None
    # large ordered attributes: the tree / Haar candidates keep a few branchings at their starting
    # shares (module constants below; the reason is stated in the comparison)
    # (only where the p-Identity candidate, which contains every tree with level shares, is planned)
    prod_attrs = kron_product_attributes(workload)
    large = _large_ordered(workload) if prod_attrs is not None else 0
    level_opts = {} if not large else {"branchings": LARGE_BRANCHINGS, "refine": 0}
    if large:
        rows.append({"strategy": "tree/haar share search", "budgeting": "optimal", "skipped": _large_note(large)})
    candidates = [(n, b) for n in STRATEGIES for b in (("optimized",) if n == "optimized" else ("optimal", "uniform"))]
    candidates += [(n, b) for n in ("hierarchical", "haar") for b in ("optimal", "uniform")]
    candidates += [("per-attribute best", "optimal")]
    if single_product(workload) is not None or use_kron_plan(workload):
        candidates += [("pidentity", "optimal")]
    elif not _two_types(workload) or workload.domain.cells(
            tuple(sorted(set().union(*[set(s) for s in workload.sets])))) <= _UNION_CELLS:
        candidates += [("pidentity-union", "optimal")]
    skipped: set[str] = set()
    if large >= LEVEL_SKIP_CELLS:  # the level candidates' dense n × n matrices cannot be afforded
        for name in ("hierarchical", "haar", "per-attribute best"):
            rows.append({"strategy": name, "budgeting": "optimal", "skipped": (
                f"an ordered attribute has {large} >= {LEVEL_SKIP_CELLS} cells: the level strategies' "
                "dense n x n Gram, inverse and GLS forms cost minutes and gigabytes; every tree with "
                "level shares is in the p-Identity family planned here (strategy='hierarchical' or "
                "'haar' plans them on request)")})
            skipped.add(name)
    for name, bud in candidates:
        if name in skipped:
            continue
        try:
            if name == "pidentity":
                plan_one = plan_kron_pidentity if use_kron_plan(workload) else plan_pidentity
                p = plan_one(workload, eps, variance_model=variance_model, objective=objective)
            elif name == "pidentity-union":
                p = plan_pidentity_union(workload, eps, variance_model=variance_model, objective=objective)
            elif name in ("hierarchical", "haar", "per-attribute best"):
                p = plan_hierarchical(workload, eps, strategy="auto" if name == "per-attribute best" else name,
                                      budgeting=bud, objective=objective, variance_model=variance_model,
                                      **level_opts)
            else:
                p = _plan_one(workload, eps, name, "optimal" if bud == "optimized" else bud, variance_model,
                              max_identity_cells, objective)
        except PlanError as exc:
            rows.append({"strategy": name, "budgeting": bud, "skipped": str(exc)})
            skipped.add(name)
            continue
        row = {"strategy": name, "budgeting": bud, "total_variance": p.total_variance(),
               "max_variance": p.max_variance(), "rmse": p.rmse(), "groups": len(p.groups)}
        if isinstance(p, HierarchicalPlan):
            row["levels"] = ";".join(",".join(t.label for t in ts) for ts in p.per_attribute)
        rows.append(row)
        if best is None or key(p) < key(best) * (1 - 1e-12):
            best = p
    return dataclasses.replace(best, comparison=tuple(rows))


#: from this many cells on an attribute with prefix / range / custom queries, ``auto`` searches the
#: tree / Haar level strategies cheaply (:data:`LARGE_BRANCHINGS`, starting shares only)
LARGE_LEVEL_CELLS = 512
#: from this many cells ``auto`` plans no tree / Haar candidate on such an attribute (their dense
#: n × n matrices: minutes of CPU and ~10 GB at n = 4096); p-Identity contains every tree
LEVEL_SKIP_CELLS = 2048
#: tree branchings ``auto`` tries on such an attribute (the level-share search's starting shares:
#: the better of equal shares and the cube-root rule, a few O(n³) evaluations per branching)
LARGE_BRANCHINGS = (2, 4, 8, 16, 32)


def _large_ordered(workload) -> int:
    """The largest attribute with non-cell queries when it has ≥ :data:`LARGE_LEVEL_CELLS` cells
    (else 0; ``auto`` applies it where the p-Identity candidate is planned): there the full level-share search (every branching 2..16 and ``⌈n^{1/k}⌉``, the
    best four optimized by L-BFGS-B at O(n³) per evaluation) costs minutes to hours."""
    sizes = workload.domain.sizes
    n = max((sizes[a] for j, s in enumerate(workload.sets) for a, k in zip(s, workload.types(j))
             if k != "identity"), default=0)
    return n if n >= LARGE_LEVEL_CELLS else 0


def _large_note(n: int) -> str:
    return (f"an ordered attribute has {n} >= {LARGE_LEVEL_CELLS} cells: the tree / Haar candidates try "
            f"branchings {list(LARGE_BRANCHINGS)} at their starting level shares (better of equal shares and "
            "the cube-root rule), without the L-BFGS-B share optimization or the other branchings "
            "(O(n^3) per evaluation, hundreds of evaluations). A tree with level shares is a member of "
            "the p-Identity family, which 'pidentity' optimizes from the 16-ary tree; pass "
            "strategy='hierarchical' for the full share search")
