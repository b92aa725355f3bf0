"""An engine over the attributes a release uses, answering in the positions of the full domain.

A release reads and validates only the columns of the attributes its marginals use: a missing
value, or a value the domain does not cover, in a column no marginal touches must not stop it.
:class:`ProjectedEngine` holds an engine built on the sub-domain of those attributes and
translates attribute positions of the full domain into the sub-domain's (marginal tables have
the same axes in the same order, both being sorted by domain position).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .._domain import Domain
from ..errors import DataError
from ._base import AttrSet, normalize_sets


def subdomain(domain: Domain, attributes: Iterable[int]) -> tuple[Domain, tuple[int, ...]]:
    """The sub-domain of the given positions (domain order) and those positions, sorted."""
    pos = tuple(sorted(set(int(i) for i in attributes)))
    if not pos:
        raise DataError("a release must use at least one attribute")
    return Domain([domain.attributes[i] for i in pos]), pos


class ProjectedEngine:
    """Count marginals of the full domain with an engine built on a sub-domain.

    Parameters
    ----------
    inner : engine
        A counting engine whose ``domain`` is the sub-domain of ``positions``.
    domain : Domain
        The full domain (what callers address).
    positions : sequence of int
        Sorted positions in ``domain`` of the inner engine's attributes.
    """

    def __init__(self, inner: Any, domain: Domain, positions: Sequence[int]):
        self._inner = inner
        self._domain = domain
        self._to_inner = {p: k for k, p in enumerate(positions)}
        self.preferred_batch = getattr(inner, "preferred_batch", 512)

    @property
    def domain(self) -> Domain:
        return self._domain

    @property
    def n_records(self) -> int:
        return self._inner.n_records

    @property
    def inner(self) -> Any:
        return self._inner

    def count(self, attr_sets: Sequence[AttrSet], progress: bool = False) -> dict[AttrSet, np.ndarray]:
        sets = normalize_sets(self._domain, attr_sets)
        outside = sorted({self._domain.names[a] for s in sets for a in s if a not in self._to_inner})
        if outside:
            raise DataError(
                f"attribute(s) {', '.join(map(repr, outside))} were not read from the data (the "
                "engine was opened for the attributes the release uses only)"
            )
        inner_sets = [tuple(self._to_inner[a] for a in s) for s in sets]
        tables = self._inner.count(inner_sets, progress=progress)
        return {s: tables[t] for s, t in zip(sets, inner_sets)}

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()
