"""Release artifacts: what a data curator publishes, written to and read back from a folder.

Layout of a release folder::

    manifest.json            format, library version, creation time (UTC), domain, workload,
                             objective, per-residual noise scales (sigma2), privacy (rho, pcost,
                             mu, epsilon at a stated delta, reproducible), confidence level, one
                             entry per released marginal (attributes, cells, variance, files) and
                             ``files``: the SHA-256 of every other file of the release
    manifest.sha256          SHA-256 of manifest.json (written last: its presence marks a complete
                             release)
    measurements.parquet     the noisy residual answers ω_A, one row per measured residual set
                             (columns: attributes, shape, values) — with the manifest, enough to
                             reconstruct any marginal of the workload's closure later
    marginals/<slug>-<hash>.parquet, .csv
                             one tidy table per workload marginal: attribute columns (labels),
                             estimate, variance, std, lower, upper; ``<slug>`` is a readable form
                             of the attribute names and ``<hash>`` the first 12 hex digits of the
                             SHA-256 of their exact JSON list, so distinct marginals never share a
                             file (issue 16 item 9); the manifest maps attributes to files

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
import re
import shutil
import threading
import uuid
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from .domain import Domain
from .errors import DPMatrixError, NotMeasuredError, ReleaseError
from .jsonfile import json_float, loads_strict
from .planners.dispatch import plan_from_dict
from .planners.residual.plan import PLAN_FORMAT, Plan
from .plan_file import check_plan_spec
from .reconstruct.measurements import Measurements, query_labels
from .statement import check_delta, privacy_summary
from .version import __version__
from .workload import AttrSet

__all__ = [
    "RELEASE_FORMAT",
    "LeftoverWarning",
    "Release",
    "load_release",
    "output_lock",
    "recover_output",
    "write_release",
]

RELEASE_FORMAT = "dpmatrix.release/1"
MANIFEST = "manifest.json"
MANIFEST_DIGEST = "manifest.sha256"
MEASUREMENTS = "measurements.parquet"
MARGINALS_DIR = "marginals"
#: plain-text description of the table columns (confidence level, rounding, negative estimates)
#: next to the tables, for readers who open a CSV without the manifest
TABLES_README = f"{MARGINALS_DIR}/README.txt"
NEGATIVE_ESTIMATES = (
    "Negative estimates: the noise is unbiased, so a small true count can come out below zero "
    "(its interval then usually contains 0). Publish it as is, report it as 0, or replace the "
    "tables by consistent non-negative ones with the post-processing option (dpmatrix release "
    "--postprocess); rounding or clipping changes no privacy guarantee (it uses only released numbers) but adds bias."
)
FORMATS = ("parquet", "csv")

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
    one line: readable manifests without one line per attribute name."""
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
        return "[\n" + ",\n".join(inner + dump_json(v, inner) for v in obj) + "\n" + indent + "]"
    return json.dumps(obj, allow_nan=False, ensure_ascii=False)


def table_stem(names: Sequence[str]) -> str:
    """File name (without suffix) of a marginal's table: a readable slug (names joined by
    ``__``, characters outside ``[A-Za-z0-9._-]`` replaced by ``_``, at most 80 characters;
    ``total`` for the 0-way marginal) and ``-`` and 12 hex digits of the SHA-256 of the exact
    JSON list of names. Distinct attribute tuples get distinct stems (up to a 2⁻⁴⁸ hash
    collision, which :func:`write_release` would refuse rather than overwrite)."""
    slug = "__".join(re.sub(r"[^A-Za-z0-9._-]+", "_", n) for n in names) or "total"
    digest = hashlib.sha256(json.dumps(list(names), ensure_ascii=False).encode()).hexdigest()[:12]
    return f"{slug[:80]}-{digest}"


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
    return out.parent / f".{out.name}.{kind}-{uuid.uuid4().hex[:8]}"


def _siblings(out: Path, kind: str) -> list[Path]:
    prefix = f".{out.name}.{kind}-"
    try:
        return sorted(p for p in out.parent.iterdir() if p.name.startswith(prefix))
    except OSError:
        return []


def _fsync_dir(path: Path) -> None:
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
    if not isinstance(manifest, dict) or manifest.get("format") != RELEASE_FORMAT:
        return f"{MANIFEST} is not a {RELEASE_FORMAT} manifest"
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
            _fsync_dir(out.parent)
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
    plan = meas.plan
    if not hasattr(plan, "closure"):
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


def _write_table(table: pd.DataFrame, base: Path, formats: Sequence[str]) -> dict[str, str]:
    files: dict[str, str] = {}
    for f in formats:
        path = base.with_name(base.name + "." + f)
        if path.exists():
            raise ReleaseError(f"two marginals map to the table file {path.name!r}; refusing to overwrite")
        if f == "parquet":
            table.to_parquet(path, index=False)
        else:
            table.to_csv(path, index=False)
        files[f] = f"{MARGINALS_DIR}/{path.name}"
    return files


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
    formats: Iterable[str] = FORMATS,
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
            if hasattr(plan, "closure"):
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
    facts = getattr(plan, "lower_bound_facts", None)
    if not callable(facts):
        return None
    try:
        return facts()
    except DPMatrixError:
        return None


def tables_readme(level: float, decimals: int | None) -> str:
    """The text of ``marginals/README.txt``: what every column of the tables means."""
    pct = f"{100 * float(level):g}%"
    rounded = ("exact (not rounded)" if decimals is None
               else f"rounded to {decimals} decimal{'s' if decimals != 1 else ''}")
    return (
        "Tables of this dpmatrix release: one file per marginal (attribute columns, then):\n"
        "  estimate  the differentially private count (unbiased)\n"
        "  variance  its exact variance (from the noise scales; no data used)\n"
        "  std       the standard deviation, sqrt(variance)\n"
        f"  lower, upper  the {pct} confidence interval (confidence level {float(level):g})\n"
        f"Numbers are {rounded}. The privacy guarantee is stated in ../manifest.json.\n"
        f"{NEGATIVE_ESTIMATES}\n"
    )


def _stage_digests(stage: Path, entries: Sequence[Mapping[str, Any]], extra: Sequence[str]) -> dict[str, str]:
    """SHA-256 of the ``extra`` files and of every table file the ``entries`` list, by relative path."""
    digests = {rel: sha256_file(stage / rel) for rel in extra}
    for e in entries:
        for rel in e["files"].values():
            digests[rel] = sha256_file(stage / rel)
    return digests


def _write_stage(measurements, stage: Path, plan, privacy, formats, level, progress, notes, reproducible,
                 decimals: int | None = None) -> None:
    (stage / MARGINALS_DIR).mkdir(parents=True)
    n_sets, n_values = _write_measurements(measurements, stage / MEASUREMENTS, progress)
    wk = plan.workload
    info = plan.marginal_table()
    entries: list[dict[str, Any]] = []
    row = {m: i for i, m in enumerate(info["marginal"])}
    for names, table in measurements.iter_marginals(level=level, progress=progress):
        if decimals is not None:
            table = table.round({c: decimals for c in ("estimate", "variance", "std", "lower", "upper")})
        files = _write_table(table, stage / MARGINALS_DIR / table_stem(names), formats)
        i = row[",".join(names)]
        entries.append(
            {
                "attributes": list(names),
                "cells": int(wk.cells[i]),
                "weight": float(wk.weights[i]),
                "max_variance": json_float(float(info["max_variance"][i])),
                "files": files,
            }
        )
    spec = plan.to_dict()
    _write_synced(stage / TABLES_README, tables_readme(level, decimals))
    digests = _stage_digests(stage, entries, (MEASUREMENTS, TABLES_README))
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
        "tables": {"formats": list(formats), "columns": ["estimate", "variance", "std", "lower", "upper"],
                   "confidence_level": float(level), "rounded_to": decimals, "readme": TABLES_README},
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
    _fsync_dir(stage)


def _write_stage_listed(measurements, stage: Path, plan, privacy, formats, level, progress, notes,
                        reproducible) -> None:
    """The release stage of a plan that lists its mechanisms (QuerySmasher, pure ε-DP, ...): one
    table per workload entry, the plan's own ``to_dict`` under ``plan`` in the manifest."""
    (stage / MARGINALS_DIR).mkdir(parents=True)
    n_sets, n_values = _write_measurements(measurements, stage / MEASUREMENTS, progress)
    entries: list[dict[str, Any]] = []
    stems: set[str] = set()
    for names, table in measurements.iter_marginals(level=level, progress=progress):
        stem = table_stem(names)
        if stem in stems:  # several query groups on one attribute set
            stem = f"{stem}-{len(entries)}"
        stems.add(stem)
        files = _write_table(table, stage / MARGINALS_DIR / stem, formats)
        var = table["variance"].to_numpy()
        entries.append({"attributes": list(names), "cells": int(len(table)),
                        "max_variance": json_float(float(np.max(var)) if var.size else 0.0), "files": files})
    spec = plan.to_dict()
    digests = _stage_digests(stage, entries, (MEASUREMENTS,))
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
        "tables": {"formats": list(formats), "columns": ["estimate", "variance", "std", "lower", "upper"]},
        "marginals": entries,
        "files": digests,
    }
    if notes:
        manifest["notes"] = dict(notes)
    text = dump_json(manifest) + "\n"
    _write_synced(stage / MANIFEST, text)
    _write_synced(stage / MANIFEST_DIGEST, f"{hashlib.sha256(text.encode('utf-8')).hexdigest()}  {MANIFEST}\n")
    _fsync_dir(stage)


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
        _fsync_dir(out.parent)
        shutil.rmtree(trash, ignore_errors=True)
        return
    if out.exists():
        out.rmdir()
    os.rename(stage, out)
    _fsync_dir(out.parent)


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
        files = self.manifest.get("files")
        if not self.verify or not isinstance(files, dict):
            return None
        if rel not in files:
            raise ReleaseError(f"{rel!r} has no digest in the manifest of {str(self.path)!r}")
        return files[rel]

    def file(self, rel: str) -> Path:
        """Path of a file named by the manifest: confined to the folder, and (unless
        ``verify=False``) checked against its SHA-256."""
        p = _inside(self.path, rel)
        want = self._digest(rel)
        if want is not None:
            try:
                got = sha256_file(p)
            except OSError as exc:
                raise ReleaseError(f"cannot read {rel!r} of {str(self.path)!r}: {exc.strerror or exc}") from None
            if got != want:
                raise ReleaseError(
                    f"{rel} in {str(self.path)!r} was modified after the release was written "
                    "(SHA-256 mismatch); refusing to use it (--no-verify / verify=False skips the check)"
                )
        return p

    def _entry(self, key: AttrSet) -> dict | None:
        for e in self.manifest["marginals"]:
            if self.domain.resolve(e["attributes"]) == key:
                return e
        return None

    def has_table(self, attrs: Iterable[str] | str) -> bool:
        """True if the release holds a saved table of this marginal."""
        return self._entry(self.domain.resolve(attrs)) is not None

    def table(self, attrs: Iterable[str] | str, format: str = "parquet") -> pd.DataFrame:
        """A saved marginal table, as written (labels restored as categoricals)."""
        key = self.domain.resolve(attrs)
        e = self._entry(key)
        if e is None:
            raise NotMeasuredError(
                f"no saved table for {self.domain.names_of(key)}; use marginal() to reconstruct "
                "any marginal of the closure from the measurements"
            )
        if format not in e["files"]:
            raise ReleaseError(f"this release has no {format} tables (it has {sorted(e['files'])})")
        path = self.file(e["files"][format])
        try:
            df = pd.read_parquet(path) if format == "parquet" else pd.read_csv(path)
        except (OSError, ValueError) as exc:
            raise ReleaseError(f"cannot read {str(path)!r}: {exc}") from None
        if not hasattr(self.plan, "closure"):
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
        if not hasattr(self.plan, "closure"):  # QuerySmasher / pure: the workload entry's answers
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


def _open_measurements(rel: Release) -> Measurements:
    manifest, plan, folder = rel.manifest, rel.plan, rel.path
    meas_info = manifest.get("measurements", {})
    rel_path = meas_info.get("file", MEASUREMENTS) if isinstance(meas_info, dict) else MEASUREMENTS
    path = _inside(folder, rel_path)
    mech = manifest.get("mechanism", {})
    if not hasattr(plan, "closure"):
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
    if not isinstance(manifest, dict) or manifest.get("format") != RELEASE_FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else None
        raise ReleaseError(f"{str(path)!r} is not a {RELEASE_FORMAT} manifest (format {got!r})")
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
    folder = Path(folder)
    if not folder.exists():
        alt = _fallback_folder(folder)
        if alt is not None:
            warnings.warn(
                f"{str(folder)!r} is missing because an overwrite was interrupted; reading its "
                f"complete copy {alt.name} (the next release to that folder restores it)",
                LeftoverWarning, stacklevel=2,
            )  # fmt: skip
            folder = alt
    manifest = _read_manifest(folder, verify)
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
    # paths are confined when each file is read (Release.file), not all up front: printing one
    # saved table of a release with thousands of tables stays fast
    from .planners.targets_io import with_manifest_targets  # a targets plan keeps its report (issue 13)

    return Release(path=folder, manifest=manifest, plan=with_manifest_targets(plan, manifest), verify=verify)


def _residual_plan(manifest: dict) -> Plan:
    """The ResidualPlanner plan of a manifest (its fields are the plan's, at the top level)."""
    spec = {
        "format": manifest.get("plan_format", PLAN_FORMAT),
        **{k: manifest[k] for k in ("domain", "workload", "strategies", "objective", "residuals")},
        "construction": manifest.get("construction", "centred"),
    }
    return Plan.from_dict(spec)
