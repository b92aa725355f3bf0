"""``dpmatrix demo``: ``release`` on the shipped UCI Adult data, then show one marginal."""

from __future__ import annotations

import argparse
from pathlib import Path

from .._defaults import DEFAULT_OBJECTIVE
from .._domain import Domain
from .._version import __version__
from ._common import CLIError
from ._options import _add_ledger, _add_noise, _add_quiet, _add_round
from ._output import Out, _negative_note
from ._release import run_release


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


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``demo`` command and its options, added to the ``dpmatrix`` parser's subcommands."""
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
