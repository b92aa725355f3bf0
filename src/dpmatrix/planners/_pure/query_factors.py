"""Per-attribute sums and maxima of a generalized workload's query forms, for the cell strategies.

The cell strategies (:mod:`.strategies`, :mod:`.optimize`) answer a marginal ``W`` from an
estimate of its cells; a query of ``W`` is a Kronecker product ``q = ⊗_{i∈W} q_i`` of rows of the
attributes' query matrices ``W_i`` (cells, prefixes, ranges, a user matrix). Everything the
budgets need is a product over attributes of one of three quadratic forms of a row ``q_i``:

* ``t(q_i) = ‖q_i‖²`` — direct recovery by summing noisy cells of a marginal ``M ⊇ W`` (each
  with noise ``σ²``): ``Var(q) = σ² ‖q‖² n_M / n_W``;
* ``c(q_i) = q_i (I - J/n_i) q_iᵀ`` and ``d(q_i) = (Σ q_i)² / n_i`` — the GLS covariance of the
  ``W``-marginal is ``Σ_{B⊆W} (1/(n_W Λ_B)) ⊗_{i∈B}(I - J/n_i) ⊗_{i∈W∖B} J/n_i``
  (:mod:`.subspaces`), so ``Var(q) = Σ_B Π_{i∈B} c(q_i) Π_{i∈W∖B} d(q_i) / (n_W Λ_B)``.

Summed over the queries of ``W`` a product of per-attribute forms is the product of the
per-attribute sums (``T_i = tr W_iᵀW_i``, ``C_i``, ``D_i``), and maximized it is the product of
the per-attribute maxima. For plain cells ``T = n``, ``C = n - 1``, ``D = 1`` and the maxima are
``1``, ``(n-1)/n``, ``1/n``: the formulas of the plain planner.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from ..._workload import Workload

__all__ = ["AttributeForms", "cell_weight", "fourier_term", "query_forms"]


@dataclass(frozen=True)
class AttributeForms:
    """Sums (``total``, ``centred``, ``mean``) and maxima of ``t``, ``c``, ``d`` over the rows of
    one attribute's query matrix (module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> f = AttributeForms.of(np.eye(3))
    >>> f.total, f.centred, f.mean, f.centred_max
    (3.0, 2.0, 1.0, 0.6666666666666667)
    """

    total: float
    centred: float
    mean: float
    total_max: float
    centred_max: float
    mean_max: float

    @classmethod
    def of(cls, w) -> AttributeForms:
        """The forms of a query matrix or of query rows (:mod:`.query_rows`: intervals are
        read from their lengths, no matrix built)."""
        from .query_rows import as_query_rows, row_squares, row_sums

        w = as_query_rows(w)
        t = row_squares(w)
        d = row_sums(w) ** 2 / w.n
        c = t - d
        return cls(float(t.sum()), float(c.sum()), float(d.sum()), float(t.max()), float(c.max()), float(d.max()))


def query_forms(workload: Workload) -> tuple[tuple[AttributeForms, ...], ...]:
    """:class:`AttributeForms` of every attribute of every workload marginal (workload order)."""
    from .query_rows import attribute_queries

    cache: dict = {}
    out = []
    for j, s in enumerate(workload.sets):
        row = []
        for a, k in zip(s, workload.types(j)):
            if (a, k) not in cache:
                cache[a, k] = AttributeForms.of(attribute_queries(workload, a, k))
            row.append(cache[a, k])
        out.append(tuple(row))
    return tuple(out)


def cell_weight(forms: tuple[AttributeForms, ...], sizes: tuple[int, ...]) -> float:
    """``Π_i T_i / n_W``: the factor turning a marginal's weight into the weight of its cells in
    the direct-recovery objective (1 for plain cells).

    Examples
    --------
    >>> import numpy as np
    >>> cell_weight((AttributeForms.of(np.tril(np.ones((4, 4)))),), (4,))   # 1+2+3+4 over 4 cells
    2.5
    """
    return prod(f.total for f in forms) / prod(sizes)


def fourier_term(w_set, forms, sizes, b, *, maximum: bool = False) -> float:
    """``Π_{i∈B} C_i Π_{i∈W∖B} D_i / n_W`` (``maximum``: with the per-attribute maxima), the
    weight of subspace ``B`` in marginal ``W``'s summed (or largest) query variance per unit
    ``1/Λ_B``; plain cells: ``Π_{i∈B}(n_i - 1)/n_W`` (``Π_{i∈B}(n_i-1)/n_W²``).

    Examples
    --------
    >>> fourier_term((0, 1), None, (3, 4), (1,))
    0.25
    """
    nw = prod(sizes[i] for i in w_set)
    if forms is None:
        return prod(sizes[i] - 1 for i in b) / (nw * nw if maximum else nw)
    out = 1.0
    for i, f in zip(w_set, forms):
        if i in b:
            out *= f.centred_max if maximum else f.centred
        else:
            out *= f.mean_max if maximum else f.mean
    return out / nw
