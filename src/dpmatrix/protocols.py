"""The plan protocol: what every plan is, what some plans can do, and the facts they state.

A *plan* (:func:`dpmatrix.plan`) is everything decided before touching data. Every plan
satisfies :class:`PlanProtocol`: its domain, workload and privacy :class:`~dpmatrix._privacy.Budget`,
the exact variance of every answer, a JSON description, ``measure(data, ...)`` and one frozen
record of its :class:`PlanFacts` (what the report, the release manifest and the command line
read). Abilities only some plans have are separate, runtime-checkable protocols, so code asks
``isinstance(plan, HasClosure)`` rather than probing attribute names:

===========================  ========================================================================
capability                   meaning
===========================  ========================================================================
:class:`HasMechanisms`       lists its mechanism records for a sampler (every plan)
:class:`ListsMechanisms`     lists its linear mechanisms (``mechanisms(noise=...)``) and estimates
                             from their noisy outputs (``estimator(noisy)``)
:class:`NamesMechanisms`     names its mechanisms' keys without building them (reading a release)
:class:`HasClosure`          a downward-closed set of residual mechanisms, one noise scale per
                             closure set (the ResidualPlanner family, Algorithms 1, 2 and 5)
:class:`PurePrivacy`         spends a pure ε-DP budget (discrete Laplace noise)
:class:`HasTargets`          was planned from accuracy targets and reports how they are met
:class:`HasMarginalTable`    summarises its accuracy per workload marginal
:class:`HasComparison`       records the candidate strategies it compared
:class:`HasSubMechanisms`    one optimal sub-mechanism per residual space (QuerySmasher / WFF)
:class:`HasSecureNoise`      names the exact sampler it is measured with by default
===========================  ========================================================================

This module sits below :mod:`dpmatrix._reconstruct` and :mod:`dpmatrix.measure` so that both can
ask these questions; it imports nothing above :mod:`dpmatrix._privacy`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._privacy import Budget

if TYPE_CHECKING:  # pragma: no cover - annotations only
    import numpy as np
    import pandas as pd

    from ._domain import Domain

__all__ = [
    "HasClosure",
    "HasComparison",
    "HasMechanisms",
    "HasSecureNoise",
    "HasSubMechanisms",
    "NamesMechanisms",
    "HasMarginalColumns",
    "HasMarginalTable",
    "HasResidualColumns",
    "HasTargets",
    "ListsMechanisms",
    "MechanismKind",
    "MechanismRecord",
    "PlanFacts",
    "PlanProtocol",
    "PurePrivacy",
    "RemembersBudget",
    "WrapsPlan",
]


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


@dataclass(frozen=True, kw_only=True)
class PlanFacts:
    """What a plan states about itself, in one frozen record.

    Attributes
    ----------
    planner : str
        Display name of the planner that made the plan (``"ResidualPlanner"``,
        ``"ResidualPlanner+"``, ``"QuerySmasher"``, ``"pure ε-DP (matrix strategy)"`` ...).
    budget : Budget
        The privacy budget the plan spends (its ``is_pure`` says whether it is pure ε-DP).
    objective : str
        ``"sum_var"``, ``"max_var"`` or ``"custom"``: what the planner minimised.
    rmse, max_variance, total_variance : float
        Accuracy over the workload's queries: root mean squared error, largest variance and sum
        of the (unweighted) variances.
    bound : Mapping or None
        The singular value bound entry of the manifest (``total``, ``rmse``, ``exact``,
        ``ratio``, ``value``, ``quantity``, ...; see :mod:`dpmatrix.planners._optimality`), or
        ``None`` when no Gaussian bound applies (pure ε-DP plans).
    bound_attainable : bool
        Whether the bound is attainable by some Gaussian matrix mechanism, so that a ratio of 1
        means optimal: true for a ``sum_var``-type bound that is exact; a ``max_var`` bound
        (``T*/n``) is in general not attainable.
    options : Mapping
        The planner's options as a read-only mapping (``construction``, ``strategy`` ...).

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 2, "b": 3}), [("a", "b")])
    >>> f = dm.plan(wk, rho=0.5, objective="sum_var").facts
    >>> f.planner, round(f.budget.rho, 12), f.bound_attainable
    ('ResidualPlanner', 0.5, True)
    """

    planner: str
    budget: Budget
    objective: str
    rmse: float
    max_variance: float
    total_variance: float
    bound: Mapping[str, Any] | None = None
    bound_attainable: bool = False
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not isinstance(self.budget, Budget):
            raise TypeError(f"PlanFacts.budget must be a dpmatrix.Budget, got {type(self.budget).__name__}")
        object.__setattr__(self, "options", _frozen_mapping(self.options))
        if self.bound is not None:
            object.__setattr__(self, "bound", _frozen_mapping(self.bound))

    @property
    def is_pure(self) -> bool:
        """True for a pure ε-DP plan."""
        return self.budget.is_pure


@runtime_checkable
class PlanProtocol(Protocol):
    """What every plan is: see the module docstring. :class:`dpmatrix.Plan` implements it."""

    @property
    def domain(self) -> Domain: ...

    @property
    def budget(self) -> Budget: ...

    @property
    def facts(self) -> PlanFacts: ...

    def variance(self, attrs: Iterable[str | int] | str) -> np.ndarray: ...

    def query_variance(self, attrs: Iterable[str | int] | str) -> np.ndarray: ...

    def total_variance(self) -> float: ...

    def rmse(self) -> float: ...

    def max_variance(self) -> float: ...

    def table(self) -> pd.DataFrame: ...

    def to_dict(self) -> dict[str, Any]: ...

    def measure(self, data: Any, **options: Any) -> Any: ...

    def used_attributes(self) -> tuple[int, ...] | None:
        """Positions of the attributes the plan measures (the only columns read from the data),
        or ``None`` when it measures none."""


@runtime_checkable
class MechanismKind(Protocol):
    """How a group of mechanism records of one kind turns count tables into noisy outputs.

    ``outputs(records, tables, sources, family, rng)`` gets the records (in the plan's order),
    each one's count table on its ``attrs``, the counted (maximal) attribute set each table was
    summed from, the noise family object all of them draw from and the caller's ``rng``; it
    returns one noisy output per record, drawing every noise value through ``family``.
    """

    def outputs(self, records: Sequence[Any], tables: Sequence[np.ndarray], sources: Sequence[tuple[int, ...]],
                family: Any, rng: Any) -> list[np.ndarray]: ...


@runtime_checkable
class MechanismRecord(Protocol):
    """One mechanism of a plan as the measurement runs it: the name of its noisy answer
    (``key``), the marginal it reads (``attrs``, sorted positions), its noise family's registered
    name (``family``) and the :class:`MechanismKind` that applies its query and noise."""

    @property
    def key(self) -> Hashable: ...

    @property
    def attrs(self) -> tuple[int, ...]: ...

    @property
    def family(self) -> str: ...

    @property
    def kind(self) -> MechanismKind: ...


@runtime_checkable
class HasMechanisms(Protocol):
    """A plan that lists its mechanism records for a sampler: every plan, measured by the one
    executor (:mod:`dpmatrix._measure.executor`)."""

    def mechanisms(self, *, noise: str | None = None, rel_var_tol: float = 1e-4) -> Any:
        """``(plan measured, [MechanismRecord, ...])``: the plan actually measured (re-scored when
        exact noise rounds its scales) and its records, in the order noise is drawn."""


@runtime_checkable
class ListsMechanisms(HasMechanisms, Protocol):
    """A plan measured through its list of linear mechanisms and estimated from their outputs
    by its own estimator."""

    def estimator(self, noisy: Mapping[Any, Any]) -> Any:
        """An :class:`~dpmatrix._reconstruct.estimator.Estimator` bound to ``noisy``."""


@runtime_checkable
class NamesMechanisms(Protocol):
    """A plan whose mechanisms' keys are known without building the mechanisms: reading a
    release needs the keys only, and building a mechanism can cost far more (the exact lattice
    form of a dense strategy)."""

    def mechanism_keys(self, *, noise: str | None = None) -> tuple[Hashable, ...]:
        """The keys of ``mechanisms(noise=noise)``'s records, in their order."""


@runtime_checkable
class HasClosure(Protocol):
    """A plan of residual mechanisms over a downward-closed family of attribute sets.

    ``closure.sets`` are the sets, ``measured[i]`` says whether set ``i`` is measured and
    ``sigma2[i]`` is its noise variance; ``mechanism(attrs)`` is the residual mechanism of a set
    and ``coefficients`` the privacy-cost coefficients ``p_A`` (ResidualPlanner, Theorem 4.3).
    """

    @property
    def closure(self) -> Any: ...

    @property
    def measured(self) -> Any: ...

    @property
    def coefficients(self) -> Any: ...

    @property
    def is_plain(self) -> bool:
        """True when every strategy and query is the identity (plain ResidualPlanner)."""

    sigma2: Any

    def mechanism(self, attrs: Any) -> Any: ...


@runtime_checkable
class PurePrivacy(Protocol):
    """A plan that spends a pure ε-DP budget (``pure_epsilon``, the ε actually spent)."""

    @property
    def pure_epsilon(self) -> float: ...


@runtime_checkable
class HasTargets(Protocol):
    """A plan made from accuracy targets: ``target_table()`` (target, achieved, ratio, binding
    per marginal) and its ``certificate()``."""

    def target_table(self) -> pd.DataFrame: ...

    def certificate(self) -> dict[str, Any]: ...


@runtime_checkable
class HasMarginalTable(Protocol):
    """A plan that summarises its accuracy per workload marginal (``marginal_table()``)."""

    def marginal_table(self) -> pd.DataFrame: ...


@runtime_checkable
class HasMarginalColumns(Protocol):
    """A plan whose ``marginal_table()`` is also available as plain columns (a dict of NumPy
    arrays, the same names), for readers that must not import pandas."""

    def marginal_columns(self) -> dict[str, Any]: ...


@runtime_checkable
class HasResidualColumns(Protocol):
    """A residual plan whose ``table()`` (one row per residual mechanism) is also available as
    plain columns (a dict of NumPy arrays, the same names), for readers without pandas."""

    def residual_columns(self) -> dict[str, Any]: ...


@runtime_checkable
class HasComparison(Protocol):
    """A plan that records the candidate strategies it compared (``comparison`` rows)."""

    @property
    def comparison(self) -> tuple[dict[str, Any], ...]: ...


@runtime_checkable
class HasSubMechanisms(Protocol):
    """A plan of optimal sub-mechanisms, one per residual space (QuerySmasher / WFF, §§5–7):
    ``residuals`` maps each residual attribute set to its noise scale and ``solutions`` holds
    the sub-mechanism of each structure."""

    residuals: Mapping[tuple[int, ...], Any]
    solutions: Any


@runtime_checkable
class HasSecureNoise(Protocol):
    """A plan that names the exact sampler it is measured with when no generator is given
    (``secure_noise``, e.g. ``"lattice_gaussian"`` for a real-valued explicit strategy)."""

    secure_noise: str


@runtime_checkable
class RemembersBudget(Protocol):
    """A plan that remembers the budget it was planned with (``planned_budget``, ``None`` when
    unknown), so a measurement can check that the noise drawn keeps the asked (ε, δ)."""

    planned_budget: Budget | None


@runtime_checkable
class WrapsPlan(Protocol):
    """A plan that adds a capability to another plan by wrapping it (``plan``: the wrapped one),
    e.g. a plan selected from accuracy targets; everything else is the wrapped plan's."""

    @property
    def plan(self) -> Any: ...
