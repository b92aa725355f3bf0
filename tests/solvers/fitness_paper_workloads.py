"""Workloads of the fitness-for-use paper's experiments (§7), built as the paper describes.

Explicit small matrices built with numpy only (no dpmatrix import), shared by
``test_fitness.py`` and ``benchmarks/bench_targets.py``.
"""

from __future__ import annotations

import itertools

import numpy as np


def marginal_matrix(sizes: tuple[int, ...], keep: tuple[int, ...]) -> np.ndarray:
    """Kronecker product: identity on the kept attributes, a row of ones on the others."""
    M = np.ones((1, 1))
    for i, s in enumerate(sizes):
        M = np.kron(M, np.eye(s) if i in keep else np.ones((1, s)))
    return M


def prefix_workload(d: int) -> np.ndarray:
    """§7.1.1: the d one-sided range queries ``x ≤ k`` (lower-triangular ones)."""
    return np.tril(np.ones((d, d)))


def identity_sum_workload(d: int) -> np.ndarray:
    """§5.1: the d cell counts and the total."""
    return np.vstack([np.eye(d), np.ones((1, d))])


def pl94_workload() -> np.ndarray:
    """§7.3: (voting-age 2) × (ethnicity 2) × (race 63) histogram, 252 cells.

    Queries: the voting-age marginal, the ethnicity marginal, the count of each single race
    (6) and of each combination of two or more races (57) — together the race marginal — and
    the identity: 2 + 2 + 63 + 252 = 319 queries.
    """
    sizes = (2, 2, 63)
    return np.vstack([
        marginal_matrix(sizes, (0,)),
        marginal_matrix(sizes, (1,)),
        marginal_matrix(sizes, (2,)),
        np.eye(252),
    ])


def age_pyramid_workload() -> np.ndarray:
    """§7.6: gender (2) × age (0–115), cells gender-major (232 cells).

    For males, females and both: the prefix queries ``age ∈ [0, x]`` (116) and the voting-age
    query ``age ∈ [18, 115]`` — 3 × 117 = 351 queries.
    """
    ages = 116
    R = np.vstack([np.tril(np.ones((ages, ages))), (np.arange(ages) >= 18).astype(float)[None, :]])
    return np.vstack([np.kron([[1.0, 0.0]], R), np.kron([[0.0, 1.0]], R), np.kron([[1.0, 1.0]], R)])


def marginals_workload(t: int, r: int = 3) -> np.ndarray:
    """§7.7: all one- and two-way marginals of r attributes with t values each (d = t^r)."""
    sizes = (t,) * r
    sets = [s for k in (1, 2) for s in itertools.combinations(range(r), k)]
    return np.vstack([marginal_matrix(sizes, s) for s in sets])


def random_range_workload(d: int, rng: np.random.Generator) -> np.ndarray:
    """§7.4: 2d range queries, both end points uniform on the d values."""
    ends = rng.integers(0, d, size=(2 * d, 2))
    lo, hi = ends.min(axis=1), ends.max(axis=1)
    cols = np.arange(d)
    return ((cols[None, :] >= lo[:, None]) & (cols[None, :] <= hi[:, None])).astype(float)


def random_pm1_workload(d: int, rng: np.random.Generator) -> np.ndarray:
    """§7.5: 2d queries, each entry +1 with probability 0.2, else −1."""
    return np.where(rng.random((2 * d, d)) < 0.2, 1.0, -1.0)


def random_targets(m: int, rng: np.random.Generator) -> np.ndarray:
    """§7.4/7.5 random case: targets uniform(1, 10)."""
    return rng.uniform(1.0, 10.0, size=m)
