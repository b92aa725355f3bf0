"""What a plan gives :class:`~dpmatrix._reconstruct.measurements.Measurements` to answer from its
noisy outputs: the estimation half of the plan protocol (:mod:`dpmatrix.planners._base`).

A plan of the ResidualPlanner family is reconstructed by :class:`Measurements` itself (Algorithm 2,
its fast batched path). Every other plan implements ``plan.estimator(noisy)`` returning an
:class:`Estimator` bound to the noisy outputs (``noisy[key]`` for each of the plan's
:class:`~dpmatrix._mechanisms.linear.LinearMechanism`); :class:`Measurements` turns its arrays into
the same tidy tables for every planner. All methods take sorted tuples of attribute positions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..errors import PlanError

__all__ = ["Estimator", "EntryAnswer"]

AttrSet = tuple[int, ...]


@dataclass(frozen=True)
class EntryAnswer:
    """The answers to one workload entry's queries, ready for a tidy table.

    ``attributes`` are the entry's attribute names (domain order); ``names`` are the table's label columns and ``labels`` one list of row labels per column
    (``None``: integer codes); ``estimate`` and ``variance`` are shaped like the table of queries.
    """

    attributes: tuple[str, ...]
    names: tuple[str, ...]
    labels: list
    estimate: np.ndarray
    variance: np.ndarray


class Estimator(ABC):
    """Estimates, variances and answers from one plan's noisy outputs (unbiased, linear)."""

    @abstractmethod
    def estimate(self, key: AttrSet) -> np.ndarray:
        """Estimate of the marginal table on ``key`` (axes in domain order)."""

    @abstractmethod
    def variance(self, key: AttrSet) -> np.ndarray:
        """Exact variance of every cell of :meth:`estimate`, shaped like the table."""

    def covariance(self, key: AttrSet) -> np.ndarray:
        """Covariance of the flattened (C order) estimate of one marginal."""
        raise PlanError(f"{type(self).__name__} does not give full covariances")

    def query_vector(self, key: AttrSet, q: np.ndarray) -> tuple[float, float]:
        """Estimate and exact variance of ``q · x_key`` (``q`` shaped like the table);
        by default from :meth:`estimate` and :meth:`covariance`."""
        est = float(np.sum(q * self.estimate(key)))
        flat = q.reshape(-1)
        return est, float(flat @ self.covariance(key) @ flat)

    def grouped_queries(self, key: AttrSet, by: tuple[int, ...], shape: tuple[int, ...],
                        w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Estimates and exact variances of the queries ``e_g ⊗ w``, one per cell ``g`` of the
        axes ``by`` (positions within ``key``, ascending) of the table on ``key`` (``shape``);
        ``w`` weights the other axes (in ``key`` order). Returns two arrays shaped like the
        ``by`` axes. By default one :meth:`query_vector` per group."""
        by_shape = tuple(shape[j] for j in by)
        est, var = np.empty(by_shape), np.empty(by_shape)
        rest = [j for j in range(len(shape)) if j not in by]
        for g in np.ndindex(*by_shape):
            q = np.zeros(shape)
            index: list = [slice(None)] * len(shape)
            for j, c in zip(by, g):
                index[j] = c
            q[tuple(index)] = w if rest else 1.0
            est[g], var[g] = self.query_vector(key, q)
        return est, var

    @abstractmethod
    def entries(self) -> Iterator[int]:
        """Indices of the workload entries that have answers (for ``iter_marginals``)."""

    @abstractmethod
    def entry(self, i: int) -> EntryAnswer:
        """The answers to workload entry ``i``'s queries."""

    def entry_of(self, key: AttrSet) -> int:
        """The one workload entry on ``key``."""
        raise PlanError("this plan's workload entries are addressed by index")
