"""A Kronecker strategy with per-row discrete Laplace budgets as one measurement record.

The record releases ``y = (⊗_i M_i) x + z`` on the count table ``x`` of its attributes, where
``M_i`` are the factors' integer rows (``m_i × n_i``) and ``z_r`` is an independent exact
discrete Laplace draw of parameter ``ε_r = ε_0 Π_i b_{i, r_i}`` for the row ``r = (r_1, …, r_k)``
(budgets of a product: :mod:`dpmatrix.planners._pure.kron_plan`). Nothing of size
``Π m_i × Π n_i`` is formed:

* the signal is a sequence of mode products (factor ``i`` along axis ``i``), in exact integer
  arithmetic: in float64 when every partial sum is an integer below ``2^53`` (``‖x‖₁ Π max|M_i|``
  bounds them), else in int64 (``‖x‖₁ Π max|M_i| < 2^63``, checked);
* the noise is drawn through the registered ``discrete_laplace`` family object, in blocks of
  :data:`BLOCK` rows in C order; within a block the rows are grouped by their tuple of distinct
  factor budgets, and each group is one entry of the family's vectorized draw (one exact rational
  ``ε_r`` per group, never a list of every row's budget).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np

from ..errors import DataError, PlanError

__all__ = ["BLOCK", "KRON_LAPLACE", "KronFactorRows", "KronLaplaceKind", "KronLaplaceRecord", "kron_integer_apply"]

#: rows per block of noise draws (bounded working set)
BLOCK = 1 << 16


class KronFactorRows(NamedTuple):
    """One factor: the integer rows ``[I; agg]`` (``cells``: whether the ``n`` cell rows come
    first) and the exact budget of each row at ``ε_0 = 1``."""

    n: int
    agg: np.ndarray
    budgets: tuple[Fraction, ...]
    cells: bool = True

    @property
    def m(self) -> int:
        return (self.n if self.cells else 0) + self.agg.shape[0]

    def apply(self, t: np.ndarray, axis: int) -> np.ndarray:
        """The rows applied along ``axis`` of ``t`` (cells: a copy of ``t``; aggregation rows:
        a tensor product, in ``t``'s dtype)."""
        parts = [t] if self.cells else []
        if self.agg.shape[0]:
            a = self.agg.astype(t.dtype, copy=False)
            parts.append(np.moveaxis(np.tensordot(a, t, axes=([1], [axis])), 0, axis))
        return np.concatenate(parts, axis=axis) if len(parts) > 1 else parts[0]


def kron_integer_apply(factors, table: np.ndarray) -> np.ndarray:
    """``(⊗_i M_i) x`` exactly, as an int64 tensor of shape ``(m_1, …, m_k)``.

    Examples
    --------
    >>> f = KronFactorRows(2, np.array([[1, 1]]), (Fraction(1, 2),) * 3)
    >>> kron_integer_apply([f, f], np.array([[1, 2], [3, 4]])).tolist()
    [[1, 2, 3], [3, 4, 7], [4, 6, 10]]
    """
    x = np.asarray(table)
    if x.dtype.kind not in "iu":
        raise PlanError("exact discrete noise needs an integer count table")
    x = x.astype(np.int64)
    if x.shape != tuple(f.n for f in factors):
        raise DataError(f"a count table of shape {x.shape} for factors of sizes {[f.n for f in factors]}")
    total = int(np.abs(x).sum())
    bound = total * math.prod(max(1, int(np.abs(f.agg).max(initial=0))) for f in factors)
    if bound < 2**53:
        t = x.astype(float)
        for ax, f in enumerate(factors):
            t = f.apply(t, ax)
        return np.rint(t).astype(np.int64)
    if bound >= 2**63:
        raise DataError("the Kronecker strategy's answers on this table do not fit in 64-bit integers")
    t = x
    for ax, f in enumerate(factors):
        t = f.apply(t, ax)
    return t


class _Draw(NamedTuple):
    """What a noise family's ``draw`` reads of a mechanism: its parameter and its shape."""

    scale: Fraction
    noise_shape: tuple[int, ...]


def _budget_codes(factors) -> tuple[list[np.ndarray], list[list[Fraction]]]:
    """Per factor: each row's index into its distinct budgets, and those budgets."""
    codes, values = [], []
    for f in factors:
        distinct = sorted(set(f.budgets))
        where = {b: i for i, b in enumerate(distinct)}
        codes.append(np.array([where[b] for b in f.budgets], dtype=np.int64))
        values.append(distinct)
    return codes, values


def kron_laplace_noise(factors, scale: Fraction, family: Any, rng: Any) -> np.ndarray:
    """Independent discrete Laplace draws, parameter ``scale · Π_i b_{i, r_i}`` for row ``r``
    (rows of budget 0 get 0: they are not released), drawn through ``family`` (module doc).

    Examples
    --------
    >>> from dpmatrix._mechanisms.noise_families import noise_family
    >>> f = KronFactorRows(2, np.array([[1, 1]]), (Fraction(1, 2),) * 3)
    >>> z = kron_laplace_noise([f, f], Fraction(1), noise_family("discrete_laplace"), np.random.default_rng(0))
    >>> z.shape, z.dtype
    ((3, 3), dtype('int64'))
    """
    shape = tuple(f.m for f in factors)
    codes, values = _budget_codes(factors)
    radix = [len(v) for v in values]
    nums = [[b.numerator for b in v] for v in values]
    dens = [[b.denominator for b in v] for v in values]
    out = np.zeros(math.prod(shape), dtype=np.int64)
    total = out.size
    for lo in range(0, total, BLOCK):
        idx = np.arange(lo, min(lo + BLOCK, total))
        code = np.zeros(idx.size, dtype=np.int64)
        for c, sub, r in zip(codes, np.unravel_index(idx, shape), radix):
            code = code * r + c[sub]
        groups, inverse, counts = np.unique(code, return_inverse=True, return_counts=True)
        parts = [p.tolist() for p in np.unravel_index(groups, radix)]
        draws, live = [], np.zeros(groups.size, dtype=bool)
        for g, size in enumerate(counts.tolist()):
            num, den = scale.numerator, scale.denominator
            for i, p in enumerate(parts):
                num *= nums[i][p[g]]
                den *= dens[i][p[g]]
            if num > 0:
                draws.append(_Draw(Fraction(num, den), (size,)))
                live[g] = True
        z = iter(family.draw(draws, rng))
        noise = np.concatenate([np.asarray(next(z), dtype=np.int64) if on else np.zeros(size, dtype=np.int64)
                                for on, size in zip(live.tolist(), counts.tolist())])
        out[idx[np.argsort(inverse, kind="stable")]] = noise  # rows grouped by budget, in group order
    return out.reshape(shape)


class KronLaplaceKind:
    """Runs :class:`KronLaplaceRecord` s: exact integer mode products, then per-row discrete
    Laplace noise drawn through the family object (module docstring)."""

    def outputs(self, records, tables, sources, family, rng) -> list[np.ndarray]:
        out = []
        for r, table in zip(records, tables):
            signal = kron_integer_apply(r.factors, table)
            out.append(signal + kron_laplace_noise(r.factors, r.scale, family, rng))
        return out


#: the one :class:`KronLaplaceKind`
KRON_LAPLACE = KronLaplaceKind()


class KronLaplaceRecord(NamedTuple):
    """The Kronecker strategy ``⊗_i M_i`` on the count table of ``attrs`` (sorted), released with
    exact discrete Laplace noise of parameter ``scale · Π_i b_{i, r_i}`` on row ``r``."""

    key: Any
    attrs: tuple[int, ...]
    factors: tuple[KronFactorRows, ...]
    scale: Fraction
    family: str = "discrete_laplace"
    kind: KronLaplaceKind = KRON_LAPLACE
