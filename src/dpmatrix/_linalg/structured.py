"""Structured matrices of a plain attribute, applied in O(n) along one axis of a tensor.

ResidualPlanner's basis of a plain (identity-workload) attribute of size ``n`` (paper §4.2,
Theorem 4.4) is built from four matrices with closed forms:

* the identity ``I_n`` (workload and strategy);
* the subtraction matrix ``Sub_n = [1 | −I_{n−1}]`` (``(n−1) × n``): ``(Sub_n x)_i = x_0 − x_{i+1}``;
  its transpose maps ``y`` to ``[Σ y; −y]``;
* its pseudo-inverse ``Sub_n⁺ = (1/n) [1ᵀ; 11ᵀ − n I]`` (``n × (n−1)``):
  ``(Sub_n⁺ y)_0 = s/n``, ``(Sub_n⁺ y)_{i+1} = (s − n y_i)/n`` with ``s = Σ y``; its transpose
  maps ``x`` to ``(Σ x − n x_{i+1})/n``;
* the centring projection ``K_n = Sub_n⁺ Sub_n = I − 11ᵀ/n`` (the reconstructed residual's
  covariance per unit σ², ``G Γ Γᵀ Gᵀ`` with ``G = Sub_n⁺``, ``Γ = Sub_n``): ``K x = x − mean(x)``.

Each is a :class:`StructuredMatrix`: it is used where a dense matrix was (``M @ x``, ``X @ M``,
``M.T``, ``M / c``, :func:`~dpmatrix._linalg.kron.kron_apply` factors) but never stores more than
its size ``n``; :meth:`StructuredMatrix.apply` multiplies along one axis of a tensor with
``O(n)`` work per fibre instead of the dense ``O(n²)``. ``numpy.asarray(M)`` (or
:meth:`~StructuredMatrix.toarray`) still gives the dense matrix — an explicit request, for small
domains and tests only.

Examples
--------
>>> import numpy as np
>>> S = Subtraction(4)
>>> S @ np.array([5.0, 1.0, 2.0, 3.0])
array([4., 3., 2.])
>>> np.array_equal(np.asarray(S), np.hstack([np.ones((3, 1)), -np.eye(3)]))
True
>>> np.allclose(SubtractionPinv(4) @ (S @ np.arange(4.0)), Centring(4) @ np.arange(4.0))
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "AxisOperator",
    "Centring",
    "Identity",
    "IntegerCentring",
    "StructuredMatrix",
    "Subtraction",
    "SubtractionPinv",
    "dense",
]


@runtime_checkable
class AxisOperator(Protocol):
    """A linear map ``R^n → R^m`` that multiplies along one axis of a tensor without being stored
    as an ``m × n`` array (a Kronecker factor of :func:`~dpmatrix._linalg.kron.kron_apply`)."""

    @property
    def shape(self) -> tuple[int, int]: ...

    def apply(self, tensor: Any, axis: int) -> np.ndarray: ...

    def toarray(self) -> np.ndarray: ...


def _as_numeric(x: Any) -> np.ndarray:
    """``x`` as an array that keeps exact dtypes (``object``: Python integers/fractions) and
    turns integers/booleans into floats, like a product with a float matrix does."""
    a = np.asarray(x)
    if a.dtype == object or a.dtype.kind in "fc":
        return a
    return a.astype(float)


def _check_axis(op: StructuredMatrix, x: np.ndarray, axis: int) -> int:
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} out of range for a tensor with {x.ndim} axes")
    axis %= x.ndim
    if x.shape[axis] != op.shape[1]:
        raise ValueError(f"{op!r} of shape {op.shape} cannot act on an axis of length {x.shape[axis]}")
    return axis


def _along(axis: int, part: slice) -> tuple[slice, ...]:
    """The index that takes ``part`` of ``axis`` and all of the axes before it."""
    return (slice(None),) * axis + (part,)


class StructuredMatrix:
    """Base of the structured matrices: the dense-matrix interface, through :meth:`apply`.

    Subclasses define ``shape``, ``_apply(x, axis)`` (multiply along ``axis``) and
    ``_rapply(x, axis)`` (multiply by the transpose) and :meth:`toarray`.
    """

    ndim = 2
    dtype = np.dtype(float)
    shape: tuple[int, int]
    __array_priority__ = 1000  # ``ndarray @ M`` defers to ``M.__rmatmul__``

    # -- the operator --------------------------------------------------------------------------
    def apply(self, tensor: Any, axis: int = 0) -> np.ndarray:
        """``M`` applied along ``axis`` of ``tensor`` (length ``shape[1]`` → ``shape[0]``)."""
        x = self._operand(tensor)
        return self._apply(x, _check_axis(self, x, axis))

    def _operand(self, tensor: Any) -> np.ndarray:
        """``tensor`` as the array :meth:`apply` multiplies (floats unless exact; see
        :func:`_as_numeric`); exact integer matrices keep integer dtypes."""
        return _as_numeric(tensor)

    def rapply(self, tensor: Any, axis: int = 0) -> np.ndarray:
        """``Mᵀ`` applied along ``axis`` of ``tensor`` (length ``shape[0]`` → ``shape[1]``)."""
        x = _as_numeric(tensor)
        return self.T._apply(x, _check_axis(self.T, x, axis))

    def _apply(self, x: np.ndarray, axis: int) -> np.ndarray:
        raise NotImplementedError

    def _rapply(self, x: np.ndarray, axis: int) -> np.ndarray:
        raise NotImplementedError

    def toarray(self) -> np.ndarray:
        """The dense matrix (``shape[0] × shape[1]`` floats): for small domains and tests."""
        return self._apply(np.eye(self.shape[1]), 0)

    def diagonal(self) -> np.ndarray:
        """The main diagonal (length ``min(shape)``)."""
        return np.diagonal(self.toarray()).copy()

    @property
    def T(self) -> StructuredMatrix:
        return _Transpose(self)

    @property
    def size(self) -> int:
        return int(self.shape[0]) * int(self.shape[1])

    # -- LinearOperator-like names ---------------------------------------------------------------
    def matvec(self, x: Any) -> np.ndarray:
        return self.apply(x, 0)

    def rmatvec(self, y: Any) -> np.ndarray:
        return self.rapply(y, 0)

    def matmat(self, X: Any) -> np.ndarray:
        return self.apply(X, 0)

    # -- operators ---------------------------------------------------------------------------------
    def __matmul__(self, other: Any) -> Any:
        if isinstance(other, StructuredMatrix):
            return _Product(self, other)
        a = np.asarray(other)
        if a.ndim not in (1, 2):
            return NotImplemented
        return self.apply(a, 0)

    def __rmatmul__(self, other: Any) -> Any:
        a = np.asarray(other)
        if a.ndim not in (1, 2):
            return NotImplemented
        return self.rapply(a, a.ndim - 1)

    def __mul__(self, c: Any) -> StructuredMatrix:
        if not np.isscalar(c):
            return NotImplemented
        return _Scaled(self, float(c))

    __rmul__ = __mul__

    def __truediv__(self, c: Any) -> StructuredMatrix:
        if not np.isscalar(c):
            return NotImplemented
        return _Scaled(self, 1.0 / float(c))

    def __neg__(self) -> StructuredMatrix:
        return _Scaled(self, -1.0)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.toarray()
        return out if dtype is None else out.astype(dtype)


@dataclass(frozen=True, eq=True, repr=False)
class _OfSize(StructuredMatrix):
    """A structured matrix of a plain attribute of size ``n``: ``(n − r) × (n − c)`` with
    ``(r, c) = _short`` (square unless a subclass says otherwise), shown as ``Name(n)``."""

    n: int
    _short: ClassVar[tuple[int, int]] = (0, 0)

    @property
    def shape(self) -> tuple[int, int]:  # type: ignore[override]
        return (self.n - self._short[0], self.n - self._short[1])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.n})"


@dataclass(frozen=True, eq=True, repr=False)
class _SymmetricOfSize(_OfSize):
    """A symmetric ``n × n`` structured matrix: its own transpose."""

    @property
    def T(self) -> StructuredMatrix:
        return self


@dataclass(frozen=True, eq=True, repr=False)
class Identity(_SymmetricOfSize):
    """``I_n``: the workload and the strategy of a plain attribute."""

    def _apply(self, x: np.ndarray, axis: int) -> np.ndarray:
        return x.copy()

    def toarray(self) -> np.ndarray:
        return np.eye(self.n)

    def diagonal(self) -> np.ndarray:
        return np.ones(self.n)


@dataclass(frozen=True, eq=True, repr=False)
class Subtraction(_OfSize):
    """ResidualPlanner's ``Sub_n = [1 | −I_{n−1}]`` (``(n−1) × n``, §4.2): ``x_0 − x_{i+1}``."""

    _short: ClassVar[tuple[int, int]] = (1, 0)

    def _apply(self, x: np.ndarray, axis: int) -> np.ndarray:
        return np.subtract(x[_along(axis, slice(0, 1))], x[_along(axis, slice(1, None))])

    def _rapply(self, x: np.ndarray, axis: int) -> np.ndarray:
        # Sub_nᵀ y = [Σ y; −y]
        out = np.concatenate([x.sum(axis=axis, keepdims=True), -x], axis=axis)
        return out

    def toarray(self) -> np.ndarray:
        return np.hstack([np.ones((self.n - 1, 1)), -np.eye(self.n - 1)])


@dataclass(frozen=True, eq=True, repr=False)
class SubtractionPinv(_OfSize):
    """``Sub_n⁺ = (1/n) [1ᵀ; 11ᵀ − n I]`` (``n × (n−1)``): ``[s/n; (s − n y_i)/n]``, ``s = Σ y``."""

    _short: ClassVar[tuple[int, int]] = (0, 1)

    def _apply(self, x: np.ndarray, axis: int) -> np.ndarray:
        shape = x.shape
        if self.n == 1:  # an empty residual: Sub⁺ is the 1 × 0 zero matrix
            return np.zeros(shape[:axis] + (1,) + shape[axis + 1 :], dtype=x.dtype)
        n = float(self.n)
        res = np.empty(shape[:axis] + (self.n,) + shape[axis + 1 :], dtype=x.dtype)
        first = res[_along(axis, slice(0, 1))]
        np.sum(x, axis=axis, keepdims=True, out=first)
        tail = res[_along(axis, slice(1, None))]
        np.multiply(x, -n, out=tail)
        tail += first
        res /= n
        return res

    def _rapply(self, x: np.ndarray, axis: int) -> np.ndarray:
        # (Sub_n⁺)ᵀ x = (Σ x − n x_{i+1}) / n
        s = x.sum(axis=axis, keepdims=True)
        return (s - self.n * x[_along(axis, slice(1, None))]) / self.n

    def toarray(self) -> np.ndarray:
        if self.n == 1:
            return np.zeros((1, 0))
        top = np.ones((1, self.n - 1))
        bottom = np.ones((self.n - 1, self.n - 1)) - self.n * np.eye(self.n - 1)
        return np.vstack([top, bottom]) / self.n


@dataclass(frozen=True, eq=True, repr=False)
class Centring(_SymmetricOfSize):
    """The centring projection ``K_n = I − 11ᵀ/n`` (symmetric): ``x − mean(x)``."""

    def _apply(self, x: np.ndarray, axis: int) -> np.ndarray:
        return x - x.sum(axis=axis, keepdims=True) / self.n

    def toarray(self) -> np.ndarray:
        return np.eye(self.n) - 1.0 / self.n

    def diagonal(self) -> np.ndarray:
        return np.full(self.n, (self.n - 1) / self.n)


@dataclass(frozen=True, eq=True, repr=False)
class IntegerCentring(_SymmetricOfSize):
    """``H_n = n I − 11ᵀ = n K_n`` (symmetric): ``n x − Σ x``, exact on integer tensors (``int64``
    and Python-integer ``object`` arrays keep their dtype). The integer query of ResidualPlanner's
    discrete mechanism (Algorithm 3); the facts exact integer arithmetic needs are closed forms:
    every column has squared norm ``(n−1)² + (n−1) = n(n−1)`` and ``n`` non-zeros (``n ≥ 2``),
    every row absolute sum ``2(n−1)``, the largest entry ``n−1``."""

    def _operand(self, tensor: Any) -> np.ndarray:
        x = np.asarray(tensor)
        return x.astype(np.int64) if x.dtype.kind == "b" else x

    def _apply(self, x: np.ndarray, axis: int) -> np.ndarray:
        return _centre_in_place(np.array(x, copy=True), axis)

    @staticmethod
    def apply_last_axes(tensor: Any, k: int, *, inplace: bool = False) -> np.ndarray:
        """``(⊗_i H_{n_i}) v``: every one of the last ``k`` axes of an integer tensor centred
        (``n_i`` its length; leading axes are a batch), exact in ``int64`` — the same integers as
        :func:`~dpmatrix._linalg.kron.kron_apply` with one ``IntegerCentring(n_i)`` per axis,
        without a temporary per axis.

        Parameters
        ----------
        tensor : array of integers
        k : int
            How many trailing axes to centre.
        inplace : bool, keyword-only
            Overwrite ``tensor`` (an ``int64`` array the caller owns) instead of copying it.

        Returns
        -------
        numpy.ndarray
            ``int64``.

        Examples
        --------
        >>> IntegerCentring.apply_last_axes(np.array([[1, 2], [3, 4]]), 2).tolist()
        [[0, 0], [0, 0]]
        >>> IntegerCentring.apply_last_axes(np.array([[1, 2, 6]]), 1).tolist()  # 3x − 9
        [[-6, -3, 9]]
        """
        x = np.asarray(tensor)
        out = x if inplace and x.dtype == np.int64 else np.array(x, dtype=np.int64)
        for axis in range(out.ndim - k, out.ndim):
            _centre_in_place(out, axis)
        return out

    def toarray(self) -> np.ndarray:
        return self.n * np.eye(self.n) - 1.0

    def diagonal(self) -> np.ndarray:
        return np.full(self.n, float(self.n - 1))

    def max_column_norm_squared(self) -> int:
        return self.n * (self.n - 1)

    def max_column_support(self) -> int:
        return self.n if self.n > 1 else 0

    def max_abs_entry(self) -> int:
        return self.n - 1

    def max_row_abs_sum(self) -> int:
        return 2 * (self.n - 1)

    def row(self, r: int) -> np.ndarray:
        """Row ``r`` as Python integers (an ``object`` array: exact in any product)."""
        out = np.full(self.n, -1, dtype=object)
        out[r] = self.n - 1
        return out

    def abs(self) -> _AbsIntegerCentring:
        """``|H_n|`` entrywise: ``n − 1`` on the diagonal, ``1`` elsewhere."""
        return _AbsIntegerCentring(self.n)


def _centre_in_place(x: np.ndarray, axis: int) -> np.ndarray:
    """``H_n`` along ``axis`` (``n`` its length), overwriting ``x``: ``n x − Σ x``, the sum taken
    before the scaling; returns ``x``."""
    total = x.sum(axis=axis, keepdims=True)
    x *= x.shape[axis]
    x -= total
    return x


@dataclass(frozen=True, eq=True, repr=False)
class _AbsIntegerCentring(_SymmetricOfSize):
    """``|n I − 11ᵀ|``: ``(n − 2) x + Σ x`` (exact on integers)."""

    def _operand(self, tensor: Any) -> np.ndarray:
        return np.asarray(tensor)

    def _apply(self, x: np.ndarray, axis: int) -> np.ndarray:
        return x * (self.n - 2) + x.sum(axis=axis, keepdims=True)

    def toarray(self) -> np.ndarray:
        return np.abs(self.n * np.eye(self.n) - 1.0)

    def __repr__(self) -> str:
        return f"|IntegerCentring({self.n})|"


@dataclass(frozen=True, eq=True, repr=False)
class _Transpose(StructuredMatrix):
    base: StructuredMatrix

    @property
    def shape(self) -> tuple[int, int]:  # type: ignore[override]
        return (self.base.shape[1], self.base.shape[0])

    @property
    def T(self) -> StructuredMatrix:
        return self.base

    def _apply(self, x: np.ndarray, axis: int) -> np.ndarray:
        return self.base._rapply(x, axis)

    def _rapply(self, x: np.ndarray, axis: int) -> np.ndarray:
        return self.base._apply(x, axis)

    def toarray(self) -> np.ndarray:
        return self.base.toarray().T.copy()

    def diagonal(self) -> np.ndarray:
        return self.base.diagonal()

    def __repr__(self) -> str:
        return f"{self.base!r}.T"


@dataclass(frozen=True, eq=True, repr=False)
class _Scaled(StructuredMatrix):
    base: StructuredMatrix
    c: float

    @property
    def shape(self) -> tuple[int, int]:  # type: ignore[override]
        return self.base.shape

    @property
    def T(self) -> StructuredMatrix:
        return _Scaled(self.base.T, self.c)

    def _apply(self, x: np.ndarray, axis: int) -> np.ndarray:
        return self.base._apply(x, axis) * self.c

    def _rapply(self, x: np.ndarray, axis: int) -> np.ndarray:
        return self.base._rapply(x, axis) * self.c

    def toarray(self) -> np.ndarray:
        return self.base.toarray() * self.c

    def diagonal(self) -> np.ndarray:
        return self.base.diagonal() * self.c

    def __repr__(self) -> str:
        return f"{self.c!r} * {self.base!r}"


@dataclass(frozen=True, eq=True, repr=False)
class _Product(StructuredMatrix):
    left: StructuredMatrix
    right: StructuredMatrix

    def __post_init__(self) -> None:
        if self.left.shape[1] != self.right.shape[0]:
            raise ValueError(f"shapes {self.left.shape} and {self.right.shape} do not align")

    @property
    def shape(self) -> tuple[int, int]:  # type: ignore[override]
        return (self.left.shape[0], self.right.shape[1])

    @property
    def T(self) -> StructuredMatrix:
        return _Product(self.right.T, self.left.T)

    def _apply(self, x: np.ndarray, axis: int) -> np.ndarray:
        return self.left._apply(self.right._apply(x, axis), axis)

    def _rapply(self, x: np.ndarray, axis: int) -> np.ndarray:
        return self.right._rapply(self.left._rapply(x, axis), axis)

    def __repr__(self) -> str:
        return f"({self.left!r} @ {self.right!r})"


def dense(M: Any) -> np.ndarray:
    """``M`` as a dense float array (a :class:`StructuredMatrix` is expanded: small domains only).

    Examples
    --------
    >>> dense(Centring(2))
    array([[ 0.5, -0.5],
           [-0.5,  0.5]])
    """
    if isinstance(M, StructuredMatrix):
        return M.toarray()
    return np.asarray(M, dtype=float)

