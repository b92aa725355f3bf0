"""Dates binned by a calendar period: the day a date value stands for, and the period bins.

A date attribute has explicit bins whose edges are days ``e_0 < e_1 < ... < e_k`` (period starts,
the last edge the start of the period after the last bin); a date on day ``t`` gets code ``i``
when ``e_i <= t < e_{i+1}`` (every bin half-open: a period ends where the next begins). Its
labels name the periods: ``"2015"`` (year), ``"2015-Q4"`` (quarter), ``"2015-12"`` (month),
``"2015-W49"`` (ISO week, Monday to Sunday), ``"2015-12-01"`` (day).

Which day a value stands for (one rule, the same in pandas, DuckDB SQL and Spark, since every
engine evaluates the regular expression of :func:`date_pattern` and builds the date from its
three groups):

* text in the attribute's recorded ``date_format`` (one of :data:`DATE_FORMATS`, e.g.
  ``"%m/%d/%Y"`` for ``12/1/2015``) or in ISO form ``YYYY-MM-DD`` (unambiguous, always
  accepted), optionally followed by a time of day and a time-zone suffix
  (``2015-12-01 13:45:00``, ``2015-12-01T13:45:00Z``, ``12/1/2015 1:45 PM``): the period is that of
  the calendar date **as written** — the time and any zone are ignored, no conversion (a record
  written ``2015-12-31T23:30-05:00`` is in December 2015, the day its writer saw);
* a typed date (Parquet ``DATE``, ``datetime.date``): its day; a typed timestamp without time zone
  (Parquet ``TIMESTAMP``, pandas ``datetime64``): its calendar date; a timestamp *with* a time zone
  (an instant): its date in UTC;
* a day/month/year that does not exist (``2/30/2015``) is not a date.

A two-digit year, a month name or any other form is not read (recode it, or it is an unknown
value with the usual error). Which of ``%m/%d/%Y`` and ``%d/%m/%Y`` a column uses is decided by
``infer_domain`` from the data; a column where every value reads both ways (all days <= 12) is
refused with the fix (give the format).
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import DomainError

__all__ = [
    "DATE_FORMATS", "ISO_FORMAT", "PERIODS", "DateBins", "date_pattern", "day_of", "day_text",
    "group_order", "period_edges", "period_label", "period_start",
]  # fmt: skip

#: Calendar periods a date attribute may be binned by.
PERIODS = ("year", "quarter", "month", "week", "day")

#: The unambiguous form every date attribute also accepts.
ISO_FORMAT = "%Y-%m-%d"

_Y, _MD = "([0-9]{4})", "([0-9]{1,2})"
#: Date forms read (strftime names) -> (regular expression of the date, order of its groups).
DATE_FORMATS: dict[str, tuple[str, str]] = {
    "%Y-%m-%d": (f"{_Y}-{_MD}-{_MD}", "ymd"),
    "%Y/%m/%d": (f"{_Y}/{_MD}/{_MD}", "ymd"),
    "%Y.%m.%d": (rf"{_Y}\.{_MD}\.{_MD}", "ymd"),
    "%m/%d/%Y": (f"{_MD}/{_MD}/{_Y}", "mdy"),
    "%d/%m/%Y": (f"{_MD}/{_MD}/{_Y}", "dmy"),
    "%m-%d-%Y": (f"{_MD}-{_MD}-{_Y}", "mdy"),
    "%d-%m-%Y": (f"{_MD}-{_MD}-{_Y}", "dmy"),
    "%d.%m.%Y": (rf"{_MD}\.{_MD}\.{_Y}", "dmy"),
}

#: An optional time of day and time zone after the date (ignored: the date as written counts).
_TIME = (
    r"(?:[T ][0-9]{1,2}:[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]+)?)?(?: ?[AaPp][Mm])?"
    r"(?: ?(?:Z|UTC|GMT|[+-][0-9]{2}(?::?[0-9]{2})?))?)?"
)

_EPOCH = _dt.date(1970, 1, 1).toordinal()


def check_format(fmt: str, where: str = "date_format") -> str:
    """``fmt`` if it is one of :data:`DATE_FORMATS`, else a :class:`DomainError` listing them."""
    if fmt not in DATE_FORMATS:
        raise DomainError(f"{where} must be one of {', '.join(DATE_FORMATS)}, got {fmt!r}")
    return fmt


def date_pattern(fmt: str) -> str:
    """Full-match regular expression (Python, RE2 and Java syntax alike) of a date in ``fmt``
    with an optional time and zone; its three groups are the date's fields in
    :func:`group_order` order.

    Examples
    --------
    >>> bool(re.fullmatch(date_pattern("%m/%d/%Y"), "12/1/2015 1:45 PM"))
    True
    """
    return r"[ \t]*" + DATE_FORMATS[check_format(fmt)][0] + _TIME + r"[ \t]*"


def group_order(fmt: str) -> str:
    """The fields of the three groups of :func:`date_pattern`: ``"ymd"``, ``"mdy"`` or ``"dmy"``."""
    return DATE_FORMATS[check_format(fmt)][1]


_COMPILED: dict[str, re.Pattern[str]] = {}


def _compiled(fmt: str) -> re.Pattern[str]:
    if fmt not in _COMPILED:
        _COMPILED[fmt] = re.compile(date_pattern(fmt))
    return _COMPILED[fmt]


def _day_of_text(text: str, fmt: str) -> int | None:
    m = _compiled(fmt).fullmatch(text)
    if m is None:
        return None
    fields = dict(zip(group_order(fmt), (int(g) for g in m.groups())))
    try:
        return _dt.date(fields["y"], fields["m"], fields["d"]).toordinal() - _EPOCH
    except ValueError:  # 2/30/2015: no such day
        return None


def day_of(value: Any, fmt: str = ISO_FORMAT) -> int | None:
    """Days since 1970-01-01 of the date a value stands for (module docstring), else ``None``.

    Parameters
    ----------
    value : str, datetime.date, datetime.datetime, pandas.Timestamp or numpy.datetime64
    fmt : str
        The attribute's recorded text form (ISO is accepted besides).

    Examples
    --------
    >>> day_of("12/1/2015", "%m/%d/%Y"), day_of("2015-12-01 13:45:00", "%m/%d/%Y"), day_of("2/30/2015", "%m/%d/%Y")
    (16770, 16770, None)
    """
    if isinstance(value, str):
        got = _day_of_text(value, fmt)
        return got if got is not None or fmt == ISO_FORMAT else _day_of_text(value, ISO_FORMAT)
    if type(value).__name__ == "datetime64":
        import numpy as np

        if np.isnat(value):
            return None
        return int(value.astype("datetime64[D]").astype("int64"))
    if isinstance(value, _dt.datetime):  # pandas.Timestamp too
        if value.tzinfo is not None:
            value = value.astimezone(_dt.UTC)
        return value.date().toordinal() - _EPOCH
    if isinstance(value, _dt.date):
        return value.toordinal() - _EPOCH
    return None


def day_text(day: int) -> str:
    """ISO text of a day number: ``day_text(16770) == "2015-12-01"``."""
    return _dt.date.fromordinal(int(day) + _EPOCH).isoformat()


def _date(day: int) -> _dt.date:
    return _dt.date.fromordinal(int(day) + _EPOCH)


def period_start(day: int, period: str) -> int:
    """The first day of the period holding ``day`` (weeks start on Monday).

    Examples
    --------
    >>> [day_text(period_start(16770 + 30, p)) for p in PERIODS]
    ['2015-01-01', '2015-10-01', '2015-12-01', '2015-12-28', '2015-12-31']
    """
    d = _date(day)
    if period == "year":
        s = _dt.date(d.year, 1, 1)
    elif period == "quarter":
        s = _dt.date(d.year, 3 * ((d.month - 1) // 3) + 1, 1)
    elif period == "month":
        s = _dt.date(d.year, d.month, 1)
    elif period == "week":
        s = d - _dt.timedelta(days=d.weekday())
    elif period == "day":
        s = d
    else:
        raise DomainError(f"date period must be one of {', '.join(PERIODS)}, got {period!r}")
    return s.toordinal() - _EPOCH


def _next_start(start: int, period: str) -> int:
    d = _date(start)
    if period == "year":
        n = _dt.date(d.year + 1, 1, 1)
    elif period in ("quarter", "month"):
        step = 3 if period == "quarter" else 1
        m = d.month - 1 + step
        n = _dt.date(d.year + m // 12, m % 12 + 1, 1)
    else:
        n = d + _dt.timedelta(days=7 if period == "week" else 1)
    return n.toordinal() - _EPOCH


def period_edges(first_day: int, last_day: int, period: str) -> tuple[int, ...]:
    """Bin edges covering ``[first_day, last_day]`` by whole periods: the start of each period
    from the one holding ``first_day`` to the one holding ``last_day``, and the next start.

    Examples
    --------
    >>> [day_text(e) for e in period_edges(16770, 16810, "month")]  # 2015-12-01 .. 2016-01-10
    ['2015-12-01', '2016-01-01', '2016-02-01']
    """
    edges = [period_start(first_day, period)]
    while edges[-1] <= last_day:
        edges.append(_next_start(edges[-1], period))
    return tuple(edges)


def period_label(start: int, period: str) -> str:
    """Readable name of the period starting on day ``start``.

    Examples
    --------
    >>> [period_label(period_start(16770, p), p) for p in PERIODS]
    ['2015', '2015-Q4', '2015-12', '2015-W49', '2015-12-01']
    """
    d = _date(start)
    if period == "year":
        return f"{d.year}"
    if period == "quarter":
        return f"{d.year}-Q{(d.month - 1) // 3 + 1}"
    if period == "month":
        return f"{d.year}-{d.month:02d}"
    if period == "week":
        y, w, _ = d.isocalendar()
        return f"{y}-W{w:02d}"
    return d.isoformat()


@dataclass(frozen=True)
class DateBins:
    """The date rule of an attribute: its ``period`` (for labels), the text form ``fmt`` its data
    use (ISO accepted besides) and the bin ``edges`` (days since 1970-01-01, half-open bins)."""

    period: str
    fmt: str
    edges: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.period not in PERIODS:
            raise DomainError(f"date period must be one of {', '.join(PERIODS)}, got {self.period!r}")
        check_format(self.fmt)
        edges = tuple(int(e) for e in self.edges)
        if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
            raise DomainError("date bins need at least 2 strictly increasing dates")
        object.__setattr__(self, "edges", edges)

    @property
    def n_bins(self) -> int:
        return len(self.edges) - 1

    def labels(self) -> tuple[str, ...]:
        """Period labels of the bins (by their first day)."""
        return tuple(period_label(e, self.period) for e in self.edges[:-1])

    def bin_of_day(self, day: int) -> int | None:
        """Bin of a day (``e_i <= day < e_{i+1}``), ``None`` outside."""
        import bisect

        if not self.edges[0] <= day < self.edges[-1]:
            return None
        return bisect.bisect_right(self.edges, day) - 1

    def describe(self) -> str:
        """The bins in words, for messages."""
        return (f"{self.period} bins from {day_text(self.edges[0])} to {day_text(self.edges[-1])} "
                f"(the last day excluded), dates written as {self.fmt} or {ISO_FORMAT}")

    @classmethod
    def from_spec(cls, name: str, period: Any, fmt: Any, bins: Any) -> DateBins:
        """From a domain file's ``period``, ``date_format`` and ``bins`` (ISO date texts)."""
        if not isinstance(bins, Sequence) or isinstance(bins, str):
            raise DomainError(f"attribute {name!r}: date bins must be a list of dates (YYYY-MM-DD)")
        days = []
        for b in bins:
            d = _day_of_text(b, ISO_FORMAT) if isinstance(b, str) else None
            if d is None or not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", b.strip()):
                raise DomainError(f"attribute {name!r}: date bin edge {b!r} is not a date written YYYY-MM-DD")
            days.append(d)
        try:
            return cls(str(period), str(fmt if fmt is not None else ISO_FORMAT), tuple(days))
        except DomainError as exc:
            raise DomainError(f"attribute {name!r}: {exc}") from None

    def to_spec(self) -> dict[str, Any]:
        """The domain file's entries: ``period``, ``date_format``, ``bins``."""
        return {"period": self.period, "date_format": self.fmt, "bins": [day_text(e) for e in self.edges]}
