import numpy as np
import pytest

from dpmatrix._linalg.attribute_queries import (
    all_ranges,
    identity,
    prefix,
    query_matrix,
    validate_query_matrix,
)
from dpmatrix.errors import WorkloadError


def test_paper_examples_n3():
    # Section 7.1 reference example for a 3-valued attribute.
    assert np.array_equal(prefix(3), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    assert np.array_equal(
        all_ranges(3), [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [0, 1, 1], [1, 1, 1]]
    )
    assert np.array_equal(identity(3), np.eye(3))


@pytest.mark.parametrize("n", [1, 2, 5, 10])
def test_range_count_and_content(n):
    R = all_ranges(n)
    assert R.shape == (n * (n + 1) // 2, n)
    rows = {tuple(r) for r in R.astype(int)}
    expected = {tuple(int(a <= k <= b) for k in range(n)) for a in range(n) for b in range(a, n)}
    assert rows == expected
    lengths = R.sum(axis=1)
    assert np.all(np.diff(lengths) >= 0)  # shortest ranges first


def test_prefix_rows_mean_value_le_k():
    P = prefix(5)
    for k in range(5):
        assert np.array_equal(P[k], (np.arange(5) <= k).astype(float))


def test_registry():
    assert np.array_equal(query_matrix("identity", 4), np.eye(4))
    assert np.array_equal(query_matrix("prefix", 4), prefix(4))
    assert np.array_equal(query_matrix("range", 4), all_ranges(4))
    assert np.array_equal(query_matrix("ranges", 4), all_ranges(4))
    M = [[1, 1, 0], [0, 0, 1]]
    assert np.array_equal(query_matrix(M, 3), np.array(M, float))
    with pytest.raises(WorkloadError, match="unknown per-attribute query kind"):
        query_matrix("histogramz", 3)


@pytest.mark.parametrize("W", [identity(4), prefix(4), all_ranges(4), [[1, 1, 1]]])
def test_valid_matrices_pass(W):
    out = validate_query_matrix(W, np.shape(W)[1])
    assert out.dtype == float


def test_non_finite_rejected():
    W = prefix(3)
    W[1, 1] = np.nan
    with pytest.raises(WorkloadError, match="non-finite"):
        validate_query_matrix(W, 3)
    W[1, 1] = np.inf
    with pytest.raises(WorkloadError, match="non-finite"):
        validate_query_matrix(W, 3)


def test_wrong_width_rejected():
    with pytest.raises(WorkloadError, match="columns"):
        validate_query_matrix(prefix(4), 3)
    with pytest.raises(WorkloadError, match="2-D"):
        validate_query_matrix(np.ones(3), 3)
    with pytest.raises(WorkloadError, match="no rows"):
        validate_query_matrix(np.zeros((0, 3)), 3)


def test_ones_not_in_row_space_rejected():
    # differences only: 1ᵀ is orthogonal to every row
    W = [[1, -1, 0], [0, 1, -1]]
    with pytest.raises(WorkloadError, match="all-ones row"):
        validate_query_matrix(W, 3)
    # a single prefix that is not the total
    with pytest.raises(WorkloadError, match="all-ones row"):
        validate_query_matrix([[1, 1, 0]], 3)


def test_bad_size():
    with pytest.raises(WorkloadError):
        prefix(0)
    with pytest.raises(WorkloadError):
        identity(2.5)
