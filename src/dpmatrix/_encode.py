"""Raw values -> integer codes, through the domain (never through the data).

Each attribute maps raw values by the one rule of :mod:`dpmatrix._values` (also used by
``infer_domain``, ``meas.query`` and the DuckDB and Spark engines):

* ``bins`` (numeric edges ``e_0 < ... < e_k``): ``v`` gets code ``i`` when ``e_i <= v < e_{i+1}``,
  the last bin closed (``e_{k-1} <= v <= e_k``);
* ``labels`` (no bins): a value gets the code of the label equal to its text, else of the first
  label that is the same number (``3``, ``3.0``, ``"3"`` and ``"3.0"`` all match label ``"3"``);
* neither: values must already be integer codes ``0..size-1``.

A missing value (empty or blank cell, None, NaN, NULL, or a declared ``na_values`` marker) follows
the attribute's ``missing`` policy: an error naming the column and the fix (default), the
``"(missing)"`` code (``"category"``), or the row left out of every marginal (``"drop"``).

A value the domain does not cover is an error naming the column, the first few values with their
number of rows, the valid labels or bin edges, and the fix. On explicit request (``on_unknown``,
for all columns or per column as ``{column: policy}``) such values are instead

* ``"clip"``: sent to the first/last bin (or code ``0``/``size-1``) when below/above the range;
  label-matched attributes and non-numeric values cannot be clipped and stay errors;
* ``"other"``: sent to the code whose label is ``"other"`` (an error if the attribute has none).

Remapped rows are reported with a :class:`RemappedValuesWarning` (explicit, never silent).

The same mapping is available as DuckDB SQL (:func:`sql_encode`) so that raw CSV/Parquet files
are encoded inside DuckDB; both paths give identical codes (tested).

:func:`infer_domain` derives a domain from the data; it is opt-in only and warns
(:class:`InferredDomainWarning`) that a data-derived domain is not covered by the privacy guarantee.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from ._domain import MISSING_LABEL, OTHER_LABEL, Attribute, Domain, fmt_edge
from ._values import LabelIndex, date_days, missing_mask, numbers, value_key
from .errors import DataError

#: How many offending values an error message shows.
MAX_SHOWN = 5


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
    """``"dates"``, ``"bins"``, ``"labels"`` or ``"codes"``: how raw values of ``attr`` become codes."""
    if attr.dates is not None:
        return "dates"
    if attr.bins is not None:
        return "bins"
    if attr.labels is not None:
        return "labels"
    return "codes"


#: Text by which a raw value matches a label (:func:`dpmatrix._values.value_key`).
label_key = value_key


def _valid_values(attr: Attribute, kind: str) -> str:
    if kind == "labels":
        labs = [x for x in attr.labels if x != MISSING_LABEL]  # type: ignore[union-attr]
        shown = ", ".join(repr(x) for x in labs[:12])
        return f"the labels are {shown}" + (f", ... ({len(labs)} labels)" if len(labs) > 12 else "")
    if kind == "bins":
        return "the bin edges are " + ", ".join(fmt_edge(e) for e in attr.bins)  # type: ignore[union-attr]
    if kind == "dates":
        labs = attr.labels[: attr.dates.n_bins]  # type: ignore[union-attr,index]
        return f"the periods are {labs[0]} .. {labs[-1]}: {attr.dates.describe()}"  # type: ignore[union-attr]
    return f"its values are the integer codes 0..{attr.n_values - 1}"


def _unknown_fix(attr: Attribute, kind: str) -> str:
    if kind == "labels":
        return (f"fix: add the values to the labels of {attr.name!r} in the domain, or send "
                f"them to a label {OTHER_LABEL!r} with on_unknown='other' (CLI --on-unknown {attr.name}=other)")
    if kind == "dates":
        return (f"fix: add periods to the bins of {attr.name!r} in the domain (or infer it again), clip "
                f"dates outside with on_unknown='clip' (CLI --on-unknown {attr.name}=clip), or write the "
                f"dates as {attr.dates.fmt} or YYYY-MM-DD; text that marks a missing date needs na_values")  # type: ignore[union-attr]
    if kind == "bins":
        return (f"fix: widen the bins of {attr.name!r}, or clip with on_unknown='clip' "
                f"(CLI --on-unknown {attr.name}=clip); text that is no number needs a label "
                f"{OTHER_LABEL!r} and on_unknown='other', or na_values if it marks a missing value")
    return f"fix: give {attr.name!r} labels or bins in the domain if the data hold raw values"


def _unknown_message(attr: Attribute, kind: str, n: int, values: Sequence[Any], nd: int) -> str:
    if kind == "labels":
        what = "a value that matches no label"
    elif kind == "bins":
        lo, hi = attr.bins[0], attr.bins[-1]  # type: ignore[index]
        what = f"a value that is not a number inside the bins [{fmt_edge(lo)}, {fmt_edge(hi)}]"
    elif kind == "dates":
        what = f"a value that is not a date ({attr.dates.fmt} or YYYY-MM-DD) inside the periods"  # type: ignore[union-attr]
    else:
        what = f"a value that is not an integer code 0..{attr.n_values - 1}"
    return (
        f"column {attr.name!r}: {rows(n)} with {what}: {fmt_values(values, nd)}\n"
        f"    {_valid_values(attr, kind)}\n    {_unknown_fix(attr, kind)}"
    )


def missing_message(attr: Attribute, n: int) -> str:
    """A missing value where the attribute's policy is ``missing="error"``, and the fix."""
    return (
        f"column {attr.name!r}: {rows(n)} with a missing value (empty cell, NaN, None, NULL or a "
        f"declared na_values marker)\n    fix: give {attr.name!r} \"missing\": \"category\" (a "
        f"{MISSING_LABEL!r} level) or \"drop\" (rows left out) in the domain (CLI --missing "
        f"{attr.name}=category)"
    )


def _policy_note(attr: Attribute, kind: str, policy: str) -> str:
    if policy == "clip" and kind == "labels":
        return " (on_unknown='clip' does not apply: values are matched by label)"
    if policy == "clip" and kind == "dates":
        return " (only dates before/after the periods can be clipped)"
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
        out.append(missing_message(attr, n_missing))
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
def _label_codes(s: pd.Series, attr: Attribute) -> np.ndarray:
    """Code of the label each value matches (:class:`dpmatrix._values.LabelIndex`), -1 when none."""
    fcodes, uniques = pd.factorize(s, use_na_sentinel=True)
    index = LabelIndex.of(attr.labels)  # type: ignore[arg-type]
    umap = [index.code(u) for u in uniques]
    umap_arr = np.array([-1 if c is None else c for c in umap] + [-1], dtype=np.int64)
    return umap_arr[fcodes]  # sentinel -1 indexes the trailing -1


def encode_column(
    values: Any,
    attr: Attribute,
    policy: str = "error",
    na_values: Sequence[str] = (),
) -> tuple[np.ndarray | None, list[str], int, np.ndarray]:
    """Map one column of raw values (the rule of :mod:`dpmatrix._values`).

    Returns ``(codes or None, problems, rows remapped, dropped)``: ``dropped`` marks the rows
    left out because the value is missing and the attribute's policy is ``missing="drop"``
    (their entry in ``codes`` is meaningless).
    """
    s = values if isinstance(values, pd.Series) else pd.Series(values)
    s = s.reset_index(drop=True)
    if isinstance(s.dtype, pd.CategoricalDtype):
        s = s.astype(object)
    n = len(s)
    missing = missing_mask(s, na_values)
    kind = mapping_kind(attr)
    low = high = np.zeros(n, dtype=bool)
    top = attr.n_values - 1
    if kind == "labels":
        base = _label_codes(s, attr)
    elif kind == "dates":  # a period label ("2015-12") first, else the period holding the date
        by_label = _label_codes(s, attr)
        e = np.asarray(attr.dates.edges, dtype=np.float64)  # type: ignore[union-attr]
        v = np.where(by_label >= 0, np.nan, date_days(s, attr.dates.fmt))  # type: ignore[union-attr]
        num = ~np.isnan(v)
        with np.errstate(invalid="ignore"):
            inside = num & (v >= e[0]) & (v < e[-1])
            low, high = num & (v < e[0]), num & (v >= e[-1])
        base = np.where(inside, np.searchsorted(e, np.where(inside, v, e[0]), side="right") - 1, by_label)
        top = len(e) - 2
    else:
        v = numbers(s)
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
                inside = integral & (v >= 0) & (v <= top)
                low, high = integral & (v < 0), integral & (v > top)
            base = np.where(inside, np.where(inside, v, 0).astype(np.int64), -1)
    base = np.where(missing, -1, base)
    code = base.astype(np.int64, copy=True)
    if policy == "clip" and kind != "labels":
        code[low & ~missing] = 0
        code[high & ~missing] = top
    elif policy == "other" and attr.other_code is not None:
        code[(code < 0) & ~missing] = attr.other_code
    dropped = np.zeros(n, dtype=bool)
    if attr.missing == "category":
        code[missing] = attr.missing_code
    elif attr.missing == "drop":
        dropped = missing
        code[missing] = 0
    bad = code < 0
    n_remapped = int(((base < 0) & ~bad & ~missing).sum())
    bad_unknown = bad & ~missing
    n_unknown = int(bad_unknown.sum())
    distinct: list[Any] = []
    if n_unknown:
        distinct = value_counts(s.to_numpy(dtype=object)[bad_unknown])
    problems = problem_messages(
        attr, policy, int((bad & missing).sum()), n_unknown, distinct, len(distinct)
    )
    if problems:
        return None, problems, n_remapped, dropped
    return code.astype(code_dtype(attr.size)), [], n_remapped, dropped


def value_counts(values: np.ndarray) -> list[tuple[Any, int]]:
    """Distinct values with their number of rows, most frequent first (ties by value)."""
    counts: dict[Any, int] = {}
    for v in values.tolist():
        counts[v] = counts.get(v, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], type(kv[0]).__name__, str(kv[0])))


def encode_frame(
    df_raw: pd.DataFrame,
    domain: Domain,
    on_unknown: OnUnknown | Mapping[str, str] = "error",
    na_values: Sequence[str] = (),
) -> pd.DataFrame:
    """Map raw values to integer codes through ``domain`` (the rule of :mod:`dpmatrix._values`).

    Returns a DataFrame with one compact unsigned column per attribute, in domain order, with the
    index of ``df_raw`` less the rows dropped for a missing value of an attribute whose policy is
    ``missing="drop"``; extra columns of ``df_raw`` are dropped. Raises one
    :class:`~dpmatrix.errors.DataError` naming every column with missing columns, missing values
    (policy ``"error"``) or values the domain does not cover (a few values with their number of
    rows), unless ``on_unknown`` explicitly clips them or sends them to "other" (then a
    :class:`RemappedValuesWarning` says how many rows per column). ``na_values``: text markers
    that also mean "missing" (blank cells, None, NaN always do).
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
    keep = np.ones(len(df_raw), dtype=bool)
    for attr in domain.attributes:
        codes, p, n_re, dropped = encode_column(df_raw[attr.name], attr, policies[attr.name], na_values)
        problems.extend(p)
        keep &= ~dropped
        if n_re:
            remapped.append(remap_message(attr, policies[attr.name], n_re))
        if codes is not None:
            out[attr.name] = codes
    raise_problems(problems, "raw values do not match the domain", UNKNOWN_HINT)
    warn_remapped(remapped)
    frame = pd.DataFrame(out, index=df_raw.index, columns=list(domain.names))
    return frame if keep.all() else frame[keep]


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


# -- messages about bad data values, shared by the encoder and every data engine --------------


def fmt_value(v: Any) -> str:
    """Uniform rendering of an offending value (same for numpy and DuckDB results)."""
    if isinstance(v, (bytes, str)):
        return repr(v if isinstance(v, str) else v.decode())
    if isinstance(v, (bool, np.bool_)):
        return repr(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return str(int(f)) if f.is_integer() else repr(f)
    return repr(v)


def fmt_values(values: Sequence[Any], n_distinct: int | None = None) -> str:
    """The first few values; ``(value, rows)`` pairs are shown with their number of rows."""

    def one(v: Any) -> str:
        if isinstance(v, tuple) and len(v) == 2:
            return f"{fmt_value(v[0])} ({rows(int(v[1]))})"
        return fmt_value(v)

    shown = ", ".join(one(v) for v in list(values)[:MAX_SHOWN])
    if n_distinct is not None and n_distinct > MAX_SHOWN:
        shown += f", ... ({n_distinct} distinct values)"
    return shown


def rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def _header_key(name: str) -> str:
    return "".join(str(name).split()).casefold().replace("_", "").replace("-", "").replace(".", "")


def missing_columns_message(missing: Sequence[str], present: Sequence[str]) -> str:
    """Columns the domain needs and the data lack, with a did-you-mean for a header that differs
    only in case, blanks, ``_``, ``-`` or ``.`` (``Age`` for ``age``, ``"income "`` for ``income``)."""
    have = ", ".join(repr(c) for c in present[:30]) + (" ..." if len(present) > 30 else "")
    by_key: dict[str, list[str]] = {}
    for c in present:
        by_key.setdefault(_header_key(c), []).append(str(c))
    hints = [
        f"{m!r} -> did you mean {by_key[_header_key(m)][0]!r}?"
        for m in missing if len(by_key.get(_header_key(m), ())) == 1
    ]  # fmt: skip
    hint = (
        "; headers differ only in case or spacing: " + ", ".join(hints)
        + " (rename the data's columns or the domain's attributes to match exactly)"
    ) if hints else ""
    return (
        f"the data lack column(s) required by the domain: {', '.join(map(repr, missing))} "
        f"(the data have: {have or 'no columns'}){hint}"
    )


def duplicate_columns_message(names: Sequence[str], where: str = "the data") -> str:
    """The one message of every engine for a header that names a column twice."""
    return (
        f"{where} have duplicate column names: {', '.join(map(repr, names))}; every column must "
        "have its own name (rename or drop the copies)"
    )


def null_message(column: str, n: int) -> str:
    return f"column {column!r}: {rows(n)} with a missing value (NaN/None/NULL)"


def non_integer_message(column: str, n: int, values: Sequence[Any], n_distinct: int) -> str:
    return (
        f"column {column!r}: {rows(n)} with a non-integer value, e.g. "
        f"{fmt_values(values, n_distinct)}"
    )


def out_of_range_message(
    column: str, size: int, n: int, values: Sequence[Any], n_distinct: int
) -> str:
    return (
        f"column {column!r}: {rows(n)} with a code outside 0..{size - 1}: "
        f"{fmt_values(values, n_distinct)}"
    )


CODES_HINT = (
    "Data must hold integer codes 0..size-1 per attribute; for raw values (labels, numbers to "
    "bin) give the domain labels or bins and measure with encoding='raw' "
    "(plan.measure(data, encoding='raw')), or fix the domain."
)


def raise_problems(
    problems: Sequence[str],
    what: str = "the data do not match the domain",
    hint: str = CODES_HINT,
) -> None:
    """Raise one :class:`DataError` listing every problem (no-op if there are none)."""
    if problems:
        raise DataError(f"{what}:\n  - " + "\n  - ".join(problems) + "\n" + hint)


def code_dtype(size: int) -> np.dtype:
    """Smallest unsigned dtype holding codes ``0..size-1``."""
    if size <= 1 << 8:
        return np.dtype(np.uint8)
    if size <= 1 << 16:
        return np.dtype(np.uint16)
    return np.dtype(np.uint32)
