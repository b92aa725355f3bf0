"""The marginal tables of a release as one Parquet dataset.

A release with thousands of marginals used to cost one Parquet and one CSV file per marginal
(9,052 files for all ≤3-way marginals of 30 attributes) and one pandas frame per table. The tables
are now written from array blocks into one dataset, a few files under ``tables/``::

    tables/part-00000.parquet, part-00001.parquet, ...   (a new part every 2²⁴ rows)

Every part has the same columns, so ``tables/*.parquet`` reads as one table:

* ``marginal`` — the marginal's key: its attribute names joined by ``,`` (``"age,sex"``;
  ``"total"`` for the 0-way count). When some attribute name contains ``,`` or is ``total``,
  every key is instead the JSON list of the names (``'["a,b", "c"]'``; ``'[]'`` for the total), so
  two marginals never share a key. The manifest gives each marginal's key
  (``marginals[i].key``) and says which form is used (``tables.key``).
* one column per attribute of the domain, in domain order, named as the attribute: the value of
  that attribute in the row's cell, null when the row's marginal does not contain it. Attributes
  with labels or bins (or with prefix/range queries) hold the label as text (``"[0, 20)"``,
  ``"F"``, ``"<= 3"``); plain coded attributes hold the integer code ``0..size-1``
  (``manifest.tables.label_columns`` gives each column's type). A plan that lists its
  mechanisms (QuerySmasher, pure ε-DP) can also have a ``query`` column (``q0, q1, ...``).
* ``estimate``, ``variance``, ``std``, ``lower``, ``upper`` — as in every dpmatrix table.

Rows are in C order within a table (the first attribute varies slowest), the rows of one
marginal are contiguous and never split across Parquet row groups; a row group holds whole
marginals, about 2¹⁶ rows. The manifest records each marginal's part, row group and first row
(``marginals[i].table``), so :func:`read_table` reads a single row group and none of the rest;
outside dpmatrix, one call reads any table::

    duckdb.sql("SELECT * FROM 'REL/tables/*.parquet' WHERE marginal = 'age,sex'")
    pandas.read_parquet("REL/tables", filters=[("marginal", "==", "age,sex")])
    pyarrow.parquet.read_table("REL/tables", filters=[("marginal", "==", "age,sex")])

(the other attribute columns of those rows are null: select the columns you want, or drop the
empty ones with ``.dropna(axis=1, how="all")``).

Integrity. Besides the SHA-256 of every part (``files``), the manifest holds, per part, its size
and the SHA-256 of each row group's bytes and of the footer (the bytes after the last row group:
schema, row group offsets, statistics): reading one table verifies the footer and that table's row
group only, so a query stays fast however large the release, and still refuses an edited table
or a rewritten file, naming the file.

Why one wide table rather than one file per marginal order: a folder read in one call needs one
schema; the attribute columns that a row does not use are null, which Parquet stores as a run of
definition levels (a few bytes per row group and column).

Per-marginal CSV files (``marginals/<slug>-<hash>.csv``, as before) are written only on request
(``formats=("parquet", "csv")``, CLI ``--tables parquet,csv``), from the same blocks.

Nothing here imports pandas: the read path of ``dpmatrix query`` (a saved table) needs only
pyarrow.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from ._csv_cells import escape, unescape
from .errors import ReleaseError
from .protocols import HasClosure

__all__ = [
    "KEY_COLUMN",
    "STAT_COLUMNS",
    "TABLES_DIR",
    "DatasetWriter",
    "TableBlock",
    "fsync_path",
    "key_style",
    "marginal_key",
    "part_integrity",
    "read_table",
]

TABLES_DIR = "tables"
KEY_COLUMN = "marginal"
STAT_COLUMNS = ("estimate", "variance", "std", "lower", "upper")
#: rows per Parquet row group (whole marginals; a larger marginal gets a row group of its own)
ROW_GROUP_ROWS = 1 << 16
#: rows per part file
PART_ROWS = 1 << 24
#: how the tables of a release are stored (``manifest.tables.layout``)
LAYOUT = "dataset"

CODE, LABEL = "int64", "string"
_LABEL_TYPE = pa.dictionary(pa.int32(), pa.string())
_PER_TABLE = pa.dictionary(pa.int32(), pa.float64())


# -- keys ----------------------------------------------------------------------------------------
def key_style(names: Iterable[str]) -> str:
    """``"comma"`` when no attribute name contains ``,`` or is ``total`` (then names joined by
    ``,`` identify a marginal), else ``"json"`` (the JSON list of names)."""
    return "json" if any("," in n or n == "total" for n in names) else "comma"


def marginal_key(names: Sequence[str], style: str) -> str:
    """The ``marginal`` column's value of a marginal (see the module docstring).

    Examples
    --------
    >>> marginal_key(("age", "sex"), "comma"), marginal_key((), "comma")
    ('age,sex', 'total')
    >>> marginal_key(("a,b", "c"), "json")
    '["a,b", "c"]'
    """
    if style == "comma":
        return ",".join(names) if names else "total"
    return json.dumps(list(names), ensure_ascii=False)


# -- columns -------------------------------------------------------------------------------------
def check_columns(names: Iterable[str]) -> None:
    """Refuse attribute names that are also the dataset's own column names."""
    clash = sorted(set(names) & {KEY_COLUMN, *STAT_COLUMNS})
    if clash:
        raise ReleaseError(
            f"attribute name(s) {', '.join(map(repr, clash))} are column names of the release tables "
            f"({KEY_COLUMN}, {', '.join(STAT_COLUMNS)}); rename them in the domain"
        )


def schema(label_columns: Mapping[str, str]) -> pa.Schema:
    """The dataset's schema: ``marginal``, the label columns (int64 codes or text), the stats."""
    fields = [pa.field(KEY_COLUMN, _LABEL_TYPE)]
    fields += [pa.field(n, pa.int64() if t == CODE else _LABEL_TYPE) for n, t in label_columns.items()]
    # variance and std are one number per table (Theorem 4.4): stored as a dictionary over the
    # tables of a row group, so they cost no per-row work
    fields += [pa.field(s, _PER_TABLE if s in ("variance", "std") else pa.float64()) for s in STAT_COLUMNS]
    return pa.schema(fields)


@dataclass(frozen=True, eq=False)
class TableBlock:
    """``m`` tables of ``rows`` rows each, of one arity, stacked: what the writer takes.

    Attributes
    ----------
    keys : list of str
        The ``marginal`` key of each table.
    columns : list of tuple of str
        The label column of each axis of each table (``columns[i][j]``).
    codes : tuple of numpy.ndarray
        Per axis ``j``, the values of the rows: codes into ``labels[column]`` or, when that is
        ``None``, the integer codes shown as they are. 1-D (length ``rows``, shared by the ``m``
        tables: a grid of cells) or ``(m, rows)``.
    labels : mapping of str to (sequence of str or None)
        The text labels of each column the block fills (``None``: plain integer codes).
    estimate : numpy.ndarray
        ``(m, rows)``.
    variance : numpy.ndarray
        ``(m, 1)`` (one variance per table) or ``(m, rows)``.
    """

    keys: list
    columns: list
    codes: tuple
    labels: Mapping
    estimate: np.ndarray
    variance: np.ndarray

    @property
    def rows(self) -> int:
        return int(self.estimate.shape[1])

    def axis_codes(self, j: int, sel: np.ndarray) -> np.ndarray:
        """Codes of axis ``j`` for the tables ``sel``: ``(len(sel), rows)`` or broadcastable."""
        c = self.codes[j]
        return c if c.ndim == 1 else c[sel]


def grid_codes(shape: Sequence[int]) -> tuple[np.ndarray, ...]:
    """Per axis, the code of every cell of a C-order table of ``shape`` (``np.indices``)."""
    if not shape:
        return ()
    return tuple(g.reshape(-1) for g in np.indices(tuple(int(s) for s in shape), dtype=np.int64))


def stat_arrays(estimate: np.ndarray, variance: np.ndarray, z: float, decimals: int | None) -> list[np.ndarray]:
    """``estimate, variance, std, lower, upper`` as flat arrays; the same arithmetic as the tidy
    tables of :class:`~dpmatrix._reconstruct.measurements.Measurements` (``std = sqrt(variance)``,
    ``estimate ∓ z·std``), so the saved numbers are bit for bit those of ``marginal()``."""
    m, rows = estimate.shape
    est = np.ascontiguousarray(estimate, dtype=np.float64).reshape(-1)
    variance = np.asarray(variance, dtype=np.float64)
    if variance.shape[1] == 1 and rows != 1:
        v1 = variance.reshape(-1)
        var = np.repeat(v1, rows)
        std = np.repeat(np.sqrt(v1), rows)
    else:
        var = np.ascontiguousarray(np.broadcast_to(variance, (m, rows))).reshape(-1)
        std = np.sqrt(var)
    zs = z * std
    out = [est, var, std, est - zs, est + zs]
    if decimals is not None:
        out = [np.round(a, decimals) for a in out]
    return out


def _text_labels(labels, codes: np.ndarray) -> list[str]:
    if labels is not None:
        return [str(s) for s in labels]
    hi = int(codes.max()) + 1 if codes.size else 0  # integer codes in a text column: their decimal text
    return [str(c) for c in range(hi)]


def _table_masked(values: np.ndarray, tables: np.ndarray, type_: pa.DataType) -> pa.Array:
    """The ``(m, rows)`` ``values`` as one Arrow array, null outside the tables ``tables`` (a
    boolean per table): the validity bitmap is built from whole tables and both buffers are
    handed to Arrow without a copy."""
    rows = values.shape[1]
    flat = np.ascontiguousarray(values).reshape(-1)
    valid = int(tables.sum()) * rows
    if valid == flat.size:
        return pa.array(flat, type=type_)
    bits = np.packbits(np.repeat(tables, rows), bitorder="little")
    return pa.Array.from_buffers(type_, flat.size, [pa.py_buffer(bits), pa.py_buffer(flat)],
                                 null_count=flat.size - valid)


def block_table(block: TableBlock, label_columns: Mapping[str, str], z: float, decimals: int | None) -> pa.Table:
    """The Arrow table (dataset schema) of a block, built column by column from arrays: per
    label column one scatter of the axis codes into the rows of the tables that have it."""
    m, rows = block.estimate.shape
    n = m * rows
    cols: dict[str, pa.Array] = {}
    idx = np.repeat(np.arange(m, dtype=np.int32), rows)
    cols[KEY_COLUMN] = pa.DictionaryArray.from_arrays(pa.array(idx), pa.array(block.keys, pa.string()))
    filled: dict[str, list] = {}
    k = len(block.codes)
    columns = np.empty((m, k), dtype=object)
    for i, c in enumerate(block.columns):
        columns[i] = c
    for j in range(k):
        for name in dict.fromkeys(columns[:, j].tolist()):
            filled.setdefault(name, []).append((j, np.flatnonzero(columns[:, j] == name)))
    for name, kind in label_columns.items():
        parts = filled.get(name)
        if not parts:
            cols[name] = pa.nulls(n, pa.int64() if kind == CODE else _LABEL_TYPE)
            continue
        tables = np.zeros(m, dtype=bool)  # the tables that have this column (whole tables)
        vals = np.zeros((m, rows), dtype=np.int64 if kind == CODE else np.int32)
        for j, sel in parts:
            vals[sel] = block.axis_codes(j, sel)
            tables[sel] = True
        labels = block.labels.get(name)
        if kind == CODE:
            if labels is not None:
                raise ReleaseError(f"column {name!r} holds integer codes, but a table labels it")
            cols[name] = _table_masked(vals, tables, pa.int64())
        else:
            text = _text_labels(labels, vals[tables])
            cols[name] = pa.DictionaryArray.from_arrays(_table_masked(vals, tables, pa.int32()),
                                                        pa.array(text, pa.string()))
    cols.update(_stat_columns(block, idx, z, decimals))
    return pa.table(cols, schema=schema(label_columns))


def _stat_columns(block: TableBlock, idx: np.ndarray, z: float, decimals: int | None) -> dict[str, pa.Array]:
    """The five number columns of a block: :func:`stat_arrays`'s numbers (same arithmetic, same
    bits), with ``variance`` and ``std`` as dictionaries (one entry per table when the variance
    is constant within each table, else one per row)."""
    m, rows = block.estimate.shape
    est = np.ascontiguousarray(block.estimate, dtype=np.float64)
    var = np.asarray(block.variance, dtype=np.float64)
    if var.shape[1] == 1:
        var = var.reshape(-1)
        std = np.sqrt(var)
        zs = (z * std)[:, None]
        where = pa.array(idx)
    else:
        var = np.ascontiguousarray(np.broadcast_to(var, (m, rows))).reshape(-1)
        std = np.sqrt(var)
        zs = (z * std).reshape(m, rows)
        where = pa.array(np.arange(m * rows, dtype=np.int32))
    numbers = {"estimate": est.reshape(-1), "lower": (est - zs).reshape(-1), "upper": (est + zs).reshape(-1),
               "variance": var, "std": std}
    if decimals is not None:
        numbers = {k: np.round(v, decimals) for k, v in numbers.items()}
    return {s: (pa.DictionaryArray.from_arrays(where, pa.array(numbers[s])) if s in ("variance", "std")
                else pa.array(numbers[s])) for s in STAT_COLUMNS}


# -- writing -------------------------------------------------------------------------------------
@dataclass
class _Pending:
    tables: list = field(default_factory=list)  # pa.Table slices
    keys: list = field(default_factory=list)  # (key, first row in the group, rows)
    rows: int = 0


class DatasetWriter:
    """Writes blocks of tables into ``<stage>/tables/part-*.parquet``: row groups of whole
    tables of about :data:`ROW_GROUP_ROWS` rows, parts of at most :data:`PART_ROWS` rows.

    ``locations`` maps each key to ``(relative part path, row group, first row, rows)``;
    :meth:`close` returns, per part, the integrity record of :func:`part_integrity`.
    """

    def __init__(self, stage: Path, label_columns: Mapping[str, str], *, z: float, decimals: int | None = None,
                 row_group_rows: int | None = None, part_rows: int | None = None,
                 metadata: Mapping[str, str] | None = None):
        self.stage = Path(stage)
        self.label_columns = dict(label_columns)
        self.schema = schema(self.label_columns)
        # key-value metadata of every part's footer (e.g. the NOT PRIVATE mark of a seeded release)
        self._metadata = {str(k): str(v) for k, v in (metadata or {}).items()}
        self.z, self.decimals = float(z), decimals
        self.row_group_rows = int(ROW_GROUP_ROWS if row_group_rows is None else row_group_rows)
        self.part_rows = int(PART_ROWS if part_rows is None else part_rows)
        self.locations: dict[str, tuple[str, int, int, int]] = {}
        self.parts: list[str] = []
        self._writer: pq.ParquetWriter | None = None
        self._part_rows = 0
        self._groups = 0
        self._pending = _Pending()
        self._seen: set[str] = set()
        dictionary = [KEY_COLUMN, *(n for n, t in self.label_columns.items() if t == LABEL), "variance", "std"]
        # noisy estimates and bounds do not compress: stored plain, uncompressed; codes, labels,
        # keys and the per-table variances are dictionary-encoded (a few bytes per row group)
        # (plain int64 codes dictionary-encoded by the writer: faster than a dictionary array)
        self._options = {
            "use_dictionary": dictionary + [n for n, t in self.label_columns.items() if t == CODE],
            "compression": {c: ("none" if c in ("estimate", "lower", "upper") else "snappy") for c in self.schema.names},
            "store_schema": False,
            "write_statistics": [KEY_COLUMN],
        }

    def add(self, block: TableBlock) -> None:
        """Append a block's tables (keys must be new)."""
        table = block_table(block, self.label_columns, self.z, self.decimals)
        rows = block.rows
        per_group = max(1, self.row_group_rows // max(rows, 1))
        m = len(block.keys)
        for a in range(0, m, per_group):
            b = min(m, a + per_group)
            self._add_slice(table.slice(a * rows, (b - a) * rows), block.keys[a:b], rows)

    def _add_slice(self, t: pa.Table, keys: Sequence[str], rows: int) -> None:
        p = self._pending
        if p.rows and p.rows + t.num_rows > self.row_group_rows:
            self._flush()
            p = self._pending
        for i, k in enumerate(keys):
            if k in self._seen:
                raise ReleaseError(f"two tables have the key {k!r}; refusing to write an ambiguous dataset")
            self._seen.add(k)
            p.keys.append((k, p.rows + i * rows, rows))
        p.tables.append(t)
        p.rows += t.num_rows
        if p.rows >= self.row_group_rows:
            self._flush()

    def _flush(self) -> None:
        p = self._pending
        if not p.rows and not p.keys:
            return
        if self._writer is None or self._part_rows + p.rows > self.part_rows and self._part_rows:
            self._close_part()
            rel = f"{TABLES_DIR}/part-{len(self.parts):05d}.parquet"
            (self.stage / TABLES_DIR).mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(str(self.stage / rel), self.schema, **self._options)
            self.parts.append(rel)
            self._part_rows = 0
            self._groups = 0
        t = pa.concat_tables(p.tables) if len(p.tables) > 1 else p.tables[0]
        self._writer.write_table(t, row_group_size=max(t.num_rows, 1))
        for k, first, rows in p.keys:
            self.locations[k] = (self.parts[-1], self._groups, first, rows)
        self._groups += 1
        self._part_rows += p.rows
        self._pending = _Pending()

    def _close_part(self) -> None:
        if self._writer is not None:
            if self._metadata:
                self._writer.add_key_value_metadata(self._metadata)
            self._writer.close()
            self._writer = None

    def close(self) -> dict[str, dict]:
        """Write what is pending, close the last part; ``{part: integrity record}``."""
        self._flush()
        self._close_part()
        if not self.parts:  # no table at all: an empty dataset still has its schema
            rel = f"{TABLES_DIR}/part-00000.parquet"
            (self.stage / TABLES_DIR).mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(str(self.stage / rel), self.schema, **self._options)
            self._close_part()
            self.parts.append(rel)
        for rel in self.parts:  # on disk before the manifest that lists them is written
            fsync_path(self.stage / rel)
        fsync_path(self.stage / TABLES_DIR)
        return {rel: part_integrity(self.stage / rel) for rel in self.parts}


def fsync_path(path: Path) -> None:
    """Flush a file's (or a folder's) data to the disk; a best effort on file systems that refuse."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- integrity -----------------------------------------------------------------------------------
def _row_group_ranges(md: pq.FileMetaData) -> list[tuple[int, int]]:
    """``(offset, length)`` of the bytes of each row group (all its column chunks)."""
    out = []
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        lo, hi = None, 0
        for j in range(rg.num_columns):
            c = rg.column(j)
            start = c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset
            lo = start if lo is None else min(lo, start)
            hi = max(hi, start + c.total_compressed_size)
        out.append((int(lo or 0), int(hi - (lo or 0))))
    return out


def part_integrity(path: Path) -> dict[str, Any]:
    """``{"sha256", "bytes", "footer": [offset, sha256], "row_groups": [[offset, length, sha256],
    ...]}`` of a Parquet part, from one sequential read of the file. The footer is every byte
    after the last row group (page indexes, metadata, length, magic)."""
    size = os.path.getsize(path)
    md = pq.ParquetFile(str(path)).metadata
    ranges = _row_group_ranges(md)
    footer = max([o + n for o, n in ranges], default=4)
    whole = hashlib.sha256()
    digests = []
    with open(path, "rb") as f:
        pos = 0
        for o, n in [*ranges, (footer, size - footer)]:
            if o < pos:
                raise ReleaseError(f"{path.name}: overlapping row groups")
            whole.update(f.read(o - pos))  # bytes between ranges (the leading magic)
            h = hashlib.sha256()
            left = n
            while left:
                chunk = f.read(min(left, 1 << 22))
                if not chunk:
                    raise ReleaseError(f"{path.name} is shorter than its metadata says")
                h.update(chunk)
                whole.update(chunk)
                left -= len(chunk)
            digests.append(h.hexdigest())
            pos = o + n
    return {
        "sha256": whole.hexdigest(),
        "bytes": size,
        "footer": [footer, digests[-1]],
        "row_groups": [[o, n, d] for (o, n), d in zip(ranges, digests[:-1])],
    }


def _digest_range(f, offset: int, length: int) -> str:
    f.seek(offset)
    h = hashlib.sha256()
    left = length
    while left:
        chunk = f.read(min(left, 1 << 22))
        if not chunk:
            break
        h.update(chunk)
        left -= len(chunk)
    return h.hexdigest()


def verify_row_group(path: Path, rel: str, record: Mapping[str, Any], group: int) -> None:
    """Check the footer and one row group of a part against its integrity record; a
    :class:`~dpmatrix.ReleaseError` naming ``rel`` on any difference."""
    def modified() -> ReleaseError:
        return ReleaseError(
            f"{rel} was modified after the release was written (SHA-256 mismatch); refusing to use it "
            "(--no-verify / verify=False skips the check)"
        )

    try:
        footer_at, footer_sha = record["footer"]
        offset, length, sha = record["row_groups"][group]
        size = int(record["bytes"])
    except (KeyError, IndexError, TypeError, ValueError):
        raise ReleaseError(f"the manifest has no integrity record of row group {group} of {rel}") from None
    try:
        st = os.stat(path)
        if st.st_size != size:
            raise modified()
        ident = (str(path), st.st_ino, st.st_mtime_ns, size)
        if not _same_digest(ident, int(footer_at), size - int(footer_at), footer_sha):
            raise modified()
        if not _same_digest(ident, int(offset), int(length), sha):
            raise modified()
    except OSError as exc:
        raise ReleaseError(f"cannot read {rel}: {exc.strerror or exc}") from None


@functools.lru_cache(maxsize=1024)
def _same_digest(ident: tuple, offset: int, length: int, sha: str) -> bool:
    """Whether bytes ``[offset, offset + length)`` of the file ``ident`` (path, inode, mtime,
    size: a changed file is another key) hash to ``sha``. Each range is hashed once per process,
    so the footer and a row group shared by many tables are not hashed again for each table."""
    with open(ident[0], "rb") as f:
        return _digest_range(f, offset, length) == sha


@functools.lru_cache(maxsize=4)
def _row_group(ident: tuple, group: int) -> pa.Table:
    """Row group ``group`` of the Parquet file ``ident`` (see :func:`_same_digest`), every
    column: the few last ones are kept, as a report or a reader reads many tables of a group in
    turn, each with its own attribute columns (footer parsed once, each group read once)."""
    pf = _parquet_file(ident)
    if not 0 <= group < pf.num_row_groups:
        raise IndexError(group)
    return pf.read_row_group(group)


@functools.lru_cache(maxsize=4)
def _parquet_file(ident: tuple) -> pq.ParquetFile:
    return pq.ParquetFile(ident[0])


def _file_ident(path: Path) -> tuple:
    st = os.stat(path)
    return (str(path), st.st_ino, st.st_mtime_ns, st.st_size)


# -- reading -------------------------------------------------------------------------------------
def read_table(path: Path, rel: str, location: Mapping[str, Any], columns: Sequence[str], key: str,
               record: Mapping[str, Any] | None, codes: Iterable[str] = ()) -> pa.Table:
    """One saved table from the dataset: the row group the manifest names (verified against
    ``record`` unless it is ``None``), its rows of ``key``, the ``columns`` asked for (label
    columns as plain text or int64, then the stats; ``codes``: text columns that hold this
    table's integer codes, returned as int64). Reads nothing else of the file."""
    try:
        group, first, rows = int(location["row_group"]), int(location["row"]), int(location["rows"])
    except (KeyError, TypeError, ValueError):
        raise ReleaseError(f"the manifest gives no valid location in {rel} for the table {key!r}") from None
    if record is not None:
        verify_row_group(path, rel, record, group)
    try:
        t = _row_group(_file_ident(path), group).select([KEY_COLUMN, *columns]).slice(first, rows)
    except IndexError:
        raise ReleaseError(f"{rel} has no row group {group} (the table {key!r})") from None
    except KeyError as exc:
        raise ReleaseError(f"cannot read {rel}: no column {exc} (the table {key!r})") from None
    except (OSError, pa.ArrowException) as exc:
        raise ReleaseError(f"cannot read {rel}: {exc}") from None
    keys = t.column(KEY_COLUMN)
    # (unique(): comparing with a Python scalar would make pyarrow import pandas)
    if t.num_rows != rows or (rows and keys.unique().to_pylist() != [key]):
        raise ReleaseError(f"{rel} does not hold the table {key!r} where the manifest says")
    t = plain_types(t.drop_columns([KEY_COLUMN]))
    for c in codes:  # (a cast kernel: building an array from Python values would import pandas)
        if c in t.column_names and pa.types.is_string(t.schema.field(c).type):
            try:
                ints = t.column(c).cast(pa.int64())
            except pa.ArrowInvalid:
                raise ReleaseError(f"{rel}: the codes of column {c!r} of the table {key!r} are not integers") from None
            t = t.set_column(t.column_names.index(c), c, ints)
    return t


def plain_types(t: pa.Table) -> pa.Table:
    """Dictionary columns as their value type (text labels as plain strings)."""
    if not any(pa.types.is_dictionary(f.type) for f in t.schema):
        return t
    return t.cast(pa.schema([pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
                             for f in t.schema]))


def read_csv_table(path: Path, rel: str, names: Sequence[str], code_columns: Iterable[str]) -> pa.Table:
    """A per-marginal CSV table: label columns as text (codes as int64), stats as float64."""
    codes = set(code_columns)
    types = {n: (pa.int64() if n in codes else pa.string()) for n in names}
    types.update({s: pa.float64() for s in STAT_COLUMNS})
    opts = pcsv.ConvertOptions(column_types=types, strings_can_be_null=False, quoted_strings_can_be_null=False)
    try:
        table = pcsv.read_csv(str(path), convert_options=opts)
    except (OSError, pa.ArrowException) as exc:
        raise ReleaseError(f"cannot read {rel}: {exc}") from None
    for i, name in enumerate(table.column_names):  # labels as published, formula marks removed
        if name in names and name not in codes:
            table = table.set_column(i, name, pa.array([None if v is None else unescape(v)
                                                        for v in table.column(i).to_pylist()], pa.string()))
    return table


# -- per-marginal CSV files ----------------------------------------------------------------------
def csv_header(names: Sequence[str]) -> str:
    """The header line, quoted only where needed (as pandas writes it)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([*names, *STAT_COLUMNS])
    return buf.getvalue()


_CSV_BODY = pcsv.WriteOptions(include_header=False, quoting_style="needed")


def write_csv_tables(block: TableBlock, z: float, decimals: int | None, paths: Sequence[Path]) -> None:
    """One CSV file per table of ``block`` (``paths[i]``; header: the table's label columns,
    then the stats), written by pyarrow from slices of the block's arrays."""
    m, rows = block.estimate.shape
    stats = [pa.array(a) for a in stat_arrays(block.estimate, block.variance, z, decimals)]
    shown: dict[tuple[int, str], pa.Array] = {}  # shared grid codes, shown once per axis and column

    def column(i: int, j: int) -> pa.Array:
        name = block.columns[i][j]
        codes, labels = block.codes[j], block.labels.get(name)
        if codes.ndim == 1 and (j, name) in shown:
            return shown[j, name]
        c = codes if codes.ndim == 1 else codes[i]
        a = pa.array(c) if labels is None else pa.DictionaryArray.from_arrays(
            pa.array(c.astype(np.int32)), pa.array([escape(str(s)) for s in labels], pa.string())).cast(pa.string())
        if codes.ndim == 1:
            shown[j, name] = a
        return a

    k = len(block.codes)
    for i in range(m):
        arrays = [column(i, j) for j in range(k)] + [s.slice(i * rows, rows) for s in stats]
        t = pa.Table.from_arrays(arrays, names=[f"c{j}" for j in range(len(arrays))])
        path = paths[i]
        if path.exists():
            raise ReleaseError(f"two marginals map to the table file {path.name!r}; refusing to overwrite")
        with open(path, "wb") as f:
            f.write(csv_header(block.columns[i]).encode("utf-8"))
            pcsv.write_csv(t, f, _CSV_BODY)


# -- blocks from tidy frames (plans without the broadcast path) -----------------------------------
def _is_int(column) -> bool:
    """An integer column of a DataFrame (codes), not a categorical or text one."""
    return getattr(column.dtype, "kind", None) in ("i", "u") and str(column.dtype) != "category"


def frame_block(key: str, frame, columns: Sequence[str]) -> TableBlock:
    """A one-table block from a tidy table (a pandas DataFrame with ``columns``, then the
    stats): categorical columns become codes + labels, integer columns stay codes, anything
    else is text."""
    codes, labels = [], {}
    for c in columns:
        s = frame[c]
        if str(s.dtype) == "category":
            codes.append(np.asarray(s.cat.codes, dtype=np.int64))
            labels[c] = [str(x) for x in s.cat.categories]
        elif _is_int(s):
            codes.append(np.asarray(s, dtype=np.int64))
            labels[c] = None
        else:
            text = [str(x) for x in s.tolist()]
            uniq = list(dict.fromkeys(text))
            pos = {u: i for i, u in enumerate(uniq)}
            codes.append(np.array([pos[t] for t in text], dtype=np.int64))
            labels[c] = uniq
    est = np.asarray(frame["estimate"], dtype=np.float64)[None]
    var = np.asarray(frame["variance"], dtype=np.float64)[None]
    return TableBlock([key], [tuple(columns)], tuple(codes), labels, est, var)


def table_stem(names: Sequence[str]) -> str:
    """File name (without suffix) of a marginal's own file (per-marginal CSV, post-processed
    tables): a readable slug (names joined by ``__``, characters outside ``[A-Za-z0-9._-]``
    replaced by ``_``, at most 80 characters; ``total`` for the 0-way marginal) and ``-`` and 12
    hex digits of the SHA-256 of the exact JSON list of names. Distinct attribute tuples get
    distinct stems (up to a 2⁻⁴⁸ hash collision, which the writers refuse rather than
    overwrite)."""
    slug = "__".join(re.sub(r"[^A-Za-z0-9._-]+", "_", n) for n in names) or "total"
    digest = hashlib.sha256(json.dumps(list(names), ensure_ascii=False).encode()).hexdigest()[:12]
    return f"{slug[:80]}-{digest}"


# -- writing a release's tables -------------------------------------------------------------------
@dataclass(frozen=True)
class WrittenTables:
    """What :func:`write_tables` wrote, for the manifest.

    Attributes
    ----------
    tables : list of (names, key, rows, max_variance, position, columns, codes)
        One per written table, in workload (or entry) order; ``position`` is the workload
        position for ResidualPlanner plans, else the entry's index; ``columns`` its label
        columns (its attributes, or ``("query",)`` for a dense query group); ``codes`` those
        of its columns that hold integer codes in a text column of the dataset.
    locations : dict
        ``key -> (part, row group, first row, rows)`` in the dataset (empty without Parquet).
    csv : dict
        ``key -> relative path`` of the per-marginal CSV file (empty unless asked for).
    parts : dict
        ``part -> integrity record`` (:func:`part_integrity`).
    label_columns : dict
        ``column -> "int64" | "string"``.
    key_style : str
    """

    tables: list
    locations: dict
    csv: dict
    parts: dict
    label_columns: dict
    key_style: str


CSV_DIR = "marginals"


class _Sink:
    """Sends blocks to the dataset writer and/or the per-marginal CSV files."""

    def __init__(self, stage: Path, label_columns, formats, z: float, decimals, metadata=None):
        self.stage, self.z, self.decimals = stage, z, decimals
        self.dataset = (DatasetWriter(stage, label_columns, z=z, decimals=decimals, metadata=metadata)
                        if "parquet" in formats else None)  # fmt: skip
        self.want_csv = "csv" in formats
        self.csv: dict[str, str] = {}
        if self.want_csv:
            (stage / CSV_DIR).mkdir(parents=True, exist_ok=True)

    def add(self, block: TableBlock, stems: Sequence[str]) -> None:
        """Write a block; ``stems[i]``: the CSV file name (without suffix) of table ``i``."""
        if self.dataset is not None:
            self.dataset.add(block)
        if self.want_csv:
            rels = [f"{CSV_DIR}/{s}.csv" for s in stems]
            write_csv_tables(block, self.z, self.decimals, [self.stage / r for r in rels])
            self.csv.update(zip(block.keys, rels))

    def close(self) -> tuple[dict, dict]:
        if self.dataset is None:
            return {}, {}
        parts = self.dataset.close()
        return self.dataset.locations, parts


def _text_codes(block: TableBlock, label_columns: Mapping[str, str]) -> tuple[str, ...]:
    """Columns of a one-table block that hold integer codes (as the tidy table shows them) in a
    text column of the dataset: recorded in the manifest entry (``codes``), so that readers
    return them as integers again; ``()`` for blocks of several tables (plain marginals, whose
    code columns are integer columns)."""
    if len(block.keys) != 1:
        return ()
    return tuple(c for c in block.columns[0] if block.labels.get(c) is None and label_columns.get(c) == LABEL)


def residual_label_columns(plan) -> dict[str, str]:
    """Column types of a ResidualPlanner release: for plain marginals, text for attributes with
    labels or bins and integer codes for the others (as :meth:`Measurements.marginal` gives
    them); with generalized marginals (ResidualPlanner+) every row is a query named by text
    (``"<= 3"``, ``"0..2"``, and plain cells by their label, as :meth:`Measurements.answer`)."""
    out = {}
    for attr in plan.domain.attributes:
        labelled = attr.labels is not None or getattr(attr, "bins", None) is not None
        out[attr.name] = CODE if plan.is_plain and not labelled else LABEL
    return out


def write_tables(measurements, stage: Path, *, formats: Sequence[str], level: float, decimals: int | None = None,
                 progress: bool = False, metadata: Mapping[str, str] | None = None) -> WrittenTables:
    """Reconstruct every workload marginal of ``measurements`` and write its table into the
    dataset (``"parquet"`` in ``formats``) and/or a per-marginal CSV file (``"csv"``).

    ResidualPlanner plans with plain marginals go block by block from the broadcast
    reconstruction (:func:`~dpmatrix._reconstruct.broadcast.plain_batches`: estimates and one
    variance per table, for hundreds of tables at a time); other plans table by table from
    :meth:`~dpmatrix._reconstruct.measurements.Measurements.iter_marginals`.
    """
    from tqdm.auto import tqdm

    from ._reconstruct.measurements import z_score

    plan = measurements.plan
    z = z_score(level)
    names = plan.domain.names
    style = key_style(names)
    check_columns(names)
    if not isinstance(plan, HasClosure):
        return _write_listed(measurements, stage, formats=formats, level=level, z=z, decimals=decimals,
                             progress=progress, style=style, metadata=metadata)
    wk = plan.workload
    label_columns = residual_label_columns(plan)
    sink = _Sink(stage, label_columns, formats, z, decimals, metadata)
    tables: list = []
    bar = tqdm(total=len(wk), desc="writing tables", unit="marginal", disable=not progress)
    try:
        for block, positions, block_names in _blocks(measurements, style, level):
            sink.add(block, [table_stem(n) for n in block_names] if sink.want_csv else ())
            var = block.variance.max(axis=1) if block.variance.size else np.zeros(len(positions))
            codes = _text_codes(block, label_columns)
            for key, n, pos, v in zip(block.keys, block_names, positions, var.tolist()):
                tables.append((tuple(n), key, block.rows, float(v), int(pos), tuple(n), codes))
            bar.update(len(positions))
    finally:
        bar.close()
    tables.sort(key=lambda t: t[4])
    locations, parts = sink.close()
    return WrittenTables(tables, locations, sink.csv, parts, label_columns, style)


def _blocks(meas, style: str, level: float) -> Iterator[tuple[TableBlock, list, list]]:
    """``(block, workload positions, names of each table)`` of every answerable marginal."""
    plan = meas.plan
    dom = plan.domain
    names = dom.names
    if plan.is_plain:
        from ._reconstruct.broadcast import plain_batches

        labels = {
            a.name: ([a.label(c) for c in range(a.size)]
                     if a.labels is not None or getattr(a, "bins", None) is not None else None)
            for a in dom.attributes
        }  # fmt: skip
        for batch in plain_batches(meas):
            for blk in batch:
                m = len(blk.positions)
                cells = math.prod(blk.shape)
                tnames = [tuple(names[a] for a in row) for row in blk.attrs.tolist()]
                block = TableBlock(
                    keys=[marginal_key(n, style) for n in tnames], columns=tnames, codes=grid_codes(blk.shape),
                    labels={n: labels[n] for n in set().union(*tnames)} if tnames else {},
                    estimate=blk.estimate.reshape(m, cells), variance=blk.variance.reshape(m, -1),
                )  # fmt: skip
                yield block, blk.positions.tolist(), tnames
        return
    wk = plan.workload
    for n, frame in meas.iter_marginals(level=level):
        n = tuple(n)
        yield frame_block(marginal_key(n, style), frame, n), [wk.index(n)], [n]


def _write_listed(meas, stage: Path, *, formats, level, z, decimals, progress, style, metadata=None) -> WrittenTables:
    """Tables of a plan that lists its mechanisms (QuerySmasher, pure ε-DP, explicit): one per
    workload entry (query group), small by nature; collected first, for the column types."""
    frames = []
    used: set[str] = set()
    for n, frame in meas.iter_marginals(level=level, progress=progress):
        n = tuple(n)
        base = marginal_key(n, style)
        key, j = base, 1
        while key in used:  # several query groups on one attribute set
            j += 1
            key = f"{base}#{j}"
        used.add(key)
        frames.append((n, key, frame, [c for c in frame.columns if c not in STAT_COLUMNS]))
    domain_names = list(meas.plan.domain.names)
    seen = list(dict.fromkeys(c for *_, cols in frames for c in cols))
    order = [c for c in domain_names if c in seen] + [c for c in seen if c not in domain_names]
    check_columns(order)
    label_columns = {
        c: CODE if all(_is_int(f[c]) for _, _, f, cols in frames if c in cols) else LABEL
        for c in order
    }  # fmt: skip
    sink = _Sink(stage, label_columns, formats, z, decimals, metadata)
    tables = []
    stems: set[str] = set()
    for i, (n, key, frame, cols) in enumerate(frames):
        block = frame_block(key, frame, cols)
        stem = table_stem(n)
        if stem in stems:  # several query groups on one attribute set
            stem = f"{stem}-{i}"
        stems.add(stem)
        sink.add(block, [stem])
        var = np.asarray(frame["variance"], dtype=float)
        tables.append((n, key, len(frame), float(var.max()) if var.size else 0.0, i, tuple(cols),
                       _text_codes(block, label_columns)))
    locations, parts = sink.close()
    return WrittenTables(tables, locations, sink.csv, parts, label_columns, style)
