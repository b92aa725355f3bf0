"""The plan protocol every planner's plan implements (one call shape for every planner).

A *plan* is everything decided before touching data: the domain and workload, the privacy
budget it spends, the mechanisms it will run, and the exact (data-independent) variance of
every answer. Planners differ in how they choose the mechanisms; what a user does with a plan
does not. In the style of :class:`scipy.sparse.linalg.LinearOperator`, the public methods here
validate their arguments and delegate to one underscored method a planner implements:

=================================  ==========================================================
public (here)                      a planner implements
=================================  ==========================================================
``domain``, ``workload``           the attributes (``dataclass`` fields or properties)
``budget`` / ``pcost`` ... (ε, δ)  ``budget`` (a :class:`~dpmatrix._privacy.Budget`); the
                                   units come from :class:`~dpmatrix._privacy.PrivacyReport`
``variance(attrs)``                ``_variance(key)``: cell variances of the marginal on
                                   ``key`` (a sorted tuple of attribute positions)
``query_variance(attrs)``          ``_query_variance(key)``: variance of each workload query
                                   on ``key``
``total_variance()``, ``rmse()``,  the planner's closed forms (no arguments to validate)
``max_variance()``, ``table()``
``to_dict()`` / ``from_dict()``    JSON-ready description, read back by ``from_dict``
``measure(data, *, rng=None, ...)``  defined here: :func:`dpmatrix.measure`
``lower_bound()``,                 ``_objective_value()``: ``(objective, value)`` — default
``optimality_ratio()``             ``("sum_var", total_variance())``; see
                                   :mod:`~dpmatrix.planners._optimality`
=================================  ==========================================================

A new planner subclasses :class:`PlanBase` and implements those methods. To be measured by the
one measurement path (:func:`dpmatrix.measure`) and released, it also implements two methods:

=================================  ==========================================================
``mechanisms(*, noise, rel_var_tol)``  ``(plan measured, [LinearMechanism, ...])``: each
                                   mechanism an attribute set ``A``, a linear map on the count
                                   table of ``A``, a noise family (Gaussian σ², discrete
                                   Gaussian σ̄², discrete Laplace ε_g) and its scale
                                   (:class:`~dpmatrix._mechanisms.linear.LinearMechanism`);
                                   the plan measured may differ when discrete noise rounds
                                   the scales (it must report the privacy actually spent).
                                   Refuse a ``noise`` you cannot run with a PlanError.
``estimator(noisy)``               an :class:`~dpmatrix._reconstruct.estimator.Estimator` bound
                                   to ``noisy[mechanism.key]``: ``estimate``, ``variance``,
                                   ``covariance``, ``query_vector``, ``entries``/``entry``.
``to_dict()`` with ``"format"``    and a ``from_dict``, the class registered for that format
                                   with ``@plan_format(FORMAT)``
                                   (:mod:`~dpmatrix.planners._formats`), so
                                   :meth:`Plan.from_dict` and ``load_release`` read it back.
=================================  ==========================================================

``measure`` is defined here once, with one keyword-only signature for every planner, and every
plan's records go through the one executor (:mod:`dpmatrix._measure.executor`). The
ResidualPlanner family lists residual records (:mod:`dpmatrix._measure.residual_records`, whose
kinds apply the batched Kronecker arithmetic) and is reconstructed by
:class:`~dpmatrix._reconstruct.residual_estimator.ResidualEstimator` (Algorithm 2). A planner
is made available to :func:`dpmatrix.plan` by :func:`~dpmatrix.planners._registry.register_planner`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._defaults import DEFAULT_DELTA
from .._domain import Domain
from .._jsonfile import read_json
from .._privacy import NOISE_ACCOUNTING, Budget
from .._workload import Workload
from ..errors import DPMatrixError, PlanError
from ..protocols import PlanFacts
from ._formats import plan_class

if TYPE_CHECKING:  # pragma: no cover - annotations only
    import pandas as pd

    from .._reconstruct.measurements import Measurements
    from .._solvers.svd_bound import SVDBound
    from .._unit import Unit
    from ._optimality import Optimality

__all__ = ["Plan", "PlanBase", "attr_key"]

AttrSet = tuple[int, ...]


def attr_key(domain: Domain, attrs: Iterable[str | int] | str) -> AttrSet:
    """The sorted tuple of attribute positions named by ``attrs`` (names or positions, or one
    name); unknown names raise :class:`~dpmatrix.errors.UnknownAttributeError`."""
    return domain.resolve(attrs)


class PlanBase(ABC):
    """Abstract base of every planner's plan (module docstring: what a planner implements).

    Exported as :class:`dpmatrix.Plan`: every plan :func:`dpmatrix.plan` returns is an instance,
    and satisfies :class:`~dpmatrix.protocols.PlanProtocol`. ``Plan.from_dict`` / ``Plan.from_json``
    read any planner's plan back (the format names the class).

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 2, "b": 3}), [("a", "b")])
    >>> all(isinstance(dm.plan(wk, **b), dm.Plan) for b in ({"rho": 1}, {"epsilon": 1, "delta": 0}))
    True
    """

    # -- what the plan is ----------------------------------------------------------------------
    @property
    def planner_name(self) -> str:
        """Display name of the planner that made the plan (report, manifest, command line)."""
        return type(self).__name__

    def _options(self) -> dict[str, Any]:
        """The planner's options worth stating (:attr:`PlanFacts.options`)."""
        return {}

    @cached_property
    def facts(self) -> PlanFacts:
        """The plan's facts in one frozen record (:class:`~dpmatrix.protocols.PlanFacts`):
        planner, budget, objective, accuracy and the singular value bound (``None`` for a pure
        ε-DP plan, or when the bound cannot be computed)."""
        objective = self._objective_value()[0]
        bound = None
        if not self.budget.is_pure:
            try:
                bound = self.lower_bound_facts()
            except DPMatrixError:
                bound = None
        attainable = bool(bound is not None and bound.get("exact") and objective != "max_var")
        return PlanFacts(planner=self.planner_name, budget=self.budget, objective=objective,
                         rmse=float(self.rmse()), max_variance=float(self.max_variance()),
                         total_variance=float(self.total_variance()), bound=bound,
                         bound_attainable=attainable, options=self._options())

    # -- what the plan is about -----------------------------------------------------------------
    #: The data domain the plan was made for (a dataclass field or a property of the subclass).
    domain: Domain

    #: The budget the plan was planned with (set by :func:`dpmatrix.plan`; ``None`` for a plan
    #: read from a file or made by a planner function directly). An (ε, δ) budget remembers the
    #: accounting it was converted with, and :func:`dpmatrix.measure` refuses noise whose stated ε
    #: would exceed the asked one (:meth:`~dpmatrix._privacy.Budget.holds_for`).
    planned_budget: Budget | None = None

    def default_privacy(self, delta: float | None = None) -> dict[str, Any]:
        """What the plan's default (secure) release will state: :func:`dpmatrix._statement.privacy_summary`
        for the noise :func:`dpmatrix.measure` draws without ``noise=`` or ``rng=`` (the
        exact discrete Gaussian, or lattice noise for real-valued strategies: ρ-zCDP and ε by the
        zCDP conversion, no μ) — the function a release's manifest states with. Written as the
        ``privacy`` of :meth:`to_dict`.

        Parameters
        ----------
        delta : float, optional
            δ at which ε is stated; default: the asked δ of a plan planned with an (ε, δ)
            budget, else :data:`~dpmatrix._defaults.DEFAULT_DELTA`.

        Returns
        -------
        dict

        Examples
        --------
        >>> import dpmatrix as dm
        >>> plan = dm.plan(dm.Workload(dm.Domain({"a": 2, "b": 3}), [("a", "b")]), rho=0.5)
        >>> p = plan.default_privacy()
        >>> p["mu"], p["accounting"], round(p["epsilon"], 5)
        (None, 'discrete_gaussian_zcdp', 6.47407)
        """
        from .._measure.secure import resolve_noise
        from .._statement import privacy_summary
        from ..protocols import HasSecureNoise

        if delta is None:
            asked = self.planned_budget.asked if self.planned_budget is not None else None
            delta = asked[1] if asked is not None else DEFAULT_DELTA
        noise = self.secure_noise if isinstance(self, HasSecureNoise) else resolve_noise(self, "auto")
        return privacy_summary(self, noise=noise, delta=float(delta))

    @property
    @abstractmethod
    def budget(self) -> Budget:
        """The privacy budget the plan spends (report it in any unit with ``.rho``, ``.mu``, ``.epsilon(delta)``)."""

    # -- accuracy (data-independent) -----------------------------------------------------------
    def variance(self, attrs: Iterable[str | int] | str) -> np.ndarray:
        """Variance of every cell of the marginal on ``attrs``.

        Parameters
        ----------
        attrs : str or iterable of str or int
            Attribute names or positions (order does not matter).

        Returns
        -------
        numpy.ndarray
            One variance per cell, shaped like the marginal table (axes in domain order).
        """
        return self._variance(attr_key(self.domain, attrs))

    def query_variance(self, attrs: Iterable[str | int] | str) -> np.ndarray:
        """Variance of every workload query on ``attrs``.

        Parameters
        ----------
        attrs : str or iterable of str or int
            Attribute names or positions of a workload entry.

        Returns
        -------
        numpy.ndarray
            One variance per query, shaped like the entry's table of queries.
        """
        return self._query_variance(attr_key(self.domain, attrs))

    @abstractmethod
    def _variance(self, key: AttrSet) -> np.ndarray: ...

    @abstractmethod
    def _query_variance(self, key: AttrSet) -> np.ndarray: ...

    @abstractmethod
    def total_variance(self) -> float:
        """Sum of the variances of every workload query (unweighted)."""

    @abstractmethod
    def rmse(self) -> float:
        """Root mean squared error over the workload's queries."""

    @abstractmethod
    def max_variance(self) -> float:
        """Largest variance of a workload query."""

    @abstractmethod
    def table(self) -> pd.DataFrame:
        """One row per workload entry: its attributes, size and accuracy."""

    # -- distance to the best possible --------------------------------------------
    def _objective_value(self) -> tuple[str, float]:
        """``(objective, value)`` the plan is judged by: ``"sum_var"`` with the weighted total
        variance (default: :meth:`total_variance`, right for unit weights), ``"max_var"`` with
        the weighted maximum variance, or ``"custom"`` with the weighted total variance."""
        return "sum_var", self.total_variance()

    def lower_bound(self) -> SVDBound:
        """The singular value bound (Li & Miklau, Theorem 3.3): the least weighted total variance
        any Gaussian matrix mechanism can reach for this plan's workload at this plan's privacy
        cost (``.total``, ``.rmse``, ``.exact``; see :func:`~dpmatrix._solvers.svd_bound.svd_bound`).

        Returns
        -------
        SVDBound
        """
        return self.optimality().svd

    def optimality(self) -> Optimality:
        """The plan's objective against the bound: ``quantity``, ``value``, ``bound``, ``ratio``
        (see :mod:`~dpmatrix.planners._optimality` for the meaning per objective).

        Returns
        -------
        Optimality
        """
        objective, value = self._objective_value()
        from ._optimality import optimality  # the SVD bound (SciPy) only when asked for

        return optimality(self.workload, self.pcost, objective, value)

    def optimality_ratio(self) -> float | None:
        """Plan / lower bound (≥ 1): ``sum_var`` plans the weighted total variance over the
        bound (1 = optimal among all Gaussian matrix mechanisms); ``max_var`` plans the weighted
        maximum variance over ``bound.total / n_queries`` (a bound-based ratio, not attainable
        in general).

        Returns
        -------
        float
        """
        return self.optimality().ratio

    def lower_bound_facts(self) -> dict[str, Any]:
        """``optimality().to_dict()``: the release manifest's and report's ``lower_bound`` entry."""
        return self.optimality().to_dict()

    def used_attributes(self) -> tuple[int, ...] | None:
        """Positions of the attributes the plan measures (the only columns a measurement reads),
        ``None`` when it measures none: every mechanism reads a subset of a workload entry's
        attributes, so the workload's attributes (a plan with a closure says exactly which); a
        query workload (:class:`~dpmatrix._queries.QueryWorkload`) does not say: ``None``, every
        column is read.

        Examples
        --------
        >>> import dpmatrix as dm
        >>> wk = dm.Workload(dm.Domain({"a": 2, "b": 3, "c": 2}), [("a",), ("c",)])
        >>> dm.plan(wk, epsilon=1.0, delta=0).used_attributes()
        (0, 2)
        """
        if not isinstance(self.workload, Workload):
            return None
        used = sorted({a for s in self.workload.sets for a in s})
        return tuple(used) if used else None

    # -- persistence ---------------------------------------------------------------------------
    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description of the plan."""

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> PlanBase:
        """Any planner's plan from its :meth:`to_dict` (the ``"format"`` entry names the
        planner; a subclass reads its own format)."""
        if not isinstance(spec, Mapping):
            raise PlanError("a plan description is a JSON object")
        plan = plan_class(spec.get("format")).from_dict(dict(spec))
        privacy = spec.get("privacy")
        asked = privacy.get("asked") if isinstance(privacy, Mapping) else None
        if asked is not None:  # the (epsilon, delta) it was planned with, and how it was converted
            try:
                budget = Budget(plan.pcost, accounting=str(asked["accounting"]),
                                asked=(float(asked["epsilon"]), float(asked["delta"])))
            except (KeyError, TypeError, ValueError, DPMatrixError):
                raise PlanError(f"privacy.asked must be {{epsilon, delta, accounting}}, got {asked!r}") from None
            if budget.accounting not in NOISE_ACCOUNTING.values():
                raise PlanError(f"privacy.asked.accounting {budget.accounting!r} is not one of "
                                f"{sorted(set(NOISE_ACCOUNTING.values()))}")
            object.__setattr__(plan, "planned_budget", budget)
        if spec.get("privacy_unit") is not None:  # a plan saved for a person (see :meth:`saved_dict`)
            from .._unit import unit_from_spec

            try:
                plan.with_privacy_unit(unit_from_spec(spec["privacy_unit"], plan.budget))
            except DPMatrixError as exc:
                raise PlanError(str(exc)) from None
        return plan

    def _privacy_spec(self) -> dict[str, Any]:
        """The ``privacy`` of :meth:`to_dict`: :meth:`default_privacy`, and for a plan planned
        with an (ε, δ) budget that budget and its conversion (``asked``), read back by
        :meth:`from_dict` so that a saved plan still refuses noise the conversion does not
        hold for."""
        out = self.default_privacy()
        b = self.planned_budget
        if b is not None and b.asked is not None:
            out["asked"] = {"epsilon": b.asked[0], "delta": b.asked[1], "accounting": b.accounting}
        return out

    def saved_dict(self) -> dict[str, Any]:
        """What a plan file holds: :meth:`to_dict`, and for a plan that protects a person
        (:attr:`privacy_unit`) a ``"privacy_unit"`` entry — the unit and the budget it implies
        (:func:`~dpmatrix._unit.unit_spec`) — which :meth:`from_dict` reads back, so a release of
        the saved plan protects the same person. Plans without a unit load as per-record."""
        out = self.to_dict()
        unit = self.privacy_unit
        if unit is not None:
            from .._unit import unit_spec

            out["privacy_unit"] = unit_spec(unit, self.budget)
        return out

    def to_json(self, path: str | Path | None = None) -> str:
        """:meth:`saved_dict` as JSON text, also written to ``path`` when given."""
        text = json.dumps(self.saved_dict(), indent=1)
        if path is not None:
            Path(path).write_text(text)
        return text

    @classmethod
    def from_json(cls, text_or_path: str | Path) -> PlanBase:
        """A plan from JSON text or from a file path (see :meth:`from_dict`)."""
        if isinstance(text_or_path, str) and text_or_path.lstrip().startswith("{"):
            try:
                return cls.from_dict(json.loads(text_or_path))
            except json.JSONDecodeError as exc:
                raise PlanError(f"not a JSON plan: {exc}") from None
        return cls.from_dict(read_json(text_or_path, PlanError, f"plan file {str(text_or_path)!r}"))

    # -- measurement ---------------------------------------------------------------------------
    def measure(
        self,
        data: Any,
        *,
        rng: np.random.Generator | None = None,
        progress: bool = False,
        noise: str | None = None,
        rel_var_tol: float = 1e-4,
        engine: Any = None,
        store: Any = None,
        encoding: str = "auto",
        on_unknown: Any = "error",
        privacy_unit: Any = None,
    ) -> Measurements:
        """Measure ``data`` with the plan's mechanisms: :func:`dpmatrix.measure` (the one
        measurement path; every option is keyword-only and means the same for every planner).

        Parameters
        ----------
        data : pandas.DataFrame, numpy.ndarray, str, pathlib.Path or engine
            The records (raw values or codes, see ``encoding``).
        rng : numpy.random.Generator, optional
            ``None`` (default): exact noise from the OS CSPRNG. A generator makes the noise
            reproducible and NOT private (the release says so).
        progress, noise, rel_var_tol, engine, store, encoding, on_unknown, privacy_unit :
            As in :func:`dpmatrix.measure` (``noise=None``: the plan's own secure noise).

        Returns
        -------
        Measurements

        Examples
        --------
        >>> import numpy as np, dpmatrix as dm
        >>> wk = dm.Workload(dm.Domain({"A": 2, "B": 2}), [("A", "B")])
        >>> meas = dm.plan(wk, epsilon=1, delta=0).measure(np.array([[0, 1], [1, 1]]))
        >>> meas.noise
        'discrete_laplace'
        """
        from .._measure.measure_plan import measure  # the engines only when measuring

        return measure(self, data, rng=rng, progress=progress, noise=noise, rel_var_tol=rel_var_tol,
                       engine=engine, store=store, encoding=encoding, on_unknown=on_unknown,
                       privacy_unit=privacy_unit)

    # -- the privacy unit ----------------------------------------------------------------------
    @property
    def privacy_unit(self) -> Unit | None:
        """The person this plan protects (:class:`~dpmatrix._unit.Unit`), or ``None``: one record.

        A plan made with ``dm.plan(..., privacy_unit=unit)`` spends the record-level budget
        :func:`~dpmatrix._unit.record_budget` of the person-level one asked for; measuring it bounds
        every identifier to ``unit.max_records`` records first. Kept in a plan file by
        :meth:`saved_dict` / :meth:`to_json` (not by ``to_dict``, which a manifest embeds).
        """
        return self.__dict__.get("_privacy_unit")

    def with_privacy_unit(self, unit: Unit | None):
        """This plan, marked as protecting ``unit`` (its budget must already be the record-level
        one, :func:`~dpmatrix._unit.record_budget`); returns ``self``."""
        if unit is not None:
            from .._unit import Unit  # (it reads data columns with pandas: only when a unit is given)

            if not isinstance(unit, Unit):
                raise PlanError(f"privacy_unit must be a dpmatrix.Unit, got {type(unit).__name__}")
        self.__dict__["_privacy_unit"] = unit
        return self


#: The public name of the plan protocol's base class (``dpmatrix.Plan``).
Plan = PlanBase
