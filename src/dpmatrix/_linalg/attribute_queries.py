"""Per-attribute base workloads ``W_i`` for ResidualPlanner+ (paper section 7.1).

Every attribute ``Att_i`` of a generalized-marginal workload carries a *basic matrix* ``W_i``
with ``n = |Att_i|`` columns: the identity for categorical attributes (ordinary marginals),
prefix sums or all ranges for ordinal ones, or any user matrix.  The only requirement
(section 7.1, item 1) is that the all-ones row ``1ᵀ`` lies in the row space of ``W_i`` — the
ResidualPlanner+ residual basis measures the ``1`` direction separately (the ∅ residual) and
needs ``W_i`` to be reconstructible from it plus the residual of ``Att_i``.

All functions here are pure and return fresh ``float64`` arrays.
"""

from __future__ import annotations

import numpy as np

from ..errors import WorkloadError

__all__ = [
    "identity",
    "prefix",
    "all_ranges",
    "validate_query_matrix",
    "query_matrix",
    "QUERY_KINDS",
]


def _check_size(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise WorkloadError(f"attribute size must be a positive integer, got {n!r}")
    if n < 1:
        raise WorkloadError(f"attribute size must be a positive integer, got {n}")
    return int(n)


def identity(n: int) -> np.ndarray:
    """``I_n``: one query per value (ordinary marginal cells)."""
    return np.eye(_check_size(n))


def prefix(n: int) -> np.ndarray:
    """Prefix sums: lower-triangular ones, row ``k`` answers "value ≤ k" (``k = 0..n-1``)."""
    return np.tril(np.ones((_check_size(n), n)))


def all_ranges(n: int) -> np.ndarray:
    """Every range ``[a, b]`` with ``0 ≤ a ≤ b < n``: ``n(n+1)/2`` rows.

    Ordered as in the paper's ``W_range`` example (section 7.1, n = 3): all ranges of length 1
    (singletons), then all of length 2, ..., then the full range; within one length by start.
    """
    n = _check_size(n)
    rows = []
    for length in range(1, n + 1):
        for a in range(0, n - length + 1):
            r = np.zeros(n)
            r[a : a + length] = 1.0
            rows.append(r)
    return np.array(rows)


def validate_query_matrix(W, n: int, *, name: str = "query matrix", rtol: float = 1e-8) -> np.ndarray:
    """Check a per-attribute query matrix and return it as a float64 2-D array.

    Requirements: 2-D, at least one row, exactly ``n`` columns, all entries finite, and the
    all-ones row ``1ᵀ`` in the row space of ``W`` (least-squares residual of ``Wᵀ y = 1``
    below ``rtol · sqrt(n)`` relative to ``||W||``).  Raises :class:`WorkloadError` otherwise.
    """
    n = _check_size(n)
    try:
        A = np.asarray(W, dtype=float)
    except (TypeError, ValueError) as exc:
        raise WorkloadError(f"{name} must be a numeric matrix; could not convert it: {exc}") from None
    if A.ndim == 1:
        raise WorkloadError(
            f"{name} must be 2-D (one row per query, {n} columns); got a 1-D array of length "
            f"{A.shape[0]} — wrap a single query as [[...]] or use .reshape(1, -1)"
        )
    if A.ndim != 2:
        raise WorkloadError(f"{name} must be 2-D (queries x {n} values); got shape {A.shape}")
    if A.shape[0] == 0:
        raise WorkloadError(f"{name} has no rows; give at least one query over the {n} values")
    if A.shape[1] != n:
        raise WorkloadError(
            f"{name} has {A.shape[1]} columns but the attribute has {n} values; each row must "
            f"give one coefficient per attribute value"
        )
    if not np.all(np.isfinite(A)):
        bad = int(np.size(A) - np.count_nonzero(np.isfinite(A)))
        raise WorkloadError(f"{name} contains {bad} non-finite entries (NaN or inf); all must be finite")
    ones = np.ones(n)
    y, *_ = np.linalg.lstsq(A.T, ones, rcond=None)
    resid = np.linalg.norm(A.T @ y - ones)
    scale = max(1.0, np.linalg.norm(A, 2) * np.linalg.norm(y))
    if not resid <= rtol * np.sqrt(n) * scale:
        raise WorkloadError(
            f"{name}: the all-ones row (the total over the attribute) is not in the row space of "
            f"the queries (least-squares residual {resid:.3g}); ResidualPlanner+ requires it "
            f"(paper section 7.1). Add a row of ones, or rows that sum to it (e.g. the identity "
            f"or prefix sums)"
        )
    return A


QUERY_KINDS = {
    "identity": identity,
    "prefix": prefix,
    "range": all_ranges,
}
ALIASES = {
    "marginal": "identity",
    "cells": "identity",
    "prefixes": "prefix",
    "prefix_sum": "prefix",
    "ranges": "range",
    "all_ranges": "range",
}


def kind_name(kind: str) -> str | None:
    """The canonical name of a built-in query kind (resolving aliases), or ``None``."""
    key = ALIASES.get(kind.lower(), kind.lower())
    return key if key in QUERY_KINDS else None


def query_matrix(kind, n: int) -> np.ndarray:
    """Resolve a per-attribute query spec to a validated ``W_i``.

    ``kind`` is ``"identity"`` | ``"prefix"`` | ``"range"`` (aliases ``"marginal"``,
    ``"ranges"``, ``"all_ranges"``, ``"prefix_sum"``) or a user matrix (array-like, validated
    with :func:`validate_query_matrix`).
    """
    n = _check_size(n)
    if isinstance(kind, str):
        key = kind_name(kind)
        if key is None:
            raise WorkloadError(
                f"unknown per-attribute query kind {kind!r}; use one of "
                f"{sorted(QUERY_KINDS)} or pass an explicit matrix with {n} columns"
            )
        return QUERY_KINDS[key](n)
    return validate_query_matrix(kind, n)
