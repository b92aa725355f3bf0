"""GLS recovery for groups of marginal / residual rows, computed per residual subspace.

Math (Cormode et al. §3.2 with the non-uniform covariance ``Σ = diag(σ_g²)``, made implicit).
For each attribute write ``R^{n_i} = span(1) ⊕ 1^⊥``; the tensor products give the orthogonal
decomposition ``R^N = ⊕_B V_B`` over attribute subsets ``B`` (``1^⊥`` on ``B``, ``1`` elsewhere),
with projections ``P_B = ⊗_{i∈B}(I - J/n_i) ⊗_{i∉B} J/n_i``. Every group's Gram matrix
``S_gᵀ S_g`` is a multiple of ``P_B`` on each ``V_B`` (:meth:`StrategyGroup.eigenvalue`), hence

    Sᵀ Σ⁻¹ S = N · Σ_B Λ_B P_B,   Λ_B = Σ_g e_g(B) / σ_g²,

and the GLS estimate ``x̂ = (SᵀΣ⁻¹S)⁺ SᵀΣ⁻¹ z`` is unbiased for every marginal ``W`` whose
subsets all have ``Λ_B > 0``. With ``n_W = Π_{i∈W} n_i``:

* covariance of the ``W``-marginal: ``Σ_{B⊆W} (1/(n_W Λ_B)) ⊗_{i∈B}(I - J/n_i) ⊗_{i∈W∖B} J/n_i``;
* variance of each of its cells: ``Σ_{B⊆W} Π_{i∈B}(n_i - 1) / (n_W² Λ_B)``;
* estimate: ``Q_W x̂ = Σ_{B⊆W} expand_W(ū_B) / n_W`` with the ``B``-table
  ``ū_B = (1/Λ_B) Σ_g (1/σ_g²) g_{g,B}``, ``g_{g,B} = C_B(Σ_{A∖B} y_A) / n_{A∖B}`` for a
  marginal group on ``A ⊇ B`` and ``g_{g,B} = M_Bᵀ y_B`` for the residual group on ``B``.

No object of the full domain's size is built: tables are at most as large as a group's.
Because every marginal estimate is ``Q_W x̂`` for one vector ``x̂``, answers are consistent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from math import prod

import numpy as np

from ...errors import NotMeasuredError, PlanError
from .groups import StrategyGroup, center

__all__ = ["downward_closure", "subspace_precision", "SubspaceGLS"]

AttrSet = tuple[int, ...]


def _subsets(a: AttrSet) -> Iterable[AttrSet]:
    for k in range(len(a) + 1):
        yield from combinations(a, k)


def downward_closure(sets: Iterable[AttrSet]) -> tuple[AttrSet, ...]:
    """Every subset of every set, sorted by size then lexicographically."""
    out: set[AttrSet] = set()
    for s in sets:
        if s in out:
            continue
        out.update(_subsets(tuple(s)))
    return tuple(sorted(out, key=lambda t: (len(t), t)))


def subspace_precision(
    groups: Sequence[StrategyGroup], noise_variance: Sequence[float], subsets: Sequence[AttrSet]
) -> dict[AttrSet, float]:
    """``Λ_B = Σ_g e_g(B)/σ_g²`` for every ``B`` in ``subsets`` (groups with σ² = inf skipped)."""
    wanted = set(subsets)
    lam = dict.fromkeys(subsets, 0.0)
    for g, v in zip(groups, noise_variance):
        if not np.isfinite(v) or v <= 0:
            continue
        p = 1.0 / float(v)
        if g.kind == "residual":
            if g.attrs in wanted:
                lam[g.attrs] += p
            continue
        e = p / g.cells
        if 2 ** len(g.attrs) <= len(wanted):
            for b in _subsets(g.attrs):
                if b in wanted:
                    lam[b] += e
        else:
            ga = set(g.attrs)
            for b in wanted:
                if ga.issuperset(b):
                    lam[b] += e
    return lam


@dataclass(frozen=True)
class SubspaceGLS:
    """GLS variances/covariances/estimates for a set of groups with given noise variances.

    Parameters
    ----------
    sizes : tuple of int
        All attribute sizes of the domain.
    groups : tuple of StrategyGroup
    noise_variance : tuple of float
        Per-row noise variance ``σ_g²`` of each group (``inf`` = not measured).
    lam : mapping
        ``Λ_B`` for every subset ``B`` needed (see :func:`subspace_precision`).
    """

    sizes: tuple[int, ...]
    groups: tuple[StrategyGroup, ...]
    noise_variance: tuple[float, ...]
    lam: Mapping[AttrSet, float]

    @classmethod
    def build(cls, sizes, groups, noise_variance, targets: Iterable[AttrSet]) -> SubspaceGLS:
        subsets = downward_closure(targets)
        lam = subspace_precision(groups, noise_variance, subsets)
        return cls(tuple(sizes), tuple(groups), tuple(float(v) for v in noise_variance), lam)

    def answerable(self, attrs: AttrSet) -> bool:
        return all(self.lam.get(b, 0.0) > 0 for b in _subsets(tuple(attrs)))

    def _lam(self, b: AttrSet, attrs: AttrSet) -> float:
        v = self.lam.get(b)
        if v is None or v <= 0:
            raise NotMeasuredError(
                f"marginal {attrs} is not identified by the strategy: no measured group covers the "
                f"residual subspace {b}"
            )
        return v

    def cell_variance(self, attrs: AttrSet) -> float:
        """Variance of each cell of the ``attrs``-marginal: ``Σ_{B⊆W} Π_B(n_i-1)/(n_W² Λ_B)``."""
        attrs = tuple(attrs)
        nw = prod(self.sizes[i] for i in attrs)
        tot = 0.0
        for b in _subsets(attrs):
            tot += prod(self.sizes[i] - 1 for i in b) / self._lam(b, attrs)
        return tot / (nw * nw)

    def covariance(self, attrs: AttrSet) -> np.ndarray:
        """Dense ``n_W × n_W`` covariance of the ``attrs``-marginal (small marginals only)."""
        attrs = tuple(attrs)
        ns = [self.sizes[i] for i in attrs]
        nw = prod(ns)
        if nw > 4096:
            raise PlanError(f"covariance of a {nw}-cell marginal is too large to build densely")
        out = np.zeros((nw, nw))
        for b in _subsets(attrs):
            fs = [
                np.eye(n) - 1.0 / n if a in b else np.full((n, n), 1.0 / n)
                for a, n in zip(attrs, ns)
            ]
            k = np.ones((1, 1))
            for f in fs:
                k = np.kron(k, f)
            out += k / (nw * self._lam(b, attrs))
        return out

    def cross_covariance(self, first: AttrSet, second: AttrSet) -> np.ndarray:
        """Dense ``n_{W1} × n_{W2}`` covariance between two marginal estimates (small only).

        ``Cov = Σ_{B ⊆ W1∩W2} (1/(n_{W1∪W2} Λ_B)) ⊗_i F_i`` over ``i ∈ W1 ∪ W2`` (in position
        order) with ``F_i = I - J/n_i`` (``i ∈ B``), ``J/n_i`` (``i ∈ W1∩W2∖B``), a column of
        ones (``i ∈ W1∖W2``) or a row of ones (``i ∈ W2∖W1``).
        """
        w1, w2 = tuple(first), tuple(second)
        union = sorted(set(w1) | set(w2))
        both = tuple(a for a in w1 if a in w2)
        n1 = prod(self.sizes[i] for i in w1)
        n2 = prod(self.sizes[i] for i in w2)
        if n1 * n2 > 4096**2:
            raise PlanError(f"a {n1} x {n2} covariance is too large to build densely")
        nu = prod(self.sizes[i] for i in union)
        out = np.zeros((n1, n2))
        for b in _subsets(both):
            k = np.ones((1, 1))
            for a in union:
                n = self.sizes[a]
                if a in b:
                    f = np.eye(n) - 1.0 / n
                elif a in both:
                    f = np.full((n, n), 1.0 / n)
                elif a in w1:
                    f = np.ones((n, 1))
                else:
                    f = np.ones((1, n))
                k = np.kron(k, f)
            out += k / (nu * self._lam(b, both))
        return out

    def query_variance(self, attrs: AttrSet, queries: np.ndarray) -> np.ndarray:
        """Variances of the linear queries ``queries`` (``k × n_W``) on the ``attrs``-marginal."""
        attrs = tuple(attrs)
        ns = [self.sizes[i] for i in attrs]
        nw = prod(ns)
        q = np.atleast_2d(np.asarray(queries, dtype=float))
        if q.shape[1] != nw:
            raise PlanError(f"queries on {attrs} need {nw} columns, got {q.shape[1]}")
        qt = q.reshape((q.shape[0], *ns))
        out = np.zeros(q.shape[0])
        for b in _subsets(attrs):
            t = qt
            for ax, a in enumerate(attrs, start=1):
                m = t.mean(axis=ax, keepdims=True)
                t = t - m if a in b else np.broadcast_to(m, t.shape)
            out += (t.reshape(q.shape[0], -1) * q).sum(axis=1) / (nw * self._lam(b, attrs))
        return out

    def kron_query_variance(self, attrs: AttrSet, mats: Sequence[np.ndarray]) -> np.ndarray:
        """Variances of the queries ``⊗_k mats[k]`` (one matrix per attribute of ``attrs``) on the
        ``attrs``-marginal, as a tensor of shape ``(rows of mats[0], …)``:
        ``Σ_{B⊆W} (1/(n_W Λ_B)) ⊗_k v_k^B`` with ``v_k^B = diag(W_k (I - J/n) W_kᵀ)`` for
        ``k ∈ B`` and ``diag(W_k J/n W_kᵀ)`` otherwise (no dense query matrix is built)."""
        attrs = tuple(attrs)
        nw = prod(self.sizes[i] for i in attrs)
        from .query_rows import as_query_rows, row_squares, row_sums  # interval rows: lengths

        mats = [as_query_rows(m) for m in mats]
        mean = [row_sums(m) ** 2 / m.n for m in mats]
        centred = [row_squares(m) - d for m, d in zip(mats, mean)]
        out = np.zeros(tuple(m.m for m in mats))
        for b in _subsets(attrs):
            t = np.array(1.0 / (nw * self._lam(b, attrs)))
            for a, c, d in zip(attrs, centred, mean):
                t = np.multiply.outer(t, c if a in b else d)
            out = out + t
        return out

    # -- reconstruction --------------------------------------------------------------------

    def estimator(self, outputs: Sequence[np.ndarray]) -> _Estimator:
        """Bind the noisy group outputs ``y_g`` (flat, one per group) for :meth:`_Estimator.marginal`."""
        if len(outputs) != len(self.groups):
            raise PlanError(f"{len(outputs)} outputs for {len(self.groups)} groups")
        return _Estimator(self, tuple(np.asarray(y, dtype=float) for y in outputs))


class _Estimator:
    """Per-subspace GLS components ``ū_B`` cached across marginals."""

    def __init__(self, gls: SubspaceGLS, outputs: tuple[np.ndarray, ...]):
        self.gls = gls
        self.outputs = outputs
        self._u: dict[AttrSet, np.ndarray] = {}
        # which groups act on each residual subspace B (marginal groups on A ⊇ B, residual on B)
        self._acting: dict[AttrSet, list[int]] = {}
        for j, (g, v) in enumerate(zip(gls.groups, gls.noise_variance)):
            if not np.isfinite(v) or v <= 0:
                continue
            if g.kind == "residual":
                self._acting.setdefault(g.attrs, []).append(j)
            elif len(g.attrs) <= 12:
                for b in _subsets(g.attrs):
                    self._acting.setdefault(b, []).append(j)
            else:
                self._acting.setdefault(None, []).append(j)  # large groups: checked per subset

    def _component(self, b: AttrSet, attrs: AttrSet) -> np.ndarray:
        if b in self._u:
            return self._u[b]
        gls = self.gls
        lam = gls._lam(b, attrs)
        shape = tuple(gls.sizes[i] for i in b)
        acc = np.zeros(shape)
        sb = set(b)
        for j in self._acting.get(b, []) + self._acting.get(None, []):
            g, v, y = gls.groups[j], gls.noise_variance[j], self.outputs[j]
            if g.kind == "residual":
                if g.attrs == b:
                    acc += g.adjoint(y) / v
                continue
            if not sb <= set(g.attrs):
                continue
            t = y.reshape(g.sizes)
            drop = tuple(ax for ax, a in enumerate(g.attrs) if a not in sb)
            extra = prod(g.sizes[ax] for ax in drop)
            if drop:
                t = t.sum(axis=drop)
            acc += center(t, range(len(b))) / (extra * v)
        u = acc / lam
        self._u[b] = u
        return u

    def marginal(self, attrs: Iterable[int]) -> np.ndarray:
        """GLS estimate of the ``attrs``-marginal table (shape ``(n_i for i in attrs)``)."""
        attrs = tuple(sorted(attrs))
        ns = tuple(self.gls.sizes[i] for i in attrs)
        nw = prod(ns)
        out = np.zeros(ns)
        for b in _subsets(attrs):
            u = self._component(b, attrs)
            shape = tuple(n if a in b else 1 for a, n in zip(attrs, ns))
            out = out + u.reshape(shape)
        return out / nw
