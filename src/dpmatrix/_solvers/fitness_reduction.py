r"""Exact reduction of a fitness-for-use instance: proportional queries and proportional cells.

Problem 1 of Xiao et al. (PVLDB 14(1), §3.3) in the homogeneous form used by
:mod:`dpmatrix._solvers.fitness`: with ``F = C^{-1/2} W`` (rows ``f_j``),
``min_X max_i X_ii · max_j f_j X⁺ f_jᵀ`` over PSD ``X`` with range ``rowspace W``.  Two exact
reductions shrink it without changing the optimum:

* **Queries along one direction.**  If ``f_k = a f_j`` with ``|a| ≤ 1`` then
  ``f_k X⁺ f_kᵀ = a² f_j X⁺ f_jᵀ ≤ f_j X⁺ f_jᵀ`` for every X: query k never binds alone, so only
  the largest row of each direction is kept (duplicate queries, and queries whose target is
  looser than a parallel one's).  Its optimal dual weight is moved to the kept row, the others
  get λ = 0.
* **Cells along one direction.**  If column ``i`` of F is ``p_i`` times a representative column
  ``g`` (largest norm in its class, so ``|p_i| ≤ 1``), then ``F = F' P`` with ``P`` (n' × n)
  holding ``p_i`` in row ``g``; P has full row rank, so for ``X = Pᵀ X' P``
  ``f_j X⁺ f_jᵀ = f'_j X'⁻¹ f'_jᵀ`` (``P P⁺ = I``) and ``X_ii = p_i² X'_gg ≤ X'_gg``: the
  reduced problem on F' has the same optimum, its strategy ``A'`` gives ``A = A' P``.  A cell
  no query touches (zero column) is dropped (``X_ii = 0``).  Random range queries over d
  values typically leave a few pairs of adjacent cells that no end point separates: merging
  them makes F' of full column rank, which the Newton solver
  (:mod:`dpmatrix._solvers.fitness_newton`) needs — with duplicated cells or queries the dual
  weights are not unique and its Newton system is singular.

The dual transfers too: weights on the reduced rows/cells, put on the kept row/representative
cell, give the same bound ``‖Λ^{1/2} F D_μ^{1/2}‖_*`` (the representative's column is the
reduced column).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Reduction", "identity_reduction", "reduce_instance"]

_DIGITS = 10  # directions are compared after rounding to 10 significant digits


@dataclass(frozen=True, eq=False, kw_only=True)
class Reduction:
    """The reduced matrix ``F' = F[rows][:, cells]`` and the maps back.

    Attributes
    ----------
    matrix : ndarray (m' × n')
        Kept rows and representative columns of F.
    rows : ndarray of int (m')
        Indices of the kept rows in F.
    cells : ndarray of int (n')
        Indices of the representative columns in F.
    expand : ndarray (n' × n)
        ``P`` with ``F[rows] = F' P``: a strategy ``A'`` of the reduced problem gives ``A' P``.
    """

    matrix: np.ndarray = field(repr=False)
    rows: np.ndarray = field(repr=False)
    cells: np.ndarray = field(repr=False)
    expand: np.ndarray = field(repr=False)

    @property
    def shape(self) -> tuple[int, int]:
        return self.matrix.shape

    def query_weights(self, lam: np.ndarray, m: int) -> np.ndarray:
        """Reduced dual weights on the m original queries (0 on dominated ones)."""
        out = np.zeros(m)
        out[self.rows] = lam
        return out

    def cell_weights(self, mu: np.ndarray) -> np.ndarray:
        """Reduced dual weights on the original cells (on each class's representative)."""
        out = np.zeros(self.expand.shape[1])
        out[self.cells] = mu
        return out


def _direction_classes(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of M grouped by direction up to sign and scale: (class label per row, row norms)."""
    norms = np.linalg.norm(M, axis=1)
    safe = np.where(norms > 0, norms, 1.0)
    U = M / safe[:, None]
    # Sign: the first entry of largest magnitude (rounded) is made positive.
    lead = np.argmax(np.round(np.abs(U), _DIGITS), axis=1)
    sign = np.sign(U[np.arange(U.shape[0]), lead])
    U = U * np.where(sign == 0, 1.0, sign)[:, None]
    U = np.round(U, _DIGITS) + 0.0  # + 0.0 turns −0.0 into 0.0
    _, label = np.unique(U, axis=0, return_inverse=True)
    return np.asarray(label).reshape(-1), norms


def _representatives(label: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """For each class, the index of its member of largest norm (sorted by index)."""
    order = np.lexsort((-norms, label))  # by class, largest norm first
    first = np.ones(order.size, dtype=bool)
    first[1:] = label[order[1:]] != label[order[:-1]]
    return np.sort(order[first])


def reduce_instance(F: np.ndarray) -> Reduction:
    """Merge proportional rows (keep the largest) and proportional columns of ``F``.

    Parameters
    ----------
    F : ndarray (m × n)
        Target-scaled workload ``C^{-1/2} W`` (no zero row).

    Returns
    -------
    Reduction

    Examples
    --------
    >>> F = np.array([[1., 1., 0.], [2., 2., 0.], [0., 0., 1.]])
    >>> red = reduce_instance(F)
    >>> red.rows.tolist(), red.cells.tolist(), red.matrix.tolist()
    ([1, 2], [0, 2], [[2.0, 0.0], [0.0, 1.0]])
    """
    F = np.asarray(F, dtype=float)
    n = F.shape[1]
    label, norms = _direction_classes(F)
    rows = _representatives(label, norms)
    Fk = F[rows]
    clabel, cnorms = _direction_classes(Fk.T)
    nonzero = cnorms > 0
    reps = _representatives(clabel, cnorms)
    reps = reps[nonzero[reps]]
    P = np.zeros((reps.size, n))
    pos = {int(c): k for k, c in enumerate(clabel[reps])}
    for i in np.flatnonzero(nonzero):
        k = pos[int(clabel[i])]
        g = reps[k]
        P[k, i] = float(Fk[:, i] @ Fk[:, g]) / float(cnorms[g] ** 2)
    for a in (rows, reps, P):
        a.setflags(write=False)
    Fr = np.ascontiguousarray(Fk[:, reps])
    Fr.setflags(write=False)
    return Reduction(matrix=Fr, rows=rows, cells=reps, expand=P)


def identity_reduction(F: np.ndarray) -> Reduction:
    """The instance as given (no merging), in the same form as :func:`reduce_instance`.

    Examples
    --------
    >>> identity_reduction(np.ones((2, 3))).expand.tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    F = np.array(F, dtype=float)
    m, n = F.shape
    arrays = (F, np.arange(m), np.arange(n), np.eye(n))
    for a in arrays:
        a.setflags(write=False)
    return Reduction(matrix=arrays[0], rows=arrays[1], cells=arrays[2], expand=arrays[3])
