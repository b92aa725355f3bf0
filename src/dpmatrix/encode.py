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
from typing import Any, Literal

import numpy as np
import pandas as pd

from .domain import OTHER_LABEL, Attribute, Domain
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
    shown = ", ".join(fmt_value(v) for v in list(values)[:MAX_SHOWN])
    if n_distinct is not None and n_distinct > MAX_SHOWN:
        shown += f", ... ({n_distinct} distinct values)"
    return shown


def rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def missing_columns_message(missing: Sequence[str], present: Sequence[str]) -> str:
    have = ", ".join(repr(c) for c in present[:30]) + (" ..." if len(present) > 30 else "")
    return (
        f"the data lack column(s) required by the domain: {', '.join(map(repr, missing))} "
        f"(the data have: {have or 'no columns'})"
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
