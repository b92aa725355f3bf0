"""What a report says: numbers gathered from a plan or a release folder into frozen dataclasses.

Every number is taken from one *facts* dictionary laid out like a release manifest
(``privacy``, ``accuracy``, ``marginals``, ``residuals``, ``domain``, ...): for a release it is
the manifest itself, for a plan :func:`plan_facts` builds the same layout from the plan. The
page (:mod:`dpmatrix._report.html`) tags each number with its path in that dictionary, so what a
reader sees can be checked against what is published, number by number.

A report holds only what the release publishes or the plan states — privacy parameters, noise
scales, variances, and the saved noisy tables — never a record, a record count, a seed or a path
of the machine.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from .._privacy import ANALYTIC, DISCRETE_ZCDP, stated_epsilon
from .._release_tables import STAT_COLUMNS, read_table
from .._statement import privacy_summary, pure_summary
from .._version import __version__
from ..errors import DPMatrixError
from ..protocols import HasClosure, HasMarginalColumns, HasMarginalTable, HasResidualColumns, HasTargets, WrapsPlan

if TYPE_CHECKING:
    import pandas as pd

# the planners (for the fairness comparison's second plan) and pandas are imported where used:
# re-rendering a release's report needs neither unless it plans again

__all__ = [
    "Accuracy",
    "Bound",
    "Fairness",
    "MarginalAccuracy",
    "Mechanism",
    "ObjectiveProfile",
    "Privacy",
    "Report",
    "ResidualShare",
    "Strategy",
    "TableView",
    "Tables",
    "Target",
    "plan_content",
    "plan_facts",
    "release_content",
]

#: δ values at which ε is tabulated, and the range of the ε(δ) curve
DELTA_GRID = (1e-12, 1e-9, 1e-6, 1e-3)
CURVE_POINTS = 46

# size caps, so that a report of a release with thousands of marginals stays a few megabytes
MAX_STD_BARS = 40         # bars in the per-marginal std chart (the largest)
MAX_ACCURACY_ROWS = 100   # rows of the per-marginal accuracy table (the largest std first)
MAX_RESIDUAL_ROWS = 25    # rows of the residual-mechanism table (the largest budget shares)
MAX_INLINE = {0: 1, 1: 30, 2: 20}  # marginals shown with table and chart, by order
MAX_TABLE_ROWS = 200      # cells of a table printed inline
MAX_BAR_CELLS = 120       # cells of a one-way chart
MAX_HEATMAP_SIDE = 60     # rows / columns of a two-way heatmap
MAX_LINKS = 200           # marginals listed as file links
TOP_K = 10                # rows shown of a table too long to print (its largest estimates)
FAIRNESS_MAX_SETS = 20000  # residual sets up to which the other objective is planned
MAX_LINK_UP = 2           # ".." steps allowed in links from a report saved outside its release


# -- dataclasses -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Privacy:
    """The guarantee in every unit. ``mu`` is ``None`` where μ-GDP does not apply (discrete
    noise); ``curve`` holds ``(δ, ε(δ))`` points, ``at`` the ε at :data:`DELTA_GRID`;
    ``pure_epsilon`` is set only by a pure ε-DP planner."""

    pcost: float | None
    rho: float | None
    mu: float | None
    epsilon: float
    delta: float
    conversion: str  # "analytic_gaussian" | "zcdp" | "pure"
    definition: str
    curve: tuple[tuple[float, float], ...]
    at: tuple[tuple[float, float], ...]
    pure_epsilon: float | None = None
    pure_key: tuple = ("privacy", "pure_epsilon")  # where the pure ε is in the facts
    unit: Mapping[str, Any] | None = None  # the privacy unit and its per-person statement (dpmatrix._unit)


@dataclass(frozen=True)
class Mechanism:
    """How the noise is made: planner, noise kind and randomness source (``None`` for a plan:
    they are chosen when measuring)."""

    planner: str
    objective: str
    construction: str | None
    noise: str | None
    randomness: str | None


@dataclass(frozen=True)
class MarginalAccuracy:
    """Data-independent accuracy of one workload marginal; ``index`` is its position in the
    facts' ``marginals`` list."""

    index: int
    attributes: tuple[str, ...]
    cells: int
    weight: float
    max_variance: float
    mean_variance: float

    @property
    def max_std(self) -> float:
        return math.sqrt(self.max_variance)


@dataclass(frozen=True)
class Target:
    """An accuracy target of a plan planned from targets, per marginal."""

    attributes: tuple[str, ...]
    target: float
    achieved: float
    ratio: float
    binding: bool


@dataclass(frozen=True)
class Accuracy:
    objective: str
    rmse: float
    max_variance: float
    level: float
    plain: bool
    marginals: tuple[MarginalAccuracy, ...]
    targets: tuple[Target, ...] | None = None


@dataclass(frozen=True)
class ObjectiveProfile:
    """Per-marginal variances of the plan selected for one objective at the same budget."""

    objective: str
    own: bool
    rmse: float
    max_variance: float
    total_variance: float
    cells: tuple[int, ...]
    orders: tuple[int, ...]
    variance: tuple[float, ...]  # average query (cell) variance of each marginal


@dataclass(frozen=True)
class Fairness:
    profiles: tuple[ObjectiveProfile, ...]
    skipped: str | None = None


@dataclass(frozen=True)
class ResidualShare:
    """One residual mechanism: ``index`` in the facts' ``residuals`` list, σ², privacy-cost
    coefficient ``p_A`` and its share ``(p_A/σ²_A) / Σ_B p_B/σ²_B`` of the budget."""

    index: int
    attributes: tuple[str, ...]
    sigma2: float
    coefficient: float
    share: float
    outputs: int


@dataclass(frozen=True)
class Strategy:
    n_measured: int
    residuals: tuple[ResidualShare, ...]  # the largest shares first, at most MAX_RESIDUAL_ROWS
    by_order: tuple[tuple[int, float, int], ...]  # (number of attributes, share, count)


@dataclass(frozen=True)
class Bound:
    """Distance to the best any matrix mechanism can do: the lower bound on the
    reported quantity, the plan's value and their ratio; ``comparison`` rows
    ``(strategy, value, ratio)``."""

    quantity: str
    lower_bound: float
    value: float
    ratio: float
    comparison: tuple[tuple[str, float, float], ...] = ()
    attainable: str = ""  # whether any mechanism can reach the bound, in words


def attainability(objective: str, quantity: str, exact: bool | None, plain: bool) -> str:
    """Whether the singular value bound (Li & Miklau §3.2) can be reached, in words: the
    weighted total variance bound is tight for plain marginals (ResidualPlanner attains it); it
    is exact but not always attainable for other workloads; a max-variance objective is compared
    with the bound on the mean (``T*/n``), usually not attainable for the maximum; a structured
    bound of generalized marginals may be loose."""
    if objective == "max_var" or "max" in quantity:
        return ("usually not attainable: the bound is on the mean variance (T*/n), and no plan "
                "can give every query the mean, so a ratio above one does not show that a better plan exists")
    if exact is False:
        return "may not be attainable: a valid but possibly loose bound for these generalized queries"
    if plain:
        return "attainable: for plain marginals the bound is tight (ResidualPlanner reaches it)"
    return "exact, but not always attainable for queries other than plain marginals"


@dataclass(frozen=True)
class TableView:
    """One released marginal: its files and, when shown inline, its saved numbers.

    ``axes`` are the ordered row labels of each attribute; ``labels`` one tuple per row; the
    numeric columns are those of the saved table (``source``, a file of the release)."""

    index: int
    attributes: tuple[str, ...]
    cells: int
    max_variance: float
    files: tuple[tuple[str, str], ...]  # (format, link relative to the report)
    source: str | None = None
    axes: tuple[tuple[str, ...], ...] = ()
    labels: tuple[tuple[str, ...], ...] = ()
    estimate: tuple[float, ...] = ()
    std: tuple[float, ...] = ()
    lower: tuple[float, ...] = ()
    upper: tuple[float, ...] = ()
    show_table: bool = False
    show_figure: bool = False
    query: str = ""  # a one-line command printing this table from the release
    top: tuple[int, ...] = ()  # rows of a table too long to print: the largest estimates

    @property
    def order(self) -> int:
        return len(self.attributes)


@dataclass(frozen=True)
class Tables:
    level: float
    inline: tuple[TableView, ...]
    links: tuple[TableView, ...]
    links_left_out: int
    count_by_order: tuple[tuple[int, int], ...]  # (order, number of released marginals)
    dataset: str | None = None  # link to the release's Parquet dataset folder (all tables)
    release_name: str = "RELEASE"  # the release folder's name, for the query lines


@dataclass(frozen=True)
class Report:
    """Everything a report page shows."""

    kind: str  # "plan" | "release"
    version: str
    created: str | None
    domain: tuple[tuple[str, int, str, tuple], ...]  # (name, size, kind, path of the size)
    n_marginals: int
    total_cells: int
    privacy: Privacy
    mechanism: Mechanism
    accuracy: Accuracy
    fairness: Fairness
    strategy: Strategy
    bound: Bound | None
    tables: Tables | None
    link_prefix: str = ""  # path from the page's folder to the release folder ("" = the same)
    ledger: str | None = None  # the release's privacy-budget ledger entry, or "not in any ledger"
    links_note: str | None = None  # set when links are relative to the release folder, not the page


# -- facts -----------------------------------------------------------------------------------------
def _version() -> str:

    return __version__


def _planner_name(plan) -> str:
    return plan.planner_name


def plan_facts(plan, *, delta: float = 1e-9, level: float = 0.95) -> dict[str, Any]:
    """The numbers of a plan in the layout of a release manifest (no measurement fields).

    Parameters
    ----------
    plan : Plan
        A ResidualPlanner / ResidualPlanner+ plan (QuerySmasher plans: privacy, accuracy and
        residuals only).
    delta : float
        δ at which ε is stated.
    level : float
        Confidence level of the margins of error.

    Returns
    -------
    dict
        ``library``, ``privacy``, ``mechanism``, ``accuracy``, ``confidence_level``, ``domain``,
        ``objective``, ``construction``, ``residuals``, ``marginals``.
    """
    if plan.budget.is_pure:
        return _pure_plan_facts(plan, level)
    from .._measure.secure import resolve_noise  # a plan's report only: a release's states its own noise

    spec = plan.to_dict()
    facts: dict[str, Any] = {
        "library": {"name": "dpmatrix", "version": _version()},
        # the guarantee of the noise a default (secure) release of this plan draws
        "privacy": privacy_summary(plan, noise=resolve_noise(plan, "auto"), delta=float(delta)),
        "mechanism": {"noise": None, "randomness": None, "planner": _planner_name(plan)},
        "accuracy": {"rmse": plan.rmse(), "max_variance": plan.max_variance()},
        "confidence_level": float(level),
        "domain": spec["domain"],
        "objective": spec.get("objective", "sum_var"),
        "construction": spec.get("construction"),
        "residuals": spec["residuals"],
    }  # fmt: skip
    if isinstance(plan, HasMarginalTable):
        info = _marginal_summary(plan)
        wk = plan.workload
        facts["marginals"] = [
            {"attributes": list(wk.names(i)), "cells": int(wk.cells[i]), "weight": float(wk.weights[i]),
             "max_variance": float(info["max_variance"][i])}
            for i in range(len(wk))
        ]  # fmt: skip
    else:  # QuerySmasher: one entry per query group
        wk = plan.workload
        facts["marginals"] = [
            {"attributes": list(plan.domain.names_of(g.attrs)), "cells": int(np.prod(g.shape)),
             "weight": float(np.mean(g.weights)), "max_variance": float(np.max(plan.group_variance(i)))}
            for i, g in enumerate(wk.groups)
        ]  # fmt: skip
    for hook in ("targets", "lower_bound"):  # present for plans from targets and with a Gaussian bound
        value = _hook(plan, hook)
        if value is not None:
            facts[hook] = value
    return facts


def _pure_plan_facts(plan, level: float) -> dict[str, Any]:
    """:func:`plan_facts` of a pure ε-DP plan: ``privacy`` as in its release manifest
    (ε, δ = 0, ρ = ε²/2, no μ), no residual mechanisms, one entry per measured workload marginal
    with its largest query variance."""
    spec = plan.to_dict()
    wk = plan.workload
    marginals = []
    for i in range(len(wk)):
        try:
            var = np.asarray(plan.query_variance(wk.sets[i]), dtype=float)
        except DPMatrixError:  # a zero-weight marginal the plan does not measure
            continue
        marginals.append({"attributes": list(wk.names(i)), "cells": int(var.size), "weight": float(wk.weights[i]),
                          "max_variance": float(var.max())})
    objective = plan.facts.objective
    return {
        "library": {"name": "dpmatrix", "version": _version()},
        "privacy": pure_summary(plan),
        "mechanism": {"noise": "discrete_laplace", "randomness": None,
                      "planner": plan.planner_name},
        "accuracy": {"rmse": plan.rmse(), "max_variance": plan.max_variance()},
        "confidence_level": float(level),
        "domain": spec["domain"],
        "objective": objective,
        "construction": None,
        "residuals": [],
        "marginals": marginals,
    }  # fmt: skip


def _hook(plan, name: str):
    """Optional facts of newer planners, read by name only (never required)."""
    if name == "targets":
        return json_rows(plan.target_table()) if isinstance(plan, HasTargets) else None
    if name == "lower_bound" and not plan.budget.is_pure:  # no Gaussian bound for pure ε-DP plans
        try:
            return plan.lower_bound_facts()  # the manifest entry: value, ratio, quantity ...
        except Exception:  # an optional section must never break the report
            return None
    return None


def json_rows(df: pd.DataFrame) -> list[dict]:
    return [{k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()} for row in df.to_dict("records")]


# -- privacy ---------------------------------------------------------------------------------------
def _privacy(facts: Mapping[str, Any], discrete: bool) -> Privacy:
    """The guarantee (:func:`_record_privacy`) with the privacy unit, when the release has one."""
    unit = facts["privacy"].get("unit")
    out = _record_privacy(facts, discrete)
    return replace(out, unit=unit) if isinstance(unit, Mapping) and isinstance(unit.get("per_person"), Mapping) else out


def _record_privacy(facts: Mapping[str, Any], discrete: bool) -> Privacy:
    """The guarantee from the facts' ``privacy`` entry. A pure ε-DP release (a
    ``pure_epsilon`` entry, or δ = 0) has no ε(δ) curve and no μ-GDP; Gaussian ones get the
    exact analytic curve, discrete Gaussian ones the zCDP conversion."""
    p = facts["privacy"]
    definition = p.get("definition") or (
        "rho-zCDP (equivalently mu-GDP, and (epsilon, delta)-DP by the exact analytic Gaussian "
        "conversion); neighbouring datasets differ by adding or removing one record"
    )
    opt = lambda k: None if p.get(k) is None else float(p[k])  # noqa: E731
    pure, pure_key = opt("pure_epsilon"), ("privacy", "pure_epsilon")
    if pure is None and opt("delta") == 0.0:
        pure, pure_key = float(p["epsilon"]), ("privacy", "epsilon")
    if pure is not None or opt("pcost") is None:
        return Privacy(opt("pcost"), opt("rho"), None, float(p["epsilon"]), float(p.get("delta") or 0.0),
                       "pure", str(definition), (), (), pure, pure_key)
    pcost, rho = float(p["pcost"]), float(p["rho"])
    if p.get("accounting") is not None:  # stated by dpmatrix._statement.privacy_summary
        discrete = p["accounting"] != ANALYTIC
    accounting = DISCRETE_ZCDP if discrete else ANALYTIC
    eps_of = lambda d: stated_epsilon(pcost, d, accounting)  # noqa: E731  (the statement's function)
    conversion = "zcdp" if discrete else "analytic_gaussian"
    deltas = np.logspace(-12, -3, CURVE_POINTS)
    curve = tuple((float(d), float(eps_of(float(d)))) for d in deltas)
    at = tuple((d, float(eps_of(d))) for d in DELTA_GRID)
    return Privacy(pcost, rho, opt("mu"), float(p["epsilon"]), float(p["delta"]), conversion,
                   str(definition), curve, at)


# -- accuracy --------------------------------------------------------------------------------------
def _accuracy(facts: Mapping[str, Any], plan) -> Accuracy:
    mean_var = _mean_variances(plan)
    rows = []
    for i, e in enumerate(facts["marginals"]):
        names = tuple(e["attributes"])
        mv = float(e["max_variance"])
        rows.append(MarginalAccuracy(i, names, int(e["cells"]), float(e.get("weight", 1.0)), mv,
                                     mean_var.get(names, mv)))
    targets = None
    if facts.get("targets"):
        targets = tuple(
            Target(tuple(t.get("attributes") or str(t.get("marginal", "")).split(",")), float(t["target"]),
                   float(t["achieved"]), float(t["ratio"]), bool(t.get("binding", t.get("binds", False))))
            for t in facts["targets"]
        )  # fmt: skip
    acc = facts["accuracy"]
    return Accuracy(str(facts.get("objective", "")), float(acc["rmse"]), float(acc["max_variance"]),
                    float(facts.get("confidence_level", 0.95)), isinstance(plan, HasClosure) and plan.is_plain,
                    tuple(rows), targets)


def _marginal_summary(plan):
    """A plan's per-marginal accuracy columns (``marginal_table``), as plain arrays when the plan
    gives them (no pandas to import for a report)."""
    return plan.marginal_columns() if isinstance(plan, HasMarginalColumns) else plan.marginal_table()


def _mean_variances(plan) -> dict[tuple[str, ...], float]:
    """Average query (cell) variance of every workload marginal of a residual plan."""
    if not isinstance(plan, HasMarginalTable):
        return {}
    t = _marginal_summary(plan)
    mean = np.asarray(t["total_variance"], dtype=float) / np.asarray(t["queries"], dtype=float)
    return {tuple(plan.workload.names(i)): float(mean[i]) for i in range(len(plan.workload))}


# -- fairness (paper §6.2) -------------------------------------------------------------------------
def _profile(plan, objective: str, own: bool) -> ObjectiveProfile:
    wk = plan.workload
    t = _marginal_summary(plan)
    keep = np.asarray(wk.weights) > 0
    mean = np.asarray(t["total_variance"], dtype=float) / np.asarray(t["queries"], dtype=float)
    idx = np.flatnonzero(keep)
    return ObjectiveProfile(
        objective, own, plan.rmse(), plan.max_variance(), plan.total_variance(),
        tuple(int(wk.cells[i]) for i in idx), tuple(len(wk.sets[i]) for i in idx),
        tuple(float(mean[i]) for i in idx),
    )  # fmt: skip


def _fairness(plan, enabled: bool) -> Fairness:
    # the residual planner itself (the comparison is between its two objectives): importing
    # dispatch would load every other planner too
    from ..planners._residual.plan import Plan
    from ..planners._residual.plan import plan_residual as make_plan

    if isinstance(plan, WrapsPlan):  # e.g. planned from targets: the residual plan it selected
        plan = plan.plan
    if not isinstance(plan, Plan):
        return Fairness((), "this planner optimizes the sum of variances only, so there is no "
                        "other objective to compare with")
    if not enabled:
        return Fairness((), "the comparison was not asked for (fairness=False)")
    if len(plan.closure) > FAIRNESS_MAX_SETS:
        return Fairness((), "the workload is too large to plan a second time for the report; "
                        "plan it with the other objective to compare")
    strategies = {plan.domain.names[a]: S for a, S in enumerate(plan.strategies)
                  if not plan.bases[a].is_identity}
    profiles = []
    for obj in ("sum_var", "max_var"):
        if plan.objective == obj:
            profiles.append(_profile(plan, obj, True))
            continue
        other = make_plan(plan.workload, objective=obj, pcost=plan.pcost, strategies=strategies or None,
                          construction=plan.construction)
        profiles.append(_profile(other, obj, False))
    return Fairness(tuple(profiles))


# -- strategy --------------------------------------------------------------------------------------
def _strategy(facts: Mapping[str, Any], plan) -> Strategy:
    names = [tuple(r["attributes"]) for r in facts["residuals"]]
    sigma2 = np.array([_float(r["sigma2"]) for r in facts["residuals"]])
    measured = np.isfinite(sigma2)
    coef, outputs = _coefficients(plan, names)
    cost = np.where(measured, coef / np.where(measured, sigma2, 1.0), 0.0)
    share = cost / cost.sum() if cost.sum() > 0 else cost
    order = np.array([len(n) for n in names])
    by_order = tuple(
        (int(k), float(share[order == k].sum()), int(np.sum(measured & (order == k))))
        for k in sorted(set(order[measured].tolist()))
    )
    top = np.argsort(-share, kind="stable")[: MAX_RESIDUAL_ROWS]
    rows = tuple(ResidualShare(int(j), names[j], float(sigma2[j]), float(coef[j]), float(share[j]),
                               int(outputs[j])) for j in top if measured[j])  # fmt: skip
    return Strategy(int(measured.sum()), rows, by_order)


def _coefficients(plan, names: Sequence[tuple[str, ...]]) -> tuple[np.ndarray, np.ndarray]:
    """Privacy-cost coefficient ``p_A`` and number of noisy outputs of each residual set, in the
    order of ``names`` (the facts' residual list)."""
    if isinstance(plan, HasClosure):  # residual plans: closure order is the facts' order
        # one row per closure set, in closure order (as plain columns when the plan gives them)
        t = plan.residual_columns() if isinstance(plan, HasResidualColumns) else plan.table()
        pos = {tuple(plan.domain.names_of(s)): i for i, s in enumerate(plan.closure.sets)}
        idx = np.array([pos[n] for n in names])
        return (np.asarray(t["pcost_coefficient"], dtype=float)[idx],
                np.asarray(t["noisy_outputs"], dtype=np.int64)[idx])
    # QuerySmasher: each residual space's sub-mechanism has its own privacy cost
    if not names:  # a plan without residual mechanisms (pure epsilon-DP strategy groups)
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    by_name = {tuple(plan.domain.names_of(S)): r for S, r in plan.residuals.items()}
    coef = np.array([plan.solutions[by_name[n].structure].pcost for n in names], dtype=float)
    outs = np.array([plan.solutions[by_name[n].structure].n_outputs for n in names], dtype=np.int64)
    return coef, outs


def _float(v) -> float:
    """A manifest number (non-finite values are written as the strings "inf" / "nan")."""
    return float(v)


# -- bound ------------------------------------------------------------------------------
def _bound(facts: Mapping[str, Any], plain: bool = False) -> Bound | None:
    lb = facts.get("lower_bound") or facts.get("accuracy", {}).get("lower_bound")
    if not lb:
        return None
    exact = None
    if isinstance(lb, Mapping):
        value, ratio = float(lb["value"]), float(lb["ratio"])
        quantity = str(lb.get("quantity", "total variance"))
        comparison = tuple((str(c["strategy"]), float(c["value"]), float(c["ratio"]))
                           for c in lb.get("comparison", ()))
        exact = lb.get("exact")
        objective = str(lb.get("objective") or facts.get("objective", ""))
    else:
        value = float(lb)
        ratio = float(facts["accuracy"].get("optimality_ratio", math.nan))
        quantity, comparison = "total variance", ()
        objective = str(facts.get("objective", ""))
    return Bound(quantity, value, value * ratio, ratio, comparison,
                 attainability(objective, quantity, None if exact is None else bool(exact), plain))


# -- released tables -------------------------------------------------------------------------------
def _safe_link(folder: Path, rel: str) -> str | None:
    """A manifest file path, if it is a plain relative path inside the release folder."""
    p = PurePosixPath(str(rel))
    if p.is_absolute() or ".." in p.parts or "\\" in str(rel) or not p.parts:
        return None
    if not (folder / p).is_file():
        return None
    return p.as_posix()


def _read_table(path: Path, fmt: str, names: Sequence[str]) -> dict[str, list] | None:
    """Columns of a saved table, read with pyarrow (Parquet: the exact binary numbers; CSV:
    attribute columns kept as text, so labels such as "01" stay as written)."""

    try:
        if fmt == "parquet":

            table = pq.read_table(path)
        else:

            opts = pcsv.ConvertOptions(column_types={n: pa.string() for n in names},
                                       strings_can_be_null=False, quoted_strings_can_be_null=False)
            table = pcsv.read_csv(path, convert_options=opts)
    except (OSError, ValueError, pa.ArrowException):
        return None
    return table.to_pydict()


def _read_dataset_table(folder: Path, rel: str, entry: Mapping[str, Any]) -> dict[str, list] | None:
    """Columns of a table of the release's Parquet dataset (its row group only), or ``None``."""
    from ..errors import ReleaseError

    names = [str(c) for c in entry.get("columns", entry["attributes"])]
    try:
        t = read_table(folder / rel, rel, entry["table"], [*names, *STAT_COLUMNS], str(entry.get("key")), None)
    except (ReleaseError, KeyError, OSError, pa.ArrowException):
        return None
    return t.to_pydict()


def query_line(release_name: str, names: Sequence[str]) -> str:
    """The command that prints one table of a release (names quoted for a POSIX shell)."""
    import json as _json
    import shlex

    if not names:
        arg = "--marginal total"
    elif any("," in n for n in names) or "total" in names:
        arg = "--marginal-json " + shlex.quote(_json.dumps(list(names)))
    else:
        arg = "--marginal " + shlex.quote(",".join(names))
    return f"dpmatrix query {shlex.quote(release_name)} {arg}"


def _table_view(folder: Path, index: int, entry: Mapping[str, Any], prefix: str, inline: bool) -> TableView:
    names = tuple(entry["attributes"])
    links = []
    loc = entry.get("table")
    dataset = _safe_link(folder, loc.get("file", "")) if isinstance(loc, Mapping) else None
    for fmt, rel in entry.get("files", {}).items():
        safe = _safe_link(folder, rel)
        if safe is not None:
            links.append((str(fmt), safe))
    # per table, only files a browser opens (its CSV); the Parquet dataset holds every table and
    # is linked once for the section (a per-marginal Parquet file of an older release is kept)
    files = tuple((fmt, prefix + rel) for fmt, rel in links if fmt == "csv" or dataset is None)
    base = TableView(index, names, int(entry["cells"]), _float(entry["max_variance"]), files,
                     query=query_line(folder.name, names))
    if dataset is not None:
        links.append(("parquet", dataset))
    if not inline or not links:
        return base
    # the Parquet file holds the exact numbers; the page links the CSV too, for readers
    if dataset is not None:  # data-src "<part>#<key>": the rows of that key in the dataset
        cols, source = _read_dataset_table(folder, dataset, entry), f"{prefix}{dataset}#{entry.get('key')}"
    else:
        fmt, rel = sorted(links, key=lambda x: x[0] != "parquet")[0]
        cols, source = _read_table(folder / rel, fmt, names), prefix + rel
    needed = [*names, "estimate", "std", "lower", "upper"]
    if cols is None or any(c not in cols for c in needed) or not cols["estimate"]:
        return base
    cells = len(cols["estimate"])
    labels = [[str(v) for v in cols[n]] for n in names]
    axes = tuple(tuple(dict.fromkeys(col)) for col in labels)
    grid_ok = math.prod(len(a) for a in axes) == cells
    if len(names) == 2 and grid_ok:  # C order: the first attribute varies slowest
        n2 = len(axes[1])
        grid_ok = all(labels[0][i] == axes[0][i // n2] and labels[1][i] == axes[1][i % n2]
                      for i in range(cells))
    show_figure = grid_ok and (
        (len(names) == 1 and cells <= MAX_BAR_CELLS)
        or (len(names) == 2 and max(len(a) for a in axes) <= MAX_HEATMAP_SIDE)
    )
    col = lambda c: tuple(float(v) for v in cols[c])  # noqa: E731
    est = col("estimate")
    show_table = cells <= MAX_TABLE_ROWS
    top = () if show_table else tuple(int(i) for i in np.argsort(-np.asarray(est), kind="stable")[:TOP_K])
    return TableView(
        index, names, base.cells, base.max_variance, files, source, axes,
        tuple(zip(*labels)) if names else ((),) * cells,
        est, col("std"), col("lower"), col("upper"),
        show_table=show_table, show_figure=show_figure, query=base.query, top=top,
    )  # fmt: skip


def _tables(facts: Mapping[str, Any], folder: Path, prefix: str) -> Tables:
    """Inline tables chosen to be readable: within each order the smallest tables first (a
    4-cell table before a 1,000-cell one), at most :data:`MAX_INLINE` per order; the others are
    listed with their CSV link or query line, smallest first."""
    entries = facts["marginals"]
    counts: dict[int, int] = {}
    for e in entries:
        k = len(e["attributes"])
        counts[k] = counts.get(k, 0) + 1
    order = sorted(range(len(entries)), key=lambda i: (len(entries[i]["attributes"]), int(entries[i]["cells"]), i))
    shown: dict[int, int] = {}
    inline, links = [], []
    left_out = 0
    for i in order:
        e = entries[i]
        k = len(e["attributes"])
        shown[k] = shown.get(k, 0) + 1
        if shown[k] <= MAX_INLINE.get(k, 0):
            inline.append(_table_view(folder, i, e, prefix, inline=True))
        elif len(links) < MAX_LINKS:
            links.append(_table_view(folder, i, e, prefix, inline=False))
        else:
            left_out += 1
    dataset = None
    for e in entries:
        loc = e.get("table")
        rel = _safe_link(folder, loc.get("file", "")) if isinstance(loc, Mapping) else None
        if rel is not None:
            dataset = prefix + PurePosixPath(rel).parent.as_posix() + "/"
            break
    return Tables(float(facts.get("confidence_level", 0.95)), tuple(inline), tuple(links), left_out,
                  tuple(sorted(counts.items())), dataset, folder.name)


# -- whole report ----------------------------------------------------------------------------------
def values_text(v: Mapping[str, Any] | int) -> str:
    """What an attribute's values are, in a few words: its labels (first and last for long
    lists), its bin edges, or its codes."""
    if not isinstance(v, Mapping):
        return f"codes 0..{int(v) - 1}"
    labels, bins = v.get("labels"), v.get("bins")
    if labels:
        labels = [str(x) for x in labels]
        return ", ".join(labels) if len(labels) <= 6 else f"{', '.join(labels[:3])}, …, {labels[-1]}"
    if bins:
        from .._domain import fmt_edge

        e = [fmt_edge(float(x)) for x in bins]
        return (f"bins with edges {', '.join(e)}" if len(e) <= 8
                else f"{len(e) - 1} bins from {e[0]} to {e[-1]} (edges {', '.join(e[:3])}, …)")
    return f"codes 0..{int(v['size']) - 1}"


def _domain(facts: Mapping[str, Any]) -> tuple[tuple[str, int, str, tuple, str], ...]:
    out = []
    for name, v in facts["domain"].items():
        if isinstance(v, Mapping):
            out.append((name, int(v["size"]), str(v.get("kind", "categorical")), ("domain", name, "size"),
                        values_text(v)))
        else:
            out.append((name, int(v), "categorical", ("domain", name), values_text(v)))
    return tuple(out)


def _ledger_line(facts: Mapping[str, Any]) -> str:
    """Where the release's spend is recorded: ``entry N of ledger ID`` or ``not in any ledger``."""
    led = facts.get("ledger")
    if isinstance(led, Mapping) and "ledger" in led:
        return f"entry {led.get('entry')} of ledger {led.get('ledger')}"
    if isinstance(led, Mapping) and led.get("status"):
        return str(led["status"])
    return "not recorded (written before ledger entries were recorded)"


def _content(kind: str, facts: Mapping[str, Any], plan, *, fairness: bool, folder: Path | None,
             prefix: str, links_note: str | None = None) -> Report:
    mech = facts.get("mechanism", {})
    noise = mech.get("noise")
    discrete = noise in ("discrete_gaussian", "lattice_gaussian")
    marginals = facts["marginals"]
    return Report(
        kind=kind,
        version=str(facts["library"]["version"]),
        created=facts.get("created"),
        ledger=_ledger_line(facts) if kind == "release" else None,
        domain=_domain(facts),
        n_marginals=len(marginals),
        total_cells=int(sum(int(e["cells"]) for e in marginals)),
        privacy=_privacy(facts, discrete),
        mechanism=Mechanism(str(mech.get("planner") or _planner_name(plan)), str(facts.get("objective", "")),
                            facts.get("construction"), noise, mech.get("randomness")),
        accuracy=_accuracy(facts, plan),
        fairness=_fairness(plan, fairness),
        strategy=_strategy(facts, plan),
        bound=_bound(facts, isinstance(plan, HasClosure) and bool(plan.is_plain)),
        tables=None if folder is None else _tables(facts, folder, prefix),
        link_prefix=prefix,
        links_note=links_note,
    )  # fmt: skip


def plan_content(plan, *, delta: float = 1e-9, level: float = 0.95, fairness: bool = True) -> Report:
    """Gather what the report of a plan shows (before any data is touched).

    Parameters
    ----------
    plan : Plan or QuerySmasherPlan
    delta : float, keyword-only
        δ at which ε is stated (default 1e-9, as for releases).
    level : float, keyword-only
        Confidence level of the margins of error (default 0.95).
    fairness : bool, keyword-only
        Plan the workload for the other objective (sum_var / max_var) at the same budget to show
        the §6.2 comparison (one more plan selection).

    Returns
    -------
    Report
    """
    return _content("plan", plan_facts(plan, delta=delta, level=level), plan, fairness=fairness,
                    folder=None, prefix="")


def release_content(manifest: Mapping[str, Any], plan, folder: str | Path, *, report_dir: str | Path | None = None,
                    fairness: bool = True) -> Report:
    """Gather what the report of a release shows, from its manifest, its plan and its saved
    tables.

    Parameters
    ----------
    manifest : dict
        The release's ``manifest.json``.
    plan : Plan
        The plan rebuilt from the manifest (``Release.plan``), for budget shares and the
        fairness comparison.
    folder : path
        The release folder (saved tables are read from it).
    report_dir : path, optional
        Folder the report will be written to; links to the release's files are relative to it
        (default: the release folder itself).
    fairness : bool, keyword-only
        As in :func:`plan_content`.

    Returns
    -------
    Report
    """

    folder = Path(folder)
    prefix, note = "", None
    if report_dir is not None and Path(report_dir).resolve() != folder.resolve():
        rel = PurePosixPath(*Path(os.path.relpath(folder.resolve(), Path(report_dir).resolve())).parts)
        # a short relative path keeps the links working next to the release; a long one would
        # spell out the machine's folders, so links then stay relative to the release folder
        if rel.parts.count("..") <= MAX_LINK_UP and len(rel.parts) <= MAX_LINK_UP + 2:
            prefix = rel.as_posix() + "/"
        else:
            note = ("this report was saved away from its release folder: the file links below are "
                    "relative to the release folder")
    return _content("release", manifest, plan, fairness=fairness, folder=folder, prefix=prefix,
                    links_note=note)
