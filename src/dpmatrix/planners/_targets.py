r"""Planning from accuracy targets (fitness-for-use).

Paper: Xiao, Ding, Wang, Zhang, Kifer, *Optimizing Fitness-For-Use of Differentially Private
Linear Queries* (PVLDB 14(1)): Problem 1 (§3.3) — the least privacy cost such that every query's
variance is at most its target ``c_q`` — and Problems 3/4 (§6) — at a fixed privacy cost, the
least largest ratio ``Var_q / c_q``. Both are homogeneous (scaling the noise by ``s`` scales every
variance by ``s`` and the cost by ``1/s``), so the Problem-3/4 optimum at cost ``P`` is the
Problem-1 optimum ``Δ²_opt`` rescaled, with least largest ratio ``Δ²_opt / P`` (paper Thms. 5, 12).

Targets are variances; ``target_kind="std"`` gives standard deviations (``c = s²``) and
``"moe95"`` 95 % margins of error of a normal interval (``c = (moe / z_{0.975})²``).

Routes
------
* :class:`~dpmatrix._workload.Workload` (plain and generalized marginals) — the residual
  planners with ``objective="max_var"`` and per-query weights ``1/c_q``: Problem 1 is the
  utility-constrained selection ``min pcost s.t. max_q Var_q/c_q ≤ 1``. Under ResidualPlanner
  every cell of a plain marginal has the same variance, so only the smallest target of a marginal
  binds; the plan is optimal among residual mechanisms, which are optimal among all Gaussian
  matrix mechanisms for marginal workloads when the targets are uniform within each marginal
  (the ResidualPlanner paper: optimal under any convex loss of the marginals' variances). With
  per-cell targets inside a plain marginal an explicit mechanism can do better (e.g. 1.4873
  against 1.5, see the tests). For generalized marginals (prefix/range queries) the plan is
  optimal among ResidualPlanner+ mechanisms with the chosen per-attribute strategies.
* :class:`~dpmatrix._queries.QueryWorkload` — the explicit solver
  :func:`~dpmatrix._solvers.fitness.solve_min_privacy_cost` on the dense query matrix over the
  union of the groups' attributes (at most :data:`EXPLICIT_MAX_CELLS` cells).

Every targets plan carries a :class:`TargetReport`: per marginal/group the target, the achieved
variance and their ratio at the worst query, whether it binds, and the certificate — a lower
bound on the least privacy cost and the relative duality gap. For the residual route the lower
bound is computed here, independently of the solver, from the dual of ``min Σ p_A/x_A s.t.
C x ≤ 1``: any ``λ ≥ 0`` gives ``(Σ_A sqrt(p_A (Cᵀλ)_A))² / Σ λ`` (see
:mod:`dpmatrix._solvers.maxvar_solver`); λ is fitted to the stationarity condition
``Cᵀλ = p/x²`` on the binding queries by non-negative least squares.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._domain import Domain
from .._privacy import Budget, resolve_pcost
from .._queries import QueryWorkload
from .._workload import Workload
from ..errors import PlanError, TargetError, WorkloadError
from ._base import PlanBase
from ._explicit.plan import ExplicitStrategyPlan
from ._residual.plan import Plan, plan_residual

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = [
    "TARGET_KINDS",
    "Z95",
    "EXPLICIT_MAX_CELLS",
    "TargetReport",
    "TargetedPlan",
    "achieved_variances",
    "explicit_plan_from_strategy",
    "parse_targets",
    "plan_targets",
    "target_to_variance",
    "parse_target_spec",
    "targets_from_specs",
]

TARGET_KINDS = ("var", "std", "moe95")
#: Φ⁻¹(0.975), the normal quantile of a 95 % interval (``scipy.stats.norm.ppf(0.975)``, written
#: out so that reading a targets plan needs no SciPy)
Z95 = 1.959963984540054
EXPLICIT_MAX_CELLS = 8192
BINDING_RTOL = 1e-6
DEFAULT_KEY = "*"


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


def target_to_variance(value, kind: str):
    """A target in its unit → a variance target: ``var`` as is, ``std`` squared, ``moe95``
    ``(moe / z_{0.975})²`` (a 95 % normal interval ``± z σ``).

    Examples
    --------
    >>> target_to_variance(10.0, "std")
    100.0
    >>> round(target_to_variance(1.959963984540054, "moe95"), 12)
    1.0
    """
    if kind == "var":
        return value
    if kind == "std":
        return np.square(value) if np.ndim(value) else float(value) ** 2
    if kind in ("moe95", "moe"):
        return np.square(np.divide(value, Z95)) if np.ndim(value) else (float(value) / Z95) ** 2
    raise TargetError(f"target_kind must be one of {TARGET_KINDS}, got {kind!r}")


@dataclass(frozen=True)
class _Entry:
    label: str
    key: tuple[int, ...]
    shape: tuple[int, ...]
    name: str = ""  # a query group's own label

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def _entries(workload) -> list[_Entry]:
    """One entry per workload marginal (its table of queries) or per query group."""
    dom = workload.domain
    out = []
    if isinstance(workload, Workload):
        for i, key in enumerate(workload.sets):
            shape = tuple(
                dom.sizes[a] if t == "identity" else workload.query_matrix(a, t).shape[0]
                for a, t in zip(key, workload.types(i))
            )
            out.append(_Entry(",".join(dom.names_of(key)) or "(total)", tuple(key), shape))
        return out
    labels = [",".join(dom.names_of(g.attrs)) or "(total)" for g in workload.groups]
    own = [g.label for g in workload.groups]
    for i, g in enumerate(workload.groups):
        if labels.count(labels[i]) == 1:
            lab = labels[i]  # the attributes name a group on its own marginal
        elif g.label and own.count(g.label) == 1 and g.label not in labels:
            lab = g.label  # several groups on one marginal: their own labels, when distinct
        else:
            lab = f"{labels[i]}#{i}"
        out.append(_Entry(lab, tuple(g.attrs), tuple(g.shape), g.label))
    return out


def _check_values(values, entry: _Entry, kind: str, what: str) -> np.ndarray:
    if isinstance(values, (str, bytes, bool)):
        raise TargetError(f"the target of {what} must be a number or an array, got {values!r}")
    try:
        v = np.array(values, dtype=float)
    except (TypeError, ValueError):
        raise TargetError(f"the target of {what} must be numbers, got {values!r}") from None
    if v.ndim == 0:
        v = np.full(entry.shape, float(v))
    elif v.size == entry.size:
        v = v.reshape(entry.shape)
    else:
        raise TargetError(
            f"{what} has {entry.size} queries (shape {entry.shape}) but {v.size} targets were "
            f"given; give one number, or one target per query"
        )
    bad = ~np.isfinite(v) | ~(v > 0)
    if np.any(bad):
        first = v[bad].reshape(-1)[:3].tolist()
        raise TargetError(
            f"targets must be positive finite numbers; {what} has {int(bad.sum())} that are not "
            f"(e.g. {first})"
        )
    v = np.asarray(target_to_variance(v, kind), dtype=float)
    v.setflags(write=False)
    return v


def _resolve_key(workload, entries: list[_Entry], key) -> int:
    """Position of the entry a mapping key names (attributes, ``"age,sex"``, a group label or
    index); a marginal not in the workload is a :class:`TargetError` naming it."""
    dom = workload.domain
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool) and isinstance(workload, QueryWorkload):
        if not 0 <= int(key) < len(entries):
            raise TargetError(f"target for group {int(key)}, but the workload has {len(entries)} groups")
        return int(key)
    if isinstance(key, str):
        for j, e in enumerate(entries):
            if e.label == key:
                return j
        named = [j for j, e in enumerate(entries) if e.name and e.name == key]
        if len(named) == 1:
            return named[0]
        names: Any = () if key.strip() in ("", "()", "(total)", "total") else [
            s.strip() for s in key.split(",")]
    else:
        names = key
    attrs = dom.resolve(names)  # unknown attribute names raise UnknownAttributeError
    hits = [j for j, e in enumerate(entries) if e.key == attrs]
    if not hits:
        raise TargetError(
            f"target given for the marginal {','.join(dom.names_of(attrs)) or '(total)'}, which is "
            f"not in the workload ({', '.join(e.label for e in entries)})"
        )
    if len(hits) > 1:
        raise TargetError(
            f"several query groups are on {','.join(dom.names_of(attrs))}: name them by label or index "
            f"({', '.join(entries[j].label for j in hits)})"
        )
    return hits[0]


def parse_targets(workload, targets, *, target_kind: str = "var") -> tuple[np.ndarray, ...]:
    """Variance targets of every query, one array per marginal/group shaped like its queries.

    Parameters
    ----------
    workload : Workload or QueryWorkload
    targets : float, mapping or array
        One number for every query; a mapping marginal/group → number or array (keys: attribute
        tuples, ``"age,sex"``, group labels or indices; ``"*"`` for every other entry); or a flat
        array with one target per query in the workload's query order (marginals in
        ``workload.sets`` order, queries of each in C order of its table).
    target_kind : {"var", "std", "moe95"}, keyword-only

    Returns
    -------
    tuple of numpy.ndarray
        Variance targets, one read-only array per entry.

    Raises
    ------
    TargetError
        Non-positive, NaN or infinite targets, arrays of the wrong length, a marginal not in the
        workload or without a target (each naming the marginal).

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 2, "b": 3}), [("a",), ("b",)])
    >>> [t.tolist() for t in parse_targets(wk, {"a": 2.0, "b": [1, 2, 3]}, target_kind="std")]
    [[4.0, 4.0], [1.0, 4.0, 9.0]]
    """
    if target_kind not in TARGET_KINDS and target_kind != "moe":
        raise TargetError(f"target_kind must be one of {TARGET_KINDS}, got {target_kind!r}")
    entries = _entries(workload)
    if isinstance(targets, Mapping):
        given: dict[int, Any] = {}
        default = None
        for key, value in targets.items():
            if isinstance(key, str) and key.strip() == DEFAULT_KEY:
                default = value
                continue
            j = _resolve_key(workload, entries, key)
            if j in given:
                raise TargetError(f"two targets given for {entries[j].label}")
            given[j] = value
        missing = [e.label for j, e in enumerate(entries) if j not in given]
        if missing and default is None:
            raise TargetError(
                f"no target for {', '.join(missing[:10])}{' …' if len(missing) > 10 else ''}: give "
                f"every marginal a target, or a default with the key {DEFAULT_KEY!r}"
            )
        return tuple(
            _check_values(given.get(j, default), e, target_kind, e.label) for j, e in enumerate(entries)
        )
    if targets is None:
        raise TargetError("no targets given")
    if np.ndim(targets) == 0:
        return tuple(_check_values(targets, e, target_kind, e.label) for e in entries)
    try:
        flat = np.array(targets, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise TargetError(f"targets must be numbers, a mapping or an array, got {targets!r}") from None
    total = sum(e.size for e in entries)
    if flat.size != total:
        raise TargetError(
            f"{flat.size} targets given but the workload has {total} queries "
            f"({', '.join(f'{e.label}: {e.size}' for e in entries[:8])}); give one per query, in "
            "the workload's query order, or a mapping marginal → target"
        )
    out, at = [], 0
    for e in entries:
        out.append(_check_values(flat[at:at + e.size], e, target_kind, e.label))
        at += e.size
    return tuple(out)


# --------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class TargetReport:
    """Targets, achieved variances and the optimality certificate of a targets plan.

    ``problem`` is ``"least_privacy"`` (Problem 1: every ratio ≤ 1 at the least cost) or
    ``"least_ratio"`` (Problems 3/4 at the given cost). ``pcost_lower_bound`` is a certified
    lower bound on the Problem-1 optimum (the least privacy cost meeting every target, among the
    mechanisms of the route), ``gap`` the relative gap ``(needed − bound) / needed`` of the plan's
    mechanism, ``status`` ``"optimal"`` when the gap is ≤ ``tol``.
    """

    labels: tuple[str, ...]
    kind: str
    targets: tuple[np.ndarray, ...] = field(repr=False)
    achieved: tuple[np.ndarray, ...] = field(repr=False)
    problem: str
    route: str
    pcost: float
    pcost_lower_bound: float
    gap: float
    status: str
    column: str = "marginal"
    tol: float = 1e-6

    @property
    def ratios(self) -> tuple[np.ndarray, ...]:
        """``achieved / target`` per query, one array per entry."""
        return tuple(a / t for a, t in zip(self.achieved, self.targets))

    @property
    def max_ratio(self) -> float:
        """Largest variance/target (≤ 1 up to rounding for Problem 1)."""
        return float(max(np.max(r) for r in self.ratios))

    @property
    def needed_pcost(self) -> float:
        """Privacy cost at which this mechanism meets every target exactly (``pcost · max_ratio``)."""
        return self.pcost * self.max_ratio

    @property
    def max_ratio_lower_bound(self) -> float:
        """Certified lower bound on the least largest ratio at the plan's privacy cost."""
        return self.pcost_lower_bound / self.pcost

    def table(self) -> pd.DataFrame:
        """One row per marginal/group at its worst query: ``target``, ``achieved``, ``ratio``,
        ``binding`` (ratio within 1e-6 of the largest), and the number of ``queries``."""
        rows = []
        top = self.max_ratio
        for lab, t, a in zip(self.labels, self.targets, self.achieved):
            r = a / t
            j = int(np.argmax(r))
            rows.append({self.column: lab, "queries": int(r.size), "target": float(t.reshape(-1)[j]),
                         "achieved": float(a.reshape(-1)[j]), "ratio": float(r.reshape(-1)[j]),
                         "binding": bool(r.reshape(-1)[j] >= top * (1 - BINDING_RTOL))})
        return pd.DataFrame(rows, columns=[self.column, "queries", "target", "achieved", "ratio", "binding"])

    def certificate(self) -> dict[str, Any]:
        """The certificate as plain numbers (see the class docstring)."""
        return {"problem": self.problem, "route": self.route, "pcost": self.pcost,
                "needed_pcost": self.needed_pcost, "pcost_lower_bound": self.pcost_lower_bound,
                "max_ratio": self.max_ratio, "max_ratio_lower_bound": self.max_ratio_lower_bound,
                "gap": self.gap, "status": self.status, "tol": self.tol}

    def rescored(self, achieved: Sequence[np.ndarray], pcost: float) -> TargetReport:
        """The same targets and lower bound for the same mechanism at other noise scales (the
        plan a measurement re-scored for its exact sampler): achieved variances and privacy cost
        replaced, the gap ``(needed − bound) / needed`` and the status recomputed from them."""
        needed = float(pcost) * max(float(np.max(a / t)) for a, t in zip(achieved, self.targets))
        gap = max(needed - self.pcost_lower_bound, 0.0) / needed
        for a in achieved:
            a.setflags(write=False)
        return TargetReport(self.labels, self.kind, self.targets, tuple(achieved), self.problem, self.route,
                            float(pcost), self.pcost_lower_bound, float(gap),
                            "optimal" if gap <= self.tol else "gap_above_tol", self.column, self.tol)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the kind, the per-entry rows, the certificate and, under ``"variances"``,
        every query's target as a variance (one number for an entry whose targets are all
        equal, else the list in the entry's query order), from which
        :func:`~dpmatrix.planners._targets_io.with_target_report` rebuilds the report."""
        return {"kind": self.kind, "rows": self.table().to_dict("records"),
                "certificate": self.certificate(),
                "variances": [_compact(t) for t in self.targets]}


def _compact(t: np.ndarray) -> float | list:
    flat = np.asarray(t, dtype=float).reshape(-1)
    return float(flat[0]) if flat.size and np.all(flat == flat[0]) else flat.tolist()


@dataclass(frozen=True, eq=False)
class TargetedPlan:
    """A plan selected from accuracy targets: any planner's plan with its :class:`TargetReport`.

    The wrapper is the plan protocol by delegation: every fact, variance, mechanism and
    estimator is the wrapped ``plan``'s (attribute access falls through to it), and it adds
    the :class:`~dpmatrix.protocols.HasTargets` capability (``target_table()``,
    ``certificate()``) and the ``"targets"`` entry of :meth:`to_dict`. It is a
    :class:`dpmatrix.Plan` (registered as one); the budget it was planned with and its privacy
    unit live on the wrapped plan, so a saved file states them as the plan alone would.

    Parameters
    ----------
    plan : Plan
        The plan the targets planner selected (ResidualPlanner(+) or an explicit strategy).
    target_report : TargetReport, optional
        ``None`` only for a plan read back without its targets.

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 2, "b": 2}), [("a", "b")])
    >>> p = dm.plan(wk, targets=4.0)
    >>> isinstance(p, TargetedPlan) and isinstance(p, dm.Plan), type(p.plan).__name__
    (True, 'Plan')
    >>> p.planner_name, round(p.pcost, 9)
    ('ResidualPlanner', 0.25)
    """

    plan: Any
    target_report: TargetReport | None = field(default=None, repr=False)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("plan", "target_report"):
            raise AttributeError(name)  # (copy/pickle look these up before the fields exist)
        return getattr(self.plan, name)  # delegation: the wrapped plan answers the protocol

    # -- what the wrapper keeps on the wrapped plan ------------------------------------------
    @property
    def planned_budget(self) -> Budget | None:
        """The budget the plan was planned with (the wrapped plan's)."""
        return self.plan.planned_budget

    @planned_budget.setter
    def planned_budget(self, budget: Budget | None) -> None:
        object.__setattr__(self.plan, "planned_budget", budget)

    @property
    def privacy_unit(self):
        """The person the plan protects (the wrapped plan's)."""
        return self.plan.privacy_unit

    def with_privacy_unit(self, unit) -> TargetedPlan:
        """Mark the wrapped plan as protecting ``unit``; returns this plan."""
        self.plan.with_privacy_unit(unit)
        return self

    # -- the protocol's own entries -------------------------------------------------------------
    def mechanisms(self, *, noise: str | None = None, rel_var_tol: float = 1e-4) -> tuple[Any, list]:
        """The wrapped plan's records; the plan measured keeps the targets."""
        measured, records = self.plan.mechanisms(noise=noise, rel_var_tol=rel_var_tol)
        return (self if measured is self.plan else self._rewrapped(measured)), records

    def _rewrapped(self, measured: Any) -> TargetedPlan:
        """The re-scored plan a measurement returns (the same mechanism at the noise scales of
        the exact sampler), as a targets plan whose report states the variances that plan
        achieves: the targets stay, whether they are met is said for the noise actually drawn."""
        report = self.target_report
        if report is None:
            return TargetedPlan(measured)
        return TargetedPlan(measured, report.rescored(achieved_variances(measured, report.route), measured.pcost))

    def measure(self, data: Any, **options: Any) -> Any:
        """:func:`dpmatrix.measure` of this plan (see :meth:`dpmatrix.Plan.measure`)."""
        return PlanBase.measure(self, data, **options)

    def report(self, path: str | Path, **options: Any) -> Path:
        """The wrapped plan's HTML report, written for this plan (with its targets section);
        options as the wrapped plan's ``report``."""
        return type(self.plan).report(self, path, **options)

    def to_dict(self) -> dict[str, Any]:
        """The wrapped plan's description with the target report under ``"targets"``."""
        out = self.plan.to_dict()
        if self.target_report is not None:
            out["targets"] = self.target_report.to_dict()
        return out

    def saved_dict(self) -> dict[str, Any]:
        """What a plan file holds: :meth:`to_dict` (with the targets) and the privacy unit, as
        :meth:`dpmatrix.Plan.saved_dict` writes it for the wrapped plan."""
        return PlanBase.saved_dict(self)

    def to_json(self, path: str | Path | None = None) -> str:
        """:meth:`saved_dict` as JSON text, also written to ``path`` when given."""
        return PlanBase.to_json(self, path)

    def _targets(self) -> TargetReport:
        if self.target_report is None:
            raise PlanError("this plan was not planned from accuracy targets (or was read back "
                            "without them); plan it with dm.plan(workload, targets=...)")
        return self.target_report

    def target_table(self) -> pd.DataFrame:
        """Per marginal/group: target, achieved variance, ratio, binding (see :class:`TargetReport`)."""
        return self._targets().table()

    def certificate(self) -> dict[str, Any]:
        """Lower bound on the least privacy cost, relative gap and status."""
        return self._targets().certificate()


PlanBase.register(TargetedPlan)


# --------------------------------------------------------------------------------------------
# Residual route
# --------------------------------------------------------------------------------------------


def _residual_certificate(plan: Plan, weights: Sequence[np.ndarray]) -> float:
    """Certified lower bound on ``min Σ p_A/x_A s.t. w_q Var_q(x) ≤ 1`` (the least privacy cost
    meeting every target among the plan's residual mechanisms).

    Rows ``w_q ∂Var_q/∂x`` of the binding queries (ratio within 1e-4 of the largest) are stacked
    in ``C`` (``C x ≤ 1`` at the plan's x rescaled to meet every target); λ ≥ 0 is fitted to ``Cᵀλ = p/x²`` by bounded least squares;
    the bound ``(Σ_A sqrt(p_A (Cᵀλ)_A))² / Σλ`` holds for every λ ≥ 0 (weak duality), so the fit
    affects tightness only."""
    import scipy.sparse as sp  # planning only: reading a targets plan needs no SciPy
    from scipy.optimize import lsq_linear, minimize

    coef = plan.coefficients
    x = np.where(plan.measured, plan.sigma2, np.inf)
    ratios = [coef.query_variances(i, x) * np.asarray(w) for i, w in enumerate(weights)]
    top = max(float(np.max(r)) for r in ratios)
    if not math.isfinite(top) or top <= 0:
        return 0.0
    rows_i, rows_j, vals = [], [], []
    k = 0
    for i, r in enumerate(ratios):
        if coef.uniform or r.ndim == 0:
            cand = [np.unravel_index(int(np.argmax(r)), r.shape)] if r.max() >= top * (1 - 1e-4) else []
        else:
            cand = list(zip(*np.nonzero(r >= top * (1 - 1e-4))))[:2000]
        for q in cand:
            q = tuple(int(v) for v in q)
            idx, val = coef.query_row(i, q)
            rows_i.append(np.full(len(idx), k))
            rows_j.append(idx)
            vals.append(val * float(np.asarray(weights[i])[q]))
            k += 1
    n = len(coef.p)
    C = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows_i), np.concatenate(rows_j))), shape=(k, n))
    xs = x / top  # x scaled to meet every target (C xs ≤ 1): the needed privacy cost is Σ p / xs
    used = np.isfinite(xs)
    g = np.zeros(n)
    g[used] = coef.p[used] / xs[used] ** 2
    CT = sp.csc_matrix(C.T[used])
    scale = float(np.max(g[used])) if used.any() else 1.0
    fit = lsq_linear(CT / scale, g[used] / scale, bounds=(0, np.inf), tol=1e-13, lsmr_tol="auto",
                     max_iter=5000)
    lam = np.maximum(fit.x, 0.0) * scale
    if lam.sum() <= 0:
        return 0.0
    best = _dual_bound(C, coef.p, lam)
    # polish: maximize the concave dual g(λ) = 2 Σ sqrt(p (Cᵀλ)) − Σ λ from the fitted λ
    p = coef.p

    def neg(lv):
        u = np.maximum(np.asarray(C.T @ lv).ravel(), 1e-300)
        sq = np.sqrt(p * u)
        grad = np.asarray(C @ np.where(u > 1e-300, np.sqrt(p / u), 0.0)).ravel() - 1.0
        return -(2.0 * sq.sum() - lv.sum()), -grad

    res = minimize(neg, lam, jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * k,
                   options={"maxiter": 500, "ftol": 1e-15, "gtol": 1e-12})
    return max(best, _dual_bound(C, p, np.maximum(res.x, 0.0)))


def _dual_bound(C: sp.csr_matrix, p: np.ndarray, lam: np.ndarray) -> float:
    """``(Σ_A sqrt(p_A (Cᵀλ)_A))² / Σ λ`` ≤ ``min Σ p/x s.t. C x ≤ 1`` for every λ ≥ 0."""
    if lam.sum() <= 0:
        return 0.0
    u = np.asarray(C.T @ lam).ravel()
    a = float(np.sum(np.sqrt(p * np.maximum(u, 0.0))))
    return a * a / float(lam.sum())


def achieved_variances(plan: Any, route: str) -> tuple[np.ndarray, ...]:
    """Every workload query's variance under ``plan``, one array per marginal/group: the
    residual route's by its coefficients (ResidualPlanner Theorem 4.4, unmeasured residuals at
    ``σ² = ∞``), the explicit route's from the strategy (``W (AᵀA)⁺ Wᵀ`` diagonal)."""
    if route == "residual":
        x = np.where(plan.measured, plan.sigma2, np.inf)
        return tuple(np.asarray(plan.coefficients.query_variances(i, x), dtype=float)
                     for i in range(len(plan.workload)))
    return tuple(np.asarray(plan.group_variance(i), dtype=float) for i in range(len(plan.workload)))


def _plan_residual_targets(workload: Workload, tgt: tuple[np.ndarray, ...], kind: str, pcost: float | None,
                           strategies, construction: str, tol: float) -> TargetedPlan:
    weights = [1.0 / t for t in tgt]
    if pcost is None:
        inner = plan_residual(workload, objective="max_var", loss_bound=1.0, strategies=strategies,
                              construction=construction, query_weights=weights)
    else:
        inner = plan_residual(workload, objective="max_var", pcost=pcost, strategies=strategies,
                              construction=construction, query_weights=weights)
    achieved = achieved_variances(inner, "residual")
    bad = [lab for lab, a in zip((e.label for e in _entries(workload)), achieved) if not np.all(np.isfinite(a))]
    if bad:
        raise PlanError(
            f"no mechanism of this plan answers every query of {', '.join(bad[:5])} (its strategy does "
            "not span them): the targets cannot be met at any finite privacy cost; choose strategies "
            "that span the queries"
        )
    lower = min(_residual_certificate(inner, weights), inner.pcost * max(float(np.max(a / t)) for a, t in zip(achieved, tgt)))
    report = _report(workload, tgt, achieved, kind, "residual", inner.pcost, lower, pcost is None, tol)
    return TargetedPlan(inner, report)


def _report(workload, tgt, achieved, kind, route, pcost, lower, least_privacy, tol, gap=None, status=None):
    labels = tuple(e.label for e in _entries(workload))
    needed = pcost * max(float(np.max(a / t)) for a, t in zip(achieved, tgt))
    if gap is None:
        gap = max(needed - lower, 0.0) / needed
        status = "optimal" if gap <= tol else "gap_above_tol"
    for a in achieved:
        a.setflags(write=False)
    return TargetReport(labels, kind, tuple(tgt), tuple(achieved),
                        "least_privacy" if least_privacy else "least_ratio", route, float(pcost),
                        float(lower), float(gap), status,
                        "marginal" if isinstance(workload, Workload) else "group", tol)


# --------------------------------------------------------------------------------------------
# Explicit route
# --------------------------------------------------------------------------------------------


def _union_attrs(workload: QueryWorkload) -> tuple[int, ...]:
    return tuple(sorted({a for g in workload.groups for a in g.attrs}))


def _expand(matrix: np.ndarray, attrs: tuple[int, ...], union: tuple[int, ...], domain: Domain) -> np.ndarray:
    """Rows over the cells of the marginal on ``attrs`` as rows over the cells of ``union``
    (both in domain order, C order): each query sums over the attributes it does not use."""
    sizes_u = [domain.sizes[a] for a in union]
    shape = [domain.sizes[a] if a in attrs else 1 for a in union]
    m = matrix.shape[0]
    full = np.broadcast_to(matrix.reshape([m] + shape), [m] + sizes_u)
    return np.ascontiguousarray(full).reshape(m, -1)


def _dense_workload(workload: QueryWorkload) -> tuple[tuple[int, ...], np.ndarray]:
    union = _union_attrs(workload)
    cells = workload.domain.cells(union)
    if cells > EXPLICIT_MAX_CELLS:
        raise PlanError(
            f"planning targets for a query workload solves on the explicit matrix over the cells of "
            f"{','.join(workload.domain.names_of(union))} ({cells} cells, at most {EXPLICIT_MAX_CELLS}); "
            "use a Workload of (generalized) marginals, which plans without building the domain"
        )
    W = np.vstack([_expand(g.dense(), tuple(g.attrs), union, workload.domain) for g in workload.groups])
    return union, W


def explicit_plan_from_strategy(workload: QueryWorkload, A, pcost: float, *, attrs=None,
                                target_report: TargetReport | None = None) -> ExplicitStrategyPlan | TargetedPlan:
    """A Gaussian plan measuring ``A x + N(0, I)`` on the cells of ``attrs`` (default: the union
    of the groups' attributes), with ``A`` rescaled so its privacy cost (largest squared column
    norm) is ``pcost``.

    Parameters
    ----------
    workload : QueryWorkload
    A : array (r × N)
        Strategy over the ``N`` cells of the marginal on ``attrs`` (C order, domain order).
    pcost : float
        Privacy cost the plan spends (= 2ρ).
    attrs : iterable of str or int, optional, keyword-only
    target_report : TargetReport, optional, keyword-only
        Given: the plan is a :class:`TargetedPlan` carrying it.

    Returns
    -------
    ExplicitStrategyPlan or TargetedPlan

    Examples
    --------
    >>> import dpmatrix as dm, numpy as np
    >>> dom = dm.Domain({"a": 2})
    >>> qw = dm.QueryWorkload(dom).add_explicit("a", np.eye(2))
    >>> p = explicit_plan_from_strategy(qw, np.eye(2), 2.0)
    >>> round(p.pcost, 12), p.query_variance("a").round(12).tolist()
    (2.0, [0.5, 0.5])
    """
    union = _union_attrs(workload) if attrs is None else workload.domain.resolve(attrs)
    A = np.array(A, dtype=float)
    N = workload.domain.cells(union)
    if A.ndim != 2 or A.shape[1] != N or not np.all(np.isfinite(A)):
        raise PlanError(f"the strategy must be a finite r × {N} matrix, got shape {A.shape}")
    c = resolve_pcost(pcost=pcost)
    A = A * math.sqrt(c / float(np.max(np.einsum("ij,ij->j", A, A))))
    A.setflags(write=False)
    # noise N(0, I) on the rescaled rows: privacy cost = largest squared column norm = pcost
    plan = ExplicitStrategyPlan(workload, tuple(union), A, 1.0, "fitness-for-use")
    return plan if target_report is None else TargetedPlan(plan, target_report)


def _plan_explicit_targets(workload: QueryWorkload, tgt, kind, pcost, measurable, tol) -> TargetedPlan:
    from .._solvers.fitness import solve_min_privacy_cost, solve_min_target_ratio  # (SciPy: planning only)

    union, W = _dense_workload(workload)
    c = np.concatenate([t.reshape(-1) for t in tgt])
    if pcost is None:
        res = solve_min_privacy_cost(W, c, measurable=measurable, tol=tol)
    else:
        res = solve_min_target_ratio(W, c, pcost=pcost, measurable=measurable, tol=tol)
    plan = explicit_plan_from_strategy(workload, res.strategy, res.privacy_cost, attrs=union)
    achieved = achieved_variances(plan, "explicit")
    report = _report(workload, tgt, achieved, kind, "explicit", plan.pcost, res.cost_lower_bound, pcost is None,
                     tol, gap=res.gap, status=res.status)
    return TargetedPlan(plan, report)


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def plan_targets(
    workload,
    targets,
    *,
    target_kind: str = "var",
    pcost: float | None = None,
    rho: float | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    mu: float | None = None,
    budget: Budget | None = None,
    strategies: Mapping[str, Any] | None = None,
    construction: str = "auto",
    measurable=None,
    tol: float = 1e-6,
):
    """Plan from accuracy targets: the least privacy cost meeting every target (no budget,
    Problem 1), or at a budget the least largest variance/target (Problems 3/4).

    Parameters
    ----------
    workload : Workload or QueryWorkload
        Marginals / generalized marginals (residual planners) or query groups (explicit solver,
        at most :data:`EXPLICIT_MAX_CELLS` cells over the groups' attributes).
    targets : float, mapping or array
        See :func:`parse_targets`.
    target_kind : {"var", "std", "moe95"}, keyword-only
        Unit of the targets: variance, standard deviation, or 95 % margin of error.
    pcost, rho, epsilon, delta, mu, budget : optional, keyword-only
        At most one budget (as for :func:`dpmatrix.plan`); none → Problem 1.
    strategies, construction : optional, keyword-only
        ResidualPlanner+ options (Workload route).
    measurable : array, optional, keyword-only
        Explicit route: the queries a mechanism may measure (a query outside their row space
        raises :class:`~dpmatrix.errors.PlanError`).
    tol : float, keyword-only
        Relative duality gap of the certificate (default 1e-6).

    Returns
    -------
    TargetedPlan
        The selected plan (ResidualPlanner(+) or explicit strategy) with ``target_table()``,
        ``certificate()`` and the privacy cost in every unit.

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 2, "b": 2}), [("a", "b")])
    >>> p = plan_targets(wk, 4.0)            # every cell variance ≤ 4: identity noise σ² = 4
    >>> round(p.pcost, 9), p.target_table()["achieved"].round(9).tolist()
    (0.25, [4.0])
    """
    budget_given = any(v is not None for v in (pcost, rho, epsilon, delta, mu, budget))
    c = resolve_pcost(pcost=pcost, rho=rho, epsilon=epsilon, delta=delta, mu=mu, budget=budget) \
        if budget_given else None
    tgt = parse_targets(workload, targets, target_kind=target_kind)
    kind = "moe95" if target_kind == "moe" else target_kind
    if isinstance(workload, Workload):
        if measurable is not None:
            raise PlanError("measurable= applies to query workloads (the explicit solver) only")
        return _plan_residual_targets(workload, tgt, kind, c, strategies, construction, tol)
    if isinstance(workload, QueryWorkload):
        if strategies is not None:
            raise PlanError("strategies= applies to workloads of marginals only")
        return _plan_explicit_targets(workload, tgt, kind, c, measurable, tol)
    raise WorkloadError(f"plan() needs a Workload or QueryWorkload, got {type(workload).__name__}")


_SPEC = re.compile(r"^\s*(?:(?P<marg>[^=<]*)=)?\s*(?P<kind>var|std|moe95|moe)\s*<=\s*(?P<val>\S+)\s*$")


def parse_target_spec(text: str) -> tuple[str, str, float]:
    """One command-line target ``'age,sex=std<=10'`` → ``("age,sex", "std", 10.0)``; no marginal
    (``'var<=100'``) → ``("*", ...)`` (every other marginal); ``moe`` means ``moe95``.

    Examples
    --------
    >>> parse_target_spec("age,sex=std<=10")
    ('age,sex', 'std', 10.0)
    >>> parse_target_spec("var<=100")
    ('*', 'var', 100.0)
    """
    m = _SPEC.match(str(text))
    if not m:
        raise TargetError(
            f"cannot read the target {text!r}: write MARGINAL=KIND<=VALUE with KIND one of var, std, "
            "moe (95 % margin of error), e.g. 'age,sex=std<=10', or KIND<=VALUE for every marginal"
        )
    try:
        val = float(m.group("val"))
    except ValueError:
        raise TargetError(f"the target {text!r} needs a number after '<=', got {m.group('val')!r}") from None
    if not (math.isfinite(val) and val > 0):
        raise TargetError(f"the target {text!r} must be a positive finite number")
    marg = (m.group("marg") or "").strip()
    kind = "moe95" if m.group("kind") == "moe" else m.group("kind")
    return (marg if m.group("marg") is not None else DEFAULT_KEY), kind, val


def targets_from_specs(specs: Sequence[str]) -> dict[str, float]:
    """Command-line targets → a mapping marginal → variance target (each spec's unit converted),
    for :func:`plan_targets` with ``target_kind="var"``."""
    out: dict[str, float] = {}
    for s in specs:
        marg, kind, val = parse_target_spec(s)
        if marg in out:
            raise TargetError(f"two targets for {'every marginal' if marg == DEFAULT_KEY else marg!r}")
        out[marg] = float(target_to_variance(val, kind))
    return out
