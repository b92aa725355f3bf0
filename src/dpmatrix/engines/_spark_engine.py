"""Apache Spark counting engine: marginals of a Spark DataFrame, table or Parquet/CSV lake.

The records stay in Spark. Encoding and validation are Spark SQL; counting is one Spark job for
any number of marginal tables (:mod:`.spark_count`: each task counts its partition into every
table with the numpy kernel, the tasks' tables are summed by key across the cluster). The only
data that come back to the driver are

* one aggregate row of validation counts (rows, missing values, unknown values per column) and
  the fingerprint sum (:meth:`SparkEngine.fingerprint`),
* the summed count tables, in pieces of at most 2^20 cells, and
* only when the data do not match the domain, at most :data:`~.base.MAX_SHOWN` distinct offending
  values per column for the error message — exactly what the numpy and DuckDB engines show —
  and, for a source of several files, the names of at most three files holding them.

Raw values are mapped to codes with Spark Column expressions that follow the rules of
:func:`dpmatrix._encode.encode_column` (labels by their string form, left-closed bins with the last
bin closed, integer codes, and the ``on_unknown`` policies ``error``/``clip``/``other``), and
validation produces the same :class:`~dpmatrix.errors.DataError` messages (the message functions
are shared in :mod:`dpmatrix.engines._base` and :mod:`dpmatrix._encode`).

CSV files are read with every column as text (no type inference: ``yes``/``no`` stay strings,
``"01"`` stays ``"01"`` and matches a label ``"01"``, not ``"1"``); bins and integer codes parse
the text as a number. Offending values in error messages are shown as numbers when every value
of the column is a number (as a type-sniffing reader such as pandas or DuckDB would show them),
otherwise as text.

Session: an existing :class:`pyspark.sql.SparkSession` (or the one a DataFrame belongs to) is
used as given and never stopped; otherwise one is started on ``master`` (default ``local[*]``;
``spark://host:7077``, ``yarn``, ``k8s://…``) with extra ``conf``, quiet logging, and stopped by
:meth:`SparkEngine.close`. Nothing about the session (host, path) is recorded by dpmatrix.

Why the driver never serializes the work: encoding, validation and counting run in the executors;
the driver receives tables no larger than the dense marginals it must hold anyway. Every Spark
action runs in a job group watched by the calling thread: no executor for ``executor_timeout``
seconds cancels it (the wait is reported after 20 s), Ctrl-C cancels it, and Spark's exceptions
become one-line :class:`~dpmatrix.errors.DataError` errors (:func:`spark_error`).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np

from .._domain import Attribute, Domain
from .._encode import (
    UNKNOWN_HINT,
    mapping_kind,
    problem_messages,
    remap_message,
    resolve_policies,
    warn_remapped,
)
from .._values import NUMBER_PATTERN, LabelIndex
from ..errors import DataError
from . import _bincount as bincount
from . import _spark_count as spark_count
from ._base import (
    MAX_SHOWN,
    AttrSet,
    begin_count,
    check_source_args,
    duplicate_columns_message,
    missing_columns_message,
    non_integer_message,
    null_message,
    out_of_range_message,
    raise_problems,
)
from ._spark_console import LOG4J2, start_session
from ._spark_count import add_pieces, count_partition, piece_array, plan_passes

__all__ = ["SparkEngine", "spark_session"]

DEFAULT_MASTER = "local[*]"
#: Cells of the marginal tables one counting pass holds per task (8 bytes each: 128 MiB).
DEFAULT_MAX_CELLS = 1 << 24
#: Cells per piece of a task's tables sent to the reducers (at most 8 MiB).
DEFAULT_PIECE_CELLS = 1 << 20
#: Seconds a job may wait for its first executor before it is cancelled (``executor_timeout``).
DEFAULT_EXECUTOR_TIMEOUT = 300.0
#: Seconds without executors before the wait is reported on stderr.
EXECUTOR_WARN_AFTER = 20.0
#: Seconds to wait for a TCP connection to a ``spark://`` master before giving up.
MASTER_CONNECT_TIMEOUT = 5.0
_PANDAS_WARNING = "PySpark does not yet fully support pandas"
T = TypeVar("T")
_CSV_SUFFIXES = (".csv", ".tsv", ".txt", ".csv.gz", ".tsv.gz", ".csv.bz2")
_PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")

PYSPARK_HINT = "install it with: pip install 'dpmatrix[spark]' (PySpark ships Spark itself)"
JAVA_HINT = (
    "Apache Spark needs Java 17 or newer and no 'java' was found (neither JAVA_HOME nor PATH): "
    "install a JDK/JRE 17+ (e.g. apt-get install openjdk-17-jre-headless, or brew install "
    "openjdk@17) or set JAVA_HOME"
)

# Spark's own log (start-up chatter, executors' task failures with Java frames) is silenced by
# spark_console.LOG4J2: dpmatrix reports failures itself, one line each (spark_error); fatal JVM
# errors still show.


# -- session --------------------------------------------------------------------------------------
def _import_pyspark():
    try:
        import pyspark  # noqa: F401
        from pyspark.sql import SparkSession
    except ImportError:
        raise DataError(f"engine='spark' needs PySpark, which is not installed: {PYSPARK_HINT}") from None
    return SparkSession


def _java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").exists():
        return True
    return shutil.which("java") is not None


def _log4j2_file() -> str:
    path = Path(tempfile.gettempdir()) / f"dpmatrix-spark-log4j2-{os.getpid()}.properties"
    if not path.exists():
        path.write_text(LOG4J2)
        atexit.register(lambda: path.unlink(missing_ok=True))
    return path.as_uri()


def standalone_addresses(master: str) -> list[tuple[str, int]]:
    """``(host, port)`` of every master of a ``spark://h1:p1,h2:p2`` URL (port 7077 by
    default); empty for other masters (``local``, ``yarn``, ``k8s://``).

    Examples
    --------
    >>> standalone_addresses("spark://a:7077,b")
    [('a', 7077), ('b', 7077)]
    """
    if not master.startswith("spark://"):
        return []
    out = []
    for part in master[len("spark://") :].split(","):
        host, _, port = part.strip().rstrip("/").rpartition(":") if ":" in part else (part, "", "")
        host = host or part.strip()
        out.append((host.strip("[]"), int(port) if port.isdigit() else 7077))
    return out


def check_master_reachable(master: str, timeout: float = MASTER_CONNECT_TIMEOUT) -> None:
    """Raise a one-line :class:`DataError` when no master of a ``spark://`` URL accepts a TCP
    connection within ``timeout`` seconds (Spark itself retries for over a minute)."""
    reasons = []
    for host, port in standalone_addresses(master):
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
    if reasons:
        raise DataError(
            f"cannot reach the Spark master at {master} ({'; '.join(reasons)}): check that the "
            "master is running and the host and port are right"
        )


@contextmanager
def quiet_pyspark() -> Iterator[None]:
    """Silence PySpark's warning that it does not fully support pandas >= 3: dpmatrix exchanges
    only Arrow data with Spark, never pandas objects, so the warning does not concern it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_PANDAS_WARNING, category=FutureWarning)
        yield


def spark_session(
    master: str | None = None, conf: Mapping[str, str] | None = None
) -> tuple[Any, bool]:
    """The Spark session to count in, and whether we started it (then we stop it).

    An active session in this process is used as given (Spark allows one per process); a
    ``master`` different from its master is an error. Otherwise a session is started on
    ``master`` (default ``local[*]``) with ``conf`` and quiet logging.

    Raises
    ------
    DataError
        One line saying what to install when PySpark or Java is missing, or why Spark failed.
    """
    with quiet_pyspark():
        return _spark_session(master, conf)


def _spark_session(master: str | None, conf: Mapping[str, str] | None) -> tuple[Any, bool]:
    SparkSession = _import_pyspark()
    active = SparkSession.getActiveSession()
    if active is not None:
        running = active.sparkContext.master
        if master is not None and master != running:
            raise DataError(
                f"a Spark session is already running in this process on master {running!r}; "
                f"cannot start another on {master!r} (pass spark=<that session> or stop it first)"
            )
        return active, False
    if not _java_available():
        raise DataError(JAVA_HINT)
    check_master_reachable(master or DEFAULT_MASTER)
    opts = {
        "spark.master": master or DEFAULT_MASTER,
        "spark.app.name": "dpmatrix",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    opts.update({str(k): str(v) for k, v in (conf or {}).items()})
    log = f"-Dlog4j2.configurationFile={_log4j2_file()}"
    opts["spark.driver.extraJavaOptions"] = (
        opts.get("spark.driver.extraJavaOptions", "") + " " + log
    ).strip()
    try:
        spark = start_session(opts)  # the JVM's start-up chatter filtered out of stderr
    except Exception as exc:  # py4j / PySparkRuntimeError: JVM or context did not start
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DataError(
            f"Apache Spark failed to start a session on master {master or DEFAULT_MASTER!r}: {first}"
        ) from None
    spark.sparkContext.setLogLevel("FATAL")
    sc = spark.sparkContext
    # The executors' Python: spark.pyspark.python, else $PYSPARK_PYTHON, else (local master)
    # this interpreter; PySpark's own default is whatever "python3" is on the PATH.
    chosen = opts.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON")
    if chosen:
        sc.pythonExec = chosen
    elif sc.master.startswith("local"):
        sc.pythonExec = sys.executable
    return spark, True


# -- errors -----------------------------------------------------------------------------------------
_ERROR_CLASS = re.compile(r"\[([A-Z][A-Z0-9_.]+)\] (.*?)(?: SQLSTATE: \w+|$)", re.MULTILINE)
_FILE = re.compile(r"(?:reading|in) file (\S+?)\.?(?:\s|$)")
_TYPE_DRIFT = re.compile(
    r"Parquet column \[?([^\]\s]+)\]?\. Expected Spark type (\w+), actual Parquet type (\w+)"
)


def spark_error(exc: BaseException, what: str) -> DataError:
    """One readable line for an exception Spark raised while ``what``, instead of pages of Java
    frames: Spark's own error class and message (the innermost one that is not a generic job
    abort), with the part file named when Spark names it.

    Examples
    --------
    >>> e = RuntimeError("o1.collect.\\n: org.apache.spark.SparkException: Job aborted ... "
    ...     "[FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH] Encountered error while reading "
    ...     "file file:///lake/p-1.parquet. Data type mismatches when reading Parquet column [a0]. "
    ...     "Expected Spark type tinyint, actual Parquet type INT64. SQLSTATE: KD001")
    >>> print(spark_error(e, "counting"))
    part file file:///lake/p-1.parquet stores column 'a0' as INT64 where the other part files (the schema Spark read) have tinyint: the part files of the data disagree in type; write them with one type per column
    """
    text = str(exc)
    found = [(c, m.strip()) for c, m in _ERROR_CLASS.findall(text)]
    specific = [(c, m) for c, m in found if not m.startswith("Job aborted")]
    fmatch = _FILE.search(text)
    file = fmatch.group(1) if fmatch else None
    drift = _TYPE_DRIFT.search(text)
    if drift and file:
        col, expected, actual = drift.groups()
        return DataError(
            f"part file {file} stores column {col!r} as {actual} where the other part files (the "
            f"schema Spark read) have {expected}: the part files of the data disagree in type; "
            "write them with one type per column"
        )
    if specific:
        cls, msg = specific[-1]
        where = f" (file {file})" if file and file not in msg else ""
        return DataError(f"Spark failed {what}{where}: [{cls}] {msg}")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("at ")]
    detail = next((ln for ln in lines if "Exception:" in ln), lines[0] if lines else type(exc).__name__)
    where = f" (file {file})" if file else ""
    return DataError(f"Spark failed {what}{where}: {detail[:500]}")


# -- reading --------------------------------------------------------------------------------------
def _is_spark_dataframe(data: Any) -> bool:
    t = type(data)
    return t.__name__ == "DataFrame" and t.__module__.startswith("pyspark.sql")


def detect_spark_format(source: str, format: str | None) -> str:
    """``"csv"``, ``"parquet"`` or ``"table"`` from ``format`` or the suffix of ``source``."""
    if format is not None:
        f = format.lower()
        if f not in ("csv", "parquet", "table"):
            raise ValueError(f"format must be 'csv', 'parquet' or 'table', got {format!r}")
        return f
    name = source.lower().rstrip("/")
    if name.endswith(_CSV_SUFFIXES):
        return "csv"
    if name.endswith(_PARQUET_SUFFIXES):
        return "parquet"
    if "/" in source or "\\" in source or "*" in source:
        raise DataError(
            f"cannot tell the format of {source!r} from its suffix; pass format='csv' or "
            "format='parquet' (or format='table' for a table name)"
        )
    return "table"


def _spark_path(p: str) -> str:
    """The path Spark is given for ``p``: a remote URI as it is; a local path (or glob) checked
    with the DuckDB engine's messages and made absolute against this process's working folder —
    the JVM keeps the folder it was started in, which a long-lived session may no longer share
    with Python."""
    import glob

    if "://" in p:
        return p
    if any(ch in p for ch in "*?["):
        if not glob.glob(p):
            raise DataError(f"no data file matches {p!r}")
    elif not Path(p).exists():
        raise DataError(f"data file {p!r} does not exist")
    return os.path.abspath(p)


def _read(spark: Any, source: str, fmt: str, csv_options: Mapping[str, Any] | None) -> Any:
    from pyspark.errors import AnalysisException

    try:
        if fmt == "table":
            return spark.table(source)
        where = _spark_path(source)
        if fmt == "parquet":
            if csv_options:
                raise ValueError("csv_options apply to CSV files only")
            return spark.read.parquet(where)
        # RFC 4180: a quote inside a quoted field is doubled ("" ), as numpy and DuckDB read it
        opts = {"header": "true", "inferSchema": "false", "mode": "PERMISSIVE", "escape": '"'}
        opts.update({k: str(v) for k, v in (csv_options or {}).items()})
        return spark.read.options(**opts).csv(where)  # every column is text
    except AnalysisException as exc:
        first = (str(exc).strip().splitlines() or ["?"])[0]
        what = "table" if fmt == "table" else "data"
        raise DataError(f"Spark cannot read the {what} {source!r}: {first}") from None


# -- column expressions -----------------------------------------------------------------------------
def type_class(data_type: Any) -> str:
    """``int``/``float``/``bool``/``str``/``other`` (atomic) or ``nested`` for a Spark type."""
    from pyspark.sql import types as T

    if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return "int"
    if isinstance(data_type, (T.FloatType, T.DoubleType, T.DecimalType)):
        return "float"
    if isinstance(data_type, T.BooleanType):
        return "bool"
    if isinstance(data_type, (T.StringType, T.CharType, T.VarcharType)):
        return "str"
    if isinstance(data_type, (T.ArrayType, T.MapType, T.StructType, T.BinaryType)):
        return "nested"
    return "other"


def _number(c: Any, cls: str) -> Any:
    """DOUBLE value of a column (NULL when missing, not a number, NaN or infinite): the Spark twin
    of :func:`dpmatrix._values.parse_number` (text must match ``NUMBER_PATTERN``)."""
    from pyspark.sql import functions as F

    if cls == "int":
        return c.cast("double")
    if cls == "bool":
        return F.lit(None).cast("double")
    if cls == "float":
        x = c.cast("double")
    else:
        t = F.trim(c.cast("string"))
        x = F.when(t.rlike(f"^(?:{NUMBER_PATTERN})$"), t.try_cast("double"))
    bad = F.isnan(x) | (F.abs(x) == float("inf"))
    return F.when(bad, F.lit(None).cast("double")).otherwise(x)


def _date(c: Any, cls: str, fmt: str) -> Any:
    """The date a value stands for (NULL when not a date): the Spark twin of
    :func:`dpmatrix._dates.day_of` — text by the same regular expression (the attribute's format,
    else ISO), the date built from its three groups; a typed date or timestamp by its date (a
    timestamp in the session's time zone: set ``spark.sql.session.timeZone=UTC`` for the UTC date
    the other engines use)."""
    from pyspark.sql import functions as F

    from .._dates import ISO_FORMAT, date_pattern, group_order

    if cls == "other":
        return c.cast("date")
    text = c.cast("string")

    def one(f: str) -> Any:
        anchored = f"^(?:{date_pattern(f)})$"
        order = group_order(f)
        g = {k: F.regexp_extract(text, anchored, order.index(k) + 1) for k in "ymd"}
        iso = F.concat_ws("-", F.lpad(g["y"], 4, "0"), F.lpad(g["m"], 2, "0"), F.lpad(g["d"], 2, "0"))
        return F.when(text.rlike(anchored), F.to_date(F.try_to_timestamp(iso, F.lit("yyyy-MM-dd"))))

    return one(fmt) if fmt == ISO_FORMAT else F.coalesce(one(fmt), one(ISO_FORMAT))


def _date_bin(attr: Attribute, c: Any, cls: str) -> tuple[Any, Any]:
    """``(base, clip)`` Spark columns of a date attribute's bin (the twin of
    :func:`dpmatrix.engines._sql.sql_encode`'s): consecutive whole periods by one subtraction
    (months: ``12·Δyear + Δmonth``), other edges by comparisons with the day number."""
    from pyspark.sql import functions as F

    from .._dates import day_text, period_edges, period_start

    dates = attr.dates
    assert dates is not None
    e, k, p = dates.edges, dates.n_bins, dates.period
    d = _date(c, cls, dates.fmt)
    null_int = F.lit(None).cast("int")
    if period_start(e[0], p) == e[0] and period_edges(e[0], e[-1] - 1, p) == e:
        first = F.lit(day_text(e[0])).cast("date")
        if p in ("year", "quarter", "month"):
            months = (F.year(d) - F.year(first)) * 12 + (F.month(d) - F.month(first))
            idx = F.floor(months / {"year": 12, "quarter": 3, "month": 1}[p])
        else:
            idx = F.floor(F.datediff(d, first) / (7 if p == "week" else 1))
        base = F.when((idx >= 0) & (idx < k), idx.cast("int")).otherwise(null_int)
        clip = F.when(idx < 0, F.lit(0)).when(idx >= k, F.lit(k - 1)).otherwise(base)
        return base, clip
    v = F.datediff(d, F.lit("1970-01-01").cast("date"))
    base = F.when(v.isNull() | (v < e[0]) | (v >= e[-1]), null_int)
    for i in range(k - 1):
        base = base.when(v < e[i + 1], F.lit(i))
    base = base.otherwise(F.lit(k - 1))
    clip = F.when(v < e[0], F.lit(0)).when(v >= e[-1], F.lit(k - 1)).otherwise(base)
    return base, clip


def _missing(c: Any, cls: str, na_values: Sequence[str] = ()) -> Any:
    """Spark twin of :func:`dpmatrix._values.is_missing` (NULL, NaN, blank text, markers)."""
    from pyspark.sql import functions as F

    if cls == "float":
        return c.isNull() | F.isnan(c.cast("double"))
    if cls == "str":
        markers = list(dict.fromkeys(["", *(str(v).strip() for v in na_values)]))
        return c.isNull() | F.trim(c).isin(markers)
    return c.isNull()


def _integral(x: Any) -> Any:
    """``x`` is an integer (``rint`` keeps +-inf, which count as out of range like numpy)."""
    from pyspark.sql import functions as F

    return F.rint(x) == x


def _label_key(c: Any, cls: str) -> Any:
    """Spark twin of :func:`dpmatrix._encode.label_key`."""
    from pyspark.sql import functions as F

    if cls == "str":
        return c
    if cls == "bool":
        return F.when(c, F.lit("True")).when(~c, F.lit("False"))
    if cls == "int":
        return c.cast("string")
    if cls == "float":
        x = c.cast("double")
        return (
            F.when(F.isnan(x), F.lit(None).cast("string"))
            .when(_integral(x) & (F.abs(x) < 1e15), x.cast("long").cast("string"))
            .otherwise(x.cast("string"))
        )
    return c.cast("string")


def _label_code(attr: Attribute, c: Any, cls: str) -> Any:
    """The code of the label a value matches (by text, then by the number a label stands for:
    3.0 and "3.0" match label "3"), NULL when none."""
    from pyspark.sql import functions as F

    labels = F.array(*[F.lit(lab) for lab in attr.labels])  # type: ignore[union-attr]
    pos = F.array_position(labels, _label_key(c, cls))
    base = F.when(pos > 0, (pos - 1).cast("int"))
    nums = LabelIndex.of(attr.labels).numeric  # type: ignore[arg-type]
    if nums:
        v = _number(c, cls)
        by_number = F.lit(None).cast("int")
        for f, i in sorted(nums.items(), key=lambda kv: -kv[1]):
            by_number = F.when(v == F.lit(f), F.lit(i)).otherwise(by_number)
        base = F.coalesce(base, by_number)
    return base


def encode_column(
    attr: Attribute, c: Any, cls: str, policy: str, na_values: Sequence[str] = ()
) -> tuple[Any, Any, Any, Any]:
    """``(code, base, missing, drop)`` Spark Columns mapping raw values of ``attr`` as
    :func:`dpmatrix._encode.encode_column` does (the rule of :mod:`dpmatrix._values`): ``code`` is
    the final code (NULL when the row has none), ``base`` the code before clip/other,
    ``missing`` whether the raw value is missing, ``drop`` whether the row is left out
    (missing under ``missing="drop"``)."""
    from pyspark.sql import functions as F


    kind = mapping_kind(attr)
    null_int = F.lit(None).cast("int")
    clip = None
    if kind == "labels":
        base = _label_code(attr, c, cls)
    elif kind == "dates":  # a period label ("2015-12") first, else the period holding the date
        base, clip = _date_bin(attr, c, cls)
        label = _label_code(attr, c, cls)
        base, clip = F.coalesce(label, base), F.coalesce(label, clip)
    else:
        v = _number(c, cls)
        if kind == "bins":
            e = [float(x) for x in attr.bins]  # type: ignore[union-attr]
            k = len(e) - 1
            base = F.when(v.isNull() | (v < e[0]) | (v > e[-1]), null_int)
            for i in range(k - 1):
                base = base.when(v < e[i + 1], F.lit(i))
            base = base.otherwise(F.lit(k - 1))
            clip = F.when(v < e[0], F.lit(0)).when(v > e[-1], F.lit(k - 1)).otherwise(base)
        else:
            top = attr.n_values - 1
            ok = _integral(v)
            base = F.when(ok & (v >= 0) & (v <= top), v.cast("int"))
            clip = F.when(ok & (v < 0), F.lit(0)).when(ok & (v > top), F.lit(top)).otherwise(base)
    code = base
    if policy == "clip" and clip is not None:
        code = clip
    elif policy == "other" and attr.other_code is not None:
        code = F.coalesce(base, F.lit(attr.other_code))
    miss = _missing(c, cls, na_values)
    on_missing = {"category": F.lit(attr.missing_code), "drop": F.lit(0)}.get(attr.missing, null_int)
    code = F.when(miss, on_missing).otherwise(code)
    base = F.when(miss, null_int).otherwise(base)
    drop = miss if attr.missing == "drop" else F.lit(False)
    return code, base, miss, drop


def _code_type(size: int) -> str:
    return "byte" if size <= 128 else "short" if size <= 1 << 15 else "int"


# -- the engine -------------------------------------------------------------------------------------
class SparkEngine:
    """Count marginals of records held by Apache Spark (see the module docstring).

    Parameters
    ----------
    data
        A :class:`pyspark.sql.DataFrame`; a Parquet or CSV path, directory or glob (local,
        ``hdfs://``, ``s3a://``, …; format from the suffix or ``format``); or a table name of
        the session's catalog (``format="table"``, or any name without a path or suffix).
    domain
        The domain the records are coded against.
    encoding
        ``"codes"``: columns hold integer codes ``0..size-1`` (validated like
        :class:`~.numpy_engine.NumpyEngine`); ``"raw"``: raw values mapped through the domain's
        labels / bins with ``on_unknown`` as in :func:`dpmatrix._encode.encode_frame`.
    format
        ``"csv"``, ``"parquet"`` or ``"table"`` when the suffix does not tell.
    on_unknown
        ``"error"`` (default), ``"clip"``, ``"other"`` or ``{column: policy}`` (raw encoding).
    spark
        A :class:`pyspark.sql.SparkSession` to use as given (never stopped by dpmatrix).
    master, conf
        For a session dpmatrix starts itself: the master URL (default ``local[*]``;
        ``spark://host:7077``, ``yarn``, ``k8s://https://…``) and extra Spark settings
        (e.g. ``{"spark.executor.memory": "8g"}``).
    strategy
        ``"one_pass"`` (default): one Spark job counts every requested table — each task counts
        its partition's rows into all the tables of the pass with the numpy kernel
        (:mod:`.spark_count`), the per-task tables are summed by key across the cluster and
        only the summed tables reach the driver. Tables beyond ``max_cells`` are split into
        several passes; a single table larger than ``max_cells`` is counted by ``"keys"``.
        ``"keys"`` (every row emits one BIGINT key ``offset(set) + cell`` per set of a batch
        of ``batch_size`` sets, counted by one ``GROUP BY`` per batch) and ``"grouping_sets"``
        (Spark's ``GROUPING SETS``) are Spark SQL only: one scan per batch of sets.
    batch_size
        Attribute sets per Spark job for ``"keys"`` / ``"grouping_sets"`` (at most 62).
    max_cells
        Cell budget of a counting pass: a task holds ``8 * max_cells`` bytes of tables at most
        (default ``2**24`` cells, 128 MiB).
    executor_timeout
        Seconds a Spark job may wait without any executor before it is cancelled with a
        :class:`DataError` (the wait is reported on stderr after 20 s). Default 300.
    cache
        Persist the compact code columns (``MEMORY_AND_DISK``) while a count needs more than
        one scan (several passes, or the SQL strategies), so the source is parsed once for
        the codes (default ``True``).
    csv_options
        Extra options of Spark's CSV reader, e.g. ``{"sep": ";"}``.

    Examples
    --------
    >>> eng = SparkEngine("lake/people/*.parquet", domain, encoding="raw")  # doctest: +SKIP
    >>> eng.count([(0, 1)])[(0, 1)].sum() == eng.n_records                  # doctest: +SKIP
    True
    >>> eng.close()                                                         # doctest: +SKIP
    """

    def __init__(
        self,
        data: Any,
        domain: Domain,
        encoding: Literal["codes", "raw"] = "codes",
        *,
        format: Literal["csv", "parquet", "table"] | None = None,
        on_unknown: str | Mapping[str, str] = "error",
        spark: Any = None,
        master: str | None = None,
        conf: Mapping[str, str] | None = None,
        batch_size: int = 16,
        strategy: Literal["one_pass", "keys", "grouping_sets"] = "one_pass",
        max_cells: int = DEFAULT_MAX_CELLS,
        executor_timeout: float = DEFAULT_EXECUTOR_TIMEOUT,
        cache: bool = True,
        csv_options: Mapping[str, Any] | None = None,
        na_values: Sequence[str] = (),
    ):
        check_source_args(domain, encoding)
        self._domain = domain
        self.encoding = encoding
        if strategy not in ("one_pass", "keys", "grouping_sets"):
            raise ValueError(f"strategy must be 'one_pass', 'keys' or 'grouping_sets', got {strategy!r}")
        self.strategy = strategy
        self.batch_size = min(max(1, int(batch_size)), 62)
        self.max_cells = max(1, int(max_cells))
        self.piece_cells = DEFAULT_PIECE_CELLS
        self.executor_timeout = float(executor_timeout)
        self.cache = bool(cache)
        #: Spark jobs run by this engine (validation, counting, error details).
        self.jobs = 0
        policies = resolve_policies(domain, on_unknown) if encoding == "raw" else {}
        self._codes = None
        self._owned = False
        self._cached = False
        self._sum_hash = 0
        self.source = data if isinstance(data, (str, Path)) else None
        if _is_spark_dataframe(data):
            if master is not None or conf:
                raise ValueError("master/conf apply to a session dpmatrix starts, not to a DataFrame")
            df, self._spark, self._csv = data, data.sparkSession, False
        else:
            if not isinstance(data, (str, Path)):
                raise DataError(
                    f"the Spark engine reads a Spark DataFrame, a Parquet/CSV path or a table "
                    f"name, got {type(data).__name__}"
                )
            source = str(data)
            fmt = detect_spark_format(source, format)
            if spark is not None:
                self._spark = spark
            else:
                self._spark, self._owned = spark_session(master, conf)
            self._csv = fmt == "csv"
            try:  # Parquet schema inference is a Spark job: watched like the others
                df = self._run("reading the schema", functools.partial(_read, self._spark, source, fmt, csv_options))
            except BaseException:
                self.close()
                raise
        try:
            with quiet_pyspark():
                self._prepare(df, policies, tuple(na_values))
        except BaseException:
            self.close()
            raise

    # -- validation and encoding ----------------------------------------------------------------
    def _prepare(self, df: Any, policies: Mapping[str, str], na_values: Sequence[str] = ()) -> None:
        from pyspark.sql import functions as F

        names = list(self._domain.names)
        have = list(df.columns)
        missing = [n for n in names if n not in have]
        # Spark's CSV reader renames a repeated header name to name + its position ("sex3")
        dups = [n for n in missing if any(h == f"{n}{i}" for i, h in enumerate(have))]
        if dups:
            raise DataError(duplicate_columns_message(dups))
        if missing:
            raise DataError(missing_columns_message(missing, have))
        classes = {n: type_class(df.schema[n].dataType) for n in names}
        nested = [f"column {n!r} has Spark type {df.schema[n].dataType.simpleString()}, not a "
                  "number or text" for n in names if classes[n] == "nested"]  # fmt: skip
        raise_problems(nested)
        df = df.select(*[F.col(f"`{n}`") for n in names])
        self._types = [df.schema[n].dataType.simpleString() for n in names]
        try:
            self._n_files = len(df.inputFiles()) if self.source is not None else 0
        except Exception:  # a source without files
            self._n_files = 0
        cols = {n: F.col(f"`{n}`") for n in names}
        if self.encoding == "codes":
            codes = self._validate_codes(df, cols, classes)
        else:
            codes, keep = self._validate_raw(df, cols, classes, policies, na_values)
            if keep is not None:
                df = df.where(keep)
        self._codes = df.select(
            *[
                c.cast(_code_type(a.size)).alias(f"c{i}")
                for i, (c, a) in enumerate(zip(codes, self._domain.attributes))
            ]
        )

    def _numeric_text(self, cls: str, n_nonnumeric: int) -> bool:
        """Show a text column's offending values as numbers (CSV, every value a number)."""
        return self._csv and cls == "str" and n_nonnumeric == 0

    def _count_nonnumeric(self, c: Any, cls: str) -> Any:
        """Rows whose text is not a number (only needed for CSV text columns)."""
        from pyspark.sql import functions as F

        if not (self._csv and cls == "str"):
            return F.lit(0)
        return F.count_if(c.isNotNull() & c.try_cast("double").isNull())

    def _distinct(self, df: Any, value: Any, where: Any) -> tuple[list[Any], int]:
        """At most MAX_SHOWN smallest distinct offending values, and how many there are."""
        from pyspark.sql import functions as F

        sel = df.where(where).select(value.alias("v")).where(F.col("v").isNotNull())
        rows = self._run("offending values", sel.distinct().orderBy("v").limit(MAX_SHOWN).collect)
        (nd,) = self._run("offending values", sel.agg(F.countDistinct("v")).first)
        return [r[0] for r in rows], int(nd)

    def _files(self, df: Any, where: Any) -> str:
        """`` (in file …)``: the files holding rows ``where`` (at most 3 named), or ``""`` when
        the data are not several files (one file is named by the caller already)."""
        from pyspark.sql import functions as F

        if self._n_files < 2:
            return ""
        sel = df.where(where).select(F.input_file_name().alias("f")).where(F.col("f") != "").distinct()
        files = sorted(r[0] for r in self._run("finding the offending files", sel.limit(4).collect))
        if not files:
            return ""
        more = " and more" if len(files) > 3 else ""
        return f" (in file{'s' if len(files) > 1 else ''} {', '.join(files[:3])}{more})"

    def _aggregate(self, df: Any, aggs: list[Any]) -> Any:
        """One scan: the validation counts ``aggs`` and the fingerprint sum (see
        :meth:`fingerprint`); keeps the sum and returns the counts' row."""
        from pyspark.sql import functions as F

        names = list(self._domain.names)
        hashed = F.xxhash64(*[F.col(f"`{n}`") for n in names]).cast("decimal(20,0)")
        res = self._run("validating the data", df.agg(*aggs, F.sum(hashed)).first)
        self._sum_hash = int(res[-1] or 0) % (1 << 64)
        return res

    def _value_counts(self, df: Any, value: Any, where: Any) -> tuple[list[Any], int]:
        """The most frequent offending values with their rows (as the pandas path shows them)."""
        from pyspark.sql import functions as F

        sel = df.where(where).select(value.alias("v")).where(F.col("v").isNotNull())
        top = sel.groupBy("v").count().orderBy(F.col("count").desc(), F.col("v")).limit(MAX_SHOWN)
        vals = [(r[0], int(r[1])) for r in self._run("offending values", top.collect)]
        (nd,) = self._run("offending values", sel.agg(F.countDistinct("v")).first)
        return vals, int(nd)

    def _validate_codes(self, df: Any, cols: Mapping[str, Any], classes: Mapping[str, str]) -> list[Any]:
        """Same checks and messages as the numpy engine, as one aggregate job."""
        from pyspark.sql import functions as F

        conds = []
        aggs = [F.count(F.lit(1))]
        for a in self._domain.attributes:
            c, cls = cols[a.name], classes[a.name]
            x = _number(c, cls)
            null = _missing(c, cls)
            bad = ~null & (x.isNull() | ~_integral(x))
            out = ~null & _integral(x) & ((x < 0) | (x > a.size - 1))
            conds.append((c, cls, x, null, bad, out))
            aggs += [F.count_if(w) for w in (null, bad, out)] + [self._count_nonnumeric(c, cls)]
        res = self._aggregate(df, aggs)
        problems: list[str] = []
        codes = []
        for j, (a, (c, cls, x, null, bad, out)) in enumerate(zip(self._domain.attributes, conds)):
            n_null, n_bad, n_out, n_nonnum = (int(v) for v in res[1 + 4 * j : 5 + 4 * j])
            if n_null:
                problems.append(null_message(a.name, n_null) + self._files(df, null))
            if n_bad:
                # a CSV file's offending text is shown as written, as the numpy and DuckDB readers show it
                numeric = cls in ("int", "float", "bool") or (not self._csv and self._numeric_text(cls, n_nonnum))
                vals, nd = self._distinct(df, x if numeric else c.cast("string"), bad)
                problems.append(non_integer_message(a.name, n_bad, vals, nd) + self._files(df, bad))
            if n_out:
                vals, nd = self._distinct(df, x, out)
                problems.append(out_of_range_message(a.name, a.size, n_out, vals, nd) + self._files(df, out))
            codes.append(x.cast("int"))
        raise_problems(problems)
        self._n = int(res[0])
        return codes

    def _validate_raw(
        self,
        df: Any,
        cols: Mapping[str, Any],
        classes: Mapping[str, str],
        policies: Mapping[str, str],
        na_values: Sequence[str] = (),
    ) -> tuple[list[Any], Any]:
        from pyspark.sql import functions as F


        encs = [
            encode_column(a, cols[a.name], classes[a.name], policies[a.name], na_values)
            for a in self._domain.attributes
        ]
        drops = [d for a, (_, _, _, d) in zip(self._domain.attributes, encs) if a.missing == "drop"]
        keep = None
        for d in drops:
            keep = ~d if keep is None else keep & ~d
        aggs = [F.count_if(keep) if keep is not None else F.count(F.lit(1))]
        for a, (code, base, miss, _) in zip(self._domain.attributes, encs):
            c = cols[a.name]
            aggs += [
                F.count_if(code.isNull() & miss),
                F.count_if(code.isNull() & ~miss),
                F.count_if(base.isNull() & code.isNotNull() & ~miss),
                self._count_nonnumeric(c, classes[a.name]),
            ]
        res = self._aggregate(df, aggs)
        problems: list[str] = []
        remapped: list[str] = []
        for j, (a, (code, base, miss, _)) in enumerate(zip(self._domain.attributes, encs)):
            n_miss, n_unk, n_re, n_nonnum = (int(v) for v in res[1 + 4 * j : 5 + 4 * j])
            vals: list[Any] = []
            nd = 0
            if n_unk:
                c, cls = cols[a.name], classes[a.name]
                shown = _number(c, cls) if self._numeric_text(cls, n_nonnum) else c
                vals, nd = self._value_counts(df, shown, code.isNull() & ~miss)
            found = problem_messages(a, policies[a.name], n_miss, n_unk, vals, nd)
            where = ([code.isNull() & miss] if n_miss else []) + ([code.isNull() & ~miss] if n_unk else [])
            problems += [msg + self._files(df, w) for msg, w in zip(found, where)]
            if n_re:
                remapped.append(remap_message(a, policies[a.name], n_re))
        raise_problems(problems, "raw values do not match the domain", UNKNOWN_HINT)
        warn_remapped(remapped, stacklevel=5)
        self._n = int(res[0])
        return [code for code, _, _, _ in encs], keep

    # -- the engine interface -------------------------------------------------------------------
    @property
    def domain(self) -> Domain:
        return self._domain

    @property
    def n_records(self) -> int:
        return self._n

    @property
    def session(self) -> Any:
        """The Spark session counting the data."""
        return self._spark

    @property
    def preferred_batch(self) -> int:
        """Sets per :meth:`count` call wanted by ``dpmatrix.measure``: all of them for the
        one-pass strategy (one scan per call), ``batch_size`` for the SQL strategies."""
        return 1 << 30 if self.strategy == "one_pass" else self.batch_size

    def own_session(self) -> None:
        """Stop the engine's session on :meth:`close` (for a session started for it by
        :func:`~.data_source.engine_for`)."""
        self._owned = True

    def fingerprint(self) -> str:
        """Identity of the data read, computed by the executors in the validation scan.

        ``sha256`` of the column names, their Spark types, the number of rows and
        ``sum_rows xxhash64(row) mod 2**64`` — Spark's 64-bit xxHash of every row's values in
        the domain's columns, summed as exact decimals. The sum does not depend on row order,
        partitioning or file layout, so the same rows give the same fingerprint however they
        are split into part files; a changed, added or removed row changes it except with
        probability about ``2**-64`` (a checksum against accidents, not a commitment against
        an adversary who chooses the data). It covers only the domain's columns, as Spark
        reads them (a CSV and a Parquet copy of the same values differ in types, hence in
        fingerprint). No byte of the data is read by the driver.

        Returns
        -------
        str
            ``"spark-xxhash64-sum:"`` followed by 64 hex digits.
        """
        header = "|".join(f"{n}:{t}" for n, t in zip(self._domain.names, self._types))
        text = f"{header}|rows={self._n}|sum={self._sum_hash}"
        return "spark-xxhash64-sum:" + hashlib.sha256(text.encode()).hexdigest()

    def close(self) -> None:
        """Drop the cached codes; stop the Spark session if this engine started it."""
        self._uncache()
        self._codes = None
        if self._owned:
            self._owned = False
            try:
                self._spark.stop()
            except Exception:  # the JVM is already gone
                pass

    # -- running Spark jobs ------------------------------------------------------------------------
    def _executors(self) -> int:
        """Executors registered with the application (the driver not counted)."""
        try:
            infos = self._spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
            return max(0, len(infos) - 1)
        except Exception:
            return 1  # cannot tell: do not time out

    def _run(self, what: str, action: Callable[[], T]) -> T:
        r"""Run the Spark action ``action`` (``what`` it does, for messages) in a job group.

        The action runs in a helper thread while this thread watches it: on a cluster, a job
        without any executor is reported on stderr after :data:`EXECUTOR_WARN_AFTER` seconds
        and cancelled after ``executor_timeout`` seconds (:class:`DataError`); Ctrl-C cancels
        the job group and raises :class:`KeyboardInterrupt`. Spark's exceptions become one-line
        :class:`DataError`\ s (:func:`spark_error`)."""
        sc = self._spark.sparkContext
        group = f"dpmatrix-{uuid.uuid4().hex[:12]}"
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                sc.setJobGroup(group, f"dpmatrix: {what}", interruptOnCancel=True)
                box["result"] = action()
            except BaseException as exc:  # handed to the watching thread
                box["error"] = exc

        self.jobs += 1
        watch_executors = not sc.master.startswith("local")
        worker = threading.Thread(target=target, name=f"dpmatrix-spark-{what}", daemon=True)
        with quiet_pyspark():
            worker.start()
            idle_since: float | None = None
            warned = False
            try:
                while worker.is_alive():
                    worker.join(0.25)
                    if not worker.is_alive() or not watch_executors:
                        continue
                    if self._executors() > 0:
                        idle_since = None
                        continue
                    now = time.monotonic()
                    idle_since = idle_since if idle_since is not None else now
                    if not warned and now - idle_since >= min(EXECUTOR_WARN_AFTER, self.executor_timeout):
                        warned = True
                        print(
                            f"dpmatrix: no Spark executor is running for this application on "
                            f"{sc.master} after {now - idle_since:.0f} s (are workers registered "
                            f"with the master, with enough free cores and memory?); giving up "
                            f"after {self.executor_timeout:.0f} s",
                            file=sys.stderr,
                            flush=True,
                        )
                    if now - idle_since >= self.executor_timeout:
                        sc.cancelJobGroup(group)
                        worker.join(30)
                        raise DataError(
                            f"no Spark executor ran the job ({what}) within "
                            f"{self.executor_timeout:.0f} s on {sc.master}: the cluster has no "
                            "free worker for this application (raise executor_timeout to wait "
                            "longer)"
                        )
            except KeyboardInterrupt:
                try:
                    sc.cancelJobGroup(group)
                    worker.join(30)
                except BaseException:
                    pass
                raise
        if "error" in box:
            exc = box["error"]
            if isinstance(exc, (DataError, KeyboardInterrupt, ValueError, TypeError)):
                raise exc
            raise spark_error(exc, what) from None
        return box["result"]

    def _cache(self) -> None:
        from pyspark import StorageLevel

        if self.cache and not self._cached and self._codes is not None:
            self._codes = self._codes.persist(StorageLevel.MEMORY_AND_DISK)
            self._cached = True

    def _uncache(self) -> None:
        if self._cached and self._codes is not None:
            try:
                self._codes.unpersist()
            except Exception:  # session already gone
                pass
        self._cached = False

    def __enter__(self) -> SparkEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _key(self, s: AttrSet) -> Any:
        """Mixed-radix (C-order) cell index of the set ``s`` as a Spark Column."""
        from pyspark.sql import functions as F

        sizes = self._domain.sizes
        itype = "int" if self._domain.cells(s) < 2**31 else "long"
        key = F.col(f"c{s[0]}").cast(itype)
        for a in s[1:]:
            key = key * F.lit(sizes[a]).cast(itype) + F.col(f"c{a}").cast(itype)
        return key

    def count(
        self, attr_sets: Sequence[AttrSet], progress: bool = False
    ) -> dict[AttrSet, np.ndarray]:
        """Count exactly the requested attribute sets (see :class:`~.base.CountEngine`).

        With ``strategy="one_pass"`` all tables are counted in one scan when their cells fit
        ``max_cells``; otherwise in as few passes as the budget allows (the codes are cached
        between passes)."""
        if self._codes is None:
            raise DataError("the Spark engine was closed")
        out, todo, prog = begin_count(self._domain, attr_sets, self._n, progress)
        if self.strategy == "one_pass":
            cells = [self._domain.cells(s) for s in todo]
            jobs = [[todo[j] for j in p] for p in plan_passes(cells, self.max_cells)]
        else:
            jobs = [todo[b : b + self.batch_size] for b in range(0, len(todo), self.batch_size)]
        if len(jobs) > 1:
            self._cache()
        try:
            with quiet_pyspark():
                for batch in jobs:
                    if self.strategy == "grouping_sets":
                        self._count_grouping_sets(batch, out)
                    elif self.strategy == "keys" or self._domain.cells(batch[0]) > self.max_cells:
                        self._count_keys(batch, out)
                    else:
                        self._count_pass(batch, out)
                    prog.step(len(batch))
        finally:
            self._uncache()
        return out

    def _count_pass(self, sets: Sequence[AttrSet], out: dict[AttrSet, np.ndarray]) -> None:
        """One Spark job counting every table of ``sets`` (see :mod:`.spark_count`): each task
        counts its partition into all the tables, the tasks' tables are summed piece by piece
        by ``reduceByKey``, and the driver collects the summed pieces only."""
        from pyspark import cloudpickle

        # ship the counting code by value: executors need numpy and pyarrow, not dpmatrix
        cloudpickle.register_pickle_by_value(spark_count)
        cloudpickle.register_pickle_by_value(bincount)
        sizes = tuple(int(n) for n in self._domain.sizes)
        offsets = [0]
        for s in sets:
            offsets.append(offsets[-1] + self._domain.cells(s))
        total = offsets[-1]
        attrs = sorted({a for s in sets for a in s})
        step = self.piece_cells
        fn = functools.partial(
            count_partition, sizes=sizes, sets=list(sets), offsets=offsets, columns=attrs,
            piece_cells=step,
        )  # fmt: skip
        pieces = self._codes.select(*[f"c{a}" for a in attrs]).mapInArrow(fn, "piece long, data binary")
        n_pieces = -(-total // step)
        reducers = max(1, min(n_pieces, self._spark.sparkContext.defaultParallelism))
        summed = pieces.rdd.map(lambda r: (r[0], r[1])).reduceByKey(add_pieces, reducers)
        flat = np.zeros(total, dtype=np.int64)
        for k, data in self._run("counting marginals", summed.collect):
            got = piece_array(data)
            flat[k * step : k * step + got.size] = got
        for j, s in enumerate(sets):
            out[s].reshape(-1)[:] = flat[offsets[j] : offsets[j + 1]]

    def _count_keys(self, batch: Sequence[AttrSet], out: dict[AttrSet, np.ndarray]) -> None:
        """One Spark job: every row emits one key per set of the batch, ``offset(set) + cell``
        (the sets' cells laid end to end), and the keys are counted by one ``GROUP BY``.

        This is GROUPING SETS with the grouping id folded into a single BIGINT key: Spark's own
        GROUPING SETS aggregates on m nullable key columns plus the id, measured ~2x slower.
        Only ``(key, count)`` rows (at most the batch's cells) reach the driver."""
        from pyspark.sql import functions as F

        offsets = np.cumsum([0] + [self._domain.cells(s) for s in batch])
        keys = [self._key(s).cast("long") + F.lit(int(o)) for s, o in zip(batch, offsets)]
        key = F.explode(F.array(*keys)) if len(keys) > 1 else keys[0]
        tbl = self._run("counting marginals", self._codes.select(key.alias("k")).groupBy("k").count().toArrow)
        k = tbl.column("k").to_numpy().astype(np.int64, copy=False)
        n = tbl.column("count").to_numpy().astype(np.int64, copy=False)
        flat = np.zeros(int(offsets[-1]), dtype=np.int64)
        flat[k] = n
        for j, s in enumerate(batch):
            out[s].reshape(-1)[:] = flat[offsets[j] : offsets[j + 1]]

    def _count_grouping_sets(self, batch: Sequence[AttrSet], out: dict[AttrSet, np.ndarray]) -> None:
        """One Spark job: ``GROUPING SETS ((k0), (k1), ...)`` over the cell keys of the batch;
        only ``(grouping id, cell, count)`` rows (at most the batch's cells) reach the driver."""
        from pyspark.sql import functions as F

        m = len(batch)
        ks = [f"k{j}" for j in range(m)]
        keyed = self._codes.select(*[self._key(s).alias(k) for s, k in zip(batch, ks)])
        agg = keyed.groupingSets([[F.col(k)] for k in ks], *ks).agg(
            F.grouping_id().alias("g"), F.count(F.lit(1)).alias("n")
        )
        key = F.coalesce(*[F.col(k).cast("long") for k in ks]) if m > 1 else F.col(ks[0]).cast("long")
        tbl = self._run("counting marginals", agg.select("g", key.alias("k"), "n").toArrow)
        g = tbl.column("g").to_numpy().astype(np.int64, copy=False)
        k = tbl.column("k").to_numpy().astype(np.int64, copy=False)
        n = tbl.column("n").to_numpy().astype(np.int64, copy=False)
        for j, s in enumerate(batch):
            # grouping_id: bit (m-1-j) is 0 for the grouped key j, 1 for the others
            sel = g == ((1 << m) - 1) ^ (1 << (m - 1 - j))
            out[s].reshape(-1)[k[sel]] = n[sel]
