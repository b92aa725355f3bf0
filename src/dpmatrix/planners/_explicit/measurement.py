"""An explicit-strategy plan's side of the measurement protocol: its mechanism, and estimation.

**Mechanism.** The plan measures ``y = A x + N(0, σ² I)`` with ``x`` the flattened marginal on
``attrs`` (Li & Miklau §2.3), one :class:`~dpmatrix._mechanisms.linear.LinearMechanism` keyed by
``attrs``. ``noise="gaussian"`` (alias ``"gaussian_float"``) runs it with floating-point draws
from the generator; ``None``/``"auto"``/``"lattice_gaussian"`` (the secure default) run it with
the lattice sampler (:mod:`dpmatrix._mechanisms.lattice`): ``A`` snapped to ``γℤ``, exact discrete
Gaussian noise of scale ``σ̄ ≥ (1 + tol) σ`` rational, and the plan re-scored with
``σ² = ‖A‖²_{1→2} / (2ρ)``, ``ρ`` the lattice mechanism's exact cost — the re-scored plan's
privacy cost is what is spent (as QuerySmasher, :mod:`..querysmasher.measurement`).

**Estimation.** ``x̂ = A⁺ y`` (GLS with i.i.d. noise; minimum-norm if ``A`` is rank-deficient),
``q x̂`` unbiased with variance ``σ² q (AᵀA)⁺ qᵀ`` for every ``q`` in the row space of ``A``:
cells of marginals inside ``attrs`` (when answerable), linear queries on them, and the
workload's query groups.
"""

from __future__ import annotations

import numpy as np

from ..._linalg.marginal_map import marginal_map
from ..._reconstruct.estimator import EntryAnswer, Estimator
from ..._reconstruct.measurements import group_entry_labels
from ...errors import NotMeasuredError, PlanError, WorkloadError

__all__ = ["ExplicitEstimator", "explicit_mechanisms"]


def explicit_mechanisms(plan, noise: str | None, rel_var_tol: float):
    """``(plan measured, [mechanism])`` of an explicit-strategy plan for ``noise`` (module docstring)."""
    # the samplers are imported when measuring only: reading a release answers without them
    from ..._measure.secure import lattice_sigma_bar, rescored_sigma2
    from ..._mechanisms.lattice import DEFAULT_LATTICE_TOL, LatticeQuery
    from ..._mechanisms.linear import LinearMechanism

    key = plan.attrs
    if noise in ("gaussian", "gaussian_float"):
        return plan, [LinearMechanism.dense(key, plan.attrs, plan.strategy, plan.sigma2)]
    if noise not in (None, "auto", "lattice_gaussian"):
        raise PlanError("an explicit-strategy plan is measured with noise='lattice_gaussian' (secure, the "
                        f"default) or 'gaussian' (floating point), got {noise!r}")
    if not 0 < rel_var_tol < 1:
        raise PlanError(f"rel_var_tol must be in (0, 1), got {rel_var_tol!r}")
    sb = lattice_sigma_bar(float(plan.sigma2), 1, rel_var_tol=rel_var_tol, tol=DEFAULT_LATTICE_TOL)
    m = LinearMechanism.lattice_of(key, plan.attrs, LatticeQuery.of((plan.strategy,)), sb,
                                   pre=_flatten, tol=DEFAULT_LATTICE_TOL)
    s2 = rescored_sigma2(float(plan.sensitivity2), m.lattice.rho, float(plan.sigma2))
    return plan._rescaled(s2), [m]


def _flatten(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).reshape(-1)


class ExplicitEstimator(Estimator):
    """Least-squares estimates of an explicit-strategy plan from ``noisy[plan.attrs] = y``."""

    def __init__(self, plan, noisy):
        self.plan = plan
        if plan.attrs not in noisy:
            raise NotMeasuredError("the measurements hold no output of the plan's strategy")
        self.y = np.asarray(noisy[plan.attrs], dtype=float)
        self.cells = plan.estimate(self.y).reshape(-1)  # x̂ = A⁺ y on the cells of attrs

    def _map(self, key) -> np.ndarray:
        if not set(key) <= set(self.plan.attrs):
            raise NotMeasuredError(
                f"{list(self.plan.domain.names_of(key))} is not inside the measured marginal "
                f"{list(self.plan.domain.names_of(self.plan.attrs))}"
            )
        return marginal_map(self.plan.shape, tuple(self.plan.attrs.index(a) for a in key))

    def _shape(self, key) -> tuple[int, ...]:
        return tuple(self.plan.domain.sizes[a] for a in key)

    def estimate(self, key):
        self.plan._variance(key)  # refuses cells outside the strategy's row space
        return (self._map(key) @ self.cells).reshape(self._shape(key))

    def variance(self, key):
        return self.plan._variance(key)

    def covariance(self, key):
        """``σ² P (AᵀA)⁺ Pᵀ`` (``P`` the cells of attrs → cells of key)."""
        self.plan._variance(key)
        V, lam = self.plan._eig
        C = self._map(key) @ V
        return float(self.plan.sigma2) * (C / lam) @ C.T

    def query_vector(self, key, q):
        row = q.reshape(-1) @ self._map(key)
        var = float(self.plan._variances_of(row[None, :])[0])
        if not np.isfinite(var):
            raise NotMeasuredError(
                f"strategy {self.plan.name!r} cannot answer this query: it is not in the row space of "
                "the strategy (no unbiased linear estimate exists); combinations of the workload's "
                "queries answer, or re-plan with this query in the workload")
        return float(row @ self.cells), var

    # -- the workload's entries --------------------------------------------------------------------
    def entries(self):
        return iter(range(len(self.plan._groups)))

    def entry_of(self, key):
        hits = [i for i, g in enumerate(self.plan._groups) if tuple(sorted(g.attrs)) == key]
        if len(hits) != 1:
            raise WorkloadError(
                f"the workload has {len(hits)} entries on {list(self.plan.domain.names_of(key))}: "
                + ("use workload_answer(i) with an entry index" if hits else "ask for one of its entries' attributes")
            )
        return hits[0]

    def entry(self, i):
        g = self.plan._groups[i]
        dom = self.plan.domain
        var = np.asarray(self.plan.group_variance(i))
        est = (self.plan._lifted(i) @ self.cells).reshape(g.shape)
        est = np.where(np.isfinite(var), est, np.nan)  # no unbiased answer outside the row space
        attrs, names, labels = group_entry_labels(dom, g)
        return EntryAnswer(attrs, names, labels, est, var)
