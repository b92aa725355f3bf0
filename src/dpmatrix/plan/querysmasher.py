r"""QuerySmasher planner (paper sections 5–7): optimal matrix mechanisms per residual space.

Pipeline (Algorithm 1):

1. **Decompose** (section 6.2, eq. 3, Theorem 2).  Every query group on attributes ``A`` is split
   into its projections onto the residual spaces of every ``A' ⊆ A`` (average over the dropped
   attributes, centre the kept ones).  Only the weighted Gram matrix ``G_{A'} = Σ_q w_q
   q_{A'}ᵀ q_{A'}`` of each sub-workload matters for planning.  It is kept as a sum of *terms*:
   a Kronecker group contributes ``w Π_{dropped} ‖W_j 1/n_j‖² · ⊗_{kept} W_jᶜᵀ W_jᶜ`` (per-attribute
   Gram factors, never expanded), an explicit group its dense Gram.  Terms that agree on all but
   one attribute are merged, so e.g. every 1-attribute sub-workload is a single factor.
2. **Solve** each sub-workload at privacy cost 1 (section 6.3).  Solvers:
   ``"kron"`` — the Gram is one Kronecker product: the product of per-attribute optima of eq. 4 is
   optimal (nuclear norms and the dual certificate factorize), certified by the product of the
   per-factor bounds; ``"optimal"`` — eq. 4 on the dense Gram
   (:func:`~dpmatrix.plan.lowdim_optimal.optimize_subworkload`, duality gap ≤ ``tol``);
   ``"fourier"`` — WFF (closed form, :mod:`dpmatrix.plan.fourier`); ``"rp"`` — ResidualPlanner's
   residual basis; ``"kron-marginal"`` — product of the optima of the per-attribute partial-trace
   Grams (an RP+-style basis).  ``solver="auto"`` uses ``kron`` when it applies, ``optimal`` when
   the residual space has at most ``max_exact_cells`` cells, else the best approximate one.
3. **Reuse**: sub-workloads with the same sizes and the same normalized Gram terms share one solve.
4. **Assemble** (section 6.4): ``σ²_{A'} = (Σ sqrt L) / (β sqrt L_{A'})`` for target privacy cost β;
   each query's variance is ``Σ_{A'} σ²_{A'} q_{A'} K_{A'} q_{A'}ᵀ`` (``K = B⁺B⁺ᵀ``), exactly.

The privacy cost reported is the splittable bound ``Σ_{A'} pcost_{A'}`` (Theorem 3); the true
largest diagonal of the stacked mechanism can only be smaller.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..errors import PlanError, WorkloadError
from ..privacy import Budget, PrivacyReport
from ..queries import QueryGroup, QueryWorkload
from ..residual import kron_apply
from . import fourier as ff
from .decompose import decompose_batch
from .lowdim_optimal import LowDimMechanism, optimize_subworkload
from .plan import json_float

if TYPE_CHECKING:
    from ..reconstruct.query_answers import QSMeasurements

__all__ = ["QuerySmasherPlan", "plan_querysmasher", "SOLVERS"]

SOLVERS = ("auto", "optimal", "fourier", "rp", "kron-marginal")
FORMAT = "dpmatrix.qsplan/1"


# =============================================================================================
# sub-mechanisms (privacy cost 1 at σ² = 1)
# =============================================================================================
def _sqrt_factor(G: np.ndarray) -> np.ndarray:
    """W with WᵀW = G (rows = eigen-directions with positive eigenvalue)."""
    G = (G + G.T) / 2
    lam, V = np.linalg.eigh(G)
    keep = lam > max(float(lam.max()), 0.0) * 1e-13 * len(lam) if lam.size else lam > 0
    return (V[:, keep] * np.sqrt(lam[keep])).T


def _centre_basis(n: int) -> np.ndarray:
    """Orthonormal basis (rows) of the vectors orthogonal to 1 (n−1 × n)."""
    H = np.eye(n) - 1.0 / n
    lam, V = np.linalg.eigh(H)
    return V[:, lam > 0.5].T


@dataclass(eq=False, kw_only=True)
class SubMechanism:
    """Interface: Gaussian mechanism on one residual space, privacy cost 1 at σ² = 1.

    Subclasses add their own positional fields (``sizes``, their strategy, ``method``); the
    solver's report below is shared and keyword-only.
    """

    loss: float = math.nan  # weighted sum of variances of the (normalized) sub-workload at σ² = 1
    lower_bound: float = math.nan
    gap: float = math.nan
    converged: bool = True
    iterations: int = 0


@dataclass(eq=False)
class KronMech(SubMechanism):
    """``B = ⊗_j B_j`` with ``max diag(B_jᵀB_j) = 1``; noise ``N(0, σ² I)``."""

    sizes: tuple[int, ...]
    B: tuple[np.ndarray, ...]
    Bpinv: tuple[np.ndarray, ...]
    method: str

    @property
    def n_outputs(self) -> int:
        return math.prod(b.shape[0] for b in self.B)

    @property
    def pcost(self) -> float:
        return math.prod(float(np.max(np.einsum("ij,ij->j", b, b))) for b in self.B)

    def measure(self, x: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
        z = rng.standard_normal(tuple(b.shape[0] for b in self.B))
        return kron_apply(self.B, np.asarray(x, float).reshape(self.sizes)) + sigma * z

    def reconstruct(self, omega: np.ndarray) -> np.ndarray:
        return kron_apply(self.Bpinv, omega)

    def var_kron(self, Wc: Sequence[np.ndarray]) -> np.ndarray:
        out = np.ones(())
        for W, P in zip(Wc, self.Bpinv):
            R = W @ P
            out = np.multiply.outer(out, np.einsum("ij,ij->i", R, R))
        return out

    def trace_kron(self, Gs: Sequence[np.ndarray]) -> float:
        return math.prod(float(np.sum(G * (P @ P.T))) for G, P in zip(Gs, self.Bpinv))

    def var_dense(self, P: np.ndarray) -> np.ndarray:
        T = np.asarray(P, float).reshape((-1,) + self.sizes)
        R = kron_apply(tuple(p.T for p in self.Bpinv), T)
        return np.sum(R.reshape(R.shape[0], -1) ** 2, axis=1)

    def trace_dense(self, G: np.ndarray) -> float:
        N = math.prod(self.sizes)
        K = tuple(p @ p.T for p in self.Bpinv)
        KG = kron_apply(K, np.asarray(G, float).reshape(self.sizes + (N,)).transpose(
            (len(self.sizes),) + tuple(range(len(self.sizes))))).reshape(N, N)
        return float(np.trace(KG))


@dataclass(eq=False)
class DenseMech(SubMechanism):
    """A dense strategy ``B`` (r × N) from the optimal solver."""

    sizes: tuple[int, ...]
    mech: LowDimMechanism
    method: str

    @property
    def n_outputs(self) -> int:
        return self.mech.rank

    @property
    def pcost(self) -> float:
        B = self.mech.B
        return float(np.max(np.einsum("ij,ij->j", B, B)))

    def measure(self, x, sigma, rng):
        z = rng.standard_normal(self.mech.rank)
        return self.mech.B @ np.asarray(x, float).reshape(-1) + sigma * z

    def reconstruct(self, omega):
        return (self.mech.Bpinv @ omega).reshape(self.sizes)

    def var_kron(self, Wc):
        P = self.mech.Bpinv  # N × r
        r = P.shape[1]
        out = None
        step = max(1, int(2e7 // max(1, math.prod(w.shape[0] for w in Wc))))
        for a in range(0, r, step):
            T = P[:, a : a + step].T.reshape((-1,) + self.sizes)
            R = kron_apply(tuple(Wc), T)
            s = np.sum(R**2, axis=0)
            out = s if out is None else out + s
        return out

    def trace_kron(self, Gs):
        N = math.prod(self.sizes)
        P = self.mech.Bpinv
        K = P @ P.T
        GK = kron_apply(tuple(Gs), K.reshape(self.sizes + (N,)).transpose(
            (len(self.sizes),) + tuple(range(len(self.sizes))))).reshape(N, N)
        return float(np.trace(GK))

    def var_dense(self, P):
        R = np.asarray(P, float).reshape(-1, math.prod(self.sizes)) @ self.mech.Bpinv
        return np.einsum("ij,ij->i", R, R)

    def trace_dense(self, G):
        P = self.mech.Bpinv
        return float(np.sum((G @ P) * P))


@dataclass(eq=False)
class FourierMech(SubMechanism):
    """WFF: noise of variance ``σ² h_f`` on every Fourier coefficient (inf: not measured)."""

    sizes: tuple[int, ...]
    h: np.ndarray
    method: str = "fourier"

    @property
    def _hv(self) -> np.ndarray:
        return np.where(np.isfinite(self.h), self.h, 0.0)

    @property
    def n_outputs(self) -> int:
        return int(np.isfinite(self.h).sum())

    @property
    def pcost(self) -> float:
        N = math.prod(self.sizes)
        return float(np.sum(1.0 / (N * self.h)))

    def measure(self, x, sigma, rng):
        x = np.asarray(x, float).reshape(self.sizes)
        if not self.sizes:
            return x + sigma * math.sqrt(float(self._hv)) * rng.standard_normal(())
        z = rng.standard_normal(self.sizes)
        ax = tuple(range(len(self.sizes)))
        X = np.fft.fftn(x, axes=ax, norm="ortho")
        Z = np.fft.fftn(z, axes=ax, norm="ortho")
        fin = np.isfinite(self.h)
        return np.where(fin, X + sigma * np.sqrt(self._hv) * Z, 0.0)

    def reconstruct(self, omega):
        if not self.sizes:
            return np.asarray(omega, float)
        return np.fft.ifftn(omega, axes=tuple(range(len(self.sizes))), norm="ortho").real

    def var_kron(self, Wc):
        if not self.sizes:
            return np.asarray(self._hv)
        Phi = tuple(ff.gamma_rows(W, (W.shape[1],)) for W in Wc)
        return kron_apply(Phi, self._hv)

    def trace_kron(self, Gs):
        if not self.sizes:
            return float(self._hv)
        g = tuple(ff.gamma_1d(G)[None, :] for G in Gs)
        return float(kron_apply(g, self._hv).sum())

    def var_dense(self, P):
        g = ff.gamma_rows(P, self.sizes)
        return np.sum(g.reshape(g.shape[0], -1) * self._hv.reshape(-1), axis=1)

    def trace_dense(self, G):
        return float(np.sum(ff.gamma_dense(G, self.sizes) * self._hv))


def _empty_mech() -> KronMech:
    """The total count (no attributes): B = [1], loss filled in by the caller."""
    return KronMech((), (), (), "exact")


# =============================================================================================
# interning and sub-workload terms
# =============================================================================================
class _Intern:
    def __init__(self):
        self.arrays: list[np.ndarray] = []
        self._ids: dict[tuple, int] = {}

    def add(self, a: np.ndarray) -> int:
        a = np.ascontiguousarray(a, dtype=float)
        key = (a.shape, hashlib.blake2b(a.tobytes(), digest_size=16).digest())
        i = self._ids.get(key)
        if i is None:
            i = len(self.arrays)
            a = a.copy()
            a.setflags(write=False)
            self.arrays.append(a)
            self._ids[key] = i
        return i

    def __getitem__(self, i: int) -> np.ndarray:
        return self.arrays[i]


@dataclass
class _RowInfo:
    """Derived data of one per-attribute row matrix W (m × n)."""

    Wc: np.ndarray  # centred rows
    s: np.ndarray  # W 1 / n  (row means)
    s2: float  # ‖s‖²
    gid: int  # interned id of Wcᵀ Wc (−1 if zero)


@dataclass
class Residual:
    """One residual space: attributes, solution, scale and σ²."""

    attrs: tuple[int, ...]
    sizes: tuple[int, ...]
    structure: int  # index into the plan's solutions
    scale: float  # weighted loss = scale · solution.loss
    sigma2: float = math.inf

    def loss(self, solutions) -> float:
        return self.scale * solutions[self.structure].loss


# =============================================================================================
# the plan
# =============================================================================================
@dataclass(eq=False)
class QuerySmasherPlan(PrivacyReport):
    """A QuerySmasher plan: one Gaussian mechanism per residual space, σ², exact variances.

    Shares with :class:`~dpmatrix.plan.plan.Plan`: ``pcost``/``rho``/``mu``/``epsilon(delta)``,
    :meth:`rmse`, :meth:`max_variance`, :meth:`total_variance`, :meth:`to_dict`, :meth:`measure`
    (Gaussian noise only). Differs: :meth:`query_variance` takes a query-group index; no
    ``variance(attrs)``/``from_dict``/release artifact yet. Adds :meth:`table` and
    :meth:`certificates` (duality gap of every optimally solved sub-workload).
    """

    workload: QueryWorkload
    residuals: dict[tuple[int, ...], Residual]
    solutions: list[SubMechanism]
    target_pcost: float
    planner: str
    # per group: list of (residual attrs, subset positions, piece info)
    _pieces: list[list[tuple]] = field(repr=False, default_factory=list)
    _rows: dict[int, _RowInfo] = field(repr=False, default_factory=dict)
    _grams: _Intern = field(repr=False, default_factory=_Intern)
    _tcoef: list[dict] = field(repr=False, default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    # -- privacy -------------------------------------------------------------------------------
    @property
    def budget(self) -> Budget:
        """Privacy cost Σ_{A'} pcost(M_{A'}) / σ²_{A'} (the splittable bound; the true cost of the
        stacked mechanism can only be smaller)."""
        return Budget(float(sum(
            self.solutions[r.structure].pcost / r.sigma2
            for r in self.residuals.values() if math.isfinite(r.sigma2)
        )))  # fmt: skip


    @property
    def domain(self):
        return self.workload.domain

    # -- accuracy ------------------------------------------------------------------------------
    def weighted_loss(self) -> float:
        """Σ_q weight(q) Var(q) (the objective, eq. 2)."""
        return float(sum(r.sigma2 * r.loss(self.solutions) for r in self.residuals.values()
                         if math.isfinite(r.sigma2)))

    def certificate(self) -> dict[str, float]:
        """Whole-plan optimality certificate: the weighted loss, a lower bound
        ``(Σ_{A'} sqrt(lb_{A'}))² / β`` on the loss of every splittable, residual-respecting
        mechanism at the same privacy cost (Theorem 7), and the relative gap (NaN when some
        sub-workload was solved by an approximate solver without a bound)."""
        loss = self.weighted_loss()
        lb = 0.0
        for r in self.residuals.values():
            s = self.solutions[r.structure]
            lb += math.sqrt(max(r.scale * s.lower_bound, 0.0)) if math.isfinite(s.lower_bound) else math.nan
        lower = lb * lb / self.pcost if self.pcost > 0 else math.nan
        return {"loss": loss, "lower_bound": lower, "gap": (loss - lower) / loss if loss > 0 else 0.0}

    def group_total_variance(self, i: int) -> float:
        """Sum of the variances of the queries of group ``i`` (unweighted)."""
        tot = 0.0
        for S, t in self._tcoef[i].items():
            if t == 0:
                continue
            res = self.residuals.get(S)
            tot += (res.sigma2 if res is not None else math.inf) * t
        return tot

    def total_variance(self) -> float:
        """Sum over every query of its variance."""
        return float(sum(self.group_total_variance(i) for i in range(len(self.workload.groups))))

    def rmse(self) -> float:
        """sqrt(mean query variance) (paper section 8.2)."""
        return math.sqrt(self.total_variance() / self.workload.n_queries)

    def query_variance(self, i: int) -> np.ndarray:
        """Exact variance of every query of group ``i``, shaped like its table of queries."""
        g = self.workload.groups[i]
        out = np.zeros(g.shape)
        for S, pos, info in self._pieces[i]:
            res = self.residuals.get(S)
            if res is None or not math.isfinite(res.sigma2):
                out = out + math.inf  # a non-zero piece on a residual space nobody measured
                continue
            mech = self.solutions[res.structure]
            if g.is_kron:
                kept, dropped = info
                v = mech.var_kron([self._rows[r].Wc for r in kept]) if kept else np.asarray(
                    mech.var_kron([]))
                # place kept axes and dropped factors (s²) along the group's axes
                k = len(g.attrs)
                term = v
                # v has axes = kept positions in order; build full tensor
                shape_full = []
                for p in range(k):
                    shape_full.append(g.shape[p] if p in pos else 1)
                term = np.asarray(term).reshape(shape_full)
                for p in range(k):
                    if p not in pos:
                        s = self._rows[dropped[p]].s
                        sh = [1] * k
                        sh[p] = s.size
                        term = term * (s**2).reshape(sh)
                out = out + res.sigma2 * term
            else:
                P = info
                out = out + res.sigma2 * mech.var_dense(P)
        return out

    def max_variance(self) -> float:
        """Largest variance of a workload query (groups with the same structure computed once)."""
        best = 0.0
        memo: dict[tuple, float] = {}
        for i, g in enumerate(self.workload.groups):
            ident = tuple(id(f) for f in g.factors) if g.factors is not None else (id(g.matrix),)
            key = (ident, g.sizes, g.scalar_weight, tuple(
                (self.residuals[S].structure, self.residuals[S].sigma2, pos)
                for S, pos, _ in self._pieces[i] if S in self.residuals))
            if key not in memo:
                memo[key] = float(np.max(self.query_variance(i)))
            best = max(best, memo[key])
        return best

    # -- inspection ----------------------------------------------------------------------------
    def certificates(self) -> list[dict[str, Any]]:
        """One entry per distinct solved sub-workload: method, loss, lower bound, relative gap."""
        users: dict[int, int] = {}
        for r in self.residuals.values():
            users[r.structure] = users.get(r.structure, 0) + 1
        out = []
        for j, s in enumerate(self.solutions):
            out.append(dict(structure=j, sizes=s.sizes, method=s.method, loss=s.loss,
                            lower_bound=s.lower_bound, gap=s.gap, converged=s.converged,
                            residual_spaces=users.get(j, 0)))
        return out

    def table(self):
        import pandas as pd

        rows = []
        for S, r in self.residuals.items():
            s = self.solutions[r.structure]
            rows.append(dict(attributes=",".join(self.domain.names_of(S)), n_attributes=len(S),
                             cells=math.prod(r.sizes), method=s.method, loss=r.loss(self.solutions),
                             sigma2=r.sigma2, pcost_share=(1 / r.sigma2) / self.pcost, gap=s.gap,
                             noisy_outputs=s.n_outputs))
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "planner": self.planner,
            "domain": self.domain.to_dict(),
            "n_groups": len(self.workload.groups),
            "n_queries": self.workload.n_queries,
            "residuals": [
                {"attributes": list(self.domain.names_of(S)), "sigma2": json_float(r.sigma2),
                 "method": self.solutions[r.structure].method, "loss": r.loss(self.solutions),
                 "gap": json_float(self.solutions[r.structure].gap)}
                for S, r in self.residuals.items()
            ],
            "privacy": {"pcost": self.pcost, "rho": self.rho, "mu": self.mu},
            "rmse": self.rmse(),
        }

    def __repr__(self) -> str:
        return (f"QuerySmasherPlan({self.workload!r}, {len(self.residuals)} residual spaces, "
                f"{len(self.solutions)} distinct solves, pcost={self.pcost:.6g})")

    # -- measurement ---------------------------------------------------------------------------
    def measure(
        self,
        data,
        rng: np.random.Generator | None = None,
        progress: bool = False,
        noise: str = "gaussian",
        rel_var_tol: float = 1e-4,
        engine=None,
    ) -> "QSMeasurements":
        """Run every residual mechanism on the marginal counts of ``data`` (an engine counts the
        maximal residual sets; smaller ones are sums of those).  Never forms the data vector."""
        from ..errors import DataError
        from ..reconstruct.query_answers import QSMeasurements

        if noise not in ("gaussian", "discrete_gaussian"):
            raise DataError(f"noise must be 'gaussian' or 'discrete_gaussian', got {noise!r}")
        if rng is not None and not isinstance(rng, np.random.Generator):
            raise DataError("rng must be a numpy.random.Generator")
        if noise == "discrete_gaussian":
            return self._measure_discrete(data, rng, rel_var_tol, engine)
        if rng is None:
            rng = np.random.default_rng()
        omega: dict[tuple[int, ...], np.ndarray] = {}
        for sub, x in self._residual_marginals(data, engine):
            res = self.residuals[sub]
            omega[sub] = self.solutions[res.structure].measure(
                np.asarray(x, dtype=float), math.sqrt(res.sigma2), rng
            )
        return QSMeasurements(self, omega)

    def _residual_marginals(self, data, engine):
        """Yield ``(S, marginal table on S)`` for every measured residual space: only the maximal
        sets are counted (16 per engine call), smaller ones are sums; never the data vector."""
        from ..engines import engine_for, maximal_sets, project

        eng = engine_for(data, self.domain, engine=engine)
        measured = {S for S, r in self.residuals.items() if math.isfinite(r.sigma2)}
        top = maximal_sets(measured)
        done: set = set()
        for start in range(0, len(top), 16):
            batch = top[start : start + 16]
            tables = eng.count(batch)
            for m in batch:
                table = tables.pop(m)
                for r in range(len(m), -1, -1):
                    for sub in itertools.combinations(m, r):
                        if sub in done or sub not in measured:
                            continue
                        done.add(sub)
                        yield sub, project(table, m, sub)

    def _measure_discrete(self, data, rng, rel_var_tol: float, engine) -> "QSMeasurements":
        """Exact discrete Gaussian noise where the factors allow (paper RP+ §5, Algorithm 3).

        A residual space whose mechanism reconstructs with covariance ``σ² Π κ_j ⊗ (I − 11ᵀ/n_j)``
        — every plain-marginal space (identity queries), whatever orthonormal-type basis the
        solver returned — is the same mechanism as ResidualPlanner's at
        ``σ²_RP = σ² Π κ_j``: same residual estimate distribution and same privacy cost
        ``Π (n_j−1)/(n_j κ_j) / σ² = Π (n_j−1)/n_j / σ²_RP``. It is measured by Algorithm 3 at
        that scale (σ rounded up to a rational; the returned plan carries the rounded σ²), and
        its estimate ``r`` is stored as ``ω = B r`` (``B⁺ B r = r`` for centred ``r``). Spaces
        optimized for prefix, range or other queries have real-valued strategies with no integer
        form: they are refused, naming the first one.
        """
        import dataclasses
        from fractions import Fraction

        from ..measure.discrete import _rational_sigma, discrete_measure
        from ..measure.measure import discrete_randomness
        from ..reconstruct.query_answers import QSMeasurements
        from ..residual import ResidualMechanism, identity_basis

        measured = {S: r for S, r in self.residuals.items() if math.isfinite(r.sigma2)}
        kappas = {}
        for S, res in measured.items():
            k = _marginal_factors(self.solutions[res.structure])
            if k is None:
                raise PlanError(
                    f"discrete Gaussian noise needs integer-able factors, but the residual space of "
                    f"{self.domain.names_of(S)} uses a real-valued optimized strategy (queries other "
                    "than plain marginals); measure this plan with noise='gaussian'"
                )
            kappas[S] = math.prod(k)
        randomness = discrete_randomness(rng)
        new_res, sbar = {}, {}
        for S, res in self.residuals.items():
            if S in measured:
                sb = _rational_sigma(res.sigma2 * kappas[S], rel_var_tol)
                sbar[S] = sb
                s2 = float(sb * sb) / kappas[S]
                while Fraction(s2) * Fraction(kappas[S]) > sb * sb:  # never report more noise
                    s2 = float(np.nextafter(s2, 0.0))
                new_res[S] = dataclasses.replace(res, sigma2=s2)
            else:
                new_res[S] = res
        plan = dataclasses.replace(self, residuals=new_res)
        omega: dict[tuple[int, ...], np.ndarray] = {}
        for sub, x in self._residual_marginals(data, engine):
            sizes = self.residuals[sub].sizes
            rp = ResidualMechanism(sub, tuple(identity_basis(n) for n in sizes), float(sbar[sub] ** 2))
            w = discrete_measure(rp, x, sbar[sub], rng)
            omega[sub] = kron_apply(self.solutions[self.residuals[sub].structure].B, rp.residual(w))
        return QSMeasurements(plan, omega, noise="discrete_gaussian", randomness=randomness)


def _marginal_factors(mech) -> tuple[float, ...] | None:
    """``κ_j`` with ``B_j⁺ B_j⁺ᵀ = κ_j (I − 11ᵀ/n_j)`` for every Kronecker factor, or ``None``."""
    if not isinstance(mech, KronMech):
        return None
    out = []
    for P, n in zip(mech.Bpinv, mech.sizes):
        K = P @ P.T
        C = np.eye(n) - 1.0 / n
        kappa = float(np.trace(K)) / (n - 1)
        if not np.allclose(K, kappa * C, rtol=0, atol=1e-9 * max(kappa, 1e-300)):
            return None
        out.append(kappa)
    return tuple(out)


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
        self.grams = _Intern()
        self.rowmats = _Intern()
        self.rows: dict[int, _RowInfo] = {}
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
            self.rows[rid] = _RowInfo(Wc, s, float(s @ s), -1 if zero else self.grams.add(G))
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
            W = _sqrt_factor(G)
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
        W = _sqrt_factor(G)
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
        Bs = tuple(_centre_basis(n) * math.sqrt(n / (n - 1)) for n in sizes)
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
            m = _empty_mech()
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

    ``workload``: a :class:`~dpmatrix.queries.QueryWorkload` or a
    :class:`~dpmatrix.workload.Workload` (its generalized marginals with query types).
    ``solver``: one of :data:`SOLVERS` (see the module docstring); ``max_exact_cells``: largest
    residual space solved by the dense optimal solver under ``"auto"``; ``tol``: relative duality
    gap at which the optimal solvers stop; ``factor_tol``: gap for the (cheap) one-attribute
    factors of Kronecker sub-workloads (the product's gap is at most about k · factor_tol).
    """
    import time

    from ..workload import Workload

    if isinstance(workload, Workload):
        workload = QueryWorkload.from_workload(workload)
    if not isinstance(workload, QueryWorkload):
        raise WorkloadError(f"QuerySmasher needs a QueryWorkload or Workload, got {type(workload).__name__}")
    if not workload.groups:
        raise WorkloadError("the query workload is empty")
    if solver not in SOLVERS:
        raise PlanError(f"unknown solver {solver!r}; use one of {SOLVERS}")
    if not (pcost > 0 and math.isfinite(pcost)):
        raise PlanError(f"pcost must be positive and finite, got {pcost}")
    t0 = time.perf_counter()
    b = _Builder(workload, solver, tol, max_exact_cells, max_iter, factor_tol)
    terms, pieces = b.decompose()
    t1 = time.perf_counter()

    # structure keys and solves
    sizes_of = workload.domain.sizes
    struct_ids: dict[tuple, int] = {}
    solutions: list[SubMechanism] = []
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
            j = len(solutions)
            solutions.append(b.solve(norm, sizes))
            struct_ids[key] = j
        residuals[S] = Residual(S, sizes, j, scale)
    t2 = time.perf_counter()

    # assembly: σ²_A = (Σ sqrt L) / (β sqrt L_A)
    roots = {S: math.sqrt(r.loss(solutions)) for S, r in residuals.items()}
    total = sum(roots.values())
    if total <= 0:
        raise PlanError("every query has zero weight: nothing to plan")
    for S, r in residuals.items():
        r.sigma2 = total / (pcost * roots[S]) if roots[S] > 0 else math.inf

    plan = QuerySmasherPlan(workload, residuals, solutions, pcost, planner, pieces, b.rows, b.grams)
    # per-group variance-sum coefficients (unweighted), memoized by structure
    memo: dict[tuple, float] = {}
    tco: list[dict] = []
    for gi, g in enumerate(workload.groups):
        d: dict[tuple, float] = {}
        for S, pos, info in pieces[gi]:
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
    t3 = time.perf_counter()
    plan.timings = {"decompose": t1 - t0, "solve": t2 - t1, "assemble": t3 - t2}
    return plan
