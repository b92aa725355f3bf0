"""Joint GLS over every group of every workload marginal of a level-strategy plan (consistent answers).

Setting (:mod:`.hierarchical`). Attribute ``i`` has one level strategy ``H_i^0..H_i^{L_i}`` with
shares ``η_i`` in every marginal that contains it; marginal ``A``'s group ``ℓ`` releases
``⊗_{i∈A} H_i^{ℓ_i}`` applied to the ``A``-table with noise variance ``v_{A,ℓ}`` and is weighted by
``ω_A ω_ℓ`` (``ω_A = ε_A²``, ``ω_ℓ = Π_i η_{i,ℓ_i}²``: the continuous-model precisions). On the
table of the union ``U`` of the measured attributes the weighted Gram is

    Γ = Σ_A ω_A ⊗_{i∈A} G_i ⊗_{i∈U∖A} 11ᵀ,    G_i = Σ_ℓ η_{i,ℓ}² H_i^{ℓᵀ} H_i^ℓ.

**Change of basis.** With ``t_i = G_i⁻¹1``, ``c_i = 1ᵀt_i`` and ``B_i`` a ``G_i``-orthonormal basis
of ``{v : 1ᵀv = 0}``, ``T_i = [t_i, B_i]`` gives ``T_iᵀ G_i T_i = diag(c_i, I)`` and
``T_iᵀ 11ᵀ T_i = diag(c_i², 0)`` (``t_iᵀ G_i B_i = 1ᵀ B_i = 0``): ``G_i`` and ``11ᵀ`` are
diagonalized together even when a tree's blocks are uneven. In the coordinates ``x = ⊗ T_i z`` the
Gram is block diagonal over the subsets ``S ⊆ U`` of attributes in their ``B``-part, with block
``d_S I``, ``d_S = Σ_{A⊇S} ω_A Π_{i∈A∖S} c_i Π_{i∈U∖A} c_i² = (C_U²/C_S) δ_S`` where
``C_X = Π_{i∈X} c_i`` and ``δ_S = Σ_{A⊇S} ω_A / C_A`` (``C_A/ω_A`` is the variance of marginal
``A``'s own estimate of the total, so ``δ_S`` adds the precisions of the totals of the marginals
containing ``S``). Hence

    Γ⁺ = Σ_S d_S⁻¹ ⊗_{i∈S} P_i ⊗_{i∈U∖S} t_i t_iᵀ,    P_i = B_i B_iᵀ = G_i⁻¹ - t_i t_iᵀ / c_i,

a generalized inverse of ``Γ`` that is exact on every marginal inside a measured one (checked
against ``pinv`` in the tests); ``B_i`` is never formed.

**Estimate.** With ``b_A = Σ_ℓ ω_ℓ (⊗ H^{ℓᵀ}) y_{A,ℓ}`` (the ``A``-table that the per-marginal GLS
turns into ``(⊗ G_i⁻¹) b_A``) the joint GLS estimate of the marginal on ``K`` (inside a measured
marginal) is, after the factors of ``U ∖ K`` cancel,

    x̂_K = Σ_{S⊆K} σ_S ρ_S ⊗_{i∈K∖S} t_i,   σ_S = C_S / (C_K δ_S),
    ρ_S = Σ_{A⊇S} (ω_A / C_A) (⊗_{i∈S} P_i ⊗_{i∈A∖S} t_iᵀ) b_A        (an ``S``-table),

one estimate of the whole table, so every answer is consistent with every other. With one
marginal it is ``(⊗ G_i⁻¹) b_A`` (``P_i + t_i t_iᵀ/c_i = G_i⁻¹``).

**Exact covariance** under the released noise (the ``v_{A,ℓ}`` of discrete Laplace are not in
product form): ``x̂_K`` is linear in the ``b_A``, so ``Cov = Σ_A Σ_ℓ ω_ℓ² v_{A,ℓ} Λ_A (⊗
K_i^{ℓ_i}) Λ_Aᵀ`` with ``K_i^ℓ = H_i^{ℓᵀ} H_i^ℓ`` and ``Λ_A = (ω_A/C_A) Σ_{S ⊆ I} σ_S ⊗_i F_i^S``,
``I = A ∩ K``: ``F_i^S = P_i`` (``i ∈ S``), ``t_i t_iᵀ`` (``i ∈ I∖S``), the column ``t_i``
(``i ∈ K∖A``), the row ``t_iᵀ`` (``i ∈ A∖K``). The attributes of ``A ∖ K`` enter only through
``τ_i^ℓ = t_iᵀ K_i^ℓ t_i``, so the marginals meeting ``K`` in the same ``I`` pool into one
coefficient tensor over the levels of ``I``,

    γ_I = Σ_{A: A∩K=I} (ω_A/C_A)² Σ_{ℓ_{A∖I}} ω_ℓ² v_{A,ℓ} Π_{i∈A∖I} τ_i^{ℓ_i},

and the variance of a product query ``⊗_{i∈K} r_i`` is

    Σ_I Σ_{S,S'⊆I} σ_S σ_{S'} Σ_{ℓ_I} γ_I[ℓ_I] Π_{i∈I} r_i F^S_i K_i^{ℓ_i} F^{S'ᵀ}_i r_iᵀ Π_{i∈K∖I} (r_i t_i)²:

per-attribute diagonals (one per level and pair of parts) contracted with ``γ_I`` by mode
products, for all the queries of a workload marginal at once (:meth:`JointLevelGLS.kron_variance`);
the same sums with matrices give dense covariances, and an arbitrary query vector ``q`` on the
``K``-table has variance ``Σ_I Σ_{ℓ_I} γ_I[ℓ_I] ⟨μ_I, (⊗ K^{ℓ}) μ_I⟩`` with the ``I``-table
``μ_I = Σ_{S⊆I} σ_S (⊗_{S} P_i ⊗_{I∖S} t_i t_iᵀ) (q ×_{K∖I} t_iᵀ)``. No object larger than a
marginal's table is built; the work per query marginal is one pooled tensor per intersection
``I`` and ``4^{|I|}`` mode products.

In the continuous model (``v = 2/(ω_A ω_ℓ)``) this is the exact GLS and the covariance is
``2 Q_K Γ⁺ Q_Kᵀ``: it uses the data of every marginal, so no query's variance is larger than
from its own marginal's groups alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import prod

import numpy as np

from ...errors import NotMeasuredError, PlanError
from .levels import AttributeLevels, interval_rows, quadratic_diagonal

__all__ = ["AttributeBasis", "JointLevelGLS", "mode_products"]

AttrSet = tuple[int, ...]


def mode_products(mats, t: np.ndarray) -> np.ndarray:
    """``(⊗ mats) · vec(t)`` as a tensor: ``mats[k]`` applied along axis ``k`` (C order)."""
    for ax, m in enumerate(mats):
        t = np.moveaxis(np.tensordot(m, t, axes=([1], [ax])), 0, ax)
    return t


def _subsets(a: AttrSet):
    for k in range(len(a) + 1):
        yield from itertools.combinations(a, k)


@dataclass(frozen=True, eq=False)
class AttributeBasis:
    """One attribute's ``t = G⁻¹1``, ``c = 1ᵀt``, ``P = G⁻¹ - ttᵀ/c``, level Grams ``K^ℓ`` and
    ``τ^ℓ = tᵀK^ℓt`` (module docstring).

    Examples
    --------
    >>> from dpmatrix.planners.pure.levels import AttributeLevels
    >>> b = AttributeBasis.of(AttributeLevels(3, "cells", 0, (1.0,), 3.0))
    >>> b.c, np.allclose(b.p, np.eye(3) - 1 / 3)
    (3.0, True)
    """

    t: np.ndarray
    c: float
    p: np.ndarray
    grams: tuple[np.ndarray, ...]
    tau: np.ndarray
    _stats: dict = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, levels: AttributeLevels) -> AttributeBasis:
        gi = levels.gram_inverse
        t = gi.sum(axis=1)
        c = float(t.sum())
        grams = tuple((h.T @ h).astype(float) for h in levels.levels())
        tau = np.array([float(t @ k @ t) for k in grams])
        return cls(t, c, gi - np.outer(t, t) / c, grams, tau)

    def stats(self, r: np.ndarray, full: bool):
        """Per-level forms of the query rows ``r`` (``m × n``): ``{(s, s'): (L+1, m)}`` arrays
        ``diag(r F^s K^ℓ F^{s'ᵀ} rᵀ)`` for ``s, s' ∈ {P-part (True), t-part (False)}`` and
        ``(r t)²`` for an attribute outside ``A`` (or the full ``m × m`` matrices if ``full``)."""
        key = (r.shape, r.tobytes(), full)
        hit = self._stats.get(key)
        if hit is not None:
            return hit
        rt = r @ self.t
        rp = r @ self.p
        if full:
            pp = np.array([rp @ k @ rp.T for k in self.grams])
            pt = np.array([np.outer(rp @ (k @ self.t), rt) for k in self.grams])
            out = {(True, True): pp, (True, False): pt, (False, True): pt.transpose(0, 2, 1),
                   (False, False): self.tau[:, None, None] * np.outer(rt, rt)}, np.outer(rt, rt)
        else:
            iv = interval_rows(r)
            pp = np.array([quadratic_diagonal(r, self.p @ k @ self.p, iv) for k in self.grams])
            pt = np.array([(rp @ (k @ self.t)) * rt for k in self.grams])
            out = {(True, True): pp, (True, False): pt, (False, True): pt,
                   (False, False): self.tau[:, None] * (rt * rt)}, rt * rt
        if len(self._stats) > 64:
            self._stats.clear()
        self._stats[key] = out
        return out


@dataclass(frozen=True, eq=False)
class JointLevelGLS:
    """The joint GLS of a level-strategy plan (module docstring).

    Parameters
    ----------
    bases : mapping of int to AttributeBasis
        One per attribute of a measured marginal.
    marginals : tuple of tuple of int
        The measured marginals ``A`` (sorted attribute positions).
    omega : tuple of float
        ``ω_A`` (> 0) of each.
    coefficients : tuple of numpy.ndarray
        ``ω_ℓ² v_{A,ℓ}`` of each, a tensor over the level tuples (shape ``(L_i + 1 for i ∈ A)``).
    """

    bases: Mapping[int, AttributeBasis]
    marginals: tuple[AttrSet, ...]
    omega: tuple[float, ...]
    coefficients: tuple[np.ndarray, ...]
    _cache: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not (len(self.marginals) == len(self.omega) == len(self.coefficients)):
            raise PlanError("one weight and one coefficient tensor per measured marginal are needed")
        if any(w <= 0 for w in self.omega):
            raise PlanError("a measured marginal needs a positive weight")

    # -- subsets --------------------------------------------------------------------------------
    def _total_precision(self, j: int) -> float:
        """``ω_A / C_A``."""
        return self.omega[j] / prod(self.bases[i].c for i in self.marginals[j])

    def delta(self, s: AttrSet) -> float:
        """``δ_S = Σ_{A⊇S} ω_A / C_A`` (0 when no measured marginal contains ``S``)."""
        key = ("delta", s)
        if key not in self._cache:
            ss = set(s)
            self._cache[key] = sum(self._total_precision(j) for j, a in enumerate(self.marginals) if ss <= set(a))
        return self._cache[key]

    def answerable(self, k: AttrSet) -> bool:
        """Whether the marginal on ``k`` lies inside a measured marginal (then it is identified)."""
        return self.delta(tuple(k)) > 0

    def require(self, k: AttrSet, names=None) -> None:
        if not self.answerable(k):
            raise NotMeasuredError(
                f"{list(names) if names is not None else list(k)} is not inside a measured marginal of the workload"
            )

    def sigma(self, s: AttrSet, k: AttrSet) -> float:
        """``σ_S = C_S / (C_K δ_S)``."""
        return prod(self.bases[i].c for i in s) / (prod(self.bases[i].c for i in k) * self.delta(s))

    def _pooled(self, k: AttrSet) -> dict[AttrSet, np.ndarray]:
        """``γ_I`` for every intersection ``I = A ∩ K`` of a measured marginal with ``K``."""
        key = ("pooled", k)
        if key in self._cache:
            return self._cache[key]
        ks = set(k)
        out: dict[AttrSet, np.ndarray] = {}
        for j, a in enumerate(self.marginals):
            inter = tuple(i for i in a if i in ks)
            g = self.coefficients[j]
            for ax in reversed(range(len(a))):  # contract the levels of A ∖ K with τ_i
                if a[ax] not in ks:
                    g = np.tensordot(g, self.bases[a[ax]].tau, axes=([ax], [0]))
            g = np.asarray(g, dtype=float) * self._total_precision(j) ** 2
            out[inter] = out[inter] + g if inter in out else g
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[key] = out
        return out

    # -- variances ------------------------------------------------------------------------------
    def _combine(self, k: AttrSet, rows: Sequence[np.ndarray], full: bool) -> np.ndarray:
        stats = {i: self.bases[i].stats(np.asarray(r, dtype=float), full) for i, r in zip(k, rows)}
        m = [np.asarray(r).shape[0] for r in rows]
        per_attr = 2 if full else 1
        total = np.zeros(tuple(x for x in m for _ in range(per_attr)))
        sig = {s: self.sigma(s, k) for s in _subsets(k)}
        for inter, gamma in self._pooled(k).items():
            subs = list(_subsets(inter))
            acc = None
            for x, s in enumerate(subs):
                for y, s2 in enumerate(subs):
                    if not full and y < x:
                        continue  # diagonals are symmetric in (S, S')
                    w = sig[s] * sig[s2] * (1.0 if full or x == y else 2.0)
                    t = gamma
                    for i in inter:  # consume the leading level axis, append the query axes
                        t = np.tensordot(t, stats[i][0][(i in s, i in s2)], axes=([0], [0]))
                    acc = w * t if acc is None else acc + w * t
            # outer factors of K ∖ I, then the axes in K order
            for i in k:
                if i not in inter:
                    acc = np.multiply.outer(acc, stats[i][1])
            order = list(inter) + [i for i in k if i not in inter]
            perm = [order.index(i) for i in k]
            if full:
                perm = [per_attr * p + e for p in perm for e in range(per_attr)]
            total += np.transpose(acc, perm)
        return total

    def kron_variance(self, k: AttrSet, rows: Sequence[np.ndarray]) -> np.ndarray:
        """Variances of the queries ``⊗_{i∈K} rows[i]`` on the ``K``-table (tensor of shape
        ``(rows[i].shape[0], …)``), exact under the noise the coefficients were built with."""
        return self._combine(tuple(k), rows, full=False)

    def kron_covariance(self, k: AttrSet, rows: Sequence[np.ndarray]) -> np.ndarray:
        """Dense covariance of the queries ``⊗ rows[i]`` (C order, ``m × m``)."""
        t = self._combine(tuple(k), rows, full=True)
        d = len(rows)
        m = prod(np.asarray(r).shape[0] for r in rows)
        return np.transpose(t, list(range(0, 2 * d, 2)) + list(range(1, 2 * d, 2))).reshape(m, m)

    def vector_variance(self, k: AttrSet, q: np.ndarray) -> float:
        """Variance of ``⟨q, x̂_K⟩`` for any ``q`` shaped like the ``K``-table."""
        k = tuple(k)
        q = np.asarray(q, dtype=float)
        total = 0.0
        for inter, gamma in self._pooled(k).items():
            # q ×_{K∖I} t_iᵀ: an I-table
            qi = q
            for ax in reversed(range(len(k))):
                if k[ax] not in inter:
                    qi = np.tensordot(qi, self.bases[k[ax]].t, axes=([ax], [0]))
            mu = np.zeros(qi.shape)
            for s in _subsets(inter):
                mats = [self.bases[i].p if i in s else np.outer(self.bases[i].t, self.bases[i].t) for i in inter]
                mu = mu + self.sigma(s, k) * mode_products(mats, qi)
            grams = [self.bases[i].grams for i in inter]
            for lev in itertools.product(*[range(len(g)) for g in grams]):
                c = float(gamma[lev])
                if c == 0.0:
                    continue
                total += c * float(np.sum(mu * mode_products([g[x] for g, x in zip(grams, lev)], mu)))
        return total

    # -- estimation -----------------------------------------------------------------------------
    def component(self, s: AttrSet, tables: Mapping[int, np.ndarray]) -> np.ndarray:
        """``ρ_S = Σ_{A⊇S} (ω_A/C_A) (⊗_S P_i ⊗_{A∖S} t_iᵀ) b_A`` from ``tables[j] = b_{A_j}``."""
        ss = set(s)
        acc = np.zeros(tuple(self.bases[i].t.size for i in s))
        for j, a in enumerate(self.marginals):
            if not ss <= set(a):
                continue
            t = tables[j]
            for ax in reversed(range(len(a))):
                if a[ax] not in ss:
                    t = np.tensordot(t, self.bases[a[ax]].t, axes=([ax], [0]))
            acc = acc + self._total_precision(j) * mode_products([self.bases[i].p for i in s], t)
        return acc

    def marginal(self, k: AttrSet, component) -> np.ndarray:
        """``x̂_K = Σ_{S⊆K} σ_S ρ_S ⊗_{K∖S} t_i`` (``component(S)`` returns ``ρ_S``)."""
        k = tuple(k)
        out = np.zeros(tuple(self.bases[i].t.size for i in k))
        for s in _subsets(k):
            t = self.sigma(s, k) * component(s)
            for i in k:
                if i not in s:
                    t = np.multiply.outer(t, self.bases[i].t)
            order = list(s) + [i for i in k if i not in s]
            out = out + np.transpose(t, [order.index(i) for i in k])
        return out
