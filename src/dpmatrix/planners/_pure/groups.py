"""Strategy groups: an attribute set ``A`` and an integer linear map on the ``A``-marginal table.

Conventions follow ``tests/oracle.py``: the full table is ``x.reshape(sizes)`` (C order,
attribute 0 slowest) and a group's rows are ``M_A · Q_A`` where ``Q_A`` is the marginal on ``A``
and ``M_A = ⊗_{i∈A} M_i`` a Kronecker product of per-attribute integer matrices.

Two kinds (Cormode et al. §3–4):

* ``"marginal"``: ``M_i = I`` — the cells of the ``A``-marginal (strategy ``S = Q``, identity,
  clustering centroids). Every column of the full strategy block has exactly one 1: column L1
  norm ``C = 1`` (Definition 3.1, groupable).
* ``"residual"``: ``M_i = D_{n_i}``, the ``n(n-1)/2 × n`` matrix of pairwise differences
  ``e_j - e_k`` (``j < k``). For binary attributes ``D_2 = [1, -1]`` and ``⊗_{i∈A} D_2`` (with
  ``1ᵀ`` on the other attributes) is exactly the Hadamard/Fourier row ``f^α`` of §4 up to the
  ``2^{-d/2}`` normalization (which the paper divides out before adding noise). For any ``n``,
  ``D_nᵀ D_n = n I - J``: isotropic on ``1^⊥``, so these blocks generalize the Fourier strategy
  to attributes of any size with integer rows. Every column of ``D_n`` has ``n - 1`` entries
  ``±1``, so every column of the block has L1 norm ``C = Π_{i∈A} (n_i - 1)`` (constant: the
  block is groupable). Derivation of why not smaller: the L1 norm of a column is at least its
  L2 norm, ``√(c (n-1)/n)`` for a basis with Gram ``c (I - J/n)``; pairwise differences reach
  ``c/C² = n/(n-1)²`` against that bound's ``n/(n-1)``: tight for ``n = 2`` only (we make no
  optimality claim for ``n > 2``; the planner compares it against the other strategies).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, reduce
from math import prod
from typing import Literal

import numpy as np

from ...errors import PlanError

__all__ = ["StrategyGroup", "pairwise_differences", "center", "GroupKind"]

GroupKind = Literal["marginal", "residual"]


def pairwise_differences(n: int) -> np.ndarray:
    """The ``n(n-1)/2 × n`` integer matrix with rows ``e_j - e_k`` for ``j < k``.

    ``Dᵀ D = n I - 11ᵀ``; every column has L1 norm ``n - 1``.

    Examples
    --------
    >>> pairwise_differences(3)
    array([[ 1, -1,  0],
           [ 1,  0, -1],
           [ 0,  1, -1]])
    """
    j, k = np.triu_indices(n, 1)
    d = np.zeros((j.size, n), dtype=np.int64)
    r = np.arange(j.size)
    d[r, j] = 1
    d[r, k] = -1
    return d


def center(table: np.ndarray, axes) -> np.ndarray:
    """Apply ``I - J/n`` along each of ``axes`` (subtract the mean along that axis)."""
    out = np.asarray(table, dtype=float)
    for ax in axes:
        out = out - out.mean(axis=ax, keepdims=True)
    return out


@dataclass(frozen=True)
class StrategyGroup:
    """One group of strategy rows, measured with one noise budget ``ε_g``.

    Parameters
    ----------
    attrs : tuple of int
        Sorted attribute positions ``A``.
    sizes : tuple of int
        The sizes ``n_i`` of those attributes.
    kind : {"marginal", "residual"}
        Map on the ``A``-table: identity (cells) or ``⊗ D_{n_i}`` (pairwise differences).
    """

    attrs: tuple[int, ...]
    sizes: tuple[int, ...]
    kind: GroupKind = "marginal"

    def __post_init__(self) -> None:
        if self.kind not in ("marginal", "residual"):
            raise PlanError(f"group kind must be 'marginal' or 'residual', got {self.kind!r}")
        if len(self.attrs) != len(self.sizes) or list(self.attrs) != sorted(set(self.attrs)):
            raise PlanError(f"group attributes must be sorted and distinct, got {self.attrs}")

    @cached_property
    def cells(self) -> int:
        """Cells of the ``A``-marginal table, ``Π_{i∈A} n_i``."""
        return prod(self.sizes)

    @cached_property
    def n_rows(self) -> int:
        """Number of strategy rows (noise draws) of the group."""
        if self.kind == "marginal":
            return self.cells
        return prod(n * (n - 1) // 2 for n in self.sizes)

    @cached_property
    def sensitivity(self) -> int:
        """Column L1 norm ``C_g`` (the same for every column of the full domain)."""
        if self.kind == "marginal":
            return 1
        return prod(n - 1 for n in self.sizes)

    def factors(self) -> list[np.ndarray]:
        """The per-attribute integer matrices ``M_i`` (``I`` or ``D_{n_i}``)."""
        if self.kind == "marginal":
            return [np.eye(n, dtype=np.int64) for n in self.sizes]
        return [pairwise_differences(n) for n in self.sizes]

    def matrix(self) -> np.ndarray:
        """``⊗_{i∈A} M_i`` as a dense integer matrix on the ``A``-table (small groups only)."""
        return reduce(np.kron, self.factors(), np.ones((1, 1), dtype=np.int64))

    def eigenvalue(self, subset: tuple[int, ...]) -> float:
        """Eigenvalue of ``S_gᵀ S_g / N`` on the residual subspace ``V_B`` (``B = subset``).

        ``marginal``: ``1/Π_{i∈A} n_i`` if ``B ⊆ A`` else 0 (``I`` keeps ``1`` and ``1^⊥``;
        the ``11ᵀ`` of a summed-out attribute has eigenvalue ``n`` on ``1``, 0 on ``1^⊥``).
        ``residual``: 1 if ``B = A`` else 0 (``D_nᵀ D_n`` is ``n`` on ``1^⊥``, 0 on ``1``).
        """
        if self.kind == "marginal":
            return 1.0 / self.cells if set(subset) <= set(self.attrs) else 0.0
        return 1.0 if tuple(subset) == self.attrs else 0.0

    def answer(self, table: np.ndarray) -> np.ndarray:
        """Exact strategy answers ``M_A · (A-table)`` (flat), given the ``A``-marginal table."""
        t = np.asarray(table)
        if self.kind == "marginal":
            return t.reshape(-1)
        for ax, m in enumerate(self.factors()):
            t = np.moveaxis(np.tensordot(m, t, axes=([1], [ax])), 0, ax)
        return t.reshape(-1)

    def adjoint(self, y: np.ndarray) -> np.ndarray:
        """``M_Aᵀ y`` as an ``A``-table (``y`` flat, length :attr:`n_rows`)."""
        if self.kind == "marginal":
            return np.asarray(y, dtype=float).reshape(self.sizes)
        shape = tuple(n * (n - 1) // 2 for n in self.sizes)
        t = np.asarray(y, dtype=float).reshape(shape)
        for ax, m in enumerate(self.factors()):
            t = np.moveaxis(np.tensordot(m.T.astype(float), t, axes=([1], [ax])), 0, ax)
        return t

    def to_dict(self) -> dict:
        return {"attrs": list(self.attrs), "sizes": list(self.sizes), "kind": self.kind}

    @classmethod
    def from_dict(cls, d: dict) -> StrategyGroup:
        return cls(tuple(d["attrs"]), tuple(d["sizes"]), d["kind"])
