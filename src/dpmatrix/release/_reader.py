"""Reading a release back: :func:`load_release` (a :class:`Release`: manifest, plan, saved tables
and the measurements opened on first use) and :func:`read_saved_table` (one saved table without
pandas or the plan, for ``dpmatrix query``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .._domain import Domain
from .._hooks import call as call_hook
from .._release_tables import CODE, STAT_COLUMNS, marginal_key, plain_types, read_csv_table, read_table
from .._workload import AttrSet, Workload
from ..errors import DPMatrixError, NotMeasuredError, ReleaseError
from ..protocols import HasClosure
from ._compat import table_v1
from ._layout import _existing_folder
from ._manifest import (
    MEASUREMENTS,
    READABLE_FORMATS,
    _checked_file,
    _checked_plan,
    _inside,
    _read_manifest,
    _stated_digest,
)
from ._measurements import _ParquetResiduals, _read_mechanism_outputs

if TYPE_CHECKING:
    import pandas as pd

    from .._reconstruct.measurements import Measurements
    from ..planners._residual.plan import Plan

# pandas, the planners and the reconstruction are imported by the functions that use them:
# reading one saved table (read_saved_table, for ``dpmatrix query``) needs none of them.


@dataclass(frozen=True, eq=False)
class Release:
    """A release read back from its folder: manifest and plan; the noisy measurements are
    opened on first use.

    :meth:`table` returns a saved table (its file verified against the manifest's SHA-256);
    :meth:`marginal` answers any marginal in the closure of the workload (from the saved
    measurements — no data needed).
    """

    path: Path
    manifest: dict
    plan: Plan
    verify: bool = True
    _opened: list = field(default_factory=list, repr=False)
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def measurements(self) -> Measurements:
        """The noisy residual answers (read lazily from ``measurements.parquet``)."""
        if not self._opened:
            self._opened.append(_open_measurements(self))
        return self._opened[0]

    @property
    def domain(self) -> Domain:
        return self.plan.domain

    @property
    def privacy(self) -> dict:
        return dict(self.manifest["privacy"])

    @property
    def level(self) -> float:
        return float(self.manifest["confidence_level"])

    @property
    def marginals(self) -> list[tuple[str, ...]]:
        """Attribute names of every saved marginal table."""
        return [tuple(e["attributes"]) for e in self.manifest["marginals"]]

    def _digest(self, rel: str) -> str | None:
        return _stated_digest(self.manifest, self.path, rel, self.verify)

    def file(self, rel: str) -> Path:
        """Path of a file named by the manifest: confined to the folder, and (unless
        ``verify=False``) checked against its SHA-256."""
        return _checked_file(self.path, rel, self._digest(rel))

    def _entry(self, key: AttrSet) -> dict | None:
        index = self._cache.get("entries")
        if index is None:
            index = {}
            for e in self.manifest["marginals"]:
                index.setdefault(tuple(e["attributes"]), e)
            self._cache["entries"] = index
        e = index.get(self.domain.names_of(key))
        if e is not None:
            return e
        for e in self.manifest["marginals"]:  # attributes not in domain order (hand-made manifests)
            if self.domain.resolve(e["attributes"]) == key:
                return e
        return None

    def has_table(self, attrs: Iterable[str] | str) -> bool:
        """True if the release holds a saved table of this marginal."""
        return self._entry(self.domain.resolve(attrs)) is not None

    @property
    def formats(self) -> list[str]:
        """Formats of the saved tables (``"parquet"``: the dataset; ``"csv"``: one file per marginal)."""
        tables = self.manifest.get("tables")
        formats = tables.get("formats") if isinstance(tables, dict) else None
        return list(formats) if isinstance(formats, list) and formats else ["parquet"]

    def _saved(self, attrs) -> tuple[AttrSet, dict]:
        key = self.domain.resolve(attrs)
        e = self._entry(key)
        if e is None:
            raise NotMeasuredError(
                f"no saved table for {self.domain.names_of(key)}; use marginal() to reconstruct "
                "any marginal of the closure from the measurements"
            )
        return key, e

    def _code_columns(self) -> set[str]:
        tables = self.manifest.get("tables")
        types = tables.get("label_columns") if isinstance(tables, dict) else None
        if isinstance(types, dict):
            return {c for c, t in types.items() if t == CODE}
        return {a.name for a in self.domain.attributes if a.labels is None and a.bins is None}

    def read_table(self, attrs: Iterable[str] | str, format: str | None = None) -> pa.Table:
        """A saved marginal table as a :class:`pyarrow.Table` (no pandas): its label columns
        (text; plain codes as int64), then ``estimate, variance, std, lower, upper``.

        From the dataset, only the table's row group is read, verified against the manifest
        (footer and row group digests) unless ``verify=False``; a per-marginal file is verified
        whole.

        Parameters
        ----------
        attrs : str or iterable of str
            The marginal's attributes.
        format : {"parquet", "csv"}, optional
            Which saved copy (default: the release's first format).

        Returns
        -------
        pyarrow.Table

        Examples
        --------
        >>> import numpy as np, pandas as pd, tempfile, dpmatrix as dm
        >>> dom = dm.Domain.from_dict({"a": 2, "b": {"labels": ["x", "y", "z"]}})
        >>> plan = dm.plan(dm.Workload(dom, [("a", "b")]), rho=1.0)
        >>> meas = plan.measure(pd.DataFrame({"a": [0, 1], "b": ["z", "x"]}), rng=np.random.default_rng(0))
        >>> t = dm.load_release(dm.write_release(meas, tempfile.mkdtemp() + "/rel")).read_table(("a", "b"))
        >>> t.column_names[:3], t.column("a").to_pylist()[:3], t.column("b").to_pylist()[:3]
        (['a', 'b', 'estimate'], [0, 0, 0], ['x', 'y', 'z'])
        """
        _, e = self._saved(attrs)
        fmt = format or self.formats[0]
        cols = [str(c) for c in e.get("columns", e["attributes"])]
        if fmt == "parquet" and isinstance(e.get("table"), dict):
            return _dataset_table(self.path, self.manifest, e, self.verify)[0]
        files = e.get("files", {})
        if fmt not in files:
            have = sorted(files) + (["parquet"] if "table" in e else [])
            raise ReleaseError(f"this release has no {fmt} tables (it has {', '.join(have) or 'none'})")
        path = self.file(files[fmt])
        if fmt == "csv":
            return read_csv_table(path, files[fmt], cols, self._code_columns() | set(e.get("codes", ())))
        try:  # a per-marginal Parquet file of format 1
            t = plain_types(pq.read_table(str(path)).replace_schema_metadata(None))
        except (OSError, pa.lib.ArrowException) as exc:
            raise ReleaseError(f"cannot read {str(path)!r}: {exc}") from None
        return t

    def table(self, attrs: Iterable[str] | str, format: str | None = None) -> pd.DataFrame:
        """A saved marginal table as a DataFrame (labels as categoricals in query order, plain
        codes as int64): the numbers of :meth:`marginal` at the release's level, as written
        (rounded if the release was). ``format``: see :meth:`read_table`."""
        import pandas as pd

        from .._reconstruct.measurements import query_labels

        key, e = self._saved(attrs)
        fmt = format or self.formats[0]
        if self.manifest.get("format") == READABLE_FORMATS[0]:
            return self._table_v1(key, e, fmt)
        t = self.read_table(key, fmt)
        df = t.to_pandas()
        if not isinstance(self.plan, HasClosure):  # a plan that lists its mechanisms
            for c in e.get("columns", e["attributes"]):
                if df[c].dtype == object or pa.types.is_string(t.schema.field(c).type):
                    df[c] = pd.Categorical(df[c], categories=list(dict.fromkeys(df[c])))
            return df
        wk = self.plan.workload
        # as Measurements.marginal / answer: plain codes are integers (int64 columns here), the
        # rows of labelled attributes and of other queries are named by their labels
        for a, qt in zip(key, wk.types(wk.index(key))):
            attr = self.domain.attributes[a]
            if pa.types.is_integer(t.schema.field(attr.name).type):
                continue
            cats = query_labels(attr, qt, None if qt == "identity" else wk.query_matrix(a, qt))
            df[attr.name] = pd.Categorical(df[attr.name].astype(str), categories=cats)
        return df

    def _table_v1(self, key: AttrSet, e: dict, format: str) -> pd.DataFrame:
        """A table of a format-1 release (one file per marginal and format)."""
        return table_v1(self, key, e, format)

    def answer(self, attrs: Iterable[str] | str, level: float | None = None) -> pd.DataFrame:
        """A workload marginal's queries (the saved table's rows: cells, or ``≤ v`` / ``a..b``
        rows for prefix / range attributes), reconstructed from the saved measurements."""
        lv = self.level if level is None else float(level)
        return self.measurements.answer(attrs, lv)

    def marginal(self, attrs: Iterable[str] | str, level: float | None = None) -> pd.DataFrame:
        """Any marginal of the closure: reconstructed from the saved measurements (the same
        numbers as the saved table when there is one) at ``level`` (default: the release's)."""
        key = self.domain.resolve(attrs)
        lv = self.level if level is None else float(level)
        if not isinstance(self.plan, HasClosure):  # QuerySmasher / pure: the workload entry's answers
            try:
                return self.measurements.answer(key, lv)
            except DPMatrixError:  # no entry on exactly these attributes: their cells, if answerable
                return self.measurements.marginal(key, lv)
        return self.measurements.marginal(key, lv)

    def marginal_columns(self, attrs: Iterable[str] | str, level: float | None = None):
        """The table :meth:`marginal` gives, as ``(columns, kinds, values)`` lists built without
        pandas (what ``dpmatrix query`` prints through :mod:`dpmatrix._table_text`)."""
        key = self.domain.resolve(attrs)
        lv = self.level if level is None else float(level)
        meas = self.measurements
        if not isinstance(self.plan, HasClosure):  # as marginal(): the workload entry's answers first
            try:
                return meas.answer_columns(key, lv)
            except DPMatrixError:
                pass
        return meas.marginal_columns(key, lv)

    def count(self, where=None, *, by=None, contrast=None, level: float | None = None):
        """A count, range, sum or difference of counts from the saved measurements, with the
        exact variance of the reconstruction (never a sum of cell variances) and its interval.

        Parameters
        ----------
        where : mapping, optional
            Per attribute a value, an inclusive range ``(lo, hi)`` (labels, raw numbers of a
            binned attribute), a list, or ``dpmatrix.codes(...)``; ANDed.
        by : str or list of str, optional
            One answer per value of these attributes.
        contrast : pair of mappings, optional
            ``(A, B)``: ``count(where ∧ A) − count(where ∧ B)``.
        level : float, optional
            Confidence level (default: the release's).

        Returns
        -------
        QueryAnswer or GroupedAnswer
            ``estimate, variance, std, lower, upper``; ``to_frame()`` gives tidy rows.

        Examples
        --------
        >>> import numpy as np, pandas as pd, tempfile, dpmatrix as dm
        >>> dom = dm.Domain.from_dict({"age": {"size": 4, "kind": "ordinal"}, "sex": {"labels": ["F", "M"]}})
        >>> plan = dm.plan(dm.Workload(dom, [("age", "sex")]), rho=1e9)
        >>> meas = plan.measure(pd.DataFrame({"age": [0, 1, 2, 3], "sex": ["F", "M", "M", "F"]}),
        ...                     rng=np.random.default_rng(0))
        >>> rel = dm.load_release(dm.write_release(meas, tempfile.mkdtemp() + "/rel"))
        >>> round(rel.count({"age": (1, 3), "sex": "M"}).estimate, 3)
        2.0
        """
        from .._reconstruct.linear_query import count

        lv = self.level if level is None else float(level)
        return count(self.measurements, where, by=by, contrast=contrast, level=lv)

    def report(self, path: str | Path | None = None, *, fairness: bool = True) -> Path:
        """Write a self-contained HTML report of this release (default ``report.html`` in its
        folder): an alias of :func:`dpmatrix.report`."""
        return call_hook("report", self, path, fairness=fairness)
    def postprocess(self, **options):
        """Non-negative, consistent marginals fitted to the saved measurements
        (:meth:`Measurements.postprocess <dpmatrix._reconstruct.measurements.Measurements.postprocess>`)."""
        return self.measurements.postprocess(**options)

    def synthetic(self, rows: int | None = None, *, rng: np.random.Generator, **options) -> pd.DataFrame:
        """Synthetic records from the saved measurements (see :meth:`postprocess`)."""
        return self.measurements.synthetic(rows, rng=rng, **options)

    def __repr__(self) -> str:
        p = self.manifest["privacy"]
        return (
            f"Release({str(self.path)!r}, {len(self.marginals)} marginals, rho={p['rho']:.6g}, "
            f"epsilon={p['epsilon']:.6g} at delta={p['delta']:.3g})"
        )


def _open_measurements(rel: Release) -> Measurements:
    from .._reconstruct.measurements import Measurements

    manifest, plan, folder = rel.manifest, rel.plan, rel.path
    meas_info = manifest.get("measurements", {})
    rel_path = meas_info.get("file", MEASUREMENTS) if isinstance(meas_info, dict) else MEASUREMENTS
    path = _inside(folder, rel_path)
    mech = manifest.get("mechanism", {})
    if not isinstance(plan, HasClosure):
        noise = mech.get("noise", "gaussian")
        noisy = _read_mechanism_outputs(path, plan, noise, rel._digest(rel_path))
        return Measurements(plan=plan, noisy=noisy, noise=noise, randomness=mech.get("randomness", "unknown"),
                            provenance=_provenance(manifest))
    noisy = _ParquetResiduals(path, plan.domain, rel._digest(rel_path))
    dom = plan.domain
    expected = {s for s, m in zip(plan.closure.sets, plan.measured) if m}
    got = set(noisy)
    missing, extra = expected - got, got - expected
    if missing or extra:
        which = sorted(missing or extra)[0]
        raise ReleaseError(
            f"measurements do not match the plan: {len(missing)} measured residual(s) missing, "
            f"{len(extra)} unexpected (e.g. {dom.names_of(which)})"
        )
    for key in expected:
        want = tuple(plan.mechanism(key).output_shape)
        if noisy.shape(key) != want:
            raise ReleaseError(
                f"measurements of {dom.names_of(key)} have shape {noisy.shape(key)}, the plan "
                f"expects {want}"
            )
    mech = manifest.get("mechanism", {})
    return Measurements(
        plan=plan, noisy=noisy, noise=mech.get("noise", "gaussian"),
        randomness=mech.get("randomness", "unknown"), provenance=_provenance(manifest),
    )


def _provenance(manifest: dict):
    """The measurements' provenance as the manifest states it (ledger entry or status)."""
    from .._provenance import Provenance

    mech = manifest.get("mechanism", {})
    return Provenance.from_manifest(manifest.get("ledger"), str(mech.get("randomness", "unknown")))


def load_release(folder: str | Path, *, verify: bool = True) -> Release:
    """Read a release folder written by :func:`write_release`.

    Parameters
    ----------
    folder : str or Path
        The release folder. If it is missing because an overwrite was interrupted, its complete
        hidden copy (``.NAME.partial-*`` / ``.NAME.old-*``) is read instead, with a warning.
    verify : bool
        Check ``manifest.json`` against ``manifest.sha256`` now, and every other file against
        the manifest's SHA-256 when it is read (default). The stated ρ/ε are always checked
        against the manifest's noise scales, and manifest paths always confined to the folder.

    Returns
    -------
    Release
        Measurements are opened lazily: printing a saved table reads only the manifest and
        that table.

    Examples
    --------
    See :func:`write_release`.
    """
    folder = _existing_folder(Path(folder))
    manifest = _read_manifest(folder, verify)
    plan = _checked_plan(manifest, folder, verify)
    # paths are confined when each file is read (Release.file), not all up front: printing one
    # saved table of a release with thousands of tables stays fast
    return Release(path=folder, manifest=manifest, plan=plan, verify=verify)


@dataclass(frozen=True)
class SavedTable:
    """A saved marginal table as plain columns, with what a printout of it states.

    ``kinds[j]`` says how :meth:`Release.table` holds column ``j``: ``"int"`` (integer codes),
    ``"float"`` (estimate, variance, std, lower, upper) or ``"text"`` (labels, bins, query
    rows); ``values[j]`` are its entries (``nan`` for a missing number, ``None`` for a missing
    text).
    """

    attributes: tuple[str, ...]
    columns: tuple[str, ...]
    kinds: tuple[str, ...]
    values: tuple[list, ...]
    level: float
    privacy: dict
    file: str

    def column(self, name: str) -> list:
        """The entries of one column."""
        return self.values[self.columns.index(name)]

    def to_pandas(self) -> pd.DataFrame:
        """The table as a DataFrame (text columns as ``object``)."""
        import pandas as pd

        dtypes = {"int": "int64", "float": "float64", "text": object}
        return pd.DataFrame(
            {c: pd.Series(v, dtype=dtypes[k]) for c, k, v in zip(self.columns, self.kinds, self.values)}
        )


def read_checked_manifest(folder: str | Path, *, verify: bool = True) -> dict:
    """A release's manifest with the checks :func:`read_saved_table` makes (the manifest's own
    digest; without digests, the stated privacy against the plan's noise scales), without
    building the plan when the digests vouch for it: what listing a release needs.

    Parameters
    ----------
    folder : str or Path
        The release folder.
    verify : bool, default True
        Check the SHA-256 digests (``False``: the plan is built and its privacy checked).

    Returns
    -------
    dict
        The parsed ``manifest.json``.
    """
    folder = _existing_folder(Path(folder))
    manifest = _read_manifest(folder, verify)
    if not (verify and isinstance(manifest.get("files"), dict)):
        _checked_plan(manifest, folder, verify)
    return manifest


def read_saved_table(
    folder: str | Path, attrs: Iterable[str] | str, *, verify: bool = True, level: float | None = None
) -> SavedTable | None:
    """One saved marginal table, read directly: the manifest and that table's file, nothing
    else — no measurements, no plan, no pandas (``dpmatrix query``).

    The manifest is checked against ``manifest.sha256`` and the table against its SHA-256, as
    by :func:`load_release`. A digest-checked manifest is the one dpmatrix wrote, whose privacy
    statement it computed from the same noise scales, so the plan is not rebuilt; without
    ``verify`` (or for a manifest without digests) nothing vouches for that statement, and the
    plan is built to check it against the noise scales, as :func:`load_release` does.

    Parameters
    ----------
    folder : str or Path
        The release folder (its complete hidden copy if an overwrite was interrupted).
    attrs : iterable of str, or str
        Attribute names of the marginal, in any order.
    verify : bool
        Check the SHA-256 digests (default).
    level : float, optional
        The confidence level asked for; a saved table holds the release's own only.

    Returns
    -------
    SavedTable or None
        ``None`` when the release saved no table of that marginal at that level: reconstruct it
        with ``load_release(folder).marginal(attrs, level)``.

    Examples
    --------
    >>> import numpy as np, pandas as pd, tempfile, dpmatrix as dm
    >>> from dpmatrix.release import read_saved_table
    >>> plan = dm.plan(dm.Workload(dm.Domain({"a": 2, "b": 3}), [("a", "b")]), rho=1.0)
    >>> meas = plan.measure(pd.DataFrame({"a": [0, 1], "b": [2, 0]}), rng=np.random.default_rng(0))
    >>> folder = dm.write_release(meas, tempfile.mkdtemp() + "/rel")
    >>> t = read_saved_table(folder, ["b", "a"])
    >>> t.columns[:3], t.kinds[:3], len(t.column("estimate"))
    (('a', 'b', 'estimate'), ('int', 'int', 'float'), 6)
    >>> read_saved_table(folder, "a") is None  # not saved: reconstruct it
    True
    """
    folder = _existing_folder(Path(folder))
    manifest = _read_manifest(folder, verify)
    if not (verify and isinstance(manifest.get("files"), dict)):
        _checked_plan(manifest, folder, verify)
    try:
        domain = Domain.from_dict(manifest["domain"])
        entries, formats = manifest["marginals"], manifest["tables"]["formats"]
        release_level = float(manifest["confidence_level"])
    except KeyError as exc:
        raise ReleaseError(f"the manifest of {str(folder)!r} lacks {exc}") from None
    except (DPMatrixError, TypeError, ValueError) as exc:
        raise ReleaseError(f"the manifest of {str(folder)!r} does not describe a valid release: {exc}") from None
    key = domain.resolve(attrs)
    names = domain.names_of(key)
    if level is not None and float(level) != release_level:
        return None
    entry = next((e for e in entries if sorted(e["attributes"]) == sorted(names)), None)
    if entry is None:
        return None
    fmt = formats[0]
    if fmt == "parquet" and isinstance(entry.get("table"), Mapping):  # format 2: the dataset
        table, rel = _dataset_table(folder, manifest, entry, verify)
        columns, kinds, values = _plain_columns(table, set())  # text stays text, codes are int64
        return SavedTable(attributes=tuple(names), columns=columns, kinds=kinds, values=values,
                          level=release_level, privacy=dict(manifest["privacy"]), file=rel)  # fmt: skip
    files = entry.get("files", {})
    if fmt not in files:
        raise ReleaseError(f"this release has no {fmt} tables (it has {sorted(files) or 'none'})")
    rel = files[fmt]
    path = _checked_file(folder, rel, _stated_digest(manifest, folder, rel, verify))
    if fmt == "csv" and manifest.get("format") != READABLE_FORMATS[0]:  # format 2: typed by the manifest
        types = manifest["tables"].get("label_columns", {})
        cols = [str(c) for c in entry.get("columns", entry["attributes"])]
        codes = {c for c, t in types.items() if t == CODE} | set(entry.get("codes", ()))
        columns, kinds, values = _plain_columns(read_csv_table(path, rel, cols, codes), set())
        return SavedTable(attributes=tuple(names), columns=columns, kinds=kinds, values=values,
                          level=release_level, privacy=dict(manifest["privacy"]), file=rel)  # fmt: skip
    try:
        if fmt == "parquet":
            table = pq.ParquetFile(str(path)).read()
        else:  # typed as pandas reads it, as Release.table does
            import pandas as pd

            table = pa.Table.from_pandas(pd.read_csv(path), preserve_index=False)
    except (OSError, ValueError, pa.lib.ArrowException) as exc:
        raise ReleaseError(f"cannot read {str(path)!r}: {exc}") from None
    columns, kinds, values = _plain_columns(table, _label_columns(manifest, domain, key))
    return SavedTable(attributes=tuple(names), columns=columns, kinds=kinds, values=values,
                      level=release_level, privacy=dict(manifest["privacy"]), file=rel)  # fmt: skip


def _dataset_table(folder: Path, manifest: Mapping[str, Any], entry: Mapping[str, Any], verify: bool) -> tuple[pa.Table, str]:
    """A table of the release's Parquet dataset (format 2): its row group only, verified (with
    the footer) against the manifest's record of that part unless ``verify`` is false."""
    loc = entry["table"]
    rel = loc.get("file")
    path = _inside(folder, rel)
    record = None
    if verify:
        parts = manifest.get("tables", {}).get("parts", {})
        record = parts.get(rel) if isinstance(parts, dict) else None
        if not isinstance(record, dict):
            raise ReleaseError(f"{rel!r} has no integrity record in the manifest of {str(folder)!r}")
    key = entry.get("key", marginal_key(entry["attributes"], manifest.get("tables", {}).get("key", "comma")))
    cols = [str(c) for c in entry.get("columns", entry["attributes"])]
    return read_table(path, rel, loc, [*cols, *STAT_COLUMNS], key, record, entry.get("codes", ())), rel


def _label_columns(manifest: Mapping[str, Any], domain: Domain, key: AttrSet) -> set[str]:
    """The attribute columns :meth:`Release.table` turns into labels: those with labels or bins,
    and those asked with a query type other than cells; none for a plan that lists its
    mechanisms (its tables are returned as written)."""
    if "plan" in manifest:
        return set()
    out = {domain.attributes[a].name for a in key
           if domain.attributes[a].labels is not None or domain.attributes[a].bins is not None}  # fmt: skip
    if len(out) < len(key):  # the query types decide for the plain attributes
        spec = manifest["workload"]
        want = sorted(domain.names_of(key))
        own = [m for m in spec["marginals"] if sorted(m["attributes"] if isinstance(m, Mapping) else m) == want]
        # the workload of this one marginal (types read as Workload.from_dict reads them), not
        # the whole workload: thousands of marginals would cost more than the table itself
        wk = Workload.from_dict(domain, {**spec, "marginals": own[:1], "weights": None} if own else spec)
        out.update(domain.attributes[a].name for a, t in zip(key, wk.types(wk.index(key))) if t != "identity")
    return out


def _plain_columns(table: pa.Table, labels: set[str]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[list, ...]]:
    """Names, kinds and Python values of an Arrow table's columns (see :class:`SavedTable`):
    ``labels`` columns as text (``str`` of each value), integers with missing values as floats."""
    kinds: list[str] = []
    values: list[list] = []
    for name, col in zip(table.column_names, table.columns):
        typ = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
        vals = col.to_pylist()
        if name in labels or not (pa.types.is_integer(typ) or pa.types.is_floating(typ)):
            kind, vals = "text", [None if v is None else str(v) for v in vals]
        elif pa.types.is_integer(typ) and col.null_count == 0:
            kind = "int"
        else:
            kind, vals = "float", [math.nan if v is None else float(v) for v in vals]
        kinds.append(kind)
        values.append(vals)
    return tuple(table.column_names), tuple(kinds), tuple(values)
