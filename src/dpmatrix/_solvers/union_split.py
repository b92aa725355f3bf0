"""Budget split of a union of Kronecker strategies against the exact joint GLS objective.

A union of products measures, for each product ``j``, the rows of ``S_j = ⊗_{i∈A_j} A_{j,i}``
(every factor with column L1 norms 1) on the ``A_j``-marginal of the cells of the union ``U``,
with the whole product scaled by its budget ``ε_j`` (so ``Σ_j ε_j`` is spent). In the continuous
Laplace model (noise variance ``2/ε²`` per unit-budget row) the GLS precision on the cells of
``U`` is

    P(ε) = Σ_j ε_j² K_j,   K_j = ½ ⊗_{i∈U} B_{j,i},   B_{j,i} = A_{j,i}ᵀA_{j,i} (i ∈ A_j), 11ᵀ (i ∉ A_j)

(the lift of a marginal strategy to ``U`` is the Kronecker product with the all-ones row on the
summed attributes). A workload query ``q = ⊗_{i∈A} q_i`` (a row of ``Q_i`` on ``i ∈ A``, the
all-ones row elsewhere) has GLS variance ``q P(ε)⁺ qᵀ``, and the total is ``tr(G P(ε)⁺)``.

**Simultaneous diagonalization.** When each attribute ``i`` carries at most one factor Gram
``B_i`` across the products (the same query type on an attribute in every marginal), the two
matrices ``B_i`` (positive definite) and ``11ᵀ`` are diagonalized by one congruence ``T_i``:
``T_iᵀB_iT_i = I`` and ``T_iᵀ11ᵀT_i = t_i t_iᵀ`` with ``t_i = T_iᵀ1`` having a single non-zero
entry (``B^{-1/2}`` followed by the rotation that maps ``B^{-1/2}1`` to an axis). With
``T = ⊗T_i`` every ``K_j`` becomes diagonal, ``TᵀP(ε)T = diag(Σ_j ε_j² d_j)`` with
``d_j = ½ ⊗_i (1 or t_i²)``, and ``T diag(·)⁺ Tᵀ`` is a generalized inverse of ``P(ε)``, so for
every query in the row space of the strategy

    Var(q) = Σ_c (Tᵀq)_c² / Σ_j ε_j² d_{j,c},     (Tᵀq)² = ⊗_i (q_iT_i)²   (t_i² on summed axes)

— all query variances of a marginal are one multilinear contraction, the total is
``Σ_c g_c / p_c`` with ``g = Σ_W w_W ⊗_i colsum((Q_iT_i)²)``, and both have closed-form
gradients in ``ε``. This is the same trick HDMM uses for marginal workloads (McKenna et al.,
PVLDB 2018, §5.2), applied with the p-Identity factors.

**Search.** The objective is homogeneous of degree −2 in ``ε``, and the budgets are
parameterized by a softmax on the simplex ``Σ ε_j = ε``; L-BFGS-B minimizes the total
(``"sum"``) or, for ``"max"``, a sequence of p-norm surrogates of all query variances
(``p = 4 … 256``, warm started) followed by a Nelder–Mead polish of the exact maximum. The start
(the cube-root rule for the sum, the split equalizing each product's own largest variance for
the max) is a candidate; candidates are compared by the exact objective and the best is kept,
so the result is never worse than the start. Everything is deterministic (no random starts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce

import numpy as np
from scipy.optimize import minimize

from ..errors import PlanError
from .result import SolverResult

__all__ = ["KronUnionModel", "UnionSplit", "kron_union_model", "optimize_union_split"]

#: relative size below which a transformed entry is an exact zero (the congruence of ``11ᵀ`` has
#: a single non-zero; round-off leaves ~1e-16 elsewhere)
_ZERO = 1e-10
#: p-norm exponents of the max-objective surrogates
_P_SCHEDULE = (4.0, 16.0, 64.0, 256.0)
#: budgets below this share of ε are set to 0 after the search (when the rest still answers)
_DROP = 1e-6


def _congruence(b: np.ndarray | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(T, t)`` with ``TᵀBT = I`` and ``Tᵀ1 = t`` having one non-zero entry (``B = I`` if None)."""
    if b is None:
        half = np.eye(n)
    else:
        w, v = np.linalg.eigh((b + b.T) / 2)
        if w.min() <= 0:
            raise PlanError("a factor of the union's strategy is singular; it cannot be diagonalized")
        half = (v / np.sqrt(w)) @ v.T  # B^{-1/2}
    u = half @ np.ones(n)
    # Householder reflection H (symmetric, orthogonal) with H u = -sign(u_0) |u| e_0
    e0 = np.zeros(n)
    e0[0] = 1.0
    x = u + np.copysign(np.linalg.norm(u), u[0]) * e0
    h = np.eye(n) - 2.0 * np.outer(x, x) / (x @ x) if x @ x > 0 else np.eye(n)
    t = half @ h
    tvec = np.zeros(n)
    tvec[0] = (t.T @ np.ones(n))[0]
    return t, tvec


@dataclass(frozen=True, eq=False)
class KronUnionModel:
    """The joint GLS of a union of products in its simultaneously diagonal basis (module doc).

    Attributes
    ----------
    shape : tuple of int
        Sizes of the union's attributes.
    precision : ndarray, shape (k, N)
        ``d_j``: the diagonal precision of product ``j`` per unit ``ε_j²`` (C order).
    marginals : tuple
        Per positively weighted workload marginal: ``(weight, factors)`` with one matrix
        ``(q_iT_i)²`` (queries × cells) per union attribute (a single row ``t_i²`` where summed).
    load : ndarray, shape (N,)
        ``g = Σ_W w_W ⊗_i colsum((Q_iT_i)²)``: the total is ``Σ_c g_c / p_c``.
    """

    shape: tuple[int, ...]
    precision: np.ndarray
    marginals: tuple
    load: np.ndarray
    transforms: tuple = ()
    product_axes: tuple = ()
    queries: tuple = ()

    def cell_precision(self, eta: np.ndarray) -> np.ndarray:
        return np.asarray(eta, dtype=float) ** 2 @ self.precision

    def _inverse(self, eta) -> np.ndarray:
        p = self.cell_precision(eta)
        live = p > 0
        if np.any(self.load[~live] > 0):
            raise PlanError("a workload query is outside the union's strategy (no unbiased estimate)")
        return np.where(live, 1.0 / np.where(live, p, 1.0), 0.0)

    def total(self, eta) -> float:
        """``Σ_W w_W Σ_{q∈W} Var(q)`` in the continuous model at budgets ``eta``."""
        return float(self.load @ self._inverse(eta))

    def total_grad(self, eta) -> np.ndarray:
        """``∂ total / ∂ε_j = -2 ε_j Σ_c g_c d_{j,c} / p_c²``."""
        inv = self._inverse(eta)
        return -2.0 * np.asarray(eta, dtype=float) * (self.precision @ (self.load * inv**2))

    def query_variances(self, eta) -> list[np.ndarray]:
        """The variance of every query of every positively weighted marginal (flattened)."""
        inv = self._inverse(eta).reshape(self.shape)
        return [_contract(inv, fs).ravel() for _, fs in self.marginals]

    def gram_gradient(self, eta, axis: int) -> np.ndarray:
        """``∂ total / ∂B_axis`` for the factor Gram shared by the products on ``axis`` (the
        congruences held fixed: the total depends on ``P(ε)`` only, whose null space — the
        cells no marginal of a product separates — does not move with a positive definite
        ``B``). With ``X = P⁺GP⁺`` in the diagonal basis, ``tr(X (dB ⊗ R_j))`` only needs the
        diagonals of the other axes' factors:
        ``Y = Σ_{j∋axis} ε_j²/2 Σ_W w_W H_{W,axis} ⊙ (Π diag(h_W r_j) Πᵀ)`` with ``Π`` the inverse
        precision (axis first), ``h_W``, ``r_j`` the Kronecker products of the other axes'
        diagonals, and the gradient is ``-T Y Tᵀ``."""
        eta = np.asarray(eta, dtype=float)
        n = self.shape[axis]
        inv = np.moveaxis(self._inverse(eta).reshape(self.shape), axis, 0).reshape(n, -1)
        others = [k for k in range(len(self.shape)) if k != axis]
        t_ax, tv_ax = self.transforms[axis]
        y = np.zeros((n, n))
        for w, qs in self.queries:
            if axis in qs:
                qt = np.asarray(qs[axis], dtype=float) @ t_ax
                h_ax = qt.T @ qt
            else:
                h_ax = np.outer(tv_ax, tv_ax)
            h_rest = reduce(np.multiply.outer, [self._diag_h(qs, k) for k in others], np.ones(()))
            acc = np.zeros((n, n))
            for e, axes in zip(eta, self.product_axes):
                if axis not in axes or e == 0:
                    continue
                r = reduce(np.multiply.outer, [np.ones(self.shape[k]) if k in axes else self.transforms[k][1] ** 2
                                               for k in others], np.ones(()))
                acc += 0.5 * e**2 * (inv * (h_rest * r).ravel()) @ inv.T
            y += w * h_ax * acc
        return -t_ax @ y @ t_ax.T

    def _diag_h(self, qs, k: int) -> np.ndarray:
        if k in qs:
            return ((np.asarray(qs[k], dtype=float) @ self.transforms[k][0]) ** 2).sum(axis=0)
        return self.transforms[k][1] ** 2

    def max_variance(self, eta) -> float:
        return float(max(v.max() for v in self.query_variances(eta)))

    def pnorm(self, eta, p: float) -> tuple[float, np.ndarray]:
        """``log (Σ_q (v_q/m)^p)^{1/p} + log m`` (``m`` the largest variance) and its gradient."""
        eta = np.asarray(eta, dtype=float)
        inv = self._inverse(eta)
        vs = self.query_variances(eta)
        m = max(float(v.max()) for v in vs)
        s = sum(float(((v / m) ** p).sum()) for v in vs)
        # d/dε_j of log s / p: Σ_q (v_q/m)^{p-1}/m · ∂v_q / s,  ∂v_q = -2 ε_j Σ_c z_qc d_jc / p_c²
        back = np.zeros(int(np.prod(self.shape)))
        for v, (_, fs) in zip(vs, self.marginals):
            a = ((v / m) ** (p - 1) / m).reshape(tuple(f.shape[0] for f in fs))
            back += _adjoint(a, fs).ravel()
        grad = -2.0 * eta * (self.precision @ (back * inv**2)) / s
        return float(np.log(s) / p + np.log(m)), grad


def _modes(t: np.ndarray, mats, axis: int) -> np.ndarray:
    """``mats[i]`` contracted (its ``axis``) with axis ``i`` of ``t``, in place of it; the axes
    that shrink the table most go first (a summed axis, one row, before the query axes), so no
    intermediate is larger than needed."""
    order = sorted(range(len(mats)), key=lambda i: mats[i].shape[1 - axis] / mats[i].shape[axis])
    out = t
    for i in order:
        out = np.moveaxis(np.tensordot(out, mats[i], axes=([i], [axis])), -1, i)
    return out


def _contract(inv: np.ndarray, factors) -> np.ndarray:
    """``V[r_1, …] = Σ_c inv[c] Π_i F_i[r_i, c_i]``."""
    return _modes(inv, factors, 1)


def _adjoint(a: np.ndarray, factors) -> np.ndarray:
    """``Σ_r a[r] Π_i F_i[r_i, c_i]`` (the adjoint of :func:`_contract`)."""
    return _modes(a, factors, 0)


def kron_union_model(
    shape: Sequence[int],
    products: Sequence[Mapping[int, np.ndarray]],
    marginals: Sequence[tuple[float, Mapping[int, np.ndarray]]],
) -> KronUnionModel | None:
    """The diagonal joint-GLS model of a union of products, or None when some attribute carries
    two different factor Grams (no common congruence).

    Parameters
    ----------
    shape : sequence of int
        Sizes of the union's attributes (axes ``0 … len(shape)-1``).
    products : sequence of mapping
        Per product: ``{axis: B}`` with ``B = AᵀA`` of its factor (columns of L1 norm 1); the
        axes it does not name are summed (the all-ones row).
    marginals : sequence of (float, mapping)
        Per workload marginal: its weight and ``{axis: Q}`` (query matrix on that axis); the
        axes it does not name are summed.

    Returns
    -------
    KronUnionModel or None

    Examples
    --------
    >>> m = kron_union_model((2, 3), [{0: np.eye(2)}, {0: np.eye(2), 1: np.eye(3)}],
    ...                      [(1.0, {0: np.eye(2)}), (1.0, {0: np.eye(2), 1: np.eye(3)})])
    >>> round(m.total(np.array([0.5, 0.5])), 6) > 0
    True
    """
    shape = tuple(int(n) for n in shape)
    grams: dict[int, np.ndarray | None] = {}
    for prod in products:
        for ax, b in prod.items():
            b = np.asarray(b, dtype=float)
            if ax in grams and grams[ax] is not None and not np.array_equal(grams[ax], b):
                return None
            grams[ax] = b
    congr = [_congruence(grams.get(ax), n) for ax, n in enumerate(shape)]
    # precisions: ½ ⊗_i (diag(TᵀBT) = 1, or t²)
    rows = []
    for prod in products:
        vecs = [np.ones(n) if ax in prod else congr[ax][1] ** 2 for ax, n in enumerate(shape)]
        rows.append(0.5 * reduce(np.multiply.outer, vecs).ravel())
    precision = np.array(rows)
    precision[precision < _ZERO * precision.max()] = 0.0
    margs, load = [], np.zeros(int(np.prod(shape)))
    for w, qs in marginals:
        if w <= 0:
            continue
        fs = []
        for ax, n in enumerate(shape):
            if ax in qs:
                z = (np.asarray(qs[ax], dtype=float) @ congr[ax][0]) ** 2
                z[z < _ZERO * z.max(axis=1, keepdims=True)] = 0.0
            else:
                z = (congr[ax][1] ** 2)[None, :]
            fs.append(z)
        margs.append((float(w), tuple(fs)))
        load += float(w) * reduce(np.multiply.outer, [f.sum(axis=0) for f in fs]).ravel()
    return KronUnionModel(shape, precision, tuple(margs), load, tuple(congr),
                          tuple(frozenset(prod) for prod in products),
                          tuple((float(w), dict(qs)) for w, qs in marginals if w > 0))


@dataclass(frozen=True, eq=False, kw_only=True)
class UnionSplit(SolverResult):
    """Budgets ``eta`` (= ``solution``, summing to ε), the exact objective they reach in the
    continuous model, the start's objective, and which candidate won (``method``).
    ``lower_bound`` is the trivial 0 (no certificate: the objective is not convex in ``ε``)."""

    start_objective: float
    method: str

    @property
    def eta(self) -> np.ndarray:
        return self.solution


def _softmax(y: np.ndarray) -> np.ndarray:
    z = np.exp(y - y.max())
    return z / z.sum()


def optimize_union_split(
    model: KronUnionModel, start: np.ndarray, epsilon: float, objective: str = "sum", *, maxiter: int = 200,
) -> UnionSplit:
    """Minimize the joint-GLS total (``"sum"``) or largest query variance (``"max"``) over the
    budget splits ``Σ_j ε_j = ε`` from ``start`` (module doc); never worse than ``start``.

    Parameters
    ----------
    model : KronUnionModel
    start : ndarray
        Positive budgets (rescaled to sum to ``epsilon``).
    epsilon : float
    objective : {"sum", "max"}
    maxiter : int, keyword-only
        Iterations per L-BFGS-B run.

    Returns
    -------
    UnionSplit

    Examples
    --------
    >>> m = kron_union_model((4,), [{0: np.eye(4)}, {}], [(1.0, {0: np.eye(4)}), (1.0, {})])
    >>> r = optimize_union_split(m, np.array([0.5, 0.5]), 1.0)
    >>> r.objective <= r.start_objective
    True
    """
    if objective not in ("sum", "max"):
        raise PlanError(f"objective must be 'sum' or 'max', got {objective!r}")
    start = np.asarray(start, dtype=float)
    if start.ndim != 1 or start.size != model.precision.shape[0] or not np.all(start > 0):
        raise PlanError("the start must hold one positive budget per product")
    eps = float(epsilon)
    start = eps * start / start.sum()
    exact = model.total if objective == "sum" else model.max_variance
    best, best_val, method, iters = start, exact(start), "start", 0
    if start.size == 1:
        return UnionSplit(solution=start, objective=best_val, lower_bound=0.0, gap=1.0, status="optimal",
                          iterations=0, start_objective=best_val, method=method)
    start_val = best_val

    def chain(y, val_grad):
        s = _softmax(y)
        val, g = val_grad(eps * s)
        return val, eps * (s * g - s * (s @ g))

    def log_total(e):
        t = model.total(e)
        return float(np.log(t)), model.total_grad(e) / t

    y = np.log(start)
    surrogates = [log_total] if objective == "sum" else [lambda e, p=p: model.pnorm(e, p) for p in _P_SCHEDULE]
    for k, fun in enumerate(surrogates):
        res = minimize(lambda z, fun=fun: chain(z, fun), y, jac=True, method="L-BFGS-B",
                       options={"maxiter": maxiter, "ftol": 1e-13, "gtol": 1e-10})
        iters += int(res.nit)
        y = res.x
        cand = eps * _softmax(y)
        val = exact(cand)
        if val < best_val:
            best, best_val, method = cand, val, "lbfgs" if objective == "sum" else f"p-norm:{_P_SCHEDULE[k]:g}"
    if objective == "max":  # polish the exact maximum (non-smooth) from the best point
        y0 = np.log(best)
        res = minimize(lambda z: np.log(model.max_variance(eps * _softmax(z))), y0, method="Nelder-Mead",
                       options={"maxiter": 100 * best.size, "xatol": 1e-9, "fatol": 1e-12})
        iters += int(res.nit)
        cand = eps * _softmax(res.x)
        val = exact(cand)
        if val < best_val:
            best, best_val, method = cand, val, "nelder-mead"
    # budgets the search drove to ~0 are dropped (their products unmeasured) when the rest is
    # still answerable: the GLS then sees no rows of negligible, numerically awkward precision
    tiny = best < _DROP * eps
    if tiny.any() and not tiny.all():
        cand = np.where(tiny, 0.0, best)
        cand = eps * cand / cand.sum()
        try:
            val = exact(cand)
        except PlanError:  # a dropped product was needed
            val = np.inf
        if val <= best_val:
            best, best_val, method = cand, val, method + "+drop"
    return UnionSplit(solution=best, objective=best_val, lower_bound=0.0, gap=1.0, status="heuristic",
                      iterations=iters, start_objective=start_val, method=method)
