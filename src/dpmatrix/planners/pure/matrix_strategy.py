"""A user's explicit strategy matrix under pure ε-DP (small domains only; explicit by request).

The strategy ``S`` (``m × N`` on the full domain, C order) must have integer rows after an exact
per-row rescaling (a row ``r`` with entries ``c·k_j``, ``k_j`` integers, is replaced by ``k``; the
noise is added to integer answers — real-valued rows that do not rescale are refused by name).
Budgets: program (1)–(3) of Cormode et al. with the least-squares recovery ``R = Q S⁺``
(``b_r = 2 Σ_q w_q R_qr²``) solved by :func:`dpmatrix.solvers.budget_split.convex_budget_split`
(``budgeting="optimal"``) or one budget ``ε / max_j Σ_r |S_rj|`` for every row (``"uniform"``).
Recovery is GLS with the exact discrete Laplace variances; the workload must lie in ``S``'s
row space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import numpy as np

from ...errors import PlanError, WorkloadError
from ...solvers.budget_split import convex_budget_split
from ...workload import Workload
from .plan import check_epsilon
from ...mechanisms.laplace import dyadic_floor, discrete_laplace_variance, sample_discrete_laplace_eps

__all__ = ["MatrixPurePlan", "plan_pure_matrix", "integer_rows"]


def integer_rows(strategy: np.ndarray, *, tol: float = 1e-12, max_den: int = 4096) -> np.ndarray:
    """Rescale each row exactly to integers with no common factor, or raise :class:`PlanError`.

    A row is accepted when every entry is, within ``tol`` (relative), a multiple of one common
    rational step with denominator ``≤ max_den`` after dividing by the row's smallest non-zero
    magnitude; the integers must stay below ``2³¹``.

    Examples
    --------
    >>> integer_rows(np.array([[0.5, 0.5, 0.0], [1.0, -1.0, 2.0]]))
    array([[ 1,  1,  0],
           [ 1, -1,  2]])
    """
    s = np.asarray(strategy, dtype=float)
    out = np.zeros(s.shape, dtype=np.int64)
    for r, row in enumerate(s):
        nz = row[np.abs(row) > tol]
        if nz.size == 0:
            raise PlanError(f"strategy row {r} is zero; drop it")
        unit = float(np.abs(nz).min())
        rel = row / unit
        fr = [Fraction(float(v)).limit_denominator(max_den) for v in rel]
        if max(abs(float(f) - v) for f, v in zip(fr, rel)) > tol * max(1.0, np.abs(rel).max()):
            raise PlanError(
                f"strategy row {r} has real-valued entries that do not rescale to integers; pure-DP "
                "noise is added to integer answers only (no floating-point Laplace): give integer rows"
            )
        den = math.lcm(*[f.denominator for f in fr])
        ints = [int(f * den) for f in fr]
        g = math.gcd(*ints)
        ints = [v // g for v in ints]
        if max(abs(v) for v in ints) >= 2**31:
            raise PlanError(f"strategy row {r} rescales to integers beyond 2**31; simplify it")
        out[r] = ints
    return out


@dataclass(frozen=True)
class MatrixPurePlan:
    """Explicit pure-DP plan: integer strategy rows, per-row budgets, GLS variances."""

    workload: Workload
    epsilon: float
    strategy_matrix: np.ndarray
    budgets: tuple[Fraction, ...]
    budgeting: str

    def lower_bound(self) -> None:
        """``None``: the singular value bound applies to Gaussian plans only (see
        :meth:`dpmatrix.planners.pure.plan.PurePlan.lower_bound`)."""
        return None

    def optimality_ratio(self) -> None:
        """``None``: not applicable to pure ε-DP plans."""
        return None

    @cached_property
    def noise_variance(self) -> np.ndarray:
        return discrete_laplace_variance(np.array([float(b) for b in self.budgets]))

    @cached_property
    def _q(self) -> dict:
        return {tuple(a): _marginal_matrix(self.workload.domain.sizes, tuple(a)) for a in self.workload.sets}

    @cached_property
    def _cov_x(self) -> np.ndarray:
        s = self.strategy_matrix.astype(float)
        p = np.where(np.isfinite(self.noise_variance), 1.0 / self.noise_variance, 0.0)
        return np.linalg.pinv(s.T @ (p[:, None] * s), hermitian=True)

    def covariance(self, attrs) -> np.ndarray:
        a = tuple(sorted(self.workload.domain.resolve(attrs)))
        q = _marginal_matrix(self.workload.domain.sizes, a)
        return q @ self._cov_x @ q.T

    def variance(self, attrs) -> np.ndarray:
        return np.diag(self.covariance(attrs)).copy()

    def total_variance(self) -> float:
        return float(sum(w * self.variance(a).sum() for w, a in zip(self.workload.weights, self.workload.sets)))

    def max_variance(self) -> float:
        return float(max(self.variance(a).max() for w, a in zip(self.workload.weights, self.workload.sets) if w > 0))

    def privacy_epsilon(self) -> Fraction:
        cols = np.abs(self.strategy_matrix)
        return max(sum((int(cols[r, j]) * b for r, b in enumerate(self.budgets)), Fraction(0))
                   for j in range(cols.shape[1]))

    def measure(self, x: np.ndarray, *, rng=None) -> np.ndarray:
        """Noisy ``S x + DLap(ε_r)`` for the full integer data vector ``x`` (length ``N``)."""
        x = np.asarray(x)
        exact = self.strategy_matrix @ x.astype(np.int64)
        noise = np.array([sample_discrete_laplace_eps(b, 1, rng)[0] if b > 0 else 0 for b in self.budgets])
        return exact + noise

    def marginal(self, y: np.ndarray, attrs) -> np.ndarray:
        a = tuple(sorted(self.workload.domain.resolve(attrs)))
        s = self.strategy_matrix.astype(float)
        p = np.where(np.isfinite(self.noise_variance), 1.0 / self.noise_variance, 0.0)
        xhat = self._cov_x @ (s.T @ (p * np.asarray(y, dtype=float)))
        return (_marginal_matrix(self.workload.domain.sizes, a) @ xhat).reshape(
            tuple(self.workload.domain.sizes[i] for i in a))


def _marginal_matrix(sizes, attrs) -> np.ndarray:
    out = np.ones((1, 1))
    for i, n in enumerate(sizes):
        out = np.kron(out, np.eye(n) if i in attrs else np.ones((1, n)))
    return out


def plan_pure_matrix(
    workload: Workload, epsilon: float, strategy: np.ndarray, *, budgeting: str = "optimal",
    max_cells: int = 4096,
) -> MatrixPurePlan:
    """Plan a pure ε-DP release with a user strategy matrix on the full (small) domain.

    Parameters
    ----------
    workload : Workload
    epsilon : float
    strategy : array_like, shape (m, N)
        Rows on the full domain (C order, attribute 0 slowest).
    budgeting : {"optimal", "uniform"}, keyword-only
    max_cells : int, keyword-only
        Refuse domains with more cells (everything here is dense).

    Returns
    -------
    MatrixPurePlan
    """

    eps = check_epsilon(epsilon)
    n = math.prod(workload.domain.sizes)
    if n > max_cells:
        raise PlanError(f"explicit strategy matrices need a domain of at most {max_cells} cells, got {n}")
    s = np.asarray(strategy)
    if s.ndim != 2 or s.shape[1] != n:
        raise PlanError(f"the strategy matrix must have {n} columns (the full domain), got shape {s.shape}")
    if not np.all(np.isfinite(s.astype(float))):
        raise PlanError("the strategy matrix has NaN or infinite entries")
    si = integer_rows(s)
    q = np.vstack([_marginal_matrix(workload.domain.sizes, tuple(a)) for a in workload.sets])
    sf = si.astype(float)
    if not np.allclose(q @ np.linalg.pinv(sf) @ sf, q, atol=1e-8):
        raise WorkloadError("the strategy cannot answer the workload: a workload row is not in its row space")
    cols = np.abs(si).sum(axis=0)
    if budgeting == "uniform":
        eta = np.full(si.shape[0], eps / cols.max())
    elif budgeting == "optimal":
        r = q @ np.linalg.pinv(sf)
        w = np.concatenate([np.full(workload.domain.cells(a), wt) for a, wt in zip(workload.sets, workload.weights)])
        b = 2 * (w[:, None] * r**2).sum(axis=0)
        eta = convex_budget_split(np.abs(si), b, eps).eta
    else:
        raise PlanError(f"budgeting must be 'optimal' or 'uniform', got {budgeting!r}")
    # dyadic budgets rounded down, then the column sums are checked in exact arithmetic
    budgets = tuple(dyadic_floor(float(e)) for e in eta)
    plan = MatrixPurePlan(workload, eps, si, budgets, budgeting)
    for _ in range(64):
        if plan.privacy_epsilon() <= Fraction(eps):
            return plan
        budgets = tuple(dyadic_floor(float(b) * (1 - 2.0**-30)) for b in budgets)
        plan = MatrixPurePlan(workload, eps, si, budgets, budgeting)
    raise PlanError("could not round the budgets to rationals within epsilon")  # pragma: no cover
