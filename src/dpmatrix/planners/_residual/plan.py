"""The plan: everything decided before any data is touched.

A :class:`Plan` holds the workload, one residual mechanism per closure member with its noise
scale ``σ²_A``, and the privacy spent. It is data-independent, so it can be inspected
(:meth:`Plan.table`, :meth:`Plan.variance`, :meth:`Plan.rmse`), saved (:meth:`Plan.to_dict`)
and published before measurement.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._domain import Domain
from ..._hooks import call as call_hook
from ..._jsonfile import json_float
from ..._linalg.kron import is_identity
from ..._linalg.sparse import csr_spmv_inf
from ..._linalg.structured import Identity
from ..._mechanisms.basis import AttributeBasis, attribute_basis, construction_name, identity_basis
from ..._mechanisms.residual import ResidualMechanism
from ..._privacy import Budget, PrivacyReport, resolve_pcost
from ..._workload import AttrSet, Workload
from ...errors import BudgetError, NotMeasuredError, PlanError, WorkloadError
from .._base import PlanBase
from .._formats import RESIDUAL_PLAN_FORMAT, plan_format
from .coefficients import Coefficients, compute_coefficients, outer_variances
from .select import max_query_variance, select

if TYPE_CHECKING:  # pragma: no cover - annotations only
    import pandas as pd

__all__ = ["Plan", "ResidualPlan", "plan_residual"]

PLAN_FORMAT = RESIDUAL_PLAN_FORMAT


@plan_format(PLAN_FORMAT, default=True)
@dataclass(frozen=True, eq=False)
class Plan(PlanBase, PrivacyReport):
    """A selected matrix mechanism: residual sets, their noise scales, and its privacy cost."""

    workload: Workload
    sigma2: np.ndarray = field(repr=False)
    objective: str
    strategies: tuple[np.ndarray, ...] = field(repr=False)
    construction: str = "centred"

    # -- per-attribute factors ----------------------------------------------------------------
    @cached_property
    def bases(self) -> tuple[AttributeBasis, ...]:
        """Mechanism basis of each attribute (from its strategy ``S_i``: Algorithm 4, or the
        split construction, :mod:`~dpmatrix._mechanisms.basis`)."""
        return tuple(_mechanism_basis(S, self.construction) for S in self.strategies)

    def query_basis(self, attr: int, key: str) -> AttributeBasis:
        """Basis answering queries of type ``key`` (base matrix ``W``) on attribute ``attr``."""
        cache = self.__dict__.setdefault("_query_bases", {})
        hit = cache.get((attr, key))
        if hit is None:
            if key == "identity" and self.bases[attr].is_identity:
                hit = self.bases[attr]
            else:
                hit = attribute_basis(self.workload.query_matrix(attr, key), self.strategies[attr],
                                      self.construction)
            cache[attr, key] = hit
        return hit

    def cell_basis(self, attr: int) -> AttributeBasis:
        """Basis answering the cells (``W = I``) of attribute ``attr``."""
        try:
            return self.query_basis(attr, "identity")
        except WorkloadError:
            raise NotMeasuredError(
                f"the cells of {self.domain.names[attr]!r} cannot be estimated: its strategy does "
                "not span every value; ask for the workload's queries (answer/query) instead"
            ) from None

    def _with_sigma2(self, sigma2: np.ndarray, objective: str | None = None) -> Plan:
        """The same mechanisms with other noise scales: strategies, bases, query bases and
        coefficients do not depend on σ², so the computed ones are shared, not recomputed."""
        new = Plan(self.workload, np.asarray(sigma2, dtype=float), objective or self.objective,
                   self.strategies, self.construction)
        for name in ("bases", "_query_bases", "coefficients"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name]
        return new

    @cached_property
    def coefficients(self) -> Coefficients:
        return compute_coefficients(self.workload, self.bases, self.query_basis)

    @property
    def is_plain(self) -> bool:
        """True for ResidualPlanner (every strategy and query is the identity)."""
        return self.workload.is_plain and all(b.is_identity for b in self.bases)

    @property
    def planner_name(self) -> str:
        """``"ResidualPlanner"`` for plain marginals, else ``"ResidualPlanner+"``."""
        return "ResidualPlanner" if self.is_plain else "ResidualPlanner+"

    def _options(self) -> dict[str, Any]:
        return {"construction": self.construction}

    # -- privacy ------------------------------------------------------------------------------

    @cached_property
    def budget(self) -> Budget:
        p = self.coefficients.p
        finite = np.isfinite(self.sigma2)
        return Budget(float(np.sum(p[finite] / self.sigma2[finite])))

    @property
    def pcost(self) -> float:
        """Privacy cost Σ_A p_A/σ²_A: the largest diagonal of Bᵀ Σ⁻¹ B of the whole mechanism
        (Definition 2; exact for ResidualPlanner, Theorem 4.3; for RP+ strategies each factor β_i
        is the attribute's largest diagonal, Theorem 7.1)."""
        return self.budget.pcost

    # -- structure ----------------------------------------------------------------------------
    @property
    def domain(self) -> Domain:
        return self.workload.domain

    @property
    def closure(self):
        return self.workload.closure

    def _attrs(self, attrs: Iterable[str | int] | str) -> AttrSet:
        return self.domain.resolve(attrs)

    def mechanism(self, attrs: Iterable[str | int] | str | AttrSet) -> ResidualMechanism:
        """The residual mechanism of one closure member."""
        key = self._attrs(attrs)
        try:
            i = self.closure.index(key)
        except KeyError:
            raise NotMeasuredError(
                f"{self.domain.names_of(key)} is not in the closure of the workload"
            ) from None
        return ResidualMechanism(key, tuple(self.bases[a] for a in key), float(self.sigma2[i]))

    def mechanisms(self, *, noise: str | None = None, rel_var_tol: float = 1e-4) -> tuple[Plan, list]:
        """``(plan measured, records)`` for the sampler ``noise`` (``"gaussian"``,
        ``"discrete_gaussian"``, ``"lattice_gaussian"``; ``None``: the secure default of
        :func:`~dpmatrix._measure.secure.resolve_noise`): the plan re-scored for exact noise and
        one record per measured residual (:mod:`dpmatrix._measure.residual_records`)."""
        # the measurement modules load pandas and tqdm: only when measuring (reading a release
        # or answering a query from one needs this class without them)
        from ..._measure.residual_records import residual_records
        from ..._measure.secure import resolve_noise

        if noise is None or noise == "auto":
            noise = resolve_noise(self, "auto")
        return residual_records(self, "gaussian" if noise == "gaussian_float" else noise, rel_var_tol)

    def used_attributes(self) -> tuple[int, ...] | None:
        """Positions of the attributes of the measured residual sets."""
        used = sorted({a for s, m in zip(self.closure.sets, self.measured) if m for a in s})
        return tuple(used) if used else None

    def residual_mechanisms(self) -> Iterator[ResidualMechanism]:
        """Residual mechanisms that release noisy answers (finite ``σ²``), in closure order."""
        for i, key in enumerate(self.closure.sets):
            if np.isfinite(self.sigma2[i]):
                yield ResidualMechanism(key, tuple(self.bases[a] for a in key), float(self.sigma2[i]))

    @cached_property
    def measured(self) -> np.ndarray:
        return np.isfinite(self.sigma2)

    # -- accuracy (data-independent) ----------------------------------------------------------
    def _subset_terms(self, key: AttrSet) -> Iterator[tuple[AttrSet, float]]:
        """``(A, σ²_A)`` for every subset ``A`` of ``key`` (all must be in the closure)."""
        for _, sub, i in self.closure.subsets(key):
            if i < 0:
                raise NotMeasuredError(
                    f"{self.domain.names_of(key)} is not in the closure of the workload"
                )
            yield sub, float(self.sigma2[i])

    def _variance(self, key: AttrSet) -> np.ndarray:
        """Per-cell variances of the reconstructed marginal on ``key`` (Theorem 4.4), as an array
        shaped like the marginal table (axes in domain order). Any closure member is accepted."""
        bases = tuple(self.cell_basis(a) for a in key)
        terms = (
            (tuple(c for c, a in enumerate(key) if a in sub), s2) for sub, s2 in self._subset_terms(key)
        )
        return outer_variances(bases, terms)

    @cached_property
    def _workload_sums(self) -> np.ndarray:
        x = np.where(self.measured, self.sigma2, np.inf)
        with np.errstate(invalid="ignore"):
            return csr_spmv_inf(self.coefficients.sum_var_csr, x)

    @cached_property
    def _workload_cell_var(self) -> np.ndarray:
        x = np.where(self.measured, self.sigma2, np.inf)
        return max_query_variance(self.coefficients, x)

    @property
    def _optimized(self) -> np.ndarray:
        """Workload marginals the plan was selected for (positive weight). A zero-weight marginal
        may not be answerable at all; accuracy summaries are over the others."""
        return self.workload.weights > 0

    def total_variance(self) -> float:
        """Sum of the variances of every query (cell, for plain marginals) of the workload's
        positive-weight marginals."""
        return float(np.sum(self._workload_sums[self._optimized]))

    def rmse(self) -> float:
        """sqrt(total variance / number of queries (cells)), over positive-weight marginals."""
        n = float(np.sum(self.workload.n_queries[self._optimized]))
        return math.sqrt(self.total_variance() / n)

    def max_variance(self) -> float:
        """Largest variance of a query (a cell, for plain marginals) of a positive-weight
        workload marginal."""
        return float(np.max(self._workload_cell_var[self._optimized]))

    def _query_variance(self, key: AttrSet) -> np.ndarray:
        """Exact variance of every query of a workload marginal (Theorem 7.2), shaped like its
        table of queries (one axis per attribute, one entry per row of that attribute's ``W``)."""
        i = self.workload.index(key)
        x = np.where(self.measured, self.sigma2, np.inf)
        return self.coefficients.query_variances(i, x)

    def loss(self) -> float:
        """Value of the objective the plan was selected for (weighted; custom losses: NaN)."""
        w = self.workload.weights
        if self.objective == "sum_var":
            return float(np.sum(w * np.where(w > 0, self._workload_sums, 0.0)))
        if self.objective == "max_var":
            return float(np.max(w * np.where(w > 0, self._workload_cell_var, 0.0)))
        return float("nan")

    def _objective_value(self) -> tuple[str, float]:
        """The objective the plan was selected for and its value (custom losses: judged by the
        weighted total variance)."""
        if self.objective in ("sum_var", "max_var"):
            return self.objective, self.loss()
        w = self.workload.weights
        return "custom", float(np.sum(w * np.where(w > 0, self._workload_sums, 0.0)))

    # -- inspection -----------------------------------------------------------------------------
    def table(self) -> pd.DataFrame:
        """One row per residual mechanism: attributes, σ², share of the privacy cost, outputs."""
        import pandas as pd  # a tidy table only when asked for: loading a plan stays light

        return pd.DataFrame(self.residual_columns())

    def residual_columns(self) -> dict[str, Any]:
        """The columns of :meth:`table` as a dict of arrays and lists (no pandas)."""
        sets = self.closure.sets
        p = self.coefficients.p
        with np.errstate(divide="ignore"):
            share = np.where(self.measured, p / self.sigma2, 0.0) / self.pcost
        outputs = [
            math.prod(self.bases[a].r for a in s) for s in sets
        ]
        return {
            "attributes": [",".join(self.domain.names_of(s)) for s in sets],
            "n_attributes": [len(s) for s in sets],
            "sigma2": self.sigma2,
            "pcost_coefficient": p,
            "pcost_share": share,
            "noisy_outputs": outputs,
        }

    def marginal_table(self) -> pd.DataFrame:
        """One row per workload marginal: cells, weight, cell variance (max), std, total variance."""
        import pandas as pd

        return pd.DataFrame(self.marginal_columns())

    def marginal_columns(self) -> dict[str, Any]:
        """The columns of :meth:`marginal_table` as a dict of arrays (no pandas)."""
        wk = self.workload
        cell = self._workload_cell_var
        return {
            "marginal": [",".join(wk.names(i)) for i in range(len(wk))],
            "queries": wk.n_queries.astype(np.int64),
            "weight": wk.weights,
            "max_variance": cell,
            "max_std": np.sqrt(cell),
            "total_variance": self._workload_sums,
        }

    # -- measurement ----------------------------------------------------------------------------
    def report(self, path: str | Path, *, delta: float = 1e-9, level: float = 0.95,
               fairness: bool = True) -> Path:
        """Write a self-contained HTML report of this plan (privacy in every unit, accuracy
        before data, cell fairness, budget shares): an alias of :func:`dpmatrix.report`."""
        return call_hook("report", self, path, delta=delta, level=level, fairness=fairness)

    # -- serialization ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description: domain, workload, objective, noise scales, privacy."""
        strategies = {
            self.domain.names[a]: S.tolist()
            for a, S in enumerate(self.strategies)
            if not self.bases[a].is_identity
        }
        return {
            "format": PLAN_FORMAT,
            "domain": self.domain.to_dict(),
            "workload": self.workload.to_dict(),
            "strategies": strategies,
            "construction": self.construction,
            "objective": self.objective,
            "residuals": [
                {"attributes": list(self.domain.names_of(s)), "sigma2": json_float(v)}
                for s, v in zip(self.closure.sets, self.sigma2)
            ],
            "privacy": self._privacy_spec(),  # what the default release states
        }

    @classmethod
    def from_dict(cls, spec: dict[str, Any]) -> Plan:
        if spec.get("format") != PLAN_FORMAT:
            raise PlanError(f"not a dpmatrix plan (format {spec.get('format')!r})")
        domain = Domain.from_dict(spec["domain"])
        wk = Workload.from_dict(domain, spec["workload"])
        sigma2 = np.full(len(wk.closure), np.inf)
        for r in spec["residuals"]:
            sigma2[wk.closure.index(domain.resolve(r["attributes"]))] = float(r["sigma2"])
        given = spec.get("strategies", {})
        strategies = tuple(
            np.asarray(given[n], dtype=float) if n in given else Identity(size)
            for n, size in zip(domain.names, domain.sizes)
        )
        return cls(wk, sigma2, spec["objective"], strategies,
                   construction_name(spec.get("construction", "centred")))

    def __repr__(self) -> str:
        return (
            f"Plan({self.workload!r}, objective={self.objective!r}, "
            f"{int(self.measured.sum())} residual mechanisms, pcost={self.pcost:.6g}, "
            f"rho={self.rho:.6g})"
        )


#: The ResidualPlanner family's plan under its own name (``dpmatrix.ResidualPlan``); the class keeps
#: its historical name ``Plan`` in this module so that pickles written before still load.
ResidualPlan = Plan


def plan_residual(
    workload: Workload,
    *,
    objective: str | Callable = "sum_var",
    pcost: float | None = None,
    rho: float | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    mu: float | None = None,
    budget: Budget | None = None,
    loss_bound: float | None = None,
    strategies: Mapping[str, str | np.ndarray] | None = None,
    construction: str = "auto",
    query_weights: list[np.ndarray] | None = None,
):
    """Select the optimal residual mechanisms for a workload of marginals (ResidualPlanner).

    Give the privacy budget as exactly one of ``pcost``, ``rho`` (zCDP), ``mu`` (Gaussian DP) or
    ``epsilon`` with ``delta`` — or, instead of a budget, ``loss_bound``: the least private plan
    whose objective is at most that bound (utility-constrained selection, paper eq. 2).

    ``objective``: ``"sum_var"`` (weighted sum over marginals of the sum of their cell variances;
    closed form), ``"max_var"`` (weighted maximum cell variance; convex program) or a callable
    ``f(v) -> cvxpy scalar`` of the vector ``v`` of per-marginal cell variances (in the order of
    ``workload.sets``), convex by CVXPY's rules.

    Workloads with prefix, range or custom query types are planned with ResidualPlanner+
    (paper §7): each such attribute gets a strategy ``S_i`` — ``strategies={"age": ...}`` with
    ``"auto"``/``"optimal"`` (default: for Algorithm 4 the certified minimizer of its
    per-attribute cost β·trace_in, QuerySmasher's eq. 4 on the centred workload; for the split
    construction ``"l2"`` or, with ``max_var``, ``"maxvar"``), ``"l2"`` (the optimal Gaussian
    strategy for the attribute's queries), ``"maxvar"`` (the max-variance-optimal one,
    fitness-for-use Problem 1), ``"pidentity"`` (HDMM's p-identity idea: best of an optimized
    p-identity strategy, the identity and W), ``"identity"``, ``"workload"`` or a matrix —
    turned into residual factors by ``construction``:
    ``"centred"`` (the paper's Algorithm 4) or ``"split"`` (the strategy's total measured
    separately, so each attribute's 1-D mechanism is kept whole; with it ``"optimal"`` means
    the optimal Gaussian strategy for the attribute's queries under the objective, see
    :mod:`~dpmatrix._mechanisms.basis`), or ``"auto"`` (default): plan with both and keep the
    one with the smaller objective (smaller privacy cost under ``loss_bound``) — neither
    dominates: the split wins on workloads mixing a few numeric attributes with categorical
    ones (paper tables 8-12, by up to 52 % in maximum variance), Algorithm 4 on many-attribute
    all-range workloads. ``plan.construction`` says which was kept. With identity queries
    everywhere both are exactly ResidualPlanner (planned once); for ``max_var`` and custom
    objectives on more than ``AUTO_MAX_SETS`` (5,000) residual sets "auto" plans Algorithm 4
    only (each comparison costs a convex solve; ask for ``"split"`` explicitly).

    ``query_weights`` (``max_var`` only; accuracy targets): one array per workload
    marginal shaped like its table of queries; the weight of a query is its entry (the
    workload's marginal weights are then not used).
    """
    if not isinstance(workload, Workload):
        raise WorkloadError(f"plan() needs a Workload, got {type(workload).__name__}")
    budget_given = any(v is not None for v in (pcost, rho, epsilon, delta, mu, budget))
    if loss_bound is not None:
        if budget_given:
            raise PlanError("give either a privacy budget or loss_bound=, not both")
        lb = float(loss_bound)
        if not math.isfinite(lb) or lb <= 0:
            raise BudgetError(f"loss_bound must be a positive finite number, got {loss_bound!r}")
        c = None
    else:
        c = resolve_pcost(pcost=pcost, rho=rho, epsilon=epsilon, delta=delta, mu=mu, budget=budget)
        lb = None
    obj_name = objective if isinstance(objective, str) else "custom"
    name = objective if isinstance(objective, str) else getattr(objective, "__name__", "custom")
    best = None
    candidates = _constructions(workload, construction, strategies, objective)
    for cons in candidates:
        try:
            strats = choose_strategies(workload, strategies, construction=cons, objective=obj_name)
            draft = Plan(workload, np.ones(len(workload.closure)), "draft", strats, cons)
            _ = draft.bases  # a user strategy may not suit the split construction (no total)
        except WorkloadError:
            if len(candidates) > 1 and cons == "split":
                continue
            raise
        weights = workload.weights if query_weights is None else np.ones(len(workload))
        try:
            sel = select(draft.coefficients, weights, objective, pcost=c, loss_bound=lb,
                         query_weights=query_weights)
        except PlanError:
            # "auto": a construction whose max-variance solve stalls leaves the other one
            if len(candidates) > 1 and (best is not None or cons != candidates[-1]):
                continue
            raise
        cand = draft._with_sigma2(sel.sigma2, name)
        # "auto": keep the better construction — the smaller loss at the given budget, or the
        # smaller privacy cost for a loss bound (ties: the paper's Algorithm 4)
        score = cand.pcost if lb is not None else sel.loss
        if best is None or score < best[0] * (1 - 1e-12):
            best = (score, cand)
    if best is None:
        raise PlanError("no residual construction could be planned for this workload")
    return best[1]


# "auto" compares both constructions for objectives other than sum_var only up to this many
# residual sets: each needs its own convex solve, and the split's max-variance problems are
# degenerate (many constraints active together), so they cost more at scale
AUTO_MAX_SETS = 5000


def _constructions(workload: Workload, construction: str, strategies, objective) -> tuple[str, ...]:
    """Residual constructions to plan with: one, or both for ``"auto"`` when they can differ
    (some attribute has non-identity queries or a given strategy) and comparing is cheap (the
    closed-form ``sum_var``, or at most :data:`AUTO_MAX_SETS` residual sets)."""
    if str(construction).lower() != "auto":
        return (construction_name(construction),)
    plain = workload.is_plain and not any(
        not (isinstance(v, str) and v.lower() in ("auto", "identity")) for v in (strategies or {}).values()
    )
    if plain or (objective != "sum_var" and len(workload.closure) > AUTO_MAX_SETS):
        return ("centred",)
    return ("centred", "split")


def choose_strategies(
    workload: Workload, strategies: Mapping[str, str | np.ndarray] | None, *,
    construction: str = "centred", objective: str = "sum_var",
) -> tuple[np.ndarray, ...]:
    """Strategy ``S_i`` of every attribute: the identity for plain attributes (a structured
    :class:`~dpmatrix._linalg.structured.Identity`, O(1) memory), otherwise
    :func:`~dpmatrix._solvers.strategy1d.strategy_matrix` on the stack of its query matrices (its
    ``"auto"`` depends on the residual construction and the objective)."""
    dom = workload.domain
    strategies = dict(strategies or {})
    for name in strategies:
        dom.index(name)  # unknown names raise
    out = []
    for a, (name, n) in enumerate(zip(dom.names, dom.sizes)):
        types = workload.types_by_attribute[a]
        choice = strategies.get(name)
        plain_choice = choice is None or (isinstance(choice, str) and choice.lower() in ("auto", "identity"))
        if plain_choice and (not types or types == ("identity",)) or (
                isinstance(choice, str) and choice.lower() == "identity"):
            out.append(Identity(n))  # structured: no n x n array for a plain attribute
            continue
        from ..._solvers.strategy1d import strategy_matrix  # its optimizer only when planning

        mats = [workload.query_matrix(a, t) for t in types] or [np.eye(n)]
        W = np.unique(np.vstack(mats), axis=0) if len(mats) > 1 else mats[0]
        S = strategy_matrix(W, "auto" if choice is None else choice, construction=construction,
                            objective=objective)
        out.append(np.asarray(S, dtype=float))
    return tuple(out)


def _mechanism_basis(S: np.ndarray, construction: str = "centred") -> AttributeBasis:
    """Residual factors of a strategy (Algorithm 4 or split). A strategy need not contain the
    total: the ∅ residual measures it, so S is paired with the workload ``[S; 1ᵀ]`` it answers."""
    n = S.shape[1]
    if is_identity(S):
        return identity_basis(n)
    return attribute_basis(np.vstack([S, np.ones((1, n))]), S, construction)
