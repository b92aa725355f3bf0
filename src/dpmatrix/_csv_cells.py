"""Text cells of CSV outputs that a spreadsheet would run as formulas, neutralised.

A spreadsheet opening a CSV file evaluates a cell that starts with ``=``, ``+``, ``-`` or ``@``
(and, in some programs, a leading tab or carriage return) as a formula: ``=HYPERLINK(...)`` or
``=cmd|...`` in a label would run when a reader opens a published table (CSV injection, OWASP).
Labels can come from the records themselves (``infer-domain`` turns data values into labels), so
one respondent could plant one. Every text cell written to CSV goes through :func:`escape`: a
cell that starts with one of those characters gets a leading ``'`` (shown as text by
spreadsheets). The Parquet data keep the exact label. A plain number (``-3``, ``+0.5``,
``-1e3``) is not a formula and stays as it is.

The escape is reversible (:func:`unescape`): a cell that already starts with ``'`` followed by a
trigger gets one more ``'``, so reading the CSV back gives every label exactly.
"""

from __future__ import annotations

import re

__all__ = ["TRIGGERS", "escape", "escape_frame", "unescape"]

#: First characters that make a spreadsheet evaluate a cell.
TRIGGERS = ("=", "+", "-", "@", "\t", "\r")

_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def _risky(text: str) -> bool:
    return text.lstrip("'")[:1] in TRIGGERS and not (text[:1] in "+-" and _NUMBER.fullmatch(text))


def escape(text: str) -> str:
    """``text`` safe for a CSV cell.

    Examples
    --------
    >>> [escape(s) for s in ["=HYPERLINK(1)", "@SUM(A1)", "-3", "-x", "'=a", "plain"]]
    ["'=HYPERLINK(1)", "'@SUM(A1)", '-3', "'-x", "''=a", 'plain']
    """
    if text[:1] in TRIGGERS or text[:1] == "'":
        return "'" + text if _risky(text) else text
    return text


def unescape(text: str) -> str:
    """The label :func:`escape` was given.

    Examples
    --------
    >>> [unescape(escape(s)) for s in ["=HYPERLINK(1)", "-3", "'=a", "''=a", "'plain"]]
    ['=HYPERLINK(1)', '-3', "'=a", "''=a", "'plain"]
    """
    return text[1:] if text[:1] == "'" and _risky(text[1:]) else text


def escape_frame(frame):
    """A copy of a pandas DataFrame whose text cells (and column names) went through
    :func:`escape`, for ``DataFrame.to_csv``; numbers are left as they are.

    Examples
    --------
    >>> import pandas as pd
    >>> escape_frame(pd.DataFrame({"sex": ["=1+1", "M"], "n": [-3, 4]})).to_csv(index=False)
    "sex,n\\n'=1+1,-3\\nM,4\\n"
    """
    out = frame.copy()
    for c in out.columns:
        col = out[c]
        if col.dtype.kind in "OSU" or str(col.dtype) in ("category", "string", "str"):
            out[c] = col.astype(object).map(lambda v: escape(v) if isinstance(v, str) else v)
    out.columns = [escape(c) if isinstance(c, str) else c for c in out.columns]
    return out
