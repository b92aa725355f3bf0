"""``dpmatrix release``: plan, measure a CSV/Parquet file (DuckDB by default) and write a release
folder.

Every release is charged to the ledger (:mod:`dpmatrix._ledger`; ``--ledger PATH`` or
``$DPMATRIX_LEDGER``) before any noise is drawn, under ``--dataset NAME`` (default: the data
file's name without suffix). Every option is checked before any data is read."""

from __future__ import annotations

import argparse
import math
import warnings
from pathlib import Path
from typing import Any

from .._defaults import ENCODINGS
from .._domain import Domain
from ..errors import DPMatrixError
from ._common import (
    SEED_WARNING,
    CLIError,
    _budget_kwargs,
    _is_pure,
    _plan_from_targets,
    _read_domain,
    _report_delta,
    _workload,
    unit_of_args,
)
from ._engine import _missing, _na_values, _on_unknown
from ._options import (
    _add_budget,
    _add_ledger,
    _add_noise,
    _add_privacy_unit,
    _add_quiet,
    _add_round,
    _add_targets,
    _add_workload,
)
from ._output import (
    Out,
    _describe_plan,
    _describe_targets,
    fmt_privacy,
    plan_privacy,
    warn_large_epsilon,
    warn_line,
    warn_mu_not_claimed,
)


def _check_options(args: argparse.Namespace) -> dict[str, Any]:
    """Every option of ``release``/``demo`` checked before any file is read."""
    from .._sizing import DEFAULT_MAX_CELLS
    from ..engines._duckdb_engine import detect_format
    from ..release import check_formats

    out: dict[str, Any] = {"delta": _report_delta(args)}
    try:
        out["formats"] = check_formats(args.tables)
    except DPMatrixError as exc:
        raise CLIError(f"--tables: {exc}") from None
    level = args.level
    if not (isinstance(level, float) and math.isfinite(level) and 0 < level < 1):
        raise CLIError(f"--level must be strictly between 0 and 1, got {level!r}")
    out["policy"] = _on_unknown(args.on_unknown)
    decimals = getattr(args, "round", None)
    if decimals is not None and not 0 <= decimals <= 15:
        raise CLIError(f"--round must be a number of decimals between 0 and 15, got {decimals}")
    if not getattr(args, "plan", None) and not getattr(args, "target", None):
        _budget_kwargs(args)
    mc = getattr(args, "max_cells", None)
    if mc is not None and mc <= 0:
        raise CLIError(f"--max-cells must be a positive integer, got {mc!r}")
    out["max_cells"] = DEFAULT_MAX_CELLS if mc is None else int(mc)
    data = str(args.data)
    spark = getattr(args, "engine", None) == "spark"  # URIs, folders, table names: Spark reads them
    if not spark and not any(ch in data for ch in "*?[") and not Path(data).is_file():
        raise CLIError(f"data file {data!r} does not exist" if not Path(data).exists() else f"data {data!r} is not a file")
    try:
        if spark:
            from ..engines._spark_engine import detect_spark_format

            out["format"] = detect_spark_format(data, args.data_format)
        else:
            out["format"] = detect_format(data, args.data_format)
    except (DPMatrixError, ValueError) as exc:
        raise CLIError(str(exc)) from None
    if args.delimiter and out["format"] != "csv":
        raise CLIError("--delimiter applies to CSV files only")
    if args.delimiter is not None and len(args.delimiter) != 1:
        raise CLIError(f"--delimiter must be one character, got {args.delimiter!r}")
    out["unit"] = _privacy_unit(args)
    if getattr(args, "no_ledger", False):
        out["ledger"] = None
    else:
        out["dataset"] = (getattr(args, "dataset", None) or _dataset_name(data)).strip()
        if not out["dataset"]:
            raise CLIError("--dataset must not be empty")
        out["ledger"] = getattr(args, "ledger", None)
    return out


def _privacy_unit(args: argparse.Namespace):
    """The person a release protects (``--privacy-id COL --max-records K``), or ``None``; with
    ``--plan`` the plan file's unit is used and these options, if given, must name the same unit
    (checked in :func:`_plan_of`)."""
    unit = unit_of_args(args)
    if unit is not None and getattr(args, "target", None):
        raise CLIError("--privacy-id plans the release for a person: give a workload and a per-person budget, "
                       "not --target")  # fmt: skip
    return unit


def _plan_unit(plan: Any, asked: Any, plan_path: str) -> None:
    """A saved plan is released for the unit it was planned for: refuse another one."""
    have = plan.privacy_unit
    if asked is None or asked == have:
        return
    if have is None:
        raise CLIError(f"the plan {plan_path!r} protects single records (it was saved without --privacy-id); "
                       f"plan again for {asked.describe()}: dpmatrix plan ... --privacy-id {asked.id_column} "
                       f"--max-records {asked.max_records} --save PLAN.json")  # fmt: skip
    raise CLIError(f"the plan {plan_path!r} protects {have.describe()}, but this release was given "
                   f"{asked.describe()}; drop --privacy-id/--max-records/--missing-ids (the plan's unit is used) "
                   "or plan again with the unit you want")  # fmt: skip


def _reading_note(args: argparse.Namespace, unit: Any, plan: Any) -> str:
    """What reading the data will do: the named engine counts it, except under a privacy unit,
    where the used columns and the identifier are read into memory, bounded per person and
    counted by numpy whatever engine was named (:mod:`dpmatrix._measure.unit_records`)."""
    if unit is None:
        return f"reading {args.data} with {args.engine} ..."
    from .._measure.measure_plan import used_attributes

    used = used_attributes(plan)
    names = [plan.domain.names[i] for i in (used or range(len(plan.domain)))]
    cols = ", ".join([*names, unit.id_column])
    engine = "" if args.engine == "numpy" else f" (--engine {args.engine} is not used under a privacy unit)"
    drop = "; records without an identifier are left out" if unit.missing_ids == "drop" else ""
    return (f"reading columns {cols} of {args.data} into memory, keeping at most {unit.max_records} records per "
            f"{unit.id_column}{drop}, then counting with numpy{engine} ...")


def _dataset_name(data: str) -> str:
    from .._workflow import dataset_name

    return dataset_name(data)


def _spark_conf(items: list[str] | None) -> dict[str, str]:
    conf: dict[str, str] = {}
    for item in items or []:
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise CLIError(f"--spark-conf: bad entry {item!r}; write key=value, e.g. spark.executor.memory=8g")
        conf[k.strip()] = v.strip()
    return conf


def _plan_of(args: argparse.Namespace, domain: Domain | None, opts: dict):
    """The plan: a checked plan file (--plan) or planned from the workload and budget."""
    from .._plan_file import load_plan
    from .._sizing import check_size, estimate_size
    from ..planners._dispatch import plan as make_plan

    if getattr(args, "plan", None):
        if any(getattr(args, n) is not None for n in ("workload", "marginals", "workload_file")):
            raise CLIError("give either --plan or a workload (--workload/--marginals), not both")
        if any(getattr(args, n) is not None for n in ("rho", "epsilon", "mu")):
            raise CLIError("a saved --plan fixes the privacy budget; do not give --rho/--epsilon/--mu")
        plan = load_plan(args.plan)
        if domain is not None and domain != plan.domain:
            raise CLIError(f"the domain in {args.plan!r} differs from the --domain file")
        _plan_unit(plan, opts.get("unit"), args.plan)
        return plan
    if domain is None:
        raise CLIError("give --domain D.json (or a saved --plan)")
    wk = _workload(args, domain)
    # refused before planning (planning a huge workload takes long itself)
    check_size(estimate_size(wk, formats=len(opts["formats"]), spill=bool(getattr(args, "spill", False))),
               opts["max_cells"])  # fmt: skip
    if getattr(args, "target", None):
        return _plan_from_targets(args, wk)
    return make_plan(wk, objective=args.objective, construction=getattr(args, "construction", "auto"),
                     privacy_unit=opts.get("unit"), **_budget_kwargs(args))  # fmt: skip


def _publish(args: argparse.Namespace, plan: Any, opts: dict, delta: float, noise: str, say: Out, overwrite: bool):
    """The library's release workflow with the command line's options."""
    import numpy as np

    from .._workflow import publish

    no_ledger = getattr(args, "no_ledger", False)
    return publish(
        plan, str(args.data), args.out,
        dataset=opts.get("dataset"), ledger=False if no_ledger else opts["ledger"], engine=args.engine,
        encoding=getattr(args, "encoding", "auto"), on_unknown=opts["policy"], data_format=args.data_format,
        delimiter=args.delimiter, memory_limit=getattr(args, "memory_limit", None),
        spark_master=getattr(args, "spark_master", None), spark_conf=_spark_conf(getattr(args, "spark_conf", None)),
        spark_executor_timeout=getattr(args, "spark_executor_timeout", 300.0),
        level=args.level, delta=delta, formats=opts["formats"], round=getattr(args, "round", None), noise=noise,
        overwrite=overwrite, report=not getattr(args, "no_report", False), max_cells=opts["max_cells"],
        spill=bool(getattr(args, "spill", False)),
        rng=np.random.default_rng(args.seed) if args.seed is not None else None,
        progress=say.progress, on_note=say.note,
        notes={"data": {"engine": args.engine, "encoding": getattr(args, "encoding", "auto"),
                        "on_unknown": opts["policy"],
                        "missing": {a.name: a.missing for a in plan.domain.attributes},
                        "na_values": list(_na_values(getattr(args, "na_values", None)))}},
        na_values=_na_values(getattr(args, "na_values", None)), privacy_unit=opts.get("unit"),
    )  # fmt: skip


def run_release(args: argparse.Namespace, domain: Domain | None, say: Out, overwrite: bool) -> Any:
    """Check the options, plan (or load a plan) and hand everything to the library's release
    workflow (:func:`dpmatrix.publish`: validation, ledger, counting, noise, writing and the
    report, in that order); print what it did. Returns the Measurements."""
    from .._measure.discrete import InsecureRandomnessWarning
    from ..release import TABLES_README

    opts = _check_options(args)
    delta = opts["delta"]
    plan = _plan_of(args, domain, opts)
    privacy = plan_privacy(plan, delta, args)  # of the noise this release draws
    warn_large_epsilon(privacy["epsilon"], delta)
    warn_mu_not_claimed(args, privacy)
    _describe_plan(plan, say, delta, describe_privacy=False)
    if getattr(args, "target", None):
        _describe_targets(plan, say)
    noise = getattr(args, "noise", "auto")
    if _is_pure(plan) and noise == "discrete_gaussian":
        raise CLIError("--noise discrete_gaussian is a zCDP option: a pure epsilon-DP plan uses the "
                       "exact discrete Laplace")
    say.note(_reading_note(args, opts.get("unit") or plan.privacy_unit, plan))  # the Spark master is not echoed
    with warnings.catch_warnings():
        if args.seed is not None:  # said once, in the command line's words
            warn_line(SEED_WARNING)
            warnings.filterwarnings("ignore", category=InsecureRandomnessWarning)
        done = _publish(args, plan, opts, delta, noise, say, overwrite)
    written = done.path
    kinds = " and ".join({"parquet": "one Parquet dataset in tables/", "csv": "one CSV file each in marginals/"}[f]
                         for f in opts["formats"])  # fmt: skip
    say(f"wrote {len(plan.workload)} marginal tables ({kinds}), measurements.parquet and manifest.json to {written}/")
    say(f"table columns: estimate, variance, std, and lower/upper = the {args.level:.0%} confidence interval "
        f"(described in {written}/{TABLES_README})")
    say(fmt_privacy(done.privacy))
    if done.report is not None:
        if done.report.is_file():
            say(f"wrote {done.report} (open it in a browser)")
        else:
            warn_line(f"the release was written but its HTML report was not; write it with: dpmatrix report {written}")
    return done.measurements


def cmd_release(args: argparse.Namespace) -> int:
    from .._postprocess import postprocess, write_postprocessed

    say = Out(args.quiet)
    domain = _read_domain(args.domain) if args.domain else None
    missing = _missing(getattr(args, "missing", None))
    if missing is not None:
        if domain is None:
            raise CLIError("--missing changes the --domain file's attributes; give --domain")
        from .._domain import with_missing

        domain = with_missing(domain, missing)
    meas = run_release(args, domain, say, overwrite=args.overwrite)
    if getattr(args, "postprocess", False):
        pp = postprocess(meas, progress=say.progress)
        tables = tuple(t.strip() for t in args.tables.split(",") if t.strip())
        out = write_postprocessed(pp, args.out, meas=meas, formats=tables, progress=say.progress)
        say(f"wrote post-processed tables ({pp.method}) to {out}/: non-negative and consistent, "
            "but biased and without variances or intervals (see its manifest.json)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``release`` command and its options, added to the ``dpmatrix`` parser's subcommands."""
    r = sub.add_parser("release", help="plan, measure a CSV/Parquet file and write a release folder",
                       description="Plan the noise, count the marginals of DATA (DuckDB, without loading "
                       "it into memory), add the noise and write a release folder: manifest.json, "
                       "measurements.parquet and the marginal tables (one Parquet dataset in tables/; "
                       "CSV files per marginal with --tables parquet,csv).")
    r.add_argument("data", metavar="DATA", help="CSV or Parquet file (format from the suffix or --data-format); "
                   "with --engine spark also a URI (hdfs://, s3a://, file://), a folder of part files or a table name")
    r.add_argument("--domain", metavar="D.json", help="domain file; raw values are mapped to codes through it")
    r.add_argument("--plan", metavar="PLAN.json", help="a plan saved by 'dpmatrix plan --save' (instead of a workload and budget)")
    _add_workload(r)
    _add_budget(r)
    _add_targets(r)
    r.add_argument("--out", required=True, metavar="DIR", help="release folder to create (must not exist or be empty)")
    r.add_argument("--overwrite", action="store_true", help="replace an earlier dpmatrix release in --out")
    r.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals (default 0.95)")
    r.add_argument("--tables", default="parquet",
                   help="parquet (default): every table in one Parquet dataset under DIR/tables/; add csv "
                   "(parquet,csv) for one CSV file per marginal as well, or csv alone")
    _add_round(r)
    _add_privacy_unit(r)
    r.add_argument("--on-unknown", default="error", metavar="POLICY",
                   help="values the domain does not cover: error (default), clip (to the first/last "
                   "bin or code), other (to the code labelled 'other'); or per column: age=clip,race=other")
    r.add_argument("--missing", metavar="POLICY",
                   help="missing values (empty cells, NaN, NULL, --na-values): error (the domain's "
                   "default), category (one more level, '(missing)'), drop (rows left out of every "
                   "marginal); or per column: income=category,sex=drop. Overrides the domain file")
    r.add_argument("--na-values", metavar="M1,M2", default="",
                   help="text markers that also mean a missing value, e.g. 'NA,?'")
    r.add_argument("--encoding", choices=list(ENCODINGS), default="auto",
                   help="what DATA holds: raw values (labels matched as text, numbers put into the "
                   "domain's bins), codes 0..size-1, or auto (default: the reading the data fit; "
                   "refused when both fit and disagree)")
    r.add_argument("--engine", choices=["duckdb", "numpy", "spark"], default="duckdb",
                   help="duckdb (default; files larger than memory), numpy (loads the file with pandas) "
                   "or spark (counts in Apache Spark; DATA may be a Parquet/CSV path, glob, URI or table)")
    r.add_argument("--spark-master", metavar="URL",
                   help="Spark master for --engine spark: local[*] (default), spark://host:7077, yarn, k8s://...")
    r.add_argument("--spark-conf", "--conf", metavar="K=V", action="append", dest="spark_conf",
                   help="extra Spark setting for --engine spark (repeatable), e.g. spark.executor.memory=8g; "
                   "spark-defaults.conf in $SPARK_CONF_DIR applies as for spark-submit")
    r.add_argument("--spark-executor-timeout", type=float, default=300.0, metavar="SECONDS",
                   help="--engine spark: cancel a Spark job that got no executor for this long (default 300)")
    r.add_argument("--data-format", choices=["csv", "parquet"], help="format of DATA if its suffix does not tell")
    r.add_argument("--delimiter", help="CSV field delimiter (default: ',', as every engine reads it)")
    r.add_argument("--memory-limit", help="DuckDB memory limit, e.g. 4GB (it spills to disk beyond)")
    r.add_argument("--spill", action="store_true",
                   help="keep the noisy answers in a temporary on-disk store instead of memory "
                        "(plans with hundreds of millions of noisy numbers)")
    r.add_argument("--seed", type=int, help="TESTING ONLY: fix the noise (never written to the release; the "
                   "release is marked REPRODUCIBLE, NOT PRIVATE)")
    r.add_argument("--max-cells", type=int, metavar="N",
                   help="refuse releases with more than N table rows + noisy values (default 500,000,000), "
                   "checked before any data is read")
    _add_ledger(r)
    r.add_argument("--no-report", action="store_true",
                   help="do not write report.html (the HTML report) into the release folder")
    r.add_argument("--postprocess", action="store_true",
                   help="also write non-negative, consistent (but biased, no variances) tables fitted "
                   "with private-pgm to DIR/postprocessed/")
    _add_noise(r)
    _add_quiet(r)
    r.set_defaults(func=cmd_release)
