"""Writing a release: the measurements, the tables and the manifest into a hidden stage, which
then replaces the output folder (see :mod:`dpmatrix.release._layout`)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import shutil
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._defaults import DEFAULT_DELTA as _DEFAULT_DELTA
from .._jsonfile import json_float
from .._provenance import NOT_IN_LEDGER as _NOT_IN_LEDGER
from .._release_tables import LAYOUT, STAT_COLUMNS, TABLES_DIR, WrittenTables, fsync_path, write_tables
from .._statement import check_delta, privacy_line, privacy_summary
from ..errors import DPMatrixError, ReleaseError
from ..protocols import HasClosure
from ._arrays import arrays_out
from ._layout import _swap_into_place, check_target, output_lock, recover_output, sibling_path
from ._manifest import (
    MANIFEST,
    MANIFEST_DIGEST,
    MEASUREMENTS,
    RELEASE_FORMAT,
    _library_version,
    dump_json,
    sha256_file,
    write_digest_list,
)
from ._measurements import _write_measurements

if TYPE_CHECKING:
    from .._reconstruct.measurements import Measurements
    from ..planners._residual.plan import Plan


MARGINALS_DIR = "marginals"


#: plain-text description of the table columns (confidence level, rounding, negative estimates,
#: how to read the dataset), for readers who open the tables without the manifest
TABLES_README = "README.txt"


NEGATIVE_ESTIMATES = (
    "Negative estimates: the noise is unbiased, so a small true count can come out below zero "
    "(its interval then usually contains 0). Publish it as is, report it as 0, or replace the "
    "tables by consistent non-negative ones fitted to this release (dpmatrix postprocess DIR --out "
    "DIR2: no data, no new noise, no privacy cost; biased, without intervals); rounding or clipping "
    "changes no privacy guarantee (it uses only released numbers) but adds bias."
)
SUMMING_CELLS = (
    "Counts over several cells (a range, a sum of values, a difference): do not add the cells' "
    "estimates and variances by hand, because the cells' errors are correlated and the summed "
    "variance is wrong; ask the release instead (dpmatrix query DIR --where 'age=25..54' --where "
    "'sex=F', or Release.count in Python), which gives the exact variance and interval."
)


FORMATS = ("parquet", "csv")


#: written unless asked otherwise: the Parquet dataset only (per-marginal CSV files on request)
DEFAULT_FORMATS = ("parquet",)


#: default δ at which ε is reported when the budget was not given as (ε, δ)
DEFAULT_DELTA = _DEFAULT_DELTA


#: how a release measured outside the release workflow without a ledger is recorded
NOT_IN_LEDGER = _NOT_IN_LEDGER

#: the first lines of ``README.txt`` of a release whose noise came from a seeded generator
NOT_PRIVATE_README = (
    "*** REPRODUCIBLE, NOT PRIVATE ***\n"
    "The noise of this release came from a seeded generator (rng= / --seed): anyone with the seed\n"
    "can remove it. It is for testing only and must not be published as a private release.\n\n"
)


def _parquet_marks(reproducible: bool) -> dict[str, str] | None:
    """Key-value metadata of the Parquet tables: the NOT PRIVATE mark of a seeded release."""
    if not reproducible:
        return None
    return {"dpmatrix.private": "false",
            "dpmatrix.note": "REPRODUCIBLE, NOT PRIVATE: the noise came from a seeded generator (testing only)"}


def check_formats(formats: Iterable[str]) -> tuple[str, ...]:
    if isinstance(formats, str):
        formats = [f for f in formats.split(",")]
    fs = tuple(dict.fromkeys(str(f).strip().lower() for f in formats if str(f).strip()))
    bad = [f for f in fs if f not in FORMATS]
    if bad or not fs:
        raise ReleaseError(f"table formats must be among {', '.join(FORMATS)}, got {', '.join(map(str, formats)) or 'none'}")
    return fs


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
    ledger: Mapping[str, Any] | None = None,
    derived: Callable[[Path], Sequence[str]] | None = None,
    privacy_unit: Any = None,
) -> Path:
    """Write a release folder (layout in :mod:`dpmatrix.release`, locking in
    :mod:`dpmatrix.release._layout`, integrity in :mod:`dpmatrix.release._manifest`).

    Parameters
    ----------
    measurements : Measurements
    out_dir : str or Path
    level : float
        Confidence level of the ``lower``/``upper`` columns.
    delta : float
        δ at which ε is reported (checked by :func:`dpmatrix._statement.check_delta`).
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
        The noise came from a user-given seed: recorded in the manifest, in every privacy
        line, in ``README.txt`` and in the Parquet tables' metadata as "REPRODUCIBLE, NOT
        PRIVATE". Measurements whose ``randomness`` is ``"seeded_insecure"`` are always marked
        (``False`` cannot remove the mark).
    round : int, optional
        Round the published tables' numbers (estimate, variance, std, lower, upper) to this
        many decimals (``0``: whole numbers); the measurements are kept exact, so
        ``load_release(...).marginal`` still reconstructs unrounded answers. Post-processing:
        no privacy cost.
    ledger : mapping, optional
        The ledger entry this release was charged to (:meth:`dpmatrix.Ledger.anchor`), recorded
        in the manifest; ``None``: what the measurements' own provenance says
        (``measurements.provenance``: the entry :func:`dpmatrix.publish` charged, or "not in
        any ledger" for measurements made outside it).
    derived : callable, optional
        Called with the finished stage folder (a complete release) before it replaces
        ``out_dir``, while the lock is held; writes files derived from the release (the
        report) and returns their names, whose SHA-256 join the digest list
        (``manifest.sha256``). A failure there is warned and the release written without them.
    privacy_unit : Unit, optional
        The person the measurements protect (default: the plan's,
        :attr:`~dpmatrix.planners._base.PlanBase.privacy_unit`): the privacy section gains
        ``"unit"`` with the per-person statement (:func:`dpmatrix._unit.unit_privacy`), and
        README.txt names it.

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
    from .._reconstruct.measurements import Measurements

    if not isinstance(measurements, Measurements):
        raise ReleaseError(f"write_release needs Measurements, got {type(measurements).__name__}")
    formats = check_formats(formats)
    if isinstance(level, (str, bool)) or not 0 < float(level) < 1:
        raise ReleaseError(f"confidence level must be strictly between 0 and 1, got {level!r}")
    pure = measurements.noise == "discrete_laplace"
    delta = 0.0 if pure else check_delta(delta)
    if round is not None and (isinstance(round, bool) or not isinstance(round, int) or not 0 <= round <= 15):
        raise ReleaseError(f"round must be a number of decimals between 0 and 15, got {round!r}")
    # a seeded generator's noise is never private, whatever the caller says
    reproducible = bool(reproducible) or measurements.randomness == "seeded_insecure"
    plan: Plan = measurements.plan  # type: ignore[assignment]
    privacy = privacy_summary(plan, noise=measurements.noise, delta=delta, reproducible=reproducible)
    unit = privacy_unit if privacy_unit is not None else plan.privacy_unit
    if unit is not None:
        from .._unit import unit_privacy  # pandas-free import of this module (the saved-table read path)

        privacy = unit_privacy(privacy, unit, noise=measurements.noise, delta=delta)
    if reproducible:  # said in words too, for readers of the manifest alone
        privacy = {**privacy, "warning": _parquet_marks(True)["dpmatrix.note"]}  # type: ignore[index]
    out = Path(out_dir).absolute()
    with output_lock(out) as fresh:
        if fresh:
            recover_output(out)
        check_target(out, overwrite)
        stage = sibling_path(out, "partial")
        try:
            # the ledger entry the measurements carry (dpmatrix.publish sets it; "not in any
            # ledger" for dpmatrix.measure outside the workflow), unless the caller names one
            extra = {"ledger": dict(ledger) if ledger else measurements.provenance.manifest_ledger()}
            if isinstance(plan, HasClosure):
                _write_stage(measurements, stage, plan, privacy, formats, level, progress, notes, reproducible, round,
                             extra)  # fmt: skip
            else:
                _write_stage_listed(measurements, stage, plan, privacy, formats, level, progress, notes, reproducible,
                                    extra)  # fmt: skip
            if derived is not None:
                _add_derived(stage, derived)
            _swap_into_place(stage, out)
        except OSError as exc:
            shutil.rmtree(stage, ignore_errors=True)
            raise ReleaseError(f"cannot write the release to {str(out)!r}: {exc.strerror or exc}") from None
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
    return Path(out_dir)


def _unit_readme(privacy: Mapping[str, Any]) -> str:
    """README.txt's paragraph on the privacy unit (empty without one)."""
    unit = privacy.get("unit")
    if not isinstance(unit, Mapping):
        return ""
    return f"\nPrivacy unit: {unit['statement']}.\n{privacy_line(privacy)}\n"


def _add_derived(stage: Path, derived: Callable[[Path], Sequence[str]]) -> None:
    """Write the derived files into the finished stage and add their digests to the list."""
    try:
        names = list(derived(stage))
    except (DPMatrixError, OSError, ValueError) as exc:
        warnings.warn(f"the release was written without its derived files (report): {exc}", UserWarning,
                      stacklevel=3)  # fmt: skip
        return
    write_digest_list(stage, {n: sha256_file(stage / n) for n in names})
    fsync_path(stage)


def _lower_bound_entry(plan) -> dict[str, Any] | None:
    """The manifest's ``lower_bound`` entry: ``{total, rmse, exact, ratio, value, quantity, ...}``
    from the plan's facts (:attr:`~dpmatrix.protocols.PlanFacts.bound`); ``None`` when the plan
    has no Gaussian bound or it cannot be computed (the release never fails on it)."""
    bound = plan.facts.bound
    return None if bound is None else dict(bound)


def tables_readme(level: float, decimals: int | None, formats: Sequence[str] = DEFAULT_FORMATS,
                  key: str = "age,sex", reproducible: bool = False) -> str:
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
    warning = (NOT_PRIVATE_README if reproducible else "")
    return (
        f"{warning}Tables of this dpmatrix release.\n{where}"
        "Columns:\n"
        "  estimate  the differentially private count (unbiased)\n"
        "  variance  its exact variance (from the noise scales; no data used)\n"
        "  std       the standard deviation, sqrt(variance)\n"
        f"  lower, upper  the {pct} confidence interval (confidence level {float(level):g})\n"
        f"Numbers are {rounded}. The privacy guarantee is stated in manifest.json.\n"
        f"{SUMMING_CELLS}\n"
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


def _manifest_head(measurements, plan, privacy, level, reproducible, planner: str) -> dict[str, Any]:
    """The keys every release manifest opens with, in order: format, library, creation time,
    privacy statement, mechanism (noise, randomness, reproducibility, planner), the plan's accuracy
    (RMSE and largest variance) and the confidence level of the intervals."""
    return {
        "format": RELEASE_FORMAT,
        "library": {"name": "dpmatrix", "version": _library_version()},
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "privacy": privacy,
        "mechanism": {
            "noise": measurements.noise,
            "randomness": measurements.randomness,
            "reproducible": bool(reproducible),
            "planner": planner,
        },
        "accuracy": {"rmse": plan.rmse(), "max_variance": plan.max_variance()},
        "confidence_level": float(level),
    }


def _open_stage(measurements, stage: Path, progress) -> tuple[int, int]:
    """Create the stage directory and write the measurements file first, synced to disk before
    anything refers to it; returns (mechanisms or residual sets, noisy values) written."""
    stage.mkdir(parents=True)
    n_sets, n_values = _write_measurements(measurements, stage / MEASUREMENTS, progress)
    fsync_path(stage / MEASUREMENTS)  # (a file: its data reach the disk before the manifest)
    return n_sets, n_values


def _seal_stage(stage: Path, manifest: dict[str, Any], notes, extra: Mapping[str, Any] | None) -> None:
    """Finish a stage: add the notes and the caller's extra manifest keys, write the manifest, then
    its digest, then sync the directory."""
    if notes:
        manifest["notes"] = dict(notes)
    manifest.update(extra or {})
    text = dump_json(manifest) + "\n"
    _write_synced(stage / MANIFEST, text)
    # written last: its presence (matching the manifest) marks the stage as a complete release
    _write_synced(stage / MANIFEST_DIGEST, f"{hashlib.sha256(text.encode('utf-8')).hexdigest()}  {MANIFEST}\n")
    fsync_path(stage)


def _write_stage(measurements, stage: Path, plan, privacy, formats, level, progress, notes, reproducible,
                 decimals: int | None = None, extra: Mapping[str, Any] | None = None) -> None:
    n_sets, n_values = _open_stage(measurements, stage, progress)
    wk = plan.workload
    cell_var = np.asarray(plan.marginal_table()["max_variance"], dtype=float)
    written = write_tables(measurements, stage, formats=formats, level=level, decimals=decimals, progress=progress,
                           metadata=_parquet_marks(reproducible))  # fmt: skip
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
    _write_synced(stage / TABLES_README, tables_readme(level, decimals, formats, example, reproducible) + _unit_readme(privacy))
    digests = _stage_digests(stage, entries, (MEASUREMENTS, TABLES_README), written)
    planner = "ResidualPlanner" if plan.is_plain else "ResidualPlanner+"
    manifest: dict[str, Any] = {
        **_manifest_head(measurements, plan, privacy, level, reproducible, planner),
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
    if "targets" in spec:  # planned from accuracy targets: rows read by the report
        manifest["targets"] = spec["targets"]["rows"]
        manifest["target_certificate"] = {"kind": spec["targets"]["kind"], **spec["targets"]["certificate"]}
        manifest["target_variances"] = spec["targets"]["variances"]  # every query's, for load_release
    bound = _lower_bound_entry(plan)
    if bound is not None:
        manifest["lower_bound"] = bound
    _seal_stage(stage, manifest, notes, extra)


def _write_stage_listed(measurements, stage: Path, plan, privacy, formats, level, progress, notes,
                        reproducible, extra: Mapping[str, Any] | None = None) -> None:
    """The release stage of a plan that lists its mechanisms (QuerySmasher, pure ε-DP, ...): one
    table per workload entry, the plan's own ``to_dict`` under ``plan`` in the manifest."""
    n_sets, n_values = _open_stage(measurements, stage, progress)
    written = write_tables(measurements, stage, formats=formats, level=level, progress=progress,
                           metadata=_parquet_marks(reproducible))  # fmt: skip
    entries = [
        {"attributes": list(names), "key": key, "cells": int(rows), "max_variance": json_float(var),
         **({} if tuple(cols) == tuple(names) else {"columns": list(cols)}),
         **({"codes": list(codes)} if codes else {}), **_table_entry(written, key)}
        for names, key, rows, var, _, cols, codes in written.tables
    ]  # fmt: skip
    spec, arrays = arrays_out(plan.to_dict(), stage)  # large solved arrays as .npy files, not JSON text
    example = entries[min(len(entries) - 1, 1)]["key"] if entries else "total"
    _write_synced(stage / TABLES_README, tables_readme(level, None, formats, example, reproducible) + _unit_readme(privacy))
    digests = _stage_digests(stage, entries, (MEASUREMENTS, TABLES_README, *arrays), written)
    manifest: dict[str, Any] = {
        **_manifest_head(measurements, plan, privacy, level, reproducible, spec.get("planner", type(plan).__name__)),
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
    _seal_stage(stage, manifest, notes, extra)
