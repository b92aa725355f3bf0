"""Algorithm 2 (and 6) as an :class:`~dpmatrix._reconstruct.estimator.Estimator`: the estimator of
a ResidualPlanner / ResidualPlanner+ plan, like every other plan's.

The marginal on ``M`` is ``Σ_{A⊆M} r_A ⊗_{j∈M∖A} a_j`` where ``r_A`` is the unbiased estimate of
the residual ``A`` (``Measurements.residual``; cached there) and ``a_j`` the total's row of
attribute ``j`` (``1/n_j`` for a plain attribute, Algorithm 4); its variance is Theorem 4.4 /
7.2's closed form. Generalized marginals answer ``(⊗ W_i) q`` (Algorithm 6).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .._linalg.kron import kron_apply
from .._linalg.structured import Identity
from ..errors import NotMeasuredError
from .broadcast import plain_estimate, plain_variance
from .estimator import EntryAnswer, Estimator
from .labels import cell_labels, query_labels

__all__ = ["ResidualEstimator"]

AttrSet = tuple[int, ...]


class ResidualEstimator(Estimator):
    """Estimates and exact variances of a residual plan from ``meas``'s noisy residuals.

    Parameters
    ----------
    meas : Measurements
        The measurements of a plan with a downward closure (its ``plan`` and ``residual``).
    """

    def __init__(self, meas: Any):
        self.meas = meas
        self.plan = meas.plan

    @property
    def _is_plain(self) -> bool:
        return bool(self.plan.is_plain)

    # -- cells ---------------------------------------------------------------------------------
    def estimate(self, key: AttrSet) -> np.ndarray:
        for a in key:  # the cells must be estimable from every attribute's strategy
            self.plan.cell_basis(a)
        return self.combine(key)

    def combine(self, key: AttrSet) -> np.ndarray:
        """``Σ_{A⊆M} r_A ⊗_{j∈M∖A} a_j`` (Algorithm 2/6's ``q``; ``/ Π n_j`` for Algorithm 4).
        These are the cells when every strategy spans its attribute; otherwise only
        ``(⊗ W_i) q`` is meaningful (Algorithm 6)."""
        if self._is_plain:  # Algorithm 4: the broadcast sums of the streamed path, same bits
            return plain_estimate(self.meas, key)
        sizes = self.plan.domain.sizes
        bases = self.plan.bases
        shape = tuple(sizes[a] for a in key)
        out = np.zeros(shape)
        for _, sub, _ in self.plan.closure.subsets(key):
            res = self.meas.residual(sub)
            dropped = [a for a in key if a not in sub]
            expand = tuple(sizes[a] if a in sub else 1 for a in key)
            term = res.reshape(expand)
            uniform = [a for a in dropped if bases[a].uniform_total]
            if uniform:
                term = term / float(np.prod([sizes[a] for a in uniform]))
            for j, a in enumerate(key):
                if a in dropped and not bases[a].uniform_total:
                    term = term * bases[a].total_inv.reshape(tuple(-1 if e == j else 1 for e in range(len(key))))
            out = out + term
        return out

    def variance(self, key: AttrSet) -> np.ndarray:
        if self._is_plain:  # Algorithm 4's closed form, as streamed
            return plain_variance(self.plan, key)
        return self.plan.variance(key)

    def covariance(self, key: AttrSet) -> np.ndarray:
        sizes = self.plan.domain.sizes
        cells = int(np.prod([sizes[a] for a in key])) if key else 1
        out = np.zeros((cells, cells))
        bases = self.plan.bases
        for sub, s2 in self.plan._subset_terms(key):
            term = np.array([[s2]])
            for a in key:
                n = sizes[a]
                if a in sub:
                    f = bases[a].resid_cov
                elif bases[a].uniform_total:
                    f = np.full((n, n), 1.0 / n**2)
                else:
                    f = np.outer(bases[a].total_inv, bases[a].total_inv)
                term = np.kron(term, f)
            out += term
        return out

    def query_vector(self, key: AttrSet, q: np.ndarray) -> tuple[float, float]:
        estimate = 0.0
        variance = 0.0
        for sub, s2 in self.plan._subset_terms(key):
            qa = _contract_totals(q, key, sub, self.plan.bases)
            bases = tuple(self.plan.bases[a] for a in sub)
            _check_answerable(self.plan.domain, sub, bases, qa)
            estimate += float(np.sum(qa * self.meas.residual(sub)))
            if sub:
                variance += s2 * float(np.sum(qa * kron_apply(tuple(b.resid_cov for b in bases), qa)))
            else:
                variance += s2 * float(qa) ** 2
        return estimate, variance

    def grouped_queries(self, key: AttrSet, by: tuple[int, ...], shape: tuple[int, ...],
                        w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For plain plans in O(cells): the estimates are ``x̂_key`` contracted with ``w`` along
        the other axes; the variance of ``q_g = e_g ⊗ w`` is (Theorem 4.4 applied to ``q_g``)
        ``Σ_{A⊆key} σ²_A s_A ⊗_{j∈by} (d_in_j if j ∈ A else d_out_j)`` with
        ``s_A = w_Aᵀ (⊗_{i∈A∖by} K_i) w_A``, ``w_A`` the mean of ``w`` over its axes outside
        ``A`` and ``K = I − 11ᵀ/n`` — one number per residual set, not one query per group."""
        if not self._is_plain:
            return super().grouped_queries(key, by, shape, w)
        plan = self.plan
        rest = [j for j in range(len(key)) if j not in by]
        x = self.estimate(key)
        est = np.tensordot(x, w, axes=(rest, list(range(len(rest))))) if rest else x
        var = np.zeros(tuple(shape[j] for j in by))
        for sub, s2 in plan._subset_terms(key):
            out_axes = tuple(i for i, j in enumerate(rest) if key[j] not in sub)
            wa = w.sum(axis=out_axes) / float(np.prod([w.shape[i] for i in out_axes])) if out_axes else w
            kept = tuple(plan.bases[key[j]] for j in rest if key[j] in sub)
            s_a = float(np.sum(wa * kron_apply(tuple(b.resid_cov for b in kept), wa))) if kept else float(wa) ** 2
            term = np.array(1.0)
            for j in by:
                b = plan.cell_basis(key[j])
                term = np.multiply.outer(term, b.diag_in if key[j] in sub else b.diag_out)
            coef = s_a * term
            var = var + (s2 * coef if np.isfinite(s2) else np.where(coef > 0, np.inf, 0.0))
        return est, var

    # -- workload entries ----------------------------------------------------------------------
    def entries(self) -> Iterator[int]:
        """Workload marginals whose residuals were all measured (a zero-weight marginal's may not be)."""
        wk, closure = self.plan.workload, self.plan.closure
        return iter([i for i in range(len(wk))
                     if all(self.plan.measured[j] for _, _, j in closure.subsets(wk.sets[i]))])

    def entry_of(self, key: AttrSet) -> int:
        return int(self.plan.workload.index(key))

    def entry(self, i: int) -> EntryAnswer:
        """The queries ``⊗ W_i`` of workload marginal ``i`` (cells for plain ones), Algorithm 6."""
        wk, dom = self.plan.workload, self.plan.domain
        key, types = tuple(wk.sets[i]), wk.types(i)
        names = dom.names_of(key)
        if all(t == "identity" for t in types) and all(self.plan.bases[a].is_identity for a in key):
            labels = cell_labels(dom, key)
            return EntryAnswer(names, names, labels, self.estimate(key), self.variance(key))
        cells = self.combine(key)
        # a plain attribute's queries are its cells: the structured identity, never expanded
        mats = tuple(Identity(dom.sizes[a]) if t == "identity" else wk.query_matrix(a, t) for a, t in zip(key, types))
        est = kron_apply(mats, cells) if key else cells
        labels = [query_labels(dom.attributes[a], t, M) for a, t, M in zip(key, types, mats)]
        return EntryAnswer(names, names, labels, est, self.plan.query_variance(key))


def _contract_totals(q: np.ndarray, key: AttrSet, sub: AttrSet, bases) -> np.ndarray:
    """``q`` contracted with ``a_j`` along every attribute of ``key`` not in ``sub`` (the mean
    over those axes for Algorithm 4's ``a_j = 1/n_j``): the weights of ``r_sub`` in ``q · x̂``."""
    drop = tuple(j for j, a in enumerate(key) if a not in sub)
    if not drop:
        return q
    if all(bases[key[j]].uniform_total for j in drop):
        return q.sum(axis=drop) / float(np.prod([q.shape[j] for j in drop]))
    out = q
    for j in reversed(drop):  # highest axis first: lower axis numbers stay valid
        out = np.tensordot(out, bases[key[j]].total_inv, axes=([j], [0]))
    return out


def _check_answerable(domain, sub, bases, qa) -> None:
    """The query must lie in the span of ``[1ᵀ; Sub]`` along every attribute (ResidualPlanner+
    with a strategy that does not span every value cannot answer every query)."""
    for axis, (a, b) in enumerate(zip(sub, bases)):
        if b.is_identity:
            continue
        m = np.moveaxis(qa, axis, -1).reshape(-1, b.n)
        m = m - np.outer(m @ b.total_inv, np.ones(b.n))
        back = m @ b.Sub_inv @ b.Sub
        if np.linalg.norm(m - back) > 1e-8 * max(1.0, float(np.linalg.norm(m))):
            raise NotMeasuredError(
                f"the query is not answerable from the measurements: on {domain.names[a]!r} it is "
                "not a combination of the strategy's rows"
            )
