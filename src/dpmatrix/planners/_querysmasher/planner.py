"""The QuerySmasher / WFF planner: decompose the query workload into residual spaces, solve each
distinct sub-workload once, and spread the privacy budget (QuerySmasher paper, Theorem 7)."""

from __future__ import annotations

import hashlib
import itertools
import math
import time

import numpy as np

from ..._linalg import fourier as ff
from ..._privacy import resolve_pcost
from ..._queries import QueryGroup, QueryWorkload
from ..._solvers.lowdim_optimal import LowDimMechanism, optimize_subworkload
from ..._workload import Workload
from ...errors import PlanError, WorkloadError
from .decompose import decompose_batch
from .plan import SOLVERS, GramIntern, QuerySmasherPlan, Residual, RowInfo
from .submechanisms import (
    DenseMech,
    FourierMech,
    KronMech,
    SubMechanism,
    centre_basis,
    empty_mech,
    sqrt_factor,
)

__all__ = ["plan_querysmasher", "rebuild_querysmasher"]


# =============================================================================================
# planning
# =============================================================================================
class _Builder:
    def __init__(self, wk: QueryWorkload, solver: str, tol: float, max_exact_cells: int, max_iter: int,
                 factor_tol: float = 1e-6):
        self.factor_tol = factor_tol
        self.wk = wk
        self.solver = solver
        self.tol = tol
        self.max_exact_cells = max_exact_cells
        self.max_iter = max_iter
        self.grams = GramIntern()
        self.rowmats = GramIntern()
        self.rows: dict[int, RowInfo] = {}
        self.factor_cache: dict[tuple[int, float], LowDimMechanism] = {}
        self.explicit_cache: dict[tuple, dict] = {}

    # -- rows ---------------------------------------------------------------------------------
    def row(self, W: np.ndarray) -> int:
        rid = self.rowmats.add(W)
        if rid not in self.rows:
            W = self.rowmats[rid]
            s = W.mean(axis=1)
            Wc = W - s[:, None]
            G = Wc.T @ Wc
            zero = float(np.abs(G).max()) <= 1e-14 * max(1.0, float(np.abs(W).max()) ** 2)
            self.rows[rid] = RowInfo(Wc, s, float(s @ s), -1 if zero else self.grams.add(G))
        return rid

    # -- decomposition --------------------------------------------------------------------------
    def decompose(self):
        terms: dict[tuple[int, ...], dict[tuple, float]] = {}
        pieces: list[list[tuple]] = []
        factor_ids: dict[int, int] = {}
        for g in self.wk.groups:
            if g.is_kron and not g.scalar_weight:
                g_dense = QueryGroup(g.attrs, g.sizes, matrix=g.dense(), weights=g.weight_array().reshape(-1),
                                     label=g.label)
                g = g_dense
            gp: list[tuple] = []
            k = len(g.attrs)
            if g.is_kron:
                w = float(g.weights)
                rids = []
                for f in g.factors:
                    key = id(f)
                    if key not in factor_ids:
                        factor_ids[key] = self.row(f)
                    rids.append(factor_ids[key])
                for r in range(k + 1):
                    for pos in itertools.combinations(range(k), r):
                        kept = tuple(rids[p] for p in pos)
                        if any(self.rows[x].gid < 0 for x in kept):
                            continue
                        c = math.prod(self.rows[rids[p]].s2 for p in range(k) if p not in pos)
                        if c == 0:
                            continue
                        S = tuple(g.attrs[p] for p in pos)
                        tk = ("k", tuple(self.rows[x].gid for x in kept))
                        if w > 0:
                            d = terms.setdefault(S, {})
                            d[tk] = d.get(tk, 0.0) + w * c
                        gp.append((S, pos, (kept, {p: rids[p] for p in range(k) if p not in pos})))
            else:
                wv = g.weight_array().reshape(-1)
                ekey = (id(g.matrix), g.sizes, hashlib.blake2b(np.ascontiguousarray(wv).tobytes(), digest_size=16).digest())
                dec = self.explicit_cache.get(ekey)
                if dec is None:
                    dec = {}
                    for pos, P in decompose_batch(g.matrix, g.sizes).items():
                        scale = max(1.0, float(np.abs(g.matrix).max()))
                        if float(np.abs(P).max()) <= 1e-12 * scale:
                            continue
                        G = (P.T * wv) @ P
                        if not np.any(G):  # zero weights: the piece needs answering, costs nothing
                            dec[pos] = (P, None, 0.0)
                        elif len(pos) == 0:
                            dec[pos] = (P, ("k", ()), float(G[0, 0]))
                        elif len(pos) == 1:
                            dec[pos] = (P, ("k", (self.grams.add(G),)), 1.0)
                        else:
                            dec[pos] = (P, ("d", self.grams.add(G)), 1.0)
                    self.explicit_cache[ekey] = dec
                for pos, (P, tk, c) in dec.items():
                    S = tuple(g.attrs[p] for p in pos)
                    if c > 0:
                        d = terms.setdefault(S, {})
                        d[tk] = d.get(tk, 0.0) + c
                    gp.append((S, pos, P))
            pieces.append(gp)
        return terms, pieces

    # -- merging --------------------------------------------------------------------------------
    def merge(self, tdict: dict[tuple, float], k: int) -> dict[tuple, float]:
        """Combine Kronecker terms that agree on all but one attribute."""
        terms = dict(tdict)
        changed = True
        while changed:
            changed = False
            kron = sorted((t, c) for t, c in terms.items() if t[0] == "k")
            for p in range(k):
                groups: dict[tuple, list] = {}
                for t, c in kron:
                    other = t[1][:p] + t[1][p + 1:]
                    groups.setdefault(other, []).append((t, c))
                for other, lst in groups.items():
                    if len(lst) < 2:
                        continue
                    G = sum(c * self.grams[t[1][p]] for t, c in lst)
                    sc = float(np.abs(G).max())
                    nid = self.grams.add(G / sc)
                    for t, _ in lst:
                        del terms[t]
                    nt = ("k", other[:p] + (nid,) + other[p:])
                    terms[nt] = terms.get(nt, 0.0) + sc
                    changed = True
                if changed:
                    break
        return terms

    def dense_gram(self, terms: dict[tuple, float], sizes: tuple[int, ...]) -> np.ndarray:
        N = math.prod(sizes)
        G = np.zeros((N, N))
        for t, c in sorted(terms.items()):
            if t[0] == "d":
                G += c * self.grams[t[1]]
            else:
                M = np.ones((1, 1))
                for gid in t[1]:
                    M = np.kron(M, self.grams[gid])
                G += c * M
        return G

    # -- solvers --------------------------------------------------------------------------------
    def solve_factor(self, gid: int, tol: float) -> LowDimMechanism:
        key = (gid, tol)
        m = self.factor_cache.get(key)
        if m is None:
            G = self.grams[gid]
            W = sqrt_factor(G)
            m = optimize_subworkload(W, sizes=(G.shape[0],), tol=tol, max_iter=self.max_iter, strict=False)
            self.factor_cache[key] = m
        return m

    def solve_kron(self, gids: tuple[int, ...], c: float, sizes) -> KronMech:
        k = len(gids)
        tol_j = min(1 - (1 - self.tol) ** (1.0 / k), self.factor_tol)
        ms = [self.solve_factor(gid, tol_j) for gid in gids]
        loss = c * math.prod(m.loss for m in ms)
        lower = c * math.prod(m.lower_bound for m in ms)
        return KronMech(tuple(sizes), tuple(m.B for m in ms), tuple(m.Bpinv for m in ms), "kron-optimal",
                        loss=loss, lower_bound=lower, gap=(loss - lower) / loss if loss > 0 else 0.0,
                        converged=all(m.converged for m in ms), iterations=sum(m.iterations for m in ms))

    def solve_dense(self, terms, sizes) -> DenseMech:
        G = self.dense_gram(terms, sizes)
        W = sqrt_factor(G)
        m = optimize_subworkload(W, sizes=sizes, tol=self.tol, max_iter=self.max_iter, strict=False)
        return DenseMech(tuple(sizes), m, "optimal", loss=m.loss, lower_bound=m.lower_bound, gap=m.gap,
                         converged=m.converged, iterations=m.iterations)

    def _trace(self, mech: SubMechanism, terms) -> float:
        tot = 0.0
        for t, c in terms.items():
            if t[0] == "d":
                tot += c * mech.trace_dense(self.grams[t[1]])
            else:
                tot += c * mech.trace_kron([self.grams[x] for x in t[1]])
        return tot

    def solve_fourier(self, terms, sizes) -> FourierMech:
        gam = np.zeros(sizes)
        for t, c in terms.items():
            if t[0] == "d":
                gam = gam + c * ff.gamma_dense(self.grams[t[1]], sizes)
            else:
                g = np.ones(())
                for gid in t[1]:
                    g = np.multiply.outer(g, ff.gamma_1d(self.grams[gid]))
                gam = gam + c * g
        h, loss = ff.wff_noise(gam)
        return FourierMech(tuple(sizes), h, "fourier", loss=loss)

    def solve_rp(self, terms, sizes) -> KronMech:
        Bs = tuple(centre_basis(n) * math.sqrt(n / (n - 1)) for n in sizes)
        Ps = tuple(np.linalg.pinv(b) for b in Bs)
        m = KronMech(tuple(sizes), Bs, Ps, "rp")
        m.loss = self._trace(m, terms)
        return m

    def solve_kron_marginal(self, terms, sizes) -> KronMech:
        k = len(sizes)
        Bs, Ps = [], []
        for p in range(k):
            M = np.zeros((sizes[p], sizes[p]))
            for t, c in terms.items():
                if t[0] == "k":
                    M += c * math.prod(float(np.trace(self.grams[x])) for q, x in enumerate(t[1]) if q != p) \
                        * self.grams[t[1][p]]
                else:
                    G = self.grams[t[1]].reshape(sizes + sizes)
                    # partial trace over every axis but p
                    T = G
                    for q in reversed(range(k)):
                        if q == p:
                            continue
                        T = np.trace(T, axis1=q, axis2=q + T.ndim // 2)
                    M += c * T
            m = self.solve_factor(self.grams.add(M / max(float(np.abs(M).max()), 1e-300)), self.tol)
            Bs.append(m.B)
            Ps.append(m.Bpinv)
        mech = KronMech(tuple(sizes), tuple(Bs), tuple(Ps), "kron-marginal")
        mech.loss = self._trace(mech, terms)
        return mech

    def solve(self, terms, sizes) -> SubMechanism:
        k = len(sizes)
        if k == 0:
            c = sum(terms.values())
            m = empty_mech()
            m.B, m.Bpinv = (), ()
            m.loss = c
            m.lower_bound = c
            m.gap = 0.0
            return m
        solver = self.solver
        if solver == "fourier":
            return self.solve_fourier(terms, sizes)
        if solver == "rp":
            return self.solve_rp(terms, sizes)
        if solver == "kron-marginal":
            return self.solve_kron_marginal(terms, sizes)
        if len(terms) == 1 and next(iter(terms))[0] == "k":
            (t, c), = terms.items()
            return self.solve_kron(t[1], c, sizes)
        N = math.prod(sizes)
        if solver == "optimal" or N <= self.max_exact_cells:
            return self.solve_dense(terms, sizes)
        cands = [self.solve_fourier(terms, sizes), self.solve_rp(terms, sizes),
                 self.solve_kron_marginal(terms, sizes)]
        return min(cands, key=lambda m: m.loss)


def plan_querysmasher(
    workload,
    *,
    pcost: float = 1.0,
    solver: str = "auto",
    tol: float = 1e-3,
    max_exact_cells: int = 2500,
    max_iter: int = 2000,
    factor_tol: float = 1e-6,
    planner: str = "querysmasher",
) -> QuerySmasherPlan:
    """Plan a QuerySmasher (or, with ``solver="fourier"``, WFF) mechanism at privacy cost ``pcost``.

    ``workload``: a :class:`~dpmatrix._queries.QueryWorkload` or a
    :class:`~dpmatrix._workload.Workload` (its generalized marginals with query types).
    ``solver``: one of :data:`SOLVERS` (see the module docstring); ``max_exact_cells``: largest
    residual space solved by the dense optimal solver under ``"auto"``; ``tol``: relative duality
    gap at which the optimal solvers stop; ``factor_tol``: gap for the (cheap) one-attribute
    factors of Kronecker sub-workloads (the product's gap is at most about k · factor_tol).
    """

    if isinstance(workload, Workload):
        workload = QueryWorkload.from_workload(workload)
    if not isinstance(workload, QueryWorkload):
        raise WorkloadError(f"QuerySmasher needs a QueryWorkload or Workload, got {type(workload).__name__}")
    if not workload.groups:
        raise WorkloadError("the query workload is empty")
    if solver not in SOLVERS:
        raise PlanError(f"unknown solver {solver!r}; use one of {SOLVERS}")
    pcost = resolve_pcost(pcost=pcost)  # BudgetError for a bad budget, as in plan()
    t0 = time.perf_counter()
    b = _Builder(workload, solver, tol, max_exact_cells, max_iter, factor_tol)
    terms, pieces = b.decompose()
    t1 = time.perf_counter()
    structures, residuals = _structures(workload, b, terms)
    solutions = [b.solve(norm, sizes) for sizes, norm in structures]
    t2 = time.perf_counter()
    plan = _assemble(workload, b, pieces, residuals, solutions, pcost, planner,
                     dict(solver=solver, tol=tol, max_exact_cells=max_exact_cells, max_iter=max_iter,
                          factor_tol=factor_tol))
    t3 = time.perf_counter()
    plan.timings = {"decompose": t1 - t0, "solve": t2 - t1, "assemble": t3 - t2}
    return plan


def _structures(workload: QueryWorkload, b: _Builder, terms) -> tuple[list[tuple], dict[tuple[int, ...], Residual]]:
    """The distinct normalized sub-workloads ``[(sizes, terms)]`` (in solving order) and every
    residual space with its structure index and scale (σ² not yet set)."""
    sizes_of = workload.domain.sizes
    struct_ids: dict[tuple, int] = {}
    structures: list[tuple] = []
    residuals: dict[tuple[int, ...], Residual] = {}
    merged_cache: dict[tuple, tuple] = {}
    for S in sorted(terms, key=lambda s: (len(s), s)):
        tdict = {t: c for t, c in terms[S].items() if c > 0}
        if not tdict:
            continue
        sizes = tuple(sizes_of[a] for a in S)
        raw_key = (sizes, tuple(sorted(tdict.items())))
        mk = merged_cache.get(raw_key)
        if mk is None:
            merged = b.merge(tdict, len(S)) if len(S) else tdict
            scale = max(merged.values())
            norm = {t: float(np.round(c / scale, 12)) for t, c in merged.items()}
            key = (sizes, tuple(sorted(norm.items())))
            mk = (key, scale, norm)
            merged_cache[raw_key] = mk
        key, scale, norm = mk
        j = struct_ids.get(key)
        if j is None:
            j = len(structures)
            structures.append((sizes, norm))
            struct_ids[key] = j
        residuals[S] = Residual(S, sizes, j, scale)
    return structures, residuals


def _assemble(workload, b: _Builder, pieces, residuals, solutions, pcost: float, planner: str,
              options: dict) -> QuerySmasherPlan:
    """σ²_A = (Σ sqrt L) / (β sqrt L_A) (Theorem 7), the plan, and its per-group variance sums."""
    roots = {S: math.sqrt(r.loss(solutions)) for S, r in residuals.items()}
    total = sum(roots.values())
    if total <= 0:
        raise PlanError("every query has zero weight: nothing to plan")
    for S, r in residuals.items():
        r.sigma2 = total / (pcost * roots[S]) if roots[S] > 0 else math.inf

    plan = QuerySmasherPlan(workload, residuals, solutions, pcost, planner, pieces, b.rows, b.grams,
                            options=options)
    # per-group variance-sum coefficients (unweighted), memoized by structure
    memo: dict[tuple, float] = {}
    tco: list[dict] = []
    for gi, _g in enumerate(workload.groups):
        d: dict[tuple, float] = {}
        for S, _pos, info in pieces[gi]:
            res = residuals.get(S)
            if res is None:  # only zero-weight queries need this residual: not measured
                d[S] = math.inf
                continue
            mech = solutions[res.structure]
            if isinstance(info, tuple):
                kept, dropped = info
                c = math.prod(b.rows[x].s2 for x in dropped.values())
                mk = ("k", res.structure, tuple(b.rows[x].gid for x in kept))
                if mk not in memo:
                    memo[mk] = mech.trace_kron([b.grams[b.rows[x].gid] for x in kept])
                d[S] = d.get(S, 0.0) + c * memo[mk]
            else:
                mk = ("d", res.structure, id(info))
                if mk not in memo:
                    memo[mk] = float(np.sum(mech.var_dense(info)))
                d[S] = d.get(S, 0.0) + memo[mk]
        tco.append(d)
    plan._tcoef = tco
    return plan


def rebuild_querysmasher(workload: QueryWorkload, *, pcost: float, planner: str, options: dict,
                         solutions: list[SubMechanism]) -> QuerySmasherPlan:
    """The plan :func:`plan_querysmasher` made, from its stored sub-mechanisms, without solving.

    The workload is decomposed again (cheap: no optimizer) and every stored sub-mechanism is
    checked against the sub-workload it claims to solve: same residual-space sizes, privacy cost
    at most 1 at σ² = 1 (largest diagonal of ``BᵀB``, or ``Σ 1/(N h)`` for WFF), and the stored
    loss equal to the loss recomputed from the strategy (``Σ c · tr(G K)``, ``K = B⁺B⁺ᵀ``). The
    noise scales are then allocated from these losses exactly as when planning, so the caller can
    compare the stored ones with them.

    Raises
    ------
    PlanError
        A stored sub-mechanism that does not fit the workload's decomposition.
    """
    pcost = resolve_pcost(pcost=pcost)
    b = _Builder(workload, options.get("solver", "auto"), float(options.get("tol", 1e-3)),
                 int(options.get("max_exact_cells", 2500)), int(options.get("max_iter", 2000)),
                 float(options.get("factor_tol", 1e-6)))
    terms, pieces = b.decompose()
    structures, residuals = _structures(workload, b, terms)
    if len(solutions) != len(structures):
        raise PlanError(f"the stored QuerySmasher plan has {len(solutions)} sub-mechanisms; its workload "
                        f"has {len(structures)} distinct sub-workloads")
    for j, ((sizes, norm), m) in enumerate(zip(structures, solutions)):
        if tuple(m.sizes) != tuple(sizes):  # type: ignore[attr-defined]
            raise PlanError(f"stored QuerySmasher sub-mechanism {j} is on a residual space of sizes "
                            f"{tuple(m.sizes)}, its sub-workload on {tuple(sizes)}")  # type: ignore[attr-defined]
        if not m.pcost <= 1 + 1e-9:  # type: ignore[attr-defined]
            raise PlanError(f"stored QuerySmasher sub-mechanism {j} has privacy cost {m.pcost!r} at "  # type: ignore[attr-defined]
                            "unit noise, not 1: its strategy was edited")
        loss = b._trace(m, norm)
        if not math.isclose(loss, m.loss, rel_tol=1e-8, abs_tol=1e-300):
            raise PlanError(f"stored QuerySmasher sub-mechanism {j} states loss {m.loss!r}, its strategy "
                            f"gives {loss!r}: the plan file was edited")
    return _assemble(workload, b, pieces, residuals, solutions, pcost, planner, dict(options))


# QuerySmasherPlan.from_dict re-plans or rebuilds through these functions (plan.py cannot import
# this module)
QuerySmasherPlan._replan = staticmethod(plan_querysmasher)
QuerySmasherPlan._rebuild = staticmethod(rebuild_querysmasher)
