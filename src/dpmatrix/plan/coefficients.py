"""The two sets of coefficients that turn selection into a small convex problem.

For residual mechanisms with noise scales ``x_A = σ²_A`` (one per closure member ``A``):

* privacy cost       ``Σ_A p_A / x_A``,  ``p_A = Π_{i∈A} β_i``             (Theorems 4.3, 7.1)
* workload variances ``Σ_{A⊆M} c_{M,A} x_A`` for each workload marginal ``M`` (Theorem 4.4,
  Theorem 7.2): for the *sum* of the cell variances of ``M``,
  ``c_{M,A} = Π_{i∈A} trace_in_i · Π_{j∈M∖A} trace_out_j``; for the variance of one *cell*
  (the same for every cell of a marginal under ResidualPlanner's bases),
  ``c_{M,A} = Π_{i∈A} diag_in_i · Π_{j∈M∖A} diag_out_j``.

Both matrices are sparse (a k-way marginal touches 2^k closure members) and built with
vectorized gathers over all marginals of the same arity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..residual import AttributeBasis
from ..workload import Workload, _group_positions, _subset_masks

__all__ = ["Coefficients", "compute_coefficients"]


@dataclass(frozen=True, eq=False)
class Coefficients:
    """``p`` (per closure member), ``sum_var`` and ``cell_var`` (workload × closure, CSR)."""

    p: np.ndarray
    sum_var: sp.csr_matrix
    cell_var: sp.csr_matrix


def compute_coefficients(workload: Workload, bases: tuple[AttributeBasis, ...]) -> Coefficients:
    """Privacy-cost and variance coefficients of a marginal workload, one basis per attribute."""
    closure = workload.closure
    beta = np.array([b.beta for b in bases])
    t_in = np.array([b.trace_in for b in bases])
    t_out = np.array([b.trace_out for b in bases])
    # ResidualPlanner's bases give the same variance to every cell; take that common value.
    d_in = np.array([float(np.max(b.diag_in)) for b in bases])
    d_out = np.array([float(np.max(b.diag_out)) for b in bases])

    p = np.empty(len(closure))
    for k, (idx, rows) in closure.rows_by_size().items():
        p[idx] = np.prod(beta[rows], axis=1) if k else 1.0

    r_list, c_list, vs_list, vc_list = [], [], [], []
    for k, (wrow, rows) in _group_positions(workload.sets).items():
        for cols in _subset_masks(k):
            out_cols = [j for j in range(k) if j not in cols]
            j = closure.indices(rows[:, cols])
            vs = np.ones(len(rows))
            vc = np.ones(len(rows))
            for c in cols:
                vs *= t_in[rows[:, c]]
                vc *= d_in[rows[:, c]]
            for c in out_cols:
                vs *= t_out[rows[:, c]]
                vc *= d_out[rows[:, c]]
            r_list.append(wrow)
            c_list.append(j)
            vs_list.append(vs)
            vc_list.append(vc)
    r = np.concatenate(r_list)
    c = np.concatenate(c_list)
    shape = (len(workload), len(closure))
    sum_var = sp.csr_matrix((np.concatenate(vs_list), (r, c)), shape=shape)
    cell_var = sp.csr_matrix((np.concatenate(vc_list), (r, c)), shape=shape)
    return Coefficients(p=p, sum_var=sum_var, cell_var=cell_var)
