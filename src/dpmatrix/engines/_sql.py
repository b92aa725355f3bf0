"""DuckDB SQL helpers: identifier/string quoting, numeric and label keys, and the SQL twin of
:func:`dpmatrix._encode.encode_column` (:func:`sql_encode`) so raw CSV/Parquet files are encoded
inside DuckDB exactly as pandas frames are by :mod:`dpmatrix._encode`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._domain import Attribute
from .._encode import mapping_kind
from .._values import NUMBER_PATTERN, LabelIndex


def quote_ident(name: str) -> str:
    """SQL identifier quoting (DuckDB)."""
    return '"' + str(name).replace('"', '""') + '"'


def quote_str(value: str) -> str:
    """SQL string literal."""
    return "'" + str(value).replace("'", "''") + "'"


def _sql_double(x: float) -> str:
    return f"CAST({quote_str(repr(float(x)))} AS DOUBLE)"


_INT_TYPES = (
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
    "UBIGINT", "UHUGEINT",
)  # fmt: skip


def sql_type_class(column_type: str) -> str:
    """``"int"``, ``"float"``, ``"bool"``, ``"str"`` or ``"other"`` for a DuckDB type name."""
    t = column_type.upper()
    if t in _INT_TYPES:
        return "int"
    if t in ("FLOAT", "DOUBLE", "REAL") or t.startswith("DECIMAL"):
        return "float"
    if t == "BOOLEAN":
        return "bool"
    if t == "VARCHAR":
        return "str"
    return "other"


def sql_number(column_sql: str, column_type: str) -> str:
    """DOUBLE value of a column (NULL when missing, not a number, NaN or infinite): the SQL twin
    of :func:`dpmatrix._values.parse_number` (text must match :data:`NUMBER_PATTERN`)."""
    cls = sql_type_class(column_type)
    if cls == "int":
        return f"CAST({column_sql} AS DOUBLE)"
    if cls == "bool":
        return "CAST(NULL AS DOUBLE)"
    if cls == "float":
        x = f"CAST({column_sql} AS DOUBLE)"
        return f"(CASE WHEN isnan({x}) OR isinf({x}) THEN NULL ELSE {x} END)"
    t = f"trim(CAST({column_sql} AS VARCHAR))"
    x = f"TRY_CAST({t} AS DOUBLE)"
    return (
        f"(CASE WHEN regexp_full_match({t}, {quote_str(NUMBER_PATTERN)}) AND NOT isinf({x}) "
        f"THEN {x} END)"
    )


def sql_missing(column_sql: str, column_type: str, na_values: Sequence[str] = ()) -> str:
    """SQL twin of :func:`dpmatrix._values.is_missing`: NULL, NaN, blank text or a marker."""
    cls = sql_type_class(column_type)
    if cls == "float":
        return f"({column_sql} IS NULL OR isnan(CAST({column_sql} AS DOUBLE)))"
    if cls == "str":
        markers = ", ".join(quote_str(m) for m in dict.fromkeys(["", *(str(v).strip() for v in na_values)]))
        return f"({column_sql} IS NULL OR trim({column_sql}) IN ({markers}))"
    return f"({column_sql} IS NULL)"


def sql_date(column_sql: str, column_type: str, fmt: str) -> str:
    """The DATE a value stands for (NULL when not a date): the SQL twin of
    :func:`dpmatrix._dates.day_of` — text by the same regular expression (the attribute's format,
    else ISO), the date built from its three groups (``TRY_CAST`` refuses a day that does not
    exist); a typed DATE/TIMESTAMP by its date, a TIMESTAMP WITH TIME ZONE by its UTC date."""
    from .._dates import ISO_FORMAT, date_pattern, group_order

    t = column_type.upper()
    if t in ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ"):
        return f"CAST(timezone('UTC', {column_sql}) AS DATE)"
    if t == "DATE" or t.startswith("TIMESTAMP"):
        return f"CAST({column_sql} AS DATE)"
    text = f"CAST({column_sql} AS VARCHAR)"

    def one(f: str) -> str:
        pat = quote_str(date_pattern(f))
        anchored = quote_str(f"^(?:{date_pattern(f)})$")
        order = group_order(f)
        g = {c: f"regexp_extract({text}, {anchored}, {order.index(c) + 1})" for c in "ymd"}
        iso = f"concat(lpad({g['y']}, 4, '0'), '-', lpad({g['m']}, 2, '0'), '-', lpad({g['d']}, 2, '0'))"
        return f"(CASE WHEN regexp_full_match({text}, {pat}) THEN TRY_CAST({iso} AS DATE) END)"

    return one(fmt) if fmt == ISO_FORMAT else f"COALESCE({one(fmt)}, {one(ISO_FORMAT)})"


def sql_day(column_sql: str, column_type: str, fmt: str) -> str:
    """Days since 1970-01-01 (NULL when not a date) of :func:`sql_date`."""
    return f"date_diff('day', DATE '1970-01-01', {sql_date(column_sql, column_type, fmt)})"


#: Longest day-by-day lookup list for date bins whose edges are not period starts.
MAX_DAY_TABLE = 200_000


def _sql_period_index(attr: Attribute, column_sql: str, column_type: str) -> tuple[str, list[int] | None] | None:
    """``(index, table)`` for a date attribute: ``index`` counts whole periods (or days) from the
    first edge in one ``date_diff`` of the date, so the value is parsed once per row, not once
    per bin; ``table`` maps that count to the bin (``None`` when the bins are the consecutive
    periods themselves, as infer-domain writes them). ``None`` when the edges span more than
    :data:`MAX_DAY_TABLE` days without being period starts (then one comparison per bin)."""
    from .._dates import day_text, period_edges, period_start

    dates = attr.dates
    assert dates is not None
    e, p = dates.edges, dates.period
    d = sql_date(column_sql, column_type, dates.fmt)
    first = f"DATE '{day_text(e[0])}'"
    if all(period_start(x, p) == x for x in e):
        steps = period_edges(e[0], e[-1] - 1, p)  # every period start from the first edge to the last
        if p in ("year", "quarter", "month"):
            idx = f"date_diff('{p}', {first}, {d})"
        elif p == "week":  # floor, not truncation: a day before the first week is -1
            idx = f"CAST(floor(date_diff('day', {first}, {d}) / 7) AS BIGINT)"
        else:
            idx = f"date_diff('day', {first}, {d})"
        if steps == e:
            return idx, None
        pos = {x: i for i, x in enumerate(e)}
        table, b = [], -1
        for x in steps[:-1]:
            b = pos.get(x, b)
            table.append(b)
        return idx, table
    if e[-1] - e[0] > MAX_DAY_TABLE:
        return None
    table = [int(np.searchsorted(e, x, side="right")) - 1 for x in range(e[0], e[-1])]
    return f"date_diff('day', {first}, {d})", table


def sql_label_key(column_sql: str, column_type: str) -> str:
    """SQL twin of :func:`label_key`."""
    cls = sql_type_class(column_type)
    if cls == "str":
        return column_sql
    if cls == "bool":
        return f"(CASE WHEN {column_sql} THEN 'True' ELSE 'False' END)"
    if cls == "int":
        return f"CAST({column_sql} AS VARCHAR)"
    if cls == "float":
        x = f"CAST({column_sql} AS DOUBLE)"
        return (
            f"(CASE WHEN isnan({x}) THEN NULL WHEN {x} = floor({x}) AND abs({x}) < 1e15 "
            f"THEN CAST(CAST({x} AS BIGINT) AS VARCHAR) ELSE CAST({x} AS VARCHAR) END)"
        )
    return f"CAST({column_sql} AS VARCHAR)"


@dataclass(frozen=True)
class EncodedSQL:
    """SQL expressions encoding one raw column: ``code`` (final code, NULL when the row has no
    code), ``base`` (code before clip/other), ``missing`` (row has a missing value), ``drop``
    (the row is left out: missing under ``missing="drop"``; ``FALSE`` otherwise)."""

    code: str
    base: str
    missing: str
    drop: str = "FALSE"


def _sql_double_list(xs: Sequence[float | None]) -> str:
    return "[" + ", ".join("NULL" if x is None else _sql_double(x) for x in xs) + "]::DOUBLE[]"


def _sql_label_code(attr: Attribute, column_sql: str, column_type: str) -> str:
    """The code of the label a value matches (by text, then by the number a label stands for:
    :class:`dpmatrix._values.LabelIndex`), NULL when none."""
    index = LabelIndex.of(attr.labels)  # type: ignore[arg-type]
    labels = ", ".join(quote_str(lab) for lab in attr.labels)  # type: ignore[union-attr]
    exact = f"list_position([{labels}]::VARCHAR[], {sql_label_key(column_sql, column_type)})"
    nums = index.label_numbers()
    if any(x is not None for x in nums):
        v = sql_number(column_sql, column_type)
        by_number = f"(CASE WHEN {v} IS NOT NULL THEN list_position({_sql_double_list(nums)}, {v}) END)"
        return f"(COALESCE({exact}, {by_number}) - 1)"
    return f"({exact} - 1)"


def sql_encode(
    attr: Attribute,
    column_sql: str,
    column_type: str,
    policy: str = "error",
    na_values: Sequence[str] = (),
) -> EncodedSQL:
    """The mapping of :func:`encode_column` as DuckDB SQL (CASE / list_position): labels by
    exact text, then by the number a label stands for (:class:`dpmatrix._values.LabelIndex`)."""
    kind = mapping_kind(attr)
    missing = sql_missing(column_sql, column_type, na_values)
    clip_expr = None
    if kind == "labels":
        base = _sql_label_code(attr, column_sql, column_type)
    elif kind == "dates":
        dates = attr.dates
        assert dates is not None
        e = dates.edges
        k = len(e) - 1
        found = _sql_period_index(attr, column_sql, column_type)
        if found is not None:  # the date parsed once, the bin by a subtraction (and a lookup)
            idx, table = found
            n = k if table is None else len(table)
            got = "CAST(i AS INTEGER)" if table is None else f"list_extract([{', '.join(map(str, table))}], i + 1)"
            # one evaluation of the index per row: a single-element list and a lambda over it
            base = f"list_extract(list_transform([{idx}], lambda i: CASE WHEN i >= 0 AND i < {n} THEN {got} END), 1)"
            clip_expr = (f"list_extract(list_transform([{idx}], lambda i: CASE WHEN i < 0 THEN 0 WHEN i >= {n} THEN {k - 1} "
                         f"ELSE {got} END), 1)")
        else:
            v = sql_day(column_sql, column_type, dates.fmt)
            parts = [f"WHEN {v} IS NULL OR {v} < {e[0]} OR {v} >= {e[-1]} THEN NULL"]
            parts += [f"WHEN {v} < {e[i + 1]} THEN {i}" for i in range(k - 1)]
            base = f"(CASE {' '.join(parts)} ELSE {k - 1} END)"
            clip_expr = f"(CASE WHEN {v} < {e[0]} THEN 0 WHEN {v} >= {e[-1]} THEN {k - 1} ELSE {base} END)"
        label = _sql_label_code(attr, column_sql, column_type)  # a period label ("2015-12") first
        base, clip_expr = f"COALESCE({label}, {base})", f"COALESCE({label}, {clip_expr})"
    else:
        v = sql_number(column_sql, column_type)
        if kind == "bins":
            e = attr.bins  # type: ignore[assignment]
            k = len(e) - 1
            parts = [f"WHEN {v} IS NULL OR {v} < {_sql_double(e[0])} OR {v} > {_sql_double(e[-1])} THEN NULL"]
            parts += [f"WHEN {v} < {_sql_double(e[i + 1])} THEN {i}" for i in range(k - 1)]
            base = f"(CASE {' '.join(parts)} ELSE {k - 1} END)"
            lo, hi, top = _sql_double(e[0]), _sql_double(e[-1]), k - 1
            clip_expr = f"(CASE WHEN {v} < {lo} THEN 0 WHEN {v} > {hi} THEN {top} ELSE {base} END)"
        else:
            top = attr.n_values - 1
            integral = f"{v} = floor({v})"
            base = (
                f"(CASE WHEN {integral} AND {v} >= 0 AND {v} <= {top} "
                f"THEN CAST({v} AS INTEGER) END)"
            )
            clip_expr = (
                f"(CASE WHEN {integral} AND {v} < 0 THEN 0 "
                f"WHEN {integral} AND {v} > {top} THEN {top} ELSE {base} END)"
            )
    code = base
    if policy == "clip" and clip_expr is not None:
        code = clip_expr
    elif policy == "other" and attr.other_code is not None:
        code = f"COALESCE({base}, {attr.other_code})"
    on_missing = {"category": str(attr.missing_code), "drop": "0"}.get(attr.missing, "NULL")
    code = f"(CASE WHEN {missing} THEN {on_missing} ELSE {code} END)"
    base = f"(CASE WHEN {missing} THEN NULL ELSE {base} END)"
    drop = missing if attr.missing == "drop" else "FALSE"
    return EncodedSQL(code=code, base=base, missing=missing, drop=drop)


# -- infer a domain (opt-in) ---------------------------------------------------------------------
