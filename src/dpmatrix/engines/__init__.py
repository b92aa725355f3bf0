"""Data engines: the only code that reads records. They return marginal count tables.

* :class:`NumpyEngine` — an in-memory DataFrame or array of codes (``numpy.bincount``).
* :class:`DuckDBEngine` — CSV or Parquet files, counted inside embedded DuckDB without loading
  the file into pandas (the default for files).
* :class:`~.spark_engine.SparkEngine` — a Spark DataFrame, table or Parquet/CSV lake, counted in
  Apache Spark (``engine="spark"``; needs ``pip install 'dpmatrix[spark]'`` and Java 17+).

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
from .spark_engine import SparkEngine

__all__ = [
    "CountEngine",
    "DuckDBEngine",
    "NumpyEngine",
    "engine_for",
    "marginals_from_maximal",
    "maximal_sets",
    "project",
]


def engine_for(data, domain: Domain, engine=None) -> CountEngine:
    """The engine for a data argument: an engine as is, a DataFrame/array in memory, a path to a
    CSV or Parquet file through DuckDB, a Spark DataFrame through Spark.

    ``engine``: an engine object (returned as is), or a name: ``"numpy"``, ``"duckdb"``,
    ``"spark"`` (a Parquet/CSV path or table name counted in Spark on ``local[*]`` or the active
    session; build a :class:`~.spark_engine.SparkEngine` to choose a cluster)."""
    if engine is not None and not isinstance(engine, str):
        data, engine = engine, None
    if engine is not None and engine not in ("numpy", "duckdb", "spark"):
        raise DataError(f"engine must be 'numpy', 'duckdb' or 'spark', got {engine!r}")
    is_spark_df = type(data).__name__ == "DataFrame" and type(data).__module__.startswith("pyspark.sql")
    if engine == "spark" or is_spark_df:
        return SparkEngine(data, domain)
    if engine == "numpy" and isinstance(data, (str, Path)):
        raise DataError("engine='numpy' counts a DataFrame in memory; load the file first or use 'duckdb'")
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
