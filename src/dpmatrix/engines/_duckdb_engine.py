"""DuckDB counting engine: marginals of CSV / Parquet files computed inside DuckDB.

The file is read by DuckDB's own readers (``read_csv`` / ``read_parquet``) in an embedded,
in-process connection; records never pass through pandas. By default the domain columns are
copied once into a DuckDB table of compact codes (``UTINYINT``/``USMALLINT``), so the file is
parsed once however many marginals are needed (DuckDB spills to its temp directory when the table
outgrows ``memory_limit``). Validation is SQL (one aggregate query), with the same
:class:`~dpmatrix.errors.DataError` messages as :class:`~.numpy_engine.NumpyEngine`.

Counting (``strategy``): by default a call streams the code columns it needs out of DuckDB once,
as Arrow record batches gathered into bounded numpy chunks, and counts every requested set per
chunk with the numpy engine's kernel (:func:`.bincount.add_counts`); a call of very few sets
instead groups mixed-radix cell keys in SQL (``GROUPING SETS``, or one ``GROUP BY`` per set),
fetched with ``fetchnumpy()`` and scattered into the dense table.

``encoding="raw"`` maps raw values (labels, numeric bins) to codes inside DuckDB with the SQL
twin of :func:`dpmatrix._encode.encode_frame` (:func:`dpmatrix._encode.sql_encode`).
"""

from __future__ import annotations

import glob as _glob
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .._domain import Domain
from .._encode import UNKNOWN_HINT, problem_messages, remap_message, resolve_policies, warn_remapped
from ..errors import DataError
from ._base import (
    MAX_SHOWN,
    AttrSet,
    begin_count,
    check_source_args,
    missing_columns_message,
    non_integer_message,
    null_message,
    out_of_range_message,
    raise_problems,
)
from ._bincount import add_counts
from ._sql import quote_ident, quote_str, sql_encode, sql_number, sql_type_class

if TYPE_CHECKING:  # duckdb itself is imported where a connection is made or read
    import duckdb

_CSV_SUFFIXES = (".csv", ".tsv", ".txt", ".csv.gz", ".tsv.gz", ".csv.zst")
_PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")


def connect(
    threads: int | None = None,
    memory_limit: str | None = None,
    temp_directory: str | Path | None = None,
) -> duckdb.DuckDBPyConnection:
    config: dict[str, Any] = {}
    if threads is not None:
        config["threads"] = int(threads)
    if memory_limit is not None:
        config["memory_limit"] = str(memory_limit)
    if temp_directory is not None:
        config["temp_directory"] = str(temp_directory)
    import duckdb  # here, not at import: only counting needs it

    return duckdb.connect(":memory:", config=config)


def _sql_literal(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{quote_str(k)}: {_sql_literal(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_sql_literal(x) for x in v) + "]"
    return quote_str(str(v))


def detect_format(path: str | Path, format: str | None = None) -> str:
    """``"csv"`` or ``"parquet"``, from ``format`` or the file suffix."""
    if format is not None:
        f = format.lower()
        if f not in ("csv", "parquet"):
            raise ValueError(f"format must be 'csv' or 'parquet', got {format!r}")
        return f
    name = str(path).lower()
    if name.endswith(_CSV_SUFFIXES):
        return "csv"
    if name.endswith(_PARQUET_SUFFIXES):
        return "parquet"
    raise DataError(
        f"cannot tell the format of {str(path)!r} from its suffix; pass format='csv' or "
        "format='parquet'"
    )


def source_sql(
    path: str | Path, format: str | None = None, csv_options: Mapping[str, Any] | None = None
) -> str:
    """SQL table expression reading ``path`` with DuckDB's reader."""
    p = str(path)
    if not any(ch in p for ch in "*?[") and not Path(p).exists():
        raise DataError(f"data file {p!r} does not exist")
    if any(ch in p for ch in "*?[") and not _glob.glob(p):
        raise DataError(f"no data file matches {p!r}")
    fmt = detect_format(path, format)
    if fmt == "parquet":
        if csv_options:
            raise ValueError("csv_options apply to CSV files only")
        return f"read_parquet({quote_str(p)})"
    opts = {"header": True}
    opts.update(csv_options or {})
    args = ", ".join(f"{k} = {_sql_literal(v)}" for k, v in opts.items())
    return f"read_csv({quote_str(p)}, {args})"


def describe(con: duckdb.DuckDBPyConnection, src: str) -> dict[str, str]:
    """Column name -> DuckDB type of a table expression (reads only the schema / a sample)."""
    import duckdb

    try:
        rows_ = con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(
            f"DuckDB cannot read the data: {first}\nfix: give the delimiter (delimiter= / CLI "
            "--delimiter), or convert the file to Parquet (e.g. pandas: pd.read_csv(path)"
            ".to_parquet('data.parquet')) and use that; the release engine 'numpy' reads CSV "
            "with pandas"
        ) from None
    return {str(r[0]): str(r[1]) for r in rows_}


def _int_type(size: int) -> str:
    if size <= 1 << 8:
        return "UTINYINT"
    if size <= 1 << 16:
        return "USMALLINT"
    return "UINTEGER"


_NUMPY_CODE = {"UTINYINT": np.uint8, "USMALLINT": np.uint16, "UINTEGER": np.uint32}

#: Strategies of :class:`DuckDBEngine` (``"auto"`` picks one of the others per call).
STRATEGIES = ("auto", "stream", "grouping_sets", "group_by")
#: Default byte budget of one streamed chunk: its code columns plus the int64 cell indices.
DEFAULT_CHUNK_BYTES = 64 << 20
#: Bytes per row of cell-index temporaries budgeted beside the codes (three int64 arrays: a
#: cached prefix index, the index and its product, for tables counted in whole-chunk passes).
_INDEX_BYTES_PER_ROW = 3 * 8
#: ``strategy="auto"``: a call counting fewer sets than this many per code column it reads, all
#: of at most ``SQL_MAX_CELLS`` cells, is counted in SQL (the export of the columns would
#: dominate); any other call streams.
SETS_PER_COLUMN = 2
SQL_MAX_CELLS = 1 << 16
#: Rows per Arrow record batch asked of DuckDB (its default; DuckDB also cuts at its row groups
#: of 122,880 rows); the batches are gathered into chunks of ``chunk_bytes``.
ARROW_BATCH_ROWS = 1 << 17
#: Sets per ``count`` call the streamed path prefers: one scan counts them all, so callers
#: should batch by memory (the tables alive together), not by number.
STREAM_BATCH = 1 << 16


class DuckDBEngine:
    """Count marginals of a CSV or Parquet file with embedded DuckDB.

    Parameters
    ----------
    path
        A CSV or Parquet file (or a glob of them); the format comes from the suffix or ``format``.
    domain
        The domain; the file must have one column per attribute (extra columns are ignored).
    encoding
        ``"codes"``: the columns hold integer codes ``0..size-1`` (validated like
        :class:`~.numpy_engine.NumpyEngine`). ``"raw"``: raw values mapped through the domain's
        labels / bins in SQL, with ``on_unknown`` as in :func:`dpmatrix._encode.encode_frame`.
    materialize
        Copy the (encoded) domain columns once into a DuckDB table of compact codes (default):
        the file is parsed once. ``False`` re-scans the file for every query (cheap for Parquet's
        column pruning, slow for CSV).
    strategy
        How :meth:`count` counts (every strategy gives the same tables):

        * ``"stream"``: one scan per call streams the needed code columns out of DuckDB as
          Arrow record batches into numpy chunks of at most ``chunk_bytes``, and every requested
          set is counted per chunk with :func:`.bincount.add_counts` (the numpy engine's kernel),
          chunk results summed. Memory stays bounded whatever the number of rows.
        * ``"grouping_sets"``: ``batch_size`` sets per SQL query (``GROUP BY GROUPING SETS``
          on one mixed-radix key per set), one scan per batch, aggregated by DuckDB's threads.
        * ``"group_by"``: one ``GROUP BY`` query per set.
        * ``"auto"`` (default): ``"grouping_sets"`` for a call of few small tables — fewer
          than two non-empty sets per code column the call reads (:data:`SETS_PER_COLUMN`) and
          none over :data:`SQL_MAX_CELLS` cells — else ``"stream"``. Streaming costs one export
          of the columns (~1 ms per column per million rows), then numpy's counting speed on
          one thread; SQL costs about twice the CPU per set, spread over DuckDB's threads, plus
          a fixed cost per query. Measured on 2 cores (benchmarks/results_counting.md): all
          4,060 triples of 30 attributes, streamed in one scan, count at numpy's speed with half
          the CPU of 254 GROUPING SETS batches (wall: 4.2x faster at 100 k rows, 1.9-2.4x at
          1 M; at 10 M 1.8x under load, on par on an idle machine, where DuckDB's 2 threads make
          up for its double work); 1-30 sets of 10-1,000 cells over 10 M rows, GROUPING SETS
          1.1-1.6x faster; one 256^3 table over 10 M rows, streaming 4.7x faster. With many
          idle cores and 10 M+ rows, ``"grouping_sets"`` may be the faster choice (it scales
          with ``threads``; numpy's ``bincount`` holds the GIL, so streaming does not).
    batch_size
        Sets per ``GROUPING SETS`` query (at most 62; measured ~1.5x faster than ``"group_by"``
        on 1M x 20 with batches of 16, batches of 62 are slower).
    chunk_bytes
        Byte budget of one streamed chunk (``"stream"``): its rows hold the needed code columns
        (1 byte per attribute of at most 256 values, 2 up to 65,536) and 24 bytes of int64 cell
        indices, so 64 MB (default) is ~1.2 M rows of 30 one-byte attributes.
    threads, memory_limit, temp_directory
        DuckDB settings (defaults: DuckDB's).
    csv_options
        Extra ``read_csv`` options, e.g. ``{"delim": ";"}`` or ``{"sample_size": -1}``.
    """

    def __init__(
        self,
        path: str | Path,
        domain: Domain,
        encoding: Literal["codes", "raw"] = "codes",
        *,
        format: Literal["csv", "parquet"] | None = None,
        on_unknown: str | Mapping[str, str] = "error",
        materialize: bool = True,
        strategy: Literal["auto", "stream", "grouping_sets", "group_by"] = "auto",
        batch_size: int = 16,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        threads: int | None = None,
        memory_limit: str | None = None,
        temp_directory: str | Path | None = None,
        csv_options: Mapping[str, Any] | None = None,
        na_values: Sequence[str] = (),
    ):
        check_source_args(domain, encoding)
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(map(repr, STRATEGIES))}, got {strategy!r}")
        if int(chunk_bytes) < 1:
            raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes!r}")
        self._domain = domain
        self.path = str(path)
        self.format = detect_format(path, format)
        self.encoding = encoding
        self.strategy = strategy
        self.batch_size = min(max(1, int(batch_size)), 62)  # DuckDB: <= 64 groups
        self.chunk_bytes = int(chunk_bytes)
        policies = resolve_policies(domain, on_unknown) if encoding == "raw" else {}
        if self.format == "csv":
            # read as the numpy and Spark engines do: RFC 4180 quoting, ',' unless a delimiter is
            # given (no sniffing: a ';' file is one column everywhere, not counted by one engine
            # only); every column as text, as the other engines read it: DuckDB's BIGINT parser
            # would take '0x1' as the code 1, and messages show the text of the file
            csv_options = {"delim": ",", "quote": '"', "escape": '"', "all_varchar": True, **(csv_options or {})}
        if encoding == "raw" and self.format == "csv":
            # every column as text, then the domain's rules: no sniffing of
            # yes/no or T/F as booleans, "01" stays "01" — the same as encode.read_csv_text
            csv_options = {"all_varchar": True, **(csv_options or {})}
        src = source_sql(path, format, csv_options)
        self._con = connect(threads, memory_limit, temp_directory)
        try:
            types = describe(self._con, src)
            missing = [n for n in domain.names if n not in types]
            if missing:
                raise DataError(missing_columns_message(missing, list(types)))
            cols = ", ".join(quote_ident(n) for n in domain.names)
            if materialize:
                self._exec(f"CREATE TEMP TABLE raw AS SELECT {cols} FROM {src}")
                src = "raw"
            keep = "TRUE"
            if encoding == "codes":
                self._n = self._validate_codes(src, types)
                exprs = [self._code_expr(n, types[n]) for n in domain.names]
            else:
                self._n, exprs, keep = self._validate_raw(src, types, policies, na_values)
            select = ", ".join(
                f"CAST({e} AS {_int_type(a.size)}) AS c{i}"
                for i, (e, a) in enumerate(zip(exprs, domain.attributes))
            )
            if materialize:
                self._exec(f"CREATE TEMP TABLE codes AS SELECT {select} FROM {src} WHERE {keep}")
                self._exec("DROP TABLE raw")
            else:
                self._exec(f"CREATE TEMP VIEW codes AS SELECT {select} FROM {src} WHERE {keep}")
        except BaseException:
            self._con.close()
            raise

    # -- plumbing -----------------------------------------------------------------------------
    def _exec(self, sql: str) -> None:
        import duckdb

        try:
            self._con.execute(sql)
        except duckdb.Error as exc:
            raise DataError(
                f"DuckDB failed reading {self.path!r}: {exc} (for CSV type-detection problems "
                "try csv_options={'sample_size': -1})"
            ) from None

    def _fetchone(self, sql: str) -> tuple[Any, ...]:
        import duckdb

        try:
            row = self._con.execute(sql).fetchone()
        except duckdb.Error as exc:
            raise DataError(f"DuckDB failed reading {self.path!r}: {exc}") from None
        assert row is not None
        return row

    def _fetchall(self, sql: str) -> list[tuple[Any, ...]]:
        import duckdb

        try:
            return self._con.execute(sql).fetchall()
        except duckdb.Error as exc:
            raise DataError(f"DuckDB failed reading {self.path!r}: {exc}") from None

    def _distinct(self, src: str, value: str, where: str) -> tuple[list[Any], int]:
        vals = [
            r[0]
            for r in self._fetchall(
                f"SELECT DISTINCT {value} FROM {src} WHERE {where} ORDER BY 1 LIMIT {MAX_SHOWN}"
            )
        ]
        (nd,) = self._fetchone(f"SELECT count(DISTINCT {value}) FROM {src} WHERE {where}")
        return vals, int(nd)

    # -- validation ---------------------------------------------------------------------------
    @staticmethod
    def _code_expr(name: str, column_type: str) -> str:
        q = quote_ident(name)
        if sql_type_class(column_type) == "int":
            return q
        if sql_type_class(column_type) in ("float", "bool"):
            return f"CAST({q} AS DOUBLE)"
        return f"TRY_CAST({q} AS DOUBLE)"

    def _validate_codes(self, src: str, types: Mapping[str, str]) -> int:
        """Same checks and messages as the numpy engine, as one aggregate query."""
        conds: list[tuple[str, str, str, str, str]] = []
        aggs = ["count(*)"]
        for a in self._domain.attributes:
            q, t = quote_ident(a.name), types[a.name]
            cls = sql_type_class(t)
            x = sql_number(q, t)
            null = f"({q} IS NULL OR isnan(CAST({q} AS DOUBLE)))" if cls == "float" else (
                f"({q} IS NULL)"
            )
            bad = f"(NOT {null} AND ({x} IS NULL OR {x} != floor({x})))"
            out = f"(NOT {null} AND {x} = floor({x}) AND ({x} < 0 OR {x} > {a.size - 1}))"
            shown = x if cls in ("int", "float", "bool") else q
            conds.append((null, bad, out, shown, x))
            aggs += [f"count(*) FILTER (WHERE {c})" for c in (null, bad, out)]
        res = self._fetchone(f"SELECT {', '.join(aggs)} FROM {src}")
        problems: list[str] = []
        for j, a in enumerate(self._domain.attributes):
            n_null, n_bad, n_out = (int(v) for v in res[1 + 3 * j : 4 + 3 * j])
            null, bad, out, shown, x = conds[j]
            if n_null:
                problems.append(null_message(a.name, n_null))
            if n_bad:
                vals, nd = self._distinct(src, shown, bad)
                problems.append(non_integer_message(a.name, n_bad, vals, nd))
            if n_out:
                vals, nd = self._distinct(src, x, out)
                problems.append(out_of_range_message(a.name, a.size, n_out, vals, nd))
        raise_problems(problems)
        return int(res[0])

    def _value_counts(self, src: str, value: str, where: str) -> tuple[list[Any], int]:
        """The most frequent offending values with their rows (as the pandas path shows them)."""
        vals = [
            (r[0], int(r[1]))
            for r in self._fetchall(
                f"SELECT {value} AS v, count(*) AS n FROM {src} WHERE {where} "
                f"GROUP BY v ORDER BY n DESC, v LIMIT {MAX_SHOWN}"
            )
        ]
        (nd,) = self._fetchone(f"SELECT count(DISTINCT {value}) FROM {src} WHERE {where}")
        return vals, int(nd)

    def _validate_raw(
        self,
        src: str,
        types: Mapping[str, str],
        policies: Mapping[str, str],
        na_values: Sequence[str] = (),
    ) -> tuple[int, list[str], str]:
        encs = [
            sql_encode(a, quote_ident(a.name), types[a.name], policies[a.name], na_values)
            for a in self._domain.attributes
        ]
        drops = [e.drop for e in encs if e.drop != "FALSE"]
        keep = f"NOT ({' OR '.join(drops)})" if drops else "TRUE"
        aggs = [f"count(*) FILTER (WHERE {keep})"]
        for e in encs:
            aggs += [
                f"count(*) FILTER (WHERE ({e.code}) IS NULL AND {e.missing})",
                f"count(*) FILTER (WHERE ({e.code}) IS NULL AND NOT {e.missing})",
                f"count(*) FILTER (WHERE ({e.base}) IS NULL AND ({e.code}) IS NOT NULL AND NOT {e.missing})",
            ]
        res = self._fetchone(f"SELECT {', '.join(aggs)} FROM {src}")
        problems: list[str] = []
        remapped: list[str] = []
        for j, (a, e) in enumerate(zip(self._domain.attributes, encs)):
            n_miss, n_unk, n_re = (int(v) for v in res[1 + 3 * j : 4 + 3 * j])
            vals: list[Any] = []
            nd = 0
            if n_unk:
                vals, nd = self._value_counts(
                    src, quote_ident(a.name), f"({e.code}) IS NULL AND NOT {e.missing}"
                )
            problems += problem_messages(a, policies[a.name], n_miss, n_unk, vals, nd)
            if n_re:
                remapped.append(remap_message(a, policies[a.name], n_re))
        raise_problems(problems, "raw values do not match the domain", UNKNOWN_HINT)
        warn_remapped(remapped, stacklevel=4)
        return int(res[0]), [e.code for e in encs], keep

    # -- the engine interface -----------------------------------------------------------------
    @property
    def domain(self) -> Domain:
        return self._domain

    @property
    def n_records(self) -> int:
        return self._n

    def close(self) -> None:
        """Close the DuckDB connection (drops the temporary code table)."""
        self._con.close()

    def __enter__(self) -> DuckDBEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _key_sql(self, s: AttrSet) -> str:
        sizes = self._domain.sizes
        itype = "INTEGER" if self._domain.cells(s) < 2**31 else "BIGINT"
        key = f"CAST(c{s[0]} AS {itype})"
        for a in s[1:]:
            key = f"({key} * {sizes[a]} + c{a})"
        return key

    @property
    def preferred_batch(self) -> int:
        """Sets per :meth:`count` call that callers batching many sets should use
        (:func:`dpmatrix._measure.counting.count_batch`): ``batch_size`` for the SQL strategies
        (one scan per query of that many sets anyway), :data:`STREAM_BATCH` for ``"stream"`` and
        ``"auto"`` (one scan per call counts every set, so only memory should bound a batch)."""
        return self.batch_size if self.strategy in ("grouping_sets", "group_by") else STREAM_BATCH

    def strategy_for(self, attr_sets: Sequence[AttrSet]) -> str:
        """The strategy a call counting these non-empty sets uses (``"auto"`` resolved: see the
        class docstring)."""
        if self.strategy != "auto":
            return self.strategy
        columns = {a for s in attr_sets for a in s}
        few = len(attr_sets) < SETS_PER_COLUMN * len(columns)
        small = all(self._domain.cells(s) <= SQL_MAX_CELLS for s in attr_sets)
        return "grouping_sets" if few and small else "stream"

    def count(
        self, attr_sets: Sequence[AttrSet], progress: bool = False
    ) -> dict[AttrSet, np.ndarray]:
        """Count exactly the requested attribute sets (see :class:`~.base.CountEngine`)."""
        out, todo, prog = begin_count(self._domain, attr_sets, self._n, progress)
        strategy = self.strategy_for(todo)
        if not todo:
            pass
        elif strategy == "stream":
            self._count_stream(todo, out)
            prog.step(len(todo))
        elif strategy == "group_by":
            for s in todo:
                res = self._con.execute(
                    f"SELECT {self._key_sql(s)} AS k, count(*) AS n FROM codes GROUP BY ALL"
                ).fetchnumpy()
                out[s].reshape(-1)[np.asarray(res["k"], dtype=np.int64)] = res["n"]
                prog.step()
        else:
            for b in range(0, len(todo), self.batch_size):
                batch = todo[b : b + self.batch_size]
                self._count_grouping_sets(batch, out)
                prog.step(len(batch))
        return out

    def _count_stream(self, sets: Sequence[AttrSet], out: dict[AttrSet, np.ndarray]) -> None:
        """One scan of the code table: the columns the sets need, streamed as Arrow record
        batches and copied into fixed numpy chunks of at most ``chunk_bytes``; every set is
        counted per chunk (:func:`.bincount.add_counts`) into ``out``. Counts of disjoint
        row blocks add up to the counts of all rows, in any row order."""
        import duckdb
        import pyarrow as pa

        sizes = self._domain.sizes
        attrs = sorted({a for s in sets for a in s})
        dtypes = [np.dtype(_NUMPY_CODE[_int_type(sizes[a])]) for a in attrs]
        row_bytes = sum(t.itemsize for t in dtypes) + _INDEX_BYTES_PER_ROW
        rows = max(1, min(self._n, self.chunk_bytes // row_bytes))
        chunk = [np.empty(rows, dtype=t) for t in dtypes]
        flat = {s: out[s].reshape(-1) for s in sets}

        def count_chunk(n: int) -> None:
            cols = {a: c[:n] for a, c in zip(attrs, chunk)}
            add_counts(cols, sizes, sets, flat, n_rows=n)

        filled = seen = 0
        sql = f"SELECT {', '.join(f'c{a}' for a in attrs)} FROM codes"
        try:
            with self._con.sql(sql).to_arrow_reader(min(rows, ARROW_BATCH_ROWS)) as reader:
                for batch in reader:
                    got = [batch.column(j).to_numpy(zero_copy_only=False) for j in range(len(attrs))]
                    m, off = batch.num_rows, 0
                    seen += m
                    while off < m:
                        take = min(m - off, rows - filled)
                        for dst, src in zip(chunk, got):
                            dst[filled : filled + take] = src[off : off + take]
                        filled, off = filled + take, off + take
                        if filled == rows:
                            count_chunk(rows)
                            filled = 0
        except (duckdb.Error, pa.ArrowException) as exc:
            raise DataError(f"DuckDB failed reading {self.path!r}: {exc}") from None
        if filled:
            count_chunk(filled)
        if seen != self._n:  # the file changed under a non-materialized engine
            raise DataError(
                f"{self.path!r} now has {seen:,} rows, {self._n:,} when the engine was built; "
                "build the engine again"
            )

    def _count_grouping_sets(self, batch: Sequence[AttrSet], out: dict[AttrSet, np.ndarray]) -> None:
        keys = [self._key_sql(s) for s in batch]
        cols = ", ".join(f"{k} AS k{j}" for j, k in enumerate(keys))
        sets_sql = ", ".join(f"(k{j})" for j in range(len(batch)))
        gid = ", ".join(f"k{j}" for j in range(len(batch)))
        res = self._con.execute(
            f"SELECT GROUPING_ID({gid}) AS g, COALESCE({', '.join(f'k{j}' for j in range(len(batch)))}) "
            f"AS k, count(*) AS n FROM (SELECT {cols} FROM codes) GROUP BY GROUPING SETS ({sets_sql})"
        ).fetchnumpy()
        g = np.asarray(res["g"], dtype=np.int64)
        k = np.asarray(res["k"], dtype=np.int64)
        n = np.asarray(res["n"], dtype=np.int64)
        m = len(batch)
        for j, s in enumerate(batch):
            # GROUPING_ID: bit (m-1-j) is 0 for the grouped key j, 1 for the others
            want = ((1 << m) - 1) ^ (1 << (m - 1 - j))
            sel = g == want
            out[s].reshape(-1)[k[sel]] = n[sel]
