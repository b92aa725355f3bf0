"""The general unit of measurement: one linear map on one marginal, plus noise of one family.

Every planner's plan is measured as a list of :class:`LinearMechanism` (the protocol in
:mod:`dpmatrix.planners.base`): mechanism ``j`` releases ::

    ω_j = post_j( L_j(x_{A_j}) + H_j(z_j) )

where ``x_{A_j}`` is the count table of the marginal on the attribute set ``A_j`` (axes in domain
order), ``L_j`` a linear map on it (a dense matrix over the flattened table, or any callable),
``z_j`` noise of one family — i.i.d. standard normal scaled by ``√σ²`` (``"gaussian"``), the
exact discrete Gaussian of variance parameter ``σ̄²`` (``"discrete_gaussian"``, Canonne–Kamath–
Steinke), or the exact discrete Laplace ``P(y) ∝ e^{-ε_g|y|}`` (``"discrete_laplace"``) — and
``H_j`` an optional linear map of the noise (identity: i.i.d. noise on every output; ResidualPlanner's
``Γ`` and WFF's Fourier weights are correlated). ``post_j`` is an optional deterministic
post-processing (e.g. QuerySmasher's map from an integer mechanism back to its own outputs).
Privacy is the plan's business (it chose the scales); this module only states what is run.

Exact discrete noise is added to *integer* outputs of ``L_j`` only (``H_j`` must be the identity):
there is no floating-point Laplace or discrete noise on real-valued rows.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import PlanError

__all__ = ["NOISE_FAMILIES", "LinearMechanism"]

NOISE_FAMILIES = ("gaussian", "discrete_gaussian", "discrete_laplace")


@dataclass(frozen=True, eq=False)
class LinearMechanism:
    """One mechanism ``ω = post(L(x_A) + H(z))`` of a plan (module docstring).

    Parameters
    ----------
    key : hashable
        The mechanism's name in :attr:`Measurements.noisy` (unique within a plan).
    attrs : tuple of int
        Sorted attribute positions ``A`` whose count table ``L`` reads.
    apply : callable
        ``L``: count table (shape ``sizes[A]``) → outputs (any shape).
    noise_shape : tuple of int
        Shape of the noise draw ``z``.
    family : {"gaussian", "discrete_gaussian", "discrete_laplace"}
    scale : float or Fraction
        ``σ²`` of each standard normal draw (gaussian), ``σ̄²`` as a Fraction (discrete
        Gaussian), or ``ε_g`` as a Fraction (discrete Laplace).
    noise_map : callable, optional
        ``H`` applied to the scaled draw; ``None`` is the identity (i.i.d. noise).
    post : callable, optional
        Deterministic post-processing of ``L(x) + H(z)``.
    """

    key: Hashable
    attrs: tuple[int, ...]
    apply: Callable[[np.ndarray], np.ndarray]
    noise_shape: tuple[int, ...]
    family: str
    scale: float | Fraction
    noise_map: Callable[[np.ndarray], np.ndarray] | None = None
    post: Callable[[np.ndarray], np.ndarray] | None = None

    def __post_init__(self) -> None:
        if self.family not in NOISE_FAMILIES:
            raise PlanError(f"noise family must be one of {NOISE_FAMILIES}, got {self.family!r}")
        if self.family != "gaussian" and self.noise_map is not None:
            raise PlanError("exact discrete noise is added independently to integer outputs: no noise_map")

    @classmethod
    def dense(cls, key: Hashable, attrs: tuple[int, ...], matrix: np.ndarray, sigma2: float) -> "LinearMechanism":
        """``ω = A x_A + N(0, σ² I)`` with a dense strategy ``A`` (rows × cells of ``x_A`` in C order).

        Parameters
        ----------
        key : hashable
        attrs : tuple of int
            Sorted attribute positions.
        matrix : numpy.ndarray
            ``A``, shape ``(rows, Π n_i)``.
        sigma2 : float
            Noise variance of every row.

        Returns
        -------
        LinearMechanism

        Examples
        --------
        >>> import numpy as np
        >>> m = LinearMechanism.dense("S", (0,), np.eye(2), 1.0)
        >>> m.apply(np.array([3, 4]))
        array([3., 4.])
        """
        A = np.asarray(matrix, dtype=float)
        if A.ndim != 2:
            raise PlanError(f"a dense strategy must be a matrix, got shape {A.shape}")
        s2 = float(sigma2)
        if not s2 > 0 or not np.isfinite(s2):
            raise PlanError(f"the noise variance must be positive and finite, got {sigma2!r}")
        return cls(key, tuple(attrs), lambda t: A @ np.asarray(t, dtype=float).reshape(-1),
                   (A.shape[0],), "gaussian", s2)

    def signal(self, table: np.ndarray) -> np.ndarray:
        """``L(x_A)``: exact integer arithmetic for the discrete families."""
        t = np.asarray(table)
        if self.family == "gaussian":
            return np.asarray(self.apply(t.astype(float)))
        if t.dtype.kind not in "iu":
            raise PlanError("exact discrete noise needs an integer count table")
        out = np.asarray(self.apply(t.astype(np.int64)))
        if out.dtype.kind not in "iu":
            raise PlanError(f"mechanism {self.key!r}: discrete noise needs integer outputs of the linear map")
        return out
