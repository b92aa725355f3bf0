r"""An explicit strategy's eigendecomposition written with its plan, and checked — not recomputed — when read.

Least squares with a ``k × N`` strategy ``A`` needs ``(AᵀA)⁺``: the plan keeps ``V`` (``N × r``,
an orthonormal basis of the row space of ``A``) and ``λ`` (the ``r`` eigenvalues of ``AᵀA``
above ``tol·λ_max``), so ``(AᵀA)⁺ = V diag(λ)⁻¹ Vᵀ`` (Li & Miklau §2.3). Computing them is a
symmetric eigendecomposition, ``O(N³)``: about a second for ``N = 1000``. A plan file stores
them (exact float64, :mod:`dpmatrix._jsonarray`) and reading checks, in ``O((kN + Nr)·p)``,
that they are what the strategy gives — by Freivalds' method (*Probabilistic machines can use
less running time*, IFIP 1977): with ``p`` random Gaussian probe matrices ``W`` (``r × p``)
and ``Z`` (``N × p``), drawn from the OS's entropy so that whoever wrote the file cannot
anticipate them,

1. orthonormal columns:  ``‖Vᵀ(V W) − W‖ ≤ τ ‖W‖``;
2. eigenpairs:           ``‖Aᵀ(A V W) − V diag(λ) W‖ ≤ τ λ_max ‖W‖``;
3. nothing left out:     ``‖A (Z − V VᵀZ)‖ ≤ (√(tol·λ_max) + τ √λ_max) ‖Z‖`` (``A`` vanishes, to
   the kept-eigenvalue threshold, on the complement of ``V``), and every ``λ_i > tol·λ_max``.

Together they say ``AᵀA = V diag(λ) Vᵀ`` up to the eigensolver's own threshold, so the
pseudo-inverse read back is the one the solve produced; an edited ``V`` or ``λ`` fails one of
them (a non-zero error matrix ``E`` has ``E W = 0`` with probability 0 for Gaussian ``W``)
and is refused with :class:`~dpmatrix.PlanError`. The privacy cost is never read: it is
recomputed from ``A`` itself (``‖A‖²_{1→2} / σ²``, :class:`.plan.ExplicitStrategyPlan`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._jsonarray import array_from_json, array_to_json
from ...errors import PlanError

__all__ = ["PROBES", "TOL", "checked_eig", "eig_to_dict"]

#: random probe vectors of each check
PROBES = 8
#: relative tolerance of the checks (LAPACK's residuals: ~1e-15 for N = 1,000, at most ~N·ε)
TOL = 1e-10


def eig_to_dict(V: np.ndarray, lam: np.ndarray) -> dict[str, Any]:
    """``{"eigenvectors": V, "eigenvalues": λ}`` as stored arrays."""
    return {"eigenvectors": array_to_json(V), "eigenvalues": array_to_json(lam)}


def _refuse(why: str) -> PlanError:
    return PlanError(f"the stored eigendecomposition of the explicit strategy {why}: the plan file was edited "
                     "or corrupted; refusing it (plan again, or restore the file)")


def checked_eig(A: np.ndarray, d: Any, eig_tol: float, rng: np.random.Generator | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(V, λ)`` read from ``d`` (:func:`eig_to_dict`) and checked against the strategy ``A``
    (module docstring); :class:`~dpmatrix.PlanError` if any check fails.

    Parameters
    ----------
    A : numpy.ndarray
        The ``k × N`` strategy.
    d : dict
        The stored eigendecomposition.
    eig_tol : float
        Relative threshold below which eigenvalues of ``AᵀA`` were dropped.
    rng : numpy.random.Generator, optional
        Source of the probes (default: a generator seeded from the OS's entropy).

    Returns
    -------
    (V, λ) : read-only arrays

    Examples
    --------
    >>> A = np.array([[1.0, 1.0], [1.0, -1.0]])
    >>> V, lam = checked_eig(A, eig_to_dict(np.eye(2), np.array([2.0, 2.0])), 1e-10)
    >>> checked_eig(A, eig_to_dict(np.eye(2), np.array([2.0, 3.0])), 1e-10)
    Traceback (most recent call last):
    ...
    dpmatrix.errors.PlanError: the stored eigendecomposition of the explicit strategy does not satisfy AᵀA V = V diag(λ): the plan file was edited or corrupted; refusing it (plan again, or restore the file)
    """
    if not isinstance(d, dict):
        raise _refuse("is missing")
    V = array_from_json(d.get("eigenvectors"), PlanError, "the stored eigenvectors of the explicit strategy")
    lam = array_from_json(d.get("eigenvalues"), PlanError, "the stored eigenvalues of the explicit strategy")
    N = A.shape[1]
    if V.ndim != 2 or V.shape[0] != N or lam.shape != (V.shape[1],) or lam.size == 0:
        raise _refuse(f"has the wrong shape (eigenvectors {list(V.shape)}, eigenvalues {list(lam.shape)}, "
                      f"for {N} cells)")
    if not (np.all(np.isfinite(V)) and np.all(np.isfinite(lam))):
        raise _refuse("is not finite")
    top = float(np.max(lam))
    if not top > 0 or np.any(lam <= eig_tol * top):
        raise _refuse("keeps an eigenvalue at or below the threshold")
    rng = np.random.default_rng() if rng is None else rng
    W = rng.standard_normal((lam.size, PROBES))
    VW = V @ W
    nW = float(np.linalg.norm(W))
    if float(np.linalg.norm(V.T @ VW - W)) > TOL * nW:
        raise _refuse("does not have orthonormal eigenvectors")
    if float(np.linalg.norm(A.T @ (A @ VW) - V @ (lam[:, None] * W))) > TOL * top * nW:
        raise _refuse("does not satisfy AᵀA V = V diag(λ)")
    Z = rng.standard_normal((N, PROBES))
    off = A @ (Z - V @ (V.T @ Z))
    if float(np.linalg.norm(off)) > (math.sqrt(eig_tol * top) + TOL * math.sqrt(top)) * float(np.linalg.norm(Z)):
        raise _refuse("leaves out part of the strategy's row space")
    return V, lam
