"""DuckDB SQL helpers: identifier/string quoting, numeric and label keys, and the SQL twin of
:func:`dpmatrix.encode.encode_column` (:func:`sql_encode`) so raw CSV/Parquet files are encoded
inside DuckDB exactly as pandas frames are by :mod:`dpmatrix.encode`."""

from __future__ import annotations

from dataclasses import dataclass

from ..domain import Attribute
from ..encode import mapping_kind


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
    """DOUBLE value of a column (NULL when missing, non-numeric or NaN)."""
    cls = sql_type_class(column_type)
    x = f"CAST({column_sql} AS DOUBLE)" if cls in ("int", "float", "bool") else (
        f"TRY_CAST({column_sql} AS DOUBLE)"
    )
    if cls == "int" or cls == "bool":
        return x
    return f"(CASE WHEN isnan({x}) THEN NULL ELSE {x} END)"


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
    code), ``base`` (code before clip/other), ``missing`` (row has a missing value)."""

    code: str
    base: str
    missing: str


def sql_encode(
    attr: Attribute, column_sql: str, column_type: str, policy: str = "error"
) -> EncodedSQL:
    """The mapping of :func:`encode_column` as DuckDB SQL (CASE / list_position)."""
    kind = mapping_kind(attr)
    cls = sql_type_class(column_type)
    missing = f"({column_sql} IS NULL)"
    if cls == "float":
        missing = f"({column_sql} IS NULL OR isnan(CAST({column_sql} AS DOUBLE)))"
    clip_expr = None
    if kind == "labels":
        labels = ", ".join(quote_str(lab) for lab in attr.labels)  # type: ignore[union-attr]
        base = f"(list_position([{labels}]::VARCHAR[], {sql_label_key(column_sql, column_type)}) - 1)"
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
            top = attr.size - 1
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
    return EncodedSQL(code=code, base=base, missing=missing)


# -- infer a domain (opt-in) ---------------------------------------------------------------------
