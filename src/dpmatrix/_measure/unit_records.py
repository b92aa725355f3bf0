"""The records of a release with a privacy unit: read with the identifier, bounded to ``k`` per
person, then counted in memory.

With :class:`~dpmatrix._unit.Unit` the counts must come from the records that
:func:`~dpmatrix._unit.bound_contributions` keeps (at most ``k`` per identifier), so the
identifier column is read along with the attributes the plan uses. Every engine's input takes
the same route: a DataFrame is bounded as is; a CSV or Parquet file (whichever engine was asked
for) is read into memory — only the used columns and the identifier, CSV values as text exactly as
the numpy engine reads them (:func:`dpmatrix._encode.read_csv_text`) — bounded, and counted by the
numpy engine; a Spark DataFrame is collected (those columns only) to the driver. A release with a
unit therefore needs the used columns in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from .._unit import Unit, bound_contributions
from ..errors import DataError

__all__ = ["bounded_records"]


def _read_file(path: str, columns: Sequence[str], data_format: str | None, delimiter: str | None) -> pd.DataFrame:
    fmt = (data_format or "").lower()
    if not fmt:
        low = path.lower()
        fmt = "parquet" if low.endswith((".parquet", ".pq", ".parq")) or Path(path).is_dir() else "csv"
        if low.endswith(".tsv") and delimiter is None:
            delimiter = "\t"
    wanted = set(columns)
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            names = pq.read_schema(path).names if Path(path).is_file() else None
            if names is not None:
                _check_id(columns[-1], names)
            use = [c for c in names if c in wanted] if names is not None else list(columns)
            return pd.read_parquet(path, columns=use)
        _check_id(columns[-1], list(pd.read_csv(path, sep=delimiter or ",", nrows=0).columns))
        df = pd.read_csv(path, sep=delimiter or ",", dtype=str, keep_default_na=False, na_filter=False,
                         usecols=lambda c: c in wanted)  # fmt: skip
    except DataError:
        raise
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read {path!r}: {exc}") from None
    return df.astype(object).mask(df == "", None)


def _check_id(id_column: str, present: Sequence[str]) -> None:
    """The identifier column must be in the data: an error naming it, with a did-you-mean."""
    if id_column in present:
        return
    import difflib

    key = lambda c: str(c).casefold().replace(" ", "").replace("_", "")  # noqa: E731
    near = [c for c in present if key(c) == key(id_column)] or difflib.get_close_matches(id_column, list(present), 1, 0.8)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    have = ", ".join(repr(str(c)) for c in list(present)[:20]) + (" ..." if len(present) > 20 else "")
    raise DataError(f"privacy unit: the identifier column {id_column!r} is not in the data (it has {have}){hint}")


def bounded_records(
    data: Any,
    names: Sequence[str],
    unit: Unit,
    *,
    data_format: str | None = None,
    delimiter: str | None = None,
    key: bytes | None = None,
    na_values: Sequence[str] = (),
) -> pd.DataFrame:
    """The records to count under ``unit``: at most ``unit.max_records`` per identifier.

    Parameters
    ----------
    data : pandas.DataFrame, str, pathlib.Path or pyspark DataFrame
        Records holding the attributes ``names`` and the identifier column.
    names : sequence of str
        The attributes the plan measures (the record's content that is hashed and kept).
    unit : Unit
    data_format, delimiter : optional
        For a file path (default: from the suffix; ``,``).
    key : bytes, optional
        The selection's HMAC key (default: fresh from the OS); tests only.
    na_values : sequence of str, optional
        Text markers that also mean a missing identifier.

    Returns
    -------
    pandas.DataFrame
        The kept records' ``names`` columns (raw values), without the identifier.

    Examples
    --------
    >>> df = pd.DataFrame({"id": [1, 1, 1, 2], "x": ["a", "b", "a", "b"]})
    >>> len(bounded_records(df, ["x"], Unit("id", 2)))
    3
    """
    cols = [*names, unit.id_column]
    if isinstance(data, (str, Path)):
        df = _read_file(str(data), cols, data_format, delimiter)
    elif isinstance(data, pd.DataFrame):
        df = data
    elif type(data).__module__.startswith("pyspark"):
        present = [c for c in cols if c in data.columns]
        df = data.select(*present).toPandas()
    else:
        raise DataError(
            f"a privacy unit needs the records with their identifier column {unit.id_column!r}: give a "
            f"DataFrame or a CSV/Parquet path, not {type(data).__name__}"
        )
    _check_id(unit.id_column, [str(c) for c in df.columns])
    missing = [c for c in names if c not in df.columns]
    if missing:
        from .._encode import missing_columns_message

        raise DataError(missing_columns_message(missing, [str(c) for c in df.columns]))
    return bound_contributions(df[[c for c in cols if c in df.columns]], unit, columns=list(names), key=key,
                               na_values=na_values)  # fmt: skip
