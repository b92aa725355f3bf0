"""A table printed as pandas prints it, without importing pandas.

``dpmatrix query`` of a saved table must start and finish in a fraction of a second, and pandas
alone takes about half a second to import. A saved table has three kinds of column (see
:class:`dpmatrix.release.SavedTable`): integer codes, floating-point numbers and text (labels).
For these, :func:`to_string` writes exactly what ``DataFrame.to_string(index=False)`` writes and
:func:`to_csv` what ``DataFrame.to_csv(index=False)`` writes, with pandas' default display
options; ``tests/cli/test_table_text.py`` compares both with pandas on generated tables.

The rules reproduced (pandas ``io/formats/format.py``): every column is right-justified to its
widest entry or header, columns are separated by one space, and the header of a numeric column
gets a leading space. Integers print as ``{:d}``. A float column prints every value as
``{:.6f}`` (``display.precision`` = 6), then drops the trailing zeros all its values share
(keeping one decimal); it switches to ``{:.6e}`` when some nonzero value is below 1e-6 in
magnitude, or when some value exceeds 1e6 and the fixed form is wider than 12 characters.
Missing values print as ``NaN``; text has tabs and line breaks escaped. In CSV, floats are
written in their shortest round-trip form (``repr``), missing values as empty fields, quoted
minimally by the :mod:`csv` module.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence

from ._csv_cells import escape

__all__ = ["to_csv", "to_string"]

#: ``display.precision``: decimals of the fixed and scientific float formats
PRECISION = 6
_DECIMAL = re.compile(r"^\s*[+-]?[0-9]+\.[0-9]*$")
_ESCAPES = {"\t": r"\t", "\r": r"\r", "\n": r"\n"}


def _escape(text: str) -> str:
    for ch, rep in _ESCAPES.items():
        text = text.replace(ch, rep)
    return text


def _is_missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _trim_zeros(strings: list[str]) -> list[str]:
    """Drop the trailing zeros every decimal number shares, keeping one digit after the point."""
    numeric = [_DECIMAL.match(s) is not None for s in strings]
    if not any(numeric):
        return strings
    out = list(strings)
    while all(s.endswith("0") for s, n in zip(out, numeric) if n):
        out = [s[:-1] if n else s for s, n in zip(out, numeric)]
    return [s + "0" if n and s.endswith(".") else s for s, n in zip(out, numeric)]


def _floats(values: Sequence[float]) -> list[str]:
    def fmt(spec: str) -> list[str]:
        return _trim_zeros(["NaN" if _is_missing(v) else format(v, spec) for v in values])

    fixed = fmt(f".{PRECISION}f")
    present = [abs(v) for v in values if not _is_missing(v)]
    too_long = bool(fixed) and max(len(s) for s in fixed) > PRECISION + 6
    large = any(a > 1e6 for a in present)
    small = any(0 < a < 10.0**-PRECISION for a in present)
    return fmt(f".{PRECISION}e") if small or (too_long and large) else fixed


def _cells(kind: str, values: Sequence) -> list[str]:
    if kind == "float":
        return _floats(values)
    if kind == "int":
        return [f"{v:d}" for v in values]
    return ["NaN" if _is_missing(v) else _escape(str(v)) for v in values]


def to_string(columns: Sequence[str], kinds: Sequence[str], values: Sequence[Sequence]) -> str:
    """The text ``DataFrame.to_string(index=False)`` gives for these columns.

    Parameters
    ----------
    columns : sequence of str
        Column names.
    kinds : sequence of {"int", "float", "text"}
        How each column is held (int64, float64, or labels).
    values : sequence of sequences
        The entries of each column (``nan``/``None`` for missing ones).

    Returns
    -------
    str
        The table, one line per row after the header line, without a final newline.

    Examples
    --------
    >>> print(to_string(["sex", "estimate"], ["text", "float"], [["F", "M"], [12.5, -3.25]]))
    sex  estimate
      F     12.50
      M     -3.25
    """
    blocks = []
    for name, kind, vals in zip(columns, kinds, values):
        head = (" " if kind in ("int", "float") else "") + _escape(str(name))
        cells = _cells(kind, vals)
        width = max([len(head), *map(len, cells)])
        blocks.append([head.rjust(width)] + [c.rjust(width) for c in cells])
    if not blocks:
        return ""
    lines = []
    for row in zip(*blocks):
        lines.append(" ".join(row))
    return "\n".join(lines)


def to_csv(columns: Sequence[str], kinds: Sequence[str], values: Sequence[Sequence]) -> str:
    """The text ``DataFrame.to_csv(index=False)`` gives for these columns (``\\n`` line ends).

    Examples
    --------
    >>> to_csv(["sex", "estimate"], ["text", "float"], [["F", "M,X"], [12.5, float("nan")]])
    'sex,estimate\\nF,12.5\\n"M,X",\\n'
    """
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([str(c) for c in columns])
    texts = []
    for kind, vals in zip(kinds, values):
        if kind == "float":
            texts.append(["" if _is_missing(v) else repr(float(v)) for v in vals])
        else:
            texts.append(["" if _is_missing(v) else escape(str(v)) for v in vals])  # no spreadsheet formulas
    writer.writerows(zip(*texts))
    return buf.getvalue()


def to_json(columns: Sequence[str], kinds: Sequence[str], values: Sequence[Sequence]) -> str:
    """The rows as a JSON list of records (one object per row, keys in column order), written
    by :mod:`json` with every float in its shortest round-trip form; a missing or infinite
    number is ``null`` (JSON has no NaN).

    Examples
    --------
    >>> print(to_json(["a", "estimate"], ["text", "float"], [["x", "y"], [1.5, float("nan")]]))
    [
     {
      "a": "x",
      "estimate": 1.5
     },
     {
      "a": "y",
      "estimate": null
     }
    ]
    """
    import json

    def cell(kind: str, v):
        if kind == "float":
            return None if v is None or not math.isfinite(float(v)) else float(v)
        if kind == "int":
            return None if _is_missing(v) else int(v)
        return None if _is_missing(v) else str(v)

    n = len(values[0]) if values else 0
    rows = [{c: cell(k, col[i]) for c, k, col in zip(columns, kinds, values)} for i in range(n)]
    return json.dumps(rows, indent=1)
