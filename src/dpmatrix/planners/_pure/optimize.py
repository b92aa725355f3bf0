"""A weighted set of marginals chosen numerically under L1 sensitivity (strategy ``optimized``).

HDMM's marginals template (McKenna et al., VLDB 2018, §6 "OPT_M") adapted to pure ε-DP with
GLS recovery: candidate marginal groups ``A`` (the downward closure of the workload) get budgets
``ε_A = ε θ_A / Σθ`` (so ``Σ_A 1 · ε_A = ε``: each marginal group has column L1 norm 1). With
noise variance ``2/ε_A²`` (continuous model, as in the paper's budgeting) the GLS objective is

    f(θ) = (2 (Σθ)² / ε²) · Σ_B T_B / L_B(θ),   L_B = Σ_{A⊇B} θ_A² / n_A,
    T_B = Σ_{W⊇B} w_W Π_{i∈B}(n_i - 1) / n_W

(the weighted sum of cell variances, :mod:`.subspaces`). ``f`` is scale invariant and *not*
convex in θ (``1/L_B`` is not convex in θ), so — as HDMM does — we run L-BFGS-B from several
starts (the cube-root budgets of ``S = Q``, equal budgets on the closure) and keep the best. The
result is never worse than its best start; the planner starts from the paper's ``Q⁺`` and ``C⁺`` budgets
(with the clustering centroids added to the candidates),
so ``optimized ≤ min(Q⁺, C⁺)`` (continuous model, GLS) holds by construction. Cost per evaluation: one sparse
product with ``Σ_A 2^{|A|}`` non-zeros.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from math import prod

import numpy as np
import scipy.optimize
import scipy.sparse as sp

from ...errors import PlanError
from .query_factors import fourier_term
from .subspaces import downward_closure

__all__ = ["MarginalWeights", "optimize_marginal_budgets", "candidate_marginals", "random_starts_for"]

AttrSet = tuple[int, ...]


@dataclass(frozen=True)
class MarginalWeights:
    """Candidate marginals, their budgets (``Σ = ε``) and the continuous-model objective."""

    candidates: tuple[AttrSet, ...]
    eta: np.ndarray
    objective: float
    starts: tuple[float, ...]


def _system(sizes, sets, weights, candidates, per_marginal: bool = False, forms=None):
    """``T_B`` (or, with ``per_marginal``, the sparse ``W × B`` matrix of per-cell coefficients
    ``Π_{i∈B}(n_i-1)/n_W²``) and the sparse ``B × A`` incidence ``[B ⊆ A]/n_A``. With ``forms``
    (prefix / range / custom queries, :mod:`.query_factors`) the weights are those of the summed
    query variances, and the per-marginal coefficients those of an upper bound on the largest
    query variance (the product of the per-attribute maxima)."""
    forms = [None] * len(sets) if forms is None else list(forms)
    subsets = downward_closure(sets)
    row = {b: i for i, b in enumerate(subsets)}
    t = np.zeros(len(subsets))
    wr, wc, wv = [], [], []
    for j, (s, w, f) in enumerate(zip(sets, weights, forms)):
        for k in range(len(s) + 1):
            for b in combinations(s, k):
                t[row[b]] += w * fourier_term(s, f, sizes, b)
                wr.append(j)
                wc.append(row[b])
                wv.append(fourier_term(s, f, sizes, b, maximum=True))
    ri, ci, v = [], [], []
    for j, a in enumerate(candidates):
        na = float(prod(sizes[i] for i in a))
        for k in range(len(a) + 1):
            for b in combinations(a, k):
                if b in row:
                    ri.append(row[b])
                    ci.append(j)
                    v.append(1.0 / na)
    m = sp.csr_matrix((v, (ri, ci)), shape=(len(subsets), len(candidates)))
    if per_marginal:
        return sp.csr_matrix((wv, (wr, wc)), shape=(len(sets), len(subsets))), m
    return t, m


def candidate_marginals(sets: Sequence[AttrSet], *, max_candidates: int = 4096) -> tuple[AttrSet, ...]:
    """Candidate marginal groups for :func:`optimize_marginal_budgets`.

    Every subset of the union ``U`` of the workload's attributes when ``2^{|U|} ≤ max_candidates``
    (HDMM's marginals template searches all ``2^d``; supersets of workload marginals can answer
    several of them with one budget — on Adult Q1* and Q2 the optimum uses them), else the
    workload's downward closure (the smallest set that identifies every workload marginal).

    Examples
    --------
    >>> candidate_marginals([(0,), (1, 2)])[-1]
    (0, 1, 2)
    >>> candidate_marginals([(0,), (1, 2)], max_candidates=4)   # 8 subsets > 4: the closure
    ((), (0,), (1,), (2,), (1, 2))
    """
    sets = [tuple(s) for s in sets]
    union = tuple(sorted(set().union(*map(set, sets)))) if sets else ()
    if 2 ** len(union) <= max_candidates:
        return downward_closure([union])
    return downward_closure(sets)


def random_starts_for(n_candidates: int) -> int:
    """How many random starts the planner affords: 64 up to 512 candidates, 16 up to 4096, none
    above (each start is one L-BFGS-B run whose cost grows with the candidates). On Adult Q1*,
    Q2, Q2a the best of HDMM's 10 restarts sits near the 10th percentile of single starts
    (benchmarks/bench_pure_dp.py hdmm), so beating it reliably needs several times more starts.
    """
    if n_candidates <= 512:
        return 64
    if n_candidates <= 4096:
        return 16
    return 0


def optimize_marginal_budgets(
    sizes: Sequence[int],
    sets: Sequence[AttrSet],
    weights,
    epsilon: float,
    *,
    candidates: Sequence[AttrSet] | None = None,
    starts: Sequence[np.ndarray] = (),
    maxiter: int = 500,
    objective: str = "sum",
    random_starts: int = 0,
    seed: int = 0,
    forms=None,
) -> MarginalWeights:
    """Minimize the GLS objective over budgets of candidate marginals (see module docstring).

    Parameters
    ----------
    sizes, sets, weights
        Domain sizes, workload marginals (sorted position tuples) and their weights ``w_W > 0``.
    epsilon : float
        Total budget.
    candidates : sequence of tuples, keyword-only
        Candidate marginals (default: the workload's downward closure).
    starts : sequence of arrays, keyword-only
        Extra starting budgets (one per candidate); equal budgets are always tried too.
    objective : {"sum", "max"}, keyword-only
        ``"sum"``: weighted total variance (above). ``"max"``: the largest cell variance over the
        workload marginals, ``max_W Σ_{B⊆W} Π_B(n_i-1)/(n_W² Λ_B)``, minimized through the smooth
        surrogate ``‖v‖_64`` (within a factor ``|W|^{1/64}`` of the max); the reported
        ``objective`` is then the exact max cell variance (continuous model).
    forms : sequence, keyword-only
        Per workload marginal, the :class:`~.query_factors.AttributeForms` of its attributes'
        query matrices (prefix / range / custom queries); ``None``: plain cells.
    random_starts, seed : int, keyword-only
        Additional starts with i.i.d. uniform(0, 1) budgets (HDMM's initialization) drawn from
        ``numpy.random.default_rng(seed)`` — the plan is a deterministic function of its inputs.
        The objective is not convex: on Adult Q1*/Q2 the structured starts end in local optima
        5% above HDMM's best of 10 restarts, random ones get below it (benchmarks/bench_pure_dp.py hdmm).

    Returns
    -------
    MarginalWeights
    """
    sets = [tuple(s) for s in sets]
    weights = np.asarray(weights, dtype=float)
    cands = tuple(candidates) if candidates is not None else downward_closure(sets)
    if objective not in ("sum", "max"):
        raise PlanError(f"objective must be 'sum' or 'max', got {objective!r}")
    t, m = _system(sizes, sets, weights, cands, forms=forms)
    mt = m.T.tocsr()
    live = t > 0
    if objective == "max":
        cm, _ = _system(sizes, sets, weights, cands, per_marginal=True, forms=forms)
        cm = cm[np.asarray(weights) > 0]
        cmt = cm.T.tocsr()
        pw = 64.0

        def f(theta):
            th = np.maximum(theta, 0.0)
            lb = m @ (th * th)
            if np.any(lb[live] <= 0):
                return np.inf, np.zeros_like(theta)
            r = np.where(live, 1.0 / np.where(lb > 0, lb, 1.0), 0.0)
            u = cm @ r
            top = u.max()
            z = u / top
            h = top * (z**pw).sum() ** (1 / pw)
            dh_du = (u / h) ** (pw - 1)
            dh_dl = -(cmt @ dh_du) * r * r
            s = th.sum()
            return s * s * h, 2 * s * h + s * s * 2 * th * (mt @ dh_dl)

        exact = lambda th: 2 * th.sum() ** 2 * (cm @ (1.0 / (m @ (th * th)))).max() / epsilon**2  # noqa: E731
    else:
        exact = None

    def f_sum(theta):
        th = np.maximum(theta, 0.0)
        lb = m @ (th * th)
        if np.any(lb[live] <= 0):
            return np.inf, np.zeros_like(theta)
        tl = np.where(live, t / np.where(lb > 0, lb, 1.0), 0.0)
        big_f = tl.sum()
        s = th.sum()
        val = s * s * big_f
        grad = 2 * s * big_f - s * s * 2 * th * (mt @ np.where(live, tl / np.where(lb > 0, lb, 1.0), 0.0))
        return val, grad

    if objective == "sum":
        f = f_sum
    x0s = [np.ones(len(cands))] + [np.asarray(x, dtype=float) for x in starts]
    rng = np.random.default_rng(seed)
    x0s += [rng.random(len(cands)) for _ in range(random_starts)]
    best = None
    vals = []
    for x0 in x0s:
        x0 = x0 / x0.sum()
        # keep every start strictly inside so that every needed subspace stays covered
        x0 = np.maximum(x0, 1e-6 * x0.max())
        r = scipy.optimize.minimize(
            f, x0, jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * len(cands),
            options={"maxiter": maxiter, "ftol": 1e-12, "gtol": 1e-10},
        )
        x = np.maximum(r.x, 0.0)
        v0 = f(x0)[0]
        v = f(x)[0]
        if not np.isfinite(v) or v > v0:
            x, v = x0, v0
        vals.append(2 * v / epsilon**2)
        if best is None or v < best[1]:
            best = (x, v)
    if best is None or not np.isfinite(best[1]):
        raise PlanError("the marginal-weights optimization found no strategy covering the workload")
    x = best[0]
    eta = epsilon * x / x.sum()
    value = exact(x) if exact is not None else 2 * best[1] / epsilon**2
    return MarginalWeights(cands, eta, value, tuple(vals))
