"""The max-variance problem (P) of a plain marginal workload, built from the planner's coefficients
(Theorems 4.3/4.4) for :func:`dpmatrix._solvers.maxvar_solver.solve_min_cost`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from ..._domain import Domain
from ..._mechanisms.basis import identity_basis
from ..._solvers.maxvar_solver import MaxVarProblem
from ..._workload import Workload
from .coefficients import compute_coefficients

__all__ = ["build_marginal_maxvar_problem"]


def build_marginal_maxvar_problem(
    sizes: Sequence[int] | np.ndarray,
    workload_sets: Sequence[Iterable[int]] | np.ndarray,
    weights: Sequence[float] | np.ndarray | None = None,
) -> MaxVarProblem:
    """``p`` and ``C`` of the max-variance problem (P) for a plain marginal workload.

    ``sizes[i]`` is the domain size of attribute ``i``; ``workload_sets`` one collection of
    attribute indices per workload marginal (``()`` is the total), or an ``(m, k)`` array;
    ``weights`` (default 1) the ``w_M ≥ 0``. Row ``r`` of ``C`` is ``w_M c_{M,A}`` (Theorem 4.4),
    ``p_A = Π (n_i − 1)/n_i`` (Theorem 4.3). Built by the core (:class:`~dpmatrix.Workload`,
    :func:`~dpmatrix.planners._residual.coefficients.compute_coefficients`), so this is the planner's problem.
    """
    dom = Domain.from_sizes([int(v) if float(v) == int(v) else v for v in np.asarray(sizes).tolist()])
    sets = [tuple(int(a) for a in row) for row in workload_sets]
    wk = Workload(dom, sets, weights)
    bases = tuple(identity_basis(n) for n in dom.sizes)
    coef = compute_coefficients(wk, bases, lambda a, t: bases[a])
    C = sp.csr_matrix(sp.diags(wk.weights) @ coef.cell_var)
    order = [wk.index(tuple(sorted(s))) for s in sets]
    closure = np.full((len(wk.closure), max(1, int(wk.closure.sizes.max()))), -1, dtype=np.int64)
    for k, (idx, rows) in wk.closure.rows_by_size().items():
        closure[idx, :k] = rows
    return MaxVarProblem(coef.p, sp.csr_matrix(C[order]), closure, [tuple(s) for s in sets])
