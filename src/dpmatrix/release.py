"""Release artifacts: what a data curator publishes, written to and read back from a folder.

Layout of a release folder (format ``dpmatrix.release/2``)::

    manifest.json            format, library version, creation time (UTC), domain, workload,
                             objective, per-residual noise scales (sigma2), privacy (rho, pcost,
                             mu, epsilon at a stated delta, reproducible), confidence level, one
                             entry per released marginal (attributes, its ``key``, cells, variance,
                             where its table is), ``tables`` (layout, column types, per-part
                             integrity records) and ``files``: the SHA-256 of every other file
    manifest.sha256          SHA-256 of manifest.json (written last: its presence marks a complete
                             release)
    measurements.parquet     the noisy residual answers ω_A, one row per measured residual set
                             (columns: attributes, shape, values) — with the manifest, enough to
                             reconstruct any marginal of the workload's closure later
    tables/part-*.parquet    every marginal's tidy table in one Parquet dataset: columns
                             ``marginal`` (the key, e.g. ``age,sex``), one per attribute (labels
                             or codes; null where the marginal lacks it), estimate, variance, std,
                             lower, upper; row groups of whole marginals (see
                             :mod:`dpmatrix.release_tables`, which also gives the one-call DuckDB /
                             pandas / pyarrow reads)
    marginals/<slug>-<hash>.csv
                             only on request (``formats=("parquet", "csv")``): one CSV per
                             marginal, ``<hash>`` the first 12 hex digits of the SHA-256 of the
                             names' JSON list, so distinct marginals never share a file (issue 16
                             item 9)
    README.txt               what the table columns mean

Releases of format ``dpmatrix.release/1`` (one Parquet and one CSV file per marginal under
``marginals/``, dpmatrix before the dataset layout) are still read; any other format is refused
with a message naming it.

Nothing derived from the data other than noisy answers is written: no record, no record count,
no data path, no random seed.

Safe writes (issue 16 items 5, 7, 8). Next to ``OUT`` live only hidden siblings:
``.OUT.lock`` (an ``fcntl`` lock held for the whole write: a second writer gets a clear error),
``.OUT.partial-XXXX`` (the new release being written), ``.OUT.old-XXXX`` (the previous release
during an overwrite) and ``.OUT.work-XXXX`` (DuckDB spill / on-disk store of the CLI). An overwrite
renames ``OUT`` to ``.OUT.old-*``, the finished ``.OUT.partial-*`` to ``OUT``, then removes the
old one: at every instant a complete release exists under ``OUT`` or one of those names, and
:func:`load_release` falls back to it when ``OUT`` is missing. Leftovers of a killed run are
removed (or the complete one restored) by the next write to ``OUT``, with a warning stating the
privacy meaning: a leftover measurement is budget already spent.

Integrity (issue 16 item 11). Threat model: accidental corruption and naive tampering (an edited
table, a lowered ρ in the manifest, a manifest path pointing outside the folder). Every file is
verified against the manifest's SHA-256 when it is read, the manifest against
``manifest.sha256``, every manifest path must resolve inside the folder, and the stated ρ and ε
must equal those recomputed from the manifest's own noise scales. A determined forger can
recompute all digests: this is not a signature (signing the manifest with a curator key is the
noted next step).
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import hashlib
import json
import math
import os
import shutil
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .domain import Domain
from .errors import DPMatrixError, NotMeasuredError, ReleaseError
from .jsonfile import json_float, loads_strict
from .protocols import HasClosure
from .release_tables import (
    CODE,
    LAYOUT,
    STAT_COLUMNS,
    TABLES_DIR,
    WrittenTables,
    fsync_path,
    marginal_key,
    plain_types,
    read_csv_table,
    read_table,
    table_stem,
    write_tables,
)
from .statement import check_delta, privacy_summary
from .version import __version__
from .workload import AttrSet, Workload

if TYPE_CHECKING:
    import pandas as pd

    from .planners.residual.plan import Plan
    from .reconstruct.measurements import Measurements

# pandas, the planners and the reconstruction are imported by the functions that use them:
# reading one saved table (read_saved_table, for ``dpmatrix query``) needs none of them.

__all__ = [
    "RELEASE_FORMAT",
    "LeftoverWarning",
    "Release",
    "SavedTable",
    "load_release",
    "output_lock",
    "read_saved_table",
    "recover_output",
    "write_release",
]

RELEASE_FORMAT = "dpmatrix.release/2"
#: formats :func:`load_release` reads: the per-marginal files of format 1, the dataset of format 2
READABLE_FORMATS = ("dpmatrix.release/1", RELEASE_FORMAT)
MANIFEST = "manifest.json"
MANIFEST_DIGEST = "manifest.sha256"
MEASUREMENTS = "measurements.parquet"
MARGINALS_DIR = "marginals"
#: plain-text description of the table columns (confidence level, rounding, negative estimates,
#: how to read the dataset), for readers who open the tables without the manifest
TABLES_README = "README.txt"
NEGATIVE_ESTIMATES = (
    "Negative estimates: the noise is unbiased, so a small true count can come out below zero "
    "(its interval then usually contains 0). Publish it as is, report it as 0, or replace the "
    "tables by consistent non-negative ones with the post-processing option (dpmatrix release "
    "--postprocess); rounding or clipping changes no privacy guarantee (it uses only released numbers) but adds bias."
)
FORMATS = ("parquet", "csv")
#: written unless asked otherwise: the Parquet dataset only (per-marginal CSV files on request)
DEFAULT_FORMATS = ("parquet",)

#: default δ at which ε is reported when the budget was not given as (ε, δ)
DEFAULT_DELTA = 1e-9

# noisy numbers per Parquet row group of measurements.parquet
_ROW_GROUP_VALUES = 1 << 20

# measurements of a plan that lists its mechanisms (QuerySmasher, pure ε-DP, ...): one row per
# mechanism, its key as JSON, complex outputs (WFF's Fourier coefficients) as (re, im) pairs
_MECH_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("attributes", pa.list_(pa.string())),
        ("shape", pa.list_(pa.int64())),
        ("complex", pa.bool_()),
        ("values", pa.list_(pa.float64())),
    ]
)

_MEAS_SCHEMA = pa.schema(
    [
        ("attributes", pa.list_(pa.string())),
        ("shape", pa.list_(pa.int64())),
        ("values", pa.list_(pa.float64())),
    ]
)

LEFTOVER_MEANING = (
    "it held noisy measurements of the data, so its privacy budget was already spent (the "
    "ledger keeps that spend); a new release is a new measurement and spends budget again"
)


# Files written into a finished release from its own published contents (the HTML report,
# private-pgm post-processed tables): part of the folder, not of the measured release, so not
# covered by the digests and rewritten at will by ``dpmatrix report`` / ``--postprocess``; they
# never make a folder "not a release". Matched as prefixes of the relative path.
DERIVED_PATHS = ("report.html", "postprocessed/")


class LeftoverWarning(UserWarning):
    """Files of an interrupted release were found next to the output folder and dealt with."""


# -- helpers -------------------------------------------------------------------------------------
def _library_version() -> str:
    return __version__


def dump_json(obj: Any, indent: str = "") -> str:
    """JSON with one key per line, but lists of scalars (and small objects of scalars) kept on
    one line, and each item of a list of flat objects (values: scalars, lists or objects of
    scalars) on one line: readable manifests without one line per attribute name or field."""
    scalar = (str, int, float, bool, type(None))
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        if len(obj) <= 4 and all(isinstance(v, scalar) for v in obj.values()):
            return json.dumps(obj, allow_nan=False, ensure_ascii=False)
        inner = indent + " "
        items = [f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {dump_json(v, inner)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(obj, (list, tuple)):
        if all(isinstance(v, scalar) for v in obj):
            return json.dumps(list(obj), allow_nan=False, ensure_ascii=False)
        inner = indent + " "

        def flat(v: Any) -> bool:
            return isinstance(v, scalar) or (
                isinstance(v, (list, tuple)) and all(isinstance(x, scalar) for x in v)) or (
                isinstance(v, dict) and all(isinstance(x, scalar) for x in v.values()))

        lines = [json.dumps(v, allow_nan=False, ensure_ascii=False)
                 if isinstance(v, dict) and all(flat(x) for x in v.values()) else dump_json(v, inner)
                 for v in obj]  # fmt: skip
        return "[\n" + ",\n".join(inner + line for line in lines) + "\n" + indent + "]"
    return json.dumps(obj, allow_nan=False, ensure_ascii=False)


file_stem = table_stem  # former name


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_formats(formats: Iterable[str]) -> tuple[str, ...]:
    if isinstance(formats, str):
        formats = [f for f in formats.split(",")]
    fs = tuple(dict.fromkeys(str(f).strip().lower() for f in formats if str(f).strip()))
    bad = [f for f in fs if f not in FORMATS]
    if bad or not fs:
        raise ReleaseError(f"table formats must be among {', '.join(FORMATS)}, got {', '.join(map(str, formats)) or 'none'}")
    return fs


def _sibling(out: Path, kind: str) -> Path:
    import uuid  # here: reading a release never needs it

    return out.parent / f".{out.name}.{kind}-{uuid.uuid4().hex[:8]}"


def _siblings(out: Path, kind: str) -> list[Path]:
    prefix = f".{out.name}.{kind}-"
    try:
        return sorted(p for p in out.parent.iterdir() if p.name.startswith(prefix))
    except OSError:
        return []


def _inside(folder: Path, rel: Any) -> Path:
    """``folder / rel``, refused unless ``rel`` is a relative path that resolves inside
    ``folder`` (no absolute paths, no ``..`` escapes, no symlinks leading out)."""
    if not isinstance(rel, str) or not rel or "\x00" in rel or Path(rel).is_absolute():
        raise ReleaseError(f"the manifest of {str(folder)!r} names a file outside the release folder: {rel!r}")
    root = folder.resolve()
    target = (folder / rel).resolve()
    if target != root and root not in target.parents:
        raise ReleaseError(
            f"the manifest of {str(folder)!r} names a file outside the release folder: {rel!r}; "
            "refusing to read it"
        )
    return folder / rel


def _listed_files(manifest: Mapping[str, Any]) -> dict[str, str | None]:
    """Relative path -> SHA-256 (``None`` in manifests written before digests were recorded)."""
    files = manifest.get("files")
    if isinstance(files, dict):
        return {str(k): (v if isinstance(v, str) else None) for k, v in files.items()}
    out: dict[str, str | None] = {}
    meas = manifest.get("measurements", {})
    out[str(meas.get("file", MEASUREMENTS)) if isinstance(meas, dict) else MEASUREMENTS] = None
    for e in manifest.get("marginals", []) or []:
        if isinstance(e, dict) and isinstance(e.get("files"), dict):
            for rel in e["files"].values():
                out[str(rel)] = None
    return out


def release_problem(folder: str | Path) -> str | None:
    """Why ``folder`` is not a complete dpmatrix release (``None`` if it is): no or foreign
    manifest, a digest that does not match the manifest, a listed file missing, or files that
    the release does not list (a curator's own files). Reads no table contents."""
    folder = Path(folder)
    try:
        raw = (folder / MANIFEST).read_bytes()
    except OSError:
        return f"no readable {MANIFEST}"
    try:
        manifest = loads_strict(raw.decode("utf-8"), ReleaseError, MANIFEST)
    except (ReleaseError, UnicodeDecodeError) as exc:
        return str(exc)
    if not isinstance(manifest, dict) or manifest.get("format") not in READABLE_FORMATS:
        return f"{MANIFEST} is not a dpmatrix release manifest ({_format_note(manifest)})"
    for k in ("domain", "workload", "residuals", "privacy", "marginals"):
        if k not in manifest:
            return f"{MANIFEST} lacks {k!r}"
    expected = {MANIFEST}
    if isinstance(manifest.get("files"), dict):
        expected.add(MANIFEST_DIGEST)
        try:
            stated = (folder / MANIFEST_DIGEST).read_text().split()[0]
        except (OSError, IndexError, UnicodeDecodeError):
            return f"no {MANIFEST_DIGEST} (the release was not finished)"
        if stated != hashlib.sha256(raw).hexdigest():
            return f"{MANIFEST} does not match {MANIFEST_DIGEST}"
    for rel in _listed_files(manifest):
        try:
            p = _inside(folder, rel)
        except ReleaseError as exc:
            return str(exc)
        if not p.is_file():
            return f"listed file {rel!r} is missing"
        expected.add(rel)
    extra = []
    for p in folder.rglob("*"):
        if p.is_file() or p.is_symlink():
            rel = p.relative_to(folder).as_posix()
            if rel not in expected and not rel.startswith(DERIVED_PATHS):
                extra.append(rel)
    if extra:
        return f"it holds files that are not part of the release ({', '.join(sorted(extra)[:3])})"
    return None


def _format_note(manifest: Any) -> str:
    """Which format a manifest states, against the ones this version reads."""
    got = manifest.get("format") if isinstance(manifest, dict) else None
    known = ", ".join(READABLE_FORMATS)
    if isinstance(got, str) and got.startswith("dpmatrix.release/"):
        return (f"format {got!r}; dpmatrix {__version__} reads {known}: it was written by another "
                "version of dpmatrix, use that version to read it")
    return f"format {got!r}; dpmatrix {__version__} reads {known}"


def is_release(path: str | Path) -> bool:
    """True if ``path`` is a folder holding a complete dpmatrix release and nothing else."""
    return Path(path).is_dir() and release_problem(path) is None


# -- locking and recovery ------------------------------------------------------------------------
_HELD: dict[str, list] = {}
_HELD_GUARD = threading.Lock()


@contextmanager
def output_lock(out_dir: str | Path) -> Iterator[bool]:
    """Hold the write lock of a release folder (``fcntl.flock`` on the hidden sibling
    ``.OUT.lock``, which is left in place) for the duration of the ``with`` block.

    Re-entrant within one process; a second process gets :class:`~dpmatrix.ReleaseError` at
    once instead of waiting. The lock is released by the OS when the process dies, so a killed
    writer never blocks the next one.

    Parameters
    ----------
    out_dir : str or Path
        The release folder (need not exist yet; its parent is created).

    Yields
    ------
    bool
        True if this call took the lock (False when the process already held it: then the
        outer holder has already recovered leftovers, and its own work files are not leftovers).
    """
    out = Path(out_dir).absolute()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReleaseError(f"cannot create {str(out.parent)!r}: {exc.strerror or exc}") from None
    lock = out.parent / f".{out.name}.lock"
    key = str(lock)
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is not None:
            held[1] += 1
    if held is None:
        fd = _acquire(lock, out)
        with _HELD_GUARD:
            _HELD[key] = [fd, 1]
    try:
        yield held is None
    finally:
        with _HELD_GUARD:
            entry = _HELD[key]
            entry[1] -= 1
            last = entry[1] == 0
            if last:
                del _HELD[key]
        if last:
            # unlink while still holding the lock: a process that opened the old file checks
            # (in _acquire) that what it locked is still the file at that path
            try:
                os.unlink(lock)
            except OSError:
                pass
            fcntl.flock(entry[0], fcntl.LOCK_UN)
            os.close(entry[0])


def _acquire(lock: Path, out: Path) -> int:
    for _ in range(100):
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ReleaseError(f"cannot create the lock file {str(lock)!r}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise ReleaseError(
                f"another dpmatrix process is writing a release to {str(out)!r} (its lock "
                f"{lock.name} is held); wait for it to finish or choose another folder"
            ) from None
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder removed the file after we opened it: lock the new one
    raise ReleaseError(f"cannot take the lock {str(lock)!r}: it keeps being replaced")


def recover_output(out_dir: str | Path) -> list[str]:
    """Deal with what an interrupted write to ``out_dir`` left behind; call with the lock held.

    If ``out_dir`` is missing (a kill between the two renames of an overwrite), the finished
    new release (a complete ``.OUT.partial-*``) or else the previous one (``.OUT.old-*``) is
    renamed into place. Every other leftover (``.OUT.partial-*``, ``.OUT.old-*``,
    ``.OUT.work-*``) is removed. Each action is returned as a message (and warned as
    :class:`LeftoverWarning`) stating its privacy meaning.

    Returns
    -------
    list of str
    """
    out = Path(out_dir).absolute()
    msgs: list[str] = []
    partials, olds, works = _siblings(out, "partial"), _siblings(out, "old"), _siblings(out, "work")
    if not out.exists():
        for cand in [p for p in partials if is_release(p)] + [p for p in olds if is_release(p)]:
            os.rename(cand, out)
            fsync_path(out.parent)
            which = "the finished new release" if cand in partials else "the previous release"
            msgs.append(f"an overwrite of {str(out)!r} was interrupted; restored {which} from {cand.name}")
            break
    for p in _siblings(out, "partial") + works:
        shutil.rmtree(p, ignore_errors=True)
        msgs.append(f"removed {p.name} left by an interrupted release to {str(out)!r}: {LEFTOVER_MEANING}")
    for p in _siblings(out, "old"):
        shutil.rmtree(p, ignore_errors=True)
        msgs.append(f"removed {p.name}, the previous release left by an interrupted overwrite of {str(out)!r}")
    for m in msgs:
        warnings.warn(m, LeftoverWarning, stacklevel=2)
    return msgs


def check_target(out_dir: str | Path, overwrite: bool) -> None:
    """Refuse (with :class:`~dpmatrix.ReleaseError`) to write to ``out_dir`` unless it is
    missing, an empty folder, or — with ``overwrite`` — a complete dpmatrix release holding
    nothing else (a bare manifest or a curator's extra files are never wiped)."""
    out = Path(out_dir)
    if not out.exists():
        return
    if not out.is_dir():
        raise ReleaseError(f"output {str(out)!r} exists and is not a folder")
    if not any(out.iterdir()):
        return
    if not overwrite:
        raise ReleaseError(
            f"output folder {str(out)!r} is not empty; choose another folder or replace an earlier "
            "release with --overwrite"
        )
    problem = release_problem(out)
    if problem is not None:
        raise ReleaseError(
            f"output folder {str(out)!r} is not a dpmatrix release holding nothing else ({problem}); "
            "refusing to replace it (choose another --out)"
        )


_prepare_target = check_target  # former name


# -- writing -------------------------------------------------------------------------------------
def _key_json(key: Any) -> str:
    """A mechanism key (nested tuples / ints / strings) as canonical JSON."""
    def plain(k):
        return [plain(v) for v in k] if isinstance(k, (tuple, list)) else (int(k) if isinstance(k, (int, np.integer)) else k)
    return json.dumps(plain(key), separators=(",", ":"))


def _write_mechanism_outputs(meas: Measurements, path: Path) -> tuple[int, int]:
    """One row per mechanism of a plan that lists them (keys in the plan's order)."""
    names = meas.plan.domain.names
    rows: dict[str, list] = {k: [] for k in _MECH_SCHEMA.names}
    n_values = 0
    for key, w in meas.noisy.items():
        w = np.asarray(w)
        cplx = np.iscomplexobj(w)
        flat = np.ascontiguousarray(w, dtype=complex if cplx else np.float64).reshape(-1)
        rows["key"].append(_key_json(key))
        rows["attributes"].append([names[a] for a in (key if isinstance(key, tuple) and all(
            isinstance(a, (int, np.integer)) for a in key) else ())])
        rows["shape"].append(list(w.shape))
        rows["complex"].append(bool(cplx))
        rows["values"].append(flat.view(np.float64) if cplx else flat)
        n_values += w.size
    pq.write_table(pa.table(rows, schema=_MECH_SCHEMA), str(path))
    return len(rows["key"]), n_values


def _read_mechanism_outputs(path: Path, plan, noise: str, digest: str | None) -> dict:
    """The noisy outputs written by :func:`_write_mechanism_outputs`, checked against the
    plan's mechanisms (same keys)."""
    try:
        if digest is not None and sha256_file(path) != digest:
            raise ReleaseError(
                f"{path.name} was modified after the release was written (SHA-256 mismatch); "
                "refusing to use it (--no-verify / verify=False skips the check)"
            )
        t = pq.read_table(str(path)).to_pydict()
    except (OSError, pa.lib.ArrowException, KeyError) as exc:
        raise ReleaseError(f"cannot read the measurements {str(path)!r}: {exc}") from None
    _, mechs = plan.mechanisms(noise=noise)
    want = {_key_json(m.key): m.key for m in mechs}
    out = {}
    for k, shape, cplx, vals in zip(t["key"], t["shape"], t["complex"], t["values"]):
        if k not in want or want[k] in out:
            raise ReleaseError(f"measurements of an unknown or repeated mechanism {k} in {path.name}")
        arr = np.asarray(vals, dtype=np.float64)
        if cplx:
            arr = arr.view(complex)
        if arr.size != math.prod(shape):
            raise ReleaseError(f"measurements of {k}: {arr.size} values for shape {list(shape)}")
        out[want[k]] = arr.reshape(shape)
    if len(out) != len(want):
        raise ReleaseError(f"measurements do not match the plan: {len(want) - len(out)} mechanism(s) missing")
    return out


def _write_measurements(meas: Measurements, path: Path, progress: bool) -> tuple[int, int]:
    from tqdm.auto import tqdm

    plan = meas.plan
    if not isinstance(plan, HasClosure):
        return _write_mechanism_outputs(meas, path)
    names = plan.domain.names
    n_sets = n_values = 0
    with pq.ParquetWriter(str(path), _MEAS_SCHEMA) as writer:
        rows: dict[str, list] = {"attributes": [], "shape": [], "values": []}
        pending = 0
        keys = [s for s in plan.closure.sets if s in meas.noisy]
        for key in tqdm(keys, desc="writing measurements", unit="residual", disable=not progress):
            w = np.asarray(meas.noisy[key], dtype=np.float64)
            rows["attributes"].append([names[a] for a in key])
            rows["shape"].append(list(w.shape))
            rows["values"].append(w.reshape(-1))
            pending += w.size
            n_sets += 1
            n_values += w.size
            if pending >= _ROW_GROUP_VALUES:
                writer.write_table(pa.table(rows, schema=_MEAS_SCHEMA))
                rows = {k: [] for k in rows}
                pending = 0
        if rows["attributes"] or n_sets == 0:
            writer.write_table(pa.table(rows, schema=_MEAS_SCHEMA))
    return n_sets, n_values


def _write_synced(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def write_release(
    measurements: Measurements,
    out_dir: str | Path,
    *,
    level: float = 0.95,
    delta: float = DEFAULT_DELTA,
    formats: Iterable[str] = DEFAULT_FORMATS,
    progress: bool = False,
    overwrite: bool = False,
    notes: Mapping[str, Any] | None = None,
    reproducible: bool | None = None,
    round: int | None = None,
) -> Path:
    """Write a release folder (layout, locking and integrity in the module docstring).

    Parameters
    ----------
    measurements : Measurements
    out_dir : str or Path
    level : float
        Confidence level of the ``lower``/``upper`` columns.
    delta : float
        δ at which ε is reported (checked by :func:`dpmatrix.statement.check_delta`).
    formats : iterable of {"parquet", "csv"}
        ``"parquet"`` (default): every table in one Parquet dataset under ``tables/``;
        ``"csv"``: also (or only) one CSV file per marginal under ``marginals/``.
    progress : bool
    overwrite : bool
        Replace an existing complete release in ``out_dir`` (never any other folder); the
        swap never leaves ``out_dir`` without a complete release.
    notes : mapping, optional
        Extra JSON-ready facts for the manifest; nothing computed from the data.
    reproducible : bool, optional
        The noise came from a user-given seed: recorded in the manifest and in every privacy
        line as "REPRODUCIBLE, NOT PRIVATE". ``None``: inferred from
        ``measurements.randomness`` (``"seeded_insecure"``), which cannot tell a seeded
        floating-point Gaussian generator from an OS-seeded one — pass it explicitly.
    round : int, optional
        Round the published tables' numbers (estimate, variance, std, lower, upper) to this
        many decimals (``0``: whole numbers); the measurements are kept exact, so
        ``load_release(...).marginal`` still reconstructs unrounded answers. Post-processing:
        no privacy cost.

    Returns
    -------
    Path
        ``out_dir``.

    Examples
    --------
    >>> import numpy as np, pandas as pd, tempfile, dpmatrix as dm
    >>> dom = dm.Domain({"a": 2, "b": 3})
    >>> plan = dm.plan(dm.Workload(dom, [("a", "b")]), rho=1.0)
    >>> meas = plan.measure(pd.DataFrame({"a": [0, 1], "b": [2, 0]}), rng=np.random.default_rng(0))
    >>> folder = dm.write_release(meas, tempfile.mkdtemp() + "/rel")
    >>> dm.load_release(folder).table(("a", "b")).shape[0]
    6
    """
    from .reconstruct.measurements import Measurements

    if not isinstance(measurements, Measurements):
        raise ReleaseError(f"write_release needs Measurements, got {type(measurements).__name__}")
    formats = _check_formats(formats)
    if isinstance(level, (str, bool)) or not 0 < float(level) < 1:
        raise ReleaseError(f"confidence level must be strictly between 0 and 1, got {level!r}")
    pure = measurements.noise == "discrete_laplace"
    delta = 0.0 if pure else check_delta(delta)
    if round is not None and (isinstance(round, bool) or not isinstance(round, int) or not 0 <= round <= 15):
        raise ReleaseError(f"round must be a number of decimals between 0 and 15, got {round!r}")
    if reproducible is None:
        reproducible = measurements.randomness == "seeded_insecure"
    plan: Plan = measurements.plan  # type: ignore[assignment]
    privacy = privacy_summary(plan, noise=measurements.noise, delta=delta, reproducible=reproducible)
    out = Path(out_dir).absolute()
    with output_lock(out) as fresh:
        if fresh:
            recover_output(out)
        check_target(out, overwrite)
        stage = _sibling(out, "partial")
        try:
            if isinstance(plan, HasClosure):
                _write_stage(measurements, stage, plan, privacy, formats, level, progress, notes, reproducible, round)
            else:
                _write_stage_listed(measurements, stage, plan, privacy, formats, level, progress, notes, reproducible)
            _swap_into_place(stage, out)
        except OSError as exc:
            shutil.rmtree(stage, ignore_errors=True)
            raise ReleaseError(f"cannot write the release to {str(out)!r}: {exc.strerror or exc}") from None
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
    return Path(out_dir)



def _lower_bound_entry(plan) -> dict[str, Any] | None:
    """The manifest's ``lower_bound`` entry (issue 15): ``{total, rmse, exact, ratio, value,
    quantity, ...}`` from :meth:`~dpmatrix.planners.base.PlanBase.lower_bound_facts`; ``None``
    when the plan has no Gaussian bound or it cannot be computed (the release never fails on it)."""
    bound = plan.facts.bound  # None when no bound applies or it cannot be computed
    return None if bound is None else dict(bound)


def tables_readme(level: float, decimals: int | None, formats: Sequence[str] = DEFAULT_FORMATS,
                  key: str = "age,sex") -> str:
    """The text of ``README.txt``: where the tables are and what every column means."""
    pct = f"{100 * float(level):g}%"
    rounded = ("exact (not rounded)" if decimals is None
               else f"rounded to {decimals} decimal{'s' if decimals != 1 else ''}")
    where = ""
    if "parquet" in formats:
        where += (
            f"All tables are in one Parquet dataset, {TABLES_DIR}/*.parquet: column 'marginal' names the\n"
            "table (its attributes joined by ',', 'total' for the count; manifest.json lists every\n"
            "key), then one column per attribute (null where the table lacks it), then the numbers.\n"
            "One table in one call, e.g.\n"
            f"  duckdb: SELECT * FROM '{TABLES_DIR}/*.parquet' WHERE marginal = '{key}'\n"
            f"  pandas: pandas.read_parquet('{TABLES_DIR}', filters=[('marginal', '==', '{key}')])\n"
            f"  dpmatrix query . --marginal '{key}'\n"
        )
    if "csv" in formats:
        where += f"One CSV file per table in {MARGINALS_DIR}/ (attribute columns, then the numbers).\n"
    return (
        f"Tables of this dpmatrix release.\n{where}"
        "Columns:\n"
        "  estimate  the differentially private count (unbiased)\n"
        "  variance  its exact variance (from the noise scales; no data used)\n"
        "  std       the standard deviation, sqrt(variance)\n"
        f"  lower, upper  the {pct} confidence interval (confidence level {float(level):g})\n"
        f"Numbers are {rounded}. The privacy guarantee is stated in manifest.json.\n"
        f"{NEGATIVE_ESTIMATES}\n"
    )


def _stage_digests(stage: Path, entries: Sequence[Mapping[str, Any]], extra: Sequence[str],
                   written: WrittenTables | None = None) -> dict[str, str]:
    """SHA-256 of the ``extra`` files, of the dataset's parts and of every per-marginal file the
    ``entries`` list, by relative path."""
    digests = {rel: sha256_file(stage / rel) for rel in extra}
    if written is not None:
        digests.update({rel: rec["sha256"] for rel, rec in written.parts.items()})
    for e in entries:
        for rel in e.get("files", {}).values():
            digests[rel] = sha256_file(stage / rel)
    return digests


def _table_entry(written: WrittenTables, key: str) -> dict[str, Any]:
    """Where a marginal's table is: ``table`` (its part, row group, first row and rows in the
    dataset) and/or ``files`` (its CSV)."""
    out: dict[str, Any] = {}
    loc = written.locations.get(key)
    if loc is not None:
        out["table"] = {"file": loc[0], "row_group": loc[1], "row": loc[2], "rows": loc[3]}
    if key in written.csv:
        out["files"] = {"csv": written.csv[key]}
    return out


def _tables_section(written: WrittenTables, formats, level, decimals=None) -> dict[str, Any]:
    return {
        "layout": LAYOUT, "formats": list(formats), "dir": TABLES_DIR, "key": written.key_style,
        "key_column": "marginal", "columns": list(STAT_COLUMNS), "label_columns": written.label_columns,
        "confidence_level": float(level), "rounded_to": decimals, "readme": TABLES_README,
        "parts": {rel: {k: rec[k] for k in ("bytes", "footer", "row_groups")} for rel, rec in written.parts.items()},
    }  # fmt: skip


def _write_stage(measurements, stage: Path, plan, privacy, formats, level, progress, notes, reproducible,
                 decimals: int | None = None) -> None:
    stage.mkdir(parents=True)
    n_sets, n_values = _write_measurements(measurements, stage / MEASUREMENTS, progress)
    fsync_path(stage / MEASUREMENTS)  # (a file: its data reach the disk before the manifest)
    wk = plan.workload
    cell_var = np.asarray(plan.marginal_table()["max_variance"], dtype=float)
    written = write_tables(measurements, stage, formats=formats, level=level, decimals=decimals, progress=progress)
    entries: list[dict[str, Any]] = []
    for names, key, rows, _, i, _, codes in written.tables:
        entries.append(
            {
                "attributes": list(names),
                "key": key,
                "cells": int(wk.cells[i]),
                "weight": float(wk.weights[i]),
                "max_variance": json_float(float(cell_var[i])),
                **({"codes": list(codes)} if codes else {}),
                **_table_entry(written, key),
            }
        )
    spec = plan.to_dict()
    example = entries[min(len(entries) - 1, 1 + len(plan.domain))]["key"] if entries else "total"
    _write_synced(stage / TABLES_README, tables_readme(level, decimals, formats, example))
    digests = _stage_digests(stage, entries, (MEASUREMENTS, TABLES_README), written)
    manifest: dict[str, Any] = {
        "format": RELEASE_FORMAT,
        "library": {"name": "dpmatrix", "version": _library_version()},
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "privacy": privacy,
        "mechanism": {
            "noise": measurements.noise,
            "randomness": measurements.randomness,
            "reproducible": bool(reproducible),
            "planner": "ResidualPlanner" if plan.is_plain else "ResidualPlanner+",
        },
        "accuracy": {"rmse": plan.rmse(), "max_variance": plan.max_variance()},
        "confidence_level": float(level),
        "plan_format": spec["format"],
        "domain": spec["domain"],
        "workload": spec["workload"],
        "strategies": spec["strategies"],
        "construction": spec["construction"],
        "objective": spec["objective"],
        "residuals": spec["residuals"],
        "measurements": {"file": MEASUREMENTS, "residual_sets": n_sets, "noisy_values": n_values},
        "tables": _tables_section(written, formats, level, decimals),
        "marginals": entries,
        "files": digests,
    }
    if "targets" in spec:  # planned from accuracy targets (issue 13): rows read by the report
        manifest["targets"] = spec["targets"]["rows"]
        manifest["target_certificate"] = {"kind": spec["targets"]["kind"], **spec["targets"]["certificate"]}
        manifest["target_variances"] = spec["targets"]["variances"]  # every query's, for load_release
    bound = _lower_bound_entry(plan)
    if bound is not None:
        manifest["lower_bound"] = bound
    if notes:
        manifest["notes"] = dict(notes)
    text = dump_json(manifest) + "\n"
    _write_synced(stage / MANIFEST, text)
    # written last: its presence (matching the manifest) marks the stage as a complete release
    _write_synced(stage / MANIFEST_DIGEST, f"{hashlib.sha256(text.encode('utf-8')).hexdigest()}  {MANIFEST}\n")
    fsync_path(stage)


def _write_stage_listed(measurements, stage: Path, plan, privacy, formats, level, progress, notes,
                        reproducible) -> None:
    """The release stage of a plan that lists its mechanisms (QuerySmasher, pure ε-DP, ...): one
    table per workload entry, the plan's own ``to_dict`` under ``plan`` in the manifest."""
    stage.mkdir(parents=True)
    n_sets, n_values = _write_measurements(measurements, stage / MEASUREMENTS, progress)
    fsync_path(stage / MEASUREMENTS)  # (a file: its data reach the disk before the manifest)
    written = write_tables(measurements, stage, formats=formats, level=level, progress=progress)
    entries = [
        {"attributes": list(names), "key": key, "cells": int(rows), "max_variance": json_float(var),
         **({} if tuple(cols) == tuple(names) else {"columns": list(cols)}),
         **({"codes": list(codes)} if codes else {}), **_table_entry(written, key)}
        for names, key, rows, var, _, cols, codes in written.tables
    ]  # fmt: skip
    spec = plan.to_dict()
    digests = _stage_digests(stage, entries, (MEASUREMENTS,), written)
    manifest: dict[str, Any] = {
        "format": RELEASE_FORMAT,
        "library": {"name": "dpmatrix", "version": _library_version()},
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "privacy": privacy,
        "mechanism": {"noise": measurements.noise, "randomness": measurements.randomness,
                      "reproducible": bool(reproducible), "planner": spec.get("planner", type(plan).__name__)},
        "accuracy": {"rmse": plan.rmse(), "max_variance": plan.max_variance()},
        "confidence_level": float(level),
        "plan_format": spec.get("format"),
        "plan": spec,
        "domain": spec["domain"],
        "workload": spec.get("workload"),
        "residuals": [r for r in spec.get("residuals", []) if isinstance(r, dict)],
        "measurements": {"file": MEASUREMENTS, "mechanisms": n_sets, "noisy_values": n_values},
        "tables": _tables_section(written, formats, level),
        "marginals": entries,
        "files": digests,
    }
    if notes:
        manifest["notes"] = dict(notes)
    text = dump_json(manifest) + "\n"
    _write_synced(stage / MANIFEST, text)
    _write_synced(stage / MANIFEST_DIGEST, f"{hashlib.sha256(text.encode('utf-8')).hexdigest()}  {MANIFEST}\n")
    fsync_path(stage)


def _swap_into_place(stage: Path, out: Path) -> None:
    """``stage`` becomes ``out``; an existing ``out`` is renamed aside first and removed last,
    so a kill at any point leaves a complete release under ``out`` or a hidden sibling."""
    if out.exists() and any(out.iterdir()):
        trash = _sibling(out, "old")
        os.rename(out, trash)
        try:
            os.rename(stage, out)
        except BaseException:
            os.rename(trash, out)  # put the previous release back
            raise
        fsync_path(out.parent)
        shutil.rmtree(trash, ignore_errors=True)
        return
    if out.exists():
        out.rmdir()
    os.rename(stage, out)
    fsync_path(out.parent)


# -- reading -------------------------------------------------------------------------------------
class _ParquetResiduals(Mapping):
    """The noisy residual answers of ``measurements.parquet``, read on demand (issue 16 item
    13): opening checks the file's digest and reads only the ``attributes`` and ``shape``
    columns; a residual's values are read from its row group when asked for, so answering one
    marginal decodes only the row groups of its subsets."""

    def __init__(self, path: Path, domain: Domain, digest: str | None):
        self._path = path
        try:
            if digest is not None and sha256_file(path) != digest:
                raise ReleaseError(
                    f"{path.name} was modified after the release was written (SHA-256 mismatch); "
                    "refusing to use it (--no-verify / verify=False skips the check)"
                )
            self._pf = pq.ParquetFile(str(path))
            index: dict[AttrSet, tuple[int, int, tuple[int, ...]]] = {}
            for g in range(self._pf.num_row_groups):
                t = self._pf.read_row_group(g, columns=["attributes", "shape"]).to_pydict()
                for r, (names, shape) in enumerate(zip(t["attributes"], t["shape"])):
                    try:
                        key = domain.resolve(names)
                    except DPMatrixError as exc:
                        raise ReleaseError(f"measurements of an unknown residual set: {exc}") from None
                    if key in index:
                        raise ReleaseError(f"measurements of {tuple(names)} appear twice in {path.name}")
                    index[key] = (g, r, tuple(int(s) for s in shape))
        except (OSError, pa.lib.ArrowException, KeyError) as exc:
            raise ReleaseError(f"cannot read the measurements {str(path)!r}: {exc}") from None
        self._index = index
        self._group: tuple[int, Any] | None = None

    def shape(self, key: AttrSet) -> tuple[int, ...]:
        return self._index[key][2]

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __iter__(self):
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __getitem__(self, key: AttrSet) -> np.ndarray:
        g, r, shape = self._index[key]
        try:
            if self._group is None or self._group[0] != g:
                self._group = (g, self._pf.read_row_group(g, columns=["values"]).column(0))
            arr = np.asarray(self._group[1][r].values.to_numpy(zero_copy_only=False), dtype=np.float64)
        except (OSError, pa.lib.ArrowException) as exc:
            raise ReleaseError(f"cannot read the measurements {str(self._path)!r}: {exc}") from None
        if arr.size != math.prod(shape):
            raise ReleaseError(f"measurements of {key}: {arr.size} values for shape {list(shape)}")
        return arr.reshape(shape)


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

        from .reconstruct.measurements import query_labels

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
            cats = query_labels(attr, qt, wk.query_matrix(a, qt))
            df[attr.name] = pd.Categorical(df[attr.name].astype(str), categories=cats)
        return df

    def _table_v1(self, key: AttrSet, e: dict, format: str) -> pd.DataFrame:
        """A table of a format-1 release (one file per marginal and format)."""
        import pandas as pd

        from .reconstruct.measurements import query_labels

        if format not in e["files"]:
            raise ReleaseError(f"this release has no {format} tables (it has {sorted(e['files'])})")
        path = self.file(e["files"][format])
        try:
            df = pd.read_parquet(path) if format == "parquet" else pd.read_csv(path)
        except (OSError, ValueError) as exc:
            raise ReleaseError(f"cannot read {str(path)!r}: {exc}") from None
        if not isinstance(self.plan, HasClosure):
            return df  # a plan that lists its mechanisms: labels as written
        wk = self.plan.workload
        i = wk.index(key)
        for a, t in zip(key, wk.types(i)):
            attr = self.domain.attributes[a]
            if t == "identity" and attr.labels is None and attr.bins is None:
                continue  # plain integer codes
            # the row labels of this attribute's queries (cells: value labels), in order
            cats = query_labels(attr, t, wk.query_matrix(a, t))
            df[attr.name] = pd.Categorical(df[attr.name].astype(str), categories=cats)
        return df

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
            return self.measurements.answer(key, lv)
        return self.measurements.marginal(key, lv)

    def report(self, path: str | Path | None = None, *, fairness: bool = True) -> Path:
        """Write a self-contained HTML report of this release (default ``report.html`` in its
        folder); see :func:`dpmatrix.report.write_release_report`."""
        from .report import write_release_report

        return write_release_report(self, path, fairness=fairness)
    def postprocess(self, **options):
        """Non-negative, consistent marginals fitted to the saved measurements
        (:meth:`Measurements.postprocess <dpmatrix.reconstruct.measurements.Measurements.postprocess>`)."""
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


def _stated_digest(manifest: Mapping[str, Any], folder: Path, rel: str, verify: bool) -> str | None:
    """The SHA-256 the manifest states for ``rel`` (``None``: not verifying, or a manifest
    written before digests were recorded)."""
    files = manifest.get("files")
    if not verify or not isinstance(files, dict):
        return None
    if rel not in files:
        raise ReleaseError(f"{rel!r} has no digest in the manifest of {str(folder)!r}")
    return files[rel]


def _checked_file(folder: Path, rel: str, want: str | None) -> Path:
    """``folder / rel``, confined to the folder and, if ``want`` is given, checked against it."""
    p = _inside(folder, rel)
    if want is not None:
        try:
            got = sha256_file(p)
        except OSError as exc:
            raise ReleaseError(f"cannot read {rel!r} of {str(folder)!r}: {exc.strerror or exc}") from None
        if got != want:
            raise ReleaseError(
                f"{rel} in {str(folder)!r} was modified after the release was written "
                "(SHA-256 mismatch); refusing to use it (--no-verify / verify=False skips the check)"
            )
    return p


def _open_measurements(rel: Release) -> Measurements:
    from .reconstruct.measurements import Measurements

    manifest, plan, folder = rel.manifest, rel.plan, rel.path
    meas_info = manifest.get("measurements", {})
    rel_path = meas_info.get("file", MEASUREMENTS) if isinstance(meas_info, dict) else MEASUREMENTS
    path = _inside(folder, rel_path)
    mech = manifest.get("mechanism", {})
    if not isinstance(plan, HasClosure):
        noise = mech.get("noise", "gaussian")
        noisy = _read_mechanism_outputs(path, plan, noise, rel._digest(rel_path))
        return Measurements(plan=plan, noisy=noisy, noise=noise, randomness=mech.get("randomness", "unknown"))
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
        randomness=mech.get("randomness", "unknown"),
    )


def _fallback_folder(folder: Path) -> Path | None:
    """A complete hidden copy of ``folder`` left by an interrupted overwrite (the finished new
    release first, then the previous one)."""
    out = folder.absolute()
    for cand in _siblings(out, "partial") + _siblings(out, "old"):
        if is_release(cand):
            return cand
    return None


def _read_manifest(folder: Path, verify: bool) -> dict:
    if not folder.is_dir():
        if folder.exists():
            raise ReleaseError(f"{str(folder)!r} is not a folder (give the release folder)")
        raise ReleaseError(f"release folder {str(folder)!r} does not exist")
    path = folder / MANIFEST
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ReleaseError(f"{str(folder)!r} is not a dpmatrix release: no {MANIFEST}") from None
    except OSError as exc:
        raise ReleaseError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ReleaseError(f"{str(path)!r} is not UTF-8 text") from None
    manifest = loads_strict(text, ReleaseError, repr(str(path)))
    if not isinstance(manifest, dict) or manifest.get("format") not in READABLE_FORMATS:
        raise ReleaseError(f"{str(path)!r} is not a release this dpmatrix can read ({_format_note(manifest)})")
    if verify and isinstance(manifest.get("files"), dict):
        try:
            stated = (folder / MANIFEST_DIGEST).read_text().split()[0]
        except (OSError, IndexError, UnicodeDecodeError):
            raise ReleaseError(
                f"{str(folder)!r} has no {MANIFEST_DIGEST}: the release is incomplete or was altered"
            ) from None
        if stated != hashlib.sha256(raw).hexdigest():
            raise ReleaseError(
                f"{MANIFEST} in {str(folder)!r} was modified after the release was written (it "
                f"does not match {MANIFEST_DIGEST}); refusing to use it (--no-verify / "
                "verify=False skips the check)"
            )
    elif verify:
        warnings.warn(
            f"{str(folder)!r} was written by an older dpmatrix without file digests: its files "
            "cannot be verified", UserWarning, stacklevel=3,
        )  # fmt: skip
    return manifest


def _check_privacy_consistent(manifest: dict, plan: Plan, folder: Path) -> None:
    """The stated ρ and ε must be those of the manifest's own noise scales."""
    p = manifest.get("privacy")
    if not isinstance(p, dict):
        raise ReleaseError(f"the manifest of {str(folder)!r} has no privacy statement")
    try:
        stated_rho, stated_eps, delta = float(p["rho"]), float(p["epsilon"]), float(p["delta"])
    except (KeyError, TypeError, ValueError):
        raise ReleaseError(f"the manifest of {str(folder)!r} has an incomplete privacy statement") from None
    noise = manifest.get("mechanism", {}).get("noise", "gaussian")
    if not (0 < delta < 1) and not (noise == "discrete_laplace" and delta == 0):
        raise ReleaseError(f"the manifest of {str(folder)!r} states delta = {delta!r}")
    want = privacy_summary(plan, noise=noise, delta=delta)
    if not math.isclose(stated_rho, want["rho"], rel_tol=1e-9) or not math.isclose(
        stated_eps, want["epsilon"], rel_tol=1e-6
    ):
        raise ReleaseError(
            f"the manifest of {str(folder)!r} states rho = {stated_rho:.6g}, epsilon = "
            f"{stated_eps:.6g}, but its noise scales spend rho = {want['rho']:.6g}, epsilon = "
            f"{want['epsilon']:.6g}: the manifest was altered; refusing to use it"
        )


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
    plan = _checked_plan(manifest, folder)
    # paths are confined when each file is read (Release.file), not all up front: printing one
    # saved table of a release with thousands of tables stays fast
    return Release(path=folder, manifest=manifest, plan=plan, verify=verify)


def _existing_folder(folder: Path) -> Path:
    """``folder``, or (warned) the complete hidden copy an interrupted overwrite left of it."""
    if not folder.exists():
        alt = _fallback_folder(folder)
        if alt is not None:
            warnings.warn(
                f"{str(folder)!r} is missing because an overwrite was interrupted; reading its "
                f"complete copy {alt.name} (the next release to that folder restores it)",
                LeftoverWarning, stacklevel=3,
            )  # fmt: skip
            return alt
    return folder


def _checked_plan(manifest: dict, folder: Path):
    """The plan a manifest describes, its fields validated and its stated privacy checked
    against its own noise scales."""
    from .plan_file import check_plan_spec
    from .planners.dispatch import plan_from_dict

    check_plan_spec(manifest, f"the manifest of {str(folder)!r}")
    try:
        if "plan" in manifest:  # a plan that lists its mechanisms (QuerySmasher, pure ε-DP, ...)
            plan = plan_from_dict(manifest["plan"])
        else:
            plan = _residual_plan(manifest)
    except KeyError as exc:
        raise ReleaseError(f"the manifest of {str(folder)!r} lacks {exc}") from None
    except DPMatrixError as exc:
        raise ReleaseError(f"the manifest of {str(folder)!r} does not describe a valid plan: {exc}") from None
    except (TypeError, ValueError, IndexError) as exc:
        raise ReleaseError(f"the manifest of {str(folder)!r} does not describe a valid plan: {exc}") from None
    _check_privacy_consistent(manifest, plan, folder)
    from .planners.targets_io import with_manifest_targets  # a targets plan keeps its report (issue 13)

    return with_manifest_targets(plan, manifest)


def _residual_plan(manifest: dict) -> Plan:
    """The ResidualPlanner plan of a manifest (its fields are the plan's, at the top level)."""
    from .planners.residual.plan import PLAN_FORMAT, Plan

    spec = {
        "format": manifest.get("plan_format", PLAN_FORMAT),
        **{k: manifest[k] for k in ("domain", "workload", "strategies", "objective", "residuals")},
        "construction": manifest.get("construction", "centred"),
    }
    return Plan.from_dict(spec)


# -- one saved table, read without pandas or the plan (dpmatrix query) --------------------------
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


def read_saved_table(
    folder: str | Path, attrs: Iterable[str] | str, *, verify: bool = True, level: float | None = None
) -> SavedTable | None:
    """One saved marginal table, read directly: the manifest and that table's file, nothing
    else — no measurements, no plan, no pandas (issue 16 item 13: ``dpmatrix query``).

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
        _checked_plan(manifest, folder)
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
