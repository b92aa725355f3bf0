"""Data engines: the only code that reads records. They return marginal count tables.

* :class:`NumpyEngine` — an in-memory DataFrame or array of codes (``numpy.bincount``).
* :class:`DuckDBEngine` — CSV or Parquet files, counted inside embedded DuckDB without loading
  the file into pandas (the default for files).

Both validate the data against the domain first and raise :class:`~dpmatrix.DataError` naming
the column, offending values and number of rows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..domain import Domain
from ..errors import DataError
from .base import CountEngine, marginals_from_maximal, maximal_sets, project
from .duckdb_engine import DuckDBEngine
from .numpy_engine import NumpyEngine

__all__ = [
    "CountEngine",
    "DuckDBEngine",
    "NumpyEngine",
    "engine_for",
    "marginals_from_maximal",
    "maximal_sets",
    "project",
]


def engine_for(data, domain: Domain) -> CountEngine:
    """The engine for a data argument: an engine as is, a DataFrame/array in memory, a path to a
    CSV or Parquet file through DuckDB."""
    if isinstance(data, (pd.DataFrame, np.ndarray)):
        return NumpyEngine(data, domain)
    if isinstance(data, (str, Path)):
        return DuckDBEngine(data, domain)
    if hasattr(data, "count") and hasattr(data, "n_records"):
        if getattr(data, "domain", domain) != domain:
            raise DataError("the engine was built for a different domain than the plan's")
        return data
    raise DataError(
        f"cannot measure data of type {type(data).__name__}: pass a pandas DataFrame of codes, "
        "a path to a CSV/Parquet file, or a data engine"
    )
