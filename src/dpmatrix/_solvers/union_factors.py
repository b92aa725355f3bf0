"""Factors of a union of p-Identity products optimized against the joint GLS (total variance).

Each attribute ``i`` of the union keeps ONE p-Identity factor ``Ã_i = [I; Θ_i] diag(1/s)``
(``s = 1 + colsum Θ_i``, columns of L1 norm 1; :mod:`dpmatrix._solvers.pidentity`) shared by every
product on it, so the joint GLS stays simultaneously diagonal
(:func:`~dpmatrix._solvers.union_split.kron_union_model`). Read alone, a product's factors are
optimal for their own attribute's queries; in the union, the other products already tell part of
what an attribute's queries need (the products that sum the attribute out measure its total;
products on other attributes share the rest), so the best factor for the joint GLS differs.

Alternating rounds: for each attribute with non-cell queries, L-BFGS-B on ``Θ_i ≥ 0`` minimizes
the exact joint total ``tr(G P(ε)⁺)`` at the current budgets (gradient: ``∂/∂B_i`` from
:meth:`~dpmatrix._solvers.union_split.KronUnionModel.gram_gradient`, then
``∂/∂Ã = 2Ã ∂/∂B`` and the column normalization), then the budgets are re-split
(:func:`~dpmatrix._solvers.union_split.optimize_union_split`). A round's result is kept only if it
lowers the total (never worse than the start), and everything is deterministic. An attribute
whose factor is the plain cells starts from a faint total row (``Θ = 10⁻³·1ᵀ``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from ..errors import PlanError
from .union_split import KronUnionModel, kron_union_model, optimize_union_split

__all__ = ["UnionFactors", "normalized_gram", "optimize_union_factors", "theta_gradient"]


def normalized_gram(theta: np.ndarray) -> np.ndarray:
    """``ÃᵀÃ`` of ``Ã = [I; Θ] diag(1/s)``, ``s = 1 + colsum Θ`` (columns of L1 norm 1).

    Examples
    --------
    >>> normalized_gram(np.ones((1, 2))).tolist()
    [[0.5, 0.25], [0.25, 0.5]]
    """
    theta = np.asarray(theta, dtype=float)
    a = np.vstack([np.eye(theta.shape[1]), theta]) / (1.0 + theta.sum(axis=0))
    return a.T @ a


def theta_gradient(theta: np.ndarray, grad_b: np.ndarray) -> np.ndarray:
    """``∂f/∂Θ`` from ``F = ∂f/∂B`` (symmetric), ``B = ÃᵀÃ``: ``∂f/∂Ã = 2ÃF``; with
    ``Ã = A₀ diag(1/s)``, ``∂f/∂A₀ = (∂f/∂Ã) diag(1/s)`` and ``∂f/∂s_j = -Σ_r (∂f/∂Ã)_rj A₀_rj / s_j²``,
    and ``Θ_kj`` enters ``A₀`` (row ``n + k``) and ``s_j``.

    Examples
    --------
    >>> theta_gradient(np.ones((1, 3)), np.zeros((3, 3))).shape
    (1, 3)
    """
    theta = np.asarray(theta, dtype=float)
    n = theta.shape[1]
    s = 1.0 + theta.sum(axis=0)
    a0 = np.vstack([np.eye(n), theta])
    g_at = 2.0 * (a0 / s) @ grad_b
    g_a0 = g_at / s
    g_s = -(g_at * a0).sum(axis=0) / s**2
    return g_a0[n:] + g_s[None, :]


@dataclass(frozen=True, eq=False)
class UnionFactors:
    """The factors (``{axis: Θ}``), budgets and joint total after the alternating rounds, the
    start's total, and one log line per accepted or refused step."""

    thetas: dict
    eta: np.ndarray
    objective: float
    start_objective: float
    log: tuple


def _model(shape, thetas, product_axes, marginals) -> KronUnionModel:
    grams = {ax: normalized_gram(th) for ax, th in thetas.items()}
    m = kron_union_model(shape, [{a: grams[a] for a in axes} for axes in product_axes], marginals)
    if m is None:  # pragma: no cover - one Gram per axis by construction
        raise PlanError("the union's factors are not one per attribute")
    return m


def optimize_union_factors(
    shape: Sequence[int],
    thetas: Mapping[int, np.ndarray],
    product_axes: Sequence[Sequence[int]],
    marginals: Sequence[tuple[float, Mapping[int, np.ndarray]]],
    eta: np.ndarray,
    epsilon: float,
    *,
    free: Sequence[int] | None = None,
    rounds: int = 2,
    maxiter: int = 100,
) -> UnionFactors:
    """Alternate factor and budget steps against the exact joint total (module doc).

    Parameters
    ----------
    shape : sequence of int
    thetas : mapping
        ``{axis: Θ}`` for every axis of the union (``(0, n)`` arrays for plain cells).
    product_axes : sequence of sequence of int
        The axes of each product.
    marginals : sequence of (float, mapping)
        Weight and ``{axis: Q}`` of each workload marginal (as :func:`kron_union_model`).
    eta : ndarray
        Starting budgets (one per product, ``Σ = epsilon``; zeros allowed where the rest answers).
    epsilon : float
    free : sequence of int, keyword-only
        The axes whose factors may change (default: all).
    rounds, maxiter : int, keyword-only

    Returns
    -------
    UnionFactors

    Examples
    --------
    >>> q = np.tril(np.ones((6, 6)))
    >>> r = optimize_union_factors((6, 2), {0: np.zeros((0, 6)), 1: np.zeros((0, 2))}, [(0,), (0, 1)],
    ...                            [(1.0, {0: q}), (1.0, {0: q, 1: np.eye(2)})], np.array([0.5, 0.5]), 1.0,
    ...                            free=[0], rounds=1)
    >>> bool(r.objective <= r.start_objective)
    True
    """
    shape = tuple(int(n) for n in shape)
    cur = {ax: np.asarray(th, dtype=float) for ax, th in thetas.items()}
    axes = [tuple(a) for a in product_axes]
    eta = np.asarray(eta, dtype=float)
    best = _model(shape, cur, axes, marginals).total(eta)
    start, log = best, []
    for rnd in range(rounds):
        improved = False
        for ax in (range(len(shape)) if free is None else free):
            th0 = cur[ax] if cur[ax].shape[0] else np.full((1, shape[ax]), 1e-3)
            p = th0.shape

            def fun(z, ax=ax, p=p):
                th = np.maximum(z.reshape(p), 0.0)
                trial = dict(cur)
                trial[ax] = th
                m = _model(shape, trial, axes, marginals)
                f = m.total(eta)
                g = theta_gradient(th, m.gram_gradient(eta, ax))
                return float(np.log(f)), (g / f).ravel()

            res = minimize(fun, th0.ravel(), jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * th0.size,
                           options={"maxiter": maxiter, "ftol": 1e-12, "gtol": 1e-9})
            trial = dict(cur)
            trial[ax] = np.maximum(res.x.reshape(p), 0.0)
            model = _model(shape, trial, axes, marginals)
            split = optimize_union_split(model, np.maximum(eta, 1e-6 * float(epsilon)), epsilon)
            val = min(split.objective, model.total(eta))
            new_eta = split.eta if split.objective <= model.total(eta) else eta
            if val < best * (1 - 1e-9):
                log.append(f"round {rnd} axis {ax}: {best:.9g} -> {val:.9g}")
                cur, eta, best, improved = trial, new_eta, val, True
            else:
                log.append(f"round {rnd} axis {ax}: no gain ({val:.9g})")
        if not improved:
            break
    return UnionFactors(cur, eta, best, start, tuple(log))
