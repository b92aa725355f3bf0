"""``dpmatrix release``: plan, measure a CSV/Parquet file (DuckDB by default) and write a release
folder.

Every release is charged to the ledger (:mod:`dpmatrix.ledger`; ``--ledger PATH`` or
``$DPMATRIX_LEDGER``) before any noise is drawn, under ``--dataset NAME`` (default: the data
file's name without suffix). Every option is checked before any data is read."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from ..defaults import ENCODINGS
from ..domain import Domain
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
)
from ._engine import CountingBar, _on_unknown, _open_engine
from ._options import _add_budget, _add_ledger, _add_noise, _add_quiet, _add_round, _add_targets, _add_workload
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
from ._report import write_release_report_into


def _check_options(args: argparse.Namespace) -> dict[str, Any]:
    """Every option of ``release``/``demo`` checked before any file is read."""
    from ..engines.duckdb_engine import detect_format
    from ..release import _check_formats
    from ..sizing import DEFAULT_MAX_CELLS

    out: dict[str, Any] = {"delta": _report_delta(args)}
    try:
        out["formats"] = _check_formats(args.tables)
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
    if not any(ch in data for ch in "*?[") and not Path(data).is_file():
        raise CLIError(f"data file {data!r} does not exist" if not Path(data).exists() else f"data {data!r} is not a file")
    try:
        out["format"] = detect_format(data, args.data_format)
    except (DPMatrixError, ValueError) as exc:
        raise CLIError(str(exc)) from None
    if args.delimiter and out["format"] != "csv":
        raise CLIError("--delimiter applies to CSV files only")
    if args.delimiter is not None and len(args.delimiter) != 1:
        raise CLIError(f"--delimiter must be one character, got {args.delimiter!r}")
    if getattr(args, "no_ledger", False):
        out["ledger"] = None
    else:
        out["dataset"] = (getattr(args, "dataset", None) or _dataset_name(data)).strip()
        if not out["dataset"]:
            raise CLIError("--dataset must not be empty")
        out["ledger"] = getattr(args, "ledger", None)
    return out


def _dataset_name(data: str) -> str:
    name = Path(data).name
    for suffix in sorted((".csv", ".tsv", ".txt", ".gz", ".zst", ".parquet", ".pq", ".parq"), key=len, reverse=True):
        while name.lower().endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name


def run_release(args: argparse.Namespace, domain: Domain | None, say: Out, overwrite: bool) -> Any:
    """Check every option, plan (or load a plan), estimate the size, lock the output folder,
    charge the ledger, measure the data, write the release; returns the Measurements.

    Order matters for privacy: nothing is measured before the ledger holds the spend, and the
    spend stays charged if anything fails afterwards."""
    import shutil

    import numpy as np

    from ..ledger import Ledger
    from ..plan_file import load_plan
    from ..planners.dispatch import plan as make_plan
    from ..release import MANIFEST, TABLES_README, _sibling, check_target, output_lock, recover_output, write_release
    from ..release_tables import check_columns
    from ..sizing import check_size, describe_size, estimate_size

    opts = _check_options(args)
    delta = opts["delta"]
    if args.seed is not None:
        warn_line(SEED_WARNING)
    if getattr(args, "plan", None):
        if any(getattr(args, n) is not None for n in ("workload", "marginals", "workload_file")):
            raise CLIError("give either --plan or a workload (--workload/--marginals), not both")
        if any(getattr(args, n) is not None for n in ("rho", "epsilon", "mu")):
            raise CLIError("a saved --plan fixes the privacy budget; do not give --rho/--epsilon/--mu")
        plan = load_plan(args.plan)
        if domain is not None and domain != plan.domain:
            raise CLIError(f"the domain in {args.plan!r} differs from the --domain file")
    else:
        if domain is None:
            raise CLIError("give --domain D.json (or a saved --plan)")
        wk = _workload(args, domain)
        spill = bool(getattr(args, "spill", False))
        check_size(estimate_size(wk, formats=len(opts["formats"]), spill=spill), opts["max_cells"])
        if getattr(args, "target", None):
            plan = _plan_from_targets(args, wk)
        else:
            plan = make_plan(wk, objective=args.objective, construction=getattr(args, "construction", "auto"),
                             **_budget_kwargs(args))  # fmt: skip
    size = estimate_size(plan.workload, formats=len(opts["formats"]), spill=bool(getattr(args, "spill", False)))
    check_size(size, opts["max_cells"])
    check_columns(plan.domain.names)  # the tables' column names: refused before any data is read
    privacy = plan_privacy(plan, delta, args)  # of the noise this release draws
    warn_large_epsilon(privacy["epsilon"], delta)
    warn_mu_not_claimed(args, privacy)
    _describe_plan(plan, say, delta, describe_privacy=False)
    if getattr(args, "target", None):
        _describe_targets(plan, say)
    say(describe_size(size))
    noise = getattr(args, "noise", "auto")
    if _is_pure(plan):
        if noise == "discrete_gaussian":
            raise CLIError("--noise discrete_gaussian is a zCDP option: a pure epsilon-DP plan uses the "
                           "exact discrete Laplace")
        noise = None  # the plan's own: exact discrete Laplace from the OS CSPRNG
    out = Path(args.out)
    ledger = None
    if not getattr(args, "no_ledger", False):
        ledger = Ledger(opts["ledger"])
    with output_lock(out):
        recover_output(out)
        check_target(out, overwrite)  # fail before touching the data
        reservation = _reserve(ledger, opts, plan, str(args.data), out, say, privacy=privacy)
        work = _sibling(out.absolute(), "work")
        try:
            with reservation as _charge:
                work.mkdir()
                # the OS CSPRNG (rng=None) unless a testing seed was given (secure by
                # default; the sampler is chosen by dpmatrix.measure.secure.resolve_noise)
                rng = np.random.default_rng(args.seed) if args.seed is not None else None
                engine = CountingBar(_open_engine(args, plan.domain, say, temp_directory=work / "duckdb"), plan,
                                     say.progress)  # fmt: skip
                try:
                    meas = plan.measure(
                        None, rng=rng, progress=say.progress, engine=engine, noise=noise,
                        store=(work / "store") if getattr(args, "spill", False) else None,
                    )  # fmt: skip
                finally:
                    engine.close()
                del engine, rng
                notes = {
                    "data": {"engine": args.engine, "encoding": getattr(args, "encoding", "auto"),
                             "on_unknown": opts["policy"]},
                }  # fmt: skip
                written = write_release(
                    meas, out, level=args.level, delta=delta, formats=opts["formats"],
                    progress=say.progress, overwrite=overwrite, notes=notes,
                    reproducible=args.seed is not None, round=getattr(args, "round", None),
                )  # fmt: skip
        finally:
            shutil.rmtree(work, ignore_errors=True)
    privacy = json.loads((Path(written) / MANIFEST).read_text())["privacy"]
    kinds = " and ".join({"parquet": "one Parquet dataset in tables/", "csv": "one CSV file each in marginals/"}[f]
                         for f in opts["formats"])  # fmt: skip
    say(f"wrote {len(plan.workload)} marginal tables ({kinds}), measurements.parquet and manifest.json to {written}/")
    say(f"table columns: estimate, variance, std, and lower/upper = the {args.level:.0%} confidence interval "
        f"(described in {written}/{TABLES_README})")
    say(fmt_privacy(privacy))
    if not getattr(args, "no_report", False):
        try:
            report = write_release_report_into(Path(written))
        except (DPMatrixError, OSError, ValueError) as exc:
            warn_line(f"the release was written but its HTML report was not ({exc}); "
                      f"write it with: dpmatrix report {written}")
        else:
            say(f"wrote {report} (open it in a browser)")
    return meas


def _reserve(ledger, opts: dict, plan, data: str, out: Path, say: Out, privacy: dict | None = None):
    """The ledger charge of this release: a context manager that reserves ρ of the plan (for
    discrete noise the rounded-up σ spends at most that) before any noise is drawn, and marks
    the spend completed or failed on exit (a no-op without a ledger)."""
    from contextlib import nullcontext

    if ledger is None:
        warn_line("--no-ledger: this release is not recorded in any privacy-budget ledger")
        return nullcontext()
    fp = ledger.fingerprint(data)
    if _is_pure(plan):  # pure epsilon-DP composes by adding epsilon
        eps = float(plan.pure_epsilon)
        charge = ledger.reserve(opts["dataset"], fp, epsilon=eps, note=f"release to {out}")
        before = ledger.spent(opts["dataset"], fp)
        cap = f" of its cap {before.epsilon_cap:.6g}" if before.epsilon_cap is not None else " (no cap set)"
        say.note(f"ledger {ledger.path}: dataset {opts['dataset']!r} has spent pure epsilon = "
                 f"{before.epsilon:.6g}{cap} before this release of epsilon = {eps:.6g}")
        return charge
    charge = ledger.reserve(opts["dataset"], fp, rho=float(plan.rho), note=f"release to {out}")
    before = ledger.spent(opts["dataset"], fp)
    cap = f" of its cap {before.rho_cap:.6g}" if before.rho_cap is not None else " (no cap set)"
    eps = (f" (epsilon = {privacy['epsilon']:.6g} at delta = {privacy['delta']:.3g})"
           if privacy is not None and privacy.get("epsilon") is not None else "")
    say.note(f"ledger {ledger.path}: dataset {opts['dataset']!r} has spent rho = {before.rho:.6g}{cap} "
             f"before this release of rho = {float(plan.rho):.6g}{eps}")
    return charge


def cmd_release(args: argparse.Namespace) -> int:
    from ..postprocess import postprocess, write_postprocessed

    say = Out(args.quiet)
    domain = _read_domain(args.domain) if args.domain else None
    meas = run_release(args, domain, say, overwrite=args.overwrite)
    if getattr(args, "postprocess", False):
        pp = postprocess(meas, progress=not say.quiet)
        tables = tuple(t.strip() for t in args.tables.split(",") if t.strip())
        out = write_postprocessed(pp, args.out, meas=meas, formats=tables, progress=not say.quiet)
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
    r.add_argument("data", metavar="DATA", help="CSV or Parquet file (format from the suffix or --data-format)")
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
    r.add_argument("--on-unknown", default="error", metavar="POLICY",
                   help="values the domain does not cover: error (default), clip (to the first/last "
                   "bin or code), other (to the code labelled 'other'); or per column: age=clip,race=other")
    r.add_argument("--encoding", choices=list(ENCODINGS), default="auto",
                   help="what DATA holds: raw values (labels matched as text, numbers put into the "
                   "domain's bins), codes 0..size-1, or auto (default: the reading the data fit; "
                   "refused when both fit and disagree)")
    r.add_argument("--engine", choices=["duckdb", "numpy", "spark"], default="duckdb",
                   help="duckdb (default; files larger than memory), numpy (loads the file with pandas) "
                   "or spark (counts in Apache Spark; DATA may be a Parquet/CSV path, glob, URI or table)")
    r.add_argument("--spark-master", metavar="URL",
                   help="Spark master for --engine spark: local[*] (default), spark://host:7077, yarn, k8s://...")
    r.add_argument("--spark-conf", metavar="K=V", action="append",
                   help="extra Spark setting for --engine spark (repeatable), e.g. spark.executor.memory=8g")
    r.add_argument("--data-format", choices=["csv", "parquet"], help="format of DATA if its suffix does not tell")
    r.add_argument("--delimiter", help="CSV field delimiter (default: detected)")
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
