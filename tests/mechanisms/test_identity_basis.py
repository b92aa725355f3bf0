"""The O(n) identity basis equals the dense construction (attribute_basis of I, I) field by field;
its closed forms are Theorem 4.4's, checked here against the explicit matrices."""

from __future__ import annotations

import numpy as np
import pytest

from dpmatrix._mechanisms.basis import _build, identity_basis

FIELDS = ("W", "S", "Sub", "Gamma", "Sub_inv", "total_inv", "resid_cov", "diag_in", "diag_out")


@pytest.mark.parametrize("n", [2, 3, 7, 16])
def test_identity_basis_matches_the_dense_construction(n):
    fast, dense = identity_basis(n), _build(np.eye(n), np.eye(n), "centred")
    for f in FIELDS:
        np.testing.assert_allclose(getattr(fast, f), getattr(dense, f), atol=1e-12, err_msg=f)
    for f in ("beta", "trace_in", "trace_out", "n", "r", "m", "n_noise", "construction", "is_identity", "uniform_total"):
        assert getattr(fast, f) == pytest.approx(getattr(dense, f)), f
    # and against the definitions: beta = max diag(Subᵀ (ΓΓᵀ)⁻¹ Sub), resid_cov = G ΓΓᵀ Gᵀ
    Sub = dense.Sub
    assert fast.beta == pytest.approx(np.max(np.diag(Sub.T @ np.linalg.solve(Sub @ Sub.T, Sub))))
    G = np.linalg.pinv(Sub)
    np.testing.assert_allclose(fast.resid_cov, G @ Sub @ Sub.T @ G.T, atol=1e-12)


def test_identity_basis_of_a_large_attribute_builds_no_matrix():
    b = identity_basis(200_000)
    assert b.diag_in.shape == (200_000,) and b.beta == pytest.approx(1 - 1 / 200_000)
    assert "Sub" not in vars(b) and "resid_cov" not in vars(b)  # nothing n x n was built


def test_is_identity_by_blocks_agrees_with_the_dense_comparison():
    from dpmatrix._linalg.kron import is_identity

    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 40):
        eye = np.eye(n)
        assert is_identity(eye)
        for tol_ok, delta in ((True, 1e-13), (False, 1e-9)):
            for _ in range(5):
                m = eye.copy()
                i, j = rng.integers(0, n, 2)
                m[i, j] += delta
                assert is_identity(m) == np.allclose(m, eye, rtol=0, atol=1e-12) == tol_ok
    assert not is_identity(np.ones((2, 3))) and not is_identity(np.zeros((3, 3)))
