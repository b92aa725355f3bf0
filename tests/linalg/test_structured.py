"""The structured matrices of a plain attribute equal their dense definitions, written out here
(ResidualPlanner §4.2: Sub_n = [1 | -I], Sub_n⁺ from numpy's pinv, K = I - 11ᵀ/n), when applied
along any axis of a tensor, transposed, scaled, composed and expanded."""

from __future__ import annotations

import numpy as np
import pytest

from dpmatrix._linalg.kron import is_identity, kron_apply
from dpmatrix._linalg.structured import AxisOperator, Centring, Identity, Subtraction, SubtractionPinv, dense


def _sub(n):
    S = np.zeros((n - 1, n))
    S[:, 0] = 1.0
    for i in range(n - 1):
        S[i, i + 1] = -1.0
    return S


def _definitions(n):
    sub = _sub(n)
    return {
        Identity(n): np.eye(n),
        Subtraction(n): sub,
        SubtractionPinv(n): np.linalg.pinv(sub) if n > 1 else np.zeros((1, 0)),
        Centring(n): np.eye(n) - np.ones((n, n)) / n,
    }


def _along(M, x, axis):
    """Dense product along one axis, by moving that axis first."""
    return np.moveaxis(np.tensordot(M, x, axes=([1], [axis])), 0, axis)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_apply_along_every_axis_equals_the_dense_product(n):
    rng = np.random.default_rng(n)
    for op, M in _definitions(n).items():
        assert isinstance(op, AxisOperator) and op.shape == M.shape
        np.testing.assert_allclose(np.asarray(op), M, atol=1e-14, err_msg=repr(op))
        np.testing.assert_allclose(op.diagonal(), np.diagonal(M), atol=1e-14)
        for axis in range(3):
            shape = [2, 3, 4]
            shape[axis] = M.shape[1]
            x = rng.normal(size=shape)
            np.testing.assert_allclose(op.apply(x, axis), _along(M, x, axis), atol=1e-12, err_msg=repr(op))
            shape[axis] = M.shape[0]
            y = rng.normal(size=shape)
            np.testing.assert_allclose(op.rapply(y, axis), _along(M.T, y, axis), atol=1e-12)
            np.testing.assert_allclose(op.T.apply(y, axis), _along(M.T, y, axis), atol=1e-12)
        v = rng.normal(size=M.shape[1])
        w = rng.normal(size=(4, M.shape[0]))
        np.testing.assert_allclose(op @ v, M @ v, atol=1e-12)
        np.testing.assert_allclose(w @ op, w @ M, atol=1e-12)  # ndarray @ structured: its transpose
        np.testing.assert_allclose((op / 3.0) @ v, (M / 3.0) @ v, atol=1e-12)
        np.testing.assert_allclose(np.asarray(-op), -M, atol=1e-14)
        np.testing.assert_allclose(np.asarray(op @ op.T), M @ M.T, atol=1e-12)


def test_the_closed_forms_compose_as_the_paper_says():
    """Sub⁺ Sub = K (the centring projection) and Sub Sub⁺ = I_{n-1}, checked through the
    operators only (no dense product)."""
    rng = np.random.default_rng(0)
    for n in (2, 4, 9):
        x = rng.normal(size=(n, 3))
        np.testing.assert_allclose((SubtractionPinv(n) @ Subtraction(n)) @ x, Centring(n) @ x, atol=1e-12)
        y = rng.normal(size=(n - 1, 3))
        np.testing.assert_allclose(Subtraction(n) @ (SubtractionPinv(n) @ y), y, atol=1e-12)


def test_kron_apply_mixes_structured_and_dense_factors():
    rng = np.random.default_rng(1)
    P = np.tril(np.ones((3, 3)))  # a prefix-sum matrix: dense
    for mats in ((Subtraction(4), P), (P, SubtractionPinv(5)), (Centring(3), Identity(2), P)):
        shape = tuple(m.shape[1] for m in mats)
        x = rng.normal(size=(2,) + shape)  # a leading batch axis
        full = dense(mats[0])
        for m in mats[1:]:
            full = np.kron(full, dense(m))
        want = np.stack([(full @ x[b].reshape(-1)).reshape(tuple(m.shape[0] for m in mats)) for b in range(2)])
        np.testing.assert_allclose(kron_apply(mats, x), want, atol=1e-12)


def test_subtraction_is_exact_on_integers_and_the_identity_is_recognised():
    v = np.array([5, 2, 9])
    out = Subtraction(3) @ v
    assert out.dtype == float and out.tolist() == [3.0, -4.0]
    assert is_identity(Identity(100_000)) and not is_identity(Centring(3))
    with pytest.raises(ValueError, match="cannot act"):
        Subtraction(3).apply(np.ones(4), 0)
