"""Release artifacts: what a data curator publishes, written to and read back from a folder.

Layout of a release folder::

    manifest.json            format, library version, creation time (UTC), domain, workload,
                             objective, per-residual noise scales (sigma2), privacy (rho, pcost,
                             mu, epsilon at a stated delta), confidence level, and one entry per
                             released marginal (attributes, cells, variance, files)
    measurements.parquet     the noisy residual answers ω_A, one row per measured residual set
                             (columns: attributes, shape, values) — with the manifest, enough to
                             reconstruct any marginal of the workload's closure later
    marginals/<a>__<b>.parquet, marginals/<a>__<b>.csv
                             one tidy table per workload marginal: attribute columns (labels),
                             estimate, variance, std, lower, upper (normal interval at the level
                             in the manifest)

Nothing derived from the data other than noisy answers is written: no record, no record count,
no data path, no random seed. Tables are written one marginal at a time from
:meth:`~dpmatrix.Measurements.iter_marginals`, so a release of many large marginals never holds
all answers in memory. The folder is first written under a temporary name next to ``out_dir``
and renamed at the end, so a failed run leaves no half-written release behind.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from .domain import Domain
from .errors import DPMatrixError, NotMeasuredError, ReleaseError
from .plan.plan import PLAN_FORMAT, Plan, json_float
from .jsonfile import read_json
from .privacy import epsilon_from_zcdp
from .reconstruct.measurements import Measurements, query_labels
from .workload import AttrSet

__all__ = ["RELEASE_FORMAT", "Release", "load_release", "write_release"]

RELEASE_FORMAT = "dpmatrix.release/1"
MANIFEST = "manifest.json"
MEASUREMENTS = "measurements.parquet"
MARGINALS_DIR = "marginals"
FORMATS = ("parquet", "csv")

#: default δ at which ε is reported when the budget was not given as (ε, δ)
DEFAULT_DELTA = 1e-9

# noisy numbers per Parquet row group of measurements.parquet
_ROW_GROUP_VALUES = 1 << 20

_MEAS_SCHEMA = pa.schema(
    [
        ("attributes", pa.list_(pa.string())),
        ("shape", pa.list_(pa.int64())),
        ("values", pa.list_(pa.float64())),
    ]
)


# -- helpers -------------------------------------------------------------------------------------
def _library_version() -> str:
    from . import __version__

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


def file_stem(names: Sequence[str]) -> str:
    """File name (without suffix) of a marginal: attribute names joined by ``__``, unsafe
    characters replaced by ``_``; ``total`` for the 0-way marginal."""
    if not names:
        return "total"
    stem = "__".join(re.sub(r"[^A-Za-z0-9._-]+", "_", n) for n in names)
    return stem[:150]


def _check_formats(formats: Iterable[str]) -> tuple[str, ...]:
    fs = tuple(dict.fromkeys(str(f).lower() for f in formats))
    bad = [f for f in fs if f not in FORMATS]
    if bad or not fs:
        raise ReleaseError(f"table formats must be among {FORMATS}, got {list(formats)!r}")
    return fs


def is_release(path: str | Path) -> bool:
    """True if ``path`` is a folder holding a dpmatrix release manifest."""
    m = Path(path) / MANIFEST
    try:
        return json.loads(m.read_text()).get("format") == RELEASE_FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def _prepare_target(out: Path, overwrite: bool) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise ReleaseError(f"output {str(out)!r} exists and is not a folder")
    if not any(out.iterdir()):
        return
    if overwrite and is_release(out):
        return
    if overwrite:
        raise ReleaseError(
            f"output folder {str(out)!r} is not empty and is not a dpmatrix release; "
            "refusing to replace it (choose another --out)"
        )
    raise ReleaseError(
        f"output folder {str(out)!r} is not empty; choose another folder or replace an earlier "
        "release with --overwrite"
    )


# -- writing -------------------------------------------------------------------------------------
def _write_measurements(meas: Measurements, path: Path, progress: bool) -> tuple[int, int]:
    plan = meas.plan
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
        if f == "parquet":
            table.to_parquet(path, index=False)
        else:
            table.to_csv(path, index=False)
        files[f] = f"{MARGINALS_DIR}/{path.name}"
    return files


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
) -> Path:
    """Write a release folder (layout in the module docstring); returns its path.

    ``level``: confidence level of the ``lower``/``upper`` columns. ``delta``: the δ at which ε is
    reported in the manifest. ``formats``: table formats (``"parquet"``, ``"csv"``).
    ``overwrite``: replace an existing release in ``out_dir`` (never any other folder).
    ``notes``: extra JSON-ready facts for the manifest (e.g. how raw values were encoded); they
    must not contain anything computed from the data.
    """
    if not isinstance(measurements, Measurements):
        raise ReleaseError(f"write_release needs Measurements, got {type(measurements).__name__}")
    formats = _check_formats(formats)
    if not 0 < float(level) < 1:
        raise ReleaseError(f"confidence level must be strictly between 0 and 1, got {level!r}")
    plan: Plan = measurements.plan  # type: ignore[assignment]
    discrete = measurements.noise == "discrete_gaussian"
    # discrete Gaussian noise is rho-zCDP (Canonne-Kamath-Steinke); the exact analytic curve and
    # mu-GDP are established for the continuous Gaussian only
    epsilon = epsilon_from_zcdp(plan.rho, delta) if discrete else plan.epsilon(delta)
    out = Path(out_dir)
    _prepare_target(out, overwrite)
    parent = out.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReleaseError(f"cannot create {str(parent)!r}: {exc.strerror or exc}") from None
    stage = parent / f".{out.name}.partial-{uuid.uuid4().hex[:8]}"
    try:
        (stage / MARGINALS_DIR).mkdir(parents=True)
        n_sets, n_values = _write_measurements(measurements, stage / MEASUREMENTS, progress)
        wk = plan.workload
        info = plan.marginal_table()
        entries: list[dict[str, Any]] = []
        used: set[str] = set()
        row = {m: i for i, m in enumerate(info["marginal"])}
        for names, table in measurements.iter_marginals(level=level, progress=progress):
            stem = file_stem(names)
            if stem.lower() in used:
                stem = f"{stem}-{len(used)}"
            used.add(stem.lower())
            files = _write_table(table, stage / MARGINALS_DIR / stem, formats)
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
        manifest: dict[str, Any] = {
            "format": RELEASE_FORMAT,
            "library": {"name": "dpmatrix", "version": _library_version()},
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "privacy": {
                "rho": plan.rho,
                "pcost": plan.pcost,
                "mu": None if discrete else plan.mu,
                "epsilon": epsilon,
                "delta": float(delta),
                "definition": (
                    "rho-zCDP of the discrete Gaussian mechanism (Canonne, Kamath, Steinke 2020); "
                    "(epsilon, delta)-DP by their zCDP conversion; neighbouring datasets differ "
                    "by adding or removing one record"
                    if discrete
                    else "rho-zCDP (equivalently mu-GDP, and (epsilon, delta)-DP by the exact "
                    "analytic Gaussian conversion); neighbouring datasets differ by adding or "
                    "removing one record"
                ),
            },
            "mechanism": {
                "noise": measurements.noise,
                "randomness": measurements.randomness,
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
            "tables": {"formats": list(formats), "columns": ["estimate", "variance", "std", "lower", "upper"]},
            "marginals": entries,
        }
        if notes:
            manifest["notes"] = dict(notes)
        (stage / MANIFEST).write_text(dump_json(manifest) + "\n")
        if out.exists():
            shutil.rmtree(out) if any(out.iterdir()) else out.rmdir()
        stage.rename(out)
    except OSError as exc:
        shutil.rmtree(stage, ignore_errors=True)
        raise ReleaseError(f"cannot write the release to {str(out)!r}: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return out


# -- reading -------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Release:
    """A release read back from its folder: manifest, plan, and the noisy measurements.

    :meth:`table` returns a saved table; :meth:`marginal` answers any marginal in the closure
    of the workload (from the saved tables when possible, else reconstructed from the saved
    measurements — no data needed).
    """

    path: Path
    manifest: dict
    plan: Plan
    measurements: Measurements

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
        path = self.path / e["files"][format]
        try:
            df = pd.read_parquet(path) if format == "parquet" else pd.read_csv(path)
        except (OSError, ValueError) as exc:
            raise ReleaseError(f"cannot read {str(path)!r}: {exc}") from None
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
        return self.measurements.marginal(key, lv)

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


def _read_manifest(folder: Path) -> dict:
    if not folder.exists():
        raise ReleaseError(f"release folder {str(folder)!r} does not exist")
    if not folder.is_dir():
        raise ReleaseError(f"{str(folder)!r} is not a folder (give the release folder)")
    path = folder / MANIFEST
    manifest = read_json(
        path, ReleaseError, repr(str(path)), missing=f"{str(folder)!r} is not a dpmatrix release: no {MANIFEST}"
    )
    if not isinstance(manifest, dict) or manifest.get("format") != RELEASE_FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else None
        raise ReleaseError(
            f"{str(path)!r} is not a {RELEASE_FORMAT} manifest (format {got!r})"
        )
    return manifest


def load_release(folder: str | Path) -> Release:
    """Read a release folder written by :func:`write_release`.

    The plan is rebuilt from the manifest and the noisy residual answers from
    ``measurements.parquet``; every measured residual must be present (else
    :class:`~dpmatrix.ReleaseError`).
    """
    folder = Path(folder)
    manifest = _read_manifest(folder)
    try:
        spec = {
            "format": manifest.get("plan_format", PLAN_FORMAT),
            **{k: manifest[k] for k in ("domain", "workload", "strategies", "objective", "residuals")},
            "construction": manifest.get("construction", "centred"),
        }
        plan = Plan.from_dict(spec)
    except KeyError as exc:
        raise ReleaseError(f"the manifest of {str(folder)!r} lacks {exc}") from None
    except DPMatrixError as exc:
        raise ReleaseError(f"the manifest of {str(folder)!r} does not describe a valid plan: {exc}") from None
    mfile = folder / manifest.get("measurements", {}).get("file", MEASUREMENTS)
    try:
        pf = pq.ParquetFile(str(mfile))
    except (OSError, pa.ArrowInvalid) as exc:
        raise ReleaseError(f"cannot read the measurements {str(mfile)!r}: {exc}") from None
    dom = plan.domain
    noisy: dict[AttrSet, np.ndarray] = {}
    for batch in pf.iter_batches(columns=["attributes", "shape", "values"]):
        cols = batch.to_pydict()
        for names, shape, values in zip(cols["attributes"], cols["shape"], cols["values"]):
            try:
                key = dom.resolve(names)
            except DPMatrixError as exc:
                raise ReleaseError(f"measurements of an unknown residual set: {exc}") from None
            arr = np.asarray(values, dtype=np.float64)
            if arr.size != math.prod(shape):
                raise ReleaseError(f"measurements of {tuple(names)}: {arr.size} values for shape {shape}")
            noisy[key] = arr.reshape(shape)
    closure = plan.closure
    expected = {s for s, m in zip(closure.sets, plan.measured) if m}
    missing = expected - set(noisy)
    extra = set(noisy) - expected
    if missing or extra:
        which = sorted(missing or extra)[0]
        raise ReleaseError(
            f"measurements do not match the plan: {len(missing)} measured residual(s) missing, "
            f"{len(extra)} unexpected (e.g. {dom.names_of(which)})"
        )
    for key in expected:
        want = plan.mechanism(key).output_shape
        if tuple(noisy[key].shape) != tuple(want):
            raise ReleaseError(
                f"measurements of {dom.names_of(key)} have shape {noisy[key].shape}, the plan "
                f"expects {tuple(want)}"
            )
    mech = manifest.get("mechanism", {})
    meas = Measurements(
        plan=plan, noisy=noisy, noise=mech.get("noise", "gaussian"),
        randomness=mech.get("randomness", "unknown"),
    )
    return Release(path=folder, manifest=manifest, plan=plan, measurements=meas)
