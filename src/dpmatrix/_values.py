"""One rule for how a value of the data, or of a query, addresses an attribute's codes.

Every step that meets a user's value uses this module: ``infer_domain`` (which labels and bins it
writes), the encoders of the numpy, DuckDB and Spark engines (rows -> codes), ``meas.query`` and
the CLI query options (values -> selected codes). The rule, per attribute:

* **missing** (:func:`is_missing`): ``None``, NaN, ``pd.NA``/``NaT``, an empty or blank cell, and
  any text the user declares with ``na_values`` (compared after trimming blanks). What happens
  to a missing value is the attribute's ``missing`` policy (:data:`dpmatrix._domain.MISSING_POLICIES`).
* **labels** (an attribute with ``labels`` and no ``bins``): a value matches the label equal to its
  text (:func:`value_key`: a string as is, ``True``/``False`` for booleans, an integral number
  without a decimal point); failing that, a number-like value matches the first label that is
  the same number (:func:`parse_number`), so ``3``, ``3.0``, ``"3"`` and ``"3.0"`` all match label
  ``"3"``, while ``"03"`` matches a label ``"03"`` exactly and ``"3"`` only when there is none.
* **bins** (edges ``e_0 < ... < e_k``; labels, if any, only name the bins): a number-like value
  ``v`` falls in bin ``i`` when ``e_i <= v < e_{i+1}``, the last bin closed.
* **codes** (neither labels nor bins): integral numbers ``0..size-1`` are the codes.

A number is text matching :data:`NUMBER_PATTERN` after trimming blanks (decimal notation with an
optional exponent; no ``inf``/``nan``, no thousands separators), or a finite int/float.
The same pattern is used by the SQL engines, so every engine reads a file's text the same way.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ._domain import Attribute
from .errors import WorkloadError

if TYPE_CHECKING:  # pragma: no cover - annotations only
    import pandas as pd

__all__ = [
    "NUMBER_PATTERN",
    "LabelIndex",
    "code_of",
    "is_missing",
    "missing_mask",
    "parse_number",
    "value_key",
]

#: Number-like text (trimmed): what :func:`parse_number` accepts and the SQL engines test with
#: ``regexp_full_match``.
NUMBER_PATTERN = r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"
_NUMBER = re.compile(NUMBER_PATTERN)
#: Integral floats up to this magnitude are written without a decimal point by :func:`value_key`.
INT_TEXT_LIMIT = 1e15


def parse_number(v: Any) -> float | None:
    """The number a value stands for, or ``None`` (missing, text that is not a number, bools).

    Examples
    --------
    >>> parse_number("3.0"), parse_number(" 7 "), parse_number("1e3"), parse_number("3'")
    (3.0, 7.0, 1000.0, None)
    """
    if v is None or isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, (int, np.integer)):
        return float(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else None
    if isinstance(v, str):
        t = v.strip()
        if _NUMBER.fullmatch(t):
            f = float(t)
            return f if math.isfinite(f) else None
    return None


def value_key(v: Any) -> str | None:
    """Text by which a value matches a label exactly (``None`` for a missing value).

    Examples
    --------
    >>> value_key(3.0), value_key(3), value_key("3.0"), value_key(True), value_key(float("nan"))
    ('3', '3', '3.0', 'True', None)
    """
    if v is None or _is_pandas_na(v):
        return None
    if isinstance(v, str):
        return v
    if isinstance(v, (bool, np.bool_)):
        return "True" if v else "False"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if math.isnan(f):
            return None
        if f.is_integer() and abs(f) < INT_TEXT_LIMIT:
            return str(int(f))
        return str(f)
    return str(v)


def _is_pandas_na(v: Any) -> bool:
    """Whether ``v`` is pandas' ``NA`` or ``NaT`` (only possible once pandas is loaded, so
    matching a value never imports it)."""
    pd = sys.modules.get("pandas")
    return pd is not None and (v is pd.NA or v is pd.NaT)


def is_missing(v: Any, na_values: Iterable[str] = ()) -> bool:
    """Whether one value is missing: None/NaN/NA/NaT, blank text, or a declared marker.

    Examples
    --------
    >>> is_missing(float("nan")), is_missing(" "), is_missing("NA"), is_missing("NA", ["NA"])
    (True, True, False, True)
    """
    if v is None or _is_pandas_na(v):
        return True
    if isinstance(v, (float, np.floating)):
        return math.isnan(float(v))
    if isinstance(v, str):
        t = v.strip()
        return t == "" or t in set(na_values)
    return False


def missing_mask(values: pd.Series, na_values: Iterable[str] = ()) -> np.ndarray:
    """Vectorized :func:`is_missing` over a column."""
    import pandas as pd

    s = values
    miss = s.isna().to_numpy()
    if s.dtype == object or pd.api.types.is_string_dtype(s.dtype):
        text = s.where(~miss, None)
        is_text = text.map(lambda x: isinstance(x, str)).to_numpy(dtype=bool)
        if is_text.any():
            stripped = text[is_text].str.strip()
            markers = {""} | {str(m).strip() for m in na_values}
            hit = stripped.isin(markers).to_numpy()
            idx = np.flatnonzero(is_text)
            miss = miss.copy()
            miss[idx[hit]] = True
    return miss


def date_days(values: pd.Series, fmt: str) -> np.ndarray:
    """Vectorized :func:`dpmatrix._dates.day_of`: float64 days since 1970-01-01, NaN where a
    value is not a date (text in ``fmt`` or ISO, typed dates and timestamps; a timestamp with a
    time zone by its UTC date)."""
    import pandas as pd

    from ._dates import day_of

    s = values
    if isinstance(s.dtype, pd.DatetimeTZDtype):
        s = s.dt.tz_convert("UTC").dt.tz_localize(None)
    if pd.api.types.is_datetime64_any_dtype(s.dtype):
        v = s.to_numpy(dtype="datetime64[ns]")
        out = v.astype("datetime64[D]").astype(np.int64).astype(np.float64)
        return np.where(np.isnat(v), np.nan, out)
    codes, uniques = pd.factorize(s, use_na_sentinel=True)
    days = [day_of(u, fmt) for u in uniques.tolist()] if len(uniques) else []
    table = np.array([np.nan if d is None else float(d) for d in days] + [np.nan], dtype=np.float64)
    return table[codes]


def numbers(values: pd.Series) -> np.ndarray:
    """Vectorized :func:`parse_number`: float64, NaN where a value is not a number."""
    import pandas as pd

    s = values
    if pd.api.types.is_bool_dtype(s.dtype):
        return np.full(len(s), np.nan)
    if pd.api.types.is_numeric_dtype(s.dtype):
        v = s.to_numpy(dtype=np.float64, na_value=np.nan)
        return np.where(np.isfinite(v), v, np.nan)
    out = np.full(len(s), np.nan)
    obj = s.to_numpy(dtype=object)
    is_text = np.fromiter((isinstance(x, str) for x in obj), bool, len(obj))
    if is_text.any():
        t = pd.Series(obj[is_text], dtype=object).str.strip()
        ok = t.str.fullmatch(NUMBER_PATTERN).fillna(False).to_numpy(dtype=bool)
        idx = np.flatnonzero(is_text)
        vals = pd.to_numeric(t[ok], errors="coerce").to_numpy(dtype=np.float64)
        out[idx[ok]] = vals
    other = ~is_text
    if other.any():
        out[other] = [np.nan if (f := parse_number(x)) is None else f for x in obj[other]]
    out[~np.isfinite(out)] = np.nan
    return out


@dataclass(frozen=True)
class LabelIndex:
    """Lookup of an attribute's labels: exact text first, then the number a label stands for.

    Examples
    --------
    >>> ix = LabelIndex.of(("0", "1", "2", "(missing)"))
    >>> ix.code("1"), ix.code(1.0), ix.code("1.0"), ix.code("x")
    (1, 1, 1, None)
    """

    labels: tuple[str, ...]
    exact: Mapping[str, int] = field(compare=False)
    numeric: Mapping[float, int] = field(compare=False)

    @classmethod
    def of(cls, labels: Sequence[str]) -> LabelIndex:
        exact = {lab: i for i, lab in enumerate(labels)}
        numeric: dict[float, int] = {}
        for i, lab in enumerate(labels):
            f = parse_number(lab)
            if f is not None:
                numeric.setdefault(f, i)  # the first label that is the number
        return cls(tuple(labels), exact, numeric)

    def code(self, v: Any) -> int | None:
        key = value_key(v)
        if key is None:
            return None
        c = self.exact.get(key)
        if c is not None:
            return c
        f = parse_number(v)
        return None if f is None else self.numeric.get(f)

    def label_numbers(self) -> list[float | None]:
        """The number each label stands for (``None`` for the first of a repeated number and
        non-numbers excluded): the SQL engines search this list."""
        out: list[float | None] = [None] * len(self.labels)
        for f, i in self.numeric.items():
            out[i] = f
        return out


def bin_index(edges: Sequence[float], v: float) -> int | None:
    """Bin of a number (``e_i <= v < e_{i+1}``, the last bin closed), ``None`` outside."""
    if not (math.isfinite(v) and edges[0] <= v <= edges[-1]):
        return None
    return min(int(np.searchsorted(np.asarray(edges), v, side="right")) - 1, len(edges) - 2)


def _shown_labels(attr: Attribute, limit: int = 12) -> str:
    labs = list(attr.labels or ())
    more = f", ... ({len(labs)} labels)" if len(labs) > limit else ""
    return ", ".join(repr(x) for x in labs[:limit]) + more


def _fmt(x: float) -> str:
    return f"{x:g}"


def _date_code(attr: Attribute, value: Any) -> int:
    """A date attribute's code: a period label (``"2015-12"``, or ``2015`` for a year), else the
    period holding a date (text in the attribute's format or ISO, or a typed date)."""
    from ._dates import day_of, day_text

    assert attr.dates is not None and attr.labels is not None
    c = LabelIndex.of(attr.labels).code(value)
    if c is not None:
        return c
    day = day_of(value, attr.dates.fmt)
    if day is not None:
        i = attr.dates.bin_of_day(day)
        if i is not None:
            return i
        raise WorkloadError(
            f"{value!r} ({day_text(day)}) is outside the periods of {attr.name!r} "
            f"({attr.labels[0]} .. {attr.labels[attr.dates.n_bins - 1]}: {attr.dates.describe()})"
        )
    raise WorkloadError(
        f"{value!r} is not a value of {attr.name!r}: give a period label ({_shown_labels(attr)}) or a date "
        f"({attr.dates.fmt} or YYYY-MM-DD), or codes explicitly with dpmatrix.codes(...)"
    )


def code_of(attr: Attribute, value: Any) -> int:
    """The code a single value of the data or of a query addresses (see the module docstring).

    Parameters
    ----------
    attr : Attribute
    value : str, number or bool
        A raw value: a label (or the number a label stands for), a number to put in a bin, or,
        on an attribute with neither labels nor bins, an integer code. Codes of labelled or
        binned attributes are addressed with :func:`dpmatrix.codes` instead.

    Returns
    -------
    int
        The code, ``0..size-1``.

    Raises
    ------
    WorkloadError
        The value addresses no code; the message names the attribute, the valid labels or bin
        edges and what to do.

    Examples
    --------
    >>> from dpmatrix._domain import Attribute
    >>> code_of(Attribute("kids", 3, labels=("0", "1", "2")), 2.0)
    2
    >>> code_of(Attribute("age", 2, "ordinal", bins=(0, 18, 99)), 30)
    1
    """
    from ._domain import MISSING_LABEL

    if attr.dates is not None:
        return _date_code(attr, value)
    if attr.bins is not None:
        f = parse_number(value)
        if f is not None:
            i = bin_index(attr.bins, f)
            if i is not None:
                return i
            raise WorkloadError(
                f"{value!r} is outside the bins of {attr.name!r} "
                f"[{_fmt(attr.bins[0])}, {_fmt(attr.bins[-1])}]; the bin edges are "
                f"{', '.join(_fmt(e) for e in attr.bins)}"
            )
        if isinstance(value, str) and attr.labels is not None and value in attr.labels:
            return attr.labels.index(value)  # "other", "(missing)" or a bin's own label
        if isinstance(value, str) and value == MISSING_LABEL and attr.missing_code is not None:
            return attr.missing_code
        raise WorkloadError(
            f"{value!r} is not a value of {attr.name!r}: give a number inside its bins "
            f"(edges {', '.join(_fmt(e) for e in attr.bins)})"
            + (f" or one of the labels {_shown_labels(attr)}" if attr.labels else "")
            + ", or codes explicitly with dpmatrix.codes(...)"
        )
    if attr.labels is not None:
        c = LabelIndex.of(attr.labels).code(value)
        if c is not None:
            return c
        raise WorkloadError(
            f"{value!r} is not a value of {attr.name!r} (labels: {_shown_labels(attr)}); "
            "give a label, or codes explicitly with dpmatrix.codes(...)"
        )
    f = parse_number(value)
    if isinstance(value, str) and value == MISSING_LABEL and attr.missing_code is not None:
        return attr.missing_code
    if f is not None and f.is_integer() and 0 <= f < attr.size:
        return int(f)
    raise WorkloadError(
        f"{value!r} is not a value of {attr.name!r}: it has neither labels nor bins, so its "
        f"values are the integer codes 0..{attr.size - 1}"
    )
