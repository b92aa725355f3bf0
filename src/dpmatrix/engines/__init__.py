"""Data engines: the only code that reads records. They return marginal count tables."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..domain import Domain
from ..errors import DataError

__all__ = ["InMemoryEngine", "engine_for"]


class InMemoryEngine:
    """Counts marginals of an in-memory table of integer codes with ``numpy.bincount``."""

    def __init__(self, data: pd.DataFrame | np.ndarray, domain: Domain):
        self.domain = domain
        if isinstance(data, pd.DataFrame):
            missing = [n for n in domain.names if n not in data.columns]
            if missing:
                raise DataError(f"the data has no column(s) {missing} required by the domain")
            cols = [data[n].to_numpy() for n in domain.names]
        else:
            arr = np.asarray(data)
            if arr.ndim != 2 or arr.shape[1] != len(domain):
                raise DataError(
                    f"an array of data must have shape (records, {len(domain)}), got {arr.shape}"
                )
            cols = [arr[:, i] for i in range(arr.shape[1])]
        codes = []
        for name, size, col in zip(domain.names, domain.sizes, cols):
            codes.append(_validate_codes(name, size, col))
        self.codes = codes
        self.n_records = len(codes[0]) if codes else 0

    def count(self, attr_sets: Sequence[tuple[int, ...]]) -> dict[tuple[int, ...], np.ndarray]:
        out = {}
        sizes = self.domain.sizes
        for s in attr_sets:
            shape = tuple(sizes[i] for i in s)
            if not s:
                out[s] = np.array(self.n_records, dtype=np.int64)
                continue
            flat = np.ravel_multi_index(tuple(self.codes[i] for i in s), shape)
            out[s] = np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape).astype(np.int64)
        return out


def _validate_codes(name: str, size: int, col: np.ndarray) -> np.ndarray:
    col = np.asarray(col)
    if col.dtype.kind == "O":
        try:
            col = col.astype(float)
        except (TypeError, ValueError):
            raise DataError(f"column {name!r} holds non-numeric values; codes must be integers") from None
    if col.dtype.kind == "f":
        nan = np.isnan(col)
        if nan.any():
            raise DataError(f"column {name!r} has {int(nan.sum())} missing value(s) (NaN)")
        if np.any(col != np.round(col)):
            raise DataError(f"column {name!r} holds non-integer values; codes must be integers")
    elif col.dtype.kind not in "iub":
        raise DataError(f"column {name!r} has dtype {col.dtype}; codes must be integers")
    bad = (col < 0) | (col >= size)
    if bad.any():
        vals = sorted(set(np.asarray(col[bad]).tolist()))[:5]
        raise DataError(
            f"column {name!r} has {int(bad.sum())} row(s) with codes outside 0..{size - 1} "
            f"(e.g. {vals}); fix the data or the domain"
        )
    return col.astype(np.int64)


def engine_for(data, domain: Domain):
    """The engine for a data argument: an engine object as is, a DataFrame/array in memory."""
    if hasattr(data, "count") and hasattr(data, "n_records") and not isinstance(data, pd.DataFrame):
        return data
    if isinstance(data, (pd.DataFrame, np.ndarray)):
        return InMemoryEngine(data, domain)
    raise DataError(
        f"cannot measure data of type {type(data).__name__}: pass a pandas DataFrame of codes"
    )
