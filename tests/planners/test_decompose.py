"""Tests for QuerySmasher query decomposition (paper section 6.2, equation 3, Theorem 2)."""

from __future__ import annotations

from functools import reduce

import numpy as np
import pytest

from dpmatrix.planners._querysmasher.decompose import (
    all_subsets,
    decompose,
    decompose_batch,
    decompose_subset,
    lift,
    marginalize,
)


def test_figure_2_exact():
    # Figure 1: A1 = {yes, no}, A2 = {a, b, c}; q = [0,1,1,0,0,1].  Expected values: Figure 2.
    q = np.array([0, 1, 1, 0, 0, 1], dtype=float)
    parts = decompose(q, (2, 3))
    assert set(parts) == {(), (0,), (1,), (0, 1)}
    np.testing.assert_allclose(parts[()], [1 / 2], atol=1e-15)
    np.testing.assert_allclose(parts[(0,)], [1 / 6, -1 / 6], atol=1e-15)
    np.testing.assert_allclose(parts[(1,)], [-1 / 2, 0, 1 / 2], atol=1e-15)
    np.testing.assert_allclose(
        parts[(0, 1)], [-1 / 6, 1 / 3, -1 / 6, 1 / 6, -1 / 3, 1 / 6], atol=1e-15
    )


def _eq3_matrix(sizes, subset):
    """Equation 3's Kronecker matrix W_1 ⊗ ... ⊗ W_k (explicit; test-only)."""
    mats = []
    for j, d in enumerate(sizes):
        if j in subset:
            mats.append(np.eye(d) - np.ones((d, d)) / d)
        else:
            mats.append(np.ones((d, 1)) / d)
    return reduce(np.kron, mats)


@pytest.mark.parametrize("sizes", [(2, 3, 4), (3,), (2, 2), (4, 1, 3)])
def test_matches_equation_3_kronecker_form(sizes):
    rng = np.random.default_rng(0)
    N = int(np.prod(sizes))
    Q = rng.normal(size=(5, N))
    batch = decompose_batch(Q, sizes)
    assert set(batch) == set(all_subsets(len(sizes)))
    for s in all_subsets(len(sizes)):
        expected = Q @ _eq3_matrix(sizes, s)
        np.testing.assert_allclose(batch[s], expected, atol=1e-12)
        np.testing.assert_allclose(decompose_subset(Q, sizes, s), expected, atol=1e-12)
        np.testing.assert_allclose(decompose(Q[2], sizes)[s], expected[2], atol=1e-12)


@pytest.mark.parametrize("sizes", [(2, 3), (2, 3, 4), (5, 2, 3)])
def test_theorem_2_answers_add_up_and_pieces_orthogonal(sizes):
    rng = np.random.default_rng(1)
    N = int(np.prod(sizes))
    subsets = all_subsets(len(sizes))
    for _ in range(5):
        q = rng.normal(size=N)
        x = rng.poisson(5.0, size=N).astype(float)
        parts = decompose(q, sizes)
        total = sum(parts[s] @ marginalize(x, sizes, s) for s in subsets)
        assert total == pytest.approx(q @ x, rel=1e-12, abs=1e-9)
        lifted = {s: lift(parts[s], sizes, s) for s in subsets}
        # each lifted piece answers the same thing on the full marginal
        for s in subsets:
            assert lifted[s] @ x == pytest.approx(parts[s] @ marginalize(x, sizes, s), abs=1e-9)
        # mutual orthogonality and exact reconstruction of q
        for a in subsets:
            for b in subsets:
                if a != b:
                    assert abs(lifted[a] @ lifted[b]) < 1e-12 * max(1.0, q @ q)
        np.testing.assert_allclose(sum(lifted.values()), q, atol=1e-12)


def test_counting_query_pieces_are_centred():
    rng = np.random.default_rng(2)
    sizes = (3, 4, 2)
    q = (rng.random(24) < 0.4).astype(float)
    parts = decompose(q, sizes)
    for s, v in parts.items():
        if not s:
            continue
        T = v.reshape(tuple(sizes[i] for i in s))
        for ax in range(T.ndim):
            np.testing.assert_allclose(T.sum(axis=ax), 0.0, atol=1e-12)


def test_batched_equals_loop():
    rng = np.random.default_rng(3)
    sizes = (3, 5)
    Q = rng.normal(size=(7, 15))
    batch = decompose_batch(Q, sizes, subsets=[(1,), (0, 1)])
    assert set(batch) == {(1,), (0, 1)}
    for i in range(7):
        single = decompose(Q[i], sizes)
        for s in batch:
            np.testing.assert_allclose(batch[s][i], single[s], atol=1e-14)


def test_bad_input():
    with pytest.raises(ValueError, match="cells"):
        decompose(np.zeros(5), (2, 3))
    with pytest.raises(ValueError, match="NaN"):
        decompose(np.array([0, 1, np.nan, 0, 0, 1.0]), (2, 3))
    with pytest.raises(ValueError, match="positive"):
        decompose(np.zeros(6), (0, 6))
    with pytest.raises(ValueError, match="positions"):
        decompose_subset(np.zeros((1, 6)), (2, 3), (2,))
    with pytest.raises(ValueError, match="increasing"):
        decompose_subset(np.zeros((1, 6)), (2, 3), (1, 0))
    with pytest.raises(ValueError, match="2-d"):
        decompose_batch(np.zeros(6), (2, 3))
