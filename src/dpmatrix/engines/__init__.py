"""Data engines: the only code that reads records. They return marginal count tables.

* :class:`NumpyEngine` — an in-memory DataFrame or array of codes (``numpy.bincount``).
* :class:`DuckDBEngine` — CSV or Parquet files, counted inside embedded DuckDB without loading
  the file into pandas (the default for files).
* :class:`~.spark_engine.SparkEngine` — a Spark DataFrame, table or Parquet/CSV lake, counted in
  Apache Spark (``engine="spark"``; needs ``pip install 'dpmatrix[spark]'`` and Java 17+).
* :func:`engine_for` — the engine for a data argument, reading raw values or codes
  (``encoding="auto"|"raw"|"codes"``, :mod:`.data_source`).

Both validate the data against the domain first and raise :class:`~dpmatrix.DataError` naming
the column, offending values and number of rows.
"""

from __future__ import annotations

from ._base import Closable, CountEngine, marginals_from_maximal, maximal_sets, project
from ._data_source import ENCODINGS, engine_for
from ._duckdb_engine import DuckDBEngine
from ._numpy_engine import NumpyEngine
from ._spark_engine import SparkEngine

__all__ = [
    "Closable",
    "CountEngine",
    "DuckDBEngine",
    "ENCODINGS",
    "NumpyEngine",
    "SparkEngine",
    "engine_for",
    "marginals_from_maximal",
    "maximal_sets",
    "project",
]
