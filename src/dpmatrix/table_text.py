"""A table (:class:`pyarrow.Table`) as text for the terminal, CSV or JSON, without pandas.

``dpmatrix query`` prints a saved table read straight from the release's Parquet dataset; going
through pandas only to print it would cost more than the read (importing pandas alone takes
longer than reading a table). The text form follows pandas' ``to_string(index=False)``: columns
right-aligned under right-aligned headers, numbers in a fixed notation shared by the column.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.csv as pcsv

__all__ = ["format_table", "negative_count"]


def _plain(t: pa.Table) -> pa.Table:
    if not any(pa.types.is_dictionary(f.type) for f in t.schema):
        return t
    return t.cast(pa.schema([pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
                             for f in t.schema]))


def _float_cells(values: Sequence[float | None]) -> list[str]:
    """Fixed notation with at most 6 decimals, the same number of decimals for the column
    (trailing zeros common to every value dropped); scientific notation when fixed notation
    would be unreadable (magnitudes ≥ 1e15, or non-zero values all below 1e-4)."""
    finite = [abs(v) for v in values if v is not None and math.isfinite(v)]
    big = max(finite, default=0.0)
    small = min((v for v in finite if v > 0), default=1.0)
    if big >= 1e15 or small < 1e-4 and big < 1e-4:
        return ["NaN" if v is None else f"{v:.6e}" for v in values]
    text = ["NaN" if v is None else f"{v:.6f}" for v in values]
    decimals = 0
    for s in text:
        if "." in s:
            decimals = max(decimals, len(s.split(".")[1].rstrip("0")))
    decimals = max(decimals, 1)
    return ["NaN" if v is None else (f"{v:.{decimals}f}" if math.isfinite(v) else str(v)) for v in values]


def _text(t: pa.Table) -> str:
    columns = []
    for name, col in zip(t.column_names, t.columns):
        values = col.to_pylist()
        if pa.types.is_floating(col.type):
            cells = _float_cells(values)
        else:
            cells = ["NaN" if v is None else str(v) for v in values]
        width = max([len(name), *map(len, cells)])
        columns.append([name.rjust(width), *(c.rjust(width) for c in cells)])
    if not columns:
        return ""
    return "\n".join(" ".join(row) for row in zip(*columns)) + "\n"


def _csv(t: pa.Table) -> str:
    head = io.StringIO()
    csv.writer(head, lineterminator="\n").writerow(t.column_names)
    body = io.BytesIO()
    if t.num_rows:
        renamed = t.rename_columns([f"c{i}" for i in range(t.num_columns)])
        pcsv.write_csv(renamed, body, pcsv.WriteOptions(include_header=False, quoting_style="needed"))
    return head.getvalue() + body.getvalue().decode("utf-8")


def _json(t: pa.Table) -> str:
    def clean(v):
        return None if isinstance(v, float) and not math.isfinite(v) else v

    rows = [{k: clean(v) for k, v in r.items()} for r in t.to_pylist()]
    return json.dumps(rows, indent=1, ensure_ascii=False) + "\n"


def format_table(table: pa.Table, fmt: str = "table") -> str:
    """``table`` as text: ``"table"`` (aligned columns), ``"csv"`` (header, then one line per
    row, exact numbers) or ``"json"`` (a list of records, exact numbers).

    Parameters
    ----------
    table : pyarrow.Table
    fmt : {"table", "csv", "json"}

    Returns
    -------
    str
        Ends with a newline (empty for a table without columns).

    Examples
    --------
    >>> import pyarrow as pa
    >>> print(format_table(pa.table({"sex": ["F", "M"], "estimate": [1.5, -2.25]})), end="")
    sex estimate
      F     1.50
      M    -2.25
    >>> print(format_table(pa.table({"a,b": ["x"], "estimate": [0.1]}), "csv"), end="")
    "a,b",estimate
    x,0.1
    """
    t = _plain(table)
    if fmt == "csv":
        return _csv(t)
    if fmt == "json":
        return _json(t)
    if fmt == "table":
        return _text(t)
    raise ValueError(f"format must be 'table', 'csv' or 'json', got {fmt!r}")


def negative_count(table: pa.Table) -> int:
    """Number of negative values in the ``estimate`` column (0 without one)."""
    if "estimate" not in table.column_names:
        return 0
    return sum(1 for v in table.column("estimate").to_pylist() if v is not None and v < 0)
