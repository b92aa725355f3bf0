"""The built-in planners, registered in this order: each planner package registers itself in its
own ``registration`` module (options, frozen, keyword-only and self-checking, and the call that
plans; see :mod:`dpmatrix.planners._registry`); importing this module loads them.

==================  ==================  ==========================================================
name                aliases             plans
==================  ==================  ==========================================================
``residual``        ``rp``, ``rp+``     ResidualPlanner / ResidualPlanner+ (Gaussian, any budget
                                        or a loss bound)
``querysmasher``    ``qs``              QuerySmasher (Gaussian, ``sum_var``, a budget)
``wff``                                 QuerySmasher with the Fourier (WFF) solver
``lsa``                                 Level Selection Algorithm, explicit small domains
``pure``                                pure ε-DP (discrete Laplace), chosen by a pure budget
==================  ==================  ==========================================================
"""

from __future__ import annotations

# the import order is the registration order, which the registry and the CLI show
# isort: off
from ._residual.registration import ResidualOptions
from ._querysmasher.registration import QuerySmasherOptions
from ._explicit.registration import LSAOptions
from ._pure.registration import PureOptions

# isort: on

__all__ = ["LSAOptions", "PureOptions", "QuerySmasherOptions", "ResidualOptions"]
