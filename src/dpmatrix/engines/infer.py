"""Inferring a domain from data (a pandas frame or a CSV/Parquet file read by DuckDB).

The inferred domain is derived from the private data and is not covered by the privacy
guarantee: see :data:`INFER_WARNING`."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..domain import OTHER_LABEL, Attribute, Domain
from ..encode import InferredDomainWarning, label_key, missing_columns_message
from ..errors import DataError, DomainError
from .duckdb_engine import connect, describe, source_sql
from .sql import quote_ident, sql_label_key, sql_number, sql_type_class

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


def _infer_attribute(
    name: str,
    distinct: Sequence[Any],
    numeric: bool,
    integral: bool,
    vmin: float | None,
    vmax: float | None,
    max_labels: int,
    n_bins: int,
    n_distinct: int | None = None,
    quantiles: Sequence[float] | None = None,
) -> Attribute:
    n_distinct = len(distinct) if n_distinct is None else n_distinct
    if numeric and not (integral and n_distinct <= max_labels):
        assert vmin is not None and vmax is not None
        edges = _bin_edges(vmin, vmax, n_bins, integral, quantiles)
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
    binning: str = "width",
    format: str | None = None,
) -> Domain:
    """Derive a domain from data — an explicit opt-in that weakens privacy (see the warning).

    Strings become categorical attributes labelled by their sorted distinct values; integral
    numbers with at most ``max_labels`` distinct values become ordinal attributes labelled by their
    values; other numbers (more than ``max_labels`` distinct integers, or fractions) get
    ``n_bins`` bins between their minimum and maximum: equal width (``binning="width"``) or
    at the data's quantiles (``binning="quantile"``, about equal counts; ties merged, so
    possibly fewer bins). Files (CSV/Parquet) are scanned by DuckDB, never loaded into pandas.
    Always emits an :class:`InferredDomainWarning` (which values occur, and the bin edges, are
    not covered by the privacy guarantee).

    Examples
    --------
    >>> import warnings, pandas as pd
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     dom = infer_domain(pd.DataFrame({"age": range(17, 91)}), n_bins=4, binning="quantile")
    >>> dom["age"].bins
    (17.0, 35.0, 53.0, 72.0, 90.0)
    """
    if binning not in BINNINGS:
        raise DomainError(f"binning must be one of {', '.join(map(repr, BINNINGS))}, got {binning!r}")
    if int(n_bins) < 1:
        raise DomainError(f"n_bins must be at least 1, got {n_bins!r}")
    probs = [i / n_bins for i in range(1, n_bins)]
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
                qs = np.quantile(v, probs, method="inverted_cdf").tolist() if binning == "quantile" else None
                attrs.append(
                    _infer_attribute(
                        c, distinct, True, integral, float(v.min()), float(v.max()),
                        max_labels, n_bins, len(np.unique(v)), qs,
                    )
                )  # fmt: skip
            else:
                distinct = pd.unique(s).tolist()
                attrs.append(_infer_attribute(c, distinct, False, False, None, None, 0, 0))
        return Domain(attrs)
    con = connect(None)
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
                qs = None
                if binning == "quantile" and not (integral and n_dist <= max_labels) and probs:
                    (qs,) = con.execute(
                        f"SELECT quantile_disc({x}, {probs!r}) FROM {src} WHERE NOT isinf({x})"
                    ).fetchone()
                attrs.append(
                    _infer_attribute(
                        c, distinct, True, integral, float(vmin), float(vmax), max_labels, n_bins,
                        int(n_dist), qs,
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
