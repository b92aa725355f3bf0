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
from functools import cached_property
from math import prod

import numpy as np

from ..._linalg.query_sets import IntervalQueries
from ...errors import PlanError
from .level_operators import LevelOperator
from .levels import AttributeLevels, level_grams, quadratic_diagonal
from .query_rows import as_query_rows, dense_rows, quad_diag, query_key

__all__ = ["AttributeBasis", "JointLevelGLS", "mode_products"]

AttrSet = tuple[int, ...]


def mode_products(mats, t: np.ndarray) -> np.ndarray:
    """``(⊗ mats) · vec(t)`` as a tensor: ``mats[k]`` applied along axis ``k`` (C order)."""
    for ax, m in enumerate(mats):
        if m is not None:  # None: that axis is left as it is
            t = np.moveaxis(np.tensordot(m, t, axes=([1], [ax])), 0, ax)
    return t


def _subsets(a: AttrSet):
    for k in range(len(a) + 1):
        yield from itertools.combinations(a, k)


#: from this many cells an attribute's per-level query diagonals use its level rows (fewer flops;
#: below it the Gram form is kept, so that smaller plans are bit-for-bit what they were)
ROWS_FORM_CELLS = 512


#: from this many cells a tree (or cells) attribute's basis is structured: ``t``, ``c``, ``τ`` and
#: every product with ``G⁻¹`` / ``P`` / ``K^ℓ`` come from the level operators
#: (:mod:`.level_operators`, O(n L) per vector); the dense ``P`` and ``K^ℓ`` are formed only where a
#: dense form is asked (all ranges, explicit covariances, several attributes in one query)
STRUCTURED_CELLS = 1024


@dataclass(frozen=True, eq=False)
class AttributeBasis:
    """One attribute's ``t = G⁻¹1``, ``c = 1ᵀt``, ``P = G⁻¹ - ttᵀ/c``, level Grams ``K^ℓ`` and
    ``τ^ℓ = tᵀK^ℓt`` (module docstring). ``P``, ``K^ℓ`` and the level rows are dense matrices
    built on first use; a structured basis (``op``: trees and cells from
    :data:`STRUCTURED_CELLS` cells) applies them without forming them (:meth:`p_apply`,
    :meth:`k_apply`).

    Examples
    --------
    >>> from dpmatrix.planners._pure.levels import AttributeLevels
    >>> b = AttributeBasis.of(AttributeLevels(3, "cells", 0, (1.0,), 3.0))
    >>> b.c, np.allclose(b.p, np.eye(3) - 1 / 3)
    (3.0, True)
    """

    t: np.ndarray
    c: float
    tau: np.ndarray
    levels: AttributeLevels
    _stats: dict = field(default_factory=dict, repr=False)
    #: the level operators (structured basis) or None (dense ``G⁻¹`` from the levels' Gram)
    op: LevelOperator | None = field(default=None, repr=False)

    @classmethod
    def of(cls, levels: AttributeLevels) -> AttributeBasis:
        if levels.n >= STRUCTURED_CELLS and levels.kind in ("tree", "cells"):
            op = LevelOperator(levels.kind, levels.n, levels.branching)
            t = op.solve(levels.weights, np.ones((levels.n, 1)))[:, 0]
            tau = np.array([float(np.sum(op.apply(lev, t) ** 2)) for lev in range(op.n_levels)])
            return cls(t, float(t.sum()), tau, levels, op=op)
        gi = levels.gram_inverse
        t = gi.sum(axis=1)
        c = float(t.sum())
        grams = level_grams(levels.kind, levels.n, levels.branching)
        tau = np.array([float(t @ k @ t) for k in grams])
        out = cls(t, c, tau, levels)
        out._stats["p"] = gi - np.outer(t, t) / c
        return out

    @property
    def p(self) -> np.ndarray:
        """``P = G⁻¹ - ttᵀ/c`` (dense; a structured basis forms it from ``n`` solves)."""
        hit = self._stats.get("p")
        if hit is None:
            hit = self._stats["p"] = self.p_apply(np.eye(self.t.size))
        return hit

    @property
    def grams(self) -> tuple[np.ndarray, ...]:
        """The level Grams ``K^ℓ`` (dense, cached by :func:`~.levels.level_grams`)."""
        return level_grams(self.levels.kind, self.levels.n, self.levels.branching)

    @property
    def rows(self) -> tuple[np.ndarray, ...]:
        """The level matrices ``H^ℓ`` (float) from :data:`ROWS_FORM_CELLS` cells, else ``()``:
        large attributes form the per-level diagonals as ``‖H^ℓ P rᵀ‖²`` (O(m n r_ℓ)) instead of
        ``r P K^ℓ P rᵀ`` (O(n³) per level)."""
        if self.levels.n < ROWS_FORM_CELLS:
            return ()
        hit = self._stats.get("rows")
        if hit is None:
            hit = self._stats["rows"] = tuple(h.astype(float) for h in self.levels.levels())
        return hit

    def p_apply(self, x: np.ndarray, axis: int = 0) -> np.ndarray:
        """``P`` applied along ``axis`` of ``x`` (structured: ``G⁻¹x - t (tᵀx)/c``)."""
        x = np.asarray(x, dtype=float)
        if self.op is None:
            return mode_products([self.p if ax == axis else None for ax in range(x.ndim)], x)
        g = self.op.solve(self.levels.weights, x, axis=axis)
        tx = np.tensordot(self.t, x, axes=([0], [axis]))  # tᵀx: the other axes
        return g - np.moveaxis(np.multiply.outer(self.t, tx), 0, axis) / self.c

    def k_apply(self, level: int, x: np.ndarray, axis: int = 0) -> np.ndarray:
        """``K^ℓ = H^{ℓᵀ}H^ℓ`` applied along ``axis`` of ``x``."""
        if self.op is None:
            return mode_products([self.grams[level] if ax == axis else None for ax in range(x.ndim)], x)
        return self.op.adjoint(level, self.op.apply(level, x, axis=axis), axis=axis)

    def _cached(self, key, make):
        hit = self._stats.get(key)
        if hit is None:
            if len(self._stats) > 64:
                self._stats.clear()
            hit = self._stats[key] = make()
        return hit

    def diag_forms(self, r) -> tuple[np.ndarray, np.ndarray]:
        """Per-level diagonals of the query rows ``r`` (``m × n``; an array or query rows,
        :mod:`.query_rows`): an ``(L+1, 3, m)`` array of ``diag(r F K^ℓ F'ᵀ rᵀ)`` for
        ``(F, F') = (P, P)``, ``(P, ttᵀ)`` (= ``(ttᵀ, P)``), ``(ttᵀ, ttᵀ)``, and ``(r t)²`` (the
        factor of an attribute outside the marginal). Interval rows (cells, prefixes, ranges) are
        never expanded: ``r t`` and ``r (P K^ℓ t)`` by cumulative sums, ``diag(r P K^ℓ P rᵀ)`` by
        2-D prefix sums of ``P K^ℓ P = (H^ℓ P)ᵀ(H^ℓ P)``."""
        r = as_query_rows(r)

        def make():
            rt = r.apply(self.t[:, None])[:, 0]
            if isinstance(r, IntervalQueries):
                if self.rows:  # (H P)ᵀ(H P): n² r_ℓ flops per level instead of 2n³
                    pp = []
                    for h in self.rows:
                        hp = h @ self.p
                        pp.append(quad_diag(r, hp.T @ hp))
                else:
                    pp = [quad_diag(r, self.p @ k @ self.p) for k in self.grams]
                pt = [r.apply((self.p @ (k @ self.t))[:, None])[:, 0] * rt for k in self.grams]
            else:
                d = r.q
                rp = d @ self.p
                if self.rows:  # same values, another rounding: only from ROWS_FORM_CELLS cells
                    pp = [np.einsum("ij,ij->i", x, x) for x in (rp @ h.T for h in self.rows)]
                else:
                    pp = [quadratic_diagonal(d, self.p @ k @ self.p) for k in self.grams]
                pt = [(rp @ (k @ self.t)) * rt for k in self.grams]
            tt = [tau * rt * rt for tau in self.tau]
            return np.stack([np.stack(x) for x in (pp, pt, tt)], axis=1), rt * rt

        return self._cached((query_key(r), "diag"), make)

    def full_forms(self, r) -> tuple[dict, np.ndarray]:
        """As :meth:`diag_forms` with the full ``m × m`` matrices, keyed by ``(in S, in S')``
        (explicit covariances of small query sets)."""
        r = as_query_rows(r)

        def make():
            d = dense_rows(r)
            rt = d @ self.t
            rp = d @ self.p
            pp = np.array([rp @ k @ rp.T for k in self.grams])
            pt = np.array([np.outer(rp @ (k @ self.t), rt) for k in self.grams])
            return {(True, True): pp, (True, False): pt, (False, True): pt.transpose(0, 2, 1),
                    (False, False): self.tau[:, None, None] * np.outer(rt, rt)}, np.outer(rt, rt)

        return self._cached((query_key(r), "full"), make)


#: queries per block of the structured diagonals (memory: n × block floats)
_QUERY_BLOCK = 256


def _query_columns(r, lo: int, hi: int) -> np.ndarray:
    """Queries ``lo..hi-1`` of ``r`` as the columns of an ``n × k`` array."""
    if isinstance(r, IntervalQueries):
        k = hi - lo
        d = np.zeros((r.n + 1, k))
        cols = np.arange(k)
        np.add.at(d, (r.a[lo:hi], cols), 1.0)
        np.add.at(d, (r.b[lo:hi] + 1, cols), -1.0)
        return np.cumsum(d, axis=0)[: r.n]
    return r.q[lo:hi].T


def _structured_pp(base: AttributeBasis, gamma: np.ndarray, r) -> np.ndarray:
    """``Σ_ℓ γ[ℓ] ‖H^ℓ P q‖²`` for every query ``q`` of ``r`` (``= q P K_γ P qᵀ``), from the level
    operators in blocks of :data:`_QUERY_BLOCK` queries: O(n L) per query, no n × n matrix."""
    out = np.empty(r.m)
    for lo in range(0, r.m, _QUERY_BLOCK):
        hi = min(lo + _QUERY_BLOCK, r.m)
        x = base.p_apply(_query_columns(r, lo, hi))
        acc = np.zeros(hi - lo)
        for lev, g in enumerate(gamma):
            if g != 0.0:
                acc += float(g) * np.sum(base.op.apply(lev, x) ** 2, axis=0)
        out[lo:hi] = acc
    return out


#: largest intermediate (floats) of a variance contraction before the queries are chunked
_CHUNK = 1 << 22


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

    @cached_property
    def _containing(self) -> dict[AttrSet, list[int]]:
        """The measured marginals containing each subset of a measured marginal."""
        out: dict[AttrSet, list[int]] = {}
        for j, a in enumerate(self.marginals):
            for s in _subsets(a):
                out.setdefault(s, []).append(j)
        return out

    @cached_property
    def _deltas(self) -> dict[AttrSet, float]:
        return {s: sum(self._total_precision(j) for j in js) for s, js in self._containing.items()}

    def delta(self, s: AttrSet) -> float:
        """``δ_S = Σ_{A⊇S} ω_A / C_A`` (0 when no measured marginal contains ``S``)."""
        return self._deltas.get(tuple(s), 0.0)

    def answerable(self, k: AttrSet) -> bool:
        """Whether the marginal on ``k`` lies inside a measured marginal (then it is identified)."""
        return self.delta(tuple(k)) > 0

    def sigma(self, s: AttrSet, k: AttrSet) -> float:
        """``σ_S = C_S / (C_K δ_S)``."""
        return prod(self.bases[i].c for i in s) / (prod(self.bases[i].c for i in k) * self.delta(s))

    @cached_property
    def _sums(self) -> dict[tuple[AttrSet, AttrSet], np.ndarray]:
        """``N(I, T) = Σ_{A⊇T} (ω_A/C_A)² Σ_{ℓ_{A∖I}} ω_ℓ² v_{A,ℓ} Π_{i∈A∖I} τ_i^{ℓ_i}`` for
        ``I ⊆ T`` (a tensor over the levels of ``I``): ``Σ_A 3^{|A|}`` additions in all."""
        out: dict[tuple[AttrSet, AttrSet], np.ndarray] = {}
        for j, a in enumerate(self.marginals):
            scale = self._total_precision(j) ** 2
            for inter in _subsets(a):
                g = self.coefficients[j]
                for ax in reversed(range(len(a))):  # contract the levels of A ∖ I with τ_i
                    if a[ax] not in inter:
                        g = np.tensordot(g, self.bases[a[ax]].tau, axes=([ax], [0]))
                g = np.asarray(g, dtype=float) * scale
                rest = tuple(i for i in a if i not in inter)
                for extra in _subsets(rest):
                    key = (inter, tuple(sorted(inter + extra)))
                    out[key] = out[key] + g if key in out else g
        return out

    def _pooled(self, k: AttrSet) -> dict[AttrSet, np.ndarray]:
        """``γ_I`` for every ``I ⊆ K`` met by a measured marginal, by inclusion–exclusion over
        the marginals containing ``I ∪ J`` (``J ⊆ K ∖ I``): ``γ_I = Σ_J (-1)^{|J|} N(I, I ∪ J)``."""
        key = ("pooled", k)
        if key in self._cache:
            return self._cache[key]
        sums = self._sums
        out: dict[AttrSet, np.ndarray] = {}
        for inter in _subsets(k):
            if (inter, inter) not in sums:
                continue
            rest = tuple(i for i in k if i not in inter)
            g = None
            for extra in _subsets(rest):
                n = sums.get((inter, tuple(sorted(inter + extra))))
                if n is not None:
                    term = n if len(extra) % 2 == 0 else -n
                    g = term if g is None else g + term
            g = np.maximum(g, 0.0)  # a sum of non-negative terms (clip the cancellation's round-off)
            if np.any(g > 0):
                out[inter] = g
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[key] = out
        return out

    # -- variances ------------------------------------------------------------------------------
    def _pair_weights(self, inter: AttrSet, sig: Mapping[AttrSet, float]) -> np.ndarray:
        """``W[c] = Σ σ_S σ_{S'}`` over the ``(S, S')`` whose per-attribute parts are ``c_i``
        (0: in both, 1: in one, 2: in neither), a ``(3, …, 3)`` tensor."""
        w = np.zeros((3,) * len(inter))
        subs = list(_subsets(inter))
        for s in subs:
            for s2 in subs:
                w[tuple(2 - (i in s) - (i in s2) for i in inter)] += sig[s] * sig[s2]
        return w

    def _diag(self, k: AttrSet, rows: Sequence[np.ndarray]) -> np.ndarray:
        rows = [as_query_rows(r) for r in rows]
        if len(k) == 1:
            return self._diag_one(k[0], rows[0])
        return self._diag_levels(k, rows)

    def _diag_one(self, i: int, r) -> np.ndarray:
        """The variances of one attribute's queries ``r`` with the levels contracted first: for
        ``K = (i)`` the sum over levels is linear in ``K^ℓ``, so with ``K_γ = Σ_ℓ γ[ℓ] K^ℓ``

            v_q = w_0 r_q P K_γ P r_qᵀ + w_1 (r_q P K_γ t)(r_q t) + w_2 (Σ_ℓ γ[ℓ] τ^ℓ)(r_q t)²

        (``w`` the pair weights of :meth:`_pair_weights`, the term ``I = ∅`` adds
        ``γ_∅ (r_q t)²``): one quadratic diagonal for all levels instead of one per level (the
        same sum as :meth:`_diag_levels`, tested)."""
        base = self.bases[i]
        rt = r.apply(base.t[:, None])[:, 0]
        total = np.zeros(r.m)
        sig = {s: self.sigma(s, (i,)) for s in _subsets((i,))}
        for inter, gamma in self._pooled((i,)).items():
            w = self._pair_weights(inter, sig)
            if not inter:
                total += float(w.reshape(())) * float(gamma) * rt * rt
                continue
            gamma = np.asarray(gamma, dtype=float)
            if base.op is not None and r.m <= 4 * r.n:  # structured: no n × n matrix
                if w[0] != 0.0:
                    total += w[0] * _structured_pp(base, gamma, r)
                if w[1] != 0.0:
                    kt = sum(float(g) * base.k_apply(lev, base.t) for lev, g in enumerate(gamma) if g != 0.0)
                    total += w[1] * r.apply(base.p_apply(kt)[:, None])[:, 0] * rt
            else:
                kg = sum(float(g) * kl for g, kl in zip(gamma, base.grams) if g != 0.0)
                pk = base.p @ kg
                if w[0] != 0.0:
                    total += w[0] * quad_diag(r, pk @ base.p)
                if w[1] != 0.0:
                    total += w[1] * r.apply((pk @ base.t)[:, None])[:, 0] * rt
            total += w[2] * float(gamma @ base.tau) * rt * rt
        return total

    def _diag_levels(self, k: AttrSet, rows) -> np.ndarray:
        """The variances from the per-level diagonals (:meth:`AttributeBasis.diag_forms`)."""
        forms = {i: self.bases[i].diag_forms(r) for i, r in zip(k, rows)}
        total = np.zeros(tuple(r.m for r in rows))
        sig = {s: self.sigma(s, k) for s in _subsets(k)}
        for inter, gamma in self._pooled(k).items():
            w = self._pair_weights(inter, sig)
            if inter:
                m0 = forms[inter[0]][0].shape[2]
                size = 3 ** len(inter) * prod(forms[i][0].shape[2] for i in inter)
                step = max(1, m0 * _CHUNK // max(size, 1))
                parts = []
                for lo in range(0, m0, step):
                    t = gamma
                    for n, i in enumerate(inter):  # consume a level axis, append (part, query) axes
                        f = forms[i][0][:, :, lo:lo + step] if n == 0 else forms[i][0]
                        t = np.tensordot(t, f, axes=([0], [0]))
                    parts.append(np.tensordot(w, t, axes=(list(range(len(inter))),
                                                           list(range(0, 2 * len(inter), 2)))))
                acc = np.concatenate(parts, axis=0)
            else:
                acc = w.reshape(()) * np.asarray(gamma, dtype=float)
            for i in k:  # outer factors of K ∖ I, then the axes in K order
                if i not in inter:
                    acc = np.multiply.outer(acc, forms[i][1])
            order = list(inter) + [i for i in k if i not in inter]
            total += np.transpose(acc, [order.index(i) for i in k])
        return total

    def _full(self, k: AttrSet, rows: Sequence[np.ndarray]) -> np.ndarray:
        rows = [as_query_rows(r) for r in rows]
        forms = {i: self.bases[i].full_forms(r) for i, r in zip(k, rows)}
        m = [r.m for r in rows]
        total = np.zeros(tuple(x for x in m for _ in range(2)))
        sig = {s: self.sigma(s, k) for s in _subsets(k)}
        for inter, gamma in self._pooled(k).items():
            subs = list(_subsets(inter))
            acc = None
            for s in subs:
                for s2 in subs:
                    t = gamma
                    for i in inter:  # consume the leading level axis, append the query axes
                        t = np.tensordot(t, forms[i][0][(i in s, i in s2)], axes=([0], [0]))
                    t = sig[s] * sig[s2] * t
                    acc = t if acc is None else acc + t
            for i in k:
                if i not in inter:
                    acc = np.multiply.outer(acc, forms[i][1])
            order = list(inter) + [i for i in k if i not in inter]
            total += np.transpose(acc, [2 * order.index(i) + e for i in k for e in range(2)])
        return total

    def kron_variance(self, k: AttrSet, rows: Sequence[np.ndarray]) -> np.ndarray:
        """Variances of the queries ``⊗_{i∈K} rows[i]`` on the ``K``-table (tensor of shape
        ``(rows[i].shape[0], …)``), exact under the noise the coefficients were built with."""
        return self._diag(tuple(k), rows)

    def kron_covariance(self, k: AttrSet, rows: Sequence[np.ndarray]) -> np.ndarray:
        """Dense covariance of the queries ``⊗ rows[i]`` (C order, ``m × m``)."""
        t = self._full(tuple(k), rows)
        d = len(rows)
        m = prod(as_query_rows(r).m for r in rows)
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
    def component(self, s: AttrSet, table) -> np.ndarray:
        """``ρ_S = Σ_{A⊇S} (ω_A/C_A) (⊗_S P_i ⊗_{A∖S} t_iᵀ) b_A``; ``table(j)`` returns ``b_{A_j}``."""
        ss = set(s)
        acc = np.zeros(tuple(self.bases[i].t.size for i in s))
        for j in self._containing.get(tuple(s), []):
            a = self.marginals[j]
            t = table(j)
            for ax in reversed(range(len(a))):
                if a[ax] not in ss:
                    t = np.tensordot(t, self.bases[a[ax]].t, axes=([ax], [0]))
            for ax, i in enumerate(s):
                t = self.bases[i].p_apply(t, axis=ax)
            acc = acc + self._total_precision(j) * t
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
