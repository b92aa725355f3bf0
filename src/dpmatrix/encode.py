"""Raw values -> integer codes, through the domain (never through the data).

Each attribute maps raw values in one of three ways, chosen by the domain:

* ``bins`` (numeric edges ``e_0 < ... < e_k``): ``v`` gets code ``i`` when ``e_i <= v < e_{i+1}``,
  the last bin closed (``e_{k-1} <= v <= e_k``);
* ``labels`` (no bins): a value gets the code of the label equal to its string form (integral
  numbers are written without a decimal point, so ``3``, ``3.0`` and ``"3"`` all match label
  ``"3"``);
* neither: values must already be integer codes ``0..size-1``.

A value the domain does not cover (including a missing value) is an error naming the column, a few
values and the number of rows. On explicit request (``on_unknown``, for all columns or per column
as ``{column: policy}``) such values are instead

* ``"clip"``: sent to the first/last bin (or code ``0``/``size-1``) when below/above the range;
  label-matched attributes, missing and non-numeric values cannot be clipped and stay errors;
* ``"other"``: sent to the code whose label is ``"other"`` (an error if the attribute has none).

Remapped rows are reported with a :class:`RemappedValuesWarning` (explicit, never silent).

The same mapping is available as DuckDB SQL (:func:`sql_encode`) so that raw CSV/Parquet files
are encoded inside DuckDB; both paths give identical codes (tested).

:func:`infer_domain` derives a domain from the data; it is opt-in only and warns
(:class:`InferredDomainWarning`) that a data-derived domain is not covered by the privacy guarantee.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from .domain import OTHER_LABEL, Attribute, Domain
from .errors import DataError, DomainError
from .engines.base import (
    code_dtype,
    fmt_values,
    missing_columns_message,
    null_message,
    raise_problems,
    rows,
)

OnUnknown = Literal["error", "clip", "other"]
POLICIES: tuple[str, ...] = ("error", "clip", "other")

UNKNOWN_HINT = (
    "Values the domain does not cover are an error by default. Fix the domain (add labels, "
    "widen the bins), or ask explicitly for on_unknown='clip' (bins and integer codes: values "
    "below/above the range go to the first/last code) or on_unknown='other' (attributes with a "
    f"label {OTHER_LABEL!r}), for all columns or per column as {{column: policy}}."
)


class RemappedValuesWarning(UserWarning):
    """Raw values outside the domain were clipped or sent to "other" as the caller asked."""


class InferredDomainWarning(UserWarning):
    """A domain was derived from the data: not covered by the privacy guarantee."""


# -- policies and mapping kinds ------------------------------------------------------------------
def resolve_policies(
    domain: Domain, on_unknown: str | Mapping[str, str]
) -> dict[str, str]:
    """Policy per attribute name from a single policy or a ``{column: policy}`` mapping
    (attributes not in the mapping get ``"error"``)."""
    if isinstance(on_unknown, str):
        pol = {n: on_unknown for n in domain.names}
    elif isinstance(on_unknown, Mapping):
        for k in on_unknown:
            domain.index(k)  # raises UnknownAttributeError with a suggestion
        pol = {n: str(on_unknown.get(n, "error")) for n in domain.names}
    else:
        raise TypeError(f"on_unknown must be a string or a mapping, got {on_unknown!r}")
    for n, p in pol.items():
        if p not in POLICIES:
            raise ValueError(f"on_unknown for {n!r} must be one of {POLICIES}, got {p!r}")
    return pol


def mapping_kind(attr: Attribute) -> str:
    """``"bins"``, ``"labels"`` or ``"codes"``: how raw values of ``attr`` become codes."""
    if attr.bins is not None:
        return "bins"
    if attr.labels is not None:
        return "labels"
    return "codes"


def label_key(v: Any) -> str | None:
    """String form used to match a raw value to a label (``None`` for a missing value)."""
    if v is None or v is pd.NA or v is pd.NaT:
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
        if f.is_integer() and abs(f) < 1e15:
            return str(int(f))
        return str(f)
    return str(v)


def _unknown_message(attr: Attribute, kind: str, n: int, values: Sequence[Any], nd: int) -> str:
    if kind == "labels":
        what = "a value that matches no label"
    elif kind == "bins":
        lo, hi = attr.bins[0], attr.bins[-1]  # type: ignore[index]
        what = f"a value outside the bins [{fmt_values([lo])}, {fmt_values([hi])}]"
    else:
        what = f"a value that is not an integer code 0..{attr.size - 1}"
    return f"column {attr.name!r}: {rows(n)} with {what}: {fmt_values(values, nd)}"


def _policy_note(attr: Attribute, kind: str, policy: str) -> str:
    if policy == "clip" and kind == "labels":
        return " (on_unknown='clip' does not apply: values are matched by label)"
    if policy == "clip":
        return " (only numeric values below/above the range can be clipped)"
    if policy == "other" and attr.other_code is None:
        return f" (on_unknown='other' needs a label {OTHER_LABEL!r} in the domain)"
    return ""


def problem_messages(
    attr: Attribute,
    policy: str,
    n_missing: int,
    n_unknown: int,
    values: Sequence[Any],
    n_distinct: int,
) -> list[str]:
    """Messages for rows left without a code (shared by the pandas and DuckDB paths)."""
    kind = mapping_kind(attr)
    out = []
    note = _policy_note(attr, kind, policy)
    if n_missing:
        out.append(null_message(attr.name, n_missing) + note)
    if n_unknown:
        out.append(_unknown_message(attr, kind, n_unknown, values, n_distinct) + note)
    return out


def remap_message(attr: Attribute, policy: str, n: int) -> str:
    if policy == "clip":
        return f"column {attr.name!r}: {rows(n)} clipped to the first/last code"
    return f"column {attr.name!r}: {rows(n)} sent to code {attr.other_code} ({OTHER_LABEL!r})"


def warn_remapped(messages: Sequence[str], stacklevel: int = 3) -> None:
    if messages:
        warnings.warn(
            "values outside the domain were remapped as requested by on_unknown:\n  - "
            + "\n  - ".join(messages),
            RemappedValuesWarning,
            stacklevel=stacklevel,
        )


# -- pandas path ---------------------------------------------------------------------------------
def _sorted_distinct(values: np.ndarray) -> list[Any]:
    try:
        return list(np.unique(values))
    except TypeError:  # mixed types
        return sorted(set(values.tolist()), key=lambda v: (type(v).__name__, str(v)))


def encode_column(
    values: Any, attr: Attribute, policy: str = "error"
) -> tuple[np.ndarray | None, list[str], int]:
    """Map one column of raw values; returns ``(codes or None, problems, rows remapped)``."""
    s = values if isinstance(values, pd.Series) else pd.Series(values)
    s = s.reset_index(drop=True)
    if isinstance(s.dtype, pd.CategoricalDtype):
        s = s.astype(object)
    n = len(s)
    missing = s.isna().to_numpy()
    kind = mapping_kind(attr)
    low = high = np.zeros(n, dtype=bool)
    if kind == "labels":
        fcodes, uniques = pd.factorize(s, use_na_sentinel=True)
        lookup = {lab: i for i, lab in enumerate(attr.labels)}  # type: ignore[arg-type]
        umap = np.array([lookup.get(label_key(u), -1) for u in uniques] + [-1], dtype=np.int64)
        base = umap[fcodes]  # sentinel -1 indexes the trailing -1
    else:
        if pd.api.types.is_numeric_dtype(s.dtype):
            v = s.to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            v = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        num = ~np.isnan(v)
        if kind == "bins":
            e = np.asarray(attr.bins, dtype=np.float64)
            k = len(e) - 1
            with np.errstate(invalid="ignore"):
                inside = num & (v >= e[0]) & (v <= e[-1])
                low, high = num & (v < e[0]), num & (v > e[-1])
            idx = np.minimum(np.searchsorted(e, np.where(inside, v, e[0]), side="right") - 1, k - 1)
            base = np.where(inside, idx, -1)
            top = k - 1
        else:
            with np.errstate(invalid="ignore"):
                integral = num & (np.floor(v) == v)
                inside = integral & (v >= 0) & (v <= attr.size - 1)
                low, high = integral & (v < 0), integral & (v > attr.size - 1)
            base = np.where(inside, np.where(inside, v, 0).astype(np.int64), -1)
            top = attr.size - 1
    code = base.astype(np.int64, copy=True)
    if policy == "clip" and kind != "labels":
        code[low] = 0
        code[high] = top
    elif policy == "other" and attr.other_code is not None:
        code[code < 0] = attr.other_code
    bad = code < 0
    n_remapped = int(((base < 0) & ~bad).sum())
    bad_unknown = bad & ~missing
    n_unknown = int(bad_unknown.sum())
    distinct: list[Any] = []
    if n_unknown:
        distinct = _sorted_distinct(s.to_numpy(dtype=object)[bad_unknown])
    problems = problem_messages(
        attr, policy, int((bad & missing).sum()), n_unknown, distinct, len(distinct)
    )
    if problems:
        return None, problems, n_remapped
    return code.astype(code_dtype(attr.size)), [], n_remapped


def encode_frame(
    df_raw: pd.DataFrame,
    domain: Domain,
    on_unknown: OnUnknown | Mapping[str, str] = "error",
) -> pd.DataFrame:
    """Map raw values to integer codes through ``domain`` (labels, bins, or codes as is).

    Returns a DataFrame with one compact unsigned column per attribute, in domain order, with the
    index of ``df_raw``; extra columns of ``df_raw`` are dropped. Raises one
    :class:`~dpmatrix.errors.DataError` naming every column with missing columns, missing values
    or values the domain does not cover (a few values and the number of rows), unless
    ``on_unknown`` explicitly clips them or sends them to "other" (then a
    :class:`RemappedValuesWarning` says how many rows per column).
    """
    if not isinstance(df_raw, pd.DataFrame):
        raise TypeError(f"encode_frame expects a pandas DataFrame, got {type(df_raw).__name__}")
    policies = resolve_policies(domain, on_unknown)
    missing_cols = [n for n in domain.names if n not in df_raw.columns]
    if missing_cols:
        raise DataError(missing_columns_message(missing_cols, [str(c) for c in df_raw.columns]))
    out: dict[str, np.ndarray] = {}
    problems: list[str] = []
    remapped: list[str] = []
    for attr in domain.attributes:
        codes, p, n_re = encode_column(df_raw[attr.name], attr, policies[attr.name])
        problems.extend(p)
        if n_re:
            remapped.append(remap_message(attr, policies[attr.name], n_re))
        if codes is not None:
            out[attr.name] = codes
    raise_problems(problems, "raw values do not match the domain", UNKNOWN_HINT)
    warn_remapped(remapped)
    return pd.DataFrame(out, index=df_raw.index, columns=list(domain.names))


def read_csv_text(path: str, domain: Domain, *, delimiter: str | None = None) -> pd.DataFrame:
    """The domain's columns of a CSV file with every value as text (no type sniffing, no
    "NA"/"None"/"null" turned into missing, "01" kept as "01"); only an empty field is missing.
    DuckDB reads raw CSV the same way (``all_varchar``), so both engines see the same values.

    Parameters
    ----------
    path : str
    domain : Domain
    delimiter : str, optional

    Returns
    -------
    pandas.DataFrame
        Object columns of ``str`` (``None`` for empty fields).
    """
    try:
        df = pd.read_csv(
            path, sep=delimiter or ",", dtype=str, keep_default_na=False, na_filter=False,
            usecols=lambda c: c in domain,
        )  # fmt: skip
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read {path!r}: {exc}") from None
    return df.astype(object).mask(df == "", None)


# -- DuckDB SQL path -----------------------------------------------------------------------------
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
INFER_WARNING = (
    "infer_domain: this domain is derived from the private data. Which values occur (every label, "
    "the minimum and maximum that set the bins) is itself information about individual records "
    "(a rare value reveals that someone has it) and is NOT covered by the differential-privacy "
    "guarantee of anything released with this domain. Prefer a domain written from public "
    "knowledge (a codebook, a questionnaire, published category lists), or spend privacy budget "
    "to choose it; save and review the inferred domain before use."
)


def _infer_attribute(
    name: str,
    distinct: Sequence[Any],
    numeric: bool,
    integral: bool,
    vmin: float | None,
    vmax: float | None,
    max_labels: int,
    n_bins: int,
) -> Attribute:
    if numeric and not (integral and len(distinct) <= max_labels):
        assert vmin is not None and vmax is not None
        if vmax <= vmin:
            vmax = vmin + 1.0
        edges = np.linspace(vmin, vmax, n_bins + 1)
        if integral:
            edges = np.unique(np.round(edges))
            if len(edges) < 2:
                edges = np.array([vmin, vmin + 1.0])
        return Attribute(name, len(edges) - 1, "ordinal", bins=tuple(float(x) for x in edges))
    keys = [label_key(v) for v in distinct]
    labels = sorted({k for k in keys if k is not None}, key=(lambda k: float(k)) if numeric else str)
    kind = "ordinal" if numeric else "categorical"
    if len(labels) < 2:
        labels.append(OTHER_LABEL if OTHER_LABEL not in labels else OTHER_LABEL + "_")
    return Attribute(name, len(labels), kind, tuple(labels))


def infer_domain(
    data: pd.DataFrame | str | Path,
    columns: Sequence[str] | None = None,
    *,
    max_labels: int = 50,
    n_bins: int = 10,
    format: str | None = None,
) -> Domain:
    """Derive a domain from data — an explicit opt-in that weakens privacy (see the warning).

    Strings become categorical attributes labelled by their sorted distinct values; integral
    numbers with at most ``max_labels`` distinct values become ordinal attributes labelled by their
    values; other numbers get ``n_bins`` equal-width bins between their minimum and maximum. Files
    (CSV/Parquet) are scanned by DuckDB, never loaded into pandas. Always emits an
    :class:`InferredDomainWarning`.
    """
    warnings.warn(INFER_WARNING, InferredDomainWarning, stacklevel=2)
    attrs: list[Attribute] = []
    if isinstance(data, pd.DataFrame):
        cols = list(columns) if columns is not None else [str(c) for c in data.columns]
        for c in cols:
            if c not in data.columns:
                raise DataError(missing_columns_message([c], [str(x) for x in data.columns]))
            s = data[c].dropna()
            numeric = pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(
                s.dtype
            )
            if numeric:
                v = s.to_numpy(dtype=np.float64)
                v = v[np.isfinite(v)]
                if len(v) == 0:
                    raise DataError(f"column {c!r} has no finite values to infer a domain from")
                integral = bool(np.all(np.floor(v) == v))
                distinct = np.unique(v).tolist() if integral else []
                attrs.append(
                    _infer_attribute(
                        c, distinct, True, integral, float(v.min()), float(v.max()),
                        max_labels, n_bins,
                    )
                )  # fmt: skip
            else:
                distinct = pd.unique(s).tolist()
                attrs.append(_infer_attribute(c, distinct, False, False, None, None, 0, 0))
        return Domain(attrs)
    from .engines.duckdb_engine import _connect, describe, source_sql

    con = _connect(None)
    try:
        src = source_sql(data, format)
        types = describe(con, src)
        cols = list(columns) if columns is not None else list(types)
        missing = [c for c in cols if c not in types]
        if missing:
            raise DataError(missing_columns_message(missing, list(types)))
        for c in cols:
            q = quote_ident(c)
            cls = sql_type_class(types[c])
            if cls in ("int", "float"):
                x = sql_number(q, types[c])
                vmin, vmax, n_frac, n_dist = con.execute(
                    f"SELECT min({x}), max({x}), count(*) FILTER (WHERE {x} != floor({x})), "
                    f"count(DISTINCT {x}) FROM {src} WHERE NOT isinf({x})"
                ).fetchone()
                if vmin is None:
                    raise DataError(f"column {c!r} has no finite values to infer a domain from")
                integral = n_frac == 0
                distinct: list[Any] = []
                if integral and n_dist <= max_labels:
                    distinct = [
                        r[0]
                        for r in con.execute(
                            f"SELECT DISTINCT {x} FROM {src} WHERE {x} IS NOT NULL ORDER BY 1"
                        ).fetchall()
                    ]
                attrs.append(
                    _infer_attribute(
                        c, distinct, True, integral, float(vmin), float(vmax), max_labels, n_bins
                    )
                )
            else:
                key = sql_label_key(q, types[c])
                distinct = [
                    r[0]
                    for r in con.execute(
                        f"SELECT DISTINCT {key} FROM {src} WHERE {key} IS NOT NULL"
                    ).fetchall()
                ]
                attrs.append(_infer_attribute(c, distinct, False, False, None, None, 0, 0))
    finally:
        con.close()
    if not attrs:
        raise DomainError("no columns to infer a domain from")
    return Domain(attrs)
