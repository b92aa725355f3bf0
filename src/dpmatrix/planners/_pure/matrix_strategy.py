"""A user's explicit strategy matrix under pure ε-DP (small domains only; explicit by request).

The strategy ``S`` (``m × N``) acts on the cells of the measured table: the union ``U`` of the
workload's attributes (``N = Π_{i∈U} n_i``, as :func:`dpmatrix.evaluate`), or the whole domain
when ``S`` has that many columns; cells in C order (first attribute slowest). Each row must have
integer entries after an exact per-row rescaling (a row ``c·(k_1, …, k_N)`` with integers
``k_j`` is replaced by ``k``: the noise is added to integer answers); real-valued rows that do
not rescale are refused by name (no floating-point Laplace).

Budgets: program (1)–(3) of Cormode et al. with the least-squares recovery ``R = Q S⁺`` (``Q``
every workload query — cells, prefixes, ranges … — on ``U``): ``objective="sum"`` minimizes
``Σ_r b_r/ε_r²``, ``b_r = 2 Σ_q w_q R_qr²``
(:func:`~dpmatrix._solvers.budget_split.convex_budget_split`), ``"max"`` minimizes
``max_q w_q Σ_r 2 R_qr²/ε_r²`` (:func:`~dpmatrix._solvers.budget_split.convex_max_budget_split`),
subject to ``Σ_r |S_rj| ε_r ≤ ε`` for every column ``j``; ``budgeting="uniform"`` gives every row
``ε / max_j Σ_r |S_rj|``. Budgets are rounded down to dyadic rationals and the max column L1
norm of the budget-scaled strategy is checked in exact arithmetic
(:meth:`MatrixPurePlan.privacy_epsilon`).

Recovery is GLS with the exact discrete Laplace variances, ``x̂ = (SᵀΣ⁻¹S)⁺ SᵀΣ⁻¹ y``; every
workload query must lie in the row space of the measured rows (a :class:`WorkloadError` names
it otherwise), and is then answered without bias with variance ``q (SᵀΣ⁻¹S)⁺ qᵀ``. All
answers come from one ``x̂``: they are consistent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property, reduce
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._domain import Domain
from ..._linalg.marginal_map import marginal_map
from ..._mechanisms.laplace import discrete_laplace_variance, dyadic_floor
from ..._mechanisms.linear import LinearMechanism
from ..._reconstruct.estimator import EntryAnswer, Estimator
from ..._reconstruct.measurements import axis_labels
from ..._solvers.budget_split import convex_budget_split, convex_max_budget_split
from ..._workload import Workload
from ...errors import NotMeasuredError, PlanError, WorkloadError
from .._base import PlanBase
from .._formats import plan_format
from .entry_summaries import EntryVarianceSummaries
from .units import PureUnits, check_epsilon, check_pure_noise

if TYPE_CHECKING:
    import pandas as pd  # imported where a table is built: reading a plan needs none

__all__ = ["MATRIX_FORMAT", "MatrixPurePlan", "integer_rows", "plan_pure_matrix"]

MATRIX_FORMAT = "dpmatrix.pure_matrix_plan/1"
#: relative tolerance of the row-space test
_SPAN_TOL = 1e-8


def integer_rows(strategy: np.ndarray, *, tol: float = 1e-12, max_den: int = 4096) -> np.ndarray:
    """Rescale each row exactly to integers with no common factor, or raise :class:`PlanError`.

    A row is accepted when every entry is, within ``tol`` (relative), a multiple of one common
    rational step with denominator ``≤ max_den`` after dividing by the row's smallest non-zero
    magnitude; the integers must stay below ``2³¹``.

    Examples
    --------
    >>> integer_rows(np.array([[0.5, 0.5, 0.0], [1.0, -1.0, 2.0]]))
    array([[ 1,  1,  0],
           [ 1, -1,  2]])
    """
    s = np.asarray(strategy, dtype=float)
    out = np.zeros(s.shape, dtype=np.int64)
    for r, row in enumerate(s):
        nz = row[np.abs(row) > tol]
        if nz.size == 0:
            raise PlanError(f"strategy row {r} is zero; drop it")
        unit = float(np.abs(nz).min())
        rel = row / unit
        fr = [Fraction(float(v)).limit_denominator(max_den) for v in rel]
        if max(abs(float(f) - v) for f, v in zip(fr, rel)) > tol * max(1.0, np.abs(rel).max()):
            raise PlanError(
                f"strategy row {r} has real-valued entries that do not rescale to integers; pure-DP "
                "noise is added to integer answers only (no floating-point Laplace): give integer rows"
            )
        den = math.lcm(*[f.denominator for f in fr])
        ints = [int(f * den) for f in fr]
        g = math.gcd(*ints)
        ints = [v // g for v in ints]
        if max(abs(v) for v in ints) >= 2**31:
            raise PlanError(f"strategy row {r} rescales to integers beyond 2**31; simplify it")
        out[r] = ints
    return out


def _kron(mats) -> np.ndarray:
    return reduce(np.kron, mats, np.ones((1, 1)))


def _fraction_str(f: Fraction) -> str:
    return f"{f.numerator}/{f.denominator}"


@plan_format(MATRIX_FORMAT)
@dataclass(frozen=True, eq=False)
class MatrixPurePlan(PureUnits, EntryVarianceSummaries, PlanBase):
    """Explicit pure-DP plan: integer strategy rows on the cells of ``attrs``, per-row budgets,
    GLS answers with exact variances.

    Attributes
    ----------
    workload : Workload
    epsilon : float
        Budget asked; :meth:`privacy_epsilon` is what is spent (exact).
    attrs : tuple of int
        The measured table's attributes (sorted).
    strategy_matrix : numpy.ndarray
        Integer rows (read-only), ``m × Π_{i∈attrs} n_i``.
    budgets : tuple of Fraction
        Discrete Laplace parameter of each row (0: not measured).
    budgeting, objective : str
    """

    workload: Workload
    epsilon: float
    attrs: tuple[int, ...]
    strategy_matrix: np.ndarray = field(repr=False)
    budgets: tuple[Fraction, ...]
    budgeting: str = "optimal"
    objective: str = "sum"
    strategy: str = "matrix"

    @property
    def domain(self) -> Domain:
        return self.workload.domain

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.domain.sizes[a] for a in self.attrs)

    # -- privacy ----------------------------------------------------------------------------------
    def privacy_epsilon(self) -> Fraction:
        """``max_j Σ_r |S_rj| ε_r`` in exact arithmetic (the columns within 10⁻⁹ of the float
        maximum are summed exactly; float sums are exact to far better than that)."""
        s = np.abs(self.strategy_matrix)
        e = np.array([float(b) for b in self.budgets])
        col = e @ s
        top = np.flatnonzero(col >= col.max() * (1 - 1e-9))
        live = [r for r, b in enumerate(self.budgets) if b > 0]
        return max(sum((int(s[r, j]) * self.budgets[r] for r in live), Fraction(0)) for j in top)

    # -- linear algebra ---------------------------------------------------------------------------
    @cached_property
    def noise_variance(self) -> np.ndarray:
        """Per-row noise variance (exact discrete Laplace; inf for a row with budget 0)."""
        return discrete_laplace_variance(np.array([float(b) for b in self.budgets]))

    @cached_property
    def _precision(self) -> np.ndarray:
        v = self.noise_variance
        return np.where(np.isfinite(v), 1.0 / np.where(np.isfinite(v), v, 1.0), 0.0)

    @cached_property
    def _cov_x(self) -> np.ndarray:
        """``(SᵀΣ⁻¹S)⁺`` (rows with budget 0 have precision 0)."""
        s = self.strategy_matrix.astype(float)
        return np.linalg.pinv(s.T @ (self._precision[:, None] * s), hermitian=True, rcond=1e-12)

    @cached_property
    def _projector(self) -> np.ndarray:
        """Projector on the row space of the measured rows."""
        s = self.strategy_matrix.astype(float)[self._precision > 0]
        return np.linalg.pinv(s, rcond=1e-12) @ s

    def _outside(self, q: np.ndarray) -> np.ndarray:
        """Rows of ``q`` outside the measured rows' row space."""
        r = np.linalg.norm(q - q @ self._projector, axis=1)
        return r > _SPAN_TOL * np.maximum(np.linalg.norm(q, axis=1), 1.0)

    def _lift(self, key) -> np.ndarray:
        """Cells of ``attrs`` → cells of the marginal on ``key``."""
        if not set(key) <= set(self.attrs):
            raise NotMeasuredError(f"{list(self.domain.names_of(key))} is not inside the measured "
                                   f"table {list(self.domain.names_of(self.attrs))}")
        return marginal_map(self.shape, tuple(self.attrs.index(a) for a in key))

    def entry_matrix(self, j: int) -> np.ndarray:
        """Workload marginal ``j``'s queries (rows of ``⊗ W_i``) on the cells of ``attrs``."""
        s = self.workload.sets[j]
        w = _kron([np.asarray(self.workload.query_matrix(a, k), dtype=float) for a, k in zip(s, self.workload.types(j))])
        return w @ self._lift(s)

    def _entry_rows(self, j: int) -> list:
        """Each attribute's query rows of workload marginal ``j`` (:mod:`.query_rows`: intervals
        for cells / prefixes / ranges, never expanded)."""
        from .query_rows import attribute_queries

        s = self.workload.sets[j]
        return [attribute_queries(self.workload, a, k) for a, k in zip(s, self.workload.types(j))]

    def _entry_shape(self, j: int) -> tuple[int, ...]:
        return tuple(q.m for q in self._entry_rows(j))

    def _diag(self, q: np.ndarray) -> np.ndarray:
        return np.einsum("ij,jk,ik->i", q, self._cov_x, q)

    @cached_property
    def _entry_variances(self) -> tuple[np.ndarray, ...]:
        return tuple(self._diag(self.entry_matrix(j)).reshape(self._entry_shape(j)) for j in range(len(self.workload)))

    def entry_variance(self, j: int) -> np.ndarray:
        """Exact variance of every query of workload marginal ``j``."""
        return self._entry_variances[j].copy()

    def _variance(self, key) -> np.ndarray:
        t = self._lift(key)
        if self._outside(t).any():
            raise NotMeasuredError(f"the strategy cannot answer every cell of {list(self.domain.names_of(key))} "
                                   "(outside its row space); ask for the workload's queries")
        return self._diag(t).reshape(tuple(self.domain.sizes[a] for a in key))

    def _query_variance(self, key) -> np.ndarray:
        return self.entry_variance(self.workload.index(key))

    def covariance(self, attrs) -> np.ndarray:
        """Dense covariance of the estimate of the marginal on ``attrs`` (C order)."""
        key = self.domain.resolve(attrs)
        self._variance(key)
        t = self._lift(key)
        return t @ self._cov_x @ t.T

    @cached_property
    def _row_groups(self) -> tuple[tuple[Fraction, tuple[int, ...]], ...]:
        by: dict[Fraction, list[int]] = {}
        for r, b in enumerate(self.budgets):
            if b > 0:
                by.setdefault(b, []).append(r)
        return tuple((b, tuple(rows)) for b, rows in by.items())

    @property
    def groups(self) -> tuple[tuple[Fraction, tuple[int, ...]], ...]:
        """``(budget, rows)``: the measured rows grouped by equal budget (one mechanism each)."""
        return self._row_groups

    def table(self) -> pd.DataFrame:
        """One row per group of rows with one budget: rows, ``ε_r``, noise variance."""
        import pandas as pd

        return pd.DataFrame([{"rows": len(rows), "first_row": rows[0], "epsilon": float(b),
                              "noise_variance": float(discrete_laplace_variance(np.array([float(b)]))[0])}
                             for b, rows in self._row_groups])

    # -- measurement ------------------------------------------------------------------------------
    def mechanisms(self, *, noise: str | None = None, rel_var_tol: float = 1e-4):
        """``(self, [LinearMechanism])``: the rows of each budget group ``g`` applied to the
        flattened table on ``attrs`` plus discrete Laplace noise of that budget (key ``g``)."""
        check_pure_noise(noise)
        out = []
        for g, (b, rows) in enumerate(self._row_groups):
            m = self.strategy_matrix[list(rows)]
            out.append(LinearMechanism(g, self.attrs, _IntegerRows(m), (len(rows),), "discrete_laplace", b))
        return self, out

    def estimator(self, noisy) -> MatrixEstimator:
        return MatrixEstimator(self, noisy)

    # -- serialization ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"format": MATRIX_FORMAT, "planner": "pure", "domain": self.domain.to_dict(),
                "workload": self.workload.to_dict(), "epsilon": self.epsilon,
                "attributes": list(self.domain.names_of(self.attrs)),
                "strategy": self.strategy_matrix.tolist(), "budgets": [_fraction_str(b) for b in self.budgets],
                "budgeting": self.budgeting, "objective": self.objective, "residuals": []}

    @classmethod
    def from_dict(cls, d: Mapping) -> MatrixPurePlan:
        """The plan written by :meth:`to_dict` (shape and exact privacy re-checked)."""
        if d.get("format") != MATRIX_FORMAT:
            raise PlanError(f"not a dpmatrix pure strategy-matrix plan (format {d.get('format')!r})")
        dom = Domain.from_dict(d["domain"])
        wk = Workload.from_dict(dom, d["workload"])
        attrs = dom.resolve(d["attributes"])
        s = np.asarray(d["strategy"], dtype=np.int64)
        budgets = tuple(Fraction(b) for b in d["budgets"])
        if s.ndim != 2 or s.shape[1] != dom.cells(attrs) or len(budgets) != s.shape[0] or any(b < 0 for b in budgets):
            raise PlanError("the stored strategy matrix does not match its domain or budgets")
        s.setflags(write=False)
        plan = cls(wk, float(d["epsilon"]), attrs, s, budgets, str(d.get("budgeting", "optimal")),
                   str(d.get("objective", "sum")))
        if plan.privacy_epsilon() > Fraction(plan.epsilon):
            raise PlanError("stored plan spends more than its epsilon: refusing it")
        return plan


class _IntegerRows:
    def __init__(self, m: np.ndarray):
        self.m = m

    def __call__(self, table: np.ndarray) -> np.ndarray:
        return self.m @ np.asarray(table).reshape(-1)


class MatrixEstimator(Estimator):
    """GLS estimates of a :class:`MatrixPurePlan` from ``noisy[g]`` (one output per budget group)."""

    def __init__(self, plan: MatrixPurePlan, noisy):
        self.plan = plan
        y = np.zeros(plan.strategy_matrix.shape[0])
        for g, (_, rows) in enumerate(plan.groups):
            if g not in noisy:
                raise NotMeasuredError(f"the measurements hold no output of row group {g}")
            y[list(rows)] = np.asarray(noisy[g], dtype=float).reshape(-1)
        s = plan.strategy_matrix.astype(float)
        self.cells = plan._cov_x @ (s.T @ (plan._precision * y))  # x̂ on the cells of attrs

    def estimate(self, key):
        self.plan._variance(key)  # refuses cells outside the row space
        return (self.plan._lift(key) @ self.cells).reshape(tuple(self.plan.domain.sizes[a] for a in key))

    def variance(self, key):
        return self.plan._variance(key)

    def covariance(self, key):
        return self.plan.covariance(key)

    def query_vector(self, key, q):
        row = q.reshape(-1) @ self.plan._lift(key)
        if self.plan._outside(row[None, :])[0]:
            raise NotMeasuredError(
                "the strategy cannot answer this query: it is not in the row space of the strategy "
                "matrix (no unbiased linear estimate exists); combinations of the strategy's rows "
                "answer, or re-plan with a strategy that includes this query")
        return float(row @ self.cells), float(self.plan._diag(row[None, :])[0])

    def entries(self):
        return iter(range(len(self.plan.workload)))

    def entry_of(self, key):
        return self.plan.workload.index(key)

    def entry(self, i):
        p = self.plan
        wk, dom = p.workload, p.domain
        key = wk.sets[i]
        from .query_rows import apply_modes

        rows = p._entry_rows(i)
        table = (p._lift(key) @ self.cells).reshape(tuple(dom.sizes[a] for a in key))
        est = apply_modes(rows, table)  # (⊗ W_i) x̂_key, axis by axis
        labels = axis_labels(dom, key, wk.types(i), rows)
        names = dom.names_of(key)
        return EntryAnswer(names, names, labels, est, p.entry_variance(i))


def plan_pure_matrix(
    workload: Workload, epsilon: float, strategy: np.ndarray, *, budgeting: str = "optimal",
    objective: str = "sum", max_cells: int = 4096,
) -> MatrixPurePlan:
    """Plan a pure ε-DP release with a user strategy matrix (module docstring).

    Parameters
    ----------
    workload : Workload
        Marginals, with any query types.
    epsilon : float
    strategy : array_like, shape (m, N)
        Rows on the cells of the union of the workload's attributes (or of the whole domain),
        C order (first attribute slowest); each row integer up to a common factor.
    budgeting : {"optimal", "uniform"}, keyword-only
    objective : {"sum", "max"}, keyword-only
        What the optimal budgets minimize.
    max_cells : int, keyword-only
        Refuse measured tables with more cells (everything here is dense).

    Returns
    -------
    MatrixPurePlan

    Raises
    ------
    PlanError
        A matrix of the wrong shape, not finite, with a zero row, or with real-valued rows that do
        not rescale to integers.
    WorkloadError
        A workload query outside the strategy's row space.

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 4}), [("a",)], query_types={"a": "prefix"})
    >>> p = plan_pure_matrix(wk, 1.0, np.tril(np.ones((4, 4))), budgeting="uniform")
    >>> float(p.privacy_epsilon()) <= 1.0, p.budgets[0] == p.budgets[3]
    (True, True)
    """
    eps = check_epsilon(epsilon)
    if budgeting not in ("optimal", "uniform"):
        raise PlanError(f"budgeting must be 'optimal' or 'uniform', got {budgeting!r}")
    if objective not in ("sum", "max"):
        raise PlanError(f"objective must be 'sum' or 'max', got {objective!r}")
    dom = workload.domain
    union = tuple(sorted(set().union(*[set(s) for s in workload.sets])))
    try:
        s = np.asarray(strategy, dtype=float)
    except (TypeError, ValueError):
        raise PlanError("the strategy must be a numeric matrix") from None
    full = tuple(range(len(dom)))
    n_union, n_full = dom.cells(union), dom.cells(full)
    if s.ndim != 2 or s.shape[1] not in (n_union, n_full):
        raise PlanError(f"the strategy matrix must have {n_union} columns (the cells of "
                        f"{list(dom.names_of(union))}, C order) or {n_full} (the whole domain), got shape {s.shape}")
    attrs = union if s.shape[1] == n_union else full
    if s.shape[1] > max_cells:
        raise PlanError(f"explicit strategy matrices need at most {max_cells} cells, got {s.shape[1]}")
    if not np.all(np.isfinite(s)):
        raise PlanError("the strategy matrix has NaN or infinite entries")
    si = integer_rows(s)
    si.setflags(write=False)
    probe = MatrixPurePlan(workload, eps, attrs, si, tuple(Fraction(1) for _ in range(si.shape[0])))
    mats = [probe.entry_matrix(j) for j in range(len(workload))]
    for j, m in enumerate(mats):
        if workload.weights[j] > 0 and probe._outside(m).any():
            raise WorkloadError(
                f"the strategy cannot answer the workload: {int(probe._outside(m).sum())} queries of the "
                f"marginal {list(dom.names_of(workload.sets[j]))} are not in its row space"
            )
    q = np.vstack(mats)
    w = np.concatenate([np.full(m.shape[0], wt) for m, wt in zip(mats, workload.weights)])
    cols = np.abs(si).sum(axis=0)
    if budgeting == "uniform":
        eta = np.full(si.shape[0], eps / cols.max())
    else:
        r = q[w > 0] @ np.linalg.pinv(si.astype(float), rcond=1e-12)
        if objective == "sum":
            eta = convex_budget_split(np.abs(si), 2 * (w[w > 0][:, None] * r**2).sum(axis=0), eps).eta
        else:
            eta = convex_max_budget_split(np.abs(si), 2 * w[w > 0][:, None] * r**2, eps).eta
    # dyadic budgets rounded down, then the column sums are checked in exact arithmetic
    budgets = tuple(dyadic_floor(float(e)) for e in eta)
    for _ in range(64):
        plan = MatrixPurePlan(workload, eps, attrs, si, budgets, budgeting, objective)
        if plan.privacy_epsilon() <= Fraction(eps):
            if plan._outside(q[w > 0]).any():  # rows the budgets dropped were needed
                raise PlanError("the optimal budgets leave a workload query unanswerable; use budgeting='uniform'")
            return plan
        budgets = tuple(dyadic_floor(float(b) * (1 - 2.0**-30)) for b in budgets)
    raise PlanError("could not round the budgets to rationals within epsilon")  # pragma: no cover
