"""One release workflow: validate → reserve on the ledger → count → noise → write and report
inside the output lock → mark the ledger entry.

:func:`publish` is the only code that turns records into a published release with its privacy
spend recorded; ``dpmatrix release`` and ``dpmatrix demo`` call it and hold no privacy logic of
their own. The order of the steps is the guarantee:

1. **Validate without the data's contents**: options, the plan (every residual the workload
   needs is measured, :func:`~dpmatrix._plan_file.check_needed_residuals`), the size and peak
   memory estimate (:mod:`dpmatrix._sizing`; the memory check stays when ``max_cells`` is
   raised), the output path (a symlinked output or lock is refused; an input glob that would
   read the output's own files is refused), and the data's header (duplicate column names are
   refused; a column the domain names but the header spells with another case or spacing gets
   a "did you mean").
2. **Validate the data**: the engine is opened (every engine checks codes / labels at open).
3. **Reserve** the plan's spend on the ledger (:meth:`dpmatrix.Ledger.reserve`) — the cap check
   and the insert are one transaction.
4. **Count, then noise.** Until the first count has returned no noise can have been drawn: a
   failure up to there marks the entry ``refused`` (with why; nothing charged). After it the
   entry stays charged whatever happens (``failed`` on error): the noise may exist.
5. **Write and report inside the lock**: the release and its ``report.html`` are written and
   the report's digest is added to the digest list while the output lock is held, so the folder
   never pairs one release with another's report.
6. **Mark** the entry ``completed``; the manifest records the ledger id, the entry and its chain
   hash (:meth:`dpmatrix.Ledger.anchor`), so ``dpmatrix ledger verify RELEASE`` can later detect
   a truncated, edited or recreated ledger.

A failure in steps 1–2 records a ``refused`` entry when the ledger could already fingerprint the
data (so the office sees attempts), and charges nothing.

Randomness: ``rng=None`` (the default) draws exact noise from the OS's secure source. A
generator ``rng`` makes the noise reproducible by whoever has the seed: it is warned
(:class:`~dpmatrix._measure.discrete.InsecureRandomnessWarning`) and every artifact is marked
NOT PRIVATE.
"""

from __future__ import annotations

import csv
import difflib
import glob as _glob
import io
import os
import shutil
import stat
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._domain import Domain
from ._encode import duplicate_columns_message, missing_columns_message
from ._ledger import ContentIdentified, Ledger, LedgerError
from ._measure.discrete import InsecureRandomnessWarning
from ._measure.measure_plan import check_budget_holds, used_attributes
from ._measure.unit_records import bounded_records
from ._plan_file import check_needed_residuals
from ._privacy import Budget
from ._release_tables import check_columns
from ._report.into import write_report_into
from ._sizing import (
    DEFAULT_MAX_CELLS,
    ReleaseSize,
    SizeError,
    check_size,
    describe_size,
    estimate_size,
)
from ._unit import Unit, person_budget, unit_privacy
from .engines import Closable
from .errors import DataError, DPMatrixError, ReleaseError
from .protocols import HasClosure
from .release import (
    DEFAULT_DELTA,
    DEFAULT_FORMATS,
    MANIFEST,
    NOT_IN_LEDGER,
    check_target,
    output_lock,
    recover_output,
    write_release,
)

__all__ = ["Published", "check_header", "check_memory", "check_output", "open_source", "publish", "write_report_into"]


_CSV_SUFFIXES = (".csv", ".tsv", ".txt", ".csv.gz", ".tsv.gz", ".csv.zst")


@dataclass(frozen=True)
class Published:
    """What :func:`publish` did.

    Attributes
    ----------
    path : Path
        The release folder.
    measurements : Measurements
        The noisy measurements (query them like any other).
    privacy : dict
        The manifest's privacy statement.
    ledger : dict or None
        The ledger anchor recorded in the manifest (``None``: not in any ledger).
    report : Path or None
        ``report.html`` in the folder (``None`` when not asked).
    size : ReleaseSize
        The size estimate checked before the data were read.
    """

    path: Path
    measurements: Any
    privacy: dict
    ledger: dict | None
    report: Path | None
    size: ReleaseSize


# -- checks before any data are read -------------------------------------------------------------
def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (``MemAvailable`` of ``/proc/meminfo``,
    else physical memory), ``None`` if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(size: ReleaseSize, available: int | None = None) -> None:
    """Raise :class:`~dpmatrix._sizing.SizeError` when the estimated peak memory exceeds the
    memory available (it applies whatever ``max_cells`` allows: raising that limit says the
    output may be large, not that the machine can hold it).

    Parameters
    ----------
    size : ReleaseSize
    available : int, optional
        Bytes; default :func:`available_memory`.

    Examples
    --------
    >>> from dpmatrix._sizing import ReleaseSize
    >>> check_memory(ReleaseSize(10, 10, 160, 2 * 10**9), available=10**9)
    Traceback (most recent call last):
    ...
    dpmatrix._sizing.SizeError: this release needs about 2 GB of memory (size estimate: 10 table rows, at most 10 noisy values, ~160 B written, peak memory ~2 GB), more than the 1 GB available; keep the noisy answers on disk (spill=True, --spill) or choose fewer or smaller marginals
    """
    avail = available_memory() if available is None else available
    if avail is None or size.peak_memory <= avail:
        return
    from ._bytesize import format_bytes

    raise SizeError(
        f"this release needs about {format_bytes(size.peak_memory)} of memory ({describe_size(size)}), more "
        f"than the {format_bytes(avail)} available; keep the noisy answers on disk (spill=True, --spill) or "
        "choose fewer or smaller marginals"
    )


def _input_files(data: str) -> list[Path]:
    if any(ch in data for ch in "*?["):
        return [Path(p) for p in sorted(_glob.glob(data, recursive=True))]
    return [Path(data)]


def check_output(out: str | Path, data: Any = None) -> Path:
    """Refuse an output that would betray the release: ``out`` (or its lock file) a symbolic
    link, or a data path / glob that reads files inside ``out`` (its own release files would be
    counted as records).

    Parameters
    ----------
    out : str or Path
    data : str or Path, optional

    Returns
    -------
    Path
        ``out`` as an absolute path.
    """
    out = Path(out)
    absolute = out.absolute()
    for p in (absolute, absolute.parent / f".{absolute.name}.lock"):
        if p.is_symlink():
            raise ReleaseError(f"{str(p)!r} is a symbolic link; refusing to write a release through it "
                               "(give the real folder)")  # fmt: skip
    if isinstance(data, (str, Path)):
        root = absolute.resolve()
        for f in _input_files(str(data)):
            r = f.absolute().resolve()
            if r == root or root in r.parents:
                raise ReleaseError(
                    f"the data {str(data)!r} match {str(f)!r}, inside the output folder {str(out)!r}: the "
                    "release's own files would be read as records; move the output or narrow the pattern"
                )
    return absolute


def _header(path: Path, delimiter: str | None) -> list[str] | None:
    """The first line of a CSV file split RFC-4180 style (``None`` if unreadable here: the
    engine reports it)."""
    opener: Callable[..., Any] = open
    if path.name.lower().endswith(".gz"):
        import gzip

        opener = gzip.open
    elif path.name.lower().endswith(".zst"):
        return None
    try:
        with opener(path, "rb") as f:
            raw = f.readline(1 << 20)
    except OSError:
        return None
    text = raw.decode("utf-8-sig", errors="replace").rstrip("\r\n")
    if not text:
        return None
    delim = delimiter or ","  # as every engine reads it
    return next(csv.reader(io.StringIO(text), delimiter=delim, quotechar='"', doublequote=True))


def check_header(columns: Sequence[str], domain: Domain, where: str = "the data") -> None:
    """Refuse duplicate column names, and columns the domain needs that the data spell
    differently (case, surrounding spaces), with a "did you mean".

    Parameters
    ----------
    columns : sequence of str
        The data's column names, in order.
    domain : Domain
    where : str
        How the data are named in messages.

    Examples
    --------
    >>> import dpmatrix as dm
    >>> check_header(["Age", "sex"], dm.Domain({"age": 3, "sex": 2}))
    Traceback (most recent call last):
    ...
    dpmatrix.errors.DataError: the data lack column(s) required by the domain: 'age' (the data have: 'Age', 'sex'); headers differ only in case or spacing: 'age' -> did you mean 'Age'? (rename the data's columns or the domain's attributes to match exactly)
    """
    seen: dict[str, int] = {}
    dups = []
    for c in columns:
        seen[c] = seen.get(c, 0) + 1
        if seen[c] == 2:
            dups.append(c)
    if dups:
        raise DataError(duplicate_columns_message(dups, where))
    have = set(columns)
    missing = [n for n in domain.names if n not in have]
    if not missing:
        return
    # headers that differ only in case or spacing are named by the shared message; a near
    # spelling (a typo) gets its own did-you-mean here
    said = missing_columns_message(missing, list(columns)).replace("the data", where, 1)
    hints = []
    for n in missing:
        near = next(iter(difflib.get_close_matches(n, list(columns), 1, 0.8)), None)
        if near is not None and f"{n!r} -> did you mean" not in said:
            hints.append(f"for {n!r} did you mean {near!r}? (column names are matched exactly)")
    if len(columns) == 1:
        for d in (";", "\t", "|", ","):
            if d in columns[0]:
                hints.append(f"the header looks {d!r}-separated: give delimiter={d!r} (--delimiter)")
                break
    raise DataError(said + "".join("; " + h for h in hints))


# -- the data source -----------------------------------------------------------------------------
def open_source(
    data: Any,
    domain: Domain,
    *,
    engine: Any = "duckdb",
    encoding: str = "auto",
    on_unknown: str | Mapping[str, str] = "error",
    data_format: str | None = None,
    delimiter: str | None = None,
    memory_limit: str | None = None,
    temp_directory: Path | None = None,
    spark_master: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    spark_executor_timeout: float = 300.0,
    na_values: Sequence[str] = (),
    attributes: Sequence[int] | None = None,
):
    """The counting engine of ``data``: a path or glob counted by ``engine`` (``"duckdb"``,
    ``"numpy"`` or ``"spark"``), a DataFrame (in memory), or an engine used as is. Every engine
    validates the records when it is opened.

    Returns
    -------
    engine
    """
    from .engines import engine_for

    if not isinstance(data, (str, Path)):
        return engine_for(data, domain, engine=None if isinstance(engine, str) and engine != "spark" else engine,
                          encoding=encoding, on_unknown=on_unknown, na_values=na_values,
                          attributes=attributes)  # fmt: skip
    text = str(data)
    # a local path (not a URI, not a Spark table name): checked here, the same for every engine
    local = "://" not in text and (engine != "spark" or Path(text).is_file() or any(ch in text for ch in "*?["))
    if local:
        _check_local_csv(text, domain, data_format, delimiter)
    if engine == "spark":
        from .engines._spark_engine import detect_spark_format

        fmt = detect_spark_format(text, data_format)
        if delimiter and fmt != "csv":
            raise DataError("delimiter applies to CSV files only")
        return engine_for(text, domain, engine="spark", encoding=encoding, format=fmt, on_unknown=on_unknown,
                          master=spark_master, conf=dict(spark_conf or {}), executor_timeout=spark_executor_timeout,
                          csv_options={"sep": delimiter} if delimiter else None, na_values=na_values,
                          attributes=attributes)  # fmt: skip
    from .engines._duckdb_engine import detect_format

    fmt = detect_format(text, data_format)
    if engine == "duckdb":
        return engine_for(text, domain, encoding=encoding, format=fmt, on_unknown=on_unknown,
                          csv_options={"delim": delimiter} if delimiter else None, memory_limit=memory_limit,
                          temp_directory=temp_directory, na_values=na_values, attributes=attributes)  # fmt: skip
    if engine != "numpy":
        raise DataError(f"engine must be 'duckdb', 'numpy' or 'spark', got {engine!r}")
    import pandas as pd

    from ._encode import read_csv_text

    try:
        raw = read_csv_text(text, domain, delimiter=delimiter) if fmt == "csv" else pd.read_parquet(text)
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read {text!r}: {exc}") from None
    return engine_for(raw, domain, encoding=encoding, on_unknown=on_unknown, na_values=na_values,
                      attributes=attributes)


def _check_local_csv(text: str, domain: Domain, data_format: str | None, delimiter: str | None) -> None:
    """The local file(s) exist, and a CSV header names every domain column once (the same
    message whatever engine reads it next)."""
    from .engines._duckdb_engine import detect_format

    files = _input_files(text)
    if not files or not all(f.is_file() for f in files):
        raise DataError(f"data file {text!r} does not exist" if not files or not files[0].exists()
                        else f"data {text!r} is not a file")  # fmt: skip
    fmt = detect_format(text, data_format)
    if delimiter and fmt != "csv":
        raise DataError("delimiter applies to CSV files only")
    if fmt == "csv":
        for f in files:
            cols = _header(f, delimiter)
            if cols is not None:
                check_header(cols, domain, f"the data {str(f)!r}")


def fingerprint(ledger: Ledger, data: Any, engine: Any = None) -> str:
    """The ledger's keyed fingerprint of ``data``: the engine's own identity when it can name
    its content (:class:`~dpmatrix._ledger.ContentIdentified`), else the bytes of the local
    file(s), else a content hash of an in-memory table.

    Raises
    ------
    LedgerError
        For a source that cannot be identified (give a path, or an engine with
        ``fingerprint()``).
    """
    if isinstance(engine, ContentIdentified):
        return ledger.fingerprint(engine)
    if isinstance(data, ContentIdentified) and not isinstance(data, (str, Path)):
        return ledger.fingerprint(data)
    if isinstance(data, (str, Path)):
        return ledger.fingerprint(str(data))
    try:
        import numpy as np
        import pandas as pd

        if isinstance(data, pd.DataFrame):
            h = pd.util.hash_pandas_object(data, index=False).to_numpy()
            return ledger.fingerprint(repr(list(map(str, data.columns))).encode() + b"\0" + h.tobytes())
        if isinstance(data, np.ndarray):
            return ledger.fingerprint(repr((data.dtype.str, data.shape)).encode() + b"\0" + data.tobytes())
    except ImportError:  # pragma: no cover - pandas is a dependency
        pass
    raise LedgerError(
        f"the ledger cannot identify data of type {type(data).__name__}: give a file path, a DataFrame, or an "
        "engine with a fingerprint() method (dpmatrix._ledger.ContentIdentified)"
    )


class _Gate:
    """Wraps an engine: remembers whether any count has been handed to the noise step (until
    then no noise can exist) and drives an optional "counting" bar."""

    def __init__(self, engine: Any, bar: Any = None):
        self._engine = engine
        self.bar = bar
        self.counted = False

    @property
    def domain(self) -> Domain:
        return self._engine.domain

    @property
    def n_records(self) -> int:
        return self._engine.n_records

    @property
    def preferred_batch(self) -> int | None:
        """The wrapped engine's batch size (``measure.counting.count_batch``)."""
        return getattr(self._engine, "preferred_batch", None)

    def count(self, attr_sets, progress: bool = False):
        out = self._engine.count(attr_sets)
        self.counted = True  # from here on noise may be drawn from these counts
        if self.bar is not None:
            self.bar.update(len(out))
        return out

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        close = getattr(self._engine, "close", None)
        if close is not None:
            close()


def _measured_sets(plan) -> list:
    from .engines import maximal_sets

    if isinstance(plan, HasClosure):
        sets = [s for s, m in zip(plan.closure.sets, plan.measured) if m]
    else:
        sets = list({m.attrs for m in plan.mechanisms()[1]})
    return maximal_sets(sets)


def _is_pure(plan) -> bool:
    return plan.budget.is_pure


def _charge(plan, unit: Unit | None = None) -> dict[str, float]:
    """What the ledger is charged: ρ for a zCDP plan (the rounded-up σ of discrete noise spends
    at most that), ε for a pure ε-DP plan (the ledger adds ρ = ε²/2); with a privacy unit, the
    per-person cost (ρ·k², ε·k: :func:`dpmatrix._unit.person_budget`), which protects the person."""
    if _is_pure(plan):
        eps = float(plan.pure_epsilon)
        return {"epsilon": eps if unit is None else person_budget(Budget.pure(eps), unit).pure_epsilon}
    rho = float(plan.rho)
    return {"rho": rho if unit is None else rho * unit.max_records**2}


def _existing_anchor(out: Path) -> dict | None:
    """The ledger anchor of a release already in ``out`` (``None`` if none)."""
    from ._jsonfile import loads_strict

    try:
        manifest = loads_strict((out / MANIFEST).read_text(encoding="utf-8"), ReleaseError, MANIFEST)
    except (OSError, ReleaseError, UnicodeDecodeError):
        return None
    led = manifest.get("ledger") if isinstance(manifest, dict) else None
    return led if isinstance(led, dict) and "ledger" in led else None


def _open_ledger(ledger: Any) -> Ledger | None:
    if ledger is False:
        return None
    if isinstance(ledger, Ledger):
        return ledger
    return Ledger(ledger)


# -- the workflow --------------------------------------------------------------------------------
def publish(
    plan: Any,
    data: Any,
    out: str | Path,
    *,
    dataset: str | None = None,
    ledger: Ledger | str | Path | bool | None = None,
    engine: Any = "duckdb",
    encoding: str = "auto",
    on_unknown: str | Mapping[str, str] = "error",
    data_format: str | None = None,
    delimiter: str | None = None,
    memory_limit: str | None = None,
    spark_master: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    spark_executor_timeout: float = 300.0,
    level: float = 0.95,
    delta: float = DEFAULT_DELTA,
    formats: Iterable[str] = DEFAULT_FORMATS,
    round: int | None = None,
    noise: str = "auto",
    overwrite: bool = False,
    report: bool = True,
    max_cells: int | None = DEFAULT_MAX_CELLS,
    spill: bool = False,
    rng: Any = None,
    progress: bool = False,
    notes: Mapping[str, Any] | None = None,
    na_values: Sequence[str] = (),
    on_note: Callable[[str], None] | None = None,
    privacy_unit: Unit | None = None,
) -> Published:
    """Measure ``data`` with ``plan`` and publish the release in ``out``, charged to a
    privacy-budget ledger first (the steps and their guarantees are in the module docstring).

    Parameters
    ----------
    plan : Plan
        From :func:`dpmatrix.plan` or a checked plan file (:func:`dpmatrix._plan_file.load_plan`).
    data : str, Path, pandas.DataFrame or engine
        A CSV/Parquet path or glob (read by ``engine``), records in memory, or an engine.
    out : str or Path
        The release folder (missing, empty, or — with ``overwrite`` — an earlier release).
    dataset : str, optional
        The name the spend is charged to; default: the file's name without suffixes (required
        for data that are not a file).
    ledger : Ledger, str, Path, False or None
        The ledger (object or file); ``None``: the default ledger
        (:func:`dpmatrix._ledger.default_ledger_path`); ``False``: record nothing — the release
        then states "not in any ledger" (warned).
    engine : {"duckdb", "numpy", "spark"} or engine
        How a path is counted.
    encoding : {"auto", "raw", "codes"}
    on_unknown : str or mapping
        Raw values the domain does not cover (:func:`dpmatrix._encode.encode_frame`).
    data_format : {"csv", "parquet"}, optional
        Default: from the suffix.
    delimiter : str, optional
        One character (CSV only); default ``,`` (tab for ``.tsv``).
    memory_limit : str, optional
        DuckDB's memory limit, e.g. ``"4GB"``.
    spark_master, spark_conf : optional
        For ``engine="spark"``.
    level : float
        Confidence level of the tables' intervals.
    delta : float
        δ at which ε is stated (0 for a pure ε-DP plan).
    formats : iterable of {"parquet", "csv"}
    round : int, optional
        Decimals of the published tables (post-processing).
    noise : str
        ``"auto"``: the secure exact sampler (see :func:`dpmatrix.measure`).
    overwrite : bool
        Replace an earlier release in ``out``.
    report : bool
        Write ``report.html`` (inside the lock, covered by the digest list).
    max_cells : int or None
        Limit on table rows + noisy values (the memory check applies regardless).
    spill : bool
        Keep the noisy answers on disk while writing.
    rng : numpy.random.Generator, optional
        Testing only: reproducible, NOT private (warned, and marked in every artifact).
    progress : bool
    notes : mapping, optional
        Extra JSON-ready facts for the manifest (nothing computed from the data).
    on_note : callable, optional
        Receives one-line progress notes (the ledger's totals before this release).
    privacy_unit : Unit, optional
        Protect a person with up to ``k`` records (default: the plan's,
        ``dm.plan(..., privacy_unit=unit)``, whose budget is then the record-level one): the
        records are read with the identifier column and bounded to ``k`` per identifier in memory
        (:mod:`dpmatrix._measure.unit_records`; every engine), the ledger is charged the per-person
        cost (ρ·k², ε·k) and the manifest, README.txt, report and ledger note name the unit.

    Returns
    -------
    Published

    Examples
    --------
    >>> import os, tempfile, pandas as pd, dpmatrix as dm
    >>> tmp = tempfile.mkdtemp()
    >>> led = dm.Ledger(os.path.join(tmp, "ledger.sqlite3"))
    >>> dom = dm.Domain({"a": 2, "b": 3})
    >>> plan = dm.plan(dm.Workload(dom, [("a", "b")]), rho=0.5)
    >>> df = pd.DataFrame({"a": [0, 1, 1], "b": [2, 0, 2]})
    >>> done = dm.publish(plan, df, os.path.join(tmp, "rel"), dataset="toy", ledger=led, report=False)
    >>> led.spent("toy").rho, led.rows()[0]["status"]
    (0.5, 'completed')
    """
    say = on_note or (lambda text: None)
    formats, noise_arg, delta, size = _validate(plan, formats=formats, level=level, noise=noise, delta=delta,
                                                max_cells=max_cells, rng=rng, spill=spill, say=say)
    out_abs = check_output(out, data)
    dataset, led = _ledger_for(out, out_abs, data, dataset, ledger, overwrite)
    unit = privacy_unit if privacy_unit is not None else plan.privacy_unit
    charge = _charge(plan, unit)
    entry_note = f"release to {out}" + (f"; privacy unit: {unit.describe()}" if unit is not None else "")
    with output_lock(out_abs) as fresh:
        if fresh:
            recover_output(out_abs)
        check_target(out_abs, overwrite)
        work = _work_folder(out_abs)
        try:
            opened = {  # how the data are opened, the same for every engine
                "engine": engine, "encoding": encoding, "on_unknown": on_unknown, "data_format": data_format,
                "delimiter": delimiter, "memory_limit": memory_limit, "temp_directory": work / "duckdb",
                "spark_master": spark_master, "spark_conf": spark_conf,
                "spark_executor_timeout": spark_executor_timeout, "na_values": na_values,
                "attributes": used_attributes(plan),
            }  # fmt: skip
            eng, fp = _open_data(plan, data, opened, unit, led, dataset, charge, entry_note)
            return _measure_and_write(
                plan, eng, out_abs, led, dataset, fp, charge, noise_arg, rng, spill, work, progress, say,
                {"level": level, "delta": delta, "formats": formats, "overwrite": overwrite, "round": round,
                     "reproducible": rng is not None, "privacy_unit": unit}, _with_unit(_with_encoding(notes, eng), unit),
                report, size,
                entry_note,
            )  # fmt: skip
        finally:
            shutil.rmtree(work, ignore_errors=True)


# -- the steps of publish ---------------------------------------------------------------------------
def _validate(plan, *, formats, level, noise, delta, max_cells, rng, spill: bool,
              say: Callable[[str], None]) -> tuple[tuple[str, ...], str | None, float, Any]:
    """Step 1, without the data's contents: the options, the plan (every needed residual is
    measured; the noise keeps the asked (ε, δ)), the output size and peak memory. Returns the
    checked formats, the noise asked of the plan, δ and the size estimate."""
    from .release import check_formats

    formats = check_formats(formats)
    if isinstance(level, (str, bool)) or not 0 < float(level) < 1:
        raise ReleaseError(f"confidence level must be strictly between 0 and 1, got {level!r}")
    noise_arg, delta = _noise_and_delta(plan, noise, delta)
    if max_cells is not None and (isinstance(max_cells, bool) or int(max_cells) <= 0):
        raise SizeError(f"max_cells must be a positive integer, got {max_cells!r}")
    if rng is not None:
        warnings.warn(
            "a seeded generator (rng=) makes the noise reproducible by whoever has the seed: this "
            "release is NOT PRIVATE and every file of it says so; omit rng for the OS's secure source",
            InsecureRandomnessWarning, stacklevel=3,
        )  # fmt: skip
    check_needed_residuals(plan)
    check_budget_holds(plan, noise_arg, rng)  # the noise drawn keeps the asked (epsilon, delta)
    check_columns(plan.domain.names)
    size = estimate_size(plan.workload, formats=len(formats), spill=spill)
    check_size(size, max_cells)
    check_memory(size)
    say(describe_size(size))
    return formats, noise_arg, delta, size


def _noise_and_delta(plan, noise: str | None, delta: float) -> tuple[str | None, float]:
    """The noise asked of the plan and the δ stated: a pure ε-DP plan draws its exact discrete
    Laplace (a zCDP noise is refused) and states δ = 0."""
    from ._statement import check_delta

    if not _is_pure(plan):
        return noise, check_delta(delta)
    if noise not in (None, "auto", "discrete_laplace"):
        raise ReleaseError(f"noise {noise!r} is a zCDP option: a pure epsilon-DP plan uses the exact discrete Laplace")
    return None, 0.0


def _ledger_for(out, out_abs: Path, data, dataset: str | None, ledger, overwrite: bool) -> tuple[str | None, Ledger | None]:
    """The dataset name the spend is charged to and the open ledger (``None``: not recorded,
    warned); an earlier release about to be overwritten must belong to this ledger."""
    if dataset is None:
        if not isinstance(data, (str, Path)):
            if ledger is not False:
                raise LedgerError("give dataset= (the name the spend is charged to) for data that are not a file")
        else:
            dataset = dataset_name(str(data))
    led = _open_ledger(ledger)
    if led is None:
        warnings.warn(f"ledger=False: this release is {NOT_IN_LEDGER} (no privacy-budget record)", UserWarning,
                      stacklevel=3)  # fmt: skip
        return dataset, None
    if led.created and not isinstance(ledger, Ledger):  # made here, not by the caller
        warnings.warn(
            f"created a new, empty privacy-budget ledger {str(led.path)!r}: if this data was released "
            "before, its spends are in another ledger (check $DPMATRIX_LEDGER, $XDG_DATA_HOME, --ledger)",
            UserWarning, stacklevel=3,
        )  # fmt: skip
    earlier = _existing_anchor(out_abs)
    if earlier is not None and overwrite:
        problems = led.verify_anchor(earlier, f"the earlier release in {str(out)!r}")
        if problems:
            raise LedgerError(f"{problems[0]}; refusing to charge this release to {str(led.path)!r}")
    return dataset, led


def _open_data(plan, data, opened: dict[str, Any], unit: Unit | None, led: Ledger | None, dataset: str | None,
               charge: dict[str, float], entry_note: str) -> tuple[Any, Any]:
    """Step 2: open the engine (every engine validates the records at open) and fingerprint the
    data for the ledger. A failure closes what was opened and, once the data could be
    fingerprinted, records a ``refused`` entry (nothing charged). Returns ``(engine, fingerprint)``."""
    fp = None
    eng = None
    try:
        if unit is not None:  # bounded per person in memory, then counted by numpy (unit_records)
            names = [plan.domain.names[i] for i in (opened["attributes"] or range(len(plan.domain)))]
            bounded = bounded_records(data, names, unit, data_format=opened["data_format"],
                                      delimiter=opened["delimiter"], na_values=opened["na_values"])
            eng = open_source(bounded, plan.domain, **{**opened, "engine": "numpy"})
        elif opened["engine"] == "spark":
            # data a cluster holds (URIs, folders of part files, tables) are identified by the
            # engine's fingerprint, computed in the executors while the records are validated:
            # the driver never reads them, and nothing is counted before the charge
            eng = open_source(data, plan.domain, **opened)
        if led is not None:
            given = opened["engine"] if not isinstance(opened["engine"], str) else None
            fp = fingerprint(led, data, eng if eng is not None else given)
        if eng is None:
            eng = open_source(data, plan.domain, **opened)
    except BaseException as exc:
        if eng is not None and isinstance(eng, Closable):
            eng.close()
        if led is not None and fp is not None and isinstance(exc, DPMatrixError):
            led.record_refusal(dataset, fp, reason=_why(exc), note=entry_note, **charge)
        raise
    return eng, fp


def _with_encoding(notes: Mapping[str, Any] | None, eng: Any) -> Mapping[str, Any] | None:
    """``notes`` with the reading the engine actually used (``"auto"`` resolved to ``"raw"`` or
    ``"codes"``), so the manifest records what was done, not what was asked."""
    used = getattr(eng, "encoding", None)  # file engines record their reading; in-memory ones do not
    if notes is None or used is None or "data" not in notes:
        return notes
    return {**notes, "data": {**notes["data"], "encoding": used}}


def _with_unit(notes: Mapping[str, Any] | None, unit: Unit | None) -> Mapping[str, Any] | None:
    """``notes`` saying how records were read under a privacy unit (whatever engine was named:
    read with the identifier, bounded per person, counted in memory by numpy)."""
    if unit is None or notes is None or "data" not in notes:
        return notes
    route = (f"read with the identifier column {unit.id_column!r}, at most {unit.max_records} records kept per "
             "person (keyed hash), counted in memory by numpy")  # fmt: skip
    return {**notes, "data": {**notes["data"], "counted": route}}


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def _work_folder(out: Path) -> Path:
    """A fresh hidden sibling ``.OUT.work-*`` with owner-only permissions (0700): what is spilled
    there is computed from the un-noised records."""
    from .release import sibling_path

    work = sibling_path(out, "work")
    os.mkdir(work, 0o700)
    os.chmod(work, stat.S_IRWXU)  # the umask cannot widen it, but may have narrowed it
    return work


def dataset_name(data: str) -> str:
    """The default ledger name of a data file: its name without data suffixes; for a URI its
    last path part (``hdfs:///lake/tax/`` is ``tax``), for a glob the folder it reads
    (``lake/tax/*.parquet`` is ``tax``)."""
    path = Path(data.split("://", 1)[-1].rstrip("/"))
    name = path.name
    if any(ch in name for ch in "*?[") and path.parent.name:
        name = path.parent.name
    for suffix in sorted((".csv", ".tsv", ".txt", ".gz", ".zst", ".parquet", ".pq", ".parq"), key=len, reverse=True):
        while name.lower().endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name


def _measure_and_write(plan, eng, out, led, dataset, fp, charge, noise, rng, spill, work, progress, say,
                       write_opts, notes, report, size, entry_note) -> Published:  # fmt: skip
    """Steps 3–6: reserve the spend, count and draw the noise, write the release and its report
    inside the lock, and mark the ledger entry ``completed`` when the reservation closes."""
    from tqdm.auto import tqdm

    gate = _Gate(eng, tqdm(total=len(_measured_sets(plan)), desc="counting", unit="marginal", disable=not progress))
    try:
        with _reserve(led, dataset, fp, charge, entry_note) as entry:
            if led is not None:
                say(_spent_note(led, dataset, fp, charge)
                    + _epsilon_note(plan, noise, rng, write_opts["delta"], write_opts["privacy_unit"]))
            meas = _count_and_noise(plan, gate, entry, noise=noise, rng=rng, store=(work / "store") if spill else None,
                                    progress=progress)  # fmt: skip
            anchor = entry.anchor() if entry is not None else None
            if anchor is not None:  # the measurements carry their ledger entry; the manifest reads it there
                meas = meas.with_ledger(anchor)
            path = write_release(
                meas, out, progress=progress, notes=notes,
                derived=_report_writer if report else None, **write_opts,
            )  # fmt: skip
        # leaving the reservation marked the entry completed (failed, had anything raised)
    except BaseException:
        gate.close()
        raise
    return _published(Path(path), meas, anchor, report, size)


def _reserve(led: Ledger | None, dataset: str | None, fp: Any, charge: dict[str, float], entry_note: str) -> Any:
    """Step 3: the reservation of the plan's spend (the cap check and the insert are one
    transaction); a context whose exit marks the entry ``completed`` or ``failed``. Without a
    ledger, a context that yields ``None``."""
    from contextlib import nullcontext

    return led.reserve(dataset, fp, note=entry_note, **charge) if led is not None else nullcontext()


def _spent_note(led: Ledger, dataset: str | None, fp: Any, charge: dict[str, float]) -> str:
    """What the dataset had spent before this release, and what this release spends."""
    s = led.spent(dataset, fp)
    kind = "pure epsilon" if "epsilon" in charge else "rho"
    total = s.epsilon if "epsilon" in charge else s.rho
    cap = s.epsilon_cap if "epsilon" in charge else s.rho_cap
    this = next(iter(charge.values()))
    return (f"ledger {led.path}: dataset {dataset!r} has spent {kind} = {total - this:.6g}"
            + (f" of its cap {cap:.6g}" if cap is not None else " (no cap set)")
            + f" before this release of {kind} = {this:.6g}")


def _count_and_noise(plan, gate: _Gate, entry: Any, *, noise, rng, store, progress: bool):
    """Step 4: count through the gate, then draw the noise (:func:`dpmatrix.measure`). A failure
    before any count reached the noise step refuses the entry (no noise exists); after it the
    entry stays charged."""
    try:
        return plan.measure(None, rng=rng, progress=progress, engine=gate, noise=noise, store=store,
                            privacy_unit=False)
    except BaseException as exc:
        if entry is not None and not gate.counted:
            entry.refuse(_why(exc))  # nothing was counted: no noise exists
        raise
    finally:
        gate.close()


def _published(path: Path, meas, anchor, report: bool, size) -> Published:
    """Step 6's result: the release folder, its measurements, the manifest's privacy statement,
    the ledger anchor and the report's path."""
    from ._jsonfile import loads_strict
    from ._report import REPORT_FILE

    manifest = loads_strict((path / MANIFEST).read_text(encoding="utf-8"), ReleaseError, MANIFEST)
    return Published(path, meas, manifest["privacy"], anchor, (path / REPORT_FILE) if report else None, size)


def _epsilon_note(plan, noise: str | None, rng: Any, delta: float, unit: Unit | None = None) -> str:
    """`` (epsilon = E at delta = d)``: the statement of the noise this release draws, by the
    function that writes the manifest's (empty for pure ε-DP, whose charge is ε itself); with a
    privacy unit, the per-person statement (the charge is per person)."""
    if _is_pure(plan):
        return ""
    from ._measure.secure import resolve_noise
    from ._statement import privacy_summary

    try:
        if noise in ("gaussian", "gaussian_float") or (rng is not None and noise in (None, "auto")):
            kind = "gaussian"
        else:
            kind = resolve_noise(plan, noise or "auto")
        stated = privacy_summary(plan, noise=kind, delta=delta)
        if unit is not None:
            stated = unit_privacy(stated, unit, noise=kind, delta=delta)["unit"]["per_person"]
        eps = stated["epsilon"]
    except (DPMatrixError, KeyError, TypeError, ValueError):
        return ""
    return f" (epsilon = {eps:.6g} at delta = {delta:.3g})"


def _report_writer(stage: Path) -> list[str]:
    """Write ``report.html`` into a finished stage (read as a release); returns its name for the
    digest list."""
    from ._report import REPORT_FILE, write_release_report

    write_release_report(stage, stage / REPORT_FILE)
    return [REPORT_FILE]
