"""From a data argument to a counting engine, reading raw values or codes.

``encoding`` says what the data hold:

* ``"codes"`` — integer codes ``0..size-1`` per attribute (the private-pgm convention);
* ``"raw"`` — the values themselves: labels matched as text, numbers put into the domain's
  bins (:func:`dpmatrix._encode.encode_frame` for a DataFrame, SQL inside DuckDB for a file),
  with ``on_unknown`` for values the domain does not cover — exactly as ``dpmatrix release``;
* ``"auto"`` (the default of :func:`dpmatrix.measure` and of ``dpmatrix release``) — codes when
  no attribute has labels or bins (then both readings are the same); otherwise the reading the
  data fit. When the data fit *both* readings and they disagree (ordinal labels ``"1".."5"`` and
  values 1..4; bins ``[0, 18, 30, ...)`` and small numbers), ``"auto"`` refuses and asks for
  ``encoding="raw"`` or ``"codes"``: codes are never taken for labels, or labels for codes,
  silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._defaults import ENCODINGS
from .._domain import Domain, with_missing
from .._encode import encode_frame, mapping_kind
from ..errors import DataError
from ._duckdb_engine import DuckDBEngine, detect_format
from ._numpy_engine import NumpyEngine
from ._projected import ProjectedEngine, subdomain
from ._spark_engine import SparkEngine

__all__ = ["ENCODINGS", "engine_for"]


def _sub_policy(on_unknown, sub: Domain):
    """``on_unknown`` restricted to the attributes of a sub-domain."""
    if isinstance(on_unknown, Mapping):
        return {k: v for k, v in on_unknown.items() if k in sub}
    return on_unknown


def _has_mapping(domain: Domain) -> bool:
    return any(mapping_kind(a) != "codes" for a in domain.attributes)


def _ambiguous(columns: list[str]) -> DataError:
    return DataError(
        f"the data can be read both as raw values (labels / bins of the domain) and as codes "
        f"0..size-1, and the two readings differ in column(s) {', '.join(map(repr, columns))}: "
        "say which with encoding='raw' (values are labels or numbers to bin) or "
        "encoding='codes' (values are codes 0..size-1)"
    )


def _both_failed(raw_error: DataError, codes_error: DataError) -> DataError:
    """The raw reading's problems (a domain with labels or bins is written for raw values); the
    codes reading is named in one line, its own problems left out (they would only repeat the
    same rows as out-of-range codes)."""
    if str(raw_error) == str(codes_error):  # e.g. a missing column: the same in both readings
        return raw_error
    return DataError(
        f"{raw_error}\n(read as codes 0..size-1 instead, with encoding='codes', the data do not "
        "fit either)"
    )


def _frame_engine(data, domain: Domain, encoding: str, on_unknown, na_values=()) -> NumpyEngine:
    if encoding == "codes" or (encoding == "auto" and not _has_mapping(domain)):
        return NumpyEngine(data, domain)
    if not isinstance(data, pd.DataFrame):
        raise DataError(
            f"encoding={encoding!r} needs a pandas DataFrame with named columns (an array can "
            "only hold codes: pass encoding='codes')"
        )
    if encoding == "raw":
        return NumpyEngine(encode_frame(data, domain, on_unknown=on_unknown, na_values=na_values), domain)
    try:
        raw = encode_frame(data, domain, on_unknown=on_unknown, na_values=na_values)
    except DataError as exc:
        raw_error = exc
        raw = None
    try:
        codes = NumpyEngine(data, domain)
    except DataError as exc:
        if raw is None:
            raise _both_failed(raw_error, exc) from None
        return NumpyEngine(raw, domain)
    if raw is None:
        return codes
    if len(raw) != codes.n_records:  # rows dropped for a missing value: only the raw reading
        raise _ambiguous([a.name for a in domain.attributes if a.missing == "drop"])
    differ = [
        a.name for i, a in enumerate(domain.attributes)
        if not np.array_equal(raw[a.name].to_numpy(), codes.codes(i))
    ]  # fmt: skip
    if differ:
        raise _ambiguous(differ)
    return codes


def _spark_engine(data, domain: Domain, encoding: str, on_unknown, options: Mapping[str, Any]) -> SparkEngine:
    """The Spark engine with the same ``encoding`` rules as :func:`_file_engine` (one session for
    both readings under ``"auto"``; the engine returned stops it when dpmatrix started it)."""
    from ._spark_engine import spark_session

    opts = dict(options)
    master, conf = opts.pop("master", None), opts.pop("conf", None)
    if encoding == "codes" or (encoding == "auto" and not _has_mapping(domain)):
        return SparkEngine(data, domain, "codes", master=master, conf=conf, **opts)
    if encoding == "raw":
        return SparkEngine(data, domain, "raw", on_unknown=on_unknown, master=master, conf=conf, **opts)
    if type(data).__name__ == "DataFrame":  # a Spark DataFrame: its own session
        spark, owned = data.sparkSession, False
    elif opts.get("spark") is not None:
        spark, owned = opts["spark"], False
    else:
        spark, owned = spark_session(master, conf)
    opts.pop("spark", None)
    try:
        try:
            raw = SparkEngine(data, domain, "raw", on_unknown=on_unknown, spark=spark, **opts)
        except DataError as exc:
            raw_error, raw = exc, None
        try:
            codes = SparkEngine(data, domain, "codes", spark=spark, **opts)
        except DataError as exc:
            if raw is None:
                raise _both_failed(raw_error, exc) from None
            chosen = raw
        else:
            chosen = codes if raw is None else None
        if raw is not None and chosen is None:
            sets = [(i,) for i, a in enumerate(domain.attributes) if mapping_kind(a) != "codes"]
            a, b = raw.count(sets), codes.count(sets)
            differ = [domain.names[s[0]] for s in sets if not np.array_equal(a[s], b[s])]
            codes.close()  # not the session's owner: drops its cached codes only
            if differ:
                raise _ambiguous(differ)
            chosen = raw
    except BaseException:
        if owned:
            spark.stop()
        raise
    if owned:
        chosen.own_session()
    return chosen


def _file_engine(path, domain: Domain, encoding: str, on_unknown, options: Mapping[str, Any]) -> DuckDBEngine:
    if encoding == "codes" or (encoding == "auto" and not _has_mapping(domain)):
        return DuckDBEngine(path, domain, "codes", **options)
    if encoding == "raw":
        return DuckDBEngine(path, domain, "raw", on_unknown=on_unknown, **options)
    try:
        raw = DuckDBEngine(path, domain, "raw", on_unknown=on_unknown, **options)
    except DataError as exc:
        raw_error, raw = exc, None
    # the codes reading sees the same text as the raw one: "yes"/"T" sniffed as booleans by
    # DuckDB must not pass for codes 0/1
    text = {k: v for k, v in options.items() if k != "na_values"}
    if detect_format(path, options.get("format")) == "csv":
        text["csv_options"] = {"all_varchar": True, **(options.get("csv_options") or {})}
    try:
        codes = DuckDBEngine(path, domain, "codes", **text)
    except DataError as exc:
        if raw is None:
            raise _both_failed(raw_error, exc) from None
        return raw
    if raw is None:
        return codes
    # both readings fit: they are the same reading only if every attribute's counts agree
    sets = [(i,) for i, a in enumerate(domain.attributes) if mapping_kind(a) != "codes"]
    if raw.n_records != codes.n_records:
        raw.close()
        codes.close()
        raise _ambiguous([a.name for a in domain.attributes if a.missing == "drop"])
    a, b = raw.count(sets), codes.count(sets)
    differ = [domain.names[s[0]] for s in sets if not np.array_equal(a[s], b[s])]
    if differ:
        raw.close()
        codes.close()
        raise _ambiguous(differ)
    codes.close()
    return raw


def engine_for(
    data,
    domain: Domain,
    *,
    engine=None,
    encoding: str = "auto",
    on_unknown: str | Mapping[str, str] = "error",
    na_values: Sequence[str] = (),
    attributes: Iterable[int] | None = None,
    **duckdb_options: Any,
):
    """The counting engine for a data argument.

    Parameters
    ----------
    data : pandas.DataFrame, numpy.ndarray, str, pathlib.Path or engine
        Records in memory (counted by :class:`NumpyEngine`), a CSV/Parquet path (counted inside
        DuckDB, :class:`DuckDBEngine`), or an engine (used as is).
    domain : Domain
    engine : engine or {"numpy", "duckdb", "spark"}, optional
        An engine object (used as is), or a name: ``"spark"`` counts a Spark DataFrame, a
        Parquet/CSV path, glob or table name in Apache Spark (``local[*]`` or the active session;
        build a :class:`~.spark_engine.SparkEngine` to choose a cluster). A Spark DataFrame as
        ``data`` goes to Spark without being named.
    encoding : {"auto", "raw", "codes"}, default "auto"
        What the data hold (see the module docstring); ignored for an engine.
    on_unknown : str or mapping, default "error"
        Raw values the domain does not cover: ``"error"``, ``"clip"`` or ``"other"``, or per
        column (:func:`dpmatrix._encode.encode_frame`).
    na_values : sequence of str, optional
        Text markers that mean "missing" besides empty cells, None, NaN and NULL (raw values).
    attributes : iterable of int, optional
        Positions of the attributes to read (those a release uses): only their columns are read
        and validated, and the engine answers in positions of the full ``domain``
        (:class:`~.projected.ProjectedEngine`). Ignored for arrays and engine objects.
    **duckdb_options
        Passed to :class:`DuckDBEngine` for a file (``format``, ``csv_options``, ...), or to
        :class:`~.spark_engine.SparkEngine` with ``engine="spark"`` (``master``, ``conf``,
        ``format``, ``executor_timeout``, ...).

    Returns
    -------
    engine
        ``.count(attr_sets)``, ``.n_records``, ``.domain``.

    Examples
    --------
    >>> import pandas as pd, dpmatrix as dm
    >>> dom = dm.Domain.from_dict({"sex": {"labels": ["F", "M"]}})
    >>> eng = engine_for(pd.DataFrame({"sex": ["M", "F", "M"]}), dom)
    >>> int(eng.count([(0,)])[(0,)][1])
    2
    """
    if encoding not in ENCODINGS:
        raise DataError(f"encoding must be one of {', '.join(map(repr, ENCODINGS))}, got {encoding!r}")
    if engine is not None and not isinstance(engine, str):
        data, engine = engine, None
    if engine is not None and engine not in ("numpy", "duckdb", "spark"):
        raise DataError(f"engine must be 'numpy', 'duckdb' or 'spark', got {engine!r}")
    is_spark_df = type(data).__name__ == "DataFrame" and type(data).__module__.startswith("pyspark.sql")
    named = isinstance(data, (pd.DataFrame, str, Path)) or is_spark_df
    if attributes is not None and named:
        sub, pos = subdomain(domain, attributes)
        if len(pos) < len(domain):
            if encoding == "auto":
                # the reading ("raw" or "codes") is told by every column when all of them fit
                # one (unchanged from reading the whole domain); only when some column fits
                # neither is the release read from the attributes it uses alone
                # (an unused attribute never drops rows: its "drop" is read as "error" here)
                unused = {a.name: "error" for i, a in enumerate(domain.attributes)
                          if i not in pos and a.missing == "drop"}  # fmt: skip
                full = with_missing(domain, unused) if unused else domain
                try:
                    eng = engine_for(data, full, engine=engine, encoding=encoding, on_unknown=on_unknown,
                                     na_values=na_values, **duckdb_options)
                except DataError:
                    pass
                else:
                    return ProjectedEngine(eng, domain, range(len(domain))) if unused else eng
            inner = engine_for(
                data, sub, engine=engine, encoding=encoding, on_unknown=_sub_policy(on_unknown, sub),
                na_values=na_values, **duckdb_options,
            )  # fmt: skip
            return ProjectedEngine(inner, domain, pos)
    if engine == "spark" or is_spark_df:
        # the same encoding rules as for files; the options go to SparkEngine (master, conf, ...)
        return _spark_engine(data, domain, encoding, on_unknown, {**duckdb_options, "na_values": tuple(na_values)})
    if engine == "numpy" and isinstance(data, (str, Path)):
        raise DataError("engine='numpy' counts a DataFrame in memory; load the file first or use 'duckdb'")
    if isinstance(data, (pd.DataFrame, np.ndarray)):
        return _frame_engine(data, domain, encoding, on_unknown, na_values)
    if isinstance(data, (str, Path)):
        opts = dict(duckdb_options, na_values=tuple(na_values)) if na_values else duckdb_options
        return _file_engine(data, domain, encoding, on_unknown, opts)
    if hasattr(data, "count") and hasattr(data, "n_records"):
        if getattr(data, "domain", domain) != domain:
            raise DataError("the engine was built for a different domain than the plan's")
        return data
    raise DataError(
        f"cannot measure data of type {type(data).__name__}: pass a pandas DataFrame (raw values "
        "or codes), a path to a CSV/Parquet file, or a data engine"
    )
