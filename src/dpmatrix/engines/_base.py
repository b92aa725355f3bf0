"""The data-engine interface: the only code in dpmatrix that reads records.

An engine turns records (integer codes per attribute, see :class:`~dpmatrix._domain.Domain`) into
dense marginal count tables. A *marginal table* on the attribute set ``A`` (a sorted tuple of
attribute positions) is a numpy ``int64`` array of shape ``tuple(domain.sizes[i] for i in A)``,
axes in increasing attribute position; the 0-way marginal ``()`` is a 0-d array holding the number
of records.

Measurement needs only the workload's *maximal* attribute sets counted from data; every other
set is a sum of a superset's table (:func:`marginals_from_maximal`). All engines share the
validation messages below so that the same data give the same :class:`~dpmatrix.errors.DataError`
whatever the engine.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from .._domain import Domain
from .._encode import (  # re-exported: the engines' shared data messages live with the encoder
    CODES_HINT,
    MAX_SHOWN,
    code_dtype,
    duplicate_columns_message,
    fmt_value,
    fmt_values,
    missing_columns_message,
    non_integer_message,
    null_message,
    out_of_range_message,
    raise_problems,
    rows,
)
from ..errors import WorkloadError

AttrSet = tuple[int, ...]

@runtime_checkable
class CountEngine(Protocol):
    """Anything that can count marginals of records coded against ``domain``."""

    @property
    def domain(self) -> Domain:
        """The domain the records are coded against."""
        ...

    @property
    def n_records(self) -> int:
        """Number of records (the 0-way marginal)."""
        ...

    def count(
        self, attr_sets: Sequence[AttrSet], progress: bool = False
    ) -> dict[AttrSet, np.ndarray]:
        """Count exactly the requested attribute sets from the data.

        Returns ``{attr_set: int64 table}`` with one entry per distinct requested set.
        """
        ...


@runtime_checkable
class Closable(Protocol):
    """An engine holding resources (a DuckDB connection, a Spark session) released by ``close()``."""

    def close(self) -> None: ...


# -- attribute-set helpers -----------------------------------------------------------------------
def normalize_sets(domain: Domain, attr_sets: Iterable[Iterable[int]]) -> list[AttrSet]:
    """Validate and sort attribute sets; drops duplicates, keeps first-seen order."""
    out: list[AttrSet] = []
    seen: set[AttrSet] = set()
    d = len(domain)
    for s in attr_sets:
        t = tuple(int(i) for i in s)
        if len(set(t)) != len(t):
            raise WorkloadError(f"attribute set {t!r} lists an attribute more than once")
        for i in t:
            if not 0 <= i < d:
                raise WorkloadError(
                    f"attribute position {i} in {t!r} is out of range for a domain of {d} "
                    "attributes"
                )
        t = tuple(sorted(t))
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def maximal_sets(attr_sets: Iterable[AttrSet]) -> list[AttrSet]:
    """The sets not strictly contained in another set of the list (sorted, deduplicated).

    Linear in the total number of subsets: walking from the largest sets down, every subset of
    a kept set is marked as covered (a k-set has 2^k subsets), so 10^5–10^6 sets stay fast.
    """
    uniq = sorted({tuple(sorted(s)) for s in attr_sets}, key=lambda s: (-len(s), s))
    maximal: list[AttrSet] = []
    covered: set[AttrSet] = set()
    for s in uniq:
        if s in covered:
            continue
        maximal.append(s)
        for r in range(len(s)):
            covered.update(itertools.combinations(s, r))
    return sorted(maximal)


def project(table: np.ndarray, superset: AttrSet, subset: AttrSet) -> np.ndarray:
    """Marginal on ``subset`` obtained by summing the axes of ``table`` (on ``superset``) that
    ``subset`` does not have. Both sets sorted; ``subset`` must be contained in ``superset``."""
    pos = {a: k for k, a in enumerate(superset)}
    missing = [a for a in subset if a not in pos]
    if missing:
        raise ValueError(f"{subset!r} is not a subset of {superset!r}")
    drop = tuple(k for k, a in enumerate(superset) if a not in set(subset))
    if not drop:
        return table
    return np.asarray(table.sum(axis=drop), dtype=np.int64)


def marginals_from_maximal(
    engine: CountEngine, attr_sets: Sequence[Iterable[int]], progress: bool = False
) -> dict[AttrSet, np.ndarray]:
    """Marginal tables for every requested set, counting only the maximal ones from data.

    A requested set strictly contained in another requested set is derived by summing the table
    of its *smallest* (fewest cells) counted superset. Returns ``{sorted set: int64 table}`` for
    each distinct requested set (keys sorted as tuples of positions).
    """
    sets = normalize_sets(engine.domain, attr_sets)
    if not sets:
        return {}
    maximal = maximal_sets(sets)
    counted = engine.count(maximal, progress=progress)
    out: dict[AttrSet, np.ndarray] = {}
    domain = engine.domain
    for s in sets:
        if s in counted:
            out[s] = counted[s]
            continue
        fs = set(s)
        best = min(
            (m for m in maximal if fs <= set(m)),
            key=lambda m: (domain.cells(m), m),
        )
        out[s] = project(counted[best], best, s)
    return out


# -- progress ------------------------------------------------------------------------------------
class Progress:
    """Minimal progress reporter on stderr (no dependency; silent when disabled)."""

    def __init__(self, total: int, enabled: bool, label: str = "counting marginals"):
        self.total, self.enabled, self.label = total, enabled, label
        self.done = 0
        self.t0 = self._last = time.perf_counter()

    def step(self, k: int = 1) -> None:
        self.done += k
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last >= 0.5 or self.done >= self.total:
            self._last = now
            print(
                f"\r{self.label}: {self.done}/{self.total} sets, {now - self.t0:.1f} s",
                end="\n" if self.done >= self.total else "",
                file=sys.stderr,
                flush=True,
            )


def begin_count(
    domain: Domain, attr_sets: Iterable[Iterable[int]], n_records: int, progress: bool
) -> tuple[dict[AttrSet, np.ndarray], list[AttrSet], Progress]:
    """The start of a data engine's ``count``: the requested sets, normalized
    (:func:`normalize_sets`), each with a zero ``int64`` table; the non-empty ones, which are
    still to be counted from the data; and the progress reporter. The empty set's table (a
    0-d array) already holds ``n_records`` and has been stepped past."""
    sets = normalize_sets(domain, attr_sets)
    out = {s: empty_table(domain, s) for s in sets}
    prog = Progress(len(sets), progress)
    todo = [s for s in sets if s]
    for s in sets:
        if not s:
            out[s][()] = n_records
            prog.step()
    return out, todo, prog


# -- shared validation messages ------------------------------------------------------------------
def check_source_args(domain: object, encoding: str) -> None:
    """Reject a ``domain`` that is not a :class:`~dpmatrix.Domain` (``TypeError``) and an
    ``encoding`` other than ``"codes"``/``"raw"`` (``ValueError``): the arguments every
    file-reading engine takes first."""
    if not isinstance(domain, Domain):
        raise TypeError(f"domain must be a dpmatrix.Domain, got {type(domain).__name__}")
    if encoding not in ("codes", "raw"):
        raise ValueError(f"encoding must be 'codes' or 'raw', got {encoding!r}")


def empty_table(domain: Domain, s: AttrSet) -> np.ndarray:
    return np.zeros(tuple(domain.sizes[i] for i in s), dtype=np.int64)
