"""Variance summaries of a pure ε-DP plan that knows the exact variance of every workload query.

A plan with ``_entry_variances`` (one array per workload entry: the variance of each of its
queries), ``workload.weights`` and ``objective`` ("sum" or "max") gets the protocol's summaries
from this mixin; only the positively weighted entries count (a weight 0 entry is answered but not
planned for):

* ``total_variance = Σ_W w_W Σ_{q of W} Var(q)``,
* ``max_variance = max_{W: w_W > 0} max_{q of W} Var(q)``,
* ``rmse = sqrt(Σ Var(q) / #queries)`` over the same entries.
"""

from __future__ import annotations

import math

__all__ = ["EntryVarianceSummaries"]


class EntryVarianceSummaries:
    """Mixin: ``total_variance``, ``max_variance``, ``rmse`` from ``_entry_variances``."""

    def _positive(self) -> list[int]:
        return [j for j, w in enumerate(self.workload.weights) if w > 0]

    def total_variance(self) -> float:
        """``Σ_W w_W Σ_{q of W} Var(q)`` over the positively weighted entries."""
        return float(sum(self.workload.weights[j] * self._entry_variances[j].sum() for j in self._positive()))

    def max_variance(self) -> float:
        """Largest variance of a query of a positively weighted entry."""
        return float(max(self._entry_variances[j].max() for j in self._positive()))

    def rmse(self) -> float:
        """Root mean squared error over the queries of the positively weighted entries."""
        js = self._positive()
        return math.sqrt(sum(float(self._entry_variances[j].sum()) for j in js)
                         / sum(self._entry_variances[j].size for j in js))

    def _objective_value(self) -> tuple[str, float]:
        return ("max_var", self.max_variance()) if self.objective == "max" else ("sum_var", self.total_variance())
