"""Command-line interface: ``dpmatrix <command>`` (also ``python -m dpmatrix``).

Commands:

* ``plan``    — accuracy before data: domain + workload + budget -> per-marginal variances and
  the privacy guarantee; reads no data.
* ``release`` — plan, measure a CSV/Parquet file (DuckDB by default) and write a release folder.
* ``query``   — print one marginal (with confidence intervals) from a release folder.
* ``demo``    — ``release`` on the shipped UCI Adult data, then show one marginal.
* ``infer-domain`` — derive a domain file from data (opt-in; weakens privacy, see its warning).

Every user mistake prints one line ``dpmatrix: error: ...`` on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import __version__
from .domain import Domain
from .errors import DataError, DPMatrixError

EXIT_USAGE = 2

SEED_WARNING = (
    "--seed makes the noise reproducible: for testing only. A real release must use fresh "
    "randomness (omit --seed); the seed is never written to the release."
)


class CLIError(DPMatrixError):
    """A mistake in the command line that no library call catches."""


# -- output helpers ------------------------------------------------------------------------------
class Out:
    """Human-facing messages on stdout (silenced by --quiet); warnings always go to stderr."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    def __call__(self, *args: Any) -> None:
        if not self.quiet:
            print(*args, flush=True)

    def note(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)


def one_line(text: str) -> str:
    """Collapse a (possibly multi-line) message into one line: list items are joined with ';',
    a following sentence with '.'."""
    out: list[str] = []
    for p in (p.strip() for p in str(text).splitlines()):
        if not p:
            continue
        if p.startswith("- "):
            p = p[2:]
        if out and not out[-1].endswith((":", ";", ".", ",")):
            out[-1] += "." if p[:1].isupper() else ";"
        out.append(p)
    return " ".join(out)


_API_TO_CLI = [
    ("on_unknown='clip'", "--on-unknown clip"),
    ("on_unknown='other'", "--on-unknown other"),
    ("per column as {column: policy}", "per column as --on-unknown col=policy[,col=policy]"),
]


def cli_wording(message: str) -> str:
    """Library messages name Python arguments; say the command-line option instead."""
    for api, cli in _API_TO_CLI:
        message = message.replace(api, cli)
    return message


def warn_line(message: str) -> None:
    print(f"dpmatrix: warning: {one_line(message)}", file=sys.stderr, flush=True)


def _showwarning(message, category, filename, lineno, file=None, line=None) -> None:
    warn_line(str(message))


def fmt_privacy(rho: float, mu: float | None, epsilon: float, delta: float) -> str:
    """One line of privacy parameters; ``mu`` is ``None`` for discrete Gaussian releases (their
    epsilon comes from the zCDP conversion, and Gaussian DP is not claimed)."""
    gdp = f"mu = {mu:.6g} (Gaussian DP)" if mu is not None else "epsilon from zCDP (discrete noise)"
    return (
        f"privacy: rho = {rho:.6g} (zCDP), epsilon = {epsilon:.6g} at delta = {delta:.3g}, "
        f"{gdp}; neighbours differ by adding or removing one record"
    )


# -- shared argument groups ----------------------------------------------------------------------
def _add_noise(p: argparse.ArgumentParser) -> None:
    p.add_argument("--noise", choices=["gaussian", "discrete_gaussian"], default="gaussian",
                   help="gaussian (default) or discrete_gaussian: exact integer noise from the OS's "
                   "secure random source (sigma rounded up to a rational; the manifest reports the "
                   "privacy actually spent); needs plain (identity) marginals")


def _add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars or summaries")


def _add_workload(p: argparse.ArgumentParser, required: bool = True) -> None:
    g = p.add_argument_group(
        "workload",
        "terms separated by ';': all:K (all K-way marginals), all:<=K or upto:K (at most K "
        "attributes, with the total), small:N (at most N cells), a,b (one marginal), total; "
        "append *W for a weight (age,sex*2); name=prefix|range|identity sets a query type. "
        "A .json file name is read as a workload file.",
    )
    g.add_argument("-w", "--workload", metavar="SPEC", help='e.g. "all:<=2" or "all:3; age,sex*2"')
    g.add_argument("-m", "--marginals", metavar="SPEC", help='e.g. "age,sex;race" (same syntax)')
    g.add_argument("--workload-file", metavar="FILE.json", help="a JSON workload file")
    g.add_argument(
        "--query-types", metavar="TYPES",
        help='per-attribute query types, e.g. "age=prefix,hours=range" (default: identity)',
    )  # fmt: skip
    g.add_argument(
        "--attributes", metavar="A,B,...",
        help="restrict the generators (all:K, small:N) to these attributes",
    )  # fmt: skip


def _add_budget(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("privacy budget (exactly one of --rho, --epsilon with --delta, --mu)")
    g.add_argument("--rho", type=float, help="zCDP budget rho")
    g.add_argument("--epsilon", type=float, help="(epsilon, delta)-DP budget: epsilon (needs --delta)")
    g.add_argument(
        "--delta", type=float,
        help="delta of the (epsilon, delta) budget; with --rho/--mu, the delta at which epsilon "
        "is reported (default 1e-9)",
    )  # fmt: skip
    g.add_argument("--mu", type=float, help="Gaussian-DP budget mu")
    p.add_argument(
        "--objective", choices=["max_var", "sum_var"], default="max_var",
        help="max_var (default): minimize the largest weighted cell variance; sum_var: minimize "
        "the weighted total variance",
    )  # fmt: skip
    p.add_argument(
        "--construction", choices=["auto", "centred", "split"], default="auto",
        help="residual construction for prefix/range queries: centred (the paper's Algorithm 4), "
        "split (each attribute's 1-D mechanism kept whole), or auto (default: plan both, keep "
        "the better); plain marginals are the same either way",
    )  # fmt: skip


def _budget_kwargs(args: argparse.Namespace) -> dict[str, float]:
    given = [n for n in ("rho", "epsilon", "mu") if getattr(args, n) is not None]
    if not given:
        raise CLIError("no privacy budget: give --rho, or --epsilon with --delta, or --mu")
    if len(given) > 1:
        raise CLIError(f"give exactly one privacy budget, got --{' and --'.join(given)}")
    for n in ("rho", "epsilon", "mu", "delta"):
        v = getattr(args, n)
        if v is not None and not (math.isfinite(v) and v > 0):
            raise CLIError(f"--{n} must be a positive number, got {v!r}")
    if given[0] == "epsilon":
        if args.delta is None:
            raise CLIError("--epsilon needs --delta (e.g. --delta 1e-9)")
        return {"epsilon": args.epsilon, "delta": args.delta}
    return {given[0]: getattr(args, given[0])}


def _report_delta(args: argparse.Namespace) -> float:
    from .release import DEFAULT_DELTA

    d = getattr(args, "delta", None)
    if d is None:
        return DEFAULT_DELTA
    if not 0 < d < 1:
        raise CLIError(f"--delta must be between 0 and 1, got {d!r}")
    return float(d)


def _read_domain(path: str) -> Domain:
    from .errors import DomainError

    try:
        return Domain.from_json(path)
    except DomainError as exc:
        msg = str(exc)
        if repr(str(path)) in msg:
            raise
        raise DomainError(f"domain file {str(path)!r}: {msg}") from None


def _workload(args: argparse.Namespace, domain: Domain):
    from .workload_spec import parse_workload

    if args.workload is None and args.marginals is None and args.workload_file is None:
        raise CLIError('no workload: give --workload (e.g. "all:<=2"), --marginals or --workload-file')
    return parse_workload(
        domain,
        args.workload,
        marginals=args.marginals,
        query_types=args.query_types,
        file=args.workload_file,
        attributes=args.attributes,
    )


def _make_plan(args: argparse.Namespace, domain: Domain):
    from .plan.plan import plan as make_plan

    wk = _workload(args, domain)
    return make_plan(wk, objective=args.objective, construction=getattr(args, "construction", "auto"),
                     **_budget_kwargs(args))


def _describe_plan(plan, say: Out, delta: float) -> None:
    wk = plan.workload
    kept = "" if plan.is_plain else f" ({plan.construction} residual construction)"
    say(
        f"workload: {len(wk)} marginals, {int(wk.cells.sum()):,} cells, objective "
        f"{plan.objective}; {int(plan.measured.sum())} residual mechanisms{kept}"
    )
    say(fmt_privacy(plan.rho, plan.mu, plan.epsilon(delta), delta))
    say(
        f"accuracy (data-independent): RMSE {plan.rmse():.6g}, max cell variance "
        f"{plan.max_variance():.6g} (std {math.sqrt(plan.max_variance()):.6g})"
    )


# -- plan ----------------------------------------------------------------------------------------
def cmd_plan(args: argparse.Namespace) -> int:
    say = Out(False)
    delta = _report_delta(args)
    domain = _read_domain(args.domain)
    plan = _make_plan(args, domain)
    table = plan.marginal_table()
    if plan.is_plain:
        table = table.rename(columns={"queries": "cells"})
    if args.save:
        try:
            plan.to_json(args.save)
        except OSError as exc:
            raise CLIError(f"cannot write {args.save!r}: {exc.strerror or exc}") from None
    if args.format == "json":
        out = plan.to_dict()
        out["privacy"].update({"epsilon": plan.epsilon(delta), "delta": delta})
        out["marginal_table"] = json.loads(table.to_json(orient="records"))
        print(json.dumps(out, indent=1))
        return 0
    if args.format == "csv":
        print(table.to_csv(index=False), end="")
        return 0
    _describe_plan(plan, say, delta)
    say("")
    say(table.to_string(index=False))
    if args.save:
        say(f"\nplan saved to {args.save} (use it with: dpmatrix release DATA --plan {args.save} ...)")
    return 0


# -- release -------------------------------------------------------------------------------------
def _on_unknown(text: str) -> str | dict[str, str]:
    from .encode import POLICIES

    text = text.strip()
    if "=" not in text:
        if text not in POLICIES:
            raise CLIError(f"--on-unknown must be one of {', '.join(POLICIES)} or col=policy,..., got {text!r}")
        return text
    out: dict[str, str] = {}
    for part in text.split(","):
        col, eq, pol = part.partition("=")
        col, pol = col.strip(), pol.strip()
        if not eq or not col or pol not in POLICIES:
            raise CLIError(f"--on-unknown: bad entry {part!r}; write col=policy with policy in {', '.join(POLICIES)}")
        out[col] = pol
    return out


def _open_engine(args: argparse.Namespace, domain: Domain, say: Out):
    from .engines import DuckDBEngine, NumpyEngine
    from .engines.duckdb_engine import detect_format

    path = Path(args.data)
    if not any(ch in args.data for ch in "*?[") and not path.exists():
        raise CLIError(f"data file {args.data!r} does not exist")
    policy = _on_unknown(args.on_unknown)
    fmt = detect_format(args.data, args.data_format)
    csv_options = {"delim": args.delimiter} if args.delimiter else None
    if args.delimiter and fmt != "csv":
        raise CLIError("--delimiter applies to CSV files only")
    say.note(f"reading {args.data} ({fmt}) with {args.engine} ...")
    if args.engine == "duckdb":
        return DuckDBEngine(
            args.data, domain, encoding="raw", format=fmt, on_unknown=policy,
            csv_options=csv_options, memory_limit=args.memory_limit,
        )  # fmt: skip
    # in-memory engine: the whole file is loaded with pandas (small data only)
    from .encode import encode_frame

    try:
        if fmt == "csv":
            raw = pd.read_csv(args.data, sep=args.delimiter or ",", usecols=lambda c: c in domain)
        else:
            raw = pd.read_parquet(args.data)
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read {args.data!r}: {exc}") from None
    return NumpyEngine(encode_frame(raw, domain, on_unknown=policy), domain)


class CountingBar:
    """Wraps a data engine to show a "counting" progress bar (marginal tables counted from the
    data) next to the "measuring" bar of :func:`dpmatrix.measure`."""

    def __init__(self, engine: Any, plan: Any, enabled: bool):
        from tqdm.auto import tqdm

        from .engines import maximal_sets

        measured = [s for s, m in zip(plan.closure.sets, plan.measured) if m]
        self._engine = engine
        self.bar = tqdm(total=len(maximal_sets(measured)), desc="counting", unit="marginal",
                        disable=not enabled)  # fmt: skip

    @property
    def domain(self) -> Domain:
        return self._engine.domain

    @property
    def n_records(self) -> int:
        return self._engine.n_records

    def count(self, attr_sets, progress: bool = False):
        out = self._engine.count(attr_sets)
        self.bar.update(len(out))
        return out

    def close(self) -> None:
        self.bar.close()
        close = getattr(self._engine, "close", None)
        if close is not None:
            close()


def run_release(args: argparse.Namespace, domain: Domain | None, say: Out, overwrite: bool) -> Any:
    """Plan (or load a plan), measure the data, write the release; returns the Measurements."""
    from .plan.plan import Plan
    from .release import _prepare_target, write_release

    delta = _report_delta(args)
    if args.seed is not None:
        warn_line(SEED_WARNING)
    if getattr(args, "plan", None):
        if any(getattr(args, n) is not None for n in ("workload", "marginals", "workload_file")):
            raise CLIError("give either --plan or a workload (--workload/--marginals), not both")
        if any(getattr(args, n) is not None for n in ("rho", "epsilon", "mu")):
            raise CLIError("a saved --plan fixes the privacy budget; do not give --rho/--epsilon/--mu")
        plan = Plan.from_json(args.plan)
        if domain is not None and domain != plan.domain:
            raise CLIError(f"the domain in {args.plan!r} differs from the --domain file")
    else:
        if domain is None:
            raise CLIError("give --domain D.json (or a saved --plan)")
        plan = _make_plan(args, domain)
    _describe_plan(plan, say, delta)
    _prepare_target(Path(args.out), overwrite)  # fail before touching the data
    noise = getattr(args, "noise", "gaussian")
    # Gaussian: a fresh OS-seeded generator; discrete Gaussian: the OS CSPRNG (rng=None), unless a
    # testing seed was given
    rng = np.random.default_rng(args.seed) if (args.seed is not None or noise == "gaussian") else None
    engine = CountingBar(_open_engine(args, plan.domain, say), plan, not say.quiet)
    try:
        meas = plan.measure(
            None, rng=rng, progress=not say.quiet, engine=engine, noise=noise,
            store=True if getattr(args, "spill", False) else None,
        )  # fmt: skip
    finally:
        engine.close()
    del engine, rng
    tables = tuple(t.strip() for t in args.tables.split(",") if t.strip())
    notes = {
        "data": {"engine": args.engine, "encoding": "raw values mapped through the domain",
                 "on_unknown": _on_unknown(args.on_unknown)},
    }  # fmt: skip
    out = write_release(
        meas, args.out, level=args.level, delta=delta, formats=tables,
        progress=not say.quiet, overwrite=overwrite, notes=notes,
    )  # fmt: skip
    say(f"wrote {len(plan.workload)} marginal tables ({', '.join(tables)}), measurements.parquet and manifest.json to {out}/")
    return meas


def cmd_release(args: argparse.Namespace) -> int:
    say = Out(args.quiet)
    domain = _read_domain(args.domain) if args.domain else None
    meas = run_release(args, domain, say, overwrite=args.overwrite)
    if getattr(args, "postprocess", False):
        from .postprocess import postprocess, write_postprocessed

        pp = postprocess(meas, progress=not say.quiet)
        tables = tuple(t.strip() for t in args.tables.split(",") if t.strip())
        out = write_postprocessed(pp, args.out, meas=meas, formats=tables, progress=not say.quiet)
        say(f"wrote post-processed tables ({pp.method}) to {out}/: non-negative and consistent, "
            "but biased and without variances or intervals (see its manifest.json)")
    return 0


def cmd_synth(args: argparse.Namespace) -> int:
    from .postprocess import postprocess
    from .release import load_release

    say = Out(args.quiet)
    if args.rows is not None and args.rows < 1:
        raise CLIError(f"--rows must be at least 1, got {args.rows}")
    out = Path(args.out)
    if out.exists() and not args.overwrite:
        raise CLIError(f"{args.out!r} exists; choose another --out or pass --overwrite")
    rel = load_release(args.release)
    pp = postprocess(rel.measurements, method=args.method, progress=not say.quiet)
    df = pp.synthetic(args.rows, rng=np.random.default_rng(args.seed))
    if out.suffix.lower() == ".parquet":
        df.to_parquet(out, index=False)
    else:
        df.to_csv(out, index=False)
    say(f"wrote {len(df)} synthetic records ({pp.method}, fitted to the release's measurements) to {out}")
    return 0


# -- query ---------------------------------------------------------------------------------------
def _print_table(df: pd.DataFrame, fmt: str) -> None:
    if fmt == "csv":
        print(df.to_csv(index=False), end="")
    elif fmt == "json":
        print(df.to_json(orient="records", indent=1))
    else:
        with pd.option_context("display.max_rows", None, "display.width", 200):
            print(df.to_string(index=False))


def cmd_query(args: argparse.Namespace) -> int:
    from .release import load_release

    say = Out(args.quiet or args.format != "table")
    rel = load_release(args.release)
    p = rel.privacy
    if args.marginal is None:
        say(f"{rel.path}: dpmatrix {rel.manifest['library']['version']} release created {rel.manifest['created']}")
        say(fmt_privacy(p["rho"], p["mu"], p["epsilon"], p["delta"]))
        rows = pd.DataFrame(
            {
                "marginal": [",".join(e["attributes"]) or "total" for e in rel.manifest["marginals"]],
                "cells": [e["cells"] for e in rel.manifest["marginals"]],
                "max_variance": [e["max_variance"] for e in rel.manifest["marginals"]],
            }
        )
        say(f"{len(rows)} saved marginals (any marginal of their closure can be queried):")
        _print_table(rows, args.format)
        return 0
    text = args.marginal.strip()
    names: list[str] = [] if text.lower() in ("total", "()", "") else [n.strip() for n in text.split(",")]
    key = rel.domain.resolve(names)
    level = rel.level if args.level is None else args.level
    if not 0 < level < 1:
        raise CLIError(f"--level must be strictly between 0 and 1, got {level!r}")
    saved = rel.has_table(key)
    if saved and level == rel.level:
        df = rel.table(key, rel.manifest["tables"]["formats"][0])
        source = "saved table"
    else:
        df = rel.marginal(key, level)
        source = "reconstructed from the saved measurements"
    label = ",".join(rel.domain.names_of(key)) or "total"
    say(f"marginal {label} ({source}); estimate, variance, std, {level:.0%} confidence interval [lower, upper]")
    say(fmt_privacy(p["rho"], p["mu"], p["epsilon"], p["delta"]))
    _print_table(df, args.format)
    return 0


# -- demo ----------------------------------------------------------------------------------------
def shipped_adult() -> tuple[Domain, Path]:
    """The Adult data shipped with the package (see dpmatrix/data/README.md for attribution)."""
    base = files("dpmatrix") / "data"
    return Domain.from_json(base / "adult-domain.json"), Path(str(base / "adult.csv"))


def cmd_demo(args: argparse.Namespace) -> int:
    from .release import is_release

    dom, path = shipped_adult()
    say = Out(args.quiet)
    say(f"dpmatrix {__version__} demo: release of the shipped UCI Adult data ({len(dom)} attributes)")
    say(f"same as: dpmatrix release {path} --domain {path.with_name('adult-domain.json')} "
        f"--workload 'all:<={args.k}' --rho {args.rho} --objective {args.objective} --out {args.out}")
    rargs = argparse.Namespace(
        data=str(path), plan=None, workload=f"all:<={args.k}", marginals=None, workload_file=None,
        query_types=None, attributes=None, rho=args.rho, epsilon=None, delta=None, mu=None,
        objective=args.objective, construction="auto", engine="duckdb", data_format=None, delimiter=None,
        on_unknown="error", memory_limit=None, level=0.95, tables="parquet,csv", out=args.out,
        seed=args.seed,
    )  # fmt: skip
    out = Path(args.out)
    # re-running the demo replaces its own earlier release, never any other folder
    meas = run_release(rargs, dom, say, overwrite=is_release(out))
    show = ("sex", "income>50K")
    say(f"\nmarginal {','.join(show)} with 95% confidence intervals "
        f"(also: dpmatrix query {args.out} --marginal '{','.join(show)}'):")
    say(meas.marginal(show).to_string(index=False))
    return 0


# -- infer-domain --------------------------------------------------------------------------------
def cmd_infer_domain(args: argparse.Namespace) -> int:
    from .encode import infer_domain

    path = Path(args.data)
    if not path.exists():
        raise CLIError(f"data file {args.data!r} does not exist")
    cols = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    dom = infer_domain(str(path), cols, max_labels=args.max_labels, n_bins=args.bins)  # warns
    out = Path(args.out)
    if out.exists() and not args.overwrite:
        raise CLIError(f"{args.out!r} exists; choose another --out or pass --overwrite")
    try:
        out.write_text(json.dumps(dom.to_dict(), indent=1) + "\n")
    except OSError as exc:
        raise CLIError(f"cannot write {args.out!r}: {exc.strerror or exc}") from None
    Out(args.quiet)(f"wrote a domain of {len(dom)} attributes to {args.out}: review it (and remove "
                    "anything that reveals individual records) before using it with --domain")
    return 0


# -- parser --------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpmatrix",
        description="Differentially private marginals with optimal matrix mechanisms (ResidualPlanner).",
        epilog="Run 'dpmatrix COMMAND --help' for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"dpmatrix {__version__}")
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("plan", help="accuracy and privacy of a workload before any data (reads no data)",
                       description="Print per-marginal cell variances / std and the privacy guarantee "
                       "of the optimal plan for a workload and budget. Reads no data.")
    p.add_argument("--domain", required=True, metavar="D.json", help="domain file ({attr: size} or the rich form)")
    _add_workload(p)
    _add_budget(p)
    p.add_argument("--save", metavar="PLAN.json", help="also save the plan (for release --plan)")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format")
    p.set_defaults(func=cmd_plan)

    r = sub.add_parser("release", help="plan, measure a CSV/Parquet file and write a release folder",
                       description="Plan the noise, count the marginals of DATA (DuckDB, without loading "
                       "it into memory), add the noise and write a release folder: manifest.json, "
                       "measurements.parquet and one table per marginal in marginals/.")
    r.add_argument("data", metavar="DATA", help="CSV or Parquet file (format from the suffix or --data-format)")
    r.add_argument("--domain", metavar="D.json", help="domain file; raw values are mapped to codes through it")
    r.add_argument("--plan", metavar="PLAN.json", help="a plan saved by 'dpmatrix plan --save' (instead of a workload and budget)")
    _add_workload(r)
    _add_budget(r)
    r.add_argument("--out", required=True, metavar="DIR", help="release folder to create (must not exist or be empty)")
    r.add_argument("--overwrite", action="store_true", help="replace an earlier dpmatrix release in --out")
    r.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals (default 0.95)")
    r.add_argument("--tables", default="parquet,csv", help="table formats to write (default parquet,csv)")
    r.add_argument("--on-unknown", default="error", metavar="POLICY",
                   help="values the domain does not cover: error (default), clip (to the first/last "
                   "bin or code), other (to the code labelled 'other'); or per column: age=clip,race=other")
    r.add_argument("--engine", choices=["duckdb", "numpy"], default="duckdb",
                   help="duckdb (default; files larger than memory) or numpy (loads the file with pandas)")
    r.add_argument("--data-format", choices=["csv", "parquet"], help="format of DATA if its suffix does not tell")
    r.add_argument("--delimiter", help="CSV field delimiter (default: detected)")
    r.add_argument("--memory-limit", help="DuckDB memory limit, e.g. 4GB (it spills to disk beyond)")
    r.add_argument("--spill", action="store_true",
                   help="keep the noisy answers in a temporary on-disk store instead of memory "
                        "(plans with hundreds of millions of noisy numbers)")
    r.add_argument("--seed", type=int, help="TESTING ONLY: fix the noise (never written to the release)")
    r.add_argument("--postprocess", action="store_true",
                   help="also write non-negative, consistent (but biased, no variances) tables fitted "
                   "with private-pgm to DIR/postprocessed/")
    _add_noise(r)
    _add_quiet(r)
    r.set_defaults(func=cmd_release)

    y = sub.add_parser("synth", help="synthetic records from a release folder (private-pgm; no data, no privacy cost)",
                       description="Fit a distribution to a release's noisy measurements with private-pgm "
                       "(non-negative, consistent) and write records drawn from it, in the domain's labels.")
    y.add_argument("release", metavar="RELEASE_DIR", help="release folder")
    y.add_argument("--rows", type=int, help="number of records (default: the estimated total)")
    y.add_argument("--out", required=True, metavar="FILE", help="CSV (or .parquet) file to write")
    y.add_argument("--method", choices=["auto", "graphical_model", "mixture"], default="auto",
                   help="graphical model (exact fit) when its junction tree is small enough, else a "
                   "mixture of products (default: auto)")
    y.add_argument("--seed", type=int, help="seed of the record sampler (reproducible records; post-processing, so no privacy impact)")
    y.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    _add_quiet(y)
    y.set_defaults(func=cmd_synth)

    q = sub.add_parser("query", help="print a marginal (with confidence intervals) from a release folder",
                       description="Print one marginal of a release with its confidence intervals; "
                       "without --marginal, list the release's marginals and privacy guarantee. "
                       "Any marginal of the workload's closure can be asked for: it is reconstructed "
                       "from the saved measurements, without the data.")
    q.add_argument("release", metavar="DIR", help="release folder")
    q.add_argument("--marginal", metavar="A,B", help="attributes of the marginal, e.g. age,sex ('total' for the count)")
    q.add_argument("--level", type=float, help="confidence level (default: the release's)")
    q.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format")
    _add_quiet(q)
    q.set_defaults(func=cmd_query)

    d = sub.add_parser("demo", help="release the shipped Adult data (same code path as 'release')")
    d.add_argument("--out", default="demo-release", help="output folder (default: demo-release)")
    d.add_argument("--k", type=int, default=2, help="all marginals on at most k attributes (default 2)")
    d.add_argument("--rho", type=float, default=0.5, help="zCDP budget (default 0.5)")
    d.add_argument("--objective", choices=["sum_var", "max_var"], default="max_var",
                   help="max_var (default) keeps small tables accurate; sum_var minimizes total variance")
    d.add_argument("--seed", type=int, default=None,
                   help="TESTING ONLY: seed for reproducible noise (a real release must not fix it)")
    _add_noise(d)
    _add_quiet(d)
    d.set_defaults(func=cmd_demo)

    i = sub.add_parser("infer-domain", help="derive a domain file from data (weakens privacy: read the warning)",
                       description="Derive a domain from the data. Which values occur is information "
                       "about individual records that the privacy guarantee does NOT cover: prefer a "
                       "domain written from public knowledge; review the file before use.")
    i.add_argument("data", metavar="DATA", help="CSV or Parquet file")
    i.add_argument("--out", required=True, metavar="D.json", help="domain file to write")
    i.add_argument("--columns", metavar="A,B,...", help="columns to include (default: all)")
    i.add_argument("--max-labels", type=int, default=50, help="integer columns with at most this many values get labels")
    i.add_argument("--bins", type=int, default=10, help="equal-width bins for other numeric columns")
    i.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    _add_quiet(i)
    i.set_defaults(func=cmd_infer_domain)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():
        # every warning (values remapped on request, inferred domain, --seed) is shown, each on
        # one line, even when the same warning was already shown earlier in the process
        warnings.simplefilter("always")
        warnings.showwarning = _showwarning
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args) or 0)
    except DPMatrixError as exc:
        if args.debug:
            raise
        print(f"dpmatrix: error: {one_line(cli_wording(str(exc)))}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, ValueError) as exc:  # files, permissions, malformed input caught late
        if args.debug:
            raise
        msg = f"{exc.strerror}: {exc.filename!r}" if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"dpmatrix: error: {one_line(msg)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("dpmatrix: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: one line, traceback with --debug
        if args.debug:
            raise
        print(
            f"dpmatrix: internal error: {type(exc).__name__}: {one_line(str(exc))} "
            "(rerun with --debug for the traceback, and please report it)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
