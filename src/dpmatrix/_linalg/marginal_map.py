"""The explicit marginalization matrix of a small table (explicit small-domain methods only)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["marginal_map"]


def marginal_map(sizes: tuple[int, ...], sub: tuple[int, ...]) -> np.ndarray:
    """0/1 matrix ``T`` (``Π_{i∈sub} nᵢ × Π nᵢ``) summing the cells of a table of shape ``sizes``
    (row-major) into its marginal on the axes ``sub`` (sorted): ``T x`` is that marginal.

    Examples
    --------
    >>> marginal_map((2, 2), (0,)).tolist()
    [[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]]
    """
    n = math.prod(sizes)
    idx = np.indices(sizes).reshape(len(sizes), -1)
    sub_sizes = tuple(sizes[i] for i in sub)
    row = np.ravel_multi_index(tuple(idx[list(sub)]), sub_sizes) if sub else np.zeros(n, dtype=np.int64)
    T = np.zeros((math.prod(sub_sizes), n))
    T[row, np.arange(n)] = 1.0
    return T
