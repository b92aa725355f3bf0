"""Reconstruction: unbiased, mutually consistent answers with exact variances (post-processing).

The noisy output ``ω_A`` of each residual mechanism gives ``r_A = (⊗ Sub_i⁺) ω_A``, an unbiased
estimate of the residual component of the marginal on ``A``. The marginal on any closure member
``M`` is then (Algorithm 2, Theorem 4.4)::

    x̂_M = Σ_{A ⊆ M} r_A / Π_{j ∈ M∖A} n_j        (r_A broadcast along the attributes of M∖A)

which is the unique linear unbiased estimate from the measurements — in particular the best
linear unbiased (generalized least squares) one — and the answers to two marginals agree on
their common sub-marginals. Its covariance is
``Σ_{A⊆M} σ²_A ⊗_{i∈A} K_i ⊗_{j∈M∖A} (11ᵀ/n_j²)`` (``K_i`` the residual covariance factor),
whose diagonal gives the per-cell variances without any matrix inversion.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import norm
from tqdm.auto import tqdm

from ..errors import NotMeasuredError, WorkloadError
from ..workload import AttrSet

__all__ = ["Measurements", "marginal_frame"]

# residual estimates kept for reuse, in numbers of floats (about 400 MB)
_CACHE_FLOATS = 50_000_000


@dataclass(frozen=True, eq=False)
class Measurements:
    """Noisy residual answers of a plan, and everything that can be reconstructed from them."""

    plan: object
    noisy: Mapping[AttrSet, np.ndarray] = field(repr=False)
    noise: str = "gaussian"
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    # -- building blocks ------------------------------------------------------------------------
    def _key(self, attrs) -> AttrSet:
        return self.plan.domain.resolve(attrs)

    def residual(self, attrs) -> np.ndarray:
        """``r_A``: unbiased estimate of the residual component of the marginal on ``A``."""
        key = attrs if isinstance(attrs, tuple) and all(isinstance(a, int) for a in attrs) else self._key(attrs)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if key not in self.noisy:
            names = self.plan.domain.names_of(key)
            raise NotMeasuredError(
                f"the residual of {names} was not measured: the marginal is not in the closure "
                "of the planned workload (or has zero weight); add it to the workload and re-plan"
            )
        r = self.plan.mechanism(key).residual(self.noisy[key])
        size = sum(v.size for v in self._cache.values())
        if size + r.size > _CACHE_FLOATS:
            self._cache.clear()
        self._cache[key] = r
        return r

    def estimate(self, attrs: Iterable[str | int] | str) -> np.ndarray:
        """Unbiased estimate of the marginal on ``attrs``, shaped like the table (domain order)."""
        key = self._key(attrs)
        sizes = self.plan.domain.sizes
        shape = tuple(sizes[a] for a in key)
        out = np.zeros(shape)
        for r in range(len(key) + 1):
            for sub in itertools.combinations(key, r):
                res = self.residual(sub)
                dropped = [a for a in key if a not in sub]
                scale = float(np.prod([sizes[a] for a in dropped])) if dropped else 1.0
                expand = tuple(sizes[a] if a in sub else 1 for a in key)
                out = out + res.reshape(expand) / scale
        return out

    def variance(self, attrs: Iterable[str | int] | str) -> np.ndarray:
        """Exact per-cell variances of :meth:`estimate` (data-independent)."""
        return self.plan.variance(attrs)

    def covariance(self, attrs: Iterable[str | int] | str, max_cells: int = 20_000) -> np.ndarray:
        """Full covariance matrix of the flattened (C order) estimate of one marginal."""
        key = self._key(attrs)
        sizes = self.plan.domain.sizes
        cells = int(np.prod([sizes[a] for a in key])) if key else 1
        if cells > max_cells:
            raise WorkloadError(
                f"the covariance of {self.plan.domain.names_of(key)} would be {cells}×{cells}; "
                f"raise max_cells (now {max_cells}) if you really want it"
            )
        out = np.zeros((cells, cells))
        bases = self.plan.bases
        for sub, s2 in self.plan._subset_terms(key):
            term = np.array([[s2]])
            for a in key:
                n = sizes[a]
                f = bases[a].resid_cov if a in sub else np.full((n, n), 1.0 / n**2)
                term = np.kron(term, f)
            out += term
        return out

    def marginal(self, attrs: Iterable[str | int] | str, level: float = 0.95) -> pd.DataFrame:
        """Tidy table of one marginal: attribute columns, estimate, variance, std, CI bounds."""
        key = self._key(attrs)
        return marginal_frame(self.plan.domain, key, self.estimate(key), self.variance(key), level)

    def iter_marginals(
        self, level: float = 0.95, progress: bool = False
    ) -> Iterator[tuple[tuple[str, ...], pd.DataFrame]]:
        """Yield ``(attribute names, table)`` for every workload marginal, one at a time."""
        wk = self.plan.workload
        for i in tqdm(range(len(wk)), desc="reconstructing", unit="marginal", disable=not progress):
            key = wk.sets[i]
            if not all(sub in self.noisy for r in range(len(key) + 1) for sub in itertools.combinations(key, r)):
                continue  # zero-weight marginal whose residuals were not measured
            yield wk.names(i), self.marginal(key, level)

    def __repr__(self) -> str:
        n = sum(v.size for v in self.noisy.values())
        return f"Measurements({len(self.noisy)} residual mechanisms, {n} noisy numbers, noise={self.noise!r})"


def _z(level: float) -> float:
    if not 0 < level < 1:
        raise WorkloadError(f"confidence level must be strictly between 0 and 1, got {level!r}")
    return float(norm.ppf(0.5 + level / 2))


def marginal_frame(domain, key: AttrSet, estimate: np.ndarray, variance: np.ndarray, level: float) -> pd.DataFrame:
    """Tidy table: one row per cell (C order), labelled attribute columns, estimate, variance,
    std, and the bounds of the normal confidence interval at ``level``."""
    z = _z(level)
    cols: dict[str, object] = {}
    shape = estimate.shape
    grids = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), dtype=int)
    for axis, a in enumerate(key):
        attr = domain.attributes[a]
        codes = grids[axis]
        if attr.labels is not None:
            cols[attr.name] = pd.Categorical.from_codes(codes, categories=list(attr.labels))
        else:
            cols[attr.name] = codes
    est = estimate.reshape(-1)
    var = np.broadcast_to(variance, shape).reshape(-1)
    std = np.sqrt(var)
    cols["estimate"] = est
    cols["variance"] = var
    cols["std"] = std
    cols["lower"] = est - z * std
    cols["upper"] = est + z * std
    df = pd.DataFrame(cols)
    df.attrs["marginal"] = domain.names_of(key)
    df.attrs["confidence_level"] = level
    return df
