"""Command-line interface: ``dpmatrix <command>`` (also ``python -m dpmatrix``).

Commands:

* ``plan``    — accuracy before data: domain + workload + budget -> per-marginal variances and
  the privacy guarantee; reads no data.
* ``release`` — plan, measure a CSV/Parquet file (DuckDB by default) and write a release folder.
* ``query``   — print one marginal (with confidence intervals) from a release folder.
* ``report``  — write the HTML report of a release folder (``release`` writes one by default).
* ``demo``    — ``release`` on the shipped UCI Adult data, then show one marginal.
* ``infer-domain`` — derive a domain file from data (opt-in; weakens privacy, see its warning).
* ``ledger``  — the privacy-budget ledger: ``show`` totals per dataset, ``set-cap`` a dataset's cap.

Every release is charged to the ledger (:mod:`dpmatrix.ledger`; ``--ledger PATH`` or
``$DPMATRIX_LEDGER``) before any noise is drawn, under ``--dataset NAME`` (default: the data
file's name without suffix). Every option is checked before any data is read.

Every user mistake prints one line ``dpmatrix: error: ...`` on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .defaults import DEFAULT_OBJECTIVE, ENCODINGS
from .domain import Domain
from .errors import DPMatrixError, DomainError
from .jsonfile import loads_strict
from .statement import privacy_line, privacy_summary, pure_summary
from .version import __version__

if TYPE_CHECKING:
    import pandas as pd

# Each command imports what it needs inside its handler: building the parser and answering
# ``dpmatrix query`` for a saved table load no numerical library beyond NumPy and Arrow
# (tests/cli/test_cli_imports.py checks which modules a query imports).

EXIT_USAGE = 2

SEED_WARNING = (
    "--seed makes the noise reproducible: for testing only. A real release must use fresh "
    "randomness (omit --seed); the seed is never written to the release."
)


class CLIError(DPMatrixError):
    """A mistake in the command line that no library call catches."""


# -- output helpers ------------------------------------------------------------------------------
class Out:
    """Human-facing messages on stdout (silenced by --quiet); warnings always go to stderr.
    Progress bars (on stderr) only when stderr is a terminal, never into a log file."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    @property
    def progress(self) -> bool:
        return not self.quiet and _is_terminal(sys.stderr)

    def __call__(self, *args: Any) -> None:
        if not self.quiet:
            print(*args, flush=True)

    def note(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


#: ε above this (at the reported δ) is legal but protects little: warned, never refused
EPSILON_WARNING_ABOVE = 10.0


def warn_large_epsilon(epsilon: float, delta: float) -> None:
    if epsilon > EPSILON_WARNING_ABOVE:
        warn_line(
            f"epsilon = {epsilon:.4g} at delta = {delta:.3g} is above {EPSILON_WARNING_ABOVE:g}: a "
            "guarantee this weak protects little (published practice is about 0.1 to 10); "
            "check the budget (--rho / --epsilon / --mu)"
        )


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
    ("(plan.measure(data, encoding='raw'))", ""),
    ("encoding='raw'", "--encoding raw"),
    ("encoding='codes'", "--encoding codes"),
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


def fmt_privacy(privacy: dict) -> str:
    """The privacy line: :func:`dpmatrix.statement.privacy_line` (the one function every command
    uses, fed with the manifest's own ``privacy`` object after a release)."""
    return privacy_line(privacy)


# -- shared argument groups ----------------------------------------------------------------------
def _add_noise(p: argparse.ArgumentParser) -> None:
    p.add_argument("--noise", choices=["auto", "discrete_gaussian", "lattice_gaussian", "gaussian_float", "gaussian"],
                   default="auto",
                   help="auto (default): exact noise from the OS's secure random source: discrete "
                   "Gaussian for plain marginals, discrete Gaussian on a fine lattice for real-valued "
                   "strategies (sigma rounded up to a rational; the manifest reports the privacy "
                   "actually spent); gaussian_float (alias gaussian): floating-point noise from "
                   "NumPy's PCG64, not cryptographic, only on request; --seed always means "
                   "reproducible floating-point noise")


def _add_round(p: argparse.ArgumentParser) -> None:
    p.add_argument("--round", type=int, metavar="N",
                   help="round the published tables to N decimals (0: whole numbers; no privacy cost, "
                   "the saved measurements stay exact)")


def _negative_note(df: pd.DataFrame, say: Out) -> None:
    """Say what negative estimates mean when a printed table has some."""
    if "estimate" in df:
        _say_negatives(int((df["estimate"] < 0).sum()), say)


def _say_negatives(count: int, say: Out) -> None:
    from .release import NEGATIVE_ESTIMATES

    if count:
        say(f"note: {count} negative estimate(s). {NEGATIVE_ESTIMATES}")


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
    g.add_argument("--epsilon", type=float, help="(epsilon, delta)-DP budget: epsilon (needs --delta; "
                   "--delta 0 is pure epsilon-DP, planned by the pure planner with exact discrete Laplace noise)")
    g.add_argument(
        "--strategy", default=None,
        choices=["auto", "identity", "marginals", "fourier", "clustering", "optimized", "hierarchical", "haar", "pidentity"],
        help="pure epsilon-DP (--delta 0) only: the strategy (default auto: plan all, keep the best; "
        "hierarchical / haar / marginals / auto for prefix and range query types)",
    )  # fmt: skip
    g.add_argument(
        "--delta", type=float,
        help="delta of the (epsilon, delta) budget; with --rho/--mu, the delta at which epsilon "
        "is reported (default 1e-9)",
    )  # fmt: skip
    g.add_argument("--mu", type=float, help="Gaussian-DP budget mu")
    p.add_argument(
        "--objective", choices=["max_var", "sum_var"], default=DEFAULT_OBJECTIVE,
        help=f"max_var: minimize the largest weighted cell variance, so small tables stay "
        f"accurate; sum_var: minimize the weighted total variance (default {DEFAULT_OBJECTIVE}, "
        "as in the library's dm.plan)",
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
    pure = given[0] == "epsilon" and args.delta == 0
    for n in ("rho", "epsilon", "mu", "delta"):
        v = getattr(args, n)
        if n == "delta" and pure:
            continue
        if v is not None and not (math.isfinite(v) and v > 0):
            raise CLIError(f"--{n} must be a positive number, got {v!r}")
    if getattr(args, "strategy", None) is not None and not pure:
        raise CLIError("--strategy is an option of pure epsilon-DP plans (--epsilon E --delta 0)")
    if given[0] == "epsilon":
        if args.delta is None:
            raise CLIError("--epsilon needs --delta (e.g. --delta 1e-9, or --delta 0 for pure epsilon-DP)")
        if pure:
            if getattr(args, "noise", None) == "discrete_gaussian":
                raise CLIError("--noise discrete_gaussian is a zCDP option: pure epsilon-DP (--delta 0) "
                               "uses the exact discrete Laplace")
            extra = {"strategy": args.strategy} if getattr(args, "strategy", None) else {}
            return {"epsilon": args.epsilon, "delta": 0.0, **extra}
        return {"epsilon": args.epsilon, "delta": args.delta}
    return {given[0]: getattr(args, given[0])}


def _is_pure(plan) -> bool:
    """A pure epsilon-DP plan (reports ``pure_epsilon``; no residual closure)."""
    return getattr(plan, "pure_epsilon", None) is not None


def _report_delta(args: argparse.Namespace) -> float:
    from .release import DEFAULT_DELTA
    from .statement import check_delta

    d = getattr(args, "delta", None)
    if d is None:
        return DEFAULT_DELTA
    if d == 0 and getattr(args, "epsilon", None) is not None:
        return 0.0  # pure epsilon-DP
    return check_delta(d, name="--delta")


def _read_domain(path: str) -> Domain:
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
    from .planners.dispatch import plan as make_plan

    wk = _workload(args, domain)
    if getattr(args, "target", None):
        return _plan_from_targets(args, wk)
    return make_plan(wk, objective=args.objective, construction=getattr(args, "construction", "auto"),
                     **_budget_kwargs(args))


def _add_targets(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--target", action="append", metavar="SPEC",
        help="accuracy target instead of a budget (repeat it): 'age,sex=std<=10', 'race=var<=4', "
        "'age=moe<=50' (95%% margin of error), or 'var<=100' for every other marginal; with no "
        "budget the least privacy cost meeting every target is planned, with one the release "
        "missing its targets by the least factor",
    )  # fmt: skip


def _plan_from_targets(args: argparse.Namespace, wk):
    """The plan for ``--target`` specs (issue 13): least budget, or least ratio at a budget."""
    from .planners.dispatch import plan as make_plan
    from .planners.targets import targets_from_specs

    given = [n for n in ("rho", "epsilon", "mu") if getattr(args, n) is not None]
    budget = _budget_kwargs(args) if given else {}
    try:
        targets = targets_from_specs(args.target)
    except DPMatrixError as exc:
        raise CLIError(f"--target: {exc}") from None
    return make_plan(wk, targets=targets, construction=getattr(args, "construction", "auto"), **budget)


def _describe_targets(plan, say: Out) -> None:
    cert = plan.certificate()
    if cert["problem"] == "least_privacy":
        say(f"least privacy cost meeting every target: pcost {plan.pcost:.6g} (certified lower bound "
            f"{cert['pcost_lower_bound']:.6g}, relative gap {cert['gap']:.1e}, {cert['status']})")
    else:
        say(f"at this budget the largest variance/target is {cert['max_ratio']:.6g} (certified lower "
            f"bound {cert['max_ratio_lower_bound']:.6g}, relative gap {cert['gap']:.1e}, {cert['status']}); "
            f"every target is met at pcost {cert['needed_pcost']:.6g}")
    say("targets (variances; worst query of each marginal):")
    say(plan.target_table().to_string(index=False))


def _describe_plan(plan, say: Out, delta: float, describe_privacy: bool = True) -> None:
    wk = plan.workload
    if _is_pure(plan):
        say(f"workload: {len(wk)} marginals, {int(wk.cells.sum()):,} cells; pure epsilon-DP strategy "
            f"{plan.strategy!r} ({plan.budgeting} budgets), {len(plan.groups)} groups")
        if describe_privacy:
            say(fmt_privacy(pure_summary(plan)))
        say(f"accuracy (data-independent): RMSE {plan.rmse():.6g}, max cell variance "
            f"{plan.max_variance():.6g} (std {math.sqrt(plan.max_variance()):.6g})")
        return
    kept = "" if plan.is_plain else f" ({plan.construction} residual construction)"
    say(
        f"workload: {len(wk)} marginals, {int(wk.cells.sum()):,} cells, objective "
        f"{plan.objective}; {int(plan.measured.sum())} residual mechanisms{kept}"
    )
    if describe_privacy:
        say(fmt_privacy(privacy_summary(plan, delta=delta)))
    say(
        f"accuracy (data-independent): RMSE {plan.rmse():.6g}, max cell variance "
        f"{plan.max_variance():.6g} (std {math.sqrt(plan.max_variance()):.6g})"
    )
    say(fmt_optimality(plan))


def fmt_optimality(plan) -> str:
    """One line: the plan against the singular value bound (issue 15)."""
    try:
        o = plan.optimality()
    except DPMatrixError as exc:
        return f"lower bound: not available ({one_line(str(exc))})"
    if o.objective == "max_var":
        what = (f"lower bound {o.bound:.6g} (singular value bound / {o.svd.n_queries:.0f} queries; "
                "usually not attainable)")
    else:
        what = f"singular value bound {o.bound:.6g} (1 = optimal among Gaussian matrix mechanisms)"
    loose = "" if o.exact else "; the bound is valid but not exact, so the true gap may be smaller"
    return f"optimality: {o.quantity} {o.value:.6g}, {what}: ratio {o.ratio:.6g}{loose}"


# -- plan ----------------------------------------------------------------------------------------
def cmd_plan(args: argparse.Namespace) -> int:
    say = Out(False)
    delta = _report_delta(args)
    if not args.target:
        _budget_kwargs(args)
    domain = _read_domain(args.domain)
    plan = _make_plan(args, domain)
    if _is_pure(plan):
        return _print_pure_plan(plan, args, say)
    warn_large_epsilon(plan.budget.epsilon(delta), delta)
    table = plan.marginal_table()
    table["marginal"] = table["marginal"].replace("", "total")  # named as in query's output
    if plan.is_plain:
        table = table.rename(columns={"queries": "cells"})
    if args.save:
        try:
            plan.to_json(args.save)
        except OSError as exc:
            raise CLIError(f"cannot write {args.save!r}: {exc.strerror or exc}") from None
    if args.report:
        _write_plan_report(plan, args.report, delta)
    if args.format == "json":
        out = plan.to_dict()
        out["privacy"].update({"epsilon": plan.epsilon(delta), "delta": delta})
        out["marginal_table"] = json.loads(table.to_json(orient="records"))
        try:
            out["lower_bound"] = plan.lower_bound_facts()
        except DPMatrixError:
            pass
        print(json.dumps(out, indent=1))
        return 0
    if args.format == "csv":
        print(table.to_csv(index=False), end="")
        return 0
    _describe_plan(plan, say, delta)
    say("")
    say(table.to_string(index=False))
    if args.target:
        say("")
        _describe_targets(plan, say)
    if args.save:
        say(f"\nplan saved to {args.save} (use it with: dpmatrix release DATA --plan {args.save} ...)")
    if args.report:
        say(f"report written to {args.report} (open it in a browser)")
    return 0


# -- compare -------------------------------------------------------------------------------------
def cmd_compare(args: argparse.Namespace) -> int:
    """Every applicable strategy / planner against the singular value bound (dm.compare)."""
    import pandas as pd

    from .planners.compare import compare as compare_all

    budget = _budget_kwargs(args)
    wk = _workload(args, _read_domain(args.domain))
    df = compare_all(wk, **budget)
    if args.format == "csv":
        print(df.to_csv(index=False), end="")
        return 0
    if args.format == "json":
        print(df.to_json(orient="records", indent=1))
        return 0
    b = df.attrs["lower_bound"]
    print(f"lower bound (weighted total variance): {b.total:.6g}"
          + ("" if b.exact else " (valid, not exact)") + "; ratio = weighted total variance / bound")
    with pd.option_context("display.width", 200, "display.max_colwidth", 70):
        print(df.drop(columns=["bound_exact"]).to_string(index=False, float_format=lambda v: f"{v:.6g}"))
    return 0


def _print_pure_plan(plan, args: argparse.Namespace, say: Out) -> int:
    """``dpmatrix plan --epsilon E --delta 0``: the strategy groups with their ε shares and
    variances, and the strategies compared by ``auto``."""
    import pandas as pd

    table = plan.table()
    if args.report:
        _write_plan_report(plan, args.report, 0.0)
    if args.save:
        try:
            Path(args.save).write_text(json.dumps(plan.to_dict(), indent=1) + "\n")
        except OSError as exc:
            raise CLIError(f"cannot write {args.save!r}: {exc.strerror or exc}") from None
    if args.format == "json":
        out = plan.to_dict()
        out["privacy"] = pure_summary(plan)
        out["groups_table"] = json.loads(table.to_json(orient="records"))
        print(json.dumps(out, indent=1))
        return 0
    if args.format == "csv":
        print(table.to_csv(index=False), end="")
        return 0
    _describe_plan(plan, say, 0.0)
    say("")
    say(table.to_string(index=False))
    if getattr(plan, "comparison", ()):
        say("\nstrategies compared (auto):")
        say(pd.DataFrame(list(plan.comparison)).to_string(index=False))
    if args.save:
        say(f"\nplan saved to {args.save} (use it with: dpmatrix release DATA --plan {args.save} ...)")
    if args.report:
        say(f"report written to {args.report} (open it in a browser)")
    return 0


# -- report --------------------------------------------------------------------------------------
def _write_plan_report(plan, path: str, delta: float) -> None:
    from .report import write_plan_report

    try:
        write_plan_report(plan, path, delta=delta)
    except OSError as exc:
        raise CLIError(f"cannot write the report {path!r}: {exc.strerror or exc}") from None


def write_release_report_into(out: Path) -> Path:
    """Write ``report.html`` into a finished release folder, under a temporary name first, so a
    failed report leaves the release as it was."""
    from .report import REPORT_FILE, write_release_report

    tmp = out / f".{REPORT_FILE}.partial"
    try:
        write_release_report(out, tmp)  # in the release folder: its links stand after the rename
        tmp.replace(out / REPORT_FILE)
    finally:
        tmp.unlink(missing_ok=True)
    return out / REPORT_FILE


def cmd_report(args: argparse.Namespace) -> int:
    from .report import write_release_report

    say = Out(args.quiet)
    folder = Path(args.release)
    try:
        path = write_release_report(folder, args.out, fairness=not args.no_fairness)
    except OSError as exc:
        target = args.out or str(folder / "report.html")
        raise CLIError(f"cannot write the report {target!r}: {exc.strerror or exc}") from None
    say(f"report written to {path} (open it in a browser)")
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


def _open_engine(args: argparse.Namespace, domain: Domain, say: Out, temp_directory: Path | None = None):
    import pandas as pd

    from .encode import read_csv_text
    from .engines import engine_for
    from .engines.duckdb_engine import detect_format
    from .errors import DataError

    path = Path(args.data)
    spark = args.engine == "spark"  # paths, URIs (hdfs://, s3a://) and table names: Spark checks
    if not spark and not any(ch in args.data for ch in "*?[") and not path.exists():
        raise CLIError(f"data file {args.data!r} does not exist")
    policy = _on_unknown(args.on_unknown)
    if args.engine == "spark":
        return _open_spark_engine(args, domain, policy, say)
    fmt = detect_format(args.data, args.data_format)
    csv_options = {"delim": args.delimiter} if args.delimiter else None
    if args.delimiter and fmt != "csv":
        raise CLIError("--delimiter applies to CSV files only")
    encoding = getattr(args, "encoding", "auto")
    say.note(f"reading {args.data} ({fmt}, encoding {encoding}) with {args.engine} ...")
    if args.engine == "duckdb":
        return engine_for(
            args.data, domain, encoding=encoding, format=fmt, on_unknown=policy,
            csv_options=csv_options, memory_limit=args.memory_limit, temp_directory=temp_directory,
        )  # fmt: skip
    # in-memory engine: the whole file is loaded with pandas (small data only)
    try:
        if fmt == "csv":
            raw = read_csv_text(args.data, domain, delimiter=args.delimiter)
        else:
            raw = pd.read_parquet(args.data)
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read {args.data!r}: {exc}") from None
    return engine_for(raw, domain, encoding=encoding, on_unknown=policy)


def _open_spark_engine(args: argparse.Namespace, domain: Domain, policy, say: Out):
    from .engines.spark_engine import SparkEngine, detect_spark_format

    conf: dict[str, str] = {}
    for item in args.spark_conf or []:
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise CLIError(f"--spark-conf: bad entry {item!r}; write key=value, e.g. spark.executor.memory=8g")
        conf[k.strip()] = v.strip()
    fmt = detect_spark_format(args.data, args.data_format)
    if args.delimiter and fmt != "csv":
        raise CLIError("--delimiter applies to CSV files only")
    say.note(f"reading {args.data} ({fmt}) with spark ...")  # the master is not echoed or recorded
    return SparkEngine(
        args.data, domain, encoding="raw", format=fmt, on_unknown=policy, master=args.spark_master,
        conf=conf, csv_options={"sep": args.delimiter} if args.delimiter else None,
    )  # fmt: skip


class CountingBar:
    """Wraps a data engine to show a "counting" progress bar (marginal tables counted from the
    data) next to the "measuring" bar of :func:`dpmatrix.measure`."""

    def __init__(self, engine: Any, plan: Any, enabled: bool):
        from tqdm.auto import tqdm

        from .engines import maximal_sets

        if hasattr(plan, "closure"):
            measured = [s for s, m in zip(plan.closure.sets, plan.measured) if m]
        else:  # a plan that lists its mechanisms
            measured = list({m.attrs for m in plan.mechanisms()[1]})
        self._engine = engine
        self.bar = tqdm(total=len(maximal_sets(measured)), desc="counting", unit="marginal",
                        disable=not enabled)  # fmt: skip

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
        self.bar.update(len(out))
        return out

    def close(self) -> None:
        self.bar.close()
        close = getattr(self._engine, "close", None)
        if close is not None:
            close()


def _check_options(args: argparse.Namespace) -> dict[str, Any]:
    """Every option of ``release``/``demo`` checked before any file is read (issue 16 item 12)."""
    from .engines.duckdb_engine import detect_format
    from .release import _check_formats
    from .sizing import DEFAULT_MAX_CELLS

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

    from .ledger import Ledger
    from .plan_file import load_plan
    from .planners.dispatch import plan as make_plan
    from .release import MANIFEST, TABLES_README, _sibling, check_target, output_lock, recover_output, write_release
    from .release_tables import check_columns
    from .sizing import check_size, describe_size, estimate_size

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
    warn_large_epsilon(plan.budget.epsilon(delta), delta)
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
        reservation = _reserve(ledger, opts, plan, str(args.data), out, say)
        work = _sibling(out.absolute(), "work")
        try:
            with reservation as _charge:
                work.mkdir()
                # the OS CSPRNG (rng=None) unless a testing seed was given (issue 16: secure by
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


def _reserve(ledger, opts: dict, plan, data: str, out: Path, say: Out):
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
    say.note(f"ledger {ledger.path}: dataset {opts['dataset']!r} has spent rho = {before.rho:.6g}{cap} "
             f"before this release of rho = {float(plan.rho):.6g}")
    return charge


def cmd_release(args: argparse.Namespace) -> int:
    from .postprocess import postprocess, write_postprocessed

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


def cmd_synth(args: argparse.Namespace) -> int:
    import numpy as np

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
    import pandas as pd

    if fmt == "csv":
        print(df.to_csv(index=False), end="")
    elif fmt == "json":
        print(df.to_json(orient="records", indent=1))
    else:
        with pd.option_context("display.max_rows", None, "display.width", 200):
            print(df.to_string(index=False))


def _print_saved(table, fmt: str) -> None:
    """A saved table (:class:`~dpmatrix.release.SavedTable`) printed as :func:`_print_table`
    prints its DataFrame, without pandas for the table and CSV formats."""
    from .table_text import to_csv, to_string

    if fmt == "csv":
        print(to_csv(table.columns, table.kinds, table.values), end="")
    elif fmt == "json":
        _print_table(table.to_pandas(), fmt)
    else:
        print(to_string(table.columns, table.kinds, table.values))


def _marginal_header(label: str, source: str, level: float) -> str:
    return f"marginal {label} ({source}); estimate, variance, std, {level:.0%} confidence interval [lower, upper]"


def cmd_query(args: argparse.Namespace) -> int:
    from .release import load_release, read_saved_table

    say = Out(args.quiet or args.format != "table")
    names = _marginal_names(args)  # checked before the release is read
    if args.level is not None and not (math.isfinite(args.level) and 0 < args.level < 1):
        raise CLIError(f"--level must be strictly between 0 and 1, got {args.level!r}")
    verify = not args.no_verify
    if names is not None:  # a saved table is printed from its file and the manifest alone
        saved = read_saved_table(args.release, names, verify=verify, level=args.level)
        if saved is not None:
            say(_marginal_header(",".join(saved.attributes) or "total", "saved table", saved.level))
            say(fmt_privacy(saved.privacy))
            _print_saved(saved, args.format)
            if "estimate" in saved.columns:
                _say_negatives(sum(1 for v in saved.column("estimate") if v < 0), say)
            return 0
    rel = load_release(args.release, verify=verify)
    p = rel.privacy
    if names is None:
        import pandas as pd

        say(f"{rel.path}: dpmatrix {rel.manifest['library']['version']} release created {rel.manifest['created']}")
        say(fmt_privacy(p))
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
    key = rel.domain.resolve(names)
    level = rel.level if args.level is None else args.level
    df = rel.marginal(key, level)  # not saved at this level: reconstructed
    label = ",".join(rel.domain.names_of(key)) or "total"
    say(_marginal_header(label, "reconstructed from the saved measurements", level))
    say(fmt_privacy(p))
    _print_table(df, args.format)
    _negative_note(df, say)
    return 0


def _marginal_names(args: argparse.Namespace) -> list[str] | None:
    """Attribute names from --marginal (comma-separated) or --marginal-json (a JSON list of
    names: any characters, e.g. '["a,b", "c;d"]'); ``None`` when neither is given."""
    if args.marginal is not None and args.marginal_json is not None:
        raise CLIError("give --marginal or --marginal-json, not both")
    if args.marginal_json is not None:
        names = loads_strict(args.marginal_json, CLIError, "--marginal-json")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise CLIError(f"--marginal-json must be a JSON list of attribute names, got {args.marginal_json!r}")
        return names
    if args.marginal is None:
        return None
    text = args.marginal.strip()
    return [] if text.lower() in ("total", "()", "") else [n.strip() for n in text.split(",")]


# -- demo ----------------------------------------------------------------------------------------
def shipped_adult() -> tuple[Domain, Path]:
    """The Adult data shipped with the package (see dpmatrix/data/README.md for attribution)."""
    from importlib.resources import files

    base = files("dpmatrix") / "data"
    return Domain.from_json(base / "adult-domain.json"), Path(str(base / "adult.csv"))


def cmd_demo(args: argparse.Namespace) -> int:
    dom, path = shipped_adult()
    say = Out(args.quiet)
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not args.overwrite:
        raise CLIError(f"{args.out!r} exists; pass --overwrite to replace an earlier release there, "
                       "or choose another --out")
    say(f"dpmatrix {__version__} demo: release of the shipped UCI Adult data ({len(dom)} attributes)")
    say(f"same as: dpmatrix release {path} --domain {path.with_name('adult-domain.json')} "
        f"--encoding codes --workload 'all:<={args.k}' --rho {args.rho} --objective {args.objective} --out {args.out}")
    rargs = argparse.Namespace(
        data=str(path), plan=None, workload=f"all:<={args.k}", marginals=None, workload_file=None,
        query_types=None, attributes=None, rho=args.rho, epsilon=None, delta=None, mu=None,
        objective=args.objective, construction="auto", engine="duckdb", data_format=None, delimiter=None,
        on_unknown="error", encoding="codes", round=args.round, memory_limit=None, level=0.95, tables="parquet", out=args.out,
        seed=args.seed, noise=args.noise, spill=False, max_cells=None, dataset="dpmatrix-demo-adult",
        ledger=args.ledger, no_ledger=args.no_ledger, no_report=args.no_report,
    )  # fmt: skip
    # --overwrite replaces an earlier dpmatrix release, never any other folder
    meas = run_release(rargs, dom, say, overwrite=args.overwrite)
    show = ("sex", "income>50K")
    say(f"\nmarginal {','.join(show)} with 95% confidence intervals "
        f"(also: dpmatrix query {args.out} --marginal '{','.join(show)}'):")
    table = meas.marginal(show)
    if args.round is not None:
        table = table.round({c: args.round for c in ("estimate", "variance", "std", "lower", "upper")})
    say(table.to_string(index=False))
    _negative_note(table, say)
    return 0


# -- infer-domain --------------------------------------------------------------------------------
def cmd_infer_domain(args: argparse.Namespace) -> int:
    from .engines.infer import infer_domain

    path = Path(args.data)
    if not path.exists():
        raise CLIError(f"data file {args.data!r} does not exist")
    cols = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    if args.bins < 1:
        raise CLIError(f"--bins must be at least 1, got {args.bins}")
    dom = infer_domain(str(path), cols, max_labels=args.max_labels, n_bins=args.bins,
                       binning=args.binning)  # warns
    out = Path(args.out)
    if out.exists() and not args.overwrite:
        raise CLIError(f"{args.out!r} exists; choose another --out or pass --overwrite")
    try:
        out.write_text(json.dumps(dom.to_dict(), indent=1) + "\n")
    except OSError as exc:
        raise CLIError(f"cannot write {args.out!r}: {exc.strerror or exc}") from None
    say = Out(args.quiet)
    binned = [a for a in dom.attributes if a.bins is not None]
    for a in binned:
        edges = ", ".join(f"{e:g}" for e in a.bins)
        say(f"{a.name}: {a.size} {args.binning} bins, edges [{edges}] (more than {args.max_labels} "
            "distinct values or fractions; change with --bins, --binning width|quantile, "
            "--max-labels, or edit the edges)")
    say(f"wrote a domain of {len(dom)} attributes ({len(binned)} binned) to {args.out}: review it "
        "(and remove anything that reveals individual records) before using it with --domain")
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
    _add_targets(p)
    p.add_argument("--save", metavar="PLAN.json", help="also save the plan (for release --plan)")
    p.add_argument("--report", metavar="PLAN.html",
                   help="also write an HTML report of the plan (privacy, accuracy, fairness, strategy)")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format")
    p.set_defaults(func=cmd_plan)

    c = sub.add_parser("compare", help="every strategy and planner against the lower bound (reads no data)",
                       description="One row per classic strategy (small domains), LSA, ResidualPlanner/RP+, "
                       "QuerySmasher and the pure epsilon-DP planner: total / max variance and the ratio "
                       "to the singular value bound (Li & Miklau). Reads no data.")
    c.add_argument("--domain", required=True, metavar="D.json", help="domain file ({attr: size} or the rich form)")
    _add_workload(c)
    _add_budget(c)
    c.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format")
    c.set_defaults(func=cmd_compare)

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
    q.add_argument("--marginal-json", metavar="JSON",
                   help='attributes as a JSON list, for names with any characters: \'["a,b", "c;d"]\'')
    q.add_argument("--no-verify", action="store_true",
                   help="skip the SHA-256 checks of the release's files (paths and the stated privacy are always checked)")
    q.add_argument("--level", type=float, help="confidence level (default: the release's)")
    q.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format")
    _add_quiet(q)
    q.set_defaults(func=cmd_query)

    h = sub.add_parser("report", help="write the HTML report of a release folder",
                       description="Write a self-contained HTML report of a release: the privacy "
                       "guarantee in every unit, the noise and its randomness source, accuracy, cell "
                       "fairness, the strategy's budget shares, and the small marginals as tables and "
                       "charts (larger ones linked). Reads the manifest and the saved tables only.")
    h.add_argument("release", metavar="DIR", help="release folder")
    h.add_argument("--out", metavar="REPORT.html",
                   help="file to write (default: report.html in the release folder; links to the "
                   "release's files are relative to it)")
    h.add_argument("--no-fairness", action="store_true",
                   help="skip the sum_var / max_var comparison (it plans the workload a second time)")
    _add_quiet(h)
    h.set_defaults(func=cmd_report)

    d = sub.add_parser("demo", help="release the shipped Adult data (same code path as 'release')",
                       description="Release all marginals on at most --k attributes of the UCI Adult data "
                       "shipped with dpmatrix (48,842 records; codes shown with their UCI labels), by the "
                       "same code path as 'dpmatrix release' (the equivalent command is printed), then "
                       "print the sex x income table with its confidence intervals. The budget is "
                       "charged to the ledger under the dataset 'dpmatrix-demo-adult'.")
    d.add_argument("--out", default="demo-release", help="output folder (default: demo-release)")
    d.add_argument("--overwrite", action="store_true", help="replace an earlier release in --out")
    d.add_argument("--k", type=int, default=2, help="all marginals on at most k attributes (default 2)")
    d.add_argument("--rho", type=float, default=0.5, help="zCDP budget (default 0.5)")
    d.add_argument("--objective", choices=["sum_var", "max_var"], default=DEFAULT_OBJECTIVE,
                   help="max_var (default) keeps small tables accurate; sum_var minimizes total variance")
    d.add_argument("--seed", type=int, default=None,
                   help="TESTING ONLY: seed for reproducible noise (a real release must not fix it)")
    _add_ledger(d, dataset=False)
    d.add_argument("--no-report", action="store_true", help="do not write report.html into the folder")
    _add_round(d)
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
    i.add_argument("--bins", type=int, default=10,
                   help="number of bins for other numeric columns (default 10)")
    i.add_argument("--binning", choices=["width", "quantile"], default="width",
                   help="bin edges: equal width between the minimum and maximum (default), or the "
                   "data's quantiles (about equal counts); both are derived from the data and leak")
    i.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    _add_quiet(i)
    i.set_defaults(func=cmd_infer_domain)

    led = sub.add_parser("ledger", help="the privacy-budget ledger: show spends, set a dataset's cap",
                         description="Every release is charged to a ledger before any noise is drawn "
                         "(default file: $DPMATRIX_LEDGER or ~/.local/share/dpmatrix/ledger.sqlite3).")
    lsub = led.add_subparsers(dest="ledger_command", required=True, metavar="ACTION")
    ls = lsub.add_parser("show", help="totals per dataset (and every spend with --all)")
    ls.add_argument("--ledger", metavar="PATH", help="ledger file")
    ls.add_argument("--all", action="store_true", help="also list every release")
    ls.add_argument("--delta", type=float, help="delta at which the rho totals are shown as epsilon (default 1e-9)")
    ls.set_defaults(func=cmd_ledger_show)
    lc = lsub.add_parser("set-cap", help="set a dataset's total budget (releases beyond it are refused)")
    lc.add_argument("dataset", metavar="NAME", help="dataset name (as given to release --dataset)")
    lc.add_argument("--rho", type=float, help="cap on the total rho (zCDP)")
    lc.add_argument("--epsilon", type=float, help="cap on the total pure epsilon")
    lc.add_argument("--ledger", metavar="PATH", help="ledger file")
    lc.set_defaults(func=cmd_ledger_set_cap)
    for command in [*sub.choices.values(), *lsub.choices.values()]:
        # --debug after the command too; SUPPRESS keeps a --debug given before it
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="show Python tracebacks on errors")
    return parser


def _add_ledger(p: argparse.ArgumentParser, dataset: bool = True) -> None:
    g = p.add_argument_group("privacy-budget ledger")
    g.add_argument("--ledger", metavar="PATH",
                   help="ledger file (default: $DPMATRIX_LEDGER, else ~/.local/share/dpmatrix/ledger.sqlite3)")
    if dataset:
        g.add_argument("--dataset", metavar="NAME",
                       help="name the spend is charged to (default: the data file's name without suffix)")
    g.add_argument("--no-ledger", action="store_true", help="do not record this release (warned)")


# -- ledger --------------------------------------------------------------------------------------
def cmd_ledger_show(args: argparse.Namespace) -> int:
    import pandas as pd

    from .ledger import Ledger
    from .privacy import epsilon_from_zcdp

    delta = _report_delta(args)
    led = Ledger(args.ledger)
    rows = led.datasets()
    print(f"ledger {led.path}: {len(rows)} dataset(s)")
    for d in rows:
        eps = epsilon_from_zcdp(d.rho, delta) if d.rho > 0 else 0.0
        cap = f"cap rho {d.rho_cap:.6g}" if d.rho_cap is not None else "no rho cap"
        ecap = f", cap pure epsilon {d.epsilon_cap:.6g}" if d.epsilon_cap is not None else ""
        print(f"{d.dataset}: {d.releases} release(s); rho = {d.rho:.6g} (zCDP, sum; epsilon = {eps:.6g} "
              f"at delta = {delta:.3g}); pure epsilon = {d.epsilon:.6g} (sum); {cap}{ecap}")
    if args.all:
        print(pd.DataFrame(led.rows()).to_string(index=False) if led.rows() else "(no releases)")
    return 0


def cmd_ledger_set_cap(args: argparse.Namespace) -> int:
    from .ledger import Ledger

    if args.rho is None and args.epsilon is None:
        raise CLIError("give --rho and/or --epsilon")
    for n in ("rho", "epsilon"):
        v = getattr(args, n)
        if v is not None and not (math.isfinite(v) and v >= 0):
            raise CLIError(f"--{n} must be a non-negative number, got {v!r}")
    led = Ledger(args.ledger)
    led.set_cap(args.dataset, rho=args.rho, epsilon=args.epsilon)
    s = led.spent(args.dataset)
    print(f"dataset {s.dataset!r}: cap rho = {s.rho_cap}, pure epsilon = {s.epsilon_cap}; spent so far "
          f"rho = {s.rho:.6g}, pure epsilon = {s.epsilon:.6g} in {s.releases} release(s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():
        # every warning (values remapped on request, inferred domain, --seed) is shown, each on
        # one line, even when the same warning was already shown earlier in the process
        warnings.simplefilter("always")
        warnings.showwarning = _showwarning
        return _run(args)


def _quiet_broken_pipe() -> int:
    """The reader of stdout went away (``dpmatrix query ... | head``): exit quietly. stdout is
    pointed at /dev/null so that the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return 0


def _run(args: argparse.Namespace) -> int:
    try:
        rc = int(args.func(args) or 0)
        sys.stdout.flush()
        return rc
    except BrokenPipeError:
        return _quiet_broken_pipe()
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
