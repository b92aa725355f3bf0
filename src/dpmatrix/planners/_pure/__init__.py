"""Pure ε-DP planner for marginal workloads (Cormode, Procopiuc, Srivastava, Yaroslavtsev,
*Accurate and Efficient Private Release of Datacubes and Contingency Tables*, ICDE 2013).

Modules (one idea each):

* :mod:`.groups` — a strategy group: an attribute set and an integer linear map on that
  marginal's count table (marginal cells or residual/Fourier coefficients), its L1 sensitivity.
* :mod:`.subspaces` — the orthogonal decomposition ``R^N = ⊕_B V_B`` that diagonalizes every
  group's Gram matrix; GLS variances, covariances and reconstruction per marginal.
* :mod:`.strategies` — identity / marginals / fourier / clustering groups with the paper's
  direct-recovery weights (objective (1)).
* :mod:`.optimize` — a weighted set of marginals chosen numerically (HDMM's marginals template
  under L1 sensitivity).
* :mod:`dpmatrix._mechanisms.laplace` — rational budgets and the exact discrete Laplace sampler.
* :mod:`.plan` — :func:`plan_pure` and the frozen :class:`PurePlan` (a
  :class:`~dpmatrix.planners._base.PlanBase`, reached by ``dm.plan(..., epsilon=, delta=0)``;
  measured by ``dm.measure`` through its ``mechanisms()`` and ``estimator()``).
* :mod:`.levels` — per-attribute level strategies (cells, b-ary trees, Haar) with optimized
  level shares, for prefix / range / custom queries.
* :mod:`.hierarchical` — :class:`HierarchicalPlan`: generalized marginal workloads measured with
  those levels (one joint GLS over all marginals, consistent answers, :mod:`.joint_levels`; reached
  by ``dm.plan(..., epsilon=, delta=0)``).
* :mod:`.pidentity_plan` / :mod:`.kron_plan` — optimized p-Identity strategies (HDMM's OPT_0):
  one attribute (:class:`PIdentityPlan`), and one product of attributes of any size as a
  Kronecker product of factors, planned, measured and reconstructed factor by factor
  (:class:`KronPIdentityPlan`).
* :mod:`.matrix_strategy` — :class:`MatrixPurePlan`: a user's explicit strategy matrix (small
  domains; ``dm.plan(..., strategy=<matrix>)``).
* :mod:`.gaussian_variant` — the paper's (ε, δ) budgeting (square-root rule) of the same
  strategies with Gaussian noise, for comparison with ResidualPlanner.
* :mod:`.units` — the privacy units of a pure plan (ε spent, ρ = ε²/2, no μ).
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..._mechanisms.laplace import discrete_laplace_variance, round_budgets, sample_discrete_laplace_eps
    from .gaussian_variant import DatacubeGaussianPlan, plan_datacube_gaussian
    from .groups import StrategyGroup, pairwise_differences
    from .hierarchical import HierarchicalPlan, plan_hierarchical
    from .matrix_strategy import MatrixPurePlan, plan_pure_matrix
    from .plan import PurePlan, plan_pure

# public name -> module defining it, loaded on first use (PEP 562): reading one saved plan
# loads that plan's module only, not every strategy and its solvers
_WHERE = {
    "discrete_laplace_variance": "dpmatrix._mechanisms.laplace",
    "round_budgets": "dpmatrix._mechanisms.laplace",
    "sample_discrete_laplace_eps": "dpmatrix._mechanisms.laplace",
    "DatacubeGaussianPlan": f"{__name__}.gaussian_variant",
    "plan_datacube_gaussian": f"{__name__}.gaussian_variant",
    "StrategyGroup": f"{__name__}.groups",
    "pairwise_differences": f"{__name__}.groups",
    "HierarchicalPlan": f"{__name__}.hierarchical",
    "plan_hierarchical": f"{__name__}.hierarchical",
    "MatrixPurePlan": f"{__name__}.matrix_strategy",
    "plan_pure_matrix": f"{__name__}.matrix_strategy",
    "PurePlan": f"{__name__}.plan",
    "plan_pure": f"{__name__}.plan",
}

__all__ = [
    "StrategyGroup",
    "pairwise_differences",
    "discrete_laplace_variance",
    "round_budgets",
    "sample_discrete_laplace_eps",
    "PurePlan",
    "plan_pure",
    "MatrixPurePlan",
    "plan_pure_matrix",
    "HierarchicalPlan",
    "plan_hierarchical",
    "DatacubeGaussianPlan",
    "plan_datacube_gaussian",
]


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
