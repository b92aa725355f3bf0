"""Privacy units shared by every pure ε-DP plan (cell strategies, trees / Haar, user matrices).

A pure plan knows one exact number, :meth:`privacy_epsilon` (a ``Fraction``: the max column L1
norm of its budget-scaled strategy, ≤ the ε asked). From it: ``Budget.pure(ε)`` (ε at every δ,
``ρ = ε²/2``-zCDP for composition with zCDP releases, no μ-GDP claimed), and no singular value
bound (that bound is for Gaussian matrix mechanisms).
"""

from __future__ import annotations

import math
from fractions import Fraction

from ..._privacy import Budget
from ...errors import BudgetError, PlanError

__all__ = ["PureUnits", "check_epsilon", "check_pure_noise"]


def check_epsilon(epsilon) -> float:
    """``float(epsilon)`` if it is a finite positive number, else :class:`BudgetError`.

    Examples
    --------
    >>> check_epsilon(0.5)
    0.5
    """
    try:
        e = float(epsilon)
    except (TypeError, ValueError):
        raise BudgetError(f"epsilon must be a finite positive number, got {epsilon!r}") from None
    if isinstance(epsilon, bool) or not math.isfinite(e) or e <= 0:
        raise BudgetError(f"epsilon must be a finite positive number, got {epsilon!r}")
    return e


def check_pure_noise(noise: str | None) -> None:
    """A pure plan is measured with exact discrete Laplace noise: ``noise`` must be ``None`` or
    ``"discrete_laplace"``, else :class:`PlanError` (the Gaussian options need ``delta > 0``).

    Examples
    --------
    >>> check_pure_noise("discrete_laplace")
    """
    if noise not in (None, "discrete_laplace"):
        raise PlanError(f"a pure epsilon-DP plan is measured with exact discrete Laplace noise; "
                        f"noise={noise!r} is a Gaussian option: plan with delta > 0 for it")


class PureUnits:
    """Mixin: ``pure_epsilon``, ``budget``, ``rho``, ``pcost`` from ``privacy_epsilon()``."""

    #: the strategy family and the budgeting rule (fields of every pure plan)
    strategy: str
    budgeting: str

    def privacy_epsilon(self) -> Fraction:  # pragma: no cover - implemented by the plans
        raise NotImplementedError

    def privacy_rho(self) -> float:
        """``ρ = ε²/2`` (pure ε-DP implies ε²/2-zCDP)."""
        return float(self.privacy_epsilon()) ** 2 / 2

    @property
    def pure_epsilon(self) -> float:
        """The ε actually spent (≤ the ε asked)."""
        return float(self.privacy_epsilon())

    @property
    def budget(self) -> Budget:
        """``Budget.pure(ε spent)``."""
        return Budget.pure(self.pure_epsilon)

    @property
    def rho(self) -> float:
        """ρ-zCDP implied by the pure ε spent, for composition with zCDP releases."""
        return self.budget.rho

    @property
    def pcost(self) -> float:
        """``2ρ = ε²`` (the Gaussian planners' unit, for comparison only)."""
        return self.budget.pcost

    @property
    def mu(self) -> float:
        """Not defined for pure ε-DP (a typed error says so)."""
        return self.budget.mu

    @property
    def planner_name(self) -> str:
        """``"pure ε-DP (<strategy> strategy)"``."""
        return f"pure ε-DP ({self.strategy} strategy)"

    def _options(self) -> dict:
        return {"strategy": self.strategy, "budgeting": self.budgeting}

    def lower_bound(self) -> None:
        """``None``: the singular value bound is a bound on Gaussian (L2) matrix mechanisms at a
        privacy cost ``max diag(BᵀΣ⁻¹B)``; a pure ε-DP (Laplace, L1) plan has no such cost, so
        there is no bound to compare with (``dm.compare`` reports pure plans separately)."""
        return None

    def optimality_ratio(self) -> None:
        """``None``: not applicable to pure ε-DP plans."""
        return None
