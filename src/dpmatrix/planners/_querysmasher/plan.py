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
   (:func:`~dpmatrix._solvers.lowdim_optimal.optimize_subworkload`, duality gap ≤ ``tol``);
   ``"fourier"`` — WFF (closed form, :mod:`dpmatrix._linalg.fourier`); ``"rp"`` — ResidualPlanner's
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
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..._domain import Domain
from ..._jsonfile import json_float
from ..._privacy import Budget, PrivacyReport
from ..._queries import QueryWorkload
from ...errors import PlanError, WorkloadError
from .._base import PlanBase
from .._formats import plan_format
from .measurement import QSEstimator, querysmasher_mechanisms
from .stored import solution_from_dict, solutions_to_list
from .submechanisms import SubMechanism

__all__ = ["GramIntern", "QuerySmasherPlan", "Residual", "RowInfo", "SOLVERS"]

SOLVERS = ("auto", "optimal", "fourier", "rp", "kron-marginal")
FORMAT = "dpmatrix.qsplan/1"


# =============================================================================================
# interning and sub-workload terms
# =============================================================================================
class GramIntern:
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
class RowInfo:
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
@plan_format(FORMAT)
@dataclass(eq=False)
class QuerySmasherPlan(PlanBase, PrivacyReport):
    """A QuerySmasher plan: one Gaussian mechanism per residual space, σ², exact variances.

    Implements :class:`~dpmatrix.planners._base.PlanBase`: ``pcost``/``rho``/``mu``/``epsilon(delta)``,
    :meth:`rmse`, :meth:`max_variance`, :meth:`total_variance`, :meth:`query_variance` (attrs of
    a query group), :meth:`table`, :meth:`to_dict` / :meth:`from_dict`, :meth:`measure` (the one
    measurement path: :meth:`mechanisms` and :meth:`estimator`), and releases. Differs: no
    ``variance(attrs)`` of arbitrary marginals; :meth:`group_variance` takes a query-group index.
    Adds :meth:`certificates` (duality gap of every optimally solved sub-workload).
    """

    workload: QueryWorkload
    residuals: dict[tuple[int, ...], Residual]
    solutions: list[SubMechanism]
    target_pcost: float
    planner: str
    # per group: list of (residual attrs, subset positions, piece info)
    _pieces: list[list[tuple]] = field(repr=False, default_factory=list)
    _rows: dict[int, RowInfo] = field(repr=False, default_factory=dict)
    _grams: GramIntern = field(repr=False, default_factory=GramIntern)
    _tcoef: list[dict] = field(repr=False, default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    # the planner's options (solver, tol, ...): from_dict re-plans with them
    options: dict[str, Any] = field(default_factory=dict)
    # set by .planner (the planning function, and the one that rebuilds a plan from its stored
    # sub-mechanisms without solving; from_dict reads through them)
    _replan = None
    _rebuild = None

    @property
    def planner_name(self) -> str:
        """The planning function's name (``"querysmasher"`` or ``"wff"``)."""
        return str(self.planner)

    def _options(self) -> dict[str, Any]:
        return dict(self.options)

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

    def _objective_value(self) -> tuple[str, float]:
        return "sum_var", self.weighted_loss()

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

    def _query_variance(self, key: tuple[int, ...]) -> np.ndarray:
        """Variances of the queries of the one group on the attribute set ``key``."""
        hits = [i for i, g in enumerate(self.workload.groups) if tuple(sorted(g.attrs)) == key]
        if len(hits) != 1:
            names = self.domain.names_of(key)
            raise WorkloadError(
                f"the workload has {len(hits)} query groups on {names}: "
                + ("use group_variance(i) with a group index" if hits else "ask for one of its groups' attributes")
            )
        return self.group_variance(hits[0])

    def _variance(self, key: tuple[int, ...]) -> np.ndarray:
        raise PlanError(
            "a QuerySmasher plan gives the variances of its workload's queries (query_variance), "
            "not of arbitrary marginal cells"
        )

    def group_variance(self, i: int) -> np.ndarray:
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
                memo[key] = float(np.max(self.group_variance(i)))
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
        """JSON-ready description: the workload's query groups, the planner's options, every
        residual space's σ² and privacy; :meth:`from_dict` reads it back."""
        return {
            "format": FORMAT,
            "planner": self.planner,
            "domain": self.domain.to_dict(),
            "workload": self.workload.to_dict(),
            "options": dict(self.options),
            "target_pcost": self.target_pcost,
            "n_groups": len(self.workload.groups),
            "n_queries": self.workload.n_queries,
            "residuals": [
                {"attributes": list(self.domain.names_of(S)), "sigma2": json_float(r.sigma2),
                 "method": self.solutions[r.structure].method, "loss": r.loss(self.solutions),
                 "gap": json_float(self.solutions[r.structure].gap)}
                for S, r in self.residuals.items()
            ],
            "privacy": self._privacy_spec(),  # what the default release states
            "rmse": self.rmse(),
            "solutions": solutions_to_list(self.solutions),
        }

    @classmethod
    def from_dict(cls, spec: dict[str, Any]) -> QuerySmasherPlan:
        """The plan described by :meth:`to_dict`: re-planned from the stored workload and options
        (the planner is deterministic), then given the stored noise scales, which must be the
        planned ones or (discrete noise) rounded up from them by at most 1 %.

        Parameters
        ----------
        spec : dict
            Output of :meth:`to_dict` (or a release manifest's ``plan``).

        Returns
        -------
        QuerySmasherPlan

        Raises
        ------
        PlanError
            Not a QuerySmasher plan, or noise scales that this workload's plan does not have.

        Examples
        --------
        >>> import dpmatrix as dm
        >>> wk = dm.Workload(dm.Domain({"a": 2, "b": 3}), [("a", "b")])
        >>> p = dm.plan(wk, pcost=1, planner="querysmasher")
        >>> round(QuerySmasherPlan.from_dict(p.to_dict()).pcost, 12)
        1.0
        """
        if not isinstance(spec, dict) or spec.get("format") != FORMAT:
            raise PlanError(f"not a QuerySmasher plan (format {spec.get('format') if isinstance(spec, dict) else None!r})")
        dom = Domain.from_dict(spec["domain"])
        wk = QueryWorkload.from_dict(dom, spec["workload"])
        planner = spec.get("planner", "querysmasher")
        if isinstance(spec.get("solutions"), list):  # the solved sub-mechanisms: checked, not re-solved
            plan = cls._rebuild(wk, pcost=float(spec["target_pcost"]), planner=planner,
                                options=dict(spec.get("options", {})),
                                solutions=[solution_from_dict(d) for d in spec["solutions"]])
        else:  # written without its sub-mechanisms (too large, or an older file): re-planned
            plan = cls._replan(wk, pcost=float(spec["target_pcost"]), planner=planner,
                               **dict(spec.get("options", {})))
        stored = {dom.resolve(r["attributes"]): r for r in spec["residuals"]}
        if set(stored) != set(plan.residuals):
            raise PlanError("the stored QuerySmasher plan's residual spaces are not those of its workload")
        for S, res in plan.residuals.items():
            got = float(stored[S]["sigma2"])
            if math.isinf(res.sigma2) != math.isinf(got) or (
                    math.isfinite(got) and not res.sigma2 * (1 - 1e-9) <= got <= res.sigma2 * 1.01):
                raise PlanError(f"the stored noise scale of {dom.names_of(S)} ({got!r}) is not this "
                                f"workload's planned one ({res.sigma2!r})")
            res.sigma2 = got
        return plan

    # -- measurement protocol ------------------------------------------------------------------
    def mechanism_keys(self, *, noise: str | None = None) -> tuple[tuple[int, ...], ...]:
        """The keys of :meth:`mechanisms`' records (the measured residual spaces, in order),
        without building them (a dense strategy's exact lattice form costs far more)."""
        if noise not in (None, "gaussian", "discrete_gaussian", "lattice_gaussian"):
            raise PlanError("a QuerySmasher plan is measured with noise='gaussian', 'discrete_gaussian' or "
                            f"'lattice_gaussian', got {noise!r}")
        return tuple(S for S, r in self.residuals.items() if math.isfinite(r.sigma2))

    def mechanisms(self, *, noise: str | None = None, rel_var_tol: float = 1e-4):
        """``(plan measured, [LinearMechanism])``: one per measured residual space (see
        :mod:`dpmatrix.planners._querysmasher.measurement`); discrete noise re-scores the plan."""
        return querysmasher_mechanisms(self, noise, rel_var_tol)

    def estimator(self, noisy) -> QSEstimator:
        """The estimator of the workload's queries from the noisy residual outputs."""
        return QSEstimator(self, noisy)

    def __repr__(self) -> str:
        return (f"QuerySmasherPlan({self.workload!r}, {len(self.residuals)} residual spaces, "
                f"{len(self.solutions)} distinct solves, pcost={self.pcost:.6g})")
