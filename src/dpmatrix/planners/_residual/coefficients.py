"""The two sets of coefficients that turn selection into a small convex problem.

For residual mechanisms with noise scales ``x_A = σ²_A`` (one per closure member ``A``):

* privacy cost       ``Σ_A p_A / x_A``,  ``p_A = Π_{i∈A} β_i``             (Theorems 4.3, 7.1)
* workload variances ``Σ_{A⊆M} c_{M,A} x_A`` for each workload marginal ``M`` (Theorem 4.4,
  Theorem 7.2): for the *sum* of the variances of the queries of ``M``,
  ``c_{M,A} = Π_{i∈A} trace_in_i · Π_{j∈M∖A} trace_out_j``; for the variance of one query
  (one row of ``⊗ W_i``, a cell for plain marginals),
  ``c_{M,A}(q) = Π_{i∈A} diag_in_i[q_i] · Π_{j∈M∖A} diag_out_j[q_j]``.

The factors depend on the attribute and on the query type it has in ``M`` (its base matrix
``W_i``); each (attribute, type) pair gets an id and the matrices are built with vectorized
gathers over all marginals of the same arity (a k-way marginal touches 2^k closure members).
For plain marginals every cell of a marginal has the same variance ("uniform"); for prefix or
range queries it varies, and :meth:`Coefficients.query_variances` evaluates it exactly.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ..._mechanisms.basis import AttributeBasis
from ..._workload import Workload, subset_masks

if TYPE_CHECKING:  # pragma: no cover - annotations only
    import scipy.sparse as sp

__all__ = ["Coefficients", "compute_coefficients", "outer_variances"]

BasisLookup = Callable[[int, str], AttributeBasis]


@dataclass(frozen=True, eq=False)
class Coefficients:
    """``p`` (per closure member), ``sum_var`` and ``cell_var`` (workload × closure, CSR).

    ``cell_var`` holds, per marginal, the coefficients of its *largest* per-attribute factors;
    it is exact when ``uniform`` (all queries of a marginal have the same variance), otherwise
    use :meth:`query_variances` / :meth:`query_row`.
    """

    p: np.ndarray
    sum_var_csr: tuple = field(repr=False)  # (data, indices, indptr, shape) of ``sum_var``
    cell_var_csr: tuple = field(repr=False)  # the same of ``cell_var``
    uniform: bool
    workload: Workload = field(repr=False)
    basis: BasisLookup = field(repr=False)

    @cached_property
    def sum_var(self) -> sp.csr_matrix:
        """Workload × closure coefficients of each marginal's sum of query variances (CSR;
        built on first use, so a plan that is only read never imports SciPy)."""
        import scipy.sparse as sp

        data, indices, indptr, shape = self.sum_var_csr
        return sp.csr_matrix((data, indices, indptr), shape=shape)

    @cached_property
    def cell_var(self) -> sp.csr_matrix:
        """Workload × closure coefficients of each marginal's largest cell variance (CSR)."""
        import scipy.sparse as sp

        data, indices, indptr, shape = self.cell_var_csr
        return sp.csr_matrix((data, indices, indptr), shape=shape)

    def _factors(self, i: int):
        wk = self.workload
        key = wk.sets[i]
        return key, [self.basis(a, t) for a, t in zip(key, wk.types(i))]

    def query_variances(self, i: int, x: np.ndarray) -> np.ndarray:
        """Exact variance of every query of workload marginal ``i`` for noise scales ``x``
        (an array shaped like the table of queries, ``x`` indexed like the closure)."""
        key, bases = self._factors(i)
        terms = ((cols, x[j]) for cols, _, j in self.workload.closure.subsets(key))
        return outer_variances(bases, terms)

    def max_query_variance(self, i: int, x: np.ndarray) -> tuple[float, tuple[int, ...]]:
        """Largest query variance of workload marginal ``i`` and a query attaining it.

        Every term of the variance is a non-negative multiple of ``Π_c f_c[q_c]`` with
        ``f_c ∈ {diag_in_c, diag_out_c}``, so the variance is non-decreasing in each attribute's
        pair ``(diag_in[q_c], diag_out[q_c])``: a value whose pair is dominated by another
        value's never beats it. The search runs over the Pareto-optimal values only (a handful
        per attribute instead of every row of ``W``), then maps back to the original indices.
        """
        key, bases = self._factors(i)
        keep = [_pareto(b) for b in bases]
        out = np.zeros(tuple(len(k) for k in keep))
        for cols, _, j in self.workload.closure.subsets(key):
            xa = x[j]
            if xa == 0:
                continue
            term = np.array(xa)
            for c, b in enumerate(bases):
                f = b.diag_in if c in cols else b.diag_out
                term = np.multiply.outer(term, f[keep[c]])
            out = out + term
        j = np.unravel_index(int(np.argmax(out)), out.shape) if out.ndim else ()
        return float(out[j]), tuple(int(keep[c][jc]) for c, jc in enumerate(j))

    def query_row(self, i: int, q: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Closure positions and coefficients of the variance of query ``q`` of marginal ``i``."""
        key, bases = self._factors(i)
        idx, val = [], []
        for cols, _, j in self.workload.closure.subsets(key):
            v = 1.0
            for c, b in enumerate(bases):
                v *= (b.diag_in if c in cols else b.diag_out)[q[c]]
            idx.append(j)
            val.append(v)
        return np.asarray(idx, dtype=np.int64), np.asarray(val)


def outer_variances(bases, terms) -> np.ndarray:
    """``Σ_A σ²_A ⊗_c (diag_in_c if c ∈ A else diag_out_c)`` (Theorems 4.4, 7.2): per-query
    variances of a (generalized) marginal with per-attribute ``bases``, from ``(cols, σ²_A)``
    pairs where ``cols`` are the positions (within the marginal) of the residual set's attributes.
    """
    out = np.zeros(tuple(b.diag_in.size for b in bases))
    for cols, s2 in terms:
        if s2 == 0:
            continue
        finite = bool(np.isfinite(s2))
        term = np.array(s2 if finite else 1.0)
        for c, b in enumerate(bases):
            term = np.multiply.outer(term, b.diag_in if c in cols else b.diag_out)
        # an unmeasured residual (σ² = ∞) leaves queries without a component in it untouched
        out = out + (term if finite else np.where(term > 0, np.inf, 0.0))
    return out


_PARETO: weakref.WeakKeyDictionary[AttributeBasis, np.ndarray] = weakref.WeakKeyDictionary()


def _pareto(b: AttributeBasis) -> np.ndarray:
    """Indices of the rows of ``W`` whose ``(diag_in, diag_out)`` pair no other row dominates
    (ties: the first one), cached per basis for as long as the basis lives."""
    hit = _PARETO.get(b)
    if hit is not None:
        return hit
    din, dout = np.asarray(b.diag_in), np.asarray(b.diag_out)
    order = np.lexsort((-dout, -din))  # by diag_in desc, then diag_out desc
    keep, best_out = [], -np.inf
    for j in order.tolist():
        if dout[j] > best_out:
            keep.append(j)
            best_out = dout[j]
    idx = np.array(sorted(keep), dtype=np.int64)
    _PARETO[b] = idx
    return idx


def compute_coefficients(
    workload: Workload, mech_bases: tuple[AttributeBasis, ...], basis: BasisLookup
) -> Coefficients:
    """Privacy-cost and variance coefficients of a (generalized) marginal workload.

    ``mech_bases[a]`` is the mechanism basis of attribute ``a`` (its ``β``); ``basis(a, type)``
    the basis that answers queries of that type on ``a``.
    """
    closure = workload.closure
    d = len(workload.domain)
    beta = np.array([b.beta for b in mech_bases])

    # ids of the (attribute, query type) pairs in use, and their factors
    pairs = [(a, t) for a in range(d) for t in workload.types_by_attribute[a]]
    pair_id = {pt: j for j, pt in enumerate(pairs)}
    t_in = np.empty(len(pairs))
    t_out = np.empty(len(pairs))
    d_in = np.empty(len(pairs))
    d_out = np.empty(len(pairs))
    uniform = True
    for j, (a, t) in enumerate(pairs):
        b = basis(a, t)
        t_in[j], t_out[j] = b.trace_in, b.trace_out
        d_in[j], d_out[j] = float(np.max(b.diag_in)), float(np.max(b.diag_out))
        for v in (b.diag_in, b.diag_out):
            if v.size and np.ptp(v) > 1e-12 * max(1.0, float(np.max(v))):
                uniform = False
    default_id = np.array([pair_id.get((a, workload.attr_types[a]), -1) for a in range(d)])

    p = np.empty(len(closure))
    for k, (idx, rows) in closure.rows_by_size().items():
        p[idx] = np.prod(beta[rows], axis=1) if k else 1.0

    # CSR built directly: row i (a k-way marginal) holds its 2^k subsets in bit-mask order
    groups = workload._groups
    counts = np.zeros(len(workload), dtype=np.int64)
    for k, (wrow, _) in groups.items():
        counts[wrow] = 1 << k
    indptr = np.zeros(len(workload) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    nnz = int(indptr[-1])
    idx_dtype = np.int32 if max(nnz, len(closure)) < 2**31 else np.int64
    cols_all = np.empty(nnz, dtype=idx_dtype)
    vs_all = np.empty(nnz)
    vc_all = np.empty(nnz)
    for k, (wrow, rows) in groups.items():
        ids = default_id[rows] if k else np.zeros((len(rows), 0), dtype=np.int64)
        if workload.overrides:
            where = {int(pos): n for n, pos in enumerate(wrow)}
            ids = ids.copy()
            for i, key in workload.overrides.items():
                if i in where:
                    ids[where[i]] = [pair_id[(a, t)] for a, t in zip(workload.sets[i], key)]
        idsT = np.ascontiguousarray(ids.T)  # (k, m): contiguous per attribute column
        f_tin, f_tout = t_in[idsT], t_out[idsT]
        f_din, f_dout = d_in[idsT], d_out[idsT]
        m = len(wrow)
        if m and wrow[-1] - wrow[0] == m - 1 and np.all(np.diff(wrow) == 1):
            lo, hi = int(indptr[wrow[0]]), int(indptr[wrow[-1] + 1])  # contiguous rows
            c_blk = cols_all[lo:hi].reshape(m, 1 << k)
            s_blk = vs_all[lo:hi].reshape(m, 1 << k)
            d_blk = vc_all[lo:hi].reshape(m, 1 << k)
        else:
            c_blk = s_blk = d_blk = None
            start = indptr[wrow]
        for mask, cols in enumerate(subset_masks(k)):
            j = closure.indices(rows[:, cols])
            vs = np.ones(len(rows))
            vc = np.ones(len(rows))
            for c in range(k):
                if c in cols:
                    vs *= f_tin[c]
                    vc *= f_din[c]
                else:
                    vs *= f_tout[c]
                    vc *= f_dout[c]
            if c_blk is not None:
                c_blk[:, mask] = j
                s_blk[:, mask] = vs
                d_blk[:, mask] = vc
            else:
                at = start + mask
                cols_all[at] = j
                vs_all[at] = vs
                vc_all[at] = vc
    shape = (len(workload), len(closure))
    indptr = indptr.astype(idx_dtype)
    sum_var = (vs_all, cols_all, indptr, shape)
    cell_var = (vc_all, cols_all.copy(), indptr.copy(), shape)
    return Coefficients(p, sum_var, cell_var, uniform, workload, basis)
