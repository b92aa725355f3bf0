"""The (ε, δ) variant of the datacubes budgeting (Cormode et al. §3.1, Corollary 3.3, second part):
the paper's strategies with Gaussian noise and the **square-root rule**, for comparison.

What a user gets with ``delta > 0``. ``dm.plan(workload, epsilon=ε, delta=δ)`` plans Gaussian
noise with ResidualPlanner, which is optimal among *all* Gaussian matrix mechanisms for marginal
workloads under the sum of variances (and any convex loss): the datacubes strategies below are
Gaussian matrix mechanisms too, so they can never beat it (the tests check it). This module is
therefore not a planner of ``dm.plan``; it is the paper's (ε, δ) budgeting, exposed so that the
benchmark can show how far the fixed strategies with optimal budgets are from the optimum.

Math. Group ``g`` (an attribute set and an integer map, :mod:`.groups`) gets i.i.d. Gaussian noise
``N(0, σ_g²)`` on its rows. Every column of a group has the same squared L2 norm ``c_g`` (cells of
a marginal: 1; a pairwise-difference / Fourier block ``⊗ D_{n_i}``: ``Π (n_i - 1)``), so the
privacy cost (zCDP ``2ρ``, the largest diagonal of ``SᵀΣ⁻¹S``) is ``P = Σ_g c_g / σ_g²``. The
paper's direct recovery makes the objective ``Σ_g s_g σ_g²`` (``s_g`` as in :mod:`.strategies`).
With precisions ``u_g = 1/σ_g²`` this is ``min Σ_g s_g/u_g`` s.t. ``Σ_g c_g u_g ≤ P``; Lagrange
gives ``s_g/u_g² = λ c_g``, the square-root rule

    u_g = P √(s_g/c_g) / Σ_h √(s_h c_h),        optimum  (Σ_g √(s_g c_g))² / P,

(:func:`~dpmatrix._solvers.budget_split.square_root_split` with ``C_g = √c_g``, ``ε = √P``).
The paper states it with ``ε_g² ∝ √s_g / C_g`` and the classical calibration
``σ² = 2 log(2/δ)/ε²``; here the budget is a privacy cost ``P`` (``dm.Budget.approx(ε, δ).pcost``,
the exact analytic Gaussian conversion), which is tighter. The plan reports the exact GLS
variances of those σ² (:mod:`.subspaces`), never larger than the direct-recovery objective.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from ..._workload import Workload
from ...errors import BudgetError, PlanError
from . import strategies as _strategies
from .groups import StrategyGroup
from .subspaces import SubspaceGLS

__all__ = ["DatacubeGaussianPlan", "GAUSSIAN_STRATEGIES", "l2_sensitivity", "plan_datacube_gaussian"]

GAUSSIAN_STRATEGIES = ("identity", "marginals", "fourier", "clustering")


def l2_sensitivity(group: StrategyGroup) -> int:
    """Squared L2 norm ``c_g`` of every column of a group (marginal cells: 1; ``⊗ D_n``: ``Π(n-1)``).

    Examples
    --------
    >>> l2_sensitivity(StrategyGroup((0, 1), (3, 4), "residual"))
    6
    """
    return 1 if group.kind == "marginal" else prod(n - 1 for n in group.sizes)


@dataclass(frozen=True, eq=False)
class DatacubeGaussianPlan:
    """A datacubes strategy with Gaussian noise: groups, their noise variances, exact GLS variances.

    Attributes
    ----------
    workload : Workload
    pcost : float
        Privacy cost ``Σ_g c_g / σ_g²`` (``2ρ``).
    strategy, budgeting : str
        ``budgeting``: ``"sqrt"`` (the square-root rule) or ``"uniform"`` (one σ² for all).
    groups : tuple of StrategyGroup
    sigma2 : numpy.ndarray
        Per-row noise variance of each group.
    direct_objective : float
        ``Σ_g s_g σ_g²``: the objective the budgets minimize (direct recovery).
    """

    workload: Workload
    pcost: float
    strategy: str
    budgeting: str
    groups: tuple[StrategyGroup, ...]
    sigma2: np.ndarray
    direct_objective: float

    @property
    def spent_pcost(self) -> float:
        """``max_c Σ_g c_g/σ_g²`` recomputed from the groups (= :attr:`pcost`)."""
        return float(sum(l2_sensitivity(g) / s for g, s in zip(self.groups, self.sigma2)))

    def _gls(self, targets) -> SubspaceGLS:
        return SubspaceGLS.build(self.workload.domain.sizes, self.groups, self.sigma2, targets)

    def cell_variance(self, attrs) -> float:
        """Variance of each cell of the GLS estimate of the ``attrs``-marginal."""
        a = tuple(sorted(self.workload.domain.resolve(attrs)))
        return self._gls([a]).cell_variance(a)

    def total_variance(self) -> float:
        """``Σ_W w_W n_W Var(cell of W)`` with the GLS variances."""
        sets = [tuple(s) for s in self.workload.sets]
        gls = self._gls(sets)
        return float(sum(w * self.workload.domain.cells(s) * gls.cell_variance(s)
                         for s, w in zip(sets, self.workload.weights) if w > 0))

    def max_variance(self) -> float:
        """Largest cell variance of a positively weighted workload marginal (GLS)."""
        sets = [tuple(s) for s, w in zip(self.workload.sets, self.workload.weights) if w > 0]
        gls = self._gls(sets)
        return float(max(gls.cell_variance(s) for s in sets))


def plan_datacube_gaussian(workload: Workload, *, pcost: float, strategy: str = "marginals",
                           budgeting: str = "sqrt") -> DatacubeGaussianPlan:
    """The paper's (ε, δ) variant: a fixed strategy with Gaussian noise budgeted by the
    square-root rule (module docstring), at privacy cost ``pcost``.

    Parameters
    ----------
    workload : Workload
        Plain marginals.
    pcost : float, keyword-only
        Privacy cost ``2ρ`` (e.g. ``dm.Budget.approx(ε, δ).pcost``).
    strategy : {"identity", "marginals", "fourier", "clustering"}, keyword-only
    budgeting : {"sqrt", "uniform"}, keyword-only

    Returns
    -------
    DatacubeGaussianPlan

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"A": 2, "B": 2, "C": 2}), [("A",), ("A", "B")])
    >>> p = plan_datacube_gaussian(wk, pcost=1.0)          # Figure 1 workload, S = Q
    >>> round(p.direct_objective, 6)                        # (√2 + √4)² = 11.656854
    11.656854
    """
    if not isinstance(workload, Workload) or not workload.is_plain:
        raise PlanError("the datacubes Gaussian variant takes a Workload of plain marginals")
    p = float(pcost)
    if not np.isfinite(p) or p <= 0:
        raise BudgetError(f"pcost must be a finite positive number, got {pcost!r}")
    if strategy not in GAUSSIAN_STRATEGIES:
        raise PlanError(f"unknown strategy {strategy!r}; choose one of {GAUSSIAN_STRATEGIES}")
    sizes = workload.domain.sizes
    sets = [tuple(s) for s in workload.sets]
    st = getattr(_strategies, strategy)(sizes, sets, np.asarray(workload.weights, dtype=float))
    s = np.asarray(st.direct_weight, dtype=float)
    c = np.array([l2_sensitivity(g) for g in st.groups], dtype=float)
    if budgeting == "sqrt":
        total = float(np.sqrt(s * c).sum())
        u = p * np.sqrt(s / c) / total
    elif budgeting == "uniform":
        u = np.full(len(c), p / c.sum())
    else:
        raise PlanError(f"budgeting must be 'sqrt' or 'uniform', got {budgeting!r}")
    keep = u > 0  # groups no marginal uses get no budget
    groups = tuple(g for g, k in zip(st.groups, keep) if k)
    sigma2 = 1.0 / u[keep]
    return DatacubeGaussianPlan(workload, p, strategy, budgeting, groups, sigma2,
                                float((s[keep] * sigma2).sum()))
