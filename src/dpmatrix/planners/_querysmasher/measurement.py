"""QuerySmasher's side of the measurement protocol: its mechanisms, and estimation from their outputs.

**Mechanisms.** Residual space ``A'`` is measured by its sub-mechanism ``ω = B x_{A'} + σ H z``
(:mod:`.submechanisms`; ``H`` the identity except for WFF's Fourier weights), run by the one
measurement path (:func:`dpmatrix.measure`). Exact discrete Gaussian noise (RP+ §5, Algorithm 3)
where the factors allow: a residual space whose mechanism reconstructs with covariance
``σ² Π κ_j ⊗ (I − 11ᵀ/n_j)`` — every plain-marginal space, whatever orthonormal-type basis the
solver returned — is ResidualPlanner's mechanism at ``σ²_RP = σ² Π κ_j`` (same residual estimate
distribution, same privacy cost ``Π (n_j−1)/(n_j κ_j) / σ² = Π (n_j−1)/n_j / σ²_RP``); it is run
as the integer mechanism ``H v + N_Z(0, γ²)`` (``H = ⊗(n_j I − 11ᵀ)``, σ̄ rounded up to a
rational, the plan re-scored) and post-processed into ``ω = B r``. Spaces optimized for prefix,
range or other queries have real-valued strategies with no integer form: refused by name.

The lattice sampler (``noise="lattice_gaussian"``, the default when some space is real-valued;
:mod:`dpmatrix._mechanisms.lattice`) runs every measured space as ``ω = post(γ(round(C x/γ) + z))``,
``z ~ N_Z(0, σ̄²/γ²)``, ``σ̄ ≥ (1 + tol) σ`` rational: a Kronecker strategy is ``C = ⊗ B_j``, a
dense one ``C = B`` (on the flattened table), both with ``post`` the identity; WFF's Fourier
space ``ω = F x + σ √h ⊙ F z`` is rewritten with independent noise as the real symmetric circulant
``K = F* diag(h^-½) F`` (``y = K x + σ z'``, then ``ω = √h ⊙ F y``, which has exactly WFF's law
because ``F z'`` has the law of ``F z``; densified up to :data:`MAX_FOURIER_CELLS` cells, larger
spaces refused by name). Each space's reported σ² becomes ``pcost/(2ρ)`` with ``ρ`` the lattice
mechanism's exact cost (:func:`~dpmatrix._mechanisms.lattice.lattice_rho` with the σ̄ and γ used),
so the re-scored plan's ρ is never below what is spent, and at most the planned ρ.

**Estimation** (the :class:`~dpmatrix._reconstruct.estimator.Estimator` of a QuerySmasher plan).
``r_{A'} = B⁺ ω`` estimates the component of ``x_{A'}`` in the row space of ``B``; a query ``q`` on
``A`` is answered as ``q · x̂_A`` with ``x̂_A = Σ_{A'⊆A} r_{A'} / Π_{j∈A∖A'} n_j`` (broadcast along
the dropped attributes), unbiased for every workload query, variance
:meth:`QuerySmasherPlan.group_variance`. Cells of a marginal are answered where the workload asks
for them (a group of identity queries); other queries are the groups' own.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from fractions import Fraction

import numpy as np

from ..._linalg.kron import kron_apply
from ..._measure.discrete import gamma_squared, integer_outputs, rational_sigma
from ..._measure.secure import lattice_sigma_bar, rescored_sigma2
from ..._mechanisms.basis import identity_basis
from ..._mechanisms.lattice import DEFAULT_LATTICE_TOL, LatticeQuery
from ..._mechanisms.linear import LinearMechanism
from ..._mechanisms.residual import ResidualMechanism
from ..._reconstruct.estimator import EntryAnswer, Estimator
from ..._reconstruct.measurements import group_entry_labels
from ...errors import NotMeasuredError, PlanError, WorkloadError
from .submechanisms import DenseMech, FourierMech, KronMech

__all__ = ["MAX_FOURIER_CELLS", "QSEstimator", "lattice_form", "querysmasher_mechanisms"]

#: Largest residual space (cells) a Fourier (WFF) sub-mechanism is densified for (N² floats).
MAX_FOURIER_CELLS = 2048
# largest residual space whose cells are checked one by one for answerability
_MAX_CELL_CHECK = 1024


def querysmasher_mechanisms(plan, noise: str | None, rel_var_tol: float):
    """``(plan measured, mechanisms)`` of a QuerySmasher plan for ``noise`` (module docstring)."""
    if noise in (None, "gaussian"):
        return plan, [_gaussian(S, r, plan.solutions[r.structure]) for S, r in _measured(plan).items()]
    if noise not in ("discrete_gaussian", "lattice_gaussian"):
        raise PlanError("a QuerySmasher plan is measured with noise='gaussian', 'discrete_gaussian' or "
                        f"'lattice_gaussian', got {noise!r}")
    if not 0 < rel_var_tol < 1:
        raise PlanError(f"rel_var_tol must be in (0, 1), got {rel_var_tol!r}")
    if noise == "lattice_gaussian":
        return _lattice_plan(plan, rel_var_tol, DEFAULT_LATTICE_TOL)
    measured = _measured(plan)
    kappas = {}
    for S, res in measured.items():
        k = plan.solutions[res.structure].marginal_factors()
        if k is None:
            raise PlanError(
                f"discrete Gaussian noise needs integer-able factors, but the residual space of "
                f"{plan.domain.names_of(S)} uses a real-valued optimized strategy (queries other "
                "than plain marginals); measure this plan with noise='gaussian'"
            )
        kappas[S] = math.prod(k)
    new_res, mechs = {}, []
    for S, res in plan.residuals.items():
        if S not in measured:
            new_res[S] = res
            continue
        sb = rational_sigma(res.sigma2 * kappas[S], rel_var_tol)
        s2 = float(sb * sb) / kappas[S]
        while Fraction(s2) * Fraction(kappas[S]) > sb * sb:  # never report more noise
            s2 = float(np.nextafter(s2, 0.0))
        new_res[S] = dataclasses.replace(res, sigma2=s2)
        mechs.append(_discrete(S, res, plan.solutions[res.structure], sb))
    return dataclasses.replace(plan, residuals=new_res), mechs


def _measured(plan) -> dict:
    return {S: r for S, r in plan.residuals.items() if math.isfinite(r.sigma2)}


def _gaussian(S, res, sub) -> LinearMechanism:
    return LinearMechanism(S, S, sub.signal, sub.noise_shape, "gaussian", float(res.sigma2), sub.noise)


def _discrete(S, res, sub, sigma_bar: Fraction) -> LinearMechanism:
    rp = ResidualMechanism(S, tuple(identity_basis(n) for n in res.sizes), float(sigma_bar**2))
    y_pinv = tuple(b.Sub / b.n for b in rp.bases)

    def post(noisy: np.ndarray) -> np.ndarray:  # Algorithm 3's post-processing, then ω = B r
        w = kron_apply(y_pinv, np.asarray(noisy, dtype=float))
        return kron_apply(sub.B, rp.residual(w))

    return LinearMechanism(S, S, lambda t: integer_outputs(rp, t), tuple(res.sizes), "discrete_gaussian",
                           gamma_squared(rp, sigma_bar), None, post)


def _lattice_plan(plan, rel_var_tol: float, tol: float):
    """Every measured space as a lattice mechanism; the plan re-scored with their exact ρ."""
    new_res, mechs = dict(plan.residuals), []
    for S, res in _measured(plan).items():
        sub = plan.solutions[res.structure]
        q, pre, post = lattice_form(sub)
        sb = lattice_sigma_bar(res.sigma2, 1, rel_var_tol=rel_var_tol, tol=tol)
        m = LinearMechanism.lattice_of(S, S, q, sb, pre=pre, post=post, tol=tol)
        new_res[S] = dataclasses.replace(res, sigma2=rescored_sigma2(float(sub.pcost), m.lattice.rho, res.sigma2))
        mechs.append(m)
    return dataclasses.replace(plan, residuals=new_res), mechs


def lattice_form(sub):
    """``(C, pre, post)``: sub-mechanism ``sub`` as a lattice query ``C`` with i.i.d. noise
    ``σ I``, the table → query-input map ``pre`` (``None``: identity) and the post-processing
    ``post`` giving ``ω`` (``None``: identity). See the module docstring."""
    if isinstance(sub, KronMech):  # ω = (⊗ B_j) x + σ z
        return LatticeQuery.of(sub.B), None, None
    if isinstance(sub, DenseMech):  # ω = B vec(x) + σ z
        return LatticeQuery.of((sub.mech.B,)), _flatten, None
    if isinstance(sub, FourierMech):
        return _fourier_form(sub)
    raise PlanError(f"the lattice sampler does not support the sub-mechanism {type(sub).__name__}")


def _flatten(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).reshape(-1)


def _fourier_form(sub):
    """WFF's ``ω = F x + σ √h ⊙ F z`` (``F`` the unitary DFT, ``z`` real, 0 where ``h = ∞``) as a
    real mechanism with independent noise: ``y = K x + σ z'`` with the real symmetric circulant
    ``K = F* diag(h^-½) F`` (``h`` is symmetric under ``f ↦ −f``), then ``ω = √h ⊙ F y``:
    ``F y = h^-½ ⊙ F x + σ F z'`` and ``F z'`` has the law of ``F z``. ``K`` (the float matrix
    actually snapped) is materialized: the lattice's accounting is exact for it, whatever its
    floating-point error as a circulant."""
    sizes = tuple(sub.sizes)
    N = math.prod(sizes)
    if N > MAX_FOURIER_CELLS:
        raise PlanError(
            f"the secure sampler densifies WFF (Fourier) residual spaces up to {MAX_FOURIER_CELLS} "
            f"cells; this one has {N}: measure with noise='gaussian_float' (floating point, not "
            "cryptographically secure) or plan with solver='auto' excluding Fourier"
        )
    h = np.asarray(sub.h, dtype=float)
    fin = np.isfinite(h)
    hinv = np.where(fin, 1.0 / np.sqrt(np.where(fin, h, 1.0)), 0.0)
    root = np.sqrt(np.where(fin, h, 0.0))
    if not sizes:
        return (LatticeQuery.of((np.array([[float(hinv)]]),)), lambda x: np.asarray(x).reshape(1),
                lambda y: y.reshape(()) * float(root))
    ax = tuple(range(1, len(sizes) + 1))
    E = np.eye(N).reshape((N,) + sizes)
    cols = np.fft.ifftn(hinv * np.fft.fftn(E, axes=ax, norm="ortho"), axes=ax, norm="ortho")
    if np.max(np.abs(cols.imag), initial=0.0) > 1e-9 * max(1.0, float(np.max(np.abs(cols.real)))):
        raise PlanError("WFF noise profile is not symmetric; the lattice sampler needs a real circulant")
    K = cols.real.reshape(N, N).T  # column j = K e_j
    axes = tuple(range(len(sizes)))

    def post(y):
        return np.where(fin, root * np.fft.fftn(y.reshape(sizes), axes=axes, norm="ortho"), 0.0)

    return LatticeQuery.of((K,)), _flatten, post


def _subset_sum(sizes, attrs: tuple[int, ...], term, power: int) -> np.ndarray:
    """``Σ_{S⊆attrs} term(S) / Π_{j∈attrs∖S} n_j^power`` on the cells of ``attrs``: each
    ``term(S)`` (the cells of ``S`` in any shape, or None for a subset not measured) is broadcast
    along the attributes it lacks. ``power=1`` spreads a residual's estimate evenly over the
    dropped attributes (the combined estimate); ``power=2`` scales its variance alike."""
    out = np.zeros(tuple(sizes[a] for a in attrs))
    for k in range(len(attrs) + 1):
        for S in itertools.combinations(attrs, k):
            t = term(S)
            if t is None:
                continue
            t = np.asarray(t).reshape(tuple(sizes[a] if a in S else 1 for a in attrs))
            out = out + t / math.prod(sizes[a] for a in attrs if a not in S) ** power
    return out


class QSEstimator(Estimator):
    """Estimates of a QuerySmasher plan from ``noisy[A'] = ω_{A'}`` (module docstring)."""

    def __init__(self, plan, noisy):
        self.plan = plan
        self.noisy = noisy
        self._res: dict = {}

    def residual(self, S: tuple[int, ...]) -> np.ndarray | None:
        """``r_S = B⁺ ω_S`` shaped like the marginal on S; None if S was not measured."""
        if S in self._res:
            return self._res[S]
        if S not in self.noisy:
            return None
        res = self.plan.residuals[S]
        r = np.asarray(self.plan.solutions[res.structure].reconstruct(self.noisy[S]), dtype=float)
        self._res[S] = r = r.reshape(res.sizes)
        return r

    def combined(self, attrs: tuple[int, ...]) -> np.ndarray:
        """``x̂_A = Σ_{A'⊆A} r_{A'} / Π n_dropped`` (unbiased for the workload's queries on A)."""
        return _subset_sum(self.plan.domain.sizes, attrs, self.residual, 1)

    def group_answer(self, i: int) -> np.ndarray:
        """Answers to the queries of group ``i``; NaN for a query with a component in an
        unmeasured residual space (zero weight): it has no unbiased answer."""
        g = self.plan.workload.groups[i]
        out = np.asarray(g.answer(self.combined(g.attrs)), dtype=float)
        return np.where(np.isfinite(self.plan.group_variance(i)), out, np.nan)

    # -- the Estimator protocol ------------------------------------------------------------------
    def entries(self):
        return iter(range(len(self.plan.workload.groups)))

    def entry_of(self, key):
        hits = [i for i, g in enumerate(self.plan.workload.groups) if tuple(sorted(g.attrs)) == key]
        if len(hits) != 1:
            raise WorkloadError(
                f"the workload has {len(hits)} query groups on {self.plan.domain.names_of(key)}: "
                + ("use workload_answer(i) with a group index" if hits else "ask for one of its groups' attributes")
            )
        return hits[0]

    def entry(self, i):
        g = self.plan.workload.groups[i]
        dom = self.plan.domain
        attrs, names, labels = group_entry_labels(dom, g)
        return EntryAnswer(attrs, names, labels, self.group_answer(i), np.asarray(self.plan.group_variance(i)))

    def _cells_group(self, key) -> int | None:
        for i, g in enumerate(self.plan.workload.groups):
            if g.attrs == key and g.is_kron and all(
                    W.shape == (n, n) and np.array_equal(W, np.eye(n)) for W, n in zip(g.factors, g.sizes)):
                return i
        return None

    # -- any linear query: the residual pieces of q against each measured space ------------------
    def _space(self, S: tuple[int, ...]):
        """``(σ², sub-mechanism)`` of residual space ``S``, or ``None`` if it was not measured."""
        res = self.plan.residuals.get(S)
        if res is None or not math.isfinite(res.sigma2) or S not in self.noisy:
            return None
        return float(res.sigma2), self.plan.solutions[res.structure]

    def _pieces(self, key, q):
        """``(S, p_S)`` for every ``S ⊆ key`` whose residual piece of ``q`` is non-zero: ``p_S`` is
        ``q`` averaged over ``key∖S`` (so ``q · x̂_key = Σ_S p_S · r_S``); refuses by name when a
        piece lies outside what space ``S`` measured (row space of its strategy)."""
        dom = self.plan.domain
        scale = 1e-9 * max(1.0, float(np.abs(q).max(initial=0.0)))
        out = []
        for k in range(len(key) + 1):
            for pos in itertools.combinations(range(len(key)), k):
                S = tuple(key[p] for p in pos)
                drop = tuple(j for j in range(len(key)) if j not in pos)
                p_S = q.mean(axis=drop) if drop else q
                c_S = p_S
                for ax in range(c_S.ndim):  # the residual piece: centred along every kept axis
                    c_S = c_S - c_S.mean(axis=ax, keepdims=True)
                if float(np.abs(c_S).max(initial=0.0)) <= scale:
                    continue
                space = self._space(S)
                if space is None:
                    raise NotMeasuredError(
                        f"the query has a component in the residual space of {list(dom.names_of(S))}, "
                        "which this plan did not measure (not in its workload's closure); add a query "
                        f"group on {list(dom.names_of(key))} (e.g. its cells) to the workload and re-plan"
                    )
                mech = space[1]
                back = np.asarray(mech.reconstruct(mech.signal(c_S)), dtype=float).reshape(c_S.shape)
                if float(np.abs(back - c_S).max(initial=0.0)) > 1e-7 * max(1.0, float(np.abs(c_S).max())):
                    raise NotMeasuredError(
                        f"the query is not in the row space of the strategy measuring "
                        f"{list(dom.names_of(S))} (its {mech.method} strategy was optimized for the "
                        "workload's own queries there); ask a combination of the workload's queries "
                        f"on {list(dom.names_of(key))}, or add this query's kind to the workload and re-plan"
                    )
                out.append((S, p_S))
        return out

    def query_vector(self, key, q):
        """``q · x̂_key = Σ_{S⊆key} p_S · r_S`` with exact variance ``Σ_S σ²_S ‖p_S B_S⁺‖²`` (the
        spaces are measured independently; ``B_S⁺``'s columns lie in the residual space, so only
        the residual piece of ``p_S`` counts). Any ``q`` whose residual pieces lie in the measured
        row spaces is answered — sub-marginals of a query group, sums, differences, cells of a
        full-rank generalized group — else :class:`NotMeasuredError` names the space."""
        q = np.asarray(q, dtype=float).reshape(tuple(self.plan.domain.sizes[a] for a in key))
        est = var = 0.0
        for S, p_S in self._pieces(key, q):
            s2, mech = self._space(S)
            est += float(np.sum(p_S * self.residual(S)))
            var += s2 * float(np.asarray(mech.var_dense(p_S.reshape(1, -1))).reshape(-1)[0])
        return est, var

    def _cell_check(self, key) -> None:
        """Refuses the cells of ``key`` unless every cell is answerable (:meth:`_pieces` of each
        cell indicator, checked on the spaces' identity matrices at once)."""
        sizes = self.plan.domain.sizes
        for k in range(len(key) + 1):
            for S in itertools.combinations(key, k):
                n = math.prod(sizes[a] for a in S)
                if S and n > _MAX_CELL_CHECK:
                    raise PlanError(
                        f"the cells of {list(self.plan.domain.names_of(key))} span a residual space of "
                        f"{n} cells; ask linear queries on it with query_vector"
                    )
                shape = tuple(sizes[a] for a in S)
                E = np.eye(n).reshape((n,) + shape)
                for ax in range(1, E.ndim):
                    E = E - E.mean(axis=ax, keepdims=True)
                for row in (E if S else E[:0]):
                    self._pieces(S, row)  # raises when a cell's piece is not measured
                if not S:
                    self._pieces((), np.ones(()))

    def estimate(self, key):
        i = self._cells_group(key)
        if i is not None:
            return self.group_answer(i)
        self._cell_check(key)
        return self.combined(key)

    def variance(self, key):
        """Per-cell variance ``Σ_S σ²_S diag(B_S⁺B_S⁺ᵀ) / Π_{j∈key∖S} n_j²`` (broadcast)."""
        i = self._cells_group(key)
        if i is not None:
            return np.asarray(self.plan.group_variance(i))
        self._cell_check(key)
        sizes = self.plan.domain.sizes

        def term(S):
            space = self._space(S)
            if space is None:
                return None
            s2, mech = space
            return s2 * np.asarray(mech.var_dense(np.eye(math.prod(sizes[a] for a in S))), dtype=float)

        return _subset_sum(sizes, key, term, 2)
