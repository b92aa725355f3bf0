"""Answers to QuerySmasher workload queries from its noisy residual measurements.

Each residual mechanism releases ``ω_{A'} = B_{A'} x_{A'} + noise``; ``r_{A'} = B⁺ ω`` estimates
the component of the marginal ``x_{A'}`` in the row space of ``B`` (inside the residual space of
``A'``).  A query ``q`` on ``A`` is answered as ``Σ_{A'⊆A} q_{A'} · r_{A'}``, which equals
``q · x̂_A`` with ``x̂_A = Σ_{A'} r_{A'} / Π_{j∈A∖A'} n_j`` broadcast along the dropped attributes
(``r_{A'}`` is centred, so averaging q over the dropped attributes and centring it is implicit).
The answer is unbiased for every workload query; its variance is
:meth:`QuerySmasherPlan.group_variance`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["QSMeasurements"]


@dataclass(frozen=True, eq=False)
class QSMeasurements:
    """Noisy answers of a QuerySmasher plan's residual spaces (``omega``) and the workload's
    query answers reconstructed from them (frozen; ``_res`` only caches ``r_S``)."""

    plan: object
    omega: dict = field(repr=False)
    noise: str = "gaussian"
    randomness: str = "numpy_generator"
    _res: dict = field(default_factory=dict, repr=False)

    def residual(self, S: tuple[int, ...]) -> np.ndarray | None:
        """``r_S = B⁺ ω_S`` shaped like the marginal on S; None if S was not measured."""
        if S in self._res:
            return self._res[S]
        if S not in self.omega:
            return None
        res = self.plan.residuals[S]
        r = np.asarray(self.plan.solutions[res.structure].reconstruct(self.omega[S]), dtype=float)
        r = r.reshape(res.sizes)
        self._res[S] = r
        return r

    def marginal_estimate(self, attrs: tuple[int, ...]) -> np.ndarray:
        """``x̂_A = Σ_{A'⊆A} r_{A'} / Π n_dropped`` (unbiased for the workload's queries on A)."""
        sizes = self.plan.domain.sizes
        shape = tuple(sizes[a] for a in attrs)
        out = np.zeros(shape)
        for r in range(len(attrs) + 1):
            for sub in itertools.combinations(attrs, r):
                est = self.residual(sub)
                if est is None:
                    continue
                scale = math.prod(sizes[a] for a in attrs if a not in sub)
                expand = tuple(sizes[a] if a in sub else 1 for a in attrs)
                out = out + est.reshape(expand) / scale
        return out

    def answer(self, i: int) -> np.ndarray:
        """Noisy answers to the queries of group ``i`` (shaped like its table of queries)."""
        g = self.plan.workload.groups[i]
        out = np.asarray(g.answer(self.marginal_estimate(g.attrs)), dtype=float)
        # a query with a component in an unmeasured residual space (zero weight) has no
        # unbiased answer: report it as missing rather than a biased number
        return np.where(np.isfinite(self.variance(i)), out, np.nan)

    def variance(self, i: int) -> np.ndarray:
        return self.plan.group_variance(i)

    def answers(self) -> list[np.ndarray]:
        return [self.answer(i) for i in range(len(self.plan.workload.groups))]
