"""Level strategies of one attribute as operators: ``H^ℓ x``, ``H^{ℓᵀ} y`` and ``G⁻¹ b`` in
O(n) per level and column, without an ``n × n`` matrix (:mod:`.levels` has the definitions).

* **Tree** (``b``-ary, level ``ℓ`` = blocks of ``b^{L-ℓ}`` cells, the last possibly shorter;
  level ``L`` = the cells): ``H^ℓ x`` is a block sum (``numpy.add.reduceat``) and ``H^{ℓᵀ} y``
  repeats each block's value over its cells. The node ``j`` of level ``ℓ+1`` has parent ``j // b``.
* **Haar** (level 0 the total, then one ``+1 / -1`` row per node ``[lo, mid, hi)``): ``H^ℓ x`` is
  ``X[mid] - X[lo] - (X[hi] - X[mid])`` from the cumulative sums ``X``, ``H^{ℓᵀ} y`` the cumulative
  sum of a difference array (the total is the node ``[0, n, n)``).

**GLS solve** ``G⁻¹ b`` with ``G = Σ_ℓ ω_ℓ H^{ℓᵀ}H^ℓ`` (``ω_ℓ = η_ℓ²``):

* Tree: ``b = Σ_ℓ ω_ℓ H^{ℓᵀ} y_ℓ`` with ``y_L = b / ω_L`` and ``y_ℓ = 0`` above (the leaves are the
  cells, ``ω_L > 0`` whenever ``G`` is invertible), so ``G⁻¹ b`` is the weighted least-squares fit
  of those observations, computed exactly by the two passes of Gaussian elimination on the tree
  (Hay et al., PVLDB 2010, §4, with per-level weights): bottom-up, each node's estimate from its
  subtree, ``z_v = V_v (ω_v y_v + s_v / S_v)``, ``V_v = 1/(ω_v + 1/S_v)`` with ``s_v = Σ_c z_c``,
  ``S_v = Σ_c V_c`` over its children (``z = y``, ``V = 1/ω_L`` at the leaves; a level of weight 0
  passes ``s, S`` up); top-down, ``x̂_c = z_c + (V_c / S_v)(x̂_v - s_v)`` from the root's
  ``x̂ = z``. O(n L) per column.
* Haar: no structured solve here (its rows are orthogonal only when ``n`` is a power of two; the
  dense ``G⁻¹`` of :mod:`.levels` is used).
* Cells: ``G = ω I``.

Checked against the dense ``G⁻¹`` and the explicit level rows in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ...errors import PlanError

__all__ = ["LevelOperator"]


def _front(x: np.ndarray, axis: int) -> tuple[np.ndarray, tuple[int, ...]]:
    moved = np.moveaxis(np.asarray(x), axis, 0)
    return moved.reshape(moved.shape[0], -1), moved.shape[1:]


def _back(flat: np.ndarray, rest: tuple[int, ...], axis: int) -> np.ndarray:
    return np.moveaxis(flat.reshape((flat.shape[0],) + rest), 0, axis)


@dataclass(frozen=True, eq=False)
class LevelOperator:
    """The levels of a ``kind`` (``"cells"``, ``"tree"``, ``"haar"``) on ``n`` cells as operators.

    Examples
    --------
    >>> op = LevelOperator("tree", 5, 2)
    >>> op.apply(1, np.arange(5.0)).tolist()            # blocks of 4: [0..3], [4]
    [6.0, 4.0]
    >>> op.adjoint(1, np.array([1.0, 2.0])).tolist()
    [1.0, 1.0, 1.0, 1.0, 2.0]
    """

    kind: str
    n: int
    branching: int = 0

    @cached_property
    def _tree(self) -> list[np.ndarray]:
        """Per level, the first cell of each block (trees)."""
        b, n = self.branching, self.n
        depth = 0
        while b**depth < n:
            depth += 1
        return [np.arange(0, n, b ** (depth - lev)) for lev in range(depth + 1)]

    @cached_property
    def _haar(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per level, the nodes' ``(lo, mid, hi)`` (the total: ``(0, n, n)``)."""
        out = [(np.array([0]), np.array([self.n]), np.array([self.n]))]
        nodes = [(0, self.n)]
        while True:
            lo, mid, hi, nxt = [], [], [], []
            for a, c in nodes:
                if c - a < 2:
                    continue
                m = a + (c - a) // 2
                lo.append(a)
                mid.append(m)
                hi.append(c)
                nxt += [(a, m), (m, c)]
            if not lo:
                return out
            out.append((np.array(lo), np.array(mid), np.array(hi)))
            nodes = nxt

    @property
    def n_levels(self) -> int:
        if self.kind == "cells":
            return 1
        return len(self._tree) if self.kind == "tree" else len(self._haar)

    def rows(self, level: int) -> int:
        """Number of rows of level ``level``."""
        if self.kind == "cells":
            return self.n
        return len(self._tree[level]) if self.kind == "tree" else len(self._haar[level][0])

    def apply(self, level: int, x: np.ndarray, axis: int = 0) -> np.ndarray:
        """``H^level`` applied along ``axis`` of ``x`` (integer in, integer out)."""
        if self.kind == "cells":
            return np.array(x, copy=True)
        flat, rest = _front(x, axis)
        if self.kind == "tree":
            out = np.add.reduceat(flat, self._tree[level], axis=0)
        else:
            lo, mid, hi = self._haar[level]
            c = np.zeros((self.n + 1, flat.shape[1]), dtype=flat.dtype)
            np.cumsum(flat, axis=0, out=c[1:])
            out = 2 * c[mid] - c[lo] - c[hi]
        return _back(out, rest, axis)

    def adjoint(self, level: int, y: np.ndarray, axis: int = 0) -> np.ndarray:
        """``H^{levelᵀ}`` applied along ``axis`` of ``y``."""
        if self.kind == "cells":
            return np.array(y, copy=True)
        flat, rest = _front(y, axis)
        if self.kind == "tree":
            starts = self._tree[level]
            out = np.repeat(flat, np.diff(np.append(starts, self.n)), axis=0)
        else:
            lo, mid, hi = self._haar[level]
            d = np.zeros((self.n + 1, flat.shape[1]), dtype=np.result_type(flat, float))
            np.add.at(d, lo, flat)
            np.add.at(d, mid, -2 * flat)
            np.add.at(d, hi, flat)
            out = np.cumsum(d, axis=0)[: self.n]
        return _back(out, rest, axis)

    def solve(self, weights, b: np.ndarray, axis: int = 0) -> np.ndarray:
        """``G⁻¹ b`` along ``axis`` with ``G = Σ_ℓ weights[ℓ] H^{ℓᵀ}H^ℓ`` (module doc)."""
        w = [float(x) for x in weights]
        flat, rest = _front(np.asarray(b, dtype=float), axis)
        if self.kind == "cells":
            out = flat / w[0]
        elif self.kind == "haar":
            raise PlanError("the structured GLS solve covers trees and cells; a Haar strategy's "
                            "rows are not orthogonal when n is not a power of two (use its dense Gram)")
        else:
            out = self._tree_solve(w, flat)
        return _back(out, rest, axis)

    def _tree_solve(self, w: list[float], b: np.ndarray) -> np.ndarray:
        levels = self._tree
        depth = len(levels) - 1
        if w[depth] <= 0:
            raise PlanError("a tree whose cells have share 0 does not identify them")
        z = b / w[depth]
        var = np.full(self.n, 1.0 / w[depth])
        up = []  # per internal level: (children's s, S) and the children's (z, V)
        for lev in range(depth - 1, -1, -1):
            groups = np.arange(0, levels[lev + 1].size, self.branching)
            s = np.add.reduceat(z, groups, axis=0)
            big_s = np.add.reduceat(var, groups)
            up.append((s, big_s, z, var))
            if w[lev] > 0:
                var = 1.0 / (w[lev] + 1.0 / big_s)
                z = (var / big_s)[:, None] * s  # the level's own observation is 0 (module doc)
            else:
                z, var = s, big_s
        x = z
        for s, big_s, zc, vc in reversed(up):
            parent = np.arange(zc.shape[0]) // self.branching
            x = zc + (vc / big_s[parent])[:, None] * (x - s)[parent]
        return x
