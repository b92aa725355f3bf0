"""Inferring a domain from data (a pandas frame or a CSV/Parquet file read by DuckDB).

The data are read exactly as a release reads them (:mod:`dpmatrix._values`): a CSV file as text
(no type sniffing), numbers recognised by :data:`~dpmatrix._values.NUMBER_PATTERN`, labels written
in the form a release matches. So whatever ``infer_domain`` writes, a release accepts on the same
file: a column of floats holding integers (``0.0, 1.0, ...``) gets labels ``"0", "1", ...``, which
the values ``0.0`` match by number; ``yes``/``no`` stay ``"no"``/``"yes"``; ``True``/``False``
(pandas' booleans) stay ``"False"``/``"True"``; ``"01"`` stays ``"01"``; dates keep their text.

Per column (:class:`ColumnStats` gathers the facts, :func:`decide` turns them into an attribute):

* missing values (:func:`dpmatrix._values.is_missing`, with ``na_values``) are counted; a column
  with any gets ``missing="category"`` (a ``"(missing)"`` level);
* every present value a number: integral with at most ``max_labels`` distinct values -> ordinal
  labels; otherwise ``n_bins`` bins (equal width or quantiles; a quantile binning that collapses,
  as on zero-inflated columns, falls back to equal width);
* number-like text with leading zeros (``"01234"``) stays text;
* text (or booleans): categorical labels, sorted, when at most ``max_categories`` distinct
  values; a column with more (identifiers, dates, free text, mixed units) is left out with a
  message naming it — unless the caller listed it in ``columns``, then it is an error;
* dates (text in one of :data:`dpmatrix._dates.DATE_FORMATS`, typed dates and timestamps): with
  ``date_period`` an ordinal attribute of whole periods from the first to the last date, the
  detected text form recorded as ``date_format`` (a column that reads both as month/day and
  day/month is refused: give ``date_format``); without it, treated as text (left out when they
  have many values, with a message naming ``date_period``);
* a column with a single value and no missing value carries no information and is left out.

The inferred domain is derived from the private data and is not covered by the privacy
guarantee: see :data:`INFER_WARNING`.
"""

from __future__ import annotations

import datetime as _dt
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._dates import DATE_FORMATS, ISO_FORMAT, PERIODS, DateBins, check_format, group_order, period_edges
from .._domain import MISSING_LABEL, OTHER_LABEL, Attribute, Domain
from .._encode import InferredDomainWarning, missing_columns_message
from .._values import date_days, missing_mask, numbers, value_key
from ..errors import DataError, DomainError
from ._duckdb_engine import connect, describe, detect_format, source_sql
from ._sql import quote_ident, sql_day, sql_label_key, sql_missing, sql_number, sql_type_class

INFER_WARNING = (
    "infer_domain: this domain is derived from the private data. Which values occur (every label, "
    "the minimum and maximum that set the bins) is itself information about individual records "
    "(a rare value reveals that someone has it) and is NOT covered by the differential-privacy "
    "guarantee of anything released with this domain. Prefer a domain written from public "
    "knowledge (a codebook, a questionnaire, published category lists), or spend privacy budget "
    "to choose it; save and review the inferred domain before use. Bins derived from the data "
    "leak too: equal-width edges reveal the minimum and maximum, quantile edges reveal values "
    "of the records at those ranks; prefer round, public edges (e.g. ages 0, 18, 25, ...)."
)

BINNINGS = ("width", "quantile")
#: Default largest number of distinct text values a column may have to get labels.
MAX_CATEGORIES = 100
_LEADING_ZERO = re.compile(r"[+-]?0[0-9]")
_DATE = re.compile(r"\s*\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}([ T].*)?")


@dataclass(frozen=True)
class ColumnStats:
    """What :func:`decide` needs to know about one column (read as a release reads it)."""

    name: str
    n_rows: int
    n_missing: int
    n_present: int
    n_numbers: int  # present values that are numbers
    leading_zero: bool  # some number-like text has a leading zero ("01")
    integral: bool
    vmin: float | None
    vmax: float | None
    n_distinct_numbers: int
    numbers: tuple[float, ...] | None  # distinct numbers when few
    n_distinct_text: int
    texts: tuple[str, ...] | None  # distinct label keys when few
    quantiles: tuple[float, ...] | None
    date_like: bool = False
    #: with a date period: ``(format, first day, last day)`` of a column of dates, or why not
    dates: tuple[str, int, int] | str | None = None


@dataclass(frozen=True)
class InferredDomain:
    """An inferred domain with what the inference found.

    ``missing``: per kept column, the number of missing values; ``left_out``: per column left out,
    why (a sentence with the fix).
    """

    domain: Domain
    missing: dict[str, int] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)

    def messages(self) -> list[str]:
        """One readable line per finding (missing counts, columns left out)."""
        out = [
            f"{c}: {n} missing value(s) -> \"missing\": \"category\" (a {MISSING_LABEL!r} level)"
            for c, n in self.missing.items() if n
        ]  # fmt: skip
        out += [f"{c}: left out — {why}" for c, why in self.left_out.items()]
        return out


def _bin_edges(vmin: float, vmax: float, n_bins: int, integral: bool,
               quantiles: Sequence[float] | None) -> np.ndarray:
    """Edges ``e0 < e1 < ... < ek`` covering ``[vmin, vmax]`` (the last bin is closed): equal
    width, or the data's quantiles at ``1/k, ..., (k-1)/k`` between the extremes (ties merged)."""
    if vmax <= vmin:
        vmax = vmin + 1.0
    if quantiles is None:
        edges = np.linspace(vmin, vmax, n_bins + 1)
    else:
        edges = np.concatenate([[vmin], np.asarray(quantiles, dtype=float), [vmax]])
    if integral:
        edges = np.round(edges)
    edges = np.unique(edges)
    if len(edges) < 2:
        edges = np.array([vmin, vmin + 1.0])
    return edges


def decide(st: ColumnStats, max_labels: int, n_bins: int, max_categories: int,
           date_period: str | None = None) -> Attribute | str:
    """The attribute for one column, or the reason (with the fix) it is left out."""
    missing = "category" if st.n_missing else "error"
    extra = [MISSING_LABEL] if st.n_missing else []
    if st.n_present == 0:
        return "every value is missing"
    if date_period is not None and isinstance(st.dates, tuple):
        fmt, first, last = st.dates
        bins = DateBins(date_period, fmt, period_edges(first, last, date_period))
        if bins.n_bins + len(extra) < 2:
            return (f"every date is in one {date_period} ({bins.labels()[0]}) and none is missing: it carries no "
                    "information (choose a shorter --date-period)")
        return Attribute(st.name, bins.n_bins + len(extra), "ordinal", bins.labels() + tuple(extra),
                         missing=missing, dates=bins)  # fmt: skip
    if date_period is not None and isinstance(st.dates, str):
        return st.dates
    numeric = st.n_numbers == st.n_present and not st.leading_zero
    if numeric and st.integral and st.n_distinct_numbers <= max_labels:
        assert st.numbers is not None
        labels = [value_key(x) for x in sorted(st.numbers)]
        if len(labels) + len(extra) < 2:
            return f"a single value ({labels[0]}) and no missing value: it carries no information"
        return Attribute(st.name, len(labels) + len(extra), "ordinal", tuple(labels + extra),
                         missing=missing)  # fmt: skip
    if numeric:
        assert st.vmin is not None and st.vmax is not None
        edges = _bin_edges(st.vmin, st.vmax, n_bins, st.integral, st.quantiles)
        if len(edges) < 3 and st.quantiles is not None:  # zero-inflated: quantiles collapse
            edges = _bin_edges(st.vmin, st.vmax, n_bins, st.integral, None)
        k = len(edges) - 1
        if k + len(extra) < 2:
            return f"a single value ({st.vmin:g}) and no missing value: it carries no information"
        return Attribute(st.name, k + len(extra), "ordinal", bins=tuple(float(x) for x in edges),
                         missing=missing)  # fmt: skip
    if st.texts is None or st.n_distinct_text > max_categories:
        if st.date_like or isinstance(st.dates, tuple):
            return (
                f"{st.n_distinct_text} distinct dates (more than max_categories={max_categories}); bin them by a "
                "calendar period with --date-period year|quarter|month|week|day (library: "
                "date_period='month'), or write its labels or bins into the domain yourself"
            )
        return (
            f"{st.n_distinct_text} distinct text values (more than max_categories={max_categories}: an "
            "identifier or free text); write its labels or bins into the domain yourself, "
            "raise max_categories (CLI --max-categories), or recode it before the release"
        )
    labels = sorted(st.texts)
    if len(labels) + len(extra) < 2:
        labels.append(OTHER_LABEL if OTHER_LABEL not in labels else OTHER_LABEL + "_")
    return Attribute(st.name, len(labels) + len(extra), "categorical", tuple(labels + extra),
                     missing=missing)  # fmt: skip


# -- dates ---------------------------------------------------------------------------------------
def _ambiguous(name: str, formats: Sequence[str]) -> DomainError:
    return DomainError(
        f"column {name!r}: every date reads as {' and as '.join(formats)} (no day above 12), and the two "
        f"readings differ: the day/month order cannot be told from the data; fix: give the format, "
        f"CLI --date-format {name}={formats[0]} (or {formats[1]}), library date_format={{{name!r}: {formats[0]!r}}}"
    )


def _not_dates(name: str, fmt: str | None, n_bad: int, shown: Sequence[Any] = ()) -> str:
    some = f" (e.g. {', '.join(repr(x) for x in list(shown)[:3])})" if len(shown) else ""
    how = f"in the format {fmt}" if fmt else f"in one of the forms {', '.join(DATE_FORMATS)}"
    return (f"{n_bad} value(s) are not dates {how} or YYYY-MM-DD{some}; recode them, declare markers of a "
            f"missing date with --na-values, or give the format with --date-format {name}=FORMAT")


def _candidates(name: str, date_format: str | Mapping[str, str] | None) -> list[str]:
    given = date_format.get(name) if isinstance(date_format, Mapping) else date_format
    return [check_format(given, f"date format of {name!r}")] if given else list(DATE_FORMATS)


def _choose_format(name: str, fits: dict[str, tuple[int, int]], differ: Any) -> tuple[str, int, int] | None:
    """The format every value reads in (ISO first); two that fit and read some value differently
    (``differ(f, g)``) are refused."""
    if not fits:
        return None
    if ISO_FORMAT in fits:
        return (ISO_FORMAT, *fits[ISO_FORMAT])
    names = list(fits)
    for f in names:
        for g in names:
            if f < g and group_order(f) != group_order(g) and differ(f, g):
                raise _ambiguous(name, [f, g] if group_order(f) == "mdy" else [g, f])
    f = names[0]
    return (f, *fits[f])


def _dates_frame(name: str, present: pd.Series, date_format: str | Mapping[str, str] | None
                 ) -> tuple[str, int, int] | str:
    if pd.api.types.is_datetime64_any_dtype(present.dtype) or isinstance(present.dtype, pd.DatetimeTZDtype):
        days = date_days(present, ISO_FORMAT)
        return (ISO_FORMAT, int(np.nanmin(days)), int(np.nanmax(days))) if len(days) else "no dates"
    uniq = pd.Series(pd.unique(present.to_numpy(dtype=object)), dtype=object)
    fits: dict[str, tuple[int, int]] = {}
    read: dict[str, np.ndarray] = {}
    worst: tuple[str | None, int, list[Any]] = (None, len(uniq) + 1, [])
    for fmt in _candidates(name, date_format):
        days = date_days(uniq, fmt)
        bad = np.isnan(days)
        if not bad.any():
            fits[fmt] = (int(days.min()), int(days.max()))
            read[fmt] = days
        elif int(bad.sum()) < worst[1]:
            worst = (fmt, int(bad.sum()), uniq[bad].tolist()[:3])
    got = _choose_format(name, fits, lambda f, g: bool((read[f] != read[g]).any()))
    if got is None:
        fmt, _, shown = worst
        n_bad = int(np.isnan(date_days(present, fmt or ISO_FORMAT)).sum())
        return _not_dates(name, fmt if date_format else None, n_bad, shown)
    return got


def _dates_sql(con, src: str, name: str, col_type: str, present: str,
               date_format: str | Mapping[str, str] | None) -> tuple[str, int, int] | str:
    q = quote_ident(name)
    if sql_type_class(col_type) == "other" and col_type.upper().startswith(("DATE", "TIMESTAMP")):
        day = sql_day(q, col_type, ISO_FORMAT)
        lo, hi = con.execute(f"SELECT min({day}), max({day}) FROM {src} WHERE {present}").fetchone()
        return "no dates" if lo is None else (ISO_FORMAT, int(lo), int(hi))
    fits: dict[str, tuple[int, int]] = {}
    worst: tuple[str | None, int, list[Any]] = (None, -1, [])
    for fmt in _candidates(name, date_format):
        day = sql_day(q, col_type, fmt)
        n_bad, lo, hi = con.execute(
            f"SELECT count(*) FILTER (WHERE {day} IS NULL), min({day}), max({day}) FROM {src} WHERE {present}"
        ).fetchone()
        if n_bad == 0 and lo is not None:
            fits[fmt] = (int(lo), int(hi))
        elif worst[0] is None or n_bad < worst[1]:
            shown = [r[0] for r in con.execute(
                f"SELECT DISTINCT CAST({q} AS VARCHAR) FROM {src} WHERE {present} AND {day} IS NULL LIMIT 3").fetchall()]
            worst = (fmt, int(n_bad), shown)

    def differ(f: str, g: str) -> bool:
        (n,) = con.execute(f"SELECT count(*) FROM {src} WHERE {present} AND "
                           f"{sql_day(q, col_type, f)} != {sql_day(q, col_type, g)}").fetchone()
        return bool(n)

    got = _choose_format(name, fits, differ)
    if got is None:
        fmt, n_bad, shown = worst
        return _not_dates(name, fmt if date_format else None, n_bad, shown)
    return got


# -- gathering the facts -------------------------------------------------------------------------
def _stats_frame(name: str, s: pd.Series, na_values: Sequence[str], probs: list[float],
                 binning: str, limit: int, date_period: str | None = None,
                 date_format: str | Mapping[str, str] | None = None) -> ColumnStats:
    s = s.reset_index(drop=True)
    if isinstance(s.dtype, pd.CategoricalDtype):
        s = s.astype(object)
    miss = missing_mask(s, na_values)
    present = s[~miss]
    v = numbers(present)
    isnum = ~np.isnan(v)
    nums = v[isnum]
    text_vals = present[~isnum] if not isnum.all() else present.iloc[:0]
    obj = present.to_numpy(dtype=object)
    lead = any(isinstance(x, str) and _LEADING_ZERO.match(x.strip()) for x in obj[isnum])
    keys = {value_key(x) for x in obj}
    keys.discard(None)
    n_num = int(isnum.sum())
    integral = bool(len(nums) and np.all(np.floor(nums) == nums))
    distinct_nums = np.unique(nums)
    qs = None
    if binning == "quantile" and len(nums) and probs:
        qs = tuple(np.quantile(nums, probs, method="inverted_cdf").tolist())
    date_like = bool(len(text_vals)) and bool(
        np.mean([bool(_DATE.fullmatch(str(x))) for x in text_vals.to_numpy(dtype=object)[:1000]]) > 0.9
    )
    typed = pd.api.types.is_datetime64_any_dtype(s.dtype) or (
        len(present) > 0 and all(isinstance(x, (_dt.date, np.datetime64)) for x in present.to_numpy(dtype=object)[:1000])
    )
    dates: tuple[str, int, int] | str | None = None
    if date_period is not None and len(present) and (typed or (date_like and n_num == 0)):
        dates = _dates_frame(name, present, date_format)
    date_like = date_like or typed
    return ColumnStats(
        name, len(s), int(miss.sum()), len(present), n_num, lead, integral,
        float(nums.min()) if len(nums) else None, float(nums.max()) if len(nums) else None,
        len(distinct_nums), tuple(distinct_nums.tolist()) if len(distinct_nums) <= limit else None,
        len(keys), tuple(sorted(keys)) if len(keys) <= limit else None, qs, date_like, dates,
    )  # fmt: skip


def _stats_sql(con, src: str, name: str, col_type: str, na_values: Sequence[str],
               probs: list[float], binning: str, limit: int, date_period: str | None = None,
               date_format: str | Mapping[str, str] | None = None) -> ColumnStats:
    q = quote_ident(name)
    miss = sql_missing(q, col_type, na_values)
    x = sql_number(q, col_type)
    key = sql_label_key(q, col_type)
    present = f"NOT {miss}"
    lead = "FALSE"
    if sql_type_class(col_type) in ("str", "other"):
        lead = (f"bool_or({x} IS NOT NULL AND regexp_matches(trim(CAST({q} AS VARCHAR)), "
                "'^[+-]?0[0-9]'))")
    date = "0"
    if sql_type_class(col_type) in ("str", "other"):
        date = (f"avg(CASE WHEN regexp_full_match(CAST({q} AS VARCHAR), "
                r"'\s*\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}([ T].*)?') THEN 1.0 ELSE 0.0 END) "
                f"FILTER (WHERE {present} AND {x} IS NULL)")
    if sql_type_class(col_type) == "other" and col_type.upper().startswith(("DATE", "TIMESTAMP")):
        date = "1"
    row = con.execute(
        f"SELECT count(*), count(*) FILTER (WHERE {miss}), "
        f"count(*) FILTER (WHERE {present} AND {x} IS NOT NULL), {lead}, "
        f"count(*) FILTER (WHERE {x} != floor({x})), min({x}), max({x}), count(DISTINCT {x}), "
        f"count(DISTINCT {key}) FILTER (WHERE {present}), {date} FROM {src}"
    ).fetchone()
    n, n_miss, n_num, lead_v, n_frac, vmin, vmax, nd_num, nd_text, date_v = row
    nums = None
    if n_num and nd_num <= limit:
        nums = tuple(r[0] for r in con.execute(
            f"SELECT DISTINCT {x} FROM {src} WHERE {x} IS NOT NULL AND {present} ORDER BY 1").fetchall())
    texts = None
    if nd_text <= limit:
        texts = tuple(r[0] for r in con.execute(
            f"SELECT DISTINCT {key} FROM {src} WHERE {present} AND {key} IS NOT NULL").fetchall())
    qs = None
    if binning == "quantile" and n_num and probs:
        (qs,) = con.execute(
            f"SELECT quantile_disc({x}, {probs!r}) FROM {src} WHERE {x} IS NOT NULL AND {present}"
        ).fetchone()
        qs = tuple(qs)
    date_like = bool(date_v is not None and float(date_v) > 0.9)
    dates: tuple[str, int, int] | str | None = None
    if date_period is not None and int(n) > int(n_miss) and date_like and (int(n_num) == 0 or date == "1"):
        dates = _dates_sql(con, src, name, col_type, present, date_format)
    return ColumnStats(
        name, int(n), int(n_miss), int(n) - int(n_miss), int(n_num), bool(lead_v), n_frac == 0,
        None if vmin is None else float(vmin), None if vmax is None else float(vmax),
        int(nd_num), nums, int(nd_text), texts, qs, date_like, dates,
    )  # fmt: skip


def infer_domain_report(
    data: pd.DataFrame | str | Path,
    columns: Sequence[str] | None = None,
    *,
    max_labels: int = 50,
    n_bins: int = 10,
    binning: str = "width",
    format: str | None = None,
    na_values: Sequence[str] = (),
    max_categories: int = MAX_CATEGORIES,
    delimiter: str | None = None,
    date_period: str | None = None,
    date_format: str | Mapping[str, str] | None = None,
) -> InferredDomain:
    """Infer a domain and say what was found: missing counts and the columns left out.

    Parameters and rules as :func:`infer_domain` (see the module docstring).

    Returns
    -------
    InferredDomain
    """
    if binning not in BINNINGS:
        raise DomainError(f"binning must be one of {', '.join(map(repr, BINNINGS))}, got {binning!r}")
    if int(n_bins) < 1:
        raise DomainError(f"n_bins must be at least 1, got {n_bins!r}")
    if date_period is not None and date_period not in PERIODS:
        raise DomainError(f"date_period must be one of {', '.join(PERIODS)}, got {date_period!r}")
    if isinstance(date_format, str):
        check_format(date_format, "date_format")
    elif isinstance(date_format, Mapping):
        for col, f in date_format.items():
            check_format(f, f"date format of {col!r}")
    probs = [i / n_bins for i in range(1, n_bins)]
    limit = max(int(max_labels), int(max_categories))
    warnings.warn(INFER_WARNING, InferredDomainWarning, stacklevel=3)
    stats: list[ColumnStats] = []
    if isinstance(data, pd.DataFrame):
        cols = list(columns) if columns is not None else [str(c) for c in data.columns]
        for c in cols:
            if c not in data.columns:
                raise DataError(missing_columns_message([c], [str(x) for x in data.columns]))
            stats.append(_stats_frame(c, data[c], na_values, probs, binning, limit, date_period, date_format))
    else:
        con = connect(None)
        try:
            opts: dict[str, Any] | None = None
            if detect_format(data, format) == "csv":  # as a release reads it: every value as text
                opts = {"all_varchar": True}
                if delimiter:
                    opts["delim"] = delimiter
            src = source_sql(data, format, opts)
            types = describe(con, src)
            cols = list(columns) if columns is not None else list(types)
            missing = [c for c in cols if c not in types]
            if missing:
                raise DataError(missing_columns_message(missing, list(types)))
            for c in cols:
                stats.append(_stats_sql(con, src, c, types[c], na_values, probs, binning, limit, date_period,
                                        date_format))
        finally:
            con.close()
    attrs: list[Attribute] = []
    left_out: dict[str, str] = {}
    for st in stats:
        got = decide(st, max_labels, n_bins, max_categories, date_period)
        if isinstance(got, str):
            if columns is not None:
                raise DomainError(f"column {st.name!r} cannot be inferred: {got}")
            left_out[st.name] = got
        else:
            attrs.append(got)
    if not attrs:
        raise DomainError(
            "no column to infer a domain from"
            + ("".join(f"\n  - {c}: {why}" for c, why in left_out.items()))
        )
    kept = {a.name for a in attrs}
    return InferredDomain(Domain(attrs), {s.name: s.n_missing for s in stats if s.name in kept}, left_out)


def infer_domain(
    data: pd.DataFrame | str | Path,
    columns: Sequence[str] | None = None,
    *,
    max_labels: int = 50,
    n_bins: int = 10,
    binning: str = "width",
    format: str | None = None,
    na_values: Sequence[str] = (),
    max_categories: int = MAX_CATEGORIES,
    delimiter: str | None = None,
    date_period: str | None = None,
    date_format: str | Mapping[str, str] | None = None,
) -> Domain:
    """Derive a domain from data — an explicit opt-in that weakens privacy (see the warning).

    The data are read as a release reads them, so a release accepts the result on the same data
    (module docstring). Text and booleans become categorical attributes labelled by their sorted
    distinct values (at most ``max_categories``; columns with more are left out, see
    :func:`infer_domain_report` for the list and the reasons); integral numbers with at most
    ``max_labels`` distinct values become ordinal attributes labelled by their values; other
    numbers get ``n_bins`` bins between their minimum and maximum: equal width
    (``binning="width"``) or at the data's quantiles (``binning="quantile"``, about equal counts;
    ties merged, so possibly fewer bins). Columns with missing values (empty cells, NaN, None,
    NULL, ``na_values``) get ``missing="category"``. Files (CSV/Parquet) are scanned by DuckDB,
    never loaded into pandas. Always emits an :class:`InferredDomainWarning`.

    Dates (text in one of :data:`dpmatrix._dates.DATE_FORMATS`, or typed dates/timestamps) are
    left out with a message unless ``date_period`` (``"year"``, ``"quarter"``, ``"month"``,
    ``"week"`` or ``"day"``) is given: then a date column becomes an ordinal attribute of whole
    periods covering its first to last date, labelled ``"2015"``, ``"2015-Q4"``, ``"2015-12"``,
    ``"2015-W49"`` or ``"2015-12-01"``, with the text form detected (``"%m/%d/%Y"`` ...) recorded
    as its ``date_format`` so a release reads the same dates (:mod:`dpmatrix._dates`). A column
    whose every value reads both as month/day and day/month is refused: give ``date_format``
    (one format, or ``{column: format}``).

    Examples
    --------
    >>> import warnings, pandas as pd
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     dom = infer_domain(pd.DataFrame({"age": range(17, 91)}), n_bins=4, binning="quantile")
    >>> dom["age"].bins
    (17.0, 35.0, 53.0, 72.0, 90.0)
    """
    return infer_domain_report(
        data, columns, max_labels=max_labels, n_bins=n_bins, binning=binning, format=format,
        na_values=na_values, max_categories=max_categories, delimiter=delimiter, date_period=date_period,
        date_format=date_format,
    ).domain  # fmt: skip
